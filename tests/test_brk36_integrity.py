"""Breaker 36 (tenth session): numbers' integrity and what a customer receives, by kind.

- a figure rounded onto the threshold it was judged against, so the shown numbers say the opposite of
  the verdict beside them: compare's speedup (`1.05` faster beside `1.05` not; `0.950 regression (<
  0.950)`), its JSON (`speedup` 0.95 marked a regression), the verdict's margin against its noise
  threshold (`+3.0% < 3.0%` no winner beside `+3.0%` a win over `3.0%`), reproduce's delta against its
  band (`+5.0%` beyond `±5.0%`), the roofline share against the peak and the bandwidth floor (`100% of
  BW` flagged bw-above-peak beside `100% of BW` not): verdict.decimals_apart, one rule;
- the model a number is of named without its size or quantization (report in every format, compare,
  the csv, export-run's README);
- a row no llama-bench prints, imported as a measurement: a quantized V cache with flash attention off
  (llama.cpp makes no such context: checked on the CPU image's llama-bench 0c1e57098).

Inputs: the real CUDA H200 llama-bench row of tests/data (its sample rates set, every figure
recomputed as llama-bench computes it), the CPU image's own `-fa 1 -ctv q8_0` row; read through the
CLI. Each test fails on the code before its fix."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from tests.support.project import DATA, ROOT
from tests.support.records import make_record
from tests.support.runs import tk
from tests.support.stored import edit_stored, import_rows, matrix_project
from toolkit.analysis.verdict import decimals_apart
from toolkit.publish.repro_output import format_reproduction
from toolkit.publish.reproduce import Reproduction, compare_records

H200_ROW = json.loads((DATA / "cuda-h200-qwen3moe-30b-synthetic.jsonl").read_text().splitlines()[0])

# llama-bench 0c1e57098 (the CPU image), tiny model: `llama-bench -p 16 -n 0 -r 2 -fa 1 -ctk q8_0
# -ctv q8_0 -o jsonl` (its first row, as printed); with `-fa 0` the same command prints no row
# ("llama_bench: error: failed to create context with model").
CPU_QV_ROW = {
    "build_commit": "0c1e57098", "build_number": 0, "cpu_info": "AMD EPYC", "gpu_info": "", "backends": "CPU",
    "model_filename": "/models/tiny-qwen3moe.gguf", "model_type": "qwen3moe ?B F16", "model_size": 1595904,
    "model_n_params": 792192, "n_batch": 2048, "n_ubatch": 512, "n_threads": 2, "cpu_mask": "0x0",
    "cpu_strict": False, "poll": 50, "type_k": "q8_0", "type_v": "q8_0", "n_gpu_layers": -1, "n_cpu_moe": 0,
    "split_mode": "layer", "main_gpu": 0, "no_kv_offload": False, "flash_attn": 1, "devices": "auto",
    "tensor_split": "0.00", "tensor_buft_overrides": "none", "load_mode": "auto", "lazy_mode": "auto",
    "embeddings": False, "no_op_offload": 0, "no_host": False, "repack": True, "fit_target": 0,
    "fit_min_ctx": 0, "n_prompt": 16, "n_gen": 0, "n_depth": 0, "test_time": "2026-12-05T22:09:02Z",
    "avg_ns": 1011337, "stddev_ns": 40578, "avg_ts": 15831.9, "stddev_ts": 635.21,
    "samples_ns": [982644, 1040030], "samples_ts": [16282.5, 15384.2],
}  # fmt: skip


def _row(n_prompt: int, n_gen: int, rates: list[float]) -> dict[str, Any]:
    """The real H200 row as a test of `n_prompt` / `n_gen` tokens whose repetitions ran at `rates`
    tok/s: samples_ns, samples_ts, avg and stddev as llama-bench computes them."""
    r = dict(H200_ROW, n_prompt=n_prompt, n_gen=n_gen)
    tokens = n_prompt + n_gen
    ns = [round(tokens * 1e9 / x) for x in rates]
    ts = [tokens * 1e9 / t for t in ns]

    def mean_sd(xs: list[float]) -> tuple[float, float]:
        m = sum(xs) / len(xs)
        return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))

    (avg, sd), (avg_ns, sd_ns) = mean_sd(ts), mean_sd([float(t) for t in ns])
    r.update(
        samples_ns=ns, samples_ts=[round(x, 3) for x in ts], avg_ts=round(avg, 6), stddev_ts=round(sd, 6)
    )
    r.update(avg_ns=round(avg_ns), stddev_ns=round(sd_ns))
    return r


def _tight(rate: float) -> list[float]:
    """Three repetitions at `rate` tok/s, 0.01 % apart: a noise far below every threshold."""
    return [rate, rate * 1.0001, rate * 0.9999]


def _imports(tmp_path: Path, sides: dict[str, list[dict[str, Any]]]) -> Path:
    """A project whose results `r` hold one import per label of `sides`, each under its own digest."""
    tmp = matrix_project(tmp_path)
    for i, (label, rows) in enumerate(sides.items()):
        import_rows(tmp, rows, label, "--digest", "sha256:" + f"{i + 10:x}" * 64)
    return tmp


# ---------------------------------------------------------------- figures rounded onto their threshold


def test_decimals_apart_keeps_a_figure_on_its_side_of_its_limit():
    assert decimals_apart(0.9496, 0.95, 2) == 4  # 0.950 is still 0.950
    assert decimals_apart(1.0504, 1.05, 2) == 4
    assert decimals_apart(2.96, 3.0, 1) == 2
    assert decimals_apart(0.5, 0.95, 2) == 2  # far apart: as asked
    assert decimals_apart(0.95, 0.95, 2) == 2  # equal: as asked
    assert decimals_apart(math.nan, 0.95, 2) == 2


def test_compare_shows_no_speedup_rounded_onto_its_threshold(tmp_path):
    """Before: `1.05` called faster beside `1.05` that is not (1.0504 and 1.0496 at a 5 % threshold),
    and `0.950 regression (< 0.950)` (0.9496: three decimals were still the limit's); the JSON's
    `speedup` was rounded to 4 decimals (0.94996 read 0.95 beside `regression: true`)."""
    a = [_row(512, 0, _tight(10000)), _row(2048, 0, _tight(10000)), _row(4096, 0, _tight(10000))]
    b = [_row(512, 0, _tight(10504)), _row(2048, 0, _tight(10496)), _row(4096, 0, _tight(9496))]
    tmp = _imports(tmp_path, {"A": a, "B": b})
    res = tk(tmp, "compare", "A", "B", "--results", "r", "--format", "text")
    assert res.returncode == 6, res.stdout + res.stderr  # pp4096 is a regression
    lines = {ln.split()[0]: ln for ln in res.stdout.splitlines() if ln.startswith("pp")}
    assert "1.0504" in lines["pp512"] and "1.0496" in lines["pp2048"], res.stdout
    assert "0.9496" in lines["pp4096"], res.stdout
    assert "regression (< 0.9500)" in res.stdout, res.stdout
    res = tk(tmp, "compare", "A", "B", "--results", "r", "--json")
    rows = {r["test"]: r for r in json.loads(res.stdout)["result"]["rows"]}
    for r in rows.values():  # the JSON's figure is the one judged: below its limit exactly when marked
        assert r["regression"] == (r["speedup"] < 0.95), r


def test_the_verdicts_margin_is_never_shown_equal_to_the_threshold_it_lost_or_won_against(tmp_path):
    """Before: `no clear winner: D +3.0% over A is within noise (threshold 3.0%)` (a 2.96 % margin) and
    `D wins, +3.0% over A ... (noise threshold 3.0%)` (3.04 %) in one report; the routing rule said
    `(+3.0% < 3.0%)`."""
    a = [_row(512, 0, _tight(10000)), _row(0, 128, _tight(200))]
    d = [_row(512, 0, _tight(10296)), _row(0, 128, _tight(206.08))]
    tmp = _imports(tmp_path, {"A": a, "D": d})
    res = tk(tmp, "report", "--results", "r", "--format", "github")
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert "+3.0% < 3.0%" not in text and "(threshold 3.0%)" not in text, text[:3000]
    assert "+2.96% over A" in text and "(threshold 3.00%)" in text, text[:3000]
    assert "wins, +3.04% over A" in text and "(noise threshold 3.00%)" in text, text[:3000]
    assert "(+2.96% < 3.00%)" in text, text[:3000]


def test_reproduce_shows_no_delta_equal_to_the_band_it_broke():
    """Before: `+5.0%  ±5.0%  beyond noise` (+5.04 % against a 5 % band) beside `+5.0%  ±5.0%  ok`."""
    rec = [
        make_record("cpu", "cpu", p=512, avg=1000.0, sd=0.001),
        make_record("cpu", "cpu", n=128, avg=100.0),
    ]
    again = [
        make_record("cpu", "cpu", p=512, avg=1050.4, sd=0.001),
        make_record("cpu", "cpu", n=128, avg=104.96),
    ]
    rows = compare_records(rec, again, 5.0)
    text = format_reproduction(Reproduction("a", "b", Path("f"), Path("r"), 5.0, rows=rows), "text")
    beyond = next(ln for ln in text.splitlines() if "pp512" in ln)
    within = next(ln for ln in text.splitlines() if "tg128" in ln)
    assert "+5.04%" in beyond and "±5.00%" in beyond and "beyond noise" in beyond, text
    assert "+4.96%" in within and "±5.00%" in within and within.rstrip().endswith("ok"), text


def test_a_roofline_share_is_never_shown_on_the_peak_it_is_flagged_against(tmp_path):
    """Before: two H200 decodes at 99.85 % and 100.15 % of the card's bandwidth both read `100% of BW`,
    one flagged bw-above-peak (held out of the verdict), the other not; the csv said 99.8/100.2 but the
    JSON's fraction was rounded to 4 decimals."""
    at_peak = 2000 / 0.83634  # the real tg128 row's rate at 100 % of the H200's 4.8 TB/s (10.8 % active)
    tmp = _imports(
        tmp_path,
        {"Hi": [_row(0, 128, _tight(at_peak * 1.0015))], "Lo": [_row(0, 128, _tight(at_peak * 0.9985))]},
    )
    res = tk(tmp, "report", "--results", "r", "--format", "github")
    row = next(ln for ln in res.stdout.splitlines() if ln.startswith("| tg128"))
    assert "100.1% of BW" in row and "99.8% of BW" in row, row
    res = tk(tmp, "report", "--results", "r", "--format", "json")
    cells = [
        v
        for t in json.loads(res.stdout)["tables"]
        for r in t["rows"]
        for v in r.values()
        if isinstance(v, dict)
    ]
    for c in cells:
        assert ("bw-above-peak" in c["flags"]) == (c["roofline"]["fraction"] > 1), c
    res = tk(tmp, "report", "--results", "r", "--format", "csv")  # the csv's figure as judged, not rounded
    pcts = {float(r["roofline_pct"]): r["flags"] for r in csv.DictReader(io.StringIO(res.stdout))}
    assert sorted(round(p, 2) for p in pcts) == [99.85, 100.15], pcts
    assert all((p > 100) == ("bw-above-peak" in flags) for p, flags in pcts.items()), pcts


# ---------------------------------------------------------------- the model a number is of


def test_every_customer_output_names_the_models_size_and_quantization(tmp_path):
    """Before: `model: qwen3-30b-a3b-synth-Q4_K_M.gguf (qwen3-30b-a3b-synth-Q4_K_M.gguf, sha256 not
    recorded)` in the report (every format) and compare: no size, no quantization, no parameters; the
    csv had no model file or size column; export-run's README named the model only further down, in
    bytes, without its type."""
    tmp = _imports(tmp_path, {"A": [_row(512, 0, _tight(10000))], "B": [_row(512, 0, _tight(10100))]})
    said = "17.28 GiB, qwen3moe 30B.A3B Q4_K - Medium"
    for fmt in ("text", "github", "json", "html"):
        out = tmp / f"report.{fmt}"
        res = tk(tmp, "report", "--results", "r", "--format", fmt, "-o", str(out))
        assert res.returncode == 0, res.stderr
        assert said in out.read_text(), fmt
    res = tk(tmp, "compare", "A", "B", "--results", "r", "--format", "github")
    assert res.stdout.count(said) == 2, res.stdout  # each side's model
    res = tk(tmp, "report", "--results", "r", "--format", "csv")
    (row, *_) = csv.DictReader(io.StringIO(res.stdout))
    assert row["model_file"] == "qwen3-30b-a3b-synth-Q4_K_M.gguf", row
    assert row["model_bytes"] == "18550716416" and row["model_type"] == "qwen3moe 30B.A3B Q4_K - Medium", row
    run = next(
        r for r in json.loads(tk(tmp, "report", "--results", "r", "--json").stdout)["provenance"]["runs"]
    )
    # run in the project: export-run copies its matrix.yaml and Dockerfile.templates/
    res = tk(ROOT, "export-run", run, "--results", str(tmp / "r"), "-o", str(tmp / "exp"))
    assert res.returncode == 0, res.stdout + res.stderr
    head = (tmp / "exp" / "README.md").read_text().split("## Images")[0]
    assert (
        f"- model: qwen3-30b-a3b-synth-Q4_K_M.gguf (qwen3-30b-a3b-synth-Q4_K_M.gguf, sha256 not recorded, {said})"
        in head
    ), head


# ---------------------------------------------------------------- rows no llama-bench prints


def test_a_quantized_v_cache_with_flash_attention_off_is_no_measurement(tmp_path):
    """Before: a row of `-fa 0 -ctv q8_0` (the real `-fa 1` row with flash_attn 0 or false) was
    imported and shown; llama.cpp refuses that context and llama-bench prints no row. The real row
    (fa 1), a quantized K cache with fa 0 and a quantized V at fa auto import as before."""
    tmp = matrix_project(tmp_path)
    for fa in (0, False, "0"):
        src = tmp / f"fa-{fa}.jsonl"
        src.write_text(json.dumps(dict(CPU_QV_ROW, flash_attn=fa)) + "\n")
        res = tk(tmp, "import", "--results", "r", "--label", "qv", str(src))
        assert res.returncode == 4, res.stdout + res.stderr
        assert "type_v is 'q8_0' (a quantized V cache) with flash_attn off" in res.stderr, res.stderr
    ok = [CPU_QV_ROW, dict(CPU_QV_ROW, flash_attn=0, type_v="f16"), dict(CPU_QV_ROW, flash_attn=-1)]
    for i, row in enumerate(ok):
        import_rows(tmp, [dict(row, test_time=f"2026-12-05T22:09:0{i}Z")], f"ok{i}")
    # a stored record edited so (its flash_attn and its raw row's; its figures kept) is skipped by every reader
    edit_stored(tmp, lambda r: (r.update(flash_attn=0), r["raw"].update(flash_attn=0)), "ok0")
    res = tk(tmp, "report", "--results", "r", "--format", "json")
    assert "with flash_attn off" in res.stderr, res.stderr
    cells = [
        v
        for t in json.loads(res.stdout)["tables"]
        for r in t["rows"]
        for v in r.values()
        if isinstance(v, dict)
    ]
    assert len(cells) == 2, cells


def test_a_first_sample_faster_than_the_rest_is_no_warm_up():
    """Breaker 36's leftover, a flag where nothing happened: the real lavapipe pp1024 ub512 record
    (tests/data/results-vulkan-lavapipe.jsonl) starts 336 t/s, then 240-272: flagged `warmup-outlier`,
    which is a slow first sample. Only a first sample below the rest is one; the H200's slow first
    pp512 sample (8,999 beside ~12,850 t/s) still is."""
    from toolkit.analysis.facts import warmup_outlier

    fast_first = [336.409, 243.469, 256.987, 259.785, 239.893, 261.759, 254.245, 272.2, 259.564, 254.177]
    r = make_record("vulkan", "vulkan", p=1024, avg=263.8, sd=27.1)
    r.samples_ts = fast_first
    assert not warmup_outlier(r)
    r.samples_ts = [8999.0, 12840.0, 12851.0, 12845.0]
    assert warmup_outlier(r)
    r.samples_ts = [150.0, *fast_first[1:]]  # the same run with a slow first sample
    assert warmup_outlier(r)


def test_reproduce_of_a_tiny_stand_in_says_its_numbers_are_smoke_data():
    """Newcomer 36: `reproduce` of the tiny model's run printed a -70 % delta (on a busy host) with no
    word that a 1.6 MB random-weight model's tok/s are smoke signals, which the report of the same
    records says above its tables. The report's caveats now head reproduce's table and its JSON."""
    from toolkit.publish.repro_output import reproduction_json

    def tiny(r):
        r.model.size_bytes, r.raw["model_size"] = 1_611_104, 1_595_904  # the file, llama-bench's tensors
        return r

    rec = [tiny(make_record("cpu", "cpu", p=512, avg=1000.0, model="tiny-qwen3moe"))]
    again = [tiny(make_record("cpu", "cpu", p=512, avg=300.0, model="tiny-qwen3moe"))]
    rep = Reproduction("a", "b", Path("f"), Path("r"), 5.0, rows=compare_records(rec, again, 5.0))
    text = format_reproduction(rep, "text")
    assert "caveat: smoke-test data: tiny-qwen3moe is a tiny stand-in model" in text, text
    assert text.index("caveat:") < text.index("pp512"), text
    assert reproduction_json(rep)["caveats"] == [
        "smoke-test data: tiny-qwen3moe is a tiny stand-in model; its tok/s show the path works, they are not "
        "a basis for routing"
    ]
    real = [make_record("cpu", "cpu", p=512, avg=1000.0)]
    real[0].model.size_bytes = 17 * 2**30
    plain = Reproduction("a", "b", Path("f"), Path("r"), 5.0, rows=compare_records(real, real, 5.0))
    assert "caveat" not in format_reproduction(plain, "text") and reproduction_json(plain)["caveats"] == []
