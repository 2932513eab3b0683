"""Whether a stored record contradicts itself (`contradiction`): its figures against each other, its own
`raw` row, its telemetry block and the times it names. Read where a line is validated
(records.bench_record: ResultStore.results and the query index when it reads a file)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkit.core.backends import OLD_BACKEND_FLAGS
from toolkit.results.raw_check import COUNTS, MADE, made_problem, raw_problem, size_problem
from toolkit.results.runs_check import between_runs_problem
from toolkit.results.served_check import served_problem, served_settings_problem
from toolkit.results.telemetry_check import energy_contradiction
from toolkit.results.telemetry_flags import figures_problem
from toolkit.results.time_check import times_problem
from toolkit.runtimes.llama_bench.check import axis_of, test_name
from toolkit.runtimes.llama_bench.settings_check import DOMAIN_FIELDS
from toolkit.runtimes.llama_bench.validity import check_row
from toolkit.runtimes.sglang import args as sglang_args
from toolkit.runtimes.vllm import output as vf

if TYPE_CHECKING:
    from toolkit.results.records import BenchRecord


def _own_samples(rec: BenchRecord, extra: dict[str, Any]) -> int | None:
    """How many samples the process that wrote `rec`'s raw row measured: all of samples_ts, or for a
    record combining several processes (`between_runs`, identity.combine_runs: the newest one's raw
    row, its samples last) the last of between_runs.counts; None where that block names no count."""
    if "between_runs" not in extra:
        return len(rec.samples_ts)
    block = extra["between_runs"]
    counts = block.get("counts") if isinstance(block, dict) else None
    last = counts[-1] if isinstance(counts, list) and counts else None
    return last if type(last) is int else None


def contradiction(rec: BenchRecord) -> str | None:
    """Why an ok record contradicts itself (a line edited after it was written), None when it does not: a
    llama-bench record's test and axis against its token counts (llama_bench.check's normalize), and the
    figures every reader shows through the one validity pass of llama-bench rows
    (llama_bench.validity.check_row); any record's telemetry energy (telemetry_check.energy_contradiction, the
    rule `toolkit import` applies) and its figures (telemetry_flags.figures_problem); a served record's avg_ts
    against its served block and result (served_check), a vLLM or SGLang serve record's n_prompt, n_gen and
    concurrency against its own result (served_settings_problem), an imported vLLM or SGLang serve record's
    result against the rules its import held it to (vllm output.serve_problem, serve_timing_problem:
    _SERVE_PEAKS); a `vllm bench latency` record's speed and samples against its own result (vllm
    output.latency_record_problem); a llama-bench record's token counts and number of samples against its own
    `raw` row (raw_check; a model_size above its model file's size: size_problem), and the other fields made
    from it (made_problem); its test_time against when its image was built and when the record was written
    (time_check.times_problem). raw's samples_ns values are not held to samples_ts (the telemetry window reads
    them as timed time). Run where a line is validated (bench_record: ResultStore.results and the query index
    when it reads a file), not where the index loads a line it validated (the same bytes, the same answer)."""
    if rec.status != "ok":
        return None
    extra = rec.model_extra or {}
    own_samples = _own_samples(rec, extra)
    if "between_runs" in extra and (
        why := between_runs_problem(
            extra["between_runs"], rec.avg_ts, rec.stddev_ts, rec.samples_ts, rec.method
        )
    ):
        return why
    if rec.axis == "served" and (
        why := served_problem(rec.method, rec.avg_ts, rec.n_gen, extra.get("served"), rec.raw)
    ):
        return why
    if rec.method in _SERVE_PEAKS and isinstance(rec.raw, dict):  # what its row is named by
        if why := served_settings_problem(rec.n_prompt, rec.n_gen, rec.engine, extra.get("served"), rec.raw):
            return why
    if rec.method in (vf.METHOD_PREFILL, vf.METHOD_DECODE) and (
        why := vf.latency_record_problem(
            rec.method,
            rec.n_prompt if rec.method == vf.METHOD_PREFILL else rec.n_gen,
            rec.avg_ts,
            rec.samples_ts,
            rec.raw,
        )
    ):
        return why
    if rec.method in _SERVE_PEAKS and "imported" in extra and isinstance(rec.raw, dict):
        # the rules its import held the result to (vllm_import._serve): a stored one failing them was edited
        if why := vf.serve_problem(rec.raw) or vf.serve_timing_problem(rec.raw, _SERVE_PEAKS[rec.method]):
            return f"its result: {why}"
    row: dict[str, Any] = {}
    if rec.method == "llama-bench":
        test = test_name(rec.n_prompt, rec.n_gen, rec.n_depth)
        axis = axis_of(rec.n_prompt, rec.n_gen)
        if rec.axis != axis:
            return (
                f"axis {rec.axis[:40]!r} is not its test's: {test} (n_prompt {rec.n_prompt}, n_gen "
                f"{rec.n_gen}) is {axis}"
            )
        if rec.test != test:
            return (
                f"test {rec.test[:40]!r} is not its token counts' {test!r} (n_prompt {rec.n_prompt}, n_gen "
                f"{rec.n_gen}, n_depth {rec.n_depth})"
            )
        counts = {k: getattr(rec, k) for k in COUNTS}
        if why := raw_problem(counts, own_samples, rec.raw, rec.command) or size_problem(
            rec.model.size_bytes, rec.model.path, rec.raw
        ):
            return why
        row = {k: getattr(rec, k) for k in _SHOWN}
        row.update(backends=rec.backends, gpu_info=rec.gpu_info)  # the GPU its backend can run on
        row.update({k: rec.raw.get(k) for k in _RAW_HELD})
        # the row's own per-backend booleans, where it printed them: its era (plausible.device_problem)
        row.update({k: rec.raw[k] for k in OLD_BACKEND_FLAGS if k in rec.raw})
        why = check_row(row)
        if why is not None:
            return why
        # after check_row, whose reasons say more (a GPU its backend cannot run on)
        made = {k: getattr(rec, k) for k in (*COUNTS, *MADE, "n_ubatch_effective")}
        if why := made_problem(made, rec.raw):
            return why
        row["samples_ns"] = rec.raw.get("samples_ns")
    else:
        row = {"gpu_info": rec.gpu_info}  # the board a block's power is held to
    if why := times_problem(rec):  # when it says it was measured: after its image, before it was written
        return why
    if why := figures_problem(rec.telemetry, rec.gpu_info):  # what its flags are re-derived from
        return f"its telemetry: {why}"
    return energy_contradiction(rec.telemetry, row) if rec.telemetry else None


_SERVE_PEAKS = {vf.METHOD_SERVE: True, sglang_args.METHOD_SERVE: False}
"""The methods of an imported serve result (vLLM's `vllm bench serve`, SGLang's bench_serving; both read
by vllm_import._serve), each with whether its peaks are held (vf.serve_timing_problem): a stored one is
held on read to the rules its import applied (an SGLang result edited to a median TTFT of 99,999 ms, or
100x its throughput, was shown where vLLM's was skipped)."""

_SHOWN = ("n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch", "avg_ts", "stddev_ts", "samples_ts")
"""The fields of a llama-bench record contradiction() holds to the validity pass: what readers show."""

_RAW_HELD = ("model_size", "model_n_params", "n_threads", *DOMAIN_FIELDS)
"""Fields of a llama-bench record's `raw` row held to the validity pass too: what its roofline reads
(a model_size edited down hid a decode beyond the GPU's bandwidth) and the thread count its test is
named by (a trillion threads was shown as measured), and the settings llama-bench's parser bounds
(settings_check.DOMAIN_FIELDS: a flash_attn of 7 was shown as a setting measured). Its test_time is
time_check's (times_problem: a future one is held to the record's `created`, itself clock-skew)."""
