"""fix48b: faults earlier sessions found and left (brk47 F6, F7; fix47b S6, S7's notes; left46b).

1. `concurrent` where no other run overlapped the record's measured window: a run of another host seen
   at start flagged every record of the run after it had ended (RunGuard.others); a vLLM record's
   window is its telemetry's, not the `created` of its run's start (flag_claims.concurrent_problem).
2. A DOCKER_HOST name that resolves to this host's own address was a remote engine (GPU images skipped);
   the address itself was this host. Names are resolved as the client resolves them (getaddrinfo):
   tests/test_cases43_hosts.py::test_a_name_that_resolves_to_this_hosts_own_address_is_no_remote_engine.
3. A DOCKER_HOST with a backslash (or a space, a control character) in its address: doctor read
   127.0.0.1, the docker SDK connected to 10.1.2.3:80. Now refused as malformed by both.
4. An imported row whose stddev_ts its rates cannot have (above avg_ts x sqrt(n), none below 0):
   refused in the validity pass every format goes through.
5. A bare print() failing during a stop (a closed terminal: EIO) exited 8, not the stop's 129.
6. The campaign's push hint lacked `--registry` where the registry is the campaign's (or none is named):
   tests/test_campaign.py::test_the_campaigns_push_hint_names_the_registry_push_would_not_take.
7. AlikeFiles: the same files in another order gave another file the model description.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.records import make_record
from toolkit.results.flag_claims import concurrent_problem

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


# ------------------------------------------------------------------- 1. concurrent without an overlap


def test_a_run_of_another_host_that_ended_flags_no_later_record(monkeypatch, tmp_path):
    from toolkit.bench import guard
    from toolkit.engine import api as engine
    from toolkit.engine import containers

    other = "20260101T000002Z-fedcba"
    running = [
        containers.ContainerInfo(
            "b1",
            "b1",
            "running",
            {containers.CONTAINER_LABEL: "1", guard.RUN_ID_LABEL: other, guard.HOST_LABEL: "h2"},
        )
    ]
    monkeypatch.setattr(engine, "toolkit_containers", lambda: list(running))
    g = guard.RunGuard("20260101T000003Z-abcdef", "engine", lock_dir=tmp_path)
    g.start(allow_concurrent=True, note=lambda _m: None)
    try:
        assert [x.split(" ")[0] for x in g.others()] == [other]  # while it runs: flagged
        running.clear()  # its container ended
        assert g.others() == []  # was: named on every record to the run's end
    finally:
        g.release()


def test_a_vllm_records_concurrent_is_held_to_its_measured_window():
    rec = make_record("vllm", "cpu", p=512, avg=100.0)
    window_end = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    later = "20260101T001000Z-abcdef (pid 7)"  # started 10 min after the window ended, before the save
    rec = rec.model_copy(
        update={
            "runner": "vllm",
            "created": "2025-12-31T23:50:00Z",
            "telemetry": {"t0": window_end - 30, "t1": window_end, "duration_s": 30.0},
            "concurrent": {"other_runs": [later]},
        }
    )
    why = concurrent_problem(rec)
    assert why is not None and "after its measured window ended" in why, why
    during = rec.model_copy(update={"concurrent": {"other_runs": ["20251231T235930Z-abcdef (pid 7)"]}})
    assert concurrent_problem(during) is None


# ------------------------------------------------------------------- 3. one reading of DOCKER_HOST


@pytest.mark.parametrize(
    "where",
    [
        "tcp://10.1.2.3\\@127.0.0.1:2375",
        "tcp://10.1.2.3 127.0.0.1:2375",
        "ssh://u\\@127.0.0.1",
        "tcp://h\x1b:1",
    ],
)
def test_a_docker_host_read_two_ways_is_refused_by_the_client_and_judged_by_no_one(monkeypatch, where):
    from toolkit.core.errors import EngineUnavailable
    from toolkit.engine import choice
    from toolkit.host.doctor_checks import remote_engine

    monkeypatch.setenv("DOCKER_HOST", where)
    monkeypatch.setenv("TOOLKIT_ENGINE", "docker")
    with pytest.raises(EngineUnavailable) as err:  # was: the SDK asked 10.1.2.3 port 80
        choice.client()
    assert "DOCKER_HOST is malformed" in str(err.value) and "in its address" in str(err.value), err.value
    assert remote_engine({}, {"DOCKER_HOST": where}, "r9700-box") is None  # the engine check says it


@pytest.mark.parametrize(
    "where",
    [
        "unix:///home/my user/docker.sock",
        "tcp://[fe80::1%eth0]:2375",
        "ssh://me@gpu-node-7:22",
        "tcp://bücher.lan:2375",
    ],
)
def test_an_address_both_read_alike_is_no_problem(where):
    from toolkit.engine.choice import address_problem

    assert address_problem(where) is None


# ------------------------------------------------------------------- 4. a spread its rates cannot have


def _row(**kw) -> str:
    row = json.loads(
        (DATA / "cases43" / "llamabench-0c1e57098-cpu-two-files-alike.jsonl").read_text().splitlines()[0]
    )
    for k in ("samples_ts", "samples_ns"):
        row.pop(k, None)
    return json.dumps({**row, **kw}) + "\n"


@pytest.mark.parametrize("sd", [1.7e308, 5e7])
def test_an_imported_stddev_beyond_what_its_rates_can_spread_is_refused(tmp_path, sd):
    from tests.support.runs import tk

    src = tmp_path / "sd.jsonl"
    src.write_text(_row(avg_ts=20.0, avg_ns=800_000_000, stddev_ts=sd))  # 16 tokens in 0.8 s
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 4, res.stdout + res.stderr  # was: imported, its noise covering any slowdown
    assert f"stddev_ts {sd:g} is more than avg_ts 20 x sqrt(10000)" in res.stderr, res.stderr


def test_a_stddev_its_samples_can_have_is_kept():
    from toolkit.runtimes.llama_bench import check

    # three rates 0.001, 0.001, 59.998: mean 20, stddev 34.64 <= 20 x sqrt(3)
    rates = [0.001, 0.001, 59.998]
    fields = {"stddev_ts": 34.6376, "samples_ts": rates, "samples_ns": [16e9 / r for r in rates]}
    assert check.check_figures(fields, 16, 20.0, None) is None
    fields["stddev_ts"] = 35.0  # beyond 20 x sqrt(3) = 34.64: no three rates, none below 0, spread so
    assert "x sqrt(3): 3 rates, none below 0" in (check.check_figures(fields, 16, 20.0, None) or "")


# ------------------------------------------------------------------- 5. a bare print() at a stop

BARE = r"""
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    import click
    from toolkit.cli import main as m

    @click.command("sleepy")
    def sleepy():
        click.echo("sleeping")
        try:
            time.sleep(300)
        except KeyboardInterrupt:
            time.sleep(0.5)
            print("stopping: nothing was saved")  # a bare print, as a library's own write
            raise

    m.cli.add_command(sleepy)
    sys.argv = ["toolkit", "sleepy"]
    m.main()
buf, deadline = b"", time.monotonic() + 60
while b"sleeping" not in buf and time.monotonic() < deadline:
    if select.select([fd], [], [], 0.5)[0]:
        try:
            buf += os.read(fd, 4096)
        except OSError:
            break
os.close(fd)  # the terminal closes: SIGHUP to its session, EIO on every later write to it
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pty's hang-up as Linux gives it")
def test_a_bare_print_to_a_closed_terminal_at_a_stop_exits_129_not_8():
    res = subprocess.run([sys.executable, "-c", BARE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.stdout.strip() == "129", (res.stdout, res.stderr)  # was: 8 (the failed write)


# ------------------------------------------------------------------- 7. one answer in any order


def test_files_described_alike_give_the_same_records_in_any_order(tmp_path):
    from tests.support.runs import tk

    rows = (DATA / "cases43" / "llamabench-0c1e57098-cpu-two-files-alike.jsonl").read_text().splitlines(True)
    (tmp_path / "a.jsonl").write_text("".join(rows[:2]))  # /m/a.gguf
    (tmp_path / "b.jsonl").write_text("".join(rows[2:]))  # /m/b.gguf, described alike

    def apart(*names: str) -> list[tuple]:
        out = tmp_path / "-".join(names)
        res = tk(ROOT, "import", *(str(tmp_path / n) for n in names), "--results", str(out), "--label", "x")
        assert res.returncode == 0, res.stderr
        recs = [json.loads(line) for f in out.glob("*/bench.jsonl") for line in f.read_text().splitlines()]
        return sorted((r["model"]["path"], r["model"].get("file_apart"), r["n_prompt"]) for r in recs)

    forward = apart("a.jsonl", "b.jsonl")
    assert forward == apart("b.jsonl", "a.jsonl")  # was: a.gguf apart in one order, b.gguf in the other
    assert [f for _p, f, _n in forward] == [None, None, "b.gguf", "b.gguf"], (
        forward
    )  # the least name keeps it
