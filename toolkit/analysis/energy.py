"""Energy over a benchmark window from a GPU's samples: a hardware energy counter, or the integral of
an averaged power reading, each valid only under stated rules (a reason code when not). Pure
functions; window_summary (toolkit/bench/observe.py) calls them per GPU. Section numbers (§) refer to
shared/reference/gpu-telemetry.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from toolkit.results.telemetry_check import (  # the energy rules: stated once, below the analysis
    AMD_POWER_AVG_MIN_WINDOW_S,
    COUNTER_MIN_STEPS,
    NVML_POWER_AVG_MIN_WINDOW_S,
    POWER_W,
    choose_energy,
)
from toolkit.results.telemetry_flags import FIGURE_RANGES

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
    "window_short_for_counter_step",
    "counter_implausible_step",
    "counter_disagrees_with_power",
    "no_test_edges",
    "window_holds_untimed_work",
)

POWER_MAX_W = POWER_W[1]
"""No single GPU board draws more (results.telemetry_check.POWER_W: the largest, MI355X, is rated
1,400 W; B200 1,000 W; R9700 300 W); a counter step implying more is a glitch, not energy."""

COUNTER_EDGE_S = 0.1
"""How far a window edge may lie from the nearest energy counter read (or the sampling period, when
longer): the counter is interpolated at each edge, so its error is this distance times the change in
power. Every 10 Hz tick read the counter before; NVML's is now read at each edge (Sampler.sample_once)
and once a second, so an edge the sampler was not told of falls back to the integrated power."""


def interp(ts: Sequence[float], vs: Sequence[float], t: float) -> float:
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


def bracket(ts: Sequence[float], t0: float, t1: float) -> tuple[int, int] | None:
    """Indices of the last sample at or before t0 and the first at or after t1; None when the
    samples do not bracket both edges."""
    if not ts or ts[0] > t0 or ts[-1] < t1:
        return None
    i0 = max(i for i, t in enumerate(ts) if t <= t0)
    i1 = min(i for i, t in enumerate(ts) if t >= t1)
    return i0, i1


def sample_period(ts: Sequence[float]) -> float:
    diffs = [b - a for a, b in pairwise(ts) if b > a]
    return statistics.median(diffs) if diffs else 0.0


def gap_limit(period_s: float) -> float:
    return max(MAX_SAMPLE_GAP_S, MAX_SAMPLE_GAP_PERIODS * period_s)


def max_gap(ts: Sequence[float]) -> float:
    return max((b - a for a, b in pairwise(ts)), default=0.0)


def _span(ts: Sequence[float], t0: float, t1: float, gap_limit: float) -> tuple[int, int] | str:
    """The indices of the samples bracketing [t0, t1] (bracket), or the reason they cannot give energy:
    fewer than 2, not bracketing both edges, or a gap above `gap_limit` s between them."""
    if len(ts) < 2:
        return "insufficient_power_samples"
    br = bracket(ts, t0, t1)
    if br is None:
        return "window_not_bracketed"
    if max_gap(ts[br[0] : br[1] + 1]) > gap_limit:
        return "sampling_gap_exceeded"
    return br


def counter_energy(
    pts: list[tuple[float, float, float | None]],
    t0: float,
    t1: float,
    gap_limit: float,
    edge_limit: float = COUNTER_EDGE_S,
    step_s: float | None = None,
) -> tuple[float | None, str | None]:
    """Energy from a hardware counter (J) between t0 and t1, or (None, reason).
    Rules: the hardware counter is preferred (§4.1 InferenceX cross-checks with amd-smi's
    accumulator; §5 NVML total energy is "the reference for energy"); samples must bracket both
    edges and the counter is interpolated linearly at each (InferenceX, §4.1); an AMD
    energy_accumulator counts only if it increases between the reads (it was 0 in every public
    RDNA3/RDNA4 dump, §1.3); a drop is a u32 wrap at 2^32 × 2^-16 J when the sample gives
    `energy_wrap_j` (AMD, §1.3), else a counter reset (NVML: driver reload); each edge within
    `edge_limit` s of a counter read (the interpolation's reach: COUNTER_EDGE_S); no step implying more
    than POWER_MAX_W; a window of at least COUNTER_MIN_STEPS counter steps (`step_s`, measured)."""
    span = _span([p[0] for p in pts], t0, t1, gap_limit)
    if isinstance(span, str):
        return None, span
    seg = pts[span[0] : span[1] + 1]
    near0 = min(abs(t0 - p[0]) for p in seg[:2])
    near1 = min(abs(t1 - p[0]) for p in seg[-2:])
    if max(near0, near1) > edge_limit:
        return None, "counter_not_read_at_edge"
    cum = [0.0]
    for (ta, a, _), (tb, b, wrap) in pairwise(seg):
        d = b - a
        if d < 0:
            if not wrap:
                return None, "counter_reset"
            d += wrap
        if d > POWER_MAX_W * max(tb - ta, 1e-3):  # a jump (2^31 counts, a wrap that was a reset)
            return None, "counter_implausible_step"
        cum.append(cum[-1] + d)
    sts = [p[0] for p in seg]
    energy = interp(sts, cum, t1) - interp(sts, cum, t0)
    if energy <= 0:
        return None, "counter_not_increasing"
    if step_s and t1 - t0 < COUNTER_MIN_STEPS * step_s:
        return None, "window_short_for_counter_step"
    return energy, None


def integrated_energy(
    pts: list[tuple[float, float]], t0: float, t1: float, gap_limit: float, min_window_s: float
) -> tuple[float | None, str | None]:
    """Energy (J) by trapezoids over an averaged power reading, edges interpolated linearly
    (InferenceX aggregate_power.py, §4.1), or (None, reason). Valid only when the samples bracket
    both edges, no gap exceeds the limit, there are >= 2 samples (§4.1), and the window is at least
    `min_window_s`: several times the sensor's averaging period (§4.3: a 1 s average smears a short
    burst; NVML_POWER_AVG_MIN_WINDOW_S, AMD_POWER_AVG_MIN_WINDOW_S)."""
    ts = [p[0] for p in pts]
    span = _span(ts, t0, t1, gap_limit)
    if isinstance(span, str):
        return None, span
    i0, i1 = span
    if t1 - t0 < min_window_s:
        return None, "window_short_for_sensor_average"
    ps = [p[1] for p in pts]
    xs = [t0] + [t for t in ts[i0 : i1 + 1] if t0 < t < t1] + [t1]
    ys = [interp(ts, ps, t0)] + [p for t, p in pts[i0 : i1 + 1] if t0 < t < t1] + [interp(ts, ps, t1)]
    energy = sum((xs[k + 1] - xs[k]) * (ys[k + 1] + ys[k]) / 2 for k in range(len(xs) - 1))
    return energy, None


PLAUSIBLE = FIGURE_RANGES
"""Physical range of each GPU sensor value (results.telemetry_flags.FIGURE_RANGES, stated there once,
below this package, for the readers of stored blocks too); a value outside it is dropped from the
window's figures and counted (`implausible`), and the window is flagged."""


def plausible(sample: dict, bad: dict[str, int] | None = None) -> dict:
    """`sample` without the sensor values outside PLAUSIBLE (set to None); each dropped key counted in
    `bad`. A value that is not a finite number is left to the readers (they give None)."""
    out = sample
    for key, v in sample.items():
        rng = PLAUSIBLE.get("temp_c" if key.startswith("temp_") and key.endswith("_c") else key)
        if rng is None or not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        if not rng[0] <= v <= rng[1]:
            if out is sample:
                out = dict(sample)
            out[key] = None
            if bad is not None:
                bad[key] = bad.get(key, 0) + 1
    return out


def window_energy(
    ss: list[dict[str, Any]], vendor: str | None, t0: float, t1: float, period: float, tokens: float | None
) -> dict[str, Any]:
    """A GPU's energy figures over [t0, t1] from its samples `ss` (sorted, implausible values already
    dropped; `period`: their median spacing, s): energy_j, energy_source, energy_valid,
    energy_invalid_reason, the counter's and the integral's own result and reason, the counter's
    measured step (energy_step_s, s), and tok_per_j (tokens / J)."""
    gap_lim = gap_limit(period)
    counter_pts = [
        (s["t"], float(s["energy_j"]), s.get("energy_wrap_j")) for s in ss if s.get("energy_j") is not None
    ]
    power_pts = [(s["t"], float(s["power_w"])) for s in ss if s.get("power_w") is not None]
    step = next((s["energy_step_s"] for s in reversed(ss) if s.get("energy_step_s")), None)
    min_window = NVML_POWER_AVG_MIN_WINDOW_S if vendor == "nvidia" else AMD_POWER_AVG_MIN_WINDOW_S
    counter = (
        counter_energy(counter_pts, t0, t1, gap_lim, max(COUNTER_EDGE_S, period), step)
        if counter_pts
        else (None, "no_power_source")
    )
    integ = (
        integrated_energy(power_pts, t0, t1, gap_lim, min_window) if power_pts else (None, "no_power_source")
    )
    energy, source, reason = choose_energy(counter, integ, bool(counter_pts))
    return {
        "energy_j": energy,
        "energy_source": source,
        "energy_valid": energy is not None,
        "energy_invalid_reason": reason,
        "energy_counter_j": counter[0],
        "energy_counter_invalid_reason": counter[1],
        "energy_integrated_j": integ[0],
        "energy_integrated_invalid_reason": integ[1],
        "energy_step_s": step,
        "tok_per_j": tokens / energy if tokens and energy else None,
    }
