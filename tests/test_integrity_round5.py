"""Round 5 of the integrity faults: a value that contradicts the others of its own result is refused,
naming the field, never stored as a measurement.
- llama-bench: stddev_ts against the sample stddev of samples_ts (a 2x regression hidden as "within
  noise", a spread of 127 % shown as ± 0.00), samples_ns against samples_ts with or without avg_ns
  (runtimes/llama_bench/check.py).
- vLLM: serve throughputs against counts / duration, duration 0, more completed than sent, negative or
  contradicting latencies; latency results' latencies, avg_latency, std_latency, percentiles
  (runtimes/vllm/output.py serve_problem, latency_problem)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.project import DATA
from toolkit.cli.main import cli
from toolkit.results.records import ResultStore
from toolkit.runtimes.llama_bench.validity import check_row


def _row(**kw: Any) -> dict[str, Any]:
    """The pp64 row of a real llama-bench 0c1e57098 jsonl without its measured fields, given `kw`."""
    row = json.loads((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
    for k in ("avg_ns", "stddev_ns", "samples_ns", "avg_ts", "stddev_ts", "samples_ts"):
        row.pop(k)
    row.update(n_prompt=64, n_gen=0, **kw)
    return row


def _run(*args: str) -> tuple[int, str]:
    """The exit code main() gives (CliRunner leaves a toolkit error as the exception) and what it says."""
    res = CliRunner().invoke(cli, list(args))
    if res.exception and not hasattr(res.exception, "exit_code"):
        raise res.exception
    return getattr(res.exception, "exit_code", res.exit_code), res.output + str(res.exception or "")


def _import(tmp_path: Path, name: str, text: str) -> tuple[int, str]:
    src = tmp_path / "in" / name
    src.parent.mkdir(exist_ok=True)
    src.write_text(text)
    return _run("import", "--results", str(tmp_path / "r"), "--label", name.split(".")[0], str(src))


ROW_A = _row(avg_ts=100.0, stddev_ts=0.5, samples_ts=[99.5, 100.5])


def test_a_consistent_row_is_still_a_measurement() -> None:
    assert check_row(ROW_A) is None  # 0.5 vs 0.71: the noise read as a share of 100 differs by 0.2 %
    assert (
        check_row(_row(avg_ts=100.0, stddev_ts=0.0, samples_ts=[100.0, 100.0], samples_ns=[640000000] * 2))
        is None
    )


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        # a real 2x regression shown as "slower within noise (± 240%)"
        (
            {"avg_ts": 50.0, "stddev_ts": 60.0, "samples_ts": [50.0, 50.0]},
            "stddev_ts 60 contradicts samples_ts",
        ),
        # a spread of 127 % shown as 100.00 ± 0.00
        (
            {"avg_ts": 100.0, "stddev_ts": 0.0, "samples_ts": [10.0, 190.0]},
            "stddev_ts 0 contradicts samples_ts",
        ),
        ({"avg_ts": 100.0, "stddev_ts": "60", "samples_ts": [100.0, 100.0]}, "stddev_ts 60 contradicts"),
        # the stddev of the rates samples_ns gives when samples_ts is absent
        (
            {"avg_ts": 100.0, "stddev_ts": 60.0, "samples_ns": [640000000, 640000000]},
            "stddev_ts 60 contradicts samples_ns",
        ),
        # 64 tokens in 1 ns, no avg_ns
        (
            {"avg_ts": 100.0, "stddev_ts": 0.0, "samples_ts": [100.0, 100.0], "samples_ns": [1, 1]},
            "samples_ts[0] 100 contradicts samples_ns[0] 1",
        ),
        ({"avg_ts": 100.0, "stddev_ts": 0.0, "samples_ns": [1, 1]}, "avg_ts 100 contradicts samples_ns"),
        (
            {"avg_ts": 100.0, "samples_ts": [100.0, 100.0], "samples_ns": [640000000]},
            "samples_ts has 2 values, samples_ns 1",
        ),
        (
            {"avg_ts": 1000.0, "stddev_ts": 0.0, "samples_ts": [100.0, 100.0]},
            "avg_ts 1000 contradicts samples_ts",
        ),
    ],
)
def test_a_row_whose_spread_or_samples_contradict_is_refused_naming_the_field(
    tmp_path: Path, kw: dict[str, Any], says: str
) -> None:
    row = _row(**kw)
    assert says in (check_row(row) or "")
    code, out = _import(tmp_path, "b.jsonl", json.dumps(ROW_A) + "\n" + json.dumps(row) + "\n")
    assert code == 0 and says in out, out  # refused, named; the good row stored
    assert [r.avg_ts for r in ResultStore(tmp_path / "r").results()] == [100.0]


def test_every_real_capture_still_passes() -> None:
    from toolkit.runtimes.llama_bench.readers import read_source

    rows = 0
    for path in sorted(DATA.rglob("*")):
        if path.suffix not in (".jsonl", ".json", ".csv", ".sql") or "cases" in path.parts:
            continue
        _fmt, found = read_source(path.read_text(errors="replace"))
        for r in found:
            if r.fields.get("samples_ts") or r.fields.get("stddev_ts") not in (None, ""):
                why = check_row(r.fields, r.problem)
                assert why is None or "contradicts" not in why, (path, r.line, why)
                rows += 1
    assert rows > 50


SERVE = json.loads((DATA / "vllm-0.16.0-serve.json").read_text())
NO_TPOT_SPREAD = dict.fromkeys(("median_tpot_ms", "std_tpot_ms", "p50_tpot_ms", "p90_tpot_ms", "p99_tpot_ms"))
"""The tpot figures round 27's spread rule reads (vllm output._spread_problem: a mean below half its
median is refused first) left out, so the decode-time rule is the one a mean tpot meets."""


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"output_throughput": 61210.0}, "output_throughput 61210 contradicts total_output_tokens 256"),
        ({"total_token_throughput": 3060.7}, "total_token_throughput 3060.7 contradicts"),
        ({"request_throughput": 19.13}, "request_throughput 19.13 contradicts completed 8"),
        ({"duration": 0}, "duration is 0: a benchmark takes time"),
        ({"completed": 800}, "completed 800 + failed 0 is more than num_prompts 8"),
        ({"completed": 7.5}, "completed is 7.5: a count is a whole number"),
        ({"mean_ttft_ms": -5}, "mean_ttft_ms is -5: a time is never negative"),
        ({"p99_itl_ms": -1}, "p99_itl_ms is -1"),
        ({"mean_ttft_ms": 5000.0}, "mean_ttft_ms 5000 is more than mean_e2el_ms"),
        (
            {"mean_tpot_ms": 0.001, **NO_TPOT_SPREAD},
            "mean_tpot_ms 0.001 contradicts the requests' decode time",
        ),
        ({"mean_tpot_ms": 0, **NO_TPOT_SPREAD}, "mean_tpot_ms 0 contradicts"),
        ({"mean_tpot_ms": 0.001}, "mean_tpot_ms 0.001 is less than half its median 28.1"),
    ],
)
def test_a_serve_result_that_contradicts_itself_is_refused_naming_the_field(
    tmp_path: Path, kw: dict[str, Any], says: str
) -> None:
    code, out = _import(tmp_path, "serve-128-32-c2.json", json.dumps({**SERVE, **kw}))
    assert code == 4 and says in out, out
    assert not (tmp_path / "r").exists() or not ResultStore(tmp_path / "r").results()


def test_real_serve_captures_still_import(tmp_path: Path) -> None:
    for i, name in enumerate(["vllm-0.16.0-serve.json", "vllm-neighbour-serve.json"]):
        src = tmp_path / f"in{i}" / "serve-128-32-c2.json"
        src.parent.mkdir()
        shutil.copy(DATA / name, src)
        code, out = _run("import", "--results", str(tmp_path / "r"), "--label", f"x{i}", str(src))
        assert code == 0, out


LATENCY = json.loads((DATA / "vllm-0.16.0-latency.json").read_text())


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"latencies": ["a"]}, "latencies[0] is 'a': expected a time in seconds above 0"),
        ({"latencies": [*LATENCY["latencies"], -0.06]}, "latencies[5] is -0.06"),
        ({"latencies": {"x": 1}}, "latencies is dict"),
        ({"avg_latency": 0.615}, "avg_latency 0.615 s contradicts latencies"),
        ({"std_latency": 0.02}, "std_latency 0.02 s contradicts latencies"),
        ({"percentiles": {"50": -1}}, "percentiles['50'] is -1"),
    ],
)
def test_a_latency_result_that_contradicts_itself_is_refused_naming_the_field(
    tmp_path: Path, kw: dict[str, Any], says: str
) -> None:
    code, out = _import(tmp_path, "lat-128-1.json", json.dumps({**LATENCY, **kw}))
    assert code == 4 and says in out, out


def test_a_bad_reference_run_is_named_not_an_assertion(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "lat-128-33.json").write_text(json.dumps(LATENCY))
    (tmp_path / "in" / "lat-128-1.json").write_text(json.dumps({**LATENCY, "latencies": ["a"]}))
    code, out = _run(
        "import",
        "--results",
        str(tmp_path / "r"),
        "--label",
        "x",
        *(str(tmp_path / "in" / n) for n in ("lat-128-33.json", "lat-128-1.json")),
    )
    assert code == 4 and "lat-128-1.json: a `vllm bench latency` result that is no measurement" in out, out
