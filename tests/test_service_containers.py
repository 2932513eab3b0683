"""testcontainers' reaper where no registry is reachable: the Ryuk-compatible reaper image built here
(tests/containers/reaper/, configured by tests/support/service_containers.py) started by the library's own
reaper code. A child process starts a container and is killed (SIGKILL: no atexit, no fixture
teardown); the reaper then removes that container and itself. Nothing is mocked.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import docker
import docker.errors
import pytest

from tests.support.e2e_helpers import engine_or_skip
from tests.support.project import ROOT
from tests.support.service_containers import REAPER_IMAGE

pytestmark = pytest.mark.e2e

CHILD = """
import time
from tests.support.service_containers import REGISTRY_IMAGE, service

c = service(REGISTRY_IMAGE).start()  # any image that keeps running
print(c.get_container_id(), flush=True)
time.sleep(600)
"""


def _gone(client: docker.DockerClient, name_or_id: str, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            client.containers.get(name_or_id)
        except docker.errors.NotFound:
            return True
        time.sleep(0.5)
    return False


def test_the_reaper_removes_the_containers_of_a_killed_process():
    engine_or_skip()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RYUK_RECONNECTION_TIMEOUT": "2s"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    client = docker.from_env()
    session = None
    try:
        assert child.stdout is not None
        cid = child.stdout.readline().strip()
        assert cid, f"the child started no container (exit {child.poll()})"
        container = client.containers.get(cid)
        assert container.status == "running"
        session = container.labels["org.testcontainers.session-id"]
        reaper = client.containers.get(f"testcontainers-ryuk-{session}")
        assert reaper.image.tags == [REAPER_IMAGE] and reaper.status == "running"

        # A second client, as moby-ryuk sees them: each filter line is acknowledged, and the reaper
        # waits for the last connection to close.
        port = int(reaper.ports["8080/tcp"][0]["HostPort"])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"label=org.toolkit.test=reaper-ack\n")
            assert conn.recv(16) == b"ACK\n"
            child.kill()
            child.wait(timeout=30)
            time.sleep(4)  # past RYUK_RECONNECTION_TIMEOUT: this connection still holds the session
            client.containers.get(cid)
        started = time.monotonic()
        assert _gone(client, cid, 30), "the reaper did not remove the killed process's container"
        print(f"container removed {time.monotonic() - started:.1f} s after the last connection closed")
        assert _gone(client, reaper.id, 30), "the reaper did not exit (it runs with auto_remove)"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if session:  # left only when the test failed: what the reaper should have removed
            label = f"org.testcontainers.session-id={session}"
            for c in client.containers.list(all=True, filters={"label": label}):
                c.remove(force=True)
