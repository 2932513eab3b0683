"""A tiny random-weight `qwen3moe` GGUF for smoke tests, plus model-file helpers.

`generate_tiny_qwen3moe(path)` writes a ~1.6 MB GGUF with the architecture of the reference model
(Qwen3-30B-A3B: `qwen3moe`, mixture of experts, q/k RMS norms, GQA, separate head size, byte-level
BPE vocabulary) so that every code path that loads, benchmarks or parses results for the real
~17 GB model can run on a laptop or CI machine in seconds. Its weights are random: the tokens it
produces are noise and its tokens/second are not a benchmark of anything.

`ensure_model_file(path, generate)` returns a model path, creating the tiny model on request.
`sha256_file(path)` hashes a (possibly multi-GB) file in 1 MiB chunks.
"""

from __future__ import annotations

import collections
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.core.errors import BadInput
from toolkit.core.text import path_text

if TYPE_CHECKING:  # numpy and gguf (~0.1 s of imports) load only when a model is generated
    from collections.abc import Iterator, Mapping

    import gguf
    import numpy as np

GENERATOR_NAMES = ("tiny-qwen3moe",)
_CHUNK_BYTES = 1 << 20  # 1 MiB read size for hashing


@dataclass(frozen=True)
class TinyQwen3MoeShape:
    """Hyper-parameters of the tiny model (all counts; lengths in elements).

    Every tensor dimension pair differs (embedding 128, q 256, kv 64, expert FFN 32), so a
    transposed tensor fails llama.cpp's shape check instead of loading silently.

    The real Qwen3-30B-A3B is 48 layers, embedding 2048, 32 query / 4 KV heads of size 128,
    128 experts of which 8 are used, expert FFN 768, vocabulary 151,936, context 262,144.
    """

    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    n_head_kv: int = 1
    head_dim: int = 64  # != n_embd / n_head, as in the real model (128 != 2048 / 32)
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 32  # smaller than n_embd, as in the real model (768 < 2048)
    n_ff: int = 256  # dense FFN length; written like the real model, unused by qwen3moe
    n_merges: int = 253  # 256 byte tokens + 253 merges + 3 special tokens = 512 tokens
    n_ctx_train: int = 8192  # >= the largest prompt + generation the harness asks for (4096+256)
    rms_eps: float = 1e-6
    rope_freq_base: float = 1_000_000.0


SHAPE = TinyQwen3MoeShape()
_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_TOKEN_NORMAL, _TOKEN_CONTROL = 1, 3
_FILE_TYPE_MOSTLY_F16 = 1

# Text the merges are learned from: fixed, so the vocabulary is the same on every run.
_BPE_TEXT = (
    "The quick brown fox jumps over the lazy dog. A benchmark measures the time it takes to "
    "process a prompt and to generate tokens. The prompt processing rate is reported in tokens "
    "per second, and the generation rate is reported the same way. Inference engines such as "
    "llama.cpp and vLLM are built into container images for each backend: the CPU, the Vulkan "
    "driver and the ROCm stack. Every result records the image digest, the model file, the "
    "build commit and the settings of the run, so that a later run can be compared with it. "
    "Mixture of experts models route each token through a few experts out of many, which keeps "
    "the compute per token small while the total number of parameters stays large. "
    "def main(): return 0\nfor i in range(10): print(i)\n"
)


def generate_tiny_qwen3moe(path: Path, *, seed: int = 0) -> Path:
    """Write a tiny random-weight `qwen3moe` GGUF to `path` and return `path`.

    A smoke-test stand-in for Qwen3-30B-A3B, NOT a benchmark model: llama.cpp loads and runs it
    (llama-bench takes ~1 ms per test on a CPU), but its outputs are noise.

    Shape (see `TinyQwen3MoeShape`): 4 layers, embedding 128, 4 query heads and 1 KV head of
    size 64, 8 experts with 2 used per token, expert FFN 32, vocabulary 512 byte-level BPE
    tokens (`tokenizer.ggml.model` "gpt2", pre-tokenizer "qwen2", 253 merges, <|endoftext|> as
    bos/eos), context length 8192 tokens. 2-D/3-D weights are f16, norms and the router are f32;
    output.weight is omitted (tied to token_embd). 792,192 parameters, 1,611,104 bytes (~1.6 MB).

    Weights are drawn from numpy's PCG64 with `seed` (normal, std 0.02; norms are 1.0): the same
    seed gives the same bytes. The file is written to a temporary file in the same directory and
    moved into place with os.replace, so `path` is never left half-written.
    """
    import gguf
    import numpy as np

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        writer = gguf.GGUFWriter(tmp_name, "qwen3moe")
        _add_metadata(writer, SHAPE)
        n_vocab = _add_tokenizer(writer, SHAPE)
        for name, array in _tensors(SHAPE, n_vocab, np.random.default_rng(seed)):
            writer.add_tensor(name, array)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.chmod(tmp_name, 0o644)  # mkstemp makes 0600; containers may read it as another user
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


def _add_metadata(writer: gguf.GGUFWriter, s: TinyQwen3MoeShape) -> None:
    """Architecture keys llama.cpp reads for qwen3moe (missing expert keys abort llama.cpp)."""
    writer.add_name("tiny-qwen3moe (random weights, smoke test only)")
    writer.add_file_type(_FILE_TYPE_MOSTLY_F16)
    writer.add_context_length(s.n_ctx_train)
    writer.add_embedding_length(s.n_embd)
    writer.add_block_count(s.n_layer)
    writer.add_feed_forward_length(s.n_ff)
    writer.add_head_count(s.n_head)
    writer.add_head_count_kv(s.n_head_kv)
    writer.add_key_length(s.head_dim)
    writer.add_value_length(s.head_dim)
    writer.add_rope_freq_base(s.rope_freq_base)
    writer.add_layer_norm_rms_eps(s.rms_eps)
    writer.add_expert_count(s.n_expert)
    writer.add_expert_used_count(s.n_expert_used)
    writer.add_expert_feed_forward_length(s.n_ff_exp)


def _add_tokenizer(writer: gguf.GGUFWriter, s: TinyQwen3MoeShape) -> int:
    """Write a Qwen-style byte-level BPE vocabulary (256 byte tokens, learned merges, 3 control
    tokens); return its size in tokens."""
    tokens, merges = _bpe_vocab(s.n_merges)
    eos = len(tokens)
    tokens += list(_SPECIAL_TOKENS)
    types = [_TOKEN_NORMAL] * eos + [_TOKEN_CONTROL] * len(_SPECIAL_TOKENS)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(eos)  # Qwen uses <|endoftext|> for bos, eos and padding
    writer.add_eos_token_id(eos)
    writer.add_pad_token_id(eos)
    writer.add_add_bos_token(False)
    return len(tokens)


def _byte_symbols() -> list[str]:
    """GPT-2's byte -> printable character table (index = byte value), e.g. space -> 'Ġ'."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    symbols, extra = {}, 0
    for b in range(256):
        if b in printable:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def _bpe_vocab(n_merges: int) -> tuple[list[str], list[str]]:
    """Learn `n_merges` BPE merges from `_BPE_TEXT`; return (tokens, merges "left right")."""
    table = _byte_symbols()
    words = collections.Counter(
        tuple(table[b] for b in (" " + w if i else w).encode()) for i, w in enumerate(_BPE_TEXT.split(" "))
    )
    tokens = list(table)
    merges: list[str] = []
    while len(merges) < n_merges:
        pairs: collections.Counter[tuple[str, str]] = collections.Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:], strict=False):
                pairs[pair] += count
        if not pairs:
            raise ValueError(f"_BPE_TEXT only supports {len(merges)} merges, {n_merges} asked")
        best = min(pairs, key=lambda p: (-pairs[p], p))  # most frequent, ties broken by text
        merges.append(f"{best[0]} {best[1]}")
        if best[0] + best[1] not in tokens:  # two pairs can spell the same token
            tokens.append(best[0] + best[1])
        words = collections.Counter({_merge(w, best): c for w, c in words.items()})
    return tokens, merges


def _merge(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    """Replace every adjacent occurrence of `pair` in `word` by its concatenation."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def _tensors(
    s: TinyQwen3MoeShape, n_vocab: int, rng: np.random.Generator
) -> Iterator[tuple[str, np.ndarray]]:
    """(name, array) in llama.cpp's qwen3moe loader order.

    numpy shapes are ggml `ne` reversed: llama.cpp's `{n_embd, n_vocab}` is numpy (n_vocab, n_embd),
    and the expert stack `{n_embd, n_ff_exp, n_expert}` is numpy (n_expert, n_ff_exp, n_embd).
    """
    import numpy as np

    q_dim, kv_dim = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    yield "token_embd.weight", _weight(rng, n_vocab, s.n_embd)
    yield "output_norm.weight", _ones(s.n_embd)
    for i in range(s.n_layer):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", _ones(s.n_embd)
        yield p + "attn_q.weight", _weight(rng, q_dim, s.n_embd)
        yield p + "attn_k.weight", _weight(rng, kv_dim, s.n_embd)
        yield p + "attn_v.weight", _weight(rng, kv_dim, s.n_embd)
        yield p + "attn_output.weight", _weight(rng, s.n_embd, q_dim)
        yield p + "attn_k_norm.weight", _ones(s.head_dim)
        yield p + "attn_q_norm.weight", _ones(s.head_dim)
        yield p + "ffn_norm.weight", _ones(s.n_embd)
        yield p + "ffn_gate_inp.weight", _weight(rng, s.n_expert, s.n_embd).astype(np.float32)
        yield p + "ffn_gate_exps.weight", _weight(rng, s.n_expert, s.n_ff_exp, s.n_embd)
        yield p + "ffn_down_exps.weight", _weight(rng, s.n_expert, s.n_embd, s.n_ff_exp)
        yield p + "ffn_up_exps.weight", _weight(rng, s.n_expert, s.n_ff_exp, s.n_embd)


def _weight(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random f16 weights, normal with standard deviation 0.02, numpy `shape`."""
    import numpy as np

    return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)


def _ones(n: int) -> np.ndarray:
    """An f32 RMS-norm weight vector of length `n` (identity scale)."""
    import numpy as np

    return np.ones(n, dtype=np.float32)


def ensure_model_file(
    path: Path | str, generate: str | None, *, named: Mapping[Path, str] | None = None
) -> Path:
    """Return `path` if it exists; create it when `generate` names a generator; else raise BadInput.

    `generate` is None or one of GENERATOR_NAMES ("tiny-qwen3moe"). BadInput too, nothing generated, where
    `path` is a typo of one that exists (namesake_refusal); `named`: the paths the matrix names and where
    (LoadedMatrix.model_paths); None for a path no one typed (a published run's recorded file name,
    reproduce): no typo check."""
    path = Path(path)
    if path.exists():
        return path
    if generate is not None and named is not None and (why := namesake_refusal(path, generate, named=named)):
        raise BadInput(why)
    if generate == "tiny-qwen3moe":
        return generate_tiny_qwen3moe(path)
    if generate == "tiny-qwen3moe-hf":  # a Hugging Face-format directory, for the vLLM runner
        from toolkit.models.tiny_hf import generate_tiny_qwen3moe_hf

        return generate_tiny_qwen3moe_hf(path)
    if generate is not None:
        raise BadInput(
            f"unknown model generator {generate!r} for {path}; known generators: {', '.join(GENERATOR_NAMES)}"
        )
    raise BadInput(
        f"model file {path} does not exist; download it there (e.g. with huggingface-cli download), "
        f"fix the path, or set `generate: tiny-qwen3moe` to create a tiny random-weight smoke-test model"
    )


def namesake_refusal(path: Path, generate: str, *, named: Mapping[Path, str] | None = None) -> str | None:
    """Why a stand-in (`generate`) is not generated at the absent `path`: a typo of a path that exists
    (near_namesake), where that path is a stand-in of the same bytes (same_stand_in) or the typo is in a
    folder above it; None otherwise, and None where the path that exists is one of `named` (the matrix's own
    model paths: two stand-ins asked for, not a typo). The refusal opens with where `named` says `path` is
    named (`matrix.yaml: models[NAME].path`), the file and key to fix."""
    keys = {Path(p).absolute(): key for p, key in (named or {}).items()}
    near = near_namesake(path)
    if near is None or near.absolute() in keys:
        return None
    if near.parent == path.parent and not same_stand_in(near, generate):
        return None
    where = f"{keys[path.absolute()]}: " if path.absolute() in keys else ""
    return (
        f"{where}{path_text(path)} is absent and would be generated (`generate: {generate}`), but "
        f"{path_text(near)} exists: a typo of the model's path? fix `path` (a stand-in is not "
        "generated again at a near namesake of one that exists)"
    )


def near_namesake(path: Path) -> Path | None:
    """The existing path `path` would be with its first missing part (the file, or a folder above it)
    replaced by a near namesake beside it (difflib ratio 0.8 and over): `models/tiny-qwen3moe.gguf`
    for `models/tiny-qwen3mo.gguf` or `modles/tiny-qwen3moe.gguf`; None where there is none or
    `path` exists. Dot-files are left out. Reads one folder."""
    import difflib

    missing, rest = Path(path), list[str]()
    while not missing.parent.exists() and missing.parent != missing:
        missing, rest = missing.parent, [missing.name, *rest]
    try:
        names = [p.name for p in missing.parent.iterdir() if not p.name.startswith(".")]
    except OSError:
        return None
    for near in difflib.get_close_matches(missing.name, names, n=3, cutoff=0.8):
        if near != missing.name and (found := missing.parent.joinpath(near, *rest)).exists():
            return found
    return None


def same_stand_in(path: Path, generate: str) -> bool:
    """Whether the file `path` holds the bytes generator `generate` writes (generated into a
    temporary folder and compared; a Hugging Face folder's generator is never compared: False)."""
    if generate != "tiny-qwen3moe" or not path.is_file():
        return False
    with tempfile.TemporaryDirectory() as tmp:
        return sha256_file(path) == sha256_file(generate_tiny_qwen3moe(Path(tmp) / path.name))


def sha256_file(path: Path | str) -> str:
    """Hex SHA-256 of the file at `path`, read in 1 MiB chunks (constant memory for 17 GB files)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()
