"""SGLang (experimental): the template, the argument lists, the output parsers, and the contract
with the pinned release's own parsers.

Template: the `sglang` image entry of matrix.yaml is rendered with toolkit.images.render and checked like
every template in tests/test_templates.py (structure, hadolint) plus its own rules. While the matrix
schema does not accept `runner: sglang` yet, the entry sits commented out between `# >>> sglang` and
`# <<< sglang` in matrix.yaml; it is read from there, validated as an ImageSpec with every field but
`runner`, and given runner "sglang" afterwards (the only thing bypassed, and said here).

Contract (tests named `*contract*`, `-k contract` selects them): a throw-away virtualenv per pinned
release (the `sglang_version` of the matrix's sglang entry): the release's wheel from PyPI unpacked
without its compiled extensions, its pure-Python requirements, the machine's local CPU torch wheel and
triton. The release's own entry modules (`python -m sglang.benchmark.one_batch`, `...serving`,
`sglang.launch_server`) run on the exact argument lists with `argparse.ArgumentParser.parse_args`
recording the namespace and stopping there, so SGLang's own parser construction (ServerArgs.add_cli_args,
BenchArgs.add_cli_args, bench_serving's parser) and parse run, nothing else. One thing cannot exist
here and is mocked: torchvision's compiled operators (PyPI only has CUDA builds of torchvision; sglang
and transformers import torchvision at module import, the parsers never use it); the torchvision wheel
is unpacked without its .so files and its two operator schemas (`torchvision::nms`, `::qnms`) are
declared with torch.library, which is what its missing _C.so would have done. First build ~2 min
(~0.5 GB), cached in ~/.cache/toolkit/sglang-contract/ (or $TOOLKIT_SGLANG_CONTRACT_DIR). Where the
env cannot be built the contract tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import contract_env
from tests.support.dockerfiles import _hadolint, _instructions, _merged, _stages
from toolkit.images.render import render_image
from toolkit.matrix.api import ImageSpec, LoadedMatrix, load_matrix
from toolkit.runtimes.sglang import args as sa

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
TEMPLATE = "sglang-rocm.Dockerfile.j2"


# ---------------------------------------------------------------------------------------------
# The matrix entry and the rendered template


def sglang_entry(text: str) -> dict:
    """The sglang image entry of matrix.yaml: the active one, else the commented block."""
    data = yaml.safe_load(text)
    active = [i for i in data["images"] if i.get("template") == TEMPLATE]
    if active:
        return active[0]
    m = re.search(r"^\s*# >>> sglang\n(.*?)^\s*# <<< sglang", text, re.M | re.S)
    assert m, "matrix.yaml has no sglang image entry (active or between '# >>> sglang' and '# <<< sglang')"
    block = "\n".join(re.sub(r"^\s*# ?", "", ln) for ln in m.group(1).splitlines())
    return yaml.safe_load(block)[0]


@pytest.fixture(scope="module")
def lm() -> LoadedMatrix:
    return load_matrix(ROOT / "matrix.yaml")


@pytest.fixture(scope="module")
def spec(lm) -> ImageSpec:
    entry = sglang_entry((ROOT / "matrix.yaml").read_text())
    try:
        return ImageSpec.model_validate(entry)
    except Exception:  # runner "sglang" not in the schema yet: validate the rest, then set it
        assert entry["runner"] == "sglang"
        return ImageSpec.model_validate({**entry, "runner": "vllm"}).model_copy(update={"runner": "sglang"})


@pytest.fixture(scope="module")
def rendered(lm, spec):
    return render_image(lm, spec)


def test_entry_is_validated_and_its_source_exists(lm, spec):
    assert spec.backend == "rocm" and spec.runner == "sglang" and spec.template == TEMPLATE
    assert spec.source in lm.m.sources and lm.m.sources[spec.source].ref == spec.vars["sglang_ref"]
    assert re.fullmatch(r"[0-9a-f]{40}", spec.vars["rdna4_patches_commit"]), (
        "the patch series is pinned by commit"
    )
    vllm = lm.m.image("vllm")
    assert spec.vars["pytorch_base_image"] == vllm.vars["pytorch_base_image"], "the vLLM image's pinned base"
    assert spec.vars["gfx_targets"] == ["gfx1201"]


def test_renders_deterministically(lm, spec, rendered):
    again = render_image(lm, spec)
    assert again.content == rendered.content and again.inputs_hash == rendered.inputs_hash
    assert "{{" not in rendered.content and "{%" not in rendered.content


def test_common_structure_like_every_template(spec, rendered):
    """The checks tests/test_templates.py applies to every template."""
    text = rendered.content
    stages = _stages(text)
    assert [s["name"] for s in stages] == ["build", "runtime"]
    final = stages[-1]
    assert "-complete" not in final["from"]
    assert not re.search(r"^\s*#\s*syntax\s*=", text, re.IGNORECASE | re.MULTILINE)
    instructions = " ".join(f"{w} {a}" for w, a in _instructions(text))
    assert "--privileged" not in instructions and "git clone" not in instructions
    labels = _merged(final, "LABEL")
    assert (
        labels["org.toolkit.backend"] == spec.backend
        and labels["org.toolkit.template-hash"] == rendered.inputs_hash
    )
    assert ("USER", "10001") in final["ins"] and any(w == "CMD" for w, _ in final["ins"])
    assert any(w == "RUN" and "/cache" in a for w, a in final["ins"])
    # source builds: multi-stage, source from src/, payload copied from the build stage, cache mounts
    assert "COPY src/ " in text and "--mount=type=cache" in text
    assert any(w == "COPY" and a.startswith("--from=build ") for w, a in final["ins"])
    # every compiling template checks RUNPATH (partials/elf.j2)
    raw = (ROOT / "Dockerfile.templates" / TEMPLATE).read_text()
    assert '{% import "partials/elf.j2" as elf %}' in raw and "elf.check_runpath(" in raw
    # apt: version floors, never exact pins; every hadolint ignore has a reason above it
    for run in (a for w, a in _instructions(text) if w == "RUN" and "apt-get install" in a):
        install = run.split("apt-get install", 1)[1].split("&&")[0]
        assert not re.search(r"(?<!-)\b[a-z0-9][a-z0-9.+-]*=[0-9]", install), install
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("# hadolint ignore="):
            assert lines[i - 1].strip().startswith("#") and "hadolint" not in lines[i - 1], line


def test_hadolint_clean(rendered, tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(rendered.content)
    proc = subprocess.run(
        [_hadolint(), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"hadolint findings:\n{proc.stdout}{proc.stderr}"


def test_sglang_specifics(spec, rendered):
    text = rendered.content
    build, final = _stages(text)
    v = spec.vars
    assert build["from"] == final["from"] == v["pytorch_base_image"]
    assert re.fullmatch(r"[^\s@]+@sha256:[0-9a-f]{64}", final["from"]), "base pinned by digest"
    benv = _merged(build, "ENV")
    assert benv["PYTORCH_ROCM_ARCH"] == benv["AMDGPU_TARGET"] == "gfx1201", "kernels for gfx1201 only"
    # the patch series: pinned by commit, applied in order, each checked, counted as a build fact
    assert ("ADD", f"{v['rdna4_patches_git']}#{v['rdna4_patches_commit']} /app/rdna4-patches") in build["ins"]
    apply = next(a for w, a in build["ins"] if w == "RUN" and "git apply --check" in a)
    assert "patches/[0-9]*.patch" in apply and "sglang-patch-count=" in apply and "exit 1" in apply
    kernel = next(a for w, a in build["ins"] if w == "RUN" and "setup_rocm.py" in a)
    assert "gfx-targets=${targets}" in kernel and '[ "${targets}" = "gfx1201" ]' in kernel
    env = _merged(final, "ENV")
    assert env["SGLANG_USE_AITER"] == "0"
    smoke = [a for w, a in final["ins"] if w == "RUN" and 'python3 -c "import sglang"' in a]
    assert smoke and "sgl_kernel" in smoke[0] and f"is not {v['sglang_version']}" in smoke[0]
    labels = _merged(final, "LABEL")
    assert labels["org.toolkit.experimental"] == "true" and labels["org.toolkit.runner"] == "sglang"
    assert labels["org.toolkit.sglang-patch"].startswith(
        f"{v['rdna4_patches_git']}@{v['rdna4_patches_commit']}"
    )
    assert (
        labels["org.toolkit.gfx-targets"] == "gfx1201"
        and labels["org.toolkit.sglang-version"] == v["sglang_version"]
    )
    assert labels["org.toolkit.facts"] == "/opt/toolkit/facts"
    assert ("CMD", '["python3", "-m", "sglang.launch_server", "--help"]') in final["ins"]


def test_two_targets_fail_the_build_step(lm, spec):
    """sgl-kernel's setup_rocm.py takes one AMDGPU_TARGET: a list of two is refused in the build."""
    two = spec.model_copy(update={"vars": {**spec.vars, "gfx_targets": ["gfx1100", "gfx1201"]}})
    run = next(a for w, a in _instructions(render_image(lm, two).content) if w == "RUN" and "wc -w" in a)
    guard = run.split(" && mkdir")[0]
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", guard], capture_output=True, text=True)
    assert proc.returncode == 1 and "exactly one AMDGPU_TARGET" in proc.stderr
    ok = next(a for w, a in _instructions(render_image(lm, spec).content) if w == "RUN" and "wc -w" in a)
    assert subprocess.run(["bash", "-c", ok.split(" && mkdir")[0]]).returncode == 0


# ---------------------------------------------------------------------------------------------
# Argument lists


S = sa.SglangSettings()


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_prefill_and_decode_argument_lists():
    pp = sa.prefill_args(
        "/models/m", S, prompt_len=512, chunked_prefill_size=2048, result_file="/out/pp.jsonl"
    )
    assert pp[:3] == ["python3", "-m", "sglang.benchmark.one_batch"]
    for flag, val in [
        ("--batch-size", "1"),
        ("--input-len", "512"),
        ("--output-len", "1"),
        ("--result-filename", "/out/pp.jsonl"),
        ("--attention-backend", "triton"),
        ("--kv-cache-dtype", "auto"),
        ("--chunked-prefill-size", "2048"),
        ("--cuda-graph-backend-decode", "full"),
        ("--cuda-graph-backend-prefill", "disabled"),
        ("--model-path", "/models/m"),
        ("--tp-size", "1"),
    ]:
        assert _flag(pp, flag) == val, flag
    assert "--disable-radix-cache" in pp
    tg = sa.decode_args("/models/m", S, n_gen=128, chunked_prefill_size=512, result_file="/out/tg.jsonl")
    assert _flag(tg, "--output-len") == "129" and _flag(tg, "--input-len") == str(sa.DECODE_TINY_INPUT_LEN)
    deep = sa.decode_args(
        "/m",
        S.model_copy(update={"decode_input_len": 4096}),
        n_gen=128,
        chunked_prefill_size=512,
        result_file="/o",
    )
    assert _flag(deep, "--input-len") == "4096"
    off = sa.prefill_args(
        "/m",
        S.model_copy(update={"cuda_graph": False, "disable_radix_cache": False}),
        prompt_len=8,
        chunked_prefill_size=8,
        result_file="/o",
    )
    assert _flag(off, "--cuda-graph-backend-decode") == "disabled" and "--disable-radix-cache" not in off
    with pytest.raises(ValueError, match="chunked_prefill_size"):
        sa.server_args("/m", S, chunked_prefill_size=0)
    with pytest.raises(ValueError, match="n_gen"):
        sa.decode_args("/m", S, n_gen=0, chunked_prefill_size=8, result_file="/o")


def test_served_argument_lists():
    server = sa.launch_server_args("/models/m", S, chunked_prefill_size=512)
    assert server[:3] == ["python3", "-m", "sglang.launch_server"]
    assert _flag(server, "--host") == "127.0.0.1" and _flag(server, "--port") == "30000"
    assert _flag(server, "--chunked-prefill-size") == "512"
    client = sa.bench_serving_args(
        "/models/m", input_len=512, output_len=128, concurrency=4, num_prompts=32, output_file="/out/s.jsonl"
    )
    assert client[:3] == ["python3", "-m", "sglang.benchmark.serving"]
    for flag, val in [
        ("--backend", "sglang"),
        ("--dataset-name", "random"),
        ("--random-input-len", "512"),
        ("--random-output-len", "128"),
        ("--random-range-ratio", "1"),
        ("--max-concurrency", "4"),
        ("--num-prompts", "32"),
        ("--request-rate", "inf"),
        ("--output-file", "/out/s.jsonl"),
        ("--base-url", "http://127.0.0.1:30000"),
        ("--warmup-requests", "4"),
    ]:
        assert _flag(client, flag) == val, flag
    assert "--disable-ignore-eos" not in client and "--output-details" in client
    with pytest.raises(ValueError, match="never run 8 requests at once"):
        sa.bench_serving_args("/m", input_len=1, output_len=1, concurrency=8, num_prompts=4, output_file="/o")


def test_pinned_engine_states_where_chunked_prefill_applies():
    pp = sa.pinned_engine(S, chunked_prefill_size=512, method=sa.METHOD_PREFILL)
    assert pp["chunked_prefill_size"] == 512 and pp["chunked_prefill_applies"] is False
    assert (
        pp["attention_backend"] == "triton"
        and pp["cuda_graph_decode"] == "full"
        and pp["decode_input_len"] == 16
    )
    assert (
        sa.pinned_engine(S, chunked_prefill_size=512, method=sa.METHOD_SERVE)["chunked_prefill_applies"]
        is True
    )
    with pytest.raises(ValueError):
        sa.pinned_engine(S, chunked_prefill_size=512, method="nope")
    assert sa.result_filename("pp", 512, "ub 2048", "r3") == "sglang-pp-512-ub_2048-r3.jsonl"


# ---------------------------------------------------------------------------------------------
# Output parsers (fixtures: tests/data/sglang-0.5.15-*; their key sets are checked against the
# pinned source in the contract tests below)


def test_one_batch_jsonl_prefill_and_decode_points():
    points, problems = sa.read_one_batch(DATA / "sglang-0.5.15-one-batch.jsonl")
    assert not problems and len(points) == 4
    pp = points[0]
    assert (pp.batch_size, pp.input_len, pp.output_len) == (1, 512, 1)
    assert pp.median_decode_throughput is None  # output 1: no decode step, no decode keys
    assert sa.point_value(pp, sa.METHOD_PREFILL) == (pytest.approx(512 / pp.prefill_latency), None)
    value, why = sa.point_value(pp, sa.METHOD_DECODE)
    assert value is None and "no median_decode_throughput" in why
    tg = points[-1]
    assert tg.output_len == 129 and sa.point_value(tg, sa.METHOD_DECODE)[0] == pytest.approx(
        1 / tg.median_decode_latency
    )
    samples = [p.prefill_throughput for p in points[:3]]
    s = sa.summarize(samples)
    assert s.stddev is not None and s.min <= s.median <= s.max and s.samples == tuple(samples)
    assert sa.summarize([100.0]).stddev is None
    with pytest.raises(ValueError):
        sa.summarize([])
    with pytest.raises(ValueError):
        sa.summarize([1.0, math.nan])


@pytest.mark.parametrize(
    "line,why",
    [
        pytest.param('{"input_len": 512, "prefill_throughput": NaN}', "prefill_throughput is nan", id="nan"),
        pytest.param('{"input_len": 512, "prefill_latency": Infinity}', "prefill_latency is inf", id="inf"),
        pytest.param('{"input_len": "512"}', "input_len is '512'", id="string-length"),
        pytest.param('{"prefill_throughput": true}', "not a number", id="bool"),
        pytest.param("[1, 2]", "no result object", id="list"),
        pytest.param("{truncated", "not JSON", id="garbage"),
    ],
)
def test_one_batch_bad_lines_are_refused_naming_the_key(line, why):
    with pytest.raises(sa.SglangOutputError, match=re.escape(why)):
        sa.parse_one_batch_line(line, where="f.jsonl line 1")


def test_one_batch_file_keeps_good_lines_and_names_bad_ones(tmp_path):
    good = (DATA / "sglang-0.5.15-one-batch.jsonl").read_text().splitlines()[0]
    p = tmp_path / "r.jsonl"
    p.write_text(good + '\n{"prefill_throughput": NaN}\n\n{"run_name": "x"}\n')
    points, problems = sa.read_one_batch(p)
    assert len(points) == 2 and problems == [
        "r.jsonl line 2: prefill_throughput is nan, not a finite number (refused, never stored)"
    ]
    assert points[1].prefill_throughput is None and points[1].input_len is None  # missing keys tolerated
    assert sa.point_value(points[1], sa.METHOD_PREFILL)[1].startswith("the result has no prefill_throughput")
    assert sa.read_one_batch(tmp_path / "absent.jsonl") == ([], ["no result file absent.jsonl was written"])
    (tmp_path / "e.jsonl").write_text("\n")
    assert sa.read_one_batch(tmp_path / "e.jsonl") == ([], ["result file e.jsonl is empty"])


def test_serving_result_last_object_inf_rate_and_latencies():
    s, err = sa.read_serving(DATA / "sglang-0.5.15-serving.jsonl")
    assert err is None and s["request_rate"] == "inf" and s["max_concurrency"] == 4
    assert s["completed"] == 32 and s["total_output_tokens"] == 32 * 128 and s["output_lens"] == [128] * 32
    assert s["output_throughput"] == pytest.approx(181.4)
    assert set(s["latency_ms"]) == {"ttft", "tpot", "itl", "e2el"}
    assert (
        s["latency_ms"]["tpot"]["median"] == pytest.approx(21.3)
        and s["latency_ms"]["e2el"]["p99"] is not None
    )
    assert s["errors"] == []


def test_serving_missing_keys_are_none_and_non_finite_is_refused(tmp_path):
    s = sa.parse_serving({"request_rate": 4, "completed": 3})
    assert s["request_rate"] == 4.0 and s["output_throughput"] is None and s["latency_ms"] == {}
    with pytest.raises(sa.SglangOutputError, match="output_throughput is nan"):
        sa.parse_serving({"output_throughput": math.nan})
    with pytest.raises(sa.SglangOutputError, match="p99_ttft_ms is inf"):
        sa.parse_serving({"p99_ttft_ms": math.inf})
    p = tmp_path / "s.jsonl"
    p.write_text('{"completed": 1, "output_throughput": 5.0}\n{"completed": 2, "output_throughput": NaN}\n')
    parsed, err = sa.read_serving(p)
    assert (
        parsed is None
        and err == "s.jsonl line 2: output_throughput is nan, not a finite number (refused, never stored)"
    )
    assert sa.read_serving(tmp_path / "none.jsonl") == (None, "no result file none.jsonl was written")


# ---------------------------------------------------------------------------------------------
# Contract: the pinned release's own parsers


def pinned_versions() -> list[str]:
    return [str(sglang_entry((ROOT / "matrix.yaml").read_text())["vars"]["sglang_version"])]


# Runtime-only, GPU-only or compiled requirements the entry modules' import chain does not need, or
# that would pull a multi-GB CUDA torch (torch and its companions come from the local CPU wheel).
_SKIP = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|torchao|torch[_-]memory[_-]saver|triton|flashinfer.*|"
    r"nvidia-.*|cuda-python|sgl-deep-gemm|sglang-kernel|tilelang|tokenspeed[_-]mla|quack-kernels|"
    r"flash-attn-4|apache-tvm-ffi|kernels|decord2|xgrammar|py-spy|smg-grpc-servicer)$",
    re.I,
)
_RECIPE = "1"  # bump when contract_python() changes what it installs

PRELUDE = r"""
import torch
# torchvision's compiled operators cannot load beside a CPU torch (PyPI has CUDA builds only); its
# Python code imports with these two schemas declared, as its missing _C.so would declare them.
_tv = torch.library.Library("torchvision", "DEF")
_tv.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_tv.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
"""

HARNESS = (
    PRELUDE
    + r"""
import argparse, json, runpy, sys, warnings

warnings.simplefilter("ignore")


class Parsed(Exception):
    pass


captured = []
_parse_args = argparse.ArgumentParser.parse_args


def recording_parse_args(self, *a, **k):
    # the release's own parser is built and parses; the entry point stops here (nothing launched)
    captured.append(_parse_args(self, *a, **k))
    raise Parsed()


argparse.ArgumentParser.parse_args = recording_parse_args
out = []
for argv in json.load(sys.stdin):
    captured.clear()
    module, rest = argv[2], argv[3:]
    sys.argv = [module, *rest]
    err = None
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        err = "the entry point returned without parsing arguments"
    except Parsed:
        pass
    except SystemExit as e:
        err = f"exit {e.code}"
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    ns = vars(captured[-1]) if captured and err is None else {}
    if ns and module == "sglang.benchmark.one_batch":
        from sglang.benchmark.one_batch import BenchArgs
        BenchArgs.from_cli_args(captured[-1])  # the release's own conversion of the bench arguments
    out.append({"argv": argv, "ok": err is None, "error": err,
                "args": {k: (list(v) if isinstance(v, tuple) else v) for k, v in ns.items()
                         if isinstance(v, (str, int, float, bool, list, tuple, type(None)))}})
print("@@RESULT@@" + json.dumps(out))
"""
)

# The release's own measurement code on a stand-in model runner (no GPU, no model): the JSONL line it
# writes for one prefill point and one decode point, exactly as latency_test writes it.
ONE_BATCH_HARNESS = (
    PRELUDE
    + r"""
import json, sys, warnings
warnings.simplefilter("ignore")
from sglang.benchmark import one_batch


class Runner:
    def max_batch_size(self, input_len, output_len):
        return 64
    def clear(self):
        pass
    def synchronize(self):
        pass
    def extend(self, reqs):
        return [0] * len(reqs), None, object()
    def decode(self, ids, batch):
        return ids, None
    def cleanup(self, batch):
        pass


for il, ol in ((512, 1), (16, 9)):
    result = one_batch.latency_test_run_once("toolkit", Runner(), lambda *a, **k: None, [None], 1, il, ol, 0,
                                             False, False, ("CPU",), "", "all", 0)
    print(json.dumps(result))
"""
)


def contract_python(version: str, root: Path) -> Path:
    """A venv's python holding sglang `version`'s Python code and its entry modules' dependencies."""
    recipe = hashlib.sha256(f"{_RECIPE}|{_SKIP.pattern}|{PRELUDE}|{version}".encode()).hexdigest()[:12]

    def populate(venv: contract_env.Venv) -> None:
        contract_env.pip(
            venv.python, "install", "-c", str(venv.constraints), "triton"
        )  # imported at module level
        wheels = root / version / "wheels"
        shutil.rmtree(wheels, ignore_errors=True)
        # torchvision's Python code of the release paired with this torch (minor + 15: 2.13 -> 0.28)
        major, minor = (int(x) for x in venv.torch_version.split(".")[:2])
        contract_env.pip(
            venv.python,
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            f"sglang=={version}",
            f"torchvision==0.{minor + 15}.*" if major == 2 else "torchvision",
            "-d",
            str(wheels),
        )
        for wheel in wheels.glob("*.whl"):
            contract_env.unpack_without_binaries(wheel, venv.site)
        reqs = contract_env.wheel_requirements(next(wheels.glob("sglang-*.whl")), _SKIP)
        contract_env.pip(venv.python, "install", "-c", str(venv.constraints), *reqs)
        # a requirement may have pulled a (CUDA) torchvision again: keep the unpacked one, no binaries
        for wheel in wheels.glob("torchvision-*.whl"):
            contract_env.unpack_without_binaries(wheel, venv.site)
        for so in (venv.site / "torchvision").glob("*.so"):
            so.unlink()
        shutil.rmtree(wheels)

    return contract_env.cached_venv(root / version, recipe, populate).python


def _run(python: Path, code: str, stdin: str = "") -> str:
    proc = subprocess.run([str(python), "-c", code], input=stdin, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise AssertionError(f"the SGLang harness failed: {proc.stderr[-3000:]}")
    return proc.stdout


@pytest.fixture(scope="module", params=pinned_versions())
def release_python(request) -> tuple[str, Path]:
    root = contract_env.cache_root("TOOLKIT_SGLANG_CONTRACT_DIR", "sglang-contract")
    return request.param, contract_env.env_or_skip(
        f"SGLang {request.param}", lambda: contract_python(request.param, root)
    )


@pytest.mark.contract
def test_contract_release_parsers_accept_the_argument_lists(release_python):
    version, python = release_python
    graphs_off = S.model_copy(
        update={"cuda_graph": False, "kv_cache_dtype": "fp8_e4m3", "disable_radix_cache": False}
    )
    ours = [
        sa.prefill_args(
            "/models/m", S, prompt_len=512, chunked_prefill_size=2048, result_file="/out/pp.jsonl"
        ),
        sa.decode_args("/models/m", S, n_gen=128, chunked_prefill_size=512, result_file="/out/tg.jsonl"),
        sa.prefill_args(
            "/models/m", graphs_off, prompt_len=64, chunked_prefill_size=64, result_file="/out/x.jsonl"
        ),
        sa.launch_server_args("/models/m", S, chunked_prefill_size=512),
        sa.bench_serving_args(
            "/models/m",
            input_len=512,
            output_len=128,
            concurrency=4,
            num_prompts=32,
            output_file="/out/s.jsonl",
        ),
    ]
    controls = [  # each must FAIL, or the harness proves nothing
        ["python3", "-m", sa.MODULE_ONE_BATCH, "--model-path", "/m", "--input-length", "5"],  # misspelt flag
        ["python3", "-m", sa.MODULE_SERVER, "--model-path", "/m", "--attention-backend", "no-such-backend"],
        ["python3", "-m", sa.MODULE_SERVING, "--dataset-name", "no-such-dataset"],
    ]
    results = json.loads(
        next(
            ln
            for ln in _run(python, HARNESS, json.dumps(ours + controls)).splitlines()
            if ln.startswith("@@RESULT@@")
        ).removeprefix("@@RESULT@@")
    )
    for r in results[: len(ours)]:
        assert r["ok"], f"SGLang {version} rejects {' '.join(r['argv'])}: {r['error']}"
    for r in results[len(ours) :]:
        assert not r["ok"], f"SGLang {version} accepted a control that must fail: {r['argv']}"
    pp, tg, off, server, client = (r["args"] for r in results[: len(ours)])
    assert pp["batch_size"] == [1] and pp["input_len"] == [512] and pp["output_len"] == [1]
    assert pp["result_filename"] == "/out/pp.jsonl" and pp["model_path"] == "/models/m"
    assert (pp["attention_backend"], pp["kv_cache_dtype"], pp["chunked_prefill_size"]) == (
        "triton",
        "auto",
        2048,
    )
    assert (pp["cuda_graph_backend_decode"], pp["cuda_graph_backend_prefill"]) == ("full", "disabled")
    assert pp["disable_radix_cache"] is True and pp["tp_size"] == 1 and pp["random_seed"] == 0
    assert tg["output_len"] == [129] and tg["input_len"] == [sa.DECODE_TINY_INPUT_LEN]
    assert off["cuda_graph_backend_decode"] == "disabled" and off["kv_cache_dtype"] == "fp8_e4m3"
    assert off["disable_radix_cache"] is False
    assert (server["host"], server["port"], server["chunked_prefill_size"]) == (
        "127.0.0.1",
        sa.SERVE_PORT,
        512,
    )
    assert client["backend"] == "sglang" and client["dataset_name"] == "random"
    assert client["request_rate"] == float("inf") and client["random_range_ratio"] == 1.0
    assert (client["max_concurrency"], client["num_prompts"], client["warmup_requests"]) == (4, 32, 4)
    assert client["disable_ignore_eos"] is False and client["output_details"] is True
    assert client["output_file"] == "/out/s.jsonl"


@pytest.mark.contract
def test_contract_one_batch_output_from_the_release_code_parses(release_python, tmp_path):
    """The JSONL lines the release's own latency_test_run_once produces (stand-in runner) parse, with
    every key the fixture file has."""
    _, python = release_python
    out = tmp_path / "r.jsonl"
    out.write_text(
        "\n".join(ln for ln in _run(python, ONE_BATCH_HARNESS).splitlines() if ln.startswith("{")) + "\n"
    )
    points, problems = sa.read_one_batch(out)
    assert not problems and len(points) == 2
    pp, tg = points
    assert pp.input_len == 512 and pp.prefill_throughput > 0 and pp.median_decode_throughput is None
    assert tg.output_len == 9 and tg.median_decode_throughput > 0
    fixture = [json.loads(ln) for ln in (DATA / "sglang-0.5.15-one-batch.jsonl").read_text().splitlines()]
    assert set(fixture[0]) == set(pp.raw) and set(fixture[-1]) == set(tg.raw)


@pytest.mark.contract
def test_contract_serving_fixture_has_the_keys_the_release_writes(release_python):
    """The serving fixture's keys = the keys of the result dict in the release's benchmark() (read
    from its source with ast) plus the --output-details lists."""
    _, python = release_python
    path = Path(
        _run(python, PRELUDE + "import sglang.benchmark.serving as s; print(s.__file__)")
        .strip()
        .splitlines()[-1]
    )
    tree = ast.parse(path.read_text())
    keys: set[str] = set()
    details: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and len(node.targets) == 1:
            name = getattr(node.targets[0], "id", None)
            ks = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
            if name == "result" and "completed" in ks:
                keys |= ks
            elif name == "result_details":
                details |= ks
    assert {
        "completed",
        "output_throughput",
        "p99_ttft_ms",
        "median_tpot_ms",
    } <= keys and "output_lens" in details
    fixture = json.loads((DATA / "sglang-0.5.15-serving.jsonl").read_text().splitlines()[-1])
    assert set(fixture) == keys | details, set(fixture) ^ (keys | details)


def test_attention_backend_log_forms():
    """The three forms SGLang 0.5.15 logs its attention backend in (sglang.args._SGL_ATTN; the contract
    test below finds each in the pinned wheel)."""
    server = (
        "[2026-11-30 00:00:01] server_args=ServerArgs(model_path='/m', attention_backend='triton', "
        "decode_attention_backend=None, prefill_attention_backend='fa3', mm_attention_backend='sdpa')"
    )
    assert sa.log_attention_backend(server) == "triton"
    assert (
        sa.log_attention_backend("Attention backend not specified. Use aiter backend by default.") == "aiter"
    )
    hybrid = (
        "Using hybrid attention backend for decode and prefill: decode_backend=triton, prefill_backend=fa3."
    )
    assert sa.log_attention_backend(server + "\n" + hybrid) == "decode=triton prefill=fa3"
    assert sa.log_attention_backend("no backend named here") is None


@pytest.mark.contract
def test_contract_attention_backend_log_lines_are_the_releases(release_python):
    version, python = release_python
    root = Path(
        _run(python, "import importlib.util as u; print(u.find_spec('sglang').submodule_search_locations[0])")
        .strip()
        .splitlines()[-1]
    )
    engine = (root / "srt" / "entrypoints" / "engine.py").read_text()
    assert 'logger.info(f"{server_args=}")' in engine
    assert re.search(
        r"^@dataclasses.dataclass\nclass ServerArgs:", (root / "srt" / "server_args.py").read_text(), re.M
    )
    assert (
        "\n    attention_backend: A[" in (root / "srt" / "server_args.py").read_text()
    )  # a field: in its repr
    overrides = (root / "srt" / "arg_groups" / "overrides.py").read_text()
    assert 'f"Attention backend not specified. Use {backend} backend by default."' in overrides
    runner = (root / "srt" / "model_executor" / "model_runner.py").read_text()
    assert 'f"Using hybrid attention backend for decode and prefill: "' in runner
    assert 'f"decode_backend={self.decode_attention_backend_str}, "' in runner
    # what the GPU-path probe reads (platform_probe.SOURCES["sglang"])
    platforms = (root / "srt" / "platforms" / "__init__.py").read_text()
    assert "def __getattr__(name: str):" in platforms and "RocmSRTPlatform()" in platforms
    common = (root / "srt" / "utils" / "common.py").read_text()
    assert "def get_device(device_id: Optional[int] = None) -> str:" in common
    assert "def get_device_count() -> int:" in common
    assert 'device_name: str = "rocm"' in (root / "srt" / "platforms" / "rocm.py").read_text()
