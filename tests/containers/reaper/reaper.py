"""A Ryuk-compatible reaper: removes a test session's containers, networks, volumes and images once the
session's process is gone, however it ended (killed included).

testcontainers starts its reaper from the image `testcontainers_config.ryuk_image` (environment
RYUK_CONTAINER_IMAGE, default testcontainers/ryuk, which cannot be pulled without a registry);
tests/support/service_containers.py points that setting at this script's image, so the library's own reaper
code path runs unchanged. The protocol, as read in testcontainers-python 4.15
(testcontainers/core/container.py, `Reaper._create_instance`; labels in testcontainers/core/labels.py)
and in the server it talks to, testcontainers/moby-ryuk (reaper.go):

- the library runs this image with the engine's socket at /var/run/docker.sock, port 8080 published,
  `auto_remove`, and RYUK_RECONNECTION_TIMEOUT in the environment; it waits for a log line matching
  `.* Started!`, then connects over TCP;
- the client sends filters, one a line, each a URL query of Docker list filters:
  `label=org.testcontainers.session-id=<session>`; the reaper answers each line with `ACK\\n` (the
  Python client does not read it; other clients do);
- the client holds the connection for the life of its session. When the last connection closes and
  no new one arrives within RYUK_RECONNECTION_TIMEOUT (default 10s), or none ever arrives within
  RYUK_CONNECTION_TIMEOUT (default 60s), or on SIGTERM/SIGINT (the library stops the reaper at exit),
  the reaper removes whatever matches any filter received: containers (forced, with their anonymous
  volumes), then networks, volumes and images; then it exits. Containers labelled
  org.testcontainers.ryuk=true (reapers) and this container itself are never removed.

Durations are Go's (`10s`, `500ms`, `1m30s`), as moby-ryuk reads them.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import threading
import time
from urllib.parse import parse_qsl

import docker
import docker.errors

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds(text: str) -> float:
    """A Go duration (`10s`, `1m30s`, `250ms`) in seconds; a bare number is seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def log(msg: str) -> None:
    print(f"reaper: {msg}", flush=True)


class Reaper:
    """The reaper's state: filters received, connected clients, and when to prune."""

    def __init__(self, connection_timeout: float, reconnection_timeout: float) -> None:
        self.filters: list[dict[str, list[str]]] = []
        self.clients = 0
        self.reconnection_timeout = reconnection_timeout
        self.deadline = time.monotonic() + connection_timeout
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stopping = False

    def add_filter(self, line: str) -> None:
        """One line of the protocol: a URL query of Docker list filters."""
        query: dict[str, list[str]] = {}
        for key, value in parse_qsl(line, keep_blank_values=True, strict_parsing=True):
            query.setdefault(key, []).append(value)
        with self.lock:
            if query not in self.filters:
                self.filters.append(query)
        log(f"filter {query}")

    def serve(self, conn: socket.socket) -> None:
        """Read filters from one client until it disconnects, acknowledging each."""
        with self.lock:
            self.clients += 1
        self.wake.set()
        try:
            with conn, conn.makefile("rb") as lines:
                for raw in lines:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line:
                        continue
                    try:
                        self.add_filter(line)
                    except ValueError as exc:
                        log(f"bad filter {line!r}: {exc}")
                    conn.sendall(b"ACK\n")
        except OSError as exc:
            log(f"client: {exc}")
        finally:
            with self.lock:
                self.clients -= 1
                if self.clients == 0:
                    self.deadline = time.monotonic() + self.reconnection_timeout
            self.wake.set()

    def stop(self, signum: int, _frame: object) -> None:
        log(f"signal {signum}")
        self.stopping = True
        self.wake.set()

    def wait(self) -> None:
        """Block until a prune condition holds (see the module docstring)."""
        while True:
            self.wake.clear()
            with self.lock:
                left = None if self.clients else self.deadline - time.monotonic()
            if self.stopping or (left is not None and left <= 0):
                return
            self.wake.wait(left)

    def prune(self, client: docker.DockerClient) -> None:
        """Remove what matches any filter: containers first (they hold networks, volumes, images)."""
        me = socket.gethostname()
        for flt in self.filters:
            for c in client.containers.list(all=True, filters=flt):
                if c.labels.get("org.testcontainers.ryuk") == "true" or c.id.startswith(me):
                    continue
                _remove(f"container {c.short_id} {c.name}", lambda c=c: c.remove(force=True, v=True))
            for n in client.networks.list(filters=flt):
                _remove(f"network {n.name}", n.remove)
            for v in client.volumes.list(filters=flt):
                _remove(f"volume {v.name}", lambda v=v: v.remove(force=True))
            for i in client.images.list(filters=flt):
                _remove(f"image {i.short_id}", lambda i=i: client.images.remove(i.id))


def _remove(what: str, remove) -> None:
    try:
        remove()
        log(f"removed {what}")
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        log(f"could not remove {what}: {exc}")


def main() -> int:
    reaper = Reaper(
        seconds(os.environ.get("RYUK_CONNECTION_TIMEOUT", "60s")),
        seconds(os.environ.get("RYUK_RECONNECTION_TIMEOUT", "10s")),
    )
    client = docker.from_env()
    client.ping()
    signal.signal(signal.SIGTERM, reaper.stop)
    signal.signal(signal.SIGINT, reaper.stop)
    listener = socket.create_server(("", int(os.environ.get("RYUK_PORT", "8080"))), backlog=16)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed: pruning has begun
            threading.Thread(target=reaper.serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    log("Started!")
    reaper.wait()
    listener.close()
    reaper.prune(client)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
