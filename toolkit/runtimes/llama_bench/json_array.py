"""`-o json` output read as a stream (iter_json_array), for readers.read_json_array and the streamed
import (results/import_read.py): the array's objects as SourceRows, with what is left out named by
line; and key_twice, the note on a JSON row that names a key twice (jsonl's too)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from toolkit.core import jsonsafe
from toolkit.runtimes.llama_bench.check import value_kind
from toolkit.runtimes.llama_bench.source_row import SourceRow


def key_twice(text: str, obj: Any, first: int = 1) -> str | None:
    """Why the row `obj` read from the JSON `text` (starting on line `first`) is none: an object in it
    names a key twice (JSON keeps the last value, toolkit.core.jsonsafe), with the line of the second
    place in a text of several lines; None when no key is named twice."""
    if not jsonsafe.may_repeat(text, obj):
        return None
    key = jsonsafe.duplicate_key(jsonsafe.printf_text(text))
    if key is None:
        return None
    again = f" (again at line {first + jsonsafe.key_line(text, key) - 1})" if "\n" in text else ""
    return jsonsafe.said(key) + again


JSON_BLOCK = 1 << 20
"""Characters of text iter_json_array adds to its buffer at a time (whole lines)."""


def iter_json_array(
    blocks: Iterable[str], skipped: list[str] | None = None, first: int = 1
) -> Iterator[SourceRow]:
    """`-o json` output read as a stream: `blocks` are the text from the line the array starts on, in pieces
    of whole lines joined by "\n" (one piece: read_json_array). Holds at most one element (up to
    jsonsafe.MAX_LINE_BYTES) and a block at a time; yields what read_json_array gives for the whole text: the
    objects and the line each starts on; at an element that does not parse it notes `line N: the array ends in
    an incomplete record (why)` and stops. Text between two elements that starts no JSON value, or starts like
    one and is no JSON on its own line (`[INFO] ...`), is a log line (stderr captured with `2>&1`): read past
    to its line's end, as read_jsonl reads past log lines. Arrays that follow one another (`-o json >> FILE`)
    are read one after the other; text after the last is noted (_next_array). Bare nan/inf tokens are read as
    in read_json_array."""
    t = _JsonText(blocks, first)
    t.fill()
    while "[" not in t.buf and not t.eof:
        t.fill()
    start = t.buf.find("[")
    if start < 0:
        return
    dec = t.dec
    t.pos = start
    if not _next_array(t, None, at_start=True):  # a log line that starts with `[` is no array's start
        return
    while t.skip(_BLANKS_OR_COMMAS):
        if t.buf[t.pos] == "]":
            if not _next_array(t, skipped):
                return
            continue
        if t.buf[t.pos] not in _VALUE_START and not _LITERAL.match(t.buf, t.pos):
            _past_log_line(t, "{")  # a log line between two elements (stderr merged: `2>&1`)
            continue
        line = t.line_at(t.pos)
        try:
            obj, end = jsonsafe.decode_at(dec, t.buf, t.pos)
        except jsonsafe.JsonProblem as err:
            if t.buf[t.pos] != "{" and _no_json_on_its_line(dec, t.buf, t.pos):
                # `[INFO] ...`, `[2026-12-06 15:40:01] ...`: a log line, not an element
                _past_log_line(t, "{")
                continue
            if _past_unparsed(t, err, skipped):
                continue
            return
        text, t.pos = t.buf[t.pos : end], end
        if isinstance(obj, dict):
            yield SourceRow(line, obj, "json", problem=key_twice(text, obj, line))
        elif skipped is not None:
            skipped.append(
                f"line {line}: an element of the array that is not a JSON object ({value_kind(obj)}) left out"
            )


_BLANKS = re.compile(r"[ \t\r\n]*")
_BLANKS_OR_COMMAS = re.compile(r"[ \t\r\n,]*")
"""What _JsonText.skip steps over between arrays and between elements: at regex speed (a 300 MB run of
blanks between two arrays; a character at a time in Python took about 1 s per 3 MB)."""

_VALUE_START = frozenset('{["-0123456789')
_LITERAL = re.compile(r"(?:true|false|null)(?![\w-])")


class _JsonText:
    """A streamed `-o json` text as iter_json_array reads it: `buf` holds it from the element being
    read on (JSON_BLOCK characters at a time), `pos` is where reading stands in it and `line` the line
    of buf[counted]; `eof` once every block is in `buf`."""

    def __init__(self, blocks: Iterable[str], first: int) -> None:
        self.src = iter(blocks)
        self.buf, self.eof = "", False
        self.pos, self.line, self.counted = 0, first, 0
        self.dec = json.JSONDecoder()
        self.broken = 0  # records left out for a value broken inside them (_past_unparsed)

    def fill(self) -> None:
        """Append the next blocks (JSON_BLOCK characters of them, or the rest) to `buf`."""
        parts, got = [self.buf], 0
        for part in self.src:
            parts.append(jsonsafe.printf_text(part if part.endswith("\n") else part + "\n"))
            got += len(part)
            if got >= JSON_BLOCK:
                break
        else:
            self.eof = True
        self.buf = "".join(parts)

    def line_at(self, pos: int) -> int:
        """The line buf[pos] is on (`pos` not before the place counted last)."""
        self.line += self.buf.count("\n", self.counted, pos)
        self.counted = pos
        return self.line

    def skip(self, run: re.Pattern[str]) -> bool:
        """Step `pos` past what `run` matches (_BLANKS, _BLANKS_OR_COMMAS: it matches the empty text
        too), reading the next blocks where the text goes on: True with buf[pos] the next other
        character, False at the text's end."""
        while True:
            self.pos = run.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return True
            if self.eof:
                return False
            self.line_at(self.pos)
            self.read_from(self.pos)

    def read_from(self, pos: int) -> None:
        """Drop `buf` before `pos` and append the next blocks."""
        self.buf, self.pos, self.counted = self.buf[pos:], 0, 0
        self.fill()


def _past_log_line(t: _JsonText, opens: str = "") -> None:
    """Step t.pos past the rest of its line (reading the next blocks where the line goes on in them); or
    to a bracket of `opens` that ends the line after other text and starts what follows (_starts_there):
    a log line written without its newline, directly followed by the output (stderr and stdout
    interleaved: `loading model...[`, `benchmark 2/4: starting  {`), whose rows are read."""
    while (
        end := t.buf.find("\n", t.pos)
    ) < 0 and not t.eof:  # dropped as read: a long line held in no buffer
        t.line_at(len(t.buf))
        t.read_from(len(t.buf))
    end = len(t.buf) if end < 0 else end
    at = t.pos + len(t.buf[t.pos : end].rstrip()) - 1 if opens else t.pos
    if at > t.pos and t.buf[at] in opens:
        if not t.eof and len(t.buf) - at < _LOOK_AHEAD:  # what follows may be in the next block: read it
            t.line_at(t.pos)
            start = t.pos
            t.read_from(start)
            end, at = end - start, at - start
        if _starts_there(t, at):
            t.pos = at
            return
    t.pos = min(end + 1, len(t.buf))


_LOOK_AHEAD = 1 << 16
"""Characters after a bracket ending a log line (_past_log_line) that _starts_there looks at before the
buffer's end: closer to it, the next blocks are read first (a log line's `{` at a block's end is no
element cut there)."""


def _starts_there(t: _JsonText, at: int) -> bool:
    """Whether the bracket at t.buf[at], the last character of its line, starts what follows it: `[`
    an array (_opens_array), `{` an object that parses or that the text ends inside of (cut by a crash,
    or going on in the next block: read as the element it starts is read). Only where the next character
    past blanks can go on with it (`{` or `]` after `[`, `"` or `}` after `{`), so a log line's own
    bracket (`params = {` then `  n_ctx = 4`, `summary [` then a table) costs no parse of the rest of
    the buffer (a parse's error counts its lines from the buffer's start: quadratic in log lines)."""
    nxt = _BLANKS.match(t.buf, at + 1).end()  # type: ignore[union-attr]
    if nxt < len(t.buf) and t.buf[nxt] not in ("{]" if t.buf[at] == "[" else '"}'):
        return False
    if t.buf[at] == "[":
        return _opens_array(t.dec, t.buf, at)
    try:
        return isinstance(jsonsafe.decode_at(t.dec, t.buf, at)[0], dict)
    except jsonsafe.JsonProblem:
        return not jsonsafe.stops_before_end(t.dec, t.buf[at:])


MAX_BROKEN = 100
"""Records of one `-o json` text left out for a value broken inside them (a paste's line break in
`false`) before the rest is refused: each costs two parse errors whose line is counted from the block's
start (up to JSON_BLOCK characters), so a file of nothing else would read in O(records x 1 MiB)."""


def _past_unparsed(t: _JsonText, err: jsonsafe.JsonProblem, skipped: list[str] | None) -> bool:
    """After an element at t.pos that does not parse: True to read on (an element nested too deep
    stepped over, noted; one that may go on in the next block read again with it), False at the
    array's end (the half object a crash left behind, or one longer than the line limit: noted)."""
    over = jsonsafe.value_end(t.buf, t.pos) if "nested deeper" in str(err) else None
    if over is not None:  # a whole element too deep to parse: stepped over, the next is read
        if skipped is not None:
            skipped.append(f"line {t.line}: an element of the array left out ({err})")
        t.pos = over
        return True
    over = _broken_record_end(t)
    if over is not None and t.broken >= MAX_BROKEN:  # no paste's slip: the rest is not read
        if skipped is not None:  # (each costs a parse error counted from the block's start: bounded)
            skipped.append(
                f"line {t.line}: more than {MAX_BROKEN} records of the array broken inside a value: "
                "this is no llama-bench output pasted with a slip; the rest of the file is not read"
            )
        return False
    if over is not None:  # a whole record with a value broken inside it: left out, the next is read
        t.broken += 1
        if skipped is not None:
            skipped.append(
                f"line {t.line}: a record of the array left out: {err} on line {_error_line(t)}; "
                "the records after it are read"
            )
        t.pos = over
        return True
    if not t.eof and len(t.buf) - t.pos <= jsonsafe.MAX_LINE_BYTES:  # it may go on in the next block
        t.read_from(t.pos)
        return True
    if skipped is not None:  # the half object a crash left behind
        why = (
            err
            if len(t.buf) - t.pos <= jsonsafe.MAX_LINE_BYTES
            else f"longer than {jsonsafe.MAX_LINE_BYTES} bytes"
        )
        skipped.append(f"line {t.line}: the array ends in an incomplete record ({why})")
    return False


def _broken_record_end(t: _JsonText) -> int | None:
    """Where the object at t.pos ends when it is a whole record with a value broken inside it (a line
    cut inside `false`, pasted as `f` then `alse`): its braces close (strings skipped) and the array
    goes on after it (`,` or `]` next, past blanks) within the text read; None otherwise (the half
    object a crash left behind does not close; one that goes on in the next block is read again)."""
    if t.buf[t.pos] != "{":
        return None
    end = jsonsafe.value_end(t.buf, t.pos)
    if end is None:
        return None
    nxt = _BLANKS.match(t.buf, end).end()  # type: ignore[union-attr]
    return end if nxt < len(t.buf) and t.buf[nxt] in ",]" else None


def _error_line(t: _JsonText) -> int:
    """The line of the first place the element at t.pos is refused as JSON (that element does not
    parse: _past_unparsed); t.line where the decoder names no place in it."""
    at = jsonsafe.refused_at(t.dec, t.buf, t.pos)
    return t.line if at is None else t.line + t.buf.count("\n", t.pos, at)


def _next_array(t: _JsonText, skipped: list[str] | None, *, at_start: bool = False) -> bool:
    """At an array's closing `]` (t.pos; `at_start`: at the first `[` of the text, not stepped past):
    step past it, blank lines and log lines (stderr merged: a run's own log before its `[`; a log line
    that starts with `[`, such as `[run 2] build b7001`, opens no array: _opens_array), reading on block
    by block. True with t.pos inside the next array where another follows (`llama-bench -o json >>
    FILE` appends one array per run: each run's rows are read, its build told apart by the import);
    else False with every block read, the text after the `]` that is no array noted in `skipped` by its
    first line (never read as rows, never dropped unsaid)."""
    text_at = None
    t.pos += 0 if at_start else 1
    while t.skip(_BLANKS):
        if t.buf[t.pos] == "[" and _opens_array(t.dec, t.buf, t.pos):
            t.pos += 1
            return True
        text_at = text_at or t.line_at(t.pos)
        _past_log_line(t, "[")
    if text_at is not None and skipped is not None:
        skipped.append(
            f"line {text_at}: text that is no JSON array after the array's end: left out (import it "
            "as a file of its own)"
        )
    return False


def _opens_array(dec: json.JSONDecoder, buf: str, pos: int) -> bool:
    """Whether the `[` at buf[pos] opens an array: the rest of its line is blank or goes on with an
    object or the array's end (llama-bench's `[`, `[{"build_commit": ...`, `[]`), or the line does
    not show it is no JSON (_no_json_on_its_line); a line such as `[run 2] build b7001` or `[INFO]
    loading` (a wrapper's log, captured with the output) opens none."""
    end = buf.find("\n", pos)
    rest = buf[pos + 1 : end if end >= 0 else len(buf)].lstrip()
    return not rest or rest[0] in "{]," or not _no_json_on_its_line(dec, buf, pos)


def _no_json_on_its_line(dec: json.JSONDecoder, buf: str, pos: int) -> bool:
    """Whether the text at buf[pos], which starts like a JSON value and does not parse, shows on its own
    line that it is none (`[INFO] ...`, `[2026-12-06 15:40:01] benchmark 2/4`): a log line. False where
    the line could be the start of a longer value (`[` alone, `[1,` cut at the line's end: the half
    element a crash left is still said as one)."""
    end = buf.find("\n", pos)
    return jsonsafe.stops_before_end(dec, buf[pos : end if end >= 0 else len(buf)].rstrip())
