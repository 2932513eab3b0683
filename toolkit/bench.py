"""(BuiltImage, Model, BenchAxes, DeviceProfile) --run--> [BenchRecord] appended to results/.

For each (image, model): one container, one llama-bench process over the crossed matrix. Before it,
a pre-flight (devices present on the host; for GPU images `llama-bench --list-devices` inside the
container must show a device of the image's backend); after it, a post-flight (rows whose backend
or gpu_info betray a CPU fallback are recorded as failed, never as results).

The module never prints: progress goes to the `events` callback, which the CLI renders.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from toolkit import build as build_mod
from toolkit import devices, engine, guard, hostinfo, identity, llamabench, signals
from toolkit.errors import BadInput, EngineUnavailable, FileSystemError, RunInterrupted
from toolkit.matrix import BenchAxes, ImageSpec, LoadedMatrix, ModelSpec, template_path
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
    allow_concurrent: bool = False  # run although another benchmark is running on the engine; flag records
    memory: str | None = None  # container memory limit (docker size, e.g. 24g); default bench.memory
    # process-level repetition of this run: {"index": k, "of": N} (bench.runs > 1), stored with records
    process_run: dict[str, int] | None = None
    yes: bool = False  # run a matrix of more than CONFIRM_CASES test cases
    run_id: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3))
    saver: guard.Saver | None = field(default=None, repr=False)  # set by run_bench: writes every record


CONFIRM_CASES = 1000
"""A run of more llama-bench test cases than this (all images x models) needs --yes."""


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
    """sha256 of a model file, cached in .toolkit/sha256-cache.json by (path, size, mtime, device,
    inode, ctime). ctime cannot be set back by a user (`touch -d`, os.utime and every write move it),
    so a file changed in place with its size and mtime kept is hashed again. A cache that cannot be
    written (read-only project) is skipped, never an error."""
    cache_file = lm.root / ".toolkit" / "sha256-cache.json"
    try:
        cache = json.loads(cache_file.read_text())
    except (OSError, json.JSONDecodeError):
        cache = {}
    st = path.stat()
    key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}:{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}"
    if key not in cache:
        cache[key] = sha256_file(path)
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(cache, indent=1))
            tmp.replace(cache_file)
        except OSError:
            pass
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
    check_gguf_extents(path, where)
    if not path.stat().st_mode & 0o004:
        raise BadInput(f"{where}: {path} is not world-readable; the container runs as uid 10001: chmod o+r {path}")


def check_gguf_extents(path: Path, where: str) -> None:
    """Read the GGUF header with the `gguf` package's GGUFReader (the format's reference reader,
    memory-mapped: no tensor data is read) and check that every tensor's data lies inside the file.
    A truncated or corrupt file raises BadInput naming the file and the fix."""
    import gguf

    size = path.stat().st_size
    try:
        reader = gguf.GGUFReader(path)
    except Exception as err:  # the reader's own errors: ValueError (reshape past the end), struct/index errors
        raise BadInput(f"{where}: {path} ({size} bytes) is a truncated or corrupt GGUF file (its header does not "
                       f"fit the file: {str(err)[:120]}); re-download it") from None
    end = max((t.data_offset + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > size:
        raise BadInput(f"{where}: {path} is truncated: its tensors need {end} bytes, the file has {size}; "
                       "re-download it")


def _check_sha(lm: LoadedMatrix, model: ModelSpec, path: Path) -> str:
    digest = model_sha256(lm, path) if path.is_file() else "dir:" + model.name
    if model.sha256 and digest != model.sha256:
        raise BadInput(
            f"{lm.path}: models[{model.name}].sha256: file {path} has sha256 {digest}, the matrix expects "
            f"{model.sha256}; re-download the file or fix `sha256`"
        )
    return digest


def container_spec(image_ref: str, command: list[str], profile: devices.DeviceProfile, *, model_dir: Path,
                   shader_volume: str | None, run_id: str, name: str, memory_bytes: int | None = None) -> engine.RunSpec:
    """The container for one benchmark process: model dir read-only at /models, profile devices,
    at most `memory_bytes` of memory (no swap beyond it) when given."""
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
        network="none", memory_bytes=memory_bytes,
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


def bench_one(lm: LoadedMatrix, spec: ImageSpec, build: BuildRecord, model: ModelSpec, store: ResultStore,
              opts: BenchOptions, profile: devices.DeviceProfile, host: dict[str, Any], events: Events,
              axes: BenchAxes | None = None) -> Outcome:
    """One llama-bench process for (image, model) over `axes` (default: the matrix's); appends
    records; returns the summary line. With opts.resume only the cases not yet measured on this
    digest + model run (`missing_cases`), as one llama-bench process per cross product they form."""
    path, reason = resolve_model(lm, model, dry_run=opts.dry_run)
    if path is None:
        return Outcome(spec.name, model.name, "skipped", reason)
    if axes is None and opts.resume and not opts.dry_run:
        sha = _check_sha(lm, model, path)
        todo = missing_cases(store, build.digest, sha, lm.m.bench)
        n_all = len(lm.m.bench.cases())
        if not todo:
            return Outcome(spec.name, model.name, "resumed", f"all {n_all} cases already measured for this digest + model")
        if len(todo) < n_all:
            parts = [bench_one(lm, spec, build, model, store, opts, profile, host, events, axes=sub)
                     for sub in resume_axes(lm.m.bench, todo)]
            bad = [o for o in parts if o.status != "ok"]
            return Outcome(spec.name, model.name, bad[0].status if bad else "ok",
                           (bad[0].reason if bad else "") + f" (resumed: {len(todo)} of {n_all} cases were missing)",
                           sum(o.records for o in parts), parts[-1].command,
                           {k: round(sum(o.timing.get(k, 0.0) for o in parts), 3) for k in parts[-1].timing})
    axes = axes or lm.m.bench
    command = ["llama-bench"] + llamabench.bench_args(axes, f"/models/{path.name}")
    shader_volume = f"toolkit-shaders-{build.digest.split(':')[-1][:12]}" if spec.backend == "vulkan" else None
    name = f"toolkit-{opts.run_id}-{spec.name}-{model.name}"[:120]
    memory = memory_limit(lm, opts)
    rs = container_spec(build.digest, command, profile, model_dir=path, shader_volume=shader_volume,
                        run_id=opts.run_id, name=name, memory_bytes=memory)
    if opts.dry_run:
        return Outcome(spec.name, model.name, "dry-run", command=engine.run_command(rs))
    sha = _check_sha(lm, model, path)
    hashed = _file_identity(path)  # the bytes `sha` describes; a row measured after they changed is void
    model_ref = ModelRef(name=model.name, path=str(path), sha256=sha, size_bytes=path.stat().st_size)
    n_cases = len(axes.cases())
    cold = False
    if shader_volume:  # warm only when the volume exists and a run on this digest completed before
        cold = not engine.volume_exists(shader_volume) or not any(
            r.image.digest == build.digest and r.status == "ok" for r in store.results())
        engine.ensure_volume(shader_volume, {"org.toolkit.digest": build.digest})
    pre = preflight_devices(spec, build, profile, opts, shader_volume)
    if pre:
        return Outcome(spec.name, model.name, "failed" if opts.strict or spec.backend != "cpu" else "skipped", pre)
    events("start", image=spec.name, model=model.name, total=n_cases)

    saver = opts.saver or guard.Saver(store)
    log_path = store.digest_dir(build.digest) / "logs" / f"{opts.run_id}-{model.name}.log"
    base = dict(run_id=opts.run_id, runner="llama-bench", method="llama-bench", image=_image_ref(build, spec),
                model=model_ref, command=engine.run_command(rs), host=host, log_file=str(log_path),
                limits={"memory_bytes": memory}, **({"process_run": opts.process_run} if opts.process_run else {}),
                **stale_marks(build))
    printed: list[str] = []  # stdout and stderr lines so far, in order: the evidence for each row's verdict
    streamed: list[dict[str, Any]] = []
    voids: list[str] = []
    t0 = time.monotonic()
    measured = [0.0]

    def store_row(raw: dict[str, Any]) -> None:
        """One llama-bench row -> one record, written now (llama-bench prints a row per finished test)."""
        streamed.append(raw)
        measured[0] += _row_seconds(raw, axes.repetitions)
        elapsed = time.monotonic() - t0
        timing = {"elapsed_s": round(elapsed, 3), "tests_s": round(measured[0], 3),
                  "startup_s": round(max(elapsed - measured[0], 0.0), 3)}  # up to and including this test
        if shader_volume:
            timing["shader_cache_cold"] = float(cold)
        void = _void_reason(spec, opts, raw, "\n".join(printed))
        if _file_identity(path) != hashed:
            void = f"model file {path} changed during the run: its sha256 {sha[:12]} no longer describes what was measured"
        norm = llamabench.normalize(raw)
        try:
            rec = BenchRecord(**base, created=_now(), timing=timing, **norm, status="failed" if void else "ok",
                              error=void, raw=raw)
        except ValueError as err:  # e.g. a non-finite tok/s: kept as a failed row, never as a number
            void = f"row is not a measurement: {str(err).splitlines()[-1][:160]}"
            rec = BenchRecord(**base, created=_now(), timing=timing, test=norm["test"], axis=norm["axis"],
                              status="failed", error=void)
        if void:
            voids.append(void)
        saver.save(rec)

    def on_stdout(line: str) -> None:
        printed.append(line)
        if line.lstrip().startswith("{"):
            for raw in llamabench.parse_jsonl(line):
                store_row(raw)

    def on_stderr(line: str) -> None:
        printed.append(line)
        p = llamabench.progress_of(line)
        if p:
            events("progress", image=spec.name, model=model.name, done=p[0] - 1, total=p[1], phase=p[2])

    stop: BaseException | None = None  # Ctrl-C / SIGTERM, or the engine gone: save, then stop the run
    try:
        out = engine.run_container(rs, timeout=opts.timeout_s or axes.timeout_s, on_stderr=on_stderr,
                                   on_stdout=on_stdout)
    except (engine.Interrupted, engine.EngineLost) as err:
        stop, out = err, err.outcome
    with signals.no_interrupt(reraise=stop is None):  # a second Ctrl-C cannot cut the save short
        log_problem = saver.write_text(
            log_path, f"$ {shlex.join(engine.run_command(rs))}\n--- stdout ---\n{out.stdout}\n--- stderr ---\n{out.stderr}")
        rows = llamabench.parse_jsonl(out.stdout)
        for raw in rows[len(streamed):]:  # a last row printed without a newline, if any
            store_row(raw)
        tests_s = sum(_row_seconds(r, axes.repetitions) for r in rows)
        timing = {"wall_s": round(out.seconds, 3), "tests_s": round(tests_s, 3),
                  "startup_s": round(max(out.seconds - tests_s, 0.0), 3)}
        if shader_volume:
            timing["shader_cache_cold"] = float(cold)
        error = None  # the process failed (crash, kill, OOM, timeout, Ctrl-C, engine gone)
        if isinstance(stop, engine.EngineLost):
            error = str(stop)
        elif stop is not None:
            error = "interrupted (Ctrl-C)"
        elif out.timed_out:
            error = f"timed out after {opts.timeout_s or axes.timeout_s:.0f} s"
        elif out.oom_killed:
            limit = f" (limit {memory} bytes: raise bench.memory or --memory)" if memory else ""
            error = f"container was killed for running out of memory{limit}"
        elif out.exit_code != 0:
            error = f"llama-bench exited {out.exit_code}: {_tail(out.stderr)}"
        if not rows and not error:
            error = "llama-bench printed no result rows"
        elif not error and len(rows) < n_cases:  # a run that silently left tests out is not "ok"
            error = f"llama-bench emitted {len(rows)} result rows for {n_cases} cases and exited 0"
        # a crash, kill or timeout does not void the tests llama-bench completed before it (a row holds
        # every repetition of its test): they are kept as results, and one failed row records the fault
        if error:
            done = f" ({len(rows)} of {n_cases} tests completed and kept)" if rows else ""
            note = f"; log not written: {log_problem}" if log_problem else ""
            saver.save(BenchRecord(**base, created=_now(), timing=timing, test="(none)", axis="prefill",
                                   status="failed", error=error + done + note), reraise=stop is None)
    if stop is not None:
        raise stop
    events("done", image=spec.name, model=model.name, total=n_cases)
    reason = error or (voids[0] if voids else "")
    status = "failed" if reason else "ok"
    return Outcome(spec.name, model.name, status, reason, len(rows), rs.command, timing)


def _file_identity(path: Path) -> tuple[int, ...]:
    """(device, inode, size, mtime, ctime) of a file: any write or replace changes it (ctime cannot be set back)."""
    try:
        st = path.stat()
    except OSError:
        return ()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _row_seconds(raw: dict[str, Any], repetitions: int) -> float:
    """Seconds llama-bench spent measuring one row: the sum of its samples (or avg x repetitions)."""
    return sum(raw.get("samples_ns") or []) / 1e9 or (raw.get("avg_ns", 0) * repetitions / 1e9)


def _void_reason(spec: ImageSpec, opts: BenchOptions, raw: dict[str, Any], printed: str) -> str | None:
    """Why a row is not what was asked for (a CPU fallback, a software Vulkan device not opted into),
    judged on the row and on everything the container printed before it (devices are set up before
    the first test). None: the row is a result."""
    fallback = llamabench.cpu_fallback_reason(printed, spec.backend, [raw])
    if fallback:
        return f"CPU fallback: {fallback}"
    if (spec.backend == "vulkan" and not opts.allow_software_gpu
            and "llvmpipe" in str(raw.get("gpu_info", "")).lower()):
        return "ran on a software Vulkan device (llvmpipe) without --allow-software-gpu"
    return None


def memory_limit(lm: LoadedMatrix, opts: BenchOptions) -> int | None:
    """The container memory limit in bytes: --memory, else bench.memory, else None (no limit).
    Raises BadInput for a size that cannot be read."""
    from toolkit.matrix import memory_bytes

    value = opts.memory or lm.m.bench.memory
    if value is None:
        return None
    try:
        return memory_bytes(value)
    except ValueError as err:
        where = "--memory" if opts.memory else f"{lm.path}: bench.memory"
        raise BadInput(f"{where}: {err}") from None


def _tail(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and "llama-bench: benchmark" not in ln]
    return " | ".join(lines[-n:])[:300]


def _case_key(case: dict[str, Any], threads: int | None) -> tuple:
    """A llama-bench case in the one test identity's normalisation (fa spellings, "all layers")."""
    key = {k: case.get(k) for k in ("n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch")}
    key["flash_attn"] = identity.norm_flash_attn(case.get("flash_attn"))
    key["n_gpu_layers"] = identity.norm_gpu_layers(case.get("n_gpu_layers"), case.get("n_layers"))
    if threads:
        key["n_threads"] = threads
    return tuple(sorted(key.items()))


def missing_cases(store: ResultStore, digest: str, sha: str, axes: BenchAxes) -> list[dict[str, Any]]:
    """The cases of `axes` with no ok record yet on this image digest + model sha256 (resume per test)."""
    have = set()
    for r in store.results():
        if r.image.digest == digest and r.model.sha256 == sha and r.status == "ok" and r.method == "llama-bench":
            f = identity.test_fields(r)
            have.add(_case_key({**f, "n_layers": None}, axes.threads and f.get("n_threads")))
    return [c for c in axes.cases() if _case_key(c, axes.threads) not in have]


def resume_axes(axes: BenchAxes, todo: list[dict[str, Any]]) -> list[BenchAxes]:
    """Cross products that together hold exactly the cases `todo`: one per (n_batch, n_ubatch,
    flash_attn, n_gpu_layers, n_depth) with the missing prompt and generation lengths."""
    groups: dict[tuple, dict[str, list[int]]] = {}
    for c in todo:
        g = groups.setdefault((c["n_batch"], c["n_ubatch"], c["flash_attn"], c["n_gpu_layers"], c["n_depth"]),
                              {"p": [], "n": []})
        if c["n_prompt"]:
            g["p"].append(c["n_prompt"])
        if c["n_gen"]:
            g["n"].append(c["n_gen"])
    return [axes.model_copy(update=dict(n_batch=[b], n_ubatch=[ub], flash_attn=[fa], n_gpu_layers=[ngl],
                                        n_depth=[d], n_prompt=g["p"] or [0], n_gen=g["n"] or [0]))
            for (b, ub, fa, ngl, d), g in groups.items()]


def run_bench(lm: LoadedMatrix, images: list[ImageSpec], models: list[ModelSpec], store: ResultStore,
              opts: BenchOptions, events: Events = lambda *a, **k: None) -> list[Outcome]:
    """Benchmark every selected image with every selected model that its runner accepts.

    Before anything runs: the plan (case count, estimated duration; more than CONFIRM_CASES cases
    need opts.yes, else BadInput), results/ writable (FileSystemError, exit 8), one benchmark per
    engine (ConcurrentRun, exit 9, unless opts.allow_concurrent; leftover containers of runs that
    are gone are removed), model files checked (BadInput). Every record is written as soon as its
    test completes. Exit paths say what was saved, counted: Ctrl-C/SIGTERM -> RunInterrupted (130),
    the engine gone -> EngineUnavailable (5), a results write failing -> FileSystemError (8).
    `events("note", text=...)` carries the plan and guard notes.
    """
    gpus = devices.detect_gpus()
    plan = plan_run(lm, images, models, store)
    if not opts.dry_run and plan:
        events("note", text=plan)
        if _cases_total(lm, images, models) > CONFIRM_CASES and not opts.yes:
            raise BadInput(f"{lm.path}: bench: {plan}; that is more than {CONFIRM_CASES} test cases: pass --yes to run "
                           "them, or cut the axes")
        memory_limit(lm, opts)  # a bad --memory fails before anything starts
        guard.check_writable(store.root)
    host: dict[str, Any] = {}
    run_guard: guard.RunGuard | None = None
    if not opts.dry_run:
        host = hostinfo.host_facts()
        host.pop("cmdline", None)  # results get published: keep only the parameters that change numbers
        host.pop("hostname", None)
        host["docker"] = engine.engine_info()
        run_guard = guard.RunGuard(opts.run_id, engine.engine_id())
        run_guard.start(allow_concurrent=opts.allow_concurrent, note=lambda text: events("note", text=text))
        opts.saver = guard.Saver(store, concurrent=run_guard.others)
    saver = opts.saver or guard.Saver(store)
    outcomes: list[Outcome] = []
    try:
        if not opts.dry_run:
            for model in models:  # bad model files fail before any container starts
                _check_model_before_run(lm, model, images)
        for spec in images:
            outcomes += _bench_image(lm, spec, models, store, opts, gpus, host, events)
    except KeyboardInterrupt:  # a container created just before Ctrl-C is not yet ours to remove
        signals.hold_for_stop()
        try:
            engine.remove_orphans(run_id=opts.run_id)
            removed = "the toolkit's containers were removed"
        except Exception as err:  # the engine may be what went away
            removed = f"its containers could not be removed ({str(err)[:120]}); the next run removes them"
        # signals stay held: a further Ctrl-C must not kill the process while it reports and exits
        raise RunInterrupted(f"interrupted: {removed}; {saver.summary()}; `toolkit bench --resume` continues "
                             "where this run stopped") from None
    except FileSystemError as err:
        raise FileSystemError(f"{err}; {saver.summary()}") from None
    except Exception as err:  # the engine gone: EngineLost from a running container, or any later call
        if opts.dry_run or not (isinstance(err, EngineUnavailable) or engine.is_connection_error(err)):
            raise
        why = str(err) if isinstance(err, EngineUnavailable) else f"Docker engine connection lost ({str(err)[:160]})"
        raise EngineUnavailable(f"{why}; {saver.summary()}. Restart the engine (`./scripts/setup-host.sh`) and run "
                                "`toolkit bench --resume`: containers left behind are removed at the next start") from None
    finally:
        if run_guard:
            run_guard.release()
    return outcomes


def _check_model_before_run(lm: LoadedMatrix, model: ModelSpec, images: list[ImageSpec]) -> None:
    """Generate a missing tiny stand-in, then check the file (GGUF header and extents, sha256 pin,
    vLLM checkpoint). Raises BadInput naming models[NAME].path for a path the OS refuses (a name
    too long, a loop of links, no permission)."""
    path = lm.resolve(model.path)
    try:
        if not path.exists() and model.generate == "tiny-qwen3moe":
            ensure_model_file(path, model.generate)
        if path.is_symlink():
            path = path.resolve()
        if not path.exists():
            return
        check_model_file(lm, model, path)
        _check_sha(lm, model, path)
    except OSError as err:
        raise BadInput(f"{lm.path}: models[{model.name}].path: {err.filename or path}: {err.strerror or err}; "
                       "fix `path`") from None
    if "vllm" in model.runners and any(i.runner == "vllm" for i in images):
        from toolkit.vllm_runner import checkpoint_preflight

        checkpoint_preflight(lm, model, path)  # quantization vs the checkpoint, pinned revision


def _cases_total(lm: LoadedMatrix, images: list[ImageSpec], models: list[ModelSpec]) -> int:
    """llama-bench test cases of the whole run: cases per process x (image, GGUF model) pairs."""
    pairs = [(i, m) for i in images for m in models if i.runner in m.runners and i.runner == "llama-bench"]
    return len(lm.m.bench.cases()) * len(pairs)


def plan_run(lm: LoadedMatrix, images: list[ImageSpec], models: list[ModelSpec], store: ResultStore) -> str:
    """One line: how many llama-bench test cases this run has and how long they took before ("" when
    the run has no llama-bench cases).

    The estimate is measured, never assumed: for each case, (n_prompt + n_gen) / tok/s x repetitions
    of the newest ok record of the same image name, model name and test; cases never measured
    before are counted as unknown. Start-up and model load are not included."""
    pairs = [(i, m) for i in images for m in models if i.runner in m.runners and i.runner == "llama-bench"]
    cases = lm.m.bench.cases()
    total = len(cases) * len(pairs)
    if not total:
        return ""  # vLLM runs only: their plan is the vllm: section, printed per phase
    want = {(i.name, m.name) for i, m in pairs}
    seen: dict[tuple, float] = {}
    for r in store.results():
        if r.status == "ok" and r.avg_ts and (r.image.name, r.model.name) in want and r.runner == "llama-bench":
            seen[(r.image.name, r.model.name, r.n_prompt, r.n_gen, r.n_depth)] = (r.n_prompt + r.n_gen) / r.avg_ts
    known, seconds = 0, 0.0
    for i, m in pairs:
        for c in cases:
            t = seen.get((i.name, m.name, c["n_prompt"], c["n_gen"], c["n_depth"]))
            if t is not None:
                known += 1
                seconds += t * lm.m.bench.repetitions
    line = f"plan: {total} test cases ({len(cases)} per run x {len(pairs)} image/model pairs, {lm.m.bench.repetitions} repetitions each)"
    if known == 0:
        return line + "; no earlier run of these tests to estimate the duration from"
    part = "" if known == total else f" for the {known} cases measured before ({total - known} never measured)"
    return line + f"; estimated measuring time {_duration(seconds)}{part}, from earlier runs, plus start-up"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


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
            runs = lm.m.bench.runs
            for i in range(runs):  # process-level repetitions: decode speed can be fixed at process start
                one = dataclasses.replace(opts, process_run={"index": i + 1, "of": runs}) if runs > 1 else opts
                o = bench_one(lm, spec, build, model, store, one, profile, host, events)
                if runs > 1:
                    o.reason = f"run {i + 1} of {runs}" + (f": {o.reason}" if o.reason else "")
                outcomes.append(o)
                if o.status in ("failed", "resumed"):
                    break
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
