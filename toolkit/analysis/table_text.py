"""Tables as text (github markdown and the html page share it): one value per cell (mean ± stddev
tok/s; the samples' median and range stay in --json and the CSV), the row's best marked where it leads
beyond the noise, a flagged number marked where it stands (†), and the notes under the tables (the
flags' legend, what tok/J holds, each column's roofline yardstick).
"""

from __future__ import annotations

from collections.abc import Callable

from toolkit.analysis.flag_help import FLAG_HELP
from toolkit.analysis.roofline import Roofline, why_no_roofline
from toolkit.analysis.tables import (
    Row,
    Table,
    _float,
    energy,
    fmt_tok_per_j,
    is_cpu_fallback,
    is_software_gpu,
    noise_band,
    rel_stddev,
    telemetry_flags,
)
from toolkit.results.identity import value
from toolkit.results.records import BenchRecord

FLAGGED_MARK = " †"
"""After a number measured while telemetry flagged the system (gpu-shared, throttled, host-busy, ...)."""

MARKS_NOTE = (
    "bold: the row's best, ahead of the next by more than the noise (2 x their combined relative stddev); "
    "†: the number was flagged (the flags column says why), never marked best"
)


def _num(x: float) -> str:
    """Two decimals, as llama-bench prints t/s; in exponent form from 10^9 up (a 1e300 stddev of a
    hostile row was 300 digits wide)."""
    return f"{x:.2f}" if abs(x) < 1e9 else f"{x:.3e}"


def fmt_cell(r: BenchRecord | None) -> str:
    """`mean ± stddev` tok/s (one value per cell: the samples' median and range are in --json and the
    CSV); process-level repetitions add `[N runs, spread S%]`, served cells their median TTFT/TPOT."""
    if r is None:
        return ""
    v = value(r)
    if v is None:
        return ""
    sd = f" ± {_num(r.stddev_ts)}" if r.stddev_ts is not None else ""
    if r.stddev_ts is None and len(r.samples_ts) == 1:
        sd = " (1 sample: stddev unknown)"
    text = f"{_num(v)}{sd}"
    runs = (r.model_extra or {}).get("between_runs")
    if runs:
        text += f" [{runs['runs']} runs, spread {runs['spread_pct']:.1f}%]"
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


def marks_note(ts: list[Table]) -> list[str]:
    """MARKS_NOTE when some cell of the tables carries a mark (bold or †), else nothing."""
    marked = any(
        best_column(row) or any(telemetry_flags(r) for r in row.cells.values()) for t in ts for row in t.rows
    )
    return [MARKS_NOTE] if marked else []


def best_column(row: Row) -> str | None:
    """The image column whose tok/s leads the row beyond the noise (noise_band of it and the next:
    2 x their combined relative stddev); None with fewer than two numbers to rank, a lead inside the
    noise, or an unknown noise. A flagged or CPU-fallback cell is never the best."""
    ranked = sorted(
        (
            (v, c)
            for c, r in row.cells.items()
            if (v := value(r)) is not None and not telemetry_flags(r) and not is_cpu_fallback(r)
        ),
        reverse=True,
    )
    if len(ranked) < 2 or ranked[1][0] <= 0:
        return None
    (v1, c1), (v2, c2) = ranked[0], ranked[1]
    rsd = [rel_stddev(row.cells[c1]), rel_stddev(row.cells[c2])]
    if any(x is None for x in rsd):
        return None
    return c1 if v1 / v2 - 1 > noise_band(rsd[0] or 0.0, rsd[1] or 0.0) else None


def table_rows(
    t: Table, bold: Callable[[str], str] = lambda x: x, esc: Callable[[str], str] = lambda x: x
) -> tuple[list[str], list[list[str]]]:
    """Header and body of a table as text cells (shared by github and html): every text through
    `esc` (github: core.text.md_text, so a name cannot add a column, a row or a link), the row's best
    number then through `bold` (best_column; github: `**x**`), a flagged number followed by FLAGGED_MARK."""
    headers = ["test", *t.id_columns]
    for c in t.columns:
        headers.append(t.header(c))
        if c in t.energy_columns:
            headers.append(f"tok/J {c}")
        if c in t.roof_columns:
            headers.append(f"roofline {c}")
    headers.append("flags")
    body = []
    for row in t.rows:
        line = [esc(row.test), *map(esc, row.ids.values())]
        best = best_column(row)
        for c in t.columns:
            cell = row.cells.get(c)
            text = esc(fmt_cell(cell))
            if text and cell is not None and telemetry_flags(cell):
                text += FLAGGED_MARK
            line.append(bold(text) if c == best else text)
            if c in t.energy_columns:
                e = energy(cell) if cell is not None else None
                line.append(fmt_tok_per_j(e.tok_per_j if e else None))
            if c in t.roof_columns:
                line.append(esc(fmt_roof(row.roof.get(c))))
        line.append(esc("; ".join(row.row_flags())))
        body.append(line)
    return [esc(h) for h in headers], body


def legend(ts: list[Table]) -> list[str]:
    used = dict.fromkeys(f.split(" ")[0] for t in ts for row in t.rows for f in row.row_flags())
    return [
        f"{name}: {FLAG_HELP.get(name, FLAG_HELP.get(name.split(':', 1)[0], 'stored with the record by its runner'))}"
        for name in sorted(
            used, key=lambda n: (list(FLAG_HELP).index(n) if n in FLAG_HELP else len(FLAG_HELP), n)
        )
    ]


def energy_notes(ts: list[Table]) -> list[str]:
    """What the tok/J columns hold, when a table has one."""
    if not any(t.energy_columns for t in ts):
        return []
    return [
        "tok/J: tokens of the test's window ((n_prompt + n_gen) x repetitions, from the first measured "
        "repetition to the result row) per joule its GPUs used in that window (hardware energy counter, or "
        "averaged power integrated over a window long enough for the sensor); empty where the energy is "
        "invalid (the row's energy-invalid:<reason> flag says why) or the GPU was shared (gpu-shared)"
    ]


def roof_notes(ts: list[Table]) -> list[str]:
    """One note per image column: its yardstick (product, GPU count, peaks, active share), or for a
    GPU image without one, why not (unknown product, multi-GPU layer split: roofline.why_no_roofline)."""
    seen: dict[str, Roofline] = {}
    missing: dict[str, str] = {}
    for t in ts:
        for row in t.rows:
            for col, r in row.cells.items():
                if col in row.roof:
                    seen[col] = row.roof[col]
                elif r.image.backend != "cpu" and not is_software_gpu(r) and (why := why_no_roofline(r)):
                    missing.setdefault(col, why)
    out = [
        f"{col}: {roof.gpu.product} ({roof.gpu.gfx_target}) peak {roof.gpu.mem_bw_gbs:.0f} GB/s, "
        f"{roof.gpu.fp16_matrix_tflops:.0f} TFLOP/s FP16 matrix; active share of the weights "
        f"{100 * roof.share.bytes_share:.1f}% (from {roof.share.source})"
        + (f"; {roof.note}" if roof.note else "")
        for col, roof in sorted(seen.items())
    ]
    return out + [f"{col}: no roofline: {why}" for col, why in sorted(missing.items()) if col not in seen]
