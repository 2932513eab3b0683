"""brk44: llama-bench output captured with its stderr (left44a's readers), through the real CLI import
and the real streamed JSON-array reader.

Real -o json / -o csv / -o jsonl rows of the toolkit/cpu image's llama-bench (tests/data/cases43). Each
test failed on b409e8e (said in its docstring) and passes after."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.runs import import_text
from toolkit.core import jsonsafe
from toolkit.runtimes.llama_bench import json_array, readers

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "cases43"
ROWS = json.loads((DATA / "llamabench-0c1e57098-cpu-t1-2.json").read_text())
CSV_T = (DATA / "llamabench-0c1e57098-cpu-t1-2.csv").read_text().splitlines()


def _import(tmp_path: Path, name: str, text: str) -> str:
    return import_text(ROOT, tmp_path, name, text)


def test_a_csv_row_after_a_log_lines_text_on_its_line_is_still_refused(tmp_path):
    """Before: `Device 0: NAME, compute capability 8.9, VMM: yes"0c1e57098","0",...` (stderr written
    without its newline, the row after it: 44 fields) was read past as a log line: the row was lost
    without a word (6f1383e refused it by file:line)."""
    glued = "  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes" + CSV_T[2]
    out = _import(tmp_path, "runs.csv", "\n".join([CSV_T[0], CSV_T[1], glued, *CSV_T[3:]]) + "\n")
    assert "imported 3 results" in out and "1 row(s) refused" in out, out
    assert re.search(r"runs\.csv:3: 44 fields, the header has 42", out), out


def test_jsonl_records_below_a_log_line_ending_in_a_bracket_are_read_as_jsonl(tmp_path):
    """Before: `main: loading model [` above -o jsonl records was taken for -o json's start: a cut
    record ended the `array` (`the array ends in an incomplete record`) and the 2 records after it were
    lost (1 of 3 imported; 6f1383e read them as JSONL); whole records were stored as format json."""
    lines = [json.dumps(r) for r in ROWS]
    text = "\n".join(["main: loading model [", lines[0], lines[1][:200], lines[2], lines[3]]) + "\n"
    out = _import(tmp_path, "runs.jsonl", text)
    assert "imported 3 results" in out, out
    assert re.search(r"runs\.jsonl:3: not a complete JSON record", out), out
    stored = [json.loads(ln) for p in (tmp_path / "r").rglob("bench.jsonl") for ln in p.open()]
    assert {r["imported"]["format"] for r in stored} == {"jsonl"}


def test_a_log_lines_brace_at_a_blocks_end_keeps_the_rows_after_it():
    """Before: a streamed -o json whose block ended right after a log line's `{` (`llama_context: params
    = {`) took that `{` for an element cut at the block's end; the next blocks never made it parse, so
    `the array ends in an incomplete record` and every row after it was lost (a 4.5 MB capture: 1 of
    2 rows, 17 s of CPU)."""
    el = [json.dumps(r, indent=4) for r in ROWS[:2]]
    first = "[\n" + el[0] + ",\n" + " " * json_array.JSON_BLOCK + "\nllama_context: params = {\n"
    notes: list[str] = []
    rows = list(json_array.iter_json_array([first, "  n_ctx = 4\n}\n" + el[1] + "\n]\n"], notes))
    assert [r.fields["n_prompt"] for r in rows] == [ROWS[0]["n_prompt"], ROWS[1]["n_prompt"]], notes
    assert notes == []


def test_log_lines_ending_in_a_brace_are_read_past_without_a_parse(monkeypatch):
    """Before: each log line ending in `{` was parsed from its `{` (a JSON error counts its line from
    the buffer's start: 40,000 such lines took 4.0 s of CPU, 6f1383e 0.23 s, load 10); now a `{` whose
    next character is no key (`"`) or `}` is read past without one. Counted, not timed."""
    calls = []
    real = jsonsafe.decode_at
    monkeypatch.setattr(jsonsafe, "decode_at", lambda *a: calls.append(a[2]) or real(*a))
    el = [json.dumps(r, indent=4) for r in ROWS[:2]]
    text = "[\n" + el[0] + ",\n" + "llama_context: params = {\n  n_ctx = 4\n" * 500 + el[1] + "\n]\n"
    _fmt, rows = readers.read_source(text, [])
    assert len(rows) == 2 and len(calls) == 2


def test_a_row_whose_devices_is_no_text_is_no_traceback(tmp_path):
    """Before (and at 6f1383e): `"devices": 1` in a hand-edited jsonl row ended the import in a traceback
    (exit 1: AttributeError 'int' object has no attribute 'strip', backends.from_llama_names); its
    other readers of the field (settings_check, check.cpu_fallback_of) read it as text."""
    text = json.dumps(ROWS[0]) + "\n" + json.dumps({**ROWS[1], "devices": 1}) + "\n"
    assert "devices=1) into" in _import(tmp_path, "runs.jsonl", text)
