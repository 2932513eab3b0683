"""Fake host trees and a fake NVML for the telemetry tests (toolkit.host.telemetry).

AMD values come from real published captures (shared/reference/gpu-telemetry.md cites them):
- IDLE_RX9070: `amd-smi metric` gpu_metrics dump of an RX 9070 (gfx1201, v1.3, 120 bytes) at idle,
  ollama/ollama#9633 (AdamBullen, 2025-03-19): temperatures 41/43/62/38/43/46 °C, activity 3/4/0 %,
  socket power 20 W, energy_accumulator 0, system_clock_counter 115756787021127 ns, average gfxclk
  41 MHz, socclk N/A, uclk 157 MHz, vclk0/dclk0 24, vclk1/dclk1 0, current gfxclk 41, socclk 417,
  uclk 96, vclk/dclk 25, throttle_status 0, fan 0 rpm, PCIe x16 at 16.0 GT/s. Fields the excerpt did
  not show (activity accumulators, HBM temperatures, firmware timestamp, voltages) are left
  unfilled (all-ones), as the driver leaves fields it does not fill.
- R9700 under load at a 225 W cap, ROCm/rocm-systems#11781 (latent-sre, 2026-09-17):
  throttle_status 0x04002 (TEMP_HOTSPOT + PPT0), power 133-225 W, hotspot 63-75 °C; at idle
  0x00002, 1 W, 37 °C. indep_throttle_status is derived from the kernel's smu_v14_0_2_throttler_map
  (PPT0 -> bit 0, TEMP_HOTSPOT -> bit 36).
- A clock stuck at idle under load: 41 MHz and 50 W while busy, ROCm#6289 (reference §7).
- R9700 boost clock 2920 MHz and default board power 300 W: AMD product page (toolkit/core/gpuspecs.py
  cites it for the clock); the 300 W default cap is that page's total board power, not a capture.
hwmon units per docs.kernel.org/gpu/amdgpu/thermal.html: power µW, frequency Hz, temperature m°C.
pp_power_profile_mode text follows the kernel's format strings (smu_v14_0_2_get_power_profile_mode:
"%2d %14s%s:" per profile); its coefficients are zeros, not a capture.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from toolkit.host.telemetry.amd import GPU_METRICS_V1_3

U16_NA, U32_NA, U64_NA = 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF

IDLE_RX9070: dict[str, Any] = dict(
    temps=(41, 43, 62, 38, 43, 46),
    activity=(3, 4, 0),
    socket_power=20,
    energy_accumulator=0,
    system_clock_counter=115756787021127,
    average_clocks=(41, U16_NA, 157, 24, 24, 0, 0),
    current_clocks=(41, 417, 96, 25, 25, 25, 25),
    throttle_status=0,
    fan=0,
    pcie=(16, 160),
    indep_throttle_status=0,
)

# ROCm/rocm-systems#11781: load at a 225 W cap (0x04002 = TEMP_HOTSPOT bit 1 + PPT0 bit 14)
LOADED_R9700_CAPPED: dict[str, Any] = dict(
    IDLE_RX9070,
    temps=(63, 75, 62, 38, 43, 46),
    activity=(100, 4, 0),
    socket_power=225,
    average_clocks=(2920, U16_NA, 157, 24, 24, 0, 0),
    current_clocks=(2920, 417, 96, 25, 25, 25, 25),
    throttle_status=0x04002,
    indep_throttle_status=(1 << 0) | (1 << 36),
)
# ROCm/rocm-systems#11781: idle R9700, only the stuck TEMP_HOTSPOT bit
IDLE_R9700: dict[str, Any] = dict(
    IDLE_RX9070, temps=(37, 37, 62, 38, 43, 46), socket_power=1, throttle_status=0x00002
)


def gpu_metrics_v13(m: dict[str, Any]) -> bytes:
    """A 120-byte gpu_metrics v1.3 blob (struct gpu_metrics_v1_3, kgd_pp_interface.h)."""
    values = [
        GPU_METRICS_V1_3.size,
        1,
        3,
        *m["temps"],
        *m["activity"],
        m["socket_power"],
        m["energy_accumulator"],
        m["system_clock_counter"],
        *m["average_clocks"],
        *m["current_clocks"],
        m["throttle_status"],
        m["fan"],
        *m["pcie"],
        U16_NA,  # padding
        U32_NA,  # gfx_activity_acc
        U32_NA,  # mem_activity_acc
        U16_NA,
        U16_NA,
        U16_NA,
        U16_NA,  # temperature_hbm[4]
        U64_NA,  # firmware_timestamp
        U16_NA,
        U16_NA,
        U16_NA,  # voltage_soc / gfx / mem: not in the excerpt
        U16_NA,  # padding1
        m["indep_throttle_status"],
    ]
    blob = GPU_METRICS_V1_3.pack(*values)
    assert len(blob) == 120
    return blob


PROFILE_NAMES = [
    "BOOTUP_DEFAULT",
    "3D_FULL_SCREEN",
    "POWER_SAVING",
    "VIDEO",
    "VR",
    "COMPUTE",
    "CUSTOM",
    "WINDOW_3D",
]


def power_profile_text(selected: int = 0) -> str:
    lines = [
        "PROFILE_INDEX(NAME) CLOCK_TYPE(NAME) FPS MinActiveFreqType MinActiveFreq BoosterFreqType "
        "BoosterFreq PD_Data_limit_c PD_Data_error_coeff PD_Data_error_rate_coeff"
    ]
    for i, name in enumerate(PROFILE_NAMES):
        # the kernel's own sysfs_emit_at format strings, kept verbatim
        lines.append("%2d %14s%s:" % (i, name, "*" if i == selected else " "))  # noqa: UP031
        for k, clk in enumerate(("GFXCLK", "FCLK")):
            lines.append(
                "%19s %d(%13s) %7d %7d %7d %7d %7d %7d %7d %7d" % (" ", k, clk, 0, 0, 0, 0, 0, 0, 0, 0)  # noqa: UP031
            )
    return "\n".join(lines) + "\n"


def od_text(offset_mv: int) -> str:
    """pp_od_clk_voltage with the sections SMU 14.0.2 prints (§1.2); only the offset matters here."""
    return (
        "OD_SCLK_OFFSET:\n0Mhz\nOD_MCLK:\n0: 97Mhz\n1: 1259MHz\n"
        f"OD_VDDGFX_OFFSET:\n{offset_mv}mV\nOD_RANGE:\nSCLK_OFFSET:    -500Mhz       1000Mhz\n"
    )


@dataclass
class FakeAmdHost:
    """A fake /sys with one R9700-like card (card1, renderD128, PCI 0000:03:00.0) and its KFD node.
    Change values between reads with set_*()."""

    root: Path
    pci: str = "0000:03:00.0"
    gpu_id: int = 50123
    kfd_procs: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def drm(self) -> Path:
        return self.root / "class" / "drm"

    @property
    def device(self) -> Path:
        return self.drm / "card1" / "device"

    @property
    def hwmon(self) -> Path:
        return self.device / "hwmon" / "hwmon3"

    @property
    def kfd(self) -> Path:
        return self.root / "class" / "kfd" / "kfd"

    @property
    def module_params(self) -> Path:
        return self.root / "module" / "amdgpu" / "parameters"

    def build(self) -> FakeAmdHost:
        real = self.root / "devices" / "pci0000:00" / "0000:00:01.1" / self.pci
        (real / "drm" / "renderD128").mkdir(parents=True)
        (real / "drm" / "card1").mkdir(parents=True)
        (self.drm / "card1").mkdir(parents=True)
        os.symlink(real, self.drm / "card1" / "device")
        (self.drm / "card1-DP-1").mkdir()  # a connector: not a card
        w = self.write
        w(self.device / "vendor", "0x1002")
        w(self.device / "device", "0x7551")
        w(self.device / "product_name", "AMD Radeon AI PRO R9700")
        w(self.device / "power" / "runtime_status", "active")
        w(self.hwmon / "name", "amdgpu")
        w(self.hwmon / "power1_label", "PPT")
        w(self.hwmon / "freq1_label", "sclk")
        w(self.hwmon / "freq2_label", "mclk")
        for i, label in enumerate(("edge", "junction", "mem"), 1):
            w(self.hwmon / f"temp{i}_label", label)
        w(self.device / "mem_info_vram_used", str(1 << 30))
        w(self.device / "power_dpm_force_performance_level", "auto")
        w(self.device / "pp_power_profile_mode", power_profile_text(0))
        w(self.module_params / "ppfeaturemask", "0xfff7bfff")  # the default (amdgpu_drv.c, §1.2)
        self.set_caps(cap_w=300, default_w=300)
        self.set_metrics(IDLE_RX9070, sclk_mhz=41, mclk_mhz=96)
        # KFD topology: a CPU node and this GPU (drm_render_minor 128)
        w(self.kfd / "topology" / "nodes" / "0" / "properties", "cpu_cores_count 16\ndrm_render_minor 0\n")
        w(self.kfd / "topology" / "nodes" / "0" / "gpu_id", "0")
        w(
            self.kfd / "topology" / "nodes" / "1" / "properties",
            "cpu_cores_count 0\nsimd_count 128\ngfx_target_version 120001\ndrm_render_minor 128\n",
        )
        w(self.kfd / "topology" / "nodes" / "1" / "gpu_id", str(self.gpu_id))
        (self.kfd / "proc").mkdir(parents=True, exist_ok=True)
        return self

    @staticmethod
    def write(path: Path, text: str | bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text + ("" if text.endswith("\n") else "\n"))

    def set_caps(self, cap_w: float, default_w: float, max_w: float | None = None) -> None:
        self.write(self.hwmon / "power1_cap", str(int(cap_w * 1e6)))
        self.write(self.hwmon / "power1_cap_default", str(int(default_w * 1e6)))
        self.write(self.hwmon / "power1_cap_max", str(int((max_w or default_w) * 1e6)))

    def set_metrics(
        self, m: dict[str, Any], *, sclk_mhz: float, mclk_mhz: float, energy_counts: int | None = None
    ) -> None:
        """hwmon and gpu_metrics from one capture dict (power, temps, busy, throttle)."""
        if energy_counts is not None:
            m = dict(m, energy_accumulator=energy_counts)
        self.write(self.device / "gpu_metrics", gpu_metrics_v13(m))
        self.write(self.hwmon / "power1_average", str(m["socket_power"] * 1_000_000))
        self.write(self.hwmon / "freq1_input", str(int(sclk_mhz * 1e6)))
        self.write(self.hwmon / "freq2_input", str(int(mclk_mhz * 1e6)))
        edge, hotspot, mem = m["temps"][:3]
        self.write(self.hwmon / "temp1_input", str(edge * 1000))
        self.write(self.hwmon / "temp2_input", str(hotspot * 1000))
        self.write(self.hwmon / "temp3_input", str(mem * 1000))
        self.write(self.device / "gpu_busy_percent", str(m["activity"][0]))
        self.write(self.device / "mem_busy_percent", str(m["activity"][1]))

    def add_kfd_proc(
        self, pid: int, *, vram: int = 0, queue_gpu: int | None = None, other_gpu_vram: int = 0
    ) -> None:
        d = self.kfd / "proc" / str(pid)
        d.mkdir(parents=True, exist_ok=True)
        self.write(d / f"vram_{self.gpu_id}", str(vram))
        if other_gpu_vram:
            self.write(d / "vram_7777", str(other_gpu_vram))
        (d / "queues").mkdir(exist_ok=True)
        if queue_gpu is not None:
            self.write(d / "queues" / "0" / "gpuid", str(queue_gpu))


# ---------------------------------------------------------------------------------------------
# NVML


class FakeNVMLError(Exception):
    """Stands in for pynvml.NVMLError (NotSupported and friends)."""


def fake_pynvml(**over: Any) -> SimpleNamespace:
    """A module object with the pynvml calls NvmlGpuSource makes, answering like an H200 under
    load in shared/cases/h200-telemetry (contended run): 672.5 W average, energy counter in mJ,
    SM 1515 MHz, memory 3201 MHz, 55 °C, clock-event reasons 0x4, util 100/60, P0, two compute
    processes (4242 running at 97 % SM in the per-process utilisation samples, 5151 holding memory
    only), enforced and default limit 700 W (values in NVML's units: mW, mJ, MHz). `over` replaces
    any attribute; `calls` records init/shutdown."""
    calls: list[str] = []
    handle = object()

    def nope(*_: Any) -> Any:
        raise FakeNVMLError("NVML_ERROR_NOT_SUPPORTED")

    ns = SimpleNamespace(
        calls=calls,
        NVMLError=FakeNVMLError,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: handle,
        nvmlDeviceGetName=lambda h: "NVIDIA H200",
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId="00000000:19:00.0"),
        nvmlDeviceGetPowerUsage=lambda h: 672_500,
        nvmlDeviceGetTotalEnergyConsumption=lambda h: 31_547_100,
        nvmlDeviceGetClockInfo=lambda h, kind: {1: 1515, 2: 3201}[kind],
        nvmlDeviceGetTemperature=lambda h, sensor: 55,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x4,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=100, memory=60),
        nvmlDeviceGetPerformanceState=lambda h: 0,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=4242, usedGpuMemory=19_000_000_000),
            SimpleNamespace(pid=5151, usedGpuMemory=2_000_000_000),
        ],
        nvmlDeviceGetProcessUtilization=lambda h, since: [
            SimpleNamespace(pid=4242, timeStamp=since + 100_000, smUtil=97, memUtil=40, encUtil=0, decUtil=0)
        ],
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
        nvmlDeviceGetPowerManagementDefaultLimit=lambda h: 700_000,
        not_supported=nope,
    )
    for k, v in over.items():
        setattr(ns, k, v)
    return ns


# ---------------------------------------------------------------------------------------------
# The H200 case as samples

H200 = Path(__file__).parents[1] / "data" / "h200-telemetry"


def h200_samples() -> list[dict[str, Any]]:
    """nvml-50ms.csv as Sampler samples of one NvmlGpuSource ("nvidia:0000:19:00.0"): the same
    fields and units NvmlGpuSource.read() gives. The CSV has process counts, not pids: procs None,
    n_procs set. Power limit 700 W = default (case README)."""
    import csv

    out = []
    with open(H200 / "nvml-50ms.csv") as f:
        for r in csv.DictReader(f):
            out.append(
                {
                    "t": float(r["t_unix"]),
                    "source": "nvidia:0000:19:00.0",
                    "vendor": "nvidia",
                    "power_w": int(r["power_mw"]) / 1e3,
                    "energy_j": int(r["energy_mj"]) / 1e3,
                    "sclk_mhz": int(r["sm_mhz"]),
                    "mclk_mhz": int(r["mem_mhz"]),
                    "temp_gpu_c": int(r["temp_c"]),
                    "throttle_bits": int(r["event_reasons"]),
                    "busy_pct": int(r["util_gpu"]),
                    "mem_busy_pct": int(r["util_mem"]),
                    "pstate": int(r["pstate"]),
                    "procs": None,
                    "n_procs": int(r["n_procs"]),
                    "cap_w": 700.0,
                    "cap_default_w": 700.0,
                }
            )
    return out


# The H200 case's stderr, stamped with arrival times: its llama-bench test windows (the reading the
# case's README describes; `toolkit bench` itself windows tests by its row sink's arrival times).


def timestamped_lines(text: str) -> list[tuple[float, str]]:
    """`<unix seconds> <line>` per line (stderr with arrival times prepended, as in the H200 case)
    -> [(t, line)]. Lines without a leading number are skipped."""
    out: list[tuple[float, str]] = []
    for raw in text.splitlines():
        head, _, rest = raw.partition(" ")
        try:
            out.append((float(head), rest))
        except ValueError:
            continue
    return out


# Counts of at most 9 digits: int() of a longer run of a log's digits is refused (over 4300) or absurd.
_LB_LINE = re.compile(r"llama-bench: benchmark (\d{1,9})/(\d{1,9}): (.*)$")
_LB_FIRST_REP = re.compile(r"^(prompt|gen\w*) run 1/(\d{1,9})(?!\d)")


def llama_bench_windows(
    stderr_lines: Iterable[tuple[float, str]], records: Sequence[dict[str, Any]], *, end_t: float
) -> list[dict[str, Any]]:
    """Per llama-bench test (needs `--progress`), the energy window: from the arrival of the first
    measured repetition's progress line (`llama-bench: benchmark i/N: prompt run 1/R` or
    `generation run 1/R`: the warm-up run is before it) to the arrival of the next test's
    `benchmark i+1/N: starting` line, or `end_t` (wall time the process ended) for the last test.

    `stderr_lines`: (arrival wall time s, line) pairs; `records`: llama-bench JSONL records in output
    order (record k is test k+1). Returns one dict per test seen:
    {"test", "n_tests", "t0", "t1", "duration_s", "repetitions", "n_prompt", "n_gen", "n_depth",
     "tokens", "record_index"} with tokens = (n_prompt + n_gen) × repetitions, i.e. the tokens
    llama-bench's t/s counts (n_prompt or n_gen for pp/tg tests). t0/t1 are None when a line is
    missing (no --progress, a crash). The window also holds what llama-bench does between timed
    repetitions (with n_depth > 0 the context fill of each repetition), and the last test's window
    runs to process exit."""
    first: dict[int, tuple[float, int]] = {}
    starting: dict[int, float] = {}
    n_tests = 0
    for t, line in stderr_lines:
        m = _LB_LINE.search(line)
        if not m:
            continue
        test, n_tests = int(m.group(1)), max(n_tests, int(m.group(2)))
        what = m.group(3).strip()
        if what == "starting":
            starting.setdefault(test, t)
        else:
            rep = _LB_FIRST_REP.match(what)
            if rep and test not in first:
                first[test] = (t, int(rep.group(2)))
    out: list[dict[str, Any]] = []
    for k in range(max(n_tests, len(records))):
        test = k + 1
        rec = records[k] if k < len(records) else {}
        t0, reps = first.get(test, (None, None))
        if reps is None and rec.get("samples_ns"):
            reps = len(rec["samples_ns"])
        t1 = starting.get(test + 1) if test < n_tests else end_t
        n_prompt, n_gen = int(rec.get("n_prompt") or 0), int(rec.get("n_gen") or 0)
        out.append(
            {
                "test": test,
                "n_tests": n_tests,
                "t0": t0,
                "t1": t1,
                "duration_s": (t1 - t0) if t0 is not None and t1 is not None else None,
                "repetitions": reps,
                "n_prompt": n_prompt,
                "n_gen": n_gen,
                "n_depth": int(rec.get("n_depth") or 0),
                "tokens": (n_prompt + n_gen) * reps if reps else None,
                "record_index": k if k < len(records) else None,
            }
        )
    return out


def h200_marks() -> dict[str, float]:
    return {line.split()[1]: float(line.split()[0]) for line in (H200 / "marks.txt").read_text().splitlines()}


def h200_records(run: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (H200 / f"{run}.jsonl").read_text().splitlines() if line.strip()]


H200_MODEL = "qwen3-30b-a3b-q4km-twin"  # the case's model: a full-size random-weight Qwen3-30B-A3B (Q4_K_M)


def h200_digest(image: str) -> str:
    return "sha256:" + (image.encode().hex() * 64)[:64]


def h200_bench_records(run: str, image: str, *, run_id: str | None = None, counter: bool = True) -> list[Any]:
    """The case's llama-bench rows as `toolkit bench` stores them: each row normalised, its test window
    (llama_bench_windows over the stamped stderr: first measured repetition to the next test's start,
    the last to process exit) summarised over the real NVML samples (window_summary) and flagged
    (flags: no pids in the case, NVML process counts), as RunObserver.test does. `image` names the
    column (each run its own image digest, so the two runs can be compared side by side).
    `counter=False`: the samples without NVML's energy counter (a GPU that has none): energy only
    from the integrated averaged power, so windows under 1.5 s get none."""
    from toolkit.bench.observe import window_summary
    from toolkit.results.records import BenchRecord, ImageRef, ModelRef
    from toolkit.results.telemetry_flags import window_flags
    from toolkit.runtimes.llama_bench import check

    samples = h200_samples()
    if not counter:
        samples = [{**x, "energy_j": None} for x in samples]
    rows = h200_records(run)
    mark = run.replace("_", "-")
    lines = timestamped_lines((H200 / f"{run}.stderr").read_text())
    windows = llama_bench_windows(lines, rows, end_t=h200_marks()[f"{mark}-end"])
    run_id = run_id or f"{mark}-run"
    digest = h200_digest(image)
    out = []
    for raw, w in zip(rows, windows, strict=True):
        summary = window_summary(samples, w["t0"], w["t1"], w["tokens"])
        summary["window_from"] = "progress"
        norm = check.normalize(raw)
        fl = window_flags(summary)
        if fl:
            norm = {**norm, "flags": fl}
        out.append(
            BenchRecord(
                run_id=run_id,
                created=raw["test_time"].replace("Z", "+00:00"),
                image=ImageRef(name=image, ref=f"toolkit/{image}:latest", digest=digest, backend="cuda"),
                model=ModelRef(
                    name=H200_MODEL, path="/tmp/w/q30.gguf", sha256="cd" * 32, size_bytes=raw["model_size"]
                ),
                host={"hostname": "h200"},
                log_file=f"/nonexistent/results/{digest[7:19]}/logs/{run_id}-{H200_MODEL}.log",
                telemetry=summary,
                raw=raw,
                **norm,
            )
        )
    return out


def write_h200_trace(results: Path, run: str, image: str, *, run_id: str | None = None) -> Path:
    """The run's stretch of the NVML samples (start mark - 1 s .. end mark + 1 s) as a Sampler trace
    where toolkit bench keeps it: results/<digest12>/telemetry/<run_id>-<model>.jsonl, header first."""
    mark = run.replace("_", "-")
    m = h200_marks()
    t0, t1 = m[f"{mark}-start"] - 1.0, m[f"{mark}-end"] + 1.0
    path = results / h200_digest(image)[7:19] / "telemetry" / f"{run_id or mark + '-run'}-{H200_MODEL}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"telemetry_trace": 1, "rate_hz": 20.0, "sources": ["nvidia:0000:19:00.0"], "started_t": t0}
    body = [json.dumps(s) for s in h200_samples() if t0 <= s["t"] <= t1]
    path.write_text("\n".join([json.dumps(header), *body]) + "\n")
    return path


def pack_check() -> None:
    """The blob layout once more by offsets (§1.3 table): throttle_status at 68, indep at 112."""
    blob = gpu_metrics_v13(LOADED_R9700_CAPPED)
    assert struct.unpack_from("<I", blob, 68)[0] == 0x04002
    assert struct.unpack_from("<Q", blob, 112)[0] == (1 << 0) | (1 << 36)
    assert struct.unpack_from("<H", blob, 22)[0] == 225
    assert struct.unpack_from("<H", blob, 40)[0] == 2920


_SHOWS: dict[str, dict[str, Any]] = {
    "host-busy": {"host": {"steal_pct": 50.0}},
    "gpu-shared": {"gpus": {"gpu0": {"pids": [1, 2], "active_pids": [2]}}},
    "gpu-memory-held": {"gpus": {"gpu0": {"pids": [1, 2], "active_pids": []}}},
    "clock-idle": {"gpus": {"gpu0": {"busy_pct_mean": 90.0, "sclk_mhz_median": 41.0}}},
    "power-not-stock": {"gpus": {"gpu0": {"not_stock": ["power cap 225 W below the default 300 W"]}}},
}


def supporting_block(flags: list[str] | None) -> dict[str, Any] | None:
    """The least stored telemetry block (window_summary's shape) that shows what raised each telemetry
    flag of `flags` (`throttled:<reason>` too), so a reader keeps them (results.telemetry_flags
    checked_flags: a telemetry flag without a block that shows it is `flag-unsupported:`); None when
    `flags` holds none. Its GPU claims a valid energy of its own, so no `energy-invalid` is raised."""
    block: dict[str, Any] = {}
    gpu: dict[str, Any] = {}
    for f in flags or []:
        name, _, reason = f.partition(":")
        part = _SHOWS.get(name, {})
        if name == "throttled":
            part = {"gpus": {"gpu0": {"throttle_share": {reason: 1.0}, "throttle_count": {reason: 4}}}}
            gpu["throttle_samples"] = 4
        for key, value in part.items():
            if key == "gpus":
                gpu.update(value["gpu0"])
            else:
                block.setdefault(key, {}).update(value)
    if gpu:
        block["gpus"] = {"gpu0": {**gpu, "energy_valid": True}}
    return block or None
