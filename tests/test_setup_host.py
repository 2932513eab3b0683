"""scripts/setup-host.sh's pieces that can be run here without changing this host, and the toolkit's
own words to a user who cannot open the Docker socket. The whole script is proven on fresh hosts by
scripts/fresh-host.sh (tests/test_fresh_host.py runs its CI part)."""

from __future__ import annotations

import grp
import os
import re
import subprocess
from pathlib import Path

import pytest

from toolkit.engine import api, choice

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT / "scripts" / "setup-host.sh"


def _function(name: str) -> str:
    """The text of one shell function of setup-host.sh (from `name() {` to the first `}` line)."""
    text = SETUP.read_text()
    m = re.search(rf"^{name}\(\) \{{.*?^\}}$", text, re.S | re.M)
    assert m, f"setup-host.sh has no function {name}"
    return m.group(0)


def test_setup_and_the_vllm_e2e_test_name_the_same_torch_wheel():
    from tests.support.contract_env import TORCH_CPU as TORCH

    assert re.search(rf"^TORCH_CPU={re.escape(TORCH)}\b", SETUP.read_text(), re.M)


def test_systemd_is_told_by_its_runtime_folder_not_by_a_degraded_state():
    # `systemctl is-system-running` exits 1 on `degraded` (one failed unit, e.g. getty in a container):
    # setup then started a second dockerd beside systemd's
    code = [ln for ln in SETUP.read_text().splitlines() if not ln.lstrip().startswith("#")]
    assert not [ln for ln in code if "is-system-running" in ln]
    assert any("[ -d /run/systemd/system ]" in ln for ln in code)


def test_a_login_shell_without_sbin_still_finds_dockerd():
    # Debian's user PATH has no /usr/sbin: `command -v dockerd` failed and every re-run reinstalled
    sh = (
        "PATH=/usr/bin:/bin\n"
        + next(ln for ln in SETUP.read_text().splitlines() if ln.startswith("PATH=$PATH:"))
        + '\necho "$PATH"\n'
    )
    out = subprocess.run(["bash", "-c", sh], capture_output=True, text=True, check=True).stdout
    assert "/usr/sbin" in out.split(":") or "/usr/sbin\n" in out


def test_step_shows_the_failing_commands_last_lines_and_exits(tmp_path):
    # a failing long step (apt, debootstrap) said nothing but its name: the cause must be on screen
    sh = (
        'set -euo pipefail\nlog() { printf "[setup] %s\\n" "$*" >&2; }\n'
        'die() { printf "[setup] error: %s\\n" "$*" >&2; exit 1; }\n'
        f"SETUP_LOG={tmp_path}/setup.log\n"
        + _function("step")
        + '\nstep "making a thing" sh -c "echo E: no such package 1>&2; exit 100"\necho NOT-REACHED\n'
    )
    res = subprocess.run(["bash", "-c", sh], capture_output=True, text=True)
    assert res.returncode == 1 and "NOT-REACHED" not in res.stdout
    assert "E: no such package" in res.stderr and "making a thing failed (exit 100" in res.stderr


def test_step_retries_when_asked(tmp_path):
    sh = (
        'set -euo pipefail\nlog() { printf "[setup] %s\\n" "$*" >&2; }\n'
        'die() { printf "[setup] error: %s\\n" "$*" >&2; exit 1; }\n'
        f"SETUP_LOG={tmp_path}/setup.log\n"
        + _function("step")
        + f'\nTRIES=3 step "flaky" sh -c "[ -e {tmp_path}/once ] || {{ touch {tmp_path}/once; exit 1; }}"\necho OK\n'
    )
    res = subprocess.run(["bash", "-c", sh], capture_output=True, text=True)
    assert res.returncode == 0 and "OK" in res.stdout and "try 2 of 3" in res.stderr


def test_the_docker_cli_package_is_named_where_apt_has_one(tmp_path):
    # Debian 13's docker.io only Recommends docker-cli; setup installs without recommends
    fake = tmp_path / "apt-cache"
    fake.write_text("#!/bin/sh\nprintf 'docker-cli:\\n  Installed: (none)\\n  Candidate: %s\\n' \"$CAND\"\n")
    fake.chmod(0o755)
    sh = _function("docker_cli_pkg") + "\ndocker_cli_pkg\n"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    # apt-cache is faked (its answer on a Debian 13 host and on Debian 12): neither release is this host
    for cand, want in (("26.1.5+dfsg1-9+b9", "docker-cli"), ("(none)", "")):
        out = subprocess.run(
            ["bash", "-c", sh], capture_output=True, text=True, env={**env, "CAND": cand}
        ).stdout
        assert out.strip() == want


def test_permission_denied_says_newgrp_to_a_member_whose_shell_predates_it(monkeypatch):
    # the group database is faked: this process cannot be made a member without a new login
    me = "newcomer"
    monkeypatch.setenv("USER", me)
    monkeypatch.setattr(grp, "getgrnam", lambda name: grp.struct_group(("docker", "x", 4242, [me])))
    monkeypatch.setattr(os, "getgroups", lambda: [1000])
    assert "`newgrp docker`" in choice.docker_group_fix() and "started before" in choice.docker_group_fix()
    monkeypatch.setattr(grp, "getgrnam", lambda name: grp.struct_group(("docker", "x", 4242, [])))
    assert f"sudo usermod -aG docker {me}" in choice.docker_group_fix()

    def no_group(name):
        raise KeyError(name)

    monkeypatch.setattr(grp, "getgrnam", no_group)
    assert "setup-host.sh" in choice.docker_group_fix()


@pytest.mark.parametrize("script", ["setup-host.sh", "fresh-host.sh", "run-tests.sh"])
def test_scripts_pass_shellcheck(script):
    import shutil

    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck not installed (setup-host.sh --test installs it)")
    res = subprocess.run(
        ["shellcheck", "-S", "warning", str(ROOT / "scripts" / script)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout


@pytest.mark.e2e
def test_doctor_names_a_base_image_that_cannot_run_a_command(tmp_path):
    """An empty rootfs imported as a base (what setup once tagged `debian:trixie-slim` after a swallowed
    debootstrap error) is an error check in doctor, naming the image; the real base is ok."""
    import tarfile

    from tests.support.e2e_helpers import engine_or_skip, make_project, run_cli

    engine_or_skip()
    empty = tmp_path / "empty.tar"
    with tarfile.open(empty, "w"):
        pass
    ref = "toolkit-test/empty-base:doctor"
    subprocess.run(["docker", "import", str(empty), ref], check=True, capture_output=True)
    # a working base whose ENTRYPOINT fails is no fault (a build's RUN steps ignore ENTRYPOINT)
    odd = "toolkit-test/entrypoint-false:doctor"
    ctx = tmp_path / "odd"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text('FROM debian:trixie-slim\nENTRYPOINT ["/bin/false"]\n')
    subprocess.run(["docker", "build", "-q", "-t", odd, str(ctx)], check=True, capture_output=True)
    try:
        assert api.probe_base_image("debian:trixie-slim") is None
        assert api.probe_base_image(odd) is None
        why = api.probe_base_image(ref)  # no `sh` in it: the engine's own explanation, not its URL
        assert why and "http" not in why
        project = make_project(tmp_path / "p", images=["cpu"], bench={})
        data = (
            (project / "matrix.yaml")
            .read_text()
            .replace("base_image: debian:trixie-slim", f"base_image: {ref}")
        )
        (project / "matrix.yaml").write_text(data)
        res, _ = run_cli(project, "doctor", "--json", expect=None)
        import json

        rep = json.loads(res.output)["result"]
        assert any(ref in e and "cannot run a command" in e for e in rep["errors"]), rep["errors"]
    finally:
        subprocess.run(["docker", "rmi", "-f", ref, odd], capture_output=True)


def test_socket_advice_names_the_docker_group_only_for_its_sockets(tmp_path):
    import socket

    from toolkit.engine import choice

    try:
        gid = grp.getgrnam("docker").gr_gid
    except KeyError:
        pytest.skip("no docker group on this host")
    path = tmp_path / "engine.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    try:
        assert "not to the docker group" in choice.socket_permission_fix(f"unix://{path}")
        if os.geteuid() != 0:
            pytest.skip("chgrp to docker needs root")
        os.chown(path, 0, gid)
        advice = choice.socket_permission_fix(f"unix://{path}")
        assert "docker" in advice and "not to the docker group" not in advice
    finally:
        s.close()


@pytest.mark.parametrize("where", ["unix://", "tcp://"])
def test_a_docker_host_without_an_address_is_named_malformed(monkeypatch, where):
    from toolkit.core.errors import EngineUnavailable

    monkeypatch.setenv("DOCKER_HOST", where)
    monkeypatch.setenv("TOOLKIT_ENGINE", "docker")
    with pytest.raises(EngineUnavailable, match="malformed.*no address"):
        api.client()


def test_the_test_level_gets_a_c_toolchain_that_links():
    # gcc only Recommends libc6-dev and setup installs without recommends: on a fresh Debian 12 the
    # RUNPATH test's link failed ("cannot find Scrt1.o")
    line = next(ln for ln in SETUP.read_text().splitlines() if ln.strip().startswith("TEST_PKGS=("))
    assert {"gcc", "libc6-dev", "cmake", "chromium"} <= set(line.split("(", 1)[1].rstrip(")").split())
