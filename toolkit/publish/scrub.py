"""What a published run keeps of the measuring host's paths: none of its folders by name.

A record says where the model lay (`model.path`), which folder the container read it from (the
`source=` of its bind mount in `command`), where its log went (`log_file`); a build record names its
context. On the measuring host these are the user's folders (`/home/alice/proj/models/x.gguf`), and
`toolkit export-run` would publish them. In a published folder each such path is written relative to
the project (`models/x.gguf`: the matrix's own form) or to the results folder (`<digest12>/logs/..`),
else with the home folder as `~` (`~/models/x.gguf`), another user's home as `/home/<user>`; a path
elsewhere (`/data/models`) names no user and stays. Nothing the toolkit reads back depends on these paths: reproduce finds a model by its
file name, its matrix path and its sha256 (run.json's `file`, `matrix_path`, `sha256`), test identity
leaves the path out (identity.MODEL_FILE_FIELDS), and the depth sweep is told by its log's name
(sweeps.recorded_sweep), kept. run.json's `recorded_path` (where the run read the model) is left out
of a published folder; a run of this project reproduced by its run id is exported with it
(`host_paths`), as it never leaves this host. Old folders that carry absolute paths still read.

A build record's `engine` (Docker's engine ID, `podmanu<uid>`: the same on every run of that engine) is
published as an alias salted with the run id (`engine_alias`): the same engine within one export reads
as one, and two exports of one engine cannot be told to be one machine. A host's `hostname` and kernel
`cmdline` (a `root=UUID=...` names its disk), which bench stopped recording but older records carry,
are left out (MACHINE_FACTS). What else names hardware is no identifier: a GPU's PCI bus and render
node are its slot; no serial, UUID, MAC address or machine-id is recorded.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from toolkit.core.errors import BadInput
from toolkit.core.paths import relative_path
from toolkit.results import write_atomic

if TYPE_CHECKING:
    from toolkit.publish.run_folder import PublishedRun
    from toolkit.results.records import BenchRecord, BuildRecord

M = TypeVar("M", bound=BaseModel)


def folder_relative(path: str) -> bool:
    """Whether a matrix model path means the same inside a published folder: relative, no '..', no '~'."""
    try:
        relative_path(path, what="path")
    except BadInput:
        return False
    return not path.startswith("~")


def host_prefixes(*folders: Path | None) -> list[tuple[str, str]]:
    """(prefix, replacement) pairs, longest prefix first: each folder (resolved, and as given) by
    `.` (the first: the project) or its name relative to the one before it, then $HOME by `~`."""
    pairs: list[tuple[str, str]] = []
    given = [f for f in folders if f is not None]
    for i, f in enumerate(given):
        base = given[0] if i else None
        for form in dict.fromkeys((str(f), str(f.resolve()))):
            rel = "." if base is None else _relative(Path(form), base)
            pairs.append((form.rstrip("/") or "/", rel))
    home = os.environ.get("HOME") or str(Path.home())
    if home and home != "/":
        pairs += [(h.rstrip("/"), "~") for h in dict.fromkeys((home, os.path.realpath(home)))]
    return sorted({p for p in pairs if p[0] != "/"}, key=lambda p: -len(p[0]))


def _relative(path: Path, base: Path) -> str:
    """`path` relative to `base` (resolved forms compared too), else the folder's own name."""
    for p, b in ((path, base), (path.resolve(), base.resolve())):
        try:
            return str(p.relative_to(b))
        except ValueError:
            continue
    return path.name


_IN_NAME = "._-+~@#%"
"""Characters that go on a path's name (beside letters and digits): a prefix followed by one is another
folder (`/home/alice` is not `/home/alice.bak`, `/home/alice2`)."""

_IN_PATH = "._-+~/"
"""Characters besides letters and digits that stand inside a path before a folder's name: a prefix
after one is inside another path (`/mnt/home/alice` is not `/home/alice`)."""

_PATH_ENDS = r"\s:=,'\"()\[\]<>;|&"
"""The characters no path name holds, as a regex class's body: a path in a text ends at one."""

_OTHER_HOME = re.compile(rf"(?<![\w{re.escape(_IN_PATH)}])(/home|/Users)/[^/{_PATH_ENDS}]+")
"""Another user's home folder (`/home/bob/models`, `/Users/bob`: the run measured by one user and
exported by another, a colleague's shared models): its name is a user name, written `<user>`."""


_ABSOLUTE = re.compile(rf"(?<![\w.~+-])/[^{_PATH_ENDS}]*")
"""An absolute path in a text (one pass, linear): from a `/` no name stands before to a character no
path name holds."""


def _climbs_normalised(m: re.Match[str], prefixes: list[tuple[str, str]]) -> str:
    """A path that climbs with `..` (`/home/alice/proj/../../alice/x`) lexically normalised
    (`/home/alice/x`; a URL's leading slashes kept: `file:///...`): the names it climbs out of and back
    into would pass the prefix check. So too one that names a host folder of `prefixes` or a home folder
    through `.` or an empty name (`/home/./alice/x`, `/home//alice/x`, `//home/alice/x`: the same folder
    to the kernel), a trailing `/` kept. Any other path as it is."""
    path = m.group(0)
    body = path.lstrip("/")
    lead = path[: len(path) - len(body)]
    parts = body.split("/")
    url = m.string.endswith(":", 0, m.start())
    if ".." in parts:
        return path[: len(lead) - 1] + posixpath.normpath("/" + body)
    if not body or not ("." in parts or "" in parts[:-1] or (len(lead) > 1 and not url)):
        return path
    norm = posixpath.normpath("/" + body) + ("/" if body.endswith("/") else "")
    named = _OTHER_HOME.match(norm) or any(norm == p or norm.startswith(p + "/") for p, _ in prefixes)
    return (lead[:-1] if url else "") + norm if named else path


def _starts_path(text: str, i: int) -> bool:
    """Whether a path can start at `text[i]`: the text's start, a character no path name holds before it
    (a space, tab, `=`, `:`, a quote, a bracket, `@`, `;`), or a URL's `://` (`file:///home/alice/x`);
    never inside another path (`/mnt/home/alice` is not `/home/alice`)."""
    if i == 0 or text.endswith("://", 0, i):
        return True
    c = text[i - 1]
    return not (c.isalnum() or c in _IN_PATH)


def scrub_text(text: str, prefixes: list[tuple[str, str]]) -> str:
    """`text` with each host path that starts with a prefix (where a path can start: _starts_path, and
    followed by the text's end or a character no name holds, `/`, `:`, `,`, a quote, a tab ...) written
    with its replacement; then another user's home folder (_OTHER_HOME) as `/home/<user>`. A path that
    climbs with `..`, or names a host or home folder through `.` or `//`, is normalised first
    (_climbs_normalised); the prefixes are replaced in one pass each (_replaced: linear)."""
    text = _ABSOLUTE.sub(lambda m: _climbs_normalised(m, prefixes), text)
    for prefix, repl in prefixes:
        text = _replaced(text, prefix, repl)
    return _OTHER_HOME.sub(lambda m: f"{m.group(1)}/<user>", text)


def _replaced(text: str, prefix: str, repl: str) -> str:
    """`text` with each `prefix` that stands as a whole path's start (_starts_path before it, the text's end
    or a character no name holds after it) written `repl` (`.`: with the `/` after it, `x/y` not `./x/y`),
    in one pass (pieces joined once: linear in the text, however many paths it holds)."""
    out: list[str] = []
    pos = start = 0  # text[:pos] is written to out
    last = ""  # the last characters written (_starts_path's look back where a path follows a written one)
    while (i := text.find(prefix, start)) >= 0:
        end = i + len(prefix)
        before_ok = _starts_path(last, len(last)) if out and i == pos else _starts_path(text, i)
        after_ok = end == len(text) or not (text[end].isalnum() or text[end] in _IN_NAME)
        if not (before_ok and after_ok):
            start = end
            continue
        piece, after = repl, end
        if repl == "." and text.startswith("/", end):
            piece, after = ("" if end + 1 < len(text) else "."), end + 1
        out += [text[pos:i], piece]
        last = (last + text[pos:i][-3:] + piece)[-3:]
        pos = start = after
    return "".join(out) + text[pos:] if out else text


def scrub(value: Any, prefixes: list[tuple[str, str]]) -> Any:
    """`value` (a JSON value: dicts, lists, texts, numbers) with every text scrubbed (scrub_text)."""
    if isinstance(value, str):
        return scrub_text(value, prefixes)
    if isinstance(value, list):
        return [scrub(v, prefixes) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, prefixes) for k, v in value.items()}
    return value


def scrubbed(items: list[M], prefixes: list[tuple[str, str]]) -> list[M]:
    """Each model of `items` (BenchRecord, BuildRecord, PublishedRun) dumped, scrubbed and validated
    again as its own class."""
    return [type(m).model_validate(scrub(m.model_dump(mode="json"), prefixes)) for m in items]


def published(
    run: PublishedRun, recs: list[BenchRecord], builds: list[BuildRecord], *folders: Path | None
) -> tuple[PublishedRun, list[BenchRecord], list[BuildRecord]]:
    """run.json, the records and the build records as a published folder holds them: every path under
    `folders` (the project, then the results folder) or $HOME scrubbed (host_prefixes), no model's
    `recorded_path`, no host's MACHINE_FACTS, and each build's engine as its engine_alias."""
    prefixes = host_prefixes(*folders)
    run = run.model_copy(
        update={
            "models": [m.model_copy(update={"recorded_path": None}) for m in run.models],
            "host": _anonymous(run.host),
        }
    )
    recs = [r.model_copy(update={"host": _anonymous(r.host)}) for r in recs]
    builds = [b.model_copy(update={"engine": engine_alias(b.engine, run.run_id)}) for b in builds]
    return scrubbed([run], prefixes)[0], scrubbed(recs, prefixes), scrubbed(builds, prefixes)


MACHINE_FACTS = ("hostname", "cmdline")
"""The host facts of older records that name the measuring machine: never published."""


def _anonymous(host: dict[str, Any]) -> dict[str, Any]:
    """`host` (a record's or run.json's host facts) without MACHINE_FACTS."""
    return {k: v for k, v in host.items() if k not in MACHINE_FACTS}


def engine_alias(engine_id: str | None, salt: str) -> str | None:
    """`engine-<12 hex>` (sha256 of `salt`, the run id, and `engine_id`) for an engine's ID, a stable
    identifier of the measuring machine: one engine reads as one alias within an export, and as another
    in another run's; None (recorded before builds named their engine) kept."""
    if engine_id is None:
        return None
    return "engine-" + hashlib.sha256(f"{salt}\0{engine_id}".encode()).hexdigest()[:12]


def scrub_file(path: Path, *folders: Path | None) -> None:
    """Rewrite the exported copy at `path` (matrix.yaml: a model's `path:` may name the user's home)
    with the host's folders written as published records write them (scrub_text, host_prefixes of
    `folders`: the project first); left as copied where nothing names them."""
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    new = scrub_text(text, host_prefixes(*folders))
    if new != text:
        write_atomic(path, new.encode("utf-8", errors="surrogateescape"), root=path.parent)
