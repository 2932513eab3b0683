"""Breaker round 15, findings 5, 9 and 10 (docs/reliability-log.md): claims a record makes that its own
evidence contradicts. Each test fails on the code before its fix:

- 5: an energy block claiming 1,900 W on a GPU whose own block names a 700 W power cap was valid (tok/J
  5.5x too low); a window in the year 2121 beside a 2026 test_time was kept without a word;
- 9: `toolkit_flags` an imported row merely claimed (gpu-shared, throttled:hw-thermal, clock-idle, with
  no `toolkit_telemetry` at all) were kept, and `toolkit compare` held a real 2x regression as "not
  counted" (exit 0, not 6);
- 10: `toolkit measure -- cat old.jsonl` stamped its window on rows measured five days before it
  started, and on a row whose timed repetitions (53 s) outlast the command."""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import DATA
from tests.support.runs import tk
from toolkit.bench import measure
from toolkit.results import importer, telemetry_check
from toolkit.results.records import ResultStore
from toolkit.results.telemetry_check import REASON, energy_contradiction, window_contradiction
from toolkit.results.telemetry_flags import window_flags

ALONE = DATA / "h200-measure" / "alone.jsonl"  # `toolkit measure` on the lent H200 (real output)
CONTENDED = DATA / "h200-measure" / "contended.jsonl"
ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"  # test_time 2026-11-29


def _row(path: Path = ALONE, n: int = 0) -> dict[str, Any]:
    return json.loads(path.read_text().splitlines()[n])


def _import(tmp_path: Path, rows: list[dict[str, Any]], name: str = "m.jsonl", label: str = "x"):
    src = tmp_path / "in" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = ResultStore(tmp_path / "r")
    return importer.import_files(store, [src], label=label), store, src


def _at_power(row: dict[str, Any], watts: float, mean: float | None = None) -> dict[str, Any]:
    """Row `row` with its window's energy scaled to `watts` consistently (the window's, its GPU's and
    the counter's energy, both tok/J; power_w_mean and power_w_max `mean`, else `watts`)."""
    row = copy.deepcopy(row)
    t = row["toolkit_telemetry"]
    g = next(iter(t["gpus"].values()))
    e = watts * t["duration_s"]
    t["energy_j"] = g["energy_j"] = g["energy_counter_j"] = e
    g["power_w_mean"] = g["power_w_max"] = watts if mean is None else mean
    t["tok_per_j"] = g["tok_per_j"] = t["tokens"] / e
    return row


# ------------------------------------------------------------------------- 5. energy above the cap


@pytest.mark.parametrize(
    "watts, mean", [(1900.0, None), (1999.0, None), (800.0, 1000.0)], ids=["1900 W", "1999 W", "mean 1000 W"]
)
def test_an_energy_above_the_boards_own_cap_is_invalid_through_the_contradiction_door(
    tmp_path: Path, watts: float, mean: float | None
) -> None:
    """The finding: 1,900 W (and 1,999 W: inside POWER_W's 1-2000 W) on a board whose own block says
    cap_w 700 W was valid. A mean power (energy / duration, or power_w_mean) above CAP_SLACK x the cap
    is the energy contradiction every other one is: energy left out, energy-invalid, the speed kept."""
    row = _at_power(_row(), watts, mean)
    why = energy_contradiction(row["toolkit_telemetry"], row)
    assert why is not None and "700 W (cap_w)" in why and f"{telemetry_check.CAP_SLACK:g}x" in why, why
    res, store, src = _import(tmp_path, [row])
    assert len(res.notes) == 1 and res.notes[0].startswith(f"{src}:1: ") and "power cap 700 W" in res.notes[0]
    (rec,) = store.results()
    assert rec.avg_ts == row["avg_ts"] and f"energy-invalid:{REASON}" in rec.model_extra["flags"]
    assert rec.telemetry["energy_valid"] is False and rec.telemetry["energy_j"] is None


def test_a_power_within_the_caps_slack_and_the_real_rows_stay_valid() -> None:
    """A window's mean may exceed the cap by excursions shorter than the controller's ~1 s average:
    800 W on 700 W (1.14x) stays; so does every real H200 row, the contended ones held at the cap."""
    row = _at_power(_row(), 800.0)
    assert energy_contradiction(row["toolkit_telemetry"], row) is None
    for path in (ALONE, CONTENDED):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            assert energy_contradiction(r["toolkit_telemetry"], r) is None, path


def test_a_window_far_from_its_rows_test_time_or_in_the_future_is_not_the_rows(tmp_path: Path) -> None:
    """The finding's second part: t0/t1 moved 3e9 s (to 2121), consistent with each other, were kept
    beside a 2026 test_time. The validity pass's future check of test_time (FUTURE_SLACK_S after this
    host's clock) now applies to the window, and to the window against its row's test_time either way:
    such a block is not the row's, left out with its flags, said; the row's speed is kept."""
    row = _row()
    t = row["toolkit_telemetry"]
    now = t["t1"] + 3600.0

    def moved(by: float) -> dict[str, Any]:
        return {**t, "t0": t["t0"] + by, "t1": t["t1"] + by}

    assert window_contradiction(t, row, now) is None
    assert window_contradiction(moved(3600.0), row, now + 3600.0) is None  # an hour: a long warm-up, a delay
    assert "after this host's clock" in window_contradiction(moved(3e9), row, now)
    assert "days after the row's test_time" in window_contradiction(moved(2 * 86400.0), row, now + 3 * 86400)
    assert "days before the row's test_time" in window_contradiction(moved(-2 * 86400.0), row, now)
    future = {**row, "toolkit_telemetry": moved(3e9), "toolkit_flags": ["gpu-shared"]}
    res, store, src = _import(tmp_path, [future])
    (rec,) = store.results()
    assert rec.telemetry is None and "gpu-shared" not in (rec.model_extra.get("flags") or [])
    assert rec.avg_ts == row["avg_ts"]
    (note,) = res.notes
    assert note.startswith(f"{src}:1: ") and "not the row's window" in note and "2121-" in note, note
    assert "gpu-shared: its toolkit_telemetry is left out" in note


# ------------------------------------------------------------------------- 9. flags without evidence


def _pair(commit: str, scale: float) -> list[dict[str, Any]]:
    """The aaaa1111 rows of tests/data/cases/two-builds-one-file.jsonl as build `commit`, one sample
    each, `scale` x as fast (avg, samples and avg_ns consistent)."""
    out = []
    for line in (DATA / "cases" / "two-builds-one-file.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["build_commit"] != "aaaa1111":
            continue
        ts = r["avg_ts"] * scale
        ns = round((r["n_prompt"] + r["n_gen"]) * 1e9 / ts)
        r.update(build_commit=commit, avg_ts=ts, samples_ts=[ts], avg_ns=ns, samples_ns=[ns])
        r.update(stddev_ts=0.0, stddev_ns=0)
        out.append(r)
    return out


def test_flags_a_row_claims_without_telemetry_are_left_out_and_compare_counts_the_regression(
    tmp_path: Path,
) -> None:
    """The finding: B = A at half the speed plus `toolkit_flags: [gpu-shared, throttled:hw-thermal]` and
    no `toolkit_telemetry`: compare held both slowdowns "not counted" and exited 0. The flags are left
    out (one note naming file:line and the flags) and compare exits 6."""
    a, b = _pair("e1", 1.0), _pair("e2", 0.5)
    for r in b:
        r["toolkit_flags"] = ["gpu-shared", "throttled:hw-thermal"]
    _import(tmp_path, a, "a.jsonl", "a")
    res, store, src = _import(tmp_path, b, "b.jsonl", "b")
    (note,) = res.notes
    assert note.startswith(f"{src}:1 (and 1 more row(s) of the file): "), note
    assert "gpu-shared: the row has no toolkit_telemetry" in note and "throttled:hw-thermal" in note
    for rec in store.results():
        assert not {"gpu-shared", "throttled:hw-thermal"} & set(rec.model_extra.get("flags") or [])
        if rec.image.name == "b":
            assert set(rec.model_extra["imported"]["left_out"]) == {"gpu-shared", "throttled:hw-thermal"}
    cmp = tk(tmp_path, "compare", "a", "b", "--results", str(tmp_path / "r"))
    assert cmp.returncode == 6 and "2 regressions" in cmp.stdout, cmp.stdout + cmp.stderr


def test_many_rows_with_unsupported_flags_are_one_line(tmp_path: Path) -> None:
    """A file of 40 rows, each claiming clock-idle: one counted note, not 40."""
    base = _pair("e3", 1.0)[0]
    rows = []
    for i in range(40):
        r = {**base, "n_prompt": 64 + i, "toolkit_flags": ["clock-idle"]}
        r["avg_ns"] = round(r["n_prompt"] * 1e9 / r["avg_ts"])
        r["samples_ns"] = [r["avg_ns"]]
        rows.append(r)
    res, store, src = _import(tmp_path, rows)
    assert res.records == 40 and len(res.notes) == 1, res.notes
    assert (
        res.notes[0].startswith(f"{src}:1 (and 39 more row(s) of the file): ")
        and "clock-idle" in res.notes[0]
    )


def test_a_flag_its_own_block_does_not_show_is_left_out_and_unknown_names_too(tmp_path: Path) -> None:
    """A real block (one process on the GPU at 1980 MHz, no throttling, stock power, 0.2 other cores)
    beside claimed telemetry flags it does not show, and names `toolkit measure` never writes: all left
    out, each named with why."""
    row = _row()
    claimed = ["gpu-shared", "clock-idle", "throttled:hw-thermal", "power-not-stock", "host-busy"]
    row["toolkit_flags"] = [*claimed, "nonsense-flag", "gpu-shared:x", 5, "a|b"]
    res, store, _src = _import(tmp_path, [row])
    (rec,) = store.results()
    assert not (rec.model_extra.get("flags") or []), rec.model_extra.get("flags")
    left = rec.model_extra["imported"]["left_out"]
    assert set(left) == {*claimed, "nonsense-flag", "gpu-shared:x", "5", "'a|b'"}, left
    assert left["nonsense-flag"] == left["5"] == "not a flag `toolkit measure` writes"
    assert "throttle_share" in left["throttled:hw-thermal"] and "one process" in left["gpu-shared"]


def test_flags_the_block_shows_are_kept_also_under_older_thresholds(tmp_path: Path) -> None:
    """The contended H200 rows keep gpu-shared (two processes), throttled:sw-power-cap (every sample)
    and host-busy (a neighbour core: raised under the rule before issue 31 narrowed it); a measure
    row's energy-invalid:<reason> stays where its GPU says that reason."""
    res, store, _src = _import(tmp_path, [_row(CONTENDED, n) for n in range(6)])
    assert not res.notes, res.notes
    for rec in store.results():
        assert rec.model_extra["flags"] == ["gpu-shared", "throttled:sw-power-cap", "host-busy"]
    depth = _row(DATA / "h200-depth-qwen3moe-30b-q4_0-3runs.jsonl", 0)
    res, store, _src = _import(tmp_path / "d", [depth])
    (rec,) = store.results()
    assert rec.model_extra["flags"] == ["energy-invalid:window_short_for_counter_step"] and not res.notes


def test_every_flag_the_observer_raises_is_one_the_import_knows() -> None:
    """A window whose every figure raises a flag: each flag window_flags gives is one its
    own block supports (nothing `toolkit measure` writes is left out of a faithful file)."""
    g = {
        "vendor": "nvidia",
        "pids": [1, 2],
        "active_pids": [1, 2],
        "procs_max": 2,
        "throttle_samples": 8,
        "throttle_share": {"hw-thermal": 1.0},
        "throttle_count": {"hw-thermal": 8},
        "busy_pct_mean": 90.0,
        "sclk_mhz_median": 41.0,
        "not_stock": ["cap 225 W below default 300 W"],
        "implausible": {"power_w": 1},
        "dropped": True,
        "energy_valid": False,
        "energy_invalid_reason": "no_power_source",
    }
    host = {"other_cpu_cores_mean": 3.0, "own_cpu_cores_mean": 1.0, "cpus_online": 4, "achieved_hz": 1.0}
    block = {"rate_hz": 10.0, "gpus": {"nv": g}, "host": {**host, "implausible": {}}}
    raised = window_flags(block, {1})
    assert len(raised) == 9, raised
    assert all(telemetry_check.flag_unsupported(f, block) is None for f in raised), raised


# ------------------------------------------------------------------------- 10. measure's own rows


def test_measure_stamps_no_window_on_rows_it_did_not_measure(tmp_path: Path) -> None:
    """The finding: `toolkit measure -- cat old.jsonl` gave six rows of 2026-11-29 the window of a
    command run days later. Each is written without telemetry or flags; the first three are named,
    the rest counted."""
    notes: list[str] = []
    m = measure.run_measured(
        ["cat", str(ROWS)], trace_path=tmp_path / "t.jsonl", gpus=[], on_note=notes.append
    )
    assert len(m.rows) == 6 and m.foreign == 6
    assert all(r["toolkit_telemetry"] is None and r["toolkit_flags"] == [] for r in m.rows)
    named = [n for n in notes if n.startswith("row ")]
    assert len(named) == measure.FOREIGN_SAID and "before the command started" in named[0], notes
    assert "row 1: not measured by this command (its test_time 2026-11-29T16:54:22Z is" in named[0]
    assert any(
        n.startswith("3 more row(s) not measured by this command (rows 4, 5, 6): no telemetry") for n in notes
    ), notes


def test_measure_stamps_no_window_on_a_row_whose_repetitions_outlast_it(tmp_path: Path) -> None:
    """The finding's fake bench: a row of today whose samples_ns sum to 53 s, printed by a command that
    ran for a moment; beside it a row the command could have measured, which keeps its window."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    slow = {**_row(ROWS), "test_time": now, "samples_ns": [10_600_000_000] * 5}
    quick = {**_row(ROWS), "test_time": now, "samples_ns": [1000, 1000]}
    code = f"import json; print(json.dumps({slow!r})); print(json.dumps({quick!r}))"
    notes: list[str] = []
    m = measure.run_measured(
        [sys.executable, "-c", code], trace_path=tmp_path / "t.jsonl", gpus=[], on_note=notes.append
    )
    first, second = m.rows
    assert first["toolkit_telemetry"] is None and m.foreign == 1
    assert any("the sum of samples_ns, 53 s) outlast the command's" in n for n in notes), notes
    assert second["toolkit_telemetry"] is not None


def test_the_clock_slack_of_a_row_measure_did_measure() -> None:
    """llama-bench's test_time drops the fraction of its second: a row stamped up to CLOCK_SLACK_S
    before the command's start is its own; a minute before, or after the row arrived, is not."""
    start = 1_800_000_000.5
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(start)))
    assert measure.not_measured_here({"test_time": stamp}, start, start + 1) is None
    late = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + 60))
    assert "after the row arrived" in measure.not_measured_here({"test_time": late}, start, start + 1)
    early = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start - 60))
    assert "60 s before the command started" in measure.not_measured_here(
        {"test_time": early}, start, start + 1
    )
    assert measure.not_measured_here({"samples_ns": [2e9]}, start, start + 1) is None
