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
holds a variable, quotes, a backslash or no `=` (BuildKit expands and unquotes those itself). No parser
directive can name another frontend (`# syntax=`, whose mounts could be anything): a rendered
Dockerfile starts with the toolkit's own header comment (render.render_image), after which BuildKit
reads no directive.

Source of the mount syntax: the Dockerfile reference, "RUN --mount" (docs.docker.com/reference/
dockerfile/#run---mount): comma-separated `key=value` options, `type` default `bind`, `id` default the
target; keys are read in lower case.
"""

from __future__ import annotations

import re

from toolkit.core.errors import BadInput

NAMESPACE = "toolkit-reproduce"
"""The first part of every cache id of a stranger's build (then the inputs key's first 16 digits)."""

_MOUNT = re.compile(r"--mount(=\S*|(?=\s)|$)", re.I)
_UNREAD = set("$\"'\\`")


def confine_cache_mounts(content: str, key: str, where: str) -> str:
    """`content` (a rendered Dockerfile) with each `type=cache` mount's id made
    `toolkit-reproduce-<key[:16]>-<id>` (`key`: the image's inputs key, hex; an id the mount does not
    give is its target's). Raises BadInput naming `where` (the template) for a `--mount` this reading
    cannot take literally (see the module)."""
    ns = f"{NAMESPACE}-{key[:16]}"
    return _MOUNT.sub(lambda m: "--mount=" + _confined(m.group(1).removeprefix("="), ns, where), content)


def _confined(value: str, ns: str, where: str) -> str:
    """One `--mount=` value with its cache id in namespace `ns`; BadInput for one not read literally."""
    if not value or _UNREAD & set(value):
        raise BadInput(
            f"{where}: `--mount{('=' + value)[:80] if value else ''}` is not read literally (a variable, quotes, "
            "a backslash or no `=`): a stranger's build (reproduce --rebuild) takes plain `--mount=key=value,...` "
            "options only; write the mount out"
        )
    parts = [p.split("=", 1) for p in value.split(",") if p]
    opts = {p[0].lower(): (p[1] if len(p) > 1 else "") for p in parts}
    if opts.get("type", "bind").lower() != "cache":
        return value
    own = opts.get("id") or opts.get("target") or opts.get("dst") or opts.get("destination")
    if not own:
        raise BadInput(f"{where}: `--mount={value[:80]}` has neither an id nor a target; give it a target")
    kept = [p for p in parts if p[0].lower() != "id"]
    return ",".join(["=".join(p) for p in kept] + [f"id={ns}-{own.strip('/').replace('/', '-') or 'root'}"])
