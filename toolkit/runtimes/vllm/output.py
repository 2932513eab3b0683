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
from datetime import datetime
from typing import Any

from toolkit.core import stats
from toolkit.core.types import MIN_TOKEN_S

METHOD_PREFILL = "vllm-bench-latency-prefill"
METHOD_DECODE = "vllm-bench-latency-decode"
METHOD_SERVE = "vllm-bench-serve"
METHOD_THROUGHPUT = "vllm-bench-throughput"
NOISE_SIGMAS = 3.0  # a decode latency difference must exceed this many combined stddevs of its two runs
SERVED_TOLERANCE = 0.02  # relative shortfall of generated tokens accepted without --ignore-eos


def _finite(v: Any) -> float | None:
    """stats.float_or_none's finite floats. Not toolkit.core.stats.finite_number: a vLLM result's numeric
    text ("0.5") is read as its number here (as _seconds and the counts of `throughput_problem` read it),
    where a stored record's text is no number to finite_number."""
    f = stats.float_or_none(v)
    return f if f is not None and math.isfinite(f) else None


@dataclass
class Latency:
    """`vllm bench latency --output-json`: seconds per batch."""

    avg: float
    latencies: list[float]
    std: float | None
    percentiles: dict[str, float]


def parse_latency(data: dict[str, Any]) -> tuple[Latency | None, str | None]:
    """avg_latency (or the mean of `latencies`), the per-iteration latencies and percentiles (seconds),
    or None and why the result is no measurement (`latency_problem`)."""
    why = latency_problem(data)
    if why:
        return None, why
    lats = [float(x) for x in data.get("latencies") or []]
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


AGREE = 0.01
"""How far (relative) a vLLM result's derived figures may lie from what its own counts and samples
give: vLLM computes them from the same numbers (avg_latency = mean(latencies), output_throughput =
total_output_tokens / duration) and writes full floats; 1 % leaves room for a hand-rounded copy."""


def _seconds(name: str, v: Any) -> str | None:
    """Why `v` is no time in seconds (a finite number above 0), naming the field; None when it is one."""
    f = stats.float_or_none(v)
    if f is None or not math.isfinite(f) or f <= 0:
        shown = repr(v)[:24] if not isinstance(v, (dict, list)) else type(v).__name__
        return f"{name} is {shown}: expected a time in seconds above 0"
    return None


def latency_problem(data: dict[str, Any]) -> str | None:
    """Why a `vllm bench latency` result contradicts itself, naming the field, or None: `latencies` not
    a list of times above 0 (seconds; a negative or text entry would be dropped or read as noise);
    avg_latency (a time above 0) not their mean (vLLM: np.mean(latencies)) to AGREE; std_latency not
    their sample stddev to AGREE of the mean (the noise is read as a share of the value); a percentile
    that is not a time (where it lies among the latencies is not checked)."""
    raw = data.get("latencies")
    if raw is not None and not isinstance(raw, list):
        return f"latencies is {type(raw).__name__}: expected a list of times in seconds"
    for i, x in enumerate(raw or []):
        why = _seconds(f"latencies[{i}]", x)
        if why:
            return why
    lats = [float(x) for x in raw or []]  # each a number (_seconds)
    for name in ("avg_latency", "std_latency"):
        v = data.get(name)
        if v is not None and (name == "avg_latency" or v != 0):
            why = _seconds(name, v)
            if why:
                return why
    if not lats:
        return None
    mean = statistics.fmean(lats)
    avg = _finite(data.get("avg_latency"))
    if avg is not None and abs(avg - mean) > AGREE * mean:
        return f"avg_latency {avg:g} s contradicts latencies (their mean is {mean:g} s)"
    std = _finite(data.get("std_latency"))
    if std is not None and len(lats) > 1 and abs(std - statistics.stdev(lats)) > AGREE * mean:
        return f"std_latency {std:g} s contradicts latencies (their stddev is {statistics.stdev(lats):.4g} s)"
    pct = data.get("percentiles")
    for k, v in pct.items() if isinstance(pct, dict) else ():
        why = _seconds(f"percentiles[{k!r}]", v)
        if why:
            return why
    return _percentile_problem(pct if isinstance(pct, dict) else {}, lats)


def _percentile_problem(pct: dict[Any, Any], lats: list[float]) -> str | None:
    """Why a latency result's percentiles (seconds, each a time: latency_problem) are not of its
    latencies: vLLM takes them with np.percentile over `latencies`, so each lies within their range and
    a higher one is never lower (1e-9 relative slack for the float sums of a copy)."""
    lo, hi = min(lats), max(lats)
    for k, v in pct.items():
        if not lo * (1 - 1e-9) <= float(v) <= hi * (1 + 1e-9):
            return f"percentiles[{k!r}] {float(v):g} lies outside latencies ({lo:g} to {hi:g} s)"
    return _order_problem({str(k): float(v) for k, v in pct.items()}, "percentiles[{!r}]")


def _order_problem(by_p: dict[str, float], name: str) -> str | None:
    """Why percentiles `by_p` ({"50": value, "99": value}; keys that are no number are passed over) are
    not non-decreasing in p; `name` formats a key into the field's name."""
    ranked = sorted(
        (p, k, v) for k, v in by_p.items() if (p := stats.float_or_none(k)) is not None and math.isfinite(p)
    )
    for (_, ka, va), (_, kb, vb) in zip(ranked, ranked[1:], strict=False):
        if vb < va * (1 - 1e-9):
            return f"{name.format(kb)} {vb:g} is below {name.format(ka)} {va:g}: a higher percentile is never lower"
    return None


def _spread(lat: Latency) -> float | None:
    """Stddev (s) of one run's per-iteration latencies, else its reported std_latency."""
    return statistics.stdev(lat.latencies) if len(lat.latencies) > 1 else lat.std


def decode_noise_error(long: Latency, short: Latency, *, long_len: int, short_len: int = 1) -> str | None:
    """Why tg tok/s cannot be taken from `long.avg - short.avg`, or None when it can. long / short: `vllm
    bench latency` at output `long_len` / `short_len` (seconds per batch). The difference must be positive and
    larger than NOISE_SIGMAS x sqrt(sd_long^2 + sd_short^2), sd being the stddev of each run's per-iteration
    latencies (`latencies`, else `std_latency`); within the noise N / difference is an arbitrary tok/s. A run
    with fewer than 2 iterations and no std_latency has no measurable noise: failed too."""
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
    `output_lens` (tokens per request) only when the result has them. `latency_ms` = {ttft|tpot|itl|e2el:
    {mean, median, std, p50, p90, p99, ...}} from the `mean_ttft_ms`, `p99_ttft_ms`, ... keys."""
    out: dict[str, Any] = {k: _finite(data.get(k)) for k in SERVE_KEYS}
    rate = stats.float_or_none(data.get("request_rate"))
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
        out["output_lens"] = [int(x) for x in lens if stats.finite_number(x) is not None]
    return out


def serve_problem(data: dict[str, Any]) -> str | None:
    """Why a `vllm bench serve` result contradicts itself or is physically impossible, naming the
    field, or None (vLLM vllm/benchmarks/serve.py calculate_metrics: the throughputs are counts /
    duration, the latencies per request; the `_serve_rates` and `_serve_latencies` rules)."""
    parsed = parse_serve(data)
    for k in SERVE_KEYS:
        if isinstance(parsed.get(k), int | float) and parsed[k] < 0:
            return f"{k} is {parsed[k]:g}: a count, time or rate is never negative"
    for k in ("completed", "failed", "num_prompts", "total_input_tokens", "total_output_tokens"):
        v = parsed.get(k)
        if v is not None and v != int(v):
            return f"{k} is {v:g}: a count is a whole number"
    prompts, done, failed = parsed["num_prompts"], parsed["completed"], parsed["failed"] or 0
    if prompts is not None and done is not None and done + failed > prompts:
        return f"completed {done:g} + failed {failed:g} is more than num_prompts {prompts:g}: more requests than were sent"
    return _serve_rates(parsed) or _serve_latencies(parsed) or _serve_lens(data, parsed)


def _serve_lens(data: dict[str, Any], parsed: dict[str, Any]) -> str | None:
    """Why a --save-detailed result's per-request `output_lens` / `input_lens` are not its totals, or None
    (vLLM calculate_metrics: one entry per request sent, a failed one's output 0, at least `completed`
    entries; total_output_tokens = sum(output_lens), total_input_tokens the sum of the completed requests'
    input lengths: all of input_lens when none failed)."""
    done, failed = parsed["completed"], parsed["failed"]
    for name, total in (("output_lens", "total_output_tokens"), ("input_lens", "total_input_tokens")):
        lens = data.get(name)
        if lens is None:
            continue
        if not isinstance(lens, list) or not all(type(x) is int and x >= 0 for x in lens):
            return f"{name} is not a list of token counts (whole numbers >= 0)"
        if done is not None and failed is not None and len(lens) != done + failed:
            return f"{name} has {len(lens)} requests, completed + failed is {done + failed:g}"
        if done is not None and len(lens) < done:  # older releases write no `failed`: at least completed
            return f"{name} has {len(lens)} requests, completed is {done:g}"
        said, got = parsed[total], sum(lens)
        some_failed = bool(failed) or (done is not None and len(lens) > done)
        if said is not None and (got != said if name == "output_lens" or not some_failed else got < said):
            return f"{name} sum to {got}, {total} is {said:g}: the requests are not the result's"
    return None


def _serve_rates(parsed: dict[str, Any]) -> str | None:
    """duration above 0, and each throughput its count / duration to AGREE: output_throughput =
    total_output_tokens / duration, total_token_throughput = (input + output) / duration,
    request_throughput = completed / duration. Without a duration, the rates must say one duration
    between them (count / rate, to AGREE), and an output_throughput beside its tokens with no other
    rate is held to nothing: refused."""
    secs = parsed["duration"]
    if secs is not None and secs <= 0:
        return f"duration is {secs:g}: a benchmark takes time (seconds above 0)"
    ins, outs = parsed["total_input_tokens"], parsed["total_output_tokens"]
    counts = {
        "output_throughput": (outs, "total_output_tokens"),
        "total_token_throughput": (
            None if ins is None or outs is None else ins + outs,
            "total_input_tokens + total_output_tokens",
        ),
        "request_throughput": (parsed["completed"], "completed"),
    }
    rates = [(name, parsed[name], count, what) for name, (count, what) in counts.items()]
    rates = [r for r in rates if r[1] is not None and r[2] is not None]
    if secs is None:
        return _rates_without_duration([r for r in rates if r[1] > 0 and r[2] > 0])
    for name, rate, count, what in rates:
        expect = count / secs
        if abs(rate - expect) > AGREE * max(expect, rate):
            return f"{name} {rate:g} contradicts {what} {count:g} over duration {secs:g} s ({expect:.4g}/s)"
    return None


def _rates_without_duration(rates: list[tuple[str, float, float, str]]) -> str | None:
    """Why the (name, rate, count, what) of a result without `duration` do not say one duration."""
    if not rates or rates[0][0] != "output_throughput":
        return None
    name, rate, count, _ = rates[0]
    if len(rates) == 1:
        return (
            f"output_throughput {rate:g} cannot be held to its counts: no duration, and no request_throughput "
            "or total_token_throughput beside it; import the result as vLLM wrote it"
        )
    for other, r2, c2, what in rates[1:]:
        a, b = count / rate, c2 / r2
        if abs(a - b) > AGREE * max(a, b):
            return (
                f"output_throughput {rate:g} contradicts {other} {r2:g}: total_output_tokens {count:g} over it "
                f"takes {a:.4g} s, {what} {c2:g} over {other} {b:.4g} s (the result has no duration)"
            )
    return None


TPOT_FACTOR = 10.0
"""How far mean_tpot_ms x (tokens per request - 1) may lie from mean_e2el_ms - mean_ttft_ms (the
mean decode time of a request): equal when every request decodes at one pace, apart when the pace
varies with the length (a mean of products is not the product of means); a factor of 10 is no
variation but a unit or an invented figure."""


def _serve_latencies(parsed: dict[str, Any]) -> str | None:
    """Each latency statistic >= 0 ms; median_X_ms and p50_X_ms (one statistic) equal to AGREE;
    mean_ttft_ms within mean_e2el_ms (the first token is part of the request), and mean_tpot_ms
    against the requests' decode time (TPOT_FACTOR): vLLM's tpot is (e2el - ttft) / (output - 1) of
    each request with more than one output token, 0 when none has; so 0 with more output tokens than
    requests is no measurement either."""
    lat = parsed["latency_ms"]
    for metric, vals in lat.items():
        for stat, v in vals.items():
            if v is not None and v < 0:
                return f"{stat}_{metric}_ms is {v:g}: a time is never negative"
    for metric, vals in lat.items():  # vLLM writes the median as `median_` and, when asked, as `p50_` too
        med, p50 = vals.get("median"), vals.get("p50")
        if med is not None and p50 is not None and abs(med - p50) > AGREE * max(med, p50):
            return (
                f"median_{metric}_ms {med:g} contradicts p50_{metric}_ms {p50:g}: one statistic, two values"
            )
    for metric, vals in lat.items():  # vLLM's np.percentile: a higher percentile is never lower
        by_p = {stat[1:]: v for stat, v in vals.items() if stat.startswith("p") and v is not None}
        if "50" not in by_p and vals.get("median") is not None:
            by_p["50"] = vals["median"]  # type: ignore[assignment]
        if why := _order_problem(by_p, "p{}_" + metric + "_ms"):  # type: ignore[arg-type]
            return why
    if why := (
        _within_request(lat)
        or _spread_problem(lat, parsed["completed"], parsed["total_output_tokens"])
        or _top_percentile_problem(lat, parsed["completed"])
    ):
        return why
    ttft, tpot, e2el = ((lat.get(m) or {}).get("mean") for m in ("ttft", "tpot", "e2el"))
    done, outs = parsed["completed"], parsed["total_output_tokens"]
    if tpot is None or ttft is None or e2el is None or not done or outs is None or outs <= done:
        return None
    decode = e2el - ttft  # ms a request spends after its first token
    after_first = outs / done - 1  # tokens per request after its first
    if tpot == 0 or not 1 / TPOT_FACTOR <= tpot * after_first / max(decode, 1e-9) <= TPOT_FACTOR:
        return (
            f"mean_tpot_ms {tpot:g} contradicts the requests' decode time: {after_first:.4g} tokens after the "
            f"first in mean_e2el_ms - mean_ttft_ms = {decode:.4g} ms is {decode / after_first:.4g} ms a token"
        )
    return None


def _within_request(lat: dict[str, dict[str, float | None]]) -> str | None:
    """Why the ttft statistics of `lat` (parse_serve's latency_ms, ms) exceed their request's: each
    request's first token is part of it (ttft <= e2el, one list each of the completed requests, vLLM
    and SGLang alike), so its mean, median and every percentile (np.percentile of two lists one
    dominates, element by element once sorted) are at most e2el's same statistic, to AGREE."""
    ttft, e2el = lat.get("ttft") or {}, lat.get("e2el") or {}
    for stat, v in ttft.items():
        w = e2el.get(stat)
        if stat != "std" and v is not None and w is not None and v > w * (1 + AGREE):
            return (
                f"{stat}_ttft_ms {v:g} is more than {stat}_e2el_ms {w:g}: the first token is part of the request "
                "(every request's ttft is within its e2el, so each statistic of them is too)"
            )
    return None


def _top_percentile_problem(lat: dict[str, dict[str, float | None]], done: float | None) -> str | None:
    """Why a high percentile of ttft or e2el (ms, one value per completed request: `done` of them) is
    below its mean, or None. np.percentile's pq of n values lies at h = q/100 x (n-1) of the sorted
    values; when h is at or past n-2 (p99 of up to 100 values) only the largest lies above it, and
    pq - mean >= (largest - second) x (h - (n-2) - 1/n), at least 0 where h - (n-2) >= 1/n. Of more
    values a few outliers may pull the mean above a p99: not held. _slack aside."""
    if not done or done != int(done):
        return None
    n = int(done)
    for metric in ("ttft", "e2el"):
        vals = lat.get(metric) or {}
        mean = vals.get("mean")
        for stat, v in vals.items():
            q = float(stat[1:]) if stat.startswith("p") else None  # parse_serve's pN: N a decimal number
            if mean is None or v is None or q is None or not 0 <= q <= 100:
                continue
            h = q / 100 * (n - 1)
            if (h >= n - 1 or (h >= n - 2 and h - (n - 2) >= 1 / n - 1e-9)) and v + _slack(v, mean) < mean:
                return (
                    f"{stat}_{metric}_ms {v:g} is below mean_{metric}_ms {mean:g}: of {n} values (one a completed "
                    f"request) the {stat} lies above all but the largest, so it is at least their mean"
                )
    return None


def _spread_problem(
    lat: dict[str, dict[str, float | None]], done: float | None, outs: float | None
) -> str | None:
    """Why a latency's std (np.std, ms) or mean is less than its own percentiles allow, or None: of n values,
    two percentiles D apart lie within the values' range, so their std is at least D / sqrt(2n); at least half
    of them are at or above the median, all >= 0, so the mean is at least half the median; and the mean lies
    within one std of any median. The median: `median_`, else `p50_`. n: `done` (completed: one ttft and e2el
    per request, tpot of fewer), for itl `outs` (total output tokens: at most one gap each). AGREE aside."""
    for metric, vals in lat.items():
        n = outs if metric == "itl" else done
        ps = [v for k, v in vals.items() if v is not None and (k == "median" or k.startswith("p"))]
        sd, mean = vals.get("std"), vals.get("mean")
        med = (
            vals.get("p50") if vals.get("median") is None else vals["median"]
        )  # parse_serve keeps median: None
        if n and n >= 1 and sd is not None and len(ps) > 1:
            least = (max(ps) - min(ps)) / math.sqrt(2 * n)
            if sd * (1 + AGREE) + 0.01 < least:
                return (
                    f"std_{metric}_ms {sd:g} is less than its percentiles allow: {n:g} values spanning "
                    f"{min(ps):g}-{max(ps):g} ms have a std of at least {least:.4g} ms"
                )
        if mean is not None and med is not None and mean * (1 + AGREE) + 0.01 < med / 2:
            return (
                f"mean_{metric}_ms {mean:g} is less than half its median {med:g}: half the values are at or "
                "above the median, none below 0"
            )
        if (
            sd is not None
            and mean is not None
            and med is not None
            and abs(mean - med) > sd + _slack(mean, med)
        ):
            return (
                f"std_{metric}_ms {sd:g} is less than its mean {mean:g} and median {med:g} lie apart: of any values "
                "the mean is within one std of the median"
            )
    return None


def _slack(*vals: float) -> float:
    """What _spread_problem allows figures copied by hand to be off by: AGREE of the larger, and 0.01 ms
    (a copy rounded to 2 decimals)."""
    return AGREE * max(map(abs, vals)) + 0.01


def throughput_problem(data: dict[str, Any], output_len: int) -> str | None:
    """Why a `vllm bench throughput` result (keys: elapsed_time, num_requests, total_num_tokens,
    requests_per_second, tokens_per_second; vllm/benchmarks/throughput.py) is no measurement, naming
    the field, or None: elapsed_time not a time above 0; num_requests not a whole count above 0,
    total_num_tokens not one >= 0; each rate not its count / elapsed_time to AGREE; an elapsed_time
    shorter than `output_len` tokens one after another take (MIN_TOKEN_S each)."""
    secs = stats.float_or_none(data.get("elapsed_time"))
    why = _seconds("elapsed_time", data.get("elapsed_time"))
    if why or secs is None:
        return why
    counts: dict[str, float] = {}
    for name, least in (("num_requests", 1), ("total_num_tokens", 0)):
        v = stats.float_or_none(data.get(name))
        if v is not None and not (math.isfinite(v) and v == int(v) and v >= least):
            return f"{name} is {data.get(name)!r:.24}: a count is a whole number (at least {least})"
        if v is not None:
            counts[name] = v
    for name, count in (("requests_per_second", "num_requests"), ("tokens_per_second", "total_num_tokens")):
        rate = _finite(data.get(name))
        if rate is not None and count in counts:
            expect = counts[count] / secs
            if abs(rate - expect) > AGREE * max(expect, rate):
                return f"{name} {rate:g} contradicts {count} {counts[count]:g} over elapsed_time {secs:g} s ({expect:.4g}/s)"
    if secs < output_len * MIN_TOKEN_S:
        return (
            f"elapsed_time {secs:g} s is shorter than {output_len} output tokens one after another allow: each is a "
            f"forward pass of the model, at least {MIN_TOKEN_S * 1e6:g} us ({output_len * MIN_TOKEN_S:g} s)"
        )
    return None


def serve_timing_problem(data: dict[str, Any], peaks: bool = True) -> str | None:
    """The rules a serve result is held to after serve_problem, one list for `toolkit import`
    (vllm_import._serve) and for a stored import on read (record_check): serve_duration_problem, then
    serve_peak_problem where `peaks` (vLLM's own counting; SGLang's bench_serving counts its peak
    otherwise: False there). None where the result passes them."""
    return serve_duration_problem(data) or (serve_peak_problem(data) if peaks else None)


def serve_duration_problem(data: dict[str, Any]) -> str | None:
    """Why a `vllm bench serve` result's duration is shorter than its own requests allow, or None. vLLM
    (vllm/benchmarks/serve.py `benchmark`) times the duration from before the first request is sent to after
    the last returns, at most max_concurrency requests at once: so no latency statistic (mean, median, pN)
    passes the duration, no std half of it, nor one request's ttft + its itls (--save-detailed's `ttfts`,
    `itls`); and the requests' summed time (completed x mean_e2el_ms, or those sums) passes duration x
    max_concurrency by no more than AGREE."""
    parsed = parse_serve(data)
    secs, lat, c = parsed["duration"], parsed["latency_ms"], parsed["max_concurrency"]
    if not secs:
        return None
    for metric, vals in lat.items():
        for stat, v in vals.items():
            if stat != "std" and v is not None and v > 1000 * secs * (1 + AGREE):
                return f"{stat}_{metric}_ms {v:g} is longer than duration {secs:g} s: every request is timed within it"
            if stat == "std" and v is not None and v > 500 * secs * (1 + AGREE):
                return (
                    f"std_{metric}_ms {v:g} is more than half of duration {secs:g} s: times that all lie within "
                    "the duration spread by at most half of it (numpy's std)"
                )
    lows = _request_lows(data)
    if lows and max(lows) > secs * (1 + AGREE):
        return f"a request's ttft + itls take {max(lows):.4g} s, longer than duration {secs:g} s"
    e2el, done = (lat.get("e2el") or {}).get("mean"), parsed["completed"]
    sums = (
        [(done * e2el / 1000, done, f"{done:g} completed of mean_e2el_ms {e2el:g}")] if e2el and done else []
    )
    sums += [(sum(lows), len(lows), f"the ttfts + itls of {len(lows)} requests")] if lows else []
    for total, n, what in sums:
        least = total / min(c or n, n)  # seconds the requests take, at most c of them at once
        if least > secs * (1 + AGREE):
            return (
                f"duration {secs:g} s is shorter than its requests allow: {what}, at most {min(c or n, n):g} at "
                f"once{' (max_concurrency)' if c and c < n else ''}, take at least {least:.4g} s"
            )
    return None


def serve_peak_problem(data: dict[str, Any]) -> str | None:
    """Why a `vllm bench serve` result's peaks contradict its totals, naming the fields, or None. vLLM
    (vllm/benchmarks/serve.py calculate_metrics) counts over the successful requests only: each request's
    first token and each streamed chunk after it into 1-s buckets from the first request's start, and each
    request once in every bucket from its start to its end, over at most ceil(duration) + 1 buckets;
    max_output_tokens_per_s and max_concurrent_requests are the fullest bucket's counts. So
    max_concurrent_requests <= completed; max_output_tokens_per_s <= total_output_tokens + completed; and with
    a request completed, max_output_tokens_per_s >= completed / (ceil(duration) + 1) and
    max_concurrent_requests >= completed x max(1, mean_e2el_ms / 1000) / (ceil(duration) + 1), to AGREE. Not
    held: a peak below output_throughput (a chunk may carry several tokens) nor a max_concurrent_requests
    above max_concurrency (two short requests in turn share a bucket)."""
    parsed = parse_serve(data)
    done, outs, secs = parsed["completed"], parsed["total_output_tokens"], parsed["duration"]
    peak, conc = parsed["max_output_tokens_per_s"], parsed["max_concurrent_requests"]
    if done is None:
        return None
    if conc is not None and conc > done:
        return f"max_concurrent_requests {conc:g} is more than completed {done:g}: each completed request counts once a second"
    if peak is not None and outs is not None and peak > (outs + done) * (1 + AGREE):
        return (
            f"max_output_tokens_per_s {peak:g} is more than total_output_tokens {outs:g} (+ completed {done:g}): "
            "the peak second counts tokens the requests produced"
        )
    if not done or not secs:
        return None
    buckets = math.ceil(secs * (1 - AGREE)) + 1  # seconds the requests span, counted as vLLM counts them
    e2el = (parsed["latency_ms"].get("e2el") or {}).get("mean")
    least = {
        "max_output_tokens_per_s": (done / buckets, "one first token a completed request"),
        "max_concurrent_requests": (
            done * max(1.0, (e2el or 0) / 1000) / buckets,
            "each completed request in every second it ran" + (f" (mean_e2el_ms {e2el:g})" if e2el else ""),
        ),
    }
    for name, (low, why) in least.items():
        got = parsed[name]
        if got is not None and got < low * (1 - AGREE):
            return (
                f"{name} {got:g} is below what completed {done:g} in duration {secs:g} s give: {why}, over at most "
                f"{buckets} one-second buckets, puts at least {low:.4g} in the fullest"
            )
    return None


def _request_lows(data: dict[str, Any]) -> list[float]:
    """Per request of a --save-detailed result, seconds its e2el is at least: its ttft + its itls
    (`ttfts`, `itls`: a failed request's are 0 and []); [] when the result has no such lists."""
    ttfts, itls = data.get("ttfts"), data.get("itls")
    if not isinstance(ttfts, list) or not isinstance(itls, list) or len(ttfts) != len(itls):
        return []
    gaps = [i if isinstance(i, list) else [] for i in itls]
    return [
        sum(f for x in (t, *g) if (f := _finite(x)) is not None and f > 0)
        for t, g in zip(ttfts, gaps, strict=True)
    ]


def served_shortfall_error(
    parsed: dict[str, Any],
    *,
    num_prompts: int,
    output_len: int,
    ignore_eos: bool = True,
    tolerance: float = SERVED_TOLERANCE,
) -> str | None:
    """Why a `vllm bench serve` result did not measure what was asked, or None. parsed: `parse_serve` of the
    result; asked: `num_prompts` requests of `output_len` tokens each. Generated = total_output_tokens. With
    --ignore-eos the counts must match exactly; without it a shortfall up to `tolerance` (relative) is
    accepted. More than asked beyond `tolerance` is refused too. Per-request `output_lens`, when the result
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


def served_error(
    what: str, parsed: dict[str, Any], num_prompts: int, output_len: int, *, ignore_eos: bool
) -> str | None:
    """Why a served level's parsed result (`parse_serve`) is not a measurement, prefixed with `what`
    (the command and its level): no request completed, some of `num_prompts` failed, no output
    throughput, or fewer tokens than asked for (served_shortfall_error); None when it is one. The one
    rule of the vLLM runner and `toolkit import`."""
    if not parsed["completed"]:
        return f"{what}: no request completed"
    if parsed["failed"]:
        return f"{what}: {parsed['failed']:.0f} of {num_prompts} requests failed"
    if parsed["output_throughput"] is None:
        return f"{what}: the result has no output_throughput"
    if short := served_shortfall_error(
        parsed, num_prompts=num_prompts, output_len=output_len, ignore_eos=ignore_eos
    ):
        return f"{what}: {short}"
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


LOCAL_DATE_FORMATS = ("%Y%m%d-%H%M%S", "%Y-%m-%d %H:%M:%S")
"""How a vLLM result file writes its `date`: `datetime.now().strftime("%Y%m%d-%H%M%S")` as it saves the
result (vllm/benchmarks/serve.py, latency.py, throughput.py, and the older benchmarks/benchmark_*.py),
`"%Y-%m-%d %H:%M:%S"` in some forks: the benchmark host's local time, with no zone."""


def local_date(v: Any) -> datetime | None:
    """The naive datetime (local time of the benchmark host, zone unknown) of a vLLM result's `date`
    (LOCAL_DATE_FORMATS), None for anything else (absent, another shape, a date that does not exist)."""
    if not isinstance(v, str) or len(v) > 19:
        return None
    for fmt in LOCAL_DATE_FORMATS:
        try:
            return datetime.strptime(v, fmt)
        except ValueError:
            continue
    return None


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


def latency_record_problem(
    method: str, tokens: int, avg_ts: float | None, samples: list[float], raw: Any
) -> str | None:
    """Why an ok `vllm bench latency` record's speed is not what its own result `raw` gives, None where it is
    (or `raw` is not of that shape). `method` METHOD_PREFILL: raw is the result, avg_ts = `tokens` (n_prompt)
    / its avg (parse_latency), samples_ts = tokens / each latency; METHOD_DECODE: raw is {"long": result,
    "short": the output-1 result}, avg_ts = `tokens` (n_gen) / (long avg - short avg), samples_ts = tokens /
    (each long latency - short avg). Held to AGREE, each sample (rounded to 4 decimals) too, and their count.
    """
    if method == METHOD_DECODE and isinstance(raw, dict) and isinstance(raw.get("long"), dict):
        long, _ = parse_latency(raw["long"])
        short, _ = parse_latency(raw["short"]) if isinstance(raw.get("short"), dict) else (None, None)
        if long is None or short is None or long.avg <= short.avg:
            return None  # a result that is no measurement is refused where it is read
        minus, expect = short.avg, tokens / (long.avg - short.avg)
        lats, what = long.latencies, "n_gen over its long run less its short run"
    elif method == METHOD_PREFILL and isinstance(raw, dict) and ("latencies" in raw or "avg_latency" in raw):
        lat, _ = parse_latency(raw)
        if lat is None:
            return None
        minus, expect, lats, what = (
            0.0,
            tokens / lat.avg,
            lat.latencies,
            "n_prompt over its result's avg latency",
        )
    else:
        return None
    if avg_ts is not None and abs(avg_ts - expect) > AGREE * max(avg_ts, expect):
        return f"avg_ts {avg_ts:g} is not {what} ({expect:.6g} tok/s)"
    want = samples_ts(tokens, lats, minus)
    if samples and len(samples) != len(want):
        return f"samples_ts has {len(samples)} value(s), its result's latencies give {len(want)}"
    for i, (got, w) in enumerate(zip(samples, want, strict=False)):
        if abs(got - w) > AGREE * max(got, w):
            return f"samples_ts[{i}] {got:g} is not its result's latencies[{i}] ({w:.6g} tok/s)"
    return None


def sample_sd(xs: list[float]) -> float | None:
    """The sample standard deviation of `xs` (None for fewer than two)."""
    return round(stats.stdev(xs), 4) if len(xs) > 1 else None
