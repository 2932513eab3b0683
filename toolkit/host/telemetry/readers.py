"""Small sysfs/procfs readers that never raise (None when a file is absent, unreadable or malformed),
and the Source protocol every telemetry source implements."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol


def read_text(path: Path | str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(65536).decode("utf-8", "replace").strip()
    except OSError:
        return None


def read_int(path: Path | str) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def scaled(value: int | None, divisor: float) -> float | None:
    return None if value is None else value / divisor


class OpenFiles:
    """Files read at every tick, kept open and re-read with pread at offset 0: procfs and sysfs
    (seq_file / kernfs) regenerate a file's content on a read from offset 0. On this project's VM a
    cold open+read+close of a /proc file cost ~120 µs of CPU and a pread ~30-50 µs
    (benchmarks/telemetry_overhead.py). A path that does not exist is not retried; a read error
    closes the file so the next read reopens it."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self._missing: set[str] = set()

    def read(self, path: Path | str) -> bytes | None:
        key = str(path)
        fd = self._fds.get(key)
        if fd is None:
            if key in self._missing:
                return None
            try:
                fd = os.open(key, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                self._missing.add(key)
                return None
            except OSError:
                return None
            self._fds[key] = fd
        try:
            return os.pread(fd, 65536, 0)
        except OSError:  # EBUSY / EPERM from a suspended card, ENODEV after hot-unplug
            os.close(self._fds.pop(key))
            return None

    def text(self, path: Path | str) -> str | None:
        data = self.read(path)
        return None if data is None else data.decode("utf-8", "replace").strip()

    def int(self, path: Path | str) -> int | None:
        text = self.text(path)
        try:
            return None if text is None else int(text, 0)
        except ValueError:
            return None

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class Source(Protocol):
    """What the Sampler needs from a source: an `id` and `read()` of one sample (a flat dict). A source
    with `reads_counter_on_edges = True` also takes `read(edge=True)` (NvmlGpuSource)."""

    id: str

    def read(self) -> dict[str, Any]: ...
