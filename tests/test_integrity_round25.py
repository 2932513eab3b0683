"""Round 25 (integrity): a thread count no host can run is no measurement, at import and when a stored
record is read (llama_bench.settings_check.threads_problem through record_check's held raw fields); a telemetry
window's figures in an order no set of samples gives (a minimum above its median, a mean above its
maximum) or a host of no online CPU are no window's (telemetry_flags.figures_problem). Inputs: the
real H200 `toolkit measure` rows of tests/data, edited as a hand or another tool would, read through
the CLI as a user does. Each test fails on the code before the fix."""

from __future__ import annotations

from tests.support.runs import tk
from tests.support.stored import edit_stored, h200_rows, import_rows, matrix_project


def test_an_imported_row_of_more_threads_than_any_host_runs_is_refused(tmp_path):
    """n_threads 10^12 (a unit or parser slip) was imported and shown as a test's setting."""
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")
    rows[0]["n_threads"] = 10**12
    out = import_rows(tmp, rows, "alone")
    assert "n_threads is 1000000000000: more threads than any host can run" in out, out


def test_a_stored_record_edited_to_more_threads_than_any_host_runs_is_skipped_on_read(tmp_path):
    """A stored record's raw n_threads edited to 10^12: before, the report showed it as measured."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    edit_stored(tmp, lambda r: r["raw"].update(n_threads=10**12))
    res = tk(tmp, "report", "--results", "r")
    assert "more threads than any host can run (at most 4,194,304)" in res.stderr, res.stderr
    assert "no results yet" in res.stdout, res.stdout


def _stored_telemetry_edited(tmp_path, edit) -> str:
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    edit_stored(tmp, lambda r: edit(r["telemetry"]))
    res = tk(tmp, "report", "--results", "r")
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stderr


def test_a_window_whose_minimum_clock_is_above_its_median_is_no_window(tmp_path):
    """min, median and max of one window's samples in the wrong order (an edit): before, shown valid."""

    def edit(t):
        g = next(iter(t["gpus"].values()))
        g["sclk_mhz_min"] = g["sclk_mhz_max"] + 100

    err = _stored_telemetry_edited(tmp_path, edit)
    assert "sclk_mhz_min" in err and "is above its sclk_mhz_median" in err, err


def test_a_window_whose_mean_power_is_above_its_maximum_is_no_window(tmp_path):
    """A block that claims no energy (energy_contradiction, which holds a valid energy's power figures,
    does not read it): a mean power above its maximum was valid."""

    def edit(t):
        g = next(iter(t["gpus"].values()))
        g["power_w_mean"] = g["power_w_max"] + 50
        t["energy_valid"] = False
        t.pop("energy_refused", None)

    err = _stored_telemetry_edited(tmp_path, edit)
    assert "power_w_mean" in err and "is above its power_w_max" in err, err


def test_a_host_of_no_online_cpu_is_no_window(tmp_path):
    err = _stored_telemetry_edited(tmp_path, lambda t: t["host"].update(cpus_online=0))
    assert "host.cpus_online is 0: outside the 1-8192 it can be" in err, err


def test_a_host_of_a_fraction_of_a_cpu_is_no_window(tmp_path):
    """cpus_online 1.5 (round 26's breaker: accepted) is no count of CPUs."""
    err = _stored_telemetry_edited(tmp_path, lambda t: t["host"].update(cpus_online=1.5))
    assert "host.cpus_online is 1.5: a count of CPUs is a whole number" in err, err
