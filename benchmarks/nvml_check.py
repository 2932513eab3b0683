"""The NVML telemetry path on a real NVIDIA GPU (run on the lent H200; not a test).

Samples GPU 0 with toolkit's own Sampler + NvmlGpuSource at 10 Hz through three windows: idle, a
matrix-product load alone (the "benchmark", run in this process), and the same load while a second
process runs matrix products on the same GPU (another tenant). Prints each window's summary and
flags as JSON: energy from the hardware counter, power, clocks, throttle reasons, processes; the
contended window must say gpu-shared, the alone window must not.

    python3 benchmarks/nvml_check.py [--seconds 8]      (needs torch and nvidia-ml-py)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolkit.bench.observe import baseline_notes, window_summary  # noqa: E402
from toolkit.host import telemetry as tel  # noqa: E402
from toolkit.results.telemetry_flags import window_flags  # noqa: E402

CONTEND = (
    "import time,torch\n"
    "a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16);b=torch.randn_like(a)\n"
    "end=time.time()+{s}\n"
    "while time.time()<end:\n  c=a@b;torch.cuda.synchronize()\n"
)


def load(seconds: float) -> int:
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    n, end = 0, time.time() + seconds
    while time.time() < end:
        _ = a @ b
        torch.cuda.synchronize()
        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--out", default="nvml-check")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = [g for g in tel.discover_gpus() if g.vendor == "nvidia"]
    print("gpus:", [g.to_dict() for g in gpus], flush=True)
    src = tel.open_source(gpus[0])
    print("power state:", tel.power_state(src), "not stock:", tel.not_stock_reasons(tel.power_state(src)))
    host = tel.HostSource(lambda: tel.process_tree_cpu_seconds(os.getpid()))
    s = tel.Sampler([host, src], rate_hz=10, trace_path=out / "trace.jsonl").start()
    marks = {}
    t = time.time()
    time.sleep(args.seconds)
    marks["idle"] = (t, time.time())
    load(2)  # warm-up (CUDA context, kernels)
    t = time.time()
    load(args.seconds)
    marks["alone"] = (t, time.time())
    other = subprocess.Popen([sys.executable, "-c", CONTEND.format(s=args.seconds + 6)])
    time.sleep(4)
    t = time.time()
    load(args.seconds)
    marks["contended"] = (t, time.time())
    other.wait()
    samples = s.stop()
    for note in baseline_notes(window_summary(samples, *marks["idle"])):  # the idle window: a run note
        print(note, flush=True)
    result = {}
    for name, (t0, t1) in marks.items():
        summ = window_summary(samples, t0, t1)
        result[name] = {"summary": summ, "flags": window_flags(summ, {os.getpid()})}
    (out / "windows.json").write_text(json.dumps(result, indent=1, default=str))
    for name, r in result.items():
        g = next(iter(r["summary"]["gpus"].values()))
        print(
            f"{name}: {r['summary']['duration_s']:.1f} s, power {g['power_w_mean']:.0f} W (max {g['power_w_max']:.0f}), "
            f"energy {g['energy_j']} J ({g['energy_source']}; integrated {g['energy_integrated_j']}), "
            f"sclk {g['sclk_mhz_min']}-{g['sclk_mhz_max']} MHz, busy {g['busy_pct_mean']}, procs_max {g['procs_max']}, "
            f"throttle {g['throttle_share']}, flags {r['flags']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
