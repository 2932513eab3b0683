"""A script's own summary of serving runs that names vLLM or SGLang, told from those tools' results.

A wrapper around `vllm bench serve` or SGLang's bench_serving often saves a JSON of its own (`{"engine":
"SGLang", "method": "sglang.bench_serving", "context_sweep": [...]}`, `{"vllm_version": "0.28.0",
"aggregate_tokens_per_sec": ...}`): its keys are none of the tool's result keys, so the import reads it
neither as the tool's result (results/vllm_import.kind_of) nor as a llama-bench row; check._not_a_row
says which engine it names, and what to import instead, rather than only "none of its keys is a
llama-bench field".
"""

from __future__ import annotations

from typing import Any

_ENGINES = (
    ("sglang", "SGLang"),
    ("bench_serving", "SGLang"),
    ("vllm", "vLLM"),
    ("benchmark_serving", "vLLM"),
)
"""(a word in a key or value, the serving engine it names): summary's reading of a record's own words."""
_NAMING_KEYS = ("engine", "method", "backend", "framework", "tool", "runner", "server")
_OWN_RESULT = {
    "vLLM": (
        "`vllm bench serve`'s output_throughput with completed, latency's avg_latency, throughput's "
        "elapsed_time with num_requests",
        "vllm bench serve --save-result, vllm bench latency/throughput --output-json",
    ),
    "SGLang": ("bench_serving's output_throughput with completed", "bench_serving --output-file"),
}
"""Per engine: the keys of its own benchmark's result (results/vllm_import.kind_of), and how to save it."""


def _engine(text: str) -> str | None:
    """The serving engine a lower-case `text` names (_ENGINES), or None."""
    return next((name for word, name in _ENGINES if word in text), None)


def summary(fields: dict[str, Any]) -> str | None:
    """check._not_a_row's word on a script's own summary of serving runs that names vLLM or SGLang (a key
    such as `vllm_version`, or an `engine` / `method` / `backend` / ... value such as
    `sglang.bench_serving`; the first 40 keys looked at) without any of those tools' result keys (it
    is no `vllm bench` or bench_serving result: _served and results/vllm_import.kind_of read those):
    which engine, where it is named and what to import instead; None for any other object."""
    for k, v in list(fields.items())[:40]:
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
    """check.check_row's word on a toolkit canary result (a results folder's canary.jsonl, llama.cpp's
    or vLLM's canary: the perplexity of a fixed text, no tok/s), or None for any other object. Its
    `method` names vLLM and its llama.cpp canary holds llama-bench's n_gpu_layers: it is neither a
    script's summary of vLLM runs (summary) nor a llama-bench row without n_prompt."""
    if not fields.keys() >= _CANARY_KEYS:
        return None
    return (
        "a toolkit canary result (a results folder's canary.jsonl: the perplexity of a fixed text, no tok/s), "
        "not llama-bench output: `toolkit report --results DIR` shows it with its image's records"
    )
