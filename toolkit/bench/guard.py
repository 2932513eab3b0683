"""What keeps a benchmark run honest when things go wrong around it.

- `check_writable(folder)`: results/ can take a record before anything runs (exit 8 otherwise).
- `no_interrupt()` (toolkit.core.signals): a save that a second Ctrl-C / SIGTERM cannot cut in half
  (toolkit.results.records.Saver: each record written the moment it exists, whole or absent).
- `RunGuard`: one benchmark per container engine (Docker's `docker info` ID; rootful Podman and each
  user's rootless Podman are separate engines: engine.engine_id). Each run holds a lock file
  (`<tmp>/toolkit-bench-<engine id>-<run id>.lock`, fcntl.flock, released by the kernel when the
  process dies) and labels its containers with its run id and this host's id. At start it refuses
  when another run is alive (exit 9) unless --allow-concurrent, and removes containers left by runs
  that are gone (a killed toolkit, an engine restarted under a run). With --allow-concurrent every
  record written while another run is alive carries `concurrent: {...}`.
- `ResultsLock`: one benchmark per results folder, whatever engine it runs on (two Docker engines of
  one host, or Docker and Podman, share its CPUs, memory and GPUs): an flock of `results/.lock` held for the run, naming the
  holder (pid, run id, engine) inside. A second run is refused (exit 9) unless --allow-concurrent, and
  then every record it writes while the holder runs carries `concurrent: {...}`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from toolkit.core import jsonsafe
from toolkit.core.errors import BadInput, ConcurrentRun, FileSystemError
from toolkit.core.paths import contained
from toolkit.core.text import counted
from toolkit.engine import api as engine
from toolkit.results import make_folders, open_regular

RUN_ID_LABEL = "org.toolkit.run-id"
RESULTS_LOCK = ".lock"
"""results/.lock: flocked by the run writing that folder; holds {"pid", "run_id", "engine", "host"}."""
CONCURRENT_ADVICE = (
    "Two runs at once slow each other down and both would store wrong numbers; wait for it to finish, or pass "
    "--allow-concurrent to run anyway with every record flagged `concurrent`."
)
"""The one advice of every refusal of a concurrent benchmark (same engine, same results folder)."""
HOST_LABEL = engine.HOST_LABEL
MIN_FREE_BYTES = 1 << 20
"""results/ needs at least this much free space before a run starts (a record is a few KB)."""


def check_writable(folder: Path) -> None:
    """Create `folder` if needed, then write, fsync and delete a probe file in it, and require
    MIN_FREE_BYTES free. Raises FileSystemError (exit 8) naming the path: read-only, permission
    denied, disk full, name too long; BadInput (exit 4) for a path of the wrong kind (a file where
    a folder of it should be, a symlink planted under the probe's name: never written through)."""
    probe = folder / f".write-test-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = open_regular(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # a link there: BadInput
        try:
            if os.write(fd, b"x" * 4096) != 4096:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(probe))
            os.fsync(fd)
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(probe)
        free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    except OSError as err:
        if err.filename is None:
            err.filename = str(probe)
        raise FileSystemError.from_oserror(err, "checking that the results folder is writable") from None
    if free < MIN_FREE_BYTES:
        raise FileSystemError(
            f"{folder}: only {counted(free, 'byte')} free (a run needs at least {MIN_FREE_BYTES}); free "
            "space or choose another folder (--results DIR)"
        )


def _shown(run_id: str) -> str:
    """A run id for a message: as is when it looks like one, else a short quoted excerpt (a lock file
    name in the shared temp folder is anyone's to choose: no newline or escape reaches the terminal)."""
    return run_id if re.fullmatch(r"[\w.:+-]{1,80}", run_id, re.ASCII) else ascii(run_id[:40])


def _held(files: list[Path], stale_s: float | None) -> Iterator[Path]:
    """Those of `files` another process holds an flock on (opened non-blocking: a FIFO planted under
    such a file's name must not block; one that cannot be opened is skipped). One nobody holds is a run
    that ended: removed when older than `stale_s` seconds (None: at once)."""
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield f
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                if stale_s is None or time.time() - os.fstat(fd).st_mtime > stale_s:
                    os.unlink(f)
        finally:
            os.close(fd)


def _elsewhere(containers: list, host: str, alive: list[str]) -> dict[str, str]:
    """The runs of the toolkit bench containers of `containers` (engine.toolkit_containers) running from
    a host other than `host` (or an older toolkit: cannot tell, assumed alive), less those in `alive`:
    {run id: the run as RunGuard.others names it, with its containers}."""
    running: dict[str, list[str]] = {}
    for c in containers:
        rid = c.labels.get(RUN_ID_LABEL, "")
        if rid and c.labels.get(HOST_LABEL) != host and c.status == "running" and rid not in alive:
            running.setdefault(rid, []).append(c.name)
    return {
        rid: f"{_shown(rid)} (container{'s' if len(ctrs) > 1 else ''} {', '.join(ctrs)}, started from "
        "another host or an older toolkit)"
        for rid, ctrs in running.items()
    }


class RunGuard:
    """This run's presence on one container engine (see the module docstring)."""

    STALE_AFTER_S = 60.0

    def __init__(self, run_id: str, engine_id: str, lock_dir: Path | None = None):
        self.run_id = run_id
        self.host = engine.host_id()
        self.prefix = f"toolkit-bench-{''.join(c for c in engine_id if c.isalnum())[:16]}-"
        self.dir = lock_dir or Path(tempfile.gettempdir())
        self.path = self.dir / f"{self.prefix}{run_id}.lock"
        self.fd: int | None = None
        self.foreign: dict[str, str] = {}  # runs of other hosts running at start (_elsewhere), while they run

    def acquire(self) -> None:
        self.fd = open_regular(self.path, os.O_RDWR | os.O_CREAT)  # a link planted in /tmp: BadInput
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with contextlib.suppress(OSError):  # who holds it, for another run's message
            os.fchmod(self.fd, 0o644)  # readable whatever the umask: another user's run opens it to test
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def _pid_of(self, run_id: str) -> str:
        """The pid another run wrote into its lock file, or "?". Any local user can write a file there
        (the shared temp folder): only a plain decimal pid is shown, never other content; only a
        regular file is read (a FIFO would block). `run_id` comes from a container label (anyone who can
        start a container sets it): only a file in the lock folder is read (core.paths.contained)."""
        try:
            path = contained(self.dir, f"{self.prefix}{run_id}.lock", what="lock file")
        except BadInput:
            return "?"
        pid = (jsonsafe.read_regular_file(path, 64) or b"").strip()
        return pid.decode("ascii") if re.fullmatch(rb"[0-9]{1,10}", pid) else "?"

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            os.close(self.fd)
            self.fd = None

    def alive_runs(self) -> list[str]:
        """Run ids of other toolkit benchmarks on this engine from this host whose process is alive."""
        files = [f for f in sorted(self.dir.glob(f"{self.prefix}*.lock")) if f.name != self.path.name]
        return [f.name[len(self.prefix) : -len(".lock")] for f in _held(files, self.STALE_AFTER_S)]

    def others(self) -> list[str]:
        """Every other benchmark known to be running on this engine now (for flagging records): those
        alive on this host, and of those running from another host at start (`foreign`) the ones whose
        containers still run (one that has ended overlaps no later record: it flagged every record of
        the run)."""
        alive = self.alive_runs()
        if self.foreign:
            now = _elsewhere(engine.toolkit_containers(), self.host, alive)
            self.foreign = {rid: said for rid, said in now.items() if rid in self.foreign}
        return alive + list(self.foreign.values())

    def start(self, *, allow_concurrent: bool, note: Callable[[str], None]) -> None:
        """Take this run's lock, refuse (ConcurrentRun) if another run is alive unless
        `allow_concurrent`, and remove containers of runs that are gone."""
        self.acquire()
        alive = self.alive_runs()
        leftovers = []
        names: dict[str, list[str]] = {}  # run id -> its containers on this engine, for the message
        containers = [c for c in engine.toolkit_containers() if c.labels.get(RUN_ID_LABEL, "") != self.run_id]
        for c in containers:
            rid = c.labels.get(RUN_ID_LABEL, "")
            if not rid:  # not a bench container (a build's)
                continue
            names.setdefault(rid, []).append(c.name)
            if c.labels.get(HOST_LABEL) == self.host:
                if rid not in alive:
                    leftovers.append(c)
            elif c.status != "running" and c.labels.get(HOST_LABEL) is None:
                leftovers.append(c)
        self.foreign = _elsewhere(containers, self.host, alive)
        foreign = list(self.foreign.values())
        if leftovers:
            for c in leftovers:
                engine.remove_container_id(c.id)
            note(
                f"removed {len(leftovers)} leftover container(s) of earlier runs that are gone: "
                + ", ".join(f"{c.name} ({c.status})" for c in leftovers)
            )
        others = alive + foreign
        if others and not allow_concurrent:
            self.release()
            raise self._refusal(alive, foreign, names)
        if others:
            running = ", ".join([*map(_shown, alive), *foreign])
            note(
                f"--allow-concurrent: another benchmark is running ({running}); every record written while it runs "
                "is flagged `concurrent`"
            )

    def _refusal(
        self,
        alive: list[str],
        foreign: list[str],
        names: dict[str, list[str]],
    ) -> ConcurrentRun:
        """The refusal of a run while others are alive: each named (its pid on this host and its
        containers, or said as `foreign`), with the command that removes the containers of runs
        started elsewhere should they be gone. Arguments as `start` gathers them."""
        said = [
            f"{_shown(rid)} (pid {self._pid_of(rid)} on this host"
            + (
                f"; container{'s' if len(names[rid]) > 1 else ''} {', '.join(names[rid])})"
                if names.get(rid)
                else "; between containers)"
            )
            for rid in alive
        ] + foreign
        gone = [n for rid in self.foreign for n in names[rid]]
        fix = (
            f" If that run is gone, remove its container: `{engine.cli()} rm -f {' '.join(gone)}`."
            if gone
            else ""
        )
        return ConcurrentRun(
            f"another toolkit benchmark is running on this container engine ({engine.engine_label()}): run "
            f"{'; '.join(said)}. " + CONCURRENT_ADVICE + fix
        )


class ResultsLock:
    """This run's hold on one results folder (see the module docstring). `start` takes the lock or
    refuses; `others` names the holder while it runs (for flagging records); `release` lets go. The
    file stays (removing it would let a third run lock a new file while the second still holds the
    old one); the kernel releases the flock when the process dies."""

    def __init__(self, root: Path, run_id: str, engine_id: str):
        self.root = Path(root)
        self.path = self.root / RESULTS_LOCK
        self.run_id = run_id
        self.engine_id = "".join(c for c in engine_id if c.isalnum())[:16]
        self.fd: int | None = None
        self.held = False
        self.present: int | None = None  # with --allow-concurrent: this run's presence file, flocked

    PRESENT = ".concurrent"
    """Folder of the presence files of runs that write without the lock (--allow-concurrent), one
    flocked `<run id>.json` each: how the lock's holder learns of them (both sides flag the overlap)."""

    @property
    def _present_name(self) -> str:
        return re.sub(r"[^\w.-]", "_", self.run_id, flags=re.ASCII)[:120] + ".json"

    def _present(self) -> None:
        """Mark this run as writing beside the holder: a presence file it holds flocked to its end."""
        folder = self.root / self.PRESENT
        with contextlib.suppress(OSError):
            make_folders(folder, root=self.root)
            fd = open_regular(folder / self._present_name, os.O_RDWR | os.O_CREAT, root=self.root)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, 0)
            os.pwrite(fd, self._about() + b"\n", 0)
            self.present = fd

    def _present_others(self) -> list[str]:
        """Other runs writing here without the lock whose presence file is still held (alive)."""
        files = [f for f in sorted((self.root / self.PRESENT).glob("*.json")) if f.name != self._present_name]
        return [self._describe(jsonsafe.read_regular_file(f, 4096) or b"") for f in _held(files, None)]

    def _about(self) -> bytes:
        """This run as its lock and presence files say it (for another run's message)."""
        return json.dumps(
            {"pid": os.getpid(), "run_id": self.run_id, "engine": self.engine_id, "host": engine.host_id()}
        ).encode()

    def _open(self) -> int:
        try:
            return open_regular(self.path, os.O_RDWR | os.O_CREAT)  # a link: BadInput, never written through
        except OSError as err:
            if err.filename is None:
                err.filename = str(self.path)
            raise FileSystemError.from_oserror(err, "locking the results folder") from None

    def _try_lock(self) -> bool:
        assert self.fd is not None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self.held = True
        with contextlib.suppress(OSError):  # who holds it, for another run's message
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, self._about() + b"\n", 0)
        return True

    def holder(self) -> str:
        """The run holding the lock, as its lock file says: `RUN (pid N on this host, Docker engine E)`.
        Anyone who can write results/ can write that file: only a plain run id, pid and engine id are
        shown, never other content."""
        return self._describe(jsonsafe.read_regular_file(self.path, 4096) or b"")

    def _describe(self, data: bytes) -> str:
        """A lock or presence file's run in words (holder); nothing of it but checked fields is shown."""
        obj, _ = jsonsafe.parse_line(data)
        obj = obj if isinstance(obj, dict) else {}
        pid = obj.get("pid")
        pid_s = str(pid) if isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 1 << 32 else "?"
        run = _shown(obj["run_id"]) if isinstance(obj.get("run_id"), str) else "?"
        said = obj.get("engine")
        eng = said if isinstance(said, str) and re.fullmatch(r"[A-Za-z0-9]{1,16}", said) else "?"
        if eng == self.engine_id:
            return f"{run} (pid {pid_s}, writing {self.root} from this container engine)"
        return (
            f"{run} (pid {pid_s}, writing {self.root} from container engine {eng}: two container engines "
            "of one host share its CPUs, memory and GPUs)"
        )

    def start(self, *, allow_concurrent: bool, note: Callable[[str], None]) -> None:
        """Take the lock, or refuse (ConcurrentRun, exit 9) naming the holder; with `allow_concurrent`
        run without it (`others` then names the holder while it runs)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.fd = self._open()
        if self._try_lock():
            return
        who = self.holder()
        if not allow_concurrent:
            self.release()
            raise ConcurrentRun(
                f"another toolkit benchmark is writing to this results folder: run {who}. "
                + CONCURRENT_ADVICE
            )
        self._present()
        note(
            f"--allow-concurrent: another benchmark is writing to {self.root} ({who}); every record written "
            "while it runs is flagged `concurrent`, and so are its records written while this one runs"
        )

    def others(self) -> list[str]:
        """The runs writing here beside this one: the holder while it runs (none when this run holds the
        lock; a holder that has ended hands the lock to this run, which then holds it to its end), and
        every run that writes without the lock (--allow-concurrent) while it runs."""
        if self.fd is None:
            return []
        holder = [] if self.held or self._try_lock() else [self.holder()]
        return holder + self._present_others()

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None
            self.held = False
        if self.present is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.root / self.PRESENT / self._present_name)
            os.close(self.present)
            self.present = None
