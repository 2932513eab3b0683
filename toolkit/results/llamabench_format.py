"""llama-bench: the argument list we run, and a tolerant parser of what it prints.

Facts (flags, JSONL fields and their drift, micro-batch clamping) come from llama.cpp's
tools/llama-bench/llama-bench.cpp and shared/reference/llama-bench.md. One process measures the
whole crossed matrix for one (image, model): list-valued flags are crossed by llama-bench itself.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from typing import Any

from toolkit.core import backends
from toolkit.spec.matrix import BenchAxes

PROGRESS_RE = re.compile(r"llama-bench: benchmark (\d+)/(\d+): (.*)")
# Messages that mean a GPU build ran on the CPU (backends.FALLBACK_MESSAGES; llama-bench.md, "Output").
CPU_FALLBACK_PATTERNS = backends.FALLBACK_MESSAGES


def _csv(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)


def bench_args(axes: BenchAxes, model_path: str, *, device: str | None = None) -> list[str]:
    """The llama-bench argument list (argv[1:]) for the crossed matrix, JSONL on stdout.

    `-fa 1` (not `on`: older builds read a word as false). `-d` and `-t` are passed only when
    set away from their defaults so older builds without them still run.
    """
    args = [
        "-m",
        model_path,
        "-p",
        _csv(axes.n_prompt),
        "-n",
        _csv(axes.n_gen),
        "-b",
        _csv(axes.n_batch),
        "-ub",
        _csv(axes.n_ubatch),
        "-fa",
        _csv(axes.flash_attn),
        "-ngl",
        _csv(axes.n_gpu_layers),
        "-r",
        str(axes.repetitions),
    ]
    if axes.n_depth != [0]:
        args += ["-d", _csv(axes.n_depth)]
    if axes.threads:
        args += ["-t", str(axes.threads)]
    if device:
        args += ["-dev", device]
    return args + ["-o", "jsonl", "--progress"]


# A JSON string, or a bare non-finite token as C's printf writes it (`nan`, `-nan`, `inf`, `-inf`, and
# MSVC's `-nan(ind)`):
# llama-bench prints doubles with printf, so a stddev of identical samples comes out as `-nan`.
_NONFINITE_RE = re.compile(
    r'"(?:[^"\\]|\\.)*"|(?<![\w.])(-?)(nan|inf(?:inity)?)(?:\((?:ind|snan|qnan)?\))?(?![\w.])', re.IGNORECASE
)


def _json_text(text: str) -> str:
    """llama-bench output made parseable: bare nan/inf tokens become NaN/Infinity, which Python's json
    reads as floats; the record validator then refuses or repairs them (never a silent drop)."""

    def sub(m: re.Match) -> str:
        if m.group(2) is None:
            return m.group(0)
        return "NaN" if m.group(2).lower() == "nan" else f"{m.group(1)}Infinity"

    return _NONFINITE_RE.sub(sub, text)


def parse_jsonl(text: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """Objects from llama-bench stdout: lines that do not start with `{` are log lines and skipped
    (the Vulkan backend prints `ggml_vulkan: Found N Vulkan devices:` on stdout); a line that starts
    like a record but does not parse is noted in `skipped` (`line N: why`)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(_json_text(line))
        except json.JSONDecodeError as err:
            if skipped is not None:
                skipped.append(f"line {n}: not a complete JSON record ({err.msg})")
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def parse_json_array(text: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """`-o json` output, including a truncated array from a crashed run (no closing `]`)."""
    text = _json_text(text)
    start = text.find("[")
    if start < 0:
        return parse_jsonl(text, skipped)
    dec = json.JSONDecoder()
    pos, out = start + 1, []
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            if skipped is not None:  # the half object a crash left behind
                line = text.count("\n", 0, pos) + 1
                skipped.append(f"line {line}: the array ends in an incomplete record ({err.msg})")
            break
        if isinstance(obj, dict):
            out.append(obj)
    return out


def parse_csv(text: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """`-o csv` output; numbers converted where they parse."""
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        rows.append({k: _num(v) for k, v in row.items() if k is not None})
    return rows


def parse_any(text: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """Sniff jsonl / json array / csv, the three machine formats llama-bench writes.

    Log lines may come first (the Vulkan backend prints `ggml_vulkan: Found N Vulkan devices:` on
    stdout), so the format is decided by the first line that starts one: `[` (json array, possibly
    truncated), `{` (jsonl) or a csv header naming `avg_ts`; a start that yields no rows is skipped.
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("["):
            parse = parse_json_array
        elif s.startswith("{"):
            parse = parse_jsonl
        elif "avg_ts" in s and "," in s:
            parse = parse_csv
        else:
            continue
        notes: list[str] = []
        rows = parse("\n".join(lines[i:]), notes)
        if rows:
            if skipped is not None:
                skipped += notes
            return rows
    return []


def _num(v: str | None) -> Any:
    if v is None:
        return None
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


def _int(v: Any, default: int | None = None) -> int | None:
    if v is None or v == "":
        return default
    if isinstance(v, bool):
        return int(v)
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _float(v: Any) -> float | None:
    try:
        return float(v) if v is not None and v != "" else None
    except (TypeError, ValueError):
        return None


def backends_of(raw: dict[str, Any]) -> str:
    """The `backends` string, derived from old per-backend booleans when absent."""
    if raw.get("backends"):
        return str(raw["backends"])
    if raw.get("backend"):
        return str(raw["backend"])
    found = [
        name for key, name in backends.OLD_BACKEND_FLAGS.items() if raw.get(key) in (True, 1, "1", "true")
    ]
    return ",".join(found) or "CPU"


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
    """Why a GPU run must not count as a result, or None.

    A GPU image whose rows lack the expected backend, whose gpu_info is empty (ggml-vulkan skips
    a CPU-type device and runs on the CPU while still reporting `backends: Vulkan`), or whose log
    says no device was found, fell back to the CPU.
    """
    expected = backends.llama_name(backend)
    if backend == "cpu" or expected is None:
        return None
    for pat in CPU_FALLBACK_PATTERNS:
        if pat.lower() in log.lower():
            return f"log shows a CPU fallback: {pat!r}"
    for r in rows:
        nb = normalize(r)
        if expected.lower() not in nb["backends"].lower():
            return f"backends is {nb['backends']!r}, expected {expected}"
        if not nb["gpu_info"].strip():
            return f"gpu_info is empty although the {expected} backend was expected (silent CPU fallback)"
    return None
