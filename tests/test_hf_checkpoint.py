"""Quantization and revision of Hugging Face checkpoints (toolkit/models/checkpoint.py): read from the
checkpoint's own config.json, checked against the matrix before any container starts.

Checkpoints are the tiny stand-in written by toolkit/models/tiny_hf.py (with the compressed-tensors
quantization_config of the reference checkpoint, or none) and config.json files in the layouts the
pinned vLLM release reads (vllm 0.16.0 model_arch_config_convertor / _verify_quantization). The
Hugging Face Hub itself is not reachable here: where a test needs what it would answer (a download's
commit hash), it writes the file huggingface_hub writes, and says so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.e2e_helpers import run_cli
from toolkit.bench.runners import vllm as vr
from toolkit.bench.runners.base import BenchOptions, RunContext
from toolkit.core import registry as runners
from toolkit.core.errors import BadInput
from toolkit.engine import api as engine
from toolkit.host.devices import DeviceProfile
from toolkit.matrix.api import load_matrix
from toolkit.matrix.loading import parse_matrix
from toolkit.models import checkpoint as hf_checkpoint
from toolkit.models.tiny_hf import generate_tiny_qwen3moe_hf
from toolkit.results.records import BuildRecord, ResultStore
from toolkit.runtimes.vllm import args as va

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def project(
    tmp_path: Path, *, quantization: str | None = None, ckpt_quant: str | None = None, hf: dict | None = None
) -> Path:
    """The project's matrix with one vLLM image and one tiny HF checkpoint (generated)."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [i for i in data["images"] if i["name"] == "vllm"]
    model = {"name": "ckpt", "path": "models/ckpt", "format": "hf", "runners": ["vllm"]}
    if hf:
        model["hf"] = hf
    data["models"] = [model]
    if quantization:
        data["vllm"] = {"quantization": quantization}
    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates", dirs_exist_ok=True)
    generate_tiny_qwen3moe_hf(tmp_path / "models" / "ckpt", quantization=ckpt_quant)
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path


def _lm(p: Path):
    lm = load_matrix(p / "matrix.yaml")
    return lm, lm.m.models[0], p / "models" / "ckpt"


# ---------------------------------------------------------------------------------------------
# Reading config.json


def test_tiny_checkpoint_has_the_reference_layout_or_none(tmp_path):
    q = hf_checkpoint.read_quantization(
        generate_tiny_qwen3moe_hf(tmp_path / "q", quantization="compressed-tensors")
    )
    assert q == hf_checkpoint.CheckpointQuant("compressed-tensors", "pack-quantized", 4, 32, "W4A16")
    assert q.describe() == "compressed-tensors (pack-quantized, W4A16, group 32)"
    assert hf_checkpoint.read_quantization(generate_tiny_qwen3moe_hf(tmp_path / "plain")) is None
    with pytest.raises(ValueError, match="quantization 'awq'"):
        generate_tiny_qwen3moe_hf(tmp_path / "bad", quantization="awq")
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(
    "cfg,want",
    [
        pytest.param(
            {
                "quantization_config": {
                    "quant_method": "awq",
                    "bits": 4,
                    "group_size": 128,
                    "version": "gemm",
                    "zero_point": True,
                }
            },
            hf_checkpoint.CheckpointQuant("awq", "gemm", 4, 128, "W4A16"),
            id="autoawq",
        ),
        pytest.param(
            {"quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": False}},
            hf_checkpoint.CheckpointQuant("gptq", None, 8, None, "W8A16"),
            id="gptq-per-channel",
        ),
        pytest.param(
            {
                "compression_config": {
                    "quant_method": "compressed_tensors",
                    "config_groups": {
                        "g": {
                            "weights": {"num_bits": 8, "group_size": None},
                            "input_activations": {"num_bits": 8},
                        }
                    },
                }
            },
            hf_checkpoint.CheckpointQuant("compressed-tensors", None, 8, None, "W8A8", "compression_config"),
            id="old-compression-config-key",
        ),
        pytest.param(
            {"quantization_config": {"quant_method": "FP8", "fmt": "e4m3"}},
            hf_checkpoint.CheckpointQuant("fp8"),
            id="upper-case",
        ),
        pytest.param(
            {"text_config": {"quantization_config": {"quant_method": "awq", "bits": 4}}},
            hf_checkpoint.CheckpointQuant("awq", None, 4, None, "W4A16", "text_config.quantization_config"),
            id="multimodal-text-config",
        ),
        pytest.param({"model_type": "qwen3_moe"}, None, id="unquantized"),
    ],
)
def test_parse_quantization_as_vllm_reads_it(cfg, want):
    assert hf_checkpoint.parse_quantization(cfg) == want


@pytest.mark.parametrize(
    "text,why",
    [
        pytest.param(None, "missing", id="no-config"),
        pytest.param("{oops", "cannot be read as JSON", id="garbage"),
        pytest.param("[1]", "not a JSON object", id="list"),
        pytest.param('{"quantization_config": {"bits": 4}}', "has no quant_method", id="no-method"),
    ],
)
def test_unreadable_config_is_bad_input(tmp_path, text, why):
    if text is not None:
        (tmp_path / "config.json").write_text(text)
    with pytest.raises(BadInput, match=why) as err:
        hf_checkpoint.read_quantization(tmp_path)
    assert "config.json" in str(err.value)


# ---------------------------------------------------------------------------------------------
# Checkpoint vs matrix


def test_no_override_uses_the_checkpoints_method(tmp_path):
    lm, model, d = _lm(project(tmp_path, ckpt_quant="compressed-tensors"))
    choice = hf_checkpoint.resolve_quantization(lm, model, d)
    assert (choice.method, choice.source, choice.checkpoint.group_size) == (
        "compressed-tensors",
        "checkpoint",
        32,
    )
    assert (
        va.engine_args(lm.m.settings("vllm")).count("--quantization") == 0
    )  # vLLM reads the same config.json


def test_override_awq_on_a_compressed_tensors_checkpoint_is_refused(tmp_path):
    """The reference situation: the old default `awq` against cpatonn/...-AWQ-4bit (compressed-tensors)."""
    lm, model, d = _lm(project(tmp_path, quantization="awq", ckpt_quant="compressed-tensors"))
    with pytest.raises(BadInput) as err:
        hf_checkpoint.resolve_quantization(lm, model, d)
    msg = str(err.value)
    assert str(lm.path) in msg and "vllm.quantization: 'awq'" in msg
    assert "quant_method = 'compressed-tensors'" in msg and "W4A16, group 32" in msg
    assert "remove `quantization` from `vllm:`" in msg and "set it to 'compressed-tensors'" in msg


@pytest.mark.parametrize(
    "ckpt,override,ok",
    [
        pytest.param("awq", "awq", True, id="awq-same"),
        pytest.param("awq", "awq_marlin", True, id="awq-kernel-variant"),
        pytest.param("awq", "moe_wna16", True, id="awq-moe-wna16"),
        pytest.param("awq", "gptq", False, id="awq-vs-gptq"),
        pytest.param("gptq", "gptq_marlin", True, id="gptq-kernel-variant"),
        pytest.param("compressed-tensors", "compressed-tensors", True, id="ct-same"),
        pytest.param("compressed-tensors", "moe_wna16", False, id="ct-has-no-variant"),
        pytest.param(None, "fp8", True, id="unquantized-online-fp8"),
        pytest.param(None, "awq", False, id="unquantized-needs-awq-weights"),
    ],
)
def test_override_rules_follow_vllm(tmp_path, ckpt, override, ok):
    lm, model, d = _lm(project(tmp_path, quantization=override))
    if ckpt:
        cfg = json.loads((d / "config.json").read_text())
        cfg["quantization_config"] = {"quant_method": ckpt, "bits": 4, "group_size": 128}
        (d / "config.json").write_text(json.dumps(cfg))
    if ok:
        choice = hf_checkpoint.resolve_quantization(lm, model, d)
        assert (choice.method, choice.source) == (override, "matrix")
    else:
        with pytest.raises(BadInput, match="vllm.quantization"):
            hf_checkpoint.resolve_quantization(lm, model, d)


def test_bench_refuses_the_mismatch_before_any_container(tmp_path, monkeypatch):
    """`toolkit bench` exits 4 with the fix before it asks the engine (none answers at DOCKER_HOST:
    any engine call would end the run with exit 5), and the vLLM runner alone refuses before its
    engine (a stand-in in its RunContext that fails on any call but command formatting) sees a call."""
    p = project(tmp_path, quantization="awq", ckpt_quant="compressed-tensors")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    res, code = run_cli(p, "bench", "--image", "vllm", expect=4)
    out = res.output + str(res.exception)
    assert "vllm.quantization: 'awq'" in out and "compressed-tensors" in out and "matrix.yaml" in out

    class NoContainers:
        run_command = staticmethod(engine.run_command)
        exec_command = staticmethod(engine.exec_command)

        def __getattr__(self, name):
            raise AssertionError(f"engine.{name} called: a container would have started")

    lm, model, _ = _lm(p)
    build = BuildRecord(
        image="vllm",
        ref="toolkit/vllm:latest",
        digest="sha256:" + "cd" * 32,
        backend="rocm",
        template="t",
        template_hash="t",
        created="now",
    )
    ctx = RunContext(
        lm,
        lm.m.image("vllm"),
        build,
        model,
        ResultStore(tmp_path / "results"),
        BenchOptions(run_id="r1"),
        DeviceProfile.example("rocm"),
        {},
        lambda *a, **k: None,
        engine=NoContainers(),
    )
    with pytest.raises(BadInput, match="vllm.quantization: 'awq'"):
        runners.get("vllm").run(ctx)


# ---------------------------------------------------------------------------------------------
# Revision


def _downloaded_at(d: Path, commit: str) -> None:
    """What huggingface_hub's snapshot_download(local_dir=d) leaves per file (stand-in: no Hub here)."""
    meta = d / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "config.json.metadata").write_text(
        f'{commit}\n"etag"\n{(d / "config.json").stat().st_mtime + 1}\n'
    )


def test_revision_must_be_a_commit_hash():
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    for m in data["models"]:
        if m.get("hf"):
            m["hf"]["revision"] = "main"
    with pytest.raises(BadInput, match=r"hf.revision.*'main' is not a commit hash"):
        parse_matrix(data, ROOT / "matrix.yaml")


def test_unpinned_hub_checkpoint_is_refused_with_the_fetch_model_fix(tmp_path):
    lm, model, d = _lm(project(tmp_path, hf={"repo": "org/ckpt"}))
    with pytest.raises(BadInput, match=r"models\[ckpt\].hf.revision: not pinned.*toolkit fetch-model ckpt"):
        hf_checkpoint.check_revision(lm, model, d)
    _downloaded_at(d, COMMIT)
    with pytest.raises(BadInput, match=f"add `revision: {COMMIT}`"):
        hf_checkpoint.check_revision(lm, model, d)


def test_pinned_revision_is_checked_against_the_download(tmp_path):
    lm, model, d = _lm(project(tmp_path, hf={"repo": "org/ckpt", "revision": COMMIT}))
    assert hf_checkpoint.check_revision(lm, model, d) == COMMIT  # copied by hand: nothing to compare
    _downloaded_at(d, COMMIT)
    assert hf_checkpoint.check_revision(lm, model, d) == COMMIT
    _downloaded_at(d, "f" * 40)
    with pytest.raises(BadInput, match=f"pins {COMMIT}, but .* downloaded at {'f' * 40}"):
        hf_checkpoint.check_revision(lm, model, d)


def test_tree_digest_ignores_huggingface_hub_metadata(tmp_path):
    lm, model, d = _lm(project(tmp_path))
    before = vr.model_ref(lm, model, d).sha256
    _downloaded_at(d, COMMIT)
    assert vr.model_ref(lm, model, d).sha256 == before


def test_pin_revision_in_the_project_matrix_changes_one_line(tmp_path):
    m = tmp_path / "matrix.yaml"
    shutil.copy(ROOT / "matrix.yaml", m)
    before = m.read_text()
    ref = next(x for x in yaml.safe_load(before)["models"] if x.get("format") == "hf" and x.get("hf"))
    assert ref["hf"].get("revision") is None  # not invented: filled by `toolkit fetch-model`
    assert hf_checkpoint.pin_revision_in_matrix(m, ref["name"], COMMIT)
    after = m.read_text()
    added = [ln for ln in after.splitlines() if ln not in before.splitlines()]
    assert added == [f"      revision: {COMMIT}"] and len(after.splitlines()) == len(before.splitlines()) + 1
    got = next(x for x in yaml.safe_load(after)["models"] if x["name"] == ref["name"])
    assert got["hf"]["revision"] == COMMIT
    assert hf_checkpoint.pin_revision_in_matrix(m, ref["name"], "f" * 40)  # re-pinning replaces the line
    assert m.read_text().count("revision:") == after.count("revision:")
    assert not hf_checkpoint.pin_revision_in_matrix(m, "no-such-model", COMMIT)
    flow = tmp_path / "flow.yaml"
    flow.write_text("models: [{name: x, hf: {repo: a/b}}]\n")  # a layout the line edit does not understand
    assert not hf_checkpoint.pin_revision_in_matrix(flow, "x", COMMIT) and "revision" not in flow.read_text()


def test_fetch_model_resolves_downloads_and_pins_the_revision(tmp_path, monkeypatch):
    """`toolkit fetch-model` of an unpinned checkpoint. The Hugging Face Hub is not reachable from this
    machine, so huggingface_hub's two calls are replaced: model_info answers a commit, snapshot_download
    writes a checkpoint plus the download metadata huggingface_hub writes."""
    import huggingface_hub

    p = project(tmp_path, hf={"repo": "org/ckpt"})
    shutil.rmtree(p / "models" / "ckpt")
    calls = []

    class Info:
        sha = COMMIT

    def snapshot_download(repo, revision=None, local_dir=None):
        calls.append((repo, revision))
        generate_tiny_qwen3moe_hf(local_dir, quantization="compressed-tensors")
        _downloaded_at(Path(local_dir), revision)
        return local_dir

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo, **k: Info())
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    res, _ = run_cli(p, "fetch-model", "ckpt")
    assert calls == [("org/ckpt", COMMIT)]  # downloaded at the commit it pins, not at a moving branch
    assert f"pinned models[ckpt].hf.revision: {COMMIT}" in res.output
    lm, model, d = _lm(p)
    assert model.hf.revision == COMMIT and hf_checkpoint.check_revision(lm, model, d) == COMMIT
    ck = vr.checkpoint_preflight(lm, model, d)
    assert (ck.revision, ck.quant.method, ck.quant.source) == (COMMIT, "compressed-tensors", "checkpoint")


def test_fetch_model_pins_an_existing_download(tmp_path):
    p = project(tmp_path, hf={"repo": "org/ckpt"})
    _downloaded_at(p / "models" / "ckpt", COMMIT)
    res, _ = run_cli(p, "fetch-model", "ckpt")
    assert "pinned" in res.output and load_matrix(p / "matrix.yaml").m.models[0].hf.revision == COMMIT
