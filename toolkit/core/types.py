"""The project's vocabulary, named once."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Literal, TypeGuard

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

MAX_THREADS = 1 << 22
"""A thread count above this is no test's: 4,194,304 is PID_MAX_LIMIT, the most tasks (processes and
threads together) a 64-bit Linux kernel can hold at once (include/linux/threads.h)."""

MAX_CPUS = 8192
"""Online CPUs above this no host has: 8,192 is the largest CONFIG_NR_CPUS a Linux kernel is built with
(x86-64 MAXSMP, arch/x86/Kconfig NR_CPUS_RANGE_END)."""

MAX_TOKENS_PER_S = 1e9
"""tokens/s above this no hardware measured (a unit or parser error): refused by the validity pass and
the records."""

MIN_TOKENS_PER_S = 1e-6
"""tokens/s below this no benchmark measured (one token in 11.6 days; a 1e-151 tok/s row is a unit or
parser error, and values that far apart overflowed the report's arithmetic)."""

MIN_TOKEN_S = 1e-5
"""The least time one generated token takes (s): generated tokens come one after another, each a
forward pass of the model over its context (llama-bench's tg and pp+tg tests decode one sequence; a
vLLM request's output tokens likewise). The tiny stand-in model (0.79 M parameters) decodes at 7,800
tok/s in llama-bench on this host's CPU (128 us a token: tests/data/llamabench-0c1e57098-cpu.md); 10
us leaves a factor of ten below that. A tg test is thus at most 1 / MIN_TOKEN_S = 100,000 tok/s on any
hardware, GPU or CPU, known or not; a prompt's micro-batches are forward passes one after another too
(llama_bench.check.forward_passes)."""

INT64 = (-(2**63), 2**63 - 1)
"""The range of every integer a record holds: what the query index (SQLite INTEGER) can store; a
record beyond it is refused when made and skipped with a warning when read (a line written before)."""


_SHA256 = re.compile(r"[0-9a-f]{64}")


def is_sha256(text: object) -> TypeGuard[str]:
    """Whether `text` is a sha256 as `sha256sum` prints it, whole: 64 lowercase hex digits, no more."""
    return isinstance(text, str) and _SHA256.fullmatch(text) is not None


def is_image_id(text: object) -> TypeGuard[str]:
    """Whether `text` is an image ID (an engine's or registry's digest) as the engines write it, whole:
    `sha256:` and a sha256 (is_sha256); False for a prefix, a name, upper case, a trailing newline."""
    return isinstance(text, str) and text.startswith("sha256:") and is_sha256(text[7:])


def utc_now() -> str:
    """This moment in UTC, ISO 8601 to the second (`2026-12-06T11:24:21+00:00`): a record's `created`,
    a published run's `exported`, a push's `pushed_at`."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
