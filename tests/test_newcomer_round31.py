"""What a newcomer reads on a fresh host (a Debian 13 stand-in, its sudo user, rootless Podman 5: the
README's main job, then the commands the README and docs/ promise, and the mistakes one makes next):
each message says its point once, right, with the way out.

- importing another tool's table (llama-benchy's, tests/data/public) refused every row with the same
  reason, and the error said that reason three times over (once per line shown): now lines that share
  a reason are named together and the reason is said once (results/import_read.none_usable);
- `-i cpuu`, `-i CPU`, `-m tiny`: the error listed the names and pointed at none; now the nearest
  (matrix/schema.nearest); `-m models/tiny-qwen3moe.gguf` (a file for a name) is told the model's
  name, or how to add a file of one's own;
- a matrix copied out of the checkout (`--matrix ~/my.yaml`) was told its template "is not a file in
  ~/Dockerfile.templates (available: none)"; now that the folder is missing and why it is looked for;
- `toolkit report` after an import of another model: each side-by-side block of the text table listed
  the other image's rows too, empty (table_text.fit_table);
- `toolkit --engine docker doctor` on the Podman-only host: told to start a `dockerd` it does not have,
  and "Docker engine: not reachable (Docker engine not reachable (": now that Docker is absent and
  Podman is there, said once (engine/choice.unreachable_fix, host/doctor_checks.check_docker).

- the README export-run writes for a customer printed Python's values (`canary True`, `env {}`,
  `type_k ['f16']`), called the run's settings "crossed axes", and named only `docker pull`
  (publish/run_folder.run_readme).

The canary's retries (its first bench there left the canary `unchecked`) are in tests/test_canary.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import refused


def test_a_reason_every_row_shares_is_said_once_naming_its_lines(tmp_path: Path) -> None:
    said = refused(tmp_path, "r25-llama-benchy-not-llama-bench.md")
    assert said.count("is not a llama-bench column title") == 1, said
    assert (
        "18 refused:\n  line 3: the table's header (line 1)" in said
        and "(18 rows of this, lines 3 to 20)" in said
    ), said


def test_a_mistyped_image_or_model_name_is_answered_with_the_nearest_one() -> None:
    """`toolkit build -i cpuu`, `-i CPU`, `-m tiny-qwen3`: the error listed every name but pointed at
    none (Click does for a command: "Did you mean 'bench'?"); now it names the nearest one or two."""
    from tests.support.project import ROOT
    from toolkit.core.errors import BadInput
    from toolkit.matrix.api import load_matrix

    lm = load_matrix(ROOT / "matrix.yaml")
    for typed, meant in (("cpuu", "'cpu'?"), ("CPU", "'cpu'?"), ("vulcan", "'vulkan'?")):
        with pytest.raises(BadInput, match=f"no image named '{typed}' in .*: did you mean {meant}"):
            lm.select_images([typed])
    with pytest.raises(BadInput, match="no model named 'tiny-qwen3' in .*: did you mean 'tiny-qwen3moe'\\?"):
        lm.select_models(["tiny-qwen3"])
    with pytest.raises(BadInput, match="no model named 'tiny' in .*: did you mean 'tiny-qwen3moe'\\?"):
        lm.select_models(["tiny"])
    with pytest.raises(BadInput) as err:
        lm.select_images(["nosuch"])
    assert "did you mean" not in str(err.value) and "(images: cpu, vulkan" in str(err.value)


def test_an_unknown_image_and_model_name_are_refused_in_one_wording(project: Path) -> None:
    """nc51 S7: `bench -i cpux` said "no image named 'cpux' in the matrix", `bench -m tiny` "no model named
    tiny in /home/debian/toolkit/matrix.yaml": one wording now, each name quoted, the matrix file as the
    user gave it, the names there are (LoadedMatrix._unknown)."""
    from tests.support.runs import tk

    for args, said in (
        (("-i", "cpux"), "no image named 'cpux' in matrix.yaml: did you mean 'cpu'? (images: cpu, "),
        (("-m", "tiny"), "no model named 'tiny' in matrix.yaml: did you mean 'tiny-qwen3moe'? (models: "),
    ):
        res = tk(project, "bench", "--dry-run", *args)
        assert res.returncode == 4 and said in res.stderr, res.stderr
    (project / "sub").mkdir()
    res = tk(project / "sub", "bench", "--dry-run", "--matrix", "../matrix.yaml", "-m", "tiny", "-m", "nope")
    assert (
        res.returncode == 4 and "no model named 'tiny', 'nope' in ../matrix.yaml: did you mean" in res.stderr
    )


def test_a_model_file_given_to_m_is_answered_with_its_name_or_how_to_add_one() -> None:
    """`toolkit bench -m models/tiny-qwen3moe.gguf` or `-m ~/my.gguf`: -m takes a matrix name; the error
    listed the names only. Now a file that is a model's path gets its name, any other file how to add it."""
    from tests.support.project import ROOT
    from toolkit.core.errors import BadInput
    from toolkit.matrix.api import load_matrix

    lm = load_matrix(ROOT / "matrix.yaml")
    with pytest.raises(BadInput, match="that file is the path of model 'tiny-qwen3moe': give its name"):
        lm.select_models([str(ROOT / "models" / "tiny-qwen3moe.gguf")])
    with pytest.raises(BadInput, match="-m takes a model's name, not a file: .* add it under `models:`"):
        lm.select_models(["/nonexistent/my-own.gguf"])


def test_a_matrix_copied_out_of_the_project_is_told_where_its_templates_are(tmp_path: Path) -> None:
    """`cp matrix.yaml ~/my.yaml; toolkit render --matrix ~/my.yaml`: the error said the template "is not a
    file in ~/Dockerfile.templates (available: none)", not that the folder is missing nor why it is
    looked for there; now it says both and the two ways out."""
    import shutil

    from tests.support.project import ROOT
    from toolkit.core.errors import BadInput
    from toolkit.matrix.api import load_matrix

    shutil.copy(ROOT / "matrix.yaml", tmp_path / "my.yaml")
    with pytest.raises(BadInput) as err:
        load_matrix(tmp_path / "my.yaml")
    said = str(err.value)
    assert f"is not a file in {tmp_path / 'Dockerfile.templates'} (no such folder: a matrix reads" in said, (
        said
    )
    assert "keep your matrix in the project folder" in said and "copy Dockerfile.templates/ beside it" in said
    assert "available: none" not in said


def test_a_text_table_in_blocks_shows_each_block_only_the_rows_it_measured() -> None:
    """`toolkit import --label bare-metal-hip <a public file>` beside the first bench, then `toolkit
    report` on an 80-column terminal: the two images measured different models, the table went into
    one block per image, and each block listed the other image's rows too, empty (the long model name
    wrapped over three lines in each). Now a block shows the rows it has a cell in."""
    from toolkit.analysis.table_text import fit_table

    deep = "DeepSeek-V4-Flash-0731-UD-IQ2_XXS-00001-of-00003.gguf"
    headers = ["test", "model", "bare-metal-hip", "cpu"]
    body = [
        ["pp512 ub512", "tiny-qwen3moe (75939234)", "", "1249.98 ± 1609.05 †"],
        ["pp2048 ub256", deep, "119.06 ± 1.13", ""],
        ["pp2048 ub512", deep, "164.22 ± 3.29", ""],
        ["pp2048 ub512", "tiny-qwen3moe (75939234)", "", "422.15 ± 49.57 †"],
    ]
    lines, _ = fit_table(headers, body, keep=2, width=80)
    text = "\n".join(lines)
    first, second = text.split("\n\n")
    assert "bare-metal-hip" in first and "tiny-qwen3moe" not in first, text
    assert "cpu" in second and "DeepSeek" not in second and "guf" not in second, text
    assert "1249.98 ± 1609.05 †" in second and "164.22 ± 3.29" in first


def test_docker_asked_for_on_a_podman_only_host_is_said_to_be_absent_not_to_be_started() -> None:
    """`toolkit --engine docker doctor` on the fresh Debian 13 Podman host (no docker, no dockerd): the
    fix said "start it (`sudo dockerd &` or `sudo systemctl start docker`...)", a daemon that host
    does not have, and doctor said "Docker engine: not reachable (Docker engine not reachable (...".
    Whether Docker and Podman are installed is passed in (this machine has Docker: a host without it
    cannot exist here)."""
    from toolkit.engine.choice import unreachable_fix
    from toolkit.host.doctor_checks import check_docker

    msg = "Error while fetching server API version: ('Connection aborted.', FileNotFoundError(2, '...'))"
    fix = unreachable_fix("", msg, installed=False, podman=True)
    assert "dockerd" not in fix.replace("no `dockerd`", ""), fix
    assert fix.startswith("Docker is not installed on this host") and "`toolkit --engine podman ...`" in fix
    assert "Podman" not in unreachable_fix("", msg, installed=False, podman=False)
    assert unreachable_fix("", msg, installed=True, podman=False).startswith("start it (`sudo dockerd &`")
    (check,) = check_docker({"engine": "docker", "error": f"Docker engine not reachable ({msg}): {fix}"})
    assert check.message.count("not reachable") == 1, check.message


def test_an_exported_runs_readme_speaks_words_not_python(tmp_path: Path, matrix_data) -> None:
    from click.testing import CliRunner

    from tests.support.project import cpu_project
    from tests.support.runs import bench_records
    from toolkit.cli.main import cli
    from toolkit.results.records import ResultStore

    proj = tmp_path / "proj"
    cpu_project(proj, matrix_data)
    store = ResultStore(proj / "results")
    for r in bench_records("run-w"):
        store.add_result(r)
    out = tmp_path / "published"
    res = CliRunner().invoke(
        cli, ["export-run", "--matrix", str(proj / "matrix.yaml"), "run-w", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    cases = (out / "README.md").read_text().split("## Cases", 1)[1].split("## Results", 1)[0]
    for python in ("[", "]", "True", "False", "{}", "'"):
        assert python not in cases, cases
    assert "llama-bench axes (every combination is a test): n_prompt " in cases, cases
    assert "Settings of each process: repetitions " in cases and "env none" in cases, cases
