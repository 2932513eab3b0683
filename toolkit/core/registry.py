"""Runner plug-ins: name -> the class that benchmarks images carrying that program.

Adding a runtime = one runner module here (see base.Runner) + one entry in RUNNERS + one template +
an image entry in matrix.yaml + its tests (README, "Adding a runtime"). Modules are imported when a
runner is first asked for, so loading the registry costs nothing and imports nothing of the toolkit.
"""

from __future__ import annotations

import importlib
from typing import Any

RUNNERS: dict[str, str] = {
    "llama-bench": "toolkit.bench.runners.llama_bench:LlamaBenchRunner",
    "vllm": "toolkit.bench.runners.vllm:VllmRunner",
    "sglang": "toolkit.bench.runners.sglang:SglangRunner",
}
"""matrix.yaml `runner:` value -> "module:class" of its Runner."""

SETTINGS: dict[str, str] = {
    "vllm": "toolkit.runtimes.vllm.settings:VllmSettings",
    "sglang": "toolkit.runtimes.sglang.args:SglangSettings",
}
"""matrix.yaml top-level block -> "module:class" of the pydantic model that validates it, for runners
with settings of their own (toolkit/runtimes/<runtime>/)."""

_loaded: dict[str, Any] = {}


def settings_model(key: str) -> Any:
    """The pydantic model class of runner settings block `key` (see SETTINGS)."""
    mod, cls = SETTINGS[key].split(":")
    return getattr(importlib.import_module(mod), cls)


def names() -> tuple[str, ...]:
    """The runner names matrix.yaml accepts."""
    return tuple(RUNNERS)


def get(name: str) -> Any:
    """The Runner for `name` (an instance); KeyError naming the known runners when unknown."""
    if name not in _loaded:
        if name not in RUNNERS:
            raise KeyError(f"unknown runner {name!r}; known: {', '.join(RUNNERS)}")
        mod, cls = RUNNERS[name].split(":")
        _loaded[name] = getattr(importlib.import_module(mod), cls)()
    return _loaded[name]
