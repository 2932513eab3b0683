"""The column titles of a llama-bench `-o md` table, as readers.read_md reads them.

llama-bench's markdown printer writes each title as a field name (`n_batch`, `type_k`) or its short
display name (`ngl`, `threads`: markdown_printer::get_field_display_name: MD_FIELDS), and `t/s`:
lower-case ASCII in every release. A title pasted through a document or a chat may carry zero-width
characters (U+200B, U+200C, U+200D, U+2060, U+FEFF: Unicode category Cf, invisible): read away. A
title with any other character outside that form - a Cyrillic `е` in `thrеads`, a Greek `α` (retype
it), a space or punctuation (`peak t/s`, `ttfr (ms)`, `llama.cpp`: another tool's column, or one added
by hand), none at all - is no llama-bench column: its values would be kept under a name no reader
knows, so the table's rows are refused naming the column (and the character outside ASCII).
"""

from __future__ import annotations

import re
import unicodedata

# -o md column titles (markdown_printer::get_field_display_name, and older releases' `mmap`, `mmq`)
MD_FIELDS = {
    "model": "model_type",
    "size": "model_size",
    "params": "model_n_params",
    "backend": "backends",
    "ngl": "n_gpu_layers",
    "sm": "split_mode",
    "threads": "n_threads",
    "nkvo": "no_kv_offload",
    "fa": "flash_attn",
    "lm": "load_mode",
    "embd": "embeddings",
    "nopo": "no_op_offload",
    "noh": "no_host",
    "rpk": "repack",
    "dev": "devices",
    "ts": "tensor_split",
    "ot": "tensor_buft_overrides",
    "fitt": "fit_target",
    "fitc": "fit_min_ctx",
    "mmap": "use_mmap",
    "mmq": "mul_mat_q",
}

TITLE = re.compile(r"[a-z][a-z0-9_]{0,63}|t/s")
"""A llama-bench md title (lower case: `read` lowers what it reads)."""


def read(cells: list[str]) -> list[str]:
    """The titles of a header's `cells`: lower case, zero-width (format) characters removed."""
    return [
        (c if c.isascii() else "".join(ch for ch in c if unicodedata.category(ch) != "Cf")).lower()
        for c in cells
    ]


def prefixed(line: str, titles: list[str], where: str) -> str | None:
    """Why a header `line` of `titles` (`read`) is read as no llama-bench header when text stands before
    its table: each line of the run's output carried a logger's or profiler's prefix (rocprof-compute's
    `   INFO    |-> [rocprofv3] | model | ...`), which splits into columns of its own. llama-bench starts
    each table line with `|` and its first column is `model`; None for a line that starts with `|`, has
    no `model` column or nothing but llama-bench titles before it."""
    s = line.strip().lstrip("\ufeff")
    if s.startswith("|") or "model" not in titles[1:] or titles[0] == "model":
        return None
    before = titles[: titles.index("model")]
    if all(TITLE.fullmatch(t) for t in before):
        return None
    cut = [m.start() for m in re.finditer(r"\|", s)][len(before) - 1]
    return (
        f"{where}: text stands before the table on its line ({s[: cut + 1][:60]!r}: a logger's or profiler's "
        "prefix on each line of the run's output); llama-bench starts each table line with `|`: remove that "
        "prefix from the table's lines and import the file again"
    )


def problem(titles: list[str], where: str) -> str | None:
    """Why a header of `titles` (`read`) is no llama-bench header, naming the first column (1-based)
    whose title is not of llama-bench's form (TITLE), and its first character outside ASCII by code
    point and Unicode name; None when every title is."""
    for i, title in enumerate(titles, 1):
        if TITLE.fullmatch(title):
            continue
        if not title:
            return (
                f"{where}: column {i} has no title: which field its values are is unknown; name it or drop it"
            )
        odd = next((ch for ch in title if not ch.isascii()), None)
        if odd is None:  # spaces, parentheses, dots: another tool's column, or one added by hand
            return (
                f"{where}: column {i} {ascii(title[:40])} is not a llama-bench column title (llama-bench's titles are "
                "lower-case names without spaces or punctuation: threads, n_ubatch, t/s): a table another "
                "tool wrote (llama-benchy's `peak t/s`, `ttfr (ms)`) or with a column added by hand, not "
                "llama-bench -o md output"
            )
        what = f": U+{ord(odd):04X} {unicodedata.name(odd, 'an unnamed character')}"
        return (
            f"{where}: column {i} {ascii(title[:40])} is not a llama-bench column title{what} (llama-bench writes "
            "lower-case ASCII names: threads, n_ubatch, t/s); retype the title"
        )
    return None
