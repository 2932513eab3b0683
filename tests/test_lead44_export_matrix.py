"""lead44: export-run copies the matrix --matrix names (default ./matrix.yaml) as it is at export time.
A newcomer (nc44, a fresh Debian 12 stand-in) measured with `--matrix matrix-ub512.yaml` and exported
without it: the folder's matrix.yaml said `n_ubatch: [512, 2048]` beside run.json's and the README's 512,
and nothing said so. The export now names each axis where the two differ (stderr and run.json's notes)."""

from __future__ import annotations

import contextlib

import pytest

from tests.support.project import cpu_project
from tests.support.runs import tk
from tests.support.sinks import export_notes

RUN_AXES = dict(n_prompt=[128, 1024], n_gen=[64], n_ubatch=[64, 512], n_batch=[512], repetitions=10)
"""The bench block of the run export_notes stores (tests/data/results-cpu-a.jsonl)."""


def test_an_export_names_the_axes_its_matrix_does_not_share_with_the_run(tmp_path, matrix_data):
    axes = {"n_prompt": [128, 1024], "n_gen": [64], "n_ubatch": [512, 2048], "n_batch": [2048]}
    err, notes = export_notes(tmp_path, matrix_data, axes)
    said = [n for n in notes if n.startswith("matrix.yaml is the matrix given at export")]
    assert len(said) == 1, notes
    assert "n_ubatch 512, 2048 where the records hold 64, 512" in said[0], said
    assert "n_batch 2048 where the records hold 512" in said[0], said
    assert "n_prompt" not in said[0] and str(tmp_path) not in said[0], said  # no host path published
    assert said[0] in err


def test_an_export_whose_matrix_is_the_runs_says_nothing_of_it(tmp_path, matrix_data):
    axes = RUN_AXES
    err, notes = export_notes(tmp_path, matrix_data, axes)
    assert not [n for n in notes if n.startswith("matrix.yaml")], notes
    assert "matrix.yaml is the matrix" not in err


@pytest.mark.e2e
def test_a_build_says_which_source_it_fetches_before_it_waits(tmp_path, matrix_data):
    """nc44: after `==> cpu: building` nothing was printed for ~28 s while the clone of GitHub failed and
    PyPI's sdist downloaded (on a network that drops packets, up to git's low-speed limit at each stall).
    The source it waits on is named first. And `build -i cpu` whose one image was skipped (no way to fetch
    its source) exited 0 with nothing built: exit 2, as a bench that measured nothing."""
    matrix_data["sources"]["llama.cpp"] = {"git": f"file://{tmp_path}/nowhere.git", "ref": "b1"}
    matrix = cpu_project(tmp_path / "p", matrix_data)
    env = {"TOOLKIT_CACHE": str(tmp_path / "cache")}
    got = tk(matrix.parent, "build", "-i", "cpu", env=env)
    assert got.returncode == 2 and "nothing was built: every image was skipped" in got.stderr, got.stderr
    assert "cpu: skipped: source 'llama.cpp': no way to fetch it" in got.stdout, got.stdout
    said = f"   cpu | fetching source llama.cpp from file://{tmp_path}/nowhere.git@b1\n"
    assert "==> cpu: building" in got.stderr and said in got.stderr, got.stderr
    assert got.stderr.index("==> cpu: building") < got.stderr.index(said)


def test_a_resumed_run_or_an_import_gets_no_false_note(tmp_path, matrix_data):
    """brk44b: the note compared the matrix with run.json's bench, which is the first llama-bench
    process's command only: a resumed run (one process per cross product of the missing cases) was told
    its own matrix was not its sweep. The matrix is compared with every record's values; an imported
    run (no matrix measured it) gets no such note."""
    axes = RUN_AXES

    def first_process_only(rec):  # each record's command says only its own case, as resume_axes runs them
        cmd = [str(x) for x in rec.command]
        for flag, v in (("-p", rec.n_prompt), ("-n", rec.n_gen), ("-ub", rec.n_ubatch)):
            if flag in cmd:
                cmd[cmd.index(flag) + 1] = str(v)
        return rec.model_copy(update={"command": cmd})

    err, notes = export_notes(tmp_path / "resumed", matrix_data, axes, first_process_only)
    assert not [n for n in notes if n.startswith("matrix.yaml")], notes

    def as_imported(rec):
        return rec.model_copy(update={"image": rec.image.model_copy(update={"digest": "import:" + "0" * 16})})

    matrix_data.pop("bench")
    err, notes = export_notes(
        tmp_path / "imported", matrix_data, {"n_ubatch": [4096], "n_batch": [4096]}, as_imported
    )
    assert not [n for n in notes if n.startswith("matrix.yaml")], notes


def test_measure_ended_while_its_command_is_stopped_lets_the_command_end_on_sigterm(tmp_path):
    """brk44b: a stopped command (SIGSTOP, Ctrl-Z) does not act on SIGTERM until continued, so `measure`
    told to end (SIGTERM) waited 5 s and SIGKILLed it: its own SIGTERM handler (a benchmark saving its
    partial output) never ran. measure now continues the group after the SIGTERM."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pidfile, said = tmp_path / "pid", tmp_path / "term"
    prog = (
        "import os, signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(said)!r}, 'w').write('term'), sys.exit(3)))\n"
        f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
        "time.sleep(60)\n"
    )
    cmd = [sys.executable, "-m", "toolkit", "measure", "--gpu", "none", "-o", str(tmp_path / "m.jsonl")]
    proc = subprocess.Popen(
        [*cmd, "--", sys.executable, "-c", prog], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.time() + 30
    while time.time() < deadline and not pidfile.exists():
        time.sleep(0.1)
    time.sleep(1.0)  # the command has stopped itself
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
    assert said.exists(), proc.stderr.read() if proc.stderr else ""
