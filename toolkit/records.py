"""Typed, versioned records: what was built (BuildRecord) and what was measured (BenchRecord).

Layout under results/ (one folder per image digest, so results are keyed by what was measured):

    results/builds.jsonl                         every BuildRecord, appended
    results/<digest-hex12>/bench.jsonl           BenchRecords of that image digest, appended
    results/<digest-hex12>/logs/<run_id>-...log  container logs of runs (failed ones kept)

Each line is one complete JSON object written with a single `write()` + flush + fsync, so a killed
process never leaves a half record; readers skip (and report) a corrupt line instead of failing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

RECORD_SCHEMA_VERSION = 1


class ImageRef(BaseModel):
    """An image as measured: `digest` is the image ID (sha256:...), `repo_digests` registry digests."""

    model_config = ConfigDict(extra="allow")

    name: str
    ref: str
    digest: str
    backend: str
    repo_digests: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)

    @property
    def short(self) -> str:
        return short_digest(self.digest)


class BuildRecord(BaseModel):
    """One `toolkit build` of one image. Sizes in bytes, durations in seconds."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = RECORD_SCHEMA_VERSION
    image: str
    ref: str
    digest: str
    backend: str
    template: str
    template_hash: str
    source_commit: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    size_bytes: int = 0
    build_seconds: float = 0.0
    cached: bool = False
    created: str
    build_command: list[str] = Field(default_factory=list)
    repo_digests: list[str] = Field(default_factory=list)
    pushed: list[str] = Field(default_factory=list)


class ModelRef(BaseModel):
    """The model file measured: sha256 of the file's bytes, size in bytes."""

    model_config = ConfigDict(extra="allow")

    name: str
    path: str
    sha256: str
    size_bytes: int


class BenchRecord(BaseModel):
    """One measured (or failed) test: one llama-bench output row, or one vLLM measurement.

    tok/s fields (`avg_ts`, `stddev_ts`, `samples_ts`) are tokens per second over `n_prompt`
    (prefill) or `n_gen` (decode) tokens. `n_ubatch` is what was asked; `n_ubatch_effective` is
    min(n_ubatch, n_batch, n_prompt + n_gen + n_depth) (llama.cpp clamps; see
    shared/reference/llama-bench.md). `raw` keeps the tool's record unchanged, unknown fields included.
    """

    model_config = ConfigDict(extra="allow")

    schema_version: int = RECORD_SCHEMA_VERSION
    run_id: str
    created: str
    status: str = "ok"  # ok | failed
    error: str | None = None
    runner: str = "llama-bench"
    method: str = "llama-bench"
    image: ImageRef
    model: ModelRef
    test: str
    axis: str
    n_prompt: int = 0
    n_gen: int = 0
    n_depth: int = 0
    n_batch: int | None = None
    n_ubatch: int | None = None
    n_ubatch_effective: int | None = None
    flash_attn: int | None = None
    n_gpu_layers: int | None = None
    avg_ts: float | None = None
    stddev_ts: float | None = None
    samples_ts: list[float] = Field(default_factory=list)
    backends: str | None = None
    gpu_info: str | None = None
    build_commit: str | None = None
    command: list[str] = Field(default_factory=list)
    host: dict[str, Any] = Field(default_factory=dict)
    timing: dict[str, float] = Field(default_factory=dict)
    engine: dict[str, Any] = Field(default_factory=dict)
    log_file: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict)

    def key(self) -> tuple:
        """Test-defining parameters: two records with the same key measure the same thing."""
        return (
            self.image.digest,
            self.model.sha256,
            self.method,
            self.n_prompt,
            self.n_gen,
            self.n_depth,
            self.n_batch,
            self.n_ubatch,
            self.flash_attn,
            self.n_gpu_layers,
            self.engine.get("concurrency"),
            self.raw.get("n_threads"),
        )


def short_digest(digest: str) -> str:
    """sha256:abcdef0123456789... -> abcdef012345 (12 hex digits, like `docker images`)."""
    return digest.split(":", 1)[-1][:12]


def append_jsonl(path: Path, obj: BaseModel | dict) -> None:
    """Append one complete line atomically enough for a crash: one write, flush, fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    line = json.dumps(data, sort_keys=False, separators=(",", ":")) + "\n"
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line  # a killed writer left a half line: never glue a record onto it
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: Path, warnings: list[str] | None = None) -> Iterator[dict]:
    """Yield each JSON object line of `path`; a corrupt or partial line is skipped and noted."""
    if not path.is_file():
        return
    with path.open() as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                if warnings is not None:
                    warnings.append(f"{path}:{n}: skipped a corrupt line (not JSON)")
                continue
            if isinstance(obj, dict):
                yield obj


def write_json_atomic(path: Path, data: Any) -> None:
    """Write a JSON file via temp file + os.replace (never a half-written file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


class ResultStore:
    """results/ on disk. All readers and writers of records go through this class."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.warnings: list[str] = []

    @property
    def builds_file(self) -> Path:
        return self.root / "builds.jsonl"

    def digest_dir(self, digest: str) -> Path:
        return self.root / short_digest(digest)

    def add_build(self, rec: BuildRecord) -> None:
        append_jsonl(self.builds_file, rec)

    def builds(self) -> list[BuildRecord]:
        out: list[BuildRecord] = []
        for n, o in enumerate(read_jsonl(self.builds_file, self.warnings), 1):
            try:
                out.append(BuildRecord.model_validate(o))
            except Exception:  # a hand-edited or foreign line: skip it, say so
                self.warnings.append(f"{self.builds_file}: skipped build record #{n}: not a valid build record")
        return out

    def latest_build(self, image: str) -> BuildRecord | None:
        found = [b for b in self.builds() if b.image == image]
        return found[-1] if found else None

    def add_result(self, rec: BenchRecord) -> Path:
        path = self.digest_dir(rec.image.digest) / "bench.jsonl"
        append_jsonl(path, rec)
        return path

    def results(self) -> list[BenchRecord]:
        out: list[BenchRecord] = []
        for f in sorted(self.root.glob("*/bench.jsonl")):
            for obj in read_jsonl(f, self.warnings):
                try:
                    out.append(BenchRecord.model_validate(obj))
                except Exception as err:  # a record from a newer/older schema: keep going
                    first = str(err).splitlines()[1:2] or [""]
                    self.warnings.append(f"{f}: skipped a record that does not match schema v1 ({first[0].strip()})")
        return out

    def log_path(self, digest: str, name: str) -> Path:
        p = self.digest_dir(digest) / "logs" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p
