"""How close a measured tok/s comes to what the GPU could do at most (a roofline, per record).

decode (tg): every generated token reads the active weights once, so
    implied bandwidth = tok/s x bytes read per token,  bytes per token ~ model_size x active share
and `% of bandwidth bound` = implied / peak memory bandwidth. KV-cache reads are left out (small
at the short contexts llama-bench uses), so the figure is a slight underestimate.

prefill (pp): every prompt token costs ~2 FLOPs per active parameter (one multiply-add), so
    implied FLOP/s = tok/s x 2 x active params
and `% of compute bound` = implied / peak dense FP16 matrix FLOP/s. Attention FLOPs are left out
(they grow with the prompt); llama.cpp's int8 MMQ path can exceed the FP16 rate in principle.

Active share of a mixture-of-experts model (only the routed experts are read per token), in order:
  1. the GGUF file itself, when readable: non-expert tensors + expert tensors x expert_used/expert_count
     (bytes and parameters counted per tensor: exact for the weights, ignoring the router's choice);
  2. a small table of known model types (numbers from the model cards);
  3. llama.cpp's `NB.AMB` model-type size (e.g. `30B.A3B` -> 3/30), rounded as llama.cpp rounds;
  4. a model type without an MoE marker counts as dense (share 1).
The GPU is known from the record's gpu_info text or, failing that, the host's one discrete GPU
(host.gpus[].gfx_target); CPU images and software Vulkan devices get no roofline.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from toolkit.records import BenchRecord


@dataclass(frozen=True)
class GpuPeak:
    """Peak figures of one GPU: memory bandwidth in GB/s (1e9 B/s), dense FP16 matrix TFLOP/s."""

    gfx_target: str
    product: str
    names: tuple[str, ...]  # substrings of gpu_info that identify it (lower case)
    mem_bw_gbs: float
    fp16_matrix_tflops: float
    compute_units: int

    @property
    def mem_bw(self) -> float:
        return self.mem_bw_gbs * 1e9

    @property
    def flops(self) -> float:
        return self.fp16_matrix_tflops * 1e12


PEAKS: dict[str, GpuPeak] = {
    # Radeon AI PRO R9700 (Navi 48, RDNA4): 32 GB GDDR6 at 20 Gbps on 256 bit = 640 GB/s, 64 CUs
    # (shared/reference/llama-bench.md; AMD product page). AMD's datasheet lists 95.7 TFLOPS FP16 vector
    # (cited in huggingface/huggingface.js PR #1895); RDNA4 WMMA runs dense FP16 at twice the vector
    # rate: 64 CUs x 1024 FLOP/clock x 2.92 GHz boost = 191 TFLOPS (AMD's "1531 TOPS" = INT4 sparse = 8x).
    "gfx1201": GpuPeak("gfx1201", "Radeon AI PRO R9700", ("r9700", "gfx1201"), 640.0, 191.0, 64),
    # Radeon RX 7900 XTX (Navi 31, RDNA3): 24 GB GDDR6 at 20 Gbps on 384 bit = 960 GB/s, 96 CUs;
    # 122.8 TFLOPS FP16 (Wikipedia "RDNA 3" infobox; 96 CUs x 512 FLOP/clock x 2.5 GHz), WMMA = same rate.
    "gfx1100": GpuPeak("gfx1100", "Radeon RX 7900 XTX", ("7900 xtx", "gfx1100"), 960.0, 122.8, 96),
    # Instinct MI300X (CDNA3): 192 GB HBM3 at 5.3 TB/s, 304 CUs, 1307.4 TFLOPS dense FP16/BF16 matrix
    # (AMD spec sheet figures, as tabulated in alpharomercoma/MI300X-vs-H200 METHODOLOGY.md).
    "gfx942": GpuPeak("gfx942", "Instinct MI300X", ("mi300x", "gfx942"), 5300.0, 1307.4, 304),
}

# Active parameters / total parameters of known MoE model types (llama.cpp `model_type` prefix).
KNOWN_ACTIVE_SHARE: dict[str, float] = {
    "qwen3moe 30b.a3b": 3.3 / 30.5,  # Qwen3-30B-A3B model card: 30.5B total, 3.3B activated
    "qwen3moe 235b.a22b": 22.0 / 235.0,  # Qwen3-235B-A22B model card
    "gpt-oss 20b": 3.6 / 21.0,  # gpt-oss-20b model card: 21B total, 3.6B active
    "gpt-oss 120b": 5.1 / 117.0,  # gpt-oss-120b model card: 117B total, 5.1B active
}
_NBA_RE = re.compile(r"(\d+(?:\.\d+)?)B\.A(\d+(?:\.\d+)?)B", re.IGNORECASE)
_MOE_MARKERS = ("moe", "mixtral", "deepseek2", "gpt-oss", "a3b", "x7b", "x22b")
SOFTWARE_GPU_MARKERS = ("llvmpipe", "lavapipe")


@dataclass(frozen=True)
class ActiveShare:
    """Share of the weights used per token: by bytes (decode reads) and by parameters (prefill FLOPs)."""

    bytes_share: float
    params_share: float
    source: str  # gguf | table | model-type | dense


@dataclass(frozen=True)
class Roofline:
    """One record against its GPU: implied rate, the bound, and the ratio (0.45 = 45 %)."""

    gpu: GpuPeak
    metric: str  # "bandwidth" (decode) | "compute" (prefill)
    implied: float  # B/s or FLOP/s
    peak: float
    share: ActiveShare

    @property
    def fraction(self) -> float:
        return self.implied / self.peak


def gpu_of(r: BenchRecord) -> GpuPeak | None:
    """The GPU a record ran on, when its peak figures are known; None for CPU/software devices."""
    if r.image.backend not in ("rocm", "vulkan"):
        return None
    info = (r.gpu_info or "").lower()
    if any(m in info for m in SOFTWARE_GPU_MARKERS):
        return None
    for peak in PEAKS.values():
        if any(n in info for n in peak.names):
            return peak
    gpus = [g for g in r.host.get("gpus", []) if isinstance(g, dict) and not g.get("is_igpu")]
    targets = {g.get("gfx_target") for g in gpus} & PEAKS.keys()
    return PEAKS[targets.pop()] if len(targets) == 1 else None


@functools.lru_cache(maxsize=32)
def gguf_active_share(path: str) -> ActiveShare | None:
    """Active share from a GGUF file's tensors: experts (`*_exps`) count at expert_used/expert_count."""
    p = Path(path)
    if not p.is_file():
        return None
    try:
        from gguf import GGUFReader

        reader = GGUFReader(str(p))
    except Exception:  # not a GGUF we can read: fall back to the tables
        return None
    arch = _field(reader, "general.architecture")
    used, count = _field(reader, f"{arch}.expert_used_count"), _field(reader, f"{arch}.expert_count")
    if not used or not count:
        return ActiveShare(1.0, 1.0, "gguf")
    ratio = float(used) / float(count)
    tot_b = act_b = tot_p = act_p = 0.0
    for t in reader.tensors:
        nbytes, nparams = float(t.n_bytes), float(t.n_elements)
        scale = ratio if "_exps" in t.name else 1.0
        tot_b, act_b = tot_b + nbytes, act_b + nbytes * scale
        tot_p, act_p = tot_p + nparams, act_p + nparams * scale
    if not tot_b or not tot_p:
        return None
    return ActiveShare(act_b / tot_b, act_p / tot_p, "gguf")


def _field(reader, key: str):
    f = reader.fields.get(key)
    if f is None or not f.data:
        return None
    v = f.parts[f.data[0]]
    if getattr(v, "dtype", None) is not None and v.dtype.kind == "u" and v.dtype.itemsize == 1:
        return bytes(v).decode(errors="replace")  # a string field
    return v[0] if len(v) else None


def active_share(r: BenchRecord) -> ActiveShare | None:
    """Share of the model's weights touched per token (see the module docstring for the order)."""
    from_file = gguf_active_share(r.model.path) if r.model.path else None
    if from_file:
        return from_file
    mtype = str(r.raw.get("model_type") or "").lower()
    for prefix, share in KNOWN_ACTIVE_SHARE.items():
        if mtype.startswith(prefix):
            return ActiveShare(share, share, "table")
    m = _NBA_RE.search(mtype)
    if m and float(m.group(1)) > 0:
        share = float(m.group(2)) / float(m.group(1))
        return ActiveShare(share, share, "model-type")
    if mtype and not any(k in mtype for k in _MOE_MARKERS):
        return ActiveShare(1.0, 1.0, "dense")
    return None


def model_bytes(r: BenchRecord) -> float | None:
    size = r.raw.get("model_size") or r.model.size_bytes
    return float(size) if size else None


def model_params(r: BenchRecord) -> float | None:
    n = r.raw.get("model_n_params")
    return float(n) if n else None


def roofline(r: BenchRecord) -> Roofline | None:
    """Decode: % of the bandwidth bound; prefill: % of the compute bound. None when not computable."""
    if r.avg_ts is None or r.axis not in ("prefill", "decode"):
        return None
    gpu = gpu_of(r)
    share = active_share(r) if gpu else None
    if gpu is None or share is None:
        return None
    if r.axis == "decode":
        size = model_bytes(r)
        if not size:
            return None
        return Roofline(gpu, "bandwidth", r.avg_ts * size * share.bytes_share, gpu.mem_bw, share)
    params = model_params(r)
    if not params:
        return None
    return Roofline(gpu, "compute", r.avg_ts * 2.0 * params * share.params_share, gpu.flops, share)
