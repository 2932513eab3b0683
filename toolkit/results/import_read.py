"""Reading files given to `toolkit import`: size and encoding checks, the format of each file (every
llama-bench format through llama_bench.readers.find_source), small files read whole and large JSONL /
JSON / CSV streamed in blocks, and the stored rows a new row is compared with."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from toolkit.core import jsonsafe
from toolkit.core.errors import BadInput
from toolkit.core.text import line_text
from toolkit.core.types import is_image_id, is_sha256
from toolkit.results.identity import type_words
from toolkit.results.import_said import Reasons, by_reason, said_by_reason
from toolkit.results.records import (
    IMPORTED,
    BenchRecord,
    ImageRef,
    ModelRef,
    short_digest,
)
from toolkit.results.telemetry_check import measured_claims
from toolkit.results.telemetry_flags import without_figures
from toolkit.runtimes.llama_bench import check, failed_run, other_tables
from toolkit.runtimes.llama_bench import readers as readers
from toolkit.runtimes.llama_bench.validity import check_row

OWN_NAMES = ("builds.jsonl", "hosts", "campaigns", "measure")
"""Names the results folder itself uses (beside its hidden `.lock`, `.seq`, `.index*.sqlite`,
`.concurrent`): never an image's folder."""


def digest_folder_problem(digest: str) -> str | None:
    """Why `digest`'s folder (short_digest) cannot be an image's folder in a results folder, or None:
    a hidden name or one of OWN_NAMES (`--digest import:.lock` made results/.lock a folder: no bench
    could lock the folder again; `import:builds.jsonl` hid every build record)."""
    name = short_digest(digest)
    if name in ("", ".", "..") or name.startswith(".") or name in OWN_NAMES:
        return f"its folder would be results/{name}, a name the results folder itself uses or hides"
    return None


MAX_LABEL = 64
"""The longest import --label (a column of the tables) and import:NAME of --digest, in characters."""
_IMPORT_DIGEST = re.compile(rf"import:[A-Za-z0-9][A-Za-z0-9_.+-]{{0,{MAX_LABEL - 1}}}")


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
    the same set also measured (kept as repetitions of one cell): a line for each of the first tests,
    then a line per file counting the others (`repeated_tests`: how many in all)."""

    label: str
    digest: str
    files: list[str]
    records: int = 0
    already: bool = False  # every set was imported before: nothing added
    path: Path | None = None
    per_file: dict[str, int] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)  # file -> jsonl | json | csv | md | sql
    sets: list[ImportedSet] = field(default_factory=list)
    refused: Reasons = field(default_factory=Reasons)
    repaired: list[str] = field(default_factory=list)
    skipped: Reasons = field(default_factory=Reasons)
    repeated: list[str] = field(default_factory=list)  # at most import_repeats.SAID_TESTS, then counts
    repeated_tests: int = 0  # tests measured by several rows (`repeated` names the first ones)
    notes: list[str] = field(default_factory=list)  # what a format could not say (no samples, no build)
    failed: list[str] = field(default_factory=list)  # vLLM results stored as failed records, and why
    duplicates: list[str] = field(default_factory=list)  # rows read or imported before, left out: counted


MAX_IMPORT_BYTES = 64 << 20
"""A file read whole (md and sql; see STREAM_ABOVE) has at most this many bytes, so memory stays bounded
(a file is parsed into rows of a few hundred bytes each). md: a table's rows take their build commit
from the `build:` line after the table, so a table is held whole anyway; both are formats for people
and databases (a 64 MiB md table is some 300,000 rows)."""


FORMATS_HINT = (
    "expected llama-bench output: -o jsonl, -o json, -o csv, -o md (a markdown table with model, test and "
    "t/s columns) or -o sql"
)


def read_rows(
    path: Path, skipped: Reasons | None = None, refused: Reasons | None = None
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
    for note in notes:
        if skipped is not None:
            skipped.append(f"{path}:{note.removeprefix('line ')}")
    for n, why in no:
        if refused is not None:
            refused.add(why, str(path), n, "; row left out")
    if rows:
        return data, rows, fmt or ""
    if not parsed and bad:
        n, b = bad[0]
        raise BadInput(
            f"{path}: not a text file (line {n}, byte {b} is not UTF-8) and no llama-bench result rows in "
            f"it; {FORMATS_HINT}"
        )
    if no:
        raise NoneUsable(str(path), [f"line {n}: {why}" for n, why in no])
    raise _no_rows(path, text, notes)


def _no_rows(path: Path, text: str, notes: list[str]) -> BadInput:
    """The error for a file without a row that looks like one: what it holds instead (what stopped a
    failed run, a table set side by side: failed_run; another tool's markdown table, a table set out by
    hand, a box-drawn table or a CSV of other columns: other_tables; a table without rows, or its first
    line) and the first of the reader's `notes` (none when the file is another program's
    output: its lines that looked like records are that program's, e.g. a server log's chat template)."""
    lines = text.splitlines()
    other = next(((i, ln) for i, ln in enumerate(lines, 1) if readers.md_table_like(ln)), None)
    table = next((i for i, ln in enumerate(lines, 1) if ln.strip().startswith("|")), None)
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    if (said := failed_run.why_no_rows(lines)) is not None:  # a failed run, a table set side by side
        hint = said
        notes = [] if said.startswith(failed_run.OTHER_PROGRAM) else notes
    elif other is not None:
        hint = (
            f"the markdown table at line {other[0]} has `test` and `t/s` columns but not llama-bench's "
            f"{', '.join(repr(c) for c in readers.MD_COLUMNS)} (its header: {other[1].strip()[:120]!r}): "
            "another tool's table, not llama-bench -o md output"
        )
    elif (said := other_tables.md_table(lines)) is not None:  # a table by hand, llama-server's timings
        hint = said
    elif table is not None:
        hint = other_tables.headless_rows(lines, table) or (
            f"a markdown table (-o md) at line {table} has no result rows: it needs a header with model, test "
            "and t/s columns, its separator line, then rows"
        )
    else:
        drawn = other_tables.box_table(lines) or other_tables.csv_table(lines, check.LLAMA_FIELDS)
        hint = drawn or FORMATS_HINT
    why = f"; {notes[0]}" + (f" (and {len(notes) - 1} more)" if len(notes) > 1 else "") if notes else ""
    return BadInput(
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
    ns = check.as_float(row.get("avg_ns"))
    tokens = norm["n_prompt"] + norm["n_gen"]
    return tokens * 1e9 / ns if ns and tokens else None


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


class NoneUsable(BadInput):
    """Input whose every row was refused: `refused` the refusals (`line N: why` or `PATH:N: why`) by
    reason, which the message says (said_by_reason) and `toolkit import --json` gives."""

    def __init__(self, where: str, refused: Iterable[str]) -> None:
        self.refused = by_reason(refused)
        super().__init__(
            f"{where}: no llama-bench result rows found that are measurements: {len(self.refused):,} refused:\n  "
            + "\n  ".join(said_by_reason(self.refused))
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
        not label[:1].isalnum()
        or len(label) > MAX_LABEL
        or any(c.isspace() or not c.isprintable() for c in label)
        or any(c in label for c in "/|`")
    ):  # | and ` would break the tables a label heads; control characters would rewrite a terminal
        raise BadInput(
            f"--label {label[:80]!r}{f' ({len(label)} characters)' if len(label) > 80 else ''}: give a short "
            f"name, at most {MAX_LABEL} characters, starting with a letter or digit, without spaces, control "
            "characters, '/', '|' or '`', e.g. bare-metal-hip"
        )
    if model_sha256 is not None and not is_sha256(model_sha256):
        raise BadInput(
            f"--model-sha256 {model_sha256!r}: expected 64 lower-case hex digits (`sha256sum model.gguf`)"
        )
    if digest is not None and not (is_image_id(digest) or _IMPORT_DIGEST.fullmatch(digest)):
        raise BadInput(  # a digest that is neither would be taken for an image an engine holds (reproduce pulls it)
            f"--digest {digest[:80]!r}{f' ({len(digest)} characters)' if len(digest) > 80 else ''}: give an "
            "image ID, sha256: and 64 lower-case hex digits, or the 64 alone (`docker image inspect --format "
            "'{{.Id}}' IMAGE`, `podman image inspect --format '{{.Id}}' IMAGE`), "
            f"or import:NAME, at most {MAX_LABEL} letters, digits and . _ + -, e.g. import:my-run"
        )
    if digest is not None and (why := digest_folder_problem(digest)):
        raise BadInput(f"--digest {digest!r}: {why}; name the set another way, e.g. import:my-run")


SYSTEM_SPLIT = ("build_commit", "build_number", "backends", "devices", "gpu_info")
_UNSAID = {"build_commit": "no-build", "build_number": "no-build-number", "backends": "no-backend"}
"""set_names' word for a set whose rows leave a SYSTEM_SPLIT field out (else `no-<field>`): a Vulkan run
that printed no device line beside ROCm runs that did is `Vulkan-no-gpu_info`, not `Vulkan-none`, which
read as a split mode (`-sm none`)."""


def system_of(row: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The fields that tell builds/backends/GPUs apart, hashable whatever the file put there (a dict
    or list in a string field is kept as its JSON text, cut to 200 characters)."""

    def plain(v: Any) -> Any:
        if isinstance(v, (str, int, float, bool)):
            return v
        return json.dumps(v, sort_keys=True, default=str)[:200]

    return tuple((k, plain(row.get(k))) for k in SYSTEM_SPLIT if row.get(k) not in (None, ""))


def set_names(label: str, systems: list[tuple]) -> list[str]:
    """`label` for one system; else `label.<what differs>` (build commit and number, backend, GPU: every
    field that differs, whole, so two sets never read alike; one device listed N times as `Nx <device>`;
    a field a set's rows leave out as _UNSAID says), made unique."""
    if len(systems) == 1:
        return [label]
    varying = [k for k in SYSTEM_SPLIT if len({dict(s).get(k) for s in systems}) > 1]
    names = []
    for s in systems:
        d = dict(s)
        part = "-".join(
            re.sub(r"[^A-Za-z0-9_.+-]+", "-", _counted(str(d.get(k, _UNSAID.get(k, f"no-{k}"))))).strip("-")
            for k in varying
        )
        names.append(f"{label}.{part or 'set'}")
    for i, n in enumerate(names):  # equal after leaving out what is not a name character: number them
        if names.count(n) > 1:
            names[i] = f"{n}.{i + 1}"
    return names


def _counted(value: str) -> str:
    """A list of one device repeated (llama-bench's gpu_info of two R9700s: `AMD Radeon AI PRO R9700, AMD
    Radeon AI PRO R9700`) as `2x AMD Radeon AI PRO R9700`, as the report's host line says it; else as is."""
    items = [x.strip() for x in value.split(",")]
    return f"{len(items)}x {items[0]}" if len(items) > 1 and len(set(items)) == 1 and items[0] else value


STREAM_ABOVE = 1 << 20
"""A JSONL, `-o json` or CSV file larger than this is read as a stream (once, line by line or in blocks
of whole lines: hashed, checked and turned into records as it is read), so its size is not bounded by
MAX_IMPORT_BYTES and memory holds one row (a json element), a block and a batch of records. Which
reader, and from which line, is decided on the file's first STREAM_HEAD bytes exactly as a whole read
decides it (llama_bench.readers.find_source). Smaller files, md and sql are read whole."""


STREAM_HEAD = 1 << 20


STREAMED = frozenset({"jsonl", "json", "csv"})


BLOCK = 1 << 20
"""Bytes a streamed json or csv file is read in (then completed to the end of its line)."""


PASS1_IMAGE = ImageRef(name="import", ref=f"{IMPORTED}pass1", digest=f"{IMPORTED}pass1", backend="cpu")


RowWhere = tuple[str, str, str]  # (run id, image name, image digest) of a stored record


def try_record(
    row: readers.SourceRow,
    src: ImportSource,
    refused: Reasons | None,
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
            refused.add(reason_of(err)[:200], str(src.path), row.line, "; row left out")
        return None


def reason_of(err: Exception) -> str:
    """What a record refused: the field and pydantic's message; a string that is no text said so."""
    if isinstance(err, ValidationError) and err.errors():
        first = err.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        return (f"{where}: " if where else "") + first["msg"].removeprefix("Value error, ")
    if "surrogates not allowed" in str(err):
        return "a string holds a lone surrogate (such as \\ud800): no text a record can hold"
    return str(err).removeprefix("Value error, ")


class ImportSource:
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
        skipped: Reasons | None = None,
        refused: Reasons | None = None,
    ) -> None:
        self.path, self.fmt, self._data, self._rows, self._start = path, fmt, data, rows, start
        self._skipped, self._refused = skipped, refused
        self.sha = hashlib.sha256(data).hexdigest() if data is not None else ""
        self.count = len(rows) if rows is not None else 0
        self.notes: set[str] = set()
        self.stopped = failed_run.after_rows(data, rows[-1].line) if data and rows else None  # a crash after
        self._no = Reasons()  # this file's refusals, said when it has no usable row

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
        count, last = 0, 0
        for r in found:
            self.notes.update(r.notes)
            count, last = count + 1, r.line
            yield r
        self.sha, self.count = h.first.hexdigest(), count
        if count:  # a crash after the rows, as a file read whole says it (after_rows)
            self.stopped = failed_run.after_lines(self._tail(last), last)

    TAIL_BYTES = 1 << 20
    """At most this many bytes of the lines after a streamed file's last row are read for a crash (the
    line that says why a run stopped follows its rows; what lies beyond is not a run's output)."""

    def _tail(self, last: int) -> Iterator[str]:
        """The lines of a streamed file after line `last` (its last row's), at most TAIL_BYTES of them,
        numbered as its rows were: by "\\n" for jsonl (_lines), as str.splitlines for json and csv
        (_blocks: a line holding "\\r" or U+2028 is two); a line over the line limit is one, unread.
        Read again from the start (O(file), no line kept but the tail); an unreadable file gives none."""
        n, seen, taken = 0, 0, 0
        try:
            with self.path.open("rb") as fh:
                for k, raw, whole in _lines(fh):
                    if k == seen:
                        continue  # the rest of a line over the limit
                    seen = k
                    if self.fmt == "jsonl" and k <= last:
                        n = k  # numbered by "\n": nothing to decode before the tail
                        continue
                    text = raw.decode(errors="replace") if whole else ""
                    parts = [text.rstrip("\r\n")] if self.fmt == "jsonl" else (text.splitlines() or [""])
                    for part in parts:
                        n += 1
                        if n > last:
                            taken += len(part) + 1
                            if taken > self.TAIL_BYTES:
                                return
                            yield part
        except OSError:
            return

    def _note(self, text: str) -> None:
        if self._skipped is not None:
            self._skipped.append(f"{self.path}:{text}")

    def _jsonl(self, h: _Both) -> Iterator[readers.SourceRow]:
        with self.path.open("rb") as fh:
            for n, raw, whole in _lines(fh):
                h.update(raw)
                if not whole:
                    long = f"longer than {jsonsafe.MAX_LINE_BYTES} bytes"
                    if raw.lstrip()[:1] == b"{":
                        self._note(f"{n}: not a complete JSON record ({long})")
                    elif line_text(raw[:16].decode("utf-8", "replace")).startswith(readers.JSON_START):
                        self._note(f"{n}: {readers.unreadable_json(long)}")
                    continue
                if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    line = line_text(raw.decode("utf-8"))
                except UnicodeDecodeError as err:
                    self._note(f"{n}: not UTF-8 (byte {err.start}): the line was left out")
                    continue
                if not line.startswith("{"):
                    if other := readers.not_a_record(line):
                        self._note(f"{n}: {other}")
                    continue
                obj, why, twice = jsonsafe.parse_printed_line(line)
                if why is not None:
                    self._note(f"{n}: not a complete JSON record ({why})")
                    continue
                if obj is None:
                    continue
                row = readers.SourceRow(n, obj, "jsonl")  # an ik_llama.cpp -gp row's counts read first
                no = check_row(row.fields, twice)
                if no:
                    self._refuse(n, no)
                    continue
                yield row

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
                self._refuse(r.line, why)
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

    def _refuse(self, n: int, why: str) -> None:
        self._no.add(why, "", n)
        if self._refused is not None:
            self._refused.add(why, str(self.path), n, "; row left out")

    def finish(self) -> None:
        """After `rows()`: BadInput naming the file when none of its rows is usable."""
        if self._rows is not None or self.count:
            return
        if self._no:
            raise NoneUsable(str(self.path), self._no)
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
    would find it (llama_bench.readers.find_source); or they hold no rows but a JSONL line starts first
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


PACKED = (
    (re.compile(re.escape(b"\x1f\x8b")), "gzip", "gunzip"),
    (re.compile(re.escape(b"\x28\xb5\x2f\xfd")), "zstd", "unzstd"),
    (re.compile(re.escape(b"\xfd7zXZ\x00")), "xz", "unxz"),
    (re.compile(b"BZh[1-9](?:1AY&SY|\x17rE8P\x90)"), "bzip2", "bunzip2"),
    (re.compile(b"PK(?:\x03\x04|\x05\x06|\x07\x08)"), "zip", "unzip"),
)
"""(the first bytes of a compressed file, its compression, the command that unpacks it): the formats
`file(1)` names by their magic; bzip2's `BZh` with its block size and the first block's (or the
empty stream's) magic, as `BZh` alone starts plain text too (a log line `BZh...`); zip's local file,
empty archive and spanned archive headers."""


def source_of(path: Path, skipped: Reasons, refused: Reasons) -> ImportSource:
    """The rows of one file to import, read whole or as a stream (_stream_plan); BadInput for a
    compressed file (PACKED: named with the command that unpacks it, as no reader takes its bytes) and
    for a file without llama-bench rows (read_rows)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            lead = fh.read(10)
    except OSError:
        size, lead = 0, b""  # read_rows names the file and the error
    for magic, kind, unpack in PACKED:
        if magic.match(lead):
            raise BadInput(
                f"{path}: a {kind}-compressed file, not llama-bench's text output: unpack it "
                f"(`{unpack} FILE`) and import what it gives"
            )
    plan = _stream_plan(path) if size > STREAM_ABOVE else None
    if plan is not None:
        return ImportSource(path, plan[0], start=plan[1], skipped=skipped, refused=refused)
    data, rows, fmt = read_rows(path, skipped, refused)
    return ImportSource(path, fmt, data=data, rows=rows)


def backend_wrong(backend: str | None, wrong: list[str]) -> None:
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


def imported_of(r: BenchRecord) -> dict[str, Any]:
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
    # `toolkit measure` adds what the system did during the test (not llama-bench fields: kept out of raw):
    # kept where the row's own block shows it (telemetry_check.measured_claims), the rest said
    block, claimed = raw.pop("toolkit_telemetry", None), raw.pop("toolkit_flags", None)
    telemetry, measured_flags, left = measured_claims(block, claimed, raw)
    # ... its figures held to physics, and any flag its block raises that the file left out added
    telemetry, measured_flags = without_figures(telemetry, measured_flags, left, raw.get("gpu_info"))
    norm = check.normalize(raw)
    norm["avg_ts"] = _avg_ts(raw, norm)
    if row.fmt == "md" and norm["stddev_ts"] == 0:  # `± 0.00`: -r 1 (no spread) or one rounded away
        norm["stddev_ts"] = None  # unknown, as one sample's (BenchRecord); raw keeps the 0.0 printed
    mfile = str(raw.get("model_filename") or "")
    model = ModelRef(
        name=_file_name(mfile) or type_words(raw.get("model_type")) or "unknown",
        path=mfile,
        sha256=model_sha256,
        size_bytes=check.quantity(raw.get("model_size")) or 0,
    )
    flags = [f"no-{n.removeprefix('no ').replace(' ', '-')}" for n in row.notes]
    flags += [f for f in measured_flags if f not in flags]
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
            **({"left_out": left} if left else {}),
        },
        **({"flags": flags} if flags else {}),
        telemetry=telemetry,
    )
