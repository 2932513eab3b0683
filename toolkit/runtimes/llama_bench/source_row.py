"""The row every llama-bench reader gives (readers.py, json_array.py): SourceRow."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

GP_TEST = re.compile(r"tg\s*(?P<g>\d{1,9})\s*@\s*pp\s*(?P<d>\d{1,9})", re.IGNORECASE | re.ASCII)
"""The `-gp Np,Ng` test of ik_llama.cpp's llama-bench (and of llama.cpp pull #11126, not merged), named
`tg64@pp8192`: the generation rate of Ng tokens after a prompt of Np tokens, the prompt's time left out
("only the token generation rate is reported"): mainline's `-d Np -n Ng`, `tg64 @ d8192`."""


def gp_counts(fields: dict[str, Any]) -> None:
    """Reads a -o json/jsonl/csv/sql row of ik_llama.cpp's `-gp` test as the test it is, in place: its
    `test` field `tg64@pp8192` with n_prompt 8192 and n_gen 64 (ik's llama-bench.cpp writes the gp
    test's prompt as n_prompt, and its avg_ts counts the n_gen tokens alone: `(test_kind == TEST_KIND_GP
    ? 0 : n_prompt) + n_gen`) becomes n_prompt 0, n_depth 8192 (`tg64 @ d8192`), the counts its rate
    is of. Read as printed, the row was `pp8192+tg64` at 64 t/s, and its samples contradicted its
    8256 tokens. A row whose counts are not its test name's (or that has a depth) is left as it is."""
    test = fields.get("test")
    m = GP_TEST.fullmatch(test) if isinstance(test, str) else None
    if m is None or not _count_is(fields.get("n_depth", 0), 0):
        return
    gen, depth = int(m.group("g")), int(m.group("d"))
    if _count_is(fields.get("n_prompt"), depth) and _count_is(fields.get("n_gen"), gen):
        fields.update(n_prompt=0, n_depth=depth)


def _count_is(value: Any, count: int) -> bool:
    """Whether `value` is the token count `count` as a reader types one: an int, never a bool (True ==
    1, False == 0) nor a float, which the validity pass refuses or reads as written (gp_counts would
    otherwise launder an `n_prompt: true` into a valid 0)."""
    return type(value) is int and value == count


@dataclass
class SourceRow:
    """One result row as a reader found it: `line` (1-based, where it starts in the file), `fields`
    (typed as llama-bench types them; an ik_llama.cpp `-gp` row's counts read as its test's, gp_counts),
    `fmt` (jsonl | json | csv | md | sql), `problem` (what the reader alone can see is wrong with it: a
    field count that differs from the header), `notes` (what the format could not say: `no samples`,
    `no build commit`)."""

    line: int
    fields: dict[str, Any]
    fmt: str
    problem: str | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        gp_counts(self.fields)
