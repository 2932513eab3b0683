"""SGLang on llama-bench's axes: the argument lists of every SGLang command and the parsers of their
output. Pure functions: no Docker, no SGLang import; a runner plug-in wires them into containers.

One method per axis (stored in each record's `method`):

    sglang-bench-one-batch-prefill  pp L: `python -m sglang.benchmark.one_batch --batch-size 1
                                    --input-len L --output-len 1`; tok/s = its `prefill_throughput`
                                    (= batch x L / prefill_latency). One process = one sample: the
                                    caller starts it `repetitions` times for a stddev.
    sglang-bench-one-batch-decode   tg N: the same tool at `--output-len N+1` (N decode steps after the
                                    prefill's token); tok/s = its `median_decode_throughput` (= batch /
                                    median step latency). Runs at input `decode_input_len` (a tiny
                                    input by default): that input length is the context depth the
                                    decode ran at and is recorded; compare with llama-bench `-d L` rows
                                    unless it is tiny.
    sglang-bench-serving            served, per concurrency C: `python -m sglang.benchmark.serving
                                    --backend sglang --dataset-name random ...` by `docker exec` against
                                    a `python -m sglang.launch_server` started in the same container.

Entry modules: `sglang.bench_one_batch` / `sglang.bench_serving` are deprecated shims in the pinned
0.5.15 (they warn, then call the same `cli_main`) and are gone in 0.5.23; the argument lists use the
modules the shims point to, `sglang.benchmark.one_batch` and `sglang.benchmark.serving`, present in
both. The contract test (tests/test_sglang.py) parses every list with the pinned release's own
parsers.

Sources (all read from the sglang 0.5.15 wheel on PyPI):
- `sglang/benchmark/one_batch.py`: `BenchArgs.add_cli_args`, `latency_test_run_once` (the JSONL keys:
  run_name, batch_size, input_len, output_len, prefill_latency, prefill_throughput,
  median_decode_latency, median_decode_throughput [only when output_len > 1], total_latency,
  overall_throughput; seconds and tokens/s), `latency_test` (one warm-up at the first batch/input
  length, then one run per point; lines APPENDED to --result-filename). Its prefill is one
  `ScheduleBatch` extend of the whole input: the scheduler's chunked prefill does not apply there.
- `sglang/benchmark/serving.py`: `cli_main` flags, `benchmark()` result object (one JSON line appended
  to --output-file; `request_rate` is the float inf, written by json.dumps as `Infinity`; keys
  completed, total_input_tokens, total_output_tokens, request/input/output/total_throughput,
  duration, {mean,median,std,p90,p95,p99}_{ttft,tpot,itl,e2e_latency}_ms; `--output-details` adds
  per-request input_lens/output_lens/ttfts/itls/errors). `--random-range-ratio` defaults to 0.0 =
  lengths drawn from [0, L]: pinned to 1 for fixed lengths. EOS is ignored unless
  `--disable-ignore-eos`.
- `sglang/srt/server_args.py`: `ServerArgs` fields (`--attention-backend`, `--kv-cache-dtype`,
  `--chunked-prefill-size`, `--cuda-graph-backend-decode/-prefill` in {full, breakable,
  tc_piecewise, disabled}; `--disable-cuda-graph` is deprecated there).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolkit.core import jsonsafe
from toolkit.core.types import MAX_TOKENS
from toolkit.matrix.api import MAX_COUNT

METHOD_PREFILL = "sglang-bench-one-batch-prefill"
METHOD_DECODE = "sglang-bench-one-batch-decode"
METHOD_SERVE = "sglang-bench-serving"
MODULE_ONE_BATCH = "sglang.benchmark.one_batch"
MODULE_SERVING = "sglang.benchmark.serving"
MODULE_SERVER = "sglang.launch_server"
SERVE_PORT = 30000  # ServerArgs.port default; the server listens on the container's loopback only
DECODE_TINY_INPUT_LEN = 16  # tokens: the default decode context, close to llama-bench tg at depth 0
PYTHON = "python3"


class SglangSettings(BaseModel):
    """Engine settings pinned for every SGLang run and stored with each record (units: tokens unless
    named otherwise). The micro-batch is not here: `chunked_prefill_size` is pinned per test to the
    matrix's `n_ubatch` (see `server_args`).

    attention_backend: `--attention-backend` (triton on gfx1201: AITER fails there, ROCm/TheRock#7700).
    kv_cache_dtype: `--kv-cache-dtype` (auto = the model's dtype). cuda_graph: decode CUDA/HIP graphs
    on (`full`) or off (`disabled`); prefill graphs are always `disabled` (piecewise prefill graphs go
    through torch.compile, which the community RDNA4 series disables on HIP). decode_input_len: the
    context depth of the decode runs (None = DECODE_TINY_INPUT_LEN). mem_fraction_static: fraction
    of VRAM for weights + KV cache. ready_timeout_s: seconds to wait for launch_server's /health.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # as matrix.py's blocks

    attention_backend: str = "triton"
    kv_cache_dtype: str = "auto"
    cuda_graph: bool = True
    dtype: str = "float16"
    context_length: int = Field(8192, ge=1, le=MAX_TOKENS)
    mem_fraction_static: float = Field(0.85, gt=0, le=1)
    disable_radix_cache: bool = True
    decode_input_len: int | None = Field(None, ge=1, le=MAX_TOKENS)
    concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4, 8])
    num_prompts_per_level: int = Field(32, ge=1, le=MAX_COUNT)
    random_seed: int = Field(0, ge=0, le=2**32 - 1)
    ready_timeout_s: float = Field(1800, gt=0, le=7 * 24 * 3600)

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        if not v or any(c < 1 or c > MAX_COUNT for c in v):
            raise ValueError(f"concurrency levels must be a non-empty list of integers from 1 to {MAX_COUNT}")
        if len(set(v)) != len(v):  # a level twice would be measured twice and shown as one test
            raise ValueError(f"concurrency {v} has duplicate levels; give each once, e.g. [1, 2, 4, 8]")
        return v


# ---------------------------------------------------------------------------------------------
# Argument lists


def server_args(model_dir: str, s: SglangSettings, *, chunked_prefill_size: int) -> list[str]:
    """The `ServerArgs` flags shared by `launch_server` and `benchmark.one_batch` (which parses the
    same dataclass). Every setting that changes a number is explicit, so a changed default in a new
    release cannot silently change what is measured. chunked_prefill_size: tokens, the micro-batch
    (matrix `n_ubatch`) of this test; it splits long prompts in the server's scheduler (served runs)
    and is recorded, but `benchmark.one_batch` prefills the whole input in one forward regardless.

    Raises ValueError for a chunked_prefill_size < 1."""
    if chunked_prefill_size < 1:
        raise ValueError(f"chunked_prefill_size must be >= 1 tokens, got {chunked_prefill_size}")
    args = [
        "--model-path",
        model_dir,
        "--tp-size",
        "1",
        "--dtype",
        s.dtype,
        "--context-length",
        str(s.context_length),
        "--mem-fraction-static",
        str(s.mem_fraction_static),
        "--attention-backend",
        s.attention_backend,
        "--kv-cache-dtype",
        s.kv_cache_dtype,
        "--chunked-prefill-size",
        str(chunked_prefill_size),
        "--cuda-graph-backend-decode",
        "full" if s.cuda_graph else "disabled",
        "--cuda-graph-backend-prefill",
        "disabled",
        "--random-seed",
        str(s.random_seed),
    ]
    if s.disable_radix_cache:  # a store_true flag: radix (prefix) caching is on unless it is given
        args.append("--disable-radix-cache")
    return args


def one_batch_args(
    model_dir: str,
    s: SglangSettings,
    *,
    input_len: int,
    output_len: int,
    chunked_prefill_size: int,
    result_file: str,
    run_name: str = "toolkit",
) -> list[str]:
    """`python -m sglang.benchmark.one_batch` for ONE point at batch 1 (one sample: a warm-up at the
    same input length, then one measured run; the caller repeats the process for more samples).
    input_len/output_len: tokens; result_file: the JSONL path inside the container (appended to)."""
    if input_len < 1 or output_len < 1:
        raise ValueError(f"input_len and output_len must be >= 1 tokens, got {input_len}, {output_len}")
    return [
        PYTHON,
        "-m",
        MODULE_ONE_BATCH,
        *server_args(model_dir, s, chunked_prefill_size=chunked_prefill_size),
        "--run-name",
        run_name,
        "--batch-size",
        "1",
        "--input-len",
        str(input_len),
        "--output-len",
        str(output_len),
        "--result-filename",
        result_file,
    ]


def prefill_args(
    model_dir: str, s: SglangSettings, *, prompt_len: int, chunked_prefill_size: int, result_file: str
) -> list[str]:
    """pp L: batch 1, input L tokens, output 1 token (no decode step); tok/s = prefill_throughput."""
    return one_batch_args(
        model_dir,
        s,
        input_len=prompt_len,
        output_len=1,
        chunked_prefill_size=chunked_prefill_size,
        result_file=result_file,
        run_name=f"pp{prompt_len}",
    )


def decode_input_len(s: SglangSettings) -> int:
    """The context depth (tokens) decode runs at: `decode_input_len`, else DECODE_TINY_INPUT_LEN."""
    return s.decode_input_len or DECODE_TINY_INPUT_LEN


def decode_args(
    model_dir: str, s: SglangSettings, *, n_gen: int, chunked_prefill_size: int, result_file: str
) -> list[str]:
    """tg N: batch 1, input `decode_input_len(s)`, output N+1 tokens = N timed decode steps after the
    prefill's token; tok/s = median_decode_throughput."""
    if n_gen < 1:
        raise ValueError(f"n_gen must be >= 1 tokens, got {n_gen}")
    return one_batch_args(
        model_dir,
        s,
        input_len=decode_input_len(s),
        output_len=n_gen + 1,
        chunked_prefill_size=chunked_prefill_size,
        result_file=result_file,
        run_name=f"tg{n_gen}@d{decode_input_len(s)}",
    )


def launch_server_args(model_dir: str, s: SglangSettings, *, chunked_prefill_size: int) -> list[str]:
    """`python -m sglang.launch_server` on the container's loopback (127.0.0.1:SERVE_PORT)."""
    return [
        PYTHON,
        "-m",
        MODULE_SERVER,
        *server_args(model_dir, s, chunked_prefill_size=chunked_prefill_size),
        "--host",
        "127.0.0.1",
        "--port",
        str(SERVE_PORT),
    ]


def bench_serving_args(
    model_dir: str,
    *,
    input_len: int,
    output_len: int,
    concurrency: int,
    num_prompts: int,
    output_file: str,
    seed: int = 0,
) -> list[str]:
    """`python -m sglang.benchmark.serving` against the local server: random prompts of exactly
    input_len tokens (`--random-range-ratio 1`), exactly output_len generated tokens (EOS ignored:
    the tool's default), all requests at once (`--request-rate inf`) with at most `concurrency` in
    flight, `concurrency` warm-up requests first, per-request lengths in the result
    (`--output-details`, for the shortfall check). Raises ValueError when num_prompts < concurrency
    (the level would never reach its concurrency)."""
    if num_prompts < concurrency:
        raise ValueError(
            f"num_prompts {num_prompts} < concurrency {concurrency}: the level would never run "
            f"{concurrency} requests at once"
        )
    return [
        PYTHON,
        "-m",
        MODULE_SERVING,
        "--backend",
        "sglang",
        "--base-url",
        f"http://127.0.0.1:{SERVE_PORT}",
        "--model",
        model_dir,
        "--tokenizer",
        model_dir,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--random-range-ratio",
        "1",
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--warmup-requests",
        str(concurrency),
        "--seed",
        str(seed),
        "--output-details",
        "--disable-tqdm",
        "--output-file",
        output_file,
    ]


def pinned_engine(s: SglangSettings, *, chunked_prefill_size: int, method: str) -> dict[str, Any]:
    """What `server_args` pins, as stored in each record's `engine`, plus `chunked_prefill_applies`:
    False for the bench_one_batch methods (their prefill is one forward of the whole input, read from
    sglang/benchmark/one_batch.py), True for the served method. Raises ValueError for an unknown method."""
    if method not in (METHOD_PREFILL, METHOD_DECODE, METHOD_SERVE):
        raise ValueError(f"unknown SGLang method {method!r}")
    return {
        "attention_backend": s.attention_backend,
        "kv_cache_dtype": s.kv_cache_dtype,
        "dtype": s.dtype,
        "cuda_graph_decode": "full" if s.cuda_graph else "disabled",
        "cuda_graph_prefill": "disabled",
        "chunked_prefill_size": chunked_prefill_size,
        "chunked_prefill_applies": method == METHOD_SERVE,
        "context_length": s.context_length,
        "mem_fraction_static": s.mem_fraction_static,
        "disable_radix_cache": s.disable_radix_cache,
        "random_seed": s.random_seed,
        "tp_size": 1,
        "decode_input_len": decode_input_len(s),
    }


# ---------------------------------------------------------------------------------------------
# Output parsers


class SglangOutputError(ValueError):
    """A result file or line that is not a usable result; the message names the file/line and key."""


def _number(value: Any, key: str, where: str) -> float | None:
    """A finite number, None when absent/null; SglangOutputError for a non-finite or non-numeric value."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SglangOutputError(f"{where}: {key} is {value!r}, not a number")
    if not math.isfinite(value):
        raise SglangOutputError(f"{where}: {key} is {value!r}, not a finite number (refused, never stored)")
    return float(value)


def _loads(text: str, where: str) -> dict[str, Any]:
    try:
        obj = jsonsafe.parse(text)
    except jsonsafe.JsonProblem as err:
        raise SglangOutputError(f"{where}: {err}") from None
    if not isinstance(obj, dict):
        raise SglangOutputError(f"{where}: holds no result object")
    return obj


ONE_BATCH_FLOATS = (
    "prefill_latency",
    "prefill_throughput",
    "median_decode_latency",
    "median_decode_throughput",
    "total_latency",
    "overall_throughput",
)


@dataclass(frozen=True)
class OneBatchPoint:
    """One line of bench_one_batch's JSONL: lengths in tokens, latencies in seconds, throughputs in
    tokens/s. A key the line lacks is None (decode keys are absent when output_len is 1)."""

    run_name: str | None
    batch_size: int | None
    input_len: int | None
    output_len: int | None
    prefill_latency: float | None
    prefill_throughput: float | None
    median_decode_latency: float | None
    median_decode_throughput: float | None
    total_latency: float | None
    overall_throughput: float | None
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


def parse_one_batch_line(line: str, *, where: str = "bench_one_batch result") -> OneBatchPoint:
    """One JSONL line -> OneBatchPoint. Raises SglangOutputError (naming `where` and the key) for a
    line that is not a JSON object or has a non-finite / non-numeric measurement (NaN, Infinity) or
    a non-integer length."""
    obj = _loads(line, where)
    ints: dict[str, int | None] = {}
    for key in ("batch_size", "input_len", "output_len"):
        v = obj.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise SglangOutputError(f"{where}: {key} is {v!r}, not an integer number of tokens")
        ints[key] = v
    nums = {key: _number(obj.get(key), key, where) for key in ONE_BATCH_FLOATS}
    name = obj.get("run_name")
    return OneBatchPoint(
        run_name=str(name) if name is not None else None,
        batch_size=ints["batch_size"],
        input_len=ints["input_len"],
        output_len=ints["output_len"],
        prefill_latency=nums["prefill_latency"],
        prefill_throughput=nums["prefill_throughput"],
        median_decode_latency=nums["median_decode_latency"],
        median_decode_throughput=nums["median_decode_throughput"],
        total_latency=nums["total_latency"],
        overall_throughput=nums["overall_throughput"],
        raw=obj,
    )


def read_one_batch(path: Path) -> tuple[list[OneBatchPoint], list[str]]:
    """Every line of a bench_one_batch --result-filename (appended JSONL): (points, problems). A bad
    line is one problem naming file and line number; the other lines are kept. A missing or empty
    file is one problem and no points."""
    if not path.is_file():
        return [], [f"no result file {path.name} was written"]
    points, problems = [], []
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            points.append(parse_one_batch_line(line, where=f"{path.name} line {n}"))
        except SglangOutputError as err:
            problems.append(str(err))
    if not points and not problems:
        problems.append(f"result file {path.name} is empty")
    return points, problems


def point_value(point: OneBatchPoint, method: str) -> tuple[float | None, str | None]:
    """(tok/s, None) of one point for METHOD_PREFILL (prefill_throughput) or METHOD_DECODE
    (median_decode_throughput), or (None, why not): key missing, or <= 0."""
    key = {METHOD_PREFILL: "prefill_throughput", METHOD_DECODE: "median_decode_throughput"}.get(method)
    if key is None:
        raise ValueError(f"{method!r} is not a bench_one_batch method")
    value = getattr(point, key)
    if value is None:
        return None, f"the result has no {key} (output_len {point.output_len})"
    if value <= 0:
        return None, f"{key} is {value}, not a positive rate"
    return value, None


@dataclass(frozen=True)
class Samples:
    """Repeated samples of one point (tokens/s): mean, sample stddev (None with < 2 samples), median,
    min, max, and every sample in run order."""

    samples: tuple[float, ...]
    mean: float
    stddev: float | None
    median: float
    min: float
    max: float


def summarize(samples: list[float]) -> Samples:
    """Samples of one point, one per bench_one_batch process. Raises ValueError when empty or when a
    sample is not a finite positive number."""
    if not samples:
        raise ValueError("no samples")
    bad = [x for x in samples if not (isinstance(x, int | float) and math.isfinite(x) and x > 0)]
    if bad:
        raise ValueError(f"samples must be finite positive tok/s, got {bad}")
    return Samples(
        tuple(samples),
        statistics.fmean(samples),
        statistics.stdev(samples) if len(samples) > 1 else None,
        statistics.median(samples),
        min(samples),
        max(samples),
    )


SERVING_FLOATS = (
    "duration",
    "request_throughput",
    "input_throughput",
    "output_throughput",
    "total_throughput",
    "concurrency",
    "max_output_tokens_per_s",
)
SERVING_INTS = (
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrency",
    "random_input_len",
    "random_output_len",
    "max_concurrent_requests",
)
# SGLang's metric names -> the names the vLLM records use (so served rows of both share one layout)
_LATENCY = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e_latency": "e2el"}


def parse_serving(obj: dict[str, Any], *, where: str = "bench_serving result") -> dict[str, Any]:
    """One bench_serving result object -> {completed, total_input_tokens, total_output_tokens,
    request/input/output/total_throughput (req/s, tok/s), duration (s), max_concurrency, request_rate
    (a number or "inf"), latency_ms: {ttft|tpot|itl|e2el: {mean, median, std, p90, p95, p99}} (ms),
    output_lens, input_lens (tokens per request, with --output-details), errors (non-empty request
    errors)}. Absent keys are None. Raises SglangOutputError naming the key for a non-finite or
    non-numeric measurement; `request_rate` alone may be infinite (SGLang writes float inf as
    `Infinity`)."""
    out: dict[str, Any] = {k: _number(obj.get(k), k, where) for k in SERVING_FLOATS}
    for k in SERVING_INTS:
        v = _number(obj.get(k), k, where)
        out[k] = int(v) if v is not None else None
    rate = obj.get("request_rate")
    if isinstance(rate, int | float) and not isinstance(rate, bool) and rate == math.inf:
        out["request_rate"] = "inf"
    elif rate in ("inf", "trace"):
        out["request_rate"] = rate
    else:
        out["request_rate"] = _number(rate, "request_rate", where)
    latency: dict[str, dict[str, float | None]] = {}
    for theirs, ours in _LATENCY.items():
        vals = {
            stat: _number(obj.get(f"{stat}_{theirs}_ms"), f"{stat}_{theirs}_ms", where)
            for stat in ("mean", "median", "std", "p90", "p95", "p99")
        }
        if any(v is not None for v in vals.values()):
            latency[ours] = vals
    out["latency_ms"] = latency
    for key in ("output_lens", "input_lens"):
        lens = obj.get(key)
        if isinstance(lens, list):
            out[key] = [int(_number(x, f"{key}[{i}]", where) or 0) for i, x in enumerate(lens)]
    errors = obj.get("errors")
    if isinstance(errors, list):
        out["errors"] = [str(e) for e in errors if e]
    return out


def read_serving(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The LAST object of a bench_serving --output-file (it appends one line per run) parsed with
    `parse_serving`: (parsed, None) or (None, why): missing file, empty, not JSON, non-finite value."""
    if not path.is_file():
        return None, f"no result file {path.name} was written"
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    if not lines:
        return None, f"result file {path.name} is empty"
    try:
        return parse_serving(
            _loads(lines[-1], f"{path.name} line {len(lines)}"), where=f"{path.name} line {len(lines)}"
        ), None
    except SglangOutputError as err:
        return None, str(err)


_FILE_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def result_filename(kind: str, *parts: int | str) -> str:
    """A result file name for one run, e.g. result_filename("pp", 512, "ub2048", "r3") ->
    'sglang-pp-512-ub2048-r3.jsonl' (characters outside [A-Za-z0-9_.-] replaced by '_')."""
    return "sglang-" + "-".join(_FILE_SAFE.sub("_", str(p)) for p in (kind, *parts)) + ".jsonl"


# The attention backend an SGLang process used, in the three forms 0.5.15 logs it (read from the wheel):
# the server's `server_args=ServerArgs(..., attention_backend='triton', ...)` (srt/entrypoints/engine.py
# lines 225 and 796, `logger.info(f"{server_args=}")`, after ServerArgs' post-processing resolved the
# default), `Attention backend not specified. Use triton backend by default.` (srt/arg_groups/overrides.py
# line 1513), and `Using hybrid attention backend for decode and prefill: decode_backend=X,
# prefill_backend=Y.` (srt/model_executor/model_runner.py line 2552). one_batch logs none of them when
# --attention-backend is given.
_SGL_ATTN = (
    re.compile(
        r"Using hybrid attention backend for decode and prefill: decode_backend=(\w+), prefill_backend=(\w+)"
    ),
    re.compile(r"Attention backend not specified\. Use (\w+) backend by default"),
    re.compile(r"(?<![\w.])attention_backend='([^']+)'"),
)


def log_attention_backend(text: str) -> str | None:
    """The attention backend SGLang's log says it used (`triton`; `decode=X prefill=Y` for a hybrid
    backend), the first of _SGL_ATTN's forms found in that order; None when the log names none."""
    for rx in _SGL_ATTN:
        m = rx.search(text)
        if m:
            return m.group(1) if len(m.groups()) == 1 else f"decode={m.group(1)} prefill={m.group(2)}"
    return None
