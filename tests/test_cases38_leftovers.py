"""Helper cases38: leftovers of the field cases, each broken from outside first.

- `toolkit campaign status | head -0` exited 1 without a word (rich's Console ends a closed pipe with
  SystemExit(1)) and a full disk said `(unknown path)`: every rich printer now writes through one
  stream that names itself (cli.common.rich_console), so both are exit 8 in one line;
- a model name or model_type holding `**`, `_` or `|` was drawn bold or broke the report's markdown
  tables: a table cell or heading escapes what would style it (core.text.md_text);
- sizes said `1 bytes` (a record's size of 1, a stored `true` read as 1) and the campaign table `1
  slices`: core.text.counted;
- a stored `true` in a record's number field was read as 1 (bool is an int in Python; pydantic's lax
  mode agrees): a size is then unknown (the report falls back on the row's own model_size and the
  parameter count, so a stand-in keeps its caveat), a tok/s or count refuses the record;
- `toolkit reproduce` kept tg rows measured at two micro-batches apart where the report folds them;
- a resumed sweep split into two llama-bench processes said `test 1/1` twice under a plan of 2 tests;
- scripts/fresh-host.sh --help said `sudo scripts/fresh-host.sh` without saying it needs root.

Real processes on real pipes and files; records through the real store and CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.records import make_record
from tests.support.runs import tk, toolkit_exit
from toolkit.core.text import counted, md_text

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _campaign(results: Path) -> None:
    """One unsubmitted slice: `campaign status` shows it without asking Slurm anything."""
    (results / "campaigns").mkdir(parents=True)
    sl = {"campaign": "c1", "index": 0, "host": "n1", "engine": "local", "image": "cpu", "backend": "cpu"}
    sl |= {"runner": "llama-bench", "model": "tiny", "image_id": "sha256:" + "a" * 64, "build": {}}
    sl |= {"pull": "r/cpu@sha256:" + "a" * 64, "job_name": "j", "script": "s.sh", "output": "o"}
    c = {
        "id": "c1",
        "created": "2026-01-01T00:00:00Z",
        "matrix": "m",
        "project": "p",
        "results": str(results),
    }
    c |= {"toolkit": ["toolkit"], "spec": {}, "slices": [sl]}
    (results / "campaigns" / "c1.json").write_text(json.dumps(c))


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_campaign_status_into_a_closed_pipe_is_exit_8_in_one_line(tmp_path, unbuffered):
    """Reproducer: `toolkit campaign status | head -0` exited 1 and said nothing."""
    _campaign(tmp_path / "results")
    r, w = os.pipe()
    os.close(r)
    err = tmp_path / "err"
    with err.open("w") as fh:
        code = toolkit_exit(
            ["campaign", "status", "--results", str(tmp_path / "results")], w, fh.fileno(), unbuffered
        )
    os.close(w)
    said = err.read_text()
    assert code == 8, said
    assert said.startswith("error: standard output: Broken pipe") and len(said.strip().splitlines()) == 1, (
        said
    )


def test_campaign_status_to_a_full_disk_names_standard_output(tmp_path):
    """Reproducer: `toolkit campaign status > /dev/full` said `error: (unknown path): No space left`."""
    _campaign(tmp_path / "results")
    err = tmp_path / "err"
    with open("/dev/full", "w") as full, err.open("w") as fh:
        code = toolkit_exit(
            ["campaign", "status", "--results", str(tmp_path / "results")], full.fileno(), fh.fileno(), False
        )
    assert code == 8 and err.read_text().startswith("error: standard output: No space left"), err.read_text()


def test_campaign_status_counts_one_slice_in_the_singular(tmp_path):
    _campaign(tmp_path / "results")
    res = tk(ROOT, "campaign", "status", "--results", str(tmp_path / "results"))
    assert res.returncode == 0 and "1 slice: 1 unsubmitted" in res.stdout, res.stdout + res.stderr


def test_a_table_cell_shows_markdown_in_a_name_as_written():
    assert md_text("a**bold**_x_|y.gguf") == r"a\*\*bold\*\*\_x\_\|y.gguf"
    assert md_text("x~~y~~ `c`") == r"x\~\~y\~\~ \`c\`"
    assert md_text("n_cpu_moe") == "n_cpu_moe"  # `_` between letters styles nothing: left as it is
    assert md_text("2400.00 ± 24.00") == "2400.00 ± 24.00"


def test_the_report_draws_no_name_bold_and_breaks_no_table(tmp_path):
    """Reproducer: the github report drew `a**bold**_x_|y.gguf` as `a` + bold `bold` + italic `x`."""
    res = tk(
        ROOT, "import", str(DATA / "cases38-md-names.jsonl"), "--results", str(tmp_path), "--label", "bare"
    )
    assert res.returncode == 0, res.stderr
    page = tk(ROOT, "report", "--results", str(tmp_path), "--format", "github").stdout
    assert r"| a\*\*bold\*\*\_x\_\|y.gguf |" in page, page
    assert r"qwen3moe \*\*30B\*\*\_A3B\_ \| Q40" in page and r"# Benchmark report: a\*\*bold\*\*" in page, (
        page
    )
    assert "**bold**" not in page and "**30B**" not in page, page
    for line in page.splitlines():  # every row of a table has the header's cell count
        if line.startswith("| pp512") or line.startswith("| tg128"):
            assert len(re.findall(r"(?<!\\)\|", line)) == 5, line  # test, model, image, flags
    text = tk(ROOT, "report", "--results", str(tmp_path), "--format", "text").stdout
    assert "a**bold**_x_|y.gguf  2400.00" in text, text  # a terminal shows the name as it is


def test_a_count_of_one_is_singular():
    from toolkit.analysis.provenance import size_words

    assert [counted(n, "byte") for n in (0, 1, 2)] == ["0 bytes", "1 byte", "2 bytes"]
    assert size_words(1) == "1 byte" and size_words(1023) == "1023 bytes" and size_words(2048) == "2.00 KiB"


def _stored(tmp_path: Path, edit) -> Path:
    """cases38-tiny-model.jsonl imported, each stored record then edited by hand (`edit(record)`)."""
    res = tk(
        ROOT, "import", str(DATA / "cases38-tiny-model.jsonl"), "--results", str(tmp_path), "--label", "bare"
    )
    assert res.returncode == 0, res.stderr
    (f,) = tmp_path.glob("*/bench.jsonl")
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    for r in recs:
        edit(r)
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for p in tmp_path.glob("index*"):
        p.unlink()
    return tmp_path


@pytest.mark.parametrize("where", ["model.size_bytes", "raw.model_size", "both"])
def test_a_stored_true_is_no_size_and_the_stand_in_keeps_its_caveat(tmp_path, where):
    """Reproducer: a stored size of JSON `true` was read as 1 (`1 bytes`); with the row's model_size
    `true` too the record had no size and the 'tiny stand-in model' caveat went. Since cases40 a row's
    model_size `true` refuses its record (the one validity pass of imports and stored records)."""

    def edit(r):
        if where in ("model.size_bytes", "both"):
            r["model"]["size_bytes"] = True
        if where in ("raw.model_size", "both"):
            r["raw"]["model_size"] = True

    res = tk(ROOT, "report", "--results", str(_stored(tmp_path, edit)), "--format", "github")
    page = res.stdout
    if where != "model.size_bytes":  # the row's `true` is no row llama-bench wrote: refused, said (cases40)
        assert "skipped a record that contradicts itself: model_size is true: expected a size" in res.stderr
        return
    assert "is a tiny stand-in model" in page and "1 bytes" not in page and "1 byte," not in page, page
    assert "2 records read, 2 used" in page, page


def test_a_stored_true_tok_s_refuses_the_record(tmp_path):
    """A tok/s of `true` was read as 1.0 tok/s: now the record is refused by the reader, and said."""

    def edit(r):
        if r["axis"] == "decode":
            r["avg_ts"] = True

    res = tk(ROOT, "report", "--results", str(_stored(tmp_path, edit)), "--format", "github")
    assert "| tg128" not in res.stdout and "1 unreadable or invalid" in res.stdout, res.stdout + res.stderr
    assert "boolean, not a number" in res.stderr, res.stderr


def test_reproduce_folds_decode_rows_measured_at_two_micro_batches_as_the_report_does():
    """Reproducer: recorded and re-run tg128 at ub512 and ub2048 (equal within noise) were two rows
    of `toolkit reproduce` (`tg128 ub512`, `tg128 ub2048`); the report and compare show one, `tg128`."""
    from toolkit.publish.reproduce import compare_records

    def run(run_id, scale):
        return [
            make_record("cpu", "cpu", p=512, ub=ub, avg=1000.0 * scale, sd=5.0, run_id=run_id)
            for ub in (512, 2048)
        ] + [
            make_record("cpu", "cpu", n=128, ub=ub, avg=50.0 * scale, sd=0.5, run_id=run_id)
            for ub in (512, 2048)
        ]

    rows = compare_records(run("run-a", 1.0), run("run-b", 1.01), 5.0)
    tests = [r.test for r in rows]
    assert tests == ["pp512 ub512", "pp512 ub2048", "tg128"], tests
    assert all(r.ok for r in rows)
    tg = rows[-1]
    assert tg.recorded.n_ubatch == 512 and tg.reproduced is not None and tg.reproduced.n_ubatch == 512
    # tok/s that differ beyond noise keep their micro-batch, as in the report
    apart = run("run-c", 1.0)
    apart[3] = make_record("cpu", "cpu", n=128, ub=2048, avg=10.0, sd=0.1, run_id="run-c")
    tests = [r.test for r in compare_records(apart, apart, 5.0)]
    assert "tg128 ub512" in tests and "tg128 ub2048" in tests, tests


def test_a_resumed_sweep_counts_its_tests_from_the_plan(capsys):
    """Reproducer: a resumed sweep whose 2 missing tests run as 2 llama-bench processes (one per
    micro-batch: runners.llama_bench.resume_axes) printed `test 1/1` twice under `plan: 2 test cases`.
    The events are the ones the runner sends (`start` per process with its own count, llama-bench's
    own `--progress` index in `progress`), through the CLI's printer off a terminal."""
    from toolkit.bench.run import PairProgress
    from toolkit.cli.progress import plain_progress

    shown: list[tuple] = []
    printer = plain_progress(False)

    def events(kind, **kw):
        shown.append((kind, kw.get("done"), kw.get("total")))
        printer(kind, **kw)

    pair = PairProgress(events, 2)
    for phase in ("pp512 ub256", "pp512 ub512"):  # two processes of one test each
        pair("start", image="cpu", model="tiny", total=1)
        pair("progress", image="cpu", model="tiny", done=0, total=1, phase=phase)
        pair("done", image="cpu", model="tiny", total=1)
    pair("note", text="a note passes as it is")
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "cpu x tiny: test 1/2 pp512 ub256",
        "cpu x tiny: test 2/2 pp512 ub512",
        "a note passes as it is",
    ]
    assert [k for k, *_ in shown] == ["start", "progress", "progress", "done", "note"]
    assert shown[0][2] == 2 and shown[3][2] == 2


def test_fresh_host_help_says_it_needs_root():
    res = subprocess.run(
        ["bash", str(ROOT / "scripts" / "fresh-host.sh"), "--help"], capture_output=True, text=True
    )
    assert res.returncode == 0 and "Needs root" in res.stdout, res.stdout
    usage = next(x for x in res.stdout.splitlines() if "fresh-host.sh [--quick]" in x)
    assert not usage.strip().startswith("sudo"), usage  # the usage line names the script, root said apart
