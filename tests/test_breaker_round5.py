"""A tester's fifth round on the result readers: a lone surrogate in a stored record, a FIFO named
bench.jsonl, a negative token count in a stored record, `compare X X`, the canary in the report,
compare's warnings on a second folder, `report -o ''`. Each test is the reproducer of one finding."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.project import DATA
from tests.support.records import make_record
from toolkit.analysis import provenance, report
from toolkit.core.errors import BadInput
from toolkit.core.text import html_text, md_text, strip_controls
from toolkit.results.records import ResultStore, scan_jsonl

ROOT = Path(__file__).resolve().parent.parent
ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"


def toolkit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a process of its own: a hang is a timeout, a crash an exit status."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args], cwd=cwd, env=env, capture_output=True, timeout=120
    )


def _out(p: subprocess.CompletedProcess) -> str:
    return p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def _imported(tmp_path: Path, label: str = "s", results: str = "r") -> Path:
    """`toolkit import` of the captured CPU rows into tmp_path/<results>; returns the bench.jsonl."""
    p = toolkit("import", "--results", results, "--label", label, str(ROWS), cwd=tmp_path)
    assert p.returncode == 0, _out(p)
    (bench,) = (tmp_path / results).glob("*/bench.jsonl")
    return bench


def _append(bench: Path, **change) -> int:
    """Append a copy of the file's first record with `change` applied (dotted keys go one level
    down); returns the new line's number."""
    lines = bench.read_text().splitlines()
    rec = json.loads(lines[0])
    for k, v in change.items():
        if "__" in k:
            outer, inner = k.split("__")
            rec[outer][inner] = v
        else:
            rec[k] = v
    with bench.open("a") as fh:
        fh.write(json.dumps(rec) + "\n")  # json.dumps writes a lone surrogate as the escape \ud800
    return len(lines) + 1


# ------------------------------------------------------------------ 1. a lone surrogate in a record


def test_every_text_filter_replaces_a_lone_surrogate_so_it_can_be_written():
    for f in (strip_controls, md_text, html_text):
        out = f("bad\ud800name\udfff")
        assert "\ufffd" in out and out.encode("utf-8")  # encodable: no UnicodeEncodeError
    assert strip_controls("plain") == "plain" and strip_controls("é😀") == "é😀"


@pytest.mark.parametrize("fmt", ["text", "github", "html"])
def test_a_lone_surrogate_in_a_stored_model_name_does_not_crash_report(tmp_path, fmt):
    """Reproducer: UnicodeEncodeError 'surrogates not allowed', exit 1, to stdout and with -o."""
    bench = _imported(tmp_path)
    _append(bench, run_id="import-x1", model__name="bad\ud800name", model__path="other.gguf")  # its own file
    p = toolkit(
        "report",
        "--results",
        "r",
        "--format",
        fmt,
        *(["-o", "page.html"] if fmt == "html" else []),
        cwd=tmp_path,
    )
    assert p.returncode == 0, _out(p)[-2000:]
    shown = (tmp_path / "page.html").read_text() if fmt == "html" else p.stdout.decode()
    assert "bad\ufffdname" in shown
    p = toolkit("report", "--results", "r", "--format", fmt, "-o", f"out.{fmt}", cwd=tmp_path)
    assert p.returncode == 0, _out(p)[-2000:]
    assert "bad" in (tmp_path / f"out.{fmt}").read_text(encoding="utf-8")


# ------------------------------------------------------------------ 2. a FIFO named bench.jsonl


@pytest.mark.parametrize(
    "cmd",
    [["report"], ["report", "--format", "csv"], ["compare", "s", "s"], ["import", "--label", "t", str(ROWS)]],
)
def test_a_fifo_named_bench_jsonl_is_refused_by_every_command_not_a_hang(tmp_path, cmd):
    """Reproducer: compare and import hung forever; report said "no results yet"."""
    _imported(tmp_path)
    fifo = tmp_path / "r" / "abcdef123456" / "bench.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    p = toolkit(*cmd, "--results", "r", cwd=tmp_path)
    assert p.returncode == 4, _out(p)[-2000:]
    assert (
        f"{Path('r/abcdef123456/bench.jsonl')}: not a regular file (a FIFO): remove it or pass another --results"
        in _out(p)
    )


def test_a_fifo_in_the_folder_compare_against_reads_is_refused(tmp_path):
    _imported(tmp_path)
    _imported(tmp_path, results="other")
    (tmp_path / "other" / "abcdef123456").mkdir()
    os.mkfifo(tmp_path / "other" / "abcdef123456" / "bench.jsonl")
    p = toolkit("compare", "--results", "r", "--against", "other", "s", "s", cwd=tmp_path)
    assert p.returncode == 4 and "not a regular file (a FIFO)" in _out(p), _out(p)[-2000:]


def test_a_fifo_put_there_after_the_listing_is_refused_at_the_open_not_a_hang(tmp_path):
    """The reader itself refuses it (non-blocking open, then fstat): no race between list and open."""
    fifo = tmp_path / "bench.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file"):
        list(scan_jsonl(fifo))
    (tmp_path / "d").mkdir()
    with pytest.raises(BadInput, match=r"not a regular file \(a folder\)"):
        list(scan_jsonl(tmp_path / "d"))
    assert list(scan_jsonl(tmp_path / "absent.jsonl")) == []  # a missing file is still just empty


# ------------------------------------------------------------------ 3. a negative count in a record


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("n_depth", -5, "n_depth is -5: expected >= 0"),
        ("n_prompt", -1, "n_prompt is -1: expected >= 0"),
        ("n_ubatch", 0, "n_ubatch is 0: llama.cpp takes at least 1 token per batch"),
    ],
)
def test_a_stored_record_with_a_count_import_refuses_is_skipped_by_report_naming_file_and_line(
    tmp_path, field, value, why
):
    """Reproducer: report showed `pp512 @ d512 ub64 (n_depth=-5)`, which import refuses."""
    bench = _imported(tmp_path)
    line = _append(bench, run_id="import-x1", **{field: value})
    p = toolkit("report", "--results", "r", "--format", "github", cwd=tmp_path)
    assert p.returncode == 0, _out(p)[-2000:]
    assert f"{Path('r') / bench.relative_to(tmp_path / 'r')}:{line}: skipped a record" in _out(p)
    assert why in _out(p) and f"{field}={value}" not in p.stdout.decode()


# ------------------------------------------------------------------ 4. compare X X


def test_compare_of_one_image_with_itself_is_bad_input_listing_the_stored_runs(tmp_path):
    """Reproducer: `toolkit compare cpu cpu` exited 0 with every row 1.00. Then it said "name two runs"
    only; now (tidy41) that an image name means its newest build, and what to type for two builds of it
    (their digests: the command with this folder's two, once it has two) or two runs (their ids)."""
    first = _imported(tmp_path).parent.name
    p = toolkit("compare", "--results", "r", "s", "s", cwd=tmp_path)
    assert p.returncode == 4, _out(p)
    run = json.loads(next((tmp_path / "r").glob("*/bench.jsonl")).read_text().splitlines()[0])["run_id"]
    assert (
        f"A and B are the same records (run {run}): both name image s, which means its newest build; to "
        "compare two builds of it, give their digests (a prefix), once a second has results (its "
        f"builds with results here, newest first: {first}); two runs of it, their ids: `toolkit compare "
        "--results r RUN_A RUN_B`" in _out(p)
    )
    assert f"stored runs under r, newest first: {run} (s, " in _out(p)
    p = toolkit("compare", "--results", "r", run, "s", cwd=tmp_path)  # a run and its image: the same
    assert p.returncode == 4 and "A and B are the same records" in _out(p), _out(p)
    older = tmp_path / "older.jsonl"  # a second build of s: its rows measured a day before
    older.write_text(ROWS.read_text().replace("2026-11-29T", "2026-11-28T"))
    assert toolkit("import", "--results", "r", "--label", "s", str(older), cwd=tmp_path).returncode == 0
    second = next(b.parent.name for b in (tmp_path / "r").glob("*/bench.jsonl") if b.parent.name != first)
    said = _out(toolkit("compare", "--results", "r", "s", "s", cwd=tmp_path))
    assert (
        f"`toolkit compare --results r {first} {second}` (its builds with results here, newest first: {second}, "
        f"{first})" in said
    )
    assert "two runs of it, their ids: `toolkit compare --results r import-" in said, said
    p = toolkit("compare", "--results", "r", first, second, cwd=tmp_path)  # what it says to type
    assert p.returncode == 0, _out(p)


@pytest.mark.parametrize(
    ("digests", "other"),
    [
        pytest.param(("import:alpha", "import:beta"), "beta", id="a-build-prefix-is-an-image-name"),
        pytest.param(("import:v1", "import:v2"), None, id="digests-under-4-characters"),
    ],
)
def test_the_command_compare_suggests_compares_the_two_builds(tmp_path, digests, other):
    """`compare --results r s s` suggests the command for two builds of s (brk41): it said `toolkit compare
    alpha beta` without `--results r` (typed as shown it read another folder), where an image is named
    `beta` (an image name wins over a digest prefix: s@alpha against beta@gamma, exit 0), and `v1 v2` for
    digests import:v1 / import:v2 (no prefix under 4 characters names a digest, nor did the digest whole).
    Now the command, run as printed, compares s's two builds."""
    older = tmp_path / "older.jsonl"
    older.write_text(ROWS.read_text().replace("2026-11-29T", "2026-11-28T"))
    for label, digest, rows in (
        ("s", digests[0], ROWS),
        ("s", digests[1], older),
        (other, "import:gamma", older),
    ):
        if label:
            p = toolkit(
                "import", "--results", "r", "--label", label, "--digest", digest, str(rows), cwd=tmp_path
            )
            assert p.returncode == 0, _out(p)
    said = _out(toolkit("compare", "--results", "r", "s", "s", cwd=tmp_path))
    typed = re.search(r"to compare two builds of it, give their digests \(a prefix\), `([^`]*)`", said)
    assert typed, said
    p = toolkit(*shlex.split(typed.group(1))[1:], cwd=tmp_path)
    assert p.returncode == 0, _out(p)
    assert f"t/s A: s@{digests[0]}" in _out(p) and f"t/s B: s@{digests[1]}" in _out(p), _out(p)


def test_compare_not_found_lists_the_stored_runs_itself(tmp_path):
    """It said "`toolkit report` lists what is stored", which report does not."""
    _imported(tmp_path)
    p = toolkit("compare", "--results", "r", "nope", "s", cwd=tmp_path)
    assert p.returncode == 4 and "toolkit report` lists" not in _out(p), _out(p)
    assert "no results match 'nope'" in _out(p) and "stored runs under r, newest first: import-" in _out(p)


def test_compare_of_two_runs_of_one_image_still_compares(tmp_path):
    store = ResultStore(tmp_path / "r")
    for run, v in (("run-a", 100.0), ("run-b", 101.0)):
        store.add_result(make_record("hip", "rocm", n=128, avg=v, sd=0.5, run_id=run))
    p = toolkit("compare", "--results", "r", "run-a", "run-b", cwd=tmp_path)
    assert p.returncode == 0 and "1.01" in _out(p), _out(p)


# ------------------------------------------------------------------ 5. the canary in the report

CONTROL = {"image": "cpu", "digest": "sha256:" + "63707500" * 8, "run_id": "run-1", "ppl": 535.8769}


def _canary(status: str = "ok", **kw) -> dict:
    return {
        "image": "vulkan",
        "digest": "sha256:" + (b"vulkan".hex() * 64)[:64],
        "status": status,
        "reason": "",
        "ppl": 535.9028,
        "control": CONTROL,
        "ln_ratio": math.log(535.9028 / 535.8769),
        **kw,
    }


@pytest.mark.parametrize(
    ("canary", "said"),
    [
        (_canary(), "canary PPL 535.903 (cpu control 535.877, within 0.0048 %)"),
        (  # its own control: its own PPL, no ratio (round 12: a control PPL not its own is unchecked)
            {**_canary(), "image": "cpu", "digest": CONTROL["digest"], "ppl": 535.8769, "ln_ratio": None},
            "canary PPL 535.877 (the CPU control)",
        ),
        (
            _canary(control=None, ln_ratio=None),
            "canary PPL 535.903 (no CPU control: only checked to be finite)",
        ),
        (
            _canary("wrong-output", ppl="nan", reason="perplexity nan is not a sane model's"),
            "canary wrong output: perplexity nan is not a sane model's",
        ),
        (
            _canary("unchecked", ppl=None, reason="no llama-perplexity in the image"),
            "canary unchecked: no llama-perplexity in the image",
        ),
    ],
)
def test_the_canary_result_is_on_the_images_provenance_line(canary, said):
    recs = [make_record("vulkan", "vulkan", n=128, avg=90.0, sd=0.5, canary=canary)]
    (line,) = provenance.provenance(recs).images
    assert line.endswith("; " + said), line
    for fmt in ("text", "github", "html"):
        out = " ".join(report.render(recs, fmt).split())  # text wraps its lines to the terminal
        assert said.replace("'", "&#x27;" if fmt == "html" else "'") in out, fmt


def test_no_canary_says_nothing_and_a_hand_edited_one_does_not_crash():
    assert "canary" not in provenance.provenance([make_record("hip", "rocm", n=128, avg=9.0)]).images[0]
    odd = make_record(
        "hip", "rocm", n=128, avg=9.0, canary={"status": "ok", "ppl": "x", "control": {"ppl": []}}
    )
    said = "; canary unchecked: the stored result contradicts itself: status ok with ppl 'x': no perplexity"
    assert provenance.provenance([odd]).images[0].endswith(said)  # never a pass (round 10: canary_check)


# ------------------------------------------------------------------ 6. compare --against warns


def test_compare_against_a_folder_with_a_corrupt_line_warns_as_report_does(tmp_path):
    """Reproducer: compare skipped corrupt records of either folder silently."""
    _imported(tmp_path)
    store = ResultStore(tmp_path / "other")
    store.add_result(make_record("hip", "rocm", n=128, avg=100.0, sd=0.5, run_id="run-b"))
    (bench,) = (tmp_path / "other").glob("*/bench.jsonl")
    with bench.open("a") as fh:
        fh.write("{not json\n")
    p = toolkit("compare", "--results", "r", "--against", "other", "s", "run-b", cwd=tmp_path)
    assert f"warning: {Path('other') / bench.relative_to(tmp_path / 'other')}:2: skipped" in _out(p), _out(p)


# ------------------------------------------------------------------ 7. report -o ''


@pytest.mark.parametrize("option", ["-o", "--plots"])
def test_report_with_an_empty_path_is_bad_input_not_stdout(tmp_path, option):
    """Reproducer: `report -o ''` printed to stdout with exit 0."""
    _imported(tmp_path)
    p = toolkit("report", "--results", "r", option, "", cwd=tmp_path)
    assert p.returncode == 4 and "'': empty path" in _out(p) and not p.stdout, _out(p)
