"""brk50: the card bound and the import's beyond-peak note (fix50b) against the report's own reading of
which GPUs ran a row, and against a hostile gpu_info. Real rows through the real importer and report."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.runs import tk
from toolkit.runtimes.llama_bench import plausible

ROOT = Path(__file__).resolve().parents[1]
ROW = json.loads(
    (ROOT / "tests" / "data" / "cases" / "two-builds-one-file.jsonl").read_text().splitlines()[0]
)  # a real R9700 Vulkan row (640 GB/s)
QWEN3_8B = {
    "model_type": "qwen3 8B Q4_K - Medium",
    "model_size": 5_027_783_488,
    "model_n_params": 8_190_735_360,
}


def _tg(ts: float, n_gen: int, **kw: object) -> dict:
    """A dense qwen3 8B tg`n_gen` of ROW's machine at `ts` tok/s (three equal repetitions), `kw` replacing fields."""
    ns = round(n_gen * 1e9 / ts)
    timed = {"avg_ts": ts, "stddev_ts": 0.0, "avg_ns": ns, "stddev_ns": 0, "samples_ts": [ts] * 3}
    return ROW | QWEN3_8B | {"n_prompt": 0, "n_gen": n_gen, "samples_ns": [ns] * 3} | timed | kw


def test_a_row_with_no_layers_on_the_gpu_is_the_hosts_as_the_report_reads_it(tmp_path: Path) -> None:
    """F3: a `-ngl 0` decode (the CPU reads the weights) at 250 tok/s, 2x the R9700 its gpu_info names, was
    named by the import as beyond the GPU's peak, "`toolkit report` flags such a cell ... and holds it
    out"; the report holds it to no GPU (roofline: "no layers on the GPU") and flags nothing. Now it is
    held as `-dev none` is: the host's (HOST_BYTES_S), unnamed, as the report reads it."""
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps(_tg(250.0, 16, n_gpu_layers=0)) + "\n" + json.dumps(_tg(250.0, 32)) + "\n")
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "n")
    assert res.returncode == 0, res.stderr
    notes = [ln for ln in res.stderr.splitlines() if "kept beyond the peak of the GPU" in ln]
    assert len(notes) == 1 and "rows.jsonl:2: " in notes[0], res.stderr
    rep = tk(ROOT, "report", "--results", str(tmp_path / "r"), "--format", "json")
    rows = [row for table in json.loads(rep.stdout)["tables"] for row in table["rows"]]
    flags = {row["test"]: next(v["flags"] for v in row.values() if isinstance(v, dict)) for row in rows}
    assert "bw-above-peak" not in flags["tg16"] and "bw-above-peak" in flags["tg32"], flags
    assert "largest host" in plausible.held_by(_tg(250.0, 16, n_gpu_layers="0"))[2]


def test_a_gpu_info_of_80000_names_is_looked_up_once(monkeypatch) -> None:
    """F4: _named_peaks (now _card, over the devices used_gpus read) looked up every name of a row's gpu_info (80,000 copies of `NVIDIA H200` in 1 MB:
    80,000 lookups, each row, twice: the validity pass and the import's note), and every one of a list
    whose first name has no figures. Now each distinct name once, none after the first without figures."""
    seen: list[str] = []
    real = plausible.spec_by_name
    monkeypatch.setattr(plausible, "spec_by_name", lambda name: seen.append(name) or real(name))
    assert plausible._card(["NVIDIA H200"] * 80_000).product == "80000 x NVIDIA H200"
    assert seen == ["NVIDIA H200"]
    seen.clear()
    assert plausible._card([f"GPU {i}" for i in range(1000)]) is None
    assert len(seen) == 1
