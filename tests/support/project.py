"""The project's paths and matrix helpers every test level shares: ROOT (the repository), DATA
(tests/data), writing and mutating a matrix.yaml, and a seeded current build record."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def write_matrix(dir_: Path, data: dict) -> Path:
    p = dir_ / "matrix.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def cpu_project(proj: Path, matrix_data: dict) -> Path:
    """A project at `proj` whose matrix (the `matrix_data` fixture's) keeps the cpu image only, with the
    real Dockerfile.templates/: what export-run needs of a checkout. Returns the matrix file."""
    import shutil

    matrix_data["images"] = [i for i in matrix_data["images"] if i["name"] == "cpu"]
    shutil.copytree(ROOT / "Dockerfile.templates", proj / "Dockerfile.templates")
    return write_matrix(proj, matrix_data)


def mutate(data: dict, path: list, value) -> dict:
    """A deep copy of `data` with the value at key path `path` replaced (KeyError: deleted)."""
    d = copy.deepcopy(data)
    cur = d
    for p in path[:-1]:
        cur = cur[p]
    if value is KeyError:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d


def seed_current_build(
    project: Path, image: str = "cpu", digest: str | None = None, engine: str | None = None
):
    """A build record of `image` in project/results/builds.jsonl whose inputs key is the one the
    project's matrix and templates give now (so `toolkit bench` takes it as current), under a made-up
    digest: for tests that stop before any container starts (the engine is never asked for it).
    `engine`: the engine ID it was built on (None: a record from before builds named their engine)."""
    from toolkit.images import build as build_mod
    from toolkit.matrix.api import load_matrix
    from toolkit.results.records import BuildRecord, ResultStore

    lm = load_matrix(project / "matrix.yaml")
    spec = lm.m.image(image)
    key = build_mod.inputs_key(lm, spec)
    digest = digest or "sha256:" + (image.encode().hex() * 64)[:64]
    rec = BuildRecord(
        engine=engine,
        image=image,
        ref=f"toolkit/{image}:seeded",
        digest=digest,
        backend=spec.backend,
        template=spec.template,
        template_hash=key.template_hash,
        labels={build_mod.INPUTS_KEY_LABEL: key.key},
        created="2026-01-01T00:00:00Z",
    )
    ResultStore(project / "results").add_build(rec)
    return rec


def precious_file(tmp_path: Path) -> Path:
    """A file outside the results root that a write through a planted link would clobber:
    tmp_path/x/precious.txt holding "precious\n"."""
    p = tmp_path / "x" / "precious.txt"
    p.parent.mkdir()
    p.write_text("precious\n")
    return p
