"""`toolkit tune`: the answer from recorded trial data (unit), and a real search on the CPU image (e2e).

The unit tests build trial records the way bench stores them (tests.test_report.make_record over a
llama-bench-shaped row); the e2e test runs real llama-bench trials in the real CPU image on the tiny
model. Nothing is mocked.
"""

from __future__ import annotations

import pytest

from tests.support.e2e_helpers import engine_or_skip, make_project, run_cli
from tests.support.records import make_record
from tests.support.records import tune_trial as trial
from tests.support.telemetry_fakes import supporting_block
from toolkit.bench import tune
from toolkit.core.errors import BadInput
from toolkit.results.records import ResultStore

DEFAULT = tune.Candidate((("n_ubatch", 512),))


def test_best_setting_is_the_argmax_of_the_stored_trials_with_gain_and_evidence():
    recs = [
        trial(512, [3391.0, 3400.0, 3380.0]),
        trial(2048, [4635.0, 4600.0, 4650.0]),
        trial(2048, [4640.0, 4620.0], rnd=2),
        trial(512, [1.0], session="other"),
    ]
    res = tune.best_setting(recs, "s1", ["n_ubatch"], DEFAULT)
    assert res.best.candidate.label() == "n_ubatch=2048" and res.best.trials == 2 and res.best.samples == 5
    assert res.gain == pytest.approx(4635.0 / 3391.0 - 1, rel=1e-3)  # the seeds' micro-batch 2048 gain
    assert not res.no_effect
    text = tune.format_result(res)
    assert "best: n_ubatch=2048" in text and "+36.7% over the matrix default (n_ubatch=512)" in text


def test_no_effect_only_when_measured_equal_and_clamping_is_named():
    recs = [trial(512, [100.0, 101.0, 99.0]), trial(2048, [100.5, 99.5, 100.2])]
    for r in recs:  # tg-like: 64 tokens, both micro-batches clamp to 64
        r.n_prompt, r.n_ubatch = 64, r.n_ubatch
    res = tune.best_setting(recs, "s1", ["n_ubatch"], DEFAULT)
    assert res.no_effect
    assert any("clamps n_ubatch" in n for n in res.notes)
    assert "no effect" in tune.format_result(res)
    noisy = [trial(512, [100.0, 160.0, 40.0]), trial(2048, [100.0, 150.0, 50.0])]
    assert not tune.best_setting(noisy, "s1", ["n_ubatch"], DEFAULT).no_effect  # too noisy to claim it


def test_a_gain_within_the_noise_or_on_flagged_trials_is_not_decided_and_nothing_is_proposed(tmp_path):
    """Reproducer (newcomer): `best: n_ubatch=128 ... +66.8% over the matrix default` from trials
    whose spreads overlapped (1856-47858 against 2392-45444 tok/s), 4 of 8 flagged host-busy, and
    --write proposed it for the whole sweep. The verdict's rules now hold for tune too."""
    wide = [trial(512, [2392.0, 25000.0, 45443.0]), trial(128, [1855.0, 41745.0, 47858.0])]
    res = tune.best_setting(wide, "s1", ["n_ubatch"], DEFAULT)
    assert res.best.candidate.label() == "n_ubatch=128" and "within the noise" in res.undecided
    text = tune.format_result(res)
    assert "not decided: " in text and "the matrix default stays" in text and "best: " not in text
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("bench:\n  n_ubatch: [512]\n")
    assert tune.matrix_diff(matrix, res) == ""
    busy = [trial(512, [3391.0, 3400.0, 3380.0]), trial(2048, [4635.0, 4600.0, 4650.0])]
    busy[0].__pydantic_extra__["flags"] = ["host-busy"]  # as the runner stores a telemetry flag
    busy[0].telemetry = supporting_block(["host-busy"])  # ... with the block that raised it
    res = tune.best_setting(busy, "s1", ["n_ubatch"], DEFAULT)
    assert "flagged (host-busy)" in res.undecided, res.undecided
    clean = [trial(512, [3391.0, 3400.0, 3380.0]), trial(2048, [4635.0, 4600.0, 4650.0])]
    assert tune.best_setting(clean, "s1", ["n_ubatch"], DEFAULT).undecided == ""


def test_bad_budget_and_knob_are_named():
    with pytest.raises(BadInput, match="--budget"):
        tune.parse_budget("soon")
    assert tune.parse_budget("20m") == 1200 and tune.parse_budget("90s") == 90


def test_a_model_of_another_runner_is_named_as_such_not_as_no_model_at_all():
    """Newcomer's find: `tune -i cpu -m qwen3-30b-a3b-awq` said "no model of the matrix runs on cpu",
    while tiny-qwen3moe does: the model (an hf checkpoint) does not run on llama-bench."""
    from pathlib import Path

    from toolkit.matrix.loading import load_matrix

    lm = load_matrix(Path(__file__).resolve().parents[1] / "matrix.yaml")
    cpu = lm.m.image("cpu")
    with pytest.raises(BadInput) as err:
        tune.model_for(lm, "qwen3-30b-a3b-awq", cpu)
    said = str(err.value)
    assert "a hf model" in said and "does not run on llama-bench" in said and "tiny-qwen3moe" in said, said
    with pytest.raises(BadInput, match="no model of the matrix has this name"):
        tune.model_for(lm, "nope", cpu)
    assert tune.model_for(lm, "tiny-qwen3moe", cpu).name == "tiny-qwen3moe"


@pytest.mark.e2e
def test_tune_on_the_cpu_image_stores_trials_and_drops_a_clear_loser(tmp_path):
    engine_or_skip()
    project = make_project(
        tmp_path / "p",
        images=["cpu"],
        bench={"n_prompt": [256], "n_gen": [16], "n_ubatch": [256], "n_batch": [512], "n_gpu_layers": [0]},
    )
    run_cli(project, "build", "--image", "cpu")
    # ub=1 processes the 256-token prompt one token per batch: a clear loser against ub=256
    res, _ = run_cli(
        project,
        "tune",
        "-i",
        "cpu",
        "--axis",
        "prefill",
        "--tokens",
        "256",
        "--knob",
        "n_ubatch",
        "--values",
        "n_ubatch=1,256",
        "--budget",
        "5m",
        "--write",
    )
    out = res.output
    assert "tune session " in out and "| n_ubatch=256 (matrix default) |" in out and "| n_ubatch=1 |" in out
    store = ResultStore(project / "results")
    trials = [r for r in store.results() if (r.model_extra or {}).get("tune")]
    session = trials[0].model_extra["tune"]["session"]
    answer = tune.best_setting(store.results(), session, ["n_ubatch"], tune.Candidate((("n_ubatch", 256),)))
    from toolkit.analysis.tables import telemetry_flags

    busy = any(telemetry_flags(r) for r in trials)  # a lead on flagged trials crowns no default either
    if not busy:  # on a busy host (load 6-9) ub1 once led: the host decided, and tune says so below
        assert answer.best.candidate.label() == "n_ubatch=256"  # the argmax of its own stored data
    assert ("were flagged (" if busy else "best: the matrix default (n_ubatch=256)") in out, out
    # a clear loser by round 1's stored samples (every ub1 sample below ub256's worst) is dropped, and
    # only then: on a busy host (load 5-6) one slow ub256 sample overlaps ub1's best (fix48c)
    first = {
        ub: [
            x
            for r in trials
            if r.n_ubatch == ub and r.model_extra["tune"]["round"] == 1
            for x in r.samples_ts
        ]
        for ub in (1, 256)
    }
    clear = max(first[1]) < min(first[256])
    assert ("dropped early as a clear loser: n_ubatch=1" in out) == clear, (first, out)
    rounds = {r.model_extra["tune"]["round"] for r in trials if r.n_ubatch == 1}
    assert rounds == {1} or not clear  # a clear loser is never measured again after round 1
    report, _ = run_cli(project, "report", "-i", "cpu")
    assert "pp256 ub1" in report.output and "pp256 ub256" in report.output  # trials are ordinary results
    assert "tune-trial" in report.output  # ... marked: never silently the bench's number (newcomer trial)
    assert {r.run_id for r in trials} == {f"{session}-t{n}" for n in range(1, len(trials) + 1)}
    by_session, _ = run_cli(project, "report", "--run", session)  # nc47b S2: the id tune prints
    assert "pp256 ub1" in by_session.output and "pp256 ub256" in by_session.output
    refused, _ = run_cli(project, "tune", "-i", "cpu", "--axis", "decode", "--knob", "n_ubatch", expect=4)
    assert "--axis decode searches flash_attn, threads only" in str(refused.exception)  # brk47b F7


def test_a_dropped_setting_is_never_the_answer_and_the_default_is_read_from_its_marked_trial():
    recs = [trial(512, [100.0, 900.0]), trial(2048, [300.0, 310.0]), trial(2048, [305.0, 312.0], rnd=2)]
    recs[0].raw["n_threads"] = 2  # the default ran without -t: llama-bench recorded the threads it used
    recs[0].model_extra["tune"]["default"] = True
    for r in recs[1:]:
        r.raw["n_threads"] = 2
    knobs = ["n_ubatch", "threads"]
    default = tune.Candidate((("n_ubatch", 512),))  # as asked: no threads
    live = {tune.Candidate((("n_ubatch", 2048), ("threads", 2)))}
    res = tune.best_setting(recs, "s1", knobs, default, survivors=live)
    assert res.best.candidate.label() == "n_ubatch=2048 threads=2"  # not the noisy, dropped default
    assert res.default.candidate.label() == "n_ubatch=512 threads=2" and res.gain is not None


def test_a_tune_trial_is_flagged_in_the_report_tables():
    """Reproducer (newcomer): after `toolkit tune`, a trial became the newest run of pp512 ub512 and
    replaced the bench's number in report, compare and the verdict with nothing to say so."""
    from toolkit.analysis import tables

    recs = [
        trial(512, [3391.0, 3400.0, 3380.0]),
        make_record("cpu", "cpu", p=2048, ub=2048, avg=4635.0, sd=5.0),
    ]
    rows = {row.test: flags for t in tables.tables(recs) for row in t.rows for flags in row.flags.values()}
    assert "tune-trial" in rows["pp2048 ub512"] and "tune-trial" not in rows["pp2048 ub2048"]


def test_tune_is_not_decided_on_flags_without_a_measured_default_on_single_samples_and_says_a_loss():
    """Second breaker round: flagged trials were proposed when the default was not measured; single
    samples (noise unknown) proposed a +0.2 % gain; a best below a dropped default read 'within the
    noise'."""
    flagged = [trial(2048, [4635.0, 4600.0, 4650.0]), trial(1024, [3000.0, 3010.0, 2990.0])]
    flagged[0].__pydantic_extra__["flags"] = ["host-busy"]
    flagged[0].telemetry = supporting_block(["host-busy"])
    res = tune.best_setting(flagged, "s1", ["n_ubatch"], DEFAULT)
    assert res.default is None and "flagged (host-busy)" in res.undecided
    single = tune.best_setting([trial(512, [1000.0]), trial(2048, [1002.0])], "s1", ["n_ubatch"], DEFAULT)
    assert "a single sample" in single.undecided
    flat = tune.best_setting(
        [trial(512, [1000.0] * 3), trial(2048, [1003.0] * 3)], "s1", ["n_ubatch"], DEFAULT
    )
    assert "within the noise" in flat.undecided  # 0.3 % is below the verdict's 3 % margin
    lost = tune.best_setting(
        [trial(512, [1000.0, 1010.0, 990.0]), trial(2048, [500.0, 505.0, 495.0])],
        "s1",
        ["n_ubatch"],
        DEFAULT,
        survivors={tune.Candidate((("n_ubatch", 2048),))},
    )
    assert "-50.0% against the default, which the search dropped" in lost.undecided


def test_a_tune_trial_never_supersedes_the_bench_run_of_its_test_in_report_or_index(tmp_path):
    """Newcomer trial: after `toolkit tune`, a trial written later became the newest run of pp512 ub512
    and replaced the bench's number in report and compare. A run of tune trials only now comes after
    every other run of its test, in identity.newest_per_test and in the query index alike; a test
    only tune measured still shows, flagged tune-trial."""
    from toolkit.analysis import report, tables
    from toolkit.results import index as resultindex

    bench = make_record("cpu", "cpu", p=2048, ub=512, avg=3391.0, sd=5.0, gpu_info="")
    bench.run_id = "bench-run"
    later = trial(512, [1000.0, 1010.0, 990.0])  # the same test, written after the bench run
    later.run_id = "tune-run"
    only = trial(128, [2000.0, 2010.0, 1990.0])
    only.run_id = "tune-run"
    store = ResultStore(tmp_path / "results")
    for r in (bench, later, only):
        store.add_result(r)
    for chosen in (tables.select_for_report(store.results()), list(resultindex.select(store))):
        got = {(r.n_ubatch, r.run_id) for r in chosen}
        assert got == {(512, "bench-run"), (128, "tune-run")}, got
    text = report.render(list(resultindex.select(store)))
    assert "3391.00" in text and "1000.00" not in text and "tune-trial" in text


def test_a_session_that_measured_the_default_alone_is_not_decided():
    """nc47 S11: `tune --budget 1s` spent its budget on the default's trial and said "best: the matrix
    default (n_ubatch=512)", a one-row table; its JSON "undecided": "". Nothing was compared."""
    res = tune.best_setting([trial(512, [100.0, 101.0, 99.0])], "s1", ["n_ubatch"], DEFAULT)
    assert "only n_ubatch=512 was measured" in res.undecided
    out = tune.format_result(res)
    assert "not decided: only n_ubatch=512 was measured" in out and "best: the matrix default" not in out


def test_every_round_line_names_each_searched_knob_the_default_leaves_to_llama_bench():
    """nc51 S7: `tune --axis decode` on a matrix that sets no threads: the first round line read
    `flash_attn=1 x 2 repetitions` (the matrix default, threads left to llama-bench) beside four lines and
    a table naming `threads=2`. The round lines now say which searched knob llama-bench picks."""
    from tests.support.project import ROOT
    from toolkit.matrix.api import load_matrix

    lm = load_matrix(ROOT / "matrix.yaml")
    assert lm.m.bench.threads is None
    notes: list[str] = []

    def measured(axes, extra):  # llama-bench's own choice where tune sets none: 2 threads
        th = axes.threads or 2
        samples = [10.0 + th] * axes.repetitions
        return [
            make_record("cpu", "cpu", n=16, avg=samples[0], threads=th, raw={"samples_ts": samples}, **extra)
        ]

    knobs = {"flash_attn": [0, 1], "threads": [1, 2]}
    tune.search(
        lm, axis="decode", tokens=16, knobs=knobs, budget_s=60, run_trial=measured, on_note=notes.append
    )
    first = [n for n in notes if n.startswith("round 1: ")]
    assert first[0] == "round 1: flash_attn=1 (threads: llama-bench's default) x 2 repetitions", notes
    assert first[1:] == [
        f"round 1: flash_attn={f} threads={t} x 2 repetitions" for f in (0, 1) for t in (1, 2)
    ]
