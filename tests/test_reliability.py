"""Issue 21, "nothing lost, no traceback": each KIND of fault closed once, with a reproducer per case
(docs/reliability-log.md lists them: case, expected, now).

3. every JSON reader of every file goes through one safe parse (toolkit.core.jsonsafe);
4. runs are ordered by the store's sequence, not the wall clock; clock anomalies are flagged;
6. matrix.yaml is strictly typed before anything renders; hostile archives are bad input;
7. one results folder, one bench at a time (results/.lock);
8. model paths llama-bench cannot take, and GGUF headers that lie about their length, are bad input.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.project import DATA, ROOT
from tests.support.records import make_record
from toolkit.cli.main import cli
from toolkit.core import jsonsafe
from toolkit.core.errors import BadInput
from toolkit.results import import_read, importer
from toolkit.results.records import ResultStore, Saver, read_jsonl_numbered


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def exit_code(res) -> int:
    """The exit code main() gives (CliRunner leaves a toolkit error as the exception)."""
    return getattr(res.exception, "exit_code", res.exit_code) if res.exception else res.exit_code


def no_traceback(res) -> None:
    """A toolkit error or a clean exit: never an exception the CLI would print as a bug (exit 1)."""
    assert exit_code(res) != 1, (res.output, repr(res.exception))


DEEP = b"[" * 5000 + b"]" * 5000
BIG_INT = b'{"n": ' + b"7" * 5000 + b"}"
HOSTILE_LINES = {
    "deep": DEEP,
    "deep-object": b'{"a": ' + b"[" * 100_000,
    "big-int": BIG_INT,
    "not-utf8": b'{"a": "\xff\xfe"}',
    "nan-depth-65": b'{"a": ' + b"[" * 65 + b"]" * 65 + b"}",
    "not-json": b"{not json",
}


# ----------------------------------------------------------------- 3. one safe parse for every reader


@pytest.mark.parametrize("name", list(HOSTILE_LINES))
def test_the_one_json_helper_turns_every_parser_failure_into_a_reason(name):
    obj, why = jsonsafe.parse_line(HOSTILE_LINES[name])
    assert obj is None and why
    with pytest.raises(jsonsafe.JsonProblem):
        jsonsafe.parse(HOSTILE_LINES[name])


def test_the_json_helper_bounds_depth_and_size():
    assert jsonsafe.parse_line(b'{"a": ' + b"[" * 60 + b"]" * 60 + b"}")[0] is not None
    assert jsonsafe.parse_line(b'{"a": ' + b"[" * 64 + b"]" * 64 + b"}")[1] == "nested deeper than 64 levels"
    assert jsonsafe.parse_line(BIG_INT)[1] == "a number of more than 4300 digits"
    assert jsonsafe.parse_line(b" " * (jsonsafe.MAX_LINE_BYTES + 1))[1].startswith("longer than")


AGREE = [
    b'{"n": 18446744073709551616}',  # 2**64: orjson 3.8 would give a float
    b'{"n": -9223372036854775809}',
    b'{"n": 123456789012345678901234567890}',
    b'{"n": 18446744073709551615, "m": -9223372036854775808}',
    b'{"s": "12345678901234567890123"}',  # a digit run inside a string: json decides, the same value
    b'{"x": 1e400, "y": -1e400}',
    b'{"x": NaN, "y": -Infinity}',
    b'{"s": "\\ud800"}',  # a lone surrogate
    b'\xef\xbb\xbf{"a": 1}',
    b'{"a": 1, "a": 2}',
    b'{"a": ' + b"[" * 63 + b"]" * 63 + b"}",
    b'{"a": "' + b"[" * 100 + b'"}',  # brackets in a string: walked, within the depth
    b'{"f": 0.1, "g": 1.5e-7, "h": -0.0, "i": 1E2, "j": 2.2250738585072014e-308}',
    b'{"u": "\xc3\xa9\\u00e9", "e": "", "t": true, "z": null}',
]


@pytest.mark.parametrize("data", AGREE, ids=range(len(AGREE)))
def test_the_fast_parse_gives_what_json_gives(data):
    """jsonsafe.parse tries orjson first: its value (types included) or its reason is json's."""
    try:
        want = json.loads(data.decode("utf-8"))
    except ValueError as err:
        with pytest.raises(jsonsafe.JsonProblem):
            jsonsafe.parse(data)
        assert isinstance(err, ValueError)
        return
    for given in (data, data.decode("utf-8")):
        got = jsonsafe.parse(given)
        assert repr(got) == repr(want) and _types(got) == _types(want)


def _types(v):
    if isinstance(v, dict):
        return {k: _types(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_types(x) for x in v]
    return type(v).__name__


def _good_store(tmp_path: Path) -> tuple[ResultStore, Path]:
    store = ResultStore(tmp_path / "results")
    path = store.add_result(make_record("cpu", "cpu", p=512, avg=100.0))
    return store, path


@pytest.mark.parametrize("name", list(HOSTILE_LINES))
def test_a_hostile_bench_line_is_a_warning_and_report_and_compare_go_on(tmp_path, name):
    """Reproducer: a bench.jsonl line nested 5000 deep killed report and compare (RecursionError in
    records._parse_line)."""
    store, path = _good_store(tmp_path)
    with path.open("ab") as fh:
        fh.write(HOSTILE_LINES[name] + b"\n")
    store.add_result(make_record("cpu", "cpu", p=512, avg=101.0, raw={"test_time": "x"}))
    assert len(store.results()) == 2 and store.refused == 1
    assert any(w.startswith(f"{path}:2: skipped a") for w in store.warnings), store.warnings
    res = run("report", "--results", str(tmp_path / "results"))
    no_traceback(res)
    assert exit_code(res) == 0 and f"{path}:2: skipped a" in res.output
    res = run("compare", "--results", str(tmp_path / "results"), "cpu", "cpu")
    no_traceback(res)


def test_a_hostile_builds_line_is_a_warning(tmp_path):
    store = ResultStore(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    store.builds_file.write_bytes(DEEP + b"\n" + BIG_INT + b"\n")
    assert store.builds() == []
    assert [w.split(": ", 1)[0] for w in store.warnings] == [
        f"{store.builds_file}:1",
        f"{store.builds_file}:2",
    ]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        pytest.param("brackets.json", b"[" * 100_000, id="json-100000-brackets"),
        pytest.param("brackets.jsonl", b"{" * 100_000 + b"\n", id="jsonl-100000-braces"),
        pytest.param("bigint.jsonl", None, id="jsonl-5000-digit-integer"),
        pytest.param("bigint.json", None, id="json-5000-digit-integer"),
        pytest.param("garbage.jsonl", b"{\xff\xfe\x00\x01" * 100, id="garbage-bytes"),
    ],
)
def test_import_of_hostile_json_is_bad_input_naming_the_file(tmp_path, name, data):
    """Reproducer: `toolkit import` of `[`x100000 and of a JSONL with a 5000-digit integer gave a
    traceback (RecursionError / ValueError in the readers)."""
    if data is None:
        row = json.loads((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
        text = json.dumps(row).replace('"n_prompt": ', '"n_prompt": ' + "9" * 5000 + ', "x": ', 1)
        data = (f"[{text}]" if name.endswith(".json") else text + "\n").encode()
    f = tmp_path / name
    f.write_bytes(data)
    res = run("import", "--results", str(tmp_path / "r"), "--label", "x", str(f))
    no_traceback(res)
    assert exit_code(res) == 4 and str(f) in str(res.exception)


def test_import_keeps_good_rows_beside_a_hostile_line(tmp_path):
    lines = (DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()
    f = tmp_path / "mixed.jsonl"
    f.write_bytes(
        lines[0].encode() + b"\n" + b"{" + b"[" * 5000 + b"\n" + BIG_INT + b"\n" + lines[1].encode() + b"\n"
    )
    store = ResultStore(tmp_path / "results")
    res = importer.import_files(store, [f], label="x")
    assert res.records == 2
    assert [s.split(": ")[0] for s in res.skipped] == [f"{f}:2", f"{f}:3"]


@pytest.mark.parametrize(
    ("count", "why"),
    [
        pytest.param("9" * 30, "n_prompt is 999999999999... (30 digits)", id="30-digits"),
        pytest.param("10000001", "n_prompt is 10000001", id="above-1e7"),
        pytest.param("1e300", "n_prompt is 1e+300", id="float-1e300"),
    ],
)
def test_an_unphysical_token_count_is_refused_by_the_validity_pass(tmp_path, count, why):
    """Reproducer: `import` of n_prompt with 30 digits then `report --format html` gave a TypeError in
    the plots' log2; the one validity pass (check_row) now refuses the row."""
    rows = (DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()
    pp = next(r for r in rows if json.loads(r)["n_prompt"])
    bad = pp.replace(f'"n_prompt": {json.loads(pp)["n_prompt"]}', f'"n_prompt": {count}', 1)
    bad = bad.replace(f'"n_prompt":{json.loads(pp)["n_prompt"]}', f'"n_prompt":{count}', 1)
    assert bad != pp
    f = tmp_path / "big.jsonl"
    f.write_text("\n".join([*rows, bad]) + "\n")
    store = ResultStore(tmp_path / "results")
    res = importer.import_files(store, [f], label="x")
    assert res.records == len(rows)
    assert any(why in r and "more than 1e+07 tokens" in r for r in res.refused), res.refused
    out = tmp_path / "report.html"
    res2 = run("report", "--results", str(tmp_path / "results"), "--format", "html", "-o", str(out))
    no_traceback(res2)
    assert exit_code(res2) == 0


def test_a_hand_edited_record_with_a_huge_count_is_skipped_not_plotted(tmp_path):
    store, path = _good_store(tmp_path)
    obj = json.loads(path.read_text())
    obj["n_prompt"] = 10**30
    with path.open("a") as fh:
        fh.write(json.dumps(obj) + "\n")
    assert len(store.results()) == 1
    assert any(":2: skipped a record: n_prompt" in w or "n_prompt has 31 digits" in w for w in store.warnings)
    res = run(
        "report", "--results", str(tmp_path / "results"), "--format", "html", "-o", str(tmp_path / "r.html")
    )
    no_traceback(res)


def _published(tmp_path: Path) -> Path:
    store, _ = _good_store(tmp_path)
    from toolkit.publish import run_folder

    rec = store.results()[0]
    folder = tmp_path / "pub"
    run_folder.export_run(store, rec.run_id, folder)
    data = json.loads((folder / "run.json").read_text())
    for m in data["models"]:  # the synthetic records name no model file; a published run does
        m["file"] = m["file"] or "model.gguf"
    (folder / "run.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize(
    ("content", "field"),
    [
        pytest.param(b"not json {", "not JSON", id="not-json"),
        pytest.param(DEEP, "nested deeper than", id="deep"),
        pytest.param(b"\xff\xfe", "not UTF-8", id="not-utf8"),
        pytest.param(b"[1, 2]", "not a JSON object", id="a-list"),
        pytest.param(None, "images: ", id="wrong-type"),
    ],
)
def test_a_published_run_json_that_is_not_one_is_bad_input_naming_file_and_field(tmp_path, content, field):
    """Reproducer: a run.json that is not JSON or wrong-typed gave a pydantic traceback (run_read.load_run)."""
    from toolkit.publish import run_read

    folder = _published(tmp_path)
    if content is None:
        data = json.loads((folder / "run.json").read_text())
        data["images"] = "cpu"
        content = json.dumps(data).encode()
    (folder / "run.json").write_bytes(content)
    with pytest.raises(BadInput) as err:
        run_read.load_run(folder)
    assert str(err.value).startswith(f"{folder / 'run.json'}: ") and field in str(err.value)
    res = run("reproduce", str(folder))
    no_traceback(res)
    assert exit_code(res) == 4


def test_a_published_results_line_that_is_not_a_record_is_bad_input_naming_file_line_and_field(tmp_path):
    from toolkit.publish import run_read

    folder = _published(tmp_path)
    line = json.loads((folder / "results.jsonl").read_text())
    line["avg_ts"] = "fast"
    with (folder / "results.jsonl").open("a") as fh:
        fh.write(json.dumps(line) + "\n")
    with pytest.raises(BadInput) as err:
        run_read.load_run(folder)
    assert str(err.value).startswith(f"{folder / 'results.jsonl'}:2: avg_ts: ")
    (folder / "results.jsonl").write_bytes((folder / "results.jsonl").read_bytes().splitlines(True)[0] + DEEP)
    with pytest.raises(BadInput) as err:
        run_read.load_run(folder)
    assert f"{folder / 'results.jsonl'}:2: " in str(err.value)


def test_a_garbage_telemetry_trace_is_warned_not_a_traceback(tmp_path):
    """Reproducer: a telemetry trace of garbage bytes raised UnicodeDecodeError out of iter_trace."""
    from toolkit.host.telemetry import iter_trace

    trace = tmp_path / "telemetry.jsonl"
    good = {"t": 1.0, "gpus": []}
    trace.write_bytes(
        b'{"telemetry_trace": 1}\n\xff\xfe\xfd garbage\n' + DEEP + b"\n" + json.dumps(good).encode() + b"\n"
    )
    warnings: list[str] = []
    assert list(iter_trace(trace, warnings)) == [good]
    assert [w.split(": ")[0] for w in warnings] == [f"{trace}:2", f"{trace}:3"]
    assert "not UTF-8" in warnings[0]


def test_read_jsonl_numbered_never_raises_on_any_line(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_bytes(b"\n".join(HOSTILE_LINES.values()) + b'\n{"ok": 1}\n')
    warnings: list[str] = []
    assert list(read_jsonl_numbered(f, warnings)) == [(len(HOSTILE_LINES) + 1, {"ok": 1})]
    assert len(warnings) == len(HOSTILE_LINES)


def test_every_json_reader_goes_through_the_one_helper():
    """No module of the toolkit calls json.loads / json.load / raw_decode itself: the one safe parse is
    toolkit.core.jsonsafe (checked on the source, so a new reader cannot bypass it)."""
    root = Path(__file__).resolve().parents[1] / "toolkit"
    offenders = []
    for py in root.rglob("*.py"):
        if py.name == "jsonsafe.py":
            continue
        text = py.read_text()
        for needle in ("json.loads(", "json.load(", ".raw_decode(", "model_validate_json("):
            if needle in text:
                offenders.append(f"{py.relative_to(root.parent)}: {needle}")
    # checkpoint.py: json.loads(json.dumps(x)), a deep copy of its own data, not a reader; results/index.py:
    # only bytes the one helper read when the index validated them (their line_sum matches), else the helper
    assert sorted(offenders) == [
        "toolkit/models/checkpoint.py: json.loads(",
        "toolkit/results/index.py: model_validate_json(",
    ], offenders


# ----------------------------------------------------------------- 6. matrix.yaml strictly typed


def _matrix_with(project: Path, old: str, new: str, *, after: int = 0) -> Path:
    """project/matrix.yaml with the first line at or after line `after` that starts with `old`
    (stripped) replaced by `new` at the same indentation."""
    p = project / "matrix.yaml"
    lines = p.read_text().splitlines()
    i = next(j for j, ln in enumerate(lines) if j >= after and ln.strip().startswith(old))
    lines[i] = lines[i][: len(lines[i]) - len(lines[i].lstrip())] + new
    p.write_text("\n".join(lines) + "\n")
    return p


ROCM_LINE = 75  # the rocm image's block in matrix.yaml starts after this line
BENCH_LINE = next(  # the bench: block (a model's depth: block above it has its own n_gen)
    i for i, line in enumerate((ROOT / "matrix.yaml").read_text().splitlines()) if line.startswith("bench:")
)


@pytest.mark.parametrize(
    ("old", "new", "after", "expect"),
    [
        pytest.param(
            "gfx_targets:",
            "gfx_targets: false",
            ROCM_LINE,
            ["images[3].vars: image 'rocm': template variable 'gfx_targets' is False", "e.g. [gfx1201]"],
            id="gfx_targets-false",
        ),
        pytest.param(
            "gfx_targets:",
            "gfx_targets: [gfx1201, 7]",
            ROCM_LINE,
            ["'gfx_targets': item 7 is not text"],
            id="gfx_targets-int-item",
        ),
        pytest.param(
            "cmake_args:",
            "cmake_args: -DGGML_NATIVE=OFF",
            0,
            ["template variable 'cmake_args' is '-DGGML_NATIVE=OFF'", "a list of cmake flags"],
            id="cmake_args-string",
        ),
        pytest.param(
            "cmake_args:",
            "cmake_args: !!set {-DA=1}",
            0,
            ["template variable 'cmake_args' is {'-DA=1'}"],
            id="cmake_args-set",
        ),
        pytest.param(
            "ref: 0c1e",
            "ref: 2026-02-30",
            0,
            ["line 11, column 10: '2026-02-30' cannot be read as a YAML timestamp", "quote it"],
            id="impossible-date",
        ),
        pytest.param(
            "ref: 0c1e",
            "ref: 2026-02-28",
            0,
            [
                "sources.llama.cpp.ref: Input should be a valid string (got datetime.date(2026, 2, 28))",
                "YAML read an unquoted date: quote it",
            ],
            id="valid-date-as-ref",
        ),
        pytest.param(
            "repetitions:",
            "repetitions: " + "9" * 5000,
            0,
            ["cannot be read as a YAML int", "4300 digits"],
            id="5000-digit-int",
        ),
        pytest.param(
            "repetitions:",
            "repetitions: true",
            0,
            ["bench.repetitions: Input should be a valid integer (got True)", "whole number"],
            id="bool-as-count",
        ),
        pytest.param(
            "n_gen:",
            "n_gen: !!set {128}",
            BENCH_LINE,
            ["bench.n_gen: Input should be a valid list (got {128})", "not a !!set"],
            id="set-as-axis",
        ),
        pytest.param(
            "timeout_s:",
            "timeout_s: .nan",
            0,
            ["'.nan' is a YAML 1.1 number form"],  # refused at its line, before the field's type
            id="nan-timeout",
        ),
        pytest.param(
            "hip_version:",
            "hip_version: 7.20",
            0,
            ["template variable 'hip_version' is 7.2", "quote versions"],
            id="float-version",
        ),
    ],
)
def test_a_matrix_value_of_the_wrong_type_is_bad_input_naming_file_field_and_fix(
    project, old, new, after, expect
):
    """Reproducers: `gfx_targets: false` (TypeError in the rocm template render), `ref: 2026-02-30`
    (ValueError out of PyYAML's constructor), huge ints, a `!!set`, `cmake_args` as a string."""
    from toolkit.matrix.api import load_matrix

    p = _matrix_with(project, old, new, after=after)
    with pytest.raises(BadInput) as err:
        load_matrix(p)
    msg = str(err.value)
    assert str(p) in msg
    for e in expect:
        assert e in msg, msg
    res = run("render", "--matrix", str(p))
    no_traceback(res)
    assert exit_code(res) == 4


def test_huge_engine_settings_are_bad_input(project, matrix_data):
    from tests.support.project import mutate, write_matrix
    from toolkit.matrix.api import load_matrix

    for path in (["vllm", "max_model_len"], ["bench", "threads"], ["sglang", "context_length"]):
        data = (
            mutate(matrix_data, path, 10**30)
            if path[0] in matrix_data
            else {**matrix_data, path[0]: {path[1]: 10**30}}
        )
        with pytest.raises(BadInput, match=".".join(path)):
            load_matrix(write_matrix(project, data))


def test_a_set_key_is_bad_input_naming_the_line(project):
    from toolkit.matrix.api import load_matrix

    p = project / "matrix.yaml"
    p.write_text(p.read_text().replace("bench:\n", "? !!set {a}\n: 1\nbench:\n", 1))
    with pytest.raises(BadInput, match=r"line \d+, column \d+: .*a mapping key must be a plain value"):
        load_matrix(p)


FUZZ_VALUES = [
    False,
    True,
    None,
    0,
    -1,
    1.5,
    10**30,
    float("inf"),
    float("nan"),
    "",
    "x",
    "gfx1201",
    [],
    {},
    [1],
    ["a"],
    [None],
    [[1]],
    {"a": 1},
    {1: 2},
    {"a"},
    b"\x00\x01",
    "a b",
]
FUZZ_TEXT = [
    "2026-02-30",
    "2026-02-28",
    "!!set {a, b}",
    "1" + "0" * 5000,
    "!!binary AAAA",
    "!!omap [{a: 1}]",
    ".inf",
    ".nan",
    "~",
    "0x1F",
    "0o17",
    "1_000",
    "2026-02-28 10:00:00",
    "!!pairs [{a: 1}]",
    "!!float 1",
    "!!int x",
    "[a, [b, [c]]]",
    "{a: {b: 1}}",
    "!!str 1",
    "9" * 400,
    "-" + "9" * 40,
    "yes",
    "[]",
    "{}",
]


def test_random_type_substitutions_over_matrix_yaml_never_crash(project):
    """300 random substitutions (seed 21): a value anywhere in matrix.yaml replaced by a value of
    another type (in the data, or as YAML text: dates, tags, 5000-digit ints), then loaded and every
    image rendered: bad input (a ToolkitError, exit 4) or fine, never an exception (exit 1)."""
    import copy
    import random
    import re
    import traceback

    import yaml

    from toolkit.core.errors import ToolkitError
    from toolkit.images import render
    from toolkit.matrix.api import load_matrix

    p = project / "matrix.yaml"
    text0 = p.read_text()
    base = yaml.safe_load(text0)

    def paths(d, pre=()):
        if pre:
            yield pre
        items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else ()
        for k, v in items:
            yield from paths(v, (*pre, k))

    all_paths = list(paths(base))
    lines0 = text0.splitlines()
    scalar_lines = [
        j for j, ln in enumerate(lines0) if re.match(r"^\s*(- )?[\w.]+: \S", ln) and "#" not in ln
    ]
    rnd = random.Random(21)
    crashes, refused, loaded = [], 0, 0
    for i in range(300):
        if i % 3 == 2:
            lines = list(lines0)
            j, t = rnd.choice(scalar_lines), rnd.choice(FUZZ_TEXT)
            lines[j] = re.sub(r"(:\s).*$", lambda m, t=t: m.group(1) + t, lines[j])
            what, text = f"line {j + 1}: {lines[j].strip()[:60]}", "\n".join(lines) + "\n"
        else:
            path, value = rnd.choice(all_paths), rnd.choice(FUZZ_VALUES)
            data = copy.deepcopy(base)
            cur = data
            for k in path[:-1]:
                cur = cur[k]
            cur[path[-1]] = value
            what, text = f"{path} = {value!r}"[:100], yaml.safe_dump(data, sort_keys=False)
        p.write_text(text)
        try:
            lm = load_matrix(p)
            lm.m.bench.cases()
            for spec in lm.m.images:
                render.render_image(lm, spec)
            loaded += 1
        except ToolkitError as err:
            assert err.exit_code == 4, (what, err)
            refused += 1
        except Exception:  # noqa: BLE001 - the point: nothing but bad input may come out
            crashes.append(f"{what}: {traceback.format_exc().splitlines()[-1]}")
    assert not crashes, crashes[:10]
    assert refused > 180 and loaded >= 10  # both kinds happened: the fuzz is not vacuous (15 of 300 load)


def test_a_few_substitutions_through_the_cli_exit_4_never_1(project):
    for old, new in [
        ("gfx_targets:", "gfx_targets: false"),
        ("ref: 0c1e", "ref: 2026-02-30"),
        ("cmake_args:", "cmake_args: 7"),
        ("n_batch:", "n_batch: {a: 1}"),
    ]:
        shutil.copy(Path(__file__).resolve().parents[1] / "matrix.yaml", project / "matrix.yaml")
        p = _matrix_with(project, old, new, after=ROCM_LINE if "gfx" in old else 0)
        for args in (["render", "--matrix", str(p)], ["bench", "--matrix", str(p), "--dry-run"]):
            res = run(*args)
            no_traceback(res)
            assert exit_code(res) == 4, (args, new, res.output)


@pytest.mark.parametrize(
    "members",
    [
        [("../evil", "file", "")],
        [("a/link", "sym", "../../etc/passwd")],
        [("a/fifo", "fifo", "")],
    ],
    ids=["dotdot", "symlink-out", "fifo"],
)
def test_a_hostile_source_archive_is_bad_input_not_a_traceback(tmp_path, members):
    """Reproducer: tarfile's refusal (OutsideDestinationError, or the by-hand check's ValueError)
    came out of toolkit/images/sources.py as a traceback."""
    from tests.support.runs import _tar
    from toolkit.images import sources
    from toolkit.matrix.api import load_matrix

    arc = _tar(tmp_path / "src.tar.gz", [("a/ok.txt", "file", ""), *members])
    (tmp_path / "Dockerfile.templates").mkdir()
    (tmp_path / "Dockerfile.templates" / "t.Dockerfile.j2").write_text("FROM scratch\n")
    (tmp_path / "matrix.yaml").write_text(
        "schema_version: 1\nsources:\n  s:\n    archive: src.tar.gz\n    commit: abc1234\nimages:\n"
        "  - name: i\n    template: t.Dockerfile.j2\n    backend: cpu\n    source: s\nmodels: []\n"
    )
    lm = load_matrix(tmp_path / "matrix.yaml")
    with pytest.raises(BadInput, match=f"source archive {arc}: refused"):
        sources.prepare_source(lm, "s")
    assert not (tmp_path / "evil").exists()


def test_a_corrupt_source_archive_is_bad_input(tmp_path):
    from toolkit.images import sources

    arc = tmp_path / "bad.tar.gz"
    arc.write_bytes(b"\x1f\x8b" + b"\0" * 64)
    with pytest.raises(BadInput, match="refused"):
        sources._extract(arc, tmp_path / "out")


@pytest.mark.parametrize(
    "text",
    [
        "bench:\n  timeout_s: 2026-02-30\n",
        "bench: " + "[" * 5000 + "\n",
        "bench:\n  timeout_s: " + "9" * 400 + "\n",
        "\xff\xfe",
    ],
    ids=["impossible-date", "deep", "huge-int", "not-utf8"],
)
def test_a_published_matrix_yaml_that_is_not_one_does_not_crash_reproduce(tmp_path, text):
    from toolkit.publish import reproduce

    (tmp_path / "matrix.yaml").write_bytes(text.encode("latin-1"))
    assert reproduce._timeout(tmp_path) == 3600.0
    assert reproduce._runner_settings(tmp_path, [make_record("cpu", "cpu", p=512, avg=1.0)]) == {}


def test_a_published_settings_block_of_the_wrong_type_is_bad_input(tmp_path):
    from toolkit.publish import reproduce

    (tmp_path / "matrix.yaml").write_text("vllm:\n  max_model_len: lots\n")
    rec = make_record("vllm", "rocm", p=512, avg=1.0).model_copy(
        update={"runner": "vllm", "method": "vllm-bench-latency", "engine": {"dtype": "float16"}}
    )
    with pytest.raises(BadInput, match=r"matrix.yaml: vllm.max_model_len: Input should be a valid integer"):
        reproduce._runner_settings(tmp_path, [rec])


# ----------------------------------------------------------------- 8. model files llama-bench cannot take


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from toolkit.models.tiny import generate_tiny_qwen3moe

    return generate_tiny_qwen3moe(tmp_path_factory.mktemp("tiny") / "tiny.gguf").read_bytes()


def _comma_project(project: Path, tiny: bytes) -> Path:
    p = project / "matrix.yaml"
    p.write_text(p.read_text().replace("path: models/tiny-qwen3moe.gguf", "path: models/tiny,qwen3moe.gguf"))
    (project / "models").mkdir(exist_ok=True)
    f = project / "models" / "tiny,qwen3moe.gguf"
    f.write_bytes(tiny)
    f.chmod(0o644)
    return p


def test_a_comma_in_a_model_file_name_is_bad_input_naming_model_and_field(project, tiny_gguf):
    """Reproducer: `models/tiny,qwen3moe.gguf` reached `llama-bench -m /models/tiny,qwen3moe.gguf`, which
    llama-bench reads as two models, `/models/tiny` and `qwen3moe.gguf` (a failed run, exit 3)."""
    from toolkit.bench.runners.base import check_model_file
    from toolkit.matrix.api import load_matrix

    lm = load_matrix(_comma_project(project, tiny_gguf))
    model = next(m for m in lm.m.models if m.name == "tiny-qwen3moe")
    with pytest.raises(BadInput) as err:
        check_model_file(lm, model, lm.resolve(model.path))
    msg = str(err.value)
    assert "models[tiny-qwen3moe].path: the file name 'tiny,qwen3moe.gguf' holds a comma" in msg
    assert "'tiny' and 'qwen3moe.gguf'" in msg and "rename the file" in msg


def test_a_comma_in_a_model_file_name_fails_the_dry_run_and_the_argument_list(project, tiny_gguf):
    from toolkit.matrix.api import BenchAxes
    from toolkit.runtimes.llama_bench import args as lb_args

    with pytest.raises(BadInput, match="splits -m on commas"):
        lb_args.bench_args(BenchAxes(), "/models/a,b.gguf")
    p = _comma_project(project, tiny_gguf)
    res = run("bench", "--matrix", str(p), "--dry-run", "-i", "cpu", "-m", "tiny-qwen3moe")
    no_traceback(res)
    assert exit_code(res) == 4 and "commas" in str(res.exception)


def test_a_comma_in_a_folder_name_is_fine(project, tiny_gguf):
    """Only the file's own name reaches -m (it is mounted as /models/<name>): a comma in a folder above
    it is no problem and is not refused."""
    from toolkit.bench.runners.base import check_model_file
    from toolkit.matrix.api import load_matrix

    p = project / "matrix.yaml"
    p.write_text(p.read_text().replace("path: models/tiny-qwen3moe.gguf", "path: mo,dels/tiny-qwen3moe.gguf"))
    (project / "mo,dels").mkdir()
    f = project / "mo,dels" / "tiny-qwen3moe.gguf"
    f.write_bytes(tiny_gguf)
    f.chmod(0o644)
    lm = load_matrix(p)
    model = next(m for m in lm.m.models if m.name == "tiny-qwen3moe")
    check_model_file(lm, model, lm.resolve(model.path))


def _overlong_string_gguf(path: Path) -> Path:
    """A GGUF with no tensors whose last string value declares 1,000,000 bytes in a 128-byte file."""
    import struct

    import gguf

    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_string("general.name", "x")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    data = bytearray(path.read_bytes())
    i = data.rfind(b"\x01" + b"\x00" * 7 + b"x")
    struct.pack_into("<Q", data, i, 1_000_000)
    path.write_bytes(data)
    path.chmod(0o644)
    return path


def test_a_gguf_header_string_longer_than_the_file_fails_the_preflight(project):
    """Reproducer: gguf's GGUFReader slices its memmap, so a string whose declared length runs past
    the end of a file without tensors was silently cut short and the file passed the preflight."""
    import gguf

    from toolkit.bench.runners.base import check_model_file
    from toolkit.matrix.api import load_matrix

    (project / "models").mkdir()
    f = _overlong_string_gguf(project / "models" / "tiny-qwen3moe.gguf")
    assert len(gguf.GGUFReader(f).tensors) == 0  # the reference reader takes it
    lm = load_matrix(project / "matrix.yaml")
    model = next(m for m in lm.m.models if m.name == "tiny-qwen3moe")
    with pytest.raises(BadInput, match="its header declares more bytes than the file has"):
        check_model_file(lm, model, f)


@pytest.mark.parametrize("where", ["first-key", "a-value", "last-tensor-name"])
def test_any_overlong_header_string_of_a_real_model_fails_the_preflight(project, tiny_gguf, where):
    import struct

    from toolkit.bench.runners.base import check_model_file
    from toolkit.matrix.api import load_matrix

    data = bytearray(tiny_gguf)
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    if where == "first-key":
        at = 24
    else:
        name = b"general.architecture" if where == "a-value" else b"output.weight"
        assert data.find(name) > 24, name
        at = data.find(name) - 8
        if where == "a-value":
            at += 8 + len(name) + 4
    struct.pack_into("<Q", data, at, len(data))
    (project / "models").mkdir()
    f = project / "models" / "tiny-qwen3moe.gguf"
    f.write_bytes(data)
    f.chmod(0o644)
    lm = load_matrix(project / "matrix.yaml")
    model = next(m for m in lm.m.models if m.name == "tiny-qwen3moe")
    with pytest.raises(BadInput, match="corrupt GGUF"):
        check_model_file(lm, model, f)


# ----------------------------------------------------------------- 4. run order: the store's sequence


def _rec_at(created: str, run_id: str, avg: float):
    r = make_record("cpu", "cpu", p=512, avg=avg)
    return r.model_copy(update={"created": created, "run_id": run_id})


def test_a_run_made_with_the_clock_a_year_ahead_does_not_hide_later_runs(tmp_path):
    """Reproducer: records were ordered by `created`, so a run whose host clock was a year ahead
    superseded every later run of the same test. Now runs are ordered by the store's sequence
    number and both anomalies are flagged clock-skew."""
    from datetime import datetime, timedelta, timezone

    from toolkit.analysis import tables
    from toolkit.results import identity
    from toolkit.results import index as resultindex

    now = datetime.now(timezone.utc)
    store = ResultStore(tmp_path / "results")
    store.add_result(_rec_at((now - timedelta(days=2)).isoformat(timespec="seconds"), "run-1", 100.0))
    store.add_result(_rec_at((now + timedelta(days=365)).isoformat(timespec="seconds"), "run-ahead", 200.0))
    store.add_result(_rec_at(now.isoformat(timespec="seconds"), "run-3", 300.0))
    recs = store.results()
    assert [r.seq for r in recs] == [1, 2, 3]
    sel = identity.newest_per_test(recs)
    assert [r.run_id for r in sel.used] == ["run-3"] and sel.superseded == 2
    assert [bool(r.clock_skew) for r in recs] == [False, True, True]
    assert "in the future" in recs[1].clock_skew and "before" in recs[2].clock_skew
    # the index path gives the same record, flagged the same
    via_index = resultindex.select(ResultStore(tmp_path / "results"))
    (used,) = identity.newest_per_test(via_index).used
    assert used.run_id == "run-3" and used.clock_skew == recs[2].clock_skew
    assert "clock-skew" in tables.record_flags(used, tables.ReportOptions())
    res = run("report", "--results", str(tmp_path / "results"))
    assert exit_code(res) == 0 and "300.00" in res.output and "200.00" not in res.output
    assert "clock-skew" in res.output and "the folder's sequence number" in res.output


def test_records_without_a_sequence_number_fall_back_to_file_order(tmp_path):
    """Records written before `seq` existed: the one later in the file is the newer, whatever `created`
    says; one written after them (with a seq) is newer than both."""
    from toolkit.results import identity
    from toolkit.results import index as resultindex

    store = ResultStore(tmp_path / "results")
    old = [
        _rec_at("2030-01-01T00:00:00+00:00", "old-1", 1.0),
        _rec_at("2020-01-01T00:00:00+00:00", "old-2", 2.0),
    ]
    f = store.add_result(old[0])  # its file, then the same file rewritten without seq
    f.write_text("".join(json.dumps(r.model_dump(mode="json") | {"seq": None}) + "\n" for r in old))
    assert [r.seq for r in store.results()] == [None, None]
    assert [r.run_id for r in identity.newest_per_test(store.results()).used] == ["old-2"]
    assert [r.run_id for r in identity.newest_per_test(resultindex.select(store)).used] == ["old-2"]
    store.add_result(_rec_at("2001-01-01T00:00:00+00:00", "new", 3.0))
    assert [r.run_id for r in identity.newest_per_test(store.results()).used] == ["new"]
    assert [r.run_id for r in identity.newest_per_test(resultindex.select(store)).used] == ["new"]


def test_the_sequence_survives_a_lost_counter_and_batches(tmp_path):
    store = ResultStore(tmp_path / "results")
    store.add_result(_rec_at("2026-01-01T00:00:00+00:00", "a", 1.0))
    store.add_results([_rec_at("2026-01-01T00:00:01+00:00", "b", 1.0)] * 3)
    assert [r.seq for r in store.results()] == [1, 2, 3, 4]
    (tmp_path / "results" / ".seq").unlink()  # a copied folder, a lost file
    store.add_result(_rec_at("2026-01-01T00:00:02+00:00", "c", 1.0))
    (tmp_path / "results" / ".seq").write_text("garbage")
    store.add_result(_rec_at("2026-01-01T00:00:03+00:00", "d", 1.0))
    assert [r.seq for r in store.results()] == [1, 2, 3, 4, 5, 6]


def _append_many(args: tuple[str, int, int]) -> None:
    root, worker, n = args
    store = ResultStore(Path(root))
    for i in range(n):
        rec = make_record("cpu", "cpu", p=512 + worker, avg=1.0 + i)
        store.add_result(rec.model_copy(update={"run_id": f"w{worker}"}))


def _default_signals() -> None:
    """A pool worker's first step: SIGTERM, SIGHUP and SIGINT back to the default (what a process the
    test suite did not touch has)."""
    import signal

    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_DFL)


def test_concurrent_writers_get_unique_increasing_numbers(tmp_path):
    """Four processes appending at once (two benches with --allow-concurrent, an import): every record
    a distinct number, and inside each file the numbers grow in line order."""
    import multiprocessing

    root = tmp_path / "results"
    # the workers start with the signals' default dispositions (a toolkit entry point run in this process
    # earlier left its SIGTERM handler; a forked worker that kept it outlived Pool.terminate: a hang of
    # the whole suite), and are let go by close/join, never terminated
    pool = multiprocessing.get_context("fork").Pool(4, initializer=_default_signals)
    try:
        pool.map(_append_many, [(str(root), w, 40) for w in range(4)])
    finally:
        pool.close()
        pool.join()
    recs = ResultStore(root).results()
    seqs = [r.seq for r in recs]
    assert sorted(seqs) == list(range(1, 161))
    for w in range(4):
        mine = [r.seq for r in recs if r.run_id == f"w{w}"]
        assert mine == sorted(mine)


def test_imported_rows_keep_their_test_time_order_and_get_a_sequence(tmp_path):
    """Rows of one import are ordered by llama-bench's test_time (not their line order, not their seq)."""
    from toolkit.results import identity

    store = ResultStore(tmp_path / "results")
    res = importer.import_files(store, [DATA / "cases" / "turn3" / "d.jsonl"], label="x")
    recs = store.results()
    assert res.records == 2 and sorted(r.seq for r in recs) == [1, 2]
    assert all(identity.is_timed(r) for r in recs)
    (cell,) = identity.newest_per_test(recs).used
    # line 1 (400 t/s, test_time Jan 2) was given seq 1, line 2 (100 t/s, Jan 1) seq 2: test_time decides
    assert [(r.seq, r.avg_ts) for r in recs] == [(1, 400.0), (2, 100.0)]
    assert cell.model_extra["between_runs"]["means"] == [100.0, 400.0] and cell.avg_ts == 250.0
    assert cell.raw["test_time"] == "2025-01-02T00:00:00Z"  # the newest by test_time gives the rest


# ----------------------------------------------------------------- 7. one bench per results folder

_HOLD = """
import sys, time
from pathlib import Path
from toolkit.bench import guard
lock = guard.ResultsLock(Path(sys.argv[1]), "run-a", "engineA0123456789abcdef")
lock.start(allow_concurrent=False, note=print)
print("held", flush=True)
sys.stdin.read()  # until the test closes stdin
"""


@pytest.fixture
def other_bench(tmp_path):
    """A process holding results/.lock as `toolkit bench` does on another engine (run-a)."""
    import subprocess
    import sys

    root = tmp_path / "results"
    root.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield root, proc
    if proc.poll() is None:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)


def test_a_second_bench_on_another_engine_writing_the_same_results_is_refused_exit_9(other_bench):
    """Reproducer: two benches on two Docker engines of one host wrote one results folder unnoticed
    (the per-engine guard sees only its own engine)."""
    from toolkit.bench import guard
    from toolkit.core.errors import ConcurrentRun

    root, proc = other_bench
    lock = guard.ResultsLock(root, "run-b", "engineB0123456789")
    with pytest.raises(ConcurrentRun) as err:
        lock.start(allow_concurrent=False, note=lambda s: None)
    msg = str(err.value)
    assert err.value.exit_code == 9
    assert f"another toolkit benchmark is writing to this results folder: run run-a (pid {proc.pid}, " in msg
    assert f"writing {root} from container engine engineA01234567" in msg
    assert guard.CONCURRENT_ADVICE in msg  # the per-engine guard's advice, word for word
    assert lock.fd is None  # nothing held


def test_allow_concurrent_runs_and_flags_records_while_the_other_bench_runs(other_bench):
    from toolkit.bench import guard

    root, proc = other_bench
    notes: list[str] = []
    lock = guard.ResultsLock(root, "run-b", "engineB0123456789")
    lock.start(allow_concurrent=True, note=notes.append)
    assert notes and "--allow-concurrent" in notes[0] and "run-a" in notes[0]
    store = ResultStore(root)
    saver = Saver(store, concurrent=lock.others)
    saver.save(make_record("cpu", "cpu", p=512, avg=1.0))
    proc.stdin.close()  # the other bench ends
    proc.wait(timeout=30)
    saver.save(make_record("cpu", "cpu", p=1024, avg=1.0))
    saver.save(make_record("cpu", "cpu", p=2048, avg=1.0))
    first, second, third = store.results()
    assert first.model_extra["concurrent"]["other_runs"][0].startswith("run-a (pid")
    # the second test ran while run-a was alive (alive at the first save): flagged (breaker round 28)
    assert second.model_extra["concurrent"]["other_runs"][0].startswith("run-a (pid")
    assert "concurrent" not in (third.model_extra or {})  # measured after it ended: the lock passed to us
    assert lock.held
    lock.release()


def test_the_lock_is_released_with_the_run_and_a_hostile_lock_file_is_not_echoed(tmp_path):
    from toolkit.bench import guard
    from toolkit.core.errors import ConcurrentRun

    root = tmp_path / "results"
    a = guard.ResultsLock(root, "run-a", "engine")
    a.start(allow_concurrent=False, note=lambda s: None)
    (root / ".lock").write_bytes(
        b'{"pid": "\\u001b[2J", "run_id": "x\\nrm -rf /", "engine": "' + b"A" * 3000 + b'"}'
    )
    b = guard.ResultsLock(root, "run-b", "engine")
    with pytest.raises(ConcurrentRun) as err:
        b.start(allow_concurrent=False, note=lambda s: None)
    msg = str(err.value)
    assert "pid ?" in msg and "\n" not in msg and "AAAA" not in msg and "\x1b" not in msg
    a.release()
    b.start(allow_concurrent=False, note=lambda s: None)  # free again
    assert b.held and json.loads((root / ".lock").read_text())["run_id"] == "run-b"
    b.release()


# ----------------------------------------------------------------- 5. import performance


def _sql_insert_with_a_long_value(n: int) -> str:
    sql = (DATA / "llamabench-0c1e57098-cpu.sql").read_text()
    insert = next(ln for ln in sql.splitlines() if ln.startswith("INSERT"))
    # a value of n spaces between two characters inside the values list (the field gpu_info is text)
    return sql + insert.replace("VALUES (", "VALUES (x" + " " * n + "y, ", 1) + "\n"


def test_a_32_kb_sql_line_imports_in_linear_time(tmp_path):
    """Reproducer: the SQL value pattern (a lazy group before \\s*) backtracked quadratically: a
    32 KB line took 18.6 s."""
    import time

    f = tmp_path / "long.sql"
    f.write_text(_sql_insert_with_a_long_value(32 * 1024))
    t0 = time.monotonic()
    res = importer.import_files(ResultStore(tmp_path / "results"), [f], label="x")
    assert time.monotonic() - t0 < 3.0
    assert res.records >= 1 and any("values for" in r for r in res.refused)


def readers_rows(text: str) -> list:
    from toolkit.runtimes.llama_bench import readers as readers

    return readers.read_source(text)[1]


def test_many_lines_that_start_a_format_but_hold_no_row_are_read_once(tmp_path):
    """Reproducer: every line that starts a format but yields no row made the reader read the rest of
    the file again (2,000 lines of `{x` took 13 s; 3,000 of `| test | t/s |` longer)."""
    import time

    jsonl = (DATA / "llamabench-0c1e57098-cpu.jsonl").read_text()
    md = (DATA / "llamabench-0c1e57098-cpu.md").read_text()
    for junk, rows in (("{x\n", md), ("| test | t/s |\n", jsonl), ("[x\n", jsonl)):
        f = tmp_path / "junk.txt"
        f.write_text(junk * 3000 + rows)  # log-like starts of one format, then the rows in another
        t0 = time.monotonic()
        res = importer.import_files(ResultStore(tmp_path / f"r{len(junk)}"), [f], label="x")
        assert time.monotonic() - t0 < 5.0, junk
        assert res.records == len(readers_rows(rows)), junk


def test_an_import_fsyncs_once_per_batch_not_per_record(tmp_path, monkeypatch):
    import os

    line = json.loads((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
    for k in ("avg_ns", "stddev_ns", "samples_ns"):  # the times would contradict the changed counts
        line.pop(k, None)
    f = tmp_path / "many.jsonl"
    f.write_text("".join(json.dumps({**line, "n_prompt": 1 + i, "n_gen": 0}) + "\n" for i in range(2500)))
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    store = ResultStore(tmp_path / "results")
    res = importer.import_files(store, [f], label="x")
    assert res.records == 2500
    assert len(calls) <= 6, len(calls)  # 3 batches of <= 1000: the records' file and the counter each
    assert [r.seq for r in store.results()] == list(range(1, 2501))


def test_an_import_file_over_the_size_limit_is_bad_input_before_it_is_parsed(tmp_path, monkeypatch):
    # a format read whole (-o md here); jsonl, json and csv stream at any size (tests/test_import_stream.py)
    monkeypatch.setattr(import_read, "MAX_IMPORT_BYTES", 1 << 20)
    f = tmp_path / "huge.md"
    f.write_bytes(b"| test | t/s |\n| --- | --- |\n" + "| pp512 | 10.0 \u00b1 0.1 |\n".encode() * 50_000)
    with pytest.raises(BadInput, match="larger than 1 MiB"):
        importer.import_files(ResultStore(tmp_path / "results"), [f], label="x")


def test_no_control_sequence_from_a_file_reaches_the_terminal(tmp_path):
    """Issue 32: `toolkit report` printed OSC 0 (window title) and OSC 52 (clipboard write) from an
    imported model name raw. Every string the CLI prints goes through one filter (common.terminal_safe
    behind click.echo): OSC, CSI, other ESC sequences, C0 and C1 controls are gone; text stays."""
    from toolkit.cli.common import terminal_safe

    evil = "qwen\x1b]0;pwned\x07\x1b]52;c;ZWNobyBoaQ==\x1b\\\x1b[2J\x9b31m\x9d0;t\x07\r-moe\tok"
    assert terminal_safe(evil) == "qwen-moe\tok"
    big = "\x1b]" + "x" * 1_000_000  # an unterminated OSC of 1 MB: linear, and gone
    t0 = time.monotonic()
    assert terminal_safe(big + "\nend") == "\nend" and time.monotonic() - t0 < 2
    store = ResultStore(tmp_path / "results")
    evil = "tiny\x1b]0;pwned\x07\x1b]52;c;aGk=\x07"  # a model name as an imported file gives it
    store.add_result(
        make_record("cpu", "cpu", p=512, avg=100.0, model=evil, raw={"model_type": "qwen3moe 1B"})
    )
    store.add_result(make_record("cpu", "cpu", p=512, avg=90.0, model="other"))
    res = run("report", "--results", str(store.root))
    assert res.exit_code == 0, res.output
    assert "tiny" in res.output  # the model column shows it (two models)
    assert "\x1b" not in res.output and "\x07" not in res.output


def _project_with(tmp_path, body: str, name: str = "evil.Dockerfile.j2", link: str | None = None):
    """A project whose `cpu` image renders `name` (the template `body`, or a symbolic link to `link`)."""
    import yaml

    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    tpl = tmp_path / "Dockerfile.templates" / name
    if link:
        tpl.symlink_to(link)
    else:
        tpl.write_text(body)
    data = yaml.safe_load((root / "matrix.yaml").read_text())
    for img in data["images"]:
        if img["name"] == "cpu":
            img["template"] = name
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path / "matrix.yaml"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "took more than",
        ),
        ('{{ "x" * 10**10 }}', "too large|reaches outside"),
        ("{{ range(10**9) | list | length }}", "too large|reaches outside"),
        ("{{ 7 ** 100000 }}", "too large|reaches outside"),
        (
            "FROM x {{ 9**1000 * 9**1000 * 9**1000 * 9**1000 * 9**1000 }}",
            "reaches outside|cannot be rendered",
        ),
        ('FROM x {{ "x".ljust(10**8) }}', "reaches outside"),
        ('FROM x {% for i in range(90000) %}{{ "y" * 100 }}{% endfor %}', "renders a Dockerfile of"),
    ],
)
def test_a_template_that_would_run_forever_or_fill_memory_is_bad_input(tmp_path, body, why, monkeypatch):
    """Issue 32: a 10^10-iteration loop hung `render`; `"x"*10**10` and range(10**9) ended in
    tracebacks. Exit 4 naming the template, in bounded time and memory."""
    from toolkit.images import render as render_mod

    monkeypatch.setattr(render_mod, "RENDER_TIMEOUT_S", 1.0)
    matrix = _project_with(tmp_path, body)
    t0 = time.monotonic()
    res = run("render", "--matrix", str(matrix), "-i", "cpu")
    assert exit_code(res) == 4 and time.monotonic() - t0 < 20, res.output
    assert "evil.Dockerfile.j2" in str(res.exception)
    import re

    assert re.search(why, str(res.exception)), res.exception


def test_a_template_that_is_a_symbolic_link_is_refused_not_followed(tmp_path):
    """Issue 32: a symlink in Dockerfile.templates/ to /etc/shadow was rendered into images/cpu/Dockerfile."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:$6$hash:19000:0:99999:7:::\n")
    matrix = _project_with(tmp_path / "p", "", link=str(secret))
    res = run("render", "--matrix", str(matrix), "-i", "cpu")
    assert exit_code(res) == 4 and "symbolic link" in str(res.exception)
    assert not (tmp_path / "p" / "images" / "cpu" / "Dockerfile").exists()


def test_every_pattern_run_on_input_is_linear_on_a_megabyte():
    """Issue 32: a 32 KB line of `\\"` took 9 s in the non-finite repair (128 KB did not finish in 60 s);
    the md t/s cell pattern was quadratic; a 5000-digit test name ended in a traceback."""
    from toolkit.runtimes.llama_bench import readers

    cases = [
        lambda: jsonsafe.parse_printed_line('{"a": "' + '\\"' * 500_000),
        lambda: readers.read_source(
            "| model | test | t/s |\n|---|---|---|\n| m | pp512 | " + "1+-" * 340_000 + "x |\n"
        ),
        lambda: readers.read_source(
            "| model | test | t/s |\n|---|---|---|\n| m | pp" + "9" * 1_000_000 + " | 1 ± 1 |\n"
        ),
        lambda: readers.read_source("nan " * 250_000),
    ]
    for case in cases:
        t0 = time.monotonic()
        case()
        assert time.monotonic() - t0 < 2.0
    (row,) = readers.read_md("| model | test | t/s |\n|---|---|---|\n| m | pp" + "9" * 5000 + " | 1 ± 1 |\n")
    assert row.problem and "not a llama-bench test" in row.problem


def test_a_typo_in_a_runner_block_names_the_key_and_the_fix(tmp_path):
    root = Path(__file__).resolve().parents[1]
    text = (root / "matrix.yaml").read_text().replace("\nvllm:\n", "\nvllm:\n  max_model_lenn: 4096\n")
    (tmp_path / "matrix.yaml").write_text(text + "bench2: {}\n")
    shutil.copytree(root / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    res = run("render", "--matrix", str(tmp_path / "matrix.yaml"))
    msg = str(res.exception)
    assert exit_code(res) == 4 and "vllm.max_model_lenn: unknown key; did you mean 'max_model_len'?" in msg
    text = (root / "matrix.yaml").read_text() + "bench2: {}\n"
    (tmp_path / "matrix.yaml").write_text(text)
    msg = str(run("render", "--matrix", str(tmp_path / "matrix.yaml")).exception)
    assert "vllm, sglang)" in msg and "runner_settings" not in msg  # the file's keys, not internals


def test_a_rebuild_of_someone_elses_run_gets_no_host_network_and_its_own_tags(project):
    """Issue 32: `reproduce --rebuild` ran a stranger's Dockerfile with `--network host` (a RUN step
    reached a listener on 127.0.0.1) and tagged it toolkit/cpu:latest over the user's own image. The
    command a rebuild runs (dry run: the same command line) has its own network and namespace."""
    from toolkit.images import build as build_mod
    from toolkit.matrix.api import load_matrix
    from toolkit.results.records import ResultStore

    lm = load_matrix(project / "matrix.yaml")
    store = ResultStore(project / "results")
    own = build_mod.build_image(lm, lm.m.image("cpu"), store, dry_run=True).command
    theirs = build_mod.build_image(lm, lm.m.image("cpu"), store, dry_run=True, stranger=True).command
    assert own[own.index("--network") + 1] == "host" and "toolkit/cpu:latest" in own
    assert theirs[theirs.index("--network") + 1] == "default"
    tags = [theirs[i + 1] for i, a in enumerate(theirs) if a == "-t"]
    assert tags and all(t.startswith("toolkit-reproduce/cpu:") for t in tags)


def test_a_command_asked_for_something_that_did_nothing_exits_non_zero(project, monkeypatch):
    """Issue 33: doctor exited 0 with an `error` check, `push -i cpu` of an image never built exited 0
    having pushed nothing, `pins` exited 0 having checked no pin. A pipeline must stop there."""
    from toolkit.images import pins as pins_mod

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    res = run("doctor", "--matrix", str(project / "matrix.yaml"))
    assert exit_code(res) == 12 and "check(s) failed" in str(res.exception)
    assert "cpu: cannot run here: the container engine is not reachable" in res.output  # not "can run"
    res = run("push", "--matrix", str(project / "matrix.yaml"), "-i", "cpu", "--registry", "127.0.0.1:1/x")
    assert exit_code(res) == 2 and "nothing pushed" in str(res.exception) and "cpu:" in str(res.exception)
    pin = pins_mod.Pin(
        "image", "debian:trixie-slim@sha256:" + "a" * 64, "sha256:" + "a" * 64, ("matrix.yaml",), None
    )
    down = [pins_mod.PinResult(pin, "unreachable", None, "not checked: no answer")]
    monkeypatch.setattr(pins_mod, "check_pins", lambda *a, **k: down)  # no network here: the answer is made
    res = run("pins", "--matrix", str(project / "matrix.yaml"))
    assert exit_code(res) == 11 and "no pin could be checked" in str(res.exception)


def test_report_from_the_wrong_folder_says_so_and_writes_nothing(tmp_path, monkeypatch):
    """The newcomer's find: `toolkit report` from ~ said "no results yet: run toolkit bench" and
    `--format html` created ~/results/report.html."""
    monkeypatch.chdir(tmp_path)
    for extra in ([], ["--format", "html"]):
        res = run("report", *extra)
        assert (
            exit_code(res) == 4
            and "no results folder at" in str(res.exception)
            and "--results DIR" in str(res.exception)
        )
    assert not (tmp_path / "results").exists()


def test_an_imported_flag_in_a_shape_the_toolkit_never_writes_is_dropped(tmp_path):
    """The breaker's find: `toolkit_flags: ["a|b"]` split a report table's columns."""
    row = json.loads((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
    row["toolkit_flags"] = ["a|b", "host-busy", "x\\ny", "throttled:sw-power-cap"]
    f = tmp_path / "m.jsonl"
    f.write_text(json.dumps(row) + "\n")
    store = ResultStore(tmp_path / "results")
    importer.import_files(store, [f], label="m")
    (rec,) = store.results()
    kept = rec.model_extra.get("flags") or []
    assert "a|b" not in kept and "x\\ny" not in kept and "x\ny" not in kept, kept
    # the well-formed ones name telemetry this row has no block of: left out too since round 15
    # (tests/test_round15_telemetry.py)
    assert [x for x in kept if x in row["toolkit_flags"]] == []


def test_the_run_that_holds_the_lock_learns_of_a_concurrent_one_and_both_flag_the_overlap(tmp_path):
    """Reproducer (issue 32 item 11): with --allow-concurrent only the second run flagged its records;
    the run that started first never learned of it, so half the overlap was unflagged."""
    from toolkit.bench import guard

    root = tmp_path / "results"
    a = guard.ResultsLock(root, "run-a", "engineA")
    a.start(allow_concurrent=False, note=lambda s: None)
    b = guard.ResultsLock(root, "run-b", "engineB")
    b.start(allow_concurrent=True, note=lambda s: None)
    store = ResultStore(root)
    Saver(store, concurrent=a.others).save(make_record("cpu", "cpu", p=512, avg=1.0))
    Saver(store, concurrent=b.others).save(make_record("cpu", "cpu", p=1024, avg=1.0))
    b.release()  # b ends: a's later records are its own again
    Saver(store, concurrent=a.others).save(make_record("cpu", "cpu", p=2048, avg=1.0))
    a_during, b_during, a_after = store.results()
    assert a_during.model_extra["concurrent"]["other_runs"][0].startswith("run-b (pid")
    assert b_during.model_extra["concurrent"]["other_runs"][0].startswith("run-a (pid")
    assert "concurrent" not in (a_after.model_extra or {})
    assert list((root / guard.ResultsLock.PRESENT).iterdir()) == []  # nothing left behind
    a.release()


@pytest.mark.parametrize("written", ["010", "0x10", "1:00", "1_000", ".nan", "-.inf", "1_0.5"])
def test_a_yaml_1_1_number_form_is_bad_input_not_another_value(project, written):
    """Reproducer (breaker): `n_cpu_moe: [010]` ran -ncmoe 8, `[0x10]` 16, `[1:00]` 60: YAML 1.1 reads these
    as numbers other than they show."""
    from toolkit.matrix.api import load_matrix

    p = project / "matrix.yaml"
    p.write_text(re.sub(r"(?m)^  n_cpu_moe: \[0\]", f"  n_cpu_moe: [{written}]", p.read_text(), count=1))
    with pytest.raises(BadInput, match=r"line \d+, column \d+: .* is a YAML 1.1 number form"):
        load_matrix(p)


@pytest.mark.parametrize("written", ["no", "yes", "on", "Off"])
def test_a_yaml_1_1_boolean_word_is_bad_input_saying_so(project, written):
    """Reproducer (breaker): `split_mode: [no]` said "(got False)", with no word of YAML's boolean."""
    from toolkit.matrix.api import load_matrix

    p = project / "matrix.yaml"
    p.write_text(
        re.sub(r"(?m)^  split_mode: \[layer\]", f"  split_mode: [{written}]", p.read_text(), count=1)
    )
    with pytest.raises(
        BadInput, match=rf"'{written}' is read by YAML 1.1 as a boolean .*write true or false"
    ):
        load_matrix(p)


def test_plain_decimal_numbers_still_read(project):
    from toolkit.matrix.api import load_matrix

    p = project / "matrix.yaml"
    text = re.sub(r"(?m)^  n_cpu_moe: \[0\]", "  n_cpu_moe: [0, 8, 12]", p.read_text(), count=1)
    p.write_text(re.sub(r"(?m)^  timeout_s: .*$", "  timeout_s: 1500.5", text, count=1))
    # `+4` is refused since fix49b: an int as text (an env value, a template var) would lose its +
    b = load_matrix(p).m.bench
    assert b.n_cpu_moe == [0, 8, 12] and b.timeout_s == 1500.5
