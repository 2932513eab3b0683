"""The README's commands on fresh hosts, stood in by systemd containers that hide nothing of this
machine (scripts/fresh-host.sh): CI's part of the fresh-host proof, on every run. `--quick` is the
README's main job as a sudo user on a fresh Debian 13 (setup, build, bench, doctor) and setup's Podman
mends on a fresh Debian 12 with the host's cgroups as a fresh boot of CI's VM kind has them. The full
run (every README host and the test command) is `sudo scripts/fresh-host.sh`; docs/setup.md shows its table."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.e2e_helpers import engine_or_skip

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.e2e


def _rows(table: str) -> list[dict[str, str]]:
    """The table's rows: host, user, engine, step, exit, wall, cpu."""
    out = []
    for ln in table.splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0].startswith("Debian"):
            out.append(
                dict(
                    zip(["host", "user", "engine", "step", "exit", "wall", "cpu", "load"], cells, strict=True)
                )
            )
    return out


def test_readme_commands_pass_on_fresh_stand_ins(tmp_path):
    engine_or_skip()
    if os.environ.get("TOOLKIT_FRESH_HOST"):
        pytest.skip(
            "this run is itself inside a fresh-host stand-in (scripts/fresh-host.sh): not nested again"
        )
    if os.geteuid() != 0:
        pytest.skip("the stand-ins are privileged containers: run as root (CI does)")
    for base in ("debian:bookworm-slim", "debian:trixie-slim"):
        if subprocess.run(["docker", "image", "inspect", base], capture_output=True).returncode:
            pytest.fail(f"{base} is not in the engine: run ./scripts/setup-host.sh --test")
    res = subprocess.run(
        [str(ROOT / "scripts" / "fresh-host.sh"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    table = (tmp_path / "table.md").read_text() if (tmp_path / "table.md").exists() else ""
    logs = "\n".join(
        f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
        for p in sorted(tmp_path.glob("*.log"))
    )
    rows = _rows(table)
    assert res.returncode == 0, f"{table}\n{res.stderr[-3000:]}\n{logs[-6000:]}"
    steps = {(r["host"], r["user"], r["engine"], r["step"]): r["exit"] for r in rows}
    want = [
        ("Debian 13", "debian", "docker", "`./scripts/setup-host.sh`"),
        ("Debian 13", "debian", "docker", "`toolkit build`"),
        ("Debian 13", "debian", "docker", "`toolkit bench`"),
        ("Debian 13", "debian", "docker", "`toolkit doctor`"),
        ("Debian 12", "root", "podman", "`./scripts/setup-host.sh --podman`"),
        ("Debian 12", "root", "podman", "`toolkit doctor`"),
    ]
    assert {k: steps.get(k) for k in want} == {k: "0" for k in want}, table
    # the sudo user's bench printed its tables in the same shell as setup (the docker group's ACL)
    log = (tmp_path / "toolkit-fresh-trixie-debian-docker.log").read_text(errors="replace")
    assert re.search(r"cpu x tiny-qwen3moe: ok, \d+ results", log), log[-3000:]
    assert "Traceback" not in log


@pytest.mark.parametrize(
    "args,said",
    [
        (["bookworm:nobody:docker"], "bad host"),
        (["--quick", "bad:host"], "name hosts or --quick, not both"),  # --quick once ignored the hosts
        (["--quick", "trixie:test"], "name hosts or --quick, not both"),
        (["--out"], "--out needs a folder"),
        (["--out", "--quick"], "--out needs a folder"),  # took --quick for the folder, then ran everything
        (["--frobnicate"], "unknown option"),
    ],
)
def test_fresh_host_refuses_bad_arguments_before_doing_anything(tmp_path, args, said):
    res = subprocess.run(
        [str(ROOT / "scripts" / "fresh-host.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert res.returncode == 4 and said in res.stderr, res.stderr


def test_fresh_host_refuses_an_out_that_is_a_file(tmp_path):
    engine_or_skip()
    if os.geteuid() != 0:
        pytest.skip("fresh-host.sh runs as root")
    f = tmp_path / "afile"
    f.write_text("")
    res = subprocess.run(
        [str(ROOT / "scripts" / "fresh-host.sh"), "--out", str(f), "trixie:test"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 4 and "exists and is not a folder" in res.stderr, res.stderr


@pytest.mark.parametrize("script", ["fresh-host.sh", "setup-host.sh"])
def test_help_prints_the_whole_header(script):
    """--help printed a fixed line range and cut both headers mid-sentence."""
    path = ROOT / "scripts" / script
    header = []
    for ln in path.read_text().splitlines()[1:]:
        if not ln.startswith("#"):
            break
        header.append(ln)
    res = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0
    last = header[-1].lstrip("# ").strip()
    assert res.stdout.rstrip().endswith(last), res.stdout[-300:]


def test_a_second_run_waits_for_the_first(tmp_path):
    """Two runs at once would remove each other's stand-ins (same names): the second is refused (exit 9)."""
    engine_or_skip()
    if os.geteuid() != 0:
        pytest.skip("fresh-host.sh runs as root")
    holder = subprocess.Popen(["flock", "/run/lock/toolkit-fresh-host.lock", "sleep", "30"])
    try:
        import time

        time.sleep(0.5)
        res = subprocess.run(
            [str(ROOT / "scripts" / "fresh-host.sh"), "--out", str(tmp_path), "trixie:debian:docker"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.kill()
        holder.wait()
    assert res.returncode == 9 and "another fresh-host.sh run is in progress" in res.stderr, res.stderr


def test_a_kept_stand_in_of_the_same_name_is_never_removed(tmp_path):
    """Newcomer round 26: a stand-in kept by another run (`--keep`, its lock released when it ended) was
    removed without a word (`docker rm -f` of the same name) by the next run naming that host: it is now
    refused (exit 9) naming the stand-in and the command that removes it, and the stand-in is left as it
    was. A container of this test's own, of a host name no other run uses (no systemd, Docker as root)."""
    engine_or_skip()
    if os.geteuid() != 0:
        pytest.skip("fresh-host.sh runs as root")
    base = next(
        (
            b
            for b in ("debian:trixie-slim", "debian:bookworm-slim")
            if not subprocess.run(["docker", "image", "inspect", b], capture_output=True).returncode
        ),
        None,
    )
    if base is None:
        pytest.skip("no local debian:*-slim image (./scripts/setup-host.sh --test)")
    name = "toolkit-fresh-bookworm-root-docker-no-systemd"
    if not subprocess.run(["docker", "container", "inspect", name], capture_output=True).returncode:
        pytest.skip(f"{name} exists already (someone's): not touched")
    mine = subprocess.run(
        ["docker", "create", "--name", name, "--label", "toolkit-test=kept-stand-in", base, "true"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        res = subprocess.run(
            [
                str(ROOT / "scripts" / "fresh-host.sh"),
                "--out",
                str(tmp_path),
                "bookworm:root:docker:no-systemd",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        still = subprocess.run(
            ["docker", "container", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True
        ).stdout.strip()
    finally:
        subprocess.run(["docker", "rm", "-f", mine], capture_output=True)
    assert res.returncode == 9, (res.returncode, res.stderr)
    assert f"a stand-in named {name} is there" in res.stderr and f"docker rm -f {name}" in res.stderr, (
        res.stderr
    )
    assert still == mine, "the kept stand-in was removed"
