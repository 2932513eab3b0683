"""GPU detection on fake /sys trees and the Docker device profile of each backend."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.hosts import (
    GIB,
    KFD_GID,
    RENDER_GID,
    add_cpu_node,
    add_gpu,
    build_host,
    host,
    igpu,
    kfd,
    make_dev,
    r9700,
    render,
)
from toolkit.core.errors import BadInput
from toolkit.host.devices import (
    DeviceMissing,
    DeviceProfile,
    Gpu,
    cpu_profile,
    detect_gpus,
    gfx_from_version,
    profile_for,
    rocm_profile,
    shortfall,
    vulkan_profile,
)


def missing_devices_reason(backend: str, gpus: list, dev: Path, allow_software: bool = False) -> str | None:
    """The line bench and build skip an image with (Shortfall.message), None when it can run."""
    short = shortfall(backend, gpus, dev, allow_software)
    return short.message() if short else None


# ---------------------------------------------------------------------------------------------
# Fake hosts


def profile_args(p: DeviceProfile) -> list[str]:
    """The device options a profile puts on `docker run` (its one translation, DeviceProfile.run_spec,
    through engine.run_command): everything between `--rm` and the image, network left out."""
    from toolkit.engine import api as engine

    cmd = engine.run_command(p.run_spec("img", ["cmd"], network=None))
    return cmd[3 : cmd.index("img")]


# ---------------------------------------------------------------------------------------------
# Detection


@pytest.mark.parametrize(
    "version, arch",
    [
        (120001, "gfx1201"),
        (120000, "gfx1200"),
        (110000, "gfx1100"),
        (90402, "gfx942"),
        (100302, "gfx1032"),
        (90010, "gfx90a"),
        (100306, "gfx1036"),
        (110501, "gfx1151"),
    ],
)
def test_gfx_from_version(version: int, arch: str) -> None:
    assert gfx_from_version(version) == arch


def test_detect_single_r9700(tmp_path: Path) -> None:
    add_cpu_node(tmp_path)
    r9700(tmp_path)
    assert detect_gpus(tmp_path) == [
        Gpu(
            index=0,
            gfx_target="gfx1201",
            name="AMD Radeon AI PRO R9700",
            vram_bytes=32 * GIB,
            pci_bus="0000:03:00.0",
            render_node="/dev/dri/renderD128",
            card_node="/dev/dri/card0",
            drm_render_minor=128,
            is_igpu=False,
            vendor="0x1002",
            device_id="0x7551",
            kfd_node=1,
            revision="0xc0",
        )
    ]


def test_detect_r9700_and_igpu(tmp_path: Path) -> None:
    add_cpu_node(tmp_path)
    r9700(tmp_path)
    igpu(tmp_path)
    gpus = detect_gpus(tmp_path)
    assert [(g.index, g.gfx_target, g.render_node, g.card_node, g.is_igpu) for g in gpus] == [
        (0, "gfx1201", "/dev/dri/renderD128", "/dev/dri/card0", False),
        (1, "gfx1036", "/dev/dri/renderD129", "/dev/dri/card1", True),
    ]
    assert gpus[1].vram_bytes == 512 * 1024**2


def test_detect_vram_from_kfd_banks_when_drm_lacks_it(tmp_path: Path) -> None:
    add_cpu_node(tmp_path)
    add_gpu(tmp_path, node=1, minor=128, pci="0000:03:00.0", drm_vram=False)
    assert detect_gpus(tmp_path)[0].vram_bytes == 32 * GIB


def test_detect_drm_only_host(tmp_path: Path) -> None:
    """Vulkan-only host: amdgpu without KFD plus an Intel iGPU; gfx unknown."""
    add_gpu(tmp_path, node=None, minor=128, pci="0000:03:00.0", card=0)
    add_gpu(
        tmp_path,
        node=None,
        minor=129,
        pci="0000:00:02.0",
        vendor="0x8086",
        device_id="0xa780",
        drm_vram=False,
    )
    add_gpu(tmp_path, node=None, minor=130, pci="0000:05:00.0", vendor="0x1af4", device_id="0x1050")  # virtio
    gpus = detect_gpus(tmp_path)
    assert [(g.index, g.gfx_target, g.vendor, g.render_node, g.is_igpu, g.kfd_node) for g in gpus] == [
        (0, "", "0x1002", "/dev/dri/renderD128", False, None),
        (1, "", "0x8086", "/dev/dri/renderD129", True, None),
    ]


def test_detect_no_gpu(tmp_path: Path) -> None:
    assert detect_gpus(tmp_path) == []
    add_cpu_node(tmp_path)
    assert detect_gpus(tmp_path) == []


@pytest.mark.skipif(
    Path("/sys/class/kfd").exists() or Path("/sys/class/drm").exists(), reason="host has GPUs"
)
def test_detect_this_machine_has_no_gpu() -> None:
    assert detect_gpus() == []


# ---------------------------------------------------------------------------------------------
# Profiles


# Docker's default seccomp profile stays on (AMD documents seccomp=unconfined as optional)
ROCM_SECURITY = ["no-new-privileges"]


@pytest.mark.parametrize(
    "kind, pin, renders, env",
    [
        pytest.param("one-gpu", None, [128], {}, id="rocm-one-gpu"),
        pytest.param("one-gpu", 0, [128], {"ROCR_VISIBLE_DEVICES": "0"}, id="rocm-one-gpu-pinned"),
        pytest.param(
            "two-gpus", None, [128], {"ROCR_VISIBLE_DEVICES": "0"}, id="rocm-two-gpus-auto-pins-dgpu"
        ),
        pytest.param("two-gpus", 1, [129], {"ROCR_VISIBLE_DEVICES": "0"}, id="rocm-two-gpus-pinned-igpu"),
        pytest.param("igpu-first", None, [128], {"ROCR_VISIBLE_DEVICES": "0"}, id="rocm-igpu-first"),
        pytest.param("two-dgpus", None, [128, 129], {}, id="rocm-two-dgpus"),
        pytest.param("two-dgpus", 1, [129], {"ROCR_VISIBLE_DEVICES": "0"}, id="rocm-two-dgpus-pinned"),
    ],
)
def test_rocm_profile(tmp_path: Path, kind: str, pin: int | None, renders: list[int], env: dict) -> None:
    gpus, dev = host(tmp_path, kind)
    p = rocm_profile(gpus, pin=pin, dev=dev)
    assert p.devices == [kfd(dev)] + [render(dev, m) for m in renders]
    assert p.group_add == [str(KFD_GID), str(RENDER_GID)]
    assert p.security_opt == ROCM_SECURITY
    assert p.ipc_mode == "host"
    assert p.environment == env
    assert p.cap_drop == ["ALL"] and p.cap_add == []
    expected_args = [a for m in renders for a in ("--device", render(dev, m))]
    assert profile_args(p) == [
        "--device", kfd(dev), *expected_args,
        "--group-add", str(KFD_GID), "--group-add", str(RENDER_GID),
        "--security-opt", "no-new-privileges",
        "--cap-drop", "ALL",
        "--ipc", "host",
        *[a for k, v in sorted(env.items()) for a in ("-e", f"{k}={v}")],
    ]  # fmt: skip
    assert p == profile_for("rocm", gpus, pin=pin, dev=dev)


def test_rocm_auto_pin_says_so(tmp_path: Path) -> None:
    gpus, dev = host(tmp_path, "two-gpus")
    p = rocm_profile(gpus, dev=dev)
    assert p.gpus == [0] and p.gpu_count == 1
    assert len(p.notes) == 1 and "passing 1 GPU: 0 gfx1201" in p.notes[0] and "gfx1036" in p.notes[0]
    assert p.hidden == [
        f"{gpus[1].label()} (iGPU: rocBLAS can abort on it (no Tensile library for its arch))"
    ]
    pinned = rocm_profile(gpus, pin=0, dev=dev)  # a pin hides the others too, and says so
    assert pinned.hidden == [f"{gpus[1].label()} (not selected (--gpu 0))"]
    assert "pinned 1 GPU: 0 gfx1201" in pinned.notes[0] and "1 gfx1036" in pinned.notes[0]


# ---------------------------------------------------------------------------------------------
# Multi-GPU policy: every discrete GPU of the image's arch; iGPUs and other archs hidden and named


@pytest.mark.parametrize("backend", ["rocm", "vulkan"])
def test_two_r9700_and_igpu_pass_both_cards_and_name_the_igpu(tmp_path: Path, backend: str) -> None:
    """The 2x R9700 + gfx1036 iGPU host of shared/cases/README.md."""
    gpus, dev = host(tmp_path, "two-dgpus-igpu")
    assert [(g.render_name, g.gfx_target, g.is_igpu) for g in gpus] == [
        ("renderD128", "gfx1201", False),
        ("renderD129", "gfx1201", False),
        ("renderD130", "gfx1036", True),
    ]
    p = profile_for(backend, gpus, dev=dev, targets=["gfx1201"])
    assert [d.split(":")[1] for d in p.devices if "renderD" in d] == [
        "/dev/dri/renderD128",
        "/dev/dri/renderD129",
    ]
    assert p.gpus == [0, 1] and p.gpu_count == 2
    assert len(p.hidden) == 1 and p.hidden[0].startswith("2 gfx1036 (renderD130, 512 MiB, iGPU) (iGPU:")
    assert len(p.notes) == 1
    note = p.notes[0]
    assert note.startswith(
        "passing 2 GPUs: 0 gfx1201 AMD Radeon AI PRO R9700 (renderD128, 32 GiB); 1 gfx1201"
    )
    assert "hidden: 2 gfx1036" in note and "--gpu N" in note
    visible = {"rocm": "ROCR_VISIBLE_DEVICES", "vulkan": "GGML_VK_VISIBLE_DEVICES"}[backend]
    assert p.environment == {visible: "0,1"}  # the two passed cards, as numbered inside the container
    rec = p.record()
    assert rec["gpu_count"] == 2 and rec["hidden"] == p.hidden
    assert [(g["name"], g["device_id"], g["revision"], g["render_node"]) for g in rec["gpus"]] == [
        ("AMD Radeon AI PRO R9700", "0x7551", "0xc0", "/dev/dri/renderD128"),
        ("AMD Radeon AI PRO R9700", "0x7551", "0xc0", "/dev/dri/renderD129"),
    ]


@pytest.mark.parametrize("backend", ["rocm", "vulkan"])
def test_two_r9700_without_igpu_pass_both_and_hide_nothing(tmp_path: Path, backend: str) -> None:
    gpus, dev = host(tmp_path, "two-dgpus")
    p = profile_for(backend, gpus, dev=dev, targets=["gfx1201"])
    assert p.gpus == [0, 1] and p.gpu_count == 2 and p.hidden == [] and p.environment == {}
    assert p.notes[0].startswith("passing 2 GPUs:") and "hidden" not in p.notes[0]


def test_pin_on_multi_gpu_host_names_every_other_gpu(tmp_path: Path) -> None:
    gpus, dev = host(tmp_path, "two-dgpus-igpu")
    p = rocm_profile(gpus, pin=1, dev=dev)
    assert p.gpus == [1] and p.gpu_count == 1 and p.environment == {"ROCR_VISIBLE_DEVICES": "0"}
    assert [h.split(" (")[0] for h in p.hidden] == ["0 gfx1201 AMD Radeon AI PRO R9700", "2 gfx1036"]
    assert all(h.endswith("(not selected (--gpu 1))") for h in p.hidden)


def test_dgpu_of_another_arch_is_hidden_with_the_reason(tmp_path: Path) -> None:
    """An RX 7900 XTX (gfx1100) next to an R9700 in a gfx1201-only image: 'invalid device function'."""
    sysfs = tmp_path / "sys"
    add_cpu_node(sysfs)
    r9700(sysfs)
    add_gpu(
        sysfs,
        node=2,
        minor=129,
        pci="0000:04:00.0",
        gfx_version=110000,
        vram=24 * GIB,
        device_id="0x744c",
        revision="0xc8",
        card=1,
    )
    gpus, dev = detect_gpus(sysfs), make_dev(tmp_path, (128, 129))
    assert gpus[1].name == "AMD Radeon RX 7900 XTX"
    p = rocm_profile(gpus, dev=dev, targets=["gfx1201"])
    assert p.gpus == [0] and p.hidden == [
        f"{gpus[1].label()} (gfx1100 is not among the image's gfx targets (gfx1201))"
    ]
    assert rocm_profile(gpus, dev=dev).gpus == [0, 1]  # targets unknown: no arch filter
    with pytest.raises(DeviceMissing, match="no GPU of the image's gfx targets \\(gfx942\\)"):
        rocm_profile(gpus, dev=dev, targets=["gfx942"])


@pytest.mark.parametrize(
    "device_id, revision, name",
    [
        ("0x7551", "0xc0", "AMD Radeon AI PRO R9700"),
        ("0x7551", "0xc8", "AMD Radeon AI PRO R9600D"),  # same device id, another product
        ("0x7550", "0xc0", "AMD Radeon RX 9070 XT"),
        ("0x7550", "0xc2", "AMD Radeon RX 9070 GRE"),
        ("0x7550", "0xc3", "AMD Radeon RX 9070"),
        ("0x7550", "0xff", ""),  # a revision libdrm does not list: no guess
    ],
)
def test_product_name_needs_device_and_revision(
    tmp_path: Path, device_id: str, revision: str, name: str
) -> None:
    add_cpu_node(tmp_path)
    add_gpu(tmp_path, node=1, minor=128, pci="0000:03:00.0", device_id=device_id, revision=revision)
    (g,) = detect_gpus(tmp_path)
    assert (g.name, g.device_id, g.revision) == (name, device_id, revision)


def test_rocm_run_spec(tmp_path: Path) -> None:
    gpus, dev = host(tmp_path, "one-gpu")
    spec = rocm_profile(gpus, pin=0, dev=dev).run_spec("img", ["llama-bench"], environment={"X": "1"})
    assert (spec.devices, spec.group_add, spec.security_opt, spec.ipc_mode, spec.cap_drop, spec.cap_add) == (
        [kfd(dev), render(dev, 128)],
        [str(KFD_GID), str(RENDER_GID)],
        ROCM_SECURITY,
        "host",
        ["ALL"],
        [],
    )
    assert spec.environment == {"ROCR_VISIBLE_DEVICES": "0", "X": "1"} and spec.network == "none"


def test_group_add_is_numeric_and_deduplicated(tmp_path: Path) -> None:
    gpus, dev = host(tmp_path, "two-dgpus")
    os.chown(dev / "kfd", 0, RENDER_GID)
    assert rocm_profile(gpus, dev=dev).group_add == [str(RENDER_GID)]


@pytest.mark.parametrize(
    "kind, pin, renders, env",
    [
        pytest.param("one-gpu", None, [128], {}, id="vulkan-one-gpu"),
        pytest.param("two-dgpus", None, [128, 129], {}, id="vulkan-two-dgpus"),
        pytest.param("two-dgpus", 1, [129], {"GGML_VK_VISIBLE_DEVICES": "0"}, id="vulkan-two-dgpus-pinned"),
        pytest.param(
            "two-gpus", None, [128], {"GGML_VK_VISIBLE_DEVICES": "0"}, id="vulkan-two-gpus-auto-pins-dgpu"
        ),
    ],
)
def test_vulkan_profile(tmp_path: Path, kind: str, pin: int | None, renders: list[int], env: dict) -> None:
    gpus, dev = host(tmp_path, kind)
    p = vulkan_profile(gpus, pin=pin, dev=dev)
    assert p.devices == [render(dev, m) for m in renders]  # render nodes only: no /dev/kfd
    assert p.group_add == [str(RENDER_GID)]
    assert p.security_opt == ["no-new-privileges"]
    assert p.ipc_mode is None
    assert p.environment == env
    assert profile_args(p) == [
        *[a for m in renders for a in ("--device", render(dev, m))],
        "--group-add", str(RENDER_GID), "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
        *[a for k, v in sorted(env.items()) for a in ("-e", f"{k}={v}")],
    ]  # fmt: skip
    assert p == profile_for("vulkan", gpus, pin=pin, dev=dev)


def test_cpu_profile_has_no_devices() -> None:
    p = cpu_profile()
    assert profile_args(p) == ["--security-opt", "no-new-privileges", "--cap-drop", "ALL"]
    assert p == profile_for("cpu", [])


def all_profiles(tmp_path: Path) -> list[DeviceProfile]:
    gpus, dev = host(tmp_path, "two-gpus")
    return [
        cpu_profile(),
        rocm_profile(gpus, dev=dev),
        rocm_profile(gpus, pin=1, dev=dev),
        vulkan_profile(gpus, dev=dev),
        vulkan_profile([], dev=dev, allow_software=True),
    ]


def test_never_privileged(tmp_path: Path) -> None:
    for p in all_profiles(tmp_path):
        args = profile_args(p)
        assert "--privileged" not in args and not any("privileged=true" in a for a in args)
        assert "no-new-privileges" in p.security_opt and p.cap_drop == ["ALL"]


@pytest.mark.parametrize("backend", ["rocm", "vulkan", "cpu"])
def test_example_profile_for_dry_run(backend: str) -> None:
    p = DeviceProfile.example(backend)
    assert p.backend == backend and p.cap_drop == ["ALL"] and "no-new-privileges" in p.security_opt
    assert ("/dev/kfd:/dev/kfd:rwm" in p.devices) is (backend == "rocm")
    with pytest.raises(BadInput):
        DeviceProfile.example("cuda")


# ---------------------------------------------------------------------------------------------
# No GPU (this machine): what is missing and the fix


def test_no_gpu_rocm_is_missing_kfd(tmp_path: Path) -> None:
    dev = make_dev(tmp_path, renders=(), kfd=False)
    reason = missing_devices_reason("rocm", [], dev=dev)
    assert reason == (
        "cannot run on this host: no /dev/kfd (no AMD GPU driver (amdgpu/KFD) on this host); run `toolkit doctor`"
    )
    with pytest.raises(DeviceMissing) as err:
        profile_for("rocm", [], dev=dev)
    assert str(err.value) == reason and err.value.exit_code == 3


def test_no_gpu_vulkan_needs_opt_in_for_lavapipe(tmp_path: Path) -> None:
    dev = make_dev(tmp_path, renders=(), kfd=False)
    reason = missing_devices_reason("vulkan", [], dev=dev)
    assert reason is not None and "--allow-software-gpu" in reason and "render node" in reason
    with pytest.raises(DeviceMissing):
        vulkan_profile([], dev=dev)
    p = profile_for("vulkan", [], dev=dev, allow_software=True)
    assert p.devices == [] and p.group_add == []
    assert p.environment == {"GGML_VK_VISIBLE_DEVICES": "0"}
    assert missing_devices_reason("vulkan", [], dev=dev, allow_software=True) is None


def test_kfd_without_gpu_node(tmp_path: Path) -> None:
    dev = make_dev(tmp_path, renders=(), kfd=True)
    reason = missing_devices_reason("rocm", [], dev=dev)
    assert reason is not None and "KFD topology" in reason


def test_runnable_host_has_no_reason(tmp_path: Path) -> None:
    gpus, dev = host(tmp_path, "one-gpu")
    for backend in ("rocm", "vulkan", "cpu"):
        assert missing_devices_reason(backend, gpus, dev=dev) is None


def test_unknown_backend_and_gpu_are_bad_input(tmp_path: Path) -> None:
    gpus, dev = host(tmp_path, "one-gpu")
    with pytest.raises(BadInput, match="unknown backend 'cuda'"):
        profile_for("cuda", gpus, dev=dev)
    with pytest.raises(BadInput, match="--gpu 5: no such GPU"):
        profile_for("rocm", gpus, pin=5, dev=dev)


@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="host has /dev/kfd")
def test_this_machine_cannot_run_rocm() -> None:
    with pytest.raises(DeviceMissing, match="/dev/kfd"):
        profile_for("rocm", detect_gpus())


def test_profile_record_gives_the_gpu_count_of_results(tmp_path: Path) -> None:
    """What bench stores with every result (host.device_profile) is what the roofline reads back."""
    import json

    from toolkit.analysis.roofline import assess, gpu_use
    from toolkit.results.records import BenchRecord, ImageRef, ModelRef
    from toolkit.runtimes.llama_bench.check import normalize

    gpus, dev = host(tmp_path, "two-dgpus-igpu")
    p = profile_for("rocm", gpus, dev=dev, targets=["gfx1201"])
    # a real llama-bench row (shared/cases, H200) re-labelled as the ROCm build names two R9700s
    raw = json.loads(
        (Path(__file__).parent / "data/vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl")
        .read_text()
        .splitlines()[3]
    )
    raw |= {"gpu_info": "AMD Radeon AI PRO R9700, AMD Radeon AI PRO R9700", "backends": "ROCm"}
    rec = BenchRecord(
        run_id="r",
        created="2026-11-30T00:00:00+00:00",
        image=ImageRef(name="rocm", ref="toolkit/rocm", digest="sha256:" + "1" * 64, backend="rocm"),
        model=ModelRef(name="m", path="", sha256="", size_bytes=raw["model_size"]),
        **normalize(raw),
        raw=raw,
        host={"gpus": [g.to_dict() for g in gpus], "device_profile": p.record()},
    )
    use = gpu_use(rec)
    assert use.count == 2 and [s.product for s in use.specs] == ["AMD Radeon AI PRO R9700"] * 2
    assert "split layer" in assess(rec).note


def test_doctor_applies_the_same_policy_and_names_the_yardstick(tmp_path: Path) -> None:
    """`toolkit doctor` on the 2x R9700 + iGPU host: both cards for a gfx1201 image, the iGPU named
    as hidden, each card's product by PCI id + revision with its roofline figures."""
    from toolkit.host.doctor import GFX_TARGETS_LABEL, diagnose
    from toolkit.matrix.api import ImageSpec

    sysfs = tmp_path / "sys"
    build_host(sysfs, "two-dgpus-igpu")
    add_gpu(sysfs, node=4, minor=131, pci="0000:05:00.0", device_id="0x7550", revision="0xc2", vram=12 * GIB)
    dev = make_dev(tmp_path, (128, 129, 130, 131))
    image = ImageSpec(name="rocm", template="llama-rocm.Dockerfile.j2", backend="rocm")
    rep = diagnose(
        [image],
        {"rocm": {GFX_TARGETS_LABEL: "gfx1201"}},
        sysfs=sysfs,
        dev=dev,
        proc=tmp_path / "proc",
        etc=tmp_path / "etc",
        env={},
        docker_info={"ServerVersion": "26.1"},
    )
    (v,) = rep.images
    assert v.runnable and v.reason == (
        "/dev/kfd + 3 GPUs: renderD128 (gfx1201 AMD Radeon AI PRO R9700), renderD129 (gfx1201 AMD Radeon AI PRO "
        "R9700), renderD131 (gfx1201 AMD Radeon RX 9070 GRE)"
    )
    assert "hidden: 2 gfx1036" in v.notes[0]
    lines = [c.message for c in rep.checks if c.topic == "gpu"]
    assert (
        "PCI 1002:7551 rev c0; roofline yardstick: AMD Radeon AI PRO R9700, 640 GB/s, 191 TFLOPS" in lines[0]
    )
    assert "PCI 1002:7550 rev c2; roofline yardstick: AMD Radeon RX 9070 GRE, 432 GB/s" in lines[3]
    pinned = diagnose(
        [image],
        {"rocm": {GFX_TARGETS_LABEL: "gfx1201"}},
        sysfs=sysfs,
        dev=dev,
        pin=3,
        proc=tmp_path / "proc",
        etc=tmp_path / "etc",
        env={},
        docker_info={"ServerVersion": "26.1"},
    )
    assert pinned.images[0].reason == "/dev/kfd + renderD131 (gfx1201 AMD Radeon RX 9070 GRE)"
