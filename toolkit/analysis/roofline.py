"""How close a measured tok/s comes to what the GPU(s) could do at most (a roofline, per record).

decode (tg): every generated token reads the active weights once, so
    implied bandwidth = tok/s x bytes read per token,  bytes per token ~ model_size x active share
and `% of bandwidth bound` = implied / peak memory bandwidth. KV-cache reads are left out (small
at the short contexts llama-bench uses), so the figure is a slight underestimate.

prefill (pp): every prompt token costs ~2 FLOPs per active parameter (one multiply-add), so
    implied FLOP/s = tok/s x 2 x active params
and `% of compute bound` = implied / peak dense FP16 matrix FLOP/s. Attention FLOPs are left out
(they grow with the prompt); llama.cpp's int8 MMQ path can exceed the FP16 rate in principle.

Above the ceiling (`ceiling`: every used card's peak summed, any split) a fraction > 1 is no measurement:
facts._flags says bw-above-peak (decode) or compute-above-peak (prefill), and the cell is held out of the
row's best, the verdict and compare (Facts.held_flags).

Active share of a mixture-of-experts model (only the routed experts are read per token), in order:
  1. the GGUF file the record names, when its header is readable within toolkit/models/gguf_meta.py's
     bounds (the header alone, never the weights): non-expert tensors + expert tensors x
     expert_used/expert_count (bytes and parameters counted per tensor: exact for the weights,
     ignoring the router's choice); a name or file that cannot be read so is "unknown" here;
  2. the share its model type states (plausible.stated_share, which the validity pass holds its rate to
     as well): a known type's table, `NB.AMB`, or dense: "dense-arch" (DENSE_ARCHS) is held to 1 x the
     peak, "dense" (an MoE the marker list lacks may hide behind it) to 1 / MIN_ACTIVE_SHARE.

The yardstick is the exact GPU PRODUCT (toolkit/core/gpuspecs.py, from gpu_info or the passed cards' PCI ids),
never a gfx arch; how many GPUs a run used is gpu_use; a multi-GPU run is never held against one card's peak:
docs/running.md, "GPUs: which ones a run gets, and the roofline yardstick". A product without figures, a
split-layer or pipeline-parallel run, a CPU run, a software Vulkan device (llvmpipe/lavapipe) and a run that
kept part of the weights in host memory for the CPU (`--n-cpu-moe N`, `-ot exps=CPU`: weights_on_host) get no
roofline, with a note (weights_on_host: its ceiling, every weight on the GPUs, still bounds it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolkit.core import backends
from toolkit.core.gpuspecs import GpuSpec, is_generic_name, spec_by_name, spec_by_pci, summed
from toolkit.models import gguf_meta
from toolkit.results.records import BenchRecord
from toolkit.runtimes.llama_bench import check, plausible
from toolkit.runtimes.llama_bench.plausible import MIN_ACTIVE_SHARE, ActiveShare
from toolkit.runtimes.llama_bench.settings_check import device_names


@dataclass(frozen=True)
class Roofline:
    """One record against its yardstick: implied rate, the bound, and the ratio (0.45 = 45 %).
    `gpu` is the yardstick (one product, or the sum over `gpu_count` cards of one product), `note`
    how the yardstick was chosen."""

    gpu: GpuSpec
    metric: str  # "bandwidth" (decode) | "compute" (prefill)
    implied: float  # B/s or FLOP/s
    peak: float
    share: ActiveShare
    gpu_count: int = 1
    note: str = ""

    @property
    def fraction(self) -> float:
        return self.implied / self.peak

    @property
    def limit(self) -> float:
        """The fraction above which it is beyond what its GPUs could do: 1, or, where the model is taken
        as dense only because its type names no known MoE (share source "dense"), 1 / MIN_ACTIVE_SHARE."""
        return 1 / MIN_ACTIVE_SHARE if self.share.source == "dense" else 1.0

    @property
    def above_peak(self) -> bool:
        """Beyond what its GPUs could do: a fraction above its `limit`."""
        return self.fraction > self.limit


@dataclass(frozen=True)
class GpuUse:
    """The GPUs one record's run used. `count` None: not knowable from the record; `specs` one per
    used GPU (None where the product has no figures); `names` what each was called; `split` how
    the work was shared: single | layer | row | tensor | tensor-parallel | pipeline-parallel;
    `source` where the count came from; `note` why count or products are unknown ("" if known)."""

    count: int | None
    specs: tuple[GpuSpec | None, ...] = ()
    names: tuple[str, ...] = ()
    split: str = "single"
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class Assessment:
    """`roofline` of a record, or None with `note` saying why; `use` the GPUs it ran on."""

    roofline: Roofline | None
    use: GpuUse
    note: str = ""


def gguf_active_share(path: str) -> ActiveShare | None:
    """Active share from a GGUF file's tensors: experts (`*_exps`) count at expert_used/expert_count.
    None where `path` is no readable GGUF header within gguf_meta's bounds (a record names the path:
    the header alone is read, never the weights, never past MAX_HEADER_BYTES; cached per file state)."""
    summary = gguf_meta.read_summary(path)
    if summary is None:
        return None
    arch = summary.fields.get("general.architecture")
    used, count = summary.fields.get(f"{arch}.expert_used_count"), summary.fields.get(f"{arch}.expert_count")
    if not isinstance(used, int | float) or not isinstance(count, int | float) or not used or not count:
        return ActiveShare(1.0, 1.0, "gguf")
    ratio = float(used) / float(count)
    tot_b = act_b = tot_p = act_p = 0.0
    for name, n_elements, n_bytes in summary.tensors:
        scale = ratio if "_exps" in name else 1.0
        tot_b, act_b = tot_b + n_bytes, act_b + n_bytes * scale
        tot_p, act_p = tot_p + n_elements, act_p + n_elements * scale
    if not tot_b or not tot_p:
        return None
    return ActiveShare(act_b / tot_b, act_p / tot_p, "gguf")


def active_share(r: BenchRecord) -> ActiveShare | None:
    """Share of the model's weights touched per token (see the module docstring for the order)."""
    from_file = gguf_active_share(r.model.path) if r.model.path else None
    return from_file or plausible.stated_share(r.raw.get("model_type"))


def model_bytes(r: BenchRecord) -> int | None:
    """The size of a record's model in bytes, one quantity for every record that has it: llama-bench's
    model_size of its row (its tensors, as a bench's row and an import of the same file both say it;
    an -o md table's `56.89 GiB` read as bytes), else the file `toolkit bench` measured (model.size_bytes:
    a vLLM or SGLang run's); None where neither is a size above 0. A bench run's file size beside an
    import's model_size read as two sizes of one model file (nc48b S8)."""
    size = check.quantity((r.raw or {}).get("model_size")) or r.model.size_bytes
    return size if size and size > 0 else None


def model_params(r: BenchRecord) -> float | None:
    """The model's parameter count: llama-bench's number, or an -o md table's `30.53 B` (check.quantity)."""
    n = check.quantity(r.raw.get("model_n_params"))
    return float(n) if n else None


# ---------------------------------------------------------------------------------------------
# Which GPUs a record ran on

PARALLEL_SPLITS = ("row", "tensor", "tensor-parallel")  # every card works on every layer at once


def _extra(r: BenchRecord, key: str) -> Any:
    return (r.model_extra or {}).get(key)


def passed_gpus(r: BenchRecord) -> list[dict[str, Any]] | None:
    """The host GPUs the run's container was given, as host-fact dicts (Gpu.to_dict()), in host order:
    from the record's `device_profile` (DeviceProfile.record(); bench keeps it in `host`) or, for
    records without one, the `--device HOST:/dev/dri/renderD*` arguments of its docker command
    matched to `host.gpus`.
    None when the record says nothing about it (imports)."""
    prof = _extra(r, "device_profile") or r.host.get("device_profile")  # bench stores it with the host facts
    if isinstance(prof, dict) and isinstance(prof.get("gpus"), list):
        return [g for g in prof["gpus"] if isinstance(g, dict)]
    cmd = list(r.command or [])
    nodes = [
        cmd[i + 1].split(":")[1]
        for i, a in enumerate(cmd[:-1])
        if a == "--device" and cmd[i + 1].count(":") >= 1 and "/dev/dri/renderD" in cmd[i + 1]
    ]
    if not cmd:
        return None
    host = {g.get("render_node"): g for g in r.host.get("gpus", []) if isinstance(g, dict)}
    return [host.get(n, {"render_node": n}) for n in nodes]


def _spec_of_host_gpu(g: dict[str, Any]) -> GpuSpec | None:
    return spec_by_pci(
        str(g.get("vendor") or ""), str(g.get("device_id") or ""), g.get("revision") or None
    ) or (spec_by_name(str(g.get("name") or "")) if g.get("name") else None)


def _host_name(g: dict[str, Any]) -> str:
    ids = f"PCI {g.get('vendor', '?')}:{g.get('device_id', '?')} rev {g.get('revision') or '?'}"
    return str(g.get("name") or "") or f"{g.get('gfx_target') or 'GPU'} ({ids})"


def _int_arg(cmd: list[str], *flags: str) -> int | None:
    for i, a in enumerate(cmd):
        for f in flags:
            if a == f and i + 1 < len(cmd) and cmd[i + 1].isdigit():
                return int(cmd[i + 1])
            if a.startswith(f + "=") and a.split("=", 1)[1].isdigit():
                return int(a.split("=", 1)[1])
    return None


def _not_on_a_gpu(r: BenchRecord, info: str) -> GpuUse | None:
    """The GpuUse of a run its record, not its row, says used no GPU (a CPU image's: count 0) or cannot
    tell (None: no `backends`, a backend not known, no GPU named); None otherwise (plausible.used_gpus reads
    the row)."""
    if r.image.backend == "cpu":
        return GpuUse(0, note=f"a CPU run (backend {r.backends or r.image.backend})")
    if not r.backends and not info and not backends.llama_name(r.image.backend):
        return GpuUse(
            None,
            note=f"the backend is unknown ({r.image.backend!r}: imported without --backend) and the "
            "record names no GPU, so the GPU is unknown",
        )
    return None


def _visible_gpus(r: BenchRecord, info: str) -> tuple[list[str], list[GpuSpec | None], str]:
    """(names, specs, source) of the GPUs the run saw: gpu_info's, with generic or absent names
    replaced by the PCI ids of the cards passed in, else the host's only discrete GPU."""
    passed = passed_gpus(r)
    visible = device_names(info)
    names, specs = list(visible), [spec_by_name(n) for n in visible]
    source = "gpu_info"
    if passed and (not visible or len(visible) == len(passed)):
        for i, g in enumerate(passed):  # generic or absent names: the PCI ids of the passed cards
            if not visible or (specs[i] is None and is_generic_name(visible[i])):
                if not visible:
                    names.append(_host_name(g))
                    specs.append(_spec_of_host_gpu(g))
                else:
                    names[i], specs[i] = _host_name(g), _spec_of_host_gpu(g)
        source = "gpu_info + device profile" if visible else "device profile"
    if not names and passed is None:  # no device list recorded: a host with ONE discrete GPU used that one
        dgpus = [g for g in r.host.get("gpus", []) if isinstance(g, dict) and not g.get("is_igpu")]
        if len(dgpus) == 1:
            names, specs, source = (
                [_host_name(dgpus[0])],
                [_spec_of_host_gpu(dgpus[0])],
                "host's only discrete GPU",
            )
    return names, specs, source


def _vllm_use(r: BenchRecord, names: list[str], specs: list[GpuSpec | None], source: str) -> GpuUse:
    """A vLLM run uses tensor_parallel_size x pipeline_parallel_size of the GPUs it saw."""
    cmd = [str(a) for a in r.command or []]
    eng = r.engine or {}
    tp = int(eng.get("tensor_parallel_size") or _int_arg(cmd, "--tensor-parallel-size", "-tp") or 1)
    pp = int(eng.get("pipeline_parallel_size") or _int_arg(cmd, "--pipeline-parallel-size", "-pp") or 1)
    n = tp * pp
    split = "single" if n == 1 else ("tensor-parallel" if pp == 1 else "pipeline-parallel")
    if n > len(names):
        return GpuUse(None, note=f"vLLM used {n} GPUs but the record lists {len(names)}")
    return GpuUse(n, tuple(specs[:n]), tuple(names[:n]), split, source + " + vLLM parallel sizes")


def gpu_use(r: BenchRecord) -> GpuUse:
    """How many GPUs the run of record `r` used and which products they are (see the module text): a
    llama-bench row's as plausible.used_gpus reads it (the import's bounds and note read the same), among
    the devices it saw (_visible_gpus)."""
    info = r.gpu_info or ""
    if (none := _not_on_a_gpu(r, info)) is not None:
        return none
    names, specs, source = _visible_gpus(r, info)
    if r.runner.startswith("vllm") and names:
        return _vllm_use(r, names, specs, source)
    fields = {**(r.raw or {}), "gpu_info": info, "backends": r.backends, "n_gpu_layers": r.n_gpu_layers}
    used = plausible.used_gpus(fields, names)
    if not used.at:
        return GpuUse(used.count, note=used.how)
    return GpuUse(used.count, tuple(specs[i] for i in used.at), used.names, used.split, source + used.how)


def yardstick(use: GpuUse, *, ceiling: bool = False) -> tuple[GpuSpec | None, str]:
    """The peak figures to hold a run on `use` against, and how they were chosen (or why none).
    `ceiling`: for a plausibility check, N cards of one product in ANY split give N x one card's
    peak -- a bound no run can exceed, though a layer split cannot reach it."""
    if use.count is None or use.count == 0 or len(use.specs) < use.count:
        return None, use.note or "no GPU"
    unknown = sorted({n for n, s in zip(use.names, use.specs, strict=False) if s is None})
    if unknown:
        return None, (
            f"no peak figures for {', '.join(repr(n) for n in unknown)}: its product is not in the "
            "table of toolkit/core/gpuspecs.py (a gfx arch alone is no yardstick)"
        )
    spec = use.specs[0]
    assert spec is not None
    if use.count == 1:
        return spec, f"{spec.product} ({spec.source})"
    products = sorted({s.product for s in use.specs if s})
    if len(products) > 1 and not ceiling:
        return None, f"{use.count} GPUs of different products ({', '.join(products)}): no single yardstick"
    if use.split not in PARALLEL_SPLITS and not ceiling:
        return None, (
            f"{use.count} x {spec.product} with split {use.split}: the cards take turns on each token, so "
            f"the bound lies between one card's peak and {use.count}x; no roofline for multi-GPU "
            "layer/pipeline splits"
        )
    total = summed([s for s in use.specs if s])
    if len(products) > 1:
        return total, f"{total.product}, split {use.split}: ceiling = the sum of the cards' peaks"
    n = use.count
    if use.split not in PARALLEL_SPLITS:
        return total, f"{n} x {spec.product}, split {use.split}: ceiling = {n} x one card's (not reachable)"
    return (
        total,
        f"{n} x {spec.product}, split {use.split}: every card works on every layer, peak = {n} x one card's",
    )


def weights_on_host(r: BenchRecord) -> str | None:
    """Why part of the weights of record `r` were read from host memory by the CPU, so that the GPU's
    peak is no yardstick of its rate, or None: llama-bench's `n_cpu_moe` above 0 (`--n-cpu-moe N`: the
    experts of the first N layers stay in host memory and run on the CPU) or a `tensor_buft_overrides`
    that places tensors on the CPU (`-ot exps=CPU`, printed `pattern=CPU`). The time of such a token is
    the GPU's part plus the CPU's, so a share of the GPU's peak measures neither; the ceiling (no run is
    faster than every weight on the GPUs) still holds, and assess(ceiling=True) keeps it."""
    raw = r.raw or {}
    moe = check.as_int(raw.get("n_cpu_moe"))  # as the validity pass read it: 4, "4" (csv, sql), 4.0, "+4"
    if moe is not None and moe > 0:
        return (
            f"n_cpu_moe {moe}: the experts of the first {moe} layers (all, where the model has fewer) stay in "
            "host memory and run on the CPU, so the GPU's peak is no yardstick of this rate"
        )
    ot = str(raw.get("tensor_buft_overrides") or "")
    if any(part.rsplit("=", 1)[-1].strip().upper() == "CPU" for part in ot.split(";") if "=" in part):
        return (
            f"tensor_buft_overrides {ot[:60]!r}: tensors held in host memory and run on the CPU, so the GPU's "
            "peak is no yardstick of this rate"
        )
    return None


def assess(r: BenchRecord, *, ceiling: bool = False, use: GpuUse | None = None) -> Assessment:
    """The roofline of record `r` with the GPUs it used, or None and why (note). `ceiling`: against
    the sum of the used cards' peaks in any split (for 'faster than the hardware' checks; a MoE whose
    share is unknown is taken at MIN_ACTIVE_SHARE, the fewest any reads: share source "least", a rate
    that is at least the implied one). `use`: gpu_use(r) where the caller has it (an Assessment's), else
    found here."""
    use = use if use is not None else gpu_use(r)
    if r.avg_ts is None or r.axis not in ("prefill", "decode"):
        return Assessment(None, use, f"no roofline for {r.axis} results")
    if not ceiling and use.count and (host := weights_on_host(r)) is not None:
        return Assessment(None, use, host)
    gpu, how = yardstick(use, ceiling=ceiling)
    if gpu is None:
        return Assessment(None, use, how)
    share = active_share(r)
    if share is None and ceiling:  # no MoE reads less than the smallest known share: a floor of its rate
        share = ActiveShare(MIN_ACTIVE_SHARE, MIN_ACTIVE_SHARE, "least")
    if share is None:
        return Assessment(None, use, "active share of the model's weights unknown (MoE type not recognised)")
    if r.axis == "decode":
        size = model_bytes(r)
        if not size:
            return Assessment(None, use, "model size unknown")
        roof = Roofline(
            gpu, "bandwidth", r.avg_ts * size * share.bytes_share, gpu.mem_bw, share, use.count or 1, how
        )
        return Assessment(roof, use, how)
    params = model_params(r)
    if not params:
        return Assessment(None, use, "model parameter count unknown")
    roof = Roofline(
        gpu, "compute", r.avg_ts * 2.0 * params * share.params_share, gpu.flops, share, use.count or 1, how
    )
    return Assessment(roof, use, how)


def ceiling(r: BenchRecord, use: GpuUse | None = None) -> Roofline | None:
    """Record `r` against the most its GPUs could do together (N x one card's peak in any split): a
    fraction above 1 is impossible (caches, a wrong model size, or a wrong GPU). None when unknown.
    `use`: gpu_use(r) where the caller has it (no GPU, or not known how many: None, no yardstick)."""
    return None if use is not None and not use.count else assess(r, ceiling=True, use=use).roofline
