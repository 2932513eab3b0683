"""A published run --reproduce--> the same images, the same model bytes, the same cases, and a verdict.

1. Images: pulled by registry digest (`registry/ns/name@sha256:...`) and accepted only when the pulled
   image ID equals the recorded image digest; with `rebuild`, built again from the run folder's
   matrix.yaml + Dockerfile.templates/ (template inputs hash and source commit must match the record).
2. Models: each file's sha256 must equal the record; generated tiny models are generated again
   (the generator is deterministic) and must hash the same.
3. The recorded axes are re-run through bench.run_bench, into a separate results store, with each
   runner's settings block as its records state it (asked of the runner through the registry:
   `Runner.settings_from_records`).
4. Each recorded test is compared with its re-run: delta = reproduced / recorded - 1, noise =
   max(2 x combined relative stddev: tables.noise_band, the one rule, as a margin of the faster over the
   slower; threshold); the run reproduces when every test is within noise.
   Where both hold a valid energy (tables.energy), tokens per joule recorded vs reproduced and their
   delta are shown too (information: the verdict is on tok/s).

A published folder comes from someone else: every path taken from it (run.json's model paths, its
files, the work folder reproduce/ and everything written under it) is checked to stay inside the
folder, symlinks resolved, before it is read, written or deleted (toolkit.core.paths; load_run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from toolkit.analysis.compare import fold_decode
from toolkit.analysis.tables import (
    energy,
    id_value,
    noise_band,
    row_label,
    select_latest,
    sided_telemetry_flags,
    slowdown_noise,
    value,
    varying_columns,
)
from toolkit.bench import run as bench
from toolkit.bench.runners.base import BenchOptions, Events, model_sha256, tree_sha256
from toolkit.core import backends, invocation
from toolkit.core import registry as runners
from toolkit.core.errors import BadInput, BuildFailed, refused_link
from toolkit.core.paths import contained, relative_path
from toolkit.core.types import is_image_id, utc_now
from toolkit.engine import api as engine
from toolkit.images import build as build_mod
from toolkit.matrix.api import (
    MAX_MATRIX_BYTES,
    BenchAxes,
    HfFile,
    ImageSpec,
    LoadedMatrix,
    Matrix,
    ModelSpec,
    load_matrix,
    read_yaml,
)
from toolkit.models.tiny import ensure_model_file, sha256_file
from toolkit.publish import REPRODUCED, folder_copy, run_folder, run_read
from toolkit.results import identity, write_atomic
from toolkit.results import index as resultindex
from toolkit.results.records import BenchRecord, BuildRecord, ResultStore, imported

VERDICT_OK = "reproduced within noise"
VERDICT_NOT = "not reproduced"
VERDICT_HELD = "not decided"  # every test beyond noise was measured on a flagged system (held)
HOST_KEYS = ("cpu_model", "cpu_threads", "memory_bytes", "kernel", "os")
StepsFor = Callable[[str, ResultStore], Callable[[str], None] | None]
"""A rebuild's progress printer for an image: (image name, the work store holding the run's build
records) -> the build's on_line callback (build_plan.BuildSteps), or None to print nothing."""


@dataclass
class ImageCheck:
    """How an image of the run was obtained: status present | pulled | rebuilt; `image_id` what runs."""

    name: str
    digest: str
    status: str
    image_id: str
    source: str = ""
    seconds: float = 0.0
    note: str = ""


@dataclass
class ModelCheck:
    name: str
    path: str
    sha256: str
    status: str  # verified | generated


@dataclass
class ReproRow:
    """One recorded test beside its re-run; `delta`, `noise` fractions (0.05 = 5 %), None where it is missing."""

    image: str
    test: str
    model: str
    recorded: BenchRecord
    reproduced: BenchRecord | None
    delta: float | None
    noise: float | None
    ok: bool

    @property
    def flags(self) -> list[str]:
        """The telemetry flags of either side (`A:host-busy`, ...): the system's part of the number."""
        return sided_telemetry_flags(self.recorded, self.reproduced)

    @property
    def held(self) -> bool:
        """Beyond noise on a flagged cell: neither reproduced nor refuted (compare holds such cells too)."""
        return not self.ok and self.reproduced is not None and bool(self.flags)

    @property
    def status(self) -> str:
        """ok | ok, flagged: <flags> | missing | beyond noise | held: <flags>. A flagged cell within noise
        names its flags, as compare does wherever a flagged number stands: its noise is the system's too."""
        if self.ok:
            return f"ok, flagged: {', '.join(self.flags)}" if self.flags else "ok"
        if self.reproduced is None:
            return "missing"
        return f"held: {', '.join(self.flags)}" if self.held else "beyond noise"

    @property
    def energy_delta(self) -> float | None:
        """tok/J reproduced ÷ recorded - 1 where both records hold a valid energy."""
        ea = energy(self.recorded)
        eb = energy(self.reproduced) if self.reproduced is not None else None
        return eb.tok_per_j / ea.tok_per_j - 1 if ea and eb else None


@dataclass
class Reproduction:
    run_id: str
    new_run_id: str
    folder: Path
    results: Path
    threshold: float  # percent
    images: list[ImageCheck] = field(default_factory=list)
    models: list[ModelCheck] = field(default_factory=list)
    rows: list[ReproRow] = field(default_factory=list)
    host_diff: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        return bool(self.rows) and all(r.ok for r in self.rows)

    @property
    def verdict(self) -> str:
        """reproduced within noise; not decided (every test beyond noise is a flagged cell: held);
        else not reproduced."""
        if self.reproduced:
            return VERDICT_OK
        failing = [r for r in self.rows if not r.ok]
        return VERDICT_HELD if failing and all(r.held for r in failing) else VERDICT_NOT


# --------------------------------------------------------------------------------------- images


def fetch_image(im: run_folder.PublishedImage, *, on_line: Callable[[str], None] | None = None) -> ImageCheck:
    """The recorded image ID, from the engine or pulled by registry digest; BadInput if impossible."""
    if engine.inspect_image(im.digest) is not None:
        return ImageCheck(im.name, im.digest, "present", im.digest, note="already in the engine, not pulled")
    candidates = engine.pullable_digests(im.repo_digests)
    if not candidates:
        raise BadInput(
            f"image {im.name} ({im.digest[:19]}) was never pushed to a registry and is not in this "
            "engine: reproduce with --rebuild, or push it (`toolkit push`) and export the run again"
        )
    errors = []
    for ref in candidates:
        out = engine.pull_image(ref, on_line=on_line)
        if not out.ok:
            errors.append(f"{ref}: {out.error}")
            continue
        info = engine.inspect_image(ref)
        if info is None or info.id != im.digest:
            raise BadInput(
                f"{ref} is image ID {info.id if info else '?'}, but the run measured {im.digest}: "
                "not the same image (a containerd image store reports other IDs; see the README)"
            )
        return ImageCheck(im.name, im.digest, "pulled", info.id, ref, out.seconds)
    raise BadInput(
        f"image {im.name}: could not pull it by digest ({'; '.join(errors)}); or reproduce with --rebuild"
    )


def rebuild_image(
    im: run_folder.PublishedImage,
    workdir: Path,
    store: ResultStore,
    *,
    steps_for: StepsFor | None = None,
    confined: bool = True,
) -> ImageCheck:
    """Build `im` again from the run folder's matrix + templates (copied into `workdir`). `confined`
    (a folder from elsewhere): the matrix's local sources (`path:`, `archive:`) must lie inside
    `workdir` (LoadedMatrix.resolve), so its build context holds nothing else of this host.
    `steps_for(name, store)`: the build's progress printer for image `name` (announced by name, the
    run's recorded build time in `store` as the estimate), as `toolkit build` prints each image's."""
    from toolkit.images.render import render_image

    lm = load_matrix(contained(workdir, "matrix.yaml", what=f"{workdir}: matrix.yaml"), confined=confined)
    spec = lm.m.image(im.name)
    rendered = render_image(lm, spec)
    if im.template_hash and rendered.inputs_hash != im.template_hash:
        raise BadInput(
            f"image {im.name}: the template inputs in {workdir} hash to {rendered.inputs_hash[:12]}, the "
            f"run was built from {im.template_hash[:12]}: matrix.yaml or Dockerfile.templates/ changed"
        )
    on_line = steps_for(im.name, store) if steps_for else None
    res = build_mod.build_image(lm, spec, store, on_line=on_line, stranger=True)
    if res.record is None:
        log = f"; log: {res.log_path}" if res.log_path else ""  # as `toolkit build` names it
        raise BuildFailed(f"rebuild of {im.name} {res.status}: {res.reason}{log}")
    rec = res.record
    if im.source_commit and rec.source_commit != im.source_commit:
        raise BadInput(
            f"image {im.name}: rebuilt from source {rec.source_commit}, the run measured "
            f"{im.source_commit}; pin `commit` in matrix.yaml"
        )
    unverified = [
        what
        for what, known in (
            ("its templates (no template_hash)", im.template_hash),
            ("its source (no source_commit)", im.source_commit),
        )
        if not known
    ]
    note = rebuild_note(rec.digest == im.digest, unverified)
    return ImageCheck(im.name, im.digest, "rebuilt", rec.digest, rec.ref, rec.build_seconds, note)


def rebuild_note(same_id: bool, unverified: list[str]) -> str:
    """What the output line of a rebuilt image adds in brackets after "image ID matches / differs from
    the record" (repro_output): why a rebuild's ID differs (said there, not again here), and what
    run.json could not verify (`unverified`: "its templates (no template_hash)", ...). "" for nothing."""
    why = "" if same_id else "expected of a rebuild: its timestamps and layers are new"
    cannot = (
        f"run.json cannot verify {' or '.join(unverified)}: rebuilt from the folder as it is"
        if unverified
        else ""
    )
    return "; ".join(x for x in (why, cannot) if x)


def _seed_build(store: ResultStore, im: run_folder.PublishedImage, builds: list[BuildRecord]) -> None:
    """Make the recorded build the latest of `im.name` in the work store (bench runs that digest)."""
    latest = store.latest_build(im.name)
    if latest is not None and latest.digest == im.digest:
        return
    mine = [b for b in builds if b.digest == im.digest]
    rec = (
        mine[-1]
        if mine
        else BuildRecord(
            image=im.name,
            ref=im.ref,
            digest=im.digest,
            backend=im.backend,
            template=im.template or "",
            template_hash=im.template_hash or "",
            source_commit=im.source_commit,
            labels=im.labels,
            created=utc_now(),
            repo_digests=im.repo_digests,
        )
    )
    store.add_build(rec)


def refuse_imported(run: run_folder.PublishedRun, where: str = "run.json") -> None:
    """BadInput for a run whose results were imported (no image to run), for a `digest` that is no image ID
    (`toolkit/cpu:latest`, an ID prefix: the engine would run an image of this host it names, called the
    recorded one), for axes export-run kept that a matrix cannot express. `where`: run.json's path."""
    for i, im in enumerate(run.images):
        if imported(im.digest):
            raise BadInput(f"image {im.name}: its results were imported (`toolkit import`): no image to run")
        if not is_image_id(im.digest):
            raise BadInput(
                f"{where}: images[{run_read.label(im.name, i)}].digest {im.digest[:80]!r} is not an image ID "
                "(sha256: and 64 lowercase hex digits, as export-run writes): reproduce runs an image by its "
                "ID, never by a name or prefix that may mean an image of this host; export the run again"
            )
    if "not_a_matrix" in run.bench:  # export-run kept axes as measured that a matrix cannot express
        raise BadInput(
            f"run {run.run_id}: its axes cannot be re-run: matrix.yaml does not take them "
            f"({run.bench['not_a_matrix']})"
        )


def acquire_images(
    run: run_folder.PublishedRun,
    builds: list[BuildRecord],
    workdir: Path,
    store: ResultStore,
    *,
    rebuild: bool,
    on_line: Callable[[str], None] | None = None,
    steps_for: StepsFor | None = None,
    confined: bool = True,
) -> list[ImageCheck]:
    refuse_imported(run)
    out = []
    for im in run.images:
        _seed_build(store, im, builds)
        out.append(
            rebuild_image(im, workdir, store, steps_for=steps_for, confined=confined)
            if rebuild
            else fetch_image(im, on_line=on_line)
        )
    return out


# --------------------------------------------------------------------------------------- models


def _model_candidates(
    m: run_folder.PublishedModel, folder: Path, model_dir: Path | None, project: LoadedMatrix | None
) -> list[Path]:
    """Where the model may be, each checked before it is looked at: in --model-dir by its bare file name
    (the user's folder: its own symlinks are followed); for a folder from elsewhere, at its matrix path
    inside the folder (core.paths.contained); for a run of this project (`project`, exported from its
    own results), at its matrix path in the project and where the run read it (its records)."""
    at = f"{folder / 'run.json'}: models[{m.name}]"
    paths = [model_dir / relative_path(m.file, what=f"{at}.file", fix=run_read.FILE_FIX)] if model_dir else []
    if project is not None:
        if m.matrix_path:
            paths.append(project.resolve(m.matrix_path))
        if m.recorded_path:
            paths.append(Path(m.recorded_path))
    elif m.matrix_path:
        paths.append(contained(folder, m.matrix_path, what=f"{at}.matrix_path", fix=run_read.MATRIX_PATH_FIX))
    return paths


def locate_model(
    m: run_folder.PublishedModel,
    folder: Path,
    workdir: Path,
    model_dir: Path | None,
    *,
    project: LoadedMatrix | None = None,
) -> tuple[Path, str]:
    """(path, status): the file with the recorded bytes; generated again for tiny stand-ins, into
    workdir/models/ (the path checked to stay there before anything is deleted or written)."""
    if m.generate:
        path = contained(
            workdir,
            Path("models", m.file),
            what=f"{folder / 'run.json'}: models[{m.name}].file",
            fix=run_read.FILE_FIX,
        )
        if path.is_file() and sha256_file(path) != m.sha256:
            path.unlink()
        ensure_model_file(path, m.generate)
        return path, "generated"
    candidates = _model_candidates(m, folder, model_dir, project)
    for p in candidates:
        if p.is_file() or p.is_dir():  # a GGUF file or a Hugging Face checkpoint folder (vLLM)
            return p, "verified"
    src = f" (Hugging Face {m.hf.get('repo')} {m.hf.get('file', '')})" if m.hf else ""
    looked = ", ".join(str(p) for p in candidates) or "nowhere: no --model-dir"
    raise BadInput(
        f"model {m.name}: {m.file} (sha256 {m.sha256[:12]}...) not found (looked in: {looked}); download "
        f"it{src} with `{invocation.command('fetch-model', m.name, matrix=folder / 'matrix.yaml')}` or pass "
        "--model-dir DIR"
    )


def verify_model(lm: LoadedMatrix, m: run_folder.PublishedModel, path: Path, status: str) -> ModelCheck:
    # cached by (path, size, mtime): bench does not hash it again; a checkpoint folder by its tree digest
    got = tree_sha256(lm, path)[0] if path.is_dir() else model_sha256(lm, path)
    if got != m.sha256:
        why = "the tiny-model generator changed (gguf/numpy version?)" if m.generate else "a different file"
        raise BadInput(f"model {m.name}: {path} has sha256 {got}, the run measured {m.sha256}: {why}")
    return ModelCheck(m.name, str(path), got, status)


# ------------------------------------------------------------------------------------- compare


def _rel_sd(r: BenchRecord) -> float:
    return (r.stddev_ts or 0.0) / v if (v := value(r)) else 0.0


def compare_records(
    recorded: list[BenchRecord], reproduced: list[BenchRecord], threshold: float
) -> list[ReproRow]:
    """One row per recorded ok test (newest per test identity), joined per image name with its re-run
    by identity.match_tests, decode rows folded over the micro-batch as the published run's report
    folds them (compare.fold_decode judged on the recorded side: a tg test recorded at several ub whose
    tok/s agree within noise is one row, `tg128`, its re-run the ub512 cell, however a busy re-run
    spread its ubs: nc48 S9); noise = max(noise_band: 2 x sqrt(rsd_a^2 + rsd_b^2), threshold %) as a margin of the
    faster side over the slower (a slowdown's noise band / (1 + band): a band past 100 % no longer
    lets any slowdown reproduce)."""

    def usable(recs: list[BenchRecord]) -> list[BenchRecord]:
        return [r for r in select_latest(recs) if value(r)]

    a_all, b_all = usable(recorded), usable(reproduced)
    rows = []
    floor = threshold / 100
    for name in sorted({r.image.name for r in a_all}):
        a = [r for r in a_all if r.image.name == name]
        j = identity.match_tests(a, [r for r in b_all if r.image.name == name])
        ids = [c for c in varying_columns(a) if c != "model"]
        joined = fold_decode(j, judged="A")  # the published report's rows (a label None: the record's own)
        pairs: list[tuple[BenchRecord, BenchRecord | None, str | None]] = [
            *((row.fa.record, row.fb.record, row.test) for row in joined.rows),
            *((r, None, test) for r, test in joined.only_a),
        ]
        pairs.sort(
            key=lambda p: (
                p[0].axis != "prefill",
                p[0].axis,
                p[0].n_depth,
                p[0].n_prompt,
                p[0].n_gen,
                p[0].n_ubatch or 0,
                str([id_value(p[0], c) for c in ids]),
            )
        )
        for ra, rb, test in pairs:
            label = " ".join([test or row_label(ra, ub=True), *(f"{c}={id_value(ra, c)}" for c in ids)])
            if rb is None:
                rows.append(ReproRow(name, label, ra.model.name, ra, None, None, None, False))
                continue
            va, vb = value(ra), value(rb)
            assert va and vb  # usable() keeps only records with a tok/s value
            delta = vb / va - 1
            band = noise_band(_rel_sd(ra), _rel_sd(rb))  # a margin of the faster over the slower
            # said as delta is (below 1 slower): an infinite band holds any slowdown, never NaN
            noise = max(band if delta >= 0 else slowdown_noise(band), floor)
            rows.append(ReproRow(name, label, ra.model.name, ra, rb, delta, noise, abs(delta) <= noise))
    return rows


def host_differences(recorded: dict[str, Any], now: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    diff = {k: (recorded.get(k), now.get(k)) for k in HOST_KEYS if recorded.get(k) != now.get(k)}

    def eng(host: dict[str, Any]) -> str | None:
        """The container engine's version; with its name where it is not Docker (`podman 4.3.1 (rootless)`)."""
        info = host.get("docker") or {}
        if info.get("engine", "docker") == "docker":
            return info.get("server_version")
        return engine.engine_summary(info)

    dr, dn = eng(recorded), eng(now)
    if dr != dn:
        diff["docker"] = (dr, dn)
    return diff


# ------------------------------------------------------------------------------------- the flow


def resolve_run(source: str, *, store: ResultStore | None, lm: LoadedMatrix | None) -> Path:
    """A published run folder, or a run id of `store` exported to <project>/.toolkit/runs/<id>/."""
    p = Path(source)
    if p.is_dir():
        if not (p / "run.json").is_file():
            raise BadInput(f"{p} has no run.json: give a folder written by `toolkit export-run`, or a run id")
        return p
    if "/" in source:  # a path, but not to a folder (no run id has a '/'): a mistyped folder is no run id
        what = "Not a directory: a file where a folder is expected" if p.exists() else "no such folder"
        raise BadInput(f"{p}: {what}; give a run folder written by `toolkit export-run`, or a run id")
    if store is None or lm is None:
        raise BadInput(f"{source!r} is neither a run folder nor (without a matrix) a run id to look up")
    runs = lm.root / ".toolkit" / "runs"
    source = resultindex.full_run_id(store, source)  # a prefix of one stored run's id: that run
    folder = contained(
        runs,
        source,
        what=f"run id {source[:80]!r}",
        fix="give a run id as stored under results/ (an unknown one is answered with the newest stored runs)",
    )
    run_folder.export_run(store, source, folder, lm, host_paths=True)  # this host's own: paths kept
    return folder


def _inside(folder: Path, rel: str) -> Path:
    """`rel` in the published folder: core.paths.contained, naming the folder's file."""
    return contained(folder, rel, what=f"{folder}: {rel}", fix=run_read.UNLINK_FIX)


def _workdir(folder: Path, rebuild: bool) -> Path:
    """<folder>/reproduce/ (with --rebuild, the folder's matrix.yaml and Dockerfile.templates/ copied in);
    every path checked to stay in the folder first (load_run refused symlinks pointing out of it). Its
    `.gitignore` keeps this host's results, logs, paths and model files out of a published folder that
    is committed (export-run's README says to)."""
    work = _inside(folder, str(REPRODUCED.parent))
    work.mkdir(parents=True, exist_ok=True)
    if not (work / ".gitignore").exists():
        write_atomic(
            work / ".gitignore", b"# toolkit reproduce: this host's results, logs and models\n*\n", root=work
        )
    if rebuild:
        for name in ("matrix.yaml", "Dockerfile.templates"):
            if not _inside(folder, name).exists():
                raise BadInput(
                    f"--rebuild needs {folder / name} (written by `toolkit export-run` with a matrix)"
                )
        for src, rel in folder_copy.copied(folder, folder / "matrix.yaml"):  # no link: export-run's rule
            folder_copy.copy_regular(src, work / rel, work)
    return work


def _published_matrix(folder: Path) -> dict[str, Any]:
    """The folder's matrix.yaml as data, read as load_matrix reads a matrix (matrix.api.read_yaml: size,
    aliases and nesting bounded): {} (the defaults) where it is absent or no matrix's YAML (an impossible
    date, not UTF-8, a list at its top), as before; BadInput (exit 4) naming it when it is larger than
    MAX_MATRIX_BYTES (yaml.safe_load of a stranger's 27 MB file, read twice, took 3m49s and 1.2 GB)."""
    path = _inside(folder, "matrix.yaml")
    try:
        size = path.stat().st_size
    except OSError:
        return {}
    if size > MAX_MATRIX_BYTES:
        raise BadInput(
            f"{path}: {size} bytes is too large for a matrix file (limit {MAX_MATRIX_BYTES} bytes): not what "
            "`toolkit export-run` writes; re-export or re-download the folder"
        )
    try:
        data = read_yaml(path)
    except BadInput:
        return {}
    return data if isinstance(data, dict) else {}


def _runner_settings(folder: Path, recorded: list[BenchRecord]) -> dict[str, Any]:
    """The settings blocks of the run (matrix.yaml key -> pydantic model), one per runner of its records
    that has one: the folder's matrix.yaml block (_published_matrix), overridden by what its records
    state, rebuilt by the runner itself (registry -> Runner.settings_from_records). A runner that is
    not registered here is left to bench, which names it."""
    data = _published_matrix(folder)
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r.runner for r in recorded):
        try:
            runner = runners.get(name)
        except KeyError:
            continue
        key = runner.settings_key
        if not key:
            continue
        base = data.get(key)
        try:
            block = runner.settings_from_records(recorded, base if isinstance(base, dict) else {})
        except ValidationError as err:  # the folder's `key:` block or its records' engine settings
            first = err.errors()[0] if err.errors() else {"loc": (), "msg": str(err)}
            where = ".".join(str(x) for x in (key, *first.get("loc", ())))
            raise BadInput(
                f"{folder / 'matrix.yaml'}: {where}: {first['msg']} (in the run's settings)"
            ) from None
        if block is not None:
            out[key] = block
    return out


def _timeout(folder: Path) -> float:
    """bench.timeout_s of the folder's matrix (_published_matrix), else 3600 (absent, not a number)."""
    bench = _published_matrix(folder).get("bench")
    try:
        return float((bench.get("timeout_s") if isinstance(bench, dict) else None) or 3600)
    except (TypeError, ValueError, OverflowError):
        return 3600.0


def _model_spec(m: run_folder.PublishedModel, path: Path, recorded: Sequence[BenchRecord] = ()) -> ModelSpec:
    """A GGUF file (sha256 pinned, its depth sweep as measured) for llama-bench, or a checkpoint folder
    (tree digest verified by verify_model; Hub repo and revision kept, so records carry the same ones)
    for the runners that measured it (every runner of Hugging Face checkpoints where records do not say)."""
    if not path.is_dir():
        return ModelSpec.model_validate(
            {"name": m.name, "path": str(path.resolve()), "sha256": m.sha256, "depth": m.depth}
        )
    hf = HfFile(**m.hf) if m.hf else None
    used = list(dict.fromkeys(r.runner for r in recorded if r.model.name == m.name))
    readers = [n for n in runners.names() if "hf" in runners.get(n).model_formats]
    return ModelSpec(
        name=m.name,
        path=str(path.resolve()),
        format="hf",
        hf=hf,
        runners=[n for n in used if n in readers] or readers,
    )


def bench_matrix(
    run: run_folder.PublishedRun,
    workdir: Path,
    model_paths: dict[str, Path],
    timeout_s: float,
    settings: dict[str, Any] | None = None,
    recorded: list[BenchRecord] | None = None,
) -> LoadedMatrix:
    """The recorded images, models (sha256 pinned) and axes as a matrix, with the runners' settings
    blocks (`settings`: matrix.yaml key -> block, see _runner_settings; defaults for the others);
    written to workdir/bench-matrix.yaml for reference (results.write_atomic; a link there, even to a
    file inside the run folder: BadInput, exit 4, naming it)."""
    try:  # names become container and log file names: the matrix's own rules refuse what is not one
        images = [
            ImageSpec.model_validate(
                {
                    "name": im.name,
                    "template": im.template or "unknown",
                    "backend": im.backend,
                    "runner": im.labels.get("org.toolkit.runner", "llama-bench"),
                }
            )
            for im in run.images
        ]
        models = [_model_spec(m, model_paths[m.name], recorded or []) for m in run.models]
        m = Matrix(
            schema_version=1,
            images=images,
            models=models,
            bench=BenchAxes(**run.bench, timeout_s=timeout_s),
            **(settings or {}),
        )
    except (ValidationError, TypeError) as err:
        raise BadInput(
            f"run {run.run_id}: its run.json images/models/bench are not a valid matrix "
            f"({run_read.first_error(err)}); export the run again"
        ) from None
    path = Path(workdir) / "bench-matrix.yaml"  # workdir: resolved inside the run folder (_workdir)
    if path.is_symlink():  # a published folder's link, even to a file inside it: never written through
        raise BadInput(refused_link(path))
    head = f"# The cases of run {run.run_id}, re-run by `toolkit reproduce` (for reference).\n"
    doc = m.model_dump(mode="json", exclude_none=True)
    doc.update({k: m.settings(k).model_dump(mode="json", exclude_none=True) for k in runners.SETTINGS})
    write_atomic(path, (head + yaml.safe_dump(doc, sort_keys=False)).encode(), root=workdir)
    return LoadedMatrix(m, path)


def reproduce(
    source: str,
    *,
    store: ResultStore | None = None,
    lm: LoadedMatrix | None = None,
    results: Path | None = None,
    rebuild: bool = False,
    threshold: float = 5.0,
    model_dir: Path | None = None,
    events: Events = lambda *a, **k: None,
    on_line: Callable[[str], None] | None = None,
    steps_for: StepsFor | None = None,
    allow_twin: bool = False,
    allow_concurrent: bool = False,
) -> Reproduction:
    """Reproduce a published run (folder or run id). Raises BadInput/BuildFailed before any re-run;
    a run measured on a shape twin (model kind synthetic-twin) only with `allow_twin`."""
    if threshold < 0:
        raise BadInput(f"--threshold {threshold}: must be a percentage >= 0")
    # a folder given by path is someone else's (untrusted); a run id is this project's own, exported
    # from its results to .toolkit/runs/<id>/ just now: its model paths may name files of this host
    project = None if Path(source).is_dir() else lm
    folder = resolve_run(source, store=store, lm=lm)
    run, recorded, builds = run_read.load_run(folder)
    refuse_imported(run, f"{folder / 'run.json'}")
    if not allow_twin:
        _refuse_twins(run, recorded)
    workdir = _workdir(folder, rebuild)
    work_store = ResultStore(results or contained(workdir, REPRODUCED.name, what=f"{workdir}: results"))
    rep = Reproduction(run.run_id, "", folder, work_store.root, threshold)
    paths = {m.name: locate_model(m, folder, workdir, model_dir, project=project) for m in run.models}
    blm = bench_matrix(
        run,
        workdir,
        {k: p for k, (p, _) in paths.items()},
        _timeout(folder),
        _runner_settings(folder, recorded),
        recorded,
    )
    rep.models = [verify_model(blm, m, *paths[m.name]) for m in run.models]
    rep.images = acquire_images(
        run,
        builds,
        workdir,
        work_store,
        rebuild=rebuild,
        on_line=on_line,
        steps_for=steps_for,
        confined=project is None,
    )
    _rerun(rep, blm, work_store, run, recorded, events=events, allow_concurrent=allow_concurrent)
    return rep


def _refuse_twins(run: run_folder.PublishedRun, recorded: list[BenchRecord]) -> None:
    """BadInput when the run was measured on shape twins (model kind synthetic-twin): not the real model."""
    twins = sorted(
        {r.model.name for r in recorded if (r.model.model_extra or {}).get("kind") == "synthetic-twin"}
    )
    if twins:
        raise BadInput(
            f"run {run.run_id} was measured on shape twins ({', '.join(twins)}: random data with the real "
            "model's layout), not the real model; pass --allow-twin to reproduce it as such"
        )


def _rerun(
    rep: Reproduction,
    blm: LoadedMatrix,
    work_store: ResultStore,
    run: run_folder.PublishedRun,
    recorded: list[BenchRecord],
    *,
    events: Events,
    allow_concurrent: bool,
) -> None:
    """Bench the run's cases again on the images acquired (rep.images) and fill `rep` with the new run's
    id, the comparison rows, the host differences and the notes."""
    software = any(backends.is_software_device(r.gpu_info) for r in recorded)
    # bench the exact image IDs acquired above (pinned), not whatever the work matrix would render to
    opts = BenchOptions(
        allow_software_gpu=software,
        strict=True,
        allow_concurrent=allow_concurrent,
        pinned={c.name: c.image_id for c in rep.images},
        # bench's `toolkit bench --resume` would bench the folder as a project
        again="the same `toolkit reproduce` again re-runs every case (a reproduction has no --resume; its "
        "records so far stay apart, superseded by the new run's)",
    )
    rep.new_run_id = opts.run_id
    outcomes = bench.run_bench(blm, list(blm.m.images), list(blm.m.models), work_store, opts, events)
    rep.notes += [f"{o.image} x {o.model}: {o.status}: {o.reason}" for o in outcomes if o.status != "ok"]
    again = resultindex.run_records(work_store, opts.run_id)  # by its id: --results may hold a history
    rep.rows = compare_records(recorded, again, rep.threshold)
    rep.host_diff = host_differences(run.host, again[0].host if again else {})
    if software:
        rep.notes.append(
            "the run was measured on a software Vulkan device (Mesa lavapipe), and so was this one"
        )
