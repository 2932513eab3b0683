"""Why a file of llama-bench's own text holds no result row: the run failed, or the table is another's.

A capture of a llama-bench run that stopped before its first row (a GPU lost, an RPC server that
cannot be reached or crashed, a HIP exception, a failed load) holds llama-bench's log and at most its
table's header: it is llama-bench's output, and what stopped the run is written in it. A markdown table
with llama-bench's `model` and `test` columns but no `t/s` column holds results rearranged (two
builds side by side, a Δ% column: compare-llama-bench.py's kind, or by hand), not llama-bench's rows;
nor does llama-sweep-bench's (`PP | TG | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s`).
Both are said by the import's refusal instead of "expected llama-bench output" (results.import_read).
A run that stopped after some rows (a crash, an abort, a GPU lost mid-run) is imported for its rows,
with a note naming the line that says why it did not end (`after_rows`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from toolkit.core.text import line_text
from toolkit.runtimes.llama_bench.readers import md_cells

FAILURE = re.compile(
    r"terminate called after throwing|GGML_ASSERT|Remote RPC server crashed|Failed to connect to"
    r"|HSA_STATUS_ERROR|\b(?:ROCm|CUDA|SYCL|Vulkan|HIP) error\b|\berror: |failed to (?:load|allocate|create)"
    r"|Segmentation fault|core dumped|out of memory",
    re.IGNORECASE,
)
"""A line of llama.cpp's (ggml's, a driver's, the C++ runtime's) that says the run stopped: the
first such line of a file names the cause (the backtrace and `ggml_abort` frames come after it)."""


_SWEEP = {"pp", "tg", "n_kv", "s_pp t/s", "s_tg t/s"}
"""The columns of llama-sweep-bench's table (print_table's header, lower case)."""


def _cells(line: str) -> list[str]:
    """A table line's cells as readers.md_cells reads them (the one reading of a row), lower case."""
    return [c.lower() for c in md_cells(line)]


def why_no_rows(lines: list[str]) -> str | None:
    """What a file's `lines` (without line ends) that gave no llama-bench row hold instead, or None:
    a markdown table with `model` and `test` columns but no `t/s` (its first line and columns named);
    else the first line that says the run failed (1-based, its text cut at 160 characters), with the
    table header it left without rows."""
    header = next((i for i, ln in enumerate(lines, 1) if {"model", "test", "t/s"} <= set(_cells(ln))), None)
    sweep = next((i for i, ln in enumerate(lines, 1) if _SWEEP <= set(_cells(ln))), None)
    if sweep is not None:
        return (
            f"the markdown table at line {sweep} is llama-sweep-bench's (ik_llama.cpp: PP, TG, N_KV, S_PP t/s, "
            "S_TG t/s: one timed pass at each context depth), not llama-bench -o md output; for its figures "
            "run llama-bench with -p PP -n TG -d N_KV,... and import that output"
        )
    for n, line in enumerate(lines, 1):
        cells = _cells(line) if line_text(line).startswith("|") else []
        if "model" in cells and "test" in cells and "t/s" not in cells:
            named = ", ".join(c for c in cells if c)[:120]
            return (
                f"the markdown table at line {n} has llama-bench's model and test columns but no t/s column "
                f"(its columns: {named}): results set side by side or rearranged (compare-llama-bench.py, or "
                "by hand), not llama-bench -o md output; import each run's own output"
            )
    for n, line in enumerate(lines, 1):
        if FAILURE.search(line):
            left = f"; its table's header (line {header}) has no row" if header is not None else ""
            return (
                f"the llama-bench run failed before it printed a result: line {n}: {line.strip()[:160]!r}"
                f"{left}: a failed run has nothing to import; run it again once the cause is fixed"
            )
    return None


_ENDED = re.compile(r"build:\s*[0-9A-Za-z]+\s*\(\d+\)")
"""-o md's `build: <commit> (<number>)` line, which llama-bench prints only after its last test
(markdown_printer::print_footer); -o json's is its closing `]` at the line's start (json_printer)."""


def after_rows(data: bytes, last: int) -> str | None:
    """Why a run stopped after a file's last result row (line `last`, 1-based): the first line after it that
    says so (FAILURE: an abort, a crash, a lost device; its text cut at 160 characters), named in a
    sentence; None where no line after the rows does (the run ended, or the file says nothing). A
    failure after the line llama-bench prints once every test has run (_ENDED: md's `build:` line,
    json's `]`) is a crash at exit (ggml-org/llama.cpp#10528: Vulkan's instance destroyed at exit), said
    as such: the rows are complete. `data`: the file's bytes (undecodable ones replaced), its lines as
    the readers number them (str.splitlines)."""
    return after_lines(data.decode(errors="replace").splitlines()[last:], last)


def after_lines(lines: Iterable[str], last: int) -> str | None:
    """after_rows of the lines that follow the last result row (line `last`), numbered from last + 1: a
    file read as a stream gives them without the text before (import_read.ImportSource._tail)."""
    end = None  # the line where llama-bench's printer ended its output: every test it had ran
    for n, line in enumerate(lines, last + 1):
        if end is None and (_ENDED.match(line_text(line)) or line.rstrip() == "]"):
            end = n
        elif FAILURE.search(line):
            said = repr(line.strip()[:160])
            if end is not None:
                return (
                    f"the llama-bench run crashed after it ended: line {n}: {said} after its output's end (line "
                    f"{end}, printed once every test had run): a crash at exit (a driver's teardown); its rows "
                    "are complete"
                )
            return (
                f"the llama-bench run did not end: line {n}: {said} after its last result row "
                f"(line {last}): the rows before it are imported, the tests it had still to run were not measured"
            )
    return None
