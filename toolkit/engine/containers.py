"""Containers: the run spec and its exact CLI equivalent (`docker run` / `podman run`, for
`--dry-run`), create (the libpod API where rootless Podman needs keep-groups), run to completion with
each output line handed on, probes (device access, base images), the toolkit's own containers,
volumes, exec and logs of long-lived ones."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from toolkit.core import signals
from toolkit.core.errors import BadInput, EngineUnavailable
from toolkit.engine.choice import (
    CONTAINER_LABEL,
    HOST_LABEL,
    _first_line,
    _timed_out,
    cli,
    client,
    engine_label,
    host_id,
    podman_rootless,
)

T = TypeVar("T")


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
    entrypoint: list[str] | None = None  # replaces the image's ENTRYPOINT (None: the image's own)
    user: str | None = None  # UID[:GID] the command runs as (None: the image's USER)


def run_command(spec: RunSpec) -> list[str]:
    """The exact `docker run` (on Podman `podman run`) equivalent of `start_container(spec)`, for
    --dry-run and the records."""
    cmd = [cli(), "run", "--rm"]
    if spec.name:
        cmd += ["--name", spec.name]
    for flag, values in (
        ("--device", spec.devices),
        ("--group-add", spec.group_add),
        ("--security-opt", spec.security_opt),
        ("--cap-drop", spec.cap_drop),
        ("--cap-add", spec.cap_add),
    ):
        cmd += [word for value in values for word in (flag, value)]
    for flag, one in (("--ipc", spec.ipc_mode), ("--shm-size", spec.shm_size), ("--network", spec.network)):
        cmd += [flag, one] if one else []
    if spec.memory_bytes:
        cmd += ["--memory", str(spec.memory_bytes), "--memory-swap", str(spec.memory_bytes)]
    for cport, hport in spec.ports.items():
        cmd += ["-p", f"127.0.0.1:{hport}:{cport}"]
    for m in spec.mounts:
        cmd += m.cli()
    for k, v in sorted(spec.environment.items()):
        cmd += ["-e", f"{k}={v}"]
    if spec.user:
        cmd += ["--user", spec.user]
    if spec.entrypoint is not None:  # the CLI takes one word; the rest of the list leads the command
        cmd += ["--entrypoint", spec.entrypoint[0] if spec.entrypoint else ""]
        return cmd + [spec.image] + spec.entrypoint[1:] + spec.command
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
    """True when `err` means the engine cannot be talked to (socket gone, connection reset, a gateway's
    502/503/504), False when the engine answered: a 4xx for a wrong request, or a 500 with its own
    explanation (Podman answers a `"` in a bind-mount path so): the engine is there, the request failed."""
    import requests
    import urllib3
    from docker.errors import APIError, DockerException

    if isinstance(err, APIError) and err.response is not None:
        return err.response.status_code in (502, 503, 504)
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
    """Start `spec` detached through the SDK (labelled so orphans can be found and removed). A start
    that failed removes its container; one failed by a runtime flake is made again (_retrying)."""

    def once():
        container = create_container(spec)
        try:
            _start(container)
        except Exception:
            remove_container(container)
            raise
        return container

    return _retrying(once)


def create_container(spec: RunSpec):
    """Create (not start) `spec` through the SDK, labelled with CONTAINER_LABEL and this host's id.
    On rootless Podman with `keep-groups` the libpod API creates it (`libpod_spec`): Podman's
    Docker-compatible API takes `keep-groups` for a group name (Podman 4.3.1: `looking up
    supplemental groups ...: Unable to find group keep-groups`) and has no field for the annotation
    that means it."""
    c = client()
    if KEEP_GROUPS in spec.group_add and podman_rootless():
        return _create_libpod(c, spec)
    from docker.types import Mount as SdkMount

    mounts = [
        SdkMount(
            target=m.target, source=m.source, type="volume" if m.volume else "bind", read_only=m.read_only
        )
        for m in spec.mounts
    ]
    kwargs: dict[str, Any] = dict(
        image=spec.image,
        command=spec.command,
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
        entrypoint=spec.entrypoint,
        user=spec.user,
        network=spec.network or None,
        mem_limit=spec.memory_bytes or None,
        memswap_limit=spec.memory_bytes or None,
        ports={k: ("127.0.0.1", v) for k, v in spec.ports.items()} or None,
    )
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
        **({"entrypoint": list(spec.entrypoint)} if spec.entrypoint is not None else {}),
        **({"user": spec.user} if spec.user else {}),
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
    out.update(_libpod_security(spec.security_opt))
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


def _libpod_security(options: list[str]) -> dict[str, Any]:
    """The SpecGenerator fields of docker-style security options; BadInput for one not translated."""
    fields: dict[str, Any] = {}
    for opt in options:
        if opt == "no-new-privileges":
            fields["no_new_privileges"] = True
        elif opt == "seccomp=unconfined":
            fields["seccomp_profile_path"] = "unconfined"
        else:
            raise BadInput(f"security option {opt!r} is not translated for rootless Podman's libpod API")
    return fields


def _create_libpod(c, spec: RunSpec):
    """Create `spec` through the libpod API (see create_container); returns the SDK's container."""
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


class _Capture:
    """What a running container printed so far, and whether it was killed for running past its timeout."""

    def __init__(self, on_stdout: Callable[[str], None] | None, on_stderr: Callable[[str], None] | None):
        self.t0 = time.monotonic()
        self.out, self.err = _Lines(on_stdout), _Lines(on_stderr)
        self.timed_out = threading.Event()
        self.hung = threading.Event()  # the engine did not end the run ENGINE_GRACE_S past its timeout

    def pump(self, stream) -> None:
        """Feed the attach stream's (stdout, stderr) chunks on until the container stops."""
        for o, e in stream:
            if o:
                self.out.feed(o)
            if e:
                self.err.feed(e)
        self.out.close()
        self.err.close()

    def outcome(self, code: int, *, oom_killed: bool = False, seconds: float | None = None) -> RunOutcome:
        """The outcome with what was printed so far (`seconds`: wall time until now when None)."""
        if seconds is None:
            seconds = time.monotonic() - self.t0
        return RunOutcome(code, self.out.text, self.err.text, seconds, self.timed_out.is_set(), oom_killed)


ENGINE_GRACE_S = 120.0
"""How long past its timeout a run may go on: the engine has that long to stop the container and say
so. A hung engine (its socket open, no answer) answered neither the attach stream nor `wait`, and the
run waited for ever; past this, the stream is closed and the run ends as the engine lost (exit 5)."""


def _close_quietly(stream) -> None:
    """Close an attach stream from another thread (its blocked read returns); None or closed is fine."""
    with contextlib.suppress(Exception):  # None: its AttributeError
        stream.close()


def _kill_quietly(container) -> None:
    """Kill the container; one that is already gone (or an engine that does not answer) is fine."""
    with contextlib.suppress(Exception):
        container.kill()


def _report_pid(container, on_start: Callable[[int], None]) -> None:
    """Call `on_start` with the container's main process's host pid (0 when the engine does not say);
    observing is best effort: a failure here does not stop the run."""
    with contextlib.suppress(Exception):
        container.reload()
        on_start(int(container.attrs.get("State", {}).get("Pid") or 0))


def _release(container, stream, *, remove: bool = True) -> None:
    """Close the attach stream's HTTP response and remove the container (unless not `remove`: an engine
    that stopped answering, whose removal would wait out another request timeout; what it leaves is
    removed at the next start), whatever happens."""
    # the attach stream holds an HTTP response (docker's CancellableStream._response): closed here
    # while its socket is still open, not left to the interpreter's exit, where urllib3 printed
    # "Exception ignored ... I/O operation on closed file" on Python 3.13 after a successful bench
    with contextlib.suppress(Exception):  # none there (AttributeError): nothing to close
        stream._response.close()
    if remove:
        with contextlib.suppress(Exception):
            container.remove(force=True)


RUNTIME_FLAKES = ("read init-p", "init preliminary setup")
"""Text of runc failing to hand a container's first process its setup over a pipe ("OCI runtime
create failed: ... waiting for init preliminary setup: read init-p: connection reset by peer"): the
runtime's failure, not the image's (seen once in CI, a loaded 2-core host, starting debian:trixie-slim).
Nothing ran, and a start a moment later succeeds. Sources: moby/moby#42953, gitpod-io/gitpod#9247
(which retries it)."""

START_TRIES = 3
"""How many times in all a container whose start failed with a runtime flake is created and started."""


def is_runtime_flake(text: str) -> bool:
    """Whether `text` (an engine's error, a build's cause of a failed step) is the OCI runtime failing to start
    a container for its own reason (RUNTIME_FLAKES)."""
    return any(flake in text for flake in RUNTIME_FLAKES)


class _StartFlake(Exception):
    """A container's start failed for the OCI runtime's own reason (RUNTIME_FLAKES): nothing ran. `last` is
    what the last try gives its caller: the engine's error (raised) or a build's outcome (returned). Raised
    only by _start and by run_buildx of a build whose failed step's cause is one, so no error of a run that
    started (a callback's quoting the output, the engine's) is taken for one."""

    def __init__(self, last: Any, why: str) -> None:
        super().__init__(why)
        self.last = last


def _start(container) -> None:
    """`container.start()`; a failure whose text is a runtime flake (RUNTIME_FLAKES) raised as _StartFlake."""
    try:
        container.start()
    except Exception as err:
        if is_runtime_flake(str(err)):
            raise _StartFlake(err, str(err)) from err
        raise


def _retrying(start: Callable[[], T], on_retry: Callable[[str], None] | None = None) -> T:
    """`start()`, called again a second later when a container's start in it was a runtime flake (_StartFlake),
    START_TRIES times in all; the last try's error is raised, or its outcome returned (a build's). `on_retry`
    is told before each retry: which try comes and why."""
    attempt = 1
    while True:
        try:
            return start()
        except _StartFlake as flake:
            if attempt >= START_TRIES:
                if isinstance(flake.last, BaseException):
                    raise flake.last from None
                return flake.last
            if on_retry:
                on_retry(
                    f"try {attempt + 1} of {START_TRIES}: a container did not start, the OCI runtime's own failure: {flake}"
                )
        attempt += 1
        time.sleep(1.0)


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
    so far. An exception raised by a callback stops the run and propagates. A start that failed with
    a runtime flake (_StartFlake: nothing ran) is made again with a new container (_retrying).
    """
    return _retrying(lambda: _run_once(spec, timeout, on_stderr, on_stdout, on_start))


def _run_once(spec, timeout, on_stderr, on_stdout, on_start) -> RunOutcome:
    run = _Capture(on_stdout, on_stderr)
    container = create_container(spec)

    def _kill() -> None:
        run.timed_out.set()
        _kill_quietly(container)

    timer = threading.Timer(timeout, _kill)
    timer.start()
    stream = None

    def _unhang() -> None:  # the engine has not ended the run ENGINE_GRACE_S past its timeout
        run.hung.set()
        _close_quietly(stream)

    watchdog = threading.Timer(timeout + ENGINE_GRACE_S, _unhang)
    watchdog.start()
    try:
        # attached before the start (as `docker run` does): nothing printed is missed, and the stream
        # ends when the container stops (an attach to a container that already stopped would wait)
        stream = client().api.attach(
            container.id, stdout=True, stderr=True, stream=True, logs=True, demux=True
        )
        _start(container)
        if on_start is not None:
            _report_pid(container, on_start)
        run.pump(stream)
        if run.hung.is_set():
            raise ConnectionError(f"no answer {ENGINE_GRACE_S:.0f} s past the run's {timeout:.0f}-s timeout")
        status = container.wait(timeout=max(1.0, timeout + ENGINE_GRACE_S - (time.monotonic() - run.t0)))
        seconds = time.monotonic() - run.t0
        container.reload()
        oom_killed = bool(container.attrs.get("State", {}).get("OOMKilled"))
        return run.outcome(int(status.get("StatusCode", -1)), oom_killed=oom_killed, seconds=seconds)
    except KeyboardInterrupt:
        signals.hold_for_stop()  # stopping: a second Ctrl-C must not cut the kill, removal or save short
        # keep what was measured before the interrupt: the caller stores it, then re-raises
        _kill_quietly(container)
        raise Interrupted(run.outcome(130)) from None
    except Exception as exc:
        if not is_connection_error(exc):
            raise
        if _timed_out(exc):  # the engine took the request and did not answer: not asked again to remove
            run.hung.set()  # (that waited REQUEST_TIMEOUT_S more: the run ended 240 s past its timeout)
        raise EngineLost(
            f"{engine_label()} connection lost during the run ({str(exc).splitlines()[0][:160]})",
            run.outcome(-1),
        ) from None
    finally:
        timer.cancel()
        watchdog.cancel()
        _release(container, stream, remove=not run.hung.is_set())


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


PROBE_TIMEOUT_S = 30.0
"""How long a base-image probe container may take before doctor says it timed out."""


def probe_base_image(ref: str, *, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Run `sh -c true` as root, then `sh -c 'ls /'` as an unprivileged user (65534:65534), in
    one-shot containers of local image `ref` (no network, the image's ENTRYPOINT replaced: a build's
    RUN step ignores it too). None when both ran, else what failed: the engine's explanation or the
    shell's last line (an empty imported rootfs has no `sh`; a rootfs whose / is mode 0700 lets no
    non-root user exec anything, which overlay2 hides and vfs does not), or that it timed out."""
    for user, script in ((None, "true"), ("65534:65534", "ls / >/dev/null")):
        spec = RunSpec(
            image=ref,
            command=[script],
            entrypoint=["sh", "-c"],
            user=user,
            network="none",
            labels={"org.toolkit.purpose": "base-probe"},
        )
        try:
            out = run_container(spec, timeout=timeout)
        except Exception as err:  # the engine refused to start it (no `sh`, an OCI error): that is the answer
            why = getattr(err, "explanation", None) or _first_line(err)
            return str(why).splitlines()[0][:200] if str(why).strip() else type(err).__name__
        who = "as root" if user is None else f"as user {user}"
        if out.timed_out:
            return f"`sh -c {script!r}` {who} did not finish in {timeout:.0f} s"
        if out.exit_code != 0:
            lines = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.strip()]
            return f"`sh -c {script!r}` {who} exited {out.exit_code}" + (
                f": {lines[-1][:160]}" if lines else ""
            )
    return None


@dataclass
class ContainerInfo:
    """A container as listed: id, name, status (running, exited, created, ...), labels."""

    id: str
    name: str
    status: str
    labels: dict[str, str]


def toolkit_containers() -> list[ContainerInfo]:
    """Every container this toolkit started that still exists on the engine (any run, any state)."""
    return [
        ContainerInfo(ctr.id, ctr.name, ctr.status, dict(ctr.labels or {}))
        for ctr in client().containers.list(all=True, filters={"label": CONTAINER_LABEL}, ignore_removed=True)
    ]


def remove_container_id(container_id: str) -> bool:
    """Kill and remove a container by id; False when it was already gone."""
    from docker.errors import NotFound

    try:
        client().containers.get(container_id).remove(force=True)
        return True
    except NotFound:
        return False


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
        with contextlib.suppress(Exception):
            container.kill()
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
    with contextlib.suppress(Exception):
        container.remove(force=True)


def volume_exists(name: str) -> bool:
    from docker.errors import NotFound

    try:
        client().volumes.get(name)
        return True
    except NotFound:
        return False
