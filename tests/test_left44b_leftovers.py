"""Faults earlier helpers found and left, through the real command:

- every option naming a file or folder the command writes (`report -o`, `report --plots`, `measure -o`,
  `export-run -o`, `campaign render-k8s -o`) made any missing parent folders: a typo'd path silently
  became a tree of folders. Now a missing parent (or a file there) is bad input, exit 4, naming it and
  the fix, nothing written (cli.common.output_parent); the named folder itself may still be new.
- `compare --against DIR` wrote its query index (DIR/.index.sqlite) into a folder it was only asked to
  read: now that index lies in the toolkit's state folder, named by DIR's real path
  (results.index_trust.index_path, ResultStore(read_only=True)); DIR is left as it was, read-only too.
- `measure` waited in silence while its command was stopped (SIGSTOP): now it says so once a stop,
  with the pid and how to continue it (bench.measure._said_stopped).
- export-run's README escaped the toolkit's own code spans in its notes (`\\`toolkit import\\``): now they
  render as code while a name from the records stays escaped (publish.run_folder.md_prose).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.runs import _no_dac, tk
from tests.support.stored import H200, import_rows, matrix_project

ROOT = Path(__file__).resolve().parents[1]


def _project(tmp_path: Path) -> Path:
    """A project (the repository's matrix.yaml and templates) with the H200 rows imported into r/."""
    proj = matrix_project(tmp_path)
    shutil.copytree(ROOT / "Dockerfile.templates", proj / "Dockerfile.templates")
    import_rows(proj, H200 / "alone.jsonl", "bare")
    return proj


def _run_id(results: Path) -> str:
    return json.loads(next(results.glob("*/bench.jsonl")).read_text().splitlines()[0])["run_id"]


@pytest.mark.parametrize(
    "args",
    [
        ["report", "--results", "r", "-o", "typo/deep/report.md"],
        ["report", "--results", "r", "--plots", "typo/deep/plots"],
        ["measure", "--gpu", "none", "-o", "typo/m.jsonl", "--", "true"],
        ["export-run", "--results", "r", "RUN", "-o", "typo/pub"],
    ],
)
def test_a_named_output_in_a_missing_folder_is_bad_input_and_makes_no_folder(tmp_path: Path, args) -> None:
    proj = _project(tmp_path)
    res = tk(proj, *[_run_id(proj / "r") if a == "RUN" else a for a in args])
    assert res.returncode == 4, res.stdout + res.stderr
    assert (
        "the folder typo" in res.stderr and "does not exist" in res.stderr and "mkdir -p typo" in res.stderr
    )
    assert not (proj / "typo").exists()
    (proj / "afile").write_text("")
    res = tk(proj, "report", "--results", "r", "-o", "afile/report.md")
    assert res.returncode == 4 and "afile is a file, not a folder" in res.stderr, res.stderr
    res = tk(proj, "report", "--results", "r", "--plots", "plots")  # the named folder itself may be new
    assert res.returncode == 0 and (proj / "plots" / "decode.png").is_file(), res.stderr


def test_every_option_naming_a_written_path_checks_its_folder() -> None:
    """The one rule, on every command: an option of metavar FILE or DIR that the command writes (-o;
    report --plots; campaign render-k8s -o) has cli.common.output_parent as its callback."""
    from toolkit.cli.common import output_parent
    from toolkit.cli.main import cli
    from toolkit.cli.reference import _walk

    written = {
        (" ".join(path), p.name): p.callback
        for path, cmd in _walk(cli, [])
        for p in cmd.params
        if p.name in ("output", "plots_dir")
    }
    assert ("campaign render-k8s", "output") in written and ("report", "plots_dir") in written, written
    assert {
        k for k, cb in written.items() if getattr(cb, "func", cb) is not output_parent
    } == set()  # a partial


def test_compare_against_a_folder_writes_nothing_into_it(tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj")
    other = matrix_project(tmp_path / "other")
    import_rows(other, H200 / "contended.jsonl", "bare")
    theirs = other / "r"
    for f in theirs.glob(".index*"):
        f.unlink()
    before = sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in theirs.rglob("*"))
    args = ["compare", "--results", "r", _run_id(proj / "r"), _run_id(theirs), "--against", str(theirs)]
    res = tk(proj, *args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in theirs.rglob("*")) == before
    again = tk(proj, *args)  # its index, kept outside it, is used again
    assert again.returncode == 0 and again.stdout == res.stdout, again.stderr
    os.chmod(theirs, 0o555)
    for d in theirs.iterdir():
        os.chmod(d, 0o555)
    try:  # a folder this user cannot write, as a non-root user sees it
        ro = tk(proj, *args, prefix=_no_dac())
    finally:
        for d in (theirs, *theirs.iterdir()):
            os.chmod(d, 0o755)
    assert ro.returncode == 0 and ro.stdout == res.stdout, ro.stderr
    assert sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in theirs.rglob("*")) == before


def test_measure_says_once_that_its_command_is_stopped_and_how_to_continue_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    prog = f"import os, signal; open({str(pidfile)!r}, 'w').write(str(os.getpid())); os.kill(os.getpid(), signal.SIGSTOP); print('continued')"
    cmd = [sys.executable, "-m", "toolkit", "measure", "--gpu", "none", "-o", str(tmp_path / "m.jsonl")]
    proc = subprocess.Popen(
        [*cmd, "--", sys.executable, "-c", prog],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    assert proc.stderr is not None
    threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True).start()
    deadline = time.time() + 30
    while time.time() < deadline and not any("is stopped" in x for x in lines):
        time.sleep(0.1)
    time.sleep(1.0)  # still stopped: said once, not on every poll
    said = "".join(lines)
    os.kill(int(pidfile.read_text()), signal.SIGCONT)  # before any assert: the run must end either way
    assert proc.wait(timeout=60) == 0 and proc.stdout is not None and "continued" in proc.stdout.read()
    pid = pidfile.read_text()
    assert f"the command (pid {pid}) is stopped (SIGSTOP)" in said and f"kill -CONT {pid}" in said, said
    assert said.count("is stopped") == 1, said


def test_the_readmes_own_code_renders_as_code_and_a_names_backtick_stays_escaped(tmp_path: Path) -> None:
    """A model file named `m`x <b>.gguf` (a row's model_filename) is quoted in a note as written: its
    backtick opens no code span and its tag is text, while the note's `toolkit import` renders as code."""
    markdown_it = pytest.importorskip("markdown_it")
    proj = matrix_project(tmp_path)
    shutil.copytree(ROOT / "Dockerfile.templates", proj / "Dockerfile.templates")
    rows = [json.loads(x) for x in (H200 / "alone.jsonl").read_text().splitlines() if x.strip()]
    for r in rows:
        r["model_filename"] = r["model_filename"].replace("mid.gguf", "m`x <b>.gguf")
    import_rows(proj, rows, "bare")
    res = tk(proj, "export-run", "--results", "r", _run_id(proj / "r"), "-o", "pub")
    assert res.returncode == 0, res.stderr
    readme = (proj / "pub" / "README.md").read_text()
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(readme)
    inline = [c for t in tokens for c in t.children or []]
    ticks = [c.content for c in inline if c.type == "text" and "`" in c.content.replace("m`x <b>.gguf", "")]
    assert not ticks and not [c for c in inline if c.type == "html_inline"], ticks
    assert {"toolkit import", "toolkit reproduce"} <= {c.content for c in inline if c.type == "code_inline"}
    notes = [c.content for c in inline if c.type == "text" and c.content.startswith("Note: model")]
    assert notes == ["Note: model 'm`x <b>.gguf': no sha256 recorded: reproduce cannot check the model file"]
