"""The one safe JSON parse: every reader of a JSON file or line goes through here.

What Python's json raises on hostile input, and what this module turns it into (a `JsonProblem`, a
ValueError whose text says why in a few words, never the input):

- json.JSONDecodeError: not JSON (`not JSON (Expecting value at column 1)`);
- RecursionError: `[` x 100000 (the C decoder recurses once per level);
- ValueError: an integer of more than 4300 digits (sys.int_info.default_max_str_digits);
- UnicodeDecodeError: bytes that are not UTF-8 (`not UTF-8 (byte 17)`).

It also bounds what a well-formed document may be: nested at most MAX_DEPTH levels (a record nests
about six; a parse that succeeded 900 deep would break the next recursive reader, pydantic or a
copy) and at most MAX_LINE_BYTES long (a record is a few KB; a line of hundreds of MB is no record).

Speed: `parse` tries orjson first (about 3x faster than json on a llama-bench row) and falls back to
json for anything orjson refuses (NaN/Infinity tokens, lone surrogates, a BOM, numbers out of a
double's range, any error: the reason is always json's, so messages do not depend on the parser).
orjson 3.8 reads an integer beyond 64 bits as a float, so text with a run of 19 or more digits goes to
json directly (a 30-digit count stays an int and is refused as one). The nesting is counted on the
text before either parser sees it (`text_depth`: a bracket count, a scan only past MAX_DEPTH brackets):
orjson 3.8 crashes the process (SIGSEGV) on some 60,000 nested objects.

Keys written twice: an object may name a key twice, and every parser the toolkit uses keeps the last
value (json, orjson, pydantic's JSON reader), so `{"avg_ts": 10, "avg_ts": 100}` reads as 100 with
nothing said. Readers of files made elsewhere (llama-bench output, `toolkit measure` files, vLLM
results) and of results/ lines ask `may_repeat`, then `duplicate_key`, of each object they parsed
(`parse_line_keys` asks both of a line) and refuse it. Where the text holds no `\\u` escape,
`may_repeat` is exact from two byte counts and one dump: the colons of the text against those of the
parsed value written back (orjson.dumps; every key written twice in the text adds at least its own
colon that the value lacks, and no colon of a string is escaped), about half the cost of the parse
itself. Elsewhere, and to name the key once they differ, `duplicate_key` parses the text again with
json and an object_pairs_hook.

Entry points: parse, parse_object, parse_line, parse_line_keys, parse_printed_line, parse_jsonl,
decode_at, stops_before_end, value_end, load, lines, read_regular_file (each says its shape).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

try:  # a declared dependency; json alone gives the same values and reasons, only slower
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]

MAX_DEPTH = 64
"""Nesting levels a document may have (a BenchRecord nests about 6: record, raw, telemetry, gpus, ...)."""
MAX_LINE_BYTES = 8 << 20
"""Bytes a line (or a whole JSON file) may have: a record is a few KB, a published run.json tens of KB."""


class JsonProblem(ValueError):
    """Why a text is not a usable JSON value: its str() is a short reason fit for `file:line: why`."""


def _why(err: BaseException) -> str:
    if isinstance(err, UnicodeDecodeError):
        return f"not UTF-8 (byte {err.start})"
    if isinstance(err, RecursionError):
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(err, json.JSONDecodeError):
        return f"not JSON ({err.msg.removesuffix(' at')} at column {err.colno})"  # "Invalid control character at"
    text = str(err)
    if "digits" in text and "limit" in text:  # int('1' * 5000): "Exceeds the limit (4300 digits) ..."
        return "a number of more than 4300 digits"
    return f"not JSON ({text[:80]})"


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), walked without recursion; stops counting
    once past `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        d += 1
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
        stack.extend((x, d) for x in v if isinstance(x, dict | list))
    return deepest


def _text(data: str | bytes, limit: int = MAX_LINE_BYTES) -> str:
    if len(data) > limit:
        raise JsonProblem(f"longer than {limit} bytes")
    if isinstance(data, bytes | bytearray):
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as err:
            raise JsonProblem(_why(err)) from None
    return data


def _bounded(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    if isinstance(value, dict | list) and depth(value, max_depth) > max_depth:
        raise JsonProblem(_why(RecursionError()))
    return value


_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))  # digits stay "0", the rest " "
_LONG_RUN = b"0" * 19


def _fast(data: str | bytes) -> Any:
    """orjson's value of `data` where it is the value json would give, else None (then json decides):
    no run of 19+ digits (orjson 3.8 turns integers beyond 64 bits into floats), parsed without error.
    The caller has checked the nesting first (`_shallow`): orjson must never see text nested too deep."""
    if orjson is None:
        return None
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: json decides
            return None
    if _LONG_RUN in data.translate(_DIGITS):  # a translate and a find: ~2 us a row (a regex took 19)
        return None
    try:
        return orjson.loads(data)
    except (ValueError, RecursionError):  # JSONDecodeError; a str orjson cannot encode (lone surrogate)
        return None


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def text_depth(data: str | bytes, limit: int = MAX_DEPTH) -> int:
    """How deep the brackets of JSON text nest (strings skipped), without parsing it (0 when it holds at most `limit` brackets, it cannot nest deeper): counted before
    any parser sees the text, since orjson 3.8 crashes the process (SIGSEGV) on some 60,000 nested
    objects and json recurses once per level. Counting stops once past `limit`. Costs a bracket count
    when the text holds at most `limit` brackets (the common case), else one regex pass."""
    if isinstance(data, str):
        if data.count("[") + data.count("{") <= limit:
            return 0  # at most `limit`: the caller needs no more
        raw = data.encode("utf-8", "surrogatepass")
    else:
        raw = bytes(data)
        if raw.count(b"[") + raw.count(b"{") <= limit:
            return 0
    d = deepest = 0
    for m in _TOKEN.finditer(raw):
        step = _STEP.get(m.group()[0], 0) if len(m.group()) == 1 else 0
        d = max(d + step, 0)
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
    return deepest


# A string runs to its closing quote or, unterminated, to the end of the text (possessive: never
# re-tried from a later quote inside it, which was quadratic), like readers._NONFINITE_RE.
_TOKEN_STR = re.compile(r'"(?:[^"\\]|\\.)*+\\?(?:"|\Z)|[\[\]{}]', re.DOTALL)


def value_end(text: str, pos: int) -> int | None:
    """Where the JSON array or object starting at `text[pos]` ends (strings skipped, brackets matched,
    nothing parsed: a value too deep for any parser is stepped over so a reader can go on after it);
    None when it does not end in `text`."""
    d = 0
    for m in _TOKEN_STR.finditer(text, pos):
        c = m.group()
        if c in "[{":
            d += 1
        elif c in "]}":
            d -= 1
            if d <= 0:
                return m.end()
    return None


def _shallow(data: str | bytes, max_depth: int) -> None:
    """JsonProblem when `data` nests deeper than `max_depth` (checked before any parser sees it)."""
    if text_depth(data, max_depth) > max_depth:
        raise JsonProblem(_why(RecursionError()))


def parse(data: str | bytes, limit: int = MAX_LINE_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `data` (bare NaN/Infinity read as floats, as json does), or JsonProblem
    (also when `data` is longer than `limit` bytes or nested deeper than `max_depth`: a record the
    toolkit wrote around a row that nests MAX_DEPTH deep nests a few levels more)."""
    if len(data) > limit:
        raise JsonProblem(f"longer than {limit} bytes")
    _shallow(data, max_depth)
    value = _fast(data)
    if value is not None:
        return value
    text = _text(data, limit)
    try:
        value = json.loads(text)
    except (RecursionError, ValueError) as err:  # ValueError: JSONDecodeError, the 4300-digit limit
        raise JsonProblem(_why(err)) from None
    return _bounded(value, max_depth)


def parse_object(data: str | bytes) -> dict[str, Any]:
    """The JSON object of `data`, or JsonProblem (also for valid JSON that is not an object)."""
    value = parse(data)
    if not isinstance(value, dict):
        raise JsonProblem("not a JSON object")
    return value


def parse_line(data: str | bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None) for a line holding a JSON object; (None, None) for a blank line; (None, why)
    otherwise. Never raises on any input."""
    try:
        text = _text(data)
    except JsonProblem as err:
        return None, str(err)
    if not text.strip():
        return None, None
    try:
        return parse_object(text), None
    except JsonProblem as err:
        return None, str(err)


def parse_line_keys(data: str | bytes) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """parse_line(data) and, for an object, what a reader says of a key some object of it names twice
    (`said`; None when none does): (object, None, said or None), (None, None, None) for a blank line,
    (None, why, None) otherwise. Never raises."""
    obj, why = parse_line(data)
    key = duplicate_key(data) if obj is not None and may_repeat(data, obj) else None
    return obj, why, None if key is None else said(key)


# JSON as a C program prints it: a JSON string, or a bare non-finite token as printf writes a double
# (`nan`, `-nan`, `inf`, `-inf`, and MSVC's `-nan(ind)`), which is no JSON (llama-bench prints a stddev
# of identical samples as `-nan`). A string runs to its closing quote or, unterminated, to the end of the
# text: it always matches once begun, so the scan never restarts inside it (a 32 KB line of `\"` took
# 9 s when an unterminated string was re-tried from every quote: quadratic).
_NONFINITE_RE = re.compile(
    r'"(?:[^"\\]|\\.)*+\\?(?:"|\Z)|(?<![\w.])(-?)(nan|inf(?:inity)?)(?:\((?:ind|snan|qnan)?\))?(?![\w.])',
    re.IGNORECASE,
)


_WORD_BEFORE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.")


def _may_be_nonfinite(text: str) -> bool:
    """Whether `text` may hold a token _NONFINITE_RE replaces: `nan` or `inf` (any case) after no word
    character or dot. At str.find's speed (a regex with a lookbehind tried every place: 20-30 MB/s);
    looser than the pattern (inside strings too, and after a word character that is not ASCII), never
    stricter: `ı` and `İ`, which the pattern takes for `i`, send the text to the pattern itself."""
    if not text.isascii() and ("\u0131" in text or "\u0130" in text):
        return _NONFINITE_RE.search(text) is not None
    low = text.lower()
    for word in ("nan", "inf"):
        at = low.find(word)
        while at >= 0:
            if at == 0 or low[at - 1] not in _WORD_BEFORE:  # `cpu_info`, `gpu_info`: read past
                return True
            at = low.find(word, at + 3)
    return False


def printf_text(text: str) -> str:
    """A C program's output made parseable: bare nan/inf tokens become NaN/Infinity, which Python's json
    reads as floats; the caller's validity pass then refuses or repairs them (never a silent drop). A
    text with no such token (_may_be_nonfinite: the common case) is given back as it is, in linear time."""

    def sub(m: re.Match) -> str:
        if m.group(2) is None:
            return m.group(0)
        return "NaN" if m.group(2).lower() == "nan" else f"{m.group(1)}Infinity"

    return _NONFINITE_RE.sub(sub, text) if _may_be_nonfinite(text) else text


def parse_printed_line(line: str) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """One JSONL line a C program printed (llama-bench's), as parse_line_keys reads it (the third: a key
    named twice). Valid JSON is parsed as it is; only a line that is not is made parseable (printf_text:
    bare nan/inf tokens), which gives the same value (a regex pass over every line was the cost of a read)."""
    obj, why, twice = parse_line_keys(line)
    if why is None:
        return obj, None, twice
    return parse_line_keys(printf_text(line))


def parse_jsonl(text: str) -> list[dict[str, Any]]:
    """The objects among a program's printed lines (llama-bench's stdout: its rows among log lines), each
    as it was printed (parse_printed_line): a line that does not start with `{` is not parsed, one that
    is no complete object is left out (the readers of files say why: llama_bench.readers.read_jsonl)."""
    out = []
    for line in text.splitlines():
        if line.strip().startswith("{"):
            obj = parse_printed_line(line.strip())[0]
            if obj is not None:
                out.append(obj)
    return out


def decode_at(dec: json.JSONDecoder, text: str, pos: int) -> tuple[Any, int]:
    """(value, end) of the JSON value starting at `pos` of `text` (JSONDecoder.raw_decode), bounded
    like `parse`; JsonProblem otherwise."""
    try:
        value, end = dec.raw_decode(text, pos)
    except (RecursionError, ValueError) as err:
        raise JsonProblem(_why(err)) from None
    if end - pos > MAX_LINE_BYTES:
        raise JsonProblem(f"longer than {MAX_LINE_BYTES} bytes")
    return _bounded(value), end


def stops_before_end(dec: json.JSONDecoder, text: str) -> bool:
    """Whether `text` is refused as JSON at a position before its end: no value could start this way
    (a cut-off value, refused only at the end, or one that parses, is False; so is a value nested or
    numbered past the bounds)."""
    at = refused_at(dec, text)
    return at is not None and at < len(text)


def refused_at(dec: json.JSONDecoder, text: str, pos: int = 0) -> int | None:
    """Where the JSON value starting at `pos` of `text` is refused (the decoder's error position, an
    index of `text`); None where it parses, or the refusal names no place (nested or numbered past
    the bounds)."""
    try:
        dec.raw_decode(text, pos)
    except json.JSONDecodeError as err:
        return err.pos
    except (ValueError, RecursionError):
        return None
    return None


def load(fh: BinaryIO, limit: int = MAX_LINE_BYTES) -> Any:
    """The JSON value of a whole file the caller opened in binary mode (at most `limit` + 1 bytes are
    read); JsonProblem when it is larger than `limit` bytes or not usable JSON; OSError from the read."""
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise JsonProblem(f"larger than {limit} bytes")
    return parse(data, limit)


_DROP_CHUNK = 1 << 20  # bytes read at a time of the part of a line past the limit (read and dropped)


def lines(fh: BinaryIO, end: int | None = None, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(length, data) of each line of `fh` (binary, read from where it stands) up to byte `end` (EOF
    when None; a line cut there ends there). `length`: the line's bytes, its newline included. `data`:
    the line itself, or for a line of more than `limit` bytes only its first `limit` + 1 (the rest is
    read in 1 MiB chunks and dropped), so `parse_line(data)` refuses it as longer than `limit` bytes and
    memory stays at about `limit` however long the line (a 1 GB line without a newline: ~30 MB RSS).
    OSError from the reads."""
    pos = fh.tell()
    while end is None or pos < end:
        data = fh.readline(limit + 1 if end is None else min(limit + 1, end - pos))
        if not data:
            return
        length = len(data)
        if length > limit and not data.endswith(b"\n"):  # too long: the rest of it is read and dropped
            while end is None or pos + length < end:
                rest = fh.readline(_DROP_CHUNK if end is None else min(_DROP_CHUNK, end - pos - length))
                length += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
        yield length, data
        pos += length


def read_regular_file(path: Path, limit: int = -1) -> bytes | None:
    """The bytes of `path` (at most `limit`; all with -1) when it is a regular file, else None; None
    too when it cannot be opened or read. Opened non-blocking: a FIFO planted at the path (anyone can
    write in the shared temp folder) returns None at once instead of blocking the run."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as f:
        try:
            return f.read(limit) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None
        except OSError:
            return None


def may_repeat(text: str | bytes, value: Any) -> bool:
    """False when no object of `text` names a key twice (certain), True when one may: then ask
    `duplicate_key`. `value`: the text's JSON value as parsed (parse). Never raises."""
    if not isinstance(value, dict | list):
        return False
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if orjson is None or (b"\\" in raw and b"\\u" in raw):
        return True
    try:
        written = orjson.dumps(value)
    except (TypeError, ValueError):  # an integer beyond 64 bits, a lone surrogate: json decides
        return True
    return raw.count(b":") != written.count(b":")


def duplicate_key(text: str | bytes) -> str | None:
    """The first key some object of `text` names twice (innermost object first), None when none does
    or json does not read the text (the caller's parse has said why). `text`: JSON as json reads it
    (bare NaN / Infinity included), a leading BOM allowed. Costs a parse by json with an
    object_pairs_hook (through decode_at, bounded as every parse): ask `may_repeat` first."""
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items) and not found:
            seen: set[str] = set()
            for k, _v in items:
                if k in seen:
                    found.append(k)
                    break
                seen.add(k)
        return out

    try:
        text = raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogatepass")
        decode_at(json.JSONDecoder(object_pairs_hook=pairs), text, len(text) - len(text.lstrip()))
    except (ValueError, RecursionError):  # JsonProblem, a text that is no UTF-8
        return None
    return found[0] if found else None


def key_line(text: str, key: str) -> int:
    """The line (1-based) of the second place `text` writes `key` as a key (json's escaping of it), for
    a message; 1 when it is not written twice that way (an escape the text spells otherwise)."""
    at = [m.start() for m in re.finditer(re.escape(json.dumps(key, ensure_ascii=False)) + r"\s*:", text)]
    return text.count("\n", 0, at[1]) + 1 if len(at) > 1 else 1


def said(key: str) -> str:
    """What a reader says of an object that names `key` twice."""
    return (
        f"key {key[:60]!r} written twice in one object: JSON keeps the last value, and which one was "
        "measured is unknown"
    )


def finite_or_none(v: Any) -> Any:
    """A copy of a JSON-like value with every NaN/inf float replaced by None (valid JSON again)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, list):
        return [finite_or_none(x) for x in v]
    if isinstance(v, dict):
        return {k: finite_or_none(x) for k, x in v.items()}
    return v


def nonfinite_as_text(v: Any) -> Any:
    """A copy of a JSON-like value with every NaN/inf float, in dicts and lists (a tuple as a list) at any
    depth, as the text printf and str() give it (`nan`, `inf`, `-inf`): strict JSON that keeps what was
    printed (a canary's PPL, a row `toolkit measure` writes), where finite_or_none forgets it."""
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, dict):
        return {k: nonfinite_as_text(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [nonfinite_as_text(x) for x in v]
    return v
