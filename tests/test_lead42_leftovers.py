"""Leftovers of the fourteenth session's helpers (nc42, hunt42), each a fault a user meets:

- a hand-written llama-bench row whose speed is misspelled (`avg_tps`) was refused as "no avg_ts or
  avg_ns (a cut-off row?)": the misspelled key is now named with the guess;
- a csv line of 1,025 fields passed the 1,024-cell bound (its commas were counted, one fewer than its
  fields) though the refusal says "more than 1024".
"""

from __future__ import annotations

import json

import pytest

from tests.support.project import ROOT
from tests.support.runs import tk
from toolkit.runtimes.llama_bench import cut_records

ROWS = ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl"


def test_a_misspelled_speed_is_named_with_the_guess(tmp_path):
    rows = [json.loads(ln) for ln in ROWS.read_text().splitlines()]
    for r in rows:
        r["avg_tps"] = r.pop("avg_ts")
        r.pop("avg_ns")
    (tmp_path / "hand.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = tk(tmp_path, "import", "hand.jsonl", "--label", "hand", "--results", "r")
    assert got.returncode == 4, got.stdout + got.stderr
    assert "'avg_tps' (did you mean avg_ts?) is no llama-bench field" in got.stderr, got.stderr


def test_a_row_without_a_speed_or_a_near_name_is_still_a_cut_off_row(tmp_path):
    rows = [json.loads(ln) for ln in ROWS.read_text().splitlines()]
    for r in rows:
        r.pop("avg_ts"), r.pop("avg_ns")
    (tmp_path / "cut.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = tk(tmp_path, "import", "cut.jsonl", "--label", "cut", "--results", "r")
    assert got.returncode == 4 and "no avg_ts or avg_ns (a cut-off row?)" in got.stderr, got.stderr


@pytest.mark.parametrize(("fields", "refused"), [(1024, False), (1025, True)])
def test_a_csv_line_of_more_than_max_cells_fields_is_refused(fields, refused):
    line = ",".join(["x"] * fields)
    lines = cut_records.CsvLines([line])
    if refused:
        with pytest.raises(cut_records.WideLine):
            next(lines)
    else:
        assert next(lines) == line
