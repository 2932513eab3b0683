"""Helpers for end-to-end tests: a real Docker engine, real builds, real llama-bench runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from toolkit.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def engine_or_skip() -> None:
    """e2e tests need dockerd + buildx; CI starts them (scripts/setup-host.sh). Locally, say why."""
    ok = subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    bx = subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode == 0
    if not (ok and bx):
        pytest.fail("Docker engine with buildx not running: run ./scripts/setup-host.sh first")


def untag_image(ref: str) -> bool:
    """`docker rmi REF` without force, through the engine the toolkit uses: removes the tag (the image goes
    with its last tag). False if absent. The e2e tests' own clean-up (no command of the toolkit untags)."""
    from docker.errors import ImageNotFound

    from toolkit.engine.api import client

    try:
        client().images.remove(ref, noprune=False)
        return True
    except ImageNotFound:
        return False


def make_project(
    dest: Path, *, images: list[str], bench: dict, models: list[str] | None = None, depth: bool = False
) -> Path:
    """A project copy whose matrix keeps only `images` (and `models`), with smaller bench axes; the
    models' depth sweeps (`depth:`) only with `depth` (a test's own axes are what it measures)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "Dockerfile.templates", dest / "Dockerfile.templates", dirs_exist_ok=True)
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [i for i in data["images"] if i["name"] in images]
    keep = models or ["tiny-qwen3moe"]
    data["models"] = [m for m in data["models"] if m["name"] in keep]
    if not depth:
        data["models"] = [{k: v for k, v in m.items() if k != "depth"} for m in data["models"]]
    data["bench"] = {**data.get("bench", {}), **bench}
    (dest / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def run_cli(project: Path, *args: str, expect: int | None = 0):
    """Invoke the CLI in-process (CliRunner) on a project's matrix; assert the exit code."""
    from toolkit.core.errors import ToolkitError

    runner = CliRunner()
    res = runner.invoke(cli, [args[0], "--matrix", str(project / "matrix.yaml"), *args[1:]])
    code = res.exit_code
    if isinstance(res.exception, ToolkitError):
        code = res.exception.exit_code
    elif res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    if expect is not None:
        assert code == expect, f"exit {code}\n{res.output}\n{res.exception!r}"
    return res, code


def ensure_built(name: str, dest: Path, bench: dict) -> str:
    """toolkit/<name>:latest, built by `toolkit build --image NAME` in a project copy under `dest` when
    the engine does not have it (a fresh engine: tests run in file order, and the test that builds
    it for the suite may come later). Same inputs as the project's own build: BuildKit's cache makes
    it a no-op after the first build. Returns the ref."""
    from toolkit.engine import api as engine

    ref = f"toolkit/{name}:latest"
    if engine.inspect_image(ref) is None:
        run_cli(make_project(dest, images=[name], bench=bench), "build", "--image", name)
    assert engine.inspect_image(ref) is not None, f"{ref}: `toolkit build --image {name}` left no image"
    return ref


def second_dockerd(root: Path, host: str) -> list[str]:
    """The command line of a second dockerd (data root, exec root and pidfile under `root`, socket
    `host`, no iptables) that leaves the shared engine's network alone: its default bridge is one of its
    own, made here (`remove_second_dockerd_bridge` deletes it). With `--bridge none` dockerd deletes the
    host's docker0 link, which cuts off every container of the shared engine on the default bridge
    (the loopback registry, testcontainers' reaper)."""
    bridge = _bridge_name(root)
    if subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0:
        subnet = 1 + sum(root.name.encode()) % 250  # 10.123.<n>.0/24: no address this host routes
        for cmd in (
            ["ip", "link", "add", bridge, "type", "bridge"],
            ["ip", "addr", "add", f"10.123.{subnet}.1/24", "dev", bridge],
        ):
            subprocess.run(cmd, check=True, capture_output=True)
    return [
        "dockerd",
        "--data-root",
        str(root / "data"),
        "--exec-root",
        str(root / "exec"),
        "--pidfile",
        str(root / "docker.pid"),
        "-H",
        host,
        "--bridge",
        bridge,
        "--iptables=false",
        "--ip6tables=false",
    ]


def remove_second_dockerd_bridge(root: Path) -> None:
    """Delete the bridge `second_dockerd(root, ...)` made (after that dockerd has stopped)."""
    subprocess.run(["ip", "link", "del", _bridge_name(root)], capture_output=True)


def _bridge_name(root: Path) -> str:
    return "tkb" + root.name[-8:]  # interface names are <= 15 characters
