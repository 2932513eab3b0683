"""Breaker round 35: the changes merged late in the ninth session, pushed with bad and hostile input."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.runs import tk


def _installed_copy(tmp_path: Path, commit_py: str) -> Path:
    """This tree's toolkit/ laid out as pip installs it (no .git beside it), its toolkit/host/_commit.py
    holding `commit_py`."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "toolkit", site / "toolkit", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "toolkit" / "host" / "_commit.py").write_text(commit_py)
    return site


@pytest.mark.parametrize(
    "body",
    [
        'COMMIT = "' + "z" * 40 + '"\n',  # 40 characters, not hex
        'COMMIT = "\\x1b]0;pwned\\x07\\x1b[2J' + "a" * 26 + '"\n',  # 40 characters of terminal escapes
        'COMMIT = ("\n',  # a syntax error
        'raise RuntimeError("boom")\n',  # code that fails when imported
    ],
)
def test_a_garbage_archived_commit_is_no_commit_and_no_crash(tmp_path: Path, body: str) -> None:
    """A copy installed from toolkit-src.tar.gz names its commit from toolkit/host/_commit.py. That file
    was imported: one with a syntax error or a `raise` made `toolkit --version` (and every bench, which
    records the toolkit) exit 1 with a traceback; a COMMIT of any 40 characters was taken as the commit,
    so terminal escapes were printed by --version and stored in every record. The file is now read, not
    run, and only 40 or 64 hex is a commit."""
    site = _installed_copy(tmp_path, body)
    env = {**os.environ, "PYTHONPATH": str(site)}
    got = subprocess.run(
        [sys.executable, "-m", "toolkit", "--version"], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert got.returncode == 0, got.stderr
    assert "commit unknown" in got.stdout and "\x1b" not in got.stdout, got.stdout


def test_the_archived_commit_as_export_run_writes_it(tmp_path: Path) -> None:
    """The file export-run writes (run_folder._with_commit's body) is read back; 64 hex (a SHA-256
    repository) too; a FIFO in its place is not waited on."""
    from toolkit.host import info

    for commit in ("a" * 40, "0123456789abcdef" * 4):
        p = tmp_path / f"c{len(commit)}.py"
        p.write_text(
            f'"""The commit this source was archived at (toolkit export-run)."""\n\nCOMMIT = "{commit}"\n'
        )
        assert info.archived_commit(p) == commit
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    assert info.archived_commit(fifo) is None
    assert info.archived_commit(tmp_path / "absent.py") is None


def test_a_copied_index_with_planted_test_keys_does_not_hide_records(tmp_path: Path) -> None:
    """A results folder copied with its .index.sqlite (the toolkit's schema exactly, its fingerprint:
    index_schema.sound passes) whose keys table says every test is one test: the copy's files differ
    in inode and ctime, so their records were indexed again, but each record's key id was taken from
    the planted keys table by hash and its data kept: the report read 10 records and used 1, the other
    9 tests gone unsaid. A key row the refresh did not write is now made right the first time it is
    used."""
    import sqlite3

    from tests.support.records import CPU_A, load
    from toolkit.results import index
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    recs = load(CPU_A)
    for r in recs:
        store.add_result(r)
    assert len(index.select(store)) == len(recs)  # the index file written
    conn = sqlite3.connect(store.root / ".index.sqlite")
    (one,) = conn.execute("SELECT data FROM keys LIMIT 1").fetchone()
    conn.execute("UPDATE keys SET data = ?", (one,))
    conn.commit()
    conn.close()
    for f in store.root.glob("*/bench.jsonl"):  # copied: another inode, as on the host it was sent to
        shutil.copy(f, f.with_suffix(".new"))
        f.with_suffix(".new").replace(f)
    got = tk(tmp_path, "report", "--results", str(store.root), timeout=120)
    assert got.returncode == 0, got.stderr
    assert f"{len(recs)} records read, {len(recs)} used" in got.stdout, got.stdout[-400:]


def test_a_run_id_from_a_record_adds_no_tag_or_line_to_the_export_readme(tmp_path: Path) -> None:
    """A stored record's run_id is any text (a stranger's results folder; export-run takes the start
    of it, `20261205T2031`). The README put it raw in its title and inside a one-backtick code span:
    `x` <img src=...>` closed the span and a line break began a new markdown line, so the customer's
    page held a live <img> and <script>; `export-run` printed the break as a second line. The title is
    escaped, the compare line one code span fenced past the id's backticks, the printed line one."""
    from tests.support.runs import bench_records
    from toolkit.publish import run_folder
    from toolkit.results.records import ResultStore

    rid = "20261128T195135Z-e6f7c7` <img src=x onerror=alert(1)> <script>alert(2)</script>"  # no \n: RunId
    store = ResultStore(tmp_path / "results")
    for r in bench_records("20261128T195135Z-e6f7c7"):
        store.add_result(r.model_copy(update={"run_id": rid}))
    run_folder.export_run(store, rid, tmp_path / "sent", None)
    readme = (tmp_path / "sent" / "README.md").read_text()
    title, rest = readme.split("\n", 1)
    assert "<img" not in title.replace("\\<img", "") and "<script>" not in readme.split("\n", 2)[1]
    compare = next(line for line in readme.splitlines() if "toolkit compare YOUR_RUN" in line)
    assert "``toolkit compare YOUR_RUN 20261128T195135Z-e6f7c7` <img" in compare, compare
    assert not any(line.startswith("<script>") for line in readme.splitlines())


@pytest.mark.e2e
def test_an_engine_that_hangs_mid_run_is_not_asked_to_remove_the_container(tmp_path: Path) -> None:
    """The engine stops answering once the container started (a proxy that forwards, then drops
    everything): the watchdog ended the run ENGINE_GRACE_S past its timeout, and then _release asked
    the hung engine to remove the container, a request that waited out REQUEST_TIMEOUT_S more: the run
    went on timeout + grace + request timeout (240 s past a bench's timeout at the real values, where
    docs/reliability.md says 120). A run the engine left hanging is not asked again (what it leaves is
    removed at the next start). A real Docker engine behind a real proxy socket: not a mock."""
    from tests.support.sockets import LINE, frozen_run

    if not Path("/var/run/docker.sock").exists():
        pytest.skip("no Docker engine socket here")
    out = frozen_run(tmp_path, request_s=6, grace_s=3, timeout_s=2, freeze_after=0.5, wait_s=60)
    word, printed, seconds = out.split()
    assert (word, printed) == ("lost", LINE), out
    # ended by the watchdog at 2 + 3 = 5 s; the removal asked of the hung engine made it 5 + 6 = 11
    assert float(seconds) < 8, out


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the toolkit as a git checkout")
def test_the_archived_source_is_the_same_bytes_each_time(tmp_path: Path) -> None:
    """`git archive --format=tar.gz` gave the same bytes for one commit; the archive built in memory
    with _commit.py added dated that file by the clock and put the clock in its gzip header: exporting
    a run again (into the same folder, as export-run allows) rewrote toolkit-src.tar.gz with other
    bytes each time, a new 700 KB binary in the customer's repository for the same source."""
    import hashlib
    import time

    from toolkit.publish import run_folder

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    sums = []
    for n in (1, 2):
        out = tmp_path / f"e{n}"
        out.mkdir()
        assert run_folder._toolkit_source(head.stdout.strip(), out) == run_folder.TOOLKIT_SOURCE
        sums.append(hashlib.sha256((out / run_folder.TOOLKIT_SOURCE).read_bytes()).hexdigest())
        time.sleep(1.1)  # the clock's second moves on
    assert sums[0] == sums[1]


@pytest.mark.skipif(not shutil.which("podman"), reason="needs podman on PATH")
def test_a_podman_service_that_takes_the_connection_and_never_answers_is_asked_once_and_named(
    project, tmp_path: Path
) -> None:
    """Round 33 made a hung Docker engine asked once a process and named as hung; the Podman client
    kept its old path: each engine call waited out REQUEST_TIMEOUT_S again (bench 3 times: 360 s at
    the real 120 s), and the error said to start a service that was running ("start it ... with
    `podman system service`"). A real socket that takes connections and never answers: not a mock."""
    from tests.support.sockets import SHORT as _SHORT
    from tests.support.sockets import Hung as _Hung

    hung = _Hung(tmp_path / "hung.sock")
    try:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "CONTAINER_HOST": f"unix://{hung.path}",
            "TOOLKIT_ENGINE": "podman",
        }
        done = subprocess.run(
            [sys.executable, "-c", _SHORT, "bench", "-i", "cpu"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        hung.close()
    assert done.returncode == 5, done.stderr
    assert "did not answer in 2 s" in done.stderr and "start it (" not in done.stderr, done.stderr


def test_a_stored_value_with_a_line_break_forges_no_warning_line(tmp_path: Path) -> None:
    """A stored record's `backends` edited to `CPU\\nerror: forged` is refused (its raw row says CPU), and
    the reason quotes the value as it stands: the warning printed a second line, `error: forged ...`
    (round 33 escaped file names in warnings; the reason after them was left). Every reason the reader
    gives is now one line, escaped as a path is (`\\n`)."""
    from tests.support.runs import bench_records
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    recs = bench_records("20261128T195135Z-e6f7c7")
    store.add_result(recs[0].model_copy(update={"backends": "CPU\nerror: forged"}))
    for r in recs[1:]:
        store.add_result(r)
    got = tk(tmp_path, "report", "--results", str(store.root), timeout=120)
    assert "contradicts itself: backends CPU\\nerror: forged" in got.stderr, got.stderr
    assert not [line for line in got.stderr.splitlines() if line.startswith("error: forged")], got.stderr


def test_a_model_size_that_is_no_size_reads_as_not_recorded(tmp_path: Path) -> None:
    """A stored record's model size of -5 (a hand edit; an import that knows none writes 0) was printed
    into the export README as "-5 bytes"; a size that is none reads "size not recorded"."""
    from tests.support.runs import bench_records
    from toolkit.publish import run_folder
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-z"):
        store.add_result(r.model_copy(update={"model": r.model.model_copy(update={"size_bytes": -5})}))
    run_folder.export_run(store, "run-z", tmp_path / "out")
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "-5 bytes" not in readme and "size not recorded" in readme, readme


def test_an_export_folder_named_with_a_newline_is_said_on_one_line(tmp_path: Path) -> None:
    """`toolkit report` run inside an export whose folder name holds a newline: the refusal printed the
    path raw, two lines (the second could pass for a line of its own); now escaped, one line."""
    from tests.support.runs import bench_records
    from toolkit.core.errors import BadInput
    from toolkit.publish import run_folder
    from toolkit.results import need_records_beside
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-n"):
        store.add_result(r)
    out = tmp_path / "exp\nerror: forged"
    run_folder.export_run(store, "run-n", out)
    with pytest.raises(BadInput) as err:
        need_records_beside(out / "results")
    assert "\n" not in str(err.value) and "exp\\nerror: forged" in str(err.value), str(err.value)
