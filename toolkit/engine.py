"""The one module that talks to the Docker engine: BuildKit builds (docker buildx, a subprocess,
since the docker SDK drives only the classic builder) and containers (docker SDK).

Every command is an argument list, never a shell string; `buildx_command` and `run_command`
return the exact CLI equivalents for `--dry-run`.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.errors import EngineUnavailable

CONTAINER_LABEL = "org.toolkit.managed"


def client():
    """A docker SDK client (API version negotiated). Raises EngineUnavailable with the fix."""
    import docker
    from docker.errors import DockerException

    try:
        c = docker.from_env(timeout=120)
        c.ping()
        return c
    except DockerException as err:
        msg = str(err)
        if "Permission denied" in msg:
            fix = "add your user to the `docker` group (then log in again) or run as root"
        else:
            fix = "start it (`sudo dockerd &` or `sudo systemctl start docker`; `scripts/setup-host.sh` does both)"
        raise EngineUnavailable(f"Docker engine not reachable ({msg.splitlines()[0][:200]}): {fix}") from None


def engine_info() -> dict[str, Any]:
    """Engine and BuildKit versions: {server_version, api_version, buildx, os, kernel}."""
    c = client()
    v = c.version()
    info = {
        "server_version": v.get("Version"),
        "api_version": v.get("ApiVersion"),
        "os": v.get("Os"),
        "kernel": v.get("KernelVersion"),
    }
    try:
        out = subprocess.run(["docker", "buildx", "version"], capture_output=True, text=True, timeout=30)
        info["buildx"] = out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        info["buildx"] = None
    return info


@dataclass
class ImageInfo:
    """`docker image inspect` essentials: id = image digest (sha256:...), size in bytes."""

    id: str
    size: int
    labels: dict[str, str]
    repo_digests: list[str]
    tags: list[str]


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
    )


def ensure_base_image(ref: str, *, pull_timeout: float = 120) -> str | None:
    """Make `ref` available locally: present, or pulled. Returns None, or the reason it is not."""
    if inspect_image(ref) is not None:
        return None
    try:
        proc = subprocess.run(["docker", "pull", "-q", ref], capture_output=True, text=True, timeout=pull_timeout)
    except subprocess.TimeoutExpired:
        return f"base image {ref} is not local and pulling it timed out after {pull_timeout:.0f} s"
    if proc.returncode == 0:
        return None
    err = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
    return f"base image {ref} is not local and cannot be pulled ({err[:160]})"


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
) -> list[str]:
    """The `docker buildx build` argument list (no `--pull`: bases may be local-only images)."""
    cmd = ["docker", "buildx", "build", "--progress=plain"]
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
        cmd += ["--metadata-file", str(metadata_file)]
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


def run_buildx(cmd: list[str], *, log_path: Path, on_line: Callable[[str], None] | None = None,
               timeout: float = 4 * 3600) -> BuildOutcome:
    """Run a buildx command, streaming its plain progress to `on_line` and to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    steps: set[str] = set()
    cached: set[str] = set()
    with log_path.open("w") as log:
        log.write("$ " + shlex.join(cmd) + "\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, DOCKER_BUILDKIT="1"))
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                parts = line.split(" ", 2)
                if len(parts) >= 2 and parts[0].startswith("#") and parts[0][1:].isdigit():
                    if parts[1].startswith("["):
                        steps.add(parts[0])
                    if parts[1].strip() == "CACHED":
                        cached.add(parts[0])
                if on_line:
                    on_line(line.rstrip("\n"))
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait(timeout=30)
            raise
        finally:
            timer.cancel()
    return BuildOutcome(rc == 0, time.monotonic() - t0, len(steps), len(cached & steps), log_path, rc)


@dataclass
class Mount:
    """A bind mount or named volume: source (host path or volume name) -> target in the container."""

    source: str
    target: str
    read_only: bool = True
    volume: bool = False

    def cli(self) -> list[str]:
        kind = "volume" if self.volume else "bind"
        spec = f"type={kind},source={self.source},target={self.target}" + (",readonly" if self.read_only else "")
        return ["--mount", spec]


@dataclass
class RunSpec:
    """Everything needed to start a benchmark container (device profile args as data)."""

    image: str
    command: list[str]
    mounts: list[Mount] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    group_add: list[str] = field(default_factory=list)
    security_opt: list[str] = field(default_factory=list)
    cap_drop: list[str] = field(default_factory=list)
    cap_add: list[str] = field(default_factory=list)
    ipc_mode: str | None = None
    name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    shm_size: str | None = None
    network: str | None = None
    ports: dict[str, int] = field(default_factory=dict)


def run_command(spec: RunSpec) -> list[str]:
    """The exact `docker run` equivalent of `start_container(spec)`, for --dry-run."""
    cmd = ["docker", "run", "--rm"]
    if spec.name:
        cmd += ["--name", spec.name]
    for d in spec.devices:
        cmd += ["--device", d]
    for g in spec.group_add:
        cmd += ["--group-add", g]
    for s in spec.security_opt:
        cmd += ["--security-opt", s]
    for c in spec.cap_drop:
        cmd += ["--cap-drop", c]
    for c in spec.cap_add:
        cmd += ["--cap-add", c]
    if spec.ipc_mode:
        cmd += ["--ipc", spec.ipc_mode]
    if spec.shm_size:
        cmd += ["--shm-size", spec.shm_size]
    if spec.network:
        cmd += ["--network", spec.network]
    for cport, hport in spec.ports.items():
        cmd += ["-p", f"127.0.0.1:{hport}:{cport}"]
    for m in spec.mounts:
        cmd += m.cli()
    for k, v in sorted(spec.environment.items()):
        cmd += ["-e", f"{k}={v}"]
    return cmd + [spec.image] + spec.command


@dataclass
class RunOutcome:
    """A finished container: exit status, separated stdout/stderr text, wall seconds."""

    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    oom_killed: bool = False
    first_output_s: float | None = None


def start_container(spec: RunSpec):
    """Start `spec` detached through the SDK (labelled so orphans can be found and removed)."""
    c = client()
    mounts = []
    from docker.types import Mount as SdkMount

    for m in spec.mounts:
        mounts.append(SdkMount(target=m.target, source=m.source, type="volume" if m.volume else "bind",
                               read_only=m.read_only))
    kwargs: dict[str, Any] = dict(
        image=spec.image, command=spec.command, detach=True, mounts=mounts, environment=spec.environment,
        devices=spec.devices or None, group_add=spec.group_add or None, security_opt=spec.security_opt or None,
        cap_drop=spec.cap_drop or None, cap_add=spec.cap_add or None, ipc_mode=spec.ipc_mode,
        name=spec.name, labels={CONTAINER_LABEL: "1", **spec.labels}, shm_size=spec.shm_size,
        privileged=False,
    )
    if spec.network:
        kwargs["network"] = spec.network
    if spec.ports:
        kwargs["ports"] = {k: ("127.0.0.1", v) for k, v in spec.ports.items()}
    return c.containers.run(**{k: v for k, v in kwargs.items() if v is not None})


def run_container(spec: RunSpec, *, timeout: float, on_stderr: Callable[[str], None] | None = None) -> RunOutcome:
    """Run to completion; stream stderr lines to `on_stderr`; always remove the container.

    A run past `timeout` seconds is killed and reported with timed_out=True. Ctrl-C kills and
    removes the container, then re-raises KeyboardInterrupt.
    """
    t0 = time.monotonic()
    container = start_container(spec)
    first: list[float] = []
    timed_out = threading.Event()

    def _kill() -> None:
        timed_out.set()
        try:
            container.kill()
        except Exception:
            pass

    timer = threading.Timer(timeout, _kill)
    timer.start()
    try:
        buf = ""
        for chunk in container.logs(stream=True, follow=True, stdout=False, stderr=True):
            if not first:
                first.append(time.monotonic() - t0)
            buf += chunk.decode(errors="replace")
            while "\n" in buf:
                line, buf = buf.split("\n", 1)
                if on_stderr:
                    on_stderr(line)
        status = container.wait()
        seconds = time.monotonic() - t0
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
        container.reload()
        state = container.attrs.get("State", {})
        return RunOutcome(int(status.get("StatusCode", -1)), stdout, stderr, seconds, timed_out.is_set(),
                          bool(state.get("OOMKilled")), first[0] if first else None)
    finally:
        timer.cancel()
        try:
            container.remove(force=True)
        except Exception:
            pass


def remove_orphans() -> int:
    """Remove containers this toolkit started that are still around (e.g. after a crash)."""
    n = 0
    for ctr in client().containers.list(all=True, filters={"label": CONTAINER_LABEL}):
        ctr.remove(force=True)
        n += 1
    return n


def ensure_volume(name: str, labels: dict[str, str] | None = None) -> str:
    """Create the named volume if absent (used for per-digest shader caches)."""
    from docker.errors import NotFound

    c = client()
    try:
        c.volumes.get(name)
    except NotFound:
        c.volumes.create(name=name, labels=labels or {})
    return name


def read_metadata(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
