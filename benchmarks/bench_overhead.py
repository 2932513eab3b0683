"""Bench-overhead benchmark (not a test): `toolkit bench` wall time against the same llama-bench
command run by hand (`docker run ...`, the exact command toolkit recorded), in alternating pairs
(A B, B A, A B, ...) so that machine drift cancels, and the median of the per-pair ratios.

    python3 benchmarks/bench_overhead.py [--image cpu] [--model tiny-qwen3moe] [--pairs 10]
                                         [--n-prompt 4096] [--n-gen 256] [--repetitions 20]

The workload is issue 15's: the tiny stand-in model, one pp4096 and one tg256 test, 20 repetitions
(~17 s of llama-bench on the 2-core machine). Each pair prints, as one JSON line: toolkit wall
seconds, hand-run wall seconds, their ratio (goal: median <= 1.02), the toolkit process's own CPU
seconds (user + sys of it and its children: the `docker` CLI is not one of them, the container is
not counted) and llama-bench's measured time. The last line is the summary: median, min and max
ratio, and the median CPU time.

Needs the image built (`toolkit build --image cpu`). Runs in a throwaway project copy (matrix with
the workload above, results in a temporary folder): the project's results/ are not touched.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _project(dest: Path, image: str, model: str, n_prompt: int, n_gen: int, reps: int) -> Path:
    """A copy of the project's matrix and templates with the one-image, one-model workload."""
    shutil.copytree(ROOT / "Dockerfile.templates", dest / "Dockerfile.templates")
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [i for i in data["images"] if i["name"] == image]
    data["models"] = [m for m in data["models"] if m["name"] == model]
    for m in data["models"]:  # the model file stays where the project keeps it
        m["path"] = str((ROOT / m["path"]).resolve())
    data["bench"] = {
        **data["bench"],
        "n_prompt": [n_prompt],
        "n_gen": [n_gen],
        "n_ubatch": [512],
        "repetitions": reps,
    }
    (dest / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (dest / "results").mkdir()
    shutil.copy(
        ROOT / "results" / "builds.jsonl", dest / "results" / "builds.jsonl"
    )  # the image's build record
    return dest


def _toolkit(project: Path, image: str) -> tuple[float, float, list[dict]]:
    """(wall s, own CPU s, this run's records) of one `toolkit bench`."""
    before = os.times()
    t0 = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "bench",
            "--matrix",
            str(project / "matrix.yaml"),
            "--image",
            image,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=project,
    )
    wall = time.monotonic() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    recs = [
        json.loads(x) for f in (project / "results").glob("*/bench.jsonl") for x in f.read_text().splitlines()
    ]
    last = max(r["run_id"] for r in recs)
    return wall, cpu, [r for r in recs if r["run_id"] == last]


def _by_hand(cmd: list[str]) -> float:
    t0 = time.monotonic()
    p = subprocess.run(cmd, check=True, capture_output=True, text=True)  # output kept for OVERHEAD_DEBUG=1
    if os.environ.get("OVERHEAD_DEBUG"):
        print(cmd, p.stdout[-300:], p.stderr[-300:], file=sys.stderr)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default="cpu")
    ap.add_argument("--model", default="tiny-qwen3moe")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--n-prompt", type=int, default=4096)
    ap.add_argument("--n-gen", type=int, default=256)
    ap.add_argument("--repetitions", type=int, default=20)
    a = ap.parse_args()
    project = _project(
        Path(tempfile.mkdtemp(prefix="toolkit-overhead-")) / "p",
        a.image,
        a.model,
        a.n_prompt,
        a.n_gen,
        a.repetitions,
    )
    _, _, recs = _toolkit(
        project, a.image
    )  # warm-up pair member (model page cache, image layers); not counted
    cmd = recs[0]["command"]
    _by_hand(cmd)
    rows = []
    for i in range(a.pairs):
        order = ("toolkit", "hand") if i % 2 == 0 else ("hand", "toolkit")
        got: dict[str, float] = {}
        for who in order:
            if who == "toolkit":
                got["toolkit_s"], got["toolkit_cpu_s"], recs = _toolkit(project, a.image)
            else:
                got["hand_s"] = _by_hand(cmd)
        tests_s = sum(sum(r["raw"].get("samples_ns") or []) / 1e9 for r in recs)
        rows.append(
            {
                "pair": i + 1,
                "order": "-".join(order),
                "toolkit_s": round(got["toolkit_s"], 2),
                "hand_s": round(got["hand_s"], 2),
                "ratio": round(got["toolkit_s"] / got["hand_s"], 3),
                "toolkit_cpu_s": round(got["toolkit_cpu_s"], 3),
                "llama_bench_tests_s": round(tests_s, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    ratios = [r["ratio"] for r in rows]
    print(
        json.dumps(
            {
                "summary": f"{len(rows)} alternating pairs",
                "median_ratio": round(statistics.median(ratios), 3),
                "min_ratio": min(ratios),
                "max_ratio": max(ratios),
                "median_toolkit_cpu_s": round(statistics.median(r["toolkit_cpu_s"] for r in rows), 3),
                "median_hand_s": round(statistics.median(r["hand_s"] for r in rows), 2),
            }
        )
    )
    shutil.rmtree(project.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
