"""Round 27 of reading real, public result files (tests/data/public/README.md names each source, the
`r27-` files): AMD gfx1201 (2x Radeon AI PRO R9700, ROCm and Vulkan), gfx90a (MI210) and gfx1151
hosts, llama-bench -o json (a whole array, one cut short by a stopped run, one in a markdown report
under another table), -o csv blocks in a markdown file, vLLM result files of a wrapper script and
vLLM benchmark_serving.py results of May 2025 (before 0.9) appended as JSON lines.

- a wrapper's JSON that keeps `vllm bench serve`'s printed summary in a string (`{"success": true,
  "raw_output": "... Serving Benchmark Result ..."}`) was refused as "none of its keys is a
  llama-bench field" only: now the key and what it holds are named, with what to import instead
  (llama_bench/check._printed, from check.not_a_row).

The files read right before this round are held here too (model, test, depth, batch sizes, backend,
mean and stddev, build, rows), so that a later fix of one shape does not change how another reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import cells, imp, refused


def test_a_wrappers_json_holding_vllms_printed_summary_says_so(tmp_path: Path) -> None:
    said = refused(tmp_path, "r27-r9700-vllm-serve-wrapper_qps1.0_latency.json")
    assert "none of its keys (success, raw_output) is a llama-bench field" in said, said
    assert "its 'raw_output' holds a serving benchmark's printed summary" in said, said
    assert "save the run with --save-result" in said, said


def test_another_programs_json_without_a_printout_is_refused_as_before(tmp_path: Path) -> None:
    said = refused(tmp_path, "r27-r9700-llama-server-depth-bench-not-llama-bench.json")
    assert "none of its keys (label, url, model, time, runs) is a llama-bench field" in said, said


def test_a_throughput_result_without_its_lengths_is_refused_as_before(tmp_path: Path) -> None:
    said = refused(tmp_path, "r27-r9700-vllm-throughput_tp1_throughput.json")
    assert "a `vllm bench throughput` result does not say the lengths it was asked for" in said, said


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("r27-rocm-2x-r9700-context-failed.log", "main: error: failed to create context with model"),
        ("r27-rocm-2x-r9700-rocm-error.log", "ggml-cuda.cu:94: ROCm error"),
        ("r27-vulkan-amdvlk-2x-r9700-load-failed.log", "main: error: failed to load model"),
    ],
)
def test_failed_r9700_runs_name_their_cause(tmp_path: Path, name: str, line: str) -> None:
    said = refused(tmp_path, name)
    assert "the llama-bench run failed before it printed a result" in said, said
    assert line in said, said


def test_the_files_read_right_are_held(tmp_path: Path) -> None:
    recs = imp(tmp_path / "a", "r27-rocm-2x-r9700-gfx1201-dual.log")
    assert cells(recs) == [(0, 128, 0, 2048, 512, 6.93, 0.01), (512, 0, 0, 2048, 512, 235.6, 0.08)]
    assert {(r.model.name, r.image.backend, r.build_commit) for r in recs} == {
        ("llama Q3_K - Small", "rocm", "2aa45ef9e")  # no `?B` (fix51a)
    }
    recs = imp(tmp_path / "b", "r27-vulkan-r9700-depth-32768.log")
    assert cells(recs) == [(0, 32, 32768, 2048, 512, 82.04, 0), (2048, 0, 32768, 2048, 512, 921.86, 0)]
    assert {r.image.backend for r in recs} == {"vulkan"}
    recs = imp(tmp_path / "c", "r27-mi210-rocm-b10097-stopped-json-array.json")
    assert cells(recs) == [
        (2048, 0, 0, 2048, 512, 342.056712, 0),
        (8192, 0, 0, 2048, 512, 135.559948, 0),
        (16384, 0, 0, 2048, 512, 76.519188, 0),
    ]
    assert {(r.image.backend, r.build_commit) for r in recs} == {("rocm", "6a8dd5ea6")}
    for name in ("r27-mi210-rocm-b10097-stdout.log", "r27-mi210-summary-md-json-rows-fenced.md"):
        recs = imp(tmp_path / name, name)
        assert cells(recs) == [(32768, 0, 0, 1024, 256, 489.312218, 0)], name
    recs = imp(tmp_path / "d", "r27-vulkan-gfx1151-csv-blocks-in-md.md")
    assert len(recs) == 8 and {r.image.backend for r in recs} == {"vulkan"}
    assert len({r.model.name for r in recs}) == 4
    assert (512, 0, 0, 512, 512, 1181.976054, 8.497062) in cells(recs)
    assert (0, 128, 0, 512, 512, 76.202832, 0.094647) in cells(recs)


def test_vllm_benchmark_serving_results_appended_as_json_lines(tmp_path: Path) -> None:
    """benchmark_serving.py of May 2025 (before vLLM 0.9), --save-result with --metadata, nine runs
    appended one per line; the runs did not ignore EOS, so each generated about half the tokens asked."""
    name = "r27-vllm-0.8-benchmark-serving-appended-results.json"
    said = refused(tmp_path / "a", name)
    assert "a `vllm bench serve` result does not say the lengths it was asked for: give --output-len" in said
    recs = imp(tmp_path / "b", name, output_len=500)
    assert len(recs) == 9 and {(r.n_prompt, r.n_gen, r.status) for r in recs} == {(999, 500, "failed")}
    assert sorted(str(r.engine["request_rate"]) for r in recs) == ["10.0"] * 3 + ["30.0"] * 3 + ["inf"] * 3
    assert "generated 80945 of 150000 requested tokens (300 requests x 500)" in (recs[0].error or "")
