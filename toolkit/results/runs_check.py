"""A record's `between_runs` held to the figures it is computed from (identity.combine_runs, the one
writer: the processes of a repeated test, combined when read): runs = the number of process means,
avg_ts their mean, spread_pct (max - min) / mean of them, samples_ts the processes' samples one after
another (`counts` of each, in the means' order; without counts, as many from each), each mean
its process's samples' (llama-bench: their mean, as check_row holds an avg_ts to its samples; another
runner's rate, e.g. vLLM's tokens / mean latency, lies within them), and stddev_ts the pooled samples'
stddev, or without two samples (-o md, -o sql, vLLM serve: the means are all there is) the means'
stddev. Only a line edited after it was written can fail it: combine_runs' records are never stored."""

from __future__ import annotations

import math
from typing import Any

from toolkit.core import stats

AGREE = 0.01
"""How far a process mean may lie from its samples' mean (llama_bench.check: avg_ts against samples_ts)."""


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf


def between_runs_problem(
    runs: Any, avg_ts: float | None, stddev_ts: float | None, samples: list[float], method: str
) -> str | None:
    """Why `runs` (a record's between_runs) is not what combining its processes gives, or None; `avg_ts`,
    `stddev_ts` and `samples` (samples_ts) are the record's, `method` its runner's (llama-bench holds a
    mean to its samples' mean). Means to 0.1 % (stored to 4 decimals), spread_pct to 0.01 (stored to
    2), stddev_ts to AGREE of the mean (`_pooled_problem`)."""
    means = runs.get("means") if isinstance(runs, dict) else None
    n = runs.get("runs") if isinstance(runs, dict) else None
    if (
        not isinstance(n, int)
        or isinstance(n, bool)
        or n < 2
        or not isinstance(means, list)
        or len(means) != n
        or not all(_number(m) for m in means)
    ):
        return f"between_runs {str(runs)[:80]} is not {{runs: N >= 2, means: N tok/s, spread_pct}}"
    mean = sum(means) / n
    if avg_ts is None or abs(mean - avg_ts) > 1e-3 * mean:
        return f"avg_ts {avg_ts} is not the mean of between_runs.means ({mean:.6g})"
    spread, said = 100 * (max(means) - min(means)) / mean, runs.get("spread_pct")
    if (
        not isinstance(said, int | float)
        or isinstance(said, bool)
        or not abs(said - spread) <= 0.01 + 1e-3 * spread
    ):
        return f"between_runs.spread_pct {str(said)[:24]} is not its means' spread ({spread:.2f} %)"
    return _split_problem(runs.get("counts"), means, samples, method) or _pooled_problem(
        stddev_ts, mean, means, samples
    )


def _pooled_problem(sd: float | None, mean: float, means: list[float], samples: list[float]) -> str | None:
    """Why `sd` (stddev_ts) is not what combine_runs gives: the sample stddev of the pooled samples_ts
    when there are two or more, else of the process means (a record without samples: what the means
    say is then held by the stddev shown beside them), to AGREE of the mean. One sample: BenchRecord
    stores no stddev (llama-bench's 0 for one sample is unknown), so none is held."""
    if len(samples) == 1 and sd is None:
        return None
    values, what = (samples, "samples_ts") if len(samples) > 1 else (means, "between_runs.means")
    expect = stats.stdev(values)
    if sd is not None and abs(sd - expect) <= AGREE * mean:
        return None
    said = "None" if sd is None else f"{sd:g}"
    return f"stddev_ts {said} is not the stddev of {what} ({expect:.4g}): what combining the processes gives"


def _split_problem(counts: Any, means: list[float], samples: list[float], method: str) -> str | None:
    """Why `samples` are not the processes' of `means`, split by `counts` (None: as many each)."""
    n = len(means)
    if counts is None:
        if len(samples) % n:
            return (
                f"between_runs has {n} processes and no counts over {len(samples)} samples_ts: which process "
                "gave which samples is unknown"
            )
        counts = [len(samples) // n] * n
    if not isinstance(counts, list) or len(counts) != n or any(type(c) is not int or c < 0 for c in counts):
        return f"between_runs.counts {str(counts)[:40]} is not {n} sample counts"
    if sum(counts) != len(samples):
        return f"between_runs.counts sum to {sum(counts)}, samples_ts holds {len(samples)}"
    start = 0
    for i, (c, m) in enumerate(zip(counts, means, strict=True)):
        part, start = samples[start : start + c], start + c
        if not part:
            continue  # a process that gave no samples (-o md, -o sql): its mean is all it says
        mid = sum(part) / c
        lo, hi = (mid, mid) if method == "llama-bench" else (min(part), max(part))
        if not lo * (1 - AGREE) <= m <= hi * (1 + AGREE):
            return (
                f"between_runs.means[{i}] {m:g} is not its process's: samples_ts[{start - c}:{start}] "
                f"(mean {mid:.6g}, {min(part):g} to {max(part):g})"
            )
    return None
