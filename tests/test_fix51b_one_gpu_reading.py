"""fix51b: which GPUs ran a llama-bench row is read once (plausible.used_gpus), by the import's bounds and
beyond-peak note and by the report's roofline (its bw-above-peak flag). Before, each read gpu_info,
devices, -sm, -dev, -ngl and backends itself: a `-sm none` row over two cards was not noted by the import
(it held the row to both cards) but flagged by the report (main_gpu's card alone); a row of two products
beyond twice the faster one's peak was noted by the import (N x the fastest) but not flagged by the report
("no single yardstick"); now both hold a row to the sum of the used cards' peaks. Real R9700 rows edited to
each shape, through the real importer and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.runs import tk
from toolkit.runtimes.llama_bench import plausible

ROOT = Path(__file__).resolve().parents[1]
SIZE = 5_027_783_488  # qwen3 8B Q4_K_M, bytes
BASE = json.loads((ROOT / "tests/data/cases/two-builds-one-file.jsonl").read_text().splitlines()[0]) | {
    "model_type": "qwen3 8B Q4_K - Medium",  # dense: a decode reads every weight
    "model_size": SIZE,
    "model_n_params": 8_190_735_360,
    "n_prompt": 0,
}  # a real R9700 Vulkan row (640 GB/s) made a qwen3 8B decode
R9700, XTX, H100 = "AMD Radeon AI PRO R9700", "AMD Radeon RX 7900 XTX", "NVIDIA H100 80GB HBM3"
ONE_R9700 = 640e9 / SIZE  # tok/s of a dense decode at one R9700's bandwidth: 127.3
H100_TS = 3350e9 / SIZE  # 666.3

# shape -> (its fields, tok/s, whether it is beyond the peak of the GPUs that ran it, how many ran it)
SHAPES = {
    "one card": ({}, 1.5 * ONE_R9700, True, 1),
    "two same cards -sm layer": ({"gpu_info": f"{R9700}, {R9700}"}, 1.5 * ONE_R9700, False, 2),
    "-sm none two cards": (
        {"gpu_info": f"{R9700}, {R9700}", "split_mode": "none"},
        1.34 * ONE_R9700,
        True,
        1,
    ),
    "-sm row": ({"gpu_info": f"{R9700}, {R9700}", "split_mode": "row"}, 2.5 * ONE_R9700, True, 2),
    "mixed models": ({"gpu_info": f"{XTX}, {R9700}"}, 2.1 * 960e9 / SIZE, True, 2),
    "mixed models within their sum": ({"gpu_info": f"{XTX}, {R9700}"}, 1.3 * 960e9 / SIZE, False, 2),
    "-dev none": ({"devices": "none"}, 2 * ONE_R9700, False, 0),
    "-ngl 0": ({"n_gpu_layers": 0}, 2 * ONE_R9700, False, 0),
    "CPU backends": ({"backends": "CPU", "gpu_info": ""}, 2 * ONE_R9700, False, 0),
    "an unknown card": ({"gpu_info": "NVIDIA GeForce RTX 4090"}, 2 * 1008e9 / SIZE, False, 1),
    "CUDA and Vulkan list one card twice": (
        {"backends": "CUDA,Vulkan", "gpu_info": f"{H100}, {H100}", "devices": "CUDA0"},
        1.5 * H100_TS,
        True,
        1,
    ),
    "a Vulkan device among CUDA's and Vulkan's": (
        {"backends": "CUDA,Vulkan", "gpu_info": f"{H100}, {H100}, {XTX} (RADV NAVI31)", "devices": "Vulkan1"},
        1.2 * H100_TS,
        False,  # Vulkan1 is the XTX or the H100: which, the row does not say (no yardstick)
        1,
    ),
}


def _row(fields: dict, ts: float, n_gen: int) -> dict:
    """BASE's tg`n_gen` at `ts` tok/s (three equal repetitions), `fields` replacing its own."""
    ns = round(n_gen * 1e9 / ts)
    timed = {"n_gen": n_gen, "avg_ts": ts, "stddev_ts": 0.0, "avg_ns": ns, "stddev_ns": 0}
    return BASE | timed | {"samples_ts": [ts] * 3, "samples_ns": [ns] * 3} | fields


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Each shape's row (a tg test of its own) imported by itself into one results folder (its import's
    output), and the report's flags of each test."""
    tmp = tmp_path_factory.mktemp("shapes")
    said = {}
    for i, (shape, (fields, ts, _beyond, _n)) in enumerate(SHAPES.items()):
        (f := tmp / f"shape{i}.jsonl").write_text(json.dumps(_row(fields, ts, 16 + i)) + "\n")
        res = tk(ROOT, "import", str(f), "--results", str(tmp / "r"), "--label", f"s{i}")
        assert res.returncode == 0, res.stderr
        said[shape] = res.stderr
    rep = tk(ROOT, "report", "--results", str(tmp / "r"), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    flags: dict[str, list[str]] = {}
    for table in json.loads(rep.stdout)["tables"]:
        for row in table["rows"]:
            flags[row["test"]] = [
                x for v in row.values() if isinstance(v, dict) for x in v.get("flags") or []
            ]
    return said, flags


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_import_note_and_the_report_flag_read_the_same_gpus(shape: str, imported) -> None:
    fields, ts, beyond, n = SHAPES[shape]
    i = list(SHAPES).index(shape)
    said, flags = imported
    noted = "kept beyond the peak" in said[shape]
    flagged = "bw-above-peak" in flags[f"tg{16 + i}"]
    assert (noted, flagged) == (beyond, beyond), (said[shape], flags[f"tg{16 + i}"])
    assert plausible.used_gpus(_row(fields, ts, 16)).count == n
