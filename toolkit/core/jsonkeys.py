"""Duplicate keys in JSON text: an object may name a key twice, and every parser the toolkit uses keeps
the last value (json, orjson, pydantic's JSON reader), so `{"avg_ts": 10, "avg_ts": 100}` reads as 100
with nothing said. Readers of files made elsewhere (llama-bench output, `toolkit measure` files, vLLM
results) and of results/ lines ask `may_repeat`, then `duplicate_key`, of each object they parsed
(toolkit.core.jsonsafe) and refuse it.

Cost: where the text holds no `\\u` escape, `may_repeat` is exact from two byte counts and one dump:
the colons of the text against those of the parsed value written back (orjson.dumps; every key
written twice in the text adds at least its own colon that the value lacks, and no colon of a string
is escaped), about half the cost of the parse itself. Elsewhere, and to name the key once they differ,
`duplicate_key` parses the text again with json and an object_pairs_hook.
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolkit.core import jsonsafe

try:  # a declared dependency; without it every text takes json's pass
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]


def may_repeat(text: str | bytes, value: Any) -> bool:
    """False when no object of `text` names a key twice (certain), True when one may: then ask
    `duplicate_key`. `value`: the text's JSON value as parsed (jsonsafe.parse). Never raises."""
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
    object_pairs_hook (through jsonsafe.decode_at, bounded as every parse): ask `may_repeat` first."""
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
        jsonsafe.decode_at(json.JSONDecoder(object_pairs_hook=pairs), text, len(text) - len(text.lstrip()))
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
