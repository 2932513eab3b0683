"""What a run folder copies of a project (matrix.yaml, Dockerfile.templates/): export-run into the
folder it writes, reproduce --rebuild from a published folder into its reproduce/. Regular files and
folders only, never through a link."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from toolkit.core.errors import BadInput, refused_link
from toolkit.results import make_folders, open_regular


def copied(root: Path, matrix: Path) -> list[tuple[Path, Path]]:
    """(source, path inside the copy) of `matrix` and every entry of root/Dockerfile.templates/ (folders
    first, then files, sorted): export-run's copy, and reproduce --rebuild's of a published folder. Each
    must be a regular file or folder, never a symbolic link (one to /etc/passwd would be published; one
    to a folder above copied it into itself) nor a FIFO, socket or device: the template loader's rule
    (toolkit.images.render._Loader). BadInput (exit 4) naming the first offender and the fix."""
    tpl = root / "Dockerfile.templates"
    found = [(matrix, Path("matrix.yaml"))]
    if tpl.is_symlink() or tpl.is_dir():
        found.append((tpl, Path(tpl.name)))
        for where, dirs, files in os.walk(tpl, onerror=_raise):  # a link to a folder: listed, never walked
            found += sorted((Path(where) / n, Path(where, n).relative_to(root)) for n in dirs + files)
    for k, (src, _) in enumerate(found):
        st = os.lstat(src)
        if stat.S_ISLNK(st.st_mode):
            raise BadInput(refused_link(src))
        if not (stat.S_ISREG(st.st_mode) or (k and stat.S_ISDIR(st.st_mode))):
            raise BadInput(f"{src}: not a regular file or folder (export copies only those): remove it")
    return [(s, r) for s, r in found if os.path.isdir(s)] + [(s, r) for s, r in found if not os.path.isdir(s)]


def _raise(err: OSError) -> None:
    raise err


def copy_regular(src: Path, dest: Path, out: Path) -> None:
    """Copy one entry `copied` listed into the export folder `out`: a folder is made, a file's bytes,
    mode and times copied, read and written without following a link (a file swapped for a link since
    it was checked, a link put at any folder below `out`: BadInput, exit 4, nothing written there)."""
    if stat.S_ISDIR(os.lstat(src).st_mode):
        make_folders(dest, root=out)
        return
    with (
        os.fdopen(open_regular(src, os.O_RDONLY | os.O_NOFOLLOW), "rb") as fi,
        os.fdopen(open_regular(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, root=out), "wb") as fo,
    ):
        shutil.copyfileobj(fi, fo)
        fo.flush()
        st = os.fstat(fi.fileno())
        os.fchmod(fo.fileno(), stat.S_IMODE(st.st_mode))
        os.utime(fo.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
