"""The sampler: a background thread reading every source at a fixed rate, keeping the samples and
writing a JSONL trace; and the trace's reader."""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from toolkit.core import jsonsafe
from toolkit.host.telemetry.readers import READ_TIMEOUT_S, ReadTimeout, Source, timeboxed
from toolkit.results import make_folders, open_below


class Sampler:
    """Reads every source `rate_hz` times a second on a background thread, from start() to stop() (or as a
    context manager). Each sample is the source's dict plus `t` (wall time, time.time(), midpoint of the
    read), `source` and `read_ms`; a read that raises gives {"t", "source", "error"} instead and sampling goes
    on. Samples are kept in memory (`samples`, about 1-2 KB each) and, with `trace_path`, appended to it as
    JSONL as they come (flushed, not fsynced, per line; the first line is a header {"telemetry_trace": 1,
    "rate_hz", "sources", "started_t"}).

    `rate_hz` must be ≥ 10 (edges of windows are interpolated between samples). Ticks are scheduled on the
    monotonic clock; a tick that overruns is skipped, not queued (`missed_ticks` counts them). Every read is
    time-boxed (`read_timeout_s`, readers.timeboxed; but a source's whose `reads_cannot_block` is true): a
    source whose read does not return (a wedged GPU's sysfs file) gives one sample {"error", "dropped": True}
    and is read no more (`dropped`: id -> why), so the sampler, and the run it observes, never stop on a
    sensor."""

    MIN_RATE_HZ = 10.0

    def __init__(
        self,
        sources: Sequence[Source],
        rate_hz: float = 10.0,
        trace_path: str | Path | None = None,
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        if not rate_hz >= self.MIN_RATE_HZ:
            raise ValueError(f"Sampler rate_hz {rate_hz}: must be at least {self.MIN_RATE_HZ}")
        ids = [s.id for s in sources]
        if len(set(ids)) != len(ids):
            raise ValueError(f"Sampler: duplicate source ids {ids}")
        self.sources = list(sources)
        self.rate_hz = float(rate_hz)
        self.trace_path = Path(trace_path) if trace_path else None
        self._samples: list[dict[str, Any]] = []
        self._ts: list[float] = []  # the samples' times, sorted (samples_between)
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._trace: Any = None
        self.trace_lines = 0  # lines the trace holds (header included)
        self.trace_error: str | None = None  # why the trace stopped short (disk full): path, what was kept
        self.missed_ticks = 0
        self.read_timeout_s = read_timeout_s
        self.dropped: dict[str, str] = {}
        self.started_t: float | None = None

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._thread is not None

    @property
    def samples(self) -> list[dict[str, Any]]:
        """A copy of the samples so far, in time order."""
        with self._lock:
            return list(self._samples)

    def samples_between(self, t0: float, t1: float) -> list[dict[str, Any]]:
        """The samples read between wall times t0 and t1 (a copy): found by bisection, so a window's
        summary costs what its span holds, not the whole run's history (5,980 rows took 600 s when each
        copied and scanned every sample). Reads from other threads land out of order by at most a
        read's duration: callers pass a margin."""
        with self._lock:
            return self._samples[bisect.bisect_left(self._ts, t0) : bisect.bisect_right(self._ts, t1)]

    def sample_once(self, edge: bool = True) -> list[dict[str, Any]]:
        """Read every source once now; returns and records the samples. An `edge` read (a window starts
        or ends here) also reads what a source reads only every so often (NVML's energy counter:
        NvmlGpuSource.reads_counter_on_edges), so a window's energy is the counter's own difference
        across it; the ticks read with edge=False. Safe to call from another thread while sampling runs
        (reads are serialised: sources keep state)."""
        with self._read_lock:
            return self._sample_once(edge)

    def _sample_once(self, edge: bool) -> list[dict[str, Any]]:
        out = []
        for src in self.sources:
            if src.id in self.dropped:
                continue
            t_a = time.time()
            m_a = time.perf_counter()
            edge_aware = edge and getattr(src, "reads_counter_on_edges", False)
            try:
                read = (lambda s=src: s.read(edge=True)) if edge_aware else src.read  # type: ignore[call-arg]
                if getattr(src, "reads_cannot_block", False):  # no thread per tick for it (HostSource)
                    data = read()
                else:
                    data = timeboxed(read, self.read_timeout_s, f"{src.id}'s read")
                sample = {"t": 0.0, "source": src.id, **data}
            except ReadTimeout as e:
                self.dropped[src.id] = f"{e}: not read again (a wedged sensor file or driver call)"
                sample = {"t": 0.0, "source": src.id, "error": self.dropped[src.id], "dropped": True}
            except Exception as e:  # a failing source never stops the sampler
                sample = {"t": 0.0, "source": src.id, "error": f"{type(e).__name__}: {e}"}
            vendor = getattr(src, "vendor", None)
            if "error" in sample and vendor:
                sample["vendor"] = vendor  # a GPU's error sample still tells its summary it is a GPU
            dt = time.perf_counter() - m_a
            sample["t"] = t_a + dt / 2
            sample["read_ms"] = round(dt * 1e3, 3)
            out.append(sample)
        with self._lock:
            for smp in out:  # kept sorted by time (a read from another thread may come in between)
                i = bisect.bisect_right(self._ts, smp["t"])
                self._ts.insert(i, smp["t"])
                self._samples.insert(i, smp)
        self._write_trace([json.dumps(s, separators=(",", ":")) for s in out])
        return out

    def _write_trace(self, lines: list[str]) -> None:
        """Append `lines` to the trace; on the first failure (disk full, a closed file) stop writing it,
        keep sampling into memory and say in `trace_error` which path stopped where."""
        if self._trace is None:
            return
        try:
            self._trace.write("".join(line + "\n" for line in lines))
            self._trace.flush()
            self.trace_lines += len(lines)
        except (OSError, ValueError) as err:
            with contextlib.suppress(OSError, ValueError):
                self._trace.close()
            self._trace = None
            why = getattr(err, "strerror", None) or str(err)
            self.trace_error = (
                f"{self.trace_path}: {why}: the trace holds only its first {self.trace_lines} line(s) (the "
                "last may be torn); sampling went on in memory, so every window summary is whole"
            )

    def _run(self) -> None:
        # the lowest CPU priority for this thread only (Linux: setpriority on a thread id): a benchmark
        # that keeps every core busy (llama-bench on the CPU) is preempted as little as possible by the
        # ticks; a loaded host may then delay a tick, which the summaries see as a gap, never as a value
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        period = 1.0 / self.rate_hz
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self.sample_once(edge=False)
            next_tick += period
            now = time.monotonic()
            if now > next_tick:
                skipped = int((now - next_tick) / period) + 1
                self.missed_ticks += skipped
                next_tick += skipped * period
            self._stop.wait(max(0.0, next_tick - time.monotonic()))

    def start(self) -> Sampler:
        """Open the trace (append) and start the thread; the first tick reads at once."""
        if self._thread is not None:
            raise RuntimeError("Sampler already started")
        self.started_t = time.time()
        if self.trace_path is not None:
            make_folders(self.trace_path.parent)  # results/<digest12>/telemetry: never through a link
            fd = open_below(self.trace_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            self._trace = os.fdopen(fd, "a", encoding="utf-8")
            header = {
                "telemetry_trace": 1,
                "rate_hz": self.rate_hz,
                "sources": [s.id for s in self.sources],
                "started_t": self.started_t,
            }
            self._write_trace([json.dumps(header)])
        self._stop.clear()  # a sampler started again after stop() ticks again
        self._thread = threading.Thread(target=self._run, name="telemetry-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        """Stop the thread (after one last tick), close the trace and each source's close() if it
        has one; returns the samples. Safe to call twice."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.sample_once()  # a sample after the end of the last window
        if self._trace is not None:
            with contextlib.suppress(OSError):
                self._trace.close()
            self._trace = None
        for src in self.sources:
            close = getattr(src, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    close()
        return self.samples

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


MAX_TRACE_LINE = 1 << 16
"""Bytes of the longest trace line read (a sample is 1-2 KB): a file named as a trace that is not one
(a 4 GB file without a newline) is read in bounded memory."""


def iter_trace(path: str | Path, warnings: list[str] | None = None) -> Iterable[dict[str, Any]]:
    """Samples of a Sampler trace file (the header line skipped). A line that is not a JSON object
    (a torn last line, bytes that are not UTF-8, nesting or numbers no sampler writes: the one safe
    parse, toolkit.core.jsonsafe) is skipped and noted in `warnings` as `path:line: why`."""
    with open(path, "rb") as f:
        n = 0
        while line := f.readline(MAX_TRACE_LINE + 1):
            n += 1
            if len(line) > MAX_TRACE_LINE:  # no sampler writes such a line: skip it whole, read bounded
                while (rest := f.readline(MAX_TRACE_LINE)) and not rest.endswith(b"\n"):
                    pass
                if warnings is not None:
                    warnings.append(f"{path}:{n}: skipped a trace line longer than {MAX_TRACE_LINE} bytes")
                continue
            obj, why = jsonsafe.parse_line(line)
            if why is not None:
                if warnings is not None:
                    warnings.append(f"{path}:{n}: skipped a trace line: {why}")
                continue
            if obj is not None and "telemetry_trace" not in obj:
                yield obj
