"""Every number physically possible, every flag where the effect is (issue 31): sensor values outside
their physical range are dropped and flagged, an energy counter that jumps, runs backwards, disagrees
with the integrated power or steps too coarsely for the window gives no energy, host load is judged
against the cores the host has, and a window sampled at half the rate says so. Synthetic samples of
the shapes the issue reported (an H200's 100-ms counter, 1e9 W, PSI 117.5 %)."""

from __future__ import annotations

import time

import pytest

from toolkit.analysis.energy import COUNTER_MIN_STEPS, PLAUSIBLE
from toolkit.bench.observe import window_summary
from toolkit.host.telemetry import update_period
from toolkit.results.telemetry_check import ENERGY_AGREE_TOL
from toolkit.results.telemetry_flags import window_flags


def nv(t: float, power: float | None = 300.0, energy: float | None = None, **kw) -> dict:
    return {"t": t, "source": "nv", "vendor": "nvidia", "power_w": power, "energy_j": energy, **kw}


def steady(t1: float = 4.0, power: float = 300.0, step: float = 0.1, **kw) -> list[dict]:
    return [nv(i * step, power, i * step * power, **kw) for i in range(round(t1 / step) + 1)]


def gpu(s: dict) -> dict:
    return s["gpus"]["nv"]


@pytest.mark.parametrize(
    ("key", "bad"),
    [("power_w", 1e9), ("power_w", 0.000225), ("sclk_mhz", 1e12), ("temp_gpu_c", 1e9), ("busy_pct", 1e9)],
)
def test_an_impossible_sensor_value_is_dropped_and_the_window_flagged(key, bad):
    ss = steady(sclk_mhz=1980.0, temp_gpu_c=60.0, busy_pct=99.0)
    ss[20] = {**ss[20], key: bad}
    s = window_summary(ss, 1.0, 3.0, tokens=600)
    g = gpu(s)
    assert g["implausible"] == {key: 1} and "sensor-implausible" in window_flags(s)
    assert g["power_w_max"] == pytest.approx(300.0) and g["sclk_mhz_max"] == 1980.0
    assert g["temp_max_c"] == {"temp_gpu_c": 60.0} and g["busy_pct_mean"] == pytest.approx(99.0)
    assert g["energy_valid"] and g["energy_j"] == pytest.approx(600.0)  # the good samples still give it
    assert "sensor-implausible" not in window_flags(window_summary(steady(), 1.0, 3.0))
    assert PLAUSIBLE["power_w"][0] <= 300.0 <= PLAUSIBLE["power_w"][1]


def test_a_counter_that_jumps_by_2_31_counts_or_wraps_backwards_gives_no_counter_energy():
    jump = steady()
    for x in jump[20:]:
        x["energy_j"] += 2**31 * 2**-16 * 100  # a 3.3 MJ step in 0.1 s: no board draws that
    g = gpu(window_summary(jump, 1.0, 3.0))
    assert g["energy_counter_invalid_reason"] == "counter_implausible_step"
    assert g["energy_source"] == "integrated-average-power"  # the power reading still measures it
    back = steady()
    for x in back[20:]:
        x["energy_j"] -= 50.0
        x["energy_wrap_j"] = 65536.0  # read as a u32 wrap, the step would be 65 kJ in 0.1 s
    g = gpu(window_summary(back, 1.0, 3.0))
    assert g["energy_counter_invalid_reason"] == "counter_implausible_step"


def test_counter_energy_that_disagrees_with_the_integrated_power_is_invalid():
    ss = steady()
    for x in ss:
        x["energy_j"] *= 1 + 2 * ENERGY_AGREE_TOL  # the counter says 30 % more than the power did
    s = window_summary(ss, 1.0, 3.0)
    assert gpu(s)["energy_invalid_reason"] == "counter_disagrees_with_power" and s["tok_per_j"] is None
    assert "energy-invalid:counter_disagrees_with_power" in window_flags(s)


def test_a_window_of_few_counter_steps_gets_no_energy_and_a_long_one_does():
    """NVML's counter on an H200 advances every ~100 ms (energy_step_s, measured before the run): a
    0.22-s pp512 window is two steps, so its tok/J swung 29-51 across sweeps; refused now."""
    ss = steady(t1=4.0, step=0.02, energy_step_s=0.1)
    for x in ss:
        x["energy_j"] = int(x["t"] / 0.1) * 0.1 * 300.0  # the counter holds between its 100-ms steps
    short = window_summary(ss, 1.01, 1.23, tokens=512)
    assert gpu(short)["energy_invalid_reason"] == "window_short_for_counter_step"
    assert short["tok_per_j"] is None
    long = window_summary(ss, 0.5, 0.5 + COUNTER_MIN_STEPS * 0.1 + 0.05, tokens=512)
    assert gpu(long)["energy_source"] == "counter" and gpu(long)["energy_step_s"] == 0.1


def test_update_period_measures_a_stepped_counter():
    start = time.monotonic()
    step = update_period(lambda: int((time.monotonic() - start) / 0.05), duration_s=0.4, interval_s=0.002)
    assert step == pytest.approx(0.05, abs=0.01)
    assert update_period(lambda: 7, duration_s=0.05) is None  # stands still: unknown, nothing refused


def host(t: float, busy: float, own: float | None, cpus: int, psi_us: float = 0.0) -> dict:
    return {
        "t": t,
        "source": "host",
        "cpu_busy_s": busy,
        "own_cpu_s": own,
        "cpu_total_s": cpus * t,
        "steal_s": 0.0,
        "psi_some_us": psi_us,
        "cpus_online": cpus,
    }


def host_window(own: float, other: float, cpus: int, psi_pct: float = 0.0, every: int = 1) -> dict:
    ss = [
        host(i / 10, (own + other) * i / 10, own * i / 10, cpus, psi_pct * 1e4 * i / 10)
        for i in range(0, 101, every)
    ]
    return window_summary(ss, 2.0, 9.0, rate_hz=10.0)


def test_host_busy_is_judged_against_the_cores_the_host_has():
    """A GPU benchmark's one core beside 3 busy neighbour cores on a 16-core host: no contention (issue
    31: tok/s unchanged, every row was flagged); llama-bench's two threads on this 2-core machine with
    one competing thread: contention."""
    assert "host-busy" not in window_flags(host_window(own=1.0, other=3.0, cpus=16))
    assert "host-busy" in window_flags(host_window(own=2.0, other=1.0, cpus=2))
    assert "host-busy" in window_flags(host_window(own=15.0, other=1.0, cpus=16))


def test_a_short_first_window_is_not_widened_into_the_engine_starting_the_container():
    """CI's 2-core VM (and this machine, idle) flagged the first test of an idle run: its 40-ms window
    was widened back 1 s into the engine starting the container (runc and the daemons: one core for
    0.3 s, counted as other processes because the benchmark's own CPU was not known yet). The widening
    stops at the first sample that knows the benchmark's CPU; a neighbour burning a core while the
    benchmark runs is still seen in the same short window."""
    start = [host(i / 10, 1.0 * i / 10, None, 2) for i in range(0, 4)]  # the engine: 1 core, own unknown
    t_own = 0.4

    def run(other: float) -> dict:
        ss = start + [
            host(t_own + i / 10, 0.4 + (1.0 + other) * i / 10, 1.0 * i / 10, 2, 1e4 * 30 * i / 10)
            for i in range(0, 4)
        ]
        return window_summary(ss, 0.66, 0.70, rate_hz=10.0)  # 40 ms, 0.26 s after the container started

    idle = run(other=0.0)
    assert idle["host"]["other_cpu_cores_mean"] == pytest.approx(0.0, abs=1e-9), idle["host"]
    assert "host-busy" not in window_flags(idle)
    assert "host-busy" in window_flags(run(other=1.0))


def test_cpu_pressure_above_100_percent_is_dropped_not_believed():
    s = host_window(own=1.0, other=0.0, cpus=16, psi_pct=117.5)
    assert s["host"]["psi_some_pct"] is None and s["host"]["implausible"] == {"psi_some_pct": 1}
    assert window_flags(s) == ["sensor-implausible"]


def test_a_window_sampled_at_under_half_the_rate_is_undersampled():
    assert "undersampled" not in window_flags(host_window(own=1.0, other=0.0, cpus=16))
    s = host_window(own=1.0, other=0.0, cpus=16, every=3)  # 3.3 of 10 samples a second
    assert s["host"]["achieved_hz"] == pytest.approx(3.3, abs=0.4) and "undersampled" in window_flags(s)


def test_a_wedged_sensor_file_drops_its_gpu_and_never_stops_the_run(tmp_path):
    """A read that blocks (a wedged GPU's sysfs file: here a FIFO nobody writes, whose open blocks as
    such a read does) hung `toolkit measure` and bench before the command started (issue 31). Every
    read is time-boxed: the GPU is dropped, said up front, and the windows are flagged."""
    import os

    from tests.support.telemetry_fakes import FakeAmdHost
    from toolkit.bench.observe import RunObserver
    from toolkit.host import telemetry as tel

    host = FakeAmdHost(tmp_path / "sys").build()
    busy = host.device / "gpu_busy_percent"
    busy.unlink()
    os.mkfifo(busy)
    obs = RunObserver(tmp_path / "trace.jsonl", [], baseline_s=0.2)
    src = tel.AmdGpuSource(host.device, kfd_root=host.kfd, module_params=host.module_params)
    obs._gpu_sources.append(src)
    obs.sampler = tel.Sampler([tel.HostSource(), src], rate_hz=20, read_timeout_s=0.3)
    t0 = time.monotonic()
    obs.start()
    assert time.monotonic() - t0 < 5
    time.sleep(0.3)
    seen = obs.test({"n_prompt": 0, "n_gen": 16, "samples_ns": [1]}, 16)
    obs.finish()
    assert src.id in obs.sampler.dropped and "did not return within 0.3 s" in obs.sampler.dropped[src.id]
    assert "sensor-dropped" in seen["flags"]
    assert seen["telemetry"]["host"]["samples"] > 0  # the host is still sampled
