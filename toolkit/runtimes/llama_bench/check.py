"""A llama-bench row: its fields (the type llama-bench writes in each, and a value read as a number:
`as_float`, `as_int`, `quantity`), the rules its own fields and measured figures are held to
(`check_fields`, `check_figures`: validity.check_row runs them, in its order, around plausible.py's
and settings_check.py's), and what a row becomes: `normalize(raw)`, its canonical fields (test name,
axis, the effective micro-batch, backends), and `cpu_fallback_of`, the CPU-fallback rule. Facts (JSONL
fields and their drift, micro-batch clamping): llama.cpp tools/llama-bench/llama-bench.cpp and
shared/reference/llama-bench.md."""

from __future__ import annotations

import contextlib
import math
import re
import time
from datetime import datetime, timezone
from difflib import get_close_matches
from typing import Any

from toolkit.core import backends
from toolkit.core.stats import finite_number
from toolkit.core.text import one_line
from toolkit.core.types import INT64, MAX_THREADS, MAX_TOKENS, MAX_TOKENS_PER_S, MIN_TOKEN_S, MIN_TOKENS_PER_S

# llama-bench's field types (get_field_type); fields of old vintages added where they were numbers.
INT_FIELDS = frozenset(
    "build_number n_batch n_ubatch n_threads poll model_size model_n_params n_gpu_layers main_gpu n_prompt "
    "n_gen n_depth avg_ns stddev_ns no_op_offload n_cpu_moe fit_target fit_min_ctx flash_attn".split()
)


BOOL_FIELDS = frozenset(
    "f16_kv no_kv_offload cpu_strict embeddings no_host repack use_mmap mul_mat_q cuda vulkan kompute metal "
    "sycl rpc hip gpu_blas blas".split()
)


FLOAT_FIELDS = frozenset({"avg_ts", "stddev_ts"})


ARRAY_FIELDS = frozenset({"samples_ns", "samples_ts"})


STRING_FIELDS = frozenset(
    "build_commit cpu_info gpu_info backends model_filename model_type cpu_mask type_k type_v split_mode "
    "devices tensor_split tensor_buft_overrides load_mode lazy_mode test_time".split()
)


_SIZE = re.compile(r"^\s*([0-9.]+)\s*([KMGT]i?B|[KMGT]|B)?\s*$", re.IGNORECASE)


_UNITS = {"": 1, "b": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_UNITS["tib"] = 2**40


def as_float(v: Any) -> float | None:
    """A number (or ASCII text of one) as a float, else None; "６４" (full-width digits) is no number,
    nor an int beyond a float's range (10**400: float() raises OverflowError on it)."""
    if isinstance(v, str) and not v.isascii():
        return None
    try:
        return float(v) if v is not None and v != "" else None
    except (TypeError, ValueError, OverflowError):
        return None


def quantity(v: Any) -> int | None:
    """A count from a number, its text (`1595904`, `1.5e6`: as csv's reader types it) or the md table's
    text (`56.89 GiB` -> bytes, `30.53 B` -> parameters);
    None for NaN, an infinity or an int beyond a float's range (10**400: math.isfinite raises on it), and
    for a text whose figure is (`1e400 GiB`, 400 digits)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        with contextlib.suppress(OverflowError):  # beyond a float's range (as _count and _rate)
            return int(v) if math.isfinite(v) else None
        return None
    m = _SIZE.match(str(v or ""))
    if not m:  # a number as text without a unit (`1.5e6`, ` +1595904 `), read as csv's and sql's reader
        f = as_float(str(v or "").strip())  # reads it (ASCII only), so jsonl's text counts alike
        return round(f) if f is not None and math.isfinite(f) else None
    unit = (m.group(2) or "").lower()
    unit = {"kb": "k", "mb": "m", "gb": "g", "tb": "t"}.get(unit, unit)
    if unit == "b" and "." in m.group(1):  # `30.53 B` in the params column: billions
        unit = "g"
    try:
        n = float(m.group(1)) * _UNITS.get(unit, 1)  # `9...9 GiB` of 400 digits: inf, no count
    except ValueError:  # `1.2.3 GiB`: no number
        return None
    return round(n) if math.isfinite(n) else None


def as_int(v: Any, default: int | None = None) -> int | None:
    """A whole number as the validity pass reads it (64, "64", " +64", 64.0, "64.0", "6.4e1"), else
    `default` (a fraction, text that is no number, digits other than ASCII): the record then holds
    what check_row accepted, never a count read as 0."""
    if v is None or v == "":
        return default
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        if not v.isascii():
            return default
        with contextlib.suppress(ValueError):
            return int(v)
    f = as_float(v)
    if f is None or not math.isfinite(f) or not f.is_integer():
        return default
    return int(f)


def _as_number(v: Any) -> Any:
    """A number written as text (a hand-edited json) read as the number; anything else unchanged."""
    f = as_float(v.strip()) if isinstance(v, str) else None
    return v if f is None else f


def token_count(v: Any) -> int | None:
    """A token count as the validity pass reads it (a whole number 0..MAX_TOKENS, numbers written as
    text included), else None; never raises."""
    return _count({"n": v}, "n", required=True)[0]


def row_seconds(raw: dict[str, Any], repetitions: int) -> float:
    """Seconds llama-bench spent measuring one row: its samples_ns summed, else avg_ns x `repetitions`;
    0.0 where neither is positive finite JSON numbers or the seconds are no float (a row the validity
    pass refuses: 400-digit samples_ns, or [1e308, 1e308], whose sum no float holds: an inf here made
    every later record of the process unwritable, json's allow_nan=False)."""
    ns = raw.get("samples_ns")
    xs = [_json_number(x) for x in ns] if isinstance(ns, list) else []
    avg = _json_number(raw.get("avg_ns"))
    if xs and all(x is not None and 0 < x < math.inf for x in xs):
        s = sum(x for x in xs if x is not None) / 1e9
    else:
        s = avg * repetitions / 1e9 if avg is not None and 0 < avg < math.inf else 0.0
    return s if math.isfinite(s) else 0.0


UNTIMED_SHARE_MAX = 0.05
UNTIMED_SLACK_S = 0.1
"""A test window longer than its timed repetitions (sum of samples_ns) by more than UNTIMED_SHARE_MAX
of them plus UNTIMED_SLACK_S (one sampler period at 10 Hz) holds work llama-bench does not time, and
its energy is not the test's (`window_holds_untimed_work`). Measured on the H200 (2026-12-02, llama.cpp
0c1e57098, synthetic Qwen3-30B-A3B Q4_0): at depth 0 the window is 1.00x the timed time; at n_depth
4096-32768 it is 1.11-1.67x (tg128) and 1.9-5.0x (pp512): between repetitions llama-bench restores the
cached depth state (`depth run i/R (cached)`), untimed, inside the window."""


def positive_samples(v: Any) -> list[float] | None:
    """A list of positive finite JSON numbers (a row's samples_ns or samples_ts), else None."""
    if not isinstance(v, list) or not v:
        return None
    xs = [x for x in map(finite_number, v) if x is not None and x > 0]
    return xs if len(xs) == len(v) else None


def timed_s(samples_ns: Any) -> float | None:
    """The timed seconds of a test's repetitions (llama-bench's samples_ns summed), None where they are
    not a list of positive finite numbers."""
    ns = positive_samples(samples_ns)
    return sum(ns) * 1e-9 if ns else None


def holds_untimed_work(window_s: Any, samples_ns: Any) -> bool:
    """Whether a test window of `window_s` seconds is longer than its timed repetitions (timed_s) by more
    than UNTIMED_SHARE_MAX of them plus UNTIMED_SLACK_S: work llama-bench does not time is inside it (its
    cached depth restores between repetitions, at n_depth > 0). The one rule of the observer (bench.observe),
    which then gives the window no energy, and of results.telemetry_check.energy_rule, which holds a
    stored block to it."""
    timed, window = timed_s(samples_ns), finite_number(window_s)
    return (
        timed is not None
        and window is not None
        and window > timed * (1 + UNTIMED_SHARE_MAX) + UNTIMED_SLACK_S
    )


def _json_number(v: Any) -> float | None:
    """A JSON number (int or float, never a bool or text) as a float, None beyond a float's range."""
    return as_float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def row_tokens(raw: dict[str, Any]) -> int | None:
    """The tokens one repetition of a row counts, n_prompt + n_gen as the validity pass reads them (an
    absent one: 0), None when either is no token count (the validity pass refuses that row)."""
    n_prompt = 0 if raw.get("n_prompt") is None else token_count(raw["n_prompt"])
    n_gen = 0 if raw.get("n_gen") is None else token_count(raw["n_gen"])
    return None if n_prompt is None or n_gen is None else n_prompt + n_gen


def _count(fields: dict[str, Any], name: str, *, required: bool) -> tuple[int | None, str | None]:
    v = fields.get(name)
    if v is None or v == "":
        return None, (f"no {name}" if required else None)
    n = _as_number(v)
    try:
        if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or n != int(n):
            return None, f"{name} is {repr(v)[:40]}: not a token count"
    except OverflowError:  # an integer too big for a float: no count
        return None, f"{name} is {_short(v)}: not a token count"
    v = n
    if v < 0:
        return None, f"{name} is {int(v)}: expected >= 0"
    if v > MAX_TOKENS:
        return (
            None,
            f"{name} is {_short(v)}: more than {MAX_TOKENS:.0e} tokens is no test (a unit or parser error)",
        )
    return int(v), None


def _samples_kind(name: str, v: Any) -> str | None:
    """Why `v` is no samples field (llama-bench writes a list of numbers; csv, md and sql a text the
    reader turns into one), or None."""
    if v is None or isinstance(v, str):
        return None
    if type(v) is not list:
        return f"{name} is {value_kind(v) if isinstance(v, dict) else _short(v)}: expected a list of numbers"
    for i, x in enumerate(v):
        if type(x) not in (int, float):
            shown = value_kind(x) if isinstance(x, (dict, list)) else repr(x)[:24]
            return f"{name}[{i}] is {shown}: expected a number"
    return None


def value_kind(v: Any) -> str:
    """What a JSON value is, for a message: null, an object, a list, else its type's name (int, str...)."""
    if v is None:
        return "null"
    return "an object" if isinstance(v, dict) else "a list" if isinstance(v, list) else type(v).__name__


def _short(v: Any) -> str:
    """A number for a message: at most 24 characters (a 5000-digit integer is never echoed)."""
    text = str(v) if not isinstance(v, float) or float(f"{v:g}") != v else f"{v:g}"  # 792192.5 as written
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"


def threads_problem(n: float, shown: str) -> str | None:
    """Why `n` (shown as `shown`) is no thread count a test ran on: below 1, or above MAX_THREADS (the
    most tasks a 64-bit Linux kernel can hold at once: no process runs more threads)."""
    if n < 1:
        return f"n_threads is {shown}: a test runs on at least 1 thread"
    if n > MAX_THREADS:
        return f"n_threads is {shown}: more threads than any host can run (at most {MAX_THREADS:,})"
    return None


def _rate(fields: dict[str, Any], name: str) -> tuple[float | None, str | None]:
    v = fields.get(name)
    if v is None or v == "":
        return None, None
    n = _as_number(v)
    if isinstance(n, bool) or not isinstance(n, (int, float)):
        return None, f"{name} is {v!r}: not a number"
    try:
        f = float(n)
    except OverflowError:  # an integer too big for a float: no measurement
        return None, f"{name} is {_short(v)}: not a measurement"
    if not math.isfinite(f):
        return None, f"{name} is {f!r}: not a measurement"
    if f <= 0:
        return None, f"{name} is {v!r}: not a measurement (a test takes time and yields tokens)"
    return f, None


def _numbers(v: Any) -> list[float] | None:
    if not isinstance(v, list) or not v:
        return None
    try:
        xs = [float(x) for x in v]
    except (TypeError, ValueError):
        return None
    return xs if all(math.isfinite(x) and x > 0 for x in xs) else None


LLAMA_FIELDS = INT_FIELDS | BOOL_FIELDS | FLOAT_FIELDS | ARRAY_FIELDS | STRING_FIELDS
"""Every field a llama-bench row of any vintage has (a row has many of them)."""


_SPEEDS = ("avg_ts", "avg_ns")  # a row's speed fields: a misspelled one is named with the guess


def check_fields(fields: dict[str, Any]) -> str | tuple[int, float | None, float | None]:
    """validity.check_row's pass over a llama-bench row's own fields: why they are no measurement (see
    there), or the row's figures when they are one: (tokens a repetition, avg_ts or None, avg_ns or None)."""
    counts = {}
    for name in ("n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch"):
        counts[name], why = _count(fields, name, required=name in ("n_prompt", "n_gen"))
        if why:
            return why
    if why := _field_types(fields):
        return why
    tokens = (counts["n_prompt"] or 0) + (counts["n_gen"] or 0)
    if tokens == 0:
        return "n_prompt and n_gen are both 0: no test was run"
    for name in ("n_batch", "n_ubatch"):
        if counts[name] == 0:
            return f"{name} is 0: llama.cpp takes at least 1 token per batch (no such test can run)"
    if why := _time_of_test(fields.get("test_time")):
        return why
    ts, why = _rate(fields, "avg_ts")
    if why:
        return why
    ns, why = _rate(fields, "avg_ns")
    if why:
        return why
    if ts is None and ns is None:
        if split := [k for k in ("avg_prompt_ts", "avg_gen_ts") if k in fields]:  # a fork's row
            return (
                f"no avg_ts or avg_ns: its speeds are {' and '.join(split)} (a llama-bench fork's row, timing a "
                "test's prompt and generation apart), fields llama-bench does not write: which is the test's "
                "speed is not said; import mainline llama-bench's output"
            )
        if guess := {k: m[0] for k in fields if (m := get_close_matches(str(k), _SPEEDS, 1, 0.75))}:
            said = ", ".join(f"{k!r} (did you mean {m}?)" for k, m in guess.items())  # hand-typed: avg_tps
            return f"no avg_ts or avg_ns: {one_line(said)[:200]} is no llama-bench field"
        return "no avg_ts or avg_ns (a cut-off row?)"
    if ts is not None and not MIN_TOKENS_PER_S <= ts <= MAX_TOKENS_PER_S:
        return (
            f"avg_ts is {ts!r}: not a measurement (expected {MIN_TOKENS_PER_S:.0e} to {MAX_TOKENS_PER_S:.0e} "
            "tokens/s)"
        )
    if why := _too_fast(counts, tokens, ts, ns, fields.get("samples_ts")):
        return why
    return tokens, ts, ns


def forward_passes(fields: dict[str, Any]) -> int:
    """The forward passes of the model one repetition of llama-bench row `fields` runs one after another:
    one per generated token (n_gen) and one per micro-batch of its timed prompt, ceil(n_prompt / its
    effective micro-batch) (effective_ubatch; n_batch where the row has no n_ubatch, the whole prompt in
    one where it has neither). Each takes at least MIN_TOKEN_S (_too_fast) and reads at least
    plausible.MIN_ACTIVE_SHARE of the weights. Counts not read are 0 (check_fields refuses them first)."""
    n = {
        k: max(quantity(fields.get(k)) or 0, 0)
        for k in ("n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch")
    }
    ub = effective_ubatch(
        n["n_ubatch"] or n["n_batch"] or None, n["n_batch"], n["n_prompt"], n["n_gen"], n["n_depth"]
    )
    return n["n_gen"] + (-(-n["n_prompt"] // (ub or n["n_prompt"])) if n["n_prompt"] else 0)


def _too_fast(
    counts: dict[str, Any], tokens: int, ts: float | None, ns: float | None, samples_ts: Any
) -> str | None:
    """Why a test of `counts` (n_prompt, n_gen, ...; `tokens` a repetition) ran faster than its forward
    passes allow, or None: its repetition (avg_ts `ts`, avg_ns `ns`, each of samples_ts) shorter than
    forward_passes one after another take, MIN_TOKEN_S each (a CPU decode of 112,000 tok/s, or 900,000 on
    a GPU whose roofline is unknown: no hardware decodes a token in 9 us; a pp512 of 500 million tok/s,
    1 us for its 8 micro-batches of 64)."""
    passes, n_gen = forward_passes(counts), counts.get("n_gen") or 0
    if passes <= 0:
        return None
    least_ns = passes * MIN_TOKEN_S * 1e9
    fastest = tokens * 1e9 / least_ns  # tok/s of a repetition that takes exactly least_ns
    rates = [x for x in (_numbers(samples_ts) or []) if x > fastest]
    if ts is not None and ts > fastest:
        rates.insert(0, ts)
    if ns is not None and ns < least_ns:
        rates.insert(0, tokens * 1e9 / ns)
    if not rates:
        return None
    rep_us, batches = tokens * 1e6 / rates[0], passes - n_gen
    what = " and ".join(
        ([f"the prompt in {batches} micro-batch{'es' if batches > 1 else ''}"] if batches else [])
        + ([f"{n_gen} generated tokens"] if n_gen else [])
    )
    return (
        f"{rates[0]:.6g} t/s is a repetition of {rep_us:.3g} us for {what}, {rep_us / passes:.3g} us a "
        f"{'forward pass' if batches else 'token'} at most: they come one after another, each a forward pass of the model of at least "
        f"{MIN_TOKEN_S * 1e6:g} us (this test runs at most {fastest:.6g} t/s on any hardware)"
    )


FUTURE_SLACK_S = 86400
"""How far after this host's clock a row's test_time may lie (time zones, clock skew between hosts)."""


EARLIEST_TEST_TIME = datetime(2023, 6, 1, tzinfo=timezone.utc)
"""No llama-bench row is older: llama-bench came into llama.cpp in mid-2023; a 1970 test_time is a
host clock that was never set."""


def parse_test_time(v: Any) -> datetime | None:
    """A llama-bench test_time (ISO 8601 text; `Z`/`z` for UTC, a naive time taken as UTC) as an aware
    datetime, else None: the one reading of it for the validity pass and the ordering of rows."""
    if not isinstance(v, str) or not v.strip():
        return None
    text = v.strip()
    try:
        dt = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


def _time_of_test(v: Any) -> str | None:
    """Why a test_time is not when a test ran: not ISO 8601 text (llama-bench writes strftime "%FT%TZ", e.g.
    2025-01-31T12:00:00Z, in every release), more than FUTURE_SLACK_S after now, or before EARLIEST_TEST_TIME.
    Absent or empty (md, sql of old releases) is no fault."""
    if v is None or v == "":
        return None
    if not isinstance(v, str):
        return f"test_time is {value_kind(v)}: expected ISO 8601 text such as 2025-01-31T12:00:00Z"
    dt = parse_test_time(v)
    if dt is None:
        return f"test_time is {v[:40]!r}: not a time (llama-bench writes ISO 8601, e.g. 2025-01-31T12:00:00Z)"
    if dt.timestamp() > time.time() + FUTURE_SLACK_S:
        return (
            f"test_time is {v[:40]!r}: in the future (a wrong clock or an edited file; fix or drop the field)"
        )
    if dt < EARLIEST_TEST_TIME:
        return (
            f"test_time is {v[:40]!r}: before llama-bench existed (a clock that was never set, or an "
            "edited file; fix or drop the field)"
        )
    return None


UINT64_FIELDS = frozenset({"avg_ns", "stddev_ns"})
"""Kept in `raw` only; llama-bench writes them as uint64_t (the stddev of one sample as 2**63)."""


UINT64_MAX = 2**64 - 1


_TEXT_TYPES = (str, int, float, bool, type(None))


_TEXT_INT_FIELDS = frozenset({"model_size", "model_n_params", "flash_attn"})
"""Integer fields whose text is not a number in some vintage: md prints `56.89 GiB` and `30.53 B`;
flash_attn was `on`/`off`/`auto` (normalize reads them)."""


NO_BOOL_FIELDS = (INT_FIELDS | FLOAT_FIELDS) - {"flash_attn", "no_op_offload", "model_size", "model_n_params"}
"""Number fields where a JSON true/false is no value llama-bench wrote (flash_attn and no_op_offload
are booleans in some vintages; a size or count of true is not recorded, as records.Size reads it):
refused naming the field, as the text "true" is (`stddev_ts: true` was stored as a 1.0 tok/s spread)."""


def _field_types(fields: dict[str, Any]) -> str | None:
    """Why a field holds what llama-bench never writes there: a list or object in a text or integer field, an
    integer field beyond 64 bits, a fraction or text that is no number in an integer field (n_threads 2.5,
    "abc", "2,5"; avg_ns and stddev_ns are measurements, where a converter's mean is harmless;
    _TEXT_INT_FIELDS have text forms), a boolean in a number field (NO_BOOL_FIELDS), n_threads below 1 or
    above MAX_THREADS. Text, floats, booleans, null and 63-bit integers are passed over first (the cost of
    every row). samples_ts / samples_ns: a list of numbers (or csv's text of one), else refused naming the
    field."""
    for name in ARRAY_FIELDS:
        if why := _samples_kind(name, fields.get(name)):
            return why
    for name, v in fields.items():
        t = type(v)
        if t is float:
            if name in INT_FIELDS and name not in UINT64_FIELDS:
                if not v.is_integer():
                    return f"{name} is {_short(v)}: expected a whole number"
                if not INT64[0] <= v <= INT64[1]:
                    return f"{name} is {_short(v)}: out of range (a 64-bit integer)"
                if name == "n_threads" and (why := threads_problem(v, _short(v))):
                    return why
            continue
        if t is str:
            if name in INT_FIELDS and name not in UINT64_FIELDS and name not in _TEXT_INT_FIELDS:
                text = v.strip()  # csv/md/sql text, hand-edited json
                f = as_float(text)
                if text and (f is None or not (math.isfinite(f) and f.is_integer())):
                    return f"{name} is {text[:24]!r}: expected a whole number"
                if f is not None and name == "n_threads" and (why := threads_problem(f, repr(text[:24]))):
                    return why
            elif name in FLOAT_FIELDS and (text := v.strip()) and as_float(text) is None:
                return f"{name} is {text[:24]!r}: expected a number"  # a stddev_ts "true" read as none
            continue
        if t is bool:
            if name in NO_BOOL_FIELDS:
                return f"{name} is {str(v).lower()}: expected a {'number' if name in FLOAT_FIELDS else 'whole number'}"
            continue
        if v is None:
            continue
        if t is int and -_BIG <= v <= _BIG:
            if name == "n_threads" and (why := threads_problem(v, str(v))):
                return why
            continue
        if t is list and name in ARRAY_FIELDS:
            big = next((x for x in v if type(x) is int and not 0 <= x <= UINT64_MAX), None)
            if big is not None:
                return f"{name} holds {_short(big)}: out of range (no measurement)"
        elif name in INT_FIELDS:
            if t is int and not INT64[0] <= v <= (UINT64_MAX if name in UINT64_FIELDS else INT64[1]):
                return f"{name} is {_short(v)}: out of range (a 64-bit integer)"
            if not isinstance(v, _TEXT_TYPES):
                return f"{name} is {value_kind(v)}: expected a whole number"
        elif name in STRING_FIELDS and not isinstance(v, _TEXT_TYPES):
            return f"{name} is {value_kind(v)}: expected text"
        elif name in FLOAT_FIELDS and isinstance(v, int) and not INT64[0] <= v <= UINT64_MAX:
            return f"{name} is {_short(v)}: out of range (no measurement)"
    return None


_BIG = 2**63 - 1


MAX_REPETITIONS = 10_000
"""The most repetitions a row without samples is taken to have (our rule: ten times the matrix's own
limit, schema `repetitions` <= 1000): n rates, none below 0, with mean m have a sample stddev (n - 1) of
at most m x sqrt(n), reached where one rate holds all and the others are 0 (check_figures)."""


def check_figures(fields: dict[str, Any], tokens: int, ts: float | None, ns: float | None) -> str | None:
    """validity.check_row's last step (`tokens` a repetition, avg_ts `ts`, avg_ns `ns`): a stddev_ts below 0
    (`± -5` in -o md) or above 0 of one repetition (llama-bench writes 0), or the measured fields against each
    other (llama-bench's samples_ts[i] = tokens * 1e9 / samples_ns[i]; avg_* = mean of samples_*; stddev_* =
    sample stddev, n - 1): avg_ts and stddev_ts against the per-repetition rates (`_rates_agree`); samples_ts
    against samples_ns, one by one, to 1 % (`_samples_agree`); avg_ns against samples_ns (their mean, to 1 %)
    and avg_ts against avg_ns: from avg_ns alone avg_ts is at least tokens / mean(t) (the harmonic mean) and
    above it by about the squared relative spread of the times (no upper check then)."""
    sd = as_float(fields.get("stddev_ts"))
    if sd is not None and -math.inf < sd < 0:  # NaN (`-nan` of one sample) and ±inf: recomputed by the record
        return f"stddev_ts {sd:g} is negative: a stddev never is (llama-bench writes a square root)"
    samples_ts = _numbers(fields.get("samples_ts"))
    samples_ns = _numbers(fields.get("samples_ns"))
    n = len(samples_ts or samples_ns or ()) or MAX_REPETITIONS
    if sd is not None and ts is not None and (ts * math.sqrt(n) if n > 1 else 0.0) < sd < math.inf:
        if n == 1:  # llama-bench's stdev of one value is 0
            return f"stddev_ts {sd:g} of 1 repetition (its samples hold one): one rate has no spread"
        some = f"{n} rates" if samples_ts or samples_ns else f"the rates of up to {n} repetitions"
        return (
            f"stddev_ts {sd:g} is more than avg_ts {ts:g} x sqrt({n}): {some}, none below 0, spread at most "
            "that far (one holding them all, the others 0)"
        )
    why = None
    if samples_ts:
        why = _rates_agree(fields, ts, samples_ts, "samples_ts")
    elif samples_ns:
        why = _rates_agree(fields, ts, [tokens * 1e9 / s for s in samples_ns], "samples_ns")
    why = why or _samples_agree(samples_ts, samples_ns, tokens)
    if why or ts is None or ns is None:
        return why
    if samples_ns:
        mean_ns = sum(samples_ns) / len(samples_ns)
        if not 0.99 <= ns / mean_ns <= 1.01:  # llama-bench's avg_ns is their mean
            return f"avg_ns {ns:g} contradicts samples_ns (their mean is {mean_ns:g})"
        return None  # avg_ts agrees with the rates (_rates_agree), they with samples_ns, those with avg_ns
    expect = tokens * 1e9 / ns
    sd = as_float(fields.get("stddev_ns"))
    rsd = sd / ns if sd is not None and math.isfinite(sd) and sd >= 0 else None
    lo = 0.98
    hi = 1.10 if rsd is None else (1.05 + 1.5 * rsd * rsd if rsd <= 0.3 else math.inf)
    ratio = ts / expect
    if lo <= ratio <= hi:
        return None
    return (
        f"avg_ts {ts:g} contradicts avg_ns {ns:g}: {tokens} tokens in {ns * 1e-9:g} s is {expect:.4g} tokens/s "
        f"({100 * (ratio - 1):+.0f}%)"
    )


def _samples_agree(samples_ts: list[float] | None, samples_ns: list[float] | None, tokens: int) -> str | None:
    """Why samples_ts and samples_ns are not one set of repetitions: a different count, or a rate
    that is not tokens / time (1e9 * tokens / samples_ns[i]) to 1 % (llama-bench prints 6 significant
    digits: its own rows agree to 1e-5)."""
    if not samples_ts or not samples_ns:
        return None
    if len(samples_ts) != len(samples_ns):
        return (
            f"samples_ts has {len(samples_ts)} values, samples_ns {len(samples_ns)}: not the same repetitions"
        )
    for i, (r, t) in enumerate(zip(samples_ts, samples_ns, strict=True)):
        rate = tokens * 1e9 / t
        if not 0.99 <= r / rate <= 1.01:
            return (
                f"samples_ts[{i}] {r:g} contradicts samples_ns[{i}] {t:g}: {tokens} tokens in "
                f"{t * 1e-9:g} s is {rate:.4g} tokens/s"
            )
    return None


def _rates_agree(fields: dict[str, Any], ts: float | None, rates: list[float], source: str) -> str | None:
    """avg_ts against the mean of the per-repetition `rates` (from `source`), to 1 %; stddev_ts against
    their sample stddev (`_spread_agrees`)."""
    mean = sum(rates) / len(rates)
    if ts is not None and not 0.99 <= ts / mean <= 1.01:  # llama-bench's avg_ts is the mean of samples_ts
        what = "their mean" if source == "samples_ts" else "the mean of tokens / time"
        return f"avg_ts {ts:g} contradicts {source} ({what} is {mean:g})"
    return _spread_agrees("stddev_ts", fields.get("stddev_ts"), rates, source)


def _spread_agrees(name: str, v: Any, values: list[float], source: str) -> str | None:
    """A stddev llama-bench wrote (`name`: stddev_ts; value `v`) against the sample stddev (n - 1) of two or
    more per-repetition `values` (from `source`), to 1 % of their mean (the 1 % avg_ts is held to). One value:
    no spread to check (llama-bench writes 0). A value that is no finite number >= 0 is left to the record
    (records.BenchRecord recomputes it). stddev_ns is not held to samples_ns: the toolkit shows none of it,
    and field files carry 0 there beside spread samples."""
    sd = _as_number(v)
    if len(values) < 2 or isinstance(sd, bool) or not isinstance(sd, (int, float)):
        return None
    sd = float(sd)
    if not math.isfinite(sd) or sd < 0:
        return None
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1))
    if abs(sd - spread) <= 0.01 * mean:
        return None
    return (
        f"{name} {sd:g} contradicts {source}: their stddev is {spread:.4g} "
        f"(± {100 * sd / mean:.1f}% shown, ± {100 * spread / mean:.1f}% measured)"
    )


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
    """The micro-batch (tokens) a test's timed prompt ran in, while llama-bench still reports the asked
    n_ubatch: min(n_ubatch, n_batch, n_prompt). llama.cpp sizes the context to the test (n_prompt + n_gen
    + n_depth) and clamps n_batch to it and n_ubatch to n_batch; llama-bench fills a depth before its
    clock starts and then decodes the n_prompt tokens alone (test_prompt), so no micro-batch of the timed
    prompt holds more than n_prompt (pp128 @ d512 at ub2048 runs one ubatch of 128, not 640). A test
    without a prompt (tg) is clamped by its context only. legacy_effective_ubatch gives the context's
    bound that records written before 2026-12-05 store."""
    if n_ubatch is None:
        return None
    span = n_prompt or (n_gen + n_depth)
    return min([n_ubatch] + ([n_batch] if n_batch else []) + ([span] if span else []))


def legacy_effective_ubatch(
    n_ubatch: int | None, n_batch: int | None, n_prompt: int, n_gen: int, n_depth: int
) -> int | None:
    """min(n_ubatch, n_batch, n_prompt + n_gen + n_depth): the context's bound alone, as
    `n_ubatch_effective` was stored before effective_ubatch counted the prompt (a record that states it
    was not edited: raw_check.made_problem takes either)."""
    return effective_ubatch(n_ubatch, n_batch, 0, n_prompt + n_gen, n_depth)


FLASH_WORDS = {"on": 1, "off": 0, "auto": -1, "true": 1, "false": 0}
"""flash_attn's words in a row (`-fa on|off|auto`, a csv's true/false) -> -1/0/1: check.normalize reads them."""


def normalize(raw: dict[str, Any]) -> dict[str, Any]:
    """Canonical fields from one llama-bench record of any vintage (unknown fields stay in raw).

    Returns keys: test, axis, n_prompt, n_gen, n_depth, n_batch, n_ubatch, n_ubatch_effective,
    flash_attn (int: -1 auto, 0, 1), n_gpu_layers, avg_ts, stddev_ts (tokens/s), samples_ts,
    backends, gpu_info, build_commit.
    """
    n_prompt = as_int(raw.get("n_prompt"), 0) or 0
    n_gen = as_int(raw.get("n_gen"), 0) or 0
    n_depth = as_int(raw.get("n_depth"), 0) or 0
    n_batch = as_int(raw.get("n_batch"))
    n_ubatch = as_int(raw.get("n_ubatch"))
    fa = raw.get("flash_attn")
    if isinstance(fa, str):
        fa = FLASH_WORDS.get(fa.lower(), as_int(fa))
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
        "flash_attn": as_int(fa),
        "n_gpu_layers": as_int(raw.get("n_gpu_layers")),
        "avg_ts": as_float(raw.get("avg_ts")),
        "stddev_ts": as_float(raw.get("stddev_ts")),
        "samples_ts": [float(x) for x in samples],
        "backends": backends_of(raw),
        "gpu_info": str(raw.get("gpu_info") or ""),
        "build_commit": str(raw.get("build_commit") or "") or None,
    }


def cpu_fallback_of(
    image_backend: str, raw: dict[str, Any], backends_field: str | None, log: str = ""
) -> str | None:
    """The one CPU-fallback rule (backends.cpu_fallback_reason) for a llama-bench row: a "no device"
    message in the `log` it was printed with, its `backends` (normalised) and its `gpu_info` where the
    row recorded one; and a row run with `-dev none` (its `devices` field) on a GPU build ran on the CPU."""
    if log and (said := backends.cpu_fallback_reason(image_backend, None, None, log)):
        return said
    if (
        str(raw.get("devices") or "").strip().lower() == "none"
        and backends.BACKENDS.get(image_backend, backends.BACKENDS["cpu"]).gpu
    ):
        return "run with -dev none (devices: none): on the CPU, not the GPU"
    gpu = raw.get("gpu_info")
    return backends.cpu_fallback_reason(
        image_backend, backends_field or None, None if gpu is None else str(gpu)
    )
