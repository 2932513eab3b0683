"""cases41: new variants of the field cases' kinds (a value llama-bench wrote as not finite), through the
real CLI import of real files. A stddev that is not a finite number is the same fault in every format and
every C library's spelling of it: the row is kept, its stddev recomputed from samples or left empty, and
the import says so; only its mean being not finite refuses the row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.runs import tk

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"

_MD = """| model                          |       size |     params | backend    | ngl |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | --------------: | -------------------: |
| qwen3moe 30B.A3B Q4_K - Medium |  16.09 GiB |    30.53 B | ROCm       |  99 |           pp512 |      2400.00 ± 24.00 |
| qwen3moe 30B.A3B Q4_K - Medium |  16.09 GiB |    30.53 B | ROCm       |  99 |           tg128 |      110.00 ± {sd} |

build: 0123abcd (7000)
"""


def _import(tmp_path: Path, src: Path):
    return tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")


@pytest.mark.parametrize("sd", ["-nan(ind)", "nan(snan)", "-NaN", "inf", "INF", "-inf", "Infinity"])
def test_an_md_stddev_not_finite_keeps_its_row_in_every_spelling(tmp_path, sd):
    """Reproducer: md's t/s `110.00 ± -nan(ind)` (MSVC's printf of a NaN: a Windows build's table),
    `± -NaN`, `± inf` refused the whole row ("is not `mean ± stddev`") where `± -nan` and csv/sql/json's
    `-nan(ind)`/`inf` kept it with the stddev left empty."""
    src = tmp_path / "t.md"
    src.write_text(_MD.format(sd=sd))
    res = _import(tmp_path, src)
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "imported 2 results " in res.stdout, out
    assert "t.md:4: stddev_ts was not a finite, non-negative number; left empty" in out, out


def test_an_md_mean_not_finite_is_still_refused(tmp_path):
    src = tmp_path / "t.md"
    src.write_text(_MD.format(sd="1.10").replace("110.00 ± 1.10", "-nan(ind) ± -nan(ind)"))
    res = _import(tmp_path, src)
    assert res.returncode == 0 and "imported 1 result " in res.stdout, res.stdout + res.stderr
    assert "t.md:4: avg_ts is nan: not a measurement; row left out" in res.stderr, res.stderr


def _rows(sd_token: str) -> list[str]:
    rows = [json.loads(x) for x in (DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()]
    lines = [json.dumps(r) for r in rows]
    lines[-1] = lines[-1].replace(
        f'"stddev_ts": {json.dumps(rows[-1]["stddev_ts"])}', f'"stddev_ts": {sd_token}'
    )
    assert sd_token in lines[-1]
    return lines


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_a_stddev_of_minus_inf_is_repaired_as_inf_is(tmp_path, fmt):
    """Reproducer: stddev_ts `-inf` refused the row ("is negative: a stddev never is") in every format
    where `inf` and `-nan` kept it: -inf is no measured spread either, recomputed from samples as they are.
    A finite negative stddev stays refused (tests/test_breaker_round12.py)."""
    lines = _rows("-inf")
    src = tmp_path / f"t.{fmt}"
    if fmt == "jsonl":
        src.write_text("\n".join(lines) + "\n")
    elif fmt == "json":
        src.write_text("[\n" + ",\n".join(lines) + "\n]\n")
    else:
        rows = [json.loads(x.replace("-inf", '"-inf"')) for x in lines]
        keys = [k for k in rows[0] if k not in ("samples_ns", "samples_ts")]
        text = ",".join(keys) + "\n" + "".join(",".join(f'"{r[k]}"' for k in keys) + "\n" for r in rows)
        src.write_text(text)
    res = _import(tmp_path, src)
    out = res.stdout + res.stderr
    assert res.returncode == 0 and f"imported {len(lines)} results " in res.stdout, out
    assert "stddev_ts was not a finite, non-negative number" in out and "never is" not in out, out
