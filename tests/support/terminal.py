"""A pseudo-terminal's output, read to the end (tests of what a command prints on a terminal)."""

from __future__ import annotations

import os


def drain(leader: int) -> str:
    """Everything written to the pty whose leader fd is `leader` until its follower is closed by the child
    (EIO or EOF), decoded, CRLF as LF; closes `leader`."""
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
