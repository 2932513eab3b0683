"""llama-bench output made elsewhere --import--> BenchRecords in results/, beside container runs.

A bare-metal run or someone's published run (`-o jsonl`, `-o json` — also the truncated array a
crashed run leaves —, `-o csv`, `-o md` — bare or pasted in a code fence after log lines —, or
`-o sql`, any llama.cpp vintage; bare `nan`/`-nan`/`inf` tokens included) is read by
llamabench_readers and every row goes through its one validity pass (`check_row`, shared with
`toolkit bench`): a row that is not a measurement is refused by itself, named `file:line: why`.
Rows are filed under an image reference per system found in the files (llama.cpp
build_commit/build_number, backends, gpu_info): name = the user's label (`label.<what differs>` when
the files hold several), digest = `import:<sha256 of the files' bytes [+ system]>` (or a given one).
Rows of one import that measure the same test are kept as repetitions of one cell (never one
superseding the other), flagged `runs-disagree` where they differ beyond noise. The raw rows are kept
(non-finite floats as null). Importing the same files again adds nothing.
"""

from __future__ import annotations

import array
import functools
import hashlib
import io
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, BinaryIO

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from toolkit.core import backends, jsonsafe
from toolkit.core.errors import BadInput
from toolkit.results import llamabench_format as llamabench
from toolkit.results import llamabench_readers as readers
from toolkit.results import vllm_import
from toolkit.results.identity import (
    MEASUREMENT_FIELDS,
    TestKey,
    combine_runs,
    measured_at,
    norm_field,
    test_key,
)
from toolkit.results.llamabench_check import check_row
from toolkit.results.records import (
    RECORD_SCHEMA_VERSION,
    BenchRecord,
    ImageRef,
    ModelRef,
    ResultStore,
    short_digest,
)

_DIGEST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*(:[A-Za-z0-9_.+-]+)*")
_SHA_RE = re.compile(r"[0-9a-f]{64}")


@dataclass
class ImportedSet:
    """One system of an import (one llama.cpp build on one backend/GPU): its own image name and digest."""

    name: str
    digest: str
    system: dict[str, Any]
    records: int = 0
    already: bool = False  # these rows were imported under this digest before
    path: Path | None = None


@dataclass
class ImportResult:
    """What an import did: `sets` one per build/backend/GPU found in the files; `refused` rows that are
    not measurements (`file:line: why`); `repaired` rows whose nan stddev was recomputed; `skipped`
    lines that look like records but do not parse; `repeated` rows that measure a test another row of
    the same set also measured (kept as repetitions of one cell)."""

    label: str
    digest: str
    files: list[str]
    records: int = 0
    already: bool = False  # every set was imported before: nothing added
    path: Path | None = None
    per_file: dict[str, int] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)  # file -> jsonl | json | csv | md | sql
    sets: list[ImportedSet] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a format could not say (no samples, no build)
    failed: list[str] = field(default_factory=list)  # vLLM results stored as failed records, and why
    duplicates: list[str] = field(default_factory=list)  # rows read or imported before, left out: counted


MAX_IMPORT_BYTES = 64 << 20
"""A file read whole (md and sql; see STREAM_ABOVE) has at most this many bytes, so memory stays bounded
(a file is parsed into rows of a few hundred bytes each). md: a table's rows take their build commit
from the `build:` line after the table, so a table is held whole anyway; both are formats for people
and databases (a 64 MiB md table is some 300,000 rows)."""

FORMATS_HINT = (
    "expected llama-bench output: -o jsonl, -o json, -o csv, -o md (a markdown table with test and t/s "
    "columns) or -o sql"
)


def read_rows(
    path: Path, skipped: list[str] | None = None, refused: list[str] | None = None
) -> tuple[bytes, list[readers.SourceRow], str]:
    """The file's bytes, its llama-bench rows that are measurements, and its format; BadInput naming
    the file and what was wrong when none is. Lines that look like records but do not parse are noted
    in `skipped` as `file:line: why`; rows the validity pass refuses in `refused` the same way."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_IMPORT_BYTES + 1)
    except OSError as err:
        raise BadInput(f"{path}: cannot read it ({err.strerror or err})") from err
    if len(data) > MAX_IMPORT_BYTES:
        raise BadInput(
            f"{path}: larger than {MAX_IMPORT_BYTES >> 20} MiB and not JSONL, JSON or CSV from its first MiB on "
            "(-o jsonl, json and csv are read as a stream at any size; -o md and sql are read whole): split it "
            "and import the parts, or write -o jsonl"
        )
    text, bad = _decode_lines(data)
    notes: list[str] = [f"line {n}: not UTF-8 (byte {b}): the line was left out" for n, b in bad]
    fmt, parsed = readers.read_source(text, notes)
    rows, no = [], []
    for r in parsed:
        why = check_row(r.fields, r.problem)
        if why:
            no.append((r.line, why))
        else:
            rows.append(r)
    if skipped is not None:
        skipped += [f"{path}:{n.removeprefix('line ')}" for n in notes]
    if refused is not None:
        refused += [f"{path}:{n}: {why}; row left out" for n, why in no]
    if rows:
        return data, rows, fmt or ""
    if not parsed and bad:
        n, b = bad[0]
        raise BadInput(
            f"{path}: not a text file (line {n}, byte {b} is not UTF-8) and no llama-bench result rows in "
            f"it; {FORMATS_HINT}"
        )
    if no:
        raise none_usable(str(path), [f"line {n}: {why}" for n, why in no])
    lines = text.splitlines()
    table = next((i for i, ln in enumerate(lines, 1) if ln.strip().startswith("|")), None)
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    hint = (
        f"a markdown table (-o md) at line {table} has no result rows: it needs a header with test and t/s "
        "columns, its separator line, then rows"
        if table is not None
        else FORMATS_HINT
    )
    why = f"; {notes[0]}" + (f" (and {len(notes) - 1} more)" if len(notes) > 1 else "") if notes else ""
    raise BadInput(
        f"{path}: no llama-bench result rows found ({hint}){why}; the file starts with {first[:80]!r}"
        if first
        else f"{path}: the file is empty; {FORMATS_HINT}"
    )


def _decode_lines(data: bytes) -> tuple[str, list[tuple[int, int]]]:
    """UTF-8 text of a file, bytes-safe: a leading BOM is dropped, a line that is not UTF-8 is left out
    (returned as (line number, offending byte offset)), the other lines are kept."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return _decode_text(data)


def _decode_text(data: bytes) -> tuple[str, list[tuple[int, int]]]:
    """_decode_lines of text that does not start a file (no BOM is dropped)."""
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError:
        pass
    out, bad = [], []
    for n, line in enumerate(data.split(b"\n"), 1):
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError as err:
            bad.append((n, err.start))
            out.append("")
    return "\n".join(out), bad


def _avg_ts(row: dict[str, Any], norm: dict[str, Any]) -> float | None:
    """avg_ts, or from avg_ns for rows that lack it: tokens ÷ mean seconds."""
    if norm["avg_ts"] is not None:
        return norm["avg_ts"]
    ns = llamabench._float(row.get("avg_ns"))
    tokens = norm["n_prompt"] + norm["n_gen"]
    return tokens * 1e9 / ns if ns and tokens else None


def backend_of(rows: list[dict[str, Any]]) -> str:
    """Image backend from the rows' `backends` (ROCm/HIP -> rocm, Vulkan -> vulkan, CUDA -> cuda, else cpu)."""
    names = ",".join(llamabench.backends_of(r) for r in rows)
    return backends.from_llama_names(names)


def shown(text: str) -> str:
    """A name from the command line or a file system for a message or a record: bytes that are not
    UTF-8 (kept by Python as lone surrogates) shown as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if not text.isascii() else text


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def none_usable(where: str, refused: list[str]) -> BadInput:
    """The error for input whose every row was refused: `where` (the file or files), how many, and
    the first three reasons (`refused`: one text each)."""
    return BadInput(
        f"{where}: no llama-bench result rows found that are measurements: {len(refused)} refused ("
        + "; ".join(refused[:3])
        + (f"; and {len(refused) - 3} more" if len(refused) > 3 else "")
        + ")"
    )


def check_options(
    label: str, model_sha256: str | None, digest: str | None, files: list[Path] | None = None
) -> None:
    """BadInput for an option or a file name a record cannot hold: a label or file name that is not
    UTF-8 is refused (a record is UTF-8 JSON: it could not name it faithfully; rename the file)."""
    if not _utf8(label):
        raise BadInput(f"--label {shown(label)!r}: not UTF-8 text; give a short name, e.g. bare-metal-hip")
    for f in files or []:
        try:
            mode = os.stat(f).st_mode
        except (OSError, ValueError):
            mode = None  # read_rows names the file and the error
        if mode is not None and not stat.S_ISREG(mode):
            raise BadInput(
                f"{shown(str(f))}: not a regular file (a pipe, a device or a folder): an import reads a "
                "file more than once (its format, then its rows) and checks it did not change; save it "
                "to a file first, e.g. `... > run.jsonl`, and import that"
            )
        if not _utf8(str(f)):
            raise BadInput(
                f"{shown(str(f))}: the file name is not UTF-8 (shown with U+FFFD for the bytes that are "
                "not): a record could not name its source; rename the file, e.g. `mv -- <it> run.jsonl`"
            )
    if (
        not label.strip()
        or any(c.isspace() or not c.isprintable() for c in label)
        or any(c in label for c in "/|`")
    ):  # | and ` would break the tables a label heads; control characters would rewrite a terminal
        raise BadInput(
            f"--label {label!r}: give a short name without spaces, control characters, '/', '|' or '`', "
            "e.g. bare-metal-hip"
        )
    if model_sha256 is not None and not _SHA_RE.fullmatch(model_sha256):
        raise BadInput(
            f"--model-sha256 {model_sha256!r}: expected 64 lower-case hex digits (`sha256sum model.gguf`)"
        )
    if digest is not None and digest.startswith("sha256:") and not _SHA_RE.fullmatch(digest[7:]):
        raise BadInput(
            f"--digest {digest!r}: a sha256: digest is 64 lower-case hex digits (`docker image inspect "
            "--format '{{.Id}}' IMAGE`); or name the set another way, e.g. import:my-run"
        )
    if digest is not None and (not _DIGEST_RE.fullmatch(digest) or short_digest(digest) in ("", ".", "..")):
        raise BadInput(
            f"--digest {digest!r}: letters, digits and . _ + - separated by ':', e.g. "
            "sha256:<hex> or import:my-run"
        )


SYSTEM_SPLIT = ("build_commit", "build_number", "backends", "gpu_info")


def _system(row: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The fields that tell builds/backends/GPUs apart, hashable whatever the file put there (a dict
    or list in a string field is kept as its JSON text, cut to 200 characters)."""

    def plain(v: Any) -> Any:
        if isinstance(v, (str, int, float, bool)):
            return v
        return json.dumps(v, sort_keys=True, default=str)[:200]

    return tuple((k, plain(row.get(k))) for k in SYSTEM_SPLIT if row.get(k) not in (None, ""))


def _set_names(label: str, systems: list[tuple]) -> list[str]:
    """`label` for one system; else `label.<what differs>` (build commit and number, backend, GPU: every
    field that differs, whole, so two sets never read alike), made unique."""
    if len(systems) == 1:
        return [label]
    varying = [k for k in SYSTEM_SPLIT if len({dict(s).get(k) for s in systems}) > 1]
    names = []
    for s in systems:
        d = dict(s)
        part = "-".join(re.sub(r"[^A-Za-z0-9_.+-]+", "-", str(d.get(k, "none"))).strip("-") for k in varying)
        names.append(f"{label}.{part or 'set'}")
    for i, n in enumerate(names):  # equal after leaving out what is not a name character: number them
        if names.count(n) > 1:
            names[i] = f"{n}.{i + 1}"
    return names


STREAM_ABOVE = 1 << 20
"""A JSONL, `-o json` or CSV file larger than this is read as a stream (once, line by line or in blocks
of whole lines: hashed, checked and turned into records as it is read), so its size is not bounded by
MAX_IMPORT_BYTES and memory holds one row (a json element), a block and a batch of records. Which
reader, and from which line, is decided on the file's first STREAM_HEAD bytes exactly as a whole read
decides it (llamabench_readers.find_source). Smaller files, md and sql are read whole."""
STREAM_HEAD = 1 << 20
STREAMED = frozenset({"jsonl", "json", "csv"})
BLOCK = 1 << 20
"""Bytes a streamed json or csv file is read in (then completed to the end of its line)."""

_PASS1_IMAGE = ImageRef(name="import", ref="import:pass1", digest="import:pass1", backend="cpu")


def _key64(rec: BenchRecord, key: TestKey | None = None) -> int:
    """A 64-bit digest of the record's TestKey less its image (the sets' digests are not known while
    the files are read; the system fields that split sets are part of the key, so the grouping is the
    same): Python's hash of it, stable within the one process that groups. Equal tests give equal
    digests; two tests that share one by chance are told apart again by the exact grouping in
    _repetitions."""
    key = key or test_key(rec)
    return hash((key.system, key.model, key.model_sha, key.test)) & 0xFFFF_FFFF_FFFF_FFFF


def _measurement(rec: BenchRecord, key: TestKey | None = None) -> int:
    """A 64-bit digest of what makes a row one measurement, whatever the format it came in (jsonl, json,
    csv, sql: a row read twice, or imported before under any digest, is the same): its test (TestKey
    less the image), llama-bench's test_time and avg_ns (csv has no samples) and its tok/s to 2
    decimals; a row with neither test_time nor avg_ns (md) also its stddev to 2 decimals (the `± sd`
    it prints)."""
    key = key or test_key(rec)
    raw = rec.raw
    sd = readers.as_float(raw.get("stddev_ts")) if _untimed(rec) else None  # md: its `± sd` is all it has
    return hash(
        (
            key.system,
            key.model,
            key.test,
            str(raw.get("test_time")),
            readers.as_float(raw.get("avg_ns")),
            round(rec.avg_ts, 2) if rec.avg_ts is not None else None,
            f"{sd:.2f}" if sd is not None else None,
        )
    )


def _untimed(rec: BenchRecord) -> bool:
    """A row without llama-bench's test_time and avg_ns (an `-o md` table's): _measurement cannot tell
    it from another measurement of its test, so it is matched by what it shows (_shown)."""
    raw = rec.raw
    return raw.get("test_time") in (None, "") and raw.get("avg_ns") is None


_MD_SETTINGS = (readers.INT_FIELDS | readers.BOOL_FIELDS | readers.STRING_FIELDS) - {
    "build_commit",
    "build_number",
    "cpu_info",
    "gpu_info",
    "backends",
    "model_filename",
    "model_type",
    "model_size",
    "model_n_params",
    "n_prompt",
    "n_gen",
    "n_depth",
    "avg_ns",
    "stddev_ns",
    "test_time",
}
"""The settings an md table may print as columns (threads, ngl, fa, n_ubatch, type_k, n_cpu_moe, ...)."""

_Form = tuple[frozenset[str], bool]
"""How an md row is matched: the setting columns its table printed, and whether it has a build line."""


def _form(raw: dict[str, Any]) -> _Form:
    """An md row's form (its fields, or its record's raw): the settings its table shows as columns,
    and whether its `build:` line gave a commit."""
    return frozenset(k for k in raw if k in _MD_SETTINGS), bool(raw.get("build_commit"))


def _shown(rec: BenchRecord, key: TestKey, form: _Form) -> int:
    """A 64-bit digest of what an `-o md` table shows of a measurement and every format also holds:
    the model type, the backend (its family: ROCm, Vulkan, CUDA, CPU), the test (n_prompt, n_gen,
    n_depth), `t/s` as llama-bench prints it ("%.2f ± %.2f", markdown_printer), the settings the table
    printed as columns (`form`[0]: threads, ngl, fa, n_ubatch, ...; identity.norm_field reads each
    alike in every format) and, with `form`[1], the build commit (md has it only from its `build:`
    line; 7 characters, as short commits are printed). An md row whose digest equals a row of another
    format read or imported before is that row printed as a table (two measurements of one build,
    backend and setting that agree to 0.01 tok/s in mean and stddev are taken as one: such a row is
    left out, and said)."""
    raw = rec.raw
    sd = readers.as_float(raw.get("stddev_ts"))
    settings, build = form
    return hash(
        (
            str(raw.get("model_type") or ""),
            backends.from_llama_names(llamabench.backends_of(raw)),
            tuple((k, v) for k, v in key.test if k in ("n_prompt", "n_gen", "n_depth")),
            f"{rec.avg_ts:.2f}" if rec.avg_ts is not None else None,
            f"{sd:.2f}" if sd is not None else None,
            tuple((k, norm_field(k, raw.get(k))) for k in sorted(settings)),
            str(raw.get("build_commit") or "")[:7].lower() if build else None,
        )
    )


_Where = tuple[str, str, str]  # (run id, image name, image digest) of a stored record


@dataclass
class _Stored:
    """What the results folder holds of rows imported before, to leave them out: `exact`
    (_measurement of every imported record), `md` (per form, _shown of those without a test_time: the
    md tables imported before) and `timed` (_shown of the others, in each form of this import's md
    rows), read in one pass over the folder."""

    exact: dict[int, _Where]
    md: dict[_Form, dict[int, _Where]]
    timed: dict[_Form, dict[int, _Where]]

    @classmethod
    def read(cls, store: ResultStore, md_forms: set[_Form]) -> _Stored:
        """The folder's imported records, digested; `md_forms`: the forms of the md rows about to be
        imported (their matches among the stored rows of other formats)."""
        out = cls({}, {}, {f: {} for f in md_forms})
        if not store.root.is_dir():
            return out
        for r in store.results():
            if r.status != "ok" or not (r.model_extra or {}).get("imported"):
                continue
            where, key = (r.run_id, r.image.name, r.image.digest), test_key(r)
            out.exact[_measurement(r, key)] = where
            if _untimed(r):
                f = _form(r.raw)
                out.md.setdefault(f, {})[_shown(r, key, f)] = where
            else:
                for f, digests in out.timed.items():
                    digests[_shown(r, key, f)] = where
        return out

    def match(self, rec: BenchRecord, key: TestKey, fp: int, *, md_row: bool) -> tuple[_Where, str] | None:
        """The stored record `rec` (an md table's row when `md_row`) measures again, and how it was
        matched ("" exact, "md" an md row of it, "md-before" it was imported before as an md table),
        or None."""
        if fp in self.exact:
            return self.exact[fp], ""
        if md_row:
            f = _form(rec.raw)
            found = self.timed.get(f, {}).get(_shown(rec, key, f))
            return (found, "md") if found else None
        for f, digests in self.md.items():
            found = digests.get(_shown(rec, key, f))
            if found:
                return found, "md-before"
        return None


def _try_record(
    row: readers.SourceRow,
    src: _Source,
    refused: list[str] | None,
    **kw: Any,
) -> tuple[BenchRecord, bytes] | None:
    """The row's record as pass 1 makes it (its file's hash left empty, as the import's: filled in
    when it is written) and its JSON, or None with `file:line: why` in `refused` when the record
    refuses it or cannot be written (a string holding a lone surrogate, `"\\ud800"`, is no text: the
    row is refused, never stored altered)."""
    try:
        rec = _record(row, source=src.path, file_sha="", **kw)
        return rec, rec.model_dump_json().encode()
    except (ValidationError, ValueError, TypeError, OverflowError, PydanticSerializationError) as err:
        if refused is not None:
            refused.append(f"{src.path}:{row.line}: {_reason(err)[:200]}; row left out")
        return None


def _reason(err: Exception) -> str:
    """What a record refused: the field and pydantic's message; a string that is no text said so."""
    if isinstance(err, ValidationError) and err.errors():
        first = err.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        return (f"{where}: " if where else "") + first["msg"].removeprefix("Value error, ")
    if "surrogates not allowed" in str(err):
        return "a string holds a lone surrogate (such as \\ud800): no text a record can hold"
    return str(err).removeprefix("Value error, ")


class _Source:
    """One file's llama-bench rows that pass the validity pass, read once in file order: from memory (a
    file read whole by `read_rows`: md, sql, and any file of at most STREAM_ABOVE bytes; at most
    MAX_IMPORT_BYTES) or as a stream (jsonl, json and csv over STREAM_ABOVE, from the line `start` where
    their format begins). After `rows()`: `sha` (of the file's bytes), `count` (rows that passed),
    `notes` (what the format could not say); `finish()` then says what was refused."""

    def __init__(
        self,
        path: Path,
        fmt: str,
        *,
        data: bytes | None = None,
        rows: list[readers.SourceRow] | None = None,
        start: int = 0,
        skipped: list[str] | None = None,
        refused: list[str] | None = None,
    ) -> None:
        self.path, self.fmt, self._data, self._rows, self._start = path, fmt, data, rows, start
        self._skipped, self._refused = skipped, refused
        self.sha = hashlib.sha256(data).hexdigest() if data is not None else ""
        self.count = len(rows) if rows is not None else 0
        self.notes: set[str] = set()
        self._no: list[tuple[int, str]] = []

    def rows(self, content: Any) -> Iterator[readers.SourceRow]:
        """The rows in file order (once); `content` (a hash) is fed the file's bytes."""
        if self._rows is not None:
            content.update(self._data or b"")
            for r in self._rows:
                self.notes.update(r.notes)
                yield r
            return
        h = _Both(hashlib.sha256(), content)
        found = self._jsonl(h) if self.fmt == "jsonl" else self._text_rows(h)
        count = 0
        for r in found:
            self.notes.update(r.notes)
            count += 1
            yield r
        self.sha, self.count = h.first.hexdigest(), count

    def _note(self, text: str) -> None:
        if self._skipped is not None:
            self._skipped.append(f"{self.path}:{text}")

    def _jsonl(self, h: _Both) -> Iterator[readers.SourceRow]:
        with self.path.open("rb") as fh:
            for n, raw, whole in _lines(fh):
                h.update(raw)
                if not whole:
                    if raw.lstrip()[:1] == b"{":
                        self._note(
                            f"{n}: not a complete JSON record (longer than {jsonsafe.MAX_LINE_BYTES} bytes)"
                        )
                    continue
                if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError as err:
                    self._note(f"{n}: not UTF-8 (byte {err.start}): the line was left out")
                    continue
                if not line.startswith("{"):
                    if other := readers.not_a_record(line):
                        self._note(f"{n}: {other}")
                    continue
                obj, why = readers.parse_record_line(line)
                if why is not None:
                    self._note(f"{n}: not a complete JSON record ({why})")
                    continue
                if obj is None:
                    continue
                no = check_row(obj)
                if no:
                    self._no.append((n, no))
                    continue
                yield readers.SourceRow(n, obj, "jsonl")

    def _text_rows(self, h: _Both) -> Iterator[readers.SourceRow]:
        """json / csv rows from the text `_blocks` gives, through the one validity pass; the reader's
        own notes (a json array that ends in a half record) said after its rows, as read_rows says them."""
        notes: list[str] = []
        blocks = self._blocks(h)
        found = (
            readers.iter_json_array(blocks, notes, self._start + 1)
            if self.fmt == "json"
            else readers.iter_csv((ln for b in blocks for ln in io.StringIO(b)), notes, self._start + 1)
        )
        for r in found:
            why = check_row(r.fields, r.problem)
            if why:
                self._no.append((r.line, why))
            else:
                yield r
        for _rest in blocks:  # what the reader left unread (after a json array's end) is hashed too
            pass
        for n in notes:
            self._note(n.removeprefix("line "))

    def _blocks(self, h: _Both) -> Iterator[str]:
        """The file's text from line `start` on, in blocks of whole lines, as read_rows decodes it: a
        leading BOM dropped, a line that is not UTF-8 left out (noted; numbered as read_rows numbers
        it), every line boundary written as "\\n" (str.splitlines), a line longer than the line limit
        left out (noted). Every byte of the file goes through `h`."""
        skip, n, first = self._start, 0, True
        with self.path.open("rb") as fh:
            while data := fh.read(BLOCK):
                if not data.endswith(b"\n"):
                    data += fh.readline(jsonsafe.MAX_LINE_BYTES + 1)
                h.update(data)
                last = data.rfind(b"\n") + 1
                if not data.endswith(b"\n") and len(data) - last > jsonsafe.MAX_LINE_BYTES:
                    at = n + data.count(b"\n", 0, last) + 1
                    self._note(f"{at}: a line longer than {jsonsafe.MAX_LINE_BYTES} bytes: left out")
                    data = data[:last] + b"\n"
                    while rest := fh.readline(jsonsafe.MAX_LINE_BYTES + 1):  # the rest of that line
                        h.update(rest)
                        if rest.endswith(b"\n"):
                            break
                if first and data.startswith(b"\xef\xbb\xbf"):
                    data = data[3:]
                first = False
                text, bad = _decode_text(data)
                for k, b in bad:
                    self._note(f"{n + k}: not UTF-8 (byte {b}): the line was left out")
                n += data.count(b"\n")
                text = "\n".join(text.splitlines()) + ("\n" if text.endswith(("\n", "\r")) else "")
                if skip:
                    lines = text.count("\n")
                    if lines <= skip:
                        skip -= lines
                        continue
                    at = 0
                    for _ in range(skip):
                        at = text.index("\n", at) + 1
                    text, skip = text[at:], 0
                yield text

    def finish(self) -> None:
        """After `rows()`: the refused rows said; BadInput naming the file when none is usable."""
        if self._rows is not None:
            return
        if self._refused is not None:
            self._refused += [f"{self.path}:{n}: {why}; row left out" for n, why in self._no]
        if self.count:
            return
        if self._no:
            no = self._no
            raise none_usable(str(self.path), [f"line {n}: {why}" for n, why in no])
        raise BadInput(f"{self.path}: no llama-bench result rows found; {FORMATS_HINT}")


class _Both:
    """Two hashes fed the same bytes: a file's own and the whole import's."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    def update(self, data: bytes) -> None:
        self.first.update(data)
        self.second.update(data)


def _lines(fh: BinaryIO) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, whole) of a binary file, each line at most jsonsafe.MAX_LINE_BYTES: a longer
    one comes in pieces marked not whole (hashed, never parsed), so memory holds one bounded line."""
    n, cont = 0, False
    while True:
        raw = fh.readline(jsonsafe.MAX_LINE_BYTES + 1)
        if not raw:
            return
        if not cont:
            n += 1
        ends = raw.endswith(b"\n")
        long = cont or (not ends and len(raw) > jsonsafe.MAX_LINE_BYTES)
        yield n, raw, not long
        cont = long and not ends


def _stream_plan(path: Path) -> tuple[str, int] | None:
    """(format, 0-based line it starts on) when `path` is read as a stream: its first STREAM_HEAD bytes
    (cut to whole lines) hold the start of a jsonl, json or csv read that yields rows, as a whole read
    would find it (llamabench_readers.find_source); or they hold no rows but a JSONL line starts first
    (jsonl is read line by line to the end). None: read it whole."""
    try:
        with path.open("rb") as fh:
            head = fh.read(STREAM_HEAD + 1)
    except OSError:
        return None  # read_rows names the file and the error
    raw = head.removeprefix(b"\xef\xbb\xbf")
    if len(head) > STREAM_HEAD:
        head = head[: head.rfind(b"\n", 0, STREAM_HEAD) + 1]
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    text, _bad = _decode_lines(head)
    fmt, start, _rows = readers.find_source(text)
    if fmt in STREAMED:
        return fmt, start
    if fmt is None:
        first = next((f for f in map(readers.format_of, text.splitlines()) if f is not None), None)
        if first == "jsonl":
            return "jsonl", 0
        # no whole row in the head (a first record or element over STREAM_HEAD): the first bytes decide
        lead = raw.lstrip(b" \t\r\n")
        if lead[:1] == b"[":
            return "json", raw[: len(raw) - len(lead)].count(b"\n")
        if lead[:1] == b"{":
            return "jsonl", 0
    return None


def _source(path: Path, skipped: list[str], refused: list[str]) -> _Source:
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # read_rows names the file and the error
    plan = _stream_plan(path) if size > STREAM_ABOVE else None
    if plan is not None:
        return _Source(path, plan[0], start=plan[1], skipped=skipped, refused=refused)
    data, rows, fmt = read_rows(path, skipped, refused)
    return _Source(path, fmt, data=data, rows=rows)


def _backend_wrong(backend: str | None, wrong: list[str]) -> None:
    """--backend must not contradict the rows: rows that name another GPU backend than the one given
    (`--backend rocm` on rows that say Vulkan) are bad input, named; rows that name only the CPU
    backend stay (a GPU build that ran on the CPU: the report flags them cpu-fallback)."""
    if backend is None or not wrong:
        return
    raise BadInput(
        f"--backend {backend}: {len(wrong)} row(s) say they ran on another backend: "
        + ", ".join(wrong[:5])
        + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        + "; leave --backend out to take each row's own, or import the files of each backend apart"
    )


def import_files(
    store: ResultStore,
    files: list[Path],
    *,
    label: str,
    backend: str | None = None,
    model_sha256: str | None = None,
    digest: str | None = None,
    now: datetime | None = None,
    input_len: int | None = None,
    output_len: int | None = None,
) -> ImportResult:
    """Parse every file, split the rows by system (llama.cpp build, backend, GPU: each its own image
    name and digest, so one build never hides another), then append the records.

    A file without a usable row, or --backend contradicting the rows, fails the whole import before
    anything is written (BadInput). Rows that are not measurements are refused one by one with
    `file:line: why` (llamabench_check_row); a nan stddev is recomputed from the samples
    (records.BenchRecord); rows of one set that measure the same test become repetitions of one cell.
    """
    check_options(label, model_sha256, digest, [Path(f) for f in files])
    if not files:
        raise BadInput("no file given: name llama-bench output files to import")
    before = _snapshot([Path(f) for f in files])  # checked again once every row is read
    found = [vllm_import.sniff(Path(f)) for f in files]
    if any(found):
        vfiles = [v for v in found if v is not None]
        other = [str(f) for f, v in zip(files, found, strict=True) if v is None]
        if other:
            raise BadInput(
                f"{', '.join(other)}: not `vllm bench` result(s), imported together with {vfiles[0].path} "
                "(one): import vLLM results and llama-bench output apart"
            )
        return _import_vllm(
            store,
            vfiles,
            label=label,
            backend=backend,
            model_sha256=model_sha256,
            digest=digest,
            now=now,
            input_len=input_len,
            output_len=output_len,
        )
    skipped: list[str] = []
    refused: list[str] = []
    sources = [_source(Path(f), skipped, refused) for f in files]
    with _spill(store.root) as spill, _spill(store.root) as aside:
        return _import_rows(
            store,
            sources,
            (spill, aside),
            label=label,
            backend=backend,
            model_sha256=model_sha256,
            digest=digest,
            now=now,
            skipped=skipped,
            refused=refused,
            before=before,
        )


def _snapshot(files: list[Path]) -> list[tuple[int, int] | None]:
    """(size, mtime_ns) of each file before it is read (None: it cannot be stat'ed; its read says why)."""
    out: list[tuple[int, int] | None] = []
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_size, st.st_mtime_ns))
    return out


def _unchanged(files: list[Path], before: list[tuple[int, int] | None]) -> None:
    """BadInput naming a file whose size or mtime changed while the import read it (a run still
    writing it, a file truncated or replaced): refused, not imported with a warning, because its rows
    and its hash (the import's digest) would be of no one state of the file; nothing has been written
    yet when this is checked."""
    for f, was in zip(files, before, strict=True):
        now = _snapshot([f])[0]
        if was is not None and now != was:
            size = f"{was[0]} -> {now[0]} bytes" if now is not None else "gone"
            raise BadInput(
                f"{shown(str(f))}: changed while it was read ({size}): nothing imported; import it once "
                "the program writing it has finished"
            )


def _spill(root: Path) -> IO[bytes]:
    """Where an import keeps its records until it knows their digests: a file in the results folder (the
    same disk the records go to), or in the nearest folder above it that exists (an import that fails
    leaves no results folder behind), or the temp folder where that is read-only. The file has no name
    (O_TMPFILE where the system has it) and goes when it is closed, or when the process dies."""
    near = next((d for d in (root, *root.parents) if d.is_dir()), None)
    try:
        return tempfile.TemporaryFile(dir=near, prefix=".import-", buffering=1 << 20)
    except OSError:
        return tempfile.TemporaryFile(prefix="toolkit-import-", buffering=1 << 20)


def _import_rows(
    store: ResultStore,
    sources: list[_Source],
    spills: tuple[IO[bytes], IO[bytes]],
    *,
    label: str,
    backend: str | None,
    model_sha256: str | None,
    digest: str | None,
    now: datetime | None,
    skipped: list[str],
    refused: list[str],
    before: list[tuple[int, int] | None] | None = None,
) -> ImportResult:
    """The import of llama-bench rows in two passes over its rows, the costly work done once:

    1. every row of every file, in order, through the validity pass and into its record (with a stand-in
       image, run id and hash: none is known before every byte is read), written to `spill` as
       `<set> <file> <record JSON>`; beside it the sets (systems), the hash of the files, and a 64-bit
       digest of each record's test, which says after the last row which records measure a test
       another also measured;
    2. the spilled records read back in order, given their set's image, the run id and the hashes, and
       appended in batches (ResultStore.add_dumped); the records of repeated tests are held until
       every file is read, then marked as repetitions of one cell (_repetitions) and appended.

    Memory holds a row, a batch, 8 bytes per record (the test digests) and the records of repeated tests."""
    spill, aside = spills
    systems_seen: dict[tuple, set[str]] = {}
    system_ids: dict[tuple, int] = {}
    wrong: list[str] = []
    content_h = hashlib.sha256()  # of every file's bytes, in order: names the import
    keys = array.array("Q")  # the test digest of each spilled record, in spill order
    repaired: list[tuple[int, str]] = []  # (set, what was recomputed), said for the sets written
    md_forms = {  # the forms of this import's md rows (md is read whole: its rows are known now)
        _form(r.fields) for src in sources if src.fmt == "md" for r in (src._rows or []) if not r.problem
    }
    stored = _Stored.read(store, md_forms)  # rows imported before: left out, counted
    dup_stored: dict[tuple[_Where, str], int] = {}  # ((run id, name, digest), how matched) -> rows
    fps = array.array("q")  # the measurement digest of each spilled record (rows read twice: after pass 1)
    shown = {f: array.array("q") for f in md_forms}  # per md form, each spilled record's _shown
    untimed: list[int] = []  # spill places of md rows (matched by _shown after pass 1)
    file_of, line_of = array.array("I"), array.array("I")  # of each spilled record (md_forms): file, line
    set_of = array.array("I")  # of each spilled record: its system's place in system_ids
    for fi, src in enumerate(sources):
        for r in src.rows(content_h):
            made = _try_record(
                r,
                src,
                refused,
                image=_PASS1_IMAGE,
                run_id="",
                created="",
                model_sha256=model_sha256 or "",
                content="",
            )
            if made is None:
                continue
            rec, body = made
            key = test_key(rec)
            fp = _measurement(rec, key)
            no_time = r.fmt == "md" and _untimed(rec)  # an md table's row: matched by what it prints
            was = stored.match(rec, key, fp, md_row=no_time)
            if was:
                dup_stored[was] = dup_stored.get(was, 0) + 1
                continue
            sy = _system(r.fields)
            said_names = llamabench.backends_of(r.fields)
            systems_seen.setdefault(sy, set()).add(said_names)
            si = system_ids.setdefault(sy, len(system_ids))
            said = backends.from_llama_names(said_names)
            if backend is not None and said != "cpu" and said != backend:
                wrong.append(f"{src.path}:{r.line} (backends {said_names!r})")
            keys.append(_key64(rec, key))
            set_of.append(si)
            if no_time:
                untimed.append(len(fps))
            fps.append(fp)
            if md_forms:  # what md rows are matched on (not kept for an import without md tables)
                mine = _form(rec.raw) if no_time else None
                for f, digests in shown.items():  # an md row: only in its own form
                    digests.append(_shown(rec, key, f) if mine is None or f == mine else 0)
                file_of.append(fi)
                line_of.append(r.line)
            if "stddev_ts" in ((rec.model_extra or {}).get("repaired") or []):
                repaired.append(
                    (
                        si,
                        f"{src.path}:{r.line}: stddev_ts was not a finite, non-negative number; "
                        + (
                            f"recomputed from {len(rec.samples_ts)} samples"
                            if rec.stddev_ts is not None
                            else "left empty (fewer than 2 samples)"
                        ),
                    )
                )
            spill.write(b"%d %d %s\n" % (si, fi, _spilled(body)))
        src.finish()
    if before is not None:
        _unchanged([src.path for src in sources], before)
    _backend_wrong(backend, wrong)
    content = content_h.hexdigest()
    again = _read_again(fps)  # rows read twice in this import: left out
    printed = _printed_again(shown, untimed, file_of, again)  # md rows that print a row of another file
    again.update(printed)
    live = _live_sets(set_of, again)  # systems with a row left to write (an md table's may have none)
    systems = [sy for sy in systems_seen if system_ids[sy] in live]
    if digest and len(systems) > 1:
        raise BadInput(
            f"--digest {digest}: the files hold {len(systems)} builds/backends/GPUs "
            f"({'; '.join(', '.join(f'{k}={v}' for k, v in s) for s in systems)}); import each "
            "with its own --digest, or leave --digest out to file each under its own"
        )
    names = _set_names(label, systems)
    sets = {}
    for sy, name in zip(systems, names, strict=True):
        d = digest or (
            "import:"
            + (content if len(systems) == 1 else hashlib.sha256((content + repr(sy)).encode()).hexdigest())
        )
        sets[sy] = ImportedSet(name, d, dict(sy))
    gone = ImportedSet("", "", {}, already=True)  # the set of a system whose every row was left out
    res = ImportResult(
        label,
        next(iter(sets.values())).digest if sets else "",
        [str(src.path) for src in sources],
        formats={str(src.path): src.fmt for src in sources},
        sets=list(sets.values()),
        skipped=skipped,
        refused=refused,
        duplicates=[_dup_note(n, run, name, how) for ((run, name, _d), how), n in sorted(dup_stored.items())],
    )
    if not sets and not dup_stored:  # every row refused after its reader counted it (e.g. a lone surrogate)
        raise none_usable(", ".join(str(src.path) for src in sources), refused)
    if not sets:  # every row was imported before: named as stored
        res.sets = [
            ImportedSet(name, d, {}, already=True) for ((_r, name, d), _h) in dict.fromkeys(dup_stored)
        ]
        res.digest = res.sets[0].digest if res.sets else ""
        res.already = True
        return res
    from toolkit.results import (
        index as resultindex,  # only the records of these digests, through the query index
    )

    known = {
        (r.image.digest, (r.model_extra or {}).get("imported", {}).get("sha256")): r.image.name
        for r in resultindex.select(store, digests=[s_.digest for s_ in sets.values()])
    }
    for s_ in sets.values():
        s_.already = (s_.digest, content) in known
        if s_.already:  # named as stored: that is the name report and compare know them by
            s_.name = known[(s_.digest, content)]
    if all(s_.already for s_ in sets.values()):
        res.already = True
        return res
    for src in sources:
        res.per_file[str(src.path)] = src.count
    by_id = [sets.get(sy, gone) for sy in system_ids]
    res.repaired = [text for si, text in repaired if not by_id[si].already]
    now = now or datetime.now(timezone.utc)
    run_id = f"import-{now.strftime('%Y%m%dT%H%M%SZ')}-{content[:6]}"
    created = now.isoformat(timespec="seconds")
    heads = [
        _head(
            run_id,
            created,
            ImageRef(
                name=t.name,
                ref=f"import:{t.name}",
                digest=t.digest,
                backend=backend or backends.from_llama_names(",".join(sorted(systems_seen[sy]))),
                labels={"org.toolkit.imported-from": ", ".join(src.path.name for src in sources)},
            ),
        )
        for sy, t in zip(system_ids, by_id, strict=True)
    ]
    repeated = _repeated(keys, again)
    holes = [b'"file_sha256":"%s","sha256":"%s"' % (src.sha.encode(), content.encode()) for src in sources]
    batch: list[tuple[str, bytes, bytes]] = []
    targets: list[ImportedSet] = []

    def put(target: ImportedSet, head: bytes, tail: bytes) -> None:
        batch.append((target.digest, head, tail))
        targets.append(target)
        if len(batch) >= store.BATCH:
            flush()

    def flush() -> None:
        for target, path in zip(targets, store.add_record_lines(batch), strict=True):
            target.path = res.path = path
            target.records += 1
            res.records += 1
        batch.clear()
        targets.clear()

    firsts = dict.fromkeys(again.values(), "")  # spill index -> file:line of a row read again later
    read_again: dict[tuple[str, str, bool], list] = {}  # (file, file of the first, md) -> [rows, an example]
    held = _Held(aside)  # the records of repeated tests: set aside, grouped after the last row
    wrote: set[int] = set()  # the files (places in sources) a record is written from
    spill.seek(0)
    for i, line in enumerate(spill):
        si_b, fi_b, at_seq, at_holes, body = line[:-1].split(b" ", 4)
        target = by_id[int(si_b)]
        if target.already and target is not gone:  # (a gone set's rows are all read again: said below)
            continue
        if i in firsts:
            firsts[i] = f"{sources[int(fi_b)].path}:{_line_of(body)}"
        if i in again:
            j = again[i]
            first = firsts.get(j) or (  # an md row before the row it prints: its place, kept when md_here
                f"{sources[file_of[j]].path}:{line_of[j]}" if j < len(file_of) else "?"
            )
            pair = (str(sources[int(fi_b)].path), first.rsplit(":", 1)[0], i in printed)
            seen = read_again.setdefault(pair, [0, f"{pair[0]}:{_line_of(body)} = {first}"])
            seen[0] += 1
            continue
        wrote.add(int(fi_b))
        head, tail = _filled(body, int(at_seq), int(at_holes), heads[int(si_b)], holes[int(fi_b)])
        if i in repeated:
            held.add(int(si_b), keys[i], head + b"0" + tail)
        else:
            put(target, head, tail)
    flush()
    res.duplicates += [
        f"{n} row(s) of {f} print measurements this import reads in full from {first} (e.g. {eg}): left out"
        if md
        else f"{n} row(s) of {f} are measurements read before in this import, from {first} (e.g. {eg}): left out"
        for (f, first, md), (n, eg) in read_again.items()
    ]
    for fi, src in enumerate(sources):  # what a format cannot say, of the files whose rows are written
        note = f"{src.path}: {src.fmt} output has {' and '.join(sorted(src.notes))}: said on each of its rows"
        if fi in wrote and src.notes and note not in res.notes:
            res.notes.append(note)
    res.repeated = held.group(by_id)
    for si, line in held.lines():
        at = line.rfind(_SEQ)
        put(by_id[si], line[:at] + b',"seq":', line[at + len(_SEQ) :])
    flush()
    return res


class _Held:
    """The records of tests several rows measure, kept on disk (`aside`, an unnamed temp file) with 20
    bytes each in memory, so an import of a million rows with 2 % repeats does not hold 40,000 models:
    `add` them in file order, `group` them (one test digest at a time, exactly by _repetitions: their
    order, process_run, runs-disagree), then `lines()` gives the final records in file order again
    (the order the import wrote them in before)."""

    def __init__(self, aside: IO[bytes]) -> None:
        self.aside = aside
        self.at = array.array("Q")  # where each record's line starts in `aside`
        self.key = array.array("Q")  # its test digest
        self.set = array.array("I")  # its set
        self.final = array.array("Q")  # where its final line starts, after `group`

    def add(self, si: int, key: int, record: bytes) -> None:
        self.aside.seek(0, 2)
        self.at.append(self.aside.tell())
        self.key.append(key)
        self.set.append(si)
        self.aside.write(record + b"\n")

    def _read(self, at: int) -> bytes:
        self.aside.seek(at)
        return self.aside.readline()[:-1]

    def group(self, by_id: list[ImportedSet]) -> list[str]:
        """Mark every group's records (_repetitions) and write their final lines; what _repetitions
        says, in the order of each group's first row."""
        import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

        n = len(self.at)
        self.final = array.array("Q", bytes(8 * n))
        if not n:
            return []
        keys = np.frombuffer(self.key, dtype=np.uint64)
        order = np.argsort(keys, kind="stable")  # one digest's records together, in file order
        cuts = [0, *(np.flatnonzero(keys[order][1:] != keys[order][:-1]) + 1).tolist(), n]
        said: list[tuple[int, list[str]]] = []
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            members = [int(j) for j in order[lo:hi]]
            recs = [
                (
                    by_id[self.set[j]],
                    BenchRecord.model_validate(
                        jsonsafe.parse(
                            self._read(self.at[j]), 4 * jsonsafe.MAX_LINE_BYTES, jsonsafe.MAX_DEPTH + 8
                        )
                    ),
                )
                for j in members
            ]
            said.append((members[0], _repetitions(recs)))
            self.aside.seek(0, 2)
            for j, (_target, rec) in zip(members, recs, strict=True):
                self.final[j] = self.aside.tell()
                rec.seq = None
                self.aside.write(rec.model_dump_json().encode() + b"\n")
        return [line for _first, lines in sorted(said, key=lambda x: x[0]) for line in lines]

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """(set, final record JSON) in file order."""
        for j in range(len(self.final)):
            yield self.set[j], self._read(self.final[j])


_SEQ = b',"seq":null'
_HOLES = b'"file_sha256":"","sha256":""'


def _head(run_id: str, created: str, image: ImageRef) -> bytes:
    """The JSON an imported record starts with, up to its model: BenchRecord's first fields in its
    order, as every row of an import has them."""
    return (
        b'{"schema_version":%d,"run_id":%s,"created":%s,"status":"ok","error":null,"runner":"llama-bench","method":"llama-bench","image":%s,'
        % (
            RECORD_SCHEMA_VERSION,
            json.dumps(run_id).encode(),
            json.dumps(created).encode(),
            image.model_dump_json().encode(),
        )
    )


_PASS1_HEAD = _head("", "", _PASS1_IMAGE)


def _spilled(body: bytes) -> bytes:
    """A pass-1 record's JSON as spilled: `<where "seq":null is> <where the empty hashes are> <JSON>`,
    both -1 when the JSON does not start as _head writes it (then pass 2 reads it as JSON). The last
    `,"seq":null` is the record's own (after it come only `imported`, `flags` and `repaired`, whose
    keys are fixed and whose strings escape every quote)."""
    at_seq = body.rfind(_SEQ) if body.startswith(_PASS1_HEAD) else -1
    at_holes = body.find(_HOLES, at_seq) if at_seq >= 0 else -1
    if at_holes < 0:
        at_seq = -1
    return b"%d %d %s" % (at_seq, at_holes, body)


def _filled(body: bytes, at_seq: int, at_holes: int, head: bytes, holes: bytes) -> tuple[bytes, bytes]:
    """A spilled record's JSON with its set's head (run id, created, image) and the hashes filled in,
    cut where its seq goes: (up to `"seq":`, the rest)."""
    if at_seq >= 0:
        return (
            head + body[len(_PASS1_HEAD) : at_seq] + b',"seq":',
            body[at_seq + len(_SEQ) : at_holes] + holes + body[at_holes + len(_HOLES) :],
        )
    rec = jsonsafe.parse(body, 4 * jsonsafe.MAX_LINE_BYTES, jsonsafe.MAX_DEPTH + 8)  # our own record
    top = jsonsafe.parse(head[:-1] + b"}")  # run_id, created, image as _head wrote them
    hashes = jsonsafe.parse(b"{" + holes + b"}")
    rec.update(run_id=top["run_id"], created=top["created"], image=top["image"], seq=None)
    rec["imported"].update(hashes)
    text = json.dumps(rec, separators=(",", ":"), allow_nan=False).encode()
    at = text.rfind(_SEQ)
    return text[:at] + b',"seq":', text[at + len(_SEQ) :]


def _repeated(keys: array.array, left_out: dict[int, int] | None = None) -> set[int]:
    """The places (in `keys`) of the records whose test digest another record shares (those `left_out`
    not counted): sorted with numpy (8 bytes a record), so no table of every test is held."""
    import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

    k = np.frombuffer(keys, dtype=np.uint64) if len(keys) else np.zeros(0, dtype=np.uint64)
    places = np.arange(len(k))
    if left_out:
        keep = np.ones(len(k), dtype=bool)
        keep[list(left_out)] = False
        k, places = k[keep], places[keep]
    order = np.argsort(k, kind="stable")
    same = k[order][1:] == k[order][:-1]
    dup = np.zeros(len(k), dtype=bool)
    dup[1:] |= same
    dup[:-1] |= same
    return {int(i) for i in places[order[dup]]}


def _live_sets(set_of: array.array, again: dict[int, int]) -> set[int]:
    """The systems (places in system_ids) with a spilled record not left out as read again."""
    import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

    s = np.frombuffer(set_of, dtype=np.uint32) if len(set_of) else np.zeros(0, dtype=np.uint32)
    if again:
        keep = np.ones(len(s), dtype=bool)
        keep[list(again)] = False
        s = s[keep]
    return {int(x) for x in np.unique(s)}


def _printed_again(
    shown: dict[_Form, array.array], untimed: list[int], file_of: array.array, again: dict[int, int]
) -> dict[int, int]:
    """{place: place of the row it prints} of the md rows (`untimed` places) whose _shown digest (in
    their table's form: its setting columns, its build line) equals a row with a test_time in another
    file of this import, before or after it (that row is kept: it has the test_time, and samples but
    in csv). An md row's digest is 0 in every form but its own."""
    if not untimed or not shown:
        return {}
    import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

    timed = np.ones(len(file_of), dtype=bool)
    timed[untimed] = False
    if again:
        timed[list(again)] = False
    places = np.flatnonzero(timed)
    out: dict[int, int] = {}
    for digests in shown.values():
        s = np.frombuffer(digests, dtype=np.int64)
        order = np.argsort(s[places], kind="stable")
        sorted_shown = s[places][order]
        for i in untimed:
            if i in again or i in out or s[i] == 0:
                continue
            k = int(np.searchsorted(sorted_shown, s[i]))
            while k < len(sorted_shown) and sorted_shown[k] == s[i]:
                j = int(places[order[k]])
                if file_of[j] != file_of[i]:
                    out[i] = j
                    break
                k += 1
    return out


def _dup_note(n: int, run: str, name: str, how: str) -> str:
    """The line that says `n` rows were left out as imported before in `run` (as `name`)."""
    if how == "md":
        return (
            f"{n} row(s) of md tables print measurements already imported in run {run} (as {name}): left out"
        )
    if how == "md-before":
        return (
            f"{n} row(s) are measurements already imported in run {run} (as {name}) from an md table, "
            "without samples or test_time: left out (a measurement is imported once; to keep these "
            "rows instead, import them into a new --results folder)"
        )
    return f"{n} row(s) already imported in run {run} (as {name}): left out"


def _read_again(fps: array.array) -> dict[int, int]:
    """{place: place of the first} of the records (in `fps`, their measurement digests) that measure
    what a record before them in this import measured (one file imported twice, or as jsonl and csv):
    sorted with numpy, 8 bytes a record."""
    import numpy as np  # a dependency of the toolkit (gguf); loaded only by an import

    if len(fps) < 2:
        return {}
    f = np.frombuffer(fps, dtype=np.int64)
    order = np.argsort(f, kind="stable")  # equal digests together, in file order
    sf = f[order]
    starts = np.ones(len(sf), dtype=bool)
    starts[1:] = sf[1:] != sf[:-1]
    first = np.maximum.accumulate(np.where(starts, np.arange(len(sf)), 0))  # its group's first place
    again = np.flatnonzero(~starts)
    return dict(zip(order[again].tolist(), order[first[again]].tolist(), strict=True))


_LINE = re.compile(rb'"imported":\{"file":"(?:[^"\\]|\\.)*","line":(\d+)')


def _line_of(body: bytes) -> str:
    """The line number a spilled record says it came from."""
    m = _LINE.search(body)
    return m.group(1).decode() if m else "?"


def _import_vllm(
    store: ResultStore,
    files: list[vllm_import.VllmFile],
    *,
    label: str,
    backend: str | None,
    model_sha256: str | None,
    digest: str | None,
    now: datetime | None,
    input_len: int | None,
    output_len: int | None,
) -> ImportResult:
    """`vllm bench latency | serve | throughput` result files (results/vllm_import.py): one set, records
    with the runner's methods, axes and units; a served result that generated fewer tokens than asked
    is a failed record saying so. BadInput naming a file whose lengths are unknown."""
    for f in files:
        vllm_import.resolve_lengths(f, input_len, output_len)
    content = hashlib.sha256(b"".join(f.data for f in files)).hexdigest()
    d = digest or f"import:{content}"
    s_ = ImportedSet(label, d, {"runner": "vllm"})
    res = ImportResult(
        label,
        d,
        [str(f.path) for f in files],
        formats={str(f.path): f"vllm-bench-{f.kind}" for f in files},
        sets=[s_],
    )
    from toolkit.results import index as resultindex

    known = {
        (r.image.digest, (r.model_extra or {}).get("imported", {}).get("sha256")): r.image.name
        for r in resultindex.select(store, digests=[d])
    }
    if (d, content) in known:
        s_.already = res.already = True
        s_.name = known[(d, content)]
        return res
    now = now or datetime.now(timezone.utc)
    image = ImageRef(
        name=label,
        ref=f"import:{label}",
        digest=d,
        backend=backend or "unknown",
        labels={"org.toolkit.imported-from": ", ".join(f.path.name for f in files)},
    )
    try:
        recs = _vllm_records(files, image, now, content, model_sha256)
    except (TypeError, ValueError, OverflowError, KeyError, AttributeError) as err:
        # a value of the wrong type or size in one of the files (pydantic's ValidationError is a ValueError)
        first = _reason(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise BadInput(
            f"{', '.join(str(f.path) for f in files)}: a value is not what `vllm bench` writes ({first}); "
            + (
                "import the files one by one to find it, or fix the value"
                if len(files) > 1
                else "fix the value"
            )
        ) from None
    return _finish_vllm(store, res, recs, files, backend)


def _vllm_records(
    files: list[vllm_import.VllmFile], image: ImageRef, now: datetime, content: str, model_sha256: str | None
) -> list[BenchRecord]:
    return vllm_import.records(
        files,
        image=image,
        run_id=f"import-{now.strftime('%Y%m%dT%H%M%SZ')}-{content[:6]}",
        created=now.isoformat(timespec="seconds"),
        model_sha256=model_sha256 or "",
        content=content,
        file_sha={f.path: hashlib.sha256(f.data).hexdigest() for f in files},
    )


def _finish_vllm(
    store: ResultStore,
    res: ImportResult,
    recs: list[BenchRecord],
    files: list[vllm_import.VllmFile],
    backend: str | None,
) -> ImportResult:
    s_ = res.sets[0]
    for rec in recs:
        res.per_file[_imported(rec)["file"]] = res.per_file.get(_imported(rec)["file"], 0) + 1
        if rec.status == "failed":
            res.failed.append(f"{_imported(rec)['file']}: {rec.test}: {rec.error}")
    res.notes += [n for f in files for n in f.notes]
    if backend is None:
        res.notes.append("vLLM results do not say the backend: filed as `unknown` (give --backend)")
    if any(f.kind == "latency" for f in files):
        res.notes.append(
            "`vllm bench latency` results do not say their batch size: taken as 1 (the toolkit runs --batch-size 1)"
        )
    for path in store.add_results(recs):
        s_.path = res.path = path
        s_.records += 1
        res.records += 1
    return res


SAID_AT_MOST = 10
"""How many rows a note on repetitions names before it says `and N more`."""


def _repetitions(staged: list[tuple[ImportedSet, BenchRecord]]) -> list[str]:
    """Rows of one set that measure the same test (one TestKey) become repetitions of one cell: each is
    marked `process_run` (identity.newest_per_test combines them, as it combines `bench.runs`), in
    the order of their test_time (newest last, whatever the line order). Returns one line per test
    saying so, and whether they disagree beyond noise (`runs-disagree`)."""
    groups: dict[TestKey, list[tuple[ImportedSet, BenchRecord]]] = {}
    for target, rec in staged:
        groups.setdefault(test_key(rec), []).append((target, rec))
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        recs = sorted((rec for _, rec in members), key=measured_at)
        for i, rec in enumerate(recs, 1):
            rec.__pydantic_extra__ = {
                **(rec.model_extra or {}),
                "process_run": {"index": i, "of": len(recs), "source": "import"},
            }
        combined = combine_runs(recs)
        shown = recs[:SAID_AT_MOST]  # a file of 50,000 repetitions gave a 1.5 MB line
        more = f" and {len(recs) - len(shown)} more" if len(recs) > len(shown) else ""
        where = ", ".join(f"{Path(_imported(r)['file']).name}:{_imported(r)['line']}" for r in shown) + more
        values = " / ".join(f"{r.avg_ts:.2f}" for r in shown if r.avg_ts is not None) + more
        flags = (combined.model_extra or {}).get("flags") or []
        verdict = (
            "they disagree beyond noise: flagged runs-disagree"
            if "runs-disagree" in flags
            else "they agree within noise"
        )
        differ = sorted(
            k
            for k in {k for r in recs for k in r.raw} - MEASUREMENT_FIELDS
            if len({repr(r.raw.get(k)) for r in recs}) > 1
        )
        out.append(
            f"{members[0][0].name}: {recs[0].test}: rows {where} measure the same test ({values} t/s): kept "
            f"as {len(recs)} repetitions of one cell; {verdict}"
            + (
                f" (they differ only in {', '.join(differ)}, which does not change the test)"
                if differ
                else ""
            )
        )
    return out


def _imported(r: BenchRecord) -> dict[str, Any]:
    return dict((r.model_extra or {}).get("imported") or {})


@functools.lru_cache(maxsize=256)
def _file_name(path: str) -> str:
    """Path(path).name, cached (every row of a file names the same few model files)."""
    return Path(path).name


def _record(
    row: readers.SourceRow,
    *,
    image: ImageRef,
    run_id: str,
    created: str,
    model_sha256: str,
    source: Path,
    file_sha: str,
    content: str,
) -> BenchRecord:
    raw = dict(row.fields)
    # `toolkit measure` adds what the system did during the test (not llama-bench fields: kept out of raw)
    telemetry = raw.pop("toolkit_telemetry", None)
    measured_flags = raw.pop("toolkit_flags", None)
    norm = llamabench.normalize(raw)
    norm["avg_ts"] = _avg_ts(raw, norm)
    mfile = str(raw.get("model_filename") or "")
    model = ModelRef(
        name=_file_name(mfile) or str(raw.get("model_type") or "unknown"),
        path=mfile,
        sha256=model_sha256,
        size_bytes=readers.quantity(raw.get("model_size")) or 0,
    )
    flags = [f"no-{n.removeprefix('no ').replace(' ', '-')}" for n in row.notes]
    if isinstance(measured_flags, list):
        flags += [f for f in measured_flags if isinstance(f, str) and f not in flags]
    return BenchRecord(
        run_id=run_id,
        created=created,
        status="ok",
        runner="llama-bench",
        method="llama-bench",
        image=image,
        model=model,
        raw=raw,
        **norm,
        imported={
            "file": str(source),
            "line": row.line,
            "format": row.fmt,
            "file_sha256": file_sha,
            "sha256": content,
        },
        **({"flags": flags} if flags else {}),
        telemetry=telemetry if isinstance(telemetry, dict) else None,
    )
