"""Breaker round 10 (issue 32): the four faults round 9 found and left (docs/reliability-log.md sections 13
and 14), each a stored or imported figure not held to the figures it is computed from: an md header
that sets one field from two columns, a stored canary that contradicts itself, a vLLM serve duration
shorter than its own requests allow, a stored between_runs whose means are not its samples'. Inputs in
tests/data/breaker10/ (md tables edited from llamabench-0c1e57098-cpu.md), the rest edited in place
from real captures."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import DATA, ROOT
from tests.support.records import CANARY_CONTROL as CONTROL
from tests.support.records import canary_row as _canary
from tests.support.records import make_record
from tests.support.runs import tk
from toolkit.analysis import provenance, report
from toolkit.bench import canary
from toolkit.results.records import ResultStore, append_jsonl
from toolkit.runtimes.llama_bench import readers
from toolkit.runtimes.vllm import output as vf

B10 = DATA / "breaker10"


def _project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    return tmp_path


# ------------------------------------------------------------------ 1. one field from two md columns


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("ts_and_avg_ts", "sets avg_ts from two columns, 't/s' and 'avg_ts'"),  # was: avg_ts 375358.9 stored
        ("threads_and_n_threads", "sets n_threads from two columns, 'threads' and 'n_threads'"),  # was: 16
        (
            "test_and_n_prompt",
            "sets n_prompt from two columns, 'n_prompt' and 'test'",
        ),  # was: pp64 at n_prompt 64
        ("build_column", "column build_commit 'b3599aaa' contradicts the build line's '0c1e57098'"),
    ],
)
def test_an_md_table_setting_one_field_twice_is_refused_naming_file_columns_and_field(
    tmp_path: Path, name: str, said: str
) -> None:
    res = tk(_project(tmp_path), "import", "--results", "r", "--label", name, str(B10 / f"{name}.md"))
    out = res.stdout + res.stderr
    assert res.returncode == 4 and f"{B10 / name}.md: no llama-bench result rows" in out and said in out, out
    assert not (tmp_path / "r").exists() or not ResultStore(tmp_path / "r").results()


def test_md_header_aliases_are_every_pair_that_reaches_one_field() -> None:
    where = "the header"
    for a, b in (("model", "model_type"), ("fa", "flash_attn"), ("t/s", "stddev_ts"), ("test", "n_depth")):
        assert f"from two columns, {a!r} and {b!r}" in (readers.md_header_problem([a, "x", b], where) or "")
    assert "names column 't/s' twice" in (readers.md_header_problem(["t/s", "t/s"], where) or "")
    assert readers.md_header_problem(["model", "size", "ngl", "test", "t/s", ""], where) is None


def test_real_md_tables_still_import(tmp_path: Path) -> None:
    for i, f in enumerate(
        [
            DATA / "llamabench-0c1e57098-cpu.md",
            *(DATA / "cases" / "turn3" / f"{n}.md" for n in ("bare", "fenced")),
        ]
    ):
        res = tk(_project(tmp_path), "import", "--results", "r", "--label", f"m{i}", str(f))
        assert res.returncode == 0, res.stdout + res.stderr


# ------------------------------------------------------------------ 2. a stored canary that contradicts itself


BAD_CANARIES = [
    ({"ppl": "nan"}, "perplexity nan is not a sane model's"),
    ({"ppl": -5}, "perplexity -5.0 is not a sane model's"),
    ({"ppl": 0}, "perplexity 0.0 is not a sane model's"),
    ({"ppl": "inf", "control": None, "ln_ratio": None}, "perplexity inf is not a sane model's"),
    ({"ln_ratio": 0.0005}, "ln_ratio 0.0005 is not ln(535.903 / 535.877)"),
    (
        {"ppl": 1071.75, "ln_ratio": math.log(1071.75 / 535.8769)},
        "differs from the CPU control's 535.9 by a factor 2",
    ),
    ({"control": None}, "is not none: there is no control"),
    ({"control": {**CONTROL, "ppl": -1}}, "the control's ppl -1 is not a sane model's"),
    ({"status": "passed"}, "status 'passed' is none of ok, wrong-output, unchecked"),
]


@pytest.mark.parametrize(("kw", "why"), BAD_CANARIES)
def test_a_self_contradicting_canary_is_never_a_pass_in_any_format(kw: dict[str, Any], why: str) -> None:
    recs = [make_record("vulkan", "vulkan", n=128, avg=90.0, sd=0.5, canary=_canary(**kw))]
    (line,) = provenance.provenance(recs).images
    said = "canary unchecked: the stored result contradicts itself: "
    assert said in line and why in line and "PPL" not in line, line
    for fmt in ("text", "github", "html", "json"):
        out = " ".join(report.render(recs, fmt).split())  # text wraps its lines to the terminal
        assert "the stored result contradicts itself" in out and "PPL " not in out, fmt


def test_a_sound_canary_is_still_said_as_before() -> None:
    for c, said in (
        (_canary(), "PPL 535.903 (cpu control 535.877, within 0.0048 %)"),
        (_canary(image="cpu", digest=CONTROL["digest"], ppl=535.8769, ln_ratio=None), "(the CPU control)"),
        (_canary(control=None, ln_ratio=None), "(no CPU control: only checked to be finite)"),
    ):
        line = provenance.provenance([make_record("vulkan", "vulkan", n=128, avg=9.0, canary=c)]).images[0]
        assert line.endswith(said), line


def test_report_and_compare_of_stored_self_contradicting_canaries(tmp_path: Path) -> None:
    store = ResultStore(_project(tmp_path) / "r")
    store.add_result(
        make_record("vulkan", "vulkan", n=128, avg=100.0, sd=0.5, run_id="run-a", canary=_canary())
    )
    bad = _canary(ppl="nan")
    store.add_result(make_record("vulkan", "vulkan", n=128, avg=99.0, sd=0.5, run_id="run-b", canary=bad))
    rep = tk(tmp_path, "report", "--results", "r", "--run", "run-b")
    assert rep.returncode == 0 and "canary unchecked: the stored result contradicts itself" in rep.stdout
    cmp = tk(tmp_path, "compare", "--results", "r", "run-a", "run-b")
    assert cmp.returncode == 0 and "Traceback" not in cmp.stderr and "PPL nan" not in cmp.stdout, cmp.stderr


def test_a_stored_control_that_contradicts_itself_is_no_control(tmp_path: Path) -> None:
    """Was: a hand-edited cpu control of ppl -5 was taken, and judge's log of a negative ratio raised."""
    store = ResultStore(tmp_path / "r")
    me = canary.CanaryResult(
        "vulkan", "m", "sha256:" + "76" * 32, "vulkan", "a" * 64, "unchecked", text_sha256="t"
    )
    control = {
        **canary.CanaryResult("cpu", "m", CONTROL["digest"], "cpu", "a" * 64, "ok").record(),
        "ppl": -5.0,
    }
    append_jsonl(tmp_path / "r" / "637075006370" / "canary.jsonl", {**control, "text_sha256": "t"})
    assert canary.stored_control(store, me) is None
    canary.judge_parsed(me, 535.9, 0.1, False, store, {})
    assert me.status == "ok" and me.control is None


# ------------------------------------------------------------------ 3. a serve duration its requests cannot fit

SERVE = json.loads((DATA / "vllm-0.16.0-serve.json").read_text())


DETAILED = {"ttfts": [0.15] * 8, "itls": [[0.028] * 31] * 8}  # 8 requests of 0.15 + 31 x 0.028 s
NO_E2EL = {k: None for k in SERVE if k.endswith("_e2el_ms")}


def _in(seconds: float, **kw: Any) -> dict[str, Any]:
    """The real 0.16.0 serve result with its duration `seconds` and its rates kept the duration's."""
    rates = {
        "request_throughput": SERVE["completed"] / seconds,
        "output_throughput": SERVE["total_output_tokens"] / seconds,
        "total_token_throughput": (SERVE["total_input_tokens"] + SERVE["total_output_tokens"]) / seconds,
    }
    return {**SERVE, "duration": seconds, **rates, **kw}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        # 8 requests of 1.03 s at max_concurrency 2 in 2 s: they need 4.13 s (the capture: 4.182 s)
        (
            _in(2.0),
            "duration 2 s is shorter than its requests allow: 8 completed of mean_e2el_ms 1032.8, at most 2",
        ),
        (_in(4.0, max_concurrency=1), "at most 1 at once (max_concurrency), take at least 8.262 s"),
        # one request's latency longer than the whole benchmark
        (_in(1.0, max_concurrency=8), "mean_e2el_ms 1032.8 is longer than duration 1 s"),
        # (round 27: a p99 ttft alone past the duration is refused earlier, as above its e2el's and its
        # std; here its e2el's p99 and both stds are raised with it, as one long request would)
        (
            _in(4.182, p99_ttft_ms=4500.0, p99_e2el_ms=4600.0, std_ttft_ms=1100.0, std_e2el_ms=900.0),
            "p99_ttft_ms 4500 is longer than duration 4.182 s",
        ),
        # --save-detailed's per-request ttfts and itls (1.018 s each), no e2el statistics
        (_in(3.0, **DETAILED, **NO_E2EL), "the ttfts + itls of 8 requests, at most 2 at once"),
        (
            _in(0.5, **DETAILED, **NO_E2EL, max_concurrency=8),
            "a request's ttft + itls take 1.018 s, longer than duration 0.5 s",
        ),
        # one statistic under two names
        (_in(4.182, p50_ttft_ms=10.0), "median_ttft_ms 148.9 contradicts p50_ttft_ms 10"),
    ],
)
def test_a_serve_result_whose_duration_its_requests_cannot_fit_is_refused(
    tmp_path: Path, data: dict[str, Any], said: str
) -> None:
    src = tmp_path / "in" / "serve-128-32-c2.json"
    src.parent.mkdir()
    src.write_text(json.dumps(data))
    res = tk(_project(tmp_path), "import", "--results", "r", "--label", "x", str(src))
    assert res.returncode == 4 and said in res.stdout + res.stderr, res.stdout + res.stderr
    assert not (tmp_path / "r").exists() or not ResultStore(tmp_path / "r").results()


def test_real_serve_captures_fit_their_duration() -> None:
    for name in ("vllm-0.16.0-serve.json", "vllm-0.28.0-cpu-serve.json", "vllm-neighbour-serve.json"):
        assert vf.serve_duration_problem(json.loads((DATA / name).read_text())) is None, name
    assert vf.serve_duration_problem({**SERVE, **DETAILED}) is None


def test_the_short_outputs_case_stays_failed_and_says_its_duration_too(tmp_path: Path) -> None:
    """../shared/cases/vllm-serve-short-outputs.json: its 1.2 s cannot hold 8 requests of 1.03 s at c2;
    it stays the failed record its shortfall makes (no rate of it is shown either way), naming both."""
    src = tmp_path / "in" / "vllm-serve-short-outputs.json"
    src.parent.mkdir()
    shutil.copy(DATA / "vllm-serve-short-outputs.json", src)
    res = tk(_project(tmp_path), "import", "--results", "r", "--label", "s", "--output-len", "32", str(src))
    assert res.returncode == 0, res.stdout + res.stderr
    (rec,) = ResultStore(tmp_path / "r").results()
    assert (
        rec.status == "failed" and rec.avg_ts is None and "generated 8 of 256 requested tokens" in rec.error
    )
    assert "duration 1.2 s is shorter than its requests allow" in (rec.error or "")


# ------------------------------------------------------------------ 4. between_runs held to its samples

BASE = json.loads((DATA / "breaker9" / "res_br_means.bench.jsonl").read_text().splitlines()[0])
RUN = BASE["samples_ts"]  # 5 repetitions of a real pp512 on an H200


def _combined(factors: list[float], **between: Any) -> dict[str, Any]:
    """BASE as if combined from processes whose samples are RUN x each factor, with `between` over
    what combine_runs would say."""
    parts = [[round(s * f, 1) for s in RUN] for f in factors]
    means = [round(statistics.fmean(p), 4) for p in parts]
    samples = [s for p in parts for s in p]
    mean = statistics.fmean(means)
    said = {
        "runs": len(parts),
        "means": means,
        "spread_pct": round(100 * (max(means) - min(means)) / mean, 2),
    }
    rec = {**BASE, "avg_ts": mean, "samples_ts": samples, "stddev_ts": statistics.stdev(samples)}
    rec.pop("telemetry")  # a window of one process's repetitions: not the combined record's
    return {**rec, "between_runs": {**said, **between}}


def _report(tmp_path: Path, rec: dict[str, Any]) -> Any:
    folder = _project(tmp_path) / "r" / "0d069551e9a8"
    folder.mkdir(parents=True)
    (folder / "bench.jsonl").write_text(json.dumps(rec) + "\n")
    return tk(tmp_path, "report", "--results", "r")


M = round(statistics.fmean(RUN), 4)


@pytest.mark.parametrize(
    ("between", "said"),
    [
        # three processes at 0.8x, 1x and 1.2x stored as three equal means: a 3-process interval of ± 0
        ({"means": [M, M, M], "spread_pct": 0.0}, "between_runs.means[0] 13331.2 is not its process's"),
        ({"spread_pct": 0.0}, "between_runs.spread_pct 0.0 is not its means' spread (40.00 %)"),
        ({"spread_pct": None}, "between_runs.spread_pct None is not"),
        ({"counts": [5, 5, 4]}, "between_runs.counts sum to 14, samples_ts holds 15"),
        ({"counts": [10, 0, 5]}, "between_runs.means[0] 10665 is not its process's: samples_ts[0:10]"),
    ],
)
def test_a_stored_between_runs_not_its_samples_is_skipped_naming_file_line(
    tmp_path: Path, between: dict[str, Any], said: str
) -> None:
    res = _report(tmp_path, _combined([0.8, 1.0, 1.2], **between))
    assert "Traceback" not in res.stderr, res.stderr
    assert f"bench.jsonl:1: skipped a record that contradicts itself: {said}" in res.stderr, res.stderr


def test_between_runs_without_counts_over_samples_no_even_split_gives_is_skipped(tmp_path: Path) -> None:
    rec = _combined([0.8, 1.0, 1.2])
    rec["samples_ts"] = rec["samples_ts"][:-1]
    rec["stddev_ts"] = statistics.stdev(rec["samples_ts"])
    res = _report(tmp_path, rec)
    assert (
        "3 processes and no counts over 14 samples_ts: which process gave which samples is unknown"
        in res.stderr
    )


@pytest.mark.parametrize("counts", [None, [5, 5, 5]])
def test_a_between_runs_that_is_its_samples_is_shown(tmp_path: Path, counts: list[int] | None) -> None:
    res = _report(tmp_path, _combined([0.8, 1.0, 1.2], **({"counts": counts} if counts else {})))
    assert res.returncode == 0 and "skipped" not in res.stderr, res.stderr
    assert "[3 runs, spread 40.0%]" in res.stdout or "(95% CI)" in res.stdout, res.stdout
