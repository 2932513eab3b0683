"""The rows of the query index as readers get them (toolkit/results/index_sqlite.py reads them):
the R_* places of an index row, Head (a record known from its row without reading it),
RecordSelection (the records a reader needs, with the whole set's counts), StaleIndex,
`check_places`, which refuses a row whose place in its file cannot be the index's own, `key_of`,
a record's TestKey as the index keeps it (index_sqlite.key_data wrote it), and `sql_text`, a row's
texts as SQLite can store them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.core import jsonsafe
from toolkit.core.errors import ToolkitError
from toolkit.core.jsonsafe import MAX_LINE_BYTES
from toolkit.results import identity
from toolkit.results.records import BenchRecord, short_digest
from toolkit.results.sequence import TRUSTED_SEQ

# An index row: what choosing records needs (small ints but `created` = identity.measured_at, compared as
# text as identity.newest_per_test compares it among timed import rows; `seq` and `pos` give the
# store's write order, identity.write_order) and where the record is; `sum` = line_sum of the line's
# bytes when the index validated it; `pos` = store order.
_ROW_COLS = (
    "r.file, r.line, r.off, r.len, r.status, r.run, r.created, r.key, r.process_run, r.facet, "
    f"{TRUSTED_SEQ} AS seq, r.timed, r.written, r.tune, r.sum"
)  # with temp.ord o joined: a seq above its store's counter is NULL (results/sequence.py)
(
    R_FILE,
    R_LINE,
    R_OFF,
    R_LEN,
    R_STATUS,
    R_RUN,
    R_CREATED,
    R_KEY,
    R_REPEAT,
    R_FACET,
    R_SEQ,
    R_TIMED,
    R_WRITTEN,
    R_TUNE,
    R_SUM,
    R_POS,
) = range(16)


class StaleIndex(ToolkitError):
    """A record loaded by offset is not the one the index listed: its file was rewritten (not
    appended to) while it was read (exit 8, run the command again)."""

    exit_code = 8


@dataclass(frozen=True, slots=True)
class HeadImage:
    """The image part of a Head: `name`, `digest` (sha256:...), `short` (12 hex digits)."""

    name: str
    digest: str

    @property
    def short(self) -> str:
        return short_digest(self.digest)


class Head:
    """What the index knows of one valid record without reading it, read like a BenchRecord's
    fields: `run_id`, `status`, `created`, `image.name`, `image.digest`, `image.short`,
    `model_name`, `model_size`, `gpu_info`; `path` and `line` locate it. `row` is the index row
    (R_* fields)."""

    __slots__ = ("row", "path", "run_id", "image", "model_name", "model_size", "gpu_info")

    def __init__(self, row: tuple, path: Path, run_id: str, facet: tuple):
        self.row, self.path, self.run_id = row, path, run_id
        name, digest, self.model_name, self.model_size, self.gpu_info = facet
        self.image = HeadImage(name, digest)

    @property
    def status(self) -> str:
        return self.row[R_STATUS]

    @property
    def created(self) -> str:
        return self.row[R_CREATED]

    @property
    def line(self) -> int:
        return self.row[R_LINE]

    @property
    def seq(self) -> int | None:
        return self.row[R_SEQ]

    def __repr__(self) -> str:
        return f"Head({self.path.parent.name}:{self.line} {self.run_id} {self.status})"


class RecordSelection(list[BenchRecord]):
    """The BenchRecords a reader needs out of a larger set, with that set's counts. In store order,
    except that the ok records of one test stand together where that test first appears in the set.

    Holds (1) every record of the newest run of each test (identity.TestKey) among the ok records —
    so identity.newest_per_test gives the same `used` records (repetitions combined) as over the
    whole set —, (2) every failed record that carries a tok/s value (tables' CPU-fallback rows), and
    (3) one record per distinct (image name, digest, model name, model size, gpu_info) of the set
    not already present, so summaries over those fields (caveats.smoke_caveats) see every value.

    `read`, `failed`, `superseded`, `trials`: identity.Selection's counts over the whole set it stands
    for (`read` = records in the set; `superseded` counts older runs and, in the newest run, records a
    repetition or re-run replaced; `trials` the tune trials of runs not used).
    """

    def __init__(
        self,
        records: Iterable[BenchRecord] = (),
        *,
        read: int = 0,
        failed: int = 0,
        superseded: int = 0,
        trials: int = 0,
    ):
        super().__init__(records)
        self.read, self.failed, self.superseded, self.trials = read, failed, superseded, trials


def check_places(rows: Sequence[tuple], done: Mapping[int, int]) -> None:
    """sqlite3.DatabaseError (`index malformed: ...`, which index._query and index._opened answer by
    rebuilding the index from the JSONL) when a row of `rows` (R_* fields) cannot be the index's own:
    its line, offset or length not an integer, a line below 1, a negative offset, a length outside 1 ..
    MAX_LINE_BYTES (no longer line is indexed), or a line past the bytes indexed of its file (`done`:
    file id -> files.done). A hand edit or another tool: loading the row by offset would raise (a
    TypeError, EINVAL) or read gigabytes."""
    for r in rows:
        line, off, length = r[R_LINE], r[R_OFF], r[R_LEN]
        if not (
            type(line) is int
            and type(off) is int
            and type(length) is int
            and line > 0
            and off >= 0
            and 0 < length <= MAX_LINE_BYTES
            and off + length <= done.get(r[R_FILE], -1)
        ):
            raise sqlite3.DatabaseError(
                f"index malformed: a record row {r[:R_STATUS]!r} is not a line of its file"
            )


def _tuples(v: Any) -> Any:
    """`v` with every list in it a tuple (a parsed key's arrays), recursing into lists only."""
    return tuple([_tuples(x) if type(x) is list else x for x in v]) if type(v) is list else v


def _pairs(v: Any) -> Any:
    """identity.shared_pairs of the _tuples of a parsed key's (field, value) pairs, a pair of a text and
    a plain value (all but a few) made a tuple without a call: key_of ~25 % faster over 10,000 keys of
    ~30 pairs than _tuples of each pair first."""
    if type(v) is not list:  # a hand edit, not key_data's: shared_pairs refuses a text, a number
        return identity.shared_pairs(v)
    return identity.shared_pairs(
        [
            (p[0], p[1])
            if type(p) is list and len(p) == 2 and type(p[0]) is str and type(p[1]) is not list
            else _tuples(p)
            for p in v
        ]
    )


def key_of(data: bytes, parts: dict[tuple[int, bytes], Any] | None = None) -> identity.TestKey | None:
    """The TestKey key_data wrote (its five parts, a JSON text a line; its pairs shared:
    identity.shared_pairs); None for bytes it did not write (a hand edit of the index: the reader
    computes the key). `parts`: (part number, its bytes) -> the part read, kept by the caller across
    the keys it reads (index.load: one load's), so each distinct part's bytes are read once and equal
    parts are one object (the keys of one folder repeat their image, system, model and tests: 10,000
    keys read ~5x faster than a parse each)."""
    lines = data.split(b"\n")
    if len(lines) != 5:
        return None
    seen = {} if parts is None else parts
    try:
        image, system, model, model_sha, test = [
            seen[(i, p)] if (i, p) in seen else _part(i, p, seen) for i, p in enumerate(lines)
        ]
    except (ValueError, TypeError, IndexError, RecursionError):  # IndexError: a pair of one item
        return None
    return identity.TestKey(image, system, model, model_sha, test)


def _part(i: int, data: bytes, seen: dict[tuple[int, bytes], Any]) -> Any:
    """Part `i` of a key (0 image, 1 system, 2 model, 3 model_sha, 4 test) read from its JSON `data`:
    pairs (1, 4) through _pairs, the others through _tuples; kept in `seen`."""
    v = jsonsafe.parse(data)
    got = seen[(i, data)] = _pairs(v) if i in (1, 4) else _tuples(v)
    return got


def sql_text(vals: tuple) -> tuple:
    """`vals` with every text that holds a lone surrogate (JSON's "\\ud800", which Python reads and
    SQLite cannot store: UnicodeEncodeError) written with backslash escapes: the index keeps the row,
    the record itself is read from its file as it is."""
    return tuple(
        v.encode("utf-8", "backslashreplace").decode() if isinstance(v, str) and not _encodable(v) else v
        for v in vals
    )


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
