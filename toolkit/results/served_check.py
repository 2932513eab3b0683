"""A served record's avg_ts held to the figures it is taken from: the record's `served` block (the
parsed result the vLLM runner and `toolkit import` store: runtimes/vllm/output.py parse_serve) and its
`raw` result. vLLM serve: avg_ts is output_throughput, which is total_output_tokens / duration;
vLLM throughput: avg_ts is completed x n_gen / duration (num_requests x n_gen / elapsed_time in the
result); SGLang serving: avg_ts is its result's output_throughput. An ok record whose block says fewer
tokens than it asked for is no measurement either (served_shortfall_error's tolerance). Only a line
edited after it was written can fail it; a record without block or result has only its avg_ts."""

from __future__ import annotations

import math
from typing import Any

from toolkit.core.stats import finite_number as _figure
from toolkit.runtimes.vllm import output as vf

AGREE = vf.AGREE
"""How far avg_ts may lie from what its figures give (the figures are full floats; avg_ts of a
throughput record is rounded to 4 decimals)."""


def served_problem(
    method: str, avg_ts: float | None, n_gen: int, block: Any, raw: dict[str, Any]
) -> str | None:
    """Why an ok served record's avg_ts (or, without one, its raw output_throughput: what the report
    shows) is not what its own figures give, or None: `block` its `served` field (None: none), `raw`
    its result, `method` and `n_gen` its own. Each figure present is held to AGREE; a block that is
    not an object is refused."""
    if block is not None and not isinstance(block, dict):
        return f"served {str(block)[:40]!r} is not a served block (an object)"
    value = avg_ts if avg_ts is not None else _figure(raw.get("output_throughput"))
    if value is None:
        return None  # BenchRecord refuses an ok served record without either
    for expect, what in _expected(method, n_gen, block or {}, raw):
        if abs(value - expect) > AGREE * max(value, expect):
            return f"avg_ts {value:g} is not {what} ({expect:.6g} tok/s)"
    return _shortfall(block or {})


def _expected(method: str, n_gen: int, block: dict[str, Any], raw: dict[str, Any]) -> list[tuple[float, str]]:
    """(tok/s, what says it) of each figure the record's avg_ts is taken from."""
    out: list[tuple[float, str]] = []
    if method == vf.METHOD_THROUGHPUT:
        for src, n, secs, name in (
            (block, "completed", "duration", "served"),
            (raw, "num_requests", "elapsed_time", "its result's"),
        ):
            count, t = _figure(src.get(n)), _figure(src.get(secs))
            if count is not None and t and t > 0:
                out.append(
                    (count * n_gen / t, f"{name}.{n} {count:g} x n_gen {n_gen} / {name}.{secs} {t:.4g} s")
                )
        return out
    for src, name in ((block, "its served block's"), (raw, "its result's")):
        tp = _figure(src.get("output_throughput"))
        if tp is not None:
            out.append((tp, f"{name} output_throughput"))
        outs, t = _figure(src.get("total_output_tokens")), _figure(src.get("duration"))
        if method == vf.METHOD_SERVE and outs is not None and t and t > 0:
            where = "served" if src is block else "its result's"
            out.append((outs / t, f"{where}.total_output_tokens {outs:g} / {where}.duration {t:.4g} s"))
    return out


def _shortfall(block: dict[str, Any]) -> str | None:
    """Why an ok record's block says fewer (or more) output tokens than it asked for, beyond
    SERVED_TOLERANCE (the import's and the runner's rule: such a level is failed), or None."""
    got, asked = _figure(block.get("total_output_tokens")), _figure(block.get("requested_output_tokens"))
    if got is None or not asked or abs(got - asked) <= math.floor(asked * vf.SERVED_TOLERANCE):
        return None
    return (
        f"status ok, but served.total_output_tokens {got:g} is not the requested_output_tokens {asked:g} "
        f"(tolerance {vf.SERVED_TOLERANCE:.0%}): such a level is failed"
    )


ALIGN_TOKENS = 0.01
"""How far (a share, at least one token) a served result's mean prompt may lie from the length asked:
a random prompt can come out a token off when re-encoded (vllm_import.ALIGN_TOKENS, the import's)."""


def served_settings_problem(
    n_prompt: int, n_gen: int, engine: Any, block: Any, raw: dict[str, Any]
) -> str | None:
    """Why the settings a served record is shown by (its row: `c{concurrency} in{n_prompt} out{n_gen}`)
    are not the ones its own result ran, None where they are or it does not say: n_prompt against the
    result's total_input_tokens over its completed requests (vLLM and SGLang count the completed
    requests' prompts; both runners and the import ask fixed lengths, so the mean is the length within
    ALIGN_TOKENS: the import refuses a file named otherwise), the concurrency (`engine`'s) against the
    result's max_concurrency, n_gen against the served block's requested_output_tokens over the
    record's num_prompts (the runner and the import write exactly that product)."""
    engine = engine if isinstance(engine, dict) else {}
    block = block if isinstance(block, dict) else {}
    done, tokens = _figure(raw.get("completed")), _figure(raw.get("total_input_tokens"))
    if done and done > 0 and tokens is not None:
        each = tokens / done
        if abs(each - n_prompt) > max(1.0, ALIGN_TOKENS * n_prompt):
            return (
                f"n_prompt {n_prompt} is not its result's prompt length: total_input_tokens {tokens:g} over "
                f"{done:g} completed requests is {each:.4g} tokens a request"
            )
    c, said = _figure(engine.get("concurrency")), _figure(raw.get("max_concurrency"))
    if c is not None and said is not None and c != said:
        return f"concurrency {c:g} is not its result's max_concurrency {said:g}"
    prompts, asked = _figure(engine.get("num_prompts")), _figure(block.get("requested_output_tokens"))
    if prompts and asked is not None and asked != prompts * n_gen:
        return (
            f"n_gen {n_gen} is not what its served block asked: requested_output_tokens {asked:g} over "
            f"num_prompts {prompts:g} is {asked / prompts:.4g} tokens a request"
        )
    return None
