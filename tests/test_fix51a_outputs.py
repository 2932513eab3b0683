"""Output faults last session's newcomers and breakers found and left (nc50b S5-S8, nc50 S6, brk50b F4,
F5 and the import --json memory):

- S5: a group of refusals named its range two ways, `/p/f.jsonl:2 to /p/f.jsonl:31` and `line 1 to
  line 25`: one form, `lines 2 to 31`, the file named once;
- memory: `toolkit import --json` kept every refused row (0.6-1 KB each): refusals and skipped lines are
  kept by reason (import_said.Reasons: count, merged line ranges, first rows), --json says so;
- S6: a model named from llama-bench's model_type without a size read `qwen3moe ?B`: the model's name;
- S7: rows a bench of this project measured, imported again, were a second identical column;
- S8: the different-models hint said `toolkit bench -m NAME`: the real model, pasteable;
- F4: with 3+ images and no ub every image measured, the decode fold's note claimed one;
- F5: the verdict's `toolkit report -i A -i B` dropped the user's report options;
- nc50 S6: export-run's note named the swept axes that differ, not `repetitions`.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tracemalloc
from pathlib import Path

from tests.support.project import DATA
from tests.support.records import CPU_A
from tests.support.runs import tk

BASE = json.loads(CPU_A.read_text().splitlines()[0])["raw"]
"""A llama-bench row of this project's CPU image (tiny-qwen3moe, `qwen3moe ?B F16`)."""


def _row(
    mtype: str = "qwen3moe ?B F16", mfile: str = "tiny-qwen3moe.gguf", ts: float = 100.0, **more
) -> dict:
    """A llama-bench jsonl row of `mtype` from `mfile` at `ts` tok/s (samples agree with it), `more` fields."""
    more = {"n_prompt": 512, "n_gen": 0, **more}
    tokens = more["n_gen"] or more["n_prompt"]
    ns = int(tokens / ts * 1e9)
    speed = {
        "avg_ts": ts,
        "samples_ts": [ts] * 2,
        "avg_ns": ns,
        "samples_ns": [ns] * 2,
        "stddev_ts": ts / 500,
    }
    return {**BASE, **speed, "stddev_ns": ns // 500, "model_type": mtype, "model_filename": mfile, **more}


def _rows(*changes: dict) -> str:
    return "".join(json.dumps(_row(**c)) + "\n" for c in changes)


# ---------------------------------------------------------------- S5 and memory: refusals by reason


def test_a_group_of_refusals_names_its_lines_one_way_whether_or_not_rows_were_kept(tmp_path: Path) -> None:
    """nc50b S5: `f.jsonl:2: ... (30 rows of this, f.jsonl:2 to f.jsonl:31)` on an import that kept rows,
    `line 1: ... (25 rows of this, line 1 to line 25)` on one that kept none: now `lines 2 to 31` both."""
    f = tmp_path / "many.jsonl"
    f.write_text(_rows({}, *({"n_threads": 0} for _ in range(30))))
    got = tk(tmp_path, "import", "--results", "r", "--label", "x", str(f))
    assert got.returncode == 0, got.stderr
    assert f"  {f}:2: n_threads is 0" in got.stderr and got.stderr.count(str(f)) == 1, got.stderr
    assert "(30 rows of this, lines 2 to 31)" in got.stderr, got.stderr
    f.write_text(_rows(*({"n_threads": 0} for _ in range(25))))
    got = tk(tmp_path, "import", "--results", "r", "--label", "y", str(f))
    assert got.returncode == 4 and "  line 1: n_threads is 0" in got.stderr, got.stderr
    assert "(25 rows of this, lines 1 to 25)" in got.stderr, got.stderr


def test_import_keeps_refusals_by_reason_not_by_row_and_json_says_it_is_summarised(tmp_path: Path) -> None:
    """brk50b: 1,000,000 refused rows kept 0.6-1 GB (every refusal a string, for --json). Now memory
    holds each reason once: 60,000 refused rows, streamed, peak well under what 60,000 strings take;
    --json gives per reason its rows, merged line ranges and first rows, and says it is summarised."""
    from toolkit.results import importer
    from toolkit.results.import_said import EXAMPLES
    from toolkit.results.records import ResultStore

    f = tmp_path / "big.jsonl"
    bad = _rows({"n_threads": 0})
    f.write_text(_rows({}) + bad * 30_000 + _rows({"n_ubatch": 0}) + bad * 30_000)
    tracemalloc.start()
    res = importer.import_files(ResultStore(tmp_path / "r"), [f], label="x")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert res.records == 1 and len(res.refused) == 60_001, res.refused
    assert peak < 16 << 20, peak  # was 28 MB for 60,000 (~470 bytes a refused row); 10 MB now
    assert len(list(res.refused)) == EXAMPLES + 1, list(res.refused)
    got = tk(tmp_path, "import", "--json", "--results", "r2", "--label", "x", str(f))
    refused = json.loads(got.stdout)["result"]["refused"]
    assert got.returncode == 0 and refused["rows"] == 60_001 and "per reason" in refused["summarised"]
    threads, ub = refused["reasons"]
    assert threads["rows"] == 60_000 and threads["lines"] == [[str(f), 2, 30001], [str(f), 30003, 60002]]
    assert len(threads["examples"]) == EXAMPLES and threads["examples"][0].startswith(f"{f}:2: n_threads")
    assert ub["rows"] == 1 and ub["lines"] == [[str(f), 30002, 30002]], ub


def _imported(tmp_path: Path, sets: dict[str, list[dict]]) -> Path:
    """Each label's rows imported into tmp_path/r; the results folder."""
    for label, rows in sets.items():
        f = tmp_path / f"{label}.jsonl"
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        got = tk(tmp_path, "import", "--results", "r", "--label", label, str(f))
        assert got.returncode == 0, got.stderr
    return tmp_path / "r"


TG64 = {"n_prompt": 0, "n_gen": 64}


def _line(text: str, start: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(start))


# ---------------------------------------------------------------- S6, S8, F5: the verdict's words


def test_a_model_whose_type_has_no_size_is_named_by_its_name_and_the_report_it_offers_keeps_its_options(
    tmp_path: Path,
) -> None:
    """nc50b S6: `the images that measured tg64 of qwen3moe ?B`, and `qwen3moe ?B F16` in the model line:
    llama.cpp's `?B` names no size; the model's name is said. brk50b F5: the offered `toolkit report -i a
    -i b` dropped --min-margin 60 (pasted, it crowned b, +20%); it keeps the user's options."""
    _imported(
        tmp_path,
        {
            "a": [_row(ts=50.0, **TG64)],
            "b": [_row(ts=60.0, **TG64)],
            "c": [_row("qwen3 0.6B Q8_0", "q.gguf", ts=70.0, n_prompt=0, n_gen=32)],
        },
    )
    got = tk(tmp_path, "report", "--results", "r", "--format", "github", "--min-margin", "60")
    assert got.returncode == 0 and "?B" not in got.stdout, got.stdout
    decode = _line(got.stdout, "- decode:")
    assert "the images that measured tg64 of tiny-qwen3moe.gguf are ranked by" in decode, decode
    assert "(tiny-qwen3moe.gguf, sha256 not recorded, 1.52 MiB, qwen3moe F16;" in got.stdout, got.stdout
    offered = decode.split("ranked by `")[1].split("`")[0]
    assert "--min-margin 60.0" in offered and "--format github" in offered, offered
    pasted = tk(tmp_path, *shlex.split(offered)[1:])
    assert pasted.returncode == 0 and "no clear winner" in _line(pasted.stdout, "- decode:"), pasted.stdout


def test_the_different_models_hint_names_the_model_and_the_images_that_lack_it(tmp_path: Path) -> None:
    """nc50b S8: `toolkit bench -m NAME` named no model. The model most images measured, as this project's
    bench named it, for each image built here that lacks it; an import is told to import (no bench measures
    it)."""
    from tests.support.records import make_record
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "r")
    for image, model, digest, mtype in (
        ("cpu", "tiny", None, "qwen3moe ?B F16"),
        ("gpu", "llama-3b", None, "llama 3B Q4_K - Medium"),
        ("pub", "llama-3b", "import:" + "ab" * 32, "llama 3B Q4_K - Medium"),
        ("old", "tiny.gguf", "import:" + "cd" * 32, "qwen3moe ?B F16"),
    ):
        r = make_record(image, "cpu", p=512, avg=100.0, digest=digest)
        r.model.name, r.model.sha256 = model, model[0] * 64
        r.raw = {**r.raw, "model_type": mtype, "model_n_params": 3210000000, "model_size": 3210000000}
        store.add_result(r)
    got = tk(tmp_path, "report", "--results", "r", "--format", "github")
    said = (
        "measure llama-3b on each (`toolkit bench --results r -i cpu -m llama-3b`; import a result file of "
    )
    assert said + "llama-3b for old)" in got.stdout, got.stdout


# ---------------------------------------------------------------- F4: the decode fold's note


def test_the_decode_fold_note_is_true_for_three_images_without_a_shared_ub(tmp_path: Path) -> None:
    """brk50b F4: ta{ub64, ub128}, tb{ub512, ub1024}, tc{ub64, ub512}: no ub every image measured, yet the
    note said each cell was `the measurement at a ub every image measured`. Each cell is one the most
    images measured (ub64 or ub512, ub512 first), and the note names each image's where they differ."""
    tg = [_row(ts=v, n_ubatch=u, **TG64) for v, u in ((50.0, 64), (50.01, 128))]
    tgb = [_row(ts=v, n_ubatch=u, **TG64) for v, u in ((60.0, 512), (60.01, 1024))]
    tgc = [_row(ts=v, n_ubatch=u, **TG64) for v, u in ((55.0, 64), (55.01, 512))]
    _imported(tmp_path, {"ta": tg, "tb": tgb, "tc": tgc})
    got = tk(tmp_path, "report", "--results", "r", "--format", "github")
    note = _line(got.stdout, "- decode rows:")
    assert "(else at one the most images measured)" in note, note
    apart = note.split("so the cells differ in ub: ")[1]
    assert apart.startswith("tg64 (ta@import:") and " ub64, tb@import:" in apart, apart
    assert apart.count(" ub512") == 2 and "| 50.00 ± 0.10 " in got.stdout, (apart, got.stdout)


# ---------------------------------------------------------------- S7: a bench's rows imported again


def test_rows_a_bench_here_measured_are_not_imported_again(tmp_path: Path) -> None:
    """nc50b S7: the raw rows of a bench's records, imported into its own results folder, were a second
    identical column. They are the same measurements: left out, said, exit 0 with nothing added."""
    bench = tmp_path / "r" / "a504e0178239" / "bench.jsonl"
    bench.parent.mkdir(parents=True)
    shutil.copy(DATA / "results-cpu-a.jsonl", bench)
    recs = [json.loads(ln) for ln in bench.read_text().splitlines()]
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps(r["raw"]) + "\n" for r in recs if r["status"] == "ok"))
    got = tk(tmp_path, "import", "--results", "r", "--label", "again", str(raw))
    assert got.returncode == 0 and "measured here before, under the name cpu; nothing added" in got.stdout
    said = "6 row(s) already measured here by run 20261129T170627Z-6891c7 (image cpu): not imported again"
    assert said in got.stderr and sorted(p.name for p in (tmp_path / "r").iterdir()) == [
        ".index.sqlite",
        "a504e0178239",
    ], (got.stderr, list((tmp_path / "r").iterdir()))


def test_a_row_whose_measurement_differs_from_the_benchs_is_imported(tmp_path: Path) -> None:
    """The claim turned false: the same raw rows with one row's figures changed (another measurement of
    the same test) is no row a bench here measured: that row is imported, the 5 unchanged ones are not."""
    bench = tmp_path / "r" / "a504e0178239" / "bench.jsonl"
    bench.parent.mkdir(parents=True)
    shutil.copy(DATA / "results-cpu-a.jsonl", bench)
    rows = [
        json.loads(ln)["raw"] for ln in bench.read_text().splitlines() if json.loads(ln)["status"] == "ok"
    ]
    rows[0] = dict(
        rows[0], avg_ts=rows[0]["avg_ts"] * 0.9, samples_ts=[v * 0.9 for v in rows[0]["samples_ts"]]
    )
    rows[0].pop("samples_ns", None), rows[0].pop("avg_ns", None), rows[0].pop("stddev_ns", None)
    rows[0]["stddev_ts"] = rows[0]["stddev_ts"] * 0.9
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = tk(tmp_path, "import", "--results", "r", "--label", "again", str(raw))
    said = "5 row(s) already measured here by run 20261129T170627Z-6891c7 (image cpu): not imported again"
    assert got.returncode == 0 and said in got.stderr, (got.stdout, got.stderr)
    assert "nothing added" not in got.stdout and "1 result" in got.stdout, got.stdout


# ---------------------------------------------------------------- nc50 S6: export-run's matrix note


def test_an_export_names_every_setting_its_matrix_does_not_share_with_the_run(
    tmp_path: Path, matrix_data
) -> None:
    """nc50 S6: the note named the swept axes that differ, not `repetitions: 3` beside a run of 10."""
    from tests.support.sinks import export_notes

    axes = {"n_prompt": [128, 1024], "n_gen": [64], "n_ubatch": [64, 512], "n_batch": [512], "repetitions": 3}
    _err, notes = export_notes(tmp_path, matrix_data, axes)
    said = [n for n in notes if n.startswith("matrix.yaml is the matrix given at export")]
    assert len(said) == 1 and said[0].endswith("measured): repetitions 3 where the run measured 10"), notes
