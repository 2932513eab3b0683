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

    python3 benchmarks/report_scale.py --compare-scale [--sizes 10000,200000] [--rounds 3] [--keep DIR]

times `toolkit compare` over the same two sides in folders of each size (issue 32 item 13: compare
flat from 10k to 200k within 10 %): each folder holds the history --records would make (its size) and
the same two builds of the cpu image (FIXED_RUNS runs each, made from their own seed, written after
the history and listed last in builds.jsonl). Three comparisons, the same output at every size (checked):
the two digests by prefix, a run of the older build against `cpu` (the image name: its newest
build, narrowed out of every cpu record) and the two builds' last runs by run id. Each warm (index
built first), in fresh processes, sizes alternating; medians of CPU s (user + system of the command)
and peak RSS, with the 1-minute load before each. Folders go under --keep DIR/<size> and are reused
(200,000 records: ~880 MB of JSONL and ~2 min to make and index on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
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


IMAGES_BUILT = "2026-05-31T00:00:00Z"
"""The build time every generated image's label says: before any record generate() or the rebuilds write."""


def _retarget(tpl: dict, run_id: str, digest: str, created, scale: float) -> dict:
    """A copy of the record `tpl` as run `run_id` of image `digest` at `created` (a datetime), its
    command and log file renamed to the run, its tok/s (samples, mean and stddev) scaled by `scale`;
    its test_time a second before `created` and its image's created label IMAGES_BUILT (a record is
    written after its test, in an image built before it: results.time_check)."""
    rec = json.loads(json.dumps(tpl))
    old_run = rec["run_id"]
    rec.update(run_id=run_id, created=created.isoformat())
    if isinstance(rec.get("raw"), dict) and rec["raw"].get("test_time"):
        rec["raw"]["test_time"] = (created - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = rec["image"].get("labels") or {}
    if "org.opencontainers.image.created" in labels:  # one build time for every image, as a real
        labels["org.opencontainers.image.created"] = IMAGES_BUILT  # image's records share theirs
    rec["image"]["digest"] = digest
    rec["command"] = [x.replace(old_run, run_id) for x in rec["command"]]
    rec["log_file"] = (rec.get("log_file") or "").replace(old_run, run_id) or None
    rec["samples_ts"] = [round(x * scale, 3) for x in rec["samples_ts"]]
    for k in ("avg_ts", "stddev_ts"):  # their spread scales with them (a stored record agrees with itself)
        rec[k] = round(rec[k] * scale, 6) if rec[k] is not None else None
    return rec


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
                rec = _retarget(tpl, run_id, digest, when + timedelta(seconds=20 * rep + j), scale)
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


FIXED_RUNS = 20
"""Runs of each of the two builds --compare-scale compares (6 records a run, one run of 3 repetitions)."""


def add_fixed_pair(results: Path, runs: int = FIXED_RUNS, seed: int = 3) -> dict:
    """Append two builds of the cpu image (template 0), `runs` runs each, to `results`: their own seed,
    created after any history generate() writes (from 2027-01-01), listed last in builds.jsonl (the
    second is the cpu image's newest build). The same bytes whatever the folder holds, so a compare of
    them gives the same output at every size. Returns {"digests": [older, newer], "runs": [[run ids
    of the older], [of the newer]]}."""
    rnd = random.Random(seed)
    tpl = _templates()[0]
    t0 = datetime(2027, 1, 1, tzinfo=timezone.utc)
    digests = [f"sha256:{rnd.getrandbits(256):064x}" for _ in range(2)]
    run_ids: list[list[str]] = [[], []]
    for b, digest in enumerate(digests):
        lines = []
        for i in range(runs):
            when = t0 + timedelta(hours=b, seconds=47 * i)
            run_id = f"{when:%Y%m%dT%H%M%SZ}-{rnd.getrandbits(24):06x}"
            run_ids[b].append(run_id)
            repeats = 3 if i == runs // 2 else 1
            for rep in range(repeats):
                scale = rnd.uniform(0.9, 1.1) * (0.97 if b else 1.0)
                for j, t in enumerate(tpl):
                    rec = _retarget(t, run_id, digest, when + timedelta(seconds=20 * rep + j), scale)
                    if repeats > 1:
                        rec["process_run"] = {"index": rep + 1, "of": repeats}
                    lines.append(_line(rec))
        path = results / digest.split(":")[1][:12] / "bench.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(lines))
    with (results / "builds.jsonl").open("ab") as fh:
        for k, d in enumerate(digests):
            fh.write(
                _line(
                    {
                        "schema_version": 1,
                        "image": TEMPLATES[0][1],
                        "ref": f"toolkit/{TEMPLATES[0][1]}:fixed{k}",
                        "digest": d,
                        "backend": tpl[0]["image"]["backend"],
                        "template": "x.j2",
                        "template_hash": "0" * 64,
                        "created": (t0 + timedelta(hours=k)).isoformat(),
                    }
                )
            )
    return {"digests": digests, "runs": run_ids}


def measure(cmd: list[str]) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MB, exit code, stdout) of `cmd` run in a fresh helper process, so the peak RSS
    (ru_maxrss of the helper's only child) is that command's alone."""
    wall, rss, rc, out, _cpu = measure_cpu(cmd)
    return wall, rss, rc, out


def measure_cpu(cmd: list[str]) -> tuple[float, float, int, str, float]:
    """measure() and the command's CPU seconds (user + system of the helper's only child)."""
    helper = (
        "import json,resource,subprocess,sys,time\n"
        "t=time.monotonic();p=subprocess.run(sys.argv[1:],capture_output=True,text=True)\n"
        "w=time.monotonic()-t;u=resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps([w,u.ru_maxrss/1024,p.returncode,p.stdout,p.stderr[-2000:],u.ru_utime+u.ru_stime]))\n"
    )
    res = subprocess.run([sys.executable, "-c", helper, *cmd], capture_output=True, text=True, check=True)
    wall, rss, rc, out, err, cpu = json.loads(res.stdout)
    if rc not in (0, 6):  # 6: compare found a regression
        raise SystemExit(f"{' '.join(cmd)} exited {rc}: {err}")
    return wall, rss, rc, out, cpu


def compare_scale(base: Path, sizes: list[int], rounds: int) -> None:
    """--compare-scale: see the module docstring."""
    tk = [sys.executable, "-m", "toolkit", "compare", "--json", "--results"]
    cmds: dict[str, dict[int, list[str]]] = {}
    for n in sizes:
        results = base / str(n) / "results"
        meta_file = base / str(n) / "generated.json"
        requested = [n, "compare-scale", FIXED_RUNS]
        if not (meta_file.is_file() and json.loads(meta_file.read_text())["requested"] == requested):
            shutil.rmtree(results, ignore_errors=True)
            t0 = time.monotonic()
            meta = generate(results, n)
            meta["fixed"] = add_fixed_pair(results)
            meta["requested"] = requested
            meta_file.write_text(json.dumps(meta))
            print(
                f"generated {meta['records']} + {12 * FIXED_RUNS + 12} records in {time.monotonic() - t0:.1f} s"
            )
        fixed = json.loads(meta_file.read_text())["fixed"]
        old, new = (d.split(":")[1][:12] for d in fixed["digests"])
        for name, refs in (
            ("digest prefixes", [old, new]),
            ("run vs image name", [fixed["runs"][0][0], TEMPLATES[0][1]]),
            ("run ids", [fixed["runs"][0][-1], fixed["runs"][1][-1]]),
        ):
            cmds.setdefault(name, {})[n] = [*tk, str(results), *refs]
        measure_cpu(cmds["digest prefixes"][n])  # builds the index
    print(f"\n{'compare':18} {'records':>8} {'CPU s (median)':>15} {'peak RSS MB':>12}  CPU s each  load")
    for name, by_size in cmds.items():
        got: dict[int, list[tuple[float, float, str, float]]] = {n: [] for n in sizes}
        for k in range(rounds):
            for n in sizes if k % 2 == 0 else reversed(sizes):
                load = os.getloadavg()[0]
                _w, rss, _rc, out, cpu = measure_cpu(by_size[n])
                got[n].append((cpu, rss, out, load))
        outs = {x[2] for runs in got.values() for x in runs}
        for n in sizes:
            cpu_med = statistics.median(x[0] for x in got[n])
            rss_med = statistics.median(x[1] for x in got[n])
            each = " ".join(f"{x[0]:.2f}" for x in got[n])
            loads = " ".join(f"{x[3]:.1f}" for x in got[n])
            print(f"{name:18} {n:8} {cpu_med:15.2f} {rss_med:12.0f}  {each}  {loads}")
        lo, hi = min(sizes), max(sizes)
        ratio = statistics.median(x[0] for x in got[hi]) / statistics.median(x[0] for x in got[lo])
        rss_ratio = statistics.median(x[1] for x in got[hi]) / statistics.median(x[1] for x in got[lo])
        same = "the same output" if len(outs) == 1 else "OUTPUTS DIFFER"
        print(f"{name:18} {hi}/{lo}: CPU x{ratio:.3f}, peak RSS x{rss_ratio:.3f}; {same}")


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
    ap.add_argument(
        "--compare-scale",
        action="store_true",
        help="time compare over the same two builds in folders of each --sizes (see the docstring)",
    )
    ap.add_argument("--sizes", default="10000,200000", help="--compare-scale: records of each folder")
    a = ap.parse_args()
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="toolkit-scale-"))
    if a.compare_scale:
        compare_scale(base, [int(x) for x in a.sizes.split(",")], a.rounds)
        if not a.keep:
            shutil.rmtree(base)
        return
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
