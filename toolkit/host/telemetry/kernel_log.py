"""The kernel log around a run (shared/reference/gpu-telemetry.md §3): amdgpu's trouble messages from
/dev/kmsg or the journal."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolkit.core import jsonsafe
from toolkit.host.telemetry.readers import read_text

# Stable parts of amdgpu's trouble messages (§3; example lines from pop-os/cosmic-comp#2626,
# cosmic-epoch#3764, ROCm#5724, #6273, #2804, #2766, #6018, ValveSoftware/SteamOS#2802).
KERNEL_LOG_PATTERNS: dict[str, re.Pattern[str]] = {
    "ring_timeout": re.compile(r"ring (\S+) timeout, signaled seq=(\d+), emitted seq=(\d+)"),
    "ring_reset": re.compile(r"ring (\S+) reset", re.I),
    "gpu_reset": re.compile(
        r"GPU reset begin|GPU reset\(\d+\) succeeded|GPU reset succeeded|(MODE1|MODE2|BACO) reset"
    ),
    "vram_lost": re.compile(r"VRAM is lost"),
    "mes_failure": re.compile(
        r"MES failed to respond to msg=(\w+)|MES might be in unrecoverable state"
        r"|failed to remove hardware queue from MES|Failed to evict process queues"
    ),
    "page_fault": re.compile(r"\[(?:gfx|mm)hub\d*\] (?:no-retry )?page fault"),
    "devcoredump": re.compile(r"device coredump"),
}


def match_kernel_line(text: str) -> list[str]:
    """Kinds of §3 trouble a kernel-log line shows (empty list: none)."""
    return [kind for kind, rx in KERNEL_LOG_PATTERNS.items() if rx.search(text)]


class KernelLog:
    """Kernel messages of a run, without root where the host allows it (§3). Create it at run
    start: it records t0 and opens /dev/kmsg non-blocking at its end (only records written after
    that are read). `read()` at the end returns what was seen:

        {"source": "kmsg" | "journal" | "unreadable", "why_unreadable": str | None,
         "t0", "t1", "events": [{"kind", "text", "t"}], "counts": {kind: n},
         "records_lost": int, "lines_scanned": int,
         "verdict": "events-seen" | "none-seen" | "unreadable"}

    When /dev/kmsg cannot be opened (kernel.dmesg_restrict=1 without CAP_SYSLOG), it runs
    `journalctl -k -o json --since @t0-1 --until @t1+1` (members of systemd-journal/adm/wheel).
    Neither readable -> "unreadable", never "healthy": and "none-seen" means no message, not a
    healthy GPU (ROCm#6630: an R9700 hang logged nothing for eight minutes). Roots are parameters."""

    def __init__(
        self,
        kmsg_path: str | Path = "/dev/kmsg",
        *,
        journalctl: Sequence[str] | None = None,
        proc: str | Path = "/proc",
    ) -> None:
        self.t0 = time.time()
        self.kmsg_path = Path(kmsg_path)
        self.journalctl = list(journalctl) if journalctl else None
        self.proc = Path(proc)
        self._fd: int | None = None
        self._kmsg_error: str | None = None
        try:
            self._fd = os.open(self.kmsg_path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self._fd, 0, os.SEEK_END)  # Documentation/ABI/testing/dev-kmsg: skip old records
        except OSError as e:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._kmsg_error = f"{self.kmsg_path}: {e.strerror or e}"

    def read(self) -> dict[str, Any]:
        """Read what was logged since construction (fields in the class docstring); closes kmsg."""
        t1 = time.time()
        result: dict[str, Any] = {
            "source": "unreadable",
            "why_unreadable": None,
            "t0": self.t0,
            "t1": t1,
            "events": [],
            "counts": {},
            "records_lost": 0,
            "lines_scanned": 0,
        }
        lines: list[tuple[float | None, str]] | None = None
        if self._fd is not None:
            lines, lost, error = self._read_kmsg()
            if error is None:
                result.update(source="kmsg", records_lost=lost)
            else:  # opened but not readable (EPERM at read time in some containers): try the journal
                self._kmsg_error, lines = error, None
        if lines is None:
            lines, why = self._read_journal(t1)
            if lines is not None:
                result["source"] = "journal"
            else:
                restrict = read_text(self.proc / "sys" / "kernel" / "dmesg_restrict")
                result["why_unreadable"] = f"{self._kmsg_error} (dmesg_restrict={restrict}); journal: {why}"
        for t, text in lines or []:
            result["lines_scanned"] += 1
            for kind in match_kernel_line(text):
                result["events"].append({"kind": kind, "text": text, "t": t})
                result["counts"][kind] = result["counts"].get(kind, 0) + 1
        if result["source"] == "unreadable":
            result["verdict"] = "unreadable"
        else:
            result["verdict"] = "events-seen" if result["events"] else "none-seen"
        return result

    def _read_kmsg(self) -> tuple[list[tuple[float | None, str]], int, str | None]:
        """Records `prio,seq,usec,flags;text` (+ ` KEY=value` lines); EPIPE = records overwritten;
        a gap in seq = records lost. Times: boot-relative µs turned to wall time (approximate).
        Returns (lines, records lost, error): an error other than EAGAIN/EPIPE ends the read, and
        with no record read it makes kmsg count as unreadable."""
        assert self._fd is not None
        boot_wall = time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)
        chunks: list[bytes] = []
        lost = 0
        error: str | None = None
        try:
            while True:
                try:
                    data = os.read(self._fd, 8192)
                except BlockingIOError:
                    break
                except OSError as e:
                    if e.errno == errno.EPIPE:
                        lost += 1
                        continue
                    error = f"{self.kmsg_path}: {e.strerror or e}"
                    break
                if not data:
                    break
                chunks.append(data)
        finally:
            os.close(self._fd)
            self._fd = None
        out: list[tuple[float | None, str]] = []
        prev_seq: int | None = None
        for raw in b"".join(chunks).decode("utf-8", "replace").splitlines():
            if raw.startswith(" ") or ";" not in raw:
                continue  # continuation KEY=value lines
            head, _, text = raw.partition(";")
            parts = head.split(",")
            t: float | None = None
            with contextlib.suppress(IndexError, ValueError):
                seq = int(parts[1])
                t = boot_wall + int(parts[2]) / 1e6
                if prev_seq is not None and seq > prev_seq + 1:
                    lost += seq - prev_seq - 1
                prev_seq = seq
            out.append((t, text))
        return out, lost, (error if not out else None)

    def _read_journal(self, t1: float) -> tuple[list[tuple[float | None, str]] | None, str]:
        cmd = self.journalctl or ([shutil.which("journalctl") or ""] if shutil.which("journalctl") else [])
        if not cmd:
            return None, "journalctl not found"
        args = [
            *cmd,
            "-k",
            "-o",
            "json",
            "--no-pager",
            f"--since=@{int(self.t0) - 1}",
            f"--until=@{int(t1) + 2}",
        ]
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, str(e)
        # journalctl(1): without a journal-reading group it shows only the user's own journal and
        # says so on stderr; that is not a read of the kernel log.
        if done.returncode != 0 or re.search(r"insufficient permissions|not seeing messages", done.stderr):
            return None, (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        out: list[tuple[float | None, str]] = []
        for line in done.stdout.splitlines():
            entry, _why = jsonsafe.parse_line(line)
            if entry is None:
                continue
            msg = entry.get("MESSAGE")
            if isinstance(msg, list):  # non-UTF-8 messages come as byte arrays
                msg = bytes(msg).decode("utf-8", "replace")
            try:
                t = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
            except (KeyError, ValueError, TypeError):
                t = None
            out.append((t, str(msg or "")))
        return out, ""

    def close(self) -> None:
        """Close /dev/kmsg without reading (read() closes it too)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
