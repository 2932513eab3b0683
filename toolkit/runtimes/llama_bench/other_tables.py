"""What another program's table is, told from llama-bench's: the import's word on a file without a row.

A file that holds a table but no llama-bench row was refused "expected llama-bench output" or "a
markdown table ... needs a header with model, test and t/s columns", which says what was looked for,
not what the file holds. Three kinds of table are named here, each with its columns:

- a markdown table whose header is not llama-bench's (no model, test and t/s columns): figures set out
  by hand or by a script, such as an A/B table (`Workload | Control (t/s) | Candidate (t/s) | Gain`,
  its rows `pp512`, `tg128`), a ubatch pivot (`Model | Cards | ub 256 | ub 512 | ...`), a depth summary
  (`Tiefe | UD-Q6_K_M | ...`) or llama-server's timings (`Input tokens | Prefill | Decode`): md_table;
- a table drawn with box-drawing characters (`┏━━┳━━┓`, `┃ Context ┃ TTFT (s) ┃`: Python's rich, a
  script's printed report): box_table;
- rows of llama-bench's own table pasted without its header and separator lines: headless_rows;
- a CSV whose header names none of llama-bench's fields (a sensor log `epoch,device,edge_c,...,power_w`,
  a script's own `model_name,context_k,...,decode_tps`): csv_table.

results.import_read._no_rows asks these only once no llama-bench row was found and no failed run or
other program's log (failed_run) explains the file.
"""

from __future__ import annotations

import re

from toolkit.core.text import line_text
from toolkit.runtimes.llama_bench.readers import MD_SEP, md_cells

_TEST = re.compile(r"^\**(?:pp|tg)\d+(?:\s*\+\s*tg\d+)?(?:\s*@\s*d\d+)?(?:\**$|\s+ub\d+$)", re.IGNORECASE)
"""A cell that names a llama-bench test (`pp512`, `tg128`, `pp512+tg128`, `pp2048 @ d4096`; bold allowed;
`pp2048 ub512` as the toolkit's report names its rows)."""
_IMAGE_AT = re.compile(r"^[\w.+-]+@[\w:.+-]+$")
"""A column the toolkit's own report names its images by (`h200-alone@0d0ae5be877a`: image@digest)."""
_HEAD_TEST = re.compile(r"^(?:pp|tg)\d+\b", re.IGNORECASE)
"""A header cell that starts with a test's name (`pp512 (t/s)`, `tg128 t/s`): a column of one test's figures."""
_MAX_NAMED = 8
"""How many of a table's columns a refusal names (then `...`)."""
_INSTEAD = "import llama-bench's own output (-o jsonl, or its -o md table as printed)"


def _named(cells: list[str]) -> str:
    """A table's column names for a sentence: the first _MAX_NAMED, each cut at 40 characters."""
    shown = [c[:40] for c in cells if c][:_MAX_NAMED]
    more = ", ..." if len([c for c in cells if c]) > _MAX_NAMED else ""
    return ", ".join(shown) + more


def _md_tables(lines: list[str]) -> list[tuple[int, list[str], list[list[str]]]]:
    """Each markdown table of `lines`: (its header's line number, 1-based; the header's cells; its rows'
    cells), a table being a `|` line followed by a separator line (`|---|:---:|`, or `---|:---:|`)."""
    out, i = [], 0
    while i < len(lines) - 1:  # each line read once: a table's rows are not read again as headers
        head, sep = line_text(lines[i]), line_text(lines[i + 1])
        i += 1
        if not head.startswith("|") or not _separator_start(sep):
            continue
        if not all(MD_SEP.match(c.replace(" ", "")) for c in md_cells(sep) if c):
            continue
        rows, at = [], i - 1
        i += 1
        while i < len(lines) and line_text(lines[i]).startswith("|"):
            rows.append(md_cells(lines[i]))
            i += 1
        out.append((at + 1, md_cells(head), rows))
    return out


def _separator_start(sep: str) -> bool:
    """Whether `sep` can be a table's separator line: it starts with `|`, or with its first cell where
    the leading pipe is left out (` ------: | -----: |`, a hand-typed header's: markdown reads it)."""
    return sep.startswith("|") or ("|" in sep and sep.lstrip().startswith(("-", ":")))


def _test_named(head: list[str], rows: list[list[str]]) -> str | None:
    """The first llama-bench test a table names: a row's cell (`pp512`, `**tg128**`) or a header's
    (`pp512 (t/s)`), without markdown's bold; None where it names none."""
    cell = next((c for r in rows for c in r if _TEST.match(c)), None)
    cell = cell or next((c for c in head if _HEAD_TEST.match(c)), None)
    return None if cell is None else cell.strip("*")[:40]


def md_table(lines: list[str]) -> str | None:
    """The word on a file's markdown table that is not llama-bench's (its header lacks a model, test or
    t/s column): the first table whose rows name a llama-bench test (`pp512`: figures taken from runs),
    else the first table; its line, its columns and what it is (the toolkit's own report where a column
    is an image@digest). None where the file has no table, or that table has llama-bench's model and
    t/s columns (a header without rows, or an early llama-bench's n_prompt/n_gen table of August 2023:
    the caller says what it lacks)."""
    tables = _md_tables(lines)
    if not tables:
        return None
    n, head, rows = next((t for t in tables if _test_named(t[1], t[2])), tables[0])
    if {"model", "t/s"} <= {c.lower() for c in head}:  # llama-bench's, of columns the reader lacks (2023)
        return None
    test = _test_named(head, rows)
    if any(_IMAGE_AT.match(c) for c in head):
        what = (
            "the toolkit's own report (`toolkit report --format github`: a column per image@digest), whose "
            "records are in the results folder it was made from: report or compare that folder, nothing to import"
        )
    elif test is not None:
        what = (
            f"it names llama-bench tests ({test!r}) but its figures are set out by hand or by a script (a "
            "comparison, a summary, a pivot), not llama-bench's rows, and what each row ran is not said"
        )
    else:
        what = "another kind of table, not llama-bench's rows"
    what += "" if what.endswith("nothing to import") else f"; {_INSTEAD}"
    return (
        f"the markdown table at line {n} is not llama-bench -o md output: it needs a header with model, test "
        f"and t/s columns, and its columns are {_named(head)}: {what}"
    )


_TS_CELL = re.compile(r"^\d+(?:\.\d+)?\s*±\s*\d+(?:\.\d+)?$")


def headless_rows(lines: list[str], first: int) -> str | None:
    """The word on a file whose first `|` line (`first`, 1-based) is a llama-bench row without the
    header and separator lines above it (pasted from a longer table: its last two cells a test `pp16384`
    and a t/s `890.38 ± 0.56`): how many such rows and what to do; None where that line is none."""
    rows = []
    for ln in lines[first - 1 :]:
        cells = md_cells(ln) if ln.strip().startswith("|") else []
        if len(cells) < 3 or not _TEST.match(cells[-2]) or not _TS_CELL.match(cells[-1]):
            break
        rows.append(cells)
    if not rows:
        return None
    return (
        f"line {first} and the {len(rows) - 1} line(s) after it are rows of a llama-bench markdown table "
        f"without its header and separator lines (their last cells a test, {rows[0][-2]!r}, and its t/s, "
        f"{rows[0][-1]!r}): which column is which is not guessed; put the header llama-bench printed above "
        "them, or import the run's -o jsonl"
    )


_BOX_TOP = re.compile(r"^\s*[┏┌╔╭][━─═┳┬╦]+")
_BOX_SIDES = re.compile(r"[┃│║]")


def box_table(lines: list[str]) -> str | None:
    """The word on a file that holds a table drawn with box-drawing characters (a top border `┏━━┳━━┓`,
    then cells between `┃` or `│`): its line, its header's cells and what it is; None where there is none."""
    for i, line in enumerate(lines):
        if not _BOX_TOP.match(line) or i + 1 >= len(lines) or not _BOX_SIDES.search(lines[i + 1]):
            continue
        cells = [c.strip() for c in _BOX_SIDES.split(lines[i + 1])]
        return (
            f"the file is another program's printed report: the table at line {i + 1} is drawn with "
            f"box-drawing characters (its columns: {_named(cells)}), as Python's rich or a script draws its "
            f"own tables, not llama-bench output; {_INSTEAD}"
        )
    return None


_CSV_NAME = re.compile(r"^[A-Za-z_][\w .()%/-]{0,63}$")


def csv_table(lines: list[str], llama_fields: frozenset[str] | set[str]) -> str | None:
    """The word on a file whose first line is a CSV header (3 or more comma-separated names, the next line
    of as many fields) naming none of `llama_fields` (llama-bench's): its columns and what it is (a sensor
    log where they name power, temperature or clocks); None for any other file."""
    text = [ln for ln in lines if ln.strip()]
    if len(text) < 2:
        return None
    head = [c.strip().strip('"') for c in text[0].split(",")]
    if len(head) < 3 or not all(_CSV_NAME.match(c) for c in head) or len(text[1].split(",")) != len(head):
        return None
    if any(c in llama_fields for c in head):
        return None
    low = " ".join(head).lower()
    sensors = any(w in low for w in ("power", "temp", "edge_c", "junction", "sclk", "mclk", "fan"))
    what = (
        "a sensor log (power, temperature, clocks), not a benchmark's result"
        if sensors
        else "another program's table, not llama-bench output"
    )
    return (
        f"the file is a CSV whose columns ({_named(head)}) are none of llama-bench -o csv's (model_type, "
        f"n_prompt, n_gen, avg_ts, ...): {what}; {_INSTEAD}"
    )
