"""A llama-bench row's device settings held to what llama.cpp can run (check.check_row reads this).

- `n_gpu_layers` below -1: llama.cpp documents -1 as "all layers" (shared/reference/llama-bench.md:
  `-ngl` default -1 since 2026; real rows carry -1) and no other negative; a builder before that read a
  negative count as none offloaded (i_gpu_start = n_layer - n_gpu_layers), one after it as all, so
  -7 names no setting a reader can tell (CPU or every layer on the GPU).
- `main_gpu` at or past the GPU devices the row lists, with `split_mode` none: llama.cpp refuses to load
  the model then (llama_model_load: "invalid value for main_gpu: N (available devices: M)"), so no test
  ran. The devices: the row's `devices` list (`-dev`, "/"-separated) where it names some, else its
  `gpu_info` (llama-bench joins every GPU device's description with ", ": gpuspecs.split_gpu_info; builds
  before the device registry of late 2024 and ik_llama.cpp with "/": both are counted, so a description
  holding "/" can only count more devices, never refuse a real row). Rows over RPC
  (their remote devices are not in gpu_info) and other split modes (layer ignores main_gpu) are not held.
"""

from __future__ import annotations

from typing import Any

from toolkit.core.gpuspecs import split_gpu_info


def _int(v: Any) -> int | None:
    """A whole number from an int, a whole float or its text; None otherwise (check._field_types judges it)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    try:
        f = float(str(v).strip())
    except ValueError:
        return None
    return int(f) if f.is_integer() else None


def _devices(fields: dict[str, Any]) -> int | None:
    """How many GPU devices the row says it could use: its `devices` (`-dev`), else its gpu_info; None when
    it names none (a CPU row, an md table without gpu_info) or runs over RPC."""
    if "rpc" in str(fields.get("backends") or "").lower():
        return None
    dev = str(fields.get("devices") or "").strip()
    if dev and dev.lower() not in ("auto", "none"):
        return len([d for d in dev.split("/") if d.strip()])
    info = fields.get("gpu_info")
    if not isinstance(info, str) or not info.strip():
        return None
    # llama-bench before the device registry (2024) and ik_llama.cpp join the descriptions with "/"
    # (get_gpu_info: `id += "/"`), mainline since with ", ": counting both never counts too few devices
    return sum(len([d for d in part.split("/") if d.strip()]) or 1 for part in split_gpu_info(info))


def settings_problem(fields: dict[str, Any]) -> str | None:
    """Why llama-bench row `fields`' n_gpu_layers or main_gpu is no setting a test ran with (see the
    module), None where it can be."""
    ngl = _int(fields.get("n_gpu_layers"))
    if ngl is not None and ngl < -1:
        return (
            f"n_gpu_layers is {ngl}: llama.cpp reads -1 as all layers and no other negative (builds before 2026 "
            "offloaded none, later ones all): not a setting a test ran with"
        )
    main = _int(fields.get("main_gpu"))
    if main is None or main < 0 or str(fields.get("split_mode") or "").strip().lower() != "none":
        return None
    n = _devices(fields)
    if n is not None and main >= n:
        return (
            f"main_gpu is {main} with split_mode none, but the row lists {n} GPU device(s): llama.cpp refuses "
            f"to load a model on a device it does not have (invalid value for main_gpu)"
        )
    return None
