"""fix50b: speeds held to what the row's own machine can do.

S5 (nc49b): a row 12x beyond the bandwidth of the GPU its gpu_info names (a product of core/gpuspecs)
was imported without a word, held only to any device's 25 TB/s, and flagged only by `toolkit report`.
Now a row beyond CARD_SLACK (10) x its named cards' peak is refused, and one beyond 1x is kept and named
by the import. S4 (nc49): a CPU-only row (backends CPU, no gpu_info; or `-dev none`) was held to the
any-machine bound (16 GPUs): a 17 GB qwen3moe tg128 at 10,000 tok/s was valid. Now the largest host's
memory and compute (HOST_BYTES_S, HOST_FLOP_S) hold it. Real rows through the real importer and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.runs import tk
from toolkit.runtimes.llama_bench.validity import check_row

ROOT = Path(__file__).resolve().parents[1]
ROW = json.loads(
    (ROOT / "tests" / "data" / "cases" / "two-builds-one-file.jsonl").read_text().splitlines()[0]
)  # a real R9700 Vulkan row of Qwen3-30B-A3B Q4_K (17.28 GB, `qwen3moe 30B.A3B`: 10.8 % active)
QWEN3_8B = {
    "model_type": "qwen3 8B Q4_K - Medium",
    "model_size": 5_027_783_488,
    "model_n_params": 8_190_735_360,
}
CPU = {"gpu_info": "", "backends": "CPU"}


def _row(ts: float, n_prompt: int = 0, n_gen: int = 128, **kw: object) -> dict:
    """ROW as a test of n_prompt + n_gen tokens at `ts` tok/s (three equal repetitions), `kw` replacing fields."""
    ns = round((n_prompt + n_gen) * 1e9 / ts)
    timed = {"avg_ts": ts, "stddev_ts": 0.0, "avg_ns": ns, "stddev_ns": 0, "samples_ts": [ts] * 3}
    return ROW | {"n_prompt": n_prompt, "n_gen": n_gen, "samples_ns": [ns] * 3} | timed | kw


def _import(tmp_path: Path, rows: list[dict]):
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "bm")


def test_a_decode_far_beyond_its_named_card_is_refused_and_one_beyond_it_is_named(tmp_path: Path) -> None:
    """Reproducer (S5): Qwen3-30B-A3B tg128 at 4,000 tok/s on one R9700 (640 GB/s: 7.5 TB/s at its 10.8 %,
    12x) was imported, exit 0, no word. Now refused; a dense qwen3 8B at 900 tok/s (7x: a cache, a wrong
    size or GPU name) is kept, named by the import and flagged by the report; 300 tok/s of the MoE (0.87x)
    is neither."""
    res = _import(tmp_path, [_row(4000.0), _row(900.0, n_gen=32, **QWEN3_8B), _row(300.0, n_gen=64)])
    assert res.returncode == 0, res.stderr
    assert (
        "rows.jsonl:1: 4000 t/s generating 128 tokens of a model of 17280000000 bytes reads 7.48e+12 bytes/s"
        in res.stderr
    ), res.stderr
    assert (
        "what the 1 GPU device the row names (AMD Radeon AI PRO R9700, at most 10 x its peak) reads"
        in res.stderr
    )
    notes = [ln for ln in res.stderr.splitlines() if "kept beyond the peak of the GPU" in ln]
    assert len(notes) == 1 and "rows.jsonl:2: " in notes[0] and "tg32: 900 t/s" in notes[0], res.stderr
    assert (
        "the 1 GPU device the row names (AMD Radeon AI PRO R9700, at most 1 x its peak) reads (at most 127.293 t/s)"
        in notes[0]
    ), notes
    rep = tk(ROOT, "report", "--results", str(tmp_path / "r"), "--format", "json")
    rows = [row for table in json.loads(rep.stdout)["tables"] for row in table["rows"]]
    flags = {row["test"]: next(v["flags"] for v in row.values() if isinstance(v, dict)) for row in rows}
    assert "bw-above-peak" in flags["tg32"] and "bw-above-peak" not in flags["tg64"], flags


def test_a_prefill_far_beyond_its_named_card_compute_is_refused() -> None:
    """The kind on the compute bound: pp512 of a dense qwen3 8B at 150,000 tok/s on one R9700 is 2.5e15
    FLOP/s, 12.9x its 191 TFLOPS (held to 5e16 before); 50,000 tok/s (4.3x) is kept."""
    why = check_row(_row(150_000.0, n_prompt=512, n_gen=0, **QWEN3_8B))
    assert why is not None and "FLOP/s at least" in why, why
    assert (
        "what the 1 GPU device the row names (AMD Radeon AI PRO R9700, at most 10 x its peak) computes" in why
    )
    assert check_row(_row(50_000.0, n_prompt=512, n_gen=0, **QWEN3_8B)) is None


@pytest.mark.parametrize(
    ("fields", "kept"),
    [
        (CPU, False),  # backends CPU, no GPU device
        ({"gpu_info": "", "backends": "CPU,BLAS"}, False),
        ({"devices": "none"}, False),  # a GPU build's row run with -dev none: on the CPU
        (CPU | {"cuda": False, "vulkan": False, "backends": None}, True),  # before the registry: any machine
    ],
)
def test_a_cpu_only_decode_beyond_any_host_memory_is_refused(
    tmp_path: Path, fields: dict, kept: bool
) -> None:
    """Reproducer (S4): Qwen3-30B-A3B (17.28 GB) tg128 at 10,000 tok/s with backends CPU and no gpu_info is
    18.7 TB/s at its 10.8 % active: imported, valid (any machine's 160 TB/s). The largest hosts read 7 TB/s
    at most (HOST_BYTES_S 10 TB/s). A row of a llama-bench before the backend registry, whose `CPU` may be
    a CANN build's, keeps the any-machine bound."""
    row = _row(10_000.0, **fields)
    res = _import(tmp_path, [{k: v for k, v in row.items() if v is not None}])
    if kept:
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode == 4, res.stdout + res.stderr
    assert "reads 1.87e+13 bytes/s at least" in res.stderr, res.stderr
    assert "more than 1e+13, what the largest host (the row names no GPU device) reads" in res.stderr


def test_a_cpu_only_prefill_beyond_any_host_compute_is_refused() -> None:
    """pp2048 (one micro-batch of 2048) of a dense 8B at 1.5 million tok/s on the CPU is 2.5e16 FLOP/s (held to
    1e17 before); the largest hosts compute 4e15 at INT8 (HOST_FLOP_S 1e16); 300,000 tok/s is kept."""
    big = {"n_batch": 2048, "n_ubatch": 2048}
    why = check_row(_row(1.5e6, n_prompt=2048, n_gen=0, **CPU, **QWEN3_8B, **big))
    assert (
        why is not None
        and "more than 1e+16, what the largest host (the row names no GPU device) computes" in why
    )
    assert check_row(_row(3e5, n_prompt=2048, n_gen=0, **CPU, **QWEN3_8B, **big)) is None
