"""[BenchRecord] --pivot--> tables per axis with flags and a roofline: the layer report, verdict,
plots, compare and reproduce build on (it imports only identity, records, roofline, llamabench).

Pure functions over records (never row indexes). `select_for_report` keeps the newest ok record per
test identity (toolkit.results.identity; plus CPU-fallback failures that carry numbers, flagged, for tests
with no ok record); `axis_table` pivots one axis to rows = test (`pp2048 ub512`, `tg128`,
`c4 in512 out128`, plus every identifying field that varies) and columns = image (`name@short-digest`,
split by system when one digest ran on several), cells = tok/s ± stddev, beside them tokens per joule
where the record's telemetry holds a valid energy (`energy`, `tok/J <image>` columns).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolkit.analysis.flag_help import FLAG_HELP, TELEMETRY_VERDICT_FLAGS
from toolkit.analysis.roofline import Roofline, ceiling, roofline
from toolkit.core import backends
from toolkit.results import identity
from toolkit.results.identity import value
from toolkit.results.index import Head, RecordSelection
from toolkit.results.records import BenchRecord
from toolkit.runtimes.llama_bench.output import cpu_fallback_of, effective_ubatch
from toolkit.runtimes.vllm.output import attention_backend_name

__all__ = [
    "AXES",
    "Energy",
    "FLAG_HELP",
    "sided_telemetry_flags",
    "TELEMETRY_VERDICT_FLAGS",
    "ReportOptions",
    "Row",
    "TITLES",
    "Table",
    "accounting",
    "attention_used",
    "axis_table",
    "axis_tables",
    "column_attention",
    "column_labels",
    "column_systems",
    "concurrency",
    "energy",
    "fmt_tok_per_j",
    "id_value",
    "image_label",
    "is_cpu_fallback",
    "is_software_gpu",
    "record_flags",
    "rel_stddev",
    "row_label",
    "served_label",
    "sample_stats",
    "select_for_report",
    "select_latest",
    "select_with_accounting",
    "split_columns",
    "stored_flags",
    "tables",
    "telemetry_flags",
    "threads",
    "ub_applies",
    "ub_clamped",
    "varying_columns",
    "warmup_outlier",
    "value",
]

AXES = ("prefill", "decode", "mixed", "served")
TITLES = {
    "prefill": "Prefill (pp), tokens/s",
    "decode": "Decode (tg), tokens/s",
    "mixed": "Prefill + decode (pp+tg), tokens/s",
    "served": "Served throughput by concurrency (vLLM bench serve; `offline`: vllm bench throughput), output tokens/s",
}


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
    mark = "import:" if r.image.digest.startswith("import:") else ""
    return f"{r.image.name}@{mark}{r.image.short}"


def attention_used(r: BenchRecord) -> str | None:
    """The attention backend a vLLM or SGLang run used, as read from its own log: the record's
    `attention_backend` (stored by both runners), else its `engine.log_notes.attention_backend` (vLLM
    records stored before that field), in one spelling per backend (vllm.output.attention_backend_name:
    `Triton Attention` and `AttentionBackendEnum.TRITON_ATTN` are both TRITON_ATTN). None: not read
    (llama-bench, imports, a log that names none)."""
    used = (r.model_extra or {}).get("attention_backend")
    if used is None:
        notes = (r.engine or {}).get("log_notes")
        used = notes.get("attention_backend") if isinstance(notes, dict) else None
    return attention_backend_name(used)


def column_attention(records: Iterable[BenchRecord]) -> str | None:
    """The attention backend(s) the records of one column used (attention_used), `/`-joined when they
    differ; None when none was read. What labels a vLLM / SGLang column: `vllm@ab12 (attention=TRITON_ATTN)`."""
    used = sorted({a for r in records if (a := attention_used(r))})
    return "/".join(used) or None


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def rel_stddev(r: BenchRecord) -> float | None:
    v = value(r)
    return r.stddev_ts / v if r.stddev_ts is not None and v else None


def noise_band(rsd_a: float, rsd_b: float) -> float:
    """The share of a value two measurements' noise can explain: twice their combined relative
    standard deviation, 2 * hypot(rsd_a, rsd_b) (about a 95 % band for independent normal errors).
    The one rule of the verdict's margins and compare's regressions."""
    return 2 * math.hypot(rsd_a, rsd_b)


def threads(r: BenchRecord) -> int | None:
    t = r.raw.get("n_threads")
    return int(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def concurrency(r: BenchRecord) -> int | None:
    c = r.engine.get("concurrency")
    return int(c) if isinstance(c, (int, float)) else None


def sample_stats(r: BenchRecord) -> dict[str, float] | None:
    """median, min and max of the per-repetition tok/s samples (None with fewer than 2 samples)."""
    xs = [x for x in r.samples_ts if math.isfinite(x)]
    if len(xs) < 2:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def warmup_outlier(r: BenchRecord) -> bool:
    """First sample > 10 % off the median of the others and outside their range by more than their
    spread (>= 3 samples): a warm-up effect (the H200 pp512 case: 8,999 vs 12,840/12,851 t/s)."""
    xs = r.samples_ts
    if len(xs) < 3:
        return False
    first, rest = xs[0], xs[1:]
    med = statistics.median(rest)
    spread = max(rest) - min(rest)
    dist = min(abs(first - max(rest)), abs(first - min(rest))) if not min(rest) <= first <= max(rest) else 0.0
    return med > 0 and abs(first - med) > 0.10 * med and dist > spread


def stored_flags(r: BenchRecord) -> list[str]:
    """Flags a runner stored with the record (`flags`: a list of names; anything else is ignored)."""
    stored = (r.model_extra or {}).get("flags")
    return [f for f in stored if isinstance(f, str) and f] if isinstance(stored, list) else []


def telemetry_flags(r: BenchRecord) -> list[str]:
    """The stored flags of TELEMETRY_VERDICT_FLAGS (`gpu-shared`, `throttled:sw-power-cap`, ...), in
    stored order: what made the system's state during the test not the card's alone."""
    return [f for f in dict.fromkeys(stored_flags(r)) if f.split(":", 1)[0] in TELEMETRY_VERDICT_FLAGS]


def sided_telemetry_flags(a: BenchRecord, b: BenchRecord | None) -> list[str]:
    """The telemetry flags of two sides' cells (telemetry_flags), as `A:host-busy`, `B:gpu-shared`
    (b None: a side not measured): what compare and reproduce hold a cell on."""
    return [f"A:{f}" for f in telemetry_flags(a)] + (
        [f"B:{f}" for f in telemetry_flags(b)] if b is not None else []
    )


@dataclass(frozen=True)
class Energy:
    """A record's valid energy over its test window (toolkit.analysis.telemetry.window_summary):
    `tokens` (n_prompt + n_gen) x repetitions, `joules` of all its GPUs together, `source` how it was
    measured (`counter`, `integrated-average-power`, or both joined by `+` across GPUs)."""

    tok_per_j: float
    joules: float
    tokens: float
    source: str

    @property
    def j_per_token(self) -> float:
        return 1.0 / self.tok_per_j


def energy(r: BenchRecord) -> Energy | None:
    """The record's energy when its telemetry says it is valid (every GPU's energy valid, a positive
    finite number of joules and of tokens) and it is the benchmark's; None otherwise: no telemetry
    (schema 1, imports, CPU images), invalid (its `energy-invalid:<reason>` flag says why), or a GPU
    shared with another process (`gpu-shared`: the board's energy counts that process's work too; on
    the H200 case 7.6-9.4 tok/J beside another tenant vs 30.7-43.7 alone). Never a number from an
    invalid window: tok/J is tokens / joules of the window, as window_summary computed it."""
    t = r.telemetry
    if not isinstance(t, dict) or t.get("energy_valid") is not True or "gpu-shared" in stored_flags(r):
        return None
    joules, tokens = _float(t.get("energy_j")), _float(t.get("tokens"))
    if joules is None or tokens is None or joules <= 0 or tokens <= 0:
        return None
    gpus = t.get("gpus")
    gpus = gpus if isinstance(gpus, dict) else {}
    sources = sorted(
        {str(g["energy_source"]) for g in gpus.values() if isinstance(g, dict) and g.get("energy_source")}
    )
    return Energy(tokens / joules, joules, tokens, "+".join(sources) or "?")


def fmt_tok_per_j(x: float | None) -> str:
    """Tokens per joule, three significant figures (36.4, 0.921), whole numbers from 100 on."""
    if x is None:
        return ""
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def is_cpu_fallback(r: BenchRecord) -> bool:
    """A GPU image's record that ran on the CPU: failed as such, or the one CPU-fallback rule
    (core.backends.cpu_fallback_reason, the rule `toolkit bench` applies to each row) says so."""
    if r.status != "ok" and "cpu fallback" in (r.error or "").lower():
        return True
    return r.method == "llama-bench" and cpu_fallback_of(r.image.backend, r.raw, r.backends) is not None


def is_software_gpu(r: BenchRecord) -> bool:
    return backends.BACKENDS.get(
        r.image.backend, backends.BACKENDS["cpu"]
    ).gpu and backends.is_software_device(r.gpu_info)


def _order(r: BenchRecord) -> tuple:
    return (r.image.name, r.axis, r.n_prompt, r.n_gen, r.n_ubatch or 0)


def select_latest(records: Iterable[BenchRecord], *, include_failed: bool = False) -> list[BenchRecord]:
    """Newest record per test identity (identity.TestKey); ok records only unless include_failed."""
    return sorted(identity.newest_per_test(records, include_failed=include_failed).used, key=_order)


def select_for_report(records: Iterable[BenchRecord]) -> list[BenchRecord]:
    """Newest ok record per test identity, plus CPU-fallback failures with numbers where no ok record
    exists (flagged in the tables)."""
    return select_with_accounting(records)[0]


def select_with_accounting(records: Iterable[BenchRecord]) -> tuple[list[BenchRecord], identity.Selection]:
    """(records a report shows, the accounting: read / used / superseded / failed)."""
    records = list(records)
    sel = identity.newest_per_test(records)
    have = {identity.test_key(r) for r in sel.used}
    fallback = [r for r in records if r.status != "ok" and is_cpu_fallback(r) and value(r) is not None]
    extra = [r for r in select_latest(fallback, include_failed=True) if identity.test_key(r) not in have]
    sel.used = sorted(sel.used, key=_order) + extra
    return sel.used, sel


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


def record_flags(r: BenchRecord, opts: ReportOptions, roof: Roofline | None = None) -> list[str]:
    """Flags of one record, in FLAG_HELP order (ub-no-effect needs neighbours: see axis_table)."""
    out = []
    if ub_clamped(r) is not None:
        out.append("ub-clamped")
    if is_cpu_fallback(r):
        out.append("cpu-fallback")
    if is_software_gpu(r):
        out.append("software-gpu")
    rsd = rel_stddev(r)
    if rsd is not None and rsd > opts.noisy:
        out.append("noisy")
    if warmup_outlier(r):
        out.append("warmup-outlier")
    if "stddev_ts" in ((r.model_extra or {}).get("repaired") or []):
        out.append("stddev-recomputed")
    if (r.model_extra or {}).get("experimental"):
        out.append("experimental")
    if (r.model.model_extra or {}).get("kind") == "synthetic-twin":
        out.append("synthetic-twin")
    ceil = ceiling(r) if roof is None or roof.gpu_count > 1 or roof.metric != "bandwidth" else roof
    if ceil is not None and ceil.metric == "bandwidth" and ceil.fraction > 1.0:
        out.append("bw-above-peak")  # above what all its GPUs together could read: impossible
    elif roof is not None and roof.metric == "bandwidth" and roof.fraction < opts.bw_floor:
        out.append("bw-below-floor")
    if (r.model_extra or {}).get("concurrent"):
        out.append("concurrent")
    if getattr(r, "clock_skew", None):
        out.append("clock-skew")
    if identity.is_tune_trial(r):
        out.append("tune-trial")
    for f in stored_flags(r):  # flags a runner stored with the record (telemetry: gpu-shared, ...)
        if f not in out:
            out.append(f)
    return out


def id_value(r: BenchRecord, name: str) -> Any:
    """The value of an identifying column: `model` (name, short sha256 when two files share a name)
    or a test field (identity.test_fields), as a table shows it (flash_attn -1: `auto`)."""
    if name == "model":
        sha = identity.known_sha(r)
        twin_of = (r.model.model_extra or {}).get("twin_of") or {}
        twin = (
            f" [twin of {twin_of.get('repo', '?')}@{str(twin_of.get('revision') or '?')[:8]}]"
            if twin_of
            else ""
        )
        return r.model.name + (f" ({sha[:8]})" if sha else "") + twin
    v = identity.test_fields(r).get(name)
    return "auto" if name == "flash_attn" and v == -1 else v  # llama-bench's -fa -1 (newer builds: auto)


def varying_columns(records: list[BenchRecord], *, label: Iterable[str] = identity.LABEL_FIELDS) -> list[str]:
    """Identifying columns of a set: `model` when several models, then every test field that takes
    several values (identity.distinguishing) except those the row label already shows."""
    recs = list(records)
    cols = (
        ["model"] if len({(identity.model_fingerprint(r), identity.known_sha(r)) for r in recs}) > 1 else []
    )
    dist = identity.distinguishing(recs)
    return cols + [k for k in sorted(dist) if k not in set(label)]


def column_labels(records: list[BenchRecord]) -> dict[int, str]:
    """Column of each record (by id): `name@digest12`, plus the system fields that split one image's
    records when the same digest ran on several systems (two GPUs, two hosts): `cpu@ab12 [gpu_info=...]`."""
    systems: dict[str, set] = {}
    keys = {id(r): identity.test_key(r) for r in records}
    for r in records:
        systems.setdefault(image_label(r), set()).add(keys[id(r)].system)
    out = {}
    for r in records:
        sy = systems[image_label(r)]
        label = image_label(r)
        if len(sy) > 1:
            varying = sorted({k for s in sy for k, _ in s if len({dict(x).get(k) for x in sy}) > 1})
            mine = dict(keys[id(r)].system)
            label += " [" + ", ".join(f"{k}={mine.get(k)}" for k in varying) + "]"
        out[id(r)] = label
    return out


def _system_words(sy: dict[str, Any], image_backend: str) -> dict[str, str]:
    """A column's system fields as a header reads them: backend (llama-bench's `backends`, else the
    image's: vLLM and SGLang imports write none), GPU, llama.cpp build, CPU, host."""
    commit, number = sy.get("build_commit"), sy.get("build_number")
    build = " ".join(x for x in (str(commit or ""), f"({number})" if number not in (None, "") else "") if x)
    return {
        "backends": str(
            sy.get("backends") or backends.llama_name(image_backend) or f"backend {image_backend}"
        ),
        "gpu_info": ("GPU " + str(sy["gpu_info"])) if sy.get("gpu_info") else "no GPU named",
        "build_commit": "build " + (build or "?"),
        "cpu_info": "CPU " + str(sy.get("cpu_info") or "?"),
        "host": "host " + str(sy.get("host") or "?"),
    }


def engine_words(r: BenchRecord) -> str:
    """The container engine a record ran under, as a header reads it: "Docker 26.1.5", "Podman 4.3.1
    rootless"; "no engine" for an import or a bare-metal `toolkit measure` (no host.docker)."""
    d = (r.host or {}).get("docker") if isinstance(r.host, dict) else None
    if not isinstance(d, dict) or not d.get("engine"):
        return "no engine"
    name = str(d["engine"]).capitalize()
    version = str(d.get("server_version") or "").split("+")[0]
    return " ".join(x for x in (name, version, "rootless" if d.get("rootless") else "") if x)


def column_systems(records: list[BenchRecord], cols: dict[int, str]) -> dict[str, str]:
    """What each image column ran on, where the columns differ: backend, GPU, llama.cpp build (commit
    and number), CPU, host, container engine (Docker / Podman, version, rootless) — each part whose value is not the same in every column, whole (never
    cut), so two columns never read alike: {column: "CUDA, GPU NVIDIA H200, build 0c1e570 (7001)"}."""
    per_col: dict[str, dict[str, str]] = {}
    for r in records:
        if cols[id(r)] not in per_col:
            words = _system_words(dict(identity.test_key(r).system), r.image.backend)
            per_col[cols[id(r)]] = {**words, "engine": engine_words(r)}
    if len(per_col) < 2:
        return {}
    varying = [k for k in next(iter(per_col.values())) if len({w[k] for w in per_col.values()}) > 1]
    out = {}
    for col, words in per_col.items():
        said = [words[k] for k in varying if f"{k}=" not in col]  # not already in the label
        if said:
            out[col] = ", ".join(said)
    return out


def split_columns(
    records: list[BenchRecord], cols: dict[int, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Varying identifying columns split in two: those fixed per image column go into its header
    (`cpu@ab12 (n_threads=1)`, so rows still line images up side by side), the rest stay row columns."""
    cols = cols if cols is not None else column_labels(records)
    per_image: dict[str, list[str]] = {}
    rows = []
    for name in varying_columns(records):
        vals: dict[str, set] = {}
        for r in records:
            vals.setdefault(cols[id(r)], set()).add(id_value(r, name))
        if all(len(v) == 1 for v in vals.values()) and len(vals) > 1:
            for img, v in vals.items():
                if (x := next(iter(v))) is not None:
                    per_image.setdefault(img, []).append(f"{name}={x}")
        else:
            rows.append(name)
    return {img: ", ".join(v) for img, v in per_image.items()}, rows


@dataclass
class Row:
    """One table row: the test label, its identifying values, and one record per image column."""

    test: str
    ids: dict[str, str]
    order: tuple
    cells: dict[str, BenchRecord] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(default_factory=dict)  # image column -> flags
    roof: dict[str, Roofline] = field(default_factory=dict)  # image column -> roofline

    def row_flags(self) -> list[str]:
        """Flags for the flags column: a flag on only some images names them; ub-clamped its value."""
        out = []
        for name in dict.fromkeys([*FLAG_HELP, *(f for fl in self.flags.values() for f in fl)]):
            cols = [c for c, fl in self.flags.items() if name in fl]
            if not cols:
                continue
            text = name
            if name == "ub-clamped":
                effs = sorted({e for c in cols if (e := ub_clamped(self.cells[c])) is not None})
                text += f" (effective ub{'/'.join(str(e) for e in effs)})"
            if len(cols) < len(self.cells):
                text += f" [{', '.join(cols)}]"
            out.append(text)
        return out


@dataclass
class Table:
    """A pivoted axis: rows x image columns; `roof_columns` are the images with a known GPU."""

    axis: str
    title: str
    columns: list[str]
    id_columns: list[str]
    rows: list[Row]
    roof_columns: list[str] = field(default_factory=list)
    # image column -> settings fixed for that image, e.g. "threads=1" (shown in its header)
    image_ids: dict[str, str] = field(default_factory=dict)
    # image column -> what it ran on where the columns differ, e.g. "Vulkan, GPU NVIDIA H200"
    image_sys: dict[str, str] = field(default_factory=dict)
    # image columns with a valid energy in some row: a `tok/J <image>` column beside their tok/s
    energy_columns: list[str] = field(default_factory=list)

    def header(self, col: str) -> str:
        said = "; ".join(x for x in (self.image_sys.get(col), self.image_ids.get(col)) if x)
        return f"{col} ({said})" if said else col


def served_label(r: BenchRecord) -> str:
    """A served row: `c4 in512 out128` (vllm bench serve at concurrency 4), or `offline in237 out512`
    (vllm bench throughput: one offline batch, no concurrency)."""
    c = concurrency(r)
    return f"{'offline' if c is None else f'c{c}'} in{r.n_prompt} out{r.n_gen}"


def row_label(r: BenchRecord, *, ub: bool) -> str:
    """`pp2048 ub512`, `tg128`, `pp512+tg128 ub512`, served: served_label."""
    if r.axis == "served":
        return served_label(r)
    return f"{r.test} ub{r.n_ubatch}" if ub and r.n_ubatch else r.test


def _row_order(r: BenchRecord, ids: dict[str, str]) -> tuple:
    """Rows sort by concurrency, depth, prompt, generated tokens, model, n_ubatch, identifying values."""
    return (
        concurrency(r) or 0,
        r.n_depth,
        r.n_prompt,
        r.n_gen,
        r.model.name,
        r.n_ubatch or 0,
        tuple(ids.values()),
    )


def _row_key(
    rows: dict[tuple, Row], r: BenchRecord, col: str, label: str, ids: dict[str, str]
) -> tuple[str, tuple]:
    """(label, key) of the row for `r`: where its cell is taken by a different test, a row of its own
    whose label names what differs."""
    key: tuple = (label, tuple(ids.values()))
    if key in rows and col in rows[key].cells:  # same row and column, yet a different test
        other = identity.test_fields(rows[key].cells[col])
        mine = identity.test_fields(r)
        diff = sorted(k for k in set(other) | set(mine) if other.get(k) != mine.get(k))
        label += " (" + ", ".join(f"{k}={mine.get(k)}" for k in diff) + ")"
        key = (label, tuple(ids.values()), identity.test_key(r).row)
    return label, key


def axis_table(records: list[BenchRecord], axis: str, opts: ReportOptions | None = None) -> Table:
    """Pivot the records of one axis (prefill | decode | mixed | served) into a Table.

    Columns are images (identity column: digest + system), rows are tests (identity row: model +
    every test field that varies in the table). Records given are one per test (select_for_report);
    a second record for an occupied cell gets its own row naming what differs, never dropped.
    """
    opts = opts or ReportOptions()
    rs = [r for r in records if r.axis == axis and value(r) is not None]
    col_of = column_labels(rs)
    per_image, id_cols = split_columns(rs, col_of)
    for col in set(col_of.values()):  # the attention backend each vLLM / SGLang column ran, from its logs
        if att := column_attention(r for r in rs if col_of[id(r)] == col):
            per_image[col] = ", ".join(x for x in (per_image.get(col), f"attention={att}") if x)
    show_ub = axis in ("prefill", "mixed") or len({r.n_ubatch for r in rs} - {None}) > 1
    rows: dict[tuple, Row] = {}
    columns: set[str] = set()
    roof_cols: set[str] = set()
    energy_cols: set[str] = set()
    for r in rs:
        col = col_of[id(r)]
        if energy(r) is not None:
            energy_cols.add(col)
        ids = {c: "" if id_value(r, c) is None else str(id_value(r, c)) for c in id_cols}
        label, key = _row_key(rows, r, col, row_label(r, ub=show_ub), ids)
        row = rows.setdefault(key, Row(label, ids, _row_order(r, ids)))
        row.cells[col] = r
        roof = roofline(r)
        if roof is not None:
            row.roof[col] = roof
            roof_cols.add(col)
        row.flags[col] = record_flags(r, opts, roof)
        columns.add(col)
    _mark_ub_no_effect(list(rows.values()), opts)
    _mark_host_outliers(list(rows.values()))
    ordered = sorted(rows.values(), key=lambda row: row.order)
    return Table(
        axis,
        TITLES[axis],
        sorted(columns),
        id_cols,
        ordered,
        sorted(roof_cols),
        per_image,
        column_systems(rs, col_of),
        sorted(energy_cols),
    )


def _mark_ub_no_effect(rows: list[Row], opts: ReportOptions) -> None:
    """`ub-no-effect` only where measured: in one image column, records that differ only in n_ubatch
    and give equal tok/s within noise (|a - b| <= 3 x sqrt(sd_a^2 + sd_b^2), stddevs known)."""
    groups: dict[tuple, list[tuple[Row, str, BenchRecord]]] = {}
    for row in rows:
        for col, r in row.cells.items():
            if not ub_applies(r):
                continue
            f = {k: v for k, v in identity.test_fields(r).items() if k != "n_ubatch"}
            groups.setdefault((col, identity.model_fingerprint(r), tuple(sorted(f.items()))), []).append(
                (row, col, r)
            )
    for members in groups.values():
        if len({r.n_ubatch for _, _, r in members}) < 2:
            continue
        for row, col, r in members:
            others = [o for _, _, o in members if o is not r]
            if (
                others
                and all(_equal_within_noise(r, o, opts) for o in others)
                and "ub-no-effect" not in row.flags[col]
            ):
                row.flags[col].append("ub-no-effect")


def _mark_host_outliers(rows: list[Row]) -> None:
    """`host-outlier` on a cell whose host (`host.key`, set by campaign jobs) measured the row's test on
    an image digest that 3 or more hosts measured, with a tok/s farther from the other hosts' median
    than 3 x their spread: max(range of their values, root mean square of their stddevs), so identical
    neighbours do not make any difference an outlier. Two hosts never flag (neither is the odd one)."""
    for row in rows:
        by_digest: dict[str, list[tuple[str, BenchRecord]]] = {}
        for col, r in row.cells.items():
            if (r.host or {}).get("key") and value(r) is not None:
                by_digest.setdefault(r.image.digest, []).append((col, r))
        for members in by_digest.values():
            if len({str(r.host["key"]) for _, r in members}) < 3:
                continue
            for col, r in members:
                others = [o for _, o in members if o.host["key"] != r.host["key"]]
                vals = [v for o in others if (v := value(o)) is not None]
                sds = [o.stddev_ts or 0.0 for o in others]
                spread = max(max(vals) - min(vals), math.sqrt(sum(x * x for x in sds) / len(sds)))
                mine = value(r)
                if (
                    mine is not None
                    and abs(mine - statistics.median(vals)) > 3 * spread
                    and "host-outlier" not in row.flags[col]
                ):
                    row.flags[col].append("host-outlier")


def _equal_within_noise(a: BenchRecord, b: BenchRecord, opts: ReportOptions) -> bool:
    """Equal within noise, and the noise small enough to say so (both relative stddevs <= opts.noisy)."""
    va, vb = value(a), value(b)
    if va is None or vb is None or a.stddev_ts is None or b.stddev_ts is None:
        return False
    if max(a.stddev_ts / va, b.stddev_ts / vb) > opts.noisy:
        return False
    return abs(va / vb - 1) <= noise_band(a.stddev_ts / va, b.stddev_ts / vb)


def tables(records: list[BenchRecord], opts: ReportOptions | None = None) -> list[Table]:
    return axis_tables(select_for_report(records), opts)


def axis_tables(chosen: list[BenchRecord], opts: ReportOptions | None = None) -> list[Table]:
    """The tables of the axes that have rows, over records already chosen (select_for_report)."""
    return [t for t in (axis_table(chosen, a, opts) for a in AXES) if t.rows]


def accounting(records: list[BenchRecord], refused: int = 0) -> str:
    """One line: how many records were read, used, superseded, failed (and refused by the reader)."""
    _, sel = select_with_accounting(records)
    if isinstance(
        records, RecordSelection
    ):  # resultindex.select(): the counts of the whole set it stands for
        sel.read, sel.superseded, sel.failed = records.read, records.superseded, records.failed
    text = sel.summary()
    return text + (f", {refused} unreadable or invalid (see warnings)" if refused else "")
