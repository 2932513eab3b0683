"""llama-bench: what it prints, read tolerantly (the argument list is args.py).

Facts (flags, JSONL fields and their drift, micro-batch clamping) come from llama.cpp's
tools/llama-bench/llama-bench.cpp and shared/reference/llama-bench.md. One process measures the
whole crossed matrix for one (image, model): list-valued flags are crossed by llama-bench itself.
"""

from __future__ import annotations

import re
from typing import Any

from toolkit.core import backends
from toolkit.runtimes.llama_bench import readers
from toolkit.runtimes.llama_bench.check import check_row

PROGRESS_RE = re.compile(r"llama-bench: benchmark (\d+)/(\d+): (.*)")
# Messages that mean a GPU build ran on the CPU (backends.FALLBACK_MESSAGES; llama-bench.md, "Output").
CPU_FALLBACK_PATTERNS = backends.FALLBACK_MESSAGES


def parse_jsonl(text: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """Objects from llama-bench stdout (llama_bench.readers.read_jsonl: log lines skipped, a line that
    starts like a record but does not parse noted in `skipped`)."""
    return [r.fields for r in readers.read_jsonl(text, skipped)]


def parse_json_array(text: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """`-o json` output, including a truncated array from a crashed run (no closing `]`)."""
    return [r.fields for r in readers.read_json_array(text, skipped)]


def parse_csv(text: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """`-o csv` output, typed as llama-bench types each field (rows whose field count differs from
    the header are left out here; llama_bench.readers.read_csv keeps them with the reason)."""
    return [r.fields for r in readers.read_csv(text, skipped) if r.problem is None]


def parse_any(text: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of llama-bench output in any of its formats (llama_bench.readers.read_source), without
    the rows a reader found malformed."""
    return [r.fields for r in readers.read_source(text, skipped)[1] if r.problem is None]


_int = readers._int
_float = readers.as_float
check_row = check_row  # the one validity pass (imports and toolkit bench's own rows)


def backends_of(raw: dict[str, Any]) -> str:
    """The `backends` string, derived from old per-backend booleans when absent ("CPU" when they are
    all false); "" when the row says nothing of its backend (a markdown table without the column)."""
    if raw.get("backends"):
        return str(raw["backends"])
    if raw.get("backend"):
        return str(raw["backend"])
    flags = [k for k in backends.OLD_BACKEND_FLAGS if k in raw]
    found = [backends.OLD_BACKEND_FLAGS[k] for k in flags if raw.get(k) in (True, 1, "1", "true")]
    return ",".join(found) or ("CPU" if flags else "")


def test_name(n_prompt: int, n_gen: int, n_depth: int = 0) -> str:
    """Conventional llama-bench test names: pp512, tg128, pp512+tg128, pp512 @ d4096."""
    if n_prompt and n_gen:
        name = f"pp{n_prompt}+tg{n_gen}"
    elif n_prompt:
        name = f"pp{n_prompt}"
    else:
        name = f"tg{n_gen}"
    return f"{name} @ d{n_depth}" if n_depth else name


def axis_of(n_prompt: int, n_gen: int) -> str:
    if n_prompt and n_gen:
        return "mixed"
    return "prefill" if n_prompt else "decode"


def effective_ubatch(
    n_ubatch: int | None, n_batch: int | None, n_prompt: int, n_gen: int, n_depth: int
) -> int | None:
    """min(n_ubatch, n_batch, n_prompt + n_gen + n_depth): llama.cpp sizes the context to the test
    and clamps n_batch to it and n_ubatch to n_batch, while still reporting the asked n_ubatch."""
    if n_ubatch is None:
        return None
    ctx = n_prompt + n_gen + n_depth
    vals = [n_ubatch] + ([n_batch] if n_batch else []) + ([ctx] if ctx else [])
    return min(vals)


def normalize(raw: dict[str, Any]) -> dict[str, Any]:
    """Canonical fields from one llama-bench record of any vintage (unknown fields stay in raw).

    Returns keys: test, axis, n_prompt, n_gen, n_depth, n_batch, n_ubatch, n_ubatch_effective,
    flash_attn (int: -1 auto, 0, 1), n_gpu_layers, avg_ts, stddev_ts (tokens/s), samples_ts,
    backends, gpu_info, build_commit.
    """
    n_prompt = _int(raw.get("n_prompt"), 0) or 0
    n_gen = _int(raw.get("n_gen"), 0) or 0
    n_depth = _int(raw.get("n_depth"), 0) or 0
    n_batch = _int(raw.get("n_batch"))
    n_ubatch = _int(raw.get("n_ubatch"))
    fa = raw.get("flash_attn")
    if isinstance(fa, str):
        fa = {"on": 1, "off": 0, "auto": -1, "true": 1, "false": 0}.get(fa.lower(), _int(fa))
    samples = raw.get("samples_ts") or []
    if isinstance(samples, str):  # csv keeps arrays as "[1.0, 2.0]" or "1.0;2.0"
        samples = [float(x) for x in re.findall(r"[-+0-9.eE]+", samples)]
    return {
        "test": test_name(n_prompt, n_gen, n_depth),
        "axis": axis_of(n_prompt, n_gen),
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": n_depth,
        "n_batch": n_batch,
        "n_ubatch": n_ubatch,
        "n_ubatch_effective": effective_ubatch(n_ubatch, n_batch, n_prompt, n_gen, n_depth),
        "flash_attn": _int(fa),
        "n_gpu_layers": _int(raw.get("n_gpu_layers")),
        "avg_ts": _float(raw.get("avg_ts")),
        "stddev_ts": _float(raw.get("stddev_ts")),
        "samples_ts": [float(x) for x in samples],
        "backends": backends_of(raw),
        "gpu_info": str(raw.get("gpu_info") or ""),
        "build_commit": str(raw.get("build_commit") or "") or None,
    }


def progress_of(line: str) -> tuple[int, int, str] | None:
    """(test index, test count, phase) from a `--progress` stderr line, else None."""
    m = PROGRESS_RE.search(line)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def cpu_fallback_reason(log: str, backend: str, rows: list[dict[str, Any]]) -> str | None:
    """Why a GPU run must not count as a result, or None: backends.cpu_fallback_reason (the one rule,
    shared with the report) over the log and each row."""
    why = backends.cpu_fallback_reason(backend, None, None, log)
    for r in rows:
        why = why or cpu_fallback_of(backend, r, backends_of(r))
    return why


def cpu_fallback_of(image_backend: str, raw: dict[str, Any], backends_field: str | None) -> str | None:
    """The one CPU-fallback rule (backends.cpu_fallback_reason) for a stored llama-bench row: its
    `backends` (normalised) and its `gpu_info` where the row recorded one; and a row run with
    `-dev none` (its `devices` field) on a GPU build ran on the CPU."""
    if (
        str(raw.get("devices") or "").strip().lower() == "none"
        and backends.BACKENDS.get(image_backend, backends.BACKENDS["cpu"]).gpu
    ):
        return "run with -dev none (devices: none): on the CPU, not the GPU"
    gpu = raw.get("gpu_info")
    return backends.cpu_fallback_reason(
        image_backend, backends_field or None, None if gpu is None else str(gpu)
    )
