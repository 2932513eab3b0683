"""[BenchRecord] --report--> tables per axis with flags and a roofline, then verdict and plots.

Pure functions over records (never row indexes). `select_for_report` keeps the newest ok record per
test-defining key (plus CPU-fallback failures that carry numbers, flagged, for keys with no ok
record); `axis_table` pivots one axis to rows = test (`pp2048 ub512`, `tg128`, `c4 in512 out128`)
and columns = image (`name@short-digest`), cells = tok/s ± stddev. Identifying columns (model, fa,
ngl, n_batch, threads) appear only when they vary. `render` writes github (markdown), csv, json or
one self-contained offline html page (inline CSS, plots as base64 PNG).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from toolkit._types import EXPECTED_LLAMA_BACKEND
from toolkit.llamabench import effective_ubatch
from toolkit.records import BenchRecord
from toolkit.roofline import SOFTWARE_GPU_MARKERS, Roofline, roofline

FORMATS = ("github", "csv", "json", "html")
AXES = ("prefill", "decode", "mixed", "served")
TITLES = {
    "prefill": "Prefill (pp), tokens/s",
    "decode": "Decode (tg), tokens/s",
    "mixed": "Prefill + decode (pp+tg), tokens/s",
    "served": "Served throughput by concurrency (vLLM bench serve), output tokens/s",
}
FLAG_HELP = {
    "ub-no-effect": "asked n_ubatch > n_prompt + n_gen + n_depth (or > n_batch): llama.cpp clamps it, "
    "the micro-batch knob had no effect (shown: the effective value)",
    "cpu-fallback": "a GPU image ran on the CPU (failed run or backends without the GPU backend): not a GPU number",
    "software-gpu": "ran on a software Vulkan device (Mesa lavapipe): a smoke test, not a GPU number",
    "noisy": "relative standard deviation above the noise threshold",
    "bw-above-peak": "decode implies more memory bandwidth than the GPU's peak (caches, or a wrong model size)",
    "bw-below-floor": "decode implies implausibly little memory bandwidth (overhead-bound or misconfigured)",
}


@dataclass(frozen=True)
class ReportOptions:
    """Thresholds as fractions: noisy = relative stddev, bw_floor = share of peak bandwidth,
    min_margin = the smallest margin the verdict calls a win."""

    noisy: float = 0.05
    bw_floor: float = 0.05
    min_margin: float = 0.03


def image_label(r: BenchRecord) -> str:
    """Column label of an image: `name@abcdef012345`."""
    return f"{r.image.name}@{r.image.short}"


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def value(r: BenchRecord) -> float | None:
    """tok/s of a record: avg_ts, or a served record's output_throughput."""
    if r.avg_ts is not None:
        return r.avg_ts
    return _float(r.raw.get("output_throughput")) if r.axis == "served" else None


def rel_stddev(r: BenchRecord) -> float | None:
    v = value(r)
    return r.stddev_ts / v if r.stddev_ts is not None and v else None


def threads(r: BenchRecord) -> int | None:
    t = r.raw.get("n_threads")
    return int(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def concurrency(r: BenchRecord) -> int | None:
    c = r.engine.get("concurrency")
    return int(c) if isinstance(c, (int, float)) else None


def test_key(r: BenchRecord) -> tuple:
    """Test-defining parameters (records.BenchRecord.key) plus llama-bench's thread count."""
    return (*r.key(), threads(r))


def is_cpu_fallback(r: BenchRecord) -> bool:
    """A GPU image's record that ran on the CPU: failed as such, or `backends` lacks the GPU backend."""
    if r.status != "ok" and "cpu fallback" in (r.error or "").lower():
        return True
    expected = EXPECTED_LLAMA_BACKEND.get(r.image.backend)
    return (
        r.method == "llama-bench"
        and r.image.backend in ("rocm", "vulkan")
        and bool(r.backends)
        and expected is not None
        and expected.lower() not in (r.backends or "").lower()
    )


def is_software_gpu(r: BenchRecord) -> bool:
    return r.image.backend == "vulkan" and any(m in (r.gpu_info or "").lower() for m in SOFTWARE_GPU_MARKERS)


def select_latest(records: Iterable[BenchRecord], *, include_failed: bool = False) -> list[BenchRecord]:
    """Newest record per test-defining key (ok records only unless include_failed)."""
    latest: dict[tuple, BenchRecord] = {}
    for r in records:
        if r.status != "ok" and not include_failed:
            continue
        k = test_key(r)
        if k not in latest or r.created >= latest[k].created:
            latest[k] = r
    return sorted(latest.values(), key=lambda r: (r.image.name, r.axis, r.n_prompt, r.n_gen, r.n_ubatch or 0))


def select_for_report(records: Iterable[BenchRecord]) -> list[BenchRecord]:
    """Newest ok record per key, plus CPU-fallback failures with numbers where no ok record exists."""
    records = list(records)
    ok = select_latest(records)
    have = {test_key(r) for r in ok}
    fallback = [r for r in records if r.status != "ok" and is_cpu_fallback(r) and value(r) is not None]
    return ok + [r for r in select_latest(fallback, include_failed=True) if test_key(r) not in have]


def ub_no_effect(r: BenchRecord) -> int | None:
    """The effective micro-batch when it is smaller than the asked one (the knob was off), else None."""
    eff = effective_ubatch(r.n_ubatch, r.n_batch, r.n_prompt, r.n_gen, r.n_depth)
    return eff if r.n_ubatch and eff is not None and eff < r.n_ubatch else None


def record_flags(r: BenchRecord, opts: ReportOptions, roof: Roofline | None = None) -> list[str]:
    """Flags of one record, in FLAG_HELP order."""
    out = []
    if ub_no_effect(r) is not None:
        out.append("ub-no-effect")
    if is_cpu_fallback(r):
        out.append("cpu-fallback")
    if is_software_gpu(r):
        out.append("software-gpu")
    rsd = rel_stddev(r)
    if rsd is not None and rsd > opts.noisy:
        out.append("noisy")
    if roof is not None and roof.metric == "bandwidth":
        if roof.fraction > 1.0:
            out.append("bw-above-peak")
        elif roof.fraction < opts.bw_floor:
            out.append("bw-below-floor")
    return out


# Identifying columns, shown only when they take more than one (non-empty) value in a table.
ID_COLUMNS: dict[str, Callable[[BenchRecord], Any]] = {
    "model": lambda r: r.model.name,
    "fa": lambda r: r.flash_attn,
    "ngl": lambda r: r.n_gpu_layers,
    "n_batch": lambda r: r.n_batch,
    "threads": threads,
}


def varying_columns(records: list[BenchRecord]) -> list[str]:
    return [name for name, get in ID_COLUMNS.items() if len({get(r) for r in records} - {None}) > 1]


def split_columns(records: list[BenchRecord]) -> tuple[dict[str, str], list[str]]:
    """Varying identifying columns split in two: those fixed per image go into the image's header
    (`cpu@ab12 (threads=1)`, so rows still line images up side by side), the rest stay row columns."""
    per_image: dict[str, list[str]] = {}
    rows = []
    for name in varying_columns(records):
        vals: dict[str, set] = {}
        for r in records:
            vals.setdefault(image_label(r), set()).add(ID_COLUMNS[name](r))
        if all(len(v) == 1 for v in vals.values()):
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
        """Flags for the flags column: a flag on only some images names them; ub-no-effect its value."""
        out = []
        for name in FLAG_HELP:
            cols = [c for c, fl in self.flags.items() if name in fl]
            if not cols:
                continue
            text = name
            if name == "ub-no-effect":
                effs = sorted({ub_no_effect(self.cells[c]) for c in cols} - {None})
                text += f" (runs at ub{'/'.join(str(e) for e in effs)})"
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

    def header(self, col: str) -> str:
        return f"{col} ({self.image_ids[col]})" if self.image_ids.get(col) else col


def row_label(r: BenchRecord, *, ub: bool) -> str:
    """`pp2048 ub512`, `tg128`, `pp512+tg128 ub512`, served: `c4 in512 out128`."""
    if r.axis == "served":
        return f"c{concurrency(r)} in{r.n_prompt} out{r.n_gen}"
    return f"{r.test} ub{r.n_ubatch}" if ub and r.n_ubatch else r.test


def axis_table(records: list[BenchRecord], axis: str, opts: ReportOptions | None = None) -> Table:
    """Pivot the records of one axis (prefill | decode | mixed | served) into a Table."""
    opts = opts or ReportOptions()
    rs = [r for r in records if r.axis == axis and value(r) is not None]
    per_image, id_cols = split_columns(rs)
    show_ub = axis in ("prefill", "mixed") or len({r.n_ubatch for r in rs} - {None}) > 1
    rows: dict[tuple, Row] = {}
    columns: set[str] = set()
    roof_cols: set[str] = set()
    for r in rs:
        col = image_label(r)
        ids = {c: "" if ID_COLUMNS[c](r) is None else str(ID_COLUMNS[c](r)) for c in id_cols}
        label = row_label(r, ub=show_ub)
        order = (
            concurrency(r) or 0,
            r.n_depth,
            r.n_prompt,
            r.n_gen,
            r.model.name,
            r.n_ubatch or 0,
            tuple(ids.values()),
        )
        row = rows.setdefault((label, tuple(ids.values())), Row(label, ids, order))
        row.cells[col] = r
        roof = roofline(r)
        if roof is not None:
            row.roof[col] = roof
            roof_cols.add(col)
        row.flags[col] = record_flags(r, opts, roof)
        columns.add(col)
    ordered = sorted(rows.values(), key=lambda row: row.order)
    return Table(axis, TITLES[axis], sorted(columns), id_cols, ordered, sorted(roof_cols), per_image)


def tables(records: list[BenchRecord], opts: ReportOptions | None = None) -> list[Table]:
    chosen = select_for_report(records)
    return [t for t in (axis_table(chosen, a, opts) for a in AXES) if t.rows]


def fmt_cell(r: BenchRecord | None) -> str:
    v = value(r) if r is not None else None
    if v is None:
        return ""
    sd = f" ± {r.stddev_ts:.2f}" if r.stddev_ts is not None else ""
    text = f"{v:.2f}{sd}"
    if r.axis == "served":
        extra = [
            f"{k.upper()} {t:.1f} ms" for k in ("ttft", "tpot") if (t := _float(r.raw.get(f"median_{k}_ms")))
        ]
        text += f" ({', '.join(extra)})" if extra else ""
    return text


def fmt_roof(roof: Roofline | None) -> str:
    if roof is None:
        return ""
    what = "of BW" if roof.metric == "bandwidth" else "of FP16 peak"
    return f"{100 * roof.fraction:.0f}% {what}"


def table_rows(t: Table) -> tuple[list[str], list[list[str]]]:
    """Header and body of a table as text cells (shared by github and html)."""
    headers = ["test", *t.id_columns]
    for c in t.columns:
        headers.append(t.header(c))
        if c in t.roof_columns:
            headers.append(f"roofline {c}")
    headers.append("flags")
    body = []
    for row in t.rows:
        line = [row.test, *row.ids.values()]
        for c in t.columns:
            line.append(fmt_cell(row.cells.get(c)))
            if c in t.roof_columns:
                line.append(fmt_roof(row.roof.get(c)))
        line.append("; ".join(row.row_flags()))
        body.append(line)
    return headers, body


def _legend(ts: list[Table]) -> list[str]:
    used = {f.split(" ")[0] for t in ts for row in t.rows for f in row.row_flags()}
    return [f"{name}: {FLAG_HELP[name]}" for name in FLAG_HELP if name in used]


def _roof_notes(ts: list[Table]) -> list[str]:
    seen = {}
    for t in ts:
        for row in t.rows:
            for col, roof in row.roof.items():
                seen[col] = roof
    return [
        f"{col}: {roof.gpu.product} ({roof.gpu.gfx_target}) peak {roof.gpu.mem_bw_gbs:.0f} GB/s, "
        f"{roof.gpu.fp16_matrix_tflops:.0f} TFLOP/s FP16 matrix; active share of the weights "
        f"{100 * roof.share.bytes_share:.1f}% (from {roof.share.source})"
        for col, roof in sorted(seen.items())
    ]


def render(records: list[BenchRecord], fmt: str = "github", *, opts: ReportOptions | None = None) -> str:
    """Render tables, flags and verdict as `github` (markdown), `csv`, `json` or `html` text."""
    opts = opts or ReportOptions()
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    ts = tables(records, opts)
    if fmt == "csv":
        return render_csv(ts)
    from toolkit import verdict as verdict_mod  # verdict builds on this module's helpers

    v = verdict_mod.verdict(records, opts)
    if fmt == "json":
        return json.dumps(
            {
                "tables": [table_json(t) for t in ts],
                "verdict": verdict_mod.verdict_json(v),
                "options": opts.__dict__,
            },
            indent=2,
        )
    if fmt == "html":
        return render_html(records, ts, verdict_mod.format_verdict(v, markdown=False))
    if not ts:
        return "no results yet: run `toolkit bench` or `toolkit import`"
    out = []
    for t in ts:
        headers, body = table_rows(t)
        out.append(
            f"### {t.title}\n\n" + tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)
        )
    notes = _legend(ts) + _roof_notes(ts)
    if notes:
        out.append("\n".join(f"- {n}" for n in notes))
    out.append(verdict_mod.format_verdict(v))
    return "\n\n".join(out)


CSV_FIELDS = [
    "axis",
    "test",
    "image",
    "digest",
    "model",
    "n_prompt",
    "n_gen",
    "n_depth",
    "n_batch",
    "n_ubatch",
    "n_ubatch_effective",
    "flash_attn",
    "n_gpu_layers",
    "threads",
    "concurrency",
    "avg_ts",
    "stddev_ts",
    "roofline",
    "roofline_pct",
    "flags",
]


def render_csv(ts: list[Table]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for t in ts:
        for row in t.rows:
            for col, r in sorted(row.cells.items()):
                roof = row.roof.get(col)
                w.writerow(
                    [
                        t.axis,
                        row.test,
                        r.image.name,
                        r.image.digest,
                        r.model.name,
                        r.n_prompt,
                        r.n_gen,
                        r.n_depth,
                        r.n_batch,
                        r.n_ubatch,
                        effective_ubatch(r.n_ubatch, r.n_batch, r.n_prompt, r.n_gen, r.n_depth),
                        r.flash_attn,
                        r.n_gpu_layers,
                        threads(r),
                        concurrency(r),
                        value(r),
                        r.stddev_ts,
                        roof.metric if roof else "",
                        f"{100 * roof.fraction:.1f}" if roof else "",
                        " ".join(row.flags.get(col, [])),
                    ]
                )
    return buf.getvalue()


def table_json(t: Table) -> dict[str, Any]:
    def cell(row: Row, col: str) -> dict[str, Any] | None:
        r = row.cells.get(col)
        if r is None:
            return None
        roof = row.roof.get(col)
        return {
            "avg_ts": value(r),
            "stddev_ts": r.stddev_ts,
            "digest": r.image.digest,
            "n_ubatch_effective": effective_ubatch(r.n_ubatch, r.n_batch, r.n_prompt, r.n_gen, r.n_depth),
            "flags": row.flags.get(col, []),
            "roofline": {
                "metric": roof.metric,
                "fraction": round(roof.fraction, 4),
                "gpu": roof.gpu.gfx_target,
                "active_share": round(roof.share.bytes_share, 4),
                "share_source": roof.share.source,
            }
            if roof
            else None,
        }

    return {
        "axis": t.axis,
        "title": t.title,
        "columns": t.columns,
        "id_columns": t.id_columns,
        "image_settings": t.image_ids,
        "rows": [{"test": row.test, **row.ids, **{c: cell(row, c) for c in t.columns}} for row in t.rows],
    }


HTML_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;
color:#1d1d1f;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.8em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}td.flags{text-align:left;color:#a33}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}pre{background:#f7f7f7;padding:1em;white-space:pre-wrap}
"""


def render_html(records: list[BenchRecord], ts: list[Table], verdict_text: str) -> str:
    """One offline page: inline CSS, tables, verdict, plots embedded as base64 PNG; no external URL."""
    from toolkit import plots

    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>toolkit report</title>",
        f"<style>{HTML_CSS}</style></head><body>",
        "<h1>Benchmark report</h1>",
    ]
    if not ts:
        parts.append("<p>no results yet: run <code>toolkit bench</code> or <code>toolkit import</code></p>")
    for t in ts:
        headers, body = table_rows(t)
        parts.append(
            f"<h2>{html.escape(t.title)}</h2><table><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in headers)
            + "</tr>"
        )
        for line in body:
            cells = [f"<td>{html.escape(x)}</td>" for x in line[:-1]] + [
                f'<td class="flags">{html.escape(line[-1])}</td>'
            ]
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</table>")
    notes = _legend(ts) + _roof_notes(ts)
    if notes:
        parts.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    parts.append(f"<h2>Verdict</h2><pre>{html.escape(verdict_text)}</pre>")
    figs = plots.figures(select_for_report(records))
    if figs:
        parts.append("<h2>Plots</h2>")
    for name, fig in figs.items():
        data = base64.b64encode(plots.png_bytes(fig)).decode()
        parts.append(f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}">')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def publish(
    records: list[BenchRecord],
    fmt: str = "github",
    *,
    opts: ReportOptions | None = None,
    output: Path | None = None,
    plots_dir: Path | None = None,
) -> tuple[str | None, list[Path]]:
    """Render the report: (text for stdout or None when written to `output`, every file written).

    The report goes to `output` when given (atomic write); plots go as PNG files to `plots_dir`, by
    default `<output stem>-plots/` beside an html report.
    """
    from toolkit import plots

    text = render(records, fmt, opts=opts)
    written: list[Path] = []
    if output is not None:
        output = Path(output)
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.with_suffix(output.suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(output)
        written.append(output)
        if plots_dir is None and fmt == "html":
            plots_dir = output.parent / f"{output.stem}-plots"
    if plots_dir is not None:
        written += plots.write_pngs(select_for_report(records), Path(plots_dir))
    return (None if output is not None else text), written
