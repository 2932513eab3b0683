"""Round 20 (integrity): a stored record's telemetry flags held to its own stored telemetry block by the
rule the bench raises them by (results.telemetry_flags.checked_flags), a GPU's mean power held to the
rated power of the board its row names (core.gpuspecs board_power_w), and a stored block's figures held
to physics (telemetry_flags.figures_problem). Each test fails on the code before the fix. Inputs: the
real H200 `toolkit measure` rows of tests/data/h200-measure (alone: an idle H200; contended: another
tenant, held at the power cap), edited as a hand or another tool would."""

from __future__ import annotations

import json
from typing import Any

from tests.support.runs import tk
from tests.support.stored import edit_stored, h200_rows, import_rows, matrix_project


def _gpu(block: dict[str, Any]) -> dict[str, Any]:
    return next(iter(block["gpus"].values()))


def test_stored_telemetry_flags_its_block_does_not_show_are_unsupported_and_hold_nothing(tmp_path):
    """An idle H200's records edited to carry host-busy, clock-idle and throttled:hw-thermal: before, the
    verdict was `not decided (telemetry flags)` on flags nothing in their blocks raised."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    import_rows(tmp, h200_rows("contended.jsonl"), "busy")
    edit_stored(tmp, lambda r: r.update(flags=["host-busy", "clock-idle", "throttled:hw-thermal"]), "alone")
    text = tk(tmp, "report", "--results", "r")
    assert text.returncode == 0, text.stderr
    assert "**alone@import:" in text.stdout and "not decided (telemetry flags)" not in text.stdout, (
        text.stdout
    )
    assert "flag-unsupported:host-busy" in text.stdout and "flag-unsupported:clock-idle" in text.stdout
    assert "flag-unsupported:throttled:hw-thermal" in text.stdout
    doc = json.loads(tk(tmp, "report", "--results", "r", "--format", "json").stdout)
    assert "host-busy" not in json.dumps(doc.get("flagged", {})).replace("flag-unsupported:host-busy", "")


def test_stored_telemetry_flags_stripped_from_a_contended_record_come_back_from_its_block(tmp_path):
    """The contended H200's records with their flags removed: before, compare counted six regressions
    (B at 0.13-0.62 of A) and the report showed its cells clean. Its block holds sw-power-cap in every
    sample: throttled:sw-power-cap is raised again, and compare holds every row."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    import_rows(tmp, h200_rows("contended.jsonl"), "busy")
    edit_stored(tmp, lambda r: r.pop("flags", None), "busy")
    res = tk(tmp, "compare", "alone", "busy", "--results", "r", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["result"]["rows"]
    assert rows and all(r["held"] and not r["regression"] for r in rows), rows
    assert all("B:throttled:sw-power-cap" in r["flags"] for r in rows)


def test_an_imported_block_that_raises_a_flag_the_file_left_out_is_flagged(tmp_path):
    """A measure row whose block shows sw-power-cap in all 4 samples but whose toolkit_flags are []:
    before, imported and shown unflagged."""
    tmp = matrix_project(tmp_path)
    row = h200_rows("alone.jsonl")[0]
    g = _gpu(row["toolkit_telemetry"])
    g.update(
        samples=4,
        throttle_samples=4,
        throttle_share={"sw-power-cap": 1.0},
        throttle_count={"sw-power-cap": 4},
    )
    row["toolkit_flags"] = []
    import_rows(tmp, [row], "h200")
    stored = [
        json.loads(line) for f in (tmp / "r").glob("*/bench.jsonl") for line in f.read_text().splitlines()
    ]
    assert stored[0]["flags"] == ["throttled:sw-power-cap"], stored[0].get("flags")


def _pump(block: dict[str, Any], watts: float, cap: float | None) -> None:
    """Block `block` edited to a mean power of `watts` over its window (energy, samples, tok/J agreeing),
    its cap `cap`."""
    e = watts * block["duration_s"]
    for g in block["gpus"].values():
        g.update(energy_j=e, power_w_mean=watts, power_w_max=watts, cap_w=cap, cap_default_w=cap)
        g.update(energy_counter_j=e, tok_per_j=block["tokens"] / e)
    block.update(energy_j=e, tok_per_j=block["tokens"] / e)


def test_an_h200_block_above_its_boards_rated_power_is_refused_whatever_cap_it_names(tmp_path):
    """An H200 (700 W) block at 1,500 W with its cap removed, and one at 1,900 W naming a 10 kW cap:
    before, both imported with a valid tok/J (8.86, 6.68); a stored record so, shown."""
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")[:2]
    _pump(rows[0]["toolkit_telemetry"], 1500.0, None)
    _pump(rows[1]["toolkit_telemetry"], 1900.0, 10000.0)
    out = import_rows(tmp, rows, "h200")
    assert out.count("the rated power of the board its row names 700 W") == 1, out
    # round 23: the 10 kW cap is itself no H200's (cap_w held to 1.25x the board): the block left out
    assert "cap_w is 10000.0" in out, out
    text = tk(tmp, "report", "--results", "r").stdout
    assert text.count("energy-invalid:energy_contradicts_window") >= 1 and "8.86" not in text, text
    assert "6.68" not in text, text
    # the same figures in a stored record: skipped as contradicting itself
    tmp2 = matrix_project(tmp_path / "stored")
    import_rows(tmp2, h200_rows("alone.jsonl")[:1], "h200")
    edit_stored(tmp2, lambda r: _pump(r["telemetry"], 1500.0, None), "h200")
    rep = tk(tmp2, "report", "--results", "r")
    assert "skipped a record that contradicts itself" in rep.stderr and "700 W" in rep.stderr, rep.stderr


def test_board_power_is_read_from_the_named_gpus_and_unknown_boards_keep_the_absolute_bound():
    from toolkit.core.gpuspecs import spec_by_name
    from toolkit.results.telemetry_check import POWER_W, board_power_w

    assert board_power_w("NVIDIA H200") == 700.0
    assert board_power_w("AMD Radeon AI PRO R9700 (RADV GFX1201)") == 300.0
    assert board_power_w("NVIDIA H200, NVIDIA H100 PCIe") == 700.0  # the highest of those named
    assert board_power_w("NVIDIA H200, Some Future GPU") is None and board_power_w(None) is None
    assert all(
        s.board_power_w is None or s.board_power_w < POWER_W[1] for s in [spec_by_name("NVIDIA H200")] if s
    )


def test_a_stored_block_with_figures_no_sensor_reads_is_skipped_and_an_imported_one_left_out(tmp_path):
    """A busy mean of 500 % at a median clock of 100 MHz (which raises clock-idle), a 900 °C reading, CPU
    pressure of 500 %: before, stored as figures and shown; now the stored record is skipped naming the
    figure, and an imported block is left out with its flags (the speed kept)."""
    from toolkit.results.telemetry_flags import figures_problem

    row = h200_rows("alone.jsonl")[0]
    block = row["toolkit_telemetry"]
    assert figures_problem(block) is None
    for edit, says in (
        (lambda b: _gpu(b).update(busy_pct_mean=500.0, sclk_mhz_median=100.0), "busy_pct_mean is 500"),
        (lambda b: _gpu(b).update(temp_max_c={"temp_gpu_c": 900.0}), "temp_max_c.temp_gpu_c is 900"),
        (lambda b: b["host"].update(psi_some_pct=500.0), "host.psi_some_pct is 500"),
        (lambda b: _gpu(b).update(throttle_share={"sw-power-cap": 3.0}), "throttle_share.sw-power-cap is 3"),
        (lambda b: b.update(energy_valid=False, duration_s=-1.0), "a window of no time"),
    ):
        b = json.loads(json.dumps(block))
        edit(b)
        assert says in (figures_problem(b) or ""), (says, figures_problem(b))
    tmp = matrix_project(tmp_path)
    row["toolkit_flags"] = ["clock-idle"]
    _gpu(block).update(busy_pct_mean=500.0, sclk_mhz_median=100.0)
    out = import_rows(tmp, [row], "h200")
    assert "not a window's figures: gpus." in out and "busy_pct_mean is 500" in out, out
    stored = [
        json.loads(line) for f in (tmp / "r").glob("*/bench.jsonl") for line in f.read_text().splitlines()
    ]
    assert stored[0].get("telemetry") is None and "clock-idle" not in (stored[0].get("flags") or [])
    tmp2 = matrix_project(tmp_path / "stored")
    import_rows(tmp2, h200_rows("alone.jsonl")[:1], "h200")
    edit_stored(
        tmp2, lambda r: _gpu(r["telemetry"]).update(busy_pct_mean=500.0, sclk_mhz_median=100.0), "h200"
    )
    rep = tk(tmp2, "report", "--results", "r")
    assert "skipped a record that contradicts itself: its telemetry: gpus." in rep.stderr, rep.stderr


def test_one_flag_rule_for_the_bench_and_the_readers():
    """The observer (what the bench stores) flags by the readers' window_flags, and the figure
    ranges a stored block is held to are the sampler's (energy.PLAUSIBLE)."""
    from toolkit.analysis import energy
    from toolkit.bench import observe
    from toolkit.results import telemetry_flags

    assert observe.window_flags is telemetry_flags.window_flags
    assert telemetry_flags.FIGURE_RANGES == {**energy.PLAUSIBLE, "power_w": (1.0, energy.POWER_MAX_W)}
    for row in h200_rows("contended.jsonl") + h200_rows("alone.jsonl"):
        kept = telemetry_flags.checked_flags(row["toolkit_flags"], row["toolkit_telemetry"])
        assert kept == row["toolkit_flags"] or set(kept) >= set(row["toolkit_flags"]), (
            kept,
            row["toolkit_flags"],
        )


def test_a_cell_of_several_processes_keeps_every_processs_checked_flags():
    """`bench.runs: 3` with another tenant in the first process only: the combined cell kept the newest
    process's flags (clean) and the first one's host-busy, throttling and gpu-shared vanished. Each
    process's flags are held to its own telemetry, then joined; the combined record (which keeps only
    the newest block) is not held again to that block alone."""
    from tests.support.records import make_record
    from toolkit.results.identity import combine_runs, shown_flags

    busy, idle = h200_rows("contended.jsonl")[0], h200_rows("alone.jsonl")[0]

    def process(row: dict[str, Any], i: int, flags: list[str]) -> Any:
        rec = make_record(
            "img",
            "cpu",
            backends="CUDA",
            p=512,
            avg=row["avg_ts"],
            samples_ts=row["samples_ts"],
            gpu_info="NVIDIA H200",
            run_id=f"run-{i}",
            telemetry=row["toolkit_telemetry"],
            flags=flags,
        )
        return rec

    recs = [process(busy, 1, busy["toolkit_flags"]), process(idle, 2, []), process(idle, 3, [])]
    combined = combine_runs(recs)
    shown = shown_flags(combined)
    assert "throttled:sw-power-cap" in shown and "gpu-shared" in shown, shown
    assert not [f for f in shown if f.startswith("flag-unsupported")], shown
    # a flag no process's block supports is still told as such, once
    recs[1] = process(idle, 2, ["host-busy"])
    shown = shown_flags(combine_runs(recs))
    assert "flag-unsupported:host-busy" in shown, shown


def test_gpu_shared_stripped_from_a_block_that_names_its_own_pids_comes_back():
    """A block the observer wrote since it stores the benchmark's own GPU pids (`own_pids`): gpu-shared
    stripped from its record is raised again (before: never, the pids were not stored: tok/J shown for a
    shared GPU); an older block without them adds nothing, as before."""
    from toolkit.results.telemetry_flags import checked_flags

    block = h200_rows("contended.jsonl")[0]["toolkit_telemetry"]
    pids = _gpu(block)["pids"]  # two processes on the GPU: the benchmark's and another tenant's
    assert "gpu-shared" in checked_flags([], {**block, "own_pids": pids[:1]})
    assert "gpu-shared" not in checked_flags([], {**block, "own_pids": pids})
    assert "gpu-shared" not in checked_flags([], block)


def test_the_observer_stores_the_benchmarks_own_gpu_pids_with_each_window():
    """RunObserver._flagged: the pids it claimed as the benchmark's go into the window's block."""
    from toolkit.bench.observe import RunObserver

    obs = RunObserver.__new__(RunObserver)  # only the pid bookkeeping: no sampler thread is started
    obs._own_pids, obs._own_sid = {4901}, None
    out = obs._flagged({"gpus": {}}, [])
    assert out["telemetry"]["own_pids"] == [4901]


def test_a_combined_cell_says_runs_disagree_once():
    """A process record that already carries runs-disagree (an import of a combined file, a hand edit):
    the combined cell named it twice."""
    from tests.support.records import make_record
    from toolkit.results.identity import combine_runs

    recs = [
        make_record("img", "cpu", p=512, avg=a, samples_ts=[a, a], run_id=f"run-{i}", flags=["runs-disagree"])
        for i, a in enumerate((100.0, 200.0, 300.0))
    ]
    flags = combine_runs(recs).model_extra["flags"]
    assert flags.count("runs-disagree") == 1, flags
