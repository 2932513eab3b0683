"""The project's vocabulary, named once."""

from __future__ import annotations

from typing import Literal

from toolkit.core.registry import RUNNERS

Backend = Literal["rocm", "vulkan", "cpu"]
"""Device profile / llama.cpp backend family of an image."""

Runner = Literal[tuple(RUNNERS)]  # type: ignore[valid-type]  # the registry's names (toolkit/runners)
"""Which benchmark program an image carries."""

Axis = Literal["prefill", "decode", "mixed", "served"]
"""prefill = pp tests (n_gen 0), decode = tg tests (n_prompt 0), mixed = pp+tg, served = vLLM serving."""

Status = Literal["ok", "failed", "skipped"]

# llama.cpp's own name for each backend, as it appears in llama-bench's `backends` field.
