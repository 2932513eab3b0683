"""Faults earlier sessions found and left (left45), through the real command:

- `report -o nodir/` wrote a file named `nodir`, and `-o` given an existing folder failed with Click's
  `File 'x' is a directory.`: an option of metavar FILE given a folder (one that exists, or a path
  ending in `/`) is bad input, exit 4, saying the option names the file to write; nothing is written
  (cli.common.output_parent, on every written-path option: report -o, measure -o).
- `report --format github` (and md) escapes every backtick a record gives (a model_type, a gpu_info, a
  tensor_buft_overrides): none pairs into a code span. Holding out the names known to a report (tried)
  let the backticks of fields not held out pair (brk45); a line is now composed as core.text.Prose,
  the data put into it named as it is put in, so the toolkit's own spans render (fix49a).
- `bench` on a llama-bench row whose avg_ts (stddev_ts) was a 401-digit integer raised OverflowError
  out of judge_row (check.as_float), samples_ns one out of the row sink's seconds (check.row_seconds), and
  a 401-digit n_prompt was saved with pydantic's last line for its reason: each is a failed row with
  the reason `toolkit import` gives the same row (the row sink is real; its saver and observer are the
  stand-ins of tests/test_row_sink.py: no container here).
- export-run's note of the matrix's axes against the run's records counted the matrix's 0 (`-p 0`, `-n
  0`: no prompt, no generation test) as a value the records lack (publish.run_folder._matrix_off).
- bench's skip line of an image that cannot run here said `it is not built yet either` for vulkan alone:
  every unbuilt image's line says it, in one wording (bench.decide; tests/test_newcomer_round17.py).
- `compare --against DIR` kept an index per stranger's folder under the user's state folder forever,
  and index_trust.index_path made that folder as a side effect of naming a path: the name is pure, the
  folder is made where the index is opened, and at most MAX_STRANGER_INDEXES are kept (index_trust.opened_path).
- `import` of an unquoted csv row cut inside its first field read it past as a log line: a comma-less line
  that is the start of the row before it's first field is a row cut short (cut_records.csv_log_line).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from tests.support.runs import tk
from tests.support.sinks import ROWS, export_notes, row_sink
from tests.support.stored import H200, import_rows, matrix_project


@pytest.mark.parametrize("cmd", [("report", "--results", "r"), ("measure", "--gpu", "none")])
@pytest.mark.parametrize("out", ["nodir/", "existing", "existing/"])
def test_a_folder_given_as_a_file_option_is_bad_input_saying_what_it_expects(
    tmp_path: Path, cmd: tuple[str, ...], out: str
) -> None:
    proj = matrix_project(tmp_path)
    import_rows(proj, H200 / "alone.jsonl", "bare")
    (proj / "existing").mkdir()
    before = sorted(p.name for p in proj.iterdir())
    res = tk(proj, *cmd, "-o", out, *(("--", "true") if cmd[0] == "measure" else ()))
    assert res.returncode == 4, res.stdout + res.stderr
    assert f"{out} " in res.stderr and "-o names the FILE to write" in res.stderr, res.stderr
    assert sorted(p.name for p in proj.iterdir()) == before and not list((proj / "existing").iterdir())


def test_every_backtick_of_a_reports_markdown_line_is_escaped(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parent / "data"
    md = "\n".join(
        line.replace("qwen3moe", "q`x").replace("| cpu ", "| cp`u ")  # a model_type and a backend: records'
        for line in (data / "llamabench-0c1e57098-cpu.md").read_text().splitlines()
        if not line.startswith("build")
    )
    (tmp_path / "nobuild.md").write_text(md + "\n")
    for label, src in (("ab", tmp_path / "nobuild.md"), ("other", data / "llamabench-b5163-readme.jsonl")):
        res = tk(tmp_path, "import", "--results", "r", "--label", label, str(src))
        assert res.returncode == 0, res.stderr
    for fmt in ("github", "md"):
        res = tk(tmp_path, "report", "--results", "r", "--format", fmt)
        assert res.returncode == 0, res.stderr
        assert "q\\`x" in res.stdout and "q`x" not in res.stdout, res.stdout  # the record's, escaped
        # two imports: no bench measures them, the model named to import (fix51a: S8), escaped
        assert "(import a result file of q\\`x F16 for other)" in res.stdout, res.stdout
        for line in res.stdout.splitlines():  # every other backtick pairs into one of the toolkit's spans
            rest = line.replace("\\`", "")
            spans = re.findall(r"`([^`]*)`", rest)
            assert rest.count("`") == 2 * len(spans) and set(spans) <= OWN_SPANS, line


OWN_SPANS = {"build:"}
"""The toolkit's own code spans in that report (its verdict's fix, the no-build-commit flag's legend)."""

BIG = int("9" * 401)


@pytest.mark.parametrize(
    "field", ["avg_ts", "stddev_ts", "samples_ts", "avg_ns", "samples_ns", "n_prompt", "n_gen", "model_size"]
)
def test_a_row_with_a_401_digit_figure_is_a_failed_row_with_the_reason_import_gives(
    tmp_path: Path, field: str
) -> None:
    row = {**ROWS[0], field: [BIG] * len(ROWS[0]["samples_ts"]) if field.startswith("samples") else BIG}
    sink, saver, _, _ = row_sink(tmp_path)
    sink.row(row)
    (rec,) = saver.saved
    assert rec.status == "failed", rec
    why = rec.error.removeprefix("row is not a measurement: ")
    assert why.startswith(f"{field} ") and "(401 digits)" in why, rec.error
    (tmp_path / "big.jsonl").write_text(json.dumps(row) + "\n")
    res = tk(tmp_path, "import", "--results", "r", "--label", "x", "big.jsonl")
    assert res.returncode == 4 and f"1 refused:\n  line 1: {why}\n" in res.stderr, res.stderr


def test_a_matrix_zero_in_n_prompt_or_n_gen_is_no_value_the_records_lack(tmp_path: Path, matrix_data) -> None:
    """llama-bench's 0 (`-p 0`: no prompt test, `-n 0`: no generation test) is a value the matrix
    lists and no record holds as one (a decode test's n_prompt is 0 too): export-run's note said
    `n_prompt 0, 128, 1024 where the records hold 128, 1024` of the run's own matrix."""
    axes = {
        "n_prompt": [0, 128, 1024],
        "n_gen": [0, 64],
        "n_ubatch": [64, 512],
        "n_batch": [512],
        "repetitions": 10,
    }
    err, notes = export_notes(tmp_path, matrix_data, axes)
    assert not [n for n in notes if n.startswith("matrix.yaml")] and "matrix.yaml is the matrix" not in err, (
        notes
    )
    err, notes = export_notes(tmp_path / "b", matrix_data, {**axes, "n_gen": [0]})  # a 0 alone still differs
    assert any("n_gen 0 where the records hold 64" in n for n in notes), notes


def test_a_strangers_index_path_is_a_name_and_their_indexes_are_bounded(tmp_path: Path, monkeypatch) -> None:
    import shutil

    from toolkit.results import index, index_trust
    from toolkit.results.records import ResultStore

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = index_trust.key_path().parent / "indexes"
    path = index_trust.index_path(tmp_path / "x", owned=False)
    assert path.parent == folder and not folder.exists()  # asking for the name makes nothing
    one = matrix_project(tmp_path / "p") / "r"
    import_rows(one.parent, H200 / "alone.jsonl", "bare")
    n = index_trust.MAX_STRANGER_INDEXES + 4
    for i in range(n):
        theirs = shutil.copytree(one, tmp_path / f"theirs{i}")
        assert index.select(ResultStore(theirs, read_only=True)).read, i
        assert index_trust.index_path(theirs, owned=False).is_file()  # the newest one is kept
    assert 0 < len(list(folder.iterdir())) <= index_trust.MAX_STRANGER_INDEXES


@pytest.mark.parametrize("cut", ["0c1e5", "0c1e57098", '"0c1e5'])
def test_an_unquoted_csv_row_cut_inside_its_first_field_is_refused_with_file_and_line(
    tmp_path: Path, cut: str
) -> None:
    """A row re-saved without quotes (a spreadsheet's csv) and cut inside its first field has no comma:
    it was read past as a log line, while the quoted one was refused. A line that is the start of the
    row before it's first field (one run's rows share their build commit) is a row cut short."""
    import csv
    import io

    rows = list(csv.reader((Path(__file__).parent / "data" / "llamabench-0c1e57098-cpu.csv").open()))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows[:4])  # minimal quoting: none here
    (tmp_path / "cut.csv").write_text(out.getvalue() + cut + "\n" + "llama-bench: benchmark 4/4: done\n")
    res = tk(tmp_path, "import", "--results", "r", "--label", "x", "cut.csv")
    assert res.returncode == 0 and "imported 3 results" in res.stdout, res.stderr
    assert "cut.csv:5: 1 fields, the header has 42" in res.stderr and "cut.csv:6" not in res.stderr, (
        res.stderr
    )


@pytest.mark.parametrize("field, value", [("samples_ns", [1e308, 1e308]), ("avg_ns", 1.7e308)])
def test_a_row_whose_seconds_overflow_a_float_leaves_the_next_records_writable(
    tmp_path: Path, field: str, value: object
) -> None:
    """brk45: samples_ns each finite but summing past a float (or avg_ns x repetitions) made
    check.row_seconds inf; the row sink's running seconds stayed inf, and the refused row's failed
    record and every later record of the process carried timing tests_s inf, which the results store
    cannot write (json allow_nan=False: ValueError out of the bench). Such a row counts 0 s."""
    from toolkit.results.records import ResultStore

    row = {**ROWS[0], field: value, **({"samples_ns": None} if field == "avg_ns" else {})}
    sink, saver, _, _ = row_sink(tmp_path)
    sink.row(row)
    sink.row(dict(ROWS[1]))
    bad, good = saver.saved
    assert bad.status == "failed" and good.status == "ok", (bad, good)
    store = ResultStore(tmp_path / "r")
    for rec in (bad, good):
        assert all(isinstance(v, float) and v < float("inf") for v in rec.timing.values()), rec.timing
        store.add_result(rec)  # raised ValueError: Out of range float values are not JSON compliant
    assert good.timing["tests_s"] > 0, good.timing


def test_a_strangers_indexes_never_number_more_than_the_bound(tmp_path: Path, monkeypatch) -> None:
    """brk45: opened_path pruned the folder to MAX_STRANGER_INDEXES before the new index was made, so
    the 17th folder compared against left 17 indexes (the sawtooth 17, 13, 14, ... over more folders)."""
    import shutil

    from toolkit.results import index, index_trust
    from toolkit.results.records import ResultStore

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = index_trust.key_path().parent / "indexes"
    one = matrix_project(tmp_path / "p") / "r"
    import_rows(one.parent, H200 / "alone.jsonl", "bare")
    for i in range(index_trust.MAX_STRANGER_INDEXES + 6):
        theirs = shutil.copytree(one, tmp_path / f"theirs{i}")
        assert index.select(ResultStore(theirs, read_only=True)).read, i
        assert index_trust.index_path(theirs, owned=False).is_file()  # the newest one is kept
        assert len(list(folder.iterdir())) <= index_trust.MAX_STRANGER_INDEXES, i


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["measure", "-o", "", "--", "true"], "'': empty path"),
        (["export-run", "RUN", "-o", ""], "'': empty path"),
        (["report", "-o", "nope/."], "names a folder"),
        (["report", "-o", "nope/.."], "names a folder"),
        (["measure", "-o", "x.jsonl/.", "--", "true"], "names a folder"),
    ],
)
def test_an_empty_path_or_one_naming_a_folder_is_refused_by_every_written_path_option(
    tmp_path: Path, args: list[str], said: str
) -> None:
    """brk45 F7/F8: `export-run -o ''` exported into the current folder and `measure -o ''` wrote to the
    default results/measure/ (only report refused ''); `-o nope/.` wrote a file `nope`."""
    (tmp_path / "x.jsonl").write_text("")
    res = tk(tmp_path, *args)
    assert res.returncode == 4 and said in res.stderr, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]


@pytest.mark.parametrize("cut_at", [1, 2])
def test_a_csv_row_cut_inside_a_quoted_field_is_refused_alone_and_the_rows_after_it_are_kept(
    tmp_path: Path, cut_at: int
) -> None:
    """brk45 F5: a row cut inside a quoted value (`"0c1e5` on its own line) left csv's quote open, so
    the rows after it were read as one field: neither kept nor named (the cut row first: nothing
    imported). llama-bench writes no line break inside a value: each line is read as its row."""
    lines = (
        (Path(__file__).resolve().parent / "data" / "llamabench-0c1e57098-cpu.csv").read_text().splitlines()
    )
    rows = len(lines) - 1
    lines.insert(cut_at, lines[cut_at][:6])  # `"0c1e5`: the first value cut, its quote open
    (tmp_path / "cut.csv").write_text("\n".join(lines) + "\n")
    res = tk(tmp_path, "import", "--results", "r", "--label", "c", "cut.csv")
    assert res.returncode == 0, res.stderr
    assert f"imported {rows} results" in res.stdout + res.stderr, res.stdout + res.stderr
    assert f"cut.csv:{cut_at + 1}: 1 fields, the header has" in res.stderr, res.stderr


@pytest.mark.parametrize("field", ["avg_ts", "stddev_ts"])
def test_a_401_digit_figure_in_a_csv_row_is_refused_as_in_jsonl(tmp_path: Path, field: str) -> None:
    """brk45 F10: a 401-digit stddev_ts read from csv became inf (a float of the text) and was 'repaired'
    as llama-bench's nan of one repetition, the row kept; jsonl's reader has the int and refuses the row
    out of range. A whole number beyond a float's range stays that int in every reader."""
    lines = (
        (Path(__file__).resolve().parent / "data" / "llamabench-0c1e57098-cpu.csv").read_text().splitlines()
    )
    header = next(csv.reader([lines[0]]))
    cells = next(csv.reader([lines[1]]))
    cells[header.index(field)] = str(BIG)
    lines[1] = ",".join(f'"{c}"' for c in cells)
    (tmp_path / "big.csv").write_text("\n".join(lines) + "\n")
    res = tk(tmp_path, "import", "--results", "r", "--label", "c", "big.csv")
    assert res.returncode == 0, res.stderr
    assert f"big.csv:2: {field} is 999999999999... (401 digits): out of range (no measurement)" in res.stderr
