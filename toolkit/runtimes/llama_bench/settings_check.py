"""A llama-bench row's device settings held to what llama.cpp can run (validity.check_row reads this).

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
- a setting outside what llama-bench's own argument parser takes (`domain_problem`, DOMAIN_FIELDS), so no
  test ran with it: flash_attn other than -1, 0, 1 (`-fa <on|off|auto>`, older builds 0|1 or a JSON
  boolean); a 0/1 switch (no_kv_offload, cpu_strict, embeddings, no_host, repack, no_op_offload) other
  than 0, 1 or a boolean; a negative n_cpu_moe, poll or build_number (a count, a busy-wait percentage,
  git's commit count); a model_size or model_n_params of 0 or below (a GGUF with no weights loads no
  model), or no count at all (a JSON `true`, csv's `true`: `_model_count_problem`). Checked on
  llama-bench 0c1e57098 (the CPU image): `-fa 7`, `-nkvo 2`, `--cpu-strict 3`, `-ncmoe -4`,
  `--poll -5` each end in its usage text, no row printed; `-t 1000` and `--poll 200` run
  and print 1000 and 200, so n_threads and poll have no upper bound here. Cache types (type_k, type_v)
  are not held to a list: forks (ik_llama.cpp) print types mainline lacks; but a quantized type_v with
  flash_attn 0 is no test (`_quantized_v_problem`: llama.cpp makes no such context).
"""

from __future__ import annotations

from typing import Any

from toolkit.core.gpuspecs import split_gpu_info
from toolkit.runtimes.llama_bench.check import FLASH_WORDS, as_float, quantity


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


def gpu_devices(fields: dict[str, Any]) -> int | None:
    """How many GPU devices the row says it could use: its `devices` (`-dev`), else its gpu_info
    (device_names); None when it names none (a CPU row, an md table without gpu_info) or runs over RPC."""
    if "rpc" in str(fields.get("backends") or "").lower():
        return None
    dev = str(fields.get("devices") or "").strip()
    if dev and dev.lower() not in ("auto", "none"):
        return len([d for d in dev.split("/") if d.strip()])
    info = fields.get("gpu_info")
    return len(device_names(info)) or None if isinstance(info, str) else None


def device_names(gpu_info: str) -> list[str]:
    """The GPU devices a row's `gpu_info` names, one entry a device, in order: mainline llama-bench joins
    their descriptions with ", " (gpuspecs.split_gpu_info), llama-bench before the device registry (2024)
    and ik_llama.cpp with "/" (get_gpu_info: `id += "/"`): both are split, so a description holding "/"
    can only count more devices, never fewer."""
    return [d.strip() for part in split_gpu_info(gpu_info) for d in part.split("/") if d.strip()]


SWITCH_FIELDS = ("no_kv_offload", "cpu_strict", "embeddings", "no_host", "repack", "no_op_offload")
"""llama-bench's 0/1 settings (`-nkvo <0|1>`, `--cpu-strict <0|1>`, ...): printed as JSON booleans, or 0/1."""

NON_NEGATIVE_FIELDS = {
    "n_cpu_moe": "a count of layers; its parser refuses a negative one",
    "poll": "a busy-wait percentage; its parser refuses a negative one",
    "build_number": "git's count of commits, 0 when unknown",
    "stddev_ns": "a square root, printed as uint64_t",
}
"""Figures llama-bench prints that are never below 0, each with why."""

DOMAIN_FIELDS = (
    "flash_attn",
    "type_v",
    "mla_attn",
    *SWITCH_FIELDS,
    *NON_NEGATIVE_FIELDS,
    "model_size",
    "model_n_params",
)
"""The row fields domain_problem reads (a stored record's `raw` holds them: record_check reads these)."""


_FLASH_WORDS = {**FLASH_WORDS, "enabled": 1, "disabled": 0}  # also taken as a setting (normalize: unknown)


def _whole(v: Any) -> int | None:
    """`_int` of a number or its plain text (a bool as 0/1); None for anything else (md's `1.52 MiB`)."""
    if isinstance(v, bool):
        return int(v)
    return _int(v) if isinstance(v, (int, float, str)) else None


UNQUANTIZED_CACHE_TYPES = frozenset({"f32", "f16", "bf16", "f64"})
"""The KV-cache types (`-ctk` / `-ctv`, ggml_type_name) that are not quantized (ggml_is_quantized false)."""


def _quantized_v_problem(fields: dict[str, Any]) -> str | None:
    """Why a row with flash attention off (`flash_attn` 0 / false) holds a quantized V cache (`type_v`
    q8_0, q4_0, ...), or None: llama.cpp refuses to make that context ("V cache quantization requires
    flash_attn", llama_init_from_model), so llama-bench prints no row (0c1e57098: `-fa 0 -ctv q8_0` ends
    "failed to create context with model"; `-fa 0 -ctk q8_0`, `-fa 1 -ctv q8_0` and `-fa auto -ctv q8_0`
    each print theirs). ik_llama.cpp rows (`mla_attn`, its field) are not held: it lets DeepSeek's MLA
    keep a quantized V cache without flash attention."""
    v = fields.get("type_v")
    if not isinstance(v, str) or not v.strip() or fields.get("mla_attn") is not None:
        return None
    if v.strip().lower() in UNQUANTIZED_CACHE_TYPES:
        return None
    return (
        f"type_v is {v.strip()[:24]!r} (a quantized V cache) with flash_attn off: llama.cpp refuses to make "
        "that context (V cache quantization requires flash_attn), so llama-bench ran no such test"
    )


def domain_problem(fields: dict[str, Any]) -> str | None:
    """Why a llama-bench row holds a setting llama-bench's argument parser refuses (see the module), None
    where every field of DOMAIN_FIELDS it states is one a test can have run with; or a model count or
    repetition no test has (_model_count_problem, _sample_problem). Absent, empty and null fields are
    not held (older vintages and md tables leave them out)."""
    fa = fields.get("flash_attn")
    if fa is not None and fa != "":
        n = _FLASH_WORDS.get(fa.strip().lower()) if isinstance(fa, str) else None
        n = n if n is not None else _whole(fa)
        if n not in (-1, 0, 1):
            return (
                f"flash_attn is {str(fa)[:24]!r}: llama-bench takes -1 (auto), 0 (off) or 1 (on) only "
                "(`-fa <on|off|auto>`): no test ran with it"
            )
        if n == 0 and (why := _quantized_v_problem(fields)):
            return why
    for name in SWITCH_FIELDS:
        v = fields.get(name)
        if (
            v is not None
            and v != ""
            and _whole(v) not in (0, 1)
            and str(v).strip().lower() not in ("true", "false")
        ):
            return f"{name} is {str(v)[:24]!r}: llama-bench takes 0 or 1 only: no test ran with it"
    for name in NON_NEGATIVE_FIELDS:
        x = as_float(fields.get(name)) if isinstance(fields.get(name), (int, float, str)) else None
        if x is not None and x < 0:
            return (
                f"{name} is {x:g}: llama-bench never prints a negative {name} ({NON_NEGATIVE_FIELDS[name]})"
            )
    for name in ("model_size", "model_n_params"):
        if why := _model_count_problem(name, fields.get(name)):
            return why
    for name in ("samples_ts", "samples_ns"):
        if why := _sample_problem(name, fields.get(name)):
            return why
    return None


def _sample_problem(name: str, v: Any) -> str | None:
    """Why a row's samples_ts (tok/s) or samples_ns (ns), one value a repetition, holds one that is no
    repetition: 0 or below (it takes time and yields tokens). samples_ns [0, 0] was imported: the
    validity pass passes over a list holding one (check._numbers), so nothing held it to samples_ts.
    None for a list without one, or no list (csv, md and sql print none; a kind is check's question)."""
    if not isinstance(v, list):
        return None
    i = next((i for i, x in enumerate(v) if type(x) in (int, float) and x <= 0), None)
    return None if i is None else f"{name}[{i}] is {v[i]!r}: not a measurement (a repetition is above 0)"


def _model_count_problem(name: str, v: Any) -> str | None:
    """Why `v`, a row's model_size (bytes) or model_n_params (weights), is no count of a loaded model:
    a JSON true/false (bool is an int in Python: `true` was read as 1 byte, then as "not recorded"), a
    text that is none (csv's and sql's `true`, `abc`, a fraction without md's unit: csv's `1595904.5`, as
    json's 1595904.5 is refused; md's `17.28 GiB` and `30.53 B` are counts), NaN or an infinity; or a
    count of 0 or below (a GGUF with no weights loads no model). None: absent or empty (a vintage or
    table without the column), or a count above 0."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    # a number without md's unit that is not whole (`1595904.5`, `1.5959045e6`, `nan`): refused as such
    bare = isinstance(v, str) and _int(v) is None and as_float(v.strip()) is not None
    n = None if isinstance(v, bool) or bare else quantity(v)
    if n is None:
        shown = str(v).lower() if isinstance(v, bool) else repr(v)[:40] if isinstance(v, str) else str(v)[:40]
        what = "a size in bytes" if name == "model_size" else "a count of weights"
        return f"{name} is {shown}: expected {what} (a whole number; md's `17.28 GiB`, `30.53 B`)"
    if n <= 0:
        return f"{name} is {n}: a model that llama-bench loaded has weights (a GGUF of none runs no test)"
    return None


def settings_problem(fields: dict[str, Any]) -> str | None:
    """Why llama-bench row `fields`' n_gpu_layers or main_gpu, or a setting of DOMAIN_FIELDS
    (domain_problem), is no setting a test ran with (see the module), None where it can be."""
    if why := domain_problem(fields):
        return why
    ngl = _int(fields.get("n_gpu_layers"))
    if ngl is not None and ngl < -1:
        return (
            f"n_gpu_layers is {ngl}: llama.cpp reads -1 as all layers and no other negative (builds before 2026 "
            "offloaded none, later ones all): not a setting a test ran with"
        )
    main = _int(fields.get("main_gpu"))
    if main is None or main < 0 or str(fields.get("split_mode") or "").strip().lower() != "none":
        return None
    n = gpu_devices(fields)
    if n is not None and main >= n:
        return (
            f"main_gpu is {main} with split_mode none, but the row lists {n} GPU device(s): llama.cpp refuses "
            f"to load a model on a device it does not have (invalid value for main_gpu)"
        )
    return None
