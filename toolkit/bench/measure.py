"""`toolkit measure -- COMMAND...`: the bench's observer around any command (a bare-metal llama-bench, say),
so a host run and a container run of the same build carry the same telemetry and can be compared.

The command runs as a child process (no shell, no container); its stdout and stderr lines are stamped on
arrival and handed to the caller as they come. llama-bench JSONL rows on stdout (`-o jsonl --progress`) each
get their test window's telemetry and flags (a row it did not measure, not_measured_here, gets none); any
other command gets one window from its start to its end. Output: llama-bench's rows with two added keys,
`toolkit_telemetry` and `toolkit_flags` (importable as the record's `telemetry` and flags); a command without
rows gives one line {"command", "exit_code", "toolkit_telemetry", "toolkit_flags"}. docs/running.md "Around
any command"."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.bench.observe import RunObserver, kernel_fault
from toolkit.core import jsonsafe
from toolkit.core.errors import BadInput
from toolkit.core.stats import finite_number
from toolkit.host import telemetry as tel
from toolkit.results import write_atomic
from toolkit.runtimes.llama_bench import check


@dataclass
class Measured:
    """What `measure` saw. `rows`: llama-bench rows with toolkit_telemetry/toolkit_flags (empty for
    another command); `window`: the whole command's telemetry and flags; `facts`: the run's facts
    (trace path, samples, kernel log); `seconds`: the command's wall time; `exit_code` its status."""

    command: list[str]
    exit_code: int
    seconds: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    window: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    kernel_fault: str | None = None
    foreign: int = 0  # rows the command printed but did not measure (not_measured_here): no telemetry


def select_gpus(which: str) -> list[tel.GpuRef]:
    """`all` (every GPU found), `none`, or comma-separated indices into the list `discover_gpus` gives
    (AMD cards first, then NVIDIA). Raises BadInput naming the option for an unknown index."""
    found = tel.discover_gpus()
    if which == "all":
        return found
    if which == "none":
        return []
    try:
        idx = [int(x) for x in which.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"--gpu {which!r}: expected all, none or indices such as 0,1") from None
    bad = [i for i in idx if not 0 <= i < len(found)]
    if bad:
        have = f"indices 0..{len(found) - 1}" if found else "use --gpu none"
        raise BadInput(f"--gpu {which!r}: this host has {len(found)} GPU(s) the sampler can read ({have})")
    return [found[i] for i in idx]


MAX_LINE_BYTES = 1 << 20
"""A line longer than this is handed on cut to this length (the rest up to its newline dropped): a
300 MB line without a newline was re-joined on every 64 KB chunk (quadratic) and held whole."""

EXIT_GRACE_S = 2.0
"""After the command itself exits, its pipes are read this much longer: a grandchild that keeps
stdout open (a daemon it started) does not make `measure` wait for it or count its time."""


class _PartialLines:
    """Each pipe's partial line, kept as chunks and joined once, at its newline (linear in the bytes
    read), and cut at MAX_LINE_BYTES (the rest up to its newline dropped)."""

    def __init__(self) -> None:
        self.pending: dict[int, list[bytes]] = {}
        self.held: dict[int, int] = {}  # bytes held of each pipe's partial line

    def _take(self, fd: int, part: bytes) -> bytes:
        """The partial line of `fd` with `part` added, cut at MAX_LINE_BYTES."""
        parts = self.pending.pop(fd, [])
        parts.append(part)
        self.held.pop(fd, None)
        return b"".join(parts)[:MAX_LINE_BYTES]

    def split(self, fd: int, chunk: bytes) -> list[str]:
        """One chunk of pipe `fd` as whole lines, the last partial line kept; an empty chunk (the pipe
        closed) gives the partial line, which may lack its newline."""
        if not chunk:
            rest = self._take(fd, b"") if fd in self.pending else b""
            return [rest.decode(errors="replace")] if rest else []
        lines, start = [], 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            line = self._take(fd, chunk[start:nl]) if fd in self.pending else chunk[start:nl][:MAX_LINE_BYTES]
            lines.append(line.decode(errors="replace").rstrip("\r"))
            start = nl + 1
        if start < len(chunk):
            room = MAX_LINE_BYTES - self.held.get(fd, 0)
            if room > 0:
                self.pending.setdefault(fd, []).append(chunk[start : start + room])
                self.held[fd] = self.held.get(fd, 0) + min(room, len(chunk) - start)
            else:
                self.pending.setdefault(fd, [])
        return lines


def pump_lines(
    pipes: Sequence[tuple[Any, Callable[[str], None]]],
    done: Callable[[], bool] = lambda: False,
    raw: Sequence[Callable[[bytes], None] | None] = (),
) -> None:
    """Read binary pipes until each is closed (or until EXIT_GRACE_S after `done()` turns true),
    handing every whole line (decoded, bad bytes replaced, no newline, at most MAX_LINE_BYTES) to its
    handler, in ONE thread, earlier pipes first: after a chunk of a later pipe is read, and before its
    lines are handled, every earlier pipe is drained of what it already holds (llama-bench writes a
    test's `--progress` line to stderr before its row to stdout). Linear in the bytes read: a partial
    line is kept as chunks and joined once, at its newline. `raw[i]`, when given, gets pipe i's bytes
    exactly as read (the passthrough: lines of any length, bytes that are not UTF-8, no newline
    added), before its lines are handled."""
    sel = selectors.DefaultSelector()
    for order, (pipe, handler) in enumerate(pipes):
        sink = raw[order] if order < len(raw) else None
        sel.register(pipe.fileno(), selectors.EVENT_READ, (order, handler, sink))
    partial = _PartialLines()

    def read(key: selectors.SelectorKey) -> list[str]:
        """One chunk of `key`'s pipe as whole lines (the last partial line kept; all of it at EOF)."""
        chunk = os.read(key.fd, 1 << 16)
        if not chunk:  # closed: the last line may lack its newline
            sel.unregister(key.fd)
        elif key.data[2] is not None:
            key.data[2](chunk)
        return partial.split(key.fd, chunk)

    def drain_before(order: int) -> None:
        """Handle what the pipes earlier than `order` hold now (no waiting)."""
        while True:
            ready = [k for k, _ in sel.select(timeout=0) if k.data[0] < order]
            if not ready:
                return
            for key in sorted(ready, key=lambda k: k.data[0]):
                for line in read(key):
                    key.data[1](line)

    deadline: float | None = None
    while sel.get_map():
        if deadline is None and done():
            deadline = time.monotonic() + EXIT_GRACE_S
        if deadline is not None and time.monotonic() >= deadline:
            break  # the command is gone; whoever still holds its pipes is not measured
        events = sel.select(timeout=0.2)
        if not events:
            continue
        key = min((k for k, _ in events), key=lambda k: k.data[0])
        lines = read(key)
        drain_before(key.data[0])
        for line in lines:
            key.data[1](line)
    sel.close()


def _spawn(command: Sequence[str], obs: RunObserver, trace_path: Path) -> subprocess.Popen:
    """Start `command` in its own process group, stdout and stderr piped unbuffered. When it cannot be
    started the observer is finished, the trace removed (nothing was measured), and BadInput raised."""
    try:
        return subprocess.Popen(
            list(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,  # its own process group: stopped whole if we are stopped
        )
    except OSError as err:
        obs.finish()
        trace_path.unlink(missing_ok=True)  # nothing was measured
        raise BadInput(
            f"cannot run {command[0]!r}: {err.strerror or err}; give the program's path after --"
        ) from None


CLOCK_SLACK_S = 2.0
"""How far a row's own times may lie outside the command's run before the row is not the command's
(not_measured_here): llama-bench writes test_time in whole seconds (strftime "%FT%TZ", the fraction
dropped: up to 1 s early), and 1 s more for the stamps of the command's start and of the row's arrival,
taken by this process around the events."""

FOREIGN_SAID = 3
"""Rows not measured by the command that `measure` names one by one (a note each); the rest counted."""


def not_measured_here(raw: dict[str, Any], started: float, now: float) -> str | None:
    """Why llama-bench row `raw`, arrived at `now` from a command started at `started` (Unix times),
    cannot have been measured by that command, None when it can: its test_time lies before the command
    started or after the row arrived, or its timed repetitions (the sum of samples_ns, llama-bench's own
    clock) last longer than the command has run, beyond CLOCK_SLACK_S (`cat old.jsonl`, a replayed or
    edited row). Such a row's window is not its test's: neither are that window's telemetry and flags."""
    test = check.parse_test_time(raw.get("test_time"))
    said = str(raw.get("test_time"))[:40]
    if test is not None and test.timestamp() < started - CLOCK_SLACK_S:
        return f"its test_time {said} is {_span(started - test.timestamp())} before the command started"
    if test is not None and test.timestamp() > now + CLOCK_SLACK_S:
        return f"its test_time {said} is {_span(test.timestamp() - now)} after the row arrived"
    ns = raw.get("samples_ns")
    timed = [finite_number(x) for x in ns] if isinstance(ns, list) and ns else []
    if timed and all(x is not None and x > 0 for x in timed):
        total = sum(x for x in timed if x is not None) / 1e9
        if total > now - started + CLOCK_SLACK_S:
            return (
                f"its timed repetitions (the sum of samples_ns, {total:.4g} s) outlast the command's "
                f"{now - started:.3g} s so far"
            )
    return None


def _span(seconds: float) -> str:
    """`12 s`, or `432000 s (5 days)`."""
    return f"{seconds:.0f} s" + (f" ({seconds / 86400:.3g} days)" if seconds >= 86400 else "")


def _said_foreign(n: int, why: str, foreign: list[int], on_note: Callable[[str], None] | None) -> None:
    """Row `n` was not measured by the command (`why`): counted in `foreign`, the first FOREIGN_SAID
    named; n = 0 (after the run): the rest counted, in one note."""
    if n:
        foreign.append(n)
    if on_note and n and len(foreign) <= FOREIGN_SAID:
        on_note(f"row {n}: not measured by this command ({why}): written without telemetry or flags")
    elif on_note and not n and len(foreign) > FOREIGN_SAID:
        rest = foreign[FOREIGN_SAID:]
        rows = ", ".join(map(str, rest[:10])) + (", ..." if len(rest) > 10 else "")
        on_note(f"{len(rest)} more row(s) not measured by this command (rows {rows}): no telemetry")


def _foreign_row(raw: dict[str, Any]) -> dict[str, Any]:
    """llama-bench row `raw` as measure writes a row it did not measure: no telemetry, no flags (and
    the observer is not asked: the row takes no window, nor a `--progress` start of a test it measured)."""
    return {**jsonsafe.nonfinite_as_text(raw), "toolkit_telemetry": None, "toolkit_flags": []}


def _measured_row(obs: RunObserver, raw: dict[str, Any], trace_path: Path) -> dict[str, Any]:
    """llama-bench row `raw` with its test window's telemetry and flags (toolkit_telemetry, toolkit_flags)."""
    seen = obs.test(raw, check.row_tokens(raw))
    if seen.get("telemetry"):  # where the raw trace is: the report plots it from there
        seen["telemetry"]["trace"] = str(trace_path.resolve())
    # llama-bench's own fields as printed: a nan or inf is kept as the text llama-bench
    # prints ("nan", not null: the import's validity pass refuses it as it refuses the same
    # row imported directly, instead of recomputing a number); the file stays strict JSON
    return {
        **jsonsafe.nonfinite_as_text(raw),
        "toolkit_telemetry": jsonsafe.finite_or_none(seen.get("telemetry")),
        "toolkit_flags": seen.get("flags", []),
    }


def run_measured(
    command: Sequence[str],
    *,
    trace_path: Path,
    gpus: Sequence[tel.GpuRef],
    rate_hz: float = 10.0,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    passthrough: tuple[Callable[[bytes], None] | None, Callable[[bytes], None] | None] = (None, None),
) -> Measured:
    """Run `command` under the observer; `on_row(row)` gets each llama-bench row with its telemetry
    the moment it arrives (so an interrupted run keeps what it measured); `on_note(text)` what the
    observer says before the command starts (RunObserver.notes); `passthrough` (stdout sink, stderr
    sink) the command's bytes exactly as it wrote them. The measured time ends when the command exits, not when the last holder of
    its pipes lets go. Raises BadInput when the program cannot be started (named). On any exit from
    here that is not the command's own end (Ctrl-C, SIGTERM, an error), the command's process group
    is stopped (SIGTERM, then SIGKILL after 5 s): no benchmark is left on the GPU."""
    obs = RunObserver(trace_path, gpus, rate_hz=rate_hz, cgroup=False)
    obs.start()  # the idle baseline comes before the command starts
    for note in obs.notes:  # up front: a GPU not at stock power, in use before the run, not sampled
        if on_note:
            on_note(note)
    started = time.time()  # no test the command measures began before it
    proc = _spawn(command, obs, trace_path)
    rows: list[dict[str, Any]] = []
    foreign: list[int] = []
    t0 = obs.mark()
    try:
        obs.own_pid(proc.pid)

        def on_out(line: str) -> None:
            if line.lstrip().startswith("{"):
                for raw in jsonsafe.parse_jsonl(line):
                    why = not_measured_here(raw, started, time.time())
                    row = _foreign_row(raw) if why else _measured_row(obs, raw, trace_path)
                    rows.append(row)
                    if why:
                        _said_foreign(len(rows), why, foreign, on_note)
                    if on_row:
                        on_row(row)

        assert proc.stdout is not None and proc.stderr is not None
        ended = _exit_clock(proc)
        pump_lines(
            [(proc.stderr, obs.line), (proc.stdout, on_out)],
            done=lambda: bool(ended or _said_stopped(proc, on_note)),
            raw=(passthrough[1], passthrough[0]),
        )
        code = proc.wait()
        _stop(proc)  # what the command left running in its process group (a daemon it started) goes too
    except BaseException:
        _stop(proc)
        obs.finish()
        raise
    t1 = ended[0] if ended else time.time()
    window = obs.window(t0, t1, None)
    facts = obs.finish()
    _said_foreign(0, "", foreign, on_note)
    return Measured(list(command), code, t1 - t0, rows, window, facts, kernel_fault(facts), len(foreign))


def _said_stopped(proc: subprocess.Popen, on_note: Callable[[str], None] | None) -> bool:
    """Tell `on_note`, once per stop, that the command is stopped (SIGSTOP, SIGTSTP: waitid WSTOPPED
    takes each stop's report, reaping nothing): else measure waited on it in silence. False always."""
    try:
        st = os.waitid(os.P_PID, proc.pid, os.WSTOPPED | os.WNOHANG)
    except ChildProcessError:  # reaped meanwhile by the exit clock
        return False
    if st is not None and on_note:
        on_note(
            f"the command (pid {proc.pid}) is stopped ({signal.Signals(st.si_status).name}): measure waits for "
            f"it, its stopped time counted in the window; continue it with `kill -CONT {proc.pid}`"
        )
    return False


def _exit_clock(proc: subprocess.Popen) -> list[float]:
    """A list that gets the wall time (time.time()) at which `proc` exits, from a waiting thread: the
    measured window ends there, not EXIT_GRACE_S later when a grandchild still holds the pipes."""
    ended: list[float] = []

    def wait() -> None:
        proc.wait()
        ended.append(time.time())

    threading.Thread(target=wait, name="measure-exit-clock", daemon=True).start()
    return ended


def _stop(proc: subprocess.Popen) -> None:
    """Stop the command's whole process group (the command and what it started): SIGTERM, then
    SIGKILL to whatever of the group is left after 5 s; SIGCONT after the SIGTERM, so that a stopped
    command (SIGSTOP, Ctrl-Z) ends at once instead of waiting 5 s for the SIGKILL. SIGINT and SIGTERM are held meanwhile
    (signals.no_interrupt): a second Ctrl-C must not cut the wait short and leave a process running."""
    from toolkit.core import signals

    def group_alive() -> bool:
        try:
            os.killpg(proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    with signals.no_interrupt(reraise=False):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not group_alive():
                break
            os.killpg(proc.pid, sig)
            if sig == signal.SIGTERM:  # a stopped process acts on SIGTERM only once continued
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGCONT)
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                proc.poll()  # reap the command itself, so its pid does not keep the group "alive"
                if not group_alive():
                    break
                time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)


def write_measured(m: Measured, path: Path) -> Path:
    """Write `m` as importable JSONL (module docstring) to `path` (results.write_atomic: never through a
    link); returns it."""
    if m.rows:
        lines = [json.dumps(r, allow_nan=False) for r in m.rows]  # non-finite values are text (run_measured)
    else:
        lines = [
            json.dumps(
                {
                    "command": m.command,
                    "exit_code": m.exit_code,
                    "seconds": round(m.seconds, 3),
                    "toolkit_telemetry": m.window.get("telemetry"),
                    "toolkit_flags": m.window.get("flags", []),
                }
            )
        ]
    try:
        write_atomic(path, ("\n".join(lines) + "\n").encode())
    except OSError as err:  # a full disk: the error names the file
        if err.filename is None:
            err.filename = str(path)
        raise
    return path
