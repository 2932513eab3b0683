"""Streaming JSONL import (issue 24, piece 2): a JSONL file larger than STREAM_ABOVE is read line by
line (twice: hash, sets and repeated tests; then the records, written in batches), through the same
validity pass and grouping as a file read whole, and with no size limit (MAX_IMPORT_BYTES stays for
the formats read whole). Speed and memory are measured by benchmarks/import_scale.py, not here."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.conftest import DATA
from toolkit.core.errors import BadInput
from toolkit.results import importer
from toolkit.results.records import ResultStore

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
    parts.append((CASES / "two-builds-one-file.jsonl").read_bytes().splitlines(keepends=True)[0])  # a repeat
    parts += [b'{"n_prompt": 512, "avg_ts": \xff}\n', b'{"n_prompt": 512, "n_gen": 0, "avg_ts": 1.0\n']
    parts.append(b'{"n_prompt": 0, "n_gen": 0, "avg_ts": 5.0}\n')
    f.write_bytes(b"".join(parts))
    return f


def test_a_streamed_jsonl_gives_what_the_whole_file_read_gives(tmp_path: Path, monkeypatch) -> None:
    f = _messy(tmp_path)
    whole_store, whole = _import(tmp_path, "whole", f)
    monkeypatch.setattr(importer, "STREAM_ABOVE", 0)
    stream_store, streamed = _import(tmp_path, "stream", f)
    assert streamed.records == whole.records > 0
    for field in ("digest", "refused", "skipped", "repeated", "repaired", "per_file", "formats"):
        assert getattr(streamed, field) == getattr(whole, field), field
    assert [s.name for s in streamed.sets] == [s.name for s in whole.sets]
    assert [r.model_dump() for r in stream_store.results()] == [r.model_dump() for r in whole_store.results()]
    assert streamed.refused and streamed.skipped and streamed.repeated and streamed.repaired


def test_a_jsonl_over_the_whole_read_limit_is_imported_not_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(importer, "MAX_IMPORT_BYTES", 1 << 20)
    f = tmp_path / "big.jsonl"
    rows = _scale().generate(f, 3 << 20)
    assert f.stat().st_size > importer.MAX_IMPORT_BYTES
    store, res = _import(tmp_path, "r", f)
    assert res.records == rows and len(res.repeated) == rows // 50
    assert len(store.results()) == rows
    again = importer.import_files(store, [f], label="x", now=NOW)
    assert again.already and again.records == 0


def test_a_streamed_file_without_a_measurement_names_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(importer, "STREAM_ABOVE", 0)
    f = tmp_path / "none.jsonl"
    f.write_text('{"n_prompt": 0, "n_gen": 0, "avg_ts": 1.0}\n' * 3)
    with pytest.raises(
        BadInput, match=r"none\.jsonl: no llama-bench result rows found that are measurements: 3"
    ):
        _import(tmp_path, "r", f)
