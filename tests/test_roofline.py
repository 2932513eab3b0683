"""Rooflines by exact GPU product and GPU count, on real llama-bench output.

Inputs: the real llama-bench rows of shared/cases (copied to tests/data): an NVIDIA H200 run through
the CUDA and the Vulkan build of the pinned commit 0c1e57098; the toolkit's own stored records
(tests/data/results-*.jsonl, a CPU and a lavapipe run). Where a product this machine cannot run on
is needed (R9700, RX 9070 GRE, two R9700s), the real H200 rows are re-labelled with the gpu_info /
device list / split mode that llama-bench and the toolkit write for them -- a stand-in, said here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.analysis.roofline import assess, ceiling, gpu_use
from toolkit.core import gpuspecs
from toolkit.core.gpuspecs import spec_by_name, spec_by_pci, split_gpu_info
from toolkit.results.records import BenchRecord, ImageRef, ModelRef
from toolkit.runtimes.llama_bench.check import normalize

DATA = Path(__file__).parent / "data"
H200_CUDA = DATA / "cuda-h200-qwen3moe-30b-synthetic.jsonl"
H200_VULKAN = DATA / "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl"

R9700_HOST_GPU = {  # hostinfo.host_facts()["gpus"][i] of an R9700 as devices.detect_gpus reads it
    "index": 0,
    "gfx_target": "gfx1201",
    "name": "AMD Radeon AI PRO R9700",
    "vendor": "0x1002",
    "device_id": "0x7551",
    "revision": "0xc0",
    "render_node": "/dev/dri/renderD128",
    "is_igpu": False,
}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def record(
    raw: dict,
    *,
    backend: str,
    runner: str = "llama-bench",
    command: list[str] | None = None,
    host: dict | None = None,
    **extra,
) -> BenchRecord:
    """A BenchRecord as bench/import store it: normalised fields beside the unchanged raw row."""
    return BenchRecord(
        run_id="t",
        created="2026-11-30T00:00:00+00:00",
        runner=runner,
        method=runner,
        image=ImageRef(name=backend, ref=f"toolkit/{backend}", digest="sha256:" + "0" * 64, backend=backend),
        model=ModelRef(name="qwen3-30b-a3b", path="", sha256="", size_bytes=int(raw.get("model_size") or 0)),
        **normalize(raw),
        raw=raw,
        command=command or [],
        host=host or {},
        **extra,
    )


def relabel(raw: dict, **fields) -> dict:
    return {**raw, **fields}


def docker_cmd(*nodes: str) -> list[str]:
    args = ["docker", "run", "--rm", "--device", "/dev/kfd:/dev/kfd:rwm"]
    for n in nodes:
        args += ["--device", f"/dev/dri/{n}:/dev/dri/{n}:rwm"]
    return args + ["toolkit/rocm", "llama-bench"]


# ---------------------------------------------------------------------------------------------
# The H200 cases: the H200's yardstick, never an R9700's


@pytest.mark.parametrize("path, backend", [(H200_CUDA, "cuda"), (H200_VULKAN, "vulkan")])
def test_h200_imports_get_the_h200_yardstick(path: Path, backend: str) -> None:
    recs = [record(r, backend=backend) for r in rows(path)]
    assert len(recs) == 8
    for rec in recs:
        roof = assess(rec).roofline
        assert roof is not None, assess(rec).note
        assert (roof.gpu.product, roof.gpu.mem_bw_gbs, roof.gpu.fp16_matrix_tflops) == (
            "NVIDIA H200",
            4800.0,
            989.5,
        )
        assert roof.gpu_count == 1 and roof.share.source == "table"
    tg = [rec for rec in recs if rec.axis == "decode"]
    fracs = [assess(rec).roofline.fraction for rec in tg]
    # tg128 ~300 t/s x 18.55 GB x (3.3/30.5 active) ~ 0.6 TB/s: ~12-13 % of the H200's 4.8 TB/s
    assert all(0.05 < f < 0.2 for f in fracs), fracs


def test_h200_record_on_an_r9700_host_still_gets_the_h200(tmp_path: Path) -> None:
    """Host facts of the importing machine never override what gpu_info names."""
    raw = rows(H200_VULKAN)[3]
    rec = record(raw, backend="vulkan", host={"gpus": [R9700_HOST_GPU]}, command=docker_cmd("renderD128"))
    assert assess(rec).roofline.gpu.product == "NVIDIA H200"


# ---------------------------------------------------------------------------------------------
# gfx1201 products are told apart; unknown products get no roofline


@pytest.mark.parametrize(
    "gpu_info, product, bw",
    [
        ("AMD Radeon AI PRO R9700 (RADV GFX1201)", "AMD Radeon AI PRO R9700", 640.0),  # Vulkan (RADV) name
        ("AMD Radeon AI PRO R9700", "AMD Radeon AI PRO R9700", 640.0),  # ROCm name
        ("AMD Radeon RX 9070 GRE (RADV GFX1201)", "AMD Radeon RX 9070 GRE", 432.0),
        ("AMD Radeon RX 9070 GRE", "AMD Radeon RX 9070 GRE", 432.0),
        ("AMD Radeon RX 9070 (RADV GFX1201)", "AMD Radeon RX 9070", 640.0),
        ("AMD Radeon RX 9070 XT", "AMD Radeon RX 9070 XT", 640.0),
        ("AMD Radeon RX 7900 GRE", "AMD Radeon RX 7900 GRE", 576.0),
        ("AMD Radeon Pro W7900 (RADV NAVI31)", "AMD Radeon PRO W7900", 864.0),
        ("AMD Instinct MI300X", "AMD Instinct MI300X", 5300.0),
    ],
)
def test_product_by_exact_name(gpu_info: str, product: str, bw: float) -> None:
    rec = record(relabel(rows(H200_VULKAN)[3], gpu_info=gpu_info), backend="vulkan")
    roof = assess(rec).roofline
    assert roof is not None and (roof.gpu.product, roof.gpu.mem_bw_gbs) == (product, bw)


@pytest.mark.parametrize(
    "gpu_info",
    [
        "AMD Radeon RX 9060 XT (RADV GFX1200)",  # a real product without figures in the table
        "AMD Radeon AI PRO R9600D",  # shares the R9700's PCI device id
        "AMD Radeon Graphics (RADV GFX1201)",  # generic name, gfx1201: no guess from the arch
        "gfx1201",
        "AMD Radeon RX 9070 XTX",  # not a product; never the 9070 XT by substring
    ],
)
def test_unknown_product_gets_no_roofline_and_says_why(gpu_info: str) -> None:
    rec = record(relabel(rows(H200_VULKAN)[3], gpu_info=gpu_info), backend="vulkan")
    assert assess(rec).roofline is None
    note = assess(rec).note
    assert note is not None and "no peak figures" in note and "gpuspecs" in note


@pytest.mark.parametrize(
    "revision, product, bw",
    [
        ("0xc2", "AMD Radeon RX 9070 GRE", 432.0),
        ("0xc0", "AMD Radeon RX 9070 XT", 640.0),
        ("0xc7", None, None),
    ],
)
def test_generic_name_resolved_by_the_pci_ids_of_the_passed_card(
    revision: str, product: str | None, bw
) -> None:
    """ROCm with an older amdgpu.ids in the image says "AMD Radeon Graphics": the record's docker
    command says which render node the container got, its host facts which card that is."""
    gpu = {**R9700_HOST_GPU, "name": "", "device_id": "0x7550", "revision": revision}
    raw = relabel(rows(H200_VULKAN)[3], gpu_info="AMD Radeon Graphics", backends="ROCm")
    rec = record(raw, backend="rocm", command=docker_cmd("renderD128"), host={"gpus": [gpu]})
    roof = assess(rec).roofline
    if product is None:
        assert roof is None and "no peak figures" in assess(rec).note and "0x7550" in assess(rec).note
    else:
        assert (roof.gpu.product, roof.gpu.mem_bw_gbs) == (product, bw)


# ---------------------------------------------------------------------------------------------
# GPU count: a multi-GPU run is never held against one card's peak

TWO_R9700 = "AMD Radeon AI PRO R9700, AMD Radeon AI PRO R9700"


def test_two_cards_layer_split_get_no_roofline_with_a_note() -> None:
    raw = relabel(rows(H200_VULKAN)[3], gpu_info=TWO_R9700, backends="ROCm")  # split_mode layer (default)
    rec = record(raw, backend="rocm")
    use = gpu_use(rec)
    assert (use.count, use.split) == (2, "layer") and gpu_use(rec).count == 2
    assert assess(rec).roofline is None
    assert "2 x AMD Radeon AI PRO R9700 with split layer" in assess(rec).note
    top = ceiling(rec)  # what no split can exceed: both cards' bandwidth
    assert top is not None and top.gpu.mem_bw_gbs == 1280.0 and "not reachable" in top.note


def test_two_cards_row_split_are_held_against_both_cards() -> None:
    raw = relabel(rows(H200_VULKAN)[3], gpu_info=TWO_R9700, backends="ROCm", split_mode="row")
    roof = assess(record(raw, backend="rocm")).roofline
    assert roof is not None and roof.gpu_count == 2
    assert (roof.gpu.product, roof.gpu.mem_bw_gbs, roof.gpu.fp16_matrix_tflops) == (
        "2 x AMD Radeon AI PRO R9700",
        1280.0,
        382.0,
    )
    one = assess(record(relabel(raw, gpu_info="AMD Radeon AI PRO R9700"), backend="rocm")).roofline
    assert roof.fraction == pytest.approx(one.fraction / 2)


@pytest.mark.parametrize(
    "fields",
    [{"split_mode": "none", "main_gpu": 1}, {"devices": "ROCm1"}],
    ids=["sm-none", "dev-one"],
)
def test_two_visible_cards_one_used(fields: dict) -> None:
    raw = relabel(
        rows(H200_VULKAN)[3],
        gpu_info="AMD Radeon RX 9070 XT, AMD Radeon AI PRO R9700",
        backends="ROCm",
        **fields,
    )
    roof = assess(record(raw, backend="rocm")).roofline
    assert roof is not None and roof.gpu_count == 1 and roof.gpu.product == "AMD Radeon AI PRO R9700"


def test_count_from_the_device_profile_in_the_docker_command() -> None:
    """Two render nodes passed (devices.select_gpus on a 2x R9700 host), gpu_info generic."""
    gpus = [R9700_HOST_GPU, {**R9700_HOST_GPU, "index": 1, "render_node": "/dev/dri/renderD129"}]
    raw = relabel(rows(H200_VULKAN)[3], gpu_info="AMD Radeon Graphics, AMD Radeon Graphics", backends="ROCm")
    rec = record(raw, backend="rocm", command=docker_cmd("renderD128", "renderD129"), host={"gpus": gpus})
    use = gpu_use(rec)
    assert use.count == 2 and [s.product for s in use.specs] == ["AMD Radeon AI PRO R9700"] * 2
    assert assess(rec).roofline is None and "split layer" in assess(rec).note


def test_count_from_a_recorded_device_profile() -> None:
    prof = {
        "gpu_count": 1,
        "gpus": [{**R9700_HOST_GPU, "device_id": "0x7550", "revision": "0xc2", "name": ""}],
        "hidden": ["1 gfx1036 (renderD129, 512 MiB, iGPU) (iGPU: ...)"],
    }
    raw = relabel(rows(H200_VULKAN)[3], gpu_info="AMD Radeon Graphics", backends="ROCm")
    roof = assess(record(raw, backend="rocm", device_profile=prof)).roofline
    assert roof is not None and roof.gpu.product == "AMD Radeon RX 9070 GRE"
    in_host = record(
        raw, backend="rocm", host={"gpus": [R9700_HOST_GPU], "device_profile": prof}
    )  # as bench stores it
    assert assess(in_host).roofline.gpu.product == "AMD Radeon RX 9070 GRE" and gpu_use(in_host).count == 1


def test_vllm_uses_one_gpu_unless_tensor_parallel() -> None:
    """vLLM records carry no gpu_info: the passed cards' PCI ids name them; TP sets the count."""
    gpus = [R9700_HOST_GPU, {**R9700_HOST_GPU, "index": 1, "render_node": "/dev/dri/renderD129"}]
    base = dict(
        n_prompt=0,
        n_gen=128,
        avg_ts=49.0,
        model_size=18550716416,
        model_type="qwen3moe 30B.A3B",
        model_n_params=30532122624,
    )
    cmd = docker_cmd("renderD128", "renderD129")
    rec = record(base, backend="rocm", runner="vllm-bench-latency-decode", command=cmd, host={"gpus": gpus})
    rec.backends, rec.gpu_info = "ROCm", None
    assert gpu_use(rec).count == 1 and assess(rec).roofline.gpu.product == "AMD Radeon AI PRO R9700"
    rec.engine = {"tensor_parallel_size": 2}
    roof = assess(rec).roofline
    assert gpu_use(rec).count == 2 and roof.gpu.product == "2 x AMD Radeon AI PRO R9700"


# ---------------------------------------------------------------------------------------------
# No GPU: CPU runs and software Vulkan (the toolkit's own stored records)


def stored(name: str) -> list[BenchRecord]:
    return [
        BenchRecord.model_validate(json.loads(line))
        for line in (DATA / name).read_text().splitlines()
        if line.strip()
    ]


def test_cpu_and_lavapipe_records_have_no_gpu() -> None:
    cpu = stored("results-cpu-a.jsonl")
    lava = stored("results-vulkan-lavapipe.jsonl")
    assert cpu and lava
    for rec in cpu:
        assert gpu_use(rec).count == 0 and assess(rec).roofline is None and "CPU run" in assess(rec).note
    for rec in lava:
        assert (
            gpu_use(rec).count == 0 and assess(rec).roofline is None and "software Vulkan" in assess(rec).note
        )


# ---------------------------------------------------------------------------------------------
# The table


def test_split_gpu_info_keeps_commas_inside_parentheses() -> None:
    assert split_gpu_info("llvmpipe (LLVM 19.1.7, 256 bits)") == ["llvmpipe (LLVM 19.1.7, 256 bits)"]
    assert split_gpu_info(TWO_R9700) == ["AMD Radeon AI PRO R9700"] * 2
    assert split_gpu_info("") == []


def test_table_is_unambiguous() -> None:
    ids = [(s.vendor, d, r) for s in gpuspecs.SPECS for d, r in s.pci]
    assert len(ids) == len(set(ids))
    names = [gpuspecs.normalize_name(n) for s in gpuspecs.SPECS for n in (s.product, *s.names)]
    assert len(names) == len(set(names))
    for s in gpuspecs.SPECS:
        assert s.mem_bw_gbs > 0 and s.fp16_matrix_tflops > 0 and s.source
        assert spec_by_name(s.product) is s
        for d, r in s.pci:
            assert spec_by_pci(s.vendor, d, r) is s
    assert spec_by_pci("0x1002", "0x7551", None) is None  # the R9700's device id alone is not enough
    assert spec_by_pci("0x1002", "0x7551", "0xc8") is None  # R9600D
    assert spec_by_pci("0x10de", "0x2335") is spec_by_name("NVIDIA H200")


def test_assess_says_what_it_used() -> None:
    a = assess(record(rows(H200_CUDA)[3], backend="cuda"))
    assert a.roofline is not None and a.use.source == "gpu_info" and "NVIDIA H200" in a.note
