"""Shape twins: a full-size random-weight copy of a real GGUF, made from its header alone.

Why a twin measures what the real file measures: the kernels of a quantized model read the same
bytes and do the same work whatever the weight values are. Measured for this project on an NVIDIA
H200 (llama.cpp 0c1e57098, CUDA; issue 16): a random-weight file with Qwen3-30B-A3B's exact
architecture and Q4_K_M per-tensor type layout (18.55 GB, generated in 19.5 s) was reported by
llama-bench exactly like the real file ("qwen3moe 30B.A3B Q4_K - Medium, 17.28 GiB, 30.53 B"), and
rewriting its router weights (skewed, all-zero) moved pp by -4...+1 % and tg by <= 1.5 %, inside
run-to-run noise. The conditions: the exact per-tensor type layout (hence: copy the header, never
guess it), valid scales (no Inf/NaN), fixed-length tests only (no speculative decoding, nothing that
stops at EOS).

How (GGUF format: github.com/ggml-org/ggml docs/gguf.md; block layouts: ggml/src/ggml-common.h):

- `read_hub_header` reads only the first bytes of the real file from the Hugging Face Hub through
  huggingface_hub's `HfFileSystem` (HTTP range requests), starting with `FIRST_READ_BYTES` and
  doubling until the key/value metadata (tokenizer included) and the whole tensor-info table are
  in, up to `MAX_HEADER_BYTES`. The header is parsed by the `gguf` package's `GGUFReader`.
- `write_twin` writes the header bytes verbatim (so metadata, tokenizer, tensor names, shapes,
  types, offsets and alignment are identical by construction) and then every tensor's bytes at its
  offset: random bytes whose fp16 scale fields (`d`, `dmin`, `m`) are overwritten with small finite
  values (`_SCALE_FIELDS`); float tensors get uniform values of standard deviation 0.02 (norm weights
  1.0). The twin has the real file's size. The same header and seed give the same bytes.
- `write_sidecar` / `model_extras`: `<twin>.gguf.twin.json` beside the twin records what it is (kind
  `synthetic-twin`), what it is a twin of (repo, revision, file, the header's sha256 and size, the
  real file's size) and the twin's own sha256; a model record built from the twin carries those as
  extras.
"""

from __future__ import annotations

import collections
import hashlib
import os
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.core import invocation, jsonsafe
from toolkit.core.errors import BadInput, FileSystemError, RemoteUnavailable, ToolkitError
from toolkit.core.text import counted
from toolkit.core.types import utc_now

if TYPE_CHECKING:  # numpy (~0.09 s to import) loads only when a twin is read or written, not on every bench
    import numpy as np

TWIN_KIND = "synthetic-twin"
SIDECAR_SUFFIX = ".twin.json"
SIDECAR_SCHEMA = 1
FIRST_READ_BYTES = 1 << 20  # the first ranged read (doubled until the header parses; Qwen3-30B-A3B: ~6 MB)
MAX_HEADER_BYTES = 256 << 20  # give up (bad input) when no header is complete within this many bytes
_MAX_COUNT = 10_000_000  # tensor or key/value counts above this are a corrupt header, not a model
_CHUNK_BYTES = 64 << 20  # tensor data is generated and written in chunks of at most this many bytes
_FLOAT_STD = 0.02  # standard deviation of random float weights (a trained model's order of magnitude)

# fp16 fields of each block type: (byte offset in the block, typical value). The value is chosen so
# that the largest |weight| a block can decode to stays below ~0.3 with random quants and sub-scales
# (each field is drawn uniformly from [value, 1.5 x value]); every value is a normal fp16 number
# (>= 6.1e-5). Layouts from ggml/src/ggml-common.h (llama.cpp 0c1e57098); block sizes from
# gguf.constants.GGML_QUANT_SIZES. Every other byte of a block (quants, packed 4/6/8-bit sub-scales,
# high-bit masks) is valid whatever its value.
_SCALE_FIELDS: dict[str, tuple[tuple[int, float], ...]] = {
    "Q4_0": ((0, 6e-3),),  # {half d; u8 qs[16]}                        18 B / 32
    "Q4_1": ((0, 3e-3), (2, -2e-2)),  # {half d; half m; u8 qs[16]}                20 B / 32
    "Q5_0": ((0, 3e-3),),  # {half d; u8 qh[4]; u8 qs[16]}              22 B / 32
    "Q5_1": ((0, 1.5e-3), (2, -2e-2)),  # {half d; half m; u8 qh[4]; u8 qs[16]}      24 B / 32
    "Q8_0": ((0, 4e-4),),  # {half d; i8 qs[32]}                        34 B / 32
    "Q2_K": ((80, 1e-3), (82, 1e-3)),  # {u8 scales[16]; u8 qs[64]; half d; half dmin}  84 B / 256
    "Q3_K": ((108, 4e-4),),  # {u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d} 110 B / 256
    "Q4_K": ((0, 6.5e-5), (2, 6.5e-5)),  # {half d; half dmin; u8 scales[12]; u8 qs[128]}  144 B / 256
    "Q5_K": ((0, 6.5e-5), (2, 6.5e-5)),  # {half d; half dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]} 176 B
    "Q6_K": ((208, 6.5e-5),),  # {u8 ql[128]; u8 qh[64]; i8 scales[16]; half d}  210 B / 256
    "IQ4_NL": ((0, 4e-4),),  # {half d; u8 qs[16]}                        18 B / 32
    "IQ4_XS": ((0, 6.5e-5),),  # {half d; u16 scales_h; u8 scales_l[4]; u8 qs[128]} 136 B / 256
}
_FLOAT_TYPES = ("F32", "F16", "BF16")
SUPPORTED_TYPES = (*_FLOAT_TYPES, *_SCALE_FIELDS)


@dataclass(frozen=True)
class TensorSlot:
    """One tensor of a GGUF: `shape` in ggml order (ne0 = row length), `qtype` a gguf
    GGMLQuantizationType, `offset` the absolute byte offset of its data in the file, `n_bytes` its
    data size (elements / block size x block bytes)."""

    name: str
    shape: tuple[int, ...]
    qtype: Any
    offset: int
    n_bytes: int


@dataclass(frozen=True)
class GgufHeader:
    """The header of a GGUF file as read: `header` = the file's bytes [0, data offset) (magic,
    version, counts, key/values, tensor infos, padding), `file_size` (bytes) of the whole file,
    `alignment` (bytes), `tensors` in file order, `fields` = {key: value} of the metadata (arrays
    longer than 16 items summarised by their length), `bytes_read` = bytes fetched to get it."""

    header: bytes
    file_size: int
    alignment: int
    tensors: tuple[TensorSlot, ...]
    fields: dict[str, Any]
    bytes_read: int

    @property
    def data_offset(self) -> int:
        """Byte offset where tensor data starts (the header's length)."""
        return len(self.header)

    @property
    def sha256(self) -> str:
        """Hex sha256 of the header bytes."""
        return hashlib.sha256(self.header).hexdigest()

    def type_counts(self) -> dict[str, int]:
        """{type name: number of tensors of that type}, e.g. {"Q4_K": 290, "F32": 241}."""
        return dict(sorted(collections.Counter(t.qtype.name for t in self.tensors).items()))


def parse_header(buf: bytes, file_size: int, *, source: str) -> GgufHeader | None:
    """Parse the GGUF header in `buf` (the first len(buf) bytes of a file of `file_size` bytes).

    Returns None when `buf` ends before the header (key/values, tensor infos, alignment padding) does: read
    more and call again. Raises BadInput naming `source` for what no longer read can fix: no GGUF magic, a
    big-endian file, absurd counts, an unknown value type, a header that does not parse, tensor types a twin
    cannot fill (`SUPPORTED_TYPES`), tensors that overlap, are misaligned or end past `file_size`. The end is
    found by `_tensor_table_end` (lengths only); the parse is gguf's GGUFReader's, once, on a sparse temporary
    file of `file_size` bytes holding `buf`."""
    import gguf

    if len(buf) < 24:
        return None
    if buf[:4] != b"GGUF":
        raise BadInput(f"{source}: not a GGUF file (starts with {buf[:4]!r}, not b'GGUF')")
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", buf, 4)
    if version & 0xFFFF == 0:
        raise BadInput(f"{source}: a big-endian GGUF; twins are made of little-endian files only")
    if version not in (2, 3):
        raise BadInput(f"{source}: GGUF version {version}; twins are made of GGUF v2/v3 files")
    if n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT:
        raise BadInput(f"{source}: corrupt GGUF header ({n_tensors} tensors, {n_kv} key/values)")
    end = _tensor_table_end(buf, n_kv, n_tensors, source=source)
    if end is None:
        if len(buf) >= file_size:
            raise BadInput(f"{source}: the GGUF header runs past the end of the file ({file_size} bytes)")
        return None
    with tempfile.TemporaryDirectory(prefix="toolkit-twin-") as tmp:
        probe = Path(tmp) / "header.gguf"
        with open(probe, "wb") as f:
            f.write(buf)
            f.truncate(max(file_size, len(buf)))  # sparse: no disk space for the zeros
        try:
            reader = gguf.GGUFReader(probe)
        except (ValueError, KeyError, IndexError, OverflowError, UnicodeDecodeError) as err:
            raise BadInput(f"{source}: the GGUF header does not parse (gguf.GGUFReader: {err})") from None
        alignment = int(reader.alignment)
        data_offset = int(reader.data_offset)
        if data_offset != -(-end // alignment) * alignment:
            raise ToolkitError(
                f"{source}: gguf.GGUFReader puts the tensor data at byte {data_offset}, the header "
                f"walk ends at {end} (alignment {alignment}): a bug, please report it"
            )
        tensors = tuple(
            TensorSlot(
                t.name, tuple(int(x) for x in t.shape), t.tensor_type, int(t.data_offset), int(t.n_bytes)
            )
            for t in reader.tensors
        )
        fields = {name: _field_value(f) for name, f in reader.fields.items() if not name.startswith("GGUF.")}
        del reader  # closes the memmap before the directory goes
    if data_offset > len(buf):  # the alignment padding is not read yet
        return None
    _check_tensors(tensors, alignment, data_offset=data_offset, file_size=file_size, source=source)
    return GgufHeader(bytes(buf[:data_offset]), file_size, alignment, tensors, fields, len(buf))


def header_end(buf: Any, *, source: str) -> int | None:
    """Where the GGUF header of `buf` (bytes, or an mmap of the whole file: nothing is read but the header)
    ends by its own declared lengths, or None when a declared length — a key or value string, an array, a
    tensor name — runs past the end of `buf`, or its counts are absurd (gguf's GGUFReader silently shortens
    such a string). BadInput for an unknown value type."""
    if len(buf) < 24:
        return None
    n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)
    if n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT:
        return None
    return _tensor_table_end(buf, n_kv, n_tensors, source=source)


def _tensor_table_end(buf: Any, n_kv: int, n_tensors: int, *, source: str) -> int | None:
    """Byte offset where the tensor-info table of the GGUF header in `buf` ends, or None when it
    ends past `buf`. Walks the key/values and tensor infos by their lengths only (GGUF v2/v3,
    little-endian: string = u64 length + bytes; value = u32 type + payload; array = u32 item type +
    u64 count + items; tensor info = string name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset).
    Scalar sizes are gguf's (GGUFReader.gguf_scalar_to_np). Raises BadInput for an unknown value type.
    """
    import gguf
    import numpy as np

    sizes = {int(t): np.dtype(np_t).itemsize for t, np_t in gguf.GGUFReader.gguf_scalar_to_np.items()}
    string_t, array_t = int(gguf.GGUFValueType.STRING), int(gguf.GGUFValueType.ARRAY)

    def string(pos: int) -> int:
        return pos + 8 + struct.unpack_from("<Q", buf, pos)[0]

    def value(pos: int, vtype: int) -> int:
        if vtype in sizes:
            return pos + sizes[vtype]
        if vtype == string_t:
            return string(pos)
        if vtype != array_t:
            raise BadInput(f"{source}: unknown GGUF value type {vtype} at byte {pos}")
        itype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if itype in sizes:
            return pos + count * sizes[itype]
        for _ in range(count):
            pos = value(pos, itype)
            if pos > len(buf):
                raise struct.error("past the end")
        return pos

    pos = 24
    try:
        for _ in range(n_kv):
            pos = string(pos)
            pos = value(pos + 4, struct.unpack_from("<I", buf, pos)[0])
        for _ in range(n_tensors):
            pos = string(pos)
            pos += 4 + 8 * struct.unpack_from("<I", buf, pos)[0] + 4 + 8
    except struct.error:
        return None
    return pos if pos <= len(buf) else None


def _field_value(field: Any) -> Any:
    """A metadata value for display and records; arrays longer than 16 items become "[N items]"."""
    try:
        if len(field.data) > 16 and len(field.types) > 1:
            return f"[{len(field.data)} items]"
        return field.contents()
    except (ValueError, UnicodeDecodeError):
        return "(undecodable)"


def _check_tensors(
    tensors: tuple[TensorSlot, ...], alignment: int, *, data_offset: int, file_size: int, source: str
) -> None:
    """Refuse tensor types a twin cannot fill and tensor data that overlaps, is misaligned or lies
    past the end of the file (BadInput naming `source` and the tensor)."""
    bad = collections.Counter(t.qtype.name for t in tensors if t.qtype.name not in SUPPORTED_TYPES)
    if bad:
        names = ", ".join(f"{k} ({v} tensors)" for k, v in sorted(bad.items()))
        raise BadInput(
            f"{source}: tensor types a twin cannot fill with valid data: {names}; supported: "
            f"{', '.join(SUPPORTED_TYPES)} (their block layouts are in toolkit/models/twin.py _SCALE_FIELDS)"
        )
    end = data_offset
    for t in sorted(tensors, key=lambda t: t.offset):
        if (t.offset - data_offset) % alignment or t.offset < end:
            raise BadInput(
                f"{source}: tensor {t.name} starts at byte {t.offset}, which overlaps the previous "
                f"tensor (ends at {end}) or is not aligned to {alignment} bytes"
            )
        end = t.offset + t.n_bytes
        if end > file_size:
            raise BadInput(
                f"{source}: tensor {t.name} ends at byte {end}, past the end of the file ({counted(file_size, 'byte')})"
            )


def read_header(
    fetch: Callable[[int, int], bytes],
    file_size: int,
    *,
    source: str,
    first_bytes: int = FIRST_READ_BYTES,
    max_bytes: int = MAX_HEADER_BYTES,
) -> GgufHeader:
    """Read a GGUF header through `fetch(start, end)` (bytes [start, end) of the file), reading
    `first_bytes` first and doubling the total read until the header parses (`parse_header`).

    Raises BadInput when the header is not complete within `max_bytes` (or the file) or is invalid.
    """
    buf = b""
    want = min(first_bytes, file_size)
    while True:
        if want > len(buf):
            got = fetch(len(buf), want)
            if len(got) != want - len(buf):
                raise ToolkitError(
                    f"{source}: asked for bytes {len(buf)}-{want - 1}, got {counted(len(got), 'byte')}"
                )
            buf += got
        parsed = parse_header(buf, file_size, source=source)
        if parsed is not None:
            return parsed
        if len(buf) >= min(file_size, max_bytes):
            raise BadInput(f"{source}: no complete GGUF header in the first {counted(len(buf), 'byte')}")
        want = min(2 * len(buf), file_size, max_bytes)


def read_hub_header(
    repo: str,
    file: str,
    revision: str,
    *,
    first_bytes: int = FIRST_READ_BYTES,
    max_bytes: int = MAX_HEADER_BYTES,
    offline: str = "the twin needs the Hugging Face Hub (or HF_ENDPOINT) to be reachable",
) -> GgufHeader:
    """Read the header of `file` in the Hub model repo `repo` at commit `revision` by HTTP range
    requests (huggingface_hub `HfFileSystem`, which honours HF_ENDPOINT and HF_TOKEN).

    Raises BadInput (no such repo, revision or file; not a usable GGUF header) or ToolkitError (the
    Hub cannot be reached: the message says so, then `offline`, what to do instead).
    """
    from huggingface_hub import HfFileSystem

    source = f"{repo}/{file}@{revision}"
    try:
        fs = HfFileSystem()
        with fs.open(
            f"{repo}/{file}", "rb", revision=revision, block_size=first_bytes, cache_type="none"
        ) as f:
            size = int(f.size)

            def fetch(start: int, end: int) -> bytes:
                f.seek(start)
                return f.read(end - start)

            return read_header(fetch, size, source=source, first_bytes=first_bytes, max_bytes=max_bytes)
    except ToolkitError:
        raise
    except FileNotFoundError as err:
        raise BadInput(
            f"{source}: not found on the Hub ({str(err)[:200]}); fix models[].hf (repo, file, revision)"
        ) from None
    except Exception as err:  # hub and HTTP errors come in many types; the message is what matters
        raise RemoteUnavailable(
            f"could not read the header of {source} ({type(err).__name__}: {str(err)[:200]}); {offline}"
        ) from None


def _random_bytes(rng: np.random.Generator, n: int) -> np.ndarray:
    """`n` random bytes (uint8 array) straight from the generator's 64-bit output (~2 GB/s; numpy's
    Generator.bytes is ~10x slower)."""
    import numpy as np

    return rng.bit_generator.random_raw(-(-n // 8)).view(np.uint8)[:n]


def _block_bytes(qtype: Any, n_blocks: int, block_bytes: int, rng: np.random.Generator) -> np.ndarray:
    """`n_blocks` random blocks of a quantized type with valid fp16 scale fields, as flat uint8."""
    import numpy as np

    blocks = _random_bytes(rng, n_blocks * block_bytes).reshape(n_blocks, block_bytes)
    for offset, value in _SCALE_FIELDS[qtype.name]:
        scales = (rng.uniform(1.0, 1.5, n_blocks) * value).astype(np.float16)
        blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(-1)


def _as_float_type(name: str, values: np.ndarray) -> np.ndarray:
    """float32 `values` in float type `name`'s bytes: F32 as is, F16, BF16 = the float32's upper half
    (ggml's bf16 layout) as uint16."""
    import numpy as np

    if name == "F16":
        return values.astype(np.float16)
    if name == "BF16":
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    return values


_FLOAT_TABLES: dict[str, np.ndarray] = {}


def _float_bytes(qtype: Any, n: int, norm: bool, rng: np.random.Generator) -> np.ndarray:
    """`n` elements of a float type as flat uint8: 1.0 for norm weights, else random uniform over
    +-0.02 x sqrt(3) (standard deviation 0.02; the distribution does not matter, the magnitude keeps
    activations finite), looked up from a 65,536-entry table by random uint16s (numpy's float32 ->
    float16 conversion is ~10x slower)."""
    import numpy as np

    if norm:
        return _as_float_type(qtype.name, np.ones(n, np.float32)).view(np.uint8)
    if qtype.name not in _FLOAT_TABLES:
        steps = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.int16).astype(np.float32)
        _FLOAT_TABLES[qtype.name] = _as_float_type(
            qtype.name, steps * np.float32(_FLOAT_STD * 3**0.5 / 32768)
        )
    return _FLOAT_TABLES[qtype.name][_random_bytes(rng, 2 * n).view(np.uint16)].view(np.uint8)


def tensor_chunks(
    t: TensorSlot, rng: np.random.Generator, chunk_bytes: int = _CHUNK_BYTES
) -> Iterator[np.ndarray]:
    """The twin's data for tensor `t`: `t.n_bytes` bytes as flat uint8 arrays of at most `chunk_bytes`
    (whole blocks). Raises BadInput for a type not in SUPPORTED_TYPES."""
    import gguf

    if t.qtype.name not in SUPPORTED_TYPES:
        raise BadInput(f"tensor {t.name}: type {t.qtype.name} cannot be filled with valid data")
    _, block_bytes = gguf.GGML_QUANT_SIZES[t.qtype]
    if t.n_bytes % block_bytes:
        raise BadInput(f"tensor {t.name}: {t.n_bytes} bytes is not a whole number of {t.qtype.name} blocks")
    per_chunk = max(1, chunk_bytes // block_bytes)
    left = t.n_bytes // block_bytes
    while left:
        n = min(per_chunk, left)
        if t.qtype.name in _FLOAT_TYPES:
            yield _float_bytes(t.qtype, n, "norm" in t.name, rng)
        else:
            yield _block_bytes(t.qtype, n, block_bytes, rng)
        left -= n


def write_twin(header: GgufHeader, path: Path, *, seed: int = 0) -> str:
    """Write the twin of `header` to `path` (via a temporary file in the same folder and os.replace)
    and return its hex sha256. The file is `header.file_size` bytes: the header verbatim, each
    tensor's random valid data at its offset, zeros between tensors (GGUF alignment padding).

    numpy's PCG64 with `seed` draws the data: the same header and seed give the same bytes.
    Raises FileSystemError (exit 8) when the folder cannot take the file (space, permissions).
    """
    import numpy as np

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    free = _free_bytes(path.parent)
    if free is not None and free < header.file_size:
        raise FileSystemError(
            f"{path.parent}: {counted(free, 'byte')} free, the twin needs {header.file_size}; free space or "
            "choose another path"
        )
    rng = np.random.default_rng(seed)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:

            def put(data: bytes | memoryview) -> None:
                f.write(data)
                digest.update(data)

            put(header.header)
            at = header.data_offset
            for t in sorted(header.tensors, key=lambda t: t.offset):
                put(bytes(t.offset - at))
                for chunk in tensor_chunks(t, rng):
                    put(chunk.data)  # the array's bytes: its buffer, not a copy
                at = t.offset + t.n_bytes
            put(bytes(header.file_size - at))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_name, 0o644)  # mkstemp makes 0600; containers may read it as another user
        os.replace(tmp_name, path)
    except OSError as err:
        Path(tmp_name).unlink(missing_ok=True)
        raise FileSystemError.from_oserror(err, "writing the twin") from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return digest.hexdigest()


def _free_bytes(folder: Path) -> int | None:
    """Free bytes in `folder`'s file system, or None where that cannot be asked."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def twin_path(path: Path) -> Path:
    """Where the twin of the model file `path` goes: `X.gguf` -> `X.twin.gguf` (a path that already
    names a twin is kept)."""
    path = Path(path)
    if path.name.endswith(".twin.gguf"):
        return path
    stem = path.name[: -len(".gguf")] if path.name.endswith(".gguf") else path.name
    return path.with_name(stem + ".twin.gguf")


def sidecar_path(path: Path) -> Path:
    """The twin record beside a twin file: `X.twin.gguf` -> `X.twin.gguf.twin.json`."""
    return Path(str(path) + SIDECAR_SUFFIX)


def write_sidecar(
    path: Path, header: GgufHeader, *, sha256: str, seed: int, repo: str, revision: str, file: str
) -> dict:
    """Write `<path>.twin.json` describing the twin at `path`; return what was written.

    Keys: schema, kind ("synthetic-twin"), sha256 and size_bytes (of the twin), seed, generator,
    created (UTC ISO 8601), tensor_types ({type: count}), twin_of = {repo, revision, file,
    header_sha256, header_bytes, size_bytes (of the real file), bytes_read (fetched to read the header),
    architecture, name}.
    """
    from toolkit import __version__
    from toolkit.results.records import write_json_atomic

    data = {
        "schema": SIDECAR_SCHEMA,
        "kind": TWIN_KIND,
        "sha256": sha256,
        "size_bytes": header.file_size,
        "seed": seed,
        "generator": f"toolkit {__version__} (toolkit/models/twin.py)",
        "created": utc_now(),
        "tensor_types": header.type_counts(),
        "twin_of": {
            "repo": repo,
            "revision": revision,
            "file": file,
            "header_sha256": header.sha256,
            "header_bytes": header.data_offset,
            "size_bytes": header.file_size,
            "bytes_read": header.bytes_read,
            "architecture": header.fields.get("general.architecture"),
            "name": header.fields.get("general.name"),
        },
    }
    try:
        write_json_atomic(sidecar_path(path), data)
    except OSError as err:
        raise FileSystemError.from_oserror(err, "writing the twin record") from None
    return data


def read_sidecar(path: Path) -> dict | None:
    """The twin record beside model file `path`, or None when there is none. Raises BadInput (naming
    the record) when it is not a JSON object of a known schema with kind "synthetic-twin"."""
    side = sidecar_path(path)
    if not side.is_file():
        return None
    try:
        with open(side, "rb") as fh:
            data = jsonsafe.load(fh)
    except (OSError, jsonsafe.JsonProblem) as err:
        raise BadInput(
            f"{side}: unreadable twin record ({err}); delete it and re-run `{invocation.command('fetch-model', 'NAME', '--twin')}`"
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SIDECAR_SCHEMA or data.get("kind") != TWIN_KIND:
        raise BadInput(
            f"{side}: not a twin record of schema {SIDECAR_SCHEMA} (kind {TWIN_KIND}); delete it and "
            f"re-run `{invocation.command('fetch-model', 'NAME', '--twin')}`"
        )
    return data


def model_extras(path: Path, sha256: str) -> dict:
    """Extras for the model record (records.ModelRef) of the file at `path` whose sha256 is `sha256`:
    {"kind": "synthetic-twin", "twin_of": {...}} for a twin, {} for a file without a twin record.

    Raises BadInput when a twin record lies beside a file with another sha256 (the file was replaced
    or changed since the twin was written: its numbers must not be labelled either way).
    """
    data = read_sidecar(Path(path))
    if data is None:
        return {}
    if data.get("sha256") != sha256:
        raise BadInput(
            f"{sidecar_path(path)}: describes a twin with sha256 {data.get('sha256')}, but {path} has "
            f"{sha256}; re-run `{invocation.command('fetch-model', 'NAME', '--twin')}`, or delete the record if {path} is "
            "not a twin"
        )
    return {"kind": TWIN_KIND, "twin_of": data["twin_of"]}
