"""fix49b: input-validation faults breakers found (nc48b S9, brk48, brk48b), each kind closed at its door.

- a registry the engines' reference grammar refuses was taken: `[::1]:5000/ns` (Podman's tag: `invalid
  reference format`), `''` ("no registry" though one was passed), `docker.io` (Docker Hub's `library`
  namespace, which refuses the push); `build --push` parsed its registry only after the builds; the
  unreachable-registry hint named the Docker engine on Podman too: one parse (push.registry_for) for push,
  build --push and campaign, refusing before anything runs;
- an unquoted YAML int whose text is not the int's (`+5` -> 5, `-0` -> 0) changed meaning silently (an env
  value was set as `X=5`), and a refused decimal was quoted as YAML read it (1.1 for the `1.10` written);
- a YAML merge key (`<<: *a`) was refused as a syntax error: it is read, the guards kept;
- `import --label` took `.`, `..`, `-` and 5,000 characters; `--digest` took any text (5,000 characters,
  `foo`, which reads as an image an engine holds);
- doctor's and bench's this-host check waited on the resolver without a bound.
"""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.support.e2e_helpers import make_project
from tests.support.runs import ROOT, tk
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput
from toolkit.matrix.api import load_matrix

CPU_ROWS = str(ROOT / "tests/data/llamabench-0c1e57098-cpu.jsonl")


def _edit(project: Path, edit) -> Path:
    data = yaml.safe_load((project / "matrix.yaml").read_text())
    edit(data)
    (project / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return project / "matrix.yaml"


# 1. registries


@pytest.mark.parametrize(
    ("registry", "said"),
    [
        ("[::1]:5000/r9700", "an IPv6 address is no host in Podman's image references"),
        ("docker.io", "Docker Hub takes a push only under an account's namespace"),
        ("index.docker.io/", "give docker.io/NAMESPACE"),
        ("docker.io/library", "give docker.io/NAMESPACE"),
    ],
)
def test_a_registry_the_engines_refuse_is_refused_before_anything_runs(project, registry, said):
    """The dry run said it would push to `[::1]:5000/r9700/cpu:...`; Podman's real tag failed (exit 2)."""
    res = tk(project, "push", "-i", "cpu", "--dry-run", "--registry", registry)
    assert res.returncode == 4 and f"--registry {registry!r}: " in res.stderr, res.stdout + res.stderr
    assert said in res.stderr and "would" not in res.stdout
    _edit(project, lambda d: d.update(registry=registry))
    res = tk(project, "push", "-i", "cpu", "--dry-run")
    if registry.startswith("["):  # the matrix's own rule refuses `[` in any reference it holds
        said = "contains characters that are not allowed"
    assert res.returncode == 4 and re.search(r"matrix.yaml: (line \d+, column \d+: )?registry", res.stderr), (
        res.stderr
    )
    assert said in res.stderr, res.stderr


def test_an_empty_registry_is_said_to_be_empty_wherever_it_is_given(tmp_path):
    """`--registry ''` said "no registry: pass --registry ..."; an empty `campaign.registry` fell back
    to the matrix's `registry:` silently."""
    p = make_project(tmp_path, images=["cpu"], bench={})
    res = CliRunner().invoke(cli, ["push", "--matrix", str(p / "matrix.yaml"), "--dry-run", "--registry", ""])
    assert isinstance(res.exception, BadInput) and str(res.exception).startswith("--registry is empty: give")
    m = _edit(p, lambda d: d.update(registry="", campaign={"gres_type": "fake", "hosts": [{"node": "n1"}]}))
    res = CliRunner().invoke(cli, ["push", "--matrix", str(m), "--dry-run"])
    assert str(res.exception).startswith(f"{m}: registry is empty: give"), res.exception
    _edit(p, lambda d: (d.update(registry="127.0.0.1:5000/lab"), d["campaign"].update(registry="")))
    res = CliRunner().invoke(cli, ["campaign", "submit", "--matrix", str(m)])
    assert str(res.exception).startswith(f"{m}: campaign.registry is empty: give"), res.exception


def test_build_push_refuses_a_bad_registry_before_it_builds(project):
    """`build --push --registry ..` built every image (an hour on a GPU host), then refused the
    registry. The engine here is unreachable: a build would end in exit 5, not the registry's 4."""
    env = {"DOCKER_HOST": "unix:///nonexistent/docker.sock", "TOOLKIT_ENGINE": "docker"}
    res = tk(project, "build", "-i", "cpu", "--push", "--registry", "..", env=env)
    assert res.returncode == 4 and "--registry '..': give HOST[:PORT]/NAMESPACE" in res.stderr, res.stderr


def test_docker_hub_with_a_namespace_is_kept() -> None:
    from toolkit.publish.push import parse_registry

    assert parse_registry("docker.io/acme/") == "docker.io/acme"


@pytest.mark.parametrize(
    ("engine", "said", "not_said"),
    [
        ("podman", ["engine in use, Podman (", "registries.conf"], ["Docker engine", "daemon.json"]),
        ("docker", ["engine in use, Docker engine", "daemon.json"], ["Podman", "registries.conf"]),
    ],
)
def test_a_registry_hint_names_the_engine_in_use(monkeypatch, engine, said, not_said):
    """On Podman the unreachable registry was "reachable from the Docker engine?", and an HTTP-only
    registry was sent to Docker's daemon.json."""
    from toolkit.engine.registry import _registry_hint

    monkeypatch.setenv("TOOLKIT_ENGINE", engine)
    ref = "10.0.0.9:5000/lab/cpu:cpu-latest"
    hints = _registry_hint("dial tcp 10.0.0.9:5000: connect: connection refused", ref) + _registry_hint(
        "http: server gave HTTP response to HTTPS client", ref
    )
    assert all(s in hints for s in said) and not any(s in hints for s in not_said), hints


# 2. unquoted YAML scalars that change meaning


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("  env: {}", "  env: {X: [+5]}", "X: '+5' is a YAML 1.1 number form read as 5"),
        ("  env: {}", "  env: {X: ['1', -0]}", "X: '-0' is a YAML 1.1 number form read as 0"),
        ("  n_cpu_moe: [0]", "  n_cpu_moe: [+0]", "n_cpu_moe: '+0' is a YAML 1.1 number form"),
        ("      cmake_args: []", "      cmake_args: []\n      jobs_hint: +8", "jobs_hint: '+8' is a YAML"),
        ("  env: {}", "  env: {X: [on]}", "X: 'on' is read by YAML 1.1 as a boolean (True)"),
    ],
    ids=["env-plus", "env-minus-zero", "count-plus", "template-var-plus", "env-on"],
)
def test_an_unquoted_int_written_otherwise_than_python_writes_it_is_refused(project, old, new, said):
    """`env: {X: [+5]}` ran the container with X=5 (`-0`: X=0), silently: every field alike."""
    text = (project / "matrix.yaml").read_text()
    assert old in text
    (project / "matrix.yaml").write_text(text.replace(old, new, 1))
    res = tk(project, "bench", "-i", "cpu", "--dry-run")
    assert res.returncode == 4 and re.search(r"matrix\.yaml: line \d+, column \d+: ", res.stderr), res.stderr
    assert said in res.stderr and "or quote it if it is text: '" in res.stderr, res.stderr
    assert "-e X=" not in res.stdout


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("  env: {}", "  env: {X: [1.10]}", "env.X: 1.10 is not text"),
        ("  - name: cpu", "  - name: 1.50", "images[0].name: Input should be a valid string (got 1.50)"),
        ("  env: {}", "  env: {X: [1.0e+3]}", "env.X: 1.0e+3 is not text"),
    ],
)
def test_a_refused_decimal_is_quoted_as_written(project, old, new, said):
    """`env: {X: [1.10]}` was refused as `1.1 is not text`: the value YAML read, not the text written."""
    p = project / "matrix.yaml"
    p.write_text(p.read_text().replace(old, new, 1))
    with pytest.raises(BadInput) as err:
        load_matrix(p)
    assert said in str(err.value), err.value


# 3. merge keys


def test_a_yaml_merge_key_is_read_and_the_key_guards_stay(project):
    """`<<: *cpu` was refused: "could not determine a constructor for the tag ...merge; fix the syntax"."""
    p = project / "matrix.yaml"
    text = p.read_text()
    merged = text.replace("  - name: cpu\n", "  - &cpu\n    name: cpu\n", 1).replace(
        "\n  - name: vulkan\n",
        "\n  - <<: *cpu\n    name: cpu-copy\n    description: merged\n  - name: vulkan\n",
        1,
    )
    p.write_text(merged)
    lm = load_matrix(p)
    copy, cpu = lm.m.image("cpu-copy"), lm.m.image("cpu")
    assert (copy.template, copy.vars, copy.description) == (cpu.template, cpu.vars, "merged")
    p.write_text(merged.replace("    description: merged\n", "    description: merged\n    name: again\n"))
    with pytest.raises(BadInput, match=r"line \d+, column \d+: .*key 'name' is given twice"):
        load_matrix(p)


# 4. import's names


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--label", "."], "--label '.': give a short name, at most 64 characters"),
        (["--label", "-"], "--label '-': give a short name"),
        (["--label", "a" * 65], "starting with a letter or digit"),
        (["--label", "x", "--digest", "x" * 5000], "(5000 characters): give an image ID"),
        (["--label", "x", "--digest", "foo"], "--digest 'foo': give an image ID"),
        (["--label", "x", "--digest", "import:" + "a" * 65], "or import:NAME, at most 64"),
    ],
    ids=["label-dot", "label-dash", "label-65", "digest-5000", "digest-no-form", "digest-import-65"],
)
def test_import_names_are_bounded_and_of_a_form(tmp_path, args, said):
    """`import --label ..` and a 5,000-character label were taken (a table column that wide); so was a
    `--digest` of 5,000 characters, or `foo`, which every reader takes for an image an engine holds."""
    res = tk(tmp_path, "import", "--results", str(tmp_path / "r"), *args, CPU_ROWS)
    assert res.returncode == 4 and said in res.stderr, res.stderr
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").glob("*/bench.jsonl"))


def test_a_label_of_64_characters_is_imported(tmp_path):
    res = tk(tmp_path, "import", "--results", str(tmp_path / "r"), "--label", "b" * 64, CPU_ROWS)
    assert res.returncode == 0 and res.stdout.startswith("b" * 64 + ": imported 6 results"), res.stderr


def test_measure_checks_its_label_before_the_command_runs(tmp_path):
    """`measure --label` is import's label through the same check, made before an hour-long command."""
    ran = tmp_path / "ran"
    res = tk(tmp_path, "measure", "--gpu", "none", "--results", str(tmp_path / "r"), "--label", "..", "--",
             "touch", str(ran))  # fmt: skip
    assert res.returncode == 4 and "--label '..': give a short name" in res.stderr, res.stderr
    assert not ran.exists()


# 5. a slow resolver


def test_a_resolver_that_does_not_answer_is_waited_for_a_bounded_time(monkeypatch):
    """No slow DNS server can exist here (the sandbox's resolver fails in ~0.1 s): a getaddrinfo that
    sleeps stands in for one. Before, doctor and bench waited as long as the resolver did and then
    took the answer; now they stop at RESOLVE_TIMEOUT_S and say the host is taken as another one."""
    from toolkit.bench import decide
    from toolkit.host import doctor_checks

    real = socket.getaddrinfo

    def slow(host, *args, **kw):
        time.sleep(3)
        return real("127.0.0.1", *args, **kw)  # this host, had it answered

    monkeypatch.setattr(doctor_checks, "RESOLVE_TIMEOUT_S", 0.2)
    monkeypatch.setattr(socket, "getaddrinfo", slow)
    monkeypatch.setenv("DOCKER_HOST", "tcp://slow-dns.example:2375")
    monkeypatch.setenv("TOOLKIT_ENGINE", "docker")
    t0 = time.monotonic()
    short = decide.engine_elsewhere("vulkan")
    assert time.monotonic() - t0 < 2, "waited for the resolver"
    assert short is not None and "slow-dns.example did not resolve in 0.2 s, taken as another host" in str(
        short.what
    ), short
