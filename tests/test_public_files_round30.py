"""Round 30 of reading real, public result files (tests/data/public/README.md names each source, the
`r30-` files): two Radeon AI PRO R9700 (gfx1201) on ROCm and on Vulkan RADV in one markdown report
(`--n-cpu-moe 999`, `-sm none,layer,row`, a `fitt` column, shell prompts before each run, a ROCm load
that failed before a Vulkan run that printed nothing), an n_cpu_moe x n_ubatch sweep report, RX 9070 XT
(RADV GFX1201 under its generic name, and a table alone), RX 6700 XT on ROCm indented under a
report's headings, OpenCL, Vulkan and ROCm rows in one table, a Strix Halo AMDVLK run, a hand-cut
-o json; and what is not llama-bench's: llama-benchy's depth table, compare-llama-bench.py's table, a
vulkan-vs-llamafile table, `vllm bench serve`'s printed summary in a markdown report, benchmark_throughput.py's
printed line in a tutorial, and two scripts'
own summaries of vLLM and SGLang runs.

- a run with part of the weights on the CPU (`--n-cpu-moe 999`, `-ot exps=CPU`) was held against the
  GPU's peak ("9% of BW", flagged bw-below-floor): now it gets no roofline, saying why, and keeps its
  ceiling (roofline.weights_on_host); an image whose rows lack a roofline for several reasons says each
  (table_text.roof_notes);
- an n_cpu_moe sweep's rows were ordered as text (0, 16, 32, 4, 64, 8): numbers now sort by value
  (tables._value_order);
- `vllm bench serve`'s printed summary and `vllm bench throughput`'s printed line were refused "expected
  llama-bench output": now named, with the result JSON to import (failed_run._OTHER);
- a script's own summary JSON naming vLLM (`vllm_version`) or SGLang (`"engine": "SGLang"`) was refused
  "none of its keys is a llama-bench field" only: now the engine it names and what to import instead
  (llama_bench/check.summary).

The files read right or refused right before this round are held here too.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.public import cells, imp, imported, refused
from toolkit.analysis import roofline, table_text, tables
from toolkit.results.records import ResultStore


def test_a_run_with_experts_on_the_cpu_gets_no_gpu_roofline(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r30-rocm-vulkan-2x-r9700-n-cpu-moe-sm-sections.md")
    assert len(recs) == 24 and {r.raw["n_cpu_moe"] for r in recs} == {999}
    one_card = [r for r in recs if r.raw.get("split_mode") == "none"]
    assert len(one_card) == 8
    for r in one_card:
        a = roofline.assess(r)
        assert a.roofline is None, (r.test, a.roofline)
        assert a.note.startswith("n_cpu_moe 999: the experts of the first 999 layers"), a.note
        assert roofline.ceiling(r) is not None  # no run is faster than every weight on the GPU
    said = table_text.roof_notes(tables.tables(recs))
    assert said and all("no roofline: n_cpu_moe 999" in s for s in said), said
    # the same rows without the offload (n_cpu_moe 0) are held to the card's peak, as before
    r = one_card[0]
    assert roofline.assess(r.model_copy(update={"raw": {**r.raw, "n_cpu_moe": 0}})).roofline is not None
    # tensors placed on the CPU by -ot (llama-bench prints `pattern=CPU`, `;` between overrides)
    ot = r.model_copy(
        update={"raw": {**r.raw, "n_cpu_moe": 0, "tensor_buft_overrides": r"\.ffn_.*_exps\.=CPU"}}
    )
    assert roofline.assess(ot).roofline is None and "tensor_buft_overrides" in roofline.assess(ot).note
    gpu = r.model_copy(update={"raw": {**r.raw, "n_cpu_moe": 0, "tensor_buft_overrides": "none"}})
    assert roofline.assess(gpu).roofline is not None


def test_an_images_several_reasons_for_no_roofline_are_each_said(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r30-opencl-vulkan-rocm-one-table-pr2059.md")
    said = [s for s in table_text.roof_notes(tables.tables(recs)) if s.startswith("pub.ROCm@")]
    assert len(said) == 2, said
    assert said[0].endswith("no roofline for some of its rows: no layers on the GPU (-ngl 0)"), said
    assert said[1].endswith(
        "no roofline for some of its rows: the record names no GPU (empty gpu_info, no device list)"
    ), said


def test_an_n_cpu_moe_sweep_is_ordered_by_value(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r30-n-cpu-moe-ubatch-sweep-report.md")
    assert len(recs) == 108
    (decode,) = [t for t in tables.tables(recs) if t.axis == "decode"]
    moe = [row.ids["n_cpu_moe"] for row in decode.rows if row.test.startswith("tg256")]
    assert moe[:6] == ["0", "4", "8", "16", "32", "64"], moe


def test_a_serving_benchmarks_printed_summary_is_named(tmp_path: Path) -> None:
    said = refused(tmp_path, "r30-vllm-serve-printed-summary-md-not-json.md")
    assert "the file is a serving benchmark's printed summary (`vllm bench serve`" in said, said
    assert "line 17: '============ Serving Benchmark Result ============'" in said, said
    assert "run it again with --save-result (SGLang: --output-file) and import that JSON" in said, said
    assert "expected llama-bench output" not in said, said
    said = refused(tmp_path / "t", "r30-vllm-throughput-printed-line-not-json.md")
    assert "the file is `vllm bench throughput`'s (benchmark_throughput.py's) printed line" in said, said
    assert "line 18: 'Throughput: 9.14 requests/s, 1754.43 tokens/s'" in said, said
    assert "run it again with --output-json and import that JSON" in said, said


def test_a_scripts_own_summary_naming_vllm_or_sglang_is_named(tmp_path: Path) -> None:
    said = refused(tmp_path / "a", "r30-sglang-summary-method-bench-serving-not-its-output.json")
    assert "it names SGLang ('engine': 'SGLang') but has none of the keys of SGLang's own result" in said, (
        said
    )
    assert "import the benchmark's own result JSON (bench_serving --output-file)" in said, said
    said = refused(tmp_path / "b", "r30-custom-serve-json-vllm-version-not-bench.json")
    assert "it names vLLM ('vllm_version') but has none of the keys of vLLM's own result" in said, said
    assert "vllm bench serve --save-result" in said, said


def test_the_r9700_reports_read_right(tmp_path: Path) -> None:
    recs = imp(tmp_path / "a", "r30-rocm-vulkan-2x-r9700-shell-prompts-three-quants.md")
    assert len(recs) == 72
    assert {r.image.backend for r in recs} == {"rocm", "vulkan"}
    assert {r.n_batch for r in recs} == {2048} and {r.n_ubatch for r in recs} == {
        512
    }  # build 8797's defaults
    assert {r.raw["split_mode"] for r in recs} == {"none", "layer", "row"}
    recs = imp(tmp_path / "b", "r30-rocm-vulkan-2x-r9700-fitt-column.md")
    assert {(r.raw["fit_target"], r.raw["n_cpu_moe"], r.n_ubatch) for r in recs} == {(512, 999, 4096)}
    assert (512, 0, 0, 4096, 4096, 315.77, 366.62) in cells(recs)  # its stddev above its mean, as printed
    said = refused(tmp_path / "c", "r30-rocm-load-failed-then-vulkan-devices-only.md")
    assert "line 11: \"main: error: failed to load model 'models/MiniMaxAI_MiniMax-M2.7-IQ4_XS" in said, said


def test_the_other_files_read_or_refused_right(tmp_path: Path) -> None:
    assert cells(imp(tmp_path / "a", "r30-vulkan-rx9070xt-generic-radv-gfx1201-issue25.md")) == [
        (512, 0, 0, 2048, 512, 2086.07, 0.11),
        (4096, 0, 0, 2048, 512, 1784.33, 5.72),
    ]
    assert len(imp(tmp_path / "b", "r30-vulkan-rx9070xt-table-only-rpi-issue766.md")) == 4
    assert cells(imp(tmp_path / "c", "r30-rocm-gfx1031-indented-runs-issue26702.txt")) == [
        (0, 512, 0, 1024, 1024, 34.61, 0.12),
        (8192, 0, 0, 1024, 1024, 653.37, 0.59),
    ]
    recs = imp(tmp_path / "d", "r30-opencl-vulkan-rocm-one-table-pr2059.md")
    assert sorted({r.backends for r in recs}) == ["OpenCL", "ROCm", "Vulkan"] and len(recs) == 11
    assert len(imp(tmp_path / "e", "r30-vulkan-amdvlk-8060s-qwen3next-pr16095.md")) == 2
    res = imported(tmp_path / "f", "r30-json-cut-down-rx6800xt-radv-b11146.json")
    recs = ResultStore(tmp_path / "f" / "results").results()
    assert res and cells(recs) == [
        (0, 16, 0, None, None, 52.5, 0.3),
        (64, 0, 0, None, None, 1092.364058, 0.0),
    ]
    assert "llama-benchy's `peak t/s`" in refused(
        tmp_path / "g", "r30-llama-benchy-depth-ctx-pp-not-llama-bench.md"
    )
    for name in (
        "r30-compare-llama-bench-ub-ladder-depth-65536.md",
        "r30-vulkan-vs-llamafile-columns-issue438.md",
    ):
        said = refused(tmp_path / name, name)
        assert "has llama-bench's model and test columns but no t/s column" in said, said


def test_a_table_another_tool_wrote_is_refused_for_one_reason_once(tmp_path: Path) -> None:
    """llama-benchy's 26 rows share one reason (its header's `peak t/s`): said once with the rows it
    refused, not three times over 'line 21: ...; line 22: ...; line 23: ...; and 23 more'."""
    said = refused(tmp_path, "r30-llama-benchy-depth-ctx-pp-not-llama-bench.md")
    assert "26 refused:\n  line 21: the table's header (line 19): column 4 'peak t/s'" in said, said
    assert said.endswith("(26 rows of this, lines 21 to 46)"), said
    assert said.count("'peak t/s' is not a llama-bench column title") == 1 and "more" not in said
