"""Breaker round 32: hostile and odd input to what 11d7781 (the canary's retries while its output is cut)
and b39dc2a (public files round 30) added. docs/reliability-log.md "Breaker round 32" lists each case.

- a canary whose first process was cut and whose next one failed otherwise (exit 139, a timeout, `you
  need at least N tokens`) said "2 processes, each cut before its result": now the last one's reason,
  and that the one before it was cut;
- the engine refusing a retry's container (a 500 from the daemon) escaped run_canary as a traceback
  out of `toolkit bench`: now unchecked with the engine's words, as the first process's refusal was;
- `[1]1.2.3,` on llama-perplexity's stdout raised ValueError out of parse_perplexity (a crash of the
  bench): now no chunk value;
- n_cpu_moe 4.0, "4.0", "+4" or "999999999999", which the validity pass reads as 4 (and 999999999999),
  got a share of the GPU's peak as if every weight were on the GPU: now no roofline, as n_cpu_moe 4;
- an n_cpu_moe sweep of 7 values (6 reasons for no roofline) named the first 3 and dropped the others
  without a word: now it says how many more;
- the toolkit's own vLLM canary.jsonl, imported by mistake, was called "a summary another script wrote
  of its runs" (its `method` names vLLM: check.summary) and told to import `vllm bench serve
  --save-result`; a llama.cpp one was "no n_prompt": now both are named a toolkit canary result.

The canary runs on the fake engine of tests/test_canary.py (the container's output is captured real
output of llama-perplexity, cut as llama.cpp#22142 cuts it; a failing retry cannot be made to happen
on a real engine on demand).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.engine import FakeEngine, llama_ctx
from tests.support.public import imp
from toolkit.analysis import roofline, table_text, tables
from toolkit.bench import canary
from toolkit.core.errors import BadInput
from toolkit.engine import api as engine
from toolkit.results import importer
from toolkit.results.records import ResultStore, Saver
from toolkit.runtimes.llama_bench import perplexity as ppl

DATA = Path(__file__).parent / "data"


def captured(name: str) -> tuple[str, str]:
    """Real llama-perplexity output (tests/data/llamaperplexity-*, as tests/test_canary.py reads it)."""
    base = DATA / f"llamaperplexity-0c1e57098-cpu-tiny-{name}"
    return base.with_suffix(".stdout").read_text(), base.with_suffix(".stderr").read_text()


def _lost_at_exit(out: str, err: str, chunks_left: int) -> tuple[str, str]:
    """What a run prints when llama.cpp's logger loses its queued lines at exit (llama.cpp#22142):
    stderr ends at `ETA `, stdout keeps `chunks_left` chunk values (as tests/test_canary.py cuts it)."""
    kept = ",".join(out.split(",")[:chunks_left]) + ","
    return kept, err[: err.index("ETA ") + 4]


class _Engine(FakeEngine):
    """The fake engine, answering llama-perplexity with `answers` per image digest (a list: in turn)."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[str, list[tuple[str, str]]] = {}

    def run_container(self, spec, timeout=None, on_stdout=None, on_stderr=None, **kw):
        if spec.command[0] == "llama-perplexity":
            self.runs.append(spec)
            return engine.RunOutcome(0, *self.answers[spec.image].pop(0), 1.5)
        return super().run_container(spec, timeout, on_stdout, on_stderr, **kw)


def _ctx_pair(tmp_path: Path, answers: dict) -> tuple:
    fake = _Engine()
    ctx = llama_ctx(tmp_path, fake, {})
    ctx.opts.saver = Saver(ctx.store)
    return ctx, fake


def _answers(fake, answers: list) -> None:
    """Make the fake engine answer llama-perplexity with `answers` in turn (an exception is raised)."""

    def run(spec, timeout=None, **_):
        fake.runs.append(spec)
        a = answers.pop(0)
        if isinstance(a, BaseException):
            raise a
        return a

    fake.run_container = run


def _cut() -> engine.RunOutcome:
    return engine.RunOutcome(0, *_lost_at_exit(*captured("c128x4"), 3), 1.5)


def test_a_canary_cut_then_failing_otherwise_says_the_last_reason_not_each_cut(tmp_path: Path) -> None:
    crash = engine.RunOutcome(139, "", "GGML_ASSERT(x) failed\nSegmentation fault", 0.5)
    short = engine.RunOutcome(0, *captured("c2048-too-short"), 0.5)
    timeout = engine.RunOutcome(-1, "", "perplexity: 1.53 seconds per pass - ETA", 1800.0, timed_out=True)
    for last, said in (
        (crash, "llama-perplexity failed (exit 139)"),
        (short, "you need at least 4096 tokens"),
        (timeout, "llama-perplexity failed (timed out)"),
    ):
        ctx, fake = _ctx_pair(tmp_path / said[:12], {})
        _answers(fake, [_cut(), last])
        res = canary.run_canary(ctx, {})
        assert res is not None and res.status == "unchecked" and len(fake.runs) == 2
        assert said in res.reason and "each cut" not in res.reason, res.reason
        assert res.reason.endswith(
            "; the process before it was cut before its result (llama.cpp#22142: its "
            "logger loses queued lines at exit)"
        ), res.reason
        assert res.seconds == round(1.5 + last.seconds, 3)
    ctx, fake = _ctx_pair(tmp_path / "four", {})
    _answers(fake, [_cut()] * 3 + [crash])
    res = canary.run_canary(ctx, {})
    assert res is not None and "; the 3 processes before it were cut before their result" in res.reason
    ctx, fake = _ctx_pair(tmp_path / "all", {})
    _answers(fake, [_cut()] * 4)
    res = canary.run_canary(ctx, {})  # held: four cut
    assert res is not None and "; 4 processes, each cut before its result (llama.cpp#22142" in res.reason


def test_a_retry_the_engine_refuses_is_unchecked_not_a_crash(tmp_path: Path) -> None:
    ctx, fake = _ctx_pair(tmp_path, {})
    _answers(fake, [_cut(), RuntimeError('500 Server Error: Internal Server Error ("conflict")')])
    res = canary.run_canary(ctx, {})
    assert res is not None and res.status == "unchecked" and len(fake.runs) == 2
    assert res.reason.startswith("the container did not run: 500 Server Error"), res.reason
    assert "the process before it was cut" in res.reason and res.seconds >= 1.5
    # Ctrl-C and the engine's loss during a retry still propagate (held)
    for err in (
        engine.Interrupted(engine.RunOutcome(130, "", "", 0.1)),
        engine.EngineLost("gone", engine.RunOutcome(-1, "", "", 0.1)),
    ):
        ctx, fake = _ctx_pair(tmp_path / type(err).__name__, {})
        _answers(fake, [_cut(), err])
        with pytest.raises(type(err)):
            canary.run_canary(ctx, {})


def test_a_chunk_value_float_cannot_read_is_no_chunk_value() -> None:
    eta = "perplexity: 1.53 seconds per pass - ETA "
    for out in ("[1]1.2.3,", "[1].,", "[1]549.3746,[2]1..5,"):
        with pytest.raises(ppl.PerplexityOutputError):
            ppl.parse_perplexity(out, eta)
    assert ppl.parse_perplexity("[1].5,[2]5.,[3]1e2,[4]7,", eta).chunks == (0.5, 5.0, 100.0, 7.0)


def test_n_cpu_moe_is_read_as_the_validity_pass_reads_it(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r30-rocm-vulkan-2x-r9700-n-cpu-moe-sm-sections.md")
    r = next(r for r in recs if r.raw.get("split_mode") == "none")

    def moe(v):
        return r.model_copy(update={"raw": {**r.raw, "n_cpu_moe": v, "tensor_buft_overrides": "none"}})

    assert roofline.assess(moe(0)).roofline is not None and roofline.assess(moe("0.0")).roofline is not None
    for v, n in ((4.0, 4), ("4.0", 4), ("+4", 4), (" 4 ", 4), ("999999999999", 999999999999)):
        a = roofline.assess(moe(v))
        assert a.roofline is None and a.note.startswith(f"n_cpu_moe {n}: "), (v, a)


def test_roof_notes_say_how_many_reasons_they_leave_out(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r30-rocm-vulkan-2x-r9700-n-cpu-moe-sm-sections.md")
    one = [r for r in recs if r.raw.get("split_mode") == "none" and r.image.name == recs[0].image.name]
    sweep = [
        r.model_copy(update={"raw": {**r.raw, "n_cpu_moe": m, "tensor_buft_overrides": "none"}})
        for m in (0, 2, 4, 8, 16, 24, 32)
        for r in one
    ]
    said = [s for s in table_text.roof_notes(tables.tables(sweep)) if "no roofline" in s]
    assert len(said) == 4, said
    assert [s.split(": ")[2] for s in said[:3]] == ["n_cpu_moe 2", "n_cpu_moe 4", "n_cpu_moe 8"], said
    assert said[3].endswith("no roofline for some of its rows for 3 more reasons than the 3 above"), said


def test_a_toolkit_canary_result_is_named_as_such_not_a_vllm_summary(tmp_path: Path) -> None:
    ctx, fake = _ctx_pair(tmp_path, {})
    fake.answers[ctx.build.digest] = [captured("c128x4")]
    res = canary.run_canary(ctx, {})
    assert res is not None and res.status == "ok"
    llama = canary.save(ctx.store, res)
    vllm = tmp_path / "vllm-canary.jsonl"  # the vLLM runner's canary record: its method names vLLM
    rec = {**json.loads(llama.read_text()), "image": "vllm-cpu", "method": "vllm-prompt-logprobs"}
    vllm.write_text(json.dumps(rec) + "\n")
    for f in (llama, vllm):
        with pytest.raises(BadInput) as err:
            importer.import_files(ResultStore(tmp_path / "into"), [f], label="x")
        said = str(err.value)
        assert "line 1: a toolkit canary result (a results folder's canary.jsonl" in said, said
        assert "summary another script wrote" not in said and "no n_prompt" not in said, said
