"""Telemetry read from the host while a benchmark runs: GPU power, energy, clocks, temperatures,
throttling, other GPU tenants, host CPU load and the kernel log. No printing, no root needed.

Sources (each `read() -> dict`: one flat, JSON-able sample; units in the field names; a value the
hardware or the driver does not give is None, never an exception):

    HostSource(own_cpu_seconds=None)             /proc/loadavg, /proc/stat, /proc/pressure/cpu
    AmdGpuSource(card_device_dir, kfd_root=...)  amdgpu sysfs + hwmon + gpu_metrics v1.3 + KFD procs
    NvmlGpuSource(index)                         NVML through nvidia-ml-py (`pip install toolkit[nvidia]`)

    discover_gpus() -> [GpuRef]; open_source(ref) -> source
    Sampler(sources, rate_hz=10.0, trace_path=None)   background thread; .samples; JSONL trace
    power_state(source) -> dict; not_stock_reasons(state) -> [str]
    KernelLog(): opened at run start; .read() at the end -> {"source": "kmsg"|"journal"|"unreadable", ...}
    cgroup_cpu_seconds(dir), process_tree_cpu_seconds(pid): the benchmark's own CPU, for HostSource

Integration (for `toolkit bench`): before the run `power_state()` of each GPU and
`not_stock_reasons()` for an up-front warning; `KernelLog()`; then
`with Sampler([HostSource(own), *(open_source(g) for g in discover_gpus())], trace_path=...) as s:`
around the benchmark; afterwards `toolkit.analysis.telemetry.window_summary(s.samples, t0, t1, tokens)`
per test window, `flags(summary, ...)`, and `KernelLog.read()`.

Every sample carries `t` (wall time, time.time(), seconds: the midpoint of the read), `source` (the
source id) and `read_ms` (how long the read took). GPU samples also carry `vendor` ("amd" | "nvidia").
Facts and their sources: shared/reference/gpu-telemetry.md (§ numbers below refer to it).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from toolkit.core import jsonsafe

# ---------------------------------------------------------------------------------------------
# Small readers (never raise: None when a file is absent, unreadable or malformed)


def _read_text(path: Path | str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(65536).decode("utf-8", "replace").strip()
    except OSError:
        return None


def _read_int(path: Path | str) -> int | None:
    text = _read_text(path)
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def _scaled(value: int | None, divisor: float) -> float | None:
    return None if value is None else value / divisor


class _OpenFiles:
    """Files read at every tick, kept open and re-read with pread at offset 0: procfs and sysfs
    (seq_file / kernfs) regenerate a file's content on a read from offset 0. On this project's VM a
    cold open+read+close of a /proc file cost ~120 µs of CPU and a pread ~30-50 µs
    (benchmarks/telemetry_overhead.py). A path that does not exist is not retried; a read error
    closes the file so the next read reopens it."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self._missing: set[str] = set()

    def read(self, path: Path | str) -> bytes | None:
        key = str(path)
        fd = self._fds.get(key)
        if fd is None:
            if key in self._missing:
                return None
            try:
                fd = os.open(key, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                self._missing.add(key)
                return None
            except OSError:
                return None
            self._fds[key] = fd
        try:
            return os.pread(fd, 65536, 0)
        except OSError:  # EBUSY / EPERM from a suspended card, ENODEV after hot-unplug
            os.close(self._fds.pop(key))
            return None

    def text(self, path: Path | str) -> str | None:
        data = self.read(path)
        return None if data is None else data.decode("utf-8", "replace").strip()

    def int(self, path: Path | str) -> int | None:
        text = self.text(path)
        try:
            return None if text is None else int(text, 0)
        except ValueError:
            return None

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class Source(Protocol):
    """What the Sampler needs from a source: an `id` and `read()` of one sample (a flat dict). A source
    with `reads_counter_on_edges = True` also takes `read(edge=True)` (NvmlGpuSource)."""

    id: str

    def read(self) -> dict[str, Any]: ...


# ---------------------------------------------------------------------------------------------
# Host: CPU load and the benchmark's own CPU


def cgroup_cpu_seconds(cgroup_dir: str | Path) -> float | None:
    """CPU seconds used so far by every process of a cgroup v2 group (a container's cgroup, e.g.
    /sys/fs/cgroup/system.slice/docker-<id>.scope): `usage_usec` of its `cpu.stat` / 1e6
    (docs.kernel.org/admin-guide/cgroup-v2.html, "cpu.stat"). None when the file cannot be read."""
    text = _read_text(Path(cgroup_dir) / "cpu.stat")
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            try:
                return int(value) / 1e6
            except ValueError:
                return None
    return None


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu_ticks(stat_text: str) -> tuple[int, int] | None:
    """(utime+stime+cutime+cstime, ppid) from /proc/<pid>/stat (proc_pid_stat(5): fields 14-17,
    after the `(comm)` that may hold spaces)."""
    rest = stat_text.rpartition(")")[2].split()
    try:
        ppid = int(rest[1])
        return int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14]), ppid
    except (IndexError, ValueError):
        return None


def _children(pid: int, proc: Path) -> list[int] | None:
    """Child pids from /proc/<pid>/task/*/children (CONFIG_PROC_CHILDREN); None when unavailable."""
    out: list[int] = []
    try:
        tasks = os.listdir(proc / str(pid) / "task")
    except OSError:
        return [] if not (proc / str(pid)).exists() else None
    for tid in tasks:
        text = _read_text(proc / str(pid) / "task" / tid / "children")
        if text is None:
            return None
        out.extend(int(c) for c in text.split())
    return out


def process_tree_cpu_seconds(pid: int, proc: str | Path = "/proc") -> float | None:
    """CPU seconds used so far by process `pid` and all its descendants: utime+stime of each, plus
    cutime+cstime (children already reaped), from /proc/<pid>/stat in USER_HZ ticks
    (proc_pid_stat(5)). Descendants come from /proc/<pid>/task/*/children, or a scan of /proc when
    the kernel lacks that file. None when `pid` is gone."""
    proc = Path(proc)
    total = 0
    seen: set[int] = set()
    stack = [pid]
    scanned: dict[int, list[int]] | None = None
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        text = _read_text(proc / str(p) / "stat")
        parsed = _proc_cpu_ticks(text) if text else None
        if parsed is None:
            if p == pid:
                return None
            continue
        total += parsed[0]
        kids = _children(p, proc)
        if kids is None:
            if scanned is None:
                scanned = {}
                for entry in os.listdir(proc):
                    if entry.isdigit():
                        t = _read_text(proc / entry / "stat")
                        got = _proc_cpu_ticks(t) if t else None
                        if got:
                            scanned.setdefault(got[1], []).append(int(entry))
            kids = scanned.get(p, [])
        stack.extend(kids)
    return total / _CLK_TCK


class HostSource:
    """Host CPU load, one sample per read (all files world-readable, §6):

    - `loadavg_1m/5m/15m` (/proc/loadavg: runnable + uninterruptible tasks), `cpus_online`;
    - cumulative counters for window deltas: `cpu_busy_s` (user+nice+system+irq+softirq over all
      CPUs, /proc/stat, USER_HZ), `cpu_total_s` (the first eight fields), `steal_s`, `psi_some_us`
      (/proc/pressure/cpu `some total=`; None when PSI is absent or off: not an error), `own_cpu_s`
      (what `own_cpu_seconds()` returns: the benchmark's cumulative CPU seconds; None without one);
    - rates since the previous read (None on the first): `busy_cores`, `own_cpu_cores`,
      `other_cpu_cores` = (busy − own) / elapsed wall seconds, i.e. CPU used by processes other than
      the benchmark, in cores (None without `own_cpu_seconds`), `steal_pct` (of all CPU time),
      `psi_some_pct` (% of wall time with some task waiting for a CPU).

    `own_cpu_seconds`: e.g. `lambda: cgroup_cpu_seconds(container_cgroup)` or
    `lambda: process_tree_cpu_seconds(pid)`. Roots are parameters for tests."""

    def __init__(
        self,
        own_cpu_seconds: Callable[[], float | None] | None = None,
        *,
        proc: str | Path = "/proc",
        source_id: str = "host",
    ) -> None:
        self.id = source_id
        self._own = own_cpu_seconds
        self._proc = Path(proc)
        self._prev: dict[str, Any] | None = None
        self._files = _OpenFiles()
        self._cpus: int | None = None
        self._cpus_read = -1e18

    def _cpu_line(self) -> tuple[float, float, float] | None:
        text = self._files.text(self._proc / "stat")
        if not text:
            return None
        first = text.split("\n", 1)[0].split()
        if not first or first[0] != "cpu":
            return None
        try:
            v = [int(x) for x in first[1:11]] + [0] * 10
        except ValueError:
            return None
        user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
        busy = user + nice + system + irq + softirq  # guest time is already inside user (proc_stat(5))
        total = busy + idle + iowait + steal
        return busy / _CLK_TCK, total / _CLK_TCK, steal / _CLK_TCK

    def _psi_some_us(self) -> int | None:
        text = self._files.text(self._proc / "pressure" / "cpu")
        if not text:
            return None
        m = re.search(r"^some .*\btotal=(\d+)", text, re.M)
        return int(m.group(1)) if m else None

    def read(self) -> dict[str, Any]:
        """One host sample (fields in the class docstring)."""
        now = time.monotonic()
        if now - self._cpus_read > 5.0:  # sysconf reads /sys/devices/system/cpu/online: not every tick
            self._cpus, self._cpus_read = os.sysconf("SC_NPROCESSORS_ONLN"), now
        load = (self._files.text(self._proc / "loadavg") or "").split()
        cpu = self._cpu_line()
        own: float | None = None
        if self._own is not None:
            try:
                own = self._own()
            except Exception:  # a callable the integrator wrote must not stop sampling
                own = None
        sample: dict[str, Any] = {
            "loadavg_1m": float(load[0]) if len(load) > 2 else None,
            "loadavg_5m": float(load[1]) if len(load) > 2 else None,
            "loadavg_15m": float(load[2]) if len(load) > 2 else None,
            "cpus_online": self._cpus,
            "cpu_busy_s": cpu[0] if cpu else None,
            "cpu_total_s": cpu[1] if cpu else None,
            "steal_s": cpu[2] if cpu else None,
            "psi_some_us": self._psi_some_us(),
            "own_cpu_s": own,
            "busy_cores": None,
            "own_cpu_cores": None,
            "other_cpu_cores": None,
            "steal_pct": None,
            "psi_some_pct": None,
        }
        prev, self._prev = self._prev, {**sample, "_mono": now}
        if prev is not None:
            dt = now - prev["_mono"]
            if dt > 0:
                sample.update(_host_rates(prev, sample, dt))
        return sample

    def close(self) -> None:
        """Close the files kept open between reads."""
        self._files.close()


def _delta(a: dict[str, Any], b: dict[str, Any], key: str) -> float | None:
    if a.get(key) is None or b.get(key) is None:
        return None
    return float(b[key] - a[key])


def _host_rates(prev: dict[str, Any], cur: dict[str, Any], dt: float) -> dict[str, Any]:
    busy = _delta(prev, cur, "cpu_busy_s")
    total = _delta(prev, cur, "cpu_total_s")
    steal = _delta(prev, cur, "steal_s")
    own = _delta(prev, cur, "own_cpu_s")
    psi = _delta(prev, cur, "psi_some_us")
    return {
        "busy_cores": None if busy is None else busy / dt,
        "own_cpu_cores": None if own is None else own / dt,
        "other_cpu_cores": None if busy is None or own is None else (busy - own) / dt,
        "steal_pct": None if steal is None or not total else 100.0 * steal / total,
        "psi_some_pct": None if psi is None else 100.0 * psi / 1e6 / dt,
    }


# ---------------------------------------------------------------------------------------------
# AMD: sysfs, hwmon, gpu_metrics v1.3 (§1), KFD processes (§2)

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
        self.render_node = _render_node(self.dev)
        self.hwmon = _hwmon_dir(self.dev)
        self.temp_files = _temp_files(self.hwmon) if self.hwmon else {}
        self.gpu_id = _kfd_gpu_id(self.kfd_root, self.render_node)
        self._last_state = -1e18
        self._files = _OpenFiles()

    def _hw(self, name: str) -> int | None:
        return self._files.int(self.hwmon / name) if self.hwmon else None

    def state(self) -> dict[str, Any]:
        """The card's power state (what `power_state()` returns): caps in W, perf level, selected
        profile, OD voltage offset, ppfeaturemask and its overdrive bit, runtime status."""
        mask_text = _read_text(self.module_params / "ppfeaturemask")
        try:
            mask = int(mask_text, 0) if mask_text else None
        except ValueError:
            mask = None
        profile_text = _read_text(self.dev / "pp_power_profile_mode")
        od_text = _read_text(self.dev / "pp_od_clk_voltage")
        return {
            "vendor": self.vendor,
            "runtime_status": _read_text(self.dev / "power" / "runtime_status"),
            "cap_w": _scaled(self._hw("power1_cap"), 1e6),
            "cap_default_w": _scaled(self._hw("power1_cap_default"), 1e6),
            "cap_max_w": _scaled(self._hw("power1_cap_max"), 1e6),
            "perf_level": _read_text(self.dev / "power_dpm_force_performance_level"),
            "power_profile": parse_power_profile(profile_text) if profile_text else None,
            "od_vddgfx_offset_mv": parse_od_vddgfx_offset_mv(od_text) if od_text else None,
            "ppfeaturemask": f"0x{mask:08x}" if mask is not None else None,
            "od_enabled": None if mask is None else bool(mask & AMD_PP_OVERDRIVE_MASK),
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
            power_w=_scaled(self._hw("power1_average"), 1e6),
            sclk_mhz=_scaled(self._hw("freq1_input"), 1e6),
            mclk_mhz=_scaled(self._hw("freq2_input"), 1e6),
            busy_pct=f.int(self.dev / "gpu_busy_percent"),
            mem_busy_pct=f.int(self.dev / "mem_busy_percent"),
            vram_used_bytes=f.int(self.dev / "mem_info_vram_used"),
        )
        for label, path in self.temp_files.items():
            sample[f"temp_{label}_c"] = _scaled(f.int(path), 1000.0)
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


def _render_node(dev: Path) -> str | None:
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
        if _read_text(dev / "hwmon" / entry / "name") == "amdgpu":
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
            label = _read_text(hwmon / f"temp{m.group(1)}_label") or f"temp{m.group(1)}"
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
        props = _read_text(nodes / entry / "properties") or ""
        m = re.search(r"^drm_render_minor\s+(\d+)", props, re.M)
        if m and int(m.group(1)) == minor:
            return _read_int(nodes / entry / "gpu_id")
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
        vram = _read_int(root / str(pid) / f"vram_{gpu_id}") or 0
        queues = 0
        try:
            qids = os.listdir(root / str(pid) / "queues")
        except OSError:
            qids = []
        for qid in qids:
            if _read_int(root / str(pid) / "queues" / qid / "gpuid") == gpu_id:
                queues += 1
        if vram > 0 or queues > 0:
            out.append({"pid": pid, "vram_bytes": vram, "queues": queues})
    return out


# ---------------------------------------------------------------------------------------------
# NVIDIA: NVML through nvidia-ml-py (§5)


def _import_pynvml() -> Any:
    import pynvml  # nvidia-ml-py; optional extra `nvidia`

    return pynvml


class NvmlGpuSource:
    """One NVIDIA GPU through NVML (nvidia-ml-py, module `pynvml`, imported on first use; install
    with `pip install 'toolkit[nvidia]'`). `nvml` injects a module object (tests).

    Each sample: `power_w` (nvmlDeviceGetPowerUsage, mW; a 1 s average on Ampere and newer, §4.3),
    `energy_j` (nvmlDeviceGetTotalEnergyConsumption, mJ since driver load: the hardware counter),
    `sclk_mhz` / `mclk_mhz` (SM / memory clock), `temp_gpu_c`, `throttle_bits`
    (nvmlDeviceGetCurrentClocksEventReasons bitmask: 0x4 sw power cap, 0x8 hw slowdown, 0x20 sw
    thermal, 0x40 hw thermal, 0x80 hw power brake, ...), `busy_pct` / `mem_busy_pct`
    (utilization gpu / memory), `pstate`, `procs` ([{"pid", "vram_bytes"}] of
    nvmlDeviceGetComputeRunningProcesses: host pids), `n_procs`, `cap_w` (enforced power limit),
    `cap_default_w` (nvmlDeviceGetPowerManagementDefaultLimit). A call the GPU does not support gives
    None for its field. Raises only from the constructor (NVML missing or failing to initialise)."""

    vendor = "nvidia"
    reads_counter_on_edges = True
    """The energy counter is read every COUNTER_EVERY_S and at every window edge (Sampler.sample_once),
    not at every tick: nvmlDeviceGetTotalEnergyConsumption costs ~3.5 ms of CPU per call on an H200
    (benchmarks/nvml_call_cost.py), 3.5 % of a core at 10 Hz by itself."""
    COUNTER_EVERY_S = 1.0

    def __init__(self, index: int, *, nvml: Any = None, source_id: str | None = None) -> None:
        self.nvml = nvml if nvml is not None else _import_pynvml()
        self.nvml.nvmlInit()
        self._open = True
        self._counter_at = -math.inf  # time.monotonic() of the last energy counter read
        self.index = index
        self.handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        bus = self._call(lambda: self.nvml.nvmlDeviceGetPciInfo(self.handle).busId)
        self.pci_bus = _nvml_bus(bus) if bus is not None else None
        self.id = source_id or (f"nvidia:{self.pci_bus}" if self.pci_bus else f"nvidia:{index}")
        # nvmlDeviceGetCurrentClocksEventReasons; older bindings call it ...ThrottleReasons (§5)
        reasons = getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons: Callable[[Any], int] = reasons or self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons

    def _call(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:  # pynvml.NVMLError (NotSupported, GpuIsLost, ...): record None
            return None

    def state(self) -> dict[str, Any]:
        """Power state: `cap_w` (enforced limit), `cap_default_w` (default limit), W."""
        n, h = self.nvml, self.handle
        return {
            "vendor": self.vendor,
            "cap_w": _scaled(self._call(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h)), 1e3),
            "cap_default_w": _scaled(self._call(lambda: n.nvmlDeviceGetPowerManagementDefaultLimit(h)), 1e3),
        }

    def read(self, edge: bool = False) -> dict[str, Any]:
        """One sample (fields in the class docstring). `energy_j`, `cap_w` and `cap_default_w` are read
        only at an `edge` (a window starts or ends: the Sampler's sample_once) and once every
        COUNTER_EVERY_S (absent from the other ticks' samples)."""
        n, h, c = self.nvml, self.handle, self._call
        util = c(lambda: n.nvmlDeviceGetUtilizationRates(h))
        procs_raw = c(lambda: n.nvmlDeviceGetComputeRunningProcesses(h))
        procs = None
        if procs_raw is not None:
            procs = [{"pid": int(p.pid), "vram_bytes": _nvml_mem(p)} for p in procs_raw]
        energy = None
        now = time.monotonic()
        slow = edge or now - self._counter_at >= self.COUNTER_EVERY_S
        if slow:
            self._counter_at = now
            energy = c(lambda: n.nvmlDeviceGetTotalEnergyConsumption(h))
        sample = {
            "vendor": self.vendor,
            "power_w": _scaled(c(lambda: n.nvmlDeviceGetPowerUsage(h)), 1e3),
            "energy_j": _scaled(energy, 1e3),
            "sclk_mhz": c(lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            "mclk_mhz": c(lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            "temp_gpu_c": c(lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            "throttle_bits": c(lambda: self._reasons(h)),
            "busy_pct": getattr(util, "gpu", None),
            "mem_busy_pct": getattr(util, "memory", None),
            "pstate": c(lambda: n.nvmlDeviceGetPerformanceState(h)),
            "procs": procs,
            "n_procs": None if procs is None else len(procs),
        }
        if slow:  # the power limits change only by an admin's hand: read with the counter
            sample.update({k: v for k, v in self.state().items() if k != "vendor"})
        return sample

    def close(self) -> None:
        """Release NVML (nvmlShutdown is reference-counted against nvmlInit)."""
        if self._open:
            self._open = False
            self._call(self.nvml.nvmlShutdown)


def _nvml_bus(bus: Any) -> str:
    """NVML busId "00000000:19:00.0" (bytes in old bindings) -> "0000:19:00.0"."""
    text = bus.decode() if isinstance(bus, bytes) else str(bus)
    domain, _, rest = text.partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}" if rest else text.lower()


def _nvml_mem(p: Any) -> int | None:
    used = getattr(p, "usedGpuMemory", None)
    # NVML_VALUE_NOT_AVAILABLE (unsigned -1) when the driver cannot tell (e.g. under WDDM)
    return None if used is None or used >= 2**63 else int(used)


# ---------------------------------------------------------------------------------------------
# Discovery


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
    out: list[GpuRef] = []
    root = Path(drm_root)
    try:
        cards = sorted((c for c in os.listdir(root) if re.fullmatch(r"card\d+", c)), key=lambda c: int(c[4:]))
    except OSError:
        cards = []
    for card in cards:
        dev = root / card / "device"
        if (_read_text(dev / "vendor") or "").lower() != "0x1002":
            continue
        pci_bus = Path(os.path.realpath(dev)).name
        out.append(
            GpuRef(
                vendor="amd",
                id=f"amd:{pci_bus}",
                index=int(card[4:]),
                pci_bus=pci_bus,
                device_dir=str(dev),
                render_node=_render_node(dev),
                name=_read_text(dev / "product_name") or None,
            )
        )
    if nvml is False:  # the caller asked for AMD cards only (tests of a fake sysfs on any host)
        return out
    try:
        n = nvml if nvml is not None else _import_pynvml()
        n.nvmlInit()
    except Exception:
        return out
    try:
        for i in range(n.nvmlDeviceGetCount()):
            try:
                h = n.nvmlDeviceGetHandleByIndex(i)
                bus = _nvml_bus(n.nvmlDeviceGetPciInfo(h).busId)
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
        try:
            n.nvmlShutdown()
        except Exception:
            pass
    return out


def open_source(ref: GpuRef, **kwargs: Any) -> AmdGpuSource | NvmlGpuSource:
    """The sampling source for a discovered GPU (kwargs go to its constructor)."""
    if ref.vendor == "amd":
        assert ref.device_dir is not None
        return AmdGpuSource(ref.device_dir, source_id=ref.id, **kwargs)
    return NvmlGpuSource(ref.index, source_id=ref.id, **kwargs)


# ---------------------------------------------------------------------------------------------
# Power state ("stock" or not)

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
    if cap is not None and default is not None and cap < default - 0.5:
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


# ---------------------------------------------------------------------------------------------
# Sampler


class Sampler:
    """Reads every source `rate_hz` times a second on a background thread, from start() to stop()
    (or as a context manager). Each sample is the source's dict plus `t` (wall time, time.time(),
    midpoint of the read), `source` and `read_ms`; a read that raises gives
    {"t", "source", "error"} instead and sampling goes on. Samples are kept in memory
    (`samples`, about 1-2 KB each: ~50 MB per hour for a host and one GPU at 10 Hz) and, with
    `trace_path`, appended to it as JSONL as they come (flushed, not fsynced, per line; the first
    line is a header {"telemetry_trace": 1, "rate_hz", "sources", "started_t"}).

    `rate_hz` must be ≥ 10: edges of windows are interpolated between samples, and the H200 case
    (shared/cases/h200-telemetry) was sampled at 20 Hz. Ticks are scheduled on the monotonic clock;
    a tick that overruns is skipped, not queued (`missed_ticks` counts them)."""

    MIN_RATE_HZ = 10.0

    def __init__(
        self, sources: Sequence[Source], rate_hz: float = 10.0, trace_path: str | Path | None = None
    ) -> None:
        if not rate_hz >= self.MIN_RATE_HZ:
            raise ValueError(f"Sampler rate_hz {rate_hz}: must be at least {self.MIN_RATE_HZ}")
        ids = [s.id for s in sources]
        if len(set(ids)) != len(ids):
            raise ValueError(f"Sampler: duplicate source ids {ids}")
        self.sources = list(sources)
        self.rate_hz = float(rate_hz)
        self.trace_path = Path(trace_path) if trace_path else None
        self._samples: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._trace: Any = None
        self.missed_ticks = 0
        self.started_t: float | None = None
        self.stopped_t: float | None = None

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._thread is not None

    @property
    def samples(self) -> list[dict[str, Any]]:
        """A copy of the samples so far, in read order."""
        with self._lock:
            return list(self._samples)

    def sample_once(self, edge: bool = True) -> list[dict[str, Any]]:
        """Read every source once now; returns and records the samples. An `edge` read (a window starts
        or ends here) also reads what a source reads only every so often (NVML's energy counter:
        NvmlGpuSource.reads_counter_on_edges), so a window's energy is the counter's own difference
        across it; the ticks read with edge=False. Safe to call from another thread while sampling runs
        (reads are serialised: sources keep state)."""
        with self._read_lock:
            return self._sample_once(edge)

    def _sample_once(self, edge: bool) -> list[dict[str, Any]]:
        out = []
        for src in self.sources:
            t_a = time.time()
            m_a = time.perf_counter()
            try:
                edge_aware = edge and getattr(src, "reads_counter_on_edges", False)
                data = src.read(edge=True) if edge_aware else src.read()  # type: ignore[call-arg]
                sample = {"t": 0.0, "source": src.id, **data}
            except Exception as e:  # a failing source never stops the sampler
                sample = {"t": 0.0, "source": src.id, "error": f"{type(e).__name__}: {e}"}
            dt = time.perf_counter() - m_a
            sample["t"] = t_a + dt / 2
            sample["read_ms"] = round(dt * 1e3, 3)
            out.append(sample)
        with self._lock:
            self._samples.extend(out)
        if self._trace is not None:
            try:
                self._trace.write("".join(json.dumps(s, separators=(",", ":")) + "\n" for s in out))
                self._trace.flush()
            except (OSError, ValueError):
                self._trace = None  # disk full / closed: keep sampling into memory
        return out

    def _run(self) -> None:
        # the lowest CPU priority for this thread only (Linux: setpriority on a thread id): a benchmark
        # that keeps every core busy (llama-bench on the CPU) is preempted as little as possible by the
        # ticks; a loaded host may then delay a tick, which the summaries see as a gap, never as a value
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        period = 1.0 / self.rate_hz
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self.sample_once(edge=False)
            next_tick += period
            now = time.monotonic()
            if now > next_tick:
                skipped = int((now - next_tick) / period) + 1
                self.missed_ticks += skipped
                next_tick += skipped * period
            self._stop.wait(max(0.0, next_tick - time.monotonic()))

    def start(self) -> Sampler:
        """Open the trace (append) and start the thread; the first tick reads at once."""
        if self._thread is not None:
            raise RuntimeError("Sampler already started")
        self.started_t = time.time()
        if self.trace_path is not None:
            self.trace_path.parent.mkdir(parents=True, exist_ok=True)
            self._trace = open(self.trace_path, "a", encoding="utf-8")
            header = {
                "telemetry_trace": 1,
                "rate_hz": self.rate_hz,
                "sources": [s.id for s in self.sources],
                "started_t": self.started_t,
            }
            self._trace.write(json.dumps(header) + "\n")
            self._trace.flush()
        self._thread = threading.Thread(target=self._run, name="telemetry-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        """Stop the thread (after one last tick), close the trace and each source's close() if it
        has one; returns the samples. Safe to call twice."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.sample_once()  # a sample after the end of the last window
            self.stopped_t = time.time()
        if self._trace is not None:
            try:
                self._trace.close()
            except OSError:
                pass
            self._trace = None
        for src in self.sources:
            close = getattr(src, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass
        return self.samples

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------
# Kernel log (§3)

# Stable parts of amdgpu's trouble messages (§3; example lines from pop-os/cosmic-comp#2626,
# cosmic-epoch#3764, ROCm#5724, #6273, #2804, #2766, #6018, ValveSoftware/SteamOS#2802).
KERNEL_LOG_PATTERNS: dict[str, re.Pattern[str]] = {
    "ring_timeout": re.compile(r"ring (\S+) timeout, signaled seq=(\d+), emitted seq=(\d+)"),
    "ring_reset": re.compile(r"ring (\S+) reset", re.I),
    "gpu_reset": re.compile(
        r"GPU reset begin|GPU reset\(\d+\) succeeded|GPU reset succeeded|(MODE1|MODE2|BACO) reset"
    ),
    "vram_lost": re.compile(r"VRAM is lost"),
    "mes_failure": re.compile(
        r"MES failed to respond to msg=(\w+)|MES might be in unrecoverable state"
        r"|failed to remove hardware queue from MES|Failed to evict process queues"
    ),
    "page_fault": re.compile(r"\[(?:gfx|mm)hub\d*\] (?:no-retry )?page fault"),
    "devcoredump": re.compile(r"device coredump"),
}


def match_kernel_line(text: str) -> list[str]:
    """Kinds of §3 trouble a kernel-log line shows (empty list: none)."""
    return [kind for kind, rx in KERNEL_LOG_PATTERNS.items() if rx.search(text)]


class KernelLog:
    """Kernel messages of a run, without root where the host allows it (§3). Create it at run
    start: it records t0 and opens /dev/kmsg non-blocking at its end (only records written after
    that are read). `read()` at the end returns what was seen:

        {"source": "kmsg" | "journal" | "unreadable", "why_unreadable": str | None,
         "t0", "t1", "events": [{"kind", "text", "t"}], "counts": {kind: n},
         "records_lost": int, "lines_scanned": int,
         "verdict": "events-seen" | "none-seen" | "unreadable"}

    When /dev/kmsg cannot be opened (kernel.dmesg_restrict=1 without CAP_SYSLOG), it runs
    `journalctl -k -o json --since @t0-1 --until @t1+1` (members of systemd-journal/adm/wheel).
    Neither readable -> "unreadable", never "healthy": and "none-seen" means no message, not a
    healthy GPU (ROCm#6630: an R9700 hang logged nothing for eight minutes). Roots are parameters."""

    def __init__(
        self,
        kmsg_path: str | Path = "/dev/kmsg",
        *,
        journalctl: Sequence[str] | None = None,
        proc: str | Path = "/proc",
    ) -> None:
        self.t0 = time.time()
        self.kmsg_path = Path(kmsg_path)
        self.journalctl = list(journalctl) if journalctl else None
        self.proc = Path(proc)
        self._fd: int | None = None
        self._kmsg_error: str | None = None
        try:
            self._fd = os.open(self.kmsg_path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self._fd, 0, os.SEEK_END)  # Documentation/ABI/testing/dev-kmsg: skip old records
        except OSError as e:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._kmsg_error = f"{self.kmsg_path}: {e.strerror or e}"

    def read(self) -> dict[str, Any]:
        """Read what was logged since construction (fields in the class docstring); closes kmsg."""
        t1 = time.time()
        result: dict[str, Any] = {
            "source": "unreadable",
            "why_unreadable": None,
            "t0": self.t0,
            "t1": t1,
            "events": [],
            "counts": {},
            "records_lost": 0,
            "lines_scanned": 0,
        }
        lines: list[tuple[float | None, str]] | None = None
        if self._fd is not None:
            lines, lost, error = self._read_kmsg()
            if error is None:
                result.update(source="kmsg", records_lost=lost)
            else:  # opened but not readable (EPERM at read time in some containers): try the journal
                self._kmsg_error, lines = error, None
        if lines is None:
            lines, why = self._read_journal(t1)
            if lines is not None:
                result["source"] = "journal"
            else:
                restrict = _read_text(self.proc / "sys" / "kernel" / "dmesg_restrict")
                result["why_unreadable"] = f"{self._kmsg_error} (dmesg_restrict={restrict}); journal: {why}"
        for t, text in lines or []:
            result["lines_scanned"] += 1
            for kind in match_kernel_line(text):
                result["events"].append({"kind": kind, "text": text, "t": t})
                result["counts"][kind] = result["counts"].get(kind, 0) + 1
        if result["source"] == "unreadable":
            result["verdict"] = "unreadable"
        else:
            result["verdict"] = "events-seen" if result["events"] else "none-seen"
        return result

    def _read_kmsg(self) -> tuple[list[tuple[float | None, str]], int, str | None]:
        """Records `prio,seq,usec,flags;text` (+ ` KEY=value` lines); EPIPE = records overwritten;
        a gap in seq = records lost. Times: boot-relative µs turned to wall time (approximate).
        Returns (lines, records lost, error): an error other than EAGAIN/EPIPE ends the read, and
        with no record read it makes kmsg count as unreadable."""
        assert self._fd is not None
        boot_wall = time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)
        chunks: list[bytes] = []
        lost = 0
        error: str | None = None
        try:
            while True:
                try:
                    data = os.read(self._fd, 8192)
                except BlockingIOError:
                    break
                except OSError as e:
                    if e.errno == errno.EPIPE:
                        lost += 1
                        continue
                    error = f"{self.kmsg_path}: {e.strerror or e}"
                    break
                if not data:
                    break
                chunks.append(data)
        finally:
            os.close(self._fd)
            self._fd = None
        out: list[tuple[float | None, str]] = []
        prev_seq: int | None = None
        for raw in b"".join(chunks).decode("utf-8", "replace").splitlines():
            if raw.startswith(" ") or ";" not in raw:
                continue  # continuation KEY=value lines
            head, _, text = raw.partition(";")
            parts = head.split(",")
            t: float | None = None
            try:
                seq = int(parts[1])
                t = boot_wall + int(parts[2]) / 1e6
                if prev_seq is not None and seq > prev_seq + 1:
                    lost += seq - prev_seq - 1
                prev_seq = seq
            except (IndexError, ValueError):
                pass
            out.append((t, text))
        return out, lost, (error if not out else None)

    def _read_journal(self, t1: float) -> tuple[list[tuple[float | None, str]] | None, str]:
        cmd = self.journalctl or ([shutil.which("journalctl") or ""] if shutil.which("journalctl") else [])
        if not cmd:
            return None, "journalctl not found"
        args = [
            *cmd,
            "-k",
            "-o",
            "json",
            "--no-pager",
            f"--since=@{int(self.t0) - 1}",
            f"--until=@{int(t1) + 2}",
        ]
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, str(e)
        # journalctl(1): without a journal-reading group it shows only the user's own journal and
        # says so on stderr; that is not a read of the kernel log.
        if done.returncode != 0 or re.search(r"insufficient permissions|not seeing messages", done.stderr):
            return None, (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        out: list[tuple[float | None, str]] = []
        for line in done.stdout.splitlines():
            entry, _why = jsonsafe.parse_line(line)
            if entry is None:
                continue
            msg = entry.get("MESSAGE")
            if isinstance(msg, list):  # non-UTF-8 messages come as byte arrays
                msg = bytes(msg).decode("utf-8", "replace")
            try:
                t = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
            except (KeyError, ValueError, TypeError):
                t = None
            out.append((t, str(msg or "")))
        return out, ""

    def close(self) -> None:
        """Close /dev/kmsg without reading (read() closes it too)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def iter_trace(path: str | Path, warnings: list[str] | None = None) -> Iterable[dict[str, Any]]:
    """Samples of a Sampler trace file (the header line skipped). A line that is not a JSON object
    (a torn last line, bytes that are not UTF-8, nesting or numbers no sampler writes: the one safe
    parse, toolkit.core.jsonsafe) is skipped and noted in `warnings` as `path:line: why`."""
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            obj, why = jsonsafe.parse_line(line)
            if why is not None:
                if warnings is not None:
                    warnings.append(f"{path}:{n}: skipped a trace line: {why}")
                continue
            if obj is not None and "telemetry_trace" not in obj:
                yield obj
