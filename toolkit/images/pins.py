"""Every pin of a matrix, checked against where it comes from: `toolkit pins`.

A pin is one of
  - a base image: every `FROM` of the rendered images/<name>/Dockerfile (stage names and `scratch`
    left out) and every template variable carrying `@sha256:`. Looked up through the Docker engine's
    distribution API (`client.images.get_registry_data`, what `docker pull` resolves), the manifest
    list of a tag through `docker buildx imagetools inspect --raw`;
  - a source: every entry of `sources:` and each of its `fallback`s, and template variables
    `<x>_git` + `<x>_commit` (e.g. the SGLang RDNA4 patch series). git through `git ls-remote` (tags
    and branches) or a shallow `git fetch` of the commit (a commit is no ref ls-remote lists); a PyPI
    sdist through the index's simple API (PEP 691 JSON, PEP 503 HTML), the index pip uses
    ($PIP_INDEX_URL, else pip's `global.index-url`, else https://pypi.org/simple/), and its sha256
    against the copy the source fetcher cached (toolkit/images/sources.py) when there is one; local paths
    and archives by existence;
  - a Hugging Face checkpoint (`models[].hf`): `HfApi().model_info(repo, revision=...)`
    (huggingface_hub; $HF_ENDPOINT is honoured), the pinned `file` among the revision's files.

Status of each (STATUSES):
  ok           resolves to what is pinned (or, for a tag/branch/model with nothing pinned, resolves at all:
               `pinned` is then None and `now` says what it points at today)
  moved        a tag or branch pinned WITH a digest/commit now points elsewhere (or is gone while the
               digest still resolves); the index serves other bytes for a cached sdist
  missing      the digest, commit, ref, sdist, repository, revision or file is gone (or refused to us)
  unreachable  not checked: no answer from the registry / git host / index / Hub within `timeout`
               (offline), or the Docker engine is down; the reason is on the row. A host that did
               not answer once is not asked again in the same run.
  unchecked    not checked here, by a known lack of this host, not a network failure: the engine is
               Podman (no registry lookup: image pins only); the row says where it can be checked.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from tabulate import tabulate

from toolkit.core import invocation, jsonsafe
from toolkit.core.errors import BadInput, EngineUnavailable
from toolkit.core.types import is_image_id
from toolkit.matrix.api import HfFile, ImageSpec, LoadedMatrix, SourceSpec
from toolkit.models.tiny import sha256_file

STATUSES = ("ok", "moved", "missing", "unreachable", "unchecked")
BROKEN = ("moved", "missing")
DEFAULT_INDEX = "https://pypi.org/simple/"
PYPI_JSON_LIMIT = 256 << 20  # a project page of the simple JSON API: a few MB for the largest projects
_FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_HEX = re.compile(r"^[0-9a-f]{7,39}$")
_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(?P<ref>\S+)(?:\s+AS\s+(?P<stage>\S+))?\s*$", re.I)
_ARG = re.compile(r"^\s*ARG\s+(?P<name>\w+)=(?P<value>\S*)\s*$", re.I)
_VAR_REF = re.compile(r"\$\{?(\w+)\}?")
# Errors that say the other side was not reached (as opposed to: reached, and it said no). Matched as
# words, after URLs are cut out (a repository named "atlas" or "ssl-tools" is not a TLS error).
_OFFLINE = re.compile(
    r"\b(could not resolve host|no such host|name or service not known|temporary failure in name"
    r"|connection refused|failed to connect|could not connect|network is unreachable|no route to host"
    r"|timed out|timeout|tls|ssl|proxy|http response to https client|connection reset|eof"
    r"|returned error: 5\d\d|service unavailable|bad gateway)\b",
    re.I,
)
_URL = re.compile(r"[\w+.-]+://\S+")
_DENIED = ("unauthorized", "denied", "authentication required", "forbidden")
_MANIFEST_LISTS = (
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.index.v1+json",
)


class Unreachable(Exception):
    """A lookup got no answer (network, timeout, engine down); str() is the reason."""


class Unchecked(Exception):
    """A lookup this host cannot make (a known lack: Podman has no registry lookup), asked of no one;
    str() is the reason and where it can be made."""


class Gone(Exception):
    """A lookup was answered: the thing does not exist (or access is refused); str() is the reason."""


@dataclass(frozen=True)
class Pin:
    """One pinned thing.

    kind: "image" | "source" | "model"; ref: what is looked up (an image reference
    `repo[:tag][@sha256:...]`, `git URL @ ref`, `pypi:NAME==VERSION`, `path:...`, `hf:REPO[/FILE]`);
    pinned: the digest / commit / revision it must resolve to (None: a tag, branch or model with nothing
    pinned); where: the places in the matrix / rendered Dockerfiles that name it; target: the spec
    checked (the image reference string, a SourceSpec or an HfFile)."""

    kind: str
    ref: str
    pinned: str | None
    where: tuple[str, ...]
    target: Any = field(compare=False, repr=False)


@dataclass(frozen=True)
class PinResult:
    """A checked pin: status one of STATUSES; now: what the source resolves to today (digest, commit,
    sdist sha256, revision) or None; reason: one line saying why (always set for a status other than ok)."""

    pin: Pin
    status: str
    now: str | None = None
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.pin.kind,
            "ref": self.pin.ref,
            "pinned": self.pin.pinned,
            "where": list(self.pin.where),
            "status": self.status,
            "now": self.now,
            "reason": self.reason,
        }


# ------------------------------------------------------------------------------------------ collect


def from_lines(dockerfile: str) -> list[tuple[int, str, str | None]]:
    """The external base images of a Dockerfile: [(line number, image reference, stage name)].

    Leaves out `FROM scratch` and `FROM <earlier stage>`; `$ARG`/`${ARG}` are replaced by the defaults
    of `ARG NAME=value` lines before the first FROM (Dockerfile reference, "Understand how ARG and FROM
    interact"). A reference still holding `$` after that is returned as it is (the caller reports it)."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    out = []
    seen_from = False
    for n, line in enumerate(dockerfile.splitlines(), 1):
        if not seen_from and (m := _ARG.match(line)):
            args[m["name"]] = m["value"]
            continue
        m = _FROM.match(line)
        if not m:
            continue
        seen_from = True
        ref = _VAR_REF.sub(lambda v: args.get(v[1], v[0]), m["ref"])
        if ref.lower() != "scratch" and ref.lower() not in stages:
            out.append((n, ref, m["stage"]))
        if m["stage"]:
            stages.add(m["stage"].lower())
    return out


def collect_pins(
    lm: LoadedMatrix, images: tuple[str, ...] | list[str] = (), models: tuple[str, ...] | list[str] = ()
) -> list[Pin]:
    """Every pin of the matrix (see the module docstring), one Pin per distinct reference with all the
    places naming it. `images` / `models` select (names; BadInput for an unknown one); with neither,
    everything: all images, all of `sources:` (used or not), all models with `hf:`. With only `images`,
    those images and their sources; with only `models`, those models."""
    from toolkit.images.render import render_image

    everything = not images and not models
    specs = lm.select_images(images) if images or everything else []
    places: dict[tuple[str, str], list[str]] = {}
    targets: dict[tuple[str, str], tuple[str | None, Any]] = {}

    def add(kind: str, ref: str, pinned: str | None, where: str, target: Any) -> None:
        key = (kind, ref)
        targets.setdefault(key, (pinned, target))
        if where not in places.setdefault(key, []):
            places[key].append(where)

    for spec in specs:
        stages = from_lines(render_image(lm, spec).content)
        for _, ref, _ in stages:
            at = ", ".join(f"{s or 'stage'} (line {n})" for n, r, s in stages if r == ref)
            add("image", ref, _image_digest(ref), f"images/{spec.name}/Dockerfile FROM {at}", ref)
        for key, value in spec.vars.items():
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, str) and "@sha256:" in v:
                    add("image", v, _image_digest(v), f"images[{spec.name}].vars.{key}", v)
            if (git_pin := _var_git_source(lm, spec, key)) is not None:
                add("source", source_ref(git_pin[1]), git_pin[1].commit, *git_pin)
    names = list(lm.m.sources) if everything else list(dict.fromkeys(s.source for s in specs if s.source))
    for name in names:
        src, where = lm.m.sources.get(name), f"sources.{name}"
        while src is not None:
            add(
                "source", source_ref(src), src.pypi.partition("==")[2] if src.pypi else src.commit, where, src
            )
            src, where = src.fallback, where + ".fallback"
    for model in lm.select_models(models) if models or everything else []:
        if model.hf is not None:
            ref = f"hf:{model.hf.repo}" + (f"/{model.hf.file}" if model.hf.file else "")
            add("model", ref, model.hf.revision, f"models[{model.name}].hf", model.hf)
    return [
        Pin(kind, ref, targets[(kind, ref)][0], tuple(places[(kind, ref)]), targets[(kind, ref)][1])
        for kind, ref in places
    ]


def _var_git_source(lm: LoadedMatrix, spec: ImageSpec, key: str) -> tuple[str, SourceSpec] | None:
    """A template variable `<x>_git` with a sibling `<x>_commit` (or `<x>_ref`) as (where, SourceSpec), else None.
    BadInput when the pair is not a git URL + ref the source fetcher would accept."""
    stem, value = key.removesuffix("_git"), spec.vars[key]
    ref_key = next((k for k in (f"{stem}_commit", f"{stem}_ref") if isinstance(spec.vars.get(k), str)), None)
    if not key.endswith("_git") or not isinstance(value, str) or ref_key is None:
        return None
    ref, where = spec.vars[ref_key], f"images[{spec.name}].vars.{key} + {ref_key}"
    try:
        return where, SourceSpec(git=value, ref=ref, commit=ref if _FULL_COMMIT.fullmatch(ref) else None)
    except ValidationError as err:
        raise BadInput(
            f"{lm.path}: {where}: not a git source ({err.errors()[0]['msg']}); fix the variables"
        ) from None


def source_ref(src: SourceSpec) -> str:
    """How a source is named in the table: `URL @ ref`, `pypi:NAME==VERSION`, `path:...` / `archive:...`."""
    if src.git:
        return f"{src.git} @ {src.ref}"
    if src.pypi:
        return f"pypi:{src.pypi}"
    return f"{src.kind}:{src.path or src.archive}"


def _image_digest(ref: str) -> str | None:
    digest = ref.partition("@")[2]
    return digest or None


# ------------------------------------------------------------------------------------- checking


class Hosts:
    """Remembers hosts that did not answer, so one offline host costs one timeout per run, not one per pin."""

    def __init__(self) -> None:
        self.down: dict[str, str] = {}  # host -> what was asked of it, and its error (the first failure)

    def call(self, host: str, fn: Callable[[], Any], asked: str = "") -> Any:
        """fn() where `host` has not failed yet in this run; Unreachable (fn's, memoised) otherwise.
        `asked`: what fn asks of the host (a URL, an image reference), so a later pin on the same host
        is told its own URL was not asked and whose failure it quotes (every row of three git sources
        on one dead host quoted the first one's URL as if it were its own)."""
        if host in self.down:
            mine = f": {asked} not checked" if asked else ""
            raise Unreachable(
                f"{host} unreachable earlier in this run, not asked again{mine} (the first failure there: "
                f"{self.down[host]})"
            )
        try:
            return fn()
        except Unreachable as err:
            self.down[host] = f"{asked}: {err}" if asked and asked not in str(err) else str(err)
            raise Unreachable(f"{host} unreachable: {err}") from None


def check_pins(
    lm: LoadedMatrix,
    images: tuple[str, ...] | list[str] = (),
    models: tuple[str, ...] | list[str] = (),
    *,
    timeout: float = 10.0,
) -> list[PinResult]:
    """collect_pins + check_pin of each, sharing one Hosts memo and one Docker client."""
    hosts, docker = Hosts(), DockerLookup(timeout)
    return [
        check_pin(pin, lm, hosts=hosts, docker=docker, timeout=timeout)
        for pin in collect_pins(lm, images, models)
    ]


def check_pin(
    pin: Pin,
    lm: LoadedMatrix,
    *,
    hosts: Hosts | None = None,
    docker: DockerLookup | None = None,
    timeout: float = 10.0,
    hf_endpoint: str | None = None,
) -> PinResult:
    """Look one pin up where it lives. `timeout`: seconds per network request (git: per command);
    `hf_endpoint`: the Hub's URL (default: huggingface_hub's, i.e. $HF_ENDPOINT or huggingface.co).
    Never raises for a network, registry or index answer: that is the row's status and reason."""
    hosts = hosts or Hosts()
    try:
        if pin.kind == "image":
            return check_image(pin, docker or DockerLookup(timeout), hosts)
        if pin.kind == "source":
            return check_source(pin, lm, hosts, timeout)
        return check_model(pin, hosts, timeout, hf_endpoint)
    except Unreachable as err:
        return PinResult(pin, "unreachable", None, f"not checked: {err}")
    except Unchecked as err:
        return PinResult(pin, "unchecked", None, f"not checked here: {err}")
    except Gone as err:
        return PinResult(pin, "missing", None, str(err))


def _first_line(text: str, limit: int = 200) -> str:
    """The last line of a tool's message that is not a warning (lines: newlines or the source fetcher's
    " | "), without the fetcher's "`cmd` failed: " prefix, cut to `limit` characters."""
    text = re.sub(r"^`[^`]*` failed: ", "", str(text).strip())
    lines = [ln.strip() for ln in re.split(r"\n| \| ", text) if ln.strip()]
    lines = [ln for ln in lines if not ln.lower().startswith("warning:")] or lines
    line = lines[-1] if lines else "no message"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _offline(message: str) -> bool:
    """Does a tool's error say it got no answer (DNS, connect, timeout, TLS, proxy, 5xx)?"""
    return bool(_OFFLINE.search(_URL.sub(" ", message)))


# ---- images


def split_image_ref(ref: str) -> tuple[str, str | None, str | None, str]:
    """`[host[:port]/]repo[:tag][@sha256:...]` -> (repository, tag, digest, registry host); Docker Hub
    names (`debian`, `rocm/pytorch`) live on registry-1.docker.io (`docker.io`)."""
    name, _, digest = ref.partition("@")
    tag = None
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    first = name.split("/", 1)[0]
    host = first if "/" in name and ("." in first or ":" in first or first == "localhost") else "docker.io"
    return name, tag, digest or None, host


class DockerLookup:
    """The manifest digest a registry serves for a reference, through the Docker engine (distribution
    inspect: the same resolution `docker pull` does, with the engine's credentials and registry
    settings). Raises Gone (404 / refused), Unreachable (no answer, engine down) or Unchecked (Podman)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._client: Any = None

    def connect(self, ref: str):
        """The engine's client; Unchecked on Podman, naming the command that checks `ref` by hand as skopeo
        takes it (a tag or a digest, never both) and skopeo's install where absent (as on a fresh host)."""
        from toolkit.engine import api as engine

        if engine.is_podman():  # its compat API answers 404 to every distribution inspect, asking no registry
            name, tag, digest, _ = split_image_ref(ref)
            one = f"{name}@{digest}" if digest else f"{name}:{tag or 'latest'}"
            get = "" if shutil.which("skopeo") else "`sudo apt-get install -y skopeo`, then "
            raise Unchecked(
                "Podman has no registry lookup (Docker's distribution inspect); check image pins where "
                f"Docker runs, or one by one: {get}`skopeo inspect docker://{one}`"
            )
        if self._client is None:
            try:
                self._client = engine.client()
            except EngineUnavailable as err:
                raise Unreachable(str(err).removeprefix("Docker engine not reachable ")) from None
            self._client.api.timeout = self.timeout
        return self._client

    def digest(self, ref: str) -> str:
        from toolkit.engine import api as engine

        try:
            return engine.registry_manifest_digest(self.connect(ref), ref)
        except engine.RegistryLookupError as err:
            if err.kind == "not-found":
                raise Gone(f"{ref}: {_first_line(err.message)}") from None
            if err.kind == "refused":
                msg = _first_line(err.message, 300)
                if any(w in err.message.lower() for w in _DENIED) and not _offline(err.message):
                    raise Gone(
                        f"{ref}: refused ({msg}): it does not exist, or it needs `docker login "
                        f"{split_image_ref(ref)[3]}`"
                    ) from None
                raise Unreachable(msg) from None
            raise Unreachable(
                f"no answer from the Docker engine within {self.timeout:g} s ({_first_line(err.message)})"
            ) from None

    def children(self, ref: str) -> dict[str, str]:
        """{digest: "os/arch"} of the manifest list `ref` points at ({} for a single manifest or when
        `docker buildx imagetools inspect --raw` cannot read it)."""
        from toolkit.engine import api as engine

        raw = engine.raw_manifest(ref, timeout=self.timeout)
        if raw.get("mediaType") not in _MANIFEST_LISTS and "manifests" not in raw:
            return {}
        out = {}
        for m in raw.get("manifests") or []:
            p = m.get("platform") or {}
            out[m.get("digest", "")] = "/".join(
                x for x in (p.get("os"), p.get("architecture"), p.get("variant")) if x
            )
        return out


def check_image(pin: Pin, docker: DockerLookup, hosts: Hosts) -> PinResult:
    """A base image reference. Tag + digest: ok when the tag still points at the digest (or at a manifest
    list holding it), moved when the tag points elsewhere or is gone while the digest resolves, missing
    when the digest is gone. Digest only: ok / missing. Tag only (nothing pinned): ok with the digest it
    points at now, or missing."""
    ref = pin.target
    if "$" in ref:
        raise Gone(
            f"{ref}: the FROM line names a build argument with no default; the build cannot resolve it either"
        )
    from toolkit.engine import api as engine

    name, tag, digest, host = split_image_ref(ref)
    hosts.call(engine.engine_label(), lambda: docker.connect(ref))  # "Docker engine", "Podman (rootless)"
    if digest is None:
        now = hosts.call(host, lambda: docker.digest(f"{name}:{tag or 'latest'}"), ref)
        return PinResult(
            pin,
            "ok",
            now,
            f"tag only, nothing pinned: {tag or 'latest'} points at {now} now; "
            f"pin it as {name}:{tag or 'latest'}@{now}",
        )
    if not is_image_id(digest):
        raise Gone(f"{ref}: {digest!r} is not a sha256 digest (sha256: + 64 hex digits)")
    try:
        hosts.call(host, lambda: docker.digest(f"{name}@{digest}"), ref)
    except Gone as err:
        raise Gone(f"the pinned digest is gone: {err}") from None
    if tag is None:
        return PinResult(pin, "ok", digest, "digest resolves")
    try:
        now = hosts.call(host, lambda: docker.digest(f"{name}:{tag}"), ref)
    except Gone as err:
        return PinResult(pin, "moved", None, f"tag {tag} is gone ({err}); the pinned digest still resolves")
    if now == digest:
        return PinResult(pin, "ok", now, f"tag {tag} still points at the pinned digest")
    platform = docker.children(f"{name}:{tag}").get(digest)
    if platform is not None:
        return PinResult(
            pin,
            "ok",
            now,
            f"the pinned digest is the {platform or 'platform'} manifest of the list "
            f"tag {tag} points at ({now})",
        )
    return PinResult(
        pin,
        "moved",
        now,
        f"tag {tag} now points at {now}, not the pinned {digest}; the pinned digest "
        "still resolves (builds use it); re-pin or re-tag",
    )


# ---- sources


def _git(args: list[str], timeout: float, cwd: Path | None = None) -> str:
    """A git command through the source fetcher's runner (no prompts, low-speed abort); Unreachable or
    Gone by git's message."""
    from toolkit.images.sources import _run

    try:
        return _run(["git", *args], cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Unreachable(f"git {args[0]} got no answer within {timeout:g} s") from None
    except (RuntimeError, OSError) as err:
        if _offline(str(err)):
            raise Unreachable(_first_line(str(err), 300)) from None
        raise Gone(_first_line(str(err), 300)) from None


def git_ref_commit(url: str, ref: str, timeout: float) -> str:
    """The commit `ref` (tag, branch, `refs/...` or HEAD) points at on the remote, from `git ls-remote`
    (annotated tags peeled, tags before branches as git resolves them). Gone when no such ref."""
    out = _git(["ls-remote", "--", url, ref, f"{ref}^{{}}"], timeout)
    found = {
        ref_name: sha for sha, ref_name in (line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    }
    for name in (ref, f"refs/tags/{ref}", f"refs/heads/{ref}"):
        if f"{name}^{{}}" in found:
            return found[f"{name}^{{}}"]
        if name in found:
            return found[name]
    raise Gone(f"{url}: no tag or branch {ref!r} on the remote")


def git_commit_exists(url: str, commit: str, timeout: float) -> None:
    """A shallow `git fetch` of one commit into a throw-away repository (remotes serve any reachable
    commit by hash: protocol v2, GitHub's allowReachableSHA1InWant). Gone when the remote does not have it."""
    with tempfile.TemporaryDirectory(prefix="toolkit-pins-") as tmp:
        _git(["init", "--quiet", "--bare", tmp], timeout)
        try:
            _git(
                ["fetch", "--quiet", "--depth=1", "--filter=tree:0", "--no-tags", "--", url, commit],
                timeout,
                cwd=Path(tmp),
            )
        except Gone as err:
            raise Gone(f"{url}: commit {commit} is not on the remote ({err})") from None


def _git_host(url: str) -> str:
    """`host[:port]` of a git URL (`scheme://host/...` or `user@host:path`); a file:// URL is its own host."""
    if "://" in url:
        return urllib.parse.urlsplit(url).netloc or url
    return url.split(":", 1)[0]


def check_git(pin: Pin, src: SourceSpec, hosts: Hosts, timeout: float) -> PinResult:
    """A git source: a commit `ref` must be fetchable (and equal `commit` when both are given); a tag or
    branch must exist and, with `commit`, still point at it (else moved)."""
    url, ref, want = src.git or "", src.ref or "", src.commit
    host = _git_host(url)
    if _FULL_COMMIT.fullmatch(ref):
        hosts.call(host, lambda: git_commit_exists(url, ref, timeout), url)
        if want and not ref.startswith(want):
            return PinResult(
                pin,
                "moved",
                ref,
                f"ref is commit {ref}, the pinned commit is {want}: the source "
                "fetcher refuses that; make them one",
            )
        return PinResult(pin, "ok", ref, "commit is on the remote")
    try:
        now = hosts.call(host, lambda: git_ref_commit(url, ref, timeout), url)
    except Gone:
        if _HEX.fullmatch(ref):
            raise Unreachable(
                f"{ref!r} looks like an abbreviated commit: a remote serves commits by full hash only; "
                "give the full 40-hex commit to have it checked"
            ) from None
        raise
    if want is None:
        return PinResult(pin, "ok", now, f"{ref} points at {now}; nothing pinned: add `commit: {now}`")
    if now.startswith(want):
        return PinResult(pin, "ok", now, f"{ref} still points at the pinned commit")
    return PinResult(
        pin,
        "moved",
        now,
        f"{ref} now points at {now}, not the pinned {want}; a build would stop at the commit check",
    )


def index_url() -> str:
    """The package index pip reads: $PIP_INDEX_URL, else pip's `global.index-url`, else PyPI."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    return DEFAULT_INDEX


def index_files(index: str, project: str, timeout: float) -> list[dict[str, Any]]:
    """The files the index lists for `project`: [{filename, sha256, yanked}] from the simple API (PEP 691
    JSON, else PEP 503 HTML). Gone on 404, Unreachable when the index does not answer."""
    from packaging.utils import canonicalize_name

    url = index.rstrip("/") + "/" + canonicalize_name(project) + "/"
    req = urllib.request.Request(
        url, headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body, ctype = resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as err:
        if err.code == 404:
            raise Gone(f"{url}: no project {project!r} on the index (404)") from None
        raise Unreachable(f"{url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        raise Unreachable(f"{url}: {getattr(err, 'reason', err)}") from None
    if "json" in ctype:
        try:
            answer = jsonsafe.parse(body, limit=PYPI_JSON_LIMIT)
        except jsonsafe.JsonProblem as err:
            raise Unreachable(f"{url}: the index answered with JSON that cannot be read ({err})") from None
        if not isinstance(answer, dict) or not isinstance(answer.get("files", []), list):
            raise Unreachable(f"{url}: the index answered with JSON that is not a project page")
        return [
            {
                "filename": f["filename"],
                "sha256": (f.get("hashes") or {}).get("sha256"),
                "yanked": f.get("yanked") or False,
            }
            for f in answer.get("files", [])
            if isinstance(f, dict) and "filename" in f
        ]
    files = []
    for m in re.finditer(rb"<a\s[^>]*href=\"([^\"]+)\"[^>]*>", body, re.I):
        href = m[1].decode()
        path, _, frag = href.partition("#")
        files.append(
            {
                "filename": urllib.parse.unquote(path.rsplit("/", 1)[-1]),
                "sha256": frag[len("sha256=") :] if frag.startswith("sha256=") else None,
                "yanked": b"data-yanked" in m[0],
            }
        )
    return files


def check_pypi(pin: Pin, src: SourceSpec, hosts: Hosts, timeout: float) -> PinResult:
    """A PyPI sdist `NAME==VERSION`: the index lists an sdist of that version (ok), none (missing); the
    sdist the source fetcher cached must have the sha256 the index states (else moved)."""
    from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
    from packaging.version import InvalidVersion, Version

    from toolkit.images import sources

    project, _, version = (src.pypi or "").partition("==")
    index = index_url()
    files = hosts.call(
        urllib.parse.urlsplit(index).netloc or index,
        lambda: index_files(index, project, timeout),
        src.pypi or "",
    )
    sdists = []
    for f in files:
        try:
            name, ver = parse_sdist_filename(f["filename"])
            if name == canonicalize_name(project) and ver == Version(version):
                sdists.append(f)
        except (InvalidSdistFilename, InvalidVersion):
            continue
    if not sdists:
        raise Gone(
            f"{index}: no sdist of {project} {version} on the index (the source fetcher downloads the sdist)"
        )
    sdist = sdists[0]
    note = f"; yanked: {sdist['yanked']}" if sdist["yanked"] else ""
    cache = sources.cache_dir() / f"pypi-{sources._key(src.pypi or '')}" / sdist["filename"]
    if cache.is_file() and sdist["sha256"]:
        got = sha256_file(cache)
        if got != sdist["sha256"]:
            return PinResult(
                pin,
                "moved",
                f"sha256:{sdist['sha256']}",
                f"{index} serves {sdist['filename']} with "
                f"sha256 {sdist['sha256']}, the cached copy {cache} has {got}{note}",
            )
        note += "; the cached sdist has these bytes"
    commit = (
        f"; vendored commit {src.commit} (checked by the build, not readable from the index)"
        if src.commit
        else ""
    )
    return PinResult(
        pin,
        "ok",
        f"sha256:{sdist['sha256']}" if sdist["sha256"] else None,
        f"{sdist['filename']} on {index}{note}{commit}",
    )


def check_source(pin: Pin, lm: LoadedMatrix, hosts: Hosts, timeout: float) -> PinResult:
    """Dispatch by source kind: git, PyPI, or a local path/archive (exists: ok, else missing)."""
    src: SourceSpec = pin.target
    if src.git:
        return check_git(pin, src, hosts, timeout)
    if src.pypi:
        return check_pypi(pin, src, hosts, timeout)
    local = lm.resolve(src.path or src.archive or "", what=f"sources: {src.kind}")
    if not local.exists():
        raise Gone(f"{local} does not exist")
    return PinResult(
        pin,
        "ok",
        None,
        f"{local} exists (local {src.kind}; the stated commit {src.commit} is not checkable without .git)",
    )


# ---- models


def check_model(pin: Pin, hosts: Hosts, timeout: float, endpoint: str | None = None) -> PinResult:
    """A Hugging Face checkpoint: `model_info(repo, revision=...)` answers (ok) or says the repository or
    revision does not exist (missing); a pinned `file` must be among that revision's files."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import (
        DisabledRepoError,
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    hf: HfFile = pin.target
    api = HfApi(endpoint=endpoint)

    def lookup():
        try:
            return api.model_info(hf.repo, revision=hf.revision, timeout=timeout)
        except GatedRepoError as err:
            raise Unreachable(
                f"{hf.repo} is gated: log in (`hf auth login`) to check it ({_first_line(str(err))})"
            ) from None
        except RevisionNotFoundError:
            raise Gone(f"{hf.repo}: revision {hf.revision} does not exist") from None
        except (RepositoryNotFoundError, DisabledRepoError) as err:
            raise Gone(
                f"{hf.repo}: repository not found, private or disabled ({_first_line(str(err))})"
            ) from None
        except HfHubHTTPError as err:
            code = getattr(getattr(err, "response", None), "status_code", 0) or 0
            if code >= 500 or code == 429 or code == 0:
                raise Unreachable(_first_line(str(err))) from None
            raise Gone(f"{hf.repo}: {_first_line(str(err))}") from None
        except Exception as err:  # connection, timeout, offline mode: httpx/requests types vary by version
            raise Unreachable(f"{type(err).__name__}: {_first_line(str(err))}") from None

    info = hosts.call(api.endpoint or constants.ENDPOINT, lookup, f"{hf.repo}@{hf.revision or 'main'}")
    now = info.sha
    if hf.file and info.siblings is not None and hf.file not in {s.rfilename for s in info.siblings}:
        raise Gone(f"{hf.repo}: no file {hf.file} at revision {now or hf.revision}")
    if hf.revision is None:
        return PinResult(
            pin,
            "ok",
            now,
            f"nothing pinned: the default branch is at {now}; `{invocation.command('fetch-model')}` "
            "pins the commit it downloads",
        )
    if now and now != hf.revision:
        return PinResult(pin, "moved", now, f"revision {hf.revision} resolves to {now}")
    return PinResult(pin, "ok", now, "revision exists" + (f", {hf.file} in it" if hf.file else ""))


# ------------------------------------------------------------------------------------------ output


def broken(results: list[PinResult]) -> bool:
    """True when any pin moved or is missing (`toolkit pins` then exits 10)."""
    return any(r.status in BROKEN for r in results)


def counts(results: list[PinResult]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in STATUSES}


def _short(text: str | None) -> str:
    """`text` with each digest shortened to 12 hex, but inside a command (a code span): it is pasted."""
    return re.sub(r"(`[^`]*`)|(sha256:[0-9a-f]{12})[0-9a-f]{52}", lambda m: m[1] or f"{m[2]}…", text or "")


def format_pins(results: list[PinResult]) -> str:
    """The table (status, kind, pin, where, detail; digests shortened to 12 hex) and a count line."""
    rows = [
        (r.status, r.pin.kind, _short(r.pin.ref), "; ".join(r.pin.where), _short(r.reason)) for r in results
    ]
    c = counts(results)
    line = f"{len(results)} pins: " + ", ".join(f"{c[s]} {s}" for s in STATUSES if c[s] or s != "unchecked")
    if c["unreachable"]:
        line += " (unreachable = not checked: no answer from where it lives; run again where it is reachable)"
    if c["unchecked"]:
        line += " (unchecked = not checked here: this host cannot look them up; each row says where to)"
    if broken(results):
        line += "; exit 10: a pin moved or is missing"
    table = (
        tabulate(
            rows,
            headers=["status", "kind", "pin", "where", "detail"],
            tablefmt="github",
            disable_numparse=True,
        )
        if rows
        else "no pins in the matrix"
    )
    return table + "\n\n" + line


def pins_json(results: list[PinResult]) -> dict[str, Any]:
    """{"pins": [PinResult.as_json()], "counts": {status: n}, "broken": bool}."""
    return {"pins": [r.as_json() for r in results], "counts": counts(results), "broken": broken(results)}
