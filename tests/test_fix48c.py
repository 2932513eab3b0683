"""fix48c: what the newcomer on a fresh Debian 12 Podman host found (nc48), each kind fixed.

S1: `toolkit -h` / `toolkit bench -h`: "No such option '-h'" (exit 4); -h is --help on every command.
S3: "nothing measured yet" exited 4 in a fresh project (no results/) and 0 with an empty results/: one
    state, one code (docs/exit-codes.md: report says "no results yet", exit 0; compare is bad input).
S6: compare's hint offered `toolkit build -i nosuch && toolkit bench -i nosuch` for a name the matrix
    lacks (pasted: "no image named 'nosuch'", exit 4).
S7: a folder holding only a model file was taken as a new results folder, and `bench --dry-run` wrote
    .index.sqlite into it; a reader or a dry run of a folder with no record wrote its index there.
S8: export-run noted "never pushed: reproduce needs --rebuild" though this host's engine holds the image.
S9: reproduce's table split tg128 ub512 / ub2048 where the published report folds them (a busy re-run
    spread its ubs beyond noise).
S10: one model file as two rows, two models and "tiny-qwen3moe, tiny-qwen3moe.gguf is a tiny stand-in
    model": the bench's (sha256 known) and the llama-bench import's (no sha256) of the same file.
S11: after Ctrl-C and a --resume that measured every missing case, the report still said "1 failed
    (cpu: interrupted ...)".
S12 (tests/test_pins.py, Podman): image pins were "unreachable", as if the network had failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.records import make_record
from toolkit.analysis import report
from toolkit.cli.main import cli
from toolkit.results.records import NO_TEST, ResultStore

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def _commands(cmd=cli, path=()):
    """Every command and subcommand, as argv words."""
    out = [list(path)]
    for name in sorted(getattr(cmd, "commands", {})):
        out += _commands(cmd.commands[name], (*path, name))
    return out


@pytest.mark.parametrize("words", _commands(), ids=lambda w: " ".join(w) or "toolkit")
def test_dash_h_is_help_on_every_command(words):
    long, short = (CliRunner().invoke(cli, [*words, flag]) for flag in ("--help", "-h"))
    assert short.exit_code == 0 and short.output == long.output, short.output[-300:]
    assert "-h, --help" in short.output


@pytest.mark.parametrize("fmt", ["text", "json", "csv"])
def test_nothing_measured_yet_is_one_answer_with_or_without_results(tmp_path, monkeypatch, fmt):
    (tmp_path / "matrix.yaml").write_text((ROOT / "matrix.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    absent = CliRunner().invoke(cli, ["report", "--format", fmt])
    assert not (tmp_path / "results").exists()  # a reader makes no folder
    (tmp_path / "results").mkdir()
    empty = CliRunner().invoke(cli, ["report", "--format", fmt])
    assert (absent.exit_code, absent.output) == (empty.exit_code, empty.output) and empty.exit_code == 0, (
        absent.output,
        empty.output,
    )
    assert list((tmp_path / "results").iterdir()) == []  # no index written for a folder of no record
    for c in (CliRunner().invoke(cli, ["compare", "cpu", "vulkan"]),):  # it names what to read: bad input
        assert getattr(c.exception, "exit_code", None) == 4, c.output


def test_compare_offers_a_build_only_for_an_image_of_the_matrix(tmp_path, monkeypatch):
    (tmp_path / "matrix.yaml").write_text((ROOT / "matrix.yaml").read_text())  # no templates: names read
    monkeypatch.chdir(tmp_path)
    ResultStore(tmp_path / "results").add_result(make_record("cpu", "cpu", p=512, avg=2400.0, run_id="run-a"))
    nosuch = str(CliRunner().invoke(cli, ["compare", "cpu", "nosuch"]).exception)
    assert "nosuch is no image of matrix.yaml" in nosuch and "-i nosuch" not in nosuch, nosuch
    vulkan = str(CliRunner().invoke(cli, ["compare", "cpu", "vulkan"]).exception)
    assert "`toolkit build -i vulkan && toolkit bench -i vulkan`" in vulkan, vulkan
    typo = str(CliRunner().invoke(cli, ["compare", "cpu", "vulkn"]).exception)  # a typo of a matrix image
    assert "did you mean 'vulkan'?" in typo and "-i vulkn" not in typo, typo


def _tk(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


@pytest.mark.parametrize("name", ["tiny-qwen3moe.gguf", "model.safetensors"])
def test_a_folder_of_one_model_file_is_no_results_folder_and_a_dry_run_writes_nothing(tmp_path, name):
    models, new = tmp_path / "models", tmp_path / "new"
    models.mkdir()
    new.mkdir()
    (models / name).write_bytes(b"GGUF\x03\x00\x00\x00")
    for args in (["report"], ["bench", "--dry-run"]):
        got = _tk(ROOT, args[0], "--results", str(models), *args[1:])
        assert got.returncode == 4 and f"it holds {name}, which no results folder holds" in got.stderr, (
            got.stderr
        )
    assert [p.name for p in models.iterdir()] == [name]
    got = _tk(ROOT, "bench", "--results", str(new), "--dry-run")  # a new folder: taken, nothing written
    assert got.returncode == 0, got.stderr
    assert list(new.iterdir()) == [], list(new.iterdir())


def test_export_runs_never_pushed_note_says_this_host_reproduces_from_its_engine(tmp_path, matrix_data):
    from tests.support.project import cpu_project
    from tests.support.runs import bench_records, tk

    proj = tmp_path / "proj"
    cpu_project(proj, matrix_data)
    store = ResultStore(proj / "results")
    list(map(store.add_result, bench_records("run-p")))
    assert tk(proj, "export-run", "run-p", "-o", str(tmp_path / "out")).returncode == 0
    notes = json.loads((tmp_path / "out" / "run.json").read_text())["notes"]
    said = next(n for n in notes if "never pushed" in n)
    assert (
        "reproduce on another host (or on this one once its engine no longer holds the image) needs --rebuild"
        in said
    )


def _tg(ub: int, avg: float, run: str):
    return make_record("cpu", "cpu", n=128, ub=ub, avg=avg, sd=1.0, run_id=run)


def test_reproduces_rows_are_the_published_reports_whatever_a_busy_rerun_spread():
    from toolkit.publish.reproduce import compare_records

    recorded = [_tg(512, 100.0, "a"), _tg(2048, 101.0, "a")]  # the report folds them: one tg128 row
    busy = [_tg(512, 100.0, "b"), _tg(2048, 140.0, "b")]  # a re-run whose ub2048 a busy host slowed apart
    rows = compare_records(recorded, busy, 5)
    assert [r.test for r in rows] == ["tg128"] and rows[0].reproduced.n_ubatch == 512, [r.test for r in rows]
    apart = [_tg(512, 100.0, "a"), _tg(2048, 140.0, "a")]  # recorded apart: the report keeps two rows too
    assert [r.test for r in compare_records(apart, busy, 5)] == ["tg128 ub512", "tg128 ub2048"]


def _at(created: str, run: str, **kw):
    r = make_record("cpu", "cpu", run_id=run, **kw)
    r.created = created
    return r


def _cut(created: str, run: str):
    """The failed record of a bench stopped by Ctrl-C between tests (records.NO_TEST)."""
    why = "interrupted (Ctrl-C) (1 of 2 tests completed and kept)"
    return _at(created, run, avg=0.0, status="failed", test=NO_TEST, error=why)


def test_a_run_a_resume_completed_is_not_failed_and_a_later_failure_still_is():
    cut = [_at("2026-12-07T08:00:00+00:00", "r1", p=512, avg=100.0), _cut("2026-12-07T08:00:01+00:00", "r1")]
    resumed = [_at("2026-12-07T08:05:00+00:00", "r2", n=128, avg=50.0)]
    md = report.render(cut, "github")
    assert "1 failed (cpu: interrupted" in md, md[-600:]
    md = report.render(cut + resumed, "github")
    assert "0 failed" in md and "interrupted" not in md, md[-600:]
    assert json.loads(report.render(cut + resumed, "json"))["failed"] == []
    again = _cut("2026-12-07T08:05:01+00:00", "r2")  # the resume stopped too: both failures stand
    assert "2 failed" in report.render(cut + resumed + [again], "github")
    before = [_at("2026-12-07T07:00:00+00:00", "r0", n=128, avg=50.0)]  # a clean run before it: no cure
    assert "1 failed (cpu: interrupted" in report.render(before + cut, "github")


def test_a_pin_this_host_cannot_look_up_is_unchecked_not_unreachable(monkeypatch):
    """S12 without Podman (tests/test_pins.py's e2e runs the real one): the count line and the exit code."""
    from toolkit.images import pins as pins_mod

    pin = pins_mod.Pin("image", "debian:trixie-slim@sha256:" + "a" * 64, "sha256:" + "a" * 64, ("m",), None)
    said = "not checked here: Podman has no registry lookup"
    unchecked, down = pins_mod.PinResult(pin, "unchecked", None, said), pins_mod.PinResult(pin, "unreachable")
    for rows, code in (([unchecked], 0), ([unchecked, down], 11)):
        monkeypatch.setattr(pins_mod, "check_pins", lambda *a, rows=rows, **k: rows)
        res = CliRunner().invoke(cli, ["pins", "--matrix", str(ROOT / "matrix.yaml")])
        assert getattr(res.exception, "exit_code", res.exit_code) == code, res.output
    assert "0 unreachable, 1 unchecked (unchecked = not checked here" in pins_mod.format_pins([unchecked])
