"""(BuiltImage, Model, BenchAxes, DeviceProfile) --run--> [BenchRecord] appended to results/.

For each (image, model): one container, one llama-bench process over the crossed matrix. Before it,
a pre-flight (devices present on the host; for GPU images `llama-bench --list-devices` inside the
container must show a device of the image's backend); after it, a post-flight (rows whose backend
or gpu_info betray a CPU fallback are recorded as failed, never as results).

The module never prints: progress goes to the `events` callback, which the CLI renders.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from toolkit import build as build_mod
from toolkit import devices, engine, hostinfo, llamabench
from toolkit.errors import BadInput
from toolkit.matrix import ImageSpec, LoadedMatrix, ModelSpec, template_path
from toolkit.records import BenchRecord, BuildRecord, ImageRef, ModelRef, ResultStore
from toolkit.tinymodel import ensure_model_file, sha256_file

Events = Callable[..., None]


@dataclass
class BenchOptions:
    """Knobs of one `toolkit bench` run. `timeout_s` is per (image, model) container, seconds."""

    dry_run: bool = False
    strict: bool = False
    allow_software_gpu: bool = False
    gpu: int | None = None
    resume: bool = False
    timeout_s: float | None = None
    # measure the newest build even when it was built from other inputs than the matrix renders to now
    allow_stale: bool = False
    # image name -> image ID to measure as is (reproduce re-runs recorded digests); no inputs-key check
    pinned: dict[str, str] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3))


@dataclass
class Outcome:
    """One (image, model) line of the run summary. status: ok | failed | skipped | dry-run | resumed."""

    image: str
    model: str
    status: str
    reason: str = ""
    records: int = 0
    command: list[str] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def model_sha256(lm: LoadedMatrix, path: Path) -> str:
    """sha256 of a model file, cached by (path, size, mtime) in .toolkit/sha256-cache.json."""
    cache_file = lm.root / ".toolkit" / "sha256-cache.json"
    try:
        cache = json.loads(cache_file.read_text())
    except (OSError, json.JSONDecodeError):
        cache = {}
    st = path.stat()
    key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    if key not in cache:
        cache[key] = sha256_file(path)
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(cache, indent=1))
        tmp.replace(cache_file)
    return cache[key]


def resolve_model(lm: LoadedMatrix, model: ModelSpec, *, dry_run: bool = False) -> tuple[Path | None, str]:
    """(path, reason): the model file (generated if it is a tiny stand-in), or None and why not."""
    path = lm.resolve(model.path)
    if path.is_symlink():
        path = path.resolve()
    if not path.exists():
        if dry_run:
            return path, ""
        if model.generate:
            ensure_model_file(path, model.generate)
        else:
            fetch = f"; run `toolkit fetch-model {model.name}`" if model.hf else ""
            return None, f"model file {path} is absent{fetch}"
    return path, ""


def check_model_file(lm: LoadedMatrix, model: ModelSpec, path: Path) -> None:
    """A GGUF must be a regular file that starts with the GGUF magic and that the container's
    unprivileged user (uid 10001) can read. Raises BadInput naming the file and the fix."""
    if model.format != "gguf":
        return
    where = f"{lm.path}: models[{model.name}].path"
    if not path.is_file():
        raise BadInput(f"{where}: {path} is not a regular file; point `path` at the .gguf file")
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise BadInput(f"{where}: {path} is not a GGUF file (no GGUF magic); re-download it")
    if not path.stat().st_mode & 0o004:
        raise BadInput(f"{where}: {path} is not world-readable; the container runs as uid 10001: chmod o+r {path}")


def _check_sha(lm: LoadedMatrix, model: ModelSpec, path: Path) -> str:
    digest = model_sha256(lm, path) if path.is_file() else "dir:" + model.name
    if model.sha256 and digest != model.sha256:
        raise BadInput(
            f"{lm.path}: models[{model.name}].sha256: file {path} has sha256 {digest}, the matrix expects "
            f"{model.sha256}; re-download the file or fix `sha256`"
        )
    return digest


def container_spec(image_ref: str, command: list[str], profile: devices.DeviceProfile, *, model_dir: Path,
                   shader_volume: str | None, run_id: str, name: str) -> engine.RunSpec:
    """The container for one benchmark process: model dir read-only at /models, profile devices."""
    mounts = [engine.Mount(str(model_dir.resolve()), "/models", read_only=True)]
    if model_dir.is_file():  # a GGUF: mount only that file, never its whole folder
        mounts = [engine.Mount(str(model_dir.resolve()), f"/models/{model_dir.name}", read_only=True)]
    env = dict(profile.environment)
    if shader_volume:
        mounts.append(engine.Mount(shader_volume, "/cache", read_only=False, volume=True))
        env["MESA_SHADER_CACHE_DIR"] = "/cache/mesa"
    return engine.RunSpec(
        image=image_ref, command=command, mounts=mounts, environment=env, devices=list(profile.devices),
        group_add=list(profile.group_add), security_opt=list(profile.security_opt), cap_drop=list(profile.cap_drop),
        cap_add=list(profile.cap_add), ipc_mode=profile.ipc_mode, name=name, labels={"org.toolkit.run-id": run_id},
        network="none",
    )


def _image_ref(build: BuildRecord, spec: ImageSpec) -> ImageRef:
    """The image as stored in each record, with the build selection of `choose_build` (carried on the
    chosen build as `bench_inputs`): `inputs_key` (the build's render-inputs key, None if it has none),
    `current_inputs_key` (what matrix.yaml + templates give now; None for a pinned digest) and `stale`
    (True: measured with --allow-stale although the keys differ)."""
    sel = (build.model_extra or {}).get("bench_inputs") or {}
    return ImageRef(name=spec.name, ref=build.ref, digest=build.digest, backend=spec.backend,
                    repo_digests=build.repo_digests, labels=build.labels, inputs_key=build_mod.build_inputs_key(build),
                    current_inputs_key=sel.get("current"), stale=bool(sel.get("stale")))


def stale_marks(build: BuildRecord) -> dict[str, Any]:
    """Extra BenchRecord fields for a build measured with --allow-stale: {"flags": ["stale-build"]}
    (the report shows stored flags on the row); {} otherwise. Every runner adds them to its records."""
    sel = (build.model_extra or {}).get("bench_inputs") or {}
    return {"flags": ["stale-build"]} if sel.get("stale") else {}


def preflight_devices(spec: ImageSpec, build: BuildRecord, profile: devices.DeviceProfile, opts: BenchOptions,
                      shader_volume: str | None) -> str | None:
    """Run `llama-bench --list-devices` in the image; return why the GPU is unusable, or None."""
    if spec.backend == "cpu":
        return None
    rs = container_spec(build.digest, ["llama-bench", "--list-devices"], profile, model_dir=Path("/tmp"),
                        shader_volume=shader_volume, run_id=opts.run_id, name=f"toolkit-pre-{opts.run_id}-{spec.name}")
    rs.mounts = rs.mounts[1:]
    out = engine.run_container(rs, timeout=300)
    text = out.stdout + "\n" + out.stderr
    prefix = {"rocm": "ROCm", "vulkan": "Vulkan"}[spec.backend]
    listed = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(prefix) and ":" in ln]
    if not listed:
        return f"`llama-bench --list-devices` in the image shows no {prefix} device (output: {text.strip()[-200:]!r})"
    software = [ln for ln in listed if "llvmpipe" in ln.lower() or "lavapipe" in ln.lower()]
    if software and len(software) == len(listed) and not opts.allow_software_gpu:
        return (f"only a software (CPU-type) {prefix} device is visible ({software[0]}); "
                "pass --allow-software-gpu to benchmark Mesa lavapipe deliberately")
    return None


def _records(rows: list[dict[str, Any]], *, base: dict[str, Any], status: str, error: str | None) -> list[BenchRecord]:
    out = []
    for raw in rows:
        norm = llamabench.normalize(raw)
        out.append(BenchRecord(**base, **norm, status=status, error=error, raw=raw))
    return out


def bench_one(lm: LoadedMatrix, spec: ImageSpec, build: BuildRecord, model: ModelSpec, store: ResultStore,
              opts: BenchOptions, profile: devices.DeviceProfile, host: dict[str, Any], events: Events) -> Outcome:
    """One llama-bench process for (image, model); appends records; returns the summary line."""
    path, reason = resolve_model(lm, model, dry_run=opts.dry_run)
    if path is None:
        return Outcome(spec.name, model.name, "skipped", reason)
    axes = lm.m.bench
    command = ["llama-bench"] + llamabench.bench_args(axes, f"/models/{path.name}")
    shader_volume = f"toolkit-shaders-{build.digest.split(':')[-1][:12]}" if spec.backend == "vulkan" else None
    name = f"toolkit-{opts.run_id}-{spec.name}-{model.name}"[:120]
    rs = container_spec(build.digest, command, profile, model_dir=path, shader_volume=shader_volume,
                        run_id=opts.run_id, name=name)
    if opts.dry_run:
        return Outcome(spec.name, model.name, "dry-run", command=engine.run_command(rs))
    sha = _check_sha(lm, model, path)
    model_ref = ModelRef(name=model.name, path=str(path), sha256=sha, size_bytes=path.stat().st_size)
    n_cases = len(axes.cases())
    if opts.resume and _already_measured(store, build.digest, sha, axes, n_cases):
        return Outcome(spec.name, model.name, "resumed", f"all {n_cases} cases already measured for this digest + model")
    cold = False
    if shader_volume:  # warm only when the volume exists and a run on this digest completed before
        cold = not engine.volume_exists(shader_volume) or not any(
            r.image.digest == build.digest and r.status == "ok" for r in store.results())
        engine.ensure_volume(shader_volume, {"org.toolkit.digest": build.digest})
    pre = preflight_devices(spec, build, profile, opts, shader_volume)
    if pre:
        return Outcome(spec.name, model.name, "failed" if opts.strict or spec.backend != "cpu" else "skipped", pre)
    events("start", image=spec.name, model=model.name, total=n_cases)

    def on_stderr(line: str) -> None:
        p = llamabench.progress_of(line)
        if p:
            events("progress", image=spec.name, model=model.name, done=p[0] - 1, total=p[1], phase=p[2])

    interrupted: engine.Interrupted | None = None
    try:
        out = engine.run_container(rs, timeout=opts.timeout_s or axes.timeout_s, on_stderr=on_stderr)
    except engine.Interrupted as intr:  # store the completed tests, then stop
        interrupted, out = intr, intr.outcome
    log_path = store.log_path(build.digest, f"{opts.run_id}-{model.name}.log")
    log_path.write_text(f"$ {shlex.join(engine.run_command(rs))}\n--- stdout ---\n{out.stdout}\n--- stderr ---\n{out.stderr}")
    rows = llamabench.parse_jsonl(out.stdout)
    tests_s = sum(sum(r.get("samples_ns") or []) / 1e9 or (r.get("avg_ns", 0) * axes.repetitions / 1e9) for r in rows)
    timing = {"wall_s": round(out.seconds, 3), "tests_s": round(tests_s, 3),
              "startup_s": round(max(out.seconds - tests_s, 0.0), 3)}
    if shader_volume:
        timing["shader_cache_cold"] = float(cold)
    base = dict(run_id=opts.run_id, created=_now(), runner="llama-bench", method="llama-bench",
                image=_image_ref(build, spec), model=model_ref, command=engine.run_command(rs), host=host,
                timing=timing, log_file=str(log_path), **stale_marks(build))
    error = None  # the process failed (crash, kill, OOM, timeout, Ctrl-C)
    if interrupted:
        error = "interrupted (Ctrl-C)"
    elif out.timed_out:
        error = f"timed out after {opts.timeout_s or axes.timeout_s:.0f} s"
    elif out.oom_killed:
        error = "container was killed for running out of memory"
    elif out.exit_code != 0:
        error = f"llama-bench exited {out.exit_code}: {_tail(out.stderr)}"
    void = None  # the numbers are not what was asked for: every row fails
    fallback = llamabench.cpu_fallback_reason(out.stdout + out.stderr, spec.backend, rows)
    if fallback:
        void = f"CPU fallback: {fallback}"
    if (spec.backend == "vulkan" and rows and not opts.allow_software_gpu
            and any("llvmpipe" in str(r.get("gpu_info", "")).lower() for r in rows)):
        void = "ran on a software Vulkan device (llvmpipe) without --allow-software-gpu"
    # a crash, kill or timeout does not void the tests llama-bench completed before it (a row holds
    # every repetition of its test): they are kept as results, and one failed row records the fault
    recs = _records(rows, base=base, status="failed" if void else "ok", error=void)
    if not rows and not (error or void):
        error = "llama-bench printed no result rows"
    error = void or error
    if error and not (void and rows):
        done = f" ({len(rows)} of {n_cases} tests completed and kept)" if rows else ""
        recs.append(BenchRecord(**base, test="(none)", axis="prefill", status="failed", error=error + done))
    for r in recs:
        store.add_result(r)
    if interrupted:
        raise interrupted
    events("done", image=spec.name, model=model.name, total=n_cases)
    status = "failed" if error else "ok"
    return Outcome(spec.name, model.name, status, error or "", len(rows), rs.command, timing)


def _tail(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and "llama-bench: benchmark" not in ln]
    return " | ".join(lines[-n:])[:300]


def _already_measured(store: ResultStore, digest: str, sha: str, axes, n_cases: int) -> bool:
    want = {(c["n_prompt"], c["n_gen"], c["n_depth"], c["n_batch"], c["n_ubatch"], c["flash_attn"], c["n_gpu_layers"])
            for c in axes.cases()}
    have = {(r.n_prompt, r.n_gen, r.n_depth, r.n_batch, r.n_ubatch, r.flash_attn, r.n_gpu_layers)
            for r in store.results() if r.image.digest == digest and r.model.sha256 == sha and r.status == "ok"}
    return len(want) == n_cases and want <= have


def run_bench(lm: LoadedMatrix, images: list[ImageSpec], models: list[ModelSpec], store: ResultStore,
              opts: BenchOptions, events: Events = lambda *a, **k: None) -> list[Outcome]:
    """Benchmark every selected image with every selected model that its runner accepts."""
    gpus = devices.detect_gpus()
    host: dict[str, Any] = {}
    if not opts.dry_run:
        host = hostinfo.host_facts()
        host.pop("cmdline", None)  # results get published: keep only the parameters that change numbers
        host.pop("hostname", None)
        host["docker"] = engine.engine_info()
    outcomes: list[Outcome] = []
    if not opts.dry_run:
        for model in models:  # bad model files fail before any container starts
            path = lm.resolve(model.path)
            if not path.exists() and model.generate == "tiny-qwen3moe":
                ensure_model_file(path, model.generate)
            if path.is_symlink():
                path = path.resolve()
            if path.exists():
                check_model_file(lm, model, path)
                _check_sha(lm, model, path)
                if "vllm" in model.runners and any(i.runner == "vllm" for i in images):
                    from toolkit.vllm_runner import checkpoint_preflight

                    checkpoint_preflight(lm, model, path)  # quantization vs the checkpoint, pinned revision
    try:
        for spec in images:
            outcomes += _bench_image(lm, spec, models, store, opts, gpus, host, events)
    except KeyboardInterrupt:  # a container created just before Ctrl-C is not yet ours to remove
        engine.remove_orphans(run_id=opts.run_id)
        raise
    return outcomes


def _bench_image(lm: LoadedMatrix, spec: ImageSpec, models: list[ModelSpec], store: ResultStore, opts: BenchOptions,
                 gpus: list, host: dict[str, Any], events: Events) -> list[Outcome]:
    """Every usable model on one image, or one skipped/failed/stale line saying why not."""
    usable = [m for m in models if spec.runner in m.runners]
    if not usable:
        return [Outcome(spec.name, "-", "skipped", f"no model in the matrix lists runner {spec.runner}")]
    # the host's devices first: on a host without them, that is the reason, built or not
    missing = devices.missing_devices_reason(spec.backend, gpus, allow_software=opts.allow_software_gpu)
    if missing and not opts.dry_run:
        return [Outcome(spec.name, "-", "failed" if opts.strict else "skipped", missing)]
    choice = choose_build(lm, spec, store, opts)
    if choice.status in ("stale", "failed"):
        return [Outcome(spec.name, "-", choice.status, choice.reason)]
    build = choice.build
    if build is None and opts.dry_run:
        build = _unbuilt(spec)
    if build is None:
        return [Outcome(spec.name, "-", "skipped", choice.reason)]
    if not opts.dry_run and engine.inspect_image(build.digest) is None:
        return [Outcome(spec.name, "-", "skipped", f"image {build.digest[:19]} is no longer in the engine; rebuild it")]
    outcomes: list[Outcome] = [Outcome(spec.name, "-", "note", choice.reason)] if choice.reason else []
    if missing:  # dry run on a host without the device: show the command for one R9700
        outcomes.append(Outcome(spec.name, "-", "note", f"cannot run on this host ({missing}); "
                                "the command below uses an example R9700 device profile"))
        profile = devices.DeviceProfile.example(spec.backend)
    else:
        # the multi-GPU policy (devices.select_gpus): every discrete GPU of the image's gfx targets, or
        # --gpu N; hidden GPUs are named in a note, the passed ones recorded with every result
        targets = [t.strip() for t in build.labels.get("org.toolkit.gfx-targets", "").split(",") if t.strip()]
        try:
            profile = devices.profile_for(spec.backend, gpus, pin=opts.gpu, allow_software=opts.allow_software_gpu,
                                          targets=targets or None)
        except devices.DeviceMissing as err:  # no GPU of the image's arch: this image only
            return outcomes + [Outcome(spec.name, "-", "failed" if opts.strict else "skipped", str(err))]
        outcomes += [Outcome(spec.name, "-", "note", n) for n in profile.notes]
        host = {**host, "device_profile": profile.record()} if host else host
    for model in usable:
        if spec.runner == "vllm":
            from toolkit.vllm_runner import bench_vllm

            outcomes += bench_vllm(lm, spec, build, model, store, opts, profile, host, events)
        elif model.format == "gguf":
            outcomes.append(bench_one(lm, spec, build, model, store, opts, profile, host, events))
    return outcomes


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


def choose_build(lm: LoadedMatrix, spec: ImageSpec, store: ResultStore, opts: BenchOptions) -> BuildChoice:
    """Pick the build of `spec` whose render-inputs key (build.inputs_key) equals the current one: the
    newest such build. Without one, the newest build is stale: refused, or measured and marked stale
    with opts.allow_stale. Renders the template (no build, no fetch); raises BadInput as render does."""
    builds = [b for b in store.builds() if b.image == spec.name]
    pin = opts.pinned.get(spec.name)
    if pin:
        found = [b for b in builds if b.digest == pin]
        if not found:
            return BuildChoice("failed", reason=f"no build record of image ID {pin[:19]} in {store.builds_file}")
        return BuildChoice("pinned", _chosen(found[-1], None, stale=False))
    current = build_mod.inputs_key(lm, spec)
    fix = f"run `toolkit build -i {spec.name}`"
    if not builds:
        return BuildChoice("unbuilt", current_key=current.key, reason=f"not built; {fix}")
    newest = builds[-1]
    matching = [b for b in builds if build_mod.build_inputs_key(b) == current.key]
    if matching:
        b = matching[-1]
        note = "" if b is newest else (
            f"measuring build {b.ref} ({b.digest[:19]}), the newest of the current inputs; the newest build "
            f"{newest.ref} ({newest.digest[:19]}) is of other inputs")
        return BuildChoice("current", _chosen(b, current.key, stale=False), current.key, note)
    why = _stale_reason(lm, spec, newest, current)
    if opts.allow_stale:
        return BuildChoice("stale-allowed", _chosen(newest, current.key, stale=True), current.key,
                           f"STALE build measured (--allow-stale): {why}; its records are marked stale")
    return BuildChoice("stale", current_key=current.key, reason=(
        f"stale build: {why}; {fix} (or pass --allow-stale to measure it anyway, marked stale)"))


def _chosen(build: BuildRecord, current_key: str | None, *, stale: bool) -> BuildRecord:
    return build.model_copy(update={"bench_inputs": {"current": current_key, "stale": stale}})


def _stale_reason(lm: LoadedMatrix, spec: ImageSpec, newest: BuildRecord, current: build_mod.InputsKey) -> str:
    """Why the newest build is not of the current inputs, naming what changed where it can tell."""
    old = build_mod.build_inputs_key(newest)
    head = f"the newest build of {spec.name} ({newest.ref}, {newest.digest[:19]})"
    if old is None:
        return f"{head} has no inputs key (label {build_mod.INPUTS_KEY_LABEL}): built by an older toolkit"
    if newest.template_hash and newest.template_hash != current.template_hash:
        what = (f"{template_path(lm, spec.template)} or images[{spec.name}] in {lm.path} changed "
                f"since (template inputs {newest.template_hash[:12]} -> {current.template_hash[:12]})")
    else:
        what = (f"its source (sources.{spec.source} in {lm.path}) or the toolkit version changed since"
                if spec.source else "the toolkit version changed since")
    return f"{head} was built from other inputs: {what}; inputs key {old[:12]} -> {current.key[:12]}"


def _unbuilt(spec: ImageSpec) -> BuildRecord:
    """A stand-in build record for --dry-run of an image not built yet (ref by tag)."""
    ref = f"toolkit/{spec.name}:latest"
    return BuildRecord(image=spec.name, ref=ref, digest=ref, backend=spec.backend, template=spec.template,
                       template_hash="", created=_now())
