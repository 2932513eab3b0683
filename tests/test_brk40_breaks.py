"""Breaks of cases40 and trim40 found by brk40, each reproduced through the real CLI, files and locks:

- an email autolink cmark-gfm makes of `b@.com` (a domain starting with its dot), `mailto:@x.example`
  and `xmpp:@evil.example` (a scheme's `:` before the `@`) was left as it was: a link on GitHub in the
  github report, compare's markdown and every other markdown writer (core.text._AUTOLINK);
- the export README's Cases line wrote the run's settings raw: an env value `https://...` or `~~x~~`
  linked and styled (run_folder._cases_lines, md_line as every other line of prose);
- one repetition beyond 160 TB/s of the model beside a slow one (their mean inside it) was imported:
  only avg_ts was held to the bandwidth and FLOP limits (plausible.model_problem reads samples_ts too);
- a sample of 1e-8 tok/s (a repetition of 50 years) beside a speed was imported: only exactly 0 was
  refused (records: below MIN_TOKENS_PER_S, as avg_ts); samples_ns of 0 were not held to anything (a
  list with one value not above 0 was passed over whole): refused by settings_check._sample_problem;
- csv's and sql's model_size `1595904.5` was imported (rounded) where json's 1595904.5 was refused, and
  the refusal of 792192.5 said `model_n_params is 792192: expected a whole number` (check._short);
- a RunGuard lock created under umask 077 could not be opened by another user's run on the same
  engine, so neither saw the other (guard._held skips what it cannot open): the lock is made 0644;
- `--threshold 50%` (PERCENT) was refused as no float, `--threshold -0` said `by more than -0%`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.runs import _no_dac, tk
from toolkit.core.text import md_line, md_text

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CPU_JSONL = DATA / "llamabench-0c1e57098-cpu.jsonl"


def _row() -> dict:
    return json.loads(CPU_JSONL.read_text().splitlines()[-1])  # tg16 of the tiny model


def _import(tmp_path: Path, rows: list[dict], *, label: str = "x", results: Path | None = None):
    src = tmp_path / f"{label.replace(':', '_').replace('@', '_')}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tk(ROOT, "import", str(src), "--results", str(results or tmp_path / "r"), "--label", label)


def _timed(row: dict, samples: list[float]) -> dict:
    """`row` with `samples` (tok/s) and the times, means and spreads llama-bench derives from them."""
    tokens = row["n_prompt"] + row["n_gen"]
    ns = [round(tokens * 1e9 / s) for s in samples]
    return row | {
        "samples_ts": samples,
        "samples_ns": ns,
        "avg_ts": statistics.mean(samples),
        "stddev_ts": statistics.stdev(samples),
        "avg_ns": round(statistics.mean(ns)),
        "stddev_ns": round(statistics.stdev(ns)),
    }


@pytest.mark.parametrize("name", ["b@.com", "1@.b.gguf", "mailto:@x.example", "xmpp:@evil.example"])
def test_an_email_cmark_gfm_links_is_escaped_in_a_cell_and_a_line(name):
    """Reproducer: md_text and md_line left these as written; cmark-gfm (GitHub's renderer, checked with
    cmarkgfm 2025.10.22) renders each as `<a href="mailto:...">` or `<a href="xmpp:...">`."""
    for esc in (md_text, md_line):
        assert "@&#8288;" in esc(name), esc(name)
    assert md_text("one@import:0794ede0631e a:@b") == "one@import:0794ede0631e a:@b"  # no dot: no link


def test_labels_github_links_are_escaped_in_report_and_compare(tmp_path):
    """Reproducer: `--label xmpp:@evil.example` and `--label qx@.c` were links in the column heads of
    `report --format github` and `compare --format github`; the text output shows them as written."""
    results = tmp_path / "r"
    rows = [json.loads(x) for x in CPU_JSONL.read_text().splitlines()]
    slow = [_timed(r, [x / 2 for x in r["samples_ts"]]) for r in rows]  # another file: another digest
    for label, lines in (("xmpp:@evil.example", rows), ("qx@.c", slow)):
        res = _import(tmp_path, lines, label=label, results=results)
        assert res.returncode == 0, res.stderr
    report = tk(ROOT, "report", "--results", str(results), "--format", "github")
    compare = tk(
        ROOT, "compare", "xmpp:@evil.example", "qx@.c", "--results", str(results), "--format", "github"
    )
    text = tk(ROOT, "compare", "xmpp:@evil.example", "qx@.c", "--results", str(results), "--format", "text")
    for page in (report.stdout, compare.stdout):
        assert "xmpp:@&#8288;evil.example@import:" in page and "qx@&#8288;.c@import:" in page, page
        assert "xmpp:@evil" not in page and "qx@.c" not in page, page
    assert "xmpp:@evil.example@import:" in text.stdout and "8288" not in text.stdout, text.stdout


def test_export_readme_cases_line_links_and_styles_no_setting(tmp_path, matrix_data):
    """Reproducer: a run whose env axis held `https://hf-mirror.example` and `~~x~~` (values the matrix
    takes) exported a README whose Cases line linked the URL and struck the other through."""
    from tests.support.project import cpu_project
    from tests.support.runs import bench_records
    from toolkit.results.records import ResultStore

    proj = tmp_path / "proj"
    cpu_project(proj, matrix_data)
    store = ResultStore(proj / "results")
    for i, r in enumerate(bench_records("run-e")):
        store.add_result(
            r.model_copy(update={"env": {"HF_ENDPOINT": ["https://hf-mirror.example", "~~x~~"][i % 2]}})
        )
    out = tmp_path / "published"
    res = tk(ROOT, "export-run", "--matrix", str(proj / "matrix.yaml"), "run-e", "-o", str(out))
    assert res.returncode == 0, res.stderr
    cases = (out / "README.md").read_text().split("## Cases", 1)[1].split("## Results", 1)[0]
    assert r"env HF\_ENDPOINT=https\://hf-mirror.example, \~\~x\~\~" in cases or (
        r"HF_ENDPOINT=https\://hf-mirror.example, \~\~x\~\~" in cases
    ), cases


def test_one_repetition_beyond_any_memory_bandwidth_is_refused(tmp_path):
    """Reproducer: a 1 TB model's tg16 at 10,133 and 267 tok/s (mean 5,200, inside the 5,333 tok/s that
    160 TB/s allows at 3 % of its bytes a token) was imported; each alone inside is still imported.
    fix50b: this CPU row is held to the largest host's memory (plausible.HOST_BYTES_S, 10 TB/s: 333 tok/s)."""
    row = _row() | {"model_size": 10**12, "model_n_params": 10**12}
    limit = 1e13 / (0.03 * 10**12)
    res = _import(tmp_path, [_timed(row, [limit * 1.9, limit * 0.05])])
    assert res.returncode == 4 and "bytes/s at least" in res.stderr and "633.333 t/s" in res.stderr, (
        res.stderr
    )
    ok = _import(tmp_path, [_timed(row, [limit * 0.99, limit * 0.05])], label="y")
    assert ok.returncode == 0, ok.stderr


def test_a_sample_below_any_measurement_is_refused(tmp_path):
    """Reproducer: samples_ts [9137.4, 1e-08] (a repetition of 16 tokens in 50 years), its times and
    means consistent, was imported; 1e-06 tok/s (MIN_TOKENS_PER_S, as avg_ts) still is."""
    row = _row()
    a = row["avg_ts"]
    res = _import(tmp_path, [_timed(row, [2 * a - 1e-8, 1e-8])])
    assert res.returncode == 4 and "samples_ts[1] is 1e-08: not a measurement" in res.stderr, res.stderr
    ok = _import(tmp_path, [_timed(row, [2 * a - 1e-6, 1e-6])], label="y")
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("ns", [[0, 0], [2397311, 0.0], [-5.0, 2397311]])
def test_a_repetition_of_no_time_is_refused(tmp_path, ns):
    """Reproducer: samples_ns [0, 0] beside samples_ts [199.6, 26696.6] was imported: a list holding a
    value not above 0 was passed over whole, so nothing held it to samples_ts."""
    res = _import(tmp_path, [_row() | {"samples_ns": ns}])
    assert (
        res.returncode == 4
        and "] is " in res.stderr
        and ": not a measurement (a repetition is above 0)" in res.stderr
    ), res.stderr


@pytest.mark.parametrize("fmt", ["csv", "sql", "jsonl"])
def test_a_fractional_model_size_is_refused_as_text_too(tmp_path, fmt):
    """Reproducer: csv's "1595904.5", sql's 1595904.5 and json's "1595904.5" were imported as 1595904
    bytes where json's 1595904.5 was refused; md's `1.52 MiB` and a whole "1595904" still are counts."""
    if fmt == "csv":
        text = (DATA / "llamabench-0c1e57098-cpu.csv").read_text().replace('"1595904"', '"1595904.5"')
    elif fmt == "sql":
        text = (DATA / "llamabench-0c1e57098-cpu.sql").read_text().replace("'1595904'", "'1595904.5'")
        text = text.replace(", 1595904,", ", 1595904.5,")
    else:
        text = json.dumps(_row() | {"model_size": "1595904.5"}) + "\n"
    src = tmp_path / f"rows.{fmt}"
    src.write_text(text)
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 4 and "model_size is '1595904.5'" in res.stderr, res.stdout + res.stderr
    whole = _import(tmp_path, [_row() | {"model_size": "1595904"}], label="w")
    md = tk(
        ROOT,
        "import",
        str(DATA / "llamabench-0c1e57098-cpu.md"),
        "--results",
        str(tmp_path / "m"),
        "--label",
        "m",
    )
    assert whole.returncode == 0 and md.returncode == 0, whole.stderr + md.stderr


def test_a_refused_fraction_is_shown_as_written(tmp_path):
    """Reproducer: model_n_params 792192.5 was refused as `model_n_params is 792192: expected a whole
    number` (`:g` keeps 6 digits), naming a whole number as not whole."""
    res = _import(tmp_path, [_row() | {"model_n_params": 792192.5}])
    assert res.returncode == 4 and "model_n_params is 792192.5: expected a whole number" in res.stderr, (
        res.stderr
    )


_HOLD = """
import os, sys, time
from pathlib import Path
from toolkit.bench.guard import RunGuard
os.umask(0o077)
g = RunGuard("run-a", "engine1", lock_dir=Path(sys.argv[1]))
g.acquire()
os.fchown(g.fd, 65534, 65534)  # as another user's run would own it
print("held", flush=True)
time.sleep(30)
"""

_SEE = """
import sys
from pathlib import Path
from toolkit.bench.guard import RunGuard
print(RunGuard("run-b", "engine1", lock_dir=Path(sys.argv[1])).alive_runs())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a lock of another user needs root to chown it")
def test_another_users_run_lock_is_seen_whatever_its_umask(tmp_path):
    """Reproducer: run A of one user (umask 077) held its lock; run B of another user on the same engine
    could not open it (0600, not its own), so alive_runs said [] and B ran beside A unflagged. B is
    this test's root without the capabilities that ignore file modes (_no_dac)."""
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir(mode=0o1777)
    lock_dir.chmod(0o1777)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lock_dir)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        (lock,) = lock_dir.glob("*.lock")
        assert lock.stat().st_mode & 0o777 == 0o644, oct(lock.stat().st_mode)
        seen = subprocess.run(
            [*_no_dac(), sys.executable, "-c", _SEE, str(lock_dir)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert seen.stdout.strip() == "['run-a']", seen.stdout + seen.stderr
    finally:
        holder.kill()
        holder.wait()


def test_a_percent_option_reads_a_percent_sign_and_minus_zero(tmp_path):
    """Reproducer: `compare --threshold 50%` was refused (`'50%' is not a valid float`) though its
    metavar is PERCENT, and `--threshold -0` said `slower ... by more than -0%`."""
    rows = [json.loads(x) for x in CPU_JSONL.read_text().splitlines()]
    slow = [_timed(r, [x / 2 for x in r["samples_ts"]]) for r in rows]
    results = tmp_path / "r"
    assert _import(tmp_path, rows, label="a", results=results).returncode == 0
    assert _import(tmp_path, slow, label="b", results=results).returncode == 0
    pct = tk(ROOT, "compare", "a", "b", "--results", str(results), "--threshold", "60%", "--format", "text")
    zero = tk(ROOT, "compare", "a", "b", "--results", str(results), "--threshold", "-0", "--format", "text")
    assert pct.returncode == 0, pct.stderr
    assert zero.returncode == 6 and "by more than 0%" in zero.stderr, zero.stderr
    bad = tk(ROOT, "report", "--results", str(results), "--min-margin", "-5%")
    assert bad.returncode == 4 and "not in the range" in bad.stderr, bad.stderr


def test_a_percent_sign_alone_is_named_as_typed(tmp_path):
    """brk40's leftover: `--threshold %` was refused as `'' is not a valid float` (the `%` read past
    first): the refusal names what was typed."""
    bad = tk(ROOT, "report", "--results", str(tmp_path), "--min-margin", "%")
    assert bad.returncode == 4 and "'%' is not a number of percent" in bad.stderr, bad.stderr
