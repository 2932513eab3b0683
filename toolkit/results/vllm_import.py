"""`vllm bench latency | serve | throughput` result files made elsewhere --> BenchRecords like the runner's.

A file is a vLLM result when it is one JSON object whose keys say which command wrote it (`kind_of`):
latency (`avg_latency`, `latencies`), serve (`output_throughput` with `completed` or `num_prompts`),
throughput (`elapsed_time`, `num_requests`, `tokens_per_second`). The records carry the method fields,
axis and units of toolkit/bench/runners/vllm.py, judged by the same code (runtimes/vllm/output.py):

    lat-L-1.json                prefill  vllm-bench-latency-prefill  pp L    avg_ts = L / avg_latency
    lat-L-(N+1).json + lat-L-1  decode   vllm-bench-latency-decode   tg N    avg_ts = N / difference,
                                         failed when the difference is within the noise of the two runs
    serve-L-N-cC.json           served   vllm-bench-serve            serve ppL+tgN cC  avg_ts = output tok/s,
                                         failed when fewer tokens were generated than requested
                                         (`served_shortfall_error`: "generated 8 of 256 requested tokens")
    throughput-L-N.json         served   vllm-bench-throughput       throughput ppL+tgN  avg_ts = output tok/s

The lengths asked are not in vLLM's result files: they come from the file name (the runner's own
names above) or from --input-len / --output-len; a serve result's input length also from
total_input_tokens / num_prompts. A file that says too little is BadInput naming it and what to give.

SGLang's `bench_serving` writes the same serve keys (it began as vLLM's benchmark_serving) and more
(`tool_of`: `total_output_tokens_retokenized`, `random_range_ratio`, a `backend` of `sglang*`): its
records are `sglang-bench-serving` (runner sglang), and the lengths it was asked for are in it
(`random_input_len`, `random_output_len` of the random dataset), exact only at random_range_ratio 1:
below it each request drew its own lengths (max(int(L x ratio), 1) .. L, sglang bench_serving
sample_random_requests), no one pp/tg length, refused saying so. Its --output-file gets one JSON line
per run appended: such a file is read one result per line (`each_run`), each filed as its own record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.core import jsonsafe
from toolkit.core.errors import BadInput
from toolkit.results.records import BenchRecord, ImageRef, ModelRef
from toolkit.results.served_check import served_problem
from toolkit.results.time_check import local_date_problem
from toolkit.runtimes.vllm import output as vf

# the runner's file names (lat-IN-OUT.json, serve-IN-OUT-cC.json, throughput-IN-OUT.json), matched on
# the name without .json as a whole word at its end: `observe-128-32-c2.json` is no serve name
_NAMES = {
    "latency": re.compile(r"(?:^|[-_.])lat(?:ency)?-(?P<i>\d{1,9})-(?P<o>\d{1,9})$"),
    "serve": re.compile(r"(?:^|[-_.])serve-(?P<i>\d{1,9})-(?P<o>\d{1,9})(?:-c(?P<c>\d{1,9}))?$"),
    "throughput": re.compile(r"(?:^|[-_.])throughput-(?P<i>\d{1,9})-(?P<o>\d{1,9})$"),
}


def kind_of(data: Any) -> str | None:
    """Which `vllm bench` command wrote this JSON value (by its keys), or None."""
    if not isinstance(data, dict):
        return None
    keys = set(data)
    if "avg_latency" in keys or {"latencies", "percentiles"} <= keys:
        return "latency"
    if "output_throughput" in keys and keys & {"completed", "num_prompts", "total_output_tokens"}:
        return "serve"
    if {"elapsed_time", "num_requests"} <= keys and keys & {"tokens_per_second", "total_num_tokens"}:
        return "throughput"
    return None


@dataclass
class VllmFile:
    path: Path
    data: bytes
    result: dict[str, Any]
    kind: str
    input_len: int | None = None
    output_len: int | None = None
    concurrency: int | None = None
    notes: list[str] = field(default_factory=list)
    tool: str = "vllm"  # tool_of: "vllm" or "sglang" (its bench_serving)
    line: int = 1  # the line of the file the result is on (SGLang appends one per run)
    more: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (line, result) of the next runs


SGLANG_SERVE = "sglang-bench-serving"  # runtimes/sglang/args.METHOD_SERVE, the SGLang runner's method

SGLANG_KEYS = frozenset({"total_output_tokens_retokenized", "random_range_ratio", "sharegpt_output_len"})
"""Keys only SGLang's bench_serving writes into a serve result (vLLM's never has them)."""


def tool_of(result: dict[str, Any]) -> str:
    """The tool that wrote a serve result: "sglang" for SGLang's bench_serving (its own keys,
    SGLANG_KEYS, or a `backend` of `sglang`, `sglang-oai`, ...: it also drives vLLM servers, whose
    name `backend` then holds), else "vllm"."""
    backend = result.get("backend")
    if SGLANG_KEYS & set(result) or (isinstance(backend, str) and backend.startswith("sglang")):
        return "sglang"
    return "vllm"


def each_run(f: VllmFile) -> list[VllmFile]:
    """`f` and one VllmFile per further run of its file (SGLang's --output-file: one line per run)."""
    return [f] + [VllmFile(f.path, f.data, r, "serve", tool=tool_of(r), line=n) for n, r in f.more]


def _runs(path: Path, head: bytes) -> VllmFile | None:
    """The file as JSON lines of serve results (SGLang's bench_serving appends one per run), or None
    when a non-blank line is anything else (llama-bench -o jsonl: the llama-bench reader reads it)."""
    runs: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(head.lstrip(b"\xef\xbb\xbf").split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            data = jsonsafe.parse(line)
        except jsonsafe.JsonProblem:
            return None
        if kind_of(data) != "serve":
            return None
        if jsonsafe.may_repeat(line, data) and (key := jsonsafe.duplicate_key(line)) is not None:
            raise BadInput(f"{path}:{n}: {jsonsafe.said(key)}; nothing imported")
        runs.append((n, data))
    if not runs:
        return None
    (n, first), rest = runs[0], runs[1:]
    return VllmFile(path, head, first, "serve", tool=tool_of(first), line=n, more=rest)


def sniff(path: Path) -> VllmFile | None:
    """The file as a vLLM result, or None when it is not one (llama-bench output, anything else: the
    llama-bench reader then says what it is). Only a file holding one JSON object, or JSON lines of
    serve results (SGLang's --output-file, `_runs`), is read whole. BadInput naming the file, the line and the key when the result names a key twice (JSON keeps the
    last value: which one vLLM measured is unknown)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(jsonsafe.MAX_LINE_BYTES + 1)
    except OSError:
        return None  # the llama-bench reader names the file and the error
    if len(head) > jsonsafe.MAX_LINE_BYTES or not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return None
    try:
        data = jsonsafe.parse(head.lstrip(b"\xef\xbb\xbf"))
    except jsonsafe.JsonProblem:
        return _runs(path, head)  # JSON lines of serve results (SGLang's), else not a served result file
    kind = kind_of(data)
    if kind is None:
        return None
    if jsonsafe.may_repeat(head, data) and (key := jsonsafe.duplicate_key(head)) is not None:
        at = jsonsafe.key_line(head.decode("utf-8", "replace"), key)
        raise BadInput(f"{path}:{at}: {jsonsafe.said(key)}; nothing imported")
    return VllmFile(path, head, data, kind, tool=tool_of(data) if kind == "serve" else "vllm")


_MAX_COUNT = (
    10_000_000  # requests, tokens or concurrency above this are no benchmark (a unit or parser error)
)


def _int(v: Any) -> int | None:
    """A positive whole count up to _MAX_COUNT, else None (never raises: a 400-digit integer is None)."""
    try:
        f = vf._finite(v)
        return int(f) if f is not None and f == int(f) and 0 < f <= _MAX_COUNT else None
    except (OverflowError, TypeError, ValueError):
        return None


# A prompt's length may differ from the asked one by this share (at least one token) where a random
# dataset's prompt is re-encoded (vLLM's "token mismatch"); beyond it the file is another run's.
ALIGN_TOKENS = 0.01


def _off(each: float, asked: int) -> bool:
    """Whether a mean prompt length `each` lies beyond ALIGN_TOKENS (at least one token) of `asked`."""
    return abs(each - asked) > max(1.0, ALIGN_TOKENS * asked)


def resolve_lengths(f: VllmFile, input_len: int | None, output_len: int | None) -> None:
    """Fill the lengths asked: --input-len / --output-len, else the runner's file name, else (serve
    input, concurrency) the result's own counts; BadInput naming the file when one stays unknown, or
    when an option contradicts what the file says (a typo must not become a stored measurement)."""
    stem = f.path.name.removesuffix(".json")
    m = _NAMES[f.kind].search(stem)
    # what the file says of each length, and where: its name, or (serve input) its own token counts
    says: dict[str, tuple[int, str]] = {}
    if m:
        says = {
            "--input-len": (int(m.group("i")), "its name"),
            "--output-len": (int(m.group("o")), "its name"),
        }
    if f.kind == "serve" and f.tool == "sglang":
        says.update(_asked_by_sglang(f, says))
    if f.kind == "serve":
        # total_input_tokens sums the COMPLETED requests' prompts (vLLM calculate_metrics): a failed
        # request is in num_prompts, not in the sum. A random prompt may come out a token off its asked
        # length (re-encoding), so a length is held to the mean within ALIGN_TOKENS (a typo is not).
        prompts = _int(f.result.get("num_prompts"))
        done = _int(f.result.get("completed")) or prompts
        tokens = _int(f.result.get("total_input_tokens"))
        # more completed than sent: the result's own counts check says so (vllm output.serve_problem)
        each = tokens / done if done and tokens and not (prompts and done > prompts) else None
        counts = f"its own token counts ({tokens} over {done} completed requests)"
        by_name, where = says.get("--input-len", (None, "its name"))
        if each is not None and by_name and _off(each, by_name):
            raise BadInput(
                f"{f.path}: {where} says {by_name} input tokens, its own counts {each:.4g} ({tokens} over "
                f"{done} completed requests): rename the file as the run was; nothing imported"
            )
        if each is not None and input_len and _off(each, input_len):
            raise BadInput(
                f"{f.path}: --input-len {input_len} contradicts the file: {counts} say {each:.4g}; drop "
                "--input-len, or give the length the benchmark ran with; nothing imported"
            )
        if each is not None and each.is_integer() and by_name is None and input_len is None:
            says["--input-len"] = (int(each), counts)
    for opt, given in (("--input-len", input_len), ("--output-len", output_len)):
        if given is not None and opt in says and given != says[opt][0]:
            raise BadInput(
                f"{f.path}: {opt} {given} contradicts the file: {says[opt][1]} say(s) {says[opt][0]}; drop "
                f"{opt}, or give the length the benchmark ran with; nothing imported"
            )
    named = {opt: v for opt, (v, _where) in says.items()}
    f.input_len = input_len or named.get("--input-len")
    f.output_len = output_len or named.get("--output-len")
    if f.kind == "serve":
        c = m.group("c") if m else None
        said = _int(f.result.get("max_concurrency"))
        # `max_concurrency: null` is vLLM's word for no cap (it writes the key since 0.6.3): a name's cN
        # then contradicts what ran, as another number does; only a result without the key leaves the
        # name to say it (an older vLLM's)
        uncapped = "max_concurrency" in f.result and f.result["max_concurrency"] is None
        f.concurrency = said or (int(c) if c and not uncapped else None)
        if uncapped and c:
            f.notes.append(
                f"{f.path}: the file name says concurrency {int(c)}, the result says max_concurrency null (no "
                f"cap, request rate {f.result.get('request_rate')}): filed without a concurrency (what the "
                "benchmark ran)"
            )
        if said and c and int(c) != said:
            f.notes.append(
                f"{f.path}: the file name says concurrency {int(c)}, the result says max_concurrency {said}: "
                f"filed as c{said} (what the benchmark ran)"
            )
    missing = [
        opt
        for opt, v in (("--input-len", f.input_len), ("--output-len", f.output_len))
        if v is None or v <= 0
    ]
    if missing:
        runner_name = {"latency": "lat-IN-OUT.json", "serve": "serve-IN-OUT-cC.json"}.get(
            f.kind, "throughput-IN-OUT.json"
        )
        raise BadInput(
            f"{f.path}: {_what(f)} result {_none_completed(f)}does not say the lengths it was asked for: give "
            f"{' and '.join(missing)}, or name the file as the toolkit's runner does ({runner_name})"
        )


def _none_completed(f: VllmFile) -> str:
    """The refusal's word on a serve result of which no request completed (`completed` 0; `failed` N
    where vLLM 0.10+ says it): it measured nothing, so its lengths only file it as a failed run; ""
    otherwise."""
    r = f.result
    if f.kind != "serve" or r.get("completed") != 0 or isinstance(r.get("completed"), bool):
        return ""
    failed = r.get("failed")
    of = (
        f" ({failed} failed)"
        if isinstance(failed, int) and not isinstance(failed, bool) and failed > 0
        else ""
    )
    return (
        f"in which no request completed{of} measured nothing (given the lengths, it is stored as a failed run, "
        "saying so; the server's log says why its requests failed) and "
    )


def _what(f: VllmFile) -> str:
    """The command that wrote `f`, for a message: "a `vllm bench serve`", "an SGLang `bench_serving`"."""
    return "an SGLang `bench_serving`" if f.tool == "sglang" else f"a `vllm bench {f.kind}`"


def _asked_by_sglang(f: VllmFile, says: dict[str, tuple[int, str]]) -> dict[str, tuple[int, str]]:
    """The lengths an SGLang bench_serving result says it was asked for ({option: (tokens, where)}):
    random_input_len / random_output_len of its random dataset at random_range_ratio 1 (every request
    at exactly those lengths). BadInput naming the file (and line) when they contradict its name, or
    when the ratio is below 1: each request drew its lengths from max(int(L x ratio), 1) to L (SGLang's
    sample_random_requests), so the run measured no one pp/tg length."""
    r = f.result
    lengths = {
        "--input-len": _int(r.get("random_input_len")),
        "--output-len": _int(r.get("random_output_len")),
    }
    if r.get("dataset_name") != "random" or None in lengths.values():
        return {}  # sharegpt and the other datasets: the lengths are the prompts' own
    at = f"{f.path}:{f.line}" if f.line > 1 or f.more else str(f.path)
    ratio = vf._finite(r.get("random_range_ratio"))
    if ratio is None or not 0 <= ratio <= 1:
        raise BadInput(
            f"{at}: random_range_ratio {r.get('random_range_ratio')!r} is no ratio; nothing imported"
        )
    drawn = {k: (max(int(v * ratio), 1), v) for k, v in lengths.items() if v is not None}
    if any(lo != hi for lo, hi in drawn.values()):
        (li, hi_in), (lo, ho) = drawn["--input-len"], drawn["--output-len"]
        raise BadInput(
            f"{at}: SGLang bench_serving drew each request's lengths at random (random_range_ratio "
            f"{ratio:g}: input {li}..{hi_in}, output {lo}..{ho} tokens): the run measured no one pp/tg "
            "length to file it under; nothing imported (run it with --random-range-ratio 1)"
        )
    for opt, v in lengths.items():
        if opt in says and v is not None and says[opt][0] != v:
            raise BadInput(
                f"{at}: its name says {opt} {says[opt][0]}, its random_{opt[2:].replace('-len', '')}_len "
                f"{v}: rename the file as the run was; nothing imported"
            )
    return {opt: (v, f"its random_{opt[2:].replace('-len', '')}_len") for opt, v in lengths.items() if v}


def _model(result: dict[str, Any], sha: str) -> ModelRef:
    mid = str(result.get("model_id") or result.get("model") or "")
    return ModelRef(name=Path(mid).name or "unknown", path=mid, sha256=sha, size_bytes=0)


def format_of(f: VllmFile) -> str:
    """The format a result is imported as: vllm-bench-<kind_of>, or sglang-bench-serving."""
    return "sglang-bench-serving" if f.tool == "sglang" else f"vllm-bench-{f.kind}"


def records(
    files: list[VllmFile],
    *,
    image: ImageRef,
    run_id: str,
    created: str,
    model_sha256: str,
    content: str,
    file_sha: dict[Path, str],
) -> list[BenchRecord]:
    """The records of these (length-resolved) vLLM result files, in file order; a decode run without
    the output-1 run of its input length is BadInput naming it; ValueError for a `date` no run has
    (time_check.local_date_problem: before vLLM, or ahead of the import by more than any zone), for a served record whose
    avg_ts is not its own figures' (served_check: the rule a stored one is read by)."""
    out: list[BenchRecord] = []
    refs = {
        (f.input_len, 1): f for f in files if f.kind == "latency" and f.output_len == 1
    }  # the decode reference runs
    for f in files:
        assert f.input_len is not None and f.output_len is not None
        L, O = f.input_len, f.output_len  # noqa: E741
        if why := local_date_problem(f.result.get("date"), datetime.fromisoformat(created)):
            raise ValueError(why)  # the rule a stored one is read by (time_check.times_problem)
        base = dict(
            run_id=run_id,
            created=created,
            runner=f.tool,
            image=image,
            model=_model(f.result, model_sha256),
            imported={
                "file": str(f.path),
                "line": f.line,
                "format": format_of(f),
                "file_sha256": file_sha[f.path],
                "sha256": content,
            },
        )
        if f.kind == "latency":
            out.append(_latency(f, base, L, O, refs.get((L, 1))))
        elif f.kind == "serve":
            out.append(_serve(f, base, L, O))
        else:
            out.append(_throughput(f, base, L, O))
        rec = out[-1]
        if rec.status == "ok" and rec.axis == "served":  # the rule a stored one is read by
            why = served_problem(
                rec.method, rec.avg_ts, rec.n_gen, (rec.model_extra or {}).get("served"), rec.raw
            )
            if why:
                raise ValueError(why)
    return out


def _latency(
    f: VllmFile,
    base: dict[str, Any],
    L: int,
    O: int,  # noqa: E741
    ref: VllmFile | None,
) -> BenchRecord:
    """`vllm bench latency`: at output 1 the prefill record (avg_ts = L / avg_latency), else the decode
    record (_decode, against `ref`); BadInput for a result that says too little."""
    lat, why = vf.parse_latency(f.result)
    if lat is None:
        raise BadInput(f"{f.path}: a `vllm bench latency` result that is no measurement: {why}")
    if O != 1:
        return _decode(f, base, L, O, lat, ref)
    samples = vf.samples_ts(L, lat.latencies)
    return BenchRecord(
        **base,
        test=f"pp{L}",
        axis="prefill",
        method=vf.METHOD_PREFILL,
        n_prompt=L,
        avg_ts=round(L / lat.avg, 4),
        stddev_ts=vf.sample_sd(samples),
        samples_ts=samples,
        engine={"input_len": L, "output_len": 1},
        raw=f.result,
    )


def _decode(
    f: VllmFile,
    base: dict[str, Any],
    L: int,
    O: int,  # noqa: E741
    lat: vf.Latency,
    ref: VllmFile | None,
) -> BenchRecord:
    """A latency run at output O > 1: avg_ts = (O - 1) / its difference to `ref` (the output-1 run of
    input L; BadInput when it is not imported with it), failed when within the noise of the two runs."""
    if ref is None:
        raise BadInput(
            f"{f.path}: a `vllm bench latency` result at output {O}: its decode rate is the difference "
            f"to the output-1 run of the same input length {L}; import that result with it "
            f"(lat-{L}-1.json, or --output-len 1 on its own)"
        )
    short, why = vf.parse_latency(ref.result)
    if short is None:
        raise BadInput(f"{ref.path}: a `vllm bench latency` result that is no measurement: {why}")
    n = O - 1
    error = vf.decode_noise_error(lat, short, long_len=O)
    samples = [] if error else vf.samples_ts(n, lat.latencies, short.avg)
    return BenchRecord(
        **base,
        test=f"tg{n}",
        axis="decode",
        method=vf.METHOD_DECODE,
        n_gen=n,
        status="failed" if error else "ok",
        error=error,
        avg_ts=None if error else round(n / (lat.avg - short.avg), 4),
        stddev_ts=vf.sample_sd(samples),
        samples_ts=samples,
        engine={"input_len": L, "output_len": O, "reference_output_len": 1},
        raw={"long": f.result, "short": ref.result},
    )


def _serve(f: VllmFile, base: dict[str, Any], L: int, O: int) -> BenchRecord:  # noqa: E741
    why = vf.serve_problem(f.result)
    if why:
        raise ValueError(why)
    parsed = vf.parse_serve(f.result)
    prompts = _int(f.result.get("num_prompts")) or _int(parsed["completed"]) or 0
    c = f.concurrency
    tool = "sglang bench_serving" if f.tool == "sglang" else "vllm bench serve"
    what = f"{tool} (c{c}, in {L}, out {O})" if c else f"{tool} (in {L}, out {O})"
    error = vf.served_error(what, parsed, prompts, O, ignore_eos=False)
    # a duration its requests cannot fit, peaks its totals do not give (vLLM's own counting): refused,
    # but a result failed already stays failed, saying it
    if busy := vf.serve_timing_problem(f.result, peaks=f.tool != "sglang"):
        if error is None:
            raise ValueError(busy)
        error += f"; and {busy}"
    return BenchRecord(
        **base,
        test=f"serve pp{L}+tg{O}" + (f" c{c}" if c else ""),
        axis="served",
        method=SGLANG_SERVE if f.tool == "sglang" else vf.METHOD_SERVE,
        n_prompt=L,
        n_gen=O,
        status="failed" if error else "ok",
        error=error,
        avg_ts=None if error else parsed["output_throughput"],
        timing={"tests_s": parsed["duration"] or 0.0},
        engine={
            **({"concurrency": c} if c else {}),
            "num_prompts": prompts,
            "request_rate": parsed["request_rate"],
        },
        raw=f.result,
        served={
            **{k: v for k, v in parsed.items() if k not in ("latency_ms", "output_lens")},
            "requested_output_tokens": prompts * O,
        },
        latency_ms=parsed["latency_ms"],
    )


def _throughput(f: VllmFile, base: dict[str, Any], L: int, O: int) -> BenchRecord:  # noqa: E741
    """`vllm bench throughput`: offline, all requests at once. avg_ts = output tokens / elapsed_time
    (the unit of a serve record); ValueError (refused) for a result that is no measurement
    (throughput_problem); failed when total_num_tokens contradicts requests x (in + out)."""
    r = f.result
    if why := vf.throughput_problem(r, O):
        raise ValueError(why)
    n, secs, total = (
        _int(r.get("num_requests")),
        vf._finite(r.get("elapsed_time")),
        _int(r.get("total_num_tokens")),
    )
    what = f"vllm bench throughput (in {L}, out {O})"
    error = None
    if not n or secs is None:
        error = f"{what}: the result has no num_requests"
    elif total is not None and abs(total - n * (L + O)) > vf.SERVED_TOLERANCE * n * (L + O):
        error = (
            f"{what}: total_num_tokens {total} is not {n} requests x ({L} + {O}): the run did not measure "
            "the lengths given"
        )
    return BenchRecord(
        **base,
        test=f"throughput pp{L}+tg{O}",
        axis="served",
        method=vf.METHOD_THROUGHPUT,
        n_prompt=L,
        n_gen=O,
        status="failed" if error else "ok",
        error=error,
        avg_ts=None if error or not n or not secs else round(n * O / secs, 4),
        timing={"tests_s": secs or 0.0},
        engine={"num_prompts": n or 0},
        raw=r,
        served={
            "duration": secs,
            "completed": n,
            "request_throughput": vf._finite(r.get("requests_per_second")),
            "total_token_throughput": vf._finite(r.get("tokens_per_second")),
            "requested_output_tokens": (n or 0) * O,
        },
    )
