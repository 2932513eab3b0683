"""A run exported with its build (template hash, base image, source origin) and, beside it, the run
`toolkit reproduce .` measured in its folder: a customer's published folder (tests of fix49d, fix50a)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.support.runs import bench_records

RUN = "20261128T195135Z-e6f7c7"  # the published run
NEW = "20261128T195305Z-4ad4d9"  # the run `toolkit reproduce` measured in its folder
LABELS = {
    "org.toolkit.template-hash": "4fae2c6a9b368d9dcb61430a75ce959333e1e762bdebdb22c08ac76d0a9c1821",
    "org.toolkit.base-image": "debian:trixie-slim",
}
ORIGIN = "pypi:llama-cpp-python==0.3.36"
ENGINE = "7B4N:SQPD:ZZZZ:YYYY:XXXX:WWWW:VVVV:UUUU:TTTT:SSSS:RRRR:QQQQ"


def build_record(digest: str, engine: str = ENGINE, origin: str | None = ORIGIN):
    from toolkit.results.records import BuildRecord

    return BuildRecord(
        image="cpu",
        ref="toolkit/cpu:latest",
        digest=digest,
        backend="cpu",
        template="llama-cpu.Dockerfile.j2",
        template_hash=LABELS["org.toolkit.template-hash"],
        labels=LABELS,
        created="2026-11-28T19:00:00+00:00",
        engine=engine,
        source_origin=origin,
    )


def labelled_records(run: str, **kw):
    """The CPU smoke run's records as bench writes them now: the image's build labels and source origin."""
    out = []
    for r in bench_records(run, **kw):
        image = r.image.model_copy(update={"labels": LABELS})
        image.__pydantic_extra__["source_origin"] = ORIGIN
        out.append(r.model_copy(update={"image": image}))
    return out


def exported_folder(tmp_path: Path, matrix_data: dict, *, reproduced: bool = True) -> Path:
    """A project measuring RUN (with its build), exported to tmp/got/r1 with its matrix, and, where
    `reproduced`, the run NEW stored where `toolkit reproduce .` stores it (reproduce/results)."""
    from tests.support.project import cpu_project
    from toolkit.matrix.api import load_matrix
    from toolkit.publish import run_folder
    from toolkit.results.records import ResultStore

    matrix = cpu_project(tmp_path / "project", matrix_data)
    store = ResultStore(matrix.parent / "results")
    recs = labelled_records(RUN)
    store.add_build(build_record(recs[0].image.digest))
    for r in recs:
        store.add_result(r)
    out = tmp_path / "got" / "r1"
    out.parent.mkdir()
    run_folder.export_run(store, RUN, out, load_matrix(matrix))
    if reproduced:
        again = ResultStore(out / "reproduce" / "results")
        for r in labelled_records(NEW, scale=1.01):
            again.add_result(r)
    return out


def pasted_commands(stderr: str) -> list[list[str]]:
    """Each `toolkit ...` command a message gives in backticks to run, as words (the shell's reading);
    not the name `toolkit export-run` alone (the message's "a run `toolkit export-run` wrote")."""
    return [w[1:] for c in re.findall(r"`(toolkit [^`]+)`", stderr) if len(w := shlex.split(c)) > 2]
