"""Decide once, before anything runs, what `toolkit bench` does with every selected image and model
(issue 30's decision step): the models' files checked by their runners' preflight (`check_models`),
then one `Decision` per image or (image, model) pair (`decide`): the image's devices here, its build
(toolkit.bench.build_choice), the device profile for its gfx targets, the model's format and file,
and the cases its runner will measure. toolkit.bench.run counts the plan from the decisions and
carries them out in order. Pure of side effects except what a check must read (model headers, the
engine's image list) and the tiny stand-in model a real run generates."""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass, field, replace
from typing import Any

from toolkit.bench.build_choice import choose_build, gfx_targets, gone, has_build, unbuilt
from toolkit.bench.runners.base import (
    BenchOptions,
    Case,
    Outcome,
    RunContext,
    check_sha,
    model_here,
    no_source,
    resolve_model,
)
from toolkit.core import invocation
from toolkit.core import registry as runners
from toolkit.core.errors import BadInput, EngineUnavailable
from toolkit.core.text import path_text
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.host.doctor_checks import remote_engine
from toolkit.host.info import env_choice_note
from toolkit.matrix.api import CASE_DEFAULTS, ImageSpec, LoadedMatrix, ModelSpec
from toolkit.models.tiny import ensure_model_file, namesake_refusal
from toolkit.results.records import ResultStore


def check_models(lm: LoadedMatrix, models: list[ModelSpec], images: list[ImageSpec]) -> None:
    """`_check_model` for every selected model, in order: bad input (model files, checkpoint vs
    matrix) fails before the engine is asked. Raises BadInput."""
    for model in models:
        _check_model(lm, model, images)


def _check_model(lm: LoadedMatrix, model: ModelSpec, images: list[ImageSpec]) -> None:
    """Generate a missing tiny stand-in, then check the file: the sha256 pin, and each runner's own
    preflight for the runners of the selected images that take this model (GGUF header and extents;
    vLLM checkpoint quantization and revision). Raises BadInput naming models[NAME].path for a path
    the OS refuses (a name too long, a loop of links, no permission)."""
    path = lm.resolve(model.path, what=f"models[{model.name}].path")
    try:
        if not path.exists() and model.generate == "tiny-qwen3moe":
            ensure_model_file(path, model.generate, named=lm.model_paths())
        if path.is_symlink():
            path = path.resolve()
        if not path.exists():
            return
        for name in dict.fromkeys(i.runner for i in images if i.runner in model.runners):
            r = runners.get(name)
            if model.format in r.model_formats:
                r.preflight(lm, model, path)
        check_sha(lm, model, path)
    except (OSError, RuntimeError) as err:  # RuntimeError: pathlib's "Symlink loop" (Python 3.11)
        what = getattr(err, "strerror", None) or str(err)
        raise BadInput(
            f"{lm.path}: models[{model.name}].path: {getattr(err, 'filename', None) or path}: {what}; "
            "fix `path`"
        ) from None


@dataclass
class Decision:
    """What `toolkit bench` does with one image (`model` None: the whole image) or one (image, model)
    pair, decided once before anything runs (`decide`): status `run` with its RunContext and the cases
    its runner will measure (Runner.cases; with --resume only those not measured yet; `of`: cases of a
    full run), or `skipped` / `failed` / `stale` / `note` with the reason, said as one outcome line."""

    spec: ImageSpec
    model: ModelSpec | None
    status: str
    reason: str = ""
    ctx: RunContext | None = None
    cases: list[Case] = field(default_factory=list)
    of: int | None = None  # cases of one full run; None: len(cases)
    here: bool = True  # a dry run's pair a real run here would measure (False: no device here, model absent or refused)

    @property
    def per_run(self) -> int:
        return len(self.cases) if self.of is None else self.of

    def outcome(self) -> Outcome:
        """The line a decision that is not `run` gives."""
        return Outcome(self.spec.name, self.model.name if self.model else "-", self.status, self.reason)


def _dry_run_model_note(lm: LoadedMatrix, model: ModelSpec, runner: Any) -> str:
    """What a real run would do with `model` that its dry-run command does not show: skip it (file
    absent here) or refuse it (the runner's preflight: not a regular file, not GGUF, truncated, a
    checkpoint whose quantization differs...). "" when a real run would take it. Reads headers only:
    no sha256 of a 17 GB file in a dry run, no tiny model generated."""
    try:
        path = lm.resolve(model.path, what=f"models[{model.name}].path")
        path = path.resolve() if path.is_symlink() else path
        if not path.exists():
            if model.generate:
                why = namesake_refusal(path, model.generate, named=lm.model_paths())
                return f"a real run refuses this model: {why}" if why else ""
            fetch = (
                f"; `{invocation.command('fetch-model', model.name)}` fetches it"
                if model.hf
                else no_source(model)
            )
            return f"model file {path_text(path)} is absent here: a real run skips this pair{fetch}"
        runner.preflight(lm, model, path)
    except BadInput as err:
        return f"a real run refuses this model: {err}"
    except (OSError, RuntimeError, ValueError) as err:
        return f"a real run refuses this model: models[{model.name}].path: {err}"
    return ""


def decide(
    lm: LoadedMatrix,
    images: list[ImageSpec],
    models: list[ModelSpec],
    store: ResultStore,
    gpus: list,
    opts: BenchOptions,
) -> list[Decision]:
    """Decide, once, what this run does with every selected image and model, in the order it runs
    them: the image's devices here (else skipped, or failed with --strict; a dry run goes on with an
    example R9700 profile), its build (current, pinned or --allow-stale; unbuilt, stale, a failed pin
    or an image gone from the engine: one line saying why), the device profile for its gfx targets,
    then per model its runner and format, whether its file or folder is here (or generated by the
    run), and the cases the runner will measure (not in a dry run: it reads no results). Raises only
    what the runners' `cases` raise (BadInput)."""
    out: list[Decision] = []
    for spec in images:
        out += _decide_image(lm, spec, models, store, gpus, opts)
    return out


def _decide_image(
    lm: LoadedMatrix,
    spec: ImageSpec,
    models: list[ModelSpec],
    store: ResultStore,
    gpus: list,
    opts: BenchOptions,
) -> list[Decision]:
    """`decide` for one image: its lines, then one decision per model its runner takes."""

    def image(status: str, reason: str) -> list[Decision]:
        return [Decision(spec, None, status, reason)]

    usable = [m for m in models if spec.runner in m.runners]
    if not usable:
        return image("skipped", f"no model in the matrix lists runner {spec.runner}")
    unable = "failed" if opts.strict else "skipped"
    # the host's devices first: on a host without them, that is the reason, built or not
    short = engine_elsewhere(spec.backend) or devices.shortfall(
        spec.backend, gpus, allow_software=opts.allow_software_gpu
    )
    if short and not opts.dry_run:  # and say now what fixing the host would meet next, in one wording
        # for every image (not the device's fix: a build alone does not make rocm run without /dev/kfd)
        unbuilt_too = not has_build(spec, store, opts)
        return image(
            unable,
            short.message()
            + (
                f"; it is not built yet either: `{invocation.command('build', '-i', spec.name, matrix=lm.path, results=store.root)}`"
                " (needed too, once it can run here)"
                if unbuilt_too
                else ""
            ),
        )
    choice = choose_build(lm, spec, store, opts)
    if choice.status in ("stale", "failed"):
        return image(choice.status, choice.reason)
    build = choice.build or (unbuilt(spec) if opts.dry_run else None)
    if build is None:
        return image("skipped", choice.reason)
    if not opts.dry_run and gone(build.digest):
        return image("skipped", f"image {build.digest[:19]} is no longer in the engine; rebuild it")
    out = image("note", choice.reason) if choice.reason else []
    if short:  # dry run on a host without the device: show the command for one R9700
        out += image(
            "note",
            f"{short.message()}; the command below uses an example R9700 device profile",
        )
        profile = devices.DeviceProfile.example(spec.backend)
        out += [Decision(spec, None, "note", n) for n in _env_choice(spec, opts)]  # not applied there either
    else:
        # the multi-GPU policy (devices.select_gpus): every discrete GPU of the image's gfx targets, or
        # --gpu N; hidden GPUs are named in a note, the passed ones recorded with every result
        try:
            profile = devices.profile_for(
                spec.backend,
                gpus,
                pin=opts.gpu,
                allow_software=opts.allow_software_gpu,
                targets=gfx_targets(build),
            )
        except devices.DeviceMissing as err:  # no GPU of the image's arch: this image only
            return out + image(unable, str(err))
        out += [Decision(spec, None, "note", n) for n in profile.notes + _env_choice(spec, opts)]
    runner = runners.get(spec.runner)
    for m in usable:
        ctx = RunContext(lm, spec, build, m, store, opts, profile, {}, lambda *a, **k: None)
        out += _model_decisions(runner, ctx, devices_here=not short)
    return out


def engine_elsewhere(backend: str) -> devices.Shortfall | None:
    """Why a GPU image (`backend` rocm or vulkan) cannot run through a container engine on another host
    (doctor_checks.remote_engine of DOCKER_HOST, a docker context's endpoint, Podman's CONTAINER_HOST:
    tcp://, ssh://, http(s):// of a host that is not this one): the device nodes and their group ids a
    GPU image is given are read from this host's /dev and /sys, which say nothing of that host's.
    None for the cpu image (no device) or an engine on this host."""
    if backend == "cpu":
        return None
    podman = engine.engine_name() == "podman"
    env = dict(os.environ)
    if not podman and not env.get("DOCKER_HOST"):
        with contextlib.suppress(EngineUnavailable):  # a broken context: the engine's first call says so
            env["DOCKER_HOST"] = engine.use_docker_context()
    remote = remote_engine({"engine": "podman" if podman else "docker"}, env, socket.gethostname())
    if remote is None:
        return None
    return devices.Shortfall(
        f"GPU devices through a {remote}",
        "the device nodes and groups a GPU image is given are read from this host's /dev and /sys, which "
        "say nothing of that host's",
        f"run `toolkit bench` on that host, or point {'CONTAINER_HOST' if podman else 'DOCKER_HOST (or the docker context)'} "
        "at this host's engine",
    )


def _env_choice(spec: ImageSpec, opts: BenchOptions) -> list[str]:
    """The note of a GPU choice in this shell's environment that containers do not get
    (host.info.env_choice_note), for an image that is given GPUs; [] where there is none."""
    note = env_choice_note(os.environ, opts.gpu) if spec.backend != "cpu" else None
    return [note] if note else []


def _model_decisions(runner: Any, ctx: RunContext, *, devices_here: bool = True) -> list[Decision]:
    """`decide` for one (image, model) pair of `ctx`: skipped for a format the runner does not read,
    a dry run's note on the model, then `run` with the cases the runner will measure (in a dry run
    `here` False when a real run here would not: `devices_here` False, the model absent or refused)."""
    lm, spec, m, opts = ctx.lm, ctx.spec, ctx.model, ctx.opts
    if m.format not in runner.model_formats:  # said, never dropped silently
        why = (
            f"runner {spec.runner} reads {' or '.join(runner.model_formats)} models, not {m.format}: "
            f"remove {spec.runner} from models[{m.name}].runners"
        )
        return [Decision(spec, m, "skipped", why)]
    note = _dry_run_model_note(lm, m, runner) if opts.dry_run else ""
    out = [Decision(spec, m, "note", n) for n in (note, _axes_not_taken(lm, spec.runner)) if n]
    if opts.dry_run:  # every case the real run would measure, for the plan line and the commands
        whole = runner.cases(replace(ctx, opts=replace(opts, resume=False)))
        here = devices_here and not note
        if opts.resume and here:  # the model is here: only what --resume would measure (results read)
            return out + _runner_notes(runner, ctx) + [_run(ctx, runner.cases(ctx), here=here, of=len(whole))]
        return out + _runner_notes(runner, ctx) + [_run(ctx, whole, here=here)]
    if model_here(lm, m) is None and not m.generate:
        path, why = resolve_model(lm, m)  # absent (with the fetch command), a loop of links, ...
        if path is None:  # said before anything runs, not after the other pairs measured
            return out + [Decision(spec, m, "skipped", why)]
        return out + [Decision(spec, m, "run", ctx=ctx)]  # the runner says what else is wrong with it
    out += _runner_notes(runner, ctx)
    cases = runner.cases(ctx)
    of = len(runner.cases(replace(ctx, opts=replace(opts, resume=False)))) if opts.resume else None
    return out + [_run(ctx, cases, of=of)]


def _run(ctx: RunContext, cases: list[Case], **kw: Any) -> Decision:
    """The `run` decision of ctx's pair with the `cases` its runner measures, carried in its context too
    (RunContext.cases): the runner runs what was decided and counted, and asks the results no second time."""
    return Decision(ctx.spec, ctx.model, "run", ctx=replace(ctx, cases=cases), cases=cases, **kw)


def _runner_notes(runner: Any, ctx: RunContext) -> list[Decision]:
    """The runner's own lines about the pair before it runs (`notes(ctx)`, optional: llama-bench's
    depths left out of the depth sweep), one note decision each."""
    notes = getattr(runner, "notes", None)
    return [Decision(ctx.spec, ctx.model, "note", n) for n in (notes(ctx) if notes else [])]


def _axes_not_taken(lm: LoadedMatrix, runner: str) -> str:
    """Which `bench:` axes in use this runner does not take (the env axis, KV-cache types, split mode,
    MoE offload are llama-bench's): said once per pair, never dropped silently; "" when none."""
    if runner == "llama-bench":
        return ""
    b = lm.m.bench
    unused = [f"env ({', '.join(sorted(b.env))})"] if b.env else []
    unused += [f"{k} {getattr(b, k)}" for k, default in CASE_DEFAULTS.items() if getattr(b, k) != [default]]
    if not unused:
        return ""
    return f"runner {runner} does not take bench.{'; bench.'.join(unused)}: measured without them"
