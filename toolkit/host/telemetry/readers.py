"""Small sysfs/procfs readers that never raise (None when a file is absent, unreadable or malformed),
and the Source protocol every telemetry source implements."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
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


READ_TIMEOUT_S = 2.0
"""The longest one sensor read may take (a sysfs read is microseconds; NVML's slowest call ~4 ms): a
read still blocked after this (a wedged GPU's sysfs file, a hung driver call) drops its source."""


class ReadTimeout(TimeoutError):
    """A sensor read did not return within its time box (timeboxed)."""


def timeboxed(fn: Callable[[], Any], timeout_s: float = READ_TIMEOUT_S, what: str = "a sensor read") -> Any:
    """fn() run on a daemon thread and awaited at most `timeout_s` seconds: its result, or its exception
    re-raised; ReadTimeout when it has not returned (the thread is left blocked in the kernel, where
    no Python code can interrupt it, and never joined: it cannot hold the process at exit)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # handed to the caller
            box["error"] = err
        finally:
            done.set()

    threading.Thread(target=run, name="telemetry-read", daemon=True).start()
    if not done.wait(timeout_s):
        raise ReadTimeout(f"{what} did not return within {timeout_s:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


STEP_PROBE_S = 0.5
"""Seconds each sensor is polled to measure its update period (update_period)."""


def update_period(
    read: Callable[[], float | None], duration_s: float = STEP_PROBE_S, interval_s: float = 0.002
) -> float | None:
    """Seconds between a sensor's updates, measured: `read` polled every `interval_s` for `duration_s`,
    the median gap between the moments its value changed. None when it changed fewer than 3 times
    (it updates slower than duration_s / 2, stands still, or fails to read). NVML's total-energy
    counter steps every ~100 ms on an H200 (issue 31); a reading finer than `interval_s` gives about
    `interval_s`."""
    end = time.monotonic() + duration_s
    last, changes = read(), []
    while time.monotonic() < end:
        time.sleep(interval_s)
        v = read()
        if v is not None and v != last:
            changes.append(time.monotonic())
            last = v
    gaps = [b - a for a, b in zip(changes, changes[1:], strict=False)]
    return statistics.median(gaps) if len(gaps) >= 2 else None


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
