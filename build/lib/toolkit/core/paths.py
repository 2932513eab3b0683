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
from pathlib import Path, PurePosixPath

from toolkit.core.errors import BadInput


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


def symlinks_inside(folder: Path, *, what: str, fix: str | None = None) -> None:
    """Every symlink under `folder` (files and folders; links are not followed while walking) must
    resolve inside `folder`: BadInput naming `what`, the link and where it points otherwise."""
    root = Path(folder)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            p = Path(dirpath) / name
            if p.is_symlink():
                rel = p.relative_to(root)
                contained(root, rel, what=f"{what}: symlink {rel}", fix=fix)
