"""cases40's hunt for physically impossible values imported as valid: a decode faster than any machine
reads its model's bytes (plausible.MAX_BYTES_S), held by the one validity pass for every format and
whether or not the row names its GPU (an md table names none: no roofline, so nothing else held it).
Real files through the real importer and CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.runs import tk

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"

_MD = """| model                          |       size |     params | backend    | ngl |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | --------------: | -------------------: |
| qwen3moe 30B.A3B Q4_K - Medium |  16.09 GiB |    30.53 B | Vulkan     |  99 |           tg128 |       5000.00 ± 1.00 |
| deepseek2 671B Q4_K - Medium   | 376.65 GiB |   671.03 B | ROCm       |  99 |           tg128 |      50000.00 ± 1.00 |

build: 0c1e57098 (7000)
"""


def test_an_md_decode_no_machine_can_read_is_refused(tmp_path):
    """Reproducer: a 377 GiB model decoding 50,000 tok/s (600 TB/s read at 3 % of its weights a token)
    was imported as an ok result with no flag (md has no gpu_info: `no roofline`). The 16 GiB model at
    5,000 tok/s is kept: 16 GPUs of 8 TB/s could read it (the report's roofline holds it to its GPU)."""
    src = tmp_path / "big.md"
    src.write_text(_MD)
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 0 and "imported 1 result " in res.stdout, res.stdout + res.stderr
    assert "big.md:4: 50000 t/s generating 128 tokens of a model of " in res.stderr, res.stderr
    assert "what any machine reads (at most 13187.5 t/s); row left out" in res.stderr, res.stderr


@pytest.mark.parametrize("gpu_info", ["", "NVIDIA H200"])
def test_a_jsonl_pp_tg_decode_no_machine_can_read_is_refused(tmp_path, gpu_info):
    """The same bound on a pp512+tg128 row (its rate counts 640 tokens, 128 of them generated), named GPU
    or not: every path through the validity pass holds it."""
    row = json.loads((DATA / "cases38-tiny-model.jsonl").read_text().splitlines()[0])
    ts, n = 300_000.0, 640
    ns = round(n * 1e9 / ts)
    row |= {"n_prompt": 512, "n_gen": 128, "avg_ts": ts, "stddev_ts": 0.0, "avg_ns": ns, "stddev_ns": 0}
    row |= {"samples_ts": [ts] * 3, "samples_ns": [ns] * 3, "gpu_info": gpu_info, "backends": "CUDA"}
    row |= {"model_size": 404_424_858_010, "model_n_params": 671_030_000_000}
    row |= {"model_type": "deepseek2 671B Q4_K - Medium"}
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps(row) + "\n")
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 4, res.stdout + res.stderr
    # brk49: held to its devices; fix50b: a known card's to at most CARD_SLACK x its peak (25 TB/s caps the H200's)
    who = "the 1 GPU device the row names (NVIDIA H200, at most 10 x its peak)" if gpu_info else "any machine"
    assert "line 1: 300000 t/s generating 128 tokens" in res.stderr and f"what {who} reads" in res.stderr


@pytest.mark.parametrize(
    "name", ["cuda-h200-qwen3moe-30b-synthetic.jsonl", "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl"]
)
def test_real_h200_rows_are_all_kept(tmp_path, name):
    """Real llama-bench output of a full-size 30B-A3B on an H200 is below every bound: all 8 rows kept."""
    res = tk(ROOT, "import", str(DATA / name), "--results", str(tmp_path / "r"), "--label", "h200")
    assert res.returncode == 0 and "imported 8 results" in res.stdout and "refused" not in res.stderr, (
        res.stdout + res.stderr
    )


@pytest.mark.parametrize("path", ["/m/tiny-qwen3moe.gguf", "/m/big-00001-of-00003.gguf"])
def test_a_row_of_a_model_larger_than_its_file_is_refused(tmp_path, path):
    """Reproducer: a stored record whose row's model_size (its tensors' bytes) is twice its model file's
    size was shown as measured: the row is of another model. The first part of a split model
    (gguf-split's `-00001-of-00003.gguf`) is kept: llama.cpp loads every part from it."""
    res = tk(
        ROOT, "import", str(DATA / "cases38-tiny-model.jsonl"), "--results", str(tmp_path), "--label", "x"
    )
    assert res.returncode == 0, res.stderr
    (f,) = tmp_path.glob("*/bench.jsonl")
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[0]["raw"]["model_size"] = 2 * recs[0]["model"]["size_bytes"]  # 2 bytes a weight: a possible GGUF
    recs[0]["model"]["path"] = path
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for p in tmp_path.glob("index*"):
        p.unlink()
    page = tk(ROOT, "report", "--results", str(tmp_path), "--format", "github")
    if "-of-" in path:
        assert "2 records read, 2 used" in page.stdout and "skipped" not in page.stderr, page.stderr
        return
    assert "1 record read, 1 used" in page.stdout and "1 unreadable or invalid" in page.stdout, page.stdout
    assert "model_size 3200000 bytes of its row is more than its model file's 1600000 bytes" in page.stderr


def test_a_sample_of_zero_tokens_a_second_is_refused(tmp_path):
    """Reproducer: samples_ts [0, 110, 220] beside avg_ts 110 ± 1.1 was imported as ok (the validity
    pass reads samples only when every one is above 0, so it held the row to samples_ns instead) and the
    report gave the cell a min of 0.0 tok/s: a repetition that yielded no token is no sample."""
    row = json.loads((DATA / "cases38-tiny-model.jsonl").read_text().splitlines()[1])
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps(row | {"samples_ts": [0.0, 110.0, 220.0]}) + "\n")
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 4 and "samples_ts[0] is 0.0: not a measurement" in res.stderr, res.stderr
