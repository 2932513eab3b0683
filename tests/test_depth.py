"""Depth curves (issue 34 item 1): the matrix's `depth:` sweep, the fit rule, the curve plot and
`toolkit tune --axis depth` deciding one micro-batch per model over the depths. Nothing is mocked:
records are built as bench stores them (tests.support.records.make_record), the GGUF is the real
tiny stand-in model (toolkit.models.tiny)."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import pytest
import yaml
from matplotlib.colors import to_hex

from tests.support.engine import ROW, FakeEngine, _build, _ctx, _project, row_timing
from tests.support.project import mutate, write_matrix
from tests.support.records import make_record
from toolkit.analysis import plots, tables
from toolkit.bench import tune, tune_depth
from toolkit.bench.runners import llama_depth
from toolkit.bench.runners.base import sha256_file
from toolkit.bench.runners.llama_bench import LlamaBenchRunner
from toolkit.core.errors import BadInput
from toolkit.engine import api as engine
from toolkit.host import info as hostinfo
from toolkit.host.devices import DeviceProfile
from toolkit.matrix.api import WIDE_DEPTHS, KvShape, depth_axes, fit_depths, load_matrix
from toolkit.models.gguf_meta import gguf_kv_shape
from toolkit.models.tiny import ensure_model_file
from toolkit.results import identity
from toolkit.results.records import ResultStore

REF = 0  # models[0]: the reference model qwen3-30b-a3b-q4kxl


def test_the_reference_model_sweeps_pp512_and_tg128_to_32k_and_the_tiny_model_0_and_512(project):
    lm = load_matrix(project / "matrix.yaml")
    ref, tiny = (
        next(m for m in lm.m.models if m.name == n) for n in ("qwen3-30b-a3b-q4kxl", "tiny-qwen3moe")
    )
    assert ref.depth.depths() == [0, 4096, 8192, 16384, 32768]
    axes = depth_axes(lm.m.bench, ref.depth)
    tests = {(c["n_prompt"], c["n_gen"], c["n_depth"]) for c in axes.cases()}
    assert tests == {(p, g, d) for d in ref.depth.depths() for p, g in ((512, 0), (0, 128))}
    assert axes.n_ubatch == [lm.m.bench.n_ubatch[0]] and len(axes.cases()) == 10
    assert tiny.depth.depths() == [0, 512] and len(depth_axes(lm.m.bench, tiny.depth).cases()) == 4
    wide = ref.depth.model_copy(update={"wide": True}).depths()
    assert wide[-1] == 65536 and set(WIDE_DEPTHS) <= set(wide) and 4096 in wide


@pytest.mark.parametrize(
    "key,value,expect",
    [
        ("n_depth", [4096, 0], ["models[0].depth.n_depth", "smallest first"]),
        ("n_depth", [0, 0], ["models[0].depth.n_depth", "once each"]),
        ("n_depth", [-1], ["models[0].depth.n_depth", "out of range", "from 0"]),
        ("n_depth", [], ["models[0].depth.n_depth"]),
        ("n_depth", ["4k"], ["models[0].depth.n_depth"]),
        ("n_gen", [0], ["models[0].depth", "no test at any depth", "n_gen (e.g. [128])"]),
        ("wide", "yes", ["models[0].depth.wide"]),
        ("depths", [0], ["models[0].depth", "unknown key 'depths'"]),
    ],
)
def test_a_bad_depth_sweep_names_file_field_and_fix(project, matrix_data, key, value, expect):
    data = mutate(matrix_data, ["models", REF, "depth", key], value)
    if key == "n_gen":
        data["models"][REF]["depth"]["n_prompt"] = [0]
    p = write_matrix(project, data)
    with pytest.raises(BadInput) as err:
        load_matrix(p)
    msg = str(err.value)
    assert str(p) in msg
    for e in expect:
        assert e in msg, msg


def test_a_depth_sweep_on_a_vllm_checkpoint_is_refused(project, matrix_data):
    i = next(i for i, m in enumerate(matrix_data["models"]) if m.get("format") == "hf")
    p = write_matrix(project, mutate(matrix_data, ["models", i, "depth"], {"n_depth": [0, 4096]}))
    with pytest.raises(
        BadInput, match=rf"models\[{i}\]\.depth \(model '[^']+'\): .*remove its `depth:` block"
    ):
        load_matrix(p)


def test_depths_whose_kv_cache_does_not_fit_are_left_out_with_a_reason():
    # Qwen3-30B-A3B: 48 layers, 4 KV heads of 128 (its config.json): 96 KiB a token in f16
    shape = KvShape(48, 4, 128, 128)
    assert shape.bytes_per_token() == 48 * 4 * 256 * 2
    assert shape.bytes_per_token("q8_0", "q8_0") == pytest.approx(48 * 4 * 256 * 34 / 32)
    gib = 1 << 30
    kept, skipped = fit_depths(
        list(WIDE_DEPTHS),
        tokens=512,
        kv_per_token=shape.bytes_per_token(),
        model_bytes=17 * gib,
        gpu_bytes=22 * gib,
    )
    # 17 GiB + 1 GiB reserve leaves 4 GiB: 43690 tokens of KV cache, 512 of them the test's own
    assert kept == [0, 8192, 16384, 24576, 32768, 40960] and len(skipped) == 3
    assert (
        skipped[0].startswith("depth 49152 skipped: model 17.0 GiB + KV cache 4.5 GiB")
        and "22.0 GiB" in skipped[0]
    )
    assert (
        fit_depths([0, 65536], tokens=512, kv_per_token=98304, model_bytes=17 * gib, gpu_bytes=32 * gib)[1]
        == []
    )


def test_the_kv_shape_is_read_from_the_gguf(tmp_path):
    from toolkit.models.tiny import TinyQwen3MoeShape, generate_tiny_qwen3moe

    path = generate_tiny_qwen3moe(tmp_path / "tiny.gguf")
    s = TinyQwen3MoeShape()
    assert gguf_kv_shape(str(path)) == KvShape(s.n_layer, s.n_head_kv, s.head_dim, s.head_dim)
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf")
    assert gguf_kv_shape(str(tmp_path / "junk.gguf")) is None


def _depth_records(images: dict[str, float], depths: list[int]) -> list:
    out = []
    for img, speed in images.items():
        for d in depths:
            out.append(
                make_record(img, "vulkan", p=512, avg=speed / (1 + d / 8192), sd=1.0, raw={"n_depth": d})
            )
            out.append(
                make_record(
                    img, "vulkan", n=128, avg=speed / 20 / (1 + d / 16384), sd=0.1, raw={"n_depth": d}
                )
            )
    return out


def test_the_depth_curve_has_one_line_per_image_at_the_depths_in_the_image_color():
    depths = [0, 4096, 8192, 16384]
    ts = tables.tables(_depth_records({"vulkan": 3000.0, "rocm": 2500.0}, depths))
    colors = plots.palette(ts)
    figs = plots.figures(ts)
    assert {"depth-prefill", "depth-decode"} <= set(figs)
    for name, test in (("depth-prefill", "pp512"), ("depth-decode", "tg128")):
        (ax,) = figs[name].axes
        curves = {c.get_label(): c.lines[0] for c in ax.containers}  # errorbar: (data line, caps, bars)
        assert sorted(c.split("@")[0] for c in curves) == ["rocm", "vulkan"], name  # columns: name@digest
        for img, ln in curves.items():
            assert list(ln.get_xdata()) == depths
            assert to_hex(ln.get_color()) == to_hex(colors[img])
        assert ax.get_title().startswith(test)
    # the prefill figure no longer draws each depth as a lone dot at one prompt length
    (pre,) = [a for a in figs["prefill"].axes if a.get_title().startswith("vulkan@")]
    assert len(pre.containers) == 1  # the pp512 .. pp512 @ d16384 rows: only the depth-0 series, one dot


def test_no_depth_curve_from_one_depth():
    ts = tables.tables(_depth_records({"vulkan": 3000.0}, [0]))
    assert "depth-prefill" not in plots.figures(ts)


def trial(ub: int, depth: int, samples: list[float], session: str = "d1"):
    r = make_record(
        "cpu",
        "cpu",
        p=512,
        ub=ub,
        avg=sum(samples) / len(samples),
        gpu_info="",
        raw={"samples_ts": samples, "n_depth": depth},
    )
    r.__pydantic_extra__ = {**(r.model_extra or {}), "tune": {"session": session, "round": 1}}
    return r


DEFAULT = tune.Candidate((("n_ubatch", 512),))


def test_tune_picks_one_micro_batch_per_model_over_the_depths_and_writes_it(tmp_path):
    # 2048 wins at 0 and 4096, ties at 16384: it is best or within noise at every depth
    recs = [
        trial(512, 0, [1000.0, 1010.0, 990.0]),
        trial(2048, 0, [1500.0, 1490.0, 1510.0]),
        trial(512, 4096, [800.0, 805.0, 795.0]),
        trial(2048, 4096, [1100.0, 1090.0, 1110.0]),
        trial(512, 16384, [500.0, 505.0, 495.0]),
        trial(2048, 16384, [502.0, 497.0, 503.0]),
    ]
    res = tune_depth.best_over_depth(recs, "d1", ["n_ubatch"], DEFAULT)
    assert res.best.candidate.label() == "n_ubatch=2048" and res.undecided == ""
    assert sorted(res.per_depth) == [0, 4096, 16384]
    assert res.per_depth[0].best.candidate.label() == "n_ubatch=2048"
    assert res.best.median == pytest.approx((1500 * 1100 * 502) ** (1 / 3), rel=1e-3)  # geometric mean
    assert "at depth 16384: " in tune.format_result(res)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "models:\n  - name: big\n    path: m.gguf\n    depth:\n      n_depth: [0, 4096]\n"
        "      n_prompt: [512]\n  - name: small\n    path: s.gguf\n"
    )
    diff = tune_depth.depth_matrix_diff(matrix, res, "big")
    assert "+      n_ubatch: 2048  # toolkit tune --axis depth" in diff and diff.count("\n+ ") == 1
    with pytest.raises(BadInput, match="'small' has no `depth:` block"):
        tune_depth.depth_matrix_diff(matrix, res, "small")


@pytest.mark.parametrize(
    ("best_at_0", "best_at_32k"),
    [
        ([1600.0, 1590.0, 1610.0], [400.0, 402.0, 398.0]),
        # brk47 F2: samples at ~70 % relative stddev make the band pass 100 %; it was held against a
        # slowdown's share (bounded by 100 %), so a 3x slower 2048 at depth 32768 was proposed. The band
        # is a margin of the faster over the slower (500 / 166 - 1 = 201 % > 137 %).
        ([4000.0, 4010.0, 3990.0], [60.0, 166.0, 300.0]),
    ],
    ids=["quiet", "noisy"],
)
def test_a_micro_batch_slower_beyond_noise_at_one_depth_is_not_proposed(tmp_path, best_at_0, best_at_32k):
    recs = [
        trial(512, 0, [1000.0, 1010.0, 990.0]),
        trial(2048, 0, best_at_0),
        trial(512, 32768, [500.0, 505.0, 495.0]),
        trial(2048, 32768, best_at_32k),
    ]
    res = tune_depth.best_over_depth(recs, "d1", ["n_ubatch"], DEFAULT)
    assert res.best.candidate.label() == "n_ubatch=2048"
    assert "at depth 32768" in res.undecided and "no one micro-batch is best at every depth" in res.undecided
    assert tune_depth.depth_matrix_diff(tmp_path / "none.yaml", res, "big") == ""


def test_a_depth_session_of_flagged_trials_or_of_one_setting_is_not_decided():
    # brk47b F1: every trial host-busy (one 23772 tok/s sample beside 1908), and 32 was proposed +927 %
    from tests.support.telemetry_fakes import supporting_block

    recs = [
        trial(512, 0, [1000.0, 1010.0, 990.0]),
        trial(2048, 0, [1500.0, 1490.0, 1510.0]),
        trial(512, 4096, [800.0, 805.0, 795.0]),
        trial(2048, 4096, [1100.0, 1090.0, 1110.0]),
    ]
    assert tune_depth.best_over_depth(recs, "d1", ["n_ubatch"], DEFAULT).undecided == ""
    recs[3].__pydantic_extra__["flags"] = ["host-busy"]  # as the runner stores a telemetry flag
    recs[3].telemetry = supporting_block(["host-busy"])
    res = tune_depth.best_over_depth(recs, "d1", ["n_ubatch"], DEFAULT)
    assert res.best.candidate.label() == "n_ubatch=2048" and "flagged (host-busy)" in res.undecided
    # brk47b F2 (nc47 S11 on this axis): the budget spent on the default alone said "best: the matrix default"
    res = tune_depth.best_over_depth(recs[::2], "d1", ["n_ubatch"], DEFAULT)
    assert res.undecided.startswith("only n_ubatch=512 was measured"), res.undecided
    assert "not decided: only n_ubatch=512 was measured" in tune.format_result(res)


def test_tune_depth_trials_measure_pp_at_every_depth_of_the_sweep(project):
    lm = load_matrix(project / "matrix.yaml")
    ref = next(m for m in lm.m.models if m.name == "qwen3-30b-a3b-q4kxl")
    axes = tune.case_axes(
        depth_axes(lm.m.bench, ref.depth), "depth", 512, tune.Candidate((("n_ubatch", 2048),)), 2
    )
    assert {(c["n_prompt"], c["n_gen"], c["n_depth"], c["n_ubatch"]) for c in axes.cases()} == {
        (512, 0, d, 2048) for d in ref.depth.depths()
    }


def test_the_verdict_and_its_groups_are_per_depth():
    """The test identity carries n_depth (results.identity), so each depth is its own workload point
    of the verdict: an image faster at depth 0 and slower at 16k is not called faster at 16k."""
    from toolkit.analysis import verdict as verdict_mod
    from toolkit.analysis.tables import ReportOptions

    recs = [
        make_record(img, "vulkan", p=512, avg=avg, sd=1.0, raw={"n_depth": d})
        for img, d, avg in (("a", 0, 3000.0), ("b", 0, 2000.0), ("a", 16384, 900.0), ("b", 16384, 1500.0))
    ]
    v = verdict_mod.verdict(recs, ReportOptions())
    text = verdict_mod.format_verdict(v, markdown=False)
    assert "pp512 @ d16384" in text, text


# --- `toolkit bench` runs the depth sweep (a llama-bench process of its own after the main sweep) ---


class DepthEngine(FakeEngine):
    """tests.support.engine.FakeEngine answering llama-bench as it crosses its lists: one row per
    (-d, -p > 0) and per (-d, -n > 0), shaped like the captured CPU row (a mock: no llama-bench runs
    here; the shared fake answers -p only)."""

    def _llama_bench(self, argv, on_stdout):
        def flag(f, default):
            return [int(x) for x in (argv[argv.index(f) + 1] if f in argv else default).split(",")]

        rows = []
        timing = row_timing(argv)  # -r's samples, the test's time now
        for d in flag("-d", "0"):
            tests = [(p, 0) for p in flag("-p", "0") if p] + [(0, n) for n in flag("-n", "0") if n]
            for p, n in tests:
                ts = [(p + n) / (ns / 1e9) for ns in timing["samples_ns"]]
                row = {**ROW, **timing, "n_prompt": p, "n_gen": n, "n_depth": d, "samples_ts": ts}
                row.update(avg_ts=statistics.mean(ts), stddev_ts=statistics.stdev(ts))
                row.update(
                    {
                        k: flag(f, "0")[0]
                        for k, f in (
                            ("n_batch", "-b"),
                            ("n_ubatch", "-ub"),
                            ("n_gpu_layers", "-ngl"),
                            ("flash_attn", "-fa"),
                        )
                    }
                )
                rows.append(json.dumps(row))
                on_stdout(rows[-1])
        return engine.RunOutcome(0, "\n".join(rows) + "\n", "", 0.5)


AXES = {
    "n_prompt": [512],
    "n_gen": [128],
    "n_ubatch": [64],
    "n_batch": [512],
    "n_gpu_layers": [0],
    "repetitions": 2,
}


def depth_ctx(tmp_path, depth: dict, fake=None, **opts):
    """The RunContext bench hands llama-bench for the cpu image and the tiny model (generated) with the
    depth sweep `depth` beside pp512 + tg128 at ub 64 (AXES)."""
    proj = tmp_path / "proj"
    data = _project(proj, AXES, replace_axes=True)
    next(m for m in data["models"] if m["name"] == "tiny-qwen3moe")["depth"] = depth
    (proj / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    lm = load_matrix(proj / "matrix.yaml")
    model = next(m for m in lm.m.models if m.name == "tiny-qwen3moe")
    ensure_model_file(lm.resolve(model.path), "tiny-qwen3moe")
    build = _build("cpu", "cpu", "c", lm.m.image("cpu").template)
    store = ResultStore(proj / "results")
    return _ctx(
        lm, lm.m.image("cpu"), build, model, store, "cpu", {}, fake or DepthEngine(), telemetry=False, **opts
    )


def _llama_argv(fake) -> list[list[str]]:
    return [r.command for r in fake.runs if r.command[0] == "llama-bench"]


def test_bench_runs_the_depth_sweep_after_the_main_sweep_measuring_each_test_once(tmp_path):
    """pp512 and tg128 at depth 0 with ub 64 are main-sweep cases: the depth process measures depth
    512 only (`-d 512 -p 512 -n 128`), the curve's depth-0 point is the main sweep's record (one test
    identity, one record), and a second run with --resume measures nothing."""
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512]})
    runner = LlamaBenchRunner()
    assert len(runner.cases(ctx)) == 4  # pp512, tg128 at depth 0, then at depth 512
    steps = runner.plan(ctx)
    assert [s.what for s in steps] == [
        "llama-bench, run 1 of 1",
        "llama-bench depth sweep (depths 512), run 1 of 1",
    ]
    outs = runner.run(ctx)
    assert [(o.status, o.records) for o in outs] == [("ok", 2), ("ok", 2)]
    assert outs[1].reason == "depth sweep, depths 512"
    main, depth = _llama_argv(ctx.engine)
    assert "-d" not in main
    assert " ".join(depth[depth.index("-p") : depth.index("-ngl")]) == "-p 512 -n 128 -b 512 -ub 64 -fa 1"
    assert depth[depth.index("-d") + 1] == "512" and steps[1].argv[-len(depth) :] == depth
    recs = ctx.store.results()
    assert sorted((r.n_prompt, r.n_gen, r.n_depth) for r in recs) == [
        (0, 128, 0),
        (0, 128, 512),
        (512, 0, 0),
        (512, 0, 512),
    ]
    sel = identity.newest_per_test(recs)
    assert (len(sel.used), sel.superseded) == (4, 0)
    assert (
        ctx.store.digest_dir(ctx.build.digest) / "logs" / f"{ctx.opts.run_id}-tiny-qwen3moe-depth.log"
    ).is_file()
    again = replace(ctx, opts=replace(ctx.opts, resume=True))
    assert runner.cases(again) == []
    n = len(ctx.engine.runs)
    resumed = runner.run(again)
    assert [o.status for o in resumed] == ["resumed"] and len(ctx.engine.runs) == n
    # as many cases as the plan counted (the depth sweep's too: a newcomer saw 8 of the plan's 10)
    assert resumed[0].reason == "nothing to measure: all 4 cases already measured for this digest + model"


def test_a_resumed_main_sweep_says_its_count_is_the_main_sweeps(tmp_path):
    """nc51 S3: the plan counts the depth sweep's cases too (`1 image/model pair x 4 cases, 1 already
    measured`), the resumed line only the main sweep's: it said `1 of 2 cases were missing`, a total a
    reader checks against the plan's 4. It now says which sweep it counts, as `nothing to measure` did."""
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512]})
    _timed(ctx, 512, 0, 0, 512.0, digest=ctx.build.digest)  # pp512 @ d0 measured on this digest + model
    again = replace(ctx, opts=replace(ctx.opts, resume=True))
    assert len(LlamaBenchRunner().cases(again)) == 3
    main, depth = LlamaBenchRunner().run(again)
    assert (main.status, main.reason) == ("ok", "(resumed: 1 of 2 cases of the main sweep were missing)")
    assert (depth.status, depth.reason) == ("ok", "depth sweep, depths 512")


def test_the_depth_sweep_measures_depth_0_itself_at_a_micro_batch_the_main_sweep_lacks(tmp_path):
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512], "n_ubatch": 128})
    LlamaBenchRunner().run(ctx)
    depth = _llama_argv(ctx.engine)[1]
    assert " ".join(depth[depth.index("-p") : depth.index("-fa")]) == "-p 512 -n 128 -b 512 -ub 128"
    assert depth[depth.index("-d") + 1] == "0,512"
    assert len(ctx.store.results()) == 6


def test_a_depth_that_lost_some_tests_to_the_main_sweep_gets_a_process_of_its_own(tmp_path):
    """pp1024 at depth 0 is not a main-sweep case, pp512 and tg128 there are: llama-bench crosses -d
    with -p and -n, so depth 0 runs `-p 1024 -n 0` and depth 512 every test."""
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512], "n_prompt": [512, 1024]})
    plan = llama_depth.depth_plan(ctx)
    got = [(a.n_depth, a.n_prompt, a.n_gen) for _, a in plan.processes]
    assert got == [([0], [1024], [0]), ([512], [512, 1024], [128])]
    assert len(plan.cases) == 4 and all(c["sweep"] == "depth" for c in plan.cases)


def _resumed_with_depth_1024(ctx):
    """`ctx` after its matrix's depth sweep gained depth 1024, as `--resume` of a second run."""
    data = yaml.safe_load(ctx.lm.path.read_text())
    next(m for m in data["models"] if m["name"] == "tiny-qwen3moe")["depth"]["n_depth"] = [0, 512, 1024]
    ctx.lm.path.write_text(yaml.safe_dump(data, sort_keys=False))
    lm = load_matrix(ctx.lm.path)
    model = next(m for m in lm.m.models if m.name == "tiny-qwen3moe")
    resumed = replace(ctx, lm=lm, model=model, opts=replace(ctx.opts, resume=True, run_id="run-2"))
    return resumed


def test_resume_measures_only_the_depths_not_yet_measured(tmp_path):
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512]})
    LlamaBenchRunner().run(ctx)
    resumed = _resumed_with_depth_1024(ctx)
    assert [(c["n_prompt"], c["n_depth"]) for c in LlamaBenchRunner().cases(resumed)] == [
        (512, 1024),
        (0, 1024),
    ]
    LlamaBenchRunner().run(resumed)
    assert _llama_argv(ctx.engine)[-1][_llama_argv(ctx.engine)[-1].index("-d") + 1] == "1024"


def test_a_decided_pair_runs_its_decided_cases_and_asks_the_results_no_second_time(tmp_path, monkeypatch):
    """`toolkit bench` decides once (bench.decide: the cases in RunContext.cases). With --resume the
    runner asked the results index again for the main sweep and again for the depth sweep (missing_cases,
    beside the decision's), so what ran could differ from what the plan line counted."""
    from toolkit.bench import decide
    from toolkit.results import index as resultindex

    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512]})
    LlamaBenchRunner().run(ctx)
    resumed = _resumed_with_depth_1024(ctx)
    decision = decide._run(resumed, LlamaBenchRunner().cases(resumed))
    assert decision.ctx is not None and decision.ctx.cases == decision.cases
    ran = len(_llama_argv(ctx.engine))
    monkeypatch.setattr(resultindex, "select", lambda *a, **k: pytest.fail("the results asked again"))
    (main, depth) = LlamaBenchRunner().run(decision.ctx)
    assert main.status == "resumed" and depth.status == "ok"
    (argv,) = _llama_argv(ctx.engine)[ran:]
    assert argv[argv.index("-d") + 1] == "1024"


def test_depths_over_the_memory_limit_are_skipped_with_their_reason(tmp_path):
    """A CPU image with --memory 1600m: the tiny model (1 KiB of KV cache a token) fits at depth 512,
    not at 1000000 (0.95 GiB of KV cache + the 1 GiB reserve); without a limit, the host's memory."""
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512, 1_000_000]}, memory="1600m")
    (note,) = LlamaBenchRunner().notes(ctx)
    assert note.startswith(
        "depth sweep: depth 1000000 skipped: model 0.0 GiB + KV cache 1.0 GiB + reserve 1.0 GiB"
    )
    assert note.endswith("> 1.6 GiB of container memory limit (bench.memory or --memory)")
    assert [a.n_depth for _, a in llama_depth.depth_plan(ctx).processes] == [[512]]
    host = replace(ctx, opts=replace(ctx.opts, memory=None))
    assert llama_depth.capacity(host) == (hostinfo.memory_bytes(), "host memory")


def test_a_gpu_image_fits_its_depths_in_the_passed_gpus_memory_an_igpu_in_the_hosts(tmp_path):
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512]})
    gpu = DeviceProfile(backend="vulkan", gpu_details=[{"vram_bytes": 32 << 30, "is_igpu": False}] * 2)
    vk = replace(ctx, spec=ctx.lm.m.image("vulkan"), profile=gpu)
    assert llama_depth.capacity(vk) == (64 << 30, "memory of 2 GPUs")
    igpu = replace(
        vk, profile=DeviceProfile(backend="vulkan", gpu_details=[{"vram_bytes": 512 << 20, "is_igpu": True}])
    )
    assert llama_depth.capacity(igpu) == (hostinfo.memory_bytes(), "host memory (shared by the iGPU)")
    unknown = replace(vk, profile=DeviceProfile(backend="vulkan"))
    assert LlamaBenchRunner().notes(unknown) == [
        "depth sweep: fit not checked (the GPU memory is unknown): every depth is measured"
    ]


def test_resume_axes_name_each_test_once_when_cache_types_are_crossed():
    """Cases repeat per cache type (type_k [f16, q8_0]): the process built from them passes `-p 512`,
    not `-p 512,512` (llama-bench would measure pp512 twice per type)."""
    from toolkit.bench.runners.llama_bench import resume_axes
    from toolkit.matrix.api import BenchAxes

    axes = BenchAxes(n_prompt=[512], n_gen=[128], n_ubatch=[512], n_batch=[2048], type_k=["f16", "q8_0"])
    (one,) = resume_axes(axes, axes.cases())
    assert (one.n_prompt, one.n_gen, one.type_k) == ([512], [128], ["f16", "q8_0"])


def test_resume_axes_leave_out_the_cache_types_already_measured():
    """type_k [f16, q8_0] with every f16 case measured: --resume runs `-ctk q8_0` alone (it had passed
    `-ctk f16,q8_0`, measuring the f16 half again while its plan counted only the q8_0 half); a missing
    set that is no cross product is one process per cache type, each with its own missing lengths."""
    from toolkit.bench.runners.llama_bench import resume_axes
    from toolkit.matrix.api import BenchAxes

    axes = BenchAxes(
        n_prompt=[512, 2048], n_gen=[128], n_ubatch=[512], n_batch=[2048], type_k=["f16", "q8_0"]
    )
    q8 = [c for c in axes.cases() if c.get("type_k") == "q8_0"]
    (one,) = resume_axes(axes, q8)
    assert (one.n_prompt, one.n_gen, one.type_k, one.type_v) == ([512, 2048], [128], ["q8_0"], ["f16"])
    assert len(one.cases()) == len(q8) == 3
    f16_pp512 = [c for c in axes.cases() if "type_k" not in c and c["n_prompt"] == 512]
    f16, q8_0 = resume_axes(axes, f16_pp512 + q8)
    assert (f16.type_k, f16.n_prompt, f16.n_gen) == (["f16"], [512], [0])
    assert (q8_0.type_k, q8_0.n_prompt, q8_0.n_gen) == (["q8_0"], [512, 2048], [128])
    assert sum(len(a.cases()) for a in (f16, q8_0)) == 4


def _timed(ctx, p: int, n: int, depth: int, avg: float, **fields):
    """Store an ok record of the tiny model on ctx's image (ub 64, b 512, no GPU layers: AXES) at `depth`."""
    ctx.store.add_result(
        make_record(
            "cpu",
            "cpu",
            p=p,
            n=n,
            ub=64,
            b=512,
            avg=avg,
            model="tiny-qwen3moe",
            sha256=sha256_file(ctx.lm.resolve(ctx.model.path)),
            host={},
            raw={"n_depth": depth, "n_gpu_layers": 0, "samples_ns": [10**9, 10**9]},
            **fields,
        )
    )


def test_the_estimate_adds_the_untimed_depth_fill_once_per_depth_and_the_restores(tmp_path):
    """pp512 and tg128 at depths 0, 512 and 1024, 2 repetitions each, measured before at the tok/s
    below: 21 s of timed repetitions. llama-bench also prefills each depth once, untimed (tg128 at a
    depth restores pp512's state): 512 tokens at 1/rate linear from 1/1024 to 1/512 s a token is
    0.75 s, 1024 tokens 0.75 + 512 x (1/512 + 1/256) / 2 = 2.25 s; and pp512 @ d512's window was 0.5 s
    longer than its timed samples (the state restore before repetition 2): 21 + 3.5 = 24.5 s."""
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512, 1024]})
    runner = LlamaBenchRunner()
    cases = runner.cases(ctx)
    assert [(c["n_prompt"], c["n_depth"]) for c in cases] == [
        (512, 0),
        (0, 0),
        (512, 512),
        (0, 512),
        (512, 1024),
        (0, 1024),
    ]
    assert runner.estimate(ctx, cases) == (0, 0.0)
    for depth, pp, tg in ((0, 1024.0, 128.0), (512, 512.0, 64.0), (1024, 256.0, 32.0)):
        window = {"telemetry": {"duration_s": 2.5, "window_from": "progress"}} if depth == 512 else {}
        _timed(ctx, 512, 0, depth, pp, **window)
        _timed(ctx, 0, 128, depth, tg)
    known, seconds = runner.estimate(ctx, cases)
    assert known == 6 and seconds == pytest.approx(24.5)
    # the fill follows the depth sweep's own prompt length: a slow pp4096 at depth 0 is another curve
    _timed(ctx, 4096, 0, 0, 1.0)
    assert runner.estimate(ctx, cases) == (6, pytest.approx(24.5))
    # the main sweep's cases alone (depth 0) have no untimed depth work
    assert runner.estimate(ctx, cases[:2]) == (2, pytest.approx(3.0))
    # a window not edged by the test's first repetition holds other work: no restore read from it
    _timed(ctx, 512, 0, 512, 512.0, telemetry={"duration_s": 9.0, "window_from": "previous-row"})
    assert runner.estimate(ctx, cases)[1] == pytest.approx(24.0)


def test_the_depth_fill_integrates_the_measured_prefill_curve():
    """One rate: depth / rate. The H200's pp512 curve (docs/running.md: 12,932 tok/s at depth 0 to
    5,459 at 32k): filling 32768 tokens takes 4.3 s, between 32768 tokens at the depth-0 rate (2.5 s)
    and at the 32k rate (6.0 s). Beyond the outermost measured depth the rate stays flat."""
    assert llama_depth.fill_seconds(512, {0: 256.0}) == 2.0
    assert llama_depth.fill_seconds(0, {0: 256.0}) == 0.0 and llama_depth.fill_seconds(512, {}) == 0.0
    h200 = {0: 12932.0, 4096: 10733.0, 8192: 9430.0, 16384: 7551.0, 32768: 5459.0}
    assert llama_depth.fill_seconds(32768, h200) == pytest.approx(4.32, abs=0.005)
    assert llama_depth.fill_seconds(4096, {8192: 1024.0}) == 4.0


def test_the_kv_shape_is_read_once_per_state_of_the_model_file(tmp_path, monkeypatch):
    """A bench looks at its depth plan four times (plan line, cases, notes, run): the GGUF header
    (every tensor's info walked, toolkit.models.gguf_meta) is read once per state of the file, cached in
    .toolkit/ beside its sha256; a changed file is read again, a hand-edited entry is not trusted."""
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512]})
    path = llama_depth.model_file_here(ctx.lm, ctx.model)
    reads = []
    real = llama_depth.gguf_kv_shape
    monkeypatch.setattr(llama_depth, "gguf_kv_shape", lambda p: reads.append(p) or real(p))
    shape = llama_depth.kv_shape(ctx, path)
    assert shape == real(str(path)) and len(reads) == 1
    assert llama_depth.kv_shape(ctx, path) == shape and len(reads) == 1
    cache = ctx.lm.root / ".toolkit" / "sha256-cache.json"
    data = json.loads(cache.read_text())
    key = next(k for k in data if k.startswith("kv-shape-layers|"))
    cache.write_text(json.dumps({**data, key: json.dumps({**json.loads(data[key]), "n_layer": "x"})}))
    assert llama_depth.kv_shape(ctx, path) == shape and len(reads) == 2
    with path.open("ab") as f:
        f.write(b"\0")
    llama_depth.kv_shape(ctx, path)
    assert len(reads) == 3


def test_a_model_changed_after_the_main_sweep_stops_the_pair_before_the_depth_sweep(tmp_path):
    """Breaker round 14: the pair hashes its model once (llama_bench._pair); a file replaced after the
    main sweep voided every depth row, but the depth sweep's container still ran for rows it would
    throw away. Now the pair stops with one failed line naming the file; the main sweep's rows stay."""

    class Replacing(DepthEngine):
        def run_container(self, spec, timeout=None, on_stdout=None, on_stderr=None, **kw):
            out = super().run_container(spec, timeout, on_stdout=on_stdout, on_stderr=on_stderr, **kw)
            if len(self.runs) == 1:  # after the main sweep's process: the same name, other bytes
                data = self.model.read_bytes()
                self.model.with_suffix(".new").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
                self.model.with_suffix(".new").replace(self.model)
            return out

    fake = Replacing()
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512, 1024]}, fake=fake)
    fake.model = ctx.lm.resolve(ctx.model.path)
    outs = LlamaBenchRunner().run(ctx)
    assert len(_llama_argv(fake)) == 1, _llama_argv(fake)
    assert outs[-1].status == "failed" and "changed during the run" in outs[-1].reason, outs
    assert [r.status for r in ctx.store.results()] == ["ok", "ok"]


def test_resume_with_only_the_depth_sweep_left_names_the_main_sweep(tmp_path):
    """--resume where the main sweep is measured and the depth sweep is not: the main sweep's line said
    `nothing to measure: all 2 cases of the matrix already measured` after the depth sweep's tests had
    started, beside a plan counting 4 (helper nc43's newcomer pass). It names the main sweep now, and so
    does `--resume --dry-run`, which still said `of the matrix` (nc50, after a Ctrl-C whose missing cases
    an earlier run had measured). llama-bench answered by DepthEngine (a fake, as in this module's other
    depth tests)."""
    ctx = depth_ctx(tmp_path, {"n_depth": [0, 512]})
    runner = LlamaBenchRunner()
    assert [(o.status, o.records) for o in runner.run(ctx)] == [("ok", 2), ("ok", 2)]
    bench = ctx.store.digest_dir(ctx.build.digest) / "bench.jsonl"
    lines = bench.read_text().splitlines(keepends=True)
    bench.write_text("".join(line for line in lines if '"n_depth":512' not in line))  # the depth sweep's gone
    said = "nothing to measure: all 2 cases of the main sweep already measured for this digest + model"
    dry = replace(ctx, opts=replace(ctx.opts, resume=True, dry_run=True, run_id=ctx.opts.run_id + "-d"))
    dry = replace(dry, cases=runner.cases(dry))  # as `toolkit bench` decides them for the plan line
    assert [c.get("sweep") for c in dry.cases] == ["depth", "depth"], dry.cases
    outs = runner.run(dry)
    assert [(o.status, o.reason) for o in outs][0] == ("resumed", said) and outs[1].status == "dry-run", outs
    again = replace(ctx, opts=replace(ctx.opts, resume=True, run_id=ctx.opts.run_id + "-2"))
    outs = runner.run(again)
    assert [(o.status, o.records) for o in outs] == [("resumed", 0), ("ok", 2)], outs
    assert outs[0].reason == said
