"""`toolkit doctor`: can each image run on this host, and what on the host may skew results.

`diagnose(...)` reads the host (devices, /sys, /proc, the environment) and never writes; Docker
facts arrive as a dict from the engine module. `format_doctor(report)` is the human text; the CLI
prints it (or `report.to_dict()` for --json).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from toolkit.core import invocation
from toolkit.core.errors import BadInput, ToolkitError
from toolkit.host.devices import (
    Gpu,
    amd_cdi_spec,
    detect_gpus,
    select_gpus,
    shortfall,
    target_covers,
    unusable,
)
from toolkit.host.doctor_checks import (
    REMOTE_WHY,
    Check,
    DeviceProbe,
    check_base_images,
    check_cdi,
    check_devices,
    check_docker,
    check_engine_host,
    check_hsa_override,
    check_igpu,
    check_kernel,
    check_rootless_devices,
    check_subids,
    engine_facts,
    read_text,
    remote_engine,
    userns_mode,
    userns_why,
)
from toolkit.host.info import env_choice_note, host_facts

GFX_TARGETS_LABEL = "org.toolkit.gfx-targets"
"""Image label listing the gfx targets the image's GPU code was built for, comma separated."""


class ImageLike(Protocol):
    """What doctor needs of an image (matrix.ImageSpec fits)."""

    @property
    def name(self) -> str: ...

    @property
    def backend(self) -> str: ...

    @property
    def runner(self) -> str: ...


@dataclass
class ImageVerdict:
    name: str
    backend: str
    runner: str
    runnable: bool
    reason: str
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        verdict = "can run here" if self.runnable else "cannot run here"
        return f"{self.name}: {verdict}: {self.reason}"


@dataclass
class DoctorReport:
    host: dict[str, Any]
    checks: list[Check]
    images: list[ImageVerdict]

    @property
    def ok(self) -> bool:
        """Every image can run and no check is an error."""
        return all(i.runnable for i in self.images) and not any(c.level == "error" for c in self.checks)

    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.level in ("warn", "error")]

    def to_dict(self) -> dict[str, Any]:
        """`ok` (every image can run here and no check is an error), `cannot_run` (the images that
        cannot, each with its reason: what makes `ok` false on a host without the GPUs), `errors` (the
        checks of level error), then host, checks and images in full."""
        return {
            "ok": self.ok,
            "cannot_run": {i.name: i.reason for i in self.images if not i.runnable},
            "errors": [c.message for c in self.checks if c.level == "error"],
            **asdict(self),
        }


# ---------------------------------------------------------------------------------------------
# Verdict per image


def apply_userns(
    verdicts: list[ImageVerdict],
    info: Mapping[str, Any] | None,
    probe: DeviceProbe | None,
    remote: str | None = None,
) -> None:
    """On a rootless or userns-remapped engine, or one on another host (`remote`: remote_engine), a GPU
    image that needs device nodes is runnable only if `probe` proves the nodes open inside a container;
    otherwise it is 'cannot run here' with the reason. Images without device nodes (cpu, Vulkan on
    lavapipe) are left as they are."""
    modes = [(m, userns_why(m)) for m in [userns_mode(info)] if m] + (
        [(remote, REMOTE_WHY)] if remote else []
    )
    if not modes:
        return
    remap, why = "; ".join(m for m, _ in modes), "; ".join(w for _, w in modes)
    for v in verdicts:
        if not v.runnable or v.backend not in ("rocm", "vulkan") or "lavapipe" in v.reason:
            continue
        failure = probe(v.name, v.backend) if probe else "no probe was run"
        if failure is None:
            v.notes.append(
                f"{remap}: device access proven by a one-shot open of the device nodes in a container"
                + (
                    "; the GPUs and archs named here are this host's, not necessarily the engine's"
                    if remote
                    else ""
                )
            )
            continue
        v.runnable = False
        v.reason = f"{remap}: {why} (not proven: {failure}); devices {v.reason}"


def image_verdict(
    image: ImageLike,
    labels: Mapping[str, str] | None,
    gpus: list[Gpu],
    *,
    dev: Path,
    allow_software: bool,
    pin: int | None,
) -> ImageVerdict:
    """Whether `image` can run on this host (`toolkit doctor`'s verdict per image, and what a default
    `toolkit build` builds): the devices its backend needs, the GPUs bench would choose (`pin`: --gpu
    N) and, for ROCm, whether its gfx targets (`labels`; None before a build) cover their archs."""
    name, backend, runner = image.name, str(image.backend), str(getattr(image, "runner", "llama-bench"))

    def verdict(ok: bool, reason: str, notes: list[str] | None = None) -> ImageVerdict:
        return ImageVerdict(name, backend, runner, ok, reason, notes or [])

    try:
        short = shortfall(backend, gpus, dev, allow_software)
    except BadInput as err:
        return verdict(False, str(err))
    if short:
        return verdict(False, short.short())
    if backend == "cpu":
        return verdict(True, "no devices needed")
    if backend == "vulkan":
        if len(unusable(gpus, "vulkan", dev)) == len(gpus):
            return verdict(True, "Mesa lavapipe (software Vulkan on the CPU; --allow-software-gpu)")
        try:
            sel = select_gpus(gpus, pin, backend="vulkan", dev=dev)
        except ToolkitError as err:
            return verdict(False, str(err))
        return verdict(True, _gpu_list(sel.chosen, "vendor"), sel.notes)
    return verdict(*_rocm_verdict(labels, gpus, dev=dev, pin=pin))


def _rocm_verdict(
    labels: Mapping[str, str] | None, gpus: list[Gpu], *, dev: Path, pin: int | None
) -> tuple[bool, str, list[str]]:
    """(runnable, reason, notes) of a ROCm image: the GPUs bench would choose (select_gpus), and
    whether the image's gfx targets (its label; unchecked before a build) cover their archs."""
    targets = [t.strip() for t in (labels or {}).get(GFX_TARGETS_LABEL, "").split(",") if t.strip()]
    try:  # the multi-GPU policy of bench: every discrete GPU of the image's arch, or --gpu N
        sel = select_gpus(gpus, pin, backend="rocm", targets=targets or None, dev=dev)
    except ToolkitError as err:
        if targets and "gfx targets" in str(err):
            gone = {id(g) for g, _ in unusable(gpus, "rocm", dev)}  # the archs of the GPUs it could get
            archs = sorted({g.gfx_target for g in gpus if id(g) not in gone and g.gfx_target})
            return False, _wrong_arch(targets, archs), []
        return False, str(err), []
    chosen, notes = sel.chosen, sel.notes
    archs = [g.gfx_target for g in chosen if g.gfx_target]
    where = "/dev/kfd + " + _gpu_list(chosen, "unknown gfx")
    if labels is None:
        return True, where, notes + ["not built yet: its gfx targets are unchecked"]
    if not targets:
        return True, where, notes + [f"no {GFX_TARGETS_LABEL} label: its gfx targets are unchecked"]
    missing = [a for a in archs if not any(target_covers(t, a) for t in targets)]
    if missing:  # only a --gpu pin can choose a GPU of another arch
        return False, _wrong_arch(targets, missing), notes
    return True, where, notes


def _wrong_arch(targets: list[str], archs: list[str]) -> str:
    """Why an image built for other gfx targets than the host GPUs' archs cannot run, and the fix."""
    return (
        f"image built for {','.join(targets)}, host GPU is {','.join(archs)}: kernels would fail with "
        f"'invalid device function'; rebuild with {','.join(archs)} in the image's gfx targets"
    )


def _gpu_list(chosen: list[Gpu], unknown: str) -> str:
    """`2 GPUs: renderD128 (gfx1201 AMD Radeon AI PRO R9700), renderD129 (...)`; one GPU: no count."""

    def one(g: Gpu) -> str:
        what = g.gfx_target or (g.vendor if unknown == "vendor" else unknown)
        return f"{g.render_name} ({what}{' ' + g.name if g.name else ''})"

    head = f"{len(chosen)} GPUs: " if len(chosen) > 1 else ""
    return head + ", ".join(one(g) for g in chosen)


def diagnose(
    images: Iterable[ImageLike],
    build_labels: Mapping[str, Mapping[str, str]],
    *,
    sysfs: Path = Path("/sys"),
    dev: Path = Path("/dev"),
    proc: Path = Path("/proc"),
    etc: Path = Path("/etc"),
    env: Mapping[str, str] | None = None,
    allow_software: bool = False,
    docker_info: Mapping[str, Any] | None = None,
    pin: int | None = None,
    device_probe: DeviceProbe | None = None,
    apt_policy: str | None = None,
    nvml: Any = None,
    base_images: Mapping[str, str | None] | None = None,
) -> DoctorReport:
    """Check the host and say, per image, whether it can run here and why not. `build_labels`: image
    name -> labels of its latest build (absent: not built yet); `apt_policy`: read_apt_policy() output
    for the mixed-release check (None: not checked); `base_images`: local base image -> None or why it
    cannot run a command (check_base_images); `env`: DOCKER_HOST, CONTAINER_HOST (remote_engine)..."""
    from toolkit.host.cgroup import cgroup_version, check_cgroup
    from toolkit.host.release import check_release, parse_os_release

    env = os.environ if env is None else env
    docker_info = engine_facts(docker_info)
    facts = host_facts(sysfs=sysfs, proc=proc, etc=etc, env=env)
    gpus = detect_gpus(sysfs)
    remote = remote_engine(docker_info, env, facts.get("hostname"))
    checks = (
        check_devices(gpus, dev)
        + check_hsa_override(env, gpus)
        + check_igpu(gpus)
        + check_docker(docker_info)
        + check_engine_host(docker_info, remote, facts.get("hostname"))
        + check_base_images(base_images or {})
        + check_rootless_devices(docker_info, dev)
        + check_subids(docker_info, etc)
        + check_cdi(docker_info, amd_cdi_spec())
        + check_kernel(facts)
        + check_cgroup(cgroup_version(proc), docker_info)
        + check_release(parse_os_release(read_text(etc / "os-release")), apt_policy)
        + check_power(gpu_power_states(sysfs, nvml=nvml))
    )
    if chosen_by_env := env_choice_note(env, pin):
        checks.append(Check("warn", "gpu", chosen_by_env))
    verdicts = [
        image_verdict(img, build_labels.get(img.name), gpus, dev=dev, allow_software=allow_software, pin=pin)
        for img in images
    ]
    apply_userns(verdicts, docker_info, device_probe, remote)
    if docker_info is not None and docker_info.get("error"):  # nothing runs without an engine to run it on
        for v in verdicts:
            if v.runnable:
                v.runnable, v.reason = False, "the container engine is not reachable (see the docker check)"
    for v in verdicts:
        if not v.runnable and "invalid device function" in v.reason:
            checks.append(Check("warn", "image", f"{v.name}: {v.reason}"))
    return DoctorReport(host=facts, checks=checks, images=verdicts)


def gpu_power_states(sysfs: Path = Path("/sys"), *, nvml: Any = None) -> list[dict[str, Any]]:
    """Each GPU's power state now, read without root (toolkit.host.telemetry): AMD cards under
    sysfs/class/drm (power cap vs default, performance level, power profile, overdrive offset and bit,
    runtime status) and NVIDIA GPUs through NVML (enforced vs default power limit). One dict per GPU:
    {"gpu", "name", "render_node", "state", "not_stock": [reasons]}. Never raises."""
    from toolkit.host import telemetry as tel

    out: list[dict[str, Any]] = []
    for ref in tel.discover_gpus(sysfs / "class" / "drm", nvml=nvml):
        amd = {
            "kfd_root": sysfs / "class" / "kfd" / "kfd",
            "module_params": sysfs / "module" / "amdgpu" / "parameters",
        }
        try:
            state = tel.power_state(
                tel.open_source(ref, **(amd if ref.vendor == "amd" else {"nvml": nvml} if nvml else {}))
            )
        except Exception as err:  # a card whose files cannot be read: say so, never stop doctor
            out.append(
                {"gpu": ref.id, "name": ref.name, "render_node": ref.render_node, "error": str(err)[:200]}
            )
            continue
        out.append(
            {
                "gpu": ref.id,
                "name": ref.name,
                "render_node": ref.render_node,
                "state": state,
                "not_stock": tel.not_stock_reasons(state),
            }
        )
    return out


def check_power(states: list[dict[str, Any]]) -> list[Check]:
    """One line per GPU: its power state, `warn` when it is not stock (results on it are flagged
    power-not-stock: a cap below default, a forced performance level, a non-default profile or
    overdrive offsets move tok/s by 9-16 % in public reports, shared/reference/gpu-telemetry.md §7)."""
    out = []
    for g in states:
        label = " ".join(x for x in (g.get("render_node"), g.get("name") or g["gpu"]) if x)
        if "error" in g:
            out.append(Check("warn", "power", f"{label}: power state unreadable ({g['error']})"))
            continue
        st = g["state"]
        parts = []
        if st.get("cap_w") is not None:
            parts.append(f"cap {st['cap_w']:.0f} W (default {st.get('cap_default_w') or 0:.0f} W)")
        for key, name in (("perf_level", "performance level"), ("power_profile", "profile")):
            if st.get(key):
                parts.append(f"{name} {st[key]}")
        if st.get("runtime_status"):
            parts.append(f"runtime {st['runtime_status']}")
        desc = ", ".join(parts) or "no power files readable"
        if g["not_stock"]:
            out.append(Check("warn", "power", f"{label}: not stock: {'; '.join(g['not_stock'])} ({desc})"))
        else:
            out.append(Check("info", "power", f"{label}: stock as far as it shows ({desc})"))
    return out


def _gib(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB"


def format_doctor(
    report: DoctorReport,
    width: int | None = None,
    measured: Collection[str] = frozenset(),
    export: str | None = None,
    rebuild: bool = False,
) -> str:
    """Human text: host line, checks (one per line with its level), one line per image, then what to
    run next. `width` (a terminal's columns): longer lines wrap there, each continuation indented under
    its message's first word; None: one line each (logs, pipes, grep). `measured`: the names of the
    images with an ok result in the results folder (the next step then points at them, not at a first
    build). `export`: the folder, as the user names it (`.` where it is the working folder), where the
    matrix read is that of a run `toolkit export-run` wrote: the next step is its reproduction, never a
    build and bench writing images/ and results/ into the published folder; `rebuild`: an image of that
    run can be pulled from no registry (publish.run_folder.needs_rebuild), so it says `--rebuild`."""
    h = report.host
    cpu = f"{h.get('cpu_model') or 'unknown CPU'} ({h.get('cpu_threads', '?')} threads)"
    items: list[tuple[str, str, int | None]] = [
        (
            "host: ",
            f"{h.get('os') or 'unknown OS'}, kernel {h.get('kernel', '?')}, {cpu}, "
            f"{_gib(h.get('memory_bytes') or 0)} RAM",
            None,
        ),
        ("", "", None),
        ("checks:", "", None),
    ]
    items += [(f"  {c.level:<5} {c.topic:<7} ", c.message, None) for c in report.checks]
    items += [("", "", None), ("images:", "", None)]
    for v in report.images:
        items.append(("  ", v.line(), 4))  # a continuation hangs under the image's name
        items += [("    note: ", n, None) for n in v.notes]
    if not report.images:
        items.append(("  ", "(none: no matrix.yaml read, so the host's facts only)", None))
    items += [("", "", None), ("next: ", _next_step(report, measured, export, rebuild), None)]
    return "\n".join(_wrapped(lead, text, width, hang) for lead, text, hang in items)


def _next_step(
    report: DoctorReport,
    measured: Collection[str] = frozenset(),
    export: str | None = None,
    rebuild: bool = False,
) -> str:
    """What to run next: build and bench the images that can run here (once every one of them has
    results in `measured`: report them, bench again), in an exported run's folder `export` (its
    matrix.yaml read) reproduce it, else mend the first error."""
    runnable = [v.name for v in report.images if v.runnable]
    if not report.images:  # doctor run outside the project (toolkit.cli.host: no matrix.yaml there)
        from toolkit.matrix.api import project_hint

        return f"no matrix.yaml here, so no image was judged: {project_hint()}"
    if runnable and export is not None:  # a customer in the published folder: its README's way, not a build
        return (
            f"{'this folder' if export == '.' else export} is a run `toolkit export-run` wrote: `toolkit reproduce {export}"
            + (" --rebuild` builds its images (none can be pulled by digest) and" if rebuild else "`")
            + f" re-runs it here (its README's Reproduce block says how); `{invocation.command('report', results=Path(export))}` "
            "prints its tables"
        )
    if runnable:
        only = [w for n in runnable for w in ("-i", n)] if len(runnable) < len(report.images) else []
        names = ", ".join(runnable)
        build, bench = invocation.command("build", *only), invocation.command("bench", *only)
        if all(n in measured for n in runnable):  # the README's job is done: after `build && bench`
            return (
                f"`{invocation.command('report')}` shows what {names} measured here; `{bench}` measures again "
                f"(`{build}` first after a change to matrix.yaml or the templates)"
            )
        return f"`{build} && {bench}` measures {names} here"
    first = next((c for c in report.checks if c.level == "error"), None)
    return (f"mend `{first.topic}` above" if first else "no image can run here; see the reasons above") + (
        f", then `{invocation.command('doctor')}` again"
    )


def _wrapped(lead: str, text: str, width: int | None, hang: int | None = None) -> str:
    """`lead + text`, wrapped at `width` under the text's start, or `hang` columns in (paths and words
    never broken)."""
    if width is None or len(lead) + len(text) <= width or not text:
        return lead + text
    import textwrap

    indent = " " * (hang if hang is not None else len(lead) if len(lead) < width // 2 else 4)
    return textwrap.fill(
        text,
        width,
        initial_indent=lead,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
