"""The llama-bench row sink (toolkit/bench/runners/llama_bench.py RowSink): what one llama-bench
process's output becomes while it runs, one record per printed row, each judged on its own."""

from __future__ import annotations

import json

from tests.support.sinks import ROWS, row_sink


def test_each_printed_row_is_saved_the_moment_it_is_printed(tmp_path):
    sink, saver, _, _ = row_sink(tmp_path)
    sink.stdout(json.dumps(ROWS[0]))
    assert (
        len(saver.saved) == 1 and saver.saved[0].status == "ok" and saver.saved[0].avg_ts == ROWS[0]["avg_ts"]
    )
    sink.stdout("not json: llama-bench's own text")
    sink.stdout(json.dumps(ROWS[1]))
    assert [r.status for r in saver.saved] == ["ok", "ok"] and len(sink.streamed) == 2
    assert sink.observer.tokens == [r["n_prompt"] + r["n_gen"] for r in ROWS[:2]]  # the check's count
    t = saver.saved[1].timing
    assert t["tests_s"] > 0 and t["wall_s"] >= 0 and "cache_cold" not in t  # no shader cache: not said


def test_a_row_after_the_model_file_changed_is_a_failed_record(tmp_path):
    sink, saver, _, model = row_sink(tmp_path)
    sink.row(ROWS[0])
    model.write_bytes(b"GGUF" + b"\1" * 80)  # another file under the same path mid-run
    sink.row(ROWS[1])
    assert [r.status for r in saver.saved] == ["ok", "failed"]
    assert "changed during the run" in saver.saved[1].error and sink.voids == [saver.saved[1].error]


def test_a_row_the_validity_pass_refuses_is_kept_as_failed_never_as_a_number(tmp_path):
    sink, saver, _, _ = row_sink(tmp_path, cold=True)
    sink.row({**ROWS[0], "avg_ts": -5.0})
    (rec,) = saver.saved
    assert rec.status == "failed" and rec.error.startswith("row is not a measurement")
    assert rec.timing["cache_cold"] == 1.0


def test_stderr_lines_are_kept_and_progress_becomes_events(tmp_path):
    sink, _, events, _ = row_sink(tmp_path)
    sink.stderr("llama-bench: benchmark 2/8: starting")
    sink.stderr("load_backend: loaded CPU backend")
    assert sink.printed == ["llama-bench: benchmark 2/8: starting", "load_backend: loaded CPU backend"]
    assert sink.observer.lines == sink.printed
    assert (
        [k for k, _ in events].count("progress") == 1
        and events[0][1]["done"] == 1
        and events[0][1]["total"] == 8
    )


def test_finish_saves_a_row_no_line_handed_over_and_times_the_whole_output(tmp_path):
    """An interrupted stream hands over no last line: the process's whole stdout still holds that row."""
    sink, saver, _, _ = row_sink(tmp_path)
    sink.stdout(json.dumps(ROWS[0]))
    n_rows, timing = sink.finish(json.dumps(ROWS[0]) + "\n" + json.dumps(ROWS[1]), 100.0)
    assert n_rows == 2 and [r.avg_ts for r in saver.saved] == [ROWS[0]["avg_ts"], ROWS[1]["avg_ts"]]
    tests_s = sum(sum(r["samples_ns"]) for r in ROWS[:2]) / 1e9
    assert timing == {"wall_s": 100.0, "tests_s": round(tests_s, 3), "startup_s": round(100.0 - tests_s, 3)}
