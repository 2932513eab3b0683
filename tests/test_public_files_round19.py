"""Round 19 of reading real, public result files (tests/data/public/README.md names each source):
the shapes published llama-bench tables and vLLM results take that the import misread or refused.

- a GPU named by the Vulkan (or Metal) device line pasted above a table, as the CUDA/HIP `Device N:`
  line already was (readers.read_md, md_devices.device_line);
- log lines printed into a table (SYCL's `get_memory_info: [warning]` before the rows: stderr merged):
  the table was cut at the first one and the file refused (readers.read_md);
- `MTL`, the Metal backend's name in 2026 builds (`MTL,BLAS`, `BLAS,MTL`): filed as backend `unknown`
  (core/backends.from_llama_names);
- a build of only the RPC backend (its devices another host's GPUs): filed as backend `cpu`, and the
  roofline called it a CPU run (analysis/roofline._gpu_backend);
- a `vllm bench serve` run at a request rate without a concurrency cap: labelled `offline`, the
  label of `vllm bench throughput` (analysis/facts.row_label).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.public import imp
from toolkit.analysis import facts, tables
from toolkit.cli.main import cli
from toolkit.core import backends
from toolkit.runtimes.llama_bench import md_devices


def test_vulkan_device_line_above_a_table_names_its_gpu(tmp_path: Path) -> None:
    recs = imp(tmp_path, "vulkan-rx580-b4696-geerlingguy.md")
    assert {r.gpu_info for r in recs} == {"AMD Radeon RX 580 Series (RADV POLARIS10)"}
    assert [r.test for r in recs] == ["pp512", "pp4096", "tg128", "pp4096+tg128"]
    assert {(r.image.backend, r.build_commit) for r in recs} == {("vulkan", "e598697d")}


def test_a_hip_device_line_wins_over_the_vulkan_line_of_the_same_gpu(tmp_path: Path) -> None:
    recs = imp(tmp_path, "rocm-vulkan-strixhalo-pr21344.md")
    assert {(r.gpu_info, r.image.backend) for r in recs} == {("Radeon 8060S Graphics", "rocm")}


@pytest.mark.parametrize(
    ("line", "name"),
    [
        # driver name after the device (releases that print `matrix cores:`)
        (
            "ggml_vulkan: 0 = Intel(R) Arc(tm) B580 Graphics (BMG G21) (Intel open-source Mesa driver) | "
            "uma: 0 | fp16: 1 | warp size: 32 | matrix cores: KHR_coopmat",
            "Intel(R) Arc(tm) B580 Graphics (BMG G21)",
        ),
        (
            "ggml_vulkan: 0 = NVIDIA GeForce RTX 3090 (NVIDIA) | uma: 0 | fp16: 1 | warp size: 32",
            "NVIDIA GeForce RTX 3090",
        ),
        # the oldest form: no driver, the parenthesis is the device's own
        (
            "ggml_vulkan: 0 = AMD Radeon RX 7900 XTX (RADV NAVI31) | uma: 0 | fp16: 1 | warp size: 64",
            "AMD Radeon RX 7900 XTX (RADV NAVI31)",
        ),
        ("ggml_metal_device_init: GPU name:   MTL0 (Apple M5 Max)", "Apple M5 Max"),
        ("ggml_metal_init: GPU name:   Apple M1 Pro", "Apple M1 Pro"),
    ],
)
def test_device_line_forms(line: str, name: str) -> None:
    said = md_devices.device_line(line)
    assert said is not None and said[1] == name and said[2] is False


def test_log_lines_printed_into_a_table_are_read_past(tmp_path: Path) -> None:
    recs = imp(tmp_path, "sycl-b6082-warnings-in-table.md")
    got = [(r.test, r.avg_ts, r.stddev_ts, r.image.backend, r.build_commit) for r in recs]
    assert got == [("pp512", 629.25, 288.96, "sycl", "5aa1105da"), ("tg1", 23.02, 12.81, "sycl", "5aa1105da")]


@pytest.mark.parametrize("name", ["mtl-blas-b9080-depth.md", "mtl-blas-b9187.md"])
def test_mtl_is_the_metal_backend(tmp_path: Path, name: str) -> None:
    recs = imp(tmp_path, name)
    assert {r.image.backend for r in recs} == {"metal"}
    assert not any("cpu-fallback" in (r.model_extra or {}).get("flags", []) for r in recs)
    assert backends.cpu_fallback_reason("metal", "BLAS,MTL", None) is None
    assert backends.cpu_fallback_reason("metal", "BLAS", None) is not None  # a CPU-only row still is one


def test_mtl_depth_tests_keep_their_depth(tmp_path: Path) -> None:
    recs = imp(tmp_path, "mtl-blas-b9080-depth.md")
    deep = [r for r in recs if r.test == "tg128 @ d16384" and r.model.name == "mistral3 14B Q4_K - Medium"]
    assert [(r.n_gen, r.n_depth, r.avg_ts, r.stddev_ts) for r in deep] == [(128, 16384, 35.97, 0.02)]


def test_an_rpc_only_build_is_no_cpu_run(tmp_path: Path) -> None:
    recs = imp(tmp_path, "rpc-only-pr16276.md")
    assert {r.image.backend for r in recs} == {"unknown"}
    assert backends.from_llama_names("RPC") == "unknown"
    assert backends.from_llama_names("CUDA,RPC") == "cuda" and backends.from_llama_names("BLAS") == "cpu"
    report = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--format", "text"])
    assert report.exit_code == 0, report.output
    assert "a CPU run" not in report.output  # the roofline does not call the remote devices a CPU


def test_a_serve_run_at_a_request_rate_is_not_labelled_offline(tmp_path: Path) -> None:
    (rec,) = imp(tmp_path, "openai-1.0qps-Qwen3-VL-8B-Instruct-20260722-041843.json", output_len=128)
    assert (rec.test, rec.status, rec.engine.get("concurrency")) == ("serve pp200+tg128", "ok", None)
    assert facts.row_label(rec, ub=False) == "1qps in200 out128"
    (served,) = [t for t in tables.tables([rec]) if t.axis == "served"]
    assert [row.test for row in served.rows] == ["1qps in200 out128"]


def test_a_vllm_results_date_is_shown_as_its_hosts_local_time(tmp_path: Path) -> None:
    """vLLM writes `date` as the benchmark host's local time without a zone (`20260722-041843`): the
    report said "no test_time in the file" and dated the run by its import. Now the date is shown as
    what it is, never as UTC, and the import time stays out of the header."""
    from toolkit.analysis.provenance import provenance
    from toolkit.runtimes.vllm import output as vllm_output

    recs = imp(tmp_path, "openai-1.0qps-Qwen3-VL-8B-Instruct-20260722-041843.json", output_len=128)
    p = provenance(recs)
    assert (
        p.dates is None and p.undated is None and p.local == (1, "2026-07-22 04:18:43", "2026-07-22 04:18:43")
    )
    assert (
        "measured: 2026-07-22 04:18:43 local time of the benchmark host, zone not recorded (vLLM's `date`), "
        "1 imported record" in p.lines()
    )
    assert p.heading().endswith("(2026-07-22, local time)")
    assert vllm_output.local_date("2026-07-22 04:18:43") == vllm_output.local_date("20260722-041843")
    assert [vllm_output.local_date(v) for v in ("20260230-000000", "2026-07-22T04:18:43Z", 20260722, "")] == [
        None
    ] * 4
