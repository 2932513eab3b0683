"""Breaker round 11, the items left (docs/reliability-log.md section 15, "Round 11, left items closed"): the
decode fold and `ub-no-effect` compared every pair of micro-batch sizes (quadratic: minutes at 8,000
ubs); the bench's depth fit read the user's GGUF with GGUFReader beside the bounded header reader;
the power plots' trace lookup raised OSError for a run id + model name over 255 bytes; the markdown
caveat line took a model name unescaped; `report -o` wrote no final newline; measure's rows and
reproduce's bench-matrix.yaml were written through a link. Each test fails on the code before its fix;
hostile files and links live under tmp_path."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import time
from pathlib import Path

import pytest

from tests.support.project import DATA, precious_file
from tests.support.records import make_record
from toolkit.analysis import plots, report, tables
from toolkit.analysis.facts import Facts, ReportOptions
from toolkit.core.errors import BadInput
from toolkit.matrix.depth import KvShape
from toolkit.models import gguf_meta

ROOT = Path(__file__).resolve().parent.parent
RUN = "20261129T170627Z-6891c7"  # the run of results-cpu-a.jsonl
SLOW = (
    3.0  # seconds: each timed step below takes well under 0.5 s when n log n, tens of seconds when quadratic
)


# ---------------------------------------------------------------- 1. the fold, n log n


def _pairwise_holds(points: list[tuple[float, float]], noisy: float) -> list[bool]:
    """The rule as it was: each point agrees with every other (tables._within noise_band), all known."""
    if any(r > noisy for _, r in points):
        return []
    return [
        all(tables._within(v, w, tables.noise_band(r, s)) for j, (w, s) in enumerate(points) if j != k)
        for k, (v, r) in enumerate(points)
    ]


@pytest.mark.parametrize("seed", range(6))
def test_the_band_gives_what_every_pair_gave(seed: int) -> None:
    """Random sets, many points near the band's edge (values within a few %, rsds 0-3 %, repeats and
    zero rsds): each point's answer the same as the pairwise rule's."""
    rng = random.Random(seed)
    for _ in range(150):
        n = rng.randint(2, 40)
        base = rng.uniform(1, 5000)
        pts = [
            (
                round(base * (1 + rng.uniform(-0.06, 0.06)), rng.choice([0, 1, 3])),
                rng.choice([0.0, rng.uniform(0, 0.03), 0.01]),
            )
            for _ in range(n)
        ]
        assert tables._band_holds(pts, 0.05) == _pairwise_holds(pts, 0.05), pts


def _tg(n: int) -> list:
    return [make_record("a", "rocm", n=128, ub=64 + i, avg=100.0 + (i % 7) * 0.1, sd=1.0) for i in range(n)]


def test_the_decode_fold_of_2000_ubs_is_not_quadratic() -> None:
    """2,000 tg128 rows differing only in ub, all within noise: folded into one row (was 12 s here, the
    pairs compared twice; 8,000 ubs took minutes)."""
    t = tables.axis_table(_tg(2000), "decode")
    start = time.perf_counter()
    folded, did = tables.fold_decode_ub(t)
    assert time.perf_counter() - start < SLOW
    assert did and [r.test for r in folded.rows] == ["tg128"]
    far = tables.axis_table(
        [*_tg(300), make_record("a", "rocm", n=128, ub=4096, avg=300.0, sd=1.0)], "decode"
    )
    assert tables.fold_decode_ub(far) == (far, False)  # one size beyond the band: no row folded


def test_ub_no_effect_over_2000_ubs_is_not_quadratic() -> None:
    """2,000 pp512 records differing only in ub, equal within noise: each flagged `ub-no-effect` (was
    40 s here); one record beyond the band leaves every one unflagged, as each pair said."""
    recs = [make_record("a", "rocm", p=512, ub=64 + i, avg=1000.0 + (i % 5), sd=10.0) for i in range(2000)]
    rows = [tables.Row(r.test, {}, (), facts={"c": Facts.of(r)}, flags={"c": []}) for r in recs]
    start = time.perf_counter()
    tables._mark_ub_no_effect(rows, ReportOptions())
    assert time.perf_counter() - start < SLOW
    assert all(row.flags["c"] == ["ub-no-effect"] for row in rows)
    t = tables.axis_table(
        [*recs[:50], make_record("a", "rocm", p=512, ub=8192, avg=2000.0, sd=10.0)], "prefill"
    )
    assert not any("ub-no-effect" in f for row in t.rows for f in row.flags.values())


# ---------------------------------------------------------------- 2. the depth fit's GGUF header


def _reader_shape(path: str) -> KvShape | None:
    """gguf_kv_shape as it was (gguf's GGUFReader): the values the bounded reader must keep."""
    from gguf import GGUFReader

    reader = GGUFReader(path)

    def field(key: str):
        f = reader.fields.get(key)
        if f is None or not f.data:
            return None
        v = f.parts[f.data[0]]
        return bytes(v).decode(errors="replace") if v.dtype.kind == "u" and v.dtype.itemsize == 1 else v[0]

    arch = field("general.architecture")
    n_layer, heads = field(f"{arch}.block_count"), field(f"{arch}.attention.head_count")
    kv = field(f"{arch}.attention.head_count_kv") or heads
    head = field(f"{arch}.attention.key_length")
    if head is None and heads:
        head = (field(f"{arch}.embedding_length") or 0) // int(heads)
    if not n_layer or not kv or not head:
        return None
    value = field(f"{arch}.attention.value_length") or head
    return KvShape(int(n_layer), int(kv), int(head), int(value))


def _written(path: Path, kv: int | list[int], *, key_length: int | None) -> Path:
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(3)
    w.add_head_count(8)
    w.add_head_count_kv(kv)
    w.add_embedding_length(512)
    if key_length:
        w.add_key_length(key_length)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_the_kv_shape_is_read_by_the_bounded_reader_with_the_same_values(tmp_path: Path) -> None:
    """The tiny model, a model without key_length (embedding / heads): the same KvShape as GGUFReader
    read. (A per-layer head_count_kv array, whose first item GGUFReader's field gave, is summed over
    its layers since round 13: tests/test_round13_left.py.)"""
    from toolkit.models.tiny import generate_tiny_qwen3moe

    files = [
        generate_tiny_qwen3moe(tmp_path / "tiny.gguf"),
        _written(tmp_path / "no-key-length.gguf", 4, key_length=None),
    ]
    got = [gguf_meta.gguf_kv_shape(str(p)) for p in files]
    assert got == [_reader_shape(str(p)) for p in files]
    assert got[1:] == [KvShape(3, 4, 64, 64)]


def test_the_depth_fit_reads_a_hostile_header_within_bounds(tmp_path: Path) -> None:
    """A GGUF declaring a 2*10^6-item array before its shape keys: GGUFReader built every item (65 s,
    1.4 GB here); the bounded reader skips it at once and still finds the shape."""
    path = tmp_path / "h.gguf"
    items = 2_000_000

    def kv(key: str, vtype: int, payload: bytes) -> bytes:
        return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", vtype) + payload

    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 4))
        f.write(kv("a", 9, struct.pack("<IQ", 0, items) + b"\x01" * items))
        f.write(kv("general.architecture", 8, struct.pack("<Q", 5) + b"llama"))
        f.write(kv("llama.block_count", 4, struct.pack("<I", 2)))
        f.write(kv("llama.attention.key_length", 4, struct.pack("<I", 64)))
    start = time.perf_counter()
    shape = gguf_meta.gguf_kv_shape(str(path))
    assert time.perf_counter() - start < SLOW
    assert shape is None  # no head count: no estimate, the depth is kept (as before)
    with open(path, "r+b") as f:  # the same header with a head count
        f.seek(16)
        f.write(struct.pack("<Q", 5))
        f.seek(0, 2)
        f.write(kv("llama.attention.head_count", 4, struct.pack("<I", 4)))
    assert gguf_meta.gguf_kv_shape(str(path)) == KvShape(2, 4, 64, 64)


# ---------------------------------------------------------------- 3. trace names no file can have


def test_a_trace_name_over_255_bytes_is_a_missing_trace_not_an_error(tmp_path: Path) -> None:
    """A record's run id + model name make the trace's file name: over 255 bytes Path.is_file raised
    OSError (File name too long) and `report --format html` failed. Now the trace is missing (a note)."""
    results = tmp_path / "results"
    results.mkdir()
    r = make_record("a", "rocm", p=512, avg=1000.0, sd=10.0, model="m" * 300, telemetry={"power_w": 1.0})
    ts = tables.tables([r])
    assert len(plots.trace_runs(ts, results)[0].candidates[0].name) > 255
    figs, notes = plots.telemetry_figures(ts, results)
    assert figs == {} and len(notes) == 1 and "trace is missing" in notes[0] and len(notes[0]) <= 400
    assert "no power plot" in report.render([r], "html", results_root=results)


# ---------------------------------------------------------------- 4. the caveat line in markdown


def test_the_smoke_caveat_escapes_a_model_name_in_markdown() -> None:
    """A tiny stand-in model named with `|`, `<b>` and a link: the github caveat line took it raw."""
    name = "tiny|x <b>y</b> [z](http://e)"
    r = make_record("a", "rocm", p=512, avg=1000.0, sd=10.0, model=name)
    r.model.size_bytes = r.raw["model_size"] = 1_600_000  # llama-bench's size is the one judged (fix49a)
    page = report.render([r], "github")
    line = next(x for x in page.splitlines() if "smoke-test data" in x)
    assert r"tiny\|x \<b\>y\</b\> [z]\(http\://e)" in line, line  # `\:`: no autolink either (cases40)
    assert "tiny|x <b>y</b> [z](http://e)" in report.render([r], "text", width=400)  # text: as it is


# ---------------------------------------------------------------- 5. `-o` ends with a newline


@pytest.mark.parametrize("fmt", report.FORMATS)
def test_every_report_file_ends_with_one_newline(tmp_path: Path, fmt: str) -> None:
    """`report --format text -o FILE` (and github, json) wrote no final newline; stdout has one."""
    recs = [make_record("a", "rocm", p=512, avg=1000.0, sd=10.0)]
    out = tmp_path / f"page.{fmt}"
    report.publish(recs, fmt, output=out, plots_dir=tmp_path / "plots")
    data = out.read_bytes()
    assert data.endswith(b"\n") and not data.endswith(b"\n\n")


# ---------------------------------------------------------------- 6. writes through a link


def test_measures_rows_are_never_written_through_a_link(tmp_path: Path) -> None:
    """measure's row file, a link planted at it after the output check: the rows truncated and wrote
    the link's target (Path.open). Now exit 4 naming the link, the target untouched."""
    from toolkit.cli.bench import _RowFile

    precious = precious_file(tmp_path)
    out = tmp_path / "results" / "measure" / "run.jsonl"
    out.parent.mkdir(parents=True)
    os.symlink(precious, out)
    with pytest.raises(BadInput, match=r"run\.jsonl is a symbolic link \(to .*precious\.txt") as err:
        _RowFile(out, tmp_path / "results")
    assert err.value.exit_code == 4 and precious.read_text() == "precious\n"


def test_measures_summary_line_is_never_written_through_a_link(tmp_path: Path) -> None:
    """A command that printed no row: its summary line was written with Path.write_text, through a
    link planted at the output during the run. Now the link is replaced, its target untouched."""
    from toolkit.bench import measure

    precious = precious_file(tmp_path)
    out = tmp_path / "results" / "measure" / "run.jsonl"
    out.parent.mkdir(parents=True)
    os.symlink(precious, out)
    m = measure.Measured(command=["true"], exit_code=0, seconds=0.1, rows=[], window={})
    measure.write_measured(m, out)
    assert precious.read_text() == "precious\n"
    assert not out.is_symlink() and json.loads(out.read_text())["command"] == ["true"]


def test_reproduces_bench_matrix_is_never_written_through_a_link(tmp_path: Path) -> None:
    """A published folder's reproduce/bench-matrix.yaml linked to its own run.json: core.paths.contained
    resolved the link (inside the folder) and the matrix overwrote run.json. Now exit 4 naming the link."""
    from toolkit.publish import reproduce, run_folder, run_read
    from toolkit.results.records import ResultStore

    p = tmp_path / "p"
    (p / "results" / "a504e0178239").mkdir(parents=True)
    shutil.copy(DATA / "results-cpu-a.jsonl", p / "results" / "a504e0178239" / "bench.jsonl")
    out = tmp_path / "out"
    run_folder.export_run(ResultStore(p / "results"), RUN, out, None)
    run, _, _ = run_read.load_run(out)
    (out / "reproduce").mkdir()
    os.symlink("../run.json", out / "reproduce" / "bench-matrix.yaml")
    before = (out / "run.json").read_bytes()
    paths = {m.name: tmp_path / "model.gguf" for m in run.models}
    with pytest.raises(
        BadInput, match=r"bench-matrix\.yaml is a symbolic link \(to '\.\./run\.json'\)"
    ) as err:
        reproduce.bench_matrix(run, (out / "reproduce").resolve(), paths, 60.0)
    assert err.value.exit_code == 4 and (out / "run.json").read_bytes() == before
    os.unlink(out / "reproduce" / "bench-matrix.yaml")
    lm = reproduce.bench_matrix(run, (out / "reproduce").resolve(), paths, 60.0)
    assert lm.path.read_text().startswith(f"# The cases of run {RUN}")
