"""What the system was doing while a benchmark measured: one observer per (image, model) run, or per
`toolkit measure` command.

The observer samples the host and the GPUs the run uses (toolkit.host.telemetry.Sampler, 10 Hz,
outside the container, no root), writes the raw trace beside the results, takes an idle baseline
before the benchmark starts, and for each test llama-bench finishes returns the window's telemetry
summary (window_summary, below: pure functions over the samples) and flags (results.telemetry_flags
window_flags). At the end it reads the kernel log for GPU faults in the run's window.

Test window: from the arrival of the test's first measured repetition (`--progress` line
"benchmark i/N: prompt run 1/R" or "gen run 1/R") to the arrival of its result row; tokens =
(n_prompt + n_gen) x repetitions, the tokens llama-bench's t/s counts. Without progress lines the
window starts at the previous row (or the benchmark's start) and says so (`window_from`); it then
holds warm-up and other work, so it gets no energy (`energy-invalid:no_test_edges`).
"""

from __future__ import annotations

import os
import re
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from toolkit.analysis.energy import bracket, interp, max_gap, plausible, sample_period, window_energy
from toolkit.host import telemetry as tel
from toolkit.results.telemetry_check import without_energy
from toolkit.results.telemetry_flags import AMD_SMU14_THROTTLE_BITS, tick_noise_cores, window_flags
from toolkit.results.window_check import HOST_MIN_WINDOW_S, WINDOW_MARGIN_S
from toolkit.runtimes.llama_bench.check import holds_untimed_work

RATE_HZ = 10.0
"""Samples per second (issue 22: >= 10 Hz; the H200 case was sampled at 20 Hz)."""

BASELINE_S = 1.0
"""Seconds of idle sampling before the benchmark process starts (the baseline `gpu-shared` reads);
none where no GPU is sampled (a CPU image: the baseline's notes are about GPUs only)."""

_PROGRESS = re.compile(r"llama-bench: benchmark (\d+)/(\d+): (?:prompt|gen(?:eration)?) run 1/(\d+)")


def cgroup_of_pid(
    pid: int, proc: str | Path = "/proc", cgroup_root: str | Path = "/sys/fs/cgroup"
) -> Path | None:
    """The cgroup v2 directory of process `pid` (a container's main process: its whole container),
    from /proc/<pid>/cgroup ("0::/system.slice/docker-<id>.scope"), under `cgroup_root` or, on a
    hybrid host (v1 controllers, the v2 tree at <root>/unified: systemd's hybrid layout), under that;
    None on a cgroup v1 host or when gone."""
    try:
        text = (Path(proc) / str(pid) / "cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("0::"):
            rel = line[3:].lstrip("/")
            for top in (Path(cgroup_root), Path(cgroup_root) / "unified"):
                if (top / rel / "cpu.stat").is_file():
                    return top / rel
            return None
    return None


def gpus_for_run(backend: str, render_nodes: Sequence[str] | None = None) -> list[tel.GpuRef]:
    """The GPUs a run uses: none for the CPU image; AMD cards whose render node is passed (all AMD
    cards when `render_nodes` is None) and every NVIDIA GPU NVML sees (the Vulkan image on an NVIDIA
    host). Never raises."""
    if backend == "cpu":
        return []
    out = []
    for g in tel.discover_gpus():
        if g.vendor == "amd" and render_nodes is not None and g.render_node not in render_nodes:
            continue
        out.append(g)
    return out


class RunObserver:
    """Samples one run. Use: `obs = RunObserver(trace, gpus); obs.start()` before the benchmark
    process starts (takes BASELINE_S seconds of idle baseline), `obs.own_pid(pid)` once its main
    process is known (its cgroup or process tree is "own" CPU: the rest is other load),
    `obs.line(text)` for every stderr line, `obs.test(raw, tokens)` when a result row arrives (returns
    {"telemetry": summary, "flags": [...]} to store with the record), `obs.finish()` at the end
    (stops sampling; returns the run-level facts: kernel log, trace path, sampler health).

    Never raises from sampling: a source that fails gives error samples, and the summary says which
    figures are missing. `enabled=False` gives an observer that records nothing (tests with a fake
    engine, where there is no process to observe)."""

    def __init__(
        self,
        trace_path: Path | None,
        gpus: Sequence[tel.GpuRef] = (),
        *,
        rate_hz: float = RATE_HZ,
        baseline_s: float = BASELINE_S,
        enabled: bool = True,
        cgroup: bool = True,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self.trace_path = trace_path
        self.on_note = on_note  # told when the trace could not be written whole (finish)
        self.gpus = list(gpus)
        self.enabled = enabled
        self.baseline_s = baseline_s
        self._cgroup = cgroup
        self._own: Callable[[], float | None] | None = None
        self._own_last: float | None = None
        self._own_pids: set[int] = set()
        self._own_sid: int | None = None  # the measured command's own session (toolkit measure)
        self._edges = _TestEdges()
        self._last_row_t: float | None = None
        self.notes: list[str] = []  # filled by start(): GPUs not at stock power or in use before the run
        self.baseline: dict[str, Any] | None = None
        self.t_start: float | None = None
        self._kernel: tel.KernelLog | None = None
        self.sampler: tel.Sampler | None = None
        self._gpu_sources: list[tel.AmdGpuSource | tel.NvmlGpuSource] = []
        if enabled:
            for g in self.gpus:
                try:
                    self._gpu_sources.append(
                        tel.timeboxed(partial(tel.open_source, g), what=f"opening {g.id}")
                    )
                except tel.ReadTimeout as err:
                    self.notes.append(
                        f"GPU {g.id} is not sampled: {err} (a wedged sensor file or driver call)"
                    )
                except Exception:  # a GPU whose files or NVML handle cannot be opened: not sampled
                    continue
            self.sampler = tel.Sampler(
                [tel.HostSource(self._own_cpu), *self._gpu_sources], rate_hz=rate_hz, trace_path=trace_path
            )

    def _own_cpu(self) -> float | None:
        """The benchmark's cumulative CPU seconds, never decreasing: when its processes end (and the
        reading goes away or drops), the last value stands (their CPU time is final)."""
        v = self._own() if self._own else None
        if v is not None:
            self._own_last = max(v, self._own_last or 0.0)
        return self._own_last

    def start(self) -> None:
        """Start sampling, take the idle baseline, open the kernel log."""
        if self.sampler is None:
            return
        self._kernel = tel.KernelLog()
        for src in list(self._gpu_sources):  # every read time-boxed: a wedged sensor never stops the run
            try:
                reasons = tel.not_stock_reasons(tel.timeboxed(partial(tel.power_state, src), what=src.id))
            except tel.ReadTimeout as err:
                self._drop(src, str(err))
                continue
            except Exception:
                continue
            if reasons:
                self.notes.append(f"GPU {src.id} is not at stock power: {'; '.join(reasons)}")
        self.sampler.start()
        t0 = time.time()
        probe_s = min(tel.STEP_PROBE_S, self.baseline_s / 2)
        for src in list(self._gpu_sources):  # the sensors' update periods, measured while the GPU idles
            try:
                tel.timeboxed(partial(src.measure_steps, probe_s), 2 * probe_s + tel.READ_TIMEOUT_S, src.id)
            except tel.ReadTimeout as err:
                self._drop(src, str(err))
        if self._gpu_sources:  # the baseline reads GPUs only: without one there is nothing to wait for
            time.sleep(max(0.0, t0 + self.baseline_s - time.time()))
        self.sampler.sample_once()
        self.baseline = window_summary(self.sampler.samples, t0, time.time())
        self.notes += baseline_notes(self.baseline)
        self.t_start = time.time()
        self._last_row_t = self.t_start

    def _drop(self, src: tel.AmdGpuSource | tel.NvmlGpuSource, why: str) -> None:
        """Sample `src` no more (a read that never returned), and say so up front."""
        self._gpu_sources.remove(src)
        if self.sampler is not None:
            self.sampler.dropped[src.id] = why
        self.notes.append(f"GPU {src.id} is not sampled: {why} (a wedged sensor file or driver call)")

    def own_pid(self, pid: int) -> None:
        """The benchmark's main process (host pid): its cgroup v2 (a container) or its process tree is
        the benchmark's own CPU and GPU use. 0 (unknown) leaves other load unmeasured."""
        if pid <= 0:
            return
        self._own_pids.add(pid)
        if _session(pid) == pid:  # it leads its own session: its descendants are the benchmark too
            self._own_sid = pid
        cg = cgroup_of_pid(pid) if self._cgroup else None
        if cg is not None:
            self._own = lambda: tel.cgroup_cpu_seconds(cg)
        else:
            self._own = lambda: tel.process_tree_cpu_seconds(pid)
        if self.sampler is not None and self.t_start is not None:
            self.sampler.sample_once()  # a sample with the benchmark's own CPU before its first window

    def line(self, text: str, t: float | None = None) -> None:
        """A stderr line of the benchmark, stamped on arrival; a `--progress` line that starts a test's
        window is also an edge read (Sampler.sample_once: NVML's energy counter is read there)."""
        m = _PROGRESS.search(text) if self.enabled else None
        if m:
            k, n, reps = (int(g) for g in m.groups())
            self._edges.start(k, n, time.time() if t is None else t, reps)
            if self.sampler is not None and self.sampler.running:
                self.sampler.sample_once()
                self._claim(self.sampler.samples_between(time.time() - 1.0, time.time() + 1.0))

    def mark(self) -> float:
        """The start of a window (a vLLM/SGLang phase, a measured command): now, as time.time(), with an
        edge read right after it (Sampler.sample_once) when sampling."""
        t = time.time()
        if self.sampler is not None and self.sampler.running:
            self.sampler.sample_once()
        return t

    def test(self, raw: dict[str, Any], tokens: int | None, t: float | None = None) -> dict[str, Any]:
        """Telemetry and flags of the test whose result row `raw` just arrived (a llama-bench row:
        samples_ns); `tokens`: those one repetition of it counts (n_prompt + n_gen as the validity pass
        reads them, llama_bench.check.row_tokens; None when they are no counts: no token figure)."""
        if self.sampler is None:
            return {}
        t1 = time.time() if t is None else t
        self.sampler.sample_once()  # a sample at or after the window's end, so the edge is bracketed
        start = self._edges.row()
        if start is not None:
            (t0, reps), source = start, "progress"
        else:
            t0, reps, source = self._last_row_t or self.t_start or t1, None, "previous-row"
        if reps is None:
            samples = raw.get("samples_ns") or raw.get("samples_ts")
            reps = len(samples) if isinstance(samples, list) and samples else None
        near = self.sampler.samples_between(t0 - WINDOW_MARGIN_S, t1 + WINDOW_MARGIN_S)
        counted = tokens * reps if reps and tokens is not None else None
        summary = window_summary(near, t0, t1, counted, self.sampler.rate_hz)
        # no test edges: the window holds other tests too, its energy is not this one's
        if source != "progress":
            summary = without_energy(summary, "no_test_edges")
        elif holds_untimed_work(summary.get("duration_s"), raw.get("samples_ns")):
            summary = without_energy(summary, "window_holds_untimed_work")
        summary["window_from"] = source
        self._last_row_t = t1
        return self._flagged(summary, near)

    def window(self, t0: float, t1: float, tokens: float | None) -> dict[str, Any]:
        """Telemetry and flags of any window (a vLLM/SGLang command, a whole measured command)."""
        if self.sampler is None:
            return {}
        self.sampler.sample_once()
        near = self.sampler.samples_between(t0 - WINDOW_MARGIN_S, t1 + WINDOW_MARGIN_S)
        summary = window_summary(near, t0, t1, tokens, self.sampler.rate_hz)
        return self._flagged(summary, near)

    def _flagged(self, summary: dict[str, Any], near: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """A window's summary with the benchmark's own GPU pids (`own_pids`, where known: what a reader
        re-derives gpu-shared by) and its flags."""
        self._claim(near)
        if self._own_pids:
            summary["own_pids"] = sorted(self._own_pids)
        return {"telemetry": summary, "flags": window_flags(summary, self._own_pids or None)}

    def _claim(self, samples: Sequence[dict[str, Any]]) -> None:
        """Add to the benchmark's own pids the GPU processes of `samples` that belong to the measured
        command's own session (a llama-bench a `sh -c` wrapper started is the benchmark, not another tenant).
        Only processes still alive can be asked; a session is the command's only when it leads it (measure
        starts it with a new session)."""
        if self._own_sid is None:
            return
        for s in samples:
            for p in s.get("procs") or () if isinstance(s.get("procs"), list) else ():
                pid = p.get("pid") if isinstance(p, dict) else None
                if isinstance(pid, int) and pid not in self._own_pids and _session(pid) == self._own_sid:
                    self._own_pids.add(pid)

    def finish(self) -> dict[str, Any]:
        """Stop sampling; the run's facts: {"trace", "trace_error", "samples", "missed_ticks", "gpus",
        "kernel_log"}; `trace_error` (None, or the path and what the trace kept) when writing it failed."""
        if self.sampler is None:
            return {}
        samples = self.sampler.stop()
        if self.sampler.trace_error and self.on_note:
            self.on_note(f"telemetry trace {self.sampler.trace_error}")
        kernel = self._kernel.read() if self._kernel else None
        return {
            "trace": str(self.trace_path) if self.trace_path else None,
            "trace_error": self.sampler.trace_error,
            "samples": len(samples),
            "missed_ticks": self.sampler.missed_ticks,
            "gpus": [g.to_dict() for g in self.gpus],
            "kernel_log": kernel,
        }


def _session(pid: int) -> int | None:
    """The session id of a live process (os.getsid), None when it is gone or not ours to ask."""
    try:
        return os.getsid(pid)
    except OSError:
        return None


class _TestEdges:
    """Which `--progress` start belongs to which result row, over one or more llama-bench processes in
    sequence (a measured `sh -c 'llama-bench ...; llama-bench ...'`: process repeats). Test k of
    process g is (g, k): a progress index below the last one seen, or one already matched to its row,
    starts the next process; rows are matched in order, N per process (N of "benchmark k/N"). By
    index, not by arrival: test k+1's start may be read before row k when both pipes are ready at
    once (a loaded host), and still belongs to test k+1."""

    def __init__(self) -> None:
        self.starts: dict[tuple[int, int], tuple[float, int]] = {}  # (process, test) -> (t, reps)
        self.total: dict[int, int] = {}  # process -> its number of tests
        self.gen = self.last_k = self.row_gen = self.row_k = 0
        self.matched: set[tuple[int, int]] = set()

    def start(self, k: int, n: int, t: float, reps: int) -> None:
        """Test k of n started its first measured repetition at `t` (time.time())."""
        if k < self.last_k or (self.gen, k) in self.matched:
            self.gen += 1
        self.last_k = k
        self.total[self.gen] = n
        self.starts.setdefault((self.gen, k), (t, reps))

    def row(self) -> tuple[float, int] | None:
        """The (start, repetitions) of the test whose row arrived now, None without its progress line."""
        if self.row_gen < self.gen and self.row_k >= self.total.get(self.row_gen, 0):
            self.row_gen, self.row_k = self.row_gen + 1, 0
        self.row_k += 1
        self.matched.add((self.row_gen, self.row_k))
        return self.starts.pop((self.row_gen, self.row_k), None)


def merge_flags(own: list[str] | None, seen: list[str] | None) -> list[str]:
    """A record's own flags (e.g. stale-build) followed by the window's that are not among them."""
    out = list(own or [])
    return out + [f for f in seen or [] if f not in out]


def with_window(rec: Any, seen: dict[str, Any], window_from: str) -> Any:
    """A copy of BenchRecord `rec` carrying a command window's telemetry (`window_from` says which
    window: e.g. "vllm-latency-runs") and its flags added to the record's own."""
    if not seen:
        return rec
    telemetry = {**seen["telemetry"], "window_from": window_from}
    flags = merge_flags((rec.model_extra or {}).get("flags"), seen.get("flags"))
    return rec.model_copy(update={"telemetry": telemetry, **({"flags": flags} if flags else {})})


def kernel_fault(facts: dict[str, Any]) -> str | None:
    """A failed-row reason when the kernel log showed GPU faults during the run (ring timeout, reset,
    MES failure, page fault, VRAM lost), quoting up to three lines; None otherwise."""
    kl = (facts or {}).get("kernel_log") or {}
    events = kl.get("events") or []
    if not events:
        return None
    quoted = "; ".join(str(e.get("text", ""))[:200] for e in events[:3])
    return f"GPU fault in the kernel log during the run ({len(events)} line(s)): {quoted}"


# ---------------------------------------------------------------------------------------------
# The summary of a window: pure functions over the Sampler's samples (or a trace read back,
# host.telemetry.iter_trace). Section numbers (§) refer to shared/reference/gpu-telemetry.md.

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
        for why in tel.not_stock_reasons(s):
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
    """Host load over the window from the cumulative counters, interpolated at both edges (over the part of
    the window the samples cover). A window shorter than HOST_MIN_WINDOW_S is widened backwards to it, but not
    before the first sample nor, when the benchmark's own CPU is tracked, before its first known value (the
    engine's start of the container is the harness's own work, not another tenant)."""
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
