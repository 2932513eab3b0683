"""What every runner shares: the run context, the Runner protocol (below: what a runner implements and how it
reaches Docker), options, outcomes, and the scaffolding of one benchmark container (model file checks, sha256
pin, container spec, image reference, memory limit). A runner lives in toolkit/bench/runners/<name>.py,
registered by name in toolkit.core.registry; bench/run.py only orchestrates: pick the build, check the
backend, ask the runner."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from toolkit.bench.observe import RunObserver, gpus_for_run
from toolkit.core import invocation, jsonsafe
from toolkit.core.errors import BadInput
from toolkit.core.text import path_text, shell_join
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.images import build as build_mod
from toolkit.matrix.api import ImageSpec, LoadedMatrix, ModelSpec, memory_bytes
from toolkit.models import twin
from toolkit.models.tiny import ensure_model_file, sha256_file
from toolkit.results import identity, make_folders, open_regular, records
from toolkit.results.records import BenchRecord, BuildRecord, ImageRef, ResultStore, new_run_id, timing_value

Events = Callable[..., None]


@dataclass
class BenchOptions:
    """Knobs of one `toolkit bench` run. `timeout_s` is per container (each sweep, the depth sweep, the canary), seconds."""

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
    # extra fields stored with every record of this run, e.g. {"tune": {"session": ..., "round": 1}}
    record_extra: dict[str, Any] = field(default_factory=dict)
    yes: bool = False  # run a matrix of more than CONFIRM_CASES test cases
    # sample host and GPU state during the run (toolkit.bench.observe): telemetry + flags on every record
    telemetry: bool = True
    # an interrupted run's last words in place of `toolkit bench --resume` (bench.run._resume_hint), for a
    # caller that has no --resume of its own to offer: tune, reproduce
    again: str | None = None
    run_id: str = field(default_factory=new_run_id)
    saver: records.Saver | None = field(default=None, repr=False)  # set by run_bench: writes every record


@dataclass
class Outcome:
    """One (image, model) line of the run summary. status: ok | failed | skipped | dry-run | resumed.
    timing: wall_s, tests_s, startup_s summed over the line's containers (the CLI prints them), and
    cache_cold for a Vulkan llama-bench run (its Mesa shader cache); names as in BenchRecord.timing."""

    image: str
    model: str
    status: str
    reason: str = ""
    records: int = 0
    command: list[str] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        """What `toolkit bench` prints for this (image, model): the exact command of a dry run; else
        the status, the results stored, the wall time split into measurement and start-up/model
        load/warm-up seconds (and whether a Vulkan run's shader cache was cold), and the reason."""
        if self.status == "dry-run":  # the reason says which command it is: canary, sweep, depth sweep...
            what = f" ({self.reason})" if self.reason else ""
            return f"{self.image} x {self.model}{what}: {shell_join(self.command)}"
        line = f"{self.image}{'' if self.model == '-' else ' x ' + self.model}: {self.status}"
        if self.records:
            line += f", {self.records} results"
        if self.timing:
            wall, tests, startup, cold = (
                timing_value(self.timing, k) for k in ("wall_s", "tests_s", "startup_s", "cache_cold")
            )
            wall_r, tests_r = round(wall or 0.0, 1), round(tests or 0.0, 1)
            rest = (
                round(wall_r - tests_r, 1)
                if wall is not None and tests is not None
                else round(startup or 0.0, 1)
            )
            line += (  # the rest from the rounded figures, so that the sum shown adds up (startup_s = wall - tests)
                f", wall {wall_r:.1f} s = measurement {tests_r:.1f} s + start-up/model load/warm-up {rest:.1f} s"
            )
            if cold is not None:  # only a Vulkan llama-bench line has it: its Mesa shader cache
                line += " (shader cache cold)" if cold else " (shader cache warm)"
        if self.reason:
            line += f": {self.reason}"
        return line


def _file_state_cached(lm: LoadedMatrix, kind: str, path: Path, compute: Callable[[], str]) -> str:
    """`compute()` once per state of `path`, cached in .toolkit/sha256-cache.json under `kind` and (path,
    size, mtime, device, inode, ctime). ctime cannot be set back by a user, so a file changed in place with
    its size and mtime kept is checked again. A cache that cannot be written (read-only project) is skipped,
    never an error; one that cannot be read as JSON (absent, not UTF-8, not JSON, nested too deep, not a
    regular file) counts as empty. One entry per (kind, file): a new state of a file replaces its older ones.
    """
    cache_file = lm.root / ".toolkit" / "sha256-cache.json"
    raw = jsonsafe.read_regular_file(cache_file)  # a FIFO there must not block
    try:
        cache: Any = jsonsafe.parse(raw) if raw is not None else {}
    except jsonsafe.JsonProblem:  # not UTF-8, not JSON, nested too deep, a 5000-digit number
        cache = {}
    if not isinstance(cache, dict):
        cache = {}
    st = path.stat()
    key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}:{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}"
    if kind != "sha256":  # sha256 entries keep their historical bare key
        key = f"{kind}|{key}"
    if not isinstance(cache.get(key), str):
        value = compute()
        # an entry per (kind, file): older states of this file are dropped, so the cache stays the size
        # of the models checked, however often they change
        prefix = key.rsplit(":", 5)[0] + ":"
        cache = {k: v for k, v in cache.items() if not k.startswith(prefix) or k.count(":") != key.count(":")}
        cache[key] = value
        with contextlib.suppress(OSError):
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(cache, indent=1))
            tmp.replace(cache_file)
    return cache[key]


def model_sha256(lm: LoadedMatrix, path: Path) -> str:
    """sha256 hex of a model file, computed once per file state (see _file_state_cached)."""
    return _file_state_cached(lm, "sha256", path, lambda: sha256_file(path))


def model_file_here(lm: LoadedMatrix, model: ModelSpec) -> Path | None:
    """The model's path, links followed, when it is a regular file on this host; None when it is
    absent, a folder, a dangling link, a loop of links or a path the OS refuses (the preflight and
    resolve_model say which)."""
    try:
        path = lm.resolve(model.path, what=f"models[{model.name}].path").resolve()
        return path if path.is_file() else None
    # RuntimeError: pathlib's "Symlink loop" (3.11); ValueError: NUL
    except (OSError, RuntimeError, ValueError):
        return None


def model_here(lm: LoadedMatrix, model: ModelSpec) -> Path | None:
    """The model's path, links followed, when a file or a folder (a checkpoint) is there, or None (the
    plan line counts a pair whose model is here or generated by the run)."""
    try:
        path = lm.resolve(model.path).resolve()
        return path if path.is_file() or path.is_dir() else None
    except (OSError, RuntimeError, ValueError):  # as model_file_here
        return None


def resolve_model(lm: LoadedMatrix, model: ModelSpec, *, dry_run: bool = False) -> tuple[Path | None, str]:
    """(path, reason): the model file (generated if it is a tiny stand-in), or None and why not."""
    path = lm.resolve(model.path, what=f"models[{model.name}].path")
    if path.is_symlink():
        try:
            path = path.resolve()
        except RuntimeError as err:  # pathlib's "Symlink loop" (Python 3.11; OSError ELOOP from 3.13)
            return None, f"model path {path}: {err}; fix models[{model.name}].path"
    if not path.exists():
        if dry_run:
            return path, ""
        if model.generate:
            ensure_model_file(path, model.generate, named=lm.model_paths())
        else:
            fetch = (
                f"; run `{invocation.command('fetch-model', model.name)}`" if model.hf else no_source(model)
            )
            return None, f"model file {path_text(path)} is absent{fetch}"
    return path, ""


def no_source(model: ModelSpec) -> str:
    """The way out of an absent model file that nothing fetches or generates (no models[].hf, no
    generate): `; copy the file there, or give models[NAME].hf ...`."""
    return (
        f"; copy the file there, or give models[{model.name}].hf (its Hugging Face repo) so "
        f"`{invocation.command('fetch-model', model.name)}` fetches it"
    )


def check_model_file(lm: LoadedMatrix, model: ModelSpec, path: Path) -> None:
    """A GGUF must be a regular file that starts with the GGUF magic, whose header lies inside the
    file, whose name has no comma (llama-bench splits `-m` on commas) and that the container's
    unprivileged user (uid 10001) can read. Raises BadInput naming the file and the fix."""
    if model.format != "gguf":
        return
    where = f"{lm.path}: models[{model.name}].path"
    if "," in path.name:
        raise BadInput(
            f"{where}: the file name {path.name!r} holds a comma, and llama-bench splits `-m` on commas (it "
            f"would look for {' and '.join(repr(x) for x in path.name.split(','))}); rename the file "
            "without commas and fix `path` (a link named without one does not help: the file it points to "
            "is mounted under its own name)"
        )
    if not path.is_file():
        raise BadInput(f"{where}: {path} is not a regular file; point `path` at the .gguf file")
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise BadInput(f"{where}: {path} is not a GGUF file (no GGUF magic); re-download it")

    def extents_ok() -> str:
        check_gguf_extents(path, where)  # raises BadInput for a bad file
        return "ok"

    # the header walk imports gguf + numpy (~0.1 s): done once per file state, like the sha256
    _file_state_cached(lm, "gguf-extents", path, extents_ok)
    if not path.stat().st_mode & 0o004:
        raise BadInput(
            f"{where}: {path} is not world-readable; the container runs as uid 10001: chmod o+r {path}"
        )


def check_gguf_extents(path: Path, where: str) -> None:
    """Read the GGUF header with the `gguf` package's GGUFReader (the format's reference reader,
    memory-mapped: no tensor data is read) and check that every tensor's data lies inside the file.
    A truncated or corrupt file raises BadInput naming the file and the fix."""
    import mmap

    import gguf

    size = path.stat().st_size
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        header = twin.header_end(mm, source=f"{where}: {path}")
    if header is None:
        raise BadInput(
            f"{where}: {path} ({size} bytes) is a corrupt GGUF file: its header declares more bytes than "
            "the file has (a key, string, array or tensor name runs past the end, or absurd counts); "
            "re-download it"
        )
    try:
        reader = gguf.GGUFReader(path)
    # the reader's own errors: ValueError (reshape past the end), struct/index errors
    except Exception as err:
        raise BadInput(
            f"{where}: {path} ({size} bytes) is a truncated or corrupt GGUF file (its header does not "
            f"fit the file: {str(err)[:120]}); re-download it"
        ) from None
    end = max((t.data_offset + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > size:
        raise BadInput(
            f"{where}: {path} is truncated: its tensors need {end} bytes, the file has {size}; re-download it"
        )


def check_sha(lm: LoadedMatrix, model: ModelSpec, path: Path) -> str:
    digest = model_sha256(lm, path) if path.is_file() else "dir:" + model.name
    if model.sha256 and digest != model.sha256:
        raise BadInput(
            f"{lm.path}: models[{model.name}].sha256: file {path} has sha256 {digest}, the matrix expects "
            f"{model.sha256}; re-download the file or fix `sha256`"
        )
    return digest


def shader_cache_volume(ctx: RunContext) -> str | None:
    """The Mesa shader cache volume of a Vulkan image digest, None for other backends: the llama-bench
    sweep and the canary mount the same one, so warm runs (and the sweep after its canary) compile no
    shaders."""
    return f"toolkit-shaders-{ctx.build.digest.split(':')[-1][:12]}" if ctx.spec.backend == "vulkan" else None


def container_spec(
    image_ref: str,
    command: list[str],
    profile: devices.DeviceProfile,
    *,
    model_dir: Path | None,
    shader_volume: str | None,
    run_id: str,
    name: str,
    memory_bytes: int | None = None,
    model_file: bool | None = None,
) -> engine.RunSpec:
    """The container for one benchmark process: model dir read-only at /models (a model file, e.g. a
    GGUF, at /models/<name>: `model_file`, else whether `model_dir` is a file now; a dry run's model
    may not exist yet; None: no model, as the GPU-path probe), profile devices, at most `memory_bytes`
    of memory (no swap beyond it) when given."""
    mounts = []
    if model_dir is None:
        pass
    elif model_file if model_file is not None else model_dir.is_file():  # only that file, never its folder
        mounts = [engine.Mount(str(model_dir.resolve()), f"/models/{model_dir.name}", read_only=True)]
    else:
        mounts = [engine.Mount(str(model_dir.resolve()), "/models", read_only=True)]
    env: dict[str, str] = {}
    if shader_volume:
        mounts.append(engine.Mount(shader_volume, "/cache", read_only=False, volume=True))
        env["MESA_SHADER_CACHE_DIR"] = "/cache/mesa"
    return profile.run_spec(
        image_ref,
        command,
        mounts=mounts,
        environment=env,
        name=name,
        labels={"org.toolkit.run-id": run_id},
        memory_bytes=memory_bytes,
    )


def effective_environment(engine: Any, image: str, run_env: dict[str, str]) -> dict[str, str] | None:
    """The environment a container of `image` started with `run_env` (-e) sees, as Docker merges them:
    the image's ENV (Config.Env) overlaid with the run's variables. None when the image cannot be
    inspected (then nothing is claimed)."""
    inspect = getattr(engine, "inspect_image", None)
    info = inspect(image) if inspect else None
    if info is None:
        return None
    out: dict[str, str] = {}
    for item in getattr(info, "env", None) or []:
        name, sep, val = str(item).partition("=")
        if sep:
            out[name] = val
    return {**out, **run_env}


def image_ref(build: BuildRecord, spec: ImageSpec) -> ImageRef:
    """The image as stored in each record, with the build selection of `choose_build` (carried on the
    chosen build as `bench_inputs`): `inputs_key` (the build's render-inputs key, None if it has none),
    `current_inputs_key` (what matrix.yaml + templates give now; None for a pinned digest) and `stale`
    (True: measured with --allow-stale although the keys differ)."""
    sel = (build.model_extra or {}).get("bench_inputs") or {}
    return ImageRef(
        name=spec.name,
        ref=build.ref,
        digest=build.digest,
        backend=spec.backend,
        repo_digests=build.repo_digests,
        labels=build.labels,
        source_origin=build.source_origin,
        inputs_key=build_mod.build_inputs_key(build),
        current_inputs_key=sel.get("current"),
        stale=bool(sel.get("stale")),
    )


def stale_marks(build: BuildRecord) -> dict[str, Any]:
    """Extra BenchRecord fields for a build measured with --allow-stale: {"flags": ["stale-build"]}
    (the report shows stored flags on the row); {} otherwise. Every runner adds them to its records."""
    sel = (build.model_extra or {}).get("bench_inputs") or {}
    return {"flags": ["stale-build"]} if sel.get("stale") else {}


def memory_limit(lm: LoadedMatrix, opts: BenchOptions) -> int | None:
    """The container memory limit in bytes: --memory, else bench.memory, else None (no limit).
    Raises BadInput for a size that cannot be read."""
    value = opts.memory or lm.m.bench.memory
    if value is None:
        return None
    try:
        return memory_bytes(value)
    except ValueError as err:
        where = "--memory" if opts.memory else f"{lm.path}: bench.memory"
        raise BadInput(f"{where}: {err}") from None


@dataclass
class RunContext:
    """Everything one (image, model) run needs. `engine` is the module that talks to Docker
    (toolkit.engine.api); tests pass a fake with the same functions. `save(record)` writes a record now
    (whole or absent, counted, flagged when another benchmark overlaps)."""

    lm: LoadedMatrix
    spec: ImageSpec
    build: BuildRecord
    model: ModelSpec
    store: ResultStore
    opts: BenchOptions
    profile: devices.DeviceProfile
    host: dict[str, Any]
    events: Events
    engine: ModuleType | Any = engine
    # the cases `toolkit bench` decided this pair measures (bench.decide: Runner.cases, with --resume
    # only those not measured yet), which the runner runs as decided; None: not decided, it asks itself
    cases: list[Case] | None = None

    def save(self, rec: BenchRecord) -> None:
        (self.opts.saver or records.Saver(self.store)).save(rec)

    def out_dir(self, runner: str) -> Path:
        """results/<digest12>/<runner>/<run>-<model> in the store (the --results folder); a build named
        by tag, not digest (a dry run of an image not built yet), shows the placeholder `<digest12>`."""
        digest = self.build.digest
        where = (
            self.store.digest_dir(digest) if digest.startswith("sha256:") else self.store.root / "<digest12>"
        )
        return where / runner / f"{self.opts.run_id}-{self.model.name}"


@dataclass(frozen=True)
class Step:
    """One command a runner will execute: `what` it measures and the exact argv (`docker run ...`,
    `docker exec ...`), copy-pasteable; what `--dry-run` prints."""

    what: str
    argv: list[str]


Case = dict[str, Any]
"""One test case a runner will measure: the fields that name it in its records (n_prompt, n_gen, a
method, a concurrency...) and, optionally, `repetitions` (samples per case; default bench.repetitions)."""


class Runner(Protocol):
    """A benchmark program in an image (llama-bench, vLLM, SGLang...).

    name: matrix.yaml `runner:`; model_formats: `format:` values of models it accepts; settings_key
    and settings_model: its own block in matrix.yaml (validated by that model; None: none).

    Docker only through `ctx.engine` (toolkit.engine.api or a stand-in with its functions), never by
    importing the engine: tests pass a fake engine in the RunContext.

    Timing: every record's `timing` uses these names (toolkit.results.records.TIMING_FIELDS; readers
    go through records.timing_value, which also reads the older names in TIMING_ALIASES):

        wall_s               container wall time behind the record (llama-bench: up to and including
                             that row; vLLM latency: its container; served: its client run; SGLang:
                             its processes)                                         every runner
        tests_s              the measured windows within it (llama-bench: the rows' samples; vLLM: the
                             timed iterations / the serve duration; SGLang: total_latency / duration)
        startup_s            wall_s - tests_s: start, model load, compile, warm-up (served: time to a
                             healthy server)
        reference_startup_s  start-up of the reference run a derived value needs (vLLM decode)
        cache_cold           1.0 / 0.0: the per-digest cache volume was cold (llama-bench on Vulkan:
                             Mesa shaders; vLLM: its compile cache)
    """

    name: ClassVar[str]
    model_formats: ClassVar[tuple[str, ...]]
    settings_key: ClassVar[str | None]
    settings_model: ClassVar[type[BaseModel] | None]

    def preflight(self, lm: LoadedMatrix, model: ModelSpec, path: Path) -> None:
        """Bad input about the model for this runner (BadInput), before any container starts."""

    def plan(self, ctx: RunContext) -> list[Step]:
        """The exact commands `run` executes, in order (pure: no engine call but command formatting)."""

    def cases(self, ctx: RunContext) -> list[Case]:
        """The test cases `run(ctx)` measures, as it will run them (with ctx.opts.resume only those it
        will not skip; a runner that does not resume returns them all): one per record it writes. No
        engine call; reads results at most. What the plan line counts (and --yes is asked above)."""

    def estimate(self, ctx: RunContext, cases: list[Case]) -> tuple[int, float]:
        """(cases known, seconds): how long `cases` took to measure before, from the newest ok record of
        the same test, image name and model on this host (records of campaign hosts measure another
        machine). Cases never measured are not counted; start-up is not included. Reads results only."""

    def settings_from_records(self, records: list[BenchRecord], base: dict[str, Any]) -> BaseModel | None:
        """The `settings_key` block a recorded run used (for `toolkit reproduce`): `base` (the run
        folder's matrix.yaml block) overridden by what this runner's `records` state. None when the
        runner has no block of its own."""

    def run(self, ctx: RunContext) -> list[Outcome]:
        """Run the plan; append records through ctx.save; one Outcome per summary line."""


def log_text(command: list[str], out: Any) -> str:
    """A process's log file: its command line, then what it printed on stdout and on stderr (`out`, its
    engine outcome: RunOutcome)."""
    return f"$ {shlex.join(command)}\n--- stdout ---\n{out.stdout}\n--- stderr ---\n{out.stderr}"


def write_log(path: Path, text: str, root: Path) -> None:
    """Write a process's log file `path` (results/<digest12>/logs/...) below the results root `root`, the
    one writer of every runner's logs: never through a link (BadInput: a symlink or non-regular file
    there, or a link at a folder below `root`); other OSError raised as is."""
    make_folders(path.parent, root=root)  # results/<digest12>/logs: no link followed
    with os.fdopen(open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, root=root), "w") as fh:
        fh.write(text)


def model_identity(lm: LoadedMatrix, model: ModelSpec) -> str | None:
    """The sha256 the records of `model` carry, the identity --resume and the canary match them by (two
    matrix entries of one file are one model; a renamed entry keeps its records): the matrix's `sha256:`
    pin (checked against the file before anything runs), else the file's (model_sha256, cached) or a
    checkpoint folder's tree digest (tree_sha256); None when the model is not here or a real run refuses it
    (a folder where a GGUF belongs, a loop of links: the dry run's note says so; no estimate is made of it)."""
    if model.sha256 or (path := model_here(lm, model)) is None:
        return model.sha256 or None
    try:
        return model_sha256(lm, path) if path.is_file() else tree_sha256(lm, path)[0]
    except (BadInput, OSError):
        return None


def newest_here(
    store: ResultStore, image: str, model: str | None, value: Callable[[BenchRecord], tuple[Any, Any] | None]
) -> dict[Any, Any]:
    """key -> value of the newest ok record (in the store's order: write_order) of image name `image` and
    model sha256 `model` (model_identity; None: nothing) measured on this host (a campaign host's records,
    `host.key`, measure another machine); `value(record)`: its (key, value), or None to leave it out. For
    every estimate. Asks the query index: one record per test, not the history."""
    from toolkit.results import index as resultindex

    seen: dict[Any, tuple[tuple[int, int], Any]] = {}
    # skew=False: ordered by write_order, never by clock_skew (set from a pass over every record)
    for pos, r in enumerate(resultindex.select(store, images=[image], ok_only=True, skew=False)):
        if r.model.sha256 != model or (r.host or {}).get("key") or (kv := value(r)) is None:
            continue
        order = identity.write_order(r, pos)
        if kv[0] not in seen or order >= seen[kv[0]][0]:
            seen[kv[0]] = (order, kv[1])
    return {k: v for k, (_, v) in seen.items()}


def seconds_before(ctx: RunContext, key: Callable[[BenchRecord], Any]) -> dict[Any, float]:
    """key(record) -> tests_s of the newest ok record of this runner with `ctx`'s image name and model
    (model_identity) measured on this host (newest_here), for `Runner.estimate`. Records without a
    measured time (or whose key is None) are left out."""

    def timed(r: BenchRecord) -> tuple[Any, float] | None:
        if r.runner != ctx.spec.runner:
            return None
        k, t = key(r), timing_value(r.timing, "tests_s")
        return None if k is None or t is None or not math.isfinite(t) or t < 0 else (k, t)

    return newest_here(ctx.store, ctx.spec.name, model_identity(ctx.lm, ctx.model), timed)


def estimate_from(seen: dict[Any, float], keys: list[Any]) -> tuple[int, float]:
    """(cases known, seconds) of the cases whose `keys` are in `seen` (see seconds_before)."""
    known = [seen[k] for k in keys if k in seen]
    return len(known), sum(known)


def tree_sha256(lm: LoadedMatrix, path: Path, *, what: str = "model") -> tuple[str, int]:
    """(hex sha256, bytes) of a model directory: sha256 over one `relpath sha256\\n` line per file in
    path order (file hashes cached like GGUF files); hidden files and folders (huggingface_hub's
    .cache/ download metadata) are not part of the model. Raises BadInput for an empty directory."""

    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )
    if not files:
        raise BadInput(f"{what}: {path} is an empty directory")
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.relative_to(path).as_posix()} {model_sha256(lm, f)}\n".encode())
    return h.hexdigest(), sum(f.stat().st_size for f in files)


def run_observer(ctx: RunContext) -> RunObserver:
    """The observer of one (image, model) run (toolkit.bench.observe): its raw trace at
    results/<digest12>/telemetry/<run_id>-<model>.jsonl, the GPUs the device profile passes (every
    AMD card when it names no render node). Off with --no-telemetry, and with a fake engine (tests):
    there is no process to observe."""
    nodes = [str(g["render_node"]) for g in ctx.profile.gpu_details if g.get("render_node")]
    return RunObserver(
        ctx.store.digest_dir(ctx.build.digest) / "telemetry" / f"{ctx.opts.run_id}-{ctx.model.name}.jsonl",
        gpus_for_run(ctx.spec.backend, nodes or None),
        enabled=ctx.opts.telemetry and ctx.engine is engine,
        on_note=lambda text: ctx.events("note", text=f"{ctx.spec.name} x {ctx.model.name}: warning: {text}"),
    )
