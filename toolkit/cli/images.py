"""Commands about images: `toolkit render`, `toolkit build`, `toolkit pins`.

Registered on the main group in toolkit.cli.main (cli.add_command); thin like the rest of the CLI.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from toolkit.cli.common import (
    EPILOG,
    BuildStatus,
    FiniteRange,
    _err,
    _load,
    _store,
    builds_results_option,
    echo_json,
    image_option,
    json_option,
    matrix_option,
)
from toolkit.core.errors import RemoteUnavailable
from toolkit.core.text import path_text, shell_join


@click.command(epilog=EPILOG)
@matrix_option
@image_option
@json_option
def render(matrix_path, images, as_json):
    """Render Dockerfile.templates/ into images/<name>/Dockerfile (deterministic) and print the build
    commands `toolkit build` would run.

    Validates matrix.yaml first: every error names the file, the key and the fix.
    """
    from toolkit.images import build as build_mod

    lm = _load(matrix_path)
    store = _store(lm, None, "render")
    out = []
    for spec in lm.select_images(images):
        res = build_mod.build_image(lm, spec, store, dry_run=True)
        out.append(
            {
                "image": spec.name,
                "dockerfile": str(lm.root / "images" / spec.name / "Dockerfile"),
                "build_command": res.command,
            }
        )
    if as_json:
        echo_json(out)
        return
    for o in out:
        click.echo(f"{o['image']}: wrote {path_text(o['dockerfile'])}")
        click.echo(f"  {shell_join(o['build_command'])}")


@click.command(epilog=EPILOG)
@matrix_option
@image_option
@json_option
@builds_results_option
@click.option("--no-cache", is_flag=True, help="Rebuild every layer (BuildKit cache mounts are kept).")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Render and print the exact build commands (`docker buildx build`, or `podman build` where Podman is the engine); build nothing.",
)
@click.option("--fail-fast", is_flag=True, help="Stop at the first failed image (default: build the others).")
@click.option(
    "--verbose", "-v", is_flag=True, help="Stream every build log line (default: build steps only)."
)
@click.option(
    "--ca-bundle",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="CA bundle for HTTPS inside the build (TLS-intercepting proxies), passed as a BuildKit "
    "secret `pip_ca`: never stored in a layer, label, record or log.",
)
@click.option(
    "--push", "push_after", is_flag=True, help="Push each image built here afterwards (see `toolkit push`)."
)
@click.option(
    "--registry",
    default=None,
    metavar="HOST[:PORT]/NAMESPACE",
    help="Registry for --push (default: `registry:` in matrix.yaml).",
)
@click.option(
    "--all",
    "all_images",
    is_flag=True,
    help="Build every image of the matrix, also those this host cannot run (publishing; --push implies it).",
)
@click.option(
    "--allow-software-gpu",
    is_flag=True,
    help="Count Mesa lavapipe as a Vulkan device, so the Vulkan image is built on a host without a GPU.",
)
def build(
    matrix_path,
    images,
    as_json,
    results_dir,
    no_cache,
    dry_run,
    fail_fast,
    verbose,
    ca_bundle,
    push_after,
    registry,
    all_images,
    allow_software_gpu,
):
    """Build the images (Docker: BuildKit, docker buildx; Podman: podman build) and record what was built.

    By default only the images this host can run (`toolkit doctor`'s verdict; the CPU image always):
    each other image gets one line saying why it is skipped and how to build it anyway (`-i NAME`,
    `--all`). `-i NAME` builds the images named; `--all` and `--push` build every image.

    Each image is labelled (OCI created/revision/source/version, llama.cpp commit, backend, template
    hash) and a build record (ref, image digest, labels, size, seconds) is appended to
    results/builds.jsonl for `toolkit bench`. An image whose base cannot be found or pulled is
    skipped with the reason; a failed build keeps its log and names it.
    """
    from toolkit.images import build as build_mod

    lm = _load(matrix_path)
    if push_after and not dry_run:  # before an hour of builds, not after them
        from toolkit.publish import push as publish

        publish.push_registry(lm, registry, [spec.name for spec in lm.select_images(images)] or ["x"])
    store = _store(lm, results_dir, "build")
    every = bool(images or all_images or push_after)  # default: what this host can run (doctor's verdict)
    specs, skipped = build_mod.select(lm, images, every=every, allow_software=allow_software_gpu)
    if not as_json:
        for sk in skipped:
            click.echo(sk.line())
    status = None if (as_json or dry_run) else BuildStatus.for_stderr()
    build_mod.build_then_push(
        lm,
        specs,
        store,
        skipped=skipped,
        steps_for=_steps_for(lm, store, status, verbose=verbose, announce=not (as_json or dry_run)),
        after=status.stop if status else lambda: None,
        on_done=(lambda res, before: None) if as_json else _print_done(dry_run),
        report=_echo_json_results if as_json else lambda results: None,
        push=_pusher(lm, store, registry) if push_after else None,
        fail_fast=fail_fast,
        no_cache=no_cache,
        dry_run=dry_run,
        secrets=[f"id=pip_ca,src={Path(ca_bundle).resolve()}"] if ca_bundle else None,
    )


def _steps_for(lm, store, status: BuildStatus | None, *, verbose: bool, announce: bool):
    """build_images' `steps_for`: each build announced on stderr first (`announce`: not --json, not a
    dry run; with the source it is about to fetch, sources.fetch_note), its log condensed to step lines (build_plan.BuildSteps) on the status line or stderr."""
    from toolkit.images import build_plan, sources

    def steps_for(spec):
        if announce:
            _err(
                f"==> {spec.name}: building ({spec.template}, backend {spec.backend}"
                f"{build_plan.previous_build_note(store, spec.name)})"
            )
            if spec.source and (note := sources.fetch_note(lm, spec.source)):
                _err(f"   {spec.name} | {note}")  # a clone on a slow network: minutes without a line
        # on a terminal a step line fits its width (`   NAME | ` before it); in a log, 100 characters
        width = shutil.get_terminal_size().columns - len(spec.name) - 6 if status else 100
        return build_plan.BuildSteps(
            spec.name,
            status.echo if status else _err,
            verbose=verbose,
            width=max(width, 40),
            status=status.update if status else None,
            full_build_s=build_plan.full_build_seconds(store, spec.name),
        )

    return steps_for


def _echo_json_results(results) -> None:
    """`toolkit build --json`: every image's result (BuildResult.to_json) as one JSON list."""
    echo_json([r.to_json() for r in results])


def _print_done(dry_run: bool):
    """build_images' `on_done`: the result's line (the build command on a dry run)."""
    return lambda res, before: click.echo(res.line(before, dry_run=dry_run))


def _pusher(lm, store, registry: str | None):
    """build_then_push's `push`: push the images built (`toolkit push`) and print a line per image."""

    def push(built: list[str]) -> None:
        from toolkit.publish import push as publish

        for p in publish.push_images(lm, store, built, registry):
            click.echo(f"{p.image}: {p.status} {', '.join(p.refs)} {p.repo_digest or p.reason}")

    return push


@click.command(epilog=EPILOG)
@matrix_option
@image_option
@click.option(
    "--model",
    "-m",
    "models",
    multiple=True,
    metavar="NAME",
    help="Only this model (repeatable). With --image or --model, only what they name is checked.",
)
@json_option
@click.option(
    "--timeout",
    default=10.0,
    show_default=True,
    type=FiniteRange(min=0.5),
    help="Seconds to wait for each registry, git host, package index or Hub answer.",
)
def pins(matrix_path, images, models, as_json, timeout):
    """Check that every pin still resolves: base images (FROM lines of the rendered Dockerfiles, template
    variables with @sha256:), source refs/commits (`sources:`, their fallbacks) and Hugging Face revisions.

    Each is ok, moved (a tag/branch now points elsewhere than its pinned digest/commit), missing (the
    digest, commit, sdist or revision is gone), unreachable (not checked: no answer; the row says why)
    or unchecked (not checked here: a lookup this host cannot make, Podman's of an image; the row says
    where to). Exits 10 when any pin moved or is missing; unreachable or unchecked alone exits 0.
    """
    from toolkit.images import pins as pins_mod

    results = pins_mod.check_pins(_load(matrix_path), images, models, timeout=timeout)
    if as_json:
        echo_json(pins_mod.pins_json(results))
    else:
        click.echo(pins_mod.format_pins(results))
    if pins_mod.broken(results):
        sys.exit(10)  # a pin moved or is missing: README exit-code table
    c = pins_mod.counts(results)
    if c["unreachable"] and c["unreachable"] + c["unchecked"] == len(results):  # no remote answered
        raise RemoteUnavailable(
            f"no pin could be checked: all {len(results)} unreachable"
            + (f" or unchecked ({c['unchecked']})" if c["unchecked"] else "")
            + "; run again where they are"
        )
