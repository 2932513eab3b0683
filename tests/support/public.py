"""Imports of the real public result files of tests/data/public (the rounds of tests/test_public_files_*),
each into a fresh results folder of the test's own, as `toolkit import` reads them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.project import DATA
from toolkit.core.errors import BadInput
from toolkit.results import importer
from toolkit.results.records import BenchRecord, ResultStore

PUBLIC = DATA / "public"


def imported(tmp_path: Path, name: str, **kw) -> importer.ImportResult:
    """The ImportResult (its notes, skipped lines) of importing the public file `name` (copied under its
    own name) into tmp_path/results under the label `pub`; `kw`: importer.import_files' options."""
    src = tmp_path / "in" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(PUBLIC / name, src)
    return importer.import_files(ResultStore(tmp_path / "results"), [src], label="pub", **kw)


def imp(tmp_path: Path, name: str, **kw) -> list[BenchRecord]:
    """The records of importing the public file `name` (imported) into tmp_path/results."""
    imported(tmp_path, name, **kw)
    return ResultStore(tmp_path / "results").results()


def refused(tmp_path: Path, name: str) -> str:
    """The BadInput message of importing the public file `name` (imp), which must refuse it."""
    with pytest.raises(BadInput) as err:
        imp(tmp_path, name)
    return str(err.value)


def cells(recs: list[BenchRecord]) -> list[tuple]:
    """Each record's cell, sorted: (n_prompt, n_gen, n_depth, n_batch, n_ubatch, avg_ts, stddev_ts or 0),
    tok/s rounded to 6 places."""
    return sorted(
        (
            r.n_prompt,
            r.n_gen,
            r.n_depth,
            r.n_batch,
            r.n_ubatch,
            round(r.avg_ts, 6),
            round(r.stddev_ts or 0, 6),
        )
        for r in recs
    )


def first_read(recs: list[BenchRecord]) -> tuple:
    """(how many records, then the first one's test, n_prompt, n_gen, n_depth, n_batch, n_ubatch,
    backend, GPU (None where the row names none: ""), avg_ts, stddev_ts, build commit): what a public
    file's round checks of a file it reads right."""
    r = recs[0]
    return (
        len(recs),
        r.test,
        r.n_prompt,
        r.n_gen,
        r.n_depth,
        r.n_batch,
        r.n_ubatch,
        r.image.backend,
        r.gpu_info or None,
        r.avg_ts,
        r.stddev_ts,
        r.build_commit,
    )


def read_as(tmp_path: Path, name: str) -> str:
    """first_read of importing the public file `name`, as one line: "count test p.. g.. d.. b.. ub..
    backend GPU t/s ± stddev build" (what a round's table of files read right holds)."""
    n, test, p, g, d, b, ub, backend, gpu, ts, sd, build = first_read(imp(tmp_path, name))
    return f"{n} {test} p{p} g{g} d{d} b{b} ub{ub} {backend} {gpu} {ts} ± {sd} {build}"
