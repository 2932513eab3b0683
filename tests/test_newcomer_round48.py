"""nc48: a newcomer on a fresh Debian 12 stand-in (rootless Podman 4), from the README.

S3: `toolkit report` with nothing measured said "run `toolkit bench` or `toolkit import`": in a fresh
    project (no results/) and in a new --results folder, the bench pasted measured nothing (exit 2:
    "cpu: skipped: not built" / "no build of cpu is recorded in R/builds.jsonl"), and `toolkit import`
    pasted is a usage error (exit 4: missing FILES and --label). Now both say `build && bench` (a bench
    measures the builds of its own results folder) and `import FILE --label NAME`; the import pasted
    with a llama-bench file in place of FILE imports.
S5: `toolkit tune -i cpu --axis prefill --tokens 512 --knob n_ubatch --budget 10m` (tune's --help
    example) on a busy host: every trial flagged host-busy, yet "best: the matrix default (n_ubatch=512)"
    and n_ubatch=2048 "dropped early as a clear loser" at the same effective micro-batch (512): a
    default that wins on flagged trials was called best, where docs/running.md says an answer on
    flagged trials is "not decided". Now a default's win with a flagged trial of any setting it beat,
    or of its own, is not decided, on the prefill, decode and depth axes alike (tune.held).
S6: `toolkit import` of `toolkit report --format csv -o r.csv` (the toolkit's own report) "imported 20
    results" (exit 0): every report column (digest, host, run_id, flags, ...) became a test field, a
    table 20 columns wide, where its bench.jsonl and its markdown report are refused naming what they
    are. Now a line of the report's csv is refused the same way (exit 4), nothing imported.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from tests.support.records import make_record
from tests.support.telemetry_fakes import supporting_block
from toolkit.bench import tune, tune_depth
from toolkit.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl"


def _hint(said: str, name: str) -> list[str]:
    """The backticked command of `said` that runs `toolkit ... NAME`, as argv words."""
    found = [c for c in re.findall(r"`([^`]+)`", said) if re.search(rf"\btoolkit\b.*\b{name}\b", c)]
    assert found, said
    return shlex.split(found[0])


def test_an_empty_report_offers_build_and_bench_and_an_import_that_works_as_printed(tmp_path, monkeypatch):
    (tmp_path / "matrix.yaml").write_text((ROOT / "matrix.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    fresh = CliRunner().invoke(cli, ["report"])  # a fresh project: no results/ yet
    (tmp_path / "new").mkdir()
    empty = CliRunner().invoke(cli, ["report", "--results", "new"])  # a new, empty results folder
    assert fresh.exit_code == 0 and empty.exit_code == 0, (fresh, empty.output)  # one state (fix48c S3)
    for said, results in ((fresh.output, []), (empty.output, ["--results", "new"])):
        assert f"`toolkit build{' ' if results else ''}{' '.join(results)} && toolkit bench" in said, said
        words = _hint(said, "import")
        assert words[:2] == ["toolkit", "import"] and "FILE" in words, said
        pasted = [str(ROWS) if w == "FILE" else "bare" if w == "NAME" else w for w in words[1:]]
        got = CliRunner().invoke(cli, pasted)
        assert got.exit_code == 0 and "imported" in got.output, (pasted, got.output)
    assert "bare" in CliRunner().invoke(cli, ["report", "--results", "new"]).output


def _trial(ub: int, samples: list[float], depth: int = 0, busy: bool = False):
    r = make_record(
        "cpu", "cpu", p=512, ub=ub, avg=sum(samples) / len(samples), gpu_info="", raw={"samples_ts": samples}
    )
    r.n_depth = depth
    r.__pydantic_extra__ = {**(r.model_extra or {}), "tune": {"session": "s1", "round": 1}}
    if busy:  # as the runner stores a telemetry flag, with the block that raised it
        r.__pydantic_extra__["flags"] = ["host-busy"]
        r.telemetry = supporting_block(["host-busy"])
    return r


def test_a_default_that_wins_on_flagged_trials_is_not_decided_on_every_axis():
    default = tune.Candidate((("n_ubatch", 512),))
    for busy in ((), (0,), (1,)):  # none flagged; the default's trial; the beaten setting's trial
        recs = [
            _trial(512, [3518.0, 4573.0, 2462.0], busy=0 in busy),
            _trial(2048, [1151.0, 1502.0, 801.0], busy=1 in busy),
        ]
        depth = recs + [
            _trial(512, [900.0, 910.0, 890.0], 512, 0 in busy),
            _trial(2048, [500.0, 505.0, 495.0], 512),
        ]
        for res in (
            tune.best_setting(recs, "s1", ["n_ubatch"], default),
            tune_depth.best_over_depth(depth, "s1", ["n_ubatch"], default),
        ):
            assert res.best is not None and res.best.candidate == default
            text = tune.format_result(res)
            if busy:
                assert "flagged (host-busy)" in res.undecided and "best: " not in text, text
                assert "not decided: " in text and "the matrix default stays" in text, text
            else:
                assert res.undecided == "" and "best: the matrix default (n_ubatch=512)" in text, text


def test_the_toolkits_own_report_csv_is_refused_by_import_naming_what_it_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    imported = runner.invoke(cli, ["import", "--results", "r", "--label", "bare", str(ROWS)])
    assert imported.exit_code == 0, imported.output
    made = runner.invoke(cli, ["report", "--results", "r", "--format", "csv", "-o", "r.csv"])
    assert made.exit_code == 0 and "run_id" in (tmp_path / "r.csv").read_text().splitlines()[0], made.output
    got = runner.invoke(cli, ["import", "--results", "again", "--label", "x", "r.csv"])
    said = str(got.exception)
    assert getattr(got.exception, "exit_code", None) == 4, (got.output, said)
    assert (
        "a line of the toolkit's own report (`toolkit report --format csv`), not llama-bench output" in said
    )
    assert "--results DIR" in said and not list(tmp_path.glob("again/*/bench.jsonl")), said
