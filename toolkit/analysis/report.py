"""[BenchRecord] --report--> the rendered report: tables (toolkit.analysis.tables), verdict and plots as
github markdown, csv, json or one self-contained offline html page (inline CSS, plots as base64 PNG).

This module sits on top: it imports tables, verdict and plots; none of them imports it.
"""

from __future__ import annotations

import base64
import codecs
import csv
import functools
import io
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import to_json

from toolkit.analysis import tables
from toolkit.analysis import verdict as verdict_mod
from toolkit.analysis.caveats import held_caveats, smoke_caveats
from toolkit.analysis.facts import Facts, facts_of
from toolkit.analysis.provenance import (
    ColumnCard,
    Memo,
    column_cards,
    provenance,
    system_cells,
)
from toolkit.analysis.table_text import (
    DECODE_UB_NOTE,
    TEXT_MARKS_NOTE,
    column_legend,
    columns,
    fit_table,
    github_table,
    short_labels,
    table_notes,
    table_rows,
    wrap,
)
from toolkit.analysis.tables import ReportOptions, Row, Table, accounting, fold_decode_ub
from toolkit.core import invocation
from toolkit.core.text import Prose, counted, html_text, md_cell, md_line, md_text, one_line, strip_controls
from toolkit.results import no_results, write_atomic
from toolkit.results.canary_check import stored_canaries
from toolkit.results.identity import keys_cached
from toolkit.results.records import NO_TEST, BenchRecord

if TYPE_CHECKING:  # imported where drawn (html, --plots): other reports skip plots and telemetry (~50 ms)
    from toolkit.analysis import plots

FORMATS = ("github", "text", "csv", "json", "html")


@dataclass(frozen=True)
class Shown:
    """One report's selection, made once (Shown.of): the Facts of the records it shows (select_for_report,
    in its order), the tables over them, each column's short label (short_labels, every format's); and
    of the whole set read: its accounting line (tables.accounting, without refused records), how many
    records were read and how many failed, and its caveats (caveats.smoke_caveats, held_caveats). The
    sections read it; none reads the records again."""

    facts: list[Facts]
    tables: list[Table]
    labels: dict[str, str]
    counts: str
    read: int
    caveats: list[str]
    failures: list[dict[str, Any]]
    """Each failed record read: {image, digest, run_id, test, status, error} (the json report's `failed`)."""

    @property
    def failed(self) -> int:
        return len(self.failures)

    @functools.cached_property
    def display(self) -> tuple[list[Table], list[str]]:
        """The tables as the table formats show them, decode rows folded once per report (folded_tables:
        the tables, the fold's note); the column cards count the fold from the same tables."""
        return folded_tables(self.tables)

    @classmethod
    def of(cls, records: list[BenchRecord], opts: ReportOptions) -> Shown:
        chosen, sel = tables.select_with_accounting(records)
        facts = facts_of(chosen, opts)
        good = {id(r) for r in tables.made_good(records)}  # a failure a later run made good: not failed
        failures = [
            {
                "image": r.image.name,
                "digest": r.image.digest,
                "run_id": r.run_id,
                "test": r.test,
                "status": r.status,
                "error": r.error,
            }
            for r in records
            if r.status != "ok" and id(r) not in good
        ]
        failures.sort(key=lambda f: tuple(str(f[k]) for k in ("image", "digest", "run_id", "test", "error")))
        counts = accounting(records, 0, sel, len(good)) + _failed_names(failures)
        caveats = smoke_caveats(records) + held_caveats(facts)
        ts = tables.axis_tables(facts, opts)
        return cls(facts, ts, short_labels(ts), counts, len(records), caveats, failures)

    def accounting(self, refused: int) -> str:
        """The accounting line, with the records the store's reader refused."""
        return self.counts + (f", {refused} unreadable or invalid (see warnings)" if refused else "")


FAILED_SAID = 200
"""The most characters of one failed record's reason the accounting line shows (the rest as `...`)."""


def _said(why: str) -> str:
    return why if len(why) <= FAILED_SAID else why[: FAILED_SAID - 3] + "..."


def _failed_names(failures: list[dict[str, Any]]) -> str:
    """` (IMAGE TEST: why; ... and N more)` after the accounting line's `N failed`: the first 3 failed
    records by name (IMAGE alone where the record is of no one test: records.NO_TEST, a crash or
    Ctrl-C between tests), each reason cut at FAILED_SAID characters (a 10 KB error was 130 lines of
    the text report's head), as the json report's `failed` lists them all whole; '' where none failed."""
    said = [
        f"{f['image']}{'' if f['test'] in ('', NO_TEST) else ' ' + f['test']}: "
        f"{_said(one_line(str(f['error'] or f['status'])))}"
        for f in failures[:3]
    ]
    more = f" and {len(failures) - 3} more" if len(failures) > 3 else ""
    return f" ({'; '.join(said)}{more})" if said else ""


def render(
    records: list[BenchRecord],
    fmt: str = "github",
    *,
    opts: ReportOptions | None = None,
    refused: int = 0,
    results_root: Path | None = None,
    drawn: plots.PlotSet | None = None,
    title: str | None = None,
    shown: Shown | None = None,
    width: int | None = None,
    controls: Sequence[Mapping[str, Any]] = (),
) -> str:
    """Render tables, flags and verdict as `github` (markdown), `text` (a terminal's: every line at most
    `width` columns, default shutil.get_terminal_size), `csv`, `json` or `html`: the verdict first, then what
    was measured (provenance: model, dates, host, GPU, builds), then the tables (and on the html page the
    plots). `title` heads the page (default: the model(s) measured).

    Every format states how many records it read, used and superseded (`refused`: records the store's reader
    could not use). `results_root`: the results folder the records were read from (the html page plots each
    shown run's power and clocks from the raw traces kept there: plots.telemetry_figures). `controls`: the
    canary results stored beside the records (results.canary_check.stored_canaries), whose CPU control a shown
    canary is compared with when the control's records are not shown. `drawn`: the html page's plots
    (plots.draw), else drawn here. `shown`: the records' selection under `opts` (Shown.of), made here when
    None."""
    opts = opts or ReportOptions()
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    shown = shown or Shown.of(records, opts)  # once: tables, verdict and provenance read the same records
    if fmt == "csv":
        return render_csv(shown.tables)
    if not shown.tables and fmt in ("text", "github"):  # no verdict either: say why there is no table
        why = _no_table(shown)
        return (
            "\n".join(wrap(why, max(width or shutil.get_terminal_size().columns, 20)))
            if fmt == "text"
            else md_line(why)
        )
    v = verdict_mod.judge(shown.facts, opts, shown.caveats)
    memo: Memo = {}  # each image's line worked out once for both
    prov = provenance(shown.facts, controls, memo)
    cards = column_cards(shown.tables, shown.labels, controls, memo, shown.display[0])
    memo.clear()  # not held while the text is made
    if fmt == "json":
        return json_text(
            {
                "provenance": prov.to_json(),
                "columns": [c.to_json() for c in cards],
                "tables": [table_json(t) for t in shown.tables],
                "verdict": verdict_mod.verdict_json(v),
                "options": opts.__dict__,
                "records": shown.accounting(refused),
                "failed": shown.failures,
            }
        )
    said = verdict_mod.format_verdict(v, markdown=fmt == "github")  # the verdict in the format's words
    front = Front(title or prov.heading(), said, prov.lines(), cards)
    if fmt == "html":
        from toolkit.analysis import plots

        return render_html(shown, front, drawn or plots.draw(shown.tables, results_root))
    if fmt == "text":
        return _render_text(shown, front, refused, width or shutil.get_terminal_size().columns)
    return _render_markdown(shown, front, refused)


def json_text(doc: dict[str, Any]) -> str:
    """`doc` (texts, numbers, None, lists, tuples, dicts with text keys) as json.dumps(doc, indent=2,
    allow_nan=False) writes it (ValueError on a NaN or an infinity, as it), but for some floats' spelling
    (2.5e-7 where json.dumps writes 2.5e-07: the same float read back). Written by pydantic_core's encoder
    (faster than the standard library's once indented), then DEL and non-ASCII characters escaped by json's
    own escaper. json.dumps writes it where pydantic_core would differ in content: a NaN or an infinity (also
    any text holding those words), a lone surrogate or a type it refuses, a pydantic_core without
    `inf_nan_mode`."""
    try:
        out = to_json(doc, indent=2, inf_nan_mode="constants")
    except (ValueError, TypeError):  # PydanticSerializationError is a ValueError
        return json.dumps(doc, indent=2, allow_nan=False)
    if b"NaN" in out or b"Infinity" in out:
        return json.dumps(doc, indent=2, allow_nan=False)
    if b"\x7f" in out:
        out = out.replace(b"\x7f", b"\\u007f")  # DEL is one byte in UTF-8, never part of another character
    if not out.isascii():
        chars = set(out.translate(None, _ASCII).decode())  # its few non-ASCII characters
        if len(chars) > 64:
            return out.decode().encode("ascii", _JSON_ESCAPE).decode("ascii")
        for c in chars:  # each escaped in the bytes: no 2-4 bytes a character copy of 10 MB
            out = out.replace(c.encode(), encode_basestring_ascii(c)[1:-1].encode("ascii"))
    return out.decode("ascii")


def _json_escaped(err: UnicodeError) -> tuple[str, int]:
    """The codec error handler `_JSON_ESCAPE`: the characters ASCII cannot hold as json.dumps escapes
    them (\\u00b1; a surrogate pair past U+FFFF)."""
    assert isinstance(err, UnicodeEncodeError)
    return encode_basestring_ascii(err.object[err.start : err.end])[1:-1], err.end


_ASCII = bytes(range(128))
_JSON_ESCAPE = "toolkit.json-escape"
codecs.register_error(_JSON_ESCAPE, _json_escaped)


@dataclass(frozen=True)
class Front:
    """What every page opens with, in its format's words: the title, the verdict as text (markdown for
    github: verdict.format_verdict), what was measured (Provenance.lines), and each column's system
    description (provenance.column_cards, in short-label order as display_tables' legend)."""

    title: str
    verdict: str
    measured: list[str]
    cards: list[ColumnCard]

    def columns(self, legend: list[str]) -> list[tuple[str, list[str]]]:
        """Each column as the Columns section says it: (its `legend` line: display_tables', its
        description: ColumnCard.lines; one column's in short)."""
        alone = len(self.cards) == 1
        return [(n, c.lines(alone)) for n, c in zip(legend, self.cards, strict=True)]


def _no_table(shown: Shown) -> str:
    """Why a report has no table: records read but none ok to tabulate, or none at all."""
    if shown.read:  # read, but nothing to tabulate: say so, never "no results"
        again = invocation.again("report", "--json", drop=("--format", "--json"))  # as typed: --results DIR
        return Prose(
            f"no ok result to tabulate: {counted(shown.read, 'record')} read, {shown.failed} failed; "
            f"`{again}` lists them with their errors",
            again,
        )
    return no_results()


def folded_tables(ts: list[Table]) -> tuple[list[Table], list[str]]:
    """The tables as every table format shows them (text, github, html; csv and json keep every
    record): decode rows folded over the micro-batch (fold_decode_ub); (tables, [DECODE_UB_NOTE] when
    a row was folded, naming each row whose images' cells are of different ubs, else [])."""
    folded = [fold_decode_ub(t) for t in ts]
    tables = [t for t, _ in folded]
    apart = [
        f"{row.test} ({', '.join(f'{c} ub{r.n_ubatch}' for c, r in row.cells.items())})"
        for t in tables
        for row in t.rows
        if t.axis == "decode" and len({r.n_ubatch for r in row.cells.values()}) > 1
    ]
    said = f"; no ub every image measured, so the cells differ in ub: {'; '.join(apart[:4])}" if apart else ""
    more = f" and {len(apart) - 4} more row(s)" if len(apart) > 4 else ""
    return tables, [DECODE_UB_NOTE + said + more] if any(f for _, f in folded) else []


def display_tables(shown: Shown) -> tuple[list[Table], list[str], list[str]]:
    """The tables as the page, the terminal and github show them: decode rows folded (Shown.display),
    what each short column label (Shown.labels) stands for (column_legend); (tables, the legend's lines
    in label order, the fold's note when a row was folded)."""
    folded, fold_note = shown.display
    return folded, column_legend(folded, shown.labels), fold_note


def _render_text(shown: Shown, front: Front, refused: int, width: int) -> str:
    """The report for a terminal `width` columns wide (no line longer; 20 at least): title, verdict,
    what was measured, then each table fitted (fit_table: roofline and tok/J columns dropped and said,
    image columns in blocks, cells wrapped) with its flags listed under it, then the notes."""
    width = max(width, 20)
    ts, legend, fold_note = display_tables(shown)
    out = [front.title, "=" * min(width, columns(front.title)), ""]
    out += front.verdict.splitlines()
    out += ["", "What was measured", ""] + [f"- {line}" for line in front.measured]
    out += ["", "Columns", ""]
    for line, card in front.columns(legend):
        out += [f"- {line}"] + [f"  - {x}" for x in card]
    dropped: set[str] = set()
    for t in ts:
        headers, body = table_rows(t, bold=lambda x: f"{x} *", labels=shown.labels)
        lines, gone = fit_table(headers[:-1], [line[:-1] for line in body], 1 + len(t.id_columns), width)
        dropped.update(gone)
        out += ["", t.title, ""] + lines
        named = 1 + len(t.id_columns)  # the test and what tells its rows apart (model, ...): the row's name
        out += [f"- flags of {' '.join(map(str, line[:named]))}: {line[-1]}" for line in body if line[-1]]
    notes = table_notes(ts, TEXT_MARKS_NOTE) + fold_note + [shown.accounting(refused)]  # as github's
    if dropped:
        notes.append(
            f"not shown at {width} columns: the {' and '.join(sorted(dropped))} columns "
            f"(a wider terminal shows them, and so does `{invocation.again('report', '--format', 'github', drop=('--format',))}`)"
        )
    out += [""] + [f"- {n}" for n in notes]
    return "\n".join(w for line in out for w in wrap(line, width))


def _render_markdown(shown: Shown, front: Front, refused: int) -> str:
    """The github markdown report: title, verdict, what was measured, the tables (full column headers;
    decode rows folded as the terminal folds them: folded_tables), their notes."""
    out = [f"# {md_text(front.title)}", front.verdict]
    out.append("## What was measured\n\n" + "\n".join(f"- {md_text(line)}" for line in front.measured))
    ts, legend, fold_note = display_tables(shown)
    items = front.columns(legend)
    said = [f"- {md_text(n)}" + "".join(f"\n  - {md_text(x)}" for x in card) for n, card in items]
    out.append("## Columns\n\n" + "\n".join(said))
    for t in ts:
        headers, body = table_rows(t, bold=lambda x: f"**{x}**", esc=md_cell)
        out.append(f"### {t.title}\n\n" + github_table(headers, body))
    notes = table_notes(ts) + fold_note + [shown.accounting(refused)]
    out.append("\n".join(f"- {md_line(n)}" for n in notes))  # they name columns: a record's names
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
    "type_k",
    "type_v",
    "split_mode",
    "n_cpu_moe",
    "threads",
    "concurrency",
    "avg_ts",
    "stddev_ts",
    "ci_low",
    "ci_high",
    "median_ts",
    "min_ts",
    "max_ts",
    "tok_per_j",
    "energy_j",
    "energy_source",
    "roofline",
    "roofline_pct",
    "flags",
    "test_fields",
    # what the number is of (a customer's csv names model, date and build as the other formats do)
    "model_sha256",
    "build_commit",
    "gpu",
    "host",
    "measured_from_utc",
    "measured_to_utc",
    "measured_local",  # an imported vLLM result's time: its host's local time, zone not recorded
    "run_id",
    # the model file a number is of, as the other formats' model line names it (provenance.size_words)
    "model_file",
    "model_bytes",
    "model_type",
    # the system beside it, as the other formats' column cards say it (provenance.system_cells), how
    # many GPUs the run had (Facts.gpu_count), a tiny stand-in model or not, how many records
    "backend",
    "gpu_stack",
    "engine",
    "kernel",
    "amdgpu",
    "gpu_count",
    "model_stand_in",
    "records",
]


def threads(r: BenchRecord) -> int | None:
    """llama-bench's thread count of a record (its `n_threads`), None when it wrote none."""
    t = r.raw.get("n_threads")
    return int(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def render_csv(ts: list[Table]) -> str:
    """One line per shown cell (CSV_FIELDS): its test, settings, figures and flags, and what it is of
    (model sha256, llama.cpp build, GPU, host name, when measured in UTC, from the oldest process of a
    combined cell to the newest: empty where not recorded, an imported vLLM result's host-local time as
    the page says it (Facts.local_date; its UTC is not known), run id), then the system beside it
    (backend, GPU stack from the image's labels, engine, kernel, amdgpu: provenance.system_cells), the
    GPUs the run had (gpu_count), whether the model is a tiny stand-in, and how many stored records
    the number combines (`records`); empty where not recorded."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for t in ts:
        for row in t.rows:
            for col, f in sorted(row.facts.items()):
                w.writerow(map(_inert_cell, _csv_cells(t, row, col, f)))
    return buf.getvalue()


def _csv_cells(t: Table, row: Row, col: str, f: Facts) -> list[Any]:
    """The cells of one csv line (render_csv), in CSV_FIELDS' order."""
    r, roof, e = f.record, f.roof, f.energy
    return [
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
        f.ub_effective,
        r.flash_attn,
        r.n_gpu_layers,
        *(r.raw.get(k, "") for k in ("type_k", "type_v", "split_mode", "n_cpu_moe")),
        threads(r),
        f.concurrency,
        f.value,
        f.stddev,
        *((ci.low, ci.high) if (ci := f.ci) else ("", "")),  # 95 % interval (>= 3 processes)
        *((st["median"], st["min"], st["max"]) if (st := f.stats) else ("", "", "")),
        *((f"{e.tok_per_j:.4g}", f"{e.joules:.6g}", e.source) if e else ("", "", "")),
        roof.metric if roof else "",
        round(100 * roof.fraction, 4) if roof else "",  # unrounded enough to sit off its limits
        " ".join(row.flags.get(col, [])),
        "; ".join(f"{k}={v}" for k, v in row.ids.items()),
        r.model.sha256 or "",
        r.build_commit or "",
        r.gpu_info or "",
        _host_cell(r.host or {}, (r.raw or {}).get("cpu_info")),
        *(f.span or ("", "")),
        f.local_date or "",
        r.run_id,
        (r.model.path or "").rsplit("/", 1)[-1],  # model_file
        f.model_bytes or "",
        mt if isinstance(mt := (r.raw or {}).get("model_type"), str) else "",
        *system_cells(r),
        "" if f.gpu_count is None else f.gpu_count,
        "" if f.stand_in is None else "true" if f.stand_in else "false",  # empty: size not recorded
        f.processes,
    ]


_FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
"""What a spreadsheet may read as a formula at a cell's start: = + - @ and their full-width forms (OWASP
WSTG-INPV-21, Testing for CSV Injection: tab, CR and LF before them too, which _inert_cell skips)."""


def _host_cell(h: dict, cpu_info: Any = None) -> str:
    """The csv's `host`: a campaign host's key, else the hostname where a record keeps one (an import),
    else its CPU model and threads (a bench record keeps no hostname: results get published), else the
    CPU its benchmark row names (`cpu_info`, llama-bench's: an imported row carries no host facts, and
    the other formats' host line names it; this cell was empty)."""
    if named := h.get("key") or h.get("hostname"):
        return str(named)
    cpu, threads = (
        h.get("cpu_model") or (cpu_info if isinstance(cpu_info, str) else None),
        h.get("cpu_threads"),
    )
    return f"{cpu}, {threads} threads" if cpu and threads else str(cpu or "")


def _inert_cell(v: Any) -> Any:
    """A csv cell a spreadsheet will not run: text whose first character after any whitespace is one that
    starts a formula (_FORMULA_START, full-width forms included) gets a leading `'`, as OWASP's CSV injection
    advice gives (owasp.org/www-community/attacks/CSV_Injection). Controls are stripped first (strip_controls,
    as the whole text is after rendering). Numbers are left as they are."""
    if not isinstance(v, str):
        return v
    v = strip_controls(v)
    return "'" + v if v.lstrip().startswith(_FORMULA_START) else v


def table_json(t: Table) -> dict[str, Any]:
    def cell(row: Row, col: str) -> dict[str, Any] | None:
        f = row.facts.get(col)
        if f is None:
            return None
        r, roof, e = f.record, f.roof, f.energy
        return {
            "avg_ts": f.value,
            "stddev_ts": f.stddev,  # None: unknown (one sample, or a 0 without samples)
            "ci_low": f.ci.low if f.ci else None,  # the 95 % interval over process means; None: unknown
            "ci_high": f.ci.high if f.ci else None,  # (fewer than 3 processes: facts.Interval)
            "processes": f.processes,
            **{f"{k}_ts": x for k, x in (f.stats or {}).items()},
            "samples": len(r.samples_ts),
            "tok_per_j": e.tok_per_j if e else None,  # None: no valid energy (the flags say why)
            "energy_j": e.joules if e else None,
            "energy_source": e.source if e else None,
            "digest": r.image.digest,
            "n_ubatch_effective": f.ub_effective,
            "flags": row.flags.get(col, []),
            "roofline": {
                "metric": roof.metric,
                "fraction": roof.fraction,  # as judged: 1.00004 rounded to 1.0 was above the peak
                "gpu": roof.gpu.gfx_target,
                "product": roof.gpu.product,
                "gpu_count": roof.gpu_count,
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
        "energy_columns": t.energy_columns,
        "rows": [{"test": row.test, **row.ids, **{c: cell(row, c) for c in t.columns}} for row in t.rows],
    }


HTML_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;
color:#1d1d1f;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.8em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}td.flags{text-align:left;color:#a33}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}pre{background:#f7f7f7;padding:1em;white-space:pre-wrap}
.scroll{overflow-x:auto}li,p,h1,h2,h3{overflow-wrap:anywhere}.verdict{background:#f5f8ff;border-left:4px solid #3a6;padding:.2em 1em}
"""


def _verdict_html(text: str) -> str:
    """The verdict's plain text as HTML: `## `/`### ` lines as headings, `- ` lines as list items
    (`  - ` lines as a list under the item before), the rest as paragraphs (no `<pre>` block of
    markdown on a customer's page)."""
    out: list[str] = []
    items: list[tuple[str, list[str]]] = []

    def flush() -> None:
        if items:
            out.append(
                "<ul>"
                + "".join(f"<li>{html_text(x)}{_ul(sub) if sub else ''}</li>" for x, sub in items)
                + "</ul>"
            )
            items.clear()

    for line in text.splitlines():
        if line.startswith("- "):
            items.append((line[2:], []))
            continue
        if line.lstrip().startswith("- ") and items:
            items[-1][1].append(line.lstrip()[2:])
            continue
        flush()
        if line.startswith("#"):
            level = min(line.count("#", 0, line.index(" ") if " " in line else len(line)) + 1, 4)
            out.append(f"<h{level}>{html_text(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            out.append(f"<p>{html_text(line)}</p>")
    flush()
    return '<section class="verdict">' + "".join(out) + "</section>"


def _ul(items: list[str]) -> str:
    """`items` as an HTML list, each escaped."""
    return "<ul>" + "".join(f"<li>{html_text(x)}</li>" for x in items) + "</ul>"


def _img(name: str, png: bytes) -> str:
    """A PNG embedded as base64, `name` its alt text."""
    return f'<img alt="{html_text(name)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _html_cell(x: str) -> str:
    """A table cell as HTML: the row's best (table_rows' \\x02...\\x03) in <strong>, the rest escaped (a
    record's string never makes a tag: its own \\x02/\\x03 are dropped)."""
    if len(x) > 1 and x[0] == "\x02" and x[-1] == "\x03":
        return f"<strong>{html_text(x[1:-1])}</strong>"
    return html_text(x)  # controls stripped: \x02/\x03 of a record's string make no tag


def _table_html(t: Table, labels: dict[str, str] | None = None) -> list[str]:
    """One axis table as HTML: its title, header row, and a row per test (the flags column last);
    `labels`: short image column labels (short_labels)."""
    headers, body = table_rows(t, bold=lambda x: f"\x02{x}\x03", labels=labels)  # <strong> after escaping
    parts = [
        f'<h2>{html_text(t.title)}</h2><div class="scroll"><table><tr>'
        + "".join(f"<th>{html_text(h)}</th>" for h in headers)
        + "</tr>"
    ]
    for line in body:
        cells = [f"<td>{_html_cell(x)}</td>" for x in line[:-1]] + [
            f'<td class="flags">{html_text(line[-1])}</td>'
        ]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table></div>")
    return parts


def _plots_html(drawn: plots.PlotSet) -> list[str]:
    """The plots (and those left out), then power and clocks per run shown (and runs without a figure)."""
    parts = []
    if drawn.plots or drawn.left_out:
        parts.append("<h2>Plots</h2>")
    parts += [_img(name, png) for name, png in drawn.plots.items()]
    if drawn.left_out:
        parts.append(_ul(drawn.left_out))
    runs, run_notes = drawn.runs, drawn.run_notes
    if runs or run_notes:
        parts.append(
            "<h2>Power and clocks</h2><p>One figure per run shown, from its raw telemetry trace "
            "(results/&lt;digest12&gt;/telemetry/&lt;run_id&gt;-&lt;model&gt;.jsonl): GPU power with its cap, "
            "gfx/SM and memory clocks; shaded: each test's window, red where the record carries a telemetry "
            "flag.</p>"
        )
    parts += [_img(name, png) for name, png in runs.items()]
    if run_notes:
        parts.append(_ul(run_notes))
    return parts


def render_html(shown: Shown, front: Front, drawn: plots.PlotSet) -> str:
    """One offline page: inline CSS; the verdict (as HTML), what was measured (model, dates, host, GPU,
    builds), the tables, then the plots `drawn` (plots.draw) embedded as base64 PNG; no external URL
    (a plot too big to read is named, not drawn: plots.left_out). Then power and clocks over each
    observed run shown, from its raw trace (plots.telemetry_figures): one figure per run, a note where
    the trace is missing or unreadable; the records' accounting line between them."""
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_text(front.title)}</title>",
        f"<style>{HTML_CSS}</style></head><body>",
        f"<h1>{html_text(front.title)}</h1>",
        _verdict_html(front.verdict),
        "<h2>What was measured</h2>" + _ul(front.measured),
    ]
    if not shown.tables:
        parts.append(f"<p>{html_text(_no_table(shown))}</p>")
    ts, legend, fold_note = display_tables(shown)
    if items := front.columns(legend) + [(n, []) for n in fold_note]:
        said = "".join(f"<li>{html_text(n)}{_ul(card) if card else ''}</li>" for n, card in items)
        parts.append(f'<h2>Columns</h2><ul class="columns">{said}</ul>')
    for t in ts:
        parts += _table_html(t, shown.labels)
    if notes := table_notes(ts):
        parts.append(_ul(notes))
    parts.append(f"<p>{html_text(shown.counts)}</p>")
    parts += _plots_html(drawn)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def publish(
    records: list[BenchRecord],
    fmt: str = "github",
    *,
    opts: ReportOptions | None = None,
    output: Path | None = None,
    plots_dir: Path | None = None,
    refused: int = 0,
    results_root: Path | None = None,
    title: str | None = None,
) -> tuple[str | None, list[Path], list[str]]:
    """Render the report: (text for stdout or None when written to `output`, every file written, notes on
    plots not drawn: too big to read, a run without its trace; plots.draw). The report goes to `output` when
    given (atomic write); plots go as PNG files to `plots_dir`, by default `<output stem>-plots/` beside an
    html report. `results_root`: where the records were read (render); below it no file or folder is written
    through a link (toolkit.results.write_atomic: BadInput, exit 4). The text, returned or written, has every
    terminal control sequence stripped (strip_controls); a file ends with a newline."""
    if output is not None and plots_dir is None and fmt == "html":
        plots_dir = Path(output).parent / f"{Path(output).stem}-plots"
    drawn = None
    opts = opts or ReportOptions()
    if plots_dir is not None:
        from toolkit.analysis import plots

    with keys_cached():  # each record's test identity computed once for tables, verdict and plots
        shown = Shown.of(records, opts)  # one selection for the plots and the text
        if plots_dir is not None:  # drawn once: the html page embeds the same PNGs
            drawn = plots.draw(shown.tables, results_root)
        # the provenance's canary controls (csv has no provenance: nothing to read for it)
        controls = stored_canaries(results_root, [f.record for f in shown.facts]) if fmt != "csv" else []
        text = render(
            records,
            fmt,
            opts=opts,
            refused=refused,
            results_root=results_root,
            drawn=drawn,
            title=title,
            shown=shown,
            controls=controls,
        )
    text = strip_controls(text)  # a file gets what stdout gets: no escape, in any format
    written: list[Path] = []
    if plots_dir is not None:  # first: a link refused there leaves no page naming missing plots
        written += plots.write_pngs([], Path(plots_dir), results_root, drawn)
    if output is not None:  # ends with one newline, as stdout does; never through a link below the root
        write_atomic(Path(output), (text if text.endswith("\n") else text + "\n").encode(), root=results_root)
        written.insert(0, Path(output))
    notes = (drawn.left_out + drawn.run_notes) if drawn else []
    return (None if output is not None else text), written, notes
