"""Round 30 (breaker): what round 29 added, broken by kind. A llama-bench record cut over two lines
where the cut falls inside a string or a number (a terminal's hard wrap at its width, a paste's at a
fixed column: most cuts of a row whose strings are long) was not said to go on (cut_records.wrapped
joined the lines with a newline only, which no JSON string or number holds); the sampler's stop()
called again after its wait for the thread was cut short (Ctrl-C) released an unlocked lock
(RuntimeError; the Event it replaced took a second set()), and a sampler started again after stop()
never ticked. Inputs: the real CPU llama-bench jsonl of tests/data, cut as a terminal cuts it. Each
test fails on the code before the fix."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from tests.support.project import DATA
from toolkit.host.telemetry import Sampler
from toolkit.results import importer
from toolkit.results.records import ResultStore

CPU_ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"


def _cut(tmp_path: Path, at) -> list[str]:
    """The real file's first row cut in two at `at(row)` (the rest kept whole); the import's notes."""
    rows = CPU_ROWS.read_text().splitlines()
    i = at(rows[0])
    src = tmp_path / "cut.jsonl"
    src.write_text(rows[0][:i] + "\n" + rows[0][i:] + "\n" + "\n".join(rows[1:]) + "\n")
    res = importer.import_files(ResultStore(tmp_path / "r"), [src], label="x")
    return res.skipped


@pytest.mark.parametrize(
    "at",
    [
        lambda row: row.index('"cpu_info": "') + 20,  # inside the cpu_info string (`Intel(R) Xe|on(R)`)
        lambda row: row.index('"model_size": ') + 16,  # inside a number (`1595|904`)
    ],
    ids=["in-a-string", "in-a-number"],
)
def test_a_row_cut_inside_a_value_is_said_to_go_on(tmp_path, at):
    """Before: `line 1: not a complete JSON record (not JSON (Unterminated string ...))` and nothing
    more (joined with a newline, the two lines are no JSON)."""
    skipped = _cut(tmp_path, at)
    said = next(s for s in skipped if "cut.jsonl:1: " in s)
    assert "the record goes on to line 2: one JSON object broken over lines 1-2" in said, skipped
    assert "its keys: build_commit, build_number, cpu_info" in said and "join its lines" in said


def test_a_row_cut_between_values_is_still_said(tmp_path):  # guard: round 29's case
    skipped = _cut(tmp_path, lambda row: row.index(', "gpu_info"') + 2)
    said = next(s for s in skipped if "cut.jsonl:1: " in s)
    assert "the record goes on to line 2" in said, skipped


class _SlowSource:
    """A source read on the sampler's own thread (as HostSource is) that takes `delay` seconds a read."""

    reads_cannot_block = True

    def __init__(self, delay: float) -> None:
        self.id, self.delay, self.n = "slow", delay, 0
        self.reading = threading.Event()

    def read(self) -> dict:
        self.n += 1
        self.reading.set()
        time.sleep(self.delay)
        return {"n": self.n}


def test_stop_again_after_a_stop_cut_short_by_ctrl_c_ends_the_sampler(monkeypatch):
    """Before: the second stop() raised `RuntimeError: release unlocked lock` (the first had released
    the gate; the thread, mid-read, never took it back), out of a run's cleanup."""
    src = _SlowSource(0.6)
    s = Sampler([src], rate_hz=10).start()
    assert src.reading.wait(2)

    def interrupt(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)  # Ctrl-C while stop() waits for the tick in flight
        with pytest.raises(KeyboardInterrupt):
            s.stop()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert s.running  # its wait was cut short: the thread is not known to have ended
    s.stop()  # the cleanup's second call
    assert not s.running


def test_a_sampler_started_again_after_stop_ticks_again():
    """Before: start() after stop() kept the stop flag set, so its thread ended at once: no tick, only
    stop()'s edge sample, in a run that should have been sampled 10 times a second."""
    src = _SlowSource(0.0)
    s = Sampler([src], rate_hz=50).start()
    time.sleep(0.2)
    s.stop()
    first = src.n
    s.start()
    time.sleep(0.3)
    s.stop()
    assert src.n - first >= 5, (first, src.n)  # before: 1 (stop()'s own sample)
