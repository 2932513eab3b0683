"""[BenchRecord] --plot--> matplotlib figures: prefill vs prompt length, decode bars, served throughput.

Figures are `matplotlib.figure.Figure` objects on the Agg canvas (FigureCanvasAgg): no pyplot, no
global backend switch, no display needed. Callers pass records already selected (report.select_for_report).
"""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from toolkit.records import BenchRecord
from toolkit.report import concurrency, image_label, is_cpu_fallback, ub_no_effect, value

PNG_METADATA = {"Software": None}  # keep PNG bytes reproducible across matplotlib versions


def _usable(records: list[BenchRecord], axis: str) -> list[BenchRecord]:
    return [r for r in records if r.axis == axis and value(r) is not None and not is_cpu_fallback(r)]


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def prefill_figure(records: list[BenchRecord]) -> Figure | None:
    """One panel per image: prefill tok/s vs prompt length, one line per micro-batch (error bars =
    stddev); hollow markers where the micro-batch was clamped (ub-no-effect)."""
    rs = [r for r in _usable(records, "prefill") if r.n_depth == 0]
    images = sorted({image_label(r) for r in rs})
    if not images:
        return None
    fig = _figure(5.0 * len(images), 3.8)
    axes = fig.subplots(1, len(images), squeeze=False, sharey=True)[0]
    for ax, img in zip(axes, images, strict=True):
        mine = [r for r in rs if image_label(r) == img]
        for ub in sorted({r.n_ubatch or 0 for r in mine}):
            pts = sorted((r.n_prompt, value(r), r.stddev_ts or 0.0) for r in mine if (r.n_ubatch or 0) == ub)
            xs, ys, es = zip(*pts, strict=True)
            bars = ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=f"ub{ub}" if ub else "default")
            off = [(r.n_prompt, value(r)) for r in mine if (r.n_ubatch or 0) == ub and ub_no_effect(r)]
            if off:  # hollow markers: llama.cpp clamped this micro-batch, the knob was off
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
        prompts = sorted({r.n_prompt for r in mine})
        ax.set_xticks(prompts, [str(p) for p in prompts])
        ax.minorticks_off()
        ax.set_title(img, fontsize=9)
        ax.set_xlabel("prompt length (tokens)")
        ax.legend(title="micro-batch", fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("prefill tokens/s")
    return fig


def decode_figure(records: list[BenchRecord]) -> Figure | None:
    """Bars per image for each decode test (its best micro-batch setting), error bars = stddev."""
    rs = _usable(records, "decode")
    if not rs:
        return None
    tests = sorted({r.test for r in rs}, key=lambda t: next((r.n_depth, r.n_gen) for r in rs if r.test == t))
    images = sorted({image_label(r) for r in rs})
    fig = _figure(max(5.0, 1.6 * len(tests) * len(images)), 3.8)
    ax = fig.subplots()
    width = 0.8 / len(images)
    for i, img in enumerate(images):
        xs, ys, es = [], [], []
        for j, test in enumerate(tests):
            cands = [r for r in rs if image_label(r) == img and r.test == test]
            if cands:
                best = max(cands, key=lambda r: value(r))
                xs.append(j + (i - (len(images) - 1) / 2) * width)
                ys.append(value(best))
                es.append(best.stddev_ts or 0.0)
        ax.bar(xs, ys, width, yerr=es, capsize=3, label=img)
    ax.set_xticks(range(len(tests)), tests)
    ax.set_ylabel("decode tokens/s")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def served_figure(records: list[BenchRecord]) -> Figure | None:
    """Served output tok/s vs concurrency, one line per image."""
    rs = [r for r in _usable(records, "served") if concurrency(r) is not None]
    if not rs:
        return None
    fig = _figure(6.0, 3.8)
    ax = fig.subplots()
    for img in sorted({image_label(r) for r in rs}):
        pts = sorted((concurrency(r), value(r)) for r in rs if image_label(r) == img)
        xs, ys = zip(*pts, strict=True)
        ax.plot(xs, ys, marker="o", label=img)
    ax.set_xscale("log", base=2)
    levels = sorted({concurrency(r) for r in rs})
    ax.set_xticks(levels, [str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("output tokens/s")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def figures(records: list[BenchRecord]) -> dict[str, Figure]:
    """Every plot the records allow, by file stem: prefill, decode, served."""
    made = {
        "prefill": prefill_figure(records),
        "decode": decode_figure(records),
        "served": served_figure(records),
    }
    return {name: fig for name, fig in made.items() if fig is not None}


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=PNG_METADATA)
    return buf.getvalue()


def write_pngs(records: list[BenchRecord], out_dir: Path) -> list[Path]:
    """Write `<out_dir>/<name>.png` for each plot (atomic per file); return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures(records).items():
        path = out_dir / f"{name}.png"
        tmp = path.with_suffix(".png.tmp")
        tmp.write_bytes(png_bytes(fig))
        tmp.replace(path)
        written.append(path)
    return written
