"""Breaker round 14 (hostile tester of this session's change): a size text beyond a float's range
crashed every reader of a results folder, and a hand-edited builds.jsonl put NaN, negative or
300-digit figures in the build's estimate. Each test fails on the code before its fix (the probe,
resume and model-change faults of that round: tests/test_gpu_probe.py, tests/test_depth.py; the
runner block that is not a mapping: tests/test_bench_startup.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.records import make_record
from tests.support.runs import tk
from toolkit.images import build_plan
from toolkit.results.records import ResultStore
from toolkit.runtimes.llama_bench import check


@pytest.mark.parametrize("text", ["9" * 400 + " GiB", "1" + "0" * 300 + " TiB", "1e400 B"])
def test_a_size_text_beyond_a_float_is_no_count(text: str) -> None:
    """`round(float(...) * unit)` raised OverflowError (cannot convert float infinity to integer)."""
    assert check.quantity(text) is None
    assert check.quantity("56.89 GiB") == round(56.89 * 2**30)


def test_a_report_reads_a_record_whose_model_size_is_beyond_a_float(tmp_path: Path) -> None:
    """One stored record with raw.model_size `9...9 GiB` (400 digits) made every report exit 1 with a
    traceback (the index's test key reads the model's size)."""
    rec = make_record("cpu", "cpu", n=128, avg=90.0)
    data = json.loads(rec.model_dump_json())
    data.setdefault("raw", {})["model_size"] = "9" * 400 + " GiB"
    folder = tmp_path / "results" / rec.image.digest.split(":")[-1][:12]
    folder.mkdir(parents=True)
    (folder / "bench.jsonl").write_text(json.dumps(data) + "\n")
    res = tk(tmp_path, "report", "--results", str(tmp_path / "results"), "--format", "json")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-800:]
    assert json.loads(res.stdout)["records"], res.stdout[:300]


BUILD = {
    "image": "cpu",
    "ref": "toolkit/cpu:x",
    "digest": "sha256:" + "c" * 64,
    "backend": "cpu",
    "template": "t",
    "template_hash": "t",
    "created": "2026-12-01T00:00:00+00:00",
    "cached_steps": 0,
    "steps": 9,
}


@pytest.mark.parametrize("secs", ["nan", "-inf", "inf", -5, 1e300, "1e308"])
def test_a_build_time_that_is_no_figure_is_no_estimate(tmp_path: Path, secs) -> None:
    """builds.jsonl's build_seconds NaN, -5 or 1e300: the heartbeat said `(last full build nan min)`
    or a 300-digit minute count, the build's note `previous build nan s`. Now: no estimate."""
    store = ResultStore(tmp_path / "results")
    store.root.mkdir(parents=True)
    store.builds_file.write_text(json.dumps({**BUILD, "build_seconds": secs}) + "\n")
    assert build_plan.full_build_seconds(store, "cpu") is None
    note = build_plan.previous_build_note(store, "cpu")
    assert note == "; previous build's time unknown, 0 of 9 steps from cache", note
    store.builds_file.write_text(json.dumps({**BUILD, "build_seconds": 1020.0}) + "\n")
    assert build_plan.full_build_seconds(store, "cpu") == 1020.0
    assert build_plan.previous_build_note(store, "cpu").startswith("; previous build 1020.0 s")
