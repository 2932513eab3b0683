"""What a newcomer reads on a fresh host (a Debian 12 stand-in, its sudo user, rootless Podman 4: the
README's Podman line, then the commands a user tries next and what a customer is sent): each message
says its point once, right, with the way out.

- the folder `toolkit export-run` writes (what a customer is sent) read as "no results yet" (exit 0)
  under `toolkit report --results DIR`, and `toolkit compare A B --against DIR` found "no ok result"
  there (exit 4), though compare's --help names "an unpacked export's" folder and `toolkit import` of
  its results.jsonl sends the user to exactly these two commands: its results.jsonl (run.json beside
  it) is now read as a results folder's records are (results.bench_files);
- a folder beside a results folder given as one (results/<digest12>, one image's folder; the project
  folder, which holds results/) read as "no results yet" (exit 0) or "no ok result is stored under"
  it, and a bench wrote new digest folders into it: --results and --against now name the folder to
  pass instead (exit 4, cli.common.results_folder, results.results_near);
- the README export-run writes said `pip install -e /path/to/toolkit` and "by toolkit 0.1.0": nothing of
  which toolkit measured the run (run.json's host.toolkit.commit), so a customer reproduced with
  whatever toolkit they had (publish/run_folder.run_readme, _reproduce_lines).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.runs import bench_records, tk


def _store(tmp_path: Path):
    """A project-less results folder at tmp/results with two runs (run-a, run-b) of the CPU smoke sweep."""
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for run in ("run-a", "run-b"):
        for r in bench_records(run):
            store.add_result(r)
    return store


def test_an_exported_run_folder_reads_where_a_results_folder_does(tmp_path: Path) -> None:
    """`toolkit report --results EXPORT` said "no results yet" (exit 0) and `compare A B --against
    EXPORT` "no ok result is stored under EXPORT" (exit 4): an export's records are in results.jsonl,
    not <digest12>/bench.jsonl. Now both read them."""
    from toolkit.publish import run_folder

    store = _store(tmp_path)
    out = tmp_path / "sent"
    run_folder.export_run(store, "run-b", out, None)
    got = tk(tmp_path, "report", "--results", str(out), "--format", "github")
    assert got.returncode == 0 and "no results yet" not in got.stdout, got.stdout + got.stderr
    assert "| pp64 ub512" in got.stdout and "run-b" in got.stdout, got.stdout
    got = tk(
        tmp_path,
        "compare",
        "--results",
        "results",
        "run-a",
        "run-b",
        "--against",
        str(out),
        "--format",
        "github",
    )
    assert got.returncode == 0, got.stdout + got.stderr
    assert "t/s B: run run-b" in got.stdout and "no regression" in got.stdout, got.stdout


def test_a_folder_beside_a_results_folder_is_told_the_one_to_name(tmp_path: Path) -> None:
    """One image's folder (results/<digest12>) or the folder holding results/ named as --results or
    --against: "no results yet" (exit 0) or "no ok result is stored under" it, and bench wrote digest
    folders into it. Now exit 4 naming the folder to pass; a fresh empty folder is still "no results yet"."""
    _store(tmp_path)
    digest_dir = next((tmp_path / "results").glob("*/bench.jsonl")).parent
    got = tk(tmp_path, "report", "--results", str(digest_dir))
    assert got.returncode == 4, got.stdout + got.stderr
    assert (
        f"is one image's folder inside a results folder (it holds bench.jsonl): pass --results {tmp_path / 'results'}"
        in got.stderr
    ), got.stderr
    got = tk(tmp_path, "report", "--results", ".")
    assert got.returncode == 4 and "the one it holds is results/: pass --results results" in got.stderr, (
        got.stderr
    )
    got = tk(tmp_path, "compare", "--results", "results", "run-a", "run-b", "--against", str(digest_dir))
    assert got.returncode == 4 and f"pass --against {tmp_path / 'results'}" in got.stderr, got.stderr
    got = tk(
        tmp_path, "bench", "--matrix", str(ROOT / "matrix.yaml"), "--results", ".", "--dry-run", "-i", "cpu"
    )
    assert got.returncode == 4 and "pass --results results" in got.stderr, got.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]  # nothing written beside it
    (tmp_path / "fresh").mkdir()
    got = tk(tmp_path, "report", "--results", "fresh")
    assert got.returncode == 0 and "no results yet" in got.stdout, got.stdout + got.stderr


def test_an_exported_readme_names_the_toolkit_commit_that_measured_the_run(tmp_path: Path) -> None:
    """The README of an export said `pip install -e /path/to/toolkit   # the toolkit` and "by toolkit
    0.1.0": a customer could not tell which toolkit to check out, though run.json records the commit
    bench ran (host.toolkit). Now both lines name it; a run that recorded none reads as before."""
    from toolkit.publish import run_folder
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-t"):
        r.host = {**(r.host or {}), "toolkit": {"version": "0.1.0", "commit": "ab" * 20}}
        store.add_result(r)
    for r in bench_records("run-u"):
        store.add_result(r)
    run_folder.export_run(store, "run-t", tmp_path / "t", None)
    text = (tmp_path / "t" / "README.md").read_text()
    assert "by toolkit 0.1.0; measured by toolkit 0.1.0 (commit abababababab)." in text, text
    assert (
        "pip install -e /path/to/toolkit   # the toolkit at commit abababababab (the one that measured"
        in text
    )
    run_folder.export_run(store, "run-u", tmp_path / "u", None)
    text = (tmp_path / "u" / "README.md").read_text()
    assert "measured by toolkit" not in text and "# the toolkit, on a host with Docker or Podman" in text, (
        text
    )


def test_a_run_id_is_found_by_its_start_where_that_names_one_run(tmp_path: Path) -> None:
    """`toolkit export-run 20261205T192620Z` (the run id bench printed, without its `-a8edce` tail) was
    refused, and the refusal listed the 5 newest runs: after a few imports, not the user's bench run.
    The start of a run id names that run where it names one (export-run, reproduce, report --run);
    where it begins several, they are named; a start shorter than 8 characters is no run id."""
    from toolkit.core.errors import BadInput
    from toolkit.publish import run_folder
    from toolkit.results import index as resultindex
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for run in ("20261128T192620Z-a8edce", "20261128T192999Z-000001", "20261128T192999Z-000002"):
        for r in bench_records(run):
            store.add_result(r)
    assert resultindex.full_run_id(store, "20261128T192620Z") == "20261128T192620Z-a8edce"
    assert resultindex.full_run_id(store, "20261128T192620Z-a8edce") == "20261128T192620Z-a8edce"
    assert resultindex.full_run_id(store, "2026") == "2026"  # too short to name a run: as given
    assert resultindex.full_run_id(store, "20271205") == "20271205"  # none: the caller says what is stored
    with pytest.raises(
        BadInput, match=r"begins 2 stored runs: 20261128T192999Z-00000[12], .*give more of it"
    ):
        resultindex.full_run_id(store, "20261128T1929")
    run = run_folder.export_run(store, "20261128T19262", tmp_path / "out", None)
    assert run.run_id == "20261128T192620Z-a8edce" and run.records["total"] == len(bench_records("x"))
    got = tk(
        tmp_path,
        "report",
        "--results",
        str(tmp_path / "results"),
        "--run",
        "20261128T192620",
        "--format",
        "csv",
    )
    assert got.returncode == 0, got.stderr
    assert "20261128T192620Z-a8edce" in got.stdout and "20261128T192999Z" not in got.stdout, got.stdout[:400]
