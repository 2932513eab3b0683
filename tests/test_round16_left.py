"""What round 16 left (docs/reliability.md, "Round 16"), fixed on 2026-12-04 (second session). Each
test fails on the code before its fix."""

from __future__ import annotations

from tests.support.records import make_record
from toolkit.analysis.provenance import provenance
from toolkit.results import identity


def test_a_repeated_tests_measured_span_starts_at_its_oldest_process() -> None:
    """`bench.runs: 3` measures a test in three llama-bench processes; the report shows their combined
    record, which was the newest process's copy: `measured:` started at the newest process's test
    (minutes late on a real sweep). It starts at the oldest process's."""
    runs = [
        make_record(
            "cpu",
            "cpu",
            n=128,
            avg=90.0 + i,
            sd=0.5,
            raw={"test_time": f"2026-12-04T10:0{2 * i}:00Z"},
            process_run=i + 1,
            samples_ts=[90.0 + i] * 3,
        ).model_copy(update={"created": f"2026-12-04T10:0{2 * i}:05+00:00"})
        for i in range(3)
    ]
    sel = identity.newest_per_test(runs)
    assert len(sel.used) == 1 and sel.used[0].model_extra["between_runs"]["runs"] == 3
    assert provenance(sel.used).dates == ("2026-12-04 10:00:00", "2026-12-04 10:04:00")
    # a record of one process says only its own time
    assert provenance(runs[2:]).dates == ("2026-12-04 10:04:00",) * 2
