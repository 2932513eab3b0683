"""The architecture holds: the import contract, lint, format and package docstrings.

The layers (each package imports only the packages below it), independent runners and "only
toolkit.engine imports the docker SDK" are import-linter contracts in pyproject.toml; import-linter
reads every import, lazy ones inside functions included. Ruff (lint + format) runs here too, so a
change that breaks either fails the fast level.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "toolkit"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_import_contracts_are_kept():
    """lint-imports exits 0 only when every contract in pyproject.toml is kept."""
    proc = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout


def test_the_contract_names_every_package():
    """A new package must be placed in the layers (or it escapes the contract)."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in cfg["contracts"] if c["type"] == "layers")["layers"]
    packages = {f"toolkit.{p.name}" for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(layers), f"packages not in the layers contract: {packages ^ set(layers)}"


def test_a_broken_layer_is_caught(tmp_path):
    """The contract check is not vacuous: the same contracts over a copy of the package with one
    upward import (core importing cli) report BROKEN."""
    import shutil

    copy = tmp_path / "proj"
    shutil.copytree(PKG, copy / "toolkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    errors = copy / "toolkit" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _upward():\n    from toolkit.cli import main  # noqa\n")
    proc = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"],
        cwd=copy,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode != 0 and "BROKEN" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.parametrize(
    "args",
    [
        ("ruff", "check", "toolkit", "tests", "benchmarks"),
        ("ruff", "format", "--check", "toolkit", "tests", "benchmarks"),
    ],
)
def test_ruff(args):
    proc = _run(*args)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_every_package_says_what_it_may_touch():
    """Each package's docstring names its job and what it may import or touch ("May use:")."""
    for init in sorted(PKG.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 12 and "May use:" in doc, f"{init.relative_to(ROOT)}: docstring {doc!r}"


def test_mypy_reports_no_errors():
    """The package type-checks clean under pyproject.toml's [tool.mypy] (pydantic's plugin)."""
    proc = _run("mypy", "toolkit")
    assert proc.returncode == 0, f"mypy toolkit exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"


def test_only_the_cli_prints():
    """No print() and no sys.stdout/sys.stderr writes outside toolkit/cli (rich and click are kept
    out by the import contract)."""
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        if path.parent.name == "cli" or path.name == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} print()")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("stdout", "stderr")
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} sys.{node.attr}")
    assert not offenders, offenders
