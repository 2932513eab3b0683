"""The package's imports flow one way: no import circles, counting imports inside functions too.

The graph is read from the source with `ast` (every `import toolkit.x` / `from toolkit.x import y`,
wherever it stands), so a lazy import that hides a circle still counts. README ("Layout") shows
the layers; this test keeps them true.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "toolkit"


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """{module: toolkit modules it imports}; `from toolkit import x` counts as toolkit.x when x is a module."""
    mods = {module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("toolkit"):
                    for a in node.names:
                        full = f"{node.module}.{a.name}"
                        deps.add(full if full in mods else node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("toolkit")}
        graph[mod] = {d for d in deps if d in mods and d != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_detector_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles_in_the_package():
    assert cycles(import_graph()) == []


def test_runners_do_not_import_each_other_or_the_orchestrator():
    g = import_graph()
    for mod, deps in g.items():
        if mod.startswith("toolkit.core.registry.") and mod != "toolkit.bench.runners.base":
            assert "toolkit.bench.run" not in deps, mod
            others = {
                d
                for d in deps
                if d.startswith("toolkit.core.registry.") and d != "toolkit.bench.runners.base"
            }
            assert not others, f"{mod} imports {others}: shared code belongs in toolkit.bench.runners.base"


def test_mypy_reports_no_errors():
    """The package type-checks clean under pyproject.toml's [tool.mypy] (pydantic's plugin)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "toolkit"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"mypy toolkit exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
