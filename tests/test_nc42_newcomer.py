"""What newcomer 42 met on a fresh Debian 13 stand-in, its sudo user, rootless Podman 5 (the README's
Podman line, then report, compare, export-run, reproduce, import and the usual mistakes).

- Ctrl-C of a second `toolkit bench` (the sweep measured before) said "`toolkit bench --resume`
  continues where this run stopped"; `--resume` then said "plan: nothing left to measure": every case
  had an earlier measurement on that digest + model. The interrupt now says so, and that `toolkit
  bench` measures them all again (bench.run._resume_hint).
- `toolkit compare cpu laptop` of a bench and a hand-written llama-bench JSONL import said "they
  measured different models (A: tiny-qwen3moe; B: tiny-qwen3moe.gguf)": two names that read alike,
  no word of why. The file's model_n_params / model_size were guesses; the message now names the
  fields that keep the two models apart (analysis.compare._models_apart).
- `toolkit compare cpuu cpu` (a typo) said "did you mean 'cpu'?" and then offered `toolkit build -i
  cpuu && toolkit bench -i cpuu`; a typo of a measured name no longer gets a build line.
- Run from another folder (`cd ~`): `toolkit import FILE --label x` made ~/results of its own (the
  project's report never shows it) and `toolkit compare A B` said "no results match 'cpu' ... `toolkit
  build -i cpu && toolkit bench -i cpu`"; `toolkit report` there already named the project folder to
  cd to. compare now says the same (exit 4); import still writes there (report run there reads it) and
  says it is not the project's, naming the project.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.e2e_helpers import engine_or_skip, make_project
from tests.support.project import ROOT
from tests.support.runs import _env, tk

ROWS = ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl"


def _rows(**edit: object) -> str:
    """The real CPU llama-bench rows of tests/data, each with `edit` applied (a hand-written file's guesses)."""
    return "".join(json.dumps({**json.loads(ln), **edit}) + "\n" for ln in ROWS.read_text().splitlines())


def _project(tmp_path: Path) -> Path:
    """A folder holding the project's matrix.yaml (what `toolkit import` and `compare` read beside)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(ROOT / "matrix.yaml", proj / "matrix.yaml")
    return proj


@pytest.mark.parametrize("file_name", ["tiny-qwen3moe.gguf", "tiny.gguf"])
def test_compare_of_two_models_that_read_alike_names_the_fields_that_keep_them_apart(
    tmp_path: Path, file_name: str
) -> None:
    """One file name on both sides (the fingerprint was shown as a Python tuple and `--ignore FIELD
    (model)` offered, which --ignore refuses) or two (only the names were shown)."""
    proj = _project(tmp_path)
    (proj / "bench.jsonl").write_text(_rows())
    (proj / "hand.jsonl").write_text(
        _rows(model_n_params=800000, model_size=1611104, model_filename=file_name)
    )
    for f, label in (("bench.jsonl", "cpu"), ("hand.jsonl", "laptop")):
        assert tk(proj, "import", f, "--label", label).returncode == 0
    got = tk(proj, "compare", "cpu", "laptop")
    assert got.returncode == 4, got.stdout + got.stderr
    assert "different models" in got.stderr, got.stderr
    assert "model_n_params A 0.79 M, B 0.80 M; model_size A 1.52 MiB, B 1.54 MiB" in got.stderr, got.stderr
    assert "model_type" not in got.stderr.split("compare two runs")[0]  # the same on both sides: not named
    assert "('qwen3moe" not in got.stderr and "--ignore FIELD" not in got.stderr, got.stderr
    assert tk(proj, "compare", "cpu", "laptop", "--ignore", "model").returncode == 4  # what it never offers


def test_a_typo_in_compare_is_not_offered_as_an_image_to_build(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    (proj / "bench.jsonl").write_text(_rows())
    assert tk(proj, "import", "bench.jsonl", "--label", "cpu").returncode == 0
    got = tk(proj, "compare", "cpuu", "cpu")
    assert got.returncode == 4, got.stdout + got.stderr
    assert "did you mean 'cpu'?" in got.stderr, got.stderr
    assert "-i cpuu" not in got.stderr, got.stderr
    # a name that is no typo of a measured one keeps the way to measure it
    got = tk(proj, "compare", "vulkan", "cpu")
    assert got.returncode == 4 and "`toolkit build -i vulkan && toolkit bench -i vulkan`" in got.stderr, (
        got.stderr
    )


def test_import_and_compare_from_a_folder_without_a_project_name_the_project(tmp_path: Path) -> None:
    """From a folder without a project (`cd ~`) an import made a results/ of that folder's own and said
    only where it wrote; compare told to build. The import still writes there (report run there reads
    it) and says it is not the project's, naming the project; compare with nothing here names it too."""
    away = tmp_path / "home"
    away.mkdir()
    (away / "hand.jsonl").write_text(_rows())
    got = tk(away, "compare", "cpu", "laptop")
    assert got.returncode == 4, got.stdout + got.stderr
    assert "no results folder at" in got.stderr and "run from the project folder" in got.stderr, got.stderr
    assert "toolkit build" not in got.stderr, got.stderr
    got = tk(away, "import", "hand.jsonl", "--label", "laptop")
    assert got.returncode == 0, got.stdout + got.stderr
    assert f"note: no matrix.yaml here: importing into {away / 'results'}," in got.stderr, got.stderr
    assert "the project's does not" in got.stderr and "run from the project folder" in got.stderr, got.stderr
    assert list((away / "results").glob("*/bench.jsonl"))
    assert tk(away, "report", "--format", "github").returncode == 0  # report run there reads it
    # --results given: the import goes where it is told, without the note
    got = tk(away, "import", "hand.jsonl", "--label", "laptop", "--results", "r")
    assert got.returncode == 0 and "note: no matrix.yaml" not in got.stderr, got.stderr
    assert tk(away, "report", "--results", "r", "--format", "github").returncode == 0
    # in the project: the import writes results/ beside its matrix, as before, without the note
    proj = _project(tmp_path)
    got = tk(proj, "import", str(away / "hand.jsonl"), "--label", "laptop")
    assert got.returncode == 0 and "note: no matrix.yaml" not in got.stderr, got.stderr
    assert list((proj / "results").glob("*/bench.jsonl"))


REPEAT = {  # several seconds a run: SIGINT lands while it measures
    "n_prompt": [128, 2048],
    "n_gen": [16],
    "n_ubatch": [64],
    "n_batch": [2048],
    "repetitions": 20,
    "n_gpu_layers": [0],
}


@pytest.mark.e2e
def test_ctrl_c_of_a_sweep_measured_before_says_resume_has_nothing_to_measure(tmp_path: Path) -> None:
    """A real engine, the CPU image, the tiny model: a full bench, then a second bench of the same cases
    stopped by SIGINT after its first record. Before: "`toolkit bench --resume` continues where this
    run stopped", and --resume measured nothing."""
    from toolkit.bench.run import NOTHING_TO_RESUME, RESUME_HINT

    engine_or_skip()
    proj = make_project(tmp_path / "p", images=["cpu"], bench=REPEAT)
    env = {"TOOLKIT_ALLOW_CONCURRENT": "1"}  # other sessions may bench on this engine: not this test's point
    built = tk(proj, "build", "--image", "cpu", env=env, timeout=3600)
    assert built.returncode == 0, built.stderr[-2000:]
    first = tk(proj, "bench", "-i", "cpu", env=env, timeout=1800)
    assert first.returncode == 0, first.stderr[-2000:]
    (bench,) = (proj / "results").glob("*/bench.jsonl")
    before = len(bench.read_text().splitlines())
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "bench", "-i", "cpu"],
        cwd=proj,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(env),
    )
    try:
        deadline = time.monotonic() + 1800
        while len(bench.read_text().splitlines()) <= before:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the second run wrote no record"
            time.sleep(0.05)
        proc.send_signal(2)  # SIGINT: Ctrl-C
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    # run from the project folder: no --matrix, no --results; the bench's own -i (invocation.again)
    said = {"bench": "toolkit bench --image cpu"}
    assert NOTHING_TO_RESUME.format(**said) in err and RESUME_HINT.format(**said) not in err, err
    resumed = tk(proj, "bench", "-i", "cpu", "--resume", env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "nothing left to measure" in resumed.stdout + resumed.stderr
