"""CLI level: --help for every command, bad input exit codes, README and CI stay in step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_has_actionable_help(command):
    res = CliRunner().invoke(cli, [command, "--help"])
    assert res.exit_code == 0
    assert (
        "Usage: cli " + command in res.output
        or f"Usage: toolkit {command}" in res.output
        or "Usage:" in res.output
    )
    doc = cli.commands[command].help or ""
    assert len(doc.split()) >= 8, f"{command} --help is too thin to act on"


def test_main_job_commands_exist():
    for c in ("render", "build", "bench", "report", "doctor"):
        assert c in cli.commands


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = [
        ln
        for ln in (ROOT / ".ci" / "run").read_text().splitlines()
        if ln and not ln.startswith(("#", "set ", "cd "))
    ]
    assert ci and all(line in readme for line in ci)


def test_module_entry_point_and_bad_matrix_exit_code(tmp_path):
    bad = tmp_path / "matrix.yaml"
    bad.write_text("schema_version: 1\nimages: []\nmodels: []\nbenchh: {}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit", "render", "--matrix", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 4
    assert "unknown key 'benchh'" in proc.stderr and "did you mean 'bench'" in proc.stderr
    assert str(bad) in proc.stderr


def test_render_prints_build_commands(tmp_path):
    import shutil

    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    res = CliRunner().invoke(
        cli, ["render", "--matrix", str(tmp_path / "matrix.yaml")], catch_exceptions=False
    )
    assert res.exit_code == 0
    assert "docker buildx build --progress=plain --network host --load -t toolkit/cpu:latest" in res.output
    assert (tmp_path / "images" / "cpu" / "Dockerfile").is_file()


def test_every_json_output_is_strict_json_through_one_serialiser():
    """`--json` goes through cli.common.echo_json: a NaN figure is null (strict JSON), a dataclass, a
    pydantic model, a path and a date come out as JSON types, never as Python reprs."""
    import dataclasses
    import datetime as dt
    import json as _json
    from pathlib import Path as _Path

    from pydantic import BaseModel

    from toolkit.cli.common import to_jsonable

    class M(BaseModel):
        x: float

    @dataclasses.dataclass
    class D:
        p: _Path
        when: dt.datetime
        tags: set
        m: M

    out = to_jsonable(
        [
            D(_Path("/r/a"), dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.timezone.utc), {"b", "a"}, M(x=1.5)),
            float("nan"),
        ]
    )
    assert out == [
        {"p": "/r/a", "when": "2026-01-02T03:04:00+00:00", "tags": ["a", "b"], "m": {"x": 1.5}},
        None,
    ]
    _json.dumps(out, allow_nan=False)  # raises on NaN: the output is strict


@pytest.mark.parametrize(
    "args",
    [
        ["import", "--json", "--label", "x", "/nonexistent/rows.jsonl"],
        ["compare", "a", "b", "--json"],
        ["campaign", "status", "--json", "nope"],
        ["reproduce", "/nonexistent", "--json"],
        ["report", "--format", "json", "--no-such-option"],
        ["compare", "--json", "--no-such-option"],
    ],
)
def test_an_error_with_json_is_one_json_object_on_stdout(tmp_path, monkeypatch, capsys, args):
    """With --json (or --format json) an error is also one JSON object on stdout, {error, exit_code},
    so a caller's json.loads of stdout works; the message stays on stderr."""
    import json

    from toolkit.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["toolkit", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    out, err = capsys.readouterr()
    got = json.loads(out)
    assert exc.value.code == got["exit_code"] == 4 and got["error"] and got["error"] in err


def test_an_error_without_json_prints_nothing_on_stdout(tmp_path, monkeypatch, capsys):
    from toolkit.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["toolkit", "compare", "a", "b"])
    with pytest.raises(SystemExit):
        main()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "args",
    [
        ["report"],
        ["compare", "a", "b"],
        ["export-run", "run-1", "--output", "x"],
        ["doctor"],
        ["push"],
        ["campaign", "status", "c1"],
        ["campaign", "cancel", "c1"],
    ],
)
def test_results_that_does_not_exist_is_bad_input_for_a_reading_command(tmp_path, monkeypatch, capsys, args):
    """docs/exit-codes.md: a path that does not exist is bad input (4), not "no results yet" (0)."""
    from toolkit.cli.main import main

    monkeypatch.chdir(tmp_path)
    missing = str(tmp_path / "nonexistent")
    monkeypatch.setattr(sys, "argv", ["toolkit", *args, "--results", missing])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 4 and "does not exist" in capsys.readouterr().err
    assert not Path(missing).exists()


def test_an_empty_report_says_so_without_loading_the_report_stack(tmp_path):
    """Reproducer (issue 32 item 14): an empty `report` imported the whole report stack (~0.3 s) to say
    there is nothing. The same words as a report of no records, from the same constant."""
    import subprocess
    import sys

    from toolkit.analysis import report

    (tmp_path / "results" / "abc").mkdir(parents=True)
    (tmp_path / "results" / "abc" / "bench.jsonl").write_text("")  # an empty file is no record
    code = (
        "import sys; from toolkit.cli.main import main\n"
        f"sys.argv = ['toolkit', 'report', '--results', {str(tmp_path / 'results')!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('loaded' if 'toolkit.analysis.report' in sys.modules else 'light', file=sys.stderr)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert p.stdout.strip() == report.render([], "github") and p.stderr.strip() == "light", p.stderr


def test_the_documented_shell_completion_completes_commands_and_options():
    """README: `eval "$(_TOOLKIT_COMPLETE=bash_source toolkit)"` (issue 33: completion was undocumented)."""
    import os
    import subprocess
    import sys

    def complete(words: str, cword: int) -> str:
        env = {
            **os.environ,
            "COMP_WORDS": words,
            "COMP_CWORD": str(cword),
            "_TOOLKIT_COMPLETE": "bash_complete",
        }
        code = "import sys; sys.argv[0] = 'toolkit'; from toolkit.cli.main import main; main()"
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout

    assert "plain,report" in complete("toolkit rep", 1)
    assert "plain,--format" in complete("toolkit report --fo", 2)


def test_doctor_outside_the_project_says_the_hosts_facts_and_where_to_run_it(tmp_path, monkeypatch):
    """Newcomer round 29: `toolkit doctor` from a folder without matrix.yaml exited 4 ("matrix file not
    found") although the host's facts (GPUs, engine, kernel) need no matrix. It reads the host, says no
    image was judged and where to run it for that; a --matrix that is not there is still bad input."""
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["doctor"])
    assert "matrix file not found" not in res.output, res.output
    assert "host:" in res.output and "(none: no matrix.yaml read" in res.output, res.output
    # newcomer nc40 (fresh trixie stand-in): the advice came twice, a `next:` line without the folder
    # and a `note:` with it; now once, naming the checkout to `cd` to
    assert res.output.count("--matrix PATH") == 1, res.output
    assert (
        "next: no matrix.yaml here, so no image was judged: run from the project folder (`cd " in res.output
    )
    from toolkit.core.errors import BadInput, HostCheckFailed

    # a host check that failed (no engine) is the same answer as inside the project
    assert res.exception is None or isinstance(res.exception, HostCheckFailed), res.exception
    bad = CliRunner().invoke(cli, ["doctor", "--matrix", "nope.yaml"])
    assert isinstance(bad.exception, BadInput) and "nope.yaml: matrix file not found" in str(bad.exception)
