"""End to end on real engines and a real registry: push the CPU image to Debian's docker-registry on
loopback (the `registry` fixture: a throwaway container, tests/support/service_containers.py), pull it by digest into a second, empty Docker engine (a fresh host), and reproduce a
recorded CPU run there on the generated tiny model. Nothing is mocked.

The CPU image is the one `toolkit build --image cpu` leaves as toolkit/cpu:latest (test_e2e_cpu.py
builds it in CI); this module records it as the build of its own project instead of building again.
The second engine is a plain `dockerd` with its own data root and socket, so removing and pulling
images there never touches images other tests use.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.support.e2e_helpers import (
    engine_or_skip,
    make_project,
    remove_second_dockerd_bridge,
    run_cli,
    second_dockerd,
    untag_image,
)
from tests.support.runs import reproduce_cli, tk
from toolkit.cli.main import cli
from toolkit.cli.publish import export_run, push, reproduce
from toolkit.engine import api as engine
from toolkit.publish import push as publish
from toolkit.results.records import BuildRecord, ResultStore

pytestmark = pytest.mark.e2e

for _cmd in (push, export_run, reproduce):
    if _cmd.name not in cli.commands:
        cli.add_command(_cmd)

# One llama-bench thread: with two threads on this 2-core machine, any other load stalls ggml's spin
# barrier and the relative stddev of a tiny-model test reached 60-170 % (one thread: mostly 1-30 %).
AXES = {
    "n_prompt": [64, 256],
    "n_gen": [16],
    "n_ubatch": [32, 512],
    "n_batch": [512],
    "n_gpu_layers": [0],
    "repetitions": 3,
    "threads": 1,
}
# Tiny-model tests take well under a millisecond each: on a quiet machine tok/s of the same image
# moved up to ~25 % between runs (per-test relative stddev 1-10 %); with other jobs on the 2 cores,
# up to 2x; in a full suite (2026-12-01) a recorded run came out 52-60 % slower than both of its
# re-runs, no telemetry flag, and (2026-12-06) a recorded tg16 at 6,109 t/s re-ran twice at 11,222 and
# 11,376 (+84-86 %, beyond the 60 % this test had). 100 % takes a same-image re-run within 2x either way;
# a recorded run at 20 % of the speed (x5, +400 %) stays beyond it with a re-run up to 2x off either way.
THRESHOLD_PCT = 100
SLOWER = 0.2  # the share of the real speed the doctored published numbers claim
CPU_IMAGE = "toolkit/cpu:latest"
VULKAN_IMAGE = os.environ.get("TOOLKIT_E2E_VULKAN_IMAGE", "toolkit/vulkan:latest")
NAMESPACE = "toolkit-e2e"  # pushed as <registry>/toolkit-e2e/<image>
IMAGE_WAIT_S = float(os.environ.get("TOOLKIT_E2E_IMAGE_WAIT", "900"))


def _wait(check, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} not ready after {timeout:.0f} s")


@pytest.fixture(scope="module")
def fresh_engine():
    """A second dockerd with an empty image store and its own socket: DOCKER_HOST for a fresh host."""
    engine_or_skip()
    root = Path(
        tempfile.mkdtemp(prefix="tk-engine-", dir="/tmp")
    )  # short: unix socket paths are <= 107 chars
    host = f"unix://{root / 'docker.sock'}"
    cmd = second_dockerd(root, host)
    with (root / "dockerd.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait(
            lambda: subprocess.run(["docker", "-H", host, "info"], capture_output=True).returncode == 0,
            60,
            f"second dockerd (log {root / 'dockerd.log'})",
        )
        yield host
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)
        remove_second_dockerd_bridge(root)


def record_run(dest: Path, name: str, ref: str, axes: dict, *bench_args: str) -> tuple[Path, str, str]:
    """A project whose build record of `name` is the local image `ref`, and one recorded bench run of it."""
    if (
        engine.inspect_image(ref) is None and ref == f"toolkit/{name}:latest"
    ):  # run alone: build it (cached if built before)
        run_cli(make_project(dest / "build", images=[name], bench=axes), "build", "--image", name)
    _wait(
        lambda: engine.inspect_image(ref) is not None,
        IMAGE_WAIT_S,
        f"{ref} (build it: `toolkit build --image {name}`)",
    )
    info = engine.inspect_image(ref)
    project = make_project(dest, images=[name], bench=axes)
    store = ResultStore(project / "results")
    store.add_build(
        BuildRecord(
            image=name,
            ref=ref,
            digest=info.id,
            backend=info.labels.get("org.toolkit.backend", name),
            template=info.labels.get("org.toolkit.template", f"llama-{name}.Dockerfile.j2"),
            template_hash=info.labels.get("org.toolkit.template-hash", ""),
            labels=info.labels,
            size_bytes=info.size,
            source_commit=info.labels.get("org.opencontainers.image.revision"),
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            repo_digests=info.repo_digests,
        )
    )
    res, _ = run_cli(project, "bench", "--image", name, *bench_args)
    assert f"{name} x tiny-qwen3moe: ok, 6 results" in res.output, res.output
    (run_id,) = {r.run_id for r in store.results()}
    return project, run_id, info.id


def publish_run(project: Path, name: str, run_id: str, registry: str, dest: Path) -> tuple[Path, BuildRecord]:
    """Push the image, export the run, copy the folder where no project exists (a fresh host's checkout)."""
    run_cli(project, "push", "--image", name, "--registry", registry)
    out = dest / "export"
    run_cli(project, "export-run", run_id, "--out", str(out))
    fresh = dest / "fresh-host" / "run"
    shutil.copytree(out, fresh)
    return fresh, ResultStore(project / "results").latest_build(name)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    engine_or_skip()
    return record_run(tmp_path_factory.mktemp("origin-host"), "cpu", CPU_IMAGE, AXES)


@pytest.fixture(scope="module")
def pushed(recorded, registry):
    project, run_id, digest = recorded
    res, _ = run_cli(project, "push", "--image", "cpu", "--registry", f"{registry.host}/{NAMESPACE}")
    rec = ResultStore(project / "results").latest_build("cpu")
    yield project, run_id, rec, res.output
    for ref in rec.pushed:  # the loopback tags are this module's; toolkit/cpu:latest stays
        untag_image(ref)


def manifest_digest(registry: str, name: str, tag: str) -> str:
    host, ns = registry.split("/", 1)
    req = urllib.request.Request(
        f"http://{host}/v2/{ns}/{name}/manifests/{tag}",
        method="HEAD",
        headers={
            "Accept": "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
        },
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["Docker-Content-Digest"]


def test_push_tags_the_build_and_records_the_registry_digest(pushed, registry):
    ns = f"{registry.host}/{NAMESPACE}"
    project, _, rec, output = pushed
    digest = rec.digest
    fixed = publish.fixed_tag(rec)
    assert re.fullmatch(r"0c1e57098-cpu-cpu-0c1e57098-\d{8}", fixed)
    assert rec.pushed == [f"{ns}/cpu:{fixed}", f"{ns}/cpu:cpu-latest"]
    (repo_digest,) = [d for d in rec.repo_digests if d.startswith(ns)]
    served = manifest_digest(ns, "cpu", fixed)
    assert repo_digest == f"{ns}/cpu@{served}" and manifest_digest(ns, "cpu", "cpu-latest") == served
    assert rec.attestations == publish.NO_ATTESTATIONS and rec.push_seconds > 0
    builds = ResultStore(project / "results").builds()
    assert [b.digest for b in builds] == [digest, digest]  # an updated record, same image digest
    assert f"-> {repo_digest}" in output
    print(f"push: {rec.push_seconds:.1f} s for {rec.size_bytes / 1e6:.0f} MB -> {repo_digest}")


def test_pull_by_digest_on_a_clean_engine_gives_the_recorded_image_id(pushed, fresh_engine, monkeypatch):
    _, _, rec, _ = pushed
    (repo_digest,) = [d for d in rec.repo_digests if "/toolkit-e2e/" in d]
    monkeypatch.setenv("DOCKER_HOST", fresh_engine)
    assert engine.inspect_image(rec.digest) is None, "the second engine must start without the image"
    out = engine.pull_image(repo_digest)
    assert out.ok, out.error
    info = engine.inspect_image(repo_digest)
    assert info is not None and info.id == rec.digest and repo_digest in info.repo_digests
    print(f"pull by digest on a clean engine: {out.seconds:.1f} s, image ID {info.id[:19]} as recorded")
    assert untag_image(repo_digest)  # leave the engine clean for the reproduce test
    assert engine.inspect_image(rec.digest) is None


@pytest.fixture(scope="module")
def published(pushed, tmp_path_factory):
    """The run exported, then copied where no project exists (the fresh host's checkout of it)."""
    project, run_id, _, _ = pushed
    out = tmp_path_factory.mktemp("export") / "run"
    run_cli(project, "export-run", run_id, "--out", str(out))
    fresh = tmp_path_factory.mktemp("fresh-host") / "run"
    shutil.copytree(out, fresh)
    return fresh, run_id


def test_reproduce_pulls_by_digest_and_reproduces_the_cpu_run(published, pushed, fresh_engine, monkeypatch):
    """Pull, verify, re-run, compare. A verdict of `not reproduced` gets one more re-run, as a user on a busy
    host would do: other jobs on these 2 cores have moved a whole tiny-model run by up to 2x (README)."""
    folder, run_id = published
    digest = pushed[2].digest
    monkeypatch.setenv("DOCKER_HOST", fresh_engine)
    output, code = reproduce_cli(folder, "--threshold", str(THRESHOLD_PCT))
    print(output)
    assert code in (0, 7), output
    assert f"image cpu {digest[:19]}: pulled " in output and "image ID matches the record" in output
    assert "model tiny-qwen3moe: generated" in output and "matches the record" in output
    if code == 7:
        output, code = reproduce_cli(folder, "--threshold", str(THRESHOLD_PCT))
        print(output)
        assert "image cpu" in output and "present in the engine; image ID matches the record" in output
    assert code == 0, output
    # 6 rows measured; the verdict compares 5 or 6 tests: tg16's two rows (ub 32 and ub 512) fold into one, as
    # in the report (cases38), only when their tok/s agree within noise on each side, and on a busy 2-core host
    # they often do not (CI: 9,987 vs 6,752 t/s recorded)
    verdict = re.search(r"verdict: reproduced within noise \(([56])/([56]) tests within noise", output)
    assert verdict and verdict[1] == verdict[2], output
    again = ResultStore(folder / "reproduce" / "results").results()
    last = max(r.run_id for r in again)
    assert last != run_id and f"reproduced as run {last}" in output
    assert (
        f"--run {last}`" in output and f"`toolkit compare {run_id} {last} --results " in output
    )  # its closing lines: A the published run, B this one, as its table (nc50 S4)
    cmd = re.findall(r"`(toolkit compare [^`]+)`", output)[-1]
    got = json.loads(tk(Path.cwd(), *shlex.split(cmd)[1:], "--json").stdout)["result"]
    assert (got["a"]["label"], got["b"]["label"]) == (f"run {run_id}", f"run {last}"), got
    mine = [r for r in again if r.run_id == last]
    assert len(mine) == 6 and {r.image.digest for r in mine} == {digest}
    assert all(r.status == "ok" and r.avg_ts > 0 for r in mine)


def test_a_recorded_run_at_well_under_half_the_speed_is_not_reproduced(
    published, fresh_engine, monkeypatch, tmp_path
):
    src, _ = published
    folder = tmp_path / "run"
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("reproduce"))
    lines = []
    for line in (folder / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        r["avg_ts"] *= SLOWER  # the published numbers claim 20 % of the speed this image really has
        r["stddev_ts"] *= SLOWER
        r["samples_ts"] = [x * SLOWER for x in r["samples_ts"]]
        lines.append(json.dumps(r))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("DOCKER_HOST", fresh_engine)
    output, code = reproduce_cli(folder, "--threshold", str(THRESHOLD_PCT))
    print(output)
    if "on a flagged cell (held)" in output and "run again on an idle host" in output:
        pytest.skip(
            "the host was busy (host-busy held the cells): the verdict this test reads needs an idle host"
        )
    assert code == 7, output
    assert "beyond noise" in output and "verdict: not reproduced" in output


@pytest.mark.slow
def test_reproduce_a_vulkan_run_on_lavapipe(registry, fresh_engine, tmp_path_factory, monkeypatch):
    """The Vulkan image (built by test_e2e_vulkan.py) on Mesa lavapipe: recorded, pushed, pulled by digest
    into the fresh engine and re-run there with its cold shader cache (minutes). Software-Vulkan tok/s
    are a smoke signal, so this checks the reproduction is complete, not its verdict."""
    engine_or_skip()
    dest = tmp_path_factory.mktemp("vulkan")
    axes = {**AXES, "n_gpu_layers": [99], "timeout_s": 1800}
    project, run_id, digest = record_run(
        dest / "origin-host", "vulkan", VULKAN_IMAGE, axes, "--allow-software-gpu"
    )
    folder, rec = publish_run(project, "vulkan", run_id, f"{registry.host}/{NAMESPACE}", dest)
    try:
        monkeypatch.setenv("DOCKER_HOST", fresh_engine)
        output, code = reproduce_cli(folder, "--threshold", str(THRESHOLD_PCT))
        print(output)
        assert code in (0, 7), output
        assert f"image vulkan {digest[:19]}: pulled " in output and "image ID matches the record" in output
        assert "software Vulkan device (Mesa lavapipe)" in output and "| missing" not in output
        again = ResultStore(folder / "reproduce" / "results").results()
        assert len(again) == 6 and all(r.status == "ok" and "llvmpipe" in (r.gpu_info or "") for r in again)
    finally:
        monkeypatch.delenv("DOCKER_HOST")
        for ref in rec.pushed:
            untag_image(ref)
