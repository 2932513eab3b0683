"""Typed, versioned records: what was built (BuildRecord) and what was measured (BenchRecord).

Layout under results/ (one folder per image digest, so results are keyed by what was measured):

    results/builds.jsonl                         every BuildRecord, appended
    results/<digest-hex12>/bench.jsonl           BenchRecords of that image digest, appended
    results/<digest-hex12>/logs/<run_id>-...log  container logs of runs (failed ones kept)

Each line is one complete JSON object written with a single `write()` + flush + fsync, so a killed
process never leaves a half record; readers skip (and report) a corrupt line instead of failing.

Order: every BenchRecord appended through a ResultStore carries `seq`, the store's own counter
(results/.seq, taken under an flock of that file at append time: strictly increasing in the order
records were written, whatever the hosts' clocks say). Runs are ordered by it (records written before
it existed: by their place in their file). A record whose `created` disagrees with that order (earlier
than a record written before it, or in the future) is marked clock-skew when read. A seq above the
store's counter is not one it gave and reads as none (results/sequence.py).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import re
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from toolkit.core import jsonsafe, stats
from toolkit.core.errors import FileSystemError
from toolkit.core.signals import no_interrupt
from toolkit.core.text import NOT_ONE_LINE, counted, path_text
from toolkit.core.types import (  # the bounds every reader holds a measurement to
    INT64,
    MAX_TOKENS,
    MAX_TOKENS_PER_S,
    MIN_TOKENS_PER_S,
)
from toolkit.results import bench_files, make_folders, open_regular
from toolkit.results.sequence import (
    MAX_SEQ,
    SEQ_FILE,
    counter,
    counter_value,
    mark_clock_skew,
    reserve,
    store_of,
    trusted,
    untrusted_note,
)

RECORD_SCHEMA_VERSION = 2


def _no_bool(v: Any) -> Any:
    """A JSON true/false where a record holds a number: refused (ValueError), never read as 1 or 0
    (bool is an int in Python, and pydantic's lax mode reads `true` as 1 and 1.0)."""
    if isinstance(v, bool):
        raise ValueError(f"{str(v).lower()} is a boolean, not a number")
    return v


_I64 = Field(ge=INT64[0], le=INT64[1])
Switch = Annotated[int, _I64]  # an on/off setting (flash_attn): true and false are among its spellings
Int = Annotated[int, BeforeValidator(_no_bool), _I64]
Num = Annotated[float, BeforeValidator(_no_bool)]
Size = Annotated[
    int, BeforeValidator(lambda v: 0 if isinstance(v, bool) else v), _I64
]  # bool: 0, not recorded


def _one_line(run_id: str) -> str:
    if NOT_ONE_LINE.search(run_id):
        raise ValueError(
            f"{run_id[:80]!r} holds a control character (a line break, an escape): a run id "
            "is one line of text (`20261205T101102Z-70c142`)"
        )
    return run_id


RunId = Annotated[str, AfterValidator(_one_line)]
"""A run id as records and run.json hold it: one line without control or bidi characters (a stranger's
`...\\nerror: forged` printed a line of its own in every refusal and table that names runs)."""
KNOWN_SCHEMA_VERSIONS = (1, 2)  # 2: `telemetry` (what the system did during the test)


def _nonfinite(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


IMPORTED = "import:"
"""The digest prefix of an image no engine built or ran here: results `toolkit import` filed (`import:`
and the sha256 of the files' content, or of a label), never pullable or rebuildable."""


def imported(digest: str) -> bool:
    """Whether image digest `digest` is one `toolkit import` filed (it starts with IMPORTED)."""
    return digest.startswith(IMPORTED)


RUN_ID = re.compile(r"(\d{8}T\d{6}Z)-[0-9a-f]{6}\b", re.ASCII)
"""A run id as new_run_id makes it: its start, UTC, to the second, and 6 hex digits."""


def new_run_id() -> str:
    """A new run's id (`20261205T101102Z-70c142`): its start, UTC, to the second, and 6 random hex
    digits, so two runs of one second differ (a bench's run, a tune session, `toolkit measure`'s output)."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3)


def run_id_start(text: str) -> float | None:
    """Unix time (s) of the start named by the run id `text` opens with (RUN_ID: an id of a lock file, or
    `ID (pid ...)` as guard describes a run); None for another text."""
    m = RUN_ID.match(text)
    if m is None:
        return None
    try:
        return datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


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
    engine: str | None = None
    """The engine that holds the image: engine.engine_id() at build time (Docker's engine ID,
    `podmanroot`, `podmanu<uid>`). None in records written before engines were told apart: such a
    build counts for any engine."""
    source_origin: str | None = None
    """Where the runtime's source came from (images/sources.py: `pypi:llama-cpp-python==0.3.36` where the
    git fetch fell back to PyPI's sdist); None for a build without source. Bench copies it into each
    record's image (runners.base.image_ref), where the report says it."""

    def on_engine(self, engine_id: str | None) -> bool:
        """True when this build's image is in the engine `engine_id` (None: any engine) as far as the
        record can tell: built there, or recorded before builds named their engine."""
        return engine_id is None or self.engine in (None, engine_id)


class ModelRef(BaseModel):
    """The model file measured: sha256 of the file's bytes, size in bytes."""

    model_config = ConfigDict(extra="allow")

    name: str
    path: str
    sha256: str
    size_bytes: Size


TIMING_FIELDS: dict[str, str] = {
    "wall_s": "container wall time behind the record, seconds (a llama-bench row: up to and including it)",
    "tests_s": "of which the measured windows: the timed iterations, requests or tests",
    "startup_s": "the rest: container start, model load, compile, warm-up (wall_s - tests_s)",
    "reference_startup_s": "start-up of a reference run the value is derived from (vLLM decode: output 1)",
    "cache_cold": "1.0 when the per-digest cache volume (Mesa shaders, vLLM compile) was new, else 0.0",
}
"""The one set of names every runner uses in BenchRecord.timing (and Outcome.timing), all optional but
wall_s; the Runner protocol (toolkit.bench.runners.base.Runner) documents who writes which."""

TIMING_ALIASES: dict[str, tuple[str, ...]] = {
    "wall_s": ("elapsed_s",),  # llama-bench rows before the runners shared one set of names
    "tests_s": ("measured_s",),  # vLLM records before it
    "cache_cold": ("shader_cache_cold", "compile_cache_cold"),  # llama-bench (Vulkan) / vLLM before it
}
"""Older names of TIMING_FIELDS that records written before still carry: `timing_value` reads them."""


def timing_value(timing: Mapping[str, Any], name: str) -> float | None:
    """`timing[name]` of a record (or a summary line) under its current name, else under an older one
    (TIMING_ALIASES), so records of every toolkit version read alike; None when it has neither."""
    for key in (name, *TIMING_ALIASES.get(name, ())):
        value = timing.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


NO_TEST = "(none)"
"""The test of a failed record of no one test (a crash or Ctrl-C between tests, a Slurm slice with no
output): the report names its image alone."""


class BenchRecord(BaseModel):
    """One measured (or failed) test: one llama-bench output row, or one vLLM / SGLang measurement.

    tok/s fields (`avg_ts`, `stddev_ts`, `samples_ts`) are tokens per second over `n_prompt` (prefill) or
    `n_gen` (decode) tokens. `n_ubatch` is what was asked; `n_ubatch_effective` is min(n_ubatch, n_batch,
    n_prompt) (llama_bench.check.effective_ubatch; before 2026-12-05 stored as legacy_effective_ubatch). `raw`
    keeps the tool's record unchanged, unknown fields included. `timing` uses the names of TIMING_FIELDS; read
    it with `timing_value`, which also reads older names."""

    model_config = ConfigDict(extra="allow")

    schema_version: Int = RECORD_SCHEMA_VERSION
    run_id: RunId
    created: str
    status: str = "ok"  # ok | failed
    error: str | None = None
    runner: str = "llama-bench"
    method: str = "llama-bench"
    image: ImageRef
    model: ModelRef
    test: str
    axis: str
    n_prompt: Int = 0
    n_gen: Int = 0
    n_depth: Int = 0
    n_batch: Int | None = None
    n_ubatch: Int | None = None
    n_ubatch_effective: Int | None = None
    flash_attn: Switch | None = None
    n_gpu_layers: Int | None = None
    avg_ts: Num | None = None
    stddev_ts: Num | None = None
    samples_ts: list[Num] = Field(default_factory=list)
    backends: str | None = None
    gpu_info: str | None = None
    build_commit: str | None = None
    command: list[str] = Field(default_factory=list)
    host: dict[str, Any] = Field(default_factory=dict)
    timing: dict[str, Num] = Field(default_factory=dict)
    engine: dict[str, Any] = Field(default_factory=dict)
    log_file: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict)
    # the `bench.env` axis values this test ran with (part of its identity: `env.NAME`), and the
    # container's effective environment (the image's ENV overlaid with the run's -e, as Docker merges
    # them: toolkit.bench.runners.base.effective_environment); None where not recorded (older records)
    env: dict[str, str | None] = Field(default_factory=dict)  # None: left unset
    environment: dict[str, str] | None = None
    # schema 2: the state of the system during this test's window (toolkit.bench.observe
    # window_summary: GPU power/energy/clocks/throttling/other processes, host load); None in schema 1
    telemetry: dict[str, Any] | None = None
    # the store's sequence number, given when the record was appended (ResultStore); None before that
    # and in records written before it existed (their place in their file orders them)
    seq: Int | None = None
    # why this record's `created` disagrees with the store's order (set when read, never stored)
    _clock_skew: str | None = PrivateAttr(default=None)
    # set on a record identity.combine_runs made: its flags are each process's, already held to that
    # process's own telemetry (its `telemetry` is the newest process's only); never stored
    _flags_checked: bool = PrivateAttr(default=False)

    @property
    def clock_skew(self) -> str | None:
        """Why `created` disagrees with the store's write order (see mark_clock_skew), or None."""
        return (self.__pydantic_private__ or {}).get("_clock_skew")  # not through BaseModel.__getattr__

    @model_validator(mode="after")
    def _strictly_finite(self) -> BenchRecord:
        """Non-finite numbers never become results (llama-bench writes `nan`/`-nan` for the stddev of
        identical samples, and a crashed timer can give `inf`).

        - avg_ts or any sample NaN/inf/negative, above MAX_TOKENS_PER_S or below MIN_TOKENS_PER_S: refused
          (ValueError naming the field); so is an ok record without a tok/s (as llama_bench.validity.check_row);
        - stddev_ts NaN/inf: recomputed from samples_ts (sample stddev, >= 2 samples) or None, listed in `repaired`;
        - one sample: stddev_ts is None (unknown; llama-bench writes 0);
        - `raw` keeps the tool's record with non-finite floats as null, so every line stays valid JSON;
        - a token count (n_prompt, n_gen, n_depth, n_batch, n_ubatch) above MAX_TOKENS: refused; one below 0, or a
          batch of 0 tokens, refused as check_row refuses it at import (`n_depth is -5: expected >= 0`)."""
        fields = self.__dict__
        for name in ("n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch", "n_ubatch_effective"):
            count = fields[name]
            if count is not None and not 0 < count <= MAX_TOKENS:  # the common case: in range
                _check_count(name, count)
        nums, low = [("avg_ts", self.avg_ts)], MIN_TOKENS_PER_S
        if not all(v is None or low <= v <= MAX_TOKENS_PER_S for v in (self.avg_ts, *self.samples_ts)):
            nums += [(f"samples_ts[{i}]", x) for i, x in enumerate(self.samples_ts)]  # NaN: not in range
        has_speed = (self.avg_ts or 0) > 0  # a 0 (1e-8) tok/s repetition beside a speed: none (avg 0: below)
        for name, v in nums:
            if v is not None and (_nonfinite(v) or v < 0 or v > MAX_TOKENS_PER_S or (v < low and has_speed)):
                raise ValueError(
                    f"{name} is {v!r}: not a measurement (expected a finite tokens/s of {low:.0e} to "
                    f"{MAX_TOKENS_PER_S:.0e})"
                )
        if self.status == "ok" and self.avg_ts is not None and self.avg_ts < MIN_TOKENS_PER_S:
            raise ValueError(
                f"avg_ts is {self.avg_ts!r}: not a measurement (a test takes time and yields tokens, at "
                f"least {MIN_TOKENS_PER_S:.0e} tokens/s; the validity pass of llama-bench rows says the same)"
            )
        if (
            self.status == "ok"
            and self.avg_ts is None
            and not (self.axis == "served" and isinstance(self.raw.get("output_throughput"), (int, float)))
        ):
            raise ValueError("avg_ts is missing: not a measurement (an ok record needs its tokens/s)")
        repaired = list((self.model_extra or {}).get("repaired") or [])
        if self.stddev_ts is not None and (_nonfinite(self.stddev_ts) or self.stddev_ts < 0):
            self.stddev_ts = round(stats.stdev(self.samples_ts), 6) if len(self.samples_ts) > 1 else None
            repaired.append("stddev_ts")
        if len(self.samples_ts) == 1 and self.stddev_ts is not None:
            self.stddev_ts = None  # llama-bench writes 0 for one sample: the spread is unknown, not nil
        if self.raw and _any_nonfinite(self.raw):
            self.raw = jsonsafe.finite_or_none(self.raw)
            repaired.append("raw")
        if repaired:
            self.__pydantic_extra__ = {**(self.model_extra or {}), "repaired": sorted(set(repaired))}
        return self


def _check_count(name: str, count: int) -> None:
    """Raises ValueError for a token count out of range (BenchRecord._strictly_finite)."""
    if count < 0 and abs(count) <= MAX_TOKENS:
        raise ValueError(f"{name} is {count}: expected >= 0")
    if count == 0 and name in ("n_batch", "n_ubatch"):
        raise ValueError(f"{name} is 0: llama.cpp takes at least 1 token per batch (no such test can run)")
    if abs(count) > MAX_TOKENS:
        digits = len(str(abs(count)))
        raise ValueError(f"{name} has {digits} digits: not a token count (at most {MAX_TOKENS:.0e} tokens)")


def _any_nonfinite(v: Any) -> bool:
    """True when a JSON-like value holds a NaN/inf float anywhere (dicts and lists walked, no recursion
    limit)."""
    isfinite = math.isfinite
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            x = x.values()
        elif not isinstance(x, list):
            if isinstance(x, float) and not isfinite(x):
                return True
            continue
        for y in x:
            t = type(y)
            if t is float:
                if not isfinite(y):
                    return True
            elif t is not str and t is not int and t is not bool and y is not None:
                stack.append(y)
    return False


def short_digest(digest: str) -> str:
    """sha256:abcdef0123456789... -> abcdef012345 (12 hex digits, like `docker images`)."""
    return digest.split(":", 1)[-1][:12]


def append_jsonl(path: Path, obj: BaseModel | dict) -> None:
    """Append one complete line, whole or absent: one write, then fsync. A short write or an error
    (disk full, I/O error) cuts the file back to its old length and raises OSError naming `path`."""
    make_folders(path.parent)  # results/<digest12>: never through a link
    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    line = json.dumps(data, sort_keys=False, separators=(",", ":"), allow_nan=False) + "\n"
    fd = open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line  # a killed writer left a half line: never glue a record onto it
        data_b = line.encode()
        written = 0
        try:
            written = os.write(fd, data_b)
            if written != len(data_b):
                raise OSError(
                    errno.ENOSPC,
                    f"{os.strerror(errno.ENOSPC)} (wrote {written} of {counted(len(data_b), 'byte')})",
                )
            os.fsync(fd)
        except OSError as err:
            if os.fstat(fd).st_size == size + written:  # only our own bytes: nobody appended meanwhile
                os.ftruncate(fd, size)
            raise OSError(err.errno, err.strerror, str(path)) from None
    finally:
        os.close(fd)


def append_jsonl_many(path: Path, objs: Sequence[BaseModel | dict]) -> None:
    """Append several complete lines with one write and one fsync, all or none (as append_jsonl)."""
    if not objs:
        return
    text = "".join(
        json.dumps(
            o.model_dump(mode="json") if isinstance(o, BaseModel) else o,
            sort_keys=False,
            separators=(",", ":"),
            allow_nan=False,
        )
        + "\n"
        for o in objs
    )
    append_lines(path, text.encode())


def append_lines(path: Path, data_b: bytes) -> None:
    """Append `data_b` (complete JSON lines, each ending in a newline) with one write and one fsync,
    all or none: a short write or an error cuts the file back and raises OSError naming `path`; a half
    line a killed writer left is never glued onto."""
    if not data_b:
        return
    make_folders(path.parent)  # results/<digest12>: never through a link
    fd = open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data_b = b"\n" + data_b
        written = 0
        try:
            view = memoryview(data_b)
            while written < len(data_b):  # a large batch may take more than one write
                n = os.write(fd, view[written:])
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += n
            os.fsync(fd)
        except OSError as err:
            if os.fstat(fd).st_size == size + written:
                os.ftruncate(fd, size)
            raise OSError(err.errno, err.strerror, str(path)) from None
    finally:
        os.close(fd)


def read_jsonl(path: Path, warnings: list[str] | None = None) -> Iterator[dict]:
    """Yield each JSON object line of `path`, bytes-safe: a line that is not UTF-8 or not a JSON
    object is skipped and noted as `path:line: why` in `warnings`; the rest of the file is read."""
    for _n, obj in read_jsonl_numbered(path, warnings):
        yield obj


def read_jsonl_numbered(path: Path, warnings: list[str] | None = None) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each JSON object line of `path` (see read_jsonl)."""
    for n, _off, _len, obj, problem in scan_jsonl(path):
        if problem is not None:
            if warnings is not None:
                warnings.append(f"{path_text(path)}:{n}: {problem}")
        elif obj is not None:
            yield n, obj


def scan_jsonl(path: Path) -> Iterator[tuple[int, int, int, dict | None, str | None]]:
    """Every line of `path`: (line number, byte offset, length in bytes with the newline, object or
    None, problem or None). A blank line gives (n, off, len, None, None); a line that is not UTF-8,
    not JSON or not a JSON object gives a problem text (`skipped a corrupt line (not JSON)`, ...) and
    no object. The one line reader of results: read_jsonl and the query index (toolkit.results.index,
    through scan_jsonl_lines and _parse_line) both use it. A line longer than jsonsafe.MAX_LINE_BYTES
    is refused (`skipped a line: longer than 8388608 bytes`) without being held in memory whole."""
    for n, off, length, raw in scan_jsonl_lines(path):
        yield (n, off, length, *_parse_line(raw))


def scan_jsonl_lines(
    path: Path, start: int = 0, first_line: int = 1, end: int | None = None
) -> Iterator[tuple[int, int, int, bytes]]:
    """scan_jsonl's lines unparsed: (line number, byte offset, length in bytes with the newline, the
    line's bytes with its newline; of a line longer than jsonsafe.MAX_LINE_BYTES only its first
    MAX_LINE_BYTES + 1 bytes, which _parse_line refuses: jsonsafe.lines)."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as fh:
        fh.seek(start)
        off, n = start, first_line - 1
        for length, raw in jsonsafe.lines(fh, end):
            n += 1
            yield n, off, length, raw
            off += length


def _parse_line(raw: bytes) -> tuple[dict | None, str | None]:
    """(object, None), (None, None) for a blank line, or (None, why it is skipped): the one safe parse
    (toolkit.core.jsonsafe: not UTF-8, not JSON, nested too deep, a 5000-digit number, too long) and
    an object that names a key twice (JSON keeps the last value: jsonsafe.parse_line_keys)."""
    obj, why, twice = jsonsafe.parse_line_keys(raw)
    if why is None:
        return (obj, None) if twice is None else (None, f"skipped a record: {twice}")
    if why.startswith("not UTF-8"):
        return None, f"skipped a line that is {why}"
    if why.startswith("not JSON"):
        return None, "skipped a corrupt line (not JSON)"
    if why == "not a JSON object":
        return None, "skipped a line that is not a JSON object"
    return None, f"skipped a line: {why}"


def schema_problem(obj: dict) -> str | None:
    """Why a record's schema_version is not one this release reads (None when it is)."""
    v = obj.get("schema_version", RECORD_SCHEMA_VERSION)
    if v in KNOWN_SCHEMA_VERSIONS:
        return None
    return (
        f"skipped a record of schema_version {v!r} (this toolkit reads "
        f"{', '.join(map(str, KNOWN_SCHEMA_VERSIONS))}); upgrade toolkit to read it"
    )


def check_schema(path: Path, n: int, obj: dict, warnings: list[str]) -> bool:
    """True when the record's schema_version is one this release reads; else a warning naming
    the file and line, and False (the record is skipped, never guessed at)."""
    problem = schema_problem(obj)
    if problem is not None:
        warnings.append(f"{path_text(path)}:{n}: {problem}")
    return problem is None


def bench_record(obj: dict) -> tuple[BenchRecord | None, str | None]:
    """(the BenchRecord of one parsed line, None) or (None, why it is refused): unknown schema_version,
    or not a valid record (the first pydantic error: field path and message, e.g. `avg_ts is nan`)."""
    problem = schema_problem(obj)
    if problem is not None:
        return None, problem
    try:
        rec = BenchRecord.model_validate(obj)
    except ValidationError as err:
        first = err.errors()[0] if err.errors() else {"msg": str(err), "loc": ()}
        where = ".".join(str(x) for x in first.get("loc", ()))
        return None, path_text(f"skipped a record: {where + ': ' if where else ''}{first['msg']}")
    from toolkit.results.record_check import contradiction  # only where a line is validated whole

    why = contradiction(rec)  # may quote the record's own text: escaped as a path is, one line
    return (
        (rec, None) if why is None else (None, path_text(f"skipped a record that contradicts itself: {why}"))
    )


def write_json_atomic(path: Path, data: Any) -> None:
    """Write a JSON file via temp file + os.replace (never a half-written file). The temp file is
    opened without following a link (open_regular: a link planted under its name is BadInput)."""
    make_folders(path.parent)  # results/<digest12>: never through a link
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    with os.fdopen(open_regular(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w") as fh:
        fh.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


_SEQ_IN_LINE = re.compile(rb'"seq":(\d{1,19})[,}]')


class ResultStore:
    """results/ on disk. All readers and writers of records go through this class."""

    def __init__(self, root: Path, *, read_only: bool = False):
        self.root = Path(root)
        self.read_only = read_only  # a folder only read (compare --against): its index kept outside it
        self.warnings: list[str] = []
        self.refused = 0  # records of the last results() call that could not be used

    @property
    def builds_file(self) -> Path:
        return self.root / "builds.jsonl"

    def digest_dir(self, digest: str) -> Path:
        return self.root / short_digest(digest)

    def add_build(self, rec: BuildRecord) -> None:
        append_jsonl(self.builds_file, rec)

    def builds(self) -> list[BuildRecord]:
        out: list[BuildRecord] = []
        for n, o in read_jsonl_numbered(self.builds_file, self.warnings):
            if not check_schema(self.builds_file, n, o, self.warnings):
                continue
            try:
                out.append(BuildRecord.model_validate(o))
            except ValidationError:  # a hand-edited or foreign line: skip it, say so
                self.warnings.append(f"{path_text(self.builds_file)}:{n}: skipped: not a valid build record")
        return out

    def latest_build(self, image: str) -> BuildRecord | None:
        """The newest build record of `image`, None when there is none."""
        found = [b for b in self.builds() if b.image == image]
        return found[-1] if found else None

    def add_result(self, rec: BenchRecord) -> Path:
        """Append one record (whole or absent, fsynced) with the store's next sequence number."""
        path = self.digest_dir(rec.image.digest) / "bench.jsonl"
        with self._sequence(1) as first:
            append_jsonl(path, rec.model_copy(update={"seq": first}))
        return path

    BATCH = 1000
    """add_results writes at most this many records per write + fsync."""

    def add_results(self, recs: Sequence[BenchRecord]) -> list[Path]:
        """Append records in their order, numbered in sequence, with one write and one fsync per
        bench.jsonl per batch of BATCH (an import of 10,000 rows: 10 fsyncs, not 10,000). Returns each
        record's file. A failed write leaves that file as it was (the batch whole or absent) and raises
        OSError naming it; earlier batches stay."""
        paths = [self.digest_dir(r.image.digest) / "bench.jsonl" for r in recs]
        for start in range(0, len(recs), self.BATCH):
            chunk = list(range(start, min(start + self.BATCH, len(recs))))
            with self._sequence(len(chunk)) as first:
                by_file: dict[Path, list[BenchRecord]] = {}
                for k, i in enumerate(chunk):
                    by_file.setdefault(paths[i], []).append(recs[i].model_copy(update={"seq": first + k}))
                for path, items in by_file.items():
                    append_jsonl_many(path, items)
        return paths

    def add_record_lines(self, items: Sequence[tuple[str, bytes, bytes]]) -> list[Path]:
        """add_results for records already validated and written out as JSON: (image digest, the record's
        compact JSON up to its `"seq":` value, the rest of it) triples; the store puts its next sequence
        number between the two. One sequence reservation, one write and one fsync per bench.jsonl per batch of
        BATCH. Returns each record's file; a failed write as add_results."""
        if len(items) > self.BATCH:
            return [
                p
                for i in range(0, len(items), self.BATCH)
                for p in self.add_record_lines(items[i : i + self.BATCH])
            ]
        if not items:
            return []
        files = {digest: self.digest_dir(digest) / "bench.jsonl" for digest, _, _ in items}
        paths = [files[digest] for digest, _, _ in items]
        with self._sequence(len(items)) as first:
            by_file: dict[Path, list[bytes]] = {}
            for k, ((_, head, tail), path) in enumerate(zip(items, paths, strict=True)):
                by_file.setdefault(path, []).append(b"%s%d%s\n" % (head, first + k, tail))
            for path, lines in by_file.items():
                append_lines(path, b"".join(lines))
        return paths

    @contextlib.contextmanager
    def _sequence(self, n: int) -> Iterator[int]:
        """Reserve `n` sequence numbers: yields the first, holding the store's lock (an flock of
        results/.seq) while the caller appends, so numbers follow the order records reach the files.
        The counter is written (and fsynced) before the records: a crash leaves a gap, never a number
        given twice. A missing or unreadable counter is rebuilt from the largest seq in the files."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = open_regular(self.root / SEQ_FILE, os.O_RDWR | os.O_CREAT)  # a link there: BadInput
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 64, 0).strip()
            last = counter_value(raw)
            last = self._largest_seq() if last is None else last
            data = f"{reserve(last, n, self.root / SEQ_FILE)}\n".encode()
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
            yield last + 1
        except OSError as err:
            raise OSError(err.errno, err.strerror, err.filename or str(self.root / SEQ_FILE)) from None
        finally:
            os.close(fd)  # releases the flock

    def _largest_seq(self) -> int:
        """The largest `"seq":N` in this store's own bench.jsonl files (0 when none): the counter's
        value when results/.seq is missing (a copied folder) or damaged. Any match counts: a number
        too large leaves a gap, which orders the same."""
        best = 0
        for f in sorted(self.root.glob("*/bench.jsonl")):
            with contextlib.suppress(OSError), os.fdopen(open_regular(f), "rb") as fh:
                tail = b""
                while chunk := fh.read(1 << 20):
                    buf = tail + chunk
                    best = max([best, *(x for m in _SEQ_IN_LINE.findall(buf) if (x := int(m)) <= MAX_SEQ)])
                    tail = buf[-32:]
        return best

    def bench_files(self) -> list[Path]:
        """This store's bench.jsonl files, in reading order (toolkit.results.bench_files)."""
        return bench_files(self.root)

    def results(self) -> list[BenchRecord]:
        """Every readable BenchRecord under results/*/bench.jsonl. Lines that are not valid records
        (corrupt bytes, unknown schema_version, non-finite tok/s) are skipped, each noted in
        `warnings` with file and line and counted in `refused`. Records whose `created` disagrees with
        the store's order carry `clock_skew` (mark_clock_skew). A seq above its store's counter reads as
        None, said once per store (sequence.trusted)."""
        out: list[BenchRecord] = []
        stores: list[str] = []
        self.refused = 0
        for f in self.bench_files():
            part = store_of(self.root, f)
            for n, _off, _len, obj, problem in scan_jsonl(f):
                if problem is None and obj is not None:
                    rec, problem = bench_record(obj)
                    if rec is not None:
                        out.append(rec)
                        stores.append(part)
                if problem is not None:
                    self.warnings.append(f"{path_text(f)}:{n}: {problem}")
                    self.refused += 1
        tops = {part: counter(self.root, part) for part in set(stores)}  # read after the records
        above: dict[str, list[int]] = {}
        for part, rec in zip(stores, out, strict=True):
            if rec.seq is not None and trusted(rec.seq, tops[part]) is None:
                above.setdefault(part, []).append(rec.seq)
                rec.seq = None
        self.warnings += [
            untrusted_note(self.root, p, len(v), tops[p] or 0, max(v)) for p, v in above.items()
        ]
        mark_clock_skew(zip(stores, out, strict=True))
        return out

    def log_path(self, digest: str, name: str) -> Path:
        p = self.digest_dir(digest) / "logs" / name
        make_folders(p.parent, root=self.root)  # results/<digest12>/logs: never through a link
        return p


@dataclass
class Saver:
    """A run's writer of the store: each record appended whole or absent, never cut by a signal. `saved`
    counts the records written by this run (`failed` of them failed rows); `files` their bench.jsonl files.
    `concurrent` (a callable giving the other live runs) flags records written meanwhile: those alive now and
    those alive at the previous save (`seen`: a run that ended while a test was measured still flags it)."""

    store: ResultStore
    concurrent: Callable[[], list[str]] = lambda: []
    saved: int = 0
    failed: int = 0
    files: set[Path] = field(default_factory=set)
    seen: list[str] = field(default_factory=list)

    def save(self, rec: BenchRecord, *, reraise: bool = True) -> None:
        """Write one record. Raises FileSystemError (exit 8) naming bench.jsonl when it cannot."""
        now = self.concurrent()
        others = now + [x for x in self.seen if x not in now]
        self.seen = now
        if others:
            rec = rec.model_copy(update={"concurrent": {"other_runs": others}})
        path = self.store.digest_dir(rec.image.digest) / "bench.jsonl"
        with no_interrupt(reraise=reraise):
            try:
                self.store.add_result(rec)
            except OSError as err:
                if err.filename is None:
                    err.filename = str(path)
                mapped = FileSystemError.from_oserror(err, "writing a result")
                # mid-run even a wrong path (a file put where results/<digest>/ was) is a result not written:
                # exit 8, and the run's message adds what was saved
                raise (
                    mapped if isinstance(mapped, FileSystemError) else FileSystemError(str(mapped))
                ) from None
            self.saved += 1
            self.failed += rec.status != "ok"
            self.files.add(path)

    def summary(self) -> str:
        """What this run wrote, for the last message: counted, never assumed; failed rows said apart."""
        if not self.saved:
            return "no result of this run was saved (no test had completed)"
        split = f" ({self.saved - self.failed} measured, {self.failed} failed row(s))" if self.failed else ""
        return f"{self.saved} record(s) of this run are saved in {', '.join(sorted(map(str, self.files)))}{split}"
