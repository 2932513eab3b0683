"""What was measured: record schema and store (results/<digest12>/bench.jsonl), the SQLite query index,
the one test identity, `toolkit import` (each runtime's output parsers: toolkit.runtimes).
May use: toolkit.core, toolkit.spec, toolkit.engine (facts only), toolkit.runtimes; reads and writes
results/; never prints.
"""

import errno
import os
import stat
from pathlib import Path

from toolkit.core.errors import BadInput


def bench_files(root: Path) -> list[Path]:
    """results/*/bench.jsonl and the per-host folders of campaigns, results/hosts/<host>/*/bench.jsonl
    (toolkit/campaign/slurm.py: each host's jobs write only there), sorted: the order every reader reads
    records in. Here, light to import: an empty `toolkit report` asks it without loading the store.
    BadInput (exit 4) when one is not a regular file (a FIFO would hang every reader: need_regular)."""
    files = sorted([*root.glob("*/bench.jsonl"), *root.glob("hosts/*/*/bench.jsonl")])
    for f in files:
        try:
            need_regular(f, os.stat(f))
        except FileNotFoundError:  # a dangling link or a file removed meanwhile: read as gone
            continue
    return files


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"))


def need_regular(path: Path, st: os.stat_result) -> None:
    """BadInput (exit 4) naming `path` when `st` (its os.stat/fstat) is not a regular file: a FIFO
    named bench.jsonl blocks a reader forever, a device reads without end."""
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "a device or special file")
        raise BadInput(f"{path}: not a regular file ({kind}): remove it or pass another --results")


_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of `path` opened with `flags` (os.open), refused (BadInput, the descriptor closed)
    when it is not a regular file. Opened non-blocking, so a FIFO put there after it was listed cannot
    hang the open; the flag is then cleared (a regular file reads the same either way). An open that
    writes (or `flags` holding os.O_NOFOLLOW) never follows a final symlink: a link is BadInput (exit 4)
    naming it, so results/.seq or a bench.jsonl linked to a file elsewhere is never written. The one
    open of result files: every reader and writer of bench.jsonl, builds.jsonl, canary.jsonl, .seq and
    the run locks goes through it. Other OSError (missing, permission) raised as is."""
    if flags & _WRITES:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | os.O_NONBLOCK, mode)
    except OSError as err:
        if err.errno == errno.ELOOP and flags & os.O_NOFOLLOW and os.path.islink(path):
            raise BadInput(refused_link(path)) from None
        raise
    try:
        need_regular(path, os.fstat(fd))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def refused_link(path: Path) -> str:
    """The refusal of a symbolic link where the toolkit reads or writes a file of its own: names the
    link, where it points, and the fix."""
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return (
        f"{path} is a symbolic link (to {target!r}): the toolkit never writes or copies through a link; "
        "replace it with a regular file (or remove it) and run again"
    )


NO_RESULTS = "no results yet: run `toolkit bench` or `toolkit import`"
"""What a report of a results folder without a record says (kept here, light to import: an empty
`toolkit report` says it without loading the report stack)."""
