"""report, verdict, roofline and plots.

Golden tests run on stored results captured from real runs on this machine (tests/data/results-*.jsonl,
see tests/data/README.md); the goldens under tests/golden/ are rewritten with UPDATE_GOLDEN=1 and
reviewed in the diff. Pure-function tests build records the way `toolkit bench` does
(llama_bench.check.normalize over a llama-bench row), some with the seed's published R9700 figures.
"""

from __future__ import annotations

import base64
import json
import struct

import pytest
from click.testing import CliRunner

from tests.support.records import (
    CPU_A,
    CPU_B,
    VULKAN,
    assert_golden,
    load,
    make_record,
    needs_fixtures,
    seed_records,
)
from tests.support.telemetry_fakes import supporting_block
from toolkit.analysis import facts, plots, report, roofline, table_text, tables, verdict
from toolkit.cli.main import cli
from toolkit.results import identity
from toolkit.results.records import BenchRecord

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# -------------------------------------------------------------------------------------------- helpers


def flags_by_row(t: tables.Table) -> dict[str, list[str]]:
    return {row.test: row.row_flags() for row in t.rows}


# ------------------------------------------------------------------------- the seed's routing rule


def test_seed_sweep_gives_the_published_routing_rule():
    v = verdict.verdict(seed_records())
    pre, dec = v.axes["prefill"], v.axes["decode"]
    assert pre.winner.startswith("vllm@") and dec.winner.startswith("vulkan@")
    assert [g.name for g in pre.groups] == ["pp4096"]  # the only prompt length all three measured
    assert dec.margin == pytest.approx(167.6 / 93.0 - 1)
    routes = {r.workload.split(" ")[0]: r for r in v.routes}
    assert routes["prefill-heavy"].image.startswith("vllm@")
    assert routes["latency-bound"].image.startswith("vulkan@")
    assert routes["mixed"].image.startswith("hip@")  # second on both axes, never last
    assert "never last" in routes["mixed"].why
    text = verdict.format_verdict(v)
    assert "pp4096: vllm@" in text and "8326.00 ± 40.00" in text


def test_mixed_route_says_a_tie_and_never_breaks_it_by_name():
    # each image wins one axis by the same 10%: equal geometric means, both last once; whichever name
    # sorts first or last, the mixed route names no image and says why
    for names in (("alpha", "zeta"), ("zeta", "alpha")):
        a, b = names
        rs = [
            make_record(a, "rocm", p=512, avg=1100),
            make_record(b, "vulkan", p=512, avg=1000),
            make_record(a, "rocm", n=128, avg=100),
            make_record(b, "vulkan", n=128, avg=110),
        ]
        routes = {r.workload.split(" ")[0]: r for r in verdict.verdict(rs).routes}
        mixed = routes["mixed"]
        assert mixed.image is None, mixed.why
        assert mixed.why.startswith("no clear pick:") and "within noise" in mixed.why
        assert f"{a}@" in mixed.why and f"{b}@" in mixed.why


def test_seed_two_llama_images_best_micro_batch_is_the_evidence():
    v = verdict.verdict([r for r in seed_records() if r.image.name != "vllm"])
    pre = v.axes["prefill"]
    assert pre.winner.startswith("hip@")
    pp2048 = next(g for g in pre.groups if g.name == "pp2048")
    assert [e.setting for e in pp2048.entries] == ["pp2048 ub2048", "pp2048 ub2048"]
    assert pp2048.entries[0].value == 4635


# ------------------------------------------------------------------------------------------- flags


@pytest.mark.parametrize(
    ("p", "n", "ub", "b", "effective"),
    [
        pytest.param(512, 0, 2048, 2048, 512, id="pp512-ub2048-clamped-to-prompt"),
        pytest.param(512, 0, 512, 2048, None, id="pp512-ub512-acts"),
        pytest.param(2048, 0, 2048, 2048, None, id="pp2048-ub2048-acts"),
        pytest.param(4096, 0, 2048, 2048, None, id="pp4096-ub2048-acts"),
        pytest.param(64, 0, 512, 32, 32, id="ub-above-n_batch"),
        pytest.param(0, 128, 512, 2048, None, id="tg128-ub512-decode-has-no-micro-batch"),
        pytest.param(0, 16, 8, 2048, None, id="tg16-ub8-decode-has-no-micro-batch"),
        pytest.param(512, 128, 2048, 2048, 512, id="pp512+tg128-ub2048-clamped-to-prompt"),
    ],
)
def test_ub_clamped_exactly_where_the_knob_is_clamped(p, n, ub, b, effective):
    r = make_record("hip", "rocm", p=p, n=n, ub=ub, b=b, avg=100.0)
    assert facts.ub_clamped(r) == effective
    flags = facts.record_flags(r, facts.ReportOptions())
    assert ("ub-clamped" in flags) is (effective is not None)
    assert "ub-no-effect" not in flags  # "no effect" is a measured claim: one record cannot make it


def test_ub_flag_in_the_seed_table_only_on_pp512_ub2048():
    t = tables.axis_table(seed_records(), "prefill")
    flagged = {test for test, fl in flags_by_row(t).items() if any(f.startswith("ub-clamped") for f in fl)}
    assert flagged == {"pp512 ub2048"}
    assert flags_by_row(t)["pp512 ub2048"][0] == "ub-clamped (effective ub512)"


@pytest.mark.parametrize(
    ("rsd", "threshold", "noisy"),
    [
        pytest.param(0.06, 0.05, True, id="6pct-over-5pct"),
        pytest.param(0.04, 0.05, False, id="4pct-under-5pct"),
        pytest.param(0.06, 0.10, False, id="6pct-under-10pct-option"),
    ],
)
def test_noisy_flag_threshold(rsd, threshold, noisy):
    r = make_record("hip", "rocm", p=2048, avg=1000.0, sd=1000.0 * rsd)
    assert ("noisy" in facts.record_flags(r, facts.ReportOptions(noisy=threshold))) is noisy


def test_cpu_fallback_rows_are_shown_flagged_and_never_win():
    ok = make_record("hip", "rocm", p=512, avg=3491, sd=10)
    failed = make_record(
        "vulkan",
        "vulkan",
        p=512,
        avg=90.0,
        sd=1,
        status="failed",
        backends="Vulkan",
        gpu_info="",
        error="CPU fallback: gpu_info is empty although the Vulkan backend was expected",
    )
    silent = make_record("rocm-b", "rocm", p=512, avg=95.0, sd=1, backends="CPU")
    t = tables.axis_table(tables.select_for_report([ok, failed, silent]), "prefill")
    fl = flags_by_row(t)["pp512 ub512"]
    assert "cpu-fallback [rocm-b@" in fl[0] and "vulkan@" in fl[0]
    v = verdict.verdict([ok, failed, silent]).axes["prefill"]
    assert [i for i, _, _ in v.ranking] == [] and v.note.startswith("only hip@")


def test_no_clear_winner_within_noise():
    a = [
        make_record("a", "rocm", p=512, avg=100.0, sd=3.0),
        make_record("a", "rocm", n=128, avg=50.0, sd=0.1),
    ]
    b = [
        make_record("b", "rocm", p=512, avg=102.0, sd=3.0),
        make_record("b", "rocm", n=128, avg=60.0, sd=0.1),
    ]
    v = verdict.verdict(a + b)
    assert v.axes["prefill"].winner is None and v.axes["prefill"].noise == pytest.approx(
        2 * (0.03**2 + (3 / 102) ** 2) ** 0.5
    )
    assert v.axes["decode"].winner.startswith("b@")
    text = verdict.format_verdict(v)
    assert "- prefill: no clear winner" in text
    routes = {r.workload.split(" ")[0]: r for r in v.routes}
    assert routes["prefill-heavy"].image is None and "no clear winner" in routes["prefill-heavy"].why


def test_min_margin_applies_when_noise_is_tiny():
    rs = [make_record("a", "rocm", p=512, avg=100.0), make_record("b", "rocm", p=512, avg=102.0)]
    assert verdict.verdict(rs).axes["prefill"].winner is None  # +2% < 3% default
    assert verdict.verdict(rs, facts.ReportOptions(min_margin=0.01)).axes["prefill"].winner.startswith("b@")


def test_different_models_are_not_compared():
    rs = [
        make_record("a", "rocm", p=512, avg=100.0, raw={"model_type": "llama 8B Q4_K - Medium"}),
        make_record("b", "rocm", p=512, avg=200.0, raw={"model_type": "qwen2 7B Q4_K - Medium"}),
    ]
    v = verdict.verdict(rs).axes["prefill"]
    assert v.winner is None and "no test of the same model" in v.note


# ---------------------------------------------------------------------------------------- roofline


def test_roofline_decode_share_of_bandwidth_and_prefill_share_of_compute():
    vk = make_record("vulkan", "vulkan", n=128, avg=167.6, gpu_info="AMD Radeon AI PRO R9700 (RADV GFX1201)")
    roof = roofline.assess(vk).roofline
    assert roof.gpu.gfx_target == "gfx1201" and roof.metric == "bandwidth"
    assert roof.share.source == "table" and roof.share.bytes_share == pytest.approx(3.3 / 30.5)
    assert roof.fraction == pytest.approx(167.6 * 17.7e9 * 3.3 / 30.5 / 640e9)  # ~50 % of 640 GB/s
    hip = make_record("hip", "rocm", p=2048, ub=2048, avg=4635, gpu_info="")  # GPU from host.gpus
    roof = roofline.assess(hip).roofline
    assert roof.metric == "compute"
    assert roof.fraction == pytest.approx(4635 * 2 * 30_532_122_624 * 3.3 / 30.5 / 191e12)
    assert table_text.fmt_roof(roof) == "16% of FP16 peak"


@pytest.mark.parametrize(
    ("avg", "flag"),
    [
        pytest.param(2000.0, "bw-above-peak", id="faster-than-memory"),
        pytest.param(10.0, "bw-below-floor", id="overhead-bound"),
        pytest.param(150.0, None, id="plausible"),
    ],
)
def test_bandwidth_plausibility_flags(avg, flag):
    r = make_record("vulkan", "vulkan", n=128, avg=avg)
    fl = facts.record_flags(r, facts.ReportOptions(), roofline.assess(r).roofline)
    assert [f for f in fl if f.startswith("bw-")] == ([flag] if flag else [])


@pytest.mark.parametrize(
    ("kw", "known"),
    [
        pytest.param({"backends": "CPU"}, False, id="cpu-image"),
        pytest.param({"gpu_info": "llvmpipe (LLVM 19.1.7, 256 bits)"}, False, id="lavapipe"),
        pytest.param({"gpu_info": "", "host": {"gpus": []}}, False, id="no-gpu-known"),
        pytest.param({"gpu_info": "AMD Radeon RX 7900 XTX"}, True, id="named-7900xtx"),
        pytest.param(  # a gfx arch alone is no yardstick (gfx1201 is also the RX 9070 GRE, 432 GB/s)
            {"gpu_info": "", "host": {"gpus": [{"gfx_target": "gfx942", "is_igpu": False}]}},
            False,
            id="host-gfx-only",
        ),
        pytest.param(
            {
                "gpu_info": "",
                "host": {
                    "gpus": [
                        {
                            "gfx_target": "gfx942",
                            "is_igpu": False,
                            "vendor": "0x1002",
                            "device_id": "0x74a1",
                            "revision": "0x00",
                        }
                    ]
                },
            },
            True,
            id="host-mi300x-by-pci-id",
        ),
    ],
)
def test_gpu_is_known_only_for_gpu_images_on_known_cards(kw, known):
    backend = "cpu" if kw.get("backends") == "CPU" else "vulkan"
    r = make_record("x", backend, n=128, avg=100.0, **kw)
    assert (roofline.yardstick(roofline.gpu_use(r))[0] is not None) is known


@pytest.mark.parametrize(
    ("model_type", "share", "source"),
    [
        pytest.param("qwen3moe 30B.A3B Q4_K - Medium", 3.3 / 30.5, "table", id="known-qwen3moe"),
        pytest.param("foomoe 16B.A2B Q8_0", 2 / 16, "model-type", id="size-name"),
        pytest.param("llama 8B Q4_K - Medium", 1.0, "dense", id="dense"),
    ],
)
def test_active_share_from_the_model_type(model_type, share, source):
    r = make_record("x", "rocm", n=128, avg=1.0, raw={"model_type": model_type})
    got = roofline.active_share(r)
    assert (got.bytes_share, got.source) == (pytest.approx(share), source)


def test_active_share_from_the_gguf_experts(tmp_path):
    from gguf import GGUFReader

    from toolkit.models.tiny import ensure_model_file

    path = ensure_model_file(tmp_path / "tiny.gguf", "tiny-qwen3moe")
    tensors = GGUFReader(str(path)).tensors
    total = sum(int(t.n_bytes) for t in tensors)
    experts = sum(int(t.n_bytes) for t in tensors if "_exps" in t.name)
    share = roofline.gguf_active_share(str(path))
    assert share.source == "gguf" and experts > 0
    assert share.bytes_share == pytest.approx(
        (total - experts + experts * 2 / 8) / total
    )  # 2 of 8 experts used


# ------------------------------------------------------------------------------- tables and served


def test_identifying_columns_only_when_they_vary():
    same = [make_record("a", "rocm", p=512, avg=1.0), make_record("b", "rocm", p=512, avg=2.0)]
    assert tables.axis_table(same, "prefill").id_columns == []
    mixed = same + [make_record("a", "rocm", p=512, avg=1.5, fa=0)]
    t = tables.axis_table(tables.select_for_report(mixed), "prefill")
    assert t.id_columns == ["flash_attn"] and [row.ids["flash_attn"] for row in t.rows] == ["0", "1"]


def served_records() -> list[BenchRecord]:
    rs = []
    for img, scale in (("vllm", 1.0), ("vllm-b", 1.3)):
        for c in (1, 2, 4, 8):
            raw = {
                "output_throughput": 45.0 * c**0.8 * scale,
                "median_ttft_ms": 120.0 + c,
                "median_tpot_ms": 20.0,
                "model_type": None,
            }
            rs.append(
                make_record(
                    img,
                    "rocm",
                    p=512,
                    n=128,
                    ub=None,
                    b=None,
                    fa=None,
                    avg=None,
                    axis="served",
                    method="vllm-bench-serve",
                    engine={"concurrency": c},
                    raw=raw,
                    gpu_info="",
                )
            )
    return rs


def test_served_table_per_concurrency_and_its_verdict():
    t = tables.axis_table(served_records(), "served")
    assert [row.test for row in t.rows] == [
        "c1 in512 out128",
        "c2 in512 out128",
        "c4 in512 out128",
        "c8 in512 out128",
    ]
    first = next(r for r in t.rows[0].cells.values() if r.image.name == "vllm")
    # no samples, stddev 0: the spread is unknown (facts.known_stddev), shown without `± 0.00`
    assert table_text.fmt_cell(first) == "45.00 (TTFT 121.0 ms, TPOT 20.0 ms)"
    v = verdict.verdict(served_records())
    assert v.axes["served"].winner.startswith("vllm-b@")
    assert any(r.workload.startswith("batched serving") and r.image.startswith("vllm-b@") for r in v.routes)


def test_served_plot_has_one_line_per_image():
    fig = plots.served_figure(tables.axis_table(served_records(), "served"))
    ax = fig.axes[0]
    assert [ln.get_label() for ln in ax.get_lines()] == sorted(
        f"{facts.image_label(r)} in512 out128" for r in served_records()[::4]
    )
    assert list(ax.get_lines()[0].get_xdata()) == [1, 2, 4, 8]


# ----------------------------------------------------------------- real-run fixtures: goldens, plots


@needs_fixtures
@pytest.mark.parametrize(
    "fmt",
    [pytest.param("github", id="github"), pytest.param("csv", id="csv"), pytest.param("json", id="json")],
)
def test_golden_report_of_real_runs(fmt):
    text = report.render(load(CPU_A, CPU_B, VULKAN), fmt)
    assert_golden(f"report-cpu-vulkan.{ {'github': 'md', 'csv': 'csv', 'json': 'json'}[fmt] }", text + "\n")


@needs_fixtures
def test_golden_verdict_of_real_runs():
    v = verdict.verdict(load(CPU_A, CPU_B, VULKAN))
    assert_golden("verdict-cpu-vulkan.md", verdict.format_verdict(v) + "\n")


@needs_fixtures
@pytest.mark.parametrize("fmt", ["github", "json", "html"])
def test_publish_selects_once_and_computes_each_shown_records_facts_once(monkeypatch, tmp_path, fmt):
    """Issue 30 item 4 / issue 32 item 13: one selection per report (the plots and the text share it)
    and one Facts per shown record, read by tables, verdict and plots alike. Spies count the calls
    (the real functions run); the output is the golden one."""
    calls = {"select": 0, "facts": 0}
    select, of = tables.select_with_accounting, facts.Facts.of.__func__

    def counted_select(records):
        calls["select"] += 1
        return select(records)

    def counted_of(cls, r, opts=None):
        calls["facts"] += 1
        return of(cls, r, opts)

    monkeypatch.setattr(tables, "select_with_accounting", counted_select)
    monkeypatch.setattr(facts.Facts, "of", classmethod(counted_of))
    recs = load(CPU_A, CPU_B, VULKAN)
    out = tmp_path / f"report.{fmt}"
    report.publish(recs, fmt, output=out)
    shown = len(select(recs)[0])
    assert calls == {"select": 1, "facts": shown}
    if fmt == "github":
        assert_golden("report-cpu-vulkan.md", out.read_text())  # the file ends with a newline


@needs_fixtures
def test_facts_are_the_per_record_rules_once():
    """A record's Facts hold what the rule functions say of it (one object, computed once)."""
    opts = facts.ReportOptions()
    for r in load(CPU_A, CPU_B, VULKAN):
        f = facts.Facts.of(r, opts)
        assert (f.value, f.rsd, f.stats, f.energy) == (
            identity.value(r),
            facts.rel_stddev(r),
            facts.sample_stats(r),
            facts.energy(r),
        )
        assert (f.cpu_fallback, f.ub_clamped, f.warmup_outlier) == (
            facts.is_cpu_fallback(r),
            facts.ub_clamped(r),
            facts.warmup_outlier(r),
        )
        assert list(f.telemetry_flags) == facts.telemetry_flags(r)
        assert list(f.flags) == facts.record_flags(r, opts, roofline.assess(r).roofline)
        with pytest.raises(AttributeError):
            f.value = 0.0  # type: ignore[misc]  # frozen


@needs_fixtures
def test_real_runs_flag_exactly_the_clamped_rows():
    recs = load(CPU_A, CPU_B, VULKAN)
    t = next(t for t in tables.tables(recs) if t.axis == "prefill")
    flagged = {row.test for row in t.rows if any(f.startswith("ub-clamped") for f in row.row_flags())}
    expected = {
        facts.row_label(r, ub=True)
        for r in recs
        if r.axis == "prefill" and r.n_ubatch > min(r.n_batch, r.n_prompt)
    }
    assert flagged == expected == {"pp128 ub512"}  # ub512 acts at pp1024 but not at pp128
    assert [row.test for row in t.rows] == ["pp128 ub64", "pp128 ub512", "pp1024 ub64", "pp1024 ub512"]


@needs_fixtures
def test_prefill_plot_of_real_runs_is_a_png_with_one_line_per_micro_batch(tmp_path):
    recs = tables.select_for_report(load(CPU_A, CPU_B, VULKAN))
    ts = tables.tables(recs)
    fig = plots.prefill_figure(next(t for t in ts if t.axis == "prefill"))
    images = sorted({facts.image_label(r) for r in recs})
    assert [ax.get_title() for ax in fig.axes] == images
    ubs = sorted({r.n_ubatch for r in recs if r.axis == "prefill"})
    for ax in fig.axes:
        legend = [f"ub{u}" for u in ubs] + [plots.CLAMPED_LABEL]  # the hollow point below, said
        assert [t.get_text() for t in ax.get_legend().get_texts()] == legend
        assert len(ax.containers) == len(ubs)  # one errorbar line per micro-batch
        clamped = [ln for ln in ax.get_lines() if ln.get_label() == "_clamped"]
        assert [list(ln.get_xdata()) for ln in clamped] == [[128]]  # hollow: ub512 at pp128 was off
    paths = plots.write_pngs(ts, tmp_path)
    assert [p.name for p in paths] == ["prefill.png", "decode.png"]
    data = paths[0].read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert (width, height) == (500 * len(images), 380)


@needs_fixtures
def test_cli_report_html_is_one_offline_file_with_plots(tmp_path):
    results = tmp_path / "results"
    for src in (CPU_A, CPU_B, VULKAN):
        rec = load(src)[0]
        dest = results / rec.image.short / "bench.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(src.read_text())
    res = CliRunner().invoke(
        cli, ["report", "--results", str(results), "--format", "html"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    page = (results / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 2
    assert "<style>" in page and "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page
    assert (results / "report-plots" / "prefill.png").read_bytes()[:8] == PNG_MAGIC
    res = CliRunner().invoke(cli, ["report", "--results", str(results), "--json"], catch_exceptions=False)
    doc = json.loads(res.output)
    assert {t["axis"] for t in doc["tables"]} == {"prefill", "decode"} and doc["verdict"]["routes"]


def test_report_of_only_failed_records_says_so_not_no_results():
    failed = make_record("cpu", "cpu", p=512, avg=1.0, status="failed", error="llama-bench exited 1")
    text = report.render([failed], "github")
    assert text.startswith("no ok result to tabulate: 1 record read, 1 failed"), text
    assert report.render([], "github").startswith("no results yet")


def test_columns_of_one_build_under_docker_and_podman_say_the_engine():
    """The newcomer trial: the CPU image benched under Docker and under rootless Podman gave two columns
    whose headers differed only in the digest. Where the engine differs it is said, with its version."""
    from toolkit.analysis.tables import column_labels, column_systems, facts_of

    a = make_record(
        "cpu-a",
        "cpu",
        p=512,
        avg=100.0,
        sd=1.0,
        host={"docker": {"engine": "docker", "server_version": "26.1.5+dfsg1"}},
    )
    b = make_record(
        "cpu-b",
        "cpu",
        p=512,
        avg=99.0,
        sd=1.0,
        host={"docker": {"engine": "podman", "server_version": "4.3.1", "rootless": True}},
    )
    cols = column_labels(fs := facts_of([a, b]))
    said = column_systems(fs, cols)
    assert said[cols[id(a)]] == "Docker 26.1.5" and said[cols[id(b)]] == "Podman 4.3.1 rootless"
    same = make_record(
        "cpu-c",
        "cpu",
        p=512,
        avg=98.0,
        sd=1.0,
        host={"docker": {"engine": "docker", "server_version": "26.1.5+dfsg1"}},
    )
    fs = facts_of([a, same])
    assert column_systems(fs, column_labels(fs)) == {}  # said only where it differs


def test_a_plot_too_big_to_read_is_named_not_drawn_and_the_rest_still_plot(tmp_path):
    """Reproducer: `report --format html` over 50,000 cells drew one bar group per decode row (488 s,
    2 GB, a figure nobody reads). Past plots.MAX_PANELS panel rows the decode plot is left out with the
    reason and how to narrow the report; the prefill plot is still drawn; the table keeps every row."""
    many = [make_record("hip", "rocm", n=16 + i, avg=90.0 + i % 7, sd=0.5) for i in range(200)]
    recs = tables.select_for_report(many + [make_record("hip", "rocm", p=512, avg=3491, sd=30)])
    ts = tables.tables(recs)
    decode = next(t for t in ts if t.axis == "decode")
    assert len(decode.rows) == 200
    drawn = plots.draw(ts)
    assert list(drawn.plots) == ["prefill"]
    (why,) = drawn.left_out
    assert why.startswith("decode plot left out: its 200 rows need ") and "--image or --run" in why
    out = tmp_path / "r.html"
    text, written, notes = report.publish(recs, "html", output=out)
    assert text is None and notes == [why]
    page = out.read_text()
    assert "decode plot left out" in page and page.count("data:image/png;base64,") == 1
    assert [p.name for p in written] == ["r.html", "prefill.png"]  # the page's PNG, drawn once
    embedded = base64.b64decode(page.split("data:image/png;base64,")[1].split('"')[0])
    assert (tmp_path / "r-plots" / "prefill.png").read_bytes() == embedded


def test_a_decode_plot_within_the_panel_limit_is_drawn_with_every_row():
    rows = plots.MAX_PANELS * 10  # one image: 10 groups a panel row
    recs = tables.select_for_report(
        [make_record("hip", "rocm", n=16 + i, avg=90.0, sd=0.5) for i in range(rows)]
    )
    ts = tables.tables(recs)
    assert plots.left_out(ts) == []
    fig = plots.decode_figure(next(t for t in ts if t.axis == "decode"))
    assert sum(len(ax.get_xticks()) for ax in fig.axes) == rows


def test_a_bar_plot_of_more_images_than_colors_is_left_out_and_ten_are_drawn():
    """Reproducer (breaker): 60 image columns drew one decode figure whose colors repeated every 10
    images (matplotlib's tab10): img0 and img10 could not be told apart."""

    def recs(n: int) -> list:
        return tables.select_for_report(
            [make_record(f"img{i}", "rocm", n=128, avg=90.0 + i, sd=0.5) for i in range(n)]
        )

    ts = tables.tables(recs(plots.MAX_LINES + 1))
    (why,) = plots.left_out(ts)
    assert why.startswith(
        f"decode plot left out: {plots.MAX_LINES + 1} image columns, more than the 10 colors"
    )
    ts = tables.tables(recs(plots.MAX_LINES))
    assert plots.left_out(ts) == [] and "decode" in plots.figures(ts)


def test_a_prefill_panel_of_more_lines_than_colors_is_left_out_and_many_prompt_lengths_are_thinned():
    deep = [
        make_record("hip", "rocm", p=512, avg=3000.0 - d, sd=10, raw={"n_depth": 1024 * d}) for d in range(11)
    ]
    (why,) = plots.left_out(tables.tables(tables.select_for_report(deep)))
    assert why.startswith("prefill plot left out: 1 image column with up to 11 lines each")
    wide = [make_record("hip", "rocm", p=64 + 8 * i, ub=512, avg=3000.0, sd=10) for i in range(100)]
    ts = tables.tables(tables.select_for_report(wide))
    assert plots.left_out(ts) == []
    (ax,) = plots.prefill_figure(next(t for t in ts if t.axis == "prefill")).axes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == 100 and 1 <= len([x for x in labels if x]) <= plots.MAX_TICKS


def test_a_bar_figure_legend_gives_each_image_the_color_of_its_bars_and_labels_sit_under_groups():
    """Reproducer (newcomer): with 7 columns, images without a bar in the first panel got the
    default blue in the legend (their bars were purple and brown), and a label sat at the panel's
    edge when its group had one bar off-centre."""
    from matplotlib.colors import to_hex

    recs = [make_record("a", "rocm", n=16 + i, avg=90.0, sd=0.5) for i in range(12)]
    recs += [make_record("b", "vulkan", n=16 + 11, avg=80.0, sd=0.5)]  # only in the last group
    ts = tables.tables(tables.select_for_report(recs))
    fig = plots.decode_figure(next(t for t in ts if t.axis == "decode"))
    legend = {
        t.get_text(): to_hex(h.get_facecolor())
        for t, h in zip(
            fig.axes[0].get_legend().get_texts(), fig.axes[0].get_legend().legend_handles, strict=True
        )
    }
    bars = {}
    for ax in fig.axes:
        for c in ax.containers:
            for patch in getattr(c, "patches", []):
                bars.setdefault(to_hex(patch.get_facecolor()), 0)
    assert len(legend) == 2 and set(legend.values()) == set(bars)
    for ax in fig.axes:  # every tick (a group) inside the axis, centred under its slot
        lo, hi = ax.get_xlim()
        assert all(lo < x < hi for x in ax.get_xticks())


def test_an_image_behind_by_less_than_the_noise_is_not_last():
    """Issue 31: x, 1.6 % behind y on decode inside the ~4 % noise the same line quotes, was "last"
    and the mixed route went to y as "the only image never last". Last means behind by more than noise."""
    rs = [
        make_record("x", "rocm", p=512, avg=1000, sd=15),
        make_record("y", "rocm", p=512, avg=900, sd=13.5),
        make_record("z", "vulkan", p=512, avg=500, sd=7.5),
        make_record("x", "rocm", n=128, avg=98.4, sd=1.5),
        make_record("y", "rocm", n=128, avg=100, sd=1.5),
        make_record("z", "vulkan", n=128, avg=110, sd=1.6),
    ]
    mixed = {r.workload.split(" ")[0]: r for r in verdict.verdict(rs).routes}["mixed"]
    assert not any(e.startswith("x@") and "last on an axis" in e for e in mixed.evidence), mixed.evidence
    assert any(
        e.startswith("z@") and "last on an axis" in e for e in mixed.evidence
    )  # 44 % behind on prefill
    assert "the only image never last" not in mixed.why, mixed.why


def test_the_customer_page_opens_with_verdict_then_what_was_measured(tmp_path):
    """Issue 33: the page named no model, date or build (`grep -c qwen3 report.html` -> 0), its title
    was "toolkit report" and the verdict sat at the bottom as a <pre> block of markdown."""
    recs = load(CPU_A, CPU_B)
    page = report.render(recs, "html")
    assert "<title>Benchmark report: tiny-qwen3moe (2026-11-29)</title>" in page and "<pre>" not in page
    verdict, measured, table = (page.index(x) for x in ('class="verdict"', "What was measured", "<table>"))
    assert verdict < measured < table
    assert "tiny-qwen3moe.gguf, sha256 759392345e48" in page and "measured: 2026-11-29" in page
    assert "runtime commit 0c1e57098bba" in page and "kernel 6.18.44" in page
    assert '<meta name="viewport"' in page and '<div class="scroll"><table>' in page
    titled = report.render(recs, "html", title="R9700 Qwen3-30B-A3B, December")
    assert "<h1>R9700 Qwen3-30B-A3B, December</h1>" in titled
    assert json.loads(report.render(recs, "json"))["provenance"]["models"][0].startswith("tiny-qwen3moe")
    assert "measured: 2026-11-29 17:06:28 UTC" in page and "runs: " in page


def test_an_image_keeps_its_color_in_every_figure_flagged_cells_are_marked_and_titles_name_the_model():
    """Reproducer (issue 33): the same color meant a micro-batch in the prefill figure and an image in
    the decode figure; a gpu-shared cell was drawn exactly like a clean one; no title named the model."""
    from matplotlib.colors import to_hex

    recs = [
        make_record("b-vulkan", "vulkan", p=p, ub=ub, avg=2000.0 + p, sd=5)
        for p in (512, 2048)
        for ub in (512, 2048)
    ]
    recs += [make_record("a-hip", "rocm", p=p, ub=512, avg=3000.0 + p, sd=5) for p in (512, 2048)]
    recs += [
        make_record(i, b, n=128, avg=90.0, sd=0.5) for i, b in (("a-hip", "rocm"), ("b-vulkan", "vulkan"))
    ]
    shared = make_record("b-vulkan", "vulkan", n=64, avg=40.0, sd=9)
    recs.append(
        shared.model_copy(update={"flags": ["gpu-shared"], "telemetry": supporting_block(["gpu-shared"])})
    )
    ts = tables.tables(tables.select_for_report(recs))
    figs = plots.figures(ts)
    colors = plots.palette(ts)
    hip, vulkan = sorted(colors)
    assert hip.startswith("a-hip@") and colors == {hip: "C0", vulkan: "C1"}
    prefill, decode = figs["prefill"], figs["decode"]
    for ax in prefill.axes:  # every line of an image's panel in that image's color, whatever its ub
        drawn = {to_hex(ln.get_color()) for ln in ax.get_lines() if ln.get_marker() != "x"}
        assert drawn == {to_hex(colors[ax.get_title()])}
    bars = [p for ax in decode.axes for c in ax.containers for p in getattr(c, "patches", [])]
    hatched = [p for p in bars if p.get_hatch()]
    assert len(hatched) == 1 and to_hex(hatched[0].get_facecolor()) == to_hex("C1")  # b-vulkan's tg64
    legend = [t.get_text() for t in decode.axes[0].get_legend().get_texts()]
    assert legend == [hip, vulkan, plots.FLAGGED_LABEL]
    # the hollow markers of pp512 at ub 2048 (clamped to the prompt) are said in the panel's legend
    said = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in prefill.axes]
    assert any(plots.CLAMPED_LABEL in x for x in said), said
    for fig in (prefill, decode):
        assert "model qwen3-30b-a3b-q4kxl" in fig.get_suptitle()


def test_one_value_per_cell_the_best_marked_beyond_the_noise_and_a_flagged_number_marked_where_it_stands():
    """Reproducer (issue 33): every cell was `3171.49 ± 16.62 (med 3166.34, 3157.74–3200.21)`, the best of
    a row was not marked, and a flagged number carried no mark (its flag sat in the row's last column)."""
    recs = [
        make_record("a", "rocm", p=512, avg=3171.49, sd=16.62),
        make_record("b", "vulkan", p=512, avg=2500.0, sd=10.0),
        make_record("a", "rocm", p=2048, avg=3000.0, sd=30.0),
        make_record("b", "vulkan", p=2048, avg=2990.0, sd=30.0),  # inside the noise: no best
        make_record("a", "rocm", n=128, avg=90.0, sd=0.5).model_copy(
            update={"flags": ["gpu-shared"], "telemetry": supporting_block(["gpu-shared"])}
        ),
        make_record("b", "vulkan", n=128, avg=80.0, sd=0.5),
    ]
    text = report.render(tables.select_for_report(recs), "github")
    assert "(med " not in text
    lines = {
        ln.split("|")[1].strip(): ln
        for ln in text.splitlines()
        if ln.startswith("| pp") or ln.startswith("| tg")
    }
    assert "**3171.49 ± 16.62**" in lines["pp512 ub512"] and "**" not in lines["pp2048 ub512"]
    assert "90.00 ± 0.50 †" in lines["tg128"] and "**" not in lines["tg128"]  # flagged: never the best
    assert "bold: the row's best" in text
    page = report.render(tables.select_for_report(recs), "html")
    assert "<strong>3171.49 ± 16.62</strong>" in page and "\x02" not in page


def test_a_hostile_name_adds_no_column_row_tag_or_link_to_the_markdown_and_no_control_to_the_page():
    """Reproducer (breaker): imported model names with `|`, a newline, `<svg onload=...>` and a
    `[x](javascript:...)` link went into the github report raw (an extra column, a split row, a tag);
    the html page kept ESC/BEL/OSC 52 bytes."""
    name = "evil|col\n<svg onload=alert(3)>[x](javascript:alert(1))\x1b]52;c;QUJD\x07"
    recs = [make_record("a", "rocm", p=512, avg=3000.0, sd=5.0, model=name)]
    recs.append(make_record("b", "vulkan", p=512, avg=2000.0, sd=5.0, model=name))
    text = report.render(tables.select_for_report(recs), "github")
    import re

    assert not re.search(r"(?<!\\)<svg", text) and "](javascript" not in text  # escaped: shown as text
    assert "\x1b" not in text and "\x07" not in text
    title = text.splitlines()[0]
    assert title.startswith("# ") and "evil\\|col \\<svg onload=alert(3)\\>[x]\\(javascript" in title
    rows = [ln for ln in text.splitlines() if ln.startswith("| pp512")]
    header = next(ln for ln in text.splitlines() if ln.startswith("| test"))
    assert rows and all(ln.count(" | ") == header.count(" | ") for ln in rows)  # no extra column
    page = report.render(tables.select_for_report(recs), "html")
    assert "\x1b" not in page and "\x07" not in page and "<svg" not in page


def test_provenance_gives_each_vulkan_images_matrix_cores_state():
    """Issue 33: the Mesa A/B image pair records coopmat on/off (org.toolkit.llama-vk-matrix-cores);
    the report's provenance did not say which image had it."""
    from toolkit.analysis.provenance import provenance

    recs = []
    for name, state in (("vk-on", "KHR_coopmat"), ("vk-off", "none")):
        r = make_record(name, "vulkan", p=512, avg=1000.0, sd=5.0)
        r.image.labels = {"org.toolkit.llama-vk-matrix-cores": state}
        recs.append(r)
    lines = provenance(recs).images
    assert any(x.startswith("vk-on@") and "matrix cores KHR_coopmat" in x for x in lines), lines
    assert any(x.startswith("vk-off@") and "matrix cores none" in x for x in lines), lines


def test_the_page_shows_short_column_labels_with_their_legend_and_one_decode_row_per_tg_test():
    """Issue 33: headers repeated `label@import:<12 hex> (ROCm, GPU ...)` and decode rows were doubled
    by ub 512/2048 although ub does not apply to tg."""
    recs = [make_record("hip", "rocm", n=128, ub=ub, avg=90.0 + ub / 10000, sd=0.5) for ub in (512, 2048)]
    recs += [make_record("hip", "rocm", p=512, ub=ub, avg=3000.0 + ub, sd=5.0) for ub in (512, 2048)]
    other = [make_record("hip", "rocm", n=128, avg=80.0, sd=0.5, digest="sha256:" + "b" * 64)]
    page = report.render(tables.select_for_report(recs + other), "html")
    decode = page[page.index("Decode (tg)") :]
    assert "<td>tg128</td>" in decode and "tg128 ub" not in decode  # one row, the ub512 record's
    assert "90.05" in decode and "90.20" not in decode
    assert "<th>hip@" in decode and "(backend rocm" not in decode.split("</tr>")[0]
    cols = page[page.index("<h2>Columns</h2>") : page.index("Prefill (pp)")]
    assert "hip@bbbb: hip@bbbbbbbbbbbb (" in cols and "decode rows: the micro-batch" in cols
    assert "<li>prefill" not in page or "<ul><li>" in page  # nested evidence is a list, not `- ` text
    assert "<p>  - " not in page and "<p>- " not in page


def test_a_stddev_whose_square_overflows_is_no_traceback():
    """brk47: an imported row without samples keeps any stddev_ts; at 1e156 over 20 t/s its relative
    stddev squared (5e154 ** 2) raised OverflowError in the verdict's root mean square: `toolkit report`
    exited 1 with a traceback. Squared as a product it is inf: an infinite noise, no clear winner."""
    rs = [
        make_record("a", "vulkan", p=512, avg=20.0, sd=1e156),
        make_record("b", "vulkan", p=512, avg=19.0, sd=0.5),
    ]
    v = verdict.verdict(rs)
    pre = v.axes["prefill"]
    assert pre.margin is not None and pre.noise == float("inf") and not pre.clear
    assert "no clear winner" in report.render(rs)
