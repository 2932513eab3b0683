"""`toolkit doctor` on this machine and on fake hosts, and the host facts it reads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.hosts import IMAGES, fake_host
from toolkit.host.doctor import GFX_TARGETS_LABEL, DoctorReport, diagnose, format_doctor
from toolkit.host.info import host_facts

DOCKER_INFO = {
    "ServerVersion": "26.1.5",
    "ApiVersion": "1.45",
    "ClientInfo": {"Plugins": [{"Name": "buildx", "Version": "v0.13.1"}]},
}


def verdict(report: DoctorReport, name: str):
    return next(v for v in report.images if v.name == name)


def messages(report: DoctorReport, level: str) -> list[str]:
    return [c.message for c in report.checks if c.level == level]


@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="host has /dev/kfd")
def test_this_machine_cannot_run_rocm() -> None:
    report = diagnose(IMAGES, {}, env={})
    rocm = verdict(report, "rocm")
    assert not rocm.runnable
    assert rocm.reason == "no /dev/kfd (no AMD GPU driver (amdgpu/KFD) on this host)"
    assert not verdict(report, "vllm").runnable
    assert verdict(report, "cpu").runnable
    text = format_doctor(report)
    assert "rocm: cannot run here: no /dev/kfd (no AMD GPU driver (amdgpu/KFD) on this host)" in text
    assert "cpu: can run here" in text
    assert "Docker engine: not reachable" in text
    assert not report.ok
    json.dumps(report.to_dict())  # --json works


@pytest.mark.skipif(Path("/dev/dri").exists(), reason="host has render nodes")
def test_this_machine_vulkan_only_with_software_opt_in() -> None:
    assert not verdict(diagnose(IMAGES, {}, env={}), "vulkan").runnable
    v = verdict(diagnose(IMAGES, {}, env={}, allow_software=True), "vulkan")
    assert v.runnable and "lavapipe" in v.reason


def test_r9700_host_runs_everything(tmp_path: Path) -> None:
    labels = {"rocm": {GFX_TARGETS_LABEL: "gfx1100,gfx1201"}, "vllm": {GFX_TARGETS_LABEL: "gfx12-generic"}}
    report = diagnose(IMAGES, labels, env={}, docker_info=DOCKER_INFO, **fake_host(tmp_path))
    assert [(v.name, v.runnable) for v in report.images] == [
        ("rocm", True),
        ("vulkan", True),
        ("cpu", True),
        ("vllm", True),
    ]
    assert verdict(report, "rocm").reason == "/dev/kfd + renderD128 (gfx1201)"
    assert verdict(report, "vulkan").reason == "renderD128 (gfx1201)"
    assert report.ok and messages(report, "warn") == [] and messages(report, "error") == []
    assert "Docker engine 26.1.5 (API 1.45)" in messages(report, "ok")
    assert "buildx v0.13.1" in messages(report, "ok")
    assert any("gid 993" in m and "current user can open it" in m for m in messages(report, "ok"))
    assert report.host["gpus"][0]["gfx_target"] == "gfx1201"


def test_hsa_override_warning(tmp_path: Path) -> None:
    report = diagnose(
        IMAGES, {}, env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}, docker_info=DOCKER_INFO, **fake_host(tmp_path)
    )
    (warning,) = messages(report, "warn")
    assert warning.startswith("HSA_OVERRIDE_GFX_VERSION=11.0.0 is set")
    assert "treat gfx1201 as gfx1100" in warning and "unset it" in warning
    assert report.host["hsa_override_gfx_version"] == "11.0.0"
    assert "warn  env" in format_doctor(report)


@pytest.mark.parametrize(
    "value, expected",
    [
        pytest.param("12.0.1", "equals the GPU's own arch (gfx1201)", id="hsa-override-same-arch"),
        pytest.param("gfx1201", "not major.minor.step", id="hsa-override-malformed"),
    ],
)
def test_hsa_override_variants(tmp_path: Path, value: str, expected: str) -> None:
    env = {"HSA_OVERRIDE_GFX_VERSION": value}
    report = diagnose([], {}, env=env, docker_info=DOCKER_INFO, **fake_host(tmp_path))
    (warning,) = messages(report, "warn")
    assert expected in warning


def test_no_hsa_override_no_warning(tmp_path: Path) -> None:
    report = diagnose(IMAGES, {}, env={"PATH": "/usr/bin"}, docker_info=DOCKER_INFO, **fake_host(tmp_path))
    assert not [c for c in report.checks if c.topic == "env"]
    assert "hsa_override_gfx_version" not in report.host


@pytest.mark.parametrize(
    "targets, runnable",
    [
        pytest.param("gfx1100,gfx1030", False, id="gfx-label-mismatch"),
        pytest.param("gfx1100, gfx1201", True, id="gfx-label-includes-host"),
        pytest.param("gfx12-generic", True, id="gfx-label-generic"),
        pytest.param("gfx11-generic", False, id="gfx-label-other-generic"),
    ],
)
def test_gfx_label(tmp_path: Path, targets: str, runnable: bool) -> None:
    labels = {"rocm": {GFX_TARGETS_LABEL: targets, "org.opencontainers.image.title": "x"}}
    report = diagnose(IMAGES[:1], labels, env={}, docker_info=DOCKER_INFO, **fake_host(tmp_path))
    v = verdict(report, "rocm")
    assert v.runnable is runnable
    warns = [c for c in report.checks if c.topic == "image"]
    if runnable:
        assert warns == []
    else:
        assert "host GPU is gfx1201" in v.reason and "invalid device function" in v.reason
        assert len(warns) == 1 and warns[0].level == "warn"
        assert "rocm: cannot run here: image built for" in format_doctor(report)


def test_unbuilt_image_notes_unchecked_targets(tmp_path: Path) -> None:
    report = diagnose(IMAGES[:1], {}, env={}, docker_info=DOCKER_INFO, **fake_host(tmp_path))
    v = verdict(report, "rocm")
    assert v.runnable and v.notes == ["not built yet: its gfx targets are unchecked"]


def test_igpu_next_to_dgpu(tmp_path: Path) -> None:
    report = diagnose(IMAGES[:1], {}, env={}, docker_info=DOCKER_INFO, **fake_host(tmp_path, with_igpu=True))
    igpu = [c for c in report.checks if c.topic == "igpu"]
    assert len(igpu) == 1 and igpu[0].level == "warn"
    assert (
        "gfx1036" in igpu[0].message and "rocBLAS may abort" in igpu[0].message and "--gpu" in igpu[0].message
    )
    v = verdict(report, "rocm")
    assert v.runnable and v.reason == "/dev/kfd + renderD128 (gfx1201)"
    assert v.notes[0].startswith("passing 1 GPU: 0 gfx1201") and "hidden: 1 gfx1036" in v.notes[0]
    pinned = diagnose(
        IMAGES[:1], {}, env={}, pin=1, docker_info=DOCKER_INFO, **fake_host(tmp_path / "b", with_igpu=True)
    )
    assert verdict(pinned, "rocm").reason == "/dev/kfd + renderD129 (gfx1036)"


def test_docker_checks() -> None:
    from toolkit.host.doctor_checks import check_docker

    assert [c.level for c in check_docker(None)] == ["error"]
    no_buildx = check_docker({"ServerVersion": "20.10.24", "ClientInfo": {"Plugins": []}})
    assert [c.level for c in no_buildx] == ["ok", "warn"] and "docker-buildx" in no_buildx[1].message
    engine_shape = check_docker({"server_version": "26.1.5", "api_version": "1.45", "buildx": None})
    assert [(c.level, c.message) for c in engine_shape] == [
        ("ok", "Docker engine 26.1.5 (API 1.45)"),
        ("warn", "buildx not installed: BuildKit builds fail; install docker-buildx"),
    ]
    debian = check_docker(  # `docker buildx version` of Debian's docker-buildx: module, version, revision
        {"server_version": "26.1.5", "buildx": "github.com/docker/buildx 0.13.1+ds1 0.13.1+ds1-3"}
    )
    assert debian[1].message == "buildx 0.13.1+ds1", debian[1]
    unreachable = check_docker({"error": "Cannot connect to the Docker daemon"})
    assert [(c.level, c.message) for c in unreachable] == [
        ("error", "Docker engine: not reachable (Cannot connect to the Docker daemon)")
    ]
    sdk_only = check_docker({"ServerVersion": "26.1.5", "SecurityOptions": ["name=seccomp", "name=rootless"]})
    assert [c.level for c in sdk_only] == ["ok", "info", "warn"]  # rootless: see test_faults for the verdicts
    assert "rootless Docker engine: host GIDs passed with --group-add" in sdk_only[2].message


def test_kernel_cmdline_flags(tmp_path: Path) -> None:
    host = fake_host(
        tmp_path, cmdline="BOOT_IMAGE=/vmlinuz root=/dev/sda1 amd_iommu=off amdgpu.gttsize=65536 quiet"
    )
    report = diagnose([], {}, env={}, docker_info=DOCKER_INFO, **host)
    (kernel,) = [c for c in report.checks if c.topic == "kernel"]
    assert kernel.level == "info"
    assert (
        "kernel 6.17.0-8-generic" in kernel.message and "amd_iommu=off amdgpu.gttsize=65536" in kernel.message
    )


def test_host_facts(tmp_path: Path) -> None:
    host = fake_host(tmp_path, cmdline="quiet amd_iommu=off")
    facts = host_facts(sysfs=host["sysfs"], proc=host["proc"], etc=host["etc"], env={})
    assert facts["kernel"] == "6.17.0-8-generic"
    assert facts["hostname"] == "r9700-box"
    assert facts["os"] == "Ubuntu 25.10"
    assert facts["cpu_model"] == "AMD Ryzen 9 7950X 16-Core Processor"
    assert (facts["cpu_threads"], facts["cpu_cores"]) == (2, 1)
    assert facts["memory_bytes"] == 65536000 * 1024
    assert facts["cmdline"] == "quiet amd_iommu=off" and facts["cmdline_notable"] == ["amd_iommu=off"]
    assert [g["render_node"] for g in facts["gpus"]] == ["/dev/dri/renderD128"]
    assert "hsa_override_gfx_version" not in facts
    json.dumps(facts)


def test_host_facts_this_machine() -> None:
    facts = host_facts()
    assert facts["kernel"] == os.uname().release
    assert facts["memory_bytes"] > 0 and facts["cpu_threads"] >= 1


def test_doctor_shows_each_gpus_power_state_on_a_fake_r9700_tree(tmp_path):
    """Issue 22 item 4: doctor reads the card's power state without root (a fake sysfs tree of an
    R9700 built from published captures, tests/support/telemetry_fakes.py) and says stock or not, and why."""
    from tests.support.telemetry_fakes import FakeAmdHost
    from toolkit.host.doctor import check_power, gpu_power_states

    host = FakeAmdHost(tmp_path / "sys").build()
    (line,) = check_power(gpu_power_states(tmp_path / "sys", nvml=False))
    assert line.level == "info" and "renderD128" in line.message and "stock" in line.message, line
    assert "cap 300 W (default 300 W)" in line.message and "performance level auto" in line.message
    host.set_caps(cap_w=250, default_w=300)
    host.write(host.device / "power_dpm_force_performance_level", "manual")
    (line,) = check_power(gpu_power_states(tmp_path / "sys", nvml=False))
    assert line.level == "warn" and "not stock" in line.message, line
    assert "power cap 250 W below the default 300 W" in line.message and "'manual'" in line.message


def test_doctor_says_nothing_about_power_without_gpus(tmp_path):
    from toolkit.host.doctor import check_power, gpu_power_states

    (tmp_path / "sys" / "class" / "drm").mkdir(parents=True)
    assert check_power(gpu_power_states(tmp_path / "sys", nvml=False)) == []


def test_no_kfd_warns_only_where_an_amd_gpu_lacks_it_and_lines_wrap_to_the_terminal(tmp_path: Path) -> None:
    """Reproducers (issue 33 and a helper's trial): a GPU-less host got `warn kfd` on every run; doctor
    lines of 150-300 characters wrapped at the terminal's edge without indentation."""
    host = fake_host(tmp_path)
    (host["dev"] / "kfd").unlink()  # an R9700 whose amdgpu driver has no KFD: a warning
    report = diagnose(IMAGES, {}, env={}, docker_info=DOCKER_INFO, **host)
    assert any(m.startswith(f"no {host['dev'] / 'kfd'}: the amdgpu driver") for m in messages(report, "warn"))
    bare = tmp_path / "bare"
    (bare / "dev").mkdir(parents=True)
    report = diagnose(IMAGES, {}, env={}, docker_info=DOCKER_INFO, sysfs=bare / "sys", dev=bare / "dev")
    assert not [m for m in messages(report, "warn") if "kfd" in m]  # no AMD GPU: nothing to warn about
    assert f"no {bare / 'dev' / 'kfd'} (no AMD GPU here): ROCm images cannot run" in messages(report, "info")
    whole = format_doctor(report)
    assert max(len(x) for x in whole.splitlines()) > 80  # one line each off a terminal (logs, grep)
    wrapped = format_doctor(report, 80).splitlines()
    assert all(len(x) <= 80 or " " not in x.strip() for x in wrapped)
    gpu = next(i for i, x in enumerate(wrapped) if x.startswith("  info  gpu     no GPU found"))
    assert wrapped[gpu + 1].startswith(" " * 16) and wrapped[gpu + 1][16] != " "  # under the message
    assert " ".join(x.strip() for x in wrapped).split() == " ".join(whole.split("\n")).split()


def test_rootless_without_a_subuid_range_is_an_error_naming_the_fix(tmp_path: Path) -> None:
    """Reproducer (issue 32 item 10): rootless Podman without an /etc/subuid range; doctor said ok and
    build said the base image "cannot be pulled", dropping Podman's "insufficient UIDs"."""
    from toolkit.engine.images import _subid_advice
    from toolkit.host.doctor_checks import check_subids

    etc = tmp_path / "etc"
    etc.mkdir()
    rootless = {"engine": "podman", "rootless": True}
    (check,) = check_subids(rootless, etc, uid=4242)
    assert check.level == "error" and f"{etc}/subuid has no range for 4242" in check.message
    assert "usermod --add-subuids 100000-165535 --add-subgids 100000-165535 4242" in check.message
    (etc / "subuid").write_text("4242:100000:65536\n")
    (etc / "subgid").write_text("4242:100000:1000\n")
    (check,) = check_subids(rootless, etc, uid=4242)
    assert (
        "etc/subgid gives 4242 1000 IDs" in check.message and "etc/subuid" not in check.message.split("(")[0]
    )
    (etc / "subgid").write_text("other:1:65536\n4242:100000:65536\n")
    assert check_subids(rootless, etc, uid=4242) == []
    assert check_subids({"engine": "podman", "rootless": False}, tmp_path / "none", uid=4242) == []
    podman_said = (
        'Error: writing blob: adding layer with blob "sha256:ab": processing tar file(potentially '
        "insufficient UIDs or GIDs available in user namespace (requested 0:42 for /etc/shadow)"
    )
    assert "/etc/subuid and /etc/subgid need a range" in (_subid_advice(podman_said) or "")
    assert _subid_advice("Error: connection refused") is None
