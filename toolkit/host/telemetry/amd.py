"""AMD GPU telemetry: amdgpu sysfs, hwmon, gpu_metrics v1.3 (shared/reference/gpu-telemetry.md §1), KFD
processes (§2)."""

from __future__ import annotations

import os
import re
import struct
import time
from pathlib import Path
from typing import Any

from toolkit.host.telemetry.readers import OpenFiles, read_int, read_text, scaled, update_period

# struct gpu_metrics_v1_3 (include/kgd_pp_interface.h), little-endian, no implicit padding: 46
# fields, 120 bytes (§1.3; offsets checked with offsetof on the header text).
GPU_METRICS_V1_3 = struct.Struct("<HBB6H3HHQQ7H7HIH2HH2I4HQ3HHQ")


_V13_FIELDS = (
    "structure_size format_revision content_revision "
    "temperature_edge temperature_hotspot temperature_mem temperature_vrgfx temperature_vrsoc "
    "temperature_vrmem average_gfx_activity average_umc_activity average_mm_activity "
    "average_socket_power energy_accumulator system_clock_counter "
    "average_gfxclk_frequency average_socclk_frequency average_uclk_frequency "
    "average_vclk0_frequency average_dclk0_frequency average_vclk1_frequency average_dclk1_frequency "
    "current_gfxclk current_socclk current_uclk current_vclk0 current_dclk0 current_vclk1 current_dclk1 "
    "throttle_status current_fan_speed pcie_link_width pcie_link_speed padding "
    "gfx_activity_acc mem_activity_acc temperature_hbm0 temperature_hbm1 temperature_hbm2 "
    "temperature_hbm3 firmware_timestamp voltage_soc voltage_gfx voltage_mem padding1 "
    "indep_throttle_status"
).split()


_V13_BITS = [
    {"H": 16, "B": 8, "I": 32, "Q": 64}[code]
    for count, code in re.findall(r"(\d*)([HBIQ])", GPU_METRICS_V1_3.format)
    for _ in range(int(count or 1))
]
assert len(_V13_FIELDS) == len(_V13_BITS) == 46


# energy_accumulator: 2^-16 J (15.259 µJ) per count (kernel comments for v1.4+, amdsmi docs); the
# firmware field is a u32 (SmuMetrics_t, SMU14 if), so it wraps at 2^32 counts = 65 536 J (§1.3).
AMD_ENERGY_J_PER_COUNT = 2.0**-16


AMD_ENERGY_WRAP_J = 2.0**32 * AMD_ENERGY_J_PER_COUNT


# ppfeaturemask bit PP_OVERDRIVE_MASK (amd_shared.h); default mask 0xfff7bfff has it off (§1.2).
AMD_PP_OVERDRIVE_MASK = 0x4000


_ALL_ONES = {16: 0xFFFF, 32: 0xFFFFFFFF, 64: 0xFFFFFFFFFFFFFFFF}


def parse_gpu_metrics(buf: bytes) -> dict[str, int | None]:
    """Parse a gpu_metrics blob by its header (§1.3): only v1.3 of 120 bytes is accepted (a 2026
    patch makes the file larger: never trust the file size). Fields the ASIC leaves unfilled are
    all-ones (smu_cmn_init_soft_gpu_metrics) and come back as None. Raises ValueError for another
    version or a short buffer (the caller records it; it does not guess)."""
    if len(buf) < 4:
        raise ValueError(f"gpu_metrics: {len(buf)} bytes")
    size, frev, crev = struct.unpack_from("<HBB", buf)
    if (frev, crev) != (1, 3) or size != GPU_METRICS_V1_3.size or len(buf) < size:
        raise ValueError(f"gpu_metrics v{frev}.{crev} size {size} (read {len(buf)} bytes)")
    out: dict[str, int | None] = {}
    for name, value, bits in zip(_V13_FIELDS, GPU_METRICS_V1_3.unpack_from(buf), _V13_BITS, strict=True):
        out[name] = None if bits in _ALL_ONES and value == _ALL_ONES[bits] else value
    return out


# pp_power_profile_mode lines "%2d %14s%s:" (index, name, "*" when selected), §1.2
_PROFILE_RE = re.compile(r"^\s*(\d+)\s+(\S+?)(\*?)\s*:", re.M)


_OD_VDDGFX_RE = re.compile(r"OD_VDDGFX_OFFSET:\s*\n\s*(-?\d+)\s*mV", re.I)


def parse_power_profile(text: str) -> str | None:
    """The selected (`*`) profile name from pp_power_profile_mode (§1.2), or None. Since late 2024
    the `*` shows the user's choice only; KFD's own COMPUTE switch does not show."""
    for m in _PROFILE_RE.finditer(text):
        if m.group(3):
            return m.group(2)
    return None


def parse_od_vddgfx_offset_mv(text: str) -> int | None:
    """`OD_VDDGFX_OFFSET` (mV, negative = undervolt) from pp_od_clk_voltage (§1.2), or None."""
    m = _OD_VDDGFX_RE.search(text)
    return int(m.group(1)) if m else None


class AmdGpuSource:
    """One amdgpu card, read from sysfs without root (§1). `card_device_dir` is the PCI device dir
    (/sys/class/drm/cardN/device); `kfd_root` the KFD sysfs (/sys/class/kfd/kfd); `module_params`
    the amdgpu module parameters (for ppfeaturemask).

    Each sample: `runtime_status` (power/runtime_status; when "suspended" the PM files are not
    read: the card is in runtime suspend and reads would fail, §1.1), `power_w` (hwmon
    power1_average, µW; the only power sensor on SMU 14.0.2, averaged by firmware, 1 W steps),
    `sclk_mhz` / `mclk_mhz` (hwmon freq1_input / freq2_input, Hz; sclk is an average), `temp_edge_c`,
    `temp_junction_c`, `temp_mem_c` (hwmon temp*_input by temp*_label, m°C), `busy_pct`,
    `mem_busy_pct` (gpu_busy_percent, mem_busy_percent), `vram_used_bytes`, from gpu_metrics:
    `throttle_bits` (throttle_status, SMU14 bit numbers §1.4), `indep_throttle_bits`,
    `energy_j` (energy_accumulator × 2^-16 J, modulo `energy_wrap_j`; None when not provided),
    `fan_rpm`, `gpu_metrics_error` (why the blob was not parsed, else None); and `procs`: host pids
    of KFD processes on this GPU with VRAM > 0 or a non-empty queue list, as
    [{"pid", "vram_bytes", "queues"}] (§2: a bare /dev/kfd open makes an empty entry, ROCm#4411).

    Every `state_every_s` seconds (and on the first read) the sample also carries the power state:
    `cap_w`, `cap_default_w`, `cap_max_w` (hwmon power1_cap*, µW), `perf_level`
    (power_dpm_force_performance_level), `power_profile` (selected pp_power_profile_mode entry; reading
    it makes the driver fetch one firmware table per profile, so not at the sampling rate),
    `od_vddgfx_offset_mv` (None when pp_od_clk_voltage is absent, i.e. overdrive off),
    `ppfeaturemask`, `od_enabled` (ppfeaturemask & 0x4000)."""

    vendor = "amd"

    def __init__(
        self,
        card_device_dir: str | Path,
        *,
        kfd_root: str | Path = "/sys/class/kfd/kfd",
        module_params: str | Path = "/sys/module/amdgpu/parameters",
        state_every_s: float = 5.0,
        source_id: str | None = None,
    ) -> None:
        self.dev = Path(card_device_dir)
        self.kfd_root = Path(kfd_root)
        self.module_params = Path(module_params)
        self.state_every_s = state_every_s
        self.pci_bus = Path(os.path.realpath(self.dev)).name
        self.id = source_id or f"amd:{self.pci_bus}"
        self.render_node = render_node(self.dev)
        self.hwmon = _hwmon_dir(self.dev)
        self.temp_files = _temp_files(self.hwmon) if self.hwmon else {}
        self.gpu_id = _kfd_gpu_id(self.kfd_root, self.render_node)
        self._last_state = -1e18
        self._files = OpenFiles()
        self.steps: dict[str, float | None] = {}

    def measure_steps(self, duration_s: float) -> dict[str, float | None]:
        """Measure the update periods (s) of the energy counter (gpu_metrics energy_accumulator) and
        of power1_average (readers.update_period, `duration_s` each); carried in the power state of
        later samples as `energy_step_s` / `power_step_s`."""
        self.steps = {
            "energy_step_s": update_period(lambda: self._metrics()["energy_j"], duration_s),
            "power_step_s": update_period(lambda: self._hw("power1_average"), duration_s),
        }
        return self.steps

    def _hw(self, name: str) -> int | None:
        return self._files.int(self.hwmon / name) if self.hwmon else None

    def state(self) -> dict[str, Any]:
        """The card's power state (what `power_state()` returns): caps in W, perf level, selected
        profile, OD voltage offset, ppfeaturemask and its overdrive bit, runtime status."""
        mask_text = read_text(self.module_params / "ppfeaturemask")
        try:
            mask = int(mask_text, 0) if mask_text else None
        except ValueError:
            mask = None
        profile_text = read_text(self.dev / "pp_power_profile_mode")
        od_text = read_text(self.dev / "pp_od_clk_voltage")
        return {
            "vendor": self.vendor,
            "runtime_status": read_text(self.dev / "power" / "runtime_status"),
            "cap_w": scaled(self._hw("power1_cap"), 1e6),
            "cap_default_w": scaled(self._hw("power1_cap_default"), 1e6),
            "cap_max_w": scaled(self._hw("power1_cap_max"), 1e6),
            "perf_level": read_text(self.dev / "power_dpm_force_performance_level"),
            "power_profile": parse_power_profile(profile_text) if profile_text else None,
            "od_vddgfx_offset_mv": parse_od_vddgfx_offset_mv(od_text) if od_text else None,
            "ppfeaturemask": f"0x{mask:08x}" if mask is not None else None,
            "od_enabled": None if mask is None else bool(mask & AMD_PP_OVERDRIVE_MASK),
            **self.steps,
        }

    def read(self) -> dict[str, Any]:
        """One sample (fields in the class docstring)."""
        f = self._files
        status = f.text(self.dev / "power" / "runtime_status")
        sample: dict[str, Any] = {"vendor": self.vendor, "runtime_status": status}
        if status == "suspended":
            # §1.1: PM reads fail (EPERM/EBUSY) instead of waking the card; record, do not raise.
            sample["procs"] = self._procs()
            sample["n_procs"] = len(sample["procs"])
            return sample
        sample.update(
            power_w=scaled(self._hw("power1_average"), 1e6),
            sclk_mhz=scaled(self._hw("freq1_input"), 1e6),
            mclk_mhz=scaled(self._hw("freq2_input"), 1e6),
            busy_pct=f.int(self.dev / "gpu_busy_percent"),
            mem_busy_pct=f.int(self.dev / "mem_busy_percent"),
            vram_used_bytes=f.int(self.dev / "mem_info_vram_used"),
        )
        for label, path in self.temp_files.items():
            sample[f"temp_{label}_c"] = scaled(f.int(path), 1000.0)
        sample.update(self._metrics())
        sample["procs"] = self._procs()
        sample["n_procs"] = len(sample["procs"])
        now = time.monotonic()
        if now - self._last_state >= self.state_every_s:
            self._last_state = now
            state = self.state()
            state.pop("runtime_status", None)
            sample.update(state)
        return sample

    def _metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "throttle_bits": None,
            "indep_throttle_bits": None,
            "energy_j": None,
            "energy_wrap_j": AMD_ENERGY_WRAP_J,
            "fan_rpm": None,
            "gpu_metrics_error": None,
        }
        # one read from offset 0; parse by the header, not the file size (§1.3)
        buf = self._files.read(self.dev / "gpu_metrics")
        if buf is None:
            out["gpu_metrics_error"] = "gpu_metrics unreadable"
            return out
        try:
            m = parse_gpu_metrics(buf)
        except ValueError as e:
            out["gpu_metrics_error"] = str(e)
            return out
        acc = m["energy_accumulator"]
        out.update(
            throttle_bits=m["throttle_status"],
            indep_throttle_bits=m["indep_throttle_status"],
            energy_j=None if acc is None else (acc % 2**32) * AMD_ENERGY_J_PER_COUNT,
            fan_rpm=m["current_fan_speed"],
        )
        return out

    def _procs(self) -> list[dict[str, Any]]:
        return kfd_processes(self.kfd_root, self.gpu_id) if self.gpu_id is not None else []

    def close(self) -> None:
        """Close the files kept open between reads."""
        self._files.close()


def render_node(dev: Path) -> str | None:
    try:
        names = sorted(n for n in os.listdir(dev / "drm") if n.startswith("renderD"))
    except OSError:
        return None
    return names[0] if names else None


def _hwmon_dir(dev: Path) -> Path | None:
    try:
        entries = sorted(os.listdir(dev / "hwmon"))
    except OSError:
        return None
    for entry in entries:
        if read_text(dev / "hwmon" / entry / "name") == "amdgpu":
            return dev / "hwmon" / entry
    return dev / "hwmon" / entries[0] if entries else None


def _temp_files(hwmon: Path) -> dict[str, Path]:
    """temp*_input by label: edge, junction, mem (§1.2); unlabelled inputs keep their number."""
    out: dict[str, Path] = {}
    try:
        names = sorted(os.listdir(hwmon))
    except OSError:
        return out
    for name in names:
        m = re.fullmatch(r"temp(\d+)_input", name)
        if m:
            label = read_text(hwmon / f"temp{m.group(1)}_label") or f"temp{m.group(1)}"
            out[re.sub(r"\W+", "_", label.lower())] = hwmon / name
    return out


def _kfd_gpu_id(kfd_root: Path, render_node: str | None) -> int | None:
    """gpu_id of the KFD topology node whose drm_render_minor is this card's render node (§2)."""
    if not render_node:
        return None
    minor = int(render_node[len("renderD") :])
    nodes = kfd_root / "topology" / "nodes"
    try:
        entries = os.listdir(nodes)
    except OSError:
        return None
    for entry in entries:
        props = read_text(nodes / entry / "properties") or ""
        m = re.search(r"^drm_render_minor\s+(\d+)", props, re.M)
        if m and int(m.group(1)) == minor:
            return read_int(nodes / entry / "gpu_id")
    return None


def kfd_processes(kfd_root: str | Path, gpu_id: int) -> list[dict[str, Any]]:
    """KFD processes using GPU `gpu_id`: [{"pid": host pid, "vram_bytes", "queues": count}] for
    /sys/class/kfd/kfd/proc/<pid>/ entries with vram_<gpu_id> > 0 or a queue on that GPU (§2;
    files 0444). Entries of processes that only opened /dev/kfd are left out (ROCm#4411)."""
    root = Path(kfd_root) / "proc"
    out: list[dict[str, Any]] = []
    try:
        pids = sorted(int(p) for p in os.listdir(root) if p.isdigit())
    except OSError:
        return out
    for pid in pids:
        vram = read_int(root / str(pid) / f"vram_{gpu_id}") or 0
        queues = 0
        try:
            qids = os.listdir(root / str(pid) / "queues")
        except OSError:
            qids = []
        for qid in qids:
            if read_int(root / str(pid) / "queues" / qid / "gpuid") == gpu_id:
                queues += 1
        if vram > 0 or queues > 0:
            out.append({"pid": pid, "vram_bytes": vram, "queues": queues})
    return out
