"""What `toolkit build` builds by default, and how it shows a long build.

`host_plan(specs, ...)` splits the images into those this host can run — doctor's verdict per image
(`doctor.image_verdict`: devices present, the CPU image always) — and the others, each with the
reason and the command that builds it anyway. `toolkit build` without `-i`/`--all`/`--push` builds
the first group only; `-i NAME`, `--all` and publishing (`--push`) build what they name.

`BuildSteps` condenses BuildKit's plain progress (`docker buildx build --progress=plain`, see
docs.docker.com/build/building/variables/#buildkit_progress) into one line per step that runs, a
count of the steps served from cache, and the time of steps that took long; on a terminal a rich
status line shows the running step and its elapsed time.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.core import invocation, stats
from toolkit.engine.api import BUILD_RETRY
from toolkit.host.devices import detect_gpus
from toolkit.host.doctor import ImageLike, image_verdict


@dataclass(frozen=True)
class Skipped:
    """An image the default build leaves out: its name and one line saying why and how to build it."""

    name: str
    reason: str

    def line(self) -> str:
        return (
            f"{self.name}: skipped: cannot run on this host: {self.reason}. Build it anyway: "
            f"`{invocation.command('build', '-i', self.name)}` (or `--all`)"
        )


def host_plan(
    specs: Sequence[ImageLike],
    *,
    allow_software: bool = False,
    sysfs: Path = Path("/sys"),
    dev: Path = Path("/dev"),
) -> tuple[list[Any], list[Skipped]]:
    """(images to build, images skipped) for a default `toolkit build` on this host.

    An image is built when `toolkit doctor` says it can run here (labels unknown before a build, so a
    GPU image's gfx targets are not checked here); `allow_software` counts Mesa lavapipe as a Vulkan
    device, as `toolkit bench --allow-software-gpu` does. Reads /sys and /dev only; order is kept.
    """
    gpus = detect_gpus(sysfs)
    build: list[Any] = []
    skipped: list[Skipped] = []
    for spec in specs:
        v = image_verdict(spec, None, gpus, dev=dev, allow_software=allow_software, pin=None)
        if v.runnable:
            build.append(spec)
        else:
            skipped.append(Skipped(spec.name, v.reason))
    return build, skipped


_VERTEX = re.compile(r"#(\d+) (.*)")
_STEP = re.compile(r"\[(?!internal\])[^\]]*\d+/\d+\] ")
_RUN_OPTIONS = re.compile(r"(?<= RUN)(?: +--[^\s=]+(?:=\S*)?)+ +")
"""A RUN step's options (`--mount=type=cache,...`, `--network=none`): left out of its title."""
_DONE = re.compile(r"DONE (\d+(?:\.\d+)?)s")
LONG_STEP_S = 5.0
HEARTBEAT_S = 30.0
"""Off a terminal (no status line), a running step says it is still running at most this often."""
FAIL_TAIL = 12
"""Lines of a failing step's own output shown before its ERROR line (apt's `E:` lines, a compiler's)."""
_PERCENT = re.compile(r"\[\s{0,3}(\d{1,3})%\]")  # cmake/ninja progress: `[ 45%] Building CXX object ...`
"""A step that ran at least this long gets a `done in` line."""


class BuildSteps:
    """on_line callback for engine.run_buildx: condensed BuildKit plain progress for image `name`.

    Printed through `echo` (one str per line): `name | [stage i/n] INSTRUCTION` when a step starts to
    run (its instruction cut to `width`), `name | [stage i/n] done in S s` for steps of >= 5 s, error
    lines. Steps BuildKit serves from cache (`#N CACHED`) are not printed: the build's closing line
    (BuildResult.line) says how many there were. `verbose` prints every line unchanged. With `status`
    (a callable taking the running step's text), the running step is also shown there as it runs,
    with the compiler's percentage (`[ 45%]` lines of cmake) when it prints one; without it (a log,
    not a terminal) a running step says so in a short line once HEARTBEAT_S pass with nothing said
    (`name | still compiling 45%, 12 min`: the build's time so far). Both add `full_build_s`, the
    image's last build of every step (full_build_seconds), as an estimate where it is known. A step
    that fails has its last FAIL_TAIL output lines printed before its ERROR line.
    """

    def __init__(
        self,
        name: str,
        echo: Callable[[str], None],
        *,
        verbose: bool = False,
        width: int = 100,
        status: Callable[[str], None] | None = None,
        full_build_s: float | None = None,
    ) -> None:
        self.name, self.echo, self.verbose, self.width, self.status = name, echo, verbose, width, status
        self.estimate = f" (last full build {_duration(full_build_s)})" if full_build_s else ""
        self.began = time.monotonic()
        self.pending: dict[str, str] = {}  # vertex -> step title, until it is known cached or running
        self.running: dict[str, tuple[str, float]] = {}
        self.steps: set[str] = set()
        self.tail: dict[str, deque[str]] = {}  # vertex -> its last output lines
        self.percent: dict[str, str] = {}  # vertex -> the last `NN%` it printed
        self.heard = time.monotonic()  # when a line was last echoed (the heartbeat's clock)
        self._stop = threading.Event()
        if not status and not verbose:  # a log, not a terminal: a silent step still says it runs
            threading.Thread(target=self._tick, name=f"build-heartbeat-{name}", daemon=True).start()

    def _progress(self, vid: str, said: str) -> None:
        """Keep a running step's output tail and percentage; refresh the status line, or beat."""
        self.tail.setdefault(vid, deque(maxlen=FAIL_TAIL)).append(said)
        m = _PERCENT.search(said)
        if m:
            self.percent[vid] = f"{m.group(1)}%"
        title, _ = self.running[vid]
        if self.status and m:
            self.status(
                f"{self.name}: {title.split('] ', 1)[0]}] compiling {self.percent[vid]}{self.estimate}"
            )
        self.beat()

    def beat(self) -> None:
        """Off a terminal (no status line): when a step runs and nothing was said for HEARTBEAT_S, say
        in one short line that it still runs: `still compiling 45%, 12 min` where the compiler printed
        a percentage, else `still running [stage 3/9], 2 min` (the build's time so far), and the
        estimate. Called on each output line and by a timer thread every few seconds (a step may print
        nothing for minutes)."""
        if self.status or not self.running or time.monotonic() - self.heard < HEARTBEAT_S:
            return
        vid, (title, _) = next(reversed(self.running.items()))
        what = (
            f"compiling {self.percent[vid]}" if vid in self.percent else f"running {title.split('] ', 1)[0]}]"
        )
        self._say(f"still {what}, {_duration(time.monotonic() - self.began)}{self.estimate}")

    def _tick(self) -> None:
        while not self._stop.wait(HEARTBEAT_S / 6):
            self.beat()

    def _say(self, text: str) -> None:
        self.heard = time.monotonic()
        self.echo(f"   {self.name} | {text}")

    def __call__(self, line: str) -> None:
        if self.verbose:
            self._say(line)
            return
        m = _VERTEX.match(line)
        if not m:
            if line.startswith(BUILD_RETRY):  # the build's next try (engine.run_buildx): its steps afresh
                for kept in (self.pending, self.running, self.steps, self.tail):
                    kept.clear()
            if line.startswith(("ERROR", "error:", BUILD_RETRY)):
                self._say(line)
            return
        vid, rest = m.groups()
        if _STEP.match(rest) and " FROM " not in f" {rest}" and vid not in self.steps:
            self.steps.add(vid)
            # `RUN --mount=... apt-get ...`: the command, not its mounts
            rest = _RUN_OPTIONS.sub(" ", rest, count=1)
            self.pending[vid] = rest if len(rest) <= self.width else rest[: self.width - 1] + "…"
            return
        if rest.strip() == "CACHED":
            self.pending.pop(vid, None)
            return
        if vid in self.pending:  # first sign of work (output or DONE): it runs
            title = self.pending.pop(vid)
            self.running[vid] = (title, time.monotonic())
            self._say(title)
            if self.status:
                self.status(f"{self.name}: {title}")
        said = re.sub(r"^\d+\.\d+ ", "", rest)  # step output carries its elapsed seconds first
        if said.startswith("ERROR") or said.startswith("error:"):
            for ln in self.tail.pop(vid, ()):  # the step's own last words (apt's `E:` lines) first
                self._say(f"#{vid}   {ln}")
            self._say(f"{said}" if said is rest else f"#{vid} {said}")
        elif said is not rest and vid in self.running:
            self._progress(vid, said)
        done = _DONE.match(rest)
        if done and vid in self.running:
            title, _ = self.running.pop(vid)
            self.tail.pop(vid, None)
            if float(done.group(1)) >= LONG_STEP_S:
                self._say(f"{title.split('] ', 1)[0]}] done in {float(done.group(1)):.1f} s")

    def close(self) -> None:
        """Stop the heartbeat."""
        self._stop.set()


def _duration(seconds: float | None) -> str:
    """`45 s` under a minute, else whole minutes: `12 min`."""
    s = seconds or 0.0
    return f"{s:.0f} s" if s < 60 else f"{s / 60:.0f} min"


def full_build_seconds(store: Any, name: str) -> float | None:
    """Seconds of image `name`'s newest build with no step from cache (results/builds.jsonl: what a
    build that compiles everything took here), None when it never had one: BuildSteps' estimate."""
    cold = [b for b in store.builds() if b.image == name and _built_whole(b)]
    return _seconds(cold[-1]) if cold else None


MAX_BUILD_S = 7 * 86400.0
"""A build's seconds beyond this (a week) are no figure: a hand-edited or corrupt builds.jsonl."""


def _seconds(b: Any) -> float | None:
    """A build record's build_seconds when it is a figure (finite, 0 to MAX_BUILD_S), else None: what a
    hand-edited builds.jsonl says (NaN, -5, 1e300) is never an estimate."""
    v = stats.finite_number(getattr(b, "build_seconds", None))
    return v if v is not None and 0 <= v <= MAX_BUILD_S else None


def _built_whole(b: Any) -> bool:
    """Whether build record `b` built every step (none from cache, and it counted its steps)."""
    cached, steps = _cache(b)
    return cached == 0 and (steps or 0) > 0


def _cache(b: Any) -> tuple[Any, Any]:
    """(cached_steps, steps) of a build record; None where it predates them."""
    cached, steps = getattr(b, "cached_steps", None), getattr(b, "steps", None)
    return (cached if isinstance(cached, int) else None), (steps if isinstance(steps, int) else None)


def previous_build_note(store: Any, name: str) -> str:
    """`; previous build 2.5 s, 9 of 9 steps from cache; last build of every step 509.2 s` from the
    image's build records in results/builds.jsonl (an estimate for this one); "" when never built."""
    mine = [b for b in store.builds() if b.image == name]
    if not mine:
        return ""
    cached, steps = _cache(mine[-1])
    took = _seconds(mine[-1])
    note = f"; previous build {took:.1f} s" if took is not None else "; previous build's time unknown"
    if steps is not None and cached is not None:
        note += f", {cached} of {steps} steps from cache"
    cold = [b for b in mine if _built_whole(b)]
    if cold and cold[-1] is not mine[-1] and (full := _seconds(cold[-1])) is not None:
        note += f"; last build of every step {full:.1f} s"
    return note
