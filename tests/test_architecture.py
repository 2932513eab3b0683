"""The architecture holds: the import contract, lint, format and package docstrings.

The layers (each package imports only the packages below it), independent runners and "only
toolkit.engine imports the docker SDK" are import-linter contracts in pyproject.toml; import-linter
reads every import, lazy ones inside functions included. Ruff (lint + format) runs here too, so a
change that breaks either fails the fast level.
"""

from __future__ import annotations

import ast
import re
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


RUNNERS_DIR = PKG / "bench" / "runners"
# every module of a specific runner: all of runners/ but the shared scaffolding
RUNNER_MODULES = sorted(
    f"toolkit.bench.runners.{p.stem}" for p in RUNNERS_DIR.glob("*.py") if p.stem not in ("__init__", "base")
)


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imported(source: str, module: str, *, package: bool = False) -> list[tuple[int, str]]:
    """(line, module) of every module `source` (the text of `module`; `package`: an __init__.py)
    imports: import / from-import statements, lazy ones inside functions included, relative ones
    resolved, `from a import b` also as `a.b`, and importlib.import_module / __import__ of a literal."""
    pkg = module if package else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([base] if base else [])])
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
            )
        ):
            out.append((node.lineno, node.args[0].value))
    return out


def _runner_imports(source: str, module: str, *, package: bool = False) -> list[str]:
    return [
        f"{module}:{line} imports {name}"
        for line, name in _imported(source, module, package=package)
        if any(name == r or name.startswith(r + ".") for r in RUNNER_MODULES)
    ]


def test_no_module_outside_the_runners_imports_a_runner():
    """The plug-in interface is the only way in: bench, reproduce, the CLI... reach a runner through
    the registry (toolkit.core.registry.get(name)) and the Runner protocol, never by importing
    llama_bench, vllm, sglang (or platform_probe). The registry names them as strings, which is its job."""
    assert {
        "toolkit.bench.runners.llama_bench",
        "toolkit.bench.runners.vllm",
        "toolkit.bench.runners.sglang",
    } <= set(RUNNER_MODULES)
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        if RUNNERS_DIR in path.parents:
            continue
        offenders += _runner_imports(path.read_text(), _module_name(path), package=path.name == "__init__.py")
    assert not offenders, offenders


@pytest.mark.parametrize(
    "source",
    [
        "from toolkit.bench.runners import vllm",
        "from toolkit.bench.runners.llama_bench import missing_cases",
        "import toolkit.bench.runners.sglang as s",
        "def f():\n    from .runners import platform_probe\n",
        "import importlib\nimportlib.import_module('toolkit.bench.runners.vllm')",
    ],
)
def test_the_runner_import_check_is_not_vacuous(source):
    """Each way of importing a runner module is caught (module: toolkit.bench.run, for the relative one)."""
    assert _runner_imports(source, "toolkit.bench.run")
    assert not _runner_imports("from toolkit.bench.runners.base import RunContext", "toolkit.bench.run")


def _engine_calls(source: str) -> list[str]:
    """(line: what) of every way `source` reaches toolkit.engine.api other than its value types: a
    function imported from it, or an attribute of the module (`api.run_container`, `engine.run_command`)
    that is not a class. The module itself may be named (e.g. `ctx.engine is api`: is this the real
    engine?), just not used to call Docker. Classes (Mount, RunSpec, RunOutcome...) start upper-case."""
    tree = ast.parse(source)
    modules: set[str] = set()  # local names bound to the engine module
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("toolkit.engine"):
                    if a.asname:
                        modules.add(a.asname)
                    else:  # `import toolkit.engine.api`: reached as toolkit.engine.api.x
                        out.append(f"{node.lineno}: import {a.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolkit.engine"):
            for a in node.names:
                if node.module == "toolkit.engine":
                    modules.add(a.asname or a.name)
                elif not a.name[:1].isupper():
                    out.append(f"{node.lineno}: from {node.module} import {a.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and not node.attr[:1].isupper()
        ):
            out.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return out


def test_runners_reach_docker_only_through_ctx_engine():
    """A runner module takes value types only from toolkit.engine (Mount, RunSpec, RunOutcome...);
    every engine call goes through RunContext.engine, so a test can pass a fake engine. base.py holds
    the default (the real module) and the shared container scaffolding."""
    offenders = []
    for path in sorted(RUNNERS_DIR.glob("*.py")):
        if path.stem in ("__init__", "base"):
            continue
        offenders += [f"{path.relative_to(ROOT)}:{x}" for x in _engine_calls(path.read_text())]
    assert not offenders, offenders


@pytest.mark.parametrize(
    "source,caught",
    [
        ("from toolkit.engine import api as engine\nengine.run_container(spec)", True),
        ("from toolkit.engine import api\nf = api.start_container", True),
        ("from toolkit.engine.api import run_container", True),
        ("import toolkit.engine.api", True),
        ("import toolkit.engine.api as e\ne.exec_in(c, [])", True),
        ("from toolkit.engine.api import Mount, RunOutcome", False),
        ("from toolkit.engine import api as e\nm = e.Mount('a', 'b')\nreal = ctx.engine is e", False),
        ("out = ctx.engine.run_container(spec)", False),
    ],
)
def test_the_engine_check_is_not_vacuous(source, caught):
    assert bool(_engine_calls(source)) is caught, _engine_calls(source)


def test_every_registered_runner_implements_the_protocol():
    """Each runner of the registry has every member of base.Runner, its methods with the protocol's
    parameters (bench/run.py and reproduce call them without knowing which runner it is)."""
    import inspect

    from toolkit.bench.runners.base import Runner
    from toolkit.core import registry

    methods = {
        n: inspect.signature(f)
        for n, f in vars(Runner).items()
        if inspect.isfunction(f) and not n.startswith("_")
    }
    assert {"preflight", "plan", "cases", "estimate", "settings_from_records", "run"} <= set(methods)
    for name in registry.names():
        runner = registry.get(name)
        assert runner.name == name
        for attr in Runner.__annotations__:
            assert hasattr(runner, attr), f"{name}: no {attr}"
        for m, sig in methods.items():
            got = inspect.signature(getattr(type(runner), m))
            assert list(got.parameters) == list(sig.parameters), f"{name}.{m}{got} is not Runner.{m}{sig}"


DOORS = {"toolkit/engine": "api", "toolkit/host/telemetry": "__init__", "toolkit/matrix": "api"}
"""A package split into rooms, and its one door (the module every other package imports)."""


@pytest.mark.parametrize("where,door", sorted(DOORS.items()))
def test_other_packages_enter_a_split_package_through_its_door(where, door):
    """Each split package's door (engine.api, host.telemetry, matrix.api) is the only module other
    packages import: the rooms behind it are imported only inside the package, so a room can be split or merged without touching a
    caller."""
    pkg = ROOT / where
    dotted = where.replace("/", ".")
    rooms = sorted(p.stem for p in pkg.glob("*.py") if p.stem not in ("__init__", door))
    assert rooms, f"{where} has no rooms"
    alt = "|".join(rooms)
    pattern = re.compile(rf"{re.escape(dotted)}\.({alt})\b|from {re.escape(dotted)} import .*\b({alt})\b")
    offenders = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sorted((ROOT / "toolkit").rglob("*.py"))
        if pkg not in p.parents
        for i, ln in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(ln)
    ]
    assert not offenders, offenders


def _sibling_imports(source: str) -> list[str]:
    """The modules of tests/ other than tests/support that `source` imports: a test module
    (tests.test_*), tests.conftest (pytest's fixtures file, not a helpers module), or `tests` itself
    (`from tests import test_x`); relative imports count as `tests`."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names.append("tests" if node.level else node.module or "")
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return [n for n in names if n.startswith(("tests.test_", "tests.conftest", "conftest")) or n == "tests"]


def test_no_test_module_imports_another():
    """Helpers live in one package, tests/support/; neither a test module nor a helper imports a test
    module or tests/conftest.py (issue 30: ROOT, DATA, write_matrix, mutate, seed_current_build are in
    tests/support/project.py)."""
    paths = [*sorted((ROOT / "tests").glob("test_*.py")), *sorted((ROOT / "tests" / "support").glob("*.py"))]
    offenders = [f"{p.name}: {n}" for p in paths for n in _sibling_imports(p.read_text())]
    assert not offenders, offenders


@pytest.mark.parametrize(
    "source",
    [
        "from tests.test_plan import _plan",
        "import tests.test_records as tr",
        "from tests.conftest import ROOT",
        "def f():\n    from tests.conftest import DATA\n",
        "from tests import conftest",
        "from . import test_plan",
    ],
)
def test_the_sibling_import_check_is_not_vacuous(source):
    assert _sibling_imports(source)
    assert not _sibling_imports("from tests.support.project import ROOT\nfrom tests.support import engine")


MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100
LONG_FUNCTION_LINES = 60
MAX_LONG_FUNCTIONS = 15


def test_no_room_outgrows_its_walls():
    """The house rules (issue 30): no file in toolkit/ over 800 lines, no function over 100, at most 15
    functions of 60 lines or more (a function's lines: its `def` to its last line, docstring included).
    A change that grows a room splits it first."""
    big_files, big_funcs, long_funcs = [], [], []
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        rel = path.relative_to(ROOT)
        if text.count("\n") > MAX_FILE_LINES:
            big_files.append(f"{rel}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    big_funcs.append(f"{rel}:{node.name}: {n} lines")
                if n >= LONG_FUNCTION_LINES:
                    long_funcs.append(f"{rel}:{node.name}: {n} lines")
    assert not big_files, f"files over {MAX_FILE_LINES} lines: {big_files}"
    assert not big_funcs, f"functions over {MAX_FUNCTION_LINES} lines: {big_funcs}"
    assert len(long_funcs) <= MAX_LONG_FUNCTIONS, f"{len(long_funcs)} functions of 60+ lines: {long_funcs}"


def test_an_image_id_and_a_sha256_are_recognised_in_one_place():
    """tidy41 (issue 30): "sha256: and 64 lowercase hex digits" was written six times (cli/host.py's
    _IMAGE_ID, pins._DIGEST, engine/images.built_image_id, reproduce's HEX, canary_check._control_digest,
    import_read's --digest check), "64 lowercase hex digits" three (identity._HEX64, import_read._SHA_RE,
    the matrix's model sha256); now each asks core.types.is_image_id or is_sha256: the whole text, as
    each site's was."""
    from toolkit.core.types import is_image_id, is_sha256

    pattern = re.compile(r'"\^?(sha256:)?\[0-9a-f\]\{64\}\$?"|len\(.{1,40}\) == 71')
    written = [str(p.relative_to(ROOT)) for p in sorted(PKG.rglob("*.py")) if pattern.search(p.read_text())]
    assert written == ["toolkit/core/types.py"], written
    hexes = "0123456789abcdef" * 4
    assert is_image_id("sha256:" + hexes) and is_sha256(hexes) and not is_sha256("sha256:" + hexes)
    for no in ("sha256:" + hexes + "\n", "sha256:" + hexes.upper(), "sha256:" + hexes[:12], hexes, None, 7):
        assert not is_image_id(no), no


def _surrogate_docstrings(source: str) -> list[str]:
    """Docstrings of `source` holding a lone surrogate (an escape such as a backslash-u-dcff written
    without doubling its backslash): Python 3.13 cleans docstrings as it compiles them, encoding them
    as UTF-8, and refuses such a module at import (a fresh Debian 13 host's `toolkit bench` stopped on
    results/index_sqlite.py in a traceback while Debian 12's 3.11 and this machine's ran it)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                try:
                    doc.encode("utf-8")
                except UnicodeEncodeError:
                    out.append(getattr(node, "name", "module"))
    return out


def test_every_module_compiles_on_the_pythons_of_the_readme_hosts():
    """Debian 12 runs Python 3.11, Debian 13 Python 3.13: a module must import on both. Checked here
    for the kind that broke Debian 13 (a docstring with a lone surrogate), and by compiling every
    module with each of those interpreters this host has (pyenv's, Debian's: on PATH or not, the
    check above still holds)."""
    sources = [p for d in ("toolkit", "benchmarks", "scripts") for p in (ROOT / d).rglob("*.py")]
    bad = {str(p.relative_to(ROOT)): b for p in sources if (b := _surrogate_docstrings(p.read_text()))}
    assert not bad, f"docstrings with a lone surrogate (double the backslash): {bad}"
    assert _surrogate_docstrings('def f():\n    """reads as "\\udcff" here"""\n') == ["f"]  # not vacuous
    import shutil

    code = "import pathlib,sys\nfor p in sys.argv[1:]: compile(pathlib.Path(p).read_bytes(), p, 'exec')"
    for exe in filter(None, (shutil.which(f"python3.{v}") for v in (11, 13))):
        if subprocess.run([exe, "-c", "pass"], capture_output=True).returncode:
            continue  # a shim for a version that is not active (pyenv)
        res = subprocess.run([exe, "-c", code, *map(str, sources)], capture_output=True, text=True)
        assert res.returncode == 0, f"{exe}: {res.stderr[-2000:]}"


def test_no_python_code_runs_between_fork_and_exec() -> None:
    """A `preexec_fn` runs Python in the forked child before exec: with another thread holding a lock at
    the fork (a telemetry sampler, a test's server) the child waits on it for ever. The fast level hung
    so on 2026-12-04 (a `tk()` child in futex_wait for 10 minutes). The shell sets limits (`ulimit`);
    tests/conftest.py gives every child SIGINT's default."""
    root = Path(__file__).resolve().parents[1]
    found = [
        f"{p.relative_to(root)}:{n}"
        for folder in ("toolkit", "tests", "benchmarks")
        for p in (root / folder).rglob("*.py")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "preexec_fn" + "=" in line
    ]
    assert not found, found
