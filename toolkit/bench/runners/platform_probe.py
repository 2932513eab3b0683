"""The GPU-path probe of the vLLM and SGLang images: before the sweep, a short `python3 -c` in the image,
with the run's devices and environment, asks the runtime's OWN platform detection what it sees. Its
facts are stored with every record of the run (`gpu_probe`, as the llama-bench probe's are); a GPU
image (rocm backend) whose runtime does not detect ROCm, or detects no device, fails at once with
the reason, before any test runs.

What the sources read (the pinned releases' own code; tests/test_gpu_probe.py reads it there):

- vLLM 0.16.0 / 0.28.0: `vllm.platforms.current_platform` (vllm/platforms/__init__.py `__getattr__`:
  resolve_current_platform_cls_qualname() runs the builtin plugins; `rocm_platform_plugin()` asks
  amdsmi alone, 0.16.0 lines 110-128), its class, `_enum` (interface.py `PlatformEnum`: CUDA, ROCM,
  TPU, XPU, CPU, OOT, UNSPECIFIED), `device_name` (rocm.py `device_name: str = "rocm"`, cpu.py
  `"cpu"`; UnspecifiedPlatform has none), the platform's own `device_count()` (rocm.py: 0.16.0
  `cuda_device_count_stateless()`, 0.28.0 `_rocm_device_count_stateless(...)`; cpu.py has none), and
  on a ROCm torch what amdsmi itself says (processor handles, or its error: vllm#40081).
- SGLang 0.5.15: `sglang.srt.platforms.current_platform` (`_resolve_platform()`: RocmSRTPlatform when
  `torch.cuda.is_available() and torch.version.hip`), its `_enum` / `device_name`, and
  `sglang.srt.utils.common.get_device()` / `get_device_count()` (what ServerArgs uses when no
  --device is given).
- torch: `torch.version.hip`, `torch.cuda.device_count()` (every image).
"""

from __future__ import annotations

from typing import Any

from toolkit.core import invocation, jsonsafe
from toolkit.engine.api import RunSpec
from toolkit.runtimes.vllm.args import VLLM_40081

MARK = "TOOLKIT_GPU_PROBE "
"""Prefix of the one stdout line that carries the facts (the runtimes log to the same streams)."""

_COMMON_HEAD = """
import json
o = {}
def err(e):
    return (type(e).__name__ + ": " + str(e))[:300]
"""

_TORCH = """
try:
    import torch
    o["torch_version"] = torch.__version__
    o["torch_hip"] = torch.version.hip
    o["torch_device_count"] = torch.cuda.device_count()
except Exception as e:
    o["torch_error"] = err(e)
"""


def _platform(runtime: str, module: str, then: str) -> str:
    """The source lines that read `module`'s lazily resolved `current_platform` (class, PlatformEnum
    name), then `then` (indented 4), in one try: what raises becomes `error`."""
    return f"""
o["runtime"] = "{runtime}"
try:
    import {runtime}
    o["version"] = {runtime}.__version__
    from {module} import current_platform as p
    c = type(p)
    o["platform_class"] = c.__module__ + "." + c.__qualname__
    o["platform"] = p._enum.name
{then}
except Exception as e:
    o["error"] = err(e)
"""


_VLLM = _platform(
    "vllm",
    "vllm.platforms",
    """    o["device_name"] = getattr(c, "device_name", None)
    o["device_count"] = c.device_count() if hasattr(c, "device_count") else None""",
)

_AMDSMI = """
if o.get("torch_hip"):
    try:
        import amdsmi
        amdsmi.amdsmi_init()
        try:
            o["amdsmi_processors"] = len(amdsmi.amdsmi_get_processor_handles())
        finally:
            amdsmi.amdsmi_shut_down()
    except Exception as e:
        o["amdsmi_error"] = err(e)
"""

_SGLANG = (
    _platform(
        "sglang",
        "sglang.srt.platforms",
        """    o["device_name"] = p.device_name
    from sglang.srt.utils.common import get_device, get_device_count
    o["device_count"] = get_device_count()""",
    )
    + """
try:
    o["device"] = get_device()
except Exception as e:
    o["device_error"] = err(e)
"""
)

_TAIL = f"""
print({MARK!r} + json.dumps(o), flush=True)
"""

SOURCES = {
    "vllm": _COMMON_HEAD + _VLLM + _TORCH + _AMDSMI + _TAIL,
    "sglang": _COMMON_HEAD + _SGLANG + _TORCH + _TAIL,
}


def probe_command(runtime: str) -> list[str]:
    """The argv run in the image (`python3 -c <source>`): prints one `TOOLKIT_GPU_PROBE {json}` line
    and exits 0 whatever it finds (an import error is a fact, `error`). runtime: vllm | sglang."""
    return ["python3", "-c", SOURCES[runtime]]


def parse_probe(stdout: str) -> dict[str, Any]:
    """The facts of the last `TOOLKIT_GPU_PROBE {json}` line of `stdout` ({} when there is none or it is
    not a JSON object). Keys (absent when not read): runtime, version, platform_class, platform (the
    PlatformEnum name: ROCM, CPU, UNSPECIFIED...), device_name, device_count (the runtime's own count;
    None where its platform has none), device (SGLang's get_device()), torch_version, torch_hip,
    torch_device_count, amdsmi_processors / amdsmi_error (vLLM on a ROCm torch), error / torch_error /
    device_error (`Type: message` of what raised)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            try:
                data = jsonsafe.parse(line[len(MARK) :])
            except jsonsafe.JsonProblem:
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def _count(facts: dict[str, Any]) -> int | None:
    """GPUs the runtime sees: its own count, else torch's (None: neither was read)."""
    for key in ("device_count", "torch_device_count"):
        v = facts.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def verdict(runtime: str, backend: str, facts: dict[str, Any], output: str = "") -> str | None:
    """Why an image of `backend` cannot run on what its probe saw, or None. Only a rocm-backend image is
    judged (a CPU image runs on the CPU platform by design): its runtime must detect the ROCm platform
    and at least one device. The reason is one line: what the runtime detected, what torch and amdsmi
    saw, and for vLLM not detecting ROCm while torch sees a GPU the known upstream bug (VLLM_40081) with
    what to do (torch seeing none: the container reaches no GPU). `output`:
    the probe's output tail, quoted when no facts line was printed."""
    if backend != "rocm":
        return None
    name = {"vllm": "vLLM", "sglang": "SGLang"}.get(runtime, runtime)
    where = (
        "vllm.platforms.current_platform" if runtime == "vllm" else "sglang.srt.platforms.current_platform"
    )
    if not facts:
        return (
            f"GPU-path probe: the {name} platform probe printed no facts (output: {output.strip()[-200:]!r})"
        )
    seen = [
        f"torch {facts.get('torch_version', '?')} (HIP {facts.get('torch_hip')}) sees "
        f"{facts.get('torch_device_count', '?')} GPU(s)"
    ]
    if "amdsmi_processors" in facts:
        seen.append(f"amdsmi sees {facts['amdsmi_processors']} processor(s)")
    elif "amdsmi_error" in facts:
        seen.append(f"amdsmi fails: {facts['amdsmi_error']}")
    said = "; ".join(seen)
    if facts.get("error"):
        why = f"importing {name}'s platform ({where}) failed: {facts['error']}"
    elif facts.get("platform") != "ROCM":
        why = f"{name}'s own platform detection ({where}) sees {facts.get('platform')} ({facts.get('platform_class')}), not ROCM"
    elif not _count(facts):
        why = f"{name} detects ROCm but sees {_count(facts)} GPU(s)"
    else:
        return None
    note = ""
    if facts.get("torch_device_count") == 0:  # HIP itself reaches no GPU: not the runtime's detection
        note = f"; the container reaches no GPU at all: check the devices and group ids it gets (`{invocation.command('doctor')}`)"
    elif runtime == "vllm" and facts.get("platform") != "ROCM":  # HIP sees the card, vLLM does not
        note = f"; this is {VLLM_40081}"
    return f"GPU-path probe: {why}; {said}{note}"


def run_probe(ctx: Any, spec: RunSpec, runtime: str) -> tuple[str | None, dict[str, Any]]:
    """Run the probe in `spec` (the runner's own container spec for this run: same image, devices,
    mounts and environment; its command is replaced by probe_command) through ctx.engine (a
    RunContext's). Returns (verdict, facts + `command` (the docker argv) + `exit_code`)."""
    spec.command = probe_command(runtime)
    out = ctx.engine.run_container(spec, timeout=300)
    facts = parse_probe(out.stdout)
    facts["exit_code"] = out.exit_code
    facts["command"] = ctx.engine.run_command(spec)
    why = verdict(
        runtime,
        ctx.spec.backend,
        {k: v for k, v in facts.items() if k not in ("exit_code", "command")},
        out.stdout + out.stderr,
    )
    if why is None and out.exit_code != 0 and ctx.spec.backend == "rocm":
        why = f"GPU-path probe: python3 in the image exited {out.exit_code}: {(out.stderr or out.stdout).strip()[-200:]!r}"
    return why, facts
