"""Round 25 of reading real, public result files (tests/data/public/README.md names each source, the
`r25-` files): the shapes they take that the import refused wrongly or refused for a wrong reason.

- an SGLang `bench_serving` result (it began as vLLM's benchmark_serving and writes the same serve
  keys) was taken for a `vllm bench serve` result and refused for lengths it says itself
  (`random_input_len`, `random_output_len` at random_range_ratio 1): now read as SGLang's
  (`sglang-bench-serving`, runner sglang) with those lengths (results/vllm_import.py);
- its --output-file holds one JSON line per run: such a file was read as llama-bench -o jsonl and
  refused "no n_prompt" line by line; now each line is a run, and runs whose requests drew their
  lengths at random (random_range_ratio below 1) are refused saying so;
- another program's JSON lines around llama-bench rows (a wrapper's `bench_raw`) were refused
  "no n_prompt": now "not a llama-bench row", naming the key that holds llama-bench's row
  (llama_bench/check.check_row);
- a table of another tool (llama-benchy's `peak t/s`, `ttfr (ms)`) or with a column added by hand
  (`llama.cpp`) was refused with "retype the title": now it is said to be another tool's table
  (llama_bench/md_titles.problem).

The files read right before this round are held here too (model, test, depth, batch sizes, backend,
GPU, mean and stddev, build, rows), so that a fix of one shape does not change how another reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import PUBLIC, first_read, imp, refused
from toolkit.results import vllm_import
from toolkit.runtimes.sglang import args as sglang_args


def test_an_sglang_bench_serving_result_is_read_as_sglangs_with_the_lengths_it_says(tmp_path: Path) -> None:
    (rec,) = imp(tmp_path, "r25-sglang-bench-serving-deepseek-dp-mla.jsonl")
    assert (rec.runner, rec.method, rec.status) == ("sglang", sglang_args.METHOD_SERVE, "ok")
    assert (rec.test, rec.n_prompt, rec.n_gen, rec.axis) == ("serve pp1+tg512", 1, 512, "served")
    assert rec.avg_ts == 12412.394674113431  # its output_throughput: 5120000 tokens / 412.49 s
    assert (rec.engine.get("num_prompts"), rec.engine.get("request_rate")) == (10000, "inf")
    assert (rec.model_extra or {})["imported"]["format"] == "sglang-bench-serving"
    assert vllm_import.SGLANG_SERVE == sglang_args.METHOD_SERVE


def test_sglang_runs_whose_requests_drew_random_lengths_are_refused_saying_so(tmp_path: Path) -> None:
    for name in (
        "r25-sglang-bench-serving-llama70b-online.jsonl",
        "r25-sglang-bench-serving-llama70b-offline.jsonl",
    ):
        said = refused(tmp_path / name, name)
        assert f"{name}:1: SGLang bench_serving drew each request's lengths at random" in said, said
        assert "random_range_ratio 0: input 1..1024, output 1..1024 tokens" in said, said
        assert "n_prompt" not in said  # not read as llama-bench rows


def test_an_sglang_output_file_is_read_one_run_per_line() -> None:
    f = vllm_import.sniff(PUBLIC / "r25-sglang-bench-serving-llama70b-online.jsonl")
    assert f is not None and f.kind == "serve"
    runs = vllm_import.each_run(f)
    assert [(r.line, r.tool, r.result["request_rate"]) for r in runs] == [
        (1, "sglang", 1.0),
        (2, "sglang", 2.0),
        (3, "sglang", 4.0),
        (4, "sglang", 8.0),
        (5, "sglang", 16.0),
        (6, "sglang", 4.0),
        (7, "sglang", 8.0),
    ]
    # vLLM's own results stay vLLM's; a llama-bench -o jsonl file is no served result
    vllm = vllm_import.sniff(PUBLIC / "openai-1.0qps-Qwen3-VL-8B-Instruct-20260722-041843.json")
    assert vllm is not None and vllm.tool == "vllm" and vllm_import.each_run(vllm) == [vllm]
    assert vllm_import.sniff(PUBLIC / "r25-rocm-quick-test-device-lines.jsonl") is None


def test_another_programs_records_around_llama_bench_rows_are_named(tmp_path: Path) -> None:
    said = refused(tmp_path, "r25-strixhalo-wrapper-results.jsonl")
    assert "line 1: not a llama-bench row: none of its keys (start_time, end_time, duration_s" in said, said
    assert "its 'bench_raw' holds a llama-bench row: import llama-bench's own output" in said, said
    assert "no n_prompt" not in said


@pytest.mark.parametrize(
    ("name", "column"),
    [
        ("r25-llama-benchy-not-llama-bench.md", "column 4 'peak t/s'"),  # llama-benchy's own table
        ("r25-gfx906-two-rocm-columns-readme.md", "column 2 'llama.cpp'"),  # columns added by hand
    ],
)
def test_another_tools_table_is_said_to_be_one_not_a_title_to_retype(
    tmp_path: Path, name: str, column: str
) -> None:
    said = refused(tmp_path, name)
    assert f"{column} is not a llama-bench column title" in said, said
    assert "a table another tool wrote" in said and "retype" not in said, said


# the files read right before this round, held as they read: (records, first record's test,
# n_prompt, n_gen, n_depth, n_batch, n_ubatch, backend, gpu_info, avg_ts, stddev_ts, build_commit)
READ = {
    "r25-rocm-quick-test-device-lines.jsonl": (
        6,
        "pp512",
        512,
        0,
        0,
        2048,
        512,
        "rocm",
        "Radeon 8060S Graphics",
        5007.643797,
        None,
        "1c1409e1",
    ),
    "r25-rocwmma-gpt-oss-20b-fa.jsonl": (
        10,
        "pp512",
        512,
        0,
        0,
        2048,
        512,
        "rocm",
        "Radeon 8060S Graphics",
        1513.790461,
        None,
        "1c1409e1",
    ),
    "r25-first-llama-bench-pr2626.md": (
        2,
        "pp512",
        512,
        0,
        0,
        None,
        None,
        "cuda",
        None,
        2242.06,
        24.26,
        None,
    ),
    "r25-cuda-rpc-ngl0-pr12922.md": (2, "pp4096", 4096, 0, 0, 2048, 512, "cuda", None, 62.5, 0.09, None),
    "r25-windows-powershell-cuda-pr15952.txt": (
        2,
        "pp512",
        512,
        0,
        0,
        2048,
        512,
        "cuda",
        "NVIDIA GeForce RTX 5070",
        378.46,
        1.43,
        "08a216474",
    ),
    "r25-ik-rows-then-mainline-issue1258.txt": (
        2,
        "pp512",
        512,
        0,
        0,
        2048,
        512,
        "cpu",
        None,
        50.72,
        0.31,
        "22cae8321",
    ),
    "r25-p40-numa-warning-pr7314.md": (
        2,
        "pp4096",
        4096,
        0,
        0,
        64,
        512,
        "cuda",
        "Tesla P40",
        388.86,
        None,  # `± 0.00` of a table: unknown (round 27), was 0.0
        None,
    ),
    "r25-nkvo-b1786-pr4812.md": (
        4,
        "pp512",
        512,
        0,
        0,
        None,
        None,
        "cuda",
        "NVIDIA GeForce RTX 3090 Ti",
        4035.47,
        157.68,
        "32d9f7d9",
    ),
    "r25-m5-blas-mtl-r1-issue25547.md": (
        2,
        "pp256",
        256,
        0,
        0,
        None,
        None,
        "metal",
        None,
        597.06,
        None,
        None,
    ),  # `± 0.00`: unknown
}


@pytest.mark.parametrize("name", sorted(READ))
def test_the_files_read_right_read_as_before(tmp_path: Path, name: str) -> None:
    got = first_read(imp(tmp_path, name))
    assert got == READ[name]


def test_depth_rows_of_a_jsonl_after_rocm_device_lines(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r25-rocm-quick-test-device-lines.jsonl")
    assert [(r.test, r.n_depth, len(r.samples_ts)) for r in recs][-2:] == [
        ("pp512 @ d4096", 4096, 1),
        ("tg128 @ d4096", 4096, 1),
    ]


def test_three_builds_in_one_file_stay_three_images(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r25-strixhalo-gpt-oss-120b-raw_runs.jsonl")
    assert len(recs) == 317
    assert sorted({(r.build_commit, r.backends, r.image.backend) for r in recs}) == [
        ("6c7e9a54", "Vulkan,RPC", "vulkan"),
        ("9515c613", "ROCm", "rocm"),
        ("9515c613", "Vulkan", "vulkan"),
    ]
    assert len({r.image.digest for r in recs}) == 3


def test_tables_of_separate_runs_of_one_setup_are_repetitions_flagged_when_they_disagree(
    tmp_path: Path,
) -> None:
    """GPU 0 alone and GPU 1 alone print the same device line and table: nothing in the file but its
    headings tells them apart, so they are one cell's repetitions, flagged runs-disagree (the import's
    rule for rows that measure the same test); the two-GPU table is its own image."""
    recs = imp(tmp_path, "r25-vulkan-7900xtx-gpu0-gpu1-dual.txt")
    assert len(recs) == 12 and len({r.image.digest for r in recs}) == 2
    two = [r for r in recs if r.gpu_info and r.gpu_info.count("7900 XTX") == 2]
    assert [r.avg_ts for r in two] == [1898.68, 85.3, 2043.45, 105.0]


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("r25-vllm-throughput-minimax-tp2_throughput.json", "does not say the lengths it was asked for"),
        ("r25-pr2626-review-n_prompt-n_gen-columns.md", "needs a header with model, test and t/s columns"),
        ("r25-context-bench-csv-not-llama-bench.csv", "no llama-bench result rows found"),
        ("r25-backend-comparison-summary-table.md", "needs a header with model, test and t/s columns"),
    ],
)
def test_the_files_refused_right_are_refused_as_before(tmp_path: Path, name: str, said: str) -> None:
    assert said in refused(tmp_path, name)


def test_the_host_line_counts_the_gpus_of_a_run_on_one_card_and_a_run_on_two(tmp_path: Path) -> None:
    """One 7900 XTX alone and two together (llama-bench's gpu_info `X, X`): the report's host line read
    "GPU X, X, X" (one card or three?); now each row's set: `2x X / X`. A description's own comma
    (llvmpipe (LLVM 19.1.7, 256 bits)) is no second device."""
    from toolkit.analysis.provenance import _gpu_set

    root = tmp_path / "results"
    imp(tmp_path, "r25-vulkan-7900xtx-gpu0-gpu1-dual.txt")
    from click.testing import CliRunner

    from toolkit.cli.main import cli

    res = CliRunner().invoke(cli, ["report", "--results", str(root)])
    assert res.exit_code == 0, res.output
    host = next(ln for ln in res.output.splitlines() if ln.startswith("- host:"))
    x = "AMD Radeon RX 7900 XTX (RADV NAVI31)"
    assert f"GPU 2x {x} / {x};" in host, host
    assert _gpu_set("llvmpipe (LLVM 19.1.7, 256 bits)") == "llvmpipe (LLVM 19.1.7, 256 bits)"
    assert _gpu_set("NVIDIA H200, NVIDIA H200, NVIDIA L4") == "2x NVIDIA H200 + NVIDIA L4"
