"""A path taken from a file stays inside the folder it belongs to (toolkit/core/paths.py), checked before
anything is read, written or deleted there; symlinks resolved.

Reproducers, each run through the real code path with nothing mocked:
- a hostile published run folder (`toolkit reproduce DIR`, in a subprocess: the exit code and the
  message are the user's): run.json naming a generated model file `../../outside.gguf`, one that
  climbs to a file outside the folder, an absolute path, a work folder `reproduce/` that is a symlink
  out, a model found through a symlink out, results.jsonl a symlink out. The outside file keeps its
  bytes (or is never created).
- a source `subdir:` of an archive: `../x` and `/etc` refused at matrix validation (exit 4 naming the
  source and the field); an archive whose subdir is a symlink out refused when extracted, and a cached
  tree whose subdir became a symlink out refused when used (toolkit.images.sources.prepare_source,
  the function `toolkit build` prepares its source with).
- a matrix in a published run folder (`toolkit fetch-model --matrix DIR/matrix.yaml`, as reproduce
  advises) may not name a model file outside the folder; campaign files may not lead out of results/.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.support.project import ROOT, write_matrix
from tests.support.runs import DIGEST, published_folder
from toolkit.core.errors import BadInput
from toolkit.core.paths import contained, relative_path, symlinks_inside
from toolkit.images import sources
from toolkit.matrix.api import load_matrix
from toolkit.publish import run_folder, scrub

PRECIOUS = b"precious bytes that are not a GGUF\n"


def toolkit(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`python -m toolkit ARGS` of this checkout in a subprocess (no Docker engine reachable)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "200",
        "DOCKER_HOST": "unix:///nonexistent/docker.sock",
    }
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=env,
    )


def _out(p: subprocess.CompletedProcess) -> str:
    return f"exit {p.returncode}\n--- stdout ---\n{p.stdout[-2000:]}\n--- stderr ---\n{p.stderr[-3000:]}"


# ------------------------------------------------------------------------------------- the helper


def test_contained_gives_the_resolved_path_inside_and_follows_links_that_stay_inside(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    (tmp_path / "link").symlink_to("a")
    assert contained(tmp_path, "a/f", what="w") == (tmp_path / "a" / "f").resolve()
    assert contained(tmp_path, "link/f", what="w") == (tmp_path / "a" / "f").resolve()
    assert contained(tmp_path, "new/not/yet", what="w") == (tmp_path / "new/not/yet").resolve()
    assert str(relative_path("vendor/llama.cpp", what="w")) == "vendor/llama.cpp"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("../x", "'..' component"),
        ("a/../../x", "'..' component"),
        ("/etc/passwd", "absolute path"),
        ("", "is empty"),
        ("a\0b", "NUL byte"),
        ("out/x", "outside"),  # through the symlink `out`
    ],
    ids=["dotdot", "dotdot-inside", "absolute", "empty", "nul", "symlink-out"],
)
def test_contained_refuses_each_way_out_naming_what_and_the_fix(tmp_path, value, why):
    base = tmp_path / "base"
    base.mkdir()
    (base / "out").symlink_to(tmp_path)
    with pytest.raises(BadInput) as err:
        contained(base, value, what="run.json: models[m].file", fix="the fix")
    msg = str(err.value)
    assert msg.startswith("run.json: models[m].file: ") and why in msg and msg.endswith("; the fix"), msg


def test_symlinks_inside_names_the_link_that_points_out(tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "ok").symlink_to("sub")
    (tmp_path / "f" / "sub").mkdir()
    symlinks_inside(tmp_path / "f", what="folder")
    (tmp_path / "f" / "sub" / "bad").symlink_to("/etc")
    with pytest.raises(BadInput, match=r"folder: symlink sub/bad: .*resolves to /etc, outside"):
        symlinks_inside(tmp_path / "f", what="folder")


# -------------------------------------------------------------------- 1. hostile published folders


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file of the user's outside the published folder, with bytes that must survive."""
    p = tmp_path / "outside.gguf"
    p.write_bytes(PRECIOUS)
    return p


def _assert_refused(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 4, _out(p)
    assert "error: " in p.stderr and "Traceback" not in p.stderr, _out(p)
    for n in needles:
        assert n in p.stderr, (n, _out(p))


@pytest.mark.parametrize(
    ("file", "why"),
    [
        ("../../outside.gguf", "'..' component"),  # lands in the folder, out of reproduce/models/
        ("../../../../outside.gguf", "'..' component"),  # reproduce/models/ -> the outside file
        (None, "absolute path"),  # the outside file by its absolute path
    ],
    ids=["dotdot-2", "dotdot-to-the-outside-file", "absolute"],
)
def test_reproduce_refuses_a_generated_model_file_outside_the_folder(tmp_path, outside, file, why):
    """The reported hole: a `generate` model's file was deleted and a GGUF written there, before any
    check. Now refused at load (exit 4, run.json and the field named), nothing touched."""
    folder = published_folder(
        tmp_path / "pub" / "run", model={"file": file or str(outside), "generate": "tiny-qwen3moe"}
    )
    p = toolkit("reproduce", str(folder))
    assert outside.read_bytes() == PRECIOUS, _out(p)
    assert not (tmp_path / "pub" / "outside.gguf").exists(), _out(p)
    assert not (folder / "outside.gguf").exists(), _out(p)
    _assert_refused(p, f"{folder / 'run.json'}: models[tiny-qwen3moe].file", why, "bare file name")
    assert not (folder / "reproduce").exists()  # refused before the work folder is made


def test_reproduce_refuses_a_work_folder_that_is_a_symlink_out(tmp_path):
    """reproduce/ (where the tiny model is generated, the results written) is a link to a folder of the
    user's: refused before anything is deleted or written there."""
    theirs = tmp_path / "theirs"
    (theirs / "models").mkdir(parents=True)
    (theirs / "models" / "tiny-qwen3moe.gguf").write_bytes(PRECIOUS)
    folder = published_folder(
        tmp_path / "pub", model={"file": "tiny-qwen3moe.gguf", "generate": "tiny-qwen3moe"}
    )
    (folder / "reproduce").symlink_to(theirs)
    p = toolkit("reproduce", str(folder))
    assert (theirs / "models" / "tiny-qwen3moe.gguf").read_bytes() == PRECIOUS, _out(p)
    assert sorted(x.name for x in theirs.iterdir()) == ["models"], _out(p)  # no results/, bench-matrix.yaml
    _assert_refused(p, "symlink reproduce", f"resolves to {theirs.resolve()}, outside")


def test_reproduce_refuses_a_model_reached_through_a_symlink_out(tmp_path, outside):
    """matrix_path inside the folder, but the file there a link to the user's file: refused, not hashed
    (its sha256 would have been printed) nor mounted into the run's container."""
    folder = published_folder(
        tmp_path / "pub", model={"file": "tiny.gguf", "matrix_path": "models/tiny.gguf"}
    )
    (folder / "models").mkdir()
    (folder / "models" / "tiny.gguf").symlink_to(outside)
    p = toolkit("reproduce", str(folder))
    _assert_refused(p, "symlink models/tiny.gguf", "outside")
    assert "sha256" not in p.stderr.split("error: ", 1)[1].split(";")[0]
    assert outside.read_bytes() == PRECIOUS


def test_reproduce_refuses_an_absolute_matrix_path(tmp_path, outside):
    folder = published_folder(tmp_path / "pub", model={"file": "tiny.gguf", "matrix_path": str(outside)})
    p = toolkit("reproduce", str(folder))
    _assert_refused(p, "models[tiny-qwen3moe].matrix_path", "absolute path", "--model-dir")
    assert outside.read_bytes() == PRECIOUS


def test_reproduce_refuses_results_jsonl_that_is_a_symlink_out(tmp_path):
    folder = published_folder(tmp_path / "pub", model={"file": "tiny.gguf", "generate": "tiny-qwen3moe"})
    elsewhere = tmp_path / "elsewhere.jsonl"
    (folder / "results.jsonl").rename(elsewhere)
    (folder / "results.jsonl").symlink_to(elsewhere)
    p = toolkit("reproduce", str(folder))
    _assert_refused(p, "symlink results.jsonl", "outside")
    assert not (folder / "reproduce").exists()


def test_model_dir_takes_only_a_bare_file_name(tmp_path, outside):
    """--model-dir is the user's own folder (its links, e.g. a Hugging Face cache's, are followed), but
    the name joined to it comes from run.json: a name with a '/' is refused before any lookup."""
    from toolkit.publish import reproduce as repro

    m = run_folder.PublishedModel(name="m", file="../outside.gguf", sha256="cd" * 32, size_bytes=1)
    with pytest.raises(BadInput, match=r"models\[m\]\.file: '\.\./outside\.gguf' has a '\.\.' component"):
        repro.locate_model(m, tmp_path / "pub", tmp_path / "pub" / "reproduce", tmp_path / "models")


def test_export_writes_a_matrix_path_only_when_it_means_the_same_inside_the_folder():
    assert scrub.folder_relative("models/x.gguf")
    assert not any(scrub.folder_relative(p) for p in ("/data/x.gguf", "../models/x.gguf", "~/x.gguf"))


# ------------------------------------------------------------------ 2. source subdir of an archive


def _source_matrix(dir_: Path, source: dict) -> Path:
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / "Dockerfile.templates").mkdir(exist_ok=True)
    data = {"schema_version": 1, "sources": {"hostile": source}, "images": [], "models": []}
    (dir_ / "matrix.yaml").write_text(yaml.safe_dump(data))
    return dir_ / "matrix.yaml"


@pytest.mark.parametrize("kind", ["archive", "pypi"])
@pytest.mark.parametrize("subdir", ["../x", "/etc", "vendor/../../x"])
def test_matrix_validation_refuses_a_subdir_out_of_the_tree(tmp_path, kind, subdir):
    spec = {"archive": "src.tar.gz"} if kind == "archive" else {"pypi": "llama-cpp-python==0.3.36"}
    path = _source_matrix(tmp_path, {**spec, "subdir": subdir, "commit": "0c1e57098"})
    p = toolkit("render", "--matrix", str(path))
    assert p.returncode == 4, _out(p)
    assert f"{path}: line 6, column 5: sources.hostile: subdir: {subdir!r}" in p.stderr, _out(p)
    assert ("absolute path" if subdir.startswith("/") else "'..' component") in p.stderr


def _tar(path: Path, members: list[tuple[str, str, str]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, kind, target in members:
            info = tarfile.TarInfo(name)
            if kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, target
                tf.addfile(info)
            else:
                data = b"x"
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def secret(tmp_path) -> Path:
    d = tmp_path / "secret"
    d.mkdir()
    (d / "id_rsa").write_text("PRIVATE KEY")
    return d


@pytest.mark.parametrize("absolute", [True, False], ids=["absolute-link", "relative-link"])
def test_an_archive_whose_subdir_is_a_link_out_is_refused(tmp_path, monkeypatch, secret, absolute):
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path / "cache"))
    target = (
        str(secret) if absolute else os.path.relpath(secret, tmp_path / "cache" / "sources" / "x" / "pkg")
    )
    (tmp_path / "p").mkdir()
    _tar(tmp_path / "p" / "src.tar.gz", [("pkg/ok.c", "file", ""), ("pkg/vendor", "sym", target)])
    lm = load_matrix(
        _source_matrix(tmp_path / "p", {"archive": "src.tar.gz", "subdir": "vendor", "commit": "abc"})
    )
    with pytest.raises(BadInput) as err:
        sources.prepare_source(lm, "hostile")
    assert "source archive" in str(err.value) and "src.tar.gz" in str(err.value), err.value
    copies = [p for p in (tmp_path / "cache").rglob("id_rsa")]
    assert copies == []


def test_a_cached_tree_whose_subdir_became_a_link_out_is_refused_at_use(tmp_path, monkeypatch, secret):
    """The check after extraction: whatever put the link there (a tree extracted by an older toolkit, by
    hand), the subdir resolved must be inside the extracted tree."""
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "p").mkdir()
    _tar(tmp_path / "p" / "src.tar.gz", [("pkg/vendor/x.c", "file", "")])
    lm = load_matrix(
        _source_matrix(tmp_path / "p", {"archive": "src.tar.gz", "subdir": "vendor", "commit": "abc"})
    )
    got = sources.prepare_source(lm, "hostile")
    assert (got.path / "x.c").is_file()
    shutil.rmtree(got.path)
    got.path.symlink_to(secret)
    with pytest.raises(BadInput) as err:
        sources.prepare_source(lm, "hostile")
    msg = str(err.value)
    assert "subdir: 'vendor' resolves to" in msg and f"{secret.resolve()}, outside" in msg, msg


# -------------------------------------------------- other paths from files: published matrix, campaigns


def test_a_published_folders_matrix_may_not_name_a_model_outside_it(tmp_path, outside):
    """`toolkit reproduce` advises `toolkit fetch-model NAME --matrix DIR/matrix.yaml`: that matrix is
    someone else's, so its model path (where the model is generated or downloaded) must stay in DIR."""
    folder = tmp_path / "pub"
    folder.mkdir()
    (folder / "run.json").write_text("{}")
    (folder / "Dockerfile.templates").mkdir()
    rel = os.path.relpath(outside, folder)
    data = {
        "schema_version": 1,
        "images": [],
        "models": [{"name": "tiny", "path": rel, "generate": "tiny-qwen3moe"}],
    }
    write_matrix(folder, data)
    p = toolkit("fetch-model", "tiny", "--matrix", str(folder / "matrix.yaml"))
    assert p.returncode == 4, _out(p)
    assert f"{folder / 'matrix.yaml'}: models[tiny].path: {rel!r} has a '..' component" in p.stderr, _out(p)
    assert outside.read_bytes() == PRECIOUS
    # the user's own matrix (no run.json beside it) may still name a file anywhere
    (folder / "run.json").unlink()
    assert load_matrix(folder / "matrix.yaml").resolve(rel) == folder / rel


def test_a_published_matrix_may_not_name_a_local_source_outside_it(tmp_path, secret):
    """--rebuild loads the folder's matrix confined: a `path:` source outside it would be copied into the
    build context (and BuildKit's cache)."""
    path = _source_matrix(tmp_path / "w", {"path": str(secret), "commit": "abc"})
    lm = load_matrix(path, confined=True)
    with pytest.raises(BadInput, match=r"sources\.hostile\.path: '.*/secret' is an absolute path"):
        sources.prepare_source(lm, "hostile")


def test_campaign_files_may_not_lead_out_of_results(tmp_path):
    from toolkit.campaign import slurm

    with pytest.raises(BadInput, match="campaign '../../x'"):
        slurm.load(tmp_path / "results", "../../x")
    good = {
        "id": "c1",
        "created": "",
        "matrix": "",
        "project": "",
        "results": str(tmp_path / "results"),
        "toolkit": [],
        "spec": {},
        "slices": [],
    }
    piece = {
        "campaign": "c1",
        "index": 0,
        "host": "node1",
        "engine": "node1",
        "image": "cpu",
        "backend": "cpu",
        "runner": "llama-bench",
        "model": "tiny",
        "image_id": DIGEST,
        "pull": "r/cpu@" + DIGEST,
        "build": {},
        "job_name": "tk-c1.node1",
        "script": "s",
        "output": "o",
    }
    slurm.Campaign.model_validate({**good, "slices": [piece]})
    (tmp_path / "results" / "campaigns").mkdir(parents=True)
    for bad in (
        {"id": "../../x"},
        {"slices": [{**piece, "host": "../../x"}]},
        {"slices": [{**piece, "job_id": "1/../.."}]},
    ):
        state = tmp_path / "results" / "campaigns" / "c1.json"
        state.write_text(json.dumps({**good, **bad}))
        with pytest.raises(BadInput, match="not a campaign file"):
            slurm.load(tmp_path / "results", "c1")
    c = slurm.Campaign.model_validate(good)
    with pytest.raises(BadInput, match=r"slices\[\]\.output: '(\.\./)+etc/passwd' has a '\.\.' component"):
        c.inside(os.path.relpath("/etc/passwd", c.results), "slices[].output")
    assert c.inside("hosts/node1/logs/x.out", "slices[].output") == (
        tmp_path / "results/hosts/node1/logs/x.out"
    )
