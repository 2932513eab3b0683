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
import functools
import inspect
import itertools
import re
import resource
import signal
import string
import threading
import time
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, ValuesView
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.environment import TemplateModule
from jinja2.exceptions import SecurityError
from jinja2.filters import make_attrgetter
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import Namespace

from toolkit.core.errors import BadInput
from toolkit.images.template_inputs import inputs_hash, is_template_file, joined, render_context
from toolkit.matrix.api import TEMPLATE_DIR, ImageSpec, LoadedMatrix, template_path

IMAGES_DIR = "images"
RENDER_TIMEOUT_S = 10.0
"""A template renders in milliseconds; one still rendering after this loops without end (a nested
loop of 10^10 iterations hung `render`): refused as bad input naming the template."""
MAX_RENDERED_CHARS = 1 << 20
"""The longest string a template may build (`*`, `+`, `~`, `%`, str.format, join, replace, padding,
the filters of _FILTER_SIZES), and the longest Dockerfile it may render (one is some kilobytes;
`"x" * 10**10` ended in a MemoryError traceback, `ns.s ~ ns.s` 30 times took 1.5 GB)."""
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


class _Loader(jinja2.FileSystemLoader):
    """Templates are regular files inside Dockerfile.templates/: a symbolic link (to /etc/shadow, say)
    or anything that resolves outside the folder is refused (BadInput), never read
    (template_inputs.is_template_file)."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        root = Path(self.searchpath[0])
        if not is_template_file(root, root / template):
            raise jinja2.TemplateNotFound(template)
        return super().get_source(environment, template)


def _text_size(value: Any) -> int:
    """About len(str(value)) in characters, never less when it matters: exact for a str, an upper
    bound for numbers, lists, tuples, sets, dicts, their views and namespaces (items counted as their
    repr, with separators), an imported template's text, 64 for any other object. Counting stops once past MAX_RENDERED_CHARS (every item
    counts at least 1), so it costs O(MAX_RENDERED_CHARS) at worst, even for a list that holds itself."""
    if isinstance(value, str):
        return len(value)
    total, stack = 0, [value]
    while stack and total <= MAX_RENDERED_CHARS:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, (bool, float)) or v is None:
            total += 24
        elif isinstance(v, int):
            total += v.bit_length() // 3 + 2
        elif isinstance(v, (list, tuple, set, frozenset, dict, KeysView, ValuesView, ItemsView)):
            items = [*v, *v.values()] if isinstance(v, dict) else v
            total += 2 + 2 * len(items)
            stack.extend(itertools.islice(items, MAX_RENDERED_CHARS - total + 1))
        elif isinstance(v, Namespace):  # repr shows its attributes: <Namespace {...}>
            total += 16
            stack.append(object.__getattribute__(v, "_Namespace__attrs"))  # vars() raises: no __dict__
        elif isinstance(v, TemplateModule):  # `{% import %}`ed: prints the text its template rendered
            total += sum(map(len, v._body_stream))
        else:
            total += 64
    return total


def _printf_size(fmt: str, values: Any) -> int:
    """An upper bound on len(fmt % values) (printf-style: `%-08.3f`, `%(key)s`, `%*d`): the format,
    every width and precision written in it, the `*` ones (any int value), and the size of the values
    (each spec's value for a mapping; 320 a spec when a float is given: `%f` of 1e308 has 309 digits).
    One pass over `fmt`, as Python's own parser (Objects/unicodeobject.c, PyUnicode_Format)."""
    args = (
        list(values.values())
        if isinstance(values, dict)
        else list(values)
        if isinstance(values, tuple)
        else [values]
    )
    n, i, widths, specs, star = len(fmt), 0, 0, 0, False
    while (i := fmt.find("%", i)) != -1:
        i, specs = i + 1, specs + 1
        if fmt.startswith("(", i):  # a mapping key, with nested parentheses as Python reads them
            depth, i = 1, i + 1
            while i < n and depth:
                depth += (fmt[i] == "(") - (fmt[i] == ")")
                i += 1
        while i < n and fmt[i] in "-#0 +":
            i += 1
        for part in ("width", "precision"):
            j = i
            while j < n and fmt[j] in "0123456789":
                j += 1
            if j - i > 12:
                return MAX_RENDERED_CHARS + 1
            widths += int(fmt[i:j] or 0)
            star = star or fmt.startswith("*", j)
            i = j + fmt.startswith("*", j)
            if part == "precision" or not fmt.startswith(".", i):
                break
            i += 1
        i += 1  # the conversion character (or the second % of %%)
    sizes = [_text_size(a) for a in args]
    each = max(sizes, default=0) * specs if isinstance(values, dict) else sum(sizes)
    floats = 320 * specs if any(isinstance(a, float) for a in args) else 0
    stars = sum(abs(a) for a in args if isinstance(a, int)) if star else 0
    return n + widths + each + floats + stars


def _format_size(fmt: str, args: tuple, kwargs: dict) -> int:
    """An upper bound on len(fmt.format(*args, **kwargs)): its literal text, every width written in
    a field, the int values when a width is itself a field (`{:{w}}`), and per field the largest value."""
    values = [*args, *kwargs.values()]
    if len(values) == 1 and isinstance(values[0], dict) and not kwargs:  # format_map(mapping)
        values = [*values, *values[0].values()]
    largest = max((_text_size(v) for v in values), default=0)
    total = 0
    for literal, field, spec, _conv in string.Formatter().parse(fmt):
        total += len(literal)
        if field is None:
            continue
        total += largest + sum(int(d) for d in re.findall(r"[0-9]{1,12}", spec or "")) + 320
        if "{" in (spec or ""):
            total += sum(abs(v) for v in values if isinstance(v, int))
    return total


def _bounded(what: str, size: int) -> None:
    """SecurityError when `what` would build a string or list of `size` > MAX_RENDERED_CHARS characters or items."""
    if size > MAX_RENDERED_CHARS:
        raise SecurityError(
            f"{what} builds a string or list of more than {MAX_RENDERED_CHARS:,} characters or items"
        )


def _replace_size(s: Any, old: Any, new: Any, count: Any) -> int:
    """An upper bound on len(str(s).replace(old, new, count))."""
    size = _text_size(s)
    _bounded("replace", size)
    text, old, new = str(s), str(old), str(new)
    hits = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return size + hits * max(0, len(new) - len(old))


def _indent_size(s: Any, width: Any) -> int:
    """An upper bound on the length of `s|indent(width)`: `width` (spaces, or a string) per line."""
    size = _text_size(s)
    _bounded("indent", size)
    return size + (str(s).count("\n") + 1) * (width if isinstance(width, int) else len(str(width)))


def _wordwrap_size(a: dict) -> int:
    """An upper bound on the length of `s|wordwrap(width, ..., wrapstring)`: greedy wrapping leaves
    two consecutive lines of one paragraph longer than `width` together, so a paragraph of n characters
    wraps to at most 2n/width + 1 lines; a wrapstring goes between lines."""
    size = _text_size(a["s"])
    _bounded("wordwrap", size)
    lines = len(str(a["s"]).splitlines()) + 2 * size // max(1, int(a["width"])) + 1
    wrap = a["wrapstring"]
    return size + lines * (1 if wrap is None else len(str(wrap)))


def _join_size(a: dict) -> int:
    """An upper bound on the length of `value|join(d, attribute)`; makes `value` a list (it may be a
    generator, read once) of the attribute's values, so the filter joins what was counted."""
    items = list(a["value"])
    if a["attribute"] is not None:
        items = list(map(make_attrgetter(a["eval_ctx"].environment, a["attribute"]), items))
        a["attribute"] = None
    a["value"] = items
    return sum(_text_size(v) for v in items) + max(0, len(items) - 1) * _text_size(a["d"])


def _value_size(a: dict) -> int:
    """The text size of a filter's value: its first argument after a passed eval context, context or
    environment (`|string` of `["x" * 900000] * 2000` is 1.8 GB of text from a list of 2,000 references)."""
    return _text_size(next(v for k, v in a.items() if k not in ("eval_ctx", "context", "environment")))


_STRINGIFYING = "string safe e escape forceescape tojson pprint upper lower title capitalize trim striptags"
_FILTER_SIZES: dict[str, Callable[[dict], int]] = {
    "format": lambda a: _printf_size(str(a["value"]), a["kwargs"] or a["args"]),
    "center": lambda a: _text_size(a["value"]) + max(0, a["width"] if isinstance(a["width"], int) else 0),
    "indent": lambda a: _indent_size(a["s"], a["width"]),
    "truncate": lambda a: _text_size(a["s"]) + _text_size(a["end"]),
    "wordwrap": _wordwrap_size,
    "replace": lambda a: _replace_size(a["s"], a["old"], a["new"], a["count"]),
    "join": _join_size,
    **dict.fromkeys((*_STRINGIFYING.split(), "wordcount", "urlize", "urlencode", "xmlattr"), _value_size),
}
"""Filters that may build a string much larger than their input, and an upper bound on its length
from their arguments (bound by name, defaults applied), checked before the filter runs; the filters
that make text of their value (a container's repr: _value_size) among them."""


class _TooLong(Exception):
    """The rendered text (or a macro's, a filter block's, a `{% set %}` block's) would pass
    MAX_RENDERED_CHARS: raised before it is joined."""


class _Buffer(list):
    """The text a macro, a call, filter or `{% set %}` block prints, as jinja collects it before joining
    it (`t_1 = []; t_1.append(...)`, _CodeGenerator.buffer): refused (_TooLong) once it passes
    MAX_RENDERED_CHARS, so 2,000 printed copies of a 900 kB string are never held at once."""

    size = 0

    def append(self, piece: Any) -> None:
        if isinstance(piece, str) and piece:
            self.size += len(piece)
            if self.size > MAX_RENDERED_CHARS:
                raise _TooLong
            super().append(piece)

    def extend(self, pieces: Iterable[Any]) -> None:
        for piece in pieces:
            self.append(piece)


def _bounded_join(pieces: Iterable[str]) -> str:
    """The pieces joined, refused (_TooLong) once they pass MAX_RENDERED_CHARS: only what fits is ever
    held (a loop printing a 900 kB string 2,000 times stops at the second)."""
    kept, total = [], 0
    for piece in pieces:
        total += len(piece)
        if total > MAX_RENDERED_CHARS:
            raise _TooLong
        if piece:  # never a list of a billion empty pieces
            kept.append(piece)
    return "".join(kept)


def _printed(value: Any) -> Any:
    """What `{{ value }}` prints, unchanged (jinja's finalize), refused (_TooLong) before str() when it
    is a container whose text would pass MAX_RENDERED_CHARS (`{{ ["x" * 900000] * 2000 }}`)."""
    if not isinstance(value, str) and _text_size(value) > MAX_RENDERED_CHARS:
        raise _TooLong
    return value


def _bounded_filter(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`original` (a jinja2 filter) refused with SecurityError when _FILTER_SIZES[name] says its result
    would pass MAX_RENDERED_CHARS; otherwise called exactly as before (same result)."""
    sig = inspect.signature(original)

    @functools.wraps(original)  # keeps jinja's pass_environment / pass_eval_context mark
    def bounded(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        _bounded(f"|{name}", _FILTER_SIZES[name](bound.arguments))
        return original(*bound.args, **bound.kwargs)

    return bounded


class _CodeGenerator(CodeGenerator):
    """Compiles `a ~ b` to _Sandbox.bounded_concat (jinja2 joins the parts itself: no sandbox hook), and
    a buffered frame's output (macros, call, filter and set blocks) into a _Buffer."""

    def buffer(self, frame: Frame) -> None:
        frame.buffer = self.temporary_identifier()
        self.writeline(f"{frame.buffer} = environment.output_buffer()")

    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile:
            join = "(markup_join if context.eval_ctx.volatile else str_join)"
        else:
            join = "markup_join" if frame.eval_ctx.autoescape else "str_join"
        self.write(f"environment.bounded_concat({join}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Sandbox(SandboxedEnvironment):
    """Jinja's sandbox (no Python reached from a template) that also bounds what can build a large
    value from a small one: `*`, `+`, `~`, `%`, `**`, str.format, the str methods that pad, join or
    replace, list.extend and the filters of _FILTER_SIZES. A string or list of more than
    MAX_RENDERED_CHARS, or an integer of more than MAX_INT_BITS, is a SecurityError, raised before it
    is built; text printed or joined past it (`{{ value }}`: _printed, the output: _bounded_join) is
    _TooLong, raised before str() or the join builds it. (range() is bounded by the sandbox itself: jinja2.sandbox.MAX_RANGE.)"""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _CodeGenerator
    concat = staticmethod(_bounded_join)  # the rendered text, a macro's, a filter or set block's
    output_buffer = _Buffer

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=_printed, **options)
        for name in _FILTER_SIZES:
            self.filters[name] = _bounded_filter(name, self.filters[name])

    def bounded_concat(self, join: Callable[[tuple], str], parts: tuple) -> str:
        """`a ~ b ~ ...`: `join(parts)` when the result stays within MAX_RENDERED_CHARS."""
        _bounded("~", sum(_text_size(p) for p in parts))
        return join(parts)

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
        if operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            _bounded("+", len(left) + len(right))
        if operator == "%" and isinstance(left, str):
            _bounded("%", _printf_size(left, right))
        if operator == "**" and isinstance(left, int) and isinstance(right, int):
            # at least (bit_length - 1) * exponent + 1 bits: refused only when surely too large
            if right > 0 and abs(left) > 1 and (abs(left).bit_length() - 1) * right + 1 > MAX_INT_BITS:
                raise SecurityError(f"{left} ** {right} is a number of more than {MAX_INT_BITS:,} bits")
        return super().call_binop(context, operator, left, right)

    def call(self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """str methods that pad (`"x".ljust(10**8)`, center, rjust, zfill, expandtabs), join or
        replace, and list.extend, bounded like `*`."""
        name = getattr(__obj, "__name__", "")
        owner = getattr(__obj, "__self__", None)
        pads = ("ljust", "rjust", "center", "zfill", "expandtabs")
        if isinstance(owner, str) and name in pads:
            if any(isinstance(a, int) and a > MAX_RENDERED_CHARS for a in args):
                raise SecurityError(f"str.{name} to more than {MAX_RENDERED_CHARS} characters")
        if isinstance(owner, str) and name == "join" and len(args) == 1:
            args = (list(args[0]),)
            _bounded("str.join", sum(_text_size(v) for v in args[0]) + len(args[0]) * len(owner))
        if isinstance(owner, str) and name == "replace" and len(args) >= 2:
            _bounded("str.replace", _replace_size(owner, args[0], args[1], args[2] if len(args) > 2 else -1))
        if isinstance(owner, list) and name == "extend" and len(args) == 1:
            args = (list(args[0]),)
            _bounded("list.extend", len(owner) + len(args[0]))
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """`"{:>99999999}".format(x)` (and format_map) bounded like `%`."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt: str = value.__self__

        def bounded(*args: Any, **kwargs: Any) -> str:
            _bounded("str.format", _format_size(fmt, args, kwargs))
            return wrapped(*args, **kwargs)

        return bounded


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


class _RenderTooBig(Exception):
    pass


RENDER_MEMORY_BYTES = 256 << 20
"""The most a render may grow the process's resident memory: a template renders in a few MiB; one that
keeps what its loop builds (`x.append(s ~ j)` of a 1 MB string, `ns.x = ns.x + [s ~ j]`: every value
within MAX_RENDERED_CHARS) took 7.6 GB in RENDER_TIMEOUT_S."""


def _rss_bytes() -> int:
    """The process's resident memory now, bytes (/proc/self/statm's resident pages); where there is no
    /proc, its peak so far (ru_maxrss, KiB on Linux: a high-water mark, which a process started by a
    large one may inherit through fork, so the check is only more lenient there)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextlib.contextmanager
def _deadline(seconds: float, memory: int = RENDER_MEMORY_BYTES) -> Iterator[None]:
    """Raise _RenderTimeout in the block after `seconds`, _RenderTooBig once the process's resident memory
    has grown by more than `memory` bytes (SIGALRM every 20 ms: Python checks it between bytecodes, so a
    template's loop is interrupted; no single step of a template builds more than MAX_RENDERED_CHARS).
    Only on the main thread, where signals are delivered."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    end = time.monotonic() + seconds
    limit = _rss_bytes() + memory

    def fire(_signum: int, _frame: Any) -> None:
        if _rss_bytes() > limit:
            raise _RenderTooBig
        if time.monotonic() >= end:
            raise _RenderTimeout

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def reached_templates(tpl_dir: Path, name: str) -> list[tuple[str, str]]:
    """(name, text) of template `name` in `tpl_dir` and of every partial it reaches (imports and
    includes, recursively, each once, in first-reached order): what template_inputs.joined hashes.

    Raises BadInput when a referenced partial does not exist or a template does not parse.
    """
    env = _environment(tpl_dir)
    files: list[tuple[str, str]] = []
    loader = env.loader
    assert loader is not None  # _environment() always gives one (a FileSystemLoader)

    def visit(n: str) -> None:
        if any(seen == n for seen, _ in files):
            return
        try:
            source, filename, _ = loader.get_source(env, n)
        except jinja2.TemplateNotFound:
            raise BadInput(
                f"template {files[0][0] if files else n}: it imports or includes {n!r}, which does not "
                "exist in Dockerfile.templates/"
            ) from None
        files.append((n, source))
        try:
            refs = jinja2.meta.find_referenced_templates(env.parse(source))
        except jinja2.TemplateSyntaxError as err:
            raise BadInput(f"{filename}:{err.lineno}: template syntax error: {err.message}") from None
        for ref in refs:
            if ref is None:
                raise BadInput(f"{filename}: imports/includes must name a fixed file (no variables)")
            visit(ref)

    visit(name)
    return files


def render_image(lm: LoadedMatrix, spec: ImageSpec) -> Rendered:
    """Render one image's template. Raises BadInput for a missing template or undefined variable."""
    tpl_file = template_path(lm, spec.template)
    if not tpl_file.is_file():
        raise BadInput(f"{lm.path}: image {spec.name!r}: template {tpl_file} does not exist")
    ctx = render_context(lm, spec)
    digest = inputs_hash(joined(reached_templates(tpl_file.parent, spec.template)), spec, ctx)
    env = _environment(tpl_file.parent)
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
    except _RenderTooBig:
        raise BadInput(
            f"{tpl_file}: rendering took more than {RENDER_MEMORY_BYTES >> 20} MiB of memory (a loop that "
            "keeps what it builds?); a template renders in a few MiB: fix its loops"
        ) from None
    except _TooLong:
        raise BadInput(
            f"{tpl_file}: renders a Dockerfile of more than {MAX_RENDERED_CHARS:,} characters (counted before "
            "it is built; a macro's or block's text counts the same); fix it"
        ) from None
    except RecursionError:
        raise BadInput(
            f"{tpl_file}: the template calls itself without end (a macro that calls itself, or an "
            "include of itself); fix it"
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
