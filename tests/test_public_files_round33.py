"""Round 33 of reading real, public result files (tests/data/public/README.md names each source, the
`r33-` files): Radeon AI PRO R9700 (gfx1201) on Vulkan and ROCm in one report with one-card and two-card
passes and a pp131072 run, Strix Halo (Radeon 8060S) on ROCm with the command and the device line on one
line, on ROCm,RPC over a cluster and on Vulkan at n_batch 8192, RPC devices in a `dev` column
(`RPC0/RPC1`), Radeon PRO W7900 at -ngl -1; and what is not llama-bench's: an A/B table set out by hand,
a ubatch pivot, a depth summary in German, llama-server's timings, a before/after table, a box-drawn
report of another benchmark, a sensor log CSV and two scripts' own summary JSON.

- a markdown table without llama-bench's model, test and t/s columns was refused "a markdown table ...
  has no result rows: it needs a header with model, test and t/s columns" only: now its columns are named
  and what it is (figures set out by hand where it names tests such as pp512, else another kind of table)
  (llama_bench/other_tables.md_table);
- a table drawn with box-drawing characters and a CSV of other columns were refused "expected llama-bench
  output" only: now named, with their columns (other_tables.box_table, csv_table);
- a script's own summary JSON naming llama.cpp (`"backend": "llama.cpp-vulkan"`, `llamacpp_version`) said
  only "none of its keys is a llama-bench field": now the engine it names and what to import instead
  (llama_bench/check.summary).

The files read right or refused right before this round are held here too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import PUBLIC, first_read, imp, refused
from toolkit.results import importer
from toolkit.results.records import ResultStore

HAND_TABLES = {
    "r33-ab-control-candidate-table-not-llama-bench-pr200.md": (
        "the markdown table at line 7 is not llama-bench -o md output",
        "its columns are Workload, Control (t/s), Candidate (t/s), Gain",
        "it names llama-bench tests ('pp32') but its figures are set out by hand or by a script",
    ),
    "r33-ubatch-pivot-table-r9700-not-llama-bench.md": (
        "the markdown table at line 6 is not llama-bench -o md output",
        "its columns are Model, Cards, ub 256, ub 512, ub 1024, ub 2048, ub 4096, best vs 512",
        "another kind of table, not llama-bench's rows",
    ),
    "r33-depth-decode-summary-de-not-llama-bench.md": (
        "the markdown table at line 6 is not llama-bench -o md output",
        "its columns are Tiefe, UD-Q6_K_M (23,08 GB), UD-Q4_K_XL (17,55 GB), Q4 schneller",
        "another kind of table",
    ),
    "r33-llama-server-timings-table-not-bench-issue12.md": (
        "the markdown table at line 15 is not llama-bench -o md output",
        "its columns are Input tokens, Prefill, Decode",
        "another kind of table",
    ),
    "r25-backend-comparison-summary-table.md": (
        "needs a header with model, test and t/s columns",  # as round 25 holds it
        "its columns are Backend, Version, Build, pp512 (t/s), tg128 (t/s)",
        "it names llama-bench tests ('pp512 (t/s)')",
    ),
}


@pytest.mark.parametrize("name", sorted(HAND_TABLES))
def test_a_markdown_table_that_is_not_llama_benchs_is_named_with_its_columns(
    tmp_path: Path, name: str
) -> None:
    said = refused(tmp_path, name)
    for part in HAND_TABLES[name]:
        assert part in said, said
    assert "import llama-bench's own output" in said, said


def test_a_table_drawn_with_box_characters_is_named(tmp_path: Path) -> None:
    said = refused(tmp_path, "r33-rich-box-tables-llm-inference-bench-not-llama-bench.log")
    assert (
        "the file is another program's printed report: the table at line 7 is drawn with box-drawing" in said
    )
    assert "(its columns: Context, TTFT (s), Prefill (s), Prefill tok/s)" in said, said


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (
            "r33-thermal-telemetry-csv-not-llama-bench.csv",
            "the file is a CSV whose columns (epoch, device, edge_c, junction_c, memory_c, sclk_mhz, mclk_mhz, "
            "fan_rpm, ...) are none of llama-bench -o csv's (model_type, n_prompt, n_gen, avg_ts, ...): a "
            "sensor log (power, temperature, clocks), not a benchmark's result",
        ),
        (
            "r25-context-bench-csv-not-llama-bench.csv",
            "the file is a CSV whose columns (model_name, context_k, search_phase, decode_tps, prefill_tps, "
            "below_10, status, elapsed, ...) are none of llama-bench -o csv's",
        ),
    ],
)
def test_a_csv_of_other_columns_is_named(tmp_path: Path, name: str, said: str) -> None:
    got = refused(tmp_path, name)
    assert said in got, got
    assert "no llama-bench result rows found" in got  # as round 25 holds it


def test_a_scripts_summary_naming_llama_cpp_says_what_to_import(tmp_path: Path) -> None:
    said = refused(tmp_path, "r33-vulkan-bench-script-json-r9700-9060xt-not-bench.json")
    assert (
        "it names llama.cpp ('backend': 'llama.cpp-vulkan') but has none of the keys of llama.cpp's" in said
    )
    assert "a summary another script wrote of its runs" in said and "llama-bench -o jsonl" in said, said


READ = {
    "r33-rocm-vulkan-r9700-oc-tdp-dual-pcie-passes.md": (
        24,
        "pp1024",
        1024,
        0,
        0,
        2048,
        512,
        "vulkan",
        None,  # the Vulkan runs printed no device line
        889.16,
        1.01,
        None,  # the builds are named in the report's prose only
    ),
    "r33-cuda-rpc-dev-slash-devices-pr18626.md": (
        4,
        "pp4096",
        4096,
        0,
        0,
        2048,
        256,
        "cuda",
        None,
        7557.8,
        25.49,
        None,
    ),
    "r33-rocm-8060s-command-joined-device-line-lemonade-pr88.txt": (
        4,
        "pp512",
        512,
        0,
        0,
        2048,
        512,
        "rocm",
        "Radeon 8060S Graphics",
        617.84,
        4.64,
        None,
    ),
    "r33-rocm-r9700-pp131072-r1-thermal.log": (
        1,
        "pp131072",
        131072,
        0,
        0,
        2048,
        512,
        "rocm",
        "AMD Radeon AI PRO R9700",
        347.06,
        None,  # `± 0.00` of -r 1: unknown
        "a9883db8e",
    ),
    "r33-rocm-rpc-strixhalo-cluster-issue21.md": (
        3,
        "pp512",
        512,
        0,
        0,
        2048,
        512,
        "rocm",
        "Radeon 8060S Graphics",
        573.52,
        12.56,
        "c81de6e1",
    ),
    "r33-vulkan-8060s-n_batch-8192-r1-pr28494.md": (
        3,
        "pp512",
        512,
        0,
        0,
        8192,
        2048,
        "vulkan",
        "Radeon 8060S Graphics (RADV GFX1151)",
        333.34,
        None,
        None,
    ),
    "r33-vulkan-w7900-ngl-minus1-fa-width3-pr25051.md": (
        2,
        "pp512",
        512,
        0,
        0,
        2048,
        512,
        "vulkan",
        None,
        786.58,
        2.38,
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(READ))
def test_the_files_read_right_read_as_before(tmp_path: Path, name: str) -> None:
    got = first_read(imp(tmp_path, name))
    assert got == READ[name]


def test_one_card_and_two_card_passes_stay_apart(tmp_path: Path) -> None:
    """The two one-card passes (HIP_VISIBLE_DEVICES=0, =1) print the same device line and table: one cell's
    repetitions, flagged where they disagree (round 25's rule); the two-card pass is its own image, and
    the q8_0 KV cache table keeps its type_k."""
    recs = imp(tmp_path, "r33-rocm-vulkan-r9700-oc-tdp-dual-pcie-passes.md")
    two = [r for r in recs if r.gpu_info.count("R9700") == 2]
    assert sorted((r.test, r.avg_ts) for r in two) == [
        ("pp1024", 1265.7),
        ("pp32768", 1153.24),
        ("pp4096", 1604.7),
        ("tg128", 24.67),
    ]
    assert {r.raw["type_k"] for r in recs if r.image.backend == "vulkan"} == {"f16", "q8_0"}


def test_rpc_devices_of_a_dev_column_are_images_of_their_own(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r33-cuda-rpc-dev-slash-devices-pr18626.md")
    assert sorted((r.raw["devices"], r.avg_ts) for r in recs) == [
        ("RPC0", 7557.8),
        ("RPC0/RPC1", 9552.9),
        ("RPC0/RPC1/RPC2", 6542.86),
        ("RPC0/RPC1/RPC2/RPC3", 5007.86),
    ]
    assert len({r.image.digest for r in recs}) == 4


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (
            "r33-vllm-ab-depth-rows-script-json-not-bench.json",
            "none of its keys (tag, gen, rows) is a llama-bench",
        ),
        ("r33-before-after-diff-columns-rtx3090-pr21024.md", "results set side by side or rearranged"),
    ],
)
def test_the_files_refused_right_are_refused_as_before(tmp_path: Path, name: str, said: str) -> None:
    assert said in refused(tmp_path, name)


def test_a_set_whose_rows_name_no_gpu_is_named_so(tmp_path: Path) -> None:
    """The Vulkan runs printed no device line, the ROCm runs did: the Vulkan set was `pub.Vulkan-none`, which
    reads as a split mode (-sm none); now `pub.Vulkan-no-gpu_info` (import_read.set_names)."""
    names = {r.image.name for r in imp(tmp_path, "r33-rocm-vulkan-r9700-oc-tdp-dual-pcie-passes.md")}
    assert names == {
        "pub.Vulkan-no-gpu_info",
        "pub.ROCm-AMD-Radeon-AI-PRO-R9700",
        "pub.ROCm-2x-AMD-Radeon-AI-PRO-R9700",
    }, names


def test_the_toolkits_own_report_and_an_early_llama_bench_table_are_told_apart(tmp_path: Path) -> None:
    """The same rule does not call the toolkit's own report a table set out by hand (its image@digest
    columns: tests/data/h200-measure/report.md), nor an early llama-bench table of August 2023 (model,
    n_prompt, n_gen, t/s: no test column) another program's."""
    with pytest.raises(importer.BadInput) as err:
        importer.import_files(
            ResultStore(tmp_path / "a"), [PUBLIC.parent / "h200-measure" / "report.md"], label="pub"
        )
    said = str(err.value)
    assert "the toolkit's own report (`toolkit report --format github`: a column per image@digest)" in said
    assert "nothing to import" in said and "set out by hand" not in said, said
    said = refused(tmp_path / "b", "r25-pr2626-review-n_prompt-n_gen-columns.md")
    assert "a markdown table (-o md) at line 3 has no result rows" in said, said
    assert "not llama-bench -o md output" not in said, said


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param(["|a|", "|-|"] * (1 << 17), id="header-separator-pairs"),
        pytest.param(["|pp512|", "|-|", "| x |"] * (1 << 16), id="tables-with-rows"),
    ],
)
def test_the_tables_of_a_file_are_found_in_linear_time(lines: list[str]) -> None:
    """A megabyte of `|a|` / `|-|` lines: each pair a header and separator, each table's rows the rest of
    the file; read as a header again at every line, the rows were re-read for every table (quadratic:
    ~10^10 line reads). Each line is read once now. A bound far above the linear time (~0.3 s), so only
    the quadratic reading fails it."""
    import time

    from toolkit.runtimes.llama_bench import other_tables

    t = time.process_time()
    assert other_tables.md_table(lines) is not None
    assert time.process_time() - t < 20
