"""Breaker round 9 (2026-12-03): physically impossible energy that passed the round-8 checks, and a
stored `between_runs` that crashed the text report. Inputs in tests/data/breaker9/ are the tester's
reproducers (a real pp512 row of the CPU image with a `toolkit measure` telemetry block edited)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.project import DATA, ROOT
from tests.support.runs import tk

B9 = DATA / "breaker9"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (
            "tiny_window",
            "inf tok/s: faster than the row's",
        ),  # 2560 tokens in 1e-320 s: tok/J inf, json traceback
        ("tokens_str", "tokens is 256000000: not a number"),  # a text skipped the checks, then was read
        ("tokens_bool", "tokens is True: not a number"),
        ("nosamples", "faster than the row's"),  # 512 x 1e6 tokens in 0.19 s at 13,331 t/s
    ],
)
def test_imported_energy_that_contradicts_the_rows_speed_is_left_out(
    tmp_path: Path, name: str, why: str
) -> None:
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    res = tk(tmp_path, "import", "--results", "r", "--label", name, str(B9 / f"{name}.jsonl"))
    assert res.returncode == 0 and why in res.stdout + res.stderr, res.stdout + res.stderr
    rep = tk(tmp_path, "report", "--results", "r", "--format", "json")
    assert rep.returncode == 0, rep.stderr
    assert "Infinity" not in rep.stdout and "NaN" not in rep.stdout
    text = tk(tmp_path, "report", "--results", "r")
    assert text.returncode == 0 and "energy-invalid:energy_contradicts_window" in text.stdout, text.stdout
    assert " inf " not in text.stdout and "3822676" not in text.stdout and "7645352" not in text.stdout


@pytest.mark.parametrize("name", ["res_br_nokey", "res_br_list"])
def test_a_stored_between_runs_that_is_not_combine_runs_is_skipped_not_a_traceback(
    tmp_path: Path, name: str
) -> None:
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    folder = tmp_path / "r" / "0d069551e9a8"
    folder.mkdir(parents=True)
    shutil.copy(B9 / f"{name}.bench.jsonl", folder / "bench.jsonl")
    for args in (("report",), ("report", "--format", "github"), ("report", "--format", "json")):
        res = tk(tmp_path, *args, "--results", "r")
        assert res.returncode in (0, 2) and "Traceback" not in res.stderr, res.stderr
        assert "skipped a record that contradicts itself: between_runs" in res.stderr, res.stderr


def test_between_runs_whose_means_are_not_the_records_avg_ts_is_skipped(tmp_path: Path) -> None:
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    rec = json.loads((B9 / "res_br_means.bench.jsonl").read_text().splitlines()[0])
    rec["between_runs"] = {"runs": 3, "means": [100.0, 200.0, 300.0], "spread_pct": 100.0}
    folder = tmp_path / "r" / "0d069551e9a8"
    folder.mkdir(parents=True)
    (folder / "bench.jsonl").write_text(json.dumps(rec) + "\n")
    res = tk(tmp_path, "report", "--results", "r")
    assert "is not the mean of between_runs.means (200)" in res.stderr, res.stderr
