"""Output and selection faults a newcomer (nc49b S6-S10), a breaker (brk49b L1) and fix49d left:

- S6: an import with no usable row named 3 reasons and hid the rest (`and 4 more, for 4 other
  reasons`), one that kept rows printed every refusal (97,497 lines for a huge file): both now say each
  reason once with its rows (import_read.said_by_reason), at most SAID_REASONS lines, the rest counted;
  `--json` lists every refusal, the failed import's too;
- S7: compare's heads named one model file two ways (`model=tiny-qwen3moe (75939234)` beside
  `model=tiny-qwen3moe.gguf`): a model every pair shares is no side's setting, and the digits are
  labelled `sha256`;
- S8: a decode cell folded over micro-batches paired A's ub512 with B's ub64 where both measured ub64:
  a folded cell is one of a ub every column measured first;
- S9: images that measured different models: the verdict names a report of the images that share one;
- S10: a matrix refusal from the schema named the file by its absolute path and no line;
- L1: a code span in a GFM table cell split the cell at its `|`;
- fix49d: compare's hint in an export folder lost A typed as the published run; reproduce --json had no
  report and compare commands.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.support.project import DATA, ROOT
from tests.support.runs import tk

RUN_A = "20261129T170627Z-6891c7"  # tests/data/results-cpu-a.jsonl: pp/tg at ub64 and ub512

ROW = {
    **json.loads((DATA / "results-cpu-a.jsonl").read_text().splitlines()[0])["raw"],
    "model_filename": "qwen3-0.6b.gguf",
    "model_type": "qwen3 0.6B Q8_0",
    "model_size": 639447040,
    "model_n_params": 596049920,
    "n_prompt": 512,
    "test_time": "2025-06-01T10:00:00Z",
}
"""One llama-bench -o jsonl row (the CPU run's, of another model): qwen3 0.6B pp512; its figures: _speed."""

BAD = {
    "n_ubatch is 0": {"n_ubatch": 0},
    "n_threads is 0": {"n_threads": 0},
    "n_gpu_layers is -5": {"n_gpu_layers": -5},
    "avg_ts is -131.9": {"avg_ts": -131.9},
    "in the future": {"test_time": "2031-01-01T00:00:00Z"},
    "n_gen is 2.5": {"n_gen": 2.5},
    "avg_ts 50000 contradicts samples_ts": {"avg_ts": 50000.0},
}
"""Seven rows no device produced, each refused for its own reason."""


def _rows(*changes: dict) -> str:
    return "".join(json.dumps({**ROW, **_speed(1.0), **c}) + "\n" for c in changes)


def _speed(scale: float, **more) -> dict:
    """ROW's figures times `scale` (a faster or slower host), with `more` fields."""
    return {
        "avg_ts": 102.4 * scale,
        "samples_ts": [102.4 * scale] * 2,
        "avg_ns": int(5e9 / scale),
        "samples_ns": [int(5e9 / scale)] * 2,
        "stddev_ns": int(1e7 / scale),
        "stddev_ts": 0.2 * scale,
        **more,
    }


# ---------------------------------------------------------------- S6: every refusal reachable


def test_an_import_says_every_reason_it_refused_rows_for_whether_or_not_rows_were_kept(
    tmp_path: Path,
) -> None:
    """7 rows refused for 7 reasons: exit 4 named 3 (`and 4 more, for 4 other reasons`). Now each
    reason is a line of the refusal, as each is a line of an import that kept a row beside them."""
    none = tmp_path / "none.jsonl"
    none.write_text(_rows(*BAD.values()))
    got = tk(tmp_path, "import", "--results", "r", "--label", "x", str(none))
    assert got.returncode == 4 and not (tmp_path / "r").exists(), got.stderr
    assert "7 refused:" in got.stderr and "other reason" not in got.stderr, got.stderr
    for n, why in enumerate(BAD, 1):
        assert re.search(rf"^  line {n}: .*{re.escape(why)}", got.stderr, re.M), (why, got.stderr)
    some = tmp_path / "some.jsonl"
    some.write_text(none.read_text() + _rows({}))
    got = tk(tmp_path, "import", "--results", "r", "--label", "x", str(some))
    assert got.returncode == 0 and "7 row(s) refused (not a measurement):" in got.stderr, got.stderr
    for n, why in enumerate(BAD, 1):
        assert re.search(rf"^  {re.escape(str(some))}:{n}: .*{re.escape(why)}", got.stderr, re.M), why


def test_thousands_of_refusals_are_counted_past_a_bound_and_listed_whole_in_json(tmp_path: Path) -> None:
    """3,000 refused rows (1,501 for n_threads 0, 1,499 for as many negative counts): each reason once
    with its count, those differing only in their numbers one (brk50b: 1,499 near-alike lines filled the
    SAID_REASONS lines and hid any other reason); past SAID_REASONS reasons the rest are counted; --json
    lists all 3,000, the failed import's and the one that kept a row alike."""
    from toolkit.results.import_said import SAID_REASONS, said_by_reason

    f = tmp_path / "many.jsonl"
    f.write_text(_rows(*({"n_threads": 0 if i % 2 else -i} for i in range(3000)), {"n_ubatch": 0}))
    got = tk(tmp_path, "import", "--results", "r", "--label", "x", str(f))
    said = [ln for ln in got.stderr.splitlines() if ln.startswith("  ")]
    assert got.returncode == 4 and len(said) == 3, got.stderr
    assert said[0] == (
        "  line 1: n_threads is 0: a test runs on at least 1 thread (1,501 rows of this, lines 1 to 3000)"
    )
    assert said[1].startswith("  line 3: n_threads is -2: ") and said[1].endswith(
        " (1,499 rows of this, its numbers varying, lines 3 to 2999)"
    )
    assert said[2].startswith("  line 3001: n_ubatch is 0"), said  # no longer out of sight
    words = [f"line {i}: {chr(97 + i % 26) * (1 + i // 26)} is wrong" for i in range(1, 3000)]
    assert len(said_by_reason(words)) == SAID_REASONS + 1
    assert said_by_reason(words)[-1].startswith(f"... and {2999 - SAID_REASONS:,} more, for ")
    got = tk(tmp_path, "import", "--json", "--results", "r", "--label", "x", str(f))
    env = json.loads(got.stdout)
    assert env["exit_code"] == 4 and env["result"]["refused"]["rows"] == 3001, got.stdout[:500]
    f.write_text(f.read_text() + _rows({}))
    got = tk(tmp_path, "import", "--json", "--results", "r", "--label", "x", str(f))
    assert (
        json.loads(got.stdout)["exit_code"] == 0
        and json.loads(got.stdout)["result"]["refused"]["rows"] == 3001
    )
    got = tk(tmp_path, "import", "--results", "r2", "--label", "x", str(f))
    assert got.returncode == 0 and len(got.stderr.splitlines()) < 30, got.stderr


# ---------------------------------------------------------------- S7, S8: compare a run with an import of it


@pytest.fixture
def run_and_laptop(tmp_path: Path) -> Path:
    """results/ holding RUN_A (tg64 at ub64 and ub512) and `laptop`, an import of its first 3 raw rows
    (pp128, pp1024 and tg64 at ub64) measured a day later (the same rows are the run's: fix51a S7)."""
    store = tmp_path / "results" / "a504e0178239"
    store.mkdir(parents=True)
    shutil.copy(DATA / "results-cpu-a.jsonl", store / "bench.jsonl")
    rows = [json.loads(x) for x in (DATA / "results-cpu-a.jsonl").read_text().splitlines()]
    later = [
        {**r["raw"], "test_time": r["raw"]["test_time"].replace("2026-11-29", "2026-11-30")} for r in rows[:3]
    ]
    (tmp_path / "laptop.jsonl").write_text("".join(json.dumps(r) + "\n" for r in later))
    got = tk(tmp_path, "import", "--results", "results", "--label", "laptop", "laptop.jsonl")
    assert got.returncode == 0, got.stderr
    return tmp_path


def test_compare_names_one_model_once_and_pairs_decode_cells_of_one_micro_batch(run_and_laptop: Path) -> None:
    """S7: the heads read `(model=tiny-qwen3moe (75939234))` and `(model=tiny-qwen3moe.gguf)`, one file.
    S8: tg64 read 982.26 (A's ub512) against 512.06 (B's ub64) though A measured ub64 too (512.06)."""
    got = tk(
        run_and_laptop,
        "compare",
        "--results",
        "results",
        RUN_A,
        "laptop",
        "--allow-missing",
        "--format",
        "github",
    )
    assert got.returncode == 0, got.stderr
    head = got.stdout.splitlines()[0]
    assert "model=" not in head and not re.search(r"\([0-9a-f]{8}\)", got.stdout), head
    assert "sha256 759392345e48" in got.stdout  # the model line names the file's sha256
    tg = next(ln for ln in got.stdout.splitlines() if ln.startswith("| tg64"))
    assert tg.count("512.06 ± 308.91") == 2 and "982.26" not in tg, tg


def test_a_model_column_labels_the_digits_it_shows() -> None:
    from tests.support.records import make_record
    from toolkit.analysis.tables import id_value

    r = make_record("cpu", "cpu", p=512, avg=100.0)
    r.model.sha256 = "759392345e48" + "0" * 52
    assert id_value(r, "model") == f"{r.model.name} (sha256 759392345e48)"


# ---------------------------------------------------------------- S9: the images that share a model


def test_a_verdict_of_different_models_names_the_reports_that_rank_the_images_sharing_one(
    run_and_laptop: Path,
) -> None:
    """One tiny-model run and its import beside two imports of qwen3 0.6B: `not decided (... measure
    one model on each ...)`, nothing else. Now each set of images sharing a model gets the report that
    ranks it, and that report, pasted, decides."""
    for label, scale, cpu in (("big1", 1.0, "AMD EPYC"), ("big2", 1.5, "Intel Xeon")):
        (run_and_laptop / f"{label}.jsonl").write_text(_rows(_speed(scale, cpu_info=cpu)))
        got = tk(run_and_laptop, "import", "--results", "results", "--label", label, f"{label}.jsonl")
        assert got.returncode == 0, got.stderr
    got = tk(run_and_laptop, "report", "--results", "results", "--format", "github")
    prefill = next(ln for ln in got.stdout.splitlines() if ln.startswith("- prefill: not decided"))
    cmds = re.findall(r"are ranked by `(toolkit report [^`]+)`", prefill)
    assert cmds == [
        "toolkit report --format github -i big1 -i big2",  # the user's options kept (fix51a: F5)
        "toolkit report --format github -i cpu -i laptop",
    ], prefill
    again = tk(run_and_laptop, *shlex.split(cmds[0])[1:], "--format", "github")
    assert again.returncode == 0 and "- prefill: **big2@import:" in again.stdout, again.stdout[:800]


# ---------------------------------------------------------------- S10: matrix refusals name file and line


def test_every_matrix_refusal_names_the_file_as_given_and_the_line(tmp_path: Path) -> None:
    """`env: {GGML_X: [1.50]}` said `invalid matrix: /abs/path/matrix.yaml: bench.env: ...` where a YAML
    refusal says `my.yaml: line N, column M: ...`; a template's typo and schema_version alike."""
    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    text = (ROOT / "matrix.yaml").read_text()
    env = next(i for i, ln in enumerate(text.splitlines(), 1) if ln == "  env: {}")
    template = next(
        i for i, ln in enumerate(text.splitlines(), 1) if "template: llama-cpu.Dockerfile.j2" in ln
    )
    for edited, line, said in (
        (
            text.replace("  env: {}", "  env: {GGML_X: [1.50]}"),
            env,
            "bench.env: env.GGML_X: 1.50 is not text",
        ),
        (
            text.replace("llama-cpu.Dockerfile.j2", "llama-cpux.Dockerfile.j2", 1),
            template,
            "images[0].template",
        ),
        (re.sub(r"^schema_version: \d+", "schema_version: 9", text, flags=re.M), None, "schema_version: 9"),
    ):
        (tmp_path / "my.yaml").write_text(edited)
        got = tk(tmp_path, "render", "--matrix", "my.yaml")
        assert got.returncode == 4 and str(tmp_path / "my.yaml") not in got.stderr, got.stderr
        at = re.search(r"my\.yaml: line (\d+), column \d+: (.*)", got.stderr)
        assert at and at.group(2).startswith(said), got.stderr
        assert line is None or int(at.group(1)) == line, got.stderr


# ---------------------------------------------------------------- L1: a code span in a table cell


def _cells(markdown: str) -> list[int]:
    """The cells of each table row as GitHub renders `markdown` (markdown-it, GFM tables)."""
    markdown_it = pytest.importorskip("markdown_it")
    rows, n = [], 0
    for t in markdown_it.MarkdownIt("commonmark").enable("table").parse(markdown):
        if t.type == "tr_open":
            n = 0
        elif t.type in ("th_open", "td_open"):
            n += 1
        elif t.type == "tr_close":
            rows.append(n)
    return rows


def test_a_code_span_holding_a_pipe_stays_in_its_table_cell() -> None:
    """md_prose wrote a Prose's `...` spans with code(), whose `|` ended a GFM cell inside the span."""
    from toolkit.core.text import Prose, md_cell, md_line

    cmd = "toolkit report -i 'a|b'"
    cell = md_cell(Prose(f"run `{cmd}`", cmd))
    assert _cells(f"| x | y |\n|---|---|\n| {cell} | 1 |\n") == [2, 2], cell
    markdown_it = pytest.importorskip("markdown_it")
    inline = (
        markdown_it.MarkdownIt("commonmark").enable("table").parseInline(md_line(Prose(f"run `{cmd}`", cmd)))
    )
    assert [c.content for c in inline[0].children if c.type == "code_inline"] == [
        cmd
    ]  # outside a table: as is


def test_names_holding_pipes_and_backticks_keep_every_table_whole(tmp_path: Path) -> None:
    """Model files, model types and CPUs holding `|` and backticks, an image name too (a stored record):
    every row of the report's and compare's markdown tables has its header's cells."""
    for label, scale, model, cpu in (
        ("a", 1.0, "m|x`y``z.gguf", "AMD | EPYC `x`"),
        ("b", 1.5, "m|x`y``z.gguf", "Intel|Xeon"),
        ("c", 1.2, "n|`q`.gguf", "Intel|Xeon"),
    ):
        more = {"model_type": "qwen|3 `1.7B` Q8_0", "model_size": 1790451712} if label == "c" else {}
        (tmp_path / f"{label}.jsonl").write_text(
            _rows(_speed(scale, model_filename=model, cpu_info=cpu, **more))
        )
        assert tk(tmp_path, "import", "--results", "r", "--label", label, f"{label}.jsonl").returncode == 0
    for stored in (tmp_path / "r").glob("*/bench.jsonl"):
        recs = [json.loads(x) for x in stored.read_text().splitlines()]
        for r in recs:
            r["image"]["name"] = r["image"]["name"].replace("a", "a|`x`")
        stored.write_text("".join(json.dumps(r) + "\n" for r in recs))
    (tmp_path / "r" / ".index.sqlite").unlink(missing_ok=True)
    for args in (("report",), ("compare", "a|`x`", "b"), ("compare", "b", "a|`x`")):
        for fmt in ("github", "md"):
            got = tk(tmp_path, *args, "--results", "r", "--format", fmt)
            cells = _cells(got.stdout)
            assert cells and len(set(cells)) == 1, (args, got.stdout, got.stderr)
            assert "a\\|\\`x\\`@import" in got.stdout and "m\\|x" in got.stdout, got.stdout


def test_a_test_field_named_with_a_pipe_keeps_compares_head_whole(tmp_path: Path) -> None:
    """brk50b: compare wrote its id columns' heads (a test field an imported file named) unescaped: a
    field `f|x` split the head into one cell more than each row held."""
    for label, day in (("a", "01"), ("b", "02")):
        rows = _rows(*({"f|x`<b>": i, "test_time": f"2025-06-{day}T10:00:00Z"} for i in range(2)))
        (tmp_path / f"{label}.jsonl").write_text(rows)
        assert tk(tmp_path, "import", "--results", "r", "--label", label, f"{label}.jsonl").returncode == 0
    got = tk(tmp_path, "compare", "a", "b", "--results", "r", "--format", "github")
    assert _cells(got.stdout) == [6, 6, 6] and "f\\|x\\`\\<b\\>" in got.stdout, (got.stdout, got.stderr)


def test_export_run_copies_a_matrix_given_as_a_link(tmp_path: Path, matrix_data: dict, monkeypatch) -> None:
    """brk50b: LoadedMatrix.path became the path as typed, so export-run's copy, which refuses a link,
    refused `--matrix link.yaml` (a link to the project's matrix) that it copied before: the file given is
    read through its link, as the matrix was loaded."""
    from tests.support import exported
    from toolkit.matrix.api import load_matrix
    from toolkit.publish import run_folder
    from toolkit.results.records import ResultStore

    out = exported.exported_folder(tmp_path, matrix_data, reproduced=False)
    project = tmp_path / "project"
    (project / "link.yaml").symlink_to("matrix.yaml")
    monkeypatch.chdir(project)
    store = ResultStore(project / "results")
    run_folder.export_run(store, exported.RUN, tmp_path / "again", load_matrix("link.yaml"))
    assert (tmp_path / "again" / "matrix.yaml").read_bytes() == (out / "matrix.yaml").read_bytes()


# ---------------------------------------------------------------- fix49d: an export's hint, reproduce --json


def test_compare_typed_published_run_first_in_an_export_pastes_and_runs(
    tmp_path: Path, matrix_data: dict
) -> None:
    """`compare RUN NEW` (the published run first) in the folder after `toolkit reproduce .` hinted
    `--results reproduce/results --against .`: pasted, no A there. A is read from the folder now."""
    from tests.support.exported import NEW, RUN, exported_folder, pasted_commands

    out = exported_folder(tmp_path, matrix_data)
    got = tk(out, "compare", RUN, NEW)
    assert f"`toolkit compare {RUN} {NEW} --results . --against reproduce/results`" in got.stderr, got.stderr
    for words in pasted_commands(got.stderr):
        again = tk(out, *words)
        assert again.returncode == 0, (words, again.stderr)
    got = tk(out, "compare", NEW, RUN)
    assert f"`toolkit compare {NEW} {RUN} --results reproduce/results --against .`" in got.stderr, got.stderr


def test_reproduce_json_gives_the_report_and_compare_commands_its_text_ends_with(
    tmp_path: Path, matrix_data: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.exported import NEW, RUN, exported_folder, labelled_records
    from toolkit.publish import repro_output
    from toolkit.publish import reproduce as repro

    out = exported_folder(tmp_path, matrix_data)
    rows = repro.compare_records(labelled_records(RUN), labelled_records(NEW, scale=1.01), threshold=5)
    rep = repro.Reproduction(RUN, NEW, out, out / "reproduce" / "results", 5, rows=rows)
    monkeypatch.chdir(out)
    said = repro_output.reproduction_json(rep)["next_commands"]
    tail = repro_output.format_reproduction(rep, "text").splitlines()[-2:]
    assert [f"`{said['report']}`" in tail[0], f"`{said['compare']}`" in tail[1]] == [True, True], (said, tail)
    for cmd in said.values():
        got = tk(out, *shlex.split(cmd)[1:], "--format", "github")
        assert got.returncode == 0 and NEW in got.stdout, (cmd, got.stderr)
