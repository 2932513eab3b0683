"""Whether what the query index stores may reach a reader: only what this user's toolkit wrote.

results/.index.sqlite lies in a results folder that may be someone else's (`report --results DIR`,
`compare --against DIR`) or edited by hand. index.load re-checks each loaded line against its row (run,
status, digest, seq, measured_at); everything else a reader takes from the index unchecked (a test's
key data and hash, the columns `choose` groups and orders by, a facet's names, a refused line's text,
an import's digests, a file's indexed extent) is trusted only under a MAC: every row the toolkit writes
carries `mac`, a keyed blake2b (16 bytes) of its values (`row_mac`) under the user's own key
(`index_key`). `check` runs `verify` (every record, problem and imported row) after a refresh unless
the file is as this user's toolkit last left it (`seal`: its device, inode, size, times and SQLite
change counter, kept beside the key), and `sound_file` checks each files row as the refresh plans:
one that does not verify (an edited value, a value of another SQLite type, a stranger's index made
under another key) makes the index a damaged one, rebuilt from the JSONL as a cold report reads it. A
keys row that does not verify is not used (index_rows.key_of's caller computes the key). Without a key (HOME not writable, a key
file that is a link, not the user's, or readable by others) no index file is used at all: an
in-memory index is built for the call, as when results/ is read-only; so too where the index's name is
not a regular file of the user's own (`own_file`, `connect`: a link planted there named another SQLite
file, whose tables the schema check dropped). A file another tool put in WAL mode is put back
(`no_wal`: a WAL file is never sealed), and the seals folder keeps at most MAX_SEALS seals.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sqlite3
import stat
import tempfile
from pathlib import Path
from typing import Any

INDEX_NAME = ".index.sqlite"


def index_path(root: Path, *, owned: bool = True) -> Path:
    """results/.index.sqlite, or results/.index.<euid>.sqlite where .index.sqlite is not this user's
    own file (`own_file`: another user's, a link): users sharing one results folder each keep their own
    (its rows are MACed under its writer's key, index_trust: one index for both was rebuilt by each
    user's toolkit in turn, O(history) a call). A folder only read, not `owned` (compare --against
    DIR: a stranger's folder stays a stranger's), has its index beside the key, named by the folder's
    real path (indexes/<sha256>.sqlite; made where it is opened: opened_path): nothing is written
    into it; so too a folder of another user's (`sudo toolkit bench` in the user's results/: root's index
    was left there, root-owned). Only a name: nothing is made or read here but the files' metadata."""
    if not _owns(root, owned):
        where = key_path().parent / "indexes"
        return where / (hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:32] + ".sqlite")
    path = Path(root) / INDEX_NAME
    return path if own_file(path) else path.with_name(f".index.{os.geteuid()}.sqlite")


def _owns(root: Path, owned: bool) -> bool:
    """Whether the index of results folder `root` lies in it: an `owned` folder (one written, not only
    read) of this user's own, or one not made yet (its writer makes it). Never raises."""
    try:
        return owned and os.stat(root).st_uid == os.geteuid()
    except OSError:
        return owned


MAX_STRANGER_INDEXES = 16  # indexes of folders only read (compare --against DIR): each as big as its rows


def opened_path(root: Path, *, owned: bool = True) -> Path:
    """index_path(root, owned=owned), where the index is about to be opened: for a folder not `owned` (a
    stranger's) its folder made (0700), and where the index is new, that folder pruned so that with it
    at most MAX_STRANGER_INDEXES are kept (`_prune` to one fewer: the new one is made after it; the
    least recently written go; one deleted is rebuilt from its folder's JSONL at its next use). OSError
    as mkdir raises it."""
    path = index_path(root, owned=owned)
    if not _owns(root, owned):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not os.path.lexists(path):
            _prune(path.parent, MAX_STRANGER_INDEXES - 1)
    return path


def own_file(path: Path) -> bool:
    """Whether `path` may be opened as this user's index file: absent (SQLite makes it), or a regular
    file of this user's with one name. Not a symbolic link (SQLite follows it, and `_prepare` drops
    every table of a file whose schema is not the index's: a link planted in a folder a stranger can
    write named any SQLite file of the user's) nor a hard link (the same file under another name)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_nlink <= 1


def connect(path: Path) -> sqlite3.Connection:
    """An autocommit connection (30 s busy timeout) to the index file `path`, which is this user's own
    (`own_file`) before SQLite opens it and the same file after (a link swapped in meanwhile is told;
    not told: one swapped in and out again between the two looks). OSError otherwise, nothing opened;
    sqlite3.OperationalError from SQLite (read-only folder, locked)."""
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        before = None
    if not own_file(path):
        raise OSError(f"{path}: not a file of this user's own (a link, another user's): not opened")
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        after = os.lstat(path)
    except OSError:
        after = None
    if (
        after is None
        or not own_file(path)
        or (before and (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino))
    ):
        conn.close()
        raise OSError(f"{path}: replaced while opened: not used")
    return conn


KEY_BYTES = 32

MAC_BYTES = 16


def key_path() -> Path:
    """`${XDG_STATE_HOME:-~/.local/state}/toolkit/index.key` (XDG_STATE_HOME only when absolute, as
    the XDG spec says); RuntimeError when there is no home to name."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "toolkit" / "index.key"


def index_key() -> bytes | None:
    """The user's index key (KEY_BYTES random bytes), made on first use (O_EXCL, mode 0600, its folder
    0700); None where there is none to trust: no home, a folder that cannot be written, or a key file
    that is a link, not a regular file, not the user's, readable or writable by group or others, or
    not KEY_BYTES long. Never raises, prints nothing."""
    try:
        path = key_path()
        key = _read_key(path)
        if key is None and not os.path.lexists(path):
            key = _make_key(path)
        return key
    except (OSError, RuntimeError, KeyError):  # KeyError: Path.home() of a uid without a passwd entry
        return None


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # none yet, a link (ELOOP), not readable
        return None
    try:
        st = os.fstat(fd)
        if not (
            stat.S_ISREG(st.st_mode)
            and st.st_uid == os.geteuid()
            and st.st_mode & 0o077 == 0
            and st.st_size == KEY_BYTES
        ):
            return None
        data = os.read(fd, KEY_BYTES + 1)
        return data if len(data) == KEY_BYTES else None
    finally:
        os.close(fd)


def _make_key(path: Path) -> bytes | None:
    """A new key written whole to a temporary file, then linked to `path` (O_EXCL's semantics: a key
    another process made meanwhile wins and is read)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".index.key.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(KEY_BYTES))
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
    return _read_key(path)


def no_wal(conn: sqlite3.Connection) -> None:
    """An index file another tool switched to WAL mode (persistent: in the file's header) back to the
    rollback journal the toolkit makes: `check` never seals a WAL file, so each call after such a
    switch verified every row's MAC again, O(history) (1.82 CPU s at 200,268 records) for ever. Not
    waited for: while another connection has the file open it stays WAL this call (and is verified)."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        return
    conn.execute("PRAGMA busy_timeout=0")
    try:
        conn.execute("PRAGMA journal_mode=DELETE").fetchall()
    except sqlite3.OperationalError:  # another connection holds it (locked, busy): as it is
        pass
    finally:
        conn.execute("PRAGMA busy_timeout=30000")


@functools.lru_cache(maxsize=4)
def _keyed(key: bytes) -> Any:
    """blake2b keyed with `key`, copied for each row (a copy costs less than keying anew)."""
    return hashlib.blake2b(key=key, digest_size=MAC_BYTES)


def row_mac(key: bytes, table: str, values: tuple) -> bytes:
    """MAC_BYTES of keyed blake2b over `values` (texts, ints, floats, bytes, None, as stored) of a row
    of `table`: the tag makes a row of one table no row of another. A float that is an integer counts
    as that integer: SQLite gives it back as its column's affinity made it (REAL keeps 5 as 5.0,
    INTEGER keeps 5.0 as 5)."""
    vals = [int(v) if type(v) is float and v.is_integer() and abs(v) < 2**53 else v for v in values]
    h = _keyed(key).copy()
    h.update(repr((table, *vals)).encode("utf-8", "backslashreplace"))
    return h.digest()


def key_mac(key: bytes, h: bytes, data: bytes) -> bytes:
    """The MAC of a keys row (its hash `h`, its key_data `data`): the bytes themselves, each after its
    length, not their repr (a key's data is ~0.8 KB: 10,000 keys ~3x faster than row_mac)."""
    m = _keyed(key).copy()
    for part in (b"keys", h, data):
        m.update(len(part).to_bytes(8, "little"))
        m.update(part)
    return m.digest()


# Each table's values a MAC covers, as `verify` reads them back: a record row by its run's id, its test
# key's hash and its facet's values (not their row numbers, which an edit could point elsewhere).
_CHECKED = {
    "recs": "SELECT r.file, r.line, r.off, r.len, r.status, u.run_id, r.created, k.hash, r.process_run, "
    "f.image_name, f.digest, f.model_name, f.model_size, f.gpu_info, r.seq, r.timed, r.written, r.tune, "
    "r.sum, r.mac FROM recs r LEFT JOIN runs u ON u.id = r.run LEFT JOIN keys k ON k.id = r.key "
    "LEFT JOIN facets f ON f.id = r.facet",
    "problems": "SELECT file, line, text, mac FROM problems",
    "imported": "SELECT file, line, meas, shown, untimed, mac FROM imported",
}


# A file's rows as many as its files row (under its MAC) says were written: a row deleted hides a record.
_COUNTED = (
    "SELECT 1 FROM files f WHERE f.nrows IS NOT (SELECT count(*) FROM recs WHERE file = f.id) "
    "+ (SELECT count(*) FROM problems WHERE file = f.id) + (SELECT count(*) FROM imported WHERE file = f.id)"
)


def verify(conn: sqlite3.Connection, key: bytes) -> None:
    """sqlite3.DatabaseError (`index malformed: ...`, which index._opened answers by rebuilding the
    index from the JSONL) unless every record, problem and imported row carries the MAC `key` gives
    its values (files rows: `sound_file`; keys rows: `trusted_keys`) and every file holds the rows its
    files row counts (`nrows`)."""
    for table, sql in _CHECKED.items():
        for row in conn.execute(sql):
            if row[-1] != row_mac(key, table, row[:-1]):
                raise sqlite3.DatabaseError(f"index malformed: a {table} row this toolkit did not write")
    if conn.execute(_COUNTED).fetchone():
        raise sqlite3.DatabaseError("index malformed: rows of a file deleted")


def file_state(path: Path) -> tuple[int, ...] | None:
    """(device, inode, size, mtime_ns, ctime_ns, SQLite file change counter) of the index file `path`;
    None when it cannot be read, is not in rollback-journal mode (header bytes 18-19; in WAL mode an
    edit lands in `-wal`, not in the file), or has a `-wal` beside it: such a file is never sealed.
    Source of the header layout: https://www.sqlite.org/fileformat.html (1.3)."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            head = fh.read(28)
        if len(head) < 28 or head[18:20] != b"\x01\x01" or os.path.lexists(f"{path}-wal"):
            return None
    except OSError:
        return None
    return (
        st.st_dev,
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        int.from_bytes(head[24:28], "big"),
    )


def _seal(path: Path) -> Path:
    """Where the seal of index file `path` lies: the key's folder, seals/, named by its real path's hash."""
    name = hashlib.blake2b(os.fsencode(os.path.realpath(path)), digest_size=16).hexdigest()
    return key_path().parent / "seals" / name


def check(
    conn: sqlite3.Connection, key: bytes, path: Path, before: tuple, wrote: bool, *, hold: bool = False
) -> None:
    """`verify` index file `path` (opened as `conn`) unless it is as this user's toolkit left it:
    `before` = (file_state, PRAGMA data_version) taken before this call's refresh matched its seal, no
    other connection committed since, and the file is unchanged since (or this call `wrote` it); then
    seal its state now. Held in one read transaction, so no other SQLite writer commits between the
    check and the seal (with `hold`, left open for the caller's query, which commits). Not told apart:
    bytes written into the file outside SQLite, keeping its size, during this call's own write or in
    the same clock tick as the file's last change. Raises what
    `verify` raises; a seal that cannot be written only costs the next call a `verify`."""
    state, version = before
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT 1 FROM meta LIMIT 1").fetchall()  # the shared lock: writers wait for the end
        now = file_state(path)
        mark = _seal(path)
        try:
            sealed = state is not None and mark.read_text() == _mark(key, state)
        except (OSError, ValueError):
            sealed = False
        same = conn.execute("PRAGMA data_version").fetchone()[0] == version and (wrote or now == state)
        if not (sealed and same):
            verify(conn, key)
        if now is not None and not (sealed and now == state):  # unchanged: its seal stands
            _write_seal(mark, _mark(key, now))
    except BaseException:
        conn.execute("COMMIT")
        raise
    if not hold:
        conn.execute("COMMIT")


def _mark(key: bytes, state: tuple) -> str:
    """A seal's text: the state under the key (a seal made under another key matches nothing)."""
    return hashlib.blake2b(repr(state).encode(), key=key, digest_size=16).hexdigest()


MAX_SEALS = 1024  # seal files kept: one per index path ever used (a CI job's fresh results folder each)


def _write_seal(mark: Path, text: str) -> None:
    """`text` written to seal file `mark` whole (a temporary file renamed over it); a seal new to the
    folder prunes it (`_prune`). Never raises: a seal not written costs the next call a `verify`."""
    try:
        mark.parent.mkdir(mode=0o700, exist_ok=True)
        new = not os.path.lexists(mark)
        fd, tmp = tempfile.mkstemp(prefix=".seal.", dir=mark.parent)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, mark)
        if new:
            _prune(mark.parent, MAX_SEALS)
    except OSError:
        pass


def _prune(folder: Path, keep: int) -> None:
    """Over `keep` files in `folder` (the seals, MAX_SEALS; opened_path's indexes): the least recently
    written ones deleted down to 3/4 of it (a seal is rewritten by each call that finds its index changed or wrote it), so the folder does not grow with
    every results folder ever reported on (one 4 KiB block each). A seal deleted costs its index one
    `verify`, no more."""
    with os.scandir(folder) as entries:
        names = [e.name for e in entries]
    if len(names) <= keep:
        return
    aged = []
    for name in names:
        with contextlib.suppress(OSError):  # another process pruned it meanwhile
            aged.append((os.lstat(folder / name).st_mtime_ns, name))
    for _, name in sorted(aged)[: len(aged) - keep * 3 // 4]:
        with contextlib.suppress(OSError):
            os.unlink(folder / name)


def sound_file(key: bytes, row: tuple) -> bool:
    """A files row (rel, id, dev, ino, size, mtime_ns, ctime_ns, done, lines, nrows, edges, mac) as refresh
    writes it: integers, the bytes indexed within the size, a 16-byte edges hash, all under its MAC."""
    *ints, edges, mac = row[2:]
    return (
        all(type(v) is int for v in ints)
        and 0 <= row[7] <= row[4]
        and row[8] >= 0
        and type(edges) is bytes
        and len(edges) == 16
        and mac == row_mac(key, "files", row[:-1])
    )


def trusted_keys(key: bytes, rows: list[tuple]) -> dict[int, bytes]:
    """{key id: its data} of keys rows (id, hash, data, mac) whose hash and data are bytes under their
    MAC; any other row is left out (its records' keys are computed)."""
    return {
        i: data
        for i, h, data, mac in rows
        if type(h) is bytes and type(data) is bytes and mac == key_mac(key, h, data)
    }
