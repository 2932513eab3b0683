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
around the benchmark; afterwards `toolkit.bench.observe.window_summary(s.samples, t0, t1, tokens)`
per test window, `results.telemetry_flags.window_flags(summary, ...)`, and `KernelLog.read()`.

Every sample carries `t` (wall time, time.time(), seconds: the midpoint of the read), `source` (the
source id) and `read_ms` (how long the read took). GPU samples also carry `vendor` ("amd" | "nvidia").
Facts and their sources: shared/reference/gpu-telemetry.md (§ numbers below refer to it).

This package's door: callers import `toolkit.host.telemetry`; the rooms are `readers` (never-raising
sysfs readers, the Source protocol), `cpu`, `amd`, `nvidia`, `discover` (which GPUs, power state),
`sampler` (the thread and its trace) and `kernel_log`.
May use: toolkit.core; nvidia-ml-py (optional); never prints.
"""

from __future__ import annotations

from toolkit.host.telemetry.amd import AmdGpuSource
from toolkit.host.telemetry.cpu import (
    HostSource,
    cgroup_cpu_seconds,
    process_tree_cpu_seconds,
)
from toolkit.host.telemetry.discover import (
    GpuRef,
    discover_gpus,
    not_stock_reasons,
    open_source,
    power_state,
)
from toolkit.host.telemetry.kernel_log import KernelLog
from toolkit.host.telemetry.nvidia import (
    NvmlGpuSource,
)
from toolkit.host.telemetry.readers import (
    READ_TIMEOUT_S,
    STEP_PROBE_S,
    ReadTimeout,
    Source,
    timeboxed,
    update_period,
)
from toolkit.host.telemetry.sampler import (
    Sampler,
    iter_trace,
)
