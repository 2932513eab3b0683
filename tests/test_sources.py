"""Fetching a source from PyPI (toolkit/sources.py _fetch_pypi): the sdist of that package only."""

from __future__ import annotations

import pytest

from toolkit import sources
from toolkit.matrix import SourceSpec


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
