"""The faults nc47b and brk47b left in tune, compare, the verdict and the report's accounting.

Records are built as bench and tune store them (tests.support.records.make_record); the compare and
report paths go through a real ResultStore and its query index. Nothing is mocked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.records import make_record, tune_trial
from tests.support.telemetry_fakes import supporting_block
from toolkit.analysis import compare, compare_text, verdict
from toolkit.bench import tune, tune_depth
from toolkit.core.errors import BadInput
from toolkit.results import identity
from toolkit.results import index as resultindex
from toolkit.results.records import ResultStore

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = tune.Candidate((("n_ubatch", 512),))


def trial(ub: int, samples: list[float], *, depth: int = 0, session: str = "s1", run_id: str = "run-1"):
    """A stored tune trial of pp2048 at micro-batch `ub`, at `depth`, of run `run_id`."""
    return tune_trial(ub, samples, session=session, n_depth=depth, run_id=run_id)


def test_a_default_leading_within_the_noise_is_not_called_best_and_its_row_is_marked():
    """nc47b S11: "best: the matrix default (n_ubatch=512)" over n_ubatch=64 by 0.4 %, within the noise;
    the table named no default row."""
    # 2 % apart: beyond 3 x their pooled stddev (not "no effect"), within the verdict's 3 % margin
    tied = [trial(512, [1020.0, 1021.0, 1019.0]), trial(2048, [1000.0, 1001.0, 999.0])]
    res = tune.best_setting(tied, "s1", ["n_ubatch"], DEFAULT)
    assert res.best.candidate == DEFAULT
    assert res.undecided.startswith(
        "no setting tried beat the matrix default (n_ubatch=512) beyond the noise"
    )
    text = tune.format_result(res)
    assert "best: the matrix default" not in text and "the matrix default stays" in text, text
    assert "| n_ubatch=512 (matrix default) | 1020.00 |" in text and "| n_ubatch=2048 | 1000.00 |" in text
    clear = [trial(512, [1000.0, 1010.0, 990.0]), trial(2048, [500.0, 505.0, 495.0])]
    res = tune.best_setting(clear, "s1", ["n_ubatch"], DEFAULT)
    assert res.undecided == "" and "best: the matrix default (n_ubatch=512)" in tune.format_result(res)
    clear[1].__pydantic_extra__["flags"] = ["host-busy"]  # the runner-up's trial: nor is a flagged lead
    clear[1].telemetry = supporting_block(["host-busy"])
    res = tune.best_setting(clear, "s1", ["n_ubatch"], DEFAULT)
    assert "1 trial(s) of n_ubatch=512 or a setting it beat were flagged (host-busy)" in res.undecided, (
        res.undecided
    )


def test_a_depth_session_says_the_same_of_a_default_within_the_noise_and_fills_the_effective_ub():
    """The depth axis: the default leading within the noise at every depth; its table's effective-ub
    column was empty (brk47b F2: pp64 runs ub 64 at every depth)."""
    recs = [
        trial(512, [1020.0, 1021.0, 1019.0]),
        trial(2048, [1000.0, 1001.0, 999.0]),
        trial(512, [816.0, 817.0, 815.0], depth=4096),
        trial(2048, [800.0, 801.0, 799.0], depth=4096),
    ]
    for r in recs:
        r.n_prompt = 64  # both micro-batches run at 64
    res = tune_depth.best_over_depth(recs, "s1", ["n_ubatch"], DEFAULT)
    assert res.best.candidate == DEFAULT and "no setting tried beat the matrix default" in res.undecided
    assert [e.effective_ubatch for e in res.ranking] == [64, 64]
    assert "| n_ubatch=512 (matrix default) | " in tune.format_result(res)
    assert "| 64 |" in tune.format_result(res)


def test_the_decode_axis_searches_no_batch_size_and_defaults_to_flash_attention():
    """brk47b F7: `tune --axis decode` searched n_ubatch, which never changes tg."""
    from toolkit.matrix.loading import load_matrix

    lm = load_matrix(ROOT / "matrix.yaml")
    cpu, base = lm.m.image("cpu"), lm.m.bench
    for knob in ("n_ubatch", "n_batch"):
        with pytest.raises(BadInput, match=f"--knob {knob}: --axis decode searches flash_attn, threads only"):
            tune.knob_values(cpu, base, [knob], 128, "decode")
    assert sorted(tune.knob_values(cpu, base, [], 128, "decode")) == ["flash_attn", "threads"]
    assert sorted(tune.knob_values(cpu, base, [], 128, "prefill")) == ["n_ubatch", "threads"]
    assert list(tune.knob_values(cpu, base, [], 128, "depth")) == ["n_ubatch"]
    with pytest.raises(BadInput, match="--axis depth searches n_ubatch only"):
        tune.knob_values(cpu, base, ["threads"], 128, "depth")
    tg = [trial(512, [10.0, 11.0, 12.0]), trial(2048, [20.0, 21.0, 22.0])]
    for r in tg:  # a decode test: no micro-batch applies, so the tune table has no column for it
        r.n_prompt, r.n_gen = 0, 16
    assert "effective ub" not in tune.format_result(tune.best_setting(tg, "s1", ["n_ubatch"], DEFAULT))


def _store(tmp_path: Path, *recs) -> ResultStore:
    store = ResultStore(tmp_path / "results")
    for r in recs:
        store.add_result(r)
    return store


def test_a_tune_session_id_names_its_trials_in_report_and_compare(tmp_path):
    """nc47b S2: `report --run SESSION` (the id tune prints) said "no record of run": the trials ran
    under ids of their own. Trial N is now run SESSION-tN."""
    session = "20260601T000000Z-a1b2c3"  # before the records were written (make_record: 2026-07-01)
    bench = make_record(
        "cpu", "cpu", p=2048, ub=512, avg=3391.0, sd=5.0, gpu_info="", run_id="20260601T000000Z-0b0b0b"
    )
    t1 = trial(512, [3000.0, 3010.0], session=session, run_id=f"{session}-t1")
    t2 = trial(2048, [4000.0, 4010.0], session=session, run_id=f"{session}-t2")
    store = _store(tmp_path, bench, t1, t2)
    assert resultindex.full_run_ids(store, session) == [f"{session}-t2", f"{session}-t1"]
    with pytest.raises(BadInput, match="is a tune session of 2 trial runs"):
        resultindex.full_run_id(store, session)  # export-run, reproduce: one run
    assert resultindex.full_run_ids(store, f"{session}-t1") == [f"{session}-t1"]
    c = compare.compare(store, bench.run_id, session)
    assert c.b.label == f"tune session {session} (2 trial runs)" and len(c.b.records) == 2
    text = compare_text.format_comparison(c)
    assert "trials: a search's short runs" in text.split("\nB: ")[1], text  # brk47b F6
    assert compare_text.comparison_json(c)["b"]["kind"] == "tune trials"
    assert compare_text.comparison_json(c)["a"]["kind"] == "bench"
    one = compare.compare(store, bench.run_id, f"{session}-t1")  # one trial run: said so too
    assert "trials: a search's short runs" in compare_text.format_comparison(one).split("\nB: ")[1]


def test_report_run_takes_a_tune_session_id(tmp_path):
    from click.testing import CliRunner

    from toolkit.cli.main import cli

    session = "20260601T000000Z-a1b2c3"  # before the records were written (make_record: 2026-07-01)
    store = _store(
        tmp_path,
        trial(512, [3000.0, 3010.0], session=session, run_id=f"{session}-t1"),
        trial(2048, [4000.0, 4010.0], session=session, run_id=f"{session}-t2"),
    )
    res = CliRunner().invoke(
        cli, ["report", "--results", str(store.root), "--run", session, "--format", "github"]
    )
    assert res.exit_code == 0, res.output
    assert "pp2048 ub512" in res.output and "pp2048 ub2048" in res.output


def test_an_imported_sides_hint_names_its_tests_as_bench_axes_not_its_matrix(tmp_path):
    """nc47b S4: compare of a bench run against an import of other sizes said "`toolkit bench` with the
    other run's matrix.yaml axes": an import has none."""
    a = make_record("cpu", "cpu", p=512, ub=512, avg=3000.0, sd=5.0, gpu_info="", run_id="bench-a")
    b = [
        make_record("laptop", "cpu", p=p, ub=512, avg=900.0, sd=5.0, gpu_info="", digest="import:" + "e" * 64)
        for p in (256, 1024)
    ]
    b.append(make_record("laptop", "cpu", n=64, avg=90.0, sd=1.0, gpu_info="", digest="import:" + "e" * 64))
    for r in b:
        r.run_id = "import-1"
    store = _store(tmp_path, a, *b)
    with pytest.raises(BadInput) as err:
        compare.compare(store, "bench-a", "laptop")
    said = str(err.value)
    assert "other run's matrix.yaml" not in said, said
    assert "B is imported, measured elsewhere: `toolkit bench` here with matrix.yaml's bench axes " in said
    assert "n_prompt: [256, 1024], n_gen: [64], n_ubatch: [512]" in said, said
    assert compare.side_kind(b) == "imported" and compare.side_kind([a]) == "bench"


def test_a_model_file_of_unknown_sha256_is_not_called_a_different_file():
    """nc47b S5: "the images measured different model files" where one side's sha256 was not recorded."""
    a = make_record("cpu", "cpu", p=512, avg=3000.0, sd=5.0)
    b = make_record("vulkan", "vulkan", p=512, avg=3500.0, sd=5.0)
    unknown = b.model_copy(update={"model": b.model.model_copy(update={"sha256": "", "name": "m.gguf"})})
    text = verdict.format_verdict(verdict.verdict([a, unknown]))
    assert "different model files" not in text and "model files are not known to be one file" in text, text
    assert (
        verdict.verdict_json(verdict.verdict([a, unknown]))["axes"]["prefill"]["model_files_differ"] is False
    )
    other = b.model_copy(update={"model": b.model.model_copy(update={"sha256": "cd" * 32})})
    assert "the images measured different model files" in verdict.format_verdict(verdict.verdict([a, other]))
    renamed = b.model_copy(update={"model": b.model.model_copy(update={"name": "m.gguf"})})  # one sha256
    assert "model files" not in verdict.format_verdict(verdict.verdict([a, renamed]))


def test_tune_trials_are_not_counted_as_superseded_bench_results(tmp_path):
    """fix47a: the accounting line counted a tune trial beside a bench run of its test as "superseded by
    a newer run of the same test"; the index's count and newest_per_test's alike."""
    from toolkit.analysis import tables

    bench = make_record("cpu", "cpu", p=2048, ub=512, avg=3391.0, sd=5.0, gpu_info="", run_id="bench-run")
    old = make_record("cpu", "cpu", p=2048, ub=512, avg=3300.0, sd=5.0, gpu_info="", run_id="bench-old")
    recs = [
        old,
        bench,
        trial(512, [1000.0, 1010.0], run_id="s-t1"),
        trial(512, [990.0, 1000.0], run_id="s-t2"),
    ]
    sel = identity.newest_per_test(recs)
    assert (sel.superseded, sel.trials) == (1, 2)
    assert "1 superseded by a newer run of the same test, 2 tune trial(s) not shown" in sel.summary()
    store = _store(tmp_path, *recs)
    chosen = resultindex.select(store)
    assert (chosen.superseded, chosen.trials) == (1, 2)
    assert "2 tune trial(s) not shown" in tables.accounting(chosen)


def test_a_regression_beside_tests_on_one_side_only_exits_6_as_documented(tmp_path):
    """nc47b S5: a regression and tests on one side only exit 6; docs/exit-codes.md said not which wins."""
    from click.testing import CliRunner

    from toolkit.cli.main import cli

    a = [
        make_record("cpu", "cpu", p=512, avg=3000.0, sd=5.0, gpu_info="", run_id="run-a"),
        make_record("cpu", "cpu", n=128, avg=90.0, sd=1.0, gpu_info="", run_id="run-a"),
    ]
    b = make_record("cpu", "cpu", p=512, avg=1500.0, sd=5.0, gpu_info="", run_id="run-b")  # no tg128
    store = _store(tmp_path, *a, b)
    res = CliRunner().invoke(
        cli, ["compare", "--results", str(store.root), "run-a", "run-b", "--format", "github"]
    )
    assert getattr(res.exception, "exit_code", res.exit_code) == 6, res.output
    assert "also not compared: 1 test(s) only in A" in str(res.exception), res.exception
    doc = (ROOT / "docs" / "exit-codes.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| 6 |"))
    assert "wins over tests measured on one side only" in row, row
