"""`toolkit doctor` on rootless / user-namespace-remapped engines of other shapes than the field case
(shared/cases/docker-info-rootless.json): GPU images are 'cannot run here' unless a one-shot container
proved it opens the device nodes, whatever form the engine's info takes; a rootless Docker on cgroup
v1 is said to discard resource limits.

Fakes of what cannot exist here: the engine's info (this machine's Docker is rootful; a rootless or
remapped engine cannot be started beside it) and an R9700 host (/sys, /dev: no GPU here). The probe is
the function doctor's CLI passes (cli.host.probe); it is replaced by its two answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.hosts import IMAGES, fake_host
from tests.support.project import ROOT
from toolkit.host.doctor import diagnose, format_doctor

ROOTLESS = json.loads((ROOT / "tests" / "data" / "docker-info-rootless.json").read_text())
DENIED = "can't open '/dev/kfd': Permission denied"


def _gpu_verdicts(tmp_path: Path, info: dict, probe, mounts: str | None = None) -> tuple[dict, str]:
    host = fake_host(tmp_path)
    if mounts is not None:
        (host["proc"] / "self").mkdir(parents=True, exist_ok=True)
        (host["proc"] / "self" / "mounts").write_text(mounts)
    rep = diagnose(IMAGES, {}, env={}, docker_info=info, device_probe=probe, **host)
    return {v.name: v.runnable for v in rep.images if v.backend != "cpu"}, format_doctor(rep)


SHAPES = {
    # engine_info() of a rootless Docker whose SecurityOptions did not come through (its `rootless`)
    "engine-info-rootless": {"engine": "docker", "rootless": True, "server_version": "28.1.1"},
    # API 1.25 (Docker 1.13) gave SecurityOptions as Key/Value objects
    "api-1.25-objects": {
        "ServerVersion": "1.13.1",
        "SecurityOptions": [{"Key": "Name", "Value": "seccomp"}, {"Key": "Name", "Value": "rootless"}],
    },
    "userns-remap": {
        "ServerVersion": "28.1.1",
        "SecurityOptions": ["name=seccomp,profile=builtin", "name=userns"],
    },
    # an engine that names no security option at all: rootful cannot be told from rootless
    "no-security-options": {
        "engine": "docker",
        "rootless": False,
        "server_version": "28.1.1",
        "SecurityOptions": [],
    },
    "field-case": ROOTLESS,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_gpu_images_need_proven_access_on_any_remapped_engine(tmp_path: Path, shape: str) -> None:
    """Before: the first two shapes and the last-but-one said `can run here` (the rootless flag and
    the Key/Value form were not read; an empty SecurityOptions was taken for rootful)."""
    info = SHAPES[shape]
    for n, (probe, runnable) in enumerate(
        [(None, False), (lambda i, b: DENIED, False), (lambda i, b: None, True)]
    ):
        verdicts, text = _gpu_verdicts(tmp_path / str(n), info, probe)
        assert verdicts and all(v is runnable for v in verdicts.values()), (shape, n, text)
        if not runnable:
            assert "rocm: cannot run here:" in text and "not proven" in text, text
        else:
            assert "device access proven by a one-shot open" in text


def test_a_rootful_engine_needs_no_proof(tmp_path: Path) -> None:
    info = {"ServerVersion": "28.1.1", "SecurityOptions": ["name=seccomp,profile=builtin", "name=cgroupns"]}
    verdicts, text = _gpu_verdicts(tmp_path, info, None)
    assert all(verdicts.values()) and "rootless" not in text and "no security options" not in text


V1 = "tmpfs /sys/fs/cgroup tmpfs ro 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw 0 0\n"
V2 = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"


def test_rootless_docker_on_cgroup_v1_says_limits_are_discarded(tmp_path: Path) -> None:
    """Rootless Docker without cgroup v2 runs containers without cgroups: `--memory` (bench.memory) is
    dropped with a daemon warning nobody sees. Before: doctor said only `cgroup v1 (...: Docker and
    Podman run on it)`."""
    _, text = _gpu_verdicts(tmp_path / "v1", ROOTLESS, lambda i, b: None, V1)
    assert (
        "rootless Docker on cgroup v1: it runs containers without cgroups, so resource limits are discarded"
        in text
    )
    _, text = _gpu_verdicts(tmp_path / "v2", ROOTLESS, lambda i, b: None, V2)
    assert "cgroup v2" in text and "limits are discarded" not in text
    rootful = {"ServerVersion": "28.1.1", "SecurityOptions": ["name=seccomp,profile=builtin"]}
    _, text = _gpu_verdicts(tmp_path / "rootful", rootful, None, V1)
    assert "cgroup v1" in text and "limits are discarded" not in text
