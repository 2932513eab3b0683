"""End to end for the Vulkan image on this GPU-less machine: build the rendered template on the
Debian base, run llama-bench on Mesa's lavapipe (a CPU-type Vulkan device, opted into explicitly),
and check the toolkit refuses that device without the opt-in. Nothing is mocked; the first run
compiles shaders (minutes, cold), the shader cache lives on a per-digest volume."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.e2e_helpers import engine_or_skip, make_project, run_cli
from toolkit.results.records import ResultStore

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AXES = {
    "n_prompt": [64, 256],
    "n_gen": [16],
    "n_ubatch": [32, 512],
    "n_batch": [512],
    "repetitions": 3,
    "n_gpu_layers": [99],
    "timeout_s": 1800,
}


@pytest.fixture(scope="module")
def vk_project(tmp_path_factory):
    engine_or_skip()
    project = make_project(tmp_path_factory.mktemp("e2e-vk"), images=["cpu", "vulkan"], bench=AXES)
    res, _ = run_cli(project, "build", "--image", "vulkan")
    assert "vulkan: built toolkit/vulkan:" in res.output
    return project


def test_vulkan_image_labels_mesa_version(vk_project):
    rec = ResultStore(vk_project / "results").latest_build("vulkan")
    mesa = rec.labels.get("org.toolkit.mesa-version", "")
    major, minor = (int(x) for x in mesa.split(".")[:2])
    assert (major, minor) >= (25, 1), rec.labels  # RADV coopmat on GFX12 from Mesa 25.1.0
    assert "~bpo" in mesa and rec.labels["org.toolkit.mesa-apt-suite"] == "trixie-backports"


def test_vulkan_build_probed_coopmat_on_gfx1201(vk_project):
    """The build's drm-shim probe (RADV on a faked gfx1201) recorded its facts as labels: the
    extension, the feature, and llama.cpp's own choice of matrix cores."""
    labels = ResultStore(vk_project / "results").latest_build("vulkan").labels
    assert labels["org.toolkit.vk-probe-gpu"] == "gfx1201"
    assert "RADV GFX1201" in labels["org.toolkit.vk-probe-device"]
    assert labels["org.toolkit.vk-khr-cooperative-matrix"] not in ("", "absent")
    assert labels["org.toolkit.vk-cooperative-matrix-feature"] == "true"
    assert labels["org.toolkit.llama-vk-matrix-cores"] == "KHR_coopmat"


def test_lavapipe_is_refused_without_opt_in(vk_project):
    res, code = run_cli(vk_project, "bench", "--image", "vulkan", expect=2)  # nothing measured: exit 2
    line = [ln for ln in res.output.splitlines() if ln.startswith("vulkan")][0]
    assert "skipped" in line and "--allow-software-gpu" in line and "nothing measured" in str(res.exception)
    assert not list((vk_project / "results").glob("*/bench.jsonl"))


def test_vulkan_on_lavapipe_lands_beside_cpu(vk_project):
    res, _ = run_cli(vk_project, "bench", "--image", "vulkan", "--allow-software-gpu")
    assert "vulkan x tiny-qwen3moe: ok" in res.output, res.output
    store = ResultStore(vk_project / "results")
    digest = store.latest_build("vulkan").digest
    recs = [
        json.loads(x)
        for x in (vk_project / "results" / digest.split(":")[1][:12] / "bench.jsonl").read_text().splitlines()
    ]
    assert len(recs) == 6
    for r in recs:
        assert r["status"] == "ok" and r["avg_ts"] > 0
        assert "Vulkan" in r["backends"] and "llvmpipe" in r["gpu_info"]
        assert "GGML_VK_VISIBLE_DEVICES=0" in " ".join(r["command"])
        assert "cache_cold" in r["timing"]
    # a warm second run reuses the shader cache volume of this digest
    res2, _ = run_cli(vk_project, "bench", "--image", "vulkan", "--allow-software-gpu")
    assert "(shader cache warm)" in res2.output
    run_cli(vk_project, "build", "--image", "cpu")
    run_cli(vk_project, "bench", "--image", "cpu")
    rep, _ = run_cli(vk_project, "report")
    assert "vulkan@" in rep.output and "cpu@" in rep.output


AB_AXES = {**AXES, "n_prompt": [64], "n_ubatch": [32], "repetitions": 1}  # one short case


def _image_file_sums(ref: str) -> str:
    """sha256 of llama-bench and every library shipped beside it in image `ref` (one line each)."""
    out = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--entrypoint",
            "bash",
            ref,
            "-c",
            "cd /opt/llama && sha256sum bin/* lib/*",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout


@pytest.fixture(scope="module")
def ab_project(tmp_path_factory):
    """The Mesa A/B pair built in one project: `vulkan` (trixie-backports) first, then
    `vulkan-mesa-trixie` (Debian 13's own Mesa), whose build stage must come from BuildKit's cache."""
    engine_or_skip()
    project = make_project(
        tmp_path_factory.mktemp("e2e-vk-ab"), images=["vulkan", "vulkan-mesa-trixie"], bench=AB_AXES
    )
    first, _ = run_cli(project, "build", "--image", "vulkan")
    second, _ = run_cli(project, "build", "--image", "vulkan-mesa-trixie")
    print(first.output, second.output)  # build times and cached steps, for the run's log
    assert "vulkan-mesa-trixie: built toolkit/vulkan-mesa-trixie:" in second.output, second.output
    return project


def test_mesa_ab_images_share_one_llama_build(ab_project):
    """Same llama.cpp commit and build facts, and the very same llama-bench bytes, in both images:
    the second image compiled nothing (its build stage is the first's, from BuildKit's cache)."""
    store = ResultStore(ab_project / "results")
    a, b = store.latest_build("vulkan"), store.latest_build("vulkan-mesa-trixie")
    same = [k for k in a.labels if k.startswith("org.toolkit.cmake.") or k == "org.toolkit.ggml-backends"]
    assert same and all(a.labels[k] == b.labels.get(k) for k in same), (a.labels, b.labels)
    assert a.labels["org.opencontainers.image.revision"] == b.labels["org.opencontainers.image.revision"]
    assert _image_file_sums("toolkit/vulkan:latest") == _image_file_sums("toolkit/vulkan-mesa-trixie:latest")


def test_mesa_ab_probes_record_coopmat_off_and_on(ab_project):
    """The probe facts tell the pair apart: Debian 13's own Mesa 25.0.x, llama.cpp picks no matrix
    cores on the RADV GFX1201 (null) device; trixie-backports' Mesa, KHR_coopmat on the drm-shim one."""
    store = ResultStore(ab_project / "results")
    on, off = store.latest_build("vulkan").labels, store.latest_build("vulkan-mesa-trixie").labels
    assert (
        on["org.toolkit.llama-vk-matrix-cores"] == "KHR_coopmat"
        and on["org.toolkit.vk-probe-method"] == "drm-shim"
    )
    assert on["org.toolkit.vk-probe-require-coopmat"] == "yes"
    assert (
        off["org.toolkit.mesa-version"].startswith("25.0.") and "~bpo" not in off["org.toolkit.mesa-version"]
    )
    assert off["org.toolkit.mesa-apt-suite"] == "trixie" and off["org.toolkit.min-mesa-version"] == "25.0.0"
    assert off["org.toolkit.vk-probe-require-coopmat"] == "no"
    assert off["org.toolkit.vk-probe-method"] == "radv-null-device"
    assert off["org.toolkit.llama-vk-matrix-cores"] == "none"
    assert "RADV GFX1201" in off["org.toolkit.llama-vk-device"]
    assert off["org.toolkit.vk-khr-cooperative-matrix"] == "unprobed"  # vulkaninfo crashes on the null device


def test_mesa_trixie_image_benches_on_lavapipe(ab_project):
    """The A/B image runs llama-bench on lavapipe like the reference image (opted in)."""
    res, _ = run_cli(ab_project, "bench", "--image", "vulkan-mesa-trixie", "--allow-software-gpu")
    assert "vulkan-mesa-trixie x tiny-qwen3moe: ok" in res.output, res.output
    digest = ResultStore(ab_project / "results").latest_build("vulkan-mesa-trixie").digest
    recs = [
        json.loads(x)
        for x in (ab_project / "results" / digest.split(":")[1][:12] / "bench.jsonl").read_text().splitlines()
    ]
    assert recs and all(r["status"] == "ok" and r["avg_ts"] > 0 for r in recs)
    assert all("llvmpipe" in r["gpu_info"] for r in recs)


DEPTH_AXES = {  # q8_0 for K and V: Vulkan's flash attention takes K and V of one type (else the CPU's)
    **AXES,
    "n_prompt": [64],
    "n_ubatch": [32],
    "repetitions": 2,
    "type_k": ["q8_0"],
    "type_v": ["q8_0"],
}


def _by_image(proj, image: str) -> list:
    return [r for r in ResultStore(proj / "results").results() if r.image.name == image]


def test_lavapipe_runs_the_depth_sweep_with_a_q8_0_kv_cache_and_its_canary_beside_the_cpu_control(
    vk_project, tmp_path
):
    """Issue 34 on the Vulkan image, one `toolkit bench` of both images: the CPU control's canary,
    then Vulkan's on lavapipe judged against it; each image's main sweep (pp64, tg16 at ub 32) and
    the tiny model's depth sweep (pp512, tg128 at depths 0 and 512: `-d 0,512`), every test with a
    q8_0 K and V cache (-ctk/-ctv, where RDNA4 Vulkan regressions sit). The image is vk_project's
    (this project's build of the same inputs comes from BuildKit's cache)."""
    project = make_project(tmp_path / "p", images=["cpu", "vulkan"], bench=DEPTH_AXES, depth=True)
    run_cli(project, "build", "--image", "cpu", "--image", "vulkan")
    res, _ = run_cli(project, "bench", "-i", "cpu", "-i", "vulkan", "--allow-software-gpu")
    out = res.output
    assert "; 8 of the 12 in depth sweeps" in out, out
    assert "vulkan x tiny-qwen3moe: ok, 4 results" in out and "depth sweep, depths 0,512" in out, out
    control = next(ln for ln in out.splitlines() if ln.startswith("cpu x tiny-qwen3moe: canary:"))
    assert "(the CPU control)" in control, control
    judged = next(ln for ln in out.splitlines() if ln.startswith("vulkan x tiny-qwen3moe: canary:"))
    assert "(cpu control " in judged, judged
    run_id = ResultStore(project / "results").results()[-1].run_id
    vk = [
        json.loads(x)
        for f in (project / "results").glob("*/canary.jsonl")
        for x in f.read_text().splitlines()
        if json.loads(x)["image"] == "vulkan"
    ]
    assert [c["status"] for c in vk] == ["ok"] and vk[0]["control"]["run_id"] == run_id, vk
    recs = _by_image(project, "vulkan")
    assert all(r.status == "ok" and r.avg_ts and r.avg_ts > 0 for r in recs)
    assert all("llvmpipe" in (r.gpu_info or "") and "Vulkan" in (r.backends or "") for r in recs)
    assert all((r.raw["type_k"], r.raw["type_v"]) == ("q8_0", "q8_0") for r in recs)
    assert all((r.model_extra or {})["canary"]["status"] == "ok" for r in recs)
    depth = sorted((r.n_depth, r.n_prompt, r.n_gen) for r in recs if r.n_prompt == 512 or r.n_gen == 128)
    assert depth == [(0, 0, 128), (0, 512, 0), (512, 0, 128), (512, 512, 0)], depth
    depth_cmd = " ".join(next(r for r in recs if r.n_depth == 512).command)
    assert "-d 0,512" in depth_cmd and "-ctk q8_0 -ctv q8_0" in depth_cmd, depth_cmd
    page = tmp_path / "rep" / "report.html"
    page.parent.mkdir()  # -o names a file in a folder that exists (cli.common.output_parent)
    run_cli(project, "report", "--format", "html", "-o", str(page))
    assert (page.parent / "report-plots" / "depth-prefill.png").is_file()
