"""A tester's eighth round, on values that cannot be: records that carry physically impossible or
self-contradicting values marked valid. Each test is the reproducer of one finding (the shape found,
and others of its kind) and fails on the code before its fix:

- an imported `toolkit measure` row whose `toolkit_telemetry` energy contradicts the window (1e-6 J
  over 0.19 s at 150 W showed 2.6e9 tok/J): its energy is left out, its speed kept, the import says so
  (results/telemetry_check.py);
- a stored record edited to contradict itself (avg_ts 10x its samples, an axis or test that is not its
  counts', stddev_ts off its samples, an impossible energy) is skipped when read, named file:line,
  counted as unreadable, also when the query index is warm (record_check.contradiction);
- a table header (md, csv, sql) naming a column twice, and a JSON object naming a key twice, in every
  reader of outside files and of results/ lines (readers.repeated_column, core/jsonsafe.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import DATA
from tests.support.records import edit_line
from tests.support.runs import tk
from toolkit.analysis import energy
from toolkit.core.errors import BadInput
from toolkit.results import importer
from toolkit.results.index_sqlite import fingerprint_files
from toolkit.results.records import ResultStore, bench_record, read_jsonl
from toolkit.results.telemetry_check import POWER_W, REASON
from toolkit.runtimes.llama_bench.readers import read_source
from toolkit.runtimes.llama_bench.validity import check_row

MEASURED = DATA / "h200-measure" / "alone.jsonl"  # `toolkit measure` on the lent H200 (real output)
ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"


def _measured(n: int = 0) -> dict[str, Any]:
    return json.loads(MEASURED.read_text().splitlines()[n])


def _import(tmp_path: Path, name: str, text: str) -> tuple[importer.ImportResult, ResultStore]:
    src = tmp_path / "in" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(text)
    store = ResultStore(tmp_path / "r")
    return importer.import_files(store, [src], label="x"), store


def _report(cwd: Path, results: Path) -> tuple[dict[str, Any], str]:
    r = tk(cwd, "report", "--results", str(results), "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def _cells(rep: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """test -> its one column's figures, of every table of a report."""
    return {
        row["test"]: cell
        for t in rep["tables"]
        for row in t["rows"]
        for k, cell in row.items()
        if k != "test"
    }


# ------------------------------------------------------------------------- 1. measure's telemetry


def _gpu(t: dict[str, Any]) -> dict[str, Any]:
    return next(iter(t["gpus"].values()))


def _energy(t: dict[str, Any], joules: float) -> None:
    """The window's energy set to `joules`, its GPU's and both tok/J with it (a careful edit)."""
    t["energy_j"] = _gpu(t)["energy_j"] = joules
    t["tok_per_j"] = _gpu(t)["tok_per_j"] = t["tokens"] / joules if joules else None


def _tokens(t: dict[str, Any], tokens: float) -> None:
    t["tokens"] = tokens
    t["tok_per_j"] = _gpu(t)["tok_per_j"] = tokens / t["energy_j"]


EDITS = {
    "1e-6 J over 0.19 s at 150 W (the finding)": (lambda t: _energy(t, 1e-6), "mean power of 5.19e-06 W"),
    "1 J: 5 W, in range, 30x below its samples": (lambda t: _energy(t, 1.0), "more than 4x apart"),
    "1e6 J in 0.19 s: 5 MW": (lambda t: _energy(t, 1e6), "outside 1-2000 W"),
    "tokens x1000": (lambda t: _tokens(t, t["tokens"] * 1000), "the test is 512 tokens x 5 repetitions"),
    "tok_per_j not tokens / energy": (
        lambda t: t.update(tok_per_j=1e9),
        "tok_per_j 1e+09 is not tokens / energy_j",
    ),
    "a GPU's energy not the window's": (lambda t: _gpu(t).update(energy_j=30.0), "not the sum of its GPUs'"),
    "a shorter window, the same power": (
        lambda t: (t.update(duration_s=0.01, t1=t["t0"] + 0.01), _energy(t, 1.5)),
        "shorter than the timed repetitions",
    ),
    "duration_s not t1 - t0": (lambda t: t.update(duration_s=10.0), "is not t1 - t0"),
    "energy 0": (lambda t: _energy(t, 0), "energy_j is 0"),
    "power samples' mean above the board's": (
        lambda t: _gpu(t).update(power_w_mean=1e9),
        "power_w_mean 1e+09 W",
    ),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_measure_row_whose_energy_cannot_be_keeps_its_speed_not_its_energy(
    tmp_path: Path, edit: str
) -> None:
    change, says = EDITS[edit]
    row = _measured()
    change(row["toolkit_telemetry"])
    res, store = _import(tmp_path, "m.jsonl", json.dumps(row) + "\n" + json.dumps(_measured(1)) + "\n")
    assert res.records == 2 and not res.refused
    assert len(res.notes) == 1 and res.notes[0].startswith(f"{tmp_path / 'in' / 'm.jsonl'}:1: ")
    assert says in res.notes[0] and "its energy left out" in res.notes[0], res.notes
    bad, good = store.results()
    assert bad.avg_ts == row["avg_ts"] and f"energy-invalid:{REASON}" in bad.model_extra["flags"]
    assert bad.telemetry["energy_valid"] is False and bad.telemetry["energy_j"] is None
    assert good.telemetry["energy_valid"] is True  # the row beside it keeps its energy


def test_the_finding_through_the_cli_report_shows_no_tok_per_joule(tmp_path: Path) -> None:
    """The tester's file: report showed 2.6e9 tok/J for pp512. Now the import says why the energy was
    left out (file:line) and the report shows the row's speed with no energy."""
    rows = [_measured(n) for n in range(6)]
    _energy(rows[0]["toolkit_telemetry"], 1e-6)
    src = tmp_path / "alone.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = tk(tmp_path, "import", "--results", "r", "--label", "h200", str(src))
    assert r.returncode == 0 and "imported 6 results" in r.stdout, r.stderr
    assert f"{src}:1: toolkit_telemetry contradicts itself" in r.stderr and "5.19e-06 W" in r.stderr
    cells = _cells(_report(tmp_path, tmp_path / "r")[0])
    assert cells["pp512 ub512"]["avg_ts"] == rows[0]["avg_ts"] and cells["pp512 ub512"]["tok_per_j"] is None
    assert cells["pp512 ub2048"]["tok_per_j"] == pytest.approx(26.4176, rel=1e-4)  # real rows keep theirs


def test_every_real_measure_row_keeps_its_energy(tmp_path: Path) -> None:
    for path in sorted((DATA / "h200-measure").glob("*.jsonl")):
        res, store = _import(tmp_path / path.stem, path.name, path.read_text())
        assert res.records == 6 and not res.notes, res.notes
        assert sum(r.telemetry["energy_valid"] for r in store.results()) == 6


def test_the_power_range_is_the_sensors_range() -> None:
    """telemetry_check states analysis.energy's range again (results may not import analysis)."""
    assert energy.PLAUSIBLE["power_w"] == POWER_W


# -------------------------------------------------------------------- 2. stored records, edited


def _store_of(tmp_path: Path) -> Path:
    """A results folder holding the captured CPU run (6 records) and the H200 measure import (6)."""
    f = tmp_path / "r" / "a504e0178239" / "bench.jsonl"
    f.parent.mkdir(parents=True)
    shutil.copy(DATA / "results-cpu-a.jsonl", f)
    r = tk(tmp_path, "import", "--results", "r", "--label", "h200", str(MEASURED))
    assert r.returncode == 0, r.stderr
    return f


STORED = {
    "avg_ts 10x its samples": (
        lambda r: r.update(avg_ts=r["avg_ts"] * 10),
        "avg_ts 8584.98 contradicts samples_ts",
    ),
    "axis decode on a pp test": (lambda r: r.update(axis="decode"), "axis 'decode' is not its test's: pp128"),
    "test name not its counts": (
        lambda r: r.update(test="tg128"),
        "test 'tg128' is not its token counts' 'pp128'",
    ),
    "stddev_ts off its samples": (lambda r: r.update(stddev_ts=1.0), "stddev_ts 1 contradicts samples_ts"),
}


@pytest.mark.parametrize("edit", list(STORED))
def test_a_stored_record_edited_to_contradict_itself_is_skipped_and_named(tmp_path: Path, edit: str) -> None:
    change, says = STORED[edit]
    f = _store_of(tmp_path)
    before = ResultStore(tmp_path / "r").results()
    _report(tmp_path, tmp_path / "r")  # the query index is built, then warm
    edit_line(f, 1, change)
    for _warm in (False, True):  # the file changed under the index; then the index is warm again
        rep, err = _report(tmp_path, tmp_path / "r")
        assert f"{f}:1: skipped a record that contradicts itself: {says}" in err, err
        assert "11 used" in rep["records"] and "1 unreadable or invalid" in rep["records"], rep["records"]
    store = ResultStore(tmp_path / "r")
    assert len(store.results()) == len(before) - 1 and store.refused == 1


def test_a_stored_record_whose_energy_cannot_be_is_skipped(tmp_path: Path) -> None:
    _store_of(tmp_path)
    (f,) = [p for p in (tmp_path / "r").glob("*/bench.jsonl") if p.parent.name != "a504e0178239"]
    edit_line(f, 1, lambda r: _energy(r["telemetry"], 1e-6))
    rep, err = _report(tmp_path, tmp_path / "r")
    assert f"{f}:1: skipped a record that contradicts itself: energy_j 1e-06 J over duration_s" in err, err
    assert "pp512 ub512" not in _cells(rep) or _cells(rep)["pp512 ub512"]["tok_per_j"] is None


def test_the_index_is_rebuilt_when_the_checking_code_changes() -> None:
    """The index keeps the lines it validated: the code that says which lines are records is in its
    fingerprint: every module of core/, results/ and runtimes/ (round 24: core/types.py and core/stats.py,
    which the checks read, were missing from a list of modules)."""
    files = {"toolkit/" + f.as_posix().rsplit("/toolkit/", 1)[1] for f in fingerprint_files()}
    for mod in (
        "toolkit/runtimes/llama_bench/check.py",
        "toolkit/results/telemetry_check.py",
        "toolkit/results/records.py",
        "toolkit/results/identity.py",
        "toolkit/results/index_sqlite.py",
        "toolkit/core/jsonsafe.py",
        "toolkit/core/types.py",
        "toolkit/core/stats.py",
    ):
        assert mod in files, mod


def test_every_captured_stored_record_still_reads() -> None:
    for name in ("results-cpu-a.jsonl", "results-cpu-b.jsonl", "results-vulkan-lavapipe.jsonl"):
        for obj in read_jsonl(DATA / name):
            rec, why = bench_record(obj)
            assert rec is not None, (name, why)


# ----------------------------------------------------------------------------- 3. stddev_ns


def _row(**kw: Any) -> dict[str, Any]:
    row = json.loads(ROWS.read_text().splitlines()[0])  # pp64, 2 repetitions
    row.update(kw)
    return row


def test_a_stddev_ns_beside_spread_samples_is_kept_as_the_field_files_have_it() -> None:
    """../shared/cases' files carry stddev_ns 0 beside spread samples_ns: the toolkit shows no stddev_ns,
    so their rows are measurements (a first version of round 8 refused them all: exit 4 on the cases)."""
    assert check_row(_row(stddev_ns=0)) is None


def test_llama_benchs_own_stddev_ns_passes_even_where_its_arithmetic_wraps() -> None:
    """llama-bench computes stddev_ns in uint64_t: samples of ~50 s overflow the sum of squares, and it
    writes 1523685588 for a spread of 3.4e9 (b3599). What it writes is what it would write, not refused;
    so is 2**63 (its -nan as an integer)."""
    _fmt, rows = read_source((DATA / "llamabench-b3599-old.json").read_text())
    assert rows and all(check_row(r.fields) is None for r in rows)
    assert (
        check_row(
            _row(
                samples_ns=[640000000, 640000000],
                samples_ts=[100.0, 100.0],
                avg_ns=640000000,
                avg_ts=100.0,
                stddev_ts=0.0,
                stddev_ns=2**63,
            )
        )
        is None
    )


# ------------------------------------------------------------------ 4. a column named twice


def test_an_md_table_naming_t_s_twice_is_refused_naming_file_line_and_column(tmp_path: Path) -> None:
    lines = (DATA / "llamabench-0c1e57098-cpu.md").read_text().splitlines()
    lines[0] += "                  t/s |"
    lines[1] += " -------------------: |"
    lines[2] += "        1.00 ± 0.00 |"
    lines[3] += "        1.00 ± 0.00 |"
    src = tmp_path / "two.md"
    src.write_text("\n".join(lines) + "\n")
    r = tk(tmp_path, "import", "--results", "r", "--label", "x", str(src))
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert str(src) in r.stderr and "line 3: the table's header (line 1) names column 't/s' twice" in r.stderr
    assert not (tmp_path / "r").exists() or not ResultStore(tmp_path / "r").results()


@pytest.mark.parametrize("fmt", ["csv", "sql"])
def test_a_csv_or_sql_naming_a_column_twice_is_refused(tmp_path: Path, fmt: str) -> None:
    text = (DATA / f"llamabench-0c1e57098-cpu.{fmt}").read_text()
    text = text.replace("avg_ts,stddev_ts", "avg_ts,avg_ts").replace("avg_ts, stddev_ts)", "avg_ts, avg_ts)")
    assert text != (DATA / f"llamabench-0c1e57098-cpu.{fmt}").read_text()
    with pytest.raises(
        BadInput,
        match=rf"two.{fmt}: .*\n  line \d+: the (header \(line 1\)|INSERT) names column 'avg_ts' twice",
    ):
        _import(tmp_path, f"two.{fmt}", text)


# ------------------------------------------------------------------------ 5. a key named twice


def _twice(row: dict[str, Any], key: str, value: Any) -> str:
    """`row` as JSON with `key` written again, `value` last (json keeps the last one)."""
    text = json.dumps(row)
    return text[:-1] + f", {json.dumps(key)}: {json.dumps(value)}" + "}"


def test_a_jsonl_row_naming_a_key_twice_is_refused_naming_file_line_and_key(tmp_path: Path) -> None:
    good, row = _row(), _row(n_depth=0)
    src = tmp_path / "k.jsonl"
    src.write_text(json.dumps(good) + "\n" + _twice(row, "avg_ts", row["avg_ts"] * 10) + "\n")
    r = tk(tmp_path, "import", "--results", "r", "--label", "x", str(src))
    assert r.returncode == 0 and "imported 1 result as" in r.stdout, r.stderr
    assert f"{src}:2: key 'avg_ts' written twice in one object" in r.stderr


def test_a_key_twice_is_refused_in_every_reader(tmp_path: Path) -> None:
    row = _row()
    nested = json.dumps(_measured())[:-1]  # a measure row whose telemetry names energy_j twice
    nested = nested.replace('"energy_valid": true,', '"energy_valid": true, "energy_j": 1e-06,', 1) + "}"
    cases = {
        "a.json": "[\n" + _twice(row, "n_prompt", 4096).replace(", ", ",\n") + "\n]\n",  # -o json, pretty
        "b.json": _twice(row, "avg_ts", 1.0).replace(", ", ",\n  ") + "\n",  # one object over many lines
        "c.jsonl": nested + "\n",
        "d.jsonl": json.dumps(row)[:-1] + ', "raw_x": {"a": 1, "a": 2}}\n',  # any object, at any depth
    }
    for name, text in cases.items():
        with pytest.raises(BadInput, match="written twice in one object") as err:
            _import(tmp_path / name.split(".")[0], name, text)
        assert f"in/{name}: " in str(err.value)
    again = next(i for i, ln in enumerate(cases["a.json"].splitlines(), 1) if ln == '"n_prompt": 4096}')
    with pytest.raises(BadInput, match=rf"line 2: key 'n_prompt' written twice .* \(again at line {again}\)"):
        _import(tmp_path / "again", "a.json", cases["a.json"])


def test_a_streamed_jsonl_refuses_a_key_twice_too(tmp_path: Path) -> None:
    """Over 1 MiB a JSONL file is read as a stream (import_read.ImportSource._jsonl)."""
    row = _row(n_depth=0)
    text = json.dumps(_row()) + "\n" + _twice(row, "avg_ts", 1.0) + "\n" + "ggml: a log line\n" * 80000
    res, _store = _import(tmp_path, "big.jsonl", text)
    assert res.records == 1 and any(":2: key 'avg_ts' written twice" in x for x in res.refused), res.refused


def test_a_vllm_result_naming_a_key_twice_is_refused(tmp_path: Path) -> None:
    serve = (DATA / "vllm-0.16.0-serve.json").read_text().rstrip()
    src = tmp_path / "serve-128-32-c2.json"
    src.write_text(serve[:-1] + ',\n"output_throughput": 1e9}\n')
    r = tk(tmp_path, "import", "--results", "r", "--label", "x", str(src))
    assert r.returncode == 4 and f"{src}:2: key 'output_throughput' written twice" in r.stderr, r.stderr


def test_a_stored_line_naming_a_key_twice_is_skipped_cold_and_warm(tmp_path: Path) -> None:
    """pydantic's JSON reader, which loads the lines the index validated, keeps the last value too:
    such a line is refused where the index validates it, so it is never one the index lists."""
    f = tmp_path / "r" / "a504e0178239" / "bench.jsonl"
    f.parent.mkdir(parents=True)
    lines = (DATA / "results-cpu-a.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    lines[0] = _twice(rec, "avg_ts", rec["avg_ts"] * 10)
    f.write_text("\n".join(lines) + "\n")
    for _warm in (False, True):
        rep, err = _report(tmp_path, tmp_path / "r")
        assert f"{f}:1: skipped a record: key 'avg_ts' written twice in one object" in err, err
        assert "5 used" in rep["records"], rep["records"]
