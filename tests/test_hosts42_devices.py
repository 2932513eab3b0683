"""Device passthrough on multi-GPU hosts of other shapes than the field case (shared/cases/README.md:
two R9700s and a gfx1036 iGPU): every GPU of the host is either passed or named hidden with its
reason, in bench's profile, its record and doctor alike; a --gpu pin or an environment choice that
cannot be honoured is said, never taken silently.

Fakes of what cannot exist here (this machine has no GPU): /sys trees (KFD topology, DRM render nodes,
PCI facts) and /dev nodes as regular files, built by tests/support/hosts.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.hosts import IMAGES, add_cpu_node, add_gpu, fake_host, igpu, make_dev, r9700
from toolkit.core.errors import BadInput
from toolkit.host.devices import detect_gpus, profile_for
from toolkit.host.doctor import diagnose, format_doctor

NVIDIA = {"vendor": "0x10de", "device_id": "0x2335", "revision": "0xa1"}
INTEL = {"vendor": "0x8086", "device_id": "0xa780", "drm_vram": False}


def _kfd_gpu_without_render_node(sysfs: Path, node: int) -> None:
    """A KFD GPU node whose properties name no drm_render_minor (amdgpu without its render node)."""
    d = sysfs / "class/kfd/kfd/topology/nodes" / str(node)
    d.mkdir(parents=True)
    (d / "properties").write_text(
        "cpu_cores_count 0\nsimd_count 128\ngfx_target_version 120001\nvendor_id 4098\ndevice_id 30033\n"
    )


def _mixed(sysfs: Path) -> tuple[int, ...]:
    """R9700 (renderD128); a second R9700 whose /dev node is gone (renderD129); a KFD GPU with no
    render node; an Intel iGPU (renderD130, DRM only); an NVIDIA H200 (renderD131)."""
    add_cpu_node(sysfs)
    r9700(sysfs)
    r9700(sysfs, node=2, minor=129, pci="0000:04:00.0", card=1)
    _kfd_gpu_without_render_node(sysfs, 3)
    add_gpu(sysfs, node=None, minor=130, pci="0000:00:02.0", card=2, **INTEL)
    add_gpu(sysfs, node=None, minor=131, pci="0000:05:00.0", card=3, **NVIDIA)
    return (128, 130, 131)  # renderD129 missing in /dev


def _igpu_first(sysfs: Path) -> tuple[int, ...]:
    """The iGPU is KFD node 1 and renderD128; the two R9700s follow (renderD129, renderD130)."""
    add_cpu_node(sysfs)
    igpu(sysfs, node=1, minor=128, card=0)
    r9700(sysfs, node=2, minor=129, pci="0000:03:00.0", card=1)
    r9700(sysfs, node=3, minor=130, pci="0000:04:00.0", card=2)
    return (128, 129, 130)


def _kfd_order_not_minor_order(sysfs: Path) -> tuple[int, ...]:
    """KFD node order differs from render-minor order, an NVIDIA card between them."""
    add_cpu_node(sysfs)
    r9700(sysfs, node=1, minor=130, pci="0000:04:00.0", card=2)
    add_gpu(sysfs, node=None, minor=129, pci="0000:05:00.0", card=1, **NVIDIA)
    r9700(sysfs, node=2, minor=128, pci="0000:03:00.0", card=0)
    return (128, 129, 130)


def _unknown_archs(sysfs: Path) -> tuple[int, ...]:
    """R9700, RX 9060 XT (gfx1200), MI300X (gfx942), Strix Halo (gfx1151, an APU with 96 GiB)."""
    add_cpu_node(sysfs)
    r9700(sysfs)
    add_gpu(sysfs, node=2, minor=129, pci="0000:04:00.0", gfx_version=120000, device_id="0x7590", card=1)
    add_gpu(sysfs, node=3, minor=130, pci="0000:05:00.0", gfx_version=90402, device_id="0x74a1", card=2)
    add_gpu(
        sysfs,
        node=4,
        minor=131,
        pci="0000:c5:00.0",
        gfx_version=110501,
        device_id="0x1586",
        card=3,
        vram=96 << 30,
    )
    return (128, 129, 130, 131)


SHAPES = {
    "mixed": _mixed,
    "igpu-first": _igpu_first,
    "kfd-order": _kfd_order_not_minor_order,
    "unknown-archs": _unknown_archs,
}


@pytest.mark.parametrize("backend", ["rocm", "vulkan"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_host_gpu_is_passed_or_named_hidden(tmp_path: Path, shape: str, backend: str) -> None:
    """The policy's promise on any host: no GPU vanishes without a word. Before: the ROCm profile
    dropped GPUs outside KFD (an Intel iGPU), a GPU whose render node is missing and a KFD GPU
    without one, and NVIDIA render nodes were not found at all, so `hidden` and the note were empty."""
    sysfs = tmp_path / "sys"
    renders = SHAPES[shape](sysfs)
    gpus = detect_gpus(sysfs)
    dev = make_dev(tmp_path, renders)
    p = profile_for(backend, gpus, dev=dev, targets=["gfx1201"])
    passed = set(p.gpus)
    named = {int(h.split(" ", 1)[0]) for h in p.hidden}
    assert passed.isdisjoint(named) and passed | named == {g.index for g in gpus}, (p.gpus, p.hidden)
    rec = p.record()
    assert rec["gpu_count"] == len(p.gpus) == len(rec["gpus"]) and rec["hidden"] == p.hidden
    for h in p.hidden:  # each named in the note bench prints, with its reason
        assert h in p.notes[0]
    if shape == "igpu-first":  # both R9700s passed, renumbered from 0 inside the container
        assert p.gpus == [1, 2] and p.gpu_count == 2
    if shape == "kfd-order" and backend == "rocm":  # ROCm's device N is the KFD order, not the minor's
        assert [d.split(":")[1] for d in p.devices] == [
            "/dev/kfd",
            "/dev/dri/renderD130",
            "/dev/dri/renderD128",
        ]


def test_each_unusable_gpu_has_its_own_reason(tmp_path: Path) -> None:
    sysfs = tmp_path / "sys"
    _mixed(sysfs)
    gpus = detect_gpus(sysfs)
    dev = make_dev(tmp_path, (128, 130, 131))
    assert [(g.index, g.vendor, g.render_name) for g in gpus] == [
        (0, "0x1002", "renderD128"),
        (1, "0x1002", "renderD129"),
        (2, "0x1002", ""),  # no render node named: never /dev/dri/renderD0
        (3, "0x8086", "renderD130"),
        (4, "0x10de", "renderD131"),  # after AMD and Intel: their numbers do not move
    ]
    rocm = profile_for("rocm", gpus, dev=dev, targets=["gfx1201"])
    assert rocm.gpus == [0] and rocm.environment == {}  # nothing the policy left out: no renumbering
    why = {h.split(" ", 1)[0]: h for h in rocm.hidden}
    assert f"its render node {dev}/dri/renderD129 is missing on this host" in why["1"]
    assert "(no render node)" in why["2"] and "its KFD node names none" in why["2"]
    assert "not in the KFD topology: ROCm cannot use it" in why["3"]
    assert "NVIDIA GPU: the rocm images here carry no driver for it" in why["4"]
    assert "pass --gpu N to choose another" not in rocm.notes[0]  # there is no other to choose
    vulkan = profile_for("vulkan", gpus, dev=dev)
    assert [d.split(":")[1] for d in vulkan.devices] == ["/dev/dri/renderD128"]
    assert any(h.startswith("3 vendor 0x8086") and "iGPU" in h for h in vulkan.hidden)
    assert any(h.startswith("4 ") and "NVIDIA GPU" in h for h in vulkan.hidden)


@pytest.mark.parametrize(
    "backend, pin, said",
    [
        ("rocm", 1, "renderD129 is missing on this host"),
        ("rocm", 2, "its KFD node names none"),
        ("rocm", 3, "not in the KFD topology"),
        ("vulkan", 4, "NVIDIA GPU"),
        ("rocm", 9, "no such GPU"),
    ],
)
def test_a_pin_on_a_gpu_that_cannot_be_passed_says_why(
    tmp_path: Path, backend: str, pin: int, said: str
) -> None:
    """`--gpu N` naming a card the backend cannot be given: before, `no such GPU for this backend`
    while `toolkit doctor` listed GPU N (or, for NVIDIA, no word of the card at all)."""
    sysfs = tmp_path / "sys"
    _mixed(sysfs)
    gpus, dev = detect_gpus(sysfs), make_dev(tmp_path, (128, 130, 131))
    with pytest.raises(BadInput, match=f"--gpu {pin}: ") as err:
        profile_for(backend, gpus, pin=pin, dev=dev)
    assert said in str(err.value) and "0 gfx1201" in str(err.value)  # and what can be chosen


def test_doctor_names_the_same_hidden_gpus_and_never_stats_dev_dri(tmp_path: Path) -> None:
    """doctor's verdicts use the same policy; a GPU with no render node is a warning, not a check of
    the /dev/dri folder (before: `ok render .../dev/dri: ... current user can open it`)."""
    h = fake_host(tmp_path)
    _kfd_gpu_without_render_node(h["sysfs"], 2)
    add_gpu(h["sysfs"], node=None, minor=131, pci="0000:05:00.0", card=3, **NVIDIA)
    (h["dev"] / "dri" / "renderD131").touch()
    rep = diagnose(IMAGES[:2], {}, env={}, docker_info={"ServerVersion": "26.1"}, **h)
    text = format_doctor(rep)
    assert f"{h['dev']}/dri:" not in text, text
    assert (
        "GPU 1: no render node: its KFD node names none (drm_render_minor); the toolkit never passes it"
        in text
    )
    assert (
        "GPU 2: NVIDIA GPU: the vulkan images here carry no driver for it; the toolkit never passes it"
        in text
    )
    rocm, vulkan = rep.images
    assert (
        rocm.runnable
        and "hidden: 1 gfx1201 (no render node)" in rocm.notes[0]
        and "2 vendor 0x10de" in rocm.notes[0]
    )
    assert vulkan.runnable and "2 vendor 0x10de" in vulkan.notes[0]


def test_a_gpu_choice_in_the_environment_is_said_not_ignored(tmp_path: Path) -> None:
    """ROCR_VISIBLE_DEVICES=1 in the user's shell: containers get none of the host's variables, so
    the choice was dropped in silence; bench's plan notes and doctor now say it and the way to choose."""
    from toolkit.host.info import env_choice_note

    assert env_choice_note({}) is None
    note = env_choice_note({"ROCR_VISIBLE_DEVICES": "1", "PATH": "/bin"})
    assert note is not None and note.startswith("ROCR_VISIBLE_DEVICES=1 is set here but not applied")
    assert "--gpu N" in note
    assert "--gpu 0 chooses the GPU" in (env_choice_note({"GGML_VK_VISIBLE_DEVICES": "0"}, pin=0) or "")
    rep = diagnose(
        IMAGES[:1],
        {},
        env={"HIP_VISIBLE_DEVICES": "1"},
        docker_info={"ServerVersion": "26.1"},
        **fake_host(tmp_path),
    )
    assert any(
        c.level == "warn" and c.message.startswith("HIP_VISIBLE_DEVICES=1 is set here") for c in rep.checks
    )
