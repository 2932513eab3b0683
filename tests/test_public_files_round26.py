"""Round 26 of reading real, public result files (tests/data/public/README.md names each source, the
`r26-` files): the shapes they take that the import accepted wrongly or refused for a wrong reason.

- another program's CSV summary that borrows llama-bench's field names (`n_prompt, n_gen, n_batch,
  n_ubatch, avg_ts, stddev_ts, build_commit, gpu_info` beside `model, series, starting_depth`) was
  read as llama-bench -o csv: 90 results, their depth (`starting_depth`) lost, the model `unknown`;
  now refused naming the columns no llama-bench prints (llama_bench/readers.not_llama_csv);
- a capture of a llama-bench run that failed (a Vulkan device lost, an RPC server not reached or
  crashed, a HIP exception after the table's header) was refused as if it were no llama-bench output
  ("expected llama-bench output: ...") or as a malformed table ("it needs a header ..."): now the
  line that says why the run failed is named (llama_bench/failed_run.why_no_rows);
- a markdown table with llama-bench's model and test columns but two builds' numbers side by side
  (`HIP`, `WMMA`, `Δ%`, no `t/s`) was said to have "no result rows": now it is said to be results set
  side by side, not llama-bench -o md output.

The files read right before this round are held here too (model, test, depth, batch sizes, backend,
GPU, mean and stddev, build, rows), so that a fix of one shape does not change how another reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import cells, imp, refused


def test_another_programs_csv_with_llama_bench_field_names_is_refused(tmp_path: Path) -> None:
    said = refused(tmp_path, "r26-curve-summary-csv-not-llama-bench.csv")
    assert "not llama-bench -o csv: no model_type or model_filename column" in said, said
    assert "(model, toolbox, series, starting_depth, ending_context)" in said, said


def test_a_failed_runs_log_names_what_stopped_it(tmp_path: Path) -> None:
    cases = {
        "r26-vulkan-device-lost-no-table.log": 'line 21: "terminate called after throwing an instance of '
        "'vk::DeviceLostError'\"",
        "r26-vulkan-rpc-connect-failed.log": "line 3: 'Failed to connect to 10.0.0.1:50052'",
        "r26-vulkan-rpc-server-crashed-header-no-rows.log": "line 5: '/opt/llama.cpp/ggml/src/ggml-rpc/"
        "ggml-rpc.cpp:724: Remote RPC server crashed",
        "r26-rocm-hsa-exception-header-no-rows.log": "aborting with error : HSA_STATUS_ERROR_EXCEPTION",
    }
    for name, line in cases.items():
        said = refused(tmp_path / name, name)
        assert "the llama-bench run failed before it printed a result" in said, said
        assert line in said, said
        assert "expected llama-bench output" not in said and "it needs a header" not in said, said
    said = refused(tmp_path / "hdr", "r26-rocm-hsa-exception-header-no-rows.log")
    assert "its table's header (line 6) has no row" in said, said


def test_a_table_of_two_builds_side_by_side_is_said_to_be_one(tmp_path: Path) -> None:
    said = refused(tmp_path, "r26-hip-vs-wmma-comparison-readme.md")
    assert "the markdown table at line 50 has llama-bench's model and test columns but no t/s column" in said
    assert "(its columns: model, size, params, test, hip, wmma, δ%)" in said, said
    assert "has no result rows" not in said


@pytest.mark.parametrize("name", ["r26-rocm-device-lines-only.log", "r26-vulkan-stderr-device-line-only.log"])
def test_a_log_of_device_lines_alone_is_refused_as_before(tmp_path: Path, name: str) -> None:
    said = refused(tmp_path, name)
    assert "no llama-bench result rows found (expected llama-bench output" in said, said


def test_another_programs_json_is_refused_as_before(tmp_path: Path) -> None:
    said = refused(tmp_path, "r26-mtp-bench-json-not-vllm.json")
    assert (
        "not a llama-bench row: none of its keys (model, gguf, toolbox, mode, spec_flags, timestamp" in said
    )


def test_the_files_read_right_are_held(tmp_path: Path) -> None:
    recs = imp(tmp_path / "a", "r26-rocm-gfx1151-depth-mmap-b9187.log")
    assert cells(recs) == [
        (0, 32, 32768, 2048, 2048, 21.96, 0.02),
        (2048, 0, 32768, 2048, 2048, 95.82, 0.14),
    ]
    assert {(r.model.name, r.image.backend, r.build_commit) for r in recs} == {
        ("deepseek2 30B.A3B Q8_0", "rocm", "0253fb21f")
    }
    recs = imp(tmp_path / "b", "r26-rocm-b10217-load-mode-tg-depths.jsonl")
    assert [c[2] for c in cells(recs)] == list(range(0, 65537, 8192))
    assert cells(recs)[0] == (0, 128, 0, 2048, 512, 6.564042, 0.003198)
    recs = imp(tmp_path / "c", "r26-vulkan-b10269-unknown-params-pp-depths.jsonl")
    assert len(recs) == 9 and {r.image.backend for r in recs} == {"vulkan"}
    assert cells(recs)[0] == (2048, 0, 0, 2048, 256, 106.986761, 0.173429)
    recs = imp(tmp_path / "d", "r26-rocm714-ubatch-sweep.jsonl")
    assert [c[4] for c in cells(recs)] == [256, 512, 1024, 2048]
    (rec,) = imp(tmp_path / "e", "r26-rocm-b6865-flash-attn-bool.jsonl")
    assert (rec.n_gen, rec.avg_ts, rec.build_commit) == (128, 192.744119, "1c1409e1")
    recs = imp(tmp_path / "f", "r26-rocm-rpc-glm355b-b7085.log")
    assert cells(recs) == [(0, 128, 0, 2048, 512, 8.73, 0.01), (512, 0, 0, 2048, 512, 42.96, 0.13)]
    assert {(r.model.name, r.image.backend) for r in recs} == {("glm4moe 355B.A32B Q4_K - Medium", "rocm")}
