"""cases42: new shapes of two field kinds on fake hosts (no AMD GPU and no rootless engine here: the
sysfs/dev trees and the engines' descriptions are stand-ins, as tests/support/hosts.py builds them).

- The engine description doctor reads, in the shapes engines write it: `podman info --format json`
  (rootless Podman 4.9), the `docker info` of Podman 3's Docker-compatible API (`Rootless` true, no
  `name=rootless` in SecurityOptions) and a `docker info` whose client reached no daemon
  (`ServerErrors`). Each was read as a reachable Docker engine that GPU images 'can run here' on.
- A multi-GPU host where a card sysfs lists has no render node in /dev: it was left out of the
  profile without a word (no hidden entry, no note), and `--gpu N` of it said "no such GPU"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.hosts import IMAGES, add_cpu_node, fake_host, igpu, make_dev, r9700
from toolkit.core.errors import BadInput
from toolkit.host.devices import detect_gpus, profile_for
from toolkit.host.doctor import diagnose, format_doctor

DATA = Path(__file__).resolve().parent / "data" / "cases42"


def _doctor(tmp_path: Path, name: str, probe=None):
    info = json.loads((DATA / name).read_text())
    rep = diagnose(IMAGES, {}, env={}, docker_info=info, device_probe=probe, **fake_host(tmp_path))
    return rep, format_doctor(rep)


@pytest.mark.parametrize(
    "name", ["podman-info-rootless-4.9.3.json", "docker-info-podman-3.0.1-compat-rootless.json"]
)
def test_a_rootless_podman_in_any_shape_is_rootless_podman(tmp_path, name):
    """Reproducer: both were 'Docker engine {...}' / 'Docker engine 3.0.1' and `rocm: can run here`."""
    rep, text = _doctor(tmp_path, name)
    gpu = [v for v in rep.images if v.backend in ("rocm", "vulkan")]
    assert gpu and not any(v.runnable for v in gpu), text
    assert "rocm: cannot run here: rootless Podman: host GIDs do not map" in text, text
    assert "Docker engine" not in text and "(rootless; Docker API" in text, text
    proven, text = _doctor(tmp_path / "p", name, probe=lambda image, backend: None)
    assert all(v.runnable for v in proven.images if v.backend in ("rocm", "vulkan")), text


def test_podman_info_json_gives_its_runtime_and_storage(tmp_path):
    _rep, text = _doctor(tmp_path, "podman-info-rootless-4.9.3.json")
    assert "Podman 4.9.3 (rootless; Docker API 4.9.3)" in text and "buildah 1.33.7" in text, text
    assert "rootless Podman runs containers with runc" in text, text


def test_a_docker_info_that_reached_no_daemon_is_no_engine(tmp_path):
    """Reproducer: `ok docker Docker engine unknown version` and every image 'can run here'."""
    rep, text = _doctor(tmp_path, "docker-info-no-daemon.json")
    assert "error docker  Docker engine not reachable: Cannot connect to the Docker daemon" in text, text
    assert not any(v.runnable for v in rep.images), text
    assert "ok    docker" not in text, text


def test_the_shared_rootless_docker_info_is_unchanged(tmp_path):
    rep, text = _doctor(tmp_path, "../docker-info-rootless.json")
    assert "Docker engine 28.1.1" in text and "rootless Docker engine: host GIDs passed" in text, text


def _host(tmp_path: Path, renders: tuple[int, ...], *, with_igpu: bool):
    sysfs = tmp_path / "sys"
    add_cpu_node(sysfs)
    r9700(sysfs)
    r9700(sysfs, node=2, minor=129, pci="0000:04:00.0", card=1)
    if with_igpu:
        igpu(sysfs, node=3, minor=130, card=2)
    return detect_gpus(sysfs), make_dev(tmp_path, renders)


@pytest.mark.parametrize("backend", ["rocm", "vulkan"])
@pytest.mark.parametrize("with_igpu", [False, True])
def test_a_card_without_its_device_node_is_named_hidden(tmp_path, backend, with_igpu):
    """2x R9700 (+ iGPU) where /dev/dri/renderD129 is missing: one card is passed, the other is named
    with why (it was dropped unnamed: no note at all without the iGPU, only the iGPU named with it)."""
    renders = (128, 130) if with_igpu else (128,)
    gpus, dev = _host(tmp_path, renders, with_igpu=with_igpu)
    p = profile_for(backend, gpus, dev=dev, targets=["gfx1201"])
    assert p.gpus == [0] and p.gpu_count == 1
    assert p.hidden[0].startswith("1 gfx1201 AMD Radeon AI PRO R9700 (renderD129, 32 GiB) (its render node ")
    assert f"{dev}/dri/renderD129 is missing on this host" in p.hidden[0]
    assert len(p.hidden) == (2 if with_igpu else 1) and "hidden: 1 gfx1201" in p.notes[0], p.notes
    with pytest.raises(
        BadInput, match=r"--gpu 1: 1 gfx1201 .* cannot be passed: its render node .*renderD129 is missing"
    ):
        profile_for(backend, gpus, dev=dev, pin=1, targets=["gfx1201"])


def test_doctor_names_the_card_without_a_node(tmp_path):
    gpus, dev = _host(tmp_path, (128,), with_igpu=False)
    rep = diagnose(IMAGES, {}, env={}, sysfs=tmp_path / "sys", dev=dev)
    text = format_doctor(rep)
    assert "renderD129" in text and "is missing on this host" in text, text
