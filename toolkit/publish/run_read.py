"""Reading a published run's folder (`toolkit reproduce`, `report --results EXPORT`): run.json as a
PublishedRun, results.jsonl and builds.jsonl as records, every path and link checked first (a folder
from someone else is untrusted input). Writing it is publish.run_folder's (`toolkit export-run`)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from toolkit.core.errors import BadInput
from toolkit.core.paths import contained, relative_path, symlinks_inside
from toolkit.publish.run_folder import RUN_SCHEMA_VERSION, PublishedRun, field_problem, read_run_json
from toolkit.results.records import BenchRecord, BuildRecord, imported, read_jsonl_numbered

RecordT = TypeVar("RecordT", bound=BaseModel)

UNLINK_FIX = (
    "a published run folder holds its files itself: replace the link with the file it points to, or remove it"
)
FILE_FIX = (
    "a model's `file` is its bare file name (e.g. tiny-qwen3moe.gguf): fix run.json or export the run again"
)
MATRIX_PATH_FIX = (
    "a published run names its model files relative to its own folder (e.g. models/x.gguf): fix run.json "
    "(or remove matrix_path and pass --model-dir DIR holding the file), or export the run again"
)


def label(name: str, i: int) -> str:
    """A model's name as a message shows it: itself when plain, else its index."""
    return name if name and len(name) <= 64 and name.isprintable() and "/" not in name else str(i)


def check_run_paths(run: PublishedRun, where: str) -> None:
    """The paths run.json names (`where`: its path), before anything is looked up: every model's `file`
    is a bare file name and its `matrix_path` relative without '..' (core.paths.relative_path);
    BadInput naming run.json, the field and the fix otherwise. Where they resolve is checked on use
    (reproduce: core.paths.contained in the folder)."""
    for i, m in enumerate(run.models):
        at = f"{where}: models[{label(m.name, i)}]"
        if len(relative_path(m.file, what=f"{at}.file", fix=FILE_FIX).parts) != 1:
            raise BadInput(f"{at}.file: {m.file[:200]!r} is not a file name (it has a '/'); {FILE_FIX}")
        if m.matrix_path is not None:
            relative_path(m.matrix_path, what=f"{at}.matrix_path", fix=MATRIX_PATH_FIX)


def _read_records(path: Path, model: type[RecordT]) -> list[RecordT]:
    """Every line of a published folder's results.jsonl / builds.jsonl as `model`; BadInput naming
    file:line and the field at the first line that is not one (a reference with a line left out
    would reproduce a run other than the one published)."""
    problems: list[str] = []
    out: list[RecordT] = []
    for n, obj in read_jsonl_numbered(path, problems):
        if problems:
            break
        try:
            out.append(model.model_validate(obj))
        except ValidationError as err:
            problems.append(f"{path}:{n}: {field_problem(err)}")
    if problems:
        raise BadInput(
            f"{problems[0]}; every line of a published run is part of it: re-export or re-download the folder"
        )
    return out


def load_run(folder: Path) -> tuple[PublishedRun, list[BenchRecord], list[BuildRecord]]:
    """Read a published run folder; BadInput naming the missing or malformed file, or an imported run
    (export-run writes one, reproduce cannot run it). A folder from someone
    else is untrusted input: before any file is read, every symlink in it must point inside it, any other
    entry be a file or folder (symlinks_inside: a FIFO hung reproduce), run.json's paths relative ones."""
    folder = Path(folder)

    symlinks_inside(folder, what=f"published run folder {folder}", fix=UNLINK_FIX, files_only=True)
    files = {
        name: contained(folder, name, what=f"{folder}: {name}", fix=UNLINK_FIX)
        for name in ("run.json", "results.jsonl", "builds.jsonl")
    }
    for name in ("run.json", "results.jsonl"):
        if not files[name].is_file():
            raise BadInput(
                f"{folder}: {name} is missing; a published run folder is written by `toolkit export-run`"
            )
    where = f"{folder / 'run.json'}"
    run = read_run_json(files["run.json"])
    if run.schema_version != RUN_SCHEMA_VERSION:
        raise BadInput(
            f"{where}: schema_version {run.schema_version} is not supported (this toolkit "
            f"reads {RUN_SCHEMA_VERSION})"
        )
    for im in run.images:  # said before the paths: an import's model has no file, and exporting again
        if imported(im.digest):  # gives the same run.json (reproduce.refuse_imported's words)
            raise BadInput(f"image {im.name}: its results were imported (`toolkit import`): no image to run")
    check_run_paths(run, where)
    recs = _read_records(files["results.jsonl"], BenchRecord)
    builds = _read_records(files["builds.jsonl"], BuildRecord)
    return run, recs, builds


def first_error(err: Exception) -> str:
    """The first problem of a pydantic ValidationError (`loc: msg`), else the error's text, short."""
    if isinstance(err, ValidationError) and err.errors():
        e = err.errors()[0]
        loc = ".".join(str(x) for x in e["loc"])
        return f"{loc + ': ' if loc else ''}{e['msg']}"[:300]
    return str(err)[:300]
