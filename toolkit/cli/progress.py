"""The progress of long work on stderr: the events callback of run_bench (and of the publish and campaign
commands that run it), a plain line per test case off a terminal, rich bars on one."""

from __future__ import annotations

import sys
import time

import click

from toolkit.cli.common import _err, rich_console, terminal_safe


def progress_printer(quiet: bool, outcomes: bool = False):
    """An events callback for run_bench on stderr: the notes only when `quiet`; off a terminal a plain
    line per test case; on a terminal a rich progress bar per (image, model). With `outcomes` (and not
    `quiet`), each (image, model)'s outcome line on stdout as it is known: the pairs skipped before
    anything runs, each measured one when it ends (on a terminal shared with stderr: above the bars)."""

    def note_only(kind: str, **kw) -> None:
        if kind == "note":
            _err(kw["text"])

    if quiet:
        return note_only
    if not sys.stderr.isatty():  # a log, not a terminal: one plain line per test case, no bar (nor rich)
        return plain_progress(outcomes)
    return rich_progress(outcomes)


PLAIN_HEARTBEAT_S = 60.0
"""Off a terminal, a test still running after this many seconds gets a line again at its next phase
(`gen run 3/5`), at most this often: a log of a slow host showed `test 8/10` and then nothing for 11
minutes, a hang and slowness alike."""


def plain_progress(outcomes: bool):
    """The events callback off a terminal: the notes, one line per test case as it starts, and again
    with its phase and time so far where it runs on past PLAIN_HEARTBEAT_S (at its next phase)."""
    said: dict[tuple, tuple[float, float]] = {}  # a test -> (its start, its last line), monotonic seconds

    def plain(kind: str, **kw) -> None:
        if kind == "note":
            _err(kw["text"])
        elif kind == "outcome" and outcomes:
            click.echo(kw["outcome"].line())
        elif kind == "progress":
            key, now = (kw.get("image"), kw.get("model"), kw["done"]), time.monotonic()
            start, last = said.get(key, (now, None))
            if last is None or now - last >= PLAIN_HEARTBEAT_S:
                said[key] = (start, now)
                took = f" ({int(now - start) // 60} min {int(now - start) % 60} s so far)" if last else ""
                _err(
                    f"{key[0]} x {key[1]}: test {kw['done'] + 1}/{kw['total']} {kw['phase']}".rstrip() + took
                )

    return plain


def rich_progress(outcomes: bool):
    """The events callback on a terminal: a rich progress bar per running (image, model) process, the
    notes above them; a finished bar is removed (its pair's outcome line stays), so only the running
    ones and those a failure or Ctrl-C stopped remain on screen."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=rich_console(stderr=True),
        transient=False,
        # the bar's clock shows whole seconds: redrawn once a second, and at once on every event below
        # (rich's default, 10 a second, cost ~18 ms of CPU per second of the run: more than the rest of
        # the toolkit while llama-bench measures)
        refresh_per_second=1,
        redirect_stdout=False,  # stdout that is not this terminal (a file, a pipe) keeps its lines
    )
    from rich.markup import escape

    tasks: dict[tuple, TaskID] = {}

    def events(kind: str, **kw) -> None:
        key = (kw.get("image"), kw.get("model"))
        if kind == "start":
            if not progress.live.is_started:
                progress.start()
            tasks[key] = progress.add_task(f"{key[0]} x {key[1]}", total=kw["total"])
        elif kind == "progress" and key in tasks:
            progress.update(
                tasks[key],
                completed=kw["done"],
                total=kw["total"],
                description=escape(
                    terminal_safe(f"{key[0]} x {key[1]}: test {kw['done'] + 1}/{kw['total']} {kw['phase']}")
                ),
            )
        elif kind == "done" and key in tasks:  # finished: its bar goes (the outcome line says the rest)
            progress.remove_task(tasks.pop(key))
        elif kind == "close" and progress.live.is_started:
            progress.stop()
            return
        elif kind == "note":
            progress.console.print(terminal_safe(kw["text"]), markup=False, highlight=False, soft_wrap=True)
        elif kind == "outcome" and outcomes:
            if sys.stdout.isatty():  # the same screen as the bars: printed above them, not through them
                progress.console.print(kw["outcome"].line(), markup=False, highlight=False, soft_wrap=True)
            else:
                click.echo(kw["outcome"].line())
        if kind in ("start", "progress", "done") and progress.live.is_started:
            progress.refresh()

    return events
