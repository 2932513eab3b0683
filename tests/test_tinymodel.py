"""toolkit.models.tiny: the tiny qwen3moe GGUF, ensure_model_file and sha256_file.

Loading the file in a real llama-bench is covered by the end-to-end tests.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import gguf
import pytest

from toolkit.core.errors import BadInput
from toolkit.models.tiny import SHAPE, ensure_model_file, generate_tiny_qwen3moe, sha256_file

MAX_BYTES = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_tiny_qwen3moe(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture(scope="module")
def reader(tiny: Path) -> gguf.GGUFReader:
    return gguf.GGUFReader(tiny)


def _value(reader: gguf.GGUFReader, key: str):
    field = reader.get_field(key)
    assert field is not None, f"missing key {key}"
    return field.contents()


def test_same_seed_same_bytes_other_seed_differs(tiny: Path, tmp_path: Path) -> None:
    again = generate_tiny_qwen3moe(tmp_path / "again.gguf", seed=0)
    other = generate_tiny_qwen3moe(tmp_path / "other.gguf", seed=1)
    assert again.read_bytes() == tiny.read_bytes()
    assert sha256_file(other) != sha256_file(tiny)
    assert other.stat().st_size == tiny.stat().st_size


def test_small_and_no_temp_file_left(tiny: Path) -> None:
    assert 100_000 < tiny.stat().st_size < MAX_BYTES
    assert sorted(p.name for p in tiny.parent.iterdir()) == ["tiny.gguf"]


def test_architecture_and_moe_keys(reader: gguf.GGUFReader) -> None:
    assert _value(reader, "general.architecture") == "qwen3moe"
    assert _value(reader, "qwen3moe.expert_count") == SHAPE.n_expert == 8
    assert _value(reader, "qwen3moe.expert_used_count") == SHAPE.n_expert_used == 2
    assert _value(reader, "qwen3moe.expert_feed_forward_length") == SHAPE.n_ff_exp
    assert _value(reader, "qwen3moe.context_length") >= 4096 + 256
    for key in (
        "embedding_length",
        "block_count",
        "attention.head_count",
        "attention.head_count_kv",
        "attention.layer_norm_rms_epsilon",
    ):
        assert reader.get_field(f"qwen3moe.{key}") is not None, key


def test_bpe_tokenizer(reader: gguf.GGUFReader) -> None:
    assert _value(reader, "tokenizer.ggml.model") == "gpt2"
    tokens = _value(reader, "tokenizer.ggml.tokens")
    types = _value(reader, "tokenizer.ggml.token_type")
    merges = _value(reader, "tokenizer.ggml.merges")
    assert len(tokens) == len(types) == len(set(tokens)) >= 256 + len(merges)
    vocab = set(tokens)
    for merge in merges:
        left, right = merge.split(" ")
        assert {left, right, left + right} <= vocab, merge
    eos = _value(reader, "tokenizer.ggml.eos_token_id")
    assert tokens[eos] == "<|endoftext|>"
    assert _value(reader, "tokenizer.ggml.bos_token_id") == eos


def test_tensor_shapes_in_ggml_order(reader: gguf.GGUFReader) -> None:
    s = SHAPE
    shapes = {t.name: [int(n) for n in t.shape] for t in reader.tensors}  # ggml ne order
    n_vocab = len(_value(reader, "tokenizer.ggml.tokens"))
    assert shapes["token_embd.weight"] == [s.n_embd, n_vocab]
    assert shapes["output_norm.weight"] == [s.n_embd]
    q, kv = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    expected = {
        "attn_norm": [s.n_embd],
        "attn_q": [s.n_embd, q],
        "attn_k": [s.n_embd, kv],
        "attn_v": [s.n_embd, kv],
        "attn_output": [q, s.n_embd],
        "attn_q_norm": [s.head_dim],
        "attn_k_norm": [s.head_dim],
        "ffn_norm": [s.n_embd],
        "ffn_gate_inp": [s.n_embd, s.n_expert],
        "ffn_gate_exps": [s.n_embd, s.n_ff_exp, s.n_expert],
        "ffn_up_exps": [s.n_embd, s.n_ff_exp, s.n_expert],
        "ffn_down_exps": [s.n_ff_exp, s.n_embd, s.n_expert],
    }
    for i in range(s.n_layer):
        for name, shape in expected.items():
            assert shapes.pop(f"blk.{i}.{name}.weight") == shape, (i, name)
    assert set(shapes) == {"token_embd.weight", "output_norm.weight"}


def test_ensure_model_file_existing_is_returned_untouched(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"not really a model")
    assert ensure_model_file(path, "tiny-qwen3moe") == path
    assert path.read_bytes() == b"not really a model"


def test_ensure_model_file_generates(tmp_path: Path) -> None:
    path = ensure_model_file(tmp_path / "sub" / "tiny.gguf", "tiny-qwen3moe")
    assert path.is_file() and path.read_bytes()[:4] == b"GGUF"


def test_ensure_model_file_missing_names_path_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "Qwen3-30B-A3B.gguf"
    with pytest.raises(BadInput) as info:
        ensure_model_file(path, None)
    assert str(path) in str(info.value) and "tiny-qwen3moe" in str(info.value)
    assert info.value.exit_code == 4
    assert not path.exists()


def test_ensure_model_file_unknown_generator(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="unknown model generator 'huge'"):
        ensure_model_file(tmp_path / "m.gguf", "huge")


def test_sha256_file_matches_hashlib_across_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * 9000  # ~2.2 MiB: spans several 1 MiB chunks
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
