"""Stand-ins around real toolkit code: the llama-bench row sink with a saver and an observer that only
collect (no container, no sampler: tests/test_row_sink.py), and an export of a stored run through the
real command (tests/test_lead44_export_matrix.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.project import cpu_project
from tests.support.records import CPU_A, load
from tests.support.runs import tk
from toolkit.bench.runners.llama_bench import RowSink, file_identity
from toolkit.matrix.api import BenchAxes, ImageSpec
from toolkit.results.records import ImageRef, ModelRef, ResultStore

DATA = Path(__file__).resolve().parents[1] / "data"
ROWS = [
    json.loads(ln) for ln in (DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines() if ln.strip()
]


class Saver:
    def __init__(self):
        self.saved = []

    def save(self, rec, reraise=True):
        self.saved.append(rec)


class Observer:
    """No sampling here: the sink only asks it for each test's telemetry and hands it stderr lines."""

    def __init__(self):
        self.lines, self.tokens = [], []

    def test(self, raw, tokens):
        self.tokens.append(tokens)
        return {}

    def line(self, line):
        self.lines.append(line)


def row_sink(tmp_path: Path, *, cold=None) -> tuple[RowSink, Saver, list, Path]:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    ref = ModelRef(name="tiny", path=str(model), sha256="cd" * 32, size_bytes=64)
    image = ImageRef(name="cpu", ref="toolkit/cpu:x", digest="sha256:" + "ab" * 32, backend="cpu")
    base = dict(run_id="r1", runner="llama-bench", method="llama-bench", image=image, model=ref)
    saver, events = Saver(), []
    spec = ImageSpec(name="cpu", template="cpu.Dockerfile.j2", backend="cpu")
    record_event = lambda kind, **kw: events.append((kind, kw))  # noqa: E731
    sink = RowSink(
        spec,
        ref,
        False,
        BenchAxes().repetitions,
        file_identity(model),
        base,
        saver,
        Observer(),
        record_event,
        cold,
    )
    return sink, saver, events, model


RUN = "20261129T170627Z-6891c7"  # results-cpu-a.jsonl: n_prompt 0/128/1024, n_ubatch 64/512, n_batch 512


def export_notes(
    tmp_path: Path, matrix_data: dict, bench: dict, edit=lambda rec: rec
) -> tuple[str, list[str]]:
    matrix_data["bench"] = {**matrix_data.get("bench", {}), **bench}
    matrix = cpu_project(tmp_path / "p", matrix_data)
    store = ResultStore(matrix.parent / "results")
    for rec in load(CPU_A):
        store.add_result(edit(rec))
    got = tk(matrix.parent, "export-run", RUN, "-o", str(tmp_path / "out"))
    assert got.returncode == 0, got.stderr
    return got.stderr, json.loads((tmp_path / "out" / "run.json").read_text())["notes"]
