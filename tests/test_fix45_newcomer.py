"""nc45's stumbles (a newcomer on Debian 13 with rootless Podman), each fixed as a kind.

1. A suggested toolkit command carries the options that change what it does (--matrix, --results,
   the global --engine: toolkit.core.invocation.command): `bench --matrix stale.yaml` said "run
   `toolkit build -i cpu`", which built from matrix.yaml, and the bench was stale again.
2. The image label reports show (`cpu@abd88fb000be`) names an image in compare and report -i.
3. A build recorded on another engine (sudo: the user's rootless Podman) says which engine and how to
   reach it; root's query index is not left in a folder of another user's.
4. A YAML 1.1 boolean under flash_attn says to write 1, 0 or -1.
5. --matrix and --results say what they decide. 6. The lock names two engines only where there are
   two; the wall line's parts add up; --timeout 0 is named as typed.
Build records are written by the test (the toolkit's own format); nothing runs a container.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.support.project import seed_current_build
from tests.support.records import make_record
from toolkit.cli.main import cli
from toolkit.images import build as build_mod
from toolkit.matrix.api import load_matrix
from toolkit.results.records import ResultStore


def _code(res) -> int:
    """The exit code the CLI's main gives the result of an in-process invocation (a ToolkitError's own)."""
    return getattr(res.exception, "exit_code", res.exit_code)


# ------------------------------------------------------------------- 1. the suggested command


def _stale_copy(project: Path) -> Path:
    """stale.yaml: the project's matrix with cpu's cmake_args changed (another inputs key), its build of
    matrix.yaml's inputs recorded in results/."""
    data = yaml.safe_load((project / "matrix.yaml").read_text())
    data["images"][0]["vars"]["cmake_args"] = ["-DGGML_NATIVE=ON"]
    (project / "stale.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    seed_current_build(project, digest="sha256:" + "a" * 64)
    return project / "stale.yaml"


def _suggested(text: str) -> list[list[str]]:
    """Every `toolkit ...` command in backticks in `text`, as argument lists (without `toolkit`)."""
    return [shlex.split(m)[1:] for m in re.findall(r"`(toolkit [^`]*)`", text)]


@pytest.mark.parametrize("engine", [None, "docker"])
def test_a_stale_builds_fix_carries_matrix_results_and_engine_and_following_it_builds_what_bench_wants(
    project, tmp_path, monkeypatch, engine
):
    monkeypatch.chdir(project)
    stale = _stale_copy(project)
    res_dir = tmp_path / "res2"
    shutil.copytree(project / "results", res_dir)
    head = ["--engine", engine] if engine else []
    res = CliRunner().invoke(
        cli, [*head, "bench", "--matrix", "stale.yaml", "--results", str(res_dir), "-i", "cpu", "--dry-run"]
    )
    assert _code(res) == 4, res.output
    lines = _suggested(res.output) + _suggested(str(res.exception))
    assert len(lines) == 2 and lines[0] == lines[1], lines  # the skip line and the error agree
    words = lines[0]
    assert words == [*head, "build", "--matrix", str(stale), "--results", str(res_dir), "-i", "cpu"]
    built = CliRunner().invoke(cli, [*words, "--dry-run"])  # following it: the inputs the bench wants
    assert built.exit_code == 0, built.output
    lm = load_matrix(stale)
    wanted = build_mod.inputs_key(lm, lm.m.image("cpu")).key
    here = load_matrix(project / "matrix.yaml")
    assert wanted != build_mod.inputs_key(here, here.m.image("cpu")).key
    assert f"org.toolkit.inputs-key={wanted}" in built.output


def test_the_commands_a_hint_names_take_the_options_it_gives():
    """invocation.TAKES against the commands' own options: a hint never offers an option its command
    refuses, nor leaves out one it takes."""
    from toolkit.core import invocation

    for name, takes in invocation.TAKES.items():
        opts = {o for p in cli.get_command(None, name).params for o in p.opts}  # type: ignore[union-attr]
        assert {t for t in ("matrix", "results") if f"--{t}" in opts} == set(takes), name


def test_no_option_of_one_invocation_reaches_the_next(project, monkeypatch):
    """The options are noted for one invocation: a later caller in the same process suggests plainly."""
    from toolkit.core import invocation

    monkeypatch.chdir(project)
    CliRunner().invoke(cli, ["--engine", "docker", "report", "--results", str(project / "results")])
    assert invocation.command("build", "-i", "cpu") == "toolkit build -i cpu"


# ------------------------------------------------------------------- 2. the image label as input


def _two_images(root: Path) -> None:
    store = ResultStore(root)
    store.add_result(make_record("cpu", "cpu", p=512, avg=100.0, digest="sha256:" + "a" * 64, run_id="run-a"))
    store.add_result(
        make_record("cpu2", "cpu", p=512, avg=110.0, digest="sha256:" + "b" * 64, run_id="run-b")
    )


def test_compare_and_report_take_the_image_label_reports_show(tmp_path):
    _two_images(tmp_path / "results")
    results = str(tmp_path / "results")
    res = CliRunner().invoke(cli, ["compare", "--results", results, "cpu@aaaaaaaaaaaa", "cpu2@bbbbbbbbbbbb"])
    assert res.exit_code == 0, res.output
    assert "cpu@aaaaaaaaaaaa" in res.output and "cpu2@bbbbbbbbbbbb" in res.output
    res = CliRunner().invoke(
        cli, ["report", "--results", results, "-i", "cpu@aaaaaaaaaaaa", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    assert [c["column"] for c in json.loads(res.stdout)["columns"]] == ["cpu@aaaaaaaaaaaa"]


def test_a_label_whose_digest_is_another_images_matches_nothing_and_names_both(tmp_path):
    _two_images(tmp_path / "results")
    results = str(tmp_path / "results")
    res = CliRunner().invoke(cli, ["compare", "--results", results, "cpu@bbbbbbbbbbbb", "cpu2"])
    assert _code(res) == 4 and "no results match 'cpu@bbbbbbbbbbbb'" in str(res.exception)
    res = CliRunner().invoke(cli, ["report", "--results", results, "-i", "cpu@bbbbbbbbbbbb"])
    assert _code(res) == 4
    assert "no results match 'cpu@bbbbbbbbbbbb': image cpu's digests here: sha256:aaaaaaaaaaaa" in str(
        res.exception
    )


# ------------------------------------------------------------------- 3. another engine's builds; root


def test_builds_of_another_engine_say_which_engine_and_how_to_reach_it_before_the_build_hint(
    project, monkeypatch
):
    """The engine here is stood in for (engine_id): a second engine cannot exist on the test host."""
    from toolkit.bench.build_choice import choose_build
    from toolkit.bench.runners.base import BenchOptions
    from toolkit.engine import api as engine

    monkeypatch.chdir(project)
    monkeypatch.setattr(engine, "engine_id", lambda: "podmanroot")
    monkeypatch.setattr(engine, "inspect_image", lambda ref: None)
    seed_current_build(project, digest="sha256:" + "a" * 64, engine="podmanu4242")
    lm = load_matrix(project / "matrix.yaml")
    c = choose_build(lm, lm.m.image("cpu"), ResultStore(project / "results"), BenchOptions())
    assert c.status == "unbuilt"
    engine_part = (
        "podmanu4242 (the rootless Podman of uid 4242: run as uid 4242, without sudo, with --engine podman)"
    )
    assert engine_part in c.reason and c.reason.endswith(
        "or build it on this engine: run `toolkit build -i cpu`"
    )
    assert c.reason.index(engine_part) < c.reason.index("toolkit build")


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user's needs chown (root)")
def test_root_leaves_no_index_in_a_results_folder_of_another_users(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    _two_images(tmp_path / "results")
    os.chown(tmp_path / "results", 65534, 65534)
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results")])
    assert res.exit_code == 0, res.output
    assert not list((tmp_path / "results").glob(".index*"))
    assert list((tmp_path / "state" / "toolkit" / "indexes").glob("*.sqlite"))  # beside root's key


# ------------------------------------------------------------------- 4. flash_attn: [on]


def test_a_yaml_boolean_under_flash_attn_says_write_1_0_or_minus_1(project, monkeypatch):
    monkeypatch.chdir(project)
    text = (project / "matrix.yaml").read_text()
    assert re.search(r"flash_attn: \[1\]", text)
    (project / "matrix.yaml").write_text(re.sub(r"flash_attn: \[1\]", "flash_attn: [on]", text, count=1))
    res = CliRunner().invoke(cli, ["bench", "--dry-run"])
    assert _code(res) == 4
    assert "'on' is read by YAML 1.1 as a boolean (True); write 1, 0 or -1, or quote" in str(res.exception)


def test_a_yaml_boolean_elsewhere_still_says_true_or_false(project, monkeypatch):
    monkeypatch.chdir(project)
    text = (project / "matrix.yaml").read_text()
    (project / "matrix.yaml").write_text(text.replace("schema_version:", "x_note: yes\nschema_version:", 1))
    res = CliRunner().invoke(cli, ["bench", "--dry-run"])
    assert _code(res) == 4 and "write true or false" in str(res.exception)


# ------------------------------------------------------------------- 5. --help says what they decide


@pytest.mark.parametrize("command", ["bench", "build"])
def test_help_of_matrix_and_results_says_what_they_decide(command):
    out = " ".join(CliRunner().invoke(cli, [command, "--help"]).output.split())
    assert "the Dockerfile.templates/, images/ and results/ used are those beside it" in out
    assert "a bench measures only the builds recorded in its own --results folder: a new folder needs" in out


# ------------------------------------------------------------------- 6. cosmetic


def test_the_lock_names_two_engines_only_where_there_are_two(tmp_path):
    from toolkit.bench import guard

    lock = guard.ResultsLock(tmp_path, "run-b", "engineB")
    same = lock._describe(json.dumps({"run_id": "run-a", "pid": 7, "engine": "engineB"}).encode())
    other = lock._describe(json.dumps({"run_id": "run-a", "pid": 7, "engine": "engineA"}).encode())
    assert "two container engines" not in same and "from this container engine" in same
    assert "from container engine engineA: two container engines of one host share" in other


@pytest.mark.parametrize(("wall", "tests"), [(0.26, 0.14), (0.34, 0.14), (61.94, 53.46), (1.05, 0.05)])
def test_the_wall_lines_parts_add_up(wall, tests):
    from toolkit.bench.runners.base import Outcome

    o = Outcome("cpu", "m", "ok", timing={"wall_s": wall, "tests_s": tests, "startup_s": wall - tests})
    w, t, s = map(
        float, re.search(r"wall (\S+) s = measurement (\S+) s \+ .*warm-up (\S+) s", o.line()).groups()
    )
    assert round(t + s, 1) == w


@pytest.mark.parametrize(
    ("given", "shown"), [("0", "0 is not"), ("0.5", "0.5 is not"), ("1e9", "1e9 is not")]
)
def test_a_seconds_option_out_of_range_is_named_as_typed(given, shown):
    res = CliRunner().invoke(cli, ["bench", "--timeout", given])
    assert (
        res.exit_code == 2
        and f"Invalid value for '--timeout': {shown} in the range 1<=x<=604800" in res.output
    )


# ------------------------------------------------------------------- 7. the failed records by name


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_the_accounting_line_names_the_failed_records_as_json_lists_them(tmp_path, fmt):
    store = ResultStore(tmp_path / "results")
    store.add_result(make_record("cpu", "cpu", p=512, avg=100.0))
    for p in (64, 128, 256, 1024, 2048):
        store.add_result(
            make_record("cpu", "cpu", p=p, avg=0.0, status="failed", error="interrupted (Ctrl-C)")
        )
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--format", fmt])
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())
    assert "5 failed (cpu pp1024: interrupted (Ctrl-C); cpu pp128: interrupted (Ctrl-C); cpu pp2048: " in out
    assert "interrupted (Ctrl-C) and 2 more)" in out
