"""End to end on Podman (Debian's podman, set up by `scripts/setup-host.sh --test`): `toolkit build`
and `toolkit bench` of the CPU image on rootful Podman (this process, as root) and on rootless Podman
(the test user `toolkit-podman`, through `su`, with the checkout's code), `toolkit doctor` on the
rootless one, and the one device-passthrough rule rootless Podman depends on (`--group-add
keep-groups`: a node only the user's group may open opens inside; without it, it does not). Nothing
is mocked. Each engine builds cold once (~3.5 min on 2 cores: the llama.cpp compile), later runs use
its layer and cache-mount caches."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.e2e_helpers import ROOT, make_project, run_cli
from toolkit.results.records import ResultStore

pytestmark = pytest.mark.e2e

AXES = {
    "n_prompt": [64],
    "n_gen": [16],
    "n_ubatch": [32],
    "n_batch": [512],
    "repetitions": 2,
    "n_gpu_layers": [0],
}
USER = "toolkit-podman"
VENV_PY = Path("/opt/toolkit-test/venv/bin/python")
SETUP = "run ./scripts/setup-host.sh --test first"
ROOTLESS_BLOCKERS = (
    "cannot clone: Operation not permitted",
    "user namespaces are not enabled",
    "cannot set up namespace using newuidmap",
    "newuidmap: write to uid_map failed",
)
"""Errors of a host that forbids unprivileged user namespaces (a kernel or sandbox setting outside
this project): the rootless tests skip with the error, and only then."""


def _podman_or_fail() -> None:
    if shutil.which("podman") is None or subprocess.run(["podman", "info"], capture_output=True).returncode:
        pytest.fail(f"podman is not installed or cannot run: {SETUP}")


def test_api_service_starts_over_a_stale_socket_file(tmp_path):
    """A socket file nothing listens on (a `podman system service` killed before it could remove it;
    what CI's host had at /run/podman/podman.sock) is replaced by a serving one: the toolkit's wait
    used to end at once on the dead file and the first build failed with "Connection refused"."""
    import socket

    from toolkit.engine.choice import _answers, _start_podman_service

    _podman_or_fail()
    path = str(tmp_path / "podman.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)
    dead.close()  # the file stays; nothing listens
    assert Path(path).is_socket() and not _answers(path)
    try:
        assert _start_podman_service(path) is None
        assert _answers(path)
        import docker

        assert docker.DockerClient(base_url=f"unix://{path}", timeout=30).ping()
        # it outlives the command that started it: in /, not in a checkout that may be deleted (conmon
        # then failed every attach with "Failed to get working directory")
        pids = subprocess.run(
            ["pgrep", "-f", f"unix://{path}"], capture_output=True, text=True
        ).stdout.split()
        assert pids and all(os.readlink(f"/proc/{p}/cwd") == "/" for p in pids)
    finally:
        subprocess.run(["pkill", "-f", f"unix://{path}"], check=False)


@pytest.fixture(scope="module")
def rootful(tmp_path_factory):
    """A CPU project built with `toolkit --engine podman build` as root (rootful Podman)."""
    _podman_or_fail()
    if os.geteuid() != 0:
        pytest.fail("the rootful Podman tests run as root (CI does)")
    saved = os.environ.get("TOOLKIT_ENGINE")
    os.environ["TOOLKIT_ENGINE"] = "podman"
    try:
        project = make_project(tmp_path_factory.mktemp("e2e-podman"), images=["cpu"], bench=AXES)
        res, _ = run_cli(project, "build", "--image", "cpu")
        assert "cpu: built toolkit/cpu:" in res.output
        yield project
    finally:
        if saved is None:
            os.environ.pop("TOOLKIT_ENGINE", None)
        else:
            os.environ["TOOLKIT_ENGINE"] = saved


def test_rootful_build_records_the_podman_build(rootful):
    rec = ResultStore(rootful / "results").latest_build("cpu")
    assert rec is not None and rec.digest.startswith("sha256:") and rec.size_bytes > 10_000_000
    assert (
        rec.build_command[:4] == ["podman", "build", "--format", "docker"]
        and "--iidfile" in rec.build_command
    )
    assert rec.labels["org.toolkit.backend"] == "cpu" and rec.facts.get("ggml-backends", "").startswith("cpu")
    res, _ = run_cli(rootful, "build", "--image", "cpu")
    assert "all steps from cache, image unchanged" in res.output
    assert ResultStore(rootful / "results").latest_build("cpu").digest == rec.digest


def test_rootful_bench_runs_on_podman_and_records_it(rootful):
    from toolkit.engine import api as engine

    res, _ = run_cli(rootful, "bench", "--image", "cpu")
    assert "cpu x tiny-qwen3moe: ok" in res.output
    digest = ResultStore(rootful / "results").latest_build("cpu").digest
    lines = [
        json.loads(x) for x in (rootful / "results" / digest[7:19] / "bench.jsonl").read_text().splitlines()
    ]
    assert len(lines) == 2 and all(r["status"] == "ok" and r["avg_ts"] > 0 for r in lines)
    for r in lines:
        assert r["command"][:3] == ["podman", "run", "--rm"] and "--cap-drop" in r["command"]
        eng = r["host"]["docker"]
        assert eng["engine"] == "podman" and eng["rootless"] is False and eng["server_version"]
    assert engine.engine_id() == "podmanroot"  # the one-benchmark guard's key: not Docker's engine ID
    dry, _ = run_cli(rootful, "bench", "--image", "cpu", "--dry-run")
    assert "cpu x tiny-qwen3moe (sweep): podman run --rm" in dry.output


# ------------------------------------------------------------------------------------- rootless


def _as_user(project: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """`python -m toolkit --engine podman ARGS` as the test user in `project` (its own rootless
    Podman; the checkout's code copied into project/code, the venv setup-host made for it)."""
    uid = pwd.getpwnam(USER).pw_uid
    env = f"XDG_RUNTIME_DIR=/run/user/{uid} PYTHONPATH={project / 'code'} HOME={pwd.getpwnam(USER).pw_dir}"
    cmd = f"cd {project} && env {env} {VENV_PY} -m toolkit --engine podman " + " ".join(args)
    return subprocess.run(
        ["su", USER, "-s", "/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=timeout
    )


def _rootless_or_skip() -> None:
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        pytest.fail(f"no user {USER}: {SETUP}")
    if not VENV_PY.exists():
        pytest.fail(f"no {VENV_PY}: {SETUP}")
    probe = subprocess.run(
        ["su", USER, "-s", "/bin/sh", "-c", f"cd /tmp && XDG_RUNTIME_DIR=/run/user/{pw.pw_uid} podman info"],
        capture_output=True,
        text=True,
    )
    if probe.returncode:
        blocker = next((b for b in ROOTLESS_BLOCKERS if b in probe.stderr), None)
        if blocker:
            pytest.skip(f"this host forbids rootless containers: {probe.stderr.strip()[-300:]}")
        pytest.fail(f"rootless podman info as {USER} failed: {probe.stderr.strip()[-500:]}")


@pytest.fixture(scope="module")
def rootless(tmp_path_factory):
    """A CPU project owned by the test user, built by `toolkit build` as that user (rootless Podman)."""
    _podman_or_fail()
    _rootless_or_skip()
    base = Path("/tmp") / f"toolkit-e2e-podman-{os.getpid()}"  # pytest's tmp folder is root's alone
    shutil.rmtree(base, ignore_errors=True)
    project = make_project(base, images=["cpu"], bench=AXES)
    shutil.copytree(
        ROOT / "toolkit", project / "code" / "toolkit", ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run(["chown", "-R", f"{USER}:", str(base)], check=True)
    res = _as_user(project, "build", "--image", "cpu")
    assert res.returncode == 0 and "cpu: built toolkit/cpu:" in res.stdout, res.stdout + res.stderr
    yield project
    shutil.rmtree(base, ignore_errors=True)


def test_rootless_build_and_bench(rootless):
    res = _as_user(rootless, "bench", "--image", "cpu")
    assert res.returncode == 0 and "cpu x tiny-qwen3moe: ok" in res.stdout, res.stdout + res.stderr
    digest = ResultStore(rootless / "results").latest_build("cpu").digest
    lines = [
        json.loads(x) for x in (rootless / "results" / digest[7:19] / "bench.jsonl").read_text().splitlines()
    ]
    assert len(lines) == 2 and all(r["status"] == "ok" and r["avg_ts"] > 0 for r in lines)
    assert all(r["host"]["docker"]["engine"] == "podman" and r["host"]["docker"]["rootless"] for r in lines)
    assert lines[0]["command"][:3] == ["podman", "run", "--rm"]


def test_rootless_doctor_says_what_it_can_pass(rootless):
    res = _as_user(rootless, "doctor")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok    engine  Podman " in res.stdout and "(rootless; Docker API" in res.stdout
    nodes = [Path("/dev/kfd"), *sorted(Path("/dev/dri").glob("renderD*"))]
    present = [n for n in nodes if n.exists()]
    if not present:
        assert "rootless Podman: no GPU device node here" in res.stdout
    for node in present:
        assert (
            f"rootless Podman can pass {node}" in res.stdout
            or f"rootless Podman cannot pass {node}" in res.stdout
        )
    assert "cpu: can run here" in res.stdout


def test_rootless_keep_groups_passes_a_group_only_node(rootless, tmp_path):
    """A character device (1:3, as /dev/null) that only group `toolkit-gpu-test` may open, the test
    user in that group: inside a rootless container it opens with `--group-add keep-groups` (what
    the toolkit passes on rootless Podman) and does not without it (numeric host GIDs cannot map)."""
    group = "toolkit-gpu-test"
    try:
        grp.getgrnam(group)
    except KeyError:
        subprocess.run(["groupadd", group], check=True)
    subprocess.run(["usermod", "-aG", group, USER], check=True)
    # keep-groups keeps the groups of the process that runs crun: Podman's API service, as it was
    # when it started. One started before the user joined the group (by the build above) lacks it:
    # stop it (started by this session's toolkit runs); the toolkit starts a fresh one.
    for pid in subprocess.run(
        ["pgrep", "-u", USER, "-f", "podman system service"], capture_output=True, text=True
    ).stdout.split():
        groups = Path(f"/proc/{pid}/status").read_text().split("Groups:", 1)[1].split("\n", 1)[0].split()
        if str(grp.getgrnam(group).gr_gid) not in groups:
            os.kill(int(pid), 15)
    node = rootless / "fake-render"
    if not node.exists():
        subprocess.run(["mknod", str(node), "c", "1", "3"], check=True)
    os.chown(node, 0, grp.getgrnam(group).gr_gid)
    os.chmod(node, 0o660)
    script = (
        "import sys; from toolkit.engine import api as e; "
        f"d=['{node}:/dev/dri/renderD128:rwm']; ref=e.inspect_image('toolkit/cpu:latest').id; "
        "print('KEEP', e.probe_device_access(ref, devices=d, group_add=['keep-groups'])); "
        "print('NONE', e.probe_device_access(ref, devices=d, group_add=[]))"
    )
    uid = pwd.getpwnam(USER).pw_uid
    cmd = (
        f"cd {rootless} && env XDG_RUNTIME_DIR=/run/user/{uid} TOOLKIT_ENGINE=podman "
        f'PYTHONPATH={rootless / "code"} {VENV_PY} -c "{script}"'
    )
    res = subprocess.run(
        ["su", USER, "-s", "/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "KEEP None" in res.stdout
    assert "NONE " in res.stdout and "Permission denied" in res.stdout.split("NONE ", 1)[1]
