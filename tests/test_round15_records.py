"""Breaker round 15, findings 6 and 7: figures that are not what llama-bench measured. Each test fails on
the code before its fix (docs/reliability-log.md, round 15, findings 6, 7).

- 6: a stored llama-bench record whose token counts or number of samples contradict its own `raw` row
  (a pp128 relabelled pp4096; 7 of 10 repetitions dropped, avg_ts recomputed from the 3 fastest) was
  shown; it is skipped as contradicting itself, named file:line, by every reader (results/raw_check.py);
- 7: an md table of a llama-bench from before micro-batches (build 1879, tests written `pp 512`) was
  given n_batch 2048 / n_ubatch 512 and shown `pp512 ub512`; a default is filled only where the table's
  build is known to have it, else n_batch and n_ubatch stay unknown and the import says why
  (runtimes/llama_bench/md_defaults.py).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import DATA
from tests.support.records import edit_line
from tests.support.runs import tk
from toolkit.results import identity, importer
from toolkit.results.records import BenchRecord, ResultStore, bench_record
from toolkit.runtimes.llama_bench import md_defaults, readers

CPU_A = DATA / "results-cpu-a.jsonl"  # real `toolkit bench` records: -p 128,1024 -n 64 -ub 64,512 -r 10


def _lines() -> list[dict[str, Any]]:
    return [json.loads(x) for x in CPU_A.read_text().splitlines() if x.strip()]


def _relabel(r: dict[str, Any]) -> None:
    """Finding 6 (a): pp128 made pp4096 (n_prompt and test), the samples and raw row untouched."""
    r.update(n_prompt=4096, test="pp4096")


def _fastest_three(r: dict[str, Any]) -> None:
    """Finding 6 (b): the 3 fastest of 10 samples kept, avg_ts and stddev_ts recomputed from them."""
    s = sorted(r["samples_ts"])[-3:]
    r.update(samples_ts=s, avg_ts=statistics.fmean(s), stddev_ts=statistics.stdev(s))


def _deeper(r: dict[str, Any]) -> None:
    r.update(n_depth=512, test=f"{r['test']} @ d512")


def _smaller_ubatch(r: dict[str, Any]) -> None:
    r.update(n_ubatch=32, n_ubatch_effective=32)


EDITS = {
    "n_prompt relabelled": (0, _relabel, "n_prompt 4096 is not its raw row's 128"),
    "repetitions dropped": (
        1,
        _fastest_three,
        "samples_ts has 3 value(s), its raw row's samples_ts 10 (-r 10): not the repetitions",
    ),
    "n_depth added": (0, _deeper, "n_depth 512 is not its raw row's 0"),
    "n_ubatch changed": (0, _smaller_ubatch, "n_ubatch 32 is not its raw row's 64"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_record_that_contradicts_its_raw_row_is_refused(edit: str) -> None:
    n, change, says = EDITS[edit]
    obj = _lines()[n]
    assert bench_record(obj)[0] is not None  # as stored: a record
    change(obj)
    rec, why = bench_record(obj)
    assert rec is None and (why or "").startswith(f"skipped a record that contradicts itself: {says}"), why


def _store(tmp_path: Path) -> tuple[Path, Path]:
    """A results folder holding the captured CPU runs A and B; returns (it, A's bench.jsonl)."""
    root = tmp_path / "r"
    for src in (CPU_A, DATA / "results-cpu-b.jsonl"):
        digest = json.loads(src.read_text().splitlines()[0])["image"]["digest"]
        f = root / digest.split(":")[1][:12] / "bench.jsonl"
        f.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, f)
    return root, root / "a504e0178239" / "bench.jsonl"


def test_report_and_compare_skip_the_edited_records_naming_file_and_line(tmp_path: Path) -> None:
    """The finding's reproducer: the report showed `pp4096 ub64 858.50` (a test never run) and
    `pp1024 ub64 1095.90` (+39 % by dropping 7 of 10 repetitions). Both are skipped, by the report (cold
    and warm query index), by compare and by ResultStore, each naming file:line and the field."""
    root, f = _store(tmp_path)
    tk(tmp_path, "report", "--results", str(root), "--format", "json")  # the index built, then warm
    edit_line(f, 1, _relabel)
    edit_line(f, 2, _fastest_three)
    said = [
        f"{f}:1: skipped a record that contradicts itself: n_prompt 4096 is not its raw row's 128",
        f"{f}:2: skipped a record that contradicts itself: samples_ts has 3 value(s), its raw row's samples_ts 10",
    ]
    for _warm in (False, True):
        rep = tk(tmp_path, "report", "--results", str(root), "--format", "json")
        assert rep.returncode == 0 and all(s in rep.stderr for s in said), rep.stderr
        shown = {row["test"] for t in json.loads(rep.stdout)["tables"] for row in t["rows"]}
        assert not any(t.startswith("pp4096") for t in shown), shown
    cmp = tk(tmp_path, "compare", "--results", str(root), "a504e0178239", "c703a351d321", "--allow-missing")
    assert all(s in cmp.stderr for s in said), cmp.stderr
    store = ResultStore(root)
    assert len(store.results()) == 10 and store.refused == 2
    assert all(any(w.startswith(s) for w in store.warnings) for s in said), store.warnings


def test_records_that_legitimately_differ_from_their_raw_row_still_read(tmp_path: Path) -> None:
    """What a record may hold that its raw row does not: a repaired stddev, an avg_ts taken from the
    samples, no raw counts at all (older records, other writers), raw counts written as text (csv), no
    samples where the row lists only samples_ns, and the pooled samples of combined processes."""
    base = _lines()[0]
    cases = [
        {**base, "stddev_ts": None},
        {**base, "raw": {}},
        {**base, "raw": {k: str(v) if k.startswith("n_") else v for k, v in base["raw"].items()}},
        {
            **base,
            "samples_ts": [],
            "stddev_ts": None,
            "raw": {k: v for k, v in base["raw"].items() if k != "samples_ts"},
        },
        {**base, "raw": {k: v for k, v in base["raw"].items() if k != "n_depth"}},
    ]
    for obj in cases:
        rec, why = bench_record(obj)
        assert rec is not None, why
    one = BenchRecord.model_validate(base)
    two = one.model_copy(update={"run_id": "second", "seq": 99})
    combined = identity.combine_runs([one, two])  # 20 samples beside a raw row of 10
    rec, why = bench_record(json.loads(combined.model_dump_json()))
    assert rec is not None, why


def test_every_captured_record_and_import_still_reads(tmp_path: Path) -> None:
    """The real records (tests/data/results-*.jsonl) and every captured llama-bench output imported in
    each format read whole: the check refuses edits, never what the toolkit writes."""
    for name in ("results-cpu-a.jsonl", "results-cpu-b.jsonl", "results-vulkan-lavapipe.jsonl"):
        for line in (DATA / name).read_text().splitlines():
            assert bench_record(json.loads(line))[0] is not None, name
    for i, fmt in enumerate(("jsonl", "json", "csv", "sql", "md")):
        store = ResultStore(tmp_path / str(i))
        importer.import_files(store, [DATA / f"llamabench-0c1e57098-cpu.{fmt}"], label=fmt)
        assert len(store.results()) >= 2 and store.refused == 0, (fmt, store.warnings)


# --------------------------------------------------------------------------- 7. old markdown tables

OLD_MD = """\
| model                          |       size |     params | backend    | ngl |       test |              t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | ---------- | ---------------: |
| llama 7B mostly Q4_0           |   3.56 GiB |     6.74 B | CUDA       |  99 | pp 512     |  2694.91 ± 18.66 |
| llama 7B mostly Q4_0           |   3.56 GiB |     6.74 B | CUDA       |  99 | tg 128     |    130.56 ± 0.28 |

build: 5a7d312 (1879)
"""


def _md_import(tmp_path: Path, text: str) -> tuple[ResultStore, importer.ImportResult]:
    src = tmp_path / "in" / "old.md"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(text)
    store = ResultStore(tmp_path / "r")
    return store, importer.import_files(store, [src], label="old")


def test_an_old_markdown_table_has_no_guessed_batch_sizes(tmp_path: Path) -> None:
    """Build 1879 had n_batch 512 by default and no micro-batch: it was stored and shown as `pp512
    ub512`, csv n_batch 2048 / n_ubatch 512. Now both are unknown, flagged, and the import says why."""
    store, res = _md_import(tmp_path, OLD_MD)
    recs = store.results()
    assert len(recs) == 2 and store.refused == 0
    for r in recs:
        assert r.n_batch is None and r.n_ubatch is None and r.n_ubatch_effective is None
        assert not {"n_batch", "n_ubatch", "type_k", "split_mode"} & set(r.raw), r.raw
        assert "no-batch-sizes" in r.model_extra["flags"]
    note = next(n for n in res.notes if "old.md" in n)
    assert "n_ubatch, and n_batch where the table has no n_batch column, are unknown" in note, note
    assert f"build of {md_defaults.MICRO_BATCH_BUILD}" in note, note
    rep = tk(tmp_path, "report", "--results", str(tmp_path / "r"), "--format", "csv")
    assert rep.returncode == 0, rep.stderr
    rows = {row["test"]: row for row in csv.DictReader(io.StringIO(rep.stdout))}
    assert set(rows) == {"pp512", "tg128"}, rows  # never `pp512 ub512`
    assert rows["pp512"]["n_batch"] == rows["pp512"]["n_ubatch"] == "", rows["pp512"]
    assert "no-batch-sizes" in rows["pp512"]["flags"]


@pytest.mark.parametrize(
    ("build", "known"),
    [
        (None, False),  # no build line: the build is unknown
        ("build: 5a7d312 (2412)", False),  # the build before micro-batches
        (f"build: f30ea47a ({md_defaults.MICRO_BATCH_BUILD})", True),
        ("build: 2aa45ef9e (7423)", True),
        ("build: 0c1e57098 (0)", True),  # the pinned commit, built without git history
        ("build: 1234567 (0)", False),  # a number that is no build count, at a commit not known
    ],
)
def test_defaults_are_filled_only_for_a_build_known_to_have_them(build: str | None, known: bool) -> None:
    text = OLD_MD.rsplit("\n\n", 1)[0] + (f"\n\n{build}\n" if build else "\n")
    rows = readers.read_md(text)
    assert len(rows) == 2
    for row in rows:
        assert (row.fields.get("n_batch"), row.fields.get("n_ubatch")) == (
            (2048, 512) if known else (None, None)
        )
        assert (md_defaults.NO_BATCH_SIZES in row.notes) is not known


def test_a_table_that_prints_n_ubatch_is_of_a_build_with_micro_batches() -> None:
    """An n_ubatch column exists only from build 2413 on: the n_batch it leaves out is 2048, whatever
    its build line says (here none)."""
    text = (
        "| model | size | params | backend | ngl | n_ubatch | test | t/s |\n"
        "| --- | ---: | ---: | --- | --: | ---: | ---: | ---: |\n"
        "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | 256 | pp512 | 2694.91 ± 18.66 |\n"
    )
    (row,) = readers.read_md(text)
    assert (row.fields["n_batch"], row.fields["n_ubatch"]) == (2048, 256)
    assert md_defaults.NO_BATCH_SIZES not in row.notes
