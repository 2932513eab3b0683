"""left46: the suggested commands (core.invocation.command) and the written paths as the user chose them.

1. The engine a hint names is the one the user chose, as `--engine` or as $TOOLKIT_ENGINE (the
   environment form lost it); `--engine` holds for its own invocation only.
2. A path with a control character is quoted so that pasting the hint names that path (ANSI-C
   `$'...'`), and nothing a terminal acts on is printed (core.text.shell_word).
3. A written path's `..` is read as the OS reads it (cli/common.output_parent): through a missing
   folder or a file it is refused (exit 4), through a link it lands where the shell would write.
4. export-run's "never pushed" note names the --matrix and --results it was given.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from tests.support.project import cpu_project
from tests.support.runs import bench_records, tk
from toolkit.cli.main import cli
from toolkit.core import invocation
from toolkit.core.text import strip_controls
from toolkit.results.records import ResultStore


def _not_built_hint(output: str) -> str:
    """The command `bench --dry-run` suggests for the unbuilt cpu image."""
    line = next(ln for ln in output.splitlines() if ln.startswith("cpu: note:") and "build" in ln)
    return line.split("`")[1]


@pytest.mark.parametrize("form", ["option", "environment"])
@pytest.mark.parametrize("spelled", ["podman", "PODMAN"])
def test_a_hint_names_the_engine_chosen_in_either_form(project, monkeypatch, form, spelled):
    """Either form, in any case (brk46: `--engine PODMAN` was refused where TOOLKIT_ENGINE=PODMAN ran)."""
    monkeypatch.chdir(project)
    monkeypatch.delenv("TOOLKIT_ENGINE", raising=False)
    head = ["--engine", spelled] if form == "option" else []
    env = {"TOOLKIT_ENGINE": spelled} if form == "environment" else {}
    res = CliRunner().invoke(cli, [*head, "bench", "-i", "cpu", "--dry-run"], env=env)
    assert res.exit_code == 0, res.output
    assert _not_built_hint(res.output) == "toolkit --engine podman build -i cpu"


def test_an_engine_option_reaches_neither_the_next_invocation_nor_its_hints(project, monkeypatch):
    monkeypatch.chdir(project)
    monkeypatch.delenv("TOOLKIT_ENGINE", raising=False)
    CliRunner().invoke(cli, ["--engine", "podman", "bench", "-i", "cpu", "--dry-run"])
    assert "TOOLKIT_ENGINE" not in os.environ
    res = CliRunner().invoke(cli, ["bench", "-i", "cpu", "--dry-run"])
    assert _not_built_hint(res.output) == "toolkit build -i cpu"
    assert invocation.command("build") == "toolkit build"  # nothing left noted after the invocation


NAMES = ["res\x1b[31mX", "a\nb", "t\tab", "bidi\u202eq", "c1\x85", "byte\udcff", "it's \\ here"]


@pytest.mark.parametrize("name", NAMES)
def test_shell_word_pastes_as_the_same_path_and_holds_nothing_a_terminal_acts_on(name):
    from toolkit.core.text import shell_word

    word = shell_word(name)
    assert strip_controls(word) == word and word.isprintable()
    said = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True).stdout
    assert said == os.fsencode(name)


def test_a_hint_naming_a_results_folder_with_an_escape_names_that_folder(project, monkeypatch):
    monkeypatch.chdir(project)
    res = CliRunner().invoke(cli, ["bench", "-i", "cpu", "--dry-run", "--results", "res\x1b[31mX"])
    assert res.exit_code == 0, res.output
    hint = _not_built_hint(res.output)
    assert hint == "toolkit build --results $'res\\x1b[31mX' -i cpu"  # was 'resX': another folder
    assert "\x1b" not in res.output


def test_a_missing_folders_mkdir_names_a_folder_with_an_escape_faithfully(tmp_path):
    res = tk(tmp_path, "measure", "--gpu", "none", "-o", "new\x1bdir/m.jsonl", "--", "true")
    assert res.returncode == 4, res.stderr
    assert "(mkdir -p $'new\\x1bdir')" in res.stderr and "\x1b" not in res.stderr, res.stderr


# ------------------------------------------------------------------- 3. a written path's `..`


@pytest.mark.parametrize(("make", "why"), [(None, "does not exist"), ("file", "lies under a file")])
def test_an_output_through_a_missing_or_file_folder_and_dotdot_is_refused_as_the_shell_refuses(
    tmp_path, make, why
):
    if make == "file":
        (tmp_path / "sub").write_text("")
    res = tk(tmp_path, "measure", "--gpu", "none", "-o", "sub/../m.jsonl", "--", "true")
    assert res.returncode == 4, res.stderr
    assert "'--output'" in res.stderr and f"the folder sub/.. {why}" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "m.jsonl").exists()  # was written here


def test_an_output_through_a_link_and_dotdot_lands_where_the_os_puts_it(tmp_path):
    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "lnk").symlink_to("real/deep")
    res = tk(tmp_path, "measure", "--gpu", "none", "-o", "lnk/../m.jsonl", "--", "true")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "real" / "m.jsonl").is_file() and not (tmp_path / "m.jsonl").exists()


# ------------------------------------------------------------------- 4. export-run's push note


def test_export_runs_push_note_carries_the_matrix_and_results_it_was_given(tmp_path, matrix_data):
    proj = tmp_path / "proj"
    cpu_project(proj, matrix_data)
    shutil.copy(proj / "matrix.yaml", proj / "small.yaml")
    store = ResultStore(proj / "res2")
    for r in bench_records("run-p"):
        store.add_result(r)
    out = tmp_path / "out"
    args = ["--matrix", str(proj / "small.yaml"), "--results", str(proj / "res2"), "run-p", "-o", str(out)]
    res = CliRunner().invoke(cli, ["export-run", *args])
    assert res.exit_code == 0, res.output
    push = (  # the project's paths, as published; the matrix names no registry: the push names one to fill
        "`toolkit push --matrix small.yaml --results res2 --image cpu --registry HOST[:PORT]/NAMESPACE` with "
        "the address of your registry in its place, and export again"
    )
    assert any(push in n for n in json.loads((out / "run.json").read_text())["notes"])
    here = push.replace("small.yaml", str(proj / "small.yaml")).replace("res2", str(proj / "res2"), 1)
    assert here in res.output, res.output  # the terminal's: this host's folders (brk48b)


# ------------------------------------------------------------------- 5. a typo'd stand-in's path


@pytest.mark.parametrize("typo", ["models/tiny-qwen3mo.gguf", "modles/tiny-qwen3moe.gguf"])
def test_a_typo_of_the_stand_ins_path_generates_no_second_model(project, monkeypatch, typo):
    monkeypatch.chdir(project)
    assert CliRunner().invoke(cli, ["fetch-model", "tiny-qwen3moe"]).exit_code == 0  # the stand-in
    matrix = project / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace("path: models/tiny-qwen3moe.gguf", f"path: {typo}"))
    plan = CliRunner().invoke(cli, ["bench", "-i", "cpu", "-m", "tiny-qwen3moe", "--dry-run"])
    key = f"{matrix}: models[tiny-qwen3moe].path: "  # the file and key to fix, as bad input is named
    assert f"a real run refuses this model: {key}{project / typo} is absent" in plan.output, plan.output
    for args in (["fetch-model", "tiny-qwen3moe"], ["bench", "-i", "cpu", "-m", "tiny-qwen3moe"]):
        res = tk(project, *args)
        assert res.returncode == 4, res.stderr
        assert f"{key}{project / typo} is absent" in res.stderr, res.stderr
        assert f"{project / 'models/tiny-qwen3moe.gguf'} exists: a typo of the model's path?" in res.stderr
    assert not (project / typo).exists() and not (project / "modles").exists()
    assert sorted(p.name for p in (project / "models").iterdir()) == ["tiny-qwen3moe.gguf"]


def test_a_stand_in_beside_other_files_of_near_names_is_generated(tmp_path):
    """Only a typo of the same stand-in is refused: another seed's model of a near name (`tiny-b.gguf`
    beside `tiny-gen.gguf`: tests/test_faults.py) and a generator's leftover are no second model."""
    from toolkit.models.tiny import ensure_model_file, generate_tiny_qwen3moe

    generate_tiny_qwen3moe(tmp_path / "models" / "tiny-b.gguf", seed=1)
    (tmp_path / "models" / ".tiny-gen.gguf.x1.tmp").write_bytes(b"")
    assert ensure_model_file(tmp_path / "models" / "tiny-gen.gguf", "tiny-qwen3moe", named={}).is_file()


def test_a_recorded_stand_in_is_generated_at_its_recorded_name_beside_a_near_namesake(tmp_path):
    """reproduce generates a published run's stand-ins at the names run.json records (`named` None: no
    one typed them). A run of two stand-ins `tiny-a.gguf` and `tiny-b.gguf` of the same bytes had its
    second refused as a typo of the first; a matrix path (`named` given) still is."""
    from toolkit.core.errors import BadInput
    from toolkit.models.tiny import ensure_model_file

    models = tmp_path / "models"
    ensure_model_file(models / "tiny-a.gguf", "tiny-qwen3moe")
    with pytest.raises(BadInput, match="tiny-a.gguf exists: a typo"):
        ensure_model_file(models / "tiny-b.gguf", "tiny-qwen3moe", named={})
    assert ensure_model_file(models / "tiny-b.gguf", "tiny-qwen3moe").is_file()


def test_the_interrupted_bench_hint_repeats_the_options_the_user_gave():
    """nc46 S3: Ctrl-C of `bench -i cpu --memory 24g` said "`toolkit bench --resume` continues", which
    resumes every image and model of the matrix without the memory limit. The hint repeats the bench's
    own options as given on the command line (cli.common.given_options, invocation.again); --resume,
    --dry-run, --json and the options left to their defaults or taken from the environment are not in it."""
    import click
    from click.testing import CliRunner

    from toolkit.bench.run import RESUME_HINT, resume_hint
    from toolkit.cli.common import given_options
    from toolkit.core import invocation

    seen: list[str] = []

    @click.command()
    @click.option("--image", "-i", "images", multiple=True)
    @click.option("--memory", default=None)
    @click.option("--timeout", type=int, default=None)
    @click.option("--allow-stale", is_flag=True)
    @click.option("--allow-concurrent", is_flag=True, envvar="T_ALLOW")
    @click.option("--resume", is_flag=True)
    def bench(**_):
        invocation.start(None)
        invocation.own(given_options(click.get_current_context(), ("resume",)))
        seen.append(resume_hint())

    args = ["-i", "cpu", "-i", "vulkan", "--memory", "24g", "--timeout", "60", "--allow-stale", "--resume"]
    result = CliRunner().invoke(bench, args, env={"T_ALLOW": "1"})
    assert result.exit_code == 0, result.output
    bench_again = "toolkit bench --image cpu --image vulkan --memory 24g --timeout 60 --allow-stale"
    assert seen == [RESUME_HINT.format(bench=bench_again)]
    seen.clear()
    assert CliRunner().invoke(bench, []).exit_code == 0
    assert seen == [RESUME_HINT.format(bench="toolkit bench")]
