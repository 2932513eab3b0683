"""nc48b: a newcomer on a fresh Debian 13 stand-in (sudo user, rootless Podman 5), from the README.

S1: `toolkit tune -i cpu --axis decode --values flash_attn=2` ended in a traceback (KeyError: 2, exit 1)
    and `--values flash_attn=-1,1` (-1: llama-bench's auto, which matrix.yaml takes) was refused with
    "give at least one value >= 1": --values held a knob to no range of its own. Now every knob's
    values are held to tune.KNOB_RANGE (the matrix's: flash_attn -1..1), refused naming it (exit 4).
S2: `toolkit tune -i cpu --axis decode --values n_ubatch=64,128` said "add --knob n_ubatch", and the
    command so mended is refused ("--axis decode searches flash_attn, threads only"); `--values
    threads=...` on a GPU image said the same of `--knob threads`. Now --values of a knob the axis or
    the image refuses says that refusal at once.
S3: `toolkit report -h` (and every command's -h): "No such option '-h'" (exit 4). Now -h is --help.
S4: `toolkit import` of a llama-bench row of one repetition with stddev_ts 500 imported it (exit 0):
    llama-bench's stddev of one value is 0, so no row it wrote says that. Now refused (exit 4).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from toolkit.cli.main import cli
from toolkit.cli.tune import _search_space
from toolkit.core.errors import BadInput
from toolkit.matrix.loading import load_matrix

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl"


def _space(image: str, values: tuple[str, ...], axis: str = "decode", knobs: tuple[str, ...] = ()):
    lm = load_matrix(ROOT / "matrix.yaml")
    return _search_space(lm.m.image(image), lm.m.bench, knobs, values, 128, axis)


@pytest.mark.parametrize(
    "values, said",
    [
        (("flash_attn=2",), "flash_attn takes whole numbers from -1 to 1"),
        (("flash_attn=0,1,7",), "flash_attn takes whole numbers from -1 to 1"),
        (("threads=0",), "threads takes whole numbers from 1 to"),
        (("n_ubatch=64,128",), "--axis decode searches flash_attn, threads only"),
        (("n_batch=512",), "--axis decode searches flash_attn, threads only"),
    ],
)
def test_tune_values_outside_a_knobs_range_or_axis_are_refused_saying_why(values, said):
    with pytest.raises(BadInput, match=said) as refused:
        _space("cpu", values)
    assert "add --knob" not in str(refused.value)  # never a mend that is refused in turn


def test_tune_values_take_what_the_matrix_takes_and_refuse_a_gpu_images_threads():
    assert _space("cpu", ("flash_attn=-1,1",))["flash_attn"] == [-1, 1]  # -fa auto, as matrix.yaml
    with pytest.raises(BadInput, match="only for CPU images"):
        _space("vulkan", ("threads=2",), axis="prefill")
    with pytest.raises(BadInput, match="add --knob n_batch"):  # a knob the axis searches: that mend works
        _space("cpu", ("n_batch=512",), axis="prefill")
    assert _space("cpu", ("n_batch=512",), axis="prefill", knobs=("n_batch",))["n_batch"] == [512]


def _commands(cmd: click.Command, path: list[str]) -> list[list[str]]:
    out = [path]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += _commands(sub, [*path, name])
    return out


def test_every_command_takes_h_for_its_help():
    for path in _commands(cli, []):
        got = CliRunner().invoke(cli, [*path, "-h"])
        assert got.exit_code == 0 and got.output.startswith("Usage: "), (path, got.output)
        assert got.output == CliRunner().invoke(cli, [*path, "--help"]).output


def test_a_row_of_one_repetition_with_a_spread_is_refused_by_import(tmp_path, monkeypatch):
    (tmp_path / "matrix.yaml").write_text((ROOT / "matrix.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    row = json.loads(ROWS.read_text().splitlines()[0])
    one = {**row, "samples_ns": row["samples_ns"][-1:], "samples_ts": row["samples_ts"][-1:]}
    one["avg_ns"], one["avg_ts"] = one["samples_ns"][0], one["samples_ts"][0]
    for name, sd in (("spread", 500.0), ("none", 0.0)):
        (tmp_path / f"{name}.jsonl").write_text(json.dumps({**one, "stddev_ts": sd, "stddev_ns": 0}) + "\n")
    refused = CliRunner().invoke(cli, ["import", "spread.jsonl", "--label", "bare"])
    assert getattr(refused.exception, "exit_code", None) == 4, refused.output
    assert "stddev_ts 500 of 1 repetition" in str(refused.exception)
    kept = CliRunner().invoke(cli, ["import", "none.jsonl", "--label", "bare"])  # what llama-bench writes
    assert kept.exit_code == 0 and "imported 1 result" in kept.output, kept.output


def test_a_resumed_bench_says_its_tables_leave_out_the_cases_measured_before_only_where_some_were(
    tmp_path, capsys
):
    """nc48b S5: a resumed bench's closing tables hold its own run's rows (8 of the sweep's 10): it says
    so, naming the report that shows them all, where an earlier run stored an ok record of the same
    image digest + model; a --resume that found nothing measured before says nothing of it."""
    from tests.support.records import make_record
    from toolkit.cli.bench import _print_bench
    from toolkit.results.records import ResultStore

    note = "--resume: the cases measured before by earlier runs are not in these tables"
    store = ResultStore(tmp_path / "r")
    store.add_result(make_record("cpu", "cpu", p=512, avg=2400.0, run_id="run-b"))
    _print_bench([], store, "run-b", dry_run=False, resume=True)
    assert note not in capsys.readouterr().out  # nothing earlier: the claim would be false
    store.add_result(make_record("cpu", "cpu", p=2048, avg=2300.0, run_id="run-a"))
    _print_bench([], store, "run-b", dry_run=False, resume=True)
    out = capsys.readouterr().out
    assert note in out and "`toolkit report` shows them beside these" in out, out
    _print_bench([], store, "run-b", dry_run=False, resume=False)
    assert note not in capsys.readouterr().out
