"""Which container engine, and a client of it: Docker, or Podman through its Docker-compatible API
(`podman system service`, started here when its socket does not answer).

Which engine: `engine_name()` — the global `toolkit --engine` option, which sets $TOOLKIT_ENGINE
(docker | podman | auto) for its own invocation, else auto: Docker where DOCKER_HOST is set or a
Docker engine is installed (its socket or `dockerd`), else Podman where `podman` is on PATH, else
Docker (whose error then says how to choose Podman). Rootful Podman (root) and rootless Podman (any
other user) are two engines: separate image stores, separate sockets, separate `engine_id()`s.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from toolkit.core.errors import BadInput, EngineUnavailable
from toolkit.core.text import one_line

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


_INFO: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
"""`docker info` per client (_info): asked once, not by each of engine_id and engine_info."""


def _info(c: Any) -> dict[str, Any]:
    """`docker info` of client `c` (GET /info), asked once per client. What is read of it does not change
    while the engine runs: its ID (kept across restarts), security options and storage driver. A client is one
    engine address for the process (client()); a failed request is not kept."""
    got = _INFO.get(c)
    if got is None:
        got = _INFO[c] = c.info()
    return got


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
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        out = subprocess.run(
            ["podman", "info", "--format", "{{.Host.RemoteSocket.Path}}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        path = out.stdout.strip() if out.returncode == 0 else ""
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


REQUEST_TIMEOUT_S = 120.0
"""How long one request to the Docker engine may wait for its answer (the SDK client's timeout)."""

_UNANSWERED: dict[str, str] = {}
"""DOCKER_HOST -> the message of an engine that took the connection and did not answer in
REQUEST_TIMEOUT_S: asked once a process (bench asked it twice, 240 s, before saying so)."""


def client():
    """A docker SDK client (API version negotiated) of the engine in use, one per engine address for the
    process; every call pings the engine, so an engine that went away is reported here. On Podman the API
    service is started when its socket does not answer. Raises EngineUnavailable with the fix; an engine that
    did not answer in REQUEST_TIMEOUT_S is not asked again by this process."""
    if is_podman():
        return _podman_client()
    import docker
    from docker.errors import DockerException

    where = os.environ.get("DOCKER_HOST", "") or use_docker_context()
    if why := address_problem(where):
        raise EngineUnavailable(
            f"Docker engine not reachable: DOCKER_HOST is malformed (DOCKER_HOST={where!r}: {why}): unset "
            "it to use the local engine, or set it to unix:///var/run/docker.sock or tcp://HOST:PORT"
        )
    c = _cached(where)
    if c is not None:
        return c
    at = f" at DOCKER_HOST={where!r}" if where else ""
    if where in _CONTEXTS:
        at = f" at {where!r} (docker context {_CONTEXTS[where]!r})"
    try:
        c = _adapted(docker.from_env(timeout=REQUEST_TIMEOUT_S))
        c.ping()
        _CLIENTS[where] = c
        return c
    # ValueError: urllib's parse of DOCKER_HOST: "Invalid IPv6 URL", "Port out of range 0-65535", ...
    except ValueError as err:
        raise EngineUnavailable(
            f"Docker engine not reachable: DOCKER_HOST is malformed (DOCKER_HOST={where!r}: "
            f"{_first_line(err)}): unset it to use the local engine, or set it to "
            "unix:///var/run/docker.sock or tcp://HOST:PORT"
        ) from None
    except Exception as err:  # (the cache holds `where` only after a ping answered)
        if _timed_out(err):
            _UNANSWERED[where] = (
                f"Docker engine{at} did not answer in {REQUEST_TIMEOUT_S:.0f} s: its socket takes "
                "connections, so it runs but hangs (or is far overloaded); `docker info` says whether it "
                "answers now; restart it (`sudo systemctl restart docker`) or point DOCKER_HOST at another engine"
            )
            raise EngineUnavailable(_UNANSWERED[where]) from None
        if not isinstance(err, DockerException):
            raise
        msg = _first_line(err)
        fix = unreachable_fix(where, msg, installed=docker_installed(), podman=bool(shutil.which("podman")))
        raise EngineUnavailable(f"Docker engine not reachable{at} ({msg}): {fix}") from None


_HOST_MARKS = frozenset("._~!$&'()*+,;=:@%[]-")
"""What the address of a network DOCKER_HOST may hold beside letters and digits (RFC 3986's authority:
user, host, port; an IPv6 literal and its zone)."""


def address_problem(where: str) -> str | None:
    """Why engine address `where` (DOCKER_HOST, CONTAINER_HOST) is malformed, None where it is not: a scheme
    and no address, or a tcp://, http(s):// or ssh:// address holding a character no host, user or port holds
    (a backslash, a space, a control character) before its path, or one urllib cannot read (an IPv6 bracket
    left open, a port out of range). Readers part at such a character differently (urllib3 and urllib name two
    hosts): the engine is not asked, and doctor judges no host by it (host.doctor_checks.remote_engine)."""
    if where.rstrip("/") in ("unix:", "tcp:", "unix:/", "tcp:/"):
        return "no address"
    scheme, _, rest = where.partition("://")
    if scheme.lower() not in ("tcp", "http", "https", "ssh"):
        return None
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    odd = [c for c in authority if not (c.isalnum() and c.isprintable()) and c not in _HOST_MARKS]
    if odd:
        return f"{odd[0]!r} in its address: no host name, user or port holds one"
    try:
        urlsplit(where).port  # noqa: B018 (read on asking: "Port out of range 0-65535")
    except ValueError as err:  # "Invalid IPv6 URL", an IPv6 zone that is not one
        return _first_line(err)
    return None


def use_docker_context() -> str:
    """The Docker endpoint of the docker CLI's current context where DOCKER_HOST is unset and that context is
    not `default` (DOCKER_CONTEXT, else ~/.docker/config.json's `currentContext`), else "". It is exported as
    DOCKER_HOST for this process and its children, so the SDK's requests (the SDK reads no context) and the
    `docker`/buildx commands the toolkit runs reach one engine. Raises EngineUnavailable for a context that
    does not exist, and for one with TLS material (its certificates are not passed on: export DOCKER_HOST,
    DOCKER_TLS_VERIFY and DOCKER_CERT_PATH)."""
    from docker.context import ContextAPI
    from docker.context.config import get_current_context_name
    from docker.errors import ContextException

    name = os.environ.get("DOCKER_CONTEXT") or get_current_context_name()
    if not name or name == "default" or os.environ.get("DOCKER_HOST"):
        return ""
    said = one_line(name)[:64]
    try:
        ctx = ContextAPI.get_context(name)
    except (ContextException, OSError, ValueError, KeyError, TypeError) as err:
        ctx, why = None, _first_line(err)
    else:
        why = "no such context"
    if ctx is None or not ctx.Host:
        raise EngineUnavailable(
            f"Docker context {said!r} (DOCKER_CONTEXT or `docker context use`) cannot be read ({why}): "
            "`docker context ls` lists the contexts; `docker context use default` (or unset DOCKER_CONTEXT) "
            "uses this host's engine"
        )
    if ctx.TLSConfig:
        raise EngineUnavailable(
            f"Docker context {said!r} reaches {one_line(ctx.Host)[:120]} with TLS, which the toolkit "
            "cannot take from a context: export DOCKER_HOST, DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH "
            "for that engine (`docker context inspect` shows them), or `docker context use default`"
        )
    os.environ["DOCKER_HOST"], _CONTEXTS[ctx.Host] = ctx.Host, said
    return ctx.Host


_CONTEXTS: dict[str, str] = {}
"""DOCKER_HOST set from a docker context (use_docker_context) -> that context's name, for messages."""


def _timed_out(err: BaseException) -> bool:
    """Whether `err` (from building a client or its ping) is a read that got no answer in time:
    requests' ReadTimeout, raised as is or wrapped in the SDK's DockerException."""
    import requests

    while err is not None:
        if isinstance(err, requests.exceptions.ReadTimeout | TimeoutError):
            return True
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return False


def unreachable_fix(where: str, msg: str, *, installed: bool, podman: bool) -> str:
    """What to do when the Docker engine at `where` (DOCKER_HOST, "" for the local one) did not answer
    with `msg`: `installed` whether Docker is on this host (docker_installed), `podman` whether Podman
    is (a Podman-only host asked for Docker by name, `--engine docker`, is told Docker is absent and
    Podman is there, not to start a `dockerd` it does not have)."""
    start = "start it (`sudo dockerd &` or `sudo systemctl start docker`; `scripts/setup-host.sh` does both)"
    if "Permission denied" in msg:
        fix = socket_permission_fix(where)
    elif not where and not installed:
        fix = "Docker is not installed on this host (no `docker`, no `dockerd`): `./scripts/setup-host.sh` installs it"
        if podman:
            fix += (
                "; Podman is installed: `toolkit --engine podman ...` (or TOOLKIT_ENGINE=podman; "
                "`auto`, the default, picks it where Docker is absent)"
            )
    elif not where:
        fix = start
    elif "connect" in msg.lower():  # a usable address where no engine answers
        fix = f"{start}, or point DOCKER_HOST at a running engine (unset it to use the local one)"
    else:  # "Invalid bind address protocol", an npipe:// or ssh:// address this host's SDK cannot use
        fix = (
            f"DOCKER_HOST is the likely cause: the Docker SDK cannot use {where!r}; unset it to use the "
            "local engine, or set it to unix:///var/run/docker.sock or tcp://HOST:PORT"
        )
    if not where and installed and podman and os.environ.get(ENGINE_ENV, "") in ("", "auto"):
        fix += "; or use Podman, installed here: `toolkit --engine podman ...` (or TOOLKIT_ENGINE=podman)"
    return fix


def docker_installed() -> bool:
    """Whether this host has Docker: its socket (/var/run/docker.sock), or its client or daemon on PATH or
    in the system folders a user's PATH lacks (Debian gives a non-root user no /usr/sbin)."""
    if Path("/var/run/docker.sock").exists():
        return True
    dirs = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin")
    return any(
        shutil.which(name) or any(os.access(f"{d}/{name}", os.X_OK) for d in dirs)
        for name in ("docker", "dockerd")
    )


def socket_permission_fix(where: str) -> str:
    """What to do when this user may not open the engine's Unix socket (`where`: DOCKER_HOST, "" for
    the default /var/run/docker.sock): the docker group's line (docker_group_fix) when the socket
    belongs to that group, else who owns it (the group cannot help there)."""
    import grp
    import pwd
    import stat

    path = where[len("unix://") :] if where.startswith("unix://") else "/var/run/docker.sock"
    try:
        st = os.stat(path)
        group = grp.getgrgid(st.st_gid).gr_name
    except (OSError, KeyError):
        return docker_group_fix()
    if group == "docker":
        return docker_group_fix()
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    return (
        f"the socket {path} belongs to {owner}:{group} (mode {stat.filemode(st.st_mode)}), not to the docker "
        "group: ask its owner for access, or unset DOCKER_HOST to use this host's engine"
    )


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
    """The cached client of `key` when it still answers a ping, else None (and forgotten); raises
    EngineUnavailable for an engine that took the connection and did not answer before (_UNANSWERED)."""
    if key in _UNANSWERED:
        raise EngineUnavailable(_UNANSWERED[key])
    c = _CLIENTS.get(key)  # kept while it is pinged: another thread's call meanwhile finds it
    if c is not None:
        with contextlib.suppress(Exception):  # gone or restarted since: start over, as a first call would
            c.ping()
            return c
        _CLIENTS.pop(key, None)
    return None


def _adapted(c):
    """`c` (a docker.DockerClient), told not to read the environment's proxy settings on every request
    when it talks to a Unix socket: proxies do not apply there (the SDK's Unix-socket adapter ignores
    them), yet requests looked them up in os.environ for each call (~0.1 ms of CPU a request, ~50
    requests a bench); and given _error_message as a response hook."""
    if getattr(c.api, "base_url", "") == "http+docker://localhost":  # the SDK's name for a unix:// host
        c.api.trust_env = False
    c.api.hooks["response"].append(_error_message)
    return c


def _error_message(response, *_args, **_kwargs):
    """A requests response hook: an engine's error answer (status >= 400) whose JSON body has no top-level
    string `message` gets one, with the engine's own words (`errorDetail.message`, `error`, else the body; a
    body nested too deep to parse: its first 2,000 characters), so docker-py 7.1's
    create_api_error_from_http_exception raises its APIError, not KeyError, for Podman 5's progress-stream
    errors (`{"errorDetail": {"message": ...}, "error": ...}`)."""
    if response.status_code < 400:
        return response
    try:
        body = response.json()
    except ValueError:  # not JSON: the SDK quotes the text itself
        return response
    except RecursionError:  # nested deeper than the parser goes: the SDK's own read raised it, exit 1
        body = response.text[:2000]
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return response
    detail = body.get("errorDetail") if isinstance(body, dict) else None
    words = (detail.get("message") if isinstance(detail, dict) else None) or (
        body.get("error") if isinstance(body, dict) else None
    )
    if not (isinstance(words, str) and words.strip()):  # a JSON string is its words, not quoted
        words = body if isinstance(body, str) and body.strip() else None
    text = words or json.dumps(body)[:2000]
    response._content = json.dumps({"message": text}).encode()  # requests' body, read once above
    return response


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
            c = _adapted(docker.DockerClient(base_url=f"unix://{path}", timeout=REQUEST_TIMEOUT_S))
            c.ping()
            _CLIENTS[key] = c
            return c
        except Exception as err:  # hung: asked once a process, as Docker's (bench asked 3 times, 360 s)
            if _timed_out(err):
                _UNANSWERED[key] = (
                    f"Podman API at unix://{path} did not answer in {REQUEST_TIMEOUT_S:.0f} s: its socket "
                    "takes connections, so its service runs but hangs (or is far overloaded); `podman info` "
                    "says whether Podman answers; stop that service and start it again "
                    f"(`{shlex.join(podman_service_command(path))} &`), or choose Docker (`--engine docker`)"
                )
                raise EngineUnavailable(_UNANSWERED[key]) from None
            if not isinstance(err, DockerException):
                raise
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
    """Engine and builder versions and security mode: {engine, rootless, server_version, api_version, buildx,
    os, kernel, SecurityOptions}, on Podman also oci_runtime and storage_driver (`engine`: docker | podman;
    `server_version`: Docker's or Podman's own version; `api_version`: the Docker API version it serves;
    SecurityOptions as `docker info` gives them). On Podman `buildx` is replaced by `buildah`. `buildx=False`
    leaves the builder out (a subprocess): a benchmark records the engine that ran it."""
    c = client()
    v = c.version()
    about = _info(c)
    said = about.get("SecurityOptions")  # a list; anything else names nothing (a string is no list of names)
    security = list(said) if isinstance(said, list) else []
    podman = is_podman()
    info = {
        "engine": "podman" if podman else "docker",
        # Podman's Docker-compatible /info says `Rootless` (Podman 3 no `name=rootless`): a DOCKER_HOST
        # at a rootless Podman's socket is a rootless engine, whichever engine_name() guessed
        "rootless": podman_rootless()
        if podman
        else any("name=rootless" in str(s) for s in security) or about.get("Rootless") is True,
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


def engine_id() -> str:
    """The engine's own ID: tells two engines on one host apart. Docker: `docker info` .ID. Podman
    gives a new random ID per request: `podmanroot` for rootful Podman, `podmanu<uid>` for one
    user's rootless Podman (each has its own store and socket: a separate engine)."""
    if is_podman():
        client()  # it must answer, as Docker's must
        return "podmanroot" if not podman_rootless() else f"podmanu{os.geteuid()}"
    return str(_info(client()).get("ID") or "unknown")


def engine_id_text(eid: str) -> str:
    """An engine ID (engine_id) for messages, with how to reach that engine: `podmanu1000` is "podmanu1000
    (the rootless Podman of user debian: run as user debian, without sudo, with --engine podman)"."""
    if eid == "podmanroot":
        return f"{eid} (rootful Podman: run as root, with --engine podman)"
    if (m := re.fullmatch(r"podmanu(\d+)", eid)) is None:
        return f"{eid} (a Docker engine: pick it with DOCKER_HOST or `docker context use`)"
    import pwd

    try:
        who = f"user {pwd.getpwuid(int(m[1])).pw_name}"
    except KeyError:  # a uid without a name here
        who = f"uid {m[1]}"
    return f"{eid} (the rootless Podman of {who}: run as {who}, without sudo, with --engine podman)"
