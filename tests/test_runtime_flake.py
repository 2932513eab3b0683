"""A container start that runc fails for a reason that is not the image's ("read init-p: connection
reset by peer", seen once in CI on debian:trixie-slim) is made again; any other start failure is raised
at once. The real engine creates, starts and removes every container here; what is mocked is only the
flake itself (it cannot be caused on demand): the first container's `start` raises the engine's error
text as CI saw it, before the engine is asked."""

from __future__ import annotations

import docker.errors
import pytest
import requests

from tests.support.e2e_helpers import engine_or_skip
from toolkit.engine import containers
from toolkit.engine.choice import client

pytestmark = pytest.mark.e2e

CI_TEXT = (
    "failed to create task for container: failed to create shim task: OCI runtime create failed: runc "
    "create failed: unable to start container process: waiting for init preliminary setup: read init-p: "
    "connection reset by peer: unknown"
)


def _failing_first(monkeypatch, text: str, fails: int = 1) -> list:
    """Every container create_container makes, in order; the first `fails` raise `text` on start."""
    made: list = []
    real = containers.create_container

    def create(spec):
        ctr = real(spec)
        made.append(ctr)
        if len(made) <= fails:

            def start(*a, **k):  # the engine's answer: a 500 carrying runc's text
                answer = requests.Response()
                answer.status_code = 500
                raise docker.errors.APIError("500 Server Error", response=answer, explanation=text)

            ctr.start = start
        return ctr

    monkeypatch.setattr(containers, "create_container", create)
    monkeypatch.setattr(containers.time, "sleep", lambda s: None)
    return made


def _exists(ctr) -> bool:
    try:
        client().containers.get(ctr.id)
        return True
    except docker.errors.NotFound:
        return False


SPEC = containers.RunSpec(image="debian:trixie-slim", command=["echo", "ran"], network="none")


def test_run_after_a_runtime_flake_is_the_second_containers(monkeypatch):
    engine_or_skip()
    made = _failing_first(monkeypatch, CI_TEXT)
    out = containers.run_container(SPEC, timeout=60)
    assert (out.exit_code, out.stdout.strip()) == (0, "ran")
    assert len(made) == 2 and not any(_exists(c) for c in made)


def test_a_flake_every_time_is_raised_after_the_last_try(monkeypatch):
    engine_or_skip()
    made = _failing_first(monkeypatch, CI_TEXT, fails=containers.START_TRIES)
    with pytest.raises(docker.errors.APIError, match="read init-p"):
        containers.run_container(SPEC, timeout=60)
    assert len(made) == containers.START_TRIES and not any(_exists(c) for c in made)


def test_any_other_start_failure_is_raised_at_once(monkeypatch):
    engine_or_skip()
    made = _failing_first(monkeypatch, 'exec: "nosuch": executable file not found in $PATH')
    with pytest.raises(docker.errors.APIError, match="nosuch"):
        containers.run_container(SPEC, timeout=60)
    assert len(made) == 1 and not _exists(made[0])


def test_a_detached_start_after_a_flake_removes_the_first_container(monkeypatch):
    engine_or_skip()
    made = _failing_first(monkeypatch, CI_TEXT)
    spec = containers.RunSpec(image="debian:trixie-slim", command=["sleep", "30"], network="none")
    ctr = containers.start_container(spec)
    try:
        assert ctr.id == made[1].id and not _exists(made[0])
        ctr.reload()
        assert ctr.status == "running"
    finally:
        containers.remove_container(ctr)
