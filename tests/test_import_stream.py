"""Streaming import (issue 24): a JSONL, -o json or CSV file larger than STREAM_ABOVE is read once, as
a stream (records spilled to disk, then spliced and written in batches; repeated tests grouped one at
a time), through the same readers, validity pass and grouping as a file read whole, and with no size
limit (MAX_IMPORT_BYTES stays for md and sql, read whole). Speed and memory are measured by
benchmarks/import_scale.py, not here."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.support.project import DATA
from toolkit.core.errors import BadInput
from toolkit.results import import_read, importer
from toolkit.results.records import ResultStore
from toolkit.runtimes.llama_bench import json_array

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
CASES = DATA / "cases"


def _scale():
    spec = importlib.util.spec_from_file_location(
        "import_scale", DATA.parent.parent / "benchmarks" / "import_scale.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _import(tmp_path: Path, name: str, *files: Path):
    store = ResultStore(tmp_path / name)
    res = importer.import_files(store, list(files), label="x", now=NOW)
    return store, res


def _messy(tmp_path: Path) -> Path:
    """Real rows with what published captures carry: log lines, a bare -nan, a repeated test, a line
    that is not UTF-8, a cut-off record, a row that is not a measurement, two builds."""
    f = tmp_path / "messy.jsonl"
    parts = [b"ggml_vulkan: Found 1 Vulkan devices:\n"]
    for case in ("stddev-nan.jsonl", "two-builds-one-file.jsonl", "n-cpu-moe-sweep.jsonl"):
        parts.append((CASES / case).read_bytes())
    again = json.loads((CASES / "two-builds-one-file.jsonl").read_bytes().splitlines()[0])
    again["test_time"] = "2026-01-01T00:00:00Z"  # a repeat: the same test measured again
    parts.append(json.dumps(again).encode() + b"\n")
    parts.append((CASES / "n-cpu-moe-sweep.jsonl").read_bytes().splitlines(keepends=True)[0])  # read before
    parts += [b'{"n_prompt": 512, "avg_ts": \xff}\n', b'{"n_prompt": 512, "n_gen": 0, "avg_ts": 1.0\n']
    parts.append(b'{"n_prompt": 0, "n_gen": 0, "avg_ts": 5.0}\n')
    f.write_bytes(b"".join(parts))
    return f


def test_a_streamed_jsonl_gives_what_the_whole_file_read_gives(tmp_path: Path, monkeypatch) -> None:
    f = _messy(tmp_path)
    whole_store, whole = _import(tmp_path, "whole", f)
    monkeypatch.setattr(import_read, "STREAM_ABOVE", 0)
    stream_store, streamed = _import(tmp_path, "stream", f)
    assert streamed.records == whole.records > 0
    for field in (
        "digest",
        "refused",
        "skipped",
        "repeated",
        "repaired",
        "per_file",
        "formats",
        "duplicates",
    ):
        assert getattr(streamed, field) == getattr(whole, field), field
    assert [s.name for s in streamed.sets] == [s.name for s in whole.sets]
    assert [r.model_dump() for r in stream_store.results()] == [r.model_dump() for r in whole_store.results()]
    assert streamed.refused and streamed.skipped and streamed.repeated and streamed.repaired
    assert streamed.duplicates


def test_a_jsonl_over_the_whole_read_limit_is_imported_not_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(import_read, "MAX_IMPORT_BYTES", 1 << 20)
    f = tmp_path / "big.jsonl"
    rows = _scale().generate(f, 3 << 20)
    assert f.stat().st_size > import_read.MAX_IMPORT_BYTES
    store, res = _import(tmp_path, "r", f)
    assert res.records == rows and res.repeated_tests == rows // 50
    assert len(store.results()) == rows
    again = importer.import_files(store, [f], label="x", now=NOW)
    assert again.already and again.records == 0


def test_a_streamed_file_without_a_measurement_names_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(import_read, "STREAM_ABOVE", 0)
    f = tmp_path / "none.jsonl"
    f.write_text('{"n_prompt": 0, "n_gen": 0, "avg_ts": 1.0}\n' * 3)
    with pytest.raises(
        BadInput, match=r"none\.jsonl: no llama-bench result rows found that are measurements: 3"
    ):
        _import(tmp_path, "r", f)


# ------------------------------------------------------------------ -o json and -o csv as streams


def _same_import(tmp_path: Path, monkeypatch, f: Path) -> tuple:
    """Import `f` read whole and as a stream (blocks of a few hundred bytes, so records straddle
    them); assert both say and store the same; return the streamed result."""
    whole_store, whole = _import(tmp_path, "whole", f)
    monkeypatch.setattr(import_read, "STREAM_ABOVE", 0)
    monkeypatch.setattr(import_read, "BLOCK", 300)
    monkeypatch.setattr(json_array, "JSON_BLOCK", 200)
    monkeypatch.setattr(import_read, "read_rows", _no_whole_read)
    stream_store, streamed = _import(tmp_path, "stream", f)
    assert streamed.records == whole.records > 0
    for field in ("digest", "refused", "skipped", "repeated", "repaired", "per_file", "formats", "notes"):
        assert getattr(streamed, field) == getattr(whole, field), field
    assert [r.model_dump() for r in stream_store.results()] == [r.model_dump() for r in whole_store.results()]
    return streamed


def _no_whole_read(*_a, **_k):
    raise AssertionError("a streamed format was read whole")


def test_a_streamed_json_array_gives_what_the_whole_file_read_gives(tmp_path: Path, monkeypatch) -> None:
    # log lines first, a bare -nan, a BOM, a line that is not UTF-8 between elements, and the half
    # record a crashed run leaves at the end
    body = (CASES / "stddev-nan.json").read_bytes().rstrip().removesuffix(b"]").rstrip()
    real = (DATA / "llamabench-import-0c1e57098-cpu.json").read_bytes().strip().removeprefix(b"[").rstrip()
    real = real.removesuffix(b"]")
    f = tmp_path / "run.json"
    f.write_bytes(
        b"\xef\xbb\xbfggml_vulkan: Found 1 Vulkan devices:\n[INFO] loading\n"
        + body
        + b",\n\xff\xfe\n"
        + real
        + b',\n  {\n    "build_commit": "0c1e57098",\n    "n_prompt": 512,\n    "avg_'
    )
    res = _same_import(tmp_path, monkeypatch, f)
    assert res.formats == {str(f): "json"}
    assert any("not UTF-8" in s for s in res.skipped)
    assert (last := list(res.skipped)[-1]).startswith(
        f"{f}:"
    ) and "the array ends in an incomplete record" in last
    assert res.repaired  # the -nan stddev


def test_a_streamed_json_of_appended_runs_with_their_log_gives_what_the_whole_file_read_gives(
    tmp_path: Path, monkeypatch
) -> None:
    """cases43: two runs appended with `-o json ... >> FILE 2>&1`: each run's log before its `[`,
    llama-bench's progress lines after an element's `}`, a log after the last `]`. Whole or streamed,
    every row is read (the second run and the rows after a log line were left out) and the text after
    the last array is named."""
    runs = [
        (DATA / "cases43" / n).read_text()
        for n in ("llamabench-0c1e57098-cpu-ctk.json", "llamabench-0c1e57098-cpu-t1-2.json")
    ]
    log = "llama-bench: benchmark 2/4: starting\nllama-bench: benchmark 2/4: warmup generation run\n"
    text = "".join(log + r.replace("\n  },\n", "\n  }" + log + ",\n", 1) for r in runs)
    assert text.count("}llama-bench") == 2
    f = tmp_path / "runs.json"
    f.write_text(text + log)
    res = _same_import(tmp_path, monkeypatch, f)
    assert res.records == 8 and res.formats == {str(f): "json"}
    assert [s for s in res.skipped if "array" in s] == [
        f"{f}:{text.count(chr(10)) + 1}: text that is no JSON array after the array's end: left out (import it as "
        "a file of its own)"
    ], res.skipped


def test_a_streamed_csv_gives_what_the_whole_file_read_gives(tmp_path: Path, monkeypatch) -> None:
    lines = (DATA / "llamabench-import-0c1e57098-cpu.csv").read_bytes().splitlines(keepends=True)
    f = tmp_path / "run.csv"
    # a log line first, a row cut short (field count), a line that is not UTF-8, a quoted field over
    # two lines, CRLF line ends
    quoted = lines[1].replace(b'"Intel(R) Xeon(R) Processor"', b'"Intel(R)\nXeon(R) Processor"')
    f.write_bytes(
        b"main: log line\n"
        + b"".join(ln.replace(b"\n", b"\r\n") for ln in lines)
        + lines[1][:40]
        + b"\n\xff\n"
        + quoted
        + lines[2]
    )
    res = _same_import(tmp_path, monkeypatch, f)
    assert res.formats == {str(f): "csv"}
    assert res.refused and "the header has" in list(res.refused)[0]
    assert any("not UTF-8" in s for s in res.skipped)


def test_json_and_csv_over_the_whole_read_limit_are_imported_not_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(import_read, "MAX_IMPORT_BYTES", 1 << 20)
    for fmt in ("json", "csv"):
        f = tmp_path / f"big.{fmt}"
        rows = _scale().generate(f, 3 << 20, fmt)
        assert f.stat().st_size > import_read.MAX_IMPORT_BYTES
        store, res = _import(tmp_path, f"r-{fmt}", f)
        assert res.formats == {str(f): fmt} and res.records == rows and res.repeated_tests == rows // 50
        assert len(store.results()) == rows


def test_a_bad_line_in_the_middle_of_a_large_jsonl_is_a_warning_and_the_rest_imports(tmp_path: Path) -> None:
    f = tmp_path / "big.jsonl"
    rows = _scale().generate(f, 3 << 20)
    lines = f.read_bytes().splitlines(keepends=True)
    middle = len(lines) // 2
    hostile = [
        b'{"n_prompt": 512, "avg_ts": \xff}\n',  # not UTF-8
        b"[" * 100 + b"\n",  # not a record (a log line)
        b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}\n",  # nested too deep
        b'{"n_prompt": 1' + b"0" * 5000 + b"}\n",  # a 5001-digit integer
    ]
    f.write_bytes(b"".join(lines[:middle] + hostile + lines[middle:]))
    assert f.stat().st_size > import_read.STREAM_ABOVE
    store, res = _import(tmp_path, "r", f)
    assert res.records == rows and len(store.results()) == rows
    assert list(res.skipped) == [
        f"{f}:{middle + 1}: not UTF-8 (byte 28): the line was left out",
        f"{f}:{middle + 3}: not a complete JSON record (nested deeper than 64 levels)",
        f"{f}:{middle + 4}: not a complete JSON record (a number of more than 4300 digits)",
    ]


def test_a_record_that_is_not_spliced_is_written_the_same(tmp_path: Path, monkeypatch) -> None:
    """Pass 2 splices the run id, image, hashes and seq into the spilled JSON; a record whose JSON does
    not start as expected is read and filled instead: both give the same records."""
    f = _messy(tmp_path)
    spliced_store, spliced = _import(tmp_path, "spliced", f)
    monkeypatch.setattr(importer, "spilled", lambda body: b"-1 -1 " + body)
    read_store, read = _import(tmp_path, "read", f)
    assert read.records == spliced.records > 0
    assert [r.model_dump() for r in read_store.results()] == [r.model_dump() for r in spliced_store.results()]


def test_repeated_tests_are_grouped_one_at_a_time_not_held_together(tmp_path: Path, monkeypatch) -> None:
    """Memory of a streamed import does not grow with the records of repeated tests: they wait on disk
    and are read back one test at a time (3 MB, every 50th row a repeat: groups of 2, never more)."""
    f = tmp_path / "big.jsonl"
    rows = _scale().generate(f, 3 << 20)
    sizes: list[int] = []
    from toolkit.results import import_repeats

    real = import_repeats._repetitions

    def spy(staged):
        sizes.append(len(staged))
        return real(staged)

    monkeypatch.setattr(import_repeats, "_repetitions", spy)
    monkeypatch.setattr(import_read, "read_rows", _no_whole_read)
    store, res = _import(tmp_path, "r", f)
    assert res.records == rows and res.repeated_tests == rows // 50
    assert sizes and set(sizes) == {2} and len(sizes) == rows // 50
    recs = store.results()
    marked = [r for r in recs if (r.model_extra or {}).get("process_run")]
    assert len(marked) == 2 * (rows // 50) and {r.model_extra["process_run"]["of"] for r in marked} == {2}
    for digest in {r.image.digest for r in recs}:  # per set's file: written after the others, in line order
        mine = [r for r in recs if r.image.digest == digest]
        held = [r.model_extra["imported"]["line"] for r in mine if (r.model_extra or {}).get("process_run")]
        assert held and [r.model_extra["imported"]["line"] for r in mine[-len(held) :]] == sorted(held)


def test_repeated_tests_are_named_up_to_a_bound_then_counted_per_file(tmp_path: Path) -> None:
    """Issue 32 item 15: an import of 1 GB printed 97,497 lines (16 MB), one per repeated test. The
    first SAID_TESTS are named (in file order), the others counted per file of their first row."""
    from toolkit.results.import_repeats import SAID_TESTS

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    rows_a = _scale().generate(a, 1 << 30, max_rows=50 * (SAID_TESTS + 5))  # every 50th row a repeat
    rows_b = _scale().generate(b, 1 << 30, offset=100_000, max_rows=50 * 7)
    _store, res = _import(tmp_path, "r", a, b)
    assert res.records == rows_a + rows_b and res.repeated_tests == SAID_TESTS + 5 + 7
    named, more = res.repeated[:SAID_TESTS], res.repeated[SAID_TESTS:]
    assert all("measure the same test" in line for line in named)
    assert [int(line.split("a.jsonl:")[1].split(",")[0]) for line in named] == sorted(
        int(line.split("a.jsonl:")[1].split(",")[0]) for line in named
    )  # the first ones, in file order
    assert more == [
        f"... and 5 more test(s) measured by several rows in {a} ({SAID_TESTS + 5} in all, "
        f"{2 * (SAID_TESTS + 5)} rows; 0 flagged runs-disagree), each kept as repetitions of one cell",
        f"... and 7 more test(s) measured by several rows in {b} (7 in all, 14 rows; 0 flagged "
        "runs-disagree), each kept as repetitions of one cell",
    ]
    from toolkit.cli.results import _print_import

    with contextlib.redirect_stderr(io.StringIO()) as err:
        _print_import(res, "r")
    assert (
        f"{SAID_TESTS + 12} test(s) measured by several rows:" in err.getvalue()
    )  # the total, not the lines


def test_an_import_does_not_read_the_records_the_folder_holds(tmp_path: Path, monkeypatch) -> None:
    """Issue 32 item 12: to leave out rows imported before, an import read and validated every
    imported record of the folder (memory and time grew with the history: 522 MB at 30,000). Now it
    asks the query index by digest: with the index in line, a record is validated only when new to
    the index (the import before this one) or when its digests match a row of this import."""
    from toolkit.results.records import BenchRecord

    scale = _scale()
    files = [tmp_path / f"{n}.jsonl" for n in ("big", "b", "c")]
    scale.generate(files[0], 1 << 30, max_rows=400)
    scale.generate(files[1], 1 << 30, offset=100_000, max_rows=5)
    scale.generate(files[2], 1 << 30, offset=200_000, max_rows=5)
    store = ResultStore(tmp_path / "r")
    for f in files[:2]:  # b's import brings the index in line with big's records
        importer.import_files(store, [f], label=f.stem, now=NOW)
    validated = []
    real = BenchRecord.model_validate.__func__  # type: ignore[attr-defined]

    def counted(cls, obj, *a, **k):
        validated.append(1)
        return real(cls, obj, *a, **k)

    monkeypatch.setattr(BenchRecord, "model_validate", classmethod(counted))
    res = importer.import_files(store, [files[2]], label="c", now=NOW)
    assert res.records == 5 and not res.duplicates
    assert len(validated) < 50, len(validated)  # b's 5 records (new to the index); was 405
    validated.clear()
    again = importer.import_files(store, [files[0]], label="other", now=NOW)  # every row stored before
    assert again.already and again.records == 0
    assert sum(int(n.split(" row(s) already imported in run ")[0]) for n in again.duplicates) == 400


def test_an_import_into_a_large_folder_does_no_work_that_grows_with_it(tmp_path: Path, monkeypatch) -> None:
    """Issue 32 item 12, the rest: an import into 200,000 records cost ~1.4x the CPU of one into an
    empty folder. Of that, naming the sets it writes read the store's write order of every record
    (ResultIndex.skewed: ~0.5 s at 200,000) and every row's digest of what an md table shows was
    computed although the folder held no md table's row to match it with. Neither is done now: the
    skew is not asked, and a row gets only the one digest its match needs (~2 µs)."""
    from toolkit.results import import_repeats, index_sqlite

    scale = _scale()
    stored, new = tmp_path / "stored.jsonl", tmp_path / "new.jsonl"
    scale.generate(stored, 1 << 30, offset=100_000, max_rows=300)
    scale.generate(new, 1 << 30, max_rows=40)
    store = ResultStore(tmp_path / "r")
    importer.import_files(store, [stored], label="stored", now=NOW)
    calls: dict[str, int] = {"skewed": 0, "shown_parts": 0}

    def spy(owner, name):
        real = getattr(owner, name)

        def counted(*a, **k):
            calls[name] += 1
            return real(*a, **k)

        monkeypatch.setattr(owner, name, counted)

    spy(index_sqlite.ResultIndex, "skewed")
    spy(import_repeats, "shown_parts")
    res = importer.import_files(store, [new], label="new", now=NOW)
    assert res.records == 40 and not res.duplicates
    assert calls == {"skewed": 0, "shown_parts": 0}
    again = importer.import_files(store, [new], label="again", now=NOW)  # every row imported before
    assert again.already and sum(int(n.split(" row(s)")[0]) for n in again.duplicates) == 40
