"""Breaker round 30 (second helper): a llama-bench row of a build before ggml's backend registry is
not held to its backend name naming its GPUs' backend (plausible.REGISTRY_BUILD).

Before the registry (October 2024) llama-bench named its backend from compile flags: a HIP build
printed `CUDA` (`"cuda": true`; llama.cpp issue #8186, build 3260, an AMD Radeon Pro W7800), a CANN
build `CPU` (get_backend had no CANN branch; get_gpu_info listed the Ascend NPUs). Such real rows were
refused at import (md) or imported and then dropped by every reader of the store (json: the record's
derived `backends` held against its gpu_info), so an import said "imported 1 result" and the report
said "no results yet". Registry-era rows are still held.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.results import importer
from toolkit.results.records import ResultStore

_ROW = {
    "build_commit": "a59f8fdc",
    "build_number": 3467,
    "cuda": False,
    "vulkan": False,
    "kompute": False,
    "metal": False,
    "sycl": False,
    "rpc": "0",
    "gpu_blas": False,
    "blas": False,
    "cpu_info": "",
    "gpu_info": "Ascend910B3",
    "model_filename": "/models/qwen2-7b-instruct-fp16.gguf",
    "model_type": "qwen2 ?B F16",
    "model_size": 15231233024,
    "model_n_params": 7615616512,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 192,
    "type_k": "f16",
    "type_v": "f16",
    "n_gpu_layers": 99,
    "split_mode": "layer",
    "main_gpu": 0,
    "no_kv_offload": False,
    "flash_attn": False,
    "tensor_split": "0.00",
    "use_mmap": True,
    "embeddings": False,
    "n_prompt": 512,
    "n_gen": 0,
    "test_time": "2024-07-25T08:12:40Z",
    "avg_ns": 423560000,
    "stddev_ns": 3120000,
    "avg_ts": 1208.8,
    "stddev_ts": 8.9,
    "samples_ns": [420000000, 425000000, 425680000],
    "samples_ts": [1219.05, 1204.71, 1202.78],
}
"""A mid-2024 llama-bench -o json row (its per-backend booleans, no `backends`) of a CANN build."""

_ISSUE_8186 = """ggml_cuda_init: GGML_CUDA_FORCE_MMQ:    no
ggml_cuda_init: GGML_CUDA_FORCE_CUBLAS: no
ggml_cuda_init: found 1 ROCm devices:
  Device 0: AMD Radeon Pro W7800, compute capability 11.0, VMM: no
| model                          |       size |     params | backend    | ngl | threads |          test |              t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | ------: | ------------: | ---------------: |
| gemma2 27B Q6_K                |  24.30 GiB |    28.41 B | CUDA       | 999 |      16 |         pp512 |    404.84 ± 0.46 |
| gemma2 27B Q6_K                |  24.30 GiB |    28.41 B | CUDA       | 999 |      16 |         tg512 |     15.73 ± 0.01 |

build: 1c5eba6f (3260)
"""
"""llama.cpp issue #8186 (2024-06-28): a ROCm build's table, whose backend column says CUDA."""


def _stored(tmp_path: Path, name: str, text: str) -> list:
    """The records every reader of the store reads after importing `text` as file `name`."""
    src = tmp_path / name
    src.write_text(text)
    importer.import_files(ResultStore(tmp_path / "results"), [src], label="old")
    return ResultStore(tmp_path / "results").results()


@pytest.mark.parametrize(
    "flags",
    [
        {"gpu_info": "Ascend910B3"},  # CANN: every boolean false, `backends` derived as CPU
        {"cuda": True, "gpu_blas": True, "blas": True, "gpu_info": "AMD Radeon RX 7900 XTX"},  # HIP
    ],
    ids=["cann-cpu", "hip-cuda"],
)
def test_a_pre_registry_json_row_is_read_where_it_was_imported(tmp_path: Path, flags: dict) -> None:
    recs = _stored(tmp_path, "old.json", json.dumps([{**_ROW, **flags}], indent=2))
    assert [(r.test, r.avg_ts) for r in recs] == [("pp512", 1208.8)], recs


def test_a_pre_registry_rocm_table_named_cuda_is_imported(tmp_path: Path) -> None:
    recs = _stored(tmp_path, "w7800.md", _ISSUE_8186)
    assert sorted((r.test, r.avg_ts) for r in recs) == [("pp512", 404.84), ("tg512", 15.73)], recs
    assert {r.gpu_info for r in recs} == {"AMD Radeon Pro W7800"}


@pytest.mark.parametrize(
    "backends, gpu",
    [("CPU", "NVIDIA H100 80GB HBM3"), ("CUDA", "AMD Radeon RX 7900 XTX")],
)
def test_a_registry_era_row_is_still_held(tmp_path: Path, backends: str, gpu: str) -> None:
    row = {
        k: v
        for k, v in _ROW.items()
        if k not in ("cuda", "vulkan", "kompute", "metal", "sycl", "rpc", "gpu_blas", "blas")
    }
    row.update(build_number=5100, backends=backends, gpu_info=gpu)
    src = tmp_path / "new.jsonl"
    src.write_text(json.dumps(row) + "\n")
    with pytest.raises(importer.BadInput) as err:
        importer.import_files(ResultStore(tmp_path / "results"), [src], label="new")
    assert "the GPU named is not the one measured" in str(err.value), err.value
