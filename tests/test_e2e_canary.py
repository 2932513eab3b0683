"""End to end for the correctness canary (issue 34 item 4) on the real engine: the CPU control image
scores the shipped text with llama-perplexity before its sweep, on the tiny stand-in model; a copy of
that model with NaN written into a tensor's data (not its header) is flagged `wrong-output` on every
record; the Vulkan image on Mesa lavapipe is judged against the CPU control. Nothing is mocked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.support.e2e_helpers import engine_or_skip, make_project, run_cli
from toolkit.bench import canary
from toolkit.models.tiny import ensure_model_file
from toolkit.results.records import ResultStore

pytestmark = pytest.mark.e2e

AXES = {
    "n_prompt": [64],
    "n_gen": [8],
    "n_ubatch": [64],
    "n_batch": [64],
    "repetitions": 2,
    "n_gpu_layers": [99],
    "timeout_s": 1800,
}


def nan_copy(src: Path, dest: Path, tensor: str = "output_norm.weight") -> Path:
    """`src` with every float of `tensor` (F32) set to NaN: its data bytes only, found with the gguf
    package (the header stays valid, so the file passes every pre-flight check)."""
    import gguf

    shutil.copyfile(src, dest)
    t = next(t for t in gguf.GGUFReader(dest).tensors if t.name == tensor)
    assert t.tensor_type == gguf.GGMLQuantizationType.F32
    with dest.open("r+b") as fh:
        fh.seek(t.data_offset)
        fh.write(np.full(int(t.n_bytes) // 4, np.nan, dtype="<f4").tobytes())
    dest.chmod(0o644)
    return dest


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    engine_or_skip()
    proj = make_project(tmp_path_factory.mktemp("e2e-canary"), images=["cpu", "vulkan"], bench=AXES)
    good = ensure_model_file(proj / "models" / "tiny-qwen3moe.gguf", "tiny-qwen3moe")
    nan_copy(good, proj / "models" / "tiny-nan.gguf")
    data = yaml.safe_load((proj / "matrix.yaml").read_text())
    data["models"].append({"name": "tiny-nan", "path": "models/tiny-nan.gguf", "format": "gguf"})
    (proj / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    res, _ = run_cli(proj, "build", "--image", "cpu")
    assert "cpu: built toolkit/cpu:" in res.output
    return proj


def _canaries(proj: Path) -> list[dict]:
    return [
        json.loads(x)
        for f in sorted((proj / "results").glob("*/canary.jsonl"))
        for x in f.read_text().splitlines()
    ]


def _records(proj: Path, model: str):
    return [r for r in ResultStore(proj / "results").results() if r.model.name == model]


def test_canary_on_the_cpu_control_with_the_tiny_model(project):
    res, _ = run_cli(project, "bench", "-i", "cpu", "-m", "tiny-qwen3moe")
    line = next(ln for ln in res.output.splitlines() if "canary:" in ln)
    assert line.startswith("cpu x tiny-qwen3moe: canary: PPL ") and "(the CPU control)" in line, line
    (c,) = [c for c in _canaries(project) if c["model"] == "tiny-qwen3moe"]
    assert c["status"] == "ok" and 1 < c["ppl"] < 1e6 and c["n_ctx"] == 128 and c["chunks"] == 4
    assert c["text_sha256"] and c["seconds"] > 0 and "llama-perplexity" in c["command"]
    recs = _records(project, "tiny-qwen3moe")
    assert recs and all((r.model_extra or {})["canary"]["ppl"] == c["ppl"] for r in recs)
    assert not any(canary.FLAG in ((r.model_extra or {}).get("flags") or []) for r in recs)


def test_a_corrupted_model_is_flagged_wrong_output(project):
    res, _ = run_cli(project, "bench", "-i", "cpu", "-m", "tiny-nan")
    line = next(ln for ln in res.output.splitlines() if "canary:" in ln)
    assert "cpu x tiny-nan: canary: PPL nan" in line and "flagged wrong-output" in line, line
    (c,) = [c for c in _canaries(project) if c["model"] == "tiny-nan"]
    assert c["status"] == "wrong-output" and c["ppl"] == "nan"
    recs = _records(project, "tiny-nan")
    assert recs and all(canary.FLAG in (r.model_extra or {})["flags"] for r in recs)


@pytest.mark.slow
def test_vulkan_on_lavapipe_is_judged_against_the_cpu_control(project):
    run_cli(project, "build", "--image", "vulkan")
    run_cli(project, "bench", "-i", "cpu", "-m", "tiny-qwen3moe")  # this run's control (also stored)
    res, _ = run_cli(project, "bench", "-i", "vulkan", "-m", "tiny-qwen3moe", "--allow-software-gpu")
    line = next(ln for ln in res.output.splitlines() if "canary:" in ln)
    assert line.startswith("vulkan x tiny-qwen3moe: canary: PPL ") and "(cpu control " in line, line
    vk = [c for c in _canaries(project) if c["image"] == "vulkan"][-1]
    assert vk["status"] == "ok" and abs(vk["ln_ratio"]) < canary.BOUND_LN and vk["control"]["image"] == "cpu"
