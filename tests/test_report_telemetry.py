"""What the report, verdict, plots, compare and reproduce make of the telemetry on records (issue 22).

Records are the H200 case's (tests/data/h200-telemetry: real llama-bench rows and a real NVML trace
at 50 ms) as `toolkit bench` stores them (tests.support.telemetry_fakes.h200_bench_records: each row's test
window summarised over the real samples and flagged), so the tok/J numbers are the real ones: alone,
pp2048 ub2048 ≈ 36.4 tok/J and tg128 ub512 ≈ 0.92 (the case README); beside another tenant every
record is flagged gpu-shared and throttled:sw-power-cap.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.records import make_record, seed_records
from tests.support.telemetry_fakes import (
    H200_MODEL,
    h200_bench_records,
    h200_digest,
    supporting_block,
    write_h200_trace,
)
from toolkit.analysis import compare, compare_text, plots, report, table_text, tables, verdict
from toolkit.analysis.tables import TELEMETRY_VERDICT_FLAGS, energy, telemetry_flags
from toolkit.cli.main import cli
from toolkit.publish import repro_output
from toolkit.publish import reproduce as repro
from toolkit.results.records import BenchRecord, ResultStore


@pytest.fixture(scope="module")
def alone() -> list[BenchRecord]:
    return h200_bench_records("cuda_sweep", "h200-alone")


@pytest.fixture(scope="module")
def shared() -> list[BenchRecord]:
    return h200_bench_records("cuda_contended", "h200-shared")


def label(image: str) -> str:
    return f"{image}@{h200_digest(image)[7:19]}"


def row(t: tables.Table, test: str) -> tables.Row:
    return next(r for r in t.rows if r.test == test)


def table(records: list[BenchRecord], axis: str) -> tables.Table:
    return next(t for t in tables.tables(records) if t.axis == axis)


def with_flags(r: BenchRecord, flags: list[str]) -> BenchRecord:
    """`r` carrying `flags`, with a telemetry block that shows them where it has none (a telemetry flag
    without its block is `flag-unsupported:`)."""
    return BenchRecord.model_validate(
        {**r.model_dump(), "flags": flags, "telemetry": r.telemetry or supporting_block(flags)}
    )


# ------------------------------------------------------------------------------- tok/J in the tables


def test_h200_tok_per_j_beside_tok_s_is_the_real_one_in_every_format(alone):
    """pp2048 ub2048 ≈ 36.4 tok/J and tg128 ub512 ≈ 0.92 tok/J (hardware counter), GPU alone."""
    by = {(r.test, r.n_ubatch): energy(r) for r in alone}
    assert by[("pp2048", 2048)].tok_per_j == pytest.approx(36.4, abs=0.05)
    assert by[("tg128", 512)].tok_per_j == pytest.approx(0.92, abs=0.005)
    # every window's counter energy but the last test's: tg128 ub2048 ran to process exit, 2.56 s for
    # 2.21 s of timed repetitions (window_holds_untimed_work: tests/test_breaker_round17.py)
    assert by.pop(("tg128", 2048)) is None
    assert all(e is not None and e.source == "counter" for e in by.values())
    col = label("h200-alone")

    # github: a `tok/J <image>` column right after the image's tok/s column
    pre = table(alone, "prefill")
    assert pre.energy_columns == [col]
    headers, body = table_text.table_rows(pre)
    i = headers.index(f"tok/J {col}")
    assert headers[i - 1] == col
    cells = {line[0]: line[i] for line in body}
    assert cells["pp2048 ub2048"] == "36.4" and cells["pp512 ub512"] == "43.7"
    text = report.render(alone, "github")
    assert f"tok/J {col}" in text and "| 36.4 " in text and "| 0.922 " in text
    assert "- tok/J: tokens of the test's window" in text

    # csv: tok_per_j, energy_j, energy_source per record
    rows = list(csv.DictReader(io.StringIO(report.render(alone, "csv"))))
    pp = next(r for r in rows if r["test"] == "pp2048 ub2048")
    assert float(pp["tok_per_j"]) == pytest.approx(36.4, abs=0.05) and pp["energy_source"] == "counter"
    assert float(pp["energy_j"]) * float(pp["tok_per_j"]) == pytest.approx(2048 * 5, rel=1e-3)

    # json: per cell
    doc = json.loads(report.render(alone, "json"))
    dec = next(t for t in doc["tables"] if t["axis"] == "decode")
    tg = next(r for r in dec["rows"] if r["test"] == "tg128 ub512")[col]
    assert tg["tok_per_j"] == pytest.approx(0.922, abs=0.001) and tg["energy_source"] == "counter"
    assert dec["energy_columns"] == [col]

    # html: the same table cells
    page = report.render(alone, "html")
    assert f"<th>tok/J {col.split('@')[0]}</th>" in page and "<td>36.4</td>" in page  # short label


def test_no_tok_per_j_where_the_energy_is_invalid_and_the_flag_says_why():
    """Without NVML's energy counter only the integral of the 1 s-averaged power is left: windows
    under 1.5 s (pp512, pp2048 here) get no number, flagged energy-invalid:<reason>; the longer ones
    keep an integrated figure."""
    recs = h200_bench_records("cuda_sweep", "h200-nocounter", counter=False)
    col = label("h200-nocounter")
    pre = table(recs, "prefill")
    headers, body = table_text.table_rows(pre)
    i = headers.index(f"tok/J {col}")
    cells = {line[0]: (line[i], line[-1]) for line in body}
    assert (
        cells["pp512 ub512"][0] == ""
        and "energy-invalid:window_short_for_sensor_average" in cells["pp512 ub512"][1]
    )
    assert cells["pp4096 ub2048"][0] == "33.6" and "energy-invalid" not in cells["pp4096 ub2048"][1]
    text = report.render(recs, "github")
    assert "- energy-invalid:window_short_for_sensor_average: no energy figure for this test" in text
    rows = {(r["test"]): r for r in csv.DictReader(io.StringIO(report.render(recs, "csv")))}
    assert rows["pp512 ub512"]["tok_per_j"] == "" and rows["pp512 ub512"]["energy_j"] == ""
    assert rows["pp4096 ub2048"]["energy_source"] == "integrated-average-power"
    doc = json.loads(report.render(recs, "json"))
    cell = next(r for r in doc["tables"][0]["rows"] if r["test"] == "pp512 ub512")[col]
    assert cell["tok_per_j"] is None and cell["energy_j"] is None
    assert "energy-invalid:window_short_for_sensor_average" in cell["flags"]


def test_a_shared_gpu_gets_no_tok_per_j(shared):
    """Beside another tenant the board's energy counts the tenant's work too (7.6-9.4 tok/J vs
    30.7-43.7 alone): valid energy, but not the benchmark's; gpu-shared says why it is empty."""
    assert all(r.telemetry["energy_valid"] for r in shared)
    assert all(energy(r) is None for r in shared)
    assert table(shared, "prefill").energy_columns == []
    text = report.render(shared, "github")
    assert "tok/J" not in text.split("- gpu-shared")[0]
    assert "no tok/J either (the board's energy counts the other process's work too)" in text


def test_schema_1_and_hand_edited_telemetry_give_no_tok_per_j():
    r = make_record("hip", "rocm", p=512, avg=3491, sd=35)
    assert r.telemetry is None and energy(r) is None
    for bad in (
        {"energy_valid": True, "energy_j": "many", "tokens": 2560},
        {"energy_valid": True, "energy_j": 0.0, "tokens": 2560},
        {"energy_valid": "yes", "energy_j": 50.0, "tokens": 2560},
        {"energy_valid": True, "energy_j": float("nan"), "tokens": 2560, "gpus": "x"},
        [],
    ):
        assert energy(r.model_copy(update={"telemetry": bad})) is None, bad
    ok = energy(r.model_copy(update={"telemetry": {"energy_valid": True, "energy_j": 50.0, "tokens": 2560}}))
    assert ok is not None and ok.tok_per_j == pytest.approx(51.2) and ok.source == "?"


# ----------------------------------------------------------------------------- the verdict and flags


def test_verdict_will_not_crown_a_flagged_leader(shared):
    """The contended H200 (5,128-6,160 tok/s prefill, gpu-shared + throttled) against the R9700's
    published hip figures (3,491-4,635): it leads prefill by +38.9 %, far beyond noise, but its cells
    are flagged, so there is no prefill winner and no prefill route; the verdict names the flags and
    the cells."""
    hip = [r for r in seed_records() if r.image.name == "hip"]
    v = verdict.verdict(shared + hip)
    pre = v.axes["prefill"]
    assert pre.clear and pre.held and not pre.decided
    assert pre.winner is None and pre.leader == label("h200-shared")
    assert pre.margin == pytest.approx(0.389, abs=0.001)
    text = verdict.format_verdict(v)
    assert f"- prefill: not decided (telemetry flags): {label('h200-shared')} leads" in text
    assert f"{label('h200-shared')} pp512 ub2048 (effective ub512), pp2048 ub2048, pp4096 ub2048 " in text
    assert "[gpu-shared, throttled:sw-power-cap]" in text
    routes = {r.workload.split(" ")[0]: r for r in v.routes}
    assert routes["prefill-heavy"].image is None
    assert routes["prefill-heavy"].why.startswith("not decided: the leader's cells carry telemetry flags")
    assert "pp4096 ub2048 [gpu-shared, throttled:sw-power-cap]" in routes["prefill-heavy"].why
    doc = verdict.verdict_json(v)["axes"]["prefill"]
    assert doc["winner"] is None and doc["held_by_flags"] and not doc["decided"]
    assert doc["flagged"][label("h200-shared")][0]["flags"] == ["gpu-shared", "throttled:sw-power-cap"]

    # the same numbers without their flags (and the telemetry that raises them: a reader re-derives a
    # flag its stored block raises, results.telemetry_flags.checked_flags): crowned, so the flags alone
    # held the decision
    plain = [with_flags(r, []).model_copy(update={"telemetry": None}) for r in shared]
    assert verdict.verdict(plain + hip).axes["prefill"].winner == label("h200-shared")


def test_verdict_crowns_over_a_flagged_rival_that_loses_anyway(alone, shared):
    """Decode of the contended H200 (46.6 tok/s) loses to hip (93.0) anyway: hip wins, and the
    verdict still names the flagged cell. The H200 alone against itself contended: alone wins both
    axes and every route, the contended cells named each time."""
    hip = [r for r in seed_records() if r.image.name == "hip"]
    v = verdict.verdict(shared + hip)
    dec = v.axes["decode"]
    assert dec.decided and dec.winner == label("hip")
    text = verdict.format_verdict(v)
    assert (
        f"  - flagged, and loses anyway: {label('h200-shared')} tg128 ub512 [gpu-shared, throttled:sw-power-cap]"
        in text
    )
    routes = {r.workload.split(" ")[0]: r for r in v.routes}
    assert routes["latency-bound"].image.startswith("hip@") and "loses anyway" in routes["latency-bound"].why
    assert routes["mixed"].image.startswith("hip@") and "loses anyway" in routes["mixed"].why

    v = verdict.verdict(alone + shared)
    assert v.axes["prefill"].winner == v.axes["decode"].winner == label("h200-alone")
    assert all(r.image == label("h200-alone") for r in v.routes)
    assert all("loses anyway" in r.why and "gpu-shared" in r.why for r in v.routes)
    assert not v.axes["prefill"].flagged.get(label("h200-alone"))


@pytest.mark.parametrize(
    "flag", ["gpu-shared", "throttled:hw-thermal", "clock-idle", "power-not-stock", "host-busy"]
)
def test_each_telemetry_flag_on_the_leader_holds_the_verdict(flag):
    assert flag.split(":")[0] in TELEMETRY_VERDICT_FLAGS
    fast = [make_record("a", "rocm", p=512, avg=2000, sd=10), make_record("a", "rocm", n=128, avg=200, sd=1)]
    slow = [
        make_record("b", "vulkan", p=512, avg=1000, sd=5),
        make_record("b", "vulkan", n=128, avg=100, sd=1),
    ]
    v = verdict.verdict([with_flags(r, [flag]) for r in fast] + slow)
    assert all(v.axes[a].held and v.axes[a].winner is None for a in ("prefill", "decode"))
    assert all(r.image is None and flag in r.why for r in v.routes)
    v = verdict.verdict(fast + [with_flags(r, [flag]) for r in slow])  # the flagged side loses anyway
    assert all(v.axes[a].winner.startswith("a@") for a in ("prefill", "decode"))
    assert all(r.image.startswith("a@") and f"[{flag}]" in r.why for r in v.routes)


@pytest.mark.parametrize("flag", ["energy-invalid:window_short_for_sensor_average", "noisy", "ub-clamped"])
def test_other_flags_do_not_hold_the_verdict(flag):
    fast = with_flags(make_record("a", "rocm", p=512, avg=2000, sd=10), [flag])
    v = verdict.verdict([fast, make_record("b", "vulkan", p=512, avg=1000, sd=5)]).axes["prefill"]
    assert v.winner.startswith("a@") and not v.flagged and telemetry_flags(fast) == []


def test_within_noise_no_winner_and_the_flags_are_named():
    a = with_flags(make_record("a", "rocm", p=512, avg=1010, sd=10), ["host-busy"])
    v = verdict.verdict([a, make_record("b", "vulkan", p=512, avg=1000, sd=10)])
    assert not v.axes["prefill"].clear and v.axes["prefill"].winner is None
    assert "  - telemetry flags on a@" in verdict.format_verdict(
        v
    ) and "[host-busy]" in verdict.format_verdict(v)


# ---------------------------------------------------------------------------- power and clocks plots


def test_html_plots_power_and_clocks_of_each_run_from_its_trace(tmp_path, alone, shared):
    results = tmp_path / "results"
    for run, image in (("cuda_sweep", "h200-alone"), ("cuda_contended", "h200-shared")):
        write_h200_trace(results, run, image)
    ts = tables.tables(alone + shared)
    figs, notes = plots.telemetry_figures(ts, results)
    assert notes == []
    assert list(figs) == [
        f"telemetry-{h200_digest('h200-alone')[7:19]}-cuda-sweep-run-{H200_MODEL}",
        f"telemetry-{h200_digest('h200-shared')[7:19]}-cuda-contended-run-{H200_MODEL}",
    ]
    for name, fig in figs.items():
        ax_p, ax_c = fig.axes
        power = next(ln for ln in ax_p.get_lines() if ln.get_label().endswith(" power"))
        shared_run = "contended" in name
        # idle ~80 W before the run; the averaged power peaks at 419 W alone, 705 W beside the tenant (cap 700)
        peak = 640 if shared_run else 400
        assert 75 < min(power.get_ydata()) < 90 and peak < max(power.get_ydata()) < 710
        assert any(ln.get_label().endswith("cap 700 W") for ln in ax_p.get_lines())
        assert {ln.get_label().split(" ", 1)[1] for ln in ax_c.get_lines()} == {
            "gfx/SM clock",
            "memory clock",
        }
        assert len(ax_p.patches) == 8  # one shaded window per test
        labels = [t.get_text() for t in ax_p.texts]
        assert sorted(x.split(" [")[0] for x in labels) == sorted(r.test + f" ub{r.n_ubatch}" for r in alone)
        assert all(("[gpu-shared, throttled:sw-power-cap]" in x) is shared_run for x in labels)
    page = report.render(alone + shared, "html", results_root=results)
    assert page.count('<img alt="telemetry-') == 2 and "<h2>Power and clocks</h2>" in page
    written = plots.write_pngs(ts, tmp_path / "png", results)
    assert sorted(p.name for p in written if p.name.startswith("telemetry-")) == sorted(
        f"{n}.png" for n in figs
    )


def test_a_missing_or_garbage_trace_gives_a_note_never_a_crash(tmp_path, alone, shared):
    results = tmp_path / "results"
    garbage = write_h200_trace(results, "cuda_sweep", "h200-alone")
    garbage.write_bytes(b"\xff\xfe\x00 not a trace \x80\x81\n")
    cpu = [
        r.model_copy(
            update={"image": r.image.model_copy(update={"name": "cpu", "digest": h200_digest("cpu")})}
        )
        for r in alone[:1]
    ]
    host_only = results / h200_digest("cpu")[7:19] / "telemetry" / f"cuda-sweep-run-{H200_MODEL}.jsonl"
    host_only.parent.mkdir(parents=True)
    host_only.write_text(
        '{"telemetry_trace": 1}\n{"t": 1.0, "source": "host", "cpu_total_s": 4.0}\n{"torn": \n'
    )
    ts = tables.tables(alone + shared + cpu)
    figs, notes = plots.telemetry_figures(ts, results)
    assert figs == {}
    # the one safe reader skips lines that are not JSON (toolkit.core.jsonsafe): no sample is left
    assert any(label("h200-alone") in n and "holds no telemetry sample" in n for n in notes), notes
    assert any(label("h200-shared") in n and "trace is missing" in n and str(results) in n for n in notes), (
        notes
    )
    assert any("cpu@" in n and "no GPU power or clock sample" in n for n in notes), notes
    page = report.render(alone + shared + cpu, "html", results_root=results)
    assert "<h2>Power and clocks</h2>" in page and page.count("no power plot") == 3
    assert '<img alt="telemetry-' not in page
    # runs without telemetry (schema 1, imports) are not expected to have a trace: no note
    assert plots.telemetry_figures(tables.tables(seed_records()), results) == ({}, [])


def test_cli_report_html_finds_the_traces_under_results(tmp_path, alone, shared):
    results = tmp_path / "results"
    store = ResultStore(results)
    for r in alone + shared:
        store.add_result(r)
    write_h200_trace(results, "cuda_sweep", "h200-alone")
    res = CliRunner().invoke(
        cli, ["report", "--results", str(results), "--format", "html"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    page = (results / "report.html").read_text()
    assert page.count('<img alt="telemetry-') == 1 and page.count("no power plot") == 1
    assert "36.4" in page
    assert sorted(p.name for p in (results / "report-plots").glob("telemetry-*.png")) == [
        f"telemetry-{h200_digest('h200-alone')[7:19]}-cuda-sweep-run-{H200_MODEL}.png"
    ]


# ----------------------------------------------------------------------------- compare and reproduce


def test_compare_shows_tok_per_j_of_both_sides_where_both_are_valid(tmp_path, alone):
    """A: the H200 run alone, energy from the counter; B: the same run read without the counter
    (integrated averaged power): both valid only on the windows >= 1.5 s (pp4096, tg128) but tg128
    ub2048's, which holds the process's teardown (window_holds_untimed_work)."""
    nocounter = h200_bench_records("cuda_sweep", "h200-nocounter", run_id="nocounter-run", counter=False)
    store = ResultStore(tmp_path / "results")
    for r in alone + nocounter:
        store.add_result(r)
    c = compare.compare(store, "h200-alone", "h200-nocounter")
    assert len(c.rows) == 8 and len(c.with_energy) == 3
    by = {r.test: r for r in c.rows}
    assert by["pp512 ub512"].energy_ratio is None
    assert by["pp4096 ub512"].energy_ratio == pytest.approx(31.434 / 30.659, abs=1e-3)  # +2.5 %: README
    text = compare_text.format_comparison(c)
    header = [h.strip() for h in text.splitlines()[0].split("|")]
    assert header[-6:-2] == ["speedup (B/A)", "tok/J A", "tok/J B", "tok/J (B/A)"]
    assert "3 of 8 tests with a valid energy on both sides" in text
    line = next(x for x in text.splitlines() if x.startswith("| pp4096 ub512"))
    assert "| 30.7 " in line and "| 31.4 " in line and "| 1.03 " in line
    doc = compare_text.comparison_json(c)
    rows = {r["test"]: r for r in doc["rows"]}
    assert rows["pp4096 ub512"]["tok_per_j_a"] == pytest.approx(30.659, abs=1e-3)
    assert rows["pp512 ub512"]["tok_per_j_b"] is None and rows["pp512 ub512"]["tok_per_j_ratio"] is None
    # sides without any energy: no tok/J columns
    hip = ResultStore(tmp_path / "hip")
    for r in seed_records():
        hip.add_result(r)
    assert "tok/J" not in compare_text.format_comparison(compare.compare(hip, "hip", "vulkan"))


def test_reproduce_shows_the_energy_delta_where_both_runs_have_one(alone):
    """Recorded with the counter, re-run on a GPU without one: tok/J delta on the 3 long windows
    (tg128 ub2048's runs to process exit, README: its energy is not the test's, none on either side),
    information only."""
    again = h200_bench_records("cuda_sweep", "h200-alone", run_id="again", counter=False)
    rows = repro.compare_records(alone, again, threshold=5)
    assert all(r.ok for r in rows) and sum(r.energy_delta is not None for r in rows) == 3
    tg = next(r for r in rows if r.test == "tg128 ub2048")
    assert tg.energy_delta is None  # was 0.739 / 0.843 - 1 (-12 %): the teardown in one window
    rep = repro.Reproduction("cuda-sweep-run", "again", Path("/x"), Path("/x/r"), 5, rows=rows)
    text = repro_output.format_reproduction(rep)
    assert "recorded tok/J" in text and "tok/J delta" in text
    assert "3 of 8 tests with a valid energy in both runs" in text
    line = next(x for x in text.splitlines() if "| pp4096 ub512" in x)
    assert "| 30.7 " in line and "| 31.4 " in line and "+2.5%" in line
    assert rep.reproduced and "verdict: reproduced within noise" in text
    doc = repro_output.reproduction_json(rep)
    r0 = next(r for r in doc["rows"] if r["test"] == "pp512 ub512")
    assert r0["recorded_tok_per_j"] == pytest.approx(43.69, abs=0.01) and r0["reproduced_tok_per_j"] is None
    assert r0["tok_per_j_delta"] is None
