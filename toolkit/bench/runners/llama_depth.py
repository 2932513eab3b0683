"""The depth sweep of one llama-bench (image, model) pair: the model's `depth:` block in matrix.yaml
(toolkit/matrix/depth.py) measured by llama-bench processes of its own after the main `bench:` sweep. Which
depths fit (`fit_depths`), which tests are left to the main sweep (one test identity, measured once) or to
--resume, and the notes said for each: docs/running.md "Depth curves".

What it costs (`estimate`, the plan line): besides the timed repetitions, a test at n_depth > 0 makes
llama-bench prefill n_depth tokens before the first repetition (once per run of tests at the same depth and
settings) and restore the cached state before each later one (llama-bench.cpp's `cstate` at 0c1e57098). Both
are counted from this host's records: the fill at the prefill rates measured along the depth curve
(`fill_seconds`), the restores as the test window's time beyond its timed samples."""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from toolkit.bench.runners.base import (
    Case,
    RunContext,
    _file_state_cached,
    check_sha,
    memory_limit,
    model_file_here,
    model_identity,
    newest_here,
)
from toolkit.bench.runners.llama_bench import (
    _case_key,
    _record_case_key,
    missing_cases,
    resume_axes,
    same_env,
)
from toolkit.core import jsonsafe
from toolkit.host import info as hostinfo
from toolkit.matrix.api import BenchAxes, KvShape, depth_axes, fit_depths
from toolkit.models.gguf_meta import gguf_kv_shape
from toolkit.results.records import BenchRecord, ResultStore

SWEEP = "depth"
"""The `sweep` key of a depth case (Runner.cases): the plan line counts them."""


@dataclass
class DepthPlan:
    """The depth sweep of one pair: `processes` (env combination, axes of one llama-bench process),
    in the order they run; `cases` they measure (each with env when the env axis is used, and
    sweep=SWEEP); `notes` (one line per depth left out, or why the fit was not checked)."""

    processes: list[tuple[dict[str, str | None], BenchAxes]] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def depth_plan(
    ctx: RunContext, *, resume: bool | None = None, decided: list[Case] | None = None
) -> DepthPlan:
    """The depth sweep `ctx`'s pair runs (empty without a `depth:` block): its fitting depths minus the
    main sweep's tests (and, with `resume` (default ctx.opts.resume), the tests already measured on this
    digest + model). `decided`: the pair's cases as `toolkit bench` decided them (RunContext.cases): the
    depth sweep's among them are those it runs, no results read. Reads the GGUF header and, with resume
    and nothing decided, the results index; raises BadInput for a model file whose sha256 differs from
    the matrix's pin (check_sha)."""
    sweep = ctx.model.depth
    if sweep is None:
        return DepthPlan()
    depths, notes = fitting_depths(ctx)
    if not depths:
        return DepthPlan(notes=notes)
    bench = ctx.lm.m.bench
    axes = depth_axes(bench, sweep, depths)
    path = model_file_here(ctx.lm, ctx.model)
    resume = (ctx.opts.resume if resume is None else resume) and decided is None
    sha = check_sha(ctx.lm, ctx.model, path) if resume and path is not None else None
    plan = DepthPlan(notes=notes)
    for env in bench.env_combinations():
        main = {_case_key(c, bench.threads) for c in _with_env(bench.cases(), env)}
        if decided is not None:
            todo = [c for c in decided if c.get("sweep") == SWEEP and same_env(c, env)]
        elif sha:
            todo = missing_cases(ctx.store, ctx.build.digest, sha, axes, env)
        else:
            todo = _with_env(axes.cases(), env)
        todo = [c for c in todo if _case_key(c, axes.threads) not in main]
        plan.cases += [{**c, "sweep": SWEEP} for c in todo]
        plan.processes += [(env, a) for a in merge_depths(resume_axes(axes, todo))]
    return plan


def _with_env(cases: list[Case], env: dict[str, str | None]) -> list[Case]:
    return [{**c, "env": env} if env else c for c in cases]


def merge_depths(parts: list[BenchAxes]) -> list[BenchAxes]:
    """One BenchAxes per set of tests: `parts` (resume_axes' one per depth and micro-batch) that differ
    only in n_depth become one process over their depths (llama-bench crosses -d with -p and -n), in
    the order of their first depth."""
    merged: dict[str, BenchAxes] = {}
    for a in parts:
        key = repr(a.model_dump(exclude={"n_depth"}))
        have = merged.get(key)
        merged[key] = (
            a if have is None else have.model_copy(update={"n_depth": sorted({*have.n_depth, *a.n_depth})})
        )
    return list(merged.values())


def fitting_depths(ctx: RunContext) -> tuple[list[int], list[str]]:
    """(depths kept, one note per depth left out) of `ctx.model`'s depth sweep: model file bytes +
    KV cache (bytes per token from the GGUF, the largest of the bench's cache types, times depth + the
    largest test's tokens) + FIT_RESERVE_BYTES within `capacity(ctx)`. Every depth, with a note,
    where the model, its KV shape or the capacity is unknown."""
    sweep = ctx.model.depth
    assert sweep is not None
    depths = sweep.depths()
    path = model_file_here(ctx.lm, ctx.model)
    shape = kv_shape(ctx, path) if path is not None else None
    size, where = capacity(ctx)
    unknown = (
        "the model file is not here"
        if path is None
        else "its GGUF header gives no KV-cache shape"
        if shape is None
        else f"the {where} is unknown"
        if size is None
        else ""
    )
    if unknown:
        return depths, [f"depth sweep: fit not checked ({unknown}): every depth is measured"]
    assert shape is not None and path is not None and size is not None
    bench = ctx.lm.m.bench
    kv = max(shape.bytes_per_token(k, v) for k in bench.type_k for v in bench.type_v)
    kept, skipped = fit_depths(
        depths,
        tokens=max(sweep.n_prompt + sweep.n_gen),
        kv_per_token=kv,
        model_bytes=path.stat().st_size,
        gpu_bytes=size,
        memory=where,
    )
    return kept, [f"depth sweep: {s}" for s in skipped]


def kv_shape(ctx: RunContext, path: Path) -> KvShape | None:
    """gguf_kv_shape of the model file at `path`, read once per state of the file (cached beside its sha256 in
    .toolkit/: reading the header walks every tensor's info). The cache's kind, "kv-shape-layers", names the
    per-layer rule: an entry of the first-item rule ("kv-shape") is not read."""

    def read() -> str:
        shape = gguf_kv_shape(str(path))
        return json.dumps(asdict(shape) if shape else None)

    # a cache entry edited by hand: read the header again
    with contextlib.suppress(jsonsafe.JsonProblem, TypeError):
        data = jsonsafe.parse(_file_state_cached(ctx.lm, "kv-shape-layers", path, read))
        if data is None:
            return None
        shape = KvShape(**data)
        if all(type(v) is int and v > 0 for v in asdict(shape).values()):
            return shape
    return gguf_kv_shape(str(path))


def capacity(ctx: RunContext) -> tuple[int | None, str]:
    """(bytes, what they are) the depth sweep's model and KV cache must fit in: a CPU image's
    container memory limit (bench.memory / --memory), else the host's memory (/proc/meminfo
    MemTotal); a GPU image's passed GPUs' memory summed (layers split over them), or the host's memory
    for an iGPU (it allocates from system memory). None where it is unknown (0 read)."""
    gpus: list[dict[str, Any]] = ctx.profile.gpu_details
    if ctx.spec.backend == "cpu":
        limit = memory_limit(ctx.lm, ctx.opts)
        if limit:
            return limit, "container memory limit (bench.memory or --memory)"
        return hostinfo.memory_bytes() or None, "host memory"
    if any(g.get("is_igpu") for g in gpus):
        return hostinfo.memory_bytes() or None, "host memory (shared by the iGPU)"
    vram = sum(int(g.get("vram_bytes") or 0) for g in gpus)
    return vram or None, "GPU memory" if len(gpus) < 2 else f"memory of {len(gpus)} GPUs"


_TEST_FIELDS = ("n_prompt", "n_gen", "n_depth")


def repetition_seconds(r: BenchRecord) -> float:
    """Seconds one timed repetition of `r`'s test took: the mean over its samples of (n_prompt + n_gen) / that
    sample's tok/s (each repetition's own time), else (n_prompt + n_gen) / avg_ts where it lists none. Not
    tokens / mean tok/s: on noisy samples that is far shorter than they took. inf where a sample or avg_ts is
    0 (the caller drops it)."""
    tokens = r.n_prompt + r.n_gen
    samples = list(r.samples_ts) or [r.avg_ts or 0.0]
    return math.inf if min(samples) <= 0 else sum(tokens / s for s in samples) / len(samples)


def measured_seconds(
    store: ResultStore, image: str, model: str | None, axes: BenchAxes, cases: list[dict[str, Any]]
) -> tuple[int, float]:
    """(cases known, seconds): how long `cases` of `axes` took before, for the plan line. Per case, the
    seconds of one repetition (repetition_seconds) x axes.repetitions of the newest ok llama-bench record of
    the same image name, model sha256 (`model`: model_identity, what --resume matches) and test (the one test identity's case fields), measured on this host (a
    campaign host's records, `host.key`, measure another machine). Cases never measured are not counted. Asks
    the query index: one record per test, not the history."""

    def timed(r: BenchRecord) -> tuple[tuple, float] | None:
        if r.method != "llama-bench" or not r.avg_ts:
            return None
        t = repetition_seconds(r)
        return (_record_case_key(r, axes), t) if math.isfinite(t) else None

    seen = newest_here(store, image, model, timed)
    known = [seen[k] for k in (_case_key(c, axes.threads) for c in cases) if k in seen]
    return len(known), sum(known) * axes.repetitions


def estimate(ctx: RunContext, cases: list[Case]) -> tuple[int, float]:
    """(cases known, seconds) `cases` of ctx's pair take to measure, for the plan line: measured_seconds
    (each known case's timed repetitions, from the tok/s of its newest ok record on this host) plus
    the untimed depth work of the known cases at n_depth > 0 (untimed_depth_seconds)."""
    bench = ctx.lm.m.bench
    model = model_identity(ctx.lm, ctx.model)
    known, seconds = measured_seconds(ctx.store, ctx.spec.name, model, bench, cases)
    if not known or not any(c.get("n_depth") for c in cases):
        return known, seconds
    return known, seconds + untimed_depth_seconds(ctx, cases, model)


def untimed_depth_seconds(ctx: RunContext, cases: list[Case], model: str | None) -> float:
    """Seconds llama-bench spends on `cases` at n_depth > 0 outside their timed repetitions, from the
    newest ok llama-bench record of each case of ctx's image name and model sha256 `model` on this host (as
    measured_seconds; a case never measured adds nothing):
    - the depth fill, once per run of consecutive cases (in `cases`' order, the order llama-bench runs
      them) at the same depth and settings: fill_seconds over the prefill curve of those settings
      (the pp records' tok/s by depth, of the prompt length measured at the most depths);
    - the restores: the record's test window (telemetry duration_s, from its first timed repetition)
      beyond its timed samples (raw samples_ns), scaled from its repetitions to bench.repetitions.
    A fill with no pp rate of its settings measured is not counted."""
    bench = ctx.lm.m.bench
    newest: dict[tuple, BenchRecord] = newest_here(  # case key -> the newest ok llama-bench record
        ctx.store,
        ctx.spec.name,
        model,
        lambda r: (_record_case_key(r, bench), r) if r.method == "llama-bench" else None,
    )
    curves: dict[tuple, dict[int, dict[int, float]]] = {}  # settings -> n_prompt -> depth -> tok/s
    for r in newest.values():
        if r.n_prompt > 0 and r.n_gen == 0 and r.avg_ts:
            by_prompt = curves.setdefault(_settings(_record_case_key(r, bench)), {})
            by_prompt.setdefault(r.n_prompt, {})[r.n_depth] = r.avg_ts
    total, previous, pending = 0.0, None, False
    for c in cases:
        key = _case_key(c, bench.threads)
        depth, settings = int(c.get("n_depth") or 0), _settings(key)
        if (settings, depth) != previous:
            previous, pending = (settings, depth), depth > 0
        rec = newest.get(key)
        if not depth or rec is None:
            continue
        if pending:
            total, pending = total + fill_seconds(depth, _prefill_curve(curves.get(settings, {}))), False
        total += restore_seconds(rec, bench.repetitions)
    return total


def _prefill_curve(by_prompt: dict[int, dict[int, float]]) -> dict[int, float]:
    """The prefill curve (depth -> tok/s) of the prompt length measured at the most depths (the depth
    sweep's own, ties: the longest), from `by_prompt` (n_prompt -> depth -> tok/s); {} when empty."""
    if not by_prompt:
        return {}
    return by_prompt[max(by_prompt, key=lambda p: (len(by_prompt[p]), p))]


def _settings(key: tuple) -> tuple:
    """A case key (_case_key) without its test and depth: the settings the depth fill runs with."""
    return tuple(kv for kv in key if kv[0] not in _TEST_FIELDS)


def fill_seconds(depth: int, rates: dict[int, float]) -> float:
    """Seconds to prefill `depth` tokens into an empty KV cache at `rates` (depth in tokens -> prefill
    tok/s measured there): the integral of 1/rate from 0 to `depth`, 1/rate linear between measured
    depths and flat beyond the outermost. 0.0 without a usable rate."""
    pts = sorted((d, 1.0 / ts) for d, ts in rates.items() if ts > 0 and math.isfinite(ts))
    if not pts or depth <= 0:
        return 0.0

    def inverse(x: float) -> float:  # seconds per token at depth x
        if x <= pts[0][0]:
            return pts[0][1]
        for (d0, v0), (d1, v1) in zip(pts, pts[1:], strict=False):
            if x <= d1:
                return v0 + (v1 - v0) * (x - d0) / (d1 - d0)
        return pts[-1][1]

    xs = sorted({0, depth, *(d for d, _ in pts if 0 < d < depth)})
    return sum((b - a) * (inverse(a) + inverse(b)) / 2 for a, b in zip(xs, xs[1:], strict=False))


def restore_seconds(r: BenchRecord, repetitions: int) -> float:
    """Seconds of untimed work inside record `r`'s test window (its telemetry duration_s, from the
    first timed repetition to the row: llama-bench's state restores before repetitions 2..R) beyond
    its timed samples, for `repetitions` repetitions: x (repetitions - 1) / (R - 1). 0.0 where the
    window or the samples are not recorded, or the window did not start at the test's first
    repetition (`window_from` is not "progress")."""
    tel = r.telemetry or {}
    window, samples = tel.get("duration_s"), r.raw.get("samples_ns")
    if tel.get("window_from") != "progress" or not isinstance(window, int | float):
        return 0.0
    if not isinstance(samples, list) or len(samples) < 2:
        return 0.0
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in samples):
        return 0.0
    extra = float(window) - sum(samples) / 1e9
    if not math.isfinite(extra) or extra <= 0:
        return 0.0
    return extra * (repetitions - 1) / (len(samples) - 1)
