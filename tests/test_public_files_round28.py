"""Round 28 of reading real, public result files (tests/data/public/README.md names each source, the
`r28-` files): AMD MI300X (gfx942) llama-bench output from ROCm's blogs and a rocprof-compute issue,
llama-bench -o sql of 2023 (cuda/opencl columns) and of 2025 (a README's INSERT short of values), the
2026 README's quoted -o csv, ik_llama.cpp's llama-sweep-bench table, and a llama-bench fork's rows
that time prompt and generation apart (-o sql, and -o jsonl missing a comma).

- a table whose every line carries a logger's prefix (rocprof-compute's `   INFO    |-> [rocprofv3] |
  model | ...`) was refused as "column 2 '-> [rocprofv3]' is not a llama-bench column title ... a
  table another tool wrote": now the prefix is named, with what to do (md_titles.prefixed);
- llama-sweep-bench's table (`PP | TG | N_KV | ... | S_PP t/s | ... | S_TG t/s`) was refused as "a
  markdown table ... has no result rows: it needs a header with model, test and t/s": now it is named
  (failed_run.why_no_rows);
- a fork's row with avg_prompt_ts / avg_gen_ts and no avg_ts was refused as "no avg_ts or avg_ns (a
  cut-off row?)": now the fork's fields are named (check.check_row).

The files read right or refused right before this round are held here too.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.public import cells, imp, refused


def test_a_table_behind_a_profilers_line_prefix_is_said(tmp_path: Path) -> None:
    said = refused(tmp_path, "r28-mi300x-rocprofv3-prefixed-memory-fault.log")
    assert "text stands before the table on its line ('INFO    |-> [rocprofv3] |'" in said, said
    assert "remove that prefix from the table's lines" in said, said
    assert "is not a llama-bench column title" not in said, said


def test_a_sweep_bench_table_is_named(tmp_path: Path) -> None:
    said = refused(tmp_path, "r28-ik-sweep-bench-rtx4080-pr566.md")
    assert "the markdown table at line 3 is llama-sweep-bench's (ik_llama.cpp" in said, said
    assert "run llama-bench with -p PP -n TG -d N_KV" in said, said


def test_a_forks_split_prompt_and_generation_speeds_are_named(tmp_path: Path) -> None:
    said = refused(tmp_path, "r28-fork-prompt-gen-split-columns.sql")
    assert "its speeds are avg_prompt_ts and avg_gen_ts (a llama-bench fork's row" in said, said
    assert "a cut-off row" not in said, said


def test_the_refusals_that_were_right_are_held(tmp_path: Path) -> None:
    said = refused(tmp_path / "a", "r28-fork-prompt-gen-split-missing-comma.jsonl")
    assert "line 1: not a complete JSON record (not JSON (Expecting ',' delimiter at column 1029))" in said
    said = refused(tmp_path / "b", "r28-sql-readme-2025-n_depth-values-short.sql")
    assert (
        "line 37: 31 values for 33 columns" in said
        and "(2 rows of this, its numbers varying, lines 37 to 38)" in said
    ), said
    said = refused(tmp_path / "c", "r28-csv-quoted-readme-2026-schema.csv")
    assert "line 2: 41 fields, the header has 42" in said, said


def test_the_files_read_right_are_held(tmp_path: Path) -> None:
    recs = imp(tmp_path / "a", "r28-mi300x-8gpu-rocm-b5997-rocm-blog.txt")
    assert len(recs) == 13
    assert (4096, 0, 0, 2048, 512, 420.19, 0.62) in cells(recs)
    assert (0, 256, 0, 2048, 512, 36.53, 0.01) in cells(recs)
    assert {(r.model.name, r.image.backend, r.build_commit) for r in recs} == {
        ("deepseek2 671B Q4_K - Medium", "rocm", "66906cd8")
    }
    recs = imp(tmp_path / "b", "r28-mi300x-8gpu-rocm7-docker-bench-no-build-line.txt")
    assert len(recs) == 13 and {(r.image.backend, r.build_commit, r.n_batch) for r in recs} == {
        ("rocm", None, None)
    }
    assert (0, 64, 0, None, None, 42.95, 0.03) in cells(recs)
    recs = imp(tmp_path / "c", "r28-sql-readme-2023-cuda-opencl-columns.sql")
    assert cells(recs) == [
        (0, 128, 0, 512, None, 130.891159, 0.537692),
        (512, 0, 0, 512, None, 2407.240204, 8.409634),
    ]
    assert {(r.image.backend, r.build_commit) for r in recs} == {("cuda", "3469684")}
