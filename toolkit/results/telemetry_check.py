"""The energy a record's telemetry claims (toolkit.bench.observe.window_summary's shape: what
`toolkit bench` stores and `toolkit measure` writes as `toolkit_telemetry`), against physics and against
the rest of the block: the one rule `toolkit import` applies to a measure file's rows and the results
reader (record_check.contradiction) to stored records. The report's tok/J is tokens / energy_j of a block
that says energy_valid (analysis.facts.energy): an edited energy of 1e-6 J over 0.19 s at 150 W showed
2.6e9 tok/J. Also what `toolkit import` keeps of a row's block and flags (measured_claims): a window
that cannot be the row's (window_contradiction) is left out with its flags, and a flag stays only
where its block shows what raised it (flag_unsupported)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from toolkit.core.gpuspecs import AMD, NVIDIA, spec_by_name, split_gpu_info
from toolkit.core.stats import finite_number
from toolkit.runtimes.llama_bench.check import (
    FUTURE_SLACK_S,
    UNTIMED_SHARE_MAX,
    UNTIMED_SLACK_S,
    holds_untimed_work,
    parse_test_time,
    positive_samples,
    timed_s,
    token_count,
)

POWER_W = (1.0, 2000.0)
"""The physical range of one GPU board's draw, W (a working board under 1 W is off or misread; none
draws more than 2,000 W), stated once: the sampler's range (telemetry_flags.FIGURE_RANGES, which
analysis.energy reads as PLAUSIBLE and POWER_MAX_W) and the stored blocks' alike."""

POWER_AGREE = 4.0
"""How far a GPU's energy over the window, as a mean power (energy_j / duration_s), may lie from the
mean of its power samples (power_w_mean), a factor either way. The samples are a sensor's running
average (NVML: 1 s), which lags the counter on a window shorter than that: on the H200 windows of
tests/data/h200-measure (0.19-10 s) the ratio was 0.89-2.32, 2.32 on a 0.19 s window of one sample."""

CAP_SLACK = 1.25
"""How far above its own power cap (the block's cap_w, or cap_default_w where that is higher: a cap
lowered during the window) a GPU's mean power over a window (energy_j / duration_s, or power_w_mean)
may read. A board cannot draw more than its enforced cap for long: NVML enforces the power limit on a
~1 s running average and AMD's PPT its averaged socket power, so only excursions shorter than the
controller's reaction lift a window's mean above it; the contended H200 rows of tests/data/h200-measure,
held at the cap (throttled:sw-power-cap), read 675-691 W against 700 W. A quarter above leaves room for
those excursions on a short window; a block claiming 1,900 W on a 700 W cap (2.7x) is refused."""

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

# The rules under which toolkit.analysis.energy gives a window an energy, stated here (below it) so that
# energy_rule, this check of a stored block, and the analysis read one set.
# NVML's power reading is a 1 s average on Ampere and newer (§4.3, NVML docs). Integrating it is
# trusted on windows >= 1.5 s: on the H200 case (shared/cases/h200-telemetry, 50 ms sampling) the
# integral agreed with the hardware counter within ±3 % on every steady window >= 1.5 s (1.50 s
# -1.7 %, 1.89 s -2.5 %, 2.11 s +0.5 %; contended run 1.67-13.9 s within ±1.3 %) and was off by
# -44 % .. +6 % on windows of 0.22-0.91 s. (The one window >= 1.5 s outside ±3 %, tg128 ub2048 at
# +14 %, runs to process exit and holds the teardown: not steady load.) On the lent H200 (this
# project, 2026-12-02, a 7.7 GB qwen3moe F16, llama-bench 0c1e57098 CUDA, an independent NVML poller
# at ~25 ms) a pp4096 window of 1.98-1.99 s right after the warm-up run read -5.1 % and -6.8 %: the
# integral is the fallback where the counter cannot be used; an NVML window of COUNTER_MIN_STEPS
# counter steps or more (1.5 s there) takes the counter, which read -2.1..+3.3 % on the same runs.
NVML_POWER_AVG_MIN_WINDOW_S = 1.5
# amdgpu power1_average: firmware time constant undocumented (§1.2); until measured, windows must
# be >= 10 s (§4.4: >= 10·τ, 10 s while τ is unknown).
AMD_POWER_AVG_MIN_WINDOW_S = 10.0

COUNTER_MIN_STEPS = 15
"""A counter that advances in steps (NVML's total-energy counter: 100-101 ms measured on the lent H200)
gives energy only for windows of at least this many steps: each edge read can be up to one step
stale, so the error is at most 2 steps in 15 (13 %) and about one step in 15 on average. Measured on
the H200 (2026-12-02, against an independent NVML poller): windows of 28-62 steps within -2.1..+3.3 %,
and a 2.7-step pp512 window is refused. The step is measured on each GPU before the run
(`energy_step_s` in its samples: host.telemetry.update_period); unmeasured, no window is refused
for it."""

REASON = "energy_contradicts_window"
"""The energy_invalid_reason (and `energy-invalid:` flag) of an imported block whose energy is refused."""


def _apart(a: float, b: float) -> bool:
    return abs(a - b) > SAME * max(abs(a), abs(b), 1.0)


ENERGY_AGREE_TOL = 0.15
"""Where both the counter and the integrated power give a valid energy, they must agree within this
share of the integrated figure, else the window's energy is `counter_disagrees_with_power`. Our
rule: twice the widest disagreement seen on the H200 case's steady windows >= 1.5 s (-6.8 %)."""


def choose_energy(
    counter: tuple[float | None, str | None], integrated: tuple[float | None, str | None], has_counter: bool
) -> tuple[float | None, str | None, str | None]:
    """(energy J, source, reason) of a GPU's window from its counter and integrated-power results: the
    counter when valid and, where the integral is valid too, within ENERGY_AGREE_TOL of it (else
    `counter_disagrees_with_power`); the integral when only it is valid; else the counter's reason
    (when the GPU has a counter and its reason is not merely "not increasing") or the integral's.
    The one choice: analysis.energy.window_energy makes a window's by it, and energy_contradiction
    holds a stored GPU's energy_j and energy_source to it (_source_problem)."""
    (cj, cr), (ij, ir) = counter, integrated
    if cj is not None:
        if ij is not None and abs(cj - ij) > ENERGY_AGREE_TOL * ij:
            return None, None, "counter_disagrees_with_power"
        return cj, "counter", None
    if ij is not None:
        return ij, "integrated-average-power", None
    if has_counter and cr != "counter_not_increasing":
        return None, None, cr
    return None, None, ir


def _source_problem(sid: str, g: Mapping[str, Any], e: float) -> str | None:
    """Why GPU `sid`'s valid energy `e` (its energy_j, J) and energy_source are not what choose_energy gives
    over the two results its own block states (energy_counter_j and energy_integrated_j, each with its invalid
    reason), None where they are or it states neither (an older writer): window_summary stores the choice
    beside both."""
    if "energy_counter_j" not in g or "energy_integrated_j" not in g:
        return None
    cj, ij = finite_number(g.get("energy_counter_j")), finite_number(g.get("energy_integrated_j"))
    cr, ir = g.get("energy_counter_invalid_reason"), g.get("energy_integrated_invalid_reason")
    got, source, why = choose_energy((cj, str(cr)), (ij, str(ir)), True)
    said = str(g.get("energy_source"))[:32]
    if got is None:
        return (
            f"gpus.{sid[:40]}: energy_valid is true, but its own results give none ({why}: counter "
            f"{cj if cj is not None else str(cr)[:40]}, integrated {ij if ij is not None else str(ir)[:40]})"
        )
    if source != g.get("energy_source") or _apart(got, e):
        return (
            f"gpus.{sid[:40]}: energy_j {e:g} J from {said!r} is not its own results' choice: {got:g} J from "
            f"{source!r} (counter {cj}, integrated {ij})"
        )
    return None


def energy_contradiction(t: Mapping[str, Any], row: Mapping[str, Any]) -> str | None:
    """Why the valid energy a telemetry block `t` claims cannot be, None when it claims none
    (energy_valid not true) or agrees. `row`: the llama-bench fields measured in the window (n_prompt,
    n_gen, samples_ns / samples_ts), {} for a record of another runner (then the tokens and the timed
    time are not checked). Refused: an energy or a window that is no positive number; duration_s that
    is not t1 - t0; a mean power (energy / window) outside POWER_W per GPU board; a GPU whose energy
    is not valid, or GPUs whose energies do not sum to the window's; a GPU's power_w_mean outside
    POWER_W, above its power_w_max, or more than POWER_AGREE apart from its energy's mean power; a GPU's
    mean power (its energy's, or power_w_mean) above CAP_SLACK x the power cap its block names or the
    rated power of the board the row's gpu_info names (board_power_w); tokens
    other than the test's tokens x its repetitions (the tokens the observer counts); tok_per_j other
    than tokens / energy_j; a window shorter than the timed repetitions it holds; a GPU's energy_j and
    energy_source other than its own counter's and integral's results give (_source_problem)."""
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
    board = board_power_w(row.get("gpu_info"))
    if why := _boards(boards, energy, duration, board) or _tokens(t, row, energy, duration):
        return why
    for sid, g in boards.items():  # each a dict with a valid energy (_boards): its source's own figures
        if why := _source_problem(sid, g, float(g["energy_j"])):
            return why
    return None


def _boards(boards: dict[str, Any], energy: float, duration: float, board: float | None) -> str | None:
    """energy_contradiction's checks of each GPU's figures (`boards`: gpus by id; `board`: the rated
    board power of the GPUs the row names, W, board_power_w)."""
    total = 0.0
    lo, hi = POWER_W
    for sid, g in boards.items():
        e = finite_number(g.get("energy_j")) if isinstance(g, dict) else None
        if not isinstance(g, dict) or g.get("energy_valid") is not True or e is None or e <= 0:
            return f"energy_valid is true, but GPU {sid[:40]}'s energy is not valid (a window's energy is all its GPUs')"
        total += e
        mean, peak = finite_number(g.get("power_w_mean")), finite_number(g.get("power_w_max"))
        drawn = e / duration
        if mean is not None and not lo <= mean <= hi:
            return f"gpus.{sid[:40]}.power_w_mean {mean:g} W: outside the {lo:g}-{hi:g} W a GPU board draws"
        if mean is not None and peak is not None and peak < mean * (1 - SAME):
            return f"gpus.{sid[:40]}.power_w_max {peak:g} W is below its power_w_mean {mean:g} W"
        if mean is not None and not mean / POWER_AGREE <= drawn <= mean * POWER_AGREE:
            return (
                f"gpus.{sid[:40]}.energy_j {e:g} J over {duration:g} s is a mean power of {drawn:.3g} W, its "
                f"power samples' mean {mean:g} W: more than {POWER_AGREE:g}x apart"
            )
        if why := _over_cap(sid, g, drawn, mean, board):
            return why
    if _apart(total, energy):
        return f"energy_j {energy:g} J is not the sum of its GPUs' energy_j ({total:g} J)"
    return None


def board_power_w(gpu_info: Any) -> float | None:
    """The highest rated board power (core.gpuspecs GpuSpec.board_power_w, or its board_power_max_w where
    partner boards are set above it) of the GPUs llama-bench's `gpu_info` names (its descriptions joined by ",
    "), W; None where it names none, or any the table knows no board power of (then only POWER_W holds a
    block)."""
    if not isinstance(gpu_info, str) or not gpu_info.strip():
        return None
    specs = [spec_by_name(d) for d in split_gpu_info(gpu_info)]
    powers = [s.board_power_max_w or s.board_power_w for s in specs if s is not None and s.board_power_w]
    return max(powers) if specs and len(powers) == len(specs) else None


SAMPLER_VENDORS = {AMD: "amd", NVIDIA: "nvidia"}
"""The `vendor` the telemetry readers (host.telemetry: amd, nvidia) write of a GPU of each PCI vendor id."""


def board_vendors(gpu_info: Any) -> set[str] | None:
    """The sampler's vendor names (SAMPLER_VENDORS) of the GPUs llama-bench's `gpu_info` names; None
    where it names none or any that core.gpuspecs does not know (a generic `AMD Radeon Graphics`, a
    software device), or one of a vendor no reader samples."""
    if not isinstance(gpu_info, str) or not gpu_info.strip():
        return None
    specs = [spec_by_name(d) for d in split_gpu_info(gpu_info)]
    vendors = {SAMPLER_VENDORS.get(s.vendor) if s is not None else None for s in specs}
    return None if not specs or None in vendors else {v for v in vendors if v}


def _over_cap(
    sid: str, g: Mapping[str, Any], drawn: float, mean: float | None, board: float | None = None
) -> str | None:
    """Why GPU `sid`'s mean power over the window (`drawn`: its energy / duration; `mean`: its
    power_w_mean) cannot be: above CAP_SLACK x the power cap its own block names, or x the rated power
    of the board the row names (`board`: board_power_w; a block naming a 10 kW cap, or none, is held to
    the H200's 700 W). Neither known: not checked here, POWER_W still is."""
    caps = [c for c in (finite_number(g.get("cap_w")), finite_number(g.get("cap_default_w"))) if c and c > 0]
    limits = [(max(caps), "its own power cap", "cap_w")] if caps else []
    if board:
        limits.append((board, "the rated power of the board its row names", "gpu_info, core.gpuspecs"))
    for limit, whose, where in limits:
        for what, w in (("its energy_j over duration_s", drawn), ("power_w_mean", mean)):
            if w is not None and w > limit * CAP_SLACK:
                return (
                    f"gpus.{sid[:40]}: {what} is a mean power of {w:.4g} W, above {CAP_SLACK:g}x {whose} "
                    f"{limit:g} W ({where}): a board draws no more than its enforced cap over a window"
                )
    return None


def _tokens(t: Mapping[str, Any], row: Mapping[str, Any], energy: float, duration: float) -> str | None:
    """energy_contradiction's checks of the block's tokens and window against the row's test."""
    tokens = finite_number(t.get("tokens"))
    if tokens is None and t.get("tokens") is not None:
        return f"tokens is {str(t.get('tokens'))[:24]}: not a number"
    per = (token_count(row.get("n_prompt")) or 0) + (token_count(row.get("n_gen")) or 0)
    ns = positive_samples(row.get("samples_ns"))
    reps = len(ns or positive_samples(row.get("samples_ts")) or [])
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


def energy_rule(t: Mapping[str, Any], row: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason code of energy.ENERGY_REASONS, why) where the valid energy block `t` claims is one
    toolkit.analysis.energy would not give its window (the rules restated above NVML_POWER_AVG_MIN_WINDOW_S),
    None where it claims none or its figures meet them or do not say: a window without the test's edges; a
    GPU's integrated averaged power over a window shorter than its sensor's average allows, or its counter
    over fewer than COUNTER_MIN_STEPS of its measured steps; a window holding untimed work beyond the row's
    timed repetitions (`row`'s samples_ns, ns). Not a contradiction (a block written before a rule
    existed): its energy is not the test's, its speed stays (import: energy_refused; the report: no
    tok/J, the reason a flag)."""
    duration = finite_number(t.get("duration_s"))
    gpus = t.get("gpus")
    if t.get("energy_valid") is not True or duration is None or duration <= 0 or not isinstance(gpus, dict):
        return None
    if t.get("window_from") == "previous-row":
        return "no_test_edges", (
            "window_from previous-row: a window without the test's edges (no --progress line) holds other "
            "tests' work, and no energy is the test's"
        )
    for sid, g in ((str(k), v) for k, v in gpus.items() if isinstance(v, dict)):
        source, vendor = g.get("energy_source"), g.get("vendor")
        least = NVML_POWER_AVG_MIN_WINDOW_S if vendor == "nvidia" else AMD_POWER_AVG_MIN_WINDOW_S
        if source == "integrated-average-power" and duration < least:
            return "window_short_for_sensor_average", (
                f"gpus.{sid[:40]}: integrated averaged power over {duration:g} s, shorter than the {least:g} s "
                "its sensor's average needs"
            )
        step = finite_number(g.get("energy_step_s"))
        if source == "counter" and step and step > 0 and duration < COUNTER_MIN_STEPS * step:
            return "window_short_for_counter_step", (
                f"gpus.{sid[:40]}: its energy counter over {duration:g} s is {duration / step:.3g} of its "
                f"measured {step:g}-s steps, fewer than {COUNTER_MIN_STEPS}"
            )
    if holds_untimed_work(duration, row.get("samples_ns")):
        timed = timed_s(row.get("samples_ns"))
        return "window_holds_untimed_work", (
            f"duration_s {duration:g} s is longer than the {timed:g} s of timed repetitions it holds "
            f"(samples_ns) by more than {UNTIMED_SHARE_MAX:.0%} + {UNTIMED_SLACK_S:g} s: its energy is not the test's"
        )
    return None


def without_energy(t: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """Telemetry block `t` (window_summary's shape) with no energy and every GPU's energy invalid for
    `reason`: the observer's window whose edges are not the test's (no_test_edges, or one that
    holds_untimed_work), a stored block whose energy is refused (energy_refused). The other figures stay."""
    gpus = t.get("gpus")
    if isinstance(gpus, dict):
        gpus = {
            sid: {
                **g,
                "energy_j": None,
                "energy_valid": False,
                "energy_invalid_reason": reason,
                "tok_per_j": None,
            }
            if isinstance(g, dict)
            else g
            for sid, g in gpus.items()
        }
    return {**t, "energy_j": None, "energy_valid": False, "tok_per_j": None, "gpus": gpus}


def energy_refused(t: Mapping[str, Any], why: str, reason: str = REASON) -> dict[str, Any]:
    """Block `t` with its energy left out (without_energy, for `reason`) and `energy_refused`: `why`
    (energy_contradiction's text)."""
    return {**without_energy(t, reason), "energy_refused": why}


def _utc(t: float) -> str:
    """Unix time `t` as ISO 8601 UTC, or its number where no date can hold it."""
    try:
        return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return f"{t:g} (Unix time)"


def window_contradiction(
    t: Mapping[str, Any], row: Mapping[str, Any], now: float | None = None, clock: str = "this host's clock"
) -> str | None:
    """Why the window of block `t` (t0, t1: Unix times) cannot be the window of llama-bench row `row`, None
    when it can or says no time: the future check of the row's own test_time (llama_bench.check: more than
    FUTURE_SLACK_S after `now`) applied to the window's end, and to the window against the row's test_time,
    either way (llama-bench stamps test_time just before its warm-up and timed repetitions). `clock`: what
    `now` is, as the reason names it (a stored record's `created`)."""
    t0, t1 = finite_number(t.get("t0")), finite_number(t.get("t1"))
    end = t1 if t1 is not None else t0
    now = time.time() if now is None else now
    if end is not None and end > now + FUTURE_SLACK_S:
        return f"its window ends at {_utc(end)}, {(end - now) / 86400:.4g} days after {clock}"
    test = parse_test_time(row.get("test_time"))
    if test is None:
        return None
    at = test.timestamp()
    if t0 is not None and t0 - at > FUTURE_SLACK_S:
        return f"its window starts at {_utc(t0)}, {(t0 - at) / 86400:.4g} days after the row's test_time {row.get('test_time')}"
    if end is not None and at - end > FUTURE_SLACK_S:
        return f"its window ends at {_utc(end)}, {(at - end) / 86400:.4g} days before the row's test_time {row.get('test_time')}"
    return None


FLAG = re.compile(r"[a-z][a-z0-9-]{0,40}(?::[A-Za-z0-9_.-]{1,40})?")
"""A flag as the toolkit writes one (`host-busy`, `throttled:sw-power-cap`): a file's `|`, markup or
newline never reaches a table."""

# The thresholds of the flags telemetry_flags.window_flags raises from a window's summary, stated here
# (below it) so that this check of a stored block and those rules read one set:
# clock-idle: the gfx clock stayed at an idle reading while the GPU was busy. 41 MHz is the RX 9070
# idle reading (ollama#9633) and the stuck-under-load reading of ROCm#6289; the H200 idles at
# 345 MHz (h200-telemetry case) and never went below 1380 MHz under load there. 500 MHz sits
# between. Busy: at least half the time (our rule).
CLOCK_IDLE_MAX_MHZ = 500.0
CLOCK_IDLE_BUSY_MIN_PCT = 50.0
# host-busy. Other processes' CPU: half a core (our rule: this project's 2-core build machine idles
# at 0.04-0.3 busy cores; one competing thread is 1.0). CPU pressure: no common threshold exists
# for PSI `some` (shared/reference/gpu-telemetry.md §6); 20 % of wall time with a task waiting (our rule).
# Steal: > 10 % (netdata stock alert warns at 10 %; "steal > 10 % = noisy neighbour", §6).
HOST_OTHER_CPU_CORES_MAX = 0.5
HOST_PSI_SOME_MAX_PCT = 20.0
HOST_STEAL_MAX_PCT = 10.0
# A window sampled at under this share of the sampler's rate (ticks missed under load; the H200 case
# got 109 of 201 at 10 Hz) is `undersampled` (our rule): its figures rest on too few readings.
UNDERSAMPLED_SHARE = 0.5
# gpu-shared when process ids are unknown (NVML counts only): the benchmark is one process per GPU.
OWN_GPU_PROCS = 1

CAP_STOCK_SLACK_W = 0.5
"""How far (W) a power cap may lie below the board's default and still be stock: the drivers report
both in milliwatts (hwmon power1_cap and power1_cap_default; NVML's enforced and default limits)."""


def cap_below_default(cap: Any, default: Any) -> bool:
    """Whether power cap `cap` (W) lies below the board's default cap `default` (W) by more than
    CAP_STOCK_SLACK_W: the one statement of power-not-stock's cap rule
    (host.telemetry.discover.not_stock_reasons per sample, telemetry_flags.window_flags on a stored window). A
    value that is no finite number counts as not stated."""
    c, d = finite_number(cap), finite_number(default)
    return c is not None and d is not None and c < d - CAP_STOCK_SLACK_W


def gpu_not_stock(g: Mapping[str, Any]) -> bool:
    """Whether a stored window's GPU summary `g` shows a board not at its stock settings: a `not_stock`
    reason the sampler recorded, or its own cap_w below its cap_default_w (cap_below_default: the sampler's
    reasons are the last state sample's). The one power-not-stock rule of a stored window:
    telemetry_flags.window_flags raises the flag by it and the flag's evidence (_EVIDENCE) is held to it."""
    return _nonempty(g.get("not_stock")) or cap_below_default(g.get("cap_w"), g.get("cap_default_w"))


def _procs(gpus: list[Mapping[str, Any]], key: str) -> int:
    """The processes a block's GPUs saw: the pids of `key` (pids or active_pids; pids where a GPU
    has no active_pids) over all GPUs, or the most a GPU counted at once (NVML counts only). A value
    that is no list (a hand edit: `"pids": true`, `"pids": 4901`) names no process."""
    pids: set[Any] = set()
    for g in gpus:
        v = g.get(key) if isinstance(g.get(key), list) else g.get("pids")
        pids.update(
            p for p in (v if isinstance(v, list) else ()) if isinstance(p, int) and not isinstance(p, bool)
        )
    counted = [int(n) for g in gpus if (n := finite_number(g.get("procs_max"))) is not None]
    return max([len(pids), *counted])


def _nonempty(v: Any) -> bool:
    return isinstance(v, (dict, list)) and bool(v)


def _num(m: Mapping[str, Any], key: str) -> float:
    n = finite_number(m.get(key))
    return n if n is not None else float("nan")


_EVIDENCE: dict[str, tuple[Any, str]] = {
    # gpu-shared: own pids are not stored, so any process may be the benchmark's: more than one seen
    # and one of them active (telemetry_flags._others with own_pids unknown)
    "gpu-shared": (
        lambda gs, h, t, r: _procs(gs, "pids") > OWN_GPU_PROCS and _procs(gs, "active_pids") >= 1,
        "no GPU with more than one process, one of them running compute",
    ),
    "gpu-memory-held": (
        lambda gs, h, t, r: _procs(gs, "pids") > OWN_GPU_PROCS,
        "no GPU with more than one process",
    ),
    "throttled": (
        lambda gs, h, t, r: any(
            isinstance(g.get("throttle_share"), Mapping) and _num(g["throttle_share"], r) > 0 for g in gs
        ),
        "the reason in no GPU's throttle_share",
    ),
    "clock-idle": (
        lambda gs, h, t, r: any(
            _num(g, "busy_pct_mean") >= CLOCK_IDLE_BUSY_MIN_PCT
            and _num(g, "sclk_mhz_median") <= CLOCK_IDLE_MAX_MHZ
            for g in gs
        ),
        f"no GPU busy {CLOCK_IDLE_BUSY_MIN_PCT:g} % or more at a median clock of {CLOCK_IDLE_MAX_MHZ:g} MHz or less",
    ),
    "power-not-stock": (
        lambda gs, h, t, r: any(gpu_not_stock(g) for g in gs),
        "no GPU's not_stock, and no cap_w below its cap_default_w",
    ),
    # the rules narrowed (issue 31: only where the cores are oversubscribed): the least any raised it on
    "host-busy": (
        lambda gs, h, t, r: (
            _num(h, "other_cpu_cores_mean") > HOST_OTHER_CPU_CORES_MAX
            or _num(h, "steal_pct") > HOST_STEAL_MAX_PCT
            or _num(h, "psi_some_pct") > HOST_PSI_SOME_MAX_PCT
        ),
        "the host's other CPU, steal and CPU pressure all below their thresholds",
    ),
    "sensor-implausible": (
        lambda gs, h, t, r: (
            any(_nonempty(g.get("implausible")) for g in gs) or _nonempty(h.get("implausible"))
        ),
        "no reading dropped as implausible",
    ),
    "sensor-dropped": (lambda gs, h, t, r: any(g.get("dropped") is True for g in gs), "no GPU dropped"),
    "undersampled": (
        lambda gs, h, t, r: _num(h, "achieved_hz") < UNDERSAMPLED_SHARE * _num(t, "rate_hz"),
        f"an achieved rate of at least {UNDERSAMPLED_SHARE:g} x rate_hz",
    ),
    "energy-invalid": (
        lambda gs, h, t, r: any(
            g.get("energy_valid") is not True and str(g.get("energy_invalid_reason")) == r for g in gs
        ),
        "no GPU whose energy is invalid for that reason",
    ),
}
"""Per telemetry flag (telemetry_flags.window_flags: the flags `toolkit measure` writes), whether a
window's summary shows what raised it: (test of (GPUs, host, block, the flag's reason), what the block
shows instead). The least each rule needs, not the rule itself: a block does not store the benchmark's
own pids, and a file measured under older thresholds keeps the flags its figures raised then."""

_WITH_REASON = frozenset({"throttled", "energy-invalid"})


def _unknown(flag: str) -> str | None:
    """Why `flag` is no telemetry flag `toolkit measure` writes, None when it is one."""
    name, colon, _reason = flag.partition(":")
    if name not in _EVIDENCE or bool(colon) != (name in _WITH_REASON):
        return "not a flag `toolkit measure` writes"
    return None


def flag_unsupported(flag: str, t: Mapping[str, Any]) -> str | None:
    """Why telemetry flag `flag` is not one block `t` supports, None when its figures show what raised
    it (_EVIDENCE); a name `toolkit measure` does not write is none."""
    if why := _unknown(flag):
        return why
    name, _colon, reason = flag.partition(":")
    raw_gpus = t.get("gpus")
    gpus = [g for g in raw_gpus.values() if isinstance(g, Mapping)] if isinstance(raw_gpus, Mapping) else []
    host = t.get("host") if isinstance(t.get("host"), Mapping) else {}
    test, instead = _EVIDENCE[name]
    return None if test(gpus, host, t, reason) else f"its toolkit_telemetry shows {instead}"


def measured_claims(
    telemetry: Any, claimed: Any, row: Mapping[str, Any], now: float | None = None
) -> tuple[dict[str, Any] | None, list[str], dict[str, str]]:
    """What `toolkit import` keeps of a row's `toolkit_telemetry` (`telemetry`) and `toolkit_flags`
    (`claimed`), as `toolkit measure` writes them: (the block, None where there is none or its window
    cannot be the row's (window_contradiction), its energy refused where that contradicts the block or
    the row (energy_contradiction, then `energy-invalid:REASON` is a flag) or is one the toolkit's energy
    rules would not have given (energy_rule, then `energy-invalid:<its code>`); the claimed flags the block
    shows (flag_unsupported), in their order; {what was left out (`toolkit_telemetry`, a flag, or a
    value that is no flag's text as Python's repr shows it): why})."""
    left: dict[str, str] = {}
    t = telemetry if isinstance(telemetry, dict) else None
    if t is not None and (why := window_contradiction(t, row, now)):
        left["toolkit_telemetry"] = f"not the row's window: {why}"
        t = None
    if claimed is not None and not isinstance(claimed, list):
        left["toolkit_flags"] = "not a list of flags"
    flags: list[str] = []
    for f in claimed if isinstance(claimed, list) else []:
        if not isinstance(f, str) or not FLAG.fullmatch(f):
            left[repr(f)[:42]] = "not a flag `toolkit measure` writes"
        elif f not in flags and f not in left:
            if t is not None:
                why = flag_unsupported(f, t)
            else:
                why = _unknown(f) or (
                    "the row has no toolkit_telemetry"
                    if telemetry is None
                    else "its toolkit_telemetry is left out"
                )
            if why is None:
                flags.append(f)
            else:
                left[f] = why
    reason = None
    if t is not None and (why := energy_contradiction(t, row)):
        t, reason = energy_refused(t, why), REASON  # the row's speed stays: its own fields were checked
    elif t is not None and (rule := energy_rule(t, row)):
        reason = rule[0]
        t = energy_refused(t, f"{rule[1]} ({reason})", reason)
    if reason is not None and f"energy-invalid:{reason}" not in flags:
        flags.append(f"energy-invalid:{reason}")
    return t, flags, left
