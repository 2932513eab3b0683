"""[BenchRecord] --report--> tables on the two axes, prefill (pp) and decode (tg).

Pure functions over records (never row indexes): `select_latest` keeps the newest ok record per
test-defining key; `axis_table` pivots to rows = test (e.g. `pp2048 ub512`) and columns = image
(`name@short-digest`), cells = "tok/s ± stddev". Rendering uses tabulate.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tabulate import tabulate

from toolkit.records import BenchRecord

FORMATS = ("github", "csv", "json")


def image_label(r: BenchRecord) -> str:
    """Column label of an image: `name@abcdef012345`."""
    return f"{r.image.name}@{r.image.short}"


def row_label(r: BenchRecord) -> str:
    """Row label: test name plus the micro-batch when it is a prefill/mixed test (pp2048 ub512)."""
    if r.axis in ("prefill", "mixed") and r.n_ubatch:
        return f"{r.test} ub{r.n_ubatch}"
    return r.test


def select_latest(records: Iterable[BenchRecord], *, include_failed: bool = False) -> list[BenchRecord]:
    """Newest record per test-defining key (ok records only unless include_failed)."""
    latest: dict[tuple, BenchRecord] = {}
    for r in records:
        if r.status != "ok" and not include_failed:
            continue
        k = r.key()
        if k not in latest or r.created >= latest[k].created:
            latest[k] = r
    return sorted(latest.values(), key=lambda r: (r.image.name, r.axis, r.n_prompt, r.n_gen, r.n_ubatch or 0))


@dataclass
class Table:
    """A pivoted table: `rows[i][j]` is the cell for row_keys[i] x columns[j] (None when absent)."""

    axis: str
    title: str
    columns: list[str]
    row_keys: list[str]
    cells: dict[tuple[str, str], BenchRecord] = field(default_factory=dict)
    id_columns: list[str] = field(default_factory=list)

    def value(self, row: str, col: str) -> BenchRecord | None:
        return self.cells.get((row, col))


def _varying(records: list[BenchRecord]) -> list[str]:
    """Identifying columns that differ between records (shown only when they vary)."""
    out = []
    for name, get in (("model", lambda r: r.model.name), ("fa", lambda r: r.flash_attn),
                      ("ngl", lambda r: r.n_gpu_layers), ("n_batch", lambda r: r.n_batch)):
        if len({get(r) for r in records}) > 1:
            out.append(name)
    return out


def _row_key(r: BenchRecord, id_cols: list[str]) -> str:
    parts = [row_label(r)]
    for c in id_cols:
        v = {"model": r.model.name, "fa": r.flash_attn, "ngl": r.n_gpu_layers, "n_batch": r.n_batch}[c]
        parts.append(f"{c}={v}")
    return " ".join(parts)


def axis_table(records: list[BenchRecord], axis: str) -> Table:
    """Pivot the records of one axis (prefill | decode | mixed) into a Table."""
    rs = [r for r in records if r.axis == axis and r.avg_ts is not None]
    id_cols = _varying(rs)
    rs.sort(key=lambda r: (r.model.name, r.n_depth, r.n_prompt, r.n_gen, r.n_ubatch or 0))
    columns: list[str] = []
    rows: list[str] = []
    cells: dict[tuple[str, str], BenchRecord] = {}
    for r in rs:
        col, row = image_label(r), _row_key(r, id_cols)
        if col not in columns:
            columns.append(col)
        if row not in rows:
            rows.append(row)
        cells[(row, col)] = r
    title = {"prefill": "Prefill (pp), tokens/s", "decode": "Decode (tg), tokens/s",
             "mixed": "Prefill + decode (pp+tg), tokens/s"}[axis]
    return Table(axis, title, sorted(columns), rows, cells, id_cols)


def fmt_cell(r: BenchRecord | None) -> str:
    if r is None or r.avg_ts is None:
        return ""
    sd = f" ± {r.stddev_ts:.2f}" if r.stddev_ts is not None else ""
    return f"{r.avg_ts:.2f}{sd}"


def tables(records: list[BenchRecord]) -> list[Table]:
    latest = select_latest(records)
    return [t for t in (axis_table(latest, a) for a in ("prefill", "decode", "mixed")) if t.row_keys]


def render(records: list[BenchRecord], fmt: str = "github") -> str:
    """Render both axes as `github` (markdown), `csv` or `json` text."""
    ts = tables(records)
    if fmt == "json":
        return json.dumps([table_json(t) for t in ts], indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["axis", "test", "image", "digest", "model", "n_prompt", "n_gen", "n_depth", "n_ubatch",
                    "n_ubatch_effective", "avg_ts", "stddev_ts"])
        for t in ts:
            for (row, _col), r in t.cells.items():
                w.writerow([t.axis, row, r.image.name, r.image.digest, r.model.name, r.n_prompt, r.n_gen, r.n_depth,
                            r.n_ubatch, r.n_ubatch_effective, r.avg_ts, r.stddev_ts])
        return buf.getvalue()
    if not ts:
        return "no results yet: run `toolkit bench`"
    out = []
    for t in ts:
        body = [[row] + [fmt_cell(t.value(row, c)) for c in t.columns] for row in t.row_keys]
        out.append(f"### {t.title}\n\n" + tabulate(body, headers=["test"] + t.columns, tablefmt="github"))
    return "\n\n".join(out)


def table_json(t: Table) -> dict[str, Any]:
    return {
        "axis": t.axis,
        "title": t.title,
        "columns": t.columns,
        "rows": [
            {"test": row, **{c: ({"avg_ts": r.avg_ts, "stddev_ts": r.stddev_ts, "digest": r.image.digest,
                                   "n_ubatch_effective": r.n_ubatch_effective}
                                  if (r := t.value(row, c)) else None) for c in t.columns}}
            for row in t.row_keys
        ],
    }
