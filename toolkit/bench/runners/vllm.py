"""vLLM on llama-bench's axes (prefill, decode) plus a served concurrency sweep: the container side of
toolkit/runtimes/vllm/args.py (argument lists, methods) and output.py (parsers and checks).

`checkpoint_preflight` checks the Hugging Face checkpoint's quantization (config.json, unless
`vllm.quantization` overrides it: a mismatch is BadInput) and revision before any container starts; every
record stores the method and revision used. Each `vllm bench latency` runs in its own container (the model
read-only at /models, results at /out); start-up is wall time minus the measured latencies (timing.startup_s),
for serving the time to a healthy /health. The serving container has no network: the client runs inside it
with `docker exec`, so no host port is published. `run_canary`: the correctness canary in the sweep's own
container setup (docs/running.md "Correctness canary")."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from toolkit.bench import canary
from toolkit.bench.observe import RunObserver, kernel_fault, with_window
from toolkit.bench.runners import platform_probe
from toolkit.bench.runners.base import (
    Case,
    Events,
    Outcome,
    RunContext,
    Step,
    effective_environment,
    estimate_from,
    image_ref,
    log_text,
    model_sha256,
    resolve_model,
    run_observer,
    seconds_before,
    stale_marks,
    tree_sha256,
    write_log,
)
from toolkit.core import backends
from toolkit.core.errors import BadInput
from toolkit.core.types import utc_now
from toolkit.engine.api import Mount, RunOutcome, RunSpec  # value types only: Docker is ctx.engine
from toolkit.host import devices
from toolkit.matrix.api import ImageSpec, LoadedMatrix, ModelSpec
from toolkit.models import checkpoint as hf_checkpoint
from toolkit.results import make_folders
from toolkit.results.records import BenchRecord, BuildRecord, ModelRef, ResultStore
from toolkit.runtimes.llama_bench import perplexity as ppl_text  # the canary's text and window
from toolkit.runtimes.vllm import args as va
from toolkit.runtimes.vllm import canary as vc
from toolkit.runtimes.vllm.output import (
    METHOD_DECODE,
    METHOD_PREFILL,
    METHOD_SERVE,
    attention_backend_name,
    decode_noise_error,
    parse_latency,
    parse_serve,
    sample_sd,
    samples_ts,
    served_error,
)
from toolkit.runtimes.vllm.settings import VllmSettings

HEALTH_POLL_S = 5.0


@dataclass
class _Ctx:
    lm: LoadedMatrix
    spec: ImageSpec
    build: BuildRecord
    model: ModelSpec
    model_path: Path
    profile: devices.DeviceProfile
    run_id: str
    out_dir: Path
    engine: Any  # RunContext.engine: toolkit.engine.api or a stand-in (tests)
    pinned: dict[str, Any] = field(default_factory=dict)  # the engine settings of every record
    cold: bool = True  # the compile cache volume was new (an observation: stored in timing, not engine)

    @property
    def model_dir(self) -> str:
        return f"/models/{self.model_path.name}"

    @property
    def v(self) -> VllmSettings:
        return self.lm.m.settings("vllm")

    @property
    def cache_volume(self) -> str:
        """The compile cache's volume: one per image digest."""
        return f"toolkit-vllm-cache-{self.build.digest.split(':')[-1][:12]}"


def _spec(ctx: _Ctx, command: list[str], name: str) -> RunSpec:
    """Model dir read-only at /models, results rw at /out, the per-digest compile cache at /cache."""
    mounts = [
        Mount(str(ctx.model_path.resolve()), ctx.model_dir, read_only=True),
        Mount(str(ctx.out_dir.resolve()), "/out", read_only=False),
        Mount(ctx.cache_volume, "/cache", read_only=False, volume=True),
    ]
    p = ctx.profile
    return p.run_spec(
        ctx.build.digest,
        command,
        mounts=mounts,
        environment=va.CONTAINER_ENV,
        name=name[:120],
        labels={"org.toolkit.run-id": ctx.run_id},
        shm_size=None if p.ipc_mode == "host" else "4g",
    )


def _name(ctx: _Ctx, what: str) -> str:
    return f"toolkit-{ctx.run_id}-{ctx.spec.name}-{ctx.model.name}-{what}"[:120]


def vllm_commands(
    lm: LoadedMatrix,
    spec: ImageSpec,
    model: ModelSpec,
    *,
    engine: Any,
    build: BuildRecord | None = None,
    profile: devices.DeviceProfile | None = None,
    run_id: str = "dry-run",
    out_dir: Path | None = None,
) -> list[list[str]]:
    """Every docker command the run executes for (image, model), in order: the GPU-path probe
    (platform_probe: vLLM's own platform detection, same devices and environment), one `docker run` per
    latency run, the detached `vllm serve` container, then `docker exec` health check and one
    `docker exec ... vllm bench serve` per served level. Pure: `engine` (RunContext.engine) only
    formats the commands (run_command, exec_command)."""
    build = build or BuildRecord(
        image=spec.name,
        ref=f"toolkit/{spec.name}:latest",
        digest=f"toolkit/{spec.name}:latest",
        backend=spec.backend,
        template=spec.template,
        template_hash="",
        created="",
    )
    profile = profile or devices.DeviceProfile.example(spec.backend)
    out = out_dir or Path("results") / "<digest12>" / "vllm" / f"{run_id}-{model.name}"
    model_path = lm.resolve(model.path, what=f"models[{model.name}].path")
    ctx = _Ctx(lm, spec, build, model, model_path, profile, run_id, out, engine)
    cmds = [engine.run_command(_spec(ctx, platform_probe.probe_command("vllm"), _name(ctx, "probe")))]
    cmds += [
        engine.run_command(_spec(ctx, _latency_cmd(ctx, r), _name(ctx, f"lat-{r.input_len}-{r.output_len}")))
        for r in va.latency_plan(lm)
    ]
    levels = va.serve_plan(lm)
    if levels:
        serve_name = _name(ctx, "serve")
        run = engine.run_command(_spec(ctx, va.serve_args(ctx.model_dir, ctx.v), serve_name))
        cmds.append(run[:3] + ["-d"] + run[3:])
        cmds.append(engine.exec_command(serve_name, va.HEALTH_CHECK))
        cmds += [engine.exec_command(serve_name, _serve_cmd(ctx, lv)) for lv in levels]
    return cmds


def _latency_cmd(ctx: _Ctx, r: va.LatencyRun) -> list[str]:
    return va.latency_args(
        ctx.model_dir, ctx.v, input_len=r.input_len, output_len=r.output_len, out_json=f"/out/{r.filename}"
    )


def _serve_cmd(ctx: _Ctx, lv: va.ServeLevel) -> list[str]:
    return va.bench_serve_args(
        ctx.model_dir,
        input_len=lv.input_len,
        output_len=lv.output_len,
        concurrency=lv.concurrency,
        num_prompts=lv.num_prompts,
        result_dir="/out",
        result_filename=lv.filename,
    )


def _run_latency(ctx: _Ctx, store: ResultStore, r: va.LatencyRun, timeout: float) -> va.LatencyResult:
    rs = _spec(ctx, _latency_cmd(ctx, r), _name(ctx, f"lat-{r.input_len}-{r.output_len}"))
    command = ctx.engine.run_command(rs)
    out = ctx.engine.run_container(rs, timeout=timeout)
    log_path = store.log_path(
        ctx.build.digest, f"{ctx.run_id}-{ctx.model.name}-lat-{r.input_len}-{r.output_len}.log"
    )
    write_log(log_path, log_text(command, out) + "\n", store.root)
    res = va.LatencyResult(
        r, command, str(log_path), out.seconds, va.log_notes(out.stdout + "\n" + out.stderr)
    )
    what = f"vllm bench latency (input {r.input_len}, output {r.output_len})"
    data, missing = va.read_result(ctx.out_dir / r.filename)
    res.raw = data or {}
    res.error = va.outcome_error(out, timeout, what) or (f"{what}: {missing}" if missing else None)
    if data is not None:
        res.latency, bad = parse_latency(data)
        res.error = res.error or (f"{what}: {bad}" if bad else None)
    res.error = res.error or va.fallback_error(ctx.spec, res.notes)
    return res


def _latency_records(
    ctx: _Ctx, base: dict[str, Any], results: dict[va.LatencyRun, va.LatencyResult]
) -> list[BenchRecord]:
    """A prefill record per pp L (its own latency run), then a decode record per tg N (its long run
    against the short reference run at the decode input length)."""
    bench = ctx.lm.m.bench
    recs = [_prefill_record(ctx, base, p, results[va.LatencyRun(p, 1)]) for p in bench.n_prompt if p > 0]
    d = va.decode_input_len(ctx.lm)
    short = results.get(va.LatencyRun(d, 1))
    for n in (n for n in bench.n_gen if n > 0):
        long = results[va.LatencyRun(d, n + 1)]
        assert short is not None
        recs.append(_decode_record(ctx, base, d, n, long, short))
    return recs


def _prefill_record(ctx: _Ctx, base: dict[str, Any], p: int, res: va.LatencyResult) -> BenchRecord:
    """The record of pp `p`: tok/s = p / the run's average latency (a sample per timed iteration)."""
    lat = res.latency
    ok = res.error is None and lat is not None
    samples = samples_ts(p, lat.latencies) if lat else []
    return BenchRecord(
        **base,
        test=f"pp{p}",
        axis="prefill",
        method=METHOD_PREFILL,
        n_prompt=p,
        status="ok" if ok else "failed",
        error=res.error,
        avg_ts=round(p / lat.avg, 4) if ok and lat else None,
        stddev_ts=sample_sd(samples) if ok else None,
        samples_ts=samples if ok else [],
        command=res.command,
        timing={**res.timing(), "cache_cold": float(ctx.cold)},
        engine={**ctx.pinned, "input_len": p, "output_len": 1, "log_notes": res.notes},
        attention_backend=attention_backend_name(res.notes["attention_backend"]),
        log_file=res.log_file,
        raw=res.raw,
    )


def _decode_record(
    ctx: _Ctx, base: dict[str, Any], d: int, n: int, long: va.LatencyResult, short: va.LatencyResult
) -> BenchRecord:
    """The record of tg `n` at input length `d`: tok/s = n / (the long run's average latency - the
    short reference run's); failed when the difference is within their noise (decode_noise_error)."""
    error = long.error or (f"reference run: {short.error}" if short.error else None)
    avg = sd = None
    samples = []
    if error is None and long.latency and short.latency:
        diff = long.latency.avg - short.latency.avg
        error = decode_noise_error(long.latency, short.latency, long_len=n + 1)
        if error is None:
            avg = round(n / diff, 4)
            samples = samples_ts(n, long.latency.latencies, short.latency.avg)
            sd = sample_sd(samples)
    timing = {**long.timing(), "cache_cold": float(ctx.cold)}
    timing["reference_startup_s"] = short.timing()["startup_s"]
    return BenchRecord(
        **base,
        test=f"tg{n}",
        axis="decode",
        method=METHOD_DECODE,
        n_gen=n,
        status="failed" if error else "ok",
        error=error,
        avg_ts=avg,
        stddev_ts=sd,
        samples_ts=samples,
        command=long.command,
        timing=timing,
        log_file=long.log_file,
        engine={
            **ctx.pinned,
            "input_len": d,
            "output_len": n + 1,
            "reference_output_len": 1,
            "log_notes": long.notes,
            "reference_log_notes": short.notes,
        },
        attention_backend=attention_backend_name(long.notes["attention_backend"]),
        raw={"long": long.raw, "short": short.raw},
    )


def _serve(
    ctx: _Ctx, store: ResultStore, base: dict[str, Any], events: Events, timeout: float
) -> tuple[list[BenchRecord], dict[str, float]]:
    """One `vllm serve` container, a readiness poll, then `vllm bench serve` per level. Returns the
    records and the phase's timing (server wall time, measured windows, time to ready)."""
    levels = va.serve_plan(ctx.lm)
    engine = ctx.engine
    rs = _spec(ctx, va.serve_args(ctx.model_dir, ctx.v), _name(ctx, "serve"))
    command = engine.run_command(rs)
    log_path = store.log_path(ctx.build.digest, f"{ctx.run_id}-{ctx.model.name}-serve.log")
    client_log: list[str] = []
    t0 = time.monotonic()
    container = engine.start_container(rs)
    per_level: list[va.ServedLevel] = []
    try:
        startup, error = _wait_ready(container, ctx.v.ready_timeout_s, events, ctx)
        if error is None:
            per_level, client_log, error = _serve_levels(
                ctx, container, rs.name or "", levels, events, timeout
            )
    finally:
        stdout, stderr = engine.container_logs(container)
        state = engine.container_state(container)
        engine.remove_container(container)
    server_out = RunOutcome(
        int(state.get("ExitCode") or 0),
        stdout,
        stderr,
        time.monotonic() - t0,
        oom_killed=bool(state.get("OOMKilled")),
    )
    client = "\n--- client (docker exec) ---\n" + "\n".join(client_log)
    write_log(log_path, log_text(command, server_out) + "\n" + client, store.root)
    notes = va.log_notes(stdout + "\n" + stderr)
    error = error or va.fallback_error(ctx.spec, notes)
    served = va.Served(command, str(log_path), startup, notes, error, timeout)
    recs = [
        _serve_record(ctx, base, served, lv, next((x for x in per_level if x[0] == lv), None))
        for lv in levels
    ]
    measured = sum(r.timing.get("tests_s", 0.0) for r in recs)
    return recs, {
        "wall_s": round(server_out.seconds, 3),
        "tests_s": round(measured, 3),
        "startup_s": round(startup if startup is not None else server_out.seconds, 3),
    }


def _serve_levels(
    ctx: _Ctx, container: Any, server: str, levels: list[va.ServeLevel], events: Events, timeout: float
) -> tuple[list[va.ServedLevel], list[str], str | None]:
    """`vllm bench serve` per level by exec in the ready server `container` (named `server`), a progress
    event before each: (the levels as they ran, the client's log, why the sweep stopped: a level
    timed out, else None)."""
    per_level: list[va.ServedLevel] = []
    client_log: list[str] = []
    for i, lv in enumerate(levels):
        events(
            "progress",
            image=ctx.spec.name,
            model=ctx.model.name,
            done=i,
            total=len(levels),
            phase=f"serve c{lv.concurrency} in{lv.input_len} out{lv.output_len}",
        )
        cmd = _serve_cmd(ctx, lv)
        t1 = time.monotonic()
        out = ctx.engine.exec_in(container, cmd, timeout=timeout)
        per_level.append((lv, cmd, out, time.monotonic() - t1))
        client_log.append(f"$ {shlex.join(ctx.engine.exec_command(server, cmd))}\n{out.stdout}\n{out.stderr}")
        if out.timed_out:
            return (
                per_level,
                client_log,
                f"vllm bench serve timed out after {timeout:.0f} s; the server was stopped",
            )
    return per_level, client_log, None


def _wait_ready(container: Any, limit: float, events: Events, ctx: _Ctx) -> tuple[float | None, str | None]:
    """Poll /health inside the container until it answers, the server dies or `limit` passes."""
    t0 = time.monotonic()
    while True:
        elapsed = time.monotonic() - t0
        state = ctx.engine.container_state(container)
        if state and not state.get("Running", True):
            why = " (out of memory)" if state.get("OOMKilled") else ""
            return (
                None,
                f"vllm serve exited {state.get('ExitCode')}{why} before it was ready, after {elapsed:.0f} s",
            )
        if ctx.engine.exec_in(container, va.HEALTH_CHECK, timeout=60).exit_code == 0:
            return round(time.monotonic() - t0, 3), None
        if elapsed > limit:
            return None, f"vllm serve was not ready after {limit:.0f} s (vllm.ready_timeout_s in the matrix)"
        events(
            "progress",
            image=ctx.spec.name,
            model=ctx.model.name,
            done=0,
            total=1,
            phase=f"waiting for vllm serve ({elapsed:.0f} s)",
        )
        time.sleep(HEALTH_POLL_S)


def _serve_record(
    ctx: _Ctx, base: dict[str, Any], served: va.Served, lv: va.ServeLevel, done: va.ServedLevel | None
) -> BenchRecord:
    """The record of one served level: failed with the server's error, its own (the exec, the result
    file), or what its result says (served_error)."""
    what = f"vllm bench serve (c{lv.concurrency}, in {lv.input_len}, out {lv.output_len})"
    error = served.error
    data: dict[str, Any] | None = None
    cmd: list[str] = []
    wall = 0.0
    if done is None:
        error = error or f"{what} did not run"
    else:
        _, cmd, out, wall = done
        if error is None and out is not None:
            error = va.outcome_error(out, served.timeout, what)
        data, missing = va.read_result(ctx.out_dir / lv.filename)
        error = error or (f"{what}: {missing}" if missing else None)
    parsed = parse_serve(data or {})
    if error is None:
        error = served_error(what, parsed, lv.num_prompts, lv.output_len, ignore_eos="--ignore-eos" in cmd)
    return BenchRecord(
        **base,
        test=f"serve pp{lv.input_len}+tg{lv.output_len} c{lv.concurrency}",
        axis="served",
        method=METHOD_SERVE,
        n_prompt=lv.input_len,
        n_gen=lv.output_len,
        status="failed" if error else "ok",
        error=error,
        avg_ts=None if error else parsed["output_throughput"],
        command=[*served.command, "&&", *ctx.engine.exec_command(_name(ctx, "serve"), cmd)]
        if cmd
        else served.command,
        timing={
            "startup_s": served.startup if served.startup is not None else 0.0,
            "wall_s": round(wall, 3),
            "tests_s": parsed["duration"] or 0.0,
            "cache_cold": float(ctx.cold),
        },
        log_file=served.log_file,
        engine={
            **ctx.pinned,
            "concurrency": lv.concurrency,
            "num_prompts": lv.num_prompts,
            "num_warmups": lv.concurrency,
            "request_rate": "inf",
            "log_notes": served.notes,
        },
        attention_backend=attention_backend_name(served.notes["attention_backend"]),
        raw=data or {},
        served={
            **{k: v for k, v in parsed.items() if k not in ("latency_ms", "output_lens")},
            "requested_output_tokens": lv.num_prompts * lv.output_len,
        },
        latency_ms=parsed["latency_ms"],
    )


@dataclass(frozen=True)
class Checkpoint:
    """What a vLLM run of one model directory is checked against before any container starts:
    the quantization it uses and the Hub revision it is pinned to (None: not a Hub checkpoint)."""

    quant: hf_checkpoint.QuantChoice
    revision: str | None


def checkpoint_preflight(lm: LoadedMatrix, model: ModelSpec, path: Path) -> Checkpoint:
    """Read and check a Hugging Face checkpoint directory (toolkit/models/checkpoint.py): quantization
    (the checkpoint's own config.json unless `vllm.quantization` overrides it) and revision. Raises
    BadInput naming matrix.yaml, the field and the fix; no container is involved. A single-file
    model (GGUF) has no config.json: quantization `none`, as far as the toolkit can tell."""
    if not path.is_dir():
        q = lm.m.settings("vllm").quantization
        return Checkpoint(hf_checkpoint.QuantChoice(q, "matrix" if q else "none", None), None)
    quant = hf_checkpoint.resolve_quantization(lm, model, path)
    return Checkpoint(quant, hf_checkpoint.check_revision(lm, model, path))


def model_ref(
    lm: LoadedMatrix, model: ModelSpec, path: Path, checkpoint: Checkpoint | None = None
) -> ModelRef:
    """A Hugging Face model directory: sha256 over `relpath sha256` of every file (cached per file;
    hidden files and folders such as huggingface_hub's .cache/ are not part of the model), size = the
    sum of file sizes. A single file is hashed as itself. With `checkpoint`, the ModelRef also carries
    `hf_repo`, `revision` and `quantization` (the method used)."""

    extra: dict[str, Any] = {}
    if checkpoint is not None:
        extra = {
            "hf_repo": model.hf.repo if model.hf else None,
            "revision": checkpoint.revision,
            "quantization": checkpoint.quant.method,
        }
    if path.is_file():
        return ModelRef(
            name=model.name,
            path=str(path),
            sha256=model_sha256(lm, path),
            size_bytes=path.stat().st_size,
            **extra,
        )
    digest, size = tree_sha256(lm, path, what=f"{lm.path}: models[{model.name}]")
    if model.sha256 and digest != model.sha256:
        raise BadInput(
            f"{lm.path}: models[{model.name}].sha256: directory {path} has tree digest {digest}, the "
            f"matrix expects {model.sha256}; re-download it or fix `sha256`"
        )
    return ModelRef(name=model.name, path=str(path), sha256=digest, size_bytes=size, **extra)


def _phases(
    ctx: RunContext, vctx: _Ctx, base: dict[str, Any], timeout: float, observer: RunObserver
) -> list[Outcome]:
    """The latency runs, then the served sweep; each record carries the telemetry of its phase's
    window (the latency runs together, or the serve sweep: vLLM's own timings do not say where each
    request ran, so the window is the commands')."""
    lm, spec, model, store, events = ctx.lm, ctx.spec, ctx.model, ctx.store, ctx.events
    outcomes: list[Outcome] = []
    plan = va.latency_plan(lm)
    if plan:
        events("start", image=spec.name, model=model.name, total=len(plan))
        results: dict[va.LatencyRun, va.LatencyResult] = {}
        t0 = observer.mark()
        for i, r in enumerate(plan):
            events(
                "progress",
                image=spec.name,
                model=model.name,
                done=i,
                total=len(plan),
                phase=f"latency in{r.input_len} out{r.output_len}",
            )
            results[r] = _run_latency(vctx, store, r, timeout)
        seen = observer.window(t0, time.time(), None)
        recs = [with_window(rec, seen, "vllm-latency-runs") for rec in _latency_records(vctx, base, results)]
        for rec in recs:
            ctx.save(rec)  # run_bench's saver: whole-or-absent, counted, flagged when runs overlap
        events("done", image=spec.name, model=model.name, total=len(plan))
        spans = [x.timing() for x in results.values()]
        timing = {k: round(sum(t[k] for t in spans), 3) for k in ("wall_s", "tests_s", "startup_s")}
        outcomes.append(_summary(spec, model, recs, "latency", timing))
    if va.serve_plan(lm):
        events("start", image=spec.name, model=model.name, total=len(va.serve_plan(lm)))
        t0 = observer.mark()
        recs, timing = _serve(vctx, store, base, events, timeout)
        seen = observer.window(t0, time.time(), None)
        recs = [with_window(rec, seen, "vllm-serve-sweep") for rec in recs]
        for rec in recs:
            ctx.save(rec)
        events("done", image=spec.name, model=model.name, total=len(recs))
        outcomes.append(_summary(spec, model, recs, "serve", timing))
    return outcomes


def _commands(ctx: RunContext) -> list[list[str]]:
    """vllm_commands for a RunContext: its build, device profile, run id, results folder and engine."""
    return vllm_commands(
        ctx.lm,
        ctx.spec,
        ctx.model,
        engine=ctx.engine,
        build=ctx.build,
        profile=ctx.profile,
        run_id=ctx.opts.run_id,
        out_dir=ctx.out_dir("vllm"),
    )


def _canary_spec(ctx: RunContext, path: Path) -> tuple[_Ctx, RunSpec]:
    """The canary's container (toolkit.bench.canary): the sweep's own (_spec: devices, mounts, compile
    cache, environment) running runtimes/vllm/canary.py's script with the sweep's engine flags over
    llama-perplexity's window, the text read-only at canary.TEXT_TARGET."""
    out = ctx.out_dir("vllm")
    vctx = _Ctx(ctx.lm, ctx.spec, ctx.build, ctx.model, path, ctx.profile, ctx.opts.run_id, out, ctx.engine)
    n_gen = max(1, min(vc.COMPLETION_TOKENS, vctx.v.max_model_len - ppl_text.N_CTX))
    args = dict(n_ctx=ppl_text.N_CTX, chunks=ppl_text.CHUNKS, completion_tokens=n_gen)
    rs = _spec(
        vctx, vc.canary_args(vctx.model_dir, canary.TEXT_TARGET, vctx.v, **args), _name(vctx, "canary")
    )
    rs.mounts.append(Mount(str(ppl_text.CANARY_TEXT.resolve()), canary.TEXT_TARGET, read_only=True))
    return vctx, rs


def _summary(
    spec: ImageSpec, model: ModelSpec, recs: list[BenchRecord], phase: str, timing: dict[str, float]
) -> Outcome:
    """One summary line per phase. timing: wall_s = containers' wall time, tests_s = the measured
    windows, startup_s = load + compile + warm-up (latency: summed over its containers)."""
    failed = [r for r in recs if r.status != "ok"]
    reason = f"{phase}: " + (
        f"{len(failed)} of {len(recs)} failed: {failed[0].error}" if failed else f"{len(recs)} records"
    )
    return Outcome(
        spec.name,
        model.name,
        "failed" if failed else "ok",
        reason,
        len(recs) - len(failed),
        recs[0].command if recs else [],
        timing,
    )


class VllmRunner:
    """vLLM (`vllm bench latency` for prefill/decode, `vllm serve` + `vllm bench serve` for served
    concurrency). Settings: the `vllm:` block of matrix.yaml (matrix.VllmSettings); its test identity
    adds the pinned engine settings stored in each record's `engine`."""

    name: ClassVar[str] = "vllm"
    model_formats: ClassVar[tuple[str, ...]] = ("hf",)
    settings_key: ClassVar[str | None] = "vllm"
    settings_model: ClassVar[Any] = VllmSettings

    def preflight(self, lm: LoadedMatrix, model: ModelSpec, path: Path) -> None:
        """Quantization vs the checkpoint's config.json, pinned revision (BadInput, exit 4)."""
        checkpoint_preflight(lm, model, path)

    def plan(self, ctx: RunContext) -> list[Step]:
        return [Step("vllm", c) for c in _commands(ctx)]

    def cases(self, ctx: RunContext) -> list[Case]:
        """Every record's case (module `cases`): a vLLM run measures them all, --resume or not."""
        return va.cases(ctx.lm)

    def estimate(self, ctx: RunContext, cases: list[Case]) -> tuple[int, float]:
        """The measured time (tests_s: timed iterations, serve duration) of the newest ok record of
        each case on this host."""
        seen = seconds_before(
            ctx,
            lambda r: va.case_key(r.method, r.n_prompt, r.n_gen, r.engine.get("concurrency")),
        )
        keys = [va.case_key(c["method"], c["n_prompt"], c["n_gen"], c.get("concurrency")) for c in cases]
        return estimate_from(seen, keys)

    def settings_from_records(self, records: list[BenchRecord], base: dict[str, Any]) -> VllmSettings | None:
        """`settings_from_records` (module): None when no record is a vLLM one."""
        if not any(r.runner == self.name for r in records):
            return None
        return va.settings_from_records(records, base)

    def canary_command(self, ctx: RunContext, path: Path) -> list[str]:
        """The canary's exact `docker run` (`run_canary`), for --dry-run."""
        return ctx.engine.run_command(_canary_spec(ctx, path)[1])

    def run_canary(
        self, ctx: RunContext, controls: dict[str, canary.CanaryResult]
    ) -> canary.CanaryResult | None:
        """The vLLM canary of `ctx`'s pair, judged by toolkit.bench.canary's rules (judge_parsed) against
        the CPU control: a vLLM cpu image's canary on the same checkpoint (tree sha256), this run's in
        `controls` or else the newest stored. None when the model is absent. Its output is kept in
        logs/<run>-<model>-canary.log; no result (a crash, a timeout) is `unchecked`."""
        path, _ = resolve_model(ctx.lm, ctx.model)
        if path is None:
            return None
        vctx, rs = _canary_spec(ctx, path)
        res = canary.CanaryResult(
            image=ctx.spec.name,
            model=ctx.model.name,
            digest=ctx.build.digest,
            backend=ctx.spec.backend,
            model_sha256=model_ref(ctx.lm, ctx.model, path).sha256,
            status="unchecked",
            text_sha256=ppl_text.text_sha256(),
            command=ctx.engine.run_command(rs),
            run_id=ctx.opts.run_id,
            created=utc_now(),
            method=vc.METHOD,
        )
        make_folders(vctx.out_dir, chmod=0o777)  # as the sweep's: the images run as an unprivileged user
        ctx.engine.ensure_volume(vctx.cache_volume, {"org.toolkit.digest": ctx.build.digest})
        out = ctx.engine.run_container(rs, timeout=canary.TIMEOUT_S)
        res.seconds = round(out.seconds, 3)
        log = ctx.store.log_path(ctx.build.digest, f"{ctx.opts.run_id}-{ctx.model.name}-canary.log")
        write_log(log, log_text(res.command, out) + "\n", ctx.store.root)
        try:  # the result line is printed before vLLM shuts down: it counts whatever the exit code
            p = vc.parse_canary(out.stdout, out.stderr, n_ctx=res.n_ctx)
        except vc.CanaryOutputError as err:
            res.reason = f"{va.outcome_error(out, canary.TIMEOUT_S, 'the canary') or err} (log: {log})"
            return res
        control = canary.judge_parsed(res, p.ppl, p.ppl_error, p.no_spread, ctx.store, controls)
        res.details = {**vc.details(p, control.details if control else None), "log_file": str(log)}
        return res

    def run(self, ctx: RunContext) -> list[Outcome]:
        """Latency runs (prefill + decode records), then the served sweep, for one (image, model), every
        Docker call through ctx.engine. Saves every record (failed ones included) through ctx.save and
        returns one summary line per phase."""
        lm, spec, build, model, opts = ctx.lm, ctx.spec, ctx.build, ctx.model, ctx.opts
        engine = ctx.engine
        path, reason = resolve_model(lm, model, dry_run=opts.dry_run)
        if path is None:
            return [Outcome(spec.name, model.name, "skipped", reason)]
        out_dir = ctx.out_dir("vllm")
        if opts.dry_run:
            return [Outcome(spec.name, model.name, "dry-run", command=c) for c in _commands(ctx)]
        checkpoint = checkpoint_preflight(lm, model, path)
        ref = model_ref(lm, model, path, checkpoint)
        # the images run as an unprivileged user (uid 10001); no link followed
        make_folders(out_dir, chmod=0o777)
        vctx = _Ctx(lm, spec, build, model, path, ctx.profile, opts.run_id, out_dir, engine)
        cold = not engine.volume_exists(vctx.cache_volume)
        engine.ensure_volume(vctx.cache_volume, {"org.toolkit.digest": build.digest})
        # the GPU-path probe: vLLM's own platform detection in this image, with the run's devices and -e
        why, probe = platform_probe.run_probe(ctx, _spec(vctx, [], _name(vctx, "probe")), "vllm")
        if why:
            return [Outcome(spec.name, model.name, "failed", why)]
        v = lm.m.settings("vllm")
        timeout = opts.timeout_s or (v.ready_timeout_s + lm.m.bench.timeout_s)
        base = dict(
            run_id=opts.run_id,
            created=utc_now(),
            runner="vllm",
            image=image_ref(build, spec),
            model=ref,
            host=ctx.host,
            backends=backends.llama_name(spec.backend),
            build_commit=build.source_commit,
            # every container of the run gets the same -e (_spec): the image's ENV overlaid with them
            environment=effective_environment(engine, build.digest, _spec(vctx, [], "env").environment),
            gpu_probe=probe,
            **stale_marks(build),
        )
        vctx.pinned = {
            **va.pinned_engine(v),
            **checkpoint.quant.as_record(),
            "revision": checkpoint.revision,
            "vllm_version": build.labels.get("org.toolkit.vllm-version"),
        }
        vctx.cold = cold
        outcomes: list[Outcome] = []
        observer = run_observer(ctx)
        observer.start()
        try:
            outcomes = _phases(ctx, vctx, base, timeout, observer)
        finally:
            facts = observer.finish()
        fault = kernel_fault(facts)
        if fault:  # a GPU fault in the kernel log during the run: one failed record quoting it
            ctx.save(BenchRecord(**base, test="run", axis="served", status="failed", error=fault))
        return outcomes
