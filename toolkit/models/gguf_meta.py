"""Bounded reads of a local GGUF file's header: the scalar metadata and the tensor-info table, for a
file whose path a record names (a report's roofline: toolkit/analysis/roofline.py).

A record is someone else's text: the file it names may be a 30 GB model, a hostile GGUF declaring a
10^7-item array, a FIFO, a directory or a 20 KB name. gguf's GGUFReader builds a numpy object per
array item and per tensor (a 10 MB file declaring 10^7 uint8 items took 208 s and 7.1 GB), so it is
not used here. `read_summary` walks the header itself (GGUF v2/v3, little-endian, the layout of
github.com/ggml-org/ggml docs/gguf.md, the same walk as toolkit/models/twin.py `_tensor_table_end`)
through a read-only mmap, touching only the header's pages, and gives up (None: "unknown") where
the header is longer than MAX_HEADER_BYTES, walks more than MAX_ITEMS array items one by one
(strings), declares more than MAX_TENSORS tensors or a tensor type gguf does not know, or the path
is not a readable regular file. Answers are cached per file state (path, size, mtime, inode), so a
report reads each file once and a file replaced in place is read again. `gguf_kv_shape` reads the
KV-cache shape of the bench's model (its depth fit) from the same summary, per layer (a hybrid model's
recurrent layers hold no KV).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import mmap
import os
import stat
import struct
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolkit.matrix.api import KvShape

MAX_PATH_CHARS = 4096  # PATH_MAX on Linux: a longer name is no file
MAX_HEADER_BYTES = 256 << 20  # the same bound as toolkit/models/twin.py (Qwen3-30B-A3B's header: ~6 MB)
MAX_ITEMS = 2_000_000  # array items walked one at a time (a 262k-token vocabulary + merges: < 1 M)
MAX_TENSORS = 100_000  # a real model has a few thousand
MAX_STRING_VALUE = 256  # metadata strings kept (longer ones: the tokenizer's; skipped, not kept)
MAX_ARRAY_KEPT = 4096  # items of a kept array of numbers (a per-layer value; the tokenizer's: skipped)

# GGUF value types (gguf.GGUFValueType): struct format of each scalar; 8 = string, 9 = array.
_SCALAR = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_MAX_DIMS = 4  # GGML_MAX_DIMS (ggml/include/ggml.h)


@dataclass(frozen=True)
class GgufSummary:
    """A GGUF header as read: `fields` {key: value} of its scalar and short string metadata (arrays
    and strings over MAX_STRING_VALUE bytes left out); `tensors` (name, elements, data bytes) per
    tensor in file order (bytes = elements / block size x block bytes: gguf.GGML_QUANT_SIZES);
    `arrays` {key: items} of each array of numbers of at most MAX_ARRAY_KEPT items (a per-layer value,
    e.g. a hybrid model's `{arch}.attention.head_count_kv`)."""

    fields: dict[str, int | float | bool | str]
    tensors: tuple[tuple[str, int, int], ...]
    arrays: dict[str, tuple[int | float | bool, ...]] = field(default_factory=dict)


def read_summary(path: str) -> GgufSummary | None:
    """The GgufSummary of the regular file at `path`, or None when it is no readable GGUF within the
    module's bounds (never raises for what the file or the name holds)."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS or "\0" in path:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size < 24:
        return None
    return _summary(path, st.st_size, st.st_mtime_ns, st.st_ino)


@functools.lru_cache(maxsize=64)
def _summary(path: str, size: int, mtime_ns: int, ino: int) -> GgufSummary | None:
    """read_summary of one file state (the arguments after `path` are the cache key's file state)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _walk(buf)
    except (OSError, ValueError, OverflowError, struct.error, UnicodeDecodeError):
        return None


class _Walk:
    """A cursor over a header in `buf` that refuses to pass MAX_HEADER_BYTES or MAX_ITEMS."""

    def __init__(self, buf: mmap.mmap) -> None:
        self.buf, self.pos, self.items = buf, 24, 0
        self.end = min(len(buf), MAX_HEADER_BYTES)

    def take(self, fmt: str) -> int | float | bool:
        n = struct.calcsize(fmt)
        if self.pos + n > self.end:
            raise ValueError("past the header's bound")
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return v

    def string(self, keep: bool) -> str | None:
        n = int(self.take("<Q"))
        start, self.pos = self.pos, self.pos + n
        if self.pos > self.end:
            raise ValueError("a string runs past the header's bound")
        return (
            self.buf[start : self.pos].decode("utf-8", "replace") if keep and n <= MAX_STRING_VALUE else None
        )

    def value(
        self, vtype: int, keep: bool
    ) -> int | float | bool | str | tuple[int | float | bool, ...] | None:
        """A scalar, a string (kept: at most MAX_STRING_VALUE bytes), the items of an array of numbers
        (kept: at most MAX_ARRAY_KEPT items), else None (the value skipped)."""
        if vtype in _SCALAR:
            return self.take(_SCALAR[vtype])
        if vtype == _STRING:
            return self.string(keep)
        if vtype != _ARRAY:
            raise ValueError(f"unknown GGUF value type {vtype}")
        itype, count = int(self.take("<I")), int(self.take("<Q"))
        if itype in _SCALAR:  # fixed-size items: read at once where kept, else skipped at once
            start, fmt = self.pos, _SCALAR[itype]
            self.pos = start + count * struct.calcsize(fmt)
            if self.pos > self.end:
                raise ValueError("an array runs past the header's bound")
            return (
                struct.unpack_from(f"<{count}{fmt[1:]}", self.buf, start)
                if keep and count <= MAX_ARRAY_KEPT
                else None
            )
        self.items += count
        if self.items > MAX_ITEMS:
            raise ValueError("more array items than a model's header holds")
        for _ in range(count):
            self.value(itype, False)
        return None


@functools.cache
def _gguf_constants() -> ModuleType:
    """gguf's `constants` module (GGMLQuantizationType, GGML_QUANT_SIZES: the block size and bytes of each
    tensor type), loaded from the installed gguf package's constants.py alone where the package is not
    imported yet (gguf's __init__ imports numpy, which this walk does not use; constants.py imports only the
    standard library); else the package's import. ImportError where gguf is not installed."""
    if "gguf" not in sys.modules:
        spec = importlib.util.find_spec("gguf")  # a top-level name: found, not imported
        where = spec.submodule_search_locations if spec else None
        name = "toolkit_gguf_constants"
        alone = (
            importlib.util.spec_from_file_location(name, os.path.join(where[0], "constants.py"))
            if where
            else None
        )
        if alone is not None and alone.loader is not None:
            module = importlib.util.module_from_spec(alone)
            sys.modules[name] = module  # as an import registers it (a dataclass there looks itself up)
            try:
                alone.loader.exec_module(module)
                return module
            except Exception:  # noqa: BLE001 - any failure alone: the package's own import decides
                del sys.modules[name]
    import gguf.constants

    return gguf.constants


def _walk(buf: mmap.mmap) -> GgufSummary | None:
    """The GgufSummary of the GGUF in `buf`; None for no GGUF v2/v3 little-endian header; ValueError,
    struct.error where the header breaks a bound or runs past the file."""
    constants = _gguf_constants()
    GGML_QUANT_SIZES, GGMLQuantizationType = constants.GGML_QUANT_SIZES, constants.GGMLQuantizationType  # noqa: N806

    if buf[:4] != b"GGUF" or struct.unpack_from("<I", buf, 4)[0] not in (2, 3):
        return None
    n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)
    if n_tensors > MAX_TENSORS or n_kv > MAX_ITEMS:
        return None
    w = _Walk(buf)
    fields: dict[str, int | float | bool | str] = {}
    arrays: dict[str, tuple[int | float | bool, ...]] = {}
    for _ in range(n_kv):
        key = w.string(True)
        v = w.value(int(w.take("<I")), True)
        if key is None or v is None:
            continue
        if isinstance(v, tuple):
            arrays[key] = v
        else:
            fields[key] = v
    tensors = []
    for _ in range(n_tensors):
        name = w.string(True) or ""
        n_dims = int(w.take("<I"))
        if n_dims > _MAX_DIMS:
            return None
        dims = [int(w.take("<Q")) for _ in range(n_dims)]
        qtype, _offset = int(w.take("<I")), w.take("<Q")
        if qtype not in GGMLQuantizationType._value2member_map_:
            return None
        block, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
        elements = 1
        for d in dims:
            elements *= d
        tensors.append((name, elements, elements // block * nbytes))
    return GgufSummary(fields, tuple(tensors), arrays)


def gguf_kv_shape(path: str) -> KvShape | None:
    """The KvShape from a GGUF file's metadata, as llama.cpp sizes its KV cache: KV bytes per token =
    sum over layers il of n_head_kv(il) x (key_length + value_length) x bytes per element
    (llama-hparams.cpp n_embd_k_gqa(il) / n_embd_v_gqa(il) = head size x n_head_kv(il); a layer with 0
    KV heads, e.g. a hybrid model's recurrent layer, holds none). Per llama-model.cpp load_hparams:
    `{arch}.attention.head_count` and `.head_count_kv` are each one number or an array of
    `{arch}.block_count` items, head_count_kv defaults to head_count; key_length / value_length default
    to embedding_length / head_count of layer 0 (the value's, else the key length where no
    embedding_length is given). The shape's n_layer x n_head_kv is that sum of KV heads over layers:
    (layers with KV, their KV heads) where those are equal, (sum / g, g) for g the gcd of unequal ones.
    None where the file is no GGUF within read_summary's bounds, a field is missing, an array's length
    is not block_count (llama.cpp refuses the file), a count is negative or no layer has KV (the depth
    is then kept)."""
    from toolkit.matrix.api import KvShape  # here: the roofline reads headers without the matrix's modules

    summary = read_summary(path)
    if summary is None:
        return None
    arch = summary.fields.get("general.architecture")
    try:
        n_layer = int(summary.fields.get(f"{arch}.block_count") or 0)
        heads = _per_layer(summary, f"{arch}.attention.head_count", n_layer)
        kv = _per_layer(summary, f"{arch}.attention.head_count_kv", n_layer)
        kv = heads if kv is None else kv
        first = heads[0] if isinstance(heads, tuple) else heads
        per_head = (
            int(summary.fields.get(f"{arch}.embedding_length") or 0) // first if first and first > 0 else 0
        )
        head = int(summary.fields.get(f"{arch}.attention.key_length") or per_head)
        value = int(summary.fields.get(f"{arch}.attention.value_length") or per_head or head)
    except (TypeError, ValueError, OverflowError):  # a string or NaN where a count belongs
        return None
    if kv is None or head <= 0 or value <= 0:
        return None
    if isinstance(kv, int):  # one count for every layer
        return KvShape(n_layer, kv, head, value) if kv > 0 else None  # a negative int32 count: no shape
    if min(kv) < 0 or not sum(kv):  # a negative count, or no layer with KV: no shape
        return None
    g = math.gcd(*kv)
    return KvShape(sum(kv) // g, g, head, value)


def _per_layer(summary: GgufSummary, key: str, n_layer: int) -> tuple[int, ...] | int | None:
    """`key`'s per-layer ints (llama-model-loader get_key_or_arr): the array's items, or its one
    number (the same for each layer); None where the key is absent or n_layer is not above 0.
    ValueError where an array's length is not n_layer, an item is no int, or the number is NaN or a
    string that is no number (OverflowError: an infinity)."""
    if n_layer <= 0:
        return None
    if key in summary.arrays:
        items = summary.arrays[key]
        if len(items) != n_layer or not all(type(v) is int for v in items):
            raise ValueError(f"{key}: {len(items)} items for {n_layer} layers")
        return tuple(int(v) for v in items)
    v = summary.fields.get(key)
    return None if v is None else int(v)
