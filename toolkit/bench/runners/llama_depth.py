"""The depth sweep of one llama-bench (image, model) pair: the model's `depth:` block in matrix.yaml
(toolkit/spec/depth.py) measured by llama-bench processes of its own after the main `bench:` sweep
(docs/running.md "Depth curves").

Which depths: those whose model + KV cache + reserve fit the memory the tests run in (`fit_depths`):
on a GPU image the passed GPUs' memory (an iGPU: the host's memory, which it shares); on a CPU image
the container's memory limit (bench.memory or --memory) when set, else the host's memory (MemTotal).
Each depth left out is one note line. Where a size is unknown (a dry run's absent model, a GGUF whose
header gives no KV shape, a GPU of unknown memory) every depth is kept and a note says so.

Which tests: every (depth, test) of `depth_axes` that the main sweep does not measure in the same run.
A test both would measure (usually pp512 and tg128 at depth 0 with the bench's first micro-batch) has
one test identity (n_depth 0 is a field of it) and is measured once, by the main sweep: two records of
one test in one run would make the later supersede the earlier in every table. With --resume, tests
already measured on this digest + model are left out too. What remains runs as one llama-bench process
per set of tests (one, unless a depth lost only some of its tests to the main sweep), `bench.runs`
times like the main sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolkit.bench.runners.base import Case, RunContext, check_sha, memory_limit, model_file_here
from toolkit.bench.runners.llama_bench import _case_key, missing_cases, resume_axes
from toolkit.host import info as hostinfo
from toolkit.spec.matrix import BenchAxes, depth_axes, fit_depths, gguf_kv_shape

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


def depth_plan(ctx: RunContext, *, resume: bool | None = None) -> DepthPlan:
    """The depth sweep `ctx`'s pair runs (empty without a `depth:` block): its fitting depths minus the
    main sweep's tests (and, with `resume` (default ctx.opts.resume), the tests already measured on this
    digest + model). Reads the GGUF header and, with resume, the results index; raises BadInput for a
    model file whose sha256 differs from the matrix's pin (check_sha)."""
    sweep = ctx.model.depth
    if sweep is None:
        return DepthPlan()
    depths, notes = fitting_depths(ctx)
    if not depths:
        return DepthPlan(notes=notes)
    bench = ctx.lm.m.bench
    axes = depth_axes(bench, sweep, depths)
    path = model_file_here(ctx.lm, ctx.model)
    resume = ctx.opts.resume if resume is None else resume
    sha = check_sha(ctx.lm, ctx.model, path) if resume and path is not None else None
    plan = DepthPlan(notes=notes)
    for env in bench.env_combinations():
        main = {_case_key(c, bench.threads) for c in _with_env(bench.cases(), env)}
        todo = (
            missing_cases(ctx.store, ctx.build.digest, sha, axes, env)
            if sha
            else _with_env(axes.cases(), env)
        )
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
    shape = gguf_kv_shape(str(path)) if path is not None else None
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
