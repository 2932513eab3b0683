"""ImageSpec --render--> images/<name>/Dockerfile

Rendering is deterministic: the same matrix and template give the same bytes. The first lines of
every rendered Dockerfile name the template and a sha256 over the render inputs (template bytes +
template variables + image spec), which `toolkit build` also stamps on the image as a label.
Undefined template variables are errors (jinja2 StrictUndefined), reported with the image, the
template and the variable name.

Templates may `{% import %}`/`{% include %}` partials from Dockerfile.templates/partials/ (shared
steps such as the llama.cpp configure guard); the bytes of every partial a template reaches are
part of its inputs hash, so changing a partial changes the hash of every template using it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from toolkit.core.errors import BadInput
from toolkit.spec.matrix import TEMPLATE_DIR, ImageSpec, LoadedMatrix, template_path

IMAGES_DIR = "images"
RENDER_TIMEOUT_S = 10.0
"""A template renders in milliseconds; one still rendering after this loops without end (a nested
loop of 10^10 iterations hung `render`): refused as bad input naming the template."""
MAX_RENDERED_CHARS = 1 << 20
"""The longest string a template may build with `*` or a padding method, and the longest Dockerfile
it may render (one is some kilobytes; `"x" * 10**10` ended in a MemoryError traceback)."""
MAX_INT_BITS = 4096
"""The largest integer a template may compute (a number of 4300 digits cannot even be printed)."""


@dataclass(frozen=True)
class Rendered:
    """A rendered Dockerfile: `inputs_hash` is sha256 hex of the render inputs (64 chars)."""

    image: str
    template: str
    path: Path
    content: str
    inputs_hash: str


def inputs_hash(template_bytes: bytes, spec: ImageSpec, context: dict) -> str:
    """sha256 over the template bytes (with every partial it reaches: template_inputs) + canonical
    JSON of the spec and render context."""
    h = hashlib.sha256()
    h.update(template_bytes)
    h.update(json.dumps(spec.model_dump(mode="json"), sort_keys=True).encode())
    h.update(json.dumps(context, sort_keys=True, default=str).encode())
    return h.hexdigest()


class _Loader(jinja2.FileSystemLoader):
    """Templates are regular files inside Dockerfile.templates/: a symbolic link (to /etc/shadow, say)
    or anything that resolves outside the folder is refused (BadInput), never read."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        root = Path(self.searchpath[0])
        path = root / template
        try:
            st = os.lstat(path)
        except OSError:
            raise jinja2.TemplateNotFound(template) from None
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
        return super().get_source(environment, template)


class _Sandbox(SandboxedEnvironment):
    """Jinja's sandbox (no Python reached from a template) that also bounds `*`, `**` and the padding
    str methods: a string or list of more than MAX_RENDERED_CHARS, or an integer of more than
    MAX_INT_BITS, is a SecurityError.
    (range() is bounded by the sandbox itself: jinja2.sandbox.MAX_RANGE.)"""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            seq, n = (left, right) if isinstance(right, int) else (right, left)
            if (
                isinstance(seq, (str, list, tuple))
                and isinstance(n, int)
                and len(seq) * n > MAX_RENDERED_CHARS
            ):
                raise SecurityError(
                    f"a string or list of {len(seq) * n} items (more than {MAX_RENDERED_CHARS})"
                )
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and left.bit_length() + right.bit_length() > MAX_INT_BITS
            ):
                raise SecurityError(f"a product of more than {MAX_INT_BITS:,} bits")
        if operator == "**" and isinstance(left, int) and isinstance(right, int):
            # at least (bit_length - 1) * exponent + 1 bits: refused only when surely too large
            if right > 0 and abs(left) > 1 and (abs(left).bit_length() - 1) * right + 1 > MAX_INT_BITS:
                raise SecurityError(f"{left} ** {right} is a number of more than {MAX_INT_BITS:,} bits")
        return super().call_binop(context, operator, left, right)

    def call(self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """str methods that pad (`"x".ljust(10**8)`, center, rjust, zfill, expandtabs) bounded like `*`."""
        name = getattr(__obj, "__name__", "")
        pads = ("ljust", "rjust", "center", "zfill", "expandtabs")
        if isinstance(getattr(__obj, "__self__", None), str) and name in pads:
            if any(isinstance(a, int) and a > MAX_RENDERED_CHARS for a in args):
                raise SecurityError(f"str.{name} to more than {MAX_RENDERED_CHARS} characters")
        return super().call(__context, __obj, *args, **kwargs)


def _environment(tpl_dir: Path) -> jinja2.Environment:
    """Templates render in Jinja's sandbox (_Sandbox): a template comes from a project or a published
    folder (`reproduce --rebuild`), and an unsandboxed one can run Python on the host
    (`{{ cycler.__init__.__globals__.os... }}`); the sandbox raises SecurityError instead. Files are
    read through _Loader (regular files inside the folder only)."""
    return _Sandbox(
        loader=_Loader(str(tpl_dir)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


class _RenderTimeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise _RenderTimeout in the block after `seconds` (SIGALRM: Python checks it between bytecodes,
    so a template's loop is interrupted). Only on the main thread, where signals are delivered."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(_signum: int, _frame: Any) -> None:
        raise _RenderTimeout

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def template_inputs(env: jinja2.Environment, name: str) -> bytes:
    """The bytes of template `name` followed by those of every partial it reaches (imports and
    includes, recursively, each once, in first-reached order, each preceded by its name).

    Raises BadInput when a referenced partial does not exist or a template does not parse.
    """
    seen: list[str] = []
    out = bytearray()
    loader = env.loader
    assert loader is not None  # _environment() always gives one (a FileSystemLoader)

    def visit(n: str) -> None:
        if n in seen:
            return
        seen.append(n)
        try:
            source, filename, _ = loader.get_source(env, n)
        except jinja2.TemplateNotFound:
            raise BadInput(
                f"template {seen[0]}: it imports or includes {n!r}, which does not exist "
                f"in Dockerfile.templates/"
            ) from None
        if len(seen) > 1:
            out.extend(f"\0{n}\0".encode())
        out.extend(source.encode())
        try:
            refs = jinja2.meta.find_referenced_templates(env.parse(source))
        except jinja2.TemplateSyntaxError as err:
            raise BadInput(f"{filename}:{err.lineno}: template syntax error: {err.message}") from None
        for ref in refs:
            if ref is None:
                raise BadInput(f"{filename}: imports/includes must name a fixed file (no variables)")
            visit(ref)

    visit(name)
    return bytes(out)


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


def image_inputs_hash(lm: LoadedMatrix, spec: ImageSpec) -> str:
    """The inputs hash render_image would stamp (sha256 hex), from parsing the templates only, not
    rendering them (about a third of the cost: `toolkit bench` asks it of every selected image).
    Raises BadInput for a missing template or partial, or a template syntax error."""
    tpl_file = template_path(lm, spec.template)
    if not tpl_file.is_file():
        raise BadInput(f"{lm.path}: image {spec.name!r}: template {tpl_file} does not exist")
    env = _environment(tpl_file.parent)
    return inputs_hash(template_inputs(env, spec.template), spec, render_context(lm, spec))


def render_image(lm: LoadedMatrix, spec: ImageSpec) -> Rendered:
    """Render one image's template. Raises BadInput for a missing template or undefined variable."""
    tpl_file = template_path(lm, spec.template)
    if not tpl_file.is_file():
        raise BadInput(f"{lm.path}: image {spec.name!r}: template {tpl_file} does not exist")
    env = _environment(tpl_file.parent)
    ctx = render_context(lm, spec)
    digest = inputs_hash(template_inputs(env, spec.template), spec, ctx)
    try:
        with _deadline(RENDER_TIMEOUT_S):
            body = env.get_template(spec.template).render(**ctx, template_hash=digest)
    except ValueError as err:  # e.g. an integer too long to print (Python's 4300-digit limit)
        raise BadInput(
            f"{tpl_file}: the template builds a value that cannot be rendered ({err}); fix it"
        ) from None
    except _RenderTimeout:
        raise BadInput(
            f"{tpl_file}: rendering took more than {RENDER_TIMEOUT_S:g} s (a loop without end?); a template "
            "renders in milliseconds: fix its loops"
        ) from None
    except (OverflowError, MemoryError) as err:
        raise BadInput(f"{tpl_file}: the template builds something too large ({err}); fix it") from None
    except jinja2.UndefinedError as err:
        raise BadInput(
            f"{lm.path}: images[{spec.name}].vars: template {spec.template} uses a variable that is not "
            f"defined ({err.message}); add it under the image's `vars:`"
        ) from None
    except jinja2.TemplateSyntaxError as err:
        raise BadInput(
            f"{err.filename or tpl_file}:{err.lineno}: template syntax error: {err.message}"
        ) from None
    except SecurityError as err:
        raise BadInput(
            f"{tpl_file}: the template reaches outside its variables ({err}); templates may only use the "
            "values matrix.yaml gives them"
        ) from None
    if len(body) > MAX_RENDERED_CHARS:
        raise BadInput(
            f"{tpl_file}: renders a Dockerfile of {len(body):,} characters (more than {MAX_RENDERED_CHARS:,}); fix it"
        )
    header = (
        f"# Rendered by toolkit from {TEMPLATE_DIR}/{spec.template} for image {spec.name!r}.\n"
        f"# Do not edit: change the template or matrix.yaml and run `toolkit render`.\n"
        f"# inputs-sha256: {digest}\n"
    )
    out = lm.root / IMAGES_DIR / spec.name / "Dockerfile"
    return Rendered(spec.name, spec.template, out, header + body, digest)


def write_rendered(r: Rendered) -> bool:
    """Write the Dockerfile if its bytes changed; returns True when the file was (re)written."""
    if r.path.is_file() and r.path.read_text() == r.content:
        return False
    r.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = r.path.with_suffix(".tmp")
    tmp.write_text(r.content)
    tmp.replace(r.path)
    return True
