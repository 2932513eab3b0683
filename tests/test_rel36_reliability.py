"""Reliability 36 (tenth session): a stranger's folder and a git hook's environment, pushed by a hostile
tester. Each test failed on the code before its fix (docs/reliability-log.md, "Reliability 36")."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.runs import bench_records, published_folder, reproduce_cli, tk
from toolkit.core.errors import BadInput
from toolkit.results.records import ResultStore


def _foreign_repo(tmp_path: Path) -> Path:
    """A git repository of someone else's, one commit: what GIT_DIR names inside its hooks."""
    repo = tmp_path / "theirs"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    (repo / "a").write_text("a\n")
    subprocess.run([*git, "add", "a"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "theirs"], check=True, env=env)
    return repo / ".git"


def test_a_git_hooks_environment_names_no_other_repository(tmp_path: Path, monkeypatch) -> None:
    """Run from a git hook of the user's results repository (git exports GIT_DIR and, in pre-commit,
    GIT_INDEX_FILE), `git -C TOOLKIT_ROOT rev-parse HEAD` named that repository's commit and `git
    status` called the toolkit's checkout dirty: `toolkit --version` said `e796055fa9d1-dirty`, every
    record's host.toolkit the same, and export-run's source archive was not made ("this checkout lacks
    that commit"). Every git the toolkit runs gets git_env (git's own local-env-vars cleared)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the toolkit names no commit")
    from toolkit.host.info import toolkit_source
    from toolkit.publish import run_folder

    gitdir = _foreign_repo(tmp_path)
    hook_env = {"GIT_DIR": str(gitdir), "GIT_INDEX_FILE": str(gitdir / "index")}
    plain = tk(tmp_path, "--version")
    hooked = tk(tmp_path, "--version", env=hook_env)
    assert plain.returncode == hooked.returncode == 0
    assert hooked.stdout == plain.stdout, (plain.stdout, hooked.stdout)
    ours = toolkit_source()
    for k, v in hook_env.items():
        monkeypatch.setenv(k, v)
    assert toolkit_source() == ours
    out = tmp_path / "sent"
    out.mkdir()
    assert run_folder._toolkit_source(ours["commit"], out) == run_folder.TOOLKIT_SOURCE
    assert (out / run_folder.TOOLKIT_SOURCE).stat().st_size > 10_000


def _forged(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("error: forged", "<img"))]


def test_a_run_id_with_a_line_break_forges_no_line(tmp_path: Path) -> None:
    """A stored record's run_id (a stranger's export read with --results) holding `\\nerror: forged`:
    `report --run` of an ambiguous start listed the ids raw, so the refusal printed a second
    `error: forged` line; a run.json run_id so made reproduce's refusal two lines. A run id is one line
    (records.RunId): such a record is skipped with a warning naming run_id, such a run.json bad input."""
    store = ResultStore(tmp_path / "results")
    for rid in ("20261129T170000Z-8c445b\nerror: forged", "20261129T170000Z-aaaaaa\x1b]0;title\x07"):
        for r in bench_records("20261129T170000Z-8c445b"):
            store.add_result(r.model_copy(update={"run_id": rid}))
    res = tk(tmp_path, "report", "--results", str(store.root), "--run", "20261129T17")
    assert not _forged(res.stdout + res.stderr), res.stderr
    assert "skipped a record: run_id: " in res.stderr and "is one line of text" in res.stderr
    assert "\x1b" not in res.stdout + res.stderr
    folder = published_folder(tmp_path / "sent")
    run = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**run, "run_id": "run-h\nerror: forged run"}))
    out, code = reproduce_cli(folder)
    assert code == 4 and f"{folder / 'run.json'}: run_id: " in out and not _forged(out), out


def test_a_compared_image_name_with_a_line_break_stays_one_header_cell(tmp_path: Path) -> None:
    """`compare RUN IMAGE` of a stored image named `cpu\\n<img src=x>|y`: the side's label went raw into
    the table's header, the newline made the header two rows (the second began `<img` in the markdown a
    ticket shows, a live tag) and the `|` a column of its own. The header is one row of escaped cells."""
    store = ResultStore(tmp_path / "results")
    name = "cpu\n<img src=x>|y"
    for r in bench_records("20261129T170000Z-aaaaaa"):
        store.add_result(r)
    for r in bench_records("20261129T170100Z-bbbbbb", scale=1.5):
        store.add_result(r.model_copy(update={"image": r.image.model_copy(update={"name": name})}))
    res = tk(tmp_path, "compare", "20261129T170000Z-aaaaaa", name, "--results", str(store.root))
    lines = res.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| test"))
    assert lines[head + 1].startswith("|---"), res.stdout
    cells = [len(re.findall(r"(?<!\\)\|", line)) for line in lines[head : head + 3]]  # `\|` is text
    assert cells[0] == cells[2], lines[head : head + 3]
    assert "\\<img" in lines[head] and not _forged(res.stdout), res.stdout


def _generated(tmp_path: Path, matrix: str) -> Path:
    """A published folder of the generated tiny model (its sha256 not the generator's: reproduce stops
    at verify_model, before any engine) holding `matrix` as its matrix.yaml."""
    folder = published_folder(tmp_path / "sent", model={"generate": "tiny-qwen3moe"})
    (folder / "matrix.yaml").write_text(matrix)
    return folder


def test_a_published_matrix_is_read_with_the_matrix_guards(tmp_path: Path) -> None:
    """reproduce read a stranger's matrix.yaml twice with a bare yaml.safe_load (bench.timeout_s and the
    runner settings): 27 MB took 3m49s and 1.2 GB before the run started (no size bound; load_matrix
    refuses above 1 MiB), and `bench: [1, 2]` raised AttributeError (a traceback, exit 1). Now read once
    through matrix.api.read_yaml: over MAX_MATRIX_BYTES bad input naming the file; a block of the wrong
    shape is the defaults, as an impossible date was."""
    from toolkit.matrix.api import MAX_MATRIX_BYTES

    out, code = reproduce_cli(_generated(tmp_path / "a", "bench: [1, 2]\n"))
    assert code == 4 and "has sha256" in out, out  # past the matrix: stopped by the model's sha256
    big = "junk:\n" + "- aaaaaaaaaaaaaaa\n" * (MAX_MATRIX_BYTES // 18 + 1)
    folder = _generated(tmp_path / "b", big)
    out, code = reproduce_cli(folder)
    assert code == 4 and f"{folder / 'matrix.yaml'}: " in out and "too large for a matrix file" in out, out


def test_rebuild_copies_no_link_of_a_published_folder(tmp_path: Path) -> None:
    """`reproduce --rebuild` copied the folder's Dockerfile.templates/ with shutil.copytree, following
    links that point inside the folder: one to `..` copied the folder into itself without end (942 MB
    in 60 s, growing). It copies what export-run copies, by its rule (folder_copy.copied: no link,
    regular files and folders only): the link is bad input naming it, nothing copied."""
    from toolkit.publish import reproduce

    folder = published_folder(tmp_path / "sent")
    (folder / "matrix.yaml").write_text("schema_version: 1\n")
    (folder / "Dockerfile.templates").mkdir()
    (folder / "Dockerfile.templates" / "llama-cpu.Dockerfile.j2").write_text("FROM scratch\n")
    (folder / "extra").mkdir()
    (folder / "extra" / "big").write_bytes(b"x" * 1000)
    (folder / "Dockerfile.templates" / "more").symlink_to("../extra")  # inside: load_run lets it be
    with pytest.raises(BadInput, match="Dockerfile.templates/more is a symbolic link"):
        reproduce._workdir(folder, rebuild=True)
    assert not (folder / "reproduce" / "Dockerfile.templates" / "more").exists()
