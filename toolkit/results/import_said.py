"""What an import leaves out or notes (refused rows, skipped lines, notes), kept by reason, never by row: a
file of a million refused rows is a few reasons, each with its count, its lines as merged ranges and its
first rows whole (memory bounded by the reasons, not the rows: issue 32), and said once per reason."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

SAID_REASONS = 20
"""How many lines an import's list (refused rows, skipped lines, notes) says one by one; the others
are counted (a file of 97,497 bad rows must not print 97,497 lines): `--json` gives each reason."""
EXAMPLES, RANGES, MAX_REASONS = 3, 20, 10_000
"""Per reason: the rows kept whole and the line ranges kept; the reasons kept (past it, rows only counted)."""

_WHERE = re.compile(r"(?:line (\d+)|(.*?):(\d+)): (.*)", re.S)
"""A row's place (`line N`, `PATH:N`) and its reason."""


@dataclass
class Reason:
    """One reason: `reason` its first row's text without the place, `rows` how many, `lines` their places
    as runs of consecutive lines, [file ("": the one file named before), first, last] (at most RANGES;
    `lines_more` the rows past them), `examples` its first rows whole."""

    reason: str
    rows: int = 0
    lines: list[list] = field(default_factory=list)
    lines_more: int = 0
    examples: list[str] = field(default_factory=list)
    same, end = True, ("", 0)  # not fields: whether every row's text is the first's; the last place

    def said(self) -> str:
        """`(26 rows of this, lines 21 to 46)`: the count and span said after the first row's text."""
        if self.rows < 2:
            return ""
        if not self.lines:
            return f" ({self.rows:,} times)"
        file, first, _ = self.lines[0]
        to = str(self.end[1]) if self.end[0] == file else f"{self.end[0]}:{self.end[1]}"
        varying = "" if self.same else ", its numbers varying"
        return f" ({self.rows:,} rows of this{varying}, lines {first} to {to})"


@functools.lru_cache(maxsize=4096)
def _key(why: str) -> str:
    return re.sub(r"\d+", "#", why)


@dataclass
class Reasons:
    """Rows left out or noted (`line N: why`, `PATH:N: why`, or a text without a place), kept by reason in
    the order first met: a row's reasons that differ only in their numbers are one (`n_gpu_layers is -2`,
    `... -3`), so 100,000 of them cannot push another reason out of sight. `rows` counts every row
    (len()); iterating gives the rows kept whole (each reason's first EXAMPLES: list() them), in order;
    `unkept` the rows of reasons past MAX_REASONS (counted only). `--json` gives it field by field."""

    rows: int = 0
    summarised: str = "per reason, not per row: its rows, their lines as runs [file, first, last], the first"
    reasons: list[Reason] = field(default_factory=list)
    unkept: int = 0

    def __post_init__(self) -> None:
        self._by: dict[str, Reason] = {}
        self._kept: list[str] = []

    def add(self, why: str, file: str = "", n: int = 0, end: str = "") -> None:
        """Count the row of line `n` (0: a text without a place) of `file` ("": `line N`) refused or noted
        for `why` (`end` said after it: `; row left out`)."""
        self.rows += 1
        g = self._by.get(key := _key(why) if n else why)
        if g is None:
            if len(self._by) >= MAX_REASONS:
                self.unkept += 1
                return
            g = self._by[key] = Reason(why + end)
            self.reasons.append(g)
        g.rows += 1
        g.same = g.same and why + end == g.reason
        if len(g.examples) < EXAMPLES:
            text = (f"{file}:{n}: " if file else f"line {n}: " if n else "") + why + end
            g.examples.append(text)
            self._kept.append(text)
        if not n:
            return
        run = g.lines[-1] if g.lines else None
        if run and run[0] == file and run[2] + 1 == n:
            run[2] = n
        elif len(g.lines) < RANGES:
            g.lines.append([file, n, n])
        else:
            g.lines_more += 1
        g.end = (file, n)

    def append(self, text: str) -> None:
        """Count the row `text` (`line N: why`, `PATH:N: why`, a text without a place) under its reason."""
        m = _WHERE.match(text)
        self.add(m.group(4), m.group(2) or "", int(m.group(1) or m.group(3))) if m else self.add(text)

    def __len__(self) -> int:
        return self.rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._kept)


def by_reason(texts: Iterable[str]) -> Reasons:
    """`texts` counted as Reasons (themselves where they are)."""
    if isinstance(texts, Reasons):
        return texts
    out = Reasons()
    for t in texts:
        out.append(t)
    return out


def said_by_reason(lines: Iterable[str]) -> list[str]:
    """`lines` (Reasons, or texts to count as Reasons counts them) said once per reason, with the rows
    it holds (`line 21: why (26 rows of this, lines 21 to 46)`: a table another tool wrote is one reason,
    not one a row): at most SAID_REASONS lines, then one counting the rest and the reasons they hold."""
    lines = by_reason(lines)
    shown = lines.reasons[:SAID_REASONS]
    rest = lines.rows - sum(g.rows for g in shown)
    others = f"{len(lines.reasons) - len(shown):,}{'+' if lines.unkept else ''}"
    more = f"... and {rest:,} more, for {others} other reason(s) (`--json` lists each)"
    return [g.examples[0] + g.said() for g in shown] + ([more] if rest else [])
