"""The project's vocabulary, named once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from toolkit.core.registry import RUNNERS

Backend = Literal["rocm", "vulkan", "cpu"]
"""Device profile / llama.cpp backend family of an image."""

if TYPE_CHECKING:
    # A Literal built from the registry at import time is no static type: the checker sees a str.
    Runner = str
else:
    Runner = Literal[tuple(RUNNERS)]  # the registry's names (toolkit/core/registry.py): pydantic checks them
"""Which benchmark program an image carries."""

# llama.cpp's own name for each backend, as it appears in llama-bench's `backends` field.

INT64 = (-(2**63), 2**63 - 1)
"""The range of every integer a record holds: what the query index (SQLite INTEGER) can store; a
record beyond it is refused when made and skipped with a warning when read (a line written before)."""
