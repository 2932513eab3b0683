"""fix47b: nc47's S2, S6, S7, S8, S9.

S2: compare of two sides with no test name in common (A pp512/pp2048/tg128, B pp256/tg32, flash_attn
    differing too) says they measured different tests, each side's named, and offers no --ignore
    (it named flash_attn; `--ignore flash_attn` then failed naming nothing).
S6: export-run's "never pushed" note gives a push that works as printed: --registry where the matrix
    has no `registry:`, the placeholder said to be one.
S7: a terminal closed during a run (SIGHUP, then EIO on every write to it) exits 129, not 8.
S8: --results of a folder of other files (docs/, Dockerfile.templates/) is refused (exit 4) naming one,
    by every command that takes it, before a lock or an index is made there.
S9: bench's skip hint `toolkit doctor` names the engine, matrix and results given (invocation.command).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.records import make_record
from toolkit.analysis import compare
from toolkit.core.errors import BadInput
from toolkit.results.records import ResultStore

ROOT = Path(__file__).resolve().parent.parent


def test_compare_of_two_sides_without_a_common_test_says_so_and_offers_no_ignore(tmp_path):
    store = ResultStore(tmp_path / "results")
    a = [make_record("cpu", "cpu", p=p, avg=2400.0, sd=50.0, fa=1, run_id="run-a") for p in (512, 2048)]
    a.append(make_record("cpu", "cpu", n=128, avg=300.0, sd=5.0, fa=1, run_id="run-a"))
    b = [make_record("bare", "cpu", p=256, avg=2000.0, sd=40.0, fa=-1, run_id="run-b")]
    b.append(make_record("bare", "cpu", n=32, avg=250.0, sd=5.0, fa=-1, run_id="run-b"))
    for r in a + b:
        store.add_result(r)
    for ignore in ((), ("flash_attn",)):
        with pytest.raises(BadInput) as err:
            compare.compare(store, "run-a", "run-b", ignore=ignore)
        said = str(err.value)
        assert (
            "they measured different tests (A: pp512 ub512, pp2048 ub512, tg128 ub512; B: pp256 ub512, tg32 ub512)"
            in said
        ), said
        assert "--ignore" not in said.replace("which no --ignore joins", ""), said
        assert "flash_attn" not in said, said


def test_compare_of_one_test_under_two_settings_still_offers_ignore(tmp_path):
    store = ResultStore(tmp_path / "results")
    store.add_result(make_record("cpu", "cpu", p=512, avg=2400.0, sd=50.0, fa=1, run_id="run-a"))
    store.add_result(make_record("bare", "cpu", p=512, avg=2000.0, sd=40.0, fa=-1, run_id="run-b"))
    with pytest.raises(
        BadInput, match=r"what keeps them apart: flash_attn: A has 1, B has -1.*--ignore FIELD \(flash_attn\)"
    ):
        compare.compare(store, "run-a", "run-b")
    assert compare.compare(store, "run-a", "run-b", ignore=("flash_attn",)).rows


HUP = r"""
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.executable, [sys.executable, "-m", "toolkit", "measure", "--out", sys.argv[1], "--gpu", "none",
                               "--", "sh", "-c", "sleep 300"])
buf, deadline = b"", time.monotonic() + 60
while b"sampling" not in buf and time.monotonic() < deadline:
    if select.select([fd], [], [], 0.5)[0]:
        try:
            buf += os.read(fd, 4096)
        except OSError:
            break
time.sleep(1.0)
os.close(fd)  # the terminal closes: SIGHUP to its session, EIO on every later write to it
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pty's hang-up as Linux gives it")
def test_a_closed_terminal_exits_129_not_the_failed_write_to_it(tmp_path):
    res = subprocess.run(
        [sys.executable, "-c", HUP, str(tmp_path / "m.jsonl")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert res.stdout.strip() == "129", (res.stdout, res.stderr)


@pytest.mark.parametrize("folder", ["docs", "Dockerfile.templates"])
@pytest.mark.parametrize(
    "command",
    [
        ["bench", "-i", "cpu"],
        ["build", "-i", "cpu", "--dry-run"],
        ["report"],
        ["doctor"],
        ["import", "x.jsonl", "--label", "x"],
    ],
)
def test_a_results_folder_of_other_files_is_refused_before_anything_is_written_there(
    tmp_path, folder, command
):
    there = tmp_path / folder
    there.mkdir()
    for name in ("a.md", "b.md", "c.md"):
        (there / name).write_text("# a page\n")
    (tmp_path / "x.jsonl").write_text("{}\n")
    before = sorted(p.name for p in there.iterdir())
    res = subprocess.run(
        [sys.executable, "-m", "toolkit", command[0], "--results", str(there), *command[1:]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert res.returncode == 4, res.stderr
    assert f"{there} is not a results folder: it holds a.md" in res.stderr, res.stderr
    # a command that writes there may start a new folder; one that only reads it (report, doctor) may not
    starts = command[0] in ("bench", "build", "import")
    assert ("or of a new or empty folder to start one" in res.stderr) == starts, res.stderr
    assert sorted(p.name for p in there.iterdir()) == before


def test_a_results_folder_with_records_beside_other_files_and_a_new_one_are_taken(tmp_path):
    from toolkit.results import foreign_file

    (tmp_path / "new").mkdir()
    assert foreign_file(tmp_path / "new") is None
    store = ResultStore(tmp_path / "results")
    store.add_result(make_record("cpu", "cpu", p=512, avg=2400.0))
    (tmp_path / "results" / "notes.txt").write_text("mine\n")
    assert foreign_file(tmp_path / "results") is None
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / ".index.sqlite").write_text("")
    (tmp_path / "docs" / "b.md").write_text("")
    (tmp_path / "docs" / "README.md").write_text("")
    # brk47b F5: a new results folder made with its README (and a note) is a results folder to start
    assert foreign_file(tmp_path / "docs") is None
    (tmp_path / "docs" / "c.md").write_text("")
    assert foreign_file(tmp_path / "docs") == "README.md"
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "cpu").mkdir()  # a folder of other folders
    assert foreign_file(tmp_path / "tpl") == "cpu"
    (tmp_path / "tpl" / "0123456789ab").write_text("")  # a file named like a digest is no image folder
    assert foreign_file(tmp_path / "tpl") == "0123456789ab"


@pytest.fixture
def given():
    """The options of an invocation as the CLI notes them (`toolkit --engine podman bench --matrix m2.yaml
    --results res2`), forgotten after the test."""
    from toolkit.core import invocation

    invocation.start("podman")
    invocation.note("matrix", "m2.yaml")
    invocation.note("results", "res2")
    yield "toolkit --engine podman doctor --matrix m2.yaml --results res2"
    invocation.start(None)


def test_the_skip_hints_doctor_names_the_engine_matrix_and_results_given(given):
    from toolkit.host.devices import Shortfall

    said = Shortfall("no usable Vulkan GPU", "only llvmpipe", "pass --allow-software-gpu").message()
    assert said.endswith(f"pass --allow-software-gpu, or run `{given}`"), said


def test_every_hint_naming_a_command_carries_the_options_given(given, tmp_path, monkeypatch):
    from toolkit.results import no_results

    monkeypatch.chdir(tmp_path)  # m2.yaml given: compare offers a build of an image it names (fix48c S6)
    (tmp_path / "m2.yaml").write_text((ROOT / "matrix.yaml").read_text())

    assert no_results() == (
        "no results yet: run `toolkit --engine podman build --matrix m2.yaml --results res2 && "
        "toolkit --engine podman bench --matrix m2.yaml --results res2` or "
        "`toolkit --engine podman import --matrix m2.yaml --results res2 FILE --label NAME`"
    )
    store = ResultStore(tmp_path / "r")
    store.add_result(make_record("cpu", "cpu", p=512, avg=2400.0, run_id="run-a"))
    with pytest.raises(BadInput) as err:
        compare.compare(store, "run-a", "vulkan")
    assert (
        "`toolkit --engine podman build --matrix m2.yaml --results res2 -i vulkan && "
        "toolkit --engine podman bench --matrix m2.yaml --results res2 -i vulkan`" in str(err.value)
    ), str(err.value)
    b = ResultStore(tmp_path / "b")  # B read from --against DIR: its commands measure into DIR
    b.add_result(make_record("cpu", "cpu", p=512, avg=2400.0, run_id="run-b"))
    with pytest.raises(BadInput) as err:
        compare.compare(store, "run-a", "vulkan", b_store=b)
    assert f"build --matrix m2.yaml --results {b.root} -i vulkan" in str(err.value), str(err.value)


def test_export_runs_push_note_is_a_plain_push_where_the_matrix_names_a_registry(tmp_path, matrix_data):
    import json

    from tests.support.project import cpu_project
    from tests.support.runs import bench_records, tk

    proj = tmp_path / "proj"
    cpu_project(proj, matrix_data)
    matrix = proj / "matrix.yaml"
    matrix.write_text("registry: registry.example:5000/me\n" + matrix.read_text())
    store = ResultStore(proj / "results")
    list(map(store.add_result, bench_records("run-p")))
    res = tk(proj, "export-run", "run-p", "-o", str(tmp_path / "out"))  # the project's own matrix
    assert res.returncode == 0, res.stderr
    said = next(
        n for n in json.loads((tmp_path / "out" / "run.json").read_text())["notes"] if "never pushed" in n
    )
    assert said.endswith("(or run `toolkit push --image cpu` and export again)"), said
    assert "--registry" not in said, said


def test_a_results_folder_whose_records_lie_in_a_folder_of_another_name_is_taken(tmp_path):
    from toolkit.results import foreign_file

    store = ResultStore(tmp_path / "r")
    store.add_result(make_record("cpu", "cpu", p=512, avg=2400.0))
    (sub,) = [d for d in (tmp_path / "r").iterdir() if d.is_dir()]
    sub.rename(tmp_path / "r" / "renamed")
    assert foreign_file(tmp_path / "r") is None
