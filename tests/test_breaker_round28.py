"""Breaker, round 28: what the integrity round's new rules held wrongly, and the leftovers round 27 named.

- a vLLM or SGLang record's `created` is its run's start (runners/vllm.py, sglang.py: `_base`), saved
  minutes later: a run started in between and alive at the save is concurrent with it, yet was shown
  `flag-unsupported:concurrent` (flag_claims.concurrent_problem held every runner's `created` as its save);
- a row of llama-bench before the device registry (2024) or of ik_llama.cpp joins gpu_info with "/"
  (get_gpu_info: `id += "/"`): two GPUs read as one, and -sm none -mg 1 on the second was refused;
- a telemetry block's `implausible` counts were held to nothing (a GPU's at most its samples);
- two `toolkit measure` runs started in one second wrote one default output, the second truncating the
  first's rows (found running `toolkit measure -- sleep 0.05` then `-- sleep 20` here).
Inputs: the real H200 `toolkit measure` rows of tests/data (edited), real `toolkit measure` runs of
`sleep`, and BenchRecords built as the runners build them. Each test fails before the fix."""

from __future__ import annotations

import json

from tests.support.runs import tk
from tests.support.stored import h200_rows, import_rows, matrix_project


def _record(**over):
    from toolkit.results.records import BenchRecord

    base = {
        "run_id": "20261205T100000Z-aaaaaa",
        "created": "2026-12-05T10:00:05+00:00",
        "image": {"name": "x", "ref": "x", "digest": "sha256:" + "0" * 64, "backend": "rocm"},
        "model": {"name": "m", "path": "m", "sha256": "0" * 64, "size_bytes": 1},
        "test": "serve c1",
        "axis": "served",
        "avg_ts": 100.0,
    }
    return BenchRecord.model_validate({**base, **over})


def test_a_served_record_saved_after_a_later_run_started_is_concurrent():
    """vLLM's records keep the `created` of the run's start (vllm.py `_base`, before the latency and serve
    phases): a run started 5 min later and alive at the save (records.Saver) is backed. Before: 'other run
    ... started 300 s after this record was created'. A llama-bench record (created as saved) still is not."""
    from toolkit.results.flag_claims import concurrent_problem

    later = {"other_runs": ["20261205T100505Z-bbbbbb (pid 7, writing r from this container engine)"]}
    for runner in ("vllm", "sglang"):
        assert concurrent_problem(_record(runner=runner, concurrent=later)) is None, runner
    assert "started 300 s after" in concurrent_problem(_record(runner="llama-bench", concurrent=later))
    own = {"other_runs": ["20261205T100000Z-aaaaaa"]}
    assert "its own run" in concurrent_problem(_record(runner="vllm", concurrent=own))


def test_a_slash_joined_gpu_info_counts_each_device(tmp_path):
    """Two GPUs as an older llama-bench or ik_llama.cpp writes them ("A/B"): -sm none -mg 1 runs on the
    second. Before: refused 'main_gpu is 1 with split_mode none, but the row lists 1 GPU device(s)'."""
    from toolkit.runtimes.llama_bench.settings_check import settings_problem

    two = {"split_mode": "none", "main_gpu": 1, "gpu_info": "NVIDIA GeForce RTX 3090/NVIDIA GeForce RTX 3090"}
    assert settings_problem(two) is None
    assert "lists 2 GPU device(s)" in settings_problem({**two, "main_gpu": 2})
    # mainline's ", " join and a description's own comma in brackets, as before
    assert settings_problem({**two, "gpu_info": "AMD Radeon AI PRO R9700, AMD Radeon AI PRO R9700"}) is None
    lone = {**two, "gpu_info": "llvmpipe (LLVM 19.1.7, 256 bits)"}
    assert "lists 1 GPU device(s)" in settings_problem(lone)
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")[:1]
    rows[0].update(split_mode="none", main_gpu=1, gpu_info="NVIDIA H200/NVIDIA H200", devices="auto")
    src = tmp / "x.jsonl"
    src.write_text(json.dumps(rows[0]) + "\n")
    res = tk(tmp, "import", "--results", "r", "--label", "x", str(src))
    assert res.returncode == 0 and "main_gpu" not in res.stdout + res.stderr, res.stdout + res.stderr


def test_implausible_counts_are_held_to_the_windows_samples(tmp_path):
    """A GPU window of 3 samples stating 50 power readings dropped as implausible (and so raising
    `sensor-implausible`). Before: imported with its block and the flag."""
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")[:1]
    g = next(iter(rows[0]["toolkit_telemetry"]["gpus"].values()))
    g["implausible"] = {"power_w": int(g["samples"]) + 47}
    out = import_rows(tmp, rows, "alone")
    assert "implausible.power_w" in out, out
    from toolkit.results.window_check import window_problem

    ok = json.loads(json.dumps(rows[0]["toolkit_telemetry"]))
    next(iter(ok["gpus"].values()))["implausible"] = {"power_w": 1}
    ok["host"]["implausible"] = {"steal_pct": 1}
    assert window_problem(ok) is None
    ok["host"]["implausible"] = {"steal_pct": -1}
    assert "host.implausible.steal_pct" in window_problem(ok)


def test_two_measures_in_one_second_keep_both_outputs(tmp_path):
    """Real `toolkit measure` runs of a 0.01-s command, three in a row (within a second or two). Before:
    both wrote results/measure/<second>.jsonl and only the last command's row was left."""
    tmp = matrix_project(tmp_path)
    for cmd in ("true", "false", "true"):
        tk(tmp, "measure", "--results", "r", "--", cmd)
    rows = [
        json.loads(x)
        for p in sorted((tmp / "r" / "measure").glob("*.jsonl"))
        if ".trace." not in p.name
        for x in p.read_text().splitlines()
    ]
    assert sorted(r["command"][0] for r in rows) == ["false", "true", "true"], rows


def test_a_run_that_ended_during_a_test_still_flags_it(tmp_path):
    """Found running two `toolkit bench --allow-concurrent` of the CPU image here: run B's tg1024 was
    measured from 10:59:49 to 11:00:18 while run A ran to 11:00:17, yet stored without `concurrent` (the
    Saver asked only at the save, after A had ended). Now a run alive at the previous save (when this
    test started: llama-bench's next test starts as the row before it is printed) flags it too. The
    other run is a callable standing in for the guards (a second run's lifetime cannot be timed here)."""
    from tests.support.records import make_record
    from toolkit.results.records import ResultStore, Saver

    alive = [["20261205T105824Z-5b3c1d"]]
    saver = Saver(ResultStore(tmp_path / "r"), concurrent=lambda: alive[0])
    saver.save(make_record("cpu", "cpu", p=512, avg=1.0))
    alive[0] = []  # run A ends while the next test runs
    saver.save(make_record("cpu", "cpu", p=1024, avg=1.0))
    saver.save(make_record("cpu", "cpu", p=2048, avg=1.0))
    got = [(r.model_extra or {}).get("concurrent") for r in ResultStore(tmp_path / "r").results()]
    assert got[:2] == [{"other_runs": ["20261205T105824Z-5b3c1d"]}] * 2 and got[2] is None, got


def test_a_crash_after_the_rows_of_a_streamed_file_is_noted(tmp_path):
    """Real H200 rows repeated past STREAM_ABOVE (1 MiB: read as a stream) with a lost device after them,
    as jsonl and as a json array closed then crashed at exit. Before: the note came only for a file read
    whole (round 27's leftover); now the lines after the last row are read for it there too."""
    from toolkit.results.import_read import STREAM_ABOVE

    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")
    lines, size, i = [], 0, 0
    while size <= STREAM_ABOVE:
        r = dict(rows[i % len(rows)], n_depth=i)  # each a test of its own
        lines.append(json.dumps(r))
        size, i = size + len(lines[-1]) + 1, i + 1
    lost = "terminate called after throwing an instance of 'vk::DeviceLostError'"
    (tmp / "a.jsonl").write_text("\n".join(lines) + f"\n{lost}\n")
    (tmp / "b.json").write_text("[\n" + ",\n".join(lines) + "\n]\nSegmentation fault (core dumped)\n")
    res = tk(tmp, "import", "--results", "r", "--label", "a", "a.jsonl")
    assert f"did not end: line {i + 1}" in res.stdout + res.stderr, res.stdout + res.stderr
    res = tk(tmp, "import", "--results", "r2", "--label", "b", "b.json")
    assert "crashed after it ended" in res.stdout + res.stderr, res.stdout + res.stderr


def test_a_stored_gpu_or_backend_its_raw_row_does_not_state_is_skipped(tmp_path):
    """Round 27's leftover: made_problem held gpu_info and backends only where raw states them, so a
    record given a GPU (or a backend) its raw row never named was shown on that GPU. normalize reads ""
    there (check.backends_of; an md table's device lines are put into its rows by the reader)."""
    from tests.support.stored import edit_stored

    for key in ("gpu_info", "backends"):
        tmp = matrix_project(tmp_path / key)
        import_rows(tmp, h200_rows("alone.jsonl")[:1], "alone")
        edit_stored(tmp, lambda r, k=key: r["raw"].pop(k))
        res = tk(tmp, "report", "--results", "r", "--format", "json")
        assert f"{key} " in res.stderr and "its raw row states none" in res.stderr, res.stderr


def test_a_long_pid_list_is_read_in_linear_time():
    """A stored window's pids and active_pids of 60,000 each (a hand's or a runaway writer's): the
    membership test was a list scan per pid, 3.6e9 comparisons (about 13 s here; 200,000 of each: minutes
    per record, each time a report reads it). Now a set: milliseconds."""
    import time

    from toolkit.results.window_check import window_problem

    n = 60_000
    g = {"samples": 3, "period_s": 0.1, "procs_max": 1, "pids": list(range(n)), "active_pids": list(range(n))}
    t0 = time.monotonic()
    assert window_problem({"duration_s": 1.0, "gpus": {"a": g}}) is None
    assert time.monotonic() - t0 < 2.0
    g["active_pids"] = [*range(n), [7]]  # an unhashable entry is compared by its repr, not a traceback
    assert "holds [7]" in window_problem({"duration_s": 1.0, "gpus": {"a": g}})
