"""`toolkit measure -- COMMAND`: the bench's sampler around any command, rows importable with their
telemetry. The fast tests run a stand-in program (a Python script that prints llama-bench's
`--progress` lines and JSONL rows, shaped like tests/data's real outputs) because llama-bench itself
is not on a fast-test host; the e2e test runs the real llama-bench copied out of the CPU image,
bare metal. Sampling is real (/proc of this host) in both."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli.main import cli
from toolkit.results.records import ResultStore

ROOT = Path(__file__).resolve().parents[1]

ROW = {
    "build_commit": "0c1e57098",
    "build_number": 0,
    "cpu_info": "AMD EPYC",
    "gpu_info": "",
    "backends": "CPU",
    "model_filename": "m.gguf",
    "model_type": "qwen3moe ?B F16",
    "model_size": 1595904,
    "model_n_params": 792192,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 2,
    "type_k": "f16",
    "type_v": "f16",
    "n_gpu_layers": -1,
    "flash_attn": -1,
    "tensor_split": "0.00",
    "n_prompt": 256,
    "n_gen": 0,
    "n_depth": 0,
    "test_time": "2026-12-01T14:02:27Z",
    "avg_ns": 400000000,
    "stddev_ns": 1000000,
    "avg_ts": 640.0,
    "stddev_ts": 1.6,
    "samples_ns": [400000000, 400000000],
    "samples_ts": [640.0, 640.0],
}


def stand_in(tmp_path: Path) -> Path:
    """A fake llama-bench: two tests, progress on stderr, one JSONL row per test after ~0.8 s of work."""
    gen = {**ROW, "n_prompt": 0, "n_gen": 32, "avg_ts": 80.0, "stddev_ts": 0.2, "samples_ts": [80.0, 80.0]}
    script = tmp_path / "fake-llama-bench"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, sys, time
            rows = [{ROW!r}, {gen!r}]
            for i, row in enumerate(rows, 1):
                row["test_time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # as llama-bench's
                print(f"llama-bench: benchmark {{i}}/2: starting", file=sys.stderr, flush=True)
                phase = "prompt" if row["n_prompt"] else "generation"
                for r in (1, 2):
                    print(f"llama-bench: benchmark {{i}}/2: {{phase}} run {{r}}/2", file=sys.stderr, flush=True)
                    time.sleep(0.4)
                print(json.dumps(row), flush=True)
            """
        )
    )
    script.chmod(0o755)
    return script


def test_measure_gives_every_row_its_window_and_the_file_imports_with_telemetry(tmp_path):
    prog = stand_in(tmp_path)
    out = tmp_path / "m.jsonl"
    res = CliRunner().invoke(
        cli,
        [
            "measure",
            "--results",
            str(tmp_path / "results"),
            "--label",
            "bare",
            "--out",
            str(out),
            "--gpu",
            "none",
            "--",
            str(prog),
        ],
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["n_prompt"] for r in rows] == [256, 0]
    for r in rows:
        t = r["toolkit_telemetry"]
        assert t["window_from"] == "progress" and t["tokens"] == (r["n_prompt"] + r["n_gen"]) * 2
        assert 0.6 < t["duration_s"] < 5, t["duration_s"]  # two 0.4-s repetitions
        assert t["host"]["samples"] >= 5 and t["host"]["cpus_online"] >= 1
        assert isinstance(r["toolkit_flags"], list)
    assert out.with_suffix(".trace.jsonl").is_file()
    recs = ResultStore(tmp_path / "results").results()
    assert len(recs) == 2 and all(rec.telemetry and rec.telemetry["host"] for rec in recs)
    assert all("toolkit_telemetry" not in rec.raw for rec in recs)  # raw keeps llama-bench's fields only


def test_a_full_disk_loses_no_run_silently_it_names_the_file_the_rows_kept_and_lost(tmp_path):
    """Reproducer (issue 32 item 9): the disk filled while rows were written; the message was
    `(unknown path): No space left on device`, saying nothing of the rows. /dev/full gives the real
    ENOSPC on every write. `measure -o` refuses a symlink (test_measure_refuses_an_output_that_is_not_its_own),
    and a full disk cannot be made here without root: this one run skips that check and the row file's
    link-refusing open (both mocked) so that the writes meet the real ENOSPC of /dev/full."""
    prog = stand_in(tmp_path)
    out = tmp_path / "m.jsonl"
    out.symlink_to("/dev/full")
    out.with_suffix(".trace.jsonl").symlink_to("/dev/full")
    unchecked = (
        "import os, toolkit.cli.bench as b; b.output_file = lambda p, **k: p; "
        "b.open_regular = lambda p, f, root=None: os.open(p, f); from toolkit.cli.main import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", unchecked, "measure", "--out", str(out), "--gpu", "none", "--", str(prog)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 8, proc.stderr
    assert (
        f"{out}: No space left on device while writing the measured rows: the first 0 row(s) are kept "
        "there (the last may be torn), the 2 later row(s) are lost" in proc.stderr
    )
    assert "exited 0" in proc.stderr  # the command ran to its end
    trace = out.with_suffix(".trace.jsonl")
    assert (
        f"measure: warning: telemetry trace {trace}: No space left on device: the trace holds only its first 0 line(s)"
        in proc.stderr
    )


def test_a_command_without_rows_gets_one_window_and_its_exit_code(tmp_path):
    out = tmp_path / "m.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "measure",
            "--out",
            str(out),
            "--gpu",
            "none",
            "--",
            sys.executable,
            "-c",
            "import time, sys; time.sleep(1.0); sys.exit(7)",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 7, proc.stderr
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["exit_code"] == 7 and line["toolkit_telemetry"]["duration_s"] >= 1.0
    assert "exited 7" in proc.stderr


def test_a_program_that_does_not_exist_is_bad_input(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "measure",
            "--out",
            str(tmp_path / "m.jsonl"),
            "--gpu",
            "none",
            "--",
            "/nonexistent/llama-bench",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 4 and "cannot run '/nonexistent/llama-bench'" in proc.stderr, proc.stderr


@pytest.mark.parametrize("gpu", ["7", "x"])
def test_gpu_option_names_what_the_host_has(tmp_path, gpu):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "measure",
            "--out",
            str(tmp_path / "m.jsonl"),
            "--gpu",
            gpu,
            "--",
            "true",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 4 and f"--gpu {gpu!r}" in proc.stderr, proc.stderr


def test_the_h200_measure_output_imports_with_its_flags(tmp_path):
    """Real `toolkit measure` output from the lent H200 (tests/data/h200-measure/README.md): imported,
    every contended record is flagged gpu-shared and throttled:sw-power-cap, no alone record is, and the
    energies are the hardware counter's."""
    data = ROOT / "tests" / "data" / "h200-measure"
    for label in ("alone", "contended"):
        res = CliRunner().invoke(
            cli,
            [
                "import",
                "--results",
                str(tmp_path / "r"),
                "--label",
                f"h200-{label}",
                str(data / f"{label}.jsonl"),
            ],
        )
        assert res.exit_code == 0, res.output
    recs = ResultStore(tmp_path / "r").results()
    alone = [r for r in recs if r.image.name.startswith("h200-alone")]
    shared = [r for r in recs if r.image.name.startswith("h200-contended")]
    assert len(alone) == len(shared) == 6
    for r in alone:
        flags = (r.model_extra or {}).get("flags") or []
        assert not any(f.startswith(("gpu-shared", "throttled")) for f in flags), flags
        gpu = next(iter(r.telemetry["gpus"].values()))
        assert gpu["energy_source"] == "counter" and gpu["procs_max"] == 1
    for r in shared:
        flags = (r.model_extra or {}).get("flags") or []
        assert "gpu-shared" in flags and "throttled:sw-power-cap" in flags, flags
    tg = next(r for r in alone if r.n_gen == 128 and r.n_ubatch == 512)
    assert abs(next(iter(tg.telemetry["gpus"].values()))["tok_per_j"] - 1.32) < 0.01


def _script(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "cmd.py"
    p.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    p.chmod(0o755)
    return p


@pytest.mark.parametrize(
    "field", ['"n_prompt": "abc"', '"n_prompt": [1]', '"n_gen": 1e400', '"samples_ns": 5']
)
def test_a_row_with_values_of_the_wrong_type_does_not_stop_measure(tmp_path, field):
    """Breaker trial: one bad llama-bench row crashed measure (exit 1) and lost the run."""
    row = (
        '{"n_prompt": 512, "n_gen": 0, "avg_ts": 100.0, "avg_ns": 5120000000, "samples_ns": [5120000], '
        + field
        + "}"
    )
    prog = _script(tmp_path, f"print({row!r}, flush=True)\n")
    out = tmp_path / "m.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit", "measure", "--out", str(out), "--gpu", "none", "--", str(prog)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = out.read_text().splitlines()
    assert "NaN" not in line and "Infinity" not in line and json.loads(line)["toolkit_telemetry"] is not None


def test_sigterm_stops_the_command_and_keeps_the_rows_measured(tmp_path):
    """Breaker trial: SIGTERM/Ctrl-C left the measured command running and lost the rows already printed."""
    import os
    import signal
    import time

    pidfile = tmp_path / "child.pid"
    prog = _script(
        tmp_path,
        f"""\
        import json, os, signal, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a command that ignores SIGTERM
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        print(json.dumps({ROW!r}), flush=True)
        time.sleep(60)
        """,
    )
    out = tmp_path / "m.jsonl"
    tk = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "measure", "--out", str(out), "--gpu", "none", "--", str(prog)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    deadline = time.time() + 30
    while time.time() < deadline and not (out.exists() and out.read_text().strip()):
        time.sleep(0.1)
    child = int(pidfile.read_text())
    tk.send_signal(signal.SIGTERM)
    _, err = tk.communicate(timeout=30)
    assert tk.returncode == 130, err
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # gone: SIGKILL after the SIGTERM it ignored
    assert json.loads(out.read_text().splitlines()[0])["n_prompt"] == 256
    assert "measured before the stop" in err


def test_a_bad_label_is_refused_before_the_command_runs(tmp_path):
    marker = tmp_path / "ran"
    prog = _script(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "measure",
            "--label",
            "../../etc/evil",
            "--out",
            str(tmp_path / "m.jsonl"),
            "--gpu",
            "none",
            "--",
            str(prog),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 4 and "--label" in proc.stderr and not marker.exists()


def test_a_line_written_to_stderr_before_stdout_is_handled_first():
    """The full suite on a loaded host: a llama-bench row (stdout) was handled before its `--progress`
    line (stderr), read by another thread, so its window fell back to the previous row. One reader,
    stderr first: for every pair a real child process writes (stderr, then stdout), the stderr line is
    handled first."""
    import subprocess
    import sys

    from toolkit.bench.measure import pump_lines

    child = (
        "import sys\n"
        "for i in range(300):\n"
        "    sys.stderr.write(f'e {i}\\n'); sys.stderr.flush()\n"
        "    sys.stdout.write(f'o {i}\\n'); sys.stdout.flush()\n"
        "sys.stdout.write('tail without newline')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen: list[str] = []
    pump_lines([(proc.stderr, seen.append), (proc.stdout, seen.append)])
    assert proc.wait() == 0
    at = {line: n for n, line in enumerate(seen)}
    assert all(at[f"e {i}"] < at[f"o {i}"] for i in range(300))
    assert seen[-1] == "tail without newline" and len(seen) == 601


def _measure(tmp_path: Path, *command: str, **kw) -> subprocess.Popen:
    out = tmp_path / "m.jsonl"
    return subprocess.Popen(
        [sys.executable, "-m", "toolkit", "measure", "--out", str(out), "--gpu", "none", "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        **{"text": True, **kw},
    )


def test_a_huge_line_without_a_newline_passes_in_linear_time_and_whole(tmp_path):
    """Issue 32: a 300 MB line was re-joined on every 64 KB chunk (nothing passed after 300 s). Here
    40 MB: read once, passed through whole (the command's output is its own: only what measure
    parses is cut at MAX_LINE_BYTES), the row after it still measured."""
    row = json.dumps({**ROW, "samples_ns": [1, 1]})
    code = f"import sys; sys.stdout.write('x' * 40_000_000 + '\\n' + {row!r} + '\\n')"
    t0 = time.monotonic()
    proc = _measure(tmp_path, sys.executable, "-c", code)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert time.monotonic() - t0 < 60
    first = stdout.splitlines()[0]
    assert len(first) == 40_000_000 and set(first) == {"x"}
    assert json.loads((tmp_path / "m.jsonl").read_text().splitlines()[0])["n_prompt"] == ROW["n_prompt"]


def test_a_grandchild_holding_stdout_does_not_hold_measure(tmp_path):
    """Issue 32: a daemon the command started kept its stdout open; measure waited for it and reported
    its time as the command's."""
    t0 = time.monotonic()
    proc = _measure(tmp_path, "sh", "-c", "sleep 30 & echo started")
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert time.monotonic() - t0 < 20 and "started" in stdout
    # the command's time ends at its exit, not after the 2-s grace the daemon's pipe was read for
    seconds = float(re.search(r"exited 0 after ([0-9.]+) s", stderr).group(1))
    assert seconds < 1.0, stderr


def test_the_command_output_passes_through_byte_for_byte(tmp_path):
    """Issue 32 follow-up: the passthrough replaced bytes that are not UTF-8 and cut lines at 1 MiB;
    a wrapper like `time` passes its command's bytes as they are (stdout and stderr)."""
    payload = bytes(range(256)) + b"\nno newline at the end \xff"
    code = f"import sys; sys.stdout.buffer.write({payload!r}); sys.stderr.buffer.write({payload!r})"
    proc = _measure(tmp_path, sys.executable, "-c", code, text=False)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == payload
    assert payload in err
    (line,) = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert line["seconds"] < 10


def _running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    import os

    try:
        os.kill(pid, 0)
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def test_ctrl_c_twice_leaves_no_process_behind(tmp_path):
    """Issue 32: the second Ctrl-C broke the 5-s wait, SIGKILL was never sent, and the child (here one
    that ignores SIGTERM) kept running while the message said nothing was left."""
    import signal

    marker = tmp_path / "child.pid"
    proc = _measure(tmp_path, "sh", "-c", f"trap '' TERM; echo $$ > {marker}; while true; do sleep 0.1; done")
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    child = int(marker.read_text())
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)  # the second one, during the 5-s SIGTERM wait
    proc.communicate(timeout=60)
    time.sleep(0.5)
    assert not _running(child), "the measured command is still running"


def test_a_daemon_the_command_started_is_stopped_with_it(tmp_path):
    """The breaker's find: `sh -c 'sleep 300 & echo hi'` returned after the grace period and left the
    sleep running. What the command left in its process group is stopped (even ignoring SIGTERM)."""

    marker = tmp_path / "daemon.pid"
    proc = _measure(tmp_path, "sh", "-c", f"(trap '' TERM; sleep 300) & echo $! > {marker}; echo hi")
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "hi" in stdout, stderr
    pid = int(marker.read_text())
    time.sleep(0.3)
    assert not _running(pid), "the command's daemon is still running"


def test_a_nan_row_is_refused_by_the_import_of_measure_as_by_a_direct_import(tmp_path):
    """The breaker's find: `measure --label` stored a row with avg_ts nan as ok (recomputed from avg_ns)
    because the row was made finite before the import's validity pass saw it."""
    code = f"import json; r = {ROW!r}; r['avg_ts'] = float('nan'); print(json.dumps(r))"
    out = tmp_path / "m.jsonl"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "measure",
            "--gpu",
            "none",
            "--results",
            str(tmp_path / "r"),
            "--label",
            "m",
            "--out",
            str(out),
            "--",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert '"avg_ts": "nan"' in out.read_text()  # as llama-bench prints it, in strict JSON
    assert res.returncode == 4 and "avg_ts is nan" in res.stderr, res.stderr
    assert ResultStore(tmp_path / "r").results() == []


def test_a_command_killed_by_a_signal_exits_as_a_shell_says_it(tmp_path):
    """Reproducer (breaker): `measure -- sh -c 'kill -9 $$'` exited 247 and said "exited -9"."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "measure",
            "--out",
            str(tmp_path / "m.jsonl"),
            "--gpu",
            "none",
            "--",
        ]
        + ["sh", "-c", "kill -9 $$"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 137, proc.stderr
    assert "was killed by SIGKILL (exit 137)" in proc.stderr


def _outputs(tmp_path: Path) -> dict[str, Path]:
    """Outputs `measure -o` must refuse: a device, a symlink, another results folder's bench.jsonl, a
    file inside a results digest folder (its trace would land beside the records)."""
    digest = tmp_path / "other_results" / "0123456789ab"
    digest.mkdir(parents=True)
    (digest / "bench.jsonl").write_text('{"kept": true}\n')
    (tmp_path / "other_results" / "builds.jsonl").write_text("")
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "target.md")
    return {
        "device": Path("/dev/null"),
        "symbolic link": link,
        "bench.jsonl": digest / "bench.jsonl",
        "digest folder": digest / "bench",
    }


@pytest.mark.parametrize("kind", ["device", "symbolic link", "bench.jsonl", "digest folder"])
def test_measure_refuses_an_output_that_is_not_its_own(tmp_path, kind):
    """Tester's find: `measure -o /dev/null` made /dev/null.trace.jsonl, `-o link.md` wrote through the
    link, `-o other/<digest>/bench.jsonl` replaced another results folder's records: all exit 4 now,
    before the command runs, and nothing is written."""
    out = _outputs(tmp_path)[kind]
    marker = tmp_path / "ran"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "measure",
            "--gpu",
            "none",
            "-o",
            str(out),
            "--",
            "touch",
            str(marker),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode == 4, res.stderr
    assert str(out) in res.stderr and not marker.exists()
    assert (
        not (tmp_path / "target.md").exists() and not (tmp_path / "other_results/0123456789ab/bench").exists()
    )
    assert not out.with_suffix(".trace.jsonl").exists() or kind == "device"
    assert (tmp_path / "other_results/0123456789ab/bench.jsonl").read_text() == '{"kept": true}\n'


def test_sighup_stops_the_command_group_says_what_was_kept_and_exits_129(tmp_path):
    """Tester's find: a closed terminal (SIGHUP) killed measure without a word and left `sleep` running."""
    import signal

    marker = tmp_path / "child.pid"
    proc = _measure(tmp_path, "sh", "-c", f"sleep 300 & echo $! > {marker}; wait")
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    child = int(marker.read_text())
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    time.sleep(0.3)
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert not _running(child), "the measured command's child is still running"
    assert "SIGHUP" in err and "stopped" in err
