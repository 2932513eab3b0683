"""[BenchRecord] --plot--> matplotlib figures: prefill vs prompt length (a line per depth and
micro-batch), depth curves (tok/s vs KV depth, a line per image), decode and pp+tg bars (wrapped to a
readable width, labels fitted to their group as drawn), served throughput; each figure on one y-axis
from zero, drawn from the rows the report's page shows (decode folded over the micro-batch, one row
per tg test: tables.fold_decode_ub; a row at a depth > 0 drawn on its depth curve, not again as a bar
or a lone dot); one color per image in every figure (palette), flagged cells marked (hatched bars, a
black x), the model in each title. For each run
shown whose records carry telemetry, GPU power and clocks over the run from its raw trace
(`telemetry_figures`), each test's window shaded.

Figures are `matplotlib.figure.Figure` objects on the Agg canvas (FigureCanvasAgg): no pyplot, no
global backend switch, no display needed. Callers pass the report's tables (tables.tables).
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.analysis.facts import Facts
from toolkit.analysis.tables import Row, Table, fold_decode_ub
from toolkit.core.stats import finite_number
from toolkit.core.text import counted, strip_controls
from toolkit.host.telemetry import iter_trace
from toolkit.results import write_atomic
from toolkit.results.records import BenchRecord, short_digest

if TYPE_CHECKING:  # matplotlib costs ~0.4 s to import: only a report that draws plots loads it
    from matplotlib.figure import Figure

PNG_METADATA = {"Software": None}  # keep PNG bytes reproducible across matplotlib versions


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _cells(t: Table | None):
    """(row, column, the record's Facts) of a table's usable cells: a number, not a CPU fallback."""
    if t is None:
        return []
    return [
        (row, col, f)
        for row in t.rows
        for col, f in row.facts.items()
        if f.value is not None and not f.cpu_fallback
    ]


def _series(row: Row, r: BenchRecord) -> tuple[int, int, str]:
    """A line of the prefill plot: the table row minus its prompt length — depth, micro-batch, what
    tells rows apart, and the identifying values — as (depth, micro-batch, label), so lines sort by
    depth, then micro-batch. Built from the row's own label, so the plot has exactly the table's rows."""
    rest = row.test.split(" ", 1)[1] if " " in row.test else "default"
    parts = [rest.replace("@ d", "d", 1)] + [f"{k}={v}" for k, v in row.ids.items()]
    return (r.n_depth, r.n_ubatch or 0, " ".join(parts))


Colors = dict[str, str]
"""Image column -> matplotlib color: one color per image in every figure of a report (palette)."""


def palette(tables: list[Table]) -> Colors:
    """One color per image column across all `tables` (sorted names; tab10, tab20 past 10 images), so
    an image is the same color in the prefill, decode, mixed and served figures."""
    images = sorted({col for t in tables for row in t.rows for col in row.cells})
    if len(images) <= 10:
        return {img: f"C{i}" for i, img in enumerate(images)}
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    from matplotlib.colors import to_hex

    return {img: to_hex(cmap(i % 20)) for i, img in enumerate(images)}


STYLES = [(m, ls) for ls in ("-", "--") for m in ("o", "s", "^", "D", "v")]
"""A prefill panel's lines (one image, one color) told apart by marker and line style: MAX_LINES of them."""

FLAGGED_LABEL = "flagged: see the table"
CLAMPED_LABEL = "hollow: ran at a smaller micro-batch (ub-clamped)"


def _title(fig: Figure, t: Table | None) -> None:
    """The figure's title: what is plotted and which model(s) it was measured on."""
    models = sorted({f.record.model.name for _, _, f in _cells(t)})
    if t is not None:
        fig.suptitle(strip_controls(f"{t.title} — model {', '.join(models) or '?'}"), fontsize=10)


def _point(f: Facts) -> tuple[int, float | None, float, bool, bool]:
    """A prefill point: (prompt length, tok/s, stddev, micro-batch clamped, held: Facts.held_flags)."""
    return (
        f.record.n_prompt,
        f.value,
        f.record.stddev_ts or 0.0,
        bool(f.ub_clamped),
        bool(f.held_flags),
    )


def _prefill_panel(ax: Any, img: str, mine: list[tuple[Row, Facts]], color: str) -> None:
    """One image's prefill panel (prefill_figure): a line per series, marked clamped/flagged points
    (flagged: Facts.held_flags, measured while something else shaped the number, gpu-shared, throttled,
    ..., or above the GPU's peak). A series
    at a depth > 0 with one prompt length (a depth sweep's pp512 @ d4096) is left to depth_figure,
    not drawn as a lone dot, unless the panel would be empty without it."""
    every = sorted({_series(row, f.record) for row, f in mine})
    lone = {x for x in every if x[0] > 0 and sum(_series(r, f.record) == x for r, f in mine) == 1}
    mine = [(row, f) for row, f in mine if _series(row, f.record) not in lone] or mine  # depth_figure's
    for k, series in enumerate(x for x in every if x not in lone or len(lone) == len(every)):
        pts = sorted(_point(f) for row, f in mine if _series(row, f.record) == series)
        xs, ys, es, _, _ = zip(*pts, strict=True)
        marker, style = STYLES[k % len(STYLES)]
        ax.errorbar(
            xs, ys, yerr=es, marker=marker, ls=style, capsize=3, color=color, label=strip_controls(series[2])
        )
        bad = [(x, y) for x, y, _, _, flagged in pts if flagged]
        if bad:
            bx, by = zip(*bad, strict=True)
            ax.plot(bx, by, "x", ms=10, mew=2, color="black", zorder=4, label="_flagged")
        off = [(x, y) for x, y, _, clamped, _ in pts if clamped]
        if off:  # hollow markers: llama.cpp computed with a smaller effective micro-batch
            ox, oy = zip(*off, strict=True)
            ax.plot(ox, oy, marker, mfc="white", mew=1.5, zorder=3, color=color, label="_clamped")
    ax.set_xscale("log", base=2)
    prompts = sorted({f.record.n_prompt for _, f in mine})
    ax.set_xticks(prompts, _tick_labels(prompts))
    ax.minorticks_off()
    ax.set_title(strip_controls(img), fontsize=9)
    ax.set_xlabel("prompt length (tokens)")
    handles, labels = ax.get_legend_handles_labels()
    from matplotlib.lines import Line2D

    if any(f.ub_clamped for _, f in mine):  # a newcomer asked what the hollow markers are
        handles.append(Line2D([], [], marker="o", ls="", mfc="white", mew=1.5, color=color))
        labels.append(CLAMPED_LABEL)
    if any(f.held_flags for _, f in mine):
        handles.append(Line2D([], [], marker="x", ls="", ms=8, mew=2, color="black"))
        labels.append(FLAGGED_LABEL)
    ax.legend(handles, labels, fontsize=8)
    ax.grid(True, alpha=0.3)


def prefill_figure(t: Table | None, colors: Colors | None = None) -> Figure | None:
    """One panel per image column: prefill tok/s vs prompt length, one line per series — the table's
    rows that differ only in prompt length (each depth its own line, told apart by marker and line
    style; error bars = stddev) in the image's color (`colors`: palette); hollow markers where
    llama.cpp clamped the micro-batch, a black x over a flagged cell. Every panel shares one y-axis
    from zero; the title names the model."""
    cells = _cells(t)
    images = sorted({col for _, col, _ in cells})
    if not images:
        return None
    colors = colors or palette([t] if t is not None else [])
    fig = _figure(5.0 * len(images), 3.8)
    _title(fig, t)
    axes = fig.subplots(1, len(images), squeeze=False, sharey=True)[0]
    for ax, img in zip(axes, images, strict=True):
        _prefill_panel(ax, img, [(row, f) for row, col, f in cells if col == img], colors[img])
    axes[0].set_ylim(bottom=0)
    axes[0].set_ylabel("prefill tokens/s")
    return fig


def _tick_labels(values: list[int]) -> list[str]:
    """Labels of sorted axis values, at most MAX_TICKS of them shown (every k-th; the rest blank)."""
    step = max(1, math.ceil(len(values) / MAX_TICKS))
    return [str(v) if i % step == 0 else "" for i, v in enumerate(values)]


MAX_WIDTH = 14.0  # inches: a bar figure wider than this is wrapped into more panel rows
MAX_PANELS = 8  # panel rows of a bar figure (27 inches high): more is no figure anyone reads
MAX_COLUMNS = 6  # prefill panels (image columns) side by side, 5 inches each
MAX_LINES = 10  # lines in a prefill panel or the served figure, bars in a group: matplotlib's default
# color cycle (tab10) has 10 colors; an 11th line or bar repeats the first's color
MAX_TICKS = 12  # prompt-length labels on a prefill axis: more are thinned (every k-th labelled)


def _bar_layout(t: Table | None) -> tuple[list, list[str], int, int]:
    """(groups: the rows with a usable cell, image columns, groups per panel, panel rows) of bar_figure:
    as few panel rows as MAX_WIDTH allows, the groups spread evenly over them (12 groups of 10 a row
    at most: two rows of 6, not 10 and 2)."""
    cells = _cells(t)
    groups = [row for row in t.rows if any(row is rr for rr, _, _ in cells)] if t is not None else []
    images = sorted({col for _, col, _ in cells})
    slot = 0.7 * len(images) + 0.5  # inches per group
    fits = max(1, int((MAX_WIDTH - 1.0) // slot))
    panels = math.ceil(len(groups) / fits)
    return groups, images, max(1, math.ceil(len(groups) / max(1, panels))), panels


def _too_big(kind: str, t: Table | None) -> str | None:
    """Why the `kind` plot (prefill, decode, mixed, served) of a table is left out: more panels or
    lines than a readable figure holds (the table keeps every row); None when it is drawn. Drawing
    one bar group per row of a 50,000-cell table took 488 s and 2 GB for a figure nobody reads."""
    if t is None:
        return None
    narrow = "the table above has every row; narrow the report with --image or --run to plot it"
    if kind in ("decode", "mixed"):
        groups, images, per, panels = _bar_layout(t)
        if panels > MAX_PANELS:
            return (
                f"{kind} plot left out: its {len(groups)} rows need {panels} panels of {per} "
                f"(a readable figure holds {MAX_PANELS}); {narrow}"
            )
        if len(images) > MAX_LINES:
            return (
                f"{kind} plot left out: {len(images)} image columns, more than the {MAX_LINES} colors "
                f"a figure tells apart; {narrow}"
            )
        return None
    if kind.startswith("depth-"):
        curves = _curves(t)
        lines = max((len(v) for v in curves.values()), default=0)
        if len(curves) > MAX_COLUMNS or lines > MAX_LINES:
            return (
                f"{kind} plot left out: {len(curves)} tests with up to {lines} image lines each (a readable "
                f"figure holds {MAX_COLUMNS} tests of {MAX_LINES} lines); {narrow}"
            )
        return None
    cells = _cells(t)
    if kind == "prefill":
        columns = {col for _, col, _ in cells}
        lines = max(
            (len({_series(row, f.record) for row, col, f in cells if col == img}) for img in columns),
            default=0,
        )
        if len(columns) > MAX_COLUMNS or lines > MAX_LINES:
            return (
                f"prefill plot left out: {counted(len(columns), 'image column')} with up to {counted(lines, 'line')} each (a "
                f"readable figure holds {MAX_COLUMNS} columns of {MAX_LINES} lines); {narrow}"
            )
        return None
    lines = len(
        {
            " ".join(
                [col, f"in{f.record.n_prompt} out{f.record.n_gen}", *(f"{k}={v}" for k, v in row.ids.items())]
            )
            for row, col, f in cells
        }
    )
    if lines > MAX_LINES:
        return f"served plot left out: {lines} lines (a readable figure holds {MAX_LINES}); {narrow}"
    return None


def bar_figure(
    t: Table | None, ylabel: str = "decode tokens/s", colors: Colors | None = None
) -> Figure | None:
    """One bar group per row of `t` (the decode table as the page shows it: one row per tg test,
    fold_decode_ub), one bar per image column in the image's color (`colors`: palette), hatched where
    the cell is flagged, error bars = stddev. Groups wrap into panel rows of at most MAX_WIDTH inches,
    all on one y-axis from zero, the groups spread over the panel's width; each label wrapped to its
    group's width as drawn (_fit_labels: no two labels overlap); the title names the model."""
    groups, images, per, panels = _bar_layout(t)
    if not groups:
        return None
    colors = colors or palette([t] if t is not None else [])
    slot = 0.7 * len(images) + 0.5  # inches per group
    cols = min(per, len(groups))  # groups in a full panel row: the figure is as wide as they need
    width = min(MAX_WIDTH, max(5.0, slot * cols + 1.0))
    pad = max(0.0, ((width - 1.0) / slot - cols) / 2)  # groups in a figure wider than they need: centred
    fig = _figure(width, 3.4 * panels + 0.6)
    _title(fig, t)
    any_flagged = False
    axes = fig.subplots(panels, 1, squeeze=False, sharey=True)[:, 0]
    for p, ax in enumerate(axes):
        chunk = groups[p * per : (p + 1) * per]
        any_flagged |= _bars(ax, chunk, images, colors)
        labels = [" ".join([row.test, *(f"{k}={v}" for k, v in row.ids.items())]) for row in chunk]
        ax.set_xticks(range(len(chunk)), [strip_controls(x) for x in labels], fontsize=8)
        ax.set_xlim(-0.5 - pad, cols - 0.5 + pad)  # each label under its group, every panel alike
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylim(bottom=0)
    from matplotlib.patches import Patch

    handles = [Patch(color=colors[img], label=strip_controls(img)) for img in images]
    if any_flagged:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", label=FLAGGED_LABEL))
    # above the first panel, never over a bar (constrained layout makes room for it)
    axes[0].legend(
        handles=handles,
        fontsize=8,
        loc="lower left",
        bbox_to_anchor=(0.0, 1.01),
        ncols=max(1, int(width // 4)),
        frameon=False,
    )
    _fit_labels(fig, list(axes))
    return fig


def _bars(ax: Any, chunk: list[Row], images: list[str], colors: Colors) -> bool:
    """One panel's bars (bar_figure): group j at x = j, one bar per image column with a usable cell,
    hatched where the cell is flagged; whether any was."""
    bw = 0.8 / len(images)
    flagged = False
    for i, img in enumerate(images):
        xs, ys, es, hatch = [], [], [], []
        for j, row in enumerate(chunk):
            f = row.facts.get(img)
            if f is not None and (v := f.value) is not None and not f.cpu_fallback:
                xs.append(j + (i - (len(images) - 1) / 2) * bw)
                ys.append(v)
                es.append(f.record.stddev_ts or 0.0)
                hatch.append("///" if f.held_flags else None)
        if xs:  # one color per image in every panel (an empty call would still take a legend slot)
            bars = ax.bar(xs, ys, bw, yerr=es, capsize=3, color=colors[img])
            for patch, h in zip(bars.patches, hatch, strict=True):
                if h:
                    patch.set_hatch(h)
                    patch.set_edgecolor("black")
                    flagged = True
    return flagged


def _fit_labels(fig: Figure, axes: list[Any], gap: float = 0.9) -> None:
    """Wrap each bar panel's x tick labels until each is at most `gap` of its group's width as drawn
    (measured after constrained layout: matplotlib's text extents, not a guess of characters per
    inch), a word wider than that broken, so no two labels overlap whatever the font. Draws the
    figure up to 4 times; a label already narrow enough stays on one line."""
    for _ in range(4):
        fig.canvas.draw()  # lays the figure out: the axes' and labels' sizes in pixels
        wide = False
        for ax in axes:
            lo, hi = ax.get_xlim()
            room = gap * ax.get_window_extent().width / (hi - lo)  # pixels per group
            texts = [label.get_text() for label in ax.get_xticklabels()]
            widths = [label.get_window_extent().width for label in ax.get_xticklabels()]
            fitted = []
            for text, w in zip(texts, widths, strict=True):
                if w > room:
                    chars = max(len(line) for line in text.splitlines())
                    fit = max(1, min(chars - 1, int(chars * room / w)))
                    text = textwrap.fill(text.replace("\n", " "), fit, break_on_hyphens=False)
                    wide = True
                fitted.append(text)
            ax.set_xticks(ax.get_xticks(), fitted, fontsize=8)
        if not wide:
            return


def _off_depth(t: Table | None) -> Table | None:
    """The decode bar plot's rows: `t` without its rows at a depth > 0 that a depth curve shows
    (depth_figure draws the same numbers over a depth axis; as bars `tg128 @ d4096` only repeated them
    at twice the width, as the prefill panel leaves a lone depth dot to it); `t` itself where no row
    would be left."""
    if t is None:
        return None
    curves = _curves(t)
    keep = [
        row
        for row in t.rows
        if not (_curve_key(row) in curves and any(r.n_depth > 0 for r in row.cells.values()))
    ]
    return replace(t, rows=keep) if keep and len(keep) < len(t.rows) else t


def decode_figure(t: Table | None, colors: Colors | None = None) -> Figure | None:
    """The decode table as bars (bar_figure)."""
    return bar_figure(t, "decode tokens/s", colors)


def served_figure(t: Table | None, colors: Colors | None = None) -> Figure | None:
    """Served output tok/s vs concurrency, one line per image column and row series, in the image's
    color (`colors`: palette; an image's series told apart by marker and line style); a black x over
    a flagged point."""
    cells = [(row, col, f) for row, col, f in _cells(t) if f.record.engine.get("concurrency") is not None]
    if not cells:
        return None
    colors = colors or palette([t] if t is not None else [])
    fig = _figure(6.0, 3.8)
    _title(fig, t)
    ax = fig.subplots()
    series: dict[tuple[str, str], list[tuple[int, float, bool]]] = {}
    for row, col, f in cells:
        r = f.record
        name = " ".join([col, f"in{r.n_prompt} out{r.n_gen}", *(f"{k}={v}" for k, v in row.ids.items())])
        assert f.value is not None  # _cells keeps only cells with a value
        series.setdefault((col, name), []).append((int(r.engine["concurrency"]), f.value, bool(f.held_flags)))
    seen: dict[str, int] = {}
    for (col, name), pts in sorted(series.items()):
        k = seen[col] = seen.get(col, -1) + 1
        marker, style = STYLES[k % len(STYLES)]
        xs, ys, flags = zip(*sorted(pts), strict=True)
        ax.plot(xs, ys, marker=marker, ls=style, color=colors[col], label=strip_controls(name))
        bad = [(x, y) for x, y, f in zip(xs, ys, flags, strict=True) if f]
        if bad:
            bx, by = zip(*bad, strict=True)
            ax.plot(bx, by, "x", ms=10, mew=2, color="black", zorder=4, label=FLAGGED_LABEL)
    ax.set_xscale("log", base=2)
    levels = sorted({pt[0] for pts in series.values() for pt in pts})
    ax.set_xticks(levels, [str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("output tokens/s")
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles, strict=True))  # the flagged entry once
    ax.legend(list(keep.values()), list(keep), fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def _curve_key(row: Row) -> str:
    """A depth curve's panel: the row's label without its depth (`pp512 @ d4096 ub512` -> `pp512
    ub512`) and its identifying values: rows that differ only in depth share a panel."""
    test = re.sub(r" @ d\d+", "", row.test)
    return " ".join([test, *(f"{k}={v}" for k, v in row.ids.items())])


def _curves(t: Table | None) -> dict[str, dict[str, list[tuple[int, float, float, bool]]]]:
    """{panel: {image column: [(depth, tok/s, stddev, flagged)]}} of a table's panels measured at 2+
    depths (a curve needs two points; a depth-0-only sweep draws none)."""
    panels: dict[str, dict[str, list[tuple[int, float, float, bool]]]] = {}
    for row, col, f in _cells(t):
        assert f.value is not None  # _cells keeps only cells with a value
        pt = (f.record.n_depth, f.value, f.record.stddev_ts or 0.0, bool(f.held_flags))
        panels.setdefault(_curve_key(row), {}).setdefault(col, []).append(pt)
    return {k: v for k, v in panels.items() if len({p[0] for pts in v.values() for p in pts}) >= 2}


def depth_figure(t: Table | None, colors: Colors | None = None) -> Figure | None:
    """Depth curves (llama-bench -d): tok/s vs KV depth (tokens), one panel per test (pp512, tg128,
    each micro-batch and identifying value its own), one line per image column in the image's color
    (`colors`: palette, the same as every other figure), error bars = stddev, a black x over a flagged
    point; y from zero. None where no test was measured at two depths or more."""
    panels = _curves(t)
    if not panels:
        return None
    colors = colors or palette([t] if t is not None else [])
    fig = _figure(5.0 * len(panels), 3.8)
    _title(fig, t)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (name, lines) in zip(axes, sorted(panels.items()), strict=True):
        for img, pts in sorted(lines.items()):
            xs, ys, es, flags = zip(*sorted(pts), strict=True)
            ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, color=colors[img], label=strip_controls(img))
            bad = [(x, y) for x, y, flagged in zip(xs, ys, flags, strict=True) if flagged]
            if bad:
                bx, by = zip(*bad, strict=True)
                ax.plot(bx, by, "x", ms=10, mew=2, color="black", zorder=4, label="_flagged")
        depths = sorted({p[0] for pts in lines.values() for p in pts})
        ax.set_xticks(depths, _tick_labels(depths), fontsize=8)
        ax.set_title(strip_controls(name), fontsize=9)
        ax.set_xlabel("depth (tokens in the KV cache)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("tokens/s")
    return fig


_DRAW: dict[str, Callable[[Table | None, Colors], Figure | None]] = {
    "prefill": lambda t, c: prefill_figure(t, c),
    "decode": lambda t, c: decode_figure(t, c),
    "mixed": lambda t, c: bar_figure(t, "prefill + decode tokens/s", c),
    "served": lambda t, c: served_figure(t, c),
    "depth-prefill": lambda t, c: depth_figure(t, c),
    "depth-decode": lambda t, c: depth_figure(t, c),
}


_Plan = dict[str, tuple["Table | None", "str | None"]]  # plot name -> (its table, why it is left out)


def _plan(tables: list[Table]) -> _Plan:
    """Each plot's table (the axis of its name, as the page shows it: decode folded over the
    micro-batch, fold_decode_ub) and why it is left out (_too_big; None: drawn). The decode bars leave
    the rows at depth > 0 to the depth curves where those are drawn (_off_depth)."""
    by_axis = {t.axis: fold_decode_ub(t)[0] for t in tables}
    axis = {name: name.removeprefix("depth-") for name in _DRAW}  # a depth plot draws its axis's table
    shown = {name: by_axis.get(axis[name]) for name in _DRAW}
    if _too_big("depth-decode", shown["depth-decode"]) is None:
        shown["decode"] = _off_depth(shown["decode"])
    return {name: (t, _too_big(name, t)) for name, t in shown.items()}


def figures(tables: list[Table], plan: _Plan | None = None) -> dict[str, Figure]:
    """Every plot the report's tables allow, by file stem: prefill, decode, mixed, served, and the
    depth curves depth-prefill / depth-decode (where a test was measured at 2+ depths). Plots are
    drawn from the tables (tables.tables) as the page shows them (_plan: decode one row per tg test),
    so they use the same test identity and show every shown row once (a depth row on its curve); a
    plot too big to read is left out (left_out says why). `plan`: _plan(tables), made before."""
    plan = plan or _plan(tables)
    colors = palette(tables)
    made = {name: _DRAW[name](t, colors) for name, (t, why) in plan.items() if not why}
    return {name: fig for name, fig in made.items() if fig is not None}


def left_out(tables: list[Table], plan: _Plan | None = None) -> list[str]:
    """One line per plot `figures` leaves out for its size, saying why and how to narrow the report."""
    return [why for _t, why in (plan or _plan(tables)).values() if why]


# ---------------------------------------------------------------------------------------------
# Power and clocks over a run, from its raw telemetry trace

TRACE_MAX_POINTS = 6000  # per GPU and series: a longer trace is thinned (every k-th sample) to draw
MAX_RUN_FIGURES = 12  # power-and-clocks figures in one report: more runs are named, not drawn


@dataclass
class TraceRun:
    """One run shown in the report (image digest, run id, model) whose records carry telemetry: where
    its trace is looked for (results/<digest12>/telemetry/<run_id>-<model>.jsonl; a campaign host's
    folder results/hosts/<key>/...; beside the record's log file) and its records' Facts (their test
    windows, their labels and telemetry flags)."""

    digest: str
    run_id: str
    model: str
    label: str
    candidates: list[Path]
    cells: list[Facts] = field(default_factory=list)

    @property
    def name(self) -> str:
        """A file stem: telemetry-<digest12>-<run id>-<model>, unsafe characters replaced."""
        return re.sub(
            r"[^A-Za-z0-9._-]+", "_", f"telemetry-{short_digest(self.digest)}-{self.run_id}-{self.model}"
        )


def _inside(path: Path, root: Path | None) -> bool:
    """`path` is a `.jsonl` file name inside `root` (links resolved); False without a root."""
    if root is None or path.suffix != ".jsonl":
        return False
    try:
        return Path(root).resolve() in path.resolve().parents
    except (OSError, RuntimeError, ValueError):
        return False


def _is_file(path: Path) -> bool:
    """`path` is a file (links followed); False, never an error, for a name no file can have: a part
    over 255 bytes, a path over PATH_MAX (OSError ENAMETOOLONG, which Path.is_file raises), a NUL."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def trace_runs(tables: list[Table], results_root: Path | None) -> list[TraceRun]:
    """The runs of the tables' records that were observed (a `telemetry` summary on some record),
    in table order, each with the places its trace may be (the first that exists is read)."""
    runs: dict[tuple[str, str, str], TraceRun] = {}
    for t in tables:
        for row in t.rows:
            for f in row.facts.values():
                if not isinstance((r := f.record).telemetry, dict):
                    continue
                key = (r.image.digest, r.run_id, r.model.name)
                run = runs.get(key)
                if run is None:
                    stem = (
                        Path(short_digest(r.image.digest)) / "telemetry" / f"{r.run_id}-{r.model.name}.jsonl"
                    )
                    cands = []
                    if results_root is not None:
                        host = (r.host or {}).get("key")
                        cands.append(Path(results_root) / stem)
                        if host:
                            cands.append(Path(results_root) / "hosts" / str(host) / stem)
                    if r.log_file:
                        cands.append(Path(r.log_file).parent.parent / "telemetry" / stem.name)
                    trace = r.telemetry.get("trace")  # `toolkit measure` keeps its trace beside its output
                    if isinstance(trace, str) and trace:
                        cands.append(Path(trace))
                    # a record names these paths, and an imported record is someone else's: only traces
                    # inside the results folder are read (never /proc/kmsg, never a 4 GB file elsewhere)
                    cands = [c for c in cands if _inside(c, results_root)]
                    run = runs[key] = TraceRun(
                        r.image.digest,
                        r.run_id,
                        r.model.name,
                        f"{f.image} {r.model.name} run {r.run_id}",
                        cands,
                    )
                if all(x.record is not r for x in run.cells):
                    run.cells.append(f)
    return list(runs.values())


def _gpu_series(samples: list[dict[str, Any]]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Per GPU source: (t, value) points of power_w, sclk_mhz, mclk_mhz, cap_w (samples of a source
    that names a vendor are GPU samples; others, the host's, are left out)."""
    gpus = {str(s.get("source")) for s in samples if s.get("vendor") and s.get("source")}
    out: dict[str, dict[str, list[tuple[float, float]]]] = {g: {} for g in sorted(gpus)}
    for s in samples:
        src = str(s.get("source"))
        t = finite_number(s.get("t"))
        if src not in out or t is None:
            continue
        for key in ("power_w", "sclk_mhz", "mclk_mhz", "cap_w"):
            v = finite_number(s.get(key))
            if v is not None:
                out[src].setdefault(key, []).append((t, v))
    return out


def _thin(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    pts = sorted(pts)
    step = max(1, math.ceil(len(pts) / TRACE_MAX_POINTS))
    return pts[::step] if step > 1 else pts


def run_figure(run: TraceRun, samples: list[dict[str, Any]]) -> Figure | None:
    """GPU power (W, the power cap dashed) and clocks (gfx/SM clock solid, memory clock dotted) over the
    run, seconds from its first sample; each test's window (its record's telemetry t0..t1) shaded and
    labelled with the test, red when the record carries a telemetry flag (gpu-shared, throttled, ...).
    None when the trace holds no GPU sample with a power or clock reading."""
    series = {g: v for g, v in _gpu_series(samples).items() if v.get("power_w") or v.get("sclk_mhz")}
    if not series:
        return None
    t_first = min(p[0] for v in series.values() for pts in v.values() for p in pts)
    fig = _figure(11.0, 6.0)
    ax_p, ax_c = fig.subplots(2, 1, sharex=True)
    for gpu, v in series.items():
        if v.get("power_w"):
            xs, ys = zip(*_thin(v["power_w"]), strict=True)
            line = ax_p.plot([x - t_first for x in xs], ys, lw=1, label=f"{gpu} power")[0]
            caps = sorted({c for _, c in v.get("cap_w", [])})
            for cap in caps:
                ax_p.axhline(cap, ls="--", lw=0.8, color=line.get_color(), label=f"{gpu} cap {cap:.0f} W")
        for key, style, what in (("sclk_mhz", "-", "gfx/SM clock"), ("mclk_mhz", ":", "memory clock")):
            if v.get(key):
                xs, ys = zip(*_thin(v[key]), strict=True)
                ax_c.plot([x - t_first for x in xs], ys, style, lw=1, label=f"{gpu} {what}")
    for f in run.cells:
        tel = f.record.telemetry or {}
        t0, t1 = finite_number(tel.get("t0")), finite_number(tel.get("t1"))
        if t0 is None or t1 is None or t1 <= t0:
            continue
        flagged = bool(f.telemetry_flags)
        for ax in (ax_p, ax_c):
            ax.axvspan(
                t0 - t_first, t1 - t_first, color="#d62728" if flagged else "#1f77b4", alpha=0.12, lw=0
            )
        ax_p.annotate(
            strip_controls(f.test + (" [" + ", ".join(f.telemetry_flags) + "]" if flagged else "")),
            ((t0 + t1) / 2 - t_first, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize=6,
            ha="center",
            va="top",
        )
    ax_p.set_ylim(bottom=0)
    ax_p.set_ylabel("GPU power (W)")
    ax_p.set_title(
        strip_controls(f"{run.label}: power and clocks (shaded: each test's window; red: flagged)"),
        fontsize=9,
    )
    ax_c.set_ylim(bottom=0)
    ax_c.set_ylabel("clock (MHz)")
    ax_c.set_xlabel("seconds from the first sample")
    for ax in (ax_p, ax_c):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    return fig


def telemetry_figures(tables: list[Table], results_root: Path | None) -> tuple[dict[str, Figure], list[str]]:
    """One power-and-clocks figure per observed run of the tables (trace_runs), by file stem, and a
    note for each run without one: trace missing, unreadable, holding no sample or no GPU sample.
    Never raises for a bad trace."""
    figs: dict[str, Figure] = {}
    notes: list[str] = []
    runs = trace_runs(tables, results_root)
    if len(runs) > MAX_RUN_FIGURES:
        notes.append(
            f"power plots of {len(runs) - MAX_RUN_FIGURES} more observed runs left out (only the first "
            f"{MAX_RUN_FIGURES} in table order are plotted): narrow the report with --run RUN_ID to plot another"
        )
    for run in runs[:MAX_RUN_FIGURES]:
        path = next((p for p in run.candidates if _is_file(p)), None)
        if path is None:
            notes += _missing_note(run, results_root)
            continue
        try:
            samples = [s for s in iter_trace(path) if isinstance(s, dict)]
        except (OSError, ValueError) as err:  # unreadable, not text: a note, never a crash
            notes.append(
                f"{run.label}: no power plot: {path} is unreadable ({type(err).__name__}: {err})"[:400]
            )
            continue
        if not samples:
            notes.append(f"{run.label}: no power plot: {path} holds no telemetry sample")
            continue
        fig = run_figure(run, samples)
        if fig is None and all(f.record.image.backend == "cpu" for f in run.cells):
            continue  # a CPU image's run samples the host only: no GPU plot expected, none to say
        if fig is None:
            notes.append(
                f"{run.label}: no power plot: {path} holds no GPU power or clock sample "
                "(a CPU image's run samples the host only)"
            )
            continue
        figs[run.name] = fig
    return figs, notes


def _missing_note(run: TraceRun, results_root: Path | None) -> list[str]:
    """The note for a run whose trace is in none of its places: none for a CPU image's run (it samples
    the host only: no GPU plot to miss); in a folder `toolkit export-run` wrote (run.json beside), that
    an export carries each record's telemetry summary, never the trace; else the place looked in."""
    if all(f.record.image.backend == "cpu" for f in run.cells):
        return []
    if results_root is not None and _is_file(Path(results_root) / "run.json"):
        why = (
            "an exported run (`toolkit export-run`) carries each record's telemetry summary (power, energy, "
            "flags: in the tables), not the trace; the measuring project's `toolkit report --format html` plots it"
        )
        return [f"{run.label}: no power plot: {why}"[:400]]
    where = str(run.candidates[0]) if run.candidates else "no results folder known"
    return [f"{run.label}: no power plot: its telemetry trace is missing ({where})"[:400]]


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=PNG_METADATA)
    return buf.getvalue()


@dataclass
class PlotSet:
    """Every plot of a report drawn once, as PNG bytes by file stem: `plots` (prefill, decode, mixed,
    served), `left_out` (why a plot too big to read is not drawn), `runs` (power and clocks per observed
    run) and `run_notes` (runs without one, and why)."""

    plots: dict[str, bytes]
    left_out: list[str]
    runs: dict[str, bytes]
    run_notes: list[str]


def draw(tables: list[Table], results_root: Path | None = None) -> PlotSet:
    """The report's plots drawn once (figures, telemetry_figures) for the html page and --plots alike,
    as PNG bytes (which to leave out for their size decided once: _plan). Text is drawn as written:
    matplotlib's mathtext is off (`text.parse_math`), so a model or image name holding `$...$` (an
    imported file's, `$\\undefined$` raised ParseFatalException: exit 1) is a label, not a formula."""
    from matplotlib import rc_context

    with rc_context({"text.parse_math": False}):
        runs, run_notes = telemetry_figures(tables, results_root)
        plan = _plan(tables)
        return PlotSet(
            {name: png_bytes(fig) for name, fig in figures(tables, plan).items()},
            left_out(tables, plan),
            {name: png_bytes(fig) for name, fig in runs.items()},
            run_notes,
        )


def write_pngs(
    tables: list[Table], out_dir: Path, results_root: Path | None = None, drawn: PlotSet | None = None
) -> list[Path]:
    """Write `<out_dir>/<name>.png` for each plot (atomic per file), the power-and-clocks figure of
    each observed run among them (telemetry_figures); return the paths. `drawn`: the plots already
    drawn for the same tables (draw), written as they are. Below `results_root` neither the folder
    nor a PNG (nor its temp file) is written through a link: BadInput, exit 4 (write_atomic)."""
    drawn = drawn or draw(tables, results_root)
    if not drawn.plots and not drawn.runs:  # nothing drawn: no empty folder left behind
        return []
    written = []
    for name, data in {**drawn.plots, **drawn.runs}.items():
        path = out_dir / f"{name}.png"
        write_atomic(path, data, root=results_root)
        written.append(path)
    return written
