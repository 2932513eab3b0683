"""Engine sockets of the tests that make an engine hang: real Unix sockets the docker SDK talks HTTP to
(not mocks), and the toolkit entry point that runs with short engine timeouts."""

from __future__ import annotations

import socket
import threading
from pathlib import Path


class Hung:
    """A Unix socket that takes connections and never answers (a hung dockerd, a dead proxy); with
    `upstream`, a proxy to that engine socket that forwards until `freeze` is set, then neither way
    (an engine that hangs mid-run). Not a mock: a real socket the SDK talks HTTP to."""

    def __init__(self, path: Path, upstream: str | None = None):
        self.path, self.upstream = path, upstream
        self.freeze, self.started = threading.Event(), threading.Event()
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
