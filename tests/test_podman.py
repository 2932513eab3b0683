"""Podman as the second engine, without an engine: which engine is chosen, the `podman build` and
`podman run` forms, the device passthrough per engine (numeric GIDs, keep-groups, CDI), podman's
build output read as steps, the image ID from --iidfile, and doctor's Podman lines. The real builds
and benchmarks on rootful and rootless Podman are in tests/test_e2e_podman.py."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from toolkit.core.errors import BadInput, EngineUnavailable
from toolkit.engine import api as engine
from toolkit.engine import choice, containers, images
from toolkit.host import devices, doctor_checks

DATA = Path(__file__).parent / "data"
KFD = "/dev/kfd:/dev/kfd:rwm"
RENDER = "/dev/dri/renderD128:/dev/dri/renderD128:rwm"


@pytest.fixture
def podman(monkeypatch):
    monkeypatch.setenv("TOOLKIT_ENGINE", "podman")


def test_engine_choice_env_first_then_auto(monkeypatch):
    monkeypatch.setenv("TOOLKIT_ENGINE", "podman")
    assert engine.engine_name() == "podman" and engine.cli() == "podman"
    monkeypatch.setenv("TOOLKIT_ENGINE", "Docker")
    assert engine.engine_name() == "docker" and engine.engine_label() == "Docker engine"
    monkeypatch.setenv("TOOLKIT_ENGINE", "auto")
    monkeypatch.setenv("DOCKER_HOST", "unix:///somewhere/docker.sock")
    assert engine.engine_name() == "docker"  # DOCKER_HOST set: the user means Docker
    monkeypatch.setenv("TOOLKIT_ENGINE", "lxc")
    with pytest.raises(BadInput, match="TOOLKIT_ENGINE='lxc' is not an engine: set it to docker, podman"):
        engine.engine_name()


def test_auto_picks_podman_only_where_docker_is_absent(monkeypatch):
    monkeypatch.delenv("TOOLKIT_ENGINE", raising=False)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    real_exists = Path.exists
    monkeypatch.setattr(
        Path, "exists", lambda p: False if str(p) == "/var/run/docker.sock" else real_exists(p)
    )
    monkeypatch.setattr(choice.shutil, "which", lambda name: "/usr/bin/podman" if name == "podman" else None)
    assert engine.engine_name() == "podman"
    monkeypatch.setattr(
        choice.shutil, "which", lambda name: "/usr/sbin/dockerd" if name == "dockerd" else None
    )
    assert engine.engine_name() == "docker"


def test_cli_engine_option_sets_the_environment_for_its_invocation_only(monkeypatch, project):
    from click.testing import CliRunner

    from toolkit.cli.main import cli

    monkeypatch.chdir(project)
    monkeypatch.setenv("TOOLKIT_ENGINE", "auto")
    res = CliRunner().invoke(cli, ["--engine", "podman", "bench", "-i", "cpu", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "(sweep): podman run " in res.output  # the engine module read it while the command ran
    assert os.environ.get("TOOLKIT_ENGINE") == "auto"  # the next invocation of this process: its own
    res = CliRunner().invoke(cli, ["--engine", "lxc", "doctor"])
    assert res.exit_code == 2 and "'lxc' is not one of 'docker', 'podman', 'auto'" in res.output


def test_podman_build_command_is_the_same_build_in_podman_form(podman, tmp_path):
    cmd = engine.buildx_command(
        tmp_path,
        tags=["toolkit/cpu:latest"],
        labels={"a": "1"},
        build_args={"X": "y"},
        metadata_file=tmp_path / "iid",
        no_cache=True,
        secrets=["id=pip_ca,src=/etc/ssl/certs/ca-certificates.crt"],
    )
    assert cmd[:7] == ["podman", "build", "--format", "docker", "--layers", "--network", "host"]
    assert "--load" not in cmd and "--progress=plain" not in cmd and "--metadata-file" not in cmd
    for pair in (
        ["-t", "toolkit/cpu:latest"],
        ["--label", "a=1"],
        ["--build-arg", "X=y"],
        ["--secret", "id=pip_ca,src=/etc/ssl/certs/ca-certificates.crt"],
        ["--iidfile", str(tmp_path / "iid")],
    ):
        i = cmd.index(pair[0])
        assert cmd[i : i + 2] == pair
    assert "--no-cache" in cmd and cmd[-1] == str(tmp_path)
    with pytest.raises(BadInput, match="need Docker's buildx"):
        engine.buildx_command(tmp_path, tags=[], labels={}, build_args={}, push=True)


def test_docker_build_command_unchanged(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLKIT_ENGINE", "docker")
    cmd = engine.buildx_command(tmp_path, tags=["t"], labels={}, build_args={}, metadata_file=tmp_path / "m")
    assert cmd[:3] == ["docker", "buildx", "build"] and "--load" in cmd and "--metadata-file" in cmd


def test_run_and_exec_commands_name_the_engine(podman):
    spec = engine.RunSpec(
        image="toolkit/cpu:latest", command=["llama-bench"], devices=[KFD], group_add=["44"]
    )
    assert engine.run_command(spec)[:3] == ["podman", "run", "--rm"]
    assert engine.exec_command("serve", ["true"]) == ["podman", "exec", "serve", "true"]


def test_podman_build_output_reads_as_steps_and_cache_hits():
    """A real `podman build` (Podman 4.3.1, buildah 1.28.2) of the CPU image, its second run: two
    stages, steps served from cache (`--> Using cache`) and steps that ran."""
    lines = (DATA / "podman-build-4.3.1.log").read_text().splitlines()
    reader = images.PodmanSteps()
    steps: set[str] = set()
    cached: set[str] = set()
    out: list[str] = []
    for line in lines:
        for translated in reader(line):
            images._count_step(translated, steps, cached)
            out.append(translated)
    assert "#1 [stage-1 1/8] FROM debian:trixie-slim AS build" in out
    # 31 STEP lines: 2 FROM, 20 config-only (ARG, ENV, LABEL: buildah turns each --label into one, ...),
    # 9 that change files, as BuildKit counts them (README: "0/9 steps from cache"); all cached
    assert len(steps) == 9 and cached == steps
    assert "#11 [stage-2 9/23] WORKDIR /home/bench" in out and not any("LABEL" in line for line in out)
    assert not any(line.startswith("--> ") for line in out)


def test_podman_steps_time_a_step_that_ran():
    reader = images.PodmanSteps()
    assert reader("STEP 1/2: FROM debian:trixie-slim") == ["#1 [1/2] FROM debian:trixie-slim"]
    assert reader("STEP 2/2: RUN make") == ["#1 DONE 0.0s", "#2 [2/2] RUN make"]
    out = reader("[ 96%] Built target llama-common")  # step output is never a step header
    assert len(out) == 1 and re.fullmatch(r"#2 \d+\.\d{3} \[ 96%\] Built target llama-common", out[0])
    steps: set[str] = set()
    images._count_step(out[0], steps, set())
    assert steps == set()
    done = reader("--> 1b75d0027b0")
    assert len(done) == 1 and done[0].startswith("#2 DONE ")
    assert reader("Successfully tagged localhost/toolkit/cpu:latest")[0].endswith(
        " Successfully tagged localhost/toolkit/cpu:latest"
    )


def test_built_image_id_from_iidfile_or_buildx_metadata(tmp_path):
    digest = "sha256:" + "ab" * 32
    (tmp_path / "iid").write_text(digest)
    (tmp_path / "meta.json").write_text(f'{{"containerimage.config.digest": "{digest}"}}')
    (tmp_path / "junk").write_text("not an id")
    assert engine.built_image_id(tmp_path / "iid") == digest
    assert engine.built_image_id(tmp_path / "meta.json") == digest
    assert engine.built_image_id(tmp_path / "junk") is None
    assert engine.built_image_id(tmp_path / "absent") is None


def _rocm(**kw) -> devices.DeviceProfile:
    return devices.DeviceProfile(backend="rocm", devices=[KFD, RENDER], group_add=["993", "44"], **kw)


def test_passthrough_per_engine():
    p = _rocm()
    assert devices.passthrough(p, "docker") == ([KFD, RENDER], ["993", "44"])
    assert devices.passthrough(p, "podman") == ([KFD, RENDER], ["993", "44"])
    assert devices.passthrough(p, "podman-rootless") == ([KFD, RENDER], ["keep-groups"])
    assert devices.passthrough(devices.cpu_profile(), "podman-rootless") == ([], [])


def test_run_spec_takes_the_engines_form(monkeypatch):
    monkeypatch.setenv("TOOLKIT_ENGINE", "podman")
    monkeypatch.setattr(choice.os, "geteuid", lambda: 1000)
    cmd = engine.run_command(_rocm().run_spec("img", ["true"]))
    assert cmd[:3] == ["podman", "run", "--rm"]
    assert cmd[cmd.index("--group-add") + 1] == "keep-groups" and cmd.count("--group-add") == 1
    monkeypatch.setattr(choice.os, "geteuid", lambda: 0)
    cmd = engine.run_command(_rocm().run_spec("img", ["true"]))
    assert cmd.count("--group-add") == 2 and "993" in cmd


def test_amd_cdi_spec_found_by_kind_and_all(tmp_path):
    etc, run = tmp_path / "etc-cdi", tmp_path / "run-cdi"
    etc.mkdir()
    (etc / "nvidia.yaml").write_text("cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n")
    assert devices.amd_cdi_spec((etc, run)) is None
    (etc / "amd.json").write_text(
        '{"cdiVersion": "0.6.0", "kind": "amd.com/gpu", "devices": [{"name": "0"}, {"name": "all"}]}'
    )
    assert devices.amd_cdi_spec((etc, run)) == etc / "amd.json"
    said = doctor_checks.check_cdi({"engine": "podman"}, etc / "amd.json")
    assert said[0].level == "info" and "--device amd.com/gpu=all" in said[0].message
    assert doctor_checks.check_cdi({"engine": "docker"}, etc / "amd.json") == []
    assert doctor_checks.check_cdi({"engine": "podman"}, None) == []


def test_podman_socket_from_container_host(monkeypatch):
    monkeypatch.setenv("CONTAINER_HOST", "unix:///tmp/somewhere/podman.sock")
    assert choice.podman_socket() == "/tmp/somewhere/podman.sock"
    assert choice.podman_service_command("/x.sock") == [
        "podman",
        "system",
        "service",
        f"--time={choice.PODMAN_IDLE_S}",
        "unix:///x.sock",
    ]


def test_podman_not_installed_says_how(monkeypatch, podman):
    monkeypatch.delenv("CONTAINER_HOST", raising=False)
    monkeypatch.setattr(choice, "_PODMAN_SOCKETS", {})
    monkeypatch.setattr(choice.shutil, "which", lambda name: None)
    with pytest.raises(EngineUnavailable, match=r"Podman not installed.*--podman.*--engine docker"):
        engine.client()


def test_docker_absent_podman_present_hint(monkeypatch):
    """No Docker engine answers (DOCKER_HOST unset, the SDK cannot connect) and podman is installed:
    the error says how to choose Podman."""
    import docker
    from docker.errors import DockerException

    monkeypatch.delenv("TOOLKIT_ENGINE", raising=False)  # auto: Docker's socket exists, so Docker
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(choice, "_CLIENTS", {})
    real_exists = Path.exists
    monkeypatch.setattr(
        Path, "exists", lambda p: True if str(p) == "/var/run/docker.sock" else real_exists(p)
    )

    def refuse(**kw):
        raise DockerException("Error while fetching server API version: connection refused")

    monkeypatch.setattr(docker, "from_env", refuse)
    monkeypatch.setattr(choice.shutil, "which", lambda name: "/usr/bin/podman" if name == "podman" else None)
    with pytest.raises(EngineUnavailable) as err:
        engine.client()
    assert "Docker engine not reachable" in str(err.value)
    assert "or use Podman, installed here: `toolkit --engine podman ...` (or TOOLKIT_ENGINE=podman)" in str(
        err.value
    )
    monkeypatch.setenv("TOOLKIT_ENGINE", "docker")  # chosen on purpose: no hint
    with pytest.raises(EngineUnavailable) as err:
        engine.client()
    assert "Podman" not in str(err.value)


def test_doctor_podman_lines():
    rootful = {
        "engine": "podman",
        "rootless": False,
        "server_version": "4.3.1",
        "api_version": "1.41",
        "buildah": "1.28.2",
        "oci_runtime": "crun",
    }
    checks = doctor_checks.check_docker(rootful)
    assert [c.message for c in checks] == [
        "Podman 4.3.1 (rootful; Docker API 1.41)",
        "podman build (buildah 1.28.2)",
    ]
    assert doctor_checks.userns_mode(rootful) is None
    rootless = {**rootful, "rootless": True, "oci_runtime": "runc"}
    checks = doctor_checks.check_docker(rootless)
    assert checks[0].message.startswith("Podman 4.3.1 (rootless")
    assert checks[-1].level == "warn" and "needs crun" in checks[-1].message
    assert doctor_checks.userns_mode(rootless) == "rootless Podman"
    vfs = doctor_checks.check_docker({**rootful, "storage_driver": "vfs"})
    assert vfs[-1].level == "warn" and 'driver = "overlay"' in vfs[-1].message
    gone = doctor_checks.check_docker({"error": "Podman API not reachable at ...", "engine": "podman"})
    assert gone[0].level == "error" and gone[0].message.startswith("Podman: not reachable")


def test_doctor_rootless_podman_says_which_nodes_it_can_pass(tmp_path):
    """Fake /dev nodes (plain files) and an access() that answers as a user in `render` but not in
    `video` would: the check names each node, its group, and the fix for the one it cannot pass."""
    dev = tmp_path / "dev"
    (dev / "dri").mkdir(parents=True)
    for name in ("kfd", "dri/renderD128", "dri/renderD129"):
        (dev / name).write_text("")
    info = {"engine": "podman", "rootless": True}
    ok = {str(dev / "kfd"), str(dev / "dri" / "renderD128")}
    checks = doctor_checks.check_rootless_devices(info, dev, access=lambda p, mode: p in ok)
    assert [c.level for c in checks] == ["ok", "ok", "warn"]
    assert (
        f"rootless Podman can pass {dev / 'kfd'}" in checks[0].message and "keep-groups" in checks[0].message
    )
    assert f"rootless Podman cannot pass {dev / 'dri' / 'renderD129'}" in checks[2].message
    assert "sudo usermod -aG" in checks[2].message
    none = doctor_checks.check_rootless_devices(info, tmp_path / "empty")
    assert none[0].level == "info" and "no GPU device node here" in none[0].message
    assert doctor_checks.check_rootless_devices({"engine": "podman", "rootless": False}, dev) == []
    assert doctor_checks.check_rootless_devices({"ServerVersion": "26.1"}, dev) == []


def test_engine_summary_and_reproduce_diff():
    from toolkit.publish import reproduce as repro

    assert engine.engine_summary({"engine": "podman", "server_version": "4.3.1", "rootless": True}) == (
        "podman 4.3.1 (rootless)"
    )
    assert engine.engine_summary({"server_version": "26.1.5"}) == "docker 26.1.5"
    diff = repro.host_differences(
        {"docker": {"server_version": "26.1.5"}},
        {"docker": {"engine": "podman", "server_version": "4.3.1", "rootless": False}},
    )
    assert diff == {"docker": ("26.1.5", "podman 4.3.1")}


def test_libpod_spec_carries_keep_groups_as_its_annotation():
    """Rootless Podman's keep-groups cannot pass Podman's Docker-compatible API (it takes it for a
    group name); the libpod create body carries what `podman run --group-add keep-groups` sets."""
    spec = engine.RunSpec(
        image="sha256:" + "ab" * 32,
        command=["llama-bench", "-m", "/models/m.gguf"],
        mounts=[engine.Mount("/data/m.gguf", "/models/m.gguf"), engine.Mount("cache", "/cache", False, True)],
        environment={"A": "1"},
        devices=[KFD, RENDER],
        group_add=["keep-groups"],
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"],
        ipc_mode="host",
        name="toolkit-x",
        shm_size="1g",
        network="none",
        ports={"8000/tcp": 41234},
        memory_bytes=2 << 30,
    )
    body = containers.libpod_spec(spec, {"org.toolkit.managed": "1"})
    assert body["annotations"] == {"run.oci.keep_original_groups": "1"} and body["groups"] == []
    assert body["devices"] == [{"path": KFD}, {"path": RENDER}]
    assert body["no_new_privileges"] is True and body["cap_drop"] == ["ALL"]
    assert body["mounts"] == [
        {"destination": "/models/m.gguf", "source": "/data/m.gguf", "type": "bind", "options": ["ro"]}
    ]
    assert body["volumes"] == [{"name": "cache", "dest": "/cache", "options": []}]
    assert body["ipcns"] == {"nsmode": "host"} and body["netns"] == {"nsmode": "none"}
    assert body["shm_size"] == 1 << 30 and body["resource_limits"]["memory"]["limit"] == 2 << 30
    assert body["portmappings"][0]["container_port"] == 8000 and body["labels"] == {
        "org.toolkit.managed": "1"
    }
    with pytest.raises(BadInput, match="apparmor=x"):
        containers.libpod_spec(engine.RunSpec(image="i", command=[], security_opt=["apparmor=x"]), {})
