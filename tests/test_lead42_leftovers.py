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


def test_a_matrix_just_over_the_case_bound_says_its_count_exactly(tmp_path):
    """1001 tests x 100 micro-batches = 100,100 cases was said as `up to 1e+05 test cases, more than
    100,000`: a count that read as the bound itself."""
    import yaml

    from toolkit.core.errors import BadInput
    from toolkit.matrix.api import load_matrix

    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["bench"] |= {"n_prompt": list(range(1, 1001)), "n_gen": [128], "n_ubatch": list(range(1, 101))}
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(BadInput, match=r"up to 100,100 test cases \(n_prompt \+ n_gen 1001 x n_ubatch 100\)"):
        load_matrix(tmp_path / "matrix.yaml")
