"""matrix.yaml `campaign:` --submit--> one Slurm job per (host, image, model) slice, each running `toolkit
bench` for its slice ON its node; --status--> each job's state, failed records for jobs that died without
results; --cancel--> scancel; --render-k8s--> Kubernetes Job manifests (not run here).

Slurm is driven with plain subprocess (`sbatch --parsable`, `scontrol show job -o ID`, scancel), as measured
on Debian's Slurm 22.05 (/work/shared/reference/slurm.md). Without slurmdbd Slurm forgets a job MinJobAge
seconds after it ended, so `status` keeps each final state in the campaign file. Jobs get `--signal=B:TERM@N`
and the job script `exec`s the toolkit, so a time limit or scancel stops the bench (which removes its
containers) rather than only its `docker run` client. Jobs on one engine share a job name and
`--dependency=singleton`. What a record carries, one writer per file and the rest: docs/campaign.md.

Layout under the shared results folder (one writer per file):

    results/campaigns/<id>.json                the campaign: slices, job ids, last known states
    results/campaigns/<id>/<n>.sbatch           the job script of slice n (sbatch it by hand to re-run)
    results/hosts/<key>/                        a ResultStore per host: only that host's jobs write here
        builds.jsonl, <digest12>/bench.jsonl    the pulled build's record, the job's records
        logs/campaign-<id>-<n>-<jobid>.out      Slurm's output file of the job
        slurm-<jobid>/bench.jsonl               the failed record `status` writes for a job that ended
                                                without results (written once, by status only)"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from toolkit.core import jsonsafe
from toolkit.core import registry as runners
from toolkit.core.errors import BadInput, BenchFailed, FileSystemError, ToolkitError
from toolkit.core.paths import contained
from toolkit.core.text import path_text, shell_word
from toolkit.core.types import utc_now
from toolkit.engine import api as engine
from toolkit.host.info import HOST_KEY_ENV
from toolkit.matrix.api import CampaignHost, CampaignSpec, ImageSpec, LoadedMatrix, ModelSpec
from toolkit.results.records import (
    NO_TEST,
    BenchRecord,
    BuildRecord,
    ImageRef,
    ModelRef,
    ResultStore,
    append_jsonl,
    write_json_atomic,
)

CAMPAIGN_SCHEMA_VERSION = 1
CAMPAIGN_FILE_LIMIT = 64 << 20  # a campaign state file: about 1 KB per slice
STATES = ("pending", "running", "done", "failed", "cancelled", "unknown")
"""A slice's state: pending/running (Slurm's), done (ended COMPLETED with at least one ok record), failed
(ended otherwise, or without an ok record), cancelled (scancel), unknown (Slurm no longer lists the job
and its end was never seen: MinJobAge passed between two `status` calls)."""
_PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
_RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESIZING", "STOPPED"}
# JobState values: Slurm's squeue(1) "JOB STATE CODES"
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}$")
"""A campaign id, a host key, a job id: each names a folder or a file (results/hosts/<key>/, run ids)."""


def _word(v: str | None, info) -> str | None:
    if v is not None and not _WORD.fullmatch(v):
        raise ValueError(
            f"{info.field_name} {v[:80]!r}: letters, digits and _ . : + - only (it names a folder and a file)"
        )
    return v


class SlurmError(ToolkitError):
    """sbatch/scontrol/scancel is missing or refused a request (exit 4: the cluster or the block is wrong)."""

    exit_code = 4


class PullFailed(BenchFailed):
    """A campaign job could not pull its image by digest, or got another image ID (exit 3)."""


class Slice(BaseModel):
    """One (host, image, model) of a campaign, and its Slurm job.

    `image_id`: the image ID bench measures (sha256:...); `pull`: the registry reference by digest the
    job pulls (REGISTRY/NAME@sha256:...); `build`: the build record (copied into the host's store);
    `script`: the job script; `output`: Slurm's output file (`%j` = job id); `job_id`: from sbatch;
    `state`: one of STATES; `slurm_state`, `exit_code` (`exit:signal`), `ran_on` (node), `elapsed`
    (Slurm's RunTime, [D-]HH:MM:SS): as scontrol last showed them; `records`: {ok, failed} records of
    the job's run; `failed_record`: the file `status` wrote the job's failed record to."""

    campaign: str
    index: int
    host: str
    node: str | None = None
    features: list[str] = Field(default_factory=list)
    engine: str
    image: str
    backend: str
    runner: str
    model: str
    image_id: str
    pull: str
    build: dict[str, Any]
    job_name: str
    script: str
    output: str
    job_id: str | None = None
    state: str = "unsubmitted"
    slurm_state: str | None = None
    exit_code: str | None = None
    ran_on: str | None = None
    elapsed: str | None = None
    reason: str | None = None
    records: dict[str, int] = Field(default_factory=dict)
    failed_record: str | None = None

    _names = field_validator("campaign", "host", "job_id")(_word)

    @property
    def run_id(self) -> str:
        """The bench run id of the job's records (and the label of its containers)."""
        return f"{self.campaign}-j{self.job_id}" if self.job_id else ""

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "cancelled", "unknown")


class Campaign(BaseModel):
    """results/campaigns/<id>.json: what was submitted, where, and what Slurm last said about it."""

    schema_version: int = CAMPAIGN_SCHEMA_VERSION
    id: str
    created: str
    matrix: str
    project: str
    results: str
    toolkit: list[str]
    spec: dict[str, Any]
    slices: list[Slice]

    _names = field_validator("id")(_word)

    @property
    def state_file(self) -> Path:
        return state_path(Path(self.results), self.id)

    def inside(self, rel: str | Path, what: str) -> Path:
        """`rel` under the campaign's results folder (core.paths.contained): the campaign file names the
        folders its jobs write to, and nothing it names may lead out of results/."""
        return contained(
            Path(self.results),
            rel,
            what=f"campaign {self.id}: {what}",
            fix="the campaign file was changed by hand: submit the campaign again",
        )

    def host_store(self, host: str) -> ResultStore:
        return ResultStore(self.inside(Path("hosts", host), "host"))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.slices:
            out[s.state] = out.get(s.state, 0) + 1
        return out


def state_path(results: Path, campaign_id: str) -> Path:
    """results/campaigns/<id>.json; BadInput for an id that would lead out of that folder."""
    return contained(
        Path(results) / "campaigns",
        f"{campaign_id}.json",
        what=f"campaign {campaign_id[:80]!r}",
        fix="give a campaign id (`toolkit campaign status` lists them) or the path of its .json file",
    )


def new_id() -> str:
    """`c` + UTC time + 4 hex digits, e.g. c20261130T204500Z-1a2b (a job name, a run id, a file name)."""
    return "c" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


# -------------------------------------------------------------------------------------------- plan


def spec_of(lm: LoadedMatrix) -> CampaignSpec:
    """The `campaign:` block; BadInput naming the file and the fix when there is none."""
    if lm.m.campaign is None:
        raise BadInput(
            f'{lm.path}: no `campaign:` block: add one with `hosts:` (docs/campaign.md, "Many hosts (Slurm)")'
        )
    return lm.m.campaign


def pushed_ref(store: ResultStore, build: BuildRecord, registry: str | None) -> str | None:
    """The registry reference by digest (REGISTRY/NAME@sha256:...) of `build`'s image ID: from every
    build record of that image ID in results/builds.jsonl (`toolkit push` appends one with
    `repo_digests`), preferring one under `registry`; None when it was never pushed."""
    refs = []
    for b in store.builds():
        if b.digest == build.digest:
            refs += [r for r in engine.pullable_digests(b.repo_digests) if r not in refs]
    if registry:
        mine = [r for r in refs if r.startswith(registry.rstrip("/") + "/")]
        return mine[-1] if mine else None
    return refs[-1] if refs else None


def _select(lm: LoadedMatrix, host: CampaignHost, i: int) -> tuple[list[ImageSpec], list[ModelSpec]]:
    try:
        return lm.select_images(host.images), lm.select_models(host.models)
    except BadInput as err:
        raise BadInput(f"{lm.path}: campaign.hosts[{i}] ({host.key}): {err}") from None


def default_toolkit() -> list[str]:
    """The command that runs the toolkit on the nodes: this Python with `-m toolkit` (the same install;
    on a cluster, a shared virtualenv or the same image on every node)."""
    return [sys.executable, "-m", "toolkit"]


def plan(lm: LoadedMatrix, store: ResultStore, *, campaign_id: str | None = None) -> Campaign:
    """The campaign of `lm`'s `campaign:` block, not submitted: one Slice per (host, image, model) whose
    runner takes the model's format. Each image is the build `toolkit bench` would measure now
    (build_choice.choose_build: the current render inputs) and must have been pushed: BadInput naming
    results/builds.jsonl and the fix (`toolkit push`) otherwise, so every host pulls the same bytes."""
    from toolkit.publish.push import registry_for

    spec = spec_of(lm)
    cid = campaign_id or new_id()
    results = store.root.resolve()
    registry = registry_for(lm, spec.registry, f"{lm.path}: campaign.registry")
    slices: list[Slice] = []
    refused: list[str] = []
    for i, host in enumerate(spec.hosts):
        images, models = _select(lm, host, i)
        for im in images:
            runner = runners.get(im.runner)
            usable = [m for m in models if im.runner in m.runners and m.format in runner.model_formats]
            if not usable:
                continue
            pulled = _pushed_build(lm, im, store, registry)
            if isinstance(pulled, str):
                refused.append(pulled)
                continue
            for m in usable:
                slices.append(_slice(cid, len(slices), spec, host, im, m, *pulled, results=results))
    if refused:
        raise BadInput(
            "campaign: images refused (jobs pull by registry digest so every host measures the same "
            "bytes): " + "; ".join(dict.fromkeys(refused))
        )
    if not slices:
        raise BadInput(
            f"{lm.path}: campaign: no (host, image, model) slice: no host's images have a model whose "
            "`runners` lists their runner"
        )
    return Campaign(
        id=cid,
        created=utc_now(),
        matrix=str(lm.path.resolve()),
        project=str(lm.root.resolve()),
        results=str(results),
        toolkit=spec.toolkit or default_toolkit(),
        spec=spec.model_dump(mode="json"),
        slices=slices,
    )


def _pushed_build(
    lm: LoadedMatrix, im: ImageSpec, store: ResultStore, registry: str | None
) -> tuple[BuildRecord, str] | str:
    """(the build `toolkit bench` would measure now, its registry reference by digest), else why the
    image is refused (no current build, or that build never pushed)."""
    from toolkit.bench.build_choice import choose_build
    from toolkit.bench.runners.base import BenchOptions
    from toolkit.publish.push import push_hint

    choice = choose_build(lm, im, store, BenchOptions())
    if choice.build is None:
        return f"{im.name}: {choice.reason}"
    ref = pushed_ref(store, choice.build, registry)
    if ref is None:
        where = f" to {registry}" if registry else ""
        return (
            f"{im.name} ({choice.build.digest[:19]}) has no pushed registry digest{where} in "
            f"{store.builds_file}: run {push_hint(im.name, registry, lm, matrix=lm.path, results=store.root)}"
        )
    return choice.build, ref


def _slice(
    cid: str,
    n: int,
    spec: CampaignSpec,
    host: CampaignHost,
    im: ImageSpec,
    m: ModelSpec,
    build: BuildRecord,
    ref: str,
    *,
    results: Path,
) -> Slice:
    """Slice `n` of campaign `cid`: `im` x `m` on `host`, its job named per engine (one job at a time
    on an engine) unless the campaign allows concurrent jobs."""
    eng = host.engine or host.key
    return Slice(
        campaign=cid,
        index=n,
        host=host.key,
        node=host.node,
        features=list(host.features),
        engine=eng,
        image=im.name,
        backend=im.backend,
        runner=im.runner,
        model=m.name,
        image_id=build.digest,
        pull=ref,
        build=build.model_dump(mode="json", exclude={"bench_inputs"}),
        job_name=f"tk-{cid}.{eng}" if not spec.allow_concurrent else f"tk-{cid}.{n}",
        script=str(results / "campaigns" / cid / f"{n}.sbatch"),
        output=str(results / "hosts" / host.key / "logs" / f"campaign-{cid}-{n}-%j.out"),
    )


def sbatch_directives(c: Campaign, s: Slice) -> tuple[list[str], list[str]]:
    """The sbatch options of a slice (written as #SBATCH lines in its script): (the toolkit's own, the
    campaign's `sbatch_args` as the user wrote them, which go after them)."""
    spec = CampaignSpec.model_validate(c.spec)
    out = [
        f"--job-name={s.job_name}",
        "--nodes=1",
        "--ntasks=1",
        f"--output={s.output}",
        f"--chdir={c.project}",
        f"--signal=B:TERM@{spec.signal_s}",
    ]
    gres = f"{spec.gres_type}:{spec.gpus}" if spec.gres_type else str(spec.gpus)
    given = (  # (option, whether the slice asks for it), in this order
        # one job per engine at a time: same name + user
        ("--dependency=singleton", not spec.allow_concurrent),
        (f"--partition={spec.partition}", spec.partition),
        (f"--nodelist={s.node}", s.node),
        (f"--constraint={'&'.join(s.features)}", s.features),
        (f"--gres=gpu:{gres}", spec.gpus),
        (f"--time={spec.time_limit}", spec.time_limit),
    )
    return out + [option for option, asked in given if asked], list(spec.sbatch_args)


def _sbatch_line(option: str, *, verbatim: bool = False) -> str:
    """`#SBATCH OPTION` as sbatch reads it back as one argument: sbatch splits a directive at white
    space, ends it at an unquoted `#` and takes `"` and `\\` as quote and escape, so an option holding
    any of them is written quoted (a project in `my proj` failed at sbatch, `Invalid directive found in
    batch script: proj`; one in `run#2` sent the job's output to `run`). `verbatim` (sbatch_args, the
    user's own sbatch text): as written. BadInput for a line break or other control character: the line
    would end there and the rest run as a shell command on the node (after the #SBATCH block, so the
    directives below it were dropped too)."""
    if any(not ch.isprintable() for ch in option):
        raise BadInput(
            f"sbatch option '{path_text(option)}' holds a line break or control character, which no "
            "#SBATCH line can carry: rename the folder (or fix campaign.sbatch_args)"
        )
    if verbatim or not re.search(r'[\s#"\\]', option):
        return f"#SBATCH {option}"
    return '#SBATCH "' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'


def job_script(c: Campaign, s: Slice) -> str:
    """The batch script of a slice: #SBATCH options, the host key, then `exec` of the toolkit's job step
    (so SIGTERM from Slurm reaches the toolkit, which removes its containers). BadInput for a path or
    option no #SBATCH line can carry (_sbatch_line)."""
    lines = [
        "#!/bin/bash",
        f"# toolkit campaign {c.id}, slice {s.index}: {s.image} x {s.model} on host {s.host}",
        f"# Pulls {path_text(s.pull)} (image ID {s.image_id}), then runs `toolkit bench` for this slice,",
        f"# writing only under {path_text(Path(c.results) / 'hosts' / s.host)}/. Re-run by hand: sbatch "
        + shell_word(str(s.script)),
    ]
    own, users = sbatch_directives(c, s)
    lines += [_sbatch_line(d) for d in own] + [_sbatch_line(d, verbatim=True) for d in users]
    lines += [
        f"export {HOST_KEY_ENV}={shlex.quote(s.host)}",
        f"exec {shlex.join([*c.toolkit, 'campaign', 'job', c.state_file.as_posix(), str(s.index)])}",
        "",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- slurm


def _slurm(argv: list[str], *, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a Slurm client command; SlurmError naming it when it is missing or (with check) fails."""
    if shutil.which(argv[0]) is None:
        raise SlurmError(
            f"{argv[0]} not found: run this on a Slurm login node (slurm-client), or start the "
            "test cluster with scripts/slurm-cluster.sh and export its SLURM_CONF"
        )
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"{shlex.join(argv)}: no answer in {timeout:.0f} s (is slurmctld up? `sinfo`)"
        ) from None
    if check and out.returncode != 0:
        raise SlurmError(
            f"{shlex.join(argv)} exited {out.returncode}: {(out.stderr or out.stdout).strip()[:400]}"
        )
    return out


def save(c: Campaign) -> Path:
    """Write the campaign file (temp file + rename: readers never see half of it)."""
    write_json_atomic(c.state_file, c.model_dump(mode="json"))
    return c.state_file


def load(results: Path, campaign: str) -> Campaign:
    """A campaign by id (or by the path of its file); BadInput listing the campaigns there otherwise."""
    p = Path(campaign)
    path = p if p.suffix == ".json" and p.is_file() else state_path(results, campaign)
    if not path.is_file():
        known = sorted(x.stem for x in (results / "campaigns").glob("*.json"))
        raise BadInput(
            f"no campaign {campaign!r} in {results / 'campaigns'} (campaigns: {', '.join(known) or 'none'})"
        )
    return read_campaign(path)


def read_campaign(path: Path) -> Campaign:
    """A campaign state file (the one safe parse, toolkit.core.jsonsafe); BadInput naming the file and
    the first field that is wrong when it is not JSON or not a campaign of this toolkit."""
    try:
        with open(path, "rb") as fh:
            data = jsonsafe.load(fh, limit=CAMPAIGN_FILE_LIMIT)
    except OSError as err:
        raise FileSystemError.from_oserror(err, "reading a campaign") from None
    except jsonsafe.JsonProblem as err:
        raise BadInput(f"{path}: not a campaign file of this toolkit ({err})") from None
    try:
        return Campaign.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0] if err.errors() else {"loc": (), "msg": str(err)}
        where = ".".join(str(x) for x in first.get("loc", ())) or "(top level)"
        raise BadInput(f"{path}: not a campaign file of this toolkit ({where}: {first['msg']})") from None


def latest(results: Path) -> str:
    """The id of the newest campaign under results/campaigns/ (BadInput when there is none)."""
    files = sorted((results / "campaigns").glob("*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise BadInput(f"no campaign in {results / 'campaigns'}: submit one with `toolkit campaign submit`")
    return files[-1].stem


def submit(
    lm: LoadedMatrix,
    store: ResultStore,
    *,
    dry_run: bool = False,
    note: Callable[[str], None] = lambda text: None,
) -> Campaign:
    """Plan the campaign, write its job scripts and sbatch one job per slice (the campaign file is saved
    after each submission, so a failure half way leaves the submitted jobs recorded). Tiny stand-in
    models are generated here, once, not by each job. dry_run: write the scripts, submit nothing."""
    from toolkit.models.tiny import ensure_model_file

    c = plan(lm, store)
    for m in {s.model for s in c.slices}:
        spec = next(x for x in lm.m.models if x.name == m)
        if spec.generate and not dry_run:
            ensure_model_file(
                lm.resolve(spec.path, what=f"models[{spec.name}].path"), spec.generate, named=lm.model_paths()
            )
    scripts = [job_script(c, s) for s in c.slices]  # each refused before any is written
    for s, script in zip(c.slices, scripts, strict=True):
        Path(s.script).parent.mkdir(parents=True, exist_ok=True)
        Path(s.output).parent.mkdir(parents=True, exist_ok=True)
        Path(s.script).write_text(script)
    if dry_run:
        return c
    save(c)
    for s in c.slices:
        out = _slurm(["sbatch", "--parsable", s.script])
        s.job_id = out.stdout.strip().split(";")[0]
        s.state = "pending"
        save(c)
        note(f"slice {s.index}: {s.image} x {s.model} on {s.host}: job {s.job_id}")
    return c


def scontrol_job(job_id: str) -> dict[str, str] | None:
    """`scontrol show job -o ID` as {field: value}; None when Slurm no longer lists the job."""
    out = _slurm(["scontrol", "show", "job", "-o", job_id], check=False)
    if out.returncode != 0 or not out.stdout.strip():  # "slurm_load_jobs error: Invalid job id specified"
        return None
    return dict(re.findall(r"(\S+?)=(\S*)", out.stdout))


def _run_records(c: Campaign, s: Slice) -> list[BenchRecord]:
    """The slice's records in its host's store, by the run's indexed id (not the host's whole history)."""
    from toolkit.results import index as resultindex

    return resultindex.run_records(c.host_store(s.host), s.run_id)


def _tail(path: str, n: int = 4) -> str:
    try:
        lines = [x.strip() for x in Path(path).read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])[-600:]


def failed_record(c: Campaign, s: Slice) -> BenchRecord:
    """The record of a job that ended without results, from what Slurm says (JobState, ExitCode,
    NodeList, Reason) and the last lines of its output file."""
    lm_model = _model_ref(c, s)
    state = s.slurm_state or "?"
    output = s.output.replace("%j", s.job_id or "")
    # read only inside results/ (plan puts it in results/hosts/<key>/logs/): relpath turns a path
    # elsewhere into a '../' one, which contained() refuses before anything is read
    tail = _tail(str(c.inside(os.path.relpath(output, c.results), "slices[].output")))
    error = (
        f"Slurm job {s.job_id} ended {state} on {s.ran_on or '?'} with exit code {s.exit_code or '?'} "
        f"and no results"
        + (f" (reason {s.reason})" if s.reason and s.reason != "None" else "")
        + (f"; its output ({output}) ends: {tail}" if tail else f"; no output at {output}")
    )
    build = BuildRecord.model_validate(s.build)
    return BenchRecord(
        run_id=s.run_id,
        created=utc_now(),
        status="failed",
        error=error,
        runner=s.runner,
        method="campaign-job",
        image=ImageRef(
            name=s.image,
            ref=s.pull,
            digest=s.image_id,
            backend=s.backend,
            repo_digests=[s.pull],
            labels=build.labels,
            source_origin=build.source_origin,
        ),
        model=lm_model,
        test=NO_TEST,
        axis="prefill",
        host={
            "key": s.host,
            "slurm": {
                "job_id": s.job_id,
                "node": s.ran_on,
                "gpu_index": None,
                "state": state,
                "exit_code": s.exit_code,
                "reason": s.reason,
            },
        },
        campaign={"id": c.id, "slice": s.index},
        log_file=output,
    )


def _model_ref(c: Campaign, s: Slice) -> ModelRef:
    from toolkit.matrix.api import load_matrix

    try:
        lm = load_matrix(c.matrix)
        m = next(x for x in lm.m.models if x.name == s.model)
        path = lm.resolve(m.path, what=f"models[{m.name}].path")
        size = path.stat().st_size if path.is_file() else 0
        return ModelRef(name=m.name, path=str(path), sha256=m.sha256 or "", size_bytes=size)
    except (BadInput, OSError, StopIteration):
        return ModelRef(name=s.model, path="", sha256="", size_bytes=0)


def _write_failed(c: Campaign, s: Slice) -> str:
    """Write the failed record once: results/hosts/<key>/slurm-<jobid>/bench.jsonl, created exclusively
    (a second `status` finds it and writes nothing)."""
    path = c.inside(Path("hosts", s.host, f"slurm-{s.job_id}", "bench.jsonl"), "slices[].host")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return str(path)
    append_jsonl(path, failed_record(c, s))
    return str(path)


def refresh(c: Campaign) -> Campaign:
    """Ask Slurm about every unfinished job, count each job's records, write the failed record of a job
    that ended without an ok record, and save the campaign file. Finished slices are not asked again."""
    for s in c.slices:
        if s.job_id is None or s.finished:
            continue
        job = scontrol_job(s.job_id)
        if job is None:
            s.state, s.reason = (
                "unknown",
                "Slurm no longer lists the job (MinJobAge passed) and its end was not seen",
            )
            continue
        s.slurm_state = job.get("JobState")
        s.exit_code = job.get("ExitCode")
        node = job.get("NodeList") or job.get("BatchHost")
        s.ran_on = node if node and node != "(null)" else s.ran_on
        s.elapsed = job.get("RunTime")
        s.reason = job.get("Reason")
        recs = _run_records(c, s)
        s.records = {"ok": sum(r.status == "ok" for r in recs), "failed": sum(r.status != "ok" for r in recs)}
        if s.slurm_state in _PENDING:
            s.state = "pending"
        elif s.slurm_state in _RUNNING:
            s.state = "running"
        else:
            s.state = (
                "done"
                if s.slurm_state == "COMPLETED" and s.records["ok"] and not s.records["failed"]
                else "cancelled"
                if (s.slurm_state or "").startswith("CANCELLED")
                else "failed"
            )
            if not recs:
                s.failed_record = _write_failed(c, s)
                s.records = {"ok": 0, "failed": 1}
    save(c)
    return c


def cancel(c: Campaign, *, slices: list[int] | None = None, dry_run: bool = False) -> list[str]:
    """scancel every unfinished job of the campaign (or of the given slice indexes); returns their ids.
    Each job's toolkit gets SIGTERM and removes its containers (Slurm sends SIGKILL KillWait seconds later).
    `dry_run`: the ids only, nothing cancelled."""
    ids = [
        s.job_id for s in c.slices if s.job_id and not s.finished and (slices is None or s.index in slices)
    ]
    if ids and not dry_run:
        _slurm(["scancel", *ids])
    return ids


# ------------------------------------------------------------------------------------ the job step


def run_job(state_file: Path, index: int, events: Callable[..., None] = lambda *a, **k: None) -> list:
    """What runs ON the node for slice `index` of the campaign in `state_file` (the job script `exec`s
    `toolkit campaign job FILE N`): pull the image by registry digest and check it is the recorded image
    ID (PullFailed otherwise), copy its build record into the host's store, then bench.run_bench the
    one (image, model) pinned to that image ID, strict, into results/hosts/<key>/ with run id
    `<campaign>-j<job id>`. Returns bench's outcomes."""
    from toolkit.bench import run as bench
    from toolkit.bench.runners.base import BenchOptions
    from toolkit.matrix.api import load_matrix

    c = read_campaign(Path(state_file))
    if not 0 <= index < len(c.slices):
        raise BadInput(f"{state_file}: no slice {index} (it has {len(c.slices)})")
    s = c.slices[index]
    s.job_id = os.environ.get("SLURM_JOB_ID") or s.job_id or "local"
    os.environ.setdefault(HOST_KEY_ENV, s.host)  # the job script exports it; a run by hand gets it too
    lm = load_matrix(c.matrix)
    spec = lm.m.image(s.image)
    model = lm.select_models([s.model])[0]
    out = engine.pull_image(s.pull)
    if not out.ok:
        raise PullFailed(f"campaign {c.id} slice {index}: docker pull {s.pull} failed: {out.error}")
    info = engine.inspect_image(s.pull)
    if info is None or info.id != s.image_id:
        raise PullFailed(
            f"campaign {c.id} slice {index}: {s.pull} is image ID {info.id if info else '?'}, the "
            f"campaign measures {s.image_id}: not the same image"
        )
    events("note", text=f"pulled {s.pull} in {out.seconds:.1f} s: image ID {info.id[:19]} as recorded")
    store = c.host_store(s.host)
    if not any(b.digest == s.image_id for b in store.builds()):
        store.add_build(BuildRecord.model_validate(s.build))
    spec_c = CampaignSpec.model_validate(c.spec)
    allow = spec_c.allow_concurrent or os.environ.get("TOOLKIT_ALLOW_CONCURRENT", "") not in (
        "",
        "0",
        "false",
    )
    opts = BenchOptions(pinned={s.image: s.image_id}, strict=True, allow_concurrent=allow, run_id=s.run_id)
    return bench.run_bench(lm, [spec], [model], store, opts, events)


# --------------------------------------------------------------------------------------- kubernetes


def write_k8s(lm: LoadedMatrix, store: ResultStore, out: Path) -> tuple[list[Path], list[str]]:
    """Plan the campaign (the same refusals as submit: pushed digests only) and write one YAML file per
    Job to `out`; returns (files, notes)."""
    import yaml

    from toolkit.campaign.k8s import k8s_manifests

    c = plan(lm, store)
    docs, notes = k8s_manifests(lm, c)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for d in docs:
        p = out / f"{d['metadata']['name']}.yaml"
        p.write_text(
            f'# toolkit campaign {c.id}: render only, not run here (docs/campaign.md, "Many hosts (Slurm)")\n'
            + yaml.safe_dump(d, sort_keys=False)
        )
        files.append(p)
    return files, notes
