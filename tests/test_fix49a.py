"""The faults nc48b and brk48b found in output and selection (fix49a), each through the command or the
function the command calls, on a real ResultStore and its query index; nothing mocked.

- A campaign's job runs `CID-jN` were no group: `report --run CID` and `compare RUN CID` of a campaign
  of two jobs said "begins 2 stored runs", where a tune session's `SESSION-tN` runs were one group.
  One rule now names both (index.run_begun, GROUP_RUN).
- `compare RUN SESSION` (a tune session measures one test) ended "measure them on both sides": a run,
  a tune session or an import holds what it measured; where the side lacking tests is one of those the
  mend offers --allow-missing first (Comparison.missing_fix); an image name still gets "measure them".
- compare of a bench run against an import of the same model file said 1.54 MiB (the file) on one side
  and 1.52 MiB (llama-bench's model_size) on the other under one label, and its caveat named the model
  twice ("tiny-qwen3moe, tiny-qwen3moe.gguf"): both sides now show llama-bench's model_size
  (roofline.model_bytes, the one size), and a model is named once (caveats.tiny_names).
- Markdown output escaped the toolkit's own code spans ("a \\`toolkit tune\\` trial", "imported
  (\\`toolkit import\\`)"): a line was composed, then escaped whole. A line of the toolkit's words is now
  composed as core.text.Prose naming the data put into it; md_line and md_text render its spans as code
  and escape the data, so a name's backtick still pairs with nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.records import make_record, tune_trial
from tests.support.runs import tk
from toolkit.analysis import compare, verdict
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput
from toolkit.results import index as resultindex
from toolkit.results.records import ResultStore

DATA = Path(__file__).resolve().parent / "data"
RUN_A = "20261129T170627Z-6891c7"  # the run of results-cpu-a.jsonl: a real bench of tiny-qwen3moe
CAMPAIGN = "c20260601T000000Z-1a2b"  # campaign.slurm.new_id's shape; job runs CAMPAIGN-j<Slurm job id>
BENCH = "20260601T000000Z-0b0b0b"


def _store(tmp_path, *recs) -> ResultStore:
    store = ResultStore(tmp_path / "results")
    for r in recs:
        store.add_result(r)
    return store


def _job(p: int, job: int, avg: float):
    return make_record("cpu", "cpu", p=p, avg=avg, sd=5.0, gpu_info="", run_id=f"{CAMPAIGN}-j{job}")


def test_a_campaigns_job_runs_are_one_group_as_a_tune_sessions_trials(tmp_path):
    bench = make_record("cpu", "cpu", p=512, avg=3000.0, sd=5.0, gpu_info="", run_id=BENCH)
    store = _store(tmp_path, bench, _job(512, 101, 3010.0), _job(2048, 102, 2500.0))
    assert resultindex.full_run_ids(store, CAMPAIGN) == [f"{CAMPAIGN}-j102", f"{CAMPAIGN}-j101"]
    with pytest.raises(BadInput, match="is a campaign of 2 job runs"):
        resultindex.full_run_id(store, CAMPAIGN)  # export-run, reproduce: one run
    c = compare.compare(store, BENCH, CAMPAIGN)
    assert c.b.label == f"campaign {CAMPAIGN} (2 job runs)" and len(c.b.records) == 2
    res = CliRunner().invoke(
        cli, ["report", "--results", str(store.root), "--run", CAMPAIGN, "--format", "github"]
    )
    assert res.exit_code == 0, res.output
    assert "pp512" in res.output and "pp2048" in res.output and "2 used" in res.output, res.output
    # runs of two kinds under one id are no one group
    store.add_result(tune_trial(512, [1000.0, 1010.0], session=CAMPAIGN, run_id=f"{CAMPAIGN}-t1"))
    with pytest.raises(BadInput, match="begins 3 stored runs"):
        resultindex.full_run_ids(store, CAMPAIGN)


def _compare(store: ResultStore, a: str, b: str, *extra: str):
    return CliRunner().invoke(cli, ["compare", "--results", str(store.root), a, b, *extra])


def test_compare_offers_allow_missing_first_where_a_side_cannot_measure_more(tmp_path):
    session = "20260602T000000Z-a1b2c3"
    bench = [
        make_record("cpu", "cpu", p=p, ub=512, avg=3000.0 / p, sd=0.01, gpu_info="", run_id=BENCH)
        for p in (512, 2048)
    ]
    store = _store(tmp_path, *bench, tune_trial(512, [1.47, 1.46], session=session, run_id=f"{session}-t1"))
    res = _compare(store, BENCH, session)
    assert isinstance(res.exception, BadInput), res.output
    said = str(res.exception)
    assert "measure them on both sides" not in said, said
    assert (
        f"B (run {session}-t1) cannot measure more: accept a partial comparison with --allow-missing" in said
    )
    assert _compare(store, BENCH, session, "--allow-missing").exit_code == 0
    # two image names: bench of either adds tests, so measuring them stays the mend
    store.add_result(make_record("cpu2", "cpu", p=512, ub=512, avg=6.0, sd=0.01, gpu_info=""))
    res = _compare(store, "cpu", "cpu2")
    assert isinstance(res.exception, BadInput), res.output
    assert "; measure them on both sides, or accept" in str(res.exception), res.exception


def test_a_bench_run_and_an_import_of_its_model_file_show_one_size_and_one_name(tmp_path):
    """The real records of a CPU bench of tiny-qwen3moe (model file 1,611,104 bytes, llama-bench's
    model_size 1,595,904) against an import of the same llama-bench rows measured a day later (`laptop`;
    the run's own rows are not imported again: fix51a S7)."""
    (tmp_path / "results" / "a504e0178239").mkdir(parents=True)
    shutil.copy(DATA / "results-cpu-a.jsonl", tmp_path / "results" / "a504e0178239" / "bench.jsonl")
    rows = [json.loads(ln)["raw"] for ln in (DATA / "results-cpu-a.jsonl").read_text().splitlines()]
    rows = [{**r, "test_time": r["test_time"].replace("2026-11-29", "2026-11-30")} for r in rows]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = tk(tmp_path, "import", "--results", "results", "--label", "laptop", "rows.jsonl")
    assert res.returncode == 0, res.stderr
    res = tk(tmp_path, "compare", "--results", "results", RUN_A, "laptop", "--format", "text")
    assert res.returncode == 0, res.stdout + res.stderr
    sizes = [ln for ln in res.stdout.splitlines() if ln.startswith("- model: ")]
    assert len(sizes) == 2 and all("1.52 MiB" in ln for ln in sizes), sizes  # A said the file's 1.54 MiB
    assert "1.54 MiB" not in res.stdout, res.stdout
    assert "smoke-test data: tiny-qwen3moe is a tiny stand-in model" in res.stdout, res.stdout


def test_markdown_renders_the_toolkits_own_code_spans_and_escapes_a_names_backtick(tmp_path):
    bench = make_record("cpu", "cpu", p=2048, ub=512, avg=3000.0, sd=5.0, gpu_info="", run_id=BENCH)
    bench.__pydantic_extra__ = {**(bench.model_extra or {}), "flags": ["odd`flag"]}  # a runner's own flag
    trial = tune_trial(1024, [3100.0, 3110.0], session="s1", run_id="20260602T000000Z-a1b2c3-t1")
    store = _store(tmp_path, bench, trial)
    res = tk(tmp_path, "report", "--results", "results", "--format", "github")
    assert res.returncode == 0, res.stderr
    assert "tune-trial: a `toolkit tune` trial (a short search run" in res.stdout, res.stdout
    assert "odd\\`flag: stored with the record by its runner" in res.stdout, res.stdout
    assert "\\`toolkit" not in res.stdout, res.stdout
    imp = make_record(
        "lap`top", "cpu", p=2048, ub=512, avg=2900.0, sd=5.0, gpu_info="", digest="import:" + "e" * 64
    )
    store.add_result(imp.model_copy(update={"run_id": "import-1"}))
    res = tk(tmp_path, "compare", "--results", "results", BENCH, "lap`top", "--format", "github")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "- imported (`toolkit import`): measured outside this project" in res.stdout, res.stdout
    assert "B: lap\\`top@import:eeeeeeeeeeee" in res.stdout, res.stdout
    a = make_record("cpu", "cpu", p=2048, avg=3000.0, sd=5.0, gpu_info="")  # the verdict's fix and route
    b = make_record("we`ird", "cpu", p=512, avg=2000.0, sd=5.0, gpu_info="")
    v = verdict.verdict([a, b])
    md, text = verdict.format_verdict(v), verdict.format_verdict(v, markdown=False)
    assert md.count("; measure one test on each (`toolkit bench` runs") == 2, md  # the axis and its route
    assert "we\\`ird@" in md and "we`ird@" not in md.replace("\\`", ""), md
    assert text.count("(`toolkit bench` runs") == 2 and "we`ird@" in text, text  # text: as composed
