"""`toolkit tune`: the knob search of toolkit.bench.tune as a command (registered on the main group)."""

from __future__ import annotations

import itertools
import math

import click

from toolkit.cli.common import (
    EPILOG,
    _err,
    _load,
    _store,
    builds_results_option,
    echo_json,
    given_options,
    json_option,
    matrix_option,
)
from toolkit.core import invocation
from toolkit.core.errors import BadInput


@click.command(epilog=EPILOG)
@matrix_option
@builds_results_option
@json_option
@click.option(
    "--image", "-i", "image", required=True, metavar="NAME", help="The image to tune (a llama-bench image)."
)
@click.option(
    "--model",
    "-m",
    "model",
    default=None,
    metavar="NAME",
    help="The model (default: the first the image runs).",
)
@click.option(
    "--axis",
    type=click.Choice(["prefill", "decode", "depth"]),
    required=True,
    help="prefill: pp TOKENS (prompt processing); decode: tg TOKENS (generation); depth: pp TOKENS at "
    "every depth of the model's `depth:` sweep, one n_ubatch for them all (--write: into that block).",
)
@click.option(
    "--tokens",
    type=click.IntRange(min=1, max=1_000_000),
    default=None,
    metavar="N",
    help="Prompt length (prefill) or tokens generated (decode). Default: the matrix's largest.",
)
@click.option(
    "--knob",
    "knobs",
    multiple=True,
    metavar="NAME",
    help="Knob to search (repeatable): n_ubatch, n_batch, threads (CPU images), flash_attn; --axis depth "
    "searches n_ubatch only, --axis decode flash_attn and threads (no batch size changes tg). Default: "
    "n_ubatch (decode: flash_attn), plus threads on CPU images (not for depth).",
)
@click.option(
    "--values",
    "values",
    multiple=True,
    metavar="KNOB=V1,V2",
    help="Values of a knob, e.g. n_ubatch=512,2048 (default: powers of two around the matrix's).",
)
@click.option(
    "--budget",
    default="20m",
    show_default=True,
    metavar="DURATION",
    help="Wall-clock budget (90s, 20m, 1h): no new trial starts after it.",
)
@click.option("--allow-software-gpu", is_flag=True, help="Accept Mesa lavapipe for Vulkan images.")
@click.option(
    "--allow-concurrent",
    is_flag=True,
    envvar="TOOLKIT_ALLOW_CONCURRENT",
    show_envvar=True,
    help="Run although another toolkit benchmark is running on the same engine or writing the same "
    "results folder (trials flagged `concurrent`; default: refuse, exit 9).",
)
@click.option(
    "--write",
    "write_diff",
    is_flag=True,
    help="Also print the matrix.yaml change that would make the best setting the default (not applied).",
)
def tune(
    matrix_path,
    results_dir,
    as_json,
    image,
    model,
    axis,
    tokens,
    knobs,
    values,
    budget,
    allow_software_gpu,
    allow_concurrent,
    write_diff,
):
    """Search the knobs that change one axis of IMAGE x MODEL with successive halving, within a budget.

    Every trial is an ordinary bench run of one case, stored in results/ (`toolkit report` shows it,
    flagged tune-trial, where no bench run measured its test; `toolkit compare` only where a side holds
    trials alone); the best setting is computed from the stored records of that case and printed with
    its gain over the matrix's default setting and the evidence (median, min–max, trials). Example:

        toolkit tune -i cpu --axis prefill --tokens 512 --knob n_ubatch --budget 10m
    """
    from toolkit.bench import tune as tune_mod
    from toolkit.bench import tune_depth

    lm = _load(matrix_path)
    store = _store(lm, results_dir, "tune")
    invocation.own(given_options(click.get_current_context(), ("matrix_path", "results_dir", "as_json")))
    (spec,) = lm.select_images((image,))
    if spec.runner != "llama-bench":
        raise BadInput(f"--image {image}: tune searches llama-bench knobs; {image} runs {spec.runner}")
    mspec = tune_mod.model_for(lm, model, spec)
    lm_t = _depth_matrix(lm, mspec) if axis == "depth" else lm
    base = lm_t.m.bench
    n = tokens or max(base.n_prompt if axis != "decode" else base.n_gen)
    space = _search_space(spec, base, knobs, values, n, axis)
    res = tune_mod.search(
        lm_t,
        axis=axis,
        tokens=n,
        knobs=space,
        budget_s=tune_mod.parse_budget(budget),
        run_trial=_trial_runner(
            lm, spec, mspec, store, allow_software_gpu=allow_software_gpu, allow_concurrent=allow_concurrent
        ),
        on_note=_err,
        rank=tune_depth.best_over_depth if axis == "depth" else None,
    )
    diff = _diff(lm, res, mspec, axis) if write_diff else None
    if as_json:
        echo_json(_tune_json(res, diff))
        return
    click.echo(tune_mod.format_result(res))
    if write_diff:
        click.echo("\n" + (diff or "no matrix change to propose"))


def _diff(lm, res, mspec, axis: str) -> str:
    """--write's proposal: the model's depth.n_ubatch (axis depth), else the bench axes."""
    from toolkit.bench import tune as tune_mod
    from toolkit.bench import tune_depth

    if axis == "depth":
        return tune_depth.depth_matrix_diff(lm.path, res, mspec.name)
    return tune_mod.matrix_diff(lm.path, res)


def _depth_matrix(lm, mspec):
    """`lm` with its bench axes replaced by `mspec`'s depth sweep (every depth, the sweep's micro-batch:
    the default the search measures against). BadInput for a model without `depth:`."""
    from toolkit.matrix.api import LoadedMatrix, depth_axes

    if mspec.depth is None:
        raise BadInput(
            f"{lm.path}: --axis depth: model {mspec.name!r} has no `depth:` block (models[].depth, "
            "docs/running.md 'Depth curves'); add one or pass --model with one"
        )
    axes = depth_axes(lm.m.bench, mspec.depth)
    return LoadedMatrix(lm.m.model_copy(update={"bench": axes}), lm.path, confined=lm.confined)


def _tune_json(res, diff: str | None) -> dict:
    """`tune --json`'s result: the decision for the axis, {session, axis, test, best, default (each
    {candidate: {knob: value}, median, low, high (tok/s; axis depth: geometric means over the depths),
    trials, samples, effective_ubatch}), per_depth ({depth: ranking at that depth}; {} but for axis depth), gain
    (best / default - 1; null without both), no_effect, undecided (why nothing is proposed; where the
    default is best, why it is no better than the runner-up), notes, ranking, matrix_diff (the --write
    diff, "" when none is proposed; null without --write)}."""

    def evidence(e) -> dict | None:
        return None if e is None else {**vars(e), "candidate": dict(e.candidate.values)}

    return {
        "session": res.session,
        "axis": res.axis,
        "test": res.test,
        "best": evidence(res.best),
        "default": evidence(res.default),
        "gain": res.gain,
        "no_effect": res.no_effect,
        "undecided": res.undecided,
        "notes": res.notes,
        "ranking": [evidence(e) for e in res.ranking],
        "per_depth": {d: [evidence(e) for e in p.ranking] for d, p in res.per_depth.items()},
        "matrix_diff": diff,
    }


def _search_space(
    spec, base, knobs: tuple[str, ...], values: tuple[str, ...], n: int, axis: str
) -> dict[str, list[int]]:
    """{knob: values to try}: the knobs named (default: the axis's, tune.knob_values) with the values
    around the matrix's, each replaced by its `--values KNOB=V1,V2`. BadInput for a knob the axis does
    not search (also given by --values alone), a value of a knob not searched, a value that is no
    integer, or one outside the knob's range (tune.KNOB_RANGE: flash_attn -1, 0, 1)."""
    from toolkit.bench import tune as tune_mod

    space = tune_mod.knob_values(spec, base, list(knobs), n, axis)
    for v in values:
        k, _, vals = v.partition("=")
        if k not in space:
            try:  # a knob this axis or image refuses says so (--knob would be refused too)
                tune_mod.knob_values(spec, base, [k], n, axis)
            except BadInput as refused:
                raise BadInput(f"--values {v!r}: {refused}") from None
            raise BadInput(
                f"--values {v!r}: {k!r} is not a searched knob ({', '.join(space)}); add --knob {k}"
            )
        try:
            space[k] = sorted({int(x) for x in vals.split(",") if x.strip()})
        except ValueError:
            raise BadInput(f"--values {v!r}: give integers, e.g. {k}=512,2048") from None
        low, high = tune_mod.KNOB_RANGE[k]
        if not space[k] or space[k][0] < low or space[k][-1] > high:
            raise BadInput(f"--values {v!r}: {k} takes whole numbers from {low} to {high}")
    crossed = math.prod(len(x) for x in space.values())
    if crossed > tune_mod.MAX_CANDIDATES:
        raise BadInput(
            f"--values: {' x '.join(f'{k} {len(x)}' for k, x in space.items())} = {crossed:,} settings to try, "
            f"more than {tune_mod.MAX_CANDIDATES:,} (each at least one trial): give fewer values"
        )
    return space


def _trial_runner(lm, spec, mspec, store, *, allow_software_gpu: bool, allow_concurrent: bool):
    """tune_mod.search's `run_trial(axes, extra)`: one strict bench run of `spec` x `mspec` over the
    bench axes given (the tuned test alone: `mspec` without its `depth:` sweep, whose tests the trial
    did not ask for; axis depth measures its depths in those axes), run `<session>-tN` (the Nth trial:
    `report --run SESSION` and compare read them all, index.run_begun), returning its stored records;
    BadInput when the trial did not measure. The correctness canary runs in a session's first trial
    of each of its inputs (threads, GPU layers, flash attention: what the micro-batch and batch knobs
    leave alone) and again only until it passed: a trial after a passed one measures alone."""
    from toolkit.bench import run as bench
    from toolkit.bench.runners.base import BenchOptions
    from toolkit.matrix.api import LoadedMatrix

    alone = mspec.model_copy(update={"depth": None})
    passed: set[tuple] = set()  # the canary inputs whose canary passed in this session
    trials = itertools.count(1)

    def run_trial(axes, extra):
        inputs = (axes.threads, axes.n_gpu_layers[0], axes.flash_attn[0])
        if inputs in passed:
            axes = axes.model_copy(update={"canary": False})
        lm2 = LoadedMatrix(lm.m.model_copy(update={"bench": axes}), lm.path, confined=lm.confined)
        opts = BenchOptions(
            record_extra=extra,
            allow_software_gpu=allow_software_gpu,
            strict=True,
            allow_concurrent=allow_concurrent,
            again=TUNE_AGAIN.format(tune=invocation.again("tune")),  # bench's --resume: the whole matrix
            run_id=f"{extra['tune']['session']}-t{next(trials)}",  # the session's id names them all (--run)
        )
        outcomes = bench.run_bench(lm2, [spec], [alone], store, opts)
        bad = [o for o in outcomes if o.status not in ("ok", "note")]
        if bad:
            raise BadInput(f"tune trial (round {extra['tune']['round']}) {bad[0].status}: {bad[0].reason}")
        from toolkit.results import index as resultindex

        # the trial's records through the query index (its run id), not by reading every stored record
        recs = resultindex.run_records(store, opts.run_id)
        if recs and all(((r.model_extra or {}).get("canary") or {}).get("status") == "ok" for r in recs):
            passed.add(inputs)
        return recs

    return run_trial


TUNE_AGAIN = "`{tune}` searches again (tune has no --resume; the trials measured so far stay in results/)"
"""An interrupted tune's last words (BenchOptions.again, with this `toolkit tune` and its options:
invocation.again), in place of its trial's `toolkit bench --resume`, which measured every image and
model of the matrix at its own axes, not the search."""
