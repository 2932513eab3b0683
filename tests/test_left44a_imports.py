"""left44a: llama-bench output captured with its stderr, through the real CLI import.

Real -o json / -o csv files of the toolkit/cpu image's llama-bench (tests/data/cases43), with the log
lines llama-bench and ggml write to stderr put where `2>&1` puts them. Each test marked "before" failed
on 4e302fe (the csv log lines were refused rows; a log line without its newline took the next run's `[`
or the next element's `{` with it); the others guard what already held."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.runs import import_text
from toolkit.core import jsonsafe

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "cases43"
RUN_T = (DATA / "llamabench-0c1e57098-cpu-t1-2.json").read_text()
RUN_CTK = (DATA / "llamabench-0c1e57098-cpu-ctk.json").read_text()
CSV_T = (DATA / "llamabench-0c1e57098-cpu-t1-2.csv").read_text().splitlines()
LOG = [
    "llama-bench: benchmark 2/4: starting",
    "  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes",
    "[INFO] load_tensors: offloaded 29/29 layers, 0.8 MiB",
    ".........",
]


def _import(tmp_path: Path, name: str, text: str) -> str:
    return import_text(ROOT, tmp_path, name, text)


def _csv_with_log(cut: str | None = None) -> str:
    lines = ["ggml_vulkan: Found 1 Vulkan devices:", CSV_T[0]]
    for row in CSV_T[1:]:
        lines += [*LOG, row]
    if cut is not None:
        lines.insert(4, cut)
    return "\n".join(lines) + "\n"


def test_csv_captured_with_stderr_reads_past_its_log_lines(tmp_path):
    """Before: `-o csv > f 2>&1`: every log line between rows was `N fields, the header has 42: ...; row
    left out` (16 refused rows that were no rows)."""
    out = _import(tmp_path, "runs.csv", _csv_with_log())
    assert "imported 4 results" in out and "refused" not in out and "left out" not in out, out


@pytest.mark.parametrize(
    "cut", ['"0c1e57098","0","AMD EPYC"', "0c1e57098,0,AMD EPYC"], ids=["quoted", "bare"]
)
def test_a_csv_row_cut_short_among_log_lines_is_still_refused(tmp_path, cut):
    out = _import(tmp_path, "runs.csv", _csv_with_log(cut))
    assert "imported 4 results" in out and "1 row(s) refused" in out, out
    assert re.search(r"runs\.csv:5: 3 fields, the header has 42", out), out


def test_md_and_jsonl_captured_with_stderr_read_past_their_log_lines(tmp_path):
    md = (ROOT / "tests" / "data" / "cases" / "turn3" / "bare.md").read_text().splitlines()
    text = "\n".join(md[:2] + LOG + md[2:3] + LOG + md[3:]) + "\n"
    assert "imported 2 results" in _import(tmp_path / "md", "runs.md", text)
    lines = [ln for row in json.loads(RUN_T) for ln in (*LOG, json.dumps(row))]
    out = _import(tmp_path / "jsonl", "runs.jsonl", "\n".join(lines) + "\n")
    assert "imported 4 results" in out and "left out" not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "llama-bench: loading model..." + RUN_T,  # the first run's `[` after a log line's text
        RUN_CTK.rstrip() + "\nllama-bench: loading model..." + RUN_T,  # the second run's
        RUN_CTK.rstrip() + "llama-bench: [run 2] loading model...  [\n" + RUN_T.lstrip()[1:],
    ],
    ids=["first", "second", "bracketed-log"],
)
def test_a_log_line_without_its_newline_before_a_runs_array_keeps_its_rows(tmp_path, text):
    """Before: `loading model...[` (stderr and stdout interleaved without a newline): the log line was
    read past with the `[` at its end; the run's rows were lost (`no llama-bench result rows found`, exit
    4, or `text that is no JSON array after the array's end`, 4 of 8 rows)."""
    out = _import(tmp_path, "runs.json", text)
    n = 4 if text.startswith("llama-bench") else 8
    assert f"imported {n} results" in out and "left out" not in out, out


def test_a_log_line_without_its_newline_before_an_element_keeps_it(tmp_path):
    """Before: `benchmark 2/4: starting  {` lost the next element (its lines read as strings: `an element
    of the array that is not a JSON object (str) left out`, 1 of 4 rows); a log line ending in `{` whose
    next lines are no JSON is still read past."""
    text = RUN_T.replace("},\n  {", "},\nllama-bench: benchmark 2/4: starting  {")
    out = _import(tmp_path / "a", "runs.json", text)
    assert "imported 4 results" in out and "left out" not in out, out
    text = RUN_T.replace("},\n  {", "},\nllama_context: params = {\n  n_ctx = 4\n}\n  {")
    out = _import(tmp_path / "b", "runs.json", text)
    assert "imported 4 results" in out and "left out" not in out, out


def test_a_streamed_import_reads_the_array_after_a_log_line_and_past_csv_log_lines(tmp_path):
    """Files over the streamed import's 1 MiB (results/import_read.STREAM_ABOVE): the same readers."""
    rows = json.loads(RUN_T)
    for i, row in enumerate(rows * 700):
        row = dict(row, test_time=f"2026-11-{1 + i // 1440 % 28:02d}T{i // 60 % 24:02d}:{i % 60:02d}:00Z")
        rows.append(row)
    big = json.dumps(rows[4:], indent=4)
    out = _import(tmp_path / "j", "runs.json", "llama-bench: loading model..." + big)
    assert "imported 2800 results" in out and "left out" not in out, out
    lines = [CSV_T[0]] + [ln for i in range(6000) for ln in (*LOG, CSV_T[1 + i % 4])]
    out = _import(tmp_path / "c", "runs.csv", "\n".join(lines) + "\n")
    assert "imported 4 results" in out and "refused" not in out, out


@pytest.mark.parametrize(
    "text",
    [
        '{"cpu_info": "x", "gpu_info": "", "avg_ts": nan, "b": -inf, "c": "nan", "d": [inf, -nan(ind)]}',
        '{"a": NaN, "b": -Infinity, "c": 1.0, "name": "info"}',
        '{"a": ınf, "b": İnf, "c": "é", "d": NAN}',
        '{"a": .nan, "b": x_nan, "c": 1nan, "d": -Inf}',
        "nan",
        "",
    ],
)
def test_printf_text_gives_what_its_pattern_gives(text):
    """The fast path (no bare nan/inf: the text given back) never skips a token the pattern replaces."""
    want = jsonsafe._NONFINITE_RE.sub(
        lambda m: (
            m.group(0)
            if m.group(2) is None
            else ("NaN" if m.group(2).lower() == "nan" else f"{m.group(1)}Infinity")
        ),
        text,
    )
    assert jsonsafe.printf_text(text) == want


def test_printf_text_of_rows_without_nan_runs_no_pattern(monkeypatch):
    """Before: the lookbehind pattern was tried at every place of the text (27 MB/s: 32 MiB of -o json
    rows took 1.2 s of CPU, load 6.4); rows without a bare nan/inf are now given back without it (str.find's
    speed, about 450 MB/s: a measured figure, not a timed test). The pattern is replaced by one that
    refuses to run: text with a bare nan still reaches it."""

    class NoPattern:
        def sub(self, *a, **k):
            raise AssertionError("the pattern ran")

        search = sub

    monkeypatch.setattr(jsonsafe, "_NONFINITE_RE", NoPattern())
    text = RUN_T * 50
    assert jsonsafe.printf_text(text) is text
    with pytest.raises(AssertionError, match="the pattern ran"):
        jsonsafe.printf_text(text.replace('"avg_ts": ', '"avg_ts": nan, "x": ', 1))
