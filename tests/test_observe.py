"""The bench's observer (toolkit/bench/observe.py) on a fake R9700 sysfs tree built from published
captures (tests/support/telemetry_fakes.py): the up-front power warning, and per-test windows from real
progress-line timing. Sampling runs for real; only the card's files are a fake (no AMD GPU here)."""

from __future__ import annotations

import time

import pytest

from tests.support.telemetry_fakes import FakeAmdHost
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
    assert obs.notes == []
    host.set_caps(cap_w=225, default_w=300)
    obs = _observer(tmp_path / "b", host)
    obs.start()
    obs.finish()
    assert len(obs.notes) == 1 and "power cap 225 W below the default 300 W" in obs.notes[0]


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
    seen = obs.test({"n_prompt": 512, "n_gen": 0, "samples_ns": [1, 2]}, 512)
    obs.finish()
    t = seen["telemetry"]
    assert t["window_from"] == "progress" and abs(t["t0"] - t0) < 1e-6 and t["tokens"] == 1024
    assert 0.45 < t["duration_s"] < 2.0
    (gpu,) = t["gpus"].values()
    assert gpu["vendor"] == "amd" and gpu["power_w_mean"] is not None


def test_the_next_tests_start_read_before_this_row_still_starts_the_next_window(tmp_path):
    """On a loaded host `toolkit measure` can read test 2's progress line (stderr) before test 1's row
    (stdout) when both pipes are ready at once (CI and a fresh Debian 12 stand-in did): the start
    belongs to test 2 by its index, whatever the order of arrival."""
    obs = RunObserver(tmp_path / "trace.jsonl", [], baseline_s=0.1)
    obs.start()
    t1 = time.time()
    obs.line("llama-bench: benchmark 1/2: prompt run 1/2", t1)
    time.sleep(0.2)
    t2 = time.time()
    obs.line("llama-bench: benchmark 2/2: generation run 1/3", t2)  # read before row 1 ...
    time.sleep(0.05)  # ... which is handled a little later
    first = obs.test({"n_prompt": 256, "n_gen": 0, "samples_ns": [1, 2]}, 256)["telemetry"]
    time.sleep(0.2)
    second = obs.test({"n_prompt": 0, "n_gen": 32, "samples_ns": [1, 2, 3]}, 32)["telemetry"]
    obs.finish()
    assert (first["window_from"], first["t0"], first["tokens"]) == ("progress", t1, 512)
    assert (second["window_from"], second["t0"], second["tokens"]) == ("progress", t2, 96)


def test_a_row_without_its_progress_line_starts_at_the_previous_row(tmp_path):
    obs = RunObserver(tmp_path / "trace.jsonl", [], baseline_s=0.1)
    obs.start()
    obs.line("llama-bench: benchmark 1/2: prompt run 1/2")
    first = obs.test({"n_prompt": 256, "n_gen": 0, "samples_ns": [1, 2]}, 256)["telemetry"]
    second = obs.test({"n_prompt": 0, "n_gen": 32, "samples_ns": [1, 2]}, 32)["telemetry"]
    obs.finish()
    assert first["window_from"] == "progress"
    assert second["window_from"] == "previous-row" and second["t0"] == first["t1"] and second["tokens"] == 64


def test_a_command_window_lands_on_the_record_with_its_flags_added():
    """vLLM/SGLang records carry their phase's window (with_window): telemetry with window_from, the
    window's flags added to the record's own, the record otherwise unchanged."""
    from tests.support.records import make_record
    from toolkit.bench.observe import with_window

    rec = make_record("img", "rocm", p=512, avg=100.0, sd=1.0).model_copy(update={"flags": ["experimental"]})
    seen = {"telemetry": {"duration_s": 12.0, "gpus": {}}, "flags": ["gpu-shared", "experimental"]}
    out = with_window(rec, seen, "vllm-serve-sweep")
    assert out.telemetry == {"duration_s": 12.0, "gpus": {}, "window_from": "vllm-serve-sweep"}
    assert out.model_extra["flags"] == ["experimental", "gpu-shared"] and out.avg_ts == rec.avg_ts
    assert with_window(rec, {}, "x") is rec  # observing off: nothing added


def test_a_short_window_on_nvml_gets_its_energy_from_counter_reads_at_its_edges(tmp_path):
    """The NVML energy counter is read once a second on ticks and at every window edge: the progress
    line that starts a test and the row that ends it (RunObserver.line / .test), so a 0.4 s window
    (pp512 on an H200 is 0.22 s) still gets the counter's own energy, not the 1 s averaged power's.
    Fake pynvml (no NVIDIA GPU here) whose counter runs at 700 W of wall time."""
    from tests.support.telemetry_fakes import fake_pynvml

    nv = fake_pynvml(nvmlDeviceGetTotalEnergyConsumption=lambda h: int(time.time() * 700_000))
    src = tel.NvmlGpuSource(0, nvml=nv)
    obs = RunObserver(tmp_path / "trace.jsonl", [], baseline_s=0.2)
    obs._gpu_sources.append(src)
    obs.sampler = tel.Sampler([tel.HostSource(), src], rate_hz=10, trace_path=tmp_path / "trace.jsonl")
    obs.start()
    time.sleep(0.55)  # off the counter's once-a-second reads
    t0 = time.time()
    obs.line("llama-bench: benchmark 1/1: prompt run 1/2")
    time.sleep(0.4)
    half = int((time.time() - t0) / 2 * 1e9)  # the timed work fills the window, as llama-bench's does
    seen = obs.test(
        {"n_prompt": 512, "n_gen": 0, "samples_ns": [half, half]}, 512
    )  # (a loaded host sleeps longer)
    obs.finish()
    (gpu,) = seen["telemetry"]["gpus"].values()
    duration = seen["telemetry"]["duration_s"]
    assert gpu["energy_source"] == "counter" and gpu["energy_valid"], gpu
    assert gpu["energy_j"] == pytest.approx(700 * duration, rel=0.03)


def test_a_window_edge_far_from_any_counter_read_is_no_counter_energy():
    """The rule the edge reads serve (analysis.energy.counter_energy): an edge more than
    COUNTER_EDGE_S (or a period) from the nearest counter read is interpolated too far to trust."""
    from toolkit.bench.observe import window_summary

    def s(t, energy=True):
        return {
            "t": t,
            "source": "nv",
            "vendor": "nvidia",
            "power_w": 700.0,
            "energy_j": 700.0 * t if energy else None,
        }

    ticks = [s(i / 10, energy=i % 10 == 0) for i in range(0, 31)]  # counter at 0, 1, 2, 3 s
    g = window_summary(ticks, 1.45, 1.85)["gpus"]["nv"]
    assert g["energy_counter_invalid_reason"] == "counter_not_read_at_edge" and not g["energy_valid"]
    marked = sorted(ticks + [s(1.451), s(1.851)], key=lambda x: x["t"])
    g = window_summary(marked, 1.45, 1.85)["gpus"]["nv"]
    assert g["energy_source"] == "counter" and g["energy_j"] == pytest.approx(700 * 0.4, rel=1e-3)


def test_a_row_without_its_test_edges_gets_no_energy(tmp_path):
    """Without `--progress` a row's window runs from the previous row and holds warm-up and other
    work: tok/J was 14-90 % off (issue 31). No edges, no energy, said as the reason."""
    host = FakeAmdHost(tmp_path / "sys").build()
    obs = _observer(tmp_path, host)
    obs.start()
    time.sleep(0.3)
    seen = obs.test({"n_prompt": 512, "n_gen": 0, "samples_ns": [1, 2]}, 512)
    obs.finish()
    t = seen["telemetry"]
    assert t["window_from"] == "previous-row" and t["energy_j"] is None and t["tok_per_j"] is None
    (g,) = t["gpus"].values()
    assert g["energy_invalid_reason"] == "no_test_edges" and g["power_w_mean"] is not None
    assert "energy-invalid:no_test_edges" in seen["flags"]


def test_process_repeats_under_one_measure_keep_their_test_edges(tmp_path):
    """On the H200 (2026-12-02) three llama-bench processes in one `toolkit measure -- sh -c '...'`:
    every row of the second and third got `energy-invalid:no_test_edges` (the progress index restarts
    at 1 while rows kept counting). Each process's rows are matched to its own progress lines."""
    obs = RunObserver(tmp_path / "trace.jsonl", [], baseline_s=0.1)
    obs.start()
    seen = []
    for _process in range(3):
        starts = []
        for k in (1, 2):
            starts.append(time.time())
            obs.line(f"llama-bench: benchmark {k}/2: prompt run 1/2", starts[-1])
            time.sleep(0.02)
            seen.append(
                (obs.test({"n_prompt": 64, "n_gen": 0, "samples_ns": [1, 2]}, 64)["telemetry"], starts[-1])
            )
    obs.finish()
    assert [(t["window_from"], t["t0"]) for t, _ in seen] == [("progress", t0) for _, t0 in seen]


def test_the_measured_commands_own_children_are_not_another_tenant(tmp_path):
    """On the H200 every row of llama-bench run by a `sh -c` wrapper under `toolkit measure` was
    flagged gpu-shared: the GPU process (llama-bench) was not the wrapper's pid. A process of the
    command's own session is the benchmark; one outside it still flags."""
    import os
    import signal
    import subprocess

    host = FakeAmdHost(tmp_path / "sys").build()
    obs = _observer(tmp_path, host)
    wrapper = subprocess.Popen(
        ["sh", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        child = int(wrapper.stdout.readline())
        obs.start()
        obs.own_pid(wrapper.pid)
        host.add_kfd_proc(child, vram=1 << 30, queue_gpu=host.gpu_id)
        obs.line("llama-bench: benchmark 1/2: prompt run 1/2")
        time.sleep(0.3)
        alone = obs.test({"n_prompt": 64, "n_gen": 0, "samples_ns": [1, 2]}, 64)
        host.add_kfd_proc(stranger.pid, vram=1 << 30, queue_gpu=host.gpu_id)
        obs.line("llama-bench: benchmark 2/2: prompt run 1/2")
        time.sleep(0.3)
        shared = obs.test({"n_prompt": 64, "n_gen": 0, "samples_ns": [1, 2]}, 64)
        obs.finish()
    finally:
        for p in (wrapper, stranger):
            p.kill()
        os.killpg(wrapper.pid, signal.SIGKILL)  # the wrapper's own session: its sleep too
    assert child in alone["telemetry"]["gpus"][next(iter(alone["telemetry"]["gpus"]))]["pids"]
    assert "gpu-shared" not in alone["flags"]
    assert "gpu-shared" in shared["flags"]


def test_a_window_holding_untimed_work_gets_no_energy(tmp_path):
    """On the H200 (2026-12-02) pp512 at n_depth 32768 had a 2.35 s window for 0.47 s of timed
    repetitions (llama-bench restores the cached depth state between repetitions, untimed) and its
    energy was marked valid: 5.8 tok/J for work that was mostly not the test's. Fake pynvml counter."""
    from tests.support.telemetry_fakes import fake_pynvml

    nv = fake_pynvml(nvmlDeviceGetTotalEnergyConsumption=lambda h: int(time.time() * 700_000))
    src = tel.NvmlGpuSource(0, nvml=nv)
    obs = RunObserver(tmp_path / "trace.jsonl", [], baseline_s=0.2)
    obs._gpu_sources.append(src)
    obs.sampler = tel.Sampler([tel.HostSource(), src], rate_hz=10, trace_path=tmp_path / "trace.jsonl")
    obs.start()
    rows = []
    for k, timed_ns in ((1, 0.4e9), (2, 0.1e9)):  # the first timed as long as its window, the second not
        obs.line(f"llama-bench: benchmark {k}/2: prompt run 1/2")
        time.sleep(0.4)
        rows.append(obs.test({"n_prompt": 512, "n_gen": 0, "samples_ns": [timed_ns / 2, timed_ns / 2]}, 512))
    obs.finish()
    (whole,) = rows[0]["telemetry"]["gpus"].values()
    (untimed,) = rows[1]["telemetry"]["gpus"].values()
    assert whole["energy_valid"], whole
    assert not untimed["energy_valid"] and untimed["energy_invalid_reason"] == "window_holds_untimed_work"
    assert "energy-invalid:window_holds_untimed_work" in rows[1]["flags"]


def test_the_idle_baseline_is_waited_for_only_where_a_gpu_is_sampled(tmp_path):
    """The baseline's notes are about GPUs (another tenant before the run): a CPU image's run does not
    wait BASELINE_S for it (a default CPU bench waited ~1 s per llama-bench process); a GPU's run does."""
    cpu = RunObserver(tmp_path / "cpu.jsonl", [], baseline_s=1.0)
    t = time.monotonic()
    cpu.start()
    assert time.monotonic() - t < 0.5 and cpu.baseline is not None
    cpu.finish()
    gpu = _observer(tmp_path, FakeAmdHost(tmp_path / "sys").build())
    gpu.baseline_s = 1.0
    t = time.monotonic()
    gpu.start()
    assert time.monotonic() - t >= 1.0
    gpu.finish()


def test_cgroup_of_pid_finds_the_v2_tree_on_unified_and_hybrid_hosts(tmp_path):
    """A container's cgroup v2 directory (its cpu.stat: the container's CPU in one read) is found where
    cgroup2 is mounted at the root (Debian 12/13) and at <root>/unified (systemd's hybrid layout, this
    machine); a v1-only host and a cgroup without cpu.stat give None (the process-tree walk is used)."""
    from toolkit.bench.observe import cgroup_of_pid

    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "cgroup").write_text("12:cpu,cpuacct:/docker/abc\n0::/system.slice/docker-abc.scope\n")
    (proc / "8").mkdir()
    (proc / "8" / "cgroup").write_text("12:cpu,cpuacct:/docker/abc\n")
    unified = tmp_path / "unified-host"
    (unified / "system.slice" / "docker-abc.scope").mkdir(parents=True)
    (unified / "system.slice" / "docker-abc.scope" / "cpu.stat").write_text("usage_usec 1\n")
    hybrid = tmp_path / "hybrid-host"
    (hybrid / "unified" / "system.slice" / "docker-abc.scope").mkdir(parents=True)
    (hybrid / "unified" / "system.slice" / "docker-abc.scope" / "cpu.stat").write_text("usage_usec 1\n")
    assert cgroup_of_pid(7, proc, unified) == unified / "system.slice" / "docker-abc.scope"
    assert cgroup_of_pid(7, proc, hybrid) == hybrid / "unified" / "system.slice" / "docker-abc.scope"
    assert cgroup_of_pid(7, proc, tmp_path / "empty") is None
    assert cgroup_of_pid(8, proc, unified) is None
    assert cgroup_of_pid(9, proc, unified) is None
