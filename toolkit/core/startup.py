"""The cyclic garbage collector held off while a command starts up.

Starting `toolkit bench` imports ~650 modules and builds pydantic's models: ~75,000 objects the collector
tracks, nearly all alive until the process exits. Left on, the collector walked them again and again while
they were made (~100 young, ~10 middle and a full collection per bench here: 0.03 CPU s), and the
interpreter's exit walked them all once more (~0.045 s): together ~0.07 of the toolkit's ~0.5 CPU s a bench.
`paused()` turns it off for the start-up; `started()` moves everything alive at that point to the
permanent generation (gc.freeze: never walked again, at exit neither) and turns it back on, so the run
collects only what it allocates itself. Reference counting frees what is not in a cycle as before; a
cycle left over from the start-up stays until the process exits (a few, of a command that ends anyway).
`paused(then=...)` also hands started() what to begin once the start-up is over (bench: the imports only
its end needs, on a thread, while the main thread waits on the engine for the first container).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator

_held = False  # paused() turned the collector off and started() has not yet turned it on
_then: Callable[[], None] | None = None  # what the next started() begins (paused(then=...))


def started() -> None:
    """The start-up is over (its imports done, its long-lived objects made): freeze what is alive and
    turn the collector back on. Does nothing unless paused() turned it off (safe to call anywhere,
    more than once: a caller that did not pause keeps its collector as it was). The first call also
    runs what paused(then=...) was given, once."""
    global _held, _then
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
    then, _then = _then, None
    if then is not None:
        then()


@contextlib.contextmanager
def paused(then: Callable[[], None] | None = None) -> Iterator[None]:
    """The collector off from here until started() (or the block's end, whatever happens in it: a
    command that fails before its start-up is over, or a test that runs the CLI in its own process,
    gets its collector back). A collector already off is left as it is. `then`: run by the first
    started() called inside the block, never at its end (a command that stops before its start-up is
    over does not need it)."""
    global _held, _then
    if gc.isenabled():
        gc.disable()
        _held = True
    _then = then
    try:
        yield
    finally:
        _then = None
        started()
