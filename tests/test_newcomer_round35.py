"""What a newcomer meets handing a run to a customer (a Debian 12 stand-in, root, Docker: the README's
main job, then `toolkit report`, `toolkit export-run`, and as the customer the export's Reproduce
block, `toolkit report --results .`, `--format html`, `toolkit compare A B --against EXPORT`): each
message says its point once, right, with the way out.

- `toolkit report --results . --format html` in the export of the CPU smoke run said "note: cpu@...
  run ...: no power plot: its telemetry trace is missing (920079bd8d07/telemetry/RUN-tiny-qwen3moe.jsonl)":
  a CPU image's run has no GPU to plot (the project's own html report says nothing of it), and an
  export never carries a trace, so no customer could mend it. A CPU run's missing trace is no note;
  a GPU run's in an export says an export carries the telemetry summary, not the trace
  (plots._missing_note).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.records import make_record
from tests.support.runs import bench_records, tk
from toolkit.analysis import plots, tables

RUN = "20261128T195135Z-e6f7c7"
TELEMETRY = {"t0": 1.0, "t1": 2.0, "samples": 10}


def test_a_missing_trace_note_says_why_an_export_has_none_and_is_no_note_for_a_cpu_run(
    tmp_path: Path,
) -> None:
    """Three folders: a project's results/ (a GPU run's trace missing: the place looked in, as
    before), an export (run.json beside results.jsonl: the export carries no trace, the measuring
    project plots it) and either with a CPU run's trace missing (no note: nothing to plot)."""
    gpu = make_record("rocm", "rocm", p=512, avg=1000.0, sd=10.0, telemetry=TELEMETRY)
    cpu = make_record("cpu", "cpu", p=512, avg=100.0, sd=1.0, telemetry=TELEMETRY)
    project, export = tmp_path / "results", tmp_path / "export"
    for d in (project, export):
        d.mkdir()
    (export / "run.json").write_text("{}")
    _, notes = plots.telemetry_figures(tables.tables([gpu]), project)
    assert len(notes) == 1 and "its telemetry trace is missing" in notes[0] and str(project) in notes[0], (
        notes
    )
    _, notes = plots.telemetry_figures(tables.tables([gpu]), export)
    assert len(notes) == 1 and "trace is missing" not in notes[0], notes
    assert "`toolkit export-run`" in notes[0] and "not the trace" in notes[0] and len(notes[0]) <= 400, notes
    for root in (project, export):
        assert plots.telemetry_figures(tables.tables([cpu]), root) == ({}, []), root


def test_the_html_report_of_an_exported_cpu_run_has_no_missing_trace_note(
    tmp_path: Path, matrix_data: dict
) -> None:
    """The stand-in's flow: a CPU run observed by telemetry (its trace in the project), export-run, then
    `report --results . --format html` in the export: the report is written, no "trace is missing"."""
    from tests.support.project import cpu_project
    from toolkit.matrix.api import load_matrix
    from toolkit.publish import run_folder
    from toolkit.results.records import ResultStore

    matrix = cpu_project(tmp_path / "project", matrix_data)
    store = ResultStore(matrix.parent / "results")
    for r in bench_records(RUN):
        store.add_result(r.model_copy(update={"telemetry": TELEMETRY}))
    out = tmp_path / "sent"
    run_folder.export_run(store, RUN, out, load_matrix(matrix))
    got = tk(out, "report", "--results", ".", "--format", "html", "-o", "report.html")
    assert got.returncode == 0 and (out / "report.html").is_file(), got.stderr
    assert "no power plot" not in got.stderr and "trace is missing" not in got.stderr, got.stderr


def test_export_run_help_names_every_file_it_writes(tmp_path: Path) -> None:
    """`export-run --help` listed run.json ... README.md but not toolkit-src.tar.gz, the file the
    export's README installs the toolkit from: every file export-run writes is named."""
    from toolkit.publish.run_folder import RUN_FILES, TOOLKIT_SOURCE

    got = tk(tmp_path, "export-run", "--help")
    assert got.returncode == 0, got.stderr
    text = " ".join(got.stdout.split())
    assert [f for f in (*RUN_FILES, TOOLKIT_SOURCE) if f not in text] == [], text


def test_a_rebuilt_image_line_says_its_id_differs_once() -> None:
    """`reproduce . --rebuild` printed "image cpu sha256:920079bd8d07: rebuilt as sha256:e8ab69e03208 in
    336.1 s; image ID differs from the record (rebuilt image ID differs from the measured one
    (timestamps, layers))": the point twice, nested brackets. The bracket now says only why."""
    from toolkit.publish import repro_output
    from toolkit.publish import reproduce as repro

    a, b = "sha256:" + "92" * 32, "sha256:" + "e8" * 32
    for unverified in ([], ["its source (no source_commit)"]):
        im = repro.ImageCheck(
            "cpu", a, "rebuilt", b, "toolkit-reproduce/cpu", 336.1, repro.rebuild_note(False, unverified)
        )
        rep = repro.Reproduction(RUN, "run-b", Path("/f"), Path("/r"), 5.0, images=[im])
        line = next(
            x for x in repro_output.format_reproduction(rep, "text").splitlines() if x.startswith("image cpu")
        )
        assert line.count("differs") == 1 and "))" not in line, line
        assert "image ID differs from the record (expected of a rebuild" in line, line
        assert ("cannot verify its source" in line) is bool(unverified), line
    assert repro.rebuild_note(True, []) == ""


@pytest.mark.skipif(
    not (Path(__file__).resolve().parents[1] / ".git").exists(),
    reason="needs the toolkit as a git checkout (it tells a commit the checkout lacks)",
)
def test_an_export_without_the_toolkit_source_says_why(tmp_path: Path, matrix_data: dict) -> None:
    """The customer's `toolkit export-run RUN --results reproduce/results -o DIR` (the toolkit pip
    installed from the export's toolkit-src.tar.gz: no git checkout) wrote no toolkit-src.tar.gz and
    said nothing of it; its README's install line became `pip install -e /path/to/toolkit`. A run naming
    a commit this checkout lacks (here: one no repository has) is exported the same way, now with a note
    (export-run's output, the README's notes) that says why and how to include it."""
    from tests.support.project import cpu_project
    from toolkit.results.records import ResultStore

    matrix = cpu_project(tmp_path / "project", matrix_data)
    store = ResultStore(matrix.parent / "results")
    for r in bench_records(RUN):
        r.host = {**(r.host or {}), "toolkit": {"version": "0.1.0", "commit": "ab" * 20}}
        store.add_result(r)
    got = tk(matrix.parent, "export-run", RUN, "-o", str(tmp_path / "out"))
    assert got.returncode == 0, got.stderr
    assert not (tmp_path / "out" / "toolkit-src.tar.gz").exists()
    said = " ".join((got.stdout + got.stderr).split())
    assert "no toolkit-src.tar.gz" in said and "lacks that commit" in said and "abababababab" in said, said
    assert "no toolkit-src.tar.gz" in (tmp_path / "out" / "README.md").read_text()
