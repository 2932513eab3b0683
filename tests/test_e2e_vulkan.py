"""End to end for the Vulkan image on this GPU-less machine: build the rendered template on the
Debian base, run llama-bench on Mesa's lavapipe (a CPU-type Vulkan device, opted into explicitly),
and check the toolkit refuses that device without the opt-in. Nothing is mocked; the first run
compiles shaders (minutes, cold), the shader cache lives on a per-digest volume."""

from __future__ import annotations

import json

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
    res, _ = run_cli(vk_project, "bench", "--image", "vulkan")
    line = [ln for ln in res.output.splitlines() if ln.startswith("vulkan")][0]
    assert "skipped" in line and "--allow-software-gpu" in line
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
