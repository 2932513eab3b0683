"""Tables as text (github markdown and the html page share it): one value per cell (mean ± stddev
tok/s; the samples' median and range stay in --json and the CSV), the row's best marked where it leads
beyond the noise, a flagged number marked where it stands (†), and the notes under the tables (the
flags' legend, what tok/J holds, each column's roofline yardstick).
"""

from __future__ import annotations

import functools
import re
import textwrap
import unicodedata
from collections.abc import Callable
from typing import Any

from toolkit.analysis.facts import Facts, ReportOptions
from toolkit.analysis.flag_help import FLAG_HELP
from toolkit.analysis.roofline import Roofline
from toolkit.analysis.tables import Row, Table, fmt_tok_per_j, system_words, varying_words
from toolkit.analysis.verdict import decimals_apart
from toolkit.core.stats import finite_number
from toolkit.core.text import Prose
from toolkit.results.records import IMPORTED, BenchRecord

FLAGGED_MARK = " †"
"""After a number measured while telemetry flagged the system (gpu-shared, throttled, host-busy, ...)."""

MARKS_NOTE = (
    "bold: the row's best, ahead of the next by more than the noise (2 x their combined relative stddev); "
    "†: measured while telemetry saw the system disturbed (host-busy, gpu-shared, throttled, ...: the flags "
    "column says which), never marked best"
)


def _num(x: float) -> str:
    """Two decimals, as llama-bench prints t/s; in exponent form from 10^9 up (a 1e300 stddev of a
    hostile row was 300 digits wide)."""
    return f"{x:.2f}" if abs(x) < 1e9 else f"{x:.3e}"


def fmt_cell(cell: Facts | BenchRecord | None) -> str:
    """`mean ± stddev` tok/s of a cell's Facts (a record: its Facts built here; one value per cell: the
    samples' median and range are in --json and the CSV); process-level repetitions add `[N runs,
    spread S%]`, and from 3 of them the ± is the 95 % confidence interval's half-width, marked `(95%
    CI)` (Facts.ci); served cells their median TTFT/TPOT."""
    if cell is None:
        return ""
    f = cell if isinstance(cell, Facts) else Facts.of(cell)
    r = f.record
    if f.value is None:
        return ""
    sd = f" ± {_num(f.stddev)}" if f.stddev is not None else ""
    if f.stddev is None and len(r.samples_ts) == 1:
        sd = " (1 sample: stddev unknown)"
    if f.ci:
        sd = f" ± {_num(f.ci.half)} (95% CI)"
    text = f"{_num(f.value)}{sd}"
    runs = (r.model_extra or {}).get("between_runs")
    if runs:
        text += f" [{runs['runs']} runs, spread {runs['spread_pct']:.1f}%]"
    if r.axis == "served":
        extra = [
            f"{k.upper()} {t:.1f} ms"
            for k in ("ttft", "tpot")
            if (t := finite_number(r.raw.get(f"median_{k}_ms")))
        ]
        text += f" ({', '.join(extra)})" if extra else ""
    return text


def fmt_roof(roof: Roofline | None, floor: float = ReportOptions.bw_floor) -> str:
    """`45% of BW` / `3% of FP16 peak`, with the decimals that keep the share apart from each limit it
    is flagged by (roof_pct): 99.85 % (unflagged) and 100.15 % (bw-above-peak) never both `100%`."""
    if roof is None:
        return ""
    what = "of BW" if roof.metric == "bandwidth" else "of FP16 peak"
    return f"{roof_pct(roof, 0, floor)}% {what}"


def roof_pct(roof: Roofline, decimals: int, floor: float = ReportOptions.bw_floor) -> str:
    """A roofline's share of its peak in percent, at least `decimals` decimals, more where fewer would
    round it onto a limit it is judged against: its peak (Roofline.limit: above it, bw-above-peak or
    compute-above-peak) and, for bandwidth, the bw-below-floor share `floor` (ReportOptions.bw_floor)."""
    pct = 100 * roof.fraction
    limits = [roof.limit] + ([floor] if roof.metric == "bandwidth" else [])
    return f"{pct:.{max(decimals_apart(pct, 100 * lim, decimals) for lim in limits)}f}"


TEXT_MARKS_NOTE = (
    "*: the row's best, ahead of the next by more than the noise (2 x their combined relative stddev); "
    "†: measured while telemetry saw the system disturbed (host-busy, gpu-shared, throttled, ...: the flags "
    "under the table say which), never marked best"
)
"""MARKS_NOTE of the terminal's tables, which mark the best with `*` (report._render_text)."""


def table_notes(ts: list[Table], marks: str = MARKS_NOTE) -> list[str]:
    """The notes under the tables: `marks` (what bold or * and † say) when some cell carries one (a
    row's best, a flagged number), the flags' legend (legend), what tok/J holds (energy_notes), each
    column's roofline (roof_notes)."""
    marked = any(row.best or any(f.telemetry_flags for f in row.facts.values()) for t in ts for row in t.rows)
    return ([marks] if marked else []) + legend(ts) + energy_notes(ts) + roof_notes(ts)


def table_rows(
    t: Table,
    bold: Callable[[str], str] = lambda x: x,
    esc: Callable[[str], str] = lambda x: x,
    labels: dict[str, str] | None = None,
) -> tuple[list[str], list[list[str]]]:
    """Header and body of a table as text cells (shared by github, text and html): every text through
    `esc` (github: core.text.md_cell, so a name cannot add a column, a row or a link), the row's best
    number then through `bold` (Row.best; github: `**x**`), a flagged number followed by FLAGGED_MARK.
    `labels`: a short header per image column (short_labels; the flags column names columns by it too),
    else each column's whole header (Table.header)."""
    name = (lambda c: labels[c]) if labels else t.header
    headers = ["test", *t.id_columns]
    for c in t.columns:
        headers.append(name(c))
        if c in t.energy_columns:
            headers.append(f"tok/J {labels[c] if labels else c}")
        if c in t.roof_columns:
            headers.append(f"roofline {labels[c] if labels else c}")
    headers.append("flags")
    body = []
    for row in t.rows:
        line = [esc(row.test), *map(esc, row.ids.values())]
        for c in t.columns:
            f = row.facts.get(c)
            text = esc(fmt_cell(f))
            if text and f is not None and f.telemetry_flags:
                text += FLAGGED_MARK
            line.append(bold(text) if c == row.best else text)
            if c in t.energy_columns:
                line.append(fmt_tok_per_j(f.energy.tok_per_j if f and f.energy else None))
            if c in t.roof_columns:
                line.append(esc(fmt_roof(f.roof if f else None, t.bw_floor)))
        line.append(esc(_short_flags(row, labels)))
        body.append(line)
    return [esc(h) for h in headers], body


def _short_flags(row: Row, labels: dict[str, str] | None) -> str:
    """The row's flags (Row.said), the columns they name by their short labels when given."""
    text = "; ".join(row.said)
    for col in sorted(labels or {}, key=len, reverse=True):  # `cpu@ab12 [gpu_info=x]` before `cpu@ab12`
        text = text.replace(col, (labels or {})[col])
    return text


CI_NOTE = (
    "± x (95% CI): the 95% confidence interval of the cell's mean over its process repeats (bench.runs, "
    "3 or more processes; Student t over the process means); the other cells show mean ± stddev of the "
    "samples, their interval unknown (fewer than 3 processes); bold between two cells with intervals: the "
    "intervals do not overlap"
)
"""Under tables where some cell carries an interval (facts.Interval), after the flags' legend."""


def legend(ts: list[Table]) -> list[str]:
    """The flags' legend of the tables' rows, then CI_NOTE when some cell carries an interval."""
    used = dict.fromkeys(f.split(" ")[0] for t in ts for row in t.rows for f in row.said)
    ci = [CI_NOTE] if any(f.ci for t in ts for row in t.rows for f in row.facts.values()) else []
    return [
        Prose(
            f"{name}: {FLAG_HELP.get(name, FLAG_HELP.get(name.split(':', 1)[0], 'stored with the record by its runner'))}",
            name,
        )
        for name in sorted(
            used, key=lambda n: (list(FLAG_HELP).index(n) if n in FLAG_HELP else len(FLAG_HELP), n)
        )
    ] + ci


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
    GPU image without one, why not (unknown product, multi-GPU layer split: Facts.no_roof); and each
    other reason some of its rows have none (an n_cpu_moe sweep's rows with experts on the CPU beside
    rows held to the yardstick; -ngl 0 rows beside rows that name no GPU), the first _MAX_WHY of them and
    how many more there are (an n_cpu_moe sweep of 7 values has 6 reasons, one per value)."""
    seen: dict[str, Roofline] = {}
    missing: dict[str, list[str]] = {}
    more: dict[str, set[str]] = {}
    for t in ts:
        for row in t.rows:
            for col, f in row.facts.items():
                if f.roof is not None:
                    seen[col] = f.roof
                elif f.no_roof and f.no_roof not in (why := missing.setdefault(col, [])):
                    if len(why) < _MAX_WHY:
                        why.append(f.no_roof)
                    else:
                        more.setdefault(col, set()).add(f.no_roof)
    out = [
        f"{col}: {roof.gpu.product} ({roof.gpu.gfx_target}) peak {roof.gpu.mem_bw_gbs:.0f} GB/s, "
        f"{roof.gpu.fp16_matrix_tflops:.0f} TFLOP/s FP16 matrix; active share of the weights "
        f"{100 * roof.share.bytes_share:.1f}% (from {roof.share.source})"
        + (f"; {roof.note}" if roof.note else "")
        for col, roof in sorted(seen.items())
    ]
    return (
        out
        + [
            f"{col}: no roofline{' for some of its rows' if col in seen or len(whys) > 1 else ''}: {why}"
            for col, whys in sorted(missing.items())
            for why in whys
        ]
        + [
            f"{col}: no roofline for some of its rows for {len(n)} more reasons than the {_MAX_WHY} above"
            for col, n in sorted(more.items())
        ]
    )


_MAX_WHY = 3
"""The most reasons roof_notes gives for one image's rows without a roofline."""


def short_labels(ts: list[Table]) -> dict[str, str]:
    """A short header per image column of `ts`, the same in every table: the image name where no other
    column has it, else `name@` and the shortest digest prefix (4+ hex) that tells them apart, `#2`,
    `#3` added where one digest ran on several systems. {column: label}; column_legend says what each is."""
    cols = sorted({c for t in ts for c in t.columns})
    names: dict[str, list[str]] = {}
    for c in cols:
        names.setdefault(c.split("@", 1)[0], []).append(c)
    out: dict[str, str] = {}
    for name, group in names.items():
        if len(group) == 1:
            out[group[0]] = name
            continue
        digests = {c: c.split("@", 1)[1].split(" [", 1)[0].removeprefix(IMPORTED) for c in group}
        n = next(
            (k for k in range(4, 13) if len({d[:k] for d in digests.values()}) == len(set(digests.values()))),
            12,
        )
        seen: dict[str, int] = {}
        for c in group:
            label = f"{name}@{digests[c][:n]}"
            seen[label] = seen.get(label, 0) + 1
            out[c] = label if seen[label] == 1 else f"{label} #{seen[label]}"
    return out


def column_legend(ts: list[Table], short: dict[str, str]) -> list[str]:
    """What each short column label stands for, once per column however many tables show it:
    `label: image@digest12 (backend, GPU, build, ...; settings)`. Its system parts are those that set
    it apart in any table (tables.varying_words: the headers' image_sys), plus its backend and GPU
    said anyway (`backend cpu`, `GPU X`) where no table tells the columns apart by them; its settings
    (image_ids) are each table's, each said once."""
    words: dict[str, dict[str, str]] = {}  # column -> its system_words
    keys: dict[str, set[str]] = {}  # column -> the parts some table's header gives it
    settings: dict[str, list[str]] = {}
    for t in ts:
        here = {c: system_words(next(row.facts[c] for row in t.rows if c in row.facts)) for c in t.columns}
        varying = varying_words(here)
        for c in t.columns:
            words.setdefault(c, here[c])
            keys.setdefault(c, set()).update(k for k in varying if f"{k}=" not in c)
            mine = settings.setdefault(c, [])
            mine += [x for x in re.split(r", (?=\w+=)", t.image_ids.get(c) or "") if x and x not in mine]
    out = []
    for c in sorted(words, key=lambda c: short[c]):
        r = next(row.cells[c] for t in ts for row in t.rows if c in row.cells)
        parts = [words[c][k] for k in words[c] if k in keys[c]]
        if "backends" not in keys[c]:  # said anyway, as a header says nothing the columns share
            parts.insert(0, f"backend {r.image.backend}")
        if "gpu_info" not in keys[c] and r.gpu_info:
            parts.insert(1, f"GPU {r.gpu_info}")
        said = ", ".join(parts) + (f"; {', '.join(settings[c])}" if settings[c] else "")
        out.append(f"{short[c]}: {c} ({said})")
    return out


DECODE_UB_NOTE = (
    "decode rows: the micro-batch (ub) does not apply to tg, so a tg test measured at several ub whose tok/s "
    "agree within noise is one row, its cell the measurement at a ub every image measured (else at one the most images measured), ub512 first (llama-bench's "
    "default; else the one with the most samples); where they differ beyond noise each ub keeps its row; every measurement is in --format csv / json"
)


@functools.cache
def _wcwidth() -> Any:
    """The wcwidth module where it is installed (tabulate's "wide chars" mode measures by it), else None;
    looked up once, not per character measured."""
    try:
        import wcwidth
    except ImportError:
        return None
    return wcwidth


def _char_columns(c: str) -> int:
    """The terminal columns one character takes, at least: wcwidth's where it is installed (tabulate
    measures by it), else two for East Asian wide and full-width characters (CJK, most emoji); one for
    any other (a zero-width or combining one counted as one: a line measured so is never too wide)."""
    w = _wcwidth()
    if w is None:
        return 2 if unicodedata.east_asian_width(c) in "WF" else 1
    return max(w.wcwidth(c), 1)


def _narrow(text: str) -> bool:
    """Every character of `text` takes one column (_char_columns): ASCII (a control too: at least one)
    and `±` (one by wcwidth and by East Asian width, which calls it ambiguous: not wide), which every
    table cell holds; the others are measured one by one."""
    return text.isascii() or text.replace("±", "").isascii()


def columns(text: str) -> int:
    """The terminal columns `text` takes, at least (its length where each character takes one: _narrow;
    _char_columns each)."""
    return len(text) if _narrow(text) else sum(map(_char_columns, text))


def cut(text: str, width: int) -> str:
    """The longest start of `text` that takes at most `width` columns (columns)."""
    if _narrow(text):
        return text[:width]
    used = 0
    for i, c in enumerate(text):
        used += _char_columns(c)
        if used > width:
            return text[:i]
    return text


def wrap(text: str, width: int) -> list[str]:
    """One line of text wrapped to `width` terminal columns (columns: a CJK character or an emoji takes
    two), a list item's continuation lines indented under its text (`- x`, `  - x`); a word longer than
    the line is broken."""
    if 0 < len(text) <= width and text.isprintable() and not text.endswith(" ") and columns(text) <= width:
        return [text]  # as textwrap gives a line that fits (no tab, break, trailing space): ~8,000 a report
    body = text.lstrip(" ")
    indent = " " * (len(text) - len(body) + (2 if body.startswith("- ") else 0))
    if not text.isascii() and columns(text) != len(text):  # a wide character: textwrap counts characters
        return _wrap_wide(text, width, indent)
    return textwrap.wrap(
        text, width, subsequent_indent=indent, break_on_hyphens=False, drop_whitespace=True
    ) or [""]


def _wrap_wide(text: str, width: int, indent: str) -> list[str]:
    """wrap of a line holding wide characters: its words (split at white space) filled greedily by
    columns, the first line keeping the text's leading spaces, the others `indent`; a word wider than
    the line broken by columns (cut)."""
    lines, line = [], text[: len(text) - len(text.lstrip(" "))]
    for word in text.split():
        sep = " " if line.strip() else ""
        if columns(line + sep + word) <= width:
            line += sep + word
            continue
        if line.strip():
            lines.append(line)
            line = indent
        if columns(line + word) > width:  # a word longer than the line: broken
            line, word = _break_word(line, word, width, indent, lines)
        line += word
    return [*lines, line] if line.strip() else lines or [""]


def _break_word(line: str, word: str, width: int, indent: str, lines: list[str]) -> tuple[str, str]:
    """A word wider than the line broken by columns in one pass (linear in the word: a 100,000-character
    word of CJK is ~0.1 s, not the minutes cutting and re-measuring its rest for each line took): each
    full line appended to `lines`, `line` then `indent`; at least one character a line where none fits.
    Returns (the last line's start, the rest of the word that fits after it)."""
    used, start = columns(line), 0
    for i, c in enumerate(word):
        w = _char_columns(c)
        if used + w > width and i > start:
            lines.append(line + word[start:i])
            line, start, used = indent, i, columns(indent)
        used += w
    return line, word[start:]


def _grid(
    headers: list[str], body: list[list[str]], maxw: int | None = None, plain: bool = False
) -> list[str]:
    """A plain-text table (tabulate's `simple` grid), each column at most `maxw` wide (wrapped). `plain`:
    every string is as wide as it is long (_simple_widths), so one without `maxw` is drawn here as
    tabulate draws it (each column its longest cell stripped, at least its header + 2, two spaces
    between; ~0.3 s of a 10,000-record report's blocks measured by wcwidth)."""
    if plain and not maxw and body:
        widths = _plain_widths(headers, body)
        lines = [
            "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
            "  ".join("-" * w for w in widths),
        ]
        lines += ["  ".join(x.strip().ljust(w) for x, w in zip(line, widths, strict=True)) for line in body]
        return "\n".join(line.rstrip() for line in lines).splitlines()  # as tabulate's: no last empty line
    from tabulate import tabulate  # here: json, csv and html draw no grid (~80 ms of imports)

    most = [maxw] * len(headers) if maxw else None
    text = tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True, maxcolwidths=most)
    return [line.rstrip() for line in text.splitlines()]


def _wcswidth(x: str) -> int:
    """The columns `x` takes as tabulate measures it: wcwidth where it is installed (tabulate's "wide
    chars" mode), else its length."""
    w = _wcwidth()
    return len(x) if w is None else w.wcswidth(x)


def _simple_widths(headers: list[str], body: list[list[str]]) -> list[int] | None:
    """Each column's width in _grid (tabulate's `simple`: its longest cell, stripped, at least its header +
    2), so a grid's longest line is their sum + 2 per gap without drawing it; None unless every string is
    printable and as wide as it is long (ASCII, `±`: wcwidth measures it, as tabulate does): anything else is
    measured on the drawn grid."""
    odd = {
        x for x in (*headers, *(x for line in body for x in line)) if not (x.isascii() and x.isprintable())
    }
    if odd and not all(
        x.isprintable() and (x.replace("±", "").isascii() or _wcswidth(x) == len(x)) for x in odd
    ):  # `±` is one column wide (wcwidth): the cells of every table hold it
        return None
    return _plain_widths(headers, body)


def _plain_widths(headers: list[str], body: list[list[str]]) -> list[int]:
    """Each column's width in tabulate's `simple` grid of strings as wide as they are long: its longest
    cell, stripped, at least its header + 2 (_simple_widths decides where that holds)."""
    return [
        max(len(h) + 2, max((len(line[i].strip()) for line in body), default=0))
        for i, h in enumerate(headers)
    ]


def github_table(headers: list[str], body: list[list[str]]) -> str:
    """tabulate(body, headers=headers, tablefmt="github", disable_numparse=True), drawn here where every
    string is as wide as it is long (_simple_widths: the same widths, each cell stripped, left-aligned,
    one space of padding each side): tabulate measures each by wcwidth, a character at a time (~0.3 s of
    a 10,000-record report); tabulate draws any other table, and one without rows."""
    widths = _simple_widths(headers, body) if body and all(len(x) == len(headers) for x in body) else None
    if widths is None:
        from tabulate import tabulate  # here: json, csv and html draw no markdown table (~80 ms of imports)

        return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += [
        "| " + " | ".join(x.strip().ljust(w) for x, w in zip(line, widths, strict=True)) + " |"
        for line in body
    ]
    return "\n".join(lines)


def fit_table(
    headers: list[str], body: list[list[str]], keep: int, width: int
) -> tuple[list[str], list[str]]:
    """A table as terminal lines no wider than `width`: the `keep` leading columns (test and its
    identifying values) stay in every block; roofline then tok/J columns are dropped while it is too
    wide, then the image columns go into as many side-by-side blocks as it takes, each block showing
    only the rows it has a cell in (images that measured different models or tests would otherwise
    each list the other's rows empty), a cell wrapped when one column alone is wider. (lines, names of
    the column kinds dropped)."""
    cols = list(range(len(headers)))
    dropped: list[str] = []
    colw = _simple_widths(headers, body)

    def grid(idx: list[int], maxw: int | None = None, rows: list[list[str]] | None = None) -> list[str]:
        rows = body if rows is None else rows
        return _grid(
            [headers[i] for i in idx], [[line[i] for i in idx] for line in rows], maxw, colw is not None
        )

    def wide(idx: list[int]) -> bool:
        if colw is not None:  # the grid's longest line: its dash line under the headers
            return sum(colw[i] for i in idx) + 2 * (len(idx) - 1) > width
        return max(map(columns, grid(idx))) > width

    for kind in ("roofline ", "tok/J "):
        if wide(cols) and any(headers[i].startswith(kind) for i in cols):
            cols = [i for i in cols if not headers[i].startswith(kind)]
            dropped.append(kind.strip())
    if not wide(cols):
        return grid(cols), dropped
    key, rest = cols[:keep], cols[keep:]
    blocks: list[list[int]] = []
    for i in rest:
        if blocks and not wide(key + blocks[-1] + [i]):
            blocks[-1].append(i)
        else:
            blocks.append([i])
    out: list[str] = []
    for block in blocks:
        idx = key + block
        rows = [line for line in body if any(line[i].strip() for i in block)] or body
        lines = grid(idx, rows=rows)
        if max(map(columns, lines)) > width:  # one column too wide even alone: wrap every cell
            maxw = max(4, (width - 2 * (len(idx) - 1)) // len(idx))
            lines = grid(idx, maxw, rows)
        out += ([""] if out else []) + [cut(ln, width) for ln in lines]
    return out, dropped
