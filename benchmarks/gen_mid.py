"""A mid-size random-weight qwen3moe GGUF (~7 GB f16) from toolkit's own tiny generator with a bigger
shape: 24 layers, embedding 2048, 32/4 heads of 128, 32 experts (8 used) of FFN 768. Weights are a
tiled random block (values do not change the speed; the router is random so experts vary)."""

import dataclasses
import sys
import time

import numpy as np

from toolkit.models import tiny

tiny.SHAPE = dataclasses.replace(
    tiny.SHAPE,
    n_layer=24,
    n_embd=2048,
    n_head=32,
    n_head_kv=4,
    head_dim=128,
    n_expert=32,
    n_expert_used=8,
    n_ff_exp=768,
    n_ff=6144,
)
_block = (np.random.default_rng(0).standard_normal(1 << 20, dtype=np.float32) * 0.02).astype(np.float16)


def _weight(rng, *shape):
    return np.resize(_block, shape)


tiny._weight = _weight
t = time.time()
tiny.generate_tiny_qwen3moe(sys.argv[1])
print(f"generated {sys.argv[1]} in {time.time() - t:.1f} s")
