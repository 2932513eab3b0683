"""brk45b: a hostile tester's findings on fix45 (invocation.command, NAME@DIGEST labels, root in a
user's results folder, the report's failed names) and the written --results option, each fixed.

Root in a user's folder: fix45 handed what root made there to the folder's owner (fchown), and a
`results -> /etc` link or a hard link the user planted made root hand over the target: the hand-over is
gone (root's files there stay root's; `sudo toolkit bench` is told to run without sudo), and these tests
hold that nothing of root's is ever given away. Records are written by the test (the toolkit's own
format); nothing runs a container. The root tests need root (chown); they are skipped elsewhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.records import make_record
from toolkit.cli.main import cli
from toolkit.results.records import ResultStore

AT_NAME = "we@ird"  # an import's --label may hold `@`


def _code(res) -> int:
    return getattr(res.exception, "exit_code", res.exit_code)


def _at_named(root: Path) -> None:
    store = ResultStore(root)
    store.add_result(make_record("cpu", "cpu", p=512, avg=100.0, digest="sha256:" + "a" * 64, run_id="run-a"))
    store.add_result(
        make_record(AT_NAME, "cpu", p=512, avg=110.0, digest="sha256:" + "b" * 64, run_id="run-b")
    )


@pytest.mark.parametrize("ref", [AT_NAME, f"{AT_NAME}@bbbbbbbbbbbb", f"{AT_NAME}@sha256:bbbb"])
def test_report_i_takes_a_name_with_an_at_whole_and_its_label(tmp_path, ref):
    """`report -i we@ird` read `we` as the name and `ird` as a digest (no results match), though at
    0ddc346 it selected the image; the label reports show, `we@ird@bbbbbbbbbbbb`, matched nothing."""
    _at_named(tmp_path / "results")
    res = CliRunner().invoke(
        cli, ["report", "--results", str(tmp_path / "results"), "-i", ref, "--format", "json"]
    )
    assert res.exit_code == 0, (res.output, res.exception)
    assert [c["column"] for c in json.loads(res.stdout)["columns"]] == [f"{AT_NAME}@bbbbbbbbbbbb"]


def test_compare_takes_the_label_of_a_name_with_an_at(tmp_path):
    _at_named(tmp_path / "results")
    res = CliRunner().invoke(
        cli, ["compare", "--results", str(tmp_path / "results"), "cpu", f"{AT_NAME}@bbbb"]
    )
    assert res.exit_code == 0, (res.output, res.exception)
    assert f"{AT_NAME}@bbbbbbbbbbbb" in res.output


def test_a_label_without_a_name_says_so(tmp_path):
    _at_named(tmp_path / "results")
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "-i", "@bbbb"])
    assert _code(res) == 4 and "image (no name)'s digests here: none" in str(res.exception)


def test_the_accounting_line_cuts_a_long_failure_reason(tmp_path):
    from toolkit.analysis import report

    store = ResultStore(tmp_path / "results")
    store.add_result(make_record("cpu", "cpu", p=512, avg=100.0, digest="sha256:" + "a" * 64, run_id="run-a"))
    bad = make_record("cpu", "cpu", g=128, avg=100.0, digest="sha256:" + "a" * 64, run_id="run-a")
    store.add_result(bad.model_copy(update={"status": "failed", "error": "A" * 10_000, "avg_ts": None}))
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    said = doc["records"].split("failed (", 1)[1]
    assert said.startswith("cpu tg") and len(said) < report.FAILED_SAID + 40, said
    assert "A" * (report.FAILED_SAID - 3) + "..." in said
    assert doc["failed"][0]["error"] == "A" * 10_000  # the json report's own list keeps it whole


def test_an_empty_results_path_of_a_writing_command_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "run.jsonl"
    src.write_text("{}\n")
    res = CliRunner().invoke(cli, ["import", "--results", "", "--label", "x", str(src)])
    assert _code(res) == 2 or _code(res) == 4
    assert "'': empty path" in res.output and not (tmp_path / "results").exists()


# ------------------------------------------------------------------- root in a user's folder


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user's needs chown (root)")
def test_a_results_link_in_a_users_folder_never_gives_its_target_to_the_user(tmp_path):
    """The user's project/results -> a folder of root's (/etc): root's import followed the link and
    handed the target to the user (fchown of the folder opened through the link)."""
    from toolkit.results import make_folders

    project, target = tmp_path / "project", tmp_path / "etc"
    project.mkdir()
    target.mkdir(mode=0o700)
    os.chown(project, 65534, 65534)
    (project / "results").symlink_to(target)
    make_folders(project / "results" / "abcdef012345", root=project / "results")
    assert target.stat().st_uid == 0
    assert (target / "abcdef012345").stat().st_uid == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user's needs chown (root)")
def test_a_hard_link_in_a_users_folder_is_not_handed_over(tmp_path):
    """A hard link the user made (where fs.protected_hardlinks is 0) to a file of root's: handing the
    file over gave the user the file of every name."""
    from toolkit.results import open_regular

    root = tmp_path / "results"
    root.mkdir()
    os.chown(root, 65534, 65534)
    secret = tmp_path / "secret"
    secret.write_text("x")
    os.link(secret, root / "builds.jsonl")
    os.close(open_regular(root / "builds.jsonl", os.O_WRONLY | os.O_APPEND, root=root))
    assert secret.stat().st_uid == 0


def test_a_json_file_of_broken_records_is_read_in_bounded_time(tmp_path):
    """brk45b M3: every record of an -o json file broken inside a value (`"a": f` / `alse`) was left out
    one by one, each costing a parse error counted over the 1 MiB block: 300,000 records took 114 s.
    After json_array.MAX_BROKEN the rest is refused in one note."""
    import time

    from toolkit.runtimes.llama_bench.json_array import MAX_BROKEN

    rec = '{"a": f\nalse}'
    (tmp_path / "m.json").write_text("[\n" + ",\n".join([rec] * 20_000) + "\n]\n")
    t0 = time.process_time()
    res = CliRunner().invoke(
        cli, ["import", "--results", str(tmp_path / "r"), "--label", "x", str(tmp_path / "m.json")]
    )
    assert time.process_time() - t0 < 30  # was ~5 s of the 114 s kind at 20,000 records; now ~0.1 s
    assert _code(res) == 4, res.output
    # the first record's note, then MAX_BROKEN - 1 more and the note that the rest is not read
    assert f"(and {MAX_BROKEN} more)" in str(res.exception), res.exception
