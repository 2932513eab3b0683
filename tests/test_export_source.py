"""What a customer installs from an exported run's README: the toolkit that measured it.

The README's install line was `pip install -e /path/to/toolkit`: a path on the exporter's host, and the
toolkit is not on PyPI (`pip install toolkit` installs another project). Now export-run writes the
toolkit's own source at the commit the run's records name (host.toolkit.commit), `toolkit-src.tar.gz`,
and the README says `pip install ./toolkit-src.tar.gz`; where the checkout lacks that commit (the run was
measured elsewhere) no archive is written and the README names the version and commit instead. The
archive is installed here by pip for real, as a customer's host does (its build backend, setuptools,
from the package index: the `contract` level, which reaches PyPI)."""

from __future__ import annotations

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
    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-s"):
        store.add_result(
            r.model_copy(update={"host": {**r.host, "toolkit": {"version": "0.1.0", "commit": commit}}})
        )
    out = tmp_path / "out"
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
