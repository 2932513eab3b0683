"""`toolkit tune`: search the knobs that change one axis of one image x model, within a budget.

Knobs (llama-bench): n_ubatch, n_batch, threads (CPU images), flash attention; the workload point is pp L
(prefill), tg N (decode) or pp L at every depth of the model's depth sweep (depth: toolkit.bench.tune_depth).
Successive halving on repetitions: every candidate is measured with `r` repetitions, the better half (median
tok/s) goes on with 2r until one is left or the budget is spent; a clear loser (best sample below the leader's
worst) is dropped at once. Every trial is an ordinary bench run of that case alone, marked `tune: {session,
round}`; the answer (`best_setting`, `tuned_test`) is computed from the stored records of that test alone: the
setting, its gain over the matrix default measured in the same session, median, min-max, trials; "no effect"
only where measured equal within noise. How trials show in report and compare: docs/running.md "Tuning the
knobs"."""

from __future__ import annotations

import difflib
import itertools
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from toolkit.bench.runners.base import model_file_here
from toolkit.core import invocation, stats
from toolkit.core.errors import BadInput
from toolkit.matrix.api import MAX_AXIS_VALUE, MAX_COUNT, BenchAxes, ImageSpec, LoadedMatrix, ModelSpec
from toolkit.results.records import BenchRecord, new_run_id

KNOBS = ("n_ubatch", "n_batch", "threads", "flash_attn")
AXIS_KNOBS: dict[str, tuple[str, ...]] = {
    "prefill": KNOBS,
    "depth": ("n_ubatch",),  # one micro-batch per model (tune_depth)
    "decode": ("flash_attn", "threads"),  # tg makes one token per step: no batch or micro-batch applies
}
"""The knobs each --axis searches, the default first (threads: CPU images only, and default there)."""
WHY_NOT = {
    "depth": "one micro-batch per model, written into its `depth:` block",
    "decode": "decode (tg) generates one token per step, so llama-bench's batch and micro-batch sizes "
    "(-b, -ub) never change it",
}
DEFAULT_VALUES: dict[str, list[int]] = {
    "n_ubatch": [128, 512, 2048],
    "n_batch": [512, 2048],
    "flash_attn": [0, 1],
}
KNOB_RANGE: dict[str, tuple[int, int]] = {
    "n_ubatch": (1, MAX_AXIS_VALUE),
    "n_batch": (1, MAX_AXIS_VALUE),
    "threads": (1, MAX_COUNT),
    "flash_attn": (-1, 1),  # llama-bench's -fa: -1 auto, 0 off, 1 on
}
"""The values a knob takes (--values), as matrix.yaml's bench axes take them (matrix schema)."""


@dataclass(frozen=True)
class Candidate:
    """One setting of the searched knobs, e.g. {"n_ubatch": 2048, "threads": 2}."""

    values: tuple[tuple[str, int], ...]

    def get(self, knob: str, default: int | None = None) -> int | None:
        return dict(self.values).get(knob, default)

    def label(self, searched: Iterable[str] = ()) -> str:
        """`n_ubatch=512 threads=2`; a knob of `searched` (the session's) this setting leaves to llama-bench
        (the matrix default's threads, where the matrix sets none) said so: the other candidates and the
        records read back name its value (nc51 S7: `round 1: flash_attn=1` beside `... threads=2`)."""
        unset = [k for k in searched if self.get(k) is None]
        said = f" ({', '.join(unset)}: llama-bench's default)" if unset else ""
        return (" ".join(f"{k}={v}" for k, v in self.values) or "matrix default") + said


@dataclass
class Evidence:
    """What the stored records say about one candidate: median / min / max tok/s over all its
    samples, mean and stddev of the newest trial, trials = records read for it."""

    candidate: Candidate
    median: float
    low: float
    high: float
    trials: int
    samples: int
    effective_ubatch: int | None = None


@dataclass
class TuneResult:
    """The answer of one session: `best` and `default` evidence, `gain` = best / default - 1,
    `no_effect` (all candidates equal within noise), notes (clamping, dropped losers, budget)."""

    session: str
    axis: str
    test: str
    ranking: list[Evidence] = field(default_factory=list)
    default: Evidence | None = None
    notes: list[str] = field(default_factory=list)
    no_effect: bool = False
    # why the best cannot be called better than the default (then nothing is proposed); the default
    # the best: why it cannot be called better than the runner-up (no setting tried beat it beyond noise)
    undecided: str = ""
    per_depth: dict[int, TuneResult] = field(default_factory=dict)  # axis depth: the answer at each depth

    @property
    def best(self) -> Evidence | None:
        return self.ranking[0] if self.ranking else None

    @property
    def rival(self) -> Evidence | None:
        """What the best is held against: the default, or where the best is the default the runner-up."""
        if self.best is None or self.default is None or self.best.candidate != self.default.candidate:
            return self.default
        return self.ranking[1] if len(self.ranking) > 1 else None

    @property
    def gain(self) -> float | None:
        if self.best is None or self.default is None or not self.default.median:
            return None
        return self.best.median / self.default.median - 1


def parse_budget(text: str) -> float:
    """`20m`, `90s`, `1h`, `300` -> seconds. Raises BadInput naming --budget."""
    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600}.get(t[-1:], None)
    num = t[:-1] if mult else t
    try:
        v = float(num) * (mult or 1)
    except ValueError:
        raise BadInput(f"--budget {text!r}: give a duration like 90s, 20m or 1h") from None
    if not math.isfinite(v) or v <= 0:
        raise BadInput(f"--budget {text!r}: must be a positive duration")
    return v


MAX_CANDIDATES = 1000
"""The most knob settings a search may cross to (`--values`): 3000 x 3000 values hung `tune` listing
9 x 10^6 settings (quadratically: each checked against the list) before its first trial."""


def candidates(knobs: dict[str, list[int]], default: Candidate) -> list[Candidate]:
    """The crossed knob values (invalid ub > n_batch left out), the matrix default first."""
    names = sorted(knobs)
    out = [default]
    for combo in itertools.product(*(knobs[k] for k in names)):
        c = Candidate(tuple(zip(names, combo, strict=True)))
        ub, b = c.get("n_ubatch", default.get("n_ubatch")), c.get("n_batch", default.get("n_batch"))
        if ub and b and ub > b:
            continue
        if c not in out:
            out.append(c)
    return out


@dataclass(frozen=True)
class TunedTest:
    """The test a session tunes, as its records state it: pp `n_prompt` (n_gen 0) or tg `n_gen`
    (n_prompt 0), tokens, at each of `depths` (tokens in the KV cache; (0,) but for axis depth)."""

    n_prompt: int
    n_gen: int
    depths: tuple[int, ...] = (0,)

    def holds(self, r: BenchRecord) -> bool:
        """Whether record `r` measured this test (a trial's other records, e.g. a depth sweep's, do not)."""
        return r.n_prompt == self.n_prompt and r.n_gen == self.n_gen and r.n_depth in self.depths


def tuned_test(base: BenchAxes, axis: str, tokens: int) -> TunedTest:
    """The test a session of `axis` tunes: pp `tokens` (prefill; depth: at each of `base.n_depth`) or
    tg `tokens` (decode). What case_axes measures and what the ranking reads (best_setting)."""
    return TunedTest(
        tokens if axis in ("prefill", "depth") else 0,
        tokens if axis == "decode" else 0,
        tuple(base.n_depth) if axis == "depth" else (0,),
    )


def case_axes(base: BenchAxes, axis: str, tokens: int, c: Candidate, repetitions: int) -> BenchAxes:
    """The one-case BenchAxes of a trial (pp `tokens` or tg `tokens`) at setting `c`; axis depth: pp
    `tokens` at each of `base.n_depth` (one llama-bench process): tuned_test's test."""
    test = tuned_test(base, axis, tokens)
    upd: dict[str, Any] = {
        "n_prompt": [test.n_prompt],
        "n_gen": [test.n_gen],
        "n_depth": list(test.depths),
        "repetitions": repetitions,
        "runs": 1,
        "n_ubatch": [c.get("n_ubatch", base.n_ubatch[0])],
        "n_batch": [c.get("n_batch", base.n_batch[0])],
        "flash_attn": [c.get("flash_attn", base.flash_attn[0])],
        "n_gpu_layers": [base.n_gpu_layers[0]],
    }
    if c.get("threads"):
        upd["threads"] = c.get("threads")
    return base.model_copy(update=upd)


def by_setting(records: Iterable[BenchRecord], knobs: list[str]) -> dict[Candidate, list[BenchRecord]]:
    """{setting: its records} of trial `records`, each by the setting it stored (setting_of)."""
    groups: dict[Candidate, list[BenchRecord]] = {}
    for r in records:
        groups.setdefault(setting_of(r, knobs), []).append(r)
    return groups


def setting_of(r: BenchRecord, knobs: list[str]) -> Candidate:
    """The setting of `knobs` (names of KNOBS) stored trial `r` measured, read back from the record (not
    from memory): threads as llama-bench recorded them (n_threads), the others as record fields; a knob
    the record does not state is left out."""
    vals = []
    for k in knobs:
        v = r.raw.get("n_threads") if k == "threads" else getattr(r, k, None)
        if v is not None:
            vals.append((k, int(v)))
    return Candidate(tuple(sorted(vals)))


def best_setting(
    records: list[BenchRecord],
    session: str,
    knobs: list[str],
    default: Candidate,
    *,
    noisy: float = 0.05,
    survivors: set[Candidate] | None = None,
    test: TunedTest | None = None,
) -> TuneResult:
    """The answer from the stored trial records of `session` alone, of the tuned `test` only (None: every
    record of the session must be of one test, else BadInput): candidates ranked by the median of all their
    samples, the search's `survivors` (settings read back from their records) first, so a setting the search
    dropped is never the answer; the default's evidence (the trial marked `tune.default`, as the record says
    it ran); `no_effect` when every candidate's median lies within 3 x the pooled stddev of the others and
    none is noisy (relative stddev > `noisy`). BadInput without an ok trial record of the test."""
    mine = [
        r
        for r in records
        if (r.model_extra or {}).get("tune", {}).get("session") == session
        and r.status == "ok"
        and r.samples_ts
        and (test is None or test.holds(r))
    ]
    if not mine:
        raise BadInput(f"tune session {session}: no ok trial records found")
    axis, name = mine[0].axis, mine[0].test
    if test is None and len(tests := list(dict.fromkeys(r.test for r in mine))) > 1:
        raise BadInput(f"tune session {session}: its trials measured {', '.join(tests)}: name the tuned test")
    groups = by_setting(mine, knobs)
    res = TuneResult(session, axis, name, [_evidence(c, rs) for c, rs in groups.items()])
    res.ranking.sort(key=lambda e: (survivors is not None and e.candidate not in survivors, -e.median))
    marked = [r for r in mine if (r.model_extra or {})["tune"].get("default")]
    dflt = setting_of(marked[0], knobs) if marked else _setting_of_default(default, knobs)
    res.default = next((e for e in res.ranking if e.candidate == dflt), None)
    res.no_effect = _no_effect(groups, res.ranking, noisy)
    res.undecided = _undecided(res, groups)
    effs = {e.effective_ubatch for e in res.ranking if e.candidate.get("n_ubatch") is not None}
    asked = {ub for e in res.ranking if (ub := e.candidate.get("n_ubatch")) is not None}
    if len(asked) > 1 and None not in effs and len(effs) < len(asked):
        res.notes.append(
            f"llama.cpp clamps n_ubatch for {name}: asked {sorted(asked)} -> effective "
            f"{sorted(e for e in effs if e is not None)} (min(ub, n_batch, tokens)); the setting can still "
            "change buffers and speed, so it was measured, not assumed"
        )
    return res


def _evidence(c: Candidate, rs: list[BenchRecord]) -> Evidence:
    """The evidence of candidate `c` from its trial records `rs`, all of the tuned test: the effective
    micro-batch of the newest as the report reads it (facts.ub_clamped, else the asked n_ubatch;
    None for a test the micro-batch does not apply to: facts.ub_applies, a decode test)."""
    from toolkit.analysis.facts import ub_applies, ub_clamped

    xs = [x for r in rs for x in r.samples_ts]
    last = rs[-1]
    return Evidence(
        c,
        statistics.median(xs),
        min(xs),
        max(xs),
        len(rs),
        len(xs),
        (ub_clamped(last) or last.n_ubatch) if ub_applies(last) else None,
    )


def _no_effect(groups: dict[Candidate, list[BenchRecord]], ranking: list[Evidence], noisy: float) -> bool:
    """The no-effect rule of `best_setting`: the medians of `ranking` lie within 3 x the pooled stddev
    of the candidates' samples (`groups`), and none is noisy (relative stddev > `noisy`)."""

    def sd(rs: list[BenchRecord]) -> float:
        return (
            stats.stdev(x for r in rs for x in r.samples_ts)
            if sum(len(r.samples_ts) for r in rs) > 1
            else 0.0
        )

    sds = [sd(rs) for rs in groups.values()]
    pooled = math.sqrt(sum(s * s for s in sds) / len(sds)) if sds else 0.0
    meds = [e.median for e in ranking]
    # each candidate's own stddev over its own median (ranking is sorted by median, groups are not)
    rel = max((sd(groups[e.candidate]) / e.median for e in ranking if e.median), default=0.0)
    return len(meds) > 1 and max(meds) - min(meds) <= 3 * pooled and rel <= noisy and pooled > 0


def held(res: TuneResult, groups: dict[Candidate, list[BenchRecord]]) -> str:
    """Why `res.best` is not decided whatever its numbers, on every axis (depth too: tune_depth): one setting
    alone was measured, or a trial record of the best or of the setting it is held against (`groups`: each
    candidate's records) carries a telemetry flag (host-busy, gpu-shared, throttled, ...: the system, not the
    setting, may have made the difference): the default, or where the best is the default any setting it beat
    (a flagged lead crowns no default either). "" otherwise, and where every candidate measured alike
    (no_effect)."""
    from toolkit.analysis.tables import telemetry_flags

    best, dflt = res.best, res.default
    if best is not None and len(res.ranking) < 2:  # nc47 S11: a budget spent on the first setting
        return f"only {best.candidate.label()} was measured (the budget or a stop came first): nothing to compare"
    if best is None or res.no_effect:
        return ""
    won = dflt is not None and best.candidate == dflt.candidate
    sides = (
        [e.candidate for e in res.ranking]
        if won
        else [best.candidate] + ([dflt.candidate] if dflt is not None else [])
    )
    flagged = sorted({f for c in sides for r in groups.get(c, []) for f in telemetry_flags(r)})
    if flagged:
        n = len([r for c in sides for r in groups.get(c, []) if telemetry_flags(r)])
        against = " or a setting it beat" if won else " or the default" if dflt is not None else ""
        return (
            f"{n} trial(s) of {best.candidate.label()}{against} were flagged "
            f"({', '.join(flagged)}): the system, not the setting, may have made the difference; tune again "
            "on an idle host"
        )
    return ""


def _undecided(res: TuneResult, groups: dict[Candidate, list[BenchRecord]]) -> str:
    """Why `res.best` cannot be called better than the default, the rules of the report's verdict: held (one
    setting alone measured, a flagged trial of either), a side has a single sample (noise unknown), the best
    lost to a default the search dropped, or the gain is within the noise (2 x the combined relative stddev of
    their samples, analysis.tables.noise_band, and at least the verdict's min_margin). Where the best is the
    default, the same rules against the runner-up. "" when it can (or the default was not measured)."""
    from toolkit.analysis.tables import ReportOptions, noise_band

    best, dflt, other = res.best, res.default, res.rival
    if (why := held(res, groups)) or best is None or res.no_effect or dflt is None or other is None:
        return why
    lead = other is dflt  # else the default leads: held against the runner-up

    def samples(c: Candidate) -> list[float]:
        return [x for r in groups[c] for x in r.samples_ts]

    if min(len(samples(best.candidate)), len(samples(other.candidate))) < 2:
        return "a single sample on one side: its noise is unknown; tune with more repetitions"

    def rsd(c: Candidate) -> float:
        xs = samples(c)
        med = statistics.median(xs)
        return stats.stdev(xs) / med if med else 0.0

    gain = best.median / other.median - 1 if other.median else None
    if lead and gain is not None and gain < 0:
        return (
            f"{best.candidate.label()} measured {100 * gain:+.1f}% against the default, which the search "
            "dropped: no setting tried beat the default"
        )
    margin = ReportOptions().min_margin
    band = max(noise_band(rsd(best.candidate), rsd(other.candidate)), margin)
    if gain is None or gain > band:
        return ""
    noise = (
        f"within the noise (± {100 * band:.0f}%: 2 x the combined relative stddev, at least the verdict's "
        f"{100 * margin:g}% margin)"
    )
    if not lead:
        return (
            f"no setting tried beat the matrix default ({dflt.candidate.label()}) beyond the noise: it leads "
            f"{other.candidate.label()} by {100 * gain:.1f}%, {noise}"
        )
    return (
        f"{best.candidate.label()} is {100 * gain:+.1f}% over the default, {noise}; more repetitions or a "
        "longer budget may tell"
    )


def _setting_of_default(default: Candidate, knobs: list[str]) -> Candidate:
    return Candidate(tuple(sorted((k, v) for k, v in default.values if k in knobs)))


Trial = Callable[[BenchAxes, dict[str, Any]], list[BenchRecord]]


def search(
    lm: LoadedMatrix,
    *,
    axis: str,
    tokens: int,
    knobs: dict[str, list[int]],
    budget_s: float,
    run_trial: Trial,
    max_rounds: int = 4,
    on_note: Callable[[str], None] = lambda s: None,
    rank: Callable[..., TuneResult] | None = None,
) -> TuneResult:
    """Successive halving over `knobs` for one case; `run_trial(axes, record_extra)` measures one
    candidate (an ordinary bench run) and returns its records as stored (ranked from those alone: the
    cost of a round is its trials', never the stored history's). Stops at one candidate, after
    `max_rounds`, or when `budget_s` seconds are spent (no new trial starts past it). `rank`: how the
    stored trials are ranked, best_setting's signature (default best_setting; axis depth passes
    tune_depth.best_over_depth), given the tuned test (tuned_test): a trial's other records never count."""
    if axis not in ("prefill", "decode", "depth"):
        raise BadInput(f"--axis {axis!r}: prefill, decode or depth")
    rank = rank or best_setting
    base = lm.m.bench
    default = _matrix_default(base, knobs)
    test = tuned_test(base, axis, tokens)  # the ranking reads its records only
    alive = candidates(knobs, default)
    asked: dict[Candidate, Candidate] = {}  # setting as its records read back -> setting as asked
    session = new_run_id()
    t0 = time.monotonic()
    reps = 2  # the first round's repetitions
    names = sorted(knobs)
    dropped: list[str] = []
    trials: list[BenchRecord] = []  # the session's records as stored, each trial's (run_trial reads them
    # back): ranked without reading the rest of the folder, whose history can be 100,000s of records
    for rnd in range(1, max_rounds + 1):
        spent = False
        for c in alive:
            if time.monotonic() - t0 > budget_s:
                on_note(f"budget of {budget_s:.0f} s spent: stopped before {c.label(names)} in round {rnd}")
                spent = True
                break
            on_note(f"round {rnd}: {c.label(names)} x {reps} repetitions")
            mark = {"session": session, "round": rnd, **({"default": True} if c == default else {})}
            recs = [
                r for r in run_trial(case_axes(base, axis, tokens, c, reps), {"tune": mark}) if test.holds(r)
            ]
            trials += recs
            asked[setting_of(recs[0], names) if recs else c] = c
        if spent:
            break
        live = {k for k, c in asked.items() if c in alive}
        res = rank(trials, session, names, default, survivors=live, test=test)
        ranked = [e for e in res.ranking if e.candidate in live]
        if not ranked:
            break
        keep, clear_losers = _next_round(ranked, rnd)
        dropped += clear_losers
        alive = list(dict.fromkeys(asked[k] for k in keep))
        reps *= 2
        if len(alive) <= 1:
            break
    live = {k for k, c in asked.items() if c in alive}
    res = rank(trials, session, names, default, survivors=live or None, test=test)
    res.notes += [f"dropped early as a clear loser: {d}" for d in dropped]
    return res


def _matrix_default(base: BenchAxes, knobs: dict[str, list[int]]) -> Candidate:
    """The matrix's own setting of the searched knobs (threads only where the matrix sets it)."""
    return Candidate(
        tuple(
            sorted(
                (k, v)
                for k, v in {
                    "n_ubatch": base.n_ubatch[0],
                    "n_batch": base.n_batch[0],
                    "flash_attn": base.flash_attn[0],
                    **({"threads": base.threads} if base.threads else {}),
                }.items()
                if k in knobs
            )
        )
    )


def _next_round(ranked: list[Evidence], rnd: int) -> tuple[list[Candidate], list[str]]:
    """Who goes on after round `rnd` (`ranked`: the live candidates, leader first), and the clear losers
    dropped, said why: a loser's every sample is below the leader's worst. Successive halving: of more
    than two left, the better half goes on (with twice the repetitions)."""
    leader = ranked[0]
    losers = [e for e in ranked[1:] if e.high < leader.low]
    dropped = [
        f"{e.candidate.label()} (best sample {e.high:.2f} < the leader's worst {leader.low:.2f}, round {rnd})"
        for e in losers
    ]
    keep = [e.candidate for e in ranked if e not in losers]
    if len(keep) > 2:
        keep = keep[: math.ceil(len(keep) / 2)]
    return keep, dropped


def format_result(res: TuneResult) -> str:
    """The answer as text: best setting, gain over the matrix default, the evidence table (the default's
    row marked; the effective micro-batch where it applies to a row)."""
    if res.best is None:
        return "no trial completed"
    lines = [f"tune session {res.session}: {res.axis} {res.test}"]
    if res.no_effect:
        lines.append("no effect: every setting tried gave the same tok/s within noise (3 x pooled stddev)")
    elif res.undecided:
        lines.append(f"not decided: {res.undecided}; the matrix default stays")
    elif res.default is not None and res.best.candidate == res.default.candidate:
        lines.append(
            f"best: the matrix default ({res.best.candidate.label()}): median {res.best.median:.2f} tok/s"
        )
    else:
        gain = (
            f"{100 * res.gain:+.1f}% over the matrix default ({res.default.candidate.label()})"
            if res.gain is not None and res.default is not None  # gain is None without a default
            else "the matrix default was not measured"
        )
        lines.append(f"best: {res.best.candidate.label()}: median {res.best.median:.2f} tok/s, {gain}")
    lines.append("")
    ub = any(e.effective_ubatch for e in res.ranking)  # none where the micro-batch applies to no row (tg)
    lines.append(
        "| setting | median tok/s | min–max | trials | samples |" + (" effective ub |" if ub else "")
    )
    lines.append("|---|---|---|---|---|" + ("---|" if ub else ""))
    dflt = res.default.candidate if res.default is not None else None
    for e in res.ranking:
        mark = " (matrix default)" if e.candidate == dflt else ""
        lines.append(
            f"| {e.candidate.label()}{mark} | {e.median:.2f} | {e.low:.2f}–{e.high:.2f} | {e.trials} | "
            f"{e.samples} |" + (f" {e.effective_ubatch or ''} |" if ub else "")
        )
    for d, one in sorted(res.per_depth.items()):
        lines.append(
            f"at depth {d}: " + ", ".join(f"{e.candidate.label()} {e.median:.2f}" for e in one.ranking)
        )
    lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def matrix_diff(matrix_path: Path, res: TuneResult) -> str:
    """A unified diff proposing the best setting as the matrix's bench axes (not applied)."""
    if (
        res.best is None
        or res.no_effect
        or res.undecided
        or (res.default is not None and res.best.candidate == res.default.candidate)
    ):
        return ""
    text = matrix_path.read_text()
    data = yaml.safe_load(text)
    bench = data.setdefault("bench", {})
    for k, v in res.best.candidate.values:
        if k == "threads":
            bench["threads"] = v
        else:
            bench[k] = [v]
    new = yaml.safe_dump(data, sort_keys=False)
    old = yaml.safe_dump(yaml.safe_load(text), sort_keys=False)
    return "".join(
        difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), f"a/{matrix_path.name}", f"b/{matrix_path.name}"
        )
    )


def knob_values(
    spec: ImageSpec, base: BenchAxes, names: list[str], tokens: int, axis: str
) -> dict[str, list[int]]:
    """{knob: values} for `names` (none: AXIS_KNOBS[axis]'s first, and threads on a CPU image):
    micro-batch / batch powers of two up to the test's tokens (and the matrix's own), threads 1..cores
    for CPU images, flash attention off/on. BadInput for a knob `axis` does not search (WHY_NOT says
    why), or threads on a GPU image."""
    mine = AXIS_KNOBS[axis]
    names = names or [mine[0], *(["threads"] if spec.backend == "cpu" and "threads" in mine else [])]
    out: dict[str, list[int]] = {}
    for k in names:
        if k not in KNOBS:
            raise BadInput(f"--knob {k!r}: one of {', '.join(KNOBS)}")
        if k not in mine:
            raise BadInput(f"--knob {k}: --axis {axis} searches {', '.join(mine)} only ({WHY_NOT[axis]})")
        if k == "threads":
            if spec.backend != "cpu":
                raise BadInput(f"--knob threads: only for CPU images ({spec.name} is {spec.backend})")
            n = os.cpu_count() or 1
            out[k] = sorted({1, max(1, n // 2), n})
        elif k == "n_ubatch":
            out[k] = sorted({v for v in DEFAULT_VALUES[k] if v <= max(tokens, 1) * 4} | {base.n_ubatch[0]})
        else:
            out[k] = sorted(set(DEFAULT_VALUES[k]) | {getattr(base, k)[0]})
    return out


def model_for(lm: LoadedMatrix, name: str | None, spec: ImageSpec) -> ModelSpec:
    """The model to tune on: `name`, else (as bench would find one) the first model of the image's
    runner whose file is present or can be generated (the tiny stand-in on a host without the real one)."""
    models = [m for m in lm.m.models if spec.runner in m.runners and (name is None or m.name == name)]
    if not models:
        raise BadInput(_no_model(lm, name, spec))
    if name is None:
        usable = [m for m in models if m.generate or model_file_here(lm, m)]  # a file, not a folder or a loop
        if not usable:
            raise BadInput(
                f"no model file of {spec.name}'s runner is present ({', '.join(m.name for m in models)}); "
                f"run `{invocation.command('fetch-model', models[0].name)}` or pass --model"
            )
        return usable[0]
    return models[0]


def _no_model(lm: LoadedMatrix, name: str | None, spec: ImageSpec) -> str:
    """Why no model of the matrix is `name` on `spec`'s runner: an unknown name, or the model (its
    format, its runners) and the models that do run on it."""
    runs = [m.name for m in lm.m.models if spec.runner in m.runners]
    them = f"models that do: {', '.join(runs)}" if runs else "no model of the matrix does"
    named = next((m for m in lm.m.models if m.name == name), None)
    if name is not None and named is None:
        return f"--model {name!r}: no model of the matrix has this name ({', '.join(m.name for m in lm.m.models)})"
    if named is not None:
        return (
            f"--model {name!r}: this model (a {named.format} model, runners {', '.join(named.runners)}) does not "
            f"run on {spec.runner}, {spec.name}'s runner; {them}"
        )
    return f"no model of the matrix runs on {spec.name} ({spec.runner})"
