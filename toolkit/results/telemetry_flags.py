"""The flags of a window's telemetry summary (toolkit.bench.observe.window_summary's shape): the
one rule `toolkit bench` and `toolkit measure` raise them by (window_flags: the observer calls it) and
the one every reader of a stored record holds its stored flags to (checked_flags: the results readers'
facts, `toolkit import`). Stated below the analysis package so the results readers run the same code as
the bench. Each helper reads a stored block's JSON as it may be (a hand-edited value of another type
counts as not stated), and a summary window_summary wrote as before. The flags (FLAG_HELP says each to
a reader):

- `gpu-shared`: a process other than the benchmark's ran compute on a GPU in the window (host
  pids from KFD or NVML not in `own_pids`, with queues or SM use; without pids, more than
  OWN_GPU_PROCS processes). Decided from the window alone: a tenant seen before the run is a run
  note (baseline_notes), not a flag on later rows.
- `gpu-memory-held`: another process held memory on a GPU in the window but ran nothing (milder:
  the speed is the card's; free memory was less).
- `sensor-implausible`: a sensor value outside its physical range (FIGURE_RANGES) was dropped.
- `undersampled`: the sampler achieved under UNDERSAMPLED_SHARE of its rate around the window.
- `sensor-dropped`: a GPU's read did not return (Sampler.read_timeout_s) by the window's end: the
  GPU is not sampled from then on.
- `throttled:<reason>`: NVIDIA sw-power-cap, hw-slowdown, sw-thermal, hw-thermal,
  hw-power-brake; AMD any SMU14 bit but temp-hotspot (ppt0 = held at the power cap), in at least
  THROTTLE_MIN_SHARE of the window's samples and THROTTLE_MIN_SAMPLES of them.
- `clock-idle`: busy mean >= CLOCK_IDLE_BUSY_MIN_PCT while the median gfx clock <= CLOCK_IDLE_MAX_MHZ.
- `power-not-stock`: the GPU's power state in the window is not stock (host.telemetry.not_stock_reasons).
- `host-busy`: other processes' CPU > HOST_OTHER_CPU_CORES_MAX cores (plus the tick counts' noise
  over the span read, tick_noise_cores) where the cores are oversubscribed, or steal > HOST_STEAL_MAX_PCT,
  or CPU pressure some > HOST_PSI_SOME_MAX_PCT while others ran (_host_busy).
- `energy-invalid:<reason>`: a GPU without a valid energy (reason code from ENERGY_REASONS)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from toolkit.core.stats import finite_number
from toolkit.core.types import MAX_CPUS
from toolkit.results.telemetry_check import (
    _EVIDENCE,
    CAP_SLACK,
    CLOCK_IDLE_BUSY_MIN_PCT,
    CLOCK_IDLE_MAX_MHZ,
    HOST_OTHER_CPU_CORES_MAX,
    HOST_PSI_SOME_MAX_PCT,
    HOST_STEAL_MAX_PCT,
    OWN_GPU_PROCS,
    POWER_W,
    SAME,
    UNDERSAMPLED_SHARE,
    _nonempty,
    board_power_w,
    board_vendors,
    flag_unsupported,
    gpu_not_stock,
)
from toolkit.results.window_check import outside, window_problem

# A throttle reason counts when set in at least this share of the window's samples, and in at
# least THROTTLE_MIN_SAMPLES of them (our rule: a reason in one sample of four, or a single-sample
# blip, is not "held"; §7 asks for "most samples" for power-capped, we flag from a quarter on).
THROTTLE_MIN_SHARE = 0.25
THROTTLE_MIN_SAMPLES = 2
NVIDIA_THROTTLE_REASONS = frozenset(
    {"sw-power-cap", "hw-slowdown", "sw-thermal", "hw-thermal", "hw-power-brake"}
)
# SMU 14.0.2 throttle_status bits (smu14_driver_if_v14_0.h, shared/reference/gpu-telemetry.md §1.4)
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
# ... and other load competes only where the cores are oversubscribed: the benchmark's own cores plus
# the others' above this share of the online cores (our rule: on a 16-core host 1-3 neighbour cores
# beside a GPU benchmark's one core did not move tok/s, issue 31; on this 2-core machine one
# competing thread beside llama-bench's two did). Own CPU unknown: others above this share alone.
HOST_SATURATION = 0.9
HOST_OTHER_SHARE_MAX = 0.25
USER_HZ = 100
"""/proc/stat's unit: 1/100 s on every Linux ABI (proc_stat(5), "USER_HZ")."""


def tick_noise_cores(cpus: Any, span_s: Any) -> float:
    """The most /proc/stat's tick counts can misstate a CPU rate read over `span_s` seconds, in cores: each
    online CPU's counter is whole ticks (1/USER_HZ s), so up to one tick per CPU between the edges. A window
    that cannot be widened to results.window_check.HOST_MIN_WINDOW_S reads this much noise; 0 when unknown."""
    c, s = finite_number(cpus), finite_number(span_s)
    if c is None or s is None or c <= 0 or s <= 0:
        return 0.0
    return c / USER_HZ / s


def _map(v: Any) -> Mapping[str, Any]:
    """`v` where it is a mapping (a stored block's object), else an empty one."""
    return v if isinstance(v, Mapping) else {}


def _pid_set(v: Any) -> set[int]:
    return {p for p in v if isinstance(p, int) and not isinstance(p, bool)} if isinstance(v, list) else set()


def _others(g: Mapping[str, Any], own_pids: Collection[int] | None) -> str | None:
    """Another process on this GPU in the window: "active" (it ran compute), "held" (it only held
    memory), or None. Pids known (KFD, NVML): those not in own_pids; else (NVML counts only, or no
    own_pids) more than OWN_GPU_PROCS processes, taken as active."""
    pids = _pid_set(g.get("pids"))
    if own_pids is not None and pids:
        others = pids - set(own_pids)
        if not others:
            return None
        active = _pid_set(g["active_pids"]) if isinstance(g.get("active_pids"), list) else pids
        return "active" if others & active else "held"
    n = finite_number(g.get("procs_max"))
    return "active" if n is not None and n > OWN_GPU_PROCS else None


def _throttling(g: Mapping[str, Any]) -> list[str]:
    """The throttle reasons of GPU summary `g` held for THROTTLE_MIN_SHARE and THROTTLE_MIN_SAMPLES."""
    n = finite_number(g.get("throttle_samples")) or 0
    shares, counts = g.get("throttle_share"), g.get("throttle_count")
    if not n or not isinstance(shares, Mapping):
        return []
    counts = counts if isinstance(counts, Mapping) else {}
    wanted = (
        NVIDIA_THROTTLE_REASONS
        if g.get("vendor") == "nvidia"
        else set(AMD_SMU14_THROTTLE_BITS.values()) - AMD_THROTTLE_MASKED
    )
    out = []
    for reason, v in shares.items():
        share = finite_number(v)
        count = finite_number(counts.get(reason))
        count = round(share * n) if count is None and share is not None else count
        if reason in wanted and share is not None and count is not None:
            if share >= THROTTLE_MIN_SHARE and count >= THROTTLE_MIN_SAMPLES:
                out.append(str(reason))
    return out


def _others_ran(host: Mapping[str, Any]) -> bool | None:
    """Whether other processes' CPU exceeded HOST_OTHER_CPU_CORES_MAX beyond what the tick counts can
    misstate over the span read (tick_noise_cores of host_window_s); None where it is unknown."""
    other = finite_number(host.get("other_cpu_cores_mean"))
    if other is None:
        return None
    return other > HOST_OTHER_CPU_CORES_MAX + tick_noise_cores(
        host.get("cpus_online"), host.get("host_window_s")
    )


def _cpu_contended(host: Mapping[str, Any], others_ran: bool | None) -> bool:
    """Other processes' CPU ran (`others_ran`: _others_ran) where the cores are oversubscribed (own +
    other > HOST_SATURATION of the online cores; own unknown: other > HOST_OTHER_SHARE_MAX of them)."""
    other = finite_number(host.get("other_cpu_cores_mean")) or 0.0
    own, cpus = finite_number(host.get("own_cpu_cores_mean")), finite_number(host.get("cpus_online"))
    if not others_ran:
        return False
    if not cpus:
        return True
    if own is None:
        return other > HOST_OTHER_SHARE_MAX * cpus
    return own + other > HOST_SATURATION * cpus


def _clock_idle(g: Mapping[str, Any]) -> bool:
    """Busy mean >= CLOCK_IDLE_BUSY_MIN_PCT while the median gfx clock <= CLOCK_IDLE_MAX_MHZ."""
    busy, clock = finite_number(g.get("busy_pct_mean")), finite_number(g.get("sclk_mhz_median"))
    return (
        busy is not None
        and clock is not None
        and busy >= CLOCK_IDLE_BUSY_MIN_PCT
        and clock <= CLOCK_IDLE_MAX_MHZ
    )


def _host_busy(host: Mapping[str, Any]) -> bool:
    """Other processes' CPU contends (_cpu_contended), or steal above its threshold, or CPU pressure
    above its threshold while others ran (_others_ran, or unknown): pressure alone also counts the
    benchmark's own threads waiting for each other (llama-bench at one thread per core beside the
    sampler), which is not another process."""
    psi, steal = finite_number(host.get("psi_some_pct")), finite_number(host.get("steal_pct"))
    others_ran = _others_ran(host)  # one rule for both paths
    return (
        _cpu_contended(host, others_ran)
        or (psi is not None and psi > HOST_PSI_SOME_MAX_PCT and others_ran is not False)
        or (steal is not None and steal > HOST_STEAL_MAX_PCT)
    )


def window_flags(summary: Mapping[str, Any], own_pids: Collection[int] | None = None) -> list[str]:
    """Flags for one window's summary (bench.observe.window_summary's shape; a list of names, in a
    stable order; empty: nothing seen): the one rule the observer stores them by and every reader of a
    stored block re-derives them by (each: the module's docstring). `own_pids`: the benchmark's own
    GPU processes (None: the summary's own `own_pids`, which the observer stores; neither: unknown, then
    more than OWN_GPU_PROCS processes on a GPU count as another tenant)."""
    if own_pids is None and isinstance(summary.get("own_pids"), list):
        own_pids = _pid_set(summary["own_pids"])
    out: list[str] = []

    def add(flag: str) -> None:
        if flag not in out:
            out.append(flag)

    raw = summary.get("gpus")
    gpus = [g for g in raw.values() if isinstance(g, Mapping)] if isinstance(raw, Mapping) else []
    for g in gpus:
        if other := _others(g, own_pids):
            add("gpu-shared" if other == "active" else "gpu-memory-held")
    for g in gpus:
        for reason in _throttling(g):
            add(f"throttled:{reason}")
    if any(_clock_idle(g) for g in gpus):
        add("clock-idle")
    if any(gpu_not_stock(g) for g in gpus):  # its not_stock reasons, or its own caps
        add("power-not-stock")
    host = _map(summary.get("host"))
    if _host_busy(host):
        add("host-busy")
    if any(_nonempty(g.get("implausible")) for g in gpus) or _nonempty(host.get("implausible")):
        add("sensor-implausible")
    if any(g.get("dropped") is True for g in gpus):
        add("sensor-dropped")
    rate, achieved = finite_number(summary.get("rate_hz")), finite_number(host.get("achieved_hz"))
    if rate and achieved is not None and achieved < UNDERSAMPLED_SHARE * rate:
        add("undersampled")
    for g in gpus:
        if g.get("energy_valid") is not True:
            add(f"energy-invalid:{g.get('energy_invalid_reason')}")
    return out


OWN_PIDS_FLAGS = frozenset({"gpu-shared", "gpu-memory-held"})
"""Flags whose rule needs the benchmark's own GPU processes, which a block stores as `own_pids` since
2026-12-05 (observe.RunObserver): a reader adds one only from a block that names them; in an older
block it holds a stored one to its evidence (_EVIDENCE) but never adds one (the H200's own llama-bench
children, three under one `toolkit measure`, would read as another tenant)."""

UNSUPPORTED = "flag-unsupported"
"""What a stored telemetry flag its own block does not show becomes: `flag-unsupported:host-busy`."""


def checked_flags(stored: Sequence[str], t: Any) -> list[str]:
    """The flags a reader shows for a record's stored flags `stored` and its stored telemetry block `t`
    (window_summary's shape), by the one rule the bench raised them by (window_flags): a stored telemetry flag
    (a name of _EVIDENCE) that the block raises now, or shows what raised it under the rule it was written
    with (flag_unsupported: None), stays where it stood; one the block shows nothing of becomes
    `flag-unsupported:<flag>`; a flag the block raises that is not stored is added after them (OWN_PIDS_FLAGS
    only from a block that names its own pids). Other flags stay as stored (identity.shown_flags holds them).
    `t` not a dict (no telemetry): each telemetry flag `flag-unsupported:<flag>` (flags and their block are
    stored together since schema 2), the others as stored."""
    if not isinstance(t, Mapping):  # no block: nothing shows what raised a telemetry flag
        return [
            f"{UNSUPPORTED}:{f}" if f.partition(":")[0] in _EVIDENCE else f for f in dict.fromkeys(stored)
        ]
    own_known = isinstance(t.get("own_pids"), list)
    derived = [f for f in window_flags(t) if own_known or f.partition(":")[0] not in OWN_PIDS_FLAGS]
    out: dict[str, None] = {}  # ordered and each once, in linear time (a stored list may hold 80,000)
    for f in stored:
        held = f.partition(":")[0] not in _EVIDENCE or f in derived or flag_unsupported(f, t) is None
        out.setdefault(f if held else f"{UNSUPPORTED}:{f}")
    return [*out, *(f for f in derived if f not in out)]


FIGURE_RANGES: dict[str, tuple[float, float]] = {
    "power_w": POWER_W,  # a working board under 1 W is off or misread (a truncated read)
    "sclk_mhz": (1.0, 5000.0),  # no GPU clock near 5 GHz (R9700 boost 2,920 MHz; H200 1,980 MHz)
    "mclk_mhz": (1.0, 30000.0),  # memory clocks as the drivers report them: 96-20,000 MHz
    "busy_pct": (0.0, 100.0),
    "mem_busy_pct": (0.0, 100.0),
    "temp_c": (-40.0, 150.0),  # silicon shuts down near 105-125 °C; sensors read ambient at least
}
"""The physical range of each GPU sensor value (every `temp_*_c` key uses `temp_c`), stated once:
the sampler drops a reading outside it (analysis.energy.PLAUSIBLE is this dict; the window is flagged
`sensor-implausible`), so a window's means, medians and maxima lie inside it too, and a stored block's
figures are held to it (figures_problem)."""

_GPU_FIGURES = {
    "power_w_mean": "power_w",
    "power_w_max": "power_w",
    "sclk_mhz_min": "sclk_mhz",
    "sclk_mhz_median": "sclk_mhz",
    "sclk_mhz_max": "sclk_mhz",
    "mclk_mhz_median": "mclk_mhz",
    "busy_pct_mean": "busy_pct",
    "mem_busy_pct_mean": "mem_busy_pct",
}


def _gpu_figures_problem(sid: str, g: Mapping[str, Any], said: bool, board: float | None) -> str | None:
    """figures_problem's checks of one GPU's summary `g` (`said`: its power figures are
    telemetry_check.energy_contradiction's to judge: a block that claims, or was refused, a valid energy;
    `board`: the rated power of the board its row names, W, where known)."""
    temps = _map(g.get("temp_max_c"))
    named = [
        (k, g.get(k), FIGURE_RANGES[r]) for k, r in _GPU_FIGURES.items() if not (said and r == "power_w")
    ]
    cap_hi = min(POWER_W[1], board * CAP_SLACK) if board else POWER_W[1]
    named += [(k, g.get(k), (POWER_W[0], cap_hi)) for k in ("cap_w", "cap_default_w")]
    named += [(f"temp_max_c.{str(k)[:24]}", v, FIGURE_RANGES["temp_c"]) for k, v in temps.items()]
    n = finite_number(g.get("throttle_samples"))
    shares = _map(g.get("throttle_share"))
    counts = _map(g.get("throttle_count"))
    named += [(f"throttle_share.{str(k)[:24]}", v, (0.0, 1.0)) for k, v in shares.items()]
    named += [
        (f"throttle_count.{str(k)[:24]}", v, (0.0, n if n is not None else math.inf))
        for k, v in counts.items()
    ]
    for key, v, (lo, hi) in named:
        if outside(v, lo, hi):
            return f"gpus.{sid[:40]}.{key} is {str(v)[:24]}: outside the {lo:g}-{hi:g} a reading can be"
    if why := _sample_counts_problem(g, named) or _throttle_share_problem(g):
        return f"gpus.{sid[:40]}.{why}"
    for low, high in _ORDERED:
        if said and low.startswith("power_"):
            continue  # energy_contradiction's to say, as the power ranges above
        a, b = finite_number(g.get(low)), finite_number(g.get(high))
        if a is not None and b is not None and a - b > SAME * max(abs(a), abs(b), 1.0):
            return f"gpus.{sid[:40]}.{low} {a:g} is above its {high} {b:g}: no window's samples give that"
    return None


SAMPLE_COUNTS = ("throttle_samples", "suspended_samples", "error_samples")
"""A GPU summary's counts of its window's samples (window_summary: those carrying a throttle bitmask, a
suspended runtime status, an error), each of the `samples` read inside the window, so at most it."""


def _sample_counts_problem(
    g: Mapping[str, Any], named: list[tuple[str, Any, tuple[float, float]]]
) -> str | None:
    """Why GPU summary `g`'s counts of samples cannot be its window's (the GPU's id left to the caller):
    `samples` (the readings inside the window) no whole number >= 0; a count of SAMPLE_COUNTS above it; a
    window of no sample stating a figure read from its samples (`named`: the keys figures_problem ranges,
    those of _FROM_SAMPLES): window_summary writes None for each (an empty _stats). A block without `samples`
    (an older writer) is held to nothing here."""
    n = finite_number(g.get("samples"))
    if g.get("samples") is None:
        return None
    if n is None or n < 0 or not n.is_integer():
        return f"samples is {str(g.get('samples'))[:24]}: a count of readings is a whole number >= 0"
    for key in SAMPLE_COUNTS:
        c = finite_number(g.get(key))
        if c is not None and c > n:
            return (
                f"{key} {c:g} is more than its window's samples {n:g}: a count of them is at most all of them"
            )
    if n == 0:
        stated = next((k for k, v, _ in named if v is not None and k.split(".")[0] in _FROM_SAMPLES), None)
        if stated is not None:
            return f"{stated} is stated in a window of 0 samples: a figure read from no reading is none"
    return None


def _throttle_share_problem(g: Mapping[str, Any]) -> str | None:
    """Why GPU summary `g`'s throttle shares are not its throttle counts over its throttle_samples (the GPU's
    id left to the caller), None where they are or it states no counts (an older writer): window_summary
    writes both from one count per reason (bench.observe._throttle_counts: share = count / throttle_samples),
    so a reason with a share and no count, or a share that is not its count's (to 0.01), is no window's."""
    shares, counts = _map(g.get("throttle_share")), g.get("throttle_count")
    n = finite_number(g.get("throttle_samples"))
    if not isinstance(counts, Mapping) or not n:
        return None
    for reason in dict.fromkeys([*shares, *counts]):
        share, count = finite_number(shares.get(reason)), finite_number(counts.get(reason))
        if share is None and reason in shares or count is None and reason in counts:
            continue  # not a number: the ranges above name it
        if abs((share or 0.0) - (count or 0.0) / n) > 0.01:
            name = str(reason)[:24]
            said = f"{count:g}" if count is not None else "(not stated: 0)"
            return (
                f"throttle_share.{name} {share or 0:g} is not its throttle_count.{name} {said} of {n:g} "
                "throttle_samples: both are one count of the window's samples"
            )
    return None


_FROM_SAMPLES = frozenset(
    [
        "power_w_mean",
        "power_w_max",
        "sclk_mhz_min",
        "sclk_mhz_median",
        "sclk_mhz_max",
        "mclk_mhz_median",
        "busy_pct_mean",
        "mem_busy_pct_mean",
        "temp_max_c",
    ]
)
"""The figures of a GPU summary window_summary reads from the samples inside the window (None of none)."""


_ORDERED = (
    ("sclk_mhz_min", "sclk_mhz_median"),
    ("sclk_mhz_median", "sclk_mhz_max"),
    ("power_w_mean", "power_w_max"),
)
"""Figures of one GPU's window that window_summary reads from the same samples, each pair in the order
any set of numbers gives (a minimum at most the median, the median and a mean at most the maximum), to
SAME: a mean is a float sum over a count, which can land an ulp above the maximum of equal readings
(statistics.fmean of seven 700.123 W samples is 700.1230000000002: a GPU held at one reading, or a
sensor slower than the sampler). The power pair is energy_contradiction's to judge where a block claims
or was refused a valid energy, as the power ranges are."""


def figures_problem(t: Any, gpu_info: Any = None) -> str | None:
    """Why the figures of a stored telemetry block `t` (window_summary's shape) cannot be a window's, None
    where they can (or `t` is no dict): a window of no time (duration_s <= 0, t1 before t0); a GPU figure
    outside its sensor's physical range (FIGURE_RANGES), a power cap (cap_w, cap_default_w) outside POWER_W or
    above CAP_SLACK x the rated power of the board the row's `gpu_info` names (board_power_w), a throttle
    share outside 0-1 or counted in more samples than the window read, a count of samples above the window's
    `samples` or a figure stated in a window of none (_sample_counts_problem), a minimum above its median or a
    mean above its maximum (_ORDERED); the host's online CPUs outside 1-MAX_CPUS or a fraction, its CPU
    pressure or steal outside 0-100 %, its busy or other processes' cores below 0 or beyond the cores it has
    (5 % and the tick counts' noise aside), an achieved sampling rate below 0; sampling figures its length
    cannot hold (window_check.window_problem). window_summary never writes such a figure: a block holding one
    was edited."""
    if not isinstance(t, Mapping):
        return None
    t0, t1 = finite_number(t.get("t0")), finite_number(t.get("t1"))
    no_time = outside(t.get("duration_s"), 1e-9, math.inf) or (t0 is not None and t1 is not None and t1 < t0)
    said = t.get("energy_valid") is True or "energy_refused" in t  # energy_contradiction's to say
    if no_time and not said:
        return f"duration_s {str(t.get('duration_s'))[:24]}, t0 {t0}, t1 {t1}: a window of no time"
    gpus = _map(t.get("gpus"))
    if why := _vendor_problem(gpus, gpu_info):
        return why
    board = board_power_w(gpu_info)
    for sid, g in gpus.items():
        if isinstance(g, Mapping) and (why := _gpu_figures_problem(str(sid), g, said, board)):
            return why
    host = _map(t.get("host"))
    cpus = finite_number(host.get("cpus_online"))
    if cpus is not None and not cpus.is_integer():
        return f"host.cpus_online is {cpus:g}: a count of CPUs is a whole number"
    most = cpus * 1.05 + max(0.1, tick_noise_cores(cpus, host.get("host_window_s"))) if cpus else math.inf
    for key, lo, hi in (
        ("cpus_online", 1.0, MAX_CPUS),
        ("psi_some_pct", 0.0, 100.0),
        ("steal_pct", 0.0, 100.0),
        ("busy_cores_mean", 0.0, most),
        ("other_cpu_cores_mean", 0.0, most),
        ("own_cpu_cores_mean", 0.0, most),
        ("achieved_hz", 0.0, math.inf),
    ):
        if outside(host.get(key), lo, hi):
            return f"host.{key} is {str(host.get(key))[:24]}: outside the {lo:g}-{hi:.4g} it can be"
    if why := _host_share_problem(host):
        return why
    return window_problem(t)  # sampling figures against the window's length


def _vendor_problem(gpus: Mapping[str, Any], gpu_info: Any) -> str | None:
    """Why a block's GPUs cannot be the ones its row ran on, None where they can or it is not known: the row's
    `gpu_info` names only cards of known vendors (board_vendors) and no GPU of the block is of one. The
    sampler reads every GPU of a vendor the run can use (bench.observe.gpus_for_run), so a block holding the
    row's card and others is one."""
    named = board_vendors(gpu_info)
    said = {str(g.get("vendor")) for g in gpus.values() if isinstance(g, Mapping)}
    if not named or not said or named & said:
        return None
    return (
        f"its GPUs are {', '.join(sorted(v[:20] for v in said))}, none of the {', '.join(sorted(named))} "
        f"card(s) its row ran on ({str(gpu_info)[:60]!r}): another card's figures"
    )


HOST_AGREE_CORES = 0.05
"""How far (cores, plus 1 % of the busy cores) a host block's other processes' CPU may lie above its busy
CPU less the toolkit's own (_host_share_problem): window_summary reads all three from one span of the same
counters (bench.observe._counter_span), so they agree to a float's rounding (the 89 real blocks of
tests/data, shared/cases and results/: 4e-16); this leaves room for a copy rounded to two decimals."""


def _host_share_problem(host: Mapping[str, Any]) -> str | None:
    """Why a host block's other processes' CPU (`other_cpu_cores_mean`, what host-busy reads) is more than its
    busy CPU (`busy_cores_mean`) leaves beside the benchmark's own (`own_cpu_cores_mean`) and the toolkit's
    (`harness_cpu_cores_mean`), None where it is not or one is not stated: window_summary computes it as
    exactly that difference (cpu_busy_s less own_cpu_s and harness_cpu_s over one span, floored at 0)."""
    busy, other = finite_number(host.get("busy_cores_mean")), finite_number(host.get("other_cpu_cores_mean"))
    if busy is None or other is None:
        return None
    ours = sum(finite_number(host.get(k)) or 0.0 for k in ("own_cpu_cores_mean", "harness_cpu_cores_mean"))
    room = max(0.0, busy - ours)
    if other <= room + HOST_AGREE_CORES + 0.01 * busy:
        return None
    return (
        f"host.other_cpu_cores_mean {other:.4g} is more than its busy_cores_mean {busy:.4g} less the "
        f"benchmark's and the toolkit's own {ours:.4g}: the other processes' CPU is that difference"
    )


def without_figures(
    telemetry: Any, flags: Sequence[str], left: dict[str, str], gpu_info: Any = None
) -> tuple[dict[str, Any] | None, list[str]]:
    """`toolkit import`'s measured block `telemetry` and its kept `flags` (telemetry_check.measured_claims),
    left out where its figures cannot be a window's (figures_problem; `gpu_info`: the row's, the board its
    caps are held to), each telemetry flag with it (said in `left`, which this adds to), then every flag
    its kept block raises (checked_flags)."""
    why = figures_problem(telemetry, gpu_info)
    if why is None:
        return telemetry, checked_flags(flags, telemetry)
    left["toolkit_telemetry"] = f"not a window's figures: {why}"
    for f in flags:
        if f.partition(":")[0] in _EVIDENCE:
            left[f] = "its toolkit_telemetry is left out"
    return None, [f for f in flags if f.partition(":")[0] not in _EVIDENCE]
