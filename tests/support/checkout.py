"""A git checkout of the code under test, for tests of what the toolkit says of its own checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def committed_clone(dest: Path) -> tuple[Path, str]:
    """A clone of this checkout at `dest` (objects shared) holding this tree's toolkit/ and pyproject.toml
    committed (the code under test, though this checkout may be modified): (its folder, its commit).
    Skips the test where this tree is no git checkout."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(dest)], check=True)
    shutil.rmtree(dest / "toolkit")
    shutil.copytree(ROOT / "toolkit", dest / "toolkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A", "toolkit", "pyproject.toml"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "the tree under test"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return dest, head.stdout.strip()
