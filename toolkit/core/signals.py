"""Saves that Ctrl-C cannot cut short.

SIGHUP (the terminal closed) stops a run as SIGTERM does (the CLI turns all three into
KeyboardInterrupt); its exit code is 128 + 1 (`exit_code()`), SIGINT's and SIGTERM's 130.

- `no_interrupt()`: SIGINT/SIGTERM/SIGHUP wait until a block (one record's write) has finished.
- `hold_for_stop()`: once a run has caught its interrupt and is stopping, every further SIGINT /
  SIGTERM is ignored until the process exits, so a second Ctrl-C (users press it twice) cannot
  interrupt the removal of containers, the saving of what was measured or the final message.

Only the main thread can install signal handlers; elsewhere both are no-ops.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop a run (the CLI installs its KeyboardInterrupt handler for SIGTERM and SIGHUP)."""
_held: list[int] | None = None  # signals noted while held; None: not holding
_previous: dict[int, Callable[[int, FrameType | None], Any] | int | signal.Handlers | None] = {}
_stopping = False  # hold_for_stop() was called: SIGINT/SIGTERM are ignored until the process exits


_stopped_by: int | None = None  # the signal that stopped the run, for its failed row


def note(signum: int) -> None:
    """Remember the signal that is stopping the run (the first one counts)."""
    global _stopped_by
    if _stopped_by is None:
        _stopped_by = signum


def stopped_by() -> str:
    """How the run was interrupted, for the failed row: "Ctrl-C" (SIGINT, also when not known),
    "SIGTERM" (`kill`, a scheduler cancelling a job) or "SIGHUP" (its terminal closed)."""
    return {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}.get(_stopped_by, "Ctrl-C")  # type: ignore[call-overload]


def stopping() -> bool:
    """Whether a stop signal is being handled: one was noted (SIGTERM, SIGHUP, a signal held during a
    save) or a run caught its interrupt and is stopping (hold_for_stop)."""
    return _stopping or _stopped_by is not None


def exit_code() -> int:
    """The exit code of a stopped run: 128 + 1 for SIGHUP (as a shell reports it), else 130
    (Ctrl-C and SIGTERM, docs/exit-codes.md)."""
    return 128 + signal.SIGHUP if _stopped_by == signal.SIGHUP else 130


def _main() -> bool:
    return threading.current_thread() is threading.main_thread()


def _hold(signum, frame) -> None:
    if _held is not None:
        _held.append(signum)
        note(signum)


def _start() -> bool:
    """Install the holding handler; False when already holding (an outer block decides) or not main."""
    global _held, _previous
    if _held is not None or _stopping or not _main():
        return False
    _held = []
    _previous = {s: signal.signal(s, _hold) for s in _SIGNALS}
    return True


def release() -> list[int]:
    """Restore the handlers that were there before holding; returns the signals held meanwhile."""
    global _held, _previous
    if _held is None or _stopping or not _main():
        return []
    for s, handler in _previous.items():
        signal.signal(s, handler)
    held, _held, _previous = _held, None, {}
    return held


def hold_for_stop() -> None:
    """The run is stopping: ignore SIGINT/SIGTERM from now until the process exits. SIG_IGN, not a
    Python handler: Python resets its own handlers to the default at exit, and a Ctrl-C arriving then
    would kill the process after it said what it saved."""
    global _stopping
    if not _main():
        return
    _stopping = True
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)


@contextlib.contextmanager
def no_interrupt(*, reraise: bool = True) -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block has finished. With `reraise`, a signal that arrived
    meanwhile raises KeyboardInterrupt after the block (the run then stops as it would have);
    without, it is dropped. Inside an outer hold (or outside the main thread) the outer one decides."""
    if not _start():
        yield
        return
    try:
        yield
    finally:
        held = release()
        if held and reraise:
            raise KeyboardInterrupt
