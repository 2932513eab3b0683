"""A stored record's flags that are not telemetry's, held to the record's own fields (telemetry's are
held to its telemetry block: telemetry_flags.checked_flags). Read by identity.shown_flags, so by every
reader of a stored record (report, compare, verdict, reproduce).

Two kinds. A flag the readers raise themselves from the record's own fields (DERIVED_FLAGS: the
analysis' cpu-fallback, ub-clamped, warmup-outlier, the above-peak flags, ...; combine_runs'
runs-disagree) is never taken from the store: no writer of this toolkit stores one, the reader raises
it again where the record shows it, and a stored one is `flag-unsupported:<flag>` (a hand edit, a file
of another tool: it holds nothing). A flag a writer stores (the import's no-samples, the probe's
no-matrix-cores, the canary's wrong-output) is `flag-unsupported:` where the record's own fields
contradict it (WRITTEN_CLAIMS: stale-build among them, held to the image's stale mark and keys); names no
writer knows stay as stored. The `concurrent` field, which the readers raise `concurrent` from, is held
to the runs it names (concurrent_problem)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from toolkit.core import backends
from toolkit.core.gpuspecs import spec_by_name, split_gpu_info
from toolkit.core.stats import finite_number
from toolkit.results.records import BenchRecord, run_id_start
from toolkit.results.sequence import CLOCK_SKEW_BACK_S, written_at
from toolkit.results.telemetry_flags import UNSUPPORTED

DERIVED_FLAGS = frozenset(
    {
        "ub-clamped",  # n_ubatch against n_batch and the test's tokens (facts.ub_clamped)
        "ub-no-effect",  # neighbouring rows of a table (tables._mark_ub_no_effect)
        "cpu-fallback",  # backends and gpu_info (facts.is_cpu_fallback)
        "rpc-split",  # backends (facts.rpc_split)
        "software-gpu",  # gpu_info (is_software_gpu)
        "noisy",  # stddev_ts (else the samples' stddev) over avg_ts against the report's threshold
        "warmup-outlier",  # samples_ts (facts.warmup_outlier)
        "stddev-recomputed",  # the record's `repaired`
        "experimental",  # the record's `experimental`
        "synthetic-twin",  # model.kind
        "concurrent",  # the record's `concurrent` (bench.guard)
        "clock-skew",  # the store's order, when read
        "tune-trial",  # the record's tune session
        "bw-above-peak",  # the roofline of its GPU, model and speed
        "compute-above-peak",
        "bw-below-floor",
        "host-outlier",  # other hosts' cells of a table
        "runs-disagree",  # identity.combine_runs, when read (a stored between_runs: kept)
        "bimodal-runs",
    }
)
"""Flags raised by the readers from a record's own fields and its neighbours, each time it is read
(analysis.facts._flags, analysis.tables, identity.combine_runs): never stored by a writer of this
toolkit, so a stored one says only what the stored record's fields do not."""

_FROM_RUNS = frozenset({"runs-disagree", "bimodal-runs"})


def _canary_status(r: BenchRecord) -> Any:
    c = (r.model_extra or {}).get("canary")
    return c.get("status") if isinstance(c, dict) else None


def _not_rdna4_vulkan(r: BenchRecord) -> bool:
    """The record ran no Vulkan build, or on GPUs the table knows none of which is RDNA4 (gfx12xx)."""
    names = [n.lower() for n in backends.llama_names(r.backends or "")]
    if r.image.backend != "vulkan" and "vulkan" not in names:
        return True
    specs = [spec_by_name(d) for d in split_gpu_info(r.gpu_info or "")]
    return (
        bool(specs)
        and all(s is not None for s in specs)
        and not any(s.gfx_target.startswith("gfx12") for s in specs if s is not None)
    )


def _not_stale(r: BenchRecord) -> bool:
    """The record's image is not marked stale (bench.runners.base.image_ref sets `stale` exactly where
    stale_marks adds the flag), or both render-inputs keys are known and equal: built from the inputs
    matrix.yaml and the templates gave when it was measured (flag_help: inputs_key vs current_inputs_key)."""
    img = r.image
    keys = getattr(img, "inputs_key", None), getattr(img, "current_inputs_key", None)
    return not getattr(img, "stale", False) or (None not in keys and keys[0] == keys[1])


WRITTEN_CLAIMS: dict[str, tuple[Callable[[BenchRecord], bool], str]] = {
    "no-samples": (lambda r: bool(r.samples_ts), "samples_ts holds the repetitions"),
    "no-build-commit": (lambda r: bool(r.build_commit), "build_commit names the build"),
    "no-batch-sizes": (  # the import's md note: not both known (a build-1879 table's n_batch column, no n_ubatch)
        lambda r: r.n_batch is not None and r.n_ubatch is not None,
        "n_batch and n_ubatch are stated",
    ),
    "no-matrix-cores": (_not_rdna4_vulkan, "no Vulkan run on an RDNA4 GPU"),
    "wrong-output": (lambda r: _canary_status(r) != "wrong-output", "its canary is not wrong-output"),
    "stale-build": (
        _not_stale,
        "its image is not marked stale (image.stale, inputs_key = current_inputs_key)",
    ),
}
"""A writer's stored flag: (whether the record's own fields contradict it, what they show instead)."""


def claim_problem(flag: str, r: BenchRecord) -> str | None:
    """Why stored flag `flag` (a name, with any `:reason`) is not one record `r` can carry, None when it
    can (or is telemetry's, stale-build, or a name no reader knows)."""
    name = flag.partition(":")[0]
    if name in DERIVED_FLAGS:
        if name in _FROM_RUNS and isinstance((r.model_extra or {}).get("between_runs"), dict):
            return None  # a stored combined record (held to its figures: runs_check)
        return "raised by the reader from the record's own fields, never stored"
    test = WRITTEN_CLAIMS.get(name)
    if test and test[0](r):
        return test[1]
    return None


def held_claims(flags: Sequence[str], r: BenchRecord) -> list[str]:
    """`flags` (a record's stored flags, telemetry's already held) with each one `r` cannot carry
    (claim_problem) as `flag-unsupported:<flag>`, in order, each once."""
    out: dict[str, None] = {}  # ordered and each once, in linear time (a stored list may hold 80,000)
    for f in flags:
        out.setdefault(f"{UNSUPPORTED}:{f}" if claim_problem(f, r) else f)
    return list(out)


def without_unsupported(flags: list[str], raised: Sequence[str]) -> list[str]:
    """`flags` less each `flag-unsupported:<flag>` whose flag a reader raised itself (`raised`): the
    record's fields show it after all, so the flag stands once, as raised."""
    drop = {f"{UNSUPPORTED}:{x}" for x in raised}
    return [f for f in flags if f not in drop]


SAVED_AS_CREATED = frozenset({"llama-bench"})
"""Runners whose records' `created` is the moment they were saved (bench.runners.llama_bench: utc_now() for
each row and fault record, just before records.Saver.save): the only ones a later start is held against."""


def concurrent_problem(r: BenchRecord) -> str | None:
    """Why record `r`'s `concurrent` field (records.Saver: {"other_runs": [the other live runs]}, set
    as the record is saved) names no run that was alive beside it, None where it can (or it has none).
    Not backed: no list of other runs (an empty or no list: guard sets it only where one is alive); an
    entry that is this record's own run (a run is not concurrent with itself); a run whose id says it
    started more than CLOCK_SKEW_BACK_S (s: two hosts' clocks, sequence.py) after this record's measured
    window ended: its telemetry's `t1`, else its `created` for a runner whose `created` is when the record
    was saved (SAVED_AS_CREATED; a vLLM or SGLang record's is its run's start, up to the whole sweep
    before it was saved, and the saver names every run alive at the save); an imported record (`toolkit import` writes
    none: no run of this toolkit wrote it). Another run's records need not be in this store (it may have
    written another results folder on the same engine), so their absence backs nothing and refutes nothing."""
    c = (r.model_extra or {}).get("concurrent")
    if not c:
        return None
    if (r.model_extra or {}).get("imported") is not None:
        return "an imported record: no run of this toolkit saved it beside another"
    runs = c.get("other_runs") if isinstance(c, dict) else None
    if not isinstance(runs, list) or not runs or not all(isinstance(x, str) and x.strip() for x in runs):
        return "its concurrent field names no other run (other_runs: a list of run ids)"
    # the measured window's end: its telemetry's t1 (any runner), else a llama-bench record's `created`,
    # when it was saved (runners/llama_bench.py: utc_now() as each row arrives); vLLM's and SGLang's records
    # share the `created` of their run's start (their _base), and are saved minutes after the phase they
    # measured: another run may start in between, after the window and before the save
    t1 = finite_number(r.telemetry.get("t1")) if isinstance(r.telemetry, dict) else None
    made = t1 if t1 is not None else written_at(r.created) if r.runner in SAVED_AS_CREATED else None
    for entry in runs:
        if entry.split(" ", 1)[0] == r.run_id:
            return f"other_runs names its own run {r.run_id[:40]}"
        start = run_id_start(entry)
        if made is not None and start is not None and start - made > CLOCK_SKEW_BACK_S:
            end = "its measured window ended (telemetry t1)" if t1 is not None else "this record was created"
            return f"other run {entry[:40]} started {start - made:.0f} s after {end}"
    return None
