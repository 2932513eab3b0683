"""Orchestration of `toolkit bench`: decide once (toolkit.bench.decide: the image's devices here, its build,
the device profile, the model's format and file, the cases its runner will measure) what happens to every
(image, model) pair, count the plan from those decisions, then carry them out in order: each `run` goes to its
runner (toolkit.core.registry: llama-bench, vLLM, SGLang) as a RunContext.

Before anything runs: the plan line, results/ writable, one benchmark per engine, model files checked by their
runner's preflight. Exit paths say what was saved. The module never prints: progress goes to the `events`
callback, which the CLI renders."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from typing import Any

from toolkit.bench import canary, guard
from toolkit.bench.decide import Decision, check_models, decide
from toolkit.bench.runners.base import BenchOptions, Events, Outcome, memory_limit
from toolkit.core import invocation, signals, startup
from toolkit.core import registry as runners
from toolkit.core.errors import BadInput, EngineUnavailable, FileSystemError, RunInterrupted
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.host import info as hostinfo
from toolkit.matrix.api import ImageSpec, LoadedMatrix, ModelSpec
from toolkit.results.records import ResultStore, Saver

__all__ = ["run_bench", "plan_run", "CONFIRM_CASES"]


CONFIRM_CASES = 1000
"""A run of more test cases than this (all images x models, every runner's `cases`) needs --yes."""


def run_bench(
    lm: LoadedMatrix,
    images: list[ImageSpec],
    models: list[ModelSpec],
    store: ResultStore,
    opts: BenchOptions,
    events: Events = lambda *a, **k: None,
) -> list[Outcome]:
    """Benchmark every selected image with every selected model that its runner accepts.

    Before anything runs: the plan (case count, estimated duration; more than CONFIRM_CASES cases need
    opts.yes, else BadInput), results/ writable (FileSystemError, exit 8), one benchmark per results folder
    (results/.lock) and per engine (ConcurrentRun, exit 9, unless opts.allow_concurrent; leftover containers
    of runs that are gone are removed), model files checked (BadInput). Every record is written as soon as its
    test completes. Exit paths say what was saved, counted: Ctrl-C/SIGTERM -> RunInterrupted (130), the engine
    gone -> EngineUnavailable (5), a results write failing -> FileSystemError (8). `events("note", text=...)`
    carries the plan and guard notes; `events("outcome", outcome=...)` each (image, model)'s Outcome as it is
    known, in the order they are said; the list returned keeps the matrix's order."""
    gpus = devices.detect_gpus()
    if not opts.dry_run:  # a dry run reads no results and checks no model file
        memory_limit(lm, opts)  # a bad --memory fails before anything starts
        check_models(lm, models, images)  # bad input fails before the engine is asked
    decisions = decide(lm, images, models, store, gpus, opts)
    host: dict[str, Any] = {}
    guards: tuple[guard.RunGuard, guard.ResultsLock] | None = None
    if opts.dry_run:  # the case count and, from earlier runs, the time: what the real run would say first
        events("note", text=dry_plan(lm, decisions, opts))
    else:
        _confirm_plan(lm, decisions, opts, events)
        guard.check_writable(store.root)
        host = _host_facts()
        guards = rg, lock = _take_guards(store, opts, events)
        opts.saver = Saver(store, concurrent=lambda: rg.others() + lock.others())
    saver = opts.saver or Saver(store)
    outcomes: list[Outcome] = []
    try:
        for d in decisions:  # what will not run is said before anything runs
            if d.status != "run" or d.ctx is None:
                events("outcome", outcome=d.outcome())
        startup.started()  # what the run needs is loaded: the collector back on (cli.bench paused it)
        checked = {} if opts.dry_run else _canaries(decisions, events)
        for d in decisions:
            outcomes += _execute(d, host, events, checked.get(id(d)))
    except KeyboardInterrupt:  # a container created just before Ctrl-C is not yet ours to remove
        signals.hold_for_stop()
        raise _interrupted(opts, saver, decisions) from None
    except FileSystemError as err:
        raise FileSystemError(f"{err}; {saver.summary()}") from None
    except Exception as err:  # the engine gone: EngineLost from a running container, or any later call
        if opts.dry_run or not (isinstance(err, EngineUnavailable) or engine.is_connection_error(err)):
            raise
        raise _engine_gone(err, saver) from None
    finally:
        for held in guards or ():
            held.release()
    return outcomes


RESUMED_PLAN = (
    "plan: nothing left to measure: every case was measured before on its image digest + model (--resume)"
)


def _confirm_plan(lm: LoadedMatrix, decisions: list[Decision], opts: BenchOptions, events: Events) -> None:
    """Say the plan line; BadInput for more than CONFIRM_CASES cases without opts.yes."""
    plan = plan_run(lm, decisions)
    if not plan and opts.resume and any(d.status == "run" for d in decisions):
        plan = RESUMED_PLAN
    if plan:
        events("note", text=plan)
    if _cases_total(lm, decisions) > CONFIRM_CASES and not opts.yes:
        raise BadInput(
            f"{lm.path}: bench: {plan}; that is more than {CONFIRM_CASES} test cases: pass --yes to run "
            "them, or cut the axes"
        )


DRY_PLAN = "plan (dry run: every image as on a host that has its devices, models as if present): "


def dry_plan(lm: LoadedMatrix, decisions: list[Decision], opts: BenchOptions) -> str:
    """A dry run's plan line: plan_run over every pair it shows. Where some pair would not run here (its
    image's devices are not on this host: the command is shown with an example device profile; its
    model is absent or refused), the line says the dry run counts them as on a host that has them and
    how many cases a real run here would measure. More than CONFIRM_CASES cases without opts.yes: it
    says the real run needs --yes (the real run refuses them, exit 4)."""
    line = plan_run(lm, decisions)
    if not line and opts.resume and any(d.status == "run" and d.here for d in decisions):
        return RESUMED_PLAN
    if not line:
        return "plan: no test case would run here"
    total = _cases_total(lm, [d for d in decisions if d.cases])
    here = _cases_total(lm, [d for d in decisions if d.cases and d.here])
    if here != total:
        line = DRY_PLAN + line.removeprefix("plan: ") + f"; here a real run would measure {here}"
    if total > CONFIRM_CASES and not opts.yes:
        line += f"; more than {CONFIRM_CASES} test cases: the real run needs --yes"
    return line


def _host_facts() -> dict[str, Any]:
    """The host facts every record carries, with the engine's and the toolkit's own version and commit
    (hostinfo.toolkit_source); results get published: only the parameters that change numbers are kept
    (no kernel command line, no hostname)."""
    host = hostinfo.host_facts()
    host.pop("cmdline", None)
    host.pop("hostname", None)
    host["docker"] = engine.engine_info(buildx=False)
    host["toolkit"] = hostinfo.toolkit_source()
    return host


def _take_guards(
    store: ResultStore, opts: BenchOptions, events: Events
) -> tuple[guard.RunGuard, guard.ResultsLock]:
    """One benchmark per results folder (whatever its engine), then one per engine: both started
    (ConcurrentRun unless opts.allow_concurrent), returned in the order they are released; the lock is
    released again if the engine's guard cannot start."""
    engine_id = engine.engine_id()
    lock = guard.ResultsLock(store.root, opts.run_id, engine_id)
    lock.start(allow_concurrent=opts.allow_concurrent, note=lambda text: events("note", text=text))
    try:
        rg = guard.RunGuard(opts.run_id, engine_id)
        rg.start(allow_concurrent=opts.allow_concurrent, note=lambda text: events("note", text=text))
    except BaseException:
        lock.release()
        raise
    return rg, lock


def _interrupted(opts: BenchOptions, saver: Saver, decisions: list[Decision]) -> RunInterrupted:
    """The error a Ctrl-C or SIGTERM stops the run with, once the run's containers are removed (or
    could not be), saying what was saved and what `--resume` will do (_resume_hint), or what the caller
    says instead (opts.again: tune, reproduce)."""
    try:
        engine.remove_orphans(run_id=opts.run_id)
        removed = "the toolkit's containers were removed"
    except Exception as err:  # the engine may be what went away
        removed = f"its containers could not be removed ({str(err)[:120]}); the next run removes them"
    # signals stay held: a further Ctrl-C must not kill the process while it reports and exits
    return RunInterrupted(
        f"interrupted: {removed}; {saver.summary()}; {opts.again or _resume_hint(decisions)}"
    )


RESUME_HINT = "`{bench} --resume` continues where this run stopped"
"""The interrupted bench's last words (`resume_hint`: {bench} is this invocation's `toolkit bench` with its
--matrix/--results and its own options, invocation.again); `toolkit reproduce`, which has no --resume, says its own
(publish.reproduce)."""

NOTHING_TO_RESUME = (
    "every case of this run was measured before on its image digest + model, so `{bench} --resume` "
    "has nothing to measure (the report shows each test's newest measurement: this run's for the tests it "
    "completed, earlier runs' for the rest); `{bench}` measures them all again"
)
"""The interrupted bench's last words where --resume would measure nothing: a second run of a sweep
measured before."""


def resume_hint(text: str = RESUME_HINT) -> str:
    """RESUME_HINT (or NOTHING_TO_RESUME) naming this invocation's `toolkit bench` with the options it was
    given (invocation.again: the same images, models, memory limit, ...)."""
    return text.format(bench=invocation.again("bench"))


def _resume_hint(decisions: list[Decision]) -> str:
    """RESUME_HINT, or NOTHING_TO_RESUME where the pairs this run was to measure have no case left that
    `--resume` would measure (each runner's `cases` with resume: llama-bench's not yet measured on the
    digest + model, read from results/ as --resume reads them). A reproduction (pinned images: it has no
    --resume and says its own), or results that cannot be read now, keep RESUME_HINT."""
    pairs = [d for d in decisions if d.status == "run" and d.ctx is not None and d.cases]
    if not pairs or any(d.ctx and d.ctx.opts.pinned for d in pairs):
        return resume_hint()
    try:
        left = sum(
            len(runners.get(d.spec.runner).cases(replace(d.ctx, opts=replace(d.ctx.opts, resume=True))))
            for d in pairs
            if d.ctx is not None
        )
    except Exception:  # the hint must not replace the interrupt's message: say the general one
        return resume_hint()
    return resume_hint(RESUME_HINT if left else NOTHING_TO_RESUME)


def _engine_gone(err: Exception, saver: Saver) -> EngineUnavailable:
    """The error the run stops with when the engine went away (`err`), saying what was saved."""
    why = (
        str(err)
        if isinstance(err, EngineUnavailable)
        else f"{engine.engine_label()} connection lost ({str(err)[:160]})"
    )
    return EngineUnavailable(
        f"{why}; {saver.summary()}. Restart the engine (`./scripts/setup-host.sh`) and run "
        f"`{invocation.command('bench', '--resume')}`: containers left behind are removed at the next start"
    )


def _starts(lm: LoadedMatrix, d: Decision) -> int:
    """How often a pair's cases are measured: `bench.runs` container starts for llama-bench (process-
    level repetitions), once for the other runners."""
    return lm.m.bench.runs if d.spec.runner == "llama-bench" else 1


def _cases_total(lm: LoadedMatrix, pairs: list[Decision]) -> int:
    """Test cases of the whole run, every runner's (see decide), each time it is measured."""
    return sum(len(p.cases) * _starts(lm, p) for p in pairs)


def plan_run(lm: LoadedMatrix, decisions: list[Decision]) -> str:
    """One line: how many test cases this run has (over `decisions`, see decide) and how long they took
    before ("" when the run has no cases). The estimate is measured, never assumed: each pair's
    runner's `estimate` (the newest ok record of the same test on this host) plus each pair's canary
    as it took last time on that digest (canary.estimate_seconds); cases never measured before are
    counted as unknown. Start-up and model load are not included."""
    pairs = [d for d in decisions if d.cases]
    total = _cases_total(lm, pairs)
    if not total:
        return ""  # nothing left to resume, or nothing runs here: each says why in its own line
    known, seconds, canaries = 0, 0.0, 0
    for p in pairs:
        assert p.ctx is not None  # a decision with cases runs
        k, s = runners.get(p.spec.runner).estimate(p.ctx, p.cases)
        known, seconds = known + k * _starts(lm, p), seconds + s * _starts(lm, p)
        if k and (took := canary.estimate_seconds(p.ctx)) is not None:
            canaries, seconds = canaries + 1, seconds + took
    per_run = Counter(p.per_run for p in pairs)
    every = sum(p.per_run * _starts(lm, p) for p in pairs)
    shape = " + ".join(
        f"{k} image/model pair{'s' if k > 1 else ''} x {n} case{'s' if n > 1 else ''}"
        for n, k in sorted(per_run.items())
    )
    reps = sorted({int(c.get("repetitions", lm.m.bench.repetitions)) for p in pairs for c in p.cases})
    line = (
        f"plan: {total} test cases ({shape}"
        + (
            f", each in {lm.m.bench.runs} processes (bench.runs)"
            if any(_starts(lm, p) > 1 for p in pairs)
            else ""
        )
        + (f", {every - total} already measured: --resume" if every != total else "")
        + f", {reps[0] if len(reps) == 1 else f'{reps[0]}-{reps[-1]}'} repetitions each"
        + (
            f"; {depth} of the {total} in depth sweeps: models[].depth"
            if (depth := _depth_cases(lm, pairs))
            else ""
        )
        + ")"
    )
    if known == 0 or not math.isfinite(seconds):
        return line + "; no earlier run of these tests to estimate the duration from"
    part = (
        "" if known == total else f" for the {known} cases measured before ({total - known} never measured)"
    )
    with_canary = f" and {canaries} correctness canar{'y' if canaries == 1 else 'ies'}" if canaries else ""
    return (
        line + f"; estimated measuring time {_duration(seconds)}{part}{with_canary}, from earlier runs, plus "
        "start-up"
        + (
            "; all measured before (`--resume` measures only what an image digest + model lacks)"
            if known == total
            and not any(p.ctx and p.ctx.opts.pinned for p in pairs)  # reproduce: no --resume
            else ""
        )
    )


def _depth_cases(lm: LoadedMatrix, pairs: list[Decision]) -> int:
    """Test cases of the run measured by depth sweeps (a case's `sweep` is "depth"), each time it is."""
    return sum(sum(c.get("sweep") == "depth" for c in p.cases) * _starts(lm, p) for p in pairs)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "unknown"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _canaries(decisions: list[Decision], events: Events) -> dict[int, canary.CanaryResult]:
    """The correctness canary (toolkit.bench.canary) of every pair that will measure, before any sweep:
    CPU images first (the control), each result stored and said in one line. id(decision) -> result."""
    todo = [
        d for d in decisions if d.status == "run" and d.ctx is not None and d.cases and canary.enabled(d.ctx)
    ]
    todo.sort(key=lambda d: d.spec.backend != "cpu")  # stable: the matrix's order within each
    controls: dict[str, canary.CanaryResult] = {}
    out: dict[int, canary.CanaryResult] = {}
    for d in todo:
        assert d.ctx is not None
        res = canary.run_canary(d.ctx, controls)
        if res is None:
            continue
        try:
            canary.save(d.ctx.store, res)
        except OSError as err:
            raise FileSystemError(f"writing the canary result: {err}") from None
        events("note", text=f"{d.spec.name} x {d.ctx.model.name}: {res.line()}")
        out[id(d)] = res
    return out


def _execute(
    d: Decision, host: dict[str, Any], events: Events, checked: canary.CanaryResult | None = None
) -> list[Outcome]:
    """Carry out one decision: a `run` goes to its runner with the host facts (and the device profile
    it was given), the run's events and its canary's result (`checked`: on every record, and the flag
    `wrong-output` when it is); a dry run shows the canary's command first; any other gives its line."""
    if d.status != "run" or d.ctx is None:
        return [d.outcome()]
    if host:
        host = {**host, "device_profile": d.ctx.profile.record()}
    first = canary.dry_run_outcome(d.ctx) if d.ctx.opts.dry_run else None
    counted = PairProgress(events, len(d.cases) * _starts(d.ctx.lm, d))
    ctx = canary.with_canary(replace(d.ctx, host=host, events=counted), checked)
    done = ([first] if first else []) + runners.get(d.spec.runner).run(ctx)
    for o in done:  # said as each pair ends (what did not run was said before anything ran)
        events("outcome", outcome=o)
    return done


class PairProgress:
    """An (image, model) pair's progress events counted from the plan (`total`: its test cases times its
    starts, as the plan line counts them), where each process of the pair counts only its own (`test 1/2`,
    `test 2/2`, not `test 1/1` twice). A later process's `start` continues the pair's bar, and `done` ends it
    once the counted tests reach the total (the events pass on otherwise unchanged)."""

    def __init__(self, events: Events, total: int) -> None:
        self.events, self.total, self.before, self.current = events, total, 0, 0

    def __call__(self, kind: str, **kw: Any) -> None:
        if kind in ("start", "progress", "done"):
            if kind == "start":
                self.before, self.current = self.before + self.current, int(kw.get("total") or 0)
            total = max(self.total, self.before + self.current)
            if (kind == "start" and self.before) or (kind == "done" and self.before + self.current < total):
                return  # the pair's bar runs on: a later process of it continues the count
            kw = {**kw, "total": total} | ({"done": self.before + kw["done"]} if kind == "progress" else {})
        self.events(kind, **kw)
