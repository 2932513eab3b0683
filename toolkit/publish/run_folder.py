"""A published run's folder (`toolkit export-run` writes it, `toolkit reproduce` reads it): run.json
(PublishedRun: its images by digest, models by sha256, host, axes), results.jsonl, builds.jsonl,
matrix.yaml and Dockerfile.templates/, and a README. The host's folders are not published
(publish.scrub). The image registry side (tags, push, attestations) is publish.push."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tabulate import tabulate

from toolkit import __version__
from toolkit.core import jsonsafe
from toolkit.core.errors import BadInput, FileSystemError
from toolkit.core.paths import contained, symlinks_inside
from toolkit.core.text import code, counted, md_cell, md_line, md_prose, md_text, strip_controls
from toolkit.core.types import utc_now
from toolkit.engine import api as engine
from toolkit.host.info import COMMIT_HEX, commit_words, dirty_mark, git_env, toolkit_source
from toolkit.matrix.api import BenchAxes, LoadedMatrix
from toolkit.publish import REPRODUCED, folder_copy, scrub, sweeps
from toolkit.publish.push import merged, push_hint
from toolkit.results import index as resultindex
from toolkit.results import open_regular, write_atomic
from toolkit.results.records import (
    BenchRecord,
    BuildRecord,
    ResultStore,
    RunId,
    append_jsonl,
    imported,
    write_json_atomic,
)
from toolkit.runtimes.llama_bench import args as lb_args

RUN_SCHEMA_VERSION = 1
RUN_FILES = ("run.json", "results.jsonl", "builds.jsonl", "matrix.yaml", "Dockerfile.templates/", "README.md")
"""What a published run's folder holds: it needs nothing else to be reproduced; its results name images by
image digest, run.json maps each digest to its registry digests."""
TOOLKIT_SOURCE = "toolkit-src.tar.gz"
"""The toolkit's own source at the commit that measured the run (pyproject.toml, README.md, toolkit/), beside
RUN_FILES where the exporting checkout holds that commit: the README's install line (`pip install
./toolkit-src.tar.gz`) is then one a customer can run, with the toolkit that made the numbers."""


class PublishedImage(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    backend: str
    digest: str
    ref: str = ""
    repo_digests: list[str] = Field(default_factory=list)
    pushed: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    template: str | None = None
    template_hash: str | None = None
    source_commit: str | None = None


class PublishedModel(BaseModel):
    """A model of the run: `file` its name, `matrix_path` where the matrix puts it (relative, no '..'),
    `recorded_path` where it was on the measuring host (a record: never looked at for a stranger's folder)."""

    model_config = ConfigDict(extra="allow")

    name: str
    file: str
    sha256: str
    size_bytes: int
    matrix_path: str | None = None
    recorded_path: str | None = None
    hf: dict[str, Any] | None = None
    generate: str | None = None
    depth: dict[str, Any] | None = None  # its depth sweep as measured (sweeps.recorded_sweep)


class PublishedRun(BaseModel):
    """run.json of a published run folder (schema version 1)."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = RUN_SCHEMA_VERSION
    run_id: RunId
    created: str
    exported: str
    toolkit_version: str = __version__
    images: list[PublishedImage]
    models: list[PublishedModel]
    bench: dict[str, Any]
    host: dict[str, Any] = Field(default_factory=dict)
    records: dict[str, int] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    toolkit_source: str | None = None  # TOOLKIT_SOURCE where the export holds it, else None


def axes_from_records(records: list[BenchRecord]) -> dict[str, Any]:
    """The run's axes: from the recorded llama-bench command, else from the records' values."""
    for r in records:
        axes = lb_args.axes_from_args(r.command)
        if axes:
            break
    else:

        def vals(get: Callable[[BenchRecord], Any]) -> list[int]:
            return sorted({v for v in map(get, records) if v is not None})

        axes = {
            "n_prompt": vals(lambda r: r.n_prompt or None) or [0],
            "n_gen": vals(lambda r: r.n_gen or None) or [0],
            "n_batch": vals(lambda r: r.n_batch),
            "n_ubatch": vals(lambda r: r.n_ubatch),
            "n_depth": vals(lambda r: r.n_depth),
            "flash_attn": vals(lambda r: r.flash_attn),
            "n_gpu_layers": vals(lambda r: r.n_gpu_layers),
            "repetitions": max((len(r.samples_ts) for r in records), default=1) or 1,
        }
        axes = {k: v for k, v in axes.items() if v != []}
    threads = {r.raw.get("n_threads") for r in records if r.status == "ok"}
    if "threads" not in axes and len(threads) == 1 and isinstance(next(iter(threads)), int):
        axes["threads"] = next(iter(threads))  # pin what llama-bench chose, so another host runs the same
    axes.update(_process_settings(records))
    try:
        return BenchAxes(**axes).model_dump(exclude={"timeout_s"})
    except ValidationError as err:  # an imported run's values a matrix does not take: kept as measured
        return {**axes, "not_a_matrix": field_problem(err)}


def _process_settings(records: list[BenchRecord]) -> dict[str, Any]:
    """bench.runs, bench.canary and bench.env as the run's `records` hold them, not the matrix's defaults
    (no llama-bench flag says them): runs the most container starts of a test (`process_run.of`, 1
    without), canary whether a record carries a canary result (an import, or `bench.canary: false`,
    has none), env each variable's values (None: left unset) in the order the records give them."""
    starts = [p.get("of") for r in records if isinstance(p := (r.model_extra or {}).get("process_run"), dict)]
    env: dict[str, list[str | None]] = {name: [] for r in records for name in r.env}
    for r in records:
        for name, vals in env.items():
            if (v := r.env.get(name)) not in vals:
                vals.append(v)
    return {
        "runs": max((n for n in starts if isinstance(n, int) and n >= 1), default=1),
        "canary": any(isinstance((r.model_extra or {}).get("canary"), dict) for r in records),
        "env": env,
    }


def run_records(store: ResultStore, run_id: str) -> list[BenchRecord]:
    """Every record of run `run_id` in `store` (BadInput naming the newest stored runs when none), by its
    indexed id (index.run_records: the run's cost, not the stored history's)."""
    recs = resultindex.run_records(store, run_id)
    if not recs:
        from toolkit.analysis.compare import stored_runs

        short = resultindex.short_run_start(
            run_id, (h.run_id for h in resultindex.runs_newest_first(resultindex.heads(store, ok_only=True)))
        )
        raise BadInput(
            f"no results of run {run_id!r} under {store.root}: give a run id{short}; {stored_runs(store)}"
        )
    return recs


def describe_run(
    store: ResultStore, run_id: str, lm: LoadedMatrix | None, recs: list[BenchRecord]
) -> tuple[PublishedRun, list[BuildRecord]]:
    """run.json content and the build records of the run's image digests (`recs`: its run_records). A run
    whose records name no image digest or model sha256 (an import) is exported with a note saying so."""
    digests = list(dict.fromkeys(r.image.digest for r in recs))
    builds = [b for b in store.builds() if b.digest in digests]
    notes: list[str] = []
    where = {
        "matrix": Path(lm.path) if lm else None,
        "results": store.root,
    }  # the push hint's --matrix/--results
    images = [
        _published_image(recs, [b for b in builds if b.digest == d], d, notes, where, lm) for d in digests
    ]
    notes += [
        f"image {n!r}: no image digest recorded: reproduce cannot pull or check the image it ran"
        for n in dict.fromkeys(r.image.name for r in recs if not r.image.digest)
    ]
    notes += [
        f"model {n!r}: no sha256 recorded: reproduce cannot check the model file"
        for n in dict.fromkeys(r.model.name for r in recs if len(r.model.sha256 or "") != 64)
    ]
    ok = [r for r in recs if r.status == "ok"]
    counts = {"total": len(recs), "ok": len(ok), "failed": len(recs) - len(ok)}
    bench = axes_from_records(ok or recs)
    if "not_a_matrix" in bench:
        notes.append(
            f"bench: the run's axes are kept as measured, but matrix.yaml cannot express them "
            f"({bench['not_a_matrix']}): `toolkit reproduce` cannot re-run this run"
        )
    elif lm is not None and not all(map(imported, digests)) and (off := _matrix_off(lm, recs, bench)):
        notes.append(
            f"matrix.yaml is the matrix given at export ({lm.path.name}) as it is now; its bench block differs "
            f"from this run's records (results.jsonl, what was measured): {'; '.join(off)}"
        )
    run = PublishedRun(
        run_id=run_id,
        created=min(r.created for r in recs),
        exported=utc_now(),
        images=images,
        models=_published_models(recs, lm),
        bench=bench,
        host=recs[0].host,
        records=counts,
        notes=notes,
    )
    return run, builds


_SWEPT = ("n_prompt", "n_gen", "n_ubatch", "n_batch")
"""The axes a record holds as given (n_gpu_layers is clamped to the model's layers, flash_attn's -1 is
resolved, n_depth gains a model's depth sweep: those differ from the matrix without a different sweep)."""
_AS_RUN = "type_k type_v split_mode n_cpu_moe repetitions runs threads cooldown_s env".split()
"""The other settings the run's axes (axes_from_records) hold as measured (threads where the matrix sets it;
not canary, which no vLLM or SGLang run has, nor the memory limit, which no record holds)."""


def _matrix_off(lm: LoadedMatrix, recs: list[BenchRecord], axes: dict[str, Any]) -> list[str]:
    """Each bench setting whose values in the exported matrix (`lm`, the one --matrix names at export
    time) are not the values the run measured: the llama-bench axes the records hold (`recs`: every process
    of the run, a resumed run's too; 0, a decode test's n_prompt or a prefill test's n_gen, is no value on
    either side: the matrix's `n_prompt: [0, 512]` is llama-bench's "no prompt test"), then every other
    setting of the run's `axes` (_AS_RUN: repetitions too, nc50 S6): `n_ubatch 512, 2048 where the records
    hold 512`. A run measured with another matrix, or a matrix edited since, gets a note."""
    mine = lm.bench.model_dump()
    off = []
    for k in _SWEPT:
        held = sorted({v for r in recs if isinstance(v := getattr(r, k, None), int) and v})
        if held and set(mine[k]) - {0} != set(held):
            off.append(f"{k} {_words(mine[k])} where the records hold {_words(held)}")
    for k in _AS_RUN:
        now, was = (sorted(v, key=str) if isinstance(v, list) else v for v in (mine[k], axes.get(k)))
        if k in axes and now is not None and now != was:
            off.append(f"{k} {_words(now)} where the run measured {_words(was)}")
    return off


def _published_image(
    recs: list[BenchRecord],
    mine: list[BuildRecord],
    digest: str,
    notes: list[str],
    where: dict[str, Any],
    lm: LoadedMatrix | None,
) -> PublishedImage:
    """run.json's entry of image `digest` from the run's records and its builds (`mine`, oldest first);
    appends to `notes` when it was never pushed (reproduce then needs --rebuild where no engine holds it) or
    is an import (no image), its `toolkit push` (push_hint: `where`'s matrix and results; --registry where
    `lm`'s matrix names no `registry:`, or names the loopback one it went to)."""
    first = next(r for r in recs if r.image.digest == digest)
    name = first.image.name
    last = mine[-1] if mine else None
    repo = merged(*(b.repo_digests for b in mine), first.image.repo_digests)
    if imported(digest):  # no image at all: neither a push nor --rebuild can give reproduce one
        notes.append(
            f"image {first.image.name}@{digest[:19]}: its results were imported (`toolkit import`): "
            "there is no image to push or rebuild; the folder publishes the results, `toolkit reproduce` "
            "cannot re-run them"
        )
    elif not engine.pullable_digests(repo):
        run = push_hint(name, lm.m.registry if lm else None, lm, **where) + (
            "" if lm and lm.m.registry else ","
        )
        notes.append(
            f"image {name}@{digest[:19]} was never pushed: reproduce on another host (or on this one once its "
            f"engine no longer holds the image) needs --rebuild (or run {run} and export again)"
        )
    elif not reachable_digests(repo):
        notes.append(
            f"image {first.image.name}@{digest[:19]} was pushed only to a registry on the exporting host's "
            "loopback address: that host can pull it, no other can; elsewhere reproduce needs --rebuild "
            f"(or run {push_hint(name, None, lm, whose='a registry others reach', **where)}, and export again)"
        )
    return PublishedImage(
        name=first.image.name,
        backend=first.image.backend,
        digest=digest,
        ref=first.image.ref,
        repo_digests=repo,
        pushed=merged(*(b.pushed for b in mine)),
        labels=(last.labels if last else first.image.labels),
        template=last.template if last else None,
        template_hash=last.template_hash if last else None,
        source_commit=last.source_commit if last else None,
    )


def _published_models(recs: list[BenchRecord], lm: LoadedMatrix | None) -> list[PublishedModel]:
    """run.json's models: one per model sha256 of the run, where the matrix (if any) puts it, how it is had."""
    specs = {m.name: m for m in lm.m.models} if lm else {}
    models = []
    for sha in dict.fromkeys(r.model.sha256 for r in recs):
        m = next(r.model for r in recs if r.model.sha256 == sha)
        spec = specs.get(m.name)
        models.append(
            PublishedModel(
                name=m.name,
                file=Path(m.path).name,
                sha256=sha,
                size_bytes=m.size_bytes,
                recorded_path=m.path,
                matrix_path=spec.path if spec and scrub.folder_relative(spec.path) else None,
                generate=spec.generate if spec else None,
                hf=spec.hf.model_dump(exclude_none=True) if spec and spec.hf else None,
                depth=d.model_dump() if (d := sweeps.recorded_sweep(recs, m.name)) else None,
            )
        )
    return models


def export_run(
    store: ResultStore, run_id: str, out: Path, lm: LoadedMatrix | None = None, *, host_paths: bool = False
) -> PublishedRun:
    """Write the published-run folder `out` (RUN_FILES). Refuses a non-empty folder that is not an export of
    this run, and an earlier export holding a symlink that points out of it. BadInput (exit 4), before
    anything is written, when a file it would copy is a link or not regular (`copied`). The host's folders are
    written relative to the project or results folder, or `~` (publish.scrub), unless `host_paths`
    (reproduce's own export of this project's run). Returns the run as written, but for its notes: as this
    host's terminal reads them (the folders unscrubbed, so the commands they print work here)."""
    out = Path(out)
    run_id = resultindex.full_run_id(store, run_id)  # a prefix of one stored run's id: that run
    if out.exists() and any(out.iterdir()):
        prev = contained(out, "run.json", what=f"--out {out}: run.json")
        try:
            same = prev.is_file() and read_run_json(prev).run_id == run_id
        except BadInput:
            same = False
        if not same:  # said before its links: `-o .` in the project is told this, not of .venv's python
            raise BadInput(
                f"{out} is not empty and is not an export of run {run_id}; choose an empty --out folder"
            )
        symlinks_inside(out, what=f"--out {out}", fix="export into an empty folder")
    recs = run_records(store, run_id)
    run, builds = describe_run(store, run_id, lm, recs)
    said = list(run.notes)  # the terminal's: its commands run on this host, with this host's folders
    if not host_paths:  # the host's folders are not published
        run, recs, builds = scrub.published(run, recs, builds, lm.root if lm else None, store.root)
    scrubbed_notes = len(run.notes)
    # checked before anything is written; a matrix given as a link: the file it was read from
    copies = folder_copy.copied(lm.root, lm.path.resolve()) if lm is not None else []
    out.mkdir(parents=True, exist_ok=True)
    for name, items in (("results.jsonl", recs), ("builds.jsonl", builds)):
        tmp = out / f".{name}.tmp"
        tmp.unlink(missing_ok=True)
        for item in items:
            append_jsonl(tmp, item)
        os.close(open_regular(tmp, os.O_WRONLY | os.O_CREAT))  # no record: an empty file, never via a link
        tmp.replace(out / name)
    for src, rel in copies:
        folder_copy.copy_regular(src, out / rel, out)
    if copies and not host_paths:  # a model's path in matrix.yaml too
        scrub.scrub_file(out / "matrix.yaml", lm.root if lm else None, store.root)
    if all(imported(im.digest) for im in run.images):  # an import's toolkit measured nothing: the one
        # exporting it is what reads it (`report --results .`; the toolkit is not on PyPI)
        run.toolkit_source = _toolkit_source(toolkit_source().get("commit", ""), out)
    else:
        commit = _measuring_commit(run)
        run.toolkit_source = _toolkit_source(commit or "", out)
        if run.toolkit_source is None and commit:  # said to the exporter, who can mend it
            run.notes.append(_no_source_note(commit))
        elif run.toolkit_source and (mark := dirty_mark(run.host.get("toolkit"))):
            run.notes.append(
                f"the run was measured by a checkout with uncommitted changes to the toolkit: {TOOLKIT_SOURCE} "
                f"holds commit {(commit or '')[:12]} without them, so a reproduction runs that commit's code"
                if mark == "-dirty"
                else f"git could not say whether the checkout that measured the run held uncommitted changes to "
                f"the toolkit: {TOOLKIT_SOURCE} holds commit {(commit or '')[:12]}, which may lack them"
            )
    write_json_atomic(out / "run.json", run.model_dump(mode="json"))
    readme = strip_controls(run_readme(run, recs))  # host strings: no escapes
    write_atomic(out / "README.md", readme.encode(), root=out)
    return run.model_copy(update={"notes": said + run.notes[scrubbed_notes:]})


def _toolkit_source(commit: str, out: Path) -> str | None:
    """Write TOOLKIT_SOURCE into `out`: `git archive` of the toolkit's pyproject.toml, README.md and
    toolkit/ at `commit` (the one the run's records name, host.toolkit.commit), from the checkout the
    toolkit runs from (host.info.TOOLKIT_ROOT), under a folder `toolkit-<commit[:12]>/`, as pip
    installs it. None (nothing written, an earlier one removed) where that cannot be: no commit
    recorded (an installed copy measured it), no git checkout here, or one without that commit (the
    run was measured elsewhere); the README then names the version and commit to install."""
    from toolkit.host.info import TOOLKIT_ROOT

    dest, tmp = out / TOOLKIT_SOURCE, out / f".{TOOLKIT_SOURCE}.tmp"
    dest.unlink(missing_ok=True)
    tmp.unlink(missing_ok=True)  # a link or FIFO left there is removed, never written through or waited on
    if not COMMIT_HEX.fullmatch(commit) or not (TOOLKIT_ROOT / ".git").exists():  # never an option
        return None
    prefix = f"toolkit-{commit[:12]}/"
    try:  # the archive on git's stdout (`--output=` is read from TOOLKIT_ROOT, -C: a relative --out missed)
        made = subprocess.run(
            ["git", "-C", str(TOOLKIT_ROOT), "archive", "--format=tar", f"--prefix={prefix}", commit]
            + ["pyproject.toml", "README.md", "toolkit"],
            capture_output=True,
            timeout=60,
            env=git_env(),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if made.returncode != 0:  # the commit is not in this checkout
        return None
    with os.fdopen(open_regular(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, root=out), "wb") as fo:
        fo.write(_with_commit(made.stdout, prefix, commit))
    tmp.replace(dest)
    return TOOLKIT_SOURCE


def _no_source_note(commit: str) -> str:
    """Why TOOLKIT_SOURCE was not written although the run names the toolkit `commit` that measured it,
    and how to include it (no path of this host: the note goes into the README too)."""
    from toolkit.host.info import TOOLKIT_ROOT

    why = (
        "this toolkit is no git checkout (an installed copy): export from a checkout holding that commit"
        if not (TOOLKIT_ROOT / ".git").exists()
        else "this toolkit's checkout lacks that commit (measured elsewhere): `git fetch` it there and export again"
    )
    return (
        f"no {TOOLKIT_SOURCE} (the toolkit's source at commit {commit[:12]}, which measured the run) in "
        f"this export: {why}; the README names the commit to install instead"
    )


SOURCE_COMMIT = "toolkit/host/_commit.py"
"""The module TOOLKIT_SOURCE adds to the archived source: `COMMIT = "<hex>"`, the commit it was archived
at, so a copy pip installed from it (no git checkout) still says which toolkit it is (host.info.
toolkit_source: `toolkit --version`, every record's host.toolkit)."""


def _with_commit(tar: bytes, prefix: str, commit: str) -> bytes:
    """git archive's `tar` (its files under `prefix`) with SOURCE_COMMIT added, gzipped: the same bytes
    for the same commit, as git's own tar.gz was (SOURCE_COMMIT dated as git dates the archive's files,
    the commit's time; no time in the gzip header): an export made again did not rewrite the archive
    it had written."""
    import gzip
    import io
    import tarfile

    body = f'"""The commit this source was archived at (toolkit export-run)."""\n\nCOMMIT = "{commit}"\n'.encode()
    info = tarfile.TarInfo(prefix + SOURCE_COMMIT)
    buf = io.BytesIO(tar)
    with tarfile.open(fileobj=buf, mode="a") as t:
        info.size, info.mode, info.mtime = len(body), 0o644, max((m.mtime for m in t.getmembers()), default=0)
        t.addfile(info, io.BytesIO(body))
    return gzip.compress(buf.getvalue(), mtime=0)


def run_readme(run: PublishedRun, records: list[BenchRecord]) -> str:
    """README.md of a published run: what was measured, on what, and how to reproduce it."""
    from toolkit.analysis import provenance

    lines = [f"# toolkit run {md_text(run.run_id)}", "", *_measured_lines(records)]  # a record's text
    lines += [
        "",
        f"Exported {run.exported} by toolkit {run.toolkit_version}{_measured_by(run)}.",
        "",
        "## Images (by digest)",
        "",
    ]
    for im in run.images:
        lines.append(
            f"- {code(im.name)} ({md_text(str(im.backend))}): "
            + (f"image ID {code(im.digest)}" if im.digest else "image ID not recorded")
            + ", "
            + ", ".join(provenance.build_words(mine := [r for r in records if r.image.digest == im.digest]))
            + provenance.canary_words(mine)
            + _records_words(mine)
        )  # the build it holds (commit, ROCm/Mesa version, toolkit) and its canary, as the report's image line
        lines += [
            f"  - built from: {md_text(b)}" for b in [provenance.built_from(mine)] if b
        ]  # its build line
        lines += [
            f"  - pull: {code('docker pull ' + rd)} (Podman: {code('podman pull ' + rd)})"
            + (
                " (a registry on the exporting host's loopback address: only that host can pull it)"
                if loopback(rd)
                else ""
            )
            for rd in engine.pullable_digests(im.repo_digests)
        ]
    lines += ["", "## Models", ""]
    for m in run.models:
        src = (
            f"generated (`{m.generate}`, deterministic)"
            if m.generate
            else f"Hugging Face {code(m.hf['repo'])} {code(m.hf.get('file', ''))}"
            if m.hf
            else "source not recorded"
        )
        sha = f"sha256 {code(m.sha256)}" if m.sha256 else "sha256 not recorded"
        file = code(m.file) if m.file else "file name not recorded"
        size = counted(m.size_bytes, "byte") if m.size_bytes > 0 else "size not recorded"  # a record's
        lines.append(f"- {code(m.name)}: {file}, {size}, {sha}, {src}")
    lines += _cases_lines(run) + ["", "## Results", ""] + _results_lines(records)
    lines += ["## Reproduce", "", *_reproduce_lines(run), ""]
    lines += [
        "With the toolkit installed: `toolkit report --results .` in this folder prints these tables again. "
        + (
            ""
            if all(imported(im.digest) for im in run.images)  # nothing to reproduce
            else f"After `toolkit reproduce .`, {code(f'toolkit report --results {REPRODUCED}')} shows the run it "
            f"measured and {code(f'toolkit compare {run.run_id} NEW_RUN --results . --against {REPRODUCED}')} "
            "compares this one (A) with it (B), in the order of its table (NEW_RUN: the run id it prints, whose closing "
            "lines give both commands). "
        )
        + f"From your own project, {code(f'toolkit compare YOUR_RUN {run.run_id} --against PATH/TO/THIS/FOLDER')} "
        "compares a run of yours (A) with this one (B).",
        "",
        "Files: "
        + ", ".join(f"`{f}`" for f in (*RUN_FILES, *([run.toolkit_source] if run.toolkit_source else [])))
        + ". Results reference images by image "
        "digest; `run.json` lists each digest's registry digests.",
        "",
    ]
    # a list: consecutive lines would run into one paragraph; names from records: no markup
    names = [*(i.name for i in run.images), *(m.name for m in run.models)]
    lines += [f"- Note: {md_prose(n, names)}" for n in run.notes]
    return "\n".join(lines) + "\n"


def _records_words(mine: list[BenchRecord]) -> str:
    """`; numbers from 6 records` (`, 1 failed` where some are): how many of the run's records an image's
    figures come from, as a report's column card says it."""
    failed = sum(r.status != "ok" for r in mine)
    return f"; numbers from {counted(len(mine) - failed, 'record')}" + (
        f", {failed} failed" if failed else ""
    )


def _cases_lines(run: PublishedRun) -> list[str]:
    """The README's Cases section: the llama-bench axes, each process's settings, the depth sweeps;
    their values as every markdown writer shows a name (md_line: an env value `https://x.example` or
    `~~x~~` links and styles nothing)."""
    lines: list[str] = []
    axes = md_line("; ".join(f"{k} {_words(v)}" for k, v in run.bench.items() if isinstance(v, list)))
    settings = md_line(
        ", ".join(
            f"{k} {_words(v)}" for k, v in run.bench.items() if v is not None and not isinstance(v, list)
        )
    )
    lines += ["", f"## Cases\n\nllama-bench axes (every combination is a test): {axes}."]
    lines += [f"\nSettings of each process: {settings}."] if settings else []
    for m in run.models:  # its tests are in the tables below (`@ dN` rows): say which process ran them
        if m.depth:
            sweep = "; ".join(
                f"{k} {_words(v)}"
                for k, v in m.depth.items()
                if k in ("n_depth", "n_prompt", "n_gen", "n_ubatch")
            )
            lines.append(
                f"\nDepth sweep of {code(m.name)} (a second llama-bench process, models[].depth): {sweep}."
            )
    return lines


def _results_lines(records: list[BenchRecord]) -> list[str]:
    """The README's result tables as `toolkit report` shows them (decode rows folded over ub), under the
    report's caveats (a tiny stand-in model's or a software GPU's smoke data, every number flagged:
    report.Shown's, one `> **caveat**:` line each, as the github report), then what their marks, flags
    and columns mean."""
    from toolkit.analysis import report, table_text, tables, verdict

    shown = report.Shown.of(records, tables.ReportOptions())
    lines = verdict.md_caveats(shown.caveats)
    folded, fold_note = shown.display  # as `toolkit report` shows them
    for t in folded:
        headers, body = table_text.table_rows(t, esc=md_cell)  # names from records: no markup
        lines += [
            f"### {t.title}",
            "",
            tabulate(body, headers=headers, tablefmt="github", disable_numparse=True),
            "",
        ]
    notes = table_text.table_notes(folded) + fold_note  # what †, the flags and the columns mean
    lines += [f"- {md_line(n)}" for n in notes] + ([""] if notes else [])
    return lines


def _measured_lines(records: list[BenchRecord]) -> list[str]:
    """What, when and on what the run's `records` were measured, as `toolkit report` says it
    (analysis.provenance: each model's name, file, size, type and sha256; the tests' own times in UTC, `not
    recorded` where an import carries none; each host's OS, kernel, CPU and the GPU its rows name), one
    markdown list item a line."""
    from toolkit.analysis import provenance

    p = provenance.provenance(records)
    said = [x for x in p.lines() if x.startswith(("model: ", "measured: ", "host: "))]
    if not any(x.startswith("measured: ") for x in said):
        said.insert(len([x for x in said if x.startswith("model: ")]), "measured: not recorded")
    return [f"- {md_text(x)}" for x in said]


def _reproduce_lines(run: PublishedRun) -> list[str]:
    """The README's way to reproduce `run`, as its images allow: none where every image is an import (no
    image ran the results here), `--rebuild` first where one was never pushed (a plain reproduce pulls
    by registry digest and would stop at it), else the pull and, as the other way, the rebuild."""
    if all(imported(im.digest) for im in run.images):
        read = [  # the toolkit that exported the folder reads it
            "",
            "```sh",
            _venv_line(run),
            f"pip install ./{run.toolkit_source}   # the toolkit that exported this folder, to read it",
            "```",
        ]
        return [
            "Not reproducible with the toolkit: these results were imported (`toolkit import`) from output "
            "measured outside it, so there is no image to pull, rebuild or re-run; the tables are the "
            "figures as that output gave them."
        ] + (read if run.toolkit_source else [])
    pulled = not needs_rebuild(run)
    install = f"{_venv_line(run)}\n{_install_line(run)}"  # one line of the list: the block's first two
    pull = "toolkit reproduce .                 # pulls by digest, checks model sha256, re-runs, compares"
    if pulled:
        rebuild = "toolkit reproduce . --rebuild       # or rebuild the images from matrix.yaml + Dockerfile.templates/"
        return ["```sh", install, pull, rebuild, "```"]
    return [
        "```sh",
        install,
        "toolkit reproduce . --rebuild       # builds the images from matrix.yaml + Dockerfile.templates/, "
        "checks model sha256, re-runs, compares",
        "```",
        "",
        "An image of this run is in no registry another host reaches (no `pull:` line above, or one only "
        "the exporting host can pull from), so `toolkit reproduce .` without `--rebuild` cannot pull it by "
        "digest; `--rebuild` compiles it (llama.cpp: minutes to tens of minutes).",
    ]


def _venv_line(run: PublishedRun) -> str:
    """The README's first install line: a venv outside the folder, named by the commit where known,
    activated. A fresh Debian 12/13 (the hosts the toolkit is proven on) refuses `pip install` into its
    own Python (PEP 668: "externally-managed-environment"); a venv inside the folder is refused by
    `toolkit reproduce .` (its python links out of the folder: load_run's symlinks_inside)."""
    venv = f"~/.venvs/toolkit-{_toolkit_commit(run) or run.toolkit_version}"
    return (
        f"python3 -m venv {venv} && . {venv}/bin/activate   # pip installs into a venv (PEP 668: Debian 12+, "
        "Ubuntu 23.04+; `apt install python3-venv` where absent), outside this folder"
    )


def _install_line(run: PublishedRun) -> str:
    """The README's line that installs the toolkit that measured `run`: its source in the folder
    (TOOLKIT_SOURCE), else a checkout of the commit to fetch (the toolkit is not on PyPI: `pip install
    toolkit` gets another project)."""
    commit = _toolkit_commit(run)
    if run.toolkit_source:
        return f"pip install ./{run.toolkit_source}   # the toolkit at commit {commit}, the one that measured this run"
    which = f"the toolkit at commit {commit} (the one that measured this run)" if commit else "the toolkit"
    return f"pip install -e /path/to/toolkit   # {which}, on a host with Docker or Podman"


def _measuring_commit(run: PublishedRun) -> str | None:
    """The measuring toolkit's git commit (40 or 64 hex) as bench recorded it (run.json host.toolkit.commit:
    host.info.toolkit_source), None where not recorded (an installed copy, an import) or not hex."""
    t = run.host.get("toolkit")
    c = t.get("commit") if isinstance(t, dict) else None
    return c if isinstance(c, str) and COMMIT_HEX.fullmatch(c) else None


def _toolkit_commit(run: PublishedRun) -> str | None:
    """The measuring commit as the README names it: 12 hex, `-dirty` where the checkout that measured
    held uncommitted changes (host.info.commit_words)."""
    return commit_words(run.host.get("toolkit"))


def _measured_by(run: PublishedRun) -> str:
    """`; measured by toolkit 0.1.0 (commit 0123456789ab)` where bench recorded the toolkit that measured
    the run (run.json host.toolkit), else nothing."""
    t = run.host.get("toolkit")
    version = t.get("version") if isinstance(t, dict) and isinstance(t.get("version"), str) else None
    commit = _toolkit_commit(run)
    if not commit:
        return ""
    said = " ".join(version.split())[:40] if version else "of unknown version"  # one line, a stranger's text
    return f"; measured by toolkit {said} (commit {commit})"


def needs_rebuild(run: PublishedRun, held: Callable[[str], bool] = lambda digest: False) -> bool:
    """Whether `toolkit reproduce` of `run` must `--rebuild`: an image that measured it (not an import)
    has no registry digest another host can pull (reachable_digests) and is not `held(digest)` (doctor's:
    this engine holds it, and reproduce runs it). The README's Reproduce block and doctor say so alike."""
    measured = [im for im in run.images if not imported(im.digest)]
    return any(not reachable_digests(im.repo_digests) and not held(im.digest) for im in measured)


def reachable_digests(repo_digests: list[str]) -> list[str]:
    """The image's registry references another host can pull (engine.pullable_digests less those on a
    loopback registry, loopback): what decides the README's way to reproduce and the never-pushed notes."""
    return [r for r in engine.pullable_digests(repo_digests) if not loopback(r)]


def loopback(ref: str) -> bool:
    """Whether image reference `ref` (`REGISTRY/NAME@sha256:...`) names a registry on a loopback address
    (`localhost:5000`, `127.0.0.1:32774`, `[::1]:5000`): one only the exporting host reaches."""
    host = ref.split("/", 1)[0].rsplit(":", 1)[0] if "/" in ref else ""
    return host in ("localhost", "[::1]") or host.startswith("127.")


def _words(v: object) -> str:
    """A matrix value as a reader of the README writes it, not as Python prints it: a list's items
    joined (`512, 2048`), a switch `on`/`off`, an empty mapping `none`, a mapping `K=V, ...`."""
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, list | tuple):
        return ", ".join(_words(x) for x in v) or "none"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_words(x)}" for k, x in v.items()) or "none"
    return str(v)


def field_problem(err: ValidationError) -> str:
    """`field.path: message (got excerpt)` of a pydantic error's first problem (never the whole input). A
    rule of a whole mapping (no field path: the axes' n_ubatch against n_batch) names its values in its
    message: the mapping is not repeated (a newcomer read `(top level): ... (got {'n_prompt': [512], ...`)."""
    first = err.errors()[0] if err.errors() else {"loc": (), "msg": str(err)}
    msg = str(first["msg"]).removeprefix("Value error, ")[:160]
    if not first.get("loc") and isinstance(first.get("input"), dict):
        return msg
    where = ".".join(str(x) for x in first.get("loc", ())) or "(top level)"
    got = repr(first.get("input"))
    got = got if len(got) <= 60 else got[:60] + "..."
    return f"{where}: {msg} (got {got})"


def read_run_json(path: Path) -> PublishedRun:
    """run.json of a published run folder as a PublishedRun; BadInput (exit 4) naming the file and
    the field when it is not JSON (the one safe parse, toolkit.core.jsonsafe) or not a run."""
    fix = "a published run folder's run.json is written by `toolkit export-run`; re-export or re-download it"
    try:
        with open(path, "rb") as fh:
            data = jsonsafe.load(fh)
    except OSError as err:
        raise FileSystemError.from_oserror(err, "reading a published run") from None
    except jsonsafe.JsonProblem as err:
        raise BadInput(f"{path}: {err}; {fix}") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: not a JSON object; {fix}")
    try:
        return PublishedRun.model_validate(data)
    except ValidationError as err:
        raise BadInput(f"{path}: {field_problem(err)}; {fix}") from None
