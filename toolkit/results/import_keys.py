"""What identifies an imported measurement, whatever format it came in: the digests `toolkit import`
groups rows by (key64), finds a row measured again by (measurement_of, measured_digest) and matches
an `-o md` table's row with the row of another format it prints (shown_key, in the row's form:
form_of), and what the query index keeps of an imported record to find those without reading the
folder (stored_digests). Python's hash where one process compares; index.digest64 where the index
keeps it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from toolkit.core import backends
from toolkit.results.identity import TestKey, model_fingerprint, norm_field, test_key
from toolkit.results.index import digest64
from toolkit.results.records import BenchRecord
from toolkit.runtimes.llama_bench import check


def key64(rec: BenchRecord, key: TestKey | None = None) -> int:
    """A 64-bit digest of the record's TestKey less its image (the sets' digests are not known while
    the files are read; the system fields that split sets are part of the key, so the grouping is the
    same): Python's hash of it, stable within the one process that groups. Equal tests give equal
    digests; two tests that share one by chance are told apart again by the exact grouping in
    _repetitions."""
    key = key or test_key(rec)
    return hash((key.system, key.model, key.model_sha, key.test)) & 0xFFFF_FFFF_FFFF_FFFF


def measurement_of(rec: BenchRecord, key: TestKey | None = None, parts: tuple | None = None) -> int:
    """A 64-bit digest of what makes a row one measurement, whatever the format it came in (jsonl, json,
    csv, sql: a row read twice, or imported before under any digest, is the same): its test (TestKey
    less the image), llama-bench's test_time and avg_ns (csv has no samples) and its tok/s to 2
    decimals; a row with neither test_time nor avg_ns (md) also its stddev to 2 decimals (the `± sd`
    it prints). Python's hash: the same within one process (stored_digests: what the index keeps).
    `parts`: measured_parts(rec) where the caller has it."""
    key = key or test_key(rec)
    return hash((key.system, key.model, key.test, *(parts or measured_parts(rec))))


def measured_parts(rec: BenchRecord) -> tuple:
    """The values measurement_of digests beside the test: test_time, avg_ns, tok/s to 2 decimals, and
    an md row's `± sd` (its stddev to 2 decimals: all it has)."""
    raw = rec.raw
    sd = check.as_float(raw.get("stddev_ts")) if is_untimed(rec) else None
    return (
        str(raw.get("test_time")),
        check.as_float(raw.get("avg_ns")),
        round(rec.avg_ts, 2) if rec.avg_ts is not None else None,
        f"{sd:.2f}" if sd is not None else None,
    )


def is_untimed(rec: BenchRecord) -> bool:
    """A row without llama-bench's test_time and avg_ns (an `-o md` table's): measurement_of cannot tell
    it from another measurement of its test, so it is matched by what it shows (shown_key)."""
    raw = rec.raw
    return raw.get("test_time") in (None, "") and raw.get("avg_ns") is None


_MD_SETTINGS = (check.INT_FIELDS | check.BOOL_FIELDS | check.STRING_FIELDS) - {
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


RowForm = tuple[frozenset[str], bool]
"""How an md row is matched: the setting columns its table printed, and whether it has a build line."""


def form_of(raw: dict[str, Any]) -> RowForm:
    """An md row's form (its fields, or its record's raw): the settings its table shows as columns,
    and whether its `build:` line gave a commit."""
    return frozenset(k for k in raw if k in _MD_SETTINGS), bool(raw.get("build_commit"))


def shown_parts(rec: BenchRecord) -> tuple:
    """What an md table shows of a measurement in every form (shown_key less the form's columns)."""
    raw = rec.raw
    sd = check.as_float(raw.get("stddev_ts"))
    return (
        str(raw.get("model_type") or ""),
        backends.from_llama_names(check.backends_of(raw)),
        _counts(rec),
        f"{rec.avg_ts:.2f}" if rec.avg_ts is not None else None,
        f"{sd:.2f}" if sd is not None else None,
    )


def stored_digests(rec: BenchRecord, key: TestKey | None = None) -> tuple[int, int, int]:
    """What the query index keeps of an imported record to find the stored records a row may measure again
    without reading the folder (results/index.py StoredImports): (measured_digest: equal measurement_of, equal
    digest; the whole test is compared on the records read back), a 64-bit digest of what an md table shows of
    it in every form (shown_keys), 1 for an md table's row else 0). Signed 64-bit, the same in every process
    (index.digest64)."""
    key = key or test_key(rec)
    return measured_digest(rec), digest64(shown_parts(rec)), int(is_untimed(rec))


def measured_digest(rec: BenchRecord, parts: tuple | None = None) -> int:
    """The first of stored_digests: measured_parts (`parts` where the caller has them) and the test's
    n_prompt, n_gen, n_depth (rows of one test_time and tok/s that differ only in depth are not read
    back for each other); ~2 µs a row."""
    return digest64((*_counts(rec), *(parts or measured_parts(rec))))


def _counts(rec: BenchRecord) -> tuple:
    """The test's n_prompt, n_gen, n_depth: those of its TestKey (identity._test_fields takes them from
    the record's fields; None there is a count the key leaves out), without reading the key's fields."""
    return rec.n_prompt, rec.n_gen, rec.n_depth


def shown_key(rec: BenchRecord, form: RowForm) -> int:
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
    settings, build = form
    return hash(
        (
            *shown_parts(rec),
            tuple((k, norm_field(k, raw.get(k))) for k in sorted(settings)),
            str(raw.get("build_commit") or "")[:7].lower() if build else None,
        )
    )


class AlikeFiles:
    """The model files one import's rows name, by llama-bench's description of each (model_fingerprint): `-m
    a.gguf -m b.gguf` of two models of one type, size and parameter count are two models, as the file says.
    The file of the least name (then path) of a description keeps it; the rows of each other file carry the
    file's name in their model identity (ModelRef `file_apart`), or its path where another file of the
    description has that name, so they are another row of the tables, never repetitions of the first's. Where
    the rows read so far said otherwise, `settle` asks for them to be read again with every file known
    (`keep`: description -> the paths of its files)."""

    class Unsettled(Exception):
        """The rows of a file were given another identity than every row's files give it (`keep`: the
        paths of each description's files): read them again with AlikeFiles(keep)."""

        def __init__(self, keep: dict[tuple, frozenset[str]]) -> None:
            super().__init__("read again")
            self.keep = keep

    def __init__(self, keep: dict[tuple, frozenset[str]] | None = None) -> None:
        self.paths = {fp: set(ps) for fp, ps in (keep or {}).items()}  # description -> its files' paths
        self.said: dict[tuple, dict[str, str]] = {}  # description -> path -> its file_apart ("": keeps it)

    @staticmethod
    def _apart_as(path: str, paths: set[str]) -> str:
        """ "" where `path` keeps its description (the least of `paths` by name, then path), else its
        name, or `path` where another of `paths` has that name."""
        if path == min(paths, key=lambda p: (Path(p).name, p)):
            return ""
        name = Path(path).name
        return path if sum(Path(p).name == name for p in paths) > 1 else name

    def apart(self, rec: BenchRecord) -> BenchRecord:
        """`rec` (an imported record), or a copy whose model names its file where another file of the
        same description keeps it. Rows without a file name (md) are kept."""
        if not Path(rec.model.path or "").name:
            return rec
        path, fp = os.path.normpath(rec.model.path or ""), model_fingerprint(rec)
        paths = self.paths.setdefault(fp, set())
        paths.add(path)
        said = self.said.setdefault(fp, {}).setdefault(path, self._apart_as(path, paths))
        return (
            rec.model_copy(update={"model": rec.model.model_copy(update={"file_apart": said})})
            if said
            else rec
        )

    def settle(self) -> None:
        """After every row: raise Unsettled where a file's rows were given another identity than every
        row's files give it (a file of a lesser name, or another of its name, came later)."""
        if any(x != self._apart_as(p, self.paths[fp]) for fp, d in self.said.items() for p, x in d.items()):
            raise AlikeFiles.Unsettled({fp: frozenset(ps) for fp, ps in self.paths.items()})
