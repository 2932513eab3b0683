"""cases43: the engine-description kind (docker-info-rootless) in a new shape: an engine on ANOTHER
host. `docker --context gpu-node-7 info`, or DOCKER_HOST=ssh://.../tcp://..., reaches a daemon whose
containers get that host's GPUs and device nodes; doctor read this host's sysfs and /dev and said
`rocm: can run here` about devices the engine's containers never see. No remote engine here: the
`docker info` is a stand-in in the shape Docker 27's CLI writes (`--format json`; Name, ClientInfo.Context)
and the host is tests/support/hosts.py's fake R9700 host (hostname r9700-box)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hosts import IMAGES, fake_host
from toolkit.host.doctor import diagnose, format_doctor
from toolkit.host.doctor_checks import remote_engine

DATA = Path(__file__).resolve().parent / "data"
REMOTE = json.loads((DATA / "cases43" / "docker-info-remote-context.json").read_text())
LOCAL = {**REMOTE, "ClientInfo": {**REMOTE["ClientInfo"], "Context": "default"}}


def _doctor(tmp_path: Path, info: dict, env: dict, probe=None):
    rep = diagnose(IMAGES, {}, env=env, docker_info=info, device_probe=probe, **fake_host(tmp_path))
    return rep, format_doctor(rep)


def _gpu_runnable(rep) -> list[bool]:
    return [v.runnable for v in rep.images if v.backend in ("rocm", "vulkan")]


@pytest.mark.parametrize(
    ("info", "env", "said"),
    [
        (REMOTE, {}, "remote Docker engine on host 'gpu-node-7' (docker context 'gpu-node-7')"),
        (
            LOCAL,
            {"DOCKER_HOST": "ssh://me@gpu-node-7"},
            "remote Docker engine at ssh://gpu-node-7 (DOCKER_HOST)",
        ),
        (
            LOCAL,
            {"DOCKER_HOST": "tcp://10.0.0.7:2376"},
            "remote Docker engine at tcp://10.0.0.7 (DOCKER_HOST)",
        ),
    ],
    ids=["context", "ssh", "tcp"],
)
def test_a_remote_engine_is_not_said_to_run_gpu_images_on_this_hosts_devices(tmp_path, info, env, said):
    """Reproducer: every one of these said `rocm: can run here: /dev/kfd + renderD128 (gfx1201)`."""
    rep, text = _doctor(tmp_path, info, env)
    assert _gpu_runnable(rep) == [False, False, False], text
    assert f"rocm: cannot run here: {said}: its containers get the GPUs and device nodes of the host" in text
    assert "run `toolkit doctor` on that host" in text, text
    assert f"warn  docker  {said}" in text, text
    assert "cpu: can run here: no devices needed" in text, text
    proven, text = _doctor(tmp_path / "p", info, env, probe=lambda image, backend: None)
    assert _gpu_runnable(proven) == [True, True, True], text
    assert "device access proven by a one-shot open" in text and "not necessarily the engine's" in text, text


@pytest.mark.parametrize(
    "where", ["unix:///var/run/docker.sock", "tcp://127.0.0.1:2375", "tcp://localhost:2375"]
)
def test_a_local_engine_address_is_this_host(tmp_path, where):
    info = {**LOCAL, "Name": "r9700-box"}
    rep, text = _doctor(tmp_path, info, {"DOCKER_HOST": where})
    assert _gpu_runnable(rep) == [True, True, True], text
    assert "remote" not in text and "daemon runs on a host named" not in text, text


def _own_lan_address() -> str:
    """This host's source address toward a public one (a UDP connect sends no packet), else a skip."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            pytest.skip("no IPv4 route on this host")
        return s.getsockname()[0]


def test_this_hosts_own_lan_address_is_this_host(tmp_path):
    """Reproducer: DOCKER_HOST=tcp://<this host's LAN address> (a daemon listening on its LAN interface)
    made every GPU image `cannot run here: remote Docker engine`."""
    own = _own_lan_address()
    assert remote_engine({}, {"DOCKER_HOST": f"tcp://{own}:2375"}, "r9700-box") is None
    rep, text = _doctor(tmp_path, {**LOCAL, "Name": "r9700-box"}, {"DOCKER_HOST": f"tcp://{own}:2375"})
    assert _gpu_runnable(rep) == [True, True, True], text
    assert remote_engine({}, {"DOCKER_HOST": "tcp://192.0.2.254:2375"}, "r9700-box") is not None


def test_a_daemon_of_another_name_on_the_local_context_is_warned_of_not_refused(tmp_path):
    """A forwarded socket, or a daemon in a VM, through the default context: said, verdicts kept (the
    name alone does not prove another machine)."""
    rep, text = _doctor(tmp_path, LOCAL, {})
    assert _gpu_runnable(rep) == [True, True, True], text
    assert (
        "warn  docker  the engine's daemon runs on a host named 'gpu-node-7' (docker info Name), this host"
        in text
    )


def test_a_remote_rootless_engine_names_both_reasons(tmp_path):
    info = {**REMOTE, "SecurityOptions": [*REMOTE["SecurityOptions"], "name=rootless"]}
    rep, text = _doctor(tmp_path, info, {})
    assert _gpu_runnable(rep) == [False, False, False], text
    assert (
        "rocm: cannot run here: rootless Docker engine; remote Docker engine on host 'gpu-node-7'" in text
    ), text


@pytest.mark.parametrize("addr", ["239.1.2.3", "224.0.0.1", "255.255.255.255", "[ff05::1]"])
def test_a_multicast_or_broadcast_address_is_not_this_host(addr):
    """brk47: `this host's own address` was a bind that succeeds, and the kernel lets a socket bind to a
    multicast or broadcast address (RTN_MULTICAST, RTN_BROADCAST): each was taken as this host."""
    assert remote_engine({}, {"DOCKER_HOST": f"tcp://{addr}:2375"}, "r9700-box") is not None


def test_an_address_of_another_host_is_remote_where_nonlocal_binds_are_allowed():
    """brk47: with net.ipv4.ip_nonlocal_bind=1 (keepalived and other VIP hosts) a bind to any address
    succeeds, so every remote engine's address was this host and doctor judged its GPU images by this
    host's /dev. Run in a network namespace of its own (root and unshare(1) needed, else skipped)."""
    import os
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("sysctl"):
        pytest.skip("needs root and unshare(1) for a network namespace of its own")
    probe = (
        "from toolkit.host.doctor_checks import remote_engine as r; "
        "print(r({}, {'DOCKER_HOST': 'tcp://203.0.113.9:2375'}, 'r9700-box') is not None, "
        "r({}, {'DOCKER_HOST': 'tcp://[2001:db8::9]:2375'}, 'r9700-box') is not None)"
    )
    setup = "sysctl -qw net.ipv4.ip_nonlocal_bind=1 net.ipv6.ip_nonlocal_bind=1"
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", f'{setup} && exec "$0" -c "$1"', sys.executable, probe],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        check=False,
    )
    if done.returncode != 0 and "remote_engine" not in done.stderr:
        pytest.skip(f"no network namespace here: {done.stderr.strip()[:200]}")
    assert done.stdout.split() == ["True", "True"], done.stdout + done.stderr


def test_a_name_that_resolves_to_this_hosts_own_address_is_no_remote_engine(tmp_path):
    """/etc/hosts names (bound over the real one in a mount namespace of its own: root and unshare(1))
    read by the real resolver: `docker.lan` this host's LAN address, `loop.lan` a loopback one, `far.lan`
    another host, `both.lan` this host and another (the client may connect to either: remote)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a mount namespace of its own")
    own = _own_lan_address()
    hosts = tmp_path / "hosts"
    hosts.write_text(
        f"127.0.0.1 localhost\n{own} docker.lan both.lan\n127.0.0.9 loop.lan\n192.0.2.254 far.lan both.lan\n"
    )
    probe = (
        "from toolkit.host.doctor_checks import remote_engine as r; "
        "print(*[r({}, {'DOCKER_HOST': f'tcp://{n}:2375'}, 'r9700-box') is None "
        "for n in ('docker.lan', 'loop.lan', 'far.lan', 'both.lan')])"
    )
    done = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            'mount --bind "$2" /etc/hosts && exec "$0" -c "$1"',
            sys.executable,
            probe,
            str(hosts),
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        check=False,
    )
    if done.returncode != 0 and "remote_engine" not in done.stderr:
        pytest.skip(f"no mount namespace here: {done.stderr.strip()[:200]}")
    # was: False False False False (every name but this host's own was remote)
    assert done.stdout.split() == ["True", "True", "False", "False"], done.stdout + done.stderr
