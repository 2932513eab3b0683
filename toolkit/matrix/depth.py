"""Depth curves: a model's `depth:` block in matrix.yaml, and which depths fit a GPU.

A depth sweep measures prefill (pp) and decode (tg) with `n_depth` tokens already in the KV cache
(llama-bench `-d`), as public R9700/Strix Halo stacks publish them: one curve per image, x = depth.
It is its own llama-bench process per (image, model), beside the crossed `bench:` axes (crossing the
depths with every prompt length and micro-batch would multiply the sweep by the number of depths).

    models:
      - name: qwen3-30b-a3b-q4kxl
        depth:
          n_depth: [0, 4096, 8192, 16384, 32768]   # tokens in the KV cache before each test
          wide: false      # true: also 0 to 65536 in 8192 steps (WIDE_DEPTHS), public stacks' range
          n_prompt: [512]  # pp512 at each depth
          n_gen: [128]     # tg128 at each depth
          n_ubatch: 2048   # written by `toolkit tune --write` (absent: the bench's first n_ubatch)

`depth_axes` turns it into the BenchAxes of that process; `fit_depths` drops the depths whose KV
cache would not fit the GPU's memory, each with a one-line reason for the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

WIDE_DEPTHS: tuple[int, ...] = tuple(range(0, 65536 + 1, 8192))
"""`wide: true`: 0, 8192, ..., 65536 tokens, the range public stacks sweep (0-65536 in 8k steps)."""

MAX_DEPTH = 1_000_000
"""The largest depth a sweep takes, tokens (BenchAxes' bound for every token axis)."""


DEPTH_LOG_SUFFIX = "-depth"
"""What follows `<run_id>-<model>` in the log file name of a depth-sweep process (bench_one's
log_suffix): how a run's records say which of them its depth sweep measured (publish.sweeps)."""


class DepthSweep(BaseModel):
    """A model's depth sweep (tokens). n_depth: sorted, distinct, 0 to MAX_DEPTH; n_prompt / n_gen:
    the pp and tg tests run at each depth (at least one > 0); n_ubatch: the micro-batch of the sweep
    (`toolkit tune --write` writes it; None: the bench's first n_ubatch); wide: add WIDE_DEPTHS."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    n_depth: list[StrictInt] = Field(min_length=1)
    wide: bool = False
    n_prompt: list[StrictInt] = Field(default_factory=lambda: [512])
    n_gen: list[StrictInt] = Field(default_factory=lambda: [128])
    n_ubatch: StrictInt | None = Field(None, ge=1, le=MAX_DEPTH)

    @field_validator("n_depth")
    @classmethod
    def _depths(cls, v: list[int]) -> list[int]:
        bad = [d for d in v if not 0 <= d <= MAX_DEPTH]
        if bad:
            raise ValueError(f"depth {bad[0]} is out of range: give token counts from 0 to {MAX_DEPTH}")
        if v != sorted(set(v)):
            raise ValueError(f"{v}: give the depths once each, smallest first (e.g. [0, 4096, 8192])")
        return v

    @field_validator("n_prompt", "n_gen")
    @classmethod
    def _tests(cls, v: list[int]) -> list[int]:
        if any(not 0 <= x <= MAX_DEPTH for x in v) or len(set(v)) != len(v):
            raise ValueError(f"{v}: give distinct token counts from 0 to {MAX_DEPTH}, e.g. [512]")
        return v

    @model_validator(mode="after")
    def _some_test(self) -> DepthSweep:
        if not any(x > 0 for x in self.n_prompt + self.n_gen):
            raise ValueError("no test at any depth: give n_prompt (e.g. [512]) or n_gen (e.g. [128]) > 0")
        return self

    def depths(self) -> list[int]:
        """The depths this sweep asks for, tokens: n_depth, with WIDE_DEPTHS when `wide`."""
        return sorted(set(self.n_depth) | (set(WIDE_DEPTHS) if self.wide else set()))


def depth_axes(bench: Any, sweep: DepthSweep, depths: list[int] | None = None) -> Any:
    """The BenchAxes of a model's depth process: `bench` (the matrix's BenchAxes) with the sweep's
    n_prompt, n_gen and `depths` (default sweep.depths()), one micro-batch (sweep.n_ubatch, else the
    bench's first) and one batch (the largest, never below that micro-batch)."""
    ub = sweep.n_ubatch or bench.n_ubatch[0]
    return bench.model_copy(
        update={
            "n_prompt": list(sweep.n_prompt),
            "n_gen": list(sweep.n_gen),
            "n_depth": list(depths if depths is not None else sweep.depths()),
            "n_ubatch": [ub],
            "n_batch": [max([*bench.n_batch, ub])],
        }
    )


KV_TYPE_BYTES: dict[str, float] = {
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
    "iq4_nl": 18 / 32,
}
"""Bytes per element of each KV-cache type: ggml's block size / elements per block (ggml.c
type_traits at 0c1e57098: q8_0 34 bytes per 32, q4_0 18, q4_1 20, q5_0 22, q5_1 24, iq4_nl 18)."""


@dataclass(frozen=True)
class KvShape:
    """What sizes a model's KV cache: layers, KV heads, key and value head sizes (elements)."""

    n_layer: int
    n_head_kv: int
    key_length: int
    value_length: int

    def bytes_per_token(self, type_k: str = "f16", type_v: str = "f16") -> float:
        """KV-cache bytes one token takes (all layers, K and V), as llama.cpp allocates it."""
        per = self.n_layer * self.n_head_kv
        return per * (self.key_length * KV_TYPE_BYTES[type_k] + self.value_length * KV_TYPE_BYTES[type_v])


FIT_RESERVE_BYTES = 1 << 30
"""GPU memory kept free beside the weights and KV cache for compute buffers and the runtime, bytes
(an estimate: llama.cpp's compute buffer for ub 2048 on a 30B MoE is a few hundred MiB)."""


def fit_depths(
    depths: list[int],
    *,
    tokens: int,
    kv_per_token: float,
    model_bytes: int,
    gpu_bytes: int,
    memory: str = "GPU memory",
) -> tuple[list[int], list[str]]:
    """The depths whose model + KV cache (depth + `tokens`, the test's own prompt or generation) +
    FIT_RESERVE_BYTES fit in `gpu_bytes`, and a one-line reason per depth left out, naming the
    capacity as `memory` (e.g. "host memory" for a CPU image). Sizes in bytes."""
    kept, skipped = [], []
    for d in depths:
        kv = kv_per_token * (d + tokens)
        need = model_bytes + kv + FIT_RESERVE_BYTES
        if need <= gpu_bytes:
            kept.append(d)
        else:
            skipped.append(
                f"depth {d} skipped: model {_gib(model_bytes)} + KV cache {_gib(kv)} + reserve "
                f"{_gib(FIT_RESERVE_BYTES)} > {_gib(gpu_bytes)} of {memory}"
            )
    return kept, skipped


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB"
