"""A build whose RUN step's container runc failed to start for its own reason ("read init-p: connection
reset by peer", containers.RUNTIME_FLAKES) is run again, as a container's start is (containers._retrying:
START_TRIES in all), on Docker (buildx) and Podman, and the progress line says so; any other failure of a
step is not. The real engine builds every time here. What is stood in is only runc's error (it cannot be
caused on demand): the first tries' RUN step really fails (exit 1, a cache mount remembers the try), and
the cause its error line gives (`exit code: 1`, buildah's `exit status 1`) is replaced by runc's text as CI
saw it, in the output the toolkit reads; later tries are the engine's own output."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.support.e2e_helpers import engine_or_skip
from toolkit.engine import containers, images
from toolkit.images.build_plan import BuildSteps

pytestmark = pytest.mark.e2e

RUNC = (
    "failed to create shim task: OCI runtime create failed: runc create failed: unable to start container "
    "process: waiting for init preliminary setup: read init-p: connection reset by peer: unknown"
)
CAUSES = {"docker": "exit code: 1", "podman": "exit status 1"}  # what each prints of a RUN step's exit 1


def _engine(name: str) -> None:
    if name == "docker":
        engine_or_skip()
    elif shutil.which("podman") is None or subprocess.run(["podman", "info"], capture_output=True).returncode:
        pytest.fail("podman is not installed or cannot run: run ./scripts/setup-host.sh --test first")


def _context(tmp_path: Path, run: str) -> tuple[Path, str]:
    """A context whose RUN step is `run` (a cache mount of its own at /c, never cached), and its image's tag."""
    mine = uuid.uuid4().hex  # in the command too: a cache mount's id is no part of BuildKit's step cache key
    (tmp_path / "Dockerfile").write_text(
        f"FROM debian:trixie-slim\nRUN --mount=type=cache,target=/c,id=fix51b-{mine} true {mine} && {run}\n"
    )
    return tmp_path, f"toolkit-test/fix51b-flake:{uuid.uuid4().hex[:12]}"


def _command(engine: str, context: Path, tag: str) -> list[str]:
    if engine == "podman":
        return [
            "podman",
            "build",
            "--format",
            "docker",
            "--layers",
            "--network",
            "host",
            "-t",
            tag,
            str(context),
        ]
    return [
        "docker",
        "buildx",
        "build",
        "--progress=plain",
        "--network",
        "host",
        "--load",
        "-t",
        tag,
        str(context),
    ]


def _runc_fails_first(monkeypatch, engine: str, fails: int) -> list[list[str]]:
    """Every build command run, in order; in the first `fails` outputs the failed step's cause is runc's."""
    ran: list[list[str]] = []
    real = subprocess.Popen

    def popen(cmd, **kw):
        proc = real(cmd, **kw)
        ran.append(cmd)
        if len(ran) <= fails:
            proc.stdout = (line.replace(CAUSES[engine], RUNC) for line in proc.stdout)
        return proc

    monkeypatch.setattr(images.subprocess, "Popen", popen)
    monkeypatch.setattr(containers.time, "sleep", lambda s: None)
    return ran


def _remove(engine: str, tag: str) -> None:
    subprocess.run([engine, "rmi", tag], capture_output=True, check=False)


FIRST_TRY_FAILS = "sh -c 'if [ -f /c/tried ]; then echo built; else touch /c/tried; exit 1; fi'"


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_a_build_whose_run_step_runc_failed_to_start_is_built_again(engine, monkeypatch, tmp_path):
    _engine(engine)
    context, tag = _context(tmp_path, FIRST_TRY_FAILS)
    ran = _runc_fails_first(monkeypatch, engine, 1)
    said: list[str] = []
    steps = BuildSteps("flake", said.append, status=lambda s: None)
    try:
        out = images.run_buildx(_command(engine, context, tag), log_path=tmp_path / "b.log", on_line=steps)
        assert out.ok and len(ran) == 2, said
        assert images.inspect_image(tag) if engine == "docker" else True
        retry = [s for s in said if images.BUILD_RETRY in s]
        assert len(retry) == 1 and "try 2 of 3" in retry[0] and "read init-p" in retry[0], said
        log = (tmp_path / "b.log").read_text()
        assert log.count("$ ") == 2 and "read init-p" in log  # each try's output kept
    finally:
        _remove(engine, tag)


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_a_build_runc_fails_every_time_is_failed_after_the_last_try(engine, monkeypatch, tmp_path):
    _engine(engine)
    context, tag = _context(tmp_path, "sh -c 'exit 1'")
    ran = _runc_fails_first(monkeypatch, engine, containers.START_TRIES)
    out = images.run_buildx(_command(engine, context, tag), log_path=tmp_path / "b.log")
    assert not out.ok and out.returncode != 0 and len(ran) == containers.START_TRIES


OWN_FAILURES = [
    "sh -c 'echo read init-p: connection reset by peer; exit 1'",
    # brk51: its output an error line of runc's words (buildah prints a step's output unprefixed) ...
    "sh -c 'echo Error: read init-p: connection reset by peer; exit 1'",
    # ... its command holding `"` (buildah quotes the step unescaped: `STEP "RUN sh -c "..."": CAUSE`)
    'sh -c "true read init-p; exit 1"',
]


@pytest.mark.parametrize("run", OWN_FAILURES)
@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_a_step_that_failed_for_its_own_reason_is_not_built_again(engine, run, monkeypatch, tmp_path):
    """Its command quoting runc's words is no runtime failure: the error line's quoted command is not read."""
    _engine(engine)
    context, tag = _context(tmp_path, run)
    ran = _runc_fails_first(monkeypatch, engine, 0)
    said: list[str] = []
    out = images.run_buildx(_command(engine, context, tag), log_path=tmp_path / "b.log", on_line=said.append)
    assert not out.ok and len(ran) == 1 and not any(images.BUILD_RETRY in s for s in said), said
