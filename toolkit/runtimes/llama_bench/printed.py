"""A record of another program that holds a benchmark's printed text in one of its string values (a
wrapper's `{"success": true, "raw_output": "<the run's stdout>"}` per run): which printout it is, so
that the import can say what to import instead of "none of its keys is a llama-bench field"."""

from __future__ import annotations

from typing import Any

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


def why(fields: dict[str, Any]) -> str | None:
    """'; its KEY holds <what>: <what to import>' for the first string value of `fields` (its first
    40 keys, KEY cut to 40 characters) that holds one of the printouts above, else None."""
    for k, v in list(fields.items())[:40]:
        if not isinstance(v, str):
            continue
        for what, mark, instead in _PRINTOUTS:
            if mark in v:
                return f"; its {str(k)[:40]!r} holds {what}: {instead}"
    return None
