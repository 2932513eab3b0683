"""What the vLLM / SGLang GPU-path probe (toolkit/bench/runners/platform_probe.py) prints, for tests.

CONSTRUCTED, not captured: no AMD GPU exists where these tests were written, so the ROCm lines are
built from the pinned releases' code (the class names, `_enum` names and `device_name` values of
vllm/platforms/rocm.py and interface.py at 0.16.0, sglang/srt/platforms at 0.5.15) with one R9700's
count. The one captured output is tests/data/vllm-0.28.0-cpu-gpu-probe.stdout (the vLLM CPU image here).
"""

from __future__ import annotations

import json

from toolkit.bench.runners.platform_probe import MARK


def line(**facts) -> str:
    return MARK + json.dumps(facts) + "\n"


TORCH_ROCM = {"torch_version": "2.9.1+rocm7.2.1", "torch_hip": "7.2.26015", "torch_device_count": 1}

VLLM_ROCM_OK = line(
    runtime="vllm",
    version="0.16.0",
    platform_class="vllm.platforms.rocm.RocmPlatform",
    platform="ROCM",
    device_name="rocm",
    device_count=1,
    amdsmi_processors=1,
    **TORCH_ROCM,
)
# vllm#40081: HIP works (torch sees the card), amdsmi does not, so vLLM resolves UnspecifiedPlatform
VLLM_ROCM_40081 = line(
    runtime="vllm",
    version="0.16.0",
    platform_class="vllm.platforms.interface.UnspecifiedPlatform",
    platform="UNSPECIFIED",
    device_name=None,
    device_count=None,
    amdsmi_processors=0,
    **TORCH_ROCM,
)
SGLANG_ROCM_OK = line(
    runtime="sglang",
    version="0.5.15",
    platform_class="sglang.srt.platforms.rocm.RocmSRTPlatform",
    platform="ROCM",
    device_name="rocm",
    device_count=1,
    device="cuda",
    **TORCH_ROCM,
)
# no /dev/kfd reachable: torch sees no device, SGLang falls back to its base SRTPlatform
SGLANG_NO_GPU = line(
    runtime="sglang",
    version="0.5.15",
    platform_class="sglang.srt.platforms.interface.SRTPlatform",
    platform="UNSPECIFIED",
    device_name="unknown",
    device_count=0,
    device_error="RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available.",
    torch_version="2.9.1+rocm7.2.1",
    torch_hip="7.2.26015",
    torch_device_count=0,
)
