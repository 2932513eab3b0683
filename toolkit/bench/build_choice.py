"""Which build of an image `toolkit bench` measures (`choose_build`): the newest build of the render
inputs matrix.yaml and the templates give now, a pinned digest (reproduce), or the newest of other
inputs (stale: refused, or measured and marked with --allow-stale); and the facts of a chosen build
the decision needs (still on the engine, its gfx targets). Used by bench/run.py `decide` and by a
campaign's plan (toolkit.campaign.slurm); prints nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.bench.runners.base import BenchOptions
from toolkit.core import invocation
from toolkit.core.errors import EngineUnavailable
from toolkit.core.types import utc_now
from toolkit.engine import api as engine
from toolkit.images import build as build_mod
from toolkit.matrix.api import ImageSpec, LoadedMatrix, template_path
from toolkit.results.records import BuildRecord, ResultStore


@dataclass
class BuildChoice:
    """The build `toolkit bench` measures for one image.

    status: current (its inputs key is the one matrix.yaml + templates give now) | pinned (a digest
    given in BenchOptions.pinned) | stale-allowed (the newest build, of other inputs, --allow-stale) |
    stale (refused: newest build of other inputs; `reason` names the fix) | unbuilt | failed (a
    pinned digest has no build record). `build` carries `bench_inputs` for the records (_image_ref).
    """

    status: str
    build: BuildRecord | None = None
    current_key: str | None = None
    reason: str = ""


def has_build(spec: ImageSpec, store: ResultStore, opts: BenchOptions) -> bool:
    """Whether choose_build has a build of `spec` to choose from (a pinned one, or one here:
    build.builds_here), without rendering its template: an image that cannot run on this host is
    said to be unbuilt too at no cost to the start of a bench."""
    return bool(opts.pinned.get(spec.name)) or bool(build_mod.builds_here(store, spec.name))


def choose_build(lm: LoadedMatrix, spec: ImageSpec, store: ResultStore, opts: BenchOptions) -> BuildChoice:
    """Pick the build of `spec` whose render-inputs key (build.inputs_key) equals the current one: the
    newest such build. Without one, the newest build is stale: refused, or measured and marked stale
    with opts.allow_stale. Renders the template (no build, no fetch); raises BadInput as render does."""
    every = [b for b in store.builds() if b.image == spec.name]
    builds = build_mod.builds_here(store, spec.name, every)
    pin = opts.pinned.get(spec.name)
    if pin:  # any engine's record: reproduce seeds the publisher's build and pulls its image here
        found = [b for b in every if b.digest == pin]
        if not found:
            return BuildChoice(
                "failed", reason=f"no build record of image ID {pin[:19]} in {store.builds_file}"
            )
        return BuildChoice("pinned", _chosen(found[-1], None, stale=False))
    current = build_mod.inputs_key(lm, spec)
    default = ResultStore(lm.root / "results")
    fix = f"run `{invocation.command('build', '-i', spec.name, matrix=lm.path, results=store.root)}`"
    if not builds:
        return BuildChoice(
            "unbuilt", current_key=current.key, reason=_unbuilt_reason(spec, store, default, fix, every)
        )
    newest = builds[-1]
    matching = [b for b in builds if build_mod.build_inputs_key(b) == current.key]
    if matching:
        b = matching[-1]
        note = (
            ""
            if b is newest
            else (
                f"measuring build {b.ref} ({b.digest[:19]}), the newest of the current inputs; the newest build "
                f"{newest.ref} ({newest.digest[:19]}) is of other inputs"
            )
        )
        return BuildChoice("current", _chosen(b, current.key, stale=False), current.key, note)
    why = _stale_reason(lm, spec, newest, current)
    if opts.allow_stale:
        return BuildChoice(
            "stale-allowed",
            _chosen(newest, current.key, stale=True),
            current.key,
            f"STALE build measured (--allow-stale): {why}; its records are marked stale",
        )
    return BuildChoice(
        "stale",
        current_key=current.key,
        reason=f"{why}; {fix} (or pass --allow-stale to measure it anyway, marked stale)",
    )


def _unbuilt_reason(
    spec: ImageSpec, store: ResultStore, default: ResultStore, fix: str, other_engines: list[BuildRecord]
) -> str:
    """Why no build is chosen: the folder's builds are of another engine (`other_engines`: this
    folder's builds of the image, none on the engine in use); or none is recorded in this results
    folder, naming a build recorded in the default results/ (a `toolkit build` without --results), as
    builds are recorded per folder."""
    if other_engines:
        names = sorted({b.engine for b in other_engines if b.engine})
        return (
            f"not built on this engine ({engine.engine_label()}): its builds in {store.builds_file} are on "
            f"another engine, {'; '.join(map(engine.engine_id_text, names))}, whose images this one does not "
            f"have; measure them there, or build it on this engine: {fix}"
        )
    if default.root.resolve() == store.root.resolve():
        return f"not built; {fix}"
    there = [b for b in default.builds() if b.image == spec.name] if default.builds_file.is_file() else []
    also = (
        f" (a build is recorded in {default.builds_file}: {there[-1].ref}, {there[-1].digest[:19]}; "
        "a bench measures the builds recorded in its own --results folder)"
        if there
        else ""
    )
    return f"no build of {spec.name} is recorded in {store.builds_file}{also}; {fix}"


def _chosen(build: BuildRecord, current_key: str | None, *, stale: bool) -> BuildRecord:
    return build.model_copy(update={"bench_inputs": {"current": current_key, "stale": stale}})


def _stale_reason(
    lm: LoadedMatrix, spec: ImageSpec, newest: BuildRecord, current: build_mod.InputsKey
) -> str:
    """Why the newest build is not of the current inputs, naming what changed where it can tell."""
    old = build_mod.build_inputs_key(newest)
    head = f"the newest build of {spec.name} ({newest.ref}, {newest.digest[:19]})"
    if old is None:
        return f"{head} has no inputs key (label {build_mod.INPUTS_KEY_LABEL}): built by an older toolkit"
    if newest.template_hash and newest.template_hash != current.template_hash:
        what = (
            f"{template_path(lm, spec.template)} or images[{spec.name}] in {lm.path} changed "
            f"since (template inputs {newest.template_hash[:12]} -> {current.template_hash[:12]})"
        )
    else:
        what = (
            f"its source (sources.{spec.source} in {lm.path}) or the toolkit version changed since"
            if spec.source
            else "the toolkit version changed since"
        )
    return f"{head} was built from other inputs: {what}; inputs key {old[:12]} -> {current.key[:12]}"


def unbuilt(spec: ImageSpec) -> BuildRecord:
    """A stand-in build record for --dry-run of an image not built yet (ref by tag)."""
    ref = f"toolkit/{spec.name}:latest"
    return BuildRecord(
        image=spec.name,
        ref=ref,
        digest=ref,
        backend=spec.backend,
        template=spec.template,
        template_hash="",
        created=utc_now(),
    )


def gone(digest: str) -> bool:
    """Whether the engine no longer has image `digest`; False when the engine cannot be asked (the run
    then stops at its first engine call, with that error and what was saved)."""
    try:
        return engine.inspect_image(digest) is None
    except Exception as err:
        if isinstance(err, EngineUnavailable) or engine.is_connection_error(err):
            return False
        raise


def gfx_targets(build: BuildRecord) -> list[str] | None:
    """The gfx targets a build was compiled for (its org.toolkit.gfx-targets label), None when it has none."""
    return [
        t.strip() for t in build.labels.get("org.toolkit.gfx-targets", "").split(",") if t.strip()
    ] or None
