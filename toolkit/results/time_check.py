"""When a stored record says its test ran (its raw row's test_time, the one reading of it:
llama_bench.check.parse_test_time) against the two other times the record names: when its image was
built (the OCI label `org.opencontainers.image.created` the toolkit's build writes, reused from the
first build of the same inputs, so the image existed from then on) and when the record was written
(`created`: `toolkit bench` writes it after the test, `toolkit import` at the import). A test runs in an
image that exists and is written after it ran: a test_time before the first or after the second, by
more than FUTURE_SLACK_S (clock skew between the build host and the measuring host), is no time of
this measurement (an edited line, a wrong clock). Read by record_check.contradiction, so by every reader
of a stored record."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from toolkit.results.telemetry_check import window_contradiction
from toolkit.runtimes.llama_bench.check import EARLIEST_TEST_TIME, FUTURE_SLACK_S, parse_test_time
from toolkit.runtimes.vllm import output as vllm_output

if TYPE_CHECKING:
    from toolkit.results.records import BenchRecord

IMAGE_CREATED = "org.opencontainers.image.created"


def times_problem(rec: BenchRecord) -> str | None:
    """Why `rec`'s test_time cannot be when it was measured, None where it can or a time is not stated (no
    test_time: md, sql, vLLM; an image without the label; an unreadable `created` is the schema's): before
    EARLIEST_TEST_TIME (as the import refuses it), more than FUTURE_SLACK_S before its image's
    `org.opencontainers.image.created`, or after its own `created` (a future `created` is clock-skew,
    records.py: never refused by the reader's clock); a vLLM record's `date` held to its `created` the same
    way (local_date_problem); its test_time or `created` before the start its own run id names
    (_before_its_run); then its telemetry window's times (_window_problem)."""
    raw = rec.raw if isinstance(rec.raw, dict) else {}
    written = parse_test_time(rec.created)
    # the record's own times first: a window is held to them
    return _stated_times_problem(rec, raw, written) or _window_problem(rec, raw, written)


def _stated_times_problem(rec: BenchRecord, raw: dict[str, Any], written: datetime | None) -> str | None:
    """times_problem's checks of the times the record states (test_time, `date`, `created`, run id)."""
    if written is not None and rec.runner == "vllm" and (why := local_date_problem(raw.get("date"), written)):
        return why
    ran = parse_test_time(raw.get("test_time"))
    if ran is None:
        return _before_its_run(rec, written, None)
    said = str(raw.get("test_time"))[:40]
    if ran < EARLIEST_TEST_TIME:  # the import's rule (llama_bench.check._time_of_test), held on read
        return f"test_time {said!r} lies before llama-bench existed (mid-2023): a clock never set, or an edited line"
    built = parse_test_time((rec.image.labels or {}).get(IMAGE_CREATED))
    if built is not None and (built - ran).total_seconds() > FUTURE_SLACK_S:
        return (
            f"test_time {said!r} lies before its image was built ({IMAGE_CREATED} "
            f"{built.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC): no test runs in an image before it exists"
        )
    if written is not None and (ran - written).total_seconds() > FUTURE_SLACK_S:
        return (
            f"test_time {said!r} lies after the record was written (created "
            f"{written.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC): a test is written after it ran"
        )
    return _before_its_run(rec, written, ran)


def _window_problem(rec: BenchRecord, raw: dict[str, Any], written: datetime | None) -> str | None:
    """Why `rec`'s telemetry window (t0, t1) cannot be its test's, None where it can or names no time: the
    rule `toolkit import` holds a row's window to (telemetry_check.window_contradiction: more than
    FUTURE_SLACK_S from the row's test_time either way), held on read too, with its end against when the
    record was written where that is after the window (`created`: a llama-bench row is saved after its result
    row, an import after its file was measured; a vLLM or SGLang record's is its run's start, before its
    windows, so there its end is not held)."""
    t = rec.telemetry
    if not isinstance(t, dict):
        return None
    saved_after = rec.runner == "llama-bench" or "imported" in (rec.model_extra or {})
    now, clock = math.inf, ""
    if saved_after and written is not None:
        now, clock = written.timestamp(), f"the record was written (created {str(rec.created)[:40]})"
    why = window_contradiction(t, raw if rec.method == "llama-bench" else {}, now, clock)
    return f"its telemetry: {why}" if why else None


def _before_its_run(rec: BenchRecord, written: datetime | None, ran: datetime | None) -> str | None:
    """Why record `rec` says it was written (`written`: its `created`) or measured (`ran`: its raw row's
    test_time) before the run that made it started, None where not (or it names no such start): a run id of
    this toolkit's (records.RUN_ID, `YYYYMMDDTHHMMSSZ-hex6`, new_run_id; a campaign job's `<campaign id>-jN`
    opens with its campaign's) names its start, and every record of it is measured and written after that;
    more than FUTURE_SLACK_S before is no time of this run. An import's run id (`import-...`) names when it
    was imported, not measured, and is not held."""
    from toolkit.results.records import run_id_start  # records imports this module (through record_check)

    start = run_id_start(rec.run_id) if "imported" not in (rec.model_extra or {}) else None
    if start is None:
        return None
    begun = datetime.fromtimestamp(start, timezone.utc)
    for name, when in (("test_time", ran), ("created", written)):
        if when is not None and (begun - when).total_seconds() > FUTURE_SLACK_S:
            return (
                f"{name} {when.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC lies before its run "
                f"{rec.run_id[:40]} started ({begun:%Y-%m-%d %H:%M:%S} UTC, as its id says): a run's records "
                "are measured and written after it starts"
            )
    return None


EARLIEST_LOCAL_DATE = datetime(2023, 6, 1)
"""No vLLM result is older: vLLM's first public release (v0.1.0) came out in June 2023; a vLLM `date`
before it is a host clock that was never set, or an edited file."""

ZONE_SLACK_S = 14 * 3600
"""How far a local time may run ahead of UTC (UTC+14, Kiribati's Line Islands): a vLLM `date` is the
benchmark host's local time with no zone (runtimes.vllm.output.local_date)."""


def local_date_problem(v: Any, latest: datetime) -> str | None:
    """Why a vLLM result's `date` (`v`: local time, no zone) cannot be when it ran, None where it can or
    is not a date vLLM writes (then it is shown as not recorded): before EARLIEST_LOCAL_DATE, or more
    than ZONE_SLACK_S + FUTURE_SLACK_S after `latest` (aware: now at import, the record's `created`
    when stored: it is written after it ran)."""
    d = vllm_output.local_date(v)
    if d is None:
        return None
    if d < EARLIEST_LOCAL_DATE:
        return f"date {str(v)!r} lies before vLLM existed (its first release: June 2023)"
    bound = latest.astimezone(timezone.utc).replace(tzinfo=None)
    if (d - bound).total_seconds() > ZONE_SLACK_S + FUTURE_SLACK_S:
        return (
            f"date {str(v)!r} lies after {bound:%Y-%m-%d %H:%M:%S} UTC, when the result was read or written, "
            "by more than any time zone: a wrong clock or an edited file"
        )
    return None
