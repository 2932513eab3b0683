"""The `vllm:` block of matrix.yaml: vLLM engine settings pinned for every vLLM run, registered in
toolkit.core.registry.SETTINGS like every runner's settings (the matrix core knows no runtime).
Flags: vLLM's `vllm serve` / `vllm bench` EngineArgs (shared/reference/vllm-and-sglang.md)."""

from __future__ import annotations

from pydantic import Field, field_validator

from toolkit.core.types import MAX_TOKENS
from toolkit.matrix.api import MAX_COUNT, StrictBlock


class VllmSettings(StrictBlock):
    """vLLM engine settings pinned for every vLLM run and recorded with each result.

    `quantization` None (the default): vLLM uses the method the checkpoint's config.json states
    (`quantization_config.quant_method`), which the toolkit reads and records. Set, it is passed as
    `--quantization` and must match the checkpoint (or be one of vLLM's kernel variants of its method);
    a mismatch is refused before any container starts (toolkit/models/checkpoint.py)."""

    max_num_batched_tokens: int = Field(8192, ge=1, le=MAX_TOKENS)
    max_model_len: int = Field(8192, ge=1, le=MAX_TOKENS)
    gpu_memory_utilization: float = Field(0.90, gt=0, le=1)
    quantization: str | None = None
    dtype: str = "float16"
    enforce_eager: bool = False
    enable_prefix_caching: bool = False
    # `--attention-backend` (an AttentionBackendEnum name, e.g. TRITON_ATTN); None: the release's default
    attention_backend: str | None = Field(None, pattern=r"^[A-Z][A-Z0-9_]{0,63}$")
    concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4, 8])
    num_prompts_per_level: int = Field(32, ge=1, le=MAX_COUNT)
    num_iters: int = Field(10, ge=1, le=MAX_COUNT)
    num_iters_warmup: int = Field(3, ge=0, le=MAX_COUNT)
    ready_timeout_s: float = Field(1800, gt=0, le=7 * 24 * 3600)

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        if any(c < 1 or c > MAX_COUNT for c in v):
            raise ValueError(f"concurrency levels must be from 1 to {MAX_COUNT}")
        if len(set(v)) != len(v):  # a level twice would be measured twice and shown as one test
            raise ValueError(f"concurrency {v} has duplicate levels; give each once, e.g. [1, 2, 4, 8]")
        if not v:
            raise ValueError("concurrency is empty; give at least one level, e.g. [1]")
        return v
