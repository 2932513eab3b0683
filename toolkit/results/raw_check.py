"""A llama-bench record held to its own `raw` row: the row the record's figures were made from.

Every ok llama-bench record is written from one llama-bench row (the runner's RowSink.row and the
import's _record: llama_bench.check.normalize(raw)), so its token counts are the row's and its
samples_ts are the row's repetitions, one each. A record whose counts or number of samples differ
from its raw row was edited after it was written (a pp128 relabelled pp4096, 7 of 10 repetitions
dropped with avg_ts recomputed from the rest): record_check.contradiction refuses it, as it refuses an
avg_ts that is not its samples' mean.

Not held to raw, as they legitimately differ: stddev_ts (repaired when the tool wrote nan, one sample's
0 stored as None), avg_ts (taken from samples or avg_ns where the row has no avg_ts), the telemetry
window; the effective micro-batch is held to its computation from the counts, and the other fields
normalize makes from raw (MADE) to its reading (made_problem); a record combining several processes (`between_runs`:
identity.combine_runs pools their samples) is held by its newest process's count, whose row raw is. A
record whose raw is no llama-bench row (no n_prompt and no n_gen: older records, other writers) is
not checked.
"""

from __future__ import annotations

import re
from typing import Any

from toolkit.core.backends import OLD_BACKEND_FLAGS
from toolkit.runtimes.llama_bench import check
from toolkit.runtimes.llama_bench.args import axes_from_args
from toolkit.runtimes.llama_bench.check import as_int, effective_ubatch, legacy_effective_ubatch, normalize

COUNTS = ("n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch")
"""A record's token counts, each normalize's reading of the raw field of that name."""

_TEST_COUNTS = ("n_prompt", "n_gen", "n_depth")
"""Counts normalize reads as 0 where the row has no such field (n_depth: rows before depth existed)."""

_NUMBER = re.compile(r"[-+0-9.eE]+")


def _samples_in(v: Any) -> int | None:
    """How many repetitions a raw samples field lists (a list, or csv's text of one), None when absent."""
    if isinstance(v, list):
        return len(v) or None
    if isinstance(v, str) and v.strip():
        return len(_NUMBER.findall(v)) or None
    return None


def _repetitions(command: list[str]) -> str:
    """` (-r N)` when the record's command gives llama-bench's repetitions, for the message; else ""."""
    for flag, value in zip(command, command[1:], strict=False):
        if flag in ("-r", "--repetitions") and len(value) <= 12:
            return f" ({flag} {value})"
    return ""


def asked_repetitions(command: Any) -> int | None:
    """The repetitions a record's llama-bench command asked for (`-r N` / `--repetitions N` after the
    `llama-bench` word of `docker run ... llama-bench ...`, read by the one flag table's reverse,
    args.axes_from_args, for `-r`), None where the command names none (an imported row has no command;
    another runner's). llama-bench runs every test exactly that many times, each one sample
    (tools/llama-bench/llama-bench.cpp: `for (int i = 0; i < params.reps; i++)` pushes one samples_ns
    per pass; a failed test prints no row)."""
    if not isinstance(command, list) or not all(isinstance(x, str) for x in command):
        return None
    argv = [("-r" if x == "--repetitions" else x) for x in command]
    n = axes_from_args(argv).get("repetitions")
    return n if isinstance(n, int) and n > 0 else None


def raw_problem(
    counts: dict[str, int | None], samples: int | None, raw: Any, command: list[str]
) -> str | None:
    """Why a llama-bench record contradicts its own raw row, None when it does not (or raw is no
    llama-bench row). `counts`: the record's COUNTS; `samples`: how many samples the process that wrote
    raw measured (records._own_samples: all of samples_ts, or a combined record's last between_runs
    count; None: unknown, not checked); raw's samples held to the repetitions its `command` asked
    (asked_repetitions: 3 of `-r 10` kept, raw edited with them, was shown as a 3-sample cell)."""
    if not isinstance(raw, dict) or ("n_prompt" not in raw and "n_gen" not in raw):
        return None
    for name in COUNTS:
        v = raw.get(name)
        absent = v is None or v == ""
        if absent and name not in _TEST_COUNTS:
            continue  # n_batch / n_ubatch the row does not say (an old vintage, an md table)
        said = 0 if absent else as_int(v)
        if said is None:
            continue  # not a count: check_row refused such a row before it was stored
        if counts[name] != said:
            shown = "absent (0)" if absent else str(v)[:24]
            return f"{name} {counts[name]} is not its raw row's {shown}"
    if samples is None:
        return None
    in_ts, in_ns = _samples_in(raw.get("samples_ts")), _samples_in(raw.get("samples_ns"))
    field, n = ("samples_ts", in_ts) if in_ts is not None else ("samples_ns", in_ns)
    if n is None or (samples == 0 and field == "samples_ns"):
        return None  # the row lists no samples, or only samples_ns (normalize takes samples_ts alone)
    if samples != n:
        return (
            f"samples_ts has {samples} value(s), its raw row's {field} {n}{_repetitions(command)}: "
            "not the repetitions llama-bench measured"
        )
    asked = asked_repetitions(command)
    if asked is not None and n != asked:
        return (
            f"its raw row's {field} has {n} value(s), its command asked llama-bench for {asked} repetitions "
            f"(-r {asked}), each one sample: not the repetitions llama-bench measured"
        )
    return None


MADE = ("flash_attn", "n_gpu_layers", "backends", "gpu_info", "build_commit")
"""A record's fields normalize reads from its raw row besides the counts (what the report's columns,
csv, host line and roofline show), each held to normalize's reading where raw states its source."""

UNSTATED_EMPTY = ("backends", "gpu_info")
"""Fields of MADE that normalize reads as "" where raw does not state them (check.backends_of: a markdown
table without a backend column; gpu_info: a row without one, an md table without device lines: the
readers put those into the row): a record stating one its raw row does not was edited (breaker round 28)."""

_SOURCES = {"backends": ("backends", "backend", *OLD_BACKEND_FLAGS)}
"""Where raw states a field of MADE under other names (backends: llama_bench.check.backends_of)."""


def made_problem(fields: dict[str, Any], raw: Any) -> str | None:
    """Why a llama-bench record's fields made from its raw row (`fields`: MADE and COUNTS and
    n_ubatch_effective, as stored) are not what they were made from, None when they are (or raw is no
    llama-bench row): each of MADE is normalize(raw)'s reading of it, where raw states its source;
    n_ubatch_effective, where stored, is effective_ubatch of the record's own counts (which raw_problem holds
    to raw), or, as stored before 2026-12-05, legacy_effective_ubatch's. Every record is written as
    normalize(raw) (the import's _record, the runner's judge_row), so one that differs was edited."""
    if not isinstance(raw, dict) or ("n_prompt" not in raw and "n_gen" not in raw):
        return None
    eff = fields.get("n_ubatch_effective")
    if eff is not None:
        counts = (
            fields.get("n_ubatch"),
            fields.get("n_batch"),
            fields.get("n_prompt") or 0,
            fields.get("n_gen") or 0,
            fields.get("n_depth") or 0,
        )
        want = effective_ubatch(*counts)
        if eff not in (want, legacy_effective_ubatch(*counts)):  # as written today, or before 2026-12-05
            return (
                f"n_ubatch_effective {eff} is not its test's: min(n_ubatch, n_batch, n_prompt) is {want} "
                f"(n_ubatch {fields.get('n_ubatch')}, n_batch {fields.get('n_batch')})"
            )
    try:
        made = normalize({k: v for k, v in raw.items() if k not in ("samples_ts", "samples_ns")})
    except (TypeError, ValueError):
        return None  # a raw row normalize cannot read was refused before it was stored
    for name in MADE:
        if not any(raw.get(k) not in (None, "") for k in _SOURCES.get(name, (name,))):
            if name in UNSTATED_EMPTY and fields.get(name) not in (None, ""):
                return f"{name} {str(fields.get(name))[:40]} is stated, but its raw row states none"
            continue  # raw does not say it: the record's value is not its
        if fields.get(name) != made[name]:
            return f"{name} {str(fields.get(name))[:40]} is not its raw row's {str(made[name])[:40]}"
    return None


_SPLIT_GGUF = re.compile(r"-\d{5}-of-\d{5}\.gguf$", re.IGNORECASE)
"""The first file of a split model (gguf-split's `NAME-00001-of-00003.gguf`): llama.cpp loads every
part from it, so its row's model_size is the sum of all of them."""


def size_problem(size_bytes: int, path: str, raw: Any) -> str | None:
    """Why a llama-bench record's model file (`size_bytes`: the file at `path` `toolkit bench` measured,
    or an import's reading of the row's model_size) is smaller than the model its raw row loaded
    (model_size: the sum of its tensors' bytes, never more than the file that holds them with its
    header), None where it is not, either is unknown (0, absent) or the file is one part of a split model
    (_SPLIT_GGUF): the row is of another, larger model than the file."""
    loaded = check.quantity(raw.get("model_size")) if isinstance(raw, dict) else None
    if not size_bytes or size_bytes <= 0 or not loaded or loaded <= size_bytes or _SPLIT_GGUF.search(path):
        return None
    return (
        f"model_size {loaded} bytes of its row is more than its model file's {size_bytes} bytes: a GGUF's "
        "tensors are inside its file, so the row measured another model"
    )
