"""fix50c: nc50's compare and reproduce findings. (S3) compare joins decode tests across micro-batches as
the report folds them, also where no ub is on both sides, and on the join's own fields (a field one side
never recorded no longer keeps the tg rows apart); prefill stays separated by ub. (S4) reproduce's closing
compare command, its --json next_commands and the exported README put the published run as A, as the
table does. (S5) the fields recorded on one side only are named per side."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.support.records import make_record
from tests.support.runs import tk
from toolkit.analysis import compare, compare_text, report
from toolkit.core.errors import BadInput
from toolkit.results.records import ResultStore

# ------------------------------------------------------------ S3: decode joined across the micro-batch


def _runs(
    root: Path, a_2048: float = 93.1, b_raw: dict | None = None, b_sha: str | None = None
) -> ResultStore:
    """nc50's two runs: A (the README's matrix) pp512 and tg128 at ub512 and ub2048 (tg 93.0 / `a_2048`);
    B (matrix edited) pp128, pp512 and tg128 at ub128 only, its rows' raw extended by `b_raw`."""
    store = ResultStore(root)
    for ub, tg in ((512, 93.0), (2048, a_2048)):
        store.add_result(make_record("cpu", "cpu", n=128, ub=ub, avg=tg, sd=0.5, run_id="run-a"))
        store.add_result(make_record("cpu", "cpu", p=512, ub=ub, avg=3000.0 + ub, sd=10.0, run_id="run-a"))
    b = [make_record("cpu", "cpu", n=128, ub=128, avg=80.0, sd=0.4, run_id="run-b", raw=b_raw)]
    b += [
        make_record("cpu", "cpu", p=p, ub=128, avg=2000.0, sd=10.0, run_id="run-b", raw=b_raw)
        for p in (128, 512)
    ]
    for r in b:
        store.add_result(
            r.model_copy(update={"model": r.model.model_copy(update={"sha256": b_sha or r.model.sha256})})
        )
    return store


def test_compare_joins_tg_measured_at_other_micro_batches_as_the_report_folds_them(tmp_path: Path) -> None:
    """`toolkit compare RUN1 RUN2` said "no test in common" (exit 4) though the report shows one tg128 row."""
    store = _runs(tmp_path / "results")
    assert "| tg128 " in report.render(store.results())
    c = compare.compare(store, "run-a", "run-b")
    (tg,) = c.rows
    assert (tg.test, tg.fa.record.n_ubatch, tg.fb.record.n_ubatch) == ("tg128", 512, 128)
    assert c.only_a == ["pp512 ub2048", "pp512 ub512"] and c.only_b == ["pp128 ub128", "pp512 ub128"]
    assert [r.test for r in c.regressions] == ["tg128"]
    got = tk(tmp_path, "compare", "--results", "results", "run-a", "run-b", "--format", "github")
    assert got.returncode == 6 and "| tg128 " in got.stdout, (got.returncode, got.stdout, got.stderr)
    assert compare.DECODE_UB_NOTE in got.stdout and "pp512 ub128" in got.stdout  # prefill stays apart by ub


def test_a_field_one_side_never_recorded_does_not_keep_tg_apart(tmp_path: Path) -> None:
    """The fold grouped on every field a record holds: B's rows with a field A never recorded (left out of
    the join) kept tg128 ub128 apart from A's tg128, both then named as measured on one side only."""
    store = _runs(tmp_path / "results", b_raw={"cpu_mask": "0x0"})
    raw = {"cpu_mask": "0x0"}  # a prefill test on both sides: the join is made, the tg rows were not folded
    store.add_result(make_record("cpu", "cpu", p=512, avg=2900.0, sd=10.0, run_id="run-b", raw=raw))
    c = compare.compare(store, "run-a", "run-b")
    assert [r.test for r in c.rows] == ["pp512 ub512", "tg128"] and "tg128" not in c.missing_text(), (
        c.missing_text()
    )


def test_tg_at_other_micro_batches_stays_apart_where_they_differ_or_the_models_do(tmp_path: Path) -> None:
    """A's ub2048 beyond noise of its ub512: the report keeps each ub, so compare has no test in common and
    says why; another file of the same shape (its sha256) is never joined."""
    with pytest.raises(BadInput, match=r"tg128 on both sides at other micro-batches are one test only where"):
        compare.compare(_runs(tmp_path / "far", a_2048=60.0), "run-a", "run-b")
    with pytest.raises(BadInput, match="no test in common"):
        compare.compare(_runs(tmp_path / "sha", b_sha="ef" * 32), "run-a", "run-b")


# ------------------------------------------------------------ S4: reproduce's compare in its table's order


def test_reproduce_prints_its_compare_with_the_published_run_as_a(
    tmp_path: Path, matrix_data: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table says A: the recorded run, B: this one; the compare it printed last put the new run first,
    so pasted, every A:/B: flag and the speed-up flipped. Text, markdown, --json and the README agree now."""
    from tests.support.exported import NEW, RUN, exported_folder, labelled_records, pasted_commands
    from toolkit.publish import repro_output
    from toolkit.publish import reproduce as repro

    out = exported_folder(tmp_path, matrix_data)
    rows = repro.compare_records(labelled_records(RUN), labelled_records(NEW, scale=1.01), threshold=5)
    rep = repro.Reproduction(RUN, NEW, out, out / "reproduce" / "results", 5, rows=rows)
    monkeypatch.chdir(out)
    said = repro_output.reproduction_json(rep)["next_commands"]["compare"]
    assert said.startswith(f"toolkit compare {RUN} {NEW} "), said
    readme = (out / "README.md").read_text()
    typed = re.search(r"`(toolkit compare [^`]*NEW_RUN[^`]*)`", readme)[1].replace("NEW_RUN", NEW)
    for fmt in ("text", "github"):
        tail = repro_output.format_reproduction(rep, fmt).splitlines()[-1]
        assert "(A: the published, B: this one, as in the table)" in tail and said in tail, tail
    for words in (pasted_commands(tail)[0], shlex.split(typed)[1:]):
        got = tk(out, *words, "--json")
        doc = json.loads(got.stdout)["result"]
        assert (doc["a"]["label"], doc["b"]["label"]) == (f"run {RUN}", f"run {NEW}"), words
        assert all(r["speedup"] > 1 for r in doc["rows"]), doc["rows"]  # B, the stored re-run, is 1.01x


# ------------------------------------------------------------ S5: which side lacks each field


def test_fields_recorded_on_one_side_only_are_named_per_side(tmp_path: Path) -> None:
    """nc50 S5: a hand-written jsonl (A) against llama-bench markdown (B: ngl 99, fa 1, llama-bench's
    defaults filled for its omitted columns) listed `cpu_mask, ..., n_gpu_layers, ...` with no side."""
    model = '"model_type": "qwen3moe 30B.A3B Q4_K - Medium", "model_size": 17715663872, "model_n_params": 30532122624'
    rows = [(512, 0, 1500.0, 5.0), (0, 128, 100.0, 0.5)]
    (tmp_path / "a.jsonl").write_text(
        "".join(
            f'{{{model}, "n_prompt": {p}, "n_gen": {n}, "n_ubatch": 512, "n_batch": 2048, "flash_attn": 1, '
            f'"n_threads": 16, "avg_ts": {v}, "stddev_ts": {sd}}}\n'
            for p, n, v, sd in rows
        )
    )
    head = "| model | size | params | backend | ngl | fa | test | t/s |\n| --- | ---: | ---: | --- | --: | --: | --: | --: |\n"
    line = "| qwen3moe 30B.A3B Q4_K - Medium | 16.50 GiB | 30.53 B | ROCm | 99 | 1 | {} | {} |\n"
    (tmp_path / "b.md").write_text(
        head + line.format("pp512", "1490.00 ± 4.00") + line.format("tg128", "80.00 ± 0.40")
    )
    for f, label in (("a.jsonl", "hand"), ("b.md", "md")):
        assert tk(tmp_path, "import", "--results", "results", f, "--label", label).returncode == 0
    got = tk(tmp_path, "compare", "--results", "results", "hand", "md", "--format", "text")
    assert got.returncode == 6, got.stderr
    text = " ".join(got.stdout.split())
    assert "fields recorded on one side only, left out of the join: A lacks cpu_mask," in text, text
    assert "n_gpu_layers" in text.split("A lacks")[1].split(";")[0] and "; B lacks n_threads" in text, text
    c = compare.compare(ResultStore(tmp_path / "results"), "hand", "md")
    doc = compare_text.comparison_json(c)
    assert "n_gpu_layers" in doc["fields_lacking_a"] and doc["fields_lacking_b"] == ["n_threads"], doc
    assert sorted(doc["fields_lacking_a"] + doc["fields_lacking_b"]) == doc["ignored_fields"]
