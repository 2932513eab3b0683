"""Which GPU product a device is, and its peak figures: one small table, keyed by exact product.

A GPU is identified by its PCI ids (vendor, device, revision: what /sys/class/drm/*/device/ shows)
or by its marketing name (what llama-bench writes in `gpu_info`, what amdgpu's `product_name` or
libdrm's amdgpu.ids give). Never by gfx arch: gfx1201 is the R9700 AND the RX 9070 GRE/9070/9070 XT,
whose memory bandwidths differ (432 vs 640 GB/s); a gfx arch alone gives no yardstick.

    spec_by_pci("0x1002", "0x7551", "0xc0")        -> GpuSpec(R9700)
    spec_by_name("AMD Radeon AI PRO R9700 (RADV GFX1201)") -> GpuSpec(R9700)
    spec_by_name("AMD Radeon Graphics")            -> None  (generic: ask the PCI ids)
    spec_by_name("Radeon RX 9070")                 -> RX 9070, never the 9070 XT or GRE (exact match)

Figures: `mem_bw_gbs` = peak DRAM bandwidth in GB/s (1e9 B/s); `fp16_matrix_tflops` = dense (no
sparsity) FP16 matrix peak at the boost clock in TFLOP/s; `board_power_w` = the board's rated power in
W (AMD's Total Board Power, NVIDIA's maximum TDP: the most its power controller lets it draw over a
window at stock, what a stored telemetry block's mean power is held to: results.telemetry_check).
`board_power_max_w` = the most a partner board of the product draws at its own TBP and highest power
limit, where that exceeds the rated power (RX 7900 XTX: 483 W, see its entry). Board powers: R9700 300 W (AMD's product page, Total Board Power; no stored copy of it was found to cite: with
the 1.25x slack a mean above 375 W is refused); RX 9070 XT 304 W and RX 9070 220 W (AMD at launch, reported by
multiplayer.it/notizie/amd-radeon-rx-9070-xt-rx-9070-specifiche.html); RX 7900 XTX 355 W and
RX 7900 XT 315 W (AMD's TBP as quoted by winenfood.com/rx-7900-xtx-power-consumption-explained and
visualfoodie.com/amd-7900-xt-power-consumption-explained); Radeon PRO W7900 295 W
(itcreations.com/amd-gpu/amd-radeon-pro-w7900-gpu); MI300X 750 W (AMD's footnote, reported by
infowire.cc/amd-mi300x-guzzles-power-rated-for-750-watts); H100 PCIe 350 W (NVIDIA product brief
PB-11133-001_v02: "maximum thermal design power (TDP) level of 350 W"); H100 SXM and H200 SXM 700 W
(aiminingco.com/gpu/h200/specs, openmetal.io "How the H200 is built ..."); H100 NVL 400 W and H200 NVL
600 W (onestopsystems.com blog on 675 W CEM cards). The RX 9070 GRE and RX 7900 GRE carry none: no
source was re-read for them. Each entry says where its numbers come
from; where a vendor page was not re-read for this table, the comment says how the figure was
derived. A product not in the table gets no roofline (see roofline.py), never a neighbour's figures.

PCI device/revision -> name pairs are libdrm's data/amdgpu.ids (AMD) and the PCI ID Repository's
pci.ids (NVIDIA). Several products share one PCI device id and differ only by revision (0x7550:
RX 9070 XT c0, RX 9070 GRE c2, RX 9070 c3; 0x7551: R9700 c0, R9600D c8), so AMD lookups need both.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

AMD = "0x1002"
NVIDIA = "0x10de"


@dataclass(frozen=True)
class GpuSpec:
    """One GPU product. `pci` holds (device id, revision) pairs, lower-case hex with 0x; a revision of
    None matches any (NVIDIA names do not depend on it). `names` are extra spellings of the product
    seen in gpu_info (matched exactly after `normalize_name`)."""

    product: str
    vendor: str
    pci: tuple[tuple[str, str | None], ...]
    gfx_target: str  # AMD LLVM target; NVIDIA: the CUDA arch (sm_90)
    mem_bw_gbs: float
    fp16_matrix_tflops: float
    compute_units: int  # AMD CUs / NVIDIA SMs
    source: str
    names: tuple[str, ...] = ()
    board_power_w: float | None = (
        None  # the board's rated power (AMD TBP, NVIDIA max TDP), W; None: not stated
    )
    board_power_max_w: float | None = None
    """The most a board of this product is sold to draw and may be set to, W, where partner boards
    exceed `board_power_w` (a factory-overclocked board's TBP x the power limit its driver offers);
    None: `board_power_w` is that most."""

    @property
    def mem_bw(self) -> float:
        """Peak memory bandwidth in B/s."""
        return self.mem_bw_gbs * 1e9

    @property
    def flops(self) -> float:
        """Peak dense FP16 matrix rate in FLOP/s."""
        return self.fp16_matrix_tflops * 1e12


_AMD_IDS = "libdrm data/amdgpu.ids"
_NV_IDS = "pci.ids (PCI ID Repository)"

SPECS: tuple[GpuSpec, ...] = (
    # --- RDNA4, Navi 48, gfx1201. Matrix FP16 = 2 x the vector FP16 rate (WMMA: 1024 FLOP/clk/CU dense).
    # Radeon AI PRO R9700: 32 GB GDDR6 20 Gbps x 256 bit = 640 GB/s, 64 CUs, 2920 MHz boost; AMD product
    # page: 95.7 TFLOPS FP16 vector, 191 TFLOPS FP16 matrix (383 with sparsity; "1531 TOPS" = INT4 sparse).
    GpuSpec(
        "AMD Radeon AI PRO R9700",
        AMD,
        (("0x7551", "0xc0"),),
        "gfx1201",
        640.0,
        191.0,
        64,
        f"AMD product page (R9700); ids: {_AMD_IDS}",
        board_power_w=300.0,
    ),
    # RX 9070 XT: 16 GB GDDR6 20 Gbps x 256 bit = 640 GB/s, 64 CUs, 2970 MHz boost; AMD: 48.7 TFLOPS
    # FP32, 97.3 FP16 vector -> 194.6 FP16 matrix (64 x 1024 x 2.97 GHz).
    GpuSpec(
        "AMD Radeon RX 9070 XT",
        AMD,
        (("0x7550", "0xc0"),),
        "gfx1201",
        640.0,
        194.6,
        64,
        f"AMD product page (RX 9070 XT); ids: {_AMD_IDS}",
        board_power_w=304.0,
    ),
    # RX 9070: 16 GB GDDR6 20 Gbps x 256 bit = 640 GB/s, 56 CUs, 2520 MHz boost; 72.3 FP16 vector ->
    # 144.5 FP16 matrix (56 x 1024 x 2.52 GHz).
    GpuSpec(
        "AMD Radeon RX 9070",
        AMD,
        (("0x7550", "0xc3"),),
        "gfx1201",
        640.0,
        144.5,
        56,
        f"AMD product page (RX 9070); ids: {_AMD_IDS}",
        board_power_w=220.0,
    ),
    # RX 9070 GRE: 12 GB GDDR6 18 Gbps x 192 bit = 432 GB/s, 48 CUs, 2790 MHz boost -> 137.1 FP16 matrix
    # (48 x 1024 x 2.79 GHz). Less certain than the others: the figures are those reported at launch
    # (AMD's GRE page; one third-party table lists 528 GB/s, which 192 bit x 18 Gbps does not give).
    GpuSpec(
        "AMD Radeon RX 9070 GRE",
        AMD,
        (("0x7550", "0xc2"),),
        "gfx1201",
        432.0,
        137.1,
        48,
        f"AMD product page (RX 9070 GRE), derived matrix rate; ids: {_AMD_IDS}",
    ),
    # --- RDNA3, Navi 31, gfx1100. WMMA FP16 dense = the dual-issue FP16 rate (512 FLOP/clk/CU).
    # RX 7900 XTX: 24 GB GDDR6 20 Gbps x 384 bit = 960 GB/s, 96 CUs, 2500 MHz boost, 122.8 TFLOPS FP16.
    GpuSpec(
        "AMD Radeon RX 7900 XTX",
        AMD,
        (("0x744c", "0xc8"),),
        "gfx1100",
        960.0,
        122.8,
        96,
        f"AMD product page (RX 7900 XTX); ids: {_AMD_IDS}",
        board_power_w=355.0,
        # Sapphire NITRO+ RX 7900 XTX Vapor-X: 420 W TBP (club386.com review; gamingpcbuilder.com spec
        # table, 420 vs the reference 355 W), its power limit to 115 % (tomshardware.com review:
        # "maxed out the power limit at 115%", average gaming draw just under 500 W) = 483 W
        board_power_max_w=483.0,
    ),
    # RX 7900 XT: 20 GB GDDR6 20 Gbps x 320 bit = 800 GB/s, 84 CUs, 2400 MHz boost, 103.0 TFLOPS FP16.
    GpuSpec(
        "AMD Radeon RX 7900 XT",
        AMD,
        (("0x744c", "0xcc"),),
        "gfx1100",
        800.0,
        103.0,
        84,
        f"AMD product page (RX 7900 XT); ids: {_AMD_IDS}",
        board_power_w=315.0,
    ),
    # RX 7900 GRE: 16 GB GDDR6 18 Gbps x 256 bit = 576 GB/s, 80 CUs, 2245 MHz boost, 91.96 TFLOPS FP16.
    GpuSpec(
        "AMD Radeon RX 7900 GRE",
        AMD,
        (("0x744c", "0xce"),),
        "gfx1100",
        576.0,
        91.96,
        80,
        f"AMD product page (RX 7900 GRE); ids: {_AMD_IDS}",
    ),
    # Radeon PRO W7900: 48 GB GDDR6 18 Gbps x 384 bit = 864 GB/s, 96 CUs, 2495 MHz boost, 122.64 TFLOPS
    # FP16. (The W7900 Dual Slot, 0x744a, is a separate entry in amdgpu.ids and not in this table.)
    GpuSpec(
        "AMD Radeon PRO W7900",
        AMD,
        (("0x7448", "0x00"),),
        "gfx1100",
        864.0,
        122.64,
        96,
        f"AMD product page (Radeon PRO W7900); ids: {_AMD_IDS}",
        board_power_w=295.0,
    ),
    # --- CDNA3. Instinct MI300X: 192 GB HBM3 at 5.3 TB/s, 304 CUs, 1307.4 TFLOPS dense FP16 matrix
    # (2614.9 with sparsity). AMD MI300X data sheet.
    GpuSpec(
        "AMD Instinct MI300X",
        AMD,
        (("0x74a1", "0x00"),),
        "gfx942",
        5300.0,
        1307.4,
        304,
        f"AMD Instinct MI300X data sheet; ids: {_AMD_IDS}",
        board_power_w=750.0,
    ),
    # --- NVIDIA Hopper, for results imported from NVIDIA hosts. NVIDIA's data sheets give FP16 Tensor
    # Core figures WITH sparsity; the dense rate is half. Names as CUDA/Vulkan report them.
    # H100 SXM5: 80 GB HBM3, 3.35 TB/s, 1979 TFLOPS FP16 sparse -> 989.4 dense, 132 SMs.
    GpuSpec(
        "NVIDIA H100 80GB HBM3",
        NVIDIA,
        (("0x2330", None),),
        "sm_90",
        3350.0,
        989.4,
        132,
        f"NVIDIA H100 data sheet (SXM); ids: {_NV_IDS}",
        names=("NVIDIA H100 SXM5 80GB",),
        board_power_w=700.0,
    ),
    # H100 PCIe: 80 GB HBM2e, 2.0 TB/s, 1513 TFLOPS FP16 sparse -> 756.5 dense, 114 SMs.
    GpuSpec(
        "NVIDIA H100 PCIe",
        NVIDIA,
        (("0x2331", None),),
        "sm_90",
        2000.0,
        756.5,
        114,
        f"NVIDIA H100 data sheet (PCIe); ids: {_NV_IDS}",
        board_power_w=350.0,
    ),
    # H100 NVL: 94 GB HBM3, 3.9 TB/s, 1671 TFLOPS FP16 sparse -> 835.5 dense, 132 SMs.
    GpuSpec(
        "NVIDIA H100 NVL",
        NVIDIA,
        (("0x2321", None),),
        "sm_90",
        3900.0,
        835.5,
        132,
        f"NVIDIA H100 data sheet (NVL); ids: {_NV_IDS}",
        board_power_w=400.0,
    ),
    # H200 (SXM): 141 GB HBM3e, 4.8 TB/s, 1979 TFLOPS FP16 sparse -> 989.5 dense, 132 SMs. CUDA calls it
    # "NVIDIA H200" (the name in shared/cases/*h200*.jsonl, CUDA and Vulkan alike).
    GpuSpec(
        "NVIDIA H200",
        NVIDIA,
        (("0x2335", None),),
        "sm_90",
        4800.0,
        989.5,
        132,
        f"NVIDIA H200 data sheet (SXM); ids: {_NV_IDS}",
        names=("NVIDIA H200 SXM 141GB",),
        board_power_w=700.0,
    ),
    # H200 NVL: 141 GB HBM3e, 4.8 TB/s, 1671 TFLOPS FP16 sparse -> 835.5 dense.
    GpuSpec(
        "NVIDIA H200 NVL",
        NVIDIA,
        (("0x233b", None),),
        "sm_90",
        4800.0,
        835.5,
        132,
        f"NVIDIA H200 data sheet (NVL); ids: {_NV_IDS}",
        board_power_w=600.0,
    ),
)

# Other products that share a PCI device id with a SPECS entry, so a lookup never falls back to a
# neighbour (names from libdrm amdgpu.ids). They have no figures: no roofline.
NAMED_ONLY: dict[tuple[str, str, str], str] = {
    (AMD, "0x7551", "0xc8"): "AMD Radeon AI PRO R9600D",
    (AMD, "0x7590", "0xc0"): "AMD Radeon RX 9060 XT",
    (AMD, "0x7590", "0xc1"): "AMD Radeon RX 9060 XT LP",
    (AMD, "0x7590", "0xc7"): "AMD Radeon RX 9060",
    (AMD, "0x744c", "0xcf"): "AMD Radeon RX 7900M",
    (AMD, "0x744a", "0x00"): "AMD Radeon PRO W7900 Dual Slot",
}

# Names that say "some GPU of this vendor", not which: an identity must come from the PCI ids.
GENERIC_NAMES = frozenset({"", "radeon graphics", "unknown", "amd unknown", "graphics", "gpu"})

_MAX_NAME = 256  # a longer GPU name is no product's: normalize_name does not strip it (quadratic)
_PAREN_TAIL = re.compile(r"\s*\([^()]*\)\s*$")
_VENDOR_PREFIX = re.compile(r"^(?:amd|ati|nvidia|nvidia corporation)\s+")


def normalize_name(name: str) -> str:
    """Lower case, trademark signs and a trailing driver note dropped, vendor prefix dropped:
    `AMD Radeon(TM) AI PRO R9700 (RADV GFX1201)` -> `radeon ai pro r9700`."""
    if len(name) > _MAX_NAME:  # no product's name: only lower-cased (linear, whatever a record holds)
        return " ".join(name.lower().split())
    s = name.replace("™", "").replace("®", "").replace("(TM)", "").replace("(tm)", "").replace("(R)", "")
    while _PAREN_TAIL.search(s):
        s = _PAREN_TAIL.sub("", s)
    s = " ".join(s.lower().split())
    return _VENDOR_PREFIX.sub("", s)


def is_generic_name(name: str) -> bool:
    """True for names that do not identify a product (`AMD Radeon Graphics`, empty)."""
    return normalize_name(name) in GENERIC_NAMES


_BY_NAME: dict[str, GpuSpec] = {normalize_name(n): s for s in SPECS for n in (s.product, *s.names)}


def spec_by_name(name: str) -> GpuSpec | None:
    """The product whose name equals `name` after normalize_name; None when unknown or generic."""
    return _BY_NAME.get(normalize_name(name or ""))


def _hex(v: str | int | None, width: int) -> str:
    if v is None or v == "":
        return ""
    try:
        n = int(v, 16) if isinstance(v, str) else int(v)
    except ValueError:
        return ""
    return f"0x{n:0{width}x}"


def spec_by_pci(vendor: str, device: str, revision: str | None = None) -> GpuSpec | None:
    """The product with these PCI ids. AMD needs the revision (several products share a device id);
    without it, or with one the table does not list, None."""
    v, d, r = _hex(vendor, 4), _hex(device, 4), _hex(revision, 2)
    for s in SPECS:
        if s.vendor != v:
            continue
        for dev, rev in s.pci:
            if dev == d and (rev is None or rev == r):
                return s
    return None


def product_name(vendor: str, device: str, revision: str | None = None) -> str:
    """Marketing name by PCI ids (table above), "" when not known."""
    spec = spec_by_pci(vendor, device, revision)
    if spec:
        return spec.product
    return NAMED_ONLY.get((_hex(vendor, 4), _hex(device, 4), _hex(revision, 2)), "")


def split_gpu_info(gpu_info: str) -> list[str]:
    """llama-bench's gpu_info is the descriptions of every GPU device joined with ", " (pinned source:
    tools/llama-bench/llama-bench.cpp get_gpu_info); a description may itself hold ", " inside
    parentheses (`llvmpipe (LLVM 19.1.7, 256 bits)`), so split only outside them."""
    out: list[str] = []
    depth = start = i = 0
    text = gpu_info or ""
    while i < len(text):  # slices, not a text grown a character at a time: linear in a 1 MB gpu_info
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
        elif depth == 0 and text.startswith(", ", i):
            out.append(text[start:i].strip())
            i = start = i + 2
            continue
        i += 1
    if text[start:].strip():
        out.append(text[start:].strip())
    return [d for d in out if d]


def summed(specs: Sequence[GpuSpec]) -> GpuSpec:
    """GPU devices `specs` (one entry a device, of any products; at least one) as one: memory bandwidth,
    dense FP16 matrix rate and compute units summed (the most any split of a model over them reaches
    together: a ceiling), named `2 x AMD Radeon AI PRO R9700` or `AMD Radeon RX 7900 XTX + AMD Radeon AI PRO
    R9700`; one device is its own spec."""
    if len(specs) == 1:
        return specs[0]
    counts = Counter(s.product for s in specs)
    return dataclasses.replace(
        specs[0],
        product=" + ".join(f"{n} x {p}" if n > 1 else p for p, n in counts.items()),
        mem_bw_gbs=sum(s.mem_bw_gbs for s in specs),
        fp16_matrix_tflops=sum(s.fp16_matrix_tflops for s in specs),
        compute_units=sum(s.compute_units for s in specs),
    )
