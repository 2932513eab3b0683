"""What the system was doing while a benchmark measured: one observer per (image, model) run, or per
`toolkit measure` command.

The observer samples the host and the GPUs the run uses (toolkit.host.telemetry.Sampler, 10 Hz,
outside the container, no root), writes the raw trace beside the results, takes an idle baseline
before the benchmark starts, and for each test llama-bench finishes returns the window's telemetry
summary and flags (toolkit.analysis.telemetry.window_summary / flags). At the end it reads the kernel
log for GPU faults in the run's window.

Test window: from the arrival of the test's first measured repetition (`--progress` line
"benchmark i/N: prompt run 1/R" or "gen run 1/R") to the arrival of its result row; tokens =
(n_prompt + n_gen) x repetitions, the tokens llama-bench's t/s counts. Without progress lines the
window starts at the previous row (or the benchmark's start) and says so (`window_from`); it then
holds warm-up and other work, so it gets no energy (`energy-invalid:no_test_edges`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from toolkit.analysis import telemetry as tana
from toolkit.host import telemetry as tel
from toolkit.results.telemetry_check import holds_untimed_work, merge_flags, without_energy
from toolkit.results.window_check import WINDOW_MARGIN_S

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
        self.baseline = tana.window_summary(self.sampler.samples, t0, time.time())
        self.notes += tana.baseline_notes(self.baseline)
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
        summary = tana.window_summary(near, t0, t1, counted, self.sampler.rate_hz)
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
        summary = tana.window_summary(near, t0, t1, tokens, self.sampler.rate_hz)
        return self._flagged(summary, near)

    def _flagged(self, summary: dict[str, Any], near: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """A window's summary with the benchmark's own GPU pids (`own_pids`, where known: what a reader
        re-derives gpu-shared by) and its flags."""
        self._claim(near)
        if self._own_pids:
            summary["own_pids"] = sorted(self._own_pids)
        return {"telemetry": summary, "flags": tana.flags(summary, self._own_pids or None)}

    def _claim(self, samples: Sequence[dict[str, Any]]) -> None:
        """Add to the benchmark's own pids the GPU processes of `samples` that belong to the measured
        command's own session (a llama-bench a `sh -c` wrapper started is the benchmark, not another
        tenant: on the H200 every row of three llama-bench runs under one `toolkit measure` was
        flagged gpu-shared by its own children). Only processes still alive can be asked; a
        session is the command's only when it leads it (measure starts it with a new session)."""
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
