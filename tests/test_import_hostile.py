"""Defects a hostile tester found in `toolkit import` and the JSON reading under report/compare
(docs/reliability-log.md section 9): each closed for its whole kind, with a reproducer through the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.project import DATA

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    json.loads(ln) for ln in (DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines() if ln.strip()
]
DEEP_OBJECTS = '{"a":' * 100_000 + "1" + "}" * 100_000


def toolkit(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a process of its own (a crash of the parser is an exit status, not a dead test run)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args], cwd=cwd, env=env, capture_output=True, timeout=300
    )


def _jsonl(rows: list) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_deeply_nested_objects_are_a_skipped_row_not_a_segfault(tmp_path, suffix):
    """Reproducer: orjson 3.8.3 crashed the process (SIGSEGV, exit 139) on 100,000 nested objects."""
    f = tmp_path / f"deep{suffix}"
    f.write_text(DEEP_OBJECTS + "\n" + _jsonl(ROWS[:1]))
    p = toolkit("import", "--results", "r", "--label", "s", str(f), cwd=tmp_path)
    out = p.stdout.decode() + p.stderr.decode()
    assert p.returncode == 0, out
    assert f"{f}:1: not a complete JSON record (nested deeper than 64 levels)" in out


def test_a_deeply_nested_bench_line_does_not_crash_report_or_compare(tmp_path):
    f = tmp_path / "one.jsonl"
    f.write_text(_jsonl(ROWS[:1]))
    assert toolkit("import", "--results", "r", "--label", "s", str(f), cwd=tmp_path).returncode == 0
    (bench,) = (tmp_path / "r").glob("*/bench.jsonl")
    with bench.open("a") as fh:
        fh.write(DEEP_OBJECTS + "\n")
    p = toolkit("report", "--results", "r", cwd=tmp_path)
    assert p.returncode == 0 and b"skipped a line: nested deeper than 64 levels" in p.stderr, p.stderr[-2000:]
    p = toolkit("compare", "--results", "r", "s", "s", cwd=tmp_path)
    assert p.returncode in (0, 4), p.stderr.decode()[-2000:]


def _import(
    tmp_path: Path, *files: Path, label: str = "s", results: str = "r"
) -> subprocess.CompletedProcess:
    return toolkit("import", "--results", results, "--label", label, *map(str, files), cwd=tmp_path)


def _out(p: subprocess.CompletedProcess) -> str:
    return p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("model_size", 2**63, "model_size is 9223372036854775808: out of range (a 64-bit integer)"),
        ("n_threads", 2**64, "n_threads is 18446744073709551616: out of range (a 64-bit integer)"),
        ("flash_attn", 2**64, "flash_attn is 18446744073709551616: out of range"),
        ("n_gpu_layers", -(2**64), "n_gpu_layers is -18446744073709551616: out of range"),
        ("avg_ns", 12345678901234567890123, "avg_ns is 12345678901234567890123: out of range"),
        ("model_filename", ["a"], "model_filename is a list: expected text"),
        ("backends", {"x": 1}, "backends is an object: expected text"),
    ],
)
def test_a_field_of_the_wrong_type_or_beyond_64_bits_is_refused_at_import(tmp_path, field, value, why):
    """Reproducer: model_size 2**63 was imported, then report and compare died (OverflowError from
    SQLite); a list in model_filename was stored as "['a']"."""
    f = tmp_path / "rows.jsonl"
    f.write_text(_jsonl([{**ROWS[0], field: value}, ROWS[1]]))
    p = _import(tmp_path, f)
    assert p.returncode == 0 and f"{f}:1: {why}" in _out(p), _out(p)
    assert toolkit("report", "--results", "r", cwd=tmp_path).returncode == 0


def test_a_stored_record_beyond_64_bits_is_skipped_by_report_and_compare(tmp_path):
    """An old results folder may hold such a record: it is a warning, never an OverflowError."""
    f = tmp_path / "rows.jsonl"
    f.write_text(_jsonl(ROWS))
    assert _import(tmp_path, f).returncode == 0
    (bench,) = (tmp_path / "r").glob("*/bench.jsonl")
    rec = json.loads(bench.read_text().splitlines()[0])
    rec["model"]["size_bytes"] = 2**64
    with bench.open("a") as fh:
        fh.write(json.dumps(rec) + "\n")
    for cmd in (["report"], ["compare", "s", "s"]):
        p = toolkit(*cmd, "--results", "r", cwd=tmp_path)
        assert p.returncode in (0, 4) and b"OverflowError" not in p.stderr, _out(p)[-2000:]
    p = toolkit("report", "--results", "r", cwd=tmp_path)
    assert f"bench.jsonl:{len(ROWS) + 1}: skipped a record: model.size_bytes" in _out(p)


def test_a_lone_surrogate_in_a_row_refuses_that_row_naming_file_and_line(tmp_path):
    """Reproducer: a row with "\\ud800" gave a PydanticSerializationError traceback (exit 1)."""
    f = tmp_path / "rows.jsonl"
    f.write_text(_jsonl([ROWS[0]]).replace('"CPU"', '"CPU\\ud800"', 1) + _jsonl([ROWS[1]]))
    p = _import(tmp_path, f)
    assert p.returncode == 0, _out(p)
    assert f"{f}:1: a string holds a lone surrogate" in _out(p)
    assert "imported 1 result as" in _out(p)


def test_a_file_whose_every_row_is_refused_late_is_bad_input_not_imported_before(tmp_path):
    """Second breaker round: a file whose only row holds a lone surrogate exited 0 saying "these rows
    were imported before, under the name ; nothing added" (--json: already true, digest ""), though
    nothing was ever imported. Every row refused is bad input, naming the rows, as for any other
    reason a row is refused; nothing is written."""
    f = tmp_path / "rows.jsonl"
    f.write_text(_jsonl([ROWS[0]]).replace('"CPU"', '"CPU\\udfff"', 1))
    p = _import(tmp_path, f)
    assert p.returncode == 4, _out(p)
    assert "no llama-bench result rows found that are measurements: 1 refused" in _out(p)
    assert f"{f}:1: a string holds a lone surrogate" in _out(p) and "imported before" not in _out(p)
    assert not (tmp_path / "r").exists()


def test_a_file_name_or_label_that_is_not_utf8_is_bad_input(tmp_path):
    """Reproducer: both gave a PydanticSerializationError traceback (exit 1)."""
    name = os.fsdecode(b"n\xff\xfeame.jsonl")
    (tmp_path / name).write_text(_jsonl(ROWS[:1]))
    p = _import(tmp_path, Path(name))
    assert p.returncode == 4 and "n\ufffd\ufffdame.jsonl: the file name is not UTF-8" in _out(p), _out(p)
    (tmp_path / "one.jsonl").write_text(_jsonl(ROWS[:1]))
    p = _import(tmp_path, tmp_path / "one.jsonl", label=os.fsdecode(b"n\xffn"))
    assert p.returncode == 4 and "--label 'n\ufffdn': not UTF-8 text" in _out(p), _out(p)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("copies", [1, 800], ids=["whole", "streamed"])
def test_a_csv_field_over_csvs_limit_refuses_that_row_not_the_import(tmp_path, copies):
    """Reproducer: a field of 200,000 characters gave `_csv.Error: field larger than field limit`."""
    header, *rows = (DATA / "llamabench-0c1e57098-cpu.csv").read_text().splitlines()
    cut = rows[0].index(",")
    huge = rows[0][:cut] + "," + "x" * 200_000 + rows[0][rows[0].index(",", cut + 1) :]
    f = tmp_path / "rows.csv"
    f.write_text("\n".join([header, huge, *rows * copies]) + "\n")
    assert (f.stat().st_size > 1 << 20) == (copies > 1)
    p = _import(tmp_path, f)
    assert p.returncode == 0, _out(p)[-3000:]
    assert f"{f}:2: not a CSV row (field larger than field limit (131072))" in _out(p)


def _records(tmp_path: Path, results: str = "r") -> int:
    return sum(len(f.read_text().splitlines()) for f in (tmp_path / results).glob("*/bench.jsonl"))


def test_rows_read_twice_are_imported_once_within_one_command_and_across_formats(tmp_path):
    """Reproducer: one file twice, or the same rows as jsonl + json + csv, became 2-3 repetitions of
    each test (false precision): 18 records from 6 measurements."""
    d = DATA / "llamabench-0c1e57098-cpu"
    jl, js, cs = tmp_path / "a.jsonl", tmp_path / "a.json", tmp_path / "a.csv"
    jl.write_text(_jsonl(ROWS))
    js.write_text(json.dumps(ROWS, indent=2))
    header = Path(f"{d}.csv").read_text().splitlines()[0].split(",")
    cs.write_text(
        ",".join(header)
        + "\n"
        + "".join(",".join(json.dumps(str(r.get(k, ""))) for k in header) + "\n" for r in ROWS)
    )
    p = _import(tmp_path, jl, jl, js, cs)
    assert p.returncode == 0 and _records(tmp_path) == len(ROWS), _out(p)
    out = _out(p)
    assert f"{len(ROWS)} row(s) of {jl} are measurements read before in this import, from {jl}" in out
    assert f"{len(ROWS)} row(s) of {cs} are measurements read before in this import, from {jl}" in out
    assert "measure the same test" not in out


@pytest.mark.parametrize("how", [[], ["--digest", "import:mine"], ["--label", "other"]])
def test_rows_imported_before_are_left_out_under_any_digest_or_label(tmp_path, how):
    f, copy = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    f.write_text(_jsonl(ROWS))
    copy.write_text(_jsonl(ROWS) + "\n")  # other bytes: another digest
    assert _import(tmp_path, f).returncode == 0
    label = how[1] if how[:1] == ["--label"] else "s"
    p = toolkit(
        "import",
        "--results",
        "r",
        "--label",
        label,
        *how[:2] if how[:1] == ["--digest"] else [],
        str(copy),
        cwd=tmp_path,
    )
    out = _out(p)
    assert p.returncode == 0 and _records(tmp_path) == len(ROWS), out
    assert f"{len(ROWS)} row(s) already imported in run import-" in out and "nothing added" in out


def _md(rows: list) -> str:
    """The rows as llama-bench's markdown printer shows them (`-o md`: model, size, params, backend,
    threads, n_ubatch, test, `t/s` as "%.2f ± %.2f", then the build line): built from the rows, as a
    user pastes the md of the run they also publish as jsonl."""
    lines = [
        "| model | size | params | backend | threads | n_ubatch | test | t/s |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        test = "+".join(
            ([f"pp{r['n_prompt']}"] if r["n_prompt"] else []) + ([f"tg{r['n_gen']}"] if r["n_gen"] else [])
        )
        lines.append(
            f"| {r['model_type']} | {r['model_size'] / 2**20:.2f} MiB | {r['model_n_params'] / 1e6:.2f} M | "
            f"{r['backends']} | {r['n_threads']} | {r['n_ubatch']} | {test} | {r['avg_ts']:.2f} ± {r['stddev_ts']:.2f} |"
        )
    return "\n".join(lines) + f"\n\nbuild: {rows[0]['build_commit']} ({rows[0]['build_number']})\n"


@pytest.mark.parametrize("first", ["jsonl", "md"])
def test_an_md_table_of_rows_imported_before_is_the_same_measurement(tmp_path, first):
    """Reproducer: the md table of a run imported as jsonl (or the jsonl of an md imported first) was
    stored again: md has no test_time or avg_ns, so every test got a second repetition (false
    precision, a stddev from two copies of one number)."""
    jl, md = tmp_path / "a.jsonl", tmp_path / "a.md"
    jl.write_text(_jsonl(ROWS))
    md.write_text(_md(ROWS))
    one, two = (jl, md) if first == "jsonl" else (md, jl)
    assert _import(tmp_path, one).returncode == 0
    p = _import(tmp_path, two, label="again")
    out = _out(p)
    assert p.returncode == 0 and _records(tmp_path) == len(ROWS), out
    said = {
        "jsonl": f"{len(ROWS)} row(s) of md tables print measurements already imported in run import-",
        "md": f"{len(ROWS)} row(s) are measurements already imported in run import-",
    }[first]
    assert said in out and "nothing added" in out
    if first == "md":  # the first import wins; the way to keep the fuller rows is said
        assert "from an md table, without samples or test_time" in out and "new --results folder" in out


@pytest.mark.parametrize("first", ["jsonl", "md"])
def test_an_md_table_beside_its_jsonl_in_one_import_is_left_out_whatever_the_order(tmp_path, first):
    """The jsonl rows are kept (samples, test_time), the md rows that print them are left out and said,
    and no empty set of the md's system (it lacks gpu_info and cpu_info) is named."""
    jl, md = tmp_path / "a.jsonl", tmp_path / "a.md"
    jl.write_text(_jsonl(ROWS))
    md.write_text(_md(ROWS))
    p = _import(tmp_path, *((jl, md) if first == "jsonl" else (md, jl)))
    out = _out(p)
    assert p.returncode == 0 and _records(tmp_path) == len(ROWS), out
    assert f"{len(ROWS)} row(s) of {md} print measurements this import reads in full from {jl}" in out
    assert "imported 0 results" not in out and len(re.findall(r"^s\S*: imported ", out, re.M)) == 1, out
    assert "md output has no samples" not in out  # no md row was written


@pytest.mark.parametrize(
    "change",
    [{"backends": "Vulkan"}, {"build_commit": "deadbee"}],
    ids=["other-backend", "other-build"],
)
@pytest.mark.parametrize("together", [False, True])
def test_an_md_table_of_another_backend_or_build_is_not_taken_for_rows_it_happens_to_match(
    tmp_path, change, together
):
    """Reproducer (breaker): an md table of a Vulkan build printing the same t/s as CPU rows imported
    before was left out as "the same measurement". The backend and the md's build line are part of
    what an md row is matched on."""
    p = _jsonl_and_md(tmp_path, [{**r, **change} for r in ROWS], together=together)
    assert p.returncode == 0 and _records(tmp_path) == 2 * len(ROWS), _out(p)
    assert "left out" not in _out(p)


def _jsonl_and_md(tmp_path: Path, md_rows: list, *, together: bool) -> subprocess.CompletedProcess:
    """ROWS as jsonl and `md_rows` as an md table, imported in one command or one after the other."""
    jl, md = tmp_path / "a.jsonl", tmp_path / "b.md"
    jl.write_text(_jsonl(ROWS))
    md.write_text(_md(md_rows))
    if together:
        return _import(tmp_path, jl, md)
    assert _import(tmp_path, jl).returncode == 0
    return _import(tmp_path, md, label="b")


def test_two_md_tables_of_two_builds_imported_one_after_the_other_are_both_kept(tmp_path):
    """Reproducer (breaker): md tables differing only in their build line were both kept when
    imported together, and the second left out when imported later (md rows were matched against
    stored md rows by what they print; md against md is matched exactly, system and build included)."""
    one, two = tmp_path / "1.md", tmp_path / "2.md"
    one.write_text(_md([{**r, "build_commit": "1111111"} for r in ROWS]))
    two.write_text(_md([{**r, "build_commit": "2222222"} for r in ROWS]))
    assert _import(tmp_path, one).returncode == 0
    p = _import(tmp_path, two, label="two")
    assert p.returncode == 0 and _records(tmp_path) == 2 * len(ROWS), _out(p)


def test_an_md_table_without_its_build_line_still_matches_the_rows_it_prints(tmp_path):
    jl, md = tmp_path / "a.jsonl", tmp_path / "a.md"
    jl.write_text(_jsonl(ROWS))
    md.write_text(_md(ROWS).split("\n\nbuild:")[0] + "\n")
    assert _import(tmp_path, jl).returncode == 0
    p = _import(tmp_path, md, label="b")
    assert p.returncode == 0 and _records(tmp_path) == len(ROWS), _out(p)


def test_an_md_row_that_prints_another_number_is_its_own_measurement(tmp_path):
    jl, md = tmp_path / "a.jsonl", tmp_path / "a.md"
    jl.write_text(_jsonl(ROWS))
    other = [dict(ROWS[0], avg_ts=ROWS[0]["avg_ts"] + 0.01)]
    md.write_text(_md(ROWS + other))
    p = _import(tmp_path, jl, md)
    assert p.returncode == 0 and _records(tmp_path) == len(ROWS) + 1, _out(p)


def test_a_vllm_latency_that_gives_zero_tokens_per_second_is_refused_naming_the_field(tmp_path):
    """Reproducer: avg_latency 1.2e22 was stored ok with avg_ts 0.0 (a llama-bench row of 0 tok/s is
    refused: one rule, in the record, for both)."""
    data = json.loads((DATA / "vllm-0.16.0-latency.json").read_text())
    data["avg_latency"] = 1.2e22
    data["latencies"] = [1.2e22] * 3
    data["percentiles"] = {k: 1.2e22 for k in data["percentiles"]}  # of those latencies (round 12)
    f = tmp_path / "lat-512-1.json"
    f.write_text(json.dumps(data))
    p = _import(tmp_path, f)
    assert p.returncode == 4 and "avg_ts is 0.0: not a measurement" in _out(p), _out(p)
    assert "one by one" not in _out(p)  # a single file
    assert _records(tmp_path) == 0


def test_a_file_that_changes_while_it_is_read_is_refused_and_nothing_written(tmp_path, monkeypatch):
    """Reproducer: a file truncated or grown while it was read imported with exit 0. Refused: its
    rows and its hash (the digest) would be of no one state of the file."""
    from toolkit.core.errors import BadInput
    from toolkit.results import importer
    from toolkit.results.records import ResultStore

    f = tmp_path / "growing.jsonl"
    f.write_text(_jsonl(ROWS))
    real = importer.source_of

    def grows(path, skipped, refused):
        src = real(path, skipped, refused)
        with path.open("a") as fh:
            fh.write(_jsonl(ROWS[:1]))
        return src

    monkeypatch.setattr(importer, "source_of", grows)
    with pytest.raises(BadInput, match=r"growing.jsonl: changed while it was read \(\d+ -> \d+ bytes\)"):
        importer.import_files(ResultStore(tmp_path / "r"), [f], label="s")
    assert _records(tmp_path) == 0


def test_a_pipe_is_refused_saying_save_it_to_a_file_first(tmp_path):
    """Reproducer: `cat F | toolkit import /dev/stdin` said "the file is empty"."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(
        [sys.executable, "-m", "toolkit", "import", "--results", "r", "--label", "s", "/dev/stdin"],
        input=_jsonl(ROWS).encode(),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert (
        p.returncode == 4 and "/dev/stdin: not a regular file" in _out(p) and "save it to a file" in _out(p)
    )


@pytest.mark.parametrize("avg_ns", [12345678901234567890, 2 * 10**18])
def test_an_avg_ns_beside_its_samples_is_checked_whatever_its_size(tmp_path, avg_ns):
    """Reproducer: avg_ns 12345678901234567890123 beside avg_ts 13448 was accepted (the samples alone
    were checked against avg_ts)."""
    f = tmp_path / "rows.jsonl"
    f.write_text(_jsonl([{**ROWS[0], "avg_ns": avg_ns}, ROWS[1]]))
    p = _import(tmp_path, f)
    assert p.returncode == 0 and f"{f}:1: avg_ns {float(avg_ns):g} contradicts samples_ns" in _out(p), _out(p)


def _json_rows(tmp_path: Path, text: str, name: str = "rows.json") -> tuple[Path, str]:
    f = tmp_path / name
    f.write_text(text)
    p = _import(tmp_path, f)
    assert p.returncode == 0, _out(p)
    return f, _out(p)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_every_piece_of_a_json_file_left_out_is_named(tmp_path, stream):
    """Reproducer: a second array, garbage after the array, an element that is not an object, and an
    element too deep (that one refused the whole array) were dropped without a word. A second array
    (`-o json >> FILE`: one per run) is read since cases43 (test_cases43_imports)."""
    pad = [ROWS[1]] * (1200 if stream else 0)  # over 1 MiB: read as a stream
    deep = "[" * 100 + "]" * 100
    text = "[\n" + ",\n".join([deep, json.dumps(ROWS[0]), "7", *map(json.dumps, pad)]) + "\n]\n"
    f, out = _json_rows(tmp_path, text + json.dumps([ROWS[1]]) + "\n")
    assert (f.stat().st_size > 1 << 20) == stream
    assert f"{f}:2: an element of the array left out (nested deeper than 64 levels)" in out
    assert f"{f}:4: an element of the array that is not a JSON object (int) left out" in out
    assert "after the array's end" not in out, out  # the second array's row is read
    assert "imported 2 results" in out, out  # ROWS[0], and ROWS[1] (the pad's rows are printed again)
    f, out = _json_rows(tmp_path, text + "garbage\n", "g.json")
    assert "text that is no JSON array after the array's end: left out" in out


def test_jsonl_lines_that_are_json_but_no_record_are_named(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text('null\n[]\n"x"\n' + _jsonl(ROWS[:1]) + "| model | size |\n" + _jsonl(ROWS[1:2]))
    p = _import(tmp_path, f)
    out = _out(p)
    assert p.returncode == 0 and "imported 2 results" in out, out
    for n, why in [(1, "(null)"), (2, "(a list)"), (3, "(str)")]:
        assert f"{f}:{n}: JSON that is not an object {why}: left out" in out
    assert f"{f}:5: a line of -o md output in JSONL: left out" in out


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_first_record_over_the_head_does_not_decide_the_format(tmp_path, monkeypatch, fmt):
    """Reproducer: a JSON array or JSONL over 64 MiB whose first element was over 1 MiB was refused
    ("not JSONL, JSON or CSV from its first MiB on"): the first bytes decide now."""
    from toolkit.results import import_read, importer
    from toolkit.results.records import ResultStore

    monkeypatch.setattr(import_read, "MAX_IMPORT_BYTES", 1 << 20)  # stands for 64 MiB
    big = {**ROWS[0], "pad": "x" * (1536 << 10)}
    f = tmp_path / f"big.{fmt}"
    f.write_text(
        _jsonl([big, *ROWS[1:]])
        if fmt == "jsonl"
        else "[\n" + ",\n".join(map(json.dumps, [big, *ROWS[1:]])) + "\n]\n"
    )
    assert f.stat().st_size > import_read.MAX_IMPORT_BYTES
    res = importer.import_files(ResultStore(tmp_path / "r"), [f], label="s")
    assert res.records == len(ROWS) and res.formats == {str(f): fmt}


def test_messages_say_it_once_and_name_what_went_wrong(tmp_path):
    """Reproducers: "Invalid control character at at column"; a truncated .sql read its CREATE TABLE
    lines as csv ("line 43: 1 fields, the header has 2")."""
    f = tmp_path / "ctl.jsonl"
    f.write_text('{"a": "x\ty"}\n' + _jsonl(ROWS[:1]))
    out = _out(_import(tmp_path, f))
    assert f"{f}:1: not a complete JSON record (not JSON (Invalid control character at column 9))" in out
    sql = (DATA / "llamabench-0c1e57098-cpu.sql").read_text()
    cut = tmp_path / "cut.sql"
    cut.write_text(sql[: sql.index("INSERT") + 200])
    out = _out(_import(tmp_path, cut))
    assert "fields, the header has" not in out and "the file starts with 'CREATE TABLE" in out, out


def _serve(tmp_path: Path, name: str, **change) -> subprocess.CompletedProcess:
    data = {**json.loads((DATA / "vllm-0.16.0-serve.json").read_text()), **change}
    f = tmp_path / name
    f.write_text(json.dumps(data))
    return _import(tmp_path, f)


def test_a_negative_count_in_a_vllm_serve_result_is_bad_input_naming_it(tmp_path):
    """Reproducer: `completed: -5` was stored ok."""
    p = _serve(tmp_path, "serve-128-32-c1.json", completed=-5)
    assert p.returncode == 4 and "completed is -5: a count, time or rate is never negative" in _out(p), _out(
        p
    )


def test_a_serve_file_named_for_another_concurrency_is_filed_as_run_and_said(tmp_path):
    """Reproducer: serve-…-c1.json whose result says max_concurrency 2 was filed as c2 without a word."""
    p = _serve(tmp_path, "serve-128-32-c1.json", max_concurrency=2)
    assert "the file name says concurrency 1, the result says max_concurrency 2: filed as c2" in _out(p), (
        _out(p)
    )


@pytest.mark.parametrize(("field", "value"), [("stddev_ts", 10**400), ("samples_ns", [10**400, 1])])
def test_a_float_field_too_big_for_a_float_is_refused_naming_it(tmp_path, field, value):
    """Reproducer: such a row was refused as "int too large to convert to float" (no field named)."""
    f = tmp_path / "rows.jsonl"
    f.write_text(_jsonl([{**ROWS[0], field: value}, ROWS[1]]))
    out = _out(_import(tmp_path, f))
    assert f"{f}:1: {field} " in out and "out of range" in out and "convert to float" not in out, out


def test_a_file_whose_only_record_is_too_deep_says_so(tmp_path):
    """Reproducer: "no llama-bench result rows found" without naming the nesting."""
    f = tmp_path / "deep.json"
    f.write_text("[" + "[" * 100 + "]" * 100 + "]\n")
    p = _import(tmp_path, f)
    assert p.returncode == 4 and "line 1: " in _out(p) and "nested deeper than 64 levels" in _out(p), _out(p)


def test_an_avg_ts_that_contradicts_its_samples_ts_is_refused(tmp_path):
    """Second breaker round: avg_ts 13448.09 with samples_ts [1.0, 2.0] was imported, and the report
    printed a mean outside its own range (`13448.09 ± … (med 1.50, 1.00–2.00)`). llama-bench's avg_ts
    is the mean of samples_ts: a row where they disagree beyond 1 % is refused by file:line."""
    row = dict(ROWS[0])
    row["samples_ts"] = [1.0, 2.0]
    good = dict(ROWS[1])
    f = tmp_path / "rows.jsonl"
    f.write_text(_jsonl([row, good]))
    p = _import(tmp_path, f)
    assert p.returncode == 0, _out(p)
    assert f"{f}:1: avg_ts {row['avg_ts']:g} contradicts samples_ts (their mean is 1.5)" in _out(p)
    assert "imported 1 result as" in _out(p)


def test_a_test_repeated_many_times_is_said_in_a_bounded_line(tmp_path):
    """Second breaker round: 50,000 rows of one test gave a 1.49 MB note listing every line and value.
    The note names the first rows and counts the rest."""
    rows = [dict(ROWS[0], test_time=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z") for i in range(40)]
    f = tmp_path / "rows.jsonl"
    f.write_text(_jsonl(rows))
    p = _import(tmp_path, f)
    assert p.returncode == 0, _out(p)
    note = next(line for line in _out(p).splitlines() if "measure the same test" in line)
    assert "and 30 more" in note and "kept as 40 repetitions" in note and len(note) < 1000


def test_two_md_tables_that_differ_only_in_their_spread_are_two_measurements(tmp_path):
    """Second breaker round: md rows were matched on the mean alone, so a table whose `± sd` differed
    was left out as read before."""
    one, two = tmp_path / "1.md", tmp_path / "2.md"
    one.write_text(_md(ROWS))
    two.write_text(_md([{**r, "stddev_ts": r["stddev_ts"] + 50} for r in ROWS]))
    p = _import(tmp_path, one, two)
    assert p.returncode == 0 and _records(tmp_path) == 2 * len(ROWS), _out(p)


def test_a_lowercase_z_test_time_orders_its_row_by_that_time(tmp_path):
    """Second breaker round: the validity pass took `...t10:00:00z` as UTC but the ordering did not read
    it, so an older run imported later replaced a newer one."""
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    row = dict(ROWS[0])
    new.write_text(_jsonl([{**row, "test_time": "2026-11-29T12:00:00Z"}]))
    older = {**row, "test_time": "2026-11-29t10:00:00z", "avg_ts": row["avg_ts"] * 1.5}
    older.pop("avg_ns", None), older.pop("samples_ns", None), older.pop("samples_ts", None)
    old.write_text(_jsonl([older]))
    for f in (new, old):
        assert (
            toolkit(
                "import", "--results", "r", "--label", "s", "--digest", "import:same", str(f), cwd=tmp_path
            ).returncode
            == 0
        )
    p = toolkit("report", "--results", "r", "--format", "json", cwd=tmp_path)
    cells = [
        c
        for t in json.loads(p.stdout)["tables"]
        for r in t["rows"]
        for c in r.values()
        if isinstance(c, dict)
    ]
    assert [round(c["avg_ts"], 2) for c in cells if c.get("avg_ts")] == [round(row["avg_ts"], 2)], cells


@pytest.mark.parametrize("together", [False, True])
def test_an_md_table_that_shows_another_thread_count_is_its_own_measurement(tmp_path, together):
    """Second breaker round: an md table printing `threads 4` beside the same t/s as rows run with 2
    threads was left out as their print: an md row is matched on every setting its table shows."""
    p = _jsonl_and_md(tmp_path, [{**r, "n_threads": r["n_threads"] + 2} for r in ROWS], together=together)
    assert p.returncode == 0 and _records(tmp_path) == 2 * len(ROWS), _out(p)
    again = tmp_path / "c.md"  # the same settings as the jsonl: still its print
    again.write_text(_md(ROWS))
    p = _import(tmp_path, again, label="c")
    assert p.returncode == 0 and _records(tmp_path) == 2 * len(ROWS), _out(p)
