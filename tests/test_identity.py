"""One test identity and strict validity, tried on real and field-shaped llama-bench outputs.

Inputs in tests/data/cases/ are copies of shared/cases/ (README there): an n_cpu_moe sweep, two
models and two builds in one file, bare `nan`/`-nan` tokens as llama-bench prints them, and real
llama-bench output at the pinned commit 0c1e57098 from an NVIDIA H200 (CUDA build, and the Vulkan
image's own binary on the H200's Vulkan driver). Nothing is mocked: each test imports the file through
the same code path as `toolkit import` and reads the results back through the store's reader.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.project import DATA
from tests.support.records import make_record
from toolkit.analysis import compare, facts, plots, report, table_text, tables
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput
from toolkit.results import identity, importer
from toolkit.results.records import BenchRecord, ResultStore

CASES = DATA / "cases"


def imported(tmp_path: Path, *names: str, label: str = "field") -> tuple[ResultStore, importer.ImportResult]:
    store = ResultStore(tmp_path / "results")
    res = importer.import_files(store, [CASES / n for n in names], label=label)
    return store, res


def table(store: ResultStore, axis: str) -> tables.Table:
    return next(t for t in tables.tables(store.results()) if t.axis == axis)


def cells(t: tables.Table) -> dict[tuple, dict[str, float]]:
    """{(row test, *row ids): {column: tok/s}}"""
    return {
        (row.test, *row.ids.values()): {c: identity.value(r) for c, r in row.cells.items()} for row in t.rows
    }


# ------------------------------------------------------------------------------- rows never collapse


def test_n_cpu_moe_sweep_keeps_three_settings_as_a_column(tmp_path):
    store, res = imported(tmp_path, "n-cpu-moe-sweep.jsonl")
    assert res.records == 6 and not res.repeated
    for axis, expect in (
        ("prefill", {"0": 2400.0, "12": 900.0, "24": 420.0}),
        ("decode", {"0": 110.0, "12": 45.0, "24": 22.0}),
    ):
        t = table(store, axis)
        assert t.id_columns == ["n_cpu_moe"]
        got = {row.ids["n_cpu_moe"]: identity.value(next(iter(row.cells.values()))) for row in t.rows}
        assert got == expect
    text = report.render(store.results())
    head = next(ln for ln in text.splitlines() if ln.startswith("| test"))
    assert "n_cpu_moe" in head
    assert "6 records read, 6 used, 0 superseded" in text


def test_two_models_in_one_file_are_two_row_sets(tmp_path):
    store, _ = imported(tmp_path, "two-models-one-file.jsonl")
    t = table(store, "prefill")
    assert t.id_columns == ["model"]
    assert sorted(identity.value(r) for row in t.rows for r in row.cells.values()) == [160.0, 900.0]
    assert sorted(row.ids["model"] for row in t.rows) == ["model-a-24B-Q4_K_M.gguf", "model-b-20B-mxfp4.gguf"]


def test_two_builds_in_one_file_are_split_on_import_and_the_drop_is_visible(tmp_path):
    store, res = imported(tmp_path, "two-builds-one-file.jsonl", label="r9700")
    assert [(s.name, s.records) for s in res.sets] == [("r9700.aaaa1111-7001", 2), ("r9700.bbbb2222-7010", 2)]
    assert len({s.digest for s in res.sets}) == 2
    t = table(store, "prefill")
    (row,) = t.rows
    assert sorted(identity.value(r) for r in row.cells.values()) == [1130.0, 1480.0]
    a, b = (s.digest for s in res.sets)
    c = compare.compare(store, a, b, threshold=5)
    pp = next(r for r in c.rows if r.test.startswith("pp512"))
    assert round(pp.speedup, 3) == round(1130 / 1480, 3) and c.is_regression(pp)
    with pytest.raises(BadInput, match=r"did you mean r9700.aaaa1111-7001 or r9700.bbbb2222-7010"):
        compare.compare(store, "r9700", b)  # the label the user imported under


def test_same_digest_on_two_gpus_is_two_columns_not_one():
    a = make_record("img", "rocm", p=512, avg=100.0, gpu_info="AMD Radeon AI PRO R9700")
    b = make_record("img", "rocm", p=512, avg=90.0, gpu_info="AMD Radeon RX 9070 XT")
    t = tables.axis_table(tables.select_for_report([a, b]), "prefill")
    assert len(t.columns) == 2 and all("gpu_info=" in c for c in t.columns)


@pytest.mark.parametrize("ngl", [99, 999, -1])
def test_all_layers_spellings_are_one_test(ngl):
    r = make_record("img", "rocm", p=512, avg=1.0, raw={"n_gpu_layers": ngl})
    assert identity.test_fields(r)["n_gpu_layers"] == "all"
    partial = make_record("img", "rocm", p=512, avg=1.0, raw={"n_gpu_layers": 20})
    assert identity.test_fields(partial)["n_gpu_layers"] == 20


def test_fa_spellings_are_one_test():
    on = [make_record("img", "rocm", p=512, avg=1.0, raw={"flash_attn": v}) for v in (1, True, "on")]
    assert len({identity.test_key(r) for r in on}) == 1


def test_a_rerun_supersedes_and_is_counted():
    old = make_record("img", "rocm", p=512, avg=1.0)
    new = old.model_copy(update={"created": "2030-01-01T00:00:00+00:00", "avg_ts": 2.0})
    sel = identity.newest_per_test([old, new])
    assert [r.avg_ts for r in sel.used] == [2.0] and sel.superseded == 1
    assert "2 records read, 1 used, 1 superseded" in report.render([old, new])


# ------------------------------------------------------------------------------- numbers that are not


@pytest.mark.parametrize("name", ["stddev-nan.jsonl", "stddev-nan.json"])
def test_nan_stddev_keeps_every_record_recomputed_from_samples(tmp_path, name):
    store, res = imported(tmp_path, name)
    recs = store.results()
    assert res.records == len(recs) == 3 and not res.refused and store.refused == 0
    assert len(res.repaired) == 1 and "recomputed from 3 samples" in res.repaired[0]
    tg = next(r for r in recs if r.n_gen == 128)
    assert tg.stddev_ts == 0.0 and tg.raw["stddev_ts"] is None  # samples were 110, 110, 110
    assert "stddev-recomputed" in facts.record_flags(tg, facts.ReportOptions())
    json.loads(report.render(recs, "json"))  # strict JSON: no NaN token anywhere


def test_nan_tok_s_is_refused_with_a_reason_and_counted(tmp_path):
    src = (CASES / "n-cpu-moe-sweep.jsonl").read_text().splitlines()
    src[1] = src[1].replace('"avg_ts": 110.0', '"avg_ts": -nan')
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join(src) + "\n")
    store = ResultStore(tmp_path / "results")
    res = importer.import_files(store, [f], label="x")
    assert res.records == 5 and len(res.refused) == 1 and f"{f}:2: avg_ts is nan" in list(res.refused)[0]
    run = CliRunner().invoke(cli, ["import", "--results", str(tmp_path / "r2"), "--label", "x", str(f)])
    assert run.exit_code == 0 and "1 row(s) refused (not a measurement)" in run.output


def test_store_reader_refuses_nan_lines_and_reads_past_bad_bytes(tmp_path):
    rec = make_record("img", "cpu", p=512, avg=100.0, sd=1.0)
    d = tmp_path / "results" / rec.image.short
    d.mkdir(parents=True)
    good = json.dumps(rec.model_dump(mode="json"))
    nan = good.replace('"avg_ts":100.0', '"avg_ts":NaN').replace('"avg_ts": 100.0', '"avg_ts": NaN')
    future = good.replace('"schema_version": 2', '"schema_version": 99')
    later = good.replace('"n_prompt": 512', '"n_prompt": 1024').replace('"test": "pp512"', '"test": "pp1024"')
    (d / "bench.jsonl").write_bytes(
        b"\n".join([good.encode(), b"\xff\xfe garbage", nan.encode(), future.encode(), later.encode()])
        + b"\n"
    )
    store = ResultStore(tmp_path / "results")
    recs = store.results()
    assert sorted(r.n_prompt for r in recs) == [512, 1024]
    assert store.refused == 3
    w = "\n".join(store.warnings)
    assert "bench.jsonl:2: skipped a line that is not UTF-8" in w
    assert "bench.jsonl:3: skipped a record" in w and "avg_ts is nan" in w
    assert "bench.jsonl:4: skipped a record of schema_version 99" in w
    run = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--json"])
    assert run.exit_code == 0
    doc, _ = json.JSONDecoder().raw_decode(run.output[run.output.index("{") :])  # warnings follow on stderr
    assert "3 unreadable or invalid" in doc["records"]


def test_a_nan_never_reaches_a_record():
    with pytest.raises(ValueError, match="avg_ts is nan"):
        make_record("img", "cpu", p=512, avg=math.nan)
    with pytest.raises(ValueError, match=r"samples_ts\[1\] is inf"):
        make_record("img", "cpu", p=512, avg=1.0, raw={"samples_ts": [1.0, math.inf]})


# ------------------------------------------------------------------------------- real H200 outputs


def test_h200_cuda_output_imports_whole_and_flags_only_what_was_measured(tmp_path):
    store, res = imported(tmp_path, "cuda-h200-qwen3moe-30b-synthetic.jsonl", label="h200-cuda")
    recs = store.results()
    assert res.records == 8 and not res.refused and not res.skipped
    for f in ("n_cpu_moe", "fit_target", "no_host", "repack", "devices", "split_mode"):
        assert f in recs[0].raw
    dec = table(store, "decode")
    got = {row.test: (identity.value(next(iter(row.cells.values()))), row.row_flags()) for row in dec.rows}
    assert got["tg128 ub512"][0] == pytest.approx(308.0, abs=0.1)
    assert got["tg128 ub2048"][0] == pytest.approx(291.5, abs=0.1)
    for _, flags in got.values():  # the micro-batch does not apply to decode: neither flag on tg rows
        assert not any(f.startswith(("ub-clamped", "ub-no-effect")) for f in flags)
    pre = cells(table(store, "prefill"))
    assert len(pre) == 6
    pp512 = next(row for row in table(store, "prefill").rows if row.test == "pp512 ub512")
    assert "warmup-outlier" in pp512.row_flags()


def test_vulkan_h200_equal_decode_is_measured_no_effect_and_backend_tells_the_files_apart(tmp_path):
    store = ResultStore(tmp_path / "results")
    cuda = importer.import_files(store, [CASES / "cuda-h200-qwen3moe-30b-synthetic.jsonl"], label="h200-cuda")
    vk = importer.import_files(
        store, [CASES / "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl"], label="h200-vk"
    )
    assert [s.system["backends"] for s in vk.sets] == ["Vulkan"] and vk.sets[0].system[
        "gpu_info"
    ] == "NVIDIA H200"
    assert cuda.sets[0].system["gpu_info"] == vk.sets[0].system["gpu_info"]
    chosen = tables.select_for_report(store.results())
    dec = tables.axis_table(chosen, "decode")
    vk_rows = [row for row in dec.rows if any(c.startswith("h200-vk@") for c in row.cells)]
    for row in vk_rows:  # 206.5 ± 3.0 vs 204.9 ± 1.8, yet tg has no micro-batch: never "no effect"
        assert not any(f.startswith("ub-no-effect") for f in row.row_flags())
    pre = tables.axis_table(chosen, "prefill")
    pp512 = [row for row in pre.rows if row.test.startswith("pp512 ")]
    for row in pp512:  # 10430.8 ± 20.9 vs 10471.4 ± 19.9 on Vulkan: equal within noise, and measured so
        assert "ub-no-effect [h200-vk@" in "; ".join(row.row_flags())
    assert dec.id_columns == ["flash_attn"] or "flash_attn" in " ".join(dec.image_ids.values())
    with pytest.raises(BadInput, match=r"keeps them apart: flash_attn: A has 1, B has 0"):
        compare.compare(store, cuda.sets[0].digest, vk.sets[0].digest)
    run = CliRunner().invoke(
        cli, ["compare", "--results", str(store.root), cuda.sets[0].digest, vk.sets[0].digest]
    )
    assert (
        isinstance(run.exception, BadInput)
        and run.exception.exit_code == 4
        and "flash_attn" in str(run.exception)
    )


# ------------------------------------------------------------------------------- plots use the identity


def test_decode_plot_draws_one_bar_group_per_table_row():
    rs = [
        make_record("cpu", "cpu", n=128, ub=512, avg=3674.0, sd=10.0, gpu_info=""),
        make_record("cpu", "cpu", n=128, ub=2048, avg=726.0, sd=5.0, gpu_info=""),
    ]
    t = tables.axis_table(tables.select_for_report(rs), "decode")
    fig = plots.decode_figure(t)
    ax = fig.axes[0]
    assert [x.get_text() for x in ax.get_xticklabels()] == ["tg128 ub512", "tg128 ub2048"]
    assert sorted(round(p.get_height()) for p in ax.patches) == [726, 3674]


def test_no_record_is_lost_between_select_and_table(tmp_path):
    store, _ = imported(tmp_path, "n-cpu-moe-sweep.jsonl", "two-models-one-file.jsonl")
    chosen = tables.select_for_report(store.results())
    shown = sum(len(row.cells) for t in tables.tables(store.results()) for row in t.rows)
    assert shown == len(chosen) == 10


def test_records_with_the_same_identity_from_an_import_are_reported(tmp_path):
    f = tmp_path / "twice.jsonl"
    line = (CASES / "n-cpu-moe-sweep.jsonl").read_text().splitlines()[0]
    again = json.dumps({**json.loads(line), "test_time": "2026-01-01T00:00:00Z"})  # measured again
    f.write_text(line + "\n" + again + "\n" + line + "\n")  # the last: the first read twice
    res = importer.import_files(ResultStore(tmp_path / "results"), [f], label="x")
    assert res.records == 2 and len(res.repeated) == 1 and len(res.duplicates) == 1


def test_bench_record_written_is_strict_json(tmp_path):
    store = ResultStore(tmp_path / "results")
    rec = make_record("img", "cpu", p=512, avg=1.0, raw={"stddev_ns": math.nan})
    path = store.add_result(rec)
    json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-standard JSON token {c}"))
    assert isinstance(BenchRecord, type)


# ------------------------------------------------------------------------------- resume per test


def test_resume_runs_exactly_the_missing_cases(tmp_path):
    from toolkit.bench.runners.llama_bench import missing_cases, resume_axes
    from toolkit.matrix.api import BenchAxes

    axes = BenchAxes(
        n_prompt=[512, 2048],
        n_gen=[128],
        n_ubatch=[512, 2048],
        n_batch=[2048],
        flash_attn=[1],
        n_gpu_layers=[999],
    )
    store = ResultStore(tmp_path / "results")
    sha = "a" * 64
    done = [
        make_record("img", "cpu", p=512, ub=512, avg=1.0),
        make_record("img", "cpu", n=128, ub=512, avg=1.0),
        make_record("img", "cpu", p=512, ub=2048, avg=1.0),
    ]
    for r in done:  # recorded as llama-bench writes them: -ngl 999 read back as "all layers"
        r.model.sha256 = sha
        store.add_result(r)
    todo = missing_cases(store, done[0].image.digest, sha, axes)
    assert sorted((c["n_prompt"], c["n_gen"], c["n_ubatch"]) for c in todo) == [
        (0, 128, 2048),
        (2048, 0, 512),
        (2048, 0, 2048),
    ]
    subs = resume_axes(axes, todo)
    assert sorted(
        c["n_prompt"] + c["n_gen"] * 100000 + c["n_ubatch"] for s in subs for c in s.cases()
    ) == sorted(c["n_prompt"] + c["n_gen"] * 100000 + c["n_ubatch"] for c in todo)
    assert missing_cases(store, "sha256:other", sha, axes) == axes.cases()


# ------------------------------------------------------------------------------- process-level runs


def _run(i: int, avg: float, n: int = 4) -> BenchRecord:
    r = make_record("img", "rocm", n=128, avg=avg, sd=0.5, raw={"samples_ts": [avg - 0.5, avg + 0.5]})
    r.run_id = "run-x"
    r.created = f"2030-01-01T00:00:0{i}+00:00"
    r.__pydantic_extra__ = {**(r.model_extra or {}), "process_run": {"index": i, "of": n}}
    return r


def test_process_runs_are_combined_and_bimodal_runs_flagged():
    runs = [_run(1, 100.0), _run(2, 100.4), _run(3, 80.0), _run(4, 80.2)]
    sel = identity.newest_per_test(runs)
    (r,) = sel.used
    assert sel.superseded == 0 and r.avg_ts == pytest.approx(90.15)
    assert r.model_extra["between_runs"]["runs"] == 4 and len(r.samples_ts) == 8
    flags = facts.record_flags(r, facts.ReportOptions())
    assert "runs-disagree" in flags and "bimodal-runs" in flags
    steady = identity.newest_per_test([_run(1, 100.0), _run(2, 100.3), _run(3, 99.8)]).used[0]
    assert not {"runs-disagree", "bimodal-runs"} & set(facts.record_flags(steady, facts.ReportOptions()))
    assert "[3 runs, spread 0.5%]" in table_text.fmt_cell(steady)


def test_a_gpu_image_without_a_known_product_says_why_it_has_no_roofline():
    r = make_record("vk", "vulkan", n=128, avg=50.0, sd=0.5, gpu_info="AMD Radeon Graphics (RADV GFX1150)")
    text = report.render([r])
    assert "vk@" in text and ": no roofline: " in text
    known = make_record("hip", "rocm", n=128, avg=50.0, sd=0.5)
    doc = json.loads(report.render([known], "json"))
    cell = doc["tables"][0]["rows"][0][facts.image_label(known)]
    assert cell["roofline"]["product"] == "AMD Radeon AI PRO R9700" and cell["roofline"]["gpu_count"] == 1


def test_one_digest_on_two_campaign_hosts_is_two_columns():
    a = make_record("img", "rocm", p=512, avg=100.0, host={"key": "n1"})
    b = make_record("img", "rocm", p=512, avg=80.0, host={"key": "n2"})
    t = tables.axis_table(tables.select_for_report([a, b]), "prefill")
    assert sorted(t.columns) == [f"{facts.image_label(a)} [host=n1]", f"{facts.image_label(a)} [host=n2]"]


def test_a_shape_twin_never_shares_a_row_with_the_real_model():
    real = make_record("hip", "rocm", p=512, avg=3491.0, sd=10.0)
    twin = make_record("hip", "rocm", p=512, avg=3480.0, sd=10.0)
    twin.model.__pydantic_extra__ = {
        "kind": "synthetic-twin",
        "twin_of": {"repo": "unsloth/Qwen3-30B-A3B-Instruct-2507-GGUF", "revision": "a" * 40},
    }
    assert identity.model_fingerprint(real) != identity.model_fingerprint(
        twin
    )  # llama-bench describes both alike
    t = tables.axis_table(tables.select_for_report([real, twin]), "prefill")
    assert len(t.rows) == 2 and t.id_columns == ["model"]
    twin_row = next(row for row in t.rows if "twin of" in row.ids["model"])
    assert "synthetic-twin" in twin_row.row_flags()
    assert "[twin of unsloth/Qwen3-30B-A3B-Instruct-2507-GGUF@aaaaaaaa]" in twin_row.ids["model"]
    assert not identity.match_tests([real], [twin]).pairs  # compare never pairs a twin with the real file


# ------------------------------------------------------------------------------- breaker cases, round 2


def _lines(name: str) -> list[str]:
    return (CASES / name).read_text().splitlines()


def test_rows_without_a_tok_s_or_a_token_count_are_refused_and_counted(tmp_path):
    rows = [json.loads(x) for x in _lines("n-cpu-moe-sweep.jsonl")]
    cut = dict(rows[0])
    del cut["avg_ts"], cut["avg_ns"]  # a row cut off before its numbers
    no_np = dict(rows[2])
    del no_np["n_prompt"]  # never read as n_prompt 0 (it would become a tg row)
    f = tmp_path / "x.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [cut, no_np, *rows[3:]]) + "\n")
    res = importer.import_files(ResultStore(tmp_path / "r"), [f], label="x")
    assert res.records == 3
    assert f"{f}:1: no avg_ts or avg_ns (a cut-off row?); row left out" in res.refused
    assert f"{f}:2: no n_prompt; row left out" in res.refused
    with pytest.raises(ValueError, match="avg_ts is missing"):
        make_record("img", "cpu", p=512, avg=None)
    with pytest.raises(ValueError, match="avg_ts is 1.5e"):
        make_record("img", "cpu", p=512, avg=1.5e300)


def test_a_bom_a_bad_byte_and_msvc_nan_break_one_line_not_the_file(tmp_path):
    lines = _lines("stddev-nan.jsonl")
    data = (
        b"\xef\xbb\xbf"
        + lines[0].encode()
        + b"\n\xff\xfe broken\n"
        + lines[1].replace('"stddev_ts": -nan', '"stddev_ts": -nan(ind)').encode()
        + b"\n"
        + lines[2].encode()
        + b"\r\n"
    )
    f = tmp_path / "x.jsonl"
    f.write_bytes(data)
    res = importer.import_files(ResultStore(tmp_path / "r"), [f], label="x")
    assert res.records == 3 and len(res.repaired) == 1
    assert any(s.startswith(f"{f}:2: not UTF-8") for s in res.skipped)


def test_import_hashes_each_file_once_not_once_per_row(tmp_path, monkeypatch):
    import hashlib

    calls = []
    orig = hashlib.sha256

    class Counting:
        def __init__(self, data=b""):
            calls.append(len(data))
            self._h = orig(data)

        def hexdigest(self):
            return self._h.hexdigest()

        def update(self, b):
            self._h.update(b)

    f = tmp_path / "x.jsonl"
    f.write_text("\n".join(_lines("n-cpu-moe-sweep.jsonl") * 20) + "\n")
    monkeypatch.setattr(importer.hashlib, "sha256", Counting)  # counts calls only; hashing is the real one
    importer.import_files(ResultStore(tmp_path / "r"), [f], label="x")
    assert len(calls) <= 3  # the files' content digest, and each file once (was: once per row)


def test_inside_keys_cached_each_record_gets_its_key_once_and_a_copy_its_own():
    """Issue 32 item 13: a report computed each shown record's identity ~10 times (100,000 test_key
    calls for 10,000 records, 7.6 of its 17 s under the profiler)."""
    r = make_record("cpu", "cpu", p=512, avg=1.0)
    assert identity.test_key(r) is not identity.test_key(r)  # outside: computed each time
    with identity.keys_cached():
        k = identity.test_key(r)
        assert identity.test_key(r) is k and identity.test_fields(r) == dict(k.test)
        assert identity.model_fingerprint(r) == k.model
        other = r.model_copy(update={"n_prompt": 1024, "raw": {**r.raw, "n_prompt": 1024}})
        assert identity.test_key(other) != k  # a copy is another record: its own key
    assert identity.test_key(r) == k and hash(identity.test_key(r)) == hash(k)
    assert identity._memo is None  # the memo ends with its scope


def test_two_images_each_on_its_own_model_never_share_a_row_or_a_best():
    """Newcomer (fresh Podman host): a CPU bench of the tiny model beside an imported H200 run of the
    30B model put both in one `pp512 ub512` row, the model named only in each column's header, and
    marked the H200's 11,563 t/s the row's best over the tiny model's: two workloads ranked as one.
    The model is a row column whenever it varies; each row holds one model's cells."""
    rs = [
        make_record(
            "cpu",
            "cpu",
            p=512,
            avg=11122.0,
            sd=100.0,
            gpu_info="",
            model="tiny-qwen3moe",
            raw={"model_type": "qwen3moe ?B Q8_0", "model_size": 5_000_000, "model_n_params": 9_000_000},
        ),
        make_record("vk", "vulkan", p=512, avg=30000.0, sd=100.0, model="qwen3-30b"),
    ]
    (t,) = tables.tables(rs)
    assert len(t.rows) == 2 and all(len(row.cells) == 1 for row in t.rows)
    assert sorted(row.ids["model"] for row in t.rows)[1].startswith("tiny-qwen3moe")
    assert all(tables.best_column(row) is None for row in t.rows)
    table = [ln for ln in report.render(rs, "github").splitlines() if ln.startswith("|")]  # the caveat's own
    assert table and not any("**" in ln for ln in table)  # bold aside (the tiny model: 5 MB of tensors)
