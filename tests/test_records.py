"""Result records: atomic appends, corrupt lines skipped with a warning, nothing measured lost."""

from __future__ import annotations

import json

from tests.support.records import make_record
from toolkit.results.records import BenchRecord, ResultStore


def _rec(run_id="r1", avg=10.0, **kw) -> BenchRecord:
    return make_record("cpu", "cpu", p=512, avg=avg, digest="sha256:" + "ab" * 32, run_id=run_id, **kw)


def test_results_are_keyed_by_digest(tmp_path):
    store = ResultStore(tmp_path)
    path = store.add_result(_rec())
    assert path == tmp_path / "abababababab" / "bench.jsonl"
    assert store.results()[0].avg_ts == 10.0


def test_corrupt_and_half_lines_are_skipped_and_reported(tmp_path):
    store = ResultStore(tmp_path)
    store.add_result(_rec(avg=1.0))
    path = store.add_result(_rec(avg=2.0))
    with path.open("a") as fh:
        fh.write('{"schema_version": 1, "run_id": "half"')  # a killed writer's half line
    store.add_result(_rec(avg=3.0))
    got = store.results()
    assert [r.avg_ts for r in got] == [1.0, 2.0, 3.0]  # the half line is skipped, the next append kept
    assert any("corrupt line" in w for w in store.warnings)


def test_unknown_fields_survive_a_round_trip(tmp_path):
    store = ResultStore(tmp_path)
    store.add_result(_rec(future_field={"x": 1}))
    line = json.loads(next((tmp_path).glob("*/bench.jsonl")).read_text())
    assert line["future_field"] == {"x": 1}


def test_timing_reads_every_runners_names_old_ones_included():
    """One set of timing names (records.TIMING_FIELDS) for every runner; records written before it keep
    their names (llama-bench elapsed_s / shader_cache_cold, vLLM measured_s / compile_cache_cold) and
    read the same through timing_value."""
    from toolkit.results.records import TIMING_ALIASES, TIMING_FIELDS, timing_value

    assert set(TIMING_ALIASES) <= set(TIMING_FIELDS)
    old_llama = {"elapsed_s": 12.5, "tests_s": 10.0, "startup_s": 2.5, "shader_cache_cold": 0.0}
    old_vllm = {"wall_s": 20.0, "measured_s": 1.5, "startup_s": 18.5, "compile_cache_cold": 1.0}
    new = {"wall_s": 12.5, "tests_s": 10.0, "startup_s": 2.5, "cache_cold": 0.0}
    for name in ("wall_s", "tests_s", "startup_s", "cache_cold"):
        assert timing_value(old_llama, name) == timing_value(new, name) is not None
    assert (timing_value(old_vllm, "tests_s"), timing_value(old_vllm, "cache_cold")) == (1.5, 1.0)
    assert timing_value({"wall_s": 1.0}, "tests_s") is None and timing_value({}, "wall_s") is None
    assert timing_value({"wall_s": 2.0, "elapsed_s": 9.0}, "wall_s") == 2.0  # the current name first


def test_float_stdev_matches_the_exact_one():
    """core.stats.stdev replaces statistics.stdev (Fractions: 241,580 of them in one 10,000-record
    report, issue 32): the same number to 1e-12, the same refusal of fewer than two values."""
    import random
    import statistics

    import pytest

    from toolkit.core import stats

    rng = random.Random(7)
    for n in (2, 3, 10, 1000):
        xs = [rng.uniform(0, 1e5) for _ in range(n)]
        assert stats.stdev(xs) == pytest.approx(statistics.stdev(xs), rel=1e-12)
    assert stats.stdev([5.0, 5.0, 5.0]) == 0.0
    with pytest.raises(ValueError):
        stats.stdev([1.0])
