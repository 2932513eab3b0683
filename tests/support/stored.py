"""Imports and hand edits of stored records through the real CLI, for the integrity rounds' tests: the
H200 `toolkit measure` rows of tests/data, a project holding the repository's matrix.yaml, an import
into its results folder `r`, and a rewrite of the records stored there (as a hand or another tool
would edit them)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.project import DATA, ROOT
from tests.support.runs import tk

H200 = DATA / "h200-measure"


def h200_rows(name: str) -> list[dict[str, Any]]:
    """The rows of tests/data/h200-measure/NAME (a real `toolkit measure` file), one dict each."""
    return [json.loads(line) for line in (H200 / name).read_text().splitlines() if line.strip()]


def matrix_project(tmp_path: Path) -> Path:
    """`tmp_path` made a project: the repository's matrix.yaml copied in."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    return tmp_path


def import_rows(tmp: Path, rows: list[dict[str, Any]] | Path, label: str, *extra: str) -> str:
    """`toolkit import --results r --label LABEL [extra] FILE` in project `tmp` of a file, or of `rows`
    written as one; asserts exit 0 and returns stdout + stderr."""
    if isinstance(rows, Path):
        src = rows
    else:
        src = tmp / f"{label}.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = tk(tmp, "import", "--results", "r", "--label", label, *extra, str(src))
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout + res.stderr


def edit_stored(tmp: Path, edit: Callable[[dict[str, Any]], Any], label: str | None = None) -> None:
    """Rewrite the stored records under tmp/r (of image `label`, or all) through `edit(record)`."""
    for f in (tmp / "r").glob("*/bench.jsonl"):
        recs = [json.loads(line) for line in f.read_text().splitlines()]
        if recs and (label is None or recs[0]["image"]["name"] == label):
            for r in recs:
                edit(r)
            f.write_text("".join(json.dumps(r) + "\n" for r in recs))
