"""The host's cgroup version (v1, v1 hybrid, v2) from its mounts, and the `toolkit doctor` check that
says it and warns where Podman runs on cgroup v1 (Podman 5 prints a deprecation warning there on every
command; a newcomer saw it in every bench's output with nothing in doctor about it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolkit.host.doctor_checks import Check, userns_mode


def cgroup_version(proc: Path = Path("/proc")) -> str | None:
    """The host's cgroup version from its mounts (`proc`/self/mounts): "v2" where /sys/fs/cgroup is a
    cgroup2 file system (the unified hierarchy: docs.kernel.org/admin-guide/cgroup-v2.html), "v1
    hybrid" where it holds v1 hierarchies beside a cgroup2 at /sys/fs/cgroup/unified (systemd's
    hybrid mode), "v1" where it holds only v1 ones; None where the mounts cannot be read, hold no
    /sys/fs/cgroup, or hold a file system there with no hierarchy below it (a bare tmpfs: no reading)."""
    try:
        mounts = (proc / "self" / "mounts").read_text(errors="replace")
    except OSError:
        return None
    fstypes: dict[str, str] = {}
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            fstypes[parts[1]] = parts[2]
    top = fstypes.get("/sys/fs/cgroup")
    if top is None:
        return None
    if top == "cgroup2":
        return "v2"
    if fstypes.get("/sys/fs/cgroup/unified") == "cgroup2":
        return "v1 hybrid"
    # v1: a v1 hierarchy mounted below (cpu, memory, ...); a bare tmpfs there holds none: not a reading
    v1 = any(t == "cgroup" and m.startswith("/sys/fs/cgroup/") for m, t in fstypes.items())
    return "v1" if v1 else None


def check_cgroup(version: str | None, info: Mapping[str, Any] | None) -> list[Check]:
    """The cgroup version line, a warning where rootless Docker runs on cgroup v1 (no cgroups: its
    containers' resource limits are discarded), and a warning where Podman runs on cgroup v1: Podman 5 prints "Using
    cgroups-v1 which is deprecated in favor of cgroups-v2 with Podman v5 and will be removed in a
    future version" on every command (the warning a bench's output then carries), and crun refuses a
    hybrid host whose cgroup2 holds controllers. Nothing where the version is unknown, and no warning
    for a Podman before 5 (Debian 12's 4.3: it prints none)."""
    if version is None:
        return []
    checks = [Check("info", "cgroup", f"cgroup {version}{_MEANS.get(version, '')}")]
    if version != "v2" and (
        userns_mode(info) == "rootless Docker engine" or (info or {}).get("CgroupDriver") == "none"
    ):
        checks.append(
            Check(
                "warn",
                "cgroup",
                f"rootless Docker on cgroup {version}: it runs containers without cgroups, so resource limits are "
                "discarded (a memory limit, --memory / bench.memory, does not hold; Docker's rootless docs: "
                "limits need cgroup v2 and systemd); move the host to cgroup v2 (kernel parameter "
                "`systemd.unified_cgroup_hierarchy=1`, then reboot)",
            )
        )
    if (
        version != "v2"
        and info
        and info.get("engine") == "podman"
        and not info.get("error")
        and _podman5(info)
    ):
        checks.append(
            Check(
                "warn",
                "cgroup",
                f"Podman on cgroup {version}: the toolkit works as is, but Podman 5 warns on every command "
                "that cgroup v1 is deprecated and a later release drops it; move the host to cgroup v2 (kernel parameter "
                "`systemd.unified_cgroup_hierarchy=1`, then reboot), or set PODMAN_IGNORE_CGROUPSV1_WARNING=1 "
                "to hide the warning",
            )
        )
    return checks


_MEANS = {  # what the version line means to a newcomer (doctor printed a bare "cgroup v1 hybrid"); what
    # Podman 5 makes of v1 is its own warn line, on a Podman 5 host only (a Docker host was told of it)
    "v2": " (the unified hierarchy: what current Docker and Podman expect)",
    "v1": " (the legacy hierarchy: Docker and Podman run on it)",
    "v1 hybrid": " (legacy v1 controllers beside a cgroup2 at /sys/fs/cgroup/unified, systemd's "
    "hybrid layout: Docker and Podman run on it)",
}


def _podman5(info: Mapping[str, Any]) -> bool:
    """Whether the engine's `server_version` is Podman 5 or later (an unknown version counts as one)."""
    major = str(info.get("server_version") or "").split(".", 1)[0]
    return not major.isdigit() or int(major) >= 5
