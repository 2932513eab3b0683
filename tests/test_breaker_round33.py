"""Breaker round 33 (integrity and what a customer receives): the import's time rules held on read (a
stored telemetry window moved away from its test, a stored test_time before llama-bench existed, each
refused at import and shown valid when stored: time_check._window_problem, record_check._RAW_HELD), and
the run folder a customer receives (export-run's README said an import's import time as when it was
measured and named no GPU; the csv report's host cell was empty where every other format named the
CPU). Inputs: the real H200 `toolkit measure` rows and the CPU `toolkit bench` records of tests/data,
imported, then edited as a hand would, read through the CLI. Each test fails on the code before its fix."""

from __future__ import annotations

import csv
import io
import json

from tests.support.project import ROOT
from tests.support.runs import tk
from tests.support.stored import edit_stored, h200_rows, import_rows, matrix_project

DAY = 86400.0


def _report(tmp) -> tuple[list[dict], str]:
    res = tk(tmp, "report", "--results", "r", "--format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    rep = json.loads(res.stdout)
    cells = [v for t in rep["tables"] for row in t["rows"] for v in row.values() if isinstance(v, dict)]
    return cells, res.stderr


def _moved(days: float):
    def edit(r: dict) -> None:
        if r["test"] == "pp512":  # the first row's record only: the other stays as measured
            r["telemetry"]["t0"] += days * DAY
            r["telemetry"]["t1"] += days * DAY

    return edit


def test_a_stored_window_moved_away_from_its_test_is_no_window_of_it(tmp_path):
    """Before: a stored record whose telemetry window was moved 400 days after its test_time (or 3000
    days before it) kept its tok/J and flags as the test's (`toolkit import` leaves such a block out:
    window_contradiction; the reader did not ask). Now skipped, naming the window."""
    for days, said in ((400, "after the record was written"), (-3000, "before the row's test_time")):
        tmp = matrix_project(tmp_path / str(days))
        import_rows(tmp, h200_rows("alone.jsonl")[:2], "h200")
        edit_stored(tmp, _moved(days))
        cells, err = _report(tmp)
        assert len(cells) == 1, cells  # the other row's cell
        assert "its telemetry: its window" in err and said in err, err[-600:]


def test_a_stored_window_within_a_day_of_its_test_is_kept_guard(tmp_path):
    """Guard (passes before and after): the real window, and one moved 2 hours (a clock's skew), read
    as before: tok/J shown."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl")[:2], "h200")
    edit_stored(tmp, _moved(2 / 24))
    cells, err = _report(tmp)
    assert len(cells) == 2 and all(c["tok_per_j"] for c in cells) and "skipped" not in err, err


def test_a_stored_test_time_before_llama_bench_existed_is_refused_as_at_import(tmp_path):
    """Before: a row's test_time of 2019 is refused at import (before llama-bench existed), but a stored
    record edited to it was shown `measured: 2019-01-01 ...` (the test_time was not held on read)."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl")[:1], "h200")
    edit_stored(tmp, lambda r: r["raw"].update(test_time="2019-01-01T00:00:00Z"))
    res = tk(tmp, "report", "--results", "r", "--format", "github")
    assert "2019-01-01" not in res.stdout, res.stdout[:600]
    assert "before llama-bench existed" in res.stderr, res.stderr[-600:]


def _exported_readme(tmp, run_id: str) -> str:
    # run in the project: export-run copies its matrix.yaml and Dockerfile.templates/
    res = tk(ROOT, "export-run", run_id, "--results", str(tmp / "r"), "-o", str(tmp / "exp"))
    assert res.returncode == 0, res.stdout + res.stderr
    return (tmp / "exp" / "README.md").read_text()


def test_an_exported_import_says_when_and_on_what_gpu_it_was_measured(tmp_path):
    """Before: the README of an exported import said `Measured 2026-12-05T...` (the import's own time,
    days after the rows' test_time 2026-12-01) `on a CPU not recorded`, and named no GPU, while
    `toolkit report` of the same records says 2026-12-01 on Intel Xeon with an NVIDIA H200."""
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")
    import_rows(tmp, rows, "h200")
    run_id = json.loads(next((tmp / "r").glob("*/bench.jsonl")).read_text().splitlines()[0])["run_id"]
    readme = _exported_readme(tmp, run_id)
    head = readme.split("## Images")[0]
    assert "measured: 2026-12-01 14:16:57 UTC to 2026-12-01 14:17:00 UTC" in head, head
    assert "GPU NVIDIA H200" in head and "Intel(R) Xeon(R) Processor" in head, head
    assert "Measured 2026-12-05" not in head and "a CPU not recorded" not in head, head


def test_an_exported_bench_run_says_its_tests_span_not_its_first_write(tmp_path):
    """Before: `Measured 2026-11-29T17:07:05` (the first record's write, after its test ended); now the
    span its records' own times give, as the report says it."""
    src = (ROOT / "tests" / "data" / "results-cpu-a.jsonl").read_text()
    folder = tmp_path / "r" / "a504e0178239"
    folder.mkdir(parents=True)
    (folder / "bench.jsonl").write_text(src)
    tmp = matrix_project(tmp_path)
    run_id = json.loads(src.splitlines()[0])["run_id"]
    head = _exported_readme(tmp, run_id).split("## Images")[0]
    assert "measured: 2026-11-29 17:06:28 UTC to" in head, head
    assert "Intel(R) Xeon(R) Processor" in head and "kernel 6.18.44" in head, head


def test_the_csv_host_names_the_cpu_an_imported_row_names(tmp_path):
    """Before: the csv's `host` cell of an imported row was empty, while text, github, html and json
    say `host: Intel(R) Xeon(R) Processor; GPU NVIDIA H200` from the same row's cpu_info."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl")[:1], "h200")
    res = tk(tmp, "report", "--results", "r", "--format", "csv")
    assert res.returncode == 0, res.stderr
    (row,) = list(csv.DictReader(io.StringIO(res.stdout)))
    assert row["host"] == "Intel(R) Xeon(R) Processor" and row["gpu"] == "NVIDIA H200", row


def _sglang_import(tmp) -> None:
    """The real SGLang 0.5.15 bench_serving result (its file's last line) imported into tmp/r."""
    line = (ROOT / "tests" / "data" / "sglang-0.5.15-serving.jsonl").read_text().splitlines()[-1]
    import_rows(tmp, [json.loads(line)], "sg")


def test_a_stored_sglang_serve_result_is_held_to_its_import_rules(tmp_path):
    """Before: an imported SGLang bench_serving record edited to a median TTFT of 99,999 ms, to 100x its
    output throughput (raw, block and avg_ts together) or to a negative duration was shown (`TTFT
    99999.0 ms`, `18140.00`): record_check held only vLLM's serve records to the rules their import
    applied (serve_problem, then serve_timing_problem). Now skipped, naming the result's figure."""
    edits = {
        "p90_ttft_ms 103.68 is below": lambda r: r["raw"].update(median_ttft_ms=99999.0),
        "contradicts total_output_tokens": lambda r: [
            r.update(avg_ts=r["avg_ts"] * 100),
            r["served"].update(output_throughput=r["served"]["output_throughput"] * 100),
            r["raw"].update(output_throughput=r["raw"]["output_throughput"] * 100),
        ],
        "never negative": lambda r: [r["served"].update(duration=-5.0), r["raw"].update(duration=-5.0)],
    }
    for i, (said, edit) in enumerate(edits.items()):
        tmp = matrix_project(tmp_path / str(i))
        _sglang_import(tmp)
        edit_stored(tmp, edit)
        cells, err = _report(tmp)
        assert not cells and "its result: " in err and said in err, (cells, err[-600:])


def test_an_sglang_table_is_not_titled_as_vllm_alone(tmp_path):
    """Before: the served table of an SGLang result was titled `vLLM bench serve` alone."""
    tmp = matrix_project(tmp_path)
    _sglang_import(tmp)
    cells, _ = _report(tmp)
    assert len(cells) == 1
    res = tk(tmp, "report", "--results", "r", "--format", "github")
    assert "SGLang bench_serving" in res.stdout.split("### Served")[1].splitlines()[0], res.stdout[-800:]


def test_a_block_of_another_vendors_gpu_is_no_window_of_the_row(tmp_path):
    """Before: an H200 row whose toolkit_telemetry held only an AMD card (its key and vendor moved)
    was imported with that card's energy as the row's tok/J (38.2), and a stored one shown so. Now
    the block is left out at import (the speed kept) and a stored one skipped; a block holding the
    row's card beside another (an iGPU the sampler also read) is not refused by this rule."""
    tmp = matrix_project(tmp_path)
    row = h200_rows("alone.jsonl")[0]
    gpus = row["toolkit_telemetry"]["gpus"]
    ((key, g),) = gpus.items()
    gpus["amd:0000:03:00.0"] = {**gpus.pop(key), "vendor": "amd"}
    out = import_rows(tmp, [row], "h200")
    assert "its GPUs are amd, none of the nvidia card(s)" in out, out
    (cell,), _ = _report(tmp)
    assert cell["tok_per_j"] is None and cell["avg_ts"] == row["avg_ts"], cell
    tmp2 = matrix_project(tmp_path / "stored")
    import_rows(tmp2, h200_rows("alone.jsonl")[:2], "h200")

    def edit(r: dict) -> None:
        if r["test"] == "pp512":
            gs = r["telemetry"]["gpus"]
            gs["amd:0000:03:00.0"] = {**gs.pop(next(iter(gs))), "vendor": "amd"}

    edit_stored(tmp2, edit)
    cells, err = _report(tmp2)
    assert len(cells) == 1 and "its GPUs are amd" in err, err[-600:]


def test_a_stored_serve_record_is_named_by_the_settings_its_result_ran(tmp_path):
    """Before: the real vLLM 0.16.0 serve result (8 requests of 128 prompt and 32 output tokens at
    max_concurrency 2), imported, then its record edited to n_prompt 4096, n_gen 512 or concurrency 64,
    was shown as `c2 in4096 out32`, `c2 in128 out512`, `c64 in128 out32` with the result's 61.21 tok/s
    (the import refuses a file named so). Now skipped, naming the result's figure; the SGLang result
    alike."""
    src = tmp_path / "serve-128-32-c2.json"  # the runner's name: the lengths it was asked
    src.write_text((ROOT / "tests" / "data" / "vllm-0.16.0-serve.json").read_text())
    edits = {
        "n_prompt 4096 is not its result's prompt length": lambda r: r.update(n_prompt=4096),
        "n_gen 512 is not what its served block asked": lambda r: r.update(n_gen=512),
        "concurrency 64 is not its result's max_concurrency 2": lambda r: r["engine"].update(concurrency=64),
    }
    for i, (said, edit) in enumerate(edits.items()):
        tmp = matrix_project(tmp_path / str(i))
        import_rows(tmp, src, "vl")
        (cell,), _ = _report(tmp)
        assert cell["avg_ts"] == 61.21
        edit_stored(tmp, edit)
        cells, err = _report(tmp)
        assert not cells and said in err, (cells, err[-600:])
    tmp = matrix_project(tmp_path / "sg")
    _sglang_import(tmp)
    edit_stored(tmp, lambda r: r.update(n_prompt=4096))
    cells, err = _report(tmp)
    assert not cells and "total_input_tokens 16384 over 32 completed requests" in err, err[-600:]


HOSTILE = "x` <img src=x onerror=alert(1)> ![t](https:evil.example?x) `"


def _html(markdown: str) -> str:
    """The page a markdown viewer makes of `markdown` (CommonMark, markdown-it-py: rich's dependency)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(markdown)


def test_an_exported_readme_holds_no_markup_from_a_model_name(tmp_path):
    """Before: an imported row's model file `x` <img src=x onerror=alert(1)> ![t](https:...) `.gguf`
    closed the README's `...` code span: the page a customer's repository shows held a live <img> tag
    and an image loaded from the file's author's server. Now every name is one code span (a fence
    longer than its backticks) and the notes are escaped (md_line)."""
    tmp = matrix_project(tmp_path)
    row = h200_rows("alone.jsonl")[0]
    row["model_filename"] = f"/tmp/w/{HOSTILE}.gguf"
    import_rows(tmp, [row], "h200")
    run_id = json.loads(next((tmp / "r").glob("*/bench.jsonl")).read_text().splitlines()[0])["run_id"]
    page = _html(_exported_readme(tmp, run_id))
    assert "<img" not in page and 'src="https:evil' not in page, page
    assert "<code>x` &lt;img src=x onerror=alert(1)&gt; ![t](https:evil.example?x) `.gguf</code>" in page, (
        page
    )


def test_the_markdown_report_notes_hold_no_markup_from_an_image_name(tmp_path):
    """Before: `toolkit report --format github` escaped names in its tables and provenance (md_text)
    but not in the notes under them: a stored image named `x<img ...>![t](https:...)` put a live tag
    and a remote image into the roofline note of the page."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl")[:1], "h200")
    edit_stored(
        tmp, lambda r: r["image"].update(name="x<img src=x onerror=alert(1)>![t](https:evil.example)")
    )
    res = tk(tmp, "report", "--results", "r", "--format", "github")
    assert res.returncode == 0, res.stderr
    assert "no roofline" in res.stdout, res.stdout[-800:]
    page = _html(res.stdout)
    assert "<img" not in page and "evil.example" in page, page
