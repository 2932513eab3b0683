"""A warm `toolkit report` over 10,000 shown records, worked out once where it is one value (issue 32
item 13): a loaded line whose bytes are those the index read still held to its row (breaker round
24: an edited index row), a loaded record's raw texts shared with the record before it's, an image's provenance words found
once per image object (one run's records share theirs), a record's sample median without a
statistics call. Each gives what the slower path gave, and a line that is not the bytes the index
read is checked as well."""

from __future__ import annotations

import json
import random
import sqlite3
import statistics

import pytest

from tests.support.records import filed_fixtures, make_record, resign_index
from toolkit.analysis import facts, provenance
from toolkit.results import index as resultindex
from toolkit.results.index_rows import R_LEN, R_OFF, R_SUM
from toolkit.results.records import ResultStore


def test_a_line_of_the_bytes_the_index_read_is_still_checked_against_its_row(tmp_path):
    """Bytes whose line_sum is the row's are still held to the row (breaker round 24: a row of an edited
    index, a failed record's status made ok, was loaded as listed and a warm report said "0 failed"
    where a cold one said 1): the edited row is StaleIndex, select builds the index again, and the
    records are those of the reader."""
    results = filed_fixtures(tmp_path / "results")
    store = ResultStore(results)
    h = resultindex.heads(store, runs=["20261129T170627Z-6891c7"])[0]
    with sqlite3.connect(results / ".index.sqlite") as c:
        c.execute("UPDATE runs SET run_id = 'edited' WHERE run_id = ?", (h.run_id,))
    resign_index(results)  # as this user's toolkit would have written it: load's own check
    edited = resultindex.heads(ResultStore(results), runs=["edited"])
    assert edited and edited[0].row[R_SUM] == h.row[R_SUM]
    with pytest.raises(resultindex.StaleIndex, match="not the record the index listed"):
        resultindex.load(edited)
    sel = resultindex.select(ResultStore(results))
    plain = [r.model_dump_json() for r in ResultStore(results).results()]
    assert sorted(r.model_dump_json() for r in sel) == sorted(plain)


def test_a_line_edited_in_place_after_listing_is_still_checked(tmp_path):
    """The same length, other bytes (a status changed by hand between listing and loading): not the
    bytes the index read, so the loaded record is checked against its row, and refused as before."""
    results = filed_fixtures(tmp_path / "results")
    store = ResultStore(results)
    heads = resultindex.heads(store, runs=["20261129T170627Z-6891c7"])
    h = heads[0]
    data = h.path.read_bytes()
    off, end = h.row[R_OFF], h.row[R_OFF] + h.row[R_LEN]
    line = data[off:end].replace(b'"status":"ok"', b'"status":"no"', 1)
    assert len(line) == end - off and line != data[off:end]
    h.path.write_bytes(data[:off] + line + data[end:])
    with pytest.raises(resultindex.StaleIndex, match="not the record the index listed"):
        resultindex.load(heads)
    h.path.write_bytes(data)  # the bytes the index read again: loaded as listed
    assert [r.status for r in resultindex.load(heads)] == [x.status for x in heads]


def _image_line_per_record(same: list[facts.Facts]) -> str:
    """_image_line as it was: every record's words found from the record itself."""
    records = [f.record for f in same]
    words = [
        (
            provenance._text(r.image.digest, 2 * provenance.TEXT_MAX),
            provenance._text(r.image.backend),
            *(
                next((str(r.image.labels[k]) for k in keys if (r.image.labels or {}).get(k)), None)
                for keys in provenance._LABELS.values()
            ),
        )
        for r in records
    ]
    return repr(words)


def test_image_words_are_each_records_own(monkeypatch):
    """Records of one image column with shared and with distinct image objects (labels that disagree:
    a mixed column): the words found once per image object are each record's own, in order."""
    base = make_record("cpu", "cpu", p=512, avg=100.0)
    other = base.model_copy(
        update={
            "image": base.image.model_copy(update={"labels": {"org.toolkit.llama-cpp-commit": "bbbb2222"}})
        }
    )
    first = base.model_copy(
        update={
            "image": base.image.model_copy(update={"labels": {"org.toolkit.llama-cpp-commit": "aaaa1111"}})
        }
    )
    shared = first.model_copy(update={"test": "tg128"})  # its image the very object of `first`
    assert shared.image is first.image
    records = [first, other, shared, first]
    same = [facts.Facts.of(r) for r in records]
    assert repr(provenance._image_words(records)) == _image_line_per_record(same)
    line = provenance._image_line(same)
    assert "aaaa1111 (3 records), bbbb2222 (1 record): mixed in one column" in line


def test_image_words_once_per_image_object(monkeypatch):
    """One run's records share their image object (index.load): its words are found once, not once per
    record."""
    r = make_record("cpu", "cpu", p=512, avg=100.0)
    records = [r.model_copy(update={"test": f"pp{i}"}) for i in range(50)]
    assert len({id(x.image) for x in records}) == 1
    calls = []
    real = provenance._text
    monkeypatch.setattr(provenance, "_text", lambda *a: calls.append(a) or real(*a))
    provenance._image_words(records)
    assert len(calls) == 2  # the digest and the backend, once


@pytest.mark.parametrize("n", [2, 3, 4, 5, 10, 11])
def test_sample_stats_median_is_statistics_median(n):
    rng = random.Random(n)
    for _ in range(200):
        # ties and tiny values; none below 1e-6 tok/s (MIN_TOKENS_PER_S): refused as no measurement (brk40)
        xs = [rng.choice([rng.uniform(1e-3, 1e5), 3.0, 12.5, 1e-6]) for _ in range(n)]
        avg = max(statistics.fmean(xs), 1.0)
        r = make_record("cpu", "cpu", p=512, avg=avg, samples_ts=xs)
        got = facts.sample_stats(r)
        assert got == {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
        assert repr(got["median"]) == repr(statistics.median(xs))


def test_loaded_records_share_their_equal_raw_texts(tmp_path):
    """A loaded record's raw text or int equal to the record before it's (under the same name) is that
    very object (pydantic's JSON reader shares no string of a dict[str, Any]: ~0.8 KB a record); a
    float never is (-0.0 == 0.0); every value as ResultStore.results() reads it."""
    results = filed_fixtures(tmp_path / "results")
    path = sorted(results.glob("*/bench.jsonl"))[0]
    lines = path.read_bytes().splitlines(keepends=True)
    first = json.loads(lines[0])
    twin = {**first, "run_id": first["run_id"] + "-b", "raw": {**first["raw"], "avg_ts": -0.0}}
    first["raw"]["avg_ts"] = 0.0
    twin_line = json.dumps(twin).encode() + b"\n"  # right after `first`: its raw compared with first's
    path.write_bytes(b"".join([json.dumps(first).encode() + b"\n", twin_line, *lines[1:]]))
    store = ResultStore(results)
    sel = resultindex.load(resultindex.heads(store))  # every record, in the store's order
    plain = ResultStore(results).results()
    assert [r.model_dump_json() for r in sel] == [r.model_dump_json() for r in plain]
    shared = 0
    for a, b in zip(sel, sel[1:], strict=False):
        for k, v in b.raw.items():
            if type(v) in (str, int) and type(a.raw.get(k)) is type(v) and a.raw[k] == v:
                assert a.raw[k] is v, k
                shared += 1
    assert shared
    zeros = [r.raw["avg_ts"] for r in sel if r.raw.get("avg_ts") == 0]
    assert sorted(map(repr, zeros)) == ["-0.0", "0.0"]
