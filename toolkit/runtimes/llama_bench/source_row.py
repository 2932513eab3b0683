"""The row every llama-bench reader gives (readers.py, json_array.py): SourceRow."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SourceRow:
    """One result row as a reader found it: `line` (1-based, where it starts in the file), `fields`
    (typed as llama-bench types them), `fmt` (jsonl | json | csv | md | sql), `problem` (what the
    reader alone can see is wrong with it: a field count that differs from the header), `notes`
    (what the format could not say: `no samples`, `no build commit`)."""

    line: int
    fields: dict[str, Any]
    fmt: str
    problem: str | None = None
    notes: list[str] = field(default_factory=list)
