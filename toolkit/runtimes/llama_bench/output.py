"""llama-bench: what it prints beside its rows, read tolerantly: `--progress` lines and the GPU-path
probe (`--list-devices`). Its rows are read by readers.py (every format) and judged by check.py; the
argument list is args.py.

Facts (flags, device lines) come from llama.cpp's tools/llama-bench/llama-bench.cpp and
shared/reference/llama-bench.md.
"""

from __future__ import annotations

import re
from typing import Any

from toolkit.core import backends

PROGRESS_RE = re.compile(r"llama-bench: benchmark (\d{1,9})/(\d{1,9}): (.*)")  # int()-safe counts


def progress_of(line: str) -> tuple[int, int, str] | None:
    """(test index, test count, phase) from a `--progress` stderr line, else None."""
    m = PROGRESS_RE.search(line)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def probe_facts(backend: str, stdout: str, stderr: str, *, exit_code: int | None = None) -> dict[str, Any]:
    """What `llama-bench --list-devices` said (the GPU-path probe before a sweep): the devices of
    `backend` listed on stdout, ggml's device lines from stderr, Vulkan's matrix-core mode of device 0.

    At llama.cpp 0c1e57098 the flag exists (tools/llama-bench/llama-bench.cpp: `--list-devices` calls
    common_print_available_devices() and exits 0) and prints `Available devices:` then one
    `  <Backend><N>: <description> (<total> MiB, <free> MiB free)` line per device (or `  (none)`) on
    stdout; ggml's own device lines go to stderr (ggml-vulkan.cpp ggml_vk_print_gpu_info: `ggml_vulkan: N =
    <name> (<driver>) | ... | matrix cores: <KHR_coopmat|NV_coopmat2|none>`; ggml-cuda.cu for ROCm:
    `  Device N: <name>, <gfx arch> ...`). Facts: the exit code, the listed devices, ggml's device
    lines, and for Vulkan the matrix-core mode of device 0 (`none` = scalar matmul shaders)."""
    prefix = backends.llama_name(backend) or backend
    listed = [
        ln.strip()
        for ln in (stdout + "\n" + stderr).splitlines()
        if ln.strip().startswith(prefix) and ":" in ln and not ln.strip().startswith("ggml_")
    ]
    ggml = [
        ln.strip() for ln in stderr.splitlines() if re.match(r"\s*(ggml_vulkan: \d+ = |Device \d+: )", ln)
    ]
    facts: dict[str, Any] = {"exit_code": exit_code, "devices": listed, "ggml_devices": ggml}
    if backend == "vulkan":
        m = next(
            (re.search(r"\| matrix cores: (\w+)", ln) for ln in ggml if ln.startswith("ggml_vulkan: 0 = ")),
            None,
        )
        facts["matrix_cores"] = m.group(1) if m else None
    return facts


def probe_problem(backend: str, facts: dict[str, Any], text: str, *, allow_software_gpu: bool) -> str | None:
    """Why the GPU path is unusable by the probe's `facts` (probe_facts; `text`: what it printed), or
    None: no device of `backend` listed, only software (CPU-type) ones without `allow_software_gpu`,
    or an exit code other than 0 after listing (at 0c1e57098 `--list-devices` exits 0: a driver that
    crashes at exit, e.g. 139, would crash the sweep too)."""
    prefix = backends.llama_name(backend) or backend
    listed = facts["devices"]
    if not listed:
        return (
            f"GPU-path probe: `llama-bench --list-devices` in the image shows no {prefix} device "
            f"(output: {text.strip()[-200:]!r})"
        )
    software = [ln for ln in listed if backends.is_software_device(ln)]
    if software and len(software) == len(listed) and not allow_software_gpu:
        return (
            f"only a software (CPU-type) {prefix} device is visible ({software[0]}); "
            "pass --allow-software-gpu to benchmark Mesa lavapipe deliberately"
        )
    if facts.get("exit_code") not in (0, None):
        return (
            f"GPU-path probe: `llama-bench --list-devices` exited {facts['exit_code']} "
            f"(output: {text.strip()[-200:]!r})"
        )
    return None


def probe_flags(backend: str, facts: dict[str, Any], gpus: list[dict[str, Any]]) -> list[str]:
    """Flags the GPU-path probe sets on every record of the run: `no-matrix-cores` for a Vulkan run on an
    RDNA4 GPU (gfx12xx: a passed card's KFD arch, or RADV's `GFX12xx` in ggml's device-0 line) whose
    ggml chose no matrix cores (`matrix cores: none`: scalar matmul shaders, far below what the card's
    WMMA does; Mesa < 25.1 or GGML_VK_DISABLE_COOPMAT=1). [] otherwise."""
    if backend != "vulkan" or facts.get("matrix_cores") != "none":
        return []
    dev0 = next((ln for ln in facts.get("ggml_devices") or [] if ln.startswith("ggml_vulkan: 0 = ")), "")
    rdna4 = bool(re.search(r"\bGFX12\d\d\b", dev0, re.I)) or any(
        str(g.get("gfx_target") or "").startswith("gfx12") for g in gpus
    )
    return ["no-matrix-cores"] if rdna4 else []
