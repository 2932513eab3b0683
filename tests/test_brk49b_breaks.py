"""brk49b: faults a breaker found in this session's changes, each through the command a user types.

- A TOOLKIT_* variable holding a control character was refused before any command, `--help` of a command
  too (`TOOLKIT_CACHE=$'a\\nb' toolkit bench --help`: exit 4, no help): the help reads no variable, and it
  is where a user looks for what to set. Every command's --help prints; the command itself still refuses.
- A Docker Hub registry with a path below its namespace (`docker.io/acme/lab`: images pushed as
  docker.io/acme/lab/cpu) was taken; Docker Hub's repositories are NAMESPACE/IMAGE, and the push is
  denied only when it runs (moby/moby#31760, docker/hub-feedback#1404).
"""

from __future__ import annotations

import pytest

from tests.support.runs import ROOT, tk
from toolkit.core.errors import BadInput
from toolkit.publish.push import parse_registry


@pytest.mark.parametrize(
    "args", [("bench", "--help"), ("report", "-h"), ("campaign", "submit", "--help"), ("doctor", "--help")]
)
def test_a_commands_help_prints_beside_a_toolkit_variable_holding_a_control_character(args):
    env = {"TOOLKIT_CACHE": "/tmp/brk49b-cache\n", "TOOLKIT_HOST_KEY": "lab\x1b[2J"}
    res = tk(ROOT, *args, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("Usage: "), res.stdout
    run = tk(ROOT, "bench", "--dry-run", "-i", "cpu", env=env)  # the command itself: refused, as before
    assert run.returncode == 4, run.stdout + run.stderr
    assert "TOOLKIT_CACHE='/tmp/brk49b-cache\\n' holds a control character" in run.stderr, run.stderr
    after = tk(ROOT, "bench", "--dry-run", "-i", "cpu", "--", "--help", env=env)  # after `--`: no help
    assert after.returncode == 4, after.stdout + after.stderr


@pytest.mark.parametrize(
    "registry", ["docker.io/acme/lab", "index.docker.io/acme/lab/", "docker.io/library/acme"]
)
def test_docker_hub_takes_one_namespace_and_no_path_below_it(registry):
    with pytest.raises(BadInput, match="a path below the namespace is denied"):
        parse_registry(registry, "--registry", ["cpu"])
    assert parse_registry("docker.io/acme", "--registry", ["cpu"]) == "docker.io/acme"
    assert parse_registry("ghcr.io/acme/lab", "--registry", ["cpu"]) == "ghcr.io/acme/lab"  # not the Hub
