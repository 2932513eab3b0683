"""One record's facts, computed once per report: BenchRecord --Facts.of--> Facts, the frozen object the
tables, verdict, provenance, plots and compare read (test key, tok/s, relative stddev, sample stats, the 95 %
confidence interval over process repeats, energy, CPU fallback, clamped micro-batch, warm-up outlier, stored
and telemetry flags, roofline, flags, held flags, when it was measured, the GPUs it used), and the per-record
rules they are computed by (also importable from toolkit.analysis.tables).
"""

from __future__ import annotations

import functools
import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from toolkit.analysis.flag_help import ABOVE_PEAK_FLAGS, HELD_FLAGS, RPC_FLAG, TELEMETRY_VERDICT_FLAGS
from toolkit.analysis.roofline import GpuUse, Roofline, assess, ceiling, model_bytes
from toolkit.core import backends, stats
from toolkit.core.stats import finite_number
from toolkit.results import identity
from toolkit.results.flag_claims import concurrent_problem, without_unsupported
from toolkit.results.identity import shown_flags, value
from toolkit.results.index import Head
from toolkit.results.records import IMPORTED, BenchRecord, imported
from toolkit.results.telemetry_check import energy_rule
from toolkit.results.telemetry_flags import UNSUPPORTED
from toolkit.runtimes.llama_bench.check import cpu_fallback_of, effective_ubatch, parse_test_time, quantity
from toolkit.runtimes.vllm import output as vllm_output


@dataclass(frozen=True)
class ReportOptions:
    """Thresholds as fractions: noisy = relative stddev, bw_floor = share of peak bandwidth,
    min_margin = the smallest margin the verdict calls a win."""

    noisy: float = 0.05
    bw_floor: float = 0.05
    min_margin: float = 0.03


def image_label(r: BenchRecord | Head) -> str:
    """Column label of an image: `name@abcdef012345`; `name@import:abcdef012345` for a set of
    imported results (`toolkit import`: no container image), so an import labelled `cpu` never reads
    like the `cpu` image measured here (and the label is a digest prefix `compare` takes)."""
    mark = IMPORTED if imported(r.image.digest) else ""
    return f"{r.image.name}@{mark}{r.image.short}"


def concurrency(r: BenchRecord) -> int | None:
    c = r.engine.get("concurrency")
    return int(c) if isinstance(c, (int, float)) else None


def row_label(r: BenchRecord, *, ub: bool) -> str:
    """`pp2048 ub512`, `tg128`, `pp512+tg128 ub512`; a served row `c4 in512 out128` (vllm bench serve at
    concurrency 4), `10qps in512 out128` (a serve run without a concurrency cap, at the request rate
    it sent: vLLM's own name for it, `openai-10.0qps-...json`; `infqps`: all requests at once), or
    `offline in237 out512` (vllm bench throughput: one offline batch, no server, no concurrency)."""
    if r.axis == "served":
        c = concurrency(r)
        return f"{_served_prefix(r) if c is None else f'c{c}'} in{r.n_prompt} out{r.n_gen}"
    return f"{r.test} ub{r.n_ubatch}" if ub and r.n_ubatch else r.test


def _served_prefix(r: BenchRecord) -> str:
    """A served row's label without a concurrency: `offline` for an offline batch (vllm bench
    throughput), else (a serve run) its request rate, `Nqps` (`infqps`; `serve` when it has none)."""
    if r.method.endswith("-throughput"):
        return "offline"
    rate = r.engine.get("request_rate")
    if isinstance(rate, str) and rate.lower() in ("inf", "infinity"):
        return "infqps"
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and math.isfinite(rate) and rate > 0:
        return f"{rate:g}qps"
    return "serve"


def known_stddev(r: BenchRecord) -> float | None:
    """A record's stddev_ts where it says a spread, tok/s: None where it states none, or a 0 beside fewer
    than 2 samples (a csv row of a one-repetition run, an old llama-bench csv without samples: it writes
    0 where it measured no spread): every format shows no `±` then, never `± 0.00`."""
    sd = r.stddev_ts
    return None if sd is None or (sd == 0 and len(r.samples_ts) < 2) else sd


def rel_stddev(r: BenchRecord) -> float | None:
    v = value(r)
    return r.stddev_ts / v if r.stddev_ts is not None and v else None


def noise_rsd(f: Facts) -> float | None:
    """The relative spread the `noisy` flag is judged by: the stated stddev over the cell's value (Facts.rsd),
    else the sample stddev of its samples_ts (>= 2 finite ones) over that value; None when neither is known.
    """
    if f.rsd is not None or not f.value:
        return f.rsd
    xs = [x for x in f.record.samples_ts if math.isfinite(x)]
    return statistics.stdev(xs) / f.value if len(xs) > 1 else None


def sample_stats(r: BenchRecord) -> dict[str, float] | None:
    """median, min and max of the per-repetition tok/s samples (None with fewer than 2 samples)."""
    xs = [x for x in r.samples_ts if math.isfinite(x)]
    if len(xs) < 2:
        return None
    s, n = sorted(xs), len(xs)  # statistics.median's own steps, without its call per record
    mid = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return {"median": mid, "min": min(xs), "max": max(xs)}


def _first_is_outlier(xs: list[float]) -> bool:
    """One process's samples (tok/s): its first > 10 % below the median of the others and below their
    range by more than their spread (>= 3 samples). Only slower: a first sample faster than the rest is
    no warm-up (a clock that boosts, then settles), so it is not called one (breaker 36)."""
    if len(xs) < 3:
        return False
    first, rest = xs[0], xs[1:]
    med = statistics.median(rest)
    low = min(rest)
    return med > 0 and first < 0.90 * med and low - first > max(rest) - low


def process_samples(r: BenchRecord) -> list[list[float]]:
    """`r`'s samples per process: a record combining several (`between_runs.counts`, identity.combine_runs:
    each process's samples in the order of samples_ts) split by its counts, else [samples_ts]."""
    xs = list(r.samples_ts)
    runs = (r.model_extra or {}).get("between_runs")
    counts = runs.get("counts") if isinstance(runs, dict) else None
    ok = isinstance(counts, list) and all(type(c) is int and c > 0 for c in counts)
    if not ok or sum(counts) != len(xs):  # type: ignore[arg-type]
        return [xs]
    out, at = [], 0
    for c in counts:  # type: ignore[union-attr]
        out.append(xs[at : at + c])
        at += c
    return out


SMOKE_MODEL_BYTES = 64 * 2**20  # a model file under 64 MiB is a stand-in (tiny-qwen3moe is ~1.6 MB)


def model_scale(r: BenchRecord) -> int | None:
    """What stand_in judges a record's model by: its size in bytes (model_bytes), else, where no size is
    recorded (a boolean, a text or nothing: no size), its parameter count (llama-bench's model_n_params;
    a weight takes 1/8 byte or more in any GGUF, so a count under a size bound is under it in bytes
    too); None where neither is recorded (a hand-written import row: the csv's model_stand_in is empty)."""
    scale = model_bytes(r) or quantity((r.raw or {}).get("model_n_params"))
    return scale if scale and scale > 0 else None


def stand_in(r: BenchRecord) -> bool | None:
    """`r` measured a tiny stand-in model (model_scale under SMOKE_MODEL_BYTES): its tok/s show the path
    works, not how fast a real model runs. False where the model is full size (its weights may still be
    random: a record does not say), None where its scale is not known (model_scale)."""
    return None if (scale := model_scale(r)) is None else scale < SMOKE_MODEL_BYTES


def measured_times(r: BenchRecord) -> tuple[tuple[str, str] | None, tuple[str, ...]]:
    """(from, to): when `r` was measured, "YYYY-MM-DD HH:MM:SS" UTC (None: not recorded), and the import
    times that stand for none (an imported record without a test_time: its `created` is when it was
    imported). A time is the benchmark's own test_time (any UTC offset converted: parse_test_time, the one
    reading of it), else the `created` the toolkit wrote when it measured, and where both are its own that
    `created` too (llama-bench stamps a test's start, the toolkit its row's end). A record combining
    several processes (`bench.runs: N`, identity.combine_runs) adds its oldest process's
    (`between_runs.first`); a time that reads as no time is none."""
    extra = r.model_extra or {}
    imported = bool(extra.get("imported"))
    out: list[tuple[str, bool]] = []
    _add_dates(out, (r.raw or {}).get("test_time"), r.created, imported)
    runs = extra.get("between_runs")
    if isinstance(runs, dict) and isinstance(first := runs.get("first"), dict) and first:
        _add_dates(out, first.get("test_time"), first.get("created"), imported)
    said = sorted(t for t, measured in out if measured)
    return ((said[0], said[-1]) if said else None), tuple(t for t, measured in out if not measured)


def _add_dates(out: list[tuple[str, bool]], test_time: Any, created: Any, imported: bool) -> None:
    """measured_times of one process, as (UTC text, measured) in `out`: its test_time (else its
    created), and its created where that is the row's later end; `created` read once (parse_test_time)."""
    t = parse_test_time(test_time)
    measured = t is not None or not imported
    ends = bool(test_time) and not imported  # the toolkit's own created: the row's end, written then
    c = parse_test_time(created) if t is None or ends else None
    if t := t or c:
        out.append((_utc_text(t), measured))
    if ends and t and c and c > t:  # a created before its test_time is another clock's: not an end
        out.append((_utc_text(c), True))


def _utc_text(t: datetime) -> str:
    """An aware time as "YYYY-MM-DD HH:MM:SS" UTC: isoformat's first 19 characters (~4x faster than
    strftime), strftime for a year before 1000 (which it writes without leading zeros)."""
    u = t.astimezone(timezone.utc)
    return u.isoformat(" ")[:19] if u.year >= 1000 else u.strftime("%Y-%m-%d %H:%M:%S")


def local_date(r: BenchRecord) -> str | None:
    """When an imported vLLM result says it was measured, "YYYY-MM-DD HH:MM:SS" in the benchmark host's
    local time (its `date`, vllm output.local_date: no zone, so never shown as UTC nor used to order
    records); None for any other record."""
    if not r.method.startswith("vllm-") or not (r.model_extra or {}).get("imported"):
        return None
    t = vllm_output.local_date((r.raw or {}).get("date"))
    return t.strftime("%Y-%m-%d %H:%M:%S") if t else None


def warmup_outlier(r: BenchRecord) -> bool:
    """A process's first sample > 10 % below the median of its others and below their range by more
    than their spread (>= 3 samples; a faster first sample is none): a warm-up effect. Judged per
    process (process_samples): pooled, the other processes' warm-ups widen the range and hide every one
    of them."""
    return any(_first_is_outlier(xs) for xs in process_samples(r))


def telemetry_flags(r: BenchRecord, stored: list[str] | None = None) -> list[str]:
    """The flags of TELEMETRY_VERDICT_FLAGS (`gpu-shared`, `throttled:sw-power-cap`, ...) of identity.shown_flags
    (held to the record's telemetry; `stored`: those, where the caller has them), in stored order: what
    made the system's state during the test not the card's alone."""
    flags = shown_flags(r) if stored is None else stored
    return [f for f in dict.fromkeys(flags) if f.split(":", 1)[0] in TELEMETRY_VERDICT_FLAGS]


MIN_PROCESSES = 3
"""Process repeats (`bench.runs`, or repeated rows of one import) a cell needs for a confidence interval:
with two, t(0.975, 1 df) = 12.7 makes an interval too wide to decide anything (issue 34 item 5)."""


@dataclass(frozen=True)
class Interval:
    """A cell's two-sided 95 % confidence interval of its mean tok/s: [low, high] = mean ± t(0.975,
    n - 1) x stdev(process means) / sqrt(n) (stats.mean_half_width95) over the `processes` (n >= 3)
    process means identity.combine_runs keeps in `between_runs.means` (the cell's value is their mean)."""

    low: float
    high: float
    processes: int

    @property
    def half(self) -> float:
        """Half-width, tok/s."""
        return (self.high - self.low) / 2

    @property
    def bounds(self) -> bool:
        """Whether the interval bounds anything: its low end above 0 tok/s. One reaching 0 or below
        (three processes whose means spread ~40 % or more) says only that the spread is huge: the rules
        that compare cells judge such a pair by its stddevs (tables.interval_rels)."""
        return self.low > 0

    def rel(self) -> float:
        """Half-width as a fraction of the mean (the interval's middle); inf for a mean <= 0."""
        mid = (self.low + self.high) / 2
        return self.half / mid if mid > 0 else math.inf


def process_means(r: BenchRecord) -> list[float]:
    """The means of the processes combined into `r` (identity.combine_runs' `between_runs.means`, in
    tok/s; finite numbers only); [] for a record of one process."""
    runs = (r.model_extra or {}).get("between_runs")
    means = runs.get("means") if isinstance(runs, dict) else None
    return [f for m in means if (f := finite_number(m)) is not None] if isinstance(means, list) else []


def interval(r: BenchRecord) -> Interval | None:
    """The 95 % interval of `r`'s tok/s over its process means, centred on its value; None (unknown)
    with fewer than MIN_PROCESSES process means or no value."""
    means, v = process_means(r), value(r)
    if len(means) < MIN_PROCESSES or v is None:
        return None
    half = stats.mean_half_width95(means)
    return Interval(v - half, v + half, len(means)) if math.isfinite(half) else None


@dataclass(frozen=True)
class Energy:
    """A record's valid energy over its test window (toolkit.bench.observe.window_summary):
    `tokens` (n_prompt + n_gen) x repetitions, `joules` of all its GPUs together, `source` how it was
    measured (`counter`, `integrated-average-power`, or both joined by `+` across GPUs)."""

    tok_per_j: float
    joules: float
    tokens: float
    source: str


def energy(r: BenchRecord) -> Energy | None:
    """The record's energy when its telemetry says it is valid (every GPU's energy valid, a positive finite
    number of joules and of tokens) and it is the benchmark's; None otherwise: no telemetry (schema 1,
    imports, CPU images), invalid (its `energy-invalid:<reason>` flag says why), or a GPU shared with another
    process (`gpu-shared`: the board's energy counts that process's work too). tok/J is tokens / joules of the
    window, as window_summary computed it."""
    t = r.telemetry
    if not isinstance(t, dict) or t.get("energy_valid") is not True or "gpu-shared" in shown_flags(r):
        return None
    if energy_rule_broken(r):
        return None
    joules, tokens = finite_number(t.get("energy_j")), finite_number(t.get("tokens"))
    if joules is None or tokens is None or joules <= 0 or tokens <= 0 or not math.isfinite(tokens / joules):
        return None
    gpus = t.get("gpus")
    gpus = gpus if isinstance(gpus, dict) else {}
    sources = sorted(
        {str(g["energy_source"]) for g in gpus.values() if isinstance(g, dict) and g.get("energy_source")}
    )
    return Energy(tokens / joules, joules, tokens, "+".join(sources) or "?")


def energy_rule_broken(r: BenchRecord) -> str | None:
    """`energy-invalid:<reason>` where `r`'s telemetry claims a valid energy the toolkit's own energy
    rules would not give its window (telemetry_check.energy_rule: a window holding untimed work, a
    counter over too few of its steps, ...; a record stored before the rule), else None."""
    t = r.telemetry
    if not isinstance(t, dict):
        return None
    rule = energy_rule(
        t, {"samples_ns": (r.raw or {}).get("samples_ns")} if r.method == "llama-bench" else {}
    )
    return f"energy-invalid:{rule[0]}" if rule else None


def is_cpu_fallback(r: BenchRecord) -> bool:
    """A GPU image's record that ran on the CPU: failed as such, or the one CPU-fallback rule
    (core.backends.cpu_fallback_reason, the rule `toolkit bench` applies to each row) says so."""
    if r.status != "ok" and "cpu fallback" in (r.error or "").lower():
        return True
    return r.method == "llama-bench" and cpu_fallback_of(r.image.backend, r.raw, r.backends) is not None


def rpc_split(r: BenchRecord) -> bool:
    """The record's llama-bench `backends` names RPC (`ROCm,RPC`, `CUDA,RPC`, `RPC`; an old vintage's
    `rpc` boolean: check.backends_of): the build has ggml's RPC backend, named in every row whether or
    not --rpc was given (r25-cuda-rpc-ngl0-pr12922.md: `CUDA,RPC` of a command without --rpc), so part
    of the model may have run on another host's devices, which no field of the row names."""
    return "rpc" in backends.llama_names(r.backends)


def ran_on(r: BenchRecord) -> str:
    """What a record's number was measured on: `cpu` for a CPU image or a GPU image's CPU fallback
    (is_cpu_fallback), else `gpu` (flag_help.held_words names that device)."""
    return "cpu" if r.image.backend == "cpu" or is_cpu_fallback(r) else "gpu"


def is_software_gpu(r: BenchRecord) -> bool:
    return backends.BACKENDS.get(
        r.image.backend, backends.BACKENDS["cpu"]
    ).gpu and backends.is_software_device(r.gpu_info)


def ub_applies(r: BenchRecord) -> bool:
    """The micro-batch is a knob of this test: it has a prompt to process (pp, pp+tg). A decode test
    (tg) generates one token per step whatever n_ubatch says, so neither `ub-clamped` nor
    `ub-no-effect` is said of it."""
    return r.n_prompt > 0 and r.axis != "served"


def ub_clamped(r: BenchRecord) -> int | None:
    """The effective micro-batch when it is smaller than the asked one (llama.cpp clamps), else None;
    None for tests the micro-batch does not apply to (ub_applies)."""
    if not ub_applies(r):
        return None
    eff = effective_ubatch(r.n_ubatch, r.n_batch, r.n_prompt, r.n_gen, r.n_depth)
    return eff if r.n_ubatch and eff is not None and eff < r.n_ubatch else None


@dataclass(frozen=True)
class Facts:
    """A record and its facts under one report's options (Facts.of): `key` its identity.TestKey,
    `value` tok/s (None: not finite), `rsd` stddev / value, `stats` sample median/min/max (sample_stats),
    `ci` the 95 % interval over process means (interval; None: unknown, fewer than 3 processes),
    `processes` how many process means the value is the mean of (1: a single process),
    `energy` (None: not valid), `cpu_fallback`, `ub_clamped` (the effective micro-batch when clamped),
    `warmup_outlier`, `stored_flags` / `telemetry_flags` (as stored, held to its telemetry: identity.shown_flags), `roof` (roofline, None: no known
    GPU), `flags` (record_flags against that roofline; neighbours' flags are the table's), `held_flags`
    (those of `flags` in HELD_FLAGS: telemetry and above-peak flags, what holds the cell out of the
    row's best, the verdict and compare's counts); and what the
    sections say of it: `image` (image_label), `test` (row_label with the micro-batch), `concurrency`,
    `ub_effective` (effective_ubatch), `model_known` (identity.model_known), `no_roof` (why a GPU
    record has no roofline; None: it has one, or it ran on a CPU or a software GPU), `model_bytes`
    (model_bytes: the model's size in bytes, None: not recorded), `stand_in` (stand_in: a tiny stand-in
    model; None: its size not recorded), `stddev` (known_stddev: tok/s, None where the record says no
    spread), `span` and `undated` (measured_times: when it was measured, UTC; its import times that
    stand for none), `local_date` (local_date: an imported vLLM result's host-local time), `gpu_count`
    (the GPUs its run used, roofline.GpuUse.count: 0 on a CPU or software device, None: unknown)."""

    record: BenchRecord
    key: identity.TestKey
    value: float | None
    rsd: float | None
    stats: dict[str, float] | None
    energy: Energy | None
    cpu_fallback: bool
    ub_clamped: int | None
    warmup_outlier: bool
    stored_flags: tuple[str, ...]
    telemetry_flags: tuple[str, ...]
    roof: Roofline | None
    flags: tuple[str, ...] = ()
    ci: Interval | None = None
    processes: int = 1
    image: str = ""
    test: str = ""
    concurrency: int | None = None
    ub_effective: int | None = None
    model_known: bool = True
    no_roof: str | None = None
    held_flags: tuple[str, ...] = ()
    model_bytes: int | None = None
    stand_in: bool | None = None
    stddev: float | None = None
    span: tuple[str, str] | None = None
    undated: tuple[str, ...] = ()
    local_date: str | None = None
    gpu_count: int | None = None

    @classmethod
    def of(cls, r: BenchRecord, opts: ReportOptions | None = None) -> Facts:
        """The facts of `r` (opts: the thresholds its flags are said under, default ReportOptions())."""
        a = assess(r)
        roof = a.roofline
        gpu = r.image.backend != "cpu" and not is_software_gpu(r)
        stored = shown_flags(r)  # held to its telemetry once
        span, undated = measured_times(r)
        f = cls(
            r,
            identity.test_key(r),
            value(r),
            rel_stddev(r),
            sample_stats(r),
            energy(r),
            is_cpu_fallback(r),
            ub_clamped(r),
            warmup_outlier(r),
            tuple(stored),
            tuple(telemetry_flags(r, stored)),
            roof,
            ci=interval(r),
            processes=max(1, len(process_means(r))),
            image=image_label(r),
            test=row_label(r, ub=True),
            concurrency=concurrency(r),
            ub_effective=effective_ubatch(r.n_ubatch, r.n_batch, r.n_prompt, r.n_gen, r.n_depth),
            model_known=identity.model_known(r),
            no_roof=(a.note or None) if roof is None and gpu else None,
            model_bytes=model_bytes(r),
            stand_in=stand_in(r),
            stddev=known_stddev(r),
            span=span,
            undated=undated,
            local_date=local_date(r),
            gpu_count=a.use.count,
        )
        flags = _flags(f, opts or ReportOptions(), roof, a.use)  # a.use: its GPUs found once, not twice
        object.__setattr__(f, "flags", tuple(flags))  # frozen once set
        object.__setattr__(f, "held_flags", held_flags(flags))
        return f


def facts_of(items: Iterable[BenchRecord | Facts], opts: ReportOptions | None = None) -> list[Facts]:
    """The Facts of each item, in order: a Facts as it is, a record's built under `opts` (Facts.of)."""
    return [x if isinstance(x, Facts) else Facts.of(x, opts) for x in items]


def record_flags(r: BenchRecord, opts: ReportOptions, roof: Roofline | None = None) -> list[str]:
    """Flags of one record, in FLAG_HELP order (ub-no-effect needs neighbours: see axis_table);
    `roof`: its roofline where a table knows it (bw-below-floor is said against it)."""
    return _flags(Facts.of(r, opts), opts, roof)


def held_flags(flags: Iterable[str]) -> tuple[str, ...]:
    """The flags of `flags` that hold a cell (HELD_FLAGS, by name before any `:reason`), in order."""
    return tuple(x for x in flags if x.split(":", 1)[0] in HELD_FLAGS)


def _flags(f: Facts, opts: ReportOptions, roof: Roofline | None, use: GpuUse | None = None) -> list[str]:
    """record_flags of the Facts `f`; `use`: its record's roofline.gpu_use where known."""
    r, extra = f.record, f.record.model_extra or {}
    out = []
    if f.ub_clamped is not None:
        out.append("ub-clamped")
    if f.cpu_fallback:
        out.append("cpu-fallback")
    if rpc_split(r):
        out.append(RPC_FLAG)
    if is_software_gpu(r):
        out.append("software-gpu")
    if (rsd := noise_rsd(f)) is not None and rsd > opts.noisy:
        out.append("noisy")
    if f.warmup_outlier:
        out.append("warmup-outlier")
    if "stddev_ts" in (extra.get("repaired") or []):
        out.append("stddev-recomputed")
    if extra.get("experimental"):
        out.append("experimental")
    if (r.model.model_extra or {}).get("kind") == "synthetic-twin":
        out.append("synthetic-twin")
    ceil = ceiling(r, use) if roof is None or roof.gpu_count > 1 else roof
    if ceil is not None and ceil.above_peak:  # one rule for both metrics: bandwidth and compute
        out.append(ABOVE_PEAK_FLAGS[ceil.metric])  # above what all its GPUs together could do: impossible
    elif roof is not None and roof.metric == "bandwidth" and roof.fraction < opts.bw_floor:
        out.append("bw-below-floor")
    if extra.get("concurrent"):  # held to the runs it names: an unbacked one holds nothing
        out.append(f"{UNSUPPORTED}:concurrent" if concurrent_problem(r) else "concurrent")
    if getattr(r, "clock_skew", None):
        out.append("clock-skew")
    if identity.is_tune_trial(r):
        out.append("tune-trial")
    out += [  # a runner's (telemetry: gpu-shared, ...); one it claimed that this raised stands as raised
        s for s in without_unsupported(list(dict.fromkeys(f.stored_flags)), out) if s not in out
    ]
    # why its tok/J is not shown: energy() refused it for a rule (a record with an energy kept none)
    if f.energy is None and (broken := energy_rule_broken(r)) and broken not in out:
        out.append(broken)
    return out


_SIZE_TOKEN = re.compile(r"^(\d+(\.\d+)?|\?)[BM](\.A\d+(\.\d+)?B)?$|^\d+x\d+(\.\d+)?B$", re.IGNORECASE)


def model_family(r: BenchRecord) -> str:
    """The base model a record measured, independent of file format and quantization."""
    family = (r.model.model_extra or {}).get("family")
    if family:
        return str(family)
    return _family_of(str(r.raw.get("model_type") or ""), r.model.name)


def model_words(r: BenchRecord) -> str:
    """model_family as a message names it: the record's model name where llama.cpp printed no size
    (`qwen3moe ?B`, which names no model: nc50b S6); the family stays the key records are grouped by."""
    family = model_family(r)
    return r.model.name if "?" in family else family


@functools.lru_cache(maxsize=4096)
def _family_of(model_type: str, name: str) -> str:
    """model_family of a record without a stored family: the words of llama-bench's `model_type` up
    to its size (`qwen3moe 30B.A3B`), else the model's name. Kept per (type, name): a report asks it
    twice per record, and 10,000 records repeat a few."""
    words = model_type.split()
    for i, w in enumerate(words):
        if _SIZE_TOKEN.match(w):
            return " ".join(words[: i + 1])
    return name
