"""The render-inputs hash of an image (sha256 over its template's text with every partial the template
reaches, the image spec and the render context), for `toolkit bench` without jinja2 where it can.

Which partials a template reaches is found by parsing it (toolkit.images.render.reached_templates:
jinja2's import and parse cost ~0.06 CPU s per process, paid by every `toolkit bench`). It follows from
the text of the files read, so once known it is kept: .toolkit/template-inputs.json (beside the model
files' sha256-cache.json) holds, per template file state (size, mtime, device, inode, ctime: a copied
or unpacked folder never matches a state recorded elsewhere, so an entry shipped in a stranger's
folder is never used), the files reached in order with the sha256 of each one's text. When every one
of those files still has that text, the inputs are read back from them, no parse; else the template is
parsed as before and the entry replaced. A cache that cannot be read counts as empty, one that cannot
be written is skipped: never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from toolkit.core import jsonsafe
from toolkit.core.errors import BadInput
from toolkit.matrix.api import TEMPLATE_DIR, ImageSpec, LoadedMatrix, template_path
from toolkit.results import write_atomic

CACHE_FILE = "template-inputs.json"
"""The cache's name in the project's .toolkit/ folder."""


def inputs_hash(template_bytes: bytes, spec: ImageSpec, context: dict) -> str:
    """sha256 over the template bytes (with every partial it reaches: joined) + canonical JSON of the
    spec and render context."""
    h = hashlib.sha256()
    h.update(template_bytes)
    h.update(json.dumps(spec.model_dump(mode="json"), sort_keys=True).encode())
    h.update(json.dumps(context, sort_keys=True, default=str).encode())
    return h.hexdigest()


def render_context(lm: LoadedMatrix, spec: ImageSpec) -> dict:
    """Variables a template sees: the image's `vars` plus image name, backend and matrix facts."""
    ctx = {
        "image_name": spec.name,
        "backend": spec.backend,
        "runner": spec.runner,
        "min_mesa_version": lm.m.min_mesa_version,
    }
    ctx.update(spec.vars)
    return ctx


def joined(files: list[tuple[str, str]]) -> bytes:
    """The inputs bytes of a template: the text of each (name, text) it reaches, in first-reached order,
    each after the first preceded by its name between NULs."""
    out = bytearray()
    for i, (name, text) in enumerate(files):
        if i:
            out.extend(f"\0{name}\0".encode())
        out.extend(text.encode())
    return bytes(out)


def is_template_file(root: Path, path: Path) -> bool:
    """Whether the template file `path` under the templates folder `root` exists (False when it does
    not). Templates are regular files inside the folder: a symbolic link (to /etc/shadow, say), a
    link among its parent folders, or anything that resolves outside the folder raises BadInput and is
    never read."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    inside = root.resolve() in path.resolve().parents
    if (
        not stat.S_ISREG(st.st_mode)
        or not inside
        or any(p.is_symlink() for p in path.parents if root in p.parents)
    ):
        raise BadInput(
            f"{path}: templates must be regular files inside {TEMPLATE_DIR}/ (this is "
            f"{'a symbolic link' if stat.S_ISLNK(st.st_mode) else 'not a regular file inside it'}); "
            "copy the file there instead"
        )
    return True


def _state(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _read_cache(cache_file: Path) -> dict[str, Any]:
    """The cache's object; {} when it is missing, not JSON, or reached through a link (a stranger's
    folder may plant .toolkit or the file as one: nothing outside the project is read)."""
    if cache_file.parent.is_symlink() or cache_file.is_symlink():
        return {}
    raw = jsonsafe.read_regular_file(cache_file)  # a FIFO planted there must not block
    try:
        cache = jsonsafe.parse(raw) if raw is not None else {}
    except jsonsafe.JsonProblem:  # not UTF-8, not JSON, nested too deep
        return {}
    return cache if isinstance(cache, dict) else {}


def _cached_files(root: Path, template: str, entry: Any) -> list[tuple[str, str]] | None:
    """The (name, text) of each file `entry` lists, the first being `template` itself, when every one
    is still a template file with the text recorded; None when any is not (or the entry is malformed,
    or does not start with the template): then the template is parsed."""
    files = entry.get("files") if isinstance(entry, dict) else None
    if (
        not isinstance(files, list)
        or not files
        or not isinstance(files[0], list)
        or files[0][:1] != [template]
    ):
        return None
    out: list[tuple[str, str]] = []
    for item in files:
        if not (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            return None
        name, digest = item
        path = root / name
        try:
            if not is_template_file(root, path):
                return None
            with open(path, encoding="utf-8") as f:  # as jinja2's FileSystemLoader reads it
                text = f.read()
        except (BadInput, OSError, UnicodeDecodeError):  # the parse says what is wrong
            return None
        if _digest(text) != digest:
            return None
        out.append((name, text))
    return out


def _remember(root: Path, cache_file: Path, cache: dict[str, Any], key: str, entry: dict[str, Any]) -> None:
    """Write `cache` with `entry` under `key`: whole or not at all, never through a link below the
    project folder `root` (a stranger's folder may plant .toolkit or its temp file as one: results.
    write_atomic); best effort: a read-only project or a planted link skips it."""
    cache[key] = entry
    with contextlib.suppress(OSError, BadInput):
        write_atomic(cache_file, json.dumps(cache, indent=1).encode(), root=root)


def template_files(lm: LoadedMatrix, spec: ImageSpec) -> list[tuple[str, str]]:
    """(name, text) of the image's template and every partial it reaches, in first-reached order: from
    .toolkit/template-inputs.json when the template file's state and every listed file's text are
    those recorded, else by parsing (render.reached_templates, which raises BadInput for a missing
    partial, a syntax error or a template that is no regular file inside the folder)."""
    tpl_file = template_path(lm, spec.template)
    root = tpl_file.parent
    cache_file = lm.root / ".toolkit" / CACHE_FILE
    cache = _read_cache(cache_file)
    try:
        key = f"{tpl_file.resolve()}:{spec.template}"
        state = _state(tpl_file)
    except (OSError, RuntimeError, ValueError):
        key = state = ""
    entry = cache.get(key)
    if state and isinstance(entry, dict) and entry.get("state") == state:
        files = _cached_files(root, spec.template, entry)
        if files is not None:
            return files
    from toolkit.images import render  # jinja2: only when the cache cannot answer

    files = render.reached_templates(root, spec.template)
    if state:
        _remember(
            lm.root, cache_file, cache, key, {"state": state, "files": [[n, _digest(t)] for n, t in files]}
        )
    return files


def image_inputs_hash(lm: LoadedMatrix, spec: ImageSpec) -> str:
    """The inputs hash render_image would stamp (sha256 hex), from the template files only, not
    rendering them (`toolkit bench` asks it of every selected image). Raises BadInput for a missing
    template or partial, or a template syntax error."""
    tpl_file = template_path(lm, spec.template)
    if not tpl_file.is_file():
        raise BadInput(f"{lm.path}: image {spec.name!r}: template {tpl_file} does not exist")
    return inputs_hash(joined(template_files(lm, spec)), spec, render_context(lm, spec))
