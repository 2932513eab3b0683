"""`toolkit tune --axis depth`: one micro-batch per model over its depth sweep, as public stacks
calibrate ub per model before a campaign.

Each trial is pp L at every depth of the model's `depth:` block (one llama-bench process, -d). The
stored trials are ranked per depth (tune.best_setting on that depth's records), then across depths by
the geometric mean of each candidate's medians (tok/s; a geometric mean weighs a 10 % loss at 32k as
much as one at 0, where the speeds differ several-fold). The answer is the candidate first by that
mean; it is proposed only where it is faster than the model's current micro-batch beyond the noise at
one depth at least and slower beyond the noise at none (the verdict's rule, per depth). Decode (tg) is
not searched: llama.cpp generates one token per ubatch, so ub does not change it.
"""

from __future__ import annotations

import difflib
import math
import re
import statistics
from pathlib import Path

from toolkit.bench.tune import (
    Candidate,
    Evidence,
    TunedTest,
    TuneResult,
    best_setting,
    by_setting,
    held,
    setting_of,
)
from toolkit.core import stats
from toolkit.core.errors import BadInput
from toolkit.results.records import BenchRecord


def best_over_depth(
    records: list[BenchRecord],
    session: str,
    knobs: list[str],
    default: Candidate,
    *,
    noisy: float = 0.05,
    survivors: set[Candidate] | None = None,
    test: TunedTest | None = None,
) -> TuneResult:
    """The answer of a depth session from its stored trial records alone (best_setting's signature),
    of the tuned `test` only (None: every record of the session, each depth's of one test):
    `per_depth` {depth: best_setting of that depth's records}; `ranking`: the candidates measured at
    every depth, Evidence median/low/high = geometric means over the depths (tok/s), survivors first;
    `undecided` per _undecided. BadInput without ok trial records of `session`."""
    mine = [
        r
        for r in records
        if (r.model_extra or {}).get("tune", {}).get("session") == session and (test is None or test.holds(r))
    ]
    depths = sorted({r.n_depth for r in mine if r.status == "ok" and r.samples_ts})
    if not depths:
        raise BadInput(f"tune session {session}: no ok trial records found")
    per = {
        d: best_setting([r for r in mine if r.n_depth == d], session, knobs, default, noisy=noisy)
        for d in depths
    }
    common = set.intersection(*({e.candidate for e in p.ranking} for p in per.values()))
    ranking = [
        _geomean(c, [next(e for e in p.ranking if e.candidate == c) for p in per.values()]) for c in common
    ]
    ranking.sort(key=lambda e: (survivors is not None and e.candidate not in survivors, -e.median))
    first = per[depths[0]]
    res = TuneResult(session, "depth", f"{first.test.split(' @ ')[0]} @ d{depths[0]}-{depths[-1]}", ranking)
    res.per_depth = per
    dflt = first.default.candidate if first.default is not None else None
    res.default = next((e for e in ranking if e.candidate == dflt), None)
    res.no_effect = all(p.no_effect for p in per.values())
    res.undecided = "" if res.no_effect else _undecided(res, mine, knobs)
    res.notes += [f"at depth {d}: {n}" for d, p in per.items() for n in p.notes]
    return res


def _geomean(c: Candidate, evs: list[Evidence]) -> Evidence:
    """One candidate's Evidence over depths: geometric means of median, low and high (tok/s)."""

    def g(xs: list[float]) -> float:
        return math.exp(statistics.fmean(math.log(x) for x in xs)) if all(x > 0 for x in xs) else 0.0

    return Evidence(
        c,
        g([e.median for e in evs]),
        g([e.low for e in evs]),
        g([e.high for e in evs]),
        sum(e.trials for e in evs),
        sum(e.samples for e in evs),
        effs.pop() if len(effs := {e.effective_ubatch for e in evs}) == 1 else None,  # one at every depth
    )


def _undecided(res: TuneResult, mine: list[BenchRecord], knobs: list[str]) -> str:
    """Why res.best is not proposed over the default: tune.held (one setting alone measured, a trial of
    either flagged host-busy, gpu-shared, ... at any depth), slower beyond the noise at a depth, or
    faster beyond it at none (noise: analysis.tables.noise_band of the two sides' samples at that
    depth, at least the verdict's min_margin). Where the best is the default, the same against the
    runner-up: within the noise at every depth, no setting tried beat the default beyond it. "" when it
    is proposed, or is the default ahead beyond the noise at a depth."""
    from toolkit.analysis.tables import ReportOptions, noise_band, slowdown_noise

    groups = by_setting((r for r in mine if r.status == "ok"), knobs)
    best, dflt, other = res.best, res.default, res.rival
    if (why := held(res, groups)) or best is None or dflt is None or other is None:
        return why
    lead = other is dflt  # else the default leads: held against the runner-up
    margin, wins = ReportOptions().min_margin, []
    for d in sorted(res.per_depth):
        a, b = (_samples(mine, d, c, knobs) for c in (best.candidate, other.candidate))
        if min(len(a), len(b)) < 2:
            return f"a single sample at depth {d}: its noise is unknown; tune with more repetitions"
        gain = statistics.median(a) / statistics.median(b) - 1
        band = max(noise_band(_rsd(a), _rsd(b)), margin)  # a margin of the faster over the slower
        if gain < -(slower := slowdown_noise(band)):  # as a slowdown: a band past 100 % hid any (brk47)
            return (
                f"{best.candidate.label()} is {100 * gain:+.1f}% against "
                f"{'the default' if lead else other.candidate.label()} at depth {d}, beyond the noise (± "
                f"{100 * slower:.0f}%): no one micro-batch is best at every depth"
            )
        wins += [d] if gain > band else []
    if wins:
        return ""
    if not lead:
        return (
            f"no setting tried beat the matrix default ({dflt.candidate.label()}) beyond the noise: "
            f"{other.candidate.label()} is within the noise of it at every depth"
        )
    return f"{best.candidate.label()} is within the noise of the default at every depth"


def _samples(mine: list[BenchRecord], depth: int, c: Candidate, knobs: list[str]) -> list[float]:
    """The tok/s samples of setting `c` at `depth` among the session's records `mine` (setting_of)."""
    return [
        x
        for r in mine
        if r.n_depth == depth and r.status == "ok" and setting_of(r, knobs) == c
        for x in r.samples_ts
    ]


def _rsd(xs: list[float]) -> float:
    med = statistics.median(xs)
    return stats.stdev(xs) / med if med else 0.0


def depth_matrix_diff(matrix_path: Path, res: TuneResult, model: str) -> str:
    """A unified diff setting `n_ubatch: N` in model `model`'s `depth:` block of matrix.yaml (a text
    edit: comments and layout kept; apply it with `git apply` or `patch -p1`); "" when nothing is
    proposed (no effect, undecided, or the current one is best). BadInput when the file has no
    `depth:` block under that model."""
    best = res.best
    if (
        best is None
        or res.no_effect
        or res.undecided
        or (res.default and best.candidate == res.default.candidate)
    ):
        return ""
    ub = best.candidate.get("n_ubatch")
    lines = matrix_path.read_text().splitlines(True)
    at = _depth_block(lines, model, matrix_path)
    depth_indent = len(lines[at]) - len(lines[at].lstrip())
    end, indent, found, last = at + 1, depth_indent + 2, None, None
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > depth_indent):
        if lines[end].strip():
            indent = _indent(lines[end])
            found = end if lines[end].lstrip().startswith("n_ubatch:") else found
            last = end
        end += 1
    if last is None:
        raise BadInput(f"{matrix_path}: {model!r}'s `depth:` is written on one line; write one key a line")
    new = list(lines)
    entry = f"{' ' * indent}n_ubatch: {ub}  # toolkit tune --axis depth, session {res.session}\n"
    if found is not None:
        new[found] = entry
    else:
        new.insert(last + 1, entry)
    name = matrix_path.name
    return "".join(difflib.unified_diff(lines, new, f"a/{name}", f"b/{name}"))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _depth_block(lines: list[str], model: str, path: Path) -> int:
    """The index of the `depth:` line of model `model`'s entry in matrix.yaml's lines."""
    head = re.compile(rf"^(\s*)- name:\s*['\"]?{re.escape(model)}['\"]?\s*(#.*)?$")
    for i, line in enumerate(lines):
        m = head.match(line.rstrip("\n"))
        if not m:
            continue
        item = len(m.group(1))
        for j in range(i + 1, len(lines)):
            if lines[j].strip() and _indent(lines[j]) <= item:
                break
            if lines[j].strip().startswith("depth:") and _indent(lines[j]) == item + 2:
                return j
    raise BadInput(
        f"{path}: models entry {model!r} has no `depth:` block to write n_ubatch into; add one "
        "(docs/running.md, Depth curves)"
    )
