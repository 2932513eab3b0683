"""[BenchRecord] --verdict--> per axis the winning image and its margin, and a routing rule.

Method (stated in the report):
- A workload point ("group") is a test shape — prefill pp<L> (at depth d), decode tg<N>, served
  c<C> — of one model family: the record's `model.family` when a runner sets it (so a vLLM AWQ
  checkpoint and a GGUF of the same base weights compare), else llama-bench's model type without
  its quantization (`qwen3moe 30B.A3B`), else the model name.
- A number from a single sample has no stddev: its noise is unknown (rsd counted as 0) and the
  verdict names the images where that is so.
- Knobs an operator sets per image (n_ubatch, n_batch, flash attention, GPU layers, threads) are
  not workload: each image is judged at its best measured setting, named in the evidence row.
- Axis score of an image = geometric mean of its best tok/s over the groups every image measured.
- Winner = best score; margin = winner / runner-up - 1. It is a win only when the margin exceeds
  max(2 x combined relative stddev, min_margin); combined = sqrt(rsd_winner² + rsd_runner_up²), each
  the root mean square of the rows' stddev/avg. Where every deciding cell of both carries a 95 %
  confidence interval (>= 3 process repeats, facts.Interval), the intervals replace the stddev: the
  margin must exceed max((1 + h_runner_up) / (1 - h_winner) - 1, min_margin), h each the root mean
  square of the rows' relative half-widths (the intervals do not overlap, tables.ci_band); a verdict
  between a cell with an interval and one without uses the stddev rule. Otherwise: "no clear winner".
- Routing rule: prefill-heavy -> the winner at the longest prompt measured (where prefill cost
  dominates); latency-bound decode -> the decode winner; mixed / unknown -> among images never last
  on either axis, the best geometric mean of (score / best score) over both axes; batched serving ->
  the served winner. Failed and CPU-fallback records never count, nor `wrong-output` ones (the canary),
  nor a `toolkit tune` trial's (identity.is_tune_trial: a search run at a setting the matrix did not
  ask for, shown flagged tune-trial; a trial never stands for a bench run of its test).
- Telemetry flags (TELEMETRY_VERDICT_FLAGS: gpu-shared, throttled:<reason>, clock-idle,
  power-not-stock, host-busy) say a number is not the card's alone. The deciding cells of a
  comparison are the leader's and the runner-up's entries (each image's best record) in the groups
  it is made on: every common group for an axis, the longest prompt for the prefill route, both
  axes for the mixed pick. Every flagged deciding cell is named with its flags, always. When a
  flagged cell is the leader's, the lead is not called decided ("held": no winner, no route), however
  large the margin: the crown would rest on a number that is not the card's. When only the
  runner-up's cells are flagged (the flagged cell loses anyway), the win stands as measured, noted:
  the margin is taken against a number that is not that card's alone and may overstate the win.
  Within noise there is no winner either way, and the flags are named. energy-invalid does not count
  (it says nothing about speed).
- Above-peak flags (bw-above-peak, compute-above-peak: a roofline fraction above 1, more than every GPU
  the run used could read or compute together) hold a cell the same way (Facts.held_flags, the one
  door of both kinds): a lead resting on a number no card can produce is named and not crowned.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolkit.analysis.caveats import smoke_caveats
from toolkit.analysis.facts import Facts, Interval, facts_of, model_family, model_words, ran_on
from toolkit.analysis.flag_help import held_words
from toolkit.analysis.next_runs import no_common_note
from toolkit.analysis.provenance import sha_words
from toolkit.analysis.tables import (
    ReportOptions,
    ci_band,
    column_labels,
    knob_settings,
    margin_band,
    noise_band,
    select_latest,
)
from toolkit.core.text import Prose, md_line, md_text
from toolkit.results.identity import is_tune_trial, known_sha
from toolkit.results.records import BenchRecord

MODEL_UNKNOWN_NOTE = (
    "left out: results whose model is unknown (model=unknown: imported rows that name no model, no "
    "model_filename or model_type, as a vLLM bench JSON names none), not known to be the model of any other"
)

VERDICT_AXES = ("prefill", "decode", "served")
WORKLOADS = {
    "prefill": "prefill-heavy (long prompts: RAG, summarisation)",
    "decode": "latency-bound decode (one interactive user, long answers)",
    "mixed": "mixed / unknown workload",
    "served": "batched serving (many concurrent users)",
}


@dataclass(frozen=True)
class Entry:
    """An image's best record at one group, and the setting that gave it."""

    image: str
    record: BenchRecord
    value: float
    rsd: float
    setting: str
    flags: tuple[str, ...] = ()  # held flags of this cell (Facts.held_flags): telemetry or above-peak
    ci: Interval | None = None  # the 95 % interval over process means (Facts.ci; None: unknown)
    stddev: float | None = None  # tok/s, Facts.stddev: None where the record says no spread

    @property
    def noise_known(self) -> bool:
        """The record says how much its number varies (a stddev); a single sample does not."""
        return self.stddev is not None

    def text(self) -> str:
        sd = f" ± {self.stddev:.2f}" if self.stddev is not None else " (noise unknown)"
        if self.ci is not None:
            sd = f" ± {self.ci.half:.2f} (95% CI, {self.ci.processes} processes)"
        fl = f" [{', '.join(self.flags)}]" if self.flags else ""
        return f"{self.image} {self.value:.2f}{sd} ({self.setting}){fl}"


@dataclass
class Group:
    name: str
    order: tuple
    entries: list[Entry]  # best first
    hosts: list[str] = field(default_factory=list)  # campaign host keys the winning image measured this on

    def margin(self) -> float | None:
        return self.entries[0].value / self.entries[1].value - 1 if len(self.entries) > 1 else None

    def noise(self, min_margin: float) -> float:
        """The margin the best entry must exceed over the next: their intervals' (both known) or
        their noise band, at least min_margin (the module docstring)."""
        top = self.entries[0]
        if len(self.entries) < 2:
            return max(noise_band(top.rsd, 0.0), min_margin)
        return max(margin_band(top, self.entries[1]), min_margin)

    def text(self) -> str:
        line = f"{self.name}: " + " > ".join(e.text() for e in self.entries)
        m = self.margin()
        return line + (f": {100 * m:+.1f}%" if m is not None else "") + on_hosts(self.hosts, " [", "]")


@dataclass
class AxisVerdict:
    axis: str
    groups: list[Group] = field(default_factory=list)
    ranking: list[tuple[str, float, float]] = field(default_factory=list)  # image, score, rms rsd
    margin: float | None = None
    noise: float | None = None
    note: str = ""
    hosts: dict[str, list[str]] = field(
        default_factory=dict
    )  # image column -> campaign host keys of its digest
    noise_unknown: list[str] = field(
        default_factory=list
    )  # images with a number of unknown stddev (1 sample)
    # images whose results of this axis have no known model (identity.model_known): left out of it
    model_unknown: list[str] = field(default_factory=list)
    # image -> its deciding cells that carry held flags (the leader's and the runner-up's only)
    flagged: dict[str, list[Entry]] = field(default_factory=dict)
    by_interval: bool = False  # the noise threshold is the leader's and runner-up's 95 % intervals
    # image -> the model files (`name sha256 <12>`) its deciding cells measured, where the ranked
    # images measured more than one file between them (one family: other quantizations or builds)
    files: dict[str, list[str]] = field(default_factory=dict)
    files_differ: bool = False  # two of `files` have other sha256s (else one is not recorded: unknown)

    @property
    def clear(self) -> bool:
        """The margin exceeds the noise threshold (what the numbers say, flags aside)."""
        return self.margin is not None and self.noise is not None and self.margin > self.noise

    @property
    def held(self) -> bool:
        """A clear lead that is not called decided: a deciding cell of the leader carries a held flag
        (telemetry or above-peak: see the module docstring)."""
        return self.clear and bool(self.flagged.get(self.ranking[0][0]))

    @property
    def decided(self) -> bool:
        return self.clear and not self.held

    @property
    def winner(self) -> str | None:
        return self.ranking[0][0] if self.decided else None

    @property
    def leader(self) -> str | None:
        return self.ranking[0][0] if self.ranking else None

    def flagged_cells(self) -> list[Entry]:
        """Every flagged deciding cell, the leader's first."""
        return [e for img, _, _ in self.ranking[:2] for e in self.flagged.get(img, [])]

    @property
    def runner_up(self) -> str | None:
        return self.ranking[1][0] if len(self.ranking) > 1 else None


def on_hosts(hosts: list[str], before: str = "; ", after: str = "") -> str:
    """`; measured on 2 hosts (n1, n2)` ("" without campaign host keys)."""
    if not hosts:
        return ""
    return f"{before}measured on {len(hosts)} host{'s' if len(hosts) > 1 else ''} ({', '.join(hosts)}){after}"


def _hosts_by_digest(fs: list[Facts]) -> dict[tuple, set[str]]:
    """(group order, image digest) -> host keys (`host.key`) that measured it; {} when no record has one."""
    out: dict[tuple, set[str]] = {}
    for f in fs:
        key = (f.record.host or {}).get("key")
        if key:
            out.setdefault((_group_of(f, False)[1], f.record.image.digest), set()).add(str(key))
    return out


@dataclass
class Route:
    workload: str
    image: str | None
    why: str
    evidence: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    axes: dict[str, AxisVerdict]
    routes: list[Route]
    caveats: list[str] = field(default_factory=list)


def _group_of(f: Facts, with_family: bool) -> tuple[str, tuple]:
    r = f.record
    if r.axis == "served":
        name, order = f.test, (f.concurrency or 0, r.n_prompt, r.n_gen)
    else:
        name, order = r.test, (r.n_depth, r.n_prompt, r.n_gen)
    return (f"{name} [{model_words(r)}]" if with_family else name), (model_family(r), *order)


def _best_entries(
    fs: list[Facts], cols: dict[int, str], knobs: dict[int, list[str]], with_family: bool
) -> tuple[dict[tuple, dict[str, Entry]], dict[tuple, str]]:
    """({group order: {image: its best Entry}}, {group order: group name}); an entry's setting names
    the knobs that vary over `fs` (knob_settings)."""
    best: dict[tuple, dict[str, Entry]] = {}
    names: dict[tuple, str] = {}
    for f in fs:
        r = f.record
        name, order = _group_of(f, with_family)
        names[order] = name
        clamped = [f"(effective ub{f.ub_clamped})"] if f.ub_clamped else []
        setting = " ".join([f.test, *clamped, *knobs[id(r)]])
        assert f.value is not None  # fs keeps only records with a value
        e = Entry(cols[id(r)], r, f.value, f.rsd or 0.0, setting, f.held_flags, f.ci, f.stddev)
        cur = best.setdefault(order, {})
        if e.image not in cur or e.value > cur[e.image].value:
            cur[e.image] = e
    return best, names


def _set_hosts(
    out: AxisVerdict, fs: list[Facts], cols: dict[int, str], images: list[str], common: list[tuple]
) -> None:
    """The campaign host keys of each group's winning number and of each image column (none: left empty)."""
    at = _hosts_by_digest(fs)
    for g in out.groups:  # the winning number of each group: on how many hosts its image digest measured it
        g.hosts = sorted(at.get((g.order, g.entries[0].record.image.digest), set()))
    if at:
        for img in images:
            digest = next(f.record.image.digest for f in fs if cols[id(f.record)] == img)
            out.hosts[img] = sorted(set().union(*(at.get((o, digest), set()) for o in common)))


def _rank(
    out: AxisVerdict,
    best: dict[tuple, dict[str, Entry]],
    common: list[tuple],
    images: list[str],
    min_margin: float,
) -> None:
    """The ranking by geometric mean over the common groups, the margin, its noise threshold, and the
    flagged deciding cells."""
    for img in images:
        es = [best[o][img] for o in common]
        score = math.exp(sum(math.log(e.value) for e in es) / len(es))
        # squared as a product (inf where it overflows), never `**` (OverflowError, a traceback)
        rms = math.sqrt(sum(e.rsd * e.rsd for e in es) / len(es))
        out.ranking.append((img, score, rms))
    out.ranking.sort(key=lambda x: -x[1])
    (i1, s1, r1), (i2, s2, r2) = out.ranking[0], out.ranking[1]
    out.margin = s1 / s2 - 1
    out.noise = max(noise_band(r1, r2), min_margin)
    h1, h2 = (_rms_ci(best, common, img) for img in (i1, i2))
    if h1 is not None and h2 is not None:  # every deciding cell of both carries an interval
        out.by_interval, out.noise = True, max(ci_band(h1, h2), min_margin)
    for img, _, _ in out.ranking[:2]:  # the deciding cells: leader's and runner-up's, every common group
        cells = [best[o][img] for o in common if best[o][img].flags]
        if cells:
            out.flagged[img] = cells


def _rms_ci(best: dict[tuple, dict[str, Entry]], common: list[tuple], img: str) -> float | None:
    """Root mean square of an image's relative interval half-widths over the common groups; None
    when a cell of it has no interval (fewer than 3 processes) or one reaching 0 (tables.interval_rels)."""
    cis = [best[o][img].ci for o in common]
    rels = [ci.rel() for ci in cis if ci is not None and ci.bounds]
    return math.sqrt(sum(h * h for h in rels) / len(rels)) if rels and len(rels) == len(cis) else None


def _axis_verdict(latest: list[Facts], axis: str, opts: ReportOptions) -> AxisVerdict:
    """Winner of one axis over the groups every image measured (see the module docstring), among
    `latest`: the Facts of the newest record per test (select_latest, Shown.facts): its ok ones."""
    fs = [f for f in latest if f.record.status == "ok" and f.record.axis == axis and f.value]
    trials = any(is_tune_trial(f.record) for f in fs)
    fs = [
        f
        for f in fs
        if not f.cpu_fallback and "wrong-output" not in f.stored_flags and not is_tune_trial(f.record)
    ]  # wrong-output: bench.canary
    out = AxisVerdict(axis)
    out.model_unknown = sorted({f.image for f in fs if not f.model_known})
    fs = [f for f in fs if f.model_known]  # an unknown model is no other result's model
    cols, knobs = column_labels(fs), knob_settings(fs)
    images = sorted(set(cols.values()))
    if len(images) < 2:
        out.note = f"only {images[0]} measured" if images else "no results"
        if not images and trials:  # brk47b F4: the tables show trial cells the verdict leaves out
            out.note = Prose(
                "only tune trials here, which stand for no bench run: `toolkit bench` measures the matrix"
            )
        if out.model_unknown:
            known = f" with a known model ({MODEL_UNKNOWN_NOTE}: {', '.join(out.model_unknown)})"
            out.note = Prose(out.note + known, out.note, *out.model_unknown)
        return out
    best, names = _best_entries(fs, cols, knobs, len({model_family(f.record) for f in fs}) > 1)
    common = sorted(o for o, per in best.items() if len(per) == len(images))
    out.groups = [Group(names[o], o, sorted(best[o].values(), key=lambda e: -e.value)) for o in common]
    _set_hosts(out, fs, cols, images, common)
    if not common:
        out.note = no_common_note(fs, cols, images)
        return out
    out.noise_unknown = sorted({e.image for o in common for e in best[o].values() if not e.noise_known})
    _rank(out, best, common, images, opts.min_margin)
    files = {img: sorted({_file(best[o][img].record) for o in common}) for img in images}
    shas = {known_sha(best[o][img].record) for o in common for img in images}
    if len(shas - {None}) > 1 or (None in shas and len({f for fs_ in files.values() for f in fs_}) > 1):
        out.files, out.files_differ = files, len(shas - {None}) > 1  # unknown is not different
    return out


def _file(r: BenchRecord) -> str:
    """A model file as a verdict names it: `name sha256 0123456789ab` (or `sha256 not recorded`)."""
    return f"{r.model.name} {sha_words(r)}"


def cells_text(entries: list[Entry]) -> str:
    """Flagged cells named per image and flag set: `x@ab12 pp512 ub512, pp2048 ub512 [gpu-shared]`."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for e in entries:
        settings = groups.setdefault((e.image, tuple(e.flags)), [])
        if e.setting not in settings:
            settings.append(e.setting)
    return "; ".join(f"{img} {', '.join(st)} [{', '.join(fl)}]" for (img, fl), st in groups.items())


def _flags_on(flagged: list[Entry]) -> str:
    """`telemetry flags on x@ab12 pp512 [host-busy]`: the flagged cells of a lead within noise."""
    return f"{held_words([x for e in flagged for x in e.flags], 'flags')} on {cells_text(flagged)}"


def flags_note(flagged: list[Entry], lead: str | None) -> str:
    """What the verdict says of flagged deciding cells: held when one is the leader's, else noted
    (the rule: module docstring)."""
    if not flagged:
        return ""
    if lead is not None and any(e.image == lead for e in flagged):
        mine = [x for e in flagged if e.image == lead for x in e.flags]
        on = [ran_on(e.record) for e in flagged if e.image == lead]
        return (
            f"not decided: the leader's cells carry {held_words(mine, 'flags')} ({cells_text(flagged)}): "
            f"the lead of {lead} rests on {held_words(mine, 'rests', on)}; {held_words(mine, 'fix', on)}"
        )
    theirs = [x for e in flagged for x in e.flags]
    return (
        f"flagged, and loses anyway: {cells_text(flagged)}: the win stands as measured, but its margin is "
        f"taken against {held_words(theirs, 'against', [ran_on(e.record) for e in flagged])}"
    )


def verdict(records: list[BenchRecord], opts: ReportOptions | None = None) -> Verdict:
    """The verdict over the newest ok record per test of `records` (select_latest; smoke caveats over
    all of them); a report judges the Facts it shows instead (judge)."""
    opts = opts or ReportOptions()
    return judge(facts_of(select_latest(records), opts), opts, smoke_caveats(records))


def judge(shown: list[Facts], opts: ReportOptions, caveats: list[str]) -> Verdict:
    """The verdict over the Facts of the newest record per test (a report's Shown.facts: its ok ones
    count), with the caveats of every record read (smoke_caveats)."""
    axes = {a: _axis_verdict(shown, a, opts) for a in VERDICT_AXES}
    return Verdict(axes, routing(axes, opts), caveats)


def routing(axes: dict[str, AxisVerdict], opts: ReportOptions) -> list[Route]:
    """The routing rule drawn from the axis verdicts (see the module docstring)."""
    routes = [
        _prefill_route(axes["prefill"], opts),
        _axis_route("decode", axes["decode"]),
        _mixed_route(axes),
    ]
    if axes["served"].ranking:
        routes.append(_axis_route("served", axes["served"]))
    return routes


def _axis_route(axis: str, av: AxisVerdict) -> Route:
    if not av.ranking:
        return Route(WORKLOADS[axis], None, Prose(f"not decided: {av.note}", av.note))
    assert av.margin is not None and av.noise is not None  # _axis_verdict sets both with a ranking
    ev = [g.text() for g in av.groups]
    basis = ", ".join(g.name for g in av.groups)
    if av.noise_unknown:
        basis += f" (noise unknown for {', '.join(av.noise_unknown)}: no spread recorded)"
    flagged = av.flagged_cells()
    if not av.clear:
        tied = " and ".join(i for i, _, _ in av.ranking[:2])
        note = f"; {_flags_on(flagged)}" if flagged else ""
        return Route(
            WORKLOADS[axis],
            None,
            f"no clear winner: {tied} are within noise ({_pct(av.margin, av.noise, ' < ')}%) on {basis}; "
            f"either will do{note}",
            ev,
        )
    m, noise = _pct_pair(av.margin, av.noise)
    lead = f"{m}% over {av.runner_up} on the geometric mean of {basis} (noise threshold {noise}%)"
    if av.held:
        return Route(
            WORKLOADS[axis], None, f"{flags_note(flagged, av.leader)}; measured: {av.leader} {lead}", ev
        )
    return Route(
        WORKLOADS[axis], av.winner, lead + (f"; {flags_note(flagged, av.leader)}" if flagged else ""), ev
    )


def _prefill_route(av: AxisVerdict, opts: ReportOptions) -> Route:
    if not av.groups:
        return _axis_route("prefill", av)
    longest = max(
        av.groups, key=lambda g: (g.entries[0].record.n_prompt + g.entries[0].record.n_depth, g.order)
    )
    m, noise = longest.margin(), longest.noise(opts.min_margin)
    if m is None or m <= noise:
        fallback = _axis_route("prefill", av)
        fallback.why = (
            f"at the longest prompt ({longest.name}) no clear winner ({_pct(m or 0, noise, ' < ')}%); over all "
            f"prompts: {fallback.why}"
        )
        return fallback
    top, second = longest.entries[0], longest.entries[1]
    measured = (
        f"fastest at the longest prompt measured, {longest.name}: "
        f"{top.value:.2f} vs {second.value:.2f} tok/s for {second.image} ({_pct(m, noise, ', noise threshold ')}%)"
    )
    flagged = [e for e in (top, second) if e.flags]
    if top.flags:  # the crown would rest on a flagged number: not decided (module docstring)
        return Route(
            WORKLOADS["prefill"],
            None,
            f"{flags_note(flagged, top.image)}; measured: {top.image} {measured}",
            [longest.text()],
        )
    return Route(
        WORKLOADS["prefill"],
        top.image,
        measured + (f"; {flags_note(flagged, top.image)}" if flagged else ""),
        [longest.text()],
    )


def _flagged_on_both(axes: dict[str, AxisVerdict], image: str) -> list[Entry]:
    """An image's flagged cells among the groups both axes' verdicts are made on."""
    return [
        e
        for av in (axes["prefill"], axes["decode"])
        for g in av.groups
        for e in g.entries
        if e.image == image and e.flags
    ]


def _shares_of_best(
    pre: AxisVerdict, dec: AxisVerdict, both: list[str]
) -> tuple[dict[str, list[float]], set[str]]:
    """({image: [its score / the best score] on prefill, then decode}, images last on an axis)."""
    rel: dict[str, list[float]] = {i: [] for i in both}
    last: set[str] = set()
    for av in (pre, dec):
        scores = [(i, s) for i, s, _ in av.ranking if i in rel]  # best first
        for i, s in scores:
            rel[i].append(s / scores[0][1])
        # last only when behind the next image by more than the axis's noise (a tie at the bottom is no last)
        if len(scores) > 1 and scores[-2][1] / scores[-1][1] - 1 > (av.noise or 0.0):
            last.add(scores[-1][0])
    return rel, last


def _mixed_route(axes: dict[str, AxisVerdict]) -> Route:
    pre, dec = axes["prefill"], axes["decode"]
    both = sorted({i for i, _, _ in pre.ranking} & {i for i, _, _ in dec.ranking})
    if len(both) < 2:
        return Route(WORKLOADS["mixed"], None, "not decided: needs two images measured on both axes")
    if pre.winner and pre.winner == dec.winner:
        rivals = [e for i in both if i != pre.winner for e in _flagged_on_both(axes, i)]
        return Route(
            WORKLOADS["mixed"],
            pre.winner,
            "wins both axes: use it for everything"
            + (f"; {flags_note(rivals, pre.winner)}" if rivals else ""),
        )
    unclear = [av.axis for av in (pre, dec) if not av.clear]
    rel, last = _shares_of_best(pre, dec, both)
    gm = {i: math.sqrt(v[0] * v[1]) for i, v in rel.items()}
    never_last = [i for i in both if i not in last]
    ranked = sorted(never_last or both, key=lambda i: -gm[i])
    pick = ranked[0]
    shares = f"{100 * rel[pick][0]:.0f}% of the best prefill, {100 * rel[pick][1]:.0f}% of the best decode"
    ev = [
        f"{i}: prefill {100 * rel[i][0]:.0f}% of the best, decode {100 * rel[i][1]:.0f}% of the best, "
        f"geometric mean {100 * gm[i]:.0f}%{', last on an axis' if i in last else ''}"
        for i in sorted(both, key=lambda i: (-gm[i], i))
    ]
    noise = max(av.noise or 0.0 for av in (pre, dec))
    if len(ranked) > 1 and gm[ranked[0]] / gm[ranked[1]] - 1 <= noise:  # a tie is said, never broken by name
        tied = [i for i in ranked if gm[ranked[0]] / gm[i] - 1 <= noise]
        return Route(
            WORKLOADS["mixed"],
            None,
            f"no clear pick: {' and '.join(sorted(tied))} are within noise of each other on the geometric "
            f"mean of their shares of the best prefill and decode ({_pct(gm[ranked[0]] / gm[ranked[1]] - 1, noise, ' < ')}%); "
            "either will do",
            ev,
        )
    if len(never_last) == 1:
        why = f"the only image never last on either axis ({shares})"
    elif never_last:
        why = f"never last on either axis and, among those, the best geometric mean ({100 * gm[pick]:.0f}%: {shares})"
    else:
        why = (
            f"the best geometric mean of its share of the best on both axes ({100 * gm[pick]:.0f}%: {shares})"
        )
    if unclear:
        why += f"; the {' and '.join(unclear)} ranking is within noise"
    mine = _flagged_on_both(axes, pick)
    rivals = [e for i in both if i != pick for e in _flagged_on_both(axes, i)]
    if mine:  # the pick rests on a flagged number: not decided (module docstring)
        return Route(
            WORKLOADS["mixed"], None, f"{flags_note(mine + rivals, pick)}; measured: {pick}, {why}", ev
        )
    if rivals:
        why += f"; {flags_note(rivals, pick)}"
    return Route(WORKLOADS["mixed"], pick, why, ev)


def decimals_apart(value: float, limit: float, decimals: int, most: int = 16) -> int:
    """The fewest decimals, at least `decimals` (at most `most`: 16 tell apart any two doubles near 1 or
    100 that differ; 6 printed a speedup 1e-9 under 0.95 as `0.950000 < 0.950000`), with which `value`
    and the `limit` it was judged against print differently (`f"{x:.Nf}"`): a figure shown beside its threshold then reads
    on the side it lies on (rounding is monotone, so two texts that differ are in the values' order),
    never `+3.0% < 3.0%` nor a speedup of `1.05` called faster than 1.05 beside one that is not.
    `decimals` where they are equal, or not finite numbers. The one rule of every figure shown beside
    its threshold: the verdict's margins (_pct_pair), the tables' roofline shares (table_text.roof_pct),
    compare's speedups and noise (compare_text), reproduce's deltas (repro_output)."""
    if not (math.isfinite(value) and math.isfinite(limit)) or value == limit:
        return decimals
    for n in range(decimals, most + 1):
        if f"{value:.{n}f}" != f"{limit:.{n}f}":
            return n
    return most


def _pct_pair(margin: float, noise: float) -> tuple[str, str]:
    """A margin (`+3.0`) and the noise threshold it was judged against (`3.0`), in percent, with the
    decimals that keep them apart (decimals_apart): a margin of 2.96 % within a 3 % threshold
    reads `+2.96` beside `3.00`, never `+3.0% < 3.0%`, nor a win of 3.04 % `+3.0%` over `3.0%`."""
    n = decimals_apart(100 * abs(margin), 100 * noise, 1)
    return f"{100 * margin:+.{n}f}", f"{100 * noise:.{n}f}"


def _pct(margin: float, noise: float, between: str) -> str:
    """_pct_pair as one text: `+2.96% < 3.00` (the caller adds the last `%`)."""
    m, n = _pct_pair(margin, noise)
    return f"{m}%{between}{n}"


def _axis_outcome(av: AxisVerdict, b: Callable[[Any], str], esc: Callable[[str], str]) -> list[str]:
    """An axis's verdict line (held, won, or within noise) and what its flagged deciding cells say,
    through `esc` (format_verdict's), the winner's name through `b` (escaped and bold)."""
    assert av.margin is not None and av.noise is not None  # _axis_verdict sets both with a ranking
    head = f"- {av.axis}: "
    basis = ", ".join(g.name for g in av.groups)
    flagged = av.flagged_cells()
    m, noise = _pct_pair(av.margin, av.noise)
    if av.held:
        mine = [x for e in flagged if e.image == av.leader for x in e.flags]
        return [
            esc(x)
            for x in (
                head + f"not decided ({held_words(mine, 'flags')}): {av.leader} leads {av.runner_up} by "
                f"{m}% on the geometric mean of {basis} (noise threshold {noise}%), but is not crowned",
                f"  - {flags_note(flagged, av.leader)}",
            )
        ]
    if av.clear:
        return [
            esc(head)
            + b(av.winner)
            + esc(
                f" wins, {m}% over {av.runner_up} on the geometric mean of {basis} (noise threshold {noise}%)"
                + on_hosts(av.hosts.get(av.winner or "", []))
            ),
            *([esc(f"  - {flags_note(flagged, av.leader)}")] if flagged else []),
        ]
    return [
        esc(
            head + f"no clear winner: {av.ranking[0][0]} {m}% over "
            f"{av.ranking[1][0]} is within noise (threshold {noise}%) on {basis}"
        ),
        *([esc(f"  - {_flags_on(flagged)}")] if flagged else []),
    ]


def _axis_notes(av: AxisVerdict) -> list[str]:
    """An axis's notes: results left out (model unknown), numbers of unknown noise, a winner that
    changes with the test; then its evidence rows."""
    lines = []
    if av.model_unknown:
        lines.append(f"  - {MODEL_UNKNOWN_NOTE}: {', '.join(av.model_unknown)}")
    if av.noise_unknown:
        lines.append(
            f"  - noise unknown for {', '.join(av.noise_unknown)}: some numbers have no known spread (a single "
            f"sample, or a stddev of 0 without samples), so the margin is judged against the {100 * (av.noise or 0):.1f}% threshold "
            "without their spread; repeat the runs (llama-bench -r 3 or more) to know it"
        )
    if av.files:
        lines.append(
            (
                "  - the images measured different model files of one model (their margin includes the files'): "
                if av.files_differ
                else "  - the images' model files are not known to be one file (a sha256 not recorded: if they "
                "differ, their margin includes the files'): "
            )
            + "; ".join(f"{img}: {', '.join(f)}" for img, f in av.files.items())
        )
    if av.by_interval:
        lines.append(
            f"  - the {100 * (av.noise or 0):.1f}% threshold is where the 95% confidence intervals of "
            f"{av.ranking[0][0]} and {av.ranking[1][0]} (over their process means, 3 or more processes "
            "per cell) stop overlapping, not their stddev"
        )
    winners: list[tuple[str, str]] = []  # (image, first group it wins)
    for g in av.groups:
        if not winners or winners[-1][0] != g.entries[0].image:
            winners.append((g.entries[0].image, g.name))
    if len(winners) > 1:
        lines.append(
            "  - the fastest image changes with the test: "
            + ", ".join(f"{img} from {name}" for img, name in winners)
        )
    return lines + [f"  - {g.text()}" for g in av.groups]


def md_caveats(caveats: list[str]) -> list[str]:
    """Markdown lines of `caveats` (texts holding record names: escaped), each a `> **caveat**:` quote
    of its own, a blank line after each: consecutive `>` lines are one paragraph, which a renderer
    joins into one line."""
    return [x for c in caveats for x in (f"> **caveat**: {md_text(c)}", "")]


def format_verdict(v: Verdict, *, markdown: bool = True) -> str:
    """The verdict as text: one paragraph per axis with its evidence rows, then the routing rule;
    `markdown`: as markdown, where a line's record names (image labels, model files, host keys) are
    escaped (core.text.md_line) so an imported name cannot add a tag, link or image to the page, nor
    style it (a `--label x**y`); the toolkit's own bold is added after, around an escaped name."""
    esc = md_line if markdown else (lambda s: s)  # its lines quote record names (model files, hosts)
    b = (lambda s: f"**{md_line(s)}**") if markdown else esc
    lines = [("## " if markdown else "") + "Verdict", ""]
    if markdown:
        lines += md_caveats(v.caveats)
    else:
        lines += [f"caveat: {c}" for c in v.caveats] + ([""] if v.caveats else [])
    for axis, av in v.axes.items():
        if not av.ranking and axis == "served" and av.note == "no results":
            continue
        if not av.ranking:
            lines.append(esc(Prose(f"- {axis}: not decided ({av.note})", av.note)))
            continue
        lines += _axis_outcome(av, b, esc) + [esc(x) for x in _axis_notes(av)]
    lines += ["", ("### " if markdown else "") + "Routing rule", ""]
    for rt in v.routes:
        target = b(rt.image) if rt.image else "no single image"
        lines.append(esc(f"- {rt.workload} -> ") + target + esc(Prose(f": {rt.why}", rt.why)))
        lines += [esc(f"  - {e}") for e in rt.evidence]
    return "\n".join(lines)


def verdict_json(v: Verdict) -> dict[str, Any]:
    def axis(av: AxisVerdict) -> dict[str, Any]:
        return {
            "winner": av.winner,
            "leader": av.leader,
            "runner_up": av.runner_up,
            "margin": av.margin,
            "noise_threshold": av.noise,
            "noise_basis": "ci95" if av.by_interval else "stddev",
            "clear": av.clear,
            "decided": av.decided,
            "held_by_flags": av.held,
            "flagged": {
                img: [{"setting": e.setting, "flags": list(e.flags)} for e in es]
                for img, es in av.flagged.items()
            },
            "note": av.note,
            "noise_unknown": av.noise_unknown,
            "model_unknown": av.model_unknown,
            **({"hosts": av.hosts} if av.hosts else {}),  # campaign host keys per image column, when any
            **({"model_files": av.files, "model_files_differ": av.files_differ} if av.files else {}),
            "ranking": [{"image": i, "score": s, "rms_rel_stddev": r} for i, s, r in av.ranking],
            "evidence": [
                {
                    "group": g.name,
                    "entries": [
                        {
                            "image": e.image,
                            "avg_ts": e.value,
                            "stddev_ts": e.stddev,
                            "ci_low": e.ci.low if e.ci else None,  # None: unknown (fewer than 3 processes)
                            "ci_high": e.ci.high if e.ci else None,
                            "setting": e.setting,
                            "flags": list(e.flags),
                        }
                        for e in g.entries
                    ],
                }
                for g in av.groups
            ],
        }

    return {
        "axes": {a: axis(av) for a, av in v.axes.items()},
        "routes": [
            {"workload": r.workload, "image": r.image, "why": r.why, "evidence": r.evidence} for r in v.routes
        ],
        "caveats": v.caveats,
    }
