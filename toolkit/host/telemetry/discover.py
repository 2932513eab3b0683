"""Which GPUs a run samples (render nodes and NVML devices), a source for each, and whether a GPU's
power state is stock."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from toolkit.host.telemetry.amd import AmdGpuSource, render_node
from toolkit.host.telemetry.nvidia import NvmlGpuSource, import_pynvml, nvml_bus
from toolkit.host.telemetry.readers import read_text
from toolkit.results.telemetry_check import cap_below_default


@dataclass(frozen=True)
class GpuRef:
    """A GPU found on this host. `vendor` "amd" | "nvidia"; `id` the source id its samples carry;
    `index` NVML index (NVIDIA) or card number (AMD); `device_dir` the PCI device dir (AMD);
    `render_node` e.g. "renderD128" (AMD); `pci_bus` e.g. "0000:03:00.0"; `name` when known."""

    vendor: str
    id: str
    index: int
    pci_bus: str | None = None
    device_dir: str | None = None
    render_node: str | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def discover_gpus(drm_root: str | Path = "/sys/class/drm", *, nvml: Any = None) -> list[GpuRef]:
    """AMD cards under `drm_root`/card*/device with vendor 0x1002 (connectors such as card0-DP-1
    skipped), then NVIDIA GPUs via NVML when nvidia-ml-py imports and nvmlInit succeeds (`nvml`: a
    pynvml-like module to use, None for the real one, False for none). Never
    raises: a host without GPUs, without NVML or without a driver gives fewer entries."""
    out = _amd_gpus(Path(drm_root))
    if nvml is False:  # the caller asked for AMD cards only (tests of a fake sysfs on any host)
        return out
    return out + _nvml_gpus(nvml)


def _amd_gpus(root: Path) -> list[GpuRef]:
    """The AMD cards (vendor 0x1002) under `root` (/sys/class/drm), by card number."""
    out: list[GpuRef] = []
    try:
        cards = sorted((c for c in os.listdir(root) if re.fullmatch(r"card\d+", c)), key=lambda c: int(c[4:]))
    except OSError:
        cards = []
    for card in cards:
        dev = root / card / "device"
        if (read_text(dev / "vendor") or "").lower() != "0x1002":
            continue
        pci_bus = Path(os.path.realpath(dev)).name
        out.append(
            GpuRef(
                vendor="amd",
                id=f"amd:{pci_bus}",
                index=int(card[4:]),
                pci_bus=pci_bus,
                device_dir=str(dev),
                render_node=render_node(dev),
                name=read_text(dev / "product_name") or None,
            )
        )
    return out


def _nvml_gpus(nvml: Any) -> list[GpuRef]:
    """The NVIDIA GPUs NVML lists (`nvml`: a pynvml-like module, None for the real one); [] without
    NVML or a driver, and those listed before an NVML error."""
    out: list[GpuRef] = []
    try:
        n = nvml if nvml is not None else import_pynvml()
        n.nvmlInit()
    except Exception:
        return out
    try:
        for i in range(n.nvmlDeviceGetCount()):
            try:
                h = n.nvmlDeviceGetHandleByIndex(i)
                bus = nvml_bus(n.nvmlDeviceGetPciInfo(h).busId)
                name = n.nvmlDeviceGetName(h)
                name = name.decode() if isinstance(name, bytes) else str(name)
            except Exception:
                bus, name = None, None
            out.append(
                GpuRef(
                    vendor="nvidia",
                    id=f"nvidia:{bus}" if bus else f"nvidia:{i}",
                    index=i,
                    pci_bus=bus,
                    name=name,
                )
            )
    except Exception:
        pass
    finally:
        with contextlib.suppress(Exception):
            n.nvmlShutdown()
    return out


def open_source(ref: GpuRef, **kwargs: Any) -> AmdGpuSource | NvmlGpuSource:
    """The sampling source for a discovered GPU (kwargs go to its constructor)."""
    if ref.vendor == "amd":
        assert ref.device_dir is not None
        return AmdGpuSource(ref.device_dir, source_id=ref.id, **kwargs)
    return NvmlGpuSource(ref.index, source_id=ref.id, **kwargs)


# The profile amdgpu selects at init when nobody chose one (PP_SMC_POWER_PROFILE_BOOTUP_DEFAULT,
# index 0 in pp_power_profile_mode, §1.2).
STOCK_POWER_PROFILES = ("BOOTUP_DEFAULT",)


def power_state(source: AmdGpuSource | NvmlGpuSource) -> dict[str, Any]:
    """The GPU's power settings now, for `toolkit doctor` and an up-front warning: the source's
    `state()` (AMD: cap_w, cap_default_w, cap_max_w, perf_level, power_profile, od_vddgfx_offset_mv,
    ppfeaturemask, od_enabled, runtime_status; NVIDIA: cap_w, cap_default_w) plus its `source` id.
    Read it before the run: on kernels older than the late-2024 workload fix a ROCm run shows KFD's
    COMPUTE profile as selected (§1.2)."""
    return {"source": source.id, **source.state()}


def not_stock_reasons(state: dict[str, Any]) -> list[str]:
    """Why a power state is not the card's stock one (empty list: stock, as far as it shows).
    Works on `power_state()` and on samples that carry the state fields. Tests (§1.2, §7):
    cap below the default (power1_cap_default is cached at driver init, so it is the stock value;
    NVML: enforced < default limit), perf level other than `auto`, a selected profile other than
    BOOTUP_DEFAULT, OD_VDDGFX_OFFSET ≠ 0 mV, the overdrive bit 0x4000 set in ppfeaturemask."""
    out: list[str] = []
    cap, default = state.get("cap_w"), state.get("cap_default_w")
    if cap_below_default(cap, default):  # the one cap rule, which readers of a stored window apply too
        out.append(f"power cap {cap:.0f} W below the default {default:.0f} W")
    level = state.get("perf_level")
    if level and level != "auto":
        out.append(f"performance level '{level}' (stock: auto)")
    profile = state.get("power_profile")
    if profile and profile not in STOCK_POWER_PROFILES:
        out.append(f"power profile {profile} selected (stock: {STOCK_POWER_PROFILES[0]})")
    offset = state.get("od_vddgfx_offset_mv")
    if offset:
        out.append(f"OD_VDDGFX_OFFSET {offset} mV")
    if state.get("od_enabled"):
        out.append(f"overdrive enabled (ppfeaturemask {state.get('ppfeaturemask')} has bit 0x4000)")
    return out
