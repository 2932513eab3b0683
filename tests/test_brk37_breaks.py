"""Breaker 37 (tenth session): what this session changed, broken from outside.

- a closed pipe (`toolkit report --json | head -c1`) ended the command with a silent exit 1 (Click's own
  EPIPE handler: "a bug" by docs/exit-codes.md, no word); `--help > /dev/full` said `(unknown path)`
  (Click prints its help through its own name for echo); with stderr refusing writes too (`2>&1 |
  head`, both on a full disk) the error line's own write failed: exit 1 or 120 instead of the code;
- a checkout whose `git status` fails (a corrupt index, a status past 5 s) was recorded clean, so
  `--version`, the report and the export named its commit as the code that ran; a record's
  host.toolkit.dirty of JSON true, "TRUE" or "1" (a hand's, another tool's) was read as clean; a
  checkout git refuses to read was called "not a git checkout".

Real processes on real pipes and files, real git checkouts (a clone of this one)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.checkout import committed_clone
from tests.support.records import make_record
from tests.support.runs import tk, toolkit_exit
from toolkit.host import info
from toolkit.host.info import commit_words
from toolkit.results.records import ResultStore

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    store = ResultStore(tmp_path / "results")
    store.add_result(make_record("cpu", "cpu", p=512, avg=100.0))
    store.add_result(make_record("cpu", "cpu", n=128, avg=10.0))
    return tmp_path / "results"


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("fmt", ["json", "github"])
def test_a_closed_pipe_is_exit_8_in_one_line_not_a_silent_exit_1(results, tmp_path, fmt, unbuffered):
    """Reproducer: `toolkit report --json | head -c1` exited 1 (most runs: the report outgrew what the
    pipe took before head closed it) and said nothing. The read end is closed before the command starts,
    so every write meets EPIPE."""
    r, w = os.pipe()
    os.close(r)
    err = tmp_path / "err"
    with err.open("w") as fh:
        code = toolkit_exit(
            ["report", "--results", str(results), "--format", fmt], w, fh.fileno(), unbuffered
        )
    os.close(w)
    said = err.read_text()
    assert code == 8, said
    assert said.startswith("error: standard output: Broken pipe") and len(said.strip().splitlines()) == 1, (
        said
    )


def test_help_to_a_full_disk_names_standard_output(tmp_path):
    """Reproducer: `toolkit --help > /dev/full` said `error: (unknown path): No space left on device`."""
    err = tmp_path / "err"
    with open("/dev/full", "w") as full, err.open("w") as fh:
        code = toolkit_exit(["report", "--help"], full.fileno(), fh.fileno(), False)
    assert code == 8 and err.read_text().startswith("error: standard output: No space left"), err.read_text()


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    "args,want",
    [(["--json"], 8), (["--json", "--no-such-option"], 4), (["--format", "github"], 8)],
    ids=["stdout-full", "usage-error", "text"],
)
def test_stdout_and_stderr_both_refusing_keep_the_commands_exit_code(results, args, want, unbuffered):
    """Reproducer: with stderr on the full disk too, the error line's own write failed: exit 1 (a bug's
    code, the traceback lost) or 120 (the interpreter's last flush) instead of 8 / 4."""
    with open("/dev/full", "w") as full:
        code = toolkit_exit(
            ["report", "--results", str(results), *args], full.fileno(), full.fileno(), unbuffered
        )
    assert code == want


def test_commit_words_reads_every_spelling_of_dirty_and_says_an_unknown_one():
    c = "0123456789abcdef0123456789abcdef01234567"
    for dirty in ("true", True, "TRUE", " True ", "1", 1, "yes"):
        assert commit_words({"commit": c, "dirty": dirty}) == "0123456789ab-dirty", dirty
    for clean in ("false", False, 0, "0", None, "", "maybe", ["true"]):
        assert commit_words({"commit": c, "dirty": clean}) == "0123456789ab", clean
    assert commit_words({"commit": c, "dirty": "unknown"}) == "0123456789ab-dirty?"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of this checkout holding this tree's toolkit/ (tests.support.checkout.committed_clone)."""
    return committed_clone(tmp_path / "clone")[0]


def test_a_checkout_whose_git_status_fails_is_never_recorded_clean(clone, monkeypatch):
    """Reproducer: a corrupt index (`git status` exit 128) was taken for a clean checkout: `--version`
    and every record named the commit alone, though its code could hold any change."""
    monkeypatch.setattr(info, "TOOLKIT_ROOT", clone)
    assert "dirty" not in info.toolkit_source()
    (clone / ".git" / "index").write_bytes(b"garbage")
    assert info.toolkit_source()["dirty"] == "unknown"
    got = tk(clone, "--version", env={"PYTHONPATH": str(clone)})
    assert got.returncode == 0 and "-dirty?)" in got.stdout, got.stdout + got.stderr


def test_a_checkout_git_cannot_read_is_not_called_no_checkout(clone):
    """Reproducer: a checkout git refuses (another user's: safe.directory; here a corrupt HEAD) said
    `(not a git checkout: commit unknown)`."""
    (clone / ".git" / "HEAD").write_text("garbage\n")
    got = tk(clone, "--version", env={"PYTHONPATH": str(clone)})
    assert got.returncode == 0 and "git could not read the checkout" in got.stdout, got.stdout
    assert "not a git checkout" not in got.stdout


def test_a_figure_a_hair_under_its_threshold_never_prints_equal_to_it():
    """Reproducer: decimals_apart stopped at 6 decimals, so a speedup 1e-9 under the 0.95 limit read
    `**0.950000** regression (< 0.950000)` and a margin of 3.0000001 % beside 3 % read `+3.000000 < 3.000000`."""
    from toolkit.analysis.verdict import decimals_apart

    for value, limit, decimals in ((0.95 - 1e-9, 0.95, 2), (3.0000001, 3.0, 1), (100.00000000001, 100.0, 0)):
        n = decimals_apart(value, limit, decimals)
        assert f"{value:.{n}f}" != f"{limit:.{n}f}", (value, limit, n)
    assert decimals_apart(0.9496, 0.95, 2) == 4 and decimals_apart(float("nan"), 0.95, 2) == 2


def test_reading_the_checkout_state_never_rewrites_its_index(clone, monkeypatch):
    """Reproducer: `git status` refreshed and rewrote .git/index (taking index.lock) whenever a tracked
    file's stat data had changed: `toolkit --version` and every bench wrote into the user's checkout, and
    a `git commit` there at that moment failed on the lock. `--no-optional-locks` reads only."""
    monkeypatch.setattr(info, "TOOLKIT_ROOT", clone)
    index = clone / ".git" / "index"
    source = clone / "toolkit" / "__init__.py"
    os.utime(source, (1_000_000_000, 1_000_000_000))  # the stat data the index holds no longer match
    before = index.stat()
    os.utime(index, (before.st_atime, before.st_mtime - 100))
    before = index.stat()
    assert "dirty" not in info.toolkit_source()
    after = index.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize("closed", ["pipe", "full"])
def test_measure_whose_stdout_refuses_writes_still_measures_the_command(tmp_path, closed):
    """Reproducer: `toolkit measure -o F -- CMD | head -c1` killed CMD at the first refused write and
    exited 1 with no word and no F (Click's EPIPE handler); `> /dev/full` killed it too, `(unknown
    path)`, exit 8. The passthrough stops, said once; CMD runs to its end, F is written, its code kept."""
    out = tmp_path / "m.jsonl"
    cmd = ["measure", "-o", str(out), "--", "sh", "-c", "seq 1 300000; echo done >&2; exit 3"]
    err = tmp_path / "err"
    if closed == "pipe":
        r, w = os.pipe()
        os.close(r)
        with err.open("w") as fh:
            code = toolkit_exit(cmd, w, fh.fileno(), False)
        os.close(w)
    else:
        with open("/dev/full", "w") as full, err.open("w") as fh:
            code = toolkit_exit(cmd, full.fileno(), fh.fileno(), False)
    said = err.read_text()
    assert code == 3 and out.is_file(), said
    assert "measure: standard output:" in said and "still measured" in said and "\ndone\n" in said, said
    assert "Traceback" not in said and "unknown path" not in said, said


def test_two_models_of_one_file_name_are_two_models_in_the_report(tmp_path):
    """Reproducer: two imports of `tiny-qwen3moe.gguf` (no sha256), one F16 (1.52 MiB) and one Q8_0
    (0.81 MiB), read as one model: the report's `model:` line named the F16 alone (its first record's
    words), and each table row held the F16's tok/s beside the Q8_0's as one test of one model."""
    from tests.support.project import DATA
    from tests.support.stored import import_rows, matrix_project

    rows = [json.loads(x) for x in (DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()]
    project = matrix_project(tmp_path / "p")
    import_rows(project, rows, "f16")
    import_rows(project, [dict(r, model_type="qwen3moe ?B Q8_0", model_size=848128) for r in rows], "q8")
    got = tk(project, "report", "--results", "r", "--format", "github")
    assert got.returncode == 0, got.stderr
    models = [x for x in got.stdout.splitlines() if x.startswith("- model:")]
    assert len(models) == 2 and any("1.52 MiB, qwen3moe F16" in m for m in models), models
    assert any("828.25 KiB, qwen3moe Q8_0" in m for m in models), models
    table = [x for x in got.stdout.splitlines() if x.startswith("| pp") or x.startswith("| tg")]
    assert table, got.stdout
    for line in table:  # each row holds one model's number: one of the two image cells is empty
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert "" in cells[2:4] and ("F16" in cells[1]) != ("Q8_0" in cells[1]), line
