"""Engine sockets of the tests that make an engine hang: real Unix sockets the docker SDK talks HTTP to
(not mocks), and the toolkit entry point that runs with short engine timeouts."""

from __future__ import annotations

import socket
import threading
from pathlib import Path


class Hung:
    """A Unix socket that takes connections and never answers (a hung dockerd, a dead proxy); with
    `upstream`, a proxy to that engine socket that forwards until `freeze` is set, then neither way
    (an engine that hangs mid-run); `seen` is set once the engine's answers carried `marker`. Not a
    mock: a real socket the SDK talks HTTP to."""

    def __init__(self, path: Path, upstream: str | None = None, marker: bytes | None = None):
        self.path, self.upstream, self.marker = path, upstream, marker
        self.freeze, self.started, self.seen = threading.Event(), threading.Event(), threading.Event()
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen(64)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            if self.upstream:
                up = socket.socket(socket.AF_UNIX)
                up.connect(self.upstream)
                self.held.append(up)
                threading.Thread(target=self._pipe, args=(conn, up, True), daemon=True).start()
                threading.Thread(target=self._pipe, args=(up, conn, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, asks: bool) -> None:
        try:
            while data := src.recv(65536):
                if asks and b"/start" in data:
                    self.started.set()
                if not asks and self.marker and self.marker in data:
                    self.seen.set()
                if self.freeze.is_set():
                    return  # the data is dropped, the connection kept open: no answer, no end
                dst.sendall(data)
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


SHORT = (
    "import sys; from toolkit.engine import choice, containers; "
    "choice.REQUEST_TIMEOUT_S = 2; containers.ENGINE_GRACE_S = 2; "
    "from toolkit.cli.main import main; sys.argv = ['toolkit', *sys.argv[1:]]; main()"
)
"""`python -c SHORT ARGS...`: the toolkit CLI with REQUEST_TIMEOUT_S and ENGINE_GRACE_S of 2 s."""


LINE = "toolkit-hung-42"
"""What frozen_run's container prints: `echo toolkit-hung-$((6*7))`, so no other answer of the engine
carries it (the container's inspect data holds its command, which would name a word echoed as is)."""


def frozen_run(
    tmp_path: Path, *, request_s: float, grace_s: float, timeout_s: float, freeze_after: float, wait_s: float
) -> str:
    """What a child process printed that ran one container (debian:trixie-slim: `echo LINE; sleep 60`, named
    toolkit-test-hung-<hex>, removed after) through toolkit.engine.containers.run_container with the
    run's `timeout_s`, choice.REQUEST_TIMEOUT_S `request_s` and containers.ENGINE_GRACE_S `grace_s`,
    against this host's Docker engine behind a Hung proxy that stops forwarding `freeze_after` s after
    the container's LINE reached the toolkit (not after its start: on a loaded fresh host the line
    took longer than 0.5 s, and the run was lost with nothing printed yet):
    `lost <its stdout> <seconds from the call>` where the run ended as EngineLost.
    Raises subprocess.TimeoutExpired (the child killed) where it ran past `wait_s`."""
    import os
    import subprocess
    import sys
    import uuid

    from tests.support.project import ROOT

    hung = Hung(tmp_path / "proxy.sock", upstream="/var/run/docker.sock", marker=LINE.encode())
    name = f"toolkit-test-hung-{uuid.uuid4().hex[:8]}"
    code = (
        "import time; t = time.monotonic()\n"
        f"from toolkit.engine import choice, containers as c; choice.REQUEST_TIMEOUT_S = {request_s}; "
        f"c.ENGINE_GRACE_S = {grace_s}\n"
        "try:\n"
        f"    c.run_container(c.RunSpec(image='debian:trixie-slim', name={name!r}, "
        "command=['sh', '-c', 'echo toolkit-hung-$((6*7)); sleep 60']), "
        f"timeout={timeout_s})\n"
        "except c.EngineLost as e:\n"
        "    print('lost', e.outcome.stdout.strip(), round(time.monotonic() - t, 1))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DOCKER_HOST": f"unix://{hung.path}",
        "TOOLKIT_ENGINE": "docker",
    }
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert hung.started.wait(60), "the container never started"
        assert hung.seen.wait(60), "the container's line never reached the toolkit"
        threading.Timer(freeze_after, hung.freeze.set).start()
        out, _ = proc.communicate(timeout=wait_s)
        return out
    finally:
        proc.kill()
        hung.close()
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
