"""What a Hugging Face checkpoint directory says about itself: quantization and revision.

Quantization, as vLLM itself reads it (vllm 0.16.0, vllm/transformers_utils/model_arch_config_convertor.py
`_normalize_quantization_config` and vllm/config/model.py `_verify_quantization`): config.json's
`quantization_config` (older compressed-tensors checkpoints: `compression_config`; multi-modal models:
`text_config.quantization_config`), key `quant_method`, lower-cased, `compressed_tensors` spelled
`compressed-tensors`. When `--quantization` is given and differs from that method, vLLM refuses to
start ("Quantization method specified in the model config (...) does not match ...") unless one of
its kernel overrides claims the checkpoint (`awq_marlin` / `moe_wna16` for AWQ, `gptq_marlin` /
`moe_wna16` for GPTQ, `inc` for auto-round: their `override_quantization_method`). So the toolkit
refuses the same mismatch before any container starts, and records the method it expects.

compressed-tensors checkpoints (llm-compressor; e.g. cpatonn/Qwen3-30B-A3B-Instruct-2507-AWQ-4bit,
W4A16, group 32, despite "AWQ" in its name) describe their scheme in
`quantization_config.config_groups.<group>.weights` {num_bits, group_size, strategy, type, symmetric}
and `format` ("pack-quantized" for int4 weights packed in int32); `input_activations` null = 16-bit
activations (W4A16).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from toolkit.core import invocation, jsonsafe
from toolkit.core.errors import BadInput

if TYPE_CHECKING:
    from toolkit.matrix.api import LoadedMatrix, ModelSpec

# An override vLLM accepts for a checkpoint of method X besides X itself (its kernel variants for the
# same weights; vllm 0.16.0 `override_quantization_method` of AWQMarlinConfig, GPTQMarlinConfig,
# MoeWNA16Config, INCConfig). Only names every pinned release knows (0.28.0 adds auto_awq/auto_gptq,
# 0.16.0 lacks them; tests/test_vllm_runner.py checks each name against each release's own list).
# Whether a variant runs on this GPU is vLLM's call, not ours.
KERNEL_VARIANTS: dict[str, tuple[str, ...]] = {
    "awq": ("awq_marlin", "moe_wna16"),
    "gptq": ("gptq_marlin", "moe_wna16"),
    "auto-round": ("inc",),
}
# Methods that quantize an unquantized checkpoint while loading it (vLLM docs: "FP8 W8A8" online
# dynamic quantization); any other method needs weights written in that format. (bitsandbytes is
# gone from 0.28.0; ptpc_fp8 / experts_int8 are deprecated in 0.16.0.)
ONLINE_METHODS = ("fp8",)
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class CheckpointQuant:
    """A checkpoint's quantization as its config.json states it.

    method: vLLM's name (`compressed-tensors`, `awq`, `gptq`, `fp8`, ...); format: compressed-tensors
    `format` ("pack-quantized", ...) or AWQ `version` ("gemm"); bits / group_size: of the weights
    (group_size None = per channel); scheme: e.g. "W4A16" (weights / activations bits) where stated;
    key: where it was read (`quantization_config` or `compression_config`)."""

    method: str
    format: str | None = None
    bits: int | None = None
    group_size: int | None = None
    scheme: str | None = None
    key: str = "quantization_config"

    def describe(self) -> str:
        """One line, e.g. `compressed-tensors (pack-quantized, W4A16, group 32)`."""
        parts = [
            p
            for p in (
                self.format,
                self.scheme or (f"{self.bits}-bit" if self.bits else None),
                f"group {self.group_size}" if self.group_size else None,
            )
            if p
        ]
        return self.method + (f" ({', '.join(parts)})" if parts else "")

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class QuantChoice:
    """The quantization a vLLM run uses. method None = unquantized; source: `checkpoint` (vLLM reads it
    from config.json, no --quantization is passed), `matrix` (vllm.quantization, passed as
    --quantization) or `none`; checkpoint: what config.json says (None = no quantization_config)."""

    method: str | None
    source: str
    checkpoint: CheckpointQuant | None

    def as_record(self) -> dict[str, Any]:
        return {
            "quantization": self.method,
            "quantization_source": self.source,
            "checkpoint_quantization": self.checkpoint.as_record() if self.checkpoint else None,
        }


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def parse_quantization(config: dict[str, Any]) -> CheckpointQuant | None:
    """The quantization stated by a parsed config.json (None = unquantized). Raises ValueError when a
    quantization_config is present but names no method."""
    key, qc = "quantization_config", config.get("quantization_config")
    if qc is None and config.get("compression_config") is not None:
        key, qc = "compression_config", config["compression_config"]
    if qc is None and isinstance(config.get("text_config"), dict):
        key, qc = "text_config.quantization_config", config["text_config"].get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, dict) or not isinstance(qc.get("quant_method"), str) or not qc["quant_method"]:
        raise ValueError(f"{key} has no quant_method")
    method = qc["quant_method"].lower().replace("compressed_tensors", "compressed-tensors")
    if method == "compressed-tensors":
        groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict)]
        weights = [wt for g in groups if isinstance(wt := g.get("weights"), dict)]
        w = weights[0] if weights else {}
        act = groups[0].get("input_activations") if groups else None
        bits = _int(w.get("num_bits"))
        a_bits = _int(act.get("num_bits")) if isinstance(act, dict) else 16
        fmt = qc.get("format") or (groups[0].get("format") if groups else None)
        mixed = len({json.dumps(x, sort_keys=True) for x in weights}) > 1
        return CheckpointQuant(
            method,
            fmt,
            bits,
            _int(w.get("group_size")),
            "mixed" if mixed else (f"W{bits}A{a_bits}" if bits else None),
            key,
        )
    bits = _int(qc.get("bits")) or _int(qc.get("w_bit"))
    group = _int(qc.get("group_size")) or _int(qc.get("q_group_size"))
    fmt = qc.get("version") or qc.get("format") or qc.get("checkpoint_format")
    return CheckpointQuant(
        method,
        str(fmt).lower() if fmt else None,
        bits,
        group if group and group > 0 else None,
        f"W{bits}A16" if bits and method in ("awq", "gptq", "auto-round") else None,
        key,
    )


def read_quantization(model_dir: Path) -> CheckpointQuant | None:
    """`parse_quantization` of `model_dir`/config.json. Raises BadInput when config.json is missing
    or not a JSON object (vLLM could not load the checkpoint either)."""
    cfg = Path(model_dir) / "config.json"
    try:
        with open(cfg, "rb") as fh:
            data = jsonsafe.load(fh)
    except FileNotFoundError:
        raise BadInput(
            f"{cfg}: missing; a Hugging Face checkpoint directory needs its config.json "
            f"(re-download it with `{invocation.command('fetch-model')}`)"
        ) from None
    except (OSError, jsonsafe.JsonProblem) as err:
        raise BadInput(f"{cfg}: cannot be read as JSON ({err}); re-download the checkpoint") from None
    if not isinstance(data, dict):
        raise BadInput(f"{cfg}: not a JSON object; re-download the checkpoint")
    try:
        return parse_quantization(data)
    except ValueError as err:
        raise BadInput(f"{cfg}: {err}; re-download the checkpoint") from None


def resolve_quantization(lm: LoadedMatrix, model: ModelSpec, model_dir: Path) -> QuantChoice:
    """The method a vLLM run of `model` uses: the checkpoint's own unless `vllm.quantization` in the
    matrix overrides it. Raises BadInput (exit 4) naming matrix.yaml, `vllm.quantization`, the
    checkpoint's method and the fix when vLLM would refuse the override (it differs from the
    checkpoint's method and is not one of that method's kernel variants, or it needs quantized
    weights the checkpoint does not have)."""
    override = lm.m.settings("vllm").quantization
    ck = read_quantization(model_dir)
    if override is None:
        return QuantChoice(ck.method if ck else None, "checkpoint" if ck else "none", ck)
    where = f"{lm.path}: vllm.quantization"
    cfg = Path(model_dir) / "config.json"
    if ck is None:
        if override in ONLINE_METHODS:
            return QuantChoice(override, "matrix", None)
        raise BadInput(
            f"{where}: {override!r} needs a checkpoint quantized with {override}, but model "
            f"{model.name} is unquantized ({cfg} has no quantization_config); remove `quantization` "
            f"from `vllm:` or use a quantize-on-load method ({', '.join(ONLINE_METHODS)})"
        )
    if override == ck.method or override in KERNEL_VARIANTS.get(ck.method, ()):
        return QuantChoice(override, "matrix", ck)
    raise BadInput(
        f"{where}: {override!r} does not match model {model.name}: {cfg} says "
        f"{ck.key}.quant_method = {ck.method!r} ({ck.describe()}), and vLLM refuses to start on "
        f"that mismatch; remove `quantization` from `vllm:` (the checkpoint's method is then used "
        f"and recorded) or set it to {ck.method!r}"
    )


# ---------------------------------------------------------------------------------------------
# Revision


def local_revision(model_dir: Path) -> str | None:
    """The commit a `huggingface_hub` download into `model_dir` came from, or None (copied by hand).

    huggingface_hub (>= 0.23, `_local_folder.py`) writes `<dir>/.cache/huggingface/download/
    <file>.metadata` per downloaded file: line 1 the commit hash, line 2 the etag, line 3 a timestamp."""
    meta = Path(model_dir) / ".cache" / "huggingface" / "download" / "config.json.metadata"
    try:
        first = meta.read_text().splitlines()[0].strip()
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    return first if _COMMIT.fullmatch(first) else None


def check_revision(lm: LoadedMatrix, model: ModelSpec, model_dir: Path) -> str | None:
    """The pinned commit of a Hub checkpoint (None for a model without `hf:`). Raises BadInput when the
    matrix pins none (the fix: `toolkit fetch-model NAME`, which resolves it with huggingface_hub and
    writes it) or when the local copy was downloaded at a different commit."""
    if model.hf is None:
        return None
    where = f"{lm.path}: models[{model.name}].hf.revision"
    got = local_revision(model_dir)
    if model.hf.revision is None:
        have = (
            f"; the copy in {model_dir} was downloaded at {got}: add `revision: {got}` under `hf:`"
            if got
            else ""
        )
        raise BadInput(
            f"{where}: not pinned: a checkpoint is pinned by its commit hash; run `"
            f"{invocation.command('fetch-model', model.name)}` on a host that reaches the Hub (it resolves the commit with huggingface_hub "
            f"and writes it into the matrix){have}"
        )
    if got and got != model.hf.revision:
        raise BadInput(
            f"{where}: the matrix pins {model.hf.revision}, but {model_dir} was downloaded at {got}; "
            f"delete it and run `{invocation.command('fetch-model', model.name)}`, or pin {got}"
        )
    return model.hf.revision


def pin_revision_in_matrix(matrix_path: Path, model_name: str, revision: str) -> bool:
    """Write `revision: <commit>` under models[model_name].hf in the matrix file, keeping every other
    line (and comment) as it is. Returns False, leaving the file untouched, when the file's layout is
    not the block style this edit understands or the result would differ in anything but that key."""
    if not _COMMIT.fullmatch(revision):
        raise ValueError(f"{revision!r} is not a 40-hex commit hash")
    text = Path(matrix_path).read_text()
    before = yaml.safe_load(text)
    lines = text.splitlines(keepends=True)
    item = _model_block(lines, model_name)
    if item is None:
        return False
    start, end, key_col = item
    hf_at = next(
        (j for j in range(start, end) if re.match(rf"^(\s{{{key_col}}}|\s*-\s+)hf:\s*(#.*)?$", lines[j])),
        None,
    )
    if hf_at is None:
        return False
    sub_end = _block_end(lines, hf_at, end, key_col + 1)
    repo_at = next((j for j in range(hf_at + 1, sub_end) if re.match(r"^\s*repo:\s*\S", lines[j])), None)
    if repo_at is None:
        return False
    pad = lines[repo_at][: _indent(lines[repo_at])]
    old = [j for j in range(hf_at + 1, sub_end) if re.match(rf"^{pad}revision:", lines[j])]
    new_line = f"{pad}revision: {revision}\n"
    if old:
        lines[old[0]] = new_line
    else:
        lines.insert(repo_at + 1, new_line)
    after_text = "".join(lines)
    want = json.loads(json.dumps(before))
    for model in want.get("models", []):
        if model.get("name") == model_name and isinstance(model.get("hf"), dict):
            model["hf"]["revision"] = revision
    if yaml.safe_load(after_text) != want:
        return False
    Path(matrix_path).write_text(after_text)
    return True


def _indent(ln: str) -> int:
    """The number of spaces a line starts with."""
    return len(ln) - len(ln.lstrip(" "))


def _block_end(lines: list[str], at: int, stop: int, col: int) -> int:
    """The first line after `at` (before `stop`) that holds a key left of column `col`: where the
    block that starts at `at` ends (blank and comment lines belong to it)."""
    return next(
        (
            j
            for j in range(at + 1, stop)
            if lines[j].strip() and not lines[j].lstrip().startswith("#") and _indent(lines[j]) < col
        ),
        stop,
    )


def _model_block(lines: list[str], model_name: str) -> tuple[int, int, int] | None:
    """(first line, end, column of its keys) of the `models:` item named `model_name` in block style;
    None when there is no such item."""
    models_at = next((i for i, ln in enumerate(lines) if re.match(r"^models:\s*(#.*)?$", ln)), len(lines))
    name_at = next(
        (
            i
            for i, ln in enumerate(lines)
            if i > models_at
            and re.match(rf"^\s*(-\s+)?name:\s*['\"]?{re.escape(model_name)}['\"]?\s*(#.*)?$", ln)
        ),
        None,
    )
    if name_at is None:
        return None
    lead = re.match(r"^(\s*)(-\s+)?", lines[name_at])
    assert lead is not None  # the pattern matches every string
    key_col = len(lead.group(0))  # the column of the item's keys
    start = (
        name_at
        if lead.group(2)
        else next(
            (
                j
                for j in range(name_at - 1, -1, -1)
                if re.match(rf"^\s{{{max(key_col - 2, 0)}}}-\s", lines[j])
            ),
            name_at,
        )
    )
    return start, _block_end(lines, name_at, len(lines), key_col), key_col
