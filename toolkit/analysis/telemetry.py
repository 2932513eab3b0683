"""Telemetry over a benchmark window: energy, tokens per joule, clocks, throttling, other tenants,
host load, and the flags a result carries. Pure functions over sample dicts (the samples of
toolkit.host.telemetry.Sampler, or a trace read back with `load_trace`).

    llama_bench_windows(stderr_lines, records, end_t=...) -> [window]   one per llama-bench test
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

import re
import statistics
from collections.abc import Collection, Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from toolkit.host.telemetry import iter_trace, not_stock_reasons

# ---------------------------------------------------------------------------------------------
# Thresholds (each with its source)

# NVML's power reading is a 1 s average on Ampere and newer (§4.3, NVML docs). Integrating it is
# trusted on windows >= 1.5 s: on the H200 case (shared/cases/h200-telemetry, 50 ms sampling) the
# integral agreed with the hardware counter within ±3 % on every steady window >= 1.5 s (1.50 s
# -1.7 %, 1.89 s -2.5 %, 2.11 s +0.5 %; contended run 1.67-13.9 s within ±1.3 %) and was off by
# -44 % .. +6 % on windows of 0.22-0.91 s. (The one window >= 1.5 s outside ±3 %, tg128 ub2048 at
# +14 %, runs to process exit and holds the teardown: not steady load.)
NVML_POWER_AVG_MIN_WINDOW_S = 1.5
# amdgpu power1_average: firmware time constant undocumented (§1.2); until measured, windows must
# be >= 10 s (§4.4: >= 10·τ, 10 s while τ is unknown).
AMD_POWER_AVG_MIN_WINDOW_S = 10.0
# InferenceX utils/aggregate_power.py: a gap above max_sample_gap_s (3.0 s) in the window
# invalidates the stream (§4.1); 5 sampling periods for faster sampling rates (our rule).
MAX_SAMPLE_GAP_S = 3.0
MAX_SAMPLE_GAP_PERIODS = 5
# Reason codes (InferenceX's names where they exist, §4.1; window_short_for_sensor_average §4.4)
ENERGY_REASONS = (
    "window_short_for_sensor_average",
    "window_not_bracketed",
    "sampling_gap_exceeded",
    "insufficient_power_samples",
    "no_power_source",
    "counter_not_increasing",
    "counter_reset",
    "counter_not_read_at_edge",
)

COUNTER_EDGE_S = 0.1
"""How far a window edge may lie from the nearest energy counter read (or the sampling period, when
longer): the counter is interpolated at each edge, so its error is this distance times the change in
power. Every 10 Hz tick read the counter before; NVML's is now read at each edge (Sampler.sample_once)
and once a second, so an edge the sampler was not told of falls back to the integrated power."""

# A throttle reason counts when set in at least this share of the window's samples, and in at
# least THROTTLE_MIN_SAMPLES of them (our rule: a reason in one sample of four, or a single-sample
# blip, is not "held"; §7 asks for "most samples" for power-capped, we flag from a quarter on).
THROTTLE_MIN_SHARE = 0.25
THROTTLE_MIN_SAMPLES = 2
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
NVIDIA_THROTTLE_REASONS = frozenset(
    {"sw-power-cap", "hw-slowdown", "sw-thermal", "hw-thermal", "hw-power-brake"}
)
# SMU 14.0.2 throttle_status bits (smu14_driver_if_v14_0.h, §1.4)
AMD_SMU14_THROTTLE_BITS = {
    0: "temp-edge",
    1: "temp-hotspot",
    2: "temp-hotspot-gfx",
    3: "temp-hotspot-soc",
    4: "temp-mem",
    5: "temp-vr-gfx",
    6: "temp-vr-soc",
    7: "temp-vr-mem0",
    8: "temp-vr-mem1",
    9: "temp-liquid0",
    10: "temp-liquid1",
    11: "temp-plx",
    12: "tdc-gfx",
    13: "tdc-soc",
    14: "ppt0",  # held at the power cap
    15: "ppt1",
    16: "ppt2",
    17: "ppt3",
    18: "fit",
    19: "gfx-apcc-plus",
    20: "gfx-dvo",
}
# Bit 1 TEMP_HOTSPOT is set at all times on the R9700, idle at 37 °C included (rocm-systems#11781;
# RDNA3 too: libdrm-amdgpu-sys-rs#7): masked.
AMD_THROTTLE_MASKED = frozenset({"temp-hotspot"})

# clock-idle: the gfx clock stayed at an idle reading while the GPU was busy. 41 MHz is the RX 9070
# idle reading (ollama#9633) and the stuck-under-load reading of ROCm#6289; the H200 idles at
# 345 MHz (h200-telemetry case) and never went below 1380 MHz under load there. 500 MHz sits
# between. Busy: at least half the time (our rule).
CLOCK_IDLE_MAX_MHZ = 500.0
CLOCK_IDLE_BUSY_MIN_PCT = 50.0

# host-busy. Other processes' CPU: half a core (our rule: this project's 2-core build machine idles
# at 0.04-0.3 busy cores; one competing thread is 1.0). CPU pressure: no common threshold exists
# for PSI `some` (§6); 20 % of wall time with a task waiting (our rule). Steal: > 10 % (netdata
# stock alert warns at 10 %; "steal > 10 % = noisy neighbour", §6).
HOST_OTHER_CPU_CORES_MAX = 0.5
HOST_PSI_SOME_MAX_PCT = 20.0
HOST_STEAL_MAX_PCT = 10.0

# gpu-shared from a baseline (an idle window before the run): GPU busy above this while the
# benchmark was not running means another tenant (§2, "practical pre-run check"; our number).
BASELINE_BUSY_MAX_PCT = 10.0
# gpu-shared when process ids are unknown (NVML counts only): the benchmark is one process per GPU.
OWN_GPU_PROCS = 1


# ---------------------------------------------------------------------------------------------
# Reading traces and llama-bench windows


def load_trace(path: str | Path, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """The samples of a Sampler JSONL trace (header skipped; a line that is not a JSON object skipped
    and noted in `warnings` as `path:line: why`)."""
    return list(iter_trace(path, warnings))


def timestamped_lines(text: str) -> list[tuple[float, str]]:
    """`<unix seconds> <line>` per line (stderr with arrival times prepended, as in the H200 case)
    -> [(t, line)]. Lines without a leading number are skipped."""
    out: list[tuple[float, str]] = []
    for raw in text.splitlines():
        head, _, rest = raw.partition(" ")
        try:
            out.append((float(head), rest))
        except ValueError:
            continue
    return out


_LB_LINE = re.compile(r"llama-bench: benchmark (\d+)/(\d+): (.*)$")
_LB_FIRST_REP = re.compile(r"^(prompt|gen\w*) run 1/(\d+)")


def llama_bench_windows(
    stderr_lines: Iterable[tuple[float, str]], records: Sequence[dict[str, Any]], *, end_t: float
) -> list[dict[str, Any]]:
    """Per llama-bench test (needs `--progress`), the energy window: from the arrival of the first
    measured repetition's progress line (`llama-bench: benchmark i/N: prompt run 1/R` or
    `generation run 1/R`: the warm-up run is before it) to the arrival of the next test's
    `benchmark i+1/N: starting` line, or `end_t` (wall time the process ended) for the last test.

    `stderr_lines`: (arrival wall time s, line) pairs; `records`: llama-bench JSONL records in output
    order (record k is test k+1). Returns one dict per test seen:
    {"test", "n_tests", "t0", "t1", "duration_s", "repetitions", "n_prompt", "n_gen", "n_depth",
     "tokens", "record_index"} with tokens = (n_prompt + n_gen) × repetitions, i.e. the tokens
    llama-bench's t/s counts (n_prompt or n_gen for pp/tg tests). t0/t1 are None when a line is
    missing (no --progress, a crash). The window also holds what llama-bench does between timed
    repetitions (with n_depth > 0 the context fill of each repetition), and the last test's window
    runs to process exit."""
    first: dict[int, tuple[float, int]] = {}
    starting: dict[int, float] = {}
    n_tests = 0
    for t, line in stderr_lines:
        m = _LB_LINE.search(line)
        if not m:
            continue
        test, n_tests = int(m.group(1)), max(n_tests, int(m.group(2)))
        what = m.group(3).strip()
        if what == "starting":
            starting.setdefault(test, t)
        else:
            rep = _LB_FIRST_REP.match(what)
            if rep and test not in first:
                first[test] = (t, int(rep.group(2)))
    out: list[dict[str, Any]] = []
    for k in range(max(n_tests, len(records))):
        test = k + 1
        rec = records[k] if k < len(records) else {}
        t0, reps = first.get(test, (None, None))
        if reps is None and rec.get("samples_ns"):
            reps = len(rec["samples_ns"])
        t1 = starting.get(test + 1) if test < n_tests else end_t
        n_prompt, n_gen = int(rec.get("n_prompt") or 0), int(rec.get("n_gen") or 0)
        out.append(
            {
                "test": test,
                "n_tests": n_tests,
                "t0": t0,
                "t1": t1,
                "duration_s": (t1 - t0) if t0 is not None and t1 is not None else None,
                "repetitions": reps,
                "n_prompt": n_prompt,
                "n_gen": n_gen,
                "n_depth": int(rec.get("n_depth") or 0),
                "tokens": (n_prompt + n_gen) * reps if reps else None,
                "record_index": k if k < len(records) else None,
            }
        )
    return out


# ---------------------------------------------------------------------------------------------
# Window summary


def _interp(ts: Sequence[float], vs: Sequence[float], t: float) -> float:
    """Linear interpolation at t inside [ts[0], ts[-1]] (ts sorted)."""
    lo, hi = 0, len(ts) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ts[mid] <= t:
            lo = mid
        else:
            hi = mid
    if ts[hi] == ts[lo]:
        return (vs[lo] + vs[hi]) / 2
    return vs[lo] + (vs[hi] - vs[lo]) * (t - ts[lo]) / (ts[hi] - ts[lo])


def _bracket(ts: Sequence[float], t0: float, t1: float) -> tuple[int, int] | None:
    """Indices of the last sample at or before t0 and the first at or after t1; None when the
    samples do not bracket both edges."""
    if not ts or ts[0] > t0 or ts[-1] < t1:
        return None
    i0 = max(i for i, t in enumerate(ts) if t <= t0)
    i1 = min(i for i, t in enumerate(ts) if t >= t1)
    return i0, i1


def _period(ts: Sequence[float]) -> float:
    diffs = [b - a for a, b in pairwise(ts) if b > a]
    return statistics.median(diffs) if diffs else 0.0


def _gap_limit(period_s: float) -> float:
    return max(MAX_SAMPLE_GAP_S, MAX_SAMPLE_GAP_PERIODS * period_s)


def _max_gap(ts: Sequence[float]) -> float:
    return max((b - a for a, b in pairwise(ts)), default=0.0)


def _counter_energy(
    pts: list[tuple[float, float, float | None]],
    t0: float,
    t1: float,
    gap_limit: float,
    edge_limit: float = COUNTER_EDGE_S,
) -> tuple[float | None, str | None]:
    """Energy from a hardware counter (J) between t0 and t1, or (None, reason).
    Rules: the hardware counter is preferred (§4.1 InferenceX cross-checks with amd-smi's
    accumulator; §5 NVML total energy is "the reference for energy"); samples must bracket both
    edges and the counter is interpolated linearly at each (InferenceX, §4.1); an AMD
    energy_accumulator counts only if it increases between the reads (it was 0 in every public
    RDNA3/RDNA4 dump, §1.3); a drop is a u32 wrap at 2^32 × 2^-16 J when the sample gives
    `energy_wrap_j` (AMD, §1.3), else a counter reset (NVML: driver reload); each edge within
    `edge_limit` s of a counter read (the interpolation's reach: COUNTER_EDGE_S)."""
    if len(pts) < 2:
        return None, "insufficient_power_samples"
    ts = [p[0] for p in pts]
    br = _bracket(ts, t0, t1)
    if br is None:
        return None, "window_not_bracketed"
    i0, i1 = br
    seg = pts[i0 : i1 + 1]
    if _max_gap([p[0] for p in seg]) > gap_limit:
        return None, "sampling_gap_exceeded"
    near0 = min(abs(t0 - p[0]) for p in seg[:2])
    near1 = min(abs(t1 - p[0]) for p in seg[-2:])
    if max(near0, near1) > edge_limit:
        return None, "counter_not_read_at_edge"
    cum = [0.0]
    for (_, a, _), (_, b, wrap) in pairwise(seg):
        d = b - a
        if d < 0:
            if not wrap:
                return None, "counter_reset"
            d += wrap
        cum.append(cum[-1] + d)
    sts = [p[0] for p in seg]
    energy = _interp(sts, cum, t1) - _interp(sts, cum, t0)
    if energy <= 0:
        return None, "counter_not_increasing"
    return energy, None


def _integrated_energy(
    pts: list[tuple[float, float]], t0: float, t1: float, gap_limit: float, min_window_s: float
) -> tuple[float | None, str | None]:
    """Energy (J) by trapezoids over an averaged power reading, edges interpolated linearly
    (InferenceX aggregate_power.py, §4.1), or (None, reason). Valid only when the samples bracket
    both edges, no gap exceeds the limit, there are >= 2 samples (§4.1), and the window is at least
    `min_window_s`: several times the sensor's averaging period (§4.3: a 1 s average smears a short
    burst; NVML_POWER_AVG_MIN_WINDOW_S, AMD_POWER_AVG_MIN_WINDOW_S)."""
    if len(pts) < 2:
        return None, "insufficient_power_samples"
    ts = [p[0] for p in pts]
    br = _bracket(ts, t0, t1)
    if br is None:
        return None, "window_not_bracketed"
    i0, i1 = br
    if _max_gap(ts[i0 : i1 + 1]) > gap_limit:
        return None, "sampling_gap_exceeded"
    if t1 - t0 < min_window_s:
        return None, "window_short_for_sensor_average"
    ps = [p[1] for p in pts]
    xs = [t0] + [t for t in ts[i0 : i1 + 1] if t0 < t < t1] + [t1]
    ys = [_interp(ts, ps, t0)] + [p for t, p in pts[i0 : i1 + 1] if t0 < t < t1] + [_interp(ts, ps, t1)]
    energy = sum((xs[k + 1] - xs[k]) * (ys[k + 1] + ys[k]) / 2 for k in range(len(xs) - 1))
    return energy, None


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
    names = []
    for bit in range(max(bits.bit_length(), 1)):
        if bits >> bit & 1:
            names.append(AMD_SMU14_THROTTLE_BITS.get(bit, f"bit{bit}"))
    return names


_STATE_KEYS = ("cap_w", "cap_default_w", "perf_level", "power_profile", "od_vddgfx_offset_mv", "od_enabled")


def _gpu_summary(ss: list[dict[str, Any]], t0: float, t1: float, tokens: float | None) -> dict[str, Any]:
    vendor = next((s.get("vendor") for s in ss if s.get("vendor")), None)
    ts_all = [s["t"] for s in ss]
    period = _period(ts_all)
    gap_limit = _gap_limit(period)
    inside = [s for s in ss if t0 <= s["t"] <= t1]
    br = _bracket(ts_all, t0, t1)
    span = ts_all[br[0] : br[1] + 1] if br else [s["t"] for s in inside]

    def vals(key: str) -> list[float]:
        return [float(s[key]) for s in inside if isinstance(s.get(key), (int, float))]

    # Energy (see _counter_energy / _integrated_energy for the rules and their sources)
    counter_pts = [
        (s["t"], float(s["energy_j"]), s.get("energy_wrap_j")) for s in ss if s.get("energy_j") is not None
    ]
    power_pts = [(s["t"], float(s["power_w"])) for s in ss if s.get("power_w") is not None]
    min_window = NVML_POWER_AVG_MIN_WINDOW_S if vendor == "nvidia" else AMD_POWER_AVG_MIN_WINDOW_S
    if counter_pts:
        counter_j, counter_reason = _counter_energy(
            counter_pts, t0, t1, gap_limit, max(COUNTER_EDGE_S, period)
        )
    else:
        counter_j, counter_reason = None, "no_power_source"
    if power_pts:
        integ_j, integ_reason = _integrated_energy(power_pts, t0, t1, gap_limit, min_window)
    else:
        integ_j, integ_reason = None, "no_power_source"
    if counter_j is not None:
        energy, source, reason = counter_j, "counter", None
    elif integ_j is not None:
        energy, source, reason = integ_j, "integrated-average-power", None
    elif counter_pts and counter_reason not in ("counter_not_increasing",):
        energy, source, reason = None, None, counter_reason
    else:
        energy, source, reason = None, None, integ_reason

    # Throttle reasons: share of the window's samples that carry a bitmask
    bitmasks = [int(s["throttle_bits"]) for s in inside if s.get("throttle_bits") is not None]
    counts: dict[str, int] = {}
    for bits in bitmasks:
        for name in _throttle_names(vendor, bits):
            counts[name] = counts.get(name, 0) + 1
    # Other processes
    pids: set[int] = set()
    procs_max = None
    for s in inside:
        procs = s.get("procs")
        n = len(procs) if isinstance(procs, list) else s.get("n_procs")
        if isinstance(procs, list):
            pids.update(int(p["pid"]) for p in procs)
        if n is not None:
            procs_max = max(procs_max or 0, int(n))
    # Power state: the last state-carrying sample at or before t0, and those inside
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
    last_state = state_samples[-1] if state_samples else {}
    power, sclk, mclk = _stats(vals("power_w")), _stats(vals("sclk_mhz")), _stats(vals("mclk_mhz"))
    temps = sorted({k for s in inside for k in s if k.startswith("temp_") and k.endswith("_c")})
    return {
        "vendor": vendor,
        "samples": len(inside),
        "period_s": period,
        "max_gap_s": _max_gap(span),
        "power_w_mean": power["mean"],
        "power_w_max": power["max"],
        "energy_j": energy,
        "energy_source": source,
        "energy_valid": energy is not None,
        "energy_invalid_reason": reason,
        "energy_counter_j": counter_j,
        "energy_counter_invalid_reason": counter_reason,
        "energy_integrated_j": integ_j,
        "energy_integrated_invalid_reason": integ_reason,
        "tok_per_j": tokens / energy if tokens and energy else None,
        "sclk_mhz_min": sclk["min"],
        "sclk_mhz_median": sclk["median"],
        "sclk_mhz_max": sclk["max"],
        "mclk_mhz_median": mclk["median"],
        "temp_max_c": {k: max(vals(k)) for k in temps if vals(k)},
        "busy_pct_mean": _stats(vals("busy_pct"))["mean"],
        "mem_busy_pct_mean": _stats(vals("mem_busy_pct"))["mean"],
        "throttle_samples": len(bitmasks),
        "throttle_share": {k: counts[k] / len(bitmasks) for k in sorted(counts)},
        "throttle_count": dict(sorted(counts.items())),
        "procs_max": procs_max,
        "pids": sorted(pids),
        "suspended_samples": sum(1 for s in inside if s.get("runtime_status") == "suspended"),
        "error_samples": sum(1 for s in inside if s.get("error")),
        "cap_w": last_state.get("cap_w"),
        "cap_default_w": last_state.get("cap_default_w"),
        "not_stock": not_stock,
    }


# Host load is read over at least this many seconds ending at the window's end: /proc/stat counts in
# USER_HZ ticks (10 ms), so a rate over a window of a few ms is noise (a 20-ms decode test read -1.97
# "other" cores); contention is a slow condition, and the summary says which span it read (host_window_s).
HOST_MIN_WINDOW_S = 1.0


def _nonneg(v: float | None) -> float | None:
    """A CPU rate with tick-resolution noise below zero read as 0 (another process cannot use less)."""
    return None if v is None else max(v, 0.0)


def _host_summary(ss: list[dict[str, Any]], t0: float, t1: float) -> dict[str, Any]:
    """Host load over the window from the cumulative counters, interpolated at both edges (over the
    part of the window the samples cover). A window shorter than HOST_MIN_WINDOW_S is widened
    backwards to it (not before the first sample)."""
    if t1 - t0 < HOST_MIN_WINDOW_S and ss:
        t0 = max(min(s["t"] for s in ss), t1 - HOST_MIN_WINDOW_S)
    inside = [s for s in ss if t0 <= s["t"] <= t1]
    ts_all = [s["t"] for s in ss]

    # the benchmark's own CPU before it is first known is 0: its process (container) did not exist yet
    # (a fresh cgroup or process tree starts at 0), so a short first window reads over the whole span
    first_own = next((i for i, s in enumerate(ss) if s.get("own_cpu_s") is not None), None)
    if first_own:
        ss = [
            {**s, "own_cpu_s": 0.0} if i < first_own and s.get("own_cpu_s") is None else s
            for i, s in enumerate(ss)
        ]
    # one span for every host figure, so busy = own + other holds: the part of the window the samples
    # cover
    span_keys = ["cpu_busy_s", "cpu_total_s"] + (
        ["own_cpu_s"] if any(s.get("own_cpu_s") is not None for s in ss) else []
    )
    span_ts = [s["t"] for s in ss if all(s.get(k) is not None for k in span_keys)]
    if span_ts:
        t0, t1 = max(t0, span_ts[0]), min(t1, span_ts[-1])

    def rate(num: str, den: str | None = None, sub: str | None = None) -> float | None:
        keys = [k for k in (num, den, sub) if k]
        pts = [s for s in ss if all(s.get(k) is not None for k in keys)]
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
            vs = [float(s[key]) for s in pts]
            return _interp(ts, vs, b) - _interp(ts, vs, a)

        value = d(num) - (d(sub) if sub else 0.0)
        if den:
            total = d(den)
            return 100.0 * value / total if total > 0 else None
        return value / (b - a) if b > a else None

    psi = rate("psi_some_us")
    loads = [float(s["loadavg_1m"]) for s in inside if s.get("loadavg_1m") is not None]
    cpus = [s.get("cpus_online") for s in ss if s.get("cpus_online")]
    return {
        "samples": len(inside),
        "max_gap_s": _max_gap([t for t in ts_all if t0 <= t <= t1]),
        "cpus_online": cpus[-1] if cpus else None,
        "busy_cores_mean": rate("cpu_busy_s"),
        "own_cpu_cores_mean": rate("own_cpu_s"),
        "other_cpu_cores_mean": _nonneg(rate("cpu_busy_s", sub="own_cpu_s")),
        "host_window_s": round(t1 - t0, 3),
        "psi_some_pct": None if psi is None else psi / 1e4,  # µs per s -> % of wall time
        "steal_pct": rate("steal_s", den="cpu_total_s"),
        "loadavg_1m_max": max(loads) if loads else None,
    }


def window_summary(
    samples: Iterable[dict[str, Any]], t0: float, t1: float, tokens: float | None = None
) -> dict[str, Any]:
    """Summary of one window [t0, t1] (wall seconds) of Sampler samples, JSON-able:

        {"t0", "t1", "duration_s", "tokens",
         "energy_j", "energy_valid", "tok_per_j",             # all GPUs together; None unless every GPU is valid
         "gpus": {source_id: {
             "vendor", "samples", "period_s", "max_gap_s",
             "power_w_mean", "power_w_max",
             "energy_j", "energy_source" ("counter" | "integrated-average-power" | None),
             "energy_valid", "energy_invalid_reason" (ENERGY_REASONS | None),
             "energy_counter_j", "energy_counter_invalid_reason",
             "energy_integrated_j", "energy_integrated_invalid_reason",
             "tok_per_j",
             "sclk_mhz_min", "sclk_mhz_median", "sclk_mhz_max", "mclk_mhz_median",
             "temp_max_c": {"temp_edge_c": .., ...}, "busy_pct_mean", "mem_busy_pct_mean",
             "throttle_samples", "throttle_share": {reason: share}, "throttle_count": {reason: n},
             "procs_max", "pids", "suspended_samples", "error_samples",
             "cap_w", "cap_default_w", "not_stock": [str]}},
         "host": {"samples", "max_gap_s", "cpus_online", "busy_cores_mean", "own_cpu_cores_mean",
                  "other_cpu_cores_mean", "psi_some_pct", "steal_pct", "loadavg_1m_max"} | None}

    Energy: the hardware counter when it increases over the window, else the integral of the
    averaged power when that is valid, else None with `energy_invalid_reason`; never a number when
    invalid. tok_per_j = tokens / energy_j. Throttle reasons are named per vendor (NVML clock-event
    reasons; SMU14 bits for AMD) and include non-throttle ones (gpu-idle, temp-hotspot): `flags`
    decides which count. Stats (means, clocks, temps) are over samples inside [t0, t1].

    Pass the samples of the GPUs the run used (and the host): a GPU the benchmark did not touch
    would add its own energy and flags. Samples without `t`/`source` are ignored."""
    if not t1 > t0:
        raise ValueError(f"window_summary: t1 {t1} is not after t0 {t0}")
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
        "gpus": gpus,
        "host": host,
    }


# ---------------------------------------------------------------------------------------------
# Flags


def _others(g: dict[str, Any], own_pids: Collection[int] | None) -> bool:
    """A process other than the benchmark's on this GPU: a pid not in own_pids when pids are known;
    else (NVML counts only, or no own_pids) more than OWN_GPU_PROCS processes."""
    if own_pids is not None and g.get("pids"):
        return bool(set(g["pids"]) - set(own_pids))
    return (g.get("procs_max") or 0) > OWN_GPU_PROCS


def _throttling(g: dict[str, Any]) -> list[str]:
    n = g.get("throttle_samples") or 0
    if not n:
        return []
    wanted = (
        NVIDIA_THROTTLE_REASONS
        if g.get("vendor") == "nvidia"
        else set(AMD_SMU14_THROTTLE_BITS.values()) - AMD_THROTTLE_MASKED
    )
    out = []
    for reason, share in (g.get("throttle_share") or {}).items():
        count = (g.get("throttle_count") or {}).get(reason, round(share * n))
        if reason in wanted and share >= THROTTLE_MIN_SHARE and count >= THROTTLE_MIN_SAMPLES:
            out.append(reason)
    return out


def flags(
    summary: dict[str, Any], baseline: dict[str, Any] | None = None, own_pids: Collection[int] | None = None
) -> list[str]:
    """Flags for one window's summary (a list of names, in a stable order; empty: nothing seen).

    - `gpu-shared`: a process other than the benchmark's used a GPU in the window (host pids from
      KFD or NVML not in `own_pids`; without pids, more than OWN_GPU_PROCS processes), or the
      `baseline` (window_summary of an idle window just before the run, the benchmark not yet on
      the GPU) shows a GPU busy above BASELINE_BUSY_MAX_PCT or with a process not in own_pids.
    - `throttled:<reason>`: NVIDIA sw-power-cap, hw-slowdown, sw-thermal, hw-thermal,
      hw-power-brake; AMD any SMU14 bit but temp-hotspot (ppt0 = held at the power cap), in at least
      THROTTLE_MIN_SHARE of the window's samples and THROTTLE_MIN_SAMPLES of them.
    - `clock-idle`: busy mean >= CLOCK_IDLE_BUSY_MIN_PCT while the median gfx clock <= CLOCK_IDLE_MAX_MHZ.
    - `power-not-stock`: the GPU's power state in the window is not stock (not_stock_reasons).
    - `host-busy`: other processes' CPU > HOST_OTHER_CPU_CORES_MAX cores, or CPU pressure some >
      HOST_PSI_SOME_MAX_PCT, or steal > HOST_STEAL_MAX_PCT.
    - `energy-invalid:<reason>`: a GPU without a valid energy (reason code from ENERGY_REASONS)."""
    out: list[str] = []

    def add(flag: str) -> None:
        if flag not in out:
            out.append(flag)

    gpus = summary.get("gpus") or {}
    base_gpus = (baseline or {}).get("gpus") or {}
    for sid, g in gpus.items():
        b = base_gpus.get(sid)
        base_busy = b is not None and (b.get("busy_pct_mean") or 0) > BASELINE_BUSY_MAX_PCT
        base_procs = b is not None and bool(
            set(b.get("pids") or []) - set(own_pids or []) if b.get("pids") else (b.get("procs_max") or 0) > 0
        )
        if _others(g, own_pids) or base_busy or base_procs:
            add("gpu-shared")
    for g in gpus.values():
        for reason in _throttling(g):
            add(f"throttled:{reason}")
    for g in gpus.values():
        busy, clock = g.get("busy_pct_mean"), g.get("sclk_mhz_median")
        if (
            busy is not None
            and clock is not None
            and busy >= CLOCK_IDLE_BUSY_MIN_PCT
            and clock <= CLOCK_IDLE_MAX_MHZ
        ):
            add("clock-idle")
    if any(g.get("not_stock") for g in gpus.values()):
        add("power-not-stock")
    host = summary.get("host") or {}
    other, psi, steal = host.get("other_cpu_cores_mean"), host.get("psi_some_pct"), host.get("steal_pct")
    if (
        (other is not None and other > HOST_OTHER_CPU_CORES_MAX)
        or (psi is not None and psi > HOST_PSI_SOME_MAX_PCT)
        or (steal is not None and steal > HOST_STEAL_MAX_PCT)
    ):
        add("host-busy")
    for g in gpus.values():
        if not g.get("energy_valid"):
            add(f"energy-invalid:{g.get('energy_invalid_reason')}")
    return out
