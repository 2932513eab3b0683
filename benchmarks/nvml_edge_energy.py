"""Short windows' energy with the energy counter read at window edges (not a test; run on an NVIDIA
host with nvidia-ml-py and torch): the RunObserver as `toolkit bench` and `toolkit measure` drive it,
around GPU bursts (torch fp16 matmuls) of 0.2-2 s, each window opened by a llama-bench `--progress`
line and closed by its row, at a random offset from the sampler's once-a-second counter reads.

For each window it prints the observer's energy (its source: the counter, or the integrated 1 s
averaged power) against a reference: nvmlDeviceGetTotalEnergyConsumption read directly just before
the progress line and just before the row. Also the sampler's CPU cost over the whole run.

    python3 benchmarks/nvml_edge_energy.py [--windows 12] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolkit.bench.observe import RunObserver  # noqa: E402
from toolkit.host import telemetry as tel  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--windows", type=int, default=12)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import pynvml as n
    import torch

    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    gpus = [g for g in tel.discover_gpus() if g.vendor == "nvidia"][:1]
    obs = RunObserver(Path(tempfile.mkdtemp()) / "trace.jsonl", gpus, baseline_s=1.0)
    c0 = time.process_time()
    w0 = time.time()
    obs.start()
    rows = []
    rng = random.Random(1)
    durations = [0.2, 0.5, 1.0, 2.0]
    for k in range(1, args.windows + 1):
        time.sleep(rng.uniform(0.3, 1.3))  # idle, at a random phase of the counter's 1 s reads
        d = durations[k % len(durations)]
        e0 = n.nvmlDeviceGetTotalEnergyConsumption(h)
        obs.line(f"llama-bench: benchmark {k}/{args.windows}: prompt run 1/1")
        end = time.time() + d
        while time.time() < end:
            a @ a
            torch.cuda.synchronize()
        e1 = n.nvmlDeviceGetTotalEnergyConsumption(h)
        seen = obs.test({"n_prompt": 512, "n_gen": 0, "samples_ns": [int(d * 1e9)]})
        (g,) = seen["telemetry"]["gpus"].values()
        ref = (e1 - e0) / 1e3
        rows.append(
            {
                "window_s": round(seen["telemetry"]["duration_s"], 3),
                "energy_j": g["energy_j"],
                "source": g["energy_source"],
                "reason": g["energy_invalid_reason"],
                "reference_j": ref,
                "ratio": round(g["energy_j"] / ref, 4) if g["energy_j"] else None,
            }
        )
    facts = obs.finish()
    cpu = time.process_time() - c0
    wall = time.time() - w0
    counter = sum(1 for s in tel.iter_trace(Path(facts["trace"])) if s.get("energy_j") is not None)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    out = {
        "windows": rows,
        "counter_sources": sorted({r["source"] for r in rows}),
        "ratio_median": statistics.median(ratios) if ratios else None,
        "ratio_range": [min(ratios), max(ratios)] if ratios else None,
        "samples": facts["samples"],
        "counter_reads": counter,
        "wall_s": round(wall, 1),
        "process_cpu_s_incl_torch": round(cpu, 2),
    }
    if args.json:
        print(json.dumps(out))
    else:
        for r in rows:
            print(r)
        print({k: v for k, v in out.items() if k != "windows"})


if __name__ == "__main__":
    main()
