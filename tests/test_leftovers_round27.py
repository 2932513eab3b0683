"""Round 27: what rounds 25 and 26 noted and left (docs/reliability-log.md, "Round 27: leftovers"). Each
test fails before its fix; real public files of tests/data/public where one shows the case, else the
file a real one becomes when edited as the case says (a crash's lines appended, a column's text
widened). Nothing is mocked."""

from __future__ import annotations

from pathlib import Path

from tests.support.public import PUBLIC, imp
from tests.support.runs import tk
from tests.support.stored import matrix_project
from toolkit.analysis import table_text
from toolkit.analysis.caveats import held_caveats
from toolkit.analysis.facts import Facts
from toolkit.analysis.provenance import provenance
from toolkit.core.errors import BadInput
from toolkit.results import importer
from toolkit.results.records import ResultStore
from toolkit.runtimes.llama_bench import failed_run, readers

RPC_LOG = "r26-rocm-rpc-glm355b-b7085.log"  # ROCm,RPC rows: a 190 GiB model, one local gfx1151 + an RPC host


def _import(tmp_path: Path, text: str, name: str = "in.md") -> tuple[importer.ImportResult, list]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    src = tmp_path / name
    src.write_text(text)
    store = ResultStore(tmp_path / "results")
    res = importer.import_files(store, [src], label="x")
    return res, store.results()


# 1. a model split over RPC


def test_rows_of_a_run_split_over_rpc_are_flagged_held_and_said_on_the_host_line(tmp_path):
    """Before: `ROCm,RPC` rows were filed and shown as the local GPU's (`GPU Radeon 8060S Graphics`,
    no flag), so a split run's figure stood beside a local one as its equal; now flagged rpc-split, a
    held flag (never best, out of the verdict and compare's counts), the host line saying the RPC devices."""
    recs = imp(tmp_path, RPC_LOG)
    facts = [Facts.of(r) for r in recs]
    assert all("rpc-split" in f.flags and "rpc-split" in f.held_flags for f in facts)
    (host,) = provenance(recs).hosts
    assert "GPU Radeon 8060S Graphics + an RPC server's devices (not named)" in host
    (caveat,) = held_caveats(facts)
    assert "rpc-split" in caveat and "without --rpc" in caveat


def test_rows_of_a_local_run_carry_no_rpc_flag(tmp_path):
    """The same file with its backend `ROCm` (a local run): no rpc-split, the host line the GPU's alone."""
    text = (PUBLIC / RPC_LOG).read_text().replace("ROCm,RPC", "ROCm    ")
    _, recs = _import(tmp_path, text)
    assert [f for r in recs for f in Facts.of(r).flags if f == "rpc-split"] == []
    assert "RPC" not in provenance(recs).hosts[0]


# 2. a run that crashed after some rows


CRASH = (
    "/opt/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:88: ROCm error: an illegal memory access\n"
    "ggml_abort\n"
    "Segmentation fault (core dumped)\n"
)


def test_a_run_that_crashed_after_its_rows_is_imported_with_a_note_naming_the_line(tmp_path):
    """Rows, then the crash's lines (the table cut after its first row): before, imported as if the run
    had ended, without a word; now its rows kept and a note names the line that says why it stopped."""
    lines = (PUBLIC / RPC_LOG).read_text().splitlines()
    res, recs = _import(tmp_path, "\n".join(lines[:7]) + "\n" + CRASH)
    assert len(recs) == 1
    (note,) = [n for n in res.notes if "did not end" in n]
    assert "line 8: '/opt/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:88: ROCm error" in note
    assert "after its last result row (line 7)" in note


def test_jsonl_rows_then_an_assert_are_noted_and_a_run_that_ended_is_not(tmp_path):
    row = (PUBLIC / "r26-rocm-b6865-flash-attn-bool.jsonl").read_text().strip()
    res, recs = _import(tmp_path / "a", row + "\n/src/ggml.c:1234: GGML_ASSERT(x) failed\n", "in.jsonl")
    assert len(recs) == 1 and any(
        "did not end: line 2: '/src/ggml.c:1234: GGML_ASSERT" in n for n in res.notes
    )
    res, _ = _import(tmp_path / "b", row + "\n", "in.jsonl")
    assert not any("did not end" in n for n in res.notes)


# 3. one reading of a table line's cells


def test_a_failed_run_reads_table_cells_as_the_md_reader_does():
    """failed_run's `_cells` was a twin of readers' md cells (and read `||a||` otherwise): now the one."""
    for line in ("| Model | Test | t/s |", "||a||", "\ufeff| model | test |", "model | test"):
        assert failed_run._cells(line) == [c.lower() for c in readers.md_cells(line)]


def test_a_side_by_side_table_after_a_colour_code_is_said_as_such(tmp_path):
    """A compare table captured with a terminal's colour code before its header: before, the header was
    not taken for a table line (`\\x1b[0m|` does not start with `|`), and the file was refused as
    another tool's table; the md reader reads past the code (core.text.line_text), and now so does this."""
    text = "compare-llama-bench.py output:\n\x1b[0m| model | test | HIP | WMMA | Δ% |\n| --- | --- | --- | --- | --- |\n| llama 7B | pp512 | 1 | 2 | 100 |\n"
    src = tmp_path / "in.md"
    src.write_text(text)
    try:
        importer.import_files(ResultStore(tmp_path / "r"), [src], label="x")
    except BadInput as err:
        assert "results set side by side" in str(err)
    else:
        raise AssertionError("imported")


# 4. wide characters in a text report


def test_wrap_fits_wide_characters_in_the_columns():
    """wrap counted code points: 16 CJK characters after `- model: ` made a line of 41 columns at 40."""
    text = "- model: 通义千问大模型中文版本测试模型名称很长很长很长很长 7B Q4_0 (file not recorded) 🚀🚀🚀"
    for width in (20, 33, 40, 80):
        lines = table_text.wrap(text, width)
        assert all(table_text.columns(line) <= width for line in lines), (width, lines)
        assert "".join(line.strip() for line in lines).replace(" ", "") == text.replace(" ", "")
    assert table_text.wrap("- ab 通义", 80) == ["- ab 通义"]


def test_a_text_report_of_wide_names_fits_the_terminal(tmp_path):
    """A model type and a label in CJK and emoji: before, the title, the model line and the roofline note
    ran past COLUMNS (98 columns at 80); now every line fits (counted as a terminal shows them)."""
    tmp = matrix_project(tmp_path)
    text = (
        (PUBLIC / RPC_LOG)
        .read_text()
        .replace("glm4moe 355B.A32B", "通义千问大模型中文版本测试模型名称很长很长很长很长")
    )
    (tmp / "in.md").write_text(text)
    res = tk(tmp, "import", "--results", "r", "--label", "模型测试🚀🚀🚀", "in.md")
    assert res.returncode == 0, res.stderr
    for width in (40, 80):
        out = tk(tmp, "report", "--results", "r", "--format", "text", env={"COLUMNS": str(width)})
        assert out.returncode == 0, out.stderr
        wide = [ln for ln in out.stdout.splitlines() if table_text.columns(ln) > width]
        assert wide == [], (width, wide)


# 5. `± 0.00` of an md table


def test_an_md_stddev_of_0_00_is_unknown_not_nil(tmp_path):
    """`llama-bench -r 1 -o md` prints `± 0.00`: one repetition has no spread (the jsonl path stores
    None for one sample); before it was stored as a stddev of 0. The raw row keeps what was printed."""
    recs = imp(tmp_path, "r25-m5-blas-mtl-r1-issue25547.md")
    assert [(r.test, r.stddev_ts, r.raw["stddev_ts"]) for r in recs] == [
        ("pp256", None, 0.0),
        ("tg64", None, 0.0),
    ]
    assert sorted(r.stddev_ts for r in imp(tmp_path / "b", RPC_LOG)) == [0.01, 0.13]  # a spread printed: kept
