"""The energy a record's telemetry claims (toolkit.analysis.telemetry.window_summary's shape: what
`toolkit bench` stores and `toolkit measure` writes as `toolkit_telemetry`), against physics and against
the rest of the block: the one rule `toolkit import` applies to a measure file's rows and the results
reader (records.contradiction) to stored records. The report's tok/J is tokens / energy_j of a block
that says energy_valid (analysis.facts.energy): an edited energy of 1e-6 J over 0.19 s at 150 W showed
2.6e9 tok/J."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolkit.core.stats import finite_number
from toolkit.runtimes.llama_bench.check import token_count

POWER_W = (1.0, 2000.0)
"""The physical range of one GPU board's draw, W: toolkit.analysis.energy.PLAUSIBLE["power_w"] (a
working board under 1 W is off or misread; none draws more than POWER_MAX_W, 2,000 W). The analysis
package sits above this one (it may not be imported here), so the range is stated again and
tests/test_breaker_round8_import.py holds the two equal."""

POWER_AGREE = 4.0
"""How far a GPU's energy over the window, as a mean power (energy_j / duration_s), may lie from the
mean of its power samples (power_w_mean), a factor either way. The samples are a sensor's running
average (NVML: 1 s), which lags the counter on a window shorter than that: on the H200 windows of
tests/data/h200-measure (0.19-10 s) the ratio was 0.89-2.32, 2.32 on a 0.19 s window of one sample."""

TIMED_SLACK_S = 0.05
"""How much shorter than its timed repetitions (the sum of samples_ns) a test's window may read: its
edges are when lines arrive through a pipe (toolkit.bench.observe), the repetitions llama-bench's own
clock; on every H200 window of tests/data the window was the longer."""

RATE_AGREE = 1.10
"""How much faster than the row's avg_ts its window's tokens / duration_s may read: never faster in
principle (the window holds the timed repetitions, and tokens over their summed time is at most the
mean of their rates), 10 % for the window's edges being when lines arrive through a pipe."""

SAME = 1e-6
"""Relative difference within which two figures the observer computed from one another agree
(duration_s = t1 - t0, energy_j = the sum of its GPUs', tok_per_j = tokens / energy_j)."""

REASON = "energy_contradicts_window"
"""The energy_invalid_reason (and `energy-invalid:` flag) of an imported block whose energy is refused."""


def _apart(a: float, b: float) -> bool:
    return abs(a - b) > SAME * max(abs(a), abs(b), 1.0)


def energy_contradiction(t: Mapping[str, Any], row: Mapping[str, Any]) -> str | None:
    """Why the valid energy a telemetry block `t` claims cannot be, None when it claims none
    (energy_valid not true) or agrees. `row`: the llama-bench fields measured in the window (n_prompt,
    n_gen, samples_ns / samples_ts), {} for a record of another runner (then the tokens and the timed
    time are not checked). Refused: an energy or a window that is no positive number; duration_s that
    is not t1 - t0; a mean power (energy / window) outside POWER_W per GPU board; a GPU whose energy
    is not valid, or GPUs whose energies do not sum to the window's; a GPU's power_w_mean outside
    POWER_W, above its power_w_max, or more than POWER_AGREE apart from its energy's mean power; tokens
    other than the test's tokens x its repetitions (the tokens the observer counts); tok_per_j other
    than tokens / energy_j; a window shorter than the timed repetitions it holds."""
    if t.get("energy_valid") is not True:
        return None
    energy, duration = finite_number(t.get("energy_j")), finite_number(t.get("duration_s"))
    if energy is None or energy <= 0:
        return f"energy_j is {str(t.get('energy_j'))[:24]}: a valid energy is a number of joules above 0"
    if duration is None or duration <= 0:
        return f"duration_s is {str(t.get('duration_s'))[:24]}: a window of no time holds no energy"
    t0, t1 = finite_number(t.get("t0")), finite_number(t.get("t1"))
    if t0 is not None and t1 is not None and _apart(t1 - t0, duration):
        return f"duration_s {duration:g} s is not t1 - t0 ({t1 - t0:g} s)"
    gpus = t.get("gpus")
    boards = {str(k): g for k, g in gpus.items()} if isinstance(gpus, dict) else {}
    if not boards:
        return "energy_valid is true with no GPU in gpus (a window's energy is its GPUs')"
    n = len(boards)
    lo, hi = POWER_W
    power = energy / duration
    if not n * lo <= power <= n * hi:
        return (
            f"energy_j {energy:g} J over duration_s {duration:g} s is a mean power of {power:.3g} W: "
            f"outside {n * lo:g}-{n * hi:g} W, what {n} GPU board(s) can draw ({lo:g}-{hi:g} W each)"
        )
    return _boards(boards, energy, duration) or _tokens(t, row, energy, duration)


def _boards(boards: dict[str, Any], energy: float, duration: float) -> str | None:
    """energy_contradiction's checks of each GPU's figures (`boards`: gpus by id)."""
    total = 0.0
    lo, hi = POWER_W
    for sid, g in boards.items():
        e = finite_number(g.get("energy_j")) if isinstance(g, dict) else None
        if not isinstance(g, dict) or g.get("energy_valid") is not True or e is None or e <= 0:
            return f"energy_valid is true, but GPU {sid[:40]}'s energy is not valid (a window's energy is all its GPUs')"
        total += e
        mean, peak = finite_number(g.get("power_w_mean")), finite_number(g.get("power_w_max"))
        if mean is None:
            continue
        if not lo <= mean <= hi:
            return f"gpus.{sid[:40]}.power_w_mean {mean:g} W: outside the {lo:g}-{hi:g} W a GPU board draws"
        if peak is not None and peak < mean * (1 - SAME):
            return f"gpus.{sid[:40]}.power_w_max {peak:g} W is below its power_w_mean {mean:g} W"
        drawn = e / duration
        if not mean / POWER_AGREE <= drawn <= mean * POWER_AGREE:
            return (
                f"gpus.{sid[:40]}.energy_j {e:g} J over {duration:g} s is a mean power of {drawn:.3g} W, its "
                f"power samples' mean {mean:g} W: more than {POWER_AGREE:g}x apart"
            )
    if _apart(total, energy):
        return f"energy_j {energy:g} J is not the sum of its GPUs' energy_j ({total:g} J)"
    return None


def _samples(v: Any) -> list[float] | None:
    """A list of positive finite numbers, else None."""
    if not isinstance(v, list) or not v:
        return None
    xs = [x for x in map(finite_number, v) if x is not None and x > 0]
    return xs if len(xs) == len(v) else None


def _tokens(t: Mapping[str, Any], row: Mapping[str, Any], energy: float, duration: float) -> str | None:
    """energy_contradiction's checks of the block's tokens and window against the row's test."""
    tokens = finite_number(t.get("tokens"))
    if tokens is None and t.get("tokens") is not None:
        return f"tokens is {str(t.get('tokens'))[:24]}: not a number"
    per = (token_count(row.get("n_prompt")) or 0) + (token_count(row.get("n_gen")) or 0)
    ns = _samples(row.get("samples_ns"))
    reps = len(ns or _samples(row.get("samples_ts")) or [])
    if tokens is not None and per:
        if reps and tokens != per * reps:
            return (
                f"tokens {tokens:g}: the test is {per} tokens x {reps} repetitions = {per * reps} (the "
                "tokens its t/s counts)"
            )
        if not reps and (tokens <= 0 or tokens % per):
            return f"tokens {tokens:g}: not a whole number of the test's {per} tokens"
    ratio = finite_number(t.get("tok_per_j"))
    if ratio is not None and tokens is not None and _apart(ratio, tokens / energy):
        return f"tok_per_j {ratio:g} is not tokens / energy_j ({tokens / energy:g})"
    timed = sum(ns) * 1e-9 if ns else None
    if timed is not None and duration < timed * 0.99 - TIMED_SLACK_S:
        return (
            f"duration_s {duration:g} s is shorter than the timed repetitions it holds ({timed:g} s, the sum "
            "of samples_ns)"
        )
    avg = finite_number(row.get("avg_ts"))
    if tokens is not None and avg and tokens / duration > avg * RATE_AGREE:
        return (
            f"tokens {tokens:g} in duration_s {duration:g} s is {tokens / duration:.4g} tok/s: faster than the "
            f"row's {avg:g} t/s (a window holds its tokens' timed time and more)"
        )
    return None


def energy_refused(t: Mapping[str, Any], why: str) -> dict[str, Any]:
    """Block `t` with its energy left out for `why` (energy_contradiction's text): no energy, not valid,
    every GPU's energy invalid for REASON, as analysis.telemetry.without_energy leaves a window whose
    energy is not the test's; `energy_refused` says why. The other figures stay."""
    gpus = t.get("gpus")
    if isinstance(gpus, dict):
        gpus = {
            sid: {
                **g,
                "energy_j": None,
                "energy_valid": False,
                "energy_invalid_reason": REASON,
                "tok_per_j": None,
            }
            if isinstance(g, dict)
            else g
            for sid, g in gpus.items()
        }
    return {
        **t,
        "energy_j": None,
        "energy_valid": False,
        "tok_per_j": None,
        "gpus": gpus,
        "energy_refused": why,
    }
