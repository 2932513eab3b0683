"""Telemetry over a benchmark window: energy, tokens per joule, clocks, throttling, other tenants,
host load, and the flags a result carries. Pure functions over sample dicts (the samples of
toolkit.host.telemetry.Sampler, or a trace read back with `load_trace`).

    window_summary(samples, t0, t1, tokens=None) -> summary             JSON-able
    flags(summary, baseline=None, own_pids=None) -> [flag]

Flags (each threshold a named constant below, with its source):
    gpu-shared              a process other than the benchmark's on a GPU in the window
    throttled:<reason>      a throttle reason in >= THROTTLE_MIN_SHARE of the window's samples
    clock-idle              busy >= CLOCK_IDLE_BUSY_MIN_PCT while the gfx clock stayed <= CLOCK_IDLE_MAX_MHZ
    power-not-stock         cap below default, perf level, profile, OD offset or overdrive bit
    host-busy               other processes' CPU, CPU pressure or steal above HOST_* thresholds
    energy-invalid:<reason> no valid energy for a GPU (reason codes: ENERGY_REASONS)

Section numbers (§) refer to shared/reference/gpu-telemetry.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from toolkit.analysis.energy import (
    bracket,
    interp,
    max_gap,
    plausible,
    sample_period,
    window_energy,
)
from toolkit.host.telemetry import iter_trace, not_stock_reasons
from toolkit.results.telemetry_flags import AMD_SMU14_THROTTLE_BITS, tick_noise_cores, window_flags
from toolkit.results.window_check import HOST_MIN_WINDOW_S

# ---------------------------------------------------------------------------------------------
# Thresholds (each with its source)

# NVML clock-event reasons (nvidia-ml-py 13.615.71 nvmlClocksEventReason*, §5)
NVIDIA_CLOCK_EVENT_REASONS = {
    0x1: "gpu-idle",
    0x2: "applications-clocks",
    0x4: "sw-power-cap",
    0x8: "hw-slowdown",
    0x10: "sync-boost",
    0x20: "sw-thermal",
    0x40: "hw-thermal",
    0x80: "hw-power-brake",
    0x100: "display-clocks",
    0x200: "board-limit",
    0x400: "reliability",
}
# clock-idle (CLOCK_IDLE_MAX_MHZ, CLOCK_IDLE_BUSY_MIN_PCT), host-busy (HOST_OTHER_CPU_CORES_MAX,
# HOST_PSI_SOME_MAX_PCT, HOST_STEAL_MAX_PCT), undersampled (UNDERSAMPLED_SHARE) and gpu-shared's
# process count (OWN_GPU_PROCS): stated, with their sources, in toolkit.results.telemetry_check, where
# `toolkit import` asks a stored block whether it shows what raised each flag.
# A GPU busy above this in the idle baseline before the run (the benchmark not yet started) means
# another tenant (§2, "practical pre-run check"; our number): said once as a run note.
BASELINE_BUSY_MAX_PCT = 10.0


# ---------------------------------------------------------------------------------------------
# Reading traces


def load_trace(path: str | Path, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """The samples of a Sampler JSONL trace (header skipped; a line that is not a JSON object skipped
    and noted in `warnings` as `path:line: why`)."""
    return list(iter_trace(path, warnings))


# ---------------------------------------------------------------------------------------------
# Window summary


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"min": None, "median": None, "max": None, "mean": None}
    return {
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def _throttle_names(vendor: str | None, bits: int) -> list[str]:
    if vendor == "nvidia":
        return [name for bit, name in NVIDIA_CLOCK_EVENT_REASONS.items() if bits & bit] + (
            [f"bit-0x{bits & ~0x7FF:x}"] if bits & ~0x7FF else []
        )
    return [
        AMD_SMU14_THROTTLE_BITS.get(bit, f"bit{bit}") for bit in range(bits.bit_length()) if bits >> bit & 1
    ]


_STATE_KEYS = ("cap_w", "cap_default_w", "perf_level", "power_profile", "od_vddgfx_offset_mv", "od_enabled")


def _active(p: dict[str, Any]) -> bool:
    """Whether a GPU process entry shows compute in its sample: KFD compute queues (AMD), SM use
    (NVML per-process utilisation, `sm_pct`); an entry that says neither counts as active (unknown)."""
    if "queues" in p:
        return bool(p["queues"])
    return p.get("sm_pct") is None or p["sm_pct"] > 0


def _processes(inside: list[dict[str, Any]]) -> tuple[set[int], set[int], int | None]:
    """(pids seen, pids active in some sample, most processes at once) over a GPU's window samples."""
    pids: set[int] = set()
    active: set[int] = set()
    procs_max = None
    for s in inside:
        procs = s.get("procs")
        n = len(procs) if isinstance(procs, list) else s.get("n_procs")
        if isinstance(procs, list):
            pids.update(int(p["pid"]) for p in procs)
            active.update(int(p["pid"]) for p in procs if _active(p))
        if n is not None:
            procs_max = max(procs_max or 0, int(n))
    return pids, active, procs_max


def _throttle_counts(vendor: str | None, inside: list[dict[str, Any]]) -> tuple[int, dict[str, int]]:
    """(samples that carry a throttle bitmask, {reason: samples it is set in}) over a GPU's window."""
    bitmasks = [int(s["throttle_bits"]) for s in inside if s.get("throttle_bits") is not None]
    counts: dict[str, int] = {}
    for bits in bitmasks:
        for name in _throttle_names(vendor, bits):
            counts[name] = counts.get(name, 0) + 1
    return len(bitmasks), counts


def _power_state(ss: list[dict[str, Any]], t0: float, t1: float) -> tuple[list[str], dict[str, Any]]:
    """(why the power state is not stock, the last power state) over the last state-carrying sample at
    or before t0 and those inside the window."""
    with_state = [s for s in ss if s["t"] <= t1 and any(s.get(k) is not None for k in _STATE_KEYS)]
    state_samples = [s for s in with_state if s["t"] >= t0]
    before = [s for s in with_state if s["t"] < t0]
    if before:
        state_samples.insert(0, before[-1])
    not_stock: list[str] = []
    for s in state_samples:
        for why in not_stock_reasons(s):
            if why not in not_stock:
                not_stock.append(why)
    return not_stock, state_samples[-1] if state_samples else {}


def _gpu_summary(ss: list[dict[str, Any]], t0: float, t1: float, tokens: float | None) -> dict[str, Any]:
    vendor = next((s.get("vendor") for s in ss if s.get("vendor")), None)
    implausible: dict[str, int] = {}
    ss = [plausible(s, implausible if t0 <= s["t"] <= t1 else None) for s in ss]
    ts_all = [s["t"] for s in ss]
    period = sample_period(ts_all)
    inside = [s for s in ss if t0 <= s["t"] <= t1]
    br = bracket(ts_all, t0, t1)
    span = ts_all[br[0] : br[1] + 1] if br else [s["t"] for s in inside]

    def vals(key: str) -> list[float]:
        return [float(s[key]) for s in inside if isinstance(s.get(key), (int, float))]

    energy = window_energy(ss, vendor, t0, t1, period, tokens)
    n_throttle, counts = _throttle_counts(vendor, inside)  # share: of the samples that carry a bitmask
    pids, active, procs_max = _processes(inside)
    not_stock, last_state = _power_state(ss, t0, t1)
    power, sclk, mclk = _stats(vals("power_w")), _stats(vals("sclk_mhz")), _stats(vals("mclk_mhz"))
    temps = sorted({k for s in inside for k in s if k.startswith("temp_") and k.endswith("_c")})
    return {
        "vendor": vendor,
        "samples": len(inside),
        "period_s": period,
        "max_gap_s": max_gap(span),
        "power_w_mean": power["mean"],
        "power_w_max": power["max"],
        **energy,
        "sclk_mhz_min": sclk["min"],
        "sclk_mhz_median": sclk["median"],
        "sclk_mhz_max": sclk["max"],
        "mclk_mhz_median": mclk["median"],
        "temp_max_c": {k: max(vals(k)) for k in temps if vals(k)},
        "busy_pct_mean": _stats(vals("busy_pct"))["mean"],
        "mem_busy_pct_mean": _stats(vals("mem_busy_pct"))["mean"],
        "throttle_samples": n_throttle,
        "throttle_share": {k: counts[k] / n_throttle for k in sorted(counts)},
        "throttle_count": dict(sorted(counts.items())),
        "procs_max": procs_max,
        "pids": sorted(pids),
        "active_pids": sorted(active),
        "suspended_samples": sum(1 for s in inside if s.get("runtime_status") == "suspended"),
        "error_samples": sum(1 for s in inside if s.get("error")),
        "cap_w": last_state.get("cap_w"),
        "cap_default_w": last_state.get("cap_default_w"),
        "not_stock": not_stock,
        "implausible": implausible,
        "dropped": any(s.get("dropped") for s in ss if s["t"] <= t1),
    }


def _nonneg(v: float | None) -> float | None:
    """A CPU rate with tick-resolution noise below zero read as 0 (another process cannot use less)."""
    return None if v is None else max(v, 0.0)


def _in_range(v: float | None, lo: float, hi: float, key: str, bad: dict[str, int]) -> float | None:
    """`v` when inside [lo, hi] (a little tick noise below lo read as lo); else None, counted in `bad`."""
    if v is None or lo - 0.5 <= v <= hi + 0.5:
        return None if v is None else min(max(v, lo), hi)
    bad[key] = bad.get(key, 0) + 1
    return None


def _own_cpu_from_zero(ss: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The benchmark's own CPU before it is first known is 0: its process (container) did not exist yet
    (a fresh cgroup or process tree starts at 0), so a short first window reads over the whole span."""
    first_own = next((i for i, s in enumerate(ss) if s.get("own_cpu_s") is not None), None)
    if not first_own:
        return ss
    return [
        {**s, "own_cpu_s": 0.0} if i < first_own and s.get("own_cpu_s") is None else s
        for i, s in enumerate(ss)
    ]


def _counter_span(ss: list[dict[str, Any]], t0: float, t1: float) -> tuple[float, float]:
    """One span for every host figure, so busy = own + other holds: the part of [t0, t1] the samples
    holding the host counters cover."""
    span_keys = ["cpu_busy_s", "cpu_total_s"] + (
        ["own_cpu_s"] if any(s.get("own_cpu_s") is not None for s in ss) else []
    )
    span_ts = [s["t"] for s in _holding(ss, span_keys)]
    return (max(t0, span_ts[0]), min(t1, span_ts[-1])) if span_ts else (t0, t1)


def _holding(ss: list[dict[str, Any]], keys: Iterable[str]) -> list[dict[str, Any]]:
    """The samples of `ss` (in order) that hold a value for every one of `keys`: one pass per key, not
    a generator per sample (6 rates a window, each over the window's samples: ~2/3 of a window
    summary's CPU went to that test on a 4-minute run's windows)."""
    for k in keys:
        ss = [s for s in ss if s.get(k) is not None]
    return ss


class _Column(Sequence[float]):
    """Counter `key` of the samples `pts` as floats, read only where asked: interp reads two of them."""

    def __init__(self, pts: list[dict[str, Any]], key: str) -> None:
        self.pts, self.key = pts, key

    def __len__(self) -> int:
        return len(self.pts)

    def __getitem__(self, i):  # type: ignore[no-untyped-def]  # Sequence's int and slice overloads
        if isinstance(i, slice):
            return [float(s[self.key]) for s in self.pts[i]]
        return float(self.pts[i][self.key])


def _counter_rate(
    ss: list[dict[str, Any]],
    t0: float,
    t1: float,
    num: str,
    den: str | None = None,
    sub: tuple[str, ...] = (),
) -> float | None:
    """The rate of cumulative counter `num` (less the counters `sub`) over [t0, t1]: per second, or
    in % of `den`."""
    keys = [k for k in (num, den, *sub) if k]
    pts = _holding(ss, keys)
    ts = [s["t"] for s in pts]
    if len(ts) < 2:
        return None
    # the part of the window the samples holding these counters cover (edges interpolated): the
    # whole window when they bracket it; from the first such sample when a counter starts inside
    # it (the benchmark's own CPU is known only once its process runs)
    a, b = max(t0, ts[0]), min(t1, ts[-1])
    if b <= a:
        return None

    def d(key: str) -> float:
        vs = _Column(pts, key)
        return interp(ts, vs, b) - interp(ts, vs, a)

    value = d(num) - sum(d(k) for k in sub)
    if den:
        total = d(den)
        return 100.0 * value / total if total > 0 else None
    return value / (b - a) if b > a else None


def _host_summary(ss: list[dict[str, Any]], t0: float, t1: float) -> dict[str, Any]:
    """Host load over the window from the cumulative counters, interpolated at both edges (over the
    part of the window the samples cover). A window shorter than HOST_MIN_WINDOW_S is widened
    backwards to it, but not before the first sample nor, when the benchmark's own CPU is tracked,
    before its first known value: before that the engine was starting the benchmark's container
    (runc, the daemons: a core of the harness's own work on a 2-core host, not another tenant)."""
    if t1 - t0 < HOST_MIN_WINDOW_S and ss:
        known = [s["t"] for s in ss if s.get("own_cpu_s") is not None] or [min(s["t"] for s in ss)]
        t0 = min(t0, max(known[0], t1 - HOST_MIN_WINDOW_S))
    inside = [s for s in ss if t0 <= s["t"] <= t1]
    ts_all = [s["t"] for s in ss]
    ss = _own_cpu_from_zero(ss)
    t0, t1 = _counter_span(ss, t0, t1)

    def rate(num: str, den: str | None = None, sub: tuple[str, ...] = ()) -> float | None:
        return _counter_rate(ss, t0, t1, num, den, sub)

    # the toolkit's own process is not another tenant (traces before it was sampled lack the counter)
    ours = ("own_cpu_s", "harness_cpu_s") if any("harness_cpu_s" in s for s in ss) else ("own_cpu_s",)

    psi = rate("psi_some_us")
    implausible: dict[str, int] = {}
    psi_pct = _in_range(None if psi is None else psi / 1e4, 0.0, 100.0, "psi_some_pct", implausible)
    steal = _in_range(rate("steal_s", den="cpu_total_s"), 0.0, 100.0, "steal_pct", implausible)
    loads = [float(s["loadavg_1m"]) for s in inside if s.get("loadavg_1m") is not None]
    cpus = [s.get("cpus_online") for s in ss if s.get("cpus_online")]
    n_cpus = cpus[-1] if cpus else None
    busy = rate("cpu_busy_s")
    noise = max(0.1, tick_noise_cores(n_cpus, t1 - t0))  # tick noise aside, no more than all cores
    if busy is not None and n_cpus and busy > n_cpus * 1.05 + noise:
        implausible["busy_cores_mean"], busy = 1, None
    span = max(t1 - t0, HOST_MIN_WINDOW_S)
    return {
        "samples": len(inside),
        "max_gap_s": max_gap([t for t in ts_all if t0 <= t <= t1]),
        "cpus_online": n_cpus,
        "achieved_hz": sum(1 for s in ss if t1 - span <= s["t"] <= t1) / span,
        "busy_cores_mean": busy,
        "own_cpu_cores_mean": rate("own_cpu_s"),
        "harness_cpu_cores_mean": rate("harness_cpu_s"),
        "other_cpu_cores_mean": _nonneg(rate("cpu_busy_s", sub=ours)),
        "host_window_s": round(t1 - t0, 3),
        "psi_some_pct": psi_pct,  # µs per s -> % of wall time
        "steal_pct": steal,
        "loadavg_1m_max": max(loads) if loads else None,
        "implausible": implausible,
    }


def _source_summaries(
    samples: Iterable[dict[str, Any]], t0: float, t1: float, tokens: float | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """({source: GPU summary}, the first host source's summary or None) of the samples that carry
    `t` and `source`, grouped per source."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        if isinstance(s.get("t"), (int, float)) and s.get("source"):
            groups.setdefault(str(s["source"]), []).append(s)
    gpus: dict[str, Any] = {}
    host: dict[str, Any] | None = None
    for sid, ss in sorted(groups.items()):
        ss.sort(key=lambda s: s["t"])
        if any(s.get("vendor") for s in ss):
            gpus[sid] = _gpu_summary(ss, t0, t1, tokens)
        elif any("cpu_total_s" in s for s in ss) and host is None:
            host = _host_summary(ss, t0, t1)
    return gpus, host


def window_summary(
    samples: Iterable[dict[str, Any]],
    t0: float,
    t1: float,
    tokens: float | None = None,
    rate_hz: float | None = None,
) -> dict[str, Any]:
    """Summary of one window [t0, t1] (wall seconds) of Sampler samples, JSON-able:

        {"t0", "t1", "duration_s", "tokens", "rate_hz" (the sampler's, when given),
         "energy_j", "energy_valid", "tok_per_j",             # all GPUs together; None unless every GPU is valid
         "gpus": {source_id: {
             "vendor", "samples", "period_s", "max_gap_s",
             "power_w_mean", "power_w_max",
             "energy_j", "energy_source" ("counter" | "integrated-average-power" | None),
             "energy_valid", "energy_invalid_reason" (ENERGY_REASONS | None),
             "energy_counter_j", "energy_counter_invalid_reason",
             "energy_integrated_j", "energy_integrated_invalid_reason", "energy_step_s",
             "tok_per_j",
             "sclk_mhz_min", "sclk_mhz_median", "sclk_mhz_max", "mclk_mhz_median",
             "temp_max_c": {"temp_edge_c": .., ...}, "busy_pct_mean", "mem_busy_pct_mean",
             "throttle_samples", "throttle_share": {reason: share}, "throttle_count": {reason: n},
             "procs_max", "pids", "active_pids", "suspended_samples", "error_samples",
             "cap_w", "cap_default_w", "not_stock": [str], "implausible": {sensor: dropped}}},
         "host": {"samples", "max_gap_s", "cpus_online", "achieved_hz", "busy_cores_mean",
                  "own_cpu_cores_mean", "other_cpu_cores_mean", "psi_some_pct", "steal_pct",
                  "loadavg_1m_max", "implausible"} | None}

    Sensor values outside their physical range (energy.PLAUSIBLE) are dropped first and counted.
    Energy (energy.window_energy): the hardware counter when it increases plausibly over a window of
    enough counter steps and agrees with a valid integral, else the integral of the averaged power when
    that is valid, else None with `energy_invalid_reason`; never a number when invalid. tok_per_j = tokens / energy_j. Throttle reasons are named per vendor (NVML clock-event
    reasons; SMU14 bits for AMD) and include non-throttle ones (gpu-idle, temp-hotspot): `flags`
    decides which count. Stats (means, clocks, temps) are over samples inside [t0, t1].

    Pass the samples of the GPUs the run used (and the host): a GPU the benchmark did not touch
    would add its own energy and flags. Samples without `t`/`source` are ignored."""
    if not t1 > t0:
        raise ValueError(f"window_summary: t1 {t1} is not after t0 {t0}")
    gpus, host = _source_summaries(samples, t0, t1, tokens)
    valid = bool(gpus) and all(g["energy_valid"] for g in gpus.values())
    energy = sum(g["energy_j"] for g in gpus.values()) if valid else None
    return {
        "t0": t0,
        "t1": t1,
        "duration_s": t1 - t0,
        "tokens": tokens,
        "energy_j": energy,
        "energy_valid": valid,
        "tok_per_j": tokens / energy if tokens and energy else None,
        "rate_hz": rate_hz,
        "gpus": gpus,
        "host": host,
    }


# ---------------------------------------------------------------------------------------------
# Flags


def baseline_notes(baseline: dict[str, Any] | None) -> list[str]:
    """What the idle baseline before a run (window_summary, the benchmark not yet started) says of
    other tenants, one note per GPU: busy above BASELINE_BUSY_MAX_PCT, or processes on it. A note for
    the run, not a flag on its rows: a tenant gone by then would mark rows it never touched."""
    out = []
    for sid, g in ((baseline or {}).get("gpus") or {}).items():
        busy = g.get("busy_pct_mean") or 0
        if busy > BASELINE_BUSY_MAX_PCT or g.get("pids") or (g.get("procs_max") or 0) > 0:
            who = f"processes {g['pids']}" if g.get("pids") else f"{busy:.0f} % busy"
            out.append(
                f"GPU {sid} was in use before the run started ({who}): rows are flagged gpu-shared only "
                "where another process ran compute during their own window"
            )
    return out


def flags(summary: dict[str, Any], own_pids: Collection[int] | None = None) -> list[str]:
    """Flags for one window's summary (a list of names, in a stable order; empty: nothing seen): the one
    rule, results.telemetry_flags.window_flags, which every reader of a stored block re-derives them by.

    - `gpu-shared`: a process other than the benchmark's ran compute on a GPU in the window (host
      pids from KFD or NVML not in `own_pids`, with queues or SM use; without pids, more than
      OWN_GPU_PROCS processes). Decided from the window alone: a tenant seen before the run is a run
      note (baseline_notes), not a flag on later rows.
    - `gpu-memory-held`: another process held memory on a GPU in the window but ran nothing (milder:
      the speed is the card's; free memory was less).
    - `sensor-implausible`: a sensor value outside its physical range was dropped (energy.PLAUSIBLE).
    - `undersampled`: the sampler achieved under UNDERSAMPLED_SHARE of its rate around the window.
    - `sensor-dropped`: a GPU's read did not return (Sampler.read_timeout_s) by the window's end: the
      GPU is not sampled from then on.
    - `throttled:<reason>`: NVIDIA sw-power-cap, hw-slowdown, sw-thermal, hw-thermal,
      hw-power-brake; AMD any SMU14 bit but temp-hotspot (ppt0 = held at the power cap), in at least
      THROTTLE_MIN_SHARE of the window's samples and THROTTLE_MIN_SAMPLES of them.
    - `clock-idle`: busy mean >= CLOCK_IDLE_BUSY_MIN_PCT while the median gfx clock <= CLOCK_IDLE_MAX_MHZ.
    - `power-not-stock`: the GPU's power state in the window is not stock (not_stock_reasons).
    - `host-busy`: other processes' CPU > HOST_OTHER_CPU_CORES_MAX cores (plus the tick counts' noise
      over the span read, tick_noise_cores) where the cores are oversubscribed, or steal > HOST_STEAL_MAX_PCT,
      or CPU pressure some > HOST_PSI_SOME_MAX_PCT while others ran (_host_busy).
    - `energy-invalid:<reason>`: a GPU without a valid energy (reason code from ENERGY_REASONS)."""
    return window_flags(summary, own_pids)
