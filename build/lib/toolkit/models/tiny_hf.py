"""A tiny random-weight Qwen3-MoE model in Hugging Face format, for vLLM smoke runs.

`generate_tiny_qwen3moe_hf(dir)` writes config.json, model.safetensors and a word-level
tokenizer (tokenizer.json + tokenizer_config.json) with the architecture of the reference model
(`Qwen3MoeForCausalLM`: mixture of experts, q/k RMS norms, GQA, separate head size), ~6 MB at
float32. No torch, transformers or tokenizers needed: safetensors is a length-prefixed JSON header
plus raw little-endian arrays, and tokenizer.json is plain JSON. Weights are random, so the
generated text is noise and tokens/second measure nothing but the code path.

`quantization="compressed-tensors"` adds the quantization_config a llm-compressor W4A16 checkpoint
carries (the layout of the reference checkpoint cpatonn/Qwen3-30B-A3B-Instruct-2507-AWQ-4bit:
pack-quantized int4 weights, symmetric, group size 32, 16-bit activations, router and lm_head left
unquantized). The weights stay float32, so such a directory is for checks that read config.json
(which quantization a run uses) and is not loadable by vLLM; the default writes no
quantization_config (an unquantized checkpoint, which vLLM runs).

The vocabulary is 10,240 tokens because `vllm bench latency` draws random prompt ids below
10,000; `vllm bench serve --dataset-name random` decodes and re-encodes random ids, which a
whitespace word-level tokenizer round-trips exactly.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class TinyQwen3MoeHfShape:
    """Hyper-parameters (counts; lengths in elements)."""

    vocab: int = 10240
    hidden: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 32  # != hidden / n_head, as in the real model
    n_expert: int = 8
    n_expert_used: int = 2
    moe_ffn: int = 32
    max_positions: int = 4096


SHAPE = TinyQwen3MoeHfShape()
QUANTIZATIONS = (None, "compressed-tensors")


def compressed_tensors_w4a16(group_size: int = 32) -> dict:
    """config.json `quantization_config` of an llm-compressor W4A16 checkpoint (compressed-tensors
    library layout: config_groups.<group>.{targets, weights, input_activations, output_activations,
    format}; `format` pack-quantized = int4 packed eight to an int32; `ignore` = modules kept 16-bit)."""
    weights = {
        "num_bits": 4,
        "type": "int",
        "symmetric": True,
        "group_size": group_size,
        "strategy": "group",
        "dynamic": False,
        "actorder": None,
        "observer": "minmax",
        "observer_kwargs": {},
        "block_structure": None,
    }
    return {
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": weights,
                "input_activations": None,
                "output_activations": None,
                "format": "pack-quantized",
            }
        },
        "format": "pack-quantized",
        "global_compression_ratio": None,
        "ignore": ["lm_head", "re:.*mlp.gate$"],
        "kv_cache_scheme": None,
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
        "sparsity_config": {},
        "transform_config": {},
        "version": "0.11.0",
    }


_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>")


def config(s: TinyQwen3MoeHfShape = SHAPE, quantization: str | None = None) -> dict:
    """config.json of the tiny model; `quantization` one of QUANTIZATIONS (see the module docstring)."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization {quantization!r}: the generator writes one of {QUANTIZATIONS}")
    quant = {"quantization_config": compressed_tensors_w4a16()} if quantization else {}
    return quant | {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": s.vocab,
        "hidden_size": s.hidden,
        "intermediate_size": 4 * s.hidden,
        "moe_intermediate_size": s.moe_ffn,
        "num_hidden_layers": s.n_layer,
        "num_attention_heads": s.n_head,
        "num_key_value_heads": s.n_head_kv,
        "head_dim": s.head_dim,
        "num_experts": s.n_expert,
        "num_experts_per_tok": s.n_expert_used,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "max_position_embeddings": s.max_positions,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "bos_token_id": s.vocab - 4,
        "eos_token_id": s.vocab - 4,
        "torch_dtype": "float32",
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
    }


def tensors(s: TinyQwen3MoeHfShape = SHAPE, seed: int = 0) -> dict[str, np.ndarray]:
    """Weights under the Hugging Face names vLLM's qwen3_moe loader expects."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    out = {
        "model.embed_tokens.weight": w(s.vocab, s.hidden),
        "model.norm.weight": np.ones(s.hidden, np.float32),
        "lm_head.weight": w(s.vocab, s.hidden),
    }
    for i in range(s.n_layer):
        p = f"model.layers.{i}."
        out |= {
            p + "input_layernorm.weight": np.ones(s.hidden, np.float32),
            p + "post_attention_layernorm.weight": np.ones(s.hidden, np.float32),
            p + "self_attn.q_proj.weight": w(s.n_head * s.head_dim, s.hidden),
            p + "self_attn.k_proj.weight": w(s.n_head_kv * s.head_dim, s.hidden),
            p + "self_attn.v_proj.weight": w(s.n_head_kv * s.head_dim, s.hidden),
            p + "self_attn.o_proj.weight": w(s.hidden, s.n_head * s.head_dim),
            p + "self_attn.q_norm.weight": np.ones(s.head_dim, np.float32),
            p + "self_attn.k_norm.weight": np.ones(s.head_dim, np.float32),
            p + "mlp.gate.weight": w(s.n_expert, s.hidden),
        }
        for e in range(s.n_expert):
            q = f"{p}mlp.experts.{e}."
            out |= {
                q + "gate_proj.weight": w(s.moe_ffn, s.hidden),
                q + "up_proj.weight": w(s.moe_ffn, s.hidden),
                q + "down_proj.weight": w(s.hidden, s.moe_ffn),
            }
    return out


def safetensors_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """The safetensors encoding: u64 header length, JSON header (dtype, shape, offsets), data."""
    header: dict[str, dict] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name in sorted(arrays):
        data = np.ascontiguousarray(arrays[name], dtype="<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(arrays[name].shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the data starts 8-byte aligned
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


def tokenizer_json(s: TinyQwen3MoeHfShape = SHAPE) -> dict:
    """A whitespace word-level tokenizer: words w0..wN, then the special tokens at the top ids."""
    words = {f"w{i}": i for i in range(s.vocab - len(_SPECIAL))}
    special = {t: s.vocab - len(_SPECIAL) + k for k, t in enumerate(_SPECIAL)}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for t, i in special.items()
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
        "model": {"type": "WordLevel", "vocab": words | special, "unk_token": "<unk>"},
    }


def generate_tiny_qwen3moe_hf(path: Path | str, *, seed: int = 0, quantization: str | None = None) -> Path:
    """Write the model directory at `path` (atomically: built beside it, then renamed). `quantization`:
    None (no quantization_config) or "compressed-tensors" (config only, see the module docstring).
    Raises ValueError for any other value."""
    path = Path(path)
    cfg = config(quantization=quantization)  # first: a bad value leaves nothing behind
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=path.name + ".", dir=path.parent))
    (tmp / "config.json").write_text(json.dumps(cfg, indent=1))
    (tmp / "generation_config.json").write_text(
        json.dumps({"eos_token_id": SHAPE.vocab - 4, "do_sample": False})
    )
    (tmp / "model.safetensors").write_bytes(safetensors_bytes(tensors(seed=seed)))
    (tmp / "tokenizer.json").write_text(json.dumps(tokenizer_json()))
    (tmp / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "model_max_length": SHAPE.max_positions,
                "eos_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
                "unk_token": "<unk>",
                "clean_up_tokenization_spaces": False,
            }
        )
    )
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return path
