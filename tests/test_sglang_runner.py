"""The SGLang runner plug-in through its RunContext, with a fake engine.

What cannot exist here, and is therefore faked: a gfx1201 GPU and the sglang-rocm image (its build
needs GitHub and a ROCm base; see README). The fake engine stands in for toolkit.engine.api ONLY for the
calls that would start containers; it answers with the real-shaped outputs of SGLang 0.5.15 in
tests/data/ (the shape is checked against the release's own code in tests/test_sglang.py). The
argument lists, the result parsing, the record building and the report are the product's own code.
"""

from __future__ import annotations

import pytest

from tests.support.engine import ONE_BATCH, FakeEngine, sglang_ctx
from toolkit.analysis import report
from toolkit.core import registry as runners


@pytest.fixture
def ctx_for(tmp_path):
    return lambda fake, **axes: sglang_ctx(tmp_path / "proj", fake, **axes)


def test_registry_names_the_sglang_runner():
    r = runners.get("sglang")
    assert r.name == "sglang" and "hf" in r.model_formats
    assert set(runners.names()) >= {"llama-bench", "vllm", "sglang"}
    with pytest.raises(KeyError, match="known: llama-bench, vllm, sglang"):
        runners.get("tensorrt")


def test_sglang_run_gives_prefill_decode_and_served_records(ctx_for):
    fake = FakeEngine()
    ctx = ctx_for(fake)
    out = runners.get("sglang").run(ctx)
    assert [o.status for o in out] == ["ok"], out
    recs = ctx.store.results()
    pp = next(r for r in recs if r.axis == "prefill")
    assert pp.method == "sglang-bench-one-batch-prefill" and len(pp.samples_ts) == 3  # one sample per process
    assert (
        pp.avg_ts == pytest.approx(ONE_BATCH[0]["prefill_throughput"])
        and pp.engine["chunked_prefill_size"] == 512
    )
    tg = next(r for r in recs if r.axis == "decode")
    assert tg.avg_ts == 80.0 and tg.n_depth == 16 and tg.test == "tg128 @ d16"  # the depth it ran at
    served = sorted((r.engine["concurrency"], r.avg_ts) for r in recs if r.axis == "served")
    assert served == [(1, 48.2), (2, 181.4), (4, 181.4), (8, 181.4)]
    assert len(fake.ran) == 6 and fake.removed == 1  # 2 points x 3 repetitions; the server removed
    assert all(r.model_extra.get("experimental") for r in recs)
    text = report.render(recs)
    assert "experimental" in text and "sglang@555555555555" in text


def test_sglang_served_shortfall_is_a_failed_record(ctx_for):
    ctx = ctx_for(FakeEngine(short=True))
    out = runners.get("sglang").run(ctx)
    assert out[0].status == "failed"
    served = [r for r in ctx.store.results() if r.axis == "served"]
    assert served and all(r.status == "failed" and "generated 32 of" in r.error for r in served)


def test_sglang_plan_is_what_run_executes(ctx_for):
    fake = FakeEngine()
    ctx = ctx_for(fake)
    plan = runners.get("sglang").plan(ctx)
    runners.get("sglang").run(ctx)
    planned = [s.argv[s.argv.index("python3") :] for s in plan if s.what.startswith(("pp", "tg"))]
    assert planned == fake.ran
    assert any(s.what == "launch_server" and "-d" in s.argv for s in plan)


def test_sglang_cases_timing_estimate_and_settings_follow_its_records(ctx_for):
    """One case per record (what the plan line counts); records carry the shared timing names; the
    estimate is their measured time (tests_s); reproduce rebuilds the `sglang:` block from them."""
    ctx = ctx_for(FakeEngine(), n_ubatch=[256, 512])
    r = runners.get("sglang")
    cases = r.cases(ctx)
    assert r.estimate(ctx, cases) == (0, 0.0)  # nothing measured yet
    r.run(ctx)
    recs = ctx.store.results()
    assert len(cases) == len(recs) == 2 * 2 + 4  # (pp, tg) x 2 micro-batches + 4 served levels
    assert {c["repetitions"] for c in cases if c["method"] != "sglang-bench-serving"} == {3}
    for rec in recs:
        assert {"wall_s", "tests_s", "startup_s"} <= set(rec.timing), rec.timing
        assert rec.timing["tests_s"] > 0
    known, seconds = r.estimate(ctx, cases)
    assert known == len(recs) and seconds == pytest.approx(sum(x.timing["tests_s"] for x in recs))
    assert r.settings_from_records(recs, {}) == ctx.lm.m.settings("sglang")
    assert r.settings_from_records([], {}) is None
