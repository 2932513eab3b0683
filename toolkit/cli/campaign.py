"""`toolkit campaign`: one matrix over many hosts, on Slurm (logic in toolkit/campaign/slurm.py).

Registered on the main group in toolkit.cli.main (cli.add_command); thin like the rest of the CLI.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import click

from toolkit.cli.common import (
    EPILOG,
    FiniteRange,
    _err,
    _load,
    _store,
    echo_json,
    json_option,
    matrix_option,
    output_option,
    read_results_option,
    results_option,
    rich_console,
)
from toolkit.cli.progress import progress_printer
from toolkit.core.errors import BadInput, BenchFailed
from toolkit.core.text import counted, path_text

STATE_STYLE = {
    "pending": "yellow",
    "running": "cyan",
    "done": "green",
    "failed": "red",
    "cancelled": "magenta",
    "unknown": "red",
    "unsubmitted": "dim",
}


def _campaign_of(lm, results_dir, campaign_id):
    from toolkit.campaign import slurm as cmod

    store = _store(lm, results_dir)
    return cmod.load(store.root, campaign_id or cmod.latest(store.root))


def status_table(c):
    """The campaign as a rich Table: one row per slice (host, image x model, job, state, node, elapsed,
    records ok/failed, note) and a caption counting the states."""
    from rich.table import Table

    counts = c.counts()
    caption = ", ".join(
        f"{counts[s]} {s}"
        for s in ("done", "running", "pending", "failed", "cancelled", "unknown", "unsubmitted")
        if counts.get(s)
    )
    t = Table(
        title=f"campaign {c.id}",
        caption=f"{counted(len(c.slices), 'slice')}: {caption}",
        caption_justify="left",
    )
    for col in ("#", "host", "image x model", "job", "state", "node", "elapsed", "records", "note"):
        t.add_column(col, overflow="fold")
    for s in c.slices:
        rec = f"{s.records.get('ok', 0)} ok, {s.records.get('failed', 0)} failed" if s.records else ""
        note = ""
        if s.state == "pending" and s.reason and s.reason != "None":
            note = f"waiting: {s.reason}"
        elif s.finished:
            note = f"{s.slurm_state or ''} exit {s.exit_code or '?'}"
            if s.failed_record:
                note += f"; failed record {s.failed_record}"
        style = STATE_STYLE.get(s.state, "")
        t.add_row(
            str(s.index),
            s.host,
            f"{s.image} x {s.model}",
            s.job_id or "-",
            f"[{style}]{s.state}[/{style}]" if style else s.state,
            s.ran_on or s.node or "-",
            s.elapsed or "-",
            rec,
            note,
        )
    return t


def _print(c, as_json: bool) -> None:
    if as_json:
        echo_json(c)
        return
    console = rich_console()
    console.width = max(120, console.width)
    console.print(status_table(c))


@click.group(epilog=EPILOG)
def campaign():
    """One matrix over many GPU hosts, on Slurm: one job per (host, image, model) slice.

    The `campaign:` block of matrix.yaml names the hosts (Slurm node or features, an alias) and what
    each measures; `submit` sbatch's one job per slice that pulls its image by registry digest and runs
    `toolkit bench` for that slice on the node, writing only under results/hosts/<host>/. `status`
    shows the jobs, `cancel` cancels them, `render-k8s` writes Kubernetes Job manifests instead.
    docs/campaign.md, "Many hosts (Slurm)".
    """


@campaign.command(epilog=EPILOG)
@matrix_option
@results_option
@json_option
@click.option("--dry-run", is_flag=True, help="Write the job scripts and print them; submit nothing.")
def submit(matrix_path, results_dir, as_json, dry_run):
    """Submit one Slurm job per (host, image, model) slice of the `campaign:` block.

    Refuses (exit 4) an image whose build has no pushed registry digest in results/builds.jsonl (run
    `toolkit push`): every job pulls its image by digest so all hosts measure the same bytes. The
    campaign (job ids, slices) is kept in results/campaigns/<id>.json.
    """
    from toolkit.campaign import slurm as cmod

    lm = _load(matrix_path)
    c = cmod.submit(
        lm,
        _store(lm, results_dir, "campaign submit"),
        dry_run=dry_run,
        note=_err if not as_json else (lambda t: None),
    )
    if dry_run and not as_json:
        for s in c.slices:
            click.echo(f"# ---- {s.script}\n{Path(s.script).read_text()}")
        return
    if as_json:
        echo_json(c)
        return
    click.echo(
        f"campaign {c.id}: {len(c.slices)} jobs submitted ({', '.join(s.job_id or '-' for s in c.slices)}); "
        f"state in {c.state_file}"
    )
    click.echo(f"follow it with: toolkit campaign status {c.id} --wait")


@campaign.command(epilog=EPILOG + " With --wait: 3 when a slice failed or was cancelled.")
@matrix_option
@read_results_option
@json_option
@click.argument("campaign_id", metavar="[CAMPAIGN]", required=False)
@click.option("--wait", is_flag=True, help="Refresh until every job has ended; exit 3 if any slice failed.")
@click.option(
    "--timeout",
    type=FiniteRange(min=1),
    default=None,
    metavar="SECONDS",
    help="With --wait: give up after this long (the jobs keep running).",
)
@click.option(
    "--interval",
    type=FiniteRange(min=0.2, max=600),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="With --wait: seconds between two looks at Slurm.",
)
def status(matrix_path, results_dir, as_json, campaign_id, wait, timeout, interval):
    """Each job of a campaign (default: the newest): pending / running / done / failed / cancelled, its node,
    elapsed time and records. A job that ended without results gets a failed record, built from Slurm's
    state and exit code (`scontrol show job`) and the end of its output file."""
    from toolkit.campaign import slurm as cmod

    lm = _load(matrix_path)
    c = cmod.refresh(_campaign_of(lm, results_dir, campaign_id))
    if wait:
        from rich.live import Live

        end = time.monotonic() + timeout if timeout else None
        console = rich_console()
        console.width = max(120, console.width)
        live = None if as_json else Live(status_table(c), console=console, auto_refresh=False)
        with live or contextlib.nullcontext():
            while not all(s.finished for s in c.slices) and (end is None or time.monotonic() < end):
                time.sleep(interval)
                c = cmod.refresh(c)
                if live is not None:
                    live.update(status_table(c), refresh=True)
    if not (wait and not as_json):
        _print(c, as_json)
    bad = [s for s in c.slices if s.state in ("failed", "cancelled", "unknown")]
    if wait and bad:
        raise BenchFailed(
            f"campaign {c.id}: {len(bad)} of {len(c.slices)} slices "
            + ", ".join(f"{s.host}/{s.image} x {s.model}: {s.state}" for s in bad)
        )


@campaign.command(epilog=EPILOG)
@matrix_option
@read_results_option
@json_option
@click.argument("campaign_id", metavar="[CAMPAIGN]", required=False)
@click.option("--slice", "slices", type=int, multiple=True, metavar="N", help="Only this slice (repeatable).")
@click.option("--dry-run", is_flag=True, help="Print the jobs that would be cancelled; cancel nothing.")
def cancel(matrix_path, results_dir, as_json, campaign_id, slices, dry_run):
    """scancel the unfinished jobs of a campaign (default: the newest). Each job's toolkit gets SIGTERM,
    stops llama-bench and removes its containers; completed tests stay saved."""
    from toolkit.campaign import slurm as cmod

    lm = _load(matrix_path)
    c = _campaign_of(lm, results_dir, campaign_id)
    ids = cmod.cancel(c, slices=list(slices) or None, dry_run=dry_run)
    if as_json:
        echo_json(
            {"campaign": c.id, "cancelled": [] if dry_run else ids, "would_cancel": ids if dry_run else []}
        )
        return
    did = "would cancel (dry run)" if dry_run else "cancelled"
    click.echo(f"campaign {c.id}: {did} {', '.join(ids)}" if ids else f"campaign {c.id}: no unfinished job")


@campaign.command("render-k8s", epilog=EPILOG)
@matrix_option
@results_option
@json_option
@output_option(required=True, dir_okay=True, help="Folder to write one Job manifest per slice into.")
def render_k8s(matrix_path, results_dir, as_json, output):
    """Write Kubernetes Job manifests for the campaign instead of submitting it (not run here): one per
    llama-bench slice, image by registry digest, `amd.com/gpu`, results to a volume per host.

    The folder is new, empty, or holds only manifests an earlier render-k8s wrote: those are replaced
    (removed and named), so `kubectl apply -f FOLDER` submits this campaign's Jobs only. A results
    folder, a folder inside one, a symlink or a folder holding other files is refused (exit 4)."""
    from toolkit.campaign import slurm as cmod

    lm = _load(matrix_path)
    out = Path(output)
    earlier = _earlier_manifests(out)
    files, notes = cmod.write_k8s(lm, _store(lm, results_dir, "campaign render-k8s"), out)
    gone = sorted(set(earlier) - {Path(f) for f in files})
    for f in gone:
        f.unlink(missing_ok=True)
    if earlier:
        notes = [
            f"replaced {len(earlier)} earlier manifest(s) in {path_text(out)}"
            + (
                f"; removed those of jobs not in this campaign: {', '.join(f.name for f in gone)}"
                if gone
                else ""
            ),
            *notes,
        ]
    if as_json:
        echo_json({"files": files, "notes": notes})
        return
    for f in files:
        click.echo(path_text(f))
    for n in notes:
        _err(f"note: {n}")


MANIFEST_MARK = "# toolkit campaign "
"""The first line of every manifest render-k8s writes (toolkit.campaign.slurm.write_k8s)."""


def _earlier_manifests(out: Path) -> list[Path]:
    """The manifests an earlier render-k8s left in `out` (every entry a regular `*.yaml` file whose first
    line is MANIFEST_MARK); [] for a new or empty folder. BadInput (exit 4) when `out` is a symlink, a
    results folder or inside one (core.paths.results_folder), or holds anything else."""
    from toolkit.core.paths import results_folder

    fix = "give a new or empty folder of its own, e.g. -o k8s/"
    if out.is_symlink():
        raise BadInput(f"--output {path_text(out)} is a symbolic link; {fix}")
    found = results_folder(out)
    if found:
        raise BadInput(
            f"--output {path_text(out)} is or lies in the results folder {path_text(found[0])}; {fix}"
        )
    if not out.is_dir():
        return []  # new (or not a folder: write_k8s's mkdir names it)
    entries = sorted(out.iterdir())
    others = [e.name for e in entries if not _is_manifest(e)]
    if others:
        raise BadInput(
            f"--output {path_text(out)} holds files render-k8s did not write ({', '.join(others[:5])}"
            f"{', ...' if len(others) > 5 else ''}): `kubectl apply -f` would submit them too; {fix}"
        )
    return entries


def _is_manifest(p: Path) -> bool:
    """Whether `p` is a regular *.yaml file render-k8s wrote (its first line is MANIFEST_MARK)."""
    if p.is_symlink() or not p.is_file() or p.suffix != ".yaml":
        return False
    with p.open("rb") as f:
        return f.readline().startswith(MANIFEST_MARK.encode())


@campaign.command("job", hidden=True, epilog=EPILOG)
@click.argument("state_file", type=click.Path(dir_okay=False, exists=True))
@click.argument("index", type=int)
def job(state_file, index):
    """The step a campaign job runs on its node (its script `exec`s this): pull by digest, bench the slice."""
    from toolkit.campaign import slurm as cmod

    events = progress_printer(quiet=True)
    outcomes = cmod.run_job(Path(state_file), index, events)
    for o in outcomes:
        line = f"{o.image}: {o.status}" if o.model == "-" else f"{o.image} x {o.model}: {o.status}"
        line += f", {o.records} results" if o.records else ""
        click.echo(line + (f": {o.reason}" if o.reason else ""))
    failed = [f"{o.image} x {o.model}" for o in outcomes if o.status in ("failed", "skipped", "stale")]
    if failed or not any(o.status == "ok" for o in outcomes):
        raise BenchFailed(
            f"campaign slice {index}: bench failed or measured nothing for: "
            f"{', '.join(failed) or 'the slice'}"
        )
