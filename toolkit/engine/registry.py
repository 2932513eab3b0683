"""Registries: tag, push, pull, untag, and a reference's digest (the engine's, or the registry's
manifest through the docker SDK / `docker buildx imagetools`)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolkit.core import jsonsafe
from toolkit.engine.choice import client, engine_label, is_podman


@dataclass
class TransferOutcome:
    """One push or pull: `digest` is the registry manifest digest (sha256:...), seconds of wall time."""

    ok: bool
    ref: str
    seconds: float
    digest: str | None = None
    size: int | None = None
    error: str | None = None


def _registry_hint(error: str, ref: str) -> str:
    """`error` of a push or pull of `ref`, with what to do for a refused login, an unreachable registry
    or an HTTP-only one, said for the engine in use (Docker's daemon.json, Podman's registries.conf)."""
    registry = ref.split("/", 1)[0]
    low = error.lower()
    if "unauthorized" in low or "authentication required" in low or "denied" in low:
        return f"{error} (log in once with `docker login {registry}`; the toolkit reads the Docker credential store)"
    if "connection refused" in low or "no such host" in low or "timeout" in low:
        return f"{error} (is the registry {registry} running and reachable from the engine in use, {engine_label()}?)"
    if "http response to https client" in low:
        return f"{error} (the engine talks HTTPS to {registry}; " + (
            "Podman does so to every registry, loopback too: mark it `insecure = true` in a [[registry]] "
            "entry of registries.conf (/etc/containers/, rootless ~/.config/containers/), or give it TLS)"
            if is_podman()
            else "loopback registries are plain HTTP-capable, other hosts need `insecure-registries` in "
            "daemon.json or TLS)"
        )
    return error


def tag_image(image: str, repository: str, tag: str) -> str | None:
    """`docker tag IMAGE REPOSITORY:TAG` (IMAGE is a ref or an image ID); returns None or the error."""
    from docker.errors import APIError

    try:
        client().api.tag(image, repository, tag)
    except APIError as err:
        return f"could not tag {image} as {repository}:{tag}: {err.explanation or err}"
    return None


def _stream(items, on_line: Callable[[str], None] | None) -> tuple[dict[str, Any], str | None]:
    """Drain a decoded push/pull progress stream; returns (last aux object, error message or None)."""
    aux: dict[str, Any] = {}
    error = None
    for item in items:
        if "error" in item:
            error = str(item.get("errorDetail", {}).get("message") or item["error"])
        if "aux" in item and isinstance(item["aux"], dict):
            aux = item["aux"]
        if on_line and item.get("status") and "progress" not in item:
            on_line(" ".join(str(x) for x in (item.get("id"), item["status"]) if x))
    return aux, error


def push_image(repository: str, tag: str, *, on_line: Callable[[str], None] | None = None) -> TransferOutcome:
    """`docker push REPOSITORY:TAG` through the SDK; never raises for a registry error."""
    from docker.errors import APIError

    ref = f"{repository}:{tag}"
    t0 = time.monotonic()
    try:
        aux, error = _stream(client().api.push(repository, tag=tag, stream=True, decode=True), on_line)
    except APIError as err:
        aux, error = {}, str(err.explanation or err)
    seconds = time.monotonic() - t0
    if error:
        return TransferOutcome(False, ref, seconds, error=_registry_hint(error, ref))
    return TransferOutcome(True, ref, seconds, digest=aux.get("Digest"), size=aux.get("Size"))


def pullable_digests(repo_digests: list[str]) -> list[str]:
    """The references among an image's RepoDigests that a registry serves by digest
    (`REGISTRY/NAME@sha256:...`), in order. Podman names every image it built or loaded
    `localhost/NAME@sha256:...` (its local store's own name: no registry behind it, nothing anyone
    else can pull), so a domain of exactly `localhost` is left out; `localhost:5000/...` (a registry
    on this host) is kept."""
    return [r for r in repo_digests if "@sha256:" in r and r.split("/", 1)[0] != "localhost"]


def registry_digest(ref: str) -> str | None:
    """The manifest digest the registry serves for `ref` now (distribution inspect), or None."""
    from docker.errors import APIError, NotFound

    try:
        return client().images.get_registry_data(ref).id
    except (APIError, NotFound):
        return None


def pull_image(ref: str, *, on_line: Callable[[str], None] | None = None) -> TransferOutcome:
    """`docker pull REF` (REF may be repository@sha256:...); never raises for a registry error."""
    from docker.errors import APIError
    from docker.utils import parse_repository_tag

    repository, tag = parse_repository_tag(ref)
    t0 = time.monotonic()
    try:
        _, error = _stream(
            client().api.pull(repository, tag=tag or "latest", stream=True, decode=True), on_line
        )
    except APIError as err:
        error = str(err.explanation or err)
    seconds = time.monotonic() - t0
    if error:
        return TransferOutcome(False, ref, seconds, error=_registry_hint(error, ref))
    return TransferOutcome(True, ref, seconds, digest=tag if tag and tag.startswith("sha256:") else None)


class RegistryLookupError(Exception):
    """A registry lookup through the engine failed. `kind`: "not-found" (the engine's 404),
    "refused" (any other engine API error; `message` is its full explanation), "no-answer" (the
    request to the engine timed out or the connection failed)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


def registry_manifest_digest(docker_client, ref: str) -> str:
    """The manifest digest ("sha256:...") the registry serves for `ref`, by the engine's distribution
    inspect (what `docker pull` resolves, with the engine's credentials). Raises RegistryLookupError."""
    import requests
    from docker.errors import APIError, NotFound

    try:
        return docker_client.images.get_registry_data(ref).id
    except NotFound as err:
        raise RegistryLookupError("not-found", str(err.explanation or err)) from None
    except APIError as err:
        raise RegistryLookupError("refused", str(err.explanation or err)) from None
    except requests.RequestException as err:
        raise RegistryLookupError("no-answer", str(err)) from None


def raw_manifest(ref: str, *, timeout: float) -> dict[str, Any]:
    """The raw manifest (or manifest list) JSON a registry serves for `ref`, through
    `docker buildx imagetools inspect --raw`; {} when it cannot be read (no buildx, no answer within
    `timeout` seconds, not JSON)."""

    try:
        proc = subprocess.run(
            ["docker", "buildx", "imagetools", "inspect", "--raw", ref],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        raw = jsonsafe.parse(proc.stdout) if proc.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, jsonsafe.JsonProblem):
        return {}
    return raw if isinstance(raw, dict) else {}
