"""Mixed release: packages of another distribution release under this host's own (base-files, libc6
from Debian 13 on a Debian 12 host, as `scripts/setup-host.sh --allow-mixed-release` leaves it), read
from `apt-cache policy` and /etc/os-release; one `toolkit doctor` check.
May use: toolkit.core; runs apt-cache (no root, no network); never prints.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from toolkit.host.doctor_checks import Check

RELEASE_PACKAGES = ("base-files", "libc6")
"""Packages whose origin says which release a Debian/Ubuntu host really runs: base-files writes
/etc/os-release, libc6 is what every binary links."""

_SUITE_ALIASES = {"stable", "testing", "unstable", "sid", "oldstable", "oldoldstable", "experimental"}


@dataclass
class AptVersion:
    """One row of `apt-cache policy PKG`'s version table: the version, its pin priority, whether it is
    the installed one, and the archives offering it as (priority, uri, suite), e.g.
    (500, "http://deb.debian.org/debian", "bookworm/main"); /var/lib/dpkg/status is left out."""

    version: str
    priority: int
    installed: bool
    archives: list[tuple[int, str, str]] = field(default_factory=list)


def parse_apt_policy(text: str) -> dict[str, list[AptVersion]]:
    """`LC_ALL=C apt-cache policy PKG...` output (apt 2.x) -> {package: version table rows}.

    Format: a `PKG:` line, `Installed:`/`Candidate:` lines, `Version table:`, then per version a
    line ` *** VERSION PRIO` (installed) or `     VERSION PRIO`, followed by its sources
    `        PRIO URI SUITE/COMPONENT ARCH Packages` or `        PRIO /var/lib/dpkg/status`.
    Lines it does not know are ignored; a package without a version table maps to []."""
    out: dict[str, list[AptVersion]] = {}
    rows: list[AptVersion] | None = None
    for line in text.splitlines():
        if re.fullmatch(r"[A-Za-z0-9.+:-]+:", line):
            rows = out.setdefault(line[:-1].split(":")[0], [])
            continue
        if rows is None:
            continue
        m = re.fullmatch(r" (\*\*\*|   ) (\S+) (-?\d+)", line)
        if m:
            rows.append(AptVersion(m.group(2), int(m.group(3)), m.group(1) == "***"))
            continue
        m = re.fullmatch(r"\s+(-?\d+) (\S+)(?: (\S+))?.*", line)
        if m and rows and m.group(3) and not m.group(2).startswith("/"):
            rows[-1].archives.append((int(m.group(1)), m.group(2), m.group(3)))
    return out


def _release_of(suite: str) -> str:
    """`bookworm-security/main` -> `bookworm`; `noble-updates/universe` -> `noble`."""
    return re.sub(r"-(updates|security|backports|proposed|backports-sloppy)$", "", suite.split("/")[0])


def parse_os_release(text: str) -> dict[str, str]:
    """/etc/os-release (KEY=value lines, values optionally quoted) -> {KEY: value}."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key):
            out[key] = value.strip().strip('"')
    return out


def check_release(os_release: Mapping[str, str], apt_policy: str | None) -> list[Check]:
    """Warn on a mixed-release host: base-files or libc6 installed from another release than the one
    apt prefers (the highest-priority archive offering them), or /etc/os-release naming another
    release than that one (base-files of a newer release wrote it). `apt_policy` is the output of
    read_apt_policy() (None: not an apt host, no check). Returns [] when nothing can be said."""
    if apt_policy is None:
        return []
    table = parse_apt_policy(apt_policy)
    default: set[str] = set()
    foreign: list[str] = []
    for pkg in RELEASE_PACKAGES:
        rows = table.get(pkg) or []
        archives = [a for r in rows for a in r.archives]
        if not archives:
            continue
        top = max(p for p, _, _ in archives)
        preferred = {_release_of(s) for p, _, s in archives if p == top}
        default |= preferred
        inst = next((r for r in rows if r.installed), None)
        if inst is None or not inst.archives:
            continue  # installed version no longer in any archive: its origin is unknown
        origin = {_release_of(s) for _, _, s in inst.archives}
        if not origin & preferred:
            prio = max(p for p, _, _ in inst.archives)
            foreign.append(f"{pkg} {inst.version} is from {'/'.join(sorted(origin))} (apt priority {prio})")
    if not default:
        return []
    name = os_release.get("PRETTY_NAME") or os_release.get("ID", "this host")
    codename = os_release.get("VERSION_CODENAME", "")
    apt_release = "/".join(sorted(default))
    os_differs = bool(codename) and not (default & _SUITE_ALIASES) and codename not in default
    if not foreign and not os_differs:
        return [
            Check(
                "ok",
                "release",
                f"{name}: {', '.join(RELEASE_PACKAGES)} from {apt_release}, apt's default release",
            )
        ]
    said = [f"/etc/os-release says {name}"] if os_differs else []
    top_prio = max(p for pkg in RELEASE_PACKAGES for r in table.get(pkg) or [] for p, _, _ in r.archives)
    return [
        Check(
            "warn",
            "release",
            f"mixed-release host: apt's default release is {apt_release} (priority {top_prio}), but "
            f"{', '.join(said + foreign)}: every later apt operation runs on a half-upgraded system, and results "
            "measured here may not match a clean host of either release. Finish the upgrade (apt sources on "
            "one release, `apt full-upgrade`) or use a clean host; scripts/setup-host.sh takes packages of "
            "another release only with --allow-mixed-release",
        )
    ]


def read_apt_policy(packages: Iterable[str] = RELEASE_PACKAGES, timeout: float = 15) -> str | None:
    """`LC_ALL=C apt-cache policy PACKAGES` on this host, or None where apt-cache is absent or fails
    (not an apt-based host). Reads apt's local lists only: no network, no root."""
    exe = shutil.which("apt-cache")
    if not exe:
        return None
    try:
        proc = subprocess.run(
            [exe, "policy", *packages],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None
