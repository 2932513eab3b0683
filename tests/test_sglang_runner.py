"""The SGLang runner plug-in through its RunContext, with a fake engine.

What cannot exist here, and is therefore faked: a gfx1201 GPU and the sglang-rocm image (its build
needs GitHub and a ROCm base; see README). The fake engine stands in for toolkit.engine.api ONLY for the
calls that would start containers; it answers with the real-shaped outputs of SGLang 0.5.15 in
tests/data/ (the shape is checked against the release's own code in tests/test_sglang.py). The
argument lists, the result parsing, the record building and the report are the product's own code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests import probe_outputs
from tests.conftest import DATA
from toolkit.analysis import report
from toolkit.bench.runners.base import BenchOptions, RunContext
from toolkit.core import registry as runners
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.results.records import BuildRecord, ResultStore
from toolkit.spec.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[1]
ONE_BATCH = [json.loads(x) for x in (DATA / "sglang-0.5.15-one-batch.jsonl").read_text().splitlines()]
SERVING = [x for x in (DATA / "sglang-0.5.15-serving.jsonl").read_text().splitlines() if x.strip()]


class FakeEngine:
    """toolkit.engine.api's container calls, answered from the real-shaped outputs (see the module doc).
    Command formatting (run_command, exec_command) is the real engine module's."""

    run_command = staticmethod(engine.run_command)
    exec_command = staticmethod(engine.exec_command)

    def __init__(self, *, short: bool = False):
        self.short = short
        self.ran: list[list[str]] = []
        self.removed = 0

    def _out(self, spec) -> Path:
        return Path(next(m.source for m in spec.mounts if m.target == "/out"))

    probe_out = probe_outputs.SGLANG_ROCM_OK  # the GPU-path probe's answer (constructed: no AMD GPU here)

    def run_container(self, spec, timeout=None, **_):
        if spec.command[:2] == ["python3", "-c"]:
            self.probes = [*getattr(self, "probes", []), spec]
            return engine.RunOutcome(0, self.probe_out, "", 2.0)
        self.ran.append(spec.command)
        cmd = spec.command
        result = cmd[cmd.index("--result-filename") + 1].removeprefix("/out/")
        n_in, n_out = int(cmd[cmd.index("--input-len") + 1]), int(cmd[cmd.index("--output-len") + 1])
        src = dict(
            next(p for p in ONE_BATCH if p["input_len"] == n_in and p["output_len"] == n_out)
            if any(p["input_len"] == n_in and p["output_len"] == n_out for p in ONE_BATCH)
            else ONE_BATCH[0]
        )
        src.update(input_len=n_in, output_len=n_out)
        with (self._out(spec) / result).open("a") as fh:
            fh.write(json.dumps(src) + "\n")
        return engine.RunOutcome(0, "", "", 1.0)

    def start_container(self, spec):
        self.server = spec
        return spec

    def container_state(self, container):
        return {"Running": True}

    def exec_in(self, container, cmd, timeout=None):
        if "sglang.benchmark.serving" not in " ".join(cmd):
            return engine.RunOutcome(0, "", "", 0.1)  # /health
        c = int(cmd[cmd.index("--max-concurrency") + 1])
        line = json.loads(SERVING[0] if c == 1 else SERVING[1])
        line["max_concurrency"] = c
        if self.short:
            line["total_output_tokens"], line["output_lens"] = 32, [1] * len(line.get("output_lens") or [])
        out = cmd[cmd.index("--output-file") + 1].removeprefix("/out/")
        (self._out(self.server) / out).write_text(json.dumps(line) + "\n")
        return engine.RunOutcome(0, "", "", 1.0)

    def container_logs(self, container):
        # the server's ServerArgs line (srt/entrypoints/engine.py: logger.info(f"{server_args=}")), abridged
        return "", (
            "[2026-11-30 00:00:01] server_args=ServerArgs(model_path='/models/m', tp_size=1, "
            "attention_backend='triton', decode_attention_backend=None, prefill_attention_backend=None, "
            "sampling_backend='pytorch', mm_attention_backend=None)\n"
        )

    def remove_container(self, container):
        self.removed += 1


def sglang_ctx(proj: Path, fake: FakeEngine, **axes) -> RunContext:
    """The RunContext bench hands the SGLang runner: the project's matrix in `proj` (bench axes set to one
    pp, one tg, one micro-batch, 3 repetitions, overridden by `axes`), a stand-in checkpoint, `fake` engine."""
    shutil.copytree(ROOT / "Dockerfile.templates", proj / "Dockerfile.templates")
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["bench"].update({"n_prompt": [512], "n_gen": [128], "n_ubatch": [512], "repetitions": 3, **axes})
    (proj / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    lm = load_matrix(proj / "matrix.yaml")
    model = next(m for m in lm.m.models if "sglang" in m.runners)
    folder = lm.resolve(model.path)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3MoeForCausalLM"]}))
    spec = lm.m.image("sglang")
    build = BuildRecord(
        image="sglang",
        ref="toolkit/sglang:x",
        digest="sha256:" + "5" * 64,
        backend="rocm",
        template=spec.template,
        template_hash="t",
        created="2026-11-30T00:00:00+00:00",
    )
    return RunContext(
        lm,
        spec,
        build,
        model,
        ResultStore(proj / "results"),
        BenchOptions(run_id="run-sg"),
        devices.DeviceProfile.example("rocm"),
        {},
        lambda *a, **k: None,
        engine=fake,
    )


@pytest.fixture
def ctx_for(tmp_path):
    return lambda fake, **axes: sglang_ctx(tmp_path / "proj", fake, **axes)


def test_registry_names_the_sglang_runner():
    r = runners.get("sglang")
    assert r.name == "sglang" and r.experimental and "hf" in r.model_formats
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
    assert r.settings_from_records(recs, {}) == ctx.lm.m.runner_settings["sglang"]
    assert r.settings_from_records([], {}) is None
