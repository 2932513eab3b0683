"""Breaker round 13 (hostile tester of round 12's change): a passing canary of a second model shown
unchecked, the decode fold's arithmetic overflowing on rates 10^160 apart (and such rates imported),
and csv on stdout ending in a blank line. Each test fails on the code before its fix."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.records import CANARY_CONTROL as CONTROL
from tests.support.records import canary_row, make_record
from tests.support.runs import tk
from toolkit.analysis import provenance
from toolkit.analysis.tables import _band_holds
from toolkit.results.records import bench_record
from toolkit.runtimes.llama_bench import check, validity


def test_a_passing_canary_of_a_second_model_is_judged_against_that_models_control() -> None:
    """One run canaries every model it benches: the CPU controls were keyed by (image, digest, run)
    without the model, so model B's vulkan canary was held to model A's control PPL (535.877) and
    shown 'unchecked: ... contradicts itself'. Now keyed by the model's sha256 too."""

    def own(ppl: float, sha: str) -> dict:
        return canary_row(
            image="cpu", digest=CONTROL["digest"], backend="cpu", ppl=ppl, ln_ratio=None,
            control={**CONTROL, "ppl": ppl}, model_sha256=sha,
        )  # fmt: skip

    gpu_b = canary_row(
        ppl=12.3460,
        control={**CONTROL, "ppl": 12.3456},
        ln_ratio=math.log(12.3460 / 12.3456),
        model_sha256="b" * 64,
    )
    recs = [
        make_record(
            c["image"], c["backend"], n=128, avg=90.0 + i, sd=0.5, canary=c, digest=c["digest"], model=m
        )
        for i, (c, m) in enumerate(
            [(own(535.8769, "a" * 64), "model-a"), (own(12.3456, "b" * 64), "model-b"), (gpu_b, "model-b")]
        )
    ]
    lines = provenance.provenance(recs).images
    vulkan = next(line for line in lines if line.startswith("vulkan"))
    assert "unchecked" not in vulkan and "cpu control 12.3456" in vulkan, lines
    # the same canary held to a control PPL its own model's control does not have is still unchecked
    wrong = canary_row(
        ppl=12.3460,
        control={**CONTROL, "ppl": 12.0},
        ln_ratio=math.log(12.3460 / 12.0),
        model_sha256="b" * 64,
    )
    recs[2] = make_record(
        "vulkan", "vulkan", n=128, avg=92.0, sd=0.5, canary=wrong, digest=wrong["digest"], model="model-b"
    )
    assert "unchecked" in next(x for x in provenance.provenance(recs).images if x.startswith("vulkan"))


def test_rates_far_apart_neither_overflow_the_fold_nor_import() -> None:
    """Two rows of one test, 1e9 and 1e-151 tok/s: `(ratio - 1) ** 2` raised OverflowError in the
    report; a stddev near 1e200 beside an overflowed ratio gave inf - inf = NaN and folded rows that
    differ. The band now says they disagree; and a rate under MIN_TOKENS_PER_S is no measurement."""
    assert _band_holds([(1e9, 0.01), (1e-300, 0.01)], 0.05) == [False, False]
    assert _band_holds([(1e9, 1e200), (1e-300, 1e200)], math.inf) == [False, False]
    assert _band_holds([(100.0, 0.01), (101.0, 0.01)], 0.05) == [True, True]
    fields = {"n_prompt": 0, "n_gen": 16, "n_depth": 0, "avg_ts": 1e-151, "test_time": "2026-12-01T00:00:00Z"}
    assert "not a measurement" in (validity.check_row(fields) or "")
    assert validity.check_row({**fields, "avg_ts": check.MIN_TOKENS_PER_S}) is None
    rec, why = bench_record(
        make_record("cpu", "cpu", n=16, avg=1.0).model_dump(mode="json") | {"avg_ts": 1e-151}
    )
    assert rec is None and "not a measurement" in (why or ""), why


@pytest.mark.parametrize("fmt", ["csv", "text", "json", "github"])
def test_stdout_and_the_o_file_end_alike_with_one_newline(tmp_path: Path, fmt: str) -> None:
    """csv's writer ends its last line itself and click.echo added one more: stdout ended in a blank
    line while the -o file did not. Both now end with exactly one newline, and hold the same text."""
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    data = ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl"
    assert tk(tmp_path, "import", "--results", "r", "--label", "x", str(data)).returncode == 0
    out = tk(tmp_path, "report", "--results", "r", "--format", fmt)
    assert out.returncode == 0, out.stderr
    assert (
        tk(tmp_path, "report", "--results", "r", "--format", fmt, "-o", str(tmp_path / "f")).returncode == 0
    )
    text = (tmp_path / "f").read_text()
    assert out.stdout.endswith("\n") and not out.stdout.endswith("\n\n"), repr(out.stdout[-20:])
    assert text == out.stdout


def test_a_negative_head_count_gives_no_kv_shape(tmp_path: Path) -> None:
    """Breaker round 13: an int32 head count of -4 gave KvShape(key_length=-128...), a negative KV size
    a token that made every depth 'fit' (gguf's GGUFReader raised on it). Now no shape: the depth is
    kept, as for a missing key."""
    import struct

    from toolkit.models import gguf_meta

    def kv(key: str, vtype: int, payload: bytes) -> bytes:
        return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", vtype) + payload

    def header(heads: int) -> Path:
        path = tmp_path / f"h{heads}.gguf"
        path.write_bytes(
            b"GGUF"
            + struct.pack("<IQQ", 3, 0, 4)
            + kv("general.architecture", 8, struct.pack("<Q", 5) + b"llama")
            + kv("llama.block_count", 4, struct.pack("<I", 2))
            + kv("llama.embedding_length", 4, struct.pack("<I", 512))
            + kv("llama.attention.head_count", 5, struct.pack("<i", heads))  # 5: INT32
        )
        return path

    assert gguf_meta.gguf_kv_shape(str(header(4))) is not None
    assert gguf_meta.gguf_kv_shape(str(header(-4))) is None
