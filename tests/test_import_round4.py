"""`toolkit import`, round 4 (issue 31): unknown is `unknown`, never a guess; another tool's table is
refused with what it looks like; facts pasted beside a table are read. The inputs are written here,
shaped like what people paste (llama-bench -o md tables with the lines printed around them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.analysis import tables
from toolkit.core import backends
from toolkit.core.errors import BadInput
from toolkit.results import importer
from toolkit.results.records import ResultStore

HEADER = (
    "| model | size | params | backend | ngl | test | t/s |\n| --- | ---: | ---: | --- | --: | --: | --: |\n"
)


def md(tmp_path: Path, text: str, name: str = "run.md") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def stored(tmp_path: Path, path: Path) -> list:
    store = ResultStore(tmp_path / "results")
    importer.import_files(store, [path], label="x")
    return store.results()


@pytest.mark.parametrize(
    ("names", "devices", "want"),
    [
        ("Vulkan (PR)", None, "unknown"),
        ("", None, "unknown"),
        ("CPU", None, "cpu"),
        ("CPU,BLAS", None, "cpu"),
        ("ROCm", None, "rocm"),
        ("HIP", None, "rocm"),
        ("ROCm,Vulkan", "ROCm0", "rocm"),
        ("ROCm,Vulkan", "Vulkan0", "vulkan"),
        ("ROCm,Vulkan", None, "rocm"),  # the first named: llama-bench lists the backends it ran in order
        ("Vulkan", "none", "vulkan"),  # the build's backend; the row is marked a CPU fallback
    ],
)
def test_the_backend_a_row_ran_on_is_read_never_guessed(names, devices, want):
    assert backends.from_llama_names(names, devices) == want


def test_a_table_without_a_backend_column_or_with_an_unknown_one_is_filed_as_unknown(tmp_path):
    no_col = md(
        tmp_path,
        "| model | size | params | test | t/s |\n|---|---|---|---|---|\n| qwen3moe 30B.A3B Q4_K | 16.5 GiB | 30.5 B | pp512 | 1500.12 ± 3.40 |\n",
    )
    assert {r.image.backend for r in stored(tmp_path / "a", no_col)} == {"unknown"}
    pr = md(
        tmp_path,
        HEADER
        + "| qwen3moe 30B.A3B Q4_K | 16.5 GiB | 30.5 B | Vulkan (PR) | 99 | pp512 | 1500.12 ± 3.40 |\n",
        "pr.md",
    )
    assert {r.image.backend for r in stored(tmp_path / "b", pr)} == {"unknown"}


def test_a_dev_none_row_on_a_gpu_build_is_a_cpu_fallback(tmp_path):
    text = (
        "| model | size | params | backend | ngl | dev | test | t/s |\n|---|---|---|---|---|---|---|---|\n"
        "| qwen3moe 30B.A3B Q4_K | 16.5 GiB | 30.5 B | ROCm | 99 | ROCm0 | pp512 | 1500.12 ± 3.40 |\n"
        "| qwen3moe 30B.A3B Q4_K | 16.5 GiB | 30.5 B | ROCm | 99 | none | pp512 | 80.50 ± 1.10 |\n"
    )
    recs = stored(tmp_path, md(tmp_path, text))
    by_dev = {r.raw.get("devices"): r for r in recs}
    assert by_dev["ROCm0"].image.backend == "rocm" and not tables.is_cpu_fallback(by_dev["ROCm0"])
    assert tables.is_cpu_fallback(by_dev["none"])


def test_another_tools_table_with_test_and_ts_is_refused_with_what_it_looks_like(tmp_path):
    """An HTTP benchmark's table (test, t/s and latencies) was imported as llama-bench and its latencies
    became test settings. It has no `model` column: refused, the header named."""
    text = "| test | t/s | ttft ms | p99 ms |\n|---|---|---|---|\n| pp512 | 1500.1 ± 3.4 | 120 | 250 |\n"
    with pytest.raises(BadInput, match=r"another tool's table, not llama-bench -o md output") as err:
        importer.import_files(ResultStore(tmp_path / "r"), [md(tmp_path, text)], label="x")
    assert "'| test | t/s | ttft ms | p99 ms |'" in str(err.value)


def test_a_build_line_above_the_table_and_device_lines_are_read(tmp_path):
    """Pasted as people paste it: the build line and ggml's device list first, then the table. The
    rows get the build (no false `no-build-commit`) and the GPU's name (for the roofline)."""
    text = (
        "ggml_cuda_init: found 1 ROCm devices:\n"
        "  Device 0: AMD Radeon AI PRO R9700, gfx1201 (0x1201), VMM: no, Wave Size: 32\n"
        "build: 0c1e57098 (7291)\n\n"
        + HEADER
        + "| qwen3moe 30B.A3B Q4_K | 16.5 GiB | 30.5 B | ROCm | 99 | pp512 | 1500.12 ± 3.40 |\n"
    )
    (r,) = stored(tmp_path, md(tmp_path, text))
    assert r.raw["build_commit"] == "0c1e57098" and r.raw["build_number"] == 7291
    assert "no-build-commit" not in (r.model_extra or {}).get("flags", [])
    assert r.gpu_info == "AMD Radeon AI PRO R9700"


def test_a_table_without_its_leading_pipes_is_still_read(tmp_path):
    text = "model | size | params | backend | ngl | test | t/s\n---|---|---|---|---|---|---\nqwen3moe 30B.A3B Q4_K | 16.5 GiB | 30.5 B | ROCm | 99 | pp512 | 1500.12 ± 3.40\n"
    (r,) = stored(tmp_path, md(tmp_path, text))
    assert r.n_prompt == 512 and r.avg_ts == pytest.approx(1500.12)


def test_a_markdown_table_and_the_same_models_jsonl_compare(tmp_path):
    """md kept size and parameters as printed ('1.52 MiB', '0.79 M'), so compare refused the same model
    as another (issue 31). Both now describe the model as llama-bench's table prints it."""
    from tests.support.project import DATA
    from toolkit.analysis import compare
    from toolkit.results import identity

    store = ResultStore(tmp_path / "results")
    a = importer.import_files(store, [DATA / "llamabench-0c1e57098-cpu.jsonl"], label="json")
    b = importer.import_files(store, [DATA / "llamabench-0c1e57098-cpu.md"], label="md")
    recs = store.results()
    assert len({identity.model_fingerprint(r) for r in recs}) == 1
    c = compare.compare(store, a.digest, b.digest)
    assert c.rows  # joined: the same tests of the same model
    # the columns llama-bench's table leaves out hold its defaults (pinned source): filled, so the join
    # is made on them too, not left out as "one side never recorded them"
    md_rec = next(r for r in recs if r.raw.get("model_size") == "1.52 MiB")
    assert (
        md_rec.raw["n_batch"] == 2048
        and md_rec.raw["type_k"] == "f16"
        and md_rec.raw["split_mode"] == "layer"
    )
    assert not {"n_batch", "type_k", "type_v", "split_mode", "n_cpu_moe"} & {*c.lacking[0], *c.lacking[1]}, (
        c.lacking
    )


def test_an_import_option_that_contradicts_the_file_is_bad_input_and_a_corrected_one_imports(tmp_path):
    """A typo in --input-len exited 0 with a failed measurement stored, and the corrected re-import was
    then skipped as "imported before" (issue 31)."""
    import shutil

    from tests.support.project import DATA

    store = ResultStore(tmp_path / "results")
    serve = tmp_path / "serve-128-32-c2.json"  # the file's own counts: 1024 input tokens over 8 prompts
    shutil.copy(DATA / "vllm-0.16.0-serve.json", serve)
    with pytest.raises(BadInput, match=r"--input-len 2370 contradicts the file: its own token counts .*128;"):
        importer.import_files(store, [serve], label="v", input_len=2370)
    misnamed = tmp_path / "serve-237-512-c1.json"  # a name that is not what the file ran
    shutil.copy(DATA / "vllm-0.16.0-serve.json", misnamed)
    with pytest.raises(
        BadInput, match=r"its name says 237 input tokens, its own counts 128 .*nothing imported"
    ):
        importer.import_files(store, [misnamed], label="v")
    assert store.results() == []
    from toolkit.results import vllm_import

    assert vllm_import._NAMES["serve"].search("observe-128-32-c2") is None  # no serve name
    lat = tmp_path / "result.json"  # a name that says no lengths: the option cannot be checked
    lat.write_text(
        '{"avg_latency": 1.2, "latencies": [1.2, 1.2, 1.2], "percentiles": {"50": 1.2, "99": 1.2}}'
    )
    first = importer.import_files(store, [lat], label="v", input_len=2370, output_len=1)
    again = importer.import_files(store, [lat], label="v", input_len=237, output_len=1)
    assert not again.already and again.digest != first.digest and again.records == first.records


def test_one_record_saved_as_one_pretty_printed_json_object_is_read(tmp_path):
    """Was "not a complete JSON record" for every line (issue 31)."""
    import json

    from tests.support.project import DATA

    row = json.loads((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
    p = tmp_path / "one.json"
    p.write_text(json.dumps(row, indent=2) + "\n")
    (r,) = stored(tmp_path, p)
    assert r.n_prompt == row["n_prompt"] and r.avg_ts == pytest.approx(row["avg_ts"])


def test_sql_rows_that_carry_samples_are_not_flagged_without_them(tmp_path):
    text = (
        "INSERT INTO test (build_commit, model_type, backends, n_prompt, n_gen, avg_ts, stddev_ts, samples_ts) "
        "VALUES ('0c1e570', 'qwen3moe ?B F16', 'CPU', 64, 0, 100.0, 1.0, '[99.0, 101.0]');\n"
    )
    p = tmp_path / "run.sql"
    p.write_text(text)
    (r,) = stored(tmp_path, p)
    assert "no-samples" not in (r.model_extra or {}).get("flags", [])
    p.write_text(text.replace(", samples_ts)", ")").replace(", '[99.0, 101.0]'", ""))
    (r,) = stored(tmp_path / "b", p)
    assert "no-samples" in (r.model_extra or {}).get("flags", [])


def test_a_markdown_table_saved_with_a_byte_order_mark_is_read(tmp_path):
    from tests.support.project import DATA

    p = tmp_path / "bom.md"
    p.write_bytes(b"\xef\xbb\xbf" + (DATA / "llamabench-0c1e57098-cpu.md").read_bytes())
    assert len(stored(tmp_path, p)) == 2


def test_a_trace_an_imported_record_names_outside_the_results_folder_is_never_read(tmp_path):
    """The breaker's find: `toolkit_telemetry.trace` of an imported row named any file (a 4 GB one,
    /proc/kmsg); the report read it. Only traces inside the results folder are read."""
    import json

    from tests.support.project import DATA
    from toolkit.analysis import plots
    from toolkit.runtimes.llama_bench import check

    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text('{"t": 1, "source": "nv", "vendor": "nvidia", "power_w": 100}\n')
    row = json.loads((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
    at = check.parse_test_time(row["test_time"]).timestamp()  # a window of its own test (round 15)
    row["toolkit_telemetry"] = {"trace": str(outside), "t0": at + 1.0, "t1": at + 2.0}
    f = tmp_path / "m.jsonl"
    f.write_text(json.dumps(row) + "\n")
    recs = stored(tmp_path, f)
    runs = plots.trace_runs(tables.tables(recs), tmp_path / "results")
    assert runs and all(outside not in run.candidates for run in runs)
