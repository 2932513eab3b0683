"""A newcomer's mistakes on the command line (helper nc43's pass over the README): each is bad input
(exit 4) whose message says what to type instead. Real CLI (a subprocess of `python -m toolkit`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def toolkit(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolkit", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # the README writes `toolkit --engine podman build`; after the command Click said only
        # "No such option '--engine'." though the option exists one place over
        (
            ["build", "--engine", "podman", "--dry-run"],
            "--engine is an option of toolkit itself, not of build: "
            "put it before the command's name, as `toolkit --engine VALUE build ...`",
        ),
        (
            ["report", "--version"],
            "--version is an option of toolkit itself, not of report: put it before "
            "the command's name, as `toolkit --version`.",
        ),
        # a command's option before the command: named with the command typed
        (
            ["-i", "cpu", "bench"],
            "-i is an option of bench: put it after the command's name, as `toolkit bench -i ...`",
        ),
        (["--json", "doctor"], "--json is an option of doctor: put it after the command's name"),
        (["--all", "--dry-run"], "--all is an option of build: put it after the command's name"),
    ],
)
def test_an_option_on_the_wrong_side_of_the_command_says_where_it_goes(args, said):
    p = toolkit(*args)
    assert p.returncode == 4, (p.returncode, p.stderr[-400:])
    assert said in p.stderr, p.stderr
    assert "Did you mean" not in p.stderr  # Click's guess (`--version` for `--json`) is not the answer


def test_an_unknown_option_is_still_clicks_message_alone():
    p = toolkit("bench", "--nope")
    assert p.returncode == 4 and "No such option '--nope'." in p.stderr
    assert "an option of" not in p.stderr


def _two_runs(tmp_path: Path) -> Path:
    """A results folder with a bench-like run (20260630T120000Z-7a188c) and an import whose id holds the
    same date (import-20260630T153507Z-60eb91), as a newcomer's folder has after a bench and an import."""
    from tests.support.records import make_record
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    store.add_results([make_record("cpu", "cpu", p=512, avg=100.0, run_id="20260630T120000Z-7a188c")])
    store.add_results(
        [make_record("h200", "vulkan", p=512, avg=900.0, run_id="import-20260630T153507Z-60eb91")]
    )
    return tmp_path / "results"


@pytest.mark.parametrize(
    "args",
    [
        ["report", "--run", "2026063"],
        ["compare", "2026", "h200"],
        ["export-run", "2026063", "-o", "OUT"],
    ],
)
def test_a_run_start_too_short_names_the_run_it_begins(args, tmp_path):
    """`--run 2026063` (7 characters) begins one run, but a run is named by its start from 8 characters
    on: the error said `did you mean 'import-20260630T153507Z-60eb91'` (an id merely holding it) and
    never the run it begins."""
    res = _two_runs(tmp_path)
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    p = toolkit(*args, "--results", str(res))
    assert p.returncode == 4, (p.returncode, p.stderr[-400:])
    assert (
        "is too short to name a run by its start (8 characters at least): it begins 20260630T120000Z-7a188c"
        in (p.stderr)
    ), p.stderr
    assert "did you mean 'import-" not in p.stderr


@pytest.mark.parametrize("spelled", ["md", "markdown", "MD"])
def test_format_md_is_the_markdown_form(spelled, tmp_path):
    """`report --format md` (as an --output name ending in .md picks it) was refused: the choices
    listed text, github, csv, json, html, and nothing said that github is the markdown one."""
    res = _two_runs(tmp_path)
    md = toolkit("report", "--results", str(res), "--format", spelled)
    github = toolkit("report", "--results", str(res), "--format", "github")
    assert md.returncode == 0, md.stderr[-400:]
    assert md.stdout == github.stdout and md.stdout.startswith("# Benchmark report")
    p = toolkit("compare", "20260630T120000Z-7a188c", "cpu", "--results", str(res), "--format", spelled)
    assert "Invalid value for '--format'" not in p.stderr, p.stderr
