"""Breaker round 46 (brk46): what hostile input found in round 46's changes, held.

- ik_llama.cpp `-gp` rows with a bool count: tests/test_public_files_round46.py (its helpers).
- `-o` (cli/common.output_parent): `dangling/../x.md`, a link to nowhere then `..`, is refused by the
  OS (`> dangling/../x.md`: no such file), and the toolkit wrote ./x.md (the `..` read by its text).
- A matrix with two stand-ins of near names (`tiny-a.gguf`, `tiny-b.gguf`: both asked for) refused
  the second as a typo of the first (namesake_refusal): another path of the matrix is no typo.
"""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from tests.support.runs import tk
from toolkit.cli.main import cli

# ------------------------------------------------------------------- 2. -o through a dangling link and ..


@pytest.mark.parametrize("out", ["dangling/../m.jsonl", "sub/dangling/../m.jsonl"])
def test_an_output_through_a_dangling_link_and_dotdot_is_refused_as_the_shell_refuses(tmp_path, out):
    (tmp_path / "sub").mkdir()
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "sub" / "dangling").symlink_to("../nowhere")
    res = tk(tmp_path, "measure", "--gpu", "none", "-o", out, "--", "true")
    assert res.returncode == 4, res.stderr
    assert "'--output'" in res.stderr and "a link on the way leads nowhere" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "m.jsonl").exists() and not (tmp_path / "sub" / "m.jsonl").exists()


# ------------------------------------------------------------------- 3. two stand-ins in one matrix


def test_two_stand_ins_of_near_names_in_one_matrix_are_both_generated(project, monkeypatch):
    monkeypatch.chdir(project)
    data = yaml.safe_load((project / "matrix.yaml").read_text())
    tiny = next(m for m in data["models"] if m.get("generate") == "tiny-qwen3moe")
    data["models"] = [
        {**tiny, "name": "tiny-a", "path": "models/tiny-a.gguf"},
        {**tiny, "name": "tiny-b", "path": "models/tiny-b.gguf"},
    ]
    (project / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert CliRunner().invoke(cli, ["fetch-model", "tiny-a"]).exit_code == 0
    plan = CliRunner().invoke(cli, ["bench", "-i", "cpu", "-m", "tiny-b", "--dry-run"])
    assert "refuses" not in plan.output, plan.output
    dry = CliRunner().invoke(cli, ["fetch-model", "--dry-run", "tiny-b"])
    assert "would generate" in dry.output, dry.output
    res = CliRunner().invoke(cli, ["fetch-model", "tiny-b"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (project / "models").iterdir()) == ["tiny-a.gguf", "tiny-b.gguf"]
    # a typo of either is still one
    data["models"][1]["path"] = "models/tiny-bb.gguf"
    (project / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    typo = tk(project, "fetch-model", "tiny-b")
    assert typo.returncode == 4 and "tiny-b.gguf exists: a typo of the model's path?" in typo.stderr


# ------------------------------------------------------------------- 4. a dry run's exact command


def test_a_dry_runs_command_names_a_path_with_an_escape_as_itself(tmp_path, matrix_data):
    """bench --dry-run printed `docker run --mount 'type=bind,source=...'` by shlex.join: the ESC of
    the folder's name raw, then stripped by the terminal printer, so the command pasted named another
    folder. Now each word is text.shell_word's: the pasted command's mount names the folder."""
    import shutil
    import subprocess

    from tests.support.project import ROOT

    proj = tmp_path / "p\x1b]0;t\x07q"
    proj.mkdir()
    shutil.copy(ROOT / "matrix.yaml", proj / "matrix.yaml")
    shutil.copytree(ROOT / "Dockerfile.templates", proj / "Dockerfile.templates")
    res = tk(
        tmp_path,
        "bench",
        "--matrix",
        str(proj / "matrix.yaml"),
        "-i",
        "cpu",
        "-m",
        "tiny-qwen3moe",
        "--dry-run",
    )
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if "(sweep): " in ln)
    words = line.split("(sweep): ", 1)[1]
    argv = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {words}"], capture_output=True, check=True
    ).stdout.split(b"\0")
    mount = next(w for w in argv if w.startswith(b"type=bind,source="))
    assert mount.startswith(b"type=bind,source=" + bytes(proj)), mount


@pytest.mark.parametrize("cell", ["tg64@pp8192x", "tg64@pp8192 @ d512", "tg64@pp8192+tg1"])
def test_an_md_test_cell_that_only_starts_like_a_gp_test_is_refused(cell):
    """GP_TEST lost its `^...$` when it moved beside gp_counts (which fullmatches it); the md reader kept
    `.match`, so `tg64@pp8192x` read as tg64 @ d8192 where it was refused before. Both fullmatch."""
    from toolkit.runtimes.llama_bench import readers

    head = "| model | size | params | backend | ngl | test | t/s |\n| --- | ---: | ---: | --- | --: | ---: | ---: |\n"
    row = f"| qwen3moe 30B.A3B Q4_K - Medium | 16.49 GiB | 30.53 B | CUDA | 99 | {cell} | 120.50 ± 0.30 |\n"
    gp = (
        "| qwen3moe 30B.A3B Q4_K - Medium | 16.49 GiB | 30.53 B | CUDA | 99 | tg64@pp8192 | 120.50 ± 0.30 |\n"
    )
    bad, good = readers.read_md(head + row + gp)
    assert bad.problem and "is not a llama-bench test name" in bad.problem, bad
    assert (good.problem, good.fields["n_prompt"], good.fields["n_gen"], good.fields["n_depth"]) == (
        None,
        0,
        64,
        8192,
    )
