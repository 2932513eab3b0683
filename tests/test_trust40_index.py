"""Issue 32 (a stranger's folder stays a stranger): what results/.index.sqlite stores reaches a report
only under a MAC made with this user's own key (toolkit/results/index_trust.py). Before, a warm report
trusted the stored test keys unchecked: an edited keys.data gained the json report a "model" id column,
a TEXT written where the BLOB was ended in a traceback, and an edited keys.hash split a test in two
when a file was indexed again. Real files, real index, the toolkit run as a user runs it."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from tests.support.records import filed_fixtures, make_record
from tests.support.runs import _no_dac, tk

_EDIT_DATA = (
    "UPDATE keys SET data = {cast}(replace(cast(data AS text), '\"1.52 MiB\"', '\"9.99 GiB\"'){end} "
    "WHERE id = (SELECT min(id) FROM keys WHERE instr(data, cast('1.52 MiB' AS blob)) > 0)"
)


def _report(
    tmp: Path, state: Path | None = None, *, env: dict[str, str | None] | None = None, no_dac: bool = False
) -> tuple[str, str]:
    """`toolkit report --results r --format json` in `tmp`, exit 0: (stdout, stderr). `state`: the
    XDG_STATE_HOME that holds the user's key, else `env`; `no_dac`: as root, without the capabilities
    that ignore file modes (support.runs._no_dac), so a folder this user cannot write is one."""
    env = {"XDG_STATE_HOME": str(state)} if state else env
    got = tk(
        tmp, "report", "--results", "r", "--format", "json", env=env, prefix=_no_dac() if no_dac else None
    )
    assert got.returncode == 0, got.stderr[-2000:]
    return got.stdout, got.stderr


def _edit(res: Path, sql: str) -> int:
    with sqlite3.connect(res / ".index.sqlite") as c:
        return c.execute(sql).rowcount


@pytest.mark.parametrize("blob", [True, False], ids=["blob", "text-for-blob"])
def test_an_edited_key_changes_nothing(tmp_path, blob):
    """A stored test key edited (a model size of one key changed; as a BLOB, or as TEXT where the BLOB
    was): the warm report prints the cold report's bytes, stdout and stderr, and no traceback."""
    res = filed_fixtures(tmp_path / "r")
    cold = _report(tmp_path)
    cast, end = ("cast", " AS blob)") if blob else ("", ")")
    assert _edit(res, _EDIT_DATA.format(cast=cast, end=end)) == 1
    assert _report(tmp_path) == cold


def _append(res: Path, run: str, avg: float, day: str) -> None:
    """A record of one test (image digest a…, its file results/aaaaaaaaaaaa/bench.jsonl) of run `run`."""
    rec = make_record("cpu", "cpu", p=512, avg=avg, run_id=run, digest="sha256:" + "a" * 64)
    rec = rec.model_copy(update={"created": f"2026-07-{day}T00:00:00+00:00"})
    path = res / ("a" * 12) / "bench.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(rec.model_dump_json() + "\n")


def test_an_edited_key_hash_changes_nothing(tmp_path):
    """keys.hash edited, then a newer run of the same test appended: the new record's key was not found
    by its hash and got a key row of its own, the test split in two and the warm report said `1 used, 0
    superseded` where a cold one says 1 superseded; now the index is no longer trusted and built again."""
    res = tmp_path / "r"
    _append(res, "run-1", 100.0, "01")
    _report(tmp_path)
    assert _edit(res, "UPDATE keys SET hash = randomblob(16)") == 1
    _append(res, "run-2", 200.0, "02")
    warm = _report(tmp_path)
    (res / ".index.sqlite").unlink()
    assert warm == _report(tmp_path)


def test_a_strangers_index_is_not_trusted(tmp_path):
    """An index a stranger built under their own key, with a key edited and its MAC made again under
    that key (what a stranger's toolkit can do): under this user's key nothing of it is used."""
    res = filed_fixtures(tmp_path / "r")
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    cold = _report(tmp_path, mine)
    (res / ".index.sqlite").unlink()
    assert _report(tmp_path, theirs) == cold
    assert _edit(res, _EDIT_DATA.format(cast="cast", end=" AS blob)")) == 1
    with sqlite3.connect(res / ".index.sqlite") as c:
        cols = [r[1] for r in c.execute("PRAGMA table_info(keys)")]
        if "mac" in cols:  # the stranger signs the edit with their own key
            from toolkit.results.index_trust import key_mac

            key = (theirs / "toolkit" / "index.key").read_bytes()
            for i, h, data in c.execute("SELECT id, hash, data FROM keys").fetchall():
                c.execute("UPDATE keys SET mac = ? WHERE id = ?", (key_mac(key, h, data), i))
    assert _report(tmp_path, theirs) != cold  # the stranger's own toolkit trusts its own key
    assert _report(tmp_path, mine) == cold


def test_a_strangers_index_in_a_folder_this_user_cannot_write(tmp_path):
    """The stranger's index in their folder, which this user may read but not write: not trusted and
    not deleted (it cannot be), an index in memory for the call: the cold report, no traceback."""
    res = filed_fixtures(tmp_path / "r")
    cold = _report(tmp_path, tmp_path / "mine")
    (res / ".index.sqlite").unlink()
    _report(tmp_path, tmp_path / "theirs")
    before = (res / ".index.sqlite").read_bytes()
    res.chmod(0o555)
    try:
        got = _report(tmp_path, tmp_path / "mine", no_dac=True)
    finally:
        res.chmod(0o755)
    assert got == cold
    assert (res / ".index.sqlite").read_bytes() == before


def test_a_warm_report_keeps_its_index(tmp_path):
    """An index this user's toolkit wrote verifies: a warm report does not build it again (a row its
    MAC does not match would, every time)."""
    res = filed_fixtures(tmp_path / "r")
    cold = _report(tmp_path)
    _edit(res, "INSERT INTO meta VALUES ('probe', 'kept')")
    assert _report(tmp_path) == cold
    with sqlite3.connect(res / ".index.sqlite") as c:
        assert c.execute("SELECT v FROM meta WHERE k = 'probe'").fetchone() == ("kept",)


def test_no_key_no_index_file_same_report(tmp_path):
    """XDG_STATE_HOME unset and HOME not writable: no key, so no index file is trusted or written; the
    report is the cold one, stderr included."""
    res = filed_fixtures(tmp_path / "r")
    cold = _report(tmp_path)
    (res / ".index.sqlite").unlink()
    home = tmp_path / "home"
    home.mkdir(mode=0o500)
    assert _report(tmp_path, env={"XDG_STATE_HOME": None, "HOME": str(home)}, no_dac=True) == cold
    assert not (res / ".index.sqlite").exists()


@pytest.mark.parametrize("bad", ["group-readable", "link", "short"])
def test_a_key_file_not_the_users_own_is_no_key(tmp_path, monkeypatch, bad):
    """A key file readable by others, a symbolic link, or of the wrong length: index_key gives None."""
    from toolkit.results import index_trust

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    key = index_trust.index_key()
    path = tmp_path / "toolkit" / "index.key"
    assert key is not None and len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert index_trust.index_key() == key
    if bad == "group-readable":
        path.chmod(0o640)
    elif bad == "link":
        real = tmp_path / "real.key"
        path.rename(real)
        path.symlink_to(real)
    else:
        path.write_bytes(key[:16])
    assert index_trust.index_key() is None


_EDIT_REC = (
    "UPDATE recs SET key = (SELECT max(id) FROM keys) "
    "WHERE (file, line) = (SELECT file, line FROM recs ORDER BY file, line LIMIT 1)"
)


def test_an_index_as_it_was_left_is_not_verified_again(tmp_path, monkeypatch):
    """The pass over every row's MAC (index_trust.verify: O(history), ~2 s a call at 200,000 records)
    ran on every open of the index; now only when the file is not as this user's toolkit left it. An
    edit made with SQLite right after (same size, maybe the same clock tick: the change counter tells)
    is verified and the index built again. In-process, with verify counted, not replaced."""
    from toolkit.results import index, index_trust
    from toolkit.results.records import ResultStore

    calls: list[int] = []
    real = index_trust.verify
    monkeypatch.setattr(index_trust, "verify", lambda conn, key: (calls.append(1), real(conn, key))[1])
    res = filed_fixtures(tmp_path / "r")

    def shown() -> list[str]:
        return sorted(r.model_dump_json() for r in index.load(index.heads(ResultStore(res))))

    cold = shown()
    seal = index_trust._seal(res / ".index.sqlite")
    made = seal.stat().st_mtime_ns
    assert (shown(), shown(), len(calls)) == (cold, cold, 1)
    assert seal.stat().st_mtime_ns == made  # an index as it was left: its seal stands, nothing written
    size = (res / ".index.sqlite").stat().st_size
    assert _edit(res, _EDIT_REC) == 1 and (res / ".index.sqlite").stat().st_size == size
    assert (shown(), len(calls)) == (cold, 3)  # the edited index's check fails; the one built again checked
    assert (shown(), len(calls)) == (cold, 3)  # and sealed in turn


@pytest.mark.parametrize("how", ["rollback", "wal"])
def test_an_edited_record_row_changes_nothing(tmp_path, how):
    """A record row pointed at another test's key by a stranger's SQLite, in the file's own journal
    mode or after switching it to WAL with the connection kept open (the edit then lies in -wal, the
    file itself unchanged): the warm report prints the cold report's bytes."""
    res = filed_fixtures(tmp_path / "r")
    cold = _report(tmp_path)
    c = sqlite3.connect(res / ".index.sqlite", isolation_level=None)
    try:
        if how == "wal":
            c.execute("PRAGMA journal_mode=WAL")
            assert _report(tmp_path) == cold
        assert c.execute(_EDIT_REC).rowcount == 1
        assert _report(tmp_path) == cold
    finally:
        c.close()


def test_an_edit_racing_the_refresh_is_verified(tmp_path, monkeypatch):
    """A stranger's SQLite commit landing after this call saw the file as it left it, before its own
    refresh (a real second connection, made to commit at that moment in-process): not blessed by the
    seal written after, but verified and the index built again."""
    from toolkit.results import index, index_sqlite, index_trust
    from toolkit.results.records import ResultStore

    res = filed_fixtures(tmp_path / "r")
    index.heads(ResultStore(res))
    failed: list[str] = []
    verify, refresh = index_trust.verify, index_sqlite.ResultIndex.refresh

    def verify_told(conn, key):
        try:
            verify(conn, key)
        except sqlite3.DatabaseError as err:
            failed.append(str(err))
            raise

    def refresh_raced(self, files):
        if not failed:
            assert _edit(res, _EDIT_REC) == 1
        return refresh(self, files)

    monkeypatch.setattr(index_trust, "verify", verify_told)
    monkeypatch.setattr(index_sqlite.ResultIndex, "refresh", refresh_raced)
    index.heads(ResultStore(res))
    assert failed == ["index malformed: a recs row this toolkit did not write"]


@pytest.mark.parametrize("table", ["recs", "problems"])
def test_a_deleted_row_changes_nothing(tmp_path, table):
    """A record's (or a refused line's) row deleted from the index: every row left carries its MAC, and
    the warm report lost the record (25,306 -> 24,698 bytes of json) or the warning; now each files row
    counts its rows under its own MAC, the count disagrees and the index is built again."""
    res = filed_fixtures(tmp_path / "r")
    (res / ("b" * 12)).mkdir()
    (res / ("b" * 12) / "bench.jsonl").write_text("not json\n")
    cold = _report(tmp_path)
    where = f"(file, line) = (SELECT file, line FROM {table} ORDER BY file, line LIMIT 1)"
    assert _edit(res, f"DELETE FROM {table} WHERE {where}") == 1
    assert _report(tmp_path) == cold


def test_the_query_reads_what_was_checked(tmp_path):
    """The check's read transaction is the query's (index._opened(hold=True)): a stranger's SQLite
    commit cannot land between the two; it waits for the query's end (here: refused at once)."""
    from toolkit.results import index
    from toolkit.results.records import ResultStore

    res = filed_fixtures(tmp_path / "r")
    store = ResultStore(res)
    idx = index._opened(store, store.bench_files(), hold=True)
    try:
        assert idx.conn.in_transaction
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            with sqlite3.connect(res / ".index.sqlite", timeout=0) as c:
                c.execute(_EDIT_REC)
    finally:
        idx.conn.execute("COMMIT")
        idx.close()
    assert _edit(res, _EDIT_REC) == 1


def test_users_sharing_a_folder_keep_their_own_index(tmp_path):
    """Two users writing one results folder: each row is MACed under its writer's key, so each user's
    toolkit rebuilt the other's .index.sqlite (O(history) a call, in turn). Now an index file owned by
    another user is left as it is, and this user keeps .index.<euid>.sqlite beside it. The other user
    is stood in for by a file made under another key and given to uid 65534 (chown, as root)."""
    import os

    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    res = filed_fixtures(tmp_path / "r")
    cold = _report(tmp_path, tmp_path / "theirs")
    theirs = res / ".index.sqlite"
    os.chown(theirs, 65534, 65534)
    before = (theirs.read_bytes(), theirs.stat().st_mtime_ns)
    assert _report(tmp_path, tmp_path / "mine") == cold
    mine = res / f".index.{os.geteuid()}.sqlite"
    made = mine.stat().st_ino
    assert _report(tmp_path, tmp_path / "mine") == cold
    assert (theirs.read_bytes(), theirs.stat().st_mtime_ns) == before
    assert mine.stat().st_ino == made  # kept, not built again


@pytest.mark.parametrize("how", ["link", "dangling", "hardlink", "strangers-link"])
def test_an_index_name_that_names_another_file_is_not_opened(tmp_path, how):
    """results/.index.sqlite a symbolic link to a SQLite file of the user's (or a hard link of it): SQLite
    followed it and the index's schema check dropped every table of that file; a dangling link made a
    file where it pointed. As a stranger plants it in a folder they can write: `.index.<euid>.sqlite`
    beside a `.index.sqlite` of theirs (uid 65534, chown as root). Now such a name is not opened: the
    report is the cold one and the other file is as it was."""
    import os

    if how == "strangers-link" and os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    res = filed_fixtures(tmp_path / "r")
    cold = _report(tmp_path)
    (res / ".index.sqlite").unlink()
    victim = tmp_path / "victim.sqlite"
    with sqlite3.connect(victim) as c:
        c.execute("CREATE TABLE precious (x)")
        c.execute("INSERT INTO precious VALUES (42)")
    c.close()
    before = victim.read_bytes()
    name = res / ".index.sqlite"
    if how == "strangers-link":
        _report(tmp_path, tmp_path / "theirs")
        os.chown(name, 65534, 65534)
        name = res / f".index.{os.geteuid()}.sqlite"
    if how == "hardlink":
        os.link(victim, name)
    else:
        name.symlink_to(tmp_path / "made-elsewhere.sqlite" if how == "dangling" else victim)
    assert _report(tmp_path) == cold
    assert _report(tmp_path) == cold
    assert victim.read_bytes() == before
    assert not (tmp_path / "made-elsewhere.sqlite").exists()


def test_no_home_at_all_is_no_key(tmp_path, monkeypatch):
    """HOME and XDG_STATE_HOME unset for a uid without a passwd entry (a container's `--user 12345`
    under `env -i`): Path.home() raises RuntimeError, which the message of a missing key raised again
    from open_file: a traceback. Now an index in memory: the cold records. The passwd lookup is made to
    fail in-process (this host's uid has an entry)."""
    import pwd

    from toolkit.results import index
    from toolkit.results.records import ResultStore

    res = filed_fixtures(tmp_path / "r")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    def shown() -> list[str]:
        return sorted(r.model_dump_json() for r in index.load(index.heads(ResultStore(res))))

    cold = shown()
    (res / ".index.sqlite").unlink()
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.delenv("HOME", raising=False)

    def no_entry(uid: int) -> None:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    assert shown() == cold
    assert not (res / ".index.sqlite").exists()


def test_an_index_switched_to_wal_is_sealed_again(tmp_path, monkeypatch):
    """Another tool's `PRAGMA journal_mode=WAL` on the index (kept in the file's header; the tool then
    closed): a WAL file is never sealed, so every later call verified every row's MAC (O(history),
    ~2 s a call at 200,000 records) for ever. Now the toolkit puts it back in rollback mode: verified
    once, sealed after. In-process, with verify counted, not replaced."""
    from toolkit.results import index, index_trust
    from toolkit.results.records import ResultStore

    calls: list[int] = []
    real = index_trust.verify
    monkeypatch.setattr(index_trust, "verify", lambda conn, key: (calls.append(1), real(conn, key))[1])
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    res = filed_fixtures(tmp_path / "r")

    def shown() -> list[str]:
        return sorted(r.model_dump_json() for r in index.load(index.heads(ResultStore(res))))

    cold = shown()
    c = sqlite3.connect(res / ".index.sqlite")
    assert c.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    c.close()
    assert [shown() for _ in range(4)] == [cold] * 4
    assert len(calls) == 2  # the cold one's, the WAL file's
    assert (res / ".index.sqlite").read_bytes()[18:20] == b"\x01\x01"


def test_the_seals_folder_stays_bounded(tmp_path, monkeypatch):
    """One seal per index path ever used, never removed: a CI job's fresh results folder each left one
    (a 4 KiB block) for good. Now a new seal prunes the folder past index_trust.MAX_SEALS (made 4 here)
    to its newest 3/4; the folder in use keeps its seal (not verified again)."""
    from toolkit.results import index, index_trust
    from toolkit.results.records import ResultStore

    calls: list[int] = []
    real = index_trust.verify
    monkeypatch.setattr(index_trust, "verify", lambda conn, key: (calls.append(1), real(conn, key))[1])
    monkeypatch.setattr(index_trust, "MAX_SEALS", 4)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    seals = tmp_path / "state" / "toolkit" / "seals"
    for i in range(10):
        res = filed_fixtures(tmp_path / f"r{i}")
        index.heads(ResultStore(res))
        assert len(list(seals.iterdir())) <= 4
    index.heads(ResultStore(res))
    assert len(calls) == 10  # each folder's cold build; the last one's warm call trusted its seal
