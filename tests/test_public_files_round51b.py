"""Round 51b of reading real, public result files (tests/data/public/README.md names each source, the
`r51b-` files): llama-bench md tables whose `ot` column holds a `-ot` regex with `|` in it (two CUDA
GPUs, a `dev` column, depth tests, `root@...:/app#` prompts, an empty alternative `(ch|)`), `-ot` values
joined with `;` on ROCm, `--progress` lines inside a table, a Q1_0 model (1.125 bits a weight), a
2024 table of `pp 512` tests under unfenced `ggml_init_cublas` lines, ik_llama.cpp's narrower table, a
QNN fork's rows; and files that are not llama-bench's: ollama's `--verbose` stats and API JSON,
koboldcpp's benchmark CSV and printed speeds.

What was wrong (11 of 15 read right before, 15 of 15 after):

- llama-bench prints an `-ot` regex as written: each `|` in it (`blk\\.(0|1|2)\\.ffn_...=CPU`) split its
  md cell, and the row was refused as "N cells, the header has M". The surplus cells of a row under a
  header with an `ot` column are that column's (readers._md_row); any other column count mismatch is
  refused as before;
- a Q1_0 model (ggml's 1-bit type: 18 bytes a block of 128, 0.141 bytes a weight) was refused as
  "0.14 bytes a weight: a GGUF's tensors take 0.18 (IQ1_S) to 8": the floor is Q1_0's now
  (plausible.MIN_BYTES_PER_PARAM["Q1_0"] 0.13, with the md table's rounding).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import imp, read_as, refused
from toolkit.runtimes.llama_bench import readers
from toolkit.runtimes.llama_bench.validity import check_row

TWO_GPUS = "NVIDIA GeForce RTX 5070 Ti, NVIDIA GeForce RTX 5060 Ti"

READ = {  # first_read as "count test p.. g.. d.. b.. ub.. backend GPU t/s ± stddev build"
    "r51b-cuda-2gpu-ot-pipes-root-prompt-glm47.md": f"6 pp512 p512 g0 d0 b2048 ub512 cuda {TWO_GPUS} 87.66 ± 0.47 4efd326",
    "r51b-cuda-2gpu-ot-regex-pipes-dev-gemma4.md": (
        "8 pp2048 p2048 g0 d0 b2048 ub512 cuda NVIDIA GeForce RTX 5070 Ti, NVIDIA GeForce RTX 3060 170.54 ± 0.18 "
        "4c6595503"
    ),
    "r51b-cuda-ot-embd-gpu-before-after-passes.txt": "6 pp512 p512 g0 d0 b2048 ub512 cuda None 347.96 ± 1.11 f95b0d9",
    "r51b-cuda-pp-space-init-cublas-unfenced-pr4766.md": (
        "5 pp512 p512 g0 d0 bNone ubNone cuda NVIDIA GeForce RTX 4090 11048.22 ± 269.74 None"
    ),
    "r51b-cuda-progress-lines-in-table-ot.txt": (
        "2 pp256 p256 g0 d0 b6637 ub2875 cuda NVIDIA GeForce RTX 4090 2487.33 ± 541.92 bb28c1fe2"
    ),
    "r51b-cuda-q1_0-fence-then-table-pr21629.md": "4 pp64 p64 g0 d0 b64 ub512 cuda NVIDIA GeForce RTX 2070 1053.91 ± 45.72 None",
    "r51b-cuda-rtx4070-ot-pipes-empty-alternative-pp-tg.md": (
        "3 pp512 p512 g0 d0 b2048 ub512 cuda NVIDIA GeForce RTX 4070 323.88 ± 2.85 557fe2d91"
    ),
    "r51b-ik-cuda-ngl999-narrow-columns-build-1.md": "8 pp512 p512 g0 d0 bNone ubNone cuda None 1611.86 ± 128.25 9015b6c",
    "r51b-qnn-fork-backend-chraac-pr7.md": "2 pp512 p512 g0 d0 bNone ubNone unknown None 18.46 ± 1.73 None",
    "r51b-rocm-ot-exps-cpu-build-under-rows-lost-stamp.md": "6 pp8192 p8192 g0 d0 b8192 ub8192 rocm None 95.99 ± 3.36 3653e6d6d",
    "r51b-rocm-ot-semicolons-build-in-prose.md": "1 pp2048 p2048 g0 d0 b2048 ub2048 rocm None 51.74 ± None None",
}


def test_files_read_right_are_held(tmp_path: Path) -> None:
    assert {name: read_as(tmp_path / name, name) for name in READ} == READ


def _ot_rows(tmp_path: Path, name: str) -> list[tuple]:
    return sorted((r.raw.get("tensor_buft_overrides") or "", r.test, r.avg_ts) for r in imp(tmp_path, name))


def test_an_ot_regex_with_pipes_is_its_cell(tmp_path: Path) -> None:
    ot = r"blk\.(0|1|2|3|4|5|6|7|8|9|1[0-4])\.ffn_.*_exps.*=CPU"
    got = _ot_rows(tmp_path, "r51b-cuda-2gpu-ot-regex-pipes-dev-gemma4.md")
    assert [g for g in got if g[0] == ot] == [  # before: 4 rows refused, "22 cells, the header has 12"
        (ot, "pp2048", 170.54),
        (ot, "pp2048 @ d16384", 168.65),
        (ot, "tg64", 34.83),
        (ot, "tg64 @ d16384", 31.99),
    ]
    assert {
        r.raw["devices"] for r in imp(tmp_path / "again", "r51b-cuda-2gpu-ot-regex-pipes-dev-gemma4.md")
    } == {"CUDA1"}


def test_every_pipe_of_an_ot_regex_even_an_empty_alternative(tmp_path: Path) -> None:
    ot = r"blk\.(6|7|8|9|[0-9][0-9]|[0-9][0-9][0-9])\.ffn_(up|down|gate)_(ch|)exps=CPU"
    assert _ot_rows(tmp_path, "r51b-cuda-rtx4070-ot-pipes-empty-alternative-pp-tg.md") == [
        (ot, "pp512", 323.88),
        (ot, "pp512+tg128", 119.35),
        (ot, "tg128", 32.99),
    ]
    got = _ot_rows(tmp_path / "glm", "r51b-cuda-2gpu-ot-pipes-root-prompt-glm47.md")
    assert [(t, ts) for o, t, ts in got if o and "[0-6]" in o] == [("pp512", 85.58), ("tg128", 6.16)]


def test_surplus_cells_without_an_ot_column_are_still_refused() -> None:
    head = "| model | ngl | test | t/s |\n| --- | --: | --: | --: |\n"
    (row,) = readers.read_md(head + "| llama 7B Q4_0 | 99 | a | pp512 | 1.00 ± 0.01 |\n")
    assert row.problem and "5 cells, the header has 4" in row.problem
    (row,) = readers.read_md(
        "| model | ot | test | t/s |\n| --- | --- | --: | --: |\n| llama 7B Q4_0 | (a|b|c)=CPU | pp512 | 1.00 ± 0.01 |\n"
    )
    assert (row.problem, row.fields["tensor_buft_overrides"], row.fields["avg_ts"]) == (
        None,
        "(a|b|c)=CPU",
        1.0,
    )


def test_a_q1_0_model_is_a_model(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r51b-cuda-q1_0-fence-then-table-pr21629.md")
    assert sorted((r.n_prompt, r.avg_ts) for r in recs) == [
        (64, 1053.91),
        (128, 1005.84),
        (256, 1046.86),
        (512, 1038.24),
    ]
    row = {"model_size": "1.07 GiB", "model_n_params": "8.19 B"}  # 0.140 bytes a weight: Q1_0's 1.125 bits
    base = {"n_prompt": 512, "n_gen": 0, "avg_ts": 1000.0, "model_type": "qwen3 8B Q1_0"}
    assert "bytes a weight" not in (check_row({**base, **row}) or "")
    assert "bytes a weight" in (
        check_row({**base, "model_size": "1.07 GiB", "model_n_params": "9.19 B"}) or ""
    )


REFUSED = {
    "r51b-ollama-verbose-stats-not-bench-issue1806.txt": "the file starts with 'ollama run mistral --verbose'",
    "r51b-ollama-api-json-not-bench-pr2163.json": "not a complete JSON record",
    "r51b-koboldcpp-benchmark-csv-not-bench-issue913.csv": "the file starts with 'Timestamp,Backend,Layers,Model",
    "r51b-koboldcpp-printed-speeds-not-bench-issue1527.txt": "the file starts with 'ProcessingTime: 9.822s'",
}


@pytest.mark.parametrize(("name", "why"), sorted(REFUSED.items()))
def test_files_refused_right_are_held(tmp_path: Path, name: str, why: str) -> None:
    said = refused(tmp_path, name)
    assert "no llama-bench result rows found" in said and why in said
