"""Round 29 (breaker): bad and hostile input by kind. A path that is a loop of symbolic links given to
any option (pathlib's RuntimeError reached the traceback, exit 1); a llama-bench row holding a setting
llama-bench's own argument parser refuses (flash_attn 7, a 0/1 switch of 2, a negative n_cpu_moe, poll
or build_number, a model of 0 bytes), imported or edited into a stored record; a row of a build with
host backends only (`CPU`, `BLAS`) naming a GPU in gpu_info. Inputs: the real CPU llama-bench jsonl of
tests/data, edited as a hand or another tool would, through the real CLI. Each test but the guards
(marked) fails on the code before the fix."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.project import DATA
from tests.support.runs import tk
from tests.support.stored import edit_stored, import_rows, matrix_project

CPU_ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"


def _row(**edit):
    row = json.loads(CPU_ROWS.read_text().splitlines()[0])
    row.update(edit)
    return row


def _import(tmp, row):
    src = tmp / "in.jsonl"
    src.write_text(json.dumps(row) + "\n")
    return tk(tmp, "import", "--results", "r", "--label", "x", str(src))


@pytest.mark.parametrize("command", ["render", "report", "doctor", "compare"])
def test_a_symlink_loop_given_as_the_matrix_is_bad_input_not_a_traceback(tmp_path, command):
    """Before: `RuntimeError: Symlink loop from '.../loop'` out of Path.resolve (Python 3.11), exit 1."""
    tmp = matrix_project(tmp_path)
    os.symlink(tmp / "loop", tmp / "loop")
    args = [command, "--matrix", str(tmp / "loop")] + (["a", "b"] if command == "compare" else [])
    res = tk(tmp, *args)
    assert res.returncode == 4, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert "loop" in res.stderr and "points back into itself" in res.stderr, res.stderr


def test_a_symlink_loop_in_the_json_envelope_says_exit_4(tmp_path):
    tmp = matrix_project(tmp_path)
    os.symlink(tmp / "loop", tmp / "loop")
    res = tk(tmp, "report", "--json", "--matrix", str(tmp / "loop"))
    assert res.returncode == 4, res.stderr
    env = json.loads(res.stdout)
    assert env["exit_code"] == 4 and not env["ok"] and "points back into itself" in env["error"]


def test_pathlibs_loop_error_maps_to_the_oserror_it_stands_for(tmp_path):
    from toolkit.core.errors import FileSystemError, symlink_loop

    os.symlink(tmp_path / "l", tmp_path / "l")
    try:
        (tmp_path / "l").resolve()
    except RuntimeError as err:  # Python 3.11/3.12; from 3.13 resolve raises OSError itself
        got = symlink_loop(err)
        assert got is not None and got.filename == str(tmp_path / "l")
        assert FileSystemError.from_oserror(got).exit_code == 4
    except OSError:
        pass
    assert symlink_loop(RuntimeError("something else")) is None
    assert symlink_loop(RecursionError("Symlink loop from 'x'")).filename == "x"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("flash_attn", 7, "flash_attn is '7'"),
        ("flash_attn", "maybe", "flash_attn is 'maybe'"),
        ("no_kv_offload", 2, "no_kv_offload is '2'"),
        ("embeddings", "yes", "embeddings is 'yes'"),
        ("cpu_strict", -1, "cpu_strict is '-1'"),
        ("n_cpu_moe", -4, "n_cpu_moe is -4"),
        ("poll", -5, "poll is -5"),
        ("build_number", -7, "build_number is -7"),
        ("model_size", 0, "model_size is 0"),
        ("model_n_params", -1, "model_n_params is -1"),
    ],
)
def test_a_setting_llama_bench_refuses_is_refused_at_import(tmp_path, field, value, said):
    """Before: imported, the csv showing `flash_attn 7` (llama-bench 0c1e57098 ends `-fa 7`, `-nkvo 2`,
    `-ncmoe -4`, `--poll -5` in its usage text: no row printed)."""
    tmp = matrix_project(tmp_path)
    res = _import(tmp, _row(**{field: value}))
    assert res.returncode == 4, res.stdout + res.stderr
    assert said in res.stderr, res.stderr


@pytest.mark.parametrize(
    "edit",
    [
        {"flash_attn": -1},
        {"flash_attn": True},
        {"flash_attn": "on"},
        {"no_kv_offload": False},
        {"no_kv_offload": "1"},
        {"poll": 200},  # llama-bench 0c1e57098 runs `--poll 200` and prints 200
        {"n_threads": 1000},  # and `-t 1000`, printing 1000
        {"model_size": "1.52 MiB", "model_n_params": "0.79 M"},  # md's text
        {"build_number": 0},
    ],
)
def test_settings_llama_bench_prints_still_import(tmp_path, edit):
    """Guard (passes before and after): every value llama-bench prints for these fields."""
    tmp = matrix_project(tmp_path)
    res = _import(tmp, _row(**edit))
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_stored_record_edited_to_such_a_setting_is_skipped_naming_it(tmp_path):
    """Before: shown, its flash_attn 7 in the csv (raw's settings were not held to the validity pass)."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, [_row()], "x")
    edit_stored(tmp, lambda r: r["raw"].update(n_cpu_moe=-4))
    res = tk(tmp, "report", "--results", "r", "--format", "json")
    assert "skipped" in res.stderr and "n_cpu_moe is -4" in res.stderr, res.stderr
    assert "no results yet" in tk(tmp, "report", "--results", "r").stdout  # its only record is not shown


@pytest.mark.parametrize("backends", ["CPU", "BLAS", "CPU,BLAS"])
def test_a_host_only_build_naming_a_gpu_is_refused(tmp_path, backends):
    """Before: imported and shown on `GPU NVIDIA H200` (a CPU build lists no GPU device: llama-bench's
    gpu_info holds the devices of its GPU backends only)."""
    tmp = matrix_project(tmp_path)
    res = _import(tmp, _row(backends=backends, gpu_info="NVIDIA H200"))
    assert res.returncode == 4, res.stdout + res.stderr
    assert "host backends only" in res.stderr, res.stderr


def test_host_and_gpu_backends_as_llama_bench_prints_them_still_import(tmp_path):
    """Guard (passes before and after): a CPU row without a GPU, a CUDA,BLAS row on an H200."""
    from toolkit.core.backends import device_contradiction

    assert device_contradiction("CPU", "") is None
    assert device_contradiction("CUDA,BLAS", "NVIDIA H200") is None
    assert device_contradiction("RPC", "NVIDIA H200") is None
    assert device_contradiction("", "NVIDIA H200") is None
    tmp = matrix_project(tmp_path)
    assert _import(tmp, _row()).returncode == 0
