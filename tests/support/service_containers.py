"""Throwaway service containers for the e2e tests, through testcontainers, working where no registry is
reachable: every image is built here from tests/containers/<name>/ on the local debian:trixie-slim
(Debian packages only; the engine's build cache makes a rebuild a no-op).

- The reaper: testcontainers' Ryuk image cannot be pulled offline, so `testcontainers_config.ryuk_image`
  (environment RYUK_CONTAINER_IMAGE) names a Ryuk-compatible reaper built from
  tests/containers/reaper/ (protocol and sources in reaper.py). The library's reaper code path is
  unchanged: the first container a process starts starts the reaper, and when the process ends,
  killed or not, the reaper removes every container of its session.
- The loopback registry (`LoopbackRegistry`, the `registry` fixture of tests/conftest.py): Debian's
  docker-registry (distribution 2.8), manifest deletes enabled, published on 127.0.0.1 only, at a
  port the engine picks. The engine treats 127.0.0.0/8 registries as insecure (plain HTTP) by default,
  so `docker push 127.0.0.1:<port>/...` needs no daemon configuration.
"""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

import docker.errors

CONTAINERS = Path(__file__).parents[1] / "containers"
REAPER_IMAGE = "toolkit-test/reaper:local"
REGISTRY_IMAGE = "toolkit-test/registry:local"

# Before testcontainers reads its configuration (the environment, at import): child processes that
# start containers (tests/test_service_containers.py) inherit it.
os.environ["RYUK_CONTAINER_IMAGE"] = REAPER_IMAGE

from testcontainers.core.config import ConnectionMode, testcontainers_config  # noqa: E402
from testcontainers.core.container import DockerContainer  # noqa: E402
from testcontainers.core.image import DockerImage  # noqa: E402

testcontainers_config.ryuk_image = REAPER_IMAGE  # also where testcontainers was imported first
# Reach containers at their network's gateway (this host's docker0 address), where the engine's iptables
# forward a published port straight to the container and refuse it until the service listens. At
# 127.0.0.1 the engine's userland proxy accepts at once and drops the connection when the service is
# not up yet: the reaper, started without waiting (testcontainers 4.15's Reaper sets its log wait
# after start), would then lose its session's filter and never reap. The registry is the exception:
# it listens on 127.0.0.1 only (LoopbackRegistry waits for it there).
testcontainers_config.connection_mode_override = ConnectionMode.gateway_ip
_built: set[str] = set()


def build_image(tag: str) -> str:
    """Build tests/containers/<name>/ (name: the tag's last path part before `:`) as `tag`, once a
    process; kept afterwards (not labelled with the session, so no reaper removes it)."""
    if tag not in _built:
        name = tag.split("/")[-1].split(":")[0]
        DockerImage(path=CONTAINERS / name, tag=tag, clean_up=False, rm=True).build()
        _built.add(tag)
    return tag


def service(tag: str) -> DockerContainer:
    """A DockerContainer of one of tests/containers/ (built first, with the reaper's image, which the
    library starts on the first container of a process)."""
    build_image(REAPER_IMAGE)
    return DockerContainer(build_image(tag))


class LoopbackRegistry:
    """Debian's docker-registry in a container at 127.0.0.1:<port> (`host`), manifest deletes enabled.
    Storage lives in the container and goes with it. `images`: local image IDs a test made for this
    registry, removed (by ID) when it stops."""

    def __init__(self) -> None:
        self.container = service(REGISTRY_IMAGE)
        self.container.ports["5000/tcp"] = ("127.0.0.1",)  # loopback only, any free port (docker-py form)
        self.container.__enter__()  # start; on a failed start, remove the container
        self.images: list[str] = []
        self._stopped = False
        try:
            self.port = int(self.container.get_exposed_port(5000))
            self.host = f"127.0.0.1:{self.port}"
            end = time.monotonic() + 30
            while not self._up():
                if time.monotonic() > end:
                    logs = b"".join(self.container.get_logs()).decode(errors="replace")
                    raise TimeoutError(f"docker-registry on {self.host} not ready after 30 s:\n{logs}")
                time.sleep(0.3)
        except BaseException:
            self.stop()
            raise

    def _up(self) -> bool:
        try:
            return urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2).status == 200
        except OSError:  # refused, or reset by the engine's proxy before the registry listens
            return False

    def delete_manifest(self, repo: str, digest: str) -> int:
        """DELETE /v2/<repo>/manifests/<digest>: the HTTP status (202 when deleted)."""
        req = urllib.request.Request(f"http://{self.host}/v2/{repo}/manifests/{digest}", method="DELETE")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status

    def stop(self) -> None:
        """Remove the images in `images` and the container (its port then refuses connections)."""
        if self._stopped:
            return
        self._stopped = True
        client = self.container.get_docker_client().client
        for image_id in dict.fromkeys(self.images):
            try:
                client.images.remove(image_id, force=True)
            except docker.errors.ImageNotFound:
                pass
        self.container.stop()

    def __enter__(self) -> LoopbackRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
