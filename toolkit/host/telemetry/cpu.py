"""Host telemetry: CPU load and pressure (/proc/loadavg, /proc/stat, /proc/pressure/cpu) and the
benchmark's own CPU seconds (its cgroup, or its process tree)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkit.host.telemetry.readers import OpenFiles


def _read(path: str) -> str | None:
    """The text of a /proc file (its first 64 KiB, stripped), None when it cannot be read: read_text
    without Python's file objects and paths, ~7 instead of ~30 µs of CPU a file here (the tree walk
    reads 2 + threads files per process at every 10-Hz tick)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 65536).decode("utf-8", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def cgroup_cpu_seconds(cgroup_dir: str | Path) -> float | None:
    """CPU seconds used so far by every process of a cgroup v2 group (a container's cgroup, e.g.
    /sys/fs/cgroup/system.slice/docker-<id>.scope): `usage_usec` of its `cpu.stat` / 1e6
    (docs.kernel.org/admin-guide/cgroup-v2.html, "cpu.stat"). None when the file cannot be read."""
    text = _read(f"{os.fspath(cgroup_dir)}/cpu.stat")
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            try:
                return int(value) / 1e6
            except ValueError:
                return None
    return None


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu_ticks(stat_text: str) -> tuple[int, int] | None:
    """(utime+stime+cutime+cstime, ppid) from /proc/<pid>/stat (proc_pid_stat(5): fields 14-17,
    after the `(comm)` that may hold spaces)."""
    rest = stat_text.rpartition(")")[2].split()
    try:
        ppid = int(rest[1])
        return int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14]), ppid
    except (IndexError, ValueError):
        return None


def _children(pid: int, proc: str) -> list[int] | None:
    """Child pids from /proc/<pid>/task/*/children (CONFIG_PROC_CHILDREN); None when unavailable."""
    out: list[int] = []
    task = f"{proc}/{pid}/task"
    try:
        tasks = os.listdir(task)
    except OSError:
        return [] if not os.path.exists(f"{proc}/{pid}") else None
    for tid in tasks:
        text = _read(f"{task}/{tid}/children")
        if text is None:
            return None
        out.extend(int(c) for c in text.split())
    return out


def process_tree_cpu_seconds(pid: int, proc: str | Path = "/proc") -> float | None:
    """CPU seconds used so far by process `pid` and all its descendants: utime+stime of each, plus
    cutime+cstime (children already reaped), from /proc/<pid>/stat in USER_HZ ticks
    (proc_pid_stat(5)). Descendants come from /proc/<pid>/task/*/children, or a scan of /proc when
    the kernel lacks that file. None when `pid` is gone."""
    root = os.fspath(proc)
    total = 0
    seen: set[int] = set()
    stack = [pid]
    scanned: dict[int, list[int]] | None = None
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        text = _read(f"{root}/{p}/stat")
        parsed = _proc_cpu_ticks(text) if text else None
        if parsed is None:
            if p == pid:
                return None
            continue
        total += parsed[0]
        kids = _children(p, root)
        if kids is None:
            if scanned is None:
                scanned = {}
                for entry in os.listdir(root):
                    if entry.isdigit():
                        t = _read(f"{root}/{entry}/stat")
                        got = _proc_cpu_ticks(t) if t else None
                        if got:
                            scanned.setdefault(got[1], []).append(int(entry))
            kids = scanned.get(p, [])
        stack.extend(kids)
    return total / _CLK_TCK


class HostSource:
    """Host CPU load, one sample per read (all files world-readable, §6):

    - `loadavg_1m/5m/15m` (/proc/loadavg: runnable + uninterruptible tasks), `cpus_online`;
    - cumulative counters for window deltas: `cpu_busy_s` (user+nice+system+irq+softirq over all
      CPUs, /proc/stat, USER_HZ), `cpu_total_s` (the first eight fields), `steal_s`, `psi_some_us`
      (/proc/pressure/cpu `some total=`; None when PSI is absent or off: not an error), `own_cpu_s`
      (what `own_cpu_seconds()` returns: the benchmark's cumulative CPU seconds; None without one),
      `harness_cpu_s` (the sampling process's own CPU seconds, all its threads; time.process_time);
    - rates since the previous read (None on the first): `busy_cores`, `own_cpu_cores`,
      `other_cpu_cores` = (busy − own − harness) / elapsed wall seconds, in cores (None without
      `own_cpu_seconds`), `steal_pct` (of all CPU time), `psi_some_pct` (% of wall time with some task
      waiting for a CPU).

    `own_cpu_seconds`: e.g. `lambda: cgroup_cpu_seconds(container_cgroup)` or `lambda:
    process_tree_cpu_seconds(pid)`; `harness_cpu_seconds`: this process's CPU seconds. Roots and both
    callables are parameters for tests. Its reads are not time-boxed (`reads_cannot_block`: the kernel answers
    /proc and cgroup counters from memory)."""

    reads_cannot_block = True

    def __init__(
        self,
        own_cpu_seconds: Callable[[], float | None] | None = None,
        *,
        proc: str | Path = "/proc",
        source_id: str = "host",
        harness_cpu_seconds: Callable[[], float] = time.process_time,
    ) -> None:
        self.id = source_id
        self._own = own_cpu_seconds
        self._harness = harness_cpu_seconds
        # the paths read at every tick, joined once (pathlib's joins were ~20 % of a tick's CPU)
        root = os.fspath(proc)
        self._stat, self._psi, self._loadavg = f"{root}/stat", f"{root}/pressure/cpu", f"{root}/loadavg"
        self._prev: dict[str, Any] | None = None
        self._files = OpenFiles()
        self._cpus: int | None = None
        self._cpus_read = -1e18

    def _cpu_line(self) -> tuple[float, float, float] | None:
        text = self._files.text(self._stat)
        if not text:
            return None
        first = text.split("\n", 1)[0].split()
        if not first or first[0] != "cpu":
            return None
        try:
            v = [int(x) for x in first[1:11]] + [0] * 10
        except ValueError:
            return None
        user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
        busy = user + nice + system + irq + softirq  # guest time is already inside user (proc_stat(5))
        total = busy + idle + iowait + steal
        return busy / _CLK_TCK, total / _CLK_TCK, steal / _CLK_TCK

    def _psi_some_us(self) -> int | None:
        text = self._files.text(self._psi)
        if not text:
            return None
        m = re.search(r"^some .*\btotal=(\d+)", text, re.M)
        return int(m.group(1)) if m else None

    def read(self) -> dict[str, Any]:
        """One host sample (fields in the class docstring)."""
        now = time.monotonic()
        if now - self._cpus_read > 5.0:  # sysconf reads /sys/devices/system/cpu/online: not every tick
            self._cpus, self._cpus_read = os.sysconf("SC_NPROCESSORS_ONLN"), now
        load = (self._files.text(self._loadavg) or "").split()
        cpu = self._cpu_line()
        own: float | None = None
        if self._own is not None:
            try:
                own = self._own()
            except Exception:  # a callable the integrator wrote must not stop sampling
                own = None
        sample: dict[str, Any] = {
            "loadavg_1m": float(load[0]) if len(load) > 2 else None,
            "loadavg_5m": float(load[1]) if len(load) > 2 else None,
            "loadavg_15m": float(load[2]) if len(load) > 2 else None,
            "cpus_online": self._cpus,
            "cpu_busy_s": cpu[0] if cpu else None,
            "cpu_total_s": cpu[1] if cpu else None,
            "steal_s": cpu[2] if cpu else None,
            "psi_some_us": self._psi_some_us(),
            "own_cpu_s": own,
            "harness_cpu_s": self._harness(),
            "busy_cores": None,
            "own_cpu_cores": None,
            "other_cpu_cores": None,
            "steal_pct": None,
            "psi_some_pct": None,
        }
        prev, self._prev = self._prev, {**sample, "_mono": now}
        if prev is not None:
            dt = now - prev["_mono"]
            if dt > 0:
                sample.update(_host_rates(prev, sample, dt))
        return sample

    def close(self) -> None:
        """Close the files kept open between reads."""
        self._files.close()


def _delta(a: dict[str, Any], b: dict[str, Any], key: str) -> float | None:
    if a.get(key) is None or b.get(key) is None:
        return None
    return float(b[key] - a[key])


def _host_rates(prev: dict[str, Any], cur: dict[str, Any], dt: float) -> dict[str, Any]:
    busy = _delta(prev, cur, "cpu_busy_s")
    total = _delta(prev, cur, "cpu_total_s")
    steal = _delta(prev, cur, "steal_s")
    own = _delta(prev, cur, "own_cpu_s")
    harness = _delta(prev, cur, "harness_cpu_s") or 0.0
    psi = _delta(prev, cur, "psi_some_us")
    return {
        "busy_cores": None if busy is None else busy / dt,
        "own_cpu_cores": None if own is None else own / dt,
        "other_cpu_cores": None if busy is None or own is None else (busy - own - harness) / dt,
        "steal_pct": None if steal is None or not total else 100.0 * steal / total,
        "psi_some_pct": None if psi is None else 100.0 * psi / 1e6 / dt,
    }
