"""Images and builds: inspect, base images (local, from setup-host.sh's archives, or pulled), the
`docker buildx build` / `podman build` argument list and its run (a subprocess: the docker SDK drives
only the classic builder), the built image's ID, the engine's builders."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.core import jsonsafe
from toolkit.core.errors import BadInput
from toolkit.core.types import is_image_id
from toolkit.engine.choice import cli, client, is_podman
from toolkit.engine.containers import _retrying, _StartFlake, is_runtime_flake


@dataclass
class ImageInfo:
    """`docker image inspect` essentials: id = image digest (sha256:...), size in bytes."""

    id: str
    size: int
    labels: dict[str, str]
    repo_digests: list[str]
    tags: list[str]
    env: list[str] = field(default_factory=list)  # Config.Env: the image's ENV as NAME=value


def inspect_image(ref: str) -> ImageInfo | None:
    """Inspect a local image by tag or ID; None when absent."""
    from docker.errors import ImageNotFound

    try:
        img = client().images.get(ref)
    except ImageNotFound:
        return None
    attrs = img.attrs
    return ImageInfo(
        id=attrs["Id"],
        size=int(attrs.get("Size") or 0),
        labels=dict((attrs.get("Config") or {}).get("Labels") or {}),
        repo_digests=list(attrs.get("RepoDigests") or []),
        tags=list(attrs.get("RepoTags") or []),
        env=list((attrs.get("Config") or {}).get("Env") or []),
    )


BASE_ARCHIVES = Path("/var/cache/toolkit/base")
"""Where scripts/setup-host.sh keeps base images as docker-archives (`debian_trixie-slim.tar`), so a
Podman store that lacks one (each rootless user has their own) loads it without a registry."""


def base_archive(ref: str) -> Path:
    """The archive scripts/setup-host.sh keeps for base image `ref` (`debian:trixie-slim` ->
    BASE_ARCHIVES/debian_trixie-slim.tar)."""
    return BASE_ARCHIVES / (ref.replace("/", "_").replace(":", "_") + ".tar")


def ensure_base_image(ref: str, *, pull_timeout: float = 120) -> str | None:
    """Make `ref` available locally: present, or (Podman) loaded from base_archive(ref), or pulled.
    Returns None, or the reason it is not."""
    if inspect_image(ref) is not None:
        return None
    archive = base_archive(ref)
    loaded = ""  # why loading the kept archive failed, said before the pull's reason
    if is_podman() and archive.is_file():
        try:
            proc = subprocess.run(
                ["podman", "load", "-q", "-i", str(archive)], capture_output=True, text=True, timeout=600
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"base image {ref} is not local and loading {archive} failed ({exc})"
        if proc.returncode == 0 and inspect_image(ref) is not None:
            return None
        why = _subid_advice(proc.stderr) or (proc.stderr.strip().splitlines() or ["no error text"])[-1][:200]
        loaded = f": loading {archive} failed ({why}), and it"
    try:
        proc = subprocess.run(
            [cli(), "pull", "-q", ref], capture_output=True, text=True, timeout=pull_timeout
        )
    except subprocess.TimeoutExpired:
        return f"base image {ref} is not local and pulling it timed out after {pull_timeout:.0f} s"
    if proc.returncode == 0:
        return None
    err = _subid_advice(proc.stderr) or (proc.stderr.strip().splitlines() or ["unknown error"])[-1][:160]
    hint = (
        f"; `scripts/setup-host.sh --podman` keeps it in {archive} for Podman stores"
        if is_podman() and not loaded
        else ""
    )
    return f"base image {ref} is not local{loaded or ' and'} cannot be pulled ({err}){hint}"


def _subid_advice(stderr: str) -> str | None:
    """A rootless engine's "insufficient UIDs or GIDs" error in words with its fix; None for others."""
    if "insufficient UIDs" not in stderr:  # Podman: "potentially insufficient UIDs or GIDs ..."
        return None
    return (
        "insufficient UIDs or GIDs in this user's namespace: /etc/subuid and /etc/subgid need a range of "
        "65536 IDs for this user: `sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 "
        "$USER && podman system migrate`, or run scripts/setup-host.sh --podman"
    )


def buildx_command(
    context: Path,
    *,
    tags: list[str],
    labels: dict[str, str],
    build_args: dict[str, str],
    metadata_file: Path | None = None,
    no_cache: bool = False,
    secrets: list[str] | None = None,
    push: bool = False,
    attest: bool = False,
    network: str = "host",
) -> list[str]:
    """The `docker buildx build` argument list (no `--pull`: bases may be local-only images); on
    Podman the `podman build` one: the same Dockerfile (buildah runs RUN --mount=type=cache and
    type=secret), `--format docker` (the OCI format drops SHELL, which the templates use), `--layers`
    (step cache), and `--iidfile` in place of `--metadata-file` (read by `built_image_id`). Pushing
    and attestations are buildx's: on Podman they raise BadInput. `network`: `host` (the project's own
    builds: RUN steps then need no docker0 bridge, which some CI sandboxes remove) or `isolated` (a
    build of someone else's templates, `reproduce --rebuild`: its own network namespace, so a RUN step
    cannot reach a service on this host's 127.0.0.1)."""
    if network not in ("host", "isolated"):
        raise ValueError(f"buildx_command network {network!r}: host or isolated")
    if is_podman():
        if push or attest:
            raise BadInput(
                "pushing from the build and attestations (SBOM, provenance) need Docker's buildx: run this "
                "with `toolkit --engine docker`"
            )
        cmd = ["podman", "build", "--format", "docker", "--layers", "--network"]
        cmd.append("host" if network == "host" else "private")
    else:
        cmd = ["docker", "buildx", "build", "--progress=plain", "--network"]
        cmd.append("host" if network == "host" else "default")
        cmd += ["--push"] if push else ["--load"]
    for t in tags:
        cmd += ["-t", t]
    for k, v in sorted(labels.items()):
        cmd += ["--label", f"{k}={v}"]
    for k, v in sorted(build_args.items()):
        cmd += ["--build-arg", f"{k}={v}"]
    for s in secrets or []:
        cmd += ["--secret", s]
    if metadata_file:
        cmd += ["--iidfile" if cmd[0] == "podman" else "--metadata-file", str(metadata_file)]
    if no_cache:
        cmd.append("--no-cache")
    if attest:
        cmd += ["--sbom=true", "--provenance=mode=max"]
    return cmd + [str(context)]


@dataclass
class BuildOutcome:
    """Result of one buildx run: seconds of wall time, steps total and served from cache."""

    ok: bool
    seconds: float
    steps: int
    cached_steps: int
    log_path: Path
    returncode: int


def run_buildx(
    cmd: list[str], *, log_path: Path, on_line: Callable[[str], None] | None = None, timeout: float = 4 * 3600
) -> BuildOutcome:
    """Run a buildx command, streaming its plain progress to `on_line` and to `log_path`. A `podman
    build` command's output is kept as is in the log and handed to `on_line` in BuildKit's plain
    progress shape (`PodmanSteps`), so one reader counts and shows the steps of both. A build that failed
    because a RUN step's container did not start for the OCI runtime's own reason (error_cause) is run
    again as a container's start is (containers._retrying: START_TRIES in all; BuildKit's and buildah's
    cache keep the steps done), each try's output added to the log and `on_line` told `BUILD_RETRY ...`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("")
    t0 = time.monotonic()

    def once() -> BuildOutcome:
        out, why = _build_once(cmd, log_path, on_line, timeout, t0)
        if why:
            raise _StartFlake(out, why)
        return out

    return _retrying(once, lambda why: on_line(f"{BUILD_RETRY} {why}") if on_line else None)


BUILD_RETRY = "retrying the build,"
"""How run_buildx's line to `on_line` before a build's next try begins (BuildSteps shows it and starts over)."""


def _build_once(
    cmd: list[str], log_path: Path, on_line: Callable[[str], None] | None, timeout: float, t0: float
) -> tuple[BuildOutcome, str | None]:
    """One run of build command `cmd` (run_buildx), its output added to `log_path`: its outcome (seconds since
    `t0`) and, where it failed because a step's container did not start, the cause its last error line gives
    (error_cause: the engine's own, after any a step printed)."""
    steps: set[str] = set()
    cached: set[str] = set()
    cause = None
    with log_path.open("a", buffering=1) as log:  # line-buffered: the kept log is complete even after a kill
        log.write("$ " + shlex.join(cmd) + "\n")
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_build_env(cmd),
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        podman = _podman_steps(cmd) if cmd[0] == "podman" else None
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                log.write(raw)
                cause = cause if (said := error_cause(raw)) is None else said
                for line in podman(raw.rstrip("\n")) if podman else [raw]:
                    _count_step(line, steps, cached)
                    if on_line:
                        on_line(line.rstrip("\n"))
            rc = proc.wait()
        except KeyboardInterrupt:
            _stop_build(proc)
            raise
        finally:
            timer.cancel()
    out = BuildOutcome(rc == 0, time.monotonic() - t0, len(steps), len(cached & steps), log_path, rc)
    return out, cause[:300] if rc != 0 and cause and is_runtime_flake(cause) else None


_QUOTED = re.compile(r'"(?:[^"\\\n]|\\.)*"')
"""A Go-quoted text (`%q`): the command a failed step's error line quotes."""


def error_cause(line: str) -> str | None:
    """The cause in a build's error line (BuildKit's `#7 ERROR: process "/bin/sh -c ..." did not complete
    successfully: CAUSE`, `ERROR: failed to solve: ...`; buildah's `Error: building at STEP "RUN ...":
    CAUSE`), None for any other line. The step's quoted command is left out (a RUN step whose command holds
    runc's words fails for its own reason): BuildKit's is Go-quoted, buildah's is not (its own `"` unescaped:
    the cause is after the last `": `); so is BuildKit's step output (`#7 0.123 ...`). A step's output that
    reads as an error line (buildah's, unprefixed) comes before the engine's own, the last."""
    text = line.strip()
    head = text.split(" ", 1)
    if head[0].startswith("#") and head[0][1:].isdigit() and len(head) > 1:
        text = head[1]
    if not text[:6].lower().startswith("error"):
        return None
    return _QUOTED.sub('""', text).rpartition('": ')[2]


BUILD_STOP_GRACE_S = 30.0
"""Seconds an interrupted build command gets to exit after SIGTERM before it is killed."""


def _stop_build(proc: subprocess.Popen[str]) -> None:
    """Stop the build command of an interrupted run (Ctrl-C, SIGTERM, SIGHUP: KeyboardInterrupt): SIGTERM,
    then SIGKILL where it has not exited within BUILD_STOP_GRACE_S. The caller re-raises the interrupt,
    so the run exits 130 (129 for SIGHUP); a buildx client still cancelling a compile after 30 s (Docker
    20.10 on a busy fresh Debian 12, newcomer 37) raised TimeoutExpired in its place: exit 1, a traceback."""
    proc.terminate()
    try:
        proc.wait(timeout=BUILD_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _build_env(cmd: list[str]) -> dict[str, str]:
    """The environment of a build. A rootless `podman build` gets its own TMPDIR
    (/var/tmp/toolkit-buildah-<uid>): buildah 1.28 (Debian 12's Podman 4.3) keeps RUN
    --mount=type=cache folders in $TMPDIR/buildah-cache for every user alike, so after a rootful
    build a rootless one fails with `open /var/tmp/buildah-cache/<id>/buildah-cache-lockfile:
    permission denied`."""
    env = dict(os.environ, DOCKER_BUILDKIT="1")
    if cmd[0] == "podman" and os.geteuid() != 0:
        tmp = Path(f"/var/tmp/toolkit-buildah-{os.geteuid()}")
        tmp.mkdir(mode=0o700, exist_ok=True)
        env["TMPDIR"] = str(tmp)
    return env


def _count_step(line: str, steps: set[str], cached: set[str]) -> None:
    """Note a BuildKit plain-progress line's step (`#N [stage i/n] RUN|COPY|...`; FROM and [internal]
    never say CACHED) and whether it was served from cache (`#N CACHED`)."""
    parts = line.split(" ", 2)
    if len(parts) >= 2 and parts[0].startswith("#") and parts[0][1:].isdigit():
        rest = parts[2] if len(parts) > 2 else ""
        if parts[1].startswith("[") and parts[1] != "[internal]" and " FROM " not in f" {rest}":
            steps.add(parts[0])
        if parts[1].strip() == "CACHED":
            cached.add(parts[0])


_PODMAN_STEP = re.compile(r"^(?:\[(\d+)/(\d+)\] )?STEP (\d+)/(\d+): (.*)$")


class PodmanSteps:
    """`podman build` output (buildah: `[s/S] STEP i/n: INSTRUCTION`, the step's output, then
    `--> Using cache ID` and/or `--> ID` when it is done) as BuildKit plain-progress lines: `#N
    [stage-s i/n] INSTRUCTION`, `#N 1.234 <output>` (seconds since the step began), `#N CACHED`,
    `#N DONE 12.3s`. Call it with each line;
    it returns the lines to pass on (none, one or two)."""

    METADATA = frozenset(
        {"ARG", "CMD", "ENTRYPOINT", "ENV", "EXPOSE", "LABEL", "SHELL", "STOPSIGNAL", "USER"}
    )
    """Instructions that only change the image config: BuildKit shows them as no step; buildah does
    (and turns each --label into a LABEL step), so they are left out, as BuildKit leaves them."""

    def __init__(self, totals: list[int] | None = None) -> None:
        self.n = 0
        self.started = 0.0
        self.done = True
        self.metadata = False
        self.totals = totals  # per stage, the steps shown (dockerfile_steps); None: buildah's numbers
        self.shown: dict[str, int] = {}  # stage -> steps shown so far

    def __call__(self, line: str) -> list[str]:
        m = _PODMAN_STEP.match(line)
        if m:
            out = self._finish()
            self.metadata = m.group(5).split(" ", 1)[0].upper() in self.METADATA
            if self.metadata:
                return out
            self.n += 1
            self.started, self.done = time.monotonic(), False
            stage = f"stage-{m.group(1)} " if m.group(1) else ""
            return [
                *out,
                f"#{self.n} [{stage}{self._place(m.group(1), m.group(2), m.group(3), m.group(4))}] {m.group(5)}",
            ]
        if self.metadata and line.startswith("--> "):
            return []
        if not self.n:
            return [line]
        if line.startswith("--> Using cache "):
            self.done = True
            return [f"#{self.n} CACHED"]
        if line.startswith("--> ") or re.match(r"(\[\d+/\d+\] )?COMMIT ", line):
            return self._finish()
        return [f"#{self.n} {time.monotonic() - self.started:.3f} {line}"]  # as BuildKit: elapsed s first

    def _place(self, stage: str | None, stages: str | None, i: str, n: str) -> str:
        """`i/n` of a shown step in its stage: counted among the shown steps (as BuildKit counts, no
        config-only step, no `--label` step) where the Dockerfile's totals are known and its stages
        agree with buildah's, else buildah's own numbers (which count the hidden steps too)."""
        k = int(stage or 1)
        if not self.totals or len(self.totals) != int(stages or 1) or k > len(self.totals):
            return f"{i}/{n}"
        self.shown[str(k)] = self.shown.get(str(k), 0) + 1
        return f"{min(self.shown[str(k)], self.totals[k - 1])}/{self.totals[k - 1]}"

    def _finish(self) -> list[str]:
        if self.done or not self.n:
            return []
        self.done = True
        return [f"#{self.n} DONE {time.monotonic() - self.started:.1f}s"]


def dockerfile_steps(text: str) -> list[int]:
    """Per stage of a Dockerfile, the steps BuildKit shows and counts (`[stage i/n]`): FROM and every
    instruction that is not config-only (PodmanSteps.METADATA: ARG, ENV, LABEL, ...). Continuation
    lines (a trailing backslash) are joined, comments and blank lines skipped, parser directives and
    instructions before the first FROM not counted."""
    totals: list[int] = []
    joined, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):  # as Docker: inside a continued instruction too
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    for line in joined:
        word = line.split(" ", 1)[0].upper()
        if word == "FROM":
            totals.append(1)
        elif totals and word not in PodmanSteps.METADATA:
            totals[-1] += 1
    return totals


def _podman_steps(cmd: list[str]) -> PodmanSteps:
    """The progress reader of a `podman build` command: its context's Dockerfile (the last argument;
    the command names no other) read for the steps of each stage, where it can be read."""
    try:
        totals = dockerfile_steps((Path(cmd[-1]) / "Dockerfile").read_text(errors="replace"))
    except OSError:
        totals = []
    return PodmanSteps(totals or None)


def built_image_id(metadata_file: Path) -> str | None:
    """The image ID a build wrote: buildx's --metadata-file (`containerimage.config.digest`) or
    podman's --iidfile (the bare `sha256:...`); None when the file is absent or says neither."""
    try:
        text = metadata_file.read_text().strip()
    except OSError:
        return None
    if is_image_id(text):
        return text
    found = read_metadata(metadata_file).get("containerimage.config.digest")
    return found if isinstance(found, str) else None


def read_metadata(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = jsonsafe.load(fh)
    except (OSError, jsonsafe.JsonProblem):
        return {}
    return data if isinstance(data, dict) else {}


def buildx_builders() -> list[dict[str, str]]:
    """buildx builders as [{name, driver, status}] (empty when buildx is missing)."""
    try:
        out = subprocess.run(
            ["docker", "buildx", "ls", "--format", "json"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        b, _why = jsonsafe.parse_line(line)
        if b is None:
            continue
        nodes = b.get("Nodes") or [{}]
        found.append(
            {
                "name": b.get("Name", ""),
                "driver": b.get("Driver", ""),
                "status": str(nodes[0].get("Status", "")),
            }
        )
    return found
