"""Round 51 of reading real, public result files (tests/data/public/README.md names each source, the
`r51-` files): a SYCL table whose `±` a paste re-read in another code page (`373.50 Â± 3.96`), the
`fitt`/`fitc` columns, a build line written above its tables, CANN tables (an embedding model, rows
repeated), a Vulkan capture of eleven runs on two GPUs (most interrupted with ^C under their header,
n_cpu_moe, lm, lazy_mode and ts columns), a paste with a blank line between a header and its rows, a
`Vulkan,OPENVINO` build's `dev none` and `Vulkan0` tables; and files that are not llama-bench's:
llama-batched-bench's table, llama-server's /metrics, SGLang's printed bench_one_batch and bench_latency
lines, a script's JSON lines with `tool: llama-bench`, a llama-bench-style pivot, a community table and
a `vllm bench throughput` JSON shown as a diff.

What was wrong (11 of 15 read right before, 15 of 15 after):

- a `±` read in a legacy code page (UTF-8 C2 B1 as cp1252 `Â±`, cp437 `┬▒`, cp1251 `В±`, GBK `卤`,
  ...) made every row "t/s '373.50 Â± 3.96' is not `mean ± stddev`": each md cell is now read as written
  (core/text.as_written, in readers.md_cells: the one reading of a table line);
- the device lines of a run whose table came after an interrupted run's header (^C: a header without rows)
  were read past as that empty table's log lines (Vulkan's, which hold `|`, as its rows): the next
  table's rows had no GPU. Device lines under a table are now the next table's (readers.read_md);
- a blank line between a table's separator and its first row (a terminal paste) ended the table: its rows
  were left out as "after that table's end". A blank line before the first row is read past; after a row it
  still ends the table (round 31's stray rows unchanged);
- llama-batched-bench's table (`PP | TG | B | N_KV | ... | S t/s`) was named llama-sweep-bench's
  (failed_run.why_no_rows): its `B` column now names it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import imp, imported, read_as, refused
from toolkit.core.text import as_written
from toolkit.runtimes.llama_bench import readers

VULKAN_2GPU = "AMD Radeon RX 7900 XTX (RADV NAVI31), AMD Radeon RX 7800 XT (RADV NAVI32)"


READ = {  # first_read as "count test p.. g.. d.. b.. ub.. backend GPU t/s ± stddev build"
    "r51-sycl-b60-mojibake-plus-minus-issue22413.md": "2 pp512 p512 g0 d0 b2048 ub512 sycl None 373.5 ± 3.96 5c0e94683",
    "r51-cuda-fitt-fitc-columns-pr21304.md": "3 pp512 p512 g0 d0 b2048 ub512 cuda None 7001.57 ± 20.54 None",
    "r51-sycl-b70-build-line-above-table-pr22078.md": "4 pp512 p512 g0 d0 b2048 ub512 sycl None 759.09 ± 2.13 45cac7ca7",
    "r51-cann-nomic-bert-repeated-rows-pr12671.md": "9 pp512 p512 g0 d0 bNone ubNone unknown None 37162.29 ± 13684.02 None",
    "r51-vulkan-openvino-dev-none-then-vulkan0-two-tables.md": "4 pp512 p512 g0 d0 b2048 ub512 vulkan None 16.63 ± 0.05 None",
    "r51-cpu-blank-line-after-header-three-sections-lm-lazy-mode.txt": "6 pp512 p512 g0 d0 b2048 ub512 cpu None 0.71 ± None 5b59b83f4",
}


@pytest.mark.parametrize("name", sorted(READ))
def test_files_read_right_are_held(tmp_path: Path, name: str) -> None:
    assert read_as(tmp_path, name) == READ[name]


def test_a_plus_minus_read_in_another_code_page_is_read_as_written(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r51-sycl-b60-mojibake-plus-minus-issue22413.md")
    assert sorted((r.test, r.avg_ts, r.stddev_ts) for r in recs) == [
        ("pp512", 373.5, 3.96),
        ("tg128", 50.29, 0.12),
    ]


@pytest.mark.parametrize(
    "page", ["cp1252", "cp437", "cp1251", "cp1253", "cp1257", "gbk", "cp932", "cp949", "big5"]
)
def test_every_code_pages_plus_minus_is_read(page: str) -> None:
    """The whole kind: llama-bench's UTF-8 `±` as each legacy page shows it (`Â±`, `┬▒`, `В±`, `卤`, `ﾂｱ`)."""
    cell = "373.50 ± 3.96".encode().decode(page)
    assert cell != "373.50 ± 3.96"
    (row,) = readers.read_md(
        f"| model | test | t/s |\n| --- | --: | --: |\n| llama 7B Q4_0 | pp512 | {cell} |\n"
    )
    assert (row.problem, row.fields["avg_ts"], row.fields["stddev_ts"]) == (None, 373.5, 3.96)


def test_text_no_code_page_explains_is_kept() -> None:
    for text in ("1.00 ± 0.01", "モデル 7B", "naïve ± x", "plain"):
        assert as_written(text) == text


def test_the_devices_of_a_run_after_an_interrupted_ones_header_are_its_own(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r51-vulkan-2gpu-interrupted-headers-n-cpu-moe-lazy-mode.txt")
    got = sorted((r.raw["n_cpu_moe"], r.raw["tensor_split"], r.test, r.avg_ts, r.gpu_info) for r in recs)
    assert got == [
        (0, "30.00/20.00", "pp512", 33.48, VULKAN_2GPU),
        (0, "30.00/20.00", "tg128", 7.33, VULKAN_2GPU),
        (24, "36.00/13.00", "pp512", 44.68, VULKAN_2GPU),
        (24, "36.00/13.00", "tg128", 10.23, VULKAN_2GPU),
        (26, "36.00/13.00", "pp512", 43.91, VULKAN_2GPU),  # before: no GPU (its device lines read past)
        (26, "36.00/13.00", "tg128", 9.87, VULKAN_2GPU),
    ]
    assert {r.build_commit for r in recs} == {"861bd3c10"}


def test_a_table_cut_off_keeps_no_device_lines_of_its_own_for_the_next() -> None:
    """The devices under a table are the next table's only: a table whose run printed none has none."""
    head = "| model | test | t/s |\n| --- | --: | --: |\n"
    rows = readers.read_md(
        "  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes\n"
        + head
        + "^C\n  Device 0: AMD Radeon RX 7900 XTX, gfx1100 (0x1100), VMM: no\n"
        + head
        + "| llama 7B Q4_0 | pp512 | 1.00 ± 0.01 |\n\nbuild: 1234abc (100)\n"
        + head
        + "| llama 7B Q4_0 | tg128 | 2.00 ± 0.01 |\n"
    )
    assert [r.fields.get("gpu_info") for r in rows] == ["AMD Radeon RX 7900 XTX", None]


def test_rows_after_a_blank_line_under_their_header_are_read(tmp_path: Path) -> None:
    got = imported(tmp_path, "r51-cpu-blank-line-after-header-three-sections-lm-lazy-mode.txt")
    assert not [s for s in got.skipped if "after that table's end" in s], got.skipped
    recs = imp(tmp_path / "again", "r51-cpu-blank-line-after-header-three-sections-lm-lazy-mode.txt")
    assert sorted((r.model.name, r.test, r.avg_ts) for r in recs if "2B" in r.model.name) == [
        ("moonspire 2B Q4_K - Medium", "pp512", 1.82),
        ("moonspire 2B Q4_K - Medium", "tg128", 1.29),
    ]
    assert {r.raw["load_mode"] for r in recs} == {"none"} and {r.raw["lazy_mode"] for r in recs} == {"off"}


def test_fit_target_and_fit_min_ctx_columns_are_kept(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r51-cuda-fitt-fitc-columns-pr21304.md")
    assert sorted((r.raw["fit_target"], r.raw["fit_min_ctx"], r.avg_ts) for r in recs) == [
        (10000, 100000, 7001.57),
        (10000, 200000, 4481.81),
        (10000, 300000, 3655.35),
    ]


def test_dev_none_and_vulkan0_tables_keep_their_devices(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r51-vulkan-openvino-dev-none-then-vulkan0-two-tables.md")
    assert sorted((r.raw["devices"], r.test, r.avg_ts) for r in recs) == [
        ("Vulkan0", "pp512", 73.23),
        ("Vulkan0", "tg128", 6.86),
        ("none", "pp512", 16.63),
        ("none", "tg128", 6.2),
    ]
    assert {r.backends for r in recs} == {"Vulkan,OPENVINO"}


REFUSED = {
    "r51-batched-bench-not-llama-bench-pr16894.md": "the markdown table at line 9 is llama-batched-bench's (PP, TG, B",
    "r51-llama-server-metrics-not-bench-ik-pr695.txt": "no llama-bench result rows found",
    "r51-sglang-bench-one-batch-printed-not-jsonl-pr30147.txt": "no llama-bench result rows found",
    "r51-sglang-bench-latency-printed-ms-pr564.txt": "no llama-bench result rows found",
    "r51-script-jsonl-llama-bench-keys-not-bench.jsonl": "line 1: not a llama-bench row: none of its keys",
    "r51-tornado-bench-llama-bench-style-pivot-pr133.md": (
        "its columns are model, quant, size, params, pp128, tg64: it names llama-bench tests ('pp128')"
    ),
    "r51-llmfit-community-avg-tps-table-not-bench-pr1026.md": (
        "its columns are Model, Provider, Avg TPS, Avg TTFT (ms): another kind of table"
    ),
    "r51-vllm-throughput-json-as-diff-pr29495.md": "line 4: not a complete JSON record",
}


@pytest.mark.parametrize(("name", "why"), sorted(REFUSED.items()))
def test_files_refused_right_are_held(tmp_path: Path, name: str, why: str) -> None:
    assert why in refused(tmp_path, name)


def test_sweep_bench_is_still_named_so() -> None:
    """llama-sweep-bench's table (no `B` column) keeps round 28's words."""
    from toolkit.runtimes.llama_bench import failed_run

    said = failed_run.why_no_rows(
        [
            "|    PP |     TG |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |",
            "|---|---|---|---|---|---|---|",
        ]
    )
    assert said is not None and "is llama-sweep-bench's (ik_llama.cpp" in said
