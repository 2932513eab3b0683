"""Leftovers of rounds 29-30, closed (left31). (1) A stored `seq` above its folder's counter (a hand
edit, a folder copied in from a store whose counter ran ahead) made its run the newest of each test and
hid the later ones, flagged clock-skew: now such a seq is not trusted (results/sequence.py) by any
reader of the store's order (ResultStore.results() with identity.write_order, the query index's SQL
order and its newest-digest choice), said once. (2) md rows after their table's end: one note a
table with their count, not one a row. (3) vLLM serve peaks and top percentiles held to the totals
(vLLM's calculate_metrics). (4) Twins: one log
writer (bench/runners/base.write_log). Inputs: the real CPU llama-bench md and the toolkit's own
vLLM 0.16.0 serve capture of tests/data, edited. 14 tests fail before the fixes; 4 guards pass both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.records import make_record, resolve_whole
from tests.support.runs import tk
from tests.support.stored import matrix_project
from toolkit.analysis import compare
from toolkit.core.errors import BadInput
from toolkit.results import identity
from toolkit.results import index as resultindex
from toolkit.results.records import ResultStore

FAR = 9 * 10**18  # within 64 bits, far above any counter this folder gave


def _edit_seq(f: Path, line: int, seq: int) -> None:
    lines = f.read_text().splitlines()
    o = json.loads(lines[line])
    o["seq"] = seq
    lines[line] = json.dumps(o, separators=(",", ":"))
    f.write_text("\n".join(lines) + "\n")


def _four_runs(root: Path) -> ResultStore:
    """Four runs of one test written by the store (seq 1-4, a day apart), the oldest's seq edited to FAR."""
    store = ResultStore(root)
    for k, avg in enumerate((100.0, 200.0, 300.0, 400.0)):
        rec = make_record("cpu", "cpu", p=512, avg=avg, run_id=f"run-{k + 1}", digest="sha256:" + "c" * 64)
        store.add_result(rec.model_copy(update={"created": f"2026-07-0{k + 1}T00:00:00+00:00"}))
    _edit_seq(next(root.glob("*/bench.jsonl")), 0, FAR)
    return store


def test_a_seq_above_the_counter_does_not_make_its_run_the_newest(tmp_path):
    """Before: run-1 (100 t/s, seq 9e18) was used, runs 2-4 superseded, flagged clock-skew."""
    store = _four_runs(tmp_path / "r")
    sel = resultindex.select(store)
    used = identity.newest_per_test(sel).used
    assert [(r.run_id, r.avg_ts, r.clock_skew) for r in used] == [("run-4", 400.0, None)]
    assert (sel.read, sel.superseded) == (4, 3)
    whole = ResultStore(store.root)
    records = whole.results()
    assert [r.run_id for r in identity.newest_per_test(records).used] == ["run-4"]
    assert all(r.clock_skew is None for r in records)
    for s in (store, whole):  # said once, by both readers alike
        said = [w for w in s.warnings if "above this folder's counter" in w]
        assert len(said) == 1 and "1 record(s)" in said[0] and str(FAR) in said[0], s.warnings


def test_a_seq_within_the_counter_orders_as_before(tmp_path):  # guard: passes before and after
    store = _four_runs(tmp_path / "r")
    _edit_seq(next(store.root.glob("*/bench.jsonl")), 0, 1)
    assert [r.run_id for r in identity.newest_per_test(resultindex.select(store)).used] == ["run-4"]
    assert not [w for w in store.warnings if "counter" in w]


def test_compare_names_the_digest_written_last(tmp_path):
    """Image `cpu` built twice; the older digest's record edited to seq 9e18. Before: `compare cpu other`
    took the older digest (both the SQL choice, newest_digest, and the whole-list one, write_order)."""
    store = ResultStore(tmp_path / "r")
    for k, (img, d) in enumerate((("cpu", "c"), ("cpu", "d"), ("other", "e"))):
        store.add_result(
            make_record(img, "cpu", p=512, avg=100.0 + k, run_id=f"run-{k}", digest="sha256:" + d * 64)
        )
    _edit_seq(store.root / ("c" * 12) / "bench.jsonl", 0, FAR)
    a, _ = compare._resolve_sides(store, "cpu", "other")
    assert {r.image.digest for r in a.records} == {"sha256:" + "d" * 64}
    whole = resolve_whole(ResultStore(store.root), "cpu")
    assert {r.image.digest for r in whole.records} == {"sha256:" + "d" * 64}


def test_report_and_import_agree(tmp_path):
    """`toolkit report --format json` after an import into such a folder uses run-4 and warns once;
    the import numbers its records after the counter (5-10), all trusted."""
    tmp = matrix_project(tmp_path)
    _four_runs(tmp / "r")
    src = Path(__file__).parent / "data" / "llamabench-0c1e57098-cpu.jsonl"
    assert tk(tmp, "import", "--results", "r", "--label", "cpu", str(src)).returncode == 0
    res = tk(tmp, "report", "--results", "r", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert "run-4" in res.stdout and '"run-1"' not in res.stdout
    assert res.stderr.count("above this folder's counter 10") == 1, res.stderr


# ---- md rows after their table's end: one note a table, not one a row (round 30: 432,431 notes)

MD = Path(__file__).parent / "data" / "llamabench-0c1e57098-cpu.md"


def _stray_md(tmp_path: Path, n: int, tables: int = 1) -> Path:
    """The real CPU md table, a blank line, then `n` copies of its first row (rows after its end), the
    whole `tables` times."""
    lines = MD.read_text().splitlines(keepends=True)
    one = "".join(lines[:4]) + "\n" + lines[2] * n + "\n" + "".join(lines[4:])
    src = tmp_path / "stray.md"
    src.write_text(one * tables)
    return src


def test_rows_after_a_tables_end_are_one_note_with_their_count(tmp_path):
    """Before: 20,000 notes, one a row (a 64 MiB file: 532,573 notes printed, 580 MB peak)."""
    from toolkit.results import importer

    res = importer.import_files(ResultStore(tmp_path / "r"), [_stray_md(tmp_path, 20_000)], label="x")
    said = [s for s in res.skipped if "after that table's end" in s]
    assert said == [
        f"{tmp_path / 'stray.md'}:6: a row of the table at line 1 after that table's end (a blank line or other "
        "text came between): not read; put it back under its table's header to import it; and 19,999 more "
        "such row(s), up to line 20005"
    ], said[:3]
    assert res.records == 2


def test_each_tables_stray_rows_are_said_apart(tmp_path):  # one note a table (before: one a row)
    from toolkit.runtimes.llama_bench import readers

    skipped: list[str] = []
    rows = readers.read_md(_stray_md(tmp_path, 3, tables=2).read_text(), skipped)
    assert len(rows) == 4
    assert [s.split(":")[0] for s in skipped] == ["line 6", "line 17"]
    assert skipped[0].endswith("and 2 more such row(s), up to line 8")
    assert "table at line 12" in skipped[1] and skipped[1].endswith("up to line 19")


def test_one_stray_row_is_said_as_before(tmp_path):  # guard: round 29's words, unchanged
    from toolkit.runtimes.llama_bench import readers

    skipped: list[str] = []
    readers.read_md(_stray_md(tmp_path, 1).read_text(), skipped)
    assert skipped == [
        "line 6: a row of the table at line 1 after that table's end (a blank line or other text came between): "
        "not read; put it back under its table's header to import it"
    ]


# ---- vLLM serve peaks held to the totals (vLLM's calculate_metrics counts them in 1-s buckets)

SERVE = Path(__file__).parent / "data" / "vllm-0.16.0-serve.json"  # the toolkit's own 0.16.0 capture


def _serve_import(tmp_path: Path, **edit):
    from toolkit.results import importer

    src = tmp_path / "in" / "serve-128-32-c2.json"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(json.dumps({**json.loads(SERVE.read_text()), **edit}))
    return importer.import_files(ResultStore(tmp_path / "r"), [src], label="v")


@pytest.mark.parametrize(
    "edit, said",
    [
        (
            {"max_output_tokens_per_s": 5000.0},
            "max_output_tokens_per_s 5000 is more than total_output_tokens 256",
        ),
        ({"max_concurrent_requests": 9}, "max_concurrent_requests 9 is more than completed 8"),
        ({"max_concurrent_requests": 50}, "max_concurrent_requests 50 is more than completed 8"),
        (
            {"max_concurrent_requests": 0},
            "max_concurrent_requests 0 is below what completed 8 in duration 4.182 s",
        ),
        ({"max_output_tokens_per_s": 0.0}, "max_output_tokens_per_s 0 is below what completed 8 in duration"),
        (
            {
                "p99_ttft_ms": 150.0,
                "p90_ttft_ms": 145.0,
                "median_ttft_ms": 140.0,
                "p50_ttft_ms": 140.0,
                "std_ttft_ms": 60.0,
            },
            "p90_ttft_ms 145 is below mean_ttft_ms 152.3",
        ),
        (
            {
                "p99_e2el_ms": 1020.0,
                "p90_e2el_ms": 1030.0,
                "median_e2el_ms": 1000.0,
                "p50_e2el_ms": 1000.0,
                "std_e2el_ms": 100.0,
            },
            "p99_e2el_ms 1020 is below p90_e2el_ms 1030",
        ),
        (
            {
                "p99_e2el_ms": 1018.0,
                "p90_e2el_ms": 1015.0,
                "median_e2el_ms": 1000.0,
                "p50_e2el_ms": 1000.0,
                "std_e2el_ms": 100.0,
            },
            "p90_e2el_ms 1015 is below mean_e2el_ms 1032.8",
        ),
    ],
    ids=[
        "peak>total",
        "conc>completed",
        "conc>num_prompts",
        "conc-0",
        "peak-0",
        "p90<mean-ttft",
        "guard-p99<p90",
        "p<mean-e2el",
    ],
)
def test_serve_peaks_and_top_percentiles_held_to_the_totals(tmp_path, edit, said):
    """Before: each imported ok (exit 0) but the p99 < p90 guard, refused before and after."""
    with pytest.raises(BadInput, match=said.replace("(", r"\(").replace(".", r"\.")):
        _serve_import(tmp_path, **edit)


def test_real_serve_results_and_the_field_case_import_as_before(tmp_path):  # guard
    """The public captures (a real 0.25 run at c2 says 4 concurrent requests: above max_concurrency, not
    held) import ok; the shared field case (70 tok/s at peak beside 8 output tokens, a duration its 8
    requests cannot fit) stays one failed record with the same error."""
    from toolkit.results import importer

    res = _serve_import(tmp_path)
    assert res.records == 1
    case = json.loads((Path(__file__).parent / "data" / "vllm-serve-short-outputs.json").read_text())
    src = tmp_path / "case" / "serve-128-32-c2.json"
    src.parent.mkdir()
    src.write_text(json.dumps(case))
    store = ResultStore(tmp_path / "r2")
    importer.import_files(store, [src], label="pub")
    (rec,) = store.results()
    assert (
        rec.status == "failed"
        and rec.error.startswith("vllm bench serve (c2, in 128, out 32): generated 8 of 256 requested tokens")
        and "; and duration 1.2 s is shorter than its requests allow" in rec.error
    )


# ---- twins: one reading of a number, one log writer


def test_every_runner_writes_its_log_through_one_writer():
    """Before: bench/runners/vllm._write_log and llama_bench.write_log_file each opened and wrote the file."""
    import inspect

    from toolkit.bench.runners import base, llama_bench, vllm

    for mod in (llama_bench, vllm):
        assert "O_TRUNC" not in inspect.getsource(mod), mod.__name__
        assert mod.write_log is base.write_log and mod.log_text is base.log_text
