"""`toolkit doctor`: what this host has and what each image needs.

Registered on the main group in toolkit.cli.main (cli.add_command); thin like the rest of the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from toolkit.cli.common import (
    EPILOG,
    _load,
    _store,
    echo_json,
    json_option,
    matrix_option,
    read_results_option,
    terminal_width,
)
from toolkit.core import invocation
from toolkit.core.errors import HostCheckFailed, ToolkitError
from toolkit.core.text import path_text

if TYPE_CHECKING:
    from toolkit.host.doctor import DoctorReport
    from toolkit.matrix.api import LoadedMatrix
    from toolkit.results.records import ResultStore


@click.command(epilog=EPILOG)
@matrix_option
@json_option
@read_results_option
@click.option("--allow-software-gpu", is_flag=True, help="Count Mesa lavapipe as a usable Vulkan device.")
def doctor(matrix_path, as_json, results_dir, allow_software_gpu):
    """Read this host (GPUs, gfx arch, VRAM, device nodes, container engine, kernel) and say, per image,
    whether it can run here and why not."""
    from toolkit.engine import api as engine
    from toolkit.host import doctor as doctor_mod
    from toolkit.host.release import read_apt_policy
    from toolkit.results.records import ResultStore

    # the host's facts need no matrix: run from anywhere, doctor says them and skips the per-image verdicts
    alone = matrix_path == "matrix.yaml" and not Path(matrix_path).exists()
    lm = None if alone else _load(matrix_path)
    store = ResultStore(Path(results_dir or "results")) if lm is None else _store(lm, results_dir)
    images = [] if lm is None else lm.m.images
    labels = {spec.name: b.labels for spec in images if (b := store.latest_build(spec.name))}
    try:
        info = engine.engine_info()
    except ToolkitError as err:
        info = {"error": str(err), "engine": engine.engine_name()}

    def probe(name: str, backend: str) -> str | None:  # rootless/userns engines only: open the nodes for real
        from toolkit.host import devices

        b = store.latest_build(name)
        if b is None:
            return f"{name} is not built, so no container could try the devices (`{invocation.command('build', '-i', name)}`)"
        try:
            profile = devices.profile_for(backend, devices.detect_gpus(), allow_software=allow_software_gpu)
            nodes, groups = devices.passthrough(profile, engine.engine_kind())
            return engine.probe_device_access(b.digest, devices=nodes, group_add=groups)
        except Exception as err:  # no device, engine error: that is the answer, not a crash
            return str(err)[:200]

    bases: dict[str, str | None] = {}
    if "error" not in info:  # each local base image the templates build FROM: does it run a command?
        refs = {str(v) for spec in images for k, v in spec.vars.items() if k.endswith("base_image") and v}
        bases = {ref: engine.probe_base_image(ref) for ref in sorted(refs) if engine.inspect_image(ref)}
    rep = doctor_mod.diagnose(
        images,
        labels,
        allow_software=allow_software_gpu,
        docker_info=info,
        device_probe=probe,
        apt_policy=read_apt_policy(),
        base_images=bases,
    )
    if as_json:
        echo_json(rep.to_dict())
    else:
        export = _export_named(lm)
        rebuild = export is not None and lm is not None and _rebuild_needed(lm.root)
        click.echo(
            doctor_mod.format_doctor(rep, terminal_width(), _measured(store, rep, lm), export, rebuild)
        )
    if lm is None and as_json:  # where the project is (the text's `next:` line says it once)
        from toolkit.matrix.api import project_hint

        click.echo(f"note: no matrix.yaml here, so no image was judged: {project_hint()}", err=True)
    errors = [c.message for c in rep.checks if c.level == "error"]
    if errors:  # a pipeline (`toolkit doctor && toolkit build`) must stop here
        raise HostCheckFailed(f"{len(errors)} check(s) failed: {'; '.join(errors)[:400]}")


def _export_named(lm: LoadedMatrix | None) -> str | None:
    """The folder of the matrix read, as a user names it (`.` for the working folder, else its path,
    escaped), where it is a run `toolkit export-run` wrote (results.exported_run); None otherwise."""
    from toolkit.results import exported_run

    if lm is None or not exported_run(lm.root):
        return None
    return "." if lm.root.resolve() == Path.cwd().resolve() else path_text(lm.root)


def _rebuild_needed(folder: Path) -> bool:
    """Whether the exported run in `folder` must be reproduced with --rebuild (run_folder.needs_rebuild),
    less the images this engine holds (reproduce runs one: the exporting host's own user). False where its
    run.json cannot be read (a link out of the folder, not a run: reproduce names the fault) or the engine
    does not answer, as doctor never fails on a folder it only reads."""
    from toolkit.core.paths import contained
    from toolkit.core.types import is_image_id
    from toolkit.engine import api as engine
    from toolkit.publish import run_folder

    try:
        run = run_folder.read_run_json(contained(folder, "run.json", what="run.json"))
        # an image ID only: a run.json's `toolkit/cpu:latest` would name an image of this host
        return run_folder.needs_rebuild(
            run, held=lambda d: is_image_id(d) and engine.inspect_image(d) is not None
        )
    except (ToolkitError, OSError):
        return False


def _measured(store: ResultStore, rep: DoctorReport, lm: LoadedMatrix | None) -> set[str]:
    """The names of the images that can run here with an ok result in `store` and a build `toolkit bench`
    would measure: a stale one (build_choice: `lm`'s render inputs changed since) needs the build first,
    so doctor's next step names it (nc51 S4: it said `toolkit bench -i cpu` measures again, which exits 4).
    None when the folder is absent or unreadable: doctor says what the host can run, it never fails on
    results."""
    from toolkit.bench.build_choice import choose_build
    from toolkit.bench.runners.base import BenchOptions
    from toolkit.results import index as resultindex

    runnable = [v.name for v in rep.images if v.runnable]
    if not runnable or not store.root.is_dir():
        return set()
    try:
        done = {h.image.name for h in resultindex.heads(store, images=runnable, ok_only=True)}
        stale = {
            n for n in done if lm and choose_build(lm, lm.m.image(n), store, BenchOptions()).status == "stale"
        }
        return done - stale
    except (ToolkitError, OSError):
        return set()
