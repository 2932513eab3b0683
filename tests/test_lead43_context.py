"""The docker CLI's context (`docker context use NAME`, DOCKER_CONTEXT), which the Docker SDK does not
read: a user whose `docker` reaches the context's engine (a rootless Docker after
dockerd-rootless-setuptool.sh, another host) had the toolkit reach /var/run/docker.sock instead, so
images built by buildx (which follows the context) and the engine the toolkit ran them on could differ.
The context's endpoint is now the toolkit's engine too, named in every message; DOCKER_HOST still wins,
as in the docker CLI. Real engine: the good context is a link to this host's own socket."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.support.runs import tk

ROOT = Path(__file__).resolve().parents[1]
SOCKET = Path("/var/run/docker.sock")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not SOCKET.exists(), reason="no Docker engine socket on this host"),
]


def _config(tmp_path: Path, current: str | None = None, **contexts: str) -> Path:
    """A DOCKER_CONFIG folder holding `contexts` (name -> endpoint) as `docker context create` writes
    them (the CLI's context store: contexts/meta/<sha256 of the name>/meta.json), and `current` as
    config.json's currentContext."""
    cfg = tmp_path / "docker-config"
    cfg.mkdir()
    (cfg / "config.json").write_text(json.dumps({"currentContext": current} if current else {}))
    for name, host in contexts.items():
        meta = cfg / "contexts" / "meta" / hashlib.sha256(name.encode()).hexdigest()
        meta.mkdir(parents=True)
        endpoint = {"Host": host, "SkipTLSVerify": False}
        (meta / "meta.json").write_text(
            json.dumps({"Name": name, "Metadata": {}, "Endpoints": {"docker": endpoint}})
        )
    return cfg


def _doctor(cfg: Path, **env: str | None) -> str:
    res = tk(ROOT, "doctor", env={"DOCKER_CONFIG": str(cfg), "DOCKER_HOST": None, **env})
    return res.stdout + res.stderr


def test_the_current_context_is_the_engine_the_toolkit_reaches(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "docker.sock").symlink_to(SOCKET)
    gone = tmp_path / "none.sock"
    cfg = _config(tmp_path, "gone", ok=f"unix://{tmp_path}/s/docker.sock", gone=f"unix://{gone}")
    # config.json's currentContext (`docker context use gone`): the toolkit asks that engine, not /var/run
    out = _doctor(cfg)
    assert f"Docker engine not reachable at 'unix://{gone}' (docker context 'gone')" in out, out
    # DOCKER_CONTEXT over config.json, as the docker CLI reads them
    out = _doctor(cfg, DOCKER_CONTEXT="ok")
    assert "ok    docker  Docker engine " in out and "not reachable" not in out, out
    # DOCKER_HOST over any context
    out = _doctor(cfg, DOCKER_HOST=f"unix://{SOCKET}")
    assert "ok    docker  Docker engine " in out and "not reachable" not in out, out


def test_a_context_that_does_not_exist_is_named_with_the_fix(tmp_path):
    out = _doctor(_config(tmp_path), DOCKER_CONTEXT="nosuch")
    assert "Docker context 'nosuch' (DOCKER_CONTEXT or `docker context use`) cannot be read" in out, out
    assert "`docker context ls` lists the contexts" in out, out


def test_the_default_context_is_this_hosts_engine(tmp_path):
    out = _doctor(_config(tmp_path, "default"))
    assert "ok    docker  Docker engine " in out, out
