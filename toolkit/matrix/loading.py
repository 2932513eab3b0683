"""Loading matrix.yaml: the YAML guards (size, alias expansion, duplicate and complex keys, NUL
bytes, scalars that are not what they look like), validation against the schema with errors that
name the file, the key path and the fix, and the loaded matrix with its folder."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ValidationError,
)

from toolkit.core import invocation
from toolkit.core import registry as runner_registry
from toolkit.core.errors import BadInput
from toolkit.core.paths import contained
from toolkit.matrix.schema import SCHEMA_VERSION, BenchAxes, ImageSpec, Matrix, ModelSpec, nearest
from toolkit.matrix.template_vars import excerpt


class LoadedMatrix:
    """A validated Matrix plus where it came from: `root` resolves relative paths.

    `confined`: the matrix is someone else's (a published run folder's): every path it names (models,
    local sources) must stay inside its folder, symlinks resolved (toolkit.core.paths.contained), where
    the user's own matrix may name any path (absolute, `~`, another disk)."""

    def __init__(self, matrix: Matrix, path: Path, *, confined: bool = False):
        self.m = matrix
        self.path = path
        self.root = path.parent
        self.confined = confined

    def __getattr__(self, item: str) -> Any:
        return getattr(self.m, item)

    def resolve(self, rel: str, *, what: str = "a path") -> Path:
        """`rel` relative to the matrix's folder (absolute and `~` as given); for a confined matrix,
        BadInput naming the file and `what` (e.g. `models[tiny].path`) when it leaves the folder."""
        if self.confined:
            return contained(
                self.root,
                rel,
                what=f"{self.path}: {what}",
                fix=f"this matrix is in a published run folder (run.json beside it), so it may name only "
                f"files inside {self.root}: put the file there, or use your own matrix",
            )
        p = Path(rel).expanduser()
        return p if p.is_absolute() else (self.root / p)

    def model_paths(self) -> dict[Path, str]:
        """Every model path the matrix names (models[].path, resolved as `resolve` does) -> where it is
        named (`matrix.yaml: models[NAME].path`), for a stand-in's typo check (models.tiny.namesake_refusal):
        another model of the matrix is no typo, and a refusal names the file and key to fix. A path a
        confined matrix may not name is left out (its own model's check refuses it)."""
        paths: dict[Path, str] = {}
        for model in self.m.models:
            key = f"models[{model.name}].path"
            try:
                paths.setdefault(self.resolve(model.path, what=key), f"{self.path}: {key}")
            except BadInput:
                continue
        return paths

    def select_images(self, names: tuple[str, ...] | list[str]) -> list[ImageSpec]:
        """The images named (every one when none is): BadInput for a name the matrix has not, saying the
        way out (_other_kind: a list in one -i, a model's name given to -i), else the nearest name."""
        if not names:
            return list(self.m.images)
        images = [i.name for i in self.m.images]
        if bad := [n for n in names if n not in images]:
            hint = self._other_kind(bad[0], "-i", images, "-m", self.m.models) or nearest(bad[0], images)
            raise self._unknown("image", bad, hint, images)
        return [self.m.image(n) for n in names]

    def _unknown(self, kind: str, bad: list[str], hint: str, names: list[str]) -> BadInput:
        """The refusal of -i/-m names (`bad`) this matrix has no `kind` of, one wording for both (nc51 S7):
        each name quoted, the matrix file as the user gave it (invocation.matrix_file, where it is this one),
        the way out (`hint`), the names there are."""
        given = invocation.matrix_file()
        shown = given if given.resolve() == self.path.resolve() else self.path
        listed = ", ".join(map(repr, bad))
        return BadInput(f"no {kind} named {listed} in {shown}{hint} ({kind}s: {', '.join(names)})")

    @staticmethod
    def _other_kind(typed: str, flag: str, names: list[str], other_flag: str, others: list[Any]) -> str:
        """For `FLAG TYPED` naming nothing of `names`: `: one name per -i, the flag repeated: ...` when
        TYPED is a comma- or space-separated list (the flag takes no list; its first unknown part and the
        nearest name to it said too), `: 'x' is a model's name: give it as `-m x`` when TYPED names one of
        `others` (the other flag's kind); else ''."""
        parts = [p for p in re.split(r"[,\s]+", typed) if p]
        if len(parts) > 1:
            wrong = next((p for p in parts if p not in names), None)
            near = f" ({wrong!r}{nearest(wrong, names) or ': no such name'})" if wrong else ""
            return (
                f": one name per {flag}, the flag repeated: `{' '.join(f'{flag} {p}' for p in parts)}`{near}"
            )
        if typed in (o.name for o in others):
            kind = "a model" if other_flag == "-m" else "an image"
            return f": {typed!r} is {kind}'s name: give it as `{other_flag} {typed}`"
        return ""

    def _model_hint(self, typed: str) -> str:
        """For `-m TYPED` naming no model: a list in one -m or an image's name (_other_kind), the model
        whose `path` is the file TYPED names, else (TYPED a file path, e.g. a GGUF of one's own) that -m
        takes a name and where a file gets one, else the nearest name."""
        names = [m.name for m in self.m.models]
        if hint := self._other_kind(typed, "-m", names, "-i", self.m.images):
            return hint
        if "/" in typed or typed.lower().endswith((".gguf", ".safetensors")):
            given = Path(typed).expanduser().resolve()
            same = [
                m.name for m in self.m.models if (self.root / Path(m.path).expanduser()).resolve() == given
            ]
            if same:
                return f": that file is the path of model {same[0]!r}: give its name, `-m {same[0]}`"
            return (
                ": -m takes a model's name, not a file: to measure a file of your own, add it under "
                f"`models:` in {self.path.name} (name, path, format: gguf) and give that name"
            )
        return nearest(typed, names)

    def select_models(self, names: tuple[str, ...] | list[str]) -> list[ModelSpec]:
        if not names:
            return list(self.m.models)
        by = {m.name: m for m in self.m.models}
        bad = [n for n in names if n not in by]
        if bad:
            raise self._unknown("model", bad, self._model_hint(bad[0]), list(by))
        return [by[n] for n in names]


def _loc(loc: tuple[Any, ...], data: Any = None) -> str:
    """`images[0].template (image 'cpu')`: the key path of a problem, and the list item it lies in named
    by its `name` where the document (`data`) gives it one (a newcomer reads the image, not its position)."""
    out, named = "", ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            data = data[part] if isinstance(data, list) and 0 <= part < len(data) else None
            name = data.get("name") if isinstance(data, dict) else None
            if not named and isinstance(name, str) and name and isinstance(loc[0], str):
                named = f" ({_ITEM.get(loc[0], 'item')} {excerpt(name)})"
        elif not (str(part).startswith("function-") or part in ("list[int]",)):
            out += ("." if out else "") + str(part)
            data = data.get(part) if isinstance(data, dict) and isinstance(part, str) else data
    return (out + named) if out else "(top level)"


def _said_once(loc: str, msg: str) -> str:
    """`loc` without its `(image 'x')` where the message names the item itself, as `image 'x'` (a
    validator's own words): a message that merely holds `'x'` (the value it got, its fix's examples:
    an image named `on` or `7.2`) keeps the name."""
    head, sep, named = loc.rpartition(" (")
    return head if sep and named.endswith(")") and named[:-1] in msg else loc


_ITEM = {"images": "image", "models": "model"}


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names valid at `loc` (for "did you mean")."""
    cur: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = getattr(cur, "model_fields", {})
        if part in fields:
            ann = fields[part].annotation
            cur = _inner_model(ann)
        elif cur is not None and getattr(cur, "model_fields", None) is None:
            cur = None
        elif isinstance(part, str) and cur is Matrix and part not in fields:
            cur = None
        else:
            # dict[str, SourceSpec] keys
            pass
    keys = list(getattr(cur, "model_fields", {}).keys()) if cur else []
    if cur is Matrix:  # the runners' settings blocks are keys of the file, runner_settings is not
        keys = [k for k in keys if k != "runner_settings"] + list(runner_registry.SETTINGS)
    return keys


def _inner_model(ann: Any) -> Any:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in get_args(ann):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


_TYPE_FIX = {
    "string_type": "write text; quote it where YAML would read a number, date or true/false ('7.2', "
    "'2026-02-28', 'on')",
    "int_type": "write a whole number, without quotes",
    "float_type": "write a number, without quotes",
    "bool_type": "write true or false",
    "list_type": "write a list: [a, b] or one `- item` line per item",
    "dict_type": "write a mapping: one `key: value` line per key",
    "model_type": "write a mapping: one `key: value` line per key",
}


def _type_fix(kind: str, value: Any) -> str:
    """`; <what to write>` for a value of the wrong type (strict mode names the type, not the fix)."""
    fix = _TYPE_FIX.get(kind, "")
    if isinstance(value, datetime.date) and kind == "string_type":
        fix = "YAML read an unquoted date: quote it ('2026-02-28')"
    elif isinstance(value, set | frozenset | tuple) and kind == "list_type":
        fix = "write a plain list [a, b] (not a !!set or other tagged collection)"
    return f"; {fix}" if fix else ""


def format_validation_error(err: ValidationError, path: Path, data: Any = None, node: Any = None) -> str:
    """One line per problem: `FILE: line N, column M: KEY.PATH: what is wrong -> fix` (the first 20
    problems); `data`: the document validated, to name list items by their `name`; `node`: its YAML
    node (read_yaml's), for the line of the key path (_at; none without it)."""
    import difflib  # only for error messages

    lines = []
    errs = err.errors()
    for e in errs[:20]:
        loc = _loc(e["loc"], data)
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            key = str(e["loc"][-1])
            allowed = _allowed_keys(Matrix, e["loc"])
            guess = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {guess[0]!r}?" if guess else ""
            allowed_s = f" (allowed: {', '.join(allowed)})" if allowed else ""
            msg = f"unknown key {key!r}{hint}{allowed_s}"
        elif e["type"] == "missing":
            msg = "required key is missing: add it"
        elif e["type"] == "literal_error" or e["type"].endswith("_type") or e["type"].endswith("_parsing"):
            msg = f"{msg[:200]} (got {excerpt(e.get('input'))}){_type_fix(e['type'], e.get('input'))}"
        loc = _said_once(loc, msg)
        # a whole-file rule names its own key path (`vllm.max_model_len: ...`): no `(top level)` before it,
        # and its line is that path's (none where it names none: `duplicate image name(s)`)
        at = _at(node, e["loc"] or _named_path(msg), key="unknown key" in msg)  # the key, not its value
        lines.append(
            f"{path}{at}: " + ("" if not e["loc"] and e["type"] == "value_error" else f"{loc}: ") + msg
        )
    if len(errs) > 20:
        lines.append(f"... and {len(errs) - 20} more problems")
    return "invalid matrix:\n  " + "\n  ".join(lines)


def _named_path(msg: str) -> tuple[Any, ...]:
    """The key path a whole-file rule's message starts with (`images[0].source (image 'cpu'): ...` ->
    ('images', 0, 'source'); `vllm: ...` -> ('vllm',)); () where it names none."""
    named = re.match(r"\w+(\[\d+\]|\.[\w-]+)*(?=: | \()", msg)
    return tuple(int(p) if p.isdigit() else p for p in re.findall(r"[\w-]+", named[0])) if named else ()


def _at(node: Any, loc: tuple[Any, ...], key: bool = False) -> str:
    """`: line N, column M` of the YAML node `loc` names (its deepest part `node`, the document's root,
    holds: a mapping's key, a list's index; merged keys included; `key`: the last part's key, not its
    value: an unknown key), '' without a node or a path."""
    at = node if loc else None
    for i, part in enumerate(loc, 1):
        if isinstance(at, yaml.MappingNode):
            at = next(
                (k if key and i == len(loc) else v for k, v in reversed(at.value) if k.value == part), at
            )
        elif isinstance(at, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(at.value):
            at = at.value[part]
    mark = getattr(at, "start_mark", None)
    return f": line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def parse_matrix(
    data: Any, path: Path, *, confined: bool = False, node: Any = None, given: Path | None = None
) -> LoadedMatrix:
    """Validate already-parsed YAML data of the matrix at `path` (`node`: its YAML node, read_yaml's, for
    the lines the refusals name). Raises BadInput naming the file (`given`: as the user gave it, default
    `path`), line, key path and fix."""
    shown = given or path
    if not isinstance(data, dict):
        raise BadInput(f"{shown}: the top level must be a mapping with schema_version, images, models, bench")
    if "schema_version" not in data:
        raise BadInput(
            f"{shown}: schema_version: required key is missing: add `schema_version: {SCHEMA_VERSION}`"
        )
    if type(data.get("schema_version")) is not int or data.get("schema_version") != SCHEMA_VERSION:
        raise BadInput(
            f"{shown}{_at(node, ('schema_version',))}: schema_version: {data.get('schema_version')!r} is not "
            "supported; this toolkit reads "
            f"schema_version {SCHEMA_VERSION}"
        )
    _refuse_nul_bytes(data, shown)
    try:
        m = Matrix.model_validate(data)
    except ValidationError as err:
        raise BadInput(format_validation_error(err, shown, data, node)) from None
    loaded = LoadedMatrix(m, path, confined=confined)
    _check_files(loaded, node, shown)
    return loaded


def _refuse_nul_bytes(data: Any, path: Path) -> None:
    """BadInput naming the key of a string (key or value) that holds a NUL byte (a YAML escape "\\0",
    "\\x00" or "\\u0000" in double quotes): every path, file name and command argument of the matrix
    reaches the OS, which cannot take one. A list item with a plain `name` is named by it
    (`models[tiny].path`), else by its index. Iterative: nesting depth cannot exhaust the stack."""

    def refuse(where: str, what: str) -> BadInput:
        return BadInput(
            f"{path}: {where or '(top level)'}: {what} contains a NUL byte (\\0); remove it: no path, "
            "file name or command argument can hold one"
        )

    seen: set[int] = set()  # an aliased node is checked once
    todo: list[tuple[str, Any]] = [("", data)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, str):
            if "\0" in value:
                raise refuse(where, "the value")
            continue
        if not isinstance(value, dict | list) or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\0" in key:
                    raise refuse(where, f"the key {key.replace(chr(0), '?')[:60]!r}")
                todo.append((f"{where}.{key}" if where else str(key), item))
        else:
            for i, item in enumerate(value):
                label = item.get("name") if isinstance(item, dict) else None
                plain = isinstance(label, str) and 0 < len(label) <= 64 and label.isprintable()
                todo.append((f"{where}[{label if plain else i}]", item))


def _check_files(lm: LoadedMatrix, node: Any = None, shown: Path | None = None) -> None:
    for i, img in enumerate(lm.m.images):
        tpl = template_path(lm, img.template)
        if not tpl.is_file():
            import difflib  # only for the message

            have = sorted(p.name for p in tpl.parent.glob("*.j2")) if tpl.parent.is_dir() else []
            guess = difflib.get_close_matches(img.template, have, n=1)
            hint = f"; did you mean {guess[0]!r}?" if guess else ""
            where = f"(available: {', '.join(have) or 'none'})"
            if not tpl.parent.is_dir():  # a matrix copied out of the checkout: its templates stayed there
                home = Path(__file__).resolve().parents[2]
                project = f" ({home})" if (home / TEMPLATE_DIR).is_dir() else ""
                where = (
                    f"(no such folder: a matrix reads its templates from {TEMPLATE_DIR}/ beside it, and "
                    f"writes images/ and results/ there: keep your matrix in the project folder{project}, "
                    f"or copy {TEMPLATE_DIR}/ beside it)"
                )
            raise BadInput(
                f"{shown or lm.path}{_at(node, ('images', i, 'template'))}: images[{i}].template "
                f"({_ITEM['images']} {excerpt(img.name)}): "
                f"{excerpt(img.template)} is not a file in {tpl.parent}{hint} {where}"
            )


TEMPLATE_DIR = "Dockerfile.templates"


def template_path(lm: LoadedMatrix, template: str) -> Path:
    """Templates live in Dockerfile.templates/ beside the matrix."""
    return lm.root / TEMPLATE_DIR / template


class _ScalarError(yaml.constructor.ConstructorError):
    """A scalar PyYAML's constructor could not build (its problem says what to write instead)."""


_PLAIN_NUMBER = {
    "tag:yaml.org,2002:int": re.compile(r"0|-?[1-9][0-9]*"),  # as Python writes it: no +5, -0, 010
    "tag:yaml.org,2002:float": re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?"),
}
"""Numbers as written in decimal: what a scalar PyYAML resolves to int or float must look like this
(an int in a text field, `env: {X: [+5]}`, is set as Python writes it: X=5)."""


class _WrittenFloat(float):
    """A float YAML read from text Python writes otherwise (1.10 -> 1.1, 1e3 -> 1000.0): its repr is
    the text written, so a message that refuses it (a float where text goes) quotes what the file says;
    pydantic's float fields take it as a plain float."""

    text = ""

    def __repr__(self) -> str:
        return self.text


def _bool_words(key: str | None) -> str:
    """What to write for a YAML 1.1 boolean given under `key`: the values of an axis that takes a few
    integers (flash_attn: "1, 0 or -1"), else "true or false"."""
    field = BenchAxes.model_fields.get(key or "")
    ann = field.annotation if field else None
    while get_args(ann) and get_origin(ann) is not Literal:  # list[Literal[-1, 0, 1]] -> Literal[...]
        ann = get_args(ann)[0]
    values = sorted(get_args(ann), reverse=True) if get_origin(ann) is Literal else []
    if not values or not all(type(v) is int for v in values):
        return "true or false"
    return ", ".join(map(str, values[:-1])) + f" or {values[-1]}"


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (YAML would keep the last silently).
    Pure Python on purpose: libyaml's CSafeLoader (~25 ms faster on this matrix) composes nodes by C
    recursion, and a 200 KB file of nested brackets crashes the process (SIGSEGV) where this one
    raises RecursionError, which load_matrix turns into bad input. `key_of`: the mapping key each value
    node (or item of a list value) is given under, by id, for the messages (`_bool_words`)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.key_of: dict[int, str] = {}
        self.checked: set[int] = set()  # the mappings whose written keys were checked (flatten_mapping)

    def construct_object(self, node, deep=False):
        """PyYAML's constructors raise plain ValueError / TypeError / OverflowError for a scalar they
        cannot build: an impossible unquoted date (`ref: 2026-02-30`), an integer of more than 4300
        digits, `!!int x`. Each becomes a ConstructorError at the node's line, which load_matrix
        reports as bad input naming the line (and the key the value is given under)."""
        key = self.key_of.get(id(node))
        under = f"{key}: " if key else ""
        if (
            isinstance(node, yaml.ScalarNode)
            and node.tag == "tag:yaml.org,2002:bool"
            and node.value.lower() not in ("true", "false")
        ):
            raise _ScalarError(
                None,
                None,
                f"{under}{node.value[:10]!r} is read by YAML 1.1 as a boolean ({node.value.lower() in ('yes', 'on', 'y')}); "
                f"write {_bool_words(key)}, or quote it if it is text: '{node.value[:10]}'",
                node.start_mark,
            )
        if isinstance(node, yaml.SequenceNode) and id(node) in self.key_of:  # `flash_attn: [on]`
            self.key_of.update(dict.fromkeys(map(id, node.value), self.key_of[id(node)]))
        try:
            value = super().construct_object(node, deep=deep)
        except (ValueError, TypeError, OverflowError) as err:
            value = node.value if isinstance(node, yaml.ScalarNode) else ""
            shown = value if len(value) <= 40 else f"{value[:20]}... ({len(value)} characters)"
            kind = node.tag.rsplit(":", 1)[-1]
            raise _ScalarError(
                None,
                None,
                f"{shown!r} cannot be read as a YAML {kind} ({str(err)[:80]}); quote it if it is text "
                "(e.g. ref: '2026-02-30'), else correct it",
                node.start_mark,
            ) from None
        if not isinstance(node, yaml.ScalarNode) or node.tag not in _PLAIN_NUMBER:
            return value
        if not _PLAIN_NUMBER[node.tag].fullmatch(node.value):
            raise _ScalarError(
                None,
                None,
                f"{under}{node.value[:40]!r} is a YAML 1.1 number form read as "
                f"{value!r}, another value than it shows (octal 010 = 8, hex 0x10 = 16, base 60 1:00 = 60, "
                f"1_000, +5 = 5, .nan); write the plain decimal number, or quote it if it is text: "
                f"'{node.value[:40]}'",
                node.start_mark,
            )
        if isinstance(value, float) and repr(value) != node.value:
            value = _WrittenFloat(value)
            value.text = node.value
        return value

    def flatten_mapping(self, node):
        """Check the keys written in mapping `node`, then merge the keys of `<<: *anchor` (YAML 1.1
        merge keys: SafeLoader's flatten_mapping; a key written here wins over a merged one). A
        complex key (`? [a, b]`, a mapping) or a key written twice in one mapping (`<<` too) is a
        ConstructorError at the key's line. Each mapping is checked once, before its merge: PyYAML
        flattens a merged mapping on its first use, and its merged keys are no keys written twice."""
        seen: set = set()
        for key_node, value_node in () if id(node) in self.checked else node.value:
            if not isinstance(key_node, yaml.ScalarNode):  # `? [a, b]`: a list or mapping cannot be hashed
                kind = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"a mapping key must be a plain value, not a {kind}; write `key: value`",
                    key_node.start_mark,
                )
            key = "<<" if key_node.tag == "tag:yaml.org,2002:merge" else self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in one mapping; keep one", key_node.start_mark
                )
            seen.add(key)
            self.key_of[id(value_node)] = key_node.value
        self.checked.add(id(node))
        super().flatten_mapping(node)


MAX_MATRIX_BYTES = 1 << 20
"""A matrix file is a few KB; anything above 1 MiB is refused before it is parsed."""


MAX_EXPANDED_NODES = 100_000
"""YAML aliases may repeat a node; the document expanded through them may hold at most this many
nodes (an alias bomb expands to billions and would exhaust memory in validation)."""


def _expanded_nodes(root: yaml.Node, limit: int) -> int:
    """Nodes of the composed document counted as if every alias were copied out (the graph is a DAG:
    memoised per node, so this is linear in the written nodes). Stops counting past `limit`."""
    memo: dict[int, int] = {}

    def count(node: yaml.Node) -> int:
        key = id(node)
        if key in memo:
            return memo[key]
        memo[key] = limit + 1  # a cycle (recursive alias) counts as unbounded
        if isinstance(node, yaml.MappingNode):
            n = 1 + sum(count(k) + count(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            n = 1 + sum(count(c) for c in node.value)
        else:
            n = 1
        memo[key] = min(n, limit + 1)
        return memo[key]

    return count(root)


PUBLISHED_MARKER = "run.json"
"""A matrix with this file beside it is in a published run folder (`toolkit export-run`): someone else's."""


def project_hint(option: str = "--matrix PATH") -> str:
    """How to reach the project from elsewhere: `cd` to the checkout this toolkit was installed from
    (`pip install -e .`, as setup-host.sh installs it) where its matrix.yaml is, else the project
    folder in general; or pass `option`."""
    home = Path(__file__).resolve().parents[2]
    if (home / "matrix.yaml").is_file() and Path.cwd().resolve() != home:
        return f"run from the project folder (`cd {home}`: this toolkit's checkout) or pass {option}"
    return f"run from the project folder or pass {option}"


def load_matrix(path: str | Path, *, confined: bool | None = None) -> LoadedMatrix:
    """Read and validate matrix.yaml. Raises BadInput (file missing or unreadable, larger than
    MAX_MATRIX_BYTES, bad YAML, aliases expanding past MAX_EXPANDED_NODES, schema errors). Messages
    never echo the (expanded) input beyond a short excerpt. `confined` (LoadedMatrix): None = when the
    matrix is in a published run folder (PUBLISHED_MARKER beside it)."""
    p = Path(path)
    try:
        found = p.is_file()
        if found and confined is None:
            confined = (p.parent / PUBLISHED_MARKER).is_file()
    except OSError as err:  # a name too long, permission denied on a folder above it
        raise _unreadable(p, err) from None
    if not found:
        here = Path("matrix.yaml")
        hint = (  # a --matrix that names a missing file, beside this folder's own matrix
            "this folder's matrix is matrix.yaml: leave --matrix out or check the path given"
            if here.is_file() and p.resolve() != here.resolve()
            else f"{project_hint()} (the project's matrix.yaml is the reference R9700 sweep)"
        )
        there = p.exists()  # a pipe, a device, a folder: there, but no file to read
        what = "not a regular file (a pipe, a device or a folder)" if there else "matrix file not found"
        raise BadInput(f"{p}: {what}; {hint}")
    data, node = _read_yaml(p)
    # confined set above: the file is there
    return parse_matrix(data, p.resolve(), confined=bool(confined), node=node, given=p)


def _unreadable(p: Path, err: OSError) -> BadInput:
    return BadInput(
        f"{p}: cannot read the matrix file ({err.strerror or err}); pass a readable file with --matrix"
    )


def read_yaml(p: Path) -> Any:
    """The data of the matrix YAML file `p` (mappings, lists, scalars), read with load_matrix's guards.
    Raises BadInput naming `p`: unreadable, larger than MAX_MATRIX_BYTES, not UTF-8, bad YAML, a
    duplicate key or an impossible scalar, aliases expanding past MAX_EXPANDED_NODES, nested too deep.
    reproduce reads a published folder's matrix.yaml through it (a 27 MB one took 3m49s and 1.2 GB)."""
    return _read_yaml(p)[0]


def _read_yaml(p: Path) -> tuple[Any, yaml.Node | None]:
    """read_yaml's data and the YAML node it was built from (merge keys flattened into it)."""
    try:
        size = p.stat().st_size
        if size > MAX_MATRIX_BYTES:
            raise BadInput(
                f"{p}: {size} bytes is too large for a matrix file (limit {MAX_MATRIX_BYTES} bytes); "
                "pass the matrix YAML file with --matrix"
            )
        text = p.read_text()
    except UnicodeDecodeError:
        raise BadInput(f"{p}: not a text file (not UTF-8); pass the matrix YAML file with --matrix") from None
    except OSError as err:  # name too long, permission denied, a folder, ...
        raise _unreadable(p, err) from None
    try:
        loader = _UniqueKeyLoader(text)  # the reader refuses unprintable characters (a NUL byte) right here
    except yaml.YAMLError as err:
        raise BadInput(f"{p}: not valid YAML ({getattr(err, 'reason', None) or err}); fix the file") from None
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_nodes(node, MAX_EXPANDED_NODES) > MAX_EXPANDED_NODES:
            raise BadInput(
                f"{p}: YAML aliases expand this document to more than {MAX_EXPANDED_NODES} nodes (an "
                "alias bomb?); write the values out or use fewer aliases"
            )
        data = loader.construct_document(node) if node is not None else None
    except RecursionError:
        raise BadInput(f"{p}: nested too deeply to be a matrix; fix the YAML") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        if isinstance(err, _ScalarError):
            raise BadInput(f"{p}:{where}: {err.problem}") from None
        raise BadInput(
            f"{p}:{where}: not valid YAML ({getattr(err, 'problem', err)}); fix the syntax"
        ) from None
    finally:
        loader.dispose()
    return data, node
