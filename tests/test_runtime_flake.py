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


def test_a_run_that_started_is_never_run_again_whatever_its_callbacks_raise():
    """brk50 F1: the retry took any error of the whole run whose text held runc's words as a start that
    did not happen: a callback that raised quoting a printed line ("read init-p" in the output) ran the
    container START_TRIES times, each printing (and a bench's sink storing) its rows again."""
    engine_or_skip()
    started: list[int] = []

    def refuse(line: str) -> None:
        raise RuntimeError(f"refused line: {line}")

    spec = containers.RunSpec(
        image="debian:trixie-slim", command=["echo", "read init-p: connection reset by peer"], network="none"
    )
    with pytest.raises(RuntimeError, match="refused line: read init-p"):
        containers.run_container(spec, timeout=60, on_stdout=refuse, on_start=started.append)
    assert len(started) == 1


def test_a_detached_start_that_failed_leaves_no_container(monkeypatch):
    """brk50 F2: start_container removed the container of a failed start only where the failure was a
    runtime flake: any other (a command not in the image) left it behind, created and never started."""
    engine_or_skip()
    made: list = []
    real = containers.create_container
    monkeypatch.setattr(containers, "create_container", lambda spec: made.append(real(spec)) or made[-1])
    spec = containers.RunSpec(
        image="debian:trixie-slim", command=["nosuch-brk50"], entrypoint=[], network="none"
    )
    with pytest.raises(docker.errors.APIError, match="nosuch-brk50"):
        containers.start_container(spec)
    assert len(made) == 1 and not _exists(made[0])
