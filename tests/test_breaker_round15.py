"""Breaker round 15 (hostile tester of HEAD 1a4d8b5, 2026-12-04): what a report says the numbers are
of. Each test fails on the code before its fix (docs/reliability-log.md, round 15)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.records import make_record
from tests.support.runs import tk
from tests.support.telemetry_fakes import supporting_block
from toolkit.analysis.provenance import provenance

DATA = Path(__file__).parent / "data"
BUSY = supporting_block(["host-busy"])  # the block a stored host-busy is held to


def _imported(rec, **raw):
    """`rec` as an import stores it: model_extra `imported`, its raw row with `raw`'s fields."""
    data = json.loads(rec.model_dump_json())
    data["imported"] = {"file": "x.jsonl", "line": 1}
    data["raw"] = {**data["raw"], **raw}
    return type(rec).model_validate(data)


def test_a_test_time_with_an_offset_is_shown_in_utc() -> None:
    """`2026-11-29T23:54:22+09:00` was shown as 23:54:22 UTC (the text cut at 19 characters) and sorted
    after a 16:54 UTC time it precedes: it is 14:54:22 UTC."""
    a = _imported(make_record("cpu", "cpu", n=128, avg=90.0), test_time="2026-11-29T23:54:22+09:00")
    b = _imported(make_record("cpu", "cpu", p=512, avg=900.0), test_time="2026-11-29T16:54:23Z")
    assert provenance([a, b]).dates == ("2026-11-29 14:54:22", "2026-11-29 16:54:23")


def test_an_import_without_a_test_time_is_not_said_measured_at_its_import() -> None:
    """A markdown table carries no test_time: its `created` is when it was imported, and the report
    said `measured: <the import's time>` and put that day in the title."""
    rec = make_record("cpu", "cpu", n=128, avg=90.0).model_copy(
        update={"created": "2026-12-04T16:39:10+00:00"}
    )
    rec = _imported(rec)
    p = provenance([rec])
    assert p.dates is None and p.undated == (1, "2026-12-04 16:39:10", "2026-12-04 16:39:10")
    assert (
        "measured: not recorded for 1 imported record (no time of measurement in the file; imported 2026-12-04 16:39:10 UTC)"
        in p.lines()
    )
    assert p.heading().endswith("(imported 2026-12-04)")
    assert p.to_json()["measured_utc"] is None and p.to_json()["undated"]["records"] == 1


def test_a_bench_record_is_dated_by_its_test_time() -> None:
    """The toolkit's own records keep their date: llama-bench's test_time, else `created`."""
    rec = make_record("cpu", "cpu", n=128, avg=90.0, raw={"test_time": "2026-11-29T17:06:28Z"})
    assert provenance([rec]).dates == ("2026-11-29 17:06:28",) * 2
    rec = make_record("cpu", "cpu", n=128, avg=90.0)
    assert provenance([rec]).dates == ("2026-07-01 00:00:00",) * 2 and provenance([rec]).undated is None


def test_two_model_files_of_one_name_are_both_named() -> None:
    """Two files named alike (other sha256) were one model line: the first record's sha256 won."""
    a = make_record("cpu", "cpu", n=128, avg=90.0)
    b = make_record("vulkan", "vulkan", n=128, avg=95.0)
    b = b.model_copy(update={"model": b.model.model_copy(update={"sha256": "cd" * 32})})
    models = provenance([a, b]).models
    assert len(models) == 2 and any("sha256 abababababab" in m for m in models)
    assert any("sha256 cdcdcdcdcdcd" in m for m in models)
    assert provenance([a, b]).heading().startswith("Benchmark report: qwen3-30b-a3b-q4kxl (")


def test_a_missing_model_sha256_is_said() -> None:
    rec = make_record("cpu", "cpu", n=128, avg=90.0)
    rec = rec.model_copy(update={"model": rec.model.model_copy(update={"sha256": ""})})
    assert "sha256 not recorded" in provenance([rec]).models[0]


def test_a_markdown_import_reports_no_measured_date(tmp_path: Path) -> None:
    """The whole path: `toolkit import` of an md table, then `report`."""
    md = DATA / "cases" / "turn3" / "bare.md"
    res = tk(tmp_path, "import", "--results", str(tmp_path / "r"), "--label", "md", str(md))
    assert res.returncode == 0, res.stderr[-800:]
    res = tk(tmp_path, "report", "--results", str(tmp_path / "r"), "--format", "github")
    assert res.returncode == 0, res.stderr[-800:]
    assert "measured: not recorded for" in res.stdout and "(imported " in res.stdout.splitlines()[0]


def test_missing_build_identity_is_said_not_recorded() -> None:
    """A record without digest, runtime commit or labels showed `cpu@: digest , backend cpu`: an empty
    digest printed as nothing, the runtime commit simply left out."""
    rec = make_record("cpu", "cpu", n=128, avg=90.0, build_commit=None)
    rec = rec.model_copy(update={"image": rec.image.model_copy(update={"digest": ""})})
    line = provenance([rec]).images[0]
    assert "digest not recorded" in line and "runtime commit not recorded" in line, line


def test_an_imported_rows_cpu_is_named_and_its_unknown_host_said() -> None:
    """An import carries llama-bench's cpu_info and no host facts: the host line said `not recorded`
    for a CPU row, and `GPU ...` alone (no word that OS and kernel are unknown) for a GPU row."""
    cpu = make_record(
        "cpu", "cpu", n=128, avg=90.0, gpu_info="", host={}, raw={"cpu_info": "AMD Ryzen 9 7950X"}
    )
    assert provenance([cpu]).hosts == ["AMD Ryzen 9 7950X; OS and kernel not recorded"]
    gpu = make_record("vulkan", "vulkan", n=128, avg=90.0, host={})
    assert provenance([gpu]).hosts == ["GPU AMD Radeon AI PRO R9700; OS, kernel and GPU driver not recorded"]


def _older_import_beside_a_bench_run(tmp_path: Path) -> Path:
    """A results folder holding the toolkit's own records of tests/data/results-cpu-a.jsonl (pp128 ub64:
    858.50 tok/s, measured 2026-11-29) and, imported after them, that record's own llama-bench row
    measured nine days earlier and 3x slower (test_time 2026-11-20): the folder's root."""
    lines = (DATA / "results-cpu-a.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    root = tmp_path / "results"
    (root / "a504e0178239").mkdir(parents=True)
    (root / "a504e0178239" / "bench.jsonl").write_text("\n".join(lines) + "\n")
    row = dict(first["raw"], test_time="2026-11-20T10:00:00Z")
    row["samples_ns"] = [x * 3 for x in row["samples_ns"]]
    row["avg_ns"], row["stddev_ns"] = row["avg_ns"] * 3, row["stddev_ns"] * 3
    row["samples_ts"] = [x / 3 for x in row["samples_ts"]]
    row["avg_ts"], row["stddev_ts"] = row["avg_ts"] / 3, row["stddev_ts"] / 3
    (tmp_path / "older.jsonl").write_text(json.dumps(row) + "\n")
    res = tk(
        tmp_path, "import", "--results", str(root), "--label", "cpu", "--digest", first["image"]["digest"],
        "--model-sha256", first["model"]["sha256"], str(tmp_path / "older.jsonl"),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-800:]
    return root


def test_an_older_measurement_imported_later_does_not_supersede_a_newer_bench_run(tmp_path: Path) -> None:
    """The import was written last, so it 'superseded' the bench run measured nine days after it: the
    report showed 286.17 tok/s and called the 858.50 one superseded by a newer run. Both say when they
    were measured: the later measurement is the newer (the index's choice and newest_per_test's)."""
    root = _older_import_beside_a_bench_run(tmp_path)
    res = tk(tmp_path, "report", "--results", str(root), "--format", "json")
    assert res.returncode == 0, res.stderr[-800:]
    doc = json.loads(res.stdout)
    cells = [
        c["avg_ts"]
        for t in doc["tables"]
        for row in t["rows"]
        if row["test"] == "pp128 ub64"
        for c in row.values()
        if isinstance(c, dict)
    ]
    assert cells and round(cells[0], 2) == 858.5, cells
    from toolkit.results.identity import newest_per_test
    from toolkit.results.records import ResultStore

    used = newest_per_test(ResultStore(root).results()).used
    assert any(r.test == "pp128" and round(r.avg_ts or 0, 2) == 858.5 for r in used)


def test_an_export_of_a_run_without_digest_or_sha256_says_what_reproduce_cannot_check(tmp_path: Path) -> None:
    """export-run wrote "image ID ``", "sha256 ``" and "an unrecorded CPU (, kernel ?)" into the
    README it publishes, with exit 0 and no note, while that README says reproduce checks both."""
    recs = [json.loads(x) for x in (DATA / "results-cpu-a.jsonl").read_text().splitlines()]
    for r in recs:
        r["image"]["digest"], r["model"]["sha256"], r["host"] = "", "", {}
    folder = tmp_path / "results" / "a504e0178239"
    folder.mkdir(parents=True)
    (folder / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "exp"
    project = Path(__file__).resolve().parents[1]  # its matrix.yaml: export-run copies the project's files
    res = tk(project, "export-run", recs[0]["run_id"], "--results", str(tmp_path / "results"), "-o", str(out))
    assert res.returncode == 0, res.stderr[-800:]
    assert "no image digest recorded" in res.stderr and "no sha256 recorded" in res.stderr, res.stderr
    readme = (out / "README.md").read_text()
    assert "image ID not recorded" in readme and "sha256 not recorded" in readme
    # the report's host line since round 33 (the rows' CPU, then what the records do not say)
    assert "OS and kernel not recorded" in readme and " ``" not in readme


def test_lengths_given_for_llama_bench_output_are_refused(tmp_path: Path) -> None:
    """`--input-len` on a llama-bench import was ignored without a word."""
    src = DATA / "llamabench-0c1e57098-cpu.jsonl"
    res = tk(
        tmp_path, "import", "--results", str(tmp_path / "r"), "--label", "x", "--input-len", "999", str(src)
    )
    assert (
        res.returncode == 4
        and "--input-len / --output-len are the lengths of a `vllm bench` result" in res.stderr
    )
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").glob("*/bench.jsonl"))


def test_a_verdict_across_two_files_of_one_model_says_so() -> None:
    """Two images that ran other files of one model (other sha256) were ranked without a word: the
    margin is then the files' as much as the images'."""
    from toolkit.analysis.facts import ReportOptions
    from toolkit.analysis.verdict import verdict

    a = make_record("cpu", "cpu", p=512, avg=900.0, sd=9.0)
    b = make_record("vulkan", "vulkan", p=512, avg=1800.0, sd=18.0)
    b = b.model_copy(update={"model": b.model.model_copy(update={"sha256": "cd" * 32})})
    av = verdict([a, b], ReportOptions()).axes["prefill"]
    assert sorted(f for fs in av.files.values() for f in fs) == [
        "qwen3-30b-a3b-q4kxl sha256 abababababab",
        "qwen3-30b-a3b-q4kxl sha256 cdcdcdcdcdcd",
    ]
    same = verdict([a, make_record("vulkan", "vulkan", p=512, avg=1800.0, sd=18.0)]).axes["prefill"]
    assert same.files == {}


def test_a_report_whose_every_number_is_held_says_so_once() -> None:
    """A newcomer's first table on a busy host: every row flagged host-busy, a ub2048 twin 7x its ub512
    row, and nothing above the tables said that none of it is a measurement of the images."""
    from toolkit.analysis import report

    recs = [
        make_record("cpu", "cpu", p=512, avg=900.0, sd=9.0, flags=["host-busy"], telemetry=BUSY),
        make_record("cpu", "cpu", n=128, avg=90.0, sd=0.9, flags=["host-busy"], telemetry=BUSY),
    ]
    text = report.render(recs, "github")
    assert "every number shown is flagged (host-busy" in text, text[:1500]
    calm = [make_record("cpu", "cpu", p=512, avg=900.0, sd=9.0), *recs[1:]]
    assert "every number shown is flagged" not in report.render(calm, "github")


def test_a_made_up_between_runs_block_does_not_lift_the_raw_row_check(tmp_path: Path) -> None:
    """Round 16: the 3 fastest of a record's 10 samples kept, avg recomputed and `between_runs` with
    counts [1, 1, 1] added: the raw-row check skipped any record with that block, and the report showed
    1095.90 [3 runs] for a measured 786. A combined record's raw row is its newest process's: its
    samples are the block's last count."""
    from toolkit.results.records import ResultStore

    rec = json.loads((DATA / "results-cpu-a.jsonl").read_text().splitlines()[1])
    assert len(rec["raw"]["samples_ts"]) == 10
    fast = sorted(rec["samples_ts"])[-3:]
    rec["samples_ts"], rec["avg_ts"] = fast, sum(fast) / 3
    rec["stddev_ts"] = (sum((x - rec["avg_ts"]) ** 2 for x in fast) / 2) ** 0.5
    spread = round(100 * (max(fast) - min(fast)) / rec["avg_ts"], 2)
    rec["between_runs"] = {"runs": 3, "means": fast, "spread_pct": spread, "counts": [1, 1, 1]}
    folder = tmp_path / "results" / "a504e0178239"
    folder.mkdir(parents=True)
    (folder / "bench.jsonl").write_text(json.dumps(rec) + "\n")
    store = ResultStore(tmp_path / "results")
    assert store.results() == []
    assert any("its raw row's samples_ts 10" in w for w in store.warnings), store.warnings


def test_a_row_stamped_ahead_of_its_import_does_not_beat_later_bench_runs() -> None:
    """Round 16: a test_time up to a day ahead passes as clock skew; ordered by it, an import stamped
    18 h ahead 'superseded' every bench run of its test for those 18 hours. It counts as measured at
    the latest when it was imported."""
    from toolkit.results.identity import measured_at, newest_per_test

    imp = make_record("cpu", "cpu", p=512, avg=100.0).model_copy(
        update={"created": "2026-12-04T17:00:00+00:00"}
    )
    imp = _imported(imp, test_time="2026-12-05T11:00:00Z")
    assert measured_at(imp) == "2026-12-04T17:00:00+00:00"
    own = make_record("cpu", "cpu", p=512, avg=900.0).model_copy(
        update={"created": "2026-12-04T17:50:00+00:00", "run_id": "run-2"}
    )
    (used,) = newest_per_test([imp, own]).used
    assert used.avg_ts == 900.0


def test_a_moe_the_marker_list_lacks_is_not_flagged_above_peak() -> None:
    """Round 16: Llama 4 Scout (`llama4 17Bx16E (Scout)`) was taken as dense: 90 tok/s read as every
    weight per token, 132 % of an H200's bandwidth, flagged bw-above-peak and held out of the verdict.
    Its type names its experts; and a model taken as dense only for want of a marker is called above
    the peak only where no known MoE share could explain it."""
    from toolkit.analysis.facts import Facts
    from toolkit.analysis.roofline import active_share

    scout = {"model_type": "llama4 17Bx16E (Scout) Q4_K - Medium", "model_size": 60_000_000_000}
    rec = make_record("vulkan", "vulkan", n=128, avg=90.0, raw=scout)
    assert active_share(rec) is None or active_share(rec).source != "dense"
    assert "bw-above-peak" not in Facts.of(rec).flags
    unknown = {"model_type": "newarch 60B Q4_K - Medium", "model_size": 60_000_000_000}
    assert active_share(make_record("vulkan", "vulkan", n=128, avg=90.0, raw=unknown)).source == "dense"
    assert (
        "bw-above-peak" not in Facts.of(make_record("vulkan", "vulkan", n=128, avg=90.0, raw=unknown)).flags
    )
    # 640 GB/s / 60 GB = 10.7 tok/s dense: 33x that is beyond even a 3 % share
    assert "bw-above-peak" in Facts.of(make_record("vulkan", "vulkan", n=128, avg=400.0, raw=unknown)).flags


def test_an_md_table_without_a_build_line_that_shows_a_modern_build_keeps_its_batch_sizes(
    tmp_path: Path,
) -> None:
    """Round 16: an `fa` column and a depth test (`pp512 @ d4096`) only exist in builds long after
    n_ubatch appeared, yet a table without a build line lost n_batch/n_ubatch (flag no-batch-sizes)
    and its note said the build might predate 2413. The whole table is one build: any row's evidence."""
    src = DATA / "md-nobuild-fa-depth.md"
    res = tk(tmp_path, "import", "--results", str(tmp_path / "r"), "--label", "x", str(src))
    assert res.returncode == 0 and "no batch sizes" not in res.stderr, res.stderr
    res = tk(tmp_path, "report", "--results", str(tmp_path / "r"), "--format", "csv")
    rows = [ln for ln in res.stdout.splitlines()[1:] if ln]
    assert len(rows) == 3 and all(",2048,512," in ln and "no-batch-sizes" not in ln for ln in rows), rows
