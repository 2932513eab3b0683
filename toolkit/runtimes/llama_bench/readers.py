"""llama-bench output in any of its five formats --read--> SourceRows, then ONE validity pass.

Every format llama-bench writes (`-o jsonl`, `-o json` — also the array a crashed run leaves open —,
`-o csv`, `-o md`, `-o sql`) is read here into the same shape: a SourceRow per result row, with the
line it starts on and the fields typed as llama-bench types them (tools/llama-bench/llama-bench.cpp
`test::get_field_type` at 0c1e57098: INT, BOOL, FLOAT, else STRING), so `"0.00"` stays the string
llama-bench wrote whatever the format. A reader only reports what it alone can see (a csv/md/sql row
whose field count differs from its header is never shifted into other columns, nor read under a
header that names a column twice; a JSON row that names a key twice is not read as its last value:
each carries a `problem`); whether a row is a measurement is decided once, by `check_row`, for every
format (and for `toolkit bench`'s own rows).

The validity pass (`check_row`) is in llama_bench/validity.py; its rules (`parse_test_time`,
`token_count`) in llama_bench/check.py, with llama-bench's field types and the one reading of a value
as a number (`as_float`, `as_int`) that the readers type text by.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

from toolkit.core import jsonsafe
from toolkit.core.text import as_written, line_text
from toolkit.runtimes.llama_bench import cut_records, md_defaults, md_devices, md_titles
from toolkit.runtimes.llama_bench.check import (
    ARRAY_FIELDS,
    BOOL_FIELDS,
    FLOAT_FIELDS,
    INT_FIELDS,
    LLAMA_FIELDS,
    STRING_FIELDS,
    as_float,
    as_int,
    value_kind,
)
from toolkit.runtimes.llama_bench.json_array import iter_json_array as iter_json_array
from toolkit.runtimes.llama_bench.json_array import key_twice as key_twice
from toolkit.runtimes.llama_bench.source_row import GP_TEST
from toolkit.runtimes.llama_bench.source_row import SourceRow as SourceRow


def _num(v: str | None) -> Any:
    """A field llama-bench does not type read as a number where its text is one (ASCII digits only, as
    check.as_float reads them: `５１２` is text), a bool where it is `true`/`false`, else as text."""
    if v is None:
        return None
    for conv in (int, float) if v.isascii() else ():
        with contextlib.suppress(ValueError):
            return conv(v)
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


# A C library's spellings of a value that is not finite: glibc's `nan`/`-nan`/`inf`, MSVC's `-nan(ind)`.
_NONFINITE_WORD = r"(nan|inf(?:inity)?)(?:\((?:ind|snan|qnan)?\))?"
_NONFINITE = rf"[+-]?{_NONFINITE_WORD}"
_NAN_TEXT = re.compile(rf"^\s*([+-]?){_NONFINITE_WORD}\s*$", re.IGNORECASE)


# Linear: the fraction needs its dot, so its digits never overlap the integer part's (`\d+\.?\d*`: quadratic).
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.IGNORECASE)


def typed(name: str, text: str | None) -> Any:
    """A text value (csv, md, sql) typed as llama-bench types the field; text that does not fit the
    type is kept as text (the validity pass says why such a row is refused); unknown fields as numbers
    where they read as one."""
    if text is None:
        return None
    t = text.strip()
    if name in STRING_FIELDS:
        return t
    if name in ARRAY_FIELDS:  # csv keeps arrays as "[1.0, 2.0]" or "1.0;2.0"
        return [float(x) for x in _NUMBER.findall(t)]
    if name in FLOAT_FIELDS:
        m = _NAN_TEXT.match(t)
        if m:
            return float(f"{m.group(1)}{'nan' if m.group(2).lower() == 'nan' else 'inf'}")
        f = as_float(t)  # a whole number beyond a float's range stays the int jsonl's reader has
        return t if f is None else n if math.isinf(f) and (n := as_int(t)) is not None else f
    if name in INT_FIELDS or name in BOOL_FIELDS:
        if t.lower() in ("true", "false"):
            return t.lower() == "true"
        n = as_int(t)  # ASCII digits only, as jsonl's are read: int() took `５１２` and `٥١٢` as 512
        if n is None:
            return t
        return bool(n) if name in BOOL_FIELDS and n in (0, 1) else n
    return _num(t)


def repeated_column(names: list[str]) -> str | None:
    """The first column a table's header (csv, md, sql) names twice (case ignored; unnamed columns not
    counted): each value of a row would overwrite the other's, which one was measured unknown."""
    seen: set[str] = set()
    for name in names:
        low = name.strip().lower()
        if low in seen:
            return name.strip()
        if low:
            seen.add(low)
    return None


def _column_twice(where: str, name: str) -> str:
    return f"{where} names column {name[:40]!r} twice: which of its values is the row's is unknown"


def read_jsonl(text: str, skipped: list[str] | None = None, first: int = 1) -> list[SourceRow]:
    """Objects of llama-bench output: lines that do not start with `{` are log lines and skipped (a
    capture that merged stderr into stdout carries ggml's log, e.g. `ggml_vulkan: Found N Vulkan
    devices:`, which llama-bench itself writes to stderr); a line that starts like a record but does
    not parse is noted in `skipped` (`line N: why`). A line is read as its text (core.text.line_text: a
    record after NUL bytes, a byte-order mark or a terminal escape is a record)."""
    out = []
    lines = text.splitlines()
    for n, line in enumerate(lines, first):
        line = line_text(line)
        if line.startswith("{"):
            obj, why, twice = jsonsafe.parse_printed_line(line)
            why = (
                None
                if why is None
                else f"not a complete JSON record ({why}){cut_records.wrapped(lines, n - first, first)}"
            )
            if obj is not None:
                out.append(SourceRow(n, obj, "jsonl", problem=twice))
        else:
            why = not_a_record(line)
        if why and skipped is not None:
            skipped.append(f"line {n}: {why}")
    return out


JSON_START = tuple('["-0123456789') + ("null", "true", "false")
"""How a JSON value that is not an object starts (a line starting otherwise is a log line)."""


def not_a_record(line: str) -> str | None:
    """Why a stripped JSONL line that does not start with `{` is worth a note, or None for a log line
    (ggml's log, `[INFO] ...`, blank): JSON that is not an object (`null`, `[]`, `"x"`, a number), a
    llama-bench record after other text on its line (a log line and a record run together: read as
    neither, never dropped without a word), a line of another llama-bench format (an md table line,
    sql, a csv header), or whole JSON past a bound of jsonsafe.parse (nested deeper than MAX_DEPTH, a
    number of 4300 digits): only a line that is no JSON (`[INFO] ...`, `[[[` cut short) is a log line."""
    if (at := line.find('{"')) > 0 and (why := _record_after_text(line, at)):
        return why
    if not line.startswith(JSON_START):
        fmt = "md" if line.startswith("|") else format_of(line)
        return f"a line of -o {fmt} output in JSONL: left out" if fmt in ("md", "sql", "csv") else None
    try:
        value = jsonsafe.parse(line)
    except jsonsafe.JsonProblem as err:  # no JSON (`[INFO] ...`, a list cut short): a log line
        whole = not line.startswith("[") or jsonsafe.value_end(line, 0) == len(line)
        return unreadable_json(str(err)) if whole and not str(err).startswith("not JSON") else None
    return f"JSON that is not an object ({value_kind(value)}): left out"


def unreadable_json(why: str) -> str:
    """The note on a JSONL line that is JSON but past a bound of jsonsafe.parse (`why`: its reason)."""
    return f"JSON that cannot be read ({why}): left out"


def _record_after_text(line: str, at: int) -> str | None:
    """not_a_record's note on a llama-bench record (an object naming avg_ts or n_prompt) that starts at
    `at` of `line`, after other text; None when none does."""
    try:
        value = jsonsafe.parse(jsonsafe.printf_text(line[at:]))
    except jsonsafe.JsonProblem:
        return None
    if not (isinstance(value, dict) and ("avg_ts" in value or "n_prompt" in value)):
        return None
    return f"a llama-bench record after {line[:at][:24]!r} on its line: left out (delete the text before its `{{`)"


def read_json_array(text: str, skipped: list[str] | None = None, first: int = 1) -> list[SourceRow]:
    """`-o json` output, including a truncated array from a crashed run (no closing `]`)."""
    if "[" not in text:
        return read_jsonl(jsonsafe.printf_text(text), skipped, first)
    return list(iter_json_array([text], skipped, first))


def read_csv(text: str, skipped: list[str] | None = None, first: int = 1) -> list[SourceRow]:
    """`-o csv` output: the first line is the header; a row with another number of fields than the
    header is kept as a SourceRow with a `problem` (never read into shifted columns)."""
    return list(iter_csv(io.StringIO(text), skipped, first))


def not_llama_csv(header: list[str]) -> str | None:
    """Why a csv `header` (its column names) is another program's table that borrows some of
    llama-bench's field names (a summary's `model, series, starting_depth, n_prompt, ..., avg_ts`), or
    None: it names no model_type or model_filename (every llama-bench -o csv since the first has both)
    and has columns no llama-bench prints (not in LLAMA_FIELDS; the first five named). A csv cut down
    to llama-bench's own columns, or a fork's with extra ones beside model_type, is read."""
    names = [h for h in header if h]
    if "model_type" in names or "model_filename" in names:
        return None
    foreign = [h for h in names if h not in LLAMA_FIELDS]
    if not foreign:
        return None
    listed = ", ".join(h[:40] for h in foreign[:5]) + (", ..." if len(foreign) > 5 else "")
    return (
        f"not llama-bench -o csv: no model_type or model_filename column (every llama-bench csv names its "
        f"model) and columns llama-bench never prints ({listed}): another program's table of results, whose "
        "columns (a depth under another name) would be misread; import llama-bench's own output"
    )


def _header_again(cells: list[str]) -> bool:
    """Whether a csv line after the header is a llama-bench header again: it names the model's columns
    and a test's, and holds no value (a row whose model file is named `n_prompt` still holds its
    numbers). `-o csv >> FILE` writes one per run, and a newer build's names more columns (n_cpu_moe,
    fit_target): its rows are read under it."""
    names = {c.strip() for c in cells}
    return (
        bool(names & {"model_filename", "model_type"})
        and bool(names & {"n_prompt", "avg_ts"})
        and all(isinstance(_num(n), str) for n in names)  # a row holds numbers (n_prompt, avg_ts...)
    )


class _LineRows:
    """csv.reader's rows, one per line of `src`: llama-bench writes no line break inside a value, so a
    quote a row cut short leaves open (`"0c1e5` on its own line) ends with its line instead of taking
    the rows after it into one field (they were neither kept nor named). `line_num` counts the lines
    asked for, a WideLine's too."""

    def __init__(self, src: cut_records.CsvLines) -> None:
        self.src, self.line_num = src, 0

    def __iter__(self) -> _LineRows:
        return self

    def __next__(self) -> list[str]:
        self.line_num += 1
        return next(csv.reader([next(self.src)]), [])


def iter_csv(lines: Iterable[str], skipped: list[str] | None = None, first: int = 1) -> Iterator[SourceRow]:
    """read_csv as a stream: `lines` (with their line ends) from the header's line on; holds one row
    (of at most cut_records.MAX_CELLS fields: a wider line is refused before it is split). A header
    line again (_header_again: another run appended) is the header of the rows after it."""
    src = cut_records.CsvLines(lines)
    reader = _LineRows(src)
    header: list[str] | None = None
    said: str | None = None  # the header names a column twice: every row is refused for it
    end = 0
    row_start = ""  # the first field of the last row read: a line that is its start is a row cut short
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as err:  # a field over csv's limit (131,072 characters): no llama-bench value
            line, end = end + 1, reader.line_num
            yield SourceRow(first + line - 1, {}, "csv", problem=f"not a CSV row ({str(err)[:80]})")
            continue
        except cut_records.WideLine:
            line = end = end + 1
            if header is None:  # every row after it is refused for it, as for a column named twice
                header, said = [], cut_records.too_wide("fields", f"the header (line {first + line - 1})")
            else:
                yield SourceRow(
                    first + line - 1, {}, "csv", problem=cut_records.too_wide("fields", "the row")
                )
            continue
        line, end = end + 1, reader.line_num
        if not cells or not any(c.strip() for c in cells):
            continue
        if header is None or _header_again(cells):  # another run appended (`-o csv >> FILE`): its header
            header = [c.strip() for c in cells]
            row_start = ""  # a run's first row: no row of its own before it (cut_records.csv_log_line)
            twice = repeated_column(header)
            said = _column_twice(f"the header (line {first + line - 1})", twice) if twice else None
            if said is None and (other := not_llama_csv(header)) is not None:
                said = f"the header (line {first + line - 1}): {other}"
            continue
        n = first + line - 1
        if said is not None:
            yield SourceRow(n, {}, "csv", problem=said)
            continue
        if len(cells) != len(header):
            if line == end and cut_records.csv_log_line(src.last, row_start):  # one line: src.last
                continue  # stderr captured with the rows (`2>&1`): a log line, read past
            yield SourceRow(
                n,
                {},
                "csv",
                problem=f"{len(cells)} fields, the header has {len(header)}: the row does not say which "
                "value belongs to which column",
            )
            continue
        fields = {k: typed(k, v) for k, v in zip(header, cells, strict=True) if k}
        row_start = cells[0].strip()
        yield SourceRow(n, fields, "csv", notes=[] if "samples_ts" in fields else ["no samples"])


def md_cells(line: str) -> list[str]:
    """The cells of an md table line, at most cut_records.MAX_CELLS + 1 (the last then holds the rest unsplit),
    of the line as written (text.as_written: a `±` a paste read in another code page, `Â±`, is `±`, and the
    line's other cells with it)."""
    s = as_written(line_text(line))  # a byte-order mark before the header (a file saved with one), NUL bytes
    s = s[1:] if s.startswith("|") else s
    s = s[:-1] if s.endswith("|") else s
    return [c.strip() for c in s.split("|", cut_records.MAX_CELLS)]


MD_SEP = re.compile(r"^:?-+:?$")
"""A markdown table's separator cell (`---`, `:---:`): the line under a header (read_md, other_tables)."""


_MD_TEST = re.compile(
    r"^(?:pp\s*(?P<p>\d{1,9}))?(?:\s*\+\s*)?(?:tg\s*(?P<g>\d{1,9}))?(?:\s*@\s*d\s*(?P<d>\d{1,9}))?$",
    re.IGNORECASE,
)
MD_CELL_MAX = 64
"""The longest md cell read as a test name or t/s value (`pp512+tg128 @ d4096`, `1773.94 ± 34.01`):
a longer one is no llama-bench value, refused before any pattern runs on it (linear whatever it holds)."""


# Either side may be any spelling of a value that is not finite, as csv/sql/json read them (typed): a
# Windows build prints `110.00 ± -nan(ind)` where glibc's prints `110.00 ± -nan`.
_MD_TS = re.compile(
    rf"^(?P<avg>[-+0-9.eE]+|{_NONFINITE})\s*(?:±|\+/-|\+-)\s*(?P<sd>[-+0-9.eE]+|{_NONFINITE})$", re.IGNORECASE
)


_MAX_INT_DIGITS = 40  # more digits than any 64-bit count (20) has: not converted, refused as out of range
_MD_BUILD = re.compile(r"^\s*build:\s*(?P<commit>[0-9A-Za-z]+)\s*\((?P<number>\d+)\)")

MD_COLUMNS = ("model", "test", "t/s")
"""Columns every llama-bench -o md table has (markdown_printer: model, size, params, backend, the
fields that vary, test, t/s); a table without them is another tool's and is not read as llama-bench."""


def is_md_header(line: str) -> bool:
    """A llama-bench -o md header: a table line (with or without the leading `|`) naming MD_COLUMNS."""
    if "|" not in line:
        return False
    cells = set(md_titles.read(md_cells(line)))
    return all(c in cells for c in MD_COLUMNS)


def md_table_like(line: str) -> bool:
    """A table header naming `test` and `t/s` but not all of MD_COLUMNS: another tool's table that
    looks like llama-bench's (read_rows refuses it, naming what it lacks)."""
    cells = set(md_titles.read(md_cells(line))) if "|" in line else set()
    return "test" in cells and "t/s" in cells and not is_md_header(line)


def read_md(text: str, skipped: list[str] | None = None, first: int = 1) -> list[SourceRow]:
    """`-o md` tables, bare or pasted in a code fence after log lines: a header naming MD_COLUMNS, a
    separator, rows, and the `build: <commit> (<number>)` line llama-bench prints after the table (or one
    pasted above it). The device lines a backend logs above a table (md_devices) give its rows' `gpu_info`
    where the table has no such column; log lines printed into a table are read past. The table has no samples
    and, without a build line, no build commit: each row says so. The columns it leaves out hold its build's
    defaults where that build is known to have them (md_defaults.fill), else they stay unknown and the row
    says so."""
    lines = text.splitlines()
    out: list[SourceRow] = []
    i, above = 0, None
    devices: md_devices.Listing = {}
    last: tuple[int, int] | None = None  # the last table's header: its line and its number of cells
    strays = cut_records.StrayRows(skipped)  # said once per table (a count, not a note a row)
    while i < len(lines):
        if not is_md_header(lines[i]):
            if last is not None and skipped is not None:
                strays.see(lines[i], len(md_cells(lines[i])), last, first + i)
            above = _MD_BUILD.match(lines[i]) or above
            md_devices.listed(devices, lines[i])
            i += 1
            continue
        strays.said()
        titles = md_titles.read(md_cells(lines[i]))  # llama-bench's titles are lower case
        last = (first + i, len(titles))
        header = [md_titles.MD_FIELDS.get(c, c) for c in titles]
        at = f"the table's header (line {first + i})"
        said = (
            (cut_records.too_wide("cells", at) if len(titles) > cut_records.MAX_CELLS else None)
            or md_titles.prefixed(lines[i], titles, at)
            or md_titles.problem(titles, at)
            or md_header_problem(titles, at)
        )
        i += 1
        if i < len(lines) and all(MD_SEP.match(c) for c in md_cells(lines[i]) if c):
            i += 1
        table: list[SourceRow] = []
        # device lines under the table: the next run's log (this one stopped under its header: ^C)
        after: md_devices.Listing = {}
        while i < len(lines) and not is_md_header(lines[i]):
            if md_devices.listed(after, lines[i]):  # Vulkan's has `|`: no row
                pass
            elif "|" not in lines[i]:
                if not (_md_log_line(lines[i]) or not (table or lines[i].strip())):
                    break  # a blank line before the table's first row (a paste's) does not end it
            else:
                row = _md_row(header, md_cells(lines[i]), first + i)
                table.append(
                    row if said is None else SourceRow(row.line, {}, "md", problem=said, notes=row.notes)
                )
            i += 1  # a log line printed into the table (stderr merged): not the table's end
        build = above
        j = i
        while j < len(lines) and not is_md_header(lines[j]):
            m = _MD_BUILD.match(lines[j])
            if m:
                build = m
                break
            j += 1
        for row in table:
            _md_build(row, build)
        known = any(md_defaults.known_build(row.fields) for row in table)  # one build printed the table
        for row in table:
            # the columns the table left out: its build's defaults where its build is known to have them
            unknown = md_defaults.fill(row.fields, known)
            row.notes += [unknown] if unknown else []
            if devices and "gpu_info" not in row.fields:
                row.fields["gpu_info"] = md_devices.gpu_info(devices)
        out += table
        above, devices = None, after
    strays.said()
    return out


MD_SETS = {"test": ("n_prompt", "n_gen", "n_depth"), "t/s": ("avg_ts", "stddev_ts")}  # _md_row's


def _md_log_line(line: str) -> bool:
    """Whether a line without `|` inside an md table is a log line the run printed into it (stderr
    merged into stdout: SYCL's `get_memory_info: [warning] ...` before each test's row, a model's
    load messages), read past; a blank line, a code fence or the `build:` line ends the table (as a
    blank line ends a GitHub markdown table, and text up to it belongs to the table)."""
    s = line.strip()
    return bool(s) and not s.startswith(("```", "~~~")) and not _MD_BUILD.match(line)


def md_header_problem(titles: list[str], where: str) -> str | None:
    """Why no row under an md header of `titles` (lower case) is read: a title twice, or two that set
    one field (MD_SETS, MD_FIELDS: `t/s` and `avg_ts`, `threads` and `n_threads`: the last would win)."""
    by: dict[str, str] = {}
    for title in filter(None, titles):
        for name in MD_SETS.get(title, (md_titles.MD_FIELDS.get(title, title),)):
            if by.get(name) == title:
                return _column_twice(where, title)
            if name in by:
                return (
                    f"{where} sets {name} from two columns, {by[name][:40]!r} and {title[:40]!r}: which is "
                    "the row's is unknown; keep one of them"
                )
            by[name] = title
    return None


def _md_build(row: SourceRow, build: re.Match | None) -> None:
    """`row`'s build from its table's build line (a note without one); a build_commit or build_number
    column that says another build is the row's `problem`."""
    if build is None:
        if row.fields.get("build_commit") in (None, ""):  # a build_commit column says it
            row.notes.append("no build commit")
        return
    number = build.group("number")
    if len(number) > _MAX_INT_DIGITS:  # int() refuses over 4300 digits: the range check's words, unread
        row.problem = (
            row.problem
            or f"the build line's number has {len(number)} digits: out of range (a 64-bit integer)"
        )
        number = number[:_MAX_INT_DIGITS]
    said = {"build_commit": build.group("commit"), "build_number": int(number)}
    for k, v in said.items():
        if str(row.fields.get(k, v)) != str(v) and row.problem is None:
            row.problem = f"column {k} {str(row.fields[k])[:40]!r} contradicts the build line's {v!r}"
    row.fields.update(said)


def _md_row(header: list[str], cells: list[str], line: int) -> SourceRow:
    if len(cells) > cut_records.MAX_CELLS or len(header) > cut_records.MAX_CELLS:
        return SourceRow(
            line,
            {},
            "md",
            problem=cut_records.too_wide(
                "cells", "the row" if len(cells) > cut_records.MAX_CELLS else "its header"
            ),
        )
    ot = header.index("tensor_buft_overrides") if "tensor_buft_overrides" in header else -1
    if len(cells) > len(header) and ot >= 0:  # `-ot a|b`: each `|` of the regex split its cell
        end = ot + len(cells) - len(header) + 1
        cells = [*cells[:ot], "|".join(cells[ot:end]), *cells[end:]]
    if len(cells) != len(header):
        return SourceRow(
            line,
            {},
            "md",
            problem=f"{len(cells)} cells, the header has {len(header)}: the row does not say which value "
            "belongs to which column",
        )
    fields: dict[str, Any] = {}
    problem = None
    for name, text in zip(header, cells, strict=True):
        if name in ("test", "t/s") and len(text) > MD_CELL_MAX:
            problem = f"{name} cell of {len(text)} characters: not a llama-bench {name}"
            continue
        if name == "test":
            gp = GP_TEST.fullmatch(text)
            if gp:  # tg64@pp8192: tg64 at a depth of 8192
                fields.update(n_prompt=0, n_gen=int(gp.group("g")), n_depth=int(gp.group("d")))
                continue
            m = _MD_TEST.match(text)
            if not m or not (m.group("p") or m.group("g")):
                problem = (
                    f"test {text!r} is not a llama-bench test name (pp512, tg128, pp512+tg128, pp512 @ d4096)"
                )
                continue
            fields["n_prompt"] = int(m.group("p") or 0)
            fields["n_gen"] = int(m.group("g") or 0)
            fields["n_depth"] = int(m.group("d") or 0)
        elif name == "t/s":
            m = _MD_TS.match(text)
            if not m:
                problem = f"t/s {text!r} is not `mean ± stddev`"
                continue
            fields["avg_ts"] = typed("avg_ts", m.group("avg"))
            fields["stddev_ts"] = typed("stddev_ts", m.group("sd"))
        elif name in ("model_size", "model_n_params"):
            fields[name] = text  # `56.89 GiB`, `30.53 B`: rounded as printed, kept as printed
        else:
            fields[name] = typed(name, text)
    return SourceRow(line, fields, "md", problem=problem, notes=["no samples"])


_SQL_INSERT = re.compile(
    r"^\s*INSERT\s+INTO\s+[\w.\"`]+\s*\((?P<cols>[^)]*)\)\s*VALUES\s*\((?P<vals>.*)\)\s*;?\s*$", re.I
)


# One value: a quoted string (quotes doubled inside) or text up to the next comma. Linear: no lazy
# group before a `\s*` (that form backtracked quadratically: a 32 KB value took 18 s).
_SQL_VALUE = re.compile(r"\s*(?:('(?:[^']|'')*')\s*|([^,]*))(?:,|$)")


def _sql_values(text: str) -> list[str | None]:
    vals: list[str | None] = []
    pos = 0
    while pos < len(text):
        m = _SQL_VALUE.match(text, pos)
        if m is None or m.end() == pos:
            break
        if m.group(1) is not None:
            vals.append(m.group(1)[1:-1].replace("''", "'"))
        else:
            v = m.group(2).strip()
            vals.append(None if v.upper() == "NULL" else v)
        pos = m.end()
    return vals


def read_sql(text: str, skipped: list[str] | None = None, first: int = 1) -> list[SourceRow]:
    """`-o sql`: one `INSERT INTO llama_bench (fields) VALUES ('v', ...);` per row (the CREATE TABLE
    before them is skipped). Values are typed by field name; there are no samples."""
    out = []
    for n, line in enumerate(text.splitlines(), first):
        line = line_text(line)
        if not line.upper().startswith("INSERT"):
            continue
        m = _SQL_INSERT.match(line)
        if m is None:
            if skipped is not None:
                skipped.append(f"line {n}: not a complete INSERT statement")
            continue
        cols = [c.strip().strip('"`') for c in m.group("cols").split(",")]
        vals = _sql_values(m.group("vals"))
        twice = repeated_column(cols)
        if twice:
            out.append(SourceRow(n, {}, "sql", problem=_column_twice("the INSERT", twice)))
            continue
        if len(vals) != len(cols):
            out.append(
                SourceRow(
                    n,
                    {},
                    "sql",
                    problem=f"{len(vals)} values for {len(cols)} columns: the row does not "
                    "say which value belongs to which column",
                )
            )
            continue
        fields = {k: typed(k, v) for k, v in zip(cols, vals, strict=True)}
        out.append(SourceRow(n, fields, "sql", notes=[] if fields.get("samples_ts") else ["no samples"]))
    return out


READERS = {"json": read_json_array, "jsonl": read_jsonl, "csv": read_csv, "md": read_md, "sql": read_sql}


def format_of(line: str) -> str | None:
    """The format a line starts, or None (a log line). A line that ends in `[` after other text starts
    -o json too: a log line written without its newline, the array's `[` right after it."""
    s = line_text(line)
    if s.startswith("[") or s.endswith("["):
        return "json"
    if s.startswith("{"):
        return "jsonl"
    if is_md_header(s):
        return "md"
    if s.upper().startswith(("INSERT INTO", "CREATE TABLE")):
        return "sql"
    if "avg_ts" in s and "," in s and "avg_ts" in (c.strip().strip('"') for c in s.split(",")):
        return "csv"  # a header cell (not `avg_ts REAL,` of an sql CREATE TABLE)
    return None


SCANNING = frozenset({"jsonl", "md", "sql"})
"""Readers that read every line after their start for rows of their own: a later start of the same
format yields a subset of what the first one did, so each is tried once."""


MAX_STARTS = 64
"""Starts of a position-bound format (json, csv) tried at most: each try reads from its start to the
end, so a file of 100,000 `[` lines must not be tried 100,000 times (that was quadratic: 2,000 lines
of `{x` before the rows took 13 s). Later starts of jsonl, md or sql are still tried."""


def read_source(text: str, skipped: list[str] | None = None) -> tuple[str | None, list[SourceRow]]:
    """(format, rows) of llama-bench output in any of its five formats. Log lines may come first (captures
    often merge stderr's ggml log into stdout; a markdown table is often pasted after the device lines, in a
    code fence), so the format is decided by the first line that starts one; a start that yields no rows is
    passed over (a scanning format — jsonl, md, sql — is tried once, at its first start; json and csv at most
    MAX_STARTS times). Line numbers are the file's."""
    fmt, _start, rows = find_source(text, skipped)
    return fmt, rows


def _one_object(text: str) -> SourceRow | None:
    """The text as ONE JSON object spanning several lines (a record someone saved pretty-printed), as
    a row at its first line; None when it is not exactly that (one line is JSONL's, read as such)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")) or "\n" not in body:
        return None
    try:
        obj = jsonsafe.parse(jsonsafe.printf_text(body))
    except jsonsafe.JsonProblem:
        return None
    if not isinstance(obj, dict):
        return None
    line = text[: text.index("{")].count("\n") + 1
    return SourceRow(line, obj, "json", problem=key_twice(body, obj, line))


def _log_above_records(lines: list[str], i: int) -> bool:
    """Whether lines[i], which format_of takes for -o json's start by the `[` that ends it after other
    text (`loading model...[`), is a log line above JSONL records: the next line that is not blank is
    one whole object (`{...}`; llama-bench's -o json puts its `{` alone on the line after its `[`), so
    the rows are JSONL's, read as such (a cut record among them refused by itself, the rest read)."""
    s = line_text(lines[i])
    if s == "[" or "{" in s:  # `[`, `[{"build_commit": ...`: an array's own start
        return False
    j = i + 1
    while j < len(lines) and not (nxt := line_text(lines[j])):
        j += 1
    return j < len(lines) and nxt.startswith("{") and nxt.endswith("}")


def find_source(text: str, skipped: list[str] | None = None) -> tuple[str | None, int, list[SourceRow]]:
    """read_source, also saying where the rows' format starts: (format, its 0-based line, rows);
    (None, -1, []) when no start yields a row. A streamed import decides its reader on a file's head
    with it, then reads the whole file from that line (iter_json_array, iter_csv)."""
    whole = _one_object(text)
    if whole is not None:  # one record written as one JSON object, pretty-printed over many lines
        return "json", 0, [whole]
    lines = text.splitlines()
    tried: set[str] = set()
    starts = 0
    first_notes: list[str] | None = None
    for i, line in enumerate(lines):
        fmt = format_of(line)
        if fmt is None or fmt in tried or (fmt == "json" and _log_above_records(lines, i)):
            continue
        if fmt in SCANNING:
            tried.add(fmt)
        else:
            starts += 1
            if starts > MAX_STARTS:
                continue  # no more json / csv tries; a scanning format further down is still found
        notes: list[str] = []
        at = (
            0 if fmt == "md" else i
        )  # md reads its whole text: a build or device line may stand above the table
        rows = READERS[fmt]("\n".join(lines[at:]), notes, at + 1)
        if rows:
            if skipped is not None:
                if fmt == "jsonl":  # what came before the first record, as the streamed read says it
                    skipped += [
                        f"line {n}: {w}"
                        for n, ln in enumerate(lines[:i], 1)
                        if (w := not_a_record(line_text(ln)))
                    ]
                skipped += notes
            return fmt, i, rows
        if first_notes is None:
            first_notes = notes
    if skipped is not None and first_notes:
        skipped += first_notes  # why the first start gave no row (an element too deep, a cut record)
    return None, -1, []
