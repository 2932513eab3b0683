"""What a llama-bench row's model fields allow it to have measured, on any hardware: the model's size
against its parameter count (bytes a weight), the tokens a second no machine computes, and the GPU
devices its backend can run on. Read by the one validity pass (validity.check_row), so by every import
format, `toolkit bench`'s own rows and every stored-record reader (record_check.contradiction).

Facts (llama.cpp src/llama-model.cpp at 0c1e57098): llama-bench's `model_size` is llama_model_size, the
sum of ggml_nbytes over the model's tensors, and `model_n_params` llama_model_n_params, the sum of their
ggml_nelements: their ratio is the mean bytes a weight, which no ggml tensor type puts below Q1_0's
1.125 bits (18 bytes a block of 128) nor above F64's 8 bytes."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolkit.core import backends
from toolkit.core.gpuspecs import GpuSpec, spec_by_name, summed
from toolkit.core.text import counted
from toolkit.runtimes.llama_bench.check import as_int, backends_of, forward_passes, quantity
from toolkit.runtimes.llama_bench.settings_check import device_names

MIN_BYTES_PER_PARAM = {"Q1_0": 0.13, "IQ1_S": 0.18}
"""The fewest bytes a weight a model's tensors take on average, by the type its model name says (`qwen3 8B
Q1_0`, a fork's `Q1_0_G128`, `(guessed)` after it): Q1_0, ggml's smallest type, is 1.125 bits (0.141
bytes) a weight, and a row that names no type (a stored record's raw, as record_check holds it) is held to
it; any other model's floor is IQ1_S's 1.5625 bits (0.195 bytes: a `Q4_0` model of 0.14 is a size edited
down). Each leaves an -o md table's two decimals
(`1.07 GiB`, `8.19 B`) room. Fewer is a model_size or model_n_params that is not the model's (an edited or
mixed-up row)."""

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
a row whose gpu_info or devices name N devices is held to N x this (N x CARD_SLACK x a known card's peak
where that is less), at most MAX_FLOP_S (held_by)."""

DEVICE_BYTES_S = 2.5e13
"""The most bytes a second one GPU device reads from memory, 25 TB/s (NVIDIA's Rubin HBM4 is 22; a B200
or MI355X has 8, an H200 4.8, an R9700 0.64): a row whose gpu_info or devices name N devices is held to
N x this (N x CARD_SLACK x a known card's peak where that is less), at most MAX_BYTES_S (held_by)."""

CARD_SLACK = 10.0
"""How far past its named cards' peak (core/gpuspecs: memory bandwidth, dense FP16 matrix rate, N cards
summed in any split) a row is refused; between 1 and this it is kept and named (beyond_peak), and the
report holds the cell out (analysis/roofline). Real rows reach 0.91 of an R9700's bandwidth (tests/data,
a dense qwen35 27B); a row of a known card may pass its peak by a last-level cache that holds the whole
model (RDNA3's 96 MB Infinity Cache: 5.3 TB/s to its dies, AMD's launch figure, against 960 GB/s of GDDR6,
5.5x; MI300X's 256 MB: 17 TB/s against 5.3, 3.2x), by weights its model type counts that a token does not read (gemma3n's per-layer
embedding tables, about half its weights: 2x), by a narrower matrix type than FP16 (INT8 or FP8 2x,
RDNA4's INT4 4x), by memory clocked above its board's figure (+15 %). A cache and a clock lift the bytes
(5.5 x 1.15), a matrix type the FLOPs (4 x 2 x 1.15): each under 10. 12x an R9700 is no measurement."""

HOST_BYTES_S = 1e13
"""The most bytes a second a host's CPUs read from memory, 10 TB/s: what a CPU-only row (backends CPU,
BLAS, AMX, ...: no GPU device; or `-dev none`, `-ngl 0`) is held to. The largest CPU systems: 16 sockets of Xeon
Sapphire Rapids (HPE Compute Scale-up Server 3200) x 8 channels of DDR5-4800 = 4.9 TB/s; 8 sockets of
Xeon 6 x 12 channels of MRDIMM-8800 (70.4 GB/s each) = 6.8 TB/s at most (servethehome.com, Xeon 6900P);
2 sockets of EPYC 9005 x 12 of DDR5-6400 = 1.2 TB/s; a 4-socket MI300A's CPU side reaches its 4 x 5.3
TB/s of HBM through 24 Zen 4 cores a socket, far below. The real CPU rows of tests/data read 0.14 TB/s at
most (deepseek2 671B, 8 tok/s, at 3 %)."""

HOST_FLOP_S = 1e16
"""The most FLOP/s a host's CPUs compute, 10 PFLOP/s: 16 sockets of 60 Sapphire Rapids cores with AMX
(1,024 BF16 FLOP, 2,048 INT8 ops a cycle a core, 2 GHz) give 4e15 at INT8; the real CPU rows of
tests/data compute 6e12 at most."""

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


@dataclass(frozen=True)
class UsedGpus:
    """The GPU devices that ran a llama-bench row, as its own fields say (used_gpus): `count` 0 where the
    host's CPUs ran it, None where the row cannot say how many, else how many; `at` their places among
    the devices the process saw and `names` theirs, () where the row does not say which (a `-dev` device it
    cannot place); `split` its split_mode (`single` for one device); `how` why 0 or None, else what chose
    them (` + -dev ROCm1`, ` + -sm none`; "" for every device seen)."""

    count: int | None
    at: tuple[int, ...] = ()
    names: tuple[str, ...] = ()
    split: str = "single"
    how: str = ""


def used_gpus(fields: dict[str, Any], seen: Sequence[str] | None = None) -> UsedGpus:
    """Which GPU devices ran row `fields`: the ONE reading of the import's bounds and note (held_by,
    beyond_peak) and of the report's roofline (analysis/roofline.gpu_use, which passes as `seen` the devices
    the run saw, with a device profile's names for generic ones; default: gpu_info's, settings_check.device_names).
    None of them (0, the host's CPUs): a software device (llvmpipe), `-dev none`, `-ngl 0`, or backends naming
    only host backends (backends.CPU_SIDE_NAMES) and no device, of a build after the backend registry
    (_before_registry: an older CANN build printed `CPU`). Unknown (None): RPC in its backends (another host's
    devices, which the row does not name), or no device named. `-dev D1/D2`: those, each by the index its
    name ends in, where the row names one GPU backend or its devices are one product (CUDA and Vulkan list a
    card twice: a `Vulkan0`'s place is not known), else how many but not which; split_mode none over
    several: main_gpu alone, an index into them; else every device seen."""
    return _used(*_gpu_fields(fields), None if seen is None else tuple(seen))


_GpuFields = tuple[str, str, str, bool, bool, str, int]


def _gpu_fields(fields: dict[str, Any]) -> _GpuFields:
    """What used_gpus reads of row `fields`: gpu_info, devices, backends (check.backends_of), whether it
    predates the backend registry, whether -ngl is 0, split_mode, main_gpu."""
    info = fields.get("gpu_info")
    return (
        info if isinstance(info, str) else "",
        str(fields.get("devices") or "").strip(),
        backends_of(fields),
        _before_registry(fields),
        as_int(fields.get("n_gpu_layers")) == 0,
        str(fields.get("split_mode") or "layer").strip().lower(),
        as_int(fields.get("main_gpu")) or 0,
    )


def _used(
    info: str, devices: str, raw: str, old: bool, no_layers: bool, split: str, main: int, seen: tuple | None
) -> UsedGpus:
    """used_gpus of the fields _gpu_fields read, the devices seen `seen` (None: gpu_info's)."""
    gpu_backends = {n for n in backends.llama_names(raw) if n not in backends.CPU_SIDE_NAMES}
    if backends.is_software_device(info):
        return UsedGpus(0, how=f"ran on a software Vulkan device ({info[:64]}), not a GPU")
    if devices.lower() == "none":
        return UsedGpus(0, how="llama-bench -dev none: ran on the CPU")
    if no_layers:
        return UsedGpus(0, how="no layers on the GPU (-ngl 0)")
    if "rpc" in gpu_backends:
        return UsedGpus(None, how="backends name RPC: another host's devices may have run it, unnamed")
    names = seen if seen is not None else tuple(device_names(info))
    if not names and raw and not gpu_backends and not old:
        return UsedGpus(0, how=f"a CPU run (backend {raw[:40]})")
    at, how = tuple(range(len(names))), ""
    if (
        devices and devices.lower() != "auto"
    ):  # `-dev ROCm0/ROCm1`: those, by their index in the backend's list
        # a device named twice (`ROCm0/ROCm0`: llama-bench's parser keeps both) is one device
        devs = dict.fromkeys(d.strip() for d in devices.split("/") if d.strip())
        shown = devices if len(devices) <= 64 else devices[:63] + "…"  # a stored record's text, in a note
        at, how = tuple(dict.fromkeys(_device_index(d) for d in devs)), f" + -dev {shown}"
        if any(not 0 <= i < len(names) for i in at) or len(gpu_backends) > 1 and len(set(names)) > 1:
            return UsedGpus(
                len(devs), how=f"llama-bench -dev {shown}: cannot tell which of {len(names)} devices"
            )
    if not at:
        return UsedGpus(None, how="the record names no GPU (empty gpu_info, no device list)")
    if split == "none" and len(at) > 1:  # `-sm none`: main_gpu alone, an index into the devices used
        if not 0 <= main < len(at):
            return UsedGpus(1, how=f"main_gpu {main} is not one of the {len(at)} devices")
        at, how = (at[main],), how + " + -sm none"
    return UsedGpus(len(at), at, tuple(names[i] for i in at), "single" if len(at) == 1 else split, how)


_MAX_DEVICE_DIGITS = 4  # `ROCm0`...`Vulkan9999`: a longer number is no device index


def _device_index(name: str) -> int:
    """The index at the end of a `-dev` device name (`ROCm1` -> 1), -1 where it ends in no digit or
    in more than _MAX_DEVICE_DIGITS (a stored record's text: counted without a pattern, linear)."""
    d = name.strip()
    digits = len(d) - len(d.rstrip("0123456789"))
    return int(d[-digits:]) if 0 < digits <= _MAX_DEVICE_DIGITS else -1


def _machine(fields: dict[str, Any]) -> tuple[UsedGpus, GpuSpec | None]:
    """(used_gpus, their figures summed: _card) of row `fields` (cached: a file's rows name one machine; of
    texts over 1 KiB only the last is kept: a file repeating one long text reads it once, and no hostile file
    holds 256 of 1 MB each)."""
    key = _gpu_fields(fields)
    return (_machine_of if len(key[0]) + len(key[1]) + len(key[2]) <= 1024 else _machine_long)(key)


@functools.lru_cache(maxsize=256)
def _machine_of(key: _GpuFields) -> tuple[UsedGpus, GpuSpec | None]:
    """_machine of the fields _gpu_fields read."""
    used = _used(*key, None)
    return used, _card(used.names)


_machine_long = functools.lru_cache(maxsize=1)(_machine_of.__wrapped__)


def _card(names: Sequence[str]) -> GpuSpec | None:
    """The GPU devices `names` (one a device) at their peak together (gpuspecs.summed: memory bandwidth,
    dense FP16 matrix rate), None where there are none or one has no figures (a product not in the table, a
    generic name: no yardstick). Each distinct name is looked up once, none after the first without figures
    (a hostile gpu_info of 80,000 names is one lookup)."""
    found: dict[str, GpuSpec] = {}
    for name in dict.fromkeys(names):
        if not (spec := spec_by_name(name)):
            return None
        found[name] = spec
    return summed([found[n] for n in names]) if found else None


def held_by(fields: dict[str, Any], slack: float = CARD_SLACK) -> tuple[float, float, str]:
    """(bytes/s, FLOP/s, what reads and computes them) the row `fields` is held to: HOST_BYTES_S and
    HOST_FLOP_S where it ran on the host's CPUs alone (used_gpus); where N GPU devices ran it, `slack` x their
    peak summed (_card), at most DEVICE_BYTES_S and DEVICE_FLOP_S a device (those for a product without
    figures) and MAX_BYTES_S, MAX_FLOP_S in all; MAX_BYTES_S and MAX_FLOP_S (any machine) where the row does
    not say how many (an md table, RPC)."""
    return _held(_machine(fields), slack)


def _held(machine: tuple[UsedGpus, GpuSpec | None], slack: float) -> tuple[float, float, str]:
    """held_by of a row whose _machine is `machine`."""
    used, card = machine
    n = used.count
    if n == 0:
        return HOST_BYTES_S, HOST_FLOP_S, "the largest host (the row names no GPU device)"
    if not n:
        return MAX_BYTES_S, MAX_FLOP_S, "any machine"
    most = (slack * card.mem_bw, slack * card.flops) if card else (MAX_BYTES_S, MAX_FLOP_S)
    return (
        min(most[0], n * DEVICE_BYTES_S, MAX_BYTES_S),
        min(most[1], n * DEVICE_FLOP_S, MAX_FLOP_S),
        f"the {counted(n, 'GPU device')} the row names"
        + (f" ({card.product}, at most {slack:g} x its peak)" if card else ""),
    )


def model_problem(fields: dict[str, Any], rate: float | None) -> str | None:
    """Why a row's model fields contradict each other or its speed, None when they do not (or are not
    given): model_size over model_n_params outside MIN_BYTES_PER_PARAM..MAX_BYTES_PER_PARAM bytes a
    weight (a size edited down hides a decode beyond the GPU's bandwidth: the roofline reads it), or
    `rate` (tok/s, any test) beyond what the row's machine reads and computes (held_by: _beyond). Each
    repetition is held to them, not only their mean: `rate` is the fastest of it and samples_ts (a
    sample at twice the limit beside a slow one averaged inside it)."""
    size, params = quantity(fields.get("model_size")), quantity(fields.get("model_n_params"))
    if size and params and size > 0 and params > 0:
        per = size / params
        named = str(fields.get("model_type") or "").upper()
        low = "IQ1_S" if named and not re.search(r"\bQ1_0", named) else "Q1_0"
        if not MIN_BYTES_PER_PARAM[low] <= per <= MAX_BYTES_PER_PARAM:
            return (
                f"model_size {counted(size, 'byte')} over model_n_params {params} is {per:.3g} bytes a weight: a GGUF's "
                f"tensors take {MIN_BYTES_PER_PARAM[low]:g} ({low}) to 8 (F64): not this model's size or count"
            )
    return _beyond(fields, _fastest(rate, fields.get("samples_ts")), held_by(fields))


BEYOND_PEAK = (
    "kept beyond the peak of the GPU its gpu_info names (a cache, a matrix type narrower than FP16, a wrong model "
    "size or GPU name): `toolkit report` flags such a cell bw-above-peak or compute-above-peak and holds it out"
)
"""What the import says of the rows beyond_peak names."""


def beyond_peak(fields: dict[str, Any], rate: float | None) -> str | None:
    """Why `rate` (tok/s, a row's mean) of row `fields` is beyond the peak of the GPU devices it names
    (held_by at 1 x _card: the ceiling the report's roofline flags bw-above-peak or
    compute-above-peak), None where it is not or they have no figures: a row the validity pass kept
    (within CARD_SLACK of it), which the import names."""
    machine = _machine(fields)
    if not machine[0].count or machine[1] is None:
        return None
    return _beyond(fields, rate, _held(machine, 1.0))


def _beyond(fields: dict[str, Any], rate: float | None, held: tuple[float, float, str]) -> str | None:
    """Why `rate` (tok/s) of row `fields`' model reads or computes more than `held` (bytes/s, FLOP/s, what
    does: held_by): more bytes than its forward passes read (_reads_too_fast), or more FLOP/s than 2 FLOPs
    per token and active parameter, each at least least_share; None where not (or not known)."""
    size, params = quantity(fields.get("model_size")), quantity(fields.get("model_n_params"))
    most_bytes, most_flops, who = held
    share = least_share(fields)
    least = 2.0 * max(params or 0, 0) * share  # FLOPs a token
    if rate is None or rate * share * max(size or 0, 0) <= most_bytes and rate * least <= most_flops:
        return None  # a forward pass holds a token at least: neither bound is passed (the cheap common case)
    if why := _reads_too_fast(fields, size, share, rate, most_bytes, who):
        return why
    if rate * least > most_flops:
        return (
            f"{rate:.6g} t/s of a model of {params:.4g} parameters is {rate * least:.3g} FLOP/s at least "
            f"(2 FLOPs per token and active parameter, {share:.3g} of them active): more than "
            f"{most_flops:.2g}, what {who} computes"
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
