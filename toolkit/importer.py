"""llama-bench output made elsewhere --import--> BenchRecords in results/, beside container runs.

A bare-metal run or someone's published run (`-o jsonl`, `-o json` — also the truncated array a
crashed run leaves —, or `-o csv`, any llama.cpp vintage) is parsed with the same tolerant parser
as `toolkit bench` (llamabench.parse_any + normalize) and filed under an image reference:
name = the user's label, digest = `import:<sha256 of the files' bytes>` (or a given one). The
raw rows are kept unchanged. Importing the same files again under the same digest adds nothing.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from toolkit import llamabench
from toolkit.errors import BadInput
from toolkit.records import BenchRecord, ImageRef, ModelRef, ResultStore, short_digest

BACKEND_OF_LLAMA = {
    "rocm": "rocm",
    "hip": "rocm",
    "vulkan": "vulkan",
    "cpu": "cpu",
    "blas": "cpu",
    "cuda": "cuda",
    "metal": "metal",
    "sycl": "sycl",
}
_DIGEST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*(:[A-Za-z0-9_.+-]+)*")
_SHA_RE = re.compile(r"[0-9a-f]{64}")


@dataclass
class ImportResult:
    label: str
    digest: str
    files: list[str]
    records: int = 0
    already: bool = False  # the same files were imported under this digest before
    path: Path | None = None
    per_file: dict[str, int] = field(default_factory=dict)


def read_rows(path: Path) -> tuple[bytes, list[dict[str, Any]]]:
    """The file's bytes and its llama-bench rows; BadInput naming the file and what was wrong."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise BadInput(f"{path}: cannot read it ({err.strerror or err})") from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(
            f"{path}: not a text file (byte {err.start} is not UTF-8); expected llama-bench "
            "-o jsonl, -o json or -o csv output"
        ) from err
    rows = [r for r in llamabench.parse_any(text) if _is_result(r)]
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


def _is_result(row: dict[str, Any]) -> bool:
    return ("avg_ts" in row or "avg_ns" in row) and ("n_prompt" in row or "n_gen" in row)


def _avg_ts(row: dict[str, Any], norm: dict[str, Any]) -> float | None:
    """avg_ts, or from avg_ns for rows that lack it: tokens ÷ mean seconds."""
    if norm["avg_ts"] is not None:
        return norm["avg_ts"]
    ns = llamabench._float(row.get("avg_ns"))
    tokens = norm["n_prompt"] + norm["n_gen"]
    return tokens * 1e9 / ns if ns and tokens else None


def backend_of(rows: list[dict[str, Any]]) -> str:
    """Image backend from the rows' `backends` (ROCm -> rocm, Vulkan -> vulkan, else cpu)."""
    names = {n.strip().lower() for r in rows for n in llamabench.backends_of(r).split(",") if n.strip()}
    for pref in ("rocm", "hip", "vulkan", "cuda", "metal", "sycl"):
        if pref in names:
            return BACKEND_OF_LLAMA[pref]
    return "cpu"


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
    """Parse every file (all must be valid before anything is written), then append the records."""
    check_options(label, model_sha256, digest)
    if not files:
        raise BadInput("no file given: name llama-bench output files to import")
    parsed = [(Path(f), *read_rows(Path(f))) for f in files]
    content = hashlib.sha256(b"".join(data for _, data, _ in parsed)).hexdigest()
    digest = digest or f"import:{content}"
    res = ImportResult(label, digest, [str(p) for p, _, _ in parsed])
    if any(
        r.image.digest == digest and (r.model_extra or {}).get("imported", {}).get("sha256") == content
        for r in store.results()
    ):
        res.already = True
        return res
    all_rows = [row for _, _, rows in parsed for row in rows]
    image = ImageRef(
        name=label,
        ref=f"import:{label}",
        digest=digest,
        backend=backend or backend_of(all_rows),
        labels={"org.toolkit.imported-from": ", ".join(p.name for p, _, _ in parsed)},
    )
    now = now or datetime.now(timezone.utc)
    run_id = f"import-{now.strftime('%Y%m%dT%H%M%SZ')}-{content[:6]}"
    staged = []  # every row is checked before anything is written: an import is all or nothing
    for path, data, rows in parsed:
        for n, row in enumerate(rows, 1):
            try:
                rec = _record(
                    row,
                    image=image,
                    run_id=run_id,
                    created=now.isoformat(timespec="seconds"),
                    model_sha256=model_sha256 or "",
                    source=path,
                    file_sha=hashlib.sha256(data).hexdigest(),
                    content=content,
                )
            except (ValueError, TypeError, OverflowError) as err:
                raise BadInput(f"{path}: row {n}: not a usable llama-bench record ({str(err)[:160]})") from None
            _check_finite(path, n, rec)
            staged.append(rec)
        res.per_file[str(path)] = len(rows)
    for rec in staged:
        res.path = store.add_result(rec)
        res.records += 1
    return res


def _check_finite(path: Path, n: int, rec: BenchRecord) -> None:
    """Reject rows whose numbers cannot be a measurement (NaN, inf, negative sizes)."""
    import math

    nums = {"avg_ts": rec.avg_ts, "stddev_ts": rec.stddev_ts, **{f"samples_ts[{i}]": v for i, v in enumerate(rec.samples_ts)}}
    for key, v in nums.items():
        if v is not None and (not math.isfinite(v) or v < 0):
            raise BadInput(f"{path}: row {n}: {key} is {v!r}; expected a finite tokens/s >= 0")
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
