"""nc46's stumbles (a newcomer on Debian 13 as root with Podman), each fixed as a kind.

S5. `toolkit compare` and `toolkit report` count the records of one run alike, in one wording
    (provenance.numbers_words): a decode row folded over the micro-batch counts every record folded
    into it and says so (compare said `numbers from 9 records` where the report said 10).
S8. A failed record of no one test (a Ctrl-C between tests: test `(none)`) is named by its image
    alone on the report's accounting line (`cpu: interrupted ...`, not `cpu (none): ...`).
Records are written by the test with the one record factory; nothing runs a container.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.support.records import make_record
from toolkit.cli.main import cli
from toolkit.results.records import ResultStore

RUN_A, RUN_B = "20260630T220539Z-d098b3", "20260630T220851Z-e2caf7"  # before make_record's `created`


def _two_runs(results: Path) -> None:
    """Two runs of one CPU image: pp512 at ub512 and ub2048, and tg128 at ub512 and ub2048 whose tok/s
    agree within noise (the report folds them into one decode row), as `toolkit bench -i cpu` stores."""
    store = ResultStore(results)
    for run, scale in ((RUN_A, 1.0), (RUN_B, 0.9)):
        for p, n, ub, avg in (
            (512, 0, 512, 800.0),
            (512, 0, 2048, 900.0),
            (0, 128, 512, 60.0),
            (0, 128, 2048, 61.0),
        ):
            store.add_result(
                make_record("cpu", "cpu", p=p, n=n, ub=ub, avg=avg * scale, sd=avg * 0.05, run_id=run)
            )


def _lines(out: str, start: str) -> list[str]:
    return [" ".join(x.split()) for x in out.splitlines() if x.strip().lstrip("- ").startswith(start)]


def test_compare_counts_each_sides_records_as_the_report_counts_them(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _two_runs(results)
    report = CliRunner().invoke(cli, ["report", "--results", str(results), "--format", "github"])
    assert report.exit_code == 0, report.output
    (card,) = _lines(report.stdout, "numbers from ")
    assert card.startswith(
        f"- numbers from 4 records (2 decode records folded into 1 row; 1 run: {RUN_B})"
    ), card
    args = ["compare", RUN_A, RUN_B, "--results", str(results)]
    compare = CliRunner().invoke(cli, args)
    assert compare.exit_code in (0, 6), compare.output
    sides = _lines(compare.stdout, "numbers from ")
    assert sides == ["- numbers from 4 records (2 decode records folded into 1 row)"] * 2, sides
    doc = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)["result"]
    cols = json.loads(
        CliRunner().invoke(cli, ["report", "--results", str(results), "--format", "json"]).stdout
    )
    assert doc["a"]["records"] == doc["b"]["records"] == cols["columns"][0]["records"] == 4, (doc, cols)


def test_a_failed_record_of_no_test_is_named_by_its_image(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    store.add_result(make_record("cpu", "cpu", p=512, avg=100.0, run_id=RUN_A))
    why = "interrupted (Ctrl-C) (1 of 8 tests completed and kept)"
    store.add_result(
        make_record("cpu", "cpu", avg=0.0, status="failed", error=why, run_id=RUN_A, test="(none)")
    )
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--format", "text"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())
    assert f"1 failed (cpu: {why})" in out, out
    assert "(none)" not in out, out
