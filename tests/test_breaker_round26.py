"""Round 26: a hostile tester of round 25's integrity rules and the report's collector pause. A window of
equal power readings (what the sampler gives where the sensor updates slower than it reads) was refused
as "a mean above its maximum"; a llama-bench record after NUL bytes, a byte-order mark or a terminal
escape on its line was read as a log line and left out without a word (and a csv row so prefixed was
filed as another build); a report that failed after its records were loaded left them frozen in the
collector's permanent generation. Inputs: the real H200 `toolkit measure` rows and the CPU llama-bench
outputs of tests/data, read through the CLI. Each test fails on the code before the fix."""

from __future__ import annotations

import gc
import json
import os
import statistics

from click.testing import CliRunner

from tests.support.project import DATA
from tests.support.runs import tk
from tests.support.stored import h200_rows, import_rows, matrix_project
from toolkit.bench.observe import window_summary
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput


def _equal_readings_block(watts: float, n: int) -> dict:
    """window_summary's GPU figures for `n` samples all reading `watts` (a sensor slower than the sampler)."""
    samples = [
        {"t": i / 10, "source": "nv", "vendor": "nvidia", "power_w": watts, "energy_j": watts * i / 10}
        for i in range(n)
    ]
    return window_summary(samples, 0.0, (n - 1) / 10)["gpus"]["nv"]


def test_a_window_of_equal_power_readings_is_a_window(tmp_path):
    """Seven samples of 149.928 W: fmean gives 149.92800000000003, an ulp above the maximum. Before, the
    block was left out at import ("power_w_mean 149.928 is above its power_w_max 149.928") and a stored
    one skipped the record: a real measurement dropped from every report."""
    g = _equal_readings_block(149.928, 7)
    assert g["power_w_mean"] > g["power_w_max"] == 149.928  # what the sampler's summary writes
    assert statistics.fmean([149.928] * 7) == g["power_w_mean"]
    tmp = matrix_project(tmp_path)
    rows = h200_rows("alone.jsonl")
    sid = next(iter(rows[0]["toolkit_telemetry"]["gpus"]))
    rows[0]["toolkit_telemetry"]["gpus"][sid].update(
        power_w_mean=g["power_w_mean"], power_w_max=g["power_w_max"]
    )
    out = import_rows(tmp, rows, "alone")
    assert "not a window's figures" not in out and "is above its power_w_max" not in out, out
    res = tk(tmp, "report", "--results", "r", "--format", "json")
    assert res.returncode == 0 and "contradicts itself" not in res.stderr, res.stderr
    assert "38.2" in tk(tmp, "report", "--results", "r", "--format", "text").stdout  # pp512's tok/J kept


def test_a_mean_above_its_maximum_beyond_rounding_is_still_refused(tmp_path):
    """Round 25's guard stands beyond rounding (a mean 0.1 W above the maximum), as a kind of its own:
    where the block claims no energy, the block is left out; where it claims a valid one, only its
    energy (round 8: the speed and the block's other figures kept). Before, the second lost the whole
    block too (round 25's pair bypassed energy_contradiction: test_breaker_round8_import failed)."""
    for claims in (False, True):
        tmp = matrix_project(tmp_path / str(claims))
        rows = h200_rows("alone.jsonl")
        t = rows[0]["toolkit_telemetry"]
        g = next(iter(t["gpus"].values()))
        g["power_w_mean"] = g["power_w_max"] + 0.1
        if not claims:
            t.update(energy_valid=False, energy_j=None, tok_per_j=None)
            g.update(
                energy_valid=False, energy_j=None, tok_per_j=None, energy_invalid_reason="window_too_short"
            )
        out = import_rows(tmp, rows, "alone")
        if claims:
            assert "is below its power_w_mean" in out and "its energy left out" in out, out
        else:
            assert "not a window's figures" in out and "is above its power_w_max" in out, out


CPU_JSONL = DATA / "llamabench-0c1e57098-cpu.jsonl"


def _prefixed(tmp_path, src, prefix: bytes, line: int = 1):
    lines = src.read_bytes().split(b"\n")
    lines[line] = prefix + lines[line]
    out = tmp_path / f"in{src.suffix}"
    out.write_bytes(b"\n".join(lines))
    return out


def _imported(tmp_path, path) -> dict:
    tmp = matrix_project(tmp_path / "p")
    res = tk(tmp, "import", "--json", "--results", "r", "--label", "x", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)["result"]


def test_a_record_after_nul_bytes_a_bom_or_an_escape_is_imported(tmp_path):
    """A crash's zero-filled block, a BOM of a file concatenated after another, a capture's colour code:
    before, the record on that line was taken for a log line, and 5 of 6 were imported without a word."""
    for i, prefix in enumerate((b"\x00" * 4096, "\ufeff".encode(), b"\x1b[0m", "\u200b".encode(), b"\x7f")):
        got = _imported(tmp_path / str(i), _prefixed(tmp_path, CPU_JSONL, prefix))
        assert got["records"] == 6, (prefix[:8], got)


def test_a_record_after_log_text_on_its_line_is_said(tmp_path):
    """A log line and a record run together (stderr merged mid-line): not read as a guess, but said;
    before, left out silently."""
    got = _imported(tmp_path, _prefixed(tmp_path, CPU_JSONL, b"llama-bench: benchmark 2/6: done "))
    assert got["records"] == 5
    said = " ".join(e for r in got["skipped"]["reasons"] for e in r["examples"])  # by reason (fix51a)
    assert ":2: a llama-bench record after 'llama-bench: benchmark 2' on its line: left out" in said, said


def test_a_csv_row_after_nul_bytes_is_read_as_its_build(tmp_path):
    """Before: the NUL (or BOM) went into build_commit (`\\x00"0c1e57098"`), filing the row as a second
    image set of another build."""
    src = DATA / "llamabench-0c1e57098-cpu.csv"
    got = _imported(tmp_path, _prefixed(tmp_path, src, b"\x00" * 8, line=3))
    assert [s["system"]["build_commit"] for s in got["sets"]] == ["0c1e57098"], got["sets"]
    assert got["records"] == 6


def test_a_report_that_fails_after_loading_leaves_nothing_frozen(tmp_path):
    """`report -i nosuch` fails (exit 4) after the records were loaded and frozen (gc.freeze): before, they
    stayed in the permanent generation of the process, which a test run or a caller of the CLI goes on
    with. The collector's state is as it was after success and failure alike."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    here = os.getcwd()
    os.chdir(tmp)
    try:
        gc.unfreeze()
        for args, error in ((["-i", "nosuch"], BadInput), (["--run", "nosuch"], BadInput), ([], None)):
            res = CliRunner().invoke(cli, ["report", "--results", "r", *args])
            assert type(res.exception) is error if error else res.exit_code == 0, res.output  # main() gives 4
            assert gc.get_freeze_count() == 0 and gc.isenabled(), (args, gc.get_freeze_count())
    finally:
        os.chdir(here)
