"""What a report's numbers are of: the model (name, file, sha256), when they were measured, on which
host and GPU with which kernel and driver, and per image its digest, runtime commit, ROCm or Mesa
version, Vulkan's matrix-cores (coopmat) state and the toolkit that built it. Public result viewers open with exactly this (GPU, VRAM, OS,
kernel, build, capture date: issue 33); read from the records alone, so an imported file says what
it carried and nothing more."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolkit.analysis.tables import image_label
from toolkit.results.records import BenchRecord

_LABELS = {
    "runtime commit": (
        "org.toolkit.llama-cpp-commit",
        "org.toolkit.source-commit",
        "org.opencontainers.image.revision",
    ),
    "ROCm": ("org.toolkit.rocm-version",),
    "Mesa": ("org.toolkit.mesa-version",),
    "matrix cores": ("org.toolkit.llama-vk-matrix-cores",),
    "vLLM": ("org.toolkit.vllm-version",),
    "toolkit": ("org.toolkit.version",),
}


@dataclass
class Provenance:
    """models: `name (file, sha256 12)`; dates: (first, last) measurement time (ISO); hosts: one line per
    host (OS, kernel, CPU, GPU and driver); images: one line per image label (digest, backend, runtime
    commit, ROCm/Mesa/vLLM version, Vulkan matrix cores on/off, toolkit version). Empty lists where the records say nothing."""

    models: list[str] = field(default_factory=list)
    dates: tuple[str, str] | None = None
    hosts: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The header as `key: value` lines, in the order a reader asks: model, when, where, what build."""
        out = [f"model: {m}" for m in self.models]
        if self.dates:
            first, last = self.dates
            out.append(f"measured: {first} UTC" + (f" to {last} UTC" if last != first else ""))
        if self.runs:
            out.append(f"runs: {', '.join(self.runs)}")
        out += [f"host: {h}" for h in self.hosts]
        out += [f"image {i}" for i in self.images]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "models": self.models,
            "measured_utc": list(self.dates) if self.dates else None,
            "runs": self.runs,
            "hosts": self.hosts,
            "images": self.images,
        }


def _date(r: BenchRecord) -> str | None:
    t = (r.raw or {}).get("test_time") or r.created
    return str(t)[:19].replace("T", " ") if t else None


def _host_line(h: dict[str, Any], gpus: Iterable[str]) -> str:
    parts = [str(h[k]) for k in ("os", "cpu_model") if h.get(k)]
    if h.get("kernel"):
        parts.append(f"kernel {h['kernel']}")
    if h.get("amdgpu_module"):
        parts.append(f"amdgpu {h['amdgpu_module']}")
    gpu = ", ".join(sorted(set(gpus)))
    if gpu:
        parts.append(f"GPU {gpu}")
    docker = h.get("docker") or {}
    if docker.get("server_version"):
        parts.append(f"engine {docker['server_version']}")
    return "; ".join(parts) or "not recorded"


def _image_line(r: BenchRecord) -> str:
    labels = r.image.labels or {}
    parts = [f"{image_label(r)}: digest {r.image.digest}", f"backend {r.image.backend}"]
    for what, keys in _LABELS.items():
        value = next((labels[k] for k in keys if labels.get(k)), None)
        if what == "runtime commit":
            value = value or r.build_commit
        if value:
            parts.append(f"{what} {str(value)[:12] if what == 'runtime commit' else value}")
    return ", ".join(parts)


def provenance(records: list[BenchRecord]) -> Provenance:
    """The provenance of `records` (those a report shows; failed ones count for dates and builds too)."""
    p = Provenance()
    models: dict[str, str] = {}
    for r in records:
        file = (r.model.path or "").rsplit("/", 1)[-1]
        sha = f", sha256 {r.model.sha256[:12]}" if len(r.model.sha256 or "") == 64 else ""
        models.setdefault(r.model.name, f"{r.model.name} ({file or 'file not recorded'}{sha})")
    p.models = sorted(models.values())
    dates = sorted(d for r in records if (d := _date(r)))
    p.dates = (dates[0], dates[-1]) if dates else None
    p.runs = sorted({r.run_id for r in records if r.run_id})
    hosts: dict[str, tuple[dict[str, Any], set[str]]] = {}
    for r in records:
        h = r.host or {}
        key = str(h.get("key") or h.get("hostname") or (h.get("os"), h.get("kernel")))
        entry = hosts.setdefault(key, (h, set()))
        if r.gpu_info:
            entry[1].add(str(r.gpu_info))
    p.hosts = [_host_line(h, gpus) for h, gpus in hosts.values()]
    first: dict[str, BenchRecord] = {}
    for r in records:
        first.setdefault(image_label(r), r)
    p.images = [_image_line(r) for _, r in sorted(first.items())]
    return p
