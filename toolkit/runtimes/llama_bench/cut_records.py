"""Records cut apart on their way to a file: a JSON record broken over lines (a paste, a terminal's wrap)
and a markdown table's row after its table's end (a blank line or a `<details>` block between). The
readers (readers.read_jsonl, readers.read_md) read neither; these say where they are and what to do.
Also rows no llama-bench prints that are too wide to split at all (MAX_CELLS).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from toolkit.core import jsonsafe
from toolkit.core.text import as_written, line_text

MAX_CELLS = 1024
"""The most cells (md) or fields (csv) a row is split into: llama-bench prints about 50 columns; a
row of 5,000,000 cells held them all as strings (a 30 MB md file took 990 MB and 51 s). A row with
more is no llama-bench row: refused, its cells past the limit never split."""


def too_wide(what: str, whose: str) -> str:
    """The refusal of a row (or header: `whose`) of more than MAX_CELLS `what` (cells, fields)."""
    return f"{whose} has more than {MAX_CELLS} {what} (llama-bench prints about 50): not a llama-bench row"


class WideLine(Exception):
    """A csv line of more than MAX_CELLS fields (MAX_CELLS separators or more), raised before csv splits it."""


class CsvLines:
    """readers.iter_csv's lines for csv.reader: a line with MAX_CELLS commas or more raises WideLine (the
    reader is asked again for the next line), one starting or ending unprintable is line_text's."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = iter(lines)
        self.last = ""  # the line given last, as read

    def __iter__(self) -> CsvLines:
        return self

    def __next__(self) -> str:
        ln = self.last = next(self.lines)
        if ln.count(",") >= MAX_CELLS:  # MAX_CELLS commas: MAX_CELLS + 1 fields
            raise WideLine
        return ln if ln[:1].isprintable() else line_text(ln) + "\n"


_LOG_PREFIX = re.compile(r"[A-Za-z_][\w .\-/]*:(?:\s|$)|\[")
_CUT_VALUE = re.compile(r"[\w.+\-/]*\w[\w.+\-/]*")  # one value, no space or `:`: a row cut in its first field


def csv_log_line(line: str, row_start: str = "") -> bool:
    """Whether a csv `line` whose field count is not its header's is a log line (stderr captured with the
    rows, `-o csv > FILE 2>&1`: `llama-bench: benchmark 2/4: starting`, `  Device 0: NAME, compute
    capability 8.9`, `[INFO] ...`, a line of dots), read past: it does not start with `"` (llama-bench
    quotes every value of a row) and holds no comma or opens with a log's `name:` or `[` before any. A
    row cut short (`"0c1e57098","0"`, or unquoted `0c1e57098,0`) is none: it is still refused; so is a
    row after a log line's text on its line (`Device 0: NAME, VMM: yes"0c1e57098","0",...`: stderr
    written without its newline), which holds llama-bench's `","` between two quoted values; nor is an
    unquoted row cut inside its first field: a line that is the start of `row_start`, the first field of
    the row before it (`0c1e5` under rows of build `0c1e57098`: one run's rows share their build), or,
    with no row before it to compare (a run's first row: `row_start` ""), one bare value (`0c1e5`,
    `tiny-qwen3.gg`: _CUT_VALUE; a log line has words, a `name:` or only dots). After a row, a bare word
    that is no start of its first field (`Killed`, `Terminated`: a shell's word on the run's end) is a
    log line, read past as before."""
    s = line_text(line)
    if s and (row_start.startswith(s) if row_start else _CUT_VALUE.fullmatch(s)):
        return False
    return not s.startswith('"') and '","' not in s and ("," not in s or _LOG_PREFIX.match(s) is not None)


WRAP = 8
"""How many lines a JSON record broken by a paste or a terminal may span for wrapped to say so."""


def wrapped(lines: list[str], i: int, first: int) -> str:
    """readers.read_jsonl's addition to its note on `lines[i]` (line `first + i`), which starts a record
    and does not parse:
    where the record goes on over the next lines (up to WRAP in all, none starting a record of its own)
    and their text joined (_joined: with newlines, or with nothing where the cut fell inside a string or a
    number) is one JSON object - a record broken over lines by a paste or a terminal's wrap
    - the lines it spans, its first keys and what to do (join them; the record is not read as it stands);
    "" otherwise."""
    texts = [line_text(lines[i])]
    for j in range(i + 1, min(i + WRAP, len(lines))):
        texts.append(line_text(lines[j]))
        if texts[-1].startswith("{"):
            return ""
        value = _joined(texts)
        if value is None:
            continue
        if not isinstance(value, dict):
            return ""
        keys = ", ".join(list(value)[:6]) + (", ..." if len(value) > 6 else "")
        return (
            f": the record goes on to line {first + j}: one JSON object broken over lines {first + i}-{first + j} "
            f"(a paste or a terminal wrapped it; its keys: {keys}); join its lines into one line to import it"
        )
    return ""


def _joined(texts: list[str]) -> object | None:
    """The JSON value of `texts` (a record's lines) joined as they were cut: at a line end between two
    values (joined with a newline), or anywhere at all, inside a string or a number (a terminal's hard
    wrap at its width, or a paste's at a fixed column: joined with nothing); None when neither parses."""
    for sep in ("\n", ""):
        try:
            return jsonsafe.parse(sep.join(texts))
        except jsonsafe.JsonProblem:
            continue
    return None


class StrayRows:
    """readers.read_md's rows of a table after its end (`see`), said as one note a table in `skipped`
    (None: nothing noted) when the next table starts or the text ends (`said`): the first row's line,
    then how many more up to which line. A file of 500,000 rows after its table's end holds and prints
    one note, not one a row (memory: a constant)."""

    def __init__(self, skipped: list[str] | None) -> None:
        self.skipped = skipped
        self.table, self.first, self.more, self.end = 0, 0, 0, 0

    def see(self, line: str, cells: int, last: tuple[int, int], at: int) -> None:
        """`line` (at line `at`), after the end of the table whose header's line and cell count are
        `last`: a row of that table (`cells`, its count of cells: readers.md_cells) with a `±` figure is
        a row cut off by a blank line or other text (a paste's `<details>` block repeating a row), not
        read: counted. Any other line: nothing."""
        if self.skipped is None:
            return
        s = line_text(line)
        if not s.startswith("|") or cells != last[1] or "±" not in as_written(s):
            return
        if not self.first:
            self.table, self.first = last[0], at
        else:
            self.more, self.end = self.more + 1, at

    def said(self) -> None:
        """Append the note on the rows seen since the last call (nothing when none)."""
        if self.first and self.skipped is not None:
            more = f"; and {self.more:,} more such row(s), up to line {self.end}" if self.more else ""
            self.skipped.append(
                f"line {self.first}: a row of the table at line {self.table} after that table's end (a blank "
                f"line or other text came between): not read; put it back under its table's header to import "
                f"it{more}"
            )
        self.table, self.first, self.more, self.end = 0, 0, 0, 0
