"""The GPU-path probe before each llama.cpp image's sweep (`llama-bench --list-devices` in the image, on
this host, with the run's devices): its facts are stored with every record (`gpu_probe`), and a probe
that sees no GPU device fails the image with the reason, before any test runs. The outputs are the pinned
llama-bench's own, captured in this project's Vulkan image (tests/data: on Mesa's drm-shim gfx1201
device, and on this GPU-less machine). vLLM: a start-up that dies with "Failed to infer device type"
names vllm-project/vllm#40081."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_env_axis import FakeEngine as _RowsEngine
from tests.test_env_axis import _ctx
from toolkit.bench.runners import llama_bench as lb
from toolkit.bench.runners import vllm as vr
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.results.records import BuildRecord

DATA = Path(__file__).parent / "data"
GFX1201_OUT = (DATA / "llamabench-0c1e57098-list-devices-radv-gfx1201.stdout").read_text()
GFX1201_ERR = (DATA / "llamabench-0c1e57098-list-devices-radv-gfx1201.stderr").read_text()
NOGPU_OUT = (DATA / "llamabench-0c1e57098-list-devices-nogpu.stdout").read_text()
NOGPU_ERR = (DATA / "llamabench-0c1e57098-list-devices-nogpu.stderr").read_text()


def test_probe_facts_of_the_pinned_llama_bench_outputs():
    f = lb.probe_facts("vulkan", GFX1201_OUT, GFX1201_ERR, exit_code=0)
    assert f["devices"] == ["Vulkan0: AMD Radeon Graphics (RADV GFX1201) (16384 MiB, 16384 MiB free)"]
    assert f["ggml_devices"] and f["ggml_devices"][0].startswith(
        "ggml_vulkan: 0 = AMD Radeon Graphics (RADV GFX1201)"
    )
    assert f["matrix_cores"] == "KHR_coopmat"
    none = lb.probe_facts("vulkan", NOGPU_OUT, NOGPU_ERR, exit_code=0)
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
    err = vr._outcome_error(engine.RunOutcome(1, "", log, 3.0), 600, "vllm bench latency")
    assert err and err.startswith("vllm bench latency exited 1: ")
    assert "vllm-project/vllm#40081" in err and "vllm#41585" in err
    other = vr._outcome_error(engine.RunOutcome(1, "", "CUDA out of memory", 3.0), 600, "vllm bench latency")
    assert other and "40081" not in other
