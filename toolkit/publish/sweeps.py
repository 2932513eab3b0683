"""What a run's records say of its models' depth sweeps, for `toolkit export-run` (run.json) and
`toolkit reproduce`, which re-runs them (a reproduction of the main sweep alone found every depth test
missing)."""

from __future__ import annotations

from pathlib import Path

from toolkit.matrix.api import DEPTH_LOG_SUFFIX, DepthSweep
from toolkit.results.records import BenchRecord


def recorded_sweep(records: list[BenchRecord], model: str) -> DepthSweep | None:
    """The depth sweep of `model` as a run's `records` measured it (for `toolkit reproduce`, which re-runs
    it), None where they hold none: its ok records written by a depth process (log file
    `<run_id>-<model>-depth...log`, bench_one's name for one), their depths, prompt and generation lengths
    (0s dropped: llama-bench writes a pp test with n_gen 0) and micro-batch; depths listed, never `wide`.
    The main sweep's tests at a depth are left out on the reproducing host as they were here."""
    mine = [
        r
        for r in records
        if r.model.name == model
        and r.status == "ok"
        and Path(r.log_file or "").stem.removeprefix(f"{r.run_id}-{model}").startswith(DEPTH_LOG_SUFFIX)
    ]
    if not mine:
        return None
    ubs = {r.n_ubatch for r in mine}
    return DepthSweep(
        n_depth=sorted({r.n_depth or 0 for r in mine}),
        n_prompt=sorted({r.n_prompt for r in mine if r.n_prompt}) or [0],
        n_gen=sorted({r.n_gen for r in mine if r.n_gen}) or [0],
        n_ubatch=ubs.pop() if len(ubs) == 1 else None,
    )
