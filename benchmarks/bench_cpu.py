"""The toolkit's own CPU time per `toolkit bench` (benchmark, not a test): user + sys of the toolkit
process and its children (the `docker` CLI is not one of them; the container's work is not counted),
for matrices of 1, 10 and 100 llama-bench cases (tiny model, one repetition each), real runs and
`--dry-run`, 3 rounds alternating. Shows the fixed cost and the per-case cost.

    python3 benchmarks/bench_cpu.py [--image cpu] [--rounds 3]

Needs the image built (`toolkit build --image cpu`). Runs in project copies under a temporary folder;
the project's results/ are not touched. Run it with the Python the toolkit is installed in, with
bytecode written once (a first run does), on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _project(dest: Path, image: str, cases: int) -> Path:
    shutil.copytree(ROOT / "Dockerfile.templates", dest / "Dockerfile.templates")
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [i for i in data["images"] if i["name"] == image]
    data["models"] = [m for m in data["models"] if m["name"] == "tiny-qwen3moe"]
    data["models"][0]["path"] = str((ROOT / data["models"][0]["path"]).resolve())
    data["bench"].update(
        {
            "n_prompt": list(range(8, 8 + cases)),
            "n_gen": [0],
            "n_ubatch": [8],
            "n_batch": [8],
            "repetitions": 1,
        }
    )
    (dest / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (dest / "results").mkdir()
    shutil.copy(ROOT / "results" / "builds.jsonl", dest / "results" / "builds.jsonl")
    return dest


def _cpu_seconds(project: Path, *extra: str) -> float:
    before = os.times()
    p = subprocess.run(
        [sys.executable, "-m", "toolkit", "bench", "--matrix", str(project / "matrix.yaml"), *extra],
        cwd=project,
        capture_output=True,
        text=True,
    )
    after = os.times()
    if p.returncode != 0:
        raise SystemExit(f"toolkit bench {' '.join(extra)} exited {p.returncode}: {p.stderr[-500:]}")
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default="cpu")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="toolkit-cpu-"))
    projects = {n: _project(tmp / f"p{n}", a.image, n) for n in (1, 10, 100)}
    for p in projects.values():
        _cpu_seconds(p)  # warm: tiny model generated, bytecode, page cache
    got: dict[tuple[int, str], list[float]] = {}
    for _ in range(a.rounds):
        for n, p in projects.items():
            got.setdefault((n, "real"), []).append(_cpu_seconds(p))
            got.setdefault((n, "dry-run"), []).append(_cpu_seconds(p, "--dry-run"))
    for (n, mode), v in sorted(got.items()):
        print(
            f"{n:>3} cases {mode:<7} CPU s: {', '.join(f'{x:.2f}' for x in v)}  median {statistics.median(v):.2f}"
        )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
