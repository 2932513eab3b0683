"""What newcomer nc42b met on a fresh Debian 12 stand-in as its sudo user with Docker (the README's main
line, then doctor, report, compare, export-run, a Ctrl-C of a second bench, import from another folder,
two imports at once, a GPU choice in the shell).

- `ROCR_VISIBLE_DEVICES=0 toolkit bench --dry-run` on a host without a GPU said nothing of the variable
  (doctor warned of it): the note was added only where the host has the image's devices, and a dry run
  elsewhere shows the command with an example R9700 profile, which does not get the variable either.
- `toolkit export-run` of an interrupted run (Ctrl-C) named its model twice in the README: once with
  llama-bench's model type (the measured records) and once without (the failed row an interrupt
  stores has no llama-bench row), as if two models were measured.
- Two imports into one folder at once: the one that waits named the folder above results/ (the
  folder it locks while results/ does not exist yet), not the results folder both write.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.project import ROOT
from tests.support.runs import _env, bench_records, tk

RUN = (
    "20261129T170227Z-acd91b"  # bench_records are created 2026-11-29T17:02:27: a run id after that is refused
)


def test_a_gpu_choice_in_the_shell_is_named_in_a_dry_run_on_any_host(tmp_path: Path) -> None:
    """A real dry run of the project's matrix, for the ROCm image, on this host (with or without a
    GPU: both branches of bench.decide say it); the CPU image, given no GPU, says nothing of it."""
    results = tmp_path / "results"
    results.mkdir()
    args = ("bench", "--dry-run", "--matrix", str(ROOT / "matrix.yaml"), "--results", str(results))
    got = tk(tmp_path, *args, "-i", "rocm", env={"ROCR_VISIBLE_DEVICES": "0"})
    assert got.returncode == 0, got.stderr
    out = got.stdout + got.stderr
    assert "rocm: note: ROCR_VISIBLE_DEVICES=0 is set here but not applied to the containers" in out, out
    assert "pass --gpu N" in out, out
    cpu = tk(tmp_path, *args, "-i", "cpu", env={"ROCR_VISIBLE_DEVICES": "0"})
    assert cpu.returncode == 0 and "ROCR_VISIBLE_DEVICES" not in cpu.stdout + cpu.stderr, cpu.stderr
    plain = tk(tmp_path, *args, "-i", "rocm", env={"ROCR_VISIBLE_DEVICES": None})
    assert plain.returncode == 0 and "not applied" not in plain.stdout + plain.stderr, plain.stderr


def test_the_export_readme_of_an_interrupted_run_names_its_model_once(tmp_path: Path) -> None:
    """The run's measured records, then the failed row bench stores on Ctrl-C (no llama-bench row:
    raw {}, no test, no tok/s), as it wrote it on the stand-in; `toolkit export-run` of it."""
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    measured = bench_records(RUN)
    for r in measured:
        store.add_result(r)
    store.add_result(
        measured[0].model_copy(
            update={
                "status": "failed",
                "error": "interrupted (Ctrl-C) (2 of 8 tests completed and kept)",
                "test": "(none)",
                "raw": {},
                "n_prompt": 0,
                "n_gen": 0,
                "n_batch": None,
                "n_ubatch": None,
                "avg_ts": None,
                "stddev_ts": None,
                "samples_ts": [],
                "backends": None,
                "gpu_info": None,
            }
        )
    )
    got = tk(
        tmp_path,
        "export-run",
        RUN,
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--results",
        str(store.root),
        "-o",
        str(tmp_path / "sent"),
    )
    assert got.returncode == 0, got.stderr
    readme = (tmp_path / "sent" / "README.md").read_text()
    models = [ln for ln in readme.splitlines() if ln.startswith("- model: ")]
    assert len(models) == 1, models
    assert "qwen3moe 0.5M F16" in models[0], models[0]  # the measured records' words, type included
    assert "1 failed" in readme  # the failed row still counted on its image's line


def test_an_import_that_waits_names_the_results_folder(tmp_path: Path) -> None:
    """A real `toolkit import` from a folder outside the project while another holds the folder lock
    (taken here as an import takes it: an flock of the nearest folder that exists, results/ not yet
    made): it says it waits, naming the results folder it will write, then imports once released."""
    import fcntl
    import os

    (tmp_path / "x.jsonl").write_text(
        (ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl").read_text()
    )
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "import", "x.jsonl", "--label", "L"],
        cwd=tmp_path,
        env=_env(None),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        said = [proc.stderr.readline() for _ in range(2)]  # the note naming the project, then the wait
    finally:
        os.close(fd)  # releases the lock
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, "".join(said) + err
    assert "a results folder of this folder's own" in said[0], said
    assert said[1].startswith(f"import: waiting for another import into {tmp_path / 'results'} to finish"), (
        said
    )
    assert "L: imported" in out, out


def test_a_hand_written_row_without_a_model_is_said_as_such(tmp_path: Path) -> None:
    """`cd ~ && toolkit import x.jsonl --label L` of the fewest fields docs/running.md names (n_prompt,
    n_gen, avg_ts), then `toolkit report` there: the verdict left it out "(model=unknown: a vLLM bench JSON
    names none)", a reason about another file kind, and the csv's model_stand_in said `false` of a model
    whose size nothing recorded (the csv's system columns are empty where not recorded). A row that
    gives llama-bench's model_size of the tiny model is a stand-in (`true`)."""
    import csv
    import io

    (tmp_path / "x.jsonl").write_text('{"n_prompt": 512, "n_gen": 0, "avg_ts": 123.4}\n')
    (tmp_path / "y.jsonl").write_text(
        '{"n_prompt": 512, "n_gen": 0, "avg_ts": 99.0, "model_type": "qwen3moe ?B F16", "model_size": 1611104}\n'
    )
    for f, label in (("x.jsonl", "L"), ("y.jsonl", "M")):
        assert tk(tmp_path, "import", f, "--label", label).returncode == 0
    text = tk(tmp_path, "report", "--format", "github")
    assert text.returncode == 0, text.stderr
    assert "model=unknown: imported rows that name no model, no model_filename or model_type" in text.stdout
    assert (
        "vLLM bench JSON names none)" in text.stdout
    )  # still said: a vLLM JSON is the other way to get there
    got = tk(tmp_path, "report", "--format", "csv")
    assert got.returncode == 0, got.stderr
    rows = {r["image"]: r for r in csv.DictReader(io.StringIO(got.stdout))}
    assert rows["L"]["model_stand_in"] == "" and rows["L"]["records"] == "1", rows["L"]
    assert rows["M"]["model_stand_in"] == "true", rows["M"]


def test_the_interrupt_count_says_which_records_are_measurements(tmp_path: Path) -> None:
    """A Ctrl-C of a second bench said "3 record(s) of this run are saved" where two tests had completed:
    the third was the failed row saying it was interrupted. The run's writer (a real store) counts
    them apart; a run with no failed row says its count as before."""
    from toolkit.results.records import ResultStore, Saver

    saver = Saver(ResultStore(tmp_path / "results"))
    measured = bench_records(RUN)
    for r in measured[:2]:
        saver.save(r)
    assert saver.summary().endswith("bench.jsonl"), saver.summary()
    saver.save(
        measured[2].model_copy(update={"status": "failed", "error": "interrupted (Ctrl-C)", "raw": {}})
    )
    said = saver.summary()
    assert said.startswith("3 record(s) of this run are saved in ") and said.endswith(
        "bench.jsonl (2 measured, 1 failed row(s))"
    ), said
