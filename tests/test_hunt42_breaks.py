"""Hostile input against what the hosts42 / brk42 / nc42 / cases42 commits added: an engine description
of any shape (doctor), a KFD topology naming one render node twice, a GPU choice in the shell holding a
newline, a compare of models whose fields are anyone's text, and an import waiting on a lock whose holder
is stopped.

Fakes of what cannot exist here: the engine's description (this machine's Docker answers with its own,
well-formed one; doctor is handed the shapes a hostile or broken engine may answer with), an R9700 host
(/sys, /dev: tests/support/hosts builds them; no GPU here), and the Docker client engine_info asks (a
daemon that answers SecurityOptions as text cannot be started here).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hosts import IMAGES, add_cpu_node, fake_host, make_dev, r9700
from tests.support.project import DATA, ROOT
from toolkit.host.devices import detect_gpus, profile_for
from toolkit.host.doctor import diagnose, format_doctor

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
BIG = "9" * 100_000
SHAPES = {
    # before: TypeError ('int' / 'bool' object is not iterable), a traceback (exit 1)
    "server-errors-number": {"ServerVersion": "28.1.1", "ServerErrors": 1},
    "server-errors-bool": {"ServerErrors": True},
    # before: AttributeError / ValueError on the description itself
    "a-list": [],
    "a-string": "docker",
    # before: a 100,000-character version printed whole; a newline made a second check line
    "huge-version": {"ServerVersion": BIG, "SecurityOptions": ["name=seccomp"]},
    "newline-version": {
        "ServerVersion": "28.1.1\n  error   docker  forged line",
        "SecurityOptions": ["name=seccomp"],
    },
    "podman-huge-buildah": {"host": {"buildahVersion": BIG, "security": {"rootless": False}}, "version": {}},
    "list-version": {"ServerVersion": [1, 2], "SecurityOptions": ["name=seccomp"]},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_doctor_reads_an_engine_description_of_any_shape(tmp_path: Path, shape: str) -> None:
    rep = diagnose(IMAGES, {}, env={}, docker_info=SHAPES[shape], device_probe=None, **fake_host(tmp_path))
    text = format_doctor(rep)
    json.dumps(rep.to_dict())
    assert len(text) < 20_000, len(text)
    lines = [ln for ln in text.splitlines() if "forged line" in ln]
    assert all("Docker engine 28.1.1" in ln for ln in lines), lines  # the version's line, not one of its own
    engine = [c.message for c in rep.checks if c.topic in ("docker", "engine")]
    assert engine, text
    if shape in ("a-list", "a-string"):
        assert any("not reachable" in m for m in engine), engine
    if shape == "list-version":
        assert "Docker engine unknown version" in engine[0], engine


def test_engine_info_reads_security_options_given_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon (or proxy) answering SecurityOptions as one string: list() made it one name a
    character ('n', 'a', ...), so a rootless engine read as one that names options, none rootless:
    rootful. Now anything but a list names nothing (doctor then says rootless is unknown). The client
    is a stand-in: no such daemon runs here."""
    from toolkit.engine import choice
    from toolkit.host.doctor_checks import USERNS_UNKNOWN, userns_mode

    class Client:
        def version(self) -> dict:
            return {"Version": "28.1.1", "ApiVersion": "1.49"}

        def info(self) -> dict:
            return {"SecurityOptions": "name=rootless", "ServerVersion": "28.1.1"}

    monkeypatch.setattr(choice, "client", lambda: Client())
    monkeypatch.setattr(choice, "is_podman", lambda: False)
    got = choice.engine_info(buildx=False)
    assert got["SecurityOptions"] == [] and userns_mode(got) == USERNS_UNKNOWN, got


def test_two_kfd_nodes_naming_one_render_node_pass_it_once(tmp_path: Path) -> None:
    """Before: both GPUs were chosen and renderD128 was passed twice (two GPUs counted, one card)."""
    sysfs = tmp_path / "sys"
    add_cpu_node(sysfs)
    r9700(sysfs)
    node = sysfs / "class/kfd/kfd/topology/nodes/2"
    node.mkdir(parents=True)
    (node / "properties").write_text(
        "cpu_cores_count 0\nsimd_count 128\ngfx_target_version 120001\ndrm_render_minor 128\n"
    )
    gpus, dev = detect_gpus(sysfs), make_dev(tmp_path)
    assert [g.render_name for g in gpus] == ["renderD128", "renderD128"]
    prof = profile_for("rocm", gpus, dev=dev)
    assert sum("renderD128" in d for d in prof.devices) == 1, prof.devices
    assert "renderD128 is GPU 0's too" in " ".join(prof.notes), prof.notes


def test_a_gpu_choice_in_the_shell_is_said_on_one_line(tmp_path: Path) -> None:
    """Before: ROCR_VISIBLE_DEVICES='0\\n  error ...' printed a second check line of doctor's own
    look, and a 100,000-character value whole."""
    env = {"ROCR_VISIBLE_DEVICES": "0\n  error   gpu     forged", "HIP_VISIBLE_DEVICES": BIG}
    rep = diagnose(IMAGES, {}, env=env, docker_info=None, device_probe=None, **fake_host(tmp_path))
    text = format_doctor(rep)
    assert "\n  error   gpu     forged" not in text
    note = next(c.message for c in rep.checks if "ROCR_VISIBLE_DEVICES" in c.message)
    assert "ROCR_VISIBLE_DEVICES=0\\n  error" in note and len(note) < 1000, note


def _two_runs(tmp_path: Path, model_type: object, n_params: object = "keep") -> Path:
    """tests/data/results-cpu-a.jsonl as run RUNA and, with its model fields replaced, run RUNB (no
    sha256 on either side: the fields decide which model it is)."""
    base = [json.loads(x) for x in (DATA / "results-cpu-a.jsonl").read_text().splitlines()]
    for side in ("RUNA", "RUNB"):
        folder = tmp_path / "results" / side.lower()
        folder.mkdir(parents=True)
        rows = []
        for r in base:
            r = {**r, "run_id": side, "model": {**r["model"], "sha256": ""}, "raw": dict(r["raw"])}
            if side == "RUNB":
                r["raw"]["model_type"] = model_type
                if n_params != "keep":
                    r["raw"]["model_n_params"] = n_params
            rows.append(json.dumps(r) + "\n")
        (folder / "bench.jsonl").write_text("".join(rows))
    return tmp_path / "results"


@pytest.mark.parametrize(
    "model_type,n_params,said",
    [
        ("x\n error: forged", "keep", "B x  error: forged"),  # before: a second `error:` line
        ("Q" * 200_000, "keep", "B " + "Q" * 57 + "..."),  # before: a 200 kB message
        ("qwen3moe ?B F16", None, "model_n_params A 0.79 M, B not recorded"),  # before: `B None`
    ],
)
def test_compare_says_hostile_model_fields_on_one_short_line(
    tmp_path: Path, model_type: object, n_params: object, said: str
) -> None:
    results = _two_runs(tmp_path, model_type, n_params)
    res = subprocess.run(
        [sys.executable, "-m", "toolkit", "compare", "RUNA", "RUNB", "--results", str(results)],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 4, res.stderr[-800:]
    assert res.stderr.count("\n") == 1 and len(res.stderr) < 2000, res.stderr[:2000]
    assert said in res.stderr, res.stderr


def test_an_import_waiting_on_a_stopped_holder_names_it(tmp_path: Path) -> None:
    """Before: `waiting for another import into r to finish`, for ever, where that import is stopped
    (Ctrl-Z): nothing said who holds the lock or that it never will finish. Ctrl-C ends the wait: 130."""
    if not Path("/proc/locks").exists():
        pytest.skip("no /proc/locks")
    results = tmp_path / "r"
    results.mkdir()
    hold = (
        "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(300)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold, str(results)], stdout=subprocess.PIPE, text=True)
    waiter = None
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        holder.send_signal(signal.SIGSTOP)
        waiter = subprocess.Popen(
            [sys.executable, "-m", "toolkit", "import", "--results", str(results), "--label", "x",
             str(DATA / "llamabench-0c1e57098-cpu.jsonl")],
            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert waiter.stderr is not None
        first = waiter.stderr.readline()
        waiter.send_signal(signal.SIGINT)
        rest = waiter.communicate(timeout=120)[1]
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
    assert f"pid {holder.pid} holds it" in first and f"kill -CONT {holder.pid}" in first, first
    assert waiter.returncode == 130 and "interrupted" in rest, rest
    assert not list(results.glob("*/bench.jsonl"))
