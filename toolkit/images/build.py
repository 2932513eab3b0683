"""ImageSpec --build--> BuildRecord (ref, image digest, labels, size, build seconds).

Steps per image: render the Dockerfile, check its base images are available (local or pullable),
prepare the source into images/<name>/src/, run `docker buildx build --load` with OCI labels,
inspect the result and append a BuildRecord to results/builds.jsonl (the bench step reads it).

The render-inputs key (`inputs_key`: template bytes + template variables + image spec + the pinned
source + toolkit version) is computed from matrix.yaml and the templates alone, without building;
`toolkit build` stamps it on the image (label `org.toolkit.inputs-key`) and `toolkit bench` compares
it with the key the current inputs give, so it never measures an image of older inputs unawares.
The OCI `created` label is reused from the previous build of the same key, so a no-change rebuild
yields the same image digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from toolkit import __version__
from toolkit.core.errors import BadInput, BuildFailed, EngineUnavailable
from toolkit.core.text import shell_join
from toolkit.core.types import utc_now
from toolkit.engine import api as engine
from toolkit.images.sources import (
    _EXCLUDE as SYNC_EXCLUDE,  # the folders sync_tree leaves out of a build context
)
from toolkit.images.sources import PreparedSource, prepare_source, sync_tree
from toolkit.images.template_inputs import image_inputs_hash
from toolkit.matrix.api import ImageSpec, LoadedMatrix, SourceSpec
from toolkit.models.tiny import sha256_file
from toolkit.results.records import BuildRecord, ResultStore
from toolkit.results.time_check import IMAGE_CREATED

if TYPE_CHECKING:  # jinja2 (the renderer) loads only when an image is rendered, not on every bench
    from toolkit.images.render import Rendered

# [^\S\n]: whitespace within the line. A leading `\s*` ran across newlines from every line start:
# quadratic (40,000 blank lines took 17 s).
_FROM = re.compile(
    r"^[^\S\n]*FROM[^\S\n]+(?:--platform=\S+[^\S\n]+)?(\S+)(?:[^\S\n]+AS[^\S\n]+(\S+))?",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass
class BuildResult:
    """Outcome of one image: status ok | cached | failed | skipped, with a one-line reason."""

    image: str
    status: str
    reason: str = ""
    record: BuildRecord | None = None
    log_path: Path | None = None
    command: list[str] = field(default_factory=list)

    def line(self, before: BuildRecord | None = None, *, dry_run: bool = False) -> str:
        """What `toolkit build` prints for this image: the exact build command (dry run); built REF
        DIGEST SIZE in SECONDS, how much came from cache and whether the image digest changed against
        `before` (the previous build on this engine); else the status, the reason and the log."""
        if dry_run:
            return f"{self.image}: {shell_join(self.command)}"
        r = self.record
        if self.status in ("ok", "cached") and r is not None:
            change = ""
            if before is not None:
                change = (
                    ", image unchanged" if before.digest == r.digest else ", new image digest (labels differ)"
                )
            how = (
                f"all steps from cache{change}"
                if self.status == "cached"
                else f"{getattr(r, 'cached_steps', '?')}/{getattr(r, 'steps', '?')} steps from cache"
            )
            # where the runtime's source came from (images/sources.py)
            origin = r.source_origin
            return (
                f"{self.image}: built {r.ref} {r.digest[:19]} {r.size_bytes / 1e6:.0f} MB in "
                f"{r.build_seconds:.1f} s ({how}{f'; source {origin}' if origin else ''})"
            )
        log = f"; log: {self.log_path}" if self.log_path else ""
        return f"{self.image}: {self.status}: {self.reason}{log}"

    def to_json(self) -> dict:
        """The result as `toolkit build --json` gives it: image, status, reason, record, log, command."""
        return {
            "image": self.image,
            "status": self.status,
            "reason": self.reason,
            "record": self.record,
            "log": self.log_path,
            "command": self.command,
        }


def base_images(dockerfile: str) -> list[str]:
    """External images a Dockerfile builds FROM (stage names excluded), in order."""
    stages: set[str] = set()
    out: list[str] = []
    for m in _FROM.finditer(dockerfile):
        ref, alias = m.group(1), m.group(2)
        if ref.lower() not in stages and ref not in out:
            out.append(ref)
        if alias:
            stages.add(alias.lower())
    return out


INPUTS_KEY_LABEL = "org.toolkit.inputs-key"


@dataclass(frozen=True)
class InputsKey:
    """What an image spec renders to now, before any build.

    `key`: sha256 hex (64 chars) over `template_hash` (render.inputs_hash: template bytes + image spec
    incl. `vars` + render context), `source` and the toolkit version (stamped in a label). `source`:
    the image's source spec from matrix.yaml (git URL + ref + pinned commit, pypi `name==version`,
    archive/path with the sha256 of their bytes, fallbacks likewise), None for an image without one.
    Comments and other images', models' or bench axes' entries of matrix.yaml are not part of it.
    """

    key: str
    template_hash: str
    source: dict | None


def tree_sha256(path: Path) -> str:
    """sha256 hex over every file under `path` that sync_tree copies into a build context:
    relative path, executable bit and bytes (symlinks: their target). Order-independent of the walk."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in SYNC_EXCLUDE)
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            rel = p.relative_to(path).as_posix()
            if p.is_symlink():
                h.update(f"L\0{rel}\0{os.readlink(p)}\n".encode())
                continue
            h.update(f"F\0{rel}\0{int(os.access(p, os.X_OK))}\0{p.stat().st_size}\n".encode())
            with p.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def _source_identity(lm: LoadedMatrix, name: str, src: SourceSpec, *, primary: bool) -> dict:
    """The source spec as data, plus the sha256 of a local path's or archive's bytes (a local tree
    has no commit that pins it). A missing primary path/archive is BadInput; a missing fallback is
    recorded as absent (the build may never need it)."""
    ident = src.model_dump(mode="json", exclude_none=True, exclude={"fallback"})
    local = src.path or src.archive
    if local:
        field_ = "path" if src.path else "archive"
        where = lm.resolve(local, what=f"sources.{name}.{field_}")
        ok = where.is_dir() if src.path else where.is_file()
        if ok:
            ident[f"{field_}_sha256"] = tree_sha256(where) if src.path else sha256_file(where)
        elif primary:
            kind = "directory" if src.path else "file"
            raise BadInput(f"{lm.path}: sources.{name}.{field_}: {where} is not a {kind}; fix `{field_}`")
        else:
            ident[f"{field_}_sha256"] = "absent"
    if src.fallback is not None:
        ident["fallback"] = _source_identity(lm, name, src.fallback, primary=False)
    return ident


def inputs_key(lm: LoadedMatrix, spec: ImageSpec, rendered: Rendered | None = None) -> InputsKey:
    """The render-inputs key of `spec` as matrix.yaml and Dockerfile.templates/ stand now, computed without
    building or fetching (the one definition: `toolkit build` labels images with it, `toolkit bench` selects
    builds by it). `rendered` saves a second render when the caller has one; without it the templates are
    parsed, not rendered (an undefined template variable then surfaces at `toolkit build`). Raises BadInput
    for a missing template or partial, a template syntax error, or a local source path/archive that does not
    exist."""
    template_hash = rendered.inputs_hash if rendered else image_inputs_hash(lm, spec)
    source = (
        _source_identity(lm, spec.source, lm.m.sources[spec.source], primary=True) if spec.source else None
    )
    payload = json.dumps(
        {"template_hash": template_hash, "source": source, "toolkit": __version__},
        sort_keys=True,
        separators=(",", ":"),
    )
    return InputsKey(hashlib.sha256(payload.encode()).hexdigest(), template_hash, source)


def build_inputs_key(build: BuildRecord) -> str | None:
    """The render-inputs key a build was made from (its image label), None for builds without one."""
    return build.labels.get(INPUTS_KEY_LABEL) or None


def _labels(
    spec: ImageSpec, rendered: Rendered, lm: LoadedMatrix, commit: str | None, created: str, inputs_key: str
) -> dict[str, str]:
    src = lm.m.sources.get(spec.source) if spec.source else None
    origin = (src.git or src.pypi or src.path or src.archive) if src else ""
    labels = {
        IMAGE_CREATED: created,
        "org.opencontainers.image.revision": commit or "",
        "org.opencontainers.image.source": origin or "",
        "org.opencontainers.image.version": (src.version if src and src.version else (commit or "")[:9]),
        "org.opencontainers.image.title": f"toolkit/{spec.name}",
        "org.opencontainers.image.description": spec.description or spec.name,
        "org.toolkit.backend": spec.backend,
        "org.toolkit.runner": spec.runner,
        "org.toolkit.template": spec.template,
        "org.toolkit.template-hash": rendered.inputs_hash,
        INPUTS_KEY_LABEL: inputs_key,
        "org.toolkit.version": __version__,
    }
    if commit:
        key = "org.toolkit.llama-cpp-commit" if spec.runner == "llama-bench" else "org.toolkit.source-commit"
        labels[key] = commit
    return labels


Plan: TypeAlias = "tuple[Rendered, list[str], PreparedSource | None, dict, dict, list[str]]"
"""plan()'s answer: (rendered, base images, prepared source, labels, build args, tags)."""


def plan(
    lm: LoadedMatrix,
    spec: ImageSpec,
    store: ResultStore,
    *,
    prepare: bool = True,
    source: PreparedSource | None = None,
    stranger: bool = False,
) -> Plan:
    """Render and (optionally) prepare the source; returns (rendered, bases, source, labels, args, tags):
    the tags `<repo>/<image>:latest` and `<repo>/<image>:<commit 9>-<inputs key 8>`, repo `toolkit`, or
    `toolkit-reproduce` for a `stranger`'s templates, whose cache mounts get ids of their own
    (confine.confine_cache_mounts: the Dockerfile built is that one; the labels name the templates')
    and whose build args add confine.CACHE_NS_ARG (BuildKit's own cache-mount namespace)."""
    from toolkit.images.render import render_image, write_rendered

    rendered = render_image(lm, spec)
    key = inputs_key(lm, spec, rendered).key
    built = rendered
    if stranger:
        from toolkit.images.confine import NAMESPACE, confine_cache_mounts

        built = replace(rendered, content=confine_cache_mounts(rendered.content, key, rendered.template))
    write_rendered(built)
    context = rendered.path.parent
    repo = NAMESPACE if stranger else "toolkit"
    commit: str | None = None
    if spec.source:
        if prepare:
            source = source or prepare_source(lm, spec.source)
            sync_tree(source.path, context / "src")
            commit = source.commit
        else:
            s = lm.m.sources[spec.source]
            commit = s.commit or s.ref
    else:
        (context / "src").mkdir(exist_ok=True)
    tags = [f"{repo}/{spec.name}:latest", f"{repo}/{spec.name}:{(commit or 'nosrc')[:9]}-{key[:8]}"]
    created = _reused_created(store, spec.name, key, tags[1] if prepare else None)
    labels = _labels(spec, rendered, lm, commit, created, key)
    args = (
        {"LLAMA_BUILD_COMMIT": (commit or "unknown")[:9], "LLAMA_BUILD_NUMBER": "0"}
        if spec.runner == "llama-bench"
        else {}
    )
    if stranger:  # BuildKit namespaces every cache mount itself, however the Dockerfile spells it
        from toolkit.images.confine import CACHE_NS_ARG, cache_namespace

        args[CACHE_NS_ARG] = cache_namespace(key)
    return rendered, base_images(rendered.content), source, labels, args, tags


def builds_here(store: ResultStore, name: str, every: list[BuildRecord] | None = None) -> list[BuildRecord]:
    """The build records of image `name` (oldest first; `every`: those records when the caller has them) whose
    image the engine in use has: built on it (BuildRecord.on_engine), or present there all the same (docker
    load, a pull, a copied data root). A build of another engine whose image is not here never counts. With no
    engine answering, every build counts (a dry run still plans from the records). The one rule of bench, push
    and build's "unchanged" check."""
    every = [b for b in store.builds() if b.image == name] if every is None else every
    try:
        here: str | None = engine.engine_id()
    except EngineUnavailable:
        here = None
    return [b for b in every if b.on_engine(here) or engine.inspect_image(b.digest) is not None]


def latest_here(store: ResultStore, name: str) -> BuildRecord | None:
    """The newest of builds_here, None when there is none."""
    found = builds_here(store, name)
    return found[-1] if found else None


def _reused_created(store: ResultStore, name: str, inputs_key: str, inputs_tag: str | None) -> str:
    """The OCI `created` of an earlier build of the same inputs (this checkout's records, or the local
    image tagged with the inputs key), so a no-change rebuild keeps its digest; else now."""
    prev = store.latest_build(name)
    if prev and build_inputs_key(prev) == inputs_key:
        return prev.labels.get(IMAGE_CREATED, "")
    if inputs_tag:
        info = engine.inspect_image(inputs_tag)
        if info and info.labels.get(INPUTS_KEY_LABEL) == inputs_key:
            return info.labels.get(IMAGE_CREATED, "")
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _planned(
    lm: LoadedMatrix,
    spec: ImageSpec,
    store: ResultStore,
    *,
    dry_run: bool,
    source: PreparedSource | None,
    stranger: bool,
) -> Plan | BuildResult:
    """plan() for build_image: a real build first makes sure every base image can be had and prepares
    the source; a base or a source that cannot be had gives the image's skipped BuildResult instead."""
    from toolkit.images.render import render_image

    if dry_run:
        return plan(lm, spec, store, prepare=False, source=source, stranger=stranger)
    for base in base_images(render_image(lm, spec).content):
        reason = engine.ensure_base_image(base)
        if reason:
            return BuildResult(spec.name, "skipped", reason)
    try:
        return plan(lm, spec, store, source=source, stranger=stranger)
    except BuildFailed as err:
        return BuildResult(spec.name, "skipped", str(err))


def build_image(
    lm: LoadedMatrix,
    spec: ImageSpec,
    store: ResultStore,
    *,
    no_cache: bool = False,
    dry_run: bool = False,
    on_line=None,
    source: PreparedSource | None = None,
    secrets: list[str] | None = None,
    stranger: bool = False,
) -> BuildResult:
    """Build one image. Never raises for a build failure: returns status failed with the log path.
    `stranger`: the templates are someone else's (`reproduce --rebuild`): RUN steps get their own
    network namespace, never this host's, its cache mounts ids of their own (confine), and the image is
    tagged under `toolkit-reproduce/`, never over the project's own `toolkit/<image>` tags.

    Raises EngineUnavailable when Docker is unreachable and BadInput for matrix/template errors.
    """
    planned = _planned(lm, spec, store, dry_run=dry_run, source=source, stranger=stranger)
    if isinstance(planned, BuildResult):
        return planned
    rendered, _bases, _source, labels, args, tags = planned
    log_dir = lm.root / ".toolkit" / "logs"
    meta = log_dir / f"build-{spec.name}.metadata.json"
    cmd = engine.buildx_command(
        rendered.path.parent,
        tags=tags,
        labels=labels,
        build_args=args,
        metadata_file=meta,
        no_cache=no_cache,
        secrets=secrets,
        network="isolated" if stranger else "host",
    )
    if dry_run:
        return BuildResult(spec.name, "dry-run", command=cmd)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    log_path = log_dir / f"build-{spec.name}-{stamp}.log"
    meta.unlink(missing_ok=True)  # never read an earlier build's image ID
    t0 = time.monotonic()
    out = engine.run_buildx(cmd, log_path=log_path, on_line=on_line)
    if not out.ok:
        tail = _error_tail(log_path)
        return BuildResult(
            spec.name,
            "failed",
            f"{'podman build' if cmd[0] == 'podman' else 'buildx'} exited {out.returncode}: {tail}",
            log_path=log_path,
            command=cmd,
        )
    return _recorded(spec, store, planned, cmd, out, meta=meta, log_path=log_path, t0=t0)


def _recorded(
    spec: ImageSpec,
    store: ResultStore,
    planned: Plan,
    cmd: list[str],
    out: engine.BuildOutcome,
    *,
    meta: Path,
    log_path: Path,
    t0: float,
) -> BuildResult:
    """After a build that succeeded: inspect the image it built, read its build facts and append its
    BuildRecord to the store (ok, or cached when every step came from cache); failed when the image is
    not in the engine or its facts cannot be read or contradict its labels."""
    rendered, _bases, source, labels, _args, tags = planned
    # the image ID buildx (podman: --iidfile) wrote, not whatever toolkit/<name>:latest names by now:
    # another project's build on the same engine may have moved that tag in between
    built = engine.built_image_id(meta) or tags[0]
    info = engine.inspect_image(built)
    if info is None:
        return BuildResult(
            spec.name, "failed", f"built but {built} not found in the engine", log_path=log_path, command=cmd
        )
    cached = out.steps > 0 and out.cached_steps == out.steps
    try:
        facts = read_build_facts(info.id, info.labels)
        proven = facts_as_labels(facts, info.labels)
    except BuildFailed as err:
        return BuildResult(spec.name, "failed", str(err), log_path=log_path, command=cmd)
    rec = BuildRecord(
        image=spec.name,
        ref=tags[1],
        digest=info.id,
        backend=spec.backend,
        template=spec.template,
        template_hash=rendered.inputs_hash,
        source_commit=labels.get("org.opencontainers.image.revision") or None,
        labels={**info.labels, **proven},
        facts=facts,
        size_bytes=info.size,
        build_seconds=round(time.monotonic() - t0, 2),
        cached=cached,
        created=utc_now(),
        build_command=cmd,
        repo_digests=info.repo_digests,
        steps=out.steps,
        cached_steps=out.cached_steps,
        log_path=str(log_path),
        source_origin=source.origin if source else None,
        engine=engine.engine_id(),
    )
    store.add_build(rec)
    return BuildResult(spec.name, "cached" if cached else "ok", record=rec, log_path=log_path, command=cmd)


FACTS_LABEL = "org.toolkit.facts"
_FACT_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def build_images(
    lm: LoadedMatrix,
    specs: list[ImageSpec],
    store: ResultStore,
    *,
    steps_for: Callable[[ImageSpec], Any],
    after: Callable[[], None] = lambda: None,
    on_done: Callable[[BuildResult, BuildRecord | None], None] = lambda res, before: None,
    fail_fast: bool = False,
    **opts: Any,
) -> tuple[list[BuildResult], list[str]]:
    """Build `specs` in order with build_image(**opts: no_cache, dry_run, secrets). `steps_for(spec)`
    gives each build's line handler (a build_plan.BuildSteps: its close() runs after the build);
    `after()` runs when each build ends, also on an exception (it stops a status line); `on_done(result,
    previous build here or None)` once each result is known. With `fail_fast` the first failure ends
    the loop. Returns (results, names fail_fast left unbuilt)."""
    results: list[BuildResult] = []
    for i, spec in enumerate(specs):
        steps = steps_for(spec)
        before = None if opts.get("dry_run") else latest_here(store, spec.name)
        try:
            res = build_image(lm, spec, store, on_line=steps, **opts)
        finally:
            after()
            steps.close()
        results.append(res)
        on_done(res, before)
        if res.status == "failed" and fail_fast:
            return results, [s.name for s in specs[i + 1 :]]
    return results, []


def failed_error(results: list[BuildResult], unbuilt: list[str]) -> BuildFailed | None:
    """The BuildFailed (exit 2) naming each failed image's kept log and what --fail-fast left
    unbuilt; None when nothing failed."""
    failed = [r for r in results if r.status == "failed"]
    if not failed:
        return None
    return BuildFailed(
        "build failed for: "
        + ", ".join(f"{r.image} (log: {r.log_path})" for r in failed)
        + (f"; not built (--fail-fast): {', '.join(unbuilt)}" if unbuilt else "")
    )


def select(
    lm: LoadedMatrix, images: tuple[str, ...] | list[str], *, every: bool, allow_software: bool = False
) -> tuple[list[ImageSpec], list[Any]]:
    """(images to build, build_plan.Skipped images) for `toolkit build`: the images named (`images`;
    all of the matrix when empty), each rendered first so a template error (an undefined variable)
    surfaces before any build starts; unless `every` (-i, --all or --push), only those this host can
    run (build_plan.host_plan; `allow_software` counts Mesa lavapipe as a Vulkan device)."""
    from toolkit.images import build_plan
    from toolkit.images.render import render_image

    specs = lm.select_images(images)
    for spec in specs:
        render_image(lm, spec)
    if every:
        return specs, []
    return build_plan.host_plan(specs, allow_software=allow_software)


def build_then_push(
    lm: LoadedMatrix,
    specs: list[ImageSpec],
    store: ResultStore,
    *,
    skipped: Sequence[Any] = (),
    report: Callable[[list[BuildResult]], None] = lambda results: None,
    push: Callable[[list[str]], None] | None = None,
    **loop: Any,
) -> None:
    """`toolkit build` after select(): a skipped result per `skipped` image (build_plan.Skipped), then
    build_images(lm, specs, store, **loop); `report(results)` once every result is known; then
    `push(names of the images built or served from cache)`, unless a dry run or nothing was built.
    Raises failed_error's BuildFailed (exit 2) when an image failed, after the push, and BuildFailed
    when no image was built or cached (each skipped: no base image, no source, not for this host)."""
    results = [BuildResult(sk.name, "skipped", f"cannot run on this host: {sk.reason}") for sk in skipped]
    done, unbuilt = build_images(lm, specs, store, **loop)
    results += done
    report(results)
    built = [r.image for r in results if r.status in ("ok", "cached")]
    if push is not None and built and not loop.get("dry_run"):
        push(built)
    err = failed_error(results, unbuilt)
    if err:
        raise err
    if results and not built and not loop.get("dry_run"):  # every image asked for was skipped
        raise BuildFailed("nothing was built: every image was skipped, each for the reason its result gives")


def parse_facts(text: str, *, origin: str) -> dict[str, str]:
    """`key=value` lines (the build's fact files, e.g. partials/llama-cmake.j2) -> {key: value}.

    Blank lines are skipped. Raises BuildFailed naming `origin` for a malformed line or a key given
    twice with different values (a build that contradicts itself proves nothing).
    """
    facts: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not _FACT_KEY.fullmatch(key):
            raise BuildFailed(f"{origin}: line {n} is not a key=value build fact: {line[:120]!r}")
        if facts.get(key, value) != value:
            raise BuildFailed(f"{origin}: build fact {key!r} given twice: {facts[key]!r} and {value!r}")
        facts[key] = value.strip()
    return facts


def read_build_facts(image_id: str, image_labels: dict[str, str]) -> dict[str, str]:
    """What the build proved, read from the built image: every `*.txt` in the folder named by its
    `org.toolkit.facts` label ({} when the image has no such label). Runs one throwaway container
    (no network, no capabilities, ~1 s). Raises BuildFailed when the files cannot be read or parsed.
    """
    folder = image_labels.get(FACTS_LABEL)
    if not folder:
        return {}
    if not re.fullmatch(r"/[A-Za-z0-9_./-]+", folder) or ".." in folder:
        raise BuildFailed(
            f"image {image_id[:19]}: label {FACTS_LABEL}={folder!r} is not an absolute folder path"
        )
    spec = engine.RunSpec(
        image=image_id,
        command=["/bin/sh", "-c", f"cat {folder}/*.txt"],
        network="none",
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"],
    )
    out = engine.run_container(spec, timeout=120)
    if out.exit_code != 0:
        raise BuildFailed(
            f"image {image_id[:19]}: cannot read its build facts in {folder} "
            f"(exit {out.exit_code}: {out.stderr.strip()[-200:]})"
        )
    return parse_facts(out.stdout, origin=f"image {image_id[:19]}:{folder}")


def facts_as_labels(facts: dict[str, str], image_labels: dict[str, str]) -> dict[str, str]:
    """Build facts as record labels `org.toolkit.<key>`. A fact may repeat an image label (e.g.
    gfx-targets) but never contradict it: BuildFailed names the label, what it says and what the
    build proved."""
    out: dict[str, str] = {}
    for key, value in facts.items():
        label = f"org.toolkit.{key}"
        if label in image_labels and image_labels[label] != value:
            raise BuildFailed(
                f"label {label}={image_labels[label]!r} but the build proved {value!r}; "
                f"fix the template or matrix.yaml so the label states what is built"
            )
        out[label] = value
    return out


def _error_tail(log_path: Path, n: int = 3, width: int = 400) -> str:
    """The last `n` error lines of a build log (else its last lines), joined by ` | `, within about
    `width` characters: a longer line keeps its start and its end (`…` between), since buildah and
    BuildKit end a failed step's line with its cause (`Error: building at STEP "RUN ...": setup
    network: could not find pasta ...` after a RUN line of 400 characters, which a cut at 400 hid)."""
    lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    picked = [ln for ln in lines if "ERROR" in ln or "error:" in ln.lower()][-n:] or lines[-n:]
    each = max(80, width // max(1, len(picked)) - 3)
    return " | ".join(
        ln if len(ln) <= each else ln[: each // 3] + "…" + ln[-(each - each // 3 - 1) :] for ln in picked
    )
