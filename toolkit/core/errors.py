"""Errors that own their message and exit code; the CLI maps them in one place.

Exit codes (stable; the README table lists every one and tests/test_faults.py checks it):
  0 ok, 1 unexpected error (a bug: the traceback is printed), 2 build failed, 3 bench failed,
  4 bad input, 5 Docker engine unavailable, lost or refusing a request, 6 compare found a regression,
  7 results did not reproduce, 8 a file cannot be read or written (disk full, read-only, permission,
  name too long; a path of the wrong kind, e.g. a file where a folder is expected, is bad input),
  9 another toolkit benchmark is running on the same engine, 130 interrupted.
"""

from __future__ import annotations

import errno
import os

from toolkit.core.text import path_text


class ToolkitError(Exception):
    """Base class: `str(err)` is the user-facing message; `exit_code` the process exit status."""

    exit_code = 1


class BadInput(ToolkitError):
    """matrix.yaml, a template, a model file or a command-line value is wrong (exit 4)."""

    exit_code = 4


class BuildFailed(ToolkitError):
    """One or more image builds failed (exit 2)."""

    exit_code = 2


class NothingDone(ToolkitError):
    """A command asked for something did none of it (exit 2, as `push` that pushed nothing): every
    image `bench` was asked to measure was skipped. The message names each one's reason."""

    exit_code = 2


class BenchFailed(ToolkitError):
    """One or more benchmark runs failed (exit 3)."""

    exit_code = 3


class EngineUnavailable(ToolkitError):
    """The Docker engine cannot be reached (not running, socket permission denied, DOCKER_HOST
    malformed or unusable), went away during a run, or refused a request (exit 5)."""

    exit_code = 5


class Regression(ToolkitError):
    """`toolkit compare` found a slowdown beyond the threshold (exit 6)."""

    exit_code = 6


class NotReproduced(ToolkitError):
    """`toolkit reproduce` found deltas beyond noise (exit 7)."""

    exit_code = 7


class FileSystemError(ToolkitError):
    """A file or folder cannot be read or written: disk full, read-only, permission, name too long
    (exit 8). The message names the path and the OS error."""

    exit_code = 8

    @classmethod
    def from_oserror(cls, err: OSError, what: str = "") -> FileSystemError | BadInput:
        """The error for an OSError, naming err.filename and err.strerror; `what`: what was being done
        ("writing results"). A path of the wrong kind (a file where a folder is expected, a folder
        where a file is, a missing path, one the OS takes for invalid such as a new file in /proc) is
        BadInput (exit 4) saying what was expected; anything else (disk full, read-only, permission,
        quota, name too long) is FileSystemError (exit 8) with the disk and permission advice."""
        raw = os.fsdecode(err.filename) if isinstance(err.filename, str | bytes) else None
        path = path_text(raw) if raw is not None else "(unknown path)"  # printed escaped; checked as is
        doing = f" while {what}" if what else ""
        if err.errno == errno.EEXIST and raw is not None and os.path.islink(raw):  # mkdir where a link is
            return BadInput(refused_link(path, "a folder"))
        expected = _EXPECTED.get(err.errno or 0)
        # the path is there but a new file beside it (our .tmp) could not be made
        if err.errno == errno.ENOENT and raw is not None and os.path.exists(raw):
            expected = _THERE_BUT_NO_NEW_FILE
        if expected:
            return BadInput(f"{path}: {err.strerror or err}{doing}: {expected}")
        advice = _ADVICE.get(err.errno or 0, "free space, fix the permissions or choose another folder")
        return cls(f"{path}: {err.strerror or err}{doing}; {advice}")


_THERE_BUT_NO_NEW_FILE = "the file is there, but its folder takes no new file (e.g. /proc, /sys); give a path in an ordinary folder"

_ADVICE = {  # exit 8: what to do, by the OS error (a disk's advice is no fix for a permission)
    errno.EACCES: "no permission to write or read there: choose a folder you own (e.g. your home "
    "folder) or fix its permissions",
    errno.EPERM: "not permitted there: choose a folder you own or fix its permissions",
    errno.EROFS: "that file system is read-only: choose a folder on a writable disk",
    errno.ENOSPC: "the disk is full: free space there or choose a folder on another disk",
    errno.EPIPE: "the program reading it closed it before the end (e.g. `| head`): what it read is cut "
    "short; write to a file (`> FILE`) to keep it whole",
    errno.EBADF: "it is closed (`>&-`, `2>&-`) or open for reading only: give the command somewhere to "
    "write (`> FILE`, or `> /dev/null` to discard it)",
    errno.EDQUOT: "your disk quota is used up: free space or choose a folder on another disk",
    errno.ENAMETOOLONG: "a name in the path is too long for the file system: choose a shorter path",
    errno.EFBIG: "a file grew past the largest size allowed (the shell's `ulimit -f`, or the file "
    "system's own limit): raise that limit or choose a folder on another disk",
}


_EXPECTED = {
    errno.ENOTDIR: "a part of this path is a file where a folder is expected; give a path through folders",
    errno.EISDIR: "this is a folder where a file is expected; give a file's path",
    errno.ENOENT: "no such path, or nothing can be created there; give an existing path, or one in a folder that "
    "exists and takes new files (check the spelling)",
    errno.EEXIST: "a file is there where a folder is expected; remove it or give another path",
    errno.EINVAL: "the OS takes this path as invalid (e.g. a new file under /proc or /sys); give a path in an "
    "ordinary folder",
    errno.ELOOP: "a symbolic link here points back into itself (a loop of links); give a path that ends in a real "
    "file or folder",
}
"""errno -> what was expected instead: an OSError with one of these is a wrong path (bad input), not the disk."""


def symlink_loop(err: BaseException) -> OSError | None:
    """The OSError (errno ELOOP, naming the path) that `err` stands for when it is pathlib's "Symlink loop
    from '<path>'" RuntimeError (Path.resolve() on Python before 3.13 turns the OS's ELOOP into it, so a
    link that points to itself given as any path, e.g. `--matrix`, reached the traceback), else None:
    the one mapping toolkit.cli.main and the JSON envelope read, so every path any command resolves is
    bad input (exit 4, _EXPECTED) and never a bug (exit 1)."""
    if not isinstance(err, RuntimeError) or not str(err).startswith("Symlink loop from "):
        return None
    context = err.__context__
    if isinstance(context, OSError) and context.errno == errno.ELOOP:
        return context
    name = str(err)[len("Symlink loop from ") :].strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "'\"":
        name = name[1:-1]
    return OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)


def refused_link(path: str | os.PathLike[str], instead: str = "a regular file") -> str:
    """The refusal of a symbolic link where the toolkit reads or writes a file or folder of its own:
    names the link, where it points, and the fix (`instead`: what belongs there)."""
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return (
        f"{path} is a symbolic link (to {target!r}): the toolkit never writes or copies through a link; "
        f"replace it with {instead} (or remove it) and run again"
    )


class ConcurrentRun(ToolkitError):
    """Another toolkit benchmark is running on the same Docker engine: its numbers and ours would
    both be skewed (exit 9). `--allow-concurrent` runs anyway and flags every record."""

    exit_code = 9


class HostCheckFailed(ToolkitError):
    """`toolkit doctor` found a check this host fails (an `error` line)."""

    exit_code = 12


class RemoteUnavailable(ToolkitError):
    """A remote the command needs (the Hugging Face Hub for fetch-model) did not answer (exit 11). The
    message names the remote and the offline way (copy the file by hand, pin the revision)."""

    exit_code = 11


class RunInterrupted(ToolkitError):
    """Ctrl-C or SIGTERM stopped the run (exit 130). The message states what was saved, from what
    was actually written, never a hope."""

    exit_code = 130
