"""Bench-overhead benchmark (not a test): `toolkit bench` wall time against the same containers run by
hand (`docker run ...`: the exact commands toolkit recorded, in its order: the canary's, then each
llama-bench process's), in alternating pairs (A B, B A, A B, ...) so that machine drift cancels, and
the median of the per-pair ratios.

    python3 benchmarks/bench_overhead.py [--workload default|issue15] [--image cpu]
                                         [--model tiny-qwen3moe] [--pairs 10]

Workloads:
- `default` (issue 32 item 16): the project's matrix as it is for one image and the tiny model: its
  `bench:` axes (pp512/2048/4096 x ub512/2048 + tg128, 5 repetitions), the canary (llama-perplexity)
  and the model's depth sweep: three containers, all three run by hand too;
- `issue15` (issue 15's): one pp4096 and one tg256 test, 20 repetitions (~7 s of llama-bench on the
  idle 2-core machine), canary and depth sweep off: one container.
--n-prompt / --n-gen / --repetitions change the issue15 workload.

Each pair prints, as one JSON line: toolkit wall seconds, hand-run wall seconds, their ratio (goal:
median <= 1.02), the toolkit process's own CPU seconds (user + sys of it and its children: the `docker`
CLI is not one of them, the containers are not counted), llama-bench's measured time, and the
1-minute load average before the pair. Beside the ratio, the seconds each side spent OUTSIDE its
containers (`outside`, the figure the machine's load hardly moves, unlike the ratio): from the
engine's own `start` and `die` events of the run's containers (`docker events`, by container name)
against the process's start and end: `before` (the process's start to the first container's start),
`between` (one container's end to the next one's start, summed) and `after` (the last container's end
to the process's exit); the hand run's are what `docker run` itself costs (create, attach, remove).
The last line is the summary: median, min and max ratio, the median CPU time and outside seconds.

Needs the image built (`toolkit build --image cpu`). Runs in a throwaway project copy (results in a
temporary folder): the project's results/ are not touched. The toolkit runs with its bytecode cached,
as an installed toolkit does (PYTHONDONTWRITEBYTECODE is removed from its environment; the uncounted
first run writes the bytecode).
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


def _project(dest: Path, a: argparse.Namespace) -> Path:
    """A copy of the project's matrix and templates with the one-image, one-model workload."""
    shutil.copytree(ROOT / "Dockerfile.templates", dest / "Dockerfile.templates")
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [i for i in data["images"] if i["name"] == a.image]
    data["models"] = [m for m in data["models"] if m["name"] == a.model]
    for m in data["models"]:  # the model file stays where the project keeps it
        m["path"] = str((ROOT / m["path"]).resolve())
        if a.workload == "issue15":
            m.pop("depth", None)
    if a.workload == "issue15":
        data["bench"] = {
            **data["bench"],
            "n_prompt": [a.n_prompt],
            "n_gen": [a.n_gen],
            "n_ubatch": [512],
            "repetitions": a.repetitions,
            "canary": False,
        }
    (dest / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (dest / "results").mkdir()
    shutil.copy(
        ROOT / "results" / "builds.jsonl", dest / "results" / "builds.jsonl"
    )  # the image's build record
    return dest


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as an installed toolkit has it
    return env


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def _name(command: list[str]) -> str:
    return command[command.index("--name") + 1]


def _outside(since: float, until: float, names: list[str]) -> dict[str, float]:
    """Seconds outside the containers `names` between the wall-clock times `since` and `until` (a
    process's start and end): before the first container's start, between one's end (the engine's
    `die`) and the next one's start, after the last one's end; from the engine's events (ns)."""
    out = subprocess.run(
        [
            "docker",
            "events",
            "--since",
            f"{since:.6f}",
            "--until",
            f"{until:.6f}",
            "--format",
            "{{json .}}",
        ]
        + ["--filter", "type=container", "--filter", "event=start", "--filter", "event=die"]
        + [a for n in names for a in ("--filter", f"container={n}")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spans: dict[str, dict[str, float]] = {}
    for line in out.splitlines():
        e = json.loads(line)
        spans.setdefault(e["id"], {})[e.get("status") or e["Action"]] = e["timeNano"] / 1e9
    runs = sorted((s["start"], s["die"]) for s in spans.values() if {"start", "die"} <= s.keys())
    if len(runs) < len(names):  # more: a container run again under its name (the canary's retry under load)
        raise SystemExit(f"docker events: {len(runs)} container runs found, {len(names)} expected: {names}")
    between = sum(b[0] - a[1] for a, b in zip(runs, runs[1:], strict=False))
    before, after = runs[0][0] - since, until - runs[-1][1]
    return {
        "before": round(before, 3),
        "between": round(between, 3),
        "after": round(after, 3),
        "outside": round(before + between + after, 3),
    }


def _toolkit(
    project: Path, image: str, *extra: str
) -> tuple[float, float, list[dict], list[list[str]], dict[str, float]]:
    """(wall s, own CPU s, this run's records, the containers it ran: their commands in order, its
    seconds outside them: _outside)."""
    before = os.times()
    since = time.time()
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
            *extra,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=project,
        env=_env(),
    )
    wall = time.monotonic() - t0
    until = time.time()
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    digests = sorted((project / "results").glob("*/bench.jsonl"))
    recs = [r for f in digests for r in _lines(f)]
    last = max(r["run_id"] for r in recs)
    recs = [r for r in recs if r["run_id"] == last]
    canaries = [c for f in digests for c in _lines(f.with_name("canary.jsonl")) if c.get("run_id") == last]
    commands = [c["command"] for c in canaries]
    for r in recs:  # each llama-bench process once, in the order its rows were written
        if r["command"] not in commands:
            commands.append(r["command"])
    return wall, cpu, recs, commands, _outside(since, until, [_name(c) for c in commands])


def _by_hand(commands: list[list[str]]) -> tuple[float, dict[str, float]]:
    """(wall s, seconds outside the containers: _outside)."""
    since = time.time()
    t0 = time.monotonic()
    for cmd in commands:
        p = subprocess.run(
            cmd, check=True, capture_output=True, text=True
        )  # output kept for OVERHEAD_DEBUG=1
        if os.environ.get("OVERHEAD_DEBUG"):
            print(cmd, p.stdout[-300:], p.stderr[-300:], file=sys.stderr)
    wall = time.monotonic() - t0
    return wall, _outside(since, time.time(), [_name(c) for c in commands])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=["default", "issue15"], default="default")
    ap.add_argument("--image", default="cpu")
    ap.add_argument("--model", default="tiny-qwen3moe")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--n-prompt", type=int, default=4096)
    ap.add_argument("--n-gen", type=int, default=256)
    ap.add_argument("--repetitions", type=int, default=20)
    ap.add_argument(
        "--allow-concurrent",
        action="store_true",
        help="pass --allow-concurrent to toolkit bench (a machine shared with other benchmarks: the "
        "figures are then not an idle machine's)",
    )
    a = ap.parse_args()
    extra = ["--allow-concurrent"] if a.allow_concurrent else []
    project = _project(Path(tempfile.mkdtemp(prefix="toolkit-overhead-")) / "p", a)
    # warm-up pair (bytecode, model page cache, image layers); not counted
    _, _, _, commands, _ = _toolkit(project, a.image, *extra)
    _by_hand(commands)
    rows = []
    for i in range(a.pairs):
        order = ("toolkit", "hand") if i % 2 == 0 else ("hand", "toolkit")
        load = os.getloadavg()[0]
        got: dict[str, float] = {}
        for who in order:
            if who == "toolkit":
                got["toolkit_s"], got["toolkit_cpu_s"], recs, commands, tk_out = _toolkit(
                    project, a.image, *extra
                )
            else:
                got["hand_s"], hand_out = _by_hand(commands)
        tests_s = sum(sum(r["raw"].get("samples_ns") or []) / 1e9 for r in recs if r.get("raw"))
        rows.append(
            {
                "pair": i + 1,
                "order": "-".join(order),
                "containers": len(commands),
                "toolkit_s": round(got["toolkit_s"], 2),
                "hand_s": round(got["hand_s"], 2),
                "ratio": round(got["toolkit_s"] / got["hand_s"], 3),
                "toolkit_outside_s": tk_out,
                "hand_outside_s": hand_out,
                "toolkit_cpu_s": round(got["toolkit_cpu_s"], 3),
                "llama_bench_tests_s": round(tests_s, 2),
                "load_1m": round(load, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    ratios = [r["ratio"] for r in rows]
    print(
        json.dumps(
            {
                "summary": f"{len(rows)} alternating pairs, workload {a.workload}",
                "median_ratio": round(statistics.median(ratios), 3),
                "min_ratio": min(ratios),
                "max_ratio": max(ratios),
                "median_toolkit_cpu_s": round(statistics.median(r["toolkit_cpu_s"] for r in rows), 3),
                "median_toolkit_outside_s": {
                    k: round(statistics.median(r["toolkit_outside_s"][k] for r in rows), 3)
                    for k in rows[0]["toolkit_outside_s"]
                },
                "median_hand_outside_s": round(
                    statistics.median(r["hand_outside_s"]["outside"] for r in rows), 3
                ),
                "median_hand_s": round(statistics.median(r["hand_s"] for r in rows), 2),
                "load_1m": [min(r["load_1m"] for r in rows), max(r["load_1m"] for r in rows)],
            }
        )
    )
    shutil.rmtree(project.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
