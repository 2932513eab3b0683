"""Commands that publish images and runs and reproduce them: `push`, `export-run`, `reproduce`.

Registered on the main group in toolkit.cli.main (cli.add_command); thin like the rest of the CLI.
"""

from __future__ import annotations

from pathlib import Path

import click

from toolkit.cli.common import (
    EPILOG,
    _err,
    _load,
    _store,
    echo_json,
    human_format,
    image_option,
    json_option,
    matrix_option,
    output_option,
    percent_option,
    read_results_option,
    results_option,
)
from toolkit.cli.progress import progress_printer
from toolkit.core.text import path_text, strip_controls

PUSH_EPILOG = EPILOG + " A failed push exits 2."
_LAYER_DONE = ("Pushed", "Layer already exists", "Pull complete", "Already exists")


def _transfer_printer(quiet: bool):
    """Print finished layers and digests of a push/pull on stderr (not the per-byte progress)."""
    if quiet:
        return None

    def on_line(line: str) -> None:
        if line.endswith(_LAYER_DONE) or "digest: " in line.lower() or line.startswith("Status:"):
            _err(f"  {line}")

    return on_line


def _rebuild_steps(quiet: bool):
    """reproduce's `steps_for` with --rebuild: each image announced on stderr by name, with the run's
    own full build time as the estimate, then its progress condensed (build_plan.BuildSteps, as `toolkit
    build` prints it in a log: each step as it starts, steps of 5 s or more with their time, a line while
    a long step compiles, error lines, every line under the image's name). A rebuild of several minutes
    printed nothing, then only lines named `rebuild`: not which image, nor for how long. The announcement
    says the build starts from scratch and why (a stranger's build reuses no step of this host's own:
    its network and cache are its own, images.confine; nc48b S11: 498 s of compile on the host that had
    built the image minutes before, said nowhere). None: --json."""
    if quiet:
        return None
    from toolkit.images import build_plan

    def steps_for(name: str, store) -> build_plan.BuildSteps:
        full = build_plan.full_build_seconds(store, name)  # the work store holds the run's build records
        took = (
            f"the run's build of every step took {full:.1f} s there"
            if full is not None
            else "a full compile takes minutes (the CPU image's: 3-8 on 2 idle cores)"
        )
        _err(
            f"==> {name}: rebuilding from the run's matrix.yaml + Dockerfile.templates/ from scratch (a "
            "stranger's build runs on a network and cache of its own, so no step of this host's own builds "
            f"is reused, not even of this image built minutes ago: docs/publish.md); {took}"
        )
        return build_plan.BuildSteps(name, _err, full_build_s=full)

    return steps_for


@click.command(epilog=PUSH_EPILOG)
@matrix_option
@image_option
@json_option
@read_results_option
@click.option(
    "--registry",
    default=None,
    metavar="HOST:PORT/NAMESPACE",
    help="Where to push. Default: `registry:` in matrix.yaml.",
)
@click.option(
    "--attest",
    is_flag=True,
    help="Rebuild and push through a docker-container buildx builder with an SBOM and max provenance "
    "(the default docker driver cannot attach them).",
)
@click.option("--dry-run", is_flag=True, help="Print what would be tagged and pushed; push nothing.")
def push(matrix_path, images, as_json, results_dir, registry, attest, dry_run):
    """Push each image's latest build to a registry and record the registry digest.

    Two tags per image: a fixed one, <version>-<backend>-<gfx|cpu>-<commit>-<yyyymmdd>, and a moving
    one, <backend>-latest. Credentials come from the Docker credential store (`docker login HOST`
    once); the toolkit never asks for or prints a password. The RepoDigest the registry serves is
    read back and appended, with the pushed tags, as an updated build record to results/builds.jsonl.
    """
    from toolkit.publish import push as publish

    lm = _load(matrix_path)
    store = _store(lm, results_dir, "push")
    results = publish.push_images(
        lm, store, list(images), registry, attest=attest, on_line=_transfer_printer(as_json), dry_run=dry_run
    )
    if as_json:
        echo_json([_push_json(r) for r in results])
    else:
        _print_pushed(results)
    failed = [r.image for r in results if r.status == "failed"]
    if failed:
        raise publish.PushFailed(f"push failed for: {', '.join(failed)}")
    if not any(r.status in ("pushed", "dry-run") for r in results):  # asked and nothing was: no success
        why = "; ".join(f"{r.image}: {r.reason}" for r in results) or "no image to push"
        raise publish.PushFailed(f"nothing pushed ({why})")


def _push_json(r) -> dict:
    """One image of `push --json`: image, status (pushed | dry-run | skipped | failed), reason, refs,
    repo_digest, seconds (wall time of the pushes), notes."""
    keys = ("image", "status", "reason", "refs", "repo_digest", "notes")
    return {**{k: getattr(r, k) for k in keys}, "seconds": round(r.seconds, 2)}


def _print_pushed(results) -> None:
    """push's text output: a line per image, then the notes on stderr."""
    for r in results:
        if r.status == "pushed":
            click.echo(f"{r.image}: pushed {', '.join(r.refs)} in {r.seconds:.1f} s -> {r.repo_digest}")
        elif r.status == "dry-run":
            click.echo(f"{r.image}: {r.reason} as {', '.join(r.refs)} (dry run: nothing pushed)")
        else:
            click.echo(f"{r.image}: {r.status}: {r.reason}")
    for note in dict.fromkeys(n for r in results for n in r.notes):
        _err(f"note: {note}")


@click.command("export-run", epilog=EPILOG)
@matrix_option
@read_results_option
@json_option
@click.argument("run_id", metavar="RUN_ID")
@output_option(
    required=True, dir_okay=True, help="Folder to write (empty, or an earlier export of the same run)."
)
def export_run(matrix_path, results_dir, as_json, run_id, output):
    """Write a bench run as a self-contained folder to commit to a repo or attach to a release.

    RUN_ID as a bench prints it (`run 20261205T192620Z-a8edce: results in ...`), or its start where
    that names one stored run (8 characters at least: `20261205T1926`).

    DIR/run.json (images by digest with registry digests and labels, models with sha256 and Hugging
    Face source, the llama-bench axes, host facts), results.jsonl (the run's records), builds.jsonl
    (the builds of its digests), matrix.yaml and Dockerfile.templates/ (to rebuild), README.md (how to
    reproduce), toolkit-src.tar.gz (the toolkit's own source at the commit that measured the run, for
    the README's `pip install`; where this checkout has that commit). Push the images first (`toolkit
    push`) so the folder names where to pull them.
    """
    from toolkit.publish import REPRODUCED, run_folder
    from toolkit.results import need_records_beside

    lm = _load(matrix_path)
    if not results_dir:  # in an export's folder: --results . reads its run
        need_records_beside(lm.root / "results", ("export-run", run_id, "-o", output), REPRODUCED)
    run = run_folder.export_run(_store(lm, results_dir), run_id, Path(output), lm)
    if as_json:
        echo_json(run)
        return
    click.echo(
        f"run {strip_controls(' '.join(run.run_id.splitlines()))}: {run.records.get('ok', 0)} results, {len(run.images)} image(s), "
        f"{len(run.models)} model(s) -> {path_text(output)}"
    )
    for note in run.notes:
        _err(f"note: {note}")


@click.command(epilog=EPILOG)
@matrix_option
@results_option
@json_option
@click.argument("run", metavar="RUN_DIR_OR_ID")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Build the images again from the run's matrix.yaml + Dockerfile.templates/ instead of pulling.",
)
@percent_option(
    "--threshold",
    5.0,
    "Smallest delta counted as a difference; each test's noise is max(2 x combined relative stddev, this).",
)
@click.option(
    "--model-dir",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="Look for the run's model files here first (checked by sha256).",
)
@click.option(
    "--allow-twin",
    is_flag=True,
    help="Reproduce a run measured on a shape twin (`toolkit fetch-model --twin`) as such.",
)
@click.option(
    "--allow-concurrent",
    is_flag=True,
    envvar="TOOLKIT_ALLOW_CONCURRENT",
    show_envvar=True,
    help="Re-run although another toolkit benchmark is running on the same engine or writing the same "
    "results folder (records flagged `concurrent`; default: refuse, exit 9).",
)
def reproduce(
    matrix_path, results_dir, as_json, run, rebuild, threshold, model_dir, allow_twin, allow_concurrent
):
    """Re-run a published run on this host and say whether its results reproduce.

    RUN_DIR_OR_ID is a folder from `toolkit export-run`, or a run id of this project's results (or its
    start, 8 characters at least, where that names one run; exported to .toolkit/runs/<id>/ first). Every image is pulled by registry digest and must have the recorded
    image ID (or is rebuilt with --rebuild); every model file must have the recorded sha256 (tiny
    generated models are generated again); the same llama-bench cases run again (results in
    <folder>/reproduce/results/). Prints recorded vs reproduced tok/s with deltas (and tokens per
    joule with their delta where both runs have a valid GPU energy) and the verdict: a plain table on
    a terminal, markdown when piped (as `toolkit report`). Exit code 7 when not reproduced, and when
    not decided (every test beyond noise measured on a flagged cell, e.g. host-busy: run again).
    """
    from toolkit.core.errors import NotReproduced
    from toolkit.publish import repro_output
    from toolkit.publish import reproduce as reproduce_mod

    lm = store = None
    if not Path(run).is_dir():
        lm = _load(matrix_path)
        store = _store(lm, results_dir)
    events = progress_printer(quiet=as_json)
    try:
        rep = reproduce_mod.reproduce(
            run,
            store=store,
            lm=lm,
            rebuild=rebuild,
            threshold=threshold,
            model_dir=Path(model_dir) if model_dir else None,
            events=events,
            on_line=None if rebuild else _transfer_printer(as_json),
            steps_for=_rebuild_steps(as_json) if rebuild else None,
            allow_twin=allow_twin,
            allow_concurrent=allow_concurrent,
        )
    finally:
        events("close")
    if as_json:
        echo_json(repro_output.reproduction_json(rep))
    else:
        click.echo(repro_output.format_reproduction(rep, human_format()))
    if not rep.reproduced:
        bad = [r.test for r in rep.rows if not r.ok]
        held = sum(r.held for r in rep.rows)
        raise NotReproduced(
            f"run {rep.run_id} {rep.verdict}: {len(bad)} of {len(rep.rows)} tests beyond noise "
            f"or missing ({', '.join(bad[:6])}{', ...' if len(bad) > 6 else ''})"
            + (f"; {held} of them on a flagged cell (held): run again on an idle host" if held else "")
        )
