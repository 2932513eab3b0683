"""Paths taken from files and user-provided data stay inside the folder they belong to.

A published run folder (run.json, results.jsonl, matrix.yaml), a source archive, a campaign file or a
command-line value may name a path; someone else may have written it. Every such path goes through
`contained(base, relative, what=...)` before anything is read, written or deleted there:

- relative: not empty, not absolute, no NUL byte, no `..` component (checked on the text);
- inside: `base / relative` with every symlink resolved (base's own too) lies in the resolved `base`,
  so a symlink in the folder that points out of it is refused like a `../` in the text.

A refusal is BadInput (exit 4) naming `what` (the file and the field), the value, why, and the fix.
`relative_path` is the text check alone, for a value checked before any folder exists (matrix
validation) or joined to a folder of the user's own whose symlinks are theirs to follow (--model-dir).
`symlinks_inside(folder, what=...)` applies `contained` to every symlink under a folder (a published
run folder is checked as a whole before any of its files is read).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath

from toolkit.core.errors import BadInput


def typed(path: Path) -> str:
    """`path` as a user in the working folder types it in a command: `.` for that folder, relative below
    it (`published/r1`), else absolute; quote it (text.shell_word) to paste."""
    here, full = Path.cwd().resolve(), Path(path).resolve()
    return str(full.relative_to(here)) if full.is_relative_to(here) else str(full)


def _refuse(what: str, value: object, why: str, fix: str) -> BadInput:
    return BadInput(f"{what}: {str(value)[:200]!r} {why}; {fix}")


def relative_path(relative: str | Path, *, what: str, fix: str | None = None) -> PurePosixPath:
    """`relative` as a relative path that cannot climb out of the folder it is joined to: BadInput
    naming `what` when it is empty, absolute, holds a NUL byte or has a `..` component."""
    fix = fix or "give a path relative to its folder, without '..', that stays inside it"
    text = os.fspath(relative)
    if not isinstance(text, str):  # bytes: never a path of ours
        raise _refuse(what, text, "is not a text path", fix)
    if text == "":
        raise _refuse(what, text, "is empty", fix)
    if "\0" in text:
        raise _refuse(what, text.replace("\0", "?"), "contains a NUL byte", fix)
    path = PurePosixPath(text)
    if path.is_absolute():
        raise _refuse(what, text, "is an absolute path", fix)
    if ".." in path.parts:
        raise _refuse(what, text, "has a '..' component (it would leave its folder)", fix)
    return path


def contained(base: Path, relative: str | Path, *, what: str, fix: str | None = None) -> Path:
    """The resolved `base / relative` when it stays inside `base` once every symlink is resolved;
    BadInput naming `what` (e.g. "published/run.json: models[tiny].file") otherwise: an empty,
    absolute or `..` path (relative_path), a symlink on the way that points out of `base`, a symlink
    loop. `base` itself is resolved first (a folder given by the user may be a symlink). Nothing is
    read, written or created: a path that does not exist yet is checked through its existing part."""
    fix = fix or f"give a path relative to {base} that stays inside it"
    rel = relative_path(relative, what=what, fix=fix)
    try:
        root = Path(base).resolve()
        target = (root / rel).resolve()
    except (OSError, RuntimeError) as err:  # a symlink loop (RuntimeError before Python 3.13, then OSError)
        raise _refuse(what, relative, f"cannot be resolved ({err})", fix) from None
    if not target.is_relative_to(root):
        raise _refuse(
            what,
            relative,
            f"resolves to {target}, outside {root} (a symlink on the way points out of it)",
            fix,
        )
    return target


def _node_kind(mode: int) -> str | None:
    """What a file-system node that is neither a regular file, a folder nor a symlink is (None for those)."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device file" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file"


def symlinks_inside(folder: Path, *, what: str, fix: str | None = None, files_only: bool = False) -> None:
    """Every symlink under `folder` (files and folders; links are not followed while walking) must
    resolve inside `folder`: BadInput naming `what`, the link and where it points otherwise. With
    `files_only` (a folder from someone else: a published run), every other entry must be a regular file
    or a folder too: a FIFO would hang the reader that opens it, a device or socket is no file of a run."""
    root = Path(folder)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(root)
            try:
                mode = p.lstat().st_mode
            except OSError:  # gone while walked: whoever reads it later says so
                continue
            if p.is_symlink():
                contained(root, rel, what=f"{what}: symlink {rel}", fix=fix)
            elif files_only and (kind := _node_kind(mode)) is not None:
                raise BadInput(
                    f"{what}: {str(rel)[:200]!r} is {kind}, not a regular file or folder; remove it"
                )


STORE_FILES = ("bench.jsonl", "builds.jsonl")
"""The results store's own files (and its `.index.sqlite`, `.lock`, `.seq`): never an output."""

_ROOT_MARKS = ("builds.jsonl", ".index.sqlite", ".seq")  # not .lock: pytest and others use the name
_DIGEST_MARKS = ("bench.jsonl", "canary.jsonl")


def results_folder(path: Path) -> tuple[Path, str] | None:
    """The results folder `path` is or lies in, as (folder, "digest" | "root"), any results folder,
    not only the one a command was given; None when there is none. A digest folder (results/<digest>/,
    toolkit.results.records) holds `bench.jsonl` or `canary.jsonl`, or is named by 12 hex digits
    inside a store root; a store root holds `builds.jsonl`, `.index.sqlite` or `.seq`. The
    nearest such folder counts (a digest folder before its root)."""
    real = Path(path).resolve()
    for folder in (real, *real.parents):
        if not folder.is_dir():
            continue
        if any((folder / m).exists() for m in _DIGEST_MARKS):
            return folder, "digest"
        parent_is_root = any((folder.parent / m).exists() for m in _ROOT_MARKS)
        if parent_is_root and re.fullmatch(r"[0-9a-f]{12}", folder.name):
            return folder, "digest"
        if any((folder / m).exists() for m in _ROOT_MARKS):
            return folder, "root"
    return None


def output_file(
    path: Path,
    *,
    option: str,
    protected: tuple[Path, ...] = (),
    data_root: Path | None = None,
    replaces: bool = True,
    refuse_nodes: bool = False,
) -> Path:
    """Check a file the user names for output (`report -o`, `measure --out`) before anything is written.

    BadInput (exit 4) when it exists and is not a regular file (a symlink, a device such as /dev/null
    or /dev/full, a FIFO, a folder: an output written by replacing the file would replace the node
    itself, run as root a host's device), when it is one of `protected` (the matrix file), or when
    it is a data file of the results folder `data_root` (`*.jsonl`, `*.sqlite`, a dot-file: the
    store and its index). `replaces=False` (an output opened and written, not replaced: measure's
    rows) allows any node and, inside `data_root`, any `.jsonl` but the store's own (STORE_FILES);
    with `refuse_nodes` it still refuses a node that is not a regular file (measure writes a trace
    beside it: `/dev/null.trace.jsonl`), a file named as a store file (STORE_FILES) anywhere, and
    any path inside a digest folder of any results folder (`results_folder`). Returns `path`."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise BadInput(f"{option} {path}: {err.strerror or err}; give a file's path") from None
    if (replaces or refuse_nodes) and st is not None and not stat.S_ISREG(st.st_mode):
        kind = (
            "symbolic link"
            if stat.S_ISLNK(st.st_mode)
            else "folder"
            if stat.S_ISDIR(st.st_mode)
            else "device or special file"
        )
        raise BadInput(
            f"{option} {path} is a {kind}, not a regular file: the output is written by replacing the file, "
            "which would replace it; give a new or regular file's path"
            if replaces
            else f"{option} {path} is a {kind}, not a regular file: the output would be written through "
            "it (and its trace beside it); give a new or regular file's path"
        )
    if refuse_nodes:
        _refuse_results_data(path, option)
    real = path.resolve()
    if any(real == p.resolve() for p in protected):
        raise BadInput(f"{option} {path} is the matrix file this command reads; give another file's path")
    if data_root is not None and data_root.resolve() in real.parents:
        store_file = real.name in STORE_FILES or real.suffix == ".sqlite" or real.name.startswith(".")
        if store_file or (replaces and real.suffix == ".jsonl"):
            raise BadInput(
                f"{option} {path} is a data file of the results folder {data_root} (its records or their "
                "index); give another file's path"
            )
    return path


def _refuse_results_data(path: Path, option: str) -> None:
    """BadInput when `path` is named as a store file (STORE_FILES) or lies in any results digest folder."""
    if Path(path).name in STORE_FILES:
        raise BadInput(
            f"{option} {path} is named as a results store's own file ({Path(path).name}); give another file's path"
        )
    found = results_folder(Path(path).parent)
    if found and found[1] == "digest":
        raise BadInput(
            f"{option} {path} lies in the results digest folder {found[0]}, which holds measured records; "
            "give a path outside it (the default is results/measure/)"
        )
