"""What a newcomer meets on a fresh host (a Debian 13 stand-in, root, rootful Podman 5: the README's
Podman line, then export-run, the export's own install line and reproduce, report, compare): each
message says its point once, right, with the way out.

- `toolkit compare 20261205T195135Z 20261205T195305Z` (the run ids bench printed, without their tails,
  as export-run, reproduce and report --run now take them) was "no results match": compare takes a
  run id's start where it names one stored run, and names the runs where it begins several
  (compare._pick, _resolve; index.run_begun);
- `toolkit export-run 20261205T1951 -o DIR` said "run 20261205T1951: 10 results ...": the run it
  exported is named by its full id;
- a customer in the folder export-run wrote (`cd EXPORT && toolkit report`, `toolkit compare A B`,
  `toolkit export-run RUN`) was told "no results yet: run `toolkit bench`" or "no ok result is stored
  under EXPORT/results": the folder's own records are named, with `--results .` (results.export_beside);
  the export's README says how to print its tables again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.records import resolve_whole
from tests.support.runs import bench_records, tk

RUNS = ("20261128T195135Z-e6f7c7", "20261128T195305Z-4ad4d9", "20261128T195305Z-4ad4da")


def _store(tmp_path: Path):
    """A project-less results folder at tmp/results holding the three RUNS (the CPU smoke sweep each)."""
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for run in RUNS:
        for r in bench_records(run):
            store.add_result(r)
    return store


def test_compare_takes_a_run_id_by_its_start(tmp_path: Path) -> None:
    """`compare 20261205T195135Z 20261205T1953...` named no side (exit 4, 'no results match'), though
    the other commands that take a run id take its start. Now a start naming one run is that run (its
    full id in the table's label), one naming several is refused naming them, newest first; the
    reference (resolve_whole, no index) agrees."""
    from toolkit.core.errors import BadInput

    store = _store(tmp_path)
    got = tk(
        tmp_path, "compare", "--results", "results", "20261128T195135Z", "20261128T195305Z-4ad4d9",
        "--format", "github",
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert "run 20261128T195135Z-e6f7c7" in got.stdout, got.stdout
    got = tk(tmp_path, "compare", "--results", "results", "20261128T195135Z", "20261128T1953")
    assert got.returncode == 4, got.stdout
    assert "begins 2 stored runs: 20261128T195305Z-4ad4da, 20261128T195305Z-4ad4d9" in got.stderr, got.stderr
    assert resolve_whole(store, "20261128T1951").label == "run 20261128T195135Z-e6f7c7"
    with pytest.raises(BadInput, match="begins 2 stored runs"):
        resolve_whole(store, "20261128T1953")
    with pytest.raises(BadInput, match="no results match '2026120'"):  # too short to be a run's start
        resolve_whole(store, "2026120")


def test_export_run_names_the_run_it_exported_by_its_full_id(tmp_path: Path, matrix_data: dict) -> None:
    """export-run given a run's start said `run 20261205T1951: ...`: the id typed, not the run's."""
    from tests.support.project import cpu_project

    matrix = cpu_project(tmp_path, matrix_data)
    _store(tmp_path)
    got = tk(tmp_path, "export-run", "--matrix", str(matrix), "20261128T1951", "-o", "out")
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith("run 20261128T195135Z-e6f7c7: 6 results"), got.stdout


def test_commands_in_an_export_folder_name_its_records(tmp_path: Path, matrix_data: dict) -> None:
    """In the folder export-run wrote (matrix.yaml, run.json, results.jsonl; no results/), `toolkit
    report` said "no results yet ... run `toolkit bench`", compare "no ok result is stored under
    EXPORT/results" and export-run "no results of run": each now says the folder is an exported run
    and to pass `--results .` (exit 4); the export's README says so too."""
    from tests.support.project import cpu_project
    from toolkit.matrix.api import load_matrix
    from toolkit.publish import run_folder
    from toolkit.results.records import ResultStore

    matrix = cpu_project(tmp_path / "project", matrix_data)
    store = ResultStore(matrix.parent / "results")
    for r in bench_records(RUNS[0]):
        store.add_result(r)
    out = tmp_path / "sent"
    run_folder.export_run(store, RUNS[0], out, load_matrix(matrix))
    assert "toolkit report --results ." in (out / "README.md").read_text()
    for args in (
        ("report",),
        ("compare", RUNS[0], "cpu"),
        ("export-run", RUNS[0], "-o", str(tmp_path / "again")),
    ):
        got = tk(out, *args)
        assert got.returncode == 4, (args, got.stdout, got.stderr)
        assert "is a run `toolkit export-run` wrote" in got.stderr and "--results ." in got.stderr, got.stderr
        assert "no results yet" not in got.stderr, got.stderr
    got = tk(out, "report", "--results", ".", "--format", "github")
    assert got.returncode == 0 and RUNS[0] in got.stdout, got.stderr


def test_compare_against_an_export_of_the_same_run_says_so(tmp_path: Path) -> None:
    """`compare cpu cpu --against EXPORT` (EXPORT: export-run of the run `cpu` names here) said "name two
    runs, e.g. `toolkit compare RUN_A RUN_B`", as if --against were not there: B from that folder is
    a copy of A's run, so A is to be another run of this folder (which it lists)."""
    from toolkit.publish import run_folder

    store = _store(tmp_path)
    run_folder.export_run(store, RUNS[2], tmp_path / "sent", None)
    got = tk(tmp_path, "compare", "--results", "results", "cpu", RUNS[2], "--against", "sent")
    assert got.returncode == 4, got.stdout
    assert "B, read from --against sent, is a copy of that run" in got.stderr, got.stderr
    assert "name another run as A" in got.stderr and RUNS[0] in got.stderr, got.stderr
    got = tk(tmp_path, "compare", "--results", "results", RUNS[0], RUNS[2], "--against", "sent")
    assert got.returncode == 0, got.stderr


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the toolkit as a git checkout")
def test_the_toolkit_installed_from_an_export_knows_its_commit(tmp_path: Path) -> None:
    """`pip install ./toolkit-src.tar.gz` (the export README's line) gave a toolkit that said "(not a
    git checkout: commit unknown)", and `toolkit reproduce .` recorded no commit: the reproduction could
    not say it ran the toolkit that measured the run. The archive now carries the commit it was
    archived at (toolkit/host/_commit.py), which such a copy reports. The archive holds HEAD's code
    (this change once committed), so the copy run here is this tree's toolkit/ plus the archive's
    _commit.py, as pip lays it out: no .git beside it."""
    import os
    import shutil
    import subprocess
    import sys
    import tarfile

    from toolkit.publish import run_folder
    from toolkit.results.records import ResultStore

    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    store = ResultStore(tmp_path / "results")
    for r in bench_records(RUNS[0]):
        store.add_result(
            r.model_copy(update={"host": {**r.host, "toolkit": {"version": "0.1.0", "commit": head}}})
        )
    run_folder.export_run(store, RUNS[0], tmp_path / "sent", None)
    # the one file read from the archive (extractall's filter= is Python 3.11.4+: Debian 12 has 3.11.2)
    with tarfile.open(tmp_path / "sent" / run_folder.TOOLKIT_SOURCE) as tar:
        member = tar.extractfile(f"toolkit-{head[:12]}/toolkit/host/_commit.py")
        assert member is not None
        archived = member.read().decode()
    site = tmp_path / "site"
    shutil.copytree(ROOT / "toolkit", site / "toolkit", ignore=shutil.ignore_patterns("__pycache__"))
    assert f'COMMIT = "{head}"' in archived
    (site / "toolkit" / "host" / "_commit.py").write_text(archived)
    assert not (site / ".git").exists()
    env = {**os.environ, "PYTHONPATH": str(site)}
    got = subprocess.run(
        [sys.executable, "-m", "toolkit", "--version"], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert got.returncode == 0 and f"(commit {head[:12]})" in got.stdout, got.stdout + got.stderr


def test_the_hidden_run_note_names_the_folder_the_report_read(tmp_path: Path) -> None:
    """`toolkit report --results reproduce/results` (the folder reproduce wrote) noted "`toolkit report
    --run RUN` shows it": typed as written, that read results/ of the project (in an export's folder:
    none) and not the run. The command the note gives now names the folder; without --results, none."""
    from tests.support.records import CPU_A, load
    from tests.support.telemetry_fakes import supporting_block
    from toolkit.results.records import BenchRecord, ResultStore

    store, recs = ResultStore(tmp_path / "reproduce" / "results"), load(CPU_A)  # a clean run, then a
    clean_run = recs[0].run_id  # re-run of its tests flagged host-busy (newer: shown, hiding the clean one)
    for r in recs:
        store.add_result(r)
    for r in recs:
        busy = {"flags": ["host-busy"], "telemetry": r.telemetry or supporting_block(["host-busy"])}
        busy |= {"run_id": "run-busy", "created": "2026-11-30T00:00:00+00:00"}
        store.add_result(BenchRecord.model_validate({**r.model_dump(), **busy}))
    got = tk(tmp_path, "report", "--results", "reproduce/results", "--format", "github")
    assert got.returncode == 0, got.stderr
    said = f"`toolkit report --results reproduce/results --format github --run {clean_run}` shows it"
    assert said in got.stderr, got.stderr
    wanted = tk(tmp_path, "report", "--results", "reproduce/results", "--run", clean_run, "--format", "csv")
    assert wanted.returncode == 0 and clean_run in wanted.stdout, wanted.stderr


def test_the_export_readme_installs_into_a_venv(tmp_path: Path) -> None:
    """The export README's `pip install ./toolkit-src.tar.gz`, typed on a fresh Debian 13 (root or not),
    was refused by pip: "externally-managed-environment" (PEP 668). Its block now makes and activates a
    venv first (outside the folder: `toolkit reproduce .` refuses a folder whose links point out of it,
    as a venv's python does), then installs into it: lines a shell runs as written (proven on the
    stand-in, root, Debian 13)."""
    from toolkit.publish import run_folder

    store = _store(tmp_path)
    run_folder.export_run(store, RUNS[0], tmp_path / "sent", None)
    readme = (tmp_path / "sent" / "README.md").read_text()
    block = readme.split("## Reproduce", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    venv = "~/.venvs/toolkit-0.1.0"  # no commit recorded: the version names it
    assert block[0].startswith(f"python3 -m venv {venv} && . {venv}/bin/activate   # "), block
    assert "outside this folder" in block[0], block  # reproduce refuses a venv's links out of the folder
    assert block[1].startswith("pip install "), block


def test_rootful_podman_gets_its_firewall_tool_from_setup(tmp_path: Path) -> None:
    """`setup-host.sh --podman` as root on Debian 13 installs podman with --no-install-recommends, which
    leaves out nftables (a Recommends of netavark 1.14): `toolkit reproduce . --rebuild` (a build step in
    a network namespace of its own: rootful, a netavark bridge) then failed "netavark: nftables error:
    unable to execute nft: No such file or directory" (the stand-in, after every README step exit 0).
    The function naming the package is run with a PATH without nft/iptables and with them (stub
    commands); the script installs what it prints. Podman 4 (Debian 12's netavark 1.4) uses iptables."""
    import re
    import subprocess

    setup = (ROOT / "scripts" / "setup-host.sh").read_text()
    func = re.search(r"^rootful_net_packages\(\) \{.*?^\}$", setup, re.S | re.M)
    assert func, "setup-host.sh has no rootful_net_packages"
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("nft", "iptables"):
        (tools / name).write_text("#!/bin/sh\n")
        (tools / name).chmod(0o755)

    def packages(major: str, path: str) -> str:
        script = f"{func.group(0)}\nrootful_net_packages {major}"
        # without the function's own /usr/sbin and /sbin: this machine's nft or iptables would answer
        out = subprocess.run(
            ["/bin/bash", "-c", script.replace(":/usr/sbin:/sbin", "")],
            env={"PATH": path},
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    empty = str(tmp_path / "none")
    assert packages("5", empty) == "nftables"
    assert packages("4", empty) == "iptables"
    assert packages("5", str(tools)) == "" and packages("4", str(tools)) == ""
    assert 'firewall=$(rootful_net_packages "$podman_major")' in setup and 'apt_install "$firewall"' in setup
    assert 'PATH="$PATH:/usr/sbin:/sbin" command -v nft' in func.group(
        0
    )  # a sudo user's PATH lacks /usr/sbin
