"""`toolkit doctor`'s mixed-release check, on real `LC_ALL=C apt-cache policy base-files libc6` outputs
and /etc/os-release files (tests/data/apt-policy/, captured 2026-11-30):

- bookworm, trixie: clean debian:bookworm-slim / debian:trixie-slim (debootstrap) after `apt-get update`;
- bookworm-with-trixie-buildx: a clean bookworm after `scripts/setup-host.sh` (its docker.io 20.10 +
  docker-buildx alone from trixie, every other trixie package pinned -1);
- bookworm-upgraded-from-trixie: this development machine, a bookworm host after the old setup recipe
  (`apt-get install -t trixie docker.io docker-buildx`), which took trixie's libc6 and base-files.

Also the setup script's refusal filter, on the real `apt-get -s` plan of that old recipe.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from toolkit.host.doctor import diagnose
from toolkit.host.release import check_release, parse_apt_policy, parse_os_release

DATA = Path(__file__).parent / "data" / "apt-policy"
ROOT = Path(__file__).resolve().parents[1]


def case(name: str):
    return (
        parse_os_release((DATA / f"{name}.os-release").read_text()),
        (DATA / f"{name}.policy.txt").read_text(),
    )


def test_parse_policy_reads_installed_version_and_archives():
    table = parse_apt_policy(case("bookworm-upgraded-from-trixie")[1])
    assert set(table) == {"base-files", "libc6"}
    inst = [r for r in table["libc6"] if r.installed]
    assert [r.version for r in inst] == ["2.41-12+deb13u5"]
    assert inst[0].archives == [(100, "http://deb.debian.org/debian", "trixie/main")]  # dpkg status left out
    assert [(r.version, r.priority) for r in table["libc6"] if not r.installed] == [
        ("2.36-9+deb12u14", 500),
        ("2.36-9+deb12u7", 500),
    ]
    neg = parse_apt_policy(case("bookworm-with-trixie-buildx")[1])["libc6"][0]
    assert (neg.version, neg.priority, neg.installed) == ("2.41-12+deb13u5", -1, False)


@pytest.mark.parametrize(
    "name,release",
    [("bookworm", "bookworm"), ("trixie", "trixie"), ("bookworm-with-trixie-buildx", "bookworm")],
)
def test_clean_hosts_are_ok(name, release):
    (check,) = check_release(*case(name))
    assert check.level == "ok" and check.topic == "release"
    assert f"base-files, libc6 from {release}, apt's default release" in check.message


def test_bookworm_host_with_trixie_libc_is_a_mixed_release_warning():
    (check,) = check_release(*case("bookworm-upgraded-from-trixie"))
    assert check.level == "warn"
    m = check.message
    assert m.startswith("mixed-release host: apt's default release is bookworm (priority 500)")
    assert "/etc/os-release says Debian GNU/Linux 13 (trixie)" in m
    assert "libc6 2.41-12+deb13u5 is from trixie (apt priority 100)" in m
    assert "base-files 13.8+deb13u8 is from trixie" in m
    assert "--allow-mixed-release" in m


def test_os_release_alone_disagreeing_is_a_warning():
    """base-files reinstalled from the archive but os-release edited/left from another release."""
    os_rel, policy = case("bookworm")
    os_rel = {**os_rel, "VERSION_CODENAME": "trixie", "PRETTY_NAME": "Debian GNU/Linux 13 (trixie)"}
    (check,) = check_release(os_rel, policy)
    assert check.level == "warn" and "/etc/os-release says Debian GNU/Linux 13 (trixie)" in check.message
    assert "is from" not in check.message


def test_no_apt_or_no_archive_information_says_nothing():
    os_rel, _ = case("bookworm")
    assert check_release(os_rel, None) == []
    status_only = "libc6:\n  Installed: 2.36\n  Candidate: 2.36\n  Version table:\n *** 2.36 100\n        100 /var/lib/dpkg/status\n"
    assert check_release(os_rel, status_only) == []


def test_diagnose_reports_it_among_the_checks(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "os-release").write_text((DATA / "bookworm-upgraded-from-trixie.os-release").read_text())
    rep = diagnose([], {}, etc=etc, env={}, apt_policy=case("bookworm-upgraded-from-trixie")[1])
    assert [c.level for c in rep.checks if c.topic == "release"] == ["warn"]
    assert diagnose([], {}, etc=etc, env={}).checks == [c for c in rep.checks if c.topic != "release"]


OLD_RECIPE_PLAN = """\
Inst base-files [12.4+deb12u15] (13.8+deb13u8 Debian:13.8/stable [amd64])
Inst libc6 [2.36-9+deb12u14] (2.41-12+deb13u5 Debian:13.8/stable [amd64]) [libc-bin:amd64 ]
Inst runc (1.1.15+ds1-2+b4 Debian:13.8/stable [amd64])
Inst docker.io (26.1.5+dfsg1-9+deb13u1+b1 Debian:13.8/stable [amd64])
Inst docker-buildx (0.13.1+ds1-3 Debian:13.8/stable [amd64])
Conf libc6 (2.41-12+deb13u5 Debian:13.8/stable [amd64])
"""
"""Lines of the real `apt-get -s install -t trixie docker.io docker-buildx` plan on a clean bookworm."""

NEW_RECIPE_PLAN = """\
Inst runc (1.1.5+ds1-1+deb12u1 Debian:12.15/oldstable [amd64])
Inst containerd (1.6.20~ds1-1+deb12u3 Debian:12.15/oldstable [amd64])
Inst libc6 [2.36-9+deb12u13] (2.36-9+deb12u14 Debian:12.15/oldstable, Debian-Security:12/oldstable-security [amd64])
Inst docker.io (20.10.24+dfsg1-1+deb12u1+b6 Debian:12.15/oldstable [amd64])
Inst docker-buildx (0.13.1+ds1-3 Debian:13.8/stable [amd64])
"""
"""The real plan of setup-host.sh's path on a clean bookworm (captured), plus one libc6 line written in
apt's format for a same-release point update offered by two archives (not captured: none was pending)."""


def _setup_filter(plan: str) -> tuple[str, bool]:
    """Run setup-host.sh's own filter lines (copied out of the script, so a change there is tested)."""
    script = (ROOT / "scripts" / "setup-host.sh").read_text()
    foreign = next(ln for ln in script.splitlines() if ln.strip().startswith("foreign=$("))
    refuse = next(ln for ln in script.splitlines() if '$2 != "docker-buildx"' in ln)
    test = refuse.strip().removeprefix("if ").removesuffix("; then")
    sh = f'RELEASE=12\nplan=$(cat)\n{foreign.strip()}\nprintf "%s\\n" "$foreign"\nif {test}; then echo REFUSE; fi\n'
    out = subprocess.run(["bash", "-c", sh], input=plan, capture_output=True, text=True, check=True).stdout
    return out, out.rstrip().endswith("REFUSE")


def test_setup_refuses_a_plan_that_upgrades_libc_from_the_next_release():
    out, refused = _setup_filter(OLD_RECIPE_PLAN)
    assert refused and "Inst libc6" in out and "Inst base-files" in out


def test_setup_accepts_docker_buildx_alone_from_the_next_release():
    out, refused = _setup_filter(NEW_RECIPE_PLAN)
    assert not refused
    assert [ln.split()[1] for ln in out.splitlines() if ln.startswith("Inst ")] == ["docker-buildx"]
