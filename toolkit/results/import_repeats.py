"""Rows printed again: an import's records held (or spilled to disk past a bound) until every file
is read, so a test measured once and printed twice (two copies of one output, a file given twice)
is stored once, and what was left out is said; and rows imported before (StoredRows: what the results
folder already holds, read as a stream)."""

from __future__ import annotations

import array
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from toolkit.core import jsonsafe
from toolkit.results.identity import (
    MEASUREMENT_FIELDS,
    TestKey,
    combine_runs,
    measured_at,
    test_key,
)
from toolkit.results.import_read import (
    PASS1_IMAGE,
    ImportedSet,
    RowForm,
    RowWhere,
    form_of,
    imported_of,
    is_untimed,
    measurement_of,
    shown_key,
)
from toolkit.results.records import (
    RECORD_SCHEMA_VERSION,
    BenchRecord,
    ImageRef,
    ResultStore,
    bench_record,
    scan_jsonl,
)


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

    def group(self, by_id: list[ImportedSet]) -> list[str]:
        """Mark every group's records (_repetitions) and write their final lines; what _repetitions
        says, in the order of each group's first row."""
        import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

        n = len(self.at)
        self.final = array.array("Q", bytes(8 * n))
        if not n:
            return []
        keys = np.frombuffer(self.key, dtype=np.uint64)
        order = np.argsort(keys, kind="stable")  # one digest's records together, in file order
        cuts = [0, *(np.flatnonzero(keys[order][1:] != keys[order][:-1]) + 1).tolist(), n]
        said: list[tuple[int, list[str]]] = []
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
            said.append((members[0], _repetitions(recs)))
            self.aside.seek(0, 2)
            for j, (_target, rec) in zip(members, recs, strict=True):
                self.final[j] = self.aside.tell()
                rec.seq = None
                self.aside.write(rec.model_dump_json().encode() + b"\n")
        return [line for _first, lines in sorted(said, key=lambda x: x[0]) for line in lines]

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


def dup_note(n: int, run: str, name: str, how: str) -> str:
    """The line that says `n` rows were left out as imported before in `run` (as `name`)."""
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


_LINE = re.compile(rb'"imported":\{"file":"(?:[^"\\]|\\.)*","line":(\d+)')


def line_number_of(body: bytes) -> str:
    """The line number a spilled record says it came from."""
    m = _LINE.search(body)
    return m.group(1).decode() if m else "?"


SAID_AT_MOST = 10
"""How many rows a note on repetitions names before it says `and N more`."""


def _repetitions(staged: list[tuple[ImportedSet, BenchRecord]]) -> list[str]:
    """Rows of one set that measure the same test (one TestKey) become repetitions of one cell: each is
    marked `process_run` (identity.newest_per_test combines them, as it combines `bench.runs`), in
    the order of their test_time (newest last, whatever the line order). Returns one line per test
    saying so, and whether they disagree beyond noise (`runs-disagree`)."""
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
        out.append(
            f"{members[0][0].name}: {recs[0].test}: rows {where} measure the same test ({values} t/s): kept "
            f"as {len(recs)} repetitions of one cell; {verdict}"
            + (
                f" (they differ only in {', '.join(differ)}, which does not change the test)"
                if differ
                else ""
            )
        )
    return out


def _imported(store: ResultStore) -> Iterator[BenchRecord]:
    """The folder's ok records that came from an import, one at a time: a line of any other record is
    skipped before it is validated, and none is kept (memory bounded by one record, not the history:
    an import into a folder of 30,000 records held all of them, 522 MB)."""
    for f in store.bench_files():
        for _n, _off, _len, obj, problem in scan_jsonl(f):
            if problem is None and obj is not None and obj.get("status") == "ok" and obj.get("imported"):
                rec, _why = bench_record(obj)
                if rec is not None:
                    yield rec


@dataclass
class StoredRows:
    """What the results folder holds of rows imported before, to leave them out: `exact`
    (measurement_of of every imported record), `md` (per form, shown_key of those without a test_time: the
    md tables imported before) and `timed` (shown_key of the others, in each form of this import's md
    rows), read in one pass over the folder."""

    exact: dict[int, RowWhere]
    md: dict[RowForm, dict[int, RowWhere]]
    timed: dict[RowForm, dict[int, RowWhere]]

    @classmethod
    def read(cls, store: ResultStore, md_forms: set[RowForm]) -> StoredRows:
        """The folder's imported records, digested; `md_forms`: the forms of the md rows about to be
        imported (their matches among the stored rows of other formats)."""
        out = cls({}, {}, {f: {} for f in md_forms})
        if not store.root.is_dir():
            return out
        for r in _imported(store):
            where, key = (r.run_id, r.image.name, r.image.digest), test_key(r)
            out.exact[measurement_of(r, key)] = where
            if is_untimed(r):
                f = form_of(r.raw)
                out.md.setdefault(f, {})[shown_key(r, key, f)] = where
            else:
                for f, digests in out.timed.items():
                    digests[shown_key(r, key, f)] = where
        return out

    def match(self, rec: BenchRecord, key: TestKey, fp: int, *, md_row: bool) -> tuple[RowWhere, str] | None:
        """The stored record `rec` (an md table's row when `md_row`) measures again, and how it was
        matched ("" exact, "md" an md row of it, "md-before" it was imported before as an md table),
        or None."""
        if fp in self.exact:
            return self.exact[fp], ""
        if md_row:
            f = form_of(rec.raw)
            found = self.timed.get(f, {}).get(shown_key(rec, key, f))
            return (found, "md") if found else None
        for f, digests in self.md.items():
            found = digests.get(shown_key(rec, key, f))
            if found:
                return found, "md-before"
        return None
