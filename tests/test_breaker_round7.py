"""A tester's seventh round: symbolic links where the toolkit copies or writes files of its own. Each
test is the reproducer of one finding and fails on the code before its fix."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.project import DATA
from tests.support.runs import tk
from toolkit.bench import canary, guard
from toolkit.bench.runners import llama_bench
from toolkit.core.errors import BadInput
from toolkit.results.records import ResultStore, append_jsonl, short_digest

ROOT = Path(__file__).resolve().parent.parent
ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"
RUN = "20261129T170627Z-6891c7"  # the run of results-cpu-a.jsonl
DIGEST12 = "a504e0178239"


def _project(tmp_path: Path) -> Path:
    """A project folder: the repository's matrix.yaml and Dockerfile.templates/, one stored run."""
    p = tmp_path / "p"
    (p / "results" / DIGEST12).mkdir(parents=True)
    shutil.copy(ROOT / "matrix.yaml", p)
    shutil.copytree(ROOT / "Dockerfile.templates", p / "Dockerfile.templates")
    shutil.copy(DATA / "results-cpu-a.jsonl", p / "results" / DIGEST12 / "bench.jsonl")
    return p


def _export(p: Path, out: Path) -> subprocess.CompletedProcess:
    return tk(p, "export-run", "--matrix", str(p / "matrix.yaml"), RUN, "-o", str(out))


@pytest.mark.parametrize(
    "name, target",
    [("leak.j2", "/etc/passwd"), ("sshdir", "/etc"), ("gone.j2", "/nonexistent/x")],
)
def test_export_run_refuses_a_symlink_in_the_templates_before_writing(tmp_path: Path, name, target) -> None:
    """export-run copied what a link in Dockerfile.templates/ points to (/etc/passwd, a whole folder)
    into the folder meant for publishing, exit 0; a dangling link died with exit 8 after half the
    folder was written. Now: exit 4 naming the link, and no folder written."""
    p = _project(tmp_path)
    os.symlink(target, p / "Dockerfile.templates" / name)
    r = _export(p, tmp_path / "out")
    assert r.returncode == 4, r.stdout + r.stderr
    assert f"Dockerfile.templates/{name} is a symbolic link" in r.stderr and "replace it" in r.stderr
    assert not (tmp_path / "out").exists()


def test_export_run_copies_regular_templates_byte_for_byte(tmp_path: Path) -> None:
    """Without links the templates are copied as before (bytes and mode): the refusal is not of all."""
    p = _project(tmp_path)
    r = _export(p, tmp_path / "out")
    assert r.returncode == 0, r.stdout + r.stderr
    for f in (p / "Dockerfile.templates").rglob("*"):
        copy = tmp_path / "out" / f.relative_to(p)
        assert copy.is_dir() if f.is_dir() else copy.read_bytes() == f.read_bytes()
        if (
            f.is_file()
        ):  # a file's mode travels; a folder is made by the export (a umask-002 clone's 775 is its own)
            assert copy.stat().st_mode == f.stat().st_mode


def test_import_never_writes_through_a_linked_seq_file(tmp_path: Path) -> None:
    """results/.seq linked to a file elsewhere: import overwrote that file with the counter."""
    (tmp_path / "r").mkdir()
    precious = tmp_path / "p.txt"
    precious.write_text("precious\n")
    os.symlink(precious, tmp_path / "r" / ".seq")
    r = tk(tmp_path, "import", "--results", "r", "--label", "x", str(ROWS))
    assert r.returncode == 4, r.stdout + r.stderr
    assert ".seq is a symbolic link" in r.stderr
    assert precious.read_text() == "precious\n"


def test_import_never_appends_through_a_linked_bench_file(tmp_path: Path) -> None:
    """results/<digest12>/bench.jsonl linked to a file elsewhere: import appended its records there."""
    r = tk(tmp_path, "import", "--results", "first", "--label", "x", str(ROWS))
    assert r.returncode == 0, r.stdout + r.stderr
    (digest12,) = [d.name for d in (tmp_path / "first").iterdir() if not d.name.startswith(".")]
    precious = tmp_path / "p.txt"
    precious.write_text("precious\n")
    (tmp_path / "r" / digest12).mkdir(parents=True)
    os.symlink(precious, tmp_path / "r" / digest12 / "bench.jsonl")
    r = tk(tmp_path, "import", "--results", "r", "--label", "x", str(ROWS))
    assert r.returncode == 4, r.stdout + r.stderr
    assert f"{digest12}/bench.jsonl is a symbolic link" in r.stderr
    assert precious.read_text() == "precious\n"


def _link_to_precious(tmp_path: Path, link: Path) -> Path:
    precious = tmp_path / "precious.txt"
    precious.write_text("precious\n")
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(precious, link)
    return precious


def test_the_canary_and_builds_files_are_never_appended_through_a_link(tmp_path: Path) -> None:
    """canary.save opened results/<digest12>/canary.jsonl with open("a"), following a link."""
    store = ResultStore(tmp_path / "r")
    res = canary.CanaryResult(
        image="cpu",
        model="m",
        digest="sha256:" + "ab" * 32,
        backend="cpu",
        model_sha256="0" * 64,
        status="ok",
    )
    precious = _link_to_precious(tmp_path, store.root / short_digest(res.digest) / "canary.jsonl")
    with pytest.raises(BadInput, match="canary.jsonl is a symbolic link"):
        canary.save(store, res)
    os.symlink(precious, store.builds_file)
    with pytest.raises(BadInput, match="builds.jsonl is a symbolic link"):
        append_jsonl(store.builds_file, {"a": 1})
    assert precious.read_text() == "precious\n"


def test_the_results_lock_and_probe_are_never_written_through_a_link(tmp_path: Path) -> None:
    """results/.lock (truncated, then the holder written into it) and the writability probe
    (truncated, 4 KiB written) followed a link planted under their names."""
    root = tmp_path / "r"
    precious = _link_to_precious(tmp_path, root / guard.RESULTS_LOCK)
    lock = guard.ResultsLock(root, "run-a", "engine")
    with pytest.raises(BadInput, match=r"\.lock is a symbolic link"):
        lock.start(allow_concurrent=False, note=lambda _: None)
    os.unlink(root / guard.RESULTS_LOCK)
    os.symlink(precious, root / f".write-test-{os.getpid()}")
    with pytest.raises(BadInput, match="write-test"):
        guard.check_writable(root)
    log = root / "logs" / "x.log"
    log.parent.mkdir()
    os.symlink(precious, log)
    assert "is a symbolic link" in (llama_bench.write_log_file(log, "log text", root) or "")
    assert precious.read_text() == "precious\n"
