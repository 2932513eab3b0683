"""What was measured: record schema and store (results/<digest12>/bench.jsonl), the SQLite query index,
the one test identity, `toolkit import` (each runtime's output parsers: toolkit.runtimes).
May use: toolkit.core, toolkit.spec, toolkit.engine (facts only), toolkit.runtimes; reads and writes
results/; never prints.
"""

from pathlib import Path


def bench_files(root: Path) -> list[Path]:
    """results/*/bench.jsonl and the per-host folders of campaigns, results/hosts/<host>/*/bench.jsonl
    (toolkit/campaign/slurm.py: each host's jobs write only there), sorted: the order every reader reads
    records in. Here, light to import: an empty `toolkit report` asks it without loading the store."""
    return sorted([*root.glob("*/bench.jsonl"), *root.glob("hosts/*/*/bench.jsonl")])


NO_RESULTS = "no results yet: run `toolkit bench` or `toolkit import`"
"""What a report of a results folder without a record says (kept here, light to import: an empty
`toolkit report` says it without loading the report stack)."""
