"""Which stored sequence numbers a reader trusts: a store's counter (results/.seq, or
results/hosts/<key>/.seq for a campaign host's store) and the rule every reader of the store's order
holds a record's `seq` to.

A store's writer (records.ResultStore._sequence) writes the counter, fsynced, before it appends the
records it numbered: every `seq` this store gave is at most its counter when the counter is read after
the record. A `seq` above it was not given by this store (a hand edit, a results/<digest12>/ folder
copied in from a store whose counter ran ahead): it would make its run the newest of each of its tests
and hide every run written after it. Such a seq is not trusted: the record reads as unnumbered
(`seq` None: identity.write_order puts it among the records written before seq existed, in file order,
so every numbered run is newer) and the folder says so once (`untrusted_note`). Readers: ResultStore.results()
(records.py), the query index's store order (index_sqlite `_order`, `TRUSTED_SEQ` in its SQL) and the
records it loads (index.load). A store without a readable counter (missing, damaged, a link: the
writer rebuilds it from the largest seq in the files) holds no seq to anything.

A record's `created` against the same order (`mark_clock_skew`, `clock_skew_of`): made more than
CLOCK_SKEW_BACK_S before a record the store wrote earlier, or in the future of the reader's clock.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.core.errors import BadInput, ToolkitError
from toolkit.core.text import path_text
from toolkit.results import open_regular

if TYPE_CHECKING:
    from toolkit.results.records import BenchRecord

SEQ_FILE = ".seq"
"""results/.seq: the last sequence number given in this store (decimal text), flocked while appending."""

COUNTER_TEXT = re.compile(rb"\d{1,19}")
"""A counter the writer reads as its last number (fullmatch of the stripped file, at most MAX_SEQ);
anything else it rebuilds, and a reader holds no seq to it."""

MAX_SEQ = (1 << 63) - 1
"""The largest seq a record may hold (records.BenchRecord: a 64-bit integer, as the query index
stores it). The counter and the rebuild read every seq up to it: at 18 digits they stopped short of
it, so a store whose counter passed 10^18 (a record edited to 999999999999999998, then a copy without
its .seq) rebuilt its counter below its records and gave numbers twice."""


def counter_value(raw: bytes) -> int | None:
    """The stripped bytes of a counter file as its number, None when they are not one (COUNTER_TEXT)."""
    return int(raw) if COUNTER_TEXT.fullmatch(raw) and int(raw) <= MAX_SEQ else None


def reserve(last: int, n: int, path: Path) -> int:
    """The counter after `n` numbers more than `last`; BadInput naming the counter file `path` when no
    record could hold them (above MAX_SEQ: they would be refused on read, the records lost)."""
    if last + n > MAX_SEQ:
        raise BadInput(
            f"{path_text(path)}: the sequence counter is at {last}, and {n} record(s) more would pass "
            f"{MAX_SEQ}, the largest a record holds: a counter or a record's seq edited by hand; remove the "
            "counter if no record holds such a seq (it is rebuilt from the records), else write into another "
            "results folder (--results)"
        )
    return last + n


TRUSTED_SEQ = "(CASE WHEN o.top IS NULL OR r.seq <= o.top THEN r.seq END)"
"""SQL: a record row's (recs r) seq as readers trust it, given its file's store counter (temp.ord o's
`top`, NULL when the store has none): NULL when above the counter."""


def store_of(root: Path, path: Path) -> str:
    """The store a bench.jsonl under `root` belongs to: "" for root/<digest>/bench.jsonl, "hosts/<key>"
    for a campaign host's root/hosts/<key>/<digest>/bench.jsonl (each has its own sequence)."""
    rel = path.relative_to(root).parts
    return f"hosts/{rel[1]}" if len(rel) == 4 and rel[0] == "hosts" else ""


def counter(root: Path, part: str = "") -> int | None:
    """The counter of store `part` (store_of) under results folder `root`: the last seq it gave, or None
    when it has no readable one (missing, not a regular file, not 1-19 digits up to MAX_SEQ). Read it after the
    records it is to hold: the writer numbers records in the counter before it appends them."""
    path = root / part / SEQ_FILE if part else root / SEQ_FILE
    with contextlib.suppress(OSError, ToolkitError):
        fd = open_regular(path)
        try:
            raw = os.pread(fd, 64, 0).strip()
        finally:
            os.close(fd)
        return counter_value(raw)
    return None


def trusted(seq: int | None, top: int | None) -> int | None:
    """`seq` as readers trust it under a store counter `top` (counter()): None when above it."""
    return seq if seq is None or top is None or seq <= top else None


def untrusted_note(root: Path, part: str, count: int, top: int, largest: int) -> str:
    """The one line a store says of its `count` records whose seq (up to `largest`) is above its counter."""
    where = root / part / SEQ_FILE if part else root / SEQ_FILE
    return (
        f"{path_text(where)}: {count} record(s) carry a seq above this folder's counter {top} (up to {largest}): "
        "numbers it never gave (a hand edit, or records copied in from another results folder); they are "
        "ordered as records without a seq (before every numbered run, in file order), not as the newest"
    )


CLOCK_SKEW_BACK_S = 60.0
"""A record written this many seconds `before` (by its created) a record the store holds as earlier is
clock-skew: more than two concurrent writers' few seconds between making a record and appending it."""
CLOCK_SKEW_AHEAD_S = 300.0
"""A record whose created lies more than this far in the future of the reader's clock is clock-skew."""


def written_at(created: str) -> float | None:
    """Unix time of a record's `created` (ISO 8601; UTC when it names no zone), None when unreadable."""
    try:
        dt = datetime.fromisoformat(str(created).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def clock_skew_of(t: float | None, created: str, earlier: float | None, now: float) -> str | None:
    """Why a record's `created` (Unix time `t`: written_at(created), None if not a time) disagrees with the
    store's order, or None: in the future of `now` by more than CLOCK_SKEW_AHEAD_S, or more than
    CLOCK_SKEW_BACK_S before `earlier`, the latest `created` (Unix time) of its store's earlier records."""
    if t is None:
        return None
    if t > now + CLOCK_SKEW_AHEAD_S:
        return f"created {created} is {t - now:.0f} s in the future of this host's clock"
    if earlier is not None and t < earlier - CLOCK_SKEW_BACK_S:
        before = datetime.fromtimestamp(earlier, timezone.utc).isoformat(timespec="seconds")
        return f"created {created} is {earlier - t:.0f} s before {before}, when a record the store wrote earlier was made"
    return None


def mark_clock_skew(records: Iterable[tuple[str, BenchRecord]], now: float | None = None) -> None:
    """Set `clock_skew` on every record whose `created` disagrees with the store's order. `records`:
    (store, record) pairs, store naming the ResultStore that gave the record its seq (a campaign's
    results/hosts/<key>/ is a store of its own). Only records with a seq are compared with others;
    any record is checked against the future."""
    now = time.time() if now is None else now
    by_store: dict[str, list[BenchRecord]] = {}
    for part, r in records:
        if r.seq is None:
            r._clock_skew = clock_skew_of(written_at(r.created), r.created, None, now)
        else:
            by_store.setdefault(part, []).append(r)
    for recs in by_store.values():
        latest: float | None = None
        for r in sorted(recs, key=lambda x: x.seq or 0):
            t = written_at(r.created)
            r._clock_skew = clock_skew_of(t, r.created, latest, now)
            if t is not None and (latest is None or t > latest):
                latest = t
