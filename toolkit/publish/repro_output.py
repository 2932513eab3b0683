"""What `toolkit reproduce` prints: the images and models it checked, the table of recorded against
reproduced tok/s per test (github markdown, or a plain grid for a terminal) with the verdict line, or the same as JSON
(reproduction_json). Reads a reproduce.Reproduction; prints nothing itself (the cli does)."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from toolkit.analysis.caveats import smoke_caveats
from toolkit.analysis.facts import known_stddev
from toolkit.analysis.tables import energy, fmt_tok_per_j, value
from toolkit.analysis.verdict import decimals_apart
from toolkit.core.paths import typed
from toolkit.core.text import Prose, md_cell, md_line, shell_join
from toolkit.publish.reproduce import Reproduction, ReproRow
from toolkit.results.records import BenchRecord


def _cell(r: BenchRecord | None) -> str:
    if r is None or value(r) is None:
        return "missing"
    sd = known_stddev(r)  # unknown (one sample, a 0 without samples): no `± 0.00`
    return f"{value(r):.2f}" + (f" ± {sd:.2f}" if sd is not None else "")


def format_reproduction(rep: Reproduction, fmt: str = "github") -> str:
    """Images and models checked, the compare table (`fmt` github: markdown; text: a plain grid, as
    `toolkit report` and `compare` print on a terminal) and the verdict line. As markdown, the names a
    published folder gives (images, models, notes) are escaped as every markdown writer escapes them
    (core.text: md_line a line, md_text a cell): a model `me@x.example` or `a`b` links and styles nothing."""
    lines = [f"run {rep.run_id} reproduced as run {rep.new_run_id} (results in {rep.results})", ""]
    for im in rep.images:
        how = {
            "pulled": f"pulled {im.source} in {im.seconds:.1f} s",
            "present": "present in the engine",
            "rebuilt": f"rebuilt as {im.image_id[:19]} in {im.seconds:.1f} s",
        }[im.status]
        same = (
            "image ID matches the record" if im.image_id == im.digest else "image ID differs from the record"
        )
        lines.append(
            f"image {im.name} {im.digest[:19]}: {how}; {same}" + (f" ({im.note})" if im.note else "")
        )
    lines += [f"model {m.name}: {m.status}, sha256 {m.sha256[:12]}... matches the record" for m in rep.models]
    lines += [f"host differs: {k}: recorded {a!r}, now {b!r}" for k, (a, b) in rep.host_diff.items()]
    with_energy = [r for r in rep.rows if r.energy_delta is not None]
    lines += [f"caveat: {c}" for c in caveats(rep)]
    lines = [md_line(x) if fmt == "github" else x for x in lines]
    lines += ["", _compare_table(rep.rows, energies=bool(with_energy), fmt=fmt), ""]
    if with_energy:
        lines.append(
            f"tok/J: tokens per joule of GPU energy in each test's window, {len(with_energy)} of "
            f"{len(rep.rows)} tests with a valid energy in both runs (information only: the verdict is on tok/s)"
        )
    lines += [md_line(f"note: {n}") if fmt == "github" else f"note: {n}" for n in rep.notes]
    bad = sum(not r.ok for r in rep.rows)
    held = sum(r.held for r in rep.rows)
    missing = sum(r.reproduced is None for r in rep.rows)
    lines.append(
        f"verdict: {rep.verdict} ({len(rep.rows) - bad}/{len(rep.rows)} tests within noise"
        + (f", {missing} missing" if missing else "")
        + (
            f", {held} beyond noise on a flagged cell (A: the recorded run, B: this one): held, run again on "
            "an idle host"
            if held
            else ""
        )
        + f"; noise = max(2 x combined relative stddev, {rep.threshold:g}%))"
    )
    lines += [md_line(x) if fmt == "github" else x for x in next_lines(rep)]
    return "\n".join(lines)


def next_commands(rep: Reproduction) -> dict[str, str]:
    """How to see the reproduced run and compare it with the published one: {"report": the exact `toolkit
    report` command, "compare": `toolkit compare` (A: the published run, B: the reproduced, as the table
    reads: `--results FOLDER --against REPRODUCED`)}, from the working folder (core.paths.typed), quoted to
    paste; the text's closing lines (next_lines) and --json's."""
    r, f = typed(rep.results), typed(rep.folder)
    return {
        "report": shell_join(["toolkit", "report", "--results", r, "--run", rep.new_run_id]),
        "compare": shell_join(
            ["toolkit", "compare", rep.run_id, rep.new_run_id, "--results", f, "--against", r]
        ),
    }


def next_lines(rep: Reproduction) -> list[Prose]:
    """next_commands as the closing lines of the text and markdown output."""
    see, both = next_commands(rep).values()
    return [
        Prose(f"see the reproduced run: `{see}`", see),
        Prose(
            f"compare it with the published run (A: the published, B: this one, as in the table): `{both}`",
            both,
        ),
    ]


def caveats(rep: Reproduction) -> list[str]:
    """What the report says above its tables of the same records (caveats.smoke_caveats): a tiny
    stand-in model's tok/s, a software GPU's, an experimental runtime's are smoke signals, and a
    delta between two of them says how a host ran, not how an image performs (newcomer 36: a -70 %
    delta of a 1.6 MB model on a busy host came with no word of it)."""
    return smoke_caveats([r.recorded for r in rep.rows] + [r.reproduced for r in rep.rows if r.reproduced])


def _compare_table(rows: list[ReproRow], *, energies: bool, fmt: str = "github") -> str:
    """The recorded beside the reproduced tok/s per test (`fmt`: github or text); a model column when the
    rows hold several models, tokens per joule columns with `energies`."""
    models = len({r.model for r in rows}) > 1
    head = (
        ["image", "test"]
        + (["model"] if models else [])
        + ["recorded t/s", "reproduced t/s", "delta", "noise"]
        + (["recorded tok/J", "reproduced tok/J", "tok/J delta"] if energies else [])
        + ["verdict"]
    )
    body = []
    for r in rows:
        # the decimals that keep the change apart from the band it was judged against: +5.04% is beyond
        # ±5.00%, never "+5.0%" beside "±5.0%" (verdict.decimals_apart)
        n = decimals_apart(abs(r.delta) * 100, r.noise * 100, 1) if r.delta is not None and r.noise else 1
        delta = f"{r.delta * 100:+.{n}f}%" if r.delta is not None else ""
        noise = f"±{r.noise * 100:.{n}f}%" if r.noise is not None else ""  # a missing test has none
        tok_j = []
        if energies:
            ea = energy(r.recorded)
            eb = energy(r.reproduced) if r.reproduced is not None else None
            tok_j = [
                fmt_tok_per_j(ea.tok_per_j if ea else None),
                fmt_tok_per_j(eb.tok_per_j if eb else None),
                f"{r.energy_delta * 100:+.1f}%" if r.energy_delta is not None else "",
            ]
        esc = str if fmt == "text" else md_cell  # names from the published folder: one cell each
        body.append(
            [esc(r.image), esc(r.test)]
            + ([esc(r.model)] if models else [])
            + [_cell(r.recorded), _cell(r.reproduced), delta, noise]
            + tok_j
            + [r.status]
        )
    return tabulate(body, head, tablefmt="simple" if fmt == "text" else "github", disable_numparse=True)


def reproduction_json(rep: Reproduction) -> dict[str, Any]:
    return {
        "run_id": rep.run_id,
        "new_run_id": rep.new_run_id,
        "folder": str(rep.folder),
        "results": str(rep.results),
        "verdict": rep.verdict,
        "reproduced": rep.reproduced,
        "threshold_pct": rep.threshold,
        "images": [im.__dict__ for im in rep.images],
        "models": [m.__dict__ for m in rep.models],
        "host_diff": {k: list(v) for k, v in rep.host_diff.items()},
        "notes": rep.notes,
        "caveats": caveats(rep),
        "next_commands": next_commands(rep),
        "rows": [
            {
                "image": r.image,
                "test": r.test,
                "model": r.model,
                "recorded_ts": value(r.recorded),
                "recorded_sd": r.recorded.stddev_ts,
                "reproduced_ts": value(r.reproduced) if r.reproduced else None,
                "reproduced_sd": r.reproduced.stddev_ts if r.reproduced else None,
                "delta": r.delta,
                "noise": r.noise,
                "ok": r.ok,
                "status": r.status,
                "flags": r.flags,
                "recorded_tok_per_j": ea.tok_per_j if (ea := energy(r.recorded)) else None,
                "reproduced_tok_per_j": eb.tok_per_j
                if r.reproduced is not None and (eb := energy(r.reproduced))
                else None,
                "tok_per_j_delta": r.energy_delta,
            }
            for r in rep.rows
        ],
    }
