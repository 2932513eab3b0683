"""`toolkit import` of a large llama-bench file: MB/s and peak RSS of the import, run as a user runs it.

    python3 benchmarks/import_scale.py 200M               # jsonl, 3 runs, medians
    python3 benchmarks/import_scale.py 1G --runs 3
    python3 benchmarks/import_scale.py 200M --format json  # or csv
    python3 benchmarks/import_scale.py 50M --keep /tmp/big.jsonl
    python3 benchmarks/import_scale.py 20M --stored 200000 --runs 3   # into a folder of 200k records

The file is made from the real llama-bench rows in tests/data/ (SOURCES: CUDA and Vulkan on an H200,
the CPU image at the pinned commit, and a README row of build b5163, an older vintage with other
fields), taken in turn, so the import sees several systems (one set each) and the key sets of two
vintages: every row a distinct test (n_depth counts up, n_ubatch and test_time vary), every 50th row
repeats the test of the row before (a repetition of one cell, as `-r` across runs gives), and a log
line now and then (a capture that merged stderr). `--format json` writes the array as llama-bench's
`-o json` does (one field a line); `--format csv` as `-o csv` (the rows of the pinned commit's fields,
no samples).

Each run is a fresh process, `python3 -m toolkit import FILE --label scale --results DIR` from the
checkout (PYTHONPATH set to it), under /usr/bin/time -v: wall time and peak RSS ("Maximum resident
set size") and CPU time (user + system) of the import; into a fresh results folder each time. The load
average is printed before and after each run: wall MB/s is only as quiet as the machine, MB per CPU
second much less so (it says what an idle core gives). The file and the results are
deleted at the end unless --keep names where the file goes. Target (issue 24): 1 GB of JSONL in
<= 300 MB peak RSS at >= 10 MB/s.

`--stored N` (issue 32: an import into a large folder): first a folder of N stored records is made by
importing a generated file of N other rows (other n_depth values: no row of the measured file was
imported before, so both imports write the same records), its query index built by one import that
is then removed; then each run imports the file into an empty folder and into the N-record folder
(paired, in turn; the import's new results/<digest12>/ folder removed after each), and the medians
and their ratio are printed. Target: <= 300 MB peak and the N-record time within 10 % of the empty
one. The folder goes in the temp folder (~2.1 kB a record and its index: ~470 MB at 200k; `df -h
/tmp` first), or in `--folder DIR`, kept there and reused by the next run with the same N (making it
and its index takes ~2 min of CPU at 200k).

This is the case of a user's import into a folder whose index is current: an import reads the index
(brought in line with the JSONL first: here nothing to read) and never writes its own new records
into it, so the folder each run adds and the benchmark removes was never indexed; each run's
`index_untouched` says the index file was not rewritten. (A user's next command reads those new
records into the index once: a cost of the previous import's size, not of the history.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SOURCES = [
    DATA / "cuda-h200-qwen3moe-30b-synthetic.jsonl",
    DATA / "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl",
    DATA / "llamabench-0c1e57098-cpu.jsonl",
    DATA / "llamabench-b5163-readme.jsonl",
]
UBATCH = (128, 256, 512)


def size_arg(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B")
    return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)


def source_rows() -> list[dict[str, Any]]:
    """The real rows the file is made of, in SOURCES order."""
    return [json.loads(ln) for f in SOURCES for ln in f.read_text().splitlines() if ln.startswith("{")]


def _rows(fmt: str, offset: int = 0) -> Any:
    """Endless generated rows (see the module docstring); csv: only rows with the first row's fields;
    `offset`: added to each row's n_depth (rows no other offset's file holds)."""
    real = source_rows()
    if fmt == "csv":  # -o csv has no samples columns
        real = [
            {k: v for k, v in r.items() if not k.startswith("samples_")}
            for r in real
            if list(r) == list(real[0])
        ]
    n = 0
    prev: dict[str, Any] = {}
    while True:
        n += 1
        if n % 50 == 0:
            r = dict(prev)  # the test of the row before, measured again
        else:
            r = dict(real[n % len(real)])
            r["n_depth"] = n + offset
            r["n_ubatch"] = UBATCH[n % len(UBATCH)]
        r["test_time"] = (
            f"2026-01-{1 + (n // 86400) % 28:02d}T{(n // 3600) % 24:02d}:{(n // 60) % 60:02d}:{n % 60:02d}Z"
        )
        prev = r
        yield n, r


def _csv_cell(v: Any) -> str:
    text = str(int(v)) if isinstance(v, bool) else str(v)
    return '"' + text.replace('"', '""') + '"'


def generate(path: Path, size: int, fmt: str = "jsonl", *, offset: int = 0, max_rows: int = 0) -> int:
    """Write about `size` bytes of llama-bench output (`fmt`: jsonl, json or csv), at most `max_rows`
    rows where given, their n_depth counted from `offset`; returns the rows."""
    rows = 0
    written = 0
    with path.open("w") as fh:
        if fmt == "json":
            fh.write("[\n")
        for n, r in _rows(fmt, offset):
            if fmt == "jsonl":
                text = json.dumps(r) + "\n"
            elif fmt == "json":
                body = json.dumps(r, indent=4).replace("\n}", "\n  }").replace('\n    "', '\n    "')
                text = ("" if n == 1 else ",\n") + "  " + body
            else:
                text = (
                    ("" if n > 1 else ",".join(r) + "\n") + ",".join(_csv_cell(v) for v in r.values()) + "\n"
                )
            if fmt == "jsonl" and n % 1000 == 0:
                text = f"ggml_cuda_init: found 1 CUDA devices (log line {n})\n" + text
            fh.write(text)
            written += len(text)
            rows = n
            if written >= size or n == max_rows:
                break
        if fmt == "json":
            fh.write("\n]\n")
    return rows


_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")
_CPU = re.compile(r"(?:User|System) time \(seconds\): ([0-9.]+)")


def _index_state(results: Path) -> tuple[int, int] | None:
    try:
        st = (results / ".index.sqlite").stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


def run_import(src: Path, results: Path, *, fresh: bool = True) -> dict[str, Any]:
    """One `toolkit import` in a fresh process: wall s, peak RSS (MB), exit code, the load before/after;
    into an empty `results` (`fresh`), else into what it holds, the folder the import adds removed after
    (and whether the folder's index file was left as it was)."""
    if fresh:
        shutil.rmtree(results, ignore_errors=True)
    had = set(results.iterdir()) if results.is_dir() else set()
    index_before = _index_state(results)
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "toolkit", "import", str(src), "--label", "scale",
           "--results", str(results)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    m = _RSS.search(done.stderr)
    untouched = index_before is not None and _index_state(results) == index_before
    if not fresh:
        for new in set(results.iterdir()) - had:
            if new.is_dir():  # the import's records; the index and the store's counter stay
                shutil.rmtree(new)
    return {
        "exit": done.returncode,
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(float(x) for x in _CPU.findall(done.stderr)), 2),
        "peak_rss_mb": round(int(m.group(1)) / 1024, 1) if m else None,
        "load_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "stdout_first": done.stdout.strip().splitlines()[:1],
        "stderr_head": [ln for ln in done.stderr.splitlines() if not ln.startswith("\t")][:3],
        **({} if fresh else {"index_untouched": untouched}),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("size", type=size_arg, help="bytes to generate, e.g. 200M, 1G")
    ap.add_argument("--format", choices=("jsonl", "json", "csv"), default="jsonl")
    ap.add_argument("--runs", type=int, default=3, help="imports of the same file (medians reported)")
    ap.add_argument("--keep", type=Path, default=None, help="write the file here and keep it")
    ap.add_argument("--stored", type=int, default=0, help="also import into a folder of this many records")
    ap.add_argument(
        "--folder", type=Path, default=None, help="--stored: make (or reuse) the folder here, kept"
    )
    args = ap.parse_args()
    if args.stored:
        return stored_main(args)
    with tempfile.TemporaryDirectory(prefix="import-scale-") as tmp:
        src = args.keep or Path(tmp) / f"big.{args.format}"
        t0 = time.monotonic()
        rows = generate(src, args.size, args.format)
        gen_s = time.monotonic() - t0
        size = src.stat().st_size
        runs = [run_import(src, Path(tmp) / "results") for _ in range(args.runs)]
        walls = [r["wall_s"] for r in runs]
        rss = [r["peak_rss_mb"] for r in runs if r["peak_rss_mb"] is not None]
        out = {
            "format": args.format,
            "bytes": size,
            "rows": rows,
            "generate_s": round(gen_s, 1),
            "runs": runs,
            "median_wall_s": statistics.median(walls),
            "median_mb_per_s": round(size / 1e6 / statistics.median(walls), 2),
            "mb_per_s_each": [round(size / 1e6 / w, 2) for w in walls],
            "median_peak_rss_mb": statistics.median(rss) if rss else None,
            "median_cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "mb_per_cpu_s": round(size / 1e6 / statistics.median(r["cpu_s"] for r in runs), 2),
            "cpus": os.cpu_count(),
        }
        print(json.dumps(out, indent=2))  # noqa: T201
        return max(r["exit"] for r in runs)


def stored_main(args: argparse.Namespace) -> int:
    """--stored N: the file imported into an empty folder and into an N-record folder, in turn."""
    with tempfile.TemporaryDirectory(prefix="import-scale-") as tmp:
        src = args.keep or Path(tmp) / f"big.{args.format}"
        rows = generate(src, args.size, args.format)
        full = args.folder or Path(tmp) / "full"
        marker = full / ".import-scale.json"  # what a kept folder holds
        setup: list[dict[str, Any]] = []
        if not (marker.is_file() and json.loads(marker.read_text()) == {"stored": args.stored}):
            stored = Path(tmp) / "stored.jsonl"
            generate(stored, 1 << 40, "jsonl", offset=5_000_000, max_rows=args.stored)
            t0 = time.monotonic()
            made = run_import(stored, full)
            stored.unlink()
            made["what"] = f"the {args.stored}-record folder made ({time.monotonic() - t0:.0f} s)"
            setup.append(made)
        warm = run_import(src, full, fresh=False)  # builds the query index of the folder; removed
        setup.append(warm)
        if any(r["exit"] for r in setup):
            sys.exit(f"the folder could not be made: {[r['stderr_head'] for r in setup]}")
        marker.write_text(json.dumps({"stored": args.stored}))
        runs: dict[str, list] = {"empty": [], "stored": []}
        for i in range(args.runs):
            for what in ("empty", "stored") if i % 2 == 0 else ("stored", "empty"):
                res = Path(tmp) / "empty" if what == "empty" else full
                runs[what].append(run_import(src, res, fresh=what == "empty"))
        med = {
            w: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s", "peak_rss_mb")}
            for w, rs in runs.items()
        }
        out = {
            "bytes": src.stat().st_size,
            "rows": rows,
            "stored_records": args.stored,
            "setup": setup,
            "runs": runs,
            "median": med,
            "stored_over_empty": {k: round(med["stored"][k] / med["empty"][k], 3) for k in med["empty"]},
        }
        print(json.dumps(out, indent=2))  # noqa: T201
        return max(r["exit"] for rs in runs.values() for r in rs)


if __name__ == "__main__":
    sys.exit(main())
