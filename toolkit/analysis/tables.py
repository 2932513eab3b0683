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
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from toolkit.analysis import bands
from toolkit.analysis.facts import (
    Facts,
    Interval,
    ReportOptions,
    concurrency,
    energy,
    facts_of,
    image_label,
    is_cpu_fallback,
    record_flags,
    rel_stddev,
    row_label,
    telemetry_flags,
    ub_applies,
)
from toolkit.analysis.flag_help import FLAG_HELP, TELEMETRY_VERDICT_FLAGS
from toolkit.core import backends
from toolkit.results import identity
from toolkit.results.flag_claims import without_unsupported
from toolkit.results.identity import type_words, value
from toolkit.results.index import RecordSelection
from toolkit.results.records import NO_TEST, BenchRecord
from toolkit.runtimes.vllm.output import attention_backend_name

__all__ = [
    "AXES",
    "FLAG_HELP",
    "Facts",
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
    "ci_band",
    "column_attention",
    "column_labels",
    "column_systems",
    "concurrency",
    "energy",
    "fmt_tok_per_j",
    "fold_decode_ub",
    "id_value",
    "interval_rels",
    "image_label",
    "is_cpu_fallback",
    "margin_band",
    "record_flags",
    "row_label",
    "select_for_report",
    "select_latest",
    "select_with_accounting",
    "slowdown_noise",
    "split_columns",
    "tables",
    "telemetry_flags",
    "varying_columns",
    "value",
]

AXES = ("prefill", "decode", "mixed", "served")
TITLES = {
    "prefill": "Prefill (pp), tokens/s",
    "decode": "Decode (tg), tokens/s",
    "mixed": "Prefill + decode (pp+tg), tokens/s",
    "served": (
        "Served throughput by concurrency (vLLM bench serve or SGLang bench_serving; `Nqps`: at a request "
        "rate, no concurrency cap; `offline`: vllm bench throughput), output tokens/s"
    ),
}


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


def noise_band(rsd_a: float, rsd_b: float) -> float:
    """The share of a value two measurements' noise can explain: twice their combined relative
    standard deviation, 2 * hypot(rsd_a, rsd_b) (about a 95 % band for independent normal errors).
    The one rule of the verdict's margins and compare's regressions."""
    return 2 * math.hypot(rsd_a, rsd_b)


def ci_band(rel_hi: float, rel_lo: float) -> float:
    """The smallest margin hi / lo - 1 at which two 95 % intervals of relative half-widths `rel_hi`
    (the faster side's) and `rel_lo` no longer overlap: hi x (1 - rel_hi) > lo x (1 + rel_lo) (inf
    when rel_hi >= 1). What replaces noise_band where both sides carry an interval (issue 34 item 5)."""
    return (1 + rel_lo) / (1 - rel_hi) - 1 if rel_hi < 1 else math.inf


class Spread(Protocol):
    """A cell as the noise rules read it: Facts, or the verdict's Entry."""

    @property
    def ci(self) -> Interval | None: ...

    @property
    def rsd(self) -> float | None: ...


def interval_rels(hi: Spread, lo: Spread) -> tuple[float, float] | None:
    """The relative half-widths (Interval.rel) of two cells' 95 % intervals where the pair is judged by
    them: both carry one that bounds something (Interval.bounds: its low end above 0 tok/s); else None.
    An interval reaching 0 has an infinite ci_band, which made any slowdown or lead noise; such a pair
    is judged by the stddev rule (noise_band), as one without."""
    a, b = hi.ci, lo.ci
    return (a.rel(), b.rel()) if a is not None and b is not None and a.bounds and b.bounds else None


def margin_band(hi: Spread, lo: Spread) -> float:
    """The one noise rule of the verdict's margins, compare's regressions and the tables' best cell,
    as a margin hi / lo - 1 the faster cell `hi` must exceed over `lo`: where both cells carry a 95 %
    interval above 0 (interval_rels) the intervals must not overlap (ci_band), else the noise band of
    their relative stddevs (noise_band; an unknown stddev counts 0)."""
    if (rels := interval_rels(hi, lo)) is not None:
        return ci_band(*rels)
    return noise_band(hi.rsd or 0.0, lo.rsd or 0.0)


def slowdown_noise(band: float) -> float:
    """A margin `band` (hi / lo - 1 >= 0, as margin_band and noise_band give it) said as the slowdown
    1 - lo / hi it allows: band / (1 + band), below 1 for a finite band; 1 for an infinite one (an
    overflowing stddev: any slowdown is within it), never inf / inf = NaN,
    which no comparison holds and so made every slowdown beyond it."""
    return band / (1 + band) if math.isfinite(band) else 1.0


def best_column(row: Row) -> str | None:
    """The image column whose tok/s leads the row beyond the noise (margin_band of it and the next:
    2 x their combined relative stddev, or their 95 % intervals apart where both have one); None with fewer than two numbers to rank, a lead inside the
    noise, or an unknown noise. A held cell (Facts.held_flags: a telemetry or above-peak flag) or a
    CPU-fallback cell is never the best."""
    ranked = sorted(
        (
            (f.value, c)
            for c, f in row.facts.items()
            if f.value is not None and not f.held_flags and not f.cpu_fallback
        ),
        reverse=True,
    )
    if len(ranked) < 2 or ranked[1][0] <= 0:
        return None
    (v1, c1), (v2, c2) = ranked[0], ranked[1]
    if row.facts[c1].rsd is None or row.facts[c2].rsd is None:
        return None
    return c1 if v1 / v2 - 1 > margin_band(row.facts[c1], row.facts[c2]) else None


def sided_telemetry_flags(a: BenchRecord, b: BenchRecord | None) -> list[str]:
    """The telemetry flags of two sides' cells (telemetry_flags), as `A:host-busy`, `B:gpu-shared`
    (b None: a side not measured): what compare and reproduce hold a cell on."""
    return [f"A:{f}" for f in telemetry_flags(a)] + (
        [f"B:{f}" for f in telemetry_flags(b)] if b is not None else []
    )


def fmt_tok_per_j(x: float | None) -> str:
    """Tokens per joule, three significant figures (36.4, 0.921), whole numbers from 100 on."""
    if x is None:
        return ""
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


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


def id_value(r: BenchRecord, name: str) -> Any:
    """The value of an identifying column: `model` (name, `(sha256 <12 hex>)` where the file's is known; the
    path an import's file of another's name and description is told apart by: import_keys.AlikeFiles)
    or a test field (identity.test_fields), as a table shows it (flash_attn -1: `auto`)."""
    if name == "model":
        sha = identity.known_sha(r)
        apart = str((r.model.model_extra or {}).get("file_apart") or "")
        twin_of = (r.model.model_extra or {}).get("twin_of") or {}
        twin = (
            f" [twin of {twin_of.get('repo', '?')}@{str(twin_of.get('revision') or '?')[:8]}]"
            if twin_of
            else ""
        )
        return (apart if "/" in apart else r.model.name) + (f" (sha256 {sha[:12]})" if sha else "") + twin
    return _shown_value(name, identity.test_field(r, name))


def _shown_value(name: str, v: Any) -> Any:
    """A test field's value as a table shows it: llama-bench's -fa -1 is `auto` (newer builds say so)."""
    return "auto" if name == "flash_attn" and v == -1 else v


def varying_columns(records: list[BenchRecord], *, label: Iterable[str] = identity.LABEL_FIELDS) -> list[str]:
    """Identifying columns of a set: `model` when several models, then every test field that takes
    several values (identity.distinguishing) except those the row label already shows."""
    recs = list(records)
    cols = (
        ["model"] if len({(identity.model_fingerprint(r), identity.known_sha(r)) for r in recs}) > 1 else []
    )
    dist = identity.distinguishing(recs)
    return cols + [k for k in sorted(dist) if k not in set(label)]


def knob_settings(fs: list[Facts]) -> dict[int, list[str]]:
    """What tells each record of a set apart beyond its test, by the record's id: its values of the
    identifying columns that vary over the set (varying_columns, less `model`): [`n_threads=4`, ...]."""
    knobs = [c for c in varying_columns([f.record for f in fs]) if c != "model"]
    out = {}
    for f in fs:  # id_value's test fields, read from the Facts' TestKey (sorted pairs: one dict a record)
        test = dict(f.key.test) if knobs else {}
        out[id(f.record)] = [f"{c}={_shown_value(c, test.get(c))}" for c in knobs]
    return out


def column_labels(fs: list[Facts]) -> dict[int, str]:
    """Column of each record (by the record's id) of the Facts `fs`: `name@digest12`, plus the system
    fields that split one image's records when the same digest ran on several systems (two GPUs, two
    hosts): `cpu@ab12 [gpu_info=...]`."""
    systems: dict[str, set] = {}
    for f in fs:
        systems.setdefault(f.image, set()).add(f.key.system)
    out = {}
    for f in fs:
        label, sy = f.image, systems[f.image]
        if len(sy) > 1:
            varying = sorted({k for s in sy for k, _ in s if len({dict(x).get(k) for x in sy}) > 1})
            mine = dict(f.key.system)
            label += " [" + ", ".join(f"{k}={mine.get(k)}" for k in varying) + "]"
        out[id(f.record)] = label
    return out


def _system_words(sy: dict[str, Any], image_backend: str) -> dict[str, str]:
    """A column's system fields as a header reads them: backend (llama-bench's `backends`, else the
    image's: vLLM and SGLang imports write none), GPU, llama.cpp build, CPU, host. A build number of
    0 is llama.cpp's "unknown" (a tree without git history; the toolkit's own builds pass 0): not shown."""
    commit, number = sy.get("build_commit"), sy.get("build_number")
    build = " ".join(
        x for x in (str(commit or ""), f"({number})" if number not in (None, "", 0, "0") else "") if x
    )
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


def system_words(f: Facts) -> dict[str, str]:
    """What a record's column ran on (its Facts' key.system), part by part as a header says it (backends,
    gpu_info, build_commit, cpu_info, host, engine: {"backends": "Vulkan", "gpu_info": "GPU X", ...})."""
    return {**_system_words(dict(f.key.system), f.record.image.backend), "engine": engine_words(f.record)}


def varying_words(per_col: dict[str, dict[str, str]]) -> list[str]:
    """The parts (system_words keys, in their order) whose value is not the same in every column of
    `per_col` ({column: its system_words}); none for fewer than two columns."""
    if len(per_col) < 2:
        return []
    return [k for k in next(iter(per_col.values())) if len({w[k] for w in per_col.values()}) > 1]


def column_systems(fs: list[Facts], cols: dict[int, str]) -> dict[str, str]:
    """What each image column ran on, where the columns differ: backend, GPU, llama.cpp build (commit
    and number), CPU, host, container engine (Docker / Podman, version, rootless) — each part whose value is not the same in every column, whole (never
    cut), so two columns never read alike: {column: "CUDA, GPU NVIDIA H200, build 0c1e570 (7001)"}."""
    per_col: dict[str, dict[str, str]] = {}
    for f in fs:  # `cols` by the record's id (column_labels)
        if cols[id(f.record)] not in per_col:
            per_col[cols[id(f.record)]] = system_words(f)
    varying = varying_words(per_col)
    out = {}
    for col, words in per_col.items():
        said = [words[k] for k in varying if f"{k}=" not in col]  # not already in the label
        if said:
            out[col] = ", ".join(said)
    return out


def split_columns(records: list[BenchRecord], cols: dict[int, str]) -> tuple[dict[str, str], list[str]]:
    """Varying identifying columns split in two: those fixed per image column go into its header
    (`cpu@ab12 (n_threads=1)`, so rows still line images up side by side), the rest stay row columns.
    The model is always a row column: two models are two workloads, never one row whose best is
    ranked across them (an H200's 30B beside a CPU's tiny model made one row with a bold "best")."""
    per_image: dict[str, list[str]] = {}
    rows = []
    for name in varying_columns(records):
        vals: dict[str, set] = {}
        for r in records:
            vals.setdefault(cols[id(r)], set()).add(id_value(r, name))
        if name != "model" and all(len(v) == 1 for v in vals.values()) and len(vals) > 1:
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
    facts: dict[str, Facts] = field(default_factory=dict)  # image column -> its record's facts (roofline...)
    best: str | None = None  # set once the row is whole (finish): the column that leads beyond the noise
    said: list[str] = field(default_factory=list)  # ... and the flags column's entries (row_flags)
    folded: dict[str, list[Facts]] = field(default_factory=dict)
    """Image column -> the Facts of every record its cell stands for, where decode rows of several
    micro-batches were folded into this one (fold_decode_ub; absent: the cell is its one record's)."""

    def finish(self) -> Row:
        """The row once its cells and flags are final: its best column (best_column) and the flags
        column (row_flags) set, for every table text and note to read."""
        self.best, self.said = best_column(self), self.row_flags()
        return self

    def row_flags(self) -> list[str]:
        """Flags for the flags column: a flag on only some images names them; ub-clamped its value."""
        out = []
        held = {c: set(fl) for c, fl in self.flags.items()}  # a stored list of 80,000 flags: no list scans
        for name in dict.fromkeys([*FLAG_HELP, *(f for fl in self.flags.values() for f in fl)]):
            cols = [c for c, fl in held.items() if name in fl]
            if not cols:
                continue
            text = name
            if name == "ub-clamped":
                effs = sorted({e for c in cols if (e := self.facts[c].ub_clamped) is not None})
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
    # the bw-below-floor share its flags were raised by (ReportOptions.bw_floor): its shares are shown
    # apart from it (table_text.roof_pct)
    bw_floor: float = ReportOptions.bw_floor

    def header(self, col: str) -> str:
        said = "; ".join(x for x in (self.image_sys.get(col), self.image_ids.get(col)) if x)
        return f"{col} ({said})" if said else col


def _row_order(r: BenchRecord, ids: dict[str, str]) -> tuple:
    """Rows sort by concurrency, depth, prompt, generated tokens, model, n_ubatch, identifying values."""
    return (
        concurrency(r) or 0,
        r.n_depth,
        r.n_prompt,
        r.n_gen,
        r.model.name,
        r.n_ubatch or 0,
        tuple(_value_order(v) for v in ids.values()),
    )


def _value_order(v: str) -> tuple:
    """An identifying value's place among its column's: numbers by value (n_cpu_moe 4 before 16), then
    words in text order (`layer`, `none`, `row`; n_gpu_layers `all` after the numbers)."""
    try:
        n = float(v)
    except (TypeError, ValueError):
        return (1, 0.0, str(v))
    return (0, n, str(v)) if n == n else (1, 0.0, str(v))  # NaN: a word


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


def axis_table(records: Iterable[BenchRecord | Facts], axis: str, opts: ReportOptions | None = None) -> Table:
    """Pivot the records of one axis (prefill | decode | mixed | served) into a Table.

    Columns are images (identity column: digest + system), rows are tests (identity row: model +
    every test field that varies in the table). Records given are one per test (select_for_report),
    or their Facts (built under `opts`); a second record for an occupied cell gets its own row naming
    what differs, never dropped.
    """
    opts = opts or ReportOptions()
    fs = [f for f in facts_of(records, opts) if f.record.axis == axis and f.value is not None]
    rs = [f.record for f in fs]
    col_of = column_labels(fs)
    per_image, id_cols = split_columns(rs, col_of)
    by_col: dict[str, list[BenchRecord]] = {}
    for r in rs:
        by_col.setdefault(col_of[id(r)], []).append(r)
    for col in set(col_of.values()):  # the attention backend each vLLM / SGLang column ran, from its logs
        if att := column_attention(by_col[col]):
            per_image[col] = ", ".join(x for x in (per_image.get(col), f"attention={att}") if x)
    show_ub = axis in ("prefill", "mixed") or len({r.n_ubatch for r in rs} - {None}) > 1
    shared = _shared_model_names(rs) if "model" in id_cols else set()
    rows: dict[tuple, Row] = {}
    columns: set[str] = set()
    roof_cols: set[str] = set()
    energy_cols: set[str] = set()
    for f in fs:
        r, col = f.record, col_of[id(f.record)]
        if f.energy is not None:
            energy_cols.add(col)
        ids = {c: "" if (v := id_value(r, c)) is None else str(v) for c in id_cols}
        if r.model.name in shared and identity.known_sha(r) is None:
            ids["model"] += f" [{_fingerprint_words(r)}]"
        label, key = _row_key(rows, r, col, row_label(r, ub=show_ub), ids)
        row = rows.setdefault(key, Row(label, ids, _row_order(r, ids)))
        row.cells[col], row.facts[col], row.flags[col] = r, f, list(f.flags)
        if f.roof is not None:
            roof_cols.add(col)
        columns.add(col)
    _mark_ub_no_effect(list(rows.values()), opts)
    _mark_host_outliers(list(rows.values()))
    ordered = sorted((row.finish() for row in rows.values()), key=lambda row: row.order)
    return Table(
        axis,
        TITLES[axis],
        sorted(columns),
        id_cols,
        ordered,
        sorted(roof_cols),
        per_image,
        column_systems(fs, col_of),
        sorted(energy_cols),
        opts.bw_floor,
    )


def _shared_model_names(records: list[BenchRecord]) -> set[str]:
    """Model names that stand for several models among `records` (no sha256 tells their files apart:
    two imports' `model.gguf`, one F16 and one Q8_0): each gets its own rows (_fingerprint_words), never
    one row whose cells put one model's tok/s beside another's."""
    seen: dict[str, set[tuple]] = {}
    for r in records:
        if identity.known_sha(r) is None:
            seen.setdefault(r.model.name, set()).add(identity.model_fingerprint(r))
    return {name for name, fps in seen.items() if len(fps) > 1}


def _fingerprint_words(r: BenchRecord) -> str:
    """What tells a model apart from another of its name (identity.model_fingerprint: llama-bench's
    model_type, parameters and size as its md prints them, type_words): `qwen3moe Q8_0, 0.79 M, 0.81 MiB`."""
    words = [
        type_words(x)[:60]
        for x in identity.model_fingerprint(r)
        if isinstance(x, str | int | float) and str(x)
    ]
    return ", ".join(words) or "model not described"


def fold_decode_ub(
    t: Table, judged: str | None = None, alike: Callable[[Facts], Hashable] | None = None
) -> tuple[Table, bool]:
    """The decode table with rows that differ only by the micro-batch folded into one (`tg64`, not `tg64
    ub512` and `tg64 ub2048`: n_ubatch does not apply to tg, facts.ub_applies) where, in every image column
    (column `judged` alone where given: reproduce's recorded side, so its rows are the published run's
    report's), their tok/s agree within noise (_agree: noise_band, stddevs known); rows that differ beyond it
    stay apart with their ub, so no measured difference is hidden. A folded cell is the record of a ub every
    column of the row measured (like with like; else one the most columns measured), ub512 first
    (llama-bench's default), else the one with the most samples; (table, whether any row was folded). `alike`: what the cells of one folded row share
    besides the test (default: the model and every test field but n_ubatch; compare's: its join's). Any
    other table is returned as it is. The one fold every table format (report.folded_tables) and the plots
    (plots.figures) read; `--format csv` / `--json` keep every record."""
    if t.axis != "decode":
        return t, False
    groups: dict[tuple, list[Row]] = {}
    for row in t.rows:
        test, _, ub = row.test.rpartition(" ub")
        foldable = ub.isdigit() and not any(ub_applies(r) for r in row.cells.values())
        same = frozenset(map(alike or _alike, row.facts.values()))
        groups.setdefault(
            (test, tuple(row.ids.items()), same) if foldable else (row.test, id(row)), []
        ).append(row)
    if all(len(g) == 1 or not _agree(g, judged) for g in groups.values()):
        return t, False
    shared = Counter(k[:2] for k in groups if len(k) == 3)  # (test, ids) of more than one test: keep ub
    rows = []
    for key, group in groups.items():
        test = key[0]
        lone = len(group) == 1 and (not group[0].test.startswith(f"{test} ub") or shared[key[:2]] > 1)
        if lone or not _agree(group, judged):
            rows.extend(group)
            continue
        merged = Row(test, dict(group[0].ids), group[0].order)
        ubs = Counter(row.cells[c].n_ubatch for c in t.columns for row in group if c in row.cells)
        like = {u for u, n in ubs.items() if n == max(ubs.values())}  # the ub most columns measured
        for c in t.columns:
            have = [row for row in group if c in row.cells]
            if have:
                pick = min(
                    have,
                    key=lambda row: (
                        row.cells[c].n_ubatch not in like,
                        row.cells[c].n_ubatch != 512,
                        -len(row.cells[c].samples_ts),
                    ),
                )
                merged.cells[c], merged.facts[c] = pick.cells[c], pick.facts[c]
                merged.flags[c] = pick.flags.get(c, [])
                if len(have) > 1:
                    merged.folded[c] = [row.facts[c] for row in have]
        rows.append(merged.finish())
    return replace(t, rows=rows), True


def _alike(f: Facts) -> tuple:
    """What a report's decode cells folded into one row share: the model and every test field but n_ubatch."""
    return (f.key.model, tuple(kv for kv in f.key.test if kv[0] != "n_ubatch"))


def _agree(group: list[Row], judged: str | None = None) -> bool:
    """Every image column's records of these rows (column `judged` alone where given) give the same
    tok/s within noise: each pair _within noise_band of their relative stddevs (unknown, non-finite
    stddev or a value <= 0: not agreeing). O(n log n) in the rows (bands.breakers; every pair was
    minutes at 8,000 ubs)."""
    for c in {judged} if judged else {c for row in group for c in row.facts}:
        fs = [row.facts[c] for row in group if c in row.facts]
        if len(fs) > 1 and not all(_band_holds([(f.value, f.rsd) for f in fs], math.inf) or [False]):
            return False
    return True


def _band_holds(points: list[tuple[float | None, float | None]], noisy: float) -> list[bool]:
    """For each (tok/s, relative stddev), whether it agrees with every other point (_within noise_band);
    [] where any point is unknown, non-finite, has a value <= 0 or a relative stddev over `noisy`
    (it agrees with none, so none agrees with all)."""
    known = [
        (v, r)
        for v, r in points
        if v is not None and r is not None and v > 0 and math.isfinite(r) and r <= noisy
    ]
    if len(known) < len(points):
        return []
    vals, rsds = [v for v, _ in known], [r for _, r in known]
    broken = bands.breakers(vals, rsds, lambda i, k: _within(vals[i], vals[k], noise_band(rsds[i], rsds[k])))
    return [not b for b in broken]


def _mark_ub_no_effect(rows: list[Row], opts: ReportOptions) -> None:
    """`ub-no-effect` only where measured: in one image column, records that differ only in n_ubatch
    and give equal tok/s within noise (_within noise_band of both relative stddevs, known and at
    most opts.noisy) with every other such record (_band_holds: O(n log n))."""
    groups: dict[tuple, list[tuple[Row, str, BenchRecord]]] = {}
    for row in rows:
        for col, fa in row.facts.items():
            if not ub_applies(r := fa.record):
                continue
            f = tuple(kv for kv in fa.key.test if kv[0] != "n_ubatch")  # sorted by field
            groups.setdefault((col, fa.key.model, f), []).append((row, col, r))
    for members in groups.values():
        if len({r.n_ubatch for _, _, r in members}) < 2:
            continue
        points = [(value(r), rel_stddev(r)) for _, _, r in members]
        for (row, col, _), holds in zip(members, _band_holds(points, opts.noisy), strict=False):
            if holds:
                _raise(row.flags[col], "ub-no-effect")


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
                if mine is not None and abs(mine - statistics.median(vals)) > 3 * spread:
                    _raise(row.flags[col], "host-outlier")


def _raise(flags: list[str], flag: str) -> None:
    """`flag`, raised by this table, on a cell's `flags` (in place) once, last; a stored
    `flag-unsupported:<flag>` dropped, as the cell's fields show the flag after all (without_unsupported)."""
    if flag not in flags:
        flags[:] = [*without_unsupported(flags, [flag]), flag]


def _within(a: float, b: float, band: float) -> bool:
    """The larger of two positive tok/s exceeds the smaller by at most `band` (a share): the same
    answer whichever is named first (|a / b - 1| was not: 58.31 vs 12.92 apart, 12.92 vs 58.31 not)."""
    lo, hi = sorted((a, b))
    return lo > 0 and hi / lo - 1 <= band


def tables(records: list[BenchRecord], opts: ReportOptions | None = None) -> list[Table]:
    return axis_tables(select_for_report(records), opts)


def axis_tables(chosen: list[BenchRecord] | list[Facts], opts: ReportOptions | None = None) -> list[Table]:
    """The tables of the axes that have rows, over records already chosen (select_for_report) or
    their Facts (built under `opts`: each record's facts computed once for every axis)."""
    fs = facts_of(chosen, opts)
    return [t for t in (axis_table(fs, a, opts) for a in AXES) if t.rows]


def made_good(records: Iterable[BenchRecord]) -> list[BenchRecord]:
    """The failed records of `records` that a later record made good, which no reader counts failed: a failed
    test measured ok (its TestKey) by a record created after it, and a process's fault of no one test
    (records.NO_TEST: a crash, Ctrl-C between tests) where a run of the same image digest and model created
    after it ended without a failure (a `--resume` or a new bench measured the cases left). `records`: every
    failed one with the ok records of the newest runs (what resultindex.select keeps)."""
    recs = list(records)
    failed = [r for r in recs if r.status != "ok"]
    if not failed:  # the usual case
        return []
    runs, tests = {r.run_id for r in failed}, {identity.test_key(r) for r in failed if r.test != NO_TEST}
    ok_at: dict[Any, str] = {}  # the newest ok of each failed test, and of each clean run's (digest, model)
    for r in recs:
        if r.status == "ok":
            for k in (
                *(() if r.run_id in runs else ((r.image.digest, r.model.name),)),
                *((t,) if tests and (t := identity.test_key(r)) in tests else ()),
            ):
                ok_at[k] = max(ok_at.get(k, ""), r.created)
    return [
        r
        for r in failed
        if ok_at.get((r.image.digest, r.model.name) if r.test == NO_TEST else identity.test_key(r), "")
        > r.created
    ]


def accounting(
    records: list[BenchRecord], refused: int = 0, sel: identity.Selection | None = None, good: int = 0
) -> str:
    """One line: how many records were read, used, superseded, failed (and refused by the reader);
    `sel`: the records' select_with_accounting where the caller made it (the counts are set anew);
    `good`: failed records a later one made good (made_good), counted superseded."""
    sel = sel or select_with_accounting(records)[1]
    if isinstance(
        records, RecordSelection
    ):  # resultindex.select(): the counts of the whole set it stands for
        for count in ("read", "superseded", "failed", "trials"):
            setattr(sel, count, getattr(records, count))
    sel.failed, sel.superseded = sel.failed - good, sel.superseded + good
    text = sel.summary()
    return text + (f", {refused} unreadable or invalid (see warnings)" if refused else "")
