"""Round 33 (reliability and security, an outside reviewer's kinds): faults a stranger's results folder
or a hung engine caused, each fixed as a kind. docs/reliability-log.md "Round 33" lists each case.

- a results folder's .index.sqlite holding a trigger (or a view) of someone else's: the trigger ran
  inside the toolkit's own statements; one that recursed without end held `toolkit report` for ever,
  and neither Ctrl-C nor SIGTERM stopped it (SQLite gives no Python signal handler a turn while a
  statement steps). Now an index file whose schema is not exactly the toolkit's is rebuilt;
- a results subfolder whose name holds a newline printed a warning or an error as two lines, the second
  one forged (`warning: fake/bench.jsonl: ...`). Now a file-system name in those messages is escaped
  (`core.text.path_text`), as a written file's name already was;
- a Docker engine that accepts connections and never answers (a hung dockerd, a dead proxy) cost
  `toolkit bench` two 120-s timeouts and was told to start an engine that was running. Now it is asked
  once a process and the message says it did not answer.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.project import DATA
from tests.support.runs import tk
from tests.support.sockets import LINE, frozen_run
from tests.support.sockets import SHORT as _SHORT
from tests.support.sockets import Hung as _Hung

ROOT = Path(__file__).resolve().parents[1]
_FOREVER = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT max(x) FROM n"


def _imported(tmp_path: Path) -> Path:
    """A results folder holding the real CPU llama-bench rows of tests/data, imported, and its index."""
    results = tmp_path / "results"
    done = tk(
        ROOT,
        "import",
        str(DATA / "llamabench-0c1e57098-cpu.jsonl"),
        "--label",
        "cpu",
        "--results",
        str(results),
    )
    assert done.returncode == 0, done.stderr
    assert tk(ROOT, "report", "--results", str(results)).returncode == 0
    assert (results / ".index.sqlite").is_file()
    return results


def _report_within(results: Path, seconds: float) -> subprocess.CompletedProcess:
    try:
        return tk(ROOT, "report", "--results", str(results), timeout=seconds)
    except subprocess.TimeoutExpired:
        pytest.fail(f"toolkit report did not end in {seconds} s: a statement planted in the index ran")


@pytest.mark.parametrize("plant", ["trigger", "view"])
def test_an_index_holding_a_strangers_trigger_or_view_is_rebuilt_not_run(tmp_path, plant):
    results = _imported(tmp_path)
    conn = sqlite3.connect(results / ".index.sqlite")
    if plant == "trigger":  # fires when the index takes a changed file in again
        for table in ("files", "recs", "problems", "imported", "keys", "runs", "facets"):
            for event in ("INSERT", "DELETE", "UPDATE"):
                conn.execute(
                    f"CREATE TRIGGER t_{table}_{event} AFTER {event} ON {table} BEGIN SELECT ({_FOREVER}); END"
                )
        for f in results.glob("*/bench.jsonl"):
            os.utime(f)  # a changed stat: the index reads the file again
    else:  # `files`, read first by every query, replaced by a view that never ends
        conn.execute("ALTER TABLE files RENAME TO files0")
        conn.execute(f"CREATE VIEW files AS SELECT * FROM files0 WHERE ({_FOREVER}) IS NOT NULL")
    conn.commit()
    conn.close()
    done = _report_within(results, 30)
    assert done.returncode == 0, done.stderr
    assert "6 records read, 6 used" in done.stdout
    kinds = sqlite3.connect(results / ".index.sqlite").execute("SELECT type FROM sqlite_master").fetchall()
    assert ("trigger",) not in kinds and ("view",) not in kinds


@pytest.mark.parametrize("kind", ["corrupt-line", "fifo"])
def test_a_results_subfolder_named_with_a_newline_prints_one_line_never_a_forged_one(tmp_path, kind):
    results = _imported(tmp_path)
    sub = results / "ab\nwarning: forged"
    sub.mkdir()
    if kind == "fifo":
        os.mkfifo(sub / "bench.jsonl")
    else:
        (sub / "bench.jsonl").write_text("{not json\n")
    done = _report_within(results, 60)
    lines = done.stderr.splitlines()
    assert not [line for line in lines if line.startswith("warning: forged")], done.stderr
    said = [line for line in lines if "forged" in line]
    assert len(said) == 1 and "ab\\nwarning: forged/bench.jsonl" in said[0], done.stderr
    assert done.returncode == (4 if kind == "fifo" else 0)


def test_an_engine_that_takes_the_connection_and_never_answers_is_asked_once_and_named(project, tmp_path):
    hung = _Hung(tmp_path / "hung.sock")
    try:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DOCKER_HOST": f"unix://{hung.path}",
            "TOOLKIT_ENGINE": "docker",
        }
        try:
            done = subprocess.run(
                [sys.executable, "-c", _SHORT, "bench", "-i", "cpu"],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                "bench against a hung engine did not end in 60 s (each request waited out its timeout)"
            )
    finally:
        hung.close()
    assert done.returncode == 5, done.stderr
    assert "did not answer in 2 s" in done.stderr and "start it (`sudo dockerd" not in done.stderr, (
        done.stderr
    )


@pytest.mark.e2e
def test_an_engine_that_hangs_mid_run_ends_the_run_past_its_timeout(tmp_path):
    if not Path("/var/run/docker.sock").exists():
        pytest.skip("no Docker engine socket here")
    try:
        out = frozen_run(tmp_path, request_s=3, grace_s=3, timeout_s=4, freeze_after=1.0, wait_s=40)
    except subprocess.TimeoutExpired:
        pytest.fail("the run went on for ever once the engine stopped answering")
    assert out.split()[:2] == ["lost", LINE], out  # EngineLost (exit 5), what the container printed kept
