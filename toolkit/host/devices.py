"""GPUs on this host and the Docker device profile each backend needs.

    detect_gpus(sysfs) -> [Gpu]          pure read of /sys (KFD topology + DRM render nodes)
    profile_for(backend, gpus, ...)      -> DeviceProfile (devices, numeric GIDs, security options)

Probes read the host and never write the environment; no Docker calls here. Every function takes
the `sysfs` / `dev` root it reads so tests run on fake trees.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from toolkit.core import invocation
from toolkit.core.errors import BadInput, ToolkitError
from toolkit.core.gpuspecs import product_name

AMD_VENDOR = "0x1002"
INTEL_VENDOR = "0x8086"
_RENDER_VENDORS = (AMD_VENDOR, INTEL_VENDOR)
"""Vendors whose GPUs the images here drive (amdgpu/ROCm, Mesa RADV/ANV); others are found and named."""
VENDOR_NAMES = {AMD_VENDOR: "AMD", INTEL_VENDOR: "Intel", "0x10de": "NVIDIA"}
IGPU_VRAM_BYTES = 4 * 1024**3

# APU graphics that report a (possibly large) carve-out as VRAM: Raven/Picasso/Renoir/Cezanne,
# Rembrandt, Raphael, Mendocino, Phoenix, Strix Point, Strix Halo, Krackan.
_APU_GFX = frozenset(
    {
        "gfx801",
        "gfx902",
        "gfx909",
        "gfx90c",
        "gfx1033",
        "gfx1035",
        "gfx1036",
        "gfx1037",
        "gfx1103",
        "gfx1150",
        "gfx1151",
        "gfx1152",
        "gfx1153",
    }
)


class DeviceMissing(ToolkitError):
    """The host lacks a device an image needs (exit 3: the run cannot happen)."""

    exit_code = 3


@dataclass(frozen=True)
class Gpu:
    """One GPU as the host sees it. `index` counts KFD GPU nodes in node order (what ROCm calls
    device N); GPUs known only to DRM (no KFD: Intel, or amdgpu without KFD) follow, by render minor,
    then render nodes of vendors no image here drives (NVIDIA: listed so a run names them as hidden).
    Unknown values are "" / 0 / None; `render_node` is "" for a KFD GPU whose node names none."""

    index: int
    gfx_target: str
    name: str
    vram_bytes: int
    pci_bus: str
    render_node: str
    card_node: str | None
    drm_render_minor: int
    is_igpu: bool
    vendor: str
    device_id: str = ""
    kfd_node: int | None = None
    revision: str = ""  # PCI revision id (0xc0): with device_id it tells e.g. RX 9070 XT from RX 9070 GRE

    @property
    def render_name(self) -> str:
        return Path(self.render_node).name

    def label(self) -> str:
        """e.g. `0 gfx1201 AMD Radeon AI PRO R9700 (renderD128, 32 GiB)`."""
        arch = self.gfx_target or ("gfx unknown" if self.kfd_node is not None else f"vendor {self.vendor}")
        parts = [str(self.index), arch]
        if self.name:
            parts.append(self.name)
        extra = [self.render_name or "no render node"] + ([_gib(self.vram_bytes)] if self.vram_bytes else [])
        extra += ["iGPU"] if self.is_igpu else []
        return " ".join(parts) + f" ({', '.join(extra)})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _gib(n: int) -> str:
    return f"{n / 1024**3:.0f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


def gfx_from_version(version: int) -> str:
    """KFD gfx_target_version -> arch: 120001 -> gfx1201, 90402 -> gfx942, 90010 -> gfx90a."""
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _properties(path: Path) -> dict[str, int]:
    """KFD `properties` files: one `name value` (decimal) per line."""
    out: dict[str, int] = {}
    for line in _read(path).splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        return 0


def _numeric_suffix(path: Path) -> int:
    m = re.search(r"(\d+)$", path.name)
    return int(m.group(1)) if m else -1


class _Drm(NamedTuple):
    minor: int
    vendor: str
    device_id: str
    vram_bytes: int
    pci_path: str
    product_name: str
    revision: str


def _drm_render_nodes(sysfs: Path) -> dict[int, _Drm]:
    """renderD* under class/drm by minor, with the PCI device facts behind each."""
    out: dict[int, _Drm] = {}
    drm = sysfs / "class" / "drm"
    for node in sorted(drm.glob("renderD*"), key=_numeric_suffix):
        minor = _numeric_suffix(node)
        dev = node / "device"
        if minor < 0 or not dev.exists():
            continue
        out[minor] = _Drm(
            minor=minor,
            vendor=_read(dev / "vendor").lower(),
            device_id=_read(dev / "device").lower(),
            vram_bytes=_int(_read(dev / "mem_info_vram_total")),
            pci_path=os.path.realpath(dev),
            product_name=_read(dev / "product_name"),
            revision=_read(dev / "revision").lower(),
        )
    return out


def _card_nodes(sysfs: Path) -> dict[str, str]:
    """Resolved PCI device path -> card node name (card0), skipping connectors like card0-DP-1."""
    out: dict[str, str] = {}
    for card in (sysfs / "class" / "drm").glob("card*"):
        if re.fullmatch(r"card\d+", card.name) and (card / "device").exists():
            out.setdefault(os.path.realpath(card / "device"), card.name)
    return out


def _kfd_vram(node: Path) -> int:
    total = 0
    for bank in node.glob("mem_banks/*/properties"):
        props = _properties(bank)
        if props.get("heap_type") in (1, 2):  # HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC / _PRIVATE
            total += props.get("size_in_bytes", 0)
    return total


def _is_igpu(vendor: str, gfx: str, vram: int, pci_bus: str, cpu_cores: int = 0) -> bool:
    if vendor == INTEL_VENDOR:
        return pci_bus.endswith(":00:02.0")  # Intel integrated graphics always sit at 00:02.0
    if cpu_cores > 0 or gfx in _APU_GFX:
        return True
    return 0 < vram < IGPU_VRAM_BYTES


def detect_gpus(sysfs: Path = Path("/sys")) -> list[Gpu]:
    """GPUs from the KFD topology matched to DRM render nodes by drm_render_minor; then the render
    nodes without a KFD node (Vulkan-only hosts, Intel) with unknown gfx, AMD and Intel first, then
    NVIDIA's (never passed, named hidden: `unusable`); other vendors' (virtio) are no GPU. Pure read
    of `sysfs`."""
    drm = _drm_render_nodes(sysfs)
    cards = _card_nodes(sysfs)
    gpus: list[Gpu] = []
    nodes = sysfs / "class" / "kfd" / "kfd" / "topology" / "nodes"
    for node in sorted(nodes.glob("*"), key=_numeric_suffix):
        gpu = _kfd_gpu(node, len(gpus), drm, cards)
        if gpu is not None:
            gpus.append(gpu)
    seen = {g.drm_render_minor for g in gpus}
    # AMD and Intel first (their numbers stay), then NVIDIA's; a virtual display (virtio) is no GPU
    rest = [(m, d) for m, d in drm.items() if m not in seen and d.vendor in VENDOR_NAMES]
    for minor, d in sorted(rest, key=lambda md: (md[1].vendor not in _RENDER_VENDORS, md[0])):
        card = cards.get(d.pci_path)
        pci_bus = Path(d.pci_path).name
        gpus.append(
            Gpu(
                index=len(gpus),
                gfx_target="",
                name=d.product_name or product_name(d.vendor, d.device_id, d.revision),
                vram_bytes=d.vram_bytes,
                pci_bus=pci_bus,
                render_node=f"/dev/dri/renderD{minor}",
                card_node=f"/dev/dri/{card}" if card else None,
                drm_render_minor=minor,
                is_igpu=_is_igpu(d.vendor, "", d.vram_bytes, pci_bus),
                vendor=d.vendor,
                device_id=d.device_id,
                revision=d.revision,
            )
        )
    return gpus


def _kfd_gpu(node: Path, index: int, drm: dict[int, _Drm], cards: dict[str, str]) -> Gpu | None:
    """GPU number `index` from KFD topology node `node`, with the facts of its DRM render node (by
    drm_render_minor) where there is one; None for a CPU node."""
    props = _properties(node / "properties")
    version = props.get("gfx_target_version", 0)
    if not version and not props.get("simd_count"):
        return None  # CPU node
    gfx = gfx_from_version(version) if version else ""
    if not gfx and re.fullmatch(r"gfx[0-9a-f]+", _read(node / "name")):
        gfx = _read(node / "name")
    minor = props.get("drm_render_minor", 0)  # render minors start at 128: 0 is "none named"
    d = drm.get(minor)
    vendor = d.vendor if d and d.vendor else f"0x{props.get('vendor_id', 0x1002):04x}"
    device_id = d.device_id if d and d.device_id else f"0x{props.get('device_id', 0):04x}"
    vram = (d.vram_bytes if d else 0) or _kfd_vram(node)
    pci_bus = Path(d.pci_path).name if d else ""
    card = cards.get(d.pci_path) if d else None
    return Gpu(
        index=index,
        gfx_target=gfx,
        name=(d.product_name if d else "") or product_name(vendor, device_id, d.revision if d else None),
        vram_bytes=vram,
        pci_bus=pci_bus,
        render_node=f"/dev/dri/renderD{minor}" if minor > 0 else "",
        card_node=f"/dev/dri/{card}" if card else None,
        drm_render_minor=minor,
        is_igpu=_is_igpu(vendor, gfx, vram, pci_bus, props.get("cpu_cores_count", 0)),
        vendor=vendor,
        device_id=device_id,
        kfd_node=_numeric_suffix(node),
        revision=d.revision if d else "",
    )


# ---------------------------------------------------------------------------------------------
# Device profiles


@dataclass(frozen=True)
class DeviceProfile:
    """What a container gets from the host. `devices` are docker `HOST:CONTAINER:rwm` strings,
    `group_add` numeric GIDs (a group NAME would resolve against the image's /etc/group).
    Never privileged; always no-new-privileges and every capability dropped."""

    backend: str
    devices: list[str] = field(default_factory=list)
    group_add: list[str] = field(default_factory=list)
    security_opt: list[str] = field(default_factory=lambda: ["no-new-privileges"])
    ipc_mode: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    cap_drop: list[str] = field(default_factory=lambda: ["ALL"])
    cap_add: list[str] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    gpu_details: list[dict[str, Any]] = field(default_factory=list)  # the passed GPUs (Gpu.to_dict())
    hidden: list[str] = field(default_factory=list)  # every GPU left out: "label (why)"

    @property
    def gpu_count(self) -> int:
        """GPUs passed to the container (0: CPU run, or Mesa lavapipe)."""
        return len(self.gpus)

    def record(self) -> dict[str, Any]:
        """What to store with each result: {"gpu_count", "gpus": [{index, name, gfx_target, device_id,
        revision, pci_bus, render_node}], "hidden": ["label (why)"], "environment"}."""
        keys = ("index", "name", "gfx_target", "vendor", "device_id", "revision", "pci_bus", "render_node")
        return {
            "gpu_count": self.gpu_count,
            "gpus": [{k: g.get(k) for k in keys} for g in self.gpu_details],
            "hidden": list(self.hidden),
            "environment": dict(self.environment),
        }

    def run_spec(
        self,
        image: str,
        command: list[str],
        *,
        mounts: list | None = None,
        environment: dict[str, str] | None = None,
        name: str | None = None,
        labels: dict[str, str] | None = None,
        memory_bytes: int | None = None,
        shm_size: str | None = None,
        network: str | None = "none",
    ):
        """The one translation of this profile into a container (engine.RunSpec): its devices and
        groups in the form the engine in use needs (`passthrough`), security options, capabilities,
        IPC mode and environment, plus what the caller adds (`environment` entries override the
        profile's). `engine.run_command(spec)` is the copy-pasteable `docker run` / `podman run`;
        `engine.start_container(spec)` the docker SDK call."""
        from toolkit.engine import api as engine

        devices, group_add = passthrough(self, engine.engine_kind())
        return engine.RunSpec(
            image=image,
            command=list(command),
            mounts=list(mounts or []),
            environment={**self.environment, **(environment or {})},
            devices=devices,
            group_add=group_add,
            security_opt=list(self.security_opt),
            cap_drop=list(self.cap_drop),
            cap_add=list(self.cap_add),
            ipc_mode=self.ipc_mode,
            name=name,
            labels=dict(labels or {}),
            shm_size=shm_size,
            network=network,
            memory_bytes=memory_bytes,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def example(cls, backend: str) -> DeviceProfile:
        """The profile as it would look on a one-R9700 host, for --dry-run where the devices are
        missing. The GIDs are placeholders: a real profile stats the host's nodes."""
        note = "example profile: this host lacks the devices; GIDs are placeholders"
        render = "/dev/dri/renderD128:/dev/dri/renderD128:rwm"
        if backend == "rocm":
            return cls(
                backend="rocm",
                devices=["/dev/kfd:/dev/kfd:rwm", render],
                group_add=["<gid of /dev/kfd>", "<gid of /dev/dri/renderD128>"],
                security_opt=["no-new-privileges"],
                ipc_mode="host",
                notes=[note],
            )
        if backend == "vulkan":
            return cls(
                backend="vulkan", devices=[render], group_add=["<gid of /dev/dri/renderD128>"], notes=[note]
            )
        if backend == "cpu":
            return cpu_profile()
        raise BadInput(f"unknown backend {backend!r}: use rocm, vulkan or cpu")


class Shortfall(NamedTuple):
    """Why a backend cannot run: `what` is missing (short), `why` (what the host lacks) and `fix` (a
    hint besides `toolkit doctor`, may be empty)."""

    what: str
    why: str
    fix: str = ""

    def message(self) -> str:
        """`cannot run on this host: no /dev/kfd (no AMD GPU driver ...); run `toolkit doctor``: the
        words `toolkit build` skips the image with (Skipped.line), so build and bench say one thing.
        The doctor named is invocation.command's: the engine, matrix and results given (nc47 S9)."""
        fix = f"{self.fix}, or " if self.fix else ""
        return f"cannot run on this host: {self.what} ({self.why}); {fix}run `{invocation.command('doctor')}`"

    def short(self) -> str:
        """For doctor's one line per image: `no /dev/kfd (no AMD GPU driver ...)`."""
        return f"{self.what} ({self.why})" + (f"; {self.fix}" if self.fix else "")


def rocm_gpus(gpus: list[Gpu] | tuple[Gpu, ...]) -> list[Gpu]:
    """GPUs ROCm can use: the ones in the KFD topology."""
    return [g for g in gpus if g.kfd_node is not None]


def target_covers(target: str, arch: str) -> bool:
    """Whether an image gfx target runs on `arch`: `gfx1201` covers gfx1201; `gfx12-generic` covers
    gfx12xx; `gfx10-3-generic` covers gfx103x; feature flags (`gfx90a:xnack-`) are ignored."""
    target = target.strip().split(":", 1)[0]
    m = re.fullmatch(r"(gfx\d+)(?:-(\d+))?-generic", target)
    if m:
        return arch.startswith(m.group(1) + (m.group(2) or ""))
    return target == arch


IGPU_WHY = {
    "rocm": "iGPU: rocBLAS can abort on it (no Tensile library for its arch)",
    "vulkan": "iGPU: keeps the benchmark on the discrete card(s)",
}


@dataclass(frozen=True)
class Selection:
    """Which GPUs a container gets. `chosen` are passed (in host index order), `hidden` pairs each
    GPU left out with the reason (in host index order: those the policy or a pin left out and those
    the backend cannot be given at all), `note` says both in one line ("" when one GPU and nothing
    hidden); `narrowed`: the policy or a pin left out a GPU the backend could use (then the passed
    cards are renumbered from 0 inside: ROCR_VISIBLE_DEVICES / GGML_VK_VISIBLE_DEVICES)."""

    chosen: list[Gpu]
    hidden: list[tuple[Gpu, str]]
    pinned: bool
    note: str
    narrowed: bool = False

    @property
    def notes(self) -> list[str]:
        return [self.note] if self.note else []


def _render_present(g: Gpu, dev: Path) -> bool:
    return bool(g.render_name) and _render_host_path(g, dev).exists()


def unusable(
    gpus: list[Gpu] | tuple[Gpu, ...], backend: str, dev: Path = Path("/dev")
) -> list[tuple[Gpu, str]]:
    """The GPUs of `gpus` a `backend` (rocm, vulkan) container cannot be given at all, each with why:
    another vendor's (no driver for it in the images), not in the KFD topology (ROCm), no render node
    named, its render node missing under `dev`, or named by an earlier GPU too. select_gpus names them as hidden, so every GPU of
    the host is either passed or named; a --gpu pin on one is BadInput with the reason."""
    out = []
    owner: dict[str, int] = {}  # render node -> the GPU that keeps it (the first to name it)
    for g in gpus:
        first = owner.setdefault(g.render_name, g.index) if g.render_name else g.index
        if g.vendor not in _RENDER_VENDORS:
            who = VENDOR_NAMES.get(g.vendor, f"vendor {g.vendor or 'unknown'}")
            why = f"{who} GPU: the {backend} images here carry no driver for it"
        elif backend == "rocm" and g.kfd_node is None:
            why = "not in the KFD topology: ROCm cannot use it"
        elif not g.render_name:
            why = "no render node: its KFD node names none (drm_render_minor)"
        elif not _render_host_path(g, dev).exists():
            why = f"its render node {_render_host_path(g, dev)} is missing on this host"
        elif first != g.index:
            why = f"its render node {g.render_name} is GPU {first}'s too (the KFD topology names one node twice)"
        else:
            continue
        out.append((g, why))
    return out


def select_gpus(
    candidates: list[Gpu] | tuple[Gpu, ...],
    pin: int | None,
    *,
    backend: str = "rocm",
    targets: list[str] | tuple[str, ...] | None = None,
    dev: Path | None = None,
) -> Selection:
    """The multi-GPU policy, one place for bench, doctor and dry runs.

    - `dev` given: `candidates` are every GPU of the host; those the backend cannot be given at all
      (`unusable`: another vendor, not in KFD for ROCm, no render node under `dev`) are never passed
      and always named hidden with the reason; a pin on one is BadInput saying why. `dev` None:
      `candidates` are all usable (a caller that filtered them).
    - `pin` (--gpu N): exactly GPU N (host index, as `toolkit doctor` lists them); every other
      candidate is hidden ("not selected (--gpu N)"). BadInput when N is no GPU of the host.
    - default: every discrete GPU whose arch the image was built for (`targets`, from the image's
      org.toolkit.gfx-targets label; None = not known, no arch filter; GPUs of unknown arch pass);
      discrete GPUs of another arch are hidden (their kernels would fail with 'invalid device
      function'); iGPUs are hidden when a discrete GPU is chosen (rocBLAS can abort on them). A
      host with only iGPUs passes its iGPUs of the image's arch.
    - nothing to choose: DeviceMissing naming every GPU and why it was left out.
    The GPU count of a run is len(chosen); bench records it (DeviceProfile.record()).
    """
    gone = unusable(candidates, backend, dev) if dev is not None else []
    cands = [g for g in candidates if all(g is not u for u, _ in gone)]

    def done(chosen: list[Gpu], hidden: list[tuple[Gpu, str]], pinned: bool) -> Selection:
        narrowed = pinned or bool(hidden)
        every = sorted(hidden + gone, key=lambda gw: gw[0].index)
        note = _selection_note(chosen, every, pinned=pinned, narrowed=narrowed)
        return Selection(chosen, every, pinned, note, narrowed)

    if pin is not None:
        chosen = [g for g in cands if g.index == pin]
        if not chosen:
            have = "; ".join(g.label() for g in cands) or "none"
            what = next(
                (f"{g.label()} cannot be passed: {w}" for g, w in gone if g.index == pin), "no such GPU"
            )
            raise BadInput(f"--gpu {pin}: {what} (GPUs a {backend} container can get: {have})")
        return done(chosen, [(g, f"not selected (--gpu {pin})") for g in cands if g.index != pin], True)

    chosen, hidden = _by_policy(cands, backend, targets)
    if not chosen:
        left_out = "; ".join(
            f"{g.label()}: {w}" for g, w in sorted(hidden + gone, key=lambda gw: gw[0].index)
        )
        raise DeviceMissing(
            f"{backend} image: no GPU of the image's gfx targets ({','.join(targets or [])}) on this host "
            f"({left_out or 'no GPU'}); rebuild the image for the host's arch or pass --gpu N; run `{invocation.command('doctor')}`"
        )
    return done(chosen, hidden, False)


def _by_policy(
    cands: list[Gpu], backend: str, targets: list[str] | tuple[str, ...] | None
) -> tuple[list[Gpu], list[tuple[Gpu, str]]]:
    """select_gpus' default: (every discrete GPU of the image's `targets`, else its iGPUs of them; the
    others, each with why it is left out)."""

    def arch_ok(g: Gpu) -> bool:
        return not (targets and g.gfx_target and not any(target_covers(t, g.gfx_target) for t in targets))

    fits = [g for g in cands if arch_ok(g)]
    discrete = [g for g in fits if not g.is_igpu]
    chosen = discrete or fits  # iGPUs only on a host without a discrete GPU of the image's arch
    hidden = []
    for g in cands:
        if g in chosen:
            continue
        why = [IGPU_WHY.get(backend, IGPU_WHY["rocm"])] if g.is_igpu and discrete else []
        if not arch_ok(g):
            why.append(f"{g.gfx_target} is not among the image's gfx targets ({','.join(targets or [])})")
        hidden.append((g, "; ".join(why)))
    return chosen, hidden


def _selection_note(
    chosen: list[Gpu], hidden: list[tuple[Gpu, str]], *, pinned: bool, narrowed: bool = True
) -> str:
    if len(chosen) == 1 and not hidden:
        return ""
    n = len(chosen)
    what = "pinned" if pinned else "passing"
    head = f"{what} {n} GPU{'s' if n > 1 else ''}: " + "; ".join(g.label() for g in chosen)
    if hidden:
        head += "; hidden: " + "; ".join(f"{g.label()} ({why})" for g, why in hidden)
    if n > 1:
        head += (
            "; llama.cpp splits the model across them (split mode layer unless -sm says otherwise); "
            "pass --gpu N to measure one GPU"
        )
    elif not pinned and narrowed:  # another GPU it could use was left out
        head += "; pass --gpu N to choose another"
    return head


CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
"""Where CDI (Container Device Interface) specs live: the directories Podman reads by default."""
AMD_CDI_KIND = "amd.com/gpu"
"""The CDI kind of AMD GPUs (the AMD container toolkit's spec, `amd-ctk cdi generate`)."""


def amd_cdi_spec(dirs: tuple[Path, ...] = CDI_DIRS) -> Path | None:
    """The first CDI spec file (*.json, *.yaml) in `dirs` that declares `kind: amd.com/gpu` and a
    device named `all`, or None (no CDI for AMD GPUs on this host; unreadable files are skipped)."""
    kind = re.compile(r'"?kind"?\s*:\s*"?' + re.escape(AMD_CDI_KIND) + r'"?\s*(?:[,}\n]|$)', re.M)
    for d in dirs:
        try:
            files = sorted(f for f in d.iterdir() if f.suffix in (".json", ".yaml", ".yml"))
        except OSError:
            continue
        for f in files:
            try:
                text = f.read_text(errors="replace")
            except OSError:
                continue
            if kind.search(text) and re.search(r'"?name"?\s*:\s*"?all"?\s*(?:[,}\n]|$)', text, re.M):
                return f
    return None


def passthrough(profile: DeviceProfile, engine_kind: str) -> tuple[list[str], list[str]]:
    """(devices, group_add) of `profile` in the form the engine needs; the one place that differs by engine.

    - "docker" and "podman" (rootful): the device nodes (`HOST:CONTAINER:rwm`) and the nodes'
      numeric host GIDs (a group NAME would resolve against the image's /etc/group).
    - "podman-rootless": the nodes, and `keep-groups` instead of GIDs: in a rootless user namespace
      host GIDs are not mapped, and crun lets the container process keep the user's supplementary
      groups (so a node opens where the user can open it on the host; runc cannot: podman#25897).

    CDI names (`amd.com/gpu=all`, where amd_cdi_spec finds a spec) are not used: Podman's Docker-compatible
    API, through which containers are created, does not take them (Podman 4.3.1; podman#23560 on 5.1.2). The
    nodes are the same devices; doctor names the spec and the `podman run --device amd.com/gpu=all` it allows.
    """
    devices, groups = list(profile.devices), list(profile.group_add)
    if engine_kind == "podman-rootless" and groups:
        from toolkit.engine.api import KEEP_GROUPS

        groups = [KEEP_GROUPS]
    return devices, groups


def _device(host: Path, container: str) -> str:
    return f"{host}:{container}:rwm"


def _gids(paths: list[Path]) -> list[str]:
    out: list[str] = []
    for p in paths:
        gid = str(os.stat(p).st_gid)
        if gid not in out:
            out.append(gid)
    return out


def _render_host_path(g: Gpu, dev: Path) -> Path:
    return dev / "dri" / g.render_name


def shortfall(
    backend: str, gpus: list[Gpu] | tuple[Gpu, ...], dev: Path = Path("/dev"), allow_software: bool = False
) -> Shortfall | None:
    """What `backend` lacks on this host, or None when it can run. BadInput for an unknown backend."""
    if backend == "cpu":
        return None
    if backend == "rocm":
        if not (dev / "kfd").exists():
            return Shortfall("no /dev/kfd", "no AMD GPU driver (amdgpu/KFD) on this host")
        usable = rocm_gpus(gpus)
        if not usable:
            return Shortfall(
                "no GPU in the KFD topology",
                "/dev/kfd exists but /sys/class/kfd lists no GPU node",
                "check that amdgpu initialised the card (dmesg)",
            )
        if not any(_render_present(g, dev) for g in usable):
            nodes = ", ".join(g.render_node or f"GPU {g.index}: none named" for g in usable)
            return Shortfall(
                f"no render node {nodes}",
                "the GPU is in the KFD topology but its render node is missing",
            )
        return None
    if backend == "vulkan":
        if allow_software or any(_render_present(g, dev) for g in gpus if g.vendor in _RENDER_VENDORS):
            return None
        return Shortfall(
            "no GPU render node",
            "no AMD or Intel render node /dev/dri/renderD* on this host",
            "pass --allow-software-gpu to run on Mesa lavapipe (the CPU)",
        )
    raise BadInput(f"unknown backend {backend!r}: use rocm, vulkan or cpu")


def _require(
    backend: str, gpus: list[Gpu] | tuple[Gpu, ...], dev: Path, allow_software: bool = False
) -> None:
    short = shortfall(backend, gpus, dev, allow_software)
    if short:
        raise DeviceMissing(short.message())


def cpu_profile() -> DeviceProfile:
    """CPU control run: no devices at all."""
    return DeviceProfile(backend="cpu")


def vulkan_profile(
    gpus: list[Gpu] | tuple[Gpu, ...],
    *,
    pin: int | None = None,
    dev: Path = Path("/dev"),
    allow_software: bool = False,
) -> DeviceProfile:
    """Render node(s) only (the ICD comes from the image); GIDs of those nodes.

    With `allow_software` and no GPU: no devices and GGML_VK_VISIBLE_DEVICES=0, because ggml-vulkan
    skips CPU-type devices (Mesa lavapipe) unless one is selected explicitly.
    """
    present = [g for g in gpus if g.vendor in _RENDER_VENDORS and _render_present(g, dev)]
    if not present and allow_software:
        if pin is not None:
            select_gpus(gpus, pin, backend="vulkan", dev=dev)  # raises BadInput naming the missing GPU
        return DeviceProfile(
            backend="vulkan",
            environment={"GGML_VK_VISIBLE_DEVICES": "0"},
            notes=["no GPU render node: runs on Mesa lavapipe (software Vulkan on the CPU)"],
        )
    _require("vulkan", gpus, dev)
    sel = select_gpus(gpus, pin, backend="vulkan", dev=dev)
    paths = [_render_host_path(g, dev) for g in sel.chosen]
    return DeviceProfile(
        backend="vulkan",
        devices=[_device(p, g.render_node) for p, g in zip(paths, sel.chosen, strict=True)],
        group_add=_gids(paths),
        # The container sees only the passed node(s), numbered from 0; say so when some were left out.
        environment={"GGML_VK_VISIBLE_DEVICES": _visible(sel)} if sel.narrowed else {},
        **_selected(sel),
    )


def _visible(sel: Selection) -> str:
    return ",".join(str(i) for i in range(len(sel.chosen)))


def _selected(sel: Selection) -> dict[str, Any]:
    return {
        "gpus": [g.index for g in sel.chosen],
        "notes": sel.notes,
        "gpu_details": [g.to_dict() for g in sel.chosen],
        "hidden": [f"{g.label()} ({why})" for g, why in sel.hidden],
    }


def rocm_profile(
    gpus: list[Gpu] | tuple[Gpu, ...],
    *,
    pin: int | None = None,
    dev: Path = Path("/dev"),
    targets: list[str] | tuple[str, ...] | None = None,
) -> DeviceProfile:
    """/dev/kfd + the chosen GPUs' render nodes (select_gpus: every discrete GPU of the image's gfx
    `targets` unless --gpu pins one), numeric GIDs of those nodes (stat'd on the host), ipc host.

    Docker's default seccomp profile stays on: AMD lists `--security-opt seccomp=unconfined` as
    "(optional)" ("enables memory mapping, and is recommended for containers running in HPC
    environments": numactl-style NUMA placement; rocm.docs.amd.com/projects/install-on-linux/en/latest/
    how-to/docker.html, "Accessing GPUs in containers"); nothing here places memory that way."""
    _require("rocm", gpus, dev)
    sel = select_gpus(gpus, pin, backend="rocm", targets=targets, dev=dev)
    kfd = dev / "kfd"
    paths = [_render_host_path(g, dev) for g in sel.chosen]
    env: dict[str, str] = {}
    if sel.narrowed:
        # libhsakmt hides KFD nodes whose render node it cannot open, so inside the container the
        # passed card(s) are numbered from 0; the host index would select nothing.
        env["ROCR_VISIBLE_DEVICES"] = _visible(sel)
    return DeviceProfile(
        backend="rocm",
        devices=[_device(kfd, "/dev/kfd")]
        + [_device(p, g.render_node) for p, g in zip(paths, sel.chosen, strict=True)],
        group_add=_gids([kfd, *paths]),
        security_opt=["no-new-privileges"],
        ipc_mode="host",
        environment=env,
        **_selected(sel),
    )


def profile_for(
    backend: str,
    gpus: list[Gpu] | tuple[Gpu, ...],
    *,
    pin: int | None = None,
    dev: Path = Path("/dev"),
    allow_software: bool = False,
    targets: list[str] | tuple[str, ...] | None = None,
) -> DeviceProfile:
    """The profile for `backend` under the multi-GPU policy of select_gpus (`targets`: the image's
    gfx targets, e.g. from its org.toolkit.gfx-targets label; used by ROCm images). Raises BadInput
    (unknown backend or --gpu) or DeviceMissing (no device, or none of the image's arch)."""
    if backend == "cpu":  # --gpu said not to apply, never taken silently
        note = (
            f"--gpu {pin} does not apply: the cpu image runs on the CPU, no GPU is passed"
            if pin is not None
            else ""
        )
        return DeviceProfile(backend="cpu", notes=[note] if note else [])
    _require(backend, gpus, dev, allow_software)
    if backend == "rocm":
        return rocm_profile(gpus, pin=pin, dev=dev, targets=targets)
    return vulkan_profile(gpus, pin=pin, dev=dev, allow_software=allow_software)
