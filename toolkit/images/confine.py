"""A stranger's Dockerfile (`toolkit reproduce --rebuild` of someone's run folder) kept off this host's
build cache.

BuildKit (and Buildah, under `podman build`) shares a `RUN --mount=type=cache` mount between every build
that names the same `id` (default: its target path), whatever network or tags the build has: a stranger's
RUN step writing into `id=llama-cpu-build-cpu` would leave its files in the CMake build tree this
project's own `toolkit build -i cpu` compiles from and copies llama-bench out of (breaker round 19b). So
every cache mount of a stranger's Dockerfile gets an id in a namespace of its own, `toolkit-reproduce-
<inputs key 16>-<its id>`, which no build of this project's templates names (theirs have no such
prefix); two reproductions of the same inputs (templates, vars, source) share it, as they build the
same thing. A `--mount` the rewrite cannot read literally is refused, never guessed at: one whose value
holds a variable, quotes, a backslash, a character not printable ASCII or no `=` (BuildKit expands and
unquotes those itself). BuildKit reads a flag word after joining line continuations and removing its
quotes and escapes, byte by byte (parser.extractBuilderFlags): `--mo\\<newline>unt=`, `--mo"un"t=`,
`--mo\\unt=`, `--mount=type=bind,target=/b<\\x1c or U+3000>,type=cache,id=x` and a `Š` (bytes C5 A0,
A0 a space to BuildKit) between two mounts each put a cache mount where the rewrite saw none (breaker
round 21, real builds): every word that reads as `--mount` after that joining must be a plain one, and
RUN's `--network` (but none/default), `--security` and `--device` are refused. On Docker BuildKit
itself namespaces every cache mount too (CACHE_NS_ARG, a build argument no Dockerfile can set), so an
ONBUILD trigger of a base image, which no text here shows, is covered there. No parser directive can
name another frontend (`# syntax=`, whose mounts could be anything): a rendered Dockerfile starts with
the toolkit's own header comment (render.render_image), after which BuildKit reads no directive.

BuildKit's step cache leaves a cache mount's id out of a RUN step's key (solver/llbsolver/ops/exec.go,
CacheMap), so a stranger's step reading a cache it filled could be reused by the project's own build
of the same step; what keeps them apart is the network mode, in the key: the project's builds run
`--network host`, a stranger's `default`, and BuildKit refuses `RUN --network=host` without `--allow
network.host`, which the toolkit never gives (buildah, Podman 4.3: the step's text, its rewritten ids
included, is the key).

Source of the mount syntax: the Dockerfile reference, "RUN --mount" (docs.docker.com/reference/
dockerfile/#run---mount): comma-separated `key=value` options, `type` default `bind`, `id` default the
target; keys are read in lower case.
"""

from __future__ import annotations

import re

from toolkit.core.errors import BadInput

NAMESPACE = "toolkit-reproduce"
"""The first part of every cache id of a stranger's build (then the inputs key's first 16 digits)."""

CACHE_NS_ARG = "BUILDKIT_CACHE_MOUNT_NS"
"""BuildKit's build argument that puts every cache mount of the build (however spelled, an ONBUILD
trigger of a base image's included) under `<value>/`: a stranger's Docker build gets the namespace
there too (Podman's buildah has no such argument: the rewrite below is its only guard)."""

_WS = " \t\n\r\f\v"
_MOUNT = re.compile(r"--mount(=[^ \t\n\r\f\v]*|(?=[ \t\n\r\f\v])|$)", re.I)
"""A `--mount` and its value up to ASCII white space: BuildKit (parser.extractBuilderFlags) ends a
flag word at a byte unicode.IsSpace calls a space; `\\S` would end it at `\\x1c` or U+3000 too, where
BuildKit reads on (breaker rounds 20-21)."""
_UNREAD = set("$\"'\\`")
_JOIN = re.compile(r"\\[ \t]*\r*\n(?:[^\S\n]*(?:#[^\n]*)?\n)*")
"""A line continuation as BuildKit joins one (parser.Parse): the escape, blanks, the line end (`\\r`s
and `\\n`), and the comment and blank lines it drops inside a continued instruction (blank: white space
to Go's unicode.IsSpace, U+3000 too). Joining more than BuildKit would (`\\\\` at a line's end, a
`\\x1c` line) only makes the check below stricter."""
_WORD = re.compile(r"--[!-~]*")
"""A word that may be a flag: `--` and printable ASCII. Any other character ends it here and may not
end BuildKit's (it reads bytes: the UTF-8 continuation bytes 0x85 and 0xA0 are white space to it)."""
_QUOTING = re.compile(r"[\"'\\]")
_FORBIDDEN = {"--network": {"none", "default"}, "--security": set(), "--device": set()}
"""RUN flags a stranger's build may not give, with the values it may: `--network=host` (issue 32 item
1: no host network; BuildKit refuses it without `--allow network.host`, a newer buildah may not),
`--security=insecure`, `--device` (host devices)."""


def confine_cache_mounts(content: str, key: str, where: str) -> str:
    """`content` (a rendered Dockerfile) with each `type=cache` mount's id made
    `toolkit-reproduce-<key[:16]>-<id>` (`key`: the image's inputs key, hex; an id the mount does not
    give is its target's). Raises BadInput naming `where` (the template) for a `--mount` this reading
    cannot take literally, or that BuildKit would read where the rewrite did not (see the module and
    `_check_confined`), and for a RUN flag of `_FORBIDDEN`. Linear in the length of `content`."""
    ns = cache_namespace(key)
    built = _MOUNT.sub(lambda m: "--mount=" + _confined(m.group(1).removeprefix("="), ns, where), content)
    _check_confined(built, ns, where)
    return built


def cache_namespace(key: str) -> str:
    """The cache namespace of the image whose inputs key is `key` (hex): `toolkit-reproduce-<key[:16]>`."""
    return f"{NAMESPACE}-{key[:16]}"


def _check_confined(built: str, ns: str, where: str) -> None:
    """BadInput where `built` holds a flag BuildKit would read that the rewrite did not: BuildKit reads a
    flag word after joining line continuations (`--mo\\<newline>unt=`) and with its quotes and escapes
    removed (`--mo"un"t=`, `--mount"=type=cache,id=x"`); every word that reads as `--mount` must be a
    plain `--mount=` ending at ASCII white space whose cache ids are all in namespace `ns`."""
    joined = _JOIN.sub("", built)
    run_flags = _run_flags(joined)
    for m in _WORD.finditer(joined):
        raw = m.group()
        plain = _QUOTING.sub("", raw)
        name, _, value = plain.partition("=")
        name = name.lower()
        if name in _FORBIDDEN and value.lower() not in _FORBIDDEN[name] and m.start() in run_flags:
            raise BadInput(
                f"{where}: `{raw[:80]}`: a stranger's build (reproduce --rebuild) runs with no host network, "
                "no insecure mode and no host device; remove the flag"
            )
        if name != "--mount":
            continue
        end = m.end()
        if plain != raw or (end < len(joined) and joined[end] not in _WS) or "=" not in raw:
            raise BadInput(
                f"{where}: `{raw[:80]}` is a `--mount` spelled with quotes, an escape, a line continuation "
                "or a character that is not plain ASCII: a stranger's build (reproduce --rebuild) takes "
                "plain `--mount=key=value,...` options only; write the mount out"
            )
        if not _confined_already(value, ns):
            raise BadInput(
                f"{where}: `{raw[:80]}` is a cache mount outside this build's namespace (a `--mount` split "
                "over lines?); write it out on one line"
            )


_RUN_FLAGS = re.compile(r"^[^!-~\n]*(?:ONBUILD[^!-~\n]+)?RUN((?:[^!-~\n]+--[!-~]*)*)", re.I | re.M)
"""A RUN instruction's own flags, the words before its command: the only words BuildKit reads as RUN's
(a `--device=cpu` in the command is the command's). Anything but printable ASCII separates them:
BuildKit trims an instruction with unicode.IsSpace, splits its keyword off at `[\\t\\v\\f\\r ]` and ends
a flag word at a byte it calls a space (`RUN\\v--network=host` ran with the flag, real BuildKit,
breaker round 22); a word that goes on past such a character is a `--mount` (its value refused as
not ASCII) or a flag BuildKit cannot read."""


def _run_flags(joined: str) -> set[int]:
    """The offsets in `joined` (continuations joined) where a flag of a RUN (or ONBUILD RUN) starts."""
    starts: set[int] = set()
    for m in _RUN_FLAGS.finditer(joined):
        base, flags = m.start(1), m.group(1)
        starts.update(base + w.start() for w in re.finditer(r"(?<![!-~])--", flags))
    return starts


def _options(value: str) -> list[tuple[str, str]]:
    """A `--mount=` value's options in order, as (key in lower case, value); BuildKit reads the last of
    a repeated key, and `type` defaults to bind."""
    return [(k.lower(), v) for k, _, v in (p.partition("=") for p in value.split(",") if p)]


def _is_cache(opts: list[tuple[str, str]]) -> bool:
    types = [v.lower() for k, v in opts if k == "type"]
    return (types[-1] if types else "bind") == "cache"


def _confined_already(value: str, ns: str) -> bool:
    """Whether a literal `--mount=` value is no cache mount, or one whose every id is in namespace `ns`."""
    opts = _options(value)
    ids = [v for k, v in opts if k == "id"]
    return not _is_cache(opts) or (bool(ids) and all(v.startswith(f"{ns}-") for v in ids))


def _confined(value: str, ns: str, where: str) -> str:
    """One `--mount=` value with its cache id in namespace `ns`; BadInput for one not read literally."""
    if not value or _UNREAD & set(value) or not (value.isascii() and value.isprintable()):
        raise BadInput(
            f"{where}: `--mount{('=' + value)[:80] if value else ''}` is not read literally (a variable, "
            "quotes, a backslash, a character not printable ASCII or no `=`): a stranger's build (reproduce "
            "--rebuild) takes plain `--mount=key=value,...` options only; write the mount out"
        )
    opts = _options(value)
    if not _is_cache(opts):
        return value
    last = dict(opts)
    own = last.get("id") or last.get("target") or last.get("dst") or last.get("destination")
    if not own:
        raise BadInput(f"{where}: `--mount={value[:80]}` has neither an id nor a target; give it a target")
    kept = [p for p in value.split(",") if p and p.partition("=")[0].lower() != "id"]
    return ",".join([*kept, f"id={ns}-{own.strip('/').replace('/', '-') or 'root'}"])
