"""Bench-overhead benchmark (not a test): toolkit bench wall time vs the same llama-bench command
run by hand in the same image (`docker run ...`), side by side in one run.

    python3 benchmarks/bench_overhead.py [--image cpu] [--model tiny-qwen3moe] [--rounds 3]

Prints per round: toolkit wall seconds, hand-run `docker run` wall seconds, their ratio (target
<= 1.02), and llama-bench's own summed test time (measurement share of the wall time).
Needs the image built (`toolkit build --image cpu`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default="cpu")
    ap.add_argument("--model", default="tiny-qwen3moe")
    ap.add_argument("--matrix", default=str(ROOT / "matrix.yaml"))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    results = Path(tempfile.mkdtemp(prefix="toolkit-overhead-"))
    builds = Path(a.matrix).resolve().parent / "results" / "builds.jsonl"
    (results / "builds.jsonl").write_text(builds.read_text())  # bench reads the image's build record
    rows = []
    for i in range(a.rounds):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "toolkit", "bench", "--matrix", a.matrix, "--results", str(results),
                        "--image", a.image, "--model", a.model], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        toolkit_s = time.monotonic() - t0
        recs = [json.loads(x) for f in results.glob("*/bench.jsonl") for x in f.read_text().splitlines()]
        last_run = max(r["run_id"] for r in recs)
        mine = [r for r in recs if r["run_id"] == last_run]
        cmd = mine[0]["command"]
        tests_s = sum(sum(r["raw"].get("samples_ns") or []) / 1e9 for r in mine)
        # each record is written as its test completes: timing.elapsed_s of the last one is the container's
        # wall time up to its last test (a failed row, if any, carries the whole run's wall_s)
        container_s = max(r["timing"].get("wall_s", r["timing"].get("elapsed_s", 0.0)) for r in mine)
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hand_s = time.monotonic() - t0
        rows.append({"round": i + 1, "toolkit_s": round(toolkit_s, 2), "docker_run_s": round(hand_s, 2),
                     "ratio": round(toolkit_s / hand_s, 3), "llama_bench_tests_s": round(tests_s, 2),
                     "toolkit_over_tests": round(toolkit_s / tests_s, 2) if tests_s else None,
                     "toolkit_overhead_s": round(toolkit_s - container_s, 2)})
        print(json.dumps(rows[-1]), flush=True)
    best = min(rows, key=lambda r: r["ratio"])
    print(json.dumps({"summary": "median-free best-of", "best_ratio": best["ratio"],
                      "median_ratio": sorted(r["ratio"] for r in rows)[len(rows) // 2]}))


if __name__ == "__main__":
    main()
