"""Round 17: a hostile tester of what a customer receives (imports, stored records, report flags).
Each test fails on the code before its fix; the inputs are the real files of tests/data, edited only
where a test says so."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.support.records import make_record
from tests.support.runs import tk
from toolkit.results import identity
from toolkit.results.telemetry_check import energy_contradiction, energy_rule
from toolkit.runtimes.llama_bench.validity import check_row

DATA = Path(__file__).parent / "data"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def _timed(row: dict, per_rep_ns: int) -> dict:
    """`row` with two repetitions of `per_rep_ns` each, its rates made to agree (what check_row holds)."""
    tokens = row["n_prompt"] + row["n_gen"]
    ts = tokens * 1e9 / per_rep_ns
    return {
        **row,
        "samples_ns": [per_rep_ns] * 2,
        "samples_ts": [round(ts, 3)] * 2,
        "avg_ns": per_rep_ns,
        "stddev_ns": 0,
        "avg_ts": round(ts, 6),
        "stddev_ts": 0.0,
    }


# ---------------------------------------------------------------- 1. a decode faster than tokens allow


def test_a_decode_faster_than_one_token_per_10_us_is_refused_on_any_hardware() -> None:
    """A CPU tg16 of 112,000 tok/s (round 15 left it: a CPU has no roofline) and an H200 tg128 of
    900,000 tok/s on a model whose roofline is unknown were imported and shown, unflagged. Generated
    tokens come one after another, each a forward pass (>= 10 us: the tiny model decodes at 128 us on
    this CPU), so no tg test exceeds 100,000 tok/s: the validity pass refuses both, for every format and
    for stored records alike."""
    tg = _rows("llamabench-0c1e57098-cpu.jsonl")[2]
    assert (tg["n_prompt"], tg["n_gen"]) == (0, 16)
    assert check_row(tg) is None  # the real row (6,655 / 2,478 t/s)
    cpu = _timed(tg, 142_857)  # 112,000 t/s: 8.9 us a token
    assert "us a token at most" in (check_row(cpu) or "")
    h200 = _timed({**tg, "n_gen": 128, "gpu_info": "NVIDIA H200", "backends": "CUDA"}, 142_222)
    assert "forward pass" in (check_row(h200) or "")
    # at the bound and a prefill of the same speed: measurements
    assert check_row(_timed(tg, 160_000)) is None  # 100,000 t/s exactly
    assert check_row(_timed({**tg, "n_prompt": 16, "n_gen": 0}, 142_857)) is None
    # pp+tg: the prompt's tokens are counted in t/s, the 16 generated still need 160 us
    pg = _timed({**tg, "n_prompt": 512, "n_gen": 16}, 150_000)
    assert "16 generated tokens" in (check_row(pg) or "")
    # one sample beyond the bound is enough
    one = _timed(tg, 400_000)
    one["samples_ns"], one["samples_ts"] = [700_000, 100_000], [16e9 / 700_000, 160_000.0]
    one["avg_ts"] = sum(one["samples_ts"]) / 2
    one["stddev_ts"] = 0.0
    one.pop("avg_ns"), one.pop("stddev_ns")
    assert "forward pass" in (check_row({**one, "stddev_ts": None}) or "")


def test_a_stored_decode_faster_than_tokens_allow_is_skipped_by_every_reader() -> None:
    """The same bound holds a stored record (record_check.contradiction runs the validity pass)."""
    from toolkit.results.record_check import contradiction

    ok = make_record("cpu", "cpu", n=16, avg=6000.0, sd=1.0, samples_ts=[5999.0, 6001.0])
    assert contradiction(ok) is None
    fast = make_record("cpu", "cpu", n=16, avg=112000.0, sd=1.0, samples_ts=[111999.0, 112001.0])
    assert "forward pass" in (contradiction(fast) or "")


# ---------------------------------------------------- 2. an energy the toolkit's own rules refuse


def _alone(i: int) -> dict:
    return copy.deepcopy(_rows("h200-measure/alone.jsonl")[i])


def _gpu(block: dict) -> dict:
    return next(iter(block["gpus"].values()))


def _code(t: dict, row: dict) -> str | None:
    """energy_rule's reason code for block `t` of `row`; energy_contradiction must not refuse it (a
    stored record is a measurement: only its energy is not the test's)."""
    assert energy_contradiction(t, row) is None
    rule = energy_rule(t, row)
    return rule[0] if rule else None


def test_a_valid_energy_its_own_window_fails_the_energy_rules_is_refused() -> None:
    """A `toolkit measure` block that claims a valid energy under a source whose rule its own figures
    fail was imported as valid and its tok/J shown: a counter over 1.9 of its measured 0.1-s steps
    (38.2 tok/J), NVML's averaged power integrated over 0.8 s (29.4 tok/J), a window 8x its timed
    repetitions (0.17 tok/J for a test that reads 1.37), a window without the test's edges. The
    toolkit itself never gives such a window an energy (analysis.energy: COUNTER_MIN_STEPS,
    NVML_POWER_AVG_MIN_WINDOW_S, window_holds_untimed_work, no_test_edges)."""
    for i in range(6):  # the real blocks (no energy_step_s: measured before it was recorded) keep theirs
        row = _alone(i)
        assert _code(row["toolkit_telemetry"], row) is None
    a = _alone(0)
    _gpu(a["toolkit_telemetry"])["energy_step_s"] = 0.1
    assert _code(a["toolkit_telemetry"], a) == "window_short_for_counter_step"
    b = _alone(2)
    g = _gpu(b["toolkit_telemetry"])
    g.update(  # its energy as NVML's averaged power integrated over the window, no counter read
        energy_source="integrated-average-power",
        energy_integrated_j=g["energy_j"],
        energy_integrated_invalid_reason=None,
        energy_counter_j=None,
        energy_counter_invalid_reason="no_power_source",
    )
    assert _code(b["toolkit_telemetry"], b) == "window_short_for_sensor_average"
    g["vendor"] = "amd"  # AMD's averaging time is unknown: 10 s
    assert "10 s" in energy_rule(b["toolkit_telemetry"], b)[1]
    c = _alone(5)
    t = c["toolkit_telemetry"]
    k = 8
    t["t1"] = t["t0"] + t["duration_s"] * k
    t["duration_s"] = t["t1"] - t["t0"]
    t["energy_j"] *= k
    t["tok_per_j"] = t["tokens"] / t["energy_j"]
    g = _gpu(t)
    g["energy_j"] = g["energy_counter_j"] = t["energy_j"]
    assert _code(t, c) == "window_holds_untimed_work"
    d = _alone(4)
    d["toolkit_telemetry"]["window_from"] = "previous-row"
    assert _code(d["toolkit_telemetry"], d) == "no_test_edges"


def test_a_stored_energy_over_a_window_holding_untimed_work_is_no_tok_per_j() -> None:
    """The H200 sweep's last test (tg128 ub2048) ran to process exit: its window is 2.56 s for 2.21 s of
    timed repetitions, the teardown inside (energy.py: its integral read +14 %). Stored as a record
    with a valid energy (before the rule), the report showed its tok/J. The record is shown, its tok/J
    is not, and its flag says why."""
    from tests.support.telemetry_fakes import h200_bench_records
    from toolkit.analysis.facts import Facts

    recs = {(r.test, r.n_ubatch): r for r in h200_bench_records("cuda_sweep", "h200-alone")}
    last = Facts.of(recs[("tg128", 2048)])
    assert last.value and last.energy is None
    assert "energy-invalid:window_holds_untimed_work" in last.flags
    kept = Facts.of(recs[("tg128", 512)])
    assert kept.energy is not None and not any(f.startswith("energy-invalid") for f in kept.flags)


def test_the_real_depth_runs_energies_are_kept_where_the_rules_gave_them() -> None:
    """The H200 depth file (energy_step_s recorded): every block that says valid passes the rules."""
    for row in _rows("h200-depth-qwen3moe-30b-q4_0-3runs.jsonl"):
        t = row.get("toolkit_telemetry")
        if t:
            assert energy_contradiction(t, row) is None, row["test_time"]


def test_an_imported_block_failing_the_rules_shows_no_tok_per_j(tmp_path: Path) -> None:
    """Through the CLI: the energy is left out (energy-invalid:energy_contradicts_window), the speed
    kept, and the import says why."""
    a = _alone(0)
    _gpu(a["toolkit_telemetry"])["energy_step_s"] = 0.1
    f = tmp_path / "a.jsonl"
    f.write_text(json.dumps(a) + "\n")
    root = str(tmp_path / "r")
    res = tk(tmp_path, "import", "--results", root, "--label", "x", str(f))
    assert res.returncode == 0, res.stderr
    assert "window_short_for_counter_step" in res.stderr + res.stdout
    rep = tk(tmp_path, "report", "--results", root, "--format", "csv")
    line = rep.stdout.splitlines()[1]
    assert "energy-invalid:window_short_for_counter_step" in line and ",38.2" not in line


# ------------------------------------------------ 3. a warm-up outlier hidden by pooling processes


def test_each_processs_warm_up_outlier_is_seen_in_a_combined_cell() -> None:
    """The H200 3-process pp512 (tests/data/h200-depth-...-3runs.jsonl): each process's first sample is
    a warm-up (8,539 / 8,018 / 9,502 beside ~13,950); one process alone is flagged warmup-outlier, the
    three combined were not (pooled, the other processes' warm-ups widen the range and hide each)."""
    from toolkit.analysis.facts import warmup_outlier

    rows = [
        r
        for r in _rows("h200-depth-qwen3moe-30b-q4_0-3runs.jsonl")
        if (r["n_prompt"], r["n_depth"]) == (512, 0)
    ]
    assert len(rows) == 3
    recs = [
        make_record("rocm", "rocm", p=512, avg=r["avg_ts"], sd=r["stddev_ts"], samples_ts=r["samples_ts"])
        for r in rows
    ]
    assert warmup_outlier(recs[0])
    combined = identity.combine_runs(recs)
    assert combined.model_extra["between_runs"]["counts"] == [5, 5, 5]
    assert warmup_outlier(combined)
    # steady processes stay unflagged, and counts that do not match the samples are read as one process
    steady = [
        make_record("rocm", "rocm", p=512, avg=100.0, sd=1.0, samples_ts=[99.0, 100.0, 101.0, 100.0])
        for _ in range(3)
    ]
    assert not warmup_outlier(identity.combine_runs(steady))


@pytest.mark.parametrize("counts", [[5, 5], "x", [5, 5, -5], [5, 5, 5.0]])
def test_counts_that_are_not_the_samples_are_one_process(counts: object) -> None:
    from toolkit.analysis.facts import process_samples

    r = make_record("rocm", "rocm", p=512, avg=100.0, sd=1.0, samples_ts=[100.0] * 15)
    r.__pydantic_extra__ = {**(r.model_extra or {}), "between_runs": {"counts": counts}}
    assert process_samples(r) == [[100.0] * 15]
