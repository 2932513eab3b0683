"""Scale benchmark (not a test): `toolkit report` and `toolkit compare` over 50,000 stored records.

    python3 benchmarks/report_scale.py [--records 50000] [--keep DIR] [--rounds 2]

Generates a results/ folder of `--records` BenchRecords from the real records in tests/data/
(results-cpu-a.jsonl, results-cpu-b.jsonl, results-vulkan-lavapipe.jsonl: whole llama-bench records
of ~4.4 kB each) with varied run ids, image digests (rebuilds over time), created times and tok/s, a
share of failed rows and process-level repetitions (bench.runs: 3), and a few bad lines (a half line,
a NaN, an unknown schema_version, bytes that are not UTF-8). Then it times, each in a fresh process:

- `toolkit report --format json` (and `github`) and `toolkit compare A B --json` cold (results/.index.sqlite absent),
  warm (index present, nothing changed) and after one run's records were appended;

and prints wall seconds and the peak RSS (resource.getrusage of the child, MB) of each. Goal (issue 11):
under 1 s and under 200 MB for 50,000 records, warm. Generating 50,000 records writes ~220 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
# (template file, image name): the real records a synthetic run copies
TEMPLATES = (
    ("results-cpu-a.jsonl", "cpu"),
    ("results-cpu-b.jsonl", "cpu"),
    ("results-vulkan-lavapipe.jsonl", "vulkan"),
)
INDEX_NAME = ".index.sqlite"


def _templates() -> list[list[dict]]:
    return [[json.loads(x) for x in (DATA / f).read_text().splitlines() if x.strip()] for f, _ in TEMPLATES]


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode()


def generate(
    results: Path,
    n_records: int,
    *,
    digests_per_template: int = 6,
    seed: int = 11,
    bad_lines: bool = True,
    all_shown: bool = False,
) -> dict:
    """Write `n_records` records or up to 17 more (whole runs of 6 tests; a run of bench.runs: 3 writes 18) under
    `results`, `<digest12>/bench.jsonl` per digest plus builds.jsonl. Deterministic for a seed.
    `all_shown`: exactly `n_records`, each run its own digest, none failed or repeated:
    a report shows every one.

    Returns {"records": written, "digests": {"template index": [digest, ...]}, "runs": [run ids]}.
    """
    rnd = random.Random(seed)
    tpls = _templates()
    runs_needed = -(-n_records // 6)  # all_shown: a digest per run, 3 templates taking turns
    digests_per_template = -(-runs_needed // 3) if all_shown else digests_per_template
    pools = {
        t: [f"sha256:{rnd.getrandbits(256):064x}" for _ in range(digests_per_template)]
        for t in range(len(tpls))
    }
    per_run = sum(len(t) for t in tpls) / len(tpls)
    n_runs = max(1, round(n_records / (per_run * 1.06)))  # 3 % of runs write their records 3 times
    n_runs = int(n_runs * 1.02) + 1  # digests change over this many runs; writing stops at n_records
    if all_shown:
        n_runs = runs_needed
    t0 = datetime(2026, 6, 1, tzinfo=timezone.utc)
    out: dict[Path, list[bytes]] = {}
    written, runs = 0, []
    for i in range(n_runs):
        if written >= n_records:
            break
        t = i % len(tpls)
        at = i // 3 if all_shown else min(digests_per_template - 1, i * digests_per_template // n_runs)
        digest = pools[t][at]
        when = t0 + timedelta(seconds=47 * i)
        run_id = f"{when:%Y%m%dT%H%M%SZ}-{rnd.getrandbits(24):06x}"
        runs.append(run_id)
        repeats = 3 if rnd.random() < 0.03 and not all_shown else 1
        failed_at = rnd.randrange(len(tpls[t])) if rnd.random() < 0.02 and not all_shown else None
        for rep in range(repeats):
            scale = rnd.uniform(0.9, 1.1)
            for j, tpl in enumerate(tpls[t]):
                if all_shown and written >= n_records:
                    break
                rec = json.loads(json.dumps(tpl))
                old_run = rec["run_id"]
                rec["run_id"] = run_id
                rec["created"] = (when + timedelta(seconds=20 * rep + j)).isoformat()
                rec["image"]["digest"] = digest
                rec["command"] = [x.replace(old_run, run_id) for x in rec["command"]]
                rec["log_file"] = (rec.get("log_file") or "").replace(old_run, run_id) or None
                rec["samples_ts"] = [round(x * scale, 3) for x in rec["samples_ts"]]
                rec["avg_ts"] = round(rec["avg_ts"] * scale, 6) if rec["avg_ts"] is not None else None
                if repeats > 1:
                    rec["process_run"] = {"index": rep + 1, "of": repeats}
                if failed_at == j:
                    rec.update(
                        status="failed",
                        error="llama-bench exited with code 1",
                        avg_ts=None,
                        stddev_ts=None,
                        samples_ts=[],
                    )
                path = results / digest.split(":")[1][:12] / "bench.jsonl"
                out.setdefault(path, []).append(_line(rec))
                written += 1
    files = sorted(out)
    if bad_lines and files:
        good = json.loads(out[files[0]][0])
        nan = _line(good).replace(b'"avg_ts":', b'"avg_ts":NaN,"x":', 1)
        out[files[0]].insert(3, nan)
        out[files[-1]].insert(5, _line({**good, "schema_version": 99}))
        out[files[len(files) // 2]].insert(7, b"\xff\xfe not utf-8\n")
        out[files[1]].insert(11, _line(good)[:700] + b"\n")  # a half line a killed writer left
    for path, lines in out.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(lines))
    builds = []
    for t, pool in pools.items():
        for k, d in enumerate(pool):
            builds.append(
                {
                    "schema_version": 1,
                    "image": TEMPLATES[t][1],
                    "ref": f"toolkit/{TEMPLATES[t][1]}:{k}",
                    "digest": d,
                    "backend": tpls[t][0]["image"]["backend"],
                    "template": "x.j2",
                    "template_hash": "0" * 64,
                    "created": (t0 + timedelta(days=k)).isoformat(),
                }
            )
    (results / "builds.jsonl").write_bytes(b"".join(_line(b) for b in builds))
    return {"records": written, "digests": {str(t): list(p) for t, p in pools.items()}, "runs": runs}


def measure(cmd: list[str]) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MB, exit code, stdout) of `cmd` run in a fresh helper process, so the peak RSS
    (ru_maxrss of the helper's only child) is that command's alone."""
    helper = (
        "import json,resource,subprocess,sys,time\n"
        "t=time.monotonic();p=subprocess.run(sys.argv[1:],capture_output=True,text=True)\n"
        "w=time.monotonic()-t;m=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024\n"
        "print(json.dumps([w,m,p.returncode,p.stdout,p.stderr[-2000:]]))\n"
    )
    res = subprocess.run([sys.executable, "-c", helper, *cmd], capture_output=True, text=True, check=True)
    wall, rss, rc, out, err = json.loads(res.stdout)
    if rc not in (0, 6):  # 6: compare found a regression
        raise SystemExit(f"{' '.join(cmd)} exited {rc}: {err}")
    return wall, rss, rc, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=2, help="warm measurements per command")
    ap.add_argument("--keep", default=None, help="generate into (or reuse) this folder and keep it")
    ap.add_argument(
        "--all-shown",
        action="store_true",
        help="every record shown: a digest per run, none failed or repeated (--records 10000: 10,000 shown)",
    )
    a = ap.parse_args()
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="toolkit-scale-"))
    results = base / "results"
    meta_file = base / "generated.json"
    requested = [a.records, a.all_shown]
    if not (meta_file.is_file() and json.loads(meta_file.read_text())["requested"] == requested):
        shutil.rmtree(results, ignore_errors=True)
        t0 = time.monotonic()
        meta = generate(results, a.records, all_shown=a.all_shown)
        meta["requested"] = requested
        meta_file.write_text(json.dumps(meta))
        print(f"generated {meta['records']} records in {time.monotonic() - t0:.1f} s under {results}")
    meta = json.loads(meta_file.read_text())
    size = sum(f.stat().st_size for f in results.glob("*/bench.jsonl"))
    print(
        f"{meta['records']} records, {size / 2**20:.0f} MB of JSONL in {len(list(results.glob('*/bench.jsonl')))} files"
    )
    tk = [sys.executable, "-m", "toolkit"]
    old, new = meta["digests"]["0"][-2], meta["digests"]["0"][-1]  # a rebuild of one image: did it regress?
    cmds = {
        "report": [*tk, "report", "--results", str(results), "--format", "json"],
        "github": [*tk, "report", "--results", str(results), "--format", "github"],
        "compare": [
            *tk,
            "compare",
            "--results",
            str(results),
            "--json",
            old.split(":")[1][:12],
            new.split(":")[1][:12],
        ],
    }
    rows = []
    for name, cmd in cmds.items():
        (results / INDEX_NAME).unlink(missing_ok=True)
        rows.append((name, "cold (no index)", *measure(cmd)[:2]))
        for k in range(a.rounds):
            rows.append((name, f"warm {k + 1}", *measure(cmd)[:2]))
    # one more run's records appended: the index reads the new tail only
    f = sorted(results.glob("*/bench.jsonl"))[0]
    size = f.stat().st_size
    tail = f.read_bytes().splitlines(keepends=True)[-6:]
    with f.open("ab") as fh:
        fh.write(b"".join(tail))
    for name, cmd in cmds.items():
        rows.append((name, "after an append", *measure(cmd)[:2]))
    os.truncate(f, size)  # a kept folder stays as generated (the index re-reads that file whole next time)
    print(f"\n{'command':8} {'case':18} {'wall s':>7} {'peak RSS MB':>12}")
    for name, case, wall, rss in rows:
        print(f"{name:8} {case:18} {wall:7.2f} {rss:12.0f}")
    if not a.keep:
        shutil.rmtree(base)


if __name__ == "__main__":
    os.environ.setdefault("TOOLKIT_ALLOW_CONCURRENT", "1")
    main()
