"""Off a terminal (a log, CI), a bench printed one line as a test started and then nothing until the
next: on a slow host a decode test ran 11 minutes after `test 8/10` with no line, a hang and slowness
alike (nc43, a fresh stand-in's log). A test still running after PLAIN_HEARTBEAT_S gets a line again at
its next phase, with its time so far; a fast one stays one line. The real clock, the heartbeat
shortened for the test."""

from __future__ import annotations

import time

from toolkit.cli import progress


def _events(printer, phases, wait=0.0):
    for phase in phases:
        printer("progress", image="cpu", model="tiny", done=7, total=10, phase=phase)
        time.sleep(wait)


def test_a_slow_test_says_it_still_runs(monkeypatch, capsys):
    monkeypatch.setattr(progress, "PLAIN_HEARTBEAT_S", 0.2)
    _events(progress.plain_progress(False), ["gen run 1/5", "gen run 2/5", "gen run 3/5"], wait=0.25)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "cpu x tiny: test 8/10 gen run 1/5"
    assert [e.split(" (")[0] for e in err[1:]] == [
        "cpu x tiny: test 8/10 gen run 2/5",
        "cpu x tiny: test 8/10 gen run 3/5",
    ]
    assert all(e.endswith(" s so far)") and " min " in e for e in err[1:]), err


def test_a_fast_test_stays_one_line(capsys):
    _events(progress.plain_progress(False), ["gen run 1/5", "gen run 2/5", "gen run 3/5"])
    assert capsys.readouterr().err.splitlines() == ["cpu x tiny: test 8/10 gen run 1/5"]
