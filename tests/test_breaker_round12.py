"""Breaker round 12: the hostile cases round 11 left open (docs/reliability-log.md section 16), each a stored
or imported figure not held to what it is computed from: a stored canary judged by a bound the canary
never uses, or beside a control that is not the control's; several canaries of one image that disagree;
a served record's avg_ts against its own served block; between_runs on records without samples; vLLM
latency, serve and throughput results not held to their own counts; md column titles that only look
like llama-bench's, and a negative stddev. Each test failed on the code before the fix."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import DATA, ROOT

# ------------------------------------------------------------------ 1-3. stored canaries
from tests.support.records import CANARY_CONTROL as CONTROL
from tests.support.records import canary_row as _canary
from tests.support.records import make_record
from tests.support.runs import tk
from toolkit.analysis import provenance
from toolkit.core.errors import BadInput
from toolkit.results import canary_check, importer
from toolkit.results.records import ResultStore, bench_record
from toolkit.runtimes.llama_bench import readers, validity


def _own(**kw: Any) -> dict[str, Any]:
    """The CPU image's canary: its own control (toolkit.bench.canary.judge_parsed)."""
    return _canary(image="cpu", digest=CONTROL["digest"], backend="cpu", ppl=535.8769, ln_ratio=None, **kw)


def _line(*canaries: dict[str, Any]) -> str:
    recs = [
        make_record(
            str(c["image"]), str(c["backend"]), n=128, avg=90.0 + i, sd=0.5, canary=c, digest=c["digest"]
        )
        for i, c in enumerate(canaries)
    ]
    return "\n".join(provenance.provenance(recs).images)


@pytest.mark.parametrize("bound", [1000, 0.5, 0.0501, 1e308])
def test_a_canary_judged_by_a_bound_the_canary_never_uses_is_unchecked(bound: float) -> None:
    # ln ratio 2.5 (a factor 12): a pass under bound 1000 (was: `PPL 6512 (cpu control 535.877...)`)
    far = _canary(ppl=6512.0, ln_ratio=math.log(6512.0 / 535.8769), bound_ln=bound)
    near = _canary(bound_ln=bound)
    for c in (far, near):
        why = canary_check.canary_problem(c) or ""
        assert f"bound_ln {bound}" in why and f"the canary judges by {canary_check.BOUND_LN}" in why, why
        line = _line(c)
        assert "canary unchecked: the stored result contradicts itself" in line and "PPL" not in line, line


def test_a_canary_at_the_canarys_bound_or_tighter_is_still_a_pass() -> None:
    for bound in (canary_check.BOUND_LN, 0.01):
        assert canary_check.canary_problem(_canary(bound_ln=bound)) is None
    assert "PPL 535.903 (cpu control 535.877" in _line(_canary())


@pytest.mark.parametrize(
    ("c", "why"),
    [
        # the CPU image is its own control: the control's ppl is its own, and it has no ratio
        (_own(control={**CONTROL, "ppl": 540.0}), "its own control's ppl 540.0 is not its ppl 535.8769"),
        (_own(control={**CONTROL, "run_id": "run-0"}), "its own control's run_id 'run-0' is not its run_id"),
        (_own(control={**CONTROL, "image": "vulkan"}), "a cpu image's canary is its own control"),
    ],
)
def test_a_canary_whose_own_control_is_not_its_figures_is_unchecked(c: dict[str, Any], why: str) -> None:
    assert why in (canary_check.canary_problem(c) or ""), canary_check.canary_problem(c)
    line = _line(c)
    assert "canary unchecked" in line and "(the CPU control)" not in line, line


def test_a_canary_whose_control_is_not_the_stored_controls_result_is_unchecked() -> None:
    """The vulkan canary says its control (cpu, run-1) had PPL 6512: the cpu image's own stored result of
    run-1 says 535.877; judged against the stored one it is a factor 12 off (was: a pass)."""
    fake = _canary(ppl=6512.0, control={**CONTROL, "ppl": 6512.0}, ln_ratio=0.0)
    line = _line(_own(), fake)
    assert "canary unchecked" in line and "its control's ppl 6512 is not the control's stored 535.877" in line
    assert "PPL 6512" not in line, line
    assert "PPL 535.903 (cpu control 535.877" in _line(_own(), _canary())  # the true one: as before


def test_canaries_of_one_image_that_disagree_say_so_worst_first() -> None:
    bad = _canary(
        status="wrong-output", reason="perplexity nan is not a sane model's", ppl="nan", ln_ratio=None
    )
    line = _line(_own(), _canary(), bad)  # was: the first (the pass) only
    vk = next(x for x in line.splitlines() if "vulkan" in x)
    assert "canary results disagree (2 results)" in vk, vk
    assert vk.index("wrong output: perplexity nan") < vk.index("PPL 535.903"), vk
    assert "disagree" not in _line(_own(), _canary(), _canary()), "the same result twice is one"


# ------------------------------------------------------------------ 4. a served record's avg_ts

SERVE_028 = json.loads((DATA / "vllm-0.28.0-cpu-serve.json").read_text())
THROUGHPUT = {
    "elapsed_time": 2.0,
    "num_requests": 10,
    "total_num_tokens": 1920,
    "requests_per_second": 5.0,
    "tokens_per_second": 960.0,
}


def _put(tmp_path: Path, data: dict[str, Any], name: str) -> Path:
    dst = tmp_path / "in" / name
    dst.parent.mkdir(exist_ok=True)
    dst.write_text(json.dumps(data))
    return dst


def _import(tmp_path: Path, *files: Path, **kw: Any) -> ResultStore:
    store = ResultStore(tmp_path / "results")
    importer.import_files(store, list(files), label="x", **kw)
    return store


def test_a_serve_result_without_duration_is_held_by_its_other_rates(tmp_path: Path) -> None:
    """Without `duration` output_throughput was held to nothing: 1000x its tokens was imported."""
    data = {k: v for k, v in SERVE_028.items() if k != "duration"}
    data["output_throughput"] *= 1000
    with pytest.raises(
        BadInput,
        match=r"serve-32-8-c2\.json: .*output_throughput 113328 contradicts total_token_throughput 566\.64",
    ):
        _import(tmp_path, _put(tmp_path, data, "serve-32-8-c2.json"))
    alone = {k: v for k, v in data.items() if k not in ("request_throughput", "total_token_throughput")}
    with pytest.raises(BadInput, match=r"output_throughput 113328 cannot be held to its counts: no duration"):
        _import(tmp_path, _put(tmp_path, alone, "serve-32-8-c2.json"))
    assert not (tmp_path / "results").exists() or not ResultStore(tmp_path / "results").results()


def _stored(tmp_path: Path, data: dict[str, Any], name: str) -> dict[str, Any]:
    store = _import(tmp_path, _put(tmp_path, data, name))
    (path,) = store.bench_files()
    line = json.loads(path.read_text().splitlines()[0])
    assert bench_record(line)[1] is None  # as written: sound
    return line


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            lambda r: r.update(avg_ts=r["avg_ts"] * 1000),
            "avg_ts 113328 is not its served block's output_throughput",
        ),
        (
            lambda r: (
                r.update(avg_ts=r["avg_ts"] * 1000),
                r["served"].update(output_throughput=r["avg_ts"]),
            ),
            "avg_ts 113328 is not served.total_output_tokens 32 / served.duration 0.2824 s",
        ),
        (
            lambda r: (
                r.update(avg_ts=r["avg_ts"] * 1000),
                r["served"].update(output_throughput=r["avg_ts"], duration=r["served"]["duration"] / 1000),
            ),
            "avg_ts 113328 is not its result's output_throughput",
        ),
    ],
)
def test_a_stored_serve_record_whose_avg_ts_is_not_its_served_block_is_skipped(
    tmp_path: Path, edit: Any, said: str
) -> None:
    line = _stored(tmp_path, SERVE_028, "serve-32-8-c2.json")
    edit(line)
    rec, why = bench_record(line)
    assert rec is None and said in (why or ""), why


def test_a_stored_throughput_record_whose_avg_ts_is_not_its_counts_is_skipped(tmp_path: Path) -> None:
    line = _stored(tmp_path, THROUGHPUT, "throughput-128-64.json")
    line["avg_ts"] = 320000.0
    rec, why = bench_record(line)
    assert rec is None and "avg_ts 320000 is not served.completed 10 x n_gen 64 / served.duration 2 s" in (
        why or ""
    ), why


def test_a_stored_served_record_is_skipped_by_report_naming_file_line(tmp_path: Path) -> None:
    line = _stored(tmp_path, SERVE_028, "serve-32-8-c2.json")
    line["avg_ts"] *= 1000
    folder = tmp_path / "p" / "r" / "0d069551e9a8"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "p" / "matrix.yaml")
    (folder / "bench.jsonl").write_text(json.dumps(line) + "\n")
    res = tk(tmp_path / "p", "report", "--results", "r")
    assert "bench.jsonl:1: skipped a record that contradicts itself: avg_ts 113328" in res.stderr, res.stderr


# ------------------------------------------------------------------ 5. between_runs without samples


def _no_samples(means: list[float], sd: float | None, **runs: Any) -> dict[str, Any]:
    mean = statistics.fmean(means)
    rec = make_record("cpu", "cpu", p=512, avg=mean, sd=sd or 0.0).model_dump(mode="json")
    rec["stddev_ts"] = sd
    spread = round(100 * (max(means) - min(means)) / mean, 2)
    return {**rec, "between_runs": {"runs": len(means), "means": means, "spread_pct": spread, **runs}}


@pytest.mark.parametrize(
    ("rec", "said"),
    [
        # three equal means (an interval of ± 0) beside a stddev of 20: not what combining them gives
        (
            _no_samples([100.0, 100.0, 100.0], 20.0),
            "stddev_ts 20 is not the stddev of between_runs.means (0)",
        ),
        (_no_samples([80.0, 100.0, 120.0], 0.0), "stddev_ts 0 is not the stddev of between_runs.means (20)"),
        (_no_samples([80.0, 100.0, 120.0], None), "stddev_ts None is not the stddev of between_runs.means"),
        (_no_samples([80.0, 100.0, 120.0], 20.0, counts=[2, 2, 2]), "counts sum to 6, samples_ts holds 0"),
    ],
)
def test_between_runs_without_samples_is_held_to_what_can_be_checked(rec: dict[str, Any], said: str) -> None:
    got, why = bench_record(rec)
    assert got is None and said in (why or ""), why


def test_between_runs_without_samples_that_combining_gives_is_kept() -> None:
    for rec in (
        _no_samples([80.0, 100.0, 120.0], 20.0),
        _no_samples([80.0, 100.0, 120.0], 20.0, counts=[0, 0, 0]),
    ):
        got, why = bench_record(rec)
        assert got is not None and why is None, why


# ------------------------------------------------------------------ 6. vLLM results held to their counts


@pytest.mark.parametrize(
    ("data", "name", "said"),
    [
        # 10 requests of 64 output tokens in 0.2 ms: 64 forward passes one after another in 3 us each
        (
            {**THROUGHPUT, "elapsed_time": 0.0002, "requests_per_second": 5e4, "tokens_per_second": 9.6e6},
            "throughput-128-64.json",
            "elapsed_time 0.0002 s is shorter than 64 output tokens one after another allow",
        ),
        ({**THROUGHPUT, "elapsed_time": 0}, "throughput-128-64.json", "elapsed_time is 0"),
        (
            {**THROUGHPUT, "tokens_per_second": 9600.0},
            "throughput-128-64.json",
            "tokens_per_second 9600 contradicts",
        ),
        (
            {**THROUGHPUT, "requests_per_second": 50.0},
            "throughput-128-64.json",
            "requests_per_second 50 contradicts",
        ),
        ({**THROUGHPUT, "num_requests": 10.5}, "throughput-128-64.json", "num_requests is 10.5"),
        # latency percentiles inverted, or outside the latencies they are taken from
        (
            {"avg_latency": 1.25, "latencies": [1.24, 1.25, 1.26], "percentiles": {"50": 1.26, "99": 1.24}},
            "lat-128-1.json",
            "percentiles['99'] 1.24 is below percentiles['50'] 1.26",
        ),
        (
            {"avg_latency": 1.25, "latencies": [1.24, 1.25, 1.26], "percentiles": {"50": 1.25, "99": 9.0}},
            "lat-128-1.json",
            "percentiles['99'] 9 lies outside latencies (1.24 to 1.26 s)",
        ),
        # serve: percentiles inverted, output_lens / input_lens not the totals
        (
            {**SERVE_028, "p99_ttft_ms": 50.0},
            "serve-32-8-c2.json",
            "p99_ttft_ms 50 is below p90_ttft_ms 152.154",
        ),
        (
            {**SERVE_028, "output_lens": [8, 8, 8, 80], "input_lens": [32] * 4},
            "serve-32-8-c2.json",
            "output_lens sum to 104, total_output_tokens is 32",
        ),
        (
            {**SERVE_028, "output_lens": [8, 8, 8, 8, 0], "input_lens": [32] * 5},
            "serve-32-8-c2.json",
            "output_lens has 5 requests, completed + failed is 4",
        ),
        (
            {**SERVE_028, "output_lens": [8] * 4, "input_lens": [32, 32, 32, 3200]},
            "serve-32-8-c2.json",
            "input_lens sum to 3296, total_input_tokens is 128",
        ),
        # the name says 32 input tokens, the counts 150 over 4 completed requests (37.5 each: beyond a
        # token's re-encoding difference), the rates made to agree with them
        (
            {**SERVE_028, "total_input_tokens": 150, "total_token_throughput": 182 / SERVE_028["duration"]},
            "serve-32-8-c2.json",
            "its own counts 37.5 (150 over 4 completed requests)",
        ),
    ],
)
def test_a_vllm_result_not_held_to_its_counts_is_refused_naming_file_and_field(
    tmp_path: Path, data: dict[str, Any], name: str, said: str
) -> None:
    src = _put(tmp_path, data, name)
    with pytest.raises(BadInput) as err:
        _import(tmp_path, src)
    assert str(src) in str(err.value) and said in str(err.value), err.value
    assert not (tmp_path / "results").exists() or not ResultStore(tmp_path / "results").results()


def test_a_vllm_result_refused_exits_4_naming_the_file(tmp_path: Path) -> None:
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    src = _put(tmp_path, {**THROUGHPUT, "elapsed_time": 0.0002}, "throughput-128-64.json")
    res = tk(tmp_path, "import", "--results", "r", "--label", "x", str(src))
    assert res.returncode == 4 and str(src) in res.stderr and "elapsed_time" in res.stderr, res.stderr


def test_real_vllm_captures_still_import(tmp_path: Path) -> None:
    def one(name: str, data: dict[str, Any], *more: Path) -> list[str]:
        shutil.rmtree(tmp_path / "results", ignore_errors=True)
        return [r.status for r in _import(tmp_path, _put(tmp_path, data, name), *more).results()]

    def real(name: str) -> dict[str, Any]:
        return json.loads((DATA / name).read_text())

    assert one("serve-128-32-c2.json", real("vllm-0.16.0-serve.json")) == ["ok"]
    assert one("serve-32-8-c2.json", SERVE_028) == ["ok"]
    lens = {**SERVE_028, "output_lens": [8] * 4, "input_lens": [32] * 4}  # --save-detailed's lists
    assert one("serve-32-8-c2.json", lens) == ["ok"]
    assert one("throughput-128-64.json", THROUGHPUT) == ["ok"]
    # a random prompt re-encoded a token off its asked length (vLLM's "token mismatch"): 130 over 4
    drift = {**SERVE_028, "total_input_tokens": 130, "total_token_throughput": 162 / SERVE_028["duration"]}
    assert one("serve-32-8-c2.json", drift) == ["ok"]
    long = _put(tmp_path, real("vllm-neighbour-latency.json"), "lat-128-33.json")
    assert one("lat-128-1.json", real("vllm-0.16.0-latency.json"), long) == ["ok", "ok"]


# ------------------------------------------------------------------ 7. md column titles, negative stddev

MD = (DATA / "llamabench-0c1e57098-cpu.md").read_text()


def _md(header: str | None = None, row: str | None = None) -> str:
    lines = MD.splitlines()
    if header is not None:
        lines[0] = header
    if row is not None:
        lines[2] = row
    return "\n".join(lines) + "\n"


HEAD = "| model | size | params | backend | {} | test | t/s |"


@pytest.mark.parametrize(
    ("title", "said"),
    [
        (
            "thr\u0435ads",
            "column 5 'thr\\u0435ads' is not a llama-bench column title: U+0435 CYRILLIC SMALL LETTER IE",
        ),
        ("thre\u03b1ds", "U+03B1 GREEK SMALL LETTER ALPHA"),
        ("", "column 5 has no title"),
        ("threads (n)", "column 5 'threads (n)' is not a llama-bench column title"),
    ],
)
def test_an_md_title_that_only_looks_like_llama_benchs_is_refused_naming_the_column(
    title: str, said: str
) -> None:
    rows = readers.read_md(_md(header=HEAD.format(title)))
    assert rows and all(r.problem and said in r.problem and "avg_ts" not in r.fields for r in rows), rows


def test_zero_width_characters_in_md_titles_are_read_away() -> None:
    for head in (
        HEAD.format("thr\u200beads"),
        "| mo\u200cdel | size | params | backend | threads | test | t\u2060/s\u200d |",
    ):
        rows = readers.read_md(_md(header=head))
        assert rows and all(r.problem is None for r in rows), [r.problem for r in rows]
        assert rows[0].fields["n_threads"] == 2 and rows[0].fields["avg_ts"] == 37535.89
        assert not any("\u200b" in k or "\u200c" in k for k in rows[0].fields)


def test_a_negative_stddev_is_refused_in_every_format() -> None:
    row = "| qwen3moe ?B F16 | 1.52 MiB | 0.79 M | CPU | 2 | pp64 | 37535.89 ± -5.00 |"
    (bad, good) = readers.read_md(_md(row=row))
    said = "stddev_ts -5 is negative: a stddev never is"
    assert said in (validity.check_row(bad.fields, bad.problem) or ""), validity.check_row(
        bad.fields, bad.problem
    )
    assert validity.check_row(good.fields, good.problem) is None
    (js,) = readers.read_jsonl((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
    assert said in (validity.check_row({**js.fields, "stddev_ts": -5}) or "")
    assert validity.check_row({**js.fields, "stddev_ts": "-nan"}) is None  # llama-bench's own: recomputed


def test_md_hostile_titles_exit_4_naming_file_and_column(tmp_path: Path) -> None:
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    src = tmp_path / "t.md"
    src.write_text(_md(header=HEAD.format("thr\u0435ads")))
    res = tk(tmp_path, "import", "--results", "r", "--label", "x", str(src))
    out = res.stdout + res.stderr
    assert res.returncode == 4 and f"{src}: no llama-bench result rows" in out and "U+0435" in out, out
    assert not (tmp_path / "r").exists() or not ResultStore(tmp_path / "r").results()


def test_real_md_tables_still_read() -> None:
    for f in [
        DATA / "llamabench-0c1e57098-cpu.md",
        *(DATA / "cases" / "turn3" / f"{n}.md" for n in ("bare", "fenced")),
    ]:
        rows = readers.read_md(f.read_text())
        assert rows and all(r.problem is None for r in rows), (f, [r.problem for r in rows])


def _failed_serve(with_failed_key: bool) -> dict[str, Any]:
    """SERVE_028 as vLLM's calculate_metrics writes it when a 5th request failed: num_prompts counts it,
    total_input_tokens and completed do not, output_lens holds its 0 (--save-detailed); releases
    before the `failed` key write the rest alike."""
    d = {**SERVE_028, "num_prompts": 5, "output_lens": [8, 8, 8, 8, 0], "input_lens": [32] * 5}
    if with_failed_key:
        d["failed"] = 1
    else:
        d.pop("failed", None)
    return d


@pytest.mark.parametrize("with_failed_key", [True, False])
def test_a_serve_run_with_a_failed_request_imports_as_failed_not_refused(
    tmp_path: Path, with_failed_key: bool
) -> None:
    """Breaker round 13: total_input_tokens sums the completed requests' prompts only, and was divided by
    num_prompts (128 over 5: "25.6 each", exit 4, whatever --input-len said); a release without the
    `failed` key was refused for output_lens holding the failed request's 0. Both are stored, as failed."""
    recs = _import(tmp_path, _put(tmp_path, _failed_serve(with_failed_key), "serve-32-8-c2.json")).results()
    assert [r.status for r in recs] == ["failed"], [(r.status, r.error) for r in recs]
