"""Fetching a source from PyPI (toolkit/images/sources.py _fetch_pypi): the sdist of that package only;
unpacking archives safely on every Python the project supports."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.runs import _tar
from toolkit.images import sources
from toolkit.matrix.api import SourceSpec


@pytest.mark.parametrize("req, name", [("llama-cpp-python==0.3.36", "llama-cpp-python"), ("foo==1", "foo")])
def test_pypi_source_forces_source_only_for_its_own_package(monkeypatch, tmp_path, req, name):
    """`--no-binary :all:` made pip build the sdist's build backend (scikit-build-core, setuptools, ...)
    from source as well: 29 s here, over 8 minutes on a fresh Debian 12 host. Only the named package
    must be an sdist. pip itself is replaced by a recorder here: the fast level has no network (the
    real download runs in the e2e CPU build)."""
    seen: list[list[str]] = []

    def fake_run(cmd, *, cwd=None, timeout=900):
        seen.append(cmd)
        (tmp_path / "pypi-x").mkdir(exist_ok=True)
        return ""

    monkeypatch.setattr(sources, "_run", fake_run)
    monkeypatch.setattr(sources, "_key", lambda *parts: "x")
    monkeypatch.setattr(sources, "_archive_tree", lambda archive, spec, cache: archive)
    (tmp_path / "pypi-x").mkdir()
    (tmp_path / "pypi-x" / "pkg-1.tar.gz").write_bytes(b"")  # as if downloaded before: then pip is not run
    spec = SourceSpec(pypi=req, commit="c" * 40)
    assert sources._fetch_pypi(spec, tmp_path).name == "pkg-1.tar.gz" and seen == []
    (tmp_path / "pypi-x" / "pkg-1.tar.gz").unlink()
    with pytest.raises(RuntimeError, match="produced no sdist"):
        sources._fetch_pypi(spec, tmp_path)
    cmd = seen[0]
    assert cmd[cmd.index("--no-binary") + 1] == name and ":all:" not in cmd and cmd[-1] == req


@pytest.mark.parametrize("native", [True, False], ids=["python-data-filter", "by-hand (python < 3.11.4)"])
@pytest.mark.parametrize(
    "members",
    [
        [("../evil", "file", "")],
        [("/abs/evil", "file", "")],
        [("a/link", "sym", "../../etc/passwd")],
        [("a/hard", "lnk", "../outside")],
        [("a/fifo", "fifo", "")],
        [("d", "sym", "."), ("d/e", "sym", ".."), ("d/e/evil", "file", "")],
    ],
    ids=["dotdot", "absolute", "symlink-out", "hardlink-out", "fifo", "symlink-chain"],
)
def test_archive_members_that_leave_the_folder_are_refused(tmp_path, native, members):
    """Debian 12's python3 (3.11.2) has no tarfile `filter=`: the first table on a fresh Debian 12 host
    failed there with a TypeError. Both paths refuse the same members."""
    import tarfile

    if native and not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tarfile data filter")
    arc = _tar(tmp_path / "a.tar.gz", [("a/ok.txt", "file", "")] + members)
    dest = tmp_path / "out"
    dest.mkdir()
    absolute = members[0][0].startswith("/")
    with tarfile.open(arc) as tf:
        try:
            sources.extract_tar(tf, dest, native=native)
            refused = False
        except (ValueError, tarfile.TarError):
            refused = True
    # Python's filter strips the leading / (the member lands inside); everything else is refused
    assert refused or (absolute and native and (dest / "abs/evil").is_file()), members
    assert not (tmp_path / "evil").exists() and not Path("/abs/evil").exists()


@pytest.mark.parametrize("native", [True, False], ids=["python-data-filter", "by-hand (python < 3.11.4)"])
def test_a_plain_archive_extracts_the_same_both_ways(tmp_path, native):
    import tarfile

    if native and not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tarfile data filter")
    arc = _tar(tmp_path / "a.tar.gz", [("pkg/src/x.c", "file", ""), ("pkg/link", "sym", "src/x.c")])
    dest = tmp_path / "out"
    dest.mkdir()
    with tarfile.open(arc) as tf:
        sources.extract_tar(tf, dest, native=native)
    assert (dest / "pkg/src/x.c").read_bytes() == b"x" and (dest / "pkg/link").resolve() == (
        dest / "pkg/src/x.c"
    ).resolve()
