"""What a customer installs from an exported run's README: the toolkit that measured it.

The README's install line was `pip install -e /path/to/toolkit`: a path on the exporter's host, and the
toolkit is not on PyPI (`pip install toolkit` installs another project). Now export-run writes the
toolkit's own source at the commit the run's records name (host.toolkit.commit), `toolkit-src.tar.gz`,
and the README says `pip install ./toolkit-src.tar.gz`; where the checkout lacks that commit (the run was
measured elsewhere) no archive is written and the README names the version and commit instead. The
archive is installed here by pip for real, as a customer's host does (its build backend, setuptools,
from the package index: the `contract` level, which reaches PyPI)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.runs import bench_records
from toolkit.publish import run_folder
from toolkit.results.records import ResultStore

pytestmark = pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the toolkit as a git checkout")


def _head() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


def _export(tmp_path: Path, commit: str) -> tuple[Path, str]:
    return _export_to(tmp_path, commit, tmp_path / "out")


def _export_to(tmp_path: Path, commit: str, out: Path) -> tuple[Path, str]:
    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-s"):
        store.add_result(
            r.model_copy(update={"host": {**r.host, "toolkit": {"version": "0.1.0", "commit": commit}}})
        )
    run_folder.export_run(store, "run-s", out)
    return out, (out / "README.md").read_text()


@pytest.mark.contract
def test_an_export_holds_the_source_of_the_toolkit_that_measured_it_and_pip_installs_it(
    tmp_path: Path,
) -> None:
    head = _head()
    out, readme = _export(tmp_path, head)
    src = out / run_folder.TOOLKIT_SOURCE
    assert src.is_file(), sorted(p.name for p in out.iterdir())
    assert (
        f"pip install ./{run_folder.TOOLKIT_SOURCE}   # the toolkit at commit {head[:12]}, the one that measured"
        in readme
    ), readme
    assert "/path/to/toolkit" not in readme and f"`{run_folder.TOOLKIT_SOURCE}`" in readme, readme
    with tarfile.open(src) as tar:
        names = tar.getnames()
    top = f"toolkit-{head[:12]}"
    assert {f"{top}/pyproject.toml", f"{top}/README.md", f"{top}/toolkit/cli/main.py"} <= set(names), names[
        :10
    ]
    assert not any(n.startswith(f"{top}/tests") for n in names), "only what pip needs to install it"
    target = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps"] + ["--target", str(target), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    assert (target / "toolkit" / "cli" / "main.py").is_file()


def test_a_run_measured_at_a_commit_this_checkout_lacks_names_it_instead(tmp_path: Path) -> None:
    out, readme = _export(tmp_path, "0123456789abcdef0123456789abcdef01234567")
    assert not (out / run_folder.TOOLKIT_SOURCE).exists()
    assert "pip install -e /path/to/toolkit   # the toolkit at commit 0123456789ab (the one" in readme, readme
    out, readme = _export(tmp_path / "b", "")  # an installed copy measured it: no commit recorded
    assert not (out / run_folder.TOOLKIT_SOURCE).exists() and "# the toolkit, on a host" in readme, readme


def test_a_relative_out_folder_gets_the_source_and_nothing_lands_in_the_toolkit_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`toolkit export-run RUN -o out` from a project folder that is not the toolkit's checkout: git ran
    with -C TOOLKIT_ROOT and `--output=out/.toolkit-src.tar.gz.tmp`, which git reads from TOOLKIT_ROOT, so
    the archive was not written (the README fell back to /path/to/toolkit) or, where TOOLKIT_ROOT held a
    folder of that name, written into the toolkit's checkout and the export failed half-written."""
    head = _head()
    monkeypatch.chdir(tmp_path)
    stray = ROOT / "out-brk34-relative"
    stray.mkdir()
    try:
        _, readme = _export_to(tmp_path, head, Path("out-brk34-relative"))
        assert not list(stray.iterdir()), "written into the toolkit's checkout"
    finally:
        for p in stray.iterdir():
            p.unlink()
        stray.rmdir()
    assert (tmp_path / "out-brk34-relative" / run_folder.TOOLKIT_SOURCE).is_file()
    assert f"pip install ./{run_folder.TOOLKIT_SOURCE}" in readme, readme


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_link_or_fifo_left_at_the_archive_s_temporary_name_is_not_written_through(
    tmp_path: Path, kind: str
) -> None:
    """Re-export into an earlier export whose `.toolkit-src.tar.gz.tmp` is a link to README.md (inside
    the folder: symlinks_inside lets it pass) or a FIFO: git wrote through the link and the link itself was
    renamed to toolkit-src.tar.gz (the shipped 'archive' was the README), or waited 60 s on the FIFO and
    shipped no source."""
    head = _head()
    out, _ = _export(tmp_path, head)
    tmp = out / f".{run_folder.TOOLKIT_SOURCE}.tmp"
    if kind == "link":
        tmp.symlink_to("README.md")
    else:
        os.mkfifo(tmp)
    store = ResultStore(tmp_path / "results")
    run_folder.export_run(store, "run-s", out)
    src = out / run_folder.TOOLKIT_SOURCE
    assert not src.is_symlink() and src.is_file() and tarfile.is_tarfile(src), kind
    assert (out / "README.md").read_text().startswith("# toolkit run run-s"), kind
    assert not tmp.exists() and not tmp.is_symlink()
