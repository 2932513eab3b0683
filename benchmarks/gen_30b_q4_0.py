"""A synthetic Qwen3-30B-A3B GGUF for GPU benchmarks (not a test): the real model's architecture and
shape (48 layers, embedding 2048, 32 query / 4 KV heads of 128, 128 experts of which 8 are used,
expert FFN 768, vocabulary 151,936: the shape toolkit/models/tiny.py's docstring gives for the real
model) with random weights, every 2-D/3-D weight in Q4_0 (~17 GB, near the real Q4_K_XL's 17 GB),
norms and the router in f32.

    python3 benchmarks/gen_30b_q4_0.py OUT.gguf [--layers N --experts N]   (smaller shapes: a dry run)

Built on toolkit's own tiny generator (the same metadata keys, tokenizer and tensor order); the
vocabulary is padded with normal tokens `<pad_N>` to the real size, so the output head reads the
real model's bytes per token. Q4_0 blocks (ggml-common.h `block_q4_0`: half d; u8 qs[16], 18 bytes
per 32 weights) are a tiled random byte block with d set to 6e-3 (finite, as toolkit/models/twin.py
`_SCALE_FIELDS` does). Weight values do not change the speed (twin.py's docstring, measured on an
H200). Why not a shape twin: that copies the real file's header from the Hub, unreachable here.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import gguf
import numpy as np

from toolkit.models import tiny

N_VOCAB = 151_936
_D = np.float16(6e-3).tobytes()


def _q4_0(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random Q4_0 bytes for a numpy weight `shape` (last axis: the row, a multiple of 32)."""
    *rows, k = shape
    blocks = k // 32
    raw = np.resize(_BLOCK, (*rows, blocks, 18)).copy()
    raw[..., 0] = _D[0]
    raw[..., 1] = _D[1]
    return raw.reshape(*rows, blocks * 18)


_BLOCK = np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--experts", type=int, default=128)
    args = ap.parse_args()
    tiny.SHAPE = dataclasses.replace(
        tiny.SHAPE,
        n_layer=args.layers,
        n_embd=2048,
        n_head=32,
        n_head_kv=4,
        head_dim=128,
        n_expert=args.experts,
        n_expert_used=8,
        n_ff_exp=768,
        n_ff=6144,
        n_ctx_train=262_144,
    )
    add_tensor = gguf.GGUFWriter.add_tensor

    def add_quantized(self, name, tensor, **kw):
        if tensor.dtype == np.float16:  # every 2-D/3-D weight the tiny generator makes
            return add_tensor(
                self, name, _q4_0(None, *tensor.shape), raw_dtype=gguf.GGMLQuantizationType.Q4_0
            )
        return add_tensor(self, name, tensor, **kw)

    add_tokens, add_types = gguf.GGUFWriter.add_token_list, gguf.GGUFWriter.add_token_types
    gguf.GGUFWriter.add_tensor = add_quantized
    gguf.GGUFWriter.add_token_list = lambda self, t: add_tokens(
        self, list(t) + [f"<pad_{i}>" for i in range(N_VOCAB - len(t))]
    )
    gguf.GGUFWriter.add_token_types = lambda self, t: add_types(self, list(t) + [1] * (N_VOCAB - len(t)))
    weight = tiny._weight  # random f16 where small (the router, kept random so experts vary)
    tiny._weight = lambda rng, *shape: (
        weight(rng, *shape) if np.prod(shape) < 1 << 20 else np.zeros(shape, np.float16)
    )
    tokenizer = tiny._add_tokenizer
    tiny._add_tokenizer = lambda writer, s: tokenizer(writer, s) and N_VOCAB
    tiny._FILE_TYPE_MOSTLY_F16 = 2  # llama_ftype LLAMA_FTYPE_MOSTLY_Q4_0: the name llama-bench prints
    t = time.time()
    tiny.generate_tiny_qwen3moe(args.out)
    print(f"generated {args.out} in {time.time() - t:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
