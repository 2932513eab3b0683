"""NVIDIA GPU telemetry: NVML through nvidia-ml-py (shared/reference/gpu-telemetry.md §5)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from toolkit.host.telemetry.readers import scaled, update_period


def import_pynvml() -> Any:
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
    (utilization gpu / memory), `pstate`, `procs` ([{"pid", "vram_bytes", "sm_pct"}] of
    nvmlDeviceGetComputeRunningProcesses: host pids; sm_pct from nvmlDeviceGetProcessUtilization,
    0 for a process that only holds memory, None when NVML cannot tell), `n_procs`, `cap_w` (enforced power limit),
    `cap_default_w` (nvmlDeviceGetPowerManagementDefaultLimit). A call the GPU does not support gives
    None for its field. Raises only from the constructor (NVML missing or failing to initialise)."""

    vendor = "nvidia"
    reads_counter_on_edges = True
    """The energy counter is read every COUNTER_EVERY_S and at every window edge (Sampler.sample_once),
    not at every tick: nvmlDeviceGetTotalEnergyConsumption costs ~3.5 ms of CPU per call on an H200
    (benchmarks/nvml_call_cost.py), 3.5 % of a core at 10 Hz by itself."""
    COUNTER_EVERY_S = 1.0

    def __init__(self, index: int, *, nvml: Any = None, source_id: str | None = None) -> None:
        self.nvml = nvml if nvml is not None else import_pynvml()
        self.nvml.nvmlInit()
        self._open = True
        self._counter_at = -math.inf  # time.monotonic() of the last energy counter read
        self.index = index
        self.handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        bus = self._call(lambda: self.nvml.nvmlDeviceGetPciInfo(self.handle).busId)
        self.pci_bus = nvml_bus(bus) if bus is not None else None
        self.id = source_id or (f"nvidia:{self.pci_bus}" if self.pci_bus else f"nvidia:{index}")
        # nvmlDeviceGetCurrentClocksEventReasons; older bindings call it ...ThrottleReasons (§5)
        reasons = getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons: Callable[[Any], int] = reasons or self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self.steps: dict[str, float | None] = {}
        self._util_since = 0  # µs timestamp of the newest per-process utilisation sample read

    def measure_steps(self, duration_s: float) -> dict[str, float | None]:
        """Measure the update periods (s) of the total-energy counter and of the power reading
        (readers.update_period, `duration_s` each); carried in the power state of later samples as
        `energy_step_s` / `power_step_s`."""
        n, h, c = self.nvml, self.handle, self._call
        self.steps = {
            "energy_step_s": update_period(
                lambda: c(lambda: n.nvmlDeviceGetTotalEnergyConsumption(h)), duration_s
            ),
            "power_step_s": update_period(lambda: c(lambda: n.nvmlDeviceGetPowerUsage(h)), duration_s),
        }
        return self.steps

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
            "cap_w": scaled(self._call(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h)), 1e3),
            "cap_default_w": scaled(self._call(lambda: n.nvmlDeviceGetPowerManagementDefaultLimit(h)), 1e3),
            **self.steps,
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
            sm = self._sm_by_pid()
            procs = [
                {
                    "pid": int(p.pid),
                    "vram_bytes": _nvml_mem(p),
                    "sm_pct": None if sm is None else sm.get(int(p.pid), 0),
                }
                for p in procs_raw
            ]
        energy = None
        now = time.monotonic()
        slow = edge or now - self._counter_at >= self.COUNTER_EVERY_S
        if slow:
            self._counter_at = now
            energy = c(lambda: n.nvmlDeviceGetTotalEnergyConsumption(h))
        sample = {
            "vendor": self.vendor,
            "power_w": scaled(c(lambda: n.nvmlDeviceGetPowerUsage(h)), 1e3),
            "energy_j": scaled(energy, 1e3),
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

    def _sm_by_pid(self) -> dict[int, int] | None:
        """Each process's highest SM use (%) in the samples NVML kept since the last call
        (nvmlDeviceGetProcessUtilization): {} when none ran compute since (NVML_ERROR_NOT_FOUND),
        None when the GPU or binding cannot tell (then a process's activity is unknown)."""
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(self.handle, self._util_since)
        except Exception as err:
            not_found = getattr(self.nvml, "NVML_ERROR_NOT_FOUND", 6)
            return {} if getattr(err, "value", None) == not_found else None
        out: dict[int, int] = {}
        for smp in samples:
            pid = int(smp.pid)
            out[pid] = max(out.get(pid, 0), int(smp.smUtil))
            self._util_since = max(self._util_since, int(smp.timeStamp))
        return out

    def close(self) -> None:
        """Release NVML (nvmlShutdown is reference-counted against nvmlInit)."""
        if self._open:
            self._open = False
            self._call(self.nvml.nvmlShutdown)


def nvml_bus(bus: Any) -> str:
    """NVML busId "00000000:19:00.0" (bytes in old bindings) -> "0000:19:00.0"."""
    text = bus.decode() if isinstance(bus, bytes) else str(bus)
    domain, _, rest = text.partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}" if rest else text.lower()


def _nvml_mem(p: Any) -> int | None:
    used = getattr(p, "usedGpuMemory", None)
    # NVML_VALUE_NOT_AVAILABLE (unsigned -1) when the driver cannot tell (e.g. under WDDM)
    return None if used is None or used >= 2**63 else int(used)
