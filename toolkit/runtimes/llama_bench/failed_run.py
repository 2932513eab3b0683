"""Why a file of llama-bench's own text holds no result row: the run failed, or the table is another's.

A capture of a llama-bench run that stopped before its first row (a GPU lost, an RPC server that
cannot be reached or crashed, a HIP exception, a failed load) holds llama-bench's log and at most its
table's header: it is llama-bench's output, and what stopped the run is written in it. A markdown table
with llama-bench's `model` and `test` columns but no `t/s` column holds results rearranged (two
builds side by side, a Δ% column: compare-llama-bench.py's kind, or by hand), not llama-bench's rows;
nor does llama-sweep-bench's (`PP | TG | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s`) or
llama-batched-bench's (the same columns and `B`, `T s`, `S t/s`: B sequences decoded at once).
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
    r"|Segmentation fault|core dumped|out ?of ?(?:device ?|host ?)?memory|allocation of size \d+ failed",
    re.IGNORECASE,
)
"""A line of llama.cpp's (ggml's, a driver's, the C++ runtime's) that says the run stopped: the
first such line of a file names the cause (the backtrace and `ggml_abort` frames come after it; a
load that ran out of memory says so above `main: error: failed to load model`: Vulkan's
`Device memory allocation of size N failed.` and `vk::Device::allocateMemory: ErrorOutOfDeviceMemory`,
CUDA's `cudaMalloc failed: out of memory`)."""


LOG_LINE_MAX = 1 << 16
"""The longest line why_no_rows reads: llama.cpp's log lines and table rows are well under 1 KB."""


_SWEEP = {"pp", "tg", "n_kv", "s_pp t/s", "s_tg t/s"}
"""The columns of llama-sweep-bench's table (print_table's header, lower case); llama-batched-bench's
has them too, and `b` (how many sequences each pass decodes at once)."""


def _cells(line: str) -> list[str]:
    """A table line's cells as readers.md_cells reads them (the one reading of a row), lower case."""
    return [c.lower() for c in md_cells(line)]


def why_no_rows(lines: list[str]) -> str | None:
    """What a file's `lines` (without line ends) that gave no llama-bench row hold instead, or None:
    a markdown table with `model` and `test` columns but no `t/s` (its first line and columns named);
    else the first line that says the run failed (1-based, its text cut at 160 characters), with the
    table header it left without rows. A line longer than LOG_LINE_MAX is no log or table line: not
    searched (a 40 MB line of commas took 22 s in these patterns)."""
    lines = [ln if len(ln) <= LOG_LINE_MAX else "" for ln in lines]  # numbered as before
    header = next((i for i, ln in enumerate(lines, 1) if {"model", "test", "t/s"} <= set(_cells(ln))), None)
    sweep = next(((i, c) for i, ln in enumerate(lines, 1) if _SWEEP <= (c := set(_cells(ln)))), None)
    if sweep is not None and "b" in sweep[1]:
        return (
            f"the markdown table at line {sweep[0]} is llama-batched-bench's (PP, TG, B, N_KV, S_PP t/s, S_TG "
            "t/s, S t/s: B sequences decoded at once, their tokens/s summed), not llama-bench -o md output; for "
            "one sequence's figures run llama-bench with -p PP -n TG and import that output"
        )
    if sweep is not None:
        return (
            f"the markdown table at line {sweep[0]} is llama-sweep-bench's (ik_llama.cpp: PP, TG, N_KV, S_PP t/s, "
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
    if header is None and (said := _other_program(lines)) is not None:
        return said
    for n, line in enumerate(lines, 1):
        if FAILURE.search(line) and not line_text(line).startswith("|"):  # a table's cell is no log line
            left = f"; its table's header (line {header}) has no row" if header is not None else ""
            return (
                f"the llama-bench run failed before it printed a result: line {n}: {line.strip()[:160]!r}"
                f"{_then(lines, n)}{left}: a failed run has nothing to import; run it again once the cause is fixed"
            )
    return None


_RUN_LLAMA_BENCH = "run llama-bench on the model (-o jsonl) and import that"
_SERVED = "run it again with --save-result (SGLang: --output-file) and import that JSON"

_OTHER = (
    (
        re.compile(r"(?:srv|slot) +\w+: |main: (?:HTTP )?server is listening on"),
        "a llama-server log (the server's requests and slots: it measured no benchmark)",
        _RUN_LLAMA_BENCH,
    ),
    (
        re.compile(r"llama_perf_context_print: |llama_print_timings: "),
        "llama-cli's (main's) timings of one generation, not llama-bench's repeated tests",
        _RUN_LLAMA_BENCH,
    ),
    (
        re.compile(
            r"\$ (?:podman|docker) (?:build|buildx) |(?:\[\d+/\d+\] )?STEP \d+/\d+: |#\d+ \[[^\]]*\] "
        ),
        "a container image build's log (podman or docker build), not a llama-bench run",
        _RUN_LLAMA_BENCH,
    ),
    (
        re.compile(r"=+ Serving Benchmark Result =+\s*$"),
        "a serving benchmark's printed summary (`vllm bench serve`, benchmark_serving.py or SGLang's "
        "bench_serving: 'Serving Benchmark Result': rounded figures, without the lengths it was asked for), "
        "not its result JSON",
        _SERVED,
    ),
    (
        re.compile(r"Throughput: [\d.]+ requests/s, "),
        "`vllm bench throughput`'s (benchmark_throughput.py's) printed line ('Throughput: ... requests/s'), "
        "not its result JSON",
        "run it again with --output-json and import that JSON",
    ),
)
"""Lines only another program prints (llama.cpp's server and cli, a container build, a serving or
throughput benchmark's summary), what its file is and what to import instead: why_no_rows names it
where no llama-bench table header is in the file (a Windows PowerShell capture of llama-server, CRLF
and all; a podman build log, whose `ERROR:` lines are no llama-bench failure; `vllm bench serve`'s
summary pasted in a markdown report)."""


OTHER_PROGRAM = "the file is "
"""How why_no_rows' word on another program's output begins (_other_program): its lines that looked like
records (a chat template's `{%- ... %}` in a server log) are that program's, not llama-bench's broken rows."""


def _other_program(lines: list[str]) -> str | None:
    """why_no_rows' word on a file of another program's output (_OTHER; the first such line named, and
    what to import instead), or None."""
    for n, line in enumerate(lines, 1):
        for pattern, what, instead in _OTHER:
            if pattern.match(line_text(line)):
                said = f"{what}: line {n}: {line.strip()[:120]!r}; not llama-bench output: {instead}"
                return OTHER_PROGRAM + said
    return None


_NEAR = 4
"""How many lines after a run's first failure line may still belong to its account (_then)."""


def _then(lines: list[str], n: int) -> str:
    """The last failure line within _NEAR lines after line `n` (1-based; the cause), quoted as where the
    account ends (`main: error: failed to load model` two lines under Vulkan's allocation failure), or ""."""
    last = next(
        (m for m in range(min(n + _NEAR, len(lines)), n, -1) if FAILURE.search(lines[m - 1])),
        None,
    )
    return "" if last is None else f" ... line {last}: {lines[last - 1].strip()[:160]!r}"


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
