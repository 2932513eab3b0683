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

MAX_TOKENS = 10**7
"""A token count (prompt, generation, depth, batch, context) above this is no test and no setting of
any engine (a unit or parser error; a 30-digit count broke the plots): refused by the matrix, the
validity pass of llama-bench rows and the records alike."""

MAX_TOKENS_PER_S = 1e9
"""tokens/s above this no hardware measured (a unit or parser error): refused by the validity pass and
the records."""

MIN_TOKENS_PER_S = 1e-6
"""tokens/s below this no benchmark measured (one token in 11.6 days; a 1e-151 tok/s row is a unit or
parser error, and values that far apart overflowed the report's arithmetic)."""

INT64 = (-(2**63), 2**63 - 1)
"""The range of every integer a record holds: what the query index (SQLite INTEGER) can store; a
record beyond it is refused when made and skipped with a warning when read (a line written before)."""
