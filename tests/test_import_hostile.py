"""Defects a hostile tester found in `toolkit import` and the JSON reading under report/compare
(docs/reliability.md section 9): each closed for its whole kind, with a reproducer through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    json.loads(ln) for ln in (DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines() if ln.strip()
]
DEEP_OBJECTS = '{"a":' * 100_000 + "1" + "}" * 100_000


def toolkit(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a process of its own (a crash of the parser is an exit status, not a dead test run)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args], cwd=cwd, env=env, capture_output=True, timeout=300
    )


def _jsonl(rows: list) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_deeply_nested_objects_are_a_skipped_row_not_a_segfault(tmp_path, suffix):
    """Reproducer: orjson 3.8.3 crashed the process (SIGSEGV, exit 139) on 100,000 nested objects."""
    f = tmp_path / f"deep{suffix}"
    f.write_text(DEEP_OBJECTS + "\n" + _jsonl(ROWS[:1]))
    p = toolkit("import", "--results", "r", "--label", "s", str(f), cwd=tmp_path)
    out = p.stdout.decode() + p.stderr.decode()
    assert p.returncode == 0, out
    assert f"{f}:1: not a complete JSON record (nested deeper than 64 levels)" in out


def test_a_deeply_nested_bench_line_does_not_crash_report_or_compare(tmp_path):
    f = tmp_path / "one.jsonl"
    f.write_text(_jsonl(ROWS[:1]))
    assert toolkit("import", "--results", "r", "--label", "s", str(f), cwd=tmp_path).returncode == 0
    (bench,) = (tmp_path / "r").glob("*/bench.jsonl")
    with bench.open("a") as fh:
        fh.write(DEEP_OBJECTS + "\n")
    p = toolkit("report", "--results", "r", cwd=tmp_path)
    assert p.returncode == 0 and b"skipped a line: nested deeper than 64 levels" in p.stderr, p.stderr[-2000:]
    p = toolkit("compare", "--results", "r", "s", "s", cwd=tmp_path)
    assert p.returncode in (0, 4), p.stderr.decode()[-2000:]
