"""Analyse benchmarks/h200_paired.sh's output folder (not a test): per llama-bench test, tok/s under
`toolkit measure` (sampler on) divided by tok/s of the bare run of the same pair; median and range
over pairs, and the flags the measured rows carried.

    python3 benchmarks/paired_ratios.py OUT_DIR
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def rows(path: Path) -> dict[str, dict]:
    """{test name: row} from a llama-bench -o jsonl file (test = pp<n_prompt> or tg<n_gen>)."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip().startswith("{"):
            r = json.loads(line)
            out[f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"] = r
    return out


def main() -> None:
    d = Path(sys.argv[1])
    ratios: dict[str, list[float]] = {}
    flags: set[str] = set()
    for bare in sorted(d.glob("bare_*.jsonl")):
        meas = d / bare.name.replace("bare_", "measured_")
        if not meas.exists():
            continue
        b, m = rows(bare), rows(meas)
        for test, r in m.items():
            flags.update(r.get("toolkit_flags") or [])
            if test in b:
                ratios.setdefault(test, []).append(r["avg_ts"] / b[test]["avg_ts"])
    for test, rs in sorted(ratios.items()):
        print(
            f"{test}: with/without sampler median {statistics.median(rs):.4f} "
            f"(range {min(rs):.4f}-{max(rs):.4f}, {len(rs)} pairs)"
        )
    print(f"flags on measured rows: {', '.join(sorted(flags)) or 'none'}")


if __name__ == "__main__":
    main()
