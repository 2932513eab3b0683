"""A tester's sixth round, on what changed with compare resolved in SQL (schema 6), the import into
large folders, reproduce/export-run of unknown ids and the report's internals. Each test is the
reproducer of one finding and fails on the code before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.project import DATA

ROOT = Path(__file__).resolve().parent.parent
ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"


def toolkit(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a process of its own (an argument may be bytes: argv that is not UTF-8)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args], cwd=cwd, env=env, capture_output=True, timeout=120
    )


def _out(p: subprocess.CompletedProcess) -> str:
    return p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def _imported(tmp_path: Path, label: str, results: str = "r", rows: Path = ROWS) -> Path:
    """`toolkit import` of the captured CPU rows into tmp_path/<results> as image `label` (the same
    file imported twice in one second is one run id: compare calls two such sides the same records)."""
    p = toolkit("import", "--results", results, "--label", label, str(rows), cwd=tmp_path)
    assert p.returncode == 0, _out(p)
    return tmp_path / results


def test_a_ref_or_filter_that_is_not_utf8_is_bad_input_not_a_traceback(tmp_path: Path) -> None:
    """argv byte 0xff reads as the lone surrogate "\\udcff", which sqlite3 cannot bind: compare (either
    side, --against too) and report --image/--run died with UnicodeEncodeError, exit 1."""
    _imported(tmp_path, "alpha")
    _imported(tmp_path, "delta", results="c")
    for args in (
        ["compare", "--results", "r", b"\xff", "alpha"],
        ["compare", "--results", "r", "alpha", "--against", "c", b"\xff\xfe"],
        ["report", "--results", "r", "--image", b"\xff"],
        ["report", "--results", "r", "--run", b"\xff"],
    ):
        p = toolkit(*args, cwd=tmp_path)
        out = _out(p)
        assert p.returncode == 4, out
        assert "Traceback" not in out
        assert "no results match" in out or "no record of" in out, out


def test_a_results_subfolder_whose_name_is_not_utf8_is_indexed_once(tmp_path: Path) -> None:
    """A folder named with byte 0xff (and an escape sequence) under results/: the index stored its
    name escaped and looked it up raw, so the second command inserted it again: `UNIQUE constraint
    failed: files.rel`, exit 1, in compare, import and every later report."""
    r = _imported(tmp_path, "alpha")
    (sub,) = [d for d in r.iterdir() if d.is_dir()]
    os.rename(bytes(sub), bytes(r) + b"/\xff\x1b]0;t\x07")
    first = toolkit("report", "--results", "r", cwd=tmp_path)
    assert first.returncode == 0, _out(first)
    for _ in range(2):
        p = toolkit("compare", "--results", "r", "alpha", "alpha", cwd=tmp_path)
        assert p.returncode == 4 and "the same records" in _out(p), _out(p)
        p = toolkit("report", "--results", "r", cwd=tmp_path)
        assert p.returncode == 0, _out(p)
        assert b"\x1b]" not in p.stdout + p.stderr


def test_an_index_with_a_table_dropped_or_a_dangling_run_is_rebuilt_not_a_traceback(tmp_path: Path) -> None:
    """results/.index.sqlite of the current code but damaged inside a sound database (a table dropped,
    the runs or facets a record names deleted: a hand edit, another tool): `no such table: runs` /
    KeyError, exit 1, from compare (--against too) and report. Now rebuilt from the JSONL like a
    file that is not a database."""
    import sqlite3

    _imported(tmp_path, "alpha")
    c = _imported(tmp_path, "delta", results="c", rows=ROWS.with_suffix(".csv"))
    assert toolkit("report", "--results", "c", cwd=tmp_path).returncode == 0
    good = (c / ".index.sqlite").read_bytes()
    for stmt in ("DROP TABLE runs", "DELETE FROM runs", "DROP TABLE recs", "UPDATE recs SET run = 999"):
        for args in (
            ["compare", "--results", "r", "alpha", "--against", "c", "delta"],
            ["report", "--results", "c"],
        ):
            (c / ".index.sqlite").write_bytes(good)
            conn = sqlite3.connect(c / ".index.sqlite")
            conn.execute(stmt)
            conn.commit()
            conn.close()
            p = toolkit(*args, cwd=tmp_path)
            # compare: pp64 is 13448 ± 18736 in A, 2412 in B: A/B - 1 = 4.6 beyond the band 2.8 (a margin
            # of the faster over the slower, as the verdict's), a regression (exit 6) since 9652db1
            want = 6 if args[0] == "compare" else 0
            assert p.returncode == want and "Traceback" not in _out(p), (stmt, _out(p))


def _row(**change) -> dict:
    import json

    return {**json.loads(ROWS.read_text().splitlines()[0]), **change}


def test_a_bench_row_whose_samples_are_no_list_of_numbers_is_a_failed_row_not_a_crash() -> None:
    """judge_row (the question `toolkit bench`'s row sink asks of each llama-bench row) normalized the
    row before check_row: samples_ts {"a": 1} or ["a"] raised ValueError out of the sink (the run
    died, exit 1); samples_ts 5.0 / true a TypeError. Now the row is refused naming the field."""
    from toolkit.runtimes.llama_bench.validity import judge_row

    for samples, why in (
        ({"a": 1}, "samples_ts is an object: expected a list of numbers"),
        (["a"], "samples_ts[0] is 'a': expected a number"),
        (5.0, "samples_ts is 5: expected a list of numbers"),
        (True, "samples_ts is True: expected a list of numbers"),
        ([[1.0]], "samples_ts[0] is a list: expected a number"),
    ):
        fields, void = judge_row(_row(samples_ts=samples), "cpu", allow_software_gpu=False)
        assert void == f"row is not a measurement: {why}"
        assert fields["test"] == "pp64" and fields["samples_ts"] == []
    assert judge_row(_row(), "cpu", allow_software_gpu=False)[1] is None  # the row itself is a measurement


def test_an_imported_row_whose_samples_are_no_list_is_refused_naming_the_field(tmp_path: Path) -> None:
    """`toolkit import` of a row with samples_ns {"a": 1}: imported (the object kept in raw); with
    samples_ts {"a": 1}: refused as `could not convert string to float: 'a'`, no field named."""
    import json

    for change, why in (
        ({"samples_ns": {"a": 1}}, "samples_ns is an object: expected a list of numbers"),
        ({"samples_ts": {"a": 1}}, "samples_ts is an object: expected a list of numbers"),
        ({"samples_ts": [1.0, "x"]}, "samples_ts[1] is 'x': expected a number"),
    ):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps(_row(**change)) + "\n")
        p = toolkit("import", "--results", "imp", "--label", "x", str(bad), cwd=tmp_path)
        assert p.returncode == 4, _out(p)
        assert why in _out(p) and "bad.jsonl" in _out(p), _out(p)


def test_compare_of_an_empty_ref_is_bad_input_not_the_only_image(tmp_path: Path) -> None:
    """`toolkit compare "$BASE" NEW --against DIR` with BASE unset: every digest starts with '', so in
    a folder of one image the empty ref named it and the compare ran, exit 0."""
    _imported(tmp_path, "solo", results="one")
    _imported(tmp_path, "delta", results="c")
    for args, side in (
        (["compare", "--results", "one", "", "--against", "c", "delta"], "A"),
        (["compare", "--results", "one", "solo", "--against", "c", ""], "B"),
    ):
        p = toolkit(*args, cwd=tmp_path)
        assert p.returncode == 4, _out(p)
        assert f"compare: {side} is empty" in _out(p) and "stored runs under" in _out(p), _out(p)


def test_importing_a_toolkit_results_file_is_refused_saying_where_to_read_it(tmp_path: Path) -> None:
    """`toolkit import` of another folder's bench.jsonl (toolkit's own records): each record was taken
    for a llama-bench row, filed under model `unknown` with the whole record as its raw fields (a
    report column `raw` of tuples; compare's "what keeps them apart" tens of KB of it)."""
    p = toolkit("import", "--results", "r", "--label", "x", str(DATA / "results-cpu-a.jsonl"), cwd=tmp_path)
    assert p.returncode == 4, _out(p)
    assert "a toolkit record (a results folder's bench.jsonl), not llama-bench output" in _out(p)
    assert "--against DIR" in _out(p), _out(p)
    assert not list(tmp_path.glob("r/*/bench.jsonl"))  # nothing imported
