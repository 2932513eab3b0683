"""A query index beside the append-only results: `results/.index.sqlite` (SQLite, standard library;
`.index.<euid>.sqlite` for a user sharing a folder whose .index.sqlite is another user's).

The JSONL files stay the source of truth, readable by hand; the index only says where each record is
and what a reader needs to choose among records without reading them all:

    files     one row per results/<digest12>/bench.jsonl: device, inode, size, mtime, ctime, the bytes
              indexed through the last newline (`done`), the lines in them, a hash of the first and
              last 4 KiB before `done`
    recs      one row per valid BenchRecord: file, line, byte offset and length, status, run, created
              (identity.measured_at), test key, whether it is a process-level repetition
              (`process_run`), facet, the store's
              sequence number (`seq`, NULL in older records), whether it is an imported row ordered by
              llama-bench's test_time (`timed`), its `created` as Unix time (`written`), and a
              128-bit blake2b of the line's bytes (`sum`: load lets pydantic read bytes that match
              as JSON itself, without a second parse and validation in Python)
    keys      a 128-bit hash of each identity.test_key seen (equal keys, equal hashes) and the key
              itself (key_data: a report reads its records' keys instead of computing them)
    runs      each run_id seen
    facets    each (image name, digest, model name, model size, gpu_info) seen
    problems  one row per refused line: file, line and why (the warning text ResultStore.results()
              gives, without the `file:line: ` prefix)
    imported  per ok record (an import's or a bench's): its digests (StoredImports)

with indexes on recs' run and facet (a run's or an image's records found without reading the others)
and on imported's digests.

Each row carries a MAC under the user's own key (index_trust.py): a row this user's toolkit did not
write (a hand edit, a stranger's index) has the index rebuilt, a key row's is not used, and without a
key no index file is used (an in-memory index each call).

It is never trusted over the JSONL. Each query first compares every file with its row: unchanged
(device, inode, size, mtime, ctime equal) -> used as is; grown with the same inode and the same
first/last 4 KiB before `done` -> only the new tail is read (a half line at the old end is read
again); anything else (shrunk, replaced, rewritten in place) -> that file is indexed whole. A file
gone is dropped. The index is rebuilt from scratch when it is missing or unreadable, when its schema
or the code that computes its columns (records.py, identity.py, this module, the pydantic release)
changed. When results/ cannot hold it (read-only, full), an in-memory index is built for the call.

Every record the index lists was validated by the same reader as ResultStore.results()
(records.scan_jsonl + records.bench_record), so the same lines are refused with the same warnings.
Readers choose in SQL (ResultIndex.choose: newest run per test, counts) and load by byte offset only
the records they will show. Entry points (select, heads, sides, StoredImports, run_records)
take a records.ResultStore and set its `warnings` and `refused` as ResultStore.results() does; they live
here, not on ResultStore (records.py is imported by identity.py, which this module needs). The index's
tables and refresh are in index_sqlite.py, its rows as readers get them (Head, RecordSelection, the check
of a row's place) in index_rows.py.
"""

from __future__ import annotations

import gc
import os
import re
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from toolkit.core.text import path_text
from toolkit.results import exported_run, identity, index_trust, open_regular
from toolkit.results.index_rows import (
    _ROW_COLS,
    R_FILE,
    R_KEY,
    R_LEN,
    R_LINE,
    R_OFF,
    R_POS,
    R_SUM,
    R_WRITTEN,
    Head,
    RecordSelection,
    StaleIndex,
    key_of,
)
from toolkit.results.index_sqlite import (
    _IN_MAX,
    _POS,
    EDGE_BYTES,
    ResultIndex,
    canon,
    key_hash,
    line_sum,
    sql_text,
)
from toolkit.results.index_trust import INDEX_NAME as INDEX_NAME  # the tests' name of the file
from toolkit.results.index_trust import index_path
from toolkit.results.records import (
    BenchRecord,
    ResultStore,
    _parse_line,
    bench_record,
)
from toolkit.results.sequence import TRUSTED_SEQ, clock_skew_of, untrusted_note, written_at


def load(
    heads: Sequence[Head],
    skewed: dict[tuple[int, int], float] | None = None,
    keys: dict[int, bytes] | None = None,
) -> list[BenchRecord]:
    """The BenchRecords of `heads`, read by byte offset and validated; StaleIndex when a line is no
    longer the record the index listed (same run id, measured_at, status and digest, seq; a seq the
    index does not trust, above its store's counter, reads as None: sequence.TRUSTED_SEQ). Each
    carries `clock_skew` as ResultStore.results() gives it: `skewed` (ResultIndex.skewed) says which
    are earlier than the store's order allows; a `created` in the future is checked here. `keys`
    (ResultIndex.stored_keys of the heads' rows): inside identity.keys_cached(), each record whose
    bytes are those the index read gets the TestKey it stored (identity.known_key), not computed.
    Equal parts of consecutive records are one object (_share)."""
    now = time.time()
    skewed = skewed or {}
    keys = keys if keys is not None and identity.caching_keys() else {}
    out: list[BenchRecord] = []
    fds: dict[Path, int] = {}
    last: dict[str, Any] = {}
    spans = _spans(heads)
    parts: dict[tuple[int, bytes], Any] = {}  # the stored keys' parts read so far (key_of)
    buf, at, held = b"", 0, None  # the bytes of `held`'s span, read at offset `at`
    collecting = gc.isenabled()
    gc.disable()  # records hold no reference cycles: a collection would walk every one built so far
    try:
        for h in heads:
            fd = fds.get(h.path)
            if fd is None:
                fd = fds[h.path] = open_regular(h.path)
            off, size = h.row[R_OFF], h.row[R_LEN]
            if h.path in spans:  # its file's lines read in one call
                if held is not h.path and held != h.path:  # (one Path a file: `is` alone, mostly)
                    at, end = spans[h.path]
                    buf, held = os.pread(fd, end - at, at), h.path
                line = buf[off - at : off - at + size]
            else:
                line = os.pread(fd, size, off)
            same = line_sum(line) == h.row[R_SUM]
            rec, problem = _record_of(line, same)
            if rec is not None and h.seq is None and rec.seq is not None:
                rec.seq = None  # none stored, or one above its store's counter (sequence.TRUSTED_SEQ)
            if rec is None or sql_text(  # as the index stores text (a lone surrogate escaped)
                (rec.run_id, identity.measured_at(rec), rec.status, rec.image.digest, rec.seq)
            ) != (h.run_id, h.created, h.status, h.image.digest, h.seq):  # bytes it read (`same`) too: a row
                # of an edited index (a failed record's status made ok) is no record it listed
                raise StaleIndex(
                    f"{h.path}:{h.line}: {problem or 'not the record the index listed'}: the file was "
                    "rewritten while it was read; run the command again"
                )
            t = h.row[R_WRITTEN] if same else written_at(rec.created)  # the index's, of these bytes
            rec._clock_skew = clock_skew_of(t, rec.created, skewed.get((h.row[R_FILE], h.line)), now)
            _share(rec, last)
            if same and (key := key_of(keys.get(h.row[R_KEY], b""), parts)) is not None:
                identity.known_key(rec, key)
            out.append(rec)
    except FileNotFoundError as err:
        raise StaleIndex(f"{err.filename}: gone while it was read; run the command again") from None
    finally:
        if collecting:
            gc.enable()
        for fd in fds.values():
            os.close(fd)
    return out


def _spans(heads: Sequence[Head]) -> dict[Path, tuple[int, int]]:
    """{file: (first byte, end)} of the lines `heads` name in each file where one read of that span reads
    little besides them (at most twice their bytes and 64 KiB more): load reads such a file's lines in one
    call."""
    lo: dict[Path, int] = {}
    hi: dict[Path, int] = {}
    need: dict[Path, int] = {}
    for h in heads:
        p, off, size = h.path, h.row[R_OFF], h.row[R_LEN]
        lo[p], need[p] = min(lo.get(p, off), off), need.get(p, 0) + size
        hi[p] = max(hi.get(p, 0), off + size)
    return {p: (lo[p], hi[p]) for p in lo if hi[p] - lo[p] <= 2 * need[p] + (1 << 16)}


SHARED_PARTS = ("host", "command", "image", "model", "engine", "env", "environment", "timing", "log_file")
"""The parts of a BenchRecord that the records of one run repeat (the host's facts, the command line,
the image and model, the engine and environment, the run's timing and log file): ~6 KB of the ~14 KB
a loaded record holds."""


def _share(rec: BenchRecord, last: dict[str, Any]) -> None:
    """Each of rec's SHARED_PARTS equal to that of the record loaded before it (`last`: part name -> its
    value, updated here) made that very object, the copy dropped. Loaded records are read, never changed in
    place (a change makes a copy: model_copy), so sharing equal parts changes no value. Likewise the set of
    the fields a record's line gave (pydantic's `__pydantic_fields_set__`: one set per distinct set of names,
    `last["fields_set"]`), and each text or int of its `raw` equal to the one the record before it holds under
    the same name (never a float, as -0.0 == 0.0)."""
    fields = rec.__dict__
    sets = last.setdefault("fields_set", {})
    given = rec.__pydantic_fields_set__
    object.__setattr__(rec, "__pydantic_fields_set__", sets.setdefault(frozenset(given), given))
    for name in SHARED_PARTS:
        v, before = fields[name], last.get(name)
        if before is not None and before is not v and before == v:
            fields[name] = before
        else:
            last[name] = v
    raw, before = fields["raw"], last.get("raw")
    if raw and before:
        for k, v in raw.items():
            if type(v) is str or type(v) is int:  # never a float: -0.0 == 0.0
                p = before.get(k, v)
                if p is not v and type(p) is type(v) and p == v:
                    raw[k] = p
    last["raw"] = raw


def _record_of(line: bytes, same: bool) -> tuple[BenchRecord | None, str | None]:
    """(the BenchRecord of a line the index listed, None) or (None, why it is refused). When the bytes are
    those the index validated (`same`: their line_sum is the one it kept), pydantic reads them as JSON itself
    (BenchRecord.model_validate_json: the same checks and values, faster); else, and where pydantic's JSON
    reader refuses what json reads (a lone surrogate), records.bench_record decides."""
    if same:
        try:
            return BenchRecord.model_validate_json(line), None
        except ValueError:  # pydantic's ValidationError: its JSON reader is stricter in a few texts
            pass
    obj, problem = _parse_line(line)
    return bench_record(obj) if obj is not None else (None, problem or "a blank line")


def _damaged(err: sqlite3.DatabaseError) -> bool:
    """An SQLite error that says the file is not a (sound) database, as opposed to a query's fault;
    also a table or column missing from a file whose fingerprint is current (a hand edit, another
    tool): the query's own fault would recur after the rebuild, and is raised then."""
    name = getattr(err, "sqlite_errorname", "")
    return name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or any(
        m in str(err) for m in ("malformed", "not a database", "no such table", "no such column")
    )


def _query(store: ResultStore, ask: Callable[[ResultIndex, list[Path]], Any], *, warn: bool = True) -> Any:
    """ask(index, files) on the index of `store` brought in line with its JSONL first (new tails read,
    changed files re-read whole; an in-memory index when results/ cannot hold one, a damaged index
    file rebuilt). With `warn`, sets store.warnings and store.refused exactly as store.results() does."""
    files = store.bench_files()
    for attempt in (1, 2):
        idx = _opened(store, files, hold=True)
        try:
            if not idx.conn.in_transaction:  # one read: no other process rebuilds the tables under it
                idx.conn.execute("BEGIN")
            try:
                answer = ask(idx, files)
                problems = idx.problems(files) if warn else []
                above = idx.untrusted(files) if warn else []
            except BaseException:
                idx.conn.rollback()
                raise
            idx.conn.execute("COMMIT")
            break
        except sqlite3.DatabaseError as err:  # a damaged index file: it is only an index, build it again
            if attempt == 2 or not _damaged(err):
                raise
            _index_file(store).unlink(missing_ok=True)
        finally:
            idx.close()
    if warn:
        store.refused = len(problems)
        store.warnings += [
            f"{path_text(f)}:{n}: {path_text(text)}" for f, n, text in problems
        ]  # one line each
        store.warnings += [untrusted_note(store.root, *u) for u in above]
    return answer


def heads(
    store: ResultStore,
    *,
    images: Iterable[str] | None = None,
    runs: Iterable[str] | None = None,
    digests: Iterable[str] | None = None,
    ok_only: bool = False,
) -> list[Head]:
    """What the index of `store` knows of its valid records, without reading them: [Head] (run_id,
    status, created, image.name/.digest/.short read like a BenchRecord's) in the order
    store.results() gives records; only those of the given image names / run ids / image digests
    where given, only ok ones with `ok_only`.
    store.warnings and store.refused become exactly those store.results() gives (filters aside)."""
    return _query(
        store,
        lambda idx, files: idx.heads(
            idx.rows(files, images=images, runs=runs, digests=digests, ok_only=ok_only)
        ),
    )


def digest_matches(digest: str, ref: str, name: str | None = None) -> bool:
    """Whether `ref` names `digest` by a prefix of at least 4 of its hex digits, with or without its kind
    (`sha256:ab12`, `ab12`, `import:ab12`; a kind alone or a letter names none), or whole, whatever its length
    (an import's `import:v1`). An image label as reports show it (`cpu@abd88fb000be`,
    analysis.facts.image_label) names `digest` of image `name`: both the name and the prefix must match; the
    name is all before the last `@` (a digest has none; an imported label may: `we@ird@import:6496`)."""
    label, at, rest = ref.rpartition("@")
    if at:
        return label == name and digest_matches(digest, rest)
    kind, _, hexref = ref.lower().rpartition(":")
    d_kind, _, d_hex = digest.lower().rpartition(":")
    return (
        len(hexref) >= 4 and d_hex.startswith(hexref) and kind in ("", d_kind)
    ) or ref.lower() == digest.lower()


RUN_PREFIX_MIN = 8
"""The fewest characters of a run id that full_run_id completes (`20261205`: the run's date)."""


def full_run_ids(store: ResultStore, text: str) -> list[str]:
    """The run ids `text` names in `store`: itself where a record of that run is stored, else the
    stored runs run_begun gives (the one it begins, at least RUN_PREFIX_MIN characters: `20261205T192620Z`
    for `20261205T192620Z-a8edce`, as a bench prints it; a group's id its runs: GROUP_RUN), else
    [`text`] (the caller says what is stored). BadInput (exit 4) naming the runs it begins, newest
    first, where it begins several of no one group."""
    if len(text) < RUN_PREFIX_MIN or heads(store, runs=[text]):
        return [text]
    return run_begun(text, [h.run_id for h in runs_newest_first(heads(store))]) or [text]


def full_run_id(store: ResultStore, text: str) -> str:
    """The one run id `text` names in `store` (full_run_ids); BadInput (exit 4) where it names several
    (a group's runs: group_words), naming them."""
    ids = full_run_ids(store, text)
    if len(ids) > 1:
        from toolkit.core.errors import BadInput

        raise BadInput(f"run id {text!r} is a {group_words(text, ids)} ({_few(ids)}): give one of them")
    return ids[0]


GROUP_RUN = {"t": ("tune session", "trial"), "j": ("campaign", "job")}
"""The runs one id names as a group, by the letter of their suffix `-tN` / `-jN` after it: a tune
session's trials (run `SESSION-tN`, cli/tune.py) and a campaign's jobs (run `CAMPAIGN-jN`, N Slurm's job
id: campaign.slurm.Slice.run_id); (what the id is, what each run is)."""


def group_words(text: str, ids: list[str], label: bool = False) -> str:
    """`tune session of 2 trial runs` (`label`: `tune session S (2 trial runs)`, a compare side's),
    `campaign of 3 job runs`: what `text` is, its runs `ids` being its group (run_begun), by the
    suffix of the first (GROUP_RUN)."""
    what, each = GROUP_RUN.get(ids[0][len(text) + 1 : len(text) + 2], ("group", "member"))
    return f"{what} {text} ({len(ids)} {each} runs)" if label else f"{what} of {len(ids)} {each} runs"


def run_begun(text: str, run_ids: Iterable[str]) -> list[str]:
    """The run ids among `run_ids` (newest first) that `text` names by its start, where `text` has at
    least RUN_PREFIX_MIN characters: the one it begins, or the runs `text-tN` (a tune session's trials)
    or `text-jN` (a campaign's jobs) of one group (GROUP_RUN); [] where none does (or `text` is
    shorter). BadInput (exit 4) naming the ones it begins, newest first, where it begins several
    otherwise (another run `text-x` beside them too: full_run_ids, and `toolkit compare`'s refs:
    compare._pick)."""
    if len(text) < RUN_PREFIX_MIN:
        return []
    hits = list(dict.fromkeys(r for r in run_ids if r.startswith(text)))
    group = re.compile(re.escape(text) + f"-[{''.join(GROUP_RUN)}][0-9]+")
    if len(hits) > 1 and not (all(map(group.fullmatch, hits)) and len({h[len(text) + 1] for h in hits}) == 1):
        from toolkit.core.errors import BadInput

        raise BadInput(f"run id {text!r} begins {len(hits)} stored runs: {_few(hits)}; give more of it")
    return hits


def _few(ids: list[str]) -> str:
    """The first 5 of `ids`, and how many more."""
    return ", ".join(ids[:5]) + (f", and {len(ids) - 5} more" if len(ids) > 5 else "")


def short_run_start(text: str, run_ids: Iterable[str]) -> str:
    """What to type where `text` begins stored runs (`run_ids`, newest first) but is shorter than
    RUN_PREFIX_MIN, so no run is taken for it: `; '2026120' is too short to name a run by its start (8
    characters at least): it begins 20261206T153130Z-7a188c (e.g. 20261206T1531)`; '' otherwise."""
    if not text or len(text) >= RUN_PREFIX_MIN:
        return ""
    hits = list(dict.fromkeys(r for r in run_ids if r.startswith(text)))
    if not hits:
        return ""
    more = f", and {len(hits) - 3} more" if len(hits) > 3 else ""
    return (
        f"; {text!r} is too short to name a run by its start ({RUN_PREFIX_MIN} characters at least): it "
        f"begins {', '.join(hits[:3])}{more} (e.g. {hits[0][:13]})"
    )


def runs_newest_first(heads: Iterable[Head]) -> list[Head]:
    """One Head per run among `heads` (heads()' order), newest first: each run's most recently written record,
    ordered by the store's sequence number (records.py: the order records were appended, an import's as a
    bench's; `heads` order goes folder by folder); records without one come after, in reverse `heads` order. A
    campaign's host stores number their own records: across them the order is each store's, not the clock's.
    """
    best: dict[str, tuple[tuple[bool, int, int], Head]] = {}
    for i, h in enumerate(heads):
        key = (h.seq is not None, h.seq or 0, i)
        if h.run_id not in best or key > best[h.run_id][0]:
            best[h.run_id] = (key, h)
    return [h for _, h in sorted(best.values(), key=lambda kv: kv[0], reverse=True)]


Scope = dict[str, list[str]]
"""Which records a side holds, as ResultIndex.choose takes them: {"images"/"runs"/"digests": [...]}."""


class RefQuery:
    """What the refs of `toolkit compare` may name in one store, asked in SQL while the index is held
    for one read (`sides`), so a side is found without a Head per record of the folder (compare.py
    `_pick` applies its rules with these). Only ok records count."""

    def __init__(self, idx: ResultIndex, files: list[Path]) -> None:
        self.idx, self.files = idx, files
        idx._order(files)

    def _one(self, sql: str, args: Sequence[Any]) -> Any:
        return self.idx.conn.execute(sql, sql_text(tuple(args))).fetchone()

    def has_run(self, run_id: str) -> bool:
        """An ok record of this run id is stored."""
        return bool(
            self._one(
                "SELECT 1 FROM recs r WHERE r.run IN (SELECT id FROM runs WHERE run_id = ?) "
                "AND r.status = 'ok' LIMIT 1",
                (run_id,),
            )
        )

    def run_begun(self, text: str) -> list[str]:
        """run_begun among the runs with an ok record: the one whose id begins with `text`, or a tune
        session's trials (BadInput where several others do), newest first as runs_newest_first orders
        them (the trusted seq written last, else the last in store order)."""
        if len(text) < RUN_PREFIX_MIN:
            return []
        seq = TRUSTED_SEQ
        rows = self.idx.conn.execute(
            f"SELECT u.run_id FROM recs r JOIN temp.ord o ON o.file = r.file JOIN runs u ON u.id = r.run "
            f"WHERE r.status = 'ok' AND substr(u.run_id, 1, ?) = ? GROUP BY u.run_id "
            f"ORDER BY max({seq}) IS NULL, max({seq}) DESC, max({_POS}) DESC",
            sql_text((len(text), text)),
        )
        return run_begun(text, [r for (r,) in rows])

    def digests(self, name: str | None = None) -> set[str]:
        """The image digests of the ok records (of image `name` where given)."""
        where, args = ("f.image_name = ? AND ", [name]) if name is not None else ("", [])
        return {
            d
            for (d,) in self.idx.conn.execute(
                f"SELECT DISTINCT f.digest FROM facets f WHERE {where}EXISTS (SELECT 1 FROM recs r "
                "WHERE r.facet = f.id AND r.status = 'ok')",
                sql_text(tuple(args)),  # a name from argv not UTF-8 (\udcff) as the index keeps text
            )
        }

    def newest_digest(self, name: str) -> str:
        """The digest of the ok record of image `name` written last (identity.write_order: the largest
        seq its store's counter trusts, TRUSTED_SEQ, on a tie the first in store order; else the last in
        store order)."""
        seq = TRUSTED_SEQ
        return self._one(
            f"SELECT f.digest FROM recs r JOIN temp.ord o ON o.file = r.file JOIN facets f ON f.id = r.facet "
            f"WHERE f.image_name = ? AND r.status = 'ok' ORDER BY {seq} IS NULL, "
            f"CASE WHEN {seq} IS NULL THEN {_POS} ELSE {seq} END DESC, {_POS} LIMIT 1",
            (name,),
        )[0]

    def first(self, scope: Scope) -> Head:
        """The first ok record (in store order) of `scope` (ResultIndex.choose's images / runs / digests)."""
        where, args = self.idx._scope(scope.get("images"), scope.get("runs"), scope.get("digests"), True)
        row = self._one(
            f"SELECT {_ROW_COLS}, {_POS} AS pos FROM recs r JOIN temp.ord o ON o.file = r.file "
            f"WHERE {where} ORDER BY pos LIMIT 1",
            args,
        )
        return self.idx.heads([row])[0]


def sides(
    store: ResultStore, pick: Callable[[RefQuery], list[tuple[str, Scope] | list[str]]]
) -> list[tuple[str, RecordSelection] | list[str]]:
    """The sides `pick` finds in `store` (compare.py `_pick`: per ref its label and scope, the ok records of
    the `images` / `runs` / `digests` given, or anything else: passed back as it is), each chosen among in SQL
    (ResultIndex.choose) and loaded by byte offset: (label, RecordSelection). One read of the index; sets
    store.warnings and store.refused as store.results() does. The records carry no clock_skew (compare shows
    no such flag). StaleIndex when a file was rewritten while its records were read."""

    def ask(idx: ResultIndex, files: list[Path]) -> list[tuple[str, list[Head], dict] | list[str]]:
        out: list[tuple[str, list[Head], dict] | list[str]] = []
        for got in pick(RefQuery(idx, files)):
            if isinstance(got, tuple):
                label, scope = got
                keep, counts = idx.choose(
                    files,
                    images=scope.get("images"),
                    runs=scope.get("runs"),
                    digests=scope.get("digests"),
                    ok_only=True,
                )
                out.append((label, idx.heads(keep), counts))
            else:
                out.append(got)
        return out

    return [
        (got[0], RecordSelection(load(got[1]), **got[2])) if isinstance(got, tuple) else got
        for got in _query(store, ask)
    ]


def select(
    store: ResultStore,
    *,
    images: Iterable[str] | None = None,
    runs: Iterable[str] | None = None,
    digests: Iterable[str] | None = None,
    ok_only: bool = False,
    skew: bool = True,
) -> RecordSelection:
    """What a report of the records of `store` with these image names / run ids / digests (all where None)
    needs, through the index (ResultIndex.choose), loaded by byte offset: a RecordSelection that renders like
    the whole list, with the whole list's counts (`read`, `failed`, `superseded`). Sets store.warnings and
    store.refused as store.results() does. A file rewritten meanwhile is re-indexed and the query run again.
    `skew=False`: no record's clock_skew is set from the store's order (ResultIndex.skewed reads every record
    of the folder). Inside identity.keys_cached(), each record loaded comes with the TestKey the index stored
    (load)."""

    def ask(idx: ResultIndex, files: list[Path]) -> tuple[list[Head], dict, dict, dict]:
        keep, counts = idx.choose(files, images=images, runs=runs, digests=digests, ok_only=ok_only)
        keys = idx.stored_keys(keep) if identity.caching_keys() else {}
        return idx.heads(keep), counts, idx.skewed(files) if skew else {}, keys

    for attempt in (1, 2):
        warnings_before = list(store.warnings)
        chosen, counts, skewed, keys = _query(store, ask)
        try:
            return RecordSelection(load(chosen, skewed, keys), **counts)
        except StaleIndex:
            if attempt == 2:
                raise
            store.warnings[:] = warnings_before
            drop(
                store
            )  # an edit the refresh did not see (inside a file that also grew): rebuild from the JSONL
    raise AssertionError("unreachable")


def digest64(value) -> int:
    """A signed 64-bit digest of `value` (numbers, texts, None, tuples and lists of them; anything else by its
    repr) that the index can keep: equal values (by ==: 1 == 1.0 == True) give equal digests in every process
    of one Python build, unlike hash() of a str (salted) or of None. It is Python's hash of the value with
    each text replaced by its CRC-32 and None by a constant (sys.hash_info is part of the index's code
    fingerprint). Unequal values share a digest now and then (a text has 32 bits): readers compare what it
    finds."""
    return hash(_stable(value))


_NONE_DIGEST = 0x4E4F4E45  # stands for None in digest64 ("NONE")
_NAN_DIGEST = 0x4E614E  # for a NaN (Python hashes a NaN by its address)


def _stable(v):
    """`value` for digest64: its texts CRC-32s, None and NaN constants, lists tuples."""
    t = type(v)
    if t is int or t is float or t is bool:
        return v if v == v else _NAN_DIGEST
    if t is str:
        return zlib.crc32(v.encode("utf-8", "surrogatepass"))
    if v is None:
        return _NONE_DIGEST
    if t is tuple or t is list:
        return tuple([_stable(x) for x in v])
    if isinstance(v, (int, float)):  # subclasses: an IntEnum, a numpy number
        return v if v == v else _NAN_DIGEST
    if isinstance(v, str):
        return zlib.crc32(v.encode("utf-8", "surrogatepass"))
    if isinstance(v, (tuple, list)):
        return tuple([_stable(x) for x in v])
    return zlib.crc32(repr(canon(v)).encode("utf-8", "surrogatepass"))


class StoredImports:
    """The ok records of a results folder, imported or measured by a bench (the index's `imported` rows), asked by
    digest while an import reads its files (import_repeats.StoredRows): the index is brought in line with the
    JSONL once, then each batch of rows is one query (memory holds a batch, not the folder). `any`, `timed`,
    `untimed`: whether it holds such records, such records but md-table rows, md-table rows. A context manager
    (closes the connection). A row found damaged (index_rows.check_places) has the index rebuilt and the batch
    asked again. StaleIndex (exit 8) when a record loaded by offset was rewritten meanwhile."""

    def __init__(self, store: ResultStore) -> None:
        self.store, self.files = store, store.bench_files()
        self.idx = _opened(store, self.files)
        self._start()

    def _start(self) -> None:
        """What the index holds of imports, asked once it is open (it is closed when that fails)."""
        try:
            self.idx._order(self.files)
            self.timed, self.untimed = self.idx.imported_kinds()
            self.any = self.timed or self.untimed
        except BaseException:
            self.idx.close()
            raise

    def __enter__(self) -> StoredImports:
        return self

    def __exit__(self, *exc: object) -> None:
        self.idx.close()

    def measured(self, digests: Sequence[int]) -> list[BenchRecord]:
        """The stored records (loaded by offset, in store order) whose measured digest is one of
        `digests` (import_keys.stored_digests; the caller compares their tests)."""
        if not self.any or not digests:
            return []
        return self._load(lambda: self.idx.imported(digests, shown=False))

    def shown(self, bases: Sequence[int], *, untimed: bool) -> list[BenchRecord]:
        """The stored records (loaded by offset, in store order) whose shown digest is one of `bases`:
        md-table rows (`untimed`) or the others."""
        if not bases or not (self.untimed if untimed else self.timed):
            return []
        return self._load(lambda: self.idx.imported(bases, shown=True, untimed=untimed))

    def _load(self, rows: Callable[[], list[tuple]]) -> list[BenchRecord]:
        """load() of the index rows `rows()` gives; a damaged index deleted, built again and asked again."""
        for attempt in (1, 2):
            try:
                heads = self.idx.heads(rows())
                break
            except sqlite3.DatabaseError as err:
                if attempt == 2 or not _damaged(err):
                    raise
                self.idx.close()
                drop(self.store)
                self.idx = _opened(self.store, self.files)
                self._start()
        return load(heads)


def _opened(store: ResultStore, files: list[Path], *, hold: bool = False) -> ResultIndex:
    """The index of `store` brought in line with `files`: an in-memory one when results/ cannot hold it, holds
    no record yet (a new folder, a dry run's), is a folder `toolkit export-run` wrote (read, never written),
    or the user has no index key; a damaged index file, or one holding a row this user's toolkit did not write
    (index_trust.check), is deleted and built again. With `hold`, an index file comes in the read transaction
    its check began (the caller's query reads what was checked, and commits)."""
    for attempt in (1, 2):
        try:
            on_disk = bool(files) and not exported_run(store.root)
            idx = (
                ResultIndex.open_file(store.root, owned=not store.read_only)
                if on_disk
                else ResultIndex.in_memory(store.root)
            )
        except (sqlite3.OperationalError, OSError):  # read-only or full results/, locked: index in memory
            idx = ResultIndex.in_memory(store.root)
        try:
            path = idx.conn.execute("PRAGMA database_list").fetchone()[2]  # "": in memory
            before = (index_trust.file_state(path), idx.conn.execute("PRAGMA data_version").fetchone()[0])
            try:
                wrote = idx.refresh(files)
            except sqlite3.OperationalError:  # could not write it (read-only, full): index in memory
                idx.close()
                idx = ResultIndex.in_memory(store.root)
                idx.refresh(files)
                path = ""
            # an index file: a row this user's toolkit did not write has it rebuilt (one in memory holds
            # only the rows this call wrote: nothing to verify)
            if path:
                index_trust.check(idx.conn, idx.key, Path(path), before, wrote, hold=hold)
            return idx
        except sqlite3.DatabaseError as err:  # a damaged index file: it is only an index, build it again
            idx.close()
            if attempt == 2 or not _damaged(err):
                raise
            try:
                _index_file(store).unlink(missing_ok=True)
            except OSError:  # a folder this user cannot write (a stranger's): an index in memory this time
                idx = ResultIndex.in_memory(store.root)
                idx.refresh(files)
                return idx
    raise AssertionError("unreachable")


def run_records(store: ResultStore, run_id: str) -> list[BenchRecord]:
    """Every valid record of run `run_id` in `store`, in the order store.results() gives them, found by the
    run's indexed id and loaded by byte offset (the cost is the run's, not the stored history's). Sets
    store.warnings and store.refused as store.results() does; a file rewritten while read (StaleIndex) is
    indexed again once."""
    try:
        return load(heads(store, runs=[run_id]))
    except StaleIndex:
        drop(store)
        return load(heads(store, runs=[run_id]))


def of_tests(
    store: ResultStore, records: Iterable[BenchRecord], *, images: Iterable[str] | None = None
) -> list[BenchRecord]:
    """Every valid ok record of `store` (of these image names where given) that measured a test of
    `records` (identity.test_key), from any run, in store order: found through the index by the tests'
    keys and loaded by byte offset (the cost is those tests' history, not the folder's). A file
    rewritten while read (StaleIndex) is indexed again once."""
    hashes = sorted({key_hash(identity.test_key(r)) for r in records})
    imgs = list(images) if images else None

    def ask(idx: ResultIndex, files: list[Path]) -> list[Head]:
        rows = [
            row
            for lo in range(0, len(hashes), _IN_MAX)
            for row in idx.rows_of_tests(files, hashes[lo : lo + _IN_MAX], imgs)
        ]
        return idx.heads(sorted(rows, key=lambda r: r[R_POS]))

    if not hashes:
        return []
    try:
        return load(_query(store, ask, warn=False))
    except StaleIndex:
        drop(store)
        return load(_query(store, ask, warn=False))


def _index_file(store: ResultStore) -> Path:
    """The on-disk index of `store`: in it, or beside the user's index key for a folder only read
    (index_trust.index_path's `owned`)."""
    return index_path(store.root, owned=not store.read_only)


def drop(store: ResultStore) -> None:
    """Delete the index of `store` (it is rebuilt from the JSONL at the next query; never the source of truth)."""
    _index_file(store).unlink(missing_ok=True)
