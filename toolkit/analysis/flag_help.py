"""What each flag a result can carry means, in the words `toolkit report` prints under its tables
(one sentence per flag, its source named), and which telemetry flags keep a number from the verdict."""

from __future__ import annotations

from collections.abc import Iterable

FLAG_HELP = {
    "ub-clamped": "the asked n_ubatch exceeds n_batch or the timed prompt (n_prompt: a depth is filled before the "
    "clock starts): llama.cpp computes with the smaller effective micro-batch shown; the setting can still change buffers and speed "
    "(never said of decode rows: the micro-batch does not apply to tg)",
    "ub-no-effect": "measured: rows that differ only in n_ubatch gave equal tok/s within noise (2 x combined relative stddev, "
    "neither row noisy; prefill and pp+tg rows only)",
    "rpc-split": "llama-bench's `backends` names RPC: the build has ggml's RPC backend, which every row of it "
    "names whether or not --rpc was given (a one-GPU run of a release build prints `Vulkan,RPC`), so the row cannot "
    "say whether part of the model ran on another host's devices (rpc-server), which it would not name; the host "
    "line names the local GPU only: maybe a split run's number, not the local GPU's, so never marked best and held "
    "out of the verdict and of compare's counts",
    "cpu-fallback": "a GPU image ran on the CPU (failed run or backends without the GPU backend): not a GPU number",
    "software-gpu": "ran on a software Vulkan device (Mesa lavapipe): a smoke test, not a GPU number",
    "noisy": "relative standard deviation above the noise threshold (of the samples where the record states no "
    "stddev)",
    "warmup-outlier": "the first sample (of a process, where the cell combines several) is far slower than that "
    "process's others (> 10 % below their median and below their range by more than their spread): a warm-up "
    "effect; the median is the steadier figure",
    "runs-disagree": "repetitions of one test (bench.runs process starts, or rows of one import that measured the "
    "same test) differ by more than 3 x the within-run stddev and 5 %: the cell is their mean, report the spread",
    "bimodal-runs": "process-level repetitions fall into two groups (a known R9700 effect: decode speed fixed at "
    "process start)",
    "experimental": "measured with an experimental runtime (SGLang on gfx1201 needs an enablement patch series): "
    "a number to check, not to route production traffic on",
    "synthetic-twin": "measured on a shape twin of the real GGUF (same metadata, tensor names, shapes and types, "
    "random data with valid scales; toolkit fetch-model --twin), never mixed with real-model rows",
    "no-samples": "the imported format keeps no per-repetition samples (llama-bench -o md, sql, csv): no median or "
    "min–max, and a markdown table's numbers are rounded to 2 decimals",
    "no-build-commit": "imported from a markdown table without its `build:` line: the llama.cpp build is unknown",
    "no-batch-sizes": "imported from a markdown table that leaves n_ubatch out, and n_batch where it has no n_batch "
    "column (they held the build's defaults), of a build not known to be 2413 or later: before it llama-bench had "
    "no micro-batch and n_batch defaulted to 512, so they are unknown (not shown as ub512); import the run's -o "
    "jsonl for them",
    "stddev-recomputed": "the tool wrote a non-finite stddev (nan or inf); it was recomputed from the samples (or left empty)",
    "concurrent": "another toolkit benchmark ran on the same engine, or wrote the same results folder, while this "
    "was measured (--allow-concurrent): both slowed each other down",
    "clock-skew": "the clock of the host that wrote this record disagrees with the results folder's own order: its "
    "`created` lies more than 60 s before a record the folder stored earlier, or more than 5 min in the future. "
    "Runs are ordered by the folder's sequence number (`seq`, given at append time), never by these times, so the "
    "newest run is still the one written last; check that host's clock (`timedatectl`, NTP) before trusting dates",
    "bw-above-peak": "decode implies more memory bandwidth than the GPU's peak (caches, or a wrong model size): "
    "no measurement of the card, so never marked best and held out of the verdict and of compare's counts",
    "compute-above-peak": "prefill implies more FLOP/s than the GPU's dense FP16 matrix peak (2 FLOPs per active "
    "parameter and token, attention left out: an underestimate; a wrong parameter count or model type, or a broken "
    "timing): no measurement of the card, so never marked best and held out of the verdict and of compare's counts",
    "bw-below-floor": "decode implies implausibly little memory bandwidth (overhead-bound or misconfigured)",
    "host-outlier": "the same image digest measured on 3 or more hosts (campaign host keys): this host's tok/s lies "
    "beyond 3 x the spread of the other hosts' values (their range, at least their stddev) from their median",
    "gpu-shared": "another process ran compute on the GPU during the test (KFD entries with queues, NVML processes "
    "with SM use, not the benchmark's; with process counts only, more than one): the GPU was shared, the number is "
    "not the GPU's; no tok/J either (the board's energy counts the other process's work too)",
    "gpu-memory-held": "another process held memory on the GPU during the test but ran nothing on it: the speed is "
    "the card's; less memory was free",
    "sensor-implausible": "a sensor reading outside its physical range (power, clock, temperature, busy, CPU pressure) "
    "was dropped from the test's figures: a driver or read glitch; the rest stands",
    "sensor-dropped": "a GPU sensor read did not return within its time box (a wedged sysfs file or driver call): "
    "the GPU was not sampled from then on, so the test has no GPU telemetry or energy",
    "undersampled": "the telemetry sampler achieved under half its rate around the test (a loaded host): the "
    "test's figures rest on too few readings",
    "throttled": "the GPU reported throttling in at least a quarter of the test's samples (NVML clock-event reasons; "
    "AMD SMU14 throttle bits, TEMP_HOTSPOT masked: set at all times on the R9700, ROCm/rocm-systems#11781); the "
    "reason follows the colon (sw-power-cap, hw-thermal, ppt0 = held at the power cap, ...)",
    "clock-idle": "the GPU was busy while its gfx clock stayed at idle (ROCm#6289): the number is not the card's",
    "power-not-stock": "the GPU ran below its default power cap, with a forced performance level, a non-default power "
    "profile or overdrive offsets: not a stock-card number",
    "host-busy": "processes other than the benchmark used the host's CPUs during the test where the cores were "
    "oversubscribed (above 0.5 core on average and, with the benchmark's own, above 90 % of the host's cores), or "
    "steal above 10 % of the time, or CPU pressure above 20 % while other processes used over 0.5 core: the host "
    "was busy, the number may be low",
    "energy-invalid": "no energy figure for this test: the reason follows the colon (window shorter than the power "
    "sensor's averaging or 15 energy-counter steps allow, samples not bracketing the window, a sampling gap, no power "
    "source, a counter that jumped or disagrees with the power reading, no test edges without --progress, a window "
    "holding work llama-bench does not time: its depth restores at n_depth > 0)",
    "flag-unsupported": "the record carries the flag after the colon, but its own data shows nothing that raises "
    "it: a telemetry flag its stored telemetry does not raise (by the rule `toolkit bench` raises it by, or the "
    "least any earlier rule needed), a flag the report raises itself from the record's fields (cpu-fallback, "
    "bw-above-peak, ...: never stored), or one the record's fields contradict (no-samples beside its samples): a "
    "hand edit or another tool's file; it holds nothing (a flag the data does raise is shown, stored or not)",
    "no-matrix-cores": "a Vulkan run on an RDNA4 GPU (gfx12xx) whose llama.cpp chose no matrix cores (its GPU-path "
    "probe read `matrix cores: none` from ggml's device line: scalar matmul shaders, not the card's WMMA; Mesa "
    "older than 25.1.0, or GGML_VK_DISABLE_COOPMAT=1): not what the card can do",
    "stale-build": "measured with --allow-stale: the image was built from other inputs (template, vars, source) "
    "than matrix.yaml and the templates give now (image.inputs_key vs image.current_inputs_key)",
    "tune-trial": "a `toolkit tune` trial (a short search run, its session and round stored with it): a test only "
    "tune measured (a trial never replaces a bench run of its test); `toolkit bench` measures the matrix's settings",
    "wrong-output": "the image's correctness canary failed on this model (toolkit.bench.canary: the perplexity of a "
    "fixed text, by llama-perplexity or vLLM's prompt log-probabilities, was NaN, from equal logits, or more than "
    "5 % off the CPU control's): its output is wrong, "
    "its speed counts for nothing and the verdict leaves it out (the result: the record's `canary`)",
}


# Telemetry flags that say a number is not the card's alone (the verdict names them and will not
# crown a cell that carries one: toolkit.analysis.verdict); energy-invalid says nothing about speed.
TELEMETRY_VERDICT_FLAGS = (
    "gpu-shared",
    "throttled",
    "clock-idle",
    "power-not-stock",
    "host-busy",
    "undersampled",
)

# The flag of a roofline fraction above 1 (facts._flags: above what every GPU the run used could do
# together), per roofline metric: a number no card can produce.
ABOVE_PEAK_FLAGS = {"bandwidth": "bw-above-peak", "compute": "compute-above-peak"}

# Flags that hold a cell (Facts.held_flags): never a row's best, never the verdict's crown or a route,
# never counted by compare as faster or as a regression (toolkit.analysis.verdict, tables, compare).
RPC_FLAG = "rpc-split"
"""The flag of a record whose model was split over an RPC server's devices (facts.rpc_split)."""

HELD_FLAGS = (*TELEMETRY_VERDICT_FLAGS, *ABOVE_PEAK_FLAGS.values(), RPC_FLAG)

# What the verdict and compare say of held cells, per kind of held flag: `flags` their name, `rests`
# what a lead on them rests on, `fix` what to do, `against` what a margin over them is taken against.
HELD_WORDS: dict[str, dict[str, str]] = {
    "telemetry": {
        "flags": "telemetry",
        "rests": "numbers that are not the device's alone (the GPU's, or the CPU's for a CPU image)",
        "fix": "measure again with the GPU and host to itself",
        "against": "numbers that are not that device's alone and may overstate it",
    },
    "above-peak": {
        "flags": "above-peak",
        "rests": "numbers beyond what the GPU can do (no measurement of the card)",
        "fix": "check the model's size and parameter count, the GPU named and the timing",
        "against": "numbers beyond that GPU's peak (no measurement of the card)",
    },
    "rpc": {
        "flags": "rpc-split",
        "rests": "numbers of a build with RPC, whose rows do not say whether the model was split over another "
        "host's devices, not known to be the local GPU's alone",
        "fix": "measure each image on the local GPU alone (llama-bench without --rpc) with a build without RPC "
        "(GGML_RPC off), whose rows then say so",
        "against": "numbers that may be of a model split over another host's devices (RPC)",
    },
}
_HELD_KINDS = (
    ("telemetry", set(TELEMETRY_VERDICT_FLAGS)),
    ("above-peak", set(ABOVE_PEAK_FLAGS.values())),
    ("rpc", {RPC_FLAG}),
)


# The telemetry words for cells that all ran on one kind of device (ran_on): what a CPU image's
# host-busy number is not (the CPU's), and that there is no GPU to free for it.
TELEMETRY_WORDS_ON: dict[str, dict[str, str]] = {
    "cpu": {
        "rests": "numbers that are not the CPU's alone",
        "fix": "measure again with the host to itself",
        "against": "numbers that are not that CPU's alone and may overstate it",
    },
    "gpu": {
        "rests": "numbers that are not the GPU's alone",
        "fix": "measure again with the GPU and host to itself",
        "against": "numbers that are not that GPU's alone and may overstate it",
    },
}


def held_words(flags: Iterable[str], part: str, ran_on: Iterable[str] = ()) -> str:
    """`part` (flags | rests | fix | against) of HELD_WORDS for the kinds of held flags among `flags`,
    joined (`telemetry and above-peak flags`); the telemetry words where `flags` holds neither.
    `ran_on`: what the flagged cells ran on (`cpu` / `gpu`, facts.ran_on): where it is one kind, the
    telemetry words name that device (a CPU image's are never told to free a GPU); else both."""
    names = {x.split(":", 1)[0] for x in flags}
    kinds = [k for k, group in _HELD_KINDS if names & group] or ["telemetry"]
    if part == "flags":
        return " and ".join(HELD_WORDS[k]["flags"] for k in kinds) + " flags"
    devices = set(ran_on)
    on = TELEMETRY_WORDS_ON.get(next(iter(devices))) if len(devices) == 1 else None
    words = [on[part] if on and k == "telemetry" else HELD_WORDS[k][part] for k in kinds]
    return ("; " if part == "fix" else " and ").join(words)
