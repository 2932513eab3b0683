"""Commands that read results: `toolkit report`, `toolkit compare`, `toolkit import`.

Registered on the main group in toolkit.cli.main (cli.add_command); thin like the rest of the CLI.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from toolkit.cli.common import (
    EPILOG,
    FormatChoice,
    _err,
    echo_json,
    given_options,
    human_format,
    json_option,
    matrix_option,
    note_json,
    output_option,
    output_parent,
    percent_option,
    read_results_option,
    results_folder,
    results_option,
    terminal_width,
)
from toolkit.core import invocation
from toolkit.core.backends import IMAGE_BACKENDS
from toolkit.core.errors import BadInput, Regression
from toolkit.core.text import path_text, plain_ascii, shell_join
from toolkit.core.types import is_sha256


@click.command(epilog=EPILOG)
@matrix_option
@read_results_option
@click.option(
    "--format",
    "fmt",
    type=FormatChoice(["text", "github", "csv", "json", "html"]),
    is_eager=True,
    callback=lambda ctx, param, value: value if value is None else note_json(ctx, param, value),
    default=None,
    help="text = sized to the terminal (long tables in blocks, the roofline and tok/J columns dropped "
    "and said when they do not fit); github (or md) = markdown tables to paste; csv/json for tools; html = one "
    "offline page with plots (written to --output, default results/report.html; a folder `toolkit export-run` "
    "wrote is never written into: --output is needed). Default: the form "
    "--output's name ends in (.html/.htm, .csv, .json; .md and others: github), else text when stdout is a "
    "terminal, else github (a pipe gets markdown).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    is_eager=True,
    callback=note_json,
    help="Same as --format json: the report document itself (not the envelope other commands' --json "
    "print; an error is the envelope).",
)
@click.option(
    "--image", "-i", "images", multiple=True, metavar="NAME", help="Only results of this image name."
)
@click.option(
    "--run",
    "runs",
    multiple=True,
    metavar="RUN_ID",
    help="Only results of this bench run (its id, or its start where that names one run: 20261205T1926), "
    "or of this tune session or campaign (its id: every trial or job run).",
)
@output_option(
    stdout=True, help="Write the report to this file (PNG plots beside an html report) instead of stdout."
)
@click.option(
    "--plots",
    "plots_dir",
    type=click.Path(file_okay=False),
    callback=output_parent,
    default=None,
    help="Also write the plots as PNG files into this folder.",
)
@percent_option(
    "--noisy-threshold", 5.0, "Flag rows `noisy` whose standard deviation exceeds this share of the mean."
)
@percent_option(
    "--bw-floor",
    5.0,
    "Flag GPU decode rows `bw-below-floor` that imply less than this share of the GPU's peak "
    "memory bandwidth.",
)
@percent_option(
    "--min-margin", 3.0, "Smallest margin the verdict calls a win (it also needs 2x the combined noise)."
)
@click.option(
    "--title",
    default=None,
    metavar="TEXT",
    help="The report's title (the html page's heading; default: the model(s) measured).",
)
def report(
    matrix_path,
    results_dir,
    fmt,
    as_json,
    images,
    runs,
    output,
    plots_dir,
    noisy_threshold,
    bw_floor,
    min_margin,
    title,
):
    """Tables per image on the axes — prefill (pp2048 ub512, ...), decode (tg128), served throughput per
    concurrency — tok/s ± standard deviation, newest result per test, with each row's flags
    (ub-no-effect, cpu-fallback, noisy, bw-below-floor, bw-above-peak, compute-above-peak, and what
    telemetry saw: gpu-shared, throttled, ...), each explained under the tables; tokens per joule where
    the GPU energy is valid, a roofline column where the GPU is known, and a verdict with a routing rule
    (prefill-heavy / latency-bound decode / mixed) that crowns no cell flagged by telemetry or above
    the GPU's peak. The html page also plots
    GPU power and clocks over each run shown."""
    # a suggested report writes no file: nor an html page's format (pasted, it wrote results/report.html, or
    # was refused in an export's folder)
    leave_out = ("matrix_path", "results_dir", "output", "plots_dir", *["fmt"] * (fmt == "html"))
    invocation.own(given_options(click.get_current_context(), leave_out))  # kept by the reports it suggests
    root = _need_results_folder(
        _results_root(matrix_path, results_dir), matrix_path, results_dir, "report", named=False
    )
    fmt = fmt or _named_format(output) or human_format(output)
    if (
        fmt in ("github", "text")
        and not (as_json or output or plots_dir or images or runs)
        and _no_records(root)
    ):
        from toolkit.results import no_results  # said without loading the report stack (~0.3 s)

        click.echo(no_results())
        return
    from toolkit.analysis import hidden as hidden_mod
    from toolkit.analysis import report as report_mod
    from toolkit.analysis.facts import ReportOptions
    from toolkit.results.identity import keys_cached

    fmt = "json" if as_json else fmt
    drawn = fmt == "html" or bool(plots_dir)  # plots: matplotlib's figures are reference cycles
    dest = _report_file(output, fmt, root, matrix_path)  # a bad --output refused before records load
    with keys_cached(), _uncollected(not drawn):  # keys_cached: a record's test key read from the index
        store, recs = _report_records(root, images, runs)
        opts = ReportOptions(
            noisy=noisy_threshold / 100, bw_floor=bw_floor / 100, min_margin=min_margin / 100
        )
        text, written, plot_notes = report_mod.publish(
            recs,
            fmt,
            opts=opts,
            output=dest,
            plots_dir=Path(plots_dir) if plots_dir else None,
            refused=store.refused,
            results_root=root,
            title=title,
        )
        hidden = (
            None
            if runs
            else hidden_mod.hidden_note(hidden_mod.hidden_clean_runs(store, recs, images=images), results_dir)
        )
    if text is not None:  # one newline at the end, as the -o file has (csv's writer ends its own line)
        _echo_report(text)
    if hidden:
        _err_wrapped(f"note: {hidden}")
    for p in written:
        _err(f"wrote {path_text(p)}")
    for n in plot_notes:
        _err(f"note: {n}")
    for w in store.warnings:
        _err(f"warning: {w}")


def _err_wrapped(line: str) -> None:
    """`line` on stderr, wrapped to the terminal's width as the text report's own lines are
    (table_text.wrap); whole off a terminal (a log: one line to grep)."""
    from toolkit.analysis.table_text import wrap

    width = terminal_width(sys.stderr)
    _err("\n".join(wrap(line, width)) if width else line)


def _named_format(output: str | None) -> str | None:
    """The report form `--output`'s file name asks for when --format is not given: `report.html` an html
    page (it was written as markdown under that name), `.csv` csv, `.json` json; None for any other."""
    suffix = Path(output).suffix.lower() if output else ""
    return {".html": "html", ".htm": "html", ".csv": "csv", ".json": "json"}.get(suffix)


def _echo_report(text: str) -> None:
    """click.echo of a report's text, with one newline at the end. A plain ASCII text (json: nothing
    terminal_safe would strip, text.plain_ascii) goes a MiB at a time: no 10 MB encoded copy of a
    10 MB report beside it; any other text in one piece."""
    nl = not text.endswith("\n")
    if not (text.isascii() and plain_ascii(text)):
        click.echo(text, nl=nl)
        return
    piece = 1 << 20
    for i in range(0, len(text), piece):
        click.echo(text[i : i + piece], nl=False)
    if nl:
        click.echo("")


def _report_records(root: Path, images: tuple[str, ...], runs: tuple[str, ...]):
    """(the ResultStore of `root`, the records a report of these images / runs shows: index.select,
    through results/.index.sqlite); BadInput when a filter matches nothing. The records are frozen
    (gc.freeze: no collection walks them again while the report is made, ~1 CPU s at 10,000 shown);
    the caller unfreezes them once it has published."""
    from toolkit.results import index as resultindex
    from toolkit.results.records import ResultStore

    store = ResultStore(root)
    runs = tuple(
        x for r in runs for x in resultindex.full_run_ids(store, r)
    )  # a start, a group (tune session, campaign)
    images, digests = _image_filter(store, images)
    collecting = gc.isenabled()
    gc.disable()  # until frozen: a collection between the load and the freeze would walk every record
    try:
        recs = resultindex.select(store, images=images or None, runs=runs or None, digests=digests)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
    if images or runs:
        shown_images, shown_runs = {r.image.name for r in recs}, {r.run_id for r in recs}
        if not recs or any(i not in shown_images for i in images) or any(r not in shown_runs for r in runs):
            _need_filter_match(store, root, images, runs, empty=not recs)
    return store, recs


def _image_filter(store, images: tuple[str, ...]) -> tuple[tuple[str, ...], list[str] | None]:
    """(the image names, the digests or None for all) that --image values name: a name (whole, even one
    with `@`: an import's --label), or an image label as reports show it (`cpu@abd88fb000be`: that
    image's digests by that prefix, index.digest_matches; the name is all before the last `@`).
    BadInput naming the label and the image's digests where its digest is not one of that image's."""
    from toolkit.results import index as resultindex

    labels = [i for i in images if "@" in i and not resultindex.heads(store, images=(i,))]
    if not labels:
        return images, None
    names = tuple(dict.fromkeys(i.rpartition("@")[0] if i in labels else i for i in images))
    have = {(h.image.name, h.image.digest) for h in resultindex.heads(store, images=names)}
    digests: list[str] = []
    for ref in images:
        name = ref.rpartition("@")[0] if ref in labels else ref
        mine = sorted(
            d for n, d in have if n == name and (ref not in labels or resultindex.digest_matches(d, ref, n))
        )
        if not mine and ref in labels:
            theirs = ", ".join(sorted(d[:19] for n, d in have if n == name)) or "none"
            raise BadInput(
                f"no results match {ref!r}: image {name or '(no name)'}'s digests here: {theirs}; fix --image"
            )
        digests += mine
    return names, digests


@contextlib.contextmanager
def _uncollected(on: bool) -> Iterator[None]:
    """The garbage collector off while a report is made (`on`; its Facts, tables and texts hold no
    reference cycles: 10,000 records shown took ~330 collections, ~70 ms), as it was after; off only
    where asked (not where plots are drawn: html, --plots). The records _report_records froze are
    unfrozen on the way out, an error's included (a BadInput mid-report left ~40,000 objects of 6
    records in the permanent generation of a process that goes on: a test run, a caller of the CLI)."""
    collecting = gc.isenabled()
    if on:
        gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if collecting:
            gc.enable()


def _report_file(output: str | None, fmt: str, root: Path, matrix_path: str) -> Path | None:
    """Where the report goes (--output, else results/report.html for html, else stdout: None),
    checked before anything is written (core.paths.output_file: no device, link, matrix or store file).
    An html page of a folder `toolkit export-run` wrote (someone's published run, read only) needs
    --output: BadInput (exit 4) naming a file beside that folder."""
    from toolkit.core.paths import output_file, typed
    from toolkit.results import exported_run

    if fmt == "html" and not output and exported_run(root):
        page = typed(root.resolve().parent / f"{root.resolve().name}-report.html")
        raise BadInput(
            f"{path_text(root)} is a run `toolkit export-run` wrote, read here, never written into: name the "
            f"page with --output, e.g. `{shell_join(['toolkit', 'report', '--results', typed(root), '--format', 'html', '-o', page])}`"
        )
    dest = Path(output) if output else (root / "report.html" if fmt == "html" else None)
    if dest is not None:
        output_file(dest, option="--output", protected=(Path(matrix_path),), data_root=root)
    return dest


def _no_records(root: Path) -> bool:
    """No results file with anything in it under `root` (results/<digest12>/bench.jsonl, a campaign's
    results/hosts/<key>/<digest12>/bench.jsonl): what ResultStore would read, found without reading it."""
    from toolkit.results import bench_files

    return not any(f.is_file() and f.stat().st_size for f in bench_files(root))


def _results_root(matrix_path: str, results_dir: str | None) -> Path:
    """The results folder: --results, else results/ beside matrix.yaml."""
    return Path(results_dir) if results_dir else Path(matrix_path).resolve().parent / "results"


def _need_results_folder(
    root: Path, matrix_path: str, results_dir: str | None, *words: str, named: bool
) -> Path:
    """`root`; BadInput when the results folder does not exist: never "no results yet" from the wrong
    folder, and never a page written there. A project's own results/ not made yet is nothing measured
    yet, one state with an empty folder (docs/exit-codes.md): `root` for a command that shows what is
    there (report: "no results yet", exit 0), BadInput for one `named` what to read (compare A B).
    `words`: the command and its arguments, for the hint in an export's folder (need_records_beside)."""
    from toolkit.publish import REPRODUCED
    from toolkit.results import fill_results, need_records_beside

    if not results_dir:  # in an export's folder: its records, not "no results yet"
        need_records_beside(root, words, REPRODUCED)
    if root.is_dir():
        return root
    if not results_dir and Path(matrix_path).is_file():  # the project is here: nothing measured yet
        if not named:
            return root
        raise BadInput(
            f"no results yet: {path_text(root)} does not exist (nothing was measured or imported in this project); "
            f"run {fill_results()}, or pass --results DIR"
        )
    where = "" if results_dir else f" (beside {path_text(matrix_path)}, which is not here)"
    from toolkit.matrix.api import project_hint

    raise BadInput(f"no results folder at {path_text(root)}{where}: {project_hint('--results DIR')}")


def _need_filter_match(
    store, root: Path, images: tuple[str, ...], runs: tuple[str, ...], *, empty: bool = True
) -> None:
    """BadInput naming the images and newest runs there are when the filter, not the folder, is empty
    (`empty`), or when an --image / --run names nothing stored (a typo beside a name that matched:
    `-i hip -i hpi` showed hip alone, silently); each unknown name with the stored name nearest it
    (matrix.api.nearest: `did you mean 'hip'?`). Nothing when the folder holds no record, or when
    the filter matched records and every name it gives is stored."""
    from toolkit.results import index as resultindex

    have = resultindex.heads(store)
    if not have:
        return
    from toolkit.matrix.api import nearest

    known_images = sorted({h.image.name for h in have})
    newest = resultindex.runs_newest_first(have)  # written last first, imports too
    all_runs = list(dict.fromkeys(h.run_id for h in newest))
    unknown = [
        f"{kind} {name}{(kind == 'run' and resultindex.short_run_start(name, known)) or nearest(name, known)}"
        for kind, names, known in (("image", images, known_images), ("run", runs, all_runs))
        for name in names
        if name not in known
    ]
    if not empty and not unknown:
        return
    asked = " and ".join(
        x
        for x in (
            f"image {', '.join(images)}" if images else "",
            f"run {', '.join(runs)}" if runs else "",
        )
        if x
    )
    raise BadInput(
        f"{path_text(root)}: no record of {'; '.join(unknown) if unknown else asked} "
        f"({len(have)} records there; images: {', '.join(known_images)}; "
        f"newest runs first: {', '.join(all_runs[:5])}): fix --image / --run"
    )


@click.command(epilog=EPILOG)
@matrix_option
@read_results_option
@json_option
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@percent_option(
    "--threshold",
    5.0,
    "A test slower in B than in A by more than this, and by more than the noise (twice the combined "
    "relative stddev), on cells without a telemetry or above-peak flag, is a regression (exit code 6).",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    metavar="FIELD",
    help="Leave this test field out of the join on purpose (e.g. n_threads when A and B ran on hosts "
    "with different core counts); its values are shown per side. Repeatable. A field the test's name is "
    "made of (n_prompt, n_gen, n_depth, n_ubatch, concurrency, ...) is refused: pp512 and pp1024 are two tests.",
)
@click.option(
    "--allow-missing",
    is_flag=True,
    help="Accept tests measured on one side only (they are still named); without it they make the exit code 4.",
)
@click.option(
    "--same-model",
    is_flag=True,
    help="Join results whose model is unknown (imported rows that name no model, no model_filename or "
    "model_type, as a vLLM bench JSON names none: imported as model=unknown) "
    "as if both sides measured the same model; without it they are joined with nothing (exit 4).",
)
@click.option(
    "--format",
    "fmt",
    type=FormatChoice(["text", "github"]),
    default=None,
    help="text = sized to the terminal (the table in blocks where it is too wide, lines wrapped); github (or "
    "md) = markdown to paste. Default: text when stdout is a terminal, else github (as `toolkit report`).",
)
@click.option(
    "--against",
    "against",
    default=None,
    type=click.Path(file_okay=False, exists=True),
    callback=results_folder,
    metavar="DIR",
    help="A second results folder (another host's, or a folder `toolkit export-run` wrote) to read B from; A is read "
    "from --results. Default: both from --results.",
)
def compare(
    matrix_path, results_dir, as_json, a, b, threshold, ignore, allow_missing, same_model, fmt, against
):
    """Compare two builds test by test: tok/s of A (baseline), tok/s of B, speedup B/A (and tokens per
    joule of each, B/A, where both sides have a valid GPU energy).

    A and B are each an image digest (or a prefix of at least 4 of its hex digits), an image name (its latest build) or a bench
    run id (or its start where that names one run: 20261205T1926), both of --results, or B of a second results folder with --against DIR (another host's
    results compared without importing them). Rows are joined on the one test identity (every llama-bench setting both sides recorded —
    prompt/gen/depth, batch, micro-batch, flash attention, GPU layers, threads, n_cpu_moe, KV types,
    split mode... — and the model); regressions beyond --threshold and the noise are marked and make
    the exit code 6, for CI gates; a slowdown or speedup within noise, or on a cell flagged host-busy, gpu-shared,
    throttled..., is shown and named but not counted (re-measure it). Two sides with no test in common exit 4, naming the fields that differ; tests
    measured on one side only are named and exit 4 too, unless --allow-missing (a regression's exit 6
    comes first: its message names them too). A test whose model is
    unknown (model=unknown: a vLLM import) is never taken for the same model as another's, unless
    --same-model.
    """
    from toolkit.analysis import compare as compare_mod
    from toolkit.analysis import compare_text
    from toolkit.results.records import ResultStore

    root = _need_results_folder(
        _results_root(matrix_path, results_dir), matrix_path, results_dir, "compare", a, b, named=True
    )
    stores = [ResultStore(root), *([ResultStore(Path(against), read_only=True)] if against else [])]
    try:
        c = compare_mod.compare(
            stores[0],
            a,
            b,
            threshold=threshold,
            ignore=tuple(ignore),
            same_model=same_model,
            b_store=stores[1] if against else None,
            results=results_dir,
        )
    finally:  # each line skipped in either folder, as report names them (once: the index is asked twice)
        for w in dict.fromkeys(w for s in stores for w in s.warnings):
            _err(f"warning: {w}")
    if as_json:
        echo_json(compare_text.comparison_json(c))
    else:
        click.echo(compare_text.format_comparison(c, fmt or human_format()))
    if c.regressions:
        raise Regression(
            f"{len(c.regressions)} test(s) slower in {c.b.label} than in {c.a.label} by more than "
            f"{threshold:g}%: {', '.join(r.test for r in c.regressions)}"
            + (f"; also not compared: {c.missing_text()}" if c.missing else "")
        )
    if c.missing and not allow_missing:
        raise BadInput(f"not every test was compared: {c.missing_text()}; {c.missing_fix()}")


@click.command("import", epilog=EPILOG)
@matrix_option
@results_option
@json_option
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--label",
    required=True,
    metavar="NAME",
    help="Image name to file the results under (e.g. bare-metal-hip).",
)
@click.option(
    "--backend",
    type=click.Choice(list(IMAGE_BACKENDS)),
    default=None,
    help="Backend of the build that ran. Default: from the rows' `backends` field; rows that name "
    "another GPU backend are bad input (exit 4), rows that name only the CPU are kept, flagged cpu-fallback.",
)
@click.option(
    "--model-sha256",
    default=None,
    metavar="HEX",
    help="sha256 of the model file, so compare joins it with container runs of the same file.",
)
@click.option(
    "--digest",
    default=None,
    metavar="ID",
    callback=lambda ctx, param, value: f"sha256:{value}" if is_sha256(value) else value,
    help="Image ID (sha256:<64 hex>, or the 64 hex alone as Podman prints it) or import:NAME to file under. "
    "Default: import:<sha256 of the files' bytes>.",
)
@click.option(
    "--input-len",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="vLLM results: the prompt length asked (--input-len of `vllm bench`). Default: from the file "
    "name the toolkit's runner gives (lat-IN-OUT.json, serve-IN-OUT-cC.json, throughput-IN-OUT.json).",
)
@click.option(
    "--output-len",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="vLLM results: the output length asked (--output-len of `vllm bench`); a served result that "
    "generated fewer tokens is stored failed. Default: from the file name, as --input-len.",
)
def import_(
    matrix_path, results_dir, as_json, files, label, backend, model_sha256, digest, input_len, output_len
):
    """Import llama-bench output produced outside the toolkit (a bare-metal run, someone's published run)
    into results/, so `toolkit report` and `toolkit compare` show it beside container runs.

    Also reads `vllm bench latency | serve | throughput` result JSON (recognised by its keys) into the
    records our vLLM runner writes (same methods, axes and units); a served result that generated fewer
    tokens than asked is stored failed ("generated N of M requested tokens"). SGLang's `bench_serving`
    output (one JSON line per run) is read the same way, as SGLang's, with the lengths it says it was
    asked for; a run whose requests drew their lengths at random (random_range_ratio below 1) is refused.

    Reads -o jsonl, -o json (also a truncated array from a crashed run), -o csv, -o md (a markdown
    table, bare or pasted in a code fence after log lines) and -o sql of any llama.cpp vintage, also
    several runs appended to one file (`>> FILE`, with their stderr or not; each build its own set). Every
    row goes through one validity pass (also `toolkit bench`'s): a row whose field count differs from
    its header, without a test (n_prompt = n_gen = 0), with counts that are not whole numbers
    (n_threads 2.5), a batch of 0, a test_time that is no time or in the future, or whose tok/s is 0,
    not finite or contradicts avg_ns is refused by itself, named FILE:LINE. Rows of one
    import that measure the same test are kept as repetitions of one cell (flagged runs-disagree when
    they differ beyond noise). A file without a usable row is bad input (exit 4), and nothing is written.
    A row measured here before (imported, or by a bench) is left out and said. Refused rows are said, and
    given by --json, per reason: its count, its lines, its first rows.
    jsonl, json and csv are read as a stream, at any size (md and sql: up to 64 MiB).

    Only these tools' formats are read: another tool's file (GuideLLM, llama-benchy's table, an HTTP
    benchmark's table with test and t/s columns) is refused with what it looks like, never guessed at. To compare with
    another results folder, no import is needed: `toolkit compare A B --against DIR`.
    """
    from toolkit.results import importer
    from toolkit.results.import_read import NoneUsable
    from toolkit.results.records import ResultStore

    try:
        res = importer.import_files(
            ResultStore(_import_root(matrix_path, results_dir)),
            [Path(f) for f in files],
            label=label,
            backend=backend,
            model_sha256=model_sha256,
            digest=digest,
            input_len=input_len,
            output_len=output_len,
            on_wait=lambda text: click.echo(f"import: {text}", err=True),
        )
    except NoneUsable as err:  # every refusal in the JSON, as an import that kept rows gives them
        if as_json:
            echo_json({"refused": err.refused})
        raise
    if as_json:
        echo_json(res)
    else:
        _print_import(res, label)


def _import_root(matrix_path: str, results_dir: str | None) -> Path:
    """Where `toolkit import` writes: --results, else results/ beside the matrix. Where neither the
    matrix nor that results/ is there (run from another folder, `cd ~`), the import makes a results/
    of this folder's own and says so on stderr, naming the project: `toolkit report` here reads it, the
    project's report does not (the import said only where it wrote)."""
    from toolkit.results import refuse_export

    root = _results_root(matrix_path, results_dir)
    if not results_dir:
        refuse_export(root.parent, "import")
    if not (results_dir or Path(matrix_path).is_file() or root.is_dir()):
        from toolkit.matrix.api import project_hint

        _err(
            f"note: no {matrix_path} here: importing into {path_text(root)}, a results folder of this folder's "
            f"own (`toolkit report` run here reads it; the project's does not): for the project's, "
            f"{project_hint('--results DIR')}"
        )
    return root


def _print_import(res, label: str) -> None:
    """A line per result set imported (stdout), then each kind of row left out or noted (stderr), said
    once per reason (import_said.said_by_reason; repeated tests are counted by their own rule)."""
    from toolkit.results.import_said import said_by_reason
    from toolkit.results.records import imported

    def before(s) -> str:  # a set of rows a bench here measured: its image's (nc50b S7)
        return "imported" if imported(s.digest) else "measured here"

    if res.already:
        stored = ", ".join(dict.fromkeys(s.name for s in res.sets))
        how = " or ".join(dict.fromkeys(map(before, res.sets)))
        click.echo(f"{label}: these rows were {how} before, under the name {stored}; nothing added")
    for s in res.sets:
        where = ", ".join(f"{k}={v}" for k, v in s.system.items())
        state = (
            f"already {before(s)}"
            if s.already
            else f"imported {s.records} result{'' if s.records == 1 else 's'}"
        )
        click.echo(
            f"{s.name}: {state} as {s.digest}"
            + (f" ({where})" if where and len(res.sets) > 1 else "")
            + (f" into {path_text(s.path)}" if s.path else "")  # one line: a newline in it escaped
        )
    for what, lines in (
        ("row(s) refused (not a measurement)", res.refused),
        ("note(s) on rows read before, left out (a measurement is imported once)", res.duplicates),
        ("stddev repaired", res.repaired),
        ("line(s) skipped while parsing", res.skipped),
        ("test(s) measured by several rows", res.repeated),
        ("note(s) on the rows kept", res.notes),
        ("result(s) stored as failed", res.failed),
    ):
        if lines:  # repeated tests: the first ones named, the rest counted per file (one line each)
            count = res.repeated_tests if lines is res.repeated else len(lines)
            _err(f"{count:,} {what}:")
            for line in lines if lines is res.repeated else said_by_reason(lines):
                _err(f"  {line}")
