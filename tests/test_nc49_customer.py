"""nc49, a customer's hand-written llama-bench rows: a prompt test faster than its forward passes allow.
A prompt is computed one micro-batch after another, each a forward pass of the model, as a decode is
one token after another: the time floor (MIN_TOKEN_S a pass) and the bytes floor (MIN_ACTIVE_SHARE of
the weights a pass, MAX_BYTES_S) held generated tokens only, so a pp512 of 500 million tok/s on the
tiny model (1 us for 8 micro-batches) was imported as an ok result with no flag. Real rows through the
real importer and CLI; stored records through the one validity pass too."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.records import make_record
from tests.support.runs import tk
from toolkit.results.record_check import contradiction
from toolkit.runtimes.llama_bench.check import forward_passes

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _timed(row: dict, ts: float) -> dict:
    """`row` (a real -o json row) at `ts` tok/s, its avg_ns, one sample and stddevs made to agree."""
    ns = round((row["n_prompt"] + row["n_gen"]) * 1e9 / ts)
    return row | {
        "avg_ts": ts,
        "avg_ns": ns,
        "stddev_ts": 0.0,
        "stddev_ns": 0,
        "samples_ns": [ns],
        "samples_ts": [ts],
    }


def _import(tmp_path: Path, rows: list[dict]) -> tuple[int, str]:
    tmp_path.mkdir(exist_ok=True)
    src = tmp_path / "hand.json"
    src.write_text(json.dumps(rows, indent=1))
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    return res.returncode, res.stdout + res.stderr


def test_forward_passes_count_the_prompts_micro_batches_and_the_generated_tokens() -> None:
    assert forward_passes({"n_prompt": 512, "n_gen": 0, "n_ubatch": 64, "n_batch": 2048}) == 8
    assert forward_passes({"n_prompt": 4096, "n_gen": 0, "n_ubatch": 2048, "n_batch": 512}) == 8  # ub <= b
    assert forward_passes({"n_prompt": 512, "n_gen": 16, "n_ubatch": 512, "n_batch": 2048}) == 17
    assert forward_passes({"n_prompt": 100, "n_gen": 0, "n_batch": 64}) == 2  # no n_ubatch: an old row
    assert forward_passes({"n_prompt": "512", "n_gen": 0}) == 1  # md: no batch sizes, one pass at least
    assert forward_passes({"n_prompt": 0, "n_gen": 128, "n_ubatch": 512, "n_batch": 2048}) == 128


def test_a_prompt_faster_than_its_micro_batches_allow_is_refused(tmp_path) -> None:
    """pp512 ub64 of the tiny model: 8 forward passes, at least 80 us, so at most 6.4 million tok/s;
    the real row (9,150 t/s) and one at 6 million are kept, 500 million and a pp4096 of 20 million
    (64 passes in 205 us) refused, naming the passes."""
    real = json.loads((DATA / "llamabench-0c1e57098-cpu.json").read_text())[1]
    assert (real["n_prompt"], real["n_gen"], real["n_ubatch"]) == (512, 0, 64)
    code, out = _import(tmp_path / "a", [real, _timed(real, 6e6)])
    assert code == 0 and "imported 2 results" in out, out
    code, out = _import(tmp_path / "b", [real, _timed(real, 5e8), _timed(real | {"n_prompt": 4096}, 2e7)])
    assert code == 0 and "imported 1 result " in out, out
    assert "5e+08 t/s is a repetition of 1.02 us for the prompt in 8 micro-batches" in out, out
    assert "2e+07 t/s is a repetition of 205 us for the prompt in 64 micro-batches" in out, out


def test_a_prompt_no_machine_can_read_in_its_micro_batches_is_refused(tmp_path) -> None:
    """A 377 GiB model's pp512 at ub1 is 512 forward passes, each reading 3 % of its bytes at least: at
    most 13,187.5 t/s from 160 TB/s. 50,000 t/s passed every bound (the bytes one held generated tokens
    only; 2 FLOPs a weight allow 2.5 million), ub512 (one pass) at the same speed is kept."""
    row = json.loads((DATA / "cases38-tiny-model.jsonl").read_text().splitlines()[0])
    row |= {"n_prompt": 512, "n_gen": 0, "n_ubatch": 1, "n_batch": 2048}
    row |= {
        "model_size": 404_424_858_010,
        "model_n_params": 671_030_000_000,
        "gpu_info": "",
        "backends": "CUDA",
    }
    row |= {"model_type": "deepseek2 671B Q4_K - Medium"}
    code, out = _import(tmp_path / "a", [_timed(row, 50_000.0)])
    assert code == 4 and "50000 t/s in 512 micro-batches of the prompt of a model of " in out, out
    assert "what any machine reads (at most 13187.5 t/s)" in out, out
    code, out = _import(tmp_path / "b", [_timed(row | {"n_ubatch": 512}, 50_000.0)])
    assert code == 0, out


def test_a_stored_prompt_faster_than_its_micro_batches_allow_is_skipped() -> None:
    """The same bound holds a stored record (record_check.contradiction runs the validity pass)."""
    ok = make_record("cpu", "cpu", p=512, ub=64, avg=9000.0, sd=1.0, samples_ts=[8999.0, 9001.0])
    assert contradiction(ok) is None
    fast = make_record("cpu", "cpu", p=512, ub=64, avg=5e8, sd=1.0, samples_ts=[5e8 - 1, 5e8 + 1])
    assert "micro-batches" in (contradiction(fast) or "")
