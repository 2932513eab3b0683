"""Errors that own their message and exit code; the CLI maps them in one place.

Exit codes (stable; the README table lists every one and tests/test_faults.py checks it):
  0 ok, 1 unexpected error (a bug: the traceback is printed), 2 build failed, 3 bench failed,
  4 bad input, 5 Docker engine unavailable or lost, 6 compare found a regression,
  7 results did not reproduce, 8 a file cannot be read or written (disk full, read-only, name too
  long), 9 another toolkit benchmark is running on the same engine, 130 interrupted.
"""

from __future__ import annotations


class ToolkitError(Exception):
    """Base class: `str(err)` is the user-facing message; `exit_code` the process exit status."""

    exit_code = 1


class BadInput(ToolkitError):
    """matrix.yaml, a template, a model file or a command-line value is wrong (exit 4)."""

    exit_code = 4


class BuildFailed(ToolkitError):
    """One or more image builds failed (exit 2)."""

    exit_code = 2


class BenchFailed(ToolkitError):
    """One or more benchmark runs failed (exit 3)."""

    exit_code = 3


class EngineUnavailable(ToolkitError):
    """The Docker engine cannot be reached (not running, socket permission denied) or went away
    during a run (exit 5)."""

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
    def from_oserror(cls, err: OSError, what: str = "") -> FileSystemError:
        """`what`: what was being done ("writing results"). Names err.filename and err.strerror."""
        path = err.filename if err.filename is not None else "(unknown path)"
        doing = f" while {what}" if what else ""
        return cls(f"{path}: {err.strerror or err}{doing}; free space, fix the permissions or choose another "
                   "folder (e.g. --results DIR)")


class ConcurrentRun(ToolkitError):
    """Another toolkit benchmark is running on the same Docker engine: its numbers and ours would
    both be skewed (exit 9). `--allow-concurrent` runs anyway and flags every record."""

    exit_code = 9


class RemoteUnavailable(ToolkitError):
    """A remote the command needs (the Hugging Face Hub for fetch-model) did not answer (exit 11). The
    message names the remote and the offline way (copy the file by hand, pin the revision)."""

    exit_code = 11


class RunInterrupted(ToolkitError):
    """Ctrl-C or SIGTERM stopped the run (exit 130). The message states what was saved, from what
    was actually written, never a hope."""

    exit_code = 130
