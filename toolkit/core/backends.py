"""The one table of device backends: how each is named by llama.cpp, what marks a software or CPU
fallback device, and what a host must have to run it.

Every module that needs a backend's facts reads them here (report flags, the CPU-fallback check on
llama-bench output, import, the device pre-flight, doctor, reproduce), so a new backend (cuda, xpu)
is one entry. Sources: llama.cpp `ggml_backend_reg_name()` values as llama-bench writes them in
`backends` (tools/llama-bench/llama-bench.cpp at 0c1e57098: "CPU", "ROCm" for ggml-hip, "Vulkan",
"CUDA", "SYCL", "Metal"), old vintages' per-backend booleans (b3599: `cuda`, `vulkan`, `kompute`,
`metal`, `sycl`, `rpc`, `hip`), and the "no device" messages llama-bench can print at 0c1e57098:
ggml-vulkan.cpp:5283/5398 `ggml_vulkan: No devices found.`; ggml-cuda.cu:226 `ggml_cuda_init: failed to
initialize <GGML_CUDA_NAME>: <runtime error string>` (GGML_CUDA_NAME "ROCm" / "CUDA", ggml/include/ggml-cuda.h),
whose HIP error string for no device is `no ROCm-capable device is detected`. Not listed, because
llama-bench never prints them at that commit: "failed to initialize Vulkan" (in no file of the tree) and
"no usable GPU found" (common/arg.cpp, the --gpu-layers parser of the common tools, which llama-bench
does not use). tests/test_llamabench.py checks each message against the pinned tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    """One device backend.

    `name`: the image's backend (matrix.yaml `backend:`); `llama_name`: how llama-bench names it in
    `backends` and `--list-devices`; `gpu`: needs a GPU device passed to the container;
    `vendors`: the only GPU vendors its devices can be (CUDA: NVIDIA; ROCm: AMD, its rocBLAS; Metal:
    Apple), () where any vendor's GPU can be one of its devices (Vulkan, SYCL); `software_markers`:
    lower-case substrings of a device name that mean a software device on the CPU (Mesa lavapipe
    reports `llvmpipe (...)`); `fallback_messages`: log lines that mean the GPU was not used."""

    name: str
    llama_name: str
    gpu: bool
    software_markers: tuple[str, ...] = ()
    fallback_messages: tuple[str, ...] = ()
    vendors: tuple[str, ...] = ()  # the GPU vendors its devices can be (gpu_vendor); () any


BACKENDS: dict[str, Backend] = {
    "cpu": Backend("cpu", "CPU", gpu=False),
    "vulkan": Backend(
        "vulkan",
        "Vulkan",
        gpu=True,
        software_markers=("llvmpipe", "lavapipe"),
        fallback_messages=("ggml_vulkan: No devices found",),
    ),
    "rocm": Backend(
        "rocm",
        "ROCm",
        gpu=True,
        fallback_messages=("ggml_cuda_init: failed to initialize ROCm", "no ROCm-capable device is detected"),
        vendors=("amd",),
    ),
    "cuda": Backend(
        "cuda",
        "CUDA",
        gpu=True,
        fallback_messages=("ggml_cuda_init: failed to initialize CUDA", "no CUDA-capable device"),
        vendors=("nvidia",),
    ),
    "sycl": Backend("sycl", "SYCL", gpu=True),
    "metal": Backend("metal", "Metal", gpu=True, vendors=("apple",)),
}

# Old (2024) llama-bench releases wrote one boolean per backend instead of a `backends` string.
OLD_BACKEND_FLAGS: dict[str, str] = {
    "cuda": "CUDA",
    "vulkan": "Vulkan",
    "kompute": "Kompute",
    "metal": "Metal",
    "sycl": "SYCL",
    "rpc": "RPC",
    "hip": "ROCm",
}

SOFTWARE_MARKERS: tuple[str, ...] = tuple(
    dict.fromkeys(m for b in BACKENDS.values() for m in b.software_markers)
)
FALLBACK_MESSAGES: tuple[str, ...] = tuple(m for b in BACKENDS.values() for m in b.fallback_messages)


# The backends an image of this project is built for: `toolkit import --backend` takes these (a result of
# another backend, CUDA or Metal, is filed by what its rows say, or as `unknown` where they say nothing)
IMAGE_BACKENDS = ("cpu", "vulkan", "rocm")


def llama_name(backend: str) -> str | None:
    """llama.cpp's name of an image backend (`rocm` -> `ROCm`), None when unknown."""
    b = BACKENDS.get(backend)
    return b.llama_name if b else None


CPU_SIDE_NAMES = frozenset({"cpu", "blas", "accelerate", "amx"})
"""llama.cpp backend names that run on the host: a row naming only these ran on the CPU. Not `RPC`:
its devices are another host's (an rpc-server's CUDA, Vulkan or CPU device), which the row does not
name, so a row naming only RPC (and host backends) is `unknown`, never `cpu`."""

LLAMA_ALIASES = {"hip": "rocm", "mtl": "metal"}
"""Other spellings of a GPU backend's llama.cpp name (lower case) -> its llama_name, lower case: `HIP`
(older HIP builds), `MTL` (the Metal backend's registry name in llama.cpp builds from 2026 on:
`backends` reads `MTL,BLAS` / `BLAS,MTL` where it read `Metal,BLAS`)."""


def llama_names(names: str | None) -> list[str]:
    """The backends a llama-bench `backends` string names, lower case, aliases (LLAMA_ALIASES) read as
    the llama_name they spell: `"BLAS,MTL"` -> `["blas", "metal"]`."""
    order = [n.strip().lower() for n in (names or "").split(",") if n.strip()]
    return [LLAMA_ALIASES.get(n, n) for n in order]


def from_llama_names(names: str, devices: str | None = None) -> str:
    """The image backend of a llama-bench row's build, from its `backends` string (`"ROCm"`, `"CUDA,BLAS"`)
    and, where the row has one, its `devices` field (`-dev`: `ROCm0`, `Vulkan0/Vulkan1`): the device's backend
    when named, else the first GPU backend the string names (LLAMA_ALIASES: HIP is ROCm, MTL is Metal), else
    `cpu` when it names only host backends, else `unknown` (an empty or unrecognised string): never a guess. A
    GPU build's row run with `-dev none` keeps the build's backend (the CPU-fallback rule marks it)."""
    order = llama_names(names)
    gpu = {b.llama_name.lower(): b.name for b in BACKENDS.values() if b.gpu}
    dev = str(devices or "").strip().lower()  # a hand-edited row's `"devices": 1` is no text
    for name, backend in gpu.items():
        if dev.startswith(name):
            return backend
    for alias, name in LLAMA_ALIASES.items():  # a device of an aliased backend: `MTL0`
        if dev.startswith(alias) and name in gpu:
            return gpu[name]
    for n in order:
        if n in gpu:
            return gpu[n]
    return "cpu" if order and all(n in CPU_SIDE_NAMES for n in order) else "unknown"


def is_software_device(text: str | None) -> bool:
    """True when a device name (llama-bench `gpu_info`, a `--list-devices` line) is a software GPU."""
    low = (text or "").lower()
    return any(m in low for m in SOFTWARE_MARKERS)


def cpu_fallback_reason(
    image_backend: str, row_backends: str | None, gpu_info: str | None, log: str = ""
) -> str | None:
    """Why a run of an image built for `image_backend` must not count as a GPU result, or None: the one
    CPU-fallback rule of `toolkit bench` (each row as it arrives) and of the report (stored records, imports
    included). A GPU backend's run fell back to the CPU when its log carries a "no device" message, when the
    row's `backends` (given) lacks the backend, or when the row recorded a `gpu_info` and it is empty
    (ggml-vulkan skips a CPU-type device and runs on the CPU while still writing `backends: Vulkan`).
    `gpu_info` None means the row did not record one: not a fallback by itself."""
    expected = llama_name(image_backend)
    if expected is None or not BACKENDS[image_backend].gpu:
        return None
    low = log.lower()
    for pat in FALLBACK_MESSAGES:
        if pat.lower() in low:
            return f"log shows a CPU fallback: {pat!r}"
    if row_backends and expected.lower() not in llama_names(row_backends):
        return f"backends is {row_backends!r}, expected {expected}"
    if gpu_info is not None and not gpu_info.strip():
        return f"gpu_info is empty although the {expected} backend was expected (silent CPU fallback)"
    return None


_VENDOR_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nvidia", re.compile(r"\b(?:nvidia|geforce|quadro|tesla)\b", re.IGNORECASE)),
    ("amd", re.compile(r"\b(?:amd|radeon|instinct)\b", re.IGNORECASE)),
    ("intel", re.compile(r"\bintel\b", re.IGNORECASE)),
    ("apple", re.compile(r"\bapple\b", re.IGNORECASE)),
)
"""The words a GPU device description names its vendor by (CUDA `NVIDIA H200`, ROCm `AMD Radeon AI PRO
R9700` or `Radeon RX 7900 XTX`, RADV `AMD Radeon ... (RADV GFX1201)`, Metal `Apple M2 Max`)."""


TRANSLATED = re.compile(r"\bzluda\b", re.IGNORECASE)
"""A device named through a translation layer that runs one vendor's API on another's GPU: ZLUDA runs a
CUDA build on an AMD GPU and names it `AMD Radeon RX 7900 XTX [ZLUDA]` (vosen/ZLUDA): a real run."""


VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "apple": "Apple"}
"""How a message names each vendor gpu_vendor tells."""


def gpu_vendor(description: str) -> str | None:
    """The vendor one GPU device description names (`nvidia`, `amd`, `intel`, `apple`), None where it
    names none or several (llvmpipe, a generic `Graphics`): never a guess. The first 256 characters are
    read (a name is not longer)."""
    text = description[:256]
    found = {vendor for vendor, words in _VENDOR_WORDS if words.search(text)}
    return found.pop() if len(found) == 1 else None


def device_contradiction(backends_field: str, gpu_info: str) -> str | None:
    """Why GPU devices `gpu_info` (llama-bench's descriptions joined with ", ") cannot be those of a build
    whose `backends` are `backends_field`, None when they can: every device whose vendor is named (gpu_vendor)
    must be one its GPU backends run on (Backend.vendors: a ROCm build on an NVIDIA H200 cannot run). A
    backend this table does not bound (Vulkan, SYCL, one it does not know) allows any device. A row naming
    only host backends (CPU_SIDE_NAMES: `CPU`, `BLAS`) names no GPU device at all (only a GPU backend
    registers devices of type GPU): one that does is a contradiction; its empty gpu_info on a GPU image is
    cpu_fallback_reason's."""
    allowed: set[str] = set()
    names = llama_names(backends_field)  # HIP is ROCm, MTL is Metal (LLAMA_ALIASES)
    if names and all(n in CPU_SIDE_NAMES for n in names) and (gpus := _devices(gpu_info)):
        return (
            f"gpu_info names {gpus[0][:64]!r}, a GPU, but backends {backends_field[:40]!r} are host backends "
            "only: llama-bench lists the GPU devices of its GPU backends, and a build with none lists none "
            "(a GPU build names its backend, e.g. CUDA,BLAS): the GPU named is not the one measured"
        )
    for name in names:
        if name in CPU_SIDE_NAMES:
            continue
        b = next((b for b in BACKENDS.values() if b.llama_name.lower() == name), None)
        if b is None or not b.vendors:
            return None
        allowed.update(b.vendors)
    if not allowed:
        return None
    for device in _devices(gpu_info):
        vendor = gpu_vendor(device)
        if vendor is not None and vendor not in allowed and not TRANSLATED.search(device):
            said = " or ".join(sorted(VENDOR_NAMES[v] for v in allowed))
            return (
                f"gpu_info names {device[:64]!r}, an {VENDOR_NAMES[vendor]} GPU, which a {backends_field[:40]!r} "
                f"build cannot run on (its devices are {said} GPUs): the GPU named is not the one measured"
            )
    return None


MAX_DEVICES = {"cuda": 16, "rocm": 16, "vulkan": 16}
"""The most devices one of llama.cpp's GPU backends registers (by llama_name, lower case):
GGML_CUDA_MAX_DEVICES (ggml/include/ggml-cuda.h, which the HIP build of ROCm compiles too) and
GGML_VK_MAX_DEVICES (ggml-vulkan.h), 16 each. Backends not named here (SYCL, RPC, one this table does
not know) are not bounded."""


def device_count_problem(backends_field: str, gpu_info: str) -> str | None:
    """Why `gpu_info` names more devices than the GPU backends of `backends_field` can register
    together (MAX_DEVICES each; one backend the table does not bound: no bound), None when it does
    not: 64 H200s in one CUDA row are no run of llama.cpp (a roofline summed over them holds nothing)."""
    most = 0
    for name in llama_names(backends_field):
        if name in CPU_SIDE_NAMES:
            continue
        if name not in MAX_DEVICES:
            return None
        most += MAX_DEVICES[name]
    n = len(_devices(gpu_info))
    if most and n > most:
        return (
            f"gpu_info names {n} devices, a {backends_field[:40]!r} build registers at most {most} "
            "(GGML_CUDA_MAX_DEVICES, GGML_VK_MAX_DEVICES): not the devices of this run"
        )
    return None


def _devices(gpu_info: str) -> list[str]:
    """gpu_info's device descriptions: split on ", " outside parentheses (a description may hold one:
    `llvmpipe (LLVM 19.1.7, 256 bits)`), at most the first 64 KiB read."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in gpu_info[:65536]:
        depth += (c == "(") - (c == ")" and depth > 0)
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur).strip())
    return [d for d in out if d]
