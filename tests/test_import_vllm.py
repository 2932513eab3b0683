"""`toolkit import` of `vllm bench latency | serve | throughput` result files (issue 24, piece 1): the
records our own vLLM runner writes (same method, axis, units, test names), judged by the same code
(runtimes/vllm/output.py): a served result whose requests generated fewer tokens than asked is stored
failed with the runner's "generated N of M requested tokens" (shared/cases/vllm-serve-short-outputs.json)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.project import DATA
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput
from toolkit.results import importer
from toolkit.results.records import ResultStore


def put(tmp_path: Path, src: str | dict, name: str) -> Path:
    """A result file under the name the runner gives it (lat-IN-OUT.json, serve-IN-OUT-cC.json)."""
    dst = tmp_path / "in" / name
    dst.parent.mkdir(exist_ok=True)
    if isinstance(src, dict):
        dst.write_text(json.dumps(src))
    else:
        shutil.copy(DATA / src, dst)
    return dst


def imp(tmp_path: Path, *files: Path, **kw):
    store = ResultStore(tmp_path / "results")
    return store, importer.import_files(store, list(files), label="elsewhere", **kw)


def test_serve_result_imports_as_the_runners_served_record(tmp_path: Path) -> None:
    # real `vllm bench serve` output of vLLM 0.28 on CPU: 4 prompts of 32 in / 8 out at concurrency 2
    data = json.loads((DATA / "vllm-0.28.0-cpu-serve.json").read_text())
    store, res = imp(tmp_path, put(tmp_path, "vllm-0.28.0-cpu-serve.json", "serve-32-8-c2.json"))
    (rec,) = store.results()
    assert (rec.runner, rec.method, rec.axis, rec.status) == ("vllm", "vllm-bench-serve", "served", "ok")
    assert (rec.test, rec.n_prompt, rec.n_gen, rec.engine["concurrency"]) == ("serve pp32+tg8 c2", 32, 8, 2)
    assert rec.avg_ts == pytest.approx(data["output_throughput"])
    assert rec.served["requested_output_tokens"] == 32 and rec.latency_ms["ttft"]["mean"] > 0  # type: ignore[attr-defined]
    assert res.formats == {str(tmp_path / "in" / "serve-32-8-c2.json"): "vllm-bench-serve"}
    assert importer.import_files(store, [tmp_path / "in" / "serve-32-8-c2.json"], label="elsewhere").already


def test_serve_shortfall_is_a_failed_record_with_the_runners_reason(tmp_path: Path) -> None:
    # shared case: every one of 8 requests stopped after 1 token though 32 were asked
    src = put(tmp_path, "vllm-serve-short-outputs.json", "vllm-serve-short-outputs.json")
    out = CliRunner().invoke(
        cli, ["import", str(src), "--label", "pub", "--output-len", "32", "--results", str(tmp_path / "r")]
    )
    assert out.exit_code == 0, out.output
    (rec,) = ResultStore(tmp_path / "r").results()
    assert (rec.status, rec.method, rec.avg_ts, rec.n_prompt, rec.n_gen) == (
        "failed",
        "vllm-bench-serve",
        None,
        128,
        32,
    )
    assert "generated 8 of 256 requested tokens" in (rec.error or "")
    assert "generated 8 of 256 requested tokens" in out.output  # said, not only stored


def test_serve_result_without_its_output_length_names_the_file(tmp_path: Path) -> None:
    src = put(tmp_path, "vllm-serve-short-outputs.json", "published.json")
    with pytest.raises(BadInput, match=r"published\.json.*--output-len"):
        imp(tmp_path, src)
    assert not (tmp_path / "results").exists() or not ResultStore(tmp_path / "results").results()


def test_latency_pair_gives_prefill_and_decode_like_the_runner(tmp_path: Path) -> None:
    short = put(tmp_path, "vllm-0.16.0-latency.json", "lat-128-1.json")  # avg 0.0615 s
    long = put(tmp_path, "vllm-neighbour-latency.json", "lat-128-33.json")  # avg 1.25 s
    store, _ = imp(tmp_path, short, long)
    by = {r.method: r for r in store.results()}
    pp, tg = by["vllm-bench-latency-prefill"], by["vllm-bench-latency-decode"]
    assert (pp.test, pp.axis, pp.n_prompt, pp.runner) == ("pp128", "prefill", 128, "vllm")
    assert pp.avg_ts == pytest.approx(128 / 0.06152451140014455, rel=1e-4) and len(pp.samples_ts) == 5
    assert (tg.test, tg.axis, tg.n_gen, tg.status) == ("tg32", "decode", 32, "ok")
    assert tg.avg_ts == pytest.approx(32 / (1.25 - 0.06152451140014455), rel=1e-4)


def test_decode_latency_without_its_reference_run_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"lat-128-33\.json.*output-1 run"):
        imp(tmp_path, put(tmp_path, "vllm-neighbour-latency.json", "lat-128-33.json"))


def test_latency_lengths_from_options(tmp_path: Path) -> None:
    store, _ = imp(
        tmp_path, put(tmp_path, "vllm-0.28.0-cpu-latency.json", "x.json"), input_len=64, output_len=1
    )
    (rec,) = store.results()
    assert (rec.test, rec.method) == ("pp64", "vllm-bench-latency-prefill")


def test_throughput_result(tmp_path: Path) -> None:
    ok = {
        "elapsed_time": 2.0,
        "num_requests": 10,
        "total_num_tokens": 1920,
        "requests_per_second": 5.0,
        "tokens_per_second": 960.0,
    }
    bad = {**ok, "total_num_tokens": 1290, "tokens_per_second": 645.0}
    store, res = imp(
        tmp_path, put(tmp_path, ok, "throughput-128-64.json"), put(tmp_path, bad, "throughput-128-65.json")
    )
    good, failed = store.results()
    assert (good.method, good.axis, good.status, good.avg_ts) == (
        "vllm-bench-throughput",
        "served",
        "ok",
        320.0,
    )
    assert failed.status == "failed" and "total_num_tokens 1290" in (failed.error or "")
    assert len(res.failed) == 1
    from toolkit.analysis import tables

    (served,) = [t for t in tables.tables(store.results()) if t.axis == "served"]
    assert [row.test for row in served.rows] == ["offline in128 out64"]  # not `cNone in128 out64` (issue 31)


def test_vllm_and_llama_bench_files_are_imported_apart(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="apart"):
        imp(
            tmp_path,
            put(tmp_path, "vllm-0.16.0-serve.json", "serve-128-32-c2.json"),
            DATA / "cases" / "stddev-nan.jsonl",
        )


def test_imported_vllm_results_stand_in_the_report_beside_runner_axes(tmp_path: Path) -> None:
    from toolkit.analysis import tables

    store, _ = imp(
        tmp_path,
        put(tmp_path, "vllm-0.28.0-cpu-serve.json", "serve-32-8-c2.json"),
        put(tmp_path, "vllm-0.16.0-latency.json", "lat-128-1.json"),
    )
    assert sorted(t.axis for t in tables.tables(store.results())) == ["prefill", "served"]


@pytest.mark.parametrize(
    ("key", "value"), [("output_throughput", -7), ("output_throughput", 10**400), ("num_prompts", 1e308)]
)
def test_a_serve_file_with_an_impossible_number_is_bad_input_naming_it(tmp_path, key, value):
    """Breaker trial: these gave tracebacks (pydantic, OverflowError)."""
    from click.testing import CliRunner

    from toolkit.cli.main import cli

    src = sorted((Path(__file__).parent / "data").glob("vllm-0.16.0-serve*.json"))[0]
    data = json.loads(src.read_text())
    data[key] = value
    f = tmp_path / "serve-128-32-c2.json"
    f.write_text(json.dumps(data))
    res = CliRunner().invoke(cli, ["import", "--results", str(tmp_path / "r"), "--label", "v", str(f)])
    from toolkit.core.errors import BadInput

    assert isinstance(res.exception, BadInput) or res.exit_code == 0, res.output
    if isinstance(res.exception, BadInput):
        assert str(f) in str(res.exception)
