"""Helper brk38: this session's changes (a66dee4) pushed with hostile and careless input, each case
broken from outside first.

- a command started with its standard output closed (`>&-`: Python's sys.stdout is None) ended with
  a bug's AttributeError traceback, exit 1 (report, compare, campaign status through rich); with its
  standard error closed, the first file the command opened took descriptor 2, so whatever wrote to
  standard error (a child process) wrote into it;
- compare's github table left its test and model cells raw (a model `a|b**c**` added a column and
  drew `c` bold) and its notes too; a --label `x**y**` in the verdict's prose drew `y` bold (the
  leftover of cases38); an entity `&lt;` in a name was shown as `<`;
- a JSON true/false in a number field of an imported row (`stddev_ts: true`, `n_cpu_moe: true`,
  `build_number: false`) was read as 1 or 0 (a spread of 1.0 tok/s, a test joined with n_cpu_moe 1,
  an image named `x.False`) where the text "true" is refused; a `stddev_ts` text "true" was dropped
  without a word;
- `1 records read`, `1 image columns with up to 1 lines`.

Real processes and files; records through the real importer, store and CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.runs import tk
from toolkit.core.text import md_line, md_text

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CLOSED_STDOUT = ["sh", "-c", 'exec "$@" >&-', "sh"]


def _imported(tmp_path: Path, lines: list[dict], label: str = "bare") -> Path:
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "results"), "--label", label)
    assert res.returncode == 0, res.stderr
    return tmp_path / "results"


def _rows(name: str = "cases38-md-names.jsonl") -> list[dict]:
    return [json.loads(x) for x in (DATA / name).read_text().splitlines()]


@pytest.mark.parametrize(
    "args",
    [["report", "--format", "github"], ["report", "--json"], ["--version"], ["campaign", "status"]],
    ids=["report", "report-json", "version", "campaign-status"],
)
def test_a_closed_standard_output_is_exit_8_in_one_line(tmp_path, args):
    """Reproducer: `toolkit report >&-` was an AttributeError traceback (sys.stdout is None), exit 1."""
    results = _imported(tmp_path, _rows())
    if args[0] == "campaign":  # one unsubmitted slice: `campaign status` asks Slurm nothing
        sl = {"campaign": "c1", "index": 0, "host": "n1", "engine": "local", "image": "cpu", "backend": "cpu"}
        sl |= {"runner": "llama-bench", "model": "tiny", "image_id": "sha256:" + "a" * 64, "build": {}}
        sl |= {"pull": "r/cpu@sha256:" + "a" * 64, "job_name": "j", "script": "s.sh", "output": "o"}
        c = {"id": "c1", "created": "2026-01-01T00:00:00Z", "matrix": "m", "project": "p"}
        c |= {"results": str(results), "toolkit": ["toolkit"], "spec": {}, "slices": [sl]}
        (results / "campaigns").mkdir()
        (results / "campaigns" / "c1.json").write_text(json.dumps(c))
    extra = [] if args == ["--version"] else ["--results", str(results)]
    res = tk(ROOT, *args, *extra, prefix=CLOSED_STDOUT)
    assert res.returncode == 8, res.stderr
    assert res.stderr.startswith("error: standard output: Bad file descriptor; it is closed"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr


def test_no_file_takes_the_number_of_a_closed_standard_stream(tmp_path):
    """Reproducer: with standard error closed (`2>&-`) the first file opened became descriptor 2."""
    code = (
        "import os, sys; from toolkit.cli.main import _standard_streams_open as o; o(); "
        f"fd = os.open({str(tmp_path / 'f')!r}, os.O_CREAT | os.O_WRONLY); "
        "print(fd, type(sys.stderr).__name__, file=sys.stdout)"
    )
    import subprocess

    res = subprocess.run(
        ["sh", "-c", 'exec "$@" 2>&-', "sh", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    fd, stream = res.stdout.split()
    assert int(fd) > 2 and stream == "_ClosedStream", res.stdout + res.stderr


def test_compare_escapes_its_cells_and_notes_for_markdown(tmp_path):
    """Reproducer: compare's github table had `| a|b**c**_d_.gguf |` raw: a column more, `c` bold."""
    row = _rows()[0]
    a = [
        row | {"model_filename": f"/m/{n}.gguf", "model_type": f"q {n}"}
        for n in ("a|b**c**_d_", "i", "__only__")
    ]
    b = [r | {"build_commit": "4567abcd"} for r in a[:2]]
    _imported(tmp_path, a, "la*b*")
    results = _imported(tmp_path, b, "lb_x_")
    res = tk(
        ROOT, "compare", "la*b*", "lb_x_", "--results", str(results), "--format", "github", "--allow-missing"
    )
    assert res.returncode == 0, res.stderr
    assert r"| a\|b\*\*c\*\*\_d\_.gguf |" in res.stdout, res.stdout
    assert r"only in A (la\*b\*@" in res.stdout and r"model=\_\_only\_\_.gguf" in res.stdout, res.stdout
    text = tk(
        ROOT, "compare", "la*b*", "lb_x_", "--results", str(results), "--allow-missing", "--format", "text"
    ).stdout
    assert "a|b**c**_d_.gguf" in text, text  # the text format shows names as they are


def test_the_verdicts_winner_is_bold_and_its_label_as_written(tmp_path):
    """Reproducer (cases38's leftover): a --label `x**y**` drew `y` bold inside the verdict's prose."""
    rows = _rows()
    fast = []
    for r in rows:
        f = dict(r, build_commit="4567abcd", avg_ts=r["avg_ts"] * 2, avg_ns=r["avg_ns"] // 2)
        f |= {"samples_ts": [x * 2 for x in r["samples_ts"]], "samples_ns": [x // 2 for x in r["samples_ns"]]}
        fast.append(f)
    _imported(tmp_path, rows, "slow")
    results = _imported(tmp_path, fast, "x**y**")
    page = tk(ROOT, "report", "--results", str(results), "--format", "github").stdout
    assert r"**x\*\*y\*\*@import:" in page and "wins" in page, page
    assert "x**y**" not in page, page
    html = tk(ROOT, "report", "--results", str(results), "--format", "html", "-o", str(tmp_path / "r.html"))
    assert html.returncode == 0, html.stderr
    assert "x**y**@import:" in (tmp_path / "r.html").read_text()  # html: raw, never escaped for markdown


def test_markdown_escapes_what_styles_a_name_and_nothing_else():
    assert md_text("&lt;b&gt; AT&T &#124;") == r"\&lt;b\&gt; AT&T \&#124;"
    assert md_text("__init__ snake_case_name 1_000 ___") == r"\_\_init\_\_ snake_case_name 1_000 \_\_\_"
    assert (
        md_line("only x**y** measured, a < b -> c, `code`")
        == r"only x\*\*y\*\* measured, a < b -> c, \`code\`"
    )
    assert md_line("AT&T &lt;b&gt;") == r"AT&T \&lt;b\&gt;"


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("stddev_ts", True, "stddev_ts is true: expected a number"),
        ("stddev_ts", "true", "stddev_ts is 'true': expected a number"),
        ("n_cpu_moe", True, "n_cpu_moe is true: expected a whole number"),
        ("main_gpu", False, "main_gpu is false: expected a whole number"),
        ("build_number", False, "build_number is false: expected a whole number"),
        ("stddev_ns", True, "stddev_ns is true: expected a whole number"),
    ],
)
def test_a_json_bool_in_a_number_field_refuses_its_row_and_keeps_the_rest(tmp_path, field, value, said):
    """Reproducer: `stddev_ts: true` was stored as a spread of 1.0 tok/s; `n_cpu_moe: true` as 1."""
    good, bad = _rows("cases38-tiny-model.jsonl")
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps(good) + "\n" + json.dumps(bad | {field: value}) + "\n")
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 0 and "imported 1 result" in res.stdout, res.stdout + res.stderr
    assert f"rows.jsonl:2: {said}; row left out" in res.stderr, res.stderr


@pytest.mark.parametrize("value", [True, False, "true", "on", 1])
def test_flash_attn_spelled_as_a_switch_is_read(tmp_path, value):
    good, bad = _rows("cases38-tiny-model.jsonl")
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps(good) + "\n" + json.dumps(bad | {"flash_attn": value}) + "\n")
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 0 and "imported 2 results" in res.stdout, res.stdout + res.stderr


def test_one_record_read_is_singular(tmp_path):
    results = _imported(tmp_path, _rows("cases38-tiny-model.jsonl")[:1])
    page = tk(ROOT, "report", "--results", str(results), "--format", "github").stdout
    assert "- 1 record read, 1 used" in page, page


def test_a_matrix_that_is_a_pipe_is_named_as_such(tmp_path):
    """Reproducer: `--matrix FIFO` said `matrix file not found` of a path that is there."""
    import os

    fifo = tmp_path / "m.yaml"
    os.mkfifo(fifo)
    res = tk(ROOT, "build", "--dry-run", "--matrix", str(fifo))
    assert res.returncode == 4 and f"{fifo}: not a regular file (a pipe" in res.stderr, res.stderr
    gone = tk(ROOT, "build", "--dry-run", "--matrix", str(tmp_path / "none.yaml"))
    assert gone.returncode == 4 and "none.yaml: matrix file not found" in gone.stderr, gone.stderr


def test_the_import_line_names_a_results_path_with_a_newline_on_one_line(tmp_path):
    """Reproducer: `import --results $'a\\nb'` printed its `into` path over two lines."""
    results = tmp_path / "we ird\nnäme"
    src = DATA / "cases38-tiny-model.jsonl"
    res = tk(ROOT, "import", str(src), "--results", str(results), "--label", "x")
    assert res.returncode == 0 and len(res.stdout.strip().splitlines()) == 1, res.stdout
    assert "we ird\\nnäme/" in res.stdout, res.stdout
