"""Round 19b: a hostile tester of reproduce's stranger folder and of commands whose cost grew with the
stored history. Each test fails on the code before its fix (no Docker engine needed):

1. a published run.json whose image `digest` is a tag of this host (`toolkit/cpu:latest`) or an ID
   prefix: reproduce ran the user's own image and said "image ID matches the record"; now exit 4
   naming run.json, the image and the field, before anything is made or run.
2. a published folder holding a FIFO (matrix.yaml, a template): reproduce hung reading it (or, with
   --rebuild, exit 8 "(unknown path): [...] is a named pipe; free space"); now exit 4 naming it.
3. `export-run RUN` (and `reproduce RUN`, `tune`, a campaign's collect) read every record of the results
   folder to find one run's: over 300 s for a run of 6 beside 240,000 stored records; now the run's
   records through the query index, and tune ranks its own trials.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.records import make_record
from tests.support.runs import DIGEST, bench_records, published_folder
from toolkit.bench import tune
from toolkit.core.errors import BadInput
from toolkit.core.paths import symlinks_inside
from toolkit.matrix.api import load_matrix
from toolkit.publish import reproduce as repro
from toolkit.publish import run_folder
from toolkit.results.records import ResultStore


def toolkit(*args: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m toolkit ARGS` of this checkout, no Docker engine reachable (nothing may need one)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=env,
    )


# ------------------------------------------------------------- 1. a digest that names this host's image


@pytest.mark.parametrize(
    "digest",
    ["toolkit/cpu:latest", "alpine", "sha256:9206", "9206eeaed761", "sha256:" + "A" * 64, "-f"],
    ids=["own-tag", "plain-name", "id-prefix", "short-id", "upper-hex", "dash"],
)
def test_a_published_digest_that_is_no_image_id_is_refused_before_anything_runs(tmp_path, digest):
    folder = published_folder(tmp_path / "pub", digest=digest)
    p = toolkit("reproduce", str(folder))
    assert p.returncode == 4, (p.returncode, p.stderr[-2000:])
    assert f"{folder / 'run.json'}: images[cpu].digest {digest!r} is not an image ID" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert not (folder / "reproduce").exists()  # refused before the work folder or a model is made


def test_an_image_id_and_an_import_keep_their_own_paths():
    run = run_folder.PublishedRun.model_validate(
        json.loads(
            run_folder.PublishedRun(
                run_id="r", created="c", exported="e", images=[], models=[], bench={}
            ).model_dump_json()
        )
    )
    run.images = [run_folder.PublishedImage(name="cpu", backend="cpu", digest=DIGEST)]
    repro.refuse_imported(run)  # an image ID: accepted
    run.images = [run_folder.PublishedImage(name="cpu", backend="cpu", digest="import:" + "ab" * 32)]
    with pytest.raises(BadInput, match="its results were imported"):
        repro.refuse_imported(run)


# ----------------------------------------------------------------- 2. special files in a stranger's folder


def test_a_fifo_named_matrix_yaml_in_a_published_folder_is_refused_not_read(tmp_path):
    folder = published_folder(tmp_path / "pub")
    os.mkfifo(folder / "matrix.yaml")
    p = toolkit("reproduce", str(folder), timeout=60)  # was: blocked forever opening the FIFO
    assert p.returncode == 4, (p.returncode, p.stderr[-2000:])
    assert "'matrix.yaml' is a FIFO (named pipe), not a regular file or folder; remove it" in p.stderr


def test_a_fifo_among_the_templates_is_refused_before_rebuild_copies_them(tmp_path):
    folder = published_folder(tmp_path / "pub")
    (folder / "matrix.yaml").write_text((ROOT / "matrix.yaml").read_text())
    (folder / "Dockerfile.templates").mkdir()
    os.mkfifo(folder / "Dockerfile.templates" / "zz.j2")
    p = toolkit("reproduce", "--rebuild", str(folder), timeout=60)
    assert p.returncode == 4, (p.returncode, p.stderr[-2000:])  # was: exit 8, "(unknown path): [(...)]"
    assert "'Dockerfile.templates/zz.j2' is a FIFO (named pipe)" in p.stderr
    assert not (folder / "reproduce").exists()


def test_files_only_names_fifos_and_sockets_and_keeps_files_folders_and_inner_links(tmp_path):
    base = tmp_path / "f"
    (base / "d").mkdir(parents=True)
    (base / "d" / "x").write_text("x")
    (base / "ok").symlink_to("d/x")
    symlinks_inside(base, what="w", files_only=True)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(base / "d" / "sock"))
        with pytest.raises(BadInput, match=r"w: 'd/sock' is a socket, not a regular file or folder"):
            symlinks_inside(base, what="w", files_only=True)
        symlinks_inside(base, what="w")  # the links-only check (export's --out) is as before


# ----------------------------------------------------------------- 3. a run's cost, not the history's


def _store_with_history(root: Path, runs: int) -> ResultStore:
    store = ResultStore(root)
    for i in range(runs):
        store.add_results(bench_records(f"run-{i:04d}"))
    return store


def test_export_run_reads_the_run_through_the_index_not_the_whole_history(tmp_path, monkeypatch):
    store = _store_with_history(tmp_path / "results", 40)
    expected = [r.model_dump() for r in store.results() if r.run_id == "run-0007"]

    def every_record(self):  # the history read the fix removed
        raise AssertionError("export-run read every stored record to find one run's")

    monkeypatch.setattr(ResultStore, "results", every_record)
    run = run_folder.export_run(store, "run-0007", tmp_path / "out")
    assert run.records == {"total": 6, "ok": 6, "failed": 0}
    got = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert got == json.loads(json.dumps(expected, default=str))
    with pytest.raises(BadInput, match="no results of run 'nope'"):
        run_folder.run_records(store, "nope")


def test_tune_ranks_its_own_trials_without_reading_the_stored_history(tmp_path, monkeypatch):
    lm = load_matrix(ROOT / "matrix.yaml")
    speed = {512: 3400.0, 2048: 4600.0}

    def run_trial(axes, extra):
        ub = axes.n_ubatch[0]
        r = make_record(
            "cpu", "cpu", p=2048, ub=ub, avg=speed[ub], gpu_info="", raw={"samples_ts": [speed[ub]] * 3}
        )
        r.__pydantic_extra__ = {**(r.model_extra or {}), **extra}
        return [r]

    def every_record(self):
        raise AssertionError("a tune round read every stored record")

    monkeypatch.setattr(ResultStore, "results", every_record)
    res = tune.search(
        lm,
        axis="prefill",
        tokens=2048,
        knobs={"n_ubatch": [512, 2048]},
        budget_s=60,
        run_trial=run_trial,
        max_rounds=2,
    )
    assert res.ranking[0].candidate.get("n_ubatch") == 2048


def test_a_strangers_cache_mounts_get_ids_no_build_of_this_project_names(project):
    """Round 19b, fault 4: BuildKit shares a `--mount=type=cache` between every build naming its id, so a
    stranger's RUN step (reproduce --rebuild) could leave files in the CMake build tree the user's own
    `toolkit build -i cpu` copies llama-bench out of. A stranger's Dockerfile has every cache id in a
    namespace of its own (the same inputs share one); the project's own build keeps its ids."""
    import re

    from toolkit.images import build as build_mod

    lm = load_matrix(project / "matrix.yaml")
    store = ResultStore(project / "results")
    dockerfile = project / "images" / "cpu" / "Dockerfile"
    build_mod.build_image(lm, lm.m.image("cpu"), store, dry_run=True)
    own = re.findall(r"--mount=type=cache\S*?id=([^,\s]+)", dockerfile.read_text())
    build_mod.build_image(lm, lm.m.image("cpu"), store, dry_run=True, stranger=True)
    theirs = re.findall(r"--mount=type=cache\S*?id=([^,\s]+)", dockerfile.read_text())
    assert own and not any(i.startswith("toolkit-reproduce") for i in own)
    assert len(theirs) == len(own) and all(
        re.fullmatch(r"toolkit-reproduce-[0-9a-f]{16}-.+", i) for i in theirs
    )
    assert {i.split("-", 3)[3] for i in theirs} == set(own)

    template = project / "Dockerfile.templates" / "partials" / "llama-cmake.j2"
    template.write_text(template.read_text().replace("id={{ cache_id }}", "id=${CACHE}"))
    with pytest.raises(
        BadInput, match=r"llama-cpu.Dockerfile.j2: `--mount=type=cache,target=/build,id=\$\{CACHE\}"
    ):
        build_mod.build_image(lm, lm.m.image("cpu"), store, dry_run=True, stranger=True)
