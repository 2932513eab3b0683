"""brk49: llama-bench rows whose speed no named device can reach, shown as valid numbers.

F1: a decode of a model whose architecture llama.cpp builds without experts (qwen3, gemma3, ...) was
judged with the slack of an unknown mixture of experts (33x the GPU's bandwidth): 20x an R9700's
bandwidth showed as a plain number. F2: the any-machine bound counted 16 GPU devices of any kind
where the row names one of a product without figures (no roofline): 60,000 tok/s of a 17 GB model
on one device was imported as ok. Real rows through the real importer and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.records import make_record
from tests.support.runs import tk

ROOT = Path(__file__).resolve().parents[1]
ROW = json.loads(
    (ROOT / "tests" / "data" / "cases" / "two-builds-one-file.jsonl").read_text().splitlines()[0]
)


def _row(ts: float, n_prompt: int = 0, n_gen: int = 128, **kw: object) -> dict:
    """ROW (an R9700 Vulkan row of Qwen3-30B-A3B) as a test of n_prompt + n_gen tokens at `ts` tok/s,
    three equal repetitions, with `kw` replacing fields."""
    ns = round((n_prompt + n_gen) * 1e9 / ts)
    return (
        ROW
        | {"n_prompt": n_prompt, "n_gen": n_gen, "avg_ts": ts, "stddev_ts": 0.0, "avg_ns": ns}
        | {
            "stddev_ns": 0,
            "samples_ts": [ts] * 3,
            "samples_ns": [ns] * 3,
            **kw,
        }
    )


QWEN3_8B = {
    "model_type": "qwen3 8B Q4_K - Medium",
    "model_size": 5_027_783_488,
    "model_n_params": 8_190_735_360,
}


def _imported(tmp_path: Path, rows: list[dict]) -> tuple[object, dict[str, list[str]]]:
    """Import `rows` (jsonl) with the CLI: (the import's result, {test: its flags in the report's tables})."""
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "bm")
    if res.returncode != 0:
        return res, {}
    rep = tk(ROOT, "report", "--results", str(tmp_path / "r"), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    rows = [row for table in json.loads(rep.stdout)["tables"] for row in table["rows"]]
    return res, {row["test"]: next(v["flags"] for v in row.values() if isinstance(v, dict)) for row in rows}


def test_a_dense_architecture_decoding_beyond_its_gpu_is_flagged(tmp_path: Path) -> None:
    """Reproducer (F1): a qwen3 8B Q4_K (5.0 GB, dense: llama.cpp's qwen3 loader makes no expert
    tensors) decoding 2,600 tok/s on an R9700 (640 GB/s: 127 tok/s at most) showed `2600.00 ± 0.00`,
    `2043% of BW`, no flag, in the verdict. Now bw-above-peak (held); 100 tok/s (79 %) stays clean.
    fix50b: 2,600 tok/s (20x) is now refused (CARD_SLACK); 900 tok/s (7x) is kept and flagged."""
    res, flags = _imported(tmp_path, [_row(900.0, **QWEN3_8B), _row(100.0, n_gen=64, **QWEN3_8B)])
    assert res.returncode == 0, res.stderr
    assert "bw-above-peak" in flags["tg128"], flags
    assert "bw-above-peak" not in flags["tg64"], flags


@pytest.mark.parametrize(
    ("model_type", "source", "flagged"),
    [
        ("gemma3 27B Q4_K - Medium", "dense-arch", True),
        ("qwen2 7B Q8_0", "dense-arch", True),
        ("llama 8B Q4_K - Medium", "dense", False),  # llama's loader takes experts (Mixtral is llama)
        ("newarch 8B Q4_K - Medium", "dense", False),  # an MoE the marker list lacks may hide here
    ],
)
def test_the_dense_slack_is_left_only_where_experts_may_hide(
    model_type: str, source: str, flagged: bool
) -> None:
    """Every known dense architecture is held to 1 x its GPU's bandwidth (10x here); an architecture
    that may carry experts keeps the unknown-MoE slack (1 / 3 %)."""
    from toolkit.analysis.facts import Facts
    from toolkit.analysis.roofline import active_share

    raw = {"model_type": model_type, "model_size": 5_000_000_000, "gpu_info": "AMD Radeon AI PRO R9700"}
    rec = make_record("vulkan", "vulkan", n=128, avg=1280.0, raw=raw)
    share = active_share(rec)
    assert share is not None and share.source == source
    assert ("bw-above-peak" in Facts.of(rec).flags) is flagged


@pytest.mark.parametrize(
    ("gpu_info", "kept"),
    [
        ("Foo GPU 9000", False),
        ("Foo GPU 9000, Foo GPU 9000", True),  # two devices read twice as much
        ("", True),  # no device named (a CPU fallback row, flagged so): any machine's bound
    ],
)
def test_a_decode_no_named_device_can_read_is_refused(tmp_path: Path, gpu_info: str, kept: bool) -> None:
    """Reproducer (F2): Qwen3-30B-A3B (17.3 GB) at 20,000 tok/s on one device of a product without
    figures (`Foo GPU 9000`: no roofline) was imported as ok, unflagged: the bound was 16 devices'.
    One device reads at most 25 TB/s: 13,372 tok/s at the 10.8 % of the weights its type states a token
    (fix49c: 48,225 tok/s at 3 % before)."""
    res, flags = _imported(tmp_path, [_row(20000.0, gpu_info=gpu_info)])
    if kept:
        assert res.returncode == 0 and list(flags) == ["tg128"], res.stderr
        return
    assert res.returncode == 4, res.stdout + res.stderr
    assert "more than 2.5e+13, what the 1 GPU device the row names reads (at most 13371.6 t/s)" in res.stderr


def test_a_prefill_no_named_device_computes_is_refused() -> None:
    """F2's kind on the compute bound: pp512 of a 30.5B model at 10 million tok/s on one device is 6.6e16
    FLOP/s at the 10.8 % active its type states (more than one device's 5e16, less than two's 1e17)."""
    from toolkit.runtimes.llama_bench.validity import check_row

    why = check_row(_row(1e7, n_prompt=512, n_gen=0, gpu_info="Foo GPU 9000"))
    # nc49's forward passes: its one micro-batch reads the weights too, so the bytes bound may speak first
    assert why is not None and "what the 1 GPU device the row names" in why, why
    assert check_row(_row(1e7, n_prompt=512, n_gen=0, gpu_info="Foo GPU 9000, Foo GPU 9000")) is None


@pytest.mark.parametrize("field", ["stddev_ns", "build_number"])
@pytest.mark.parametrize("value", [-1, -2.5, "-3"])
def test_a_negative_time_or_count_llama_bench_never_prints_is_refused(field: str, value: object) -> None:
    """F6: a negative stddev_ns (a square root, uint64_t in llama-bench) was accepted, never shown; a
    fraction slipped past the whole-number reading of the non-negative fields."""
    from toolkit.runtimes.llama_bench.validity import check_row

    why = check_row(_row(100.0) | {field: value})
    assert why is not None and f"{field} is " in why, why  # build_number -2.5: "expected a whole number"
    assert "negative" in why or "whole number" in why, why
