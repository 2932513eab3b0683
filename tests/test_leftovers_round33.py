"""Leftovers of round 32, closed (left33). (1) compare folds decode (tg) rows measured at several
micro-batches by the report's own rule (tables.fold_decode_ub): one row where the tok/s agree within
noise, each ub its row where they do not. (2) `report -i NAME` / `--run ID` naming nothing stored
says the stored name nearest it (matrix.api.nearest, as the other commands), and a typo beside a name
that matched is refused, not silently dropped. (3) `toolkit pins`: pins on a host that did not
answer each name their own URL as not asked, and whose failure they quote (every row quoted the
first failing URL as if it were its own). (5) A cell whose record states no stddev but holds its
samples is judged `noisy` by their spread (facts.noise_rsd): 100, 100, 100, 100, 1000 t/s imported without
stddev_ts was a cell of 280 t/s with no flag. (6) A summary object's telling key after its first 40
keys still names it (check.summary, _printed read every key).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.support.records import make_record
from tests.support.runs import tk
from toolkit.analysis import compare, compare_text, report
from toolkit.analysis.facts import Facts
from toolkit.images import pins
from toolkit.matrix.api import SourceSpec
from toolkit.results.records import ResultStore
from toolkit.runtimes.llama_bench.validity import not_a_row

# ------------------------------------------------------------ 1. one decode fold for report and compare


def _tg_store(root: Path, b_2048: float) -> ResultStore:
    """Runs a and b: pp512, and tg128 at ub512 and ub2048 (a: 93.0 / 93.1; b: 93.2 / `b_2048`), sd 0.5."""
    store = ResultStore(root)
    for img, run, at512, at2048 in (("a", "run-a", 93.0, 93.1), ("b", "run-b", 93.2, b_2048)):
        for ub, v in ((512, at512), (2048, at2048)):
            store.add_result(make_record(img, "rocm", n=128, ub=ub, avg=v, sd=0.5, run_id=run))
        store.add_result(make_record(img, "rocm", p=512, avg=3000.0, sd=10.0, run_id=run))
    return store


def test_compare_folds_decode_rows_over_the_micro_batch_as_the_report_does(tmp_path: Path) -> None:
    store = _tg_store(tmp_path / "results", 93.3)
    assert "| tg128 " in report.render(store.results())  # the report: one tg128 row
    c = compare.compare(store, "run-a", "run-b")
    assert [r.test for r in c.rows] == ["pp512 ub512", "tg128"]
    (tg,) = [r for r in c.rows if r.test == "tg128"]
    assert tg.fa.record.n_ubatch == tg.fb.record.n_ubatch == 512  # the ub512 cell, as the report's
    text = compare_text.format_comparison(c, "github")
    assert compare.DECODE_UB_NOTE in text and "tg128 ub2048" not in text
    assert [r["test"] for r in compare_text.comparison_json(c)["rows"]] == ["pp512 ub512", "tg128"]


def test_compare_keeps_each_ub_where_a_side_differs_beyond_noise(tmp_path: Path) -> None:
    store = _tg_store(tmp_path / "results", 60.0)  # b's ub2048 is far slower: a regression, not folded
    c = compare.compare(store, "run-a", "run-b")
    assert [r.test for r in c.rows] == ["pp512 ub512", "tg128 ub512", "tg128 ub2048"]
    assert [r.test for r in c.regressions] == ["tg128 ub2048"]
    assert compare.DECODE_UB_NOTE not in compare_text.format_comparison(c, "github")


def test_a_tg_ub_one_side_lacks_is_not_missing_once_folded(tmp_path: Path) -> None:
    """A measured tg128 at ub512 and ub2048 (agreeing), B at ub512 only: the report shows one tg128
    row both images fill, so compare compares it and names no test as measured on one side only."""
    store = ResultStore(tmp_path / "results")
    for ub, v in ((512, 93.0), (2048, 93.1)):
        store.add_result(make_record("a", "rocm", n=128, ub=ub, avg=v, sd=0.5, run_id="run-a"))
    store.add_result(make_record("b", "rocm", n=128, ub=512, avg=93.2, sd=0.5, run_id="run-b"))
    c = compare.compare(store, "run-a", "run-b")
    assert [r.test for r in c.rows] == ["tg128"] and not c.missing, c.missing_text()


# ------------------------------------------------------------ 2. report -i / --run: the nearest name


def test_report_of_an_unknown_image_or_run_names_the_nearest(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    for img in ("hip", "vulkan"):
        store.add_result(make_record(img, "rocm", p=512, avg=3000.0, sd=10.0, run_id=f"run-{img}"))
    for args, said in (
        (["-i", "hpi"], "no record of image hpi: did you mean 'hip'?"),
        (["-i", "hip", "-i", "hpi"], "no record of image hpi: did you mean 'hip'?"),  # hip alone was shown
        (["--run", "run-hipp"], "no record of run run-hipp: did you mean 'run-hip'?"),
    ):
        p = tk(tmp_path, "report", "--results", "results", *args)
        assert p.returncode == 4 and said in p.stderr, (args, p.returncode, p.stdout[:200], p.stderr)
    p = tk(tmp_path, "report", "--results", "results", "-i", "hip", "-i", "vulkan", "--run", "run-hip")
    assert p.returncode == 0 and "hip" in p.stdout, p.stderr  # a known name the run filter left out: fine


# ------------------------------------------------------------ 3. pins on a dead host: each its own URL


def test_each_pin_on_a_host_that_did_not_answer_names_its_own_url() -> None:
    """Three git sources on one host that refuses connections (a free local port: no network needed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hosts, rows = pins.Hosts(), []
    for repo in ("x", "y", "z"):
        src = SourceSpec(git=f"http://127.0.0.1:{port}/{repo}.git", ref="v1", commit="a" * 40)
        pin = pins.Pin("source", pins.source_ref(src), src.commit, (f"sources.{repo}",), src)
        rows.append(pins.check_pin(pin, None, hosts=hosts, timeout=10))
    assert [r.status for r in rows] == ["unreachable"] * 3
    assert "x.git" in rows[0].reason
    for r, repo in zip(rows[1:], ("y", "z"), strict=True):
        assert f"not asked again: http://127.0.0.1:{port}/{repo}.git not checked" in r.reason, r.reason
        assert "the first failure there" in r.reason and "x.git" in r.reason, r.reason


# ------------------------------------------------------------ 5. a mean one sample dominates is flagged


def test_a_mean_one_sample_dominates_is_flagged_where_no_stddev_is_stated(tmp_path: Path) -> None:
    row = {
        "build_commit": "83bc2f28",
        "backends": "ROCm",
        "gpu_info": "AMD Radeon Graphics",
        "model_type": "qwen3moe 30B.A3B Q4_K - Medium",
        "n_batch": 2048,
        "n_ubatch": 512,
        "n_prompt": 512,
        "n_gen": 0,
        "test_time": "2025-08-04T22:52:03Z",
        "avg_ts": 280.0,
        "samples_ts": [100.0, 100.0, 100.0, 100.0, 1000.0],  # llama-bench's per-repetition t/s; no stddev_ts
    }
    (tmp_path / "nostd.jsonl").write_text(json.dumps(row) + "\n")
    assert tk(tmp_path, "import", "nostd.jsonl", "--label", "x", "--results", "results").returncode == 0
    p = tk(tmp_path, "report", "--results", "results")
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("| pp512 ub512 ")]
    assert "280.00" in line and "noisy" in line, p.stdout
    steady = make_record("a", "rocm", p=512, avg=100.0, sd=None, raw={"samples_ts": [100.0, 100.5, 99.5]})
    assert "noisy" not in Facts.of(steady).flags  # samples that agree: no flag


# ------------------------------------------------------------ 6. a summary's telling key after 40 others


@pytest.mark.parametrize(
    ("tail", "said"),
    [
        ({"engine": "SGLang", "context_sweep": []}, "it names SGLang ('engine': 'SGLang')"),
        ({"vllm_version": "0.16.0"}, "it names vLLM ('vllm_version')"),
        (
            {"raw_output": "==== Serving Benchmark Result ====\n"},
            "its 'raw_output' holds a serving benchmark",
        ),
    ],
)
def test_a_summary_whose_telling_key_comes_after_40_others_is_named(tail: dict, said: str) -> None:
    fields = {
        f"run_{i}": {"tok_s": 10.0 + i} for i in range(45)
    } | tail  # a script's 45 runs, then its engine
    assert said in (not_a_row(fields) or ""), not_a_row(fields)
