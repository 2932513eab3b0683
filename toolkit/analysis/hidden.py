"""Older clean runs a report does not show: `toolkit report` shows the newest run of each test (by
design: a re-run replaces what it measured), so a newer run measured on a busy system (a telemetry
flag: host-busy, gpu-shared, throttled, ...) hides an older run of the same test measured on a quiet
one. The report says so in one line, naming the run and how to show it (`--run ID`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from toolkit.analysis.facts import telemetry_flags
from toolkit.analysis.tables import row_label, select_for_report
from toolkit.core import invocation
from toolkit.results import identity
from toolkit.results import index as resultindex
from toolkit.results.records import BenchRecord, ResultStore


def hidden_clean_runs(
    store: ResultStore, shown: list[BenchRecord], *, images: Iterable[str] | None = None
) -> dict[str, list[tuple[str, list[str]]]]:
    """{run id: [(a test as the tables name it, `pp512 ub512`; the telemetry flags of its cell shown)]}:
    the runs that measured a test without a telemetry flag where the report shows another run's
    flagged cell of it, the newest such run per test, newest run first. A `toolkit tune` trial
    (identity.is_tune_trial) is neither: its cell never stands for a bench run of its test, and its
    run is no measurement the bench run hides. `shown`: the records a report read (index.select, of
    `images`); its own run filter makes this moot (the caller's). Only asked of the index where a
    shown record carries a telemetry flag and records were superseded (`superseded` of a
    RecordSelection; 0 otherwise is taken as none): else nothing is read."""
    if not getattr(shown, "superseded", 0):
        return {}
    flagged = [r for r in shown if r.status == "ok" and telemetry_flags(r) and not identity.is_tune_trial(r)]
    if not flagged:
        return {}
    flagged = [
        r for r in select_for_report(shown) if telemetry_flags(r) and not identity.is_tune_trial(r)
    ]  # the cells shown
    older = resultindex.of_tests(store, flagged, images=images)
    models = len({r.model.name for r in flagged}) > 1  # then a test is named with its model, as rows are
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for r in flagged:
        key = identity.test_key(r)
        clean = [
            x
            for x in older
            if x.run_id != r.run_id
            and not telemetry_flags(x)
            and not identity.is_tune_trial(x)
            and identity.test_key(x) == key
        ]
        if clean:  # store order: the last is the newest written
            label = row_label(r, ub=True) + (f" of {r.model.name}" if models else "")
            out.setdefault(clean[-1].run_id, []).append((label, telemetry_flags(r)))
    order = {x.run_id: i for i, x in enumerate(older)}
    return dict(sorted(out.items(), key=lambda kv: -order[kv[0]]))


def hidden_note(hidden: dict[str, list[tuple[str, list[str]]]], results: str | None = None) -> str | None:
    """The one line (its caller wraps it on a terminal) that says which runs measured without a
    telemetry flag the tests whose flagged cells a report shows (hidden_clean_runs), each test with
    its cell's flags, and the `--run ID` that shows one (the newest), with `--results RESULTS` where
    the report was of a folder given so (the command as typed: without it, it read results/ of the
    project, another folder or none); None when there are none. It says "another run", not "an
    older" one: the run shown is the newest by the store's order, which need not be the order measured."""
    if not hidden:
        return None

    def cell(label: str, flags: list[str]) -> str:
        return f"{label} shown flagged {', '.join(flags)}"

    runs = "; ".join(
        f"run {rid} ({', '.join(dict.fromkeys(cell(t, f) for t, f in tests))})"
        for rid, tests in hidden.items()
    )
    first = next(iter(hidden))
    again = invocation.again(
        "report", "--run", first, drop=("--run",), results=Path(results) if results else None
    )
    return (
        "newest run per test: another run measured these tests without a telemetry flag where the cells "
        f"shown are flagged: {runs}; `{again}` shows it"
    )
