"""Telemetry sampler overhead (not a test): the CPU time the Sampler costs its process, over N
seconds on this host, with the host source plus every GPU that discover_gpus() finds.

    python3 benchmarks/telemetry_overhead.py [--seconds 30] [--rate 10] [--no-trace] [--json]

Measures process CPU time (time.process_time: user + sys of every thread) over the run while the
main thread sleeps, so what is counted is the sampler thread (source reads, JSON encoding, the trace
write) and the interpreter's idle cost. A run of the same length with no sampler is measured first
and subtracted. The goal (toolkit.host.telemetry): at most 1 % of one core at 10 Hz.

Prints one line per phase and a summary line; --json prints the summary as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolkit.host.telemetry import (  # noqa: E402
    HostSource,
    Sampler,
    Source,
    discover_gpus,
    open_source,
    process_tree_cpu_seconds,
)


def _cpu_over(seconds: float, sampler: Sampler | None) -> tuple[float, float, int]:
    """(process CPU seconds, wall seconds, samples) over `seconds` with the sampler running."""
    c0, w0 = time.process_time(), time.monotonic()
    if sampler is not None:
        sampler.start()
    time.sleep(seconds)
    n = 0
    if sampler is not None:
        sampler.stop()
        n = len(sampler.samples)
    return time.process_time() - c0, time.monotonic() - w0, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--no-trace", action="store_true", help="keep samples in memory only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    refs = discover_gpus()
    sources: list[Source] = [HostSource(lambda: process_tree_cpu_seconds(os.getpid()))]
    for ref in refs:
        try:
            sources.append(open_source(ref))
        except Exception as e:  # a GPU whose source cannot open (no NVML module): say so, go on
            print(f"skipping {ref.id}: {type(e).__name__}: {e}", file=sys.stderr)

    idle_cpu, idle_wall, _ = _cpu_over(args.seconds, None)
    with tempfile.TemporaryDirectory() as tmp:
        trace = None if args.no_trace else Path(tmp) / "telemetry.jsonl"
        sampler = Sampler(sources, rate_hz=args.rate, trace_path=trace)
        cpu, wall, n = _cpu_over(args.seconds, sampler)
        trace_bytes = trace.stat().st_size if trace else 0
    net = max(cpu - idle_cpu * wall / idle_wall, 0.0)
    reads = [s["read_ms"] for s in sampler.samples]
    summary = {
        "sources": [s.id for s in sources],
        "rate_hz": args.rate,
        "seconds": round(wall, 2),
        "samples": n,
        "ticks_missed": sampler.missed_ticks,
        "trace_bytes": trace_bytes,
        "cpu_s": round(cpu, 4),
        "idle_cpu_s": round(idle_cpu, 4),
        "pct_of_one_core": round(100.0 * net / wall, 3),
        "read_ms_median": sorted(reads)[len(reads) // 2] if reads else None,
        "read_ms_max": max(reads) if reads else None,
        "cpus_online": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"no sampler: {idle_cpu:.4f} CPU s over {idle_wall:.1f} s")
        print(
            f"sampler:    {cpu:.4f} CPU s over {wall:.1f} s, {n} samples from {', '.join(summary['sources'])}"
        )
        print(
            f"overhead: {summary['pct_of_one_core']} % of one core at {args.rate:g} Hz "
            f"(read median {summary['read_ms_median']} ms, max {summary['read_ms_max']} ms, "
            f"{trace_bytes} trace bytes, {sampler.missed_ticks} missed ticks)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
