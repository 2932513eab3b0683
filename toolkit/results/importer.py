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

Reading the files is in import_read.py, rows printed again in import_repeats.py.
"""

from __future__ import annotations

import array
import errno
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from toolkit.core import backends
from toolkit.core.errors import BadInput, FileSystemError
from toolkit.results import folder_lock, telemetry_check, vllm_import
from toolkit.results.identity import (
    TestKey,
    test_key,
)
from toolkit.results.import_keys import (
    AlikeFiles,
    RowForm,
    form_of,
    is_untimed,
    key64,
    measured_parts,
    measurement_of,
    shown_key,
)
from toolkit.results.import_read import (
    PASS1_IMAGE,
    ImportedSet,
    ImportResult,
    ImportSource,
    NoneUsable,
    RowWhere,
    backend_wrong,
    check_options,
    imported_of,
    read_rows,
    reason_of,
    set_names,
    shown,
    source_of,
    system_of,
    try_record,
)
from toolkit.results.import_repeats import (
    SEQ_FIELD,
    Held,
    PerFile,
    StoredRows,
    dup_note,
    filled_body,
    fingerprints_again,
    head_of,
    line_number_of,
    live_sets,
    printed_again,
    repeated_keys,
    spilled,
)
from toolkit.results.import_said import Reasons
from toolkit.results.records import (
    IMPORTED,
    BenchRecord,
    ImageRef,
    ResultStore,
)
from toolkit.runtimes.llama_bench import md_defaults, plausible
from toolkit.runtimes.llama_bench.check import backends_of
from toolkit.runtimes.llama_bench.readers import SourceRow


@dataclass(frozen=True)
class ImportOptions:
    """What `toolkit import` was told beside the files (each None: read from the files, or unknown)."""

    label: str
    backend: str | None = None
    model_sha256: str | None = None
    digest: str | None = None
    now: datetime | None = None
    input_len: int | None = None
    output_len: int | None = None
    keep: dict[tuple, frozenset[str]] | None = None  # each model description's files (AlikeFiles), read again


@dataclass(frozen=True)
class ImportFormat:
    """One format `toolkit import` reads, behind one door: `claim(path)` answers "is this file mine?"
    (a handle for `read`, or None, reading at most the file's head); `read(store, handles, opts,
    before)` gives its records to the store and returns the ImportResult (BadInput for files it cannot
    use). `before`: the files' (size, mtime) when the import began (checked again after reading)."""

    name: str
    claim: Callable[[Path], Any]
    read: Callable[[ResultStore, list[Any], ImportOptions, list], ImportResult]


def _read_llama_bench(store: ResultStore, paths: list[Any], o: ImportOptions, before: list) -> ImportResult:
    """The llama-bench format's read (FORMATS). BadInput for --input-len / --output-len: each row says
    its own n_prompt and n_gen, so a length given for it would be silently ignored."""
    if o.input_len is not None or o.output_len is not None:
        raise BadInput(
            f"{paths[0]}: --input-len / --output-len are the lengths of a `vllm bench` result; llama-bench "
            "output says each row's n_prompt and n_gen itself: leave them out"
        )
    skipped, refused = Reasons(), Reasons()
    sources = [source_of(p, skipped, refused) for p in paths]
    try:
        with _spill(store.root) as spill, _spill(store.root) as aside:
            return _import_rows(store, sources, (spill, aside), o, skipped, refused, before)
    except AlikeFiles.Unsettled as again:  # rows said apart otherwise than all the files say: read again
        if o.keep is None:  # once: a second read that differs read files that changed in between
            return _read_llama_bench(store, paths, replace(o, keep=again.keep), before)
        raise BadInput(
            f"{', '.join(shown(str(p)) for p in paths)}: changed while it was read (two reads named other "
            "model files): nothing imported; import it once the program writing it has finished"
        ) from None
    except OSError as err:  # the spill files have no name: a full disk was said as `(unknown path)`
        if err.filename is not None or err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        where = OSError(err.errno, err.strerror, str(store.root))
        raise FileSystemError.from_oserror(where, "keeping the import's records before writing them") from err


FORMATS: tuple[ImportFormat, ...] = (
    ImportFormat(
        "`vllm bench` results",
        vllm_import.sniff,
        lambda store, files, o, _before: _import_vllm(store, files, o),
    ),
    # last: it claims every file left, and its readers refuse, file by file, what is not llama-bench's
    ImportFormat("llama-bench output", lambda path: path, _read_llama_bench),
)
"""The formats `toolkit import` reads, asked in order; the first that claims a file reads it. Adding
a format: one module with its claim and read, and one entry here (docs/architecture.md)."""


def import_files(
    store: ResultStore,
    files: list[Path],
    *,
    label: str,
    on_wait: Callable[[str], None] | None = None,
    **options: Any,
) -> ImportResult:
    """Import `files` (all of one format, FORMATS: the first format that claims each) into `store`
    under `label`; `options`: the other ImportOptions fields. The llama-bench format splits its rows by
    system (llama.cpp build, backend, GPU: each its own image name and digest, so one build never
    hides another), then appends the records.

    A file without a usable row, files of two formats, or --backend contradicting the rows, fails the
    whole import before anything is written (BadInput). Rows that are not measurements are refused one
    by one with `file:line: why` (llama_bench.validity.check_row); a nan stddev is recomputed from the
    samples (records.BenchRecord); a `toolkit measure` row whose telemetry energy contradicts its
    window keeps its speed, not its energy (telemetry_check), said in `notes`; rows of one set that
    measure the same test become repetitions of one cell. Imports into one folder run one at a time
    (results.folder_lock: a second waits, told to `on_wait(text)`).
    """
    opts = ImportOptions(label, **options)
    paths = [Path(f) for f in files]
    check_options(label, opts.model_sha256, opts.digest, paths)
    if not files:
        raise BadInput("no file given: name llama-bench output files to import")
    before = _snapshot(paths)  # checked again once every row is read
    claims = [next((fmt, h) for fmt in FORMATS if (h := fmt.claim(p)) is not None) for p in paths]
    fmt = claims[0][0]
    other = [str(p) for p, (f, _) in zip(paths, claims, strict=True) if f is not fmt]
    if other:
        raise BadInput(
            f"{', '.join(other)}: not {fmt.name}, imported together with {paths[0]} ({fmt.name}): import "
            f"{' and '.join(dict.fromkeys(f.name for f, _ in claims))} apart"
        )
    with folder_lock(store.root, on_wait):  # what was imported before is read, then written: one at a time
        return fmt.read(store, [h for _, h in claims], opts, before)


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
    sources: list[ImportSource],
    spills: tuple[IO[bytes], IO[bytes]],
    o: ImportOptions,
    skipped: Reasons,
    refused: Reasons,
    before: list[tuple[int, int] | None] | None = None,
) -> ImportResult:
    """The import of llama-bench rows in two passes over its rows, the costly work done once:

    1. every row of every file, in order, through the validity pass and into its record (with a stand-in
       image, run id and hash: none is known before every byte is read), written to `spill` as
       `<set> <file> <record JSON>`; beside it the sets (systems), the hash of the files, and a 64-bit
       digest of each record's test, which says after the last row which records measure a test
       another also measured (_Tally);
    2. the spilled records read back in order, given their set's image, the run id and the hashes, and
       appended in batches (ResultStore.add_record_lines); the records of repeated tests are held until
       every file is read, then marked as repetitions of one cell (_repetitions) and appended (_Writer).

    Memory holds a row, a batch, 8 bytes per record (the test digests) and the records of repeated tests."""
    spill, aside = spills
    md_forms = {  # the forms of this import's md rows (md is read whole: its rows are known now)
        form_of(r.fields) for src in sources if src.fmt == "md" for r in (src._rows or []) if not r.problem
    }
    with StoredRows.open(store) as before_now:  # rows imported before: left out, counted
        tally = _Tally(md_forms, before_now, AlikeFiles(o.keep))
        _pass1(sources, spill, refused, o, tally)
    if before is not None:
        _unchanged([src.path for src in sources], before)
    backend_wrong(o.backend, tally.wrong)
    content = tally.content_h.hexdigest()
    again = fingerprints_again(tally.fps)  # rows read twice in this import: left out
    # md rows that print a row of another file
    printed = printed_again(tally.shown, tally.untimed, tally.file_of, again)
    again.update(printed)
    sets = _sets(o, content, tally, again)
    res = _result_before_writing(store, o.label, sources, sets, content, tally.dup_stored, skipped, refused)
    if res.already:
        return res
    for src in sources:
        res.per_file[str(src.path)] = src.count
    gone = ImportedSet("", "", {}, already=True)  # the set of a system whose every row was left out
    by_id = [sets.get(sy, gone) for sy in tally.system_ids]
    res.repaired = [text for si, text in tally.repaired if not by_id[si].already]
    res.notes += [text for si, text in tally.energy if not by_id[si].already]
    res.notes += tally.said.notes(lambda si: not by_id[si].already)
    writer = _Writer(store, res, by_id, Held(aside), repeated_keys(tally.keys, again), tally.keys)
    told = _ReadAgain(sources, again, printed, tally)
    # the sets imported before, whose rows are not written again (a gone set's rows are all in `again`)
    stored = {si for si, t in enumerate(by_id) if t.already and t is not gone}
    wrote = _pass2(spill, sources, stored, _heads(sources, tally, by_id, o, content), content, told, writer)
    res.duplicates += told.notes()
    for fi, src in enumerate(sources):  # what a format cannot say, of the files whose rows are written
        note = f"{src.path}: {src.fmt} output has {' and '.join(sorted(src.notes))}: said on each of its rows"
        note += "".join(
            f" ({n}: {md_defaults.NOTE_REASONS[n]})"
            for n in sorted(src.notes)
            if n in md_defaults.NOTE_REASONS
        )
        if fi in wrote and src.notes and note not in res.notes:
            res.notes.append(note)
        res.notes += [f"{src.path}: {src.stopped}"] if fi in wrote and src.stopped else []
    writer.repetitions()
    return res


class _Tally:
    """What pass 1 keeps beside the spill: the systems (sets) found, the hash of the files, rows
    imported before (counted, not spilled) and a few bytes per spilled record."""

    def __init__(self, md_forms: set[RowForm], stored: StoredRows, alike: AlikeFiles) -> None:
        self.stored, self.alike = stored, alike  # alike: the model files described alike (AlikeFiles)
        self.systems_seen: dict[tuple, set[str]] = {}  # system -> the backends its rows named
        self.system_ids: dict[tuple, int] = {}  # system -> its place, in the order found
        self.wrong: list[str] = []  # rows whose GPU backend is not --backend
        self.content_h = hashlib.sha256()  # of every file's bytes, in order: names the import
        self.keys = array.array("Q")  # the test digest of each spilled record, in spill order
        self.repaired: list[tuple[int, str]] = []  # (set, what was recomputed), said for the sets written
        self.energy: list[tuple[int, str]] = []  # (set, why a `toolkit measure` row's energy was left out)
        self.said = PerFile()  # a `toolkit measure` row's block left out; a row beyond its GPU's peak
        self.dup_stored: dict[tuple[RowWhere, str], int] = {}  # ((run id, name, digest), how matched) -> rows
        self.fps = array.array("q")  # each spilled record's measurement digest (read twice: after pass 1)
        self.shown = {f: array.array("q") for f in md_forms}  # per md form, each spilled record's shown_key
        self.untimed: list[int] = []  # spill places of md rows (matched by shown_key after pass 1)
        self.file_of, self.line_of = array.array("I"), array.array("I")  # of each spilled record (md forms)
        self.set_of = array.array("I")  # of each spilled record: its system's place in system_ids

    def add_batch(
        self,
        rows: list[tuple[SourceRow, BenchRecord, bytes]],
        src: ImportSource,
        fi: int,
        backend: str | None,
    ) -> Iterator[tuple[int, bytes]]:
        """Tally the records of rows of file `fi` (in file order; those imported before asked of the
        index at once): (its set's place in system_ids, its JSON) of each record not imported before
        (those are counted, not spilled)."""
        keys = [test_key(rec) for _r, rec, _b in rows]
        parts = [measured_parts(rec) for _r, rec, _b in rows]
        fps = [measurement_of(rec, key, p) for (_r, rec, _b), key, p in zip(rows, keys, parts, strict=True)]
        md = [r.fmt == "md" and is_untimed(rec) for r, rec, _b in rows]  # matched by what they print
        was = self.stored.match(
            [
                (rec, key, fp, m, p)
                for (_r, rec, _b), key, fp, m, p in zip(rows, keys, fps, md, parts, strict=True)
            ]
        )
        for (r, rec, body), key, fp, no_time, w in zip(rows, keys, fps, md, was, strict=True):
            if w:
                self.dup_stored[w] = self.dup_stored.get(w, 0) + 1
            else:
                yield self.add(r, src, fi, rec, backend, key, fp, no_time), body

    def add(
        self,
        r: SourceRow,
        src: ImportSource,
        fi: int,
        rec: BenchRecord,
        backend: str | None,
        key: TestKey,
        fp: int,
        no_time: bool,
    ) -> int:
        """Tally the record of row `r` of file `fi` (its test key, measurement_of, whether it is an md
        table's row): its set's place in system_ids."""
        si = self._system(r, src, backend)
        self.keys.append(key64(rec, key))
        self.set_of.append(si)
        if no_time:
            self.untimed.append(len(self.fps))
        self.fps.append(fp)
        if self.shown:  # what md rows are matched on (not kept for an import without md tables)
            mine = form_of(rec.raw) if no_time else None
            for f, digests in self.shown.items():  # an md row: only in its own form
                digests.append(shown_key(rec, f) if mine is None or f == mine else 0)
            self.file_of.append(fi)
            self.line_of.append(r.line)
        if "stddev_ts" in ((rec.model_extra or {}).get("repaired") or []):
            how = (
                f"recomputed from {len(rec.samples_ts)} samples"
                if rec.stddev_ts is not None
                else "left empty (fewer than 2 samples)"
            )
            self.repaired.append(
                (si, f"{src.path}:{r.line}: stddev_ts was not a finite, non-negative number; {how}")
            )
        self.said.add(si, src, r.line, ((rec.model_extra or {}).get("imported") or {}).get("left_out"))
        if why := plausible.beyond_peak(rec.raw, rec.avg_ts):
            self.said.add(si, src, r.line, {rec.test: why}, plausible.BEYOND_PEAK)
        if rec.telemetry and (why := rec.telemetry.get("energy_refused")):
            gpus = rec.telemetry.get("gpus")
            blocks = list(gpus.values()) if isinstance(gpus, dict) else []
            reason = next(
                (str(g.get("energy_invalid_reason")) for g in blocks if isinstance(g, dict)),
                telemetry_check.REASON,
            )
            what = (
                "toolkit_telemetry contradicts itself"
                if reason == telemetry_check.REASON
                else "toolkit_telemetry claims an energy the toolkit's rules do not give its window"
            )
            self.energy.append(
                (
                    si,
                    f"{src.path}:{r.line}: {what}, its energy left out "
                    f"(energy-invalid:{reason}; the row's speed kept): {why}",
                )
            )
        return si

    def _system(self, r: SourceRow, src: ImportSource, backend: str | None) -> int:
        """The place of the row's system in system_ids (a new one numbered); a row whose GPU backend is
        not --backend noted in `wrong`."""
        sy = system_of(r.fields)
        said_names = backends_of(r.fields)
        self.systems_seen.setdefault(sy, set()).add(said_names)
        si = self.system_ids.setdefault(sy, len(self.system_ids))
        said = backends.from_llama_names(said_names, r.fields.get("devices"))
        if backend is not None and said not in ("cpu", "unknown") and said != backend:
            self.wrong.append(f"{src.path}:{r.line} (backends {said_names!r})")
        return si


_BATCH = 32
"""Rows of pass 1 asked of the index at once (rows imported before): one query each, a batch in
memory (256 rows held together cost 15 % more CPU than 16 on an import into an empty folder)."""


def _pass1(
    sources: list[ImportSource], spill: IO[bytes], refused: Reasons, o: ImportOptions, tally: _Tally
) -> None:
    """Pass 1: every row of every file, in order, into its pass-1 record (try_record: refused rows said
    in `refused`), tallied, and spilled as `<set> <file> <spilled record>` unless imported before."""

    def tally_batch(batch: list, src: ImportSource, fi: int) -> None:
        for si, body in tally.add_batch(batch, src, fi, o.backend):
            spill.write(b"%d %d %s\n" % (si, fi, spilled(body)))
        batch.clear()

    for fi, src in enumerate(sources):
        batch: list[tuple[SourceRow, BenchRecord, bytes]] = []
        for r in src.rows(tally.content_h):
            sha = o.model_sha256 or ""
            made = try_record(
                r, src, refused, image=PASS1_IMAGE, run_id="", created="", model_sha256=sha, content=""
            )
            if made is not None:
                rec = tally.alike.apart(made[0])  # a model file described as another kept: its own model
                batch.append((r, *(made if rec is made[0] else (rec, rec.model_dump_json().encode()))))
                if len(batch) == _BATCH:
                    tally_batch(batch, src, fi)
        tally_batch(batch, src, fi)
        src.finish()
    tally.alike.settle()


def _sets(o: ImportOptions, content: str, tally: _Tally, again: dict[int, int]) -> dict[tuple, ImportedSet]:
    """The set of each system with a row left to write (an md table's may have none), named by
    set_names, its digest --digest or `import:<hash of the files [+ system]>`; BadInput for one
    --digest over several systems."""
    live = live_sets(tally.set_of, again)
    systems = [sy for sy in tally.systems_seen if tally.system_ids[sy] in live]
    if o.digest and len(systems) > 1:
        raise BadInput(
            f"--digest {o.digest}: the files hold {len(systems)} builds/backends/GPUs "
            f"({'; '.join(', '.join(f'{k}={v}' for k, v in s) for s in systems)}); import each "
            "with its own --digest, or leave --digest out to file each under its own"
        )
    sets = {}
    for sy, name in zip(systems, set_names(o.label, systems), strict=True):
        d = o.digest or (
            IMPORTED
            + (content if len(systems) == 1 else hashlib.sha256((content + repr(sy)).encode()).hexdigest())
        )
        sets[sy] = ImportedSet(name, d, dict(sy))
    return sets


def _result_before_writing(
    store: ResultStore,
    label: str,
    sources: list[ImportSource],
    sets: dict[tuple, ImportedSet],
    content: str,
    dup_stored: dict[tuple[RowWhere, str], int],
    skipped: Reasons,
    refused: Reasons,
) -> ImportResult:
    """The import's result before a record is written, each set marked `already` when the store holds
    it (named as stored: that is the name report and compare know it by); `already` when every row or
    every set was imported before. BadInput when every row was refused after its reader counted it
    (e.g. a lone surrogate)."""
    res = ImportResult(
        label,
        next(iter(sets.values())).digest if sets else "",
        [str(src.path) for src in sources],
        formats={str(src.path): src.fmt for src in sources},
        sets=list(sets.values()),
        skipped=skipped,
        refused=refused,
        duplicates=[dup_note(n, *where, how) for (where, how), n in sorted(dup_stored.items())],
    )
    if not sets and not dup_stored:
        raise NoneUsable(", ".join(str(src.path) for src in sources), refused)
    if not sets:  # every row was imported before: named as stored
        res.sets = [
            ImportedSet(name, d, {}, already=True) for ((_r, name, d), _h) in dict.fromkeys(dup_stored)
        ]
        res.digest = res.sets[0].digest if res.sets else ""
        res.already = True
        return res
    known = _stored_names(store, [s_.digest for s_ in sets.values()])
    for s_ in sets.values():
        s_.already = (s_.digest, content) in known
        if s_.already:
            s_.name = known[(s_.digest, content)]
    res.already = all(s_.already for s_ in sets.values())
    return res


def _stored_names(store: ResultStore, digests: list[str]) -> dict[tuple[str, Any], str]:
    """{(image digest, hash of the files imported): image name} of the store's records of `digests`."""
    from toolkit.results import (
        index as resultindex,  # only the records of these digests, through the query index
    )

    return {
        (r.image.digest, (r.model_extra or {}).get("imported", {}).get("sha256")): r.image.name
        for r in resultindex.select(store, digests=digests, skew=False)
    }


def _run_of(now: datetime | None, content: str) -> tuple[str, str]:
    """The run id and `created` of an import at `now` (None: now) of files whose hash is `content`."""
    now = now or datetime.now(timezone.utc)
    return f"import-{now.strftime('%Y%m%dT%H%M%SZ')}-{content[:6]}", now.isoformat(timespec="seconds")


def _heads(
    sources: list[ImportSource], tally: _Tally, by_id: list[ImportedSet], o: ImportOptions, content: str
) -> list[bytes]:
    """Per system (its place in system_ids), the head its records start with (head_of): the import's
    run id and time, and its set's image (its backend --backend, else what its rows named)."""
    run_id, created = _run_of(o.now, content)
    return [
        head_of(
            run_id,
            created,
            ImageRef(
                name=t.name,
                ref=f"{IMPORTED}{t.name}",
                digest=t.digest,
                backend=o.backend
                or backends.from_llama_names(
                    ",".join(sorted(tally.systems_seen[sy])), dict(sy).get("devices")
                ),
                labels={"org.toolkit.imported-from": ", ".join(src.path.name for src in sources)},
            ),
        )
        for sy, t in zip(tally.system_ids, by_id, strict=True)
    ]


class _Writer:
    """Pass 2's records appended in batches (ResultStore.add_record_lines), each counted in its set
    and in `res`; those of tests several records measure (`repeated`, places in the spill) held aside
    (`held`) until every record is read, then marked as repetitions and appended (`repetitions`)."""

    def __init__(
        self,
        store: ResultStore,
        res: ImportResult,
        by_id: list[ImportedSet],
        held: Held,
        repeated: set[int],
        keys: array.array,
    ) -> None:
        self.store, self.res, self.by_id = store, res, by_id
        self.held, self.repeated, self.keys = held, repeated, keys
        self.batch: list[tuple[str, bytes, bytes]] = []
        self.targets: list[ImportedSet] = []

    def write(self, i: int, si: int, head: bytes, tail: bytes) -> None:
        """Spilled record `i` of set `si` (its JSON cut where its seq goes): appended, or held."""
        if i in self.repeated:
            self.held.add(si, self.keys[i], head + b"0" + tail)
        else:
            self.put(self.by_id[si], head, tail)

    def put(self, target: ImportedSet, head: bytes, tail: bytes) -> None:
        self.batch.append((target.digest, head, tail))
        self.targets.append(target)
        if len(self.batch) >= self.store.BATCH:
            self.flush()

    def flush(self) -> None:
        for target, path in zip(self.targets, self.store.add_record_lines(self.batch), strict=True):
            target.path = self.res.path = path
            target.records += 1
            self.res.records += 1
        self.batch.clear()
        self.targets.clear()

    def repetitions(self) -> None:
        """After every spilled record: the held ones grouped, marked and appended, in file order."""
        self.res.repeated, self.res.repeated_tests = self.held.group(self.by_id)
        for si, line in self.held.lines():
            at = line.rfind(SEQ_FIELD)
            self.put(self.by_id[si], line[:at] + b',"seq":', line[at + len(SEQ_FIELD) :])
        self.flush()


class _ReadAgain:
    """The rows pass 2 leaves out as read before in this import (`again`: {place: place of the first};
    `printed`: md rows that print another file's row), counted per (file, file of the first, md) with
    an example, for `notes`."""

    def __init__(
        self, sources: list[ImportSource], again: dict[int, int], printed: dict[int, int], tally: _Tally
    ) -> None:
        self.sources, self.again, self.printed = sources, again, printed
        self.file_of, self.line_of = tally.file_of, tally.line_of
        self.firsts = dict.fromkeys(again.values(), "")  # spill index -> file:line of a row read again later
        # (file, file of the first, md) -> [rows, an example]
        self.seen: dict[tuple[str, str, bool], list] = {}

    def left_out(self, i: int, fi: int, body: bytes) -> bool:
        """Whether spilled record `i` (of file `fi`) is left out as read before (then counted)."""
        if i in self.firsts:
            self.firsts[i] = f"{self.sources[fi].path}:{line_number_of(body)}"
        if i not in self.again:
            return False
        j = self.again[i]
        first = self.firsts.get(j) or (  # an md row before the row it prints: its place, kept when md_here
            f"{self.sources[self.file_of[j]].path}:{self.line_of[j]}" if j < len(self.file_of) else "?"
        )
        pair = (str(self.sources[fi].path), first.rsplit(":", 1)[0], i in self.printed)
        seen = self.seen.setdefault(pair, [0, f"{pair[0]}:{line_number_of(body)} = {first}"])
        seen[0] += 1
        return True

    def notes(self) -> list[str]:
        return [
            f"{n} row(s) of {f} print measurements this import reads in full from {first} (e.g. {eg}): left out"
            if md
            else f"{n} row(s) of {f} are measurements read before in this import, from {first} (e.g. {eg}): left out"
            for (f, first, md), (n, eg) in self.seen.items()
        ]


def _pass2(
    spill: IO[bytes],
    sources: list[ImportSource],
    stored: set[int],
    heads: list[bytes],
    content: str,
    told: _ReadAgain,
    writer: _Writer,
) -> set[int]:
    """Pass 2: the spilled records read back in order, those of `stored` sets (imported before) and
    those read before in this import (`told`) left out, the others filled in (their set's head, their
    file's and the import's hashes) and written; returns the files (places) a record is written from."""
    holes = [b'"file_sha256":"%s","sha256":"%s"' % (src.sha.encode(), content.encode()) for src in sources]
    wrote: set[int] = set()
    spill.seek(0)
    for i, line in enumerate(spill):
        si_b, fi_b, at_seq, at_holes, body = line[:-1].split(b" ", 4)
        si, fi = int(si_b), int(fi_b)
        if si in stored or told.left_out(i, fi, body):
            continue
        wrote.add(fi)
        head, tail = filled_body(body, int(at_seq), int(at_holes), heads[si], holes[fi])
        writer.write(i, si, head, tail)
    writer.flush()
    return wrote


def _import_vllm(store: ResultStore, files: list[vllm_import.VllmFile], o: ImportOptions) -> ImportResult:
    """`vllm bench latency | serve | throughput` result files (results/vllm_import.py): one set, records
    with the runner's methods, axes and units; a served result that generated fewer tokens than asked
    is a failed record saying so. BadInput naming a file whose lengths are unknown. A file of several
    runs (SGLang's bench_serving appends one JSON line per run) gives one record per run."""
    files = [run for f in files for run in vllm_import.each_run(f)]
    for f in files:
        vllm_import.resolve_lengths(f, o.input_len, o.output_len)
    # the lengths are part of what was imported: the same file re-imported with corrected lengths is a
    # new import, not "imported before"
    lengths = repr([(f.input_len, f.output_len) for f in files]).encode()
    content = hashlib.sha256(b"".join(f.data for f in files) + lengths).hexdigest()
    d = o.digest or f"{IMPORTED}{content}"
    s_ = ImportedSet(o.label, d, {"runner": ",".join(dict.fromkeys(f.tool for f in files))})
    res = ImportResult(
        o.label,
        d,
        list(dict.fromkeys(str(f.path) for f in files)),
        formats={str(f.path): vllm_import.format_of(f) for f in files},
        sets=[s_],
    )
    known = _stored_names(store, [d])
    if (d, content) in known:
        s_.already = res.already = True
        s_.name = known[(d, content)]
        return res
    image = ImageRef(
        name=o.label,
        ref=f"{IMPORTED}{o.label}",
        digest=d,
        backend=o.backend or "unknown",
        labels={"org.toolkit.imported-from": ", ".join(f.path.name for f in files)},
    )
    try:
        recs = _vllm_records(files, image, o.now, content, o.model_sha256)
    except (TypeError, ValueError, OverflowError, KeyError, AttributeError) as err:
        # a value of the wrong type or size in one of the files (pydantic's ValidationError is a ValueError)
        first = reason_of(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise BadInput(
            f"{', '.join(str(f.path) for f in files)}: a value is not what `vllm bench` writes ({first}); "
            + (
                "import the files one by one to find it, or fix the value"
                if len(files) > 1
                else "fix the value"
            )
        ) from None
    return _finish_vllm(store, res, recs, files, o.backend)


def _vllm_records(
    files: list[vllm_import.VllmFile],
    image: ImageRef,
    now: datetime | None,
    content: str,
    model_sha256: str | None,
) -> list[BenchRecord]:
    run_id, created = _run_of(now, content)
    return vllm_import.records(
        files,
        image=image,
        run_id=run_id,
        created=created,
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
        res.per_file[imported_of(rec)["file"]] = res.per_file.get(imported_of(rec)["file"], 0) + 1
        if rec.status == "failed":
            res.failed.append(f"{imported_of(rec)['file']}: {rec.test}: {rec.error}")
    res.notes += [n for f in files for n in f.notes]
    if backend is None:
        who = "SGLang" if all(f.tool == "sglang" for f in files) else "vLLM"
        res.notes.append(
            f"{who} results do not say the backend: filed as `unknown`; give --backend "
            f"{', '.join(backends.IMAGE_BACKENDS[:-1])} or {backends.IMAGE_BACKENDS[-1]} when it ran on one "
            "of these (another, e.g. CUDA, has no --backend: it stays `unknown`)"
        )
    if any(f.kind == "latency" for f in files):
        res.notes.append(
            "`vllm bench latency` results do not say their batch size: taken as 1 (the toolkit runs --batch-size 1)"
        )
    for path in store.add_results(recs):
        s_.path = res.path = path
        s_.records += 1
        res.records += 1
    return res
