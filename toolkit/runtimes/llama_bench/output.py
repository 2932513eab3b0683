"""llama-bench: what it prints, read tolerantly (the argument list is args.py).

Facts (flags, JSONL fields and their drift, micro-batch clamping) come from llama.cpp's
tools/llama-bench/llama-bench.cpp and shared/reference/llama-bench.md. One process measures the
whole crossed matrix for one (image, model): list-valued flags are crossed by llama-bench itself.
"""

from __future__ import annotations

import re
from typing import Any

from toolkit.core import backends
from toolkit.runtimes.llama_bench import readers
from toolkit.runtimes.llama_bench.check import as_float, as_int, check_row

PROGRESS_RE = re.compile(r"llama-bench: benchmark (\d+)/(\d+): (.*)")


def parse_jsonl(text: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """Objects from llama-bench stdout (llama_bench.readers.read_jsonl: log lines skipped, a line that
    starts like a record but does not parse noted in `skipped`)."""
    return [r.fields for r in readers.read_jsonl(text, skipped)]


def backends_of(raw: dict[str, Any]) -> str:
    """The `backends` string, derived from old per-backend booleans when absent ("CPU" when they are
    all false); "" when the row says nothing of its backend (a markdown table without the column)."""
    if raw.get("backends"):
        return str(raw["backends"])
    if raw.get("backend"):
        return str(raw["backend"])
    flags = [k for k in backends.OLD_BACKEND_FLAGS if k in raw]
    found = [backends.OLD_BACKEND_FLAGS[k] for k in flags if raw.get(k) in (True, 1, "1", "true")]
    return ",".join(found) or ("CPU" if flags else "")


def test_name(n_prompt: int, n_gen: int, n_depth: int = 0) -> str:
    """Conventional llama-bench test names: pp512, tg128, pp512+tg128, pp512 @ d4096."""
    if n_prompt and n_gen:
        name = f"pp{n_prompt}+tg{n_gen}"
    elif n_prompt:
        name = f"pp{n_prompt}"
    else:
        name = f"tg{n_gen}"
    return f"{name} @ d{n_depth}" if n_depth else name


def axis_of(n_prompt: int, n_gen: int) -> str:
    if n_prompt and n_gen:
        return "mixed"
    return "prefill" if n_prompt else "decode"


def effective_ubatch(
    n_ubatch: int | None, n_batch: int | None, n_prompt: int, n_gen: int, n_depth: int
) -> int | None:
    """min(n_ubatch, n_batch, n_prompt + n_gen + n_depth): llama.cpp sizes the context to the test
    and clamps n_batch to it and n_ubatch to n_batch, while still reporting the asked n_ubatch."""
    if n_ubatch is None:
        return None
    ctx = n_prompt + n_gen + n_depth
    vals = [n_ubatch] + ([n_batch] if n_batch else []) + ([ctx] if ctx else [])
    return min(vals)


def normalize(raw: dict[str, Any]) -> dict[str, Any]:
    """Canonical fields from one llama-bench record of any vintage (unknown fields stay in raw).

    Returns keys: test, axis, n_prompt, n_gen, n_depth, n_batch, n_ubatch, n_ubatch_effective,
    flash_attn (int: -1 auto, 0, 1), n_gpu_layers, avg_ts, stddev_ts (tokens/s), samples_ts,
    backends, gpu_info, build_commit.
    """
    n_prompt = as_int(raw.get("n_prompt"), 0) or 0
    n_gen = as_int(raw.get("n_gen"), 0) or 0
    n_depth = as_int(raw.get("n_depth"), 0) or 0
    n_batch = as_int(raw.get("n_batch"))
    n_ubatch = as_int(raw.get("n_ubatch"))
    fa = raw.get("flash_attn")
    if isinstance(fa, str):
        fa = {"on": 1, "off": 0, "auto": -1, "true": 1, "false": 0}.get(fa.lower(), as_int(fa))
    samples = raw.get("samples_ts") or []
    if isinstance(samples, str):  # csv keeps arrays as "[1.0, 2.0]" or "1.0;2.0"
        samples = [float(x) for x in re.findall(r"[-+0-9.eE]+", samples)]
    return {
        "test": test_name(n_prompt, n_gen, n_depth),
        "axis": axis_of(n_prompt, n_gen),
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": n_depth,
        "n_batch": n_batch,
        "n_ubatch": n_ubatch,
        "n_ubatch_effective": effective_ubatch(n_ubatch, n_batch, n_prompt, n_gen, n_depth),
        "flash_attn": as_int(fa),
        "n_gpu_layers": as_int(raw.get("n_gpu_layers")),
        "avg_ts": as_float(raw.get("avg_ts")),
        "stddev_ts": as_float(raw.get("stddev_ts")),
        "samples_ts": [float(x) for x in samples],
        "backends": backends_of(raw),
        "gpu_info": str(raw.get("gpu_info") or ""),
        "build_commit": str(raw.get("build_commit") or "") or None,
    }


def progress_of(line: str) -> tuple[int, int, str] | None:
    """(test index, test count, phase) from a `--progress` stderr line, else None."""
    m = PROGRESS_RE.search(line)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def judge_row(
    raw: dict[str, Any], backend: str, *, allow_software_gpu: bool, log: str = ""
) -> tuple[dict[str, Any], str | None]:
    """A row `toolkit bench` ran on a `backend` image: (its fields, `normalize`; why it is no result or
    None), the first of: not a measurement (check_row, as every import), a CPU fallback (on the row or
    in `log`, all the container printed up to it), a software device without `allow_software_gpu`."""
    bad = check_row(raw)  # first: normalize assumes what it checks (samples a list of numbers)
    try:
        fields = normalize(raw)
    except (TypeError, ValueError) as err:  # a row check_row let through that normalize cannot read
        fields = normalize({k: v for k, v in raw.items() if k not in ("samples_ts", "samples_ns")})
        bad = bad or f"{err}"[:160]
    gpu_info = raw.get("gpu_info")
    fallback = cpu_fallback_of(backend, raw, fields["backends"], log)
    software = (
        not allow_software_gpu and backend != "cpu" and backends.is_software_device(str(gpu_info or ""))
    )
    if bad:
        return fields, f"row is not a measurement: {bad}"
    if fallback:
        return fields, f"CPU fallback: {fallback}"
    if software:
        return fields, f"ran on a software device ({gpu_info}) without --allow-software-gpu"
    return fields, None


def cpu_fallback_of(
    image_backend: str, raw: dict[str, Any], backends_field: str | None, log: str = ""
) -> str | None:
    """The one CPU-fallback rule (backends.cpu_fallback_reason) for a llama-bench row: a "no device"
    message in the `log` it was printed with, its `backends` (normalised) and its `gpu_info` where the
    row recorded one; and a row run with `-dev none` (its `devices` field) on a GPU build ran on the CPU."""
    if log and (said := backends.cpu_fallback_reason(image_backend, None, None, log)):
        return said
    if (
        str(raw.get("devices") or "").strip().lower() == "none"
        and backends.BACKENDS.get(image_backend, backends.BACKENDS["cpu"]).gpu
    ):
        return "run with -dev none (devices: none): on the CPU, not the GPU"
    gpu = raw.get("gpu_info")
    return backends.cpu_fallback_reason(
        image_backend, backends_field or None, None if gpu is None else str(gpu)
    )


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
    None: no device of `backend` listed, or only software (CPU-type) ones without `allow_software_gpu`."""
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
