"""llama-bench output made elsewhere --import--> BenchRecords in results/, beside container runs.

A bare-metal run or someone's published run (`-o jsonl`, `-o json` — also the truncated array a
crashed run leaves —, or `-o csv`, any llama.cpp vintage; bare `nan`/`-nan`/`inf` tokens included)
is parsed with the same parser as `toolkit bench` (llamabench.parse_any + normalize) and filed
under an image reference per system found in the files (llama.cpp build_commit/build_number,
backends, gpu_info): name = the user's label (`label.<build>` when the files hold several),
digest = `import:<sha256 of the files' bytes [+ system]>` (or a given one). The raw rows are kept
(non-finite floats as null). Importing the same files again adds nothing.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolkit.core import backends
from toolkit.core.errors import BadInput
from toolkit.results import llamabench_format as llamabench
from toolkit.results.identity import TestKey, test_key
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
    """What an import did: `sets` one per build/backend/GPU found in the files; `refused` rows whose
    numbers are not measurements (`file:row: why`); `repaired` rows whose nan stddev was recomputed;
    `collisions` rows that measure a test another row of the same set also measured."""

    label: str
    digest: str
    files: list[str]
    records: int = 0
    already: bool = False  # every set was imported before: nothing added
    path: Path | None = None
    per_file: dict[str, int] = field(default_factory=dict)
    sets: list[ImportedSet] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    collisions: list[str] = field(default_factory=list)


def read_rows(path: Path, skipped: list[str] | None = None) -> tuple[bytes, list[dict[str, Any]]]:
    """The file's bytes and its llama-bench rows; BadInput naming the file and what was wrong.
    Lines that look like records but do not parse are noted in `skipped` as `file: line N: why`."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise BadInput(f"{path}: cannot read it ({err.strerror or err})") from err
    text, bad = _decode_lines(data)
    notes: list[str] = [f"line {n}: not UTF-8 (byte {b}): the line was left out" for n, b in bad]
    parsed = llamabench.parse_any(text, notes)
    rows = [r for r in parsed if not _not_a_result(r)]
    if skipped is not None:
        skipped += [f"{path}: {n}" for n in notes]
        skipped += [
            f"{path}: row {i}: {why}, left out" for i, r in enumerate(parsed, 1) if (why := _not_a_result(r))
        ]
    if not rows and bad:
        n, b = bad[0]
        raise BadInput(
            f"{path}: not a text file (line {n}, byte {b} is not UTF-8) and no llama-bench result rows in "
            "it; expected llama-bench -o jsonl, -o json or -o csv output"
        )
    if not rows:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        hint = (
            "a markdown table (-o md) has no machine-readable fields: re-run llama-bench with -o jsonl"
            if first.startswith("|")
            else "expected llama-bench -o jsonl, -o json or -o csv output "
            "with n_prompt/n_gen and avg_ts fields"
        )
        raise BadInput(
            f"{path}: no llama-bench result rows found ({hint}); the file starts with {first[:80]!r}"
            if first
            else f"{path}: the file is empty; {hint}"
        )
    return data, rows


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


def _not_a_result(row: dict[str, Any]) -> str | None:
    """Why a parsed row is not a llama-bench result (None when it is): both token counts and a
    tok/s (avg_ts, or avg_ns to derive it) must be there; a missing count is never taken as 0."""
    missing = [k for k in ("n_prompt", "n_gen") if row.get(k) in (None, "")]
    if missing:
        return f"no {' and no '.join(missing)}"
    if row.get("avg_ts") in (None, "") and row.get("avg_ns") in (None, ""):
        return "no avg_ts or avg_ns (a cut-off row?)"
    return None


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
    return tuple((k, row.get(k)) for k in SYSTEM_SPLIT if row.get(k) not in (None, ""))


def _set_names(label: str, systems: list[tuple]) -> list[str]:
    """`label` for one system; else `label.<what differs>` (build commit, backend, GPU), made unique."""
    if len(systems) == 1:
        return [label]
    varying = [k for k in SYSTEM_SPLIT if len({dict(s).get(k) for s in systems}) > 1]
    names = []
    for s in systems:
        d = dict(s)
        part = "-".join(
            re.sub(r"[^A-Za-z0-9_.+-]+", "-", str(d.get(k, "none")))[:24].strip("-") for k in varying[:2]
        )
        names.append(f"{label}.{part or 'set'}")
    for i, n in enumerate(names):  # still equal after shortening: number them
        if names.count(n) > 1:
            names[i] = f"{n}.{i + 1}"
    return names


def import_files(
    store: ResultStore,
    files: list[Path],
    *,
    label: str,
    backend: str | None = None,
    model_sha256: str | None = None,
    digest: str | None = None,
    now: datetime | None = None,
) -> ImportResult:
    """Parse every file, split the rows by system (llama.cpp build, backend, GPU: each its own image
    name and digest, so one build never hides another), then append the records.

    Malformed files fail the whole import before anything is written (BadInput). Rows whose tok/s
    are not finite are refused one by one with the reason; a nan stddev is recomputed from the
    samples (records.BenchRecord); rows of one set that measure the same test are reported.
    """
    check_options(label, model_sha256, digest)
    if not files:
        raise BadInput("no file given: name llama-bench output files to import")
    skipped: list[str] = []
    parsed = [(Path(f), *read_rows(Path(f), skipped)) for f in files]
    content = hashlib.sha256(b"".join(data for _, data, _ in parsed)).hexdigest()
    systems = list(dict.fromkeys(_system(row) for _, _, rows in parsed for row in rows))
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
        [str(p) for p, _, _ in parsed],
        sets=list(sets.values()),
        skipped=skipped,
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
    staged: list[tuple[ImportedSet, BenchRecord]] = []  # malformed rows fail the import before any write
    for path, data, rows in parsed:
        file_sha = hashlib.sha256(data).hexdigest()  # once per file, not per row
        sys_rows = [(sets[_system(row)], row) for row in rows]
        backends = {
            s_.digest: backend or backend_of([r for t, r in sys_rows if t is s_]) for s_ in sets.values()
        }
        for n, (target, row) in enumerate(sys_rows, 1):
            if target.already:
                continue
            image = ImageRef(
                name=target.name,
                ref=f"import:{target.name}",
                digest=target.digest,
                backend=backends[target.digest],
                labels={"org.toolkit.imported-from": ", ".join(p.name for p, _, _ in parsed)},
            )
            try:
                rec = _record(
                    row,
                    image=image,
                    run_id=run_id,
                    created=now.isoformat(timespec="seconds"),
                    model_sha256=model_sha256 or "",
                    source=path,
                    file_sha=file_sha,
                    content=content,
                )
            except ValidationError as err:
                msg = err.errors()[0]["msg"] if err.errors() else str(err)
                if "not a measurement" in msg:
                    res.refused.append(f"{path}: row {n}: {msg.removeprefix('Value error, ')}")
                    continue
                raise BadInput(f"{path}: row {n}: not a usable llama-bench record ({msg[:160]})") from None
            except (ValueError, TypeError, OverflowError) as err:
                raise BadInput(
                    f"{path}: row {n}: not a usable llama-bench record ({str(err)[:160]})"
                ) from None
            _check_counts(path, n, rec)
            if "stddev_ts" in ((rec.model_extra or {}).get("repaired") or []):
                res.repaired.append(
                    f"{path}: row {n}: stddev_ts was not finite; "
                    + (
                        f"recomputed from {len(rec.samples_ts)} samples"
                        if rec.stddev_ts is not None
                        else "left empty (fewer than 2 samples)"
                    )
                )
            staged.append((target, rec))
        res.per_file[str(path)] = len(rows)
    seen: dict[TestKey, str] = {}
    for target, rec in staged:
        k = test_key(rec)
        where = f"{(rec.model_extra or {})['imported']['file']} ({rec.test})"
        if k in seen:
            res.collisions.append(
                f"{target.name}: {where} measures the same test as {seen[k]}; reports show the newest"
            )
        seen.setdefault(k, where)
    for target, rec in staged:
        target.path = res.path = store.add_result(rec)
        target.records += 1
        res.records += 1
    return res


def _check_counts(path: Path, n: int, rec: BenchRecord) -> None:
    """Reject rows whose token counts cannot be a test (negative sizes)."""
    for key in ("n_prompt", "n_gen", "n_depth"):
        if getattr(rec, key) < 0:
            raise BadInput(f"{path}: row {n}: {key} is {getattr(rec, key)}; expected >= 0")


def _record(
    row: dict[str, Any],
    *,
    image: ImageRef,
    run_id: str,
    created: str,
    model_sha256: str,
    source: Path,
    file_sha: str,
    content: str,
) -> BenchRecord:
    norm = llamabench.normalize(row)
    norm["avg_ts"] = _avg_ts(row, norm)
    mfile = str(row.get("model_filename") or "")
    model = ModelRef(
        name=Path(mfile).name or str(row.get("model_type") or "unknown"),
        path=mfile,
        sha256=model_sha256,
        size_bytes=int(llamabench._int(row.get("model_size"), 0) or 0),
    )
    return BenchRecord(
        run_id=run_id,
        created=created,
        status="ok",
        runner="llama-bench",
        method="llama-bench",
        image=image,
        model=model,
        raw=row,
        **norm,
        imported={"file": str(source), "file_sha256": file_sha, "sha256": content},
    )
