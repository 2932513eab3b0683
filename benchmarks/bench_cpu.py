"""The toolkit's own CPU time per `toolkit bench` (benchmark, not a test): user + sys of the toolkit
process and its children (the `docker` CLI is not one of them; the container's work is not counted),
3 rounds alternating, the 1-minute load average beside each figure. Workloads (--cases):

- `default`: the project's matrix as it is (its `bench:` axes, the canary, the model's depth sweep)
  for one image and the tiny model: what `toolkit bench --image cpu --model tiny-qwen3moe` does
  (issue 32 item 16);
- `1`, `10`, `100`: matrices of that many llama-bench cases (tiny model, pp8.., tg0, one repetition,
  no canary, no depth sweep), real runs and `--dry-run`: the fixed cost and the per-case cost.

    python3 benchmarks/bench_cpu.py [--image cpu] [--rounds 3] [--cases default,1,10,100]
                                    [--no-telemetry] [--no-bytecode]

Needs the image built (`toolkit build --image cpu`). Runs in project copies under a temporary folder;
the project's results/ are not touched. Run it with the Python the toolkit is installed in, on an
otherwise idle machine. The toolkit runs with its bytecode cached, as an installed toolkit does: the
variable PYTHONDONTWRITEBYTECODE (set in some shells and CI environments) is removed from its
environment, and a first, uncounted run per workload writes the bytecode and generates the tiny
model. With it set, every run compiles the toolkit's modules from source (~0.3 s of CPU more:
--no-bytecode measures that).
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
MODEL = "tiny-qwen3moe"


def _project(dest: Path, image: str, cases: str) -> Path:
    """A project copy with `image` and the tiny model only; `cases` "default" keeps the matrix's
    `bench:` block, a number N makes it N pp cases of one repetition without canary or depth sweep."""
    shutil.copytree(ROOT / "Dockerfile.templates", dest / "Dockerfile.templates")
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [i for i in data["images"] if i["name"] == image]
    data["models"] = [m for m in data["models"] if m["name"] == MODEL]
    data["models"][0]["path"] = str((ROOT / data["models"][0]["path"]).resolve())
    if cases != "default":
        data["models"][0].pop("depth", None)
        data["bench"].update(
            {
                "n_prompt": list(range(8, 8 + int(cases))),
                "n_gen": [0],
                "n_ubatch": [8],
                "n_batch": [8],
                "repetitions": 1,
                "canary": False,
            }
        )
    (dest / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (dest / "results").mkdir()
    shutil.copy(ROOT / "results" / "builds.jsonl", dest / "results" / "builds.jsonl")
    return dest


def _env(bytecode: bool) -> dict[str, str]:
    """The toolkit's environment: this one, without PYTHONDONTWRITEBYTECODE unless `bytecode` is False."""
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _cpu_seconds(project: Path, env: dict[str, str], *extra: str) -> tuple[float, float, float]:
    """(CPU seconds of one `toolkit bench`, wall seconds, the 1-minute load average before it)."""
    load = os.getloadavg()[0]
    before = os.times()
    p = subprocess.run(
        [sys.executable, "-m", "toolkit", "bench", "--matrix", str(project / "matrix.yaml"), *extra],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
    )
    after = os.times()
    if p.returncode != 0:
        raise SystemExit(f"toolkit bench {' '.join(extra)} exited {p.returncode}: {p.stderr[-500:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return cpu, after.elapsed - before.elapsed, load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default="cpu")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default="default,1,10,100", help="comma-separated: default and/or case counts")
    ap.add_argument("--no-telemetry", action="store_true", help="pass --no-telemetry to every bench")
    ap.add_argument(
        "--allow-concurrent",
        action="store_true",
        help="pass --allow-concurrent to every bench (a machine shared with other benchmarks: the "
        "figures are then not an idle machine's)",
    )
    ap.add_argument(
        "--no-bytecode", action="store_true", help="run the toolkit with PYTHONDONTWRITEBYTECODE=1"
    )
    a = ap.parse_args()
    env = _env(not a.no_bytecode)
    extra = ["--no-telemetry"] * a.no_telemetry + ["--allow-concurrent"] * a.allow_concurrent
    tmp = Path(tempfile.mkdtemp(prefix="toolkit-cpu-"))
    workloads = [w.strip() for w in a.cases.split(",") if w.strip()]
    projects = {w: _project(tmp / f"p{w}", a.image, w) for w in workloads}
    for p in projects.values():
        _cpu_seconds(p, env, *extra)  # warm: tiny model generated, bytecode, page cache
    got: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for _ in range(a.rounds):
        for w, p in projects.items():
            got.setdefault((w, "real"), []).append(_cpu_seconds(p, env, *extra))
            if w != "default":
                got.setdefault((w, "dry-run"), []).append(_cpu_seconds(p, env, *extra, "--dry-run"))
    for (w, mode), v in got.items():
        cpu = [x[0] for x in v]
        each = ", ".join(f"{c:.2f} (wall {s:.1f} s, load {ld:.2f})" for c, s, ld in v)
        label = "default matrix" if w == "default" else f"{w:>3} cases"
        print(f"{label} {mode:<7} CPU s: {each}  median {statistics.median(cpu):.2f}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
