"""`toolkit import` of a large llama-bench JSONL: wall time and peak RSS of the import process.

    python3 benchmarks/import_scale.py 200M          # generate 200 MB, import it, print the figures
    python3 benchmarks/import_scale.py 1G --keep /tmp/big.jsonl

The file is made from a real row (tests/data/cases/cuda-h200-qwen3moe-30b-synthetic.jsonl: llama-bench
at the pinned commit on an H200): every row a distinct test (n_depth counts up, test_time steps), every
50th row repeats the test of the row before (a repetition of one cell, as `-r` across runs gives), and
a log line now and then (a capture that merged stderr). The import runs as a child process
(`toolkit import`, through toolkit.cli.main:main); its peak RSS is resource.getrusage(RUSAGE_CHILDREN).ru_maxrss.
Target (issue 24): 1 GB in <= 300 MB peak RSS at >= 10 MB/s.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "cases" / "cuda-h200-qwen3moe-30b-synthetic.jsonl"


def size_arg(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B")
    return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)


def generate(path: Path, size: int, source: Path = SOURCE) -> int:
    """Write about `size` bytes of JSONL rows made from the first row of `source`; returns the rows."""
    row = json.loads(source.read_text().splitlines()[0])
    rows = 0
    with path.open("w") as fh:
        written = 0
        while written < size:
            rows += 1
            r = dict(row)
            repeat = rows % 50 == 0
            r["n_depth"] = rows - 1 if repeat else rows
            r["test_time"] = f"2026-01-01T{(rows // 3600) % 24:02d}:{(rows // 60) % 60:02d}:{rows % 60:02d}Z"
            line = json.dumps(r) + "\n"
            if rows % 1000 == 0:
                line = f"ggml_cuda_init: found 1 CUDA devices (log line {rows})\n" + line
            fh.write(line)
            written += len(line)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("size", type=size_arg, help="bytes of JSONL to generate, e.g. 200M, 1G")
    ap.add_argument("--keep", type=Path, default=None, help="write the JSONL here and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = args.keep or Path(tmp) / "big.jsonl"
        t0 = time.monotonic()
        rows = generate(src, args.size)
        gen_s = time.monotonic() - t0
        size = src.stat().st_size
        cmd = [sys.executable, "-c", "from toolkit.cli.main import main; main()", "import", str(src), "--label", "scale",
               "--results", str(Path(tmp) / "results")]  # fmt: skip
        t0 = time.monotonic()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
        out = {
            "bytes": size,
            "rows": rows,
            "generate_s": round(gen_s, 1),
            "import_exit": done.returncode,
            "import_wall_s": round(wall, 1),
            "mb_per_s": round(size / 1e6 / wall, 2),
            "peak_rss_mb": round(peak_mb, 1),
            "stdout_tail": done.stdout.strip().splitlines()[-2:],
            "stderr_head": done.stderr.strip().splitlines()[:3],
        }
        print(json.dumps(out, indent=2))  # noqa: T201
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
