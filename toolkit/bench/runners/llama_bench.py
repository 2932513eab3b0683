"""The llama-bench runner: one container, one llama-bench process over the crossed matrix per
(image, model); every row a record the moment llama-bench prints it.

Before the run, a pre-flight (`llama-bench --list-devices` in the image must show a device of the
image's backend, and not only a software one unless opted in); during it, each row is judged on the
row and on everything printed before it (CPU fallback, software device, model file changed); after
it, a process failure (crash, kill, OOM, timeout, Ctrl-C, engine gone) is one failed row, the
completed tests kept. `bench.runs: N` repeats the process N times (process-level repetitions), and
each combination of the `bench.env` axis is a container of its own (the variables set with -e,
recorded with each record as `env`, and the container's effective environment as `environment`).
Facts (flags, JSONL fields, clamping): shared/reference/llama-bench.md, llama.cpp
tools/llama-bench/llama-bench.cpp at 0c1e57098.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import time
from pathlib import Path
from typing import Any, ClassVar

from toolkit.bench.observe import kernel_fault, merge_flags
from toolkit.bench.runners.base import (
    Case,
    Outcome,
    RunContext,
    Step,
    check_model_file,
    check_sha,
    container_spec,
    effective_environment,
    image_ref,
    log_text,
    memory_limit,
    model_file_here,
    resolve_model,
    run_observer,
    shader_cache_volume,
    stale_marks,
    write_log,
)
from toolkit.core import jsonsafe, signals
from toolkit.core.errors import BadInput
from toolkit.core.types import utc_now
from toolkit.matrix.api import CASE_DEFAULTS, DEPTH_LOG_SUFFIX, BenchAxes, ImageSpec, LoadedMatrix, ModelSpec
from toolkit.models import twin
from toolkit.results import identity
from toolkit.results import index as resultindex
from toolkit.results.records import NO_TEST, BenchRecord, ModelRef, ResultStore, Saver
from toolkit.runtimes.llama_bench import args as lb_args
from toolkit.runtimes.llama_bench import check, validity
from toolkit.runtimes.llama_bench import output as llamabench


class LlamaBenchRunner:
    """llama-bench in llama.cpp images (cpu, vulkan, rocm). Settings: the `bench:` axes (no block of
    its own); its test identity is the raw llama-bench record (toolkit.results.identity)."""

    name: ClassVar[str] = "llama-bench"
    model_formats: ClassVar[tuple[str, ...]] = ("gguf",)
    settings_key: ClassVar[str | None] = None
    settings_model: ClassVar[Any] = None

    def preflight(self, lm: LoadedMatrix, model: ModelSpec, path: Path) -> None:
        """GGUF magic, tensor extents inside the file, readable by the container's user (BadInput)."""
        check_model_file(lm, model, path)

    def plan(self, ctx: RunContext) -> list[Step]:
        """The GPU-path probe (`llama-bench --list-devices`, GPU images), then one `docker run ...
        llama-bench ...` per process-level run (bench.runs) and per combination of the `bench.env` axis,
        then those of the model's depth sweep (llama_depth.depth_plan)."""
        path, _ = resolve_model(ctx.lm, ctx.model, dry_run=True)
        assert path is not None
        steps = []
        if ctx.spec.backend != "cpu":  # the GPU-path probe (preflight_devices) runs before the sweep
            steps.append(Step("GPU-path probe", ctx.engine.run_command(_probe_spec(ctx))))
        steps += _steps(ctx, path, [(env, ctx.lm.m.bench) for env in ctx.lm.m.bench.env_combinations()])
        return steps + _steps(ctx, path, _depth().depth_plan(ctx, resume=False).processes, depth=True)

    def cases(self, ctx: RunContext) -> list[Case]:
        """The crossed cases of `bench:` (times the `env` combinations), then the depth sweep's
        (llama_depth.depth_plan, each with sweep="depth"); with --resume those not yet measured on this
        digest + model."""
        path = model_file_here(ctx.lm, ctx.model)
        out: list[Case] = []
        for env in ctx.lm.m.bench.env_combinations():
            if ctx.opts.resume and path is not None:
                sha = check_sha(ctx.lm, ctx.model, path)
                out += missing_cases(ctx.store, ctx.build.digest, sha, ctx.lm.m.bench, env)
            else:
                out += [{**c, "env": env} if env else c for c in ctx.lm.m.bench.cases()]
        return out + _depth().depth_plan(ctx).cases

    def notes(self, ctx: RunContext) -> list[str]:
        """Lines for the plan, before anything runs: the depths the model's depth sweep leaves out
        (one reason each), or why their fit was not checked (llama_depth.fitting_depths)."""
        return _depth().depth_plan(ctx, resume=False).notes

    def estimate(self, ctx: RunContext, cases: list[Case]) -> tuple[int, float]:
        """measured_seconds plus the untimed depth fill and restores (llama_depth.estimate)."""
        return _depth().estimate(ctx, cases)

    def settings_from_records(self, records: list[BenchRecord], base: dict[str, Any]) -> None:
        """None: llama-bench has no block of its own (its `bench:` axes come with the run)."""
        return None

    def run(self, ctx: RunContext) -> list[Outcome]:
        """The pair resolved once (`_pair`: model file, sha256, memory limit, the GPU-path probe), then
        bench.runs container starts of the crossed matrix per `env` combination (a combination stops
        early on a failed or resumed run), then those of the model's depth sweep (llama_depth), each
        process on its own: a failed main sweep does not stop the depth sweep, a model file changed
        since the pair hashed it does (its rows would be void). With --resume and nothing missing, the
        one line says so: no probe, no container. The cases are those `toolkit bench` decided
        (ctx.cases), else asked here."""
        if (
            ctx.opts.resume
            and model_file_here(ctx.lm, ctx.model)
            and not (self.cases(ctx) if ctx.cases is None else ctx.cases)
        ):
            main = len(ctx.lm.m.bench.cases()) * len(ctx.lm.m.bench.env_combinations())
            return [_all_measured(ctx, main + len(_depth().depth_plan(ctx, resume=False).cases))]
        pair = _pair(ctx)
        if isinstance(pair, Outcome):  # the model absent, the GPU path unusable: said once
            return [pair]
        out = []
        if ctx.opts.dry_run and ctx.spec.backend != "cpu":  # what preflight_devices would run first
            probe = ctx.engine.run_command(_probe_spec(ctx))
            out.append(Outcome(ctx.spec.name, ctx.model.name, "dry-run", "device probe", command=probe))
        for env, axes, what, tag in _groups(ctx):
            if (changed := _model_changed(ctx, pair)) is not None:
                return out + [changed]
            out += _processes(ctx, pair, env, axes, what, tag)
        return out


def _groups(ctx: RunContext):
    """(env, axes, what, tag) of each group of processes of the pair, in order: the matrix's per `env`
    combination (axes None: the matrix's, resumed per --resume; tag -env<k>), then the depth sweep's
    (llama_depth.depth_plan of the decided cases, ctx.cases; else asked once the main sweep ran)."""
    combos = ctx.lm.m.bench.env_combinations()
    for k, env in enumerate(combos):  # each combination its own log and container: -env<k>
        yield env, None, "", f"-env{k + 1}" if len(combos) > 1 else ""
    resume = ctx.opts.resume and not ctx.opts.dry_run
    depth = _depth().depth_plan(ctx, resume=resume, decided=ctx.cases).processes
    for k, (env, axes) in enumerate(depth):
        what = f"depth sweep, depths {','.join(map(str, axes.n_depth))}"
        yield env, axes, what, f"-{k + 1}" if len(depth) > 1 else ""


def _model_changed(ctx: RunContext, pair: _Pair) -> Outcome | None:
    """The line that stops the pair when its model file changed since `_pair` hashed it (every row
    measured from then on would be void: RowSink.row), else None; a dry run reads no model file."""
    if ctx.opts.dry_run or file_identity(pair.path) == pair.hashed:
        return None
    why = (
        f"model file {pair.path} changed during the run: its sha256 {pair.sha[:12]} no longer describes it; "
        "the pair's remaining processes were not started"
    )
    return Outcome(ctx.spec.name, ctx.model.name, "failed", why)


@dataclasses.dataclass(frozen=True)
class _Pair:
    """What every llama-bench process of one (image, model) run shares, resolved once by `_pair`: the
    model file `path`, its sha256 `sha` ("" in a dry run: no model file read), `hashed` (its
    file_identity when hashed: a row measured after the bytes changed is void), the container memory
    limit (bytes; None: none) and the GPU-path probe's (facts, flags) for every record."""

    path: Path
    sha: str
    hashed: tuple[int, ...]
    memory: int | None
    probe: tuple[dict[str, Any], list[str]] = ({}, [])


def _pair(ctx: RunContext) -> _Pair | Outcome:
    """The pair's shared facts (`_Pair`), or the outcome that ends the pair first: the model absent
    (skipped), a GPU path the probe finds unusable (failed). Raises BadInput for a memory size it
    cannot read or a model file off its sha256 pin."""
    lm, spec, model, opts = ctx.lm, ctx.spec, ctx.model, ctx.opts
    path, reason = resolve_model(lm, model, dry_run=opts.dry_run)
    if path is None:
        return Outcome(spec.name, model.name, "skipped", reason)
    memory = memory_limit(lm, opts)
    sha = "" if opts.dry_run else check_sha(lm, model, path)  # a dry run reads no model file
    pair = _Pair(path, sha, file_identity(path), memory)  # the bytes `sha` describes
    if opts.dry_run:
        return pair
    why, facts, flags = preflight_devices(ctx)
    if why:
        return Outcome(spec.name, model.name, "failed", why)
    return dataclasses.replace(pair, probe=(facts, flags))


def _depth():
    """toolkit.bench.runners.llama_depth (it imports this module: imported when first used)."""
    from toolkit.bench.runners import llama_depth

    return llama_depth


def _processes(
    ctx: RunContext,
    pair: _Pair,
    env: dict[str, str | None],
    axes: BenchAxes | None = None,
    what: str = "",
    tag: str = "",
) -> list[Outcome]:
    """bench.runs container starts of `axes` (default: the matrix's, resumed per --resume) with the env
    combination `env`, each line's reason prefixed by what it is (`what`, else "sweep" in a dry run;
    the run, the env); stops early on a failed, resumed or dry run. Each process has its own log and
    container name: `-depth` for a depth sweep, `tag` (the env combination), `-run<i>` (bench.runs)."""
    runs, out, n = ctx.lm.m.bench.runs, [], len(ctx.lm.m.bench.cases())
    todo = [c for c in ctx.cases or [] if "sweep" not in c and same_env(c, env)]
    if ctx.opts.dry_run and ctx.opts.resume and axes is None and ctx.cases is not None and len(todo) < n:
        sweep = f"sweep, resumed: {len(todo)} of {n} cases{_main_sweep(ctx)} were missing"  # as _resumed
        subs = [bench_one(ctx, pair, axes=a, env=env) for a in resume_axes(ctx.lm.m.bench, todo)]
        return [dataclasses.replace(o, reason=sweep) for o in subs] or [
            _all_measured(ctx, n, main_sweep=True)
        ]
    for i in range(runs):  # process-level repetitions: decode speed can be fixed at process start
        opts = dataclasses.replace(ctx.opts, process_run={"index": i + 1, "of": runs})
        one = dataclasses.replace(ctx, opts=opts) if runs > 1 else ctx
        suffix = (DEPTH_LOG_SUFFIX if axes is not None else "") + tag + (f"-run{i + 1}" if runs > 1 else "")
        o = bench_one(one, pair, axes=axes, env=env, log_suffix=suffix)
        notes = [what] if what else (["sweep"] if o.status == "dry-run" else [])
        notes += ([f"run {i + 1} of {runs}"] if runs > 1 else []) + (
            [f"env {_env_label(env)}"] if env else []
        )
        if notes:
            o.reason = ", ".join(notes) + (f": {o.reason}" if o.reason else "")
        out.append(o)
        if o.status in ("failed", "resumed", "dry-run"):
            break
    return out


def _steps(ctx: RunContext, path: Path, processes: list, depth: bool = False) -> list[Step]:
    """The commands of `processes` ((env combination, axes) each; the depth sweep's with `depth`,
    llama_depth.depth_plan, resume off: a plan shows the whole run), bench.runs of each."""
    runs, steps = ctx.lm.m.bench.runs, []
    for env, axes in processes:
        rs = _run_spec(ctx, axes, path, env, memory_limit(ctx.lm, ctx.opts))
        what = (
            f"llama-bench depth sweep (depths {','.join(map(str, axes.n_depth))})" if depth else "llama-bench"
        )
        where = f", env {_env_label(env)}" if env else ""
        steps += [
            Step(f"{what}, run {i + 1} of {runs}{where}", ctx.engine.run_command(rs)) for i in range(runs)
        ]
    return steps


def _env_label(env: dict[str, str | None]) -> str:
    return " ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in sorted(env.items()))


def _run_spec(
    ctx: RunContext,
    axes: BenchAxes,
    path: Path,
    env: dict[str, str | None] | None,
    memory: int | None,
    suffix: str = "",
):
    """The container `toolkit-<run>-<image>-<model><suffix>` (suffix: which process of the pair, as its
    log's) of one llama-bench process over `axes` on model file `path`, `memory` bytes at most,
    with the `bench.env` combination `env` set (-e; not over the device selection and caches the toolkit
    sets; a variable None is not passed: unset, unless the image's own ENV sets it: see `environment`)."""
    command = ["llama-bench"] + lb_args.bench_args(axes, f"/models/{path.name}")
    shaders = shader_cache_volume(ctx)  # the Vulkan image's Mesa cache volume (None for others)
    rs = container_spec(
        ctx.build.digest,
        command,
        ctx.profile,
        model_dir=path,
        shader_volume=shaders,
        run_id=ctx.opts.run_id,
        name=f"toolkit-{ctx.opts.run_id}-{ctx.spec.name}-{ctx.model.name}{suffix}"[:120],
        memory_bytes=memory,
        model_file=True,
    )
    if env:
        own = {k: v for k, v in env.items() if k not in rs.environment and v is not None}
        rs.environment = {**rs.environment, **own}
    return rs


PROBE_TIMEOUT_S = 300
"""Seconds the GPU-path probe may take (listing devices takes ~1 s; a hung driver never ends)."""


def preflight_devices(ctx: RunContext) -> tuple[str | None, dict[str, Any], list[str]]:
    """The GPU-path probe: `llama-bench --list-devices` in the image, with the run's devices, on this
    host, before the sweep. Returns (why the GPU is unusable or None, the probe's facts for every
    record, the flags it sets on every record): what it printed read by llamabench.probe_facts,
    probe_problem (which refuses a non-zero exit too) and probe_flags; the facts hold its command too.
    A probe that did not finish in PROBE_TIMEOUT_S makes the GPU path unusable, said so."""
    spec = ctx.spec
    if spec.backend == "cpu":
        return None, {}, []
    rs = _probe_spec(ctx)
    out = ctx.engine.run_container(rs, timeout=PROBE_TIMEOUT_S)
    facts = llamabench.probe_facts(spec.backend, out.stdout, out.stderr, exit_code=out.exit_code)
    facts["command"] = ctx.engine.run_command(rs)
    why: str | None
    if out.timed_out:
        why = f"GPU-path probe: `llama-bench --list-devices` did not finish in {PROBE_TIMEOUT_S} s (a hung driver or device)"
    else:
        text = out.stdout + "\n" + out.stderr
        why = llamabench.probe_problem(
            spec.backend, facts, text, allow_software_gpu=ctx.opts.allow_software_gpu
        )
    return why, facts, llamabench.probe_flags(spec.backend, facts, ctx.profile.gpu_details)


def _probe_spec(ctx: RunContext):
    """The container of the GPU-path probe: `llama-bench --list-devices` with the run's devices, no
    model and no shader cache (listing devices compiles no shader; mounting the cache would create
    its volume before the sweep asks whether it starts cold)."""
    return container_spec(
        ctx.build.digest,
        ["llama-bench", "--list-devices"],
        ctx.profile,
        model_dir=None,
        shader_volume=None,
        run_id=ctx.opts.run_id,
        name=f"toolkit-pre-{ctx.opts.run_id}-{ctx.spec.name}",
    )


def _resumed(ctx: RunContext, pair: _Pair, env: dict[str, str | None] | None) -> Outcome | None:
    """With opts.resume: the outcome of measuring only the cases not yet measured on this digest +
    the pair's model sha256 (one bench_one per cross product they form), or of nothing when none is
    missing (those `toolkit bench` decided, ctx.cases, else asked here); None when every case is missing
    (the whole matrix runs as usual)."""
    lm, spec, model = ctx.lm, ctx.spec, ctx.model
    todo = (
        missing_cases(ctx.store, ctx.build.digest, pair.sha, lm.m.bench, env)
        if ctx.cases is None
        else [c for c in ctx.cases if "sweep" not in c and same_env(c, env)]
    )
    n_all = len(lm.m.bench.cases())
    if not todo:
        return _all_measured(ctx, n_all, main_sweep=True)
    if len(todo) == n_all:
        return None
    parts = [bench_one(ctx, pair, axes=sub, env=env) for sub in resume_axes(lm.m.bench, todo)]
    bad = [o for o in parts if o.status != "ok"]
    return Outcome(
        spec.name,
        model.name,
        bad[0].status if bad else "ok",
        (f"{bad[0].reason} " if bad else "")
        + f"(resumed: {len(todo)} of {n_all} cases{_main_sweep(ctx)} were missing)",
        sum(o.records for o in parts),
        parts[-1].command,
        {k: round(sum(o.timing.get(k, 0.0) for o in parts), 3) for k in parts[-1].timing},
    )


def _all_measured(ctx: RunContext, n: int, main_sweep: bool = False) -> Outcome:
    """The `resumed` line of `n` cases with nothing left to measure on this digest + model: every case of
    the pair as the plan counts them (the matrix's per env combination and the depth sweep's), or with
    `main_sweep` the main sweep's alone (of one env combination where there are several), said so in a
    run and in a dry run alike, never `of the matrix` while the depth sweep still measures (newcomers
    nc43, nc50 read `all 6 cases of the matrix already measured` beside a plan of 8)."""
    what = _main_sweep(ctx) if main_sweep else ""
    return Outcome(
        ctx.spec.name,
        ctx.model.name,
        "resumed",
        f"nothing to measure: all {n} cases{what} already measured for this digest + model",
    )


def _main_sweep(ctx: RunContext) -> str:
    """What a resumed line's count of the main sweep's cases counts, beside a plan line that counts the
    depth sweep's too (nc51 S3: `4 of 12 cases were missing` under a plan of 14): ` of the main sweep`,
    and ` with this env combination` where there are several."""
    several = len(ctx.lm.m.bench.env_combinations()) > 1
    return " of the main sweep" + (" with this env combination" if several else "")


@dataclasses.dataclass
class RowSink:
    """Where one llama-bench process's output goes while it runs: every stdout/stderr line is kept in
    order (the evidence for each row's verdict), progress lines become `progress` events, and each
    JSONL row becomes one record saved the moment it is printed (a row per finished test), valid or
    failed with the reason (the validity pass, a CPU fallback, the model file changed under the run, a
    value the record refuses), and a process fault its one failed row (`fault`): every record of the
    process is saved here. `base`: the record fields every row shares; `model`: the file they name."""

    spec: ImageSpec
    model: ModelRef
    allow_software_gpu: bool  # --allow-software-gpu: a row on Mesa lavapipe is a result
    repetitions: int  # bench.repetitions: a row's samples when it lists none (seconds measured)
    hashed: Any  # file_identity(model.path) when its sha256 was computed
    base: dict[str, Any]
    saver: Saver  # the run's (a canary's FlaggingSaver stands in for it)
    observer: Any  # observe.RunObserver
    events: Any
    cold: bool | None = None  # shader cache: None when the image has none
    printed: list[str] = dataclasses.field(default_factory=list)
    streamed: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    voids: list[str] = dataclasses.field(default_factory=list)
    t0: float = dataclasses.field(default_factory=time.monotonic)
    measured: float = 0.0

    def timing(self, elapsed: float, tests_s: float) -> dict[str, float]:
        """wall_s, tests_s and startup_s (seconds), and cache_cold where the image has a shader cache."""
        t = {
            "wall_s": round(elapsed, 3),
            "tests_s": round(tests_s, 3),
            "startup_s": round(max(elapsed - tests_s, 0.0), 3),
        }
        if self.cold is not None:
            t["cache_cold"] = float(self.cold)
        return t

    def row(self, raw: dict[str, Any]) -> None:
        """One llama-bench row -> one record, written now."""
        self.streamed.append(raw)
        self.measured += check.row_seconds(raw, self.repetitions)
        timing = self.timing(time.monotonic() - self.t0, self.measured)  # up to and including this test
        tokens = check.row_tokens(raw)  # the window's tokens per repetition, for the observer
        # the validity pass every import goes through too, a CPU fallback, a software device
        norm, void = validity.judge_row(
            raw, self.spec.backend, allow_software_gpu=self.allow_software_gpu, log="\n".join(self.printed)
        )
        if file_identity(Path(self.model.path)) != self.hashed:
            void = (
                f"model file {self.model.path} changed during the run: its sha256 "
                f"{self.model.sha256[:12]} no longer describes what was measured"
            )
        seen = self.observer.test(raw, tokens)
        flags = merge_flags(self.base.get("flags"), seen.get("flags"))  # stale-build (--allow-stale) first
        try:
            rec = BenchRecord(
                **{**self.base, **({"flags": flags} if flags else {})},
                created=utc_now(),
                timing=timing,
                telemetry=seen.get("telemetry"),
                **norm,
                status="failed" if void else "ok",
                error=void,
                raw=raw,
            )
        except ValueError as err:  # e.g. a non-finite tok/s: kept as a failed row, never as a number
            void = void or f"row is not a measurement: {str(err).splitlines()[-1][:160]}"
            rec = self.failed(timing, norm["test"], norm["axis"], void)
        if void:
            self.voids.append(void)
        self.saver.save(rec)

    def finish(self, stdout: str, elapsed: float) -> tuple[int, dict[str, float]]:
        """The process ended after `elapsed` seconds, `stdout` all it printed: a last row no line handed
        over (Ctrl-C, the engine lost) is saved too. (rows printed, timing: the saved rows' samples as
        tests_s, `measured`)."""
        rows = jsonsafe.parse_jsonl(stdout)
        for raw in rows[len(self.streamed) :]:
            self.row(raw)
        return len(rows), self.timing(elapsed, self.measured)

    def fault(
        self,
        timing: dict[str, float],
        error: str,
        n_rows: int,
        n_cases: int,
        log_problem: str | None,
        *,
        reraise: bool,
    ) -> None:
        """Save the one failed row that records a process fault (`reraise`: as Saver.save). A crash, kill or
        timeout does not void the tests llama-bench completed before it (a row holds every repetition of
        its test): they are kept."""
        done = f" ({n_rows} of {n_cases} tests completed and kept)" if n_rows else ""
        note = f"; log not written: {log_problem}" if log_problem else ""
        self.saver.save(self.failed(timing, NO_TEST, "prefill", error + done + note), reraise=reraise)

    def failed(self, timing: dict[str, float], test: str, axis: str, error: str) -> BenchRecord:
        """The failed record of this process named `test` on `axis`, saying `error` (no measurement: a row
        the record refuses, or the process's fault)."""
        return BenchRecord(
            **self.base, created=utc_now(), timing=timing, test=test, axis=axis, status="failed", error=error
        )

    def stdout(self, line: str) -> None:
        self.printed.append(line)
        if line.lstrip().startswith("{"):
            for raw in jsonsafe.parse_jsonl(line):
                self.row(raw)

    def stderr(self, line: str) -> None:
        self.printed.append(line)
        self.observer.line(line)
        p = llamabench.progress_of(line)
        if p:
            self.events(
                "progress", image=self.spec.name, model=self.model.name, done=p[0] - 1, total=p[1], phase=p[2]
            )


def _process_error(
    out: Any, stop: BaseException | None, timeout: float, memory: int | None, engine: Any
) -> str | None:
    """Why the llama-bench process failed (engine gone, Ctrl-C, timeout, OOM, non-zero exit), or None."""
    if isinstance(stop, engine.EngineLost):
        return str(stop)
    if stop is not None:
        return f"interrupted ({signals.stopped_by()})"
    if out.timed_out:
        return f"timed out after {timeout:.0f} s"
    if out.oom_killed:
        limit = f" (limit {memory} bytes: raise bench.memory or --memory)" if memory else ""
        return f"container was killed for running out of memory{limit}"
    if out.exit_code != 0:  # its last 3 lines, progress lines left out
        said = [ln for ln in out.stderr.splitlines() if ln.strip() and "llama-bench: benchmark" not in ln]
        return f"llama-bench exited {out.exit_code}: {' | '.join(said[-3:])[:300]}"
    return None


def _base_fields(ctx: RunContext, pair: _Pair, axes: BenchAxes, rs: Any, env, log_path) -> dict[str, Any]:
    """The record fields every row of one llama-bench process shares (`model`: the pair's model file
    with its sha256, a shape twin, toolkit fetch-model --twin, saying so: kind synthetic-twin +
    twin_of; the pair's probe facts and flags)."""
    opts, engine, build, (facts, flags), path = ctx.opts, ctx.engine, ctx.build, pair.probe, pair.path
    extras = twin.model_extras(path, pair.sha)
    model = ModelRef(
        name=ctx.model.name, path=str(path), sha256=pair.sha, size_bytes=path.stat().st_size, **extras
    )
    base = dict(
        run_id=opts.run_id,
        runner="llama-bench",
        method="llama-bench",
        image=image_ref(build, ctx.spec),
        model=model,
        command=engine.run_command(rs),
        host=ctx.host,
        log_file=str(log_path),
        limits={"memory_bytes": pair.memory},
        **({"cooldown_s": axes.cooldown_s} if axes.cooldown_s else {}),
        env=dict(env or {}),
        **({"gpu_probe": facts} if facts else {}),
        environment=effective_environment(engine, build.digest, rs.environment),
        **({"process_run": opts.process_run} if opts.process_run else {}),
        **opts.record_extra,
        **stale_marks(build),
    )
    if flags:  # no-matrix-cores: stored, like stale-build
        base["flags"] = merge_flags(base.get("flags"), flags)
    return base


def bench_one(
    ctx: RunContext,
    pair: _Pair,
    axes: BenchAxes | None = None,
    env: dict[str, str | None] | None = None,
    log_suffix="",
) -> Outcome:
    """One llama-bench process for (image, model) of `pair` (`_pair`) over `axes` (default: the matrix's), its own log
    logs/<run_id>-<model><log_suffix>.log and container toolkit-<run_id>-<image>-<model><log_suffix>;
    appends records; returns the summary line. With opts.resume and no `axes` only the cases not yet
    measured on this digest + model run (`missing_cases`), one process per cross product they form."""
    process = _prepare(ctx, pair, axes, env, log_suffix)
    return process if isinstance(process, Outcome) else _measure(process)


@dataclasses.dataclass(frozen=True)
class _Process:
    """One llama-bench process as `_prepare` resolved it: its container, where its output goes (`sink`),
    its log file below the results root `results`, the cases it measures, its timeout (s) and memory
    limit (bytes), the engine."""

    rs: Any
    sink: RowSink
    log_path: Path
    results: Path
    n_cases: int
    timeout: float
    memory: int | None
    engine: Any


def _prepare(
    ctx: RunContext, pair: _Pair, axes: BenchAxes | None, env: dict[str, str | None] | None, log_suffix: str
) -> _Process | Outcome:
    """bench_one's process resolved from `ctx` and `pair` once, or the outcome that ends it first: a dry
    run, a resumed matrix (`_resumed`)."""
    lm, spec, model, opts = ctx.lm, ctx.spec, ctx.model, ctx.opts
    resume = axes is None and opts.resume and not opts.dry_run
    axes = axes or lm.m.bench
    rs = _run_spec(ctx, axes, pair.path, env, pair.memory, log_suffix)
    if opts.dry_run:
        return Outcome(spec.name, model.name, "dry-run", command=ctx.engine.run_command(rs))
    if resume and (resumed := _resumed(ctx, pair, env)) is not None:
        return resumed
    cold = _shader_cache_cold(ctx, rs)
    log_path = ctx.store.digest_dir(ctx.build.digest) / "logs" / f"{opts.run_id}-{model.name}{log_suffix}.log"
    base = _base_fields(ctx, pair, axes, rs, env, log_path)
    observer = run_observer(ctx)
    saver = opts.saver or Saver(ctx.store)
    ref, timeout = base["model"], opts.timeout_s or axes.timeout_s
    sink = RowSink(
        spec,
        ref,
        opts.allow_software_gpu,
        axes.repetitions,
        pair.hashed,
        base,
        saver,
        observer,
        ctx.events,
        cold,
    )
    return _Process(rs, sink, log_path, ctx.store.root, len(axes.cases()), timeout, pair.memory, ctx.engine)


def _measure(p: _Process) -> Outcome:
    """Run process `p`, each row saved as it is printed (RowSink), then its log, and one failed row when
    the process failed (crash, kill, OOM, timeout, Ctrl-C, engine gone), the kernel log showed a GPU
    fault (its numbers are not trusted) or rows are missing. Ctrl-C or the engine's loss is raised again."""
    sink: RowSink = p.sink
    image, model = sink.spec.name, sink.model.name
    sink.events("start", image=image, model=model, total=p.n_cases)
    out, stop, facts = _run_observed(p)
    with signals.no_interrupt(reraise=stop is None):  # a second Ctrl-C cannot cut the save short
        log_problem = write_log_file(p.log_path, log_text(p.engine.run_command(p.rs), out), p.results)
        n_rows, timing = sink.finish(out.stdout, out.seconds)
        error = (
            _process_error(out, stop, p.timeout, p.memory, p.engine)
            or kernel_fault(facts)
            or _missing_rows(n_rows, p.n_cases)
        )
        if error:
            sink.fault(timing, error, n_rows, p.n_cases, log_problem, reraise=stop is None)
    if stop is not None:
        raise stop
    sink.events("done", image=image, model=model, total=p.n_cases)
    reason = error or (sink.voids[0] if sink.voids else "")
    return Outcome(image, model, "failed" if reason else "ok", reason, n_rows, p.rs.command, timing)


def _shader_cache_cold(ctx: RunContext, rs: Any) -> bool | None:
    """Whether the shader cache volume RunSpec `rs` mounts (a Vulkan image's) starts cold (None: none), the
    volume created if absent: warm only when it exists and a run on this digest completed before."""
    if not (shader_volume := next((m.source for m in rs.mounts if m.volume), None)):
        return None
    engine, digest = ctx.engine, ctx.build.digest
    cold = not engine.volume_exists(shader_volume) or not any(
        r.status == "ok" for r in resultindex.select(ctx.store, digests=[digest], ok_only=True)
    )
    engine.ensure_volume(shader_volume, {"org.toolkit.digest": digest})
    return cold


def _run_observed(p: _Process) -> tuple[Any, BaseException | None, dict[str, Any]]:
    """Run `p`'s container under its sink's observer, its lines to the sink: (the container's outcome,
    the Ctrl-C / SIGTERM or engine loss that stopped it, else None, the observer's facts)."""
    sink, observer, engine = p.sink, p.sink.observer, p.engine
    stop: BaseException | None = None  # Ctrl-C / SIGTERM, or the engine gone: save, then stop the run
    observer.start()
    for note in observer.notes:  # up front: a GPU not at stock power or in use before the run
        sink.events(
            "note", text=f"{sink.spec.name}: warning: {note}; its records are flagged power-not-stock"
        )
    started = {"on_start": observer.own_pid} if observer.enabled else {}
    try:
        out = engine.run_container(
            p.rs, timeout=p.timeout, on_stderr=sink.stderr, on_stdout=sink.stdout, **started
        )
    except (engine.Interrupted, engine.EngineLost) as err:
        stop, out = err, err.outcome
    finally:
        facts = observer.finish()
    return out, stop, facts


def write_log_file(path: Path, text: str, root: Path) -> str | None:
    """Write a process's log file below the results root `root` (inside the save's signal hold, `_measure`);
    None, or why it was not written (a log is not worth stopping for, a record is): a symlink or
    non-regular file there, or a link at a folder below `root`, is refused, never written through
    (base.write_log, every runner's writer)."""
    try:
        write_log(path, text, root)
        return None
    except BadInput as err:
        return str(err)
    except OSError as err:
        with contextlib.suppress(OSError):
            path.unlink()
        return f"{path}: {err.strerror or err}"


def _missing_rows(n_rows: int, n_cases: int) -> str | None:
    """Why a process that exited 0 is not "ok" for its rows: none printed, or tests silently left out."""
    if not n_rows:
        return "llama-bench printed no result rows"
    if n_rows < n_cases:
        return f"llama-bench emitted {n_rows} result rows for {n_cases} cases and exited 0"
    return None


def file_identity(path: Path) -> tuple[int, ...]:
    """(device, inode, size, mtime, ctime) of a file: any write or replace changes it (ctime cannot be set back)."""
    try:
        st = path.stat()
    except OSError:
        return ()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _case_key(case: dict[str, Any], threads: int | None) -> tuple:
    """A llama-bench case in the one test identity's normalisation (fa spellings, "all layers")."""
    key = {k: case.get(k) for k in ("n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch")}
    key["flash_attn"] = identity.norm_flash_attn(case.get("flash_attn"))
    key["n_gpu_layers"] = identity.norm_gpu_layers(case.get("n_gpu_layers"), case.get("n_layers"))
    if threads:
        key["n_threads"] = threads
    for k, default in CASE_DEFAULTS.items():  # only where the matrix asks for another value
        if case.get(k, default) not in (default, None):
            key[k] = case[k]
    if case.get("env"):
        key["env"] = tuple(sorted(case["env"].items()))
    return tuple(sorted(key.items()))


def _record_case_key(r: BenchRecord, axes: BenchAxes) -> tuple:
    """The case key (_case_key) of a stored llama-bench record, to match it against `axes`' cases;
    threads count only when the matrix sets them."""
    f = identity.test_fields(r)
    return _case_key({**f, "n_layers": None, "env": r.env}, axes.threads and f.get("n_threads"))


def same_env(case: Case, env: dict[str, str | None] | None) -> bool:
    """Whether `case` (Runner.cases: `env` set only where the env axis is used) runs with the env
    combination `env`."""
    return (case.get("env") or {}) == (env or {})


def missing_cases(
    store: ResultStore, digest: str, sha: str, axes: BenchAxes, env: dict[str, str | None] | None = None
) -> list[dict[str, Any]]:
    """The cases of `axes` (run with the `bench.env` combination `env`) with no ok record yet on this
    image digest + model sha256 (resume per test)."""
    have = set()
    # newest per test: every measured test
    for r in resultindex.select(store, digests=[digest], ok_only=True):
        if r.model.sha256 == sha and r.status == "ok" and r.method == "llama-bench":
            have.add(_record_case_key(r, axes))
    cases = [{**c, "env": env} if env else c for c in axes.cases()]
    return [c for c in cases if _case_key(c, axes.threads) not in have]


def resume_axes(axes: BenchAxes, todo: list[dict[str, Any]]) -> list[BenchAxes]:
    """Cross products that together hold exactly the cases `todo`: per (n_batch, n_ubatch, flash_attn,
    n_gpu_layers, n_depth), one over the missing prompt and generation lengths and the cache-type,
    split-mode and MoE-offload values (CASE_DEFAULTS) they are missing at, where the missing cases are
    that whole product; else one per such value combination, in the matrix's order (type_k [f16, q8_0]
    with f16 measured: `-ctk q8_0` alone, never f16 again)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for c in todo:
        key = (c["n_batch"], c["n_ubatch"], c["flash_attn"], c["n_gpu_layers"], c["n_depth"])
        groups.setdefault(key, []).append(c)
    out = []
    for (b, ub, fa, ngl, d), cases in groups.items():
        base = dict(n_batch=[b], n_ubatch=[ub], flash_attn=[fa], n_gpu_layers=[ngl], n_depth=[d])
        extras = {tuple(c.get(k, v) for k, v in CASE_DEFAULTS.items()) for c in cases}
        values = [
            [v for v in getattr(axes, k) if any(e[i] == v for e in extras)]
            for i, k in enumerate(CASE_DEFAULTS)
        ]
        combos = [x for x in itertools.product(*values) if x in extras]
        tests = {(c["n_prompt"], c["n_gen"]) for c in cases}
        whole = len(combos) == math.prod(map(len, values)) and len(cases) == len(combos) * len(tests)
        for part in [values] if whole else [[[x] for x in combo] for combo in combos]:
            mine = [
                c
                for c in cases
                if all(c.get(k, v) in w for (k, v), w in zip(CASE_DEFAULTS.items(), part, strict=True))
            ]
            p = list(dict.fromkeys(c["n_prompt"] for c in mine if c["n_prompt"]))  # once per cache type etc.
            n = list(dict.fromkeys(c["n_gen"] for c in mine if c["n_gen"]))
            extra = dict(zip(CASE_DEFAULTS, part, strict=True))
            out.append(axes.model_copy(update=dict(base, **extra, n_prompt=p or [0], n_gen=n or [0])))
    return out
