"""Outside-the-containers benchmark (not a test): `toolkit bench` of two toolkit trees, alternating
(A B B A A B ...), on one throwaway project copy (bench_overhead.py's workloads), each run's wall,
own CPU (user + sys) and seconds outside its containers (bench_overhead._outside: before the first
container's start, between containers, after the last one's end, from the engine's events), with the
1-minute load average before each run; the last line the medians per tree.

    python3 benchmarks/outside_paired.py --trees /path/to/base /path/to/new [--rounds 3]
                                         [--workload default|issue15] [--allow-concurrent]

Each tree is the folder put on PYTHONPATH (a checkout or worktree of the toolkit). Needs the image
built and the engine's `docker events`; a warm-up run of each tree (bytecode) is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path

import bench_overhead as bo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", nargs=2, required=True, metavar="TREE")
    ap.add_argument("--rounds", type=int, default=3, help="each round runs each tree once (ABBA order)")
    ap.add_argument("--workload", choices=["default", "issue15"], default="default")
    ap.add_argument("--image", default="cpu")
    ap.add_argument("--model", default="tiny-qwen3moe")
    ap.add_argument("--n-prompt", type=int, default=4096)
    ap.add_argument("--n-gen", type=int, default=256)
    ap.add_argument("--repetitions", type=int, default=20)
    ap.add_argument("--allow-concurrent", action="store_true")
    a = ap.parse_args()
    extra = ["--allow-concurrent"] if a.allow_concurrent else []
    project = bo._project(Path(tempfile.mkdtemp(prefix="toolkit-outside-")) / "p", a)
    trees = [str(Path(t).resolve()) for t in a.trees]

    def run(tree: str) -> dict:
        os.environ["PYTHONPATH"] = tree
        load = os.getloadavg()[0]
        wall, cpu, _, commands, out = bo._toolkit(project, a.image, *extra)
        return {
            "tree": tree,
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 3),
            **out,
            "load_1m": round(load, 2),
        }

    for t in trees:  # warm-up: bytecode written, model in the page cache
        run(t)
    rows = []
    for i in range(a.rounds):
        for t in trees if i % 2 == 0 else trees[::-1]:
            rows.append(run(t))
            print(json.dumps(rows[-1]), flush=True)
    for t in trees:
        mine = [r for r in rows if r["tree"] == t]
        med = {k: round(statistics.median(r[k] for r in mine), 3) for k in mine[0] if k != "tree"}
        print(json.dumps({"summary": t, "runs": len(mine), "median": med}))
    shutil.rmtree(project.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
