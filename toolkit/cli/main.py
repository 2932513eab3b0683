"""The command line: thin Click commands that parse options, call one function, print the result.

Only this module prints. Errors (toolkit.core.errors) carry their exit code; `main` maps them.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import click

from toolkit import __version__
from toolkit.cli.common import (
    EPILOG,
    INTERRUPTED,
    BuildStatus,
    FiniteRange,
    _err,
    _load,
    _progress_printer,
    _store,
    echo_json,
    image_option,
    json_asked,
    json_option,
    json_printed,
    matrix_option,
    note_json,
    read_results_option,
    results_option,
)
from toolkit.core.errors import BenchFailed, BuildFailed, ToolkitError


@click.group(epilog=EPILOG)
@click.version_option(__version__, prog_name="toolkit")
@click.option(
    "--engine",
    type=click.Choice(["docker", "podman", "auto"]),
    default=None,
    help="Container engine: docker, podman (rootful as root, rootless as any other user; its API "
    "service is started when needed) or auto. Default: $TOOLKIT_ENGINE, else auto: Docker where it is "
    "installed (or DOCKER_HOST is set), else Podman where `podman` is installed.",
)
def cli(engine):
    """Build LLM inference images for the AMD Radeon AI PRO R9700 (gfx1201) and benchmark them.

    The main job: `toolkit build && toolkit bench` builds the images in matrix.yaml that this host
    can run (`toolkit doctor`'s verdict; `toolkit build --all` builds every one), runs llama-bench in each (prefill pp and decode tg), stores results
    per image digest under results/ and prints the tables. `toolkit doctor` says what this host
    can run and why not. On a Podman host: `toolkit --engine podman build && toolkit --engine podman
    bench` (or TOOLKIT_ENGINE=podman).
    """
    if engine:  # the engine module reads it; child processes (campaigns) inherit it
        import os

        os.environ["TOOLKIT_ENGINE"] = engine


@cli.command(epilog=EPILOG)
@matrix_option
@image_option
@json_option
def render(matrix_path, images, as_json):
    """Render Dockerfile.templates/ into images/<name>/Dockerfile (deterministic) and print the build
    commands `toolkit build` would run.

    Validates matrix.yaml first: every error names the file, the key and the fix.
    """
    from toolkit.images import build as build_mod
    from toolkit.results.records import ResultStore

    lm = _load(matrix_path)
    store = ResultStore(lm.root / "results")
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
        click.echo(f"{o['image']}: wrote {o['dockerfile']}")
        click.echo(f"  {shlex.join(o['build_command'])}")


@cli.command(epilog=EPILOG)
@matrix_option
@image_option
@json_option
@results_option
@click.option("--no-cache", is_flag=True, help="Rebuild every layer (BuildKit cache mounts are kept).")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Render and print the exact `docker buildx build` commands; build nothing.",
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
    """Build the images through BuildKit (docker buildx) and record what was built.

    By default only the images this host can run (`toolkit doctor`'s verdict; the CPU image always):
    each other image gets one line saying why it is skipped and how to build it anyway (`-i NAME`,
    `--all`). `-i NAME` builds the images named; `--all` and `--push` build every image.

    Each image is labelled (OCI created/revision/source/version, llama.cpp commit, backend, template
    hash) and a build record (ref, image digest, labels, size, seconds) is appended to
    results/builds.jsonl for `toolkit bench`. An image whose base cannot be found or pulled is
    skipped with the reason; a failed build keeps its log and names it.
    """
    from toolkit.images import build as build_mod
    from toolkit.images import build_plan
    from toolkit.images.render import render_image

    if push_after and not dry_run and not registry:
        reg_lm = _load(matrix_path)
        if not reg_lm.m.registry:
            from toolkit.core.errors import BadInput

            raise BadInput(
                f"--push needs a registry: pass --registry HOST:PORT/NAMESPACE or set `registry:` in {reg_lm.path}"
            )
    lm = _load(matrix_path)
    store = _store(lm, results_dir)
    specs = lm.select_images(images)
    for spec in specs:  # template errors (undefined variables) surface before any build starts
        render_image(lm, spec)
    skipped: list[build_plan.Skipped] = []
    if not (images or all_images or push_after):  # default: what this host can run (doctor's verdict)
        specs, skipped = build_plan.host_plan(specs, allow_software=allow_software_gpu)
    if not as_json:
        for sk in skipped:
            click.echo(sk.line())
    results = [
        build_mod.BuildResult(sk.name, "skipped", f"cannot run on this host: {sk.reason}") for sk in skipped
    ]
    status = None if (as_json or dry_run) else BuildStatus.for_stderr()
    for spec in specs:
        if not dry_run and not as_json:
            _err(
                f"==> {spec.name}: building ({spec.template}, backend {spec.backend}"
                f"{build_plan.previous_build_note(store, spec.name)})"
            )
        # on a terminal a step line fits its width (`   NAME | ` before it); in a log, 100 characters
        width = shutil.get_terminal_size().columns - len(spec.name) - 6 if status else 100
        steps = build_plan.BuildSteps(
            spec.name,
            status.echo if status else _err,
            verbose=verbose,
            width=max(width, 40),
            status=status.update if status else None,
        )
        before = None if dry_run else build_mod.latest_here(store, spec.name)
        try:
            res = build_mod.build_image(
                lm,
                spec,
                store,
                no_cache=no_cache,
                dry_run=dry_run,
                on_line=steps,
                secrets=[f"id=pip_ca,src={Path(ca_bundle).resolve()}"] if ca_bundle else None,
            )
        finally:
            if status:
                status.stop()
        steps.close()
        results.append(res)
        if not as_json:
            click.echo(res.line(before, dry_run=dry_run))
        if res.status == "failed" and fail_fast:
            break
    if as_json:
        echo_json([r.to_json() for r in results])
    built = [r.image for r in results if r.status in ("ok", "cached")]
    if push_after and built and not dry_run:
        from toolkit.publish import push as publish

        for p in publish.push_images(lm, store, built, registry):
            click.echo(f"{p.image}: {p.status} {', '.join(p.refs)} {p.repo_digest or p.reason}")
    failed = [r for r in results if r.status == "failed"]
    if failed:
        unbuilt = [s.name for s in specs[len(results) - len(skipped) :]]
        raise BuildFailed(
            "build failed for: "
            + ", ".join(f"{r.image} (log: {r.log_path})" for r in failed)
            + (f"; not built (--fail-fast): {', '.join(unbuilt)}" if unbuilt else "")
        )


@cli.command(epilog=EPILOG)
@matrix_option
@image_option
@json_option
@results_option
@click.option("--model", "-m", "models", multiple=True, metavar="NAME", help="Only this model (repeatable).")
@click.option("--dry-run", is_flag=True, help="Print the exact `docker run` commands; run nothing.")
@click.option("--strict", is_flag=True, help="An image that cannot run on this host is an error, not a skip.")
@click.option(
    "--allow-software-gpu",
    is_flag=True,
    help="Accept a CPU-type Vulkan device (Mesa lavapipe) for Vulkan images: a smoke test, not a GPU number.",
)
@click.option(
    "--gpu",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Pin GPU N, numbered as `toolkit doctor` lists them. Default: every discrete GPU of the image's "
    "gfx targets; iGPUs and other archs are hidden and named.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Skip (image, model) runs already measured for the same digest, model and cases.",
)
@click.option(
    "--timeout",
    type=FiniteRange(min=1, max=7 * 24 * 3600),
    default=None,
    metavar="SECONDS",
    help="Per (image, model) run, 1 s to 7 days; default from the matrix.",
)
@click.option(
    "--allow-stale",
    is_flag=True,
    help="Measure the newest build even if matrix.yaml or its template changed since it was built; "
    "every record is marked stale (default: refuse that image with exit 4).",
)
@click.option(
    "--allow-concurrent",
    is_flag=True,
    envvar="TOOLKIT_ALLOW_CONCURRENT",
    help="Run although another toolkit benchmark is running on the same Docker engine or writing the same "
    "results folder (default: refuse, exit 9); every record written meanwhile is flagged `concurrent`.",
)
@click.option(
    "--memory",
    default=None,
    metavar="SIZE",
    help="Container memory limit, e.g. 24g (no swap beyond it); default bench.memory. Recorded with "
    "every result; a run killed by it is a failed row, its completed tests kept.",
)
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Run a matrix of more than 1000 test cases (the plan line says how many).",
)
@click.option(
    "--no-telemetry",
    is_flag=True,
    help="Do not sample the host and GPUs during the run (records carry no telemetry and no telemetry "
    "flags). For measuring the sampler's own effect (benchmarks/telemetry_paired.py); default: sample.",
)
def bench(
    matrix_path,
    images,
    as_json,
    results_dir,
    models,
    dry_run,
    strict,
    allow_software_gpu,
    gpu,
    resume,
    timeout,
    allow_stale,
    allow_concurrent,
    memory,
    yes,
    no_telemetry,
):
    """Run llama-bench in each built image over the matrix and store the results by image digest.

    One container and one llama-bench process per (image, model), covering the crossed axes
    (-p/-n/-ub/-b/-fa/-ngl, JSONL output), model mounted read-only, devices from the image's
    backend profile (cpu: none; vulkan: render nodes; rocm: /dev/kfd + render nodes). Models that are
    absent are skipped, except tiny stand-ins, which are generated. Prints a summary line per
    (image, model) and the prefill/decode tables of this run.

    Each image is measured on the build whose inputs key (template + vars + source, see `toolkit
    build`) is the one matrix.yaml and the templates give now. An image whose newest build is of
    older inputs is refused (exit 4: run `toolkit build -i NAME`) unless --allow-stale.
    """
    from toolkit.bench.run import BenchOptions, run_bench

    lm = _load(matrix_path)
    store = _store(lm, results_dir)
    opts = BenchOptions(
        dry_run=dry_run,
        strict=strict,
        allow_software_gpu=allow_software_gpu,
        gpu=gpu,
        resume=resume,
        timeout_s=timeout,
        allow_stale=allow_stale,
        allow_concurrent=allow_concurrent,
        memory=memory,
        yes=yes,
        telemetry=not no_telemetry,
    )
    specs = lm.select_images(images)
    model_specs = lm.select_models(models)
    events = _progress_printer(quiet=as_json or dry_run)
    try:
        outcomes = run_bench(lm, specs, model_specs, store, opts, events)
    finally:
        events("close")
    if as_json:
        echo_json(outcomes)
    else:
        for o in outcomes:
            click.echo(o.line())
        # this run's records as stored, through the query index: reading the digest's whole history
        # back would make every bench slower than the one before
        from toolkit.results import index as resultindex

        ran = [] if dry_run else resultindex.load(resultindex.heads(store, runs=[opts.run_id]))
        if ran:
            # the tables (~0.1 s of imports): only when there are rows
            from toolkit.analysis import report as report_mod

            click.echo("")
            click.echo(report_mod.render(ran, "github"))
            paths = sorted({str(store.digest_dir(r.image.digest) / "bench.jsonl") for r in ran})
            click.echo(f"\nrun {opts.run_id}: results in {', '.join(paths)}")
    if strict:  # --strict: anything not measured is a failure, for CI gates
        for o in outcomes:
            if o.status == "skipped":
                o.status = "failed"
    for w in dict.fromkeys(
        store.warnings
    ):  # e.g. a corrupt line in results/builds.jsonl: said, not swallowed
        _err(f"warning: {w}")
    failed = [f"{o.image} x {o.model}" for o in outcomes if o.status == "failed"]
    stale = [o.image for o in outcomes if o.status == "stale"]
    if stale:  # measuring an image of older inputs would be a wrong answer: bad input, with the fix
        from toolkit.core.errors import BadInput

        also = f"; bench also failed for: {', '.join(failed)}" if failed else ""
        raise BadInput(
            f"stale build of {', '.join(stale)} (built from other inputs than {lm.path} and its templates "
            f"give now): run `toolkit build {' '.join('-i ' + n for n in stale)}`, or pass --allow-stale"
            + also
        )
    if failed:
        raise BenchFailed(f"bench failed for: {', '.join(failed)}")


@cli.command("fetch-model", epilog=EPILOG)
@matrix_option
@click.argument("names", nargs=-1, metavar="MODEL...")
@click.option(
    "--twin",
    is_flag=True,
    help="Read only the GGUF header of the Hub file (HTTP range requests) and "
    "write a shape twin beside `path` (X.twin.gguf: same metadata, tokenizer, tensor names, shapes, types "
    "and size; random data with valid scales) plus its record X.twin.gguf.twin.json (kind synthetic-twin).",
)
def fetch_model(matrix_path, names, twin):
    """Download models named in matrix.yaml from the Hugging Face Hub (huggingface_hub) to their `path`,
    then check their sha256 when the matrix pins one. Tiny stand-ins are generated instead.

    \b
    Example: toolkit fetch-model qwen3-30b-a3b-q4kxl          (downloads about 17 GB)
             toolkit fetch-model qwen3-30b-a3b-q4kxl --twin   (reads a few MB, writes a full-size twin)
    """
    from toolkit.models.fetch import fetch_model as fetch

    lm = _load(matrix_path)
    for spec in lm.select_models(names):
        click.echo(f"{spec.name}: {fetch(lm, spec, echo=_err, twin=twin)}")


@cli.command(epilog=EPILOG)
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
    digest, commit, sdist or revision is gone) or unreachable (not checked: no answer; the row says why).
    Exits 10 when any pin moved or is missing; unreachable alone exits 0.
    """
    from toolkit.images import pins as pins_mod

    results = pins_mod.check_pins(_load(matrix_path), images, models, timeout=timeout)
    if as_json:
        echo_json(pins_mod.pins_json(results))
    else:
        click.echo(pins_mod.format_pins(results))
    if pins_mod.broken(results):
        sys.exit(10)  # a pin moved or is missing: README exit-code table


@cli.command(epilog=EPILOG)
@matrix_option
@read_results_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["github", "csv", "json", "html"]),
    is_eager=True,
    callback=note_json,
    default="github",
    show_default=True,
    help="github = markdown tables to paste; csv/json for tools; html = one offline "
    "page with plots (written to --output, default results/report.html).",
)
@click.option(
    "--json", "as_json", is_flag=True, is_eager=True, callback=note_json, help="Same as --format json."
)
@click.option(
    "--image", "-i", "images", multiple=True, metavar="NAME", help="Only results of this image name."
)
@click.option("--run", "runs", multiple=True, metavar="RUN_ID", help="Only results of this bench run.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the report to this file (PNG plots beside an html report) instead of stdout.",
)
@click.option(
    "--plots",
    "plots_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Also write the plots as PNG files into this folder.",
)
@click.option(
    "--noisy-threshold",
    type=FiniteRange(min=0, max=1000),
    default=5.0,
    show_default=True,
    metavar="PERCENT",
    help="Flag rows whose standard deviation exceeds this share of the mean.",
)
@click.option(
    "--bw-floor",
    type=FiniteRange(min=0, max=1000),
    default=5.0,
    show_default=True,
    metavar="PERCENT",
    help="Flag GPU decode rows implying less than this share of the GPU's peak memory bandwidth.",
)
@click.option(
    "--min-margin",
    type=FiniteRange(min=0, max=1000),
    default=3.0,
    show_default=True,
    metavar="PERCENT",
    help="Smallest margin the verdict calls a win (it also needs 2x the combined noise).",
)
def report(
    matrix_path,
    results_dir,
    fmt,
    as_json,
    images,
    runs,
    output,
    plots_dir,
    noisy_threshold,
    bw_floor,
    min_margin,
):
    """Tables per image on the axes — prefill (pp2048 ub512, ...), decode (tg128), served throughput per
    concurrency — tok/s ± standard deviation, newest result per test, with flags (ub-no-effect,
    cpu-fallback, noisy, implausible bandwidth, and what telemetry saw: gpu-shared, throttled, ...),
    tokens per joule where the GPU energy is valid, a roofline column where the GPU is known, and a
    verdict with a routing rule (prefill-heavy / latency-bound decode / mixed) that crowns no cell
    flagged by telemetry. The html page also plots GPU power and clocks over each run shown."""
    from toolkit.analysis import report as report_mod
    from toolkit.results import index as resultindex
    from toolkit.results.records import ResultStore

    root = Path(results_dir) if results_dir else Path(matrix_path).resolve().parent / "results"
    store = ResultStore(root)
    recs = resultindex.select(store, images=images or None, runs=runs or None)  # via results/.index.sqlite
    have = resultindex.heads(store) if not recs and (images or runs) else []
    if have:  # the filter, not the folder, is empty
        from toolkit.core.errors import BadInput

        asked = " and ".join(
            x
            for x in (
                f"image {', '.join(images)}" if images else "",
                f"run {', '.join(runs)}" if runs else "",
            )
            if x
        )
        known_images = sorted({h.image.name for h in have})
        known_runs = sorted({h.run_id for h in have})[-5:]
        raise BadInput(
            f"{root}: no record of {asked} ({len(have)} records there; images: {', '.join(known_images)}; "
            f"newest runs: {', '.join(known_runs)}): fix --image / --run"
        )
    fmt = "json" if as_json else fmt
    opts = report_mod.ReportOptions(
        noisy=noisy_threshold / 100, bw_floor=bw_floor / 100, min_margin=min_margin / 100
    )
    dest = Path(output) if output else (root / "report.html" if fmt == "html" else None)
    text, written, plot_notes = report_mod.publish(
        recs,
        fmt,
        opts=opts,
        output=dest,
        plots_dir=Path(plots_dir) if plots_dir else None,
        refused=store.refused,
        results_root=root,
    )
    if text is not None:
        click.echo(text)
    for p in written:
        _err(f"wrote {p}")
    for n in plot_notes:
        _err(f"note: {n}")
    for w in store.warnings:
        _err(f"warning: {w}")


@cli.command(epilog=EPILOG)
@matrix_option
@json_option
@read_results_option
@click.option("--allow-software-gpu", is_flag=True, help="Count Mesa lavapipe as a usable Vulkan device.")
def doctor(matrix_path, as_json, results_dir, allow_software_gpu):
    """Read this host (GPUs, gfx arch, VRAM, device nodes, Docker engine, kernel) and say, per image,
    whether it can run here and why not."""
    from toolkit.engine import api as engine
    from toolkit.host import doctor as doctor_mod

    lm = _load(matrix_path)
    store = _store(lm, results_dir)
    labels = {}
    for spec in lm.m.images:
        b = store.latest_build(spec.name)
        if b:
            labels[spec.name] = b.labels
    try:
        info = engine.engine_info()
    except ToolkitError as err:
        info = {"error": str(err), "engine": engine.engine_name()}

    def probe(name: str, backend: str) -> str | None:  # rootless/userns engines only: open the nodes for real
        from toolkit.host import devices

        b = store.latest_build(name)
        if b is None:
            return f"{name} is not built, so no container could try the devices (`toolkit build -i {name}`)"
        try:
            profile = devices.profile_for(backend, devices.detect_gpus(), allow_software=allow_software_gpu)
            nodes, groups = devices.passthrough(profile, engine.engine_kind())
            return engine.probe_device_access(b.digest, devices=nodes, group_add=groups)
        except Exception as err:  # no device, engine error: that is the answer, not a crash
            return str(err)[:200]

    bases: dict[str, str | None] = {}
    if "error" not in info:  # each local base image the templates build FROM: does it run a command?
        refs = {
            str(v) for spec in lm.m.images for k, v in spec.vars.items() if k.endswith("base_image") and v
        }
        bases = {ref: engine.probe_base_image(ref) for ref in sorted(refs) if engine.inspect_image(ref)}
    rep = doctor_mod.diagnose(
        lm.m.images,
        labels,
        allow_software=allow_software_gpu,
        docker_info=info,
        device_probe=probe,
        apt_policy=doctor_mod.read_apt_policy(),
        base_images=bases,
    )
    if as_json:
        echo_json(rep.to_dict())
    else:
        click.echo(doctor_mod.format_doctor(rep))


def _is_engine_error(err: Exception) -> bool:
    from toolkit.engine.api import is_connection_error

    return is_connection_error(err)


def _sigterm_as_interrupt() -> None:
    import signal

    from toolkit.core import signals

    def handler(signum, frame):
        signals.note(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


@cli.command(epilog=EPILOG)
@matrix_option
@read_results_option
@json_option
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option(
    "--threshold",
    type=FiniteRange(min=0, max=1000),
    default=5.0,
    show_default=True,
    metavar="PERCENT",
    help="A test slower in B than in A by more than this, and by more than the noise (twice the combined "
    "relative stddev), on cells without a telemetry flag, is a regression (exit code 6).",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    metavar="FIELD",
    help="Leave this test field out of the join on purpose (e.g. n_threads when A and B ran on hosts "
    "with different core counts); its values are shown per side. Repeatable.",
)
@click.option(
    "--allow-missing",
    is_flag=True,
    help="Accept tests measured on one side only (they are still named); without it they make the exit code 4.",
)
@click.option(
    "--same-model",
    is_flag=True,
    help="Join results whose model is unknown (a vLLM bench JSON names none: imported as model=unknown) "
    "as if both sides measured the same model; without it they are joined with nothing (exit 4).",
)
def compare(matrix_path, results_dir, as_json, a, b, threshold, ignore, allow_missing, same_model):
    """Compare two builds test by test: tok/s of A (baseline), tok/s of B, speedup B/A (and tokens per
    joule of each, B/A, where both sides have a valid GPU energy).

    A and B are each an image digest (or a prefix of it), an image name (its latest build) or a bench
    run id. Rows are joined on the one test identity (every llama-bench setting both sides recorded —
    prompt/gen/depth, batch, micro-batch, flash attention, GPU layers, threads, n_cpu_moe, KV types,
    split mode... — and the model); regressions beyond --threshold and the noise are marked and make
    the exit code 6, for CI gates; a slowdown within noise, or on a cell flagged host-busy, gpu-shared,
    throttled..., is shown and named but not counted (re-measure it). Two sides with no test in common exit 4, naming the fields that differ; tests
    measured on one side only are named and exit 4 too, unless --allow-missing. A test whose model is
    unknown (model=unknown: a vLLM import) is never taken for the same model as another's, unless
    --same-model.
    """
    from toolkit.analysis import compare as compare_mod
    from toolkit.core.errors import Regression
    from toolkit.results.records import ResultStore

    root = Path(results_dir) if results_dir else Path(matrix_path).resolve().parent / "results"
    c = compare_mod.compare(
        ResultStore(root), a, b, threshold=threshold, ignore=tuple(ignore), same_model=same_model
    )
    if as_json:
        echo_json(compare_mod.comparison_json(c))
    else:
        click.echo(compare_mod.format_comparison(c))
    if c.regressions:
        raise Regression(
            f"{len(c.regressions)} test(s) slower in {c.b.label} than in {c.a.label} by more than "
            f"{threshold:g}%: {', '.join(r.test for r in c.regressions)}"
            + (f"; also not compared: {c.missing_text()}" if c.missing else "")
        )
    if c.missing and not allow_missing:
        from toolkit.core.errors import BadInput

        raise BadInput(
            f"not every test was compared: {c.missing_text()}; measure them on both sides, or accept a "
            "partial comparison with --allow-missing"
        )


@cli.command("import", epilog=EPILOG)
@matrix_option
@results_option
@json_option
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--label",
    required=True,
    metavar="NAME",
    help="Image name to file the results under (e.g. bare-metal-hip).",
)
@click.option(
    "--backend",
    type=click.Choice(["cpu", "vulkan", "rocm"]),
    default=None,
    help="Backend of the build that ran. Default: from the rows' `backends` field; rows that name "
    "another GPU backend are bad input (exit 4), rows that name only the CPU are kept, flagged cpu-fallback.",
)
@click.option(
    "--model-sha256",
    default=None,
    metavar="HEX",
    help="sha256 of the model file, so compare joins it with container runs of the same file.",
)
@click.option(
    "--digest",
    default=None,
    metavar="ID",
    help="Image reference to file under. Default: import:<sha256 of the files' bytes>.",
)
@click.option(
    "--input-len",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="vLLM results: the prompt length asked (--input-len of `vllm bench`). Default: from the file "
    "name the toolkit's runner gives (lat-IN-OUT.json, serve-IN-OUT-cC.json, throughput-IN-OUT.json).",
)
@click.option(
    "--output-len",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="vLLM results: the output length asked (--output-len of `vllm bench`); a served result that "
    "generated fewer tokens is stored failed. Default: from the file name, as --input-len.",
)
def import_(
    matrix_path, results_dir, as_json, files, label, backend, model_sha256, digest, input_len, output_len
):
    """Import llama-bench output produced outside the toolkit (a bare-metal run, someone's published run)
    into results/, so `toolkit report` and `toolkit compare` show it beside container runs.

    Also reads `vllm bench latency | serve | throughput` result JSON (recognised by its keys) into the
    records our vLLM runner writes (same methods, axes and units); a served result that generated fewer
    tokens than asked is stored failed ("generated N of M requested tokens").

    Reads -o jsonl, -o json (also a truncated array from a crashed run), -o csv, -o md (a markdown
    table, bare or pasted in a code fence after log lines) and -o sql of any llama.cpp vintage. Every
    row goes through one validity pass (also `toolkit bench`'s): a row whose field count differs from
    its header, without a test (n_prompt = n_gen = 0), with counts that are not whole numbers
    (n_threads 2.5), a batch of 0, a test_time that is no time or in the future, or whose tok/s is 0,
    not finite or contradicts avg_ns is refused by itself, named FILE:LINE. Rows of one
    import that measure the same test are kept as repetitions of one cell (flagged runs-disagree when
    they differ beyond noise). A file without a usable row is bad input (exit 4), and nothing is written.
    jsonl, json and csv are read as a stream, at any size (md and sql: up to 64 MiB).
    """
    from toolkit.results import importer
    from toolkit.results.records import ResultStore

    root = Path(results_dir) if results_dir else Path(matrix_path).resolve().parent / "results"
    res = importer.import_files(
        ResultStore(root),
        [Path(f) for f in files],
        label=label,
        backend=backend,
        model_sha256=model_sha256,
        digest=digest,
        input_len=input_len,
        output_len=output_len,
    )
    if as_json:
        echo_json(res)
        return
    if res.already:
        stored = ", ".join(dict.fromkeys(s.name for s in res.sets))
        click.echo(f"{label}: these rows were imported before, under the name {stored}; nothing added")
    for s in res.sets:
        where = ", ".join(f"{k}={v}" for k, v in s.system.items())
        state = "already imported" if s.already else f"imported {s.records} results"
        click.echo(
            f"{s.name}: {state} as {s.digest}"
            + (f" ({where})" if where and len(res.sets) > 1 else "")
            + (f" into {s.path}" if s.path else "")
        )
    for what, lines in (
        ("row(s) refused (not a measurement)", res.refused),
        ("note(s) on rows read before, left out (a measurement is imported once)", res.duplicates),
        ("stddev repaired", res.repaired),
        ("line(s) skipped while parsing", res.skipped),
        ("test(s) measured by several rows", res.repeated),
        ("note(s) on what the files do not say", res.notes),
        ("result(s) stored as failed", res.failed),
    ):
        if lines:
            _err(f"{len(lines)} {what}:")
            for line in lines:
                _err(f"  {line}")


@cli.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}, epilog=EPILOG
)
@matrix_option
@results_option
@click.option(
    "--label",
    metavar="NAME",
    default=None,
    help="Also import the llama-bench rows into results/ under this image name (e.g. bare-metal-cuda), "
    "so `toolkit report` and `toolkit compare` show them beside container runs.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the rows with their telemetry (JSONL, importable with `toolkit import`). "
    "Default: results/measure/<run>.jsonl.",
)
@click.option(
    "--gpu",
    default="all",
    show_default=True,
    metavar="all|none|I,J",
    help="GPUs to sample: all the sampler finds (AMD via sysfs, NVIDIA via NVML), none, or indices.",
)
@click.option(
    "--rate",
    type=FiniteRange(min=10.0, max=100.0),
    default=10.0,
    show_default=True,
    help="Samples per second.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def measure(matrix_path, results_dir, label, out, gpu, rate, command):
    """Run COMMAND (after `--`) with the bench's sampler around it: GPU power, energy, clocks,
    throttling, other processes on the GPU and host load, from outside the command, without root.

    Example: `toolkit measure --label bare-metal -- llama-bench -m model.gguf -fa 1 -p 512 -n 128 -o jsonl
    --progress`. Every llama-bench row (`-o jsonl`; `--progress` gives exact test windows) gets its
    window's telemetry summary and flags (gpu-shared, throttled:<reason>, clock-idle, power-not-stock,
    host-busy, energy-invalid:<reason>), written as JSONL that `toolkit import` reads; with --label the
    rows are imported at once. Any other command gets one window for its whole run. The raw trace is
    kept beside the output. The command's own output passes through; the exit code is the command's
    (3 when a GPU fault appeared in the kernel log during the run)."""
    import datetime as _dt

    from toolkit.bench import measure as measure_mod
    from toolkit.results import importer
    from toolkit.results.records import ResultStore

    root = Path(results_dir) if results_dir else Path(matrix_path).resolve().parent / "results"
    run = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_path = Path(out) if out else root / "measure" / f"{run}.jsonl"
    if label is not None:  # before a possibly hour-long run, not after it
        importer.check_options(label, None, None)
    gpus = measure_mod.select_gpus(gpu)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    sink = out_path.open("w", encoding="utf-8")  # rows land here as they arrive: an interrupt keeps them

    def on_row(row: dict) -> None:
        sink.write(json.dumps(row) + "\n")
        sink.flush()

    _err(
        f"measure: sampling the host and {len(gpus)} GPU(s) at {rate:g} Hz: {', '.join(g.name or g.id for g in gpus) or 'no GPU'}"
    )
    try:
        m = measure_mod.run_measured(
            command,
            trace_path=out_path.with_suffix(".trace.jsonl"),
            gpus=gpus,
            rate_hz=rate,
            on_stdout=click.echo,
            on_stderr=_err,
            on_row=on_row,
        )
    except BaseException:
        sink.close()
        if out_path.stat().st_size:
            _err(f"measure: the rows measured before the stop are in {out_path}; the command was stopped")
        else:
            out_path.unlink(missing_ok=True)
        raise
    sink.close()
    if not m.rows:
        measure_mod.write_measured(m, out_path)
    flags = sorted(
        {f for r in m.rows for f in r.get("toolkit_flags") or []} | set(m.window.get("flags") or [])
    )
    _err(
        f"measure: {' '.join(command)} exited {m.exit_code} after {m.seconds:.1f} s; {len(m.rows)} llama-bench row(s); "
        f"flags: {', '.join(flags) or 'none'}; written to {out_path} (trace {out_path.with_suffix('.trace.jsonl')})"
    )
    if m.kernel_fault:
        _err(f"measure: {m.kernel_fault}")
    if label and m.rows:
        res = importer.import_files(ResultStore(root), [out_path], label=label)
        for s in res.sets:
            _err(f"measure: {s.name}: imported {s.records} results as {s.digest}")
    elif label:
        _err("measure: no llama-bench rows to import (run llama-bench with -o jsonl)")
    sys.exit(3 if m.kernel_fault and m.exit_code == 0 else m.exit_code)


def _fail(message: str, code: int) -> NoReturn:
    """Exit with `code` after saying why on stderr; a command asked for JSON (`--json`, `--format
    json`) also gets it on stdout as one object, {"error": ..., "exit_code": ...}, so its caller's
    JSON parse of stdout never meets an empty output."""
    _err(message)
    _json_error(message, code)
    sys.exit(code)


def _json_error(message: str, code: int) -> None:
    """The error as one JSON object on stdout, where JSON was asked for and none printed yet."""
    if json_asked() or (not json_printed() and _argv_asks_json()):
        echo_json({"error": message.removeprefix("error: ").removeprefix("Error: "), "exit_code": code})


def _argv_asks_json() -> bool:
    """`--json` among the options, for an error Click raised before any option was processed (an
    unknown option): the command named on the command line has a --json option and it was given."""
    args = sys.argv[1:]
    args = args[: args.index("--")] if "--" in args else args
    group: click.Group = cli
    command: click.Command | None = None
    for a in args:
        command = group.commands.get(a)
        if not isinstance(command, click.Group):
            break
        group = command
    pairs = set(zip(args, args[1:], strict=False))
    return (
        command is not None
        and any("--json" in p.opts for p in command.params)
        and ("--json" in args or "--format=json" in args or ("--format", "json") in pairs)
    )


def main() -> None:
    """Console entry point: run the CLI and map toolkit errors to their exit codes."""
    _sigterm_as_interrupt()
    note_json(None, None, None)  # not asked yet (main may run more than once in one process: tests)
    try:
        code = cli.main(standalone_mode=False)  # a command's ctx.exit(N) comes back here as N
    except click.exceptions.Abort:  # Click turns Ctrl-C (KeyboardInterrupt) into Abort
        _fail(INTERRUPTED, 130)
    except click.ClickException as err:
        err.show()
        code = 4 if isinstance(err, click.UsageError) else err.exit_code
        _json_error(err.format_message(), code)
        sys.exit(code)
    except KeyboardInterrupt:
        _fail(INTERRUPTED, 130)
    except ToolkitError as err:
        _fail(f"error: {err}", err.exit_code)
    except Exception as err:  # an engine error, a path the OS refuses, else a bug (the traceback)
        from toolkit.core.errors import FileSystemError
        from toolkit.engine.api import raised_by_docker

        # before OSError: docker's APIError and requests' errors subclass it, yet no file is at fault
        docker_said = raised_by_docker(err)
        if docker_said and _is_engine_error(err):  # gone outside a bench run (bench says what it saved)
            _fail(
                f"error: Docker engine connection lost ({str(err)[:200]}). Restart the engine "
                "(`./scripts/setup-host.sh`) and run the command again.",
                5,
            )
        if docker_said:  # the engine answered and refused the request (a 4xx)
            # the engine's own explanation first (str(err) spends its length on the request URL)
            why = getattr(err, "explanation", None) or str(err)
            code = getattr(err, "status_code", None)
            detail = (f"{code} " if code else "") + ((str(why).splitlines() or [type(err).__name__])[0][:300])
            _fail(
                f"error: the Docker engine refused a request ({detail}): a value this command passed (an option, "
                "matrix.yaml) is one the engine does not take, or the engine is misconfigured (`docker info`); "
                "fix it and run the command again",
                5,
            )
        if isinstance(
            err, OSError
        ):  # named; a path of the wrong kind is bad input (4), a full or read-only disk 8
            mapped = FileSystemError.from_oserror(err)
            _fail(f"error: {mapped}", mapped.exit_code)
        _json_error(f"unexpected error (a bug in the toolkit): {type(err).__name__}: {err}", 1)
        raise
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


from toolkit.cli.campaign import campaign  # noqa: E402  (the command modules need the helpers above)
from toolkit.cli.publish import export_run, push, reproduce  # noqa: E402
from toolkit.cli.tune import tune  # noqa: E402

for _command in (push, export_run, reproduce, tune, campaign):
    cli.add_command(_command)
