"""Round 23 (integrity): the kinds an outside review named ("physically impossible values marked valid,
flags where nothing happened"), each held as a rule: a stored flag held to the record's own fields
(results.flag_claims), a power cap held to the board (telemetry_flags.figures_problem), a record's
time of measurement held to its image and to when it was written (results.time_check), a vLLM result's
date and latency spread (time_check.local_date_problem, vllm output.serve_duration_problem), a stored
vLLM serve result held to its import's rules (record_check), a MoE of unknown share held to the
fewest weights any MoE reads (roofline.assess), and a row naming more GPUs than its backend registers
(core.backends.device_count_problem). Each test fails on the code before the fix. Inputs: the real
files of tests/data (the H200 `toolkit measure` rows, a CPU bench record, a vLLM 0.16.0 serve result),
edited as a hand or another tool would, read through the CLI as a user does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.support.project import DATA
from tests.support.runs import tk
from tests.support.stored import edit_stored, h200_rows, import_rows, matrix_project


def _report(tmp: Path, *extra: str) -> Any:
    res = tk(tmp, "report", "--results", "r", *extra)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


DERIVED = [
    "cpu-fallback",
    "bw-above-peak",
    "compute-above-peak",
    "warmup-outlier",
    "software-gpu",
    "concurrent",
]


def test_stored_flags_the_report_raises_itself_are_unsupported_where_the_record_shows_nothing(tmp_path):
    """An idle H200's records edited to carry cpu-fallback, bw-above-peak, compute-above-peak, ... (flags
    the report derives from a record's own fields, which no writer stores): before, each was shown as
    stored, and the above-peak ones held every cell ("every number shown is flagged (bw-above-peak,
    compute-above-peak)"). Now each is `flag-unsupported:`, holding nothing; ub-clamped stays where
    the record's own n_ubatch is clamped (pp512 ub2048)."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    edit_stored(tmp, lambda r: r.update(flags=[*DERIVED, "ub-clamped", "runs-disagree"]))
    text = _report(tmp).stdout
    assert "every number shown is flagged" not in text, text
    for f in DERIVED:
        assert f"flag-unsupported:{f}" in text, (f, text)
    assert "flag-unsupported:runs-disagree" in text, text
    row = next(ln for ln in text.splitlines() if ln.startswith("| pp512 ub2048"))
    assert "ub-clamped (effective ub512)" in row and "flag-unsupported:ub-clamped" not in row, row
    row = next(ln for ln in text.splitlines() if ln.startswith("| pp512 ub512"))
    assert "flag-unsupported:ub-clamped" in row, row
    doc = json.loads(_report(tmp, "--format", "json").stdout)
    said = json.dumps(doc)
    assert "not decided (above-peak flags)" not in said, said[:2000]


def test_a_writers_flag_its_record_contradicts_is_unsupported_and_a_real_one_stays(tmp_path):
    """no-samples beside 5 samples, no-build-commit beside build_commit, no-batch-sizes beside n_batch,
    no-matrix-cores on a CUDA H200, wrong-output with no failed canary: before, shown as stored, and
    wrong-output left the image out of the verdict ("not decided (no results)"). An md import's own
    no-samples stays."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    import_rows(tmp, h200_rows("contended.jsonl"), "busy")
    claims = ["no-samples", "no-build-commit", "no-batch-sizes", "no-matrix-cores", "wrong-output"]
    edit_stored(tmp, lambda r: r.update(flags=claims), "alone")
    text = _report(tmp).stdout
    for f in claims:
        assert f"flag-unsupported:{f}" in text, (f, text)
    assert "not decided (no results)" not in text, text
    md = matrix_project(tmp_path / "md")
    import_rows(md, DATA / "llamabench-0c1e57098-cpu.md", "md")
    text = _report(md).stdout
    assert "no-samples" in text and "flag-unsupported:no-samples" not in text, text


def _cap(rows: list[dict[str, Any]], watts: float) -> list[dict[str, Any]]:
    for r in rows:
        for g in r["toolkit_telemetry"]["gpus"].values():
            g.update(cap_w=watts, cap_default_w=watts)
    return rows


def test_a_power_cap_no_board_of_the_named_gpu_takes_is_left_out_at_import_and_skipped_stored(tmp_path):
    """An H200 (700 W) block naming a 10 kW cap (round 20 left "a block's cap_w not held to the board"):
    before, imported and shown with its valid tok/J. Now the block is left out at import (speed kept),
    and a stored one skipped naming the cap; the real 700 W blocks read as before."""
    tmp = matrix_project(tmp_path)
    out = import_rows(tmp, _cap(h200_rows("alone.jsonl"), 10000.0), "cap")
    assert "cap_w is 10000.0" in out, out
    text = _report(tmp).stdout
    assert "13331.22" in text and "38.2" not in text, text
    stored = matrix_project(tmp_path / "stored")
    import_rows(stored, h200_rows("alone.jsonl"), "h200")
    assert "38.2" in _report(stored).stdout
    edit_stored(stored, lambda r: next(iter(r["telemetry"]["gpus"].values())).update(cap_default_w=9000.0))
    rep = _report(stored)
    assert "skipped a record that contradicts itself" in rep.stderr and "cap_default_w" in rep.stderr, (
        rep.stderr
    )


def _bench_folder(tmp: Path) -> Path:
    (tmp / "r" / "x").mkdir(parents=True)
    shutil.copy(DATA / "results-cpu-a.jsonl", tmp / "r" / "x" / "bench.jsonl")
    return tmp


def test_a_test_time_before_its_image_was_built_or_after_its_record_was_written_is_skipped(tmp_path):
    """A `toolkit bench` record (image built 2026-11-29 16:59, record written 17:07) edited to a
    test_time of 2025-01-02, or of 2026-12-04: before, shown as `measured: 2025-01-02 ...` / `2026-12-04`.
    Now skipped, saying which time it contradicts; the record as written reads as before."""
    ok = _bench_folder(matrix_project(tmp_path / "ok"))
    assert "measured: 2026-11-29 17:06:28 UTC" in _report(ok).stdout
    early = _bench_folder(matrix_project(tmp_path / "early"))
    edit_stored(early, lambda r: r["raw"].update(test_time="2025-01-02T00:00:00Z"))
    rep = _report(early)
    assert "2025-01-02" not in rep.stdout and "lies before its image was built" in rep.stderr, rep.stderr
    late = _bench_folder(matrix_project(tmp_path / "late"))
    edit_stored(late, lambda r: r["raw"].update(test_time="2026-12-04T00:00:00Z"))
    rep = _report(late)
    assert "2026-12-04" not in rep.stdout and "lies after the record was written" in rep.stderr, rep.stderr


SERVE = DATA / "vllm-0.16.0-serve.json"


def _serve(tmp: Path, **edit: Any) -> Path:
    d = json.loads(SERVE.read_text())
    d.update(edit)
    path = tmp / "serve-128-32-c2.json"
    path.write_text(json.dumps(d))
    return path


def test_a_vllm_date_before_vllm_or_beyond_any_zone_is_refused(tmp_path):
    """A vLLM serve result dated 2126 or 2010: before, imported and shown as `measured: 2126-11-29 ...
    local time`. Now refused naming the date; a stored one edited so is skipped."""
    tmp = matrix_project(tmp_path)
    for date in ("21261129-171502", "20101129-171502"):
        res = tk(tmp, "import", "--results", "r", "--label", "v", str(_serve(tmp, date=date)))
        assert res.returncode != 0 and f"date '{date}'" in res.stderr, res.stdout + res.stderr
    import_rows(tmp, _serve(tmp), "v")
    assert "2026-11-29 17:15:02 local time" in _report(tmp).stdout
    edit_stored(tmp, lambda r: r["raw"].update(date="20301129-171502"))
    rep = _report(tmp)
    assert "skipped a record that contradicts itself: date '20301129-171502'" in rep.stderr, rep.stderr


def test_a_vllm_latency_spread_wider_than_its_duration_allows_is_refused(tmp_path):
    """std_ttft_ms of 1,000,000 ms in a 4.182 s benchmark: before, imported. Every TTFT lies within the
    duration, so numpy's std of them is at most half of it."""
    tmp = matrix_project(tmp_path)
    res = tk(tmp, "import", "--results", "r", "--label", "v", str(_serve(tmp, std_ttft_ms=1e6)))
    assert res.returncode != 0 and "std_ttft_ms 1e+06 is more than half of duration" in res.stderr, res.stderr


def test_a_stored_vllm_serve_result_is_held_to_the_rules_its_import_applied(tmp_path):
    """The stored result of an imported serve run edited to a median TTFT of 99,999 ms (its benchmark
    took 4.182 s): before, shown as `TTFT 99999.0 ms`. Now skipped as its import would have refused it."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, _serve(tmp), "v")
    edit_stored(tmp, lambda r: r["raw"].update(median_ttft_ms=99999.0, p50_ttft_ms=99999.0))
    rep = _report(tmp)
    assert "99999" not in rep.stdout and "its result:" in rep.stderr, rep.stdout + rep.stderr


def _faster(rows: list[dict[str, Any]], f: float, gpu_info: str | None = None) -> list[dict[str, Any]]:
    """The decode rows of `rows`, f times faster (samples, means and times agreeing), telemetry dropped."""
    out = []
    for r in rows:
        r.pop("toolkit_telemetry", None)
        r.pop("toolkit_flags", None)
        if not r["n_gen"]:
            continue
        r.update(avg_ts=r["avg_ts"] * f, stddev_ts=r["stddev_ts"] * f, stddev_ns=0)
        r.update(samples_ts=[x * f for x in r["samples_ts"]], samples_ns=[x / f for x in r["samples_ns"]])
        r["avg_ns"] = int(sum(r["samples_ns"]) / len(r["samples_ns"]))
        if gpu_info:
            r["gpu_info"] = gpu_info
        out.append(r)
    return out


def test_a_decode_beyond_the_gpus_bandwidth_at_any_moe_share_is_above_peak(tmp_path):
    """The H200's tg128 of a `qwen3moe ?B F16` (8.16 GB) made 60x faster: 29,704 tok/s reads at least
    7.3 TB/s at the fewest weights any MoE reads (3 %), beyond the H200's 4.8 TB/s. Before: no roofline
    (share unknown), shown unflagged. The measured 495 tok/s stays unflagged."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, _faster(h200_rows("alone.jsonl"), 60.0), "fast")
    text = _report(tmp).stdout
    rows = [ln for ln in text.splitlines() if ln.startswith("| tg128")]
    assert rows and all("bw-above-peak" in ln for ln in rows), text
    real = matrix_project(tmp_path / "real")
    import_rows(real, _faster(h200_rows("alone.jsonl"), 1.0), "real")
    assert "above-peak" not in _report(real).stdout


def test_a_row_naming_more_gpus_than_its_backend_registers_is_refused(tmp_path):
    """The same decode rows naming 64 H200s in one CUDA row (llama.cpp registers at most 16 CUDA
    devices): before, imported, the roofline spread over 64 cards ("no roofline for multi-GPU"). Two
    H200s import as before."""
    tmp = matrix_project(tmp_path)
    src = tmp / "many.jsonl"
    src.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in _faster(h200_rows("alone.jsonl"), 1.0, ", ".join(["NVIDIA H200"] * 64))
        )
    )
    res = tk(tmp, "import", "--results", "r", "--label", "many", str(src))
    assert res.returncode != 0 and "gpu_info names 64 devices" in res.stderr, res.stdout + res.stderr
    import_rows(tmp, _faster(h200_rows("alone.jsonl"), 1.0, "NVIDIA H200, NVIDIA H200"), "two")


def _half_speed() -> list[dict[str, Any]]:
    """The idle H200's rows at half the speed (samples, means and times agreeing), no telemetry."""
    slow = []
    for r in h200_rows("alone.jsonl"):
        r.pop("toolkit_telemetry")
        r.pop("toolkit_flags", None)
        r.update(avg_ts=r["avg_ts"] / 2, stddev_ts=r["stddev_ts"] / 2, avg_ns=r["avg_ns"] * 2)
        r.update(samples_ts=[x / 2 for x in r["samples_ts"]], samples_ns=[x * 2 for x in r["samples_ns"]])
        r.update(stddev_ns=r["stddev_ns"] * 2)
        slow.append(r)
    return slow


def test_above_peak_flags_added_by_hand_no_longer_hide_a_real_regression_in_compare(tmp_path):
    """The H200 run, and the same rows at half the speed with bw-above-peak / compute-above-peak added to
    its stored records: before, `compare` held all six tests ("no regression beyond 5%", exit 0); the
    speeds are 3-6 % of the H200's peak, so the flags are unsupported and the 2x regression counts."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    import_rows(tmp, _half_speed(), "slow")
    edit_stored(tmp, lambda r: r.update(flags=["bw-above-peak", "compute-above-peak"]), "slow")
    res = tk(tmp, "compare", "alone", "slow", "--results", "r")
    assert res.returncode == 6 and "6 regressions beyond 5%" in res.stdout, res.stdout + res.stderr


def test_every_flag_name_the_report_knows_is_held_to_the_record_by_one_rule():
    """Each name of FLAG_HELP is one the readers derive (flag_claims.DERIVED_FLAGS), a writer's claim the
    record's fields are held to (WRITTEN_CLAIMS), a telemetry flag held to its block (checked_flags'
    evidence), or flag-unsupported itself (stale-build, once left unheld, is a written claim since round 28:
    held to image.stale and its inputs keys): a new flag must say which, or a stored one would be shown
    unheld."""
    from toolkit.analysis.flag_help import FLAG_HELP
    from toolkit.results.flag_claims import DERIVED_FLAGS, WRITTEN_CLAIMS
    from toolkit.results.telemetry_check import _EVIDENCE

    unchecked = {"flag-unsupported"}
    kinds = [set(DERIVED_FLAGS), set(WRITTEN_CLAIMS), set(_EVIDENCE), unchecked]
    for name in FLAG_HELP:
        assert sum(name in k for k in kinds) == 1, name


def test_a_telemetry_flag_on_a_record_without_any_telemetry_block_holds_nothing(tmp_path):
    """The idle H200's stored records with their telemetry block removed and host-busy / gpu-shared
    added (round 20 kept these as stored): before, compare held a real 2x regression and the report's
    verdict rested on them. Flags and their block are stored together (schema 2): with no block, nothing
    shows them, so each is `flag-unsupported:`."""
    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("alone.jsonl"), "alone")
    import_rows(tmp, _half_speed(), "slow")
    edit_stored(tmp, lambda r: r.update(flags=["host-busy", "gpu-shared"]), "slow")
    text = _report(tmp).stdout
    assert "flag-unsupported:host-busy" in text and "flag-unsupported:gpu-shared" in text, text
    res = tk(tmp, "compare", "alone", "slow", "--results", "r")
    assert res.returncode == 6 and "6 regressions beyond 5%" in res.stdout, res.stdout + res.stderr
