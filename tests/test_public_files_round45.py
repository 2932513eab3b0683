"""Round 45 of reading real, public result files (tests/data/public/README.md names each source, the
`r45-` files): -o json arrays pasted in prose (an ik_llama.cpp thread, CPU only, fork fields) and one cut
by a line break inside `false` (SYCL, Intel Arc Pro B70, build 10700 with n_cpu_moe, fit_target,
load_mode), ik_llama.cpp's `-gp` tests (`tg64@pp8192`), a hand table with a separator line without its
leading pipe, `-dev none` on a CUDA build, `-sm tensor` over two MI25s, a `pp1` row printed twice, a
Vulkan run under a multi-line bwrap command, a compare table of `-sm layer` against `-sm tensor` at
depth, and a `vllm bench serve` JSON fenced in a markdown page.

- a -o json record that is not JSON (a line cut inside a value, as pasted) but whose braces close was
  taken for the half record a crash leaves: "line 2: the array ends in an incomplete record" and every
  record after it lost (here all: nothing imported). Now it is left out by its line and the line of its
  break, and the records after it are read (llama_bench/json_array._past_unparsed);
- ik_llama.cpp's `-gp Np,Ng` test (`tg64@pp8192`, llama.cpp pull #11126's test: the generation rate
  after an Np-token prompt, the prompt's time left out) was refused as no test name: read as
  `tg64 @ d8192`, mainline's `-d` test of the same measure (llama_bench/readers._md_row);
- rows of llama-bench's table pasted without its header (`| gpt-oss 120B ... | pp16384 | 890.38 ± 0.56 |`)
  were said to be "a markdown table ... has no result rows": now said to be rows without their header,
  with their test and t/s cells (llama_bench/other_tables.headless_rows);
- a hand table whose separator line leaves out its leading pipe (` ------: | -----: |`) was refused with
  "needs a header with model, test and t/s columns" only: now named with its columns, as round 33's
  tables are (llama_bench/other_tables._md_tables).

The files read right or refused right before this round are held here too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import PUBLIC, first_read, imp, imported, refused
from toolkit.analysis import facts
from toolkit.core.errors import BadInput
from toolkit.results import importer
from toolkit.results.records import ResultStore

BROKEN_JSON = "r45-sycl-arc-b70-json-line-cut-inside-false-b10700.json"


def test_a_json_record_broken_inside_a_value_is_left_out_alone_and_the_records_after_it_are_read(
    tmp_path: Path,
) -> None:
    got = imported(tmp_path, BROKEN_JSON)
    said = "\n".join(got.skipped)
    assert (
        "2: a record of the array left out: not JSON (Expecting value at column 19) on line 16; "
        "the records after it are read" in said
    ), said
    assert "incomplete record" not in said
    recs = imp(tmp_path / "again", BROKEN_JSON)
    assert first_read(recs) == (
        1,
        "tg128",
        0,
        128,
        0,
        2048,
        512,
        "sycl",
        "Intel(R) Arc(TM) Pro B70 Graphics",
        101.152055,
        0.421949,
        "bebc9350e",
    )


def test_a_crashed_arrays_half_record_is_still_its_end(tmp_path: Path) -> None:
    """The broken record's rule needs its braces closed and the array going on: the half object a crash
    leaves (no closing brace) still ends the array, said as before."""
    whole = (PUBLIC / BROKEN_JSON).read_text()
    cut = tmp_path / "cut.json"
    cut.write_text("[\n" + whole[whole.index("  {", 10) :].split('"n_gen"')[0])  # the second record, cut
    with pytest.raises(BadInput) as err:
        importer.import_files(ResultStore(tmp_path / "r"), [cut], label="cut")
    assert "line 2: the array ends in an incomplete record" in str(err.value), err.value


def test_ik_llama_cpps_gp_test_is_read_as_tg_at_a_depth(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r45-ik-md-tg64-at-pp8192-gp-tests-pr273.md")
    assert {(r.test, r.n_prompt, r.n_gen, r.n_depth) for r in recs} == {("tg64 @ d8192", 0, 64, 8192)}
    assert sorted((r.raw["flash_attn"], r.raw["mla"], r.avg_ts, r.stddev_ts) for r in recs) == [
        (0, 1, 25.58, 0.01),
        (0, 2, 14.65, 0.05),
        (0, 3, 14.7, None),  # `± 0.00`: unknown (round 26)
        (1, 1, 26.02, 0.02),
        (1, 2, 17.13, 0.01),
        (1, 3, 26.12, 0.03),
    ]


def test_a_hand_table_whose_separator_leaves_out_its_leading_pipe_is_named(tmp_path: Path) -> None:
    said = refused(tmp_path, "r45-ik-hand-avg-stddev-columns-broken-header-pr273.md")
    assert "the markdown table at line 3 is not llama-bench -o md output" in said, said
    assert "its columns are threads, type_k, fa, mla, fmoe, test, avg t/s, stddev t/s" in said, said
    assert "it names llama-bench tests ('pp512') but its figures are set out by hand" in said, said


READ = {  # first_read as "count test p.. g.. d.. b.. ub.. backend GPU t/s ± stddev build"
    "r45-ik-json-two-arrays-in-prose-cpu-pr273.md": "4 pp512 p512 g0 d0 b2048 ub512 cpu None 8.204253 ± 0.133555 ddc8eee1",
    "r45-cuda-dev-none-lm-none-windows-pr26678.txt": "1 pp512 p512 g0 d0 bNone ubNone cuda NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition 195.09 ± 19.68 None",  # no n_batch column, no build line
    "r45-rocm-pp1-repeated-row-bf16-kyuz0-issue5.md": "6 pp1 p1 g0 d0 b2048 ub1024 rocm None 4.74 ± None None",  # pp1 printed twice: one measurement
    "r45-rocm-sm-tensor-2x-mi25-details-pr19378.md": "2 pp512 p512 g0 d0 b2048 ub512 rocm None 91.98 ± 0.09 None",
    "r45-vulkan-bwrap-multiline-command-rtx2070-pr13324.txt": "2 pp512 p512 g0 d0 b2048 ub512 vulkan NVIDIA GeForce RTX 2070 139.97 ± 1.06 141a908a",
}


@pytest.mark.parametrize("name", sorted(READ))
def test_files_read_right_are_held(tmp_path: Path, name: str) -> None:
    n, test, p, g, d, b, ub, backend, gpu, ts, sd, build = first_read(imp(tmp_path, name))
    assert f"{n} {test} p{p} g{g} d{d} b{b} ub{ub} {backend} {gpu} {ts} ± {sd} {build}" == READ[name]


def test_dev_none_is_said_to_have_run_on_the_cpu(tmp_path: Path) -> None:
    (rec,) = imp(tmp_path, "r45-cuda-dev-none-lm-none-windows-pr26678.txt")
    assert facts.is_cpu_fallback(rec)


def test_sm_tensor_is_kept(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r45-rocm-sm-tensor-2x-mi25-details-pr19378.md")
    assert {r.raw["split_mode"] for r in recs} == {"tensor"}


REFUSED = {
    "r45-compare-sm-layer-vs-tensor-depth-pr19378.md": (
        "has llama-bench's model and test columns but no t/s column (its columns: model, test, "
        "t/s -sm layer, t/s -sm tensor, speedup): results set side by side or rearranged"
    ),
    "r45-vllm-serve-json-fenced-in-md-ascend.md": (
        "line 42: not a llama-bench row: none of its keys (date, endpoint_type, backend, label, model_id, "
        "tokenizer_id, ...) is a llama-bench field; it is a serving benchmark's result (vllm bench serve's "
        "keys), read only from a file that holds its JSON lines alone"
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_files_refused_right_are_held(tmp_path: Path, name: str) -> None:
    said = refused(tmp_path, name)
    assert REFUSED[name] in said, said


def test_rows_pasted_without_their_header_are_said_to_be_so(tmp_path: Path) -> None:
    said = refused(tmp_path, "r45-rocm-dev-list-rows-without-header-pr19922.md")
    assert (
        "line 3 and the 5 line(s) after it are rows of a llama-bench markdown table without its header and "
        "separator lines (their last cells a test, 'pp16384', and its t/s, '890.38 ± 0.56'): which column "
        "is which is not guessed" in said
    ), said
