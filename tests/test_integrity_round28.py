"""Round 28 (integrity): flags where nothing happened and figures no window or row can hold, the shapes
round 27 left. A stored `stale-build` on a record whose image is not marked stale, a stored `concurrent`
field naming no run that was alive beside it (flag_claims: WRITTEN_CLAIMS, concurrent_problem); a GPU
window's samples, period and gaps against its own length, a negative load average, active pids outside
its pids (window_check.window_problem); a llama-bench row's n_gpu_layers below -1 or main_gpu past its
devices at split_mode none (llama_bench.settings_check). Inputs: the real H200 `toolkit measure` rows
of tests/data, edited as a hand or another tool would, read through the CLI. Each test but the guard of
the two constants fails on the code before the fix."""

from __future__ import annotations

import json

import pytest

from tests.support.runs import tk
from tests.support.stored import edit_stored, h200_rows, import_rows, matrix_project


def _gpu(row):
    return next(iter(row["toolkit_telemetry"]["gpus"].values()))


def _cells(tmp) -> tuple[list[dict], str]:
    res = tk(tmp, "report", "--results", "r", "--format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    rep = json.loads(res.stdout)
    cells = [v for t in rep["tables"] for row in t["rows"] for v in row.values() if isinstance(v, dict)]
    return cells, res.stderr


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("flags", ["stale-build"]),  # an imported record: its image was never marked stale
        (
            "concurrent",
            {"other_runs": ["20991231T000000Z-abcdef"]},
        ),  # imported: no run saved it beside another
    ],
)
def test_a_stored_store_flag_without_its_evidence_holds_nothing(tmp_path, field, value):
    """Before: `stale-build` / `concurrent` shown on the cell as stored (a hand edit)."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl")[:1], "alone")
    edit_stored(tmp, lambda r: r.update({field: value}))
    (cell,) = _cells(tmp)[0]
    flags = cell.get("flags") or []
    name = "stale-build" if field == "flags" else "concurrent"
    assert name not in flags, flags
    assert f"flag-unsupported:{name}" in flags, flags


def test_a_concurrent_field_is_held_to_the_runs_it_names():
    """A record a bench run saved: its own run, no run at all, and a run started after it are no
    evidence; a run started before it is (unit test of the rule: a bench run cannot be made here)."""
    from toolkit.results.flag_claims import concurrent_problem
    from toolkit.results.records import BenchRecord

    base = {
        "run_id": "20261205T100000Z-aaaaaa",
        "created": "2026-12-05T10:05:00+00:00",
        "image": {"name": "x", "ref": "x", "digest": "sha256:" + "0" * 64, "backend": "rocm"},
        "model": {"name": "m", "path": "m.gguf", "sha256": "0" * 64, "size_bytes": 1},
        "test": "pp512",
        "axis": "prefill",
        "n_prompt": 512,
        "avg_ts": 1000.0,
    }

    def why(runs):
        return concurrent_problem(BenchRecord.model_validate({**base, "concurrent": {"other_runs": runs}}))

    assert why(["20261205T095000Z-bbbbbb"]) is None
    assert why(["20261205T095000Z-bbbbbb (pid 4 on this host, Docker engine E)"]) is None
    assert "its own run" in why(["20261205T100000Z-aaaaaa"])
    assert "started" in why(["20261205T110000Z-bbbbbb"])
    assert "names no other run" in why([])


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"samples": 100000, "throttle_samples": 0}, "more than the"),
        ({"period_s": -0.1}, "period_s is -0.1"),
        ({"max_gap_s": 1000.0}, "max_gap_s is 1000.0"),
        ({"active_pids": [999999]}, "not among its pids"),
    ],
)
def test_a_gpu_window_held_to_its_own_length(tmp_path, change, said):
    """Before: each imported with its block kept (no rule read them)."""
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")[:1]
    g = _gpu(rows[0])
    if "active_pids" in change and not g.get("pids"):
        g["pids"] = [1]
    g.update(change)
    out = import_rows(tmp, rows, "alone")
    assert said in out, out
    (cell,) = _cells(tmp)[0]
    assert cell["avg_ts"] == rows[0]["avg_ts"]  # the speed kept, the block left out


def test_a_negative_load_average_is_no_window(tmp_path):
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")[:1]
    rows[0]["toolkit_telemetry"]["host"]["loadavg_1m_max"] = -3.0
    out = import_rows(tmp, rows, "alone")
    assert "loadavg_1m_max is -3.0" in out, out


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"n_gpu_layers": -7}, "n_gpu_layers is -7"),
        ({"main_gpu": 3, "split_mode": "none"}, "main_gpu is 3 with split_mode none"),
    ],
)
def test_a_row_setting_no_test_ran_with_is_refused(tmp_path, change, said):
    """Before: imported and shown (`-ngl -7`, a model loaded on a fourth GPU of a one-GPU row)."""
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")[:1]
    rows[0].update(change)
    src = tmp / "x.jsonl"
    src.write_text(json.dumps(rows[0]) + "\n")
    res = tk(tmp, "import", "--results", "r", "--label", "x", str(src))
    assert said in res.stdout + res.stderr, res.stdout + res.stderr


def test_the_rows_real_settings_stay_accepted(tmp_path):
    """-ngl -1 (all layers, the 2026 default) and main_gpu 0 at split_mode none are read as before."""
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")[:1]
    rows[0].update(n_gpu_layers=-1, main_gpu=0, split_mode="none")
    import_rows(tmp, rows, "alone")
    assert len(_cells(tmp)[0]) == 1


def test_the_window_bounds_use_the_writers_constants():
    from toolkit.bench import observe
    from toolkit.results import window_check

    assert window_check.WINDOW_MARGIN_S == observe.WINDOW_MARGIN_S
    assert window_check.HOST_MIN_WINDOW_S == observe.HOST_MIN_WINDOW_S


def test_a_stale_build_flag_stands_where_its_image_is_marked_stale():
    """The flag `--allow-stale` stores (bench.runners.base.stale_marks) beside image.stale and differing
    keys stands; the same flag beside equal keys is a hand edit."""
    from toolkit.results.flag_claims import claim_problem
    from toolkit.results.records import BenchRecord

    def rec(**image):
        return BenchRecord.model_validate(
            {
                "run_id": "20261205T100000Z-aaaaaa",
                "created": "2026-12-05T10:05:00+00:00",
                "image": {"name": "x", "ref": "x", "digest": "sha256:" + "0" * 64, "backend": "cpu", **image},
                "model": {"name": "m", "path": "m.gguf", "sha256": "0" * 64, "size_bytes": 1},
                "test": "pp512",
                "axis": "prefill",
                "n_prompt": 512,
                "avg_ts": 1000.0,
                "flags": ["stale-build"],
            }
        )

    assert claim_problem("stale-build", rec(stale=True, inputs_key="a", current_inputs_key="b")) is None
    assert claim_problem("stale-build", rec(stale=True, inputs_key=None, current_inputs_key="b")) is None
    assert claim_problem("stale-build", rec(stale=True, inputs_key="a", current_inputs_key="a"))
    assert claim_problem("stale-build", rec(stale=False, inputs_key="a", current_inputs_key="b"))
