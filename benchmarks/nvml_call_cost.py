"""CPU cost of each NVML call the telemetry sampler makes (not a test; run on an NVIDIA host with
nvidia-ml-py): 40 calls each with a 10-ms and a 100-ms (the sampler's 10 Hz) gap, median wall and
process CPU ms per call. Found with it: nvmlDeviceGetTotalEnergyConsumption costs ~3.5 ms of CPU per
call on the H200 when called at 10 Hz (docs/performance.md).

    python3 benchmarks/nvml_call_cost.py
"""

from __future__ import annotations

import statistics
import time

import pynvml as n


def main() -> None:
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    calls = {
        "GetUtilizationRates": lambda: n.nvmlDeviceGetUtilizationRates(h),
        "GetComputeRunningProcesses": lambda: n.nvmlDeviceGetComputeRunningProcesses(h),
        "GetTotalEnergyConsumption": lambda: n.nvmlDeviceGetTotalEnergyConsumption(h),
        "GetPowerUsage": lambda: n.nvmlDeviceGetPowerUsage(h),
        "GetClockInfo(SM)": lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
        "GetTemperature": lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
        "GetPerformanceState": lambda: n.nvmlDeviceGetPerformanceState(h),
        "GetCurrentClocksEventReasons": lambda: n.nvmlDeviceGetCurrentClocksEventReasons(h),
        "GetEnforcedPowerLimit": lambda: n.nvmlDeviceGetEnforcedPowerLimit(h),
    }
    for name in (
        "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "NVML_FI_DEV_POWER_INSTANT",
        "NVML_FI_DEV_POWER_AVERAGE",
    ):
        if hasattr(n, name):
            fid = getattr(n, name)
            calls[f"GetFieldValues({name})"] = lambda fid=fid: n.nvmlDeviceGetFieldValues(h, [fid])
    for gap in (0.01, 0.1):
        for k, f in calls.items():
            ts = []
            for _ in range(40):
                c0, t = time.process_time(), time.perf_counter()
                try:
                    r = f()
                except n.NVMLError as e:
                    r = e
                ts.append((time.perf_counter() - t, time.process_time() - c0))
                time.sleep(gap)
            if isinstance(r, list):
                r = [(v.nvmlReturn, v.value.ullVal, v.value.uiVal) for v in r]
            print(
                f"gap {gap:g} s {k}: wall {statistics.median(x[0] for x in ts) * 1e3:.3f} ms, "
                f"cpu {statistics.median(x[1] for x in ts) * 1e3:.3f} ms, last {r}"
            )


if __name__ == "__main__":
    main()
