"""The correctness canary (issue 34): before an image's sweep, llama-perplexity in that image scores a small
fixed text with the benchmarked model (toolkit.runtimes.llama_bench.perplexity: 4 chunks of 128 tokens). A
fast image whose kernels compute garbage is caught here, not crowned.

`judge`, per (image, model file): the perplexity must be finite and >= 1 and the scored tokens'
log-probabilities must differ, and against the CPU control (a `cpu`-backend image's canary on the same model
sha256, text sha256, n_ctx and chunks, from this run or the newest stored one) |ln(PPL_image / PPL_cpu)| <=
BOUND_LN; else `wrong-output`, the stored flag of every record of the pair. Results are appended to
results/<digest12>/canary.jsonl; one that could not run is `unchecked` (no flag: unknown is not wrong). vLLM's
canary (runtimes/vllm/canary.py) is judged here by the same rules (`judge_parsed`), compared only within its
`method`; SGLang has none. The whole contract: docs/running.md "Correctness canary"."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from toolkit.bench.observe import merge_flags
from toolkit.bench.runners.base import (
    Outcome,
    RunContext,
    check_sha,
    container_spec,
    memory_limit,
    model_identity,
    resolve_model,
    shader_cache_volume,
)
from toolkit.core import invocation, jsonsafe, registry
from toolkit.core.types import utc_now
from toolkit.engine import api as engine_api
from toolkit.results.canary_check import BOUND_LN, FLAG, canary_problem, judge
from toolkit.results.records import BenchRecord, ResultStore, Saver, append_jsonl, read_jsonl, short_digest
from toolkit.runtimes.llama_bench import perplexity as ppl_mod

METHOD = "llama-perplexity"
"""The llama.cpp canary's method (CanaryResult.method): results compare only within one method."""
LLAMA_ONLY = ("threads", "n_gpu_layers", "flash_attn")
TIMEOUT_S = 1800.0
"""Seconds one canary container may take: lavapipe's first (cold) shader compile took 110 s here."""
CUT_RUNS = 4
"""Processes one canary may take while each exits 0 with its result cut off by llama.cpp's logger at exit
(llama.cpp#22142): measured 2026-12-05 on this 2-core machine, 5 of 20 processes cut at load 8 with the
docker CLI and the SDK alike (1 in 6 idle), so 2 processes left ~6 % of canaries unchecked under load
and 4 leave ~0.4 %; each more costs one canary (~0.25 s idle with the tiny model)."""
TEXT_TARGET = "/canary/canary.txt"
MAX_THREADS = 16


@dataclass
class CanaryResult:
    """One canary run of (image, model file). status: `ok`, `wrong-output` or `unchecked` (it could not
    run: `reason` says why). ppl: perplexity (None when unchecked); control: the CPU control it was
    compared with ({image, digest, run_id, ppl}) or None; ln_ratio: ln(ppl / control ppl); seconds:
    the container's wall time."""

    image: str
    model: str
    digest: str
    backend: str
    model_sha256: str
    status: str
    reason: str = ""
    ppl: float | None = None
    ppl_error: float | None = None
    n_ctx: int = ppl_mod.N_CTX
    chunks: int = ppl_mod.CHUNKS
    threads: int = 1
    n_gpu_layers: int = 0
    flash_attn: int = 1
    text_sha256: str = ""
    seconds: float = 0.0
    command: list[str] = field(default_factory=list)
    control: dict[str, Any] | None = None
    ln_ratio: float | None = None
    bound_ln: float = BOUND_LN
    run_id: str = ""
    created: str = ""
    method: str = METHOD
    details: dict[str, Any] = field(default_factory=dict)  # a runner's own facts; `said`: for line()

    def record(self) -> dict[str, Any]:
        """The JSON object stored (canary.jsonl) and put on each record as `canary`: every NaN/inf, at
        any depth (the PPL, its error, a broken model's mean log-probability in `details`), as its
        string `'nan'` / `'inf'`: JSON has none."""
        out = dict(self.__dict__)
        for k in LLAMA_ONLY if self.method != METHOD else ():
            out.pop(k)
        return jsonsafe.nonfinite_as_text(out)

    def line(self) -> str:
        """One line for the run's progress: `canary: PPL 535.9 (cpu control 535.9, within 0.0 %)`."""
        if self.status == "unchecked":
            return f"canary: not checked: {self.reason}"
        head = f"canary: PPL {self.ppl:.6g}" if self.ppl is not None else "canary: no PPL"
        tail = (f"; {self.details['said']}" if self.details.get("said") else "") + f" ({self.seconds:.1f} s)"
        if self.status == FLAG:
            return f"{head}: {self.reason}; every record is flagged {FLAG}{tail}"
        if self.control is None:
            return f"{head} (no CPU control: only checked to be finite){tail}"
        if self.image == self.control["image"] and self.digest == self.control["digest"]:
            return f"{head} (the CPU control){tail}"
        pct = abs(math.expm1(self.ln_ratio or 0.0)) * 100
        return f"{head} (cpu control {self.control['ppl']:.6g}, within {pct:.2g} %){tail}"


def _runner_canary(ctx: RunContext) -> Any:
    """The runner of `ctx`'s image when it runs a canary of its own (`run_canary` and `canary_command`:
    vLLM), else None (llama-bench: this module's; SGLang: none)."""
    runner = registry.get(ctx.spec.runner)
    return runner if hasattr(runner, "run_canary") else None


def enabled(ctx: RunContext) -> bool:
    """Whether `ctx`'s pair gets a canary: `bench.canary` on, and a llama-bench image or a runner with
    a canary of its own (vLLM)."""
    return ctx.lm.m.bench.canary and (ctx.spec.runner == "llama-bench" or _runner_canary(ctx) is not None)


def _threads(ctx: RunContext) -> int:
    """CPU threads of the canary: bench.threads, else the host's CPUs up to MAX_THREADS (recorded)."""
    return ctx.lm.m.bench.threads or min(os.cpu_count() or 1, MAX_THREADS)


def canary_spec(ctx: RunContext, path: Path) -> engine_api.RunSpec:
    """The canary's container: llama-perplexity on model file `path` (at /models/<name>, as the sweep
    mounts it), the text at TEXT_TARGET, the run's devices, memory limit and (Vulkan) shader cache
    volume, -ngl and flash attention as the sweep's first values."""
    axes = ctx.lm.m.bench
    args = ppl_mod.perplexity_args(
        f"/models/{path.name}",
        TEXT_TARGET,
        threads=_threads(ctx),
        n_gpu_layers=axes.n_gpu_layers[0],
        flash_attn=axes.flash_attn[0],
    )
    rs = container_spec(
        ctx.build.digest,
        ["llama-perplexity", *args],
        ctx.profile,
        model_dir=path,
        shader_volume=shader_cache_volume(ctx),
        run_id=ctx.opts.run_id,
        name=f"toolkit-canary-{ctx.opts.run_id}-{ctx.spec.name}-{ctx.model.name}"[:120],
        memory_bytes=memory_limit(ctx.lm, ctx.opts),
        model_file=True,
    )
    rs.mounts.append(engine_api.Mount(str(ppl_mod.CANARY_TEXT.resolve()), TEXT_TARGET, read_only=True))
    return rs


def dry_run_outcome(ctx: RunContext) -> Outcome | None:
    """The canary's exact command as a dry-run line, or None when it would not run."""
    if not enabled(ctx):
        return None
    path, _ = resolve_model(ctx.lm, ctx.model, dry_run=True)
    if path is None:
        return None
    runner = _runner_canary(ctx)
    command = runner.canary_command(ctx, path) if runner else ctx.engine.run_command(canary_spec(ctx, path))
    return Outcome(ctx.spec.name, ctx.model.name, "dry-run", "canary", command=command)


def run_canary(ctx: RunContext, controls: dict[str, CanaryResult]) -> CanaryResult | None:
    """Run the canary of `ctx`'s pair and judge it against the CPU control in `controls` (model sha256
    -> this run's CPU canary; a `cpu` image's ok result is added) or else the newest stored one.
    None when the model file is absent (the runner says why). Ctrl-C and the engine's loss propagate;
    a container the engine refuses (the first or a retry) leaves the result unchecked, saying why.
    A runner with a canary of its own (vLLM) runs it instead."""
    if runner := _runner_canary(ctx):
        return cast(CanaryResult | None, runner.run_canary(ctx, controls))
    path, _ = resolve_model(ctx.lm, ctx.model)
    if path is None:
        return None
    rs = canary_spec(ctx, path)
    res = CanaryResult(
        image=ctx.spec.name,
        model=ctx.model.name,
        digest=ctx.build.digest,
        backend=ctx.spec.backend,
        model_sha256=check_sha(ctx.lm, ctx.model, path),
        status="unchecked",
        threads=_threads(ctx),
        n_gpu_layers=ctx.lm.m.bench.n_gpu_layers[0],
        flash_attn=ctx.lm.m.bench.flash_attn[0],
        text_sha256=ppl_mod.text_sha256(),
        command=ctx.engine.run_command(rs),
        run_id=ctx.opts.run_id,
        created=utc_now(),
    )
    t0 = time.monotonic()
    if volume := shader_cache_volume(ctx):
        ctx.engine.ensure_volume(volume, {"org.toolkit.digest": ctx.build.digest})
    res.seconds, runs, cut = 0.0, 0, True
    while cut and runs < CUT_RUNS:
        # again only while exit 0, scoring begun, no result: llama.cpp's logger lost its last lines at exit
        runs += 1
        out = _container(ctx, rs, res)
        if out is None:  # the container did not run (res.reason says why): its wall time counted
            res.seconds, cut = round(res.seconds + time.monotonic() - t0, 3), False
            break
        res.seconds = round(res.seconds + out.seconds, 3)
        t0 = time.monotonic()
        cut = _judge_output(res, out, ctx.store, controls)
    if runs > 1 and res.status == "unchecked":
        res.reason += (
            f"; {runs} processes, each cut before its result"
            if cut
            else f"; the {runs - 1} processes before it were cut before their result"
            if runs > 2
            else "; the process before it was cut before its result"
        ) + " (llama.cpp#22142: its logger loses queued lines at exit)"
    return res


def _container(ctx: RunContext, rs: Any, res: CanaryResult) -> Any:
    """One llama-perplexity container of spec `rs`: its RunOutcome, or None with `res.reason` saying why
    it did not run (no llama-perplexity in an image built before the canary, the engine refusing it).
    Ctrl-C (Interrupted), the engine's loss and a connection error propagate."""
    try:
        return ctx.engine.run_container(rs, timeout=TIMEOUT_S)
    except (ctx.engine.Interrupted, ctx.engine.EngineLost):
        raise
    except Exception as err:  # e.g. no llama-perplexity in an image built before it was shipped
        if engine_api.is_connection_error(err):
            raise
        res.reason = f"the container did not run: {str(err)[-200:]}"
        if "llama-perplexity" in str(err) and "not found" in str(err):
            res.reason = (
                "no llama-perplexity in the image (built before the canary): "
                + f"`{invocation.command('build', '-i', ctx.spec.name)}`"
            )
        return None


def _judge_output(res: CanaryResult, out: Any, store: ResultStore, controls: dict[str, CanaryResult]) -> bool:
    """Fill `res` from the container's outcome `out`: unchecked (timeout, OOM, exit != 0, no result),
    else judged against the CPU control (this run's, else the newest stored). True when the process
    exited 0 with its output cut before the result (PerplexityOutputError.cut): another may print it."""
    if out.timed_out or out.oom_killed or out.exit_code != 0:
        why = "timed out" if out.timed_out else "out of memory" if out.oom_killed else f"exit {out.exit_code}"
        tail = " | ".join(ln.strip() for ln in out.stderr.splitlines() if ln.strip())[-200:]
        res.reason = f"llama-perplexity failed ({why}): {tail}"
        return False
    try:
        p = ppl_mod.parse_perplexity(out.stdout, out.stderr)
    except ppl_mod.PerplexityOutputError as err:
        res.reason = str(err)
        return err.cut
    judge_parsed(res, p.ppl, p.ppl_error, p.no_spread, store, controls)
    return False


def judge_parsed(
    res: CanaryResult,
    ppl: float,
    ppl_error: float | None,
    no_spread: bool,
    store: ResultStore,
    controls: dict[str, CanaryResult],
) -> CanaryResult | None:
    """Fill `res` with perplexity `ppl` (+/- `ppl_error`; `no_spread`: every scored token equally
    likely) judged against the CPU control (this run's in `controls`, else the newest stored); a cpu
    image's ok result becomes the control. Returns the control it was compared with (None: none)."""
    res.ppl, res.ppl_error = ppl, ppl_error
    mine = c if (c := controls.get(res.model_sha256)) and c.method == res.method else None
    control = None if res.backend == "cpu" else mine or stored_control(store, res)
    res.status, res.reason, res.ln_ratio = judge(ppl, control.ppl if control else None)
    if no_spread and res.status == "ok":  # NaN is said by judge; equal logits are wrong however close
        res.status, res.reason = (
            FLAG,
            (
                f"every scored token got the same probability (PPL {ppl:.6g}: no spread in the "
                "log-probabilities): the logits carry no information"
            ),
        )
    if control is not None:
        res.control = {
            "image": control.image,
            "digest": control.digest,
            "run_id": control.run_id,
            "ppl": control.ppl,
        }
    if res.backend == "cpu" and res.status == "ok":
        res.control = {"image": res.image, "digest": res.digest, "run_id": res.run_id, "ppl": res.ppl}
        controls.setdefault(res.model_sha256, res)
    return control


def _comparable(a: dict[str, Any], res: CanaryResult) -> bool:
    """Whether stored canary `a` is a CPU control for `res`: a cpu image's ok result on the same model
    file, text, n_ctx, chunks and method (a result stored before `method` was llama-perplexity's)."""
    return (
        a.get("backend") == "cpu"
        and a.get("method", METHOD) == res.method
        and a.get("status") == "ok"
        and a.get("model_sha256") == res.model_sha256
        and a.get("text_sha256") == res.text_sha256
        and a.get("n_ctx") == res.n_ctx
        and a.get("chunks") == res.chunks
        and isinstance(a.get("ppl"), (int, float))
        and canary_problem(a) is None  # a hand-edited ppl -5 or 0 would be a control judge divides by
    )


def stored_control(store: ResultStore, res: CanaryResult) -> CanaryResult | None:
    """The newest stored CPU control for `res` (results/*/canary.jsonl, newest `created`), or None."""
    best: dict[str, Any] | None = None
    for f in sorted(store.root.glob("*/canary.jsonl")):
        for a in read_jsonl(f):
            if _comparable(a, res) and (best is None or str(a.get("created")) >= str(best.get("created"))):
                best = a
    if best is None:
        return None
    known = {k: best[k] for k in CanaryResult.__dataclass_fields__ if k in best}
    return CanaryResult(**known)


def estimate_seconds(ctx: RunContext) -> float | None:
    """Seconds `ctx`'s canary took last time on this image digest and model sha256 (model_identity: another
    matrix entry of the same file counts), the newest run that ran (results/<digest12>/canary.jsonl), for
    the plan line; None when it never ran here, or is off. A Vulkan image's first canary on a host compiles
    its shaders (~8 min on lavapipe, 2 cores), later ones read them from the cache volume: the newest is
    the best guess."""
    if not enabled(ctx):
        return None
    path = ctx.store.root / short_digest(ctx.build.digest) / "canary.jsonl"
    sha = model_identity(ctx.lm, ctx.model)
    ran = [
        a
        for a in (read_jsonl(path) if path.is_file() else ())
        if a.get("model_sha256") == sha and a.get("status") != "unchecked"
    ]
    newest = max(ran, key=lambda a: str(a.get("created")), default=None)
    took = newest.get("seconds") if newest else None
    return float(took) if isinstance(took, (int, float)) and math.isfinite(took) and took >= 0 else None


def save(store: ResultStore, res: CanaryResult) -> Path:
    """Append `res` to results/<digest12>/canary.jsonl (records.append_jsonl: one whole line, fsynced,
    never through a symlink); returns the file. Raises OSError; BadInput (exit 4) when the file is a
    symlink or not a regular file."""
    path = store.root / short_digest(res.digest) / "canary.jsonl"
    append_jsonl(path, res.record())
    return path


class FlaggingSaver:
    """A Saver (toolkit.results.records.Saver) that stores every record with the canary's result (`canary`)
    and, for a `wrong-output` result, the stored flag `wrong-output`; everything else is the wrapped
    saver's (its counts stay the run's)."""

    def __init__(self, inner: Any, result: CanaryResult):
        self._inner = inner
        self._result = result

    def save(self, rec: BenchRecord, *, reraise: bool = True) -> None:
        update: dict[str, Any] = {"canary": self._result.record()}
        if self._result.status == FLAG:
            update["flags"] = merge_flags((rec.model_extra or {}).get("flags"), [FLAG])
        self._inner.save(rec.model_copy(update=update), reraise=reraise)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def with_canary(ctx: RunContext, result: CanaryResult | None) -> RunContext:
    """`ctx` whose records carry `result` (FlaggingSaver), or `ctx` itself when there is none."""
    if result is None or ctx.opts.saver is None:
        return ctx
    saver = cast(Saver, FlaggingSaver(ctx.opts.saver, result))  # duck-typed: every Saver method
    return replace(ctx, opts=replace(ctx.opts, saver=saver))
