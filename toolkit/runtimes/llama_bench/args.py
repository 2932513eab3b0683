"""llama-bench's command line, written and read back from ONE flag table.

`bench_args(axes, model)` builds the argument list `toolkit bench` runs (and a Slurm/Kubernetes job
writes); `axes_from_args(argv)` reads the axes back from a recorded command (`toolkit publish` and
`reproduce` rebuild a run's matrix from it). Flags and defaults: llama.cpp's
tools/llama-bench/llama-bench.cpp (`print_usage`, `cmd_params_defaults`) and
shared/reference/llama-bench.md. List-valued flags are comma-separated and crossed by llama-bench.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolkit.core.errors import BadInput
from toolkit.matrix.api import CASE_DEFAULTS, BenchAxes


@dataclass(frozen=True)
class Flag:
    """One llama-bench flag <-> one BenchAxes field. `many`: a comma-separated list of ints (crossed
    by llama-bench), else one int. `omit`: values at which the flag is left out (llama-bench's own
    default, so older builds without the flag still run)."""

    flag: str
    axis: str
    many: bool = True
    omit: tuple[Any, ...] = ()
    kind: type = int  # the values' type when read back (str: cache types, split modes)


FLAGS: tuple[Flag, ...] = (
    Flag("-p", "n_prompt"),
    Flag("-n", "n_gen"),
    Flag("-b", "n_batch"),
    Flag("-ub", "n_ubatch"),
    Flag("-fa", "flash_attn"),  # 1, not `on`: older builds read a word as false
    Flag("-ngl", "n_gpu_layers"),
    Flag("-r", "repetitions", many=False),
    Flag("-d", "n_depth", omit=([0],)),
    # llama-bench's defaults (cmd_params_defaults at 0c1e57098) are left out: older builds still run
    Flag("-ctk", "type_k", omit=([CASE_DEFAULTS["type_k"]],), kind=str),
    Flag("-ctv", "type_v", omit=([CASE_DEFAULTS["type_v"]],), kind=str),
    Flag("-sm", "split_mode", omit=([CASE_DEFAULTS["split_mode"]],), kind=str),
    Flag("-ncmoe", "n_cpu_moe", omit=([CASE_DEFAULTS["n_cpu_moe"]],)),
    Flag("-t", "threads", many=False, omit=(None, 0)),
    Flag("--delay", "cooldown_s", many=False, omit=(None, 0)),
)
"""The axes toolkit passes to llama-bench, in the order the command line gives them."""

OUTPUT_ARGS = ["-o", "jsonl", "--progress"]
"""JSONL rows on stdout; `--progress` lines on stderr give each test's window (bench/observe.py)."""


def bench_args(axes: BenchAxes, model_path: str, *, device: str | None = None) -> list[str]:
    """The llama-bench argument list (argv[1:]) for the crossed matrix `axes`, JSONL on stdout.

    `device`: `-dev` (e.g. `none` for a CPU control). Raises BadInput for a model path with a comma:
    llama-bench splits `-m` values on commas (one model per part)."""
    if "," in model_path:
        raise BadInput(
            f"model file {model_path!r}: llama-bench splits -m on commas and would look for "
            f"{len(model_path.split(','))} models; rename the file without commas"
        )
    args = ["-m", model_path]
    for f in FLAGS:
        value = getattr(axes, f.axis)
        if value in f.omit:
            continue
        args += [f.flag, ",".join(str(v) for v in value) if f.many else str(value)]
    if device:
        args += ["-dev", device]
    return args + OUTPUT_ARGS


_BY_FLAG = {f.flag: f for f in FLAGS}


def axes_from_args(argv: Sequence[str]) -> dict[str, Any]:
    """The axes of a recorded command (`docker run ... llama-bench -p 64,256 ...`): {BenchAxes field:
    value} for every flag of FLAGS after `llama-bench`; {} without it. A value that is not of its
    flag's kind (an integer list where one is expected) is left out: the caller then falls back on the
    records."""
    if "llama-bench" not in argv:
        return {}
    argv = list(argv)[list(argv).index("llama-bench") + 1 :]
    axes: dict[str, Any] = {}
    for flag, val in zip(argv, argv[1:], strict=False):
        f = _BY_FLAG.get(flag)
        if f is None:
            continue
        try:
            axes[f.axis] = [f.kind(x) for x in val.split(",")] if f.many else f.kind(val)
        except ValueError:
            continue
    return axes
