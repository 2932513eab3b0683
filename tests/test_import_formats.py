"""`toolkit import` of what people publish, round 3: one reader per llama-bench format (jsonl, json,
csv, md, sql) and ONE validity pass; repetitions instead of silent supersession; one identity
normalisation; columns that say what they ran on; one CPU-fallback rule; single samples; compare
naming what it could not compare.

Inputs in tests/data/cases/turn3/ are copies of shared/cases/turn3/ (README there): minimal
synthetic stand-ins for faults real published inputs triggered. tests/data/llamabench-0c1e57098-cpu.md
and .sql were captured from this project's CPU image (`llama-bench -m tiny-qwen3moe.gguf -p 64 -n 16
-r 3 -o md|sql`, see tests/data/README.md). Each test goes through the same code path as the command.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.project import DATA
from tests.support.records import make_record
from toolkit.analysis import compare, facts, report, table_text, tables, verdict
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput
from toolkit.results import identity, importer
from toolkit.results.records import ResultStore
from toolkit.runtimes.llama_bench import check, validity

T3 = DATA / "cases" / "turn3"
CASES = DATA / "cases"


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def exit_code(res) -> int:
    """The exit code main() gives (CliRunner leaves a toolkit error as the exception)."""
    return getattr(res.exception, "exit_code", res.exit_code) if res.exception else res.exit_code


def imported(
    tmp_path: Path, *files: Path, label: str = "x", **kw
) -> tuple[ResultStore, importer.ImportResult]:
    store = ResultStore(tmp_path / "results")
    return store, importer.import_files(store, list(files), label=label, **kw)


def only_table(store: ResultStore, axis: str = "prefill") -> tables.Table:
    return next(t for t in tables.tables(store.results()) if t.axis == axis)


# ------------------------------------------------------------------ 1. one validity pass, per row


@pytest.mark.parametrize(
    ("name", "fields", "header"),
    [
        pytest.param("a.csv", 4, 3, id="a-extra-value"),
        pytest.param("b.csv", 4, 5, id="b-missing-value"),
        pytest.param("csv-extra-field.csv", 9, 8, id="readme-extra-field"),
        pytest.param("csv-missing-field.csv", 10, 11, id="readme-missing-field"),
    ],
)
def test_csv_row_of_another_field_count_is_refused_never_shifted(tmp_path, name, fields, header):
    with pytest.raises(BadInput) as err:
        imported(tmp_path, T3 / name)
    assert f"{T3 / name}: no llama-bench result rows found that are measurements" in str(err.value)
    assert f"line 2: {fields} fields, the header has {header}" in str(err.value)
    res = run("import", "--results", str(tmp_path / "r"), "--label", "x", str(T3 / name))
    assert exit_code(res) == 4 and not (tmp_path / "r").exists()


def test_a_bad_csv_row_is_refused_by_itself_and_the_good_rows_stay(tmp_path):
    src = (DATA / "llamabench-import-0c1e57098-cpu.csv").read_text().splitlines()
    bad = src[1].replace('"0x0",', "", 1)  # one value dropped: every later column would shift left
    f = tmp_path / "mixed.csv"
    f.write_text("\n".join([src[0], src[1], bad, src[2]]) + "\n")
    store, res = imported(tmp_path, f)
    assert res.records == 2 and list(res.refused) == [
        f"{f}:3: 41 fields, the header has 42: the row does not say which value belongs to which column; "
        "row left out"
    ]
    assert {r.raw["cpu_mask"] for r in store.results()} == {"0x0"}  # nothing read from a shifted column
    out = run("import", "--results", str(tmp_path / "r2"), "--label", "x", str(f))
    assert out.exit_code == 0 and f"{f}:3: 41 fields" in out.output and "1 row(s) refused" in out.output


BASE_ROW = {
    "build_commit": "0c1e57098",
    "build_number": 1,
    "backends": "CPU",
    "gpu_info": "",
    "model_type": "qwen3moe ?B F16",
    "model_size": 1595904,
    "model_n_params": 792192,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 8,
    "tensor_split": "0.00",
    "n_prompt": 512,
    "n_gen": 0,
    "n_depth": 0,
    "test_time": "2026-11-29T17:00:12Z",
    "avg_ns": 256000000,
    "stddev_ns": 1000000,
    "avg_ts": 2000.0,
    "stddev_ts": 8.0,
}


def as_format(fmt: str, rows: list[dict]) -> str:
    """The rows as llama-bench writes them in `fmt` (csv and sql: every value as text, as it does)."""
    keys = list(rows[0])
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in rows)
    if fmt == "json":
        return "[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n"
    if fmt == "csv":
        return ",".join(keys) + "\n" + "".join(",".join(f'"{r[k]}"' for k in keys) + "\n" for r in rows)
    assert fmt == "sql"
    return "".join(
        f"INSERT INTO llama_bench ({', '.join(keys)}) VALUES ({', '.join(repr(str(r[k])) for k in keys)});\n"
        for r in rows
    )


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param({"n_prompt": 0}, "n_prompt and n_gen are both 0: no test was run", id="no-test"),
        pytest.param({"n_prompt": "abc"}, "n_prompt is 'abc': not a token count", id="count-not-a-number"),
        pytest.param({"n_gen": -1}, "n_gen is -1: expected >= 0", id="negative-count"),
        pytest.param({"avg_ts": 0.0}, "avg_ts is 0", id="avg_ts-zero"),
        pytest.param(
            {"avg_ts": 20000.0},
            "avg_ts 20000 contradicts avg_ns 2.56e+08: 512 tokens in 0.256 s",
            id="contradiction",
        ),
        pytest.param({"n_ubatch": 0}, "n_ubatch is 0: llama.cpp takes at least 1 token", id="ubatch-zero"),
        pytest.param({"n_threads": 2.5}, "n_threads is ", id="threads-fraction"),
        pytest.param(
            {"test_time": "2999-01-01T00:00:00Z"},
            "test_time is '2999-01-01T00:00:00Z': in the future",
            id="future",
        ),
        pytest.param(
            {"test_time": "last tuesday"}, "test_time is 'last tuesday': not a time", id="not-a-time"
        ),
        pytest.param(
            {"test_time": "1970-01-01T00:00:00Z"}, "test_time is '1970-01-01T00:00:00Z': before", id="epoch"
        ),
        pytest.param({"n_threads": "2,5"}, "n_threads is '2,5': expected a whole number", id="threads-text"),
        pytest.param({"n_threads": 0}, "n_threads is ", id="threads-zero"),
        pytest.param(
            {"n_threads": 5_000_000}, "n_threads is 5000000: more threads than any host", id="threads-beyond"
        ),
    ],
)
@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "sql"])
def test_one_validity_pass_refuses_the_same_row_alike_in_every_format(tmp_path, fmt, change, why):
    good = dict(BASE_ROW)
    bad = {**BASE_ROW, "test_time": "2026-11-29T17:00:13Z", **change}
    f = tmp_path / f"run.{fmt}"
    f.write_text(as_format(fmt, [good, bad]))
    store, res = imported(tmp_path, f)
    assert res.records == 1 and len(res.refused) == 1, res
    line = {"jsonl": 2, "json": 3, "csv": 3, "sql": 2}[fmt]
    assert list(res.refused)[0].startswith(f"{f}:{line}: {why}"), res.refused
    assert validity.check_row(bad) is not None and validity.check_row(good) is None


@pytest.mark.parametrize(
    ("change", "size"),
    [
        pytest.param({"model_size": "1.595904e6"}, 1595904, id="size-exponent"),
        pytest.param({"model_size": " +1595904 "}, 1595904, id="size-signed-spaced"),
        pytest.param({"model_size": "1595904.0"}, 1595904, id="size-whole-fraction"),
        pytest.param({"model_size": "1.5959045e6"}, None, id="size-fraction-exponent"),  # hunt41: was rounded
        pytest.param({"model_n_params": "7921925e-1"}, None, id="params-fraction-exponent"),
        pytest.param({"model_size": "\uff11\uff15\uff19\uff15\uff19\uff10\uff14"}, None, id="size-fullwidth"),
        pytest.param({"model_size": "\u0661\u0665\u0669\u0665\u0669\u0660\u0664"}, None, id="size-arabic"),
        pytest.param({"n_threads": "\uff18"}, None, id="threads-fullwidth"),
        pytest.param({"n_prompt": "\u0665\u0661\u0662"}, None, id="prompt-arabic"),
    ],
)
def test_a_count_as_text_is_read_alike_in_every_format(tmp_path, change, size):
    """The same text in an integer field, in jsonl, json, csv and sql (brk41): csv's and sql's reader
    took `５１２` and `١٥٩٥٩٠٤` (int() reads any Unicode digits) where jsonl refused them as no number,
    and jsonl refused a model_size `1.595904e6` or `+1595904` that csv and sql took. Now each is
    accepted everywhere (the record's model size the same bytes) or refused everywhere."""
    got = []
    for fmt in ("jsonl", "json", "csv", "sql"):
        rows = [BASE_ROW, {**BASE_ROW, "test_time": "2026-11-29T17:00:13Z", **change}]
        f = tmp_path / fmt / f"run.{fmt}"
        f.parent.mkdir()
        f.write_text(as_format(fmt, rows))
        store, res = imported(f.parent, f)
        if res.refused:
            got.append(None)
            assert list(res.refused)[0].startswith(f"{f}:"), res.refused
        else:
            got.append(store.results()[-1].model.size_bytes)
    assert got == [size] * 4


def test_z_csv_no_test_at_all_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match=r"line 2: n_prompt and n_gen are both 0: no test was run"):
        imported(tmp_path, T3 / "z.csv")


def test_real_outputs_pass_the_validity_pass_whatever_their_noise():
    """avg_ts vs avg_ns on real rows: a 2-core shared machine spreads the times so widely (stddev of the
    times up to 1.6 x their mean) that the mean of tokens/t is far above tokens/mean(t): never refused."""
    from toolkit.runtimes.llama_bench import readers as readers
    from toolkit.runtimes.llama_bench.validity import check_row

    for path in [*DATA.glob("llamabench-*"), *CASES.glob("*.json*")]:
        if path.suffix == ".txt":
            continue
        _, rows = readers.read_source(path.read_text())
        for r in rows:
            assert check_row(r.fields, r.problem) is None, (path, r.line)


# ------------------------------------------------------------------ 2. repetitions, never superseded


def test_two_rows_of_one_test_are_repetitions_of_one_cell_flagged_when_they_disagree(tmp_path):
    store, res = imported(tmp_path, T3 / "d.jsonl")
    assert res.records == 2 and len(res.repeated) == 1
    assert "rows d.jsonl:2, d.jsonl:1 measure the same test" in res.repeated[0]  # in test_time order
    assert "kept as 2 repetitions of one cell" in res.repeated[0] and "runs-disagree" in res.repeated[0]
    (row,) = only_table(store).rows
    (cell,) = row.cells.values()
    assert identity.value(cell) == 250.0 and "[2 runs, spread 120.0%]" in table_text.fmt_cell(cell)
    assert "runs-disagree" in row.row_flags()
    text = report.render(store.results())
    assert "2 records read, 1 used (1 more as repetitions combined into their cells), 0 superseded" in text
    out = run("import", "--results", str(tmp_path / "r2"), "--label", "x", str(T3 / "d.jsonl"))
    assert out.exit_code == 0 and "1 test(s) measured by several rows" in out.output


def test_line_order_does_not_decide_which_row_is_newest(tmp_path):
    cells = []
    # one import clock: `created` of the two imports 1 s apart failed it (fix48c)
    now = datetime(2030, 1, 1, tzinfo=timezone.utc)
    for name in ("dup.jsonl", "dup-rev.jsonl"):
        store, _ = imported(tmp_path / name, T3 / name, now=now)
        (row,) = only_table(store).rows
        (cell,) = row.cells.values()
        cells.append(cell)
    a, b = cells
    assert a.model_extra["between_runs"] == b.model_extra["between_runs"]
    assert a.model_extra["between_runs"]["means"] == [155.36, 615.83]  # oldest test_time first
    assert a.raw["test_time"] == b.raw["test_time"] == "2025-08-05T01:30:36Z"  # the newest gives the rest
    assert identity.value(a) == identity.value(b) == pytest.approx((155.36 + 615.83) / 2)


def test_the_newest_run_of_a_test_is_the_one_measured_last_not_imported_last(tmp_path):
    rows = [json.loads(x) for x in (T3 / "d.jsonl").read_text().splitlines()]  # 400 @ Jan 2, 100 @ Jan 1
    newer, older = tmp_path / "newer.jsonl", tmp_path / "older.jsonl"
    newer.write_text(json.dumps(rows[0]) + "\n")
    older.write_text(json.dumps(rows[1]) + "\n")
    store = ResultStore(tmp_path / "results")
    for i, f in enumerate((newer, older)):  # the older measurement is imported last
        importer.import_files(
            store, [f], label="x", digest="import:one", now=datetime(2030, 1, 1 + i, tzinfo=timezone.utc)
        )
    (row,) = only_table(store).rows
    assert [identity.value(c) for c in row.cells.values()] == [400.0]
    assert "2 records read, 1 used, 1 superseded" in report.render(store.results())


def test_rows_that_agree_are_repetitions_without_a_flag(tmp_path):
    f = tmp_path / "twice.jsonl"
    line = json.loads((CASES / "n-cpu-moe-sweep.jsonl").read_text().splitlines()[0])
    again = {**line, "avg_ts": line["avg_ts"] * 1.001, "test_time": "2026-01-01T00:00:00Z"}
    again["samples_ts"] = [x * 1.001 for x in line["samples_ts"]]
    again["samples_ns"] = [x / 1.001 for x in line["samples_ns"]]
    again["avg_ns"] = line["avg_ns"] / 1.001
    f.write_text(json.dumps(line) + "\n" + json.dumps(again) + "\n")
    store, res = imported(tmp_path, f)
    assert len(res.repeated) == 1 and "they agree within noise" in res.repeated[0]
    (row,) = only_table(store).rows
    assert "runs-disagree" not in row.row_flags()


# ------------------------------------------------------------------ 3. one identity normalisation


@pytest.mark.parametrize("pair", [("t.jsonl", "t.csv"), ("ts.jsonl", "ts.csv")])
def test_the_same_test_written_as_jsonl_and_csv_is_one_test(tmp_path, pair):
    """t.*: one measurement written twice (the same tok/s): imported once (tests/test_import_hostile.py);
    ts.*: two measurements of one test: two repetitions of one cell."""
    store, res = imported(tmp_path / "one", *(T3 / n for n in pair))
    recs = store.results()
    once = pair[0] == "t.jsonl"
    assert len({identity.test_key(r) for r in recs}) == 1 and len(res.repeated) == (0 if once else 1)
    assert len(recs) == (1 if once else 2) and len(res.duplicates) == (1 if once else 0)
    (row,) = only_table(store).rows
    assert len(row.cells) == 1
    if once:
        return
    store = ResultStore(tmp_path / "two" / "results")
    sides = [importer.import_files(store, [T3 / n], label=n.replace(".", "-")) for n in pair]
    t = only_table(store)
    assert len(t.rows) == 1 and len(t.rows[0].cells) == 2 and not t.id_columns
    c = compare.compare(store, sides[0].digest, sides[1].digest)
    assert len(c.rows) == 1 and not c.missing


@pytest.mark.parametrize(
    ("name", "a", "b"),
    [
        ("tensor_split", "0.00", 0),
        ("tensor_split", "0.00", 0.0),
        ("tensor_split", "0.50/0.50", "0.5/0.5"),
        ("no_host", True, "1"),
        ("n_batch", "2048", 2048),
        ("flash_attn", "1", True),
        ("flash_attn", "on", 1),
        ("n_gpu_layers", "99", -1),
        ("fit_target", "1024", 1024.0),
    ],
)
def test_one_normalisation_of_a_field_whatever_format_wrote_it(name, a, b):
    assert identity.norm_field(name, a) == identity.norm_field(name, b)


# ------------------------------------------------------------------ 5. columns say what they ran on


def test_sets_and_columns_are_named_by_every_system_field_that_differs_whole(tmp_path):
    rows = [json.loads(x) for x in (CASES / "two-builds-one-file.jsonl").read_text().splitlines()]
    for r in rows:  # one build; two GPUs whose names agree in their first 30 characters
        r["build_commit"], r["build_number"] = "aaaa1111", 7001
    rows[2]["gpu_info"] = rows[0]["gpu_info"] + " #1"
    f = tmp_path / "two-gpus.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store, res = imported(tmp_path, f, label="r9700")
    names = [s.name for s in res.sets]
    assert names == [
        "r9700.AMD-Radeon-AI-PRO-R9700-RADV-GFX1201",
        "r9700.AMD-Radeon-AI-PRO-R9700-RADV-GFX1201-1",
    ]
    t = only_table(store)
    headers = [t.header(c) for c in t.columns]
    assert any("GPU AMD Radeon AI PRO R9700 (RADV GFX1201) #1" in h for h in headers)
    assert any(h.endswith("(GPU AMD Radeon AI PRO R9700 (RADV GFX1201))") for h in headers)


def test_columns_of_two_backends_on_one_gpu_say_the_backend(tmp_path):
    store = ResultStore(tmp_path / "results")
    importer.import_files(store, [CASES / "cuda-h200-qwen3moe-30b-synthetic.jsonl"], label="h200")
    importer.import_files(store, [CASES / "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl"], label="h200")
    t = only_table(store, "decode")
    assert sorted(t.image_sys.values()) == ["CUDA", "Vulkan"]  # GPU and build are the same: not repeated
    assert all(t.header(c).startswith(f"{c} ({t.image_sys[c]}; ") for c in t.columns)


# ------------------------------------------------------------------ 6. one CPU-fallback rule


def test_import_backend_that_contradicts_the_rows_is_bad_input_naming_them(tmp_path):
    f = CASES / "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl"
    with pytest.raises(
        BadInput, match=rf"--backend rocm: 8 row\(s\) say they ran on another backend: {f}:1 "
    ):
        imported(tmp_path, f, backend="rocm")
    out = run("import", "--results", str(tmp_path / "r"), "--label", "x", "--backend", "rocm", str(f))
    assert exit_code(out) == 4 and not (tmp_path / "r").exists()
    store, res = imported(tmp_path / "ok", f, backend="vulkan")  # agreeing: fine, never cpu-fallback
    assert res.records == 8 and not any("cpu-fallback" in r.row_flags() for r in only_table(store).rows)


@pytest.mark.parametrize(
    ("image", "row", "fallback"),
    [
        pytest.param("vulkan", {"backends": "Vulkan", "gpu_info": ""}, True, id="vulkan-empty-gpu-info"),
        pytest.param("vulkan", {"backends": "Vulkan", "gpu_info": "NVIDIA H200"}, False, id="vulkan-ok"),
        pytest.param("rocm", {"backends": "CPU", "gpu_info": "x"}, True, id="rocm-ran-cpu"),
        pytest.param("rocm", {"backends": "ROCm"}, False, id="no-gpu-info-recorded"),
        pytest.param("cpu", {"backends": "CPU", "gpu_info": ""}, False, id="cpu-image"),
    ],
)
def test_bench_and_report_share_one_cpu_fallback_rule(image, row, fallback):
    rec = make_record("img", image, p=512, avg=100.0, backends=row["backends"], raw=row)
    if "gpu_info" not in row:
        del rec.raw["gpu_info"]
    said_by_bench = check.cpu_fallback_of(image, rec.raw, check.backends_of(rec.raw)) is not None
    said_by_report = facts.is_cpu_fallback(rec)
    assert said_by_bench is said_by_report is fallback


# ------------------------------------------------------------------ 7. one sample, no micro-batch on tg


def test_a_single_sample_has_an_unknown_stddev_and_the_verdict_says_so(tmp_path):
    store = ResultStore(tmp_path / "results")
    for name in ("r1a", "r1b"):
        importer.import_files(store, [T3 / f"{name}.jsonl"], label=name)
    recs = store.results()
    assert all(r.stddev_ts is None and len(r.samples_ts) == 1 for r in recs)
    t = only_table(store)
    assert all(
        "(1 sample: stddev unknown)" in table_text.fmt_cell(c) for row in t.rows for c in row.cells.values()
    )
    assert "± 0.00" not in report.render(recs)
    v = verdict.verdict(recs)
    assert v.axes["prefill"].noise_unknown == sorted(t.columns)
    assert "noise unknown for" in verdict.format_verdict(v)


def test_decode_rows_never_carry_micro_batch_flags():
    rs = [
        make_record("hip", "rocm", n=128, ub=ub, avg=100.0, sd=0.5, raw={"samples_ts": [99.5, 100.0, 100.5]})
        for ub in (512, 2048)
    ]
    t = tables.axis_table(tables.select_for_report(rs), "decode")
    assert len(t.rows) == 2
    assert not [f for row in t.rows for f in row.row_flags() if f.startswith(("ub-clamped", "ub-no-effect"))]


# ------------------------------------------------------------------ 8. compare names what is missing


def test_compare_with_tests_on_one_side_only_exits_non_zero_naming_them(tmp_path):
    store = ResultStore(tmp_path / "results")
    rows = [json.loads(x) for x in (CASES / "n-cpu-moe-sweep.jsonl").read_text().splitlines()]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = [{**r, "test_time": f"2026-{r['test_time'][5:]}"} for r in rows if r["n_cpu_moe"] != 24]
    b.write_text("".join(json.dumps(r) + "\n" for r in again))  # measured again (else: imported once)
    da = importer.import_files(store, [a], label="a").digest
    db = importer.import_files(store, [b], label="b").digest
    out = run("compare", "--results", str(store.root), da, db)
    assert exit_code(out) == 4 and "--allow-missing" in str(out.exception)
    said = out.output + str(out.exception)
    assert "2 test(s) only in A (a@" in out.output  # the text output names them
    assert "pp512 ub512 (n_cpu_moe=24)" in out.output and "tg128 ub512 (n_cpu_moe=24)" in said
    ok = run("compare", "--results", str(store.root), da, db, "--allow-missing")
    assert ok.exit_code == 0 and "n_cpu_moe=24" in ok.output


# ------------------------------------------------------------------ 9. markdown and sql


@pytest.mark.parametrize(("name", "build"), [("bare.md", None), ("fenced.md", ("2aa45ef9e", 7423))])
def test_markdown_tables_bare_or_fenced_after_log_lines_are_imported(tmp_path, name, build):
    store, res = imported(tmp_path, T3 / name)
    assert res.records == 2 and res.formats == {str(T3 / name): "md"} and not res.refused
    recs = {r.test: r for r in store.results()}
    assert (recs["pp512"].avg_ts, recs["pp512"].stddev_ts) == (1773.94, 34.01)
    assert (recs["tg128"].avg_ts, recs["tg128"].stddev_ts) == (59.46, 0.23)
    r = recs["pp512"]
    assert r.image.backend == "rocm" and r.n_gpu_layers == 99 and r.flash_attn == 1
    assert r.model.size_bytes == round(56.89 * 2**30)
    flags = facts.record_flags(r, facts.ReportOptions())
    assert "no-samples" in flags
    assert ("no-build-commit" in flags) is (build is None)
    if build:
        assert (r.raw["build_commit"], r.raw["build_number"]) == build
    assert any("no samples" in n for n in res.notes)


@pytest.mark.parametrize("fmt", ["md", "sql"])
def test_captured_md_and_sql_outputs_import(tmp_path, fmt):
    src = DATA / f"llamabench-0c1e57098-cpu.{fmt}"
    store, res = imported(tmp_path, src)
    recs = sorted(store.results(), key=lambda r: r.n_gen)
    assert res.records == 2 and [r.test for r in recs] == ["pp64", "tg16"] and res.formats[str(src)] == fmt
    assert all(r.raw["build_commit"] == "0c1e57098" and r.image.backend == "cpu" for r in recs)
    if fmt == "sql":  # every field, typed as llama-bench types it
        raw = recs[0].raw
        assert raw["n_threads"] == 2 and raw["tensor_split"] == "0.00" and raw["no_host"] is False
        assert raw["flash_attn"] == -1 and raw["n_cpu_moe"] == 0 and raw["model_size"] == 1595904


def test_the_format_hint_appears_wherever_the_table_is(tmp_path):
    f = tmp_path / "pasted.txt"
    f.write_text(
        "my results:\nggml_cuda_init: found 1 ROCm devices\n\n| model | size | test | t/s |\n|---|---|---|---|\n"
    )
    with pytest.raises(BadInput, match=r"a markdown table \(-o md\) at line 4 has no result rows"):
        imported(tmp_path, f)


# ------------------------------------------------------------------ stddev-nan: every record kept, counted


@pytest.mark.parametrize("name", ["stddev-nan.jsonl", "stddev-nan.json"])
def test_stddev_nan_every_record_kept_and_the_count_reported(tmp_path, name):
    out = run("import", "--results", str(tmp_path / "r"), "--label", "x", str(CASES / name))
    assert out.exit_code == 0 and "imported 3 results" in out.output
    assert "1 stddev repaired" in out.output and f"{CASES / name}:" in out.output


# ------------------------------------------------------------------ 4. plots: the table's rows, all of them


def plotted_points(fig) -> list[tuple[str, float, float]]:
    """(panel title, x, y) of every errorbar point of a line figure."""
    out = []
    for ax in fig.axes:
        for c in ax.containers:
            line = c.lines[0]
            out += [
                (ax.get_title(), float(x), float(y))
                for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
            ]
    return out


def test_every_prefill_row_reaches_a_plot_a_depth_row_on_its_curve(tmp_path):
    """Each image's pp512 at depth 0 and 4096: the prefill figure draws the depth-0 row over prompt
    length, the depth curve (issue 34: x = depth) both rows; no row is left out of both."""
    from toolkit.analysis import plots

    store = ResultStore(tmp_path / "results")
    for name in ("r1a", "r1b"):
        importer.import_files(store, [T3 / f"{name}.jsonl"], label=name)
    t = only_table(store)
    cells = sorted(
        (col, r.n_depth, float(r.n_prompt), identity.value(r))
        for row in t.rows
        for col, r in row.cells.items()
    )
    assert len(cells) == 4 and {c[1] for c in cells} == {0, 4096}
    fig = plots.prefill_figure(t)
    assert sorted(plotted_points(fig)) == [(c[0], c[2], c[3]) for c in cells if c[1] == 0]
    for ax in fig.axes:
        assert [x.get_text() for x in ax.get_legend().get_texts()] == ["ub512"]
        assert ax.get_ylim()[0] == 0
    curve = plots.depth_figure(t)
    drawn = sorted(
        (c.get_label(), float(x), float(y))
        for ax in curve.axes
        for c in ax.containers
        for x, y in zip(c.lines[0].get_xdata(), c.lines[0].get_ydata(), strict=True)
    )
    assert drawn == sorted((c[0], float(c[1]), c[3]) for c in cells)


def test_decode_bars_wrap_to_a_readable_width_on_one_axis_from_zero():
    from toolkit.analysis import plots

    rs = [
        make_record(img, "rocm", n=n, ub=ub, avg=50.0 + n / 10 + ub / 100, sd=0.5)
        for img in ("a", "b", "c")
        for n in (16, 32, 64, 128, 256, 512)
        for ub in (512, 2048)
    ]
    t = tables.axis_table(tables.select_for_report(rs), "decode")
    fig = plots.decode_figure(t)
    assert fig.get_figwidth() <= plots.MAX_WIDTH and len(fig.axes) > 1
    labels = [x.get_text() for ax in fig.axes for x in ax.get_xticklabels()]
    assert labels == [row.test for row in t.rows]  # every row, in table order
    assert sum(len(ax.patches) for ax in fig.axes) == 3 * len(t.rows)
    assert {ax.get_ylim() for ax in fig.axes} == {fig.axes[0].get_ylim()} and fig.axes[0].get_ylim()[0] == 0


def test_mixed_rows_are_plotted_too():
    from toolkit.analysis import plots

    rs = [make_record("hip", "rocm", p=512, n=128, avg=300.0, sd=1.0)]
    assert "mixed" in plots.figures(tables.tables(rs))


@pytest.mark.parametrize(
    "bad",
    ['"avg_ts": 1' + "0" * 400, '"n_prompt": 1' + "0" * 400, '"backends": {"a": [1]}', '"gpu_info": [1, 2]'],
)
def test_values_too_big_or_of_the_wrong_shape_are_no_traceback(tmp_path, bad):
    """Breaker trial: an integer too big for a float (OverflowError) or a dict in a string field
    (unhashable) crashed the import; now the row is refused by name or the value kept as text."""
    good = json.loads((DATA / "llamabench-b5163-readme.jsonl").read_text().splitlines()[0])
    line = json.dumps(good)[:-1] + ", " + bad + "}"
    f = tmp_path / "x.jsonl"
    f.write_text(line + "\n")
    res = CliRunner().invoke(cli, ["import", "--results", str(tmp_path / "r"), "--label", "x", str(f)])
    assert res.exception is None or isinstance(res.exception, (BadInput, SystemExit)), repr(res.exception)


@pytest.mark.parametrize(
    ("field", "text", "stored"),
    [
        ("n_prompt", "512.0", 512),
        ("n_prompt", "5.12e2", 512),
        ("n_depth", "512.0", 512),
        ("n_ubatch", "512.0", 512),
    ],
)
def test_a_count_written_as_decimal_text_is_stored_as_the_count_the_validity_pass_read(
    tmp_path, field, text, stored
):
    """Reproducer (breaker): n_prompt "64.0" passed the validity pass as 64, then the record read it
    as 0: a pp64 prefill row was stored as decode "tg0" (n_depth "512.0" as depth 0, n_ubatch as
    none). One reading of a count for both."""
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({**BASE_ROW, field: text}) + "\n")
    store, res = imported(tmp_path, f)
    (rec,) = store.results()
    assert getattr(rec, field) == stored and rec.test.startswith("pp512"), rec.test
