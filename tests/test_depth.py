"""Depth curves (issue 34 item 1): the matrix's `depth:` sweep, the fit rule, the curve plot and
`toolkit tune --axis depth` deciding one micro-batch per model over the depths. Nothing is mocked:
records are built as bench stores them (tests.support.records.make_record), the GGUF is the real
tiny stand-in model (toolkit.models.tiny)."""

from __future__ import annotations

import pytest
from matplotlib.colors import to_hex

from tests.support.project import mutate, write_matrix
from tests.support.records import make_record
from toolkit.analysis import plots, report
from toolkit.bench import tune, tune_depth
from toolkit.core.errors import BadInput
from toolkit.spec.matrix import WIDE_DEPTHS, KvShape, depth_axes, fit_depths, gguf_kv_shape, load_matrix

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
    with pytest.raises(BadInput, match=rf"models\[{i}\]\.depth: .*remove its `depth:` block"):
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
    ts = report.tables(_depth_records({"vulkan": 3000.0, "rocm": 2500.0}, depths))
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
    ts = report.tables(_depth_records({"vulkan": 3000.0}, [0]))
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


def test_a_micro_batch_slower_beyond_noise_at_one_depth_is_not_proposed(tmp_path):
    recs = [
        trial(512, 0, [1000.0, 1010.0, 990.0]),
        trial(2048, 0, [1600.0, 1590.0, 1610.0]),
        trial(512, 32768, [500.0, 505.0, 495.0]),
        trial(2048, 32768, [400.0, 402.0, 398.0]),
    ]
    res = tune_depth.best_over_depth(recs, "d1", ["n_ubatch"], DEFAULT)
    assert res.best.candidate.label() == "n_ubatch=2048"
    assert "at depth 32768" in res.undecided and "no one micro-batch is best at every depth" in res.undecided
    assert tune_depth.depth_matrix_diff(tmp_path / "none.yaml", res, "big") == ""


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
