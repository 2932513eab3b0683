"""Round 25 (integrity): a thread count no host can run is no measurement, at import and when a stored
record is read (llama_bench.check._threads_problem through record_check's held raw fields). Inputs: the
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
