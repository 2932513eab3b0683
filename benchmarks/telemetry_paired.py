"""Does the telemetry sampler change what is measured? (issue 22: "a paired benchmark shows no effect
on measured tok/s"; not a test.)

Runs `toolkit bench -i cpu` alternately with and without the sampler (`--no-telemetry`) in a copy of
the project (tiny model, pp512 + tg128, r=5 by default), PAIRS pairs with the order flipped every
pair, and reports per test the median ratio with/without and its range. Run it on an idle host:

    python3 benchmarks/telemetry_paired.py --pairs 6
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def project(dest: Path, reps: int) -> Path:
    shutil.copytree(ROOT / "Dockerfile.templates", dest / "Dockerfile.templates")
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [i for i in data["images"] if i["name"] == "cpu"]
    data["models"] = [m for m in data["models"] if m["name"] == "tiny-qwen3moe"]
    data["bench"] = {
        **data.get("bench", {}),
        "n_prompt": [512],
        "n_gen": [128],
        "n_ubatch": [512],
        "n_batch": [2048],
        "repetitions": reps,
    }
    (dest / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def bench(proj: Path, telemetry: bool) -> dict[str, float]:
    args = [
        sys.executable,
        "-m",
        "toolkit",
        "bench",
        "--matrix",
        str(proj / "matrix.yaml"),
        "-i",
        "cpu",
        "--json",
    ]
    if not telemetry:
        args.append("--no-telemetry")
    subprocess.run(args, check=True, capture_output=True, cwd=proj)
    recs = [
        json.loads(x) for f in (proj / "results").glob("*/bench.jsonl") for x in f.read_text().splitlines()
    ]
    last = recs[-1]["run_id"]
    return {r["test"]: r["avg_ts"] for r in recs if r["run_id"] == last and r["status"] == "ok"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proj = project(Path(tmp) / "p", a.reps)
        subprocess.run(
            [sys.executable, "-m", "toolkit", "build", "--matrix", str(proj / "matrix.yaml"), "-i", "cpu"],
            check=True,
            capture_output=True,
            cwd=proj,
        )
        ratios: dict[str, list[float]] = {}
        for i in range(a.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            got = {t: bench(proj, t) for t in order}
            for test, on in got[True].items():
                off = got[False].get(test)
                if off:
                    ratios.setdefault(test, []).append(on / off)
            print(
                f"pair {i + 1}: "
                + ", ".join(f"{t} {got[True][t]:.1f}/{got[False].get(t, 0):.1f}" for t in got[True]),
                flush=True,
            )
    for test, rs in ratios.items():
        print(
            f"{test}: with/without sampler median {statistics.median(rs):.3f} (range {min(rs):.3f}-{max(rs):.3f}, "
            f"{len(rs)} pairs)"
        )


if __name__ == "__main__":
    main()
