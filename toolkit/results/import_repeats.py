"""Rows printed again: an import's records held (or spilled to disk past a bound) until every file
is read, so a test measured once and printed twice (two copies of one output, a file given twice)
is stored once, and what was left out is said; and rows imported before (StoredRows: what the results
folder already holds, asked of its query index)."""

from __future__ import annotations

import array
import heapq
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from toolkit.core import jsonsafe
from toolkit.results.identity import (
    MEASUREMENT_FIELDS,
    TestKey,
    combine_runs,
    measured_at,
    test_key,
)
from toolkit.results.import_keys import (
    RowForm,
    form_of,
    measured_digest,
    measurement_of,
    shown_key,
    shown_parts,
)
from toolkit.results.import_read import (
    PASS1_IMAGE,
    ImportedSet,
    RowWhere,
    imported_of,
)
from toolkit.results.index import digest64
from toolkit.results.records import (
    RECORD_SCHEMA_VERSION,
    BenchRecord,
    ImageRef,
    ResultStore,
    imported,
)

if TYPE_CHECKING:
    from toolkit.results.import_read import ImportSource
    from toolkit.results.index import StoredImports


class Held:
    """The records of tests several rows measure, kept on disk (`aside`, an unnamed temp file) with 20
    bytes each in memory, so an import of a million rows with 2 % repeats does not hold 40,000 models:
    `add` them in file order, `group` them (one test digest at a time, exactly by _repetitions: their
    order, process_run, runs-disagree), then `lines()` gives the final records in file order again
    (the order the import wrote them in before)."""

    def __init__(self, aside: IO[bytes]) -> None:
        self.aside = aside
        self.at = array.array("Q")  # where each record's line starts in `aside`
        self.key = array.array("Q")  # its test digest
        self.set = array.array("I")  # its set
        self.final = array.array("Q")  # where its final line starts, after `group`

    def add(self, si: int, key: int, record: bytes) -> None:
        self.aside.seek(0, 2)
        self.at.append(self.aside.tell())
        self.key.append(key)
        self.set.append(si)
        self.aside.write(record + b"\n")

    def _read(self, at: int) -> bytes:
        self.aside.seek(at)
        return self.aside.readline()[:-1]

    def group(self, by_id: list[ImportedSet]) -> tuple[list[str], int]:
        """Mark every group's records (_repetitions) and write their final lines; returns what
        _repetitions says of the first SAID_TESTS tests (in the order of each group's first row), then
        per file a line counting the others (_Said), and how many tests several rows measure."""
        import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

        n = len(self.at)
        self.final = array.array("Q", bytes(8 * n))
        if not n:
            return [], 0
        keys = np.frombuffer(self.key, dtype=np.uint64)
        order = np.argsort(keys, kind="stable")  # one digest's records together, in file order
        cuts = [0, *(np.flatnonzero(keys[order][1:] != keys[order][:-1]) + 1).tolist(), n]
        said = _Said()
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            members = [int(j) for j in order[lo:hi]]
            recs = [
                (
                    by_id[self.set[j]],
                    BenchRecord.model_validate(
                        jsonsafe.parse(
                            self._read(self.at[j]), 4 * jsonsafe.MAX_LINE_BYTES, jsonsafe.MAX_DEPTH + 8
                        )
                    ),
                )
                for j in members
            ]
            for text, file, rows, disagree in _repetitions(recs):
                said.add(members[0], text, file, rows, disagree)
            self.aside.seek(0, 2)
            for j, (_target, rec) in zip(members, recs, strict=True):
                self.final[j] = self.aside.tell()
                rec.seq = None
                self.aside.write(rec.model_dump_json().encode() + b"\n")
        return said.lines(), said.tests

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """(set, final record JSON) in file order."""
        for j in range(len(self.final)):
            yield self.set[j], self._read(self.final[j])


SEQ_FIELD = b',"seq":null'


_HOLES = b'"file_sha256":"","sha256":""'


def head_of(run_id: str, created: str, image: ImageRef) -> bytes:
    """The JSON an imported record starts with, up to its model: BenchRecord's first fields in its
    order, as every row of an import has them."""
    return (
        b'{"schema_version":%d,"run_id":%s,"created":%s,"status":"ok","error":null,"runner":"llama-bench","method":"llama-bench","image":%s,'
        % (
            RECORD_SCHEMA_VERSION,
            json.dumps(run_id).encode(),
            json.dumps(created).encode(),
            image.model_dump_json().encode(),
        )
    )


_PASS1_HEAD = head_of("", "", PASS1_IMAGE)


def spilled(body: bytes) -> bytes:
    """A pass-1 record's JSON as spilled: `<where "seq":null is> <where the empty hashes are> <JSON>`,
    both -1 when the JSON does not start as head_of writes it (then pass 2 reads it as JSON). The last
    `,"seq":null` is the record's own (after it come only `imported`, `flags` and `repaired`, whose
    keys are fixed and whose strings escape every quote)."""
    at_seq = body.rfind(SEQ_FIELD) if body.startswith(_PASS1_HEAD) else -1
    at_holes = body.find(_HOLES, at_seq) if at_seq >= 0 else -1
    if at_holes < 0:
        at_seq = -1
    return b"%d %d %s" % (at_seq, at_holes, body)


def filled_body(body: bytes, at_seq: int, at_holes: int, head: bytes, holes: bytes) -> tuple[bytes, bytes]:
    """A spilled record's JSON with its set's head (run id, created, image) and the hashes filled in,
    cut where its seq goes: (up to `"seq":`, the rest)."""
    if at_seq >= 0:
        return (
            head + body[len(_PASS1_HEAD) : at_seq] + b',"seq":',
            body[at_seq + len(SEQ_FIELD) : at_holes] + holes + body[at_holes + len(_HOLES) :],
        )
    rec = jsonsafe.parse(body, 4 * jsonsafe.MAX_LINE_BYTES, jsonsafe.MAX_DEPTH + 8)  # our own record
    top = jsonsafe.parse(head[:-1] + b"}")  # run_id, created, image as head_of wrote them
    hashes = jsonsafe.parse(b"{" + holes + b"}")
    rec.update(run_id=top["run_id"], created=top["created"], image=top["image"], seq=None)
    rec["imported"].update(hashes)
    text = json.dumps(rec, separators=(",", ":"), allow_nan=False).encode()
    at = text.rfind(SEQ_FIELD)
    return text[:at] + b',"seq":', text[at + len(SEQ_FIELD) :]


def repeated_keys(keys: array.array, left_out: dict[int, int] | None = None) -> set[int]:
    """The places (in `keys`) of the records whose test digest another record shares (those `left_out`
    not counted): sorted with numpy (8 bytes a record), so no table of every test is held."""
    import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

    k = np.frombuffer(keys, dtype=np.uint64) if len(keys) else np.zeros(0, dtype=np.uint64)
    places = np.arange(len(k))
    if left_out:
        keep = np.ones(len(k), dtype=bool)
        keep[list(left_out)] = False
        k, places = k[keep], places[keep]
    order = np.argsort(k, kind="stable")
    same = k[order][1:] == k[order][:-1]
    dup = np.zeros(len(k), dtype=bool)
    dup[1:] |= same
    dup[:-1] |= same
    return {int(i) for i in places[order[dup]]}


def live_sets(set_of: array.array, again: dict[int, int]) -> set[int]:
    """The systems (places in system_ids) with a spilled record not left out as read again."""
    import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

    s = np.frombuffer(set_of, dtype=np.uint32) if len(set_of) else np.zeros(0, dtype=np.uint32)
    if again:
        keep = np.ones(len(s), dtype=bool)
        keep[list(again)] = False
        s = s[keep]
    return {int(x) for x in np.unique(s)}


def printed_again(
    shown: dict[RowForm, array.array], untimed: list[int], file_of: array.array, again: dict[int, int]
) -> dict[int, int]:
    """{place: place of the row it prints} of the md rows (`untimed` places) whose shown_key digest (in
    their table's form: its setting columns, its build line) equals a row with a test_time in another
    file of this import, before or after it (that row is kept: it has the test_time, and samples but
    in csv). An md row's digest is 0 in every form but its own."""
    if not untimed or not shown:
        return {}
    import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

    timed = np.ones(len(file_of), dtype=bool)
    timed[untimed] = False
    if again:
        timed[list(again)] = False
    places = np.flatnonzero(timed)
    out: dict[int, int] = {}
    for digests in shown.values():
        s = np.frombuffer(digests, dtype=np.int64)
        order = np.argsort(s[places], kind="stable")
        sorted_shown = s[places][order]
        for i in untimed:
            if i in again or i in out or s[i] == 0:
                continue
            k = int(np.searchsorted(sorted_shown, s[i]))
            while k < len(sorted_shown) and sorted_shown[k] == s[i]:
                j = int(places[order[k]])
                if file_of[j] != file_of[i]:
                    out[i] = j
                    break
                k += 1
    return out


def dup_note(n: int, run: str, name: str, digest: str, how: str) -> str:
    """The line that says `n` rows were left out as imported before in `run` (as `name`), or measured
    by a bench of this project (its image `name`, `digest` no import's: nc50b S7)."""
    if not imported(digest):
        return f"{n} row(s) already measured here by run {run} (image {name}): not imported again"
    if how == "md":
        return (
            f"{n} row(s) of md tables print measurements already imported in run {run} (as {name}): left out"
        )
    if how == "md-before":
        return (
            f"{n} row(s) are measurements already imported in run {run} (as {name}) from an md table, "
            "without samples or test_time: left out (a measurement is imported once; to keep these "
            "rows instead, import them into a new --results folder)"
        )
    return f"{n} row(s) already imported in run {run} (as {name}): left out"


_MEASURED = (
    "left out of what `toolkit measure` added, as the row's own figures do not support it (the speed kept)"
)


class PerFile:
    """What an import says of rows (`head`: what of `toolkit measure` rows it left out, measured_claims; rows
    beyond their GPU's peak, plausible.beyond_peak) per set, file and head: a line each, naming the first
    row, the rows, and what of them (an edited file of 10,000 rows is one line, not 10,000)."""

    def __init__(self) -> None:
        self.seen: dict[tuple, list] = {}  # (set, file, head) -> [rows, first row, {what: why}]

    def add(self, si: int, src: ImportSource, line: int, said: Any, head: str = _MEASURED) -> None:
        if not isinstance(said, dict) or not said:
            return
        seen = self.seen.setdefault((si, str(src.path), head), [0, f"{src.path}:{line}", {}])
        seen[0] += 1
        for what, why in said.items():
            seen[2].setdefault(what, why)

    def notes(self, written: Callable[[int], bool]) -> list[str]:
        """A line per (set, file, head) whose set is `written`."""
        out = []
        for (si, _f, head), (n, first, said) in self.seen.items():
            if written(si):
                text = "; ".join(f"{what}: {why}" for what, why in list(said.items())[:6])
                more = f"; and {len(said) - 6} more" if len(said) > 6 else ""
                rows = f" (and {n - 1} more row(s) of the file)" if n > 1 else ""
                out.append(f"{first}{rows}: {head}: {text}{more}")
        return out


def fingerprints_again(fps: array.array) -> dict[int, int]:
    """{place: place of the first} of the records (in `fps`, their measurement digests) that measure
    what a record before them in this import measured (one file imported twice, or as jsonl and csv):
    sorted with numpy, 8 bytes a record."""
    import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

    if len(fps) < 2:
        return {}
    f = np.frombuffer(fps, dtype=np.int64)
    order = np.argsort(f, kind="stable")  # equal digests together, in file order
    sf = f[order]
    starts = np.ones(len(sf), dtype=bool)
    starts[1:] = sf[1:] != sf[:-1]
    first = np.maximum.accumulate(np.where(starts, np.arange(len(sf)), 0))  # its group's first place
    again = np.flatnonzero(~starts)
    return dict(zip(order[again].tolist(), order[first[again]].tolist(), strict=True))


_LINE = re.compile(rb'"imported":\{"file":"(?:[^"\\]|\\.)*","line":(\d{1,18})[,}]')


def line_number_of(body: bytes) -> str:
    """The line number a spilled record says it came from."""
    m = _LINE.search(body)
    return m.group(1).decode() if m else "?"


SAID_AT_MOST = 10
"""How many rows a note on repetitions names before it says `and N more`."""


SAID_TESTS = 20
"""How many tests measured by several rows an import names one by one (a line each); the others are
counted per file (a 1 GB import printed 97,497 such lines, 16 MB)."""


class _Said:
    """What an import says of its repeated tests: the lines of the SAID_TESTS whose first row comes
    first (a heap of that many), and per file the tests, rows and runs-disagree of all of them."""

    def __init__(self) -> None:
        self.first: list[tuple[int, int, str, str]] = []  # heap of (-first row, n, line, file)
        self.per_file: dict[str, list[int]] = {}  # file -> [tests, rows, disagreeing tests, first row]
        self.tests = 0

    def add(self, first: int, text: str, file: str, rows: int, disagree: bool) -> None:
        """One repeated test: its group's first row (spill place), its line, its first row's file."""
        n = self.per_file.setdefault(file, [0, 0, 0, first])
        n[0], n[1], n[2], n[3] = n[0] + 1, n[1] + rows, n[2] + disagree, min(n[3], first)
        item = (-first, -self.tests, text, file)
        self.tests += 1
        if len(self.first) < SAID_TESTS:
            heapq.heappush(self.first, item)
        elif item > self.first[0]:  # earlier than the latest one kept
            heapq.heapreplace(self.first, item)

    def lines(self) -> list[str]:
        """The kept lines in file order, then `... and K more` per file with the others' counts, the
        files in the order of their first repeated row (not the order the groups were met in: that
        follows the test digests, Python's hash, which differs from one process to the next)."""
        kept = sorted(self.first, reverse=True)
        shown: dict[str, int] = {}
        for _f, _n, _t, file in kept:
            shown[file] = shown.get(file, 0) + 1
        more = []
        for file, (tests, rows, disagree, _first) in sorted(self.per_file.items(), key=lambda fn: fn[1][3]):
            left = tests - shown.get(file, 0)
            if left:
                more.append(
                    f"... and {left:,} more test(s) measured by several rows in {file} ({tests:,} in all, "
                    f"{rows:,} rows; {disagree:,} flagged runs-disagree), each kept as repetitions of one cell"
                )
        return [text for _f, _n, text, _file in kept] + more


def _repetitions(staged: list[tuple[ImportedSet, BenchRecord]]) -> list[tuple[str, str, int, bool]]:
    """Rows of one set that measure the same test (one TestKey) become repetitions of one cell: each is
    marked `process_run` (identity.newest_per_test combines them, as it combines `bench.runs`), in
    the order of their test_time (newest last, whatever the line order). Returns per test the line
    saying so and whether they disagree beyond noise (`runs-disagree`), the file of its first row
    (in the order given), its rows, and whether they disagree."""
    groups: dict[TestKey, list[tuple[ImportedSet, BenchRecord]]] = {}
    for target, rec in staged:
        groups.setdefault(test_key(rec), []).append((target, rec))
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        recs = sorted((rec for _, rec in members), key=measured_at)
        for i, rec in enumerate(recs, 1):
            rec.__pydantic_extra__ = {
                **(rec.model_extra or {}),
                "process_run": {"index": i, "of": len(recs), "source": "import"},
            }
        combined = combine_runs(recs)
        shown = recs[:SAID_AT_MOST]  # a file of 50,000 repetitions gave a 1.5 MB line
        more = f" and {len(recs) - len(shown)} more" if len(recs) > len(shown) else ""
        where = (
            ", ".join(f"{Path(imported_of(r)['file']).name}:{imported_of(r)['line']}" for r in shown) + more
        )
        values = " / ".join(f"{r.avg_ts:.2f}" for r in shown if r.avg_ts is not None) + more
        flags = (combined.model_extra or {}).get("flags") or []
        verdict = (
            "they disagree beyond noise: flagged runs-disagree"
            if "runs-disagree" in flags
            else "they agree within noise"
        )
        differ = sorted(
            k
            for k in {k for r in recs for k in r.raw} - MEASUREMENT_FIELDS
            if len({repr(r.raw.get(k)) for r in recs}) > 1
        )
        line = (
            f"{members[0][0].name}: {recs[0].test}: rows {where} measure the same test ({values} t/s): kept "
            f"as {len(recs)} repetitions of one cell; {verdict}"
            + (
                f" (they differ only in {', '.join(differ)}, which does not change the test)"
                if differ
                else ""
            )
        )
        first_file = imported_of(members[0][1])["file"]
        out.append((line, first_file, len(recs), "runs-disagree" in flags))
    return out


class StoredRows:
    """Rows imported before, to leave them out: what the results folder holds of imported records,
    asked of its query index (results/index.py StoredImports) a batch of rows at a time, so memory
    holds a batch and not the folder (an import into a folder of 30,000 records held them all, 522
    MB) and the time per row does not grow with the folder. A row matches a stored record that
    measures the same (measurement_of, under any digest or label); an md table's row also a stored row
    of another format it prints (shown_key in its table's form), and a row of another format a stored
    md table's row that prints it (shown_key in that row's form). Of several, the last in store order.
    A context manager: `open` it for the import's first pass."""

    def __init__(self, stored: StoredImports | None) -> None:
        self.stored = stored

    @classmethod
    def open(cls, store: ResultStore) -> StoredRows:
        """The folder's imported records through its index (none when the folder does not exist)."""
        from toolkit.results.index import StoredImports  # the index: only once the folder exists

        return cls(StoredImports(store) if store.root.is_dir() else None)

    def __enter__(self) -> StoredRows:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.stored is not None:
            self.stored.__exit__()

    def match(
        self, rows: list[tuple[BenchRecord, TestKey, int, bool, tuple]]
    ) -> list[tuple[RowWhere, str] | None]:
        """For each (record, its test key, its measurement_of, whether it is an md table's row, its
        measured_parts): the stored record it measures again and how it was matched ("" exact, "md" an
        md row printing it, "md-before" it was imported before as an md table's row), or None."""
        s = self.stored
        if s is None or not s.any:
            return [None] * len(rows)
        digests = [measured_digest(rec, parts) for rec, _key, _fp, _md, parts in rows]
        exact: dict[int, RowWhere] = {}  # measurement_of -> the last stored record of it
        for r in s.measured(sorted(set(digests))):
            exact[measurement_of(r)] = (r.run_id, r.image.name, r.image.digest)
        out: list[tuple[RowWhere, str] | None] = [
            (exact[fp], "") if fp in exact else None for _r, _k, fp, _md, _p in rows
        ]
        for md in (True, False):  # md rows against stored rows of other formats, then the reverse
            if not (s.timed if md else s.untimed):
                continue  # no stored row of the other kind: nothing to match (s.shown would find none)
            todo = [i for i, (_r, _k, _fp, is_md, _p) in enumerate(rows) if out[i] is None and is_md == md]
            bases = [digest64(shown_parts(rows[i][0])) for i in todo]
            found = _by_base(s.shown(sorted(set(bases)), untimed=not md))
            for i, base in zip(todo, bases, strict=True):
                rec = rows[i][0]
                out[i] = _printed(rec, found.get(base, []), form_of(rec.raw) if md else None)
        return out


def _by_base(records: list[BenchRecord]) -> dict[int, list[BenchRecord]]:
    """Stored records (in store order) by the shown digest stored_digests gives them."""
    out: dict[int, list[BenchRecord]] = {}
    for r in records:
        out.setdefault(digest64(shown_parts(r)), []).append(r)
    return out


def _printed(
    rec: BenchRecord, stored: list[BenchRecord], form: RowForm | None
) -> tuple[RowWhere, str] | None:
    """The stored record (of `stored`, in store order) `rec` matches by what an md table shows: in
    `form` (`rec` is an md table's row, `stored` rows of other formats: "md"), else in each stored md
    row's own form, the forms in the order first stored ("md-before"); the last match in store order."""
    if form is not None:
        mine = shown_key(rec, form)
        hits = [r for r in stored if shown_key(r, form) == mine]
        return ((hits[-1].run_id, hits[-1].image.name, hits[-1].image.digest), "md") if hits else None
    forms: dict[RowForm, list[BenchRecord]] = {}
    for r in stored:
        f = form_of(r.raw)
        if shown_key(r, f) == shown_key(rec, f):
            forms.setdefault(f, []).append(r)
    hit = next(iter(forms.values()), [])
    return ((hit[-1].run_id, hit[-1].image.name, hit[-1].image.digest), "md-before") if hit else None
