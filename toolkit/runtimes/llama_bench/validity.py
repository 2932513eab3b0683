"""Whether a llama-bench row is a measurement: the ONE validity pass over rows of every format and of
`toolkit bench`'s own (`check_row`: another program's record, `not_a_row`; the row's own fields, what
its model and GPU allow (plausible.py), its settings (settings_check.py), its figures: check.py), and
`toolkit bench`'s verdict on a row it ran (`judge_row`: the pass, a CPU fallback, a software device)."""

from __future__ import annotations

from typing import Any

from toolkit.core import backends
from toolkit.runtimes.llama_bench import check, plausible, settings_check

# Another program's record, told from a llama-bench row (`not_a_row`, check_row's question of an object
# with none of llama-bench's fields): each named with what to import instead.
_ENGINES = (
    ("sglang", "SGLang"),
    ("bench_serving", "SGLang"),
    ("vllm", "vLLM"),
    ("benchmark_serving", "vLLM"),
    ("llama.cpp", "llama.cpp"),
    ("llamacpp", "llama.cpp"),
    ("llama_cpp", "llama.cpp"),
    ("llama-cpp", "llama.cpp"),
    ("llama-server", "llama.cpp"),
)
"""(a word in a key or value, the engine it names): summary's reading of a record's own words (a
script's summary of llama-server or llama-cli runs: `"backend": "llama.cpp-vulkan"`, `llamacpp_version`)."""
_NAMING_KEYS = ("engine", "method", "backend", "framework", "tool", "runner", "server")
_OWN_RESULT = {
    "vLLM": (
        "`vllm bench serve`'s output_throughput with completed, latency's avg_latency, throughput's "
        "elapsed_time with num_requests",
        "vllm bench serve --save-result, vllm bench latency/throughput --output-json",
    ),
    "SGLang": ("bench_serving's output_throughput with completed", "bench_serving --output-file"),
    "llama.cpp": (
        "llama-bench's model_type, n_prompt, n_gen, avg_ts",
        "llama-bench -o jsonl, on the model the summary names",
    ),
}
"""Per engine: the keys of its own benchmark's result (results/vllm_import.kind_of), and how to save it."""


def _engine(text: str) -> str | None:
    """The serving engine a lower-case `text` names (_ENGINES), or None."""
    return next((name for word, name in _ENGINES if word in text), None)


def summary(fields: dict[str, Any]) -> str | None:
    """not_a_row's word on a script's own summary of runs that names vLLM, SGLang or llama.cpp (a key such as
    `vllm_version` or `llamacpp_version`, or an `engine` / `method` / `backend` / ... value such as
    `sglang.bench_serving` or `llama.cpp-vulkan`; every key looked at, each cut to 40 characters) without any
    of those tools' result keys (_served, results/vllm_import.kind_of and check_row read those): which engine,
    where it is named and what to import instead; None for any other object."""
    for k, v in fields.items():
        key = str(k)[:40]
        if (engine := _engine(key.lower())) is not None:
            where = repr(key)
        elif isinstance(v, str) and key.lower() in _NAMING_KEYS and (engine := _engine(v.lower()[:80])):
            where = f"{key!r}: {v[:60]!r}"
        else:
            continue
        keys, save = _OWN_RESULT[engine]
        return (
            f"; it names {engine} ({where}) but has none of the keys of {engine}'s own result ({keys}): "
            "a summary another script wrote of its runs, whose lengths and rates are its own; import the "
            f"benchmark's own result JSON ({save})"
        )
    return None


_CANARY_KEYS = frozenset(("ppl", "model_sha256", "text_sha256", "status"))
"""The keys of a toolkit canary result (toolkit.bench.canary.CanaryResult, a results folder's canary.jsonl)."""


def canary_record(fields: dict[str, Any]) -> str | None:
    """not_a_row's word on a toolkit canary result (a results folder's canary.jsonl, llama.cpp's
    or vLLM's canary: the perplexity of a fixed text, no tok/s), or None for any other object. Its
    `method` names vLLM and its llama.cpp canary holds llama-bench's n_gpu_layers: it is neither a
    script's summary of vLLM runs (summary) nor a llama-bench row without n_prompt (not_a_row asks)."""
    if not fields.keys() >= _CANARY_KEYS:
        return None
    return (
        "a toolkit canary result (a results folder's canary.jsonl: the perplexity of a fixed text, no tok/s), "
        "not llama-bench output: `toolkit report --results DIR` shows it with its image's records"
    )


# A record of another program that holds a benchmark's printed text in one of its string values (a
# wrapper's `{"success": true, "raw_output": "<the run's stdout>"}` per run): which printout it is, so
# that the import can say what to import instead of "none of its keys is a llama-bench field".
# (what a printout holds, a line of it no other printout has, what to import instead)
_PRINTOUTS = (
    (
        "a serving benchmark's printed summary (`vllm bench serve` / SGLang bench_serving's "
        "'Serving Benchmark Result'), not its result JSON",
        "Serving Benchmark Result",
        "save the run with --save-result (--output-file for SGLang) and import that JSON",
    ),
    (
        "`vllm bench throughput`'s printed line ('Throughput: ... requests/s'), not its result JSON",
        "requests/s, ",
        "save the run with --output-json and import that JSON",
    ),
    (
        "llama-bench's printed table",
        "| model ",
        "save that text as a file of its own and import it (-o md is read)",
    ),
)


def _printed(fields: dict[str, Any]) -> str | None:
    """'; its KEY holds <what>: <what to import>' for the first string value of `fields` (any of its
    keys, KEY cut to 40 characters) that holds one of the printouts above, else None."""
    for k, v in fields.items():
        if not isinstance(v, str):
            continue
        for what, mark, instead in _PRINTOUTS:
            if mark in v:
                return f"; its {str(k)[:40]!r} holds {what}: {instead}"
    return None


def not_a_row(fields: dict[str, Any]) -> str | None:
    """Why an object with none of llama-bench's fields (LLAMA_FIELDS) is another program's record, not
    a llama-bench row (a wrapper's `{"start_time", ..., "bench_raw": {...}}` per run: its own keys
    and the one holding llama-bench's row named; one whose string value holds a benchmark's printed
    text: which, _printed; a script's summary naming vLLM or SGLang, summary; a toolkit canary result,
    canary_record, llama.cpp's holding llama-bench's n_gpu_layers), or None when it has one."""
    if (canary := canary_record(fields)) is not None:
        return canary
    if not fields or check.LLAMA_FIELDS & set(fields):
        return None
    keys = ", ".join(str(k)[:40] for k in list(fields)[:6]) + (", ..." if len(fields) > 6 else "")
    inner = next(
        (k for k, v in fields.items() if isinstance(v, dict) and {"n_prompt", "avg_ts"} <= set(v)), None
    )
    held = (
        f"; its {str(inner)[:40]!r} holds a llama-bench row: import llama-bench's own output (-o jsonl), not "
        "another program's records around it"
        if inner is not None
        else (_printed(fields) or _served(fields) or summary(fields) or "")
    )
    return f"not a llama-bench row: none of its keys ({keys}) is a llama-bench field{held}"


def _served(fields: dict[str, Any]) -> str | None:
    """not_a_row's word on a serving benchmark's result among other lines (`vllm bench serve
    --save-result`'s keys, or SGLang bench_serving's: output_throughput with completed or num_prompts,
    as results/vllm_import.kind_of knows them), which the import reads only from a file of its JSON alone
    (one object, or JSON lines of runs); None for any other object."""
    keys = set(fields)
    if "output_throughput" not in keys or not keys & {"completed", "num_prompts"}:
        return None
    tool = (
        "SGLang bench_serving's"
        if str(fields.get("backend", "")).startswith("sglang")
        else "a serving benchmark's"
    )
    return (
        f"; it is {tool} result (vllm bench serve's keys), read only from a file that holds its JSON lines "
        "alone: delete the other lines (a script's own print, a log) and import the file again"
    )


def check_row(fields: dict[str, Any], problem: str | None = None) -> str | None:
    """Why a llama-bench row is not a measurement, or None when it is: the one validity pass of every reader
    (jsonl, json, csv, md, sql) and of `toolkit bench`'s own rows.

    Refused: a reader's `problem` (field count); the toolkit's own files (a record of a results folder, a line
    of `report --format csv`); a missing, non-integer or negative n_prompt / n_gen / n_depth (a missing count
    is never taken as 0), or one of those, n_batch or n_ubatch above MAX_TOKENS (1e7); n_prompt = n_gen = 0
    (no test); no avg_ts and no avg_ns (a cut-off row, or a fork's that times prompt and generation apart:
    avg_prompt_ts, avg_gen_ts); an avg_ts that is not a finite number from MIN_TOKENS_PER_S (1e-6) to 1e9; an
    avg_ns that is not above 0; an avg_ts or stddev_ts that contradicts avg_ns or the samples, samples_ts that
    contradict samples_ns (check.check_figures); n_batch or n_ubatch 0; a fraction in a whole-number field
    (n_threads 2.5); a test_time that is no ISO 8601 time or lies in the future (check._time_of_test); a
    stddev_ts below 0 (`± -5` in -o md); a model_size that is not its model_n_params' at any bytes a weight, a
    tok/s beyond what any machine computes for that many parameters (plausible.model_problem); a GPU its
    backend cannot run on (plausible.device_problem); n_gpu_layers below -1, a main_gpu past the devices the
    row lists at split_mode none (settings_check.settings_problem)."""
    if problem:
        return problem
    report = "test_fields" in fields  # a line of `toolkit report --format csv` (nc48 S6: imported, exit 0)
    if "run_id" in fields and (
        report or isinstance(fields.get("raw"), dict) and isinstance(fields.get("image"), dict)
    ):
        what, where = (
            (
                "a line of the toolkit's own report (`toolkit report --format csv`)",
                "the results folder it was made from",
            )
            if report
            else ("a toolkit record (a results folder's bench.jsonl)", "it where it is")
        )
        return (
            f"{what}, not llama-bench output: its test, model and image would be lost; read {where} (`toolkit "
            "report --results DIR`, `toolkit compare A B --against DIR`)"
            + ("" if report else " or copy its folder under results/")
        )
    if (why := not_a_row(fields)) is not None:
        return why
    if isinstance(figures := check.check_fields(fields), str):
        return figures
    tokens, ts, ns = figures
    if why := plausible.model_problem(fields, ts if ts is not None else tokens * 1e9 / ns if ns else None):
        return why
    if why := plausible.device_problem(fields) or settings_check.settings_problem(fields):
        return why
    return check.check_figures(fields, tokens, ts, ns)


def judge_row(
    raw: dict[str, Any], backend: str, *, allow_software_gpu: bool, log: str = ""
) -> tuple[dict[str, Any], str | None]:
    """A row `toolkit bench` ran on a `backend` image: (its fields, `normalize`; why it is no result or
    None), the first of: not a measurement (check_row, as every import), a CPU fallback (on the row or
    in `log`, all the container printed up to it), a software device without `allow_software_gpu`."""
    bad = check_row(raw)  # first: normalize assumes what it checks (samples a list of numbers)
    try:
        fields = check.normalize(raw)
    except (TypeError, ValueError, OverflowError) as err:  # a row normalize cannot read (10**400 samples)
        fields = check.normalize({k: v for k, v in raw.items() if k not in ("samples_ts", "samples_ns")})
        bad = bad or f"{err}"[:160]
    gpu_info = raw.get("gpu_info")
    fallback = check.cpu_fallback_of(backend, raw, fields["backends"], log)
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
