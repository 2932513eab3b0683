"""Breaker round 31 (integrity): values a record's own evidence contradicts and flags its own figures
raise or rule out, the shapes earlier rounds left. A window whose caps show a lowered power cap without
`power-not-stock` (telemetry_check.cap_below_default, read by window_flags); other processes' CPU beyond
the host's own busy total, raising host-busy (telemetry_flags._host_share_problem); a throttle share
that is not its throttle count (_throttle_share_problem); a stored record's samples against the
repetitions its command asked (raw_check.asked_repetitions); a test_time or `created` before the run
its id names started (time_check._before_its_run). Inputs: the real H200 `toolkit measure` rows and the
CPU `toolkit bench` records of tests/data, edited as a hand or another tool would, read through the
CLI. Each test fails on the code before the fix but the guards, which say so."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

from tests.support.runs import tk
from tests.support.stored import edit_stored, h200_rows, import_rows, matrix_project

DATA = Path(__file__).parent / "data"


def _gpu(row):
    return next(iter(row["toolkit_telemetry"]["gpus"].values()))


def _report(tmp) -> tuple[list[dict], dict, str]:
    res = tk(tmp, "report", "--results", "r", "--format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    rep = json.loads(res.stdout)
    cells = [v for t in rep["tables"] for row in t["rows"] for v in row.values() if isinstance(v, dict)]
    return cells, rep, res.stderr


def test_a_window_whose_own_caps_show_a_lowered_cap_is_power_not_stock(tmp_path):
    """Before: an H200 window at cap_w 300 W beside its default 700 W, its not_stock list (and flags)
    empty, showed a clean cell: the flag was read from the not_stock list alone. The summary's caps are
    its last state sample's, whose reasons not_stock always holds."""
    tmp = matrix_project(tmp_path)
    row = h200_rows("alone.jsonl")[0]
    _gpu(row)["cap_w"] = 300.0
    import_rows(tmp, [row], "capped")
    ((cell,), _, _) = _report(tmp)
    assert "power-not-stock" in cell["flags"], cell["flags"]
    # a stored record the same (flag and not_stock stripped by hand after an honest import)
    tmp2 = matrix_project(tmp_path / "b")
    import_rows(tmp2, h200_rows("alone.jsonl")[:1], "stock")
    edit_stored(
        tmp2, lambda r: r["telemetry"]["gpus"][next(iter(r["telemetry"]["gpus"]))].update(cap_w=300.0)
    )
    ((cell,), _, _) = _report(tmp2)
    assert "power-not-stock" in cell["flags"], cell["flags"]


def test_stock_caps_raise_no_power_not_stock_guard(tmp_path):
    """Guard (passes before and after): the real rows' caps (700 W of 700 W) and a cap within the
    drivers' milliwatt rounding (699.6 W) raise nothing."""
    tmp = matrix_project(tmp_path)
    row = h200_rows("alone.jsonl")[0]
    _gpu(row)["cap_w"] = 699.6
    import_rows(tmp, [row, *h200_rows("alone.jsonl")[1:2]], "stock")
    cells, _, _ = _report(tmp)
    assert all("power-not-stock" not in c["flags"] for c in cells), cells


def test_other_cpu_beyond_the_hosts_busy_total_is_no_windows(tmp_path):
    """Before: 15.5 other cores on a 16-core host whose busy total was 1.17 cores (0.96 of them the
    benchmark's) kept `host-busy` and held the cell. Now the block is no window's: left out at import
    with its flag (the speed kept), a stored one skipped."""
    tmp = matrix_project(tmp_path)
    row = h200_rows("alone.jsonl")[0]
    row["toolkit_telemetry"]["host"]["other_cpu_cores_mean"] = 15.5
    row["toolkit_flags"] = ["host-busy"]
    out = import_rows(tmp, [row], "busy")
    assert "other_cpu_cores_mean 15.5 is more than its busy_cores_mean" in out, out
    ((cell,), _, _) = _report(tmp)
    assert "host-busy" not in cell["flags"], cell["flags"]
    tmp2 = matrix_project(tmp_path / "b")
    import_rows(tmp2, h200_rows("alone.jsonl")[:1], "stored")
    edit_stored(tmp2, lambda r: r["telemetry"]["host"].update(other_cpu_cores_mean=15.5))
    cells, _, err = _report(tmp2)
    assert cells == [] and "other_cpu_cores_mean 15.5" in err, err


def test_the_real_contended_host_figures_are_a_windows_guard(tmp_path):
    """Guard (passes before and after): the contended H200 rows (other processes' CPU 1.07 cores, busy
    2.07, own 1.0) import with their telemetry and flags."""
    tmp = matrix_project(tmp_path)
    out = import_rows(tmp, DATA / "h200-measure" / "contended.jsonl", "contended")
    assert "not a window's figures" not in out, out
    cells, _, _ = _report(tmp)
    assert cells and all(c["flags"] for c in cells), cells


@pytest.mark.parametrize("counts", [{"hw-thermal": 0}, {}], ids=["count-0", "no-count"])
def test_a_throttle_share_its_count_does_not_give_is_no_windows(tmp_path, counts):
    """Before: a share of 1.0 for hw-thermal beside a count of 0 (or none) in a 1-sample window kept
    `throttled:hw-thermal` (held by the share alone) and held the cell."""
    tmp = matrix_project(tmp_path)
    row = h200_rows("alone.jsonl")[0]
    _gpu(row).update(throttle_share={"hw-thermal": 1.0}, throttle_count=counts)
    row["toolkit_flags"] = ["throttled:hw-thermal"]
    out = import_rows(tmp, [row], "thermal")
    assert "throttle_share.hw-thermal 1 is not its throttle_count.hw-thermal" in out, out
    ((cell,), _, _) = _report(tmp)
    assert not any(f.startswith("throttled") for f in cell["flags"]), cell["flags"]


def _cpu_store(tmp: Path, edit) -> None:
    """tmp/r holding the real CPU `toolkit bench` records of tests/data/results-cpu-a.jsonl, the first
    one passed through `edit`."""
    lines = [json.loads(x) for x in (DATA / "results-cpu-a.jsonl").read_text().splitlines() if x.strip()]
    edit(lines[0])
    folder = tmp / "r" / "a504e0178239"
    folder.mkdir(parents=True)
    (folder / "bench.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _keep(r: dict, n: int) -> None:
    """The first `n` repetitions of record `r` and of its raw row, every figure recomputed from them."""
    raw = r["raw"]
    raw["samples_ns"], raw["samples_ts"] = raw["samples_ns"][:n], raw["samples_ts"][:n]
    r["samples_ts"] = raw["samples_ts"]
    raw["avg_ns"], raw["stddev_ns"] = (
        int(statistics.fmean(raw["samples_ns"])),
        int(statistics.stdev(raw["samples_ns"])),
    )
    raw["avg_ts"] = r["avg_ts"] = round(statistics.fmean(raw["samples_ts"]), 6)
    raw["stddev_ts"] = r["stddev_ts"] = round(statistics.stdev(raw["samples_ts"]), 6)


def test_samples_fewer_than_the_commands_repetitions_are_skipped(tmp_path):
    """Before: 3 of `-r 10`'s repetitions kept in the record and its raw row alike, every figure
    recomputed (566.8 t/s where the run measured 858.5), shown as a 3-sample cell."""
    tmp = matrix_project(tmp_path)
    _cpu_store(tmp, lambda r: _keep(r, 3))
    cells, rep, err = _report(tmp)
    assert "asked llama-bench for 10 repetitions (-r 10)" in err, err
    assert len(cells) == 5 and all(c["samples"] == 10 for c in cells), cells


def test_records_with_their_commands_repetitions_are_read_guard(tmp_path):
    """Guard (passes before and after): the real records, 10 samples of `-r 10` each, all shown."""
    tmp = matrix_project(tmp_path)
    _cpu_store(tmp, lambda r: None)
    cells, _, err = _report(tmp)
    assert len(cells) == 6 and "contradicts" not in err, err


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("test_time", lambda r: r["raw"].update(test_time="2026-06-01T10:00:00Z")),
        (
            "test_time",  # `created` moved back with it: its own test_time no longer lies after it
            lambda r: (
                r.update(created="2026-06-01T10:00:30+00:00"),
                r["raw"].update(test_time="2026-06-01T10:00:00Z"),
            ),
        ),
    ],
    ids=["test_time", "test_time-and-created"],
)
def test_a_record_dated_before_its_own_run_started_is_skipped(tmp_path, field, edit):
    """Before: a record of run 20261129T170627Z-6891c7 whose test_time (its image label moved back with
    it, and its `created` too) said 2026-06-01 was shown as measured then."""
    tmp = matrix_project(tmp_path)

    def both(r):
        edit(r)
        r["image"]["labels"]["org.opencontainers.image.created"] = "2026-05-01T00:00:00Z"

    _cpu_store(tmp, both)
    cells, rep, err = _report(tmp)
    assert f"{field} 2026-06-01 10:00:00 UTC lies before its run 20261129T170627Z-6891c7 started" in err, err
    assert len(cells) == 5, cells
    assert "2026-06-01" not in json.dumps(rep["provenance"]), rep["provenance"]


def test_an_import_is_not_held_to_its_import_run_id_guard(tmp_path):
    """Guard (passes before and after): imported rows measured long before their import (run id
    `import-<now>`) are read as measured then."""
    tmp = matrix_project(tmp_path)
    shutil.copy(DATA / "llamabench-b5163-readme.jsonl", tmp / "old.jsonl")
    import_rows(tmp, tmp / "old.jsonl", "old")
    cells, _, err = _report(tmp)
    assert cells and "lies before its run" not in err, err


_INTEGRAL_ONLY = {  # an NVML window of 0.19 s whose only energy is an integral of its 1-s averaged power
    "energy_counter_j": None,
    "energy_counter_invalid_reason": "no_power_source",
    "energy_integrated_invalid_reason": None,
}


@pytest.mark.parametrize(
    "edit",
    [
        lambda g: g.update(_INTEGRAL_ONLY, energy_integrated_j=g["energy_j"], energy_source="counter"),
        lambda g: g.update(energy_integrated_j=20.0, energy_integrated_invalid_reason=None),
    ],
    ids=["integral-labelled-counter", "counter-the-integral-contradicts"],
)
def test_an_energy_its_own_results_do_not_give_is_refused(tmp_path, edit):
    """Before: an energy labelled `counter` beside no valid counter (the integral of a 1-s averaged
    power over 0.19 s, which energy_rule refuses when labelled as what it is) showed 38.2 tok/J as
    valid; so did a counter beside a valid integral 70 % below it (counter_disagrees_with_power)."""
    tmp = matrix_project(tmp_path)
    row = h200_rows("alone.jsonl")[0]
    edit(_gpu(row))
    out = import_rows(tmp, [row], "energy")
    assert "not its own results' choice" in out or "its own results give none" in out, out
    ((cell,), _, _) = _report(tmp)
    assert cell["tok_per_j"] is None, cell
    tmp2 = matrix_project(tmp_path / "b")
    import_rows(tmp2, h200_rows("alone.jsonl")[:1], "stored")
    edit_stored(tmp2, lambda r: edit(next(iter(r["telemetry"]["gpus"].values()))))
    cells, _, err = _report(tmp2)
    assert cells == [] and "contradicts itself" in err, err


def test_energies_of_the_real_windows_are_their_results_choice_guard(tmp_path):
    """Guard (passes before and after): every real H200 window keeps its energy (alone: counter, valid)."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, DATA / "h200-measure" / "alone.jsonl", "alone")
    cells, _, _ = _report(tmp)
    assert cells and all(c["tok_per_j"] for c in cells), cells


def _latency_store(tmp: Path) -> None:
    """tmp/r holding a real `vllm bench latency` result (vLLM 0.16.0) imported as the output-1 run of
    input 128 and, 0.5 s longer each, as its output-33 run: a prefill and a decode record."""
    short = json.loads((DATA / "vllm-0.16.0-latency.json").read_text())
    long = {
        "avg_latency": short["avg_latency"] + 0.5,
        "latencies": [x + 0.5 for x in short["latencies"]],
        "percentiles": {k: v + 0.5 for k, v in short["percentiles"].items()},
    }
    (tmp / "lat-128-1.json").write_text(json.dumps(short))
    (tmp / "lat-128-33.json").write_text(json.dumps(long))
    res = tk(tmp, "import", "--results", "r", "--label", "v", "lat-128-1.json", "lat-128-33.json")
    assert res.returncode == 0, res.stdout + res.stderr


def _times(k: float):
    def edit(r):
        r["avg_ts"] *= k
        r["samples_ts"] = [x * k for x in r["samples_ts"]]
        r["stddev_ts"] = r["stddev_ts"] * k if r.get("stddev_ts") else r.get("stddev_ts")

    return edit


@pytest.mark.parametrize("test", ["pp128", "tg32"])
def test_a_stored_latency_record_faster_than_its_own_result_is_skipped(tmp_path, test):
    """Before: a stored vLLM latency record edited to 100x its speed (pp128 at 208,047 tok/s beside its
    own result's 0.0615 s: 2,080 tok/s) was shown as measured: only served records were held to their
    result."""
    tmp = matrix_project(tmp_path)
    _latency_store(tmp)
    cells, _, _ = _report(tmp)
    assert len(cells) == 2, cells
    edit = _times(100)
    edit_stored(tmp, lambda r: edit(r) if r["test"] == test else None)
    cells, _, err = _report(tmp)
    assert len(cells) == 1 and "is not n_" in err and "contradicts itself" in err, err


def test_a_stored_latency_records_sample_is_held_to_its_latency(tmp_path):
    """Before: one sample of the prefill record moved to 10x (avg_ts kept) was shown as the cell's max."""
    tmp = matrix_project(tmp_path)
    _latency_store(tmp)
    edit_stored(
        tmp,
        lambda r: r["samples_ts"].__setitem__(0, r["samples_ts"][0] * 10) if r["test"] == "pp128" else None,
    )
    cells, _, err = _report(tmp)
    assert len(cells) == 1 and "samples_ts[0]" in err, err
