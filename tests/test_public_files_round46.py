"""Round 46 of reading real, public result files (tests/data/public/README.md names each source, the
`r46-` files): ik_llama.cpp pull #278's tables (a `-gp` run's table whose `t/s` title is narrower than
its cells, a hand-cut `thp | test | t/s` summary, a `threads | mmap | thp` table with section rows),
a script's `Median t/s | Min | Max` summary and a `tg64@pp512`-columned pivot (neither llama-bench's),
a Metal table of a model whose size llama.cpp prints as `?B` with `@ d10000` depths, and two OpenCL
(Adreno) tables, one with its `ggml_opencl:` device lines and build line, one with a size in MiB.

Every one of these files read right (or was refused right) before this round. What was wrong:

- ik_llama.cpp's `-gp Np,Ng` test in -o json / jsonl / csv / sql (ik's llama-bench.cpp writes the test
  as `"test": "tg64@pp8192"` with n_prompt 8192 and n_gen 64, and its avg_ts counts the 64 generated
  tokens alone) was read by its counts: `pp8192+tg64` at the gp rate, where the row has no timings
  (a row cut down to its figures); a whole row was refused for "8256 tokens in 2 s is 4128 tokens/s",
  its own consistent figures called a contradiction. Now read as `tg64 @ d8192`, as round 45 reads
  the md table's `tg64@pp8192` (llama_bench/source_row.gp_counts, for every reader and the streamed
  jsonl import). No public -o json/jsonl/csv file of a gp run was found in the indexes searched (the
  rows below are the real pull #273 record of round 45 with its counts set as ik's llama-bench.cpp
  writes a gp test's).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.support.public import PUBLIC, imp, read_as, refused
from tests.support.runs import tk
from toolkit.results import import_read, importer
from toolkit.results.records import ResultStore
from toolkit.runtimes.llama_bench import source_row

IK_JSON = "r45-ik-json-two-arrays-in-prose-cpu-pr273.md"


def _ik_gp_record(n_prompt: int = 8192, n_gen: int = 64, test: str = "tg64@pp8192") -> dict:
    """The first record of round 45's real ik_llama.cpp -o json array (pull #273, CPU only), made a
    `-gp 8192,64` row as ik's llama-bench.cpp writes one: n_prompt the gp prompt, n_gen the generated
    tokens, `test` its label, avg_ts = n_gen / time (its test_kind GP counts no prompt tokens)."""
    text = (PUBLIC / IK_JSON).read_text()
    start = text.index("[")
    rec = json.loads(text[start : text.index("\n]", start) + 2])[0]
    samples_ns = [2_000_000_000, 2_010_000_000, 1_990_000_000]
    samples_ts = [n_gen * 1e9 / ns for ns in samples_ns]
    avg = sum(samples_ts) / 3
    sd = (sum((x - avg) ** 2 for x in samples_ts) / 2) ** 0.5
    rec.update(
        n_prompt=n_prompt,
        n_gen=n_gen,
        test=test,
        avg_ns=2_000_000_000,
        stddev_ns=10_000_000,
        avg_ts=round(avg, 6),
        stddev_ts=round(sd, 6),
        samples_ns=samples_ns,
        samples_ts=[round(x, 5) for x in samples_ts],
    )
    return rec


def _import(tmp_path: Path, name: str, text: str) -> list:
    src = tmp_path / name
    src.write_text(text)
    importer.import_files(ResultStore(tmp_path / "results"), [src], label="pub")
    return ResultStore(tmp_path / "results").results()


def _csv(rec: dict) -> str:
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(rec)
    w.writerow([str(v).lower() if isinstance(v, bool) else v for v in rec.values()])
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "bare-jsonl"])
def test_ik_gp_rows_of_json_jsonl_and_csv_are_read_as_tg_at_a_depth(tmp_path: Path, fmt: str) -> None:
    rec = _ik_gp_record()
    if fmt == "bare-jsonl":  # cut down to its figures: was read as pp8192+tg64 at the gp rate
        rec = {k: v for k, v in rec.items() if k not in ("avg_ns", "stddev_ns", "samples_ns", "samples_ts")}
    text = {"json": json.dumps([rec], indent=2) + "\n", "csv": _csv(rec)}.get(fmt, json.dumps(rec) + "\n")
    (r,) = _import(tmp_path, f"gp.{fmt.removeprefix('bare-')}", text)
    assert (r.test, r.n_prompt, r.n_gen, r.n_depth, r.axis) == ("tg64 @ d8192", 0, 64, 8192, "decode")
    assert r.avg_ts == pytest.approx(32.0, rel=1e-3)
    assert r.raw["test"] == "tg64@pp8192"  # the row's own label kept


def test_ik_gp_rows_are_read_so_in_the_streamed_import_too(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(import_read, "STREAM_ABOVE", 0)  # read as a stream, as a file over 1 MiB
    (r,) = _import(tmp_path, "gp.jsonl", json.dumps(_ik_gp_record()) + "\n")
    assert (r.test, r.n_prompt, r.n_gen, r.n_depth) == ("tg64 @ d8192", 0, 64, 8192)


def test_a_gp_label_that_is_not_its_rows_counts_is_left_as_the_row_says() -> None:
    """gp_counts moves a count only where the label and the counts say the same test: a row whose
    `test` names other counts, or that has a depth, is read by its counts as before (no guess)."""
    for fields in (
        {"test": "tg64@pp8192", "n_prompt": 512, "n_gen": 64},
        {"test": "tg64@pp8192", "n_prompt": 8192, "n_gen": 64, "n_depth": 4096},
        {"test": "pp8192+tg64", "n_prompt": 8192, "n_gen": 64},
    ):
        before = dict(fields)
        source_row.gp_counts(fields)
        assert fields == before


def test_pg_rows_of_ik_are_still_pp_plus_tg(tmp_path: Path) -> None:
    """ik's `-pg 512,128` test (`pp512+tg128`, avg_ts over both phases' tokens) keeps its reading."""
    rec = _ik_gp_record(512, 128, "pp512+tg128")
    rec.update(avg_ts=round(rec["avg_ts"] * 640 / 128, 6), stddev_ts=round(rec["stddev_ts"] * 5, 6))
    rec["samples_ts"] = [round(640e9 / ns, 5) for ns in rec["samples_ns"]]
    (r,) = _import(tmp_path, "pg.jsonl", json.dumps(rec) + "\n")
    assert (r.test, r.n_prompt, r.n_gen, r.n_depth) == ("pp512+tg128", 512, 128, 0)


READ = {  # first_read as "count test p.. g.. d.. b.. ub.. backend GPU t/s ± stddev build"
    "r46-ik-thp0-results-narrow-ts-header-pr278.md": "11 tg64 @ d8192 p0 g64 d8192 b2048 ub512 cpu None 6.65 ± None None",  # `± 0.00`: unknown,
    "r46-metal-deepseek4-unknown-size-depths-pr26512.md": "6 pp2048 p2048 g0 d0 b2048 ub2048 metal None 235.0 ± 0.63 None",
    "r46-opencl-adreno-a840-device-lines-build-pr22755.md": "2 pp512 p512 g0 d0 b2048 ub512 unknown None 394.43 ± 24.45 f79069d9d",
    "r46-opencl-snapdragon-mib-size-pp128-tg32-pr10693.md": "4 pp128 p128 g0 d0 bNone ubNone unknown None 327.75 ± 1.58 None",
}


@pytest.mark.parametrize("name", sorted(READ))
def test_files_read_right_are_held(tmp_path: Path, name: str) -> None:
    assert read_as(tmp_path, name) == READ[name]


def test_the_gp_table_keeps_every_test_at_its_depth(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r46-ik-thp0-results-narrow-ts-header-pr278.md")
    assert sorted((r.test, r.avg_ts) for r in recs if r.n_gen) == [
        ("tg64 @ d16384", 5.31),
        ("tg64 @ d512", 7.86),
        ("tg64 @ d512", 7.87),  # `-gp 512,64` asked twice: two rows, both kept
        ("tg64 @ d8192", 6.65),
    ]
    assert {r.raw["type_k"] for r in recs} == {"q8_0"}


def test_the_depths_of_a_question_mark_sized_model_are_kept(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r46-metal-deepseek4-unknown-size-depths-pr26512.md")
    depths = {
        (r.n_prompt, r.n_gen): sorted(x.n_depth for x in recs if x.test.split()[0] == r.test.split()[0])
        for r in recs
    }
    assert depths == {(2048, 0): [0, 10000, 20000], (0, 128): [0, 10000, 20000]}
    assert {r.model.name for r in recs} == {"deepseek4 Q8_0"}  # `?B` names no size (fix51a: S6)
    assert {r.backends for r in recs} == {"MTL,BLAS"}


def test_opencl_rows_keep_their_backend_and_mib_size(tmp_path: Path) -> None:
    recs = imp(tmp_path, "r46-opencl-snapdragon-mib-size-pp128-tg32-pr10693.md")
    assert {r.backends for r in recs} == {"OpenCL"}
    assert {r.model.size_bytes for r in recs if "Q4_0" in r.model.name} == {round(727.75 * 2**20)}


REFUSED = {
    "r46-ik-thp-tldr-no-model-column-pr278.md": (
        "the markdown table at line 3 has `test` and `t/s` columns but not llama-bench's 'model', 'test', "
        "'t/s'"
    ),
    "r46-ik-threads-mmap-thp-section-rows-pr278.md": (
        "the markdown table at line 1 has `test` and `t/s` columns but not llama-bench's 'model', 'test', "
        "'t/s'"
    ),
    "r46-exp-summary-median-min-max-tg-at-pp-not-llama-bench.md": (
        "its columns are Config, Test, Median t/s, Min, Max: another kind of table, not llama-bench's rows"
    ),
    "r46-vulkan-kv-pivot-tg64-at-pp-columns-not-llama-bench.md": (
        "its columns are KV-Cache, pp512, pp2048, pp4096, pp8192, Kompression: it names llama-bench tests "
        "('pp512') but its figures are set out by hand or by a script"
    ),
}


@pytest.mark.parametrize(("name", "why"), sorted(REFUSED.items()))
def test_files_refused_right_are_held(tmp_path: Path, name: str, why: str) -> None:
    assert why in refused(tmp_path, name)


# ------------------------------------------------------------------- breaker round 46 (brk46)
# a row whose counts are a bool (`n_prompt: true` equals 1, `n_depth: false` equals 0), a float or
# digits other than ASCII in its test was rewritten into a valid `tg64 @ dN` row, where the validity
# pass refuses the row as it is


@pytest.mark.parametrize(
    "fields",
    [
        {"test": "tg64@pp1", "n_prompt": True, "n_gen": 64},  # True == 1
        {"test": "tg1@pp8192", "n_prompt": 8192, "n_gen": True},
        {"test": "tg64@pp8192", "n_prompt": 8192, "n_gen": 64, "n_depth": False},  # False == 0
        {"test": "tg64@pp8192", "n_prompt": 8192, "n_gen": 64, "n_depth": 0.0},
        {"test": "tg64@pp8192", "n_prompt": 8192.0, "n_gen": 64},
        {"test": "tg\uff16\uff14@pp8192", "n_prompt": 8192, "n_gen": 64},  # fullwidth digits
        {"test": "tg64@pp8192\n", "n_prompt": 8192, "n_gen": 64},
    ],
)
def test_a_gp_row_of_counts_no_reader_writes_is_left_as_it_is(fields) -> None:
    before = dict(fields)
    source_row.gp_counts(fields)
    assert fields == before


def test_a_gp_row_with_a_bool_count_is_refused_as_before(tmp_path) -> None:
    rec = _ik_gp_record()
    rec.update(test="tg64@pp1", n_prompt=True)
    src = tmp_path / "gp.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    res = tk(tmp_path, "import", "--label", "ik", "--results", str(tmp_path / "results"), str(src))
    assert res.returncode == 4, res.stderr
    assert "n_prompt is True: not a token count" in res.stderr
    assert not (tmp_path / "results").exists()


def test_the_gp_spellings_ik_writes_are_still_read_at_a_depth(tmp_path) -> None:
    rec = _ik_gp_record(test="TG64 @ PP8192")
    (r,) = _import(tmp_path, "gp.jsonl", json.dumps(rec) + "\n")
    assert (r.test, r.n_prompt, r.n_gen, r.n_depth) == ("tg64 @ d8192", 0, 64, 8192)
