"""brk48 (breaker, twentieth session): faults a field user meets, each through the real CLI.

- F1 an unquoted decimal in the env axis (`env: {X: [1.10]}`) ran the container with X=1.1 (1.0e+3:
  X=1000.0, 1.0e+400: X=inf) while matrix.yaml showed 1.10: refused, quote it (as template vars);
- F2 `push --registry ..` (or `-x/y`, `host:99999/x`) was taken: the dry run said it "would push" to
  `../cpu:...`, the real push failed as exit 2 with the engine's "invalid reference format"; a
  `registry:` of matrix.yaml was refused without naming the file: both exit 4 before anything runs;
- F3 `-o -` (Unix's "standard output") wrote a file (or folder) named `-` in the current folder, so did
  `--results -` (a results folder `-`): refused where an empty path is;
- F4 a path holding a control character (a results folder, `-o`) was printed with the character
  stripped, naming a file that does not exist (`written to /tmp/rx/m.jsonl` for `/tmp/r<ESC>[1mx`):
  every such message escapes it (path_text), as import's and report's did.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.runs import ROOT, tk

ESC = "r\x1b[1mx"  # a folder name holding a CSI: stripped, it reads `rx`


def _matrix(project: Path, edit) -> Path:
    data = yaml.safe_load((project / "matrix.yaml").read_text())
    edit(data)
    (project / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return project / "matrix.yaml"


@pytest.mark.parametrize("value", ["1.10", "1.0e+3", "1.0e+400", ".5"])
def test_an_unquoted_decimal_env_value_is_refused_not_rewritten(project: Path, value: str) -> None:
    text = (project / "matrix.yaml").read_text().replace("env: {}", f"env: {{X: [{value}]}}")
    (project / "matrix.yaml").write_text(text)
    res = tk(project, "bench", "-i", "cpu", "--dry-run")
    assert res.returncode == 4, res.stdout + res.stderr
    assert "bench.env: env.X:" in res.stderr and "quote a decimal" in res.stderr, res.stderr
    assert "-e X=" not in res.stdout
    (project / "matrix.yaml").write_text(text.replace(f"[{value}]", f"['{value}', 2]"))
    res = tk(project, "bench", "-i", "cpu", "--dry-run")
    assert f"-e X={value}" in res.stdout and "-e X=2" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("registry", ["..", "-x/y", "a..b/c", "host:99999/x", "127.0.0.1:0/x", "./r9700"])
def test_a_registry_that_is_no_reference_is_refused_before_anything_runs(
    project: Path, registry: str
) -> None:
    res = tk(project, "push", "-i", "cpu", "--dry-run", "--registry", registry)
    assert res.returncode == 4, res.stdout + res.stderr
    assert f"--registry {registry!r}: give HOST[:PORT]/NAMESPACE" in res.stderr and "would" not in res.stdout
    _matrix(project, lambda d: d.update(registry=registry))
    res = tk(project, "push", "-i", "cpu", "--dry-run")
    assert res.returncode == 4, res.stdout + res.stderr
    assert f"matrix.yaml: registry {registry!r}: give HOST[:PORT]" in res.stderr, res.stderr


@pytest.mark.parametrize("registry", ["localhost:5000", "Registry.Example/acme", "r-1.io:65535/a"])
def test_registry_hosts_of_the_reference_grammar_are_kept(registry: str) -> None:
    from toolkit.publish.push import parse_registry

    assert parse_registry(registry + "/") == registry


@pytest.mark.parametrize(
    "args",
    [
        ["report", "-o", "-"],
        ["report", "--plots", "-"],
        ["measure", "--gpu", "none", "-o", "-", "--", "true"],
        ["export-run", "run-x", "-o", "-"],
        ["campaign", "render-k8s", "-o", "-"],
        ["import", "--label", "x", "--results", "-", str(ROOT / "tests/data/llamabench-0c1e57098-cpu.jsonl")],
        ["bench", "-i", "cpu", "--results", "-"],
    ],
    ids=["report", "plots", "measure", "export-run", "render-k8s", "import-results", "bench-results"],
)
def test_dash_as_an_output_is_refused_not_a_file_named_dash(project: Path, args: list[str]) -> None:
    res = tk(project, *args)
    assert res.returncode == 4, res.stdout + res.stderr
    said = (  # report prints to standard output without -o (fix49a: nc48b S10); the others never do
        "'-': leave -o out to print to standard output"
        if args[:2] == ["report", "-o"]
        else "'-': not standard output here"
    )
    assert said in res.stderr and "`./-`" in res.stderr, res.stderr
    assert not (project / "-").exists() and not (project / "-.trace.jsonl").exists()


@pytest.fixture
def esc_results(tmp_path: Path) -> Path:
    """A results folder named with an escape sequence, holding one imported run."""
    res = tmp_path / ESC
    got = tk(
        tmp_path,
        "import",
        "--label",
        "x",
        "--results",
        str(res),
        str(ROOT / "tests/data/llamabench-0c1e57098-cpu.jsonl"),
    )
    assert got.returncode == 0, got.stderr
    return res


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "nope-a", "nope-b", "--results", "{R}"],
        ["report", "--results", "{R}", "-i", "nope"],
        ["measure", "--gpu", "none", "-o", "{R}/m.jsonl", "--", "true"],
        ["campaign", "render-k8s", "-o", "{R}/k8s"],
    ],
    ids=["compare", "report", "measure", "render-k8s"],
)
def test_a_path_with_a_control_character_is_shown_escaped_never_stripped(
    project: Path, esc_results: Path, args: list[str]
) -> None:
    res = tk(project, *[a.replace("{R}", str(esc_results)) for a in args])
    said = res.stdout + res.stderr
    assert str(esc_results).replace(ESC, "r\\x1b[1mx") in said, said
    assert str(esc_results).replace(ESC, "rx") not in said and "\x1b" not in said, said
