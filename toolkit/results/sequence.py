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
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from toolkit.core.errors import ToolkitError
from toolkit.results import open_regular

SEQ_FILE = ".seq"
"""results/.seq: the last sequence number given in this store (decimal text), flocked while appending."""

COUNTER_TEXT = re.compile(rb"\d{1,18}")
"""A counter the writer reads as its last number (fullmatch of the stripped file); anything else it
rebuilds, and a reader holds no seq to it."""

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
    when it has no readable one (missing, not a regular file, not 1-18 digits). Read it after the
    records it is to hold: the writer numbers records in the counter before it appends them."""
    path = root / part / SEQ_FILE if part else root / SEQ_FILE
    with contextlib.suppress(OSError, ToolkitError):
        fd = open_regular(path)
        try:
            raw = os.pread(fd, 64, 0).strip()
        finally:
            os.close(fd)
        return int(raw) if COUNTER_TEXT.fullmatch(raw) else None
    return None


def trusted(seq: int | None, top: int | None) -> int | None:
    """`seq` as readers trust it under a store counter `top` (counter()): None when above it."""
    return seq if seq is None or top is None or seq <= top else None


def untrusted_note(root: Path, part: str, count: int, top: int, largest: int) -> str:
    """The one line a store says of its `count` records whose seq (up to `largest`) is above its counter."""
    where = root / part / SEQ_FILE if part else root / SEQ_FILE
    return (
        f"{where}: {count} record(s) carry a seq above this folder's counter {top} (up to {largest}): "
        "numbers it never gave (a hand edit, or records copied in from another results folder); they are "
        "ordered as records without a seq (before every numbered run, in file order), not as the newest"
    )
