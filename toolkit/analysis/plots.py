"""[BenchRecord] --plot--> matplotlib figures: prefill vs prompt length (a line per depth and
micro-batch), decode and pp+tg bars (wrapped to a readable width), served throughput; each figure on
one y-axis from zero, drawn from the report's table rows (every row, nothing merged).

Figures are `matplotlib.figure.Figure` objects on the Agg canvas (FigureCanvasAgg): no pyplot, no
global backend switch, no display needed. Callers pass the report's tables (report.tables).
"""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.analysis.tables import Row, Table, is_cpu_fallback, ub_clamped, value
from toolkit.results.records import BenchRecord

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
    """(row, column, record) of a table's usable cells: a number, not a CPU fallback."""
    if t is None:
        return []
    return [
        (row, col, r)
        for row in t.rows
        for col, r in row.cells.items()
        if value(r) is not None and not is_cpu_fallback(r)
    ]


def _series(row: Row, r: BenchRecord) -> tuple[int, int, str]:
    """A line of the prefill plot: the table row minus its prompt length — depth, micro-batch, what
    tells rows apart, and the identifying values — as (depth, micro-batch, label), so lines sort by
    depth, then micro-batch. Built from the row's own label, so the plot has exactly the table's rows."""
    rest = row.test.split(" ", 1)[1] if " " in row.test else "default"
    parts = [rest.replace("@ d", "d", 1)] + [f"{k}={v}" for k, v in row.ids.items()]
    return (r.n_depth, r.n_ubatch or 0, " ".join(parts))


def prefill_figure(t: Table | None) -> Figure | None:
    """One panel per image column: prefill tok/s vs prompt length, one line per series — the table's
    rows that differ only in prompt length (each depth its own line; error bars = stddev); hollow
    markers where llama.cpp clamped the micro-batch. Every panel shares one y-axis from zero."""
    cells = _cells(t)
    images = sorted({col for _, col, _ in cells})
    if not images:
        return None
    fig = _figure(5.0 * len(images), 3.8)
    axes = fig.subplots(1, len(images), squeeze=False, sharey=True)[0]
    for ax, img in zip(axes, images, strict=True):
        mine = [(row, r) for row, col, r in cells if col == img]
        for series in sorted({_series(row, r) for row, r in mine}):
            pts = sorted(
                (r.n_prompt, value(r), r.stddev_ts or 0.0, bool(ub_clamped(r)))
                for row, r in mine
                if _series(row, r) == series
            )
            xs, ys, es, _ = zip(*pts, strict=True)
            bars = ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=series[2])
            off = [(x, y) for x, y, _, clamped in pts if clamped]
            if off:  # hollow markers: llama.cpp computed with a smaller effective micro-batch
                ox, oy = zip(*off, strict=True)
                ax.plot(
                    ox,
                    oy,
                    "o",
                    mfc="white",
                    mew=1.5,
                    zorder=3,
                    color=bars.lines[0].get_color(),
                    label="_clamped",
                )
        ax.set_xscale("log", base=2)
        prompts = sorted({r.n_prompt for _, r in mine})
        ax.set_xticks(prompts, [str(p) for p in prompts])
        ax.minorticks_off()
        ax.set_title(img, fontsize=9)
        ax.set_xlabel("prompt length (tokens)")
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylim(bottom=0)
    axes[0].set_ylabel("prefill tokens/s")
    return fig


MAX_WIDTH = 14.0  # inches: a bar figure wider than this is wrapped into more panel rows


def bar_figure(t: Table | None, ylabel: str = "decode tokens/s") -> Figure | None:
    """One bar group per table row (the same test identity as the table: tg128 at ub512 and at ub2048
    are two groups), one bar per image column, error bars = stddev. Groups wrap into panel rows of at
    most MAX_WIDTH inches, all on one y-axis from zero; long labels wrap."""
    cells = _cells(t)
    if not cells:
        return None
    assert t is not None
    groups = [row for row in t.rows if any(row is rr for rr, _, _ in cells)]
    images = sorted({col for _, col, _ in cells})
    slot = 0.7 * len(images) + 0.5  # inches per group
    per = max(1, int((MAX_WIDTH - 1.0) // slot))
    panels = math.ceil(len(groups) / per)
    width = min(MAX_WIDTH, max(5.0, slot * min(per, len(groups)) + 1.0))
    fig = _figure(width, 3.4 * panels + 0.4)
    axes = fig.subplots(panels, 1, squeeze=False, sharey=True)[:, 0]
    bw = 0.8 / len(images)
    for p, ax in enumerate(axes):
        chunk = groups[p * per : (p + 1) * per]
        for i, img in enumerate(images):
            xs, ys, es = [], [], []
            for j, row in enumerate(chunk):
                r = row.cells.get(img)
                if r is not None and (v := value(r)) is not None and not is_cpu_fallback(r):
                    xs.append(j + (i - (len(images) - 1) / 2) * bw)
                    ys.append(v)
                    es.append(r.stddev_ts or 0.0)
            ax.bar(xs, ys, bw, yerr=es, capsize=3, label=img)
        labels = [" ".join([row.test, *(f"{k}={v}" for k, v in row.ids.items())]) for row in chunk]
        ax.set_xticks(range(len(chunk)), [textwrap.fill(x, 18) for x in labels], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylim(bottom=0)
    axes[0].legend(fontsize=8)
    return fig


def decode_figure(t: Table | None) -> Figure | None:
    """The decode table as bars (bar_figure)."""
    return bar_figure(t, "decode tokens/s")


def served_figure(t: Table | None) -> Figure | None:
    """Served output tok/s vs concurrency, one line per image column and row series."""
    cells = [(row, col, r) for row, col, r in _cells(t) if r.engine.get("concurrency") is not None]
    if not cells:
        return None
    fig = _figure(6.0, 3.8)
    ax = fig.subplots()
    series: dict[str, list[tuple[int, float]]] = {}
    for row, col, r in cells:
        name = " ".join([col, f"in{r.n_prompt} out{r.n_gen}", *(f"{k}={v}" for k, v in row.ids.items())])
        v = value(r)
        assert v is not None  # _cells keeps only cells with a value
        series.setdefault(name, []).append((int(r.engine["concurrency"]), v))
    for name, pts in sorted(series.items()):
        xs, ys = zip(*sorted(pts), strict=True)
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xscale("log", base=2)
    levels = sorted({x for pts in series.values() for x, _ in pts})
    ax.set_xticks(levels, [str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("output tokens/s")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def figures(tables: list[Table]) -> dict[str, Figure]:
    """Every plot the report's tables allow, by file stem: prefill, decode, mixed, served. Plots are
    drawn from the tables (report.tables), so they use the same test identity and show every row."""
    by_axis = {t.axis: t for t in tables}
    made = {
        "prefill": prefill_figure(by_axis.get("prefill")),
        "decode": decode_figure(by_axis.get("decode")),
        "mixed": bar_figure(by_axis.get("mixed"), "prefill + decode tokens/s"),
        "served": served_figure(by_axis.get("served")),
    }
    return {name: fig for name, fig in made.items() if fig is not None}


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=PNG_METADATA)
    return buf.getvalue()


def write_pngs(tables: list[Table], out_dir: Path) -> list[Path]:
    """Write `<out_dir>/<name>.png` for each plot (atomic per file); return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures(tables).items():
        path = out_dir / f"{name}.png"
        tmp = path.with_suffix(".png.tmp")
        tmp.write_bytes(png_bytes(fig))
        tmp.replace(path)
        written.append(path)
    return written
