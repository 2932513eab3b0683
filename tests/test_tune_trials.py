"""A `toolkit tune` trial measures the tuned test alone, its ranking reads that test's records alone,
and no report choice made for a bench run takes a trial's records (nc47 S3, S4).

Unit tests build records the way bench stores them (tests.support.records.make_record over a
llama-bench-shaped row); the e2e test runs a real tune on the CPU image with the tiny model and its
`depth:` block. Nothing is mocked: search's `run_trial` is the seam a trial is run through.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.e2e_helpers import engine_or_skip, make_project, run_cli
from tests.support.records import make_record
from tests.support.telemetry_fakes import supporting_block
from toolkit.bench import tune
from toolkit.matrix.api import BenchAxes, LoadedMatrix
from toolkit.results.records import ResultStore

ROOT = Path(__file__).resolve().parents[1]


def _trial_records(axes: BenchAxes, extra: dict, run: int) -> list:
    """What one trial stored before the fix: the tuned case (pp64 at the trial's n_ubatch, samples
    by micro-batch) and the tiny model's depth sweep after it (pp512, tg128, at depths 0 and 512),
    much faster or slower than pp64 and at the same n_ubatch."""
    ub, reps = axes.n_ubatch[0], axes.repetitions
    speed = {1: 8000.0, 64: 28000.0, 512: 12000.0}[ub]
    cases = [(64, 0, 0, speed)] + [
        (p, n, d, x) for d in (0, 512) for p, n, x in ((512, 0, 31000.0), (0, 128, 100.0))
    ]
    out = [
        make_record(
            "cpu", "cpu", p=p, n=n, ub=ub, avg=x, gpu_info="", raw={"samples_ts": [x] * reps, "n_depth": d}
        )
        for p, n, d, x in cases
    ]
    for r in out:
        r.run_id = f"trial-{run}"
        r.__pydantic_extra__ = {**(r.model_extra or {}), **extra}
    return out


def test_the_ranking_reads_only_the_tuned_tests_records_and_its_effective_micro_batch():
    """nc47 S3: a prefill tune of pp64 ranked n_ubatch on the median of pp64, pp512, tg128 and their
    depth-sweep records pooled (`| n_ubatch=64 | 8113.32 | 102.86-31004.20 | 20 | 150 | 64 |`) and
    showed effective ub 512 for n_ubatch=512 on pp64 (the last, tg128 @ d512, record's). The ranking
    is of pp64 alone, each trial one record, and ub512 on pp64 runs in micro-batches of 64."""
    from toolkit.matrix.loading import load_matrix

    shipped = load_matrix(ROOT / "matrix.yaml")
    base = BenchAxes(n_prompt=[512], n_gen=[128], n_ubatch=[512], n_batch=[2048], n_gpu_layers=[0])
    lm = LoadedMatrix(shipped.m.model_copy(update={"bench": base}), shipped.path)
    calls: list[BenchAxes] = []

    def run_trial(axes, extra):
        calls.append(axes)
        return _trial_records(axes, extra, len(calls))

    res = tune.search(
        lm, axis="prefill", tokens=64, knobs={"n_ubatch": [1, 64]}, budget_s=600, run_trial=run_trial
    )
    assert res.test == "pp64"
    got = {e.candidate.label(): e for e in res.ranking}
    assert got["n_ubatch=64"].median == 28000.0 and got["n_ubatch=64"].low == 28000.0
    assert got["n_ubatch=64"].high == 28000.0
    ub64 = [a for a in calls if a.n_ubatch == [64]]
    assert got["n_ubatch=64"].trials == len(ub64)  # one pp64 record a trial, not five
    assert got["n_ubatch=64"].samples == sum(a.repetitions for a in ub64)
    assert got["n_ubatch=512"].effective_ubatch == 64  # min(512, 2048, 64), the report's ub-clamped
    assert got["n_ubatch=1"].effective_ubatch == 1 and got["n_ubatch=64"].effective_ubatch == 64
    assert res.best.candidate.label() == "n_ubatch=64"
    text = tune.format_result(res)
    assert "| n_ubatch=512 (matrix default) | 12000.00 | 12000.00–12000.00 | 1 | 2 | 64 |" in text, text


def test_a_session_of_several_tests_is_refused_unless_the_tuned_test_is_named():
    """best_setting without the tuned test no longer pools a session's tests: it names them."""
    from toolkit.core.errors import BadInput

    recs = _trial_records(BenchAxes(n_ubatch=[64], repetitions=2), {"tune": {"session": "s1", "round": 1}}, 1)
    with pytest.raises(BadInput, match="measured pp64, pp512, tg128, pp512 @ d512, tg128 @ d512: name"):
        tune.best_setting(recs, "s1", ["n_ubatch"], tune.Candidate((("n_ubatch", 64),)))
    res = tune.best_setting(
        recs, "s1", ["n_ubatch"], tune.Candidate((("n_ubatch", 64),)), test=tune.TunedTest(64, 0)
    )
    assert res.test == "pp64" and res.best.samples == 2


def test_a_decode_tunes_effective_micro_batch_is_left_blank_as_the_report_leaves_it():
    """The micro-batch does not apply to a decode test (facts.ub_applies): the report says no
    ub-clamped of it, and tune shows no effective ub nor a clamping note for it."""
    recs = []
    for ub, xs in ((64, [100.0, 101.0]), (512, [100.5, 100.2])):
        r = make_record("cpu", "cpu", n=128, ub=ub, avg=100.0, gpu_info="", raw={"samples_ts": xs})
        r.__pydantic_extra__ = {**(r.model_extra or {}), "tune": {"session": "s1", "round": 1}}
        recs.append(r)
    res = tune.best_setting(
        recs, "s1", ["n_ubatch"], tune.Candidate((("n_ubatch", 512),)), test=tune.TunedTest(0, 128)
    )
    assert {e.effective_ubatch for e in res.ranking} == {None}
    assert not any("clamps" in n for n in res.notes), res.notes


def _cpu(run: str, flags: list[str], *, p: int = 0, n: int = 0, avg: float = 100.0):
    """A CPU record of run `run` with telemetry `flags` (and the telemetry block that raises them)."""
    return make_record(
        "cpu",
        "cpu",
        p=p,
        n=n,
        avg=avg,
        sd=1.0,
        gpu_info="",
        run_id=run,
        flags=flags,
        telemetry=supporting_block(flags),
    )


def _tune_mark(r, session: str = "s1"):
    r.__pydantic_extra__ = {**(r.model_extra or {}), "tune": {"session": session, "round": 1}}
    return r


def test_a_tune_trial_never_decides_the_verdict():
    """nc47 S4 (1): the verdict's decode evidence for cpu was `tg128 ub64` 8005.08, a tg128 a prefill
    tune measured unasked (a cell of its own, flagged tune-trial), not the bench's tg128 (7137.11):
    the verdict judges each image at its best cell, and the trial's was best. Trials never count."""
    from toolkit.analysis import verdict

    bench_cpu = make_record("cpu", "cpu", n=128, ub=512, avg=71.37, sd=2.0, gpu_info="")
    trial = _tune_mark(make_record("cpu", "cpu", n=128, ub=64, avg=90.05, sd=2.2, gpu_info="", run_id="t"))
    other = make_record("cpu2", "cpu", n=128, ub=512, avg=80.0, sd=1.0, gpu_info="", run_id="run-2")
    v = verdict.verdict([bench_cpu, trial, other])
    decode = v.axes["decode"]
    assert decode.winner is not None and decode.winner.startswith("cpu2"), verdict.format_verdict(v)
    cells = [e for g in decode.groups for e in g.entries]
    assert {e.value for e in cells} == {71.37, 80.0}, cells
    only = verdict.verdict([trial, other])  # an image only tune measured is not judged
    assert only.axes["decode"].note.startswith("only cpu2"), only.axes["decode"].note
    # brk47b F4: trials alone said "no results" beside tables full of their cells
    alone = verdict.verdict([trial]).axes["decode"].note
    assert alone.startswith("only tune trials here") and "`toolkit bench`" in alone, alone
    assert verdict.verdict([]).axes["decode"].note == "no results"


def test_the_hidden_run_note_leaves_tune_trials_out_and_names_each_cells_own_flags(tmp_path):
    """nc47 S4 (2): the note called a newer tune trial (a pp512 ub512 its depth sweep measured) "an
    older measurement without that flag" hidden by the bench's flagged cell, and named flags of
    another cell (`host-busy, undersampled` where the cell was host-busy only). A tune trial is no
    measurement a bench run hides; each test is named with its own cell's flags; and the wording
    says "another run", true whatever order the runs were written in."""
    store = ResultStore(tmp_path / "results")
    busy = ["host-busy"]
    for run, flags in (("run-clean", []), ("run-busy", busy)):
        store.add_result(_cpu(run, flags, p=512))
    store.add_result(_cpu("run-busy", ["gpu-shared"], n=128, avg=50.0))
    # written last, without a flag: a tune trial of the flagged pp512 cell
    store.add_result(_tune_mark(_cpu("tune-trial-run", [], p=512, avg=90.0)))
    from click.testing import CliRunner

    from toolkit.cli.main import cli

    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--format", "text"])
    assert res.exit_code == 0, res.output
    note = next(x for x in res.stderr.splitlines() if "without a telemetry flag" in x)
    assert "tune-trial-run" not in note and "run run-clean (pp512 ub512 shown flagged host-busy)" in note, (
        note
    )
    assert "gpu-shared" not in note, note  # the tg128 cell's flag: no clean run of tg128 exists
    assert "older" not in note and "--run run-clean` shows it" in note, note
    only_trial = ResultStore(tmp_path / "t")
    only_trial.add_result(_cpu("b", busy, p=512))
    only_trial.add_result(_tune_mark(_cpu("t", [], p=512, avg=90.0)))
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "t"), "--format", "text"])
    assert res.exit_code == 0 and "telemetry flag" not in res.stderr, res.stderr


def test_the_hidden_run_note_is_wrapped_on_a_terminal_and_whole_in_a_log(tmp_path):
    """nc47 S4: the note was one 324-character line on a terminal. On a terminal it is wrapped to its
    width, as the text report's own lines are; piped it stays one line (for grep)."""
    store = ResultStore(tmp_path / "results")
    for i in range(6):  # six clean runs, each hidden behind a flagged cell of its own test
        for run, flags in ((f"clean-{i}", []), ("run-busy", ["host-busy"])):
            store.add_result(_cpu(run, flags, p=128 * (i + 1)))
    cmd = [sys.executable, "-m", "toolkit", "report", "--results", str(tmp_path / "results")]
    env = {**os.environ, "COLUMNS": "80"}
    piped = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    line = next(x for x in piped.stderr.splitlines() if "without a telemetry flag" in x)
    assert len(line) > 200 and "`toolkit report" in line  # whole: one line to grep
    master, slave = pty.openpty()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=env, cwd=ROOT, check=True)
    os.close(slave)
    said = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end is closed, all read
            break
        if not chunk:
            break
        said += chunk
    os.close(master)
    assert proc.returncode == 0
    lines = said.decode().replace("\r\n", "\n").splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("note: newest run per test"))
    end = next(i for i, x in enumerate(lines) if i >= start and x.endswith("shows it"))
    note = lines[start : end + 1]
    assert len(note) > 3 and all(len(x) <= 80 for x in note), note
    assert " ".join(note).replace("  ", " ") == line.replace("  ", " ") or all(
        w in " ".join(note) for w in line.split()
    )


@pytest.mark.e2e
def test_a_real_tune_trial_measures_the_tuned_test_alone_with_one_canary(tmp_path):
    """nc47 S3 on the real CPU image: the tiny model's `depth:` block (pp512, tg128 at depths 0 and
    512) ran in every trial of a pp64 tune, 5 records a trial. Each trial now stores pp64 only, and
    the canary, which the micro-batch does not change, runs in the session's first trial only."""
    engine_or_skip()
    project = make_project(
        tmp_path / "p",
        images=["cpu"],
        bench={"n_prompt": [64], "n_gen": [16], "n_ubatch": [64], "n_batch": [512], "n_gpu_layers": [0]},
        depth=True,
    )
    run_cli(project, "build", "--image", "cpu")
    asked = "--axis prefill --tokens 64 --knob n_ubatch --values n_ubatch=1,64 --budget 1m"
    res, _ = run_cli(project, "tune", "-i", "cpu", *asked.split())
    store = ResultStore(project / "results")
    trials = [r for r in store.results() if (r.model_extra or {}).get("tune")]
    runs = {r.run_id for r in trials}
    assert len(runs) >= 2, res.output
    assert {(r.test, r.n_depth) for r in trials} == {("pp64", 0)}, sorted(
        {(r.test, r.n_depth) for r in trials}
    )
    assert len(trials) == len(runs)  # one record a trial
    from toolkit.core import jsonsafe

    canaries = [
        jsonsafe.parse(line)
        for f in (project / "results").glob("*/canary.jsonl")
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    first = {
        r.run_id
        for r in trials
        if r.model_extra["tune"]["round"] == 1 and r.model_extra["tune"].get("default")
    }
    assert [c["run_id"] for c in canaries if c.get("run_id") in runs] == sorted(first), canaries
    samples = sum(len(r.samples_ts) for r in trials if r.n_ubatch == 64)
    assert f"| {samples} | 64 |" in res.output, res.output


def test_compare_leaves_a_sides_tune_trials_out_unless_it_holds_trials_alone(tmp_path):
    """A side's tune trial was joined with the other side's bench run of its test and judged: a
    2-repetition search run at ub512 read `regression (< 0.95)`, exit 6, with nothing to say it was a
    trial. A side's trials are left out where it holds bench records too; a side of trials alone
    (a tune run named) is still compared."""
    from toolkit.analysis.compare import compare

    store = ResultStore(tmp_path / "results")
    for ub in (512, 2048):
        store.add_result(make_record("cpu", "cpu", p=512, ub=ub, avg=1000.0, sd=5.0, gpu_info="", run_id="a"))
    store.add_result(make_record("cpu2", "cpu", p=512, ub=2048, avg=1001.0, sd=5.0, gpu_info="", run_id="b"))
    store.add_result(
        _tune_mark(make_record("cpu2", "cpu", p=512, ub=512, avg=500.0, sd=5.0, gpu_info="", run_id="t"))
    )
    c = compare(store, "cpu", "cpu2")
    assert [r.test for r in c.rows] == ["pp512 ub2048"] and not c.regressions, c.rows
    assert [r.fb.value for r in c.rows] == [1001.0]
    trials = compare(store, "cpu", "t")  # the tune run itself: its trials are what it holds
    assert [r.fb.value for r in trials.rows] == [500.0] and trials.regressions == trials.rows
