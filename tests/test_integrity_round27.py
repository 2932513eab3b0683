"""Round 27 (integrity): impossible values and flags where nothing happened, the shapes rounds 15-26 left.
A telemetry window's counts of its samples above its samples, or figures stated in a window of no
sample (telemetry_flags._sample_counts_problem: `throttled` and `clock-idle` were raised from them); a
served result whose ttft statistic passes its e2el's, whose std is below what its own percentiles
span, or whose mean is below half its median (vllm output._within_request, _spread_problem); a stored
llama-bench record whose fields made from its raw row (flash_attn, n_gpu_layers, backends, gpu_info,
build_commit, the effective micro-batch) are not what normalize makes of it (raw_check.made_problem).
Inputs: the real H200 `toolkit measure` rows and the vLLM 0.16.0 serve result of tests/data, edited as a
hand or another tool would, read through the CLI. Each test fails on the code before the fix."""

from __future__ import annotations

import json

import pytest

from tests.support.project import DATA
from tests.support.runs import tk
from tests.support.stored import edit_stored, h200_rows, import_rows, matrix_project


def _gpu(row):
    return next(iter(row["toolkit_telemetry"]["gpus"].values()))


def _report_json(tmp) -> tuple[dict, str]:
    res = tk(tmp, "report", "--results", "r", "--format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout), res.stderr


def _cells(rep: dict) -> list[dict]:
    return [v for t in rep["tables"] for row in t["rows"] for v in row.values() if isinstance(v, dict)]


def test_a_throttle_held_in_more_samples_than_the_window_read_raises_no_flag(tmp_path):
    """A 1-sample window whose throttle reason is counted in 6 samples: before, imported with the
    block kept and `throttled:hw-thermal` shown (THROTTLE_MIN_SAMPLES met by samples that never were)."""
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")[:1]
    g = _gpu(rows[0])
    assert g["samples"] == 1
    g.update(throttle_samples=6, throttle_count={"hw-thermal": 6}, throttle_share={"hw-thermal": 1.0})
    out = import_rows(tmp, rows, "alone")
    assert "throttle_samples 6 is more than its window's samples 1" in out, out
    rep, _ = _report_json(tmp)
    (cell,) = _cells(rep)
    assert not any(f.startswith("throttled") for f in cell.get("flags") or []), cell
    assert cell["avg_ts"] == rows[0]["avg_ts"]  # the speed kept, the block left out


def test_a_stored_window_of_no_sample_with_a_busy_idle_clock_is_skipped(tmp_path):
    """samples 0 beside a busy mean of 90 % at 300 MHz: before, the report showed `clock-idle`."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl")[:1], "alone")

    def edit(r):
        g = next(iter(r["telemetry"]["gpus"].values()))
        g.update(
            samples=0,
            throttle_samples=0,
            busy_pct_mean=90.0,
            sclk_mhz_min=300.0,
            sclk_mhz_median=300.0,
            sclk_mhz_max=300.0,
        )

    edit_stored(tmp, edit)
    rep, err = _report_json(tmp)
    assert "stated in a window of 0 samples" in err, err
    assert _cells(rep) == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            {
                "mean_ttft_ms": 1000,
                "median_ttft_ms": 1045,
                "p50_ttft_ms": 1045,
                "p90_ttft_ms": 1048,
                "p99_ttft_ms": 1050,
            },
            "median_ttft_ms 1045 is more than median_e2el_ms 1030.1",
        ),
        ({"p99_ttft_ms": 2000.0}, "p99_ttft_ms 2000 is more than p99_e2el_ms 1052.3"),
        ({"std_ttft_ms": 0.0}, "std_ttft_ms 0 is less than its percentiles allow"),
        ({"mean_ttft_ms": 10.0}, "mean_ttft_ms 10 is less than half its median 148.9"),
    ],
)
def test_a_serve_result_whose_latency_statistics_no_requests_give_is_refused(tmp_path, change, said):
    """Each request's first token is part of it, so every ttft statistic is within e2el's; a std below
    what the percentiles span, a mean below half the median: before, imported (only the means' order was
    held) and shown as a served result."""
    tmp = matrix_project(tmp_path)
    f = tmp / "serve-128-32-c2.json"
    f.write_text(json.dumps({**json.loads((DATA / "vllm-0.16.0-serve.json").read_text()), **change}))
    res = tk(tmp, "import", "--results", "r", "--label", "v", str(f))
    assert res.returncode == 4 and said in res.stdout + res.stderr, res.stdout + res.stderr


def test_the_real_serve_result_still_imports(tmp_path):
    tmp = matrix_project(tmp_path)
    f = tmp / "serve-128-32-c2.json"
    f.write_text((DATA / "vllm-0.16.0-serve.json").read_text())
    import_rows(tmp, f, "v")


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("flash_attn", 7, "flash_attn 7 is not its raw row's 1"),
        ("n_gpu_layers", -7, "n_gpu_layers -7 is not its raw row's 99"),
        ("build_commit", "deadbeef", "build_commit deadbeef is not its raw row's 0c1e57098"),
        ("n_ubatch_effective", 64, "n_ubatch_effective 64 is not its test's"),
    ],
)
def test_a_stored_field_made_from_its_raw_row_and_edited_is_skipped(tmp_path, field, value, said):
    """The csv showed flash_attn 7 and n_gpu_layers -7, the image line another build, as measured."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl")[:1], "alone")
    edit_stored(tmp, lambda r: r.update({field: value}))
    rep, err = _report_json(tmp)
    assert said in err, err
    assert _cells(rep) == []


def test_a_depth_tests_effective_ubatch_as_stored_before_is_read(tmp_path):
    """A pp test at a depth stored n_ubatch_effective as the context's bound (n_prompt + n_depth) before
    the timed prompt was counted alone: such a record is no edit, and its report says the prompt's
    micro-batch (min(ub, b, n_prompt)); a value that is neither is still an edit."""
    tmp = matrix_project(tmp_path)
    row = {**h200_rows("alone.jsonl")[0], "n_depth": 512, "n_ubatch": 2048}  # pp512 @ d512, ub2048
    import_rows(tmp, [row], "depth")
    edit_stored(tmp, lambda r: r.update({"n_ubatch_effective": 1024}))  # as written before 2026-12-05
    rep, err = _report_json(tmp)
    assert "contradicts itself" not in err and "n_ubatch_effective" not in err, err
    (cell,) = _cells(rep)
    assert cell["n_ubatch_effective"] == 512, cell
    edit_stored(tmp, lambda r: r.update({"n_ubatch_effective": 256}))
    rep, err = _report_json(tmp)
    assert "n_ubatch_effective 256 is not its test's: min(n_ubatch, n_batch, n_prompt) is 512" in err, err


def test_a_stored_record_as_imported_is_read(tmp_path):
    """The rule's guard: every field as normalize made it, the record shown."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    rep, err = _report_json(tmp)
    assert "contradicts itself" not in err, err
    assert len(_cells(rep)) == 6
