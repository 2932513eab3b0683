"""vLLM's own knowledge, pure (no container, no engine): the argument lists of `vllm bench latency`,
`vllm serve` and `vllm bench serve` for the pinned settings (the contract test feeds them to the pinned
release's own parser), which commands one (image, model) needs and the cases they measure, the
settings a recorded run used, and the parsers of what vLLM writes (its result JSON, tolerant of
neighbouring releases; its log's attention backend and platform; known upstream bugs a log names).
The runner (toolkit/bench/runners/vllm.py) keeps the container side, as sglang.py does beside
runtimes/sglang/args.py; what one of its containers gave is held here (LatencyResult, Served,
outcome_error). The correctness canary's script and parser are runtimes/vllm/canary.py.

One method per axis, stored in every record's `method` (README: "vLLM methods"):

    vllm-bench-latency-prefill  pp L: `vllm bench latency --input-len L --output-len 1 --batch-size 1`;
                                tok/s = L / avg_latency.
    vllm-bench-latency-decode   tg N: latency at --output-len N+1 minus at --output-len 1 (batch 1, the
                                smallest prompt length of the matrix, so that run is shared with pp);
                                tok/s = N / difference. Failed (never a number) when the difference
                                is not above the noise of the two runs: <= NOISE_SIGMAS x the combined
                                stddev of their per-iteration latencies (output.py `decode_noise_error`).
    vllm-bench-serve            one `vllm serve` container; per (L, N, concurrency C) a
                                `vllm bench serve` (random dataset, --ignore-eos, temperature 0) run
                                with `docker exec` in that container; avg_ts = output tok/s. Failed
                                when the tokens generated fall short of requests x output length
                                (output.py `served_shortfall_error`): with --ignore-eos
                                every request must give exactly the length asked for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.core import jsonsafe
from toolkit.engine.api import RunOutcome  # a value type
from toolkit.matrix.api import ImageSpec, LoadedMatrix
from toolkit.runtimes.vllm.output import (
    ATTENTION_DISPLAY_NAMES,
    METHOD_DECODE,
    METHOD_PREFILL,
    METHOD_SERVE,
    Latency,
)
from toolkit.runtimes.vllm.settings import VllmSettings

SERVE_PORT = 8000


# The client reads no network beyond the container's loopback; the model is a local directory.
CONTAINER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}

HEALTH_CHECK = [
    "python3",
    "-c",
    f"import urllib.request as u; u.urlopen('http://127.0.0.1:{SERVE_PORT}/health', timeout=10)",
]
"""The readiness poll the runner execs in the `vllm serve` container."""


PERCENTILES = "50,90,99"


def engine_args(v: VllmSettings) -> list[str]:
    """The pinned engine settings as vLLM flags. Booleans are always explicit (`--no-...`), so a
    changed default in a new release cannot silently change what is measured. `--quantization` only
    when the matrix overrides the checkpoint (checked to match it first); otherwise vLLM reads the
    method from the checkpoint's config.json, as the toolkit does to record it."""
    args = [
        "--max-num-batched-tokens",
        str(v.max_num_batched_tokens),
        "--max-model-len",
        str(v.max_model_len),
        "--gpu-memory-utilization",
        str(v.gpu_memory_utilization),
        "--dtype",
        v.dtype,
    ]
    if v.quantization:
        args += ["--quantization", v.quantization]
    if v.attention_backend:
        args += ["--attention-backend", v.attention_backend]
    args.append("--enforce-eager" if v.enforce_eager else "--no-enforce-eager")
    args.append("--enable-prefix-caching" if v.enable_prefix_caching else "--no-enable-prefix-caching")
    return args + ["--seed", "0"]


def pinned_engine(v: VllmSettings) -> dict[str, Any]:
    """The settings `engine_args` passes, as stored in each record's `engine`. `quantization` here is
    the matrix's override (None: none passed); the run replaces it with the method actually used
    (toolkit/models/checkpoint.py `QuantChoice.as_record`)."""
    return {
        "max_num_batched_tokens": v.max_num_batched_tokens,
        "max_model_len": v.max_model_len,
        "gpu_memory_utilization": v.gpu_memory_utilization,
        "quantization": v.quantization,
        "dtype": v.dtype,
        "enforce_eager": v.enforce_eager,
        "enable_prefix_caching": v.enable_prefix_caching,
        "attention_backend": v.attention_backend,
        "num_iters": v.num_iters,
        "num_iters_warmup": v.num_iters_warmup,
        "num_prompts_per_level": v.num_prompts_per_level,
        "ready_timeout_s": v.ready_timeout_s,
    }


def settings_from_records(records: Sequence[Any], base: dict[str, Any] | None = None) -> VllmSettings:
    """The VllmSettings a vLLM run used, rebuilt from its records (for `toolkit reproduce`).

    records: BenchRecords of one run (toolkit.results.records.BenchRecord, read for its runner, engine,
    axis, raw and status; records of other runners ignored); base: a `vllm:` mapping to start
    from (the run folder's matrix.yaml), overridden by what the records state: every `pinned_engine`
    key, the served concurrency levels, and -- for records written before num_iters was stored --
    the number of per-iteration latencies. `quantization` is the matrix override only (a method read
    from the checkpoint is read again from the same checkpoint). Raises pydantic.ValidationError on
    values VllmSettings refuses."""
    out: dict[str, Any] = dict(base or {})
    vrecs = [r for r in records if r.runner == "vllm" and r.engine]
    fields = set(VllmSettings.model_fields)
    for r in vrecs:
        e = r.engine
        out.update(
            {k: e[k] for k in pinned_engine(VllmSettings()) if k in e and k in fields and k != "quantization"}
        )
        src = e.get("quantization_source")
        if "quantization" in e:  # before quantization_source existed, `quantization` was the override passed
            out["quantization"] = e["quantization"] if src in (None, "matrix") else None
    levels = sorted(
        {int(r.engine["concurrency"]) for r in vrecs if r.axis == "served" and r.engine.get("concurrency")}
    )
    if levels:
        out["concurrency"] = levels
    if "num_iters" not in out:
        iters = {len(r.raw.get("latencies") or []) for r in vrecs if r.axis == "prefill" and r.status == "ok"}
        if len(iters) == 1 and (n := iters.pop()) > 0:
            out["num_iters"] = n
    return VllmSettings(**out)


def latency_args(
    model_dir: str, v: VllmSettings, *, input_len: int, output_len: int, out_json: str
) -> list[str]:
    """`vllm bench latency` at batch 1 for one (input, output) length pair."""
    return [
        "vllm",
        "bench",
        "latency",
        "--model",
        model_dir,
        "--input-len",
        str(input_len),
        "--output-len",
        str(output_len),
        "--batch-size",
        "1",
        "--num-iters",
        str(v.num_iters),
        "--num-iters-warmup",
        str(v.num_iters_warmup),
        "--output-json",
        out_json,
        *engine_args(v),
    ]


def serve_args(model_dir: str, v: VllmSettings) -> list[str]:
    """`vllm serve` on the container's loopback only."""
    return ["vllm", "serve", model_dir, "--host", "127.0.0.1", "--port", str(SERVE_PORT), *engine_args(v)]


def bench_serve_args(
    model_dir: str,
    *,
    input_len: int,
    output_len: int,
    concurrency: int,
    num_prompts: int,
    result_dir: str,
    result_filename: str,
) -> list[str]:
    """`vllm bench serve` against the local server: fixed lengths, all requests at once, greedy; one
    warm-up request per concurrency slot first (not measured), so the first level is not a cold one."""
    return [
        "vllm",
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        f"http://127.0.0.1:{SERVE_PORT}",
        "--model",
        model_dir,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        str(concurrency),
        "--num-warmups",
        str(concurrency),
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--temperature",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        PERCENTILES,
        "--save-result",
        "--result-dir",
        result_dir,
        "--result-filename",
        result_filename,
    ]


@dataclass(frozen=True)
class LatencyRun:
    input_len: int
    output_len: int

    @property
    def filename(self) -> str:
        return f"lat-{self.input_len}-{self.output_len}.json"


@dataclass(frozen=True)
class ServeLevel:
    input_len: int
    output_len: int
    concurrency: int
    num_prompts: int

    @property
    def filename(self) -> str:
        return f"serve-{self.input_len}-{self.output_len}-c{self.concurrency}.json"


@dataclass
class LatencyResult:
    """One `vllm bench latency` container as it ran: its run, command, log file, wall seconds, log notes,
    the parsed latency (None: none), the raw result and the error that fails its records (None: none)."""

    run: LatencyRun
    command: list[str]
    log_file: str
    wall_s: float
    notes: dict[str, Any]
    latency: Latency | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def timing(self) -> dict[str, float]:
        """Wall time of the container; tests_s = the timed iterations; start-up = the rest."""
        lat = self.latency
        measured = (sum(lat.latencies) if lat.latencies else lat.avg) if lat else 0.0
        return {
            "wall_s": round(self.wall_s, 3),
            "tests_s": round(measured, 3),
            "startup_s": round(max(self.wall_s - measured, 0.0), 3),
        }


def outcome_error(out: RunOutcome, timeout: float, what: str) -> str | None:
    """Why container outcome `out` (of `what`, run with `timeout` s) is no result: timed out, killed for
    memory, or its exit code with the end of its output and a known upstream bug it names; None: none."""
    if out.timed_out:
        return f"{what} timed out after {timeout:.0f} s"
    if out.oom_killed:
        return f"{what}: the container was killed for running out of memory"
    if out.exit_code != 0:
        return f"{what} exited {out.exit_code}: {log_tail(out.stderr or out.stdout)}" + known_issue(
            out.stdout + "\n" + out.stderr
        )
    return None


def log_tail(text: str, n: int = 3) -> str:
    """The last `n` lines of `text` that are not progress bars, joined, at most 300 characters."""
    lines = [ln for ln in text.splitlines() if ln.strip() and "it/s]" not in ln and "s/it]" not in ln]
    return " | ".join(lines[-n:])[:300]


ServedLevel = tuple[ServeLevel, list[str], RunOutcome | None, float]
"""One served level as it ran: the level, its `vllm bench serve` argv, its exec outcome, seconds."""


@dataclass
class Served:
    """What the `vllm serve` container gives every level's record: its command, its log file, seconds
    to ready (None: never ready), its log's notes, the error that fails every level (None: none), and
    the client's timeout."""

    command: list[str]
    log_file: str
    startup: float | None
    notes: dict[str, Any]
    error: str | None
    timeout: float


def decode_input_len(lm: LoadedMatrix) -> int:
    """The prompt length of decode runs: the smallest pp length (its output-1 run is then shared)."""
    return min(p for p in lm.m.bench.n_prompt if p > 0) if any(p > 0 for p in lm.m.bench.n_prompt) else 128


def latency_plan(lm: LoadedMatrix) -> list[LatencyRun]:
    """Distinct `vllm bench latency` runs: (L, 1) per pp length, (Ld, N+1) per tg length."""
    d = decode_input_len(lm)
    runs = [LatencyRun(p, 1) for p in lm.m.bench.n_prompt if p > 0]
    n_gen = [n for n in lm.m.bench.n_gen if n > 0]
    if n_gen:
        runs.append(LatencyRun(d, 1))
        runs += [LatencyRun(d, n + 1) for n in n_gen]
    return list(dict.fromkeys(runs))


def serve_plan(lm: LoadedMatrix) -> list[ServeLevel]:
    """One level per (L, N, C); at least C prompts so concurrency C is actually reached."""
    v = lm.m.settings("vllm")
    return [
        ServeLevel(p, n, c, max(v.num_prompts_per_level, c))
        for p in lm.m.bench.n_prompt
        if p > 0
        for n in lm.m.bench.n_gen
        if n > 0
        for c in v.concurrency
    ]


def read_result(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(JSON object, None) or (None, why it is not a result): missing, empty, not a JSON object."""
    if not path.is_file():
        return None, f"no result file {path.name} was written"
    text = path.read_text(errors="replace").strip()
    if not text:
        return None, f"result file {path.name} is empty"
    try:
        data = jsonsafe.parse(text)
    except jsonsafe.JsonProblem as err:
        # --append-result style files hold one object per line: the last one is this run
        try:
            data = jsonsafe.parse(text.splitlines()[-1])
        except jsonsafe.JsonProblem:
            return None, f"result file {path.name} is {err}"
    if not isinstance(data, dict) or not data:
        return None, f"result file {path.name} holds no result object"
    return data, None


_LOG_PREFIX = re.compile(r"^.*?\[[\w./-]+:\d+\]\s*")


# Attention backend as different releases and platforms log it: "Using Triton Attention backend."
# (ROCm), "Using FLASH_ATTN attention backend out of potential backends: [...]" (CUDA), "Using HND KV
# cache layout for CPU_ATTN backend." (CPU), "Using AttentionBackendEnum.TRITON_ATTN backend."
_ATTN = (
    re.compile(
        r"Using (" + "|".join(map(re.escape, ATTENTION_DISPLAY_NAMES)) + r") backend\."
    ),  # 0.16.0 ROCm
    re.compile(r"Using (?:AttentionBackendEnum\.)?(\w+) attention backend"),
    re.compile(r"Using ([\w ]{1,80}? [Aa]ttention) backend"),
    re.compile(r"KV cache layout for (\w+) backend"),
    re.compile(r"Using (?:AttentionBackendEnum\.)?(\w*(?:ATTN|ATTENTION|SDPA|FLASHINFER|MLA)\w*) backend"),
)


def log_notes(text: str) -> dict[str, Any]:
    """Log lines that explain a number: default MoE config, chunked-prefill budget, attention and
    MoE backends, platform / device, KV cache size, the quantization method the engine used (its
    "Initializing a V1 LLM engine (vX) with config: ... quantization=M, ..." line; None when that line
    says None or is absent). Absent ones are None."""
    notes: dict[str, Any] = {
        "moe_default_config": None,
        "chunked_prefill_max_num_batched_tokens": None,
        "attention_backend": None,
        "moe_backend": None,
        "platform": None,
        "device": None,
        "kv_cache_tokens": None,
        "quantization": None,
    }
    for raw_line in text.splitlines():
        line = _LOG_PREFIX.sub("", raw_line.strip(), count=1)
        if "Using default MoE config" in line:
            notes["moe_default_config"] = notes["moe_default_config"] or line[:400]
        elif m := re.search(r"Chunked prefill is enabled with max_num_batched_tokens=(\d{1,18})\b", line):
            notes["chunked_prefill_max_num_batched_tokens"] = int(m.group(1))
        elif m := re.search(r"Using (.{1,200}?) MoE backend", line):
            notes["moe_backend"] = notes["moe_backend"] or m.group(1)
        elif (
            notes["attention_backend"] is None
            and "vit" not in line.lower()
            and (m := next((m for rx in _ATTN if (m := rx.search(line))), None))
        ):
            notes["attention_backend"] = m.group(1).strip()
        elif m := re.search(r"Automatically detected platform (\w+)", line):
            notes["platform"] = m.group(1)
        elif "Unspecified platform detected, switching to CPU" in line:
            notes["platform"] = notes["platform"] or "cpu (unspecified)"
        elif m := re.search(r"KV cache size: ([\d,]{1,32}) tokens", line):
            notes["kv_cache_tokens"] = int(m.group(1).replace(",", ""))
        if m := re.search(r"\bdevice_config=(\w+)", line):
            notes["device"] = m.group(1)
        if (at := line.find("with config: ")) >= 0 and (
            m := re.search(r"\bquantization=([\w.-]+)", line[at:])
        ):  # the engine's config line
            notes["quantization"] = None if m.group(1) == "None" else m.group(1)
    return notes


def fallback_error(spec: ImageSpec, notes: dict[str, Any]) -> str | None:
    """A GPU image whose vLLM picked the CPU (or no) platform is not a GPU result. (On ROCm the
    torch device is `cuda`, so the device is checked for `cpu`, the platform for the backend.)"""
    plat, device = notes.get("platform"), notes.get("device")
    if spec.backend == "cpu":
        return None
    if plat and not str(plat).startswith(spec.backend):
        return f"CPU fallback: vLLM detected platform {plat!r}, not {spec.backend}"
    if device == "cpu":
        return f"CPU fallback: vLLM ran on device_config=cpu in a {spec.backend} image"
    return None


def cases(lm: LoadedMatrix) -> list[dict[str, Any]]:
    """One case per record a run writes: pp L and tg N (`vllm.num_iters` timed iterations each), then
    one per served level (L, N, concurrency C; one run of `num_prompts` requests)."""
    v = lm.m.settings("vllm")
    out: list[dict[str, Any]] = [
        {"method": METHOD_PREFILL, "n_prompt": p, "n_gen": 0, "repetitions": v.num_iters}
        for p in lm.m.bench.n_prompt
        if p > 0
    ]
    out += [
        {"method": METHOD_DECODE, "n_prompt": 0, "n_gen": n, "repetitions": v.num_iters}
        for n in lm.m.bench.n_gen
        if n > 0
    ]
    out += [
        {
            "method": METHOD_SERVE,
            "n_prompt": lv.input_len,
            "n_gen": lv.output_len,
            "concurrency": lv.concurrency,
            "repetitions": 1,
        }
        for lv in serve_plan(lm)
    ]
    return out


def case_key(method: str, n_prompt: int, n_gen: int, concurrency: Any) -> tuple[str, int, int, int | None]:
    return (method, n_prompt, n_gen, int(concurrency) if concurrency else None)


# vllm-project/vllm#40081 and what a user can do about it (the issue thread and its fix's pull request,
# vllm#41585: amdsmi needs /sys/bus/pci/drivers/amdgpu, hwmon and DRM sysfs nodes, which an unprivileged
# container lacks although /dev/kfd and /dev/dri work; the reporter's patches are linked from the issue).
VLLM_40081 = (
    "vllm-project/vllm#40081: vLLM detects ROCm through amdsmi alone (vllm/platforms/__init__.py "
    "rocm_platform_plugin), and amdsmi cannot read the GPU's sysfs nodes (/sys/bus/pci/drivers/amdgpu, "
    "hwmon, DRM) inside an unprivileged container although /dev/kfd and /dev/dri work; not fixed in vLLM "
    "0.16.0 or 0.28.0. What to do: build the image from a vLLM carrying the hipGetDeviceCount fallback of "
    "vllm-project/vllm#41585 (open pull request) or the reporter's patches linked from the issue, and check "
    "what amdsmi says in the container (this probe's amdsmi_error / amdsmi_processors)"
)

# A failure whose log names a known upstream bug says so. vllm/config/device.py:57 (0.16.0, 0.28.0)
# raises "Failed to infer device type" when no platform plugin matched; on ROCm in an unprivileged
# container that is vllm-project/vllm#40081 (rocm_platform_plugin in vllm/platforms/__init__.py asks
# amdsmi only, which cannot read sysfs there; open, unfixed in both pinned releases; vllm#41585 proposes
# a hipGetDeviceCount fallback). The GPU-path probe (bench/runners/platform_probe.py) catches it before
# any test runs.
_KNOWN_ISSUES = (("Failed to infer device type", f" ({VLLM_40081})"),)


def known_issue(log: str) -> str:
    """The note a failure gets when its log matches a known upstream bug ("" otherwise)."""
    return next((note for needle, note in _KNOWN_ISSUES if needle in log), "")
