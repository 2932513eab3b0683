"""`vllm bench latency | serve | throughput` result JSON --parse--> numbers; the one place that reads them.

Shared by the vLLM runner (toolkit/bench/runners/vllm.py: its own result files) and `toolkit import`
(results/vllm_import.py: result files made elsewhere), so an imported result is judged exactly as the
runner judges its own: the same methods, the same decode noise rule, the same shortfall check.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Any

from toolkit.core import stats

METHOD_PREFILL = "vllm-bench-latency-prefill"
METHOD_DECODE = "vllm-bench-latency-decode"
METHOD_SERVE = "vllm-bench-serve"
METHOD_THROUGHPUT = "vllm-bench-throughput"
NOISE_SIGMAS = 3.0  # a decode latency difference must exceed this many combined stddevs of its two runs
SERVED_TOLERANCE = 0.02  # relative shortfall of generated tokens accepted without --ignore-eos


def _num(v: Any) -> float | None:
    """A finite or infinite float from a number or numeric string; None for anything else."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _finite(v: Any) -> float | None:
    f = _num(v)
    return f if f is not None and math.isfinite(f) else None


@dataclass
class Latency:
    """`vllm bench latency --output-json`: seconds per batch."""

    avg: float
    latencies: list[float]
    std: float | None
    percentiles: dict[str, float]


def parse_latency(data: dict[str, Any]) -> tuple[Latency | None, str | None]:
    """avg_latency (or the mean of `latencies`), the per-iteration latencies and percentiles."""
    lats = [f for f in (_finite(x) for x in data.get("latencies") or []) if f is not None]
    avg = _finite(data.get("avg_latency"))
    if avg is None and lats:
        avg = statistics.fmean(lats)
    if avg is None or avg <= 0:
        return None, f"no positive avg_latency in the result (keys: {', '.join(sorted(data)) or 'none'})"
    given = data.get("percentiles")
    pct = given if isinstance(given, dict) else {}
    percentiles = {str(k): f for k, v in pct.items() if (f := _finite(v)) is not None}
    std = _finite(data.get("std_latency"))
    if std is None and len(lats) > 1:
        std = statistics.stdev(lats)
    return Latency(avg, lats, std, percentiles), None


def _spread(lat: Latency) -> float | None:
    """Stddev (s) of one run's per-iteration latencies, else its reported std_latency."""
    return statistics.stdev(lat.latencies) if len(lat.latencies) > 1 else lat.std


def decode_noise_error(long: Latency, short: Latency, *, long_len: int, short_len: int = 1) -> str | None:
    """Why tg tok/s cannot be taken from `long.avg - short.avg`, or None when it can.

    long / short: `vllm bench latency` at output `long_len` / `short_len` (seconds per batch). The
    difference must be positive and larger than NOISE_SIGMAS x sqrt(sd_long^2 + sd_short^2), sd being
    the stddev of each run's per-iteration latencies (`latencies`, else `std_latency`). Within the
    noise, N / difference is an arbitrary (often absurd) tok/s, so the record is failed with this
    reason. A run with fewer than 2 iterations and no std_latency has no measurable noise: failed too."""
    diff = long.avg - short.avg
    pair = f"{long.avg:.4f} s at output {long_len} vs {short.avg:.4f} s at output {short_len}"
    if diff <= 0:
        return f"decode latency difference is not positive ({pair})"
    sds = (_spread(long), _spread(short))
    if any(sd is None for sd in sds):
        return (
            f"decode latency difference {diff:.4f} s ({pair}) cannot be told from noise: a run has fewer than 2 "
            "iterations; raise vllm.num_iters"
        )
    noise = NOISE_SIGMAS * math.hypot(*sds)  # type: ignore[arg-type]
    if diff <= noise:
        return (
            f"decode latency difference {diff:.4f} s ({pair}) is within the noise of the two runs "
            f"({NOISE_SIGMAS:g} x combined stddev {math.hypot(*sds):.4f} s = {noise:.4f} s); "  # type: ignore[arg-type]
            f"no tok/s is derived from it: raise the output length (bench.n_gen) or vllm.num_iters"
        )
    return None


SERVE_KEYS = (
    "duration",
    "completed",
    "failed",
    "num_prompts",
    "max_concurrency",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
)


def parse_serve(data: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one `vllm bench serve` result; absent keys are None; request_rate a number or "inf";
    `output_lens` (tokens per request) only when the result has them.

    `latency_ms` = {ttft|tpot|itl|e2el: {mean, median, std, p50, p90, p99, ...}} from the
    `mean_ttft_ms`, `p99_ttft_ms`, ... keys (whichever percentiles the run reported)."""
    out: dict[str, Any] = {k: _finite(data.get(k)) for k in SERVE_KEYS}
    rate = _num(data.get("request_rate"))
    out["request_rate"] = "inf" if rate == math.inf else rate  # as vLLM writes it: JSON has no inf
    lat: dict[str, dict[str, float | None]] = {}
    for metric in ("ttft", "tpot", "itl", "e2el"):
        vals = {stat: _finite(data.get(f"{stat}_{metric}_ms")) for stat in ("mean", "median", "std")}
        for key, val in data.items():
            m = re.fullmatch(rf"p(\d+(?:\.\d+)?)_{metric}_ms", key)
            if m:
                vals[f"p{m.group(1)}"] = _finite(val)
        if any(x is not None for x in vals.values()):
            lat[metric] = vals
    out["latency_ms"] = lat
    lens = data.get("output_lens")
    if isinstance(lens, list):
        out["output_lens"] = [int(x) for x in lens if isinstance(x, int | float) and not isinstance(x, bool)]
    return out


def served_shortfall_error(
    parsed: dict[str, Any],
    *,
    num_prompts: int,
    output_len: int,
    ignore_eos: bool = True,
    tolerance: float = SERVED_TOLERANCE,
) -> str | None:
    """Why a `vllm bench serve` result did not measure what was asked, or None.

    parsed: `parse_serve` of the result; asked: `num_prompts` requests of `output_len` tokens each.
    Generated = total_output_tokens (vLLM counts the server's completion_tokens per request). With
    --ignore-eos every request runs to its max_tokens, so the counts must match exactly; without it a
    shortfall up to `tolerance` (relative) is accepted. More than asked beyond `tolerance` is refused
    too (a re-tokenised count that inflates output tok/s). Per-request `output_lens`, when the result
    carries them, name how many requests came back short."""
    asked = num_prompts * output_len
    got = parsed.get("total_output_tokens")
    if got is None:
        return (
            "the result has no total_output_tokens: cannot tell whether the requested tokens were generated"
        )
    got_i = int(got)
    allowed_short = 0 if ignore_eos else math.floor(asked * tolerance)
    short = ""
    lens = parsed.get("output_lens")
    if isinstance(lens, list) and lens:
        n_short = sum(1 for x in lens if isinstance(x, int | float) and x < output_len)
        short = f"; {n_short} of {len(lens)} requests stopped early" if n_short else ""
    eos = " with --ignore-eos" if ignore_eos else f" (tolerance {tolerance:.0%})"
    if asked - got_i > allowed_short:
        return f"generated {got_i} of {asked} requested tokens ({num_prompts} requests x {output_len}){eos}{short}"
    if got_i - asked > math.floor(asked * tolerance):
        return (
            f"counted {got_i} output tokens for {asked} requested ({num_prompts} requests x {output_len}): more "
            f"than asked beyond {tolerance:.0%}, the output tok/s would be inflated"
        )
    return None


# The attention backend a vLLM run used, as its log names it. vLLM 0.16.0's ROCm chooser logs a display
# name (vllm/platforms/rocm.py get_attn_backend_cls, lines 286-377: `logger.info("Using Triton Attention
# backend.")` then `return AttentionBackendEnum.TRITON_ATTN.get_path()`); 0.28.0 logs the enum name
# (rocm.py line 639 "Using %s backend (selected via --attention-backend).", line 713 "Using %s backend out
# of potential backends: %s.", with `selected_backend.name`); older releases printed the enum itself
# (`AttentionBackendEnum.TRITON_ATTN`). One name per backend: the enum's (tests/test_gpu_probe.py reads
# the pairs from the pinned 0.16.0 source).
ATTENTION_DISPLAY_NAMES = {
    "Sparse MLA": "ROCM_AITER_MLA_SPARSE",
    "Triton MLA": "TRITON_MLA",
    "AITER MLA": "ROCM_AITER_MLA",
    "AITER TRITON MLA": "ROCM_AITER_TRITON_MLA",
    "FlexAttention": "FLEX_ATTENTION",
    "Triton Attention": "TRITON_ATTN",
    "Rocm Attention": "ROCM_ATTN",
    "Aiter Flash Attention": "ROCM_AITER_FA",
    "Aiter Unified Attention": "ROCM_AITER_UNIFIED_ATTN",
}


def attention_backend_name(logged: Any) -> str | None:
    """The attention backend's enum name (`TRITON_ATTN`) from what a vLLM log said: a display name
    (`Triton Attention`, 0.16.0), `AttentionBackendEnum.TRITON_ATTN`, or the name itself (0.28.0, CPU's
    `CPU_ATTN`). SGLang's names (`triton`) and names not known here come back as logged; None for none."""
    if not isinstance(logged, str) or not logged.strip():
        return None
    name = logged.strip().removeprefix("AttentionBackendEnum.")
    return ATTENTION_DISPLAY_NAMES.get(name, name)


def samples_ts(tokens: int, lats: list[float], minus: float = 0.0) -> list[float]:
    """Tokens/second per iteration: `tokens` / (each latency in `lats` - `minus` s), positive ones only."""
    return [round(tokens / (x - minus), 4) for x in lats if x - minus > 0]


def sample_sd(xs: list[float]) -> float | None:
    """The sample standard deviation of `xs` (None for fewer than two)."""
    return round(stats.stdev(xs), 4) if len(xs) > 1 else None
