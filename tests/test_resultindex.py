"""The query index results/.index.sqlite (toolkit/results/index.py) against the JSONL it indexes.

Every check compares the index path (resultindex.select / heads / sides) with the reader that
has no index (ResultStore.results() + the report/compare code over the whole list), on the real
fixtures in tests/data/ and on a synthetic set built from them (benchmarks/report_scale.generate:
the real records with varied run ids, digests, created and tok/s) plus the edge cases of the
selection rules: created ties between runs, process-level repetitions, CPU-fallback failures with
numbers, a tiny model or a software GPU seen only in superseded or failed records.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.records import filed_fixtures, resign_index, resolve_whole
from toolkit.analysis import compare, report, tables
from toolkit.analysis.compare import Side
from toolkit.core.errors import BadInput
from toolkit.results import index as resultindex
from toolkit.results.records import BenchRecord, ResultStore, append_jsonl

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]

_spec = importlib.util.spec_from_file_location("report_scale", ROOT / "benchmarks" / "report_scale.py")
report_scale = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report_scale)


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _edge_cases(results: Path, meta: dict) -> None:
    """Records on top of a generated set that the selection rules treat specially."""
    vk = [json.loads(x) for x in (DATA / "results-vulkan-lavapipe.jsonl").read_text().splitlines()]
    cpu = [json.loads(x) for x in (DATA / "results-cpu-a.jsonl").read_text().splitlines()]
    newest_cpu = meta["digests"]["0"][-1]
    path = results / newest_cpu.split(":")[1][:12] / "bench.jsonl"
    last = [r for r in ResultStore(results).results() if r.image.digest == newest_cpu and r.status == "ok"][
        -1
    ]
    last = last.model_dump(mode="json")  # the newest ok record of the newest cpu digest
    extra = [
        # another run of the newest record's test with the same created, written after it: the run
        # written last wins (the store's order, issue 21: never the wall clock)
        # (as many samples as its raw row's repetitions: a record holds its raw row's count, raw_check)
        {
            **last,
            "run_id": "tie-run-late",
            "avg_ts": 1.0,
            "stddev_ts": 0.0,
            "samples_ts": [1.0] * len(last["samples_ts"]),
        },
        # an old run of a tiny stand-in model nobody measured since: only a superseded record names it
        {
            **cpu[0],
            "run_id": "old-tiny",
            "created": "2024-01-01T00:00:00+00:00",  # measured (raw test_time) before it was written, in an image built before
            "raw": {**cpu[0]["raw"], "test_time": "2023-12-31T23:00:00Z"},
            "image": {**cpu[0]["image"], "digest": newest_cpu, "labels": {}},
            "model": {**cpu[0]["model"], "name": "tiny-old", "path": "/models/tiny-old.gguf"},  # its own file
        },
        {
            **cpu[0],
            "run_id": "old-tiny-2",
            "created": "2024-01-02T00:00:00+00:00",  # measured (raw test_time) before it was written, in an image built before
            "raw": {**cpu[0]["raw"], "test_time": "2024-01-01T23:00:00Z"},
            "image": {**cpu[0]["image"], "digest": newest_cpu, "labels": {}},
            "model": {**cpu[0]["model"], "name": "tiny-old", "path": "/models/tiny-old.gguf"},
        },
    ]
    # a repetition run (bench.runs: 3) newest for its tests: combined, not superseded by each other
    for i in range(3):
        extra += [
            {
                **r,
                "run_id": "repeat-run",
                "created": f"2030-01-01T00:00:0{i}+00:00",
                "image": {**r["image"], "digest": newest_cpu},
                "process_run": {"index": i + 1, "of": 3},
                "samples_ts": [x * (1 + i / 10) for x in r["samples_ts"]],
                "avg_ts": r["avg_ts"] * (1 + i / 10),
                "stddev_ts": r["stddev_ts"] * (1 + i / 10),
            }
            for r in cpu[:2]
        ]
    with path.open("ab") as fh:
        fh.write(b"".join(_line(x) for x in extra))
    # a GPU image that fell back to the CPU (failed, with numbers) on a digest of its own, and a
    # software-GPU digest seen only in a failed record without numbers
    fb = "sha256:" + "fb" * 32
    soft = "sha256:" + "5f" * 32
    rows = [
        {
            **r,
            "run_id": "fallback-run",
            "status": "failed",
            "error": "CPU fallback: no Vulkan device",
            "image": {**r["image"], "digest": fb},
        }
        for r in vk[:3]
    ]
    (results / fb.split(":")[1][:12]).mkdir()
    (results / fb.split(":")[1][:12] / "bench.jsonl").write_bytes(b"".join(_line(x) for x in rows))
    gone = {
        **vk[0],
        "run_id": "soft-failed",
        "status": "failed",
        "error": "llama-bench exited 1",
        "avg_ts": None,
        "stddev_ts": None,
        "samples_ts": [],
        "image": {**vk[0]["image"], "digest": soft},
    }
    (results / soft.split(":")[1][:12]).mkdir()
    (results / soft.split(":")[1][:12] / "bench.jsonl").write_bytes(_line(gone))
    # a campaign host's folder (results/hosts/<host>/<digest12>/): a newer run of the newest cpu tests
    host = results / "hosts" / "node-7" / newest_cpu.split(":")[1][:12]
    host.mkdir(parents=True)
    (host / "bench.jsonl").write_bytes(
        b"".join(
            _line(
                {
                    **r,
                    "run_id": "host-run",
                    "created": "2031-01-01T00:00:00+00:00",
                    "image": {**r["image"], "digest": newest_cpu},
                }
            )
            for r in cpu[2:4]
        )
    )


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    """2,000 generated records (+ edge cases and bad lines) under <tmp>/results."""
    results = tmp_path_factory.mktemp("synthetic") / "results"
    meta = report_scale.generate(results, 2000, digests_per_template=3)
    assert 2000 <= meta["records"] <= 2017
    _edge_cases(results, meta)
    return results


def _copy(src: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "results"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(resultindex.INDEX_NAME + "*"))
    return dest


def _both(results: Path, images=None, runs=None):
    """(whole list, its store) through results() and (selection, its store) through the index."""
    whole_store = ResultStore(results)
    whole = [
        r
        for r in whole_store.results()
        if (not images or r.image.name in images) and (not runs or r.run_id in runs)
    ]
    idx_store = ResultStore(results)
    sel = resultindex.select(idx_store, images=images, runs=runs)
    return (whole, whole_store), (sel, idx_store)


def _dump(recs) -> list[dict]:
    return [r.model_dump(mode="json") for r in recs]


def assert_same_report(results: Path, images=None, runs=None) -> dict:
    """The index path gives the report of the whole list: same tables, verdict (caveats included),
    csv, records shown, counts, warnings and refused count. Returns the json report."""
    (whole, ws), (sel, xs) = _both(results, images, runs)
    assert isinstance(sel, resultindex.RecordSelection)
    a = json.loads(report.render(whole, "json", refused=ws.refused))
    b = json.loads(report.render(sel, "json", refused=xs.refused))
    a.pop("records"), b.pop("records")
    assert a == b
    assert report.render(whole, "csv") == report.render(sel, "csv")
    shown_a, acc_a = tables.select_with_accounting(whole)
    shown_b, acc_b = tables.select_with_accounting(sel)
    assert _dump(shown_a) == _dump(shown_b)
    assert (sel.read, sel.failed, sel.superseded) == (acc_a.read, acc_a.failed, acc_a.superseded)
    assert len(acc_b.used) == len(acc_a.used)
    assert (xs.warnings, xs.refused) == (ws.warnings, ws.refused)
    return a


def test_real_fixtures_report_the_same_through_the_index(tmp_path):
    results = filed_fixtures(tmp_path / "results")
    doc = assert_same_report(results)
    assert {t["axis"] for t in doc["tables"]} == {"prefill", "decode"}
    assert (results / resultindex.INDEX_NAME).is_file()
    for images in (["cpu"], ["vulkan"], ["nope"]):
        assert_same_report(results, images=images)
    assert_same_report(results, runs=["20261129T170715Z-49c7ee"])
    sel = resultindex.select(ResultStore(results))
    assert (len(sel), sel.read, sel.superseded, sel.failed) == (
        18,
        18,
        0,
        0,
    )  # three runs, no test measured twice


def test_synthetic_set_reports_the_same_through_the_index(synthetic, tmp_path):
    results = _copy(synthetic, tmp_path)
    doc = assert_same_report(results)
    caveats = " ".join(doc["verdict"]["caveats"])
    assert "tiny-old" in caveats  # named only by superseded records: still seen
    assert "vulkan@5f5f5f5f5f5f" in caveats  # named only by a failed record: still seen
    assert any(
        "cpu-fallback" in c["flags"]
        for t in doc["tables"]
        for row in t["rows"]
        for c in row.values()
        if isinstance(c, dict)
    )
    sel = resultindex.select(ResultStore(results))
    assert sel.read > 2000 and sel.superseded > 1500 and sel.failed > 3 and len(sel) < 200
    combined = [r for r in tables.select_for_report(sel) if (r.model_extra or {}).get("between_runs")]
    assert combined and all(r.run_id == "repeat-run" for r in combined)
    assert any(r.run_id == "tie-run-late" for r in tables.select_for_report(sel))
    assert any(r.run_id == "host-run" for r in tables.select_for_report(sel))
    assert any(r.run_id == "tie-run-late" for r in ResultStore(results).results())
    assert_same_report(results, images=["vulkan"])
    assert_same_report(results, runs=["repeat-run", "tie-run-late", "fallback-run"])


def _no_build_names(results: Path) -> None:
    """Records of an image no build record names (as imports are), over two digests: its newest
    digest is the one whose record was written last (the largest seq; else the last in store order)."""
    cpu = [json.loads(x) for x in (DATA / "results-cpu-a.jsonl").read_text().splitlines()]
    for digest, seqs in (("sha256:" + "a1" * 32, (7, 9)), ("sha256:" + "a2" * 32, (8, None))):
        rows = [
            {
                **r,
                "run_id": f"nobuild-{digest[7:9]}-{k}",
                "seq": seq,
                "image": {**r["image"], "name": "nobuild", "digest": digest},
            }
            for k, seq in enumerate(seqs)
            for r in cpu[:3]
        ]
        (results / digest[7:19]).mkdir()
        (results / digest[7:19] / "bench.jsonl").write_bytes(b"".join(_line(x) for x in rows))


def test_compare_sides_found_in_sql_match_the_whole_list(synthetic, tmp_path):
    """compare's sides found and chosen in SQL (compare._pick through resultindex.sides) are those
    compare's rules give over the whole list (resolve_whole), chosen among as
    tables.select_with_accounting does over them: same label, same records used, same counts; a ref that names no side gets the same error."""
    results = _copy(synthetic, tmp_path)
    _no_build_names(results)
    whole = ResultStore(results).results()
    digests = sorted({r.image.digest for r in whole})
    runs = sorted({r.run_id for r in whole})
    refs = ["cpu", "vulkan", "nobuild", digests[0][7:19], "sha256:" + digests[2][7:13].upper(), runs[3]]
    refs += ["repeat-run", "fallback-run", digests[0][:8], "nothing-like-this", "a1a1"]
    for ref in refs:
        store = ResultStore(results)
        (got,) = resultindex.sides(store, lambda q, s=store, ref=ref: [compare._pick(q, s, ref)])
        try:
            want = resolve_whole(ResultStore(results), ref, whole)
        except BadInput as err:
            assert isinstance(got, list) and str(compare._unresolved(store, ref, got)) == str(err)
            continue
        assert isinstance(got, tuple) and got[0] == want.label
        shown, acc = tables.select_with_accounting(want.records)
        assert _dump(tables.select_with_accounting(got[1])[0]) == _dump(shown)
        assert (got[1].read, got[1].failed, got[1].superseded) == (acc.read, acc.failed, acc.superseded)
        assert _dump(compare._usable(Side(ref, got[0], got[1]))) == _dump(compare._usable(want))


def test_compare_builds_no_head_per_record(synthetic, tmp_path, monkeypatch):
    """compare finds its sides in SQL: it builds a Head only for the records a side needs (the newest
    run per test and a first record for the label), not one per record an image name matches
    (thousands here: at 200,000 stored records that was most of compare's time and memory)."""
    results = _copy(synthetic, tmp_path)
    built = []
    real = resultindex.Head.__init__

    def counted(self, *args):
        built.append(1)
        real(self, *args)

    monkeypatch.setattr(resultindex.Head, "__init__", counted)
    store = ResultStore(results)
    cpu = resultindex.heads(ResultStore(results), images=["cpu"])
    built.clear()
    c = compare.compare(store, "cpu", "vulkan", ignore=("n_gpu_layers", "n_threads"))
    assert c.rows and len(cpu) > 1000
    assert len(built) <= len(c.a.records) + len(c.b.records) + 2


def test_deleted_index_comes_back(tmp_path):
    results = filed_fixtures(tmp_path / "results")
    first = resultindex.select(ResultStore(results))
    index = results / resultindex.INDEX_NAME
    assert index.is_file()
    index.unlink()
    again = resultindex.select(ResultStore(results))
    assert index.is_file() and _dump(again) == _dump(first)
    index.write_bytes(b"this is not a database" * 100)  # damaged: it is only an index, built again
    assert _dump(resultindex.select(ResultStore(results))) == _dump(first)
    assert sqlite3.connect(index).execute("SELECT COUNT(*) FROM recs").fetchone()[0] == 18


def _spy(monkeypatch) -> list[tuple[Path, int]]:
    """(file, start byte) of every read the index does."""
    reads: list[tuple[Path, int]] = []
    from toolkit.results import index_sqlite

    real = index_sqlite.scan_jsonl_lines

    def scan(path, start=0, first_line=1, end=None):
        reads.append((path, start))
        return real(path, start, first_line, end)

    monkeypatch.setattr(index_sqlite, "scan_jsonl_lines", scan)
    return reads


def test_an_append_reads_only_the_new_tail(tmp_path, monkeypatch):
    results = filed_fixtures(tmp_path / "results")
    store = ResultStore(results)
    before = resultindex.select(store)
    reads = _spy(monkeypatch)
    assert (
        _dump(resultindex.select(ResultStore(results))) == _dump(before) and reads == []
    )  # nothing changed: no read
    path = sorted(results.glob("*/bench.jsonl"))[0]
    size = path.stat().st_size
    first = json.loads(path.read_text().splitlines()[0])
    newer = BenchRecord.model_validate(
        {
            **first,
            "run_id": "appended",
            "created": "2027-01-01T00:00:00+00:00",
            "avg_ts": 123.0,
            "stddev_ts": 0.0,
            "samples_ts": [123.0] * len(first["samples_ts"]),  # its raw row's repetitions (raw_check)
        }
    )
    append_jsonl(path, newer)
    sel = resultindex.select(ResultStore(results))
    assert reads == [(path, size)]  # the new tail only
    assert "appended" in {r.run_id for r in tables.select_for_report(sel)}
    assert sel.read == before.read + 1 and sel.superseded == before.superseded + 1
    assert_same_report(results)


def test_a_half_line_at_the_end_is_read_again_when_the_writer_finishes(tmp_path, monkeypatch):
    results = filed_fixtures(tmp_path / "results")
    path = sorted(results.glob("*/bench.jsonl"))[0]
    whole_line = path.read_bytes().splitlines(keepends=True)[0].replace(b'"run_id":"', b'"run_id":"late-', 1)
    with path.open("ab") as fh:
        fh.write(whole_line[:900])  # a writer half way through its line
    store = ResultStore(results)
    resultindex.select(store)
    assert store.refused == 1 and f"{path}:7: skipped a corrupt line (not JSON)" in store.warnings
    assert_same_report(results)
    reads = _spy(monkeypatch)
    with path.open("ab") as fh:
        fh.write(whole_line[900:])  # ...and now the rest
    store = ResultStore(results)
    sel = resultindex.select(store)
    assert store.refused == 0 and reads == [(path, path.stat().st_size - len(whole_line))]
    assert sel.read == 19
    assert_same_report(results)


@pytest.mark.parametrize("how", ["truncated", "same-size-edit", "replaced", "edited-then-appended"])
def test_a_rewritten_file_is_indexed_whole(tmp_path, monkeypatch, how):
    results = filed_fixtures(tmp_path / "results")
    resultindex.select(ResultStore(results))
    path = sorted(results.glob("*/bench.jsonl"))[0]
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    middle = lines[2].replace(b'"status":"ok"', b'"status":"no"')  # same length, past the first/last 4 KiB
    assert len(middle) == len(lines[2]) and middle != lines[2] and len(lines[0]) > resultindex.EDGE_BYTES
    if how == "truncated":  # cut in the middle of line 4: a half line, and two records gone
        path.write_bytes(b"".join(lines[:3]) + lines[3][:100])
    elif how == "same-size-edit":  # a hand edit in the middle keeping the size
        path.write_bytes(b"".join(lines[:2]) + middle + b"".join(lines[3:]))
        assert path.stat().st_size == len(data)
    elif how == "replaced":  # a new file (new inode): the middle edited and a record added at the end
        tmp = path.with_suffix(".new")
        tmp.write_bytes(b"".join(lines[:2]) + middle + b"".join(lines[3:]) + lines[1])
        os.replace(tmp, path)
    else:  # the first line edited (same length) and a record appended
        path.write_bytes(
            lines[0].replace(b'"status":"ok"', b'"status":"no"') + b"".join(lines[1:]) + lines[1]
        )
    reads = _spy(monkeypatch)
    assert_same_report(results)
    assert (path, 0) in reads  # read from the start, never only a tail


def test_a_file_rewritten_between_listing_and_loading_is_not_trusted(tmp_path):
    results = filed_fixtures(tmp_path / "results")
    store = ResultStore(results)
    heads = resultindex.heads(store, runs=["20261129T170627Z-6891c7"])
    path = heads[0].path
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(reversed(lines[:3])) + b"".join(lines[3:]))  # same bytes, lines moved
    with pytest.raises(resultindex.StaleIndex, match="run the command again") as err:
        resultindex.load(heads)
    assert err.value.exit_code == 8
    assert_same_report(results)  # select() re-indexes the file and answers from it


def test_the_index_is_rebuilt_when_its_code_changes(tmp_path, monkeypatch):
    results = filed_fixtures(tmp_path / "results")
    resultindex.select(ResultStore(results))
    from toolkit.results import index_sqlite

    monkeypatch.setattr(index_sqlite, "_code_fingerprint", lambda: "another release")
    reads = _spy(monkeypatch)
    assert_same_report(results)
    assert len(reads) == 3 and all(start == 0 for _, start in reads)
    meta = dict(sqlite3.connect(results / resultindex.INDEX_NAME).execute("SELECT k, v FROM meta"))
    assert meta["fingerprint"] == "another release"


def test_a_read_only_results_folder_gets_an_index_in_memory(tmp_path):
    """results/ that cannot hold the index (mode 555, as a user file modes bind): the same report, no
    index file written. As root, the capabilities that ignore file modes are dropped (setpriv)."""
    results = filed_fixtures(tmp_path / "results")
    prefix: list[str] = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: cannot make file modes bite")
        caps = "-dac_override,-dac_read_search"
        prefix = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]
    code = (
        "import json,sys; from pathlib import Path; from toolkit.results.records import ResultStore; "
        "from toolkit.results import index as resultindex; s=ResultStore(Path(sys.argv[1])); sel=resultindex.select(s); "
        "print(json.dumps([sel.read, sel.superseded, sorted(r.run_id + r.test for r in sel)]))"
    )
    results.chmod(0o555)
    try:
        run = subprocess.run(
            [*prefix, sys.executable, "-c", code, str(results)], capture_output=True, text=True, cwd=ROOT
        )
    finally:
        results.chmod(0o755)
    assert run.returncode == 0, run.stderr
    assert not (results / resultindex.INDEX_NAME).exists()
    sel = resultindex.select(ResultStore(results))
    assert json.loads(run.stdout) == [sel.read, sel.superseded, sorted(r.run_id + r.test for r in sel)]


def test_processes_building_the_index_at_once_agree(synthetic, tmp_path):
    """Four processes query a results/ without an index at the same moment: one builds it (SQLite's
    write lock), the others wait or read it; every answer is the answer of reading every line."""
    results = _copy(synthetic, tmp_path)
    code = (
        "import json,sys; from pathlib import Path; from toolkit.results import index as resultindex; from toolkit.analysis import tables; "
        "from toolkit.results.records import ResultStore; s=ResultStore(Path(sys.argv[1])); sel=resultindex.select(s); "
        "print(json.dumps([sel.read, sel.failed, sel.superseded, s.refused, "
        "[r.run_id + r.test for r in tables.select_for_report(sel)]]))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(results)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    store = ResultStore(results)
    whole = store.results()
    _, acc = tables.select_with_accounting(whole)
    want = [
        acc.read,
        acc.failed,
        acc.superseded,
        store.refused,
        [r.run_id + r.test for r in tables.select_for_report(whole)],
    ]
    assert [json.loads(o) for o, _ in outs] == [want] * 4


def test_equal_identities_hash_equal():
    """1, 1.0 and True are one value to identity.TestKey's ==; "1" is not."""
    from toolkit.results.identity import TestKey

    def key(v):
        return TestKey(
            "sha256:x", (("gpu_info", ""),), ("qwen", v, 3), None, (("n_prompt", v), ("x", (v, 2.5)))
        )

    assert key(1) == key(1.0) == key(True)
    assert resultindex.key_hash(key(1)) == resultindex.key_hash(key(1.0)) == resultindex.key_hash(key(True))
    assert key(1) != key("1") and resultindex.key_hash(key(1)) != resultindex.key_hash(key("1"))
    assert resultindex.key_hash(key(2.5)) != resultindex.key_hash(key(2))


def test_an_edit_the_refresh_cannot_see_rebuilds_the_index_instead_of_failing(tmp_path):
    """Breaker case: a same-length edit past the hashed edges plus an append looked like a plain
    append; reading the listed record then failed (exit 8) on every run. Now the index is rebuilt."""
    from toolkit.analysis import compare
    from toolkit.results import index as resultindex
    from toolkit.results.records import ResultStore

    src = (DATA / "results-cpu-a.jsonl").read_bytes().split(b"\n")
    store = ResultStore(tmp_path / "results")
    d = store.root / "a504e0178239"
    d.mkdir(parents=True)
    f = d / "bench.jsonl"
    f.write_bytes(b"\n".join(src))
    before = resultindex.select(store)
    lines = f.read_bytes().split(b"\n")
    k = len(lines) // 2
    assert b'"created":"20' in lines[k] or b'"created": "20' in lines[k]
    lines[k] = (  # a century later: still written after it was measured (results.time_check)
        lines[k]
        .replace(b'"created":"20', b'"created":"21', 1)
        .replace(b'"created": "20', b'"created": "21', 1)
    )
    f.write_bytes(b"\n".join(lines))
    with f.open("ab") as fh:
        fh.write(src[0] + b"\n")
    after = resultindex.select(store)  # no StaleIndex: rebuilt from the JSONL
    assert after.read == before.read + 1
    rec = before[0]
    with pytest.raises(BadInput, match="A and B are the same records"):  # read through, no StaleIndex
        compare.compare(store, rec.image.digest, rec.image.digest, threshold=5)


def _exact(recs) -> list[str]:
    """Each record as repr() sees it: values with their types (5 and 5.0 differ), extras, the fields
    set, clock skew."""
    return [repr((r.model_dump(), sorted(r.model_fields_set), r.clock_skew)) for r in recs]


def _count_full_reads(monkeypatch) -> list[bytes]:
    """The lines index.load reads through the full reader (records._parse_line + bench_record)."""
    seen: list[bytes] = []
    real = resultindex._parse_line

    def parse(raw):
        seen.append(raw)
        return real(raw)

    monkeypatch.setattr(resultindex, "_parse_line", parse)
    return seen


def test_records_the_index_validated_are_not_parsed_and_validated_again(tmp_path, monkeypatch):
    """A warm report reads its records by offset and has pydantic read the bytes the index validated
    (their line_sum kept in the index) as JSON: no second parse and model_validate, the same records
    (types, extras, fields set) as the reader without an index gives."""
    results = filed_fixtures(tmp_path / "results")
    resultindex.select(ResultStore(results))  # the index built
    full = _count_full_reads(monkeypatch)
    sel = resultindex.select(ResultStore(results))
    assert len(sel) > 10 and full == []
    assert sorted(_exact(sel)) == sorted(_exact(ResultStore(results).results()))  # all 18 shown


def test_a_line_not_the_bytes_the_index_validated_goes_through_the_full_reader(tmp_path, monkeypatch):
    """A row whose line_sum does not match the bytes read (here: the index's sum changed) is read as
    ResultStore.results() reads it; so is a line pydantic's JSON reader refuses though json reads it
    (a lone surrogate in a string): both load the record the reader without an index gives."""
    results = filed_fixtures(tmp_path / "results")
    path = sorted(results.glob("*/bench.jsonl"))[0]
    first = json.loads(path.read_text().splitlines()[0])
    odd = {**first, "run_id": "20260102T000000Z-surrogate", "log_file": "\ud800 log"}
    with path.open("a") as fh:
        fh.write(json.dumps(odd, separators=(",", ":")) + "\n")  # ensure_ascii: the surrogate as \ud800
    resultindex.select(ResultStore(results))
    with sqlite3.connect(results / resultindex.INDEX_NAME) as db:
        db.execute("UPDATE recs SET sum = x'00' WHERE line = 1")
    resign_index(results)  # as this user's toolkit would have written it: load's own check
    full = _count_full_reads(monkeypatch)
    sel = resultindex.select(ResultStore(results))
    firsts = {f.read_bytes().splitlines(keepends=True)[0] for f in results.glob("*/bench.jsonl")}
    odd_reads = [raw for raw in full if b"\\ud800" in raw]
    assert len(odd_reads) == 1 and len(full) >= 3  # the surrogate line; line 1 of the files it shows
    assert all(raw in firsts for raw in full if raw not in odd_reads)
    assert any(r.log_file == "\ud800 log" for r in sel)
    whole = collections.Counter(_exact(ResultStore(results).results()))
    assert len(sel) == 18 and not collections.Counter(_exact(sel)) - whole  # one record superseded


def test_a_lone_surrogate_in_a_stored_record_does_not_crash_the_index(tmp_path):
    """A stored record whose gpu_info, image name and run_id hold lone surrogates (JSON "\\ud800":
    Python reads it, SQLite cannot store it) made building the index, and with it a cold report,
    end in a UnicodeEncodeError traceback. The index keeps the row; the report shows the record."""
    import subprocess
    import sys

    rec = json.loads((DATA / "results-cpu-a.jsonl").read_text().splitlines()[0])
    rec |= {"gpu_info": "GPU \ud800 x", "run_id": rec["run_id"] + "\udfff"}
    rec["image"]["name"] = "cpu\ud801"
    (tmp_path / "results" / "run1").mkdir(parents=True)
    (tmp_path / "results" / "run1" / "bench.jsonl").write_text(json.dumps(rec) + "\n")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "report",
            "--format",
            "json",
            "--results",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and json.loads(p.stdout)


def test_a_warm_report_reads_each_records_test_key_from_the_index(tmp_path, monkeypatch):
    """Inside keys_cached(), select gives each record the TestKey the index stored for its line (no
    test key computed), equal to the one computed without the index, its text/int pairs shared
    between keys; outside keys_cached(), for a line not the bytes the index read and for stored key
    bytes that are not a key (a hand edit), it is computed."""
    from toolkit.results import identity

    results = filed_fixtures(tmp_path / "results")
    resultindex.select(ResultStore(results))  # the index built
    computed = collections.Counter(repr(identity.test_key(r)) for r in ResultStore(results).results())
    real_fields = identity._test_fields
    calls: list[object] = []
    monkeypatch.setattr(identity, "_test_fields", lambda r: calls.append(r) or real_fields(r))
    with identity.keys_cached():
        sel = resultindex.select(ResultStore(results))
        keys = [identity.test_key(r) for r in sel]
    assert len(sel) == 18 and calls == []
    assert collections.Counter(map(repr, keys)) == computed  # the same keys, values of the same types
    pairs = [dict((p[0], p) for p in k.test)["n_threads"] for k in keys]
    assert len({id(p) for p in pairs}) == len(set(pairs)) < len(pairs)  # one object per distinct pair
    resultindex.select(ResultStore(results))
    assert calls == []  # nothing given outside keys_cached()
    with sqlite3.connect(results / resultindex.INDEX_NAME) as db:
        db.execute("UPDATE recs SET sum = x'00' WHERE line = 1")
    resign_index(results)  # as this user's toolkit would have written it: load's own check
    with identity.keys_cached():
        sel = resultindex.select(ResultStore(results))
        assert collections.Counter(repr(identity.test_key(r)) for r in sel) == computed
    assert 3 <= len(calls) < 18  # line 1 of the files shown: read again, its key computed
    with sqlite3.connect(results / resultindex.INDEX_NAME) as db:
        db.execute("UPDATE keys SET data = x'00'")  # a hand edit: no key is read from it
    calls.clear()
    with identity.keys_cached():
        sel = resultindex.select(ResultStore(results))
        assert collections.Counter(repr(identity.test_key(r)) for r in sel) == computed
    assert len(calls) == 18


@pytest.mark.parametrize(
    "data",
    [b'["i",[["x"]],[],"s",[]]', b'"abcde"', b'{"a":1,"b":2,"c":3,"d":4,"e":5}', b"[1,2,3,4]", b"\x00"],
)
def test_stored_key_bytes_that_are_no_key_give_none(data):
    """Bytes in keys.data that key_data did not write (a hand edit: a pair of one item, a text or an
    object of five, four parts, no JSON) give no key, so the reader computes it (IndexError before)."""
    from toolkit.results.index_rows import key_of

    assert key_of(data) is None


def test_stored_key_bytes_read_back_as_the_key(tmp_path):
    """key_of(key_data(k)) == k for every record's key, nested values (a list-valued field) included."""
    from toolkit.results import identity
    from toolkit.results.index_rows import key_of
    from toolkit.results.index_sqlite import key_data

    keys = [identity.test_key(r) for r in ResultStore(filed_fixtures(tmp_path / "results")).results()]
    nested = identity.TestKey("i", (("a", (1, (2, "x"))),), ("m", 1), None, (("b", None), ("c", 1.5)))
    for k in [*keys, nested]:
        assert repr(key_of(key_data(k))) == repr(k)


def test_loaded_records_of_one_run_share_their_equal_parts(tmp_path):
    """select gives consecutive records that repeat a part (host, command, image, model, ...) that
    very object (57 MB less at 10,000 records), every value as ResultStore.results() reads it."""
    results = filed_fixtures(tmp_path / "results")
    resultindex.select(ResultStore(results))  # the index built
    sel = resultindex.select(ResultStore(results))
    plain = ResultStore(results).results()
    assert len(sel) == 18 and {r.model_dump_json() for r in sel} <= {r.model_dump_json() for r in plain}
    for name in resultindex.SHARED_PARTS:
        pairs = list(zip(sel, sel[1:], strict=False))
        equal = [(a, b) for a, b in pairs if getattr(a, name) == getattr(b, name) and getattr(a, name)]
        assert all(getattr(a, name) is getattr(b, name) for a, b in equal), name
        assert equal or name not in ("host", "command", "image", "model"), name  # what these records repeat


def test_building_the_index_keeps_no_record_in_the_key_memo(tmp_path):
    """A cold report (the index built inside the report's keys_cached()) keeps in the memo only the
    records it loads: the index reads every record of the folder and drops it (it kept them all)."""
    from toolkit.results import identity

    results = filed_fixtures(tmp_path / "results")
    path = sorted(results.glob("*/bench.jsonl"))[0]
    first = json.loads(path.read_text().splitlines()[0])
    with path.open("a") as fh:  # a newer run of its test: the first record superseded, not loaded
        fh.write(json.dumps({**first, "run_id": "20270101T000000Z-newer"}) + "\n")
    with identity.keys_cached():
        sel = resultindex.select(ResultStore(results))
        held = [r for r, _ in identity._memo.values()]
    assert sel.read == 19 and len(sel) == 18 and len(held) == 18 and set(map(id, held)) == set(map(id, sel))
