"""A run measured by a checkout with uncommitted changes (tenth session's leftover): records named only
the commit, so the export shipped that commit's source as what measured, and the report, the README and
`--version` said a commit whose code was not the code that ran. The checkout's state is recorded
(host.toolkit "dirty": "true", `git status` of pyproject.toml and toolkit/) and said as `<commit>-dirty`
(git describe's word) wherever the commit is named; the export says its source lacks the changes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.checkout import committed_clone
from tests.support.project import cpu_project
from tests.support.records import make_record
from tests.support.runs import bench_records, tk
from toolkit.analysis import provenance
from toolkit.host import info
from toolkit.host.info import commit_words
from toolkit.results.records import ResultStore

ROOT = Path(__file__).resolve().parents[1]
RUN = "20261128T195135Z-e6f7c7"  # a stored run of tests/data (as tests/test_newcomer_round35.py)


@pytest.fixture
def clone(tmp_path: Path) -> tuple[Path, str]:
    """tests.support.checkout.committed_clone: (its folder, its commit)."""
    return committed_clone(tmp_path / "clone")


def _version(checkout: Path) -> str:
    got = tk(checkout, "--version", env={"PYTHONPATH": str(checkout)})
    assert got.returncode == 0, got.stderr
    return got.stdout


def test_version_says_dirty_for_changes_and_new_files_in_the_toolkit_not_elsewhere(clone) -> None:
    checkout, head = clone
    assert f"(commit {head[:12]})" in _version(checkout)
    (checkout / "docs" / "notes.md").write_text("a note outside the toolkit's source\n")
    assert f"(commit {head[:12]})" in _version(checkout), "a change outside toolkit/ is no change of code"
    (checkout / "toolkit" / "extra.py").write_text("X = 1\n")  # untracked, inside the package
    assert f"(commit {head[:12]}-dirty)" in _version(checkout)
    (checkout / "toolkit" / "extra.py").unlink()
    with (checkout / "toolkit" / "__init__.py").open("a") as fh:
        fh.write("# edited\n")
    assert f"(commit {head[:12]}-dirty)" in _version(checkout)


def test_toolkit_source_records_dirty_only_from_a_modified_checkout(clone, monkeypatch) -> None:
    checkout, head = clone
    monkeypatch.setattr(info, "TOOLKIT_ROOT", checkout)
    assert info.toolkit_source() == {"version": info.__version__, "commit": head}
    (checkout / "pyproject.toml").write_text((checkout / "pyproject.toml").read_text() + "\n")
    assert info.toolkit_source() == {"version": info.__version__, "commit": head, "dirty": "true"}


def test_commit_words_reads_only_a_recorded_hex_commit_and_the_exact_dirty_value() -> None:
    c = "0123456789abcdef0123456789abcdef01234567"
    assert commit_words({"commit": c}) == "0123456789ab"
    assert commit_words({"commit": c, "dirty": "true"}) == "0123456789ab-dirty"
    assert (
        commit_words({"commit": c, "dirty": True}) == "0123456789ab-dirty"
    )  # JSON true reads alike (breaker 37)
    assert commit_words({"commit": "\x1b]0;x\x07" + "a" * 36}) is None
    assert commit_words({"commit": c.upper()}) is None and commit_words("x") is None


def test_the_report_names_a_dirty_measuring_commit() -> None:
    c = "0123456789abcdef0123456789abcdef01234567"
    r = make_record(
        "cpu",
        "cpu",
        p=512,
        avg=100.0,
        sd=1.0,
        host={"toolkit": {"version": "0.1.0", "commit": c, "dirty": "true"}},
    )
    r.image.labels = {"org.toolkit.version": "0.1.0"}
    (line,) = provenance.provenance([r]).images
    assert "toolkit 0.1.0 (commit 0123456789ab-dirty)" in line, line


def test_an_export_of_a_dirty_run_says_its_source_lacks_the_changes(
    tmp_path: Path, matrix_data: dict
) -> None:
    """The records name this checkout's HEAD (so the source is archived) with dirty set: the export
    ships the commit's source and says, in export-run's output and the README, that it lacks them."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout: no source to archive")
    matrix = cpu_project(tmp_path / "project", matrix_data)
    store = ResultStore(matrix.parent / "results")
    for r in bench_records(RUN):
        r.host = {
            **(r.host or {}),
            "toolkit": {"version": "0.1.0", "commit": head.stdout.strip(), "dirty": "true"},
        }
        store.add_result(r)
    got = tk(matrix.parent, "export-run", RUN, "-o", str(tmp_path / "out"))
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "out" / "toolkit-src.tar.gz").is_file()
    readme = " ".join((tmp_path / "out" / "README.md").read_text().split())
    said = " ".join((got.stdout + got.stderr).split())
    for text in (readme, said):
        assert "uncommitted changes" in text and "without them" in text, text
    assert f"commit {head.stdout.strip()[:12]}-dirty" in readme, readme
