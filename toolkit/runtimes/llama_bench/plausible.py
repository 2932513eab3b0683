"""What a llama-bench row's model fields allow it to have measured, on any hardware: the model's size
against its parameter count (bytes a weight), the tokens a second no machine computes, and the GPU
devices its backend can run on. Read by the one validity pass (validity.check_row), so by every import
format, `toolkit bench`'s own rows and every stored-record reader (record_check.contradiction).

Facts (llama.cpp src/llama-model.cpp at 0c1e57098): llama-bench's `model_size` is llama_model_size, the
sum of ggml_nbytes over the model's tensors, and `model_n_params` llama_model_n_params, the sum of their
ggml_nelements: their ratio is the mean bytes a weight, which no ggml tensor type puts below IQ1_S's
1.5625 bits (50 bytes a block of 256) nor above F64's 8 bytes."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from toolkit.core import backends
from toolkit.core.text import counted
from toolkit.runtimes.llama_bench.check import forward_passes, quantity
from toolkit.runtimes.llama_bench.settings_check import gpu_devices

MIN_BYTES_PER_PARAM = 0.18
"""The fewest bytes a weight a model's tensors take on average: IQ1_S, ggml's smallest type, is
1.5625 bits (0.195 bytes) a weight; 0.18 leaves an -o md table's two decimals (`1.52 MiB`, `0.79 M`)
room. Fewer is a model_size or model_n_params that is not the model's (an edited or mixed-up row)."""

MAX_BYTES_PER_PARAM = 8.5
"""The most bytes a weight on average: F64 (8 bytes), ggml's widest type, with the md table's rounding."""

MIN_ACTIVE_SHARE = 0.03
"""The smallest share of its weights any known model computes with per token (a mixture of experts:
Kimi K2 32B of 1T, 3.2 %; Qwen3-Next-80B-A3B 3.75 %; Llama 4 Maverick 4.25 %; a dense model 100 %):
what a row is held to where its model type states no share (least_share), and the roofline's floor of
an MoE of unknown share. A type taken as dense only for want of an MoE marker (stated_share's "dense")
may be an MoE the markers lack: its roofline is called above the peak only beyond 1 / this share."""

MAX_FLOP_S = 1e17
"""The most FLOP/s any machine llama-bench runs on computes, 100 PFLOP/s: eight NVIDIA B200 give 8 x
2.25 PFLOP/s of dense FP16 (8 x 9 at dense FP4); every token of a test (prompt or generated) costs at
least 2 FLOPs per active parameter (a multiply-add), so a row implying more is no measurement (a CPU
pp2048 of 272 million tok/s of a 30B model: 1.6 exaFLOP/s)."""

DEVICE_FLOP_S = 5e16
"""The most FLOP/s one GPU device computes, 50 PFLOP/s (NVIDIA's Rubin at NVFP4; a B300's dense FP4 is 15):
a row whose gpu_info or devices name N devices is held to N x this, at most MAX_FLOP_S (held_by)."""

DEVICE_BYTES_S = 2.5e13
"""The most bytes a second one GPU device reads from memory, 25 TB/s (NVIDIA's Rubin HBM4 is 22; a B200
or MI355X has 8, an H200 4.8, an R9700 0.64): a row whose gpu_info or devices name N devices is held to
N x this, at most MAX_BYTES_S (held_by)."""

MAX_BYTES_S = 1.6e14
"""The most bytes a second any machine llama-bench runs on reads from memory, 160 TB/s: its 16 GPU
devices a backend registers at most (backends.MAX_DEVICES), each at 10 TB/s, all reading at once
(`-sm row`). Each forward pass (a generated token, a micro-batch of the prompt) reads at least
least_share of the model's bytes, one pass after another, so a decode of a 377 GiB model at 50,000
tok/s (600 TB/s at 3 %) is no measurement,
whatever GPU its row names or does not name (an md table has no gpu_info: no roofline, analysis.roofline);
a row that names its devices is held to what they read (held_by: a GPU product without figures gets
no roofline, yet decodes no faster than the fastest card)."""


# Active parameters / total parameters of known MoE model types (llama.cpp `model_type` prefix).
KNOWN_ACTIVE_SHARE: dict[str, float] = {
    "qwen3moe 30b.a3b": 3.3 / 30.5,  # Qwen3-30B-A3B model card: 30.5B total, 3.3B activated
    "qwen3moe 235b.a22b": 22.0 / 235.0,  # Qwen3-235B-A22B model card
    "gpt-oss 20b": 3.6 / 21.0,  # gpt-oss-20b model card: 21B total, 3.6B active
    "gpt-oss 120b": 5.1 / 117.0,  # gpt-oss-120b model card: 117B total, 5.1B active
}
# Bounded digit runs that cannot start inside a number: linear on a stored record's text (`(\d+...)` was
# retried from every digit of a long run: quadratic).
_NBA_RE = re.compile(r"(?<![\d.])(\d{1,6}(?:\.\d{1,6})?)B\.A(\d{1,6}(?:\.\d{1,6})?)B", re.IGNORECASE)
_MOE_MARKERS = (
    "moe",
    "mixtral",
    "deepseek2",
    "gpt-oss",
    "a3b",
    "x7b",
    "x22b",
    "llama4",
    "dbrx",
    "grok",
    "dots1",
    "jamba",
    "arctic",
)
DENSE_ARCHS = frozenset(
    "qwen2 qwen2vl qwen3 qwen3vl qwen35 gemma gemma2 gemma3 gemma3n phi2 starcoder2 command-r cohere2 olmo2 "
    "exaone exaone4 internlm2 glm4 minicpm3 falcon gpt2 stablelm seed_oss smollm3 apertus deci baichuan mamba "
    "mamba2".split()
)
"""llama.cpp architectures (model_type's first word) whose loader makes no expert tensor (`*_exps`) at
0c1e57098 (src/models/<arch>.cpp: no ffn_*_exps, no build_moe_ffn): every token reads every weight, so
a decode beyond the GPU's bandwidth is beyond its peak, not an MoE the marker list lacks. `llama`,
`phi3`, `granite`, `mistral3`, `gemma4` are not here: their loaders take experts (Mixtral is `llama`)."""
# `17Bx16E`, `17Bx128E` (llama.cpp's type name of Llama 4 Scout / Maverick): N experts of a size
_EXPERTS_RE = re.compile(r"(?<![\d.])\d{1,6}(?:\.\d{1,6})?bx\d{1,4}e\b")


@dataclass(frozen=True)
class ActiveShare:
    """Share of the weights used per token: by bytes (decode reads) and by parameters (prefill FLOPs)."""

    bytes_share: float
    params_share: float
    source: (
        str  # gguf | table | model-type | dense-arch | dense | least (ceiling only: an unknown MoE's floor)
    )


def stated_share(model_type: object) -> ActiveShare | None:
    """The share of its weights a model computes with per token, as llama-bench's `model_type` (any
    case) states it: a known type's (KNOWN_ACTIVE_SHARE, source "table"), llama.cpp's `NB.AMB` size
    (`30B.A3B` -> 3/30, "model-type"), 1 for a type with no MoE marker ("dense-arch" where its
    architecture is one of DENSE_ARCHS, else "dense": an MoE the markers lack may hide behind it);
    None for an MoE whose share it does not state (`deepseek2 671B`, `llama4 17Bx16E`)."""
    mtype = str(model_type or "").lower()
    for prefix, share in KNOWN_ACTIVE_SHARE.items():
        if mtype.startswith(prefix):
            return ActiveShare(share, share, "table")
    m = _NBA_RE.search(mtype)
    if m and float(m.group(1)) > 0 and float(m.group(2)) > 0:
        share = float(m.group(2)) / float(m.group(1))
        return ActiveShare(share, share, "model-type")
    if mtype and not any(k in mtype for k in _MOE_MARKERS) and not _EXPERTS_RE.search(mtype):
        return ActiveShare(1.0, 1.0, "dense-arch" if mtype.split()[0] in DENSE_ARCHS else "dense")
    return None


def least_share(fields: dict[str, Any]) -> float:
    """The fewest of its weights row `fields`' model can read and compute with per token (a share): the
    one its model_type states (stated_share), else MIN_ACTIVE_SHARE (a share not stated, or a "dense"
    type that may be an unknown MoE)."""
    share = stated_share(fields.get("model_type"))
    return share.params_share if share and share.source != "dense" else MIN_ACTIVE_SHARE


def held_by(fields: dict[str, Any]) -> tuple[float, float, str]:
    """(bytes/s, FLOP/s, what reads and computes them) the row `fields` is held to: N x DEVICE_BYTES_S and
    N x DEVICE_FLOP_S (at most MAX_BYTES_S, MAX_FLOP_S) where its gpu_info or devices name N GPU devices
    (settings_check.gpu_devices), MAX_BYTES_S and MAX_FLOP_S (any machine) where they name none (a CPU
    row, an md table, RPC)."""
    n = gpu_devices(fields)
    if not n:
        return MAX_BYTES_S, MAX_FLOP_S, "any machine"
    return (
        min(n * DEVICE_BYTES_S, MAX_BYTES_S),
        min(n * DEVICE_FLOP_S, MAX_FLOP_S),
        f"the {counted(n, 'GPU device')} the row names",
    )


def model_problem(fields: dict[str, Any], rate: float | None) -> str | None:
    """Why a row's model fields contradict each other or its speed, None when they do not (or are not
    given): model_size over model_n_params outside MIN_BYTES_PER_PARAM..MAX_BYTES_PER_PARAM bytes a
    weight (a size edited down hides a decode beyond the GPU's bandwidth: the roofline reads it), or
    `rate` (tok/s, any test) implying more FLOP/s than the row's devices compute (held_by) at 2 FLOPs per
    token and active parameter, at least least_share of them, or a decode reading more bytes/s than
    they read (_reads_too_fast). Each repetition is held to them, not only their mean: `rate` is the
    fastest of it and samples_ts (a sample at twice the limit beside a slow one averaged inside it)."""
    size, params = quantity(fields.get("model_size")), quantity(fields.get("model_n_params"))
    rate = _fastest(rate, fields.get("samples_ts"))
    if size and params and size > 0 and params > 0:
        per = size / params
        if not MIN_BYTES_PER_PARAM <= per <= MAX_BYTES_PER_PARAM:
            return (
                f"model_size {counted(size, 'byte')} over model_n_params {params} is {per:.3g} bytes a weight: a GGUF's "
                f"tensors take {MIN_BYTES_PER_PARAM:g} (IQ1_S) to 8 (F64): not this model's size or count"
            )
    most_bytes, most_flops, who = held_by(fields)
    share = least_share(fields)
    if why := _reads_too_fast(fields, size, share, rate, most_bytes, who):
        return why
    if params and params > 0 and rate is not None:
        least = 2.0 * params * share  # FLOPs a token
        if rate * least > most_flops:
            return (
                f"{rate:.6g} t/s of a model of {params:.4g} parameters is {rate * least:.3g} FLOP/s at least "
                f"(2 FLOPs per token and active parameter, {share:.3g} of them active): more than "
                f"{most_flops:.0e}, what {who} computes"
            )
    return None


def _fastest(rate: float | None, samples: Any) -> float | None:
    """The highest of `rate` (tok/s) and the finite numbers of `samples` (a row's samples_ts: a list
    in json, none in csv, md and sql); `rate` where there are none."""
    xs = (
        [x for x in samples if type(x) in (int, float) and math.isfinite(x)]
        if isinstance(samples, list)
        else []
    )
    return max([rate, *xs]) if rate is not None and xs else rate


def _reads_too_fast(
    fields: dict[str, Any], size: int | None, share: float, rate: float | None, most: float, who: str
) -> str | None:
    """Why `rate` (tok/s of a repetition: n_prompt + n_gen tokens) of a model of `size` bytes reads more
    than `most` bytes/s (what `who` reads: held_by): its forward passes (check.forward_passes: one a
    generated token, one a micro-batch of the prompt) come one after another, each reading at least
    `share` of the bytes (least_share: a micro-batch's tokens read at least one token's share). None
    where a figure is not known (the counts are held first by the validity pass)."""
    n_gen, n_prompt = quantity(fields.get("n_gen")) or 0, quantity(fields.get("n_prompt")) or 0
    passes = forward_passes(fields)
    if not size or size <= 0 or rate is None or passes <= 0:
        return None
    least_s = passes * size * share / most  # a repetition's passes, at the least
    fastest = (max(n_gen, 0) + max(n_prompt, 0)) / least_s
    if rate <= fastest:
        return None
    batches = passes - max(n_gen, 0)
    prompt = f"{batches} micro-batch{'es' if batches > 1 else ''} of the prompt"
    what = (
        f"generating {n_gen} tokens" + (f" after {prompt}" if batches else "")
        if n_gen > 0
        else f"in {prompt}"
    )
    return (
        f"{rate:.6g} t/s {what} of a model of {counted(size, 'byte')} reads "
        f"{rate / fastest * most:.3g} bytes/s at least ({share:.3g} of the weights a "
        f"forward pass, one after another): more than {most:.2g}, what {who} reads (at most "
        f"{fastest:.6g} t/s)"
    )


REGISTRY_BUILD = 4000
"""The first llama.cpp build number whose llama-bench is held to its `backends` naming its GPUs' backend
(device_problem). Before ggml's backend registry (October 2024, builds in the 3800s-3900s; 4000 leaves
a margin that only lets rows through), llama-bench named its backend from the compile flags its own
file saw, not from the devices it ran on: a HIP build printed `CUDA` (`"cuda": true`; issue #8186, build
3260: `found 1 ROCm devices`, `Device 0: AMD Radeon Pro W7800` above rows of backend `CUDA`) and a
CANN build `CPU` (get_backend had no CANN branch while get_gpu_info listed the Ascend NPUs), so its
backend and gpu_info may disagree on a real row. Rows of the per-backend booleans (`cuda`, `vulkan`,
...: backends.OLD_BACKEND_FLAGS) are of that era whatever their build number."""

FIRST_BENCH_BUILD = 900
"""Below this build number no llama-bench existed (it came in August 2023, builds near 1000): a smaller
number is a shallow clone's commit count (the toolkit's own images print 1), not the build's age, so
such a row is held as a registry-era one."""


def _before_registry(fields: dict[str, Any]) -> bool:
    """Whether row `fields` is of a llama-bench before the backend registry (REGISTRY_BUILD): it has the
    per-backend booleans, or a build_number from FIRST_BENCH_BUILD to REGISTRY_BUILD - 1 (0 is git's
    unknown, 1 a shallow clone's count)."""
    if any(k in fields for k in backends.OLD_BACKEND_FLAGS):
        return True
    n = fields.get("build_number")
    if isinstance(n, str) and n.strip().isdigit():
        n = int(n.strip())
    return isinstance(n, int) and not isinstance(n, bool) and FIRST_BENCH_BUILD <= n < REGISTRY_BUILD


def device_problem(fields: dict[str, Any]) -> str | None:
    """Why a row's GPU devices (`gpu_info`) cannot be its build's backend (`backends`), None when they
    can or it does not say (backends.device_contradiction: CUDA runs on NVIDIA GPUs only, ROCm on AMD's,
    Metal on Apple's), or more of them than its backends register (backends.device_count_problem:
    16 each for CUDA, ROCm and Vulkan). A row of a build before the backend registry is not held
    (REGISTRY_BUILD: its backend name came from compile flags, not from its devices)."""
    names, gpus = fields.get("backends"), fields.get("gpu_info")
    if not isinstance(names, str) or not isinstance(gpus, str) or _before_registry(fields):
        return None
    return backends.device_contradiction(names, gpus) or backends.device_count_problem(names, gpus)
