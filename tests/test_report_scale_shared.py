"""A warm `toolkit report` over 10,000 shown records, shared and read once (issue 32 item 13): stored
test keys read one distinct part at a time, a loaded record's set of given fields shared, a file's
lines read in one call, the clock skew read without pydantic's __getattr__, the report's JSON escaped
without a wide copy of its text, model families and UTC dates computed cheaply. Each gives what the
slower path gave."""

from __future__ import annotations

import json
import os
import random
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.support.records import filed_fixtures
from toolkit.analysis import facts, verdict
from toolkit.analysis.report import json_text
from toolkit.results import identity
from toolkit.results import index as resultindex
from toolkit.results.index_rows import key_of
from toolkit.results.index_sqlite import key_data
from toolkit.results.records import BenchRecord, ResultStore

DATA = Path(__file__).parent / "data"


def test_stored_keys_share_their_equal_parts():
    """Two keys with the same image, system and model read back with those parts as one object each
    (each distinct part's bytes read once), the keys equal to what was stored."""
    system = (("backends", "CPU"), ("gpu_info", ""), ("n_threads", 4))
    a = identity.TestKey("sha256:ab", system, ("m", 1), None, (("n_prompt", 512), ("n_gen", 0)))
    b = identity.TestKey("sha256:ab", system, ("m", 1), None, (("n_prompt", 0), ("n_gen", 128)))
    parts: dict = {}  # one load's
    ka, kb = key_of(key_data(a), parts), key_of(key_data(b), parts)
    assert ka == a and kb == b and repr(ka) == repr(a) and repr(kb) == repr(b)
    assert ka is not None and kb is not None
    assert ka.system is kb.system and ka.model is kb.model
    assert key_data(a).count(b"\n") == 4  # one JSON text a part
    apart = key_of(key_data(b))  # without a caller's parts: nothing kept across calls
    assert apart == b and apart is not None and apart.system is not ka.system


@pytest.mark.parametrize("data", [b'"i"\n[["x"]]\n[]\n"s"\n[]', b'"i"\n1\n[]\n"s"\n[]', b'"i"\n[]\n[]\n"s"'])
def test_stored_key_lines_that_are_no_key_give_none(data):
    """Five lines key_data did not write (a pair of one item, a number for pairs, four parts): no key."""
    assert key_of(data) is None


def test_loaded_records_share_their_set_of_given_fields(tmp_path):
    """Loaded records whose lines gave the same fields hold one set of their names (22 MB less at
    10,000 records), equal to what pydantic gave each."""
    results = filed_fixtures(tmp_path / "results")
    resultindex.select(ResultStore(results))  # the index built
    sel = resultindex.select(ResultStore(results))
    plain = ResultStore(results).results()
    assert [r.model_fields_set for r in sel] == [r.model_fields_set for r in plain]
    assert len({id(r.__pydantic_fields_set__) for r in sel}) == len(
        {frozenset(r.model_fields_set) for r in sel}
    )
    copy = sel[0].model_copy(update={"test": "x"})  # a copy's set is its own
    assert copy.__pydantic_fields_set__ is not sel[0].__pydantic_fields_set__


def test_load_reads_each_file_once(tmp_path, monkeypatch):
    """A file's lines are read in one call (10,000 records in 1,667 files: ~60 ms less), the records
    those of the reader."""
    results = filed_fixtures(tmp_path / "results")
    resultindex.select(ResultStore(results))
    calls = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, off: calls.append(n) or real(fd, n, off))
    sel = resultindex.select(ResultStore(results))
    assert len(sel) > len(calls) == len(list(results.glob("*/bench.jsonl")))
    plain = [r.model_dump_json() for r in ResultStore(results).results()]
    assert all(r.model_dump_json() in plain for r in sel)


def test_clock_skew_is_read_without_getattr(tmp_path, monkeypatch):
    """clock_skew is read from the record's private values, not through BaseModel.__getattr__ (1.4 µs a
    read); the values are those set."""
    results = filed_fixtures(tmp_path / "results")
    resultindex.select(ResultStore(results))
    sel = resultindex.select(ResultStore(results))

    def boom(self, name):
        raise AssertionError(f"{name} read through __getattr__")

    monkeypatch.setattr(BenchRecord, "__getattr__", boom)
    assert [r.clock_skew for r in sel] == [None] * len(sel)


def _text(rng: random.Random) -> str:
    pick = [rng.randint(32, 127), rng.randint(128, 0x2FFF), rng.randint(0x10000, 0x10FFFF), 0x7F, 0xB1]
    return "".join(c for c in (chr(rng.choice(pick)) for _ in range(12)) if not 0xD800 <= ord(c) <= 0xDFFF)


def test_json_text_is_json_dumps_for_any_text():
    """The report's JSON is json.dumps(indent=2)'s, its non-ASCII characters and DEL escaped alike."""
    rng = random.Random(7)
    for _ in range(300):
        doc = {_text(rng): [_text(rng), 1.5, None, {"k": _text(rng)}]}
        assert json_text(dict(doc)) == json.dumps(doc, indent=2)
    many = {
        "k": "".join(chr(c) for c in range(0x100, 0x200))
    }  # more distinct characters than escaped in place
    assert json_text(dict(many)) == json.dumps(many, indent=2)


def test_json_text_escapes_without_a_wide_copy():
    """A report's few non-ASCII characters (± in every cell) are escaped in its bytes: no copy of the
    text at 2-4 bytes a character (10 MB of report took ~40 MB beside it)."""
    doc = {"rows": [{"cell": f"{i}.5 ± 0.{i % 10}", "n": i} for i in range(40_000)]}
    size = len(json_text(dict(doc)))
    tracemalloc.start()
    try:
        json_text(doc)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2.6 * size


def test_model_family_is_kept_per_type_and_name(tmp_path):
    """model_family reads a record's type once per (type, name) and says what it said before."""
    recs = ResultStore(filed_fixtures(tmp_path / "results")).results()
    facts._family_of.cache_clear()
    got = [verdict.model_family(r) for r in recs + recs]
    assert got[: len(recs)] == got[len(recs) :]
    assert facts._family_of.cache_info().hits >= len(recs)
    assert facts._family_of("qwen3moe 30B.A3B Q4_0", "m") == "qwen3moe 30B.A3B"
    assert facts._family_of("llama ?B F16", "m") == "llama ?B" and facts._family_of("", "m") == "m"


@pytest.mark.parametrize(
    "when",
    [
        "2026-11-29T17:11:29+00:00",
        "2026-11-29T17:11:29.123456+05:30",
        "0999-01-01T00:00:00+00:00",
        "0001-01-01T00:30:00+00:00",
        "2026-01-01T00:00:00-01:00",
    ],
)
def test_utc_text_is_strftime(when):
    """_utc_text writes what strftime("%Y-%m-%d %H:%M:%S") of the UTC time writes (a year before 1000
    without leading zeros, as strftime)."""
    t = datetime.fromisoformat(when)
    assert facts._utc_text(t) == t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    assert facts._utc_text(t + timedelta(seconds=1)) != facts._utc_text(t)


def test_plain_ascii_is_the_ascii_check_of_strip_controls():
    """plain_ascii (checked a MiB at a time) says what one check of the whole text says: no character a
    control sequence starts with, wherever it lies (a piece's edge included)."""
    from toolkit.core.text import plain_ascii, strip_controls

    base = "0123456789abcdef\n" * 200_000  # 3.4 MB
    assert plain_ascii(base) and strip_controls(base) is base
    for at in (0, (1 << 20) - 1, 1 << 20, len(base) - 1):
        for c in ("\x1b", "\x00", "\x7f", "\r"):
            bad = base[:at] + c + base[at + 1 :]
            assert not plain_ascii(bad)
            assert strip_controls(bad) == base[:at] + base[at + 1 :] or c == "\x1b"


def test_a_long_plain_report_is_echoed_in_pieces(monkeypatch, capsys):
    """A plain ASCII report (json) is written a MiB at a time (no 10 MB encoded copy beside it), the
    same bytes and one newline at the end; any other text in one piece."""
    import click

    from toolkit.cli import results as cli_results

    calls = []
    real = click.echo
    monkeypatch.setattr(click, "echo", lambda m=None, **k: calls.append(m) or real(m, **k))
    text = '{\n  "k": "' + "x" * 3_000_000 + '"\n}'
    cli_results._echo_report(text)
    assert capsys.readouterr().out == text + "\n" and len(calls) == 4  # 3 pieces and the newline
    calls.clear()
    cli_results._echo_report("a ± b\n")
    assert capsys.readouterr().out == "a ± b\n" and calls == ["a ± b\n"]
