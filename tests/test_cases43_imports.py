"""cases43: new shapes of the field kinds "two builds / two runs in one file" and "rows that vanish
without a word", through the real CLI import and report.

`llama-bench -o json >> FILE` appends one JSON array per run (`[...][...]`, or the arrays on lines of
their own). Only the first array was read; every later run was left out with a note, so the import
said `imported 4 results`, exit 0, and a second build appended that way vanished from the report as
the jsonl case's did. The files here are real `-o json` output of the toolkit/cpu image's llama-bench
(0c1e57098, tiny-qwen3moe.gguf, `-r 2 -p 16 -n 4`): one run with `-t 1,2`, one with `-ctk f16,q8_0`.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.support.runs import tk

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "cases43"
RUN_T = (DATA / "llamabench-0c1e57098-cpu-t1-2.json").read_text()
RUN_CTK = (DATA / "llamabench-0c1e57098-cpu-ctk.json").read_text()


def _rows(tmp_path: Path, *args: str) -> list[dict]:
    page = tk(ROOT, "report", "--results", str(tmp_path / "r"), "--format", "csv", *args)
    assert page.returncode == 0, page.stderr
    return list(csv.DictReader(io.StringIO(page.stdout)))


@pytest.mark.parametrize("between", ["", "\n", "\r\n\r\n  "], ids=["adjoining", "newline", "blank-lines"])
def test_every_run_appended_to_one_json_file_is_imported(tmp_path, between):
    src = tmp_path / "runs.json"
    src.write_text(RUN_CTK.rstrip() + between + RUN_T)
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "imported 8 results" in out, out
    assert "left out" not in out, out
    rows = _rows(tmp_path)
    # -t 1 of the second run, both -ctk of the first, and their shared test (t=2, f16) as 2 repetitions
    assert {(r["test"], r["test_fields"], r["records"]) for r in rows} == {
        (test, fields, n)
        for test in ("pp16 ub512", "tg4")
        for fields, n in (
            ("n_threads=1; type_k=f16", "1"),
            ("n_threads=2; type_k=f16", "2"),
            ("n_threads=2; type_k=q8_0", "1"),
        )
    }, rows


def test_a_second_build_appended_as_a_json_array_is_its_own_column(tmp_path):
    """The two-builds case in -o json: the second run's build_commit/build_number changed by hand (one
    llama.cpp build is all the image has), 1480 -> 1130 t/s kept visible as two sets."""
    later = json.loads(RUN_T)
    for row in later:
        row["build_commit"], row["build_number"] = "b7a1c3d2e", 7001
    src = tmp_path / "builds.json"
    src.write_text(RUN_CTK + json.dumps(later, indent=2) + "\n")
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "x.0c1e57098-0: imported 4 results" in out and "x.b7a1c3d2e-7001: imported 4 results" in out, out
    rows = _rows(tmp_path)
    assert {r["build_commit"] for r in rows} == {"0c1e57098", "b7a1c3d2e"}, rows
    assert len(rows) == 8, rows


def test_text_after_the_last_array_is_still_named_and_left_out(tmp_path):
    src = tmp_path / "runs.json"
    src.write_text(RUN_CTK + RUN_T + "main: done\n")
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "imported 8 results" in out, out
    line = RUN_CTK.count("\n") + RUN_T.count("\n") + 1
    assert f"{src}:{line}: text that is no JSON array after the array's end: left out" in out, out


def test_a_json_run_captured_with_its_stderr_keeps_every_row(tmp_path):
    """Reproducer: `llama-bench -o json ... > run.json 2>&1` (real capture: its progress lines land after
    each element's `}`) imported 1 of 4 rows, exit 0, with `the array ends in an incomplete record`."""
    src = DATA / "llamabench-0c1e57098-cpu-t1-2-stderr-merged.json"
    assert "}llama-bench: benchmark 2/4: starting" in src.read_text()
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "imported 4 results" in out, out
    assert "incomplete record" not in out, out
    rows = _rows(tmp_path)
    assert sorted((r["test"], r["test_fields"]) for r in rows) == [
        ("pp16 ub512", "n_threads=1"),
        ("pp16 ub512", "n_threads=2"),
        ("tg4", "n_threads=1"),
        ("tg4", "n_threads=2"),
    ], rows


def _csv_lines(name: str, drop: tuple[str, ...] = (), build: tuple[str, str] | None = None) -> list[str]:
    rows = list(csv.reader(io.StringIO((DATA / name).read_text())))
    keep = [i for i, h in enumerate(rows[0]) if h not in drop]
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for n, row in enumerate(rows):
        row = [row[i] for i in keep]
        if n and build:
            row[0], row[1] = build
        w.writerow(row)
    return out.getvalue().splitlines(keepends=True)


@pytest.mark.parametrize("older", [False, True], ids=["same-columns", "older-build-fewer-columns"])
def test_every_run_appended_to_one_csv_file_is_read_under_its_own_header(tmp_path, older):
    """Reproducer: `-o csv >> FILE` of an older build (no n_cpu_moe, fit_target, fit_min_ctx, no_host
    columns: edited out of a real run, with its build named b5163) then of this one: the second header
    was refused as a row and, its rows having 42 fields under a header of 38, every row of the newer
    build too (`imported 4 results`, exit 0); with the same columns, the header was a refused row."""
    drop = ("n_cpu_moe", "fit_target", "fit_min_ctx", "no_host") if older else ()
    first = _csv_lines("llamabench-0c1e57098-cpu-ctk.csv", drop, ("b5163aaaa", "5163") if older else None)
    src = tmp_path / "runs.csv"
    src.write_text("".join(first + _csv_lines("llamabench-0c1e57098-cpu-t1-2.csv")))
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "refused" not in out and "left out" not in out, out
    if older:
        assert "x.b5163aaaa-5163: imported 4 results" in out and "x.0c1e57098-0: imported 4 results" in out, (
            out
        )
    else:
        assert "imported 8 results" in out, out
    rows = _rows(tmp_path)
    assert sum(int(r["records"]) for r in rows) == 8 and len(rows) == (8 if older else 6), rows


def test_two_runs_appended_with_their_stderr_are_both_imported(tmp_path):
    """`llama-bench -o json >> runs.json 2>&1`, twice (the second build's commit edited in): each run's
    log stands before its `[`; the second run was left out as text after the array."""
    run = (DATA / "llamabench-0c1e57098-cpu-t1-2-stderr-merged.json").read_text()
    src = tmp_path / "runs.json"
    src.write_text(
        run + run.replace('"0c1e57098"', '"b7a1c3d2e"').replace('"build_number": 0', '"build_number": 7001')
    )
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "left out" not in out and "incomplete" not in out, out
    assert "x.0c1e57098-0: imported 4 results" in out and "x.b7a1c3d2e-7001: imported 4 results" in out, out


def test_two_model_files_described_alike_are_two_models(tmp_path):
    """`llama-bench -m a.gguf -m b.gguf` of two files llama-bench describes alike (real run: two copies
    of the tiny model). The file says they are two files: each is its own model row (the second's model
    identity names its file: import_keys.AlikeFiles); they were repetitions of one cell (left46b)."""
    src = DATA / "llamabench-0c1e57098-cpu-two-files-alike.jsonl"
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "imported 4 results" in out and "same test" not in out, out
    rows = _rows(tmp_path)
    assert sorted((r["test"], r["model"], r["records"]) for r in rows) == [
        ("pp16 ub512", "a.gguf", "1"),
        ("pp16 ub512", "b.gguf", "1"),
        ("tg4", "a.gguf", "1"),
        ("tg4", "b.gguf", "1"),
    ], rows
