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

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from toolkit.core import backends, jsonsafe
from toolkit.core.errors import BadInput
from toolkit.results import llamabench_format as llamabench
from toolkit.results import llamabench_readers as readers
from toolkit.results import vllm_import
from toolkit.results.identity import MEASUREMENT_FIELDS, TestKey, combine_runs, measured_at, test_key
from toolkit.results.records import BenchRecord, ImageRef, ModelRef, ResultStore, short_digest

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


MAX_IMPORT_BYTES = 64 << 20
"""An import file is read whole (its sha256 names the import): at most this many bytes, so memory stays
bounded (a file is parsed into rows of a few hundred bytes each)."""

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
            f"{path}: larger than {MAX_IMPORT_BYTES >> 20} MiB and not JSONL (-o jsonl is read line by line at "
            "any size; -o json, csv, md and sql are read whole): split it and import the parts, or write -o jsonl"
        )
    text, bad = _decode_lines(data)
    notes: list[str] = [f"line {n}: not UTF-8 (byte {b}): the line was left out" for n, b in bad]
    fmt, parsed = readers.read_source(text, notes)
    rows, no = [], []
    for r in parsed:
        why = readers.check_row(r.fields, r.problem)
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
        raise BadInput(
            f"{path}: no llama-bench result rows found that are measurements: {len(no)} refused ("
            + "; ".join(f"line {n}: {why}" for n, why in no[:3])
            + (f"; and {len(no) - 3} more" if len(no) > 3 else "")
            + ")"
        )
    lines = text.splitlines()
    table = next((i for i, ln in enumerate(lines, 1) if ln.strip().startswith("|")), None)
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    hint = (
        f"a markdown table (-o md) at line {table} has no result rows: it needs a header with test and t/s "
        "columns, its separator line, then rows"
        if table is not None
        else FORMATS_HINT
    )
    raise BadInput(
        f"{path}: no llama-bench result rows found ({hint}); the file starts with {first[:80]!r}"
        if first
        else f"{path}: the file is empty; {FORMATS_HINT}"
    )


def _decode_lines(data: bytes) -> tuple[str, list[tuple[int, int]]]:
    """UTF-8 text of a file, bytes-safe: a leading BOM is dropped, a line that is not UTF-8 is left out
    (returned as (line number, offending byte offset)), the other lines are kept."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
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


def check_options(label: str, model_sha256: str | None, digest: str | None) -> None:
    if not label.strip() or any(c.isspace() for c in label) or "/" in label:
        raise BadInput(f"--label {label!r}: give a short name without spaces or '/', e.g. bare-metal-hip")
    if model_sha256 is not None and not _SHA_RE.fullmatch(model_sha256):
        raise BadInput(
            f"--model-sha256 {model_sha256!r}: expected 64 lower-case hex digits (`sha256sum model.gguf`)"
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
"""A JSONL file larger than this is streamed (read line by line, twice: once for its hash, its sets and
which tests repeat; once to write), so its size is not bounded by MAX_IMPORT_BYTES and memory holds one
line, a short digest per test and a batch of records. Smaller files and the other formats are read whole."""

_PASS1_IMAGE = ImageRef(name="import", ref="import:pass1", digest="import:pass1", backend="cpu")


def _key_digest(rec: BenchRecord) -> bytes:
    """A 16-byte digest of the record's TestKey less its image (pass 1 does not know the sets' digests
    yet; the system fields that split sets are part of the key, so the grouping is the same)."""
    key = dataclasses.replace(test_key(rec), image="")
    return hashlib.blake2b(repr(key).encode(), digest_size=16).digest()


def _try_record(
    row: readers.SourceRow,
    src: _Source,
    refused: list[str] | None,
    **kw: Any,
) -> BenchRecord | None:
    """The row's record, or None with `file:line: why` in `refused` when the record refuses it."""
    try:
        return _record(row, source=src.path, file_sha=src.sha, **kw)
    except (ValidationError, ValueError, TypeError, OverflowError) as err:
        if refused is not None:
            msg = (
                (err.errors()[0]["msg"] if err.errors() else str(err))
                if isinstance(err, ValidationError)
                else str(err)
            )
            refused.append(f"{src.path}:{row.line}: {msg.removeprefix('Value error, ')[:200]}; row left out")
        return None


class _Source:
    """One file's llama-bench rows that pass the validity pass: held in memory (a file read whole by
    `read_rows`: any format, at most MAX_IMPORT_BYTES) or streamed (JSONL over STREAM_ABOVE: read line
    by line on every `rows()`; the first pass also hashes it and says what it skipped and refused)."""

    def __init__(
        self,
        path: Path,
        fmt: str,
        *,
        data: bytes | None = None,
        rows: list[readers.SourceRow] | None = None,
        skipped: list[str] | None = None,
        refused: list[str] | None = None,
    ) -> None:
        self.path, self.fmt, self._data, self._rows = path, fmt, data, rows
        self._skipped, self._refused = skipped, refused
        self.sha = hashlib.sha256(data).hexdigest() if data is not None else ""
        self.count = len(rows) if rows is not None else 0
        self._no: list[tuple[int, str]] = []
        self._bad: tuple[int, int] | None = None
        self._read = rows is not None

    def rows(self, content: Any) -> Iterator[readers.SourceRow]:
        """The rows in file order; `content` (a hash or None) is fed the file's bytes."""
        if self._rows is not None:
            if content is not None:
                content.update(self._data or b"")
            yield from self._rows
            return
        first = not self._read
        h = hashlib.sha256() if first else None
        count = 0
        with self.path.open("rb") as fh:
            for n, raw, whole in _lines(fh):
                if h is not None:
                    h.update(raw)
                if content is not None:
                    content.update(raw)
                if not whole:
                    if first and self._skipped is not None and raw.lstrip()[:1] == b"{":
                        self._skipped.append(
                            f"{self.path}:{n}: not a complete JSON record (longer than "
                            f"{jsonsafe.MAX_LINE_BYTES} bytes)"
                        )
                    continue
                if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError as err:
                    if first:
                        self._bad = self._bad or (n, err.start)
                        if self._skipped is not None:
                            self._skipped.append(
                                f"{self.path}:{n}: not UTF-8 (byte {err.start}): the line was left out"
                            )
                    continue
                if not line.startswith("{"):
                    continue
                obj, why = readers.parse_record_line(line)
                if why is not None:
                    if first and self._skipped is not None:
                        self._skipped.append(f"{self.path}:{n}: not a complete JSON record ({why})")
                    continue
                if obj is None:
                    continue
                no = readers.check_row(obj)
                if no:
                    if first:
                        self._no.append((n, no))
                    continue
                count += 1
                yield readers.SourceRow(n, obj, "jsonl")
        if first and h is not None:
            self.sha, self.count, self._read = h.hexdigest(), count, True

    def finish(self) -> None:
        """After the first pass: the refused rows said; BadInput naming the file when none is usable."""
        if self._rows is not None:
            return
        if self._refused is not None:
            self._refused += [f"{self.path}:{n}: {why}; row left out" for n, why in self._no]
        if self.count:
            return
        if self._no:
            no = self._no
            raise BadInput(
                f"{self.path}: no llama-bench result rows found that are measurements: {len(no)} refused ("
                + "; ".join(f"line {n}: {why}" for n, why in no[:3])
                + (f"; and {len(no) - 3} more" if len(no) > 3 else "")
                + ")"
            )
        raise BadInput(f"{self.path}: no llama-bench result rows found; {FORMATS_HINT}")


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


def _first_format(path: Path) -> str | None:
    """The format the first line that starts one begins (llamabench_readers.format_of), from the
    file's first MiB."""
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 20)
    except OSError:
        return None
    for line in head.decode("utf-8", errors="replace").splitlines():
        fmt = readers.format_of(line)
        if fmt is not None:
            return fmt
    return None


def _source(path: Path, skipped: list[str], refused: list[str]) -> _Source:
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # read_rows names the file and the error
    if size > STREAM_ABOVE and _first_format(path) == "jsonl":
        return _Source(path, "jsonl", skipped=skipped, refused=refused)
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
    `file:line: why` (llamabench_readers.check_row); a nan stddev is recomputed from the samples
    (records.BenchRecord); rows of one set that measure the same test become repetitions of one cell.
    """
    check_options(label, model_sha256, digest)
    if not files:
        raise BadInput("no file given: name llama-bench output files to import")
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
    # pass 1: what the sets, the digest and the grouping need, row by row (a streamed file is read
    # here once for its hash and its rows, and again below to write them)
    systems_seen: dict[tuple, set[str]] = {}
    wrong: list[str] = []
    content_h = hashlib.sha256()  # of every file's bytes, in order: names the import
    seen: dict[bytes, int] = {}  # a short digest per test (TestKey less the image) -> its first row
    repeated: set[int] = set()  # the rows (file index << 32 | line) of tests that several rows measure
    for fi, src in enumerate(sources):
        for r in src.rows(content_h):
            sy = _system(r.fields)
            said_names = llamabench.backends_of(r.fields)
            systems_seen.setdefault(sy, set()).add(said_names)
            said = backends.from_llama_names(said_names)
            if backend is not None and said != "cpu" and said != backend:
                wrong.append(f"{src.path}:{r.line} (backends {said_names!r})")
            rec = _try_record(
                r,
                src,
                refused,
                image=_PASS1_IMAGE,
                run_id="",
                created="",
                model_sha256=model_sha256 or "",
                content="",
            )
            if rec is not None:
                k, here = _key_digest(rec), (fi << 32) | r.line
                first = seen.setdefault(k, here)
                if first != here:
                    repeated.update((first, here))
        src.finish()
    _backend_wrong(backend, wrong)
    content = content_h.hexdigest()
    systems = list(systems_seen)
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
    res = ImportResult(
        label,
        next(iter(sets.values())).digest if sets else "",
        [str(src.path) for src in sources],
        formats={str(src.path): src.fmt for src in sources},
        sets=list(sets.values()),
        skipped=skipped,
        refused=refused,
    )
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
    now = now or datetime.now(timezone.utc)
    run_id = f"import-{now.strftime('%Y%m%dT%H%M%SZ')}-{content[:6]}"
    created = now.isoformat(timespec="seconds")
    images = {
        sy: ImageRef(
            name=t.name,
            ref=f"import:{t.name}",
            digest=t.digest,
            backend=backend or backends.from_llama_names(",".join(sorted(systems_seen[sy]))),
            labels={"org.toolkit.imported-from": ", ".join(src.path.name for src in sources)},
        )
        for sy, t in sets.items()
    }

    def build(src: _Source, row: readers.SourceRow) -> BenchRecord | None:
        if sets[_system(row.fields)].already:
            return None
        return _try_record(
            row,
            src,
            None,  # refusals were said by pass 1
            image=images[_system(row.fields)],
            run_id=run_id,
            created=created,
            model_sha256=model_sha256 or "",
            content=content,
        )

    # pass 2: records written in batches as they are made; those of a repeated test are held until
    # their group is complete (their order and runs-disagree need every member)
    held: list[tuple[ImportedSet, BenchRecord]] = []
    batch: list[tuple[ImportedSet, BenchRecord]] = []

    def flush(items: list[tuple[ImportedSet, BenchRecord]]) -> None:
        for (target, _rec), path in zip(items, store.add_results([rec for _, rec in items]), strict=True):
            target.path = res.path = path
            target.records += 1
            res.records += 1
        items.clear()

    del seen
    for fi, src in enumerate(sources):
        lacks: set[str] = set()
        for row in src.rows(None):
            lacks.update(row.notes)
            rec = build(src, row)
            if rec is None:
                continue
            if "stddev_ts" in ((rec.model_extra or {}).get("repaired") or []):
                res.repaired.append(
                    f"{src.path}:{row.line}: stddev_ts was not finite; "
                    + (
                        f"recomputed from {len(rec.samples_ts)} samples"
                        if rec.stddev_ts is not None
                        else "left empty (fewer than 2 samples)"
                    )
                )
            item = (sets[_system(row.fields)], rec)
            if (fi << 32) | row.line in repeated:
                held.append(item)
            else:
                batch.append(item)
                if len(batch) >= store.BATCH:
                    flush(batch)
        res.per_file[str(src.path)] = src.count
        if lacks:
            res.notes.append(
                f"{src.path}: {src.fmt} output has {' and '.join(sorted(lacks))}: said on each of its rows"
            )
    flush(batch)
    res.repeated = _repetitions(held)
    flush(held)
    return res


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
        first = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise BadInput(
            f"{', '.join(str(f.path) for f in files)}: a value is not what `vllm bench` writes ({first}); "
            "import the files one by one to find it, or fix the value"
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
        where = ", ".join(f"{Path(_imported(r)['file']).name}:{_imported(r)['line']}" for r in recs)
        values = " / ".join(f"{r.avg_ts:.2f}" for r in recs if r.avg_ts is not None)
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
        name=Path(mfile).name or str(raw.get("model_type") or "unknown"),
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
