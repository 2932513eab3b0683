"""Fake hosts for device and doctor tests: a /sys + /dev tree with R9700s, iGPUs, KFD nodes and render
nodes (`build_host`, `host`), and doctor's inputs (`IMAGES`, `fake_host`). Fakes of what cannot exist
here: no AMD GPU on this machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit.host.devices import (
    Gpu,
    detect_gpus,
)
from toolkit.matrix.api import ImageSpec

GIB = 1024**3
KFD_GID, RENDER_GID = 993, 992


IMAGES = [
    ImageSpec(name="rocm", template="llama-rocm.Dockerfile.j2", backend="rocm"),
    ImageSpec(name="vulkan", template="llama-vulkan.Dockerfile.j2", backend="vulkan"),
    ImageSpec(name="cpu", template="llama-cpu.Dockerfile.j2", backend="cpu"),
    ImageSpec(name="vllm", template="vllm-rocm.Dockerfile.j2", backend="rocm", runner="vllm"),
]


def gpu(sysfs: Path, *, node: int, minor: int, pci: str, gfx_version: int, vram: int, device_id: str) -> None:
    pcidir = sysfs / "devices/pci0000:00" / pci
    pcidir.mkdir(parents=True)
    (pcidir / "vendor").write_text("0x1002\n")
    (pcidir / "device").write_text(device_id + "\n")
    (pcidir / "mem_info_vram_total").write_text(f"{vram}\n")
    (sysfs / "class/drm" / f"renderD{minor}").mkdir(parents=True)
    (sysfs / "class/drm" / f"renderD{minor}" / "device").symlink_to(pcidir)
    d = sysfs / "class/kfd/kfd/topology/nodes" / str(node)
    d.mkdir(parents=True)
    (d / "properties").write_text(
        f"cpu_cores_count 0\nsimd_count 128\ngfx_target_version {gfx_version}\ndrm_render_minor {minor}\n"
    )


def fake_host(tmp_path: Path, *, with_igpu: bool = False, cmdline: str = "quiet") -> dict:
    """An R9700 host (optionally with an iGPU), stand-in device nodes and /proc, /etc."""
    sysfs, dev, proc, etc = (tmp_path / d for d in ("sys", "dev", "proc", "etc"))
    gpu(sysfs, node=1, minor=128, pci="0000:03:00.0", gfx_version=120001, vram=32 * GIB, device_id="0x7551")
    if with_igpu:
        gpu(
            sysfs,
            node=2,
            minor=129,
            pci="0000:7c:00.0",
            gfx_version=100306,
            vram=512 * 1024**2,
            device_id="0x164e",
        )
    (dev / "dri").mkdir(parents=True)
    for name in ["kfd", "dri/renderD128"] + (["dri/renderD129"] if with_igpu else []):
        (dev / name).touch()
        os.chown(dev / name, 0, 993)
    (proc / "sys/kernel").mkdir(parents=True)
    (proc / "cmdline").write_text(cmdline + "\n")
    (proc / "sys/kernel/osrelease").write_text("6.17.0-8-generic\n")
    (proc / "sys/kernel/hostname").write_text("r9700-box\n")
    (proc / "cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: AMD Ryzen 9 7950X 16-Core Processor\nphysical id\t: 0\ncore id\t: 0\n\n"
        "processor\t: 1\nmodel name\t: AMD Ryzen 9 7950X 16-Core Processor\nphysical id\t: 0\ncore id\t: 0\n"
    )
    (proc / "meminfo").write_text("MemTotal:       65536000 kB\nMemFree:        1000 kB\n")
    etc.mkdir()
    (etc / "os-release").write_text('NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 25.10"\n')
    return {"sysfs": sysfs, "dev": dev, "proc": proc, "etc": etc}


def add_cpu_node(sysfs: Path, node: int = 0) -> None:
    d = sysfs / "class/kfd/kfd/topology/nodes" / str(node)
    d.mkdir(parents=True)
    (d / "properties").write_text("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\n")


def add_gpu(
    sysfs: Path,
    *,
    node: int | None,
    minor: int,
    pci: str,
    gfx_version: int = 120001,
    vram: int = 32 * GIB,
    device_id: str = "0x7551",
    vendor: str = "0x1002",
    card: int | None = None,
    drm_vram: bool = True,
    revision: str = "0xc0",
) -> None:
    """One GPU: a KFD node (unless node is None) and a DRM render node (+ card) behind a PCI device.
    The files are those amdgpu/PCI expose under /sys/bus/pci/devices/<bdf>/ (vendor, device,
    revision, mem_info_vram_total); a stand-in for hardware this machine does not have."""
    pcidir = sysfs / "devices/pci0000:00" / pci
    pcidir.mkdir(parents=True)
    (pcidir / "vendor").write_text(vendor + "\n")
    (pcidir / "device").write_text(device_id + "\n")
    (pcidir / "revision").write_text(revision + "\n")
    if drm_vram:
        (pcidir / "mem_info_vram_total").write_text(f"{vram}\n")
    drm = sysfs / "class/drm"
    render = drm / f"renderD{minor}"
    render.mkdir(parents=True)
    (render / "device").symlink_to(pcidir)
    if card is not None:
        (drm / f"card{card}").mkdir()
        (drm / f"card{card}" / "device").symlink_to(pcidir)
        (drm / f"card{card}-DP-1").mkdir()  # a connector: not a card node
    if node is None:
        return
    d = sysfs / "class/kfd/kfd/topology/nodes" / str(node)
    d.mkdir(parents=True)
    (d / "properties").write_text(
        "cpu_cores_count 0\nsimd_count 128\nmem_banks_count 1\n"
        f"gfx_target_version {gfx_version}\nvendor_id {int(vendor, 16)}\ndevice_id {int(device_id, 16)}\n"
        f"drm_render_minor {minor}\n"
    )
    bank = d / "mem_banks/0"
    bank.mkdir(parents=True)
    (bank / "properties").write_text(f"heap_type 1\nsize_in_bytes {vram}\nwidth 256\n")


def r9700(sysfs: Path, node: int = 1, minor: int = 128, pci: str = "0000:03:00.0", card: int = 0) -> None:
    add_gpu(sysfs, node=node, minor=minor, pci=pci, card=card)


def igpu(sysfs: Path, node: int = 2, minor: int = 129, pci: str = "0000:7c:00.0", card: int = 1) -> None:
    add_gpu(
        sysfs,
        node=node,
        minor=minor,
        pci=pci,
        gfx_version=100306,
        vram=512 * 1024**2,
        device_id="0x164e",
        card=card,
        revision="0xc1",
    )


def make_dev(root: Path, renders: tuple[int, ...] = (128,), kfd: bool = True) -> Path:
    """Stand-in device nodes (regular files) with the host's GIDs as a test chooses them."""
    dev = root / "dev"
    (dev / "dri").mkdir(parents=True)
    paths = [(dev / "dri" / f"renderD{m}", RENDER_GID) for m in renders]
    if kfd:
        paths.append((dev / "kfd", KFD_GID))
    for p, gid in paths:
        p.touch()
        try:
            os.chown(p, 0, gid)
        except PermissionError:
            pytest.skip("needs root to chown stand-in device nodes")
    return dev


def build_host(sysfs: Path, kind: str) -> None:
    """one-gpu: R9700; two-gpus: R9700 + iGPU; igpu-first: the iGPU is KFD node 1; two-dgpus: 2x R9700;
    two-dgpus-igpu: 2x R9700 (renderD128, renderD129) + a gfx1036 iGPU (renderD130)."""
    add_cpu_node(sysfs)
    if kind == "igpu-first":
        igpu(sysfs, node=1)
        r9700(sysfs, node=2)
        return
    r9700(sysfs)
    if kind == "two-gpus":
        igpu(sysfs)
    elif kind in ("two-dgpus", "two-dgpus-igpu"):
        r9700(sysfs, node=2, minor=129, pci="0000:04:00.0", card=1)
    if kind == "two-dgpus-igpu":
        igpu(sysfs, node=3, minor=130, card=2)


def host(tmp_path: Path, kind: str) -> tuple[list[Gpu], Path]:
    sysfs = tmp_path / "sys"
    build_host(sysfs, kind)
    renders = {"one-gpu": (128,), "two-dgpus-igpu": (128, 129, 130)}.get(kind, (128, 129))
    return detect_gpus(sysfs), make_dev(tmp_path, renders)


def kfd(dev: Path) -> str:
    return f"{dev}/kfd:/dev/kfd:rwm"


def render(dev: Path, minor: int) -> str:
    return f"{dev}/dri/renderD{minor}:/dev/dri/renderD{minor}:rwm"
