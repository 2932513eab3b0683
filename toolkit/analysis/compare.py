"""Two sets of results --compare--> per-test speedup (B ÷ A) and the regressions beyond a threshold.

Like llama.cpp's scripts/compare-llama-bench.py: rows are joined on the one test identity
(toolkit.results.identity: every test field both sides recorded, and the model), only properties that differ
are shown, speedup = compare ÷ baseline. Two sides with nothing in common are an error. Where both
sides of a row hold a valid energy (tables.energy), tokens per joule of each and their ratio B ÷ A
are shown beside the speedup (a ratio above 1: B does more work per joule).

A regression is a test slower in B by more than the threshold AND by more than its noise: A/B - 1
beyond twice the combined relative stddev of the two sides, sqrt(rsd_A² + rsd_B²) (the verdict's rule,
toolkit.analysis.verdict, a margin of the faster side over the slower, so a noisy side never hides a
74x slowdown; a single sample's unknown stddev counts as 0 and is named). Where both sides' cells carry a 95 %
confidence interval (>= 3 process repeats, facts.Interval) the noise is the intervals instead: a
regression needs B's interval wholly below A's (tables.margin_band). A slowdown within noise is shown
as such, not counted; so is a speedup within noise (B/A - 1 no larger than margin_band of B over A, the
verdict's rule for a win): "faster within noise", never plain "faster". A change beyond the threshold, slower or faster, whose cell on either side
carries a held flag (Facts.held_flags: a telemetry flag, gpu-shared, throttled:<reason>, clock-idle,
power-not-stock, host-busy; or an above-peak flag, bw-above-peak, compute-above-peak: beyond what the
GPU can do) is "held": shown with the flags and counted neither as faster nor as a regression, and
never called noise (its spread came from what the flag names); re-measure on a quiet host, or check the
model size and the GPU. Every flagged row names its flags in the human table too.

A side is named by (first match wins) a run id, an image name (its latest build's digest, or for
imported results the newest digest filed under that name), or an image digest / prefix
(`sha256:ab12…`, `ab12…`, `import:…`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.analysis.facts import Facts
from toolkit.analysis.tables import (
    Row,
    Table,
    column_attention,
    concurrency,
    fold_decode_ub,
    id_value,
    image_label,
    interval_rels,
    is_cpu_fallback,
    margin_band,
    row_label,
    select_latest,
    slowdown_noise,
    value,
    varying_columns,
)
from toolkit.core import invocation
from toolkit.core.errors import BadInput
from toolkit.core.text import one_line, path_text, shell_word
from toolkit.results import identity
from toolkit.results import index as resultindex
from toolkit.results.index import digest_matches
from toolkit.results.records import BenchRecord, ResultStore, imported, short_digest


@dataclass
class Side:
    ref: str
    label: str  # how it is shown: image label, or `run <id>`
    records: list[BenchRecord]

    @property
    def closed(self) -> bool:
        """No measuring adds a test to this side: it is named by a run id (its start) or a group's
        (every record's run begins the ref: bench never adds to a run that ended), or it is tune trials
        or imported (side_kind: measured by a search, or elsewhere). An image name or digest is open:
        `toolkit bench` of it adds tests."""
        by_run = len(self.ref) >= resultindex.RUN_PREFIX_MIN and all(
            r.run_id.startswith(self.ref) for r in self.records
        )
        return by_run or side_kind(self.records) != "bench"


@dataclass
class CompareRow:
    """One test both sides measured: its label, identifying values and each side's record's Facts."""

    test: str
    ids: dict[str, str]
    fa: Facts
    fb: Facts
    folded: dict[str, list[Facts]] = field(default_factory=dict)
    """Side "A"/"B" -> the Facts of every record its cell stands for, where decode rows of several
    micro-batches were folded into this one (fold_decode, tables.Row.folded; absent: not folded)."""

    @property
    def speedup(self) -> float:
        va, vb = self.fa.value, self.fb.value
        assert va is not None and vb is not None  # compare() pairs usable records only (_usable)
        return vb / va

    @property
    def by_interval(self) -> bool:
        """Both sides carry a 95 % interval above 0 (tables.interval_rels): the noise is their intervals."""
        return interval_rels(self.fa, self.fb) is not None

    @property
    def noise(self) -> float:
        """The slowdown 1 - B/A its noise can explain (a fraction, below 1): the margin A/B - 1 that
        margin_band asks of A over B (the intervals apart where both sides carry one, else twice the combined
        relative stddev; unknown stddev counts 0), said as a slowdown (gain_noise: the same rule said as a
        gain), so it never passes 100 %. 1 where the band is infinite (a stddev that overflows), not inf / inf
        = NaN."""
        return slowdown_noise(margin_band(self.fa, self.fb))

    @property
    def gain_noise(self) -> float:
        """The gain B/A - 1 its noise can explain (a fraction): margin_band of B over A, the margin the
        verdict asks of a win (the 95 % intervals apart where both sides carry one, else twice the
        combined relative stddev; unknown stddev counts 0)."""
        return margin_band(self.fb, self.fa)

    @property
    def noise_unknown(self) -> bool:
        """A side is a single sample (or has no stddev): its noise is unknown."""
        return self.fa.stddev is None or self.fb.stddev is None

    @property
    def flags(self) -> list[str]:
        """The held flags of either side's cell (Facts.held_flags: telemetry and above-peak), as
        `A:host-busy`, `B:gpu-shared`, `B:bw-above-peak`."""
        return [f"A:{f}" for f in self.fa.held_flags] + [f"B:{f}" for f in self.fb.held_flags]

    @property
    def energy_ratio(self) -> float | None:
        """tok/J of B ÷ tok/J of A (= J per token of A ÷ of B) where both sides' energy is valid."""
        ea, eb = self.fa.energy, self.fb.energy
        return eb.tok_per_j / ea.tok_per_j if ea and eb else None


@dataclass
class Comparison:
    a: Side
    b: Side
    threshold: float  # percent
    rows: list[CompareRow] = field(default_factory=list)
    id_columns: list[str] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    a_settings: str = ""  # identifying values that differ between the sides, e.g. "n_threads=2"
    b_settings: str = ""
    ignored: list[str] = field(default_factory=list)  # test fields only one side recorded
    ignored_by_option: list[str] = field(default_factory=list)  # of `ignored`, those given to --ignore
    lacking: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # the others: those A lacks, those B lacks
    unknown_model: int = 0  # tests left unjoined: their model is unknown (identity.model_known)
    decode_folded: bool = False  # tg rows measured at several ub folded into one (fold_decode)

    @property
    def missing(self) -> bool:
        """Tests measured on one side only: a comparison that does not cover what both sides hold."""
        return bool(self.only_a or self.only_b)

    def missing_text(self) -> str:
        """`N tests only in A: ...; M only in B: ...` (every one named)."""
        parts = []
        if self.only_a:
            parts.append(f"{len(self.only_a)} test(s) only in A ({self.a.label}): {', '.join(self.only_a)}")
        if self.only_b:
            parts.append(f"{len(self.only_b)} test(s) only in B ({self.b.label}): {', '.join(self.only_b)}")
        return "; ".join(parts)

    def missing_fix(self) -> str:
        """How to mend tests measured on one side only (missing): measuring them on both sides where
        each side lacking some can still measure them, else --allow-missing first, naming the side that
        cannot (Side.closed: a run, a tune session's trials, an import hold what they measured)."""
        lacking = (("A", self.a, self.only_b), ("B", self.b, self.only_a))
        closed = [f"{n} ({s.label})" for n, s, lacks in lacking if lacks and s.closed]
        if not closed:
            return "measure them on both sides, or accept a partial comparison with --allow-missing"
        return (
            f"{' and '.join(closed)} cannot measure more: accept a partial comparison with --allow-missing, "
            "or compare a side that measured those tests too"
        )

    def slower(self, row: CompareRow) -> bool:
        """B slower than A by more than the threshold (noise and flags aside)."""
        return row.speedup < 1 - self.threshold / 100

    def within_noise(self, row: CompareRow) -> bool:
        """A slowdown beyond the threshold that the two sides' noise can explain (see the module). Never
        on a flagged cell: its spread came from what the flag names (contention, throttling), not noise."""
        return self.slower(row) and 1 - row.speedup <= row.noise and not row.flags

    def faster(self, row: CompareRow) -> bool:
        """B faster than A by more than the threshold (flags aside)."""
        return row.speedup > 1 + self.threshold / 100

    def faster_within_noise(self, row: CompareRow) -> bool:
        """A gain beyond the threshold that the two sides' noise can explain (row.gain_noise): shown
        as such, not as "faster". Never on a flagged cell (that is held)."""
        return self.faster(row) and row.speedup - 1 <= row.gain_noise and not row.flags

    def held(self, row: CompareRow) -> bool:
        """A change beyond the threshold, either way, on a cell with a held flag (telemetry or
        above-peak): counted neither as faster nor as a regression, not noise."""
        return (self.slower(row) or self.faster(row)) and bool(row.flags)

    def is_regression(self, row: CompareRow) -> bool:
        """Slower beyond the threshold and the noise, on cells without a held flag."""
        return self.slower(row) and not self.within_noise(row) and not row.flags

    @property
    def regressions(self) -> list[CompareRow]:
        return [r for r in self.rows if self.is_regression(r)]

    @property
    def with_energy(self) -> list[CompareRow]:
        """Rows where both sides hold a valid energy (tok/J compared)."""
        return [r for r in self.rows if r.energy_ratio is not None]


def _pick(q: resultindex.RefQuery, store: ResultStore, ref: str) -> tuple[str, resultindex.Scope] | list[str]:
    """The side `ref` names (the module docstring's order), asked of the index in SQL (resultindex.sides),
    without a Head per record: its label and its ok records' scope (run id, else image name and its
    latest build's digest, or the digest written last, else digest), or the digests it matches when it
    names no one side (none, or several: _unresolved says which)."""
    if q.has_run(ref):
        return f"run {ref}", {"runs": [ref]}
    named = q.digests(ref)
    if named:
        build = store.latest_build(ref)
        digest = build.digest if build and build.digest in named else q.newest_digest(ref)
        scope = {"images": [ref], "digests": [digest]}
        return image_label(q.first(scope)), scope
    name = ref.rpartition("@")[0] if "@" in ref else None  # an image label: `cpu@abd88fb000be`
    digests = sorted(d for d in q.digests(name) if digest_matches(d, ref, name))
    if len(digests) == 1:
        labelled: resultindex.Scope = {"digests": digests, **({"images": [name]} if name else {})}
        return image_label(q.first(labelled)), labelled
    runs = [] if digests else q.run_begun(ref)  # a run id by its start, a group's id (after a digest's)
    label = (
        f"run {runs[0]}" if len(runs) == 1 else resultindex.group_words(ref, runs, label=True) if runs else ""
    )
    return (label, {"runs": runs}) if runs else digests


def _unresolved(store: ResultStore, ref: str, digests: list[str], results: str | None = None) -> BadInput:
    """The error of a ref that names no side: the digests it matches (several), or none. `results`:
    --results as typed, for the commands it suggests (None: not given)."""
    if len(digests) > 1:
        return BadInput(
            f"{ref!r} matches {len(digests)} image digests ({', '.join(d[:19] for d in digests)}); "
            "give more digits"
        )
    everything = resultindex.heads(
        store, ok_only=True
    )  # the error path only: every name, not just the matched
    near = sorted(
        {r.image.name for r in everything if r.image.name.startswith(ref + ".")}
    )  # an import per build
    hint = f"; did you mean {' or '.join(near)} (an import filed per build)?" if near else ""
    hint += resultindex.short_run_start(ref, (h.run_id for h in resultindex.runs_newest_first(everything)))
    hint += _unmeasured_hint(store, ref, {h.image.name for h in everything}, results)
    return BadInput(
        f"no results match {ref!r}: give a run id, an image name or an image digest (prefix){hint}; "
        f"{stored_runs(store, everything)} (compare reads A from --results and B "
        "from --against DIR, else from --results too; other files are imported first, `toolkit import`)"
    )


def _unmeasured_hint(store: ResultStore, ref: str, measured: set[str], results: str | None = None) -> str:
    """Where `ref` reads as an image name (not hex digits, not a run id's start): that image has no ok result
    here, and how to measure it (`toolkit bench -i`, after `toolkit build -i` where no build of it is
    recorded), first the names a typo of it would be, measured or of the matrix (`cpuu`: did you mean 'cpu'?,
    and then no build or bench of `cpuu` is offered; not a name holding it); a command only for an image of
    the matrix; '' otherwise. The commands carry `--results` where it was given (`results`, as typed; B's
    --against folder for B), with the engine and matrix given (invocation.command)."""
    if not re.fullmatch(r"[A-Za-z][\w.-]*", ref) or re.fullmatch(r"[0-9a-fA-F]+", ref):
        return ""
    import difflib  # the error path only

    images, matrix = _matrix_images(), invocation.matrix_file()
    have = (
        f"images with results here: {', '.join(sorted(measured))}"
        if measured
        else "no image has results here"
    )
    if ref not in images:  # a typo, or no image at all: bench and build refuse a name the matrix lacks
        typo = difflib.get_close_matches(ref, sorted(measured | images), n=2, cutoff=0.6)
        guess = (
            f"did you mean {' or '.join(map(repr, typo))}? " if typo else f"{ref} is no image of {matrix}; "
        )
        return f"; {guess}{have}"
    at = Path(results) if results else None
    bench, build = (invocation.command(name, "-i", ref, results=at) for name in ("bench", "build"))
    if (built := store.latest_build(ref)) is not None:
        return f"; image {ref} is built ({built.digest[:19]}) but not measured: `{bench}` ({have})"
    return f"; {have} (image {ref} of {matrix} is not measured yet: `{build} && {bench}`)"


def _matrix_images() -> set[str]:
    """The image names of the matrix this invocation works on (invocation.matrix_file), read as YAML
    alone (a project copy without its templates still names them); none where no matrix reads
    (absent: compare outside a project)."""
    from toolkit.matrix.api import read_yaml

    try:
        data = read_yaml(invocation.matrix_file())
    except BadInput:
        return set()
    images = data.get("images") if isinstance(data, dict) else None
    return {str(i["name"]) for i in images or () if isinstance(i, dict) and "name" in i}


def stored_runs(store: ResultStore, heads: list[resultindex.Head] | None = None, n: int = 5) -> str:
    """`stored runs under DIR: RUN (IMAGE, DATE), ...`: the newest `n` runs with an ok record among
    `heads` (the index's; all of `store`'s ok ones when None), newest written first
    (index.runs_newest_first), and how many more; or `no ok result is stored under DIR`."""
    heads = resultindex.heads(store, ok_only=True) if heads is None else heads
    newest = resultindex.runs_newest_first(heads)  # by the order written: the last record says when it ended
    if not newest:
        return f"no ok result is stored under {store.root}"
    shown = ", ".join(f"{h.run_id} ({h.image.name}, {h.created[:16].replace('T', ' ')})" for h in newest[:n])
    more = f", and {len(newest) - n} older" if len(newest) > n else ""
    return f"stored runs under {path_text(store.root)}, newest first: {shown}{more}"


def _same_records(a: Side, b: Side) -> bool:
    """A and B hold the very same measurements (one ref twice, a run and its image, a copied folder)."""

    def marks(s: Side) -> set[tuple[Any, ...]]:
        return {(r.run_id, r.created, r.seq, r.image.digest, r.test, r.avg_ts) for r in s.records}

    return bool(a.records) and marks(a) == marks(b)


def _same_records_error(
    store: ResultStore,
    a: Side,
    b: Side,
    b_store: ResultStore | None,
    results: str | None = None,
) -> BadInput:
    """A and B hold one run's records: one ref twice (`compare cpu cpu`: two builds were meant, their digests
    said), or B from --against DIR a copy of A's (its export?): the runs A can be instead. The commands it
    suggests read the folder as typed (`results`: --results, None where it was not given), with the
    engine and matrix given (invocation.command)."""
    runs = ", ".join(dict.fromkeys(r.run_id for r in a.records))
    cmd = invocation.command("compare", results=Path(results) if results else None)
    fix = f"name two runs, e.g. `{cmd} RUN_A RUN_B`"
    if b_store is not None and b_store.root.resolve() != store.root.resolve():
        fix = f"B, read from --against {b_store.root}, is a copy of that run (its export?): name another run as A"
    elif a.ref == b.ref and a.records[0].image.name == a.ref:
        every = resultindex.heads(store, ok_only=True)
        mine = [h for h in resultindex.runs_newest_first(every) if h.image.name == a.ref]  # newest first
        builds = list(dict.fromkeys(_digest_ref(h.image.digest, every) for h in mine))
        ids = [h.run_id for h in mine]
        two = [f"`{cmd} {' '.join(map(shell_word, x[1::-1]))}`" if x[1:] else "" for x in (builds, ids)]
        fix = (
            f"both name image {a.ref}, which means its newest build; to compare two builds of it, give their "
            f"digests (a prefix), {two[0] or 'once a second has results'} (its builds with results here, newest "
            f"first: {', '.join(builds)}); two runs of it, their ids: {two[1] or f'`{cmd} RUN_A RUN_B`'}"
        )
    return BadInput(f"A and B are the same records (run {runs}): {fix}; {stored_runs(store)}")


def _digest_ref(digest: str, heads: list[resultindex.Head]) -> str:
    """What `compare` reads as `digest` among `heads` (a store's ok records), shortest first: its first 12
    hex digits (short_digest), else the digest whole where those name a run, an image (a run id and an
    image name win over a digest, _pick) or more than this digest (`import:v1` -> `v1`, under 4)."""
    short = short_digest(digest)
    named = any(short in (h.run_id, h.image.name) for h in heads)
    if not named and {h.image.digest for h in heads if digest_matches(h.image.digest, short)} == {digest}:
        return short
    return digest


def _test_label(r: BenchRecord) -> str:
    return row_label(r, ub=True)


def settings_of(settings: dict[str, list[str]]) -> list[str]:
    """The field names of the per-side settings (`n_threads=2` -> `n_threads`)."""
    return sorted({x.split("=", 1)[0] for xs in settings.values() for x in xs})


def _missing_label(r: BenchRecord, fields: list[str], test: str | None = None) -> str:
    """A test one side lacks, named so it can be told from its neighbours: `pp512 ub512 (n_cpu_moe=12)`
    (`test`: the label to use instead of the record's, a decode row folded over the micro-batch)."""
    ids = [f"{c}={id_value(r, c)}" for c in fields if id_value(r, c) is not None]
    return (test or _test_label(r)) + (f" ({', '.join(ids)})" if ids else "")


DECODE_UB_NOTE = (
    "decode rows: the micro-batch (ub) does not apply to tg, so a tg test measured at several ub whose tok/s "
    "agree within the noise band on each side is one row (the report's rule), each side's cell its measurement "
    "at a ub both sides measured, ub512 first (llama-bench's default; else the one with the most samples), else "
    "each side's own (tg128 at ub512 against tg128 at ub128); where they differ beyond it each ub keeps its row"
)


@dataclass
class _Folded:
    """A join's rows as compared (fold_decode): the rows both sides hold (ids left to the caller), per side
    the one-side tests left, as (record, label to show: None for the record's own), and whether a decode
    row was folded over the micro-batch."""

    rows: list[CompareRow]
    only_a: list[tuple[BenchRecord, str | None]]
    only_b: list[tuple[BenchRecord, str | None]]
    folded: bool


def fold_decode(j: identity.Join, judged: str | None = None) -> _Folded:
    """The tests of join `j` as compared rows, the decode tests (tg) folded over the micro-batch by the
    report's own rule (tables.fold_decode_ub over a table of two columns, A and B, holding the pairs and
    the one-side records), on what the join compares (the model, the file's sha256 where every record knows
    it, every test field both sides recorded but n_ubatch): tg tests that differ only by ub and whose tok/s
    agree within noise on each side are one row, each side's cell its record at a ub both sides measured,
    ub512 first (else the one with most samples); a one-side record folded into a row both sides hold is no
    longer missing, also where no ub is on both sides (`judged` "A": agreeing on A decides, as
    fold_decode_ub's)."""
    records = [r for p in j.pairs for r in p] + j.only_a + j.only_b
    sha, skip = all(map(identity.known_sha, records)), {*j.ignored, "n_ubatch"}

    def alike(f: Facts) -> tuple:
        return (f.key.model, sha and f.key.model_sha, tuple(kv for kv in f.key.test if kv[0] not in skip))

    def row(cells: dict[str, BenchRecord]) -> Row:
        facts = {k: Facts.of(v) for k, v in cells.items()}
        return Row(
            _test_label(cells.get("A") or cells["B"]), {}, (), dict(cells), {k: [] for k in cells}, facts
        )

    decode = [row({"A": x, "B": y}) for x, y in j.pairs if x.axis == "decode"]
    decode += [row({"A": r}) for r in j.only_a if r.axis == "decode"]
    decode += [row({"B": r}) for r in j.only_b if r.axis == "decode"]
    folded, did = fold_decode_ub(Table("decode", "", ["A", "B"], [], decode), judged, alike)
    kept = {id(r) for r in decode}
    out = _Folded(
        [CompareRow(_test_label(x), {}, Facts.of(x), Facts.of(y)) for x, y in j.pairs if x.axis != "decode"],
        [(r, None) for r in j.only_a if r.axis != "decode"],
        [(r, None) for r in j.only_b if r.axis != "decode"],
        did,
    )
    for r in folded.rows:
        if "A" in r.facts and "B" in r.facts:
            out.rows.append(CompareRow(r.test, r.ids, r.facts["A"], r.facts["B"], r.folded))
        else:
            side, rec = next(iter(r.cells.items()))
            (out.only_a if side == "A" else out.only_b).append((rec, None if id(r) in kept else r.test))
    return out


def _usable(side: Side) -> list[BenchRecord]:
    """The newest record per test of `side` that compare judges: a value, no CPU fallback, and no
    `toolkit tune` trial (identity.is_tune_trial: a search run, never a bench run's stand-in, here
    where a slowdown is a regression, exit 6) unless the side holds trials only (a tune run named)."""
    bench = [r for r in side.records if not identity.is_tune_trial(r)]
    return [r for r in select_latest(bench or side.records) if value(r) and not is_cpu_fallback(r)]


UNKNOWN_MODEL_FIX = (
    "a result whose model is unknown (imported rows that name no model, no model_filename or model_type, "
    "as a vLLM bench JSON names none; its import says model=unknown) "
    "is not known to be of the same model as another: pass --same-model if both sides measured one "
    "model, or import with the model named"
)


def _resolve_sides(
    store: ResultStore, a_ref: str, b_ref: str, b_store: ResultStore | None = None, results: str | None = None
) -> tuple[Side, Side]:
    """Both sides found and chosen in SQL (_pick, resultindex.sides: only the records a side needs are read),
    then read as records (the index rebuilt once if stale); B from `b_store` when given (a second results
    folder), else from `store`. BadInput when a ref names no side (A's error first; the commands it suggests
    name `store` as --results `results`, as typed), or is empty (every digest starts with '')."""
    for name, ref in (("A", a_ref), ("B", b_ref)):
        if not ref:
            raise BadInput(
                f"compare: {name} is empty: give a run id, an image name or an image digest (prefix); "
                f"{stored_runs(store if name == 'A' or b_store is None else b_store)}"
            )
    sb = b_store or store
    for attempt in (1, 2):
        try:
            if sb is store:
                got = resultindex.sides(store, lambda q: [_pick(q, store, a_ref), _pick(q, store, b_ref)])
            else:
                got = resultindex.sides(store, lambda q: [_pick(q, store, a_ref)])
                got += resultindex.sides(sb, lambda q: [_pick(q, sb, b_ref)])
            out = []
            for s, ref, side in ((store, a_ref, got[0]), (sb, b_ref, got[1])):
                if isinstance(side, list):
                    raise _unresolved(s, ref, side, results if s is store else str(s.root))  # B: --against
                out.append(Side(ref, side[0], side[1]))
            return out[0], out[1]
        except resultindex.StaleIndex:
            if attempt == 2:
                raise
            for s in {id(store): store, id(sb): sb}.values():  # an edit the refresh did not see: rebuild once
                resultindex.drop(s)
    raise AssertionError("unreachable")


def _check_ignore(ua: list[BenchRecord], ub: list[BenchRecord], ignore: tuple[str, ...]) -> None:
    """BadInput when --ignore names a field that is not a test field of these results (`ua`, `ub`: each
    side's), or one the test's own name is made of (identity.LABEL_FIELDS: `pp512` and `pp1024` are two
    tests, not one under two settings; joined, B's pp1024 was shown as pp512 and called 2.4x faster)."""
    known = {k for r in ua + ub for k in identity.test_fields(r)}
    named = sorted(set(ignore) & identity.LABEL_FIELDS)
    if named:
        raise BadInput(
            f"--ignore {', '.join(named)}: the test's own name is made of it (pp512 and pp1024, tg128 @ d0 "
            "and @ d4096 are different tests, not one test under two settings), so no join may leave it out; "
            f"compare runs that measured the same tests ({_same_tests(ua, ub)})"
        )
    unknown = sorted(set(ignore) - known)
    if unknown:
        raise BadInput(
            f"--ignore {', '.join(unknown)}: not a test field of these results; fields: "
            f"{', '.join(sorted(known - identity.LABEL_FIELDS))}"
        )


def _nothing_in_common(store: ResultStore, a: Side, b: Side, j: identity.Join) -> BadInput:
    """The error of a join without a pair: the unknown model, or the fields that keep the sides apart
    (two models: with the stored runs to choose from, `store`'s, as a reference that matches nothing)."""
    if j.unknown_model:
        return BadInput(
            f"no test in common between {a.label} and {b.label}: {j.unknown_model} test(s) have no known "
            f"model; {UNKNOWN_MODEL_FIX}"
        )
    ma, mb = ({_value_text(r.model.name) for r in side} for side in (j.only_a, j.only_b))
    model = _models_apart(j) if "model" in j.apart else ""
    if "model" in j.apart and not ma & mb:  # named as the report names them; no --ignore joins two models
        return BadInput(
            f"no test in common between {a.label} and {b.label}: they measured different models (A: "
            f"{', '.join(sorted(ma)[:4])}; B: {', '.join(sorted(mb)[:4])})"
            + (f"; what keeps them apart: {model}" if model else "")
            + f"; compare two runs of one model; {stored_runs(store)}"
        )
    if j.tests_apart:  # before any --ignore: none joins two tests, whatever setting differs besides (nc47 S2)
        ta, tb = (_test_names(side) for side in (j.only_a, j.only_b))
        tg = sorted(
            set.intersection(*({r.test for r in s if r.axis == "decode"} for s in (j.only_a, j.only_b)))
        )
        return BadInput(
            f"no test in common between {a.label} and {b.label}: they measured different tests (A: {ta}; "
            f"B: {tb})"
            + (f"; the models differ too: {model}" if model else "")
            + (
                f"; {', '.join(tg)} on both sides at other micro-batches are one test only where each side's "
                "agree within noise, the model file and every other setting alike (the report's rule): not here"
                if tg
                else ""
            )
            + "; a test's own sizes (pp N, "
            "tg N, the depth, the micro-batch) are what it is, which no --ignore joins: compare runs that "
            f"measured the same tests ({_same_tests(j.only_a, j.only_b)}, or llama-bench with the same -p, -n, "
            "-d and -ub)"
        )
    apart = "; ".join(
        f"the model: {model}"
        if k == "model" and model
        else f"{k}: A has {', '.join(map(_value_text, va[:4]))}, B has {', '.join(map(_value_text, vb[:4]))}"
        for k, (va, vb) in j.apart.items()
    )
    # what --ignore may leave out (_check_ignore): never the model, which is no test field
    settings = sorted(set(j.apart) - identity.LABEL_FIELDS - {"model"})
    if "model" in j.apart:
        fix = (
            "; they measured different models, which no --ignore joins: compare two runs of one model (an "
            "import's model is what its rows say: llama-bench's model_type, model_n_params, model_size)"
        )
    else:  # a test name on both sides (tests_apart said first): a setting keeps them apart
        fix = (
            "; compare results measured with the same settings and model, or leave a field out of the join on purpose with --ignore FIELD"
            + (f" ({', '.join(settings)})" if settings else "")
        )
    return BadInput(
        f"no test in common between {a.label} and {b.label} ({len(j.only_a)} tests only in A, "
        f"{len(j.only_b)} only in B)" + (f"; what keeps them apart: {apart}" if apart else "") + fix
    )


def side_kind(records: list[BenchRecord]) -> str:
    """What a side's records are: `tune trials` (every one a `toolkit tune` trial, identity.is_tune_trial),
    `imported` (every one filed by `toolkit import`: measured elsewhere, by no matrix.yaml of this
    project), else `bench` (`toolkit bench` runs, or a mix)."""
    if records and all(identity.is_tune_trial(r) for r in records):
        return "tune trials"
    return "imported" if records and all(imported(r.image.digest) for r in records) else "bench"


def _same_tests(ua: list[BenchRecord], ub: list[BenchRecord]) -> str:
    """How to measure one side's tests on the other (`ua`, `ub`: their records): `toolkit bench` with the
    other run's matrix.yaml axes; where a side is imported (no matrix.yaml), its tests as bench axes."""
    side = next(((n, rs) for n, rs in (("B", ub), ("A", ua)) if side_kind(rs) == "imported"), None)
    if side is None:
        return "`toolkit bench` with the other run's matrix.yaml axes"
    rs = side[1]
    axes = {
        "n_prompt": {r.n_prompt for r in rs if r.n_prompt},
        "n_gen": {r.n_gen for r in rs if r.n_gen and not r.n_prompt},
        "n_depth": {r.n_depth for r in rs if r.n_depth},
        "n_ubatch": {r.n_ubatch for r in rs if r.n_ubatch and r.n_prompt},
    }
    said = ", ".join(f"{k}: [{', '.join(map(str, sorted(v)))}]" for k, v in axes.items() if v)
    return f"{side[0]} is imported, measured elsewhere: `toolkit bench` here with matrix.yaml's bench axes {said}"


def _test_names(records: list[BenchRecord]) -> str:
    """The tests of one side as the table names them (`pp512 ub512, tg128 @ d4096`), prefill before
    decode, smaller first; at most 8, then how many more."""
    order = sorted(
        records,
        key=lambda r: (r.axis != "prefill", r.n_depth or 0, r.n_prompt or 0, r.n_gen or 0, r.n_ubatch or 0),
    )
    names = list(dict.fromkeys(_test_label(r) for r in order))
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


_MODEL_FIELDS = ("model_type", "model_n_params", "model_size")
"""What identity.model_fingerprint is made of where llama-bench described the model, in its order."""


def _models_apart(j: identity.Join) -> str:
    """How the two sides' models differ, field by field, as the join compares them
    (identity.model_fingerprint: llama-bench's model_type, model_n_params and model_size as its -o md prints
    them, else the model's name; a shape twin's kind): `model_n_params A 0.79 M, B 0.80 M`. '' where no field
    alone tells them apart."""

    def fields(r: BenchRecord) -> dict[str, str]:
        fp = identity.model_fingerprint(r)
        n = 2 if fp[:1] == ("name",) else len(_MODEL_FIELDS)  # (name, NAME) or llama-bench's three
        said = [_value_text(v) for v in fp[:n]]
        out = {"name": said[1]} if n == 2 else dict(zip(_MODEL_FIELDS, said, strict=False))
        out.update(
            (_value_text(x[0]), _value_text(x[1])) for x in fp[n:] if isinstance(x, tuple) and len(x) == 2
        )  # the kind
        return out

    va, vb = ([fields(r) for r in side] for side in (j.only_a, j.only_b))
    apart = []
    for k in dict.fromkeys(k for f in va + vb for k in f):
        xa, xb = (sorted({f.get(k, "not recorded") for f in side}) for side in (va, vb))
        if not set(xa) & set(xb):
            apart.append(f"{k} A {', '.join(xa[:3])}, B {', '.join(xb[:3])}")
    return "; ".join(apart)


def _value_text(v: Any) -> str:
    """A stored field's value as a one-line message says it (a record's text is anyone's: a newline
    made a second `error:` line, 200 kB of it a 200 kB message): controls stripped, line breaks as
    spaces, at most 60 characters (`...` marks the cut); an absent value (None, "") `not recorded`."""
    text = one_line(str(v)).strip() if v is not None else ""
    if not text:
        return "not recorded"
    return text if len(text) <= 60 else text[:57] + "..."


def _pair_order(p: tuple[BenchRecord, BenchRecord]) -> tuple[Any, ...]:
    """Prefill first, then by axis, model, concurrency and the test's sizes (A's record)."""
    r = p[0]
    return (
        r.axis != "prefill",
        r.axis,
        r.model.name,
        concurrency(r) or 0,
        r.n_depth,
        r.n_prompt,
        r.n_gen,
        r.n_ubatch or 0,
        r.n_batch or 0,
    )


def _columns_and_settings(
    pairs: list[tuple[BenchRecord, BenchRecord]], label_fields: frozenset[str]
) -> tuple[list[str], dict[str, list[str]]]:
    """The varying columns shown per row, and those that hold one value per side (a side's settings). The
    model is no side's setting where every pair joined one model (the file's sha256 known on one side
    only; a bench's name beside an import's file name): each side's model line names it."""
    id_cols: list[str] = []
    settings: dict[str, list[str]] = {"a": [], "b": []}
    one_model = all(identity.model_fingerprint(x) == identity.model_fingerprint(y) for x, y in pairs)
    for col in varying_columns([r for p in pairs for r in p], label=label_fields):
        va, vb = ({id_value(r, col) for r in side} for side in zip(*pairs, strict=True))
        if col == "model" and one_model and len(va) == len(vb) == 1:
            continue
        if len(va) == len(vb) == 1:  # a setting of the whole side, e.g. n_threads=1 vs n_threads=2
            settings["a"].append(f"{col}={va.pop()}")
            settings["b"].append(f"{col}={vb.pop()}")
        else:
            id_cols.append(col)
    for side, of_side in (("a", [x for x, _ in pairs]), ("b", [y for _, y in pairs])):
        if att := column_attention(of_side):  # what vLLM / SGLang logged it used (tables.attention_used)
            settings[side].append(f"attention={att}")
    return id_cols, settings


def compare(
    store: ResultStore,
    a_ref: str,
    b_ref: str,
    *,
    threshold: float = 5.0,
    ignore: tuple[str, ...] = (),
    same_model: bool = False,
    b_store: ResultStore | None = None,
    results: str | None = None,
) -> Comparison:
    """Join the newest ok result per test of A and of B (identity.match_tests); speedup = B ÷ A.

    Raises BadInput when A and B are the same records, or when the two sides have no test in common, naming
    the fields whose values keep them apart (a CI gate must not pass on an empty comparison). `ignore`: test
    fields to leave out of the join on purpose (shown as per-side settings). Tests whose model is unknown are
    joined with nothing unless `same_model` (UNKNOWN_MODEL_FIX). `b_store`: read B from this second results
    folder (A from `store`). `results`: --results as typed, for the commands the errors suggest (None: not
    given)."""
    if threshold < 0:
        raise BadInput(f"--threshold {threshold}: must be a percentage >= 0")
    a, b = _resolve_sides(store, a_ref, b_ref, b_store, results)
    if _same_records(a, b):
        raise _same_records_error(store, a, b, b_store, results)
    ua, ub = _usable(a), _usable(b)
    _check_ignore(ua, ub, ignore)
    j = identity.match_tests(ua, ub, ignore=ignore, same_unknown_model=same_model)
    joined = fold_decode(j)  # before anything is refused: tg128 at ub512 joins tg128 at ub128
    if not joined.rows:
        raise _nothing_in_common(store, a, b, j)
    rows = sorted(joined.rows, key=lambda row: _pair_order((row.fa.record, row.fb.record)))
    label_fields = identity.LABEL_FIELDS | (set(j.ignored) - set(ignore))
    id_cols, settings = _columns_and_settings([(row.fa.record, row.fb.record) for row in rows], label_fields)
    for row in rows:
        row.ids = {c: str(id_value(row.fa.record, c)) for c in id_cols}
    tell_apart = [
        c for c in varying_columns(ua + ub, label=label_fields) if c not in (*settings_of(settings), "model")
    ]
    if len({identity.model_fingerprint(r) for r in ua + ub}) > 1:
        tell_apart = ["model", *tell_apart]
    return Comparison(
        a,
        b,
        threshold,
        rows,
        id_cols,
        sorted(_missing_label(r, tell_apart, t) for r, t in joined.only_a),
        sorted(_missing_label(r, tell_apart, t) for r, t in joined.only_b),
        ", ".join(settings["a"]),
        ", ".join(settings["b"]),
        ignored=j.ignored,
        ignored_by_option=sorted(set(ignore)),
        lacking=j.lacking,
        unknown_model=j.unknown_model,
        decode_folded=joined.folded,
    )
