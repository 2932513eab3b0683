"""Hostile and mistaken input against round 33's changes (breaker brk34): what --results and --against
say and refuse, and what export-run prints.

- `toolkit import FILE --results EXPORT` and `toolkit bench --results EXPORT` (a folder `toolkit
  export-run` wrote, now read as a results folder) wrote this host's records into the run a customer
  was sent (EXPORT/<digest12>/bench.jsonl), shown by `report --results EXPORT` as part of it and shipped
  by a re-export: a command that writes records refuses it (exit 4, cli.common.written_results_folder);
- the refusal of a folder beside a results folder printed the folder's name as it is, so a name holding
  an escape sequence (OSC 0 sets the terminal's title) reached the terminal: Click's own error output
  is not routed through terminal_safe; the name is printed with its controls escaped (path_text);
- `toolkit export-run 20261128T1926 -o DIR` said `run 20261128T1926: 6 results ...`: the prefix typed,
  not the run exported.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.project import ROOT
from tests.support.runs import bench_records, tk
from toolkit.publish import run_folder
from toolkit.results.records import ResultStore

RUN = "20261128T192620Z-a8edce"


def _export(tmp_path: Path) -> Path:
    store = ResultStore(tmp_path / "results")
    for r in bench_records(RUN):
        store.add_result(r)
    out = tmp_path / "sent"
    run_folder.export_run(store, RUN, out, None)
    return out


def test_a_command_that_writes_records_refuses_an_exported_run_folder(tmp_path: Path) -> None:
    out = _export(tmp_path)
    before = sorted(p.name for p in out.iterdir())
    row = ROOT / "tests" / "data" / "public" / "r25-rocwmma-gpt-oss-20b-fa.jsonl"
    got = tk(tmp_path, "import", str(row), "--label", "mine", "--results", "sent")
    assert got.returncode == 4, got.stdout + got.stderr
    assert "sent is a run folder `toolkit export-run` wrote" in got.stderr, got.stderr
    got = tk(
        tmp_path,
        "bench",
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--results",
        "sent",
        "--dry-run",
        "-i",
        "cpu",
    )
    assert got.returncode == 4 and "is a run folder `toolkit export-run` wrote" in got.stderr, got.stderr
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written into the customer's folder
    got = tk(tmp_path, "report", "--results", "sent", "--format", "github")  # reading it still works
    assert got.returncode == 0 and RUN in got.stdout, got.stdout + got.stderr


def test_a_folder_name_with_an_escape_sequence_is_printed_escaped(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "proj\x1b]0;pwned\x07" / "results")
    for r in bench_records(RUN):
        store.add_result(r)
    got = tk(tmp_path, "report", "--results", "proj\x1b]0;pwned\x07")
    assert got.returncode == 4, got.stdout + got.stderr
    assert "\x1b" not in got.stderr and "\x07" not in got.stderr, repr(got.stderr)
    assert "proj\\x1b]0;pwned\\x07 is not a results folder" in got.stderr, got.stderr


def test_export_run_by_the_start_of_a_run_id_names_the_run_it_exported(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    for r in bench_records(RUN):
        store.add_result(r)
    got = tk(
        tmp_path,
        "export-run",
        "20261128T1926",
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--results",
        "results",
        "-o",
        "out",
    )
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.startswith(f"run {RUN}: 6 results"), got.stdout


def test_a_fifo_in_an_export_named_with_an_escape_sequence_is_refused_without_the_escape(
    tmp_path: Path,
) -> None:
    """An export folder (run.json beside results.jsonl) whose results.jsonl is a FIFO: bench_files' refusal,
    raised through Click as --against's bad value, printed the folder's escape sequence as it is."""
    out = _export(tmp_path)
    evil = out.rename(tmp_path / "sent\x1b]0;pwned\x07")
    (evil / "results.jsonl").unlink()
    os.mkfifo(evil / "results.jsonl")
    got = tk(tmp_path, "compare", "--results", "results", "a", "b", "--against", evil.name)
    assert got.returncode == 4, got.stdout + got.stderr
    assert "not a regular file (a FIFO)" in got.stderr and "\x1b" not in got.stderr, repr(got.stderr)


def test_reading_an_export_writes_no_index_into_it(tmp_path: Path) -> None:
    """`toolkit report --results EXPORT` wrote a 73 KB .index.sqlite into the folder a customer is sent
    (and commits, as docs/publish.md says), which a re-export kept. An export's index is in memory."""
    from tests.support.runs import bench_records
    from toolkit.publish import run_folder
    from toolkit.results import index as resultindex
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-x"):
        store.add_result(r)
    out = tmp_path / "export"
    run_folder.export_run(store, "run-x", out)
    assert len(resultindex.select(ResultStore(out))) == len(bench_records("run-x"))
    assert not (out / resultindex.INDEX_NAME).exists(), sorted(p.name for p in out.iterdir())
