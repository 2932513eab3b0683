"""`toolkit doctor`'s checks of the host, one topic each: device nodes and groups, HSA override, an
iGPU beside the card, the engine (Docker, Podman, rootless user namespaces, subordinate ids, CDI),
base images, the kernel. Each returns [Check]; host.doctor.diagnose runs them and judges each image.
Reads the host, never writes."""

from __future__ import annotations

import grp
import ipaddress
import os
import pwd
import re
import socket
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from toolkit.core.gpuspecs import spec_by_name, spec_by_pci
from toolkit.core.text import one_line
from toolkit.engine.api import address_problem
from toolkit.host.devices import (
    AMD_VENDOR,
    INTEL_VENDOR,
    Gpu,
    rocm_gpus,
    unusable,
)

Level = Literal["ok", "info", "warn", "error"]


@dataclass
class Check:
    level: Level
    topic: str
    message: str


def _name(getter: Any, ident: int) -> str:
    try:
        return getter(ident)[0]
    except KeyError:
        return str(ident)


def _node_check(path: Path, topic: str) -> Check:
    """Owner, group, mode of a device node and whether the current user can open it."""
    st = path.stat()
    owner = f"{_name(pwd.getpwuid, st.st_uid)}:{_name(grp.getgrgid, st.st_gid)} (gid {st.st_gid})"
    kind = "" if stat.S_ISCHR(st.st_mode) else " (not a character device)"
    if os.access(path, os.R_OK | os.W_OK):
        return Check(
            "ok", topic, f"{path}: {stat.filemode(st.st_mode)} {owner}{kind}; current user can open it"
        )
    return Check(
        "info",
        topic,
        f"{path}: {stat.filemode(st.st_mode)} {owner}{kind}; current user cannot open it (host tools "
        f"like rocminfo need group {_name(grp.getgrgid, st.st_gid)}; containers get gid {st.st_gid} "
        "through --group-add)",
    )


def check_devices(gpus: list[Gpu], dev: Path) -> list[Check]:
    checks: list[Check] = []
    kfd = dev / "kfd"
    if kfd.exists():
        checks.append(_node_check(kfd, "kfd"))
    elif any(g.vendor.lower() in ("0x1002", "1002") for g in gpus):  # an AMD GPU without its compute driver
        checks.append(
            Check(
                "warn", "kfd", f"no {kfd}: the amdgpu driver with KFD is not loaded; ROCm images cannot run"
            )
        )
    else:  # nothing to warn about on a host without an AMD GPU: a fact for the ROCm images' lines
        checks.append(Check("info", "kfd", f"no {kfd} (no AMD GPU here): ROCm images cannot run"))
    if not gpus:
        checks.append(
            Check(
                "info",
                "gpu",
                "no GPU found (no KFD GPU node, no AMD or Intel render node in /sys/class/drm): cpu images "
                "run; vulkan images only with --allow-software-gpu (Mesa lavapipe)",
            )
        )
    for g in gpus:
        checks.append(Check("ok", "gpu", f"GPU {g.label()}{_gpu_identity(g)}"))
        node = dev / "dri" / g.render_name
        for _, why in unusable([g], "vulkan", dev):  # another vendor's, or no render node named
            if g.render_name and not node.exists():
                break  # said below
            level: Level = "warn" if g.vendor in (AMD_VENDOR, INTEL_VENDOR) else "info"
            checks.append(Check(level, "gpu", f"GPU {g.index}: {why}; the toolkit never passes it"))
        if not g.render_name:
            continue
        if node.exists():
            checks.append(_node_check(node, "render"))
        else:
            checks.append(Check("warn", "render", f"GPU {g.index}: render node {node} is missing"))
    return checks


def _gpu_identity(g: Gpu) -> str:
    """` at 0000:03:00.0, PCI 1002:7551 rev c0; peak 640 GB/s, 191 TFLOPS FP16 matrix (source)`, or
    why results on it get no roofline (the product is not in toolkit/core/gpuspecs.py)."""
    ids = ":".join(x.removeprefix("0x") for x in (g.vendor, g.device_id) if x)
    rev = f" rev {g.revision.removeprefix('0x')}" if g.revision else ""
    where = (f" at {g.pci_bus}" if g.pci_bus else "") + (f", PCI {ids}{rev}" if ids else "")
    spec = spec_by_pci(g.vendor, g.device_id, g.revision) or (spec_by_name(g.name) if g.name else None)
    if spec:
        return (
            f"{where}; roofline yardstick: {spec.product}, {spec.mem_bw_gbs:g} GB/s, "
            f"{spec.fp16_matrix_tflops:g} TFLOPS FP16 matrix ({spec.source})"
        )
    if g.is_igpu:
        return where
    return f"{where}; no peak figures for this product: its results get no roofline"


def _override_arch(value: str) -> str | None:
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", value.strip())
    if not m:
        return None
    major, minor, step = (int(x) for x in m.groups())
    return f"gfx{major}{minor:x}{step:x}"


def check_hsa_override(env: Mapping[str, str], gpus: list[Gpu]) -> list[Check]:
    value = env.get("HSA_OVERRIDE_GFX_VERSION")
    if value is None:
        return []
    archs = sorted({g.gfx_target for g in rocm_gpus(gpus) if g.gfx_target}) or ["gfx1201"]
    fake = _override_arch(value)
    others = [a for a in archs if a != fake]
    if fake is None:
        effect = "it is not major.minor.step, so the ROCm runtime refuses to start"
    elif not others:
        effect = (
            f"it equals the GPU's own arch ({fake}), so it changes nothing here but hides a wrong value later"
        )
    else:
        effect = (
            f"it makes the runtime treat {'/'.join(others)} as {fake}; a wrong value loads the wrong kernels"
        )
    native = (
        "gfx1201 is supported natively since ROCm 6.4 and needs no override"
        if "gfx1201" in archs
        else "images built for the host's own arch need no override"
    )
    return [Check("warn", "env", f"HSA_OVERRIDE_GFX_VERSION={value} is set: {effect}. {native}; unset it")]


def check_igpu(gpus: list[Gpu]) -> list[Check]:
    amd = rocm_gpus(gpus) or [g for g in gpus if g.vendor in (AMD_VENDOR, INTEL_VENDOR)]
    igpus = [g for g in amd if g.is_igpu]
    dgpus = [g for g in amd if not g.is_igpu]
    if not (igpus and dgpus):
        return []
    return [
        Check(
            "warn",
            "igpu",
            f"iGPU {', '.join(g.label() for g in igpus)} is visible next to "
            f"{', '.join(g.label() for g in dgpus)}: rocBLAS may abort (no Tensile library for the iGPU's "
            f"arch); the toolkit passes only the discrete GPU{'s' if len(dgpus) > 1 else ''} and names the "
            "iGPU as hidden, or pass --gpu N",
        )
    ]


def _buildx_version(info: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(known?, version): whether docker_info says anything about buildx, and its version
    (`0.13.1+ds1` of `docker buildx version`'s `github.com/docker/buildx 0.13.1+ds1 0.13.1+ds1-3`:
    module, version, revision)."""
    for key in ("buildx_version", "BuildxVersion", "buildx"):
        if key in info:
            words = str(info[key] or "").split()
            return True, (words[1] if len(words) > 1 and words[0].endswith("/buildx") else info[key]) or None
    client = info.get("ClientInfo")
    if isinstance(client, Mapping):
        for plugin in client.get("Plugins") or []:
            if isinstance(plugin, Mapping) and plugin.get("Name") == "buildx":
                return True, fact_text(plugin.get("Version")) or "present"
        return True, None
    return False, None


def check_podman(info: Mapping[str, Any]) -> list[Check]:
    """Podman's lines: version and mode (rootful/rootless), the builder (buildah), and on rootless
    Podman the OCI runtime (keep-groups, the only way device groups reach a rootless container, needs crun)."""
    rootless = bool(info.get("rootless"))
    mode = "rootless" if rootless else "rootful"
    checks = [
        Check(
            "ok",
            "engine",
            f"Podman {info.get('server_version') or 'unknown version'} ({mode}; Docker API "
            f"{info.get('api_version') or '?'})",
        )
    ]
    if "buildah" in info:
        checks.append(
            Check("ok", "engine", f"podman build (buildah {info['buildah']})")
            if info["buildah"]
            else Check("warn", "engine", "podman build: buildah version not reported (`podman info`)")
        )
    if info.get("storage_driver") == "vfs":
        checks.append(
            Check(
                "warn",
                "engine",
                "Podman stores images with the vfs driver (a full copy of every layer: slow builds, several times "
                'the disk): set `driver = "overlay"` under [storage] in ~/.config/containers/storage.conf '
                "(rootless) or /etc/containers/storage.conf, then `podman system reset`",
            )
        )
    runtime = info.get("oci_runtime")
    if rootless and runtime and runtime != "crun":
        checks.append(
            Check(
                "warn",
                "engine",
                f"rootless Podman runs containers with {runtime}: GPU device groups pass only with "
                '`--group-add keep-groups`, which needs crun; install crun and set `runtime = "crun"` in '
                "~/.config/containers/containers.conf",
            )
        )
    return checks


SUBID_MIN = 65536
"""IDs a rootless engine's user namespace needs: a Debian image's files use IDs up to 65534 (nobody)."""


def check_subids(info: Mapping[str, Any] | None, etc: Path, uid: int | None = None) -> list[Check]:
    """A rootless engine maps the image's users and groups into this user's ranges in /etc/subuid and
    /etc/subgid (`USER:START:COUNT` or `UID:START:COUNT`). Without one of SUBID_MIN IDs every layer
    fails to unpack ("potentially insufficient UIDs or GIDs available in user namespace"): an error
    saying the line that fixes it. Nothing on a rootful engine."""
    if not info or info.get("error") or not info.get("rootless"):
        return []
    uid = os.getuid() if uid is None else uid
    try:
        names = {str(uid), pwd.getpwuid(uid).pw_name}
    except KeyError:
        names = {str(uid)}
    user = max(names, key=len)
    short = []
    for kind in ("subuid", "subgid"):
        counts = [
            int(f[2])
            for line in read_text(etc / kind).splitlines()
            if len(f := line.strip().split(":")) == 3 and f[0] in names and f[2].isdigit()
        ]
        if sum(counts) < SUBID_MIN:
            short.append(
                f"{etc / kind} gives {user} {sum(counts)} IDs"
                if counts
                else f"{etc / kind} has no range for {user}"
            )
    if not short:
        return []
    return [
        Check(
            "error",
            "engine",
            f"rootless {info.get('engine', 'engine')}: {'; '.join(short)} (at least {SUBID_MIN} needed): no image "
            f'can be built or loaded ("insufficient UIDs or GIDs"); fix: `sudo usermod --add-subuids '
            f"100000-165535 --add-subgids 100000-165535 {user} && podman system migrate`, or run "
            "scripts/setup-host.sh --podman",
        )
    ]


def check_rootless_devices(
    info: Mapping[str, Any] | None, dev: Path = Path("/dev"), access: Callable[[str, int], bool] = os.access
) -> list[Check]:
    """On rootless Podman: which GPU device nodes (/dev/kfd, /dev/dri/renderD*) it can pass and which
    not. A rootless container keeps this user's supplementary groups (`--group-add keep-groups`), so
    a node opens inside exactly where this user can open it read-write on the host (`access`); its
    host GID itself does not map into the user namespace. [] on other engines."""
    if not info or info.get("engine") != "podman" or not info.get("rootless"):
        return []
    nodes = ([dev / "kfd"] if (dev / "kfd").exists() else []) + sorted((dev / "dri").glob("renderD*"))
    if not nodes:
        return [
            Check(
                "info",
                "engine",
                f"rootless Podman: no GPU device node here ({dev}/kfd, {dev}/dri/renderD*), nothing to pass; "
                "where there is one it passes it only if this user can open it (keep-groups)",
            )
        ]
    out = []
    for node in nodes:
        try:
            st = node.stat()
        except OSError as err:
            out.append(Check("warn", "engine", f"rootless Podman: {node}: cannot stat ({err.strerror})"))
            continue
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        mode = f"group {group}, mode {stat.S_IMODE(st.st_mode):04o}"
        if access(str(node), os.R_OK | os.W_OK):
            out.append(
                Check(
                    "ok",
                    "engine",
                    f"rootless Podman can pass {node} ({mode}): this user opens it; keep-groups",
                )
            )
        else:
            user = pwd.getpwuid(os.getuid()).pw_name if _has_user(os.getuid()) else str(os.getuid())
            out.append(
                Check(
                    "warn",
                    "engine",
                    f"rootless Podman cannot pass {node} ({mode}): this user cannot open it, and a rootless "
                    f"container has no more rights than its user; `sudo usermod -aG {group} {user}`, then log "
                    "in again (or run as root: rootful Podman)",
                )
            )
    return out


def check_cdi(info: Mapping[str, Any] | None, spec: Path | None) -> list[Check]:
    """On Podman, where a CDI spec for amd.com/gpu exists (`spec`, from devices.amd_cdi_spec): say so,
    and that the toolkit passes the same devices as nodes (Podman's Docker-compatible API, which the
    toolkit creates containers through, does not take CDI names). [] otherwise."""
    if not info or info.get("engine") != "podman" or spec is None:
        return []
    return [
        Check(
            "info",
            "engine",
            f"CDI spec for amd.com/gpu: {spec} (`podman run --device amd.com/gpu=all` works by hand); the "
            "toolkit passes the same devices as nodes, since Podman's Docker-compatible API does not take CDI names",
        )
    ]


def _has_user(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def check_docker(info: Mapping[str, Any] | None) -> list[Check]:
    if info is not None and info.get("engine") == "podman" and not info.get("error"):
        return check_podman(info)
    if info is None or info.get("error"):
        why = f"{info['error']}" if info else "is dockerd running? can this user use its socket?"
        name = "Podman" if info and info.get("engine") == "podman" else "Docker engine"
        said = why if why.startswith(f"{name} not reachable") else f"{name}: not reachable ({why})"
        return [Check("error", "docker", said)]  # the engine's own error names it once, not twice
    raw_server = info.get("Server")
    server: Mapping[str, Any] = raw_server if isinstance(raw_server, Mapping) else {}
    version = (
        info.get("ServerVersion")
        or info.get("server_version")
        or fact_text(info.get("version"))
        or fact_text(server.get("Version"))
    )
    api = info.get("ApiVersion") or info.get("api_version") or fact_text(server.get("ApiVersion"))
    checks = [
        Check(
            "ok", "docker", f"Docker engine {version or 'unknown version'}" + (f" (API {api})" if api else "")
        )
    ]
    known, buildx = _buildx_version(info)
    if buildx:
        checks.append(Check("ok", "docker", f"buildx {buildx}"))
    elif known:
        checks.append(
            Check("warn", "docker", "buildx not installed: BuildKit builds fail; install docker-buildx")
        )
    else:
        checks.append(Check("info", "docker", "buildx: version not reported"))
    remap = userns_mode(info)
    if remap:
        checks.append(
            Check(
                "warn",
                "docker",
                f"{remap}: {userns_why(remap)}; GPU images count as runnable only when a "
                "one-shot container proves it can open the device nodes",
            )
        )
    return checks


USERNS_WHY = (
    "host GIDs passed with --group-add (video, render) do not map into its containers, so /dev/kfd and "
    "the render nodes likely cannot be opened there"
)


PODMAN_ROOTLESS_WHY = (
    "host GIDs do not map into its user namespace; a device node opens inside only through "
    "`--group-add keep-groups` (crun), where this user can open it on the host"
)

USERNS_UNKNOWN = "Docker engine that reported no security options"
"""userns_mode where `docker info` names none (an empty or absent SecurityOptions: an old or proxied
API): rootless or remapped cannot be told from rootful, so device access is not taken for granted."""


def userns_why(mode: str) -> str:
    """Why GPU images on an engine of userns_mode `mode` may not open their device nodes."""
    if mode == "rootless Podman":
        return PODMAN_ROOTLESS_WHY
    if mode == USERNS_UNKNOWN:
        return "whether it is rootless or user-namespace-remapped is unknown, and if it is, " + USERNS_WHY
    return USERNS_WHY


def _security_names(opts: Any) -> set[str]:
    """The names in `docker info` SecurityOptions, whatever the API's form: `name=rootless` (API 1.26+;
    `name=seccomp,profile=builtin`), `{"Key": "Name", "Value": "rootless"}` (API 1.25), `rootless`."""
    names: set[str] = set()
    for o in opts if isinstance(opts, list) else []:
        if isinstance(o, Mapping):
            if str(o.get("Key", "")).lower() == "name":
                names.add(str(o.get("Value", "")).strip().lower())
            continue
        for part in str(o).split(","):
            key, eq, value = part.partition("=")
            if key.strip().lower() == "name" or not eq:
                names.add((value if eq else key).strip().lower())
    return names


def userns_mode(info: Mapping[str, Any] | None) -> str | None:
    """ "rootless Podman", "rootless Docker engine" / "user-namespace-remapped Docker engine" from
    engine_info (`engine`, `rootless`) and `docker info` SecurityOptions (`rootless`, `userns`, in
    any of the API's forms), USERNS_UNKNOWN where a reachable Docker engine's SecurityOptions are
    given but name nothing, else None (rootful; an info without the key: a caller that did not ask)."""
    info = info or {}
    if info.get("engine") == "podman":
        return "rootless Podman" if info.get("rootless") else None
    if info.get("error"):
        return None
    names = _security_names(info.get("SecurityOptions"))
    if "rootless" in names or info.get("rootless") is True:
        return "rootless Docker engine"
    if "userns" in names:
        return "user-namespace-remapped Docker engine"
    if "SecurityOptions" in info and not names:
        return USERNS_UNKNOWN
    return None


REMOTE_WHY = (
    "its containers get the GPUs and device nodes of the host it runs on, and the ones doctor reads here "
    "(this host's sysfs and /dev) say nothing about them; run `toolkit doctor` on that host"
)

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
RESOLVE_TIMEOUT_S = 2.0
"""The longest _this_host waits for the resolver (a DNS server that does not answer keeps getaddrinfo
for its retries: 5 s a try by default, more where resolv.conf says so)."""


def _this_host(host: str, hostname: str | None) -> bool | None:
    """Whether the address `host` of DOCKER_HOST reaches this host: `localhost` and its kin (`localhost.`,
    `*.localhost`, `ip6-localhost`), this host's own name (`hostname`, its first label compared as
    remote_engine compares a daemon's), or a name or address every address of which, as the resolver
    gives them to the client that connects (getaddrinfo: `127.1`, `0x7f.1`, `2130706433`,
    `[::ffff:127.0.0.1]`, an /etc/hosts or DNS name), is a loopback or unspecified one or one of this
    host's own interfaces (_own_address). None (not this host, as far as known) where the resolver
    gave no answer within RESOLVE_TIMEOUT_S."""
    from toolkit.host.telemetry import ReadTimeout, timeboxed

    name = host.strip().lower().removesuffix(".")
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    if hostname and not _is_address(name) and _short_host(name) == _short_host(hostname):
        return True
    asked = name.partition("%")[0] if ":" in name else name  # the zone of fe80::1%eth0 is _own_address's
    try:
        answer = timeboxed(lambda: socket.getaddrinfo(asked, None), RESOLVE_TIMEOUT_S, f"resolving {asked}")
        addrs = [ipaddress.ip_address(a) for a in {str(a[4][0]).partition("%")[0] for a in answer}]
    except ReadTimeout:
        return None
    except (OSError, ValueError, UnicodeError):  # unresolved, or not an address the resolver gave
        return False
    return bool(addrs) and all(_local(getattr(a, "ipv4_mapped", None) or a) for a in addrs)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        return False
    return True


def _local(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return addr.is_loopback or addr.is_unspecified or _own_address(addr)


def _own_address(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `addr` belongs to one of this host's interfaces (its LAN address, a bridge's gateway such
    as docker0's 172.17.0.1): the routing table's own answer, a UDP connect to it (no packet is sent)
    takes `addr` itself as its source address, as only a `local` route gives. Not a bind: with
    net.ipv4.ip_nonlocal_bind=1 (keepalived, VIP hosts) a bind to any address succeeds, and a bind to a
    broadcast or multicast address always does; neither is this host."""
    family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((str(addr), 9))
            source = str(probe.getsockname()[0]).partition("%")[0]
        return ipaddress.ip_address(source) == addr
    except (OSError, ValueError):  # no route, a broadcast address (EACCES), a source it cannot read
        return False


_LOCAL_CONTEXTS = frozenset({"", "default", "rootless"})
"""Docker CLI contexts that are this host's own engine (`docker context ls`: the default socket, the
rootless one `dockerd-rootless-setuptool.sh` names)."""


def _short_host(name: str) -> str:
    return name.strip().split(".")[0].lower()


def _daemon_elsewhere(info: Mapping[str, Any], hostname: str | None) -> str | None:
    """The daemon host a `docker info` names (`Name`) where it is not this one (`hostname`, first
    labels compared), else None (no name, no hostname, or the same host)."""
    daemon = info.get("Name")
    if not isinstance(daemon, str) or not daemon.strip() or not hostname:
        return None
    return None if _short_host(daemon) == _short_host(hostname) else daemon


def remote_engine(info: Mapping[str, Any] | None, env: Mapping[str, str], hostname: str | None) -> str | None:
    """`remote Docker engine at ssh://gpu-node-7 (DOCKER_HOST)` where the engine doctor judges images
    for does not run on this host, else None:

    - DOCKER_HOST (Podman: CONTAINER_HOST) is a tcp://, ssh:// or http(s):// address of another host
      (not a loopback address, localhost or this host's name: _this_host);
    - or a `docker info` whose client used a context other than this host's (ClientInfo.Context not
      `default` or `rootless`: a remote context, Docker Desktop's VM) names a daemon host (`Name`)
      other than this one (`hostname`).

    Its containers get that host's GPUs and device nodes (REMOTE_WHY)."""
    info = info or {}
    podman = info.get("engine") == "podman"
    var = "CONTAINER_HOST" if podman else "DOCKER_HOST"
    name = "Podman" if podman else "Docker engine"
    where = str(env.get(var) or "").strip()
    scheme, host = "", ""  # a malformed address (the engine's client refuses it): the engine check says so
    if not address_problem(where):
        scheme, host = where.partition("://")[0].lower(), urlsplit(where).hostname or ""
    if scheme in ("tcp", "ssh", "http", "https") and host and not (here := _this_host(host, hostname)):
        late = f": {host} did not resolve in {RESOLVE_TIMEOUT_S:g} s, taken as another host"
        return f"remote {name} at {scheme}://{host} ({var}{'' if here is False else late})"
    client = info.get("ClientInfo")
    context = str(client.get("Context") or "") if isinstance(client, Mapping) else ""
    daemon = _daemon_elsewhere(info, hostname)
    if context.lower() not in _LOCAL_CONTEXTS and daemon is not None:
        return f"remote {name} on host {one_line(daemon)[:64]!r} (docker context {one_line(context)[:64]!r})"
    return None


def check_engine_host(
    info: Mapping[str, Any] | None, remote: str | None, hostname: str | None
) -> list[Check]:
    """A warning where the engine runs on another host (`remote`: remote_engine), or where its
    `docker info` names a daemon host (`Name`) other than this one (`hostname`) through this host's
    own context (a forwarded socket, an engine in a VM or container): the device checks above are
    this host's."""
    if remote:
        return [
            Check(
                "warn",
                "docker",
                f"{remote}: {REMOTE_WHY}; GPU images count as runnable only when a one-shot container "
                "proves it can open the device nodes",
            )
        ]
    daemon = None if (info or {}).get("error") else _daemon_elsewhere(info or {}, hostname)
    if daemon is None:
        return []
    return [
        Check(
            "warn",
            "docker",
            f"the engine's daemon runs on a host named {one_line(daemon)[:64]!r} (docker info Name), this "
            f"host is {hostname!r}: if it is another machine or a VM (a forwarded socket), its containers do "
            "not get the GPUs and device nodes read here",
        )
    ]


def engine_facts(info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Any engine description doctor may be given, in engine_info's shape (`engine`, `rootless`,
    `server_version`, `api_version`, `SecurityOptions`, on Podman `oci_runtime`, `storage_driver`, `buildah`;
    `error` where the engine was not reached), its own keys kept beside them:

    - engine_info's own dict (it has `engine`): as it is;
    - `docker info --format json` of Docker: rootless from SecurityOptions `name=rootless`; a client
      that reached no daemon (`ServerErrors`, no ServerVersion) is an `error`, not an engine;
    - the same of Podman's Docker-compatible API (`BuildahVersion`, `Rootless`: Podman 3 writes no
      `name=rootless`): Podman, rootless where either says so;
    - `podman info --format json` (`host`, `store`, `version`; `host.security.rootless`, Podman 1's
      `host.rootless`): Podman.

    None stays None."""
    if info is None:
        return None
    if not isinstance(info, Mapping):  # a list, a number: no engine said anything doctor can read
        kind = type(info).__name__
        return {"engine": "docker", "error": f"Docker engine not reachable: its description is a JSON {kind}"}
    if "engine" in info:
        return _texts(dict(info))
    out: dict[str, Any] = dict(info)
    said_rootless = "rootless" in _security_names(info.get("SecurityOptions"))
    host, version = info.get("host"), info.get("version")
    if isinstance(host, Mapping) and isinstance(version, Mapping | None):  # `podman info`

        def part(of: Mapping[str, Any], key: str) -> Mapping[str, Any]:
            got = of.get(key)
            return got if isinstance(got, Mapping) else {}

        security, runtime, store = part(host, "security"), part(host, "ociRuntime"), part(info, "store")
        version = part(info, "version")
        out |= {
            "engine": "podman",
            "rootless": bool(security.get("rootless", host.get("rootless"))),
            "server_version": version.get("Version"),
            "api_version": version.get("APIVersion"),
            "buildah": host.get("buildahVersion") or host.get("BuildahVersion"),
            "oci_runtime": runtime.get("name"),
            "storage_driver": store.get("graphDriverName") or store.get("GraphDriverName"),
        }
    elif "BuildahVersion" in info or "Rootless" in info:  # Podman's Docker-compatible `/info`
        out |= {
            "engine": "podman",
            "rootless": info.get("Rootless") is True or said_rootless,
            "server_version": info.get("ServerVersion"),
            "buildah": info.get("BuildahVersion"),
            "oci_runtime": info.get("DefaultRuntime"),
            "storage_driver": info.get("Driver"),
        }
    else:
        out |= {"engine": "docker", "rootless": said_rootless}
    said = info.get("ServerErrors")
    errors = [one_line(str(e)) for e in (said if isinstance(said, list) else [said]) if e]
    if errors and not (out.get("server_version") or info.get("ServerVersion")):
        name = "Podman" if out["engine"] == "podman" else "Docker engine"
        out["error"] = f"{name} not reachable: {errors[0][:200]}"
    return _texts(out)


_TEXT_FACTS = (
    *("server_version", "api_version", "ServerVersion", "ApiVersion", "buildah", "oci_runtime"),
    *("storage_driver", "buildx", "buildx_version", "BuildxVersion"),
)
"""The facts of an engine's description doctor prints as they are (engine_facts: fact_text makes each)."""


def fact_text(value: Any) -> str | None:
    """A version or name from an engine's description as one short line: a string or number on one
    line, controls stripped, at most 100 characters; None for anything else (a list, an object, a
    boolean, null: nothing doctor could print as a version)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return one_line(str(value)).strip()[:100] or None


def _texts(out: dict[str, Any]) -> dict[str, Any]:
    """`out` with the facts doctor prints (_TEXT_FACTS) as fact_text makes them, and `engine` one of
    docker or podman."""
    out |= {key: fact_text(out[key]) for key in _TEXT_FACTS if key in out}
    if out.get("engine") not in ("docker", "podman"):
        out["engine"] = "docker"
    return out


DeviceProbe = Callable[[str, str], "str | None"]
"""probe(image name, backend) -> None when a one-shot container of that image opened every device
node its profile passes, else why not (the CLI runs it through the engine; see cli.doctor)."""


def check_base_images(results: Mapping[str, str | None]) -> list[Check]:
    """One check per local base image the matrix's templates build FROM: `results` maps the image
    reference to None (it runs a command as root and as a non-root user) or the reason it does not
    (engine.probe_base_image). A base that cannot run makes every build on it fail at its first RUN."""
    checks = []
    for ref, why in sorted(results.items()):
        if why is None:
            checks.append(Check("ok", "base", f"image {ref} runs a command (as root and as a non-root user)"))
        else:
            checks.append(
                Check(
                    "error",
                    "base",
                    f"image {ref} is local but cannot run a command ({why}): every build FROM it fails at its "
                    f"first RUN step; `./scripts/setup-host.sh` makes the Debian bases anew, any other: "
                    f"`docker rmi {ref}`, then pull or rebuild it",
                )
            )
    return checks


def check_kernel(facts: Mapping[str, Any]) -> list[Check]:
    module = facts.get("amdgpu_module")
    driver = "amdgpu not loaded" if module is None else f"amdgpu {module}"
    notable = facts.get("cmdline_notable") or []
    flags = (
        f"kernel parameters: {' '.join(notable)} (recorded with results; e.g. amd_iommu=off changes results by "
        "5-12% on some hosts)"
        if notable
        else "no GPU-relevant kernel parameters"
    )
    return [Check("info", "kernel", f"kernel {facts.get('kernel', '?')}, {driver}; {flags}")]


def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
