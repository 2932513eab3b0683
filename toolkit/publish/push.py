"""BuildRecord --push--> registry tags + RepoDigest (a bench run --export--> a folder: publish.run_folder).

push: each image's latest build is tagged `<registry>/<image>:<version>-<backend>-<gfx|cpu>-<commit9>-<yyyymmdd>`
(fixed; date = the image's OCI `created` label, so a re-push of the same image gives the same tag) and
`<registry>/<image>:<backend>-latest` (moving), both pushed through the docker SDK, which reads the
Docker credential store itself. The manifest digest the registry serves is read back and an updated
BuildRecord (same image digest, `repo_digests`, `pushed`) is appended to results/builds.jsonl.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit.core import invocation
from toolkit.core.errors import BadInput, BuildFailed
from toolkit.core.text import one_line
from toolkit.core.types import utc_now
from toolkit.engine import api as engine
from toolkit.matrix.api import HOST, LoadedMatrix
from toolkit.results.records import (
    BuildRecord,
    ResultStore,
)
from toolkit.results.time_check import IMAGE_CREATED

NO_ATTESTATIONS = "not supported by the docker driver"
ATTEST_NOTE = (
    "SBOM/provenance not attached: BuildKit attaches attestations only when buildx pushes through a "
    "docker-container builder (or a docker engine with the containerd image store); the default `docker` "
    "driver cannot. `toolkit push --attest` rebuilds and pushes through such a builder when one exists "
    "(`docker buildx create --driver docker-container --use`, which needs the moby/buildkit image)."
)
_REGISTRY = re.compile(  # the reference grammar both engines read: a host of dot-separated labels, each
    # starting and ending with a letter or digit (no [IPv6]: Podman's containers/image grammar has none,
    # only distribution's newer one, Docker 23+, reads it); an optional port; lowercase path components
    rf"^{HOST}(?::(?P<port>[0-9]{{1,5}}))?(/[a-z0-9]+([._-][a-z0-9]+)*)*$"
)
_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")


REGISTRY_PLACEHOLDER = "HOST[:PORT]/NAMESPACE"
"""What a push hint names where it knows no registry to give: the user's to fill (push's --registry)."""


def push_hint(
    image: str, registry: str | None, lm: LoadedMatrix | None, *, whose: str = "your registry", **where: Any
) -> str:
    """The `toolkit push` of `image` to `registry` that works as printed, in backticks (rendered by
    invocation.command with `where`'s matrix and results): `--registry REGISTRY` where it is not the
    matrix's `registry:` (push's default; `lm` None: none known), and `--registry HOST[:PORT]/NAMESPACE`
    said to be the user's to fill (`whose`: the registry meant) where `registry` is None: the one hint of
    export-run's notes and the campaign's refusals (without --registry the push printed failed, exit 4)."""
    push = invocation.command("push", "--image", image, **where)
    default = lm.m.registry if lm is not None and lm.m.registry else None
    if registry is None:
        return f"`{push} --registry {REGISTRY_PLACEHOLDER}` with the address of {whose} in its place"
    if default is None or default.strip().rstrip("/") != registry.strip().rstrip("/"):
        return f"`{push} --registry {registry}`"
    return f"`{push}`"


class PushFailed(BuildFailed):
    """Tagging, pushing or reading back a registry digest failed (exit 2, like a failed build)."""


# ------------------------------------------------------------------------------------------- push


def parse_registry(value: str, where: str = "registry", names: Sequence[str] = ("x",)) -> str:
    """`HOST[:PORT][/NAMESPACE...]` without a scheme or trailing slash (a port 1-65535), that with
    `/NAME` of each of `names` (the images to push there) is a repository name of at most 255
    characters; BadInput naming `where` (the option or the matrix key it came from) otherwise: `..`,
    `-x`, `[::1]:5000` (Podman's tag: `invalid reference format`) or 300 characters as a host was
    taken, then refused by the engine as an invalid reference only when the push ran (exit 2); an
    empty value is said to be empty; Docker Hub without a namespace (docker.io/cpu is its `library`
    namespace, the official images', which refuses the push) or with a path below one (its repositories are
    NAMESPACE/IMAGE: docker.io/acme/lab/cpu is denied) asks for one namespace; a first part without a dot, a
    port or `localhost` (`nas/team`) is no host to either engine (they push it to Docker Hub) and asks for
    one."""
    reg = value.strip().rstrip("/")
    shown = f"{where} {one_line(value)[:300]!r}"
    if reg.startswith("["):
        raise BadInput(
            f"{shown}: an IPv6 address is no host in Podman's image references (Docker 23+ reads it, Podman's "
            "tag fails: invalid reference format); give a host name or an IPv4 address, e.g. "
            "localhost:5000/r9700 or 127.0.0.1:5000/r9700"
        )
    m = None if "://" in reg else _REGISTRY.match(reg)
    if not m or not 1 <= int(m["port"] or 443) <= 65535 or len(reg) + 1 + max(map(len, names)) > 255:
        raise BadInput(
            f"{shown if reg else f'{where} is empty'}: give HOST[:PORT]/NAMESPACE, e.g. 127.0.0.1:5000/r9700 "
            "or ghcr.io/acme (no http://; a host name, a port 1-65535, a lowercase namespace; with /IMAGE at "
            "most 255 characters)"
        )
    host, _, path = reg.partition("/")
    if not any(c in host for c in ".:") and host != "localhost":
        raise BadInput(
            f"{shown}: {host!r} is no registry host to Docker or Podman (a host has a dot, a :PORT or is "
            f"localhost): {reg}/IMAGE is Docker Hub's docker.io/{reg}/IMAGE; give {host}:PORT/NAMESPACE or "
            f"its full name (e.g. {host}.lan/NAMESPACE), or docker.io/{reg} for Docker Hub"
        )
    if host.lower() in _HUB and (path in ("", "library") or "/" in path):
        raise BadInput(
            f"{shown}: Docker Hub takes a push only under an account's namespace (docker.io/IMAGE "
            "is docker.io/library/IMAGE, the official images', which refuses it), as NAMESPACE/IMAGE (a path "
            "below the namespace is denied): give docker.io/NAMESPACE"
        )
    return reg


def registry_for(
    lm: LoadedMatrix, given: str | None, where: str = "--registry", names: Sequence[str] = ("x",)
) -> str | None:
    """The registry `given` (named `where` in messages: --registry, the campaign's key), else the
    matrix's `registry:`, each parsed (parse_registry: BadInput, an empty one too); None where neither is
    given. The one door of every command that takes a registry (push, build --push, campaign)."""
    if given is not None:
        return parse_registry(given, where, names)
    return None if lm.m.registry is None else parse_registry(lm.m.registry, f"{lm.path}: registry", names)


def push_registry(lm: LoadedMatrix, given: str | None, names: Sequence[str] = ("x",)) -> str:
    """registry_for of push and build --push, where one is needed: BadInput when neither is given."""
    reg = registry_for(lm, given, names=names)
    if reg is None:
        raise BadInput(f"no registry: pass --registry HOST:PORT/NAMESPACE or set `registry:` in {lm.path}")
    return reg


def _tag_part(value: str) -> str:
    return _TAG_UNSAFE.sub("_", value).strip("_.") or "none"


def fixed_tag(rec: BuildRecord) -> str:
    """`<version>-<backend>-<gfx targets|cpu>-<source commit 9>-<yyyymmdd of the image's created label>`."""
    labels = rec.labels
    commit = (rec.source_commit or labels.get("org.opencontainers.image.revision") or "nosrc")[:9]
    version = labels.get("org.opencontainers.image.version") or commit
    # Vulkan images carry no gfx label: one image serves any GPU with a Vulkan driver
    gfx = "_".join(t.strip() for t in labels.get("org.toolkit.gfx-targets", "").split(",") if t.strip())
    target = "cpu" if rec.backend == "cpu" else gfx or "anygpu"
    created = labels.get(IMAGE_CREATED) or rec.created
    date = re.sub(r"\D", "", created)[:8]
    return "-".join(_tag_part(x) for x in (version, rec.backend, target, commit, date))[:128]


def moving_tag(rec: BuildRecord) -> str:
    return f"{rec.backend}-latest"


@dataclass
class PushResult:
    """One image: status pushed | skipped | failed; `seconds` = wall time of both pushes."""

    image: str
    status: str
    reason: str = ""
    record: BuildRecord | None = None
    refs: list[str] = field(default_factory=list)
    repo_digest: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def merged(*lists: list[str]) -> list[str]:
    """The items of `lists` in order, each once (tags and digests of several records)."""
    out: list[str] = []
    for lst in lists:
        out += [x for x in lst if x not in out]
    return out


def push_image(
    store: ResultStore,
    name: str,
    registry: str,
    *,
    on_line: Callable[[str], None] | None = None,
    dry_run: bool = False,
) -> PushResult:
    """Tag and push the latest build of image `name` that the engine in use has (build.builds_here);
    append the updated build record. `dry_run`: status "dry-run" with the refs that would be tagged
    and pushed (`refs`), nothing tagged, pushed or recorded."""
    from toolkit.images import build as build_mod

    rec = build_mod.latest_here(store, name)
    if rec is None:
        return PushResult(name, "skipped", f"not built; run `{invocation.command('build', '--image', name)}`")
    if dry_run:
        refs = [f"{registry}/{name}:{t}" for t in (fixed_tag(rec), moving_tag(rec))]
        return PushResult(name, "dry-run", f"would tag {rec.digest[:19]} and push it", refs=refs)
    info = engine.inspect_image(rec.digest)
    if info is None:
        return PushResult(name, "failed", f"image {rec.digest[:19]} is no longer in the engine; rebuild it")
    repository = f"{registry}/{name}"
    tags = [fixed_tag(rec), moving_tag(rec)]
    pushed = _push_tags(name, rec, repository, tags, on_line=on_line)
    if isinstance(pushed, PushResult):
        return pushed
    digest, seconds = pushed
    after = engine.inspect_image(rec.digest)
    repo_digest = f"{repository}@{digest}"
    refs = [f"{repository}:{t}" for t in tags]
    fields = {
        "repo_digests": merged(rec.repo_digests, after.repo_digests if after else [], [repo_digest]),
        "pushed": merged(rec.pushed, refs),
    }
    extra = {"attestations": NO_ATTESTATIONS}
    return _recorded(store, name, rec, fields, extra, refs, repo_digest, seconds, [ATTEST_NOTE])


def _recorded(
    store: ResultStore,
    name: str,
    rec: BuildRecord,
    fields: dict[str, Any],
    extra: dict[str, Any],
    refs: list[str],
    repo_digest: str,
    seconds: float,
    notes: list[str],
) -> PushResult:
    """A push's result (pushed `refs`, `repo_digest`, `seconds`, `notes`): `rec` with `fields`, the push
    time, `seconds` and `extra` (in that order: the extras' order in builds.jsonl) appended to `store`."""
    updated = BuildRecord.model_validate(
        {
            **rec.model_dump(mode="json"),
            **fields,
            "pushed_at": utc_now(),
            "push_seconds": round(seconds, 2),
            **extra,
        }
    )
    store.add_build(updated)
    return PushResult(
        name, "pushed", record=updated, refs=refs, repo_digest=repo_digest, seconds=seconds, notes=notes
    )


def _push_tags(
    name: str,
    rec: BuildRecord,
    repository: str,
    tags: list[str],
    *,
    on_line: Callable[[str], None] | None,
) -> tuple[str, float] | PushResult:
    """Tag the built image as `repository`:each of `tags` and push each: (the one manifest digest they
    got, which the registry serves for the first tag; seconds of the pushes), else the failed PushResult."""
    seconds, digests = 0.0, set()
    for tag in tags:
        err = engine.tag_image(rec.digest, repository, tag)
        if err:
            return PushResult(name, "failed", err)
        out = engine.push_image(repository, tag, on_line=on_line)
        seconds += out.seconds
        if not out.ok or not out.digest:
            return PushResult(
                name, "failed", f"push of {out.ref} failed: {out.error or 'no digest reported'}"
            )
        digests.add(out.digest)
    if len(digests) != 1:
        return PushResult(
            name, "failed", f"the two tags of {repository} got different digests: {sorted(digests)}"
        )
    digest = digests.pop()
    served = engine.registry_digest(f"{repository}:{tags[0]}")
    if served != digest:
        return PushResult(
            name,
            "failed",
            f"the registry serves {served} for {repository}:{tags[0]}, "
            f"not the pushed {digest} (another push raced this one?)",
        )
    return digest, seconds


def container_builder() -> str | None:
    """Name of a buildx builder with the docker-container driver (the kind that can attest), or None."""
    return next((b["name"] for b in engine.buildx_builders() if b["driver"] == "docker-container"), None)


def attest_push(
    lm: LoadedMatrix,
    store: ResultStore,
    name: str,
    registry: str,
    *,
    on_line: Callable[[str], None] | None = None,
) -> PushResult:
    """Rebuild `name` through a docker-container builder and push it with SBOM + provenance (mode=max).

    The attested image is a rebuild: its image ID can differ from the measured one; the record says so.
    """
    from toolkit.images import build as build_mod

    builder = container_builder()
    if builder is None:
        raise BadInput("--attest: no docker-container buildx builder on this host. " + ATTEST_NOTE)
    spec = lm.m.image(name)
    rec = build_mod.latest_here(store, name)
    if rec is None:
        return PushResult(name, "skipped", f"not built; run `{invocation.command('build', '--image', name)}`")
    rendered, _, _, labels, args, _ = build_mod.plan(lm, spec, store)
    repository = f"{registry}/{name}"
    refs = [f"{repository}:{fixed_tag(rec)}", f"{repository}:{moving_tag(rec)}"]
    meta = lm.root / ".toolkit" / "logs" / f"attest-{name}.metadata.json"
    cmd = engine.buildx_command(
        rendered.path.parent,
        tags=refs,
        labels=labels,
        build_args=args,
        metadata_file=meta,
        push=True,
        attest=True,
    )
    cmd[3:3] = ["--builder", builder]
    out = engine.run_buildx(cmd, log_path=meta.with_suffix(".log"), on_line=on_line)
    if not out.ok:
        return PushResult(name, "failed", f"attested build+push exited {out.returncode}; log {out.log_path}")
    index = engine.read_metadata(meta).get("containerimage.digest")
    pulled = engine.pull_image(f"{repository}@{index}") if index else None
    info = engine.inspect_image(f"{repository}@{index}") if pulled and pulled.ok else None
    if info is None:
        return PushResult(name, "failed", f"pushed {refs[0]} but could not pull it back by digest {index}")
    return _attested(
        store,
        name,
        rec,
        info,
        refs=refs,
        repo_digest=f"{repository}@{index}",
        cmd=cmd,
        out=out,
        builder=builder,
    )


def _attested(
    store: ResultStore,
    name: str,
    rec: BuildRecord,
    info: engine.ImageInfo,
    *,
    refs: list[str],
    repo_digest: str,
    cmd: list[str],
    out: engine.BuildOutcome,
    builder: str,
) -> PushResult:
    """The attested push's result: the measured build's record updated with the pushed image `info`
    (pulled back by `repo_digest`) appended to the store, and a note when that image is a rebuild."""
    notes = (
        []
        if info.id == rec.digest
        else [
            f"the attested image is a rebuild (image ID {info.id[:19]}, the "
            f"measured one is {rec.digest[:19]}): bench it before publishing"
        ]
    )
    # the build's proven facts (org.toolkit.<fact> labels read from the image at build time) stay on the
    # record when the pushed image is the measured one; a rebuild's facts were not read, so they are not claimed
    labels = {**rec.labels, **info.labels} if info.id == rec.digest else info.labels
    fields = {
        "digest": info.id,
        "labels": labels,
        "build_command": cmd,
        "repo_digests": merged(info.repo_digests, [repo_digest]),
        "pushed": refs,
    }
    extra = {"attestations": "sbom+provenance(mode=max)", "builder": builder}
    return _recorded(store, name, rec, fields, extra, refs, repo_digest, out.seconds, notes)


def push_images(
    lm: LoadedMatrix,
    store: ResultStore,
    names: list[str],
    registry: str | None,
    *,
    attest: bool = False,
    on_line: Callable[[str], None] | None = None,
    dry_run: bool = False,
) -> list[PushResult]:
    """Push the latest build of each named image (default: every image of the matrix); `dry_run`:
    say what would be tagged and pushed (push_image), push and record nothing."""
    specs = lm.select_images(names)
    reg = push_registry(lm, registry, [spec.name for spec in specs] or ["x"])
    out = []
    for spec in specs:
        if dry_run:
            out.append(push_image(store, spec.name, reg, dry_run=True))
        elif attest:
            out.append(attest_push(lm, store, spec.name, reg, on_line=on_line))
        else:
            out.append(push_image(store, spec.name, reg, on_line=on_line))
    return out
