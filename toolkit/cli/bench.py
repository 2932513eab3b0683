"""Commands that measure: `toolkit bench`, `toolkit measure`, and `toolkit fetch-model` (the models
they measure).

Registered on the main group in toolkit.cli.main (cli.add_command); thin like the rest of the CLI.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import click

from toolkit.cli.common import (
    EPILOG,
    FiniteRange,
    _err,
    _load,
    _store,
    builds_results_option,
    echo_json,
    given_options,
    image_option,
    json_option,
    matrix_option,
    output_option,
    results_option,
    terminal_width,
)
from toolkit.cli.progress import progress_printer
from toolkit.core import invocation, signals, startup
from toolkit.core.errors import BadInput, BenchFailed, FileSystemError, NothingDone
from toolkit.core.paths import output_file
from toolkit.core.text import path_text
from toolkit.results import make_folders, open_regular


@click.command(epilog=EPILOG)
@matrix_option
@image_option
@json_option
@builds_results_option
@click.option("--model", "-m", "models", multiple=True, metavar="NAME", help="Only this model (repeatable).")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the exact `docker run` (on Podman `podman run`) commands; run nothing.",
)
@click.option("--strict", is_flag=True, help="An image that cannot run on this host is an error, not a skip.")
@click.option(
    "--allow-software-gpu",
    is_flag=True,
    help="Accept a CPU-type Vulkan device (Mesa lavapipe) for Vulkan images: a smoke test, not a GPU number.",
)
@click.option(
    "--gpu",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Pin GPU N, numbered as `toolkit doctor` lists them. Default: every discrete GPU of the image's "
    "gfx targets; iGPUs and other archs are hidden and named.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Measure only the test cases not yet measured on the same image digest and model (a pair with "
    "none missing is skipped); with --dry-run, plan and print only those.",
)
@click.option(
    "--timeout",
    type=FiniteRange(min=1, max=7 * 24 * 3600),
    default=None,
    metavar="SECONDS",
    help="Per container: the sweep, its depth sweep and the canary each get it; 1 s to 7 days; default from the matrix.",
)
@click.option(
    "--allow-stale",
    is_flag=True,
    help="Measure the newest build even if matrix.yaml or its template changed since it was built; "
    "every record is marked stale (default: refuse that image with exit 4).",
)
@click.option(
    "--allow-concurrent",
    is_flag=True,
    envvar="TOOLKIT_ALLOW_CONCURRENT",
    show_envvar=True,
    help="Run although another toolkit benchmark is running on the same container engine or writing the same "
    "results folder (default: refuse, exit 9); every record written meanwhile is flagged `concurrent`.",
)
@click.option(
    "--memory",
    default=None,
    metavar="SIZE",
    help="Container memory limit, e.g. 24g (no swap beyond it); default bench.memory. Recorded with "
    "every result; a run killed by it is a failed row, its completed tests kept.",
)
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Run a matrix of more than 1000 test cases (the plan line says how many).",
)
@click.option(
    "--no-telemetry",
    is_flag=True,
    help="Do not sample the host and GPUs during the run (records carry no telemetry and no telemetry "
    "flags). For measuring the sampler's own effect (benchmarks/telemetry_paired.py); default: sample.",
)
def bench(
    matrix_path,
    images,
    as_json,
    results_dir,
    models,
    dry_run,
    strict,
    allow_software_gpu,
    gpu,
    resume,
    timeout,
    allow_stale,
    allow_concurrent,
    memory,
    yes,
    no_telemetry,
):
    """Run llama-bench in each built image over the matrix and store the results by image digest.

    One container and one llama-bench process per (image, model), covering the crossed axes
    (-p/-n/-ub/-b/-fa/-ngl, JSONL output), model mounted read-only, devices from the image's
    backend profile (cpu: none; vulkan: render nodes; rocm: /dev/kfd + render nodes). Models that are
    absent are skipped, except tiny stand-ins, which are generated. Prints a summary line per
    (image, model) and the prefill/decode tables of this run.

    Each image is measured on the build whose inputs key (template + vars + source, see `toolkit
    build`) is the one matrix.yaml and the templates give now. An image whose newest build is of
    older inputs is refused (exit 4: run `toolkit build -i NAME`) unless --allow-stale.
    """
    quiet = as_json or dry_run
    # the collector off until the first container is about to start (run_bench: startup.started); then
    # the tables' and the stored records' code is imported on a thread while the engine starts it
    with startup.paused(then=None if quiet else lambda: _import_meanwhile(*AFTER_RUN_MODULES)):
        from toolkit.bench.run import run_bench
        from toolkit.bench.runners.base import BenchOptions

        lm = _load(matrix_path)
        store = _store(lm, results_dir, "bench")
        skip = ("matrix_path", "results_dir", "as_json", "dry_run", "resume")
        invocation.own(given_options(click.get_current_context(), skip))  # for the resume hint
        opts = BenchOptions(
            dry_run=dry_run,
            strict=strict,
            allow_software_gpu=allow_software_gpu,
            gpu=gpu,
            resume=resume,
            timeout_s=timeout,
            allow_stale=allow_stale,
            allow_concurrent=allow_concurrent,
            memory=memory,
            yes=yes,
            telemetry=not no_telemetry,
        )
        events = progress_printer(quiet=quiet, outcomes=True)
        try:
            outcomes = run_bench(lm, lm.select_images(images), lm.select_models(models), store, opts, events)
        finally:
            events("close")
        if as_json:
            echo_json(outcomes)
        else:
            _print_bench(outcomes, store, opts.run_id, dry_run=dry_run, resume=resume)
        _bench_verdict(lm, store, outcomes, strict=strict, dry_run=dry_run, said=not quiet)


AFTER_RUN_MODULES = (
    "toolkit.analysis.report",
    "tabulate",
    "toolkit.results.record_check",
    "toolkit.results.import_keys",
    "_strptime",
)
"""What only the end of a bench imports: the closing tables' code (the report's, and tabulate, which
report.render and table_text import only when they draw), the whole-line checks that reading this run's
records back applies (records.bench_record imports record_check), the digests the index keeps of each
new record (import_keys: an import of the same rows later is told they were measured here) and
datetime.strptime's module (their times parsed there): ~50 ms of CPU here, paid after the last
container when left there."""


def _import_meanwhile(*modules: str) -> None:
    """Import `modules`, in order, on a daemon thread, started just before the first container (its CPU
    overlaps the engine's creating and starting it, where the main thread waits on the engine's socket,
    not the start-up's own work). Safe: from then on the bench path imports none of them, nor a module
    that imports them, before its end; an import that fails there fails again, and is reported, where
    the end needs it."""

    def load() -> None:
        for module in modules:
            importlib.import_module(module)

    threading.Thread(target=load, daemon=True).start()


def _print_bench(outcomes, store, run_id: str, *, dry_run: bool, resume: bool = False) -> None:
    """A dry run's line per (image, model) (a real run's were printed as each was known: the events'
    `outcome`), then the tables of this run's records and where they are stored; with `resume`, where an
    earlier run measured the same image digest + model (_measured_before), that the cases measured before are
    not in them, and the report that shows them all."""
    for o in outcomes if dry_run else ():
        click.echo(o.line())
    # this run's records as stored, through the query index: reading the digest's whole history
    # back would make every bench slower than the one before
    from toolkit.results import index as resultindex

    ran = [] if dry_run else resultindex.load(resultindex.heads(store, runs=[run_id]))
    if ran:
        # the tables (~0.1 s of imports): only when there are rows
        from toolkit.analysis import report as report_mod

        click.echo("")
        click.echo(report_mod.render(ran, summary_format()))
        paths = sorted({str(store.digest_dir(r.image.digest) / "bench.jsonl") for r in ran})
        click.echo(f"\nrun {run_id}: results in {', '.join(paths)}")
        if resume and _measured_before(store, run_id, ran):
            click.echo(
                "--resume: the cases measured before by earlier runs are not in these tables; "
                f"`{invocation.command('report')}` shows them beside these"
            )


def _measured_before(store, run_id: str, ran: list) -> bool:
    """Whether an earlier run stored an ok record of an image digest + model this run measured (`ran`):
    cases --resume left out, which this run's tables do not hold."""
    from toolkit.results import index as resultindex

    mine = {(r.image.digest, r.model.name) for r in ran}
    return any(
        h.run_id != run_id and (h.image.digest, h.model_name) in mine
        for h in resultindex.heads(store, digests=sorted({d for d, _ in mine}), ok_only=True)
    )


def summary_format(stream: Any = None) -> str:
    """The format of bench's summary tables, resolved as `toolkit report` resolves it: "text" (sized to
    the terminal) when `stream` (default stdout) is a terminal, else "github" (markdown for a pipe or a
    file; its decode rows folded as the terminal's: report.folded_tables)."""
    return "text" if terminal_width(stream) else "github"


def _bench_verdict(lm, store, outcomes, *, strict: bool, dry_run: bool = False, said: bool = False) -> None:
    """The store's warnings on stderr, then the exit: BadInput (exit 4) naming the stale builds and how
    to rebuild them, else BenchFailed naming the failed runs (with --strict a skip is a failure), else
    NothingDone (exit 2) when a run measured nothing (every pair skipped; each reason named, or counted
    where `said`: each outcome's line already printed it, once is enough; not a dry run: its plan line
    says when nothing would run)."""
    if strict:  # --strict: anything not measured is a failure, for CI gates
        for o in outcomes:
            if o.status == "skipped":
                o.status = "failed"
    # e.g. a corrupt line in results/builds.jsonl: said, not swallowed
    for w in dict.fromkeys(store.warnings):
        _err(f"warning: {w}")
    failed = [f"{o.image} x {o.model}" for o in outcomes if o.status == "failed"]
    stale = [o.image for o in outcomes if o.status == "stale"]
    if stale:  # measuring an image of older inputs would be a wrong answer: bad input, with the fix
        also = f"; bench also failed for: {', '.join(failed)}" if failed else ""
        raise BadInput(
            f"stale build of {', '.join(stale)} (built from other inputs than {lm.path} and its templates "
            f"give now): run `{invocation.command('build', *(w for n in stale for w in ('-i', n)), matrix=lm.path, results=store.root)}`, or pass --allow-stale"
            + also
        )
    if failed:
        raise BenchFailed(f"bench failed for: {', '.join(failed)}")
    if not dry_run and not any(o.status in ("ok", "resumed") for o in outcomes):  # asked, none measured
        unmeasured = [o for o in outcomes if o.status != "note"]
        why = "; ".join(
            f"{o.image if o.model == '-' else f'{o.image} x {o.model}'}: {o.reason or o.status}"
            for o in unmeasured
        )
        if said and unmeasured:
            n = len(unmeasured)
            why = (
                "skipped: its line on stdout says why"
                if n == 1
                else f"all {n} skipped: their lines on stdout say why"
            )
        raise NothingDone(f"nothing measured ({why or 'no image and model to measure'})")


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}, epilog=EPILOG
)
@matrix_option
@results_option
@click.option(
    "--label",
    metavar="NAME",
    default=None,
    help="Also import the llama-bench rows into results/ under this image name (e.g. bare-metal-cuda), "
    "so `toolkit report` and `toolkit compare` show them beside container runs.",
)
@output_option(
    help="Where to write the rows with their telemetry (JSONL, importable with `toolkit import`). "
    "Default: results/measure/<run>.jsonl."
)
@json_option
@click.option(
    "--gpu",
    default="all",
    show_default=True,
    metavar="all|none|I,J",
    help="GPUs to sample: all the sampler finds (AMD via sysfs, NVIDIA via NVML), none, or indices.",
)
@click.option(
    "--rate",
    type=FiniteRange(min=10.0, max=100.0),
    default=10.0,
    show_default=True,
    help="Samples per second.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def measure(matrix_path, results_dir, label, output, as_json, gpu, rate, command):
    """Run COMMAND (after `--`) with the bench's sampler around it: GPU power, energy, clocks,
    throttling, other processes on the GPU and host load, from outside the command, without root.

    Example: `toolkit measure --label bare-metal -- llama-bench -m model.gguf -fa 1 -p 512 -n 128 -o jsonl
    --progress`. Every llama-bench row (`llama-bench -o jsonl`; `llama-bench --progress` gives exact
    test windows) gets its window's telemetry summary and flags (gpu-shared, throttled:<reason>,
    clock-idle, power-not-stock, host-busy, energy-invalid:<reason>), written as JSONL that `toolkit
    import` reads; with --label the rows are imported at once. Any other command gets one window for its whole run. The raw trace is
    kept beside the output. The command's own output passes through (with --json its stdout goes to
    stderr, stdout being the JSON); the exit code is the command's (3 when a GPU fault appeared in
    the kernel log during the run)."""
    from toolkit.bench import measure as measure_mod
    from toolkit.results import importer, refuse_export
    from toolkit.results.records import new_run_id

    root = Path(results_dir) if results_dir else Path(matrix_path).resolve().parent / "results"
    if not results_dir and (label is not None or not output):  # rows or records written to results/
        refuse_export(root.parent, "measure")
    # named as a bench's run id: two measures of one second (a 0.05-s command, then another) wrote one
    # file, the second truncating the first's rows
    run = new_run_id()
    out_path = Path(output) if output else root / "measure" / f"{run}.jsonl"
    _check_outputs(out_path, Path(matrix_path), root)
    if label is not None:  # before a possibly hour-long run, not after it
        importer.check_options(label, None, None)
    gpus = measure_mod.select_gpus(gpu)
    make_folders(out_path.parent, root=root)  # results/measure/ (a path under results/): never through a link
    sink = _RowFile(out_path, root)  # rows land here as they arrive: an interrupt keeps them
    _err(
        f"measure: sampling the host and {len(gpus)} GPU(s) at {rate:g} Hz: {', '.join(g.name or g.id for g in gpus) or 'no GPU'}"
    )
    try:
        m = measure_mod.run_measured(
            command,
            trace_path=out_path.with_suffix(".trace.jsonl"),
            gpus=gpus,
            rate_hz=rate,
            passthrough=(_pass_bytes(sys.stderr if as_json else sys.stdout), _pass_bytes(sys.stderr)),
            on_row=sink.write,
            on_note=lambda note: _err(f"measure: note: {note}"),
        )
    except BaseException as err:
        sink.close()
        _keep_stopped_rows(out_path, stopped=isinstance(err, KeyboardInterrupt))
        raise
    sink.close()
    if not m.rows:
        measure_mod.write_measured(m, out_path)
    _say_measured(m, command, out_path)
    if sink.error:  # the command ran to its end; what it measured after the disk filled is not kept
        raise FileSystemError(sink.error)
    if label:
        _import_measured(root, out_path, label, m.rows)
    if as_json:
        echo_json(_measured_json(m, command, out_path))
    sys.exit(_measured_exit(m))


def _check_outputs(out_path: Path, matrix: Path, root: Path) -> None:
    """measure's output and its trace beside it, checked before the command runs (core.paths.output_file
    with refuse_nodes: no device, symlink, matrix file, store file or results digest folder; exit 4)."""
    for written in (out_path, out_path.with_suffix(".trace.jsonl")):
        output_file(
            written, option="--output", protected=(matrix,), data_root=root, replaces=False, refuse_nodes=True
        )


def _measured_exit(m) -> int:
    """measure's exit code: the command's; a command killed by signal N 128 + N, as a shell says it
    (Popen gives -N); 3 for a command that exited 0 while a GPU fault appeared in the kernel log."""
    code = 128 - m.exit_code if m.exit_code < 0 else m.exit_code
    return 3 if m.kernel_fault and code == 0 else code


def _measured_flags(m) -> list[str]:
    """The telemetry flags of the run: every row's and the whole window's, sorted."""
    return sorted(
        {f for r in m.rows for f in r.get("toolkit_flags") or []} | set(m.window.get("flags") or [])
    )


def _measured_json(m, command, out_path: Path) -> dict:
    """`measure --json`'s result, the summary it prints on stderr: {command (argv list), exit_code
    (measure's, as `_measured_exit`), seconds (wall time of the command), rows (llama-bench rows
    measured), flags, output (the JSONL written), trace, kernel_fault (null when none)}."""
    return {
        "command": list(command),
        "exit_code": _measured_exit(m),
        "seconds": round(m.seconds, 3),
        "rows": len(m.rows),
        "flags": _measured_flags(m),
        "output": out_path,
        "trace": out_path.with_suffix(".trace.jsonl"),
        "kernel_fault": m.kernel_fault or None,
    }


class _RowFile:
    """`measure`'s output: one JSON row per line, flushed as it arrives. A failed write (disk full)
    stops the writing, never the measured command; `error` then names the path, the rows kept there
    and the rows lost, for the run's last message (exit 8). Opened by the store's one writing open
    (results.open_regular, `root` the results root): a link there, or at a folder below the root,
    planted since _check_outputs looked, is BadInput (exit 4) naming it, never written through."""

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        fd = open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, root=root)
        self.file: Any = os.fdopen(fd, "w", encoding="utf-8")
        self.kept = 0
        self.lost = 0
        self.why: str | None = None

    def write(self, row: dict) -> None:
        if self.why is None:
            try:
                self.file.write(json.dumps(row) + "\n")
                self.file.flush()
                self.kept += 1
                return
            except OSError as err:
                self.why = err.strerror or str(err)
                self.close()
        self.lost += 1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()

    @property
    def error(self) -> str | None:
        if self.why is None:
            return None
        return (
            f"{self.path}: {self.why} while writing the measured rows: the first {self.kept} row(s) are "
            f"kept there (the last may be torn), the {self.lost} later row(s) are lost; free space and "
            "measure again"
        )


def _keep_stopped_rows(out_path: Path, *, stopped: bool) -> None:
    """After a run that did not end by itself: the empty output file removed. A stopped run (Ctrl-C, SIGTERM,
    SIGHUP: `stopped`): say what stopped it, that the command's process group was stopped, and where the rows
    measured before the stop are (or that there were none). An error (a program that cannot be started, ...):
    only where rows measured before it are, if any; the error says the rest."""
    kept = out_path.stat().st_size > 0
    if not kept:
        out_path.unlink(missing_ok=True)
    if stopped:
        said = f"measure: stopped by {signals.stopped_by()}; the command and what it started were stopped; "
        where = f"the rows measured before the stop are in {path_text(out_path)}"
        _err(said + (where if kept else "no llama-bench row had been measured, nothing was kept"))
    elif kept:
        _err(f"measure: the rows measured before the error are in {path_text(out_path)}")


def _pass_bytes(stream: Any) -> Any:
    """A writer of the measured command's bytes to `stream` as they come, exactly (any line length,
    bytes that are not UTF-8): `measure` is a wrapper like `time`, its command's output is its own.
    A stream that refuses writes (its reader gone: `| head`; a full disk) takes no more of it, said once
    on stderr, and the command is still measured (it was killed, its record lost: exit 1, no word)."""
    out = getattr(stream, "buffer", None)
    refused: list[str] = []

    def write(chunk: bytes) -> None:
        if refused:
            return
        try:
            if out is not None:
                out.write(chunk)
                out.flush()
            else:  # a text stream without a buffer (a test's capture)
                stream.write(chunk.decode(errors="replace"))
        except OSError as err:
            refused.append(err.strerror or str(err))
            name = "standard error" if stream is sys.stderr else "standard output"
            with contextlib.suppress(OSError, ValueError, AttributeError):  # later flushes meet /dev/null
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())
                os.close(null)
            with contextlib.suppress(OSError):  # stderr refusing too: nowhere left to say it
                _err(
                    f"measure: {name}: {refused[0]}: the command's output no longer passes through; "
                    "it is still measured (its rows and record are written as usual)"
                )

    return write


def _say_measured(m, command, out_path: Path) -> None:
    """The run's summary on stderr: exit code, seconds, rows, flags, where written; a kernel GPU fault."""
    flags = _measured_flags(m)
    foreign = f" ({m.foreign} not measured by it: no telemetry)" if m.foreign else ""
    _err(
        f"measure: {shlex.join(command)} {_ended(m.exit_code)} after {m.seconds:.1f} s; {len(m.rows)} llama-bench row(s){foreign}; "
        f"flags: {', '.join(flags) or 'none'}; written to {path_text(out_path)} (trace {path_text(out_path.with_suffix('.trace.jsonl'))})"
    )
    if m.kernel_fault:
        _err(f"measure: {m.kernel_fault}")
    if m.facts.get("trace_error"):
        _err(f"measure: warning: telemetry trace {m.facts['trace_error']}")


def _ended(code: int) -> str:
    """`exited 3`, or `was killed by SIGKILL (exit 137)` for a command a signal ended (Popen's -N)."""
    if code >= 0:
        return f"exited {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name} (exit {128 - code})"


def _import_measured(root: Path, out_path: Path, label: str, rows: list) -> None:
    """`measure --label`: import the llama-bench rows written to `out_path` into the results under `root`."""
    from toolkit.results import importer
    from toolkit.results.records import ResultStore

    if not rows:
        _err("measure: no llama-bench rows to import (run llama-bench with -o jsonl)")
        return
    res = importer.import_files(
        ResultStore(root), [out_path], label=label, on_wait=lambda t: _err(f"measure: {t}")
    )
    for s in res.sets:
        _err(f"measure: {s.name}: imported {s.records} result{'' if s.records == 1 else 's'} as {s.digest}")


@click.command("fetch-model", epilog=EPILOG)
@matrix_option
@click.argument("names", nargs=-1, metavar="MODEL...")
@click.option(
    "--twin",
    is_flag=True,
    help="Read only the GGUF header of the Hub file (HTTP range requests) and "
    "write a shape twin beside `path` (X.twin.gguf: same metadata, tokenizer, tensor names, shapes, types "
    "and size; random data with valid scales) plus its record X.twin.gguf.twin.json (kind synthetic-twin).",
)
@json_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what would be generated or downloaded, and from where; fetch, write and pin nothing.",
)
def fetch_model(matrix_path, names, twin, as_json, dry_run):
    """Download models named in matrix.yaml from the Hugging Face Hub (huggingface_hub) to their `path`,
    then check their sha256 when the matrix pins one. Tiny stand-ins are generated instead.

    \b
    Example: toolkit fetch-model qwen3-30b-a3b-q4kxl          (downloads about 17 GB)
             toolkit fetch-model qwen3-30b-a3b-q4kxl --twin   (reads a few MB, writes a full-size twin)
    """
    from toolkit.models.fetch import fetch_model as fetch

    lm = _load(matrix_path)
    out = []
    for spec in lm.select_models(names):
        status = _fetch_plan(lm, spec, twin) if dry_run else fetch(lm, spec, echo=_err, twin=twin)
        out.append(_fetched_json(lm, spec, twin, status))
        if not as_json:
            click.echo(f"{spec.name}: {status}")
    if as_json:
        echo_json(out)


def _model_file(lm, spec, twin: bool) -> Path:
    """Where fetch-model puts `spec`: its `path`, or the shape twin beside it (X.twin.gguf)."""
    from toolkit.models import twin as twin_mod

    path = lm.resolve(spec.path, what=f"models[{spec.name}].path")
    return twin_mod.twin_path(path) if twin else path


def _fetch_plan(lm, spec, twin: bool) -> str:
    """fetch-model --dry-run's line for `spec`: what would be generated or downloaded (nothing is)."""
    from toolkit.models.tiny import namesake_refusal

    path = _model_file(lm, spec, twin)
    if path.exists():
        return f"{path_text(path)} present (dry run: its sha256 is checked only by a real fetch)"
    if spec.generate:
        return (
            namesake_refusal(path, spec.generate, named=lm.model_paths())
            or f"would generate {path_text(path)} ({spec.generate})"
        )
    if spec.hf is None:
        return f"{path_text(path)} is absent and no `hf:` repo is given to fetch it from"
    what = "read the GGUF header of" if twin else "download"
    at = spec.hf.revision or "the commit the Hub resolves now (then pinned in the matrix as revision:)"
    return f"would {what} {spec.hf.repo}/{spec.hf.file or ''} at {at} to {path_text(path)}"


def _fetched_json(lm, spec, twin: bool, status: str) -> dict:
    """One model of `fetch-model --json`: {model, path, exists, size_bytes (null when absent),
    sha256 (the matrix's pin, verified by a real fetch; null when it pins none), twin, status}."""
    path = _model_file(lm, spec, twin)
    return {
        "model": spec.name,
        "path": path,
        "exists": path.exists(),
        "size_bytes": path.stat().st_size if path.is_file() else None,
        "sha256": None if twin else spec.sha256,
        "twin": twin,
        "status": status,
    }
