"""Container memory sizes as matrix.yaml writes them (`bench.memory: 24g`), read as the engine reads
them: `memory_bytes`, with the engine's bounds."""

from __future__ import annotations

import re

_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?$", re.I)


MIN_MEMORY_BYTES = 6 * 1024 * 1024
"""The engine's minimum container memory limit (Docker 20.10+; below it `docker run` refuses)."""


MAX_MEMORY_BYTES = 2**63 - 1
"""The engine reads the limit as an int64 of bytes; a larger number is a 400 error from its API."""


def memory_bytes(value: str) -> int:
    """A docker-style memory size ("512m", "24g", "1.5g", "1073741824") in bytes (units are powers of
    1024, as `docker run --memory` reads them). Raises ValueError naming the accepted forms and the
    range: MIN_MEMORY_BYTES (6 MiB, the engine's own minimum) to MAX_MEMORY_BYTES (int64)."""
    from fractions import Fraction

    m = _MEMORY.match(str(value).strip()[:64])
    if not m or len(str(value).strip()) > 64:
        raise ValueError(f"memory {value!r} is not a size; write e.g. 512m, 24g or a number of bytes")
    digits, unit = m.group(1), " kmgt".index((m.group(2) or " ").lower())
    # exact (a float would round 2**63-1 up); a number of more than 20 digits is too large whatever its unit
    n = (
        MAX_MEMORY_BYTES + 1
        if len(digits.split(".")[0].lstrip("0")) > 20
        else int(Fraction(digits) * 1024**unit)
    )
    if not MIN_MEMORY_BYTES <= n <= MAX_MEMORY_BYTES:
        raise ValueError(
            f"memory {value!r} is out of range: Docker takes 6m (its minimum) to {MAX_MEMORY_BYTES} "
            "bytes (int64); write e.g. 512m or 24g"
        )
    return n
