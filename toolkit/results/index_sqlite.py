"""The SQLite query index itself (results/.index.sqlite): its tables, the incremental refresh that
keeps it true to the JSONL files, and the choice among records (toolkit/results/index.py says what
it holds and when it is rebuilt; its queries are what readers call)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from toolkit.results import identity, index_schema, index_trust, open_regular
from toolkit.results.index_rows import (
    _ROW_COLS,
    R_FACET,
    R_FILE,
    R_KEY,
    R_POS,
    R_RUN,
    R_STATUS,
    Head,
    check_places,
    sql_text,
)
from toolkit.results.records import (
    BenchRecord,
    _parse_line,
    bench_record,
    scan_jsonl_lines,
)
from toolkit.results.sequence import CLOCK_SKEW_BACK_S, TRUSTED_SEQ, counter, store_of, written_at

INDEX_SCHEMA = 13  # 2: seq, timed, written (runs ordered by the store's sequence, clock skew); 3: tune;
# 4: imported (the digests `toolkit import` matches rows imported before by); 5: sum (line_sum);
# 6: imported's digests by digest64's Python-hash form, imported_shown on (untimed, shown); recs_run,
# recs_facet (compare's sides found without reading every row); 7: keys.data (key_data); 8: no has_value;
# 9: timed is identity.timing (-1 for an untimed import row), created (measured_at) at the latest the import;
# 10: key_data's five parts one JSON text a line (index_rows.key_of reads each distinct part once);
# 11: mac (index_trust: every row keyed by the user's own key, a stranger's or an edited row not trusted)
# 12: files.nrows (the rows written of each file, under its MAC: a deleted row is told, index_trust.verify)
# 13: imported holds every ok record's digests, a bench's too (its rows imported again are found: nc50b S7)


EDGE_BYTES = 4096  # bytes hashed at each end of the indexed part of a file to tell an append from an edit


_TABLES = """
CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE files (id INTEGER PRIMARY KEY, rel TEXT NOT NULL UNIQUE, dev INTEGER, ino INTEGER, size INTEGER,
                    mtime_ns INTEGER, ctime_ns INTEGER, done INTEGER, lines INTEGER, nrows INTEGER, edges BLOB,
                    mac BLOB);
CREATE TABLE keys (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, data BLOB NOT NULL, mac BLOB NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE);
CREATE TABLE facets (id INTEGER PRIMARY KEY, image_name TEXT, digest TEXT, model_name TEXT, model_size INTEGER,
                     gpu_info TEXT, UNIQUE (image_name, digest, model_name, model_size, gpu_info));
CREATE TABLE recs (file INTEGER NOT NULL, line INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL,
                   status TEXT NOT NULL, run INTEGER NOT NULL, created TEXT NOT NULL, key INTEGER NOT NULL,
                   process_run INTEGER NOT NULL, facet INTEGER NOT NULL,
                   seq INTEGER, timed INTEGER NOT NULL, written REAL, tune INTEGER NOT NULL, sum BLOB NOT NULL,
                   mac BLOB NOT NULL,
                   PRIMARY KEY (file, line)) WITHOUT ROWID;
CREATE TABLE problems (file INTEGER NOT NULL, line INTEGER NOT NULL, text TEXT NOT NULL, mac BLOB NOT NULL,
                       PRIMARY KEY (file, line)) WITHOUT ROWID;
CREATE TABLE imported (file INTEGER NOT NULL, line INTEGER NOT NULL, meas INTEGER NOT NULL,
                       shown INTEGER NOT NULL, untimed INTEGER NOT NULL, mac BLOB NOT NULL,
                       PRIMARY KEY (file, line)) WITHOUT ROWID;
CREATE INDEX imported_meas ON imported (meas);
CREATE INDEX imported_shown ON imported (untimed, shown);
CREATE INDEX recs_run ON recs (run, status);
CREATE INDEX recs_facet ON recs (facet, status);
"""


_POS = "(o.rank * 4294967296 + r.line)"


_IN_MAX = 500  # values in one `IN (...)` (SQLite before 3.32 allows 999 parameters a statement)


_SEQ_BASE = 1 << 62  # write order in SQL: seq + _SEQ_BASE for records with a seq, else pos (below it)


_PLAIN = (str, int, type(None))


def canon(v):
    """A value whose repr is equal exactly when Python's == says the values are (1 == 1.0 == True)."""
    t = type(v)
    if t in _PLAIN:
        return v
    if t is tuple or t is list:
        return tuple([x if type(x) in _PLAIN else canon(x) for x in v])
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, (tuple, list)):
        return tuple(canon(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, canon(x)) for k, x in v.items()))
    return v


def key_hash(key: identity.TestKey) -> bytes:
    """128-bit blake2b of a TestKey's canonical repr: equal keys give equal hashes."""
    parts = (key.image, key.system, key.model, key.model_sha, key.test)
    return hashlib.blake2b(repr(canon(parts)).encode(), digest_size=16).digest()


FINGERPRINT_PACKAGES = ("core", "results", "runtimes")
"""The packages whose code says which stored lines are records, what each holds and the digests the index
keeps (record_check.contradiction and the checks it asks, the readers, identity, the index itself: the layers
below analysis/, which is all a record's reading may import): a change to any file of them rebuilds the
index. Whole packages, not a list of modules, so a check that a new module holds is never missed."""


def fingerprint_files() -> list[Path]:
    """The .py files of FINGERPRINT_PACKAGES, in a stable order (their paths below toolkit/)."""
    top = Path(__file__).resolve().parents[1]
    return sorted(
        (f for pkg in FINGERPRINT_PACKAGES for f in (top / pkg).rglob("*.py")),
        key=lambda f: f.relative_to(top).as_posix(),
    )


@functools.cache
def _code_fingerprint() -> str:
    import pydantic

    h = hashlib.blake2b(digest_size=16)
    top = Path(__file__).resolve().parents[1]
    for f in fingerprint_files():  # read, not imported (an empty report imports none of them)
        h.update(f.relative_to(top).as_posix().encode() + b"\0" + f.read_bytes())
    h.update(f"{INDEX_SCHEMA} {pydantic.VERSION} {sys.version_info[:2]} {tuple(sys.hash_info)}".encode())
    return h.hexdigest()


def key_data(key: identity.TestKey) -> bytes:
    """A TestKey as the index keeps it beside its hash (JSON of its parts: texts, numbers, None and
    tuples of them, tuples written as arrays), so a reader gets a record's key without computing it.
    JSON, not marshal: the index lies in a results folder that may be someone else's, and marshal
    is not safe against crafted bytes (the Python documentation's warning). One JSON text per part
    (image, system, model, model_sha, test), joined by newlines (compact JSON holds none): the keys of
    one folder repeat their parts, and index_rows.key_of reads each distinct part's bytes once."""
    return b"\n".join(
        json.dumps(part, separators=(",", ":")).encode()
        for part in (key.image, key.system, key.model, key.model_sha, key.test)
    )


def line_sum(line: bytes) -> bytes:
    """128-bit blake2b of a line's bytes (newline included): the index keeps it for every record it
    validated, so a reader can tell that the bytes it loads by offset are those very bytes (index.load)."""
    return hashlib.blake2b(line, digest_size=16).digest()


def _edges(path: Path, done: int) -> bytes:
    with os.fdopen(open_regular(path), "rb") as fh:
        head = fh.read(min(EDGE_BYTES, done))
        fh.seek(max(0, done - EDGE_BYTES))
        tail = fh.read(done - max(0, done - EDGE_BYTES))
    return hashlib.blake2b(head + b"|" + tail, digest_size=16).digest()


class ResultIndex:
    """The index of one results/ folder. `refresh(files)` brings it in line with the files (sorted
    results/*/bench.jsonl paths); `rows`, `heads`, `choose`, `problems` read it; module `load` reads the
    chosen records. `open_file` raises sqlite3.OperationalError (locked, read-only, full) or OSError
    (also when the user has no index key: index_trust.index_key); ResultStore falls back to `in_memory`."""

    def __init__(self, root: Path, conn: sqlite3.Connection, key: bytes):
        self.root = Path(root)
        self.conn = conn
        self.key = key  # every row's mac is made with it (index_trust)
        self.ids: dict[str, int] = {}  # rel path -> file id
        self.paths: dict[int, Path] = {}  # file id -> path, for the files of the last query
        self.done: dict[int, int] = {}  # file id -> its bytes indexed (files.done), for the same files
        self.checked: set[bytes] = set()  # key hashes whose keys.data this refresh wrote or made right
        self.ordered: Sequence[Path] | None = None  # the files temp.ord was made of since the last _plan

    @classmethod
    def open_file(cls, root: Path, *, owned: bool = True) -> ResultIndex:
        """The on-disk index (index_trust.opened_path; created when absent, recreated when unreadable)."""
        key = index_trust.index_key()
        if key is None:  # nothing a file holds can be told to be this user's: the caller uses in_memory
            raise OSError("no index key of this user's (index_trust.index_key)")
        path = index_trust.opened_path(root, owned=owned)
        for attempt in (1, 2):
            conn = index_trust.connect(path)
            try:
                conn.execute("PRAGMA synchronous=OFF")  # a lost index is rebuilt from the JSONL
                conn.execute("PRAGMA trusted_schema=OFF")  # no SQL function of ours in a file's schema
                conn.execute("PRAGMA temp_store=MEMORY")
                index_trust.no_wal(conn)  # a WAL file is never sealed: verified each call
                idx = cls(root, conn, key)
                idx._prepare()
                return idx
            except sqlite3.OperationalError:  # locked for 30 s, read-only, full: the caller decides
                conn.close()
                raise
            except sqlite3.DatabaseError:
                conn.close()
                if attempt == 2:
                    raise
                path.unlink(missing_ok=True)  # not a database we can read: it is only an index
        raise AssertionError("unreachable")

    @classmethod
    def in_memory(cls, root: Path) -> ResultIndex:
        idx = cls(root, sqlite3.connect(":memory:", isolation_level=None), os.urandom(index_trust.KEY_BYTES))
        idx.conn.execute("PRAGMA temp_store=MEMORY")
        idx._prepare()
        return idx

    def close(self) -> None:
        self.conn.close()

    def _prepare(self) -> None:
        """Create the tables, or recreate them when the schema or the indexing code changed."""
        fp = _code_fingerprint()  # a schema of other objects (a stranger's trigger or view) is rebuilt too
        if index_schema.sound(self.conn, _TABLES) and self._fingerprint() == fp:
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if index_schema.sound(self.conn, _TABLES) and self._fingerprint() == fp:  # made meanwhile
                self.conn.execute("COMMIT")
                return
            index_schema.drop_all(self.conn)
            for stmt in filter(str.strip, _TABLES.split(";")):
                self.conn.execute(stmt)
            self.conn.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fp,))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _fingerprint(self) -> str | None:
        if not self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone():
            return None  # a new file
        return dict(self.conn.execute("SELECT k, v FROM meta").fetchall()).get("fingerprint")

    # ------------------------------------------------------------------ keeping it in line with the JSONL

    def _plan(self, files: Sequence[Path]) -> list[tuple[str, str, Path, os.stat_result | None, Any]]:
        """What to do per file: [(action, rel, path, stat, row)], action in new | tail | whole | gone."""
        known = {
            r[0]: r
            for r in self.conn.execute(
                "SELECT rel, id, dev, ino, size, mtime_ns, ctime_ns, done, lines, nrows, edges, mac FROM files"
            )
        }
        self.ids, self.ordered = {rel: r[1] for rel, r in known.items()}, None  # temp.ord made again
        plan: list[tuple[str, str, Path, os.stat_result | None, Any]] = []
        for path in files:
            rel = _rel(self.root, path)
            row = known.pop(rel, None)
            try:
                st = path.stat()
            except FileNotFoundError:
                if row is not None:
                    plan.append(("gone", rel, path, None, row))
                continue
            if row is None:
                plan.append(("new", rel, path, st, None))
                continue
            _, _id, dev, ino, size, mtime, ctime, done, _lines, _nrows, edges, _mac = row
            if not index_trust.sound_file(self.key, row):
                # a hand edit, another tool, a stranger's index: _opened rebuilds the index
                raise sqlite3.DatabaseError(f"index malformed: the row of {rel} is not one it writes")
            if (dev, ino, size, mtime, ctime) == (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
            ):
                continue
            grown = (dev, ino) == (st.st_dev, st.st_ino) and st.st_size > size  # maybe an append
            plan.append(("tail" if grown and _edges(path, done) == edges else "whole", rel, path, st, row))
        plan += [("gone", rel, self.root / rel, None, row) for rel, row in known.items()]
        return plan

    def refresh(self, files: Sequence[Path]) -> bool:
        """Bring the index in line with `files` (one write transaction; nothing when all unchanged):
        whether it wrote. No record read here is kept in identity.keys_cached()'s memo
        (identity.keys_uncached)."""
        if not self._plan(files):
            return False
        with identity.keys_uncached():
            self._refresh(files)
        return True

    def _refresh(self, files: Sequence[Path]) -> None:
        """refresh's work, once there is some."""
        self.checked = set()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            ids = [
                dict(self.conn.execute(f"SELECT {cols}, id FROM {t}").fetchall())
                if t != "facets"
                else {tuple(r[:-1]): r[-1] for r in self.conn.execute(f"SELECT {cols}, id FROM {t}")}
                for t, cols in (
                    ("keys", "hash"),
                    ("runs", "run_id"),
                    ("facets", "image_name, digest, model_name, model_size, gpu_info"),
                )
            ]
            for action, rel, path, st, row in self._plan(files):  # again: another process may have done it
                if action == "gone":
                    self._drop(row[1], files=True)
                    continue
                assert st is not None  # _plan stats every file it does not call gone
                if action == "new":
                    fid = self._insert("INSERT INTO files (rel) VALUES (?)", (rel,))
                    self.ids[rel] = fid
                    start, first, had = 0, 1, 0
                elif action == "tail":
                    fid, start, lines, had = row[1], row[7], row[8], row[9]
                    for t in ("recs", "problems", "imported"):
                        had -= self.conn.execute(
                            f"DELETE FROM {t} WHERE file = ? AND line > ?", (fid, lines)
                        ).rowcount
                    first = lines + 1
                else:
                    fid, start, first, had = row[1], 0, 1, 0
                    self._drop(fid, files=False)
                self._read(fid, path, st, (start, first, had), *ids)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _drop(self, fid: int, *, files: bool) -> None:
        for t in ("recs", "problems", "imported"):
            self.conn.execute(f"DELETE FROM {t} WHERE file = ?", (fid,))
        if files:
            self.conn.execute("DELETE FROM files WHERE id = ?", (fid,))

    def _insert(self, sql: str, vals: tuple) -> int:
        """INSERT one row; its rowid."""
        rowid = self.conn.execute(sql, sql_text(vals)).lastrowid
        assert rowid is not None  # sqlite3 sets lastrowid after every INSERT of a row
        return rowid

    def _id(self, table: str, ids: dict, value, cols: str) -> int:
        got = ids.get(value)
        if got is None:
            vals = value if isinstance(value, tuple) else (value,)
            got = ids[value] = self._insert(
                f"INSERT INTO {table} ({cols}) VALUES ({','.join('?' * len(vals))})", vals
            )
        return got

    def _key_id(self, keys: dict, key: identity.TestKey) -> tuple[int, bytes]:
        """(the id of `key` in the keys table (`keys`: hash -> id), inserted with its key_data when new;
        its key_hash)."""
        h = key_hash(key)
        got = keys.get(h)
        if got is None:
            data = key_data(key)
            got = keys[h] = self._insert(
                "INSERT INTO keys (hash, data, mac) VALUES (?, ?, ?)",
                (h, data, index_trust.key_mac(self.key, h, data)),
            )
        elif h not in self.checked:  # a row this refresh did not write: its data made right once, as
            data = key_data(key)  # a copied folder's planted index kept its keys while the records
            mac = index_trust.key_mac(self.key, h, data)
            self.conn.execute(
                "UPDATE keys SET data = ?, mac = ? WHERE id = ? AND (data IS NOT ? OR mac IS NOT ?)",
                (data, mac, got, data, mac),
            )
        self.checked.add(h)  # were indexed again, and merged a run's tests into one (9 of 10 unshown)
        return got, h

    def _read(
        self,
        fid: int,
        path: Path,
        st: os.stat_result,
        at: tuple[int, int, int],
        keys: dict,
        runs: dict,
        facets: dict,
    ) -> None:
        """Index lines of `path` from byte `start` (line `first`, after the `had` rows of the file kept) up
        to the size `st` saw (later bytes: next time); `at` = (start, first, had)."""
        start, first, had = at
        recs, probs, imported = [], [], []
        done, lines = start, first - 1
        last = None
        for n, off, length, raw in scan_jsonl_lines(path, start, first, st.st_size):
            last = (n, off, length)
            obj, problem = _parse_line(raw)
            if problem is None and obj is not None:
                rec, problem = bench_record(obj)
                if rec is not None:
                    key = identity.test_key(rec)
                    fields, macd = self._rec_fields(rec, key, keys, runs, facets)
                    row, sums = sql_text((fid, n, off, length, *fields)), (line_sum(raw),)
                    recs.append(
                        (*row, *sums, self._mac("recs", sql_text((fid, n, off, length, *macd, *sums))))
                    )
                    if rec.status == "ok":  # a bench's record too: its rows imported again are no new ones
                        got = (fid, n, *_stored_digests()(rec, key))
                        imported.append((*got, self._mac("imported", got)))
            if problem is not None:
                got = sql_text((fid, n, problem))
                probs.append((*got, self._mac("problems", got)))
        if last is not None:
            done, lines = _read_up_to(path, *last)
        self.conn.executemany("INSERT INTO recs VALUES (" + ",".join("?" * 16) + ")", recs)
        self.conn.executemany("INSERT INTO problems VALUES (?, ?, ?, ?)", probs)
        self.conn.executemany("INSERT INTO imported VALUES (?, ?, ?, ?, ?, ?)", imported)
        rel = self.conn.execute("SELECT rel FROM files WHERE id = ?", (fid,)).fetchone()[0]
        got = (rel, fid, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, done, lines)
        got += (had + len(recs) + len(probs) + len(imported), _edges(path, done))  # nrows: index_trust.verify
        self.conn.execute(
            "UPDATE files SET dev=?, ino=?, size=?, mtime_ns=?, ctime_ns=?, done=?, lines=?, nrows=?, edges=?, mac=? "
            "WHERE id=?",
            (*got[2:], self._mac("files", got), fid),
        )

    def _mac(self, table: str, values: tuple) -> bytes:
        """index_trust.row_mac of a row of `table` under this index's key."""
        return index_trust.row_mac(self.key, table, values)

    def _rec_fields(
        self, rec: BenchRecord, key: identity.TestKey, keys: dict, runs: dict, facets: dict
    ) -> tuple[tuple, tuple]:
        """A record's index row after its place (file, line, off, len): from R_STATUS to R_TUNE, its run,
        test key and facet numbered (a new one inserted); and the same values with the run's id, the
        key's hash and the facet's values for those numbers, as index_trust.verify reads them back."""
        facet = (rec.image.name, rec.image.digest, rec.model.name, rec.model.size_bytes, rec.gpu_info)
        created, reps = identity.measured_at(rec), 1 if identity.is_repetition(rec) else 0
        rest = (
            rec.seq,
            identity.timing(rec),
            written_at(rec.created),
            1 if identity.is_tune_trial(rec) else 0,
        )
        kid, h = self._key_id(keys, key)
        return (
            rec.status,
            self._id("runs", runs, rec.run_id, "run_id"),
            created,
            kid,
            reps,
            self._id("facets", facets, facet, "image_name, digest, model_name, model_size, gpu_info"),
            *rest,
        ), (rec.status, rec.run_id, created, h, reps, *facet, *rest)

    # ------------------------------------------------------------------------------------------ reading

    def _order(self, files: Sequence[Path]) -> None:
        """temp.ord: (file id, rank in `files`, the store that numbered its records: sequence.store_of,
        that store's counter: sequence.counter, read after the refresh read the records): the store order
        every query sorts by, and the counter TRUSTED_SEQ holds each record's seq to; made once per `files`
        list between two _plan calls (a query's rows, problems and untrusted stores: one order)."""
        if self.ordered is files:
            return
        self.conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS ord (file INTEGER PRIMARY KEY, rank INTEGER, part TEXT, top INTEGER)"
        )
        self.conn.execute("DELETE FROM temp.ord")
        self.paths = {}
        self.done = dict(self.conn.execute("SELECT id, done FROM files"))
        rows, tops = [], {}
        for rank, path in enumerate(files):
            fid = self.ids.get(_rel(self.root, path))
            if fid is not None:
                self.paths[fid] = path
                part = store_of(self.root, path)
                if part not in tops:
                    tops[part] = counter(self.root, part)
                rows.append(sql_text((fid, rank, part, tops[part])))
        self.conn.executemany("INSERT INTO temp.ord VALUES (?, ?, ?, ?)", rows)
        self.ordered = files

    def untrusted(self, files: Sequence[Path]) -> list[tuple[str, int, int, int]]:
        """(store, records, its counter, largest seq) of each store of `files` holding records whose seq is
        above its counter (sequence.untrusted_note says it)."""
        self._order(files)
        return self.conn.execute(
            "SELECT o.part, COUNT(*), o.top, MAX(r.seq) FROM recs r JOIN temp.ord o ON o.file = r.file "
            "WHERE o.top IS NOT NULL AND r.seq > o.top GROUP BY o.part ORDER BY MIN(o.rank)"
        ).fetchall()

    def _scope(self, images, runs, digests, ok_only) -> tuple[str, list]:
        where, args = ["1"], []
        if ok_only:
            where.append("r.status = 'ok'")
        if runs is not None:
            vals = list(runs)
            where.append(f"r.run IN (SELECT id FROM runs WHERE run_id IN ({','.join('?' * len(vals))}))")
            args += vals
        facet = []  # one subquery for both (an image name and its digest: the rows of that digest only)
        for col, vals in (("image_name", images), ("digest", digests)):
            if vals is not None:
                vals = list(vals)
                facet.append(f"{col} IN ({','.join('?' * len(vals))})")
                args += vals
        if facet:
            where.append(f"r.facet IN (SELECT id FROM facets WHERE {' AND '.join(facet)})")
        return " AND ".join(where), list(sql_text(tuple(args)))  # a ref from argv may hold a surrogate

    def rows(
        self,
        files: Sequence[Path],
        *,
        images: Iterable[str] | None = None,
        runs: Iterable[str] | None = None,
        digests: Iterable[str] | None = None,
        ok_only: bool = False,
    ) -> list[tuple]:
        """Index rows (R_* fields) of the valid records of `files`, in store order (file order given,
        then line): only those of the given image names / run ids / image digests where given, only
        ok records with `ok_only`."""
        self._order(files)
        where, args = self._scope(images, runs, digests, ok_only)
        return self.conn.execute(
            f"SELECT {_ROW_COLS}, {_POS} AS pos FROM recs r JOIN temp.ord o ON o.file = r.file "
            f"WHERE {where} ORDER BY pos",
            args,
        ).fetchall()

    def rows_of_tests(self, files: Sequence[Path], hashes: Sequence[bytes], images=None) -> list[tuple]:
        """Index rows of the ok records of `files` whose test key hash (key_hash) is one of `hashes`
        (at most _IN_MAX), of these image names where given, in store order."""
        self._order(files)
        where, args = self._scope(images, None, None, True)
        return self.conn.execute(
            f"SELECT {_ROW_COLS}, {_POS} AS pos FROM recs r JOIN temp.ord o ON o.file = r.file WHERE {where} "
            f"AND r.key IN (SELECT id FROM keys WHERE hash IN ({','.join('?' * len(hashes))})) ORDER BY pos",
            [*args, *hashes],
        ).fetchall()

    def heads(self, rows: Sequence[tuple]) -> list[Head]:
        """Head objects of `rows` (from `rows` or `choose`: run ids and image/model names resolved);
        sqlite3.DatabaseError (`index malformed`: _query rebuilds the index) for a row that names a
        run or facet the index lacks or a place not in its file (index_rows.check_places)."""
        run_ids = self._named("runs", "run_id", {r[R_RUN] for r in rows})
        check_places(rows, self.done)
        facets = self._named(
            "facets", "image_name, digest, model_name, model_size, gpu_info", {r[R_FACET] for r in rows}
        )
        if not ({r[R_RUN] for r in rows} <= run_ids.keys() and {r[R_FACET] for r in rows} <= facets.keys()):
            # a record row naming a run or facet the index lacks: a damaged file (_query rebuilds it)
            raise sqlite3.DatabaseError("index malformed: a record names a run or facet it does not hold")
        return [Head(r, self.paths[r[R_FILE]], run_ids[r[R_RUN]], facets[r[R_FACET]]) for r in rows]

    def _named(self, table: str, cols: str, ids: set[int]) -> dict[int, Any]:
        """{id: its `cols` (one: the value, several: a tuple)} of `table` for `ids`: those rows only when
        they are few (the runs table grows with the history), else the whole table."""
        one = "," not in cols
        if len(ids) > 4 * _IN_MAX:
            got = self.conn.execute(f"SELECT id, {cols} FROM {table}").fetchall()
        else:
            part = sorted(ids)
            got = []
            for lo in range(0, len(part), _IN_MAX):
                chunk = part[lo : lo + _IN_MAX]
                got += self.conn.execute(
                    f"SELECT id, {cols} FROM {table} WHERE id IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
        return {r[0]: r[1] if one else r[1:] for r in got}

    def stored_keys(self, rows: Sequence[tuple]) -> dict[int, bytes]:
        """{key id: its key_data} for the test keys of `rows` (R_* fields), asked by id in chunks (the
        keys table grows with the history; a reader needs the keys of the records it loads); a key row
        not under its MAC (index_trust.trusted_keys) is left out: its records' keys are computed."""
        part = sorted({r[R_KEY] for r in rows})
        got: dict[int, bytes] = {}
        for lo in range(0, len(part), _IN_MAX):
            chunk = part[lo : lo + _IN_MAX]
            got.update(
                index_trust.trusted_keys(
                    self.key,
                    self.conn.execute(
                        f"SELECT id, hash, data, mac FROM keys WHERE id IN ({','.join('?' * len(chunk))})",
                        chunk,
                    ).fetchall(),
                )
            )
        return got

    def choose(
        self,
        files: Sequence[Path],
        *,
        images: Iterable[str] | None = None,
        runs: Iterable[str] | None = None,
        digests: Iterable[str] | None = None,
        ok_only: bool = False,
    ) -> tuple[list[tuple], dict[str, int]]:
        """The rows a reader must load to choose among a set of records exactly as
        identity.newest_per_test and tables.select_with_accounting do over the whole set (see
        RecordSelection; ok rows ordered by where their test first appears, then store order), and
        identity.Selection's counts over the whole set:
        {"read", "failed", "superseded", "trials"}. The set: the records `rows` would give for the same filters.

        Mirrors identity.newest_per_test: ok records grouped by test key, then by run id; a run of
        tune trials only comes last (`tune`), else the run written last wins (its largest seq, else its
        last place in store order; by when each was measured where identity.by_measurement says so:
        a timed import row among the toolkit's own records; on a tie the run seen first);
        in it, repetitions (`process_run`) count as one, else the newest record is used and the others
        are superseded; the tune trials of the runs not used count apart (`trials`).
        """
        self._order(files)
        self._choose_among(images, runs, digests, ok_only)
        read, failed = self.conn.execute("SELECT COUNT(*), TOTAL(status != 'ok') FROM temp.f").fetchone()
        kfirst, used = self._best_runs()
        (trials,) = self.conn.execute(  # tune trials of the runs not used: no bench result superseded
            "SELECT TOTAL(tune) FROM temp.f WHERE status = 'ok' AND (key, run) NOT IN (SELECT key, run FROM "
            "temp.best)"
        ).fetchone()
        keep = self._kept()
        check_places(keep, self.done)  # before the sort below meets a value of the wrong type
        # Order: ok records grouped by test at the place the test first appears in the whole set (so
        # newest_per_test meets the tests in the same order and its stable sorts break ties alike), in
        # store order inside a test; failed records at their own place.
        keep.sort(key=lambda r: (kfirst[r[R_KEY]] if r[R_STATUS] == "ok" else r[R_POS], r[R_POS]))
        for t in ("f", "best"):
            self.conn.execute(f"DROP TABLE IF EXISTS temp.{t}")
        counts = {"read": read, "failed": int(failed), "trials": int(trials)}
        return keep, {**counts, "superseded": read - int(failed) - used - int(trials)}

    def _choose_among(
        self,
        images: Iterable[str] | None,
        runs: Iterable[str] | None,
        digests: Iterable[str] | None,
        ok_only: bool,
    ) -> None:
        """temp.f: the index rows (R_* fields, then pos) of the set `choose` chooses among."""
        c = self.conn
        where, args = self._scope(images, runs, digests, ok_only)
        c.execute("DROP TABLE IF EXISTS temp.f")
        c.execute(
            f"CREATE TEMP TABLE f AS SELECT {_ROW_COLS}, {_POS} AS pos FROM recs r "
            f"JOIN temp.ord o ON o.file = r.file WHERE {where}",
            args,
        )

    def _best_runs(self) -> tuple[dict[int, int], int]:
        """temp.best: per test key of temp.f's ok rows, the run `choose` uses (its docstring says which),
        its repetitions and the place the test first appears; returns {key: that place} and how many
        records are used (a run's repetitions each, else one)."""
        c = self.conn
        c.execute("DROP TABLE IF EXISTS temp.best")
        c.execute(
            "CREATE TEMP TABLE best AS SELECT key, run, reps, kfirst FROM (SELECT key, run, reps, kfirst, "
            "ROW_NUMBER() OVER (PARTITION BY key ORDER BY runtune, CASE WHEN bymeasure THEN maxc END DESC, "
            "maxw DESC, minpos) AS rn FROM (SELECT key, run, reps, maxc, maxw, minpos, runtune, "
            "MIN(minpos) OVER (PARTITION BY key) AS kfirst, (MIN(mint) OVER (PARTITION BY key) >= 0 AND "
            "MAX(maxt) OVER (PARTITION BY key) = 1) AS bymeasure "
            "FROM (SELECT key, run, SUM(process_run) AS reps, MAX(created) AS maxc, "
            f"MAX(CASE WHEN seq IS NULL THEN pos ELSE {_SEQ_BASE} + seq END) AS maxw, MIN(pos) AS minpos, "
            "MIN(timed) AS mint, MAX(timed) AS maxt, MIN(tune) AS runtune FROM temp.f WHERE status = 'ok' "
            "GROUP BY key, run))) "
            "WHERE rn = 1"
        )
        kfirst, used = {}, 0
        for key, reps, first in c.execute("SELECT key, reps, kfirst FROM temp.best"):
            kfirst[key] = first
            used += reps if reps > 1 else 1
        return kfirst, used

    def _kept(self) -> list[tuple]:
        """The rows of temp.f a RecordSelection holds: the ok rows of the runs in temp.best, every failed
        row (the report lists them with their errors), and the first row of each facet not among those."""
        c = self.conn
        keep = c.execute(
            "SELECT * FROM temp.f WHERE (status = 'ok' AND (key, run) IN (SELECT key, run FROM "
            "temp.best)) OR status != 'ok'"
        ).fetchall()
        seen = {r[R_FACET] for r in keep}
        firsts = [
            pos
            for facet, pos in c.execute("SELECT facet, MIN(pos) FROM temp.f GROUP BY facet")
            if facet not in seen
        ]
        if firsts:
            keep += c.execute(
                f"SELECT * FROM temp.f WHERE pos IN ({','.join('?' * len(firsts))})", firsts
            ).fetchall()
        return keep

    def skewed(self, files: Sequence[Path]) -> dict[tuple[int, int], float]:
        """(file id, line) -> the latest `written` of the records written before it in its store (by
        seq, those TRUSTED_SEQ trusts), for every record of `files` more than CLOCK_SKEW_BACK_S before that (sequence.clock_skew_of
        says why). Over every record of the files, not a selection: skew is relative to the store."""
        self._order(files)
        rows = self.conn.execute(
            "SELECT file, line, before FROM (SELECT r.file, r.line, r.written, MAX(r.written) OVER "
            f"(PARTITION BY o.part ORDER BY {TRUSTED_SEQ} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) "
            f"AS before FROM recs r JOIN temp.ord o ON o.file = r.file WHERE {TRUSTED_SEQ} IS NOT NULL) "
            "WHERE written IS NOT NULL AND before IS NOT NULL AND written < before - ?",
            (CLOCK_SKEW_BACK_S,),
        ).fetchall()
        return {(f, n): before for f, n, before in rows}

    def imported_kinds(self) -> tuple[bool, bool]:
        """Whether the index lists records that came from an import (`imported` rows), over every file
        indexed: (any but md-table rows, any md-table row). Two index lookups, not a count."""

        def has(untimed: int) -> bool:
            q = "SELECT EXISTS (SELECT 1 FROM imported WHERE untimed = ?)"
            return bool(self.conn.execute(q, (untimed,)).fetchone()[0])

        return has(0), has(1)

    def imported(self, digests: Sequence[int], *, shown: bool, untimed: bool | None = None) -> list[tuple]:
        """Index rows (R_* fields, then pos) of the imported records of the files of the last query
        (`_order`) whose measured digest (`shown`: their shown digest; import_keys.stored_digests) is
        one of `digests`, only md-table rows (`untimed` True) or only the others (False) where given,
        in store order."""
        out: list[tuple] = []
        col = "shown" if shown else "meas"
        only = "" if untimed is None else f"i.untimed = {int(untimed)} AND "
        for lo in range(0, len(digests), _IN_MAX):
            part = list(digests[lo : lo + _IN_MAX])
            out += self.conn.execute(
                f"SELECT {_ROW_COLS}, {_POS} AS pos FROM imported i JOIN temp.ord o ON o.file = i.file "
                f"JOIN recs r ON r.file = i.file AND r.line = i.line "
                f"WHERE {only}i.{col} IN ({','.join('?' * len(part))})",
                part,
            ).fetchall()
        return sorted(out, key=lambda r: r[R_POS])

    def problems(self, files: Sequence[Path]) -> list[tuple[Path, int, str]]:
        """(file, line, why) of every refused line of `files`, in store order."""
        out = []
        for path in files:
            fid = self.ids.get(_rel(self.root, path))
            if fid is not None:
                out += [
                    (path, n, text)
                    for n, text in self.conn.execute(
                        "SELECT line, text FROM problems WHERE file = ? ORDER BY line", (fid,)
                    )
                ]
        return out


def _stored_digests():
    """import_keys.stored_digests, imported when a record is first indexed."""
    from toolkit.results.import_keys import stored_digests

    return stored_digests


def _read_up_to(path: Path, n: int, off: int, length: int) -> tuple[int, int]:
    """(bytes, lines) of `path` indexed, its last line read being line `n` at `off` (`length` bytes): a
    half line (no newline yet) is read again next time."""
    with os.fdopen(open_regular(path), "rb") as fh:
        fh.seek(off + length - 1)
        whole = fh.read(1) == b"\n"
    return (off + length, n) if whole else (off, n - 1)


def _rel(root: Path, path: Path) -> str:
    """`path` under `root` as the index's `files.rel` keeps it: a name that is not UTF-8 (a folder
    named with byte 0xff reads as "\\udcff") written with backslash escapes, as sql_text stores it, so
    the file is found again at the next refresh (was: inserted anew, UNIQUE constraint failed)."""
    r, p = str(root), str(path)  # pathlib's normal forms: `path` lies under `root` when p starts with r/
    rel = p[len(r) + 1 :] if r != "." and p.startswith(r + "/") else path.relative_to(root).as_posix()
    return sql_text((rel,))[0]
