"""The decode bar plot shows the rows the page shows (issue 33 item 3: no clipped or colliding labels).

Reproducer (newcomer, a real CPU run with the tiny model, n_ubatch [512, 2048] and a depth sweep):
decode.png printed `tg128 ub512` and `tg128 ub2048` on top of each other, `tg128 @ d512 ub512`
wrapped into them, the bars sat in the left ~40 % of the plot, and the plot drew both ub rows while
the page folds decode into one row per tg test (tables.fold_decode_ub).
"""

from __future__ import annotations

from tests.support.records import CPU_A, CPU_B, load, make_record, needs_fixtures
from toolkit.analysis import plots, report, tables
from toolkit.results.records import BenchRecord


def _at_depth(r: BenchRecord, depth: int) -> BenchRecord:
    """A real record as the same test at KV depth `depth` (llama-bench -d labels it `tg64 @ d512`),
    slower by a tenth per 1024 tokens: stands in for a depth sweep, which these fixtures do not hold."""
    return r.model_copy(
        update={
            "n_depth": depth,
            "test": f"{r.test} @ d{depth}",
            "avg_ts": r.avg_ts * (1 - depth / 10240),
            "samples_ts": [x * (1 - depth / 10240) for x in r.samples_ts],
        }
    )


def _ticks(fig) -> list[str]:
    return [label.get_text() for ax in fig.axes for label in ax.get_xticklabels()]


def _overlapping(fig) -> list[tuple[str, str]]:
    """Pairs of x tick labels of one panel whose drawn bounding boxes overlap."""
    fig.canvas.draw()
    out = []
    for ax in fig.axes:
        labels = [label for label in ax.get_xticklabels() if label.get_text()]
        boxes = [label.get_window_extent() for label in labels]
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                if boxes[i].overlaps(boxes[j]):
                    out.append((labels[i].get_text(), labels[j].get_text()))
    return out


@needs_fixtures
def test_decode_plot_of_a_real_run_has_one_group_per_tg_test_and_leaves_depth_rows_to_the_curve():
    """Real CPU records (tg64 at ub64 and ub512, two images) plus a depth sweep of them: the decode
    table keeps every record (6 rows), the page folds them to one row per tg test, and so does the
    plot: one bar group `tg64` with the page's (ub512) numbers, the depth rows on the depth curve
    (one panel `tg64`, not one per ub), never again as bars."""
    real = load(CPU_A, CPU_B)
    decode = [r for r in real if r.axis == "decode"]
    recs = tables.select_for_report(real + [_at_depth(r, d) for r in decode for d in (512, 4096)])
    ts = tables.tables(recs)
    table = next(t for t in ts if t.axis == "decode")
    assert len(table.rows) == 6 and {r.n_ubatch for r in decode} == {64, 512}
    page = next(t for t in report.folded_tables(ts)[0] if t.axis == "decode")
    assert [row.test for row in page.rows] == ["tg64", "tg64 @ d512", "tg64 @ d4096"]

    figs = plots.figures(ts)
    fig = figs["decode"]
    assert _ticks(fig) == ["tg64"]
    heights = sorted(
        p.get_height() for ax in fig.axes for c in ax.containers for p in getattr(c, "patches", [])
    )
    assert heights == sorted(f.value for f in page.rows[0].facts.values())  # the page's cells: ub512
    assert heights == sorted(r.avg_ts for r in decode if r.n_ubatch == 512)
    (ax,) = figs["depth-decode"].axes
    assert ax.get_title() == "tg64" and len(ax.containers) == 2  # one curve per image
    assert [float(x) for x in ax.get_xticks()] == [0.0, 512.0, 4096.0]


def test_decode_labels_never_overlap_and_the_groups_use_the_width():
    """The finding's matrix where a depth row has no curve to go to (tg64 measured at one depth only):
    tg128 at ub512 and ub2048 is one group, `tg64 @ d512` another; no two labels' drawn boxes overlap
    and the bars fill the panel, centred (were: 3 groups in the left 30 %, labels printed over each
    other)."""
    recs = [make_record("cpu", "cpu", n=128, ub=ub, avg=50.0 + ub / 10000, sd=0.5) for ub in (512, 2048)]
    recs += [make_record("cpu", "cpu", n=64, ub=512, avg=40.0, sd=0.5, raw={"n_depth": 512})]
    ts = tables.tables(tables.select_for_report(recs))
    fig = plots.figures(ts)["decode"]
    assert _ticks(fig) == ["tg128", "tg64 @ d512"]
    assert _overlapping(fig) == []
    (ax,) = fig.axes
    lo, hi = ax.get_xlim()
    bars = [p for c in ax.containers for p in getattr(c, "patches", [])]
    left, right = min(p.get_x() for p in bars), max(p.get_x() + p.get_width() for p in bars)
    assert (right - left) / (hi - lo) > 0.5  # a figure no wider than its groups need (5 inches at least)
    assert abs((left - lo) - (hi - right)) < 0.01 * (hi - lo)  # and centred in it, none left empty


def test_long_labels_are_wrapped_to_their_group_as_drawn_and_panels_are_filled_evenly():
    """Many groups of one image with long identifying values: each label is wrapped until it fits its
    group as drawn (measured, not guessed from characters), no two overlap, and 12 groups make two
    panel rows of 6, not 10 and 2."""
    recs = [
        make_record(
            "hip", "rocm", n=n, ub=ub, fa=fa, avg=90.0 - n / 10 + fa, sd=0.5, raw={"type_k": k, "type_v": k}
        )
        for n in (32, 64, 128)
        for ub in (512, 2048)
        for fa in (0, 1)
        for k in ("f16", "q8_0")
    ]
    ts = tables.tables(tables.select_for_report(recs))
    fig = plots.figures(ts)["decode"]
    assert [len(ax.get_xticks()) for ax in fig.axes] == [6, 6]
    ticks = _ticks(fig)
    assert len(ticks) == 12 and not any(" ub" in t for t in ticks)  # folded: one group per tg test
    assert any("\n" in t for t in ticks)  # too wide for one line: wrapped
    assert _overlapping(fig) == []
    for ax in fig.axes:  # each label inside its own group's width
        lo, hi = ax.get_xlim()
        room = ax.get_window_extent().width / (hi - lo)
        assert all(label.get_window_extent().width <= room for label in ax.get_xticklabels())


def test_decode_rows_that_differ_by_more_than_their_noise_are_never_folded_in_any_format(tmp_path):
    """The field case (../shared/cases/README.md): tg128 at ub512 (3,674 t/s) and at ub2048 (726 t/s)
    drew ONE tg128 bar on the html page, and the terminal and markdown tables showed one row: the fold
    over the micro-batch hid a 5x difference. Rows whose tok/s differ beyond their noise stay apart in
    the tables of every format and in the plot; rows that agree within it are still folded."""
    apart = [
        make_record("cpu", "cpu", n=128, ub=512, avg=3674.0, sd=10.0, gpu_info=""),
        make_record("cpu", "cpu", n=128, ub=2048, avg=726.0, sd=5.0, gpu_info=""),
    ]
    ts = tables.tables(apart)
    page = next(t for t in report.folded_tables(ts)[0] if t.axis == "decode")
    assert [row.test for row in page.rows] == ["tg128 ub512", "tg128 ub2048"]
    fig = plots.figures(ts)["decode"]
    assert sorted(round(p.get_height()) for ax in fig.axes for p in ax.patches if p.get_height()) == [
        726,
        3674,
    ]
    for fmt in ("text", "github"):
        out = report.render(apart, fmt=fmt)
        assert "726" in out and "3674" in out and "tg128 ub2048" in out, fmt
    agree = [apart[0], make_record("cpu", "cpu", n=128, ub=2048, avg=3660.0, sd=12.0, gpu_info="")]
    page = next(t for t in report.folded_tables(tables.tables(agree))[0] if t.axis == "decode")
    assert [row.test for row in page.rows] == ["tg128"]


def test_the_fold_gives_the_same_answer_whichever_micro_batch_comes_first():
    """Newcomer: |a / b - 1| against the noise band kept 58.31 and 12.92 t/s apart in one order and
    folded them in the other, so two runs of one bench showed the decode table differently."""
    for vals in ({512: 58.31, 2048: 12.92}, {512: 12.92, 2048: 58.31}):
        recs = [make_record("cpu", "cpu", n=128, ub=ub, avg=v, sd=v * 0.5) for ub, v in vals.items()]
        page = next(t for t in report.folded_tables(tables.tables(recs))[0] if t.axis == "decode")
        assert sorted(row.test for row in page.rows) == ["tg128 ub2048", "tg128 ub512"], vals


def test_the_fold_never_joins_rows_of_two_different_tests(tmp_path):
    """Breaker round 11: tg128 at ub512 with no_host absent (100 t/s), at ub512 with no_host false (50
    t/s) and at ub2048 with no_host false (100 t/s): the first and the last (different tests: no_host
    differs) were folded as one `tg128` row showing 100, and the ub2048 row, with its 2x gap to the
    row it belongs with, was gone. Rows fold only where their test identity is the same but for n_ubatch."""
    from tests.support.project import DATA
    from toolkit.results import importer
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    importer.import_files(store, [DATA / "breaker11" / "fold_absent.jsonl"], label="fa")
    page = report.render(store.results(), "github")
    decode = page[page.index("Decode (tg)") :]
    assert "tg128 ub2048" in decode and decode.count("100.00") == 2 and "50.00" in decode
