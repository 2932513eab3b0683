"""A telemetry window's sampling figures held to its own length (telemetry_flags.figures_problem reads
this, so an import leaves such a block out and a stored one is skipped, as round 27's counts are).

window_summary (bench/observe.py) reads each GPU's figures from `near`, the samples within
WINDOW_MARGIN_S of either edge of the window [t0, t1] (a test's, a measured command's or a served
phase's window), so every figure of sampling lies in a span of at most
duration_s + 2 x WINDOW_MARGIN_S seconds:

- `period_s` (energy.sample_period): the median of the positive gaps between `near`'s samples, 0 with
  none: a finite number from 0 to that span;
- `max_gap_s` (energy.max_gap over the samples bracketing the window, or those inside): 0 to that span;
- `samples` (those inside [t0, t1]): at least half of `near`'s positive gaps are >= the median
  (`period_s`) and all fit in the span, so there are at most 2 x span / period_s of them and at most one
  sample more than gaps: samples <= 2 x span / period_s + 1 (period_s 0: at most 1 sample).
  The sampler never catches missed ticks up (host/telemetry/sampler.py _run), so a real window is far
  below this; 100,000 samples in 0.19 s at a 0.1-s period is not a window's.
- `procs_max` (the most GPU processes of one sample) a whole number >= 0, at least 1 where a sample
  listed a pid (`pids` non-empty); `active_pids` among `pids` (both unions of the same samples' lists).
- `implausible` counts (readings dropped as outside the sensors' range): a GPU's at most its `samples`,
  the host's (rates read once over the window) at most 1 each; held to its samples or 1.
- the host's `loadavg_1m_max` (the largest /proc/loadavg 1-minute figure inside the window: a mean of
  runnable task counts) >= 0 and finite; its `max_gap_s` from 0 to the span of its read, which may be
  widened back to HOST_MIN_WINDOW_S (bench/observe.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from toolkit.core.stats import finite_number

WINDOW_MARGIN_S = 15.0
"""Seconds of samples on each side of a window its summary reads (the samples bracketing its edges,
the power state read every 5 s before it): enough for every rule, and bounded whatever the run's length.
The observer's (bench/observe.py) and `toolkit measure`'s windows take it from here, the bounds below
hold to it."""

HOST_MIN_WINDOW_S = 1.0
"""Host load is read over at least this many seconds ending at the window's end: /proc/stat counts in
USER_HZ ticks (10 ms), so a rate over a window of a few ms is noise (a 20-ms decode test read -1.97
"other" cores); contention is a slow condition, and the summary says which span it read (host_window_s).
bench/observe.py's window_summary takes it from here."""


def outside(v: Any, lo: float, hi: float) -> bool:
    """`v` is stated (not None) and no finite number within [lo, hi]."""
    n = finite_number(v)
    return v is not None and (n is None or not lo <= n <= hi)


def _hashable(v: Any) -> Any:
    """`v` as a set member: itself where it hashes (a pid, a text), else its repr (a list or object a
    hand put in a pid list); equal values stay equal as `==` has them (1, 1.0 and True alike)."""
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


def _implausible_problem(counts: Any, most: float) -> str | None:
    """Why `implausible` (window_summary: {sensor key: readings of it dropped as outside PLAUSIBLE}) cannot
    be a window's, None if it can: each count a whole number from 0 to `most`, the readings that window
    read (a GPU's: each of its `samples` inside the window drops a key at most once, energy.plausible; the
    host's: each derived rate, psi_some_pct and steal_pct, once (bench/observe._in_range), so at most
    its samples or 1)."""
    for key, c in counts.items() if isinstance(counts, Mapping) else ():
        n = finite_number(c)
        if n is None or n < 0 or not n.is_integer() or n > most:
            return (
                f"implausible.{str(key)[:40]} is {str(c)[:24]}: a count of readings dropped, at most the "
                f"{most:g} it read"
            )
    return None


def _gpu_problem(g: Mapping[str, Any], span: float) -> str | None:
    """Why one GPU summary's sampling figures cannot be its window's (see the module), None if they can;
    `span`: seconds its `near` samples can cover."""
    for key in ("period_s", "max_gap_s"):
        if outside(g.get(key), 0.0, span):
            return f"{key} is {str(g.get(key))[:24]}: outside the 0-{span:.4g} s its window's samples span"
    n, period = finite_number(g.get("samples")), finite_number(g.get("period_s"))  # n: inside the window
    if n is not None and period is not None:
        most = 2 * span / period + 1 if period > 0 else 1.0
        if n > most:
            return (
                f"samples {n:g} in a window of {span - 2 * WINDOW_MARGIN_S:.4g} s at a period of {period:g} s: "
                f"more than the {most:.0f} its samples' span allows"
            )
    if n is not None and (why := _implausible_problem(g.get("implausible"), n)):
        return why
    pm = g.get("procs_max")
    if pm is not None:
        k = finite_number(pm)
        if k is None or k < 0 or not k.is_integer():
            return f"procs_max is {str(pm)[:24]}: a count of processes is a whole number >= 0"
        pids = g.get("pids")
        if isinstance(pids, list) and pids and k < 1:
            return f"procs_max is {k:g} beside {len(pids)} pid(s) seen: a sample that lists a pid holds one"
    pids, active = g.get("pids"), g.get("active_pids")
    if isinstance(pids, list) and isinstance(active, list) and pids:
        seen = {_hashable(p) for p in pids}  # a set: a stored list of 200,000 pids read in linear time
        extra = [p for p in active if _hashable(p) not in seen]
        if extra:
            return f"active_pids holds {str(extra[0])[:24]}, not among its pids: both are of the same samples"
    return None


def window_problem(t: Mapping[str, Any]) -> str | None:
    """Why telemetry block `t`'s sampling figures (GPU `samples`, `period_s`, `max_gap_s`, `procs_max`,
    `active_pids`; the host's `loadavg_1m_max`, `max_gap_s`) cannot be of a window of its `duration_s`
    (seconds), None where they can or the length is not stated."""
    d = finite_number(t.get("duration_s"))
    if d is None or d < 0:
        return None  # figures_problem's "a window of no time" says it
    span = d + 2 * WINDOW_MARGIN_S
    gpus = t.get("gpus")
    for sid, g in gpus.items() if isinstance(gpus, Mapping) else ():
        if isinstance(g, Mapping) and (why := _gpu_problem(g, span)):
            return f"gpus.{str(sid)[:40]}.{why}"
    host = t.get("host")
    if isinstance(host, Mapping):
        if outside(host.get("loadavg_1m_max"), 0.0, math.inf):
            return f"host.loadavg_1m_max is {str(host.get('loadavg_1m_max'))[:24]}: a load average is >= 0"
        hn = finite_number(host.get("samples"))
        if why := _implausible_problem(host.get("implausible"), max(1.0, hn if hn is not None else 1.0)):
            return f"host.{why}"
        hspan = max(d, HOST_MIN_WINDOW_S) + 2 * WINDOW_MARGIN_S
        if outside(host.get("max_gap_s"), 0.0, hspan):
            return f"host.max_gap_s is {str(host.get('max_gap_s'))[:24]}: outside the 0-{hspan:.4g} s it can span"
    return None
