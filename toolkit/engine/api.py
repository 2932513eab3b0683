"""The one module that talks to the container engine: Docker, or Podman through its Docker-compatible
API (`podman system service`). Builds are a subprocess (`docker buildx build`, since the docker SDK
drives only the classic builder; `podman build` on Podman), containers go through the docker SDK.

Which engine: `engine_name()` — the global `toolkit --engine` option, which sets $TOOLKIT_ENGINE
(docker | podman | auto), else auto: Docker where DOCKER_HOST is set or a Docker engine is installed
(its socket or `dockerd`), else Podman where `podman` is on PATH, else Docker (whose error then says
how to choose Podman). Rootful Podman (root) and rootless Podman (any other user) are two engines:
separate image stores, separate sockets, separate `engine_id()`s.

Every command is an argument list, never a shell string; `buildx_command` and `run_command`
return the exact CLI equivalents for `--dry-run` (`podman build` / `podman run` on Podman).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.core import jsonsafe, signals
from toolkit.core.errors import BadInput, EngineUnavailable

CONTAINER_LABEL = "org.toolkit.managed"
HOST_LABEL = "org.toolkit.host-id"
"""Which machine started a container: a later run on the same machine can tell whether its owner is gone."""


def host_id() -> str:
    """This machine's id (/etc/machine-id, else the hostname)."""
    import socket

    try:
        return Path("/etc/machine-id").read_text().strip() or socket.gethostname()
    except OSError:
        return socket.gethostname()


ENGINES = ("docker", "podman")
ENGINE_ENV = "TOOLKIT_ENGINE"
"""The environment variable naming the engine (docker | podman | auto); `toolkit --engine` sets it."""
PODMAN_IDLE_S = 600
"""A Podman API service the toolkit starts exits after this many seconds without a request."""


def engine_name() -> str:
    """The container engine in use: "docker" or "podman" ($TOOLKIT_ENGINE, else auto-detected: see
    the module docstring). Raises BadInput for a value of $TOOLKIT_ENGINE that is neither."""
    want = os.environ.get(ENGINE_ENV, "").strip().lower()
    if want in ENGINES:
        return want
    if want not in ("", "auto"):
        raise BadInput(
            f"{ENGINE_ENV}={want!r} is not an engine: set it to docker, podman or auto (or unset it)"
        )
    if os.environ.get("DOCKER_HOST") or Path("/var/run/docker.sock").exists() or shutil.which("dockerd"):
        return "docker"
    return "podman" if shutil.which("podman") else "docker"


def is_podman() -> bool:
    """True when the engine in use is Podman."""
    return engine_name() == "podman"


def podman_rootless() -> bool:
    """True for rootless Podman: Podman run by a user other than root (its own user namespace, its
    own image store, no numeric host GIDs inside; device groups pass only with `keep-groups`)."""
    return is_podman() and os.geteuid() != 0


def engine_kind() -> str:
    """ "docker", "podman" or "podman-rootless": the engine as the device passthrough needs to know it."""
    if not is_podman():
        return "docker"
    return "podman-rootless" if podman_rootless() else "podman"


def engine_label() -> str:
    """The engine for messages: "Docker engine", "Podman (rootful)", "Podman (rootless)"."""
    if not is_podman():
        return "Docker engine"
    return "Podman (rootless)" if podman_rootless() else "Podman (rootful)"


def cli() -> str:
    """The engine's command-line program: "docker" or "podman"."""
    return "podman" if is_podman() else "docker"


_CLIENTS: dict[str, Any] = {}
_PODMAN_SOCKETS: dict[int, str] = {}


def podman_socket() -> str:
    """The Unix socket of this user's Podman API service: $CONTAINER_HOST (unix://PATH) when set,
    else what `podman info` names (rootful /run/podman/podman.sock, rootless
    $XDG_RUNTIME_DIR/podman/podman.sock), else that default. Raises EngineUnavailable when podman is
    not installed."""
    where = os.environ.get("CONTAINER_HOST", "")
    if where.startswith("unix://"):
        return where[len("unix://") :]
    uid = os.geteuid()
    if uid in _PODMAN_SOCKETS:
        return _PODMAN_SOCKETS[uid]
    if not shutil.which("podman"):
        raise EngineUnavailable(
            "Podman not installed (no `podman` on PATH): install it (`apt-get install podman`, or "
            "`scripts/setup-host.sh --podman`), or choose Docker (`--engine docker`)"
        )
    path = ""
    try:
        out = subprocess.run(
            ["podman", "info", "--format", "{{.Host.RemoteSocket.Path}}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        path = out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        pass
    if not path.startswith("/"):
        run = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{uid}"
        path = "/run/podman/podman.sock" if uid == 0 else f"{run}/podman/podman.sock"
    _PODMAN_SOCKETS[uid] = path
    return path


def podman_service_command(path: str) -> list[str]:
    """The command that serves Podman's Docker-compatible API on `path` (what the toolkit starts)."""
    return ["podman", "system", "service", f"--time={PODMAN_IDLE_S}", f"unix://{path}"]


def _answers(path: str) -> bool:
    """Whether something accepts connections on the Unix socket `path` (a stale socket file left by a
    service that was killed does not)."""
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _start_podman_service(path: str, *, wait_s: float = 30) -> str | None:
    """Start `podman system service` on `path` in its own session (it outlives this process and exits
    after PODMAN_IDLE_S idle seconds; log: beside the socket, podman-service.log) and wait until the
    socket accepts connections. A socket file nothing listens on (a service killed before it could
    remove it) is removed first: podman would otherwise fail to bind, or the wait would end at once
    on the dead file. None when it came up, else why not."""
    sock = Path(path)
    logpath = sock.parent / "podman-service.log"
    try:
        sock.parent.mkdir(parents=True, exist_ok=True)
        if sock.is_socket() and not _answers(path):
            sock.unlink()
        log = open(logpath, "ab")  # noqa: SIM115 (handed to the child)
    except OSError as err:
        return f"cannot prepare {sock}: {err.strerror or err}"
    with log:
        try:
            proc = subprocess.Popen(
                podman_service_command(path),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd="/",  # it outlives this process: a deleted working directory broke conmon's attach
            )
        except OSError as err:
            return f"cannot run podman: {err.strerror or err}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if _answers(path):
            return None
        if proc.poll() is not None:
            tail = _log_tail(logpath)
            return f"`{shlex.join(podman_service_command(path))}` exited with {proc.returncode}" + (
                f": {tail}" if tail else f" (log: {logpath})"
            )
        time.sleep(0.1)
    return (
        f"`{shlex.join(podman_service_command(path))}` did not answer on its socket within {wait_s:.0f} s "
        f"(log: {logpath})"
    )


def _log_tail(path: Path) -> str:
    """The last non-empty line of a log file (at most 200 characters), else ""."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:200] if lines else ""


def client():
    """A docker SDK client (API version negotiated) of the engine in use, one per engine address for
    the process (building one negotiates the API version: a request and ~10 ms each time); every call
    pings the engine, so an engine that went away is reported here as before. On Podman the API
    service is started when its socket does not answer. Raises EngineUnavailable with the fix."""
    if is_podman():
        return _podman_client()
    import docker
    from docker.errors import DockerException

    where = os.environ.get("DOCKER_HOST", "")
    c = _cached(where)
    if c is not None:
        return c
    try:
        c = docker.from_env(timeout=120)
        c.ping()
        _CLIENTS[where] = c
        return c
    except (
        ValueError
    ) as err:  # urllib's parse of DOCKER_HOST: "Invalid IPv6 URL", "Port out of range 0-65535", ...
        raise EngineUnavailable(
            f"Docker engine not reachable: DOCKER_HOST is malformed (DOCKER_HOST={where!r}: "
            f"{_first_line(err)}): unset it to use the local engine, or set it to "
            "unix:///var/run/docker.sock or tcp://HOST:PORT"
        ) from None
    except DockerException as err:  # (the cache holds `where` only after a ping answered)
        msg = _first_line(err)
        start = (
            "start it (`sudo dockerd &` or `sudo systemctl start docker`; `scripts/setup-host.sh` does both)"
        )
        if "Permission denied" in msg:
            fix = docker_group_fix()
        elif not where:
            fix = start
        elif "connect" in msg.lower():  # a usable address where no engine answers
            fix = f"{start}, or point DOCKER_HOST at a running engine (unset it to use the local one)"
        else:  # "Invalid bind address protocol", an npipe:// or ssh:// address this host's SDK cannot use
            fix = (
                f"DOCKER_HOST is the likely cause: the Docker SDK cannot use {where!r}; unset it to use the "
                "local engine, or set it to unix:///var/run/docker.sock or tcp://HOST:PORT"
            )
        if not where and shutil.which("podman") and os.environ.get(ENGINE_ENV, "") in ("", "auto"):
            fix += "; or use Podman, installed here: `toolkit --engine podman ...` (or TOOLKIT_ENGINE=podman)"
        at = f" at DOCKER_HOST={where!r}" if where else ""
        raise EngineUnavailable(f"Docker engine not reachable{at} ({msg}): {fix}") from None


def docker_group_fix() -> str:
    """What a user who may not open the Docker socket types next: a member of the `docker` group whose
    shell predates the membership (usermod takes effect at the next login) gets `newgrp docker`;
    anyone else the usermod line. Reads /etc/group through the grp module."""
    import getpass
    import grp

    user = os.environ.get("USER") or getpass.getuser()
    try:
        group = grp.getgrnam("docker")
    except KeyError:
        return "no `docker` group on this host: run `./scripts/setup-host.sh` (it makes one and adds you), or run as root"
    if user in group.gr_mem and group.gr_gid not in os.getgroups():
        return (
            f"{user} is in the `docker` group, but this shell started before that: type `newgrp docker` "
            "(or log in again) and run the command once more"
        )
    return (
        f"add {user} to the `docker` group: `sudo usermod -aG docker {user}`, then `newgrp docker` (or log "
        "in again); `./scripts/setup-host.sh` does both; or run as root"
    )


def _cached(key: str):
    """The cached client of `key` when it still answers a ping, else None (and forgotten)."""
    c = _CLIENTS.pop(key, None)
    if c is not None:
        try:
            c.ping()
            _CLIENTS[key] = c
            return c
        except Exception:  # gone or restarted since: start over, as a first call would
            pass
    return None


def _podman_client():
    import docker
    from docker.errors import DockerException

    path = podman_socket()
    key = f"podman:{path}"
    c = _cached(key)
    if c is not None:
        return c
    started = ""
    for attempt in range(2):
        try:
            c = docker.DockerClient(base_url=f"unix://{path}", timeout=120)
            c.ping()
            _CLIENTS[key] = c
            return c
        except DockerException as err:
            msg = _first_line(err)
        if attempt or os.environ.get("CONTAINER_HOST"):
            break
        why = _start_podman_service(path)  # not answering: serve the API (as a socket unit would)
        if why:
            msg = why
            break
        started = "; the toolkit started its API service and it still does not answer"
    who = "rootless, as this user" if os.geteuid() != 0 else "rootful, as root"
    raise EngineUnavailable(
        f"Podman API not reachable at unix://{path} ({msg}{started}): start it ({who}) with "
        f"`{shlex.join(podman_service_command(path))} &`, check `podman info`, or choose Docker "
        "(`--engine docker`)"
    ) from None


def _first_line(err: Exception) -> str:
    """The first line of an exception's message (at most 200 characters), else its type's name."""
    lines = str(err).splitlines()
    return lines[0][:200] if lines and lines[0] else type(err).__name__


def engine_info(*, buildx: bool = True) -> dict[str, Any]:
    """Engine and builder versions and security mode: {engine, rootless, server_version, api_version,
    buildx, os, kernel, SecurityOptions}, on Podman also oci_runtime and storage_driver (`engine`: docker | podman; `server_version`: Docker's or
    Podman's own version; `api_version`: the Docker API version it serves; SecurityOptions as
    `docker info` gives them: name=rootless, name=userns, ...). On Podman `buildx` is replaced by
    `buildah` (the version `podman build` builds with). `buildx=False` leaves the builder out (a
    subprocess, ~0.06 s of CPU): a benchmark records the engine that ran it; the builder is a fact of
    the build."""
    c = client()
    v = c.version()
    about = c.info()
    security = list(about.get("SecurityOptions") or [])
    podman = is_podman()
    info = {
        "engine": "podman" if podman else "docker",
        "rootless": podman_rootless() if podman else any("name=rootless" in s for s in security),
        "server_version": v.get("Version"),
        "api_version": v.get("ApiVersion"),
        "os": v.get("Os"),
        "kernel": v.get("KernelVersion"),
        "SecurityOptions": security,
    }
    if podman:  # `podman version`'s components: "OCI Runtime (crun)" -> crun (keep-groups needs crun)
        names = [str(x.get("Name", "")) for x in v.get("Components") or [] if isinstance(x, dict)]
        found = [m.group(1) for n in names if (m := re.fullmatch(r"OCI Runtime \((\S+)\)", n))]
        info["oci_runtime"] = found[0] if found else None
        info["storage_driver"] = about.get("Driver")
    if not buildx:
        return info
    cmd, key = (
        (["podman", "info", "--format", "{{.Host.BuildahVersion}}"], "buildah")
        if podman
        else (["docker", "buildx", "version"], "buildx")
    )
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        info[key] = out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        info[key] = None
    return info


def engine_summary(info: dict[str, Any]) -> str:
    """`docker 26.1.5`, `podman 4.3.1 (rootless)`: an engine_info() (or a record's host.docker) in words;
    a record written before the engine was recorded by name is Docker's."""
    name = info.get("engine") or "docker"
    return f"{name} {info.get('server_version') or '?'}" + (" (rootless)" if info.get("rootless") else "")


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
    if is_podman() and archive.is_file():
        try:
            proc = subprocess.run(
                ["podman", "load", "-q", "-i", str(archive)], capture_output=True, text=True, timeout=600
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"base image {ref} is not local and loading {archive} failed ({exc})"
        if proc.returncode == 0 and inspect_image(ref) is not None:
            return None
    try:
        proc = subprocess.run(
            [cli(), "pull", "-q", ref], capture_output=True, text=True, timeout=pull_timeout
        )
    except subprocess.TimeoutExpired:
        return f"base image {ref} is not local and pulling it timed out after {pull_timeout:.0f} s"
    if proc.returncode == 0:
        return None
    err = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
    hint = (
        f"; `scripts/setup-host.sh --podman` keeps it in {archive} for Podman stores" if is_podman() else ""
    )
    return f"base image {ref} is not local and cannot be pulled ({err[:160]}){hint}"


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
    """The `docker buildx build` argument list (no `--pull`: bases may be local-only images); on
    Podman the `podman build` one: the same Dockerfile (buildah runs RUN --mount=type=cache and
    type=secret), `--format docker` (the OCI format drops SHELL, which the templates use), `--layers`
    (step cache), and `--iidfile` in place of `--metadata-file` (read by `built_image_id`). Pushing
    and attestations are buildx's: on Podman they raise BadInput."""
    # RUN steps use the host network: builds then need no docker0 bridge (some CI sandboxes remove it)
    if is_podman():
        if push or attest:
            raise BadInput(
                "pushing from the build and attestations (SBOM, provenance) need Docker's buildx: run this "
                "with `toolkit --engine docker`"
            )
        cmd = ["podman", "build", "--format", "docker", "--layers", "--network", "host"]
    else:
        cmd = ["docker", "buildx", "build", "--progress=plain", "--network", "host"]
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
    progress shape (`PodmanSteps`), so one reader counts and shows the steps of both."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    steps: set[str] = set()
    cached: set[str] = set()
    with log_path.open("w", buffering=1) as log:  # line-buffered: the kept log is complete even after a kill
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
        podman = PodmanSteps() if cmd[0] == "podman" else None
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                log.write(raw)
                for line in podman(raw.rstrip("\n")) if podman else [raw]:
                    _count_step(line, steps, cached)
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

    def __init__(self) -> None:
        self.n = 0
        self.started = 0.0
        self.done = True
        self.metadata = False

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
            return [*out, f"#{self.n} [{stage}{m.group(3)}/{m.group(4)}] {m.group(5)}"]
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

    def _finish(self) -> list[str]:
        if self.done or not self.n:
            return []
        self.done = True
        return [f"#{self.n} DONE {time.monotonic() - self.started:.1f}s"]


def built_image_id(metadata_file: Path) -> str | None:
    """The image ID a build wrote: buildx's --metadata-file (`containerimage.config.digest`) or
    podman's --iidfile (the bare `sha256:...`); None when the file is absent or says neither."""
    try:
        text = metadata_file.read_text().strip()
    except OSError:
        return None
    if re.fullmatch(r"sha256:[0-9a-f]{64}", text):
        return text
    found = read_metadata(metadata_file).get("containerimage.config.digest")
    return found if isinstance(found, str) else None


@dataclass
class Mount:
    """A bind mount or named volume: source (host path or volume name) -> target in the container."""

    source: str
    target: str
    read_only: bool = True
    volume: bool = False

    def cli(self) -> list[str]:
        kind = "volume" if self.volume else "bind"

        def field(key: str, value: str) -> str:  # --mount is CSV: quote a value holding , or "
            kv = f"{key}={value}"
            return '"' + kv.replace('"', '""') + '"' if ("," in kv or '"' in kv) else kv

        spec = ",".join(
            [f"type={kind}", field("source", self.source), field("target", self.target)]
            + (["readonly"] if self.read_only else [])
        )
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
    memory_bytes: int | None = None  # --memory and --memory-swap (no swap beyond it): a hard limit


def run_command(spec: RunSpec) -> list[str]:
    """The exact `docker run` (on Podman `podman run`) equivalent of `start_container(spec)`, for
    --dry-run and the records."""
    cmd = [cli(), "run", "--rm"]
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
    if spec.memory_bytes:
        cmd += ["--memory", str(spec.memory_bytes), "--memory-swap", str(spec.memory_bytes)]
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


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during `run_container`; `.outcome` holds what the container printed until then."""

    def __init__(self, outcome: RunOutcome):
        super().__init__()
        self.outcome = outcome


class EngineLost(EngineUnavailable):
    """The engine went away while a container ran; `.outcome` holds what it printed until then."""

    def __init__(self, message: str, outcome: RunOutcome):
        super().__init__(message)
        self.outcome = outcome


def is_connection_error(err: BaseException) -> bool:
    """True when `err` means the engine cannot be talked to (socket gone, connection reset, 5xx),
    False for an answer of the engine to a wrong request (4xx)."""
    import requests
    import urllib3
    from docker.errors import APIError, DockerException

    if isinstance(err, APIError) and err.response is not None and err.response.status_code < 500:
        return False
    return isinstance(
        err,
        (
            DockerException,
            requests.exceptions.RequestException,
            urllib3.exceptions.HTTPError,
            ConnectionError,
        ),
    )


def raised_by_docker(err: BaseException) -> bool:
    """True when `err` comes from talking to the engine: a docker.errors.DockerException (APIError
    included), or a requests/urllib3 error raised inside the docker SDK (its traceback passes through
    the docker package). docker's APIError and requests' errors subclass OSError: this tells them
    from a file the OS refuses."""
    import docker
    import requests
    import urllib3
    from docker.errors import DockerException

    if isinstance(err, DockerException):
        return True
    if not isinstance(err, requests.exceptions.RequestException | urllib3.exceptions.HTTPError):
        return False
    sdk = str(Path(docker.__file__).parent) + os.sep
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(sdk):
            return True
        tb = tb.tb_next
    return False


def start_container(spec: RunSpec):
    """Start `spec` detached through the SDK (labelled so orphans can be found and removed)."""
    container = create_container(spec)
    container.start()
    return container


def create_container(spec: RunSpec):
    """Create (not start) `spec` through the SDK, labelled with CONTAINER_LABEL and this host's id.
    On rootless Podman with `keep-groups` the libpod API creates it (`libpod_spec`): Podman's
    Docker-compatible API takes `keep-groups` for a group name (Podman 4.3.1: `looking up
    supplemental groups ...: Unable to find group keep-groups`) and has no field for the annotation
    that means it."""
    c = client()
    if KEEP_GROUPS in spec.group_add and podman_rootless():
        return _create_libpod(c, spec)
    mounts = []
    from docker.types import Mount as SdkMount

    for m in spec.mounts:
        mounts.append(
            SdkMount(
                target=m.target, source=m.source, type="volume" if m.volume else "bind", read_only=m.read_only
            )
        )
    kwargs: dict[str, Any] = dict(
        image=spec.image,
        command=spec.command,
        detach=True,
        mounts=mounts,
        environment=spec.environment,
        devices=spec.devices or None,
        group_add=spec.group_add or None,
        security_opt=spec.security_opt or None,
        cap_drop=spec.cap_drop or None,
        cap_add=spec.cap_add or None,
        ipc_mode=spec.ipc_mode,
        name=spec.name,
        labels={CONTAINER_LABEL: "1", HOST_LABEL: host_id(), **spec.labels},
        shm_size=spec.shm_size,
        privileged=False,
    )
    if spec.network:
        kwargs["network"] = spec.network
    if spec.memory_bytes:
        kwargs["mem_limit"] = spec.memory_bytes
        kwargs["memswap_limit"] = spec.memory_bytes
    if spec.ports:
        kwargs["ports"] = {k: ("127.0.0.1", v) for k, v in spec.ports.items()}
    kwargs.pop("detach")
    return c.containers.create(**{k: v for k, v in kwargs.items() if v is not None})


KEEP_GROUPS = "keep-groups"
KEEP_GROUPS_ANNOTATION = "run.oci.keep_original_groups"
"""What `podman run --group-add keep-groups` sets: crun then leaves the process's supplementary groups
as they are (the user's, as the API service had them when it started)."""


def libpod_spec(spec: RunSpec, labels: dict[str, str]) -> dict[str, Any]:
    """`spec` as Podman's libpod SpecGenerator JSON (POST /v4.0.0/libpod/containers/create; the field
    names of podman's pkg/specgen), with `keep-groups` as its annotation. Raises BadInput for a
    security option it does not translate (only no-new-privileges and seccomp=unconfined occur)."""
    from docker.utils import parse_bytes

    out: dict[str, Any] = {
        "image": spec.image,
        "command": list(spec.command),
        "env": dict(spec.environment),
        "labels": labels,
        "devices": [{"path": d} for d in spec.devices],
        "cap_drop": list(spec.cap_drop),
        "cap_add": list(spec.cap_add),
        "groups": [g for g in spec.group_add if g != KEEP_GROUPS],
        "mounts": [
            {
                "destination": m.target,
                "source": m.source,
                "type": "bind",
                "options": ["ro"] if m.read_only else [],
            }
            for m in spec.mounts
            if not m.volume
        ],
        "volumes": [
            {"name": m.source, "dest": m.target, "options": ["ro"] if m.read_only else []}
            for m in spec.mounts
            if m.volume
        ],
    }
    if KEEP_GROUPS in spec.group_add:
        out["annotations"] = {KEEP_GROUPS_ANNOTATION: "1"}
    for opt in spec.security_opt:
        if opt == "no-new-privileges":
            out["no_new_privileges"] = True
        elif opt == "seccomp=unconfined":
            out["seccomp_profile_path"] = "unconfined"
        else:
            raise BadInput(f"security option {opt!r} is not translated for rootless Podman's libpod API")
    if spec.name:
        out["name"] = spec.name
    if spec.ipc_mode:
        out["ipcns"] = {"nsmode": spec.ipc_mode}
    if spec.shm_size:
        out["shm_size"] = parse_bytes(spec.shm_size)
    if spec.network:
        out["netns"] = {"nsmode": spec.network}
    if spec.memory_bytes:
        out["resource_limits"] = {"memory": {"limit": spec.memory_bytes, "swap": spec.memory_bytes}}
    if spec.ports:
        out["portmappings"] = [
            {
                "host_ip": "127.0.0.1",
                "host_port": h,
                "container_port": int(str(c).split("/")[0]),
                "protocol": "tcp",
            }
            for c, h in spec.ports.items()
        ]
    return out


def _create_libpod(c, spec: RunSpec):
    """Create `spec` through the libpod API (see create_container); returns the SDK's container."""
    import json

    from docker.errors import APIError

    body = libpod_spec(spec, {CONTAINER_LABEL: "1", HOST_LABEL: host_id(), **spec.labels})
    resp = c.api._post(
        c.api.base_url + "/v4.0.0/libpod/containers/create",
        data=json.dumps(body),
        headers={"Content-Type": "application/json"},
    )
    if resp.status_code >= 300:
        try:
            why = resp.json().get("message") or resp.text
        except ValueError:
            why = resp.text
        raise APIError(f"libpod container create: {why[:300]}", response=resp, explanation=why[:300])
    return c.containers.get(resp.json()["Id"])


class _Lines:
    """Collects a stream's text and hands each complete line to a callback."""

    def __init__(self, on_line: Callable[[str], None] | None):
        self.parts: list[str] = []
        self.pending = ""
        self.on_line = on_line

    def feed(self, chunk: bytes) -> None:
        text = chunk.decode(errors="replace")
        self.parts.append(text)
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            if self.on_line:
                self.on_line(line)

    def close(self) -> None:
        """The stream ended: a last line without a newline is still a line."""
        line, self.pending = self.pending, ""
        if line and self.on_line:
            self.on_line(line)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def run_container(
    spec: RunSpec,
    *,
    timeout: float,
    on_stderr: Callable[[str], None] | None = None,
    on_stdout: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> RunOutcome:
    """Run to completion; hand each stdout / stderr line to `on_stdout` / `on_stderr` as it is
    printed (so a caller can store a result the moment it exists); always remove the container.
    `on_start(pid)` is called once the container runs, with its main process's host pid (0 when the
    engine does not say).

    A run past `timeout` seconds is killed and reported with timed_out=True. Ctrl-C kills and
    removes the container, then raises `Interrupted` (a KeyboardInterrupt) carrying the output so
    far. The engine going away raises `EngineLost` (EngineUnavailable, exit 5) carrying the output
    so far. An exception raised by a callback stops the run and propagates.
    """
    t0 = time.monotonic()
    container = create_container(spec)
    first: list[float] = []
    timed_out = threading.Event()
    out, err = _Lines(on_stdout), _Lines(on_stderr)

    def _kill() -> None:
        timed_out.set()
        try:
            container.kill()
        except Exception:
            pass

    def partial(code: int) -> RunOutcome:
        return RunOutcome(
            code,
            out.text,
            err.text,
            time.monotonic() - t0,
            timed_out.is_set(),
            False,
            first[0] if first else None,
        )

    timer = threading.Timer(timeout, _kill)
    timer.start()
    try:
        # attached before the start (as `docker run` does): nothing printed is missed, and the stream
        # ends when the container stops (an attach to a container that already stopped would wait)
        stream = client().api.attach(
            container.id, stdout=True, stderr=True, stream=True, logs=True, demux=True
        )
        container.start()
        if on_start is not None:
            try:
                container.reload()
                on_start(int(container.attrs.get("State", {}).get("Pid") or 0))
            except Exception:  # observing is best effort; the run goes on
                pass
        for o, e in stream:
            if not first:
                first.append(time.monotonic() - t0)
            if o:
                out.feed(o)
            if e:
                err.feed(e)
        out.close()
        err.close()
        status = container.wait()
        seconds = time.monotonic() - t0
        container.reload()
        state = container.attrs.get("State", {})
        return RunOutcome(
            int(status.get("StatusCode", -1)),
            out.text,
            err.text,
            seconds,
            timed_out.is_set(),
            bool(state.get("OOMKilled")),
            first[0] if first else None,
        )
    except KeyboardInterrupt:
        signals.hold_for_stop()  # stopping: a second Ctrl-C must not cut the kill, removal or save short
        try:  # keep what was measured before the interrupt: the caller stores it, then re-raises
            container.kill()
        except Exception:
            pass
        raise Interrupted(partial(130)) from None
    except Exception as exc:
        if not is_connection_error(exc):
            raise
        raise EngineLost(
            f"{engine_label()} connection lost during the run ({str(exc).splitlines()[0][:160]})", partial(-1)
        ) from None
    finally:
        timer.cancel()
        try:
            container.remove(force=True)
        except Exception:
            pass


def probe_device_access(
    image: str, *, devices: list[str], group_add: list[str], timeout: float = 120
) -> str | None:
    """Open every device of `devices` (docker `HOST:CONTAINER:perms` strings) read-write inside a
    one-shot container of `image` (same confinement as a benchmark: no network, every capability
    dropped, no-new-privileges, the given supplementary groups). None when every open succeeded,
    else what failed (the shell's own error line, e.g. `can't open '/dev/kfd': Permission denied`)."""
    paths = [d.split(":")[1] if d.count(":") >= 1 else d for d in devices]
    if not paths:
        return None
    script = 'for d in "$@"; do exec 3<>"$d" || exit 1; exec 3>&-; done'
    spec = RunSpec(
        image=image,
        command=["sh", "-c", script, "probe", *paths],
        devices=list(devices),
        group_add=list(group_add),
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"],
        network="none",
        labels={"org.toolkit.purpose": "device-probe"},
    )
    out = run_container(spec, timeout=timeout)
    if out.exit_code == 0:
        return None
    lines = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.strip()]
    return lines[-1][:200] if lines else f"device open exited {out.exit_code}"


def probe_base_image(ref: str, *, timeout: float = 120) -> str | None:
    """Run `true` as root and `ls /` as an unprivileged user (setpriv to uid 65534) in a one-shot
    container of local image `ref` (no network). None when both ran, else what failed: the engine's
    or the shell's last line (an empty imported rootfs has no `true`; a rootfs whose / is mode 0700
    lets no non-root user exec anything, which overlay2 hides and vfs does not)."""
    spec = RunSpec(
        image=ref,
        command=["sh", "-c", "true && setpriv --reuid=65534 --regid=65534 --clear-groups ls / >/dev/null"],
        network="none",
        labels={"org.toolkit.purpose": "base-probe"},
    )
    try:
        out = run_container(spec, timeout=timeout)
    except Exception as err:  # the engine refused to start it (no `sh`, an OCI error): that is the answer
        return _first_line(err)
    if out.exit_code == 0:
        return None
    lines = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.strip()]
    return lines[-1][:200] if lines else f"exited {out.exit_code}"


@dataclass
class ContainerInfo:
    """A container as listed: id, name, status (running, exited, created, ...), labels."""

    id: str
    name: str
    status: str
    labels: dict[str, str]


def toolkit_containers() -> list[ContainerInfo]:
    """Every container this toolkit started that still exists on the engine (any run, any state)."""
    found = []
    for ctr in client().containers.list(all=True, filters={"label": CONTAINER_LABEL}, ignore_removed=True):
        found.append(ContainerInfo(ctr.id, ctr.name, ctr.status, dict(ctr.labels or {})))
    return found


def remove_container_id(container_id: str) -> bool:
    """Kill and remove a container by id; False when it was already gone."""
    from docker.errors import NotFound

    try:
        client().containers.get(container_id).remove(force=True)
        return True
    except NotFound:
        return False


def engine_id() -> str:
    """The engine's own ID: tells two engines on one host apart. Docker: `docker info` .ID. Podman
    gives a new random ID per request: `podmanroot` for rootful Podman, `podmanu<uid>` for one
    user's rootless Podman (each has its own store and socket: a separate engine)."""
    if is_podman():
        client()  # it must answer, as Docker's must
        return "podmanroot" if not podman_rootless() else f"podmanu{os.geteuid()}"
    return str(client().info().get("ID") or "unknown")


def remove_orphans(*, run_id: str | None = None) -> int:
    """Remove containers this toolkit started that are still around (e.g. after a crash); with
    `run_id`, only those of that bench run (other runs may be going on at the same time)."""
    labels = [CONTAINER_LABEL] + ([f"org.toolkit.run-id={run_id}"] if run_id else [])
    n = 0
    for ctr in client().containers.list(all=True, filters={"label": labels}):
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
        with open(path, "rb") as fh:
            data = jsonsafe.load(fh)
    except (OSError, jsonsafe.JsonProblem):
        return {}
    return data if isinstance(data, dict) else {}


# --- Registry: tag, push, pull, untag (docker SDK). Credentials come from the Docker credential
# --- store (~/.docker/config.json, credsStore/credHelpers, filled by `docker login`); no password
# --- ever passes through the toolkit.


@dataclass
class TransferOutcome:
    """One push or pull: `digest` is the registry manifest digest (sha256:...), seconds of wall time."""

    ok: bool
    ref: str
    seconds: float
    digest: str | None = None
    size: int | None = None
    error: str | None = None


def _registry_hint(error: str, ref: str) -> str:
    registry = ref.split("/", 1)[0]
    low = error.lower()
    if "unauthorized" in low or "authentication required" in low or "denied" in low:
        return f"{error} (log in once with `docker login {registry}`; the toolkit reads the Docker credential store)"
    if "connection refused" in low or "no such host" in low or "timeout" in low:
        return f"{error} (is the registry {registry} running and reachable from the Docker engine?)"
    if "http response to https client" in low:
        return (
            f"{error} (the engine talks HTTPS to {registry}; loopback registries are plain HTTP-capable, other "
            "hosts need `insecure-registries` in daemon.json or TLS)"
        )
    return error


def tag_image(image: str, repository: str, tag: str) -> str | None:
    """`docker tag IMAGE REPOSITORY:TAG` (IMAGE is a ref or an image ID); returns None or the error."""
    from docker.errors import APIError

    try:
        client().api.tag(image, repository, tag)
    except APIError as err:
        return f"could not tag {image} as {repository}:{tag}: {err.explanation or err}"
    return None


def _stream(items, on_line: Callable[[str], None] | None) -> tuple[dict[str, Any], str | None]:
    """Drain a decoded push/pull progress stream; returns (last aux object, error message or None)."""
    aux: dict[str, Any] = {}
    error = None
    for item in items:
        if "error" in item:
            error = str(item.get("errorDetail", {}).get("message") or item["error"])
        if "aux" in item and isinstance(item["aux"], dict):
            aux = item["aux"]
        if on_line and item.get("status") and "progress" not in item:
            on_line(" ".join(str(x) for x in (item.get("id"), item["status"]) if x))
    return aux, error


def push_image(repository: str, tag: str, *, on_line: Callable[[str], None] | None = None) -> TransferOutcome:
    """`docker push REPOSITORY:TAG` through the SDK; never raises for a registry error."""
    from docker.errors import APIError

    ref = f"{repository}:{tag}"
    t0 = time.monotonic()
    try:
        aux, error = _stream(client().api.push(repository, tag=tag, stream=True, decode=True), on_line)
    except APIError as err:
        aux, error = {}, str(err.explanation or err)
    seconds = time.monotonic() - t0
    if error:
        return TransferOutcome(False, ref, seconds, error=_registry_hint(error, ref))
    return TransferOutcome(True, ref, seconds, digest=aux.get("Digest"), size=aux.get("Size"))


def registry_digest(ref: str) -> str | None:
    """The manifest digest the registry serves for `ref` now (distribution inspect), or None."""
    from docker.errors import APIError, NotFound

    try:
        return client().images.get_registry_data(ref).id
    except (APIError, NotFound):
        return None


def pull_image(ref: str, *, on_line: Callable[[str], None] | None = None) -> TransferOutcome:
    """`docker pull REF` (REF may be repository@sha256:...); never raises for a registry error."""
    from docker.errors import APIError
    from docker.utils import parse_repository_tag

    repository, tag = parse_repository_tag(ref)
    t0 = time.monotonic()
    try:
        _, error = _stream(
            client().api.pull(repository, tag=tag or "latest", stream=True, decode=True), on_line
        )
    except APIError as err:
        error = str(err.explanation or err)
    seconds = time.monotonic() - t0
    if error:
        return TransferOutcome(False, ref, seconds, error=_registry_hint(error, ref))
    return TransferOutcome(True, ref, seconds, digest=tag if tag and tag.startswith("sha256:") else None)


def untag_image(ref: str) -> bool:
    """`docker rmi REF` without force: removes the tag (the image goes with its last tag). False if absent."""
    from docker.errors import ImageNotFound

    try:
        client().images.remove(ref, noprune=False)
        return True
    except ImageNotFound:
        return False


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


# Running containers (the vLLM runner's long-lived `vllm serve` container)


def exec_command(container_name: str, command: list[str]) -> list[str]:
    """The exact `docker exec` (`podman exec`) equivalent of `exec_in(container, command)`, for --dry-run."""
    return [cli(), "exec", container_name, *command]


def exec_in(container, command: list[str], *, timeout: float) -> RunOutcome:
    """Run `command` in a running container (docker exec) and wait for it. The engine API cannot
    kill an exec'd process, so past `timeout` seconds the whole container is killed (timed_out)."""
    t0 = time.monotonic()
    box: dict[str, Any] = {}

    def _run() -> None:
        try:
            box["result"] = container.exec_run(command, demux=True)
        except Exception as err:  # the container died under the exec
            box["error"] = err

    worker = threading.Thread(target=_run, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        try:
            container.kill()
        except Exception:
            pass
        worker.join(30)
        return RunOutcome(-1, "", "", time.monotonic() - t0, timed_out=True)
    if "error" in box:
        return RunOutcome(-1, "", f"{cli()} exec failed: {box['error']}", time.monotonic() - t0)
    code, (out, err) = box["result"]
    return RunOutcome(
        int(code if code is not None else -1),
        (out or b"").decode(errors="replace"),
        (err or b"").decode(errors="replace"),
        time.monotonic() - t0,
    )


def container_logs(container) -> tuple[str, str]:
    """(stdout, stderr) of a container so far."""
    try:
        return (
            container.logs(stdout=True, stderr=False).decode(errors="replace"),
            container.logs(stdout=False, stderr=True).decode(errors="replace"),
        )
    except Exception as err:
        return "", f"(container logs unavailable: {err})"


def container_state(container) -> dict[str, Any]:
    """`State` of `docker inspect` (Running, ExitCode, OOMKilled, ...); {} when it is gone."""
    try:
        container.reload()
    except Exception:
        return {}
    return dict(container.attrs.get("State") or {})


def remove_container(container) -> None:
    """Kill and remove; a container that is already gone is fine."""
    try:
        container.remove(force=True)
    except Exception:
        pass


def volume_exists(name: str) -> bool:
    from docker.errors import NotFound

    try:
        client().volumes.get(name)
        return True
    except NotFound:
        return False


class RegistryLookupError(Exception):
    """A registry lookup through the engine failed. `kind`: "not-found" (the engine's 404),
    "refused" (any other engine API error; `message` is its full explanation), "no-answer" (the
    request to the engine timed out or the connection failed)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


def registry_manifest_digest(docker_client, ref: str) -> str:
    """The manifest digest ("sha256:...") the registry serves for `ref`, by the engine's distribution
    inspect (what `docker pull` resolves, with the engine's credentials). Raises RegistryLookupError."""
    import requests
    from docker.errors import APIError, NotFound

    try:
        return docker_client.images.get_registry_data(ref).id
    except NotFound as err:
        raise RegistryLookupError("not-found", str(err.explanation or err)) from None
    except APIError as err:
        raise RegistryLookupError("refused", str(err.explanation or err)) from None
    except requests.RequestException as err:
        raise RegistryLookupError("no-answer", str(err)) from None


def raw_manifest(ref: str, *, timeout: float) -> dict[str, Any]:
    """The raw manifest (or manifest list) JSON a registry serves for `ref`, through
    `docker buildx imagetools inspect --raw`; {} when it cannot be read (no buildx, no answer within
    `timeout` seconds, not JSON)."""
    import subprocess

    try:
        proc = subprocess.run(
            ["docker", "buildx", "imagetools", "inspect", "--raw", ref],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        raw = jsonsafe.parse(proc.stdout) if proc.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, jsonsafe.JsonProblem):
        return {}
    return raw if isinstance(raw, dict) else {}
