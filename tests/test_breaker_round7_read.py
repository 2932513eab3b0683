"""A tester's seventh round, on reading results: a line of gigabytes held whole in memory, an index
whose values are of the wrong type or point outside its file, and `measure` of a program that cannot
be started. Each test is the reproducer of one finding and fails on the code before its fix."""

from __future__ import annotations

import io
import os
import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from tests.support.project import DATA
from tests.support.runs import tk
from toolkit.analysis import compare
from toolkit.core import jsonsafe
from toolkit.core.errors import BadInput
from toolkit.results import index as resultindex
from toolkit.results.records import ResultStore, read_jsonl

ROOT = Path(__file__).resolve().parent.parent
ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"
HUGE = 64 << 20  # a line 8 times the limit: held whole, it alone is 64 MiB


def _store_with_huge_line(tmp_path: Path) -> tuple[ResultStore, Path, list[bytes]]:
    """A store whose file holds a record, a line of HUGE zero bytes (sparse: no disk) and a record."""
    recs = (DATA / "results-cpu-a.jsonl").read_bytes().splitlines(keepends=True)[:2]
    path = tmp_path / "results" / "a504e0178239" / "bench.jsonl"
    path.parent.mkdir(parents=True)
    with path.open("wb") as fh:
        fh.write(recs[0])
        fh.truncate(len(recs[0]) + HUGE)
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n" + recs[1])
    return ResultStore(tmp_path / "results"), path, recs


def _peak(fn):
    tracemalloc.start()
    try:
        got = fn()
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_line_of_many_megabytes_is_refused_without_being_held_in_memory(tmp_path: Path) -> None:
    """`truncate -s 1G results/e/bench.jsonl`: report and import held the whole line (2.17 GB RSS;
    4 GB: 8.5 GB) before refusing it as longer than 8 MiB. Now it is read in chunks and dropped: the
    same warning (file and line), the records around it read, at their offsets."""
    store, path, recs = _store_with_huge_line(tmp_path)
    warned = f"{path}:2: skipped a line: longer than {jsonsafe.MAX_LINE_BYTES} bytes"
    warnings: list[str] = []
    got, peak = _peak(lambda: list(read_jsonl(path, warnings)))
    assert len(got) == 2 and warnings == [warned] and peak < 3 * jsonsafe.MAX_LINE_BYTES, peak
    sel, peak = _peak(lambda: resultindex.select(store))  # the index reads the file, then loads by offset
    assert [r.model_dump() for r in sel] == [r.model_dump() for r in ResultStore(store.root).results()]
    assert len(sel) == 2
    assert store.warnings == [warned] and peak < 3 * jsonsafe.MAX_LINE_BYTES, peak
    assert resultindex.select(ResultStore(store.root)).read == 2  # from the index file: the same


def test_the_bounded_line_reader_keeps_lengths_and_stops_at_end() -> None:
    data = b"ab\n" + b"x" * 25 + b"\n" + b"y" * 30 + b"\ncd"
    got = list(jsonsafe.lines(io.BytesIO(data), limit=10))
    assert got == [(3, b"ab\n"), (26, b"x" * 11), (31, b"y" * 11), (2, b"cd")]
    assert sum(n for n, _ in got) == len(data)
    fh = io.BytesIO(data)
    fh.seek(3)
    assert list(jsonsafe.lines(fh, end=20, limit=10)) == [(17, b"x" * 11)]  # cut at `end`, not past it
    assert fh.tell() <= 20


DAMAGE = [
    "recs SET off = 'x'",
    "recs SET off = -5",
    "recs SET len = 'x'",
    "recs SET len = -1",
    "recs SET len = 1000000000000",
    "files SET size = 'x'",  # refresh compared it with the file's size: TypeError
]


def _two_images(tmp_path: Path) -> ResultStore:
    for name in ("results-cpu-a.jsonl", "results-cpu-b.jsonl"):
        text = (DATA / name).read_bytes()
        digest = text.split(b'"digest":"sha256:', 1)[1][:12].decode()
        dest = tmp_path / "results" / digest / "bench.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(text)
    return ResultStore(tmp_path / "results")


@pytest.mark.parametrize("damage", DAMAGE)
def test_an_index_with_values_of_the_wrong_type_or_place_is_rebuilt(tmp_path: Path, damage: str) -> None:
    """`sqlite3 .index.sqlite "update recs set off='x'"`: report and compare died with a TypeError
    (exit 1); off=-5 with EINVAL read as "(unknown path) ... under /proc or /sys" (exit 4); a length
    of 10^12 with MemoryError. Now such an index is rebuilt from the JSONL, as a dropped table is."""
    store = _two_images(tmp_path)
    before = resultindex.select(store)
    a, b = sorted({r.image.digest for r in before})
    want = compare.compare(store, a, b, threshold=5, ignore=("n_threads",))
    with sqlite3.connect(store.root / resultindex.INDEX_NAME) as db:
        db.execute(f"UPDATE {damage}")
    assert store.bench_files()[0].read_bytes()  # the JSONL itself untouched
    after = resultindex.select(ResultStore(store.root))
    assert [r.model_dump() for r in after] == [r.model_dump() for r in before]
    with sqlite3.connect(store.root / resultindex.INDEX_NAME) as db:
        db.execute(f"UPDATE {damage}")
    assert repr(compare.compare(ResultStore(store.root), a, b, threshold=5, ignore=("n_threads",))) == repr(
        want
    )
    with pytest.raises(BadInput, match="same records"):  # compare's other path (heads) read through
        compare.compare(ResultStore(store.root), a, a, threshold=5)


def test_an_import_over_a_damaged_index_rebuilds_it(tmp_path: Path) -> None:
    """The import asks the index for the rows it imported before (StoredImports): a damaged row there
    crashed it (TypeError, exit 1). Now the index is rebuilt and the rows are left out as before."""
    p = tk(tmp_path, "import", "--results", "r", "--label", "x", str(ROWS))
    assert p.returncode == 0, p.stdout + p.stderr
    assert tk(tmp_path, "report", "--results", "r", "--format", "csv").returncode == 0
    with sqlite3.connect(tmp_path / "r" / resultindex.INDEX_NAME) as db:
        assert db.execute("UPDATE recs SET off = 'x'").rowcount > 0
    p = tk(tmp_path, "import", "--results", "r", "--label", "x", str(ROWS))
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert "imported before" in p.stdout + p.stderr, p.stdout + p.stderr


@pytest.mark.parametrize("program", ["/nonexistent", "/etc/passwd", "DIR"])
def test_measure_of_a_program_that_cannot_start_says_only_that(tmp_path: Path, program: str) -> None:
    """`toolkit measure -- /nonexistent` said "stopped by Ctrl-C; the command and what it started were
    stopped" before the real error, though nothing was interrupted."""
    program = str(tmp_path) if program == "DIR" else program
    out = tmp_path / "m.jsonl"
    p = tk(tmp_path, "measure", "--out", str(out), "--gpu", "none", "--", program)
    assert p.returncode == 4 and f"cannot run {program!r}" in p.stderr, p.stderr
    assert "Ctrl-C" not in p.stderr and "stopped" not in p.stderr, p.stderr
    assert not out.exists()
