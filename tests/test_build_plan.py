"""What `toolkit build` builds by default (doctor's verdict per image) and its condensed progress.

No engine: the CLI cases use --dry-run, which renders and prints the commands without Docker. The
progress cases replay a real `docker buildx build --progress=plain` log of a cold CPU image build
on this machine (tests/data/buildx/cpu-cold-docker26.log: buildx 0.13.1, Docker 26.1.5).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.e2e_helpers import run_cli
from tests.support.hosts import IMAGES, fake_host
from toolkit.images.build_plan import BuildSteps, host_plan, previous_build_note
from toolkit.matrix.api import load_matrix
from toolkit.results.records import BuildRecord, ResultStore

DATA = Path(__file__).parent / "data" / "buildx"
GPU_LESS = not (Path("/dev/kfd").exists() or any(Path("/dev/dri").glob("renderD*")))
gpu_less = pytest.mark.skipif(not GPU_LESS, reason="this host has a GPU device node")


def _commands(out: str) -> list[str]:
    return [ln.split(":", 1)[0] for ln in out.splitlines() if re.match(r"[\w.-]+: docker buildx build ", ln)]


def _skipped(out: str) -> list[str]:
    return [ln.split(":", 1)[0] for ln in out.splitlines() if ": skipped: cannot run on this host: " in ln]


@gpu_less
def test_default_build_on_a_gpu_less_host_is_the_cpu_image_only(project):
    res, _ = run_cli(project, "build", "--dry-run")
    assert _commands(res.output) == ["cpu"]
    assert _skipped(res.output) == [
        "vulkan",
        "vulkan-mesa-trixie",
        "rocm",
        "rocm-7.2.4",
        "vllm",
        "vllm-prebuilt",
        *(["sglang"] if "sglang:" in res.output else []),
    ]
    vk = next(ln for ln in res.output.splitlines() if ln.startswith("vulkan: skipped"))
    assert "no GPU render node" in vk and "--allow-software-gpu" in vk
    assert vk.endswith(
        f"Build it anyway: `toolkit build --matrix {project / 'matrix.yaml'} -i vulkan` (or `--all`)"
    )
    rocm = next(ln for ln in res.output.splitlines() if ln.startswith("rocm: skipped"))
    assert "no /dev/kfd" in rocm and f"`toolkit build --matrix {project / 'matrix.yaml'} -i rocm`" in rocm


@gpu_less
def test_software_gpu_opt_in_adds_the_vulkan_image(project):
    res, _ = run_cli(project, "build", "--dry-run", "--allow-software-gpu")
    assert _commands(res.output) == ["cpu", "vulkan", "vulkan-mesa-trixie"] and "rocm" in _skipped(res.output)


@pytest.mark.parametrize(
    "args", [["--all"], ["--push", "--registry", "127.0.0.1:5000/x"]], ids=["all", "push"]
)
def test_all_and_publishing_build_every_image(project, args):
    res, _ = run_cli(project, "build", "--dry-run", *args)
    names = [i.name for i in load_matrix(project / "matrix.yaml").m.images]
    assert _commands(res.output) == names and _skipped(res.output) == []


def test_named_images_are_built_whatever_the_host(project):
    res, _ = run_cli(project, "build", "--dry-run", "-i", "rocm", "-i", "vulkan")
    assert _commands(res.output) == ["rocm", "vulkan"] and _skipped(res.output) == []


def test_json_lists_skipped_images_with_the_reason(project):
    import json

    res, _ = run_cli(project, "build", "--dry-run", "--json")
    out = {r["image"]: r for r in json.loads(res.output)["result"]}
    assert out["cpu"]["status"] == "dry-run"
    for name, r in out.items():
        if name != "cpu" and r["status"] == "skipped":
            assert r["reason"].startswith("cannot run on this host: ") and r["command"] == []


def test_host_plan_on_an_r9700_host_builds_every_image(tmp_path):
    h = fake_host(tmp_path)
    build, skipped = host_plan(IMAGES, sysfs=h["sysfs"], dev=h["dev"])
    assert [s.name for s in build] == ["rocm", "vulkan", "cpu", "vllm"] and skipped == []


def test_host_plan_without_kfd_keeps_vulkan_on_the_render_node(tmp_path):
    h = fake_host(tmp_path)
    (h["dev"] / "kfd").unlink()
    build, skipped = host_plan(IMAGES, sysfs=h["sysfs"], dev=h["dev"])
    assert [s.name for s in build] == ["vulkan", "cpu"]
    assert [(s.name, s.reason) for s in skipped][0] == (
        "rocm",
        "no /dev/kfd (no AMD GPU driver (amdgpu/KFD) on this host)",
    )


def _replay(lines: list[str], **kw) -> list[str]:
    out: list[str] = []
    steps = BuildSteps("cpu", out.append, **kw)
    for line in lines:
        steps(line)
    steps.close()
    return out


def test_condensed_progress_of_a_real_cold_build():
    lines = (
        (DATA / "cpu-cold-docker26.log").read_text().splitlines()[1:]
    )  # the log's first line is the command
    out = _replay(lines)
    assert len(out) < len(lines) / 20
    titles = [
        ln.removeprefix("   cpu | ").split("] ", 1)[0] + "]"
        for ln in out
        if "] " in ln and "done in" not in ln
    ]
    assert titles == [
        "[build 2/4]",
        "[runtime 2/5]",
        "[build 3/4]",
        "[build 4/4]",
        "[runtime 3/5]",
        "[runtime 4/5]",
        "[runtime 5/5]",
    ]
    assert [ln for ln in out if "done in" in ln] == [
        "   cpu | [build 2/4] done in 17.0 s",
        "   cpu | [runtime 2/5] done in 18.6 s",
        "   cpu | [build 4/4] done in 161.9 s",
    ]
    assert not [ln for ln in out if "from cache" in ln]  # the build's closing line says it, once
    assert all(len(ln) <= len("   cpu | ") + 100 for ln in out)


def test_cached_steps_are_counted_not_printed_and_errors_are_shown():
    lines = [
        "#4 [build 1/5] FROM docker.io/library/debian:trixie-slim",
        "#4 CACHED",
        "#6 [build 2/5] RUN apt-get update",
        "#6 CACHED",
        "#9 [build 4/5] RUN cmake -S /src -B /build",
        "#9 0.412 -- configuring",
        "#9 5.101 ERROR: cmake -D variable(s) this llama.cpp source does not have: GGML_FOO",
        '#9 ERROR: process "/bin/sh -c cmake" did not complete successfully: exit code: 1',
        "ERROR: failed to solve: process did not complete successfully",
    ]
    out = _replay(lines)
    assert out == [
        "   cpu | [build 4/5] RUN cmake -S /src -B /build",
        "   cpu | #9   -- configuring",  # the failing step's own last lines come before its error
        "   cpu | #9 ERROR: cmake -D variable(s) this llama.cpp source does not have: GGML_FOO",
        '   cpu | ERROR: process "/bin/sh -c cmake" did not complete successfully: exit code: 1',
        "   cpu | ERROR: failed to solve: process did not complete successfully",
    ]
    assert _replay(lines, verbose=True)[: len(lines)] == [f"   cpu | {ln}" for ln in lines]


def test_previous_build_note_gives_the_last_and_the_last_cold_build(tmp_path):
    store = ResultStore(tmp_path)
    assert previous_build_note(store, "cpu") == ""
    for secs, cached in ((509.2, 0), (2.5, 9)):
        store.add_build(
            BuildRecord(
                image="cpu",
                ref="r",
                digest="sha256:" + "a" * 64,
                backend="cpu",
                template="t",
                template_hash="h",
                created="c",
                build_seconds=secs,
                steps=9,
                cached_steps=cached,
            )
        )
    assert (
        previous_build_note(store, "cpu")
        == "; previous build 2.5 s, 9 of 9 steps from cache; last build of every step 509.2 s"
    )


def test_a_failing_step_shows_its_own_last_lines_before_the_error():
    # the condensed progress dropped apt's `E:` line: only BuildKit's "exit code: 100" was on screen
    from toolkit.images.build_plan import FAIL_TAIL, BuildSteps

    out: list[str] = []
    steps = BuildSteps("cpu", out.append)
    steps("#5 [build 2/5] RUN apt-get install -y foo")
    for i in range(FAIL_TAIL + 5):
        steps(f"#5 0.{i:03d} Reading package lists... {i}")
    steps("#5 1.204 E: Unable to locate package foo")
    steps(
        '#5 ERROR: process "/bin/sh -c apt-get install -y foo" did not complete successfully: exit code: 100'
    )
    text = "\n".join(out)
    assert "E: Unable to locate package foo" in text
    assert text.index("E: Unable to locate") < text.index("exit code: 100")
    assert sum("Reading package lists" in ln for ln in out) == FAIL_TAIL - 1  # the tail, not the whole log


def test_the_status_line_shows_the_compilers_percentage_and_a_log_gets_a_heartbeat(monkeypatch):
    from toolkit.images import build_plan
    from toolkit.images.build_plan import BuildSteps

    status: list[str] = []
    steps = BuildSteps("cpu", lambda s: None, status=status.append)
    steps("#6 [build 4/5] RUN cmake --build /build -j2")
    steps("#6 3.100 [ 45%] Building CXX object ggml/src/ggml.c.o")
    assert status[-1] == "cpu: [build 4/5] compiling 45%"
    # off a terminal: no status line, a heartbeat once HEARTBEAT_S has passed since the last line said
    clock = [1000.0]
    monkeypatch.setattr(build_plan.time, "monotonic", lambda: clock[0])
    out: list[str] = []
    steps = BuildSteps("cpu", out.append)
    steps("#6 [build 4/5] RUN cmake --build /build -j2")
    steps("#6 1.0 [ 10%] Building C object a.o")
    clock[0] += build_plan.HEARTBEAT_S + 1
    steps("#6 40.0 [ 52%] Building C object b.o")
    assert out[-1] == "   cpu | still compiling 52%, 31 s"  # short: the build's time so far
    steps("#6 41.0 [ 53%] Building C object c.o")
    assert len(out) == 2  # not again until HEARTBEAT_S more


def test_a_silent_step_still_says_it_runs_off_a_terminal(monkeypatch):
    # the heartbeat came only with the step's next line: a step silent for 10 minutes said nothing
    import time

    from toolkit.images import build_plan
    from toolkit.images.build_plan import BuildSteps

    monkeypatch.setattr(build_plan, "HEARTBEAT_S", 0.3)
    out: list[str] = []
    steps = BuildSteps("cpu", out.append)
    try:
        steps("#7 [build 4/5] RUN cmake --build /build -j2")
        steps("#7 0.5 [ 12%] Building C object a.o")
        time.sleep(1.0)  # no line at all meanwhile
    finally:
        steps.close()
    beats = [ln for ln in out if "still" in ln]
    assert beats and beats[0].startswith("   cpu | still compiling 12%, ") and beats[0].endswith(" s")
    n = len(out)
    time.sleep(0.5)
    assert len(out) == n  # closed: silent


def test_the_build_status_line_keeps_its_stage_text_and_prints_log_lines_above_itself():
    # `[build 2/5]` was read as rich markup and vanished from the status; log lines written past the
    # live display left its last frame in the scrollback, glued to the next line
    import io

    from rich.console import Console

    from toolkit.cli.common import BuildStatus

    buf = io.StringIO()
    status = BuildStatus()
    status.console = Console(file=buf, force_terminal=True, width=80, color_system=None)
    status.update("cpu: [build 2/5] RUN apt-get update")
    status.echo("   cpu | [build 2/5] RUN apt-get update")
    status.progress.refresh()
    status.stop()
    text = buf.getvalue()
    assert "cpu: [build 2/5] RUN apt-get update" in text  # the status, its stage text intact
    assert "   cpu | [build 2/5] RUN apt-get update\n" in text  # the log line, whole, on a line of its own


def test_a_run_steps_title_is_its_command_not_its_mounts():
    """A fresh-host newcomer saw `[stage-1 3/8] RUN --mount=type=cache,target=/var/cache/apt,sharing=loc…`
    for 35 s: the title was the step's cache mounts, cut before the command."""
    lines = [
        "#7 [stage-1 3/8] RUN --mount=type=cache,target=/var/cache/apt,sharing=locked,id=apt "
        "--mount=type=cache,target=/var/lib/apt,sharing=locked apt-get update && apt-get install -y cmake",
        "#7 0.5 Get:1 http://deb.debian.org/debian trixie InRelease",
    ]
    assert _replay(lines)[0] == "   cpu | [stage-1 3/8] RUN apt-get update && apt-get install -y cmake"
    # as the engines print it: the Dockerfile's continuation lines joined with their indentation
    real = (DATA / "cpu-cold-docker26.log").read_text().splitlines()[1:]
    titles = [ln for ln in _replay(real) if "] RUN " in ln]
    assert titles and not [t for t in titles if "--mount" in t], titles
