"""The bench's observer (toolkit/bench/observe.py) on a fake R9700 sysfs tree built from published
captures (tests/telemetry_fakes.py): the up-front power warning, and per-test windows from real
progress-line timing. Sampling runs for real; only the card's files are a fake (no AMD GPU here)."""

from __future__ import annotations

import time

from tests.telemetry_fakes import FakeAmdHost
from toolkit.bench.observe import RunObserver
from toolkit.host import telemetry as tel


def _observer(tmp_path, host: FakeAmdHost) -> RunObserver:
    (ref,) = tel.discover_gpus(host.drm, nvml=False)
    obs = RunObserver(tmp_path / "trace.jsonl", [], baseline_s=0.2)
    src = tel.AmdGpuSource(
        ref.device_dir, kfd_root=host.kfd, module_params=host.module_params, source_id=ref.id
    )
    obs._gpu_sources.append(src)
    obs.sampler = tel.Sampler([tel.HostSource(), src], rate_hz=20, trace_path=tmp_path / "trace.jsonl")
    return obs


def test_a_gpu_below_its_default_cap_is_said_up_front_and_a_stock_one_is_not(tmp_path):
    host = FakeAmdHost(tmp_path / "sys").build()
    obs = _observer(tmp_path, host)
    obs.start()
    obs.finish()
    assert obs.power_notes == []
    host.set_caps(cap_w=225, default_w=300)
    obs = _observer(tmp_path / "b", host)
    obs.start()
    obs.finish()
    assert len(obs.power_notes) == 1 and "power cap 225 W below the default 300 W" in obs.power_notes[0]


def test_a_test_window_runs_from_its_first_measured_repetition_to_its_row(tmp_path):
    host = FakeAmdHost(tmp_path / "sys").build()
    obs = _observer(tmp_path, host)
    obs.start()
    obs.line("llama-bench: benchmark 1/1: starting")
    obs.line("llama-bench: benchmark 1/1: warmup prompt run")
    time.sleep(0.2)
    t0 = time.time()
    obs.line("llama-bench: benchmark 1/1: prompt run 1/2", t0)
    time.sleep(0.5)
    seen = obs.test({"n_prompt": 512, "n_gen": 0, "samples_ns": [1, 2]})
    obs.finish()
    t = seen["telemetry"]
    assert t["window_from"] == "progress" and abs(t["t0"] - t0) < 1e-6 and t["tokens"] == 1024
    assert 0.45 < t["duration_s"] < 2.0
    (gpu,) = t["gpus"].values()
    assert gpu["vendor"] == "amd" and gpu["power_w_mean"] is not None


def test_a_command_window_lands_on_the_record_with_its_flags_added():
    """vLLM/SGLang records carry their phase's window (with_window): telemetry with window_from, the
    window's flags added to the record's own, the record otherwise unchanged."""
    from tests.test_identity import make_record
    from toolkit.bench.observe import with_window

    rec = make_record("img", "rocm", p=512, avg=100.0, sd=1.0).model_copy(update={"flags": ["experimental"]})
    seen = {"telemetry": {"duration_s": 12.0, "gpus": {}}, "flags": ["gpu-shared", "experimental"]}
    out = with_window(rec, seen, "vllm-serve-sweep")
    assert out.telemetry == {"duration_s": 12.0, "gpus": {}, "window_from": "vllm-serve-sweep"}
    assert out.model_extra["flags"] == ["experimental", "gpu-shared"] and out.avg_ts == rec.avg_ts
    assert with_window(rec, {}, "x") is rec  # observing off: nothing added
