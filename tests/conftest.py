"""Shared fixtures. Tests marked `e2e` need a running Docker engine with buildx (CI starts one)."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# Test runs share one Docker engine and may overlap (parallel sessions); their tiny-model numbers are
# smoke signals, so bench runs of the tests may overlap: each record written meanwhile is flagged
# `concurrent`. tests/test_faults.py unsets this to check the refusal (exit 9) itself.
os.environ.setdefault("TOOLKIT_ALLOW_CONCURRENT", "1")
DATA = Path(__file__).parent / "data"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project's matrix and templates in tmp_path (results/ and images/ land there)."""
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    return tmp_path


@pytest.fixture
def matrix_data() -> dict:
    return yaml.safe_load((ROOT / "matrix.yaml").read_text())


def write_matrix(dir_: Path, data: dict) -> Path:
    p = dir_ / "matrix.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def mutate(data: dict, path: list, value) -> dict:
    """A deep copy of `data` with the value at key path `path` replaced (KeyError: deleted)."""
    d = copy.deepcopy(data)
    cur = d
    for p in path[:-1]:
        cur = cur[p]
    if value is KeyError:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d
