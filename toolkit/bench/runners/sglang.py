"""The SGLang runner (experimental): prefill and decode from `sglang.benchmark.one_batch`, served concurrency
from `sglang.benchmark.serving` against `sglang.launch_server` in the same container. The methods, what each
measures and their sources: toolkit.runtimes.sglang.args (shared/reference/ vllm-and-sglang.md). one_batch
takes ONE sample per process, so each prefill/decode point runs `bench.repetitions` times; the decode's input
length is recorded (engine.decode_input_len); a served level short of requests x output tokens is failed (the
vLLM check, reused). The chunked-prefill size is pinned to the micro-batch (`bench.n_ubatch`, one run per
value).

No correctness canary (toolkit.bench.canary): SGLang runs on ROCm only here, so neither a canary's /generate
request nor its answer could be run or captured; its records are never flagged `wrong-output`
(docs/running.md, "Correctness canary")."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from toolkit.bench.observe import kernel_fault, with_window
from toolkit.bench.runners import platform_probe
from toolkit.bench.runners.base import (
    Case,
    Outcome,
    RunContext,
    Step,
    effective_environment,
    estimate_from,
    image_ref,
    model_sha256,
    resolve_model,
    run_observer,
    seconds_before,
    stale_marks,
    tree_sha256,
)
from toolkit.core import backends
from toolkit.core.types import utc_now
from toolkit.engine.api import Mount  # a value type: Docker is ctx.engine
from toolkit.matrix.api import LoadedMatrix, ModelSpec
from toolkit.results import make_folders
from toolkit.results.records import BenchRecord, ModelRef
from toolkit.runtimes.llama_bench.check import test_name
from toolkit.runtimes.sglang import args as sa
from toolkit.runtimes.vllm.output import served_shortfall_error

HEALTH = [
    "python3",
    "-c",
    f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{sa.SERVE_PORT}/health', timeout=5)",
]
HEALTH_POLL_S = 5.0


class SglangRunner:
    """SGLang in the sglang-rocm image (experimental: gfx1201 needs an enablement patch series)."""

    name: ClassVar[str] = "sglang"
    model_formats: ClassVar[tuple[str, ...]] = ("hf",)
    settings_key: ClassVar[str | None] = "sglang"
    settings_model: ClassVar[Any] = sa.SglangSettings

    def preflight(self, lm: LoadedMatrix, model: ModelSpec, path: Path) -> None:
        """Nothing beyond the shared checks: SGLang reads the checkpoint's own quantization config."""

    def plan(self, ctx: RunContext) -> list[Step]:
        """Every container command, in order (also what `--dry-run` prints)."""
        return [step for step, _ in _planned(ctx)]

    def cases(self, ctx: RunContext) -> list[Case]:
        """One case per record: pp L / tg N per micro-batch (bench.repetitions processes each), then
        one per served level. SGLang runs do not resume: every case, --resume or not."""
        reps = ctx.lm.m.bench.repetitions
        out: list[Case] = []
        for method, tokens, ub, k in _points(ctx):
            if k == 0:
                prefill = method == sa.METHOD_PREFILL
                out.append(
                    {
                        "method": method,
                        "n_prompt": tokens if prefill else 0,
                        "n_gen": 0 if prefill else tokens,
                        "n_ubatch": ub,
                        "repetitions": reps,
                    }
                )
        for c, p, n, ub in _levels(ctx):
            out.append(
                {
                    "method": sa.METHOD_SERVE,
                    "n_prompt": p,
                    "n_gen": n,
                    "n_ubatch": ub,
                    "concurrency": c,
                    "repetitions": 1,
                }
            )
        return out

    def estimate(self, ctx: RunContext, cases: list[Case]) -> tuple[int, float]:
        """The measured time (tests_s: the samples' total_latency, the serving duration) of the
        newest ok record of each case on this host."""
        seen = seconds_before(
            ctx, lambda r: _case_key(r.method, r.n_prompt, r.n_gen, r.n_ubatch, r.engine.get("concurrency"))
        )
        return estimate_from(
            seen,
            [
                _case_key(c["method"], c["n_prompt"], c["n_gen"], c["n_ubatch"], c.get("concurrency"))
                for c in cases
            ],
        )

    def settings_from_records(
        self, records: list[BenchRecord], base: dict[str, Any]
    ) -> sa.SglangSettings | None:
        """The `sglang:` block a run used: `base` overridden by the settings its records' `engine`
        states (sglang.args.pinned_engine) and its served concurrency levels."""
        recs = [r for r in records if r.runner == self.name and r.engine]
        if not recs:
            return None
        out: dict[str, Any] = dict(base)
        same = (
            "attention_backend",
            "kv_cache_dtype",
            "dtype",
            "context_length",
            "mem_fraction_static",
            "disable_radix_cache",
            "random_seed",
        )
        for r in recs:
            e = r.engine
            out.update({k: e[k] for k in same if k in e})
            if "cuda_graph_decode" in e:
                out["cuda_graph"] = e["cuda_graph_decode"] == "full"
            if e.get("decode_input_len"):  # None means the tiny default: the same run
                d = e["decode_input_len"]
                out["decode_input_len"] = None if d == sa.DECODE_TINY_INPUT_LEN else d
        levels = sorted(
            {int(r.engine["concurrency"]) for r in recs if r.axis == "served" and r.engine.get("concurrency")}
        )
        if levels:
            out["concurrency"] = levels
        return sa.SglangSettings(**out)

    def run(self, ctx: RunContext) -> list[Outcome]:
        """Run the plan through ctx.engine; one record per point (a failed point is a failed record)."""
        path, reason = resolve_model(ctx.lm, ctx.model, dry_run=ctx.opts.dry_run)
        if path is None:
            return [Outcome(ctx.spec.name, ctx.model.name, "skipped", reason)]
        if ctx.opts.dry_run:
            return [Outcome(ctx.spec.name, ctx.model.name, "dry-run", command=s.argv) for s in self.plan(ctx)]
        out_dir = ctx.out_dir("sglang")
        make_folders(out_dir)  # results/<digest12>/sglang/...: never through a link
        # the GPU-path probe: SGLang's own platform detection in this image, with the run's devices and -e
        why, probe = platform_probe.run_probe(ctx, _spec(ctx, path, out_dir, [], "probe"), "sglang")
        if why:
            return [Outcome(ctx.spec.name, ctx.model.name, "failed", why)]
        observer = run_observer(ctx)
        observer.start()
        try:  # each phase's records carry its window (SGLang's outputs do not say when each point ran)
            t0 = observer.mark()
            one = _one_batch_records(ctx, path, out_dir, probe)
            seen = observer.window(t0, time.time(), None)
            recs = [with_window(r, seen, "sglang-one-batch-runs") for r in one]
            t0 = observer.mark()
            served = _serve_records(ctx, path, out_dir, probe)
            seen = observer.window(t0, time.time(), None)
            recs += [with_window(r, seen, "sglang-serve-sweep") for r in served]
        finally:
            facts = observer.finish()
        fault = kernel_fault(facts)
        if fault:  # a GPU fault in the kernel log during the run: one failed record quoting it
            recs.append(
                BenchRecord(
                    **_base(ctx, path, probe), test="run", axis="served", status="failed", error=fault
                )
            )
        for r in recs:
            ctx.save(r)
        failed = [r for r in recs if r.status != "ok"]
        reason = (
            f"{len(failed)} of {len(recs)} failed: {failed[0].error}" if failed else f"{len(recs)} records"
        )
        return [
            Outcome(
                ctx.spec.name,
                ctx.model.name,
                "failed" if failed else "ok",
                reason,
                len(recs) - len(failed),
                recs[0].command if recs else [],
            )
        ]


def _case_key(method: str, n_prompt: int, n_gen: int, n_ubatch: int | None, concurrency: Any) -> tuple:
    return (method, n_prompt, n_gen, n_ubatch, int(concurrency) if concurrency else None)


def settings(ctx: RunContext) -> sa.SglangSettings:
    return ctx.lm.m.runner_settings.get("sglang") or sa.SglangSettings()


def _spec(ctx: RunContext, path: Path, out_dir: Path, command: list[str], what: str):
    """Model folder read-only at /models/<name>, results rw at /out, profile devices, AITER off."""
    p = ctx.profile
    return p.run_spec(
        ctx.build.digest,
        command,
        mounts=[
            Mount(str(path.resolve()), f"/models/{path.name}", read_only=True),
            Mount(str(out_dir.resolve()), "/out", read_only=False),
        ],
        environment={"SGLANG_USE_AITER": "0"},
        shm_size=None if p.ipc_mode == "host" else "4g",
        name=f"toolkit-{ctx.opts.run_id}-{ctx.spec.name}-{ctx.model.name}-{what}"[:120],
        labels={"org.toolkit.run-id": ctx.opts.run_id},
    )


def _points(ctx: RunContext) -> list[tuple[str, int, int, int]]:
    """(method, tokens, micro-batch, repetition) of every one_batch process: pp L and tg N per n_ubatch."""
    axes = ctx.lm.m.bench
    out = []
    for ub in axes.n_ubatch:
        for p in (x for x in axes.n_prompt if x > 0):
            out += [(sa.METHOD_PREFILL, p, ub, k) for k in range(axes.repetitions)]
        for n in (x for x in axes.n_gen if x > 0):
            out += [(sa.METHOD_DECODE, n, ub, k) for k in range(axes.repetitions)]
    return out


def _one_batch_cmd(
    ctx: RunContext, path: Path, method: str, tokens: int, ub: int, k: int
) -> tuple[list[str], str, str]:
    """(argv, result file name, container label `pp512-ub512-r1`) of one one_batch process."""
    s = settings(ctx)
    kind = "pp" if method == sa.METHOD_PREFILL else "tg"
    fname = sa.result_filename(kind, tokens, f"ub{ub}", f"r{k + 1}")
    what = f"{kind}{tokens}-ub{ub}-r{k + 1}"
    model_dir, result_file = f"/models/{path.name}", f"/out/{fname}"
    if method == sa.METHOD_PREFILL:
        argv = sa.prefill_args(
            model_dir, s, prompt_len=tokens, chunked_prefill_size=ub, result_file=result_file
        )
    else:
        argv = sa.decode_args(model_dir, s, n_gen=tokens, chunked_prefill_size=ub, result_file=result_file)
    return argv, fname, what


def _levels(ctx: RunContext) -> list[tuple[int, int, int, int]]:
    """(concurrency, input_len, output_len, micro-batch) of every served level."""
    axes, s = ctx.lm.m.bench, settings(ctx)
    p = max((x for x in axes.n_prompt if x > 0), default=512)
    n = max((x for x in axes.n_gen if x > 0), default=128)
    return [(c, p, n, axes.n_ubatch[0]) for c in s.concurrency]


def _server_spec(ctx: RunContext, path: Path, out_dir: Path, levels: list[tuple[int, int, int, int]]):
    """The run spec of the launch_server container the `levels` (_levels) are served by: its chunked
    prefill at the first level's micro-batch."""
    args = sa.launch_server_args(f"/models/{path.name}", settings(ctx), chunked_prefill_size=levels[0][3])
    return _spec(ctx, path, out_dir, args, "serve")


def _planned(ctx: RunContext) -> list[tuple[Step, Any]]:
    path, _ = resolve_model(ctx.lm, ctx.model, dry_run=True)
    assert path is not None
    out_dir = ctx.out_dir("sglang")
    probe = platform_probe.probe_command("sglang")
    steps: list[tuple[Step, Any]] = [
        (Step("GPU-path probe", ctx.engine.run_command(_spec(ctx, path, out_dir, probe, "probe"))), None)
    ]
    for method, tokens, ub, k in _points(ctx):
        cmd, fname, what = _one_batch_cmd(ctx, path, method, tokens, ub, k)
        steps.append(
            (
                Step(what, ctx.engine.run_command(_spec(ctx, path, out_dir, cmd, what))),
                (method, tokens, ub, k, fname),
            )
        )
    levels = _levels(ctx)
    if levels:
        rs = _server_spec(ctx, path, out_dir, levels)
        run = ctx.engine.run_command(rs)
        steps.append((Step("launch_server", run[:3] + ["-d"] + run[3:]), None))
        for c, p, n, _ub in levels:
            cmd = _serve_cmd(ctx, path, c, p, n)
            steps.append((Step(f"serve c{c}", ctx.engine.exec_command(rs.name or "", cmd)), None))
    return steps


def _serve_cmd(ctx: RunContext, path: Path, c: int, p: int, n: int) -> list[str]:
    s = settings(ctx)
    return sa.bench_serving_args(
        f"/models/{path.name}",
        input_len=p,
        output_len=n,
        concurrency=c,
        num_prompts=max(s.num_prompts_per_level, c),
        seed=s.random_seed,
        output_file=f"/out/{sa.result_filename('serve', c, p, n)}",
    )


def _base(ctx: RunContext, path: Path, probe: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fields every record of this run shares; `probe`: the GPU-path probe's facts (gpu_probe)."""
    sha, size = (
        tree_sha256(ctx.lm, path) if path.is_dir() else (model_sha256(ctx.lm, path), path.stat().st_size)
    )
    return dict(
        run_id=ctx.opts.run_id,
        created=utc_now(),
        runner="sglang",
        image=image_ref(ctx.build, ctx.spec),
        model=ModelRef(name=ctx.model.name, path=str(path), sha256=sha, size_bytes=size),
        host=ctx.host,
        backends=backends.llama_name(ctx.spec.backend),
        experimental=True,
        # every container of the run gets the same -e (_spec): the image's ENV overlaid with them
        environment=effective_environment(
            ctx.engine, ctx.build.digest, _spec(ctx, path, path, [], "env").environment
        ),
        **({"gpu_probe": probe} if probe else {}),
        **stale_marks(ctx.build),
    )


def _one_batch_records(
    ctx: RunContext, path: Path, out_dir: Path, probe: dict[str, Any] | None = None
) -> list[BenchRecord]:
    """Run every one_batch process; group the samples per (method, tokens, micro-batch) into a record.
    Each record carries the attention backend its processes' logs name (sa.log_attention_backend)."""
    base = _base(ctx, path, probe)
    s = settings(ctx)
    groups = _run_one_batch(ctx, path, out_dir)
    return [_one_batch_record(base, s, method, tokens, ub, g) for (method, tokens, ub), g in groups.items()]


def _run_one_batch(ctx: RunContext, path: Path, out_dir: Path) -> dict[tuple[str, int, int], dict[str, Any]]:
    """Run every one_batch process (a progress event before each), its outcome added to the group of
    its (method, tokens, micro-batch): samples, errors, command, raw points, seconds, attention backend."""
    groups: dict[tuple[str, int, int], dict[str, Any]] = {}
    points = _points(ctx)
    for i, (method, tokens, ub, k) in enumerate(points):
        cmd, fname, what = _one_batch_cmd(ctx, path, method, tokens, ub, k)
        ctx.events(
            "progress", image=ctx.spec.name, model=ctx.model.name, done=i, total=len(points), phase=what
        )
        rs = _spec(ctx, path, out_dir, cmd, what)
        out = ctx.engine.run_container(rs, timeout=ctx.opts.timeout_s or ctx.lm.m.bench.timeout_s)
        g = groups.setdefault(
            (method, tokens, ub),
            {
                "samples": [],
                "errors": [],
                "command": ctx.engine.run_command(rs),
                "raw": [],
                "wall": 0.0,
                "tests": 0.0,
                "attention": None,
            },
        )
        _add_process(g, out, out_dir / fname, method, what)
    return groups


def _add_process(g: dict[str, Any], out: Any, result: Path, method: str, what: str) -> None:
    """Add one one_batch process to its group `g`: its seconds, the attention backend its log names,
    then its sample (the last point of its `result` file) or why it has none."""
    g["wall"] += out.seconds
    g["attention"] = g["attention"] or sa.log_attention_backend(out.stdout + "\n" + out.stderr)
    if out.exit_code != 0 or out.timed_out or out.oom_killed:
        why = (
            "timed out" if out.timed_out else "out of memory" if out.oom_killed else f"exited {out.exit_code}"
        )
        g["errors"].append(f"{what}: sglang one_batch {why}: {(out.stderr or out.stdout)[-200:]!r}")
        return
    pts, problems = sa.read_one_batch(result)
    g["errors"] += problems
    for pt in pts[-1:]:
        v, bad = sa.point_value(pt, method)
        if bad:
            g["errors"].append(f"{what}: {bad}")
        else:
            g["samples"].append(v)
            g["raw"].append(pt.raw)
            g["tests"] += pt.total_latency or 0.0  # the measured run (one_batch warms up first)


def _one_batch_record(
    base: dict[str, Any], s: sa.SglangSettings, method: str, tokens: int, ub: int, g: dict[str, Any]
) -> BenchRecord:
    """The record of one (method, tokens, micro-batch) group of one_batch processes (see _run_one_batch):
    failed with its first errors, or with "no sample"."""
    prefill = method == sa.METHOD_PREFILL
    err = "; ".join(g["errors"][:3]) or None
    st = sa.summarize(g["samples"]) if g["samples"] and not err else None
    return BenchRecord(
        **base,
        test=test_name(
            0 if not prefill else tokens,
            0 if prefill else tokens,
            0 if prefill else sa.decode_input_len(s),
        ),
        axis="prefill" if prefill else "decode",
        method=method,
        n_prompt=tokens if prefill else 0,
        n_gen=0 if prefill else tokens,
        n_ubatch=ub,
        n_depth=0 if prefill else sa.decode_input_len(s),
        status="ok" if st else "failed",
        error=None if st else (err or "no sample"),
        avg_ts=st.mean if st else None,
        stddev_ts=st.stddev if st else None,
        samples_ts=list(st.samples) if st else [],
        command=g["command"],
        timing={
            "wall_s": round(g["wall"], 3),
            "tests_s": round(g["tests"], 3),
            "startup_s": round(max(g["wall"] - g["tests"], 0.0), 3),
        },
        engine=sa.pinned_engine(s, chunked_prefill_size=ub, method=method),
        attention_backend=g["attention"],
        raw={"points": g["raw"]},
    )


@dataclass
class _Served:
    """What one launch_server container gave: its run spec, its start-up seconds, why no level ran
    (None: it was ready), each level's benchmark.serving exec by concurrency, the attention backend
    its log names."""

    rs: Any
    startup: float
    error: str | None
    done: dict[int, Any]
    attention: str | None


def _serve_records(
    ctx: RunContext, path: Path, out_dir: Path, probe: dict[str, Any] | None = None
) -> list[BenchRecord]:
    """One launch_server container, a readiness poll, then benchmark.serving per level by exec; every
    record carries the attention backend the server's log names (sa.log_attention_backend)."""
    levels = _levels(ctx)
    if not levels:
        return []
    s, eng, base = settings(ctx), ctx.engine, _base(ctx, path, probe)
    rs = _server_spec(ctx, path, out_dir, levels)
    container = eng.start_container(rs)
    done: dict[int, Any] = {}
    try:
        startup, error = _wait_ready(eng, container, s)
        for c, p, n, _ub in levels if error is None else []:
            done[c] = eng.exec_in(
                container,
                _serve_cmd(ctx, path, c, p, n),
                timeout=ctx.opts.timeout_s or ctx.lm.m.bench.timeout_s,
            )
    finally:
        logs = eng.container_logs(container)
        eng.remove_container(container)
    served = _Served(rs, startup, error, done, sa.log_attention_backend("\n".join(logs)))
    return [_serve_record(ctx, path, out_dir, base, served, level) for level in levels]


def _wait_ready(eng: Any, container: Any, s: sa.SglangSettings) -> tuple[float, str | None]:
    """Poll launch_server's health until it answers: (start-up seconds, None), or (0.0, why not: it
    exited, or it was not ready within sglang.ready_timeout_s)."""
    t0 = time.monotonic()
    while True:
        state = eng.container_state(container)
        if state and not state.get("Running", True):
            return 0.0, f"sglang launch_server exited {state.get('ExitCode')} before it was ready"
        if eng.exec_in(container, HEALTH, timeout=60).exit_code == 0:
            return round(time.monotonic() - t0, 3), None
        if time.monotonic() - t0 > s.ready_timeout_s:
            return (
                0.0,
                f"sglang launch_server was not ready after {s.ready_timeout_s:.0f} s (sglang.ready_timeout_s)",
            )
        time.sleep(HEALTH_POLL_S)


def _serve_record(
    ctx: RunContext,
    path: Path,
    out_dir: Path,
    base: dict[str, Any],
    served: _Served,
    level: tuple[int, int, int, int],
) -> BenchRecord:
    """The record of one served level: failed when the server never got ready, the exec failed, its
    result file is unreadable or its generated tokens fall short (served_shortfall_error)."""
    s = settings(ctx)
    c, p, n, ub = level
    cmd = _serve_cmd(ctx, path, c, p, n)
    what = f"sglang benchmark.serving (c{c}, in {p}, out {n})"
    err, parsed = served.error, None
    out = served.done.get(c)
    if err is None and (out is None or out.exit_code != 0):
        err = f"{what} exited {getattr(out, 'exit_code', '?')}"
    if err is None:
        parsed, bad = sa.read_serving(out_dir / sa.result_filename("serve", c, p, n))
        err = f"{what}: {bad}" if bad else None
    if err is None and parsed is not None:
        if short := served_shortfall_error(parsed, num_prompts=max(s.num_prompts_per_level, c), output_len=n):
            err = f"{what}: {short}"
    return BenchRecord(
        **base,
        test=f"serve pp{p}+tg{n} c{c}",
        axis="served",
        method=sa.METHOD_SERVE,
        n_prompt=p,
        n_gen=n,
        n_ubatch=ub,
        status="failed" if err else "ok",
        error=err,
        avg_ts=None if err or parsed is None else parsed.get("output_throughput"),
        command=[*ctx.engine.run_command(served.rs), "&&", shlex.join(cmd)],
        timing={
            "wall_s": round(getattr(out, "seconds", 0.0) or 0.0, 3),
            "tests_s": round((parsed or {}).get("duration") or 0.0, 3),
            "startup_s": served.startup,
        },
        engine={
            **sa.pinned_engine(s, chunked_prefill_size=ub, method=sa.METHOD_SERVE),
            "concurrency": c,
            "num_prompts": max(s.num_prompts_per_level, c),
        },
        attention_backend=served.attention,
        raw=parsed or {},
    )
