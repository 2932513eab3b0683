"""Orchestration of `toolkit bench`: decide once (`decide`) what happens to every (image, model) pair
(the image's devices here, its build, the device profile, the model's format and file, the cases its
runner will measure), count the plan from those decisions, then carry them out in order: each `run`
goes to its runner (toolkit.core.registry: llama-bench, vLLM, SGLang) as a RunContext.

Before anything runs: the plan line, results/ writable, one benchmark per engine, model files checked
by their runner's preflight. Exit paths say what was saved. The module never prints: progress goes to
the `events` callback, which the CLI renders. Shared runner scaffolding (BenchOptions, Outcome,
model_sha256, resolve_model...) lives in toolkit.bench.runners.base and is re-exported here.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from toolkit.bench import guard
from toolkit.bench.build_choice import (  # re-exported: callers know these as bench.X
    BuildChoice,
    choose_build,
    gfx_targets,
    gone,
    unbuilt,
)
from toolkit.bench.runners.base import (  # re-exported: callers know these as bench.X
    BenchOptions,
    Case,
    Events,
    Outcome,
    RunContext,
    check_sha,
    memory_limit,
    model_here,
    model_sha256,
    resolve_model,
)
from toolkit.core import registry as runners
from toolkit.core import signals
from toolkit.core.errors import BadInput, EngineUnavailable, FileSystemError, RunInterrupted
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.host import info as hostinfo
from toolkit.models.tiny import ensure_model_file
from toolkit.results.records import ResultStore
from toolkit.spec.matrix import CASE_DEFAULTS, ImageSpec, LoadedMatrix, ModelSpec

__all__ = [
    "BenchOptions",
    "Events",
    "Outcome",
    "RunContext",
    "model_sha256",
    "resolve_model",
    "run_bench",
    "choose_build",
    "plan_run",
    "BuildChoice",
    "CONFIRM_CASES",
]


CONFIRM_CASES = 1000
"""A run of more test cases than this (all images x models, every runner's `cases`) needs --yes."""


def run_bench(
    lm: LoadedMatrix,
    images: list[ImageSpec],
    models: list[ModelSpec],
    store: ResultStore,
    opts: BenchOptions,
    events: Events = lambda *a, **k: None,
) -> list[Outcome]:
    """Benchmark every selected image with every selected model that its runner accepts.

    Before anything runs: the plan (case count, estimated duration; more than CONFIRM_CASES cases
    need opts.yes, else BadInput), results/ writable (FileSystemError, exit 8), one benchmark per
    results folder (results/.lock) and per engine (ConcurrentRun, exit 9, unless
    opts.allow_concurrent; leftover containers of runs that are gone are removed), model files
    checked (BadInput). Every record is written as soon as its
    test completes. Exit paths say what was saved, counted: Ctrl-C/SIGTERM -> RunInterrupted (130),
    the engine gone -> EngineUnavailable (5), a results write failing -> FileSystemError (8).
    `events("note", text=...)` carries the plan and guard notes.
    """
    gpus = devices.detect_gpus()
    if not opts.dry_run:  # a dry run reads no results and checks no model file
        memory_limit(lm, opts)  # a bad --memory fails before anything starts
        for model in models:  # bad input (model files, checkpoint vs matrix) fails before the engine is asked
            _check_model_before_run(lm, model, images)
    decisions = decide(lm, images, models, store, gpus, opts)
    host: dict[str, Any] = {}
    guards: tuple[guard.RunGuard, guard.ResultsLock] | None = None
    if opts.dry_run:  # the case count and, from earlier runs, the time: what the real run would say first
        events("note", text=plan_run(lm, decisions, store) or "plan: no test case would run here")
    else:
        _confirm_plan(lm, decisions, store, opts, events)
        guard.check_writable(store.root)
        host = _host_facts()
        guards = rg, lock = _take_guards(store, opts, events)
        opts.saver = guard.Saver(store, concurrent=lambda: rg.others() + lock.others())
    saver = opts.saver or guard.Saver(store)
    outcomes: list[Outcome] = []
    try:
        for d in decisions:
            outcomes += _execute(d, host, events)
    except KeyboardInterrupt:  # a container created just before Ctrl-C is not yet ours to remove
        signals.hold_for_stop()
        raise _interrupted(opts.run_id, saver) from None
    except FileSystemError as err:
        raise FileSystemError(f"{err}; {saver.summary()}") from None
    except Exception as err:  # the engine gone: EngineLost from a running container, or any later call
        if opts.dry_run or not (isinstance(err, EngineUnavailable) or engine.is_connection_error(err)):
            raise
        raise _engine_gone(err, saver) from None
    finally:
        for held in guards or ():
            held.release()
    return outcomes


def _confirm_plan(
    lm: LoadedMatrix, decisions: list[Decision], store: ResultStore, opts: BenchOptions, events: Events
) -> None:
    """Say the plan line; BadInput for more than CONFIRM_CASES cases without opts.yes."""
    plan = plan_run(lm, decisions, store)
    if plan:
        events("note", text=plan)
    if _cases_total(lm, decisions) > CONFIRM_CASES and not opts.yes:
        raise BadInput(
            f"{lm.path}: bench: {plan}; that is more than {CONFIRM_CASES} test cases: pass --yes to run "
            "them, or cut the axes"
        )


def _host_facts() -> dict[str, Any]:
    """The host facts every record carries, with the engine's; results get published: only the
    parameters that change numbers are kept (no kernel command line, no hostname)."""
    host = hostinfo.host_facts()
    host.pop("cmdline", None)
    host.pop("hostname", None)
    host["docker"] = engine.engine_info(buildx=False)
    return host


def _take_guards(
    store: ResultStore, opts: BenchOptions, events: Events
) -> tuple[guard.RunGuard, guard.ResultsLock]:
    """One benchmark per results folder (whatever its engine), then one per engine: both started
    (ConcurrentRun unless opts.allow_concurrent), returned in the order they are released; the lock is
    released again if the engine's guard cannot start."""
    engine_id = engine.engine_id()
    lock = guard.ResultsLock(store.root, opts.run_id, engine_id)
    lock.start(allow_concurrent=opts.allow_concurrent, note=lambda text: events("note", text=text))
    try:
        rg = guard.RunGuard(opts.run_id, engine_id)
        rg.start(allow_concurrent=opts.allow_concurrent, note=lambda text: events("note", text=text))
    except BaseException:
        lock.release()
        raise
    return rg, lock


def _interrupted(run_id: str, saver: guard.Saver) -> RunInterrupted:
    """The error a Ctrl-C or SIGTERM stops the run with, once the run's containers are removed (or
    could not be), saying what was saved."""
    try:
        engine.remove_orphans(run_id=run_id)
        removed = "the toolkit's containers were removed"
    except Exception as err:  # the engine may be what went away
        removed = f"its containers could not be removed ({str(err)[:120]}); the next run removes them"
    # signals stay held: a further Ctrl-C must not kill the process while it reports and exits
    return RunInterrupted(
        f"interrupted: {removed}; {saver.summary()}; `toolkit bench --resume` continues "
        "where this run stopped"
    )


def _engine_gone(err: Exception, saver: guard.Saver) -> EngineUnavailable:
    """The error the run stops with when the engine went away (`err`), saying what was saved."""
    why = (
        str(err)
        if isinstance(err, EngineUnavailable)
        else f"{engine.engine_label()} connection lost ({str(err)[:160]})"
    )
    return EngineUnavailable(
        f"{why}; {saver.summary()}. Restart the engine (`./scripts/setup-host.sh`) and run "
        "`toolkit bench --resume`: containers left behind are removed at the next start"
    )


def _check_model_before_run(lm: LoadedMatrix, model: ModelSpec, images: list[ImageSpec]) -> None:
    """Generate a missing tiny stand-in, then check the file: the sha256 pin, and each runner's own
    preflight for the runners of the selected images that take this model (GGUF header and extents;
    vLLM checkpoint quantization and revision). Raises BadInput naming models[NAME].path for a path
    the OS refuses (a name too long, a loop of links, no permission)."""
    path = lm.resolve(model.path, what=f"models[{model.name}].path")
    try:
        if not path.exists() and model.generate == "tiny-qwen3moe":
            ensure_model_file(path, model.generate)
        if path.is_symlink():
            path = path.resolve()
        if not path.exists():
            return
        for name in dict.fromkeys(i.runner for i in images if i.runner in model.runners):
            r = runners.get(name)
            if model.format in r.model_formats:
                r.preflight(lm, model, path)
        check_sha(lm, model, path)
    except (OSError, RuntimeError) as err:  # RuntimeError: pathlib's "Symlink loop" (Python 3.11)
        what = getattr(err, "strerror", None) or str(err)
        raise BadInput(
            f"{lm.path}: models[{model.name}].path: {getattr(err, 'filename', None) or path}: {what}; "
            "fix `path`"
        ) from None


@dataclass
class Decision:
    """What `toolkit bench` does with one image (`model` None: the whole image) or one (image, model)
    pair, decided once before anything runs (`decide`): status `run` with its RunContext and the cases
    its runner will measure (Runner.cases; with --resume only those not measured yet; `of`: cases of a
    full run), or `skipped` / `failed` / `stale` / `note` with the reason, said as one outcome line."""

    spec: ImageSpec
    model: ModelSpec | None
    status: str
    reason: str = ""
    ctx: RunContext | None = None
    cases: list[Case] = field(default_factory=list)
    of: int | None = None  # cases of one full run; None: len(cases)

    @property
    def per_run(self) -> int:
        return len(self.cases) if self.of is None else self.of

    def outcome(self) -> Outcome:
        """The line a decision that is not `run` gives."""
        return Outcome(self.spec.name, self.model.name if self.model else "-", self.status, self.reason)


def _dry_run_model_note(lm: LoadedMatrix, model: ModelSpec, runner: Any) -> str:
    """What a real run would do with `model` that its dry-run command does not show: skip it (file
    absent here) or refuse it (the runner's preflight: not a regular file, not GGUF, truncated, a
    checkpoint whose quantization differs...). "" when a real run would take it. Reads headers only:
    no sha256 of a 17 GB file in a dry run, no tiny model generated."""
    try:
        path = lm.resolve(model.path, what=f"models[{model.name}].path")
        path = path.resolve() if path.is_symlink() else path
        if not path.exists():
            if model.generate:
                return ""
            fetch = f"; `toolkit fetch-model {model.name}` fetches it" if model.hf else ""
            return f"model file {path} is absent here: a real run skips this pair{fetch}"
        runner.preflight(lm, model, path)
    except BadInput as err:
        return f"a real run refuses this model: {err}"
    except (OSError, RuntimeError, ValueError) as err:
        return f"a real run refuses this model: models[{model.name}].path: {err}"
    return ""


def decide(
    lm: LoadedMatrix,
    images: list[ImageSpec],
    models: list[ModelSpec],
    store: ResultStore,
    gpus: list,
    opts: BenchOptions,
) -> list[Decision]:
    """Decide, once, what this run does with every selected image and model, in the order it runs
    them: the image's devices here (else skipped, or failed with --strict; a dry run goes on with an
    example R9700 profile), its build (current, pinned or --allow-stale; unbuilt, stale, a failed pin
    or an image gone from the engine: one line saying why), the device profile for its gfx targets,
    then per model its runner and format, whether its file or folder is here (or generated by the
    run), and the cases the runner will measure (not in a dry run: it reads no results). Raises only
    what the runners' `cases` raise (BadInput)."""
    out: list[Decision] = []
    for spec in images:
        out += _decide_image(lm, spec, models, store, gpus, opts)
    return out


def _decide_image(
    lm: LoadedMatrix,
    spec: ImageSpec,
    models: list[ModelSpec],
    store: ResultStore,
    gpus: list,
    opts: BenchOptions,
) -> list[Decision]:
    """`decide` for one image: its lines, then one decision per model its runner takes."""

    def image(status: str, reason: str) -> list[Decision]:
        return [Decision(spec, None, status, reason)]

    usable = [m for m in models if spec.runner in m.runners]
    if not usable:
        return image("skipped", f"no model in the matrix lists runner {spec.runner}")
    unable = "failed" if opts.strict else "skipped"
    # the host's devices first: on a host without them, that is the reason, built or not
    missing = devices.missing_devices_reason(spec.backend, gpus, allow_software=opts.allow_software_gpu)
    if missing and not opts.dry_run:
        return image(unable, missing)
    choice = choose_build(lm, spec, store, opts)
    if choice.status in ("stale", "failed"):
        return image(choice.status, choice.reason)
    build = choice.build or (unbuilt(spec) if opts.dry_run else None)
    if build is None:
        return image("skipped", choice.reason)
    if not opts.dry_run and gone(build.digest):
        return image("skipped", f"image {build.digest[:19]} is no longer in the engine; rebuild it")
    out = image("note", choice.reason) if choice.reason else []
    if missing:  # dry run on a host without the device: show the command for one R9700
        out += image(
            "note",
            f"cannot run on this host ({missing}); the command below uses an example R9700 device profile",
        )
        profile = devices.DeviceProfile.example(spec.backend)
    else:
        # the multi-GPU policy (devices.select_gpus): every discrete GPU of the image's gfx targets, or
        # --gpu N; hidden GPUs are named in a note, the passed ones recorded with every result
        try:
            profile = devices.profile_for(
                spec.backend,
                gpus,
                pin=opts.gpu,
                allow_software=opts.allow_software_gpu,
                targets=gfx_targets(build),
            )
        except devices.DeviceMissing as err:  # no GPU of the image's arch: this image only
            return out + image(unable, str(err))
        out += [Decision(spec, None, "note", n) for n in profile.notes]
    runner = runners.get(spec.runner)
    for m in usable:
        ctx = RunContext(lm, spec, build, m, store, opts, profile, {}, lambda *a, **k: None)
        out += _model_decisions(runner, ctx)
    return out


def _model_decisions(runner: Any, ctx: RunContext) -> list[Decision]:
    """`decide` for one (image, model) pair of `ctx`: skipped for a format the runner does not read,
    a dry run's note on the model, then `run` with the cases the runner will measure."""
    lm, spec, m, opts = ctx.lm, ctx.spec, ctx.model, ctx.opts
    if m.format not in runner.model_formats:  # said, never dropped silently
        why = (
            f"runner {spec.runner} reads {' or '.join(runner.model_formats)} models, not {m.format}: "
            f"remove {spec.runner} from models[{m.name}].runners"
        )
        return [Decision(spec, m, "skipped", why)]
    note = _dry_run_model_note(lm, m, runner) if opts.dry_run else ""
    out = [Decision(spec, m, "note", n) for n in (note, _axes_not_taken(lm, spec.runner)) if n]
    if opts.dry_run:  # every case the real run would measure, for the plan line (no results read)
        whole = runner.cases(replace(ctx, opts=replace(opts, resume=False)))
        return out + [Decision(spec, m, "run", ctx=ctx, cases=whole)]
    if model_here(lm, m) is None and not m.generate:
        return out + [Decision(spec, m, "run", ctx=ctx)]  # the runner says why an absent model is skipped
    cases = runner.cases(ctx)
    of = len(runner.cases(replace(ctx, opts=replace(opts, resume=False)))) if opts.resume else None
    return out + [Decision(spec, m, "run", ctx=ctx, cases=cases, of=of)]


def _axes_not_taken(lm: LoadedMatrix, runner: str) -> str:
    """Which `bench:` axes in use this runner does not take (the env axis, KV-cache types, split mode,
    MoE offload are llama-bench's): said once per pair, never dropped silently; "" when none."""
    if runner == "llama-bench":
        return ""
    b = lm.m.bench
    unused = [f"env ({', '.join(sorted(b.env))})"] if b.env else []
    unused += [f"{k} {getattr(b, k)}" for k, default in CASE_DEFAULTS.items() if getattr(b, k) != [default]]
    if not unused:
        return ""
    return f"runner {runner} does not take bench.{'; bench.'.join(unused)}: measured without them"


def _starts(lm: LoadedMatrix, d: Decision) -> int:
    """How often a pair's cases are measured: `bench.runs` container starts for llama-bench (process-
    level repetitions), once for the other runners."""
    return lm.m.bench.runs if d.spec.runner == "llama-bench" else 1


def _cases_total(lm: LoadedMatrix, pairs: list[Decision]) -> int:
    """Test cases of the whole run, every runner's (see decide), each time it is measured."""
    return sum(len(p.cases) * _starts(lm, p) for p in pairs)


def plan_run(lm: LoadedMatrix, decisions: list[Decision], store: ResultStore) -> str:
    """One line: how many test cases this run has (over `decisions`, see decide) and how long they took
    before ("" when the run has no cases). The estimate is measured, never assumed: each pair's
    runner's `estimate` (the newest ok record of the same test on this host); cases never measured
    before are counted as unknown. Start-up and model load are not included."""
    pairs = [d for d in decisions if d.cases]
    total = _cases_total(lm, pairs)
    if not total:
        return ""  # nothing left to resume, or nothing runs here: each says why in its own line
    known, seconds = 0, 0.0
    for p in pairs:
        assert p.ctx is not None  # a decision with cases runs
        k, s = runners.get(p.spec.runner).estimate(p.ctx, p.cases)
        known, seconds = known + k * _starts(lm, p), seconds + s * _starts(lm, p)
    per_run = Counter(p.per_run for p in pairs)
    every = sum(p.per_run * _starts(lm, p) for p in pairs)
    shape = " + ".join(
        f"{k} image/model pair{'s' if k > 1 else ''} x {n} case{'s' if n > 1 else ''}"
        for n, k in sorted(per_run.items())
    )
    reps = sorted({int(c.get("repetitions", lm.m.bench.repetitions)) for p in pairs for c in p.cases})
    line = (
        f"plan: {total} test cases ({shape}"
        + (
            f", each in {lm.m.bench.runs} processes (bench.runs)"
            if any(_starts(lm, p) > 1 for p in pairs)
            else ""
        )
        + (f", {every - total} already measured: --resume" if every != total else "")
        + f", {reps[0] if len(reps) == 1 else f'{reps[0]}-{reps[-1]}'} repetitions each)"
    )
    if known == 0 or not math.isfinite(seconds):
        return line + "; no earlier run of these tests to estimate the duration from"
    part = (
        "" if known == total else f" for the {known} cases measured before ({total - known} never measured)"
    )
    return line + f"; estimated measuring time {_duration(seconds)}{part}, from earlier runs, plus start-up"


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "unknown"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _execute(d: Decision, host: dict[str, Any], events: Events) -> list[Outcome]:
    """Carry out one decision: a `run` goes to its runner with the host facts (and the device profile
    it was given) and the run's events; any other gives its line."""
    if d.status != "run" or d.ctx is None:
        return [d.outcome()]
    if host:
        host = {**host, "device_profile": d.ctx.profile.record()}
    return runners.get(d.spec.runner).run(replace(d.ctx, host=host, events=events))
