"""Round 29 of reading real, public result files (tests/data/public/README.md names each source, the
`r29-` files): RDNA3 (RX 7900 XT, Navi31), RDNA4-era Intel Arc (B580, A310) and gfx90c llama-bench
output from GitHub issues and pull requests (Vulkan, ROCm, SYCL on Windows, Metal pasted as a table
without outer pipes, CUDA with `-sm row`, a hand-edited backend column), llama-bench -o json of 2026
(n_gpu_layers -1, flash_attn -1, lazy_mode, repack), a fork's -o json and -o csv with TTFT/E2E/ITL
fields (pull #15643; the json's lines padded to a terminal's width), vLLM 0.10+ and 0.25
`vllm bench serve --save-result` JSON (one run of which no request completed; one with speculative
decoding's fields), an SGLang bench_serving record wrapped over two lines, and a speech-to-text
benchmark's JSON, and an RTX PRO 6000 (Blackwell) table in a `<details>` block with depth tests.

- a load that ran out of device memory was refused naming `main: error: failed to load model` only:
  now the cause above it (`ggml_vulkan: Device memory allocation of size N failed.`) is named first,
  and the account's last line with it (failed_run.FAILURE, _then);
- a result row after its table's end (a `<details>` block repeating a row) was dropped without a
  word: now said as a skipped line (readers._stray_row);
- a JSON record broken over two lines by a paste was refused "not a complete JSON record" only: now
  the lines it spans, its keys and what to do (readers._wrapped); a serving benchmark's record among
  other lines is named as one (check._served);
- a `vllm bench serve` result of which no request completed was refused for its lengths only: now it
  says it measured nothing (vllm_import._none_completed);
- a markdown table with an n_batch column but no n_ubatch said "n_batch and n_ubatch are unknown"
  though n_batch was read: the note now says which are unknown (md_defaults.NOTE_REASONS).

The files read right or refused right before this round are held here too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import PUBLIC, cells, imp, imported, refused
from toolkit.results import importer
from toolkit.results.records import ResultStore


def test_a_load_out_of_device_memory_names_its_cause(tmp_path: Path) -> None:
    said = refused(tmp_path, "r29-vulkan-b580-oom-after-header-issue26.txt")
    assert "line 7: 'ggml_vulkan: Device memory allocation of size 901780992 failed.'" in said, said
    assert "... line 9: \"main: error: failed to load model 'models/gpt-oss-20b-F16.gguf'\"" in said, said
    assert "its table's header (line 5) has no row" in said, said


def test_a_row_after_its_tables_end_is_said(tmp_path: Path) -> None:
    res = imported(tmp_path, "r29-rocm-7900xt-mg-details-issue4763.md")
    assert any(
        s.endswith(
            "md:11: a row of the table at line 3 after that table's end (a blank line or other text came "
            "between): not read; put it back under its table's header to import it"
        )
        for s in res.skipped
    ), res.skipped
    recs = ResultStore(tmp_path / "results").results()
    assert cells(recs) == [(0, 128, 0, None, None, 67.2, 0.02), (512, 0, 0, None, None, 2402.21, 34.47)]


def test_a_record_wrapped_over_two_lines_is_said(tmp_path: Path) -> None:
    said = refused(tmp_path, "r29-sglang-record-wrapped-issue12389.jsonl")
    assert "line 2: not a complete JSON record" in said, said
    assert "the record goes on to line 3: one JSON object broken over lines 2-3" in said, said
    assert "its keys: backend, dataset_name, request_rate" in said and "join its lines into one line" in said


def test_a_served_result_among_other_lines_is_named(tmp_path: Path) -> None:
    lines = (PUBLIC / "r29-sglang-record-wrapped-issue12389.jsonl").read_text().splitlines()
    src = tmp_path / "joined.jsonl"
    src.write_text(
        lines[0] + "\n" + lines[1] + lines[2] + "\n"
    )  # the record made whole, the script's line kept
    with pytest.raises(importer.BadInput) as err:
        importer.import_files(ResultStore(tmp_path / "r"), [src], label="pub")
    said = str(err.value)
    assert "it is SGLang bench_serving's result (vllm bench serve's keys)" in said, said
    assert "delete the other lines" in said, said


def test_a_serve_run_of_which_no_request_completed_says_so(tmp_path: Path) -> None:
    said = refused(tmp_path / "a", "r29-vllm-serve-0.25-all-requests-failed.json")
    assert "in which no request completed (8 failed) measured nothing" in said, said
    recs = imp(tmp_path / "b", "r29-vllm-serve-0.25-all-requests-failed.json", input_len=8, output_len=8)
    assert [(r.status, r.error) for r in recs] == [
        ("failed", "vllm bench serve (in 8, out 8): no request completed")
    ]


def test_a_tables_n_batch_is_not_said_unknown(tmp_path: Path) -> None:
    res = imported(tmp_path, "r29-rocm-gfx90c-vram-device-line-pr26454.txt")
    note = next(n for n in res.notes if "no batch sizes" in n)
    assert "n_ubatch, and n_batch where the table has no n_batch column, are unknown" in note, note
    assert "n_batch and n_ubatch are unknown" not in note, note
    recs = ResultStore(tmp_path / "results").results()
    assert cells(recs) == [(0, 32, 0, 512, None, 13.56, 0), (512, 0, 0, 512, None, 188.64, 0)]
    assert {(r.image.backend, r.model_extra.get("gpu_info", r.raw.get("gpu_info"))) for r in recs} == {
        ("rocm", "AMD Radeon Graphics")
    }


def test_another_llama_cpp_programs_log_is_named(tmp_path: Path) -> None:
    said = refused(tmp_path / "a", "r29-windows-crlf-llama-server-log-not-bench.log")
    assert (
        "the file is a llama-server log (the server's requests and slots: it measured no benchmark): line 15:"
        in said
    )
    assert "run llama-bench on the model (-o jsonl) and import that" in said, said
    assert "expected llama-bench output" not in said, said


def test_a_container_build_log_is_named_not_a_failed_run(tmp_path: Path) -> None:
    """A podman build log (tests/data, real podman 4.3.1 output) was said to be a llama-bench run that
    failed at its `ERROR:` line; a markdown file whose table quotes a failure line was said the same."""
    with pytest.raises(importer.BadInput) as err:
        importer.import_files(
            ResultStore(tmp_path / "a"), [PUBLIC.parent / "podman-build-4.3.1.log"], label="pub"
        )
    said = str(err.value)
    assert "the file is a container image build's log (podman or docker build), not a llama-bench run" in said
    assert "the llama-bench run failed" not in said, said
    with pytest.raises(importer.BadInput) as err:
        importer.import_files(ResultStore(tmp_path / "b"), [PUBLIC / "README.md"], label="pub")
    said = str(err.value)
    # round 33 names the table's columns (other_tables.md_table); was "... at line 6 has no result rows"
    assert "the markdown table at line 6 is not llama-bench -o md output" in said, said
    assert "its columns are file, source" in said and "run failed" not in said, said


def test_the_refusals_that_were_right_are_held(tmp_path: Path) -> None:
    said = refused(tmp_path / "a", "r29-stt-whisper-benchmark-not-vllm.json")
    assert "none of its keys (benchmark_name, model, audio_file" in said, said
    said = refused(tmp_path / "b", "r29-vllm-serve-0.25-speculative-sorted-keys.json")
    assert "does not say the lengths it was asked for" in said, said
    said = refused(tmp_path / "c", "r29-vllm-serve-010-qwen3-32b-tp8-ctx2048.json")
    assert "does not say the lengths it was asked for: give --output-len," in said, said


def test_the_files_read_right_are_held(tmp_path: Path) -> None:
    recs = imp(tmp_path / "a", "r29-vllm-serve-010-qwen3-32b-tp8-ctx2048.json", output_len=128)
    assert [(r.n_prompt, r.n_gen, r.status, round(r.avg_ts, 2)) for r in recs] == [(2048, 128, "ok", 3539.69)]
    recs = imp(tmp_path / "b", "r29-vulkan-rx7900xt-navi31-v3d-pg-r2-issue23.md")
    assert cells(recs) == [
        (0, 128, 0, 2048, 512, 7.16, 0.15),
        (512, 0, 0, 2048, 512, 335.63, 0.78),
        (4096, 0, 0, 2048, 512, 67.23, 0.28),
        (4096, 128, 0, 2048, 512, 65.65, 0),
    ]
    assert {(r.image.backend, r.build_commit) for r in recs} == {("vulkan", "1d0125bc")}
    recs = imp(tmp_path / "c", "r29-pipeless-table-metal-issue5480.md")
    assert len(recs) == 6 and (0, 512, 0, None, None, 13.96, 1.62) in cells(recs)
    assert {r.image.backend for r in recs} == {"metal"}
    recs = imp(tmp_path / "d", "r29-cuda-blas-sm-row-issue10384.md")
    assert sorted((r.raw.get("split_mode"), r.n_prompt, r.avg_ts) for r in recs) == [
        ("layer", 0, 1.87),
        ("layer", 3, 3.09),
        ("row", 0, 1.96),
        ("row", 3, 3.12),
    ]
    recs = imp(tmp_path / "e", "r29-json-b580-vulkan-2026-ngl-minus1-fa-auto.json")
    assert cells(recs) == [
        (0, 128, 0, 2048, 512, 370.659695, 4.96462),
        (512, 0, 0, 2048, 512, 13462.443199, 140.422336),
    ]
    recs = imp(tmp_path / "f", "r29-vulkan-2x-7900xtx-n_batch-fa-b7361.txt")
    assert sorted((r.raw.get("gpu_info", "").count("7900 XTX"), r.n_prompt, r.avg_ts) for r in recs) == [
        (1, 0, 150.97),
        (1, 0, 172.86),
        (1, 512, 3229.07),
        (1, 512, 3290.92),
        (2, 0, 129.8),
        (2, 512, 2546.13),
    ]
    assert {(r.n_batch, r.n_ubatch, r.build_commit) for r in recs} == {(512, 512, "a81a56957")}
    for name, n in (
        ("r29-fork-ttft-json-padded-lines-pr15643.json", 2),
        ("r29-fork-ttft-csv-pr15643.csv", 2),
        ("r29-sycl-ipex-windows-b580-p-n-lists-issue12991.md", 6),
        ("r29-vulkan-a310-mesa-warning-issue29.md", 4),
        ("r29-vulkan-windows-prompt-r1-pr12833.txt", 1),
        ("r29-vulkan-backend-hand-edited-pr5835.md", 6),
        ("r29-cuda-rtx-pro-6000-details-depth-pr16991.md", 7),
    ):
        assert len(imp(tmp_path / name, name)) == n, name
