"""What `toolkit compare` prints: a Comparison (toolkit.analysis.compare) as a markdown or terminal
table with its notes, its provenance per side, and as JSON."""

from __future__ import annotations

import shutil
from typing import Any

from tabulate import tabulate

from toolkit.analysis.caveats import smoke_caveats
from toolkit.analysis.compare import (
    DECODE_UB_NOTE,
    UNKNOWN_MODEL_FIX,
    CompareRow,
    Comparison,
    Side,
    side_kind,
)
from toolkit.analysis.facts import Facts, ran_on
from toolkit.analysis.flag_help import held_words
from toolkit.analysis.provenance import Provenance, folded_count, numbers_words, provenance
from toolkit.analysis.table_text import fit_table, fmt_cell, wrap
from toolkit.analysis.tables import fmt_tok_per_j
from toolkit.analysis.verdict import decimals_apart
from toolkit.core.text import Prose, md_cell, md_line, one_line


def _speedup_cell(c: Comparison, row: CompareRow, *, bold: bool = True) -> tuple[str, str]:
    """The speedup as shown (bold when a regression) and what the row's last column says of it."""
    limit = 1 - c.threshold / 100
    # two decimals, more where two would round the speedup onto either limit it is judged against
    # (0.9496 is not "0.950 < 0.950"; 1.0496, not faster, beside 1.0504, faster, not both "1.05")
    digits = max(decimals_apart(row.speedup, lim, 2) for lim in (limit, 1 + c.threshold / 100))
    sp = f"{row.speedup:.{digits}f}"
    mark = ""
    if c.is_regression(row):
        sp, mark = f"**{sp}**" if bold else sp, f"regression (< {limit:.{digits}f})"
    elif c.held(row):
        mark = f"{'slower' if c.slower(row) else 'faster'}, held: {', '.join(row.flags)}"
    elif c.within_noise(row) and row.by_interval:
        mark = "slower within noise (the 95% intervals overlap)"
    elif c.within_noise(row):
        mark = f"slower within noise (± {_pct(row.noise, 1 - row.speedup)}%)"
    elif c.faster_within_noise(row):
        why = (
            "the 95% intervals overlap" if row.by_interval else f"± {_pct(row.gain_noise, row.speedup - 1)}%"
        )
        mark = f"faster within noise ({why})"
    elif c.faster(row):
        mark = "faster"
    if row.flags and not c.held(row):  # a flagged number is named wherever it stands
        mark = "; ".join(x for x in (mark, f"flagged: {', '.join(row.flags)}") if x)
    if c.slower(row) and row.noise_unknown:
        mark += " (noise unknown: a single sample)"
    return sp, mark


def _pct(noise: float, change: float) -> str:
    """A noise band in percent, with the decimals that keep it apart from the `change` it holds (a
    5.2 % slowdown within a 5.36 % band reads `± 5.4%`, not `± 5%`)."""
    return f"{100 * noise:.{decimals_apart(100 * noise, 100 * change, 0)}f}"


def _table_row(c: Comparison, row: CompareRow, show_energy: bool, *, bold: bool = True) -> list[str]:
    """One line of the table: test, its columns, t/s of each side, speedup, [tok/J of each and ratio], mark
    (a regression's speedup in markdown bold with `bold`, the test and its columns, a record's names,
    escaped for a markdown cell then: md_cell; its mark names it either way)."""
    sp, mark = _speedup_cell(c, row, bold=bold)
    esc = md_cell if bold else str  # a model `a|b**c**` added a column and drew `c` bold
    line = [esc(row.test), *map(esc, row.ids.values()), fmt_cell(row.fa), fmt_cell(row.fb), sp]
    if show_energy:
        ea, eb, ratio = row.fa.energy, row.fb.energy, row.energy_ratio
        line += [
            fmt_tok_per_j(ea.tok_per_j if ea else None),
            fmt_tok_per_j(eb.tok_per_j if eb else None),
            f"{ratio:.2f}" if ratio is not None else "",
        ]
    return [*line, mark]


def caveats(c: Comparison) -> list[str]:
    """What the report says above its tables of the same records (caveats.smoke_caveats), said above the
    comparison's table too: a tiny stand-in model's, a software GPU's or an experimental runtime's
    tok/s are smoke signals, so a speedup between two of them says how a host ran, not how an image
    performs (newcomer 37: two benches of the 1.6 MB stand-in compared as 0.26x ... 4.23x, no word of it)."""
    return smoke_caveats([f.record for r in c.rows for f in (r.fa, r.fb)])


def _side_head(side: str, s: Side, settings: str) -> str:
    return f"t/s {side}: {s.label}" + (f" ({settings})" if settings else "")


def _notes(c: Comparison) -> list[str]:
    """What the table leaves out (one-side tests, unjoined, ignored fields), then the regression count."""
    out = []
    if c.missing:
        out.append(f"not compared, measured on one side only: {c.missing_text()}")
    if c.unknown_model:
        out.append(f"{c.unknown_model} test(s) not joined: {UNKNOWN_MODEL_FIX}")
    if c.ignored_by_option:
        out.append(f"left out of the join by --ignore: {', '.join(c.ignored_by_option)}")
    if lacks := "; ".join(f"{n} lacks {', '.join(fs)}" for n, fs in zip("AB", c.lacking, strict=True) if fs):
        out.append(f"fields recorded on one side only, left out of the join: {lacks}")
    if c.decode_folded:
        out.append(DECODE_UB_NOTE)
    n = len(c.regressions)
    out.append(
        f"{n} regression{'s' if n != 1 else ''} beyond {c.threshold:g}% and the noise"
        if n
        else f"no regression beyond {c.threshold:g}% and the noise"
    )
    return out


def _slower_not_counted(c: Comparison) -> list[str]:
    """The tests not counted: held on a held flag (telemetry or above-peak, slower or faster), or
    slower or faster within noise."""
    out = []
    held, noisy = [r for r in c.rows if c.held(r)], [r for r in c.rows if c.within_noise(r)]
    if held:
        same = len({tuple(r.flags) for r in held}) == 1  # one set of flags on every held test: said once
        why = (
            f"{'each' if len(held) > 1 else held[0].test}: {', '.join(held[0].flags)}"
            if same
            else "; ".join(f"{r.test}: {', '.join(r.flags)}" for r in held)
        )
        flags = [x.split(":", 1)[1] for r in held for x in r.flags]
        on = [ran_on(f.record) for r in held for f in (r.fa, r.fb) if f.held_flags]  # the flagged cells
        out.append(
            f"{len(held)} test(s) beyond {c.threshold:g}% held, not counted as faster or as a regression: a "
            f"side's cell carries {held_words(flags, 'flags')} ({why}), so the speedup rests on "
            f"{held_words(flags, 'rests', on)}; {held_words(flags, 'fix', on)}"
        )
    if noisy:
        ci = (
            "; overlapping 95% intervals where both sides ran 3 or more processes"
            if any(r.by_interval for r in noisy)
            else ""
        )
        out.append(
            f"{len(noisy)} test(s) slower by more than {c.threshold:g}% but within noise (twice the combined "
            f"relative stddev{ci}): {', '.join(r.test for r in noisy)}; more repetitions narrow it"
        )
    if gains := [r for r in c.rows if c.faster_within_noise(r)]:
        out.append(
            f"{len(gains)} test(s) faster by more than {c.threshold:g}% but within noise (the verdict's "
            f"band; no win): {', '.join(r.test for r in gains)}; more repetitions narrow it"
        )
    return out


def format_comparison(c: Comparison, fmt: str = "github", width: int | None = None) -> str:
    """The comparison as `github` markdown (`test | t/s A | t/s B | speedup`, regressions in bold and
    marked) or as `text` for a terminal `width` columns wide (default the terminal's): the same table
    as a plain grid fitted to the width (table_text.fit_table: tok/J columns dropped and said, image
    columns in blocks), every line wrapped, nothing escaped for markdown."""
    if fmt not in ("github", "text"):
        raise ValueError(f"unknown format {fmt!r}; github or text")
    text = fmt == "text"
    width = max(width or shutil.get_terminal_size().columns, 20)
    if not c.rows:
        out = [
            f"no test in common between {c.a.label} and {c.b.label} "
            f"({len(c.only_a)} tests only in A, {len(c.only_b)} only in B)"
        ]
        return "\n".join(w for line in out for w in wrap(line, width)) if text else md_line(out[0])
    show_energy = bool(c.with_energy)
    body = [_table_row(c, row, show_energy, bold=not text) for row in c.rows]
    cell = one_line if text else md_cell  # a side's label is a stored name: one cell of one row
    headers = [
        "test",
        *map(cell, c.id_columns),  # a test field an imported file named: `a|b` added a column
        cell(_side_head("A", c.a, c.a_settings)),
        cell(_side_head("B", c.b, c.b_settings)),
        "speedup (B/A)",
        *(["tok/J A", "tok/J B", "tok/J (B/A)"] if show_energy else []),
        "verdict",
    ]
    if text:
        lines, dropped = fit_table(headers, body, 1 + len(c.id_columns), width)
        out = ["\n".join(lines)]
    else:
        out, dropped = [tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)], []
    said = [f"caveat: {x}" for x in caveats(c)]  # above the table, as reproduce and the report say them
    if show_energy and not dropped:
        out.append(
            f"tok/J: tokens per joule of GPU energy in each test's window; {len(c.with_energy)} of {len(c.rows)} "
            "tests with a valid energy on both sides (empty: no telemetry, an energy-invalid window or a shared "
            "GPU on a side); tok/J (B/A) above 1: B does more work per joule"
        )
    if dropped:
        out.append(
            f"not shown at {width} columns: the tok/J columns (a wider terminal shows them, or --json)"
        )
    notes = [*_notes(c), *_slower_not_counted(c)]  # they quote labels and tests: a record's names
    out += [*_what_was_compared(c, markdown=not text), *(notes if text else map(md_line, notes))]
    if not text:
        return "\n\n".join([*(md_line(x) for x in said), *out])
    table, rest = out[0], out[1:]  # the grid is fitted already: its runs of spaces are its columns
    head = ["\n".join(wrap(x, width)) for x in said]
    return "\n\n".join(
        [*head, table, *("\n".join(w for ln in p.splitlines() for w in wrap(ln, width)) for p in rest)]
    )


def side_provenance(c: Comparison, side: str) -> Provenance:
    """What side `side` ("a" or "b") of `c` is, from the records its compared cells were measured by:
    the model (name, file, sha256), when, on which host and GPU, the image's digest and runtime commit
    (provenance.provenance, the report's own header): a comparison pasted into a ticket says what each
    column is of (it named the image label alone)."""
    return provenance([r.fa if side == "a" else r.fb for r in c.rows])


def _side_cells(c: Comparison, side: str) -> list[list[Facts]]:
    """Per compared row, the Facts of every record side `side` ("a" or "b") has behind its cell: its one
    record's, or each record of the decode rows folded into it (CompareRow.folded)."""
    return [r.folded.get(side.upper()) or [r.fa if side == "a" else r.fb] for r in c.rows]


def side_records(c: Comparison, side: str) -> int:
    """How many stored records the compared numbers of side `side` ("a" or "b") come from (a cell that
    combines N processes counts N; a decode row folded over the micro-batch counts each record folded
    into it), as a report's column card counts them."""
    return sum(f.processes for fs in _side_cells(c, side) for f in fs)


def side_numbers(c: Comparison, side: str) -> str:
    """`numbers from 10 records (2 decode records folded into 1 row)`: side_records in the report's
    column card's words (provenance.numbers_words)."""
    cells = _side_cells(c, side)
    return numbers_words(side_records(c, side), sum(map(len, cells)), folded_count(cells))


def _what_was_compared(c: Comparison, *, markdown: bool = True) -> list[str]:
    """Per side, `A: <label>` and its provenance lines as a list (names escaped for markdown: md_line)."""
    esc = md_line if markdown else str
    out = []
    for name, s in (("A", c.a), ("B", c.b)):
        lines = [
            *([KIND_WORDS[kind]] if (kind := side_kind(s.records)) in KIND_WORDS else []),
            *side_provenance(c, name.lower()).lines(),
            side_numbers(c, name.lower()),
        ]
        out.append("\n".join([esc(f"{name}: {s.label}"), *(f"- {esc(x)}" for x in lines)]))
    return out


KIND_WORDS = {
    "tune trials": Prose(
        "`toolkit tune` trials: a search's short runs, each at the setting it tried, not a bench run of the matrix"
    ),
    "imported": Prose("imported (`toolkit import`): measured outside this project"),
}
"""What a side is (compare.side_kind), said under its label where it is no bench run."""


def comparison_json(c: Comparison) -> dict[str, Any]:
    def side(s: Side, settings: str, which: str) -> dict[str, Any]:
        return {
            "ref": s.ref,
            "label": s.label,
            "kind": side_kind(s.records),
            "digests": sorted({r.image.digest for r in s.records}),
            "settings": settings,
            "provenance": side_provenance(c, which).to_json(),
            "records": side_records(c, which),
        }

    return {
        "a": side(c.a, c.a_settings, "a"),
        "b": side(c.b, c.b_settings, "b"),
        "threshold_pct": c.threshold,
        "caveats": caveats(c),
        "rows": [
            {
                "test": r.test,
                **r.ids,
                "avg_ts_a": r.fa.value,
                "stddev_ts_a": r.fa.stddev,
                "avg_ts_b": r.fb.value,
                "stddev_ts_b": r.fb.stddev,
                "speedup": r.speedup,  # as judged: a rounded 0.95 was a regression below 0.95
                "regression": c.is_regression(r),
                "ci_low_a": ci.low if (ci := r.fa.ci) else None,  # None: unknown (fewer than 3 processes)
                "ci_high_a": ci.high if (ci := r.fa.ci) else None,
                "ci_low_b": ci.low if (ci := r.fb.ci) else None,
                "ci_high_b": ci.high if (ci := r.fb.ci) else None,
                "noise": r.noise
                if r.speedup < 1
                else r.gain_noise,  # said as the change is: a slowdown's, a gain's
                "noise_basis": "ci95" if r.by_interval else "stddev",
                "noise_unknown": r.noise_unknown,
                "within_noise": c.within_noise(r) or c.faster_within_noise(r),
                "held": c.held(r),
                "flags": r.flags,
                "tok_per_j_a": ea.tok_per_j if (ea := r.fa.energy) else None,
                "tok_per_j_b": eb.tok_per_j if (eb := r.fb.energy) else None,
                "tok_per_j_ratio": round(ratio, 4) if (ratio := r.energy_ratio) is not None else None,
            }
            for r in c.rows
        ],
        "only_a": c.only_a,
        "only_b": c.only_b,
        "ignored_fields": c.ignored,
        "ignored_by_option": c.ignored_by_option,
        "fields_lacking_a": list(c.lacking[0]),
        "fields_lacking_b": list(c.lacking[1]),
        "unknown_model_tests": c.unknown_model,
        "regressions": len(c.regressions),
    }
