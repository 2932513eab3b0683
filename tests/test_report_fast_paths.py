"""The report's fast paths, each against what it stands in for: core.text.strip_controls' no-control
shortcut, table_text's column widths without drawing a grid (tabulate's own), identity.test_field
(test_fields' value by a bisect lookup), report.json_text (json.dumps' document by pydantic_core)."""

from __future__ import annotations

import random

import pytest

from toolkit.core.text import CONTROL, strip_controls


def test_strip_controls_fast_path_keeps_text_without_a_control_start():
    for ch in map(chr, range(0x10000)):  # every CONTROL match starts with a character of its class
        if not 0xD800 <= ord(ch) <= 0xDFFF and CONTROL.match(ch + "]0;t[0m"):
            assert strip_controls("a" + ch + "]0;t\x07b") != "a" + ch + "]0;t\x07b"
    text = "plain ascii, tabs\tand\nnewlines é ü"
    assert strip_controls(text) == text
    assert strip_controls("x\x1b]0;title\x07y\x9b31mz") == "xyz"


def test_simple_widths_measure_the_drawn_grid():
    """fit_table's arithmetic width of a tabulate `simple` grid is the drawn grid's longest line, for
    every choice of columns; strings not one column per character are left to the drawn grid."""
    from toolkit.analysis.table_text import _grid, _simple_widths

    rnd = random.Random(2)
    alphabet = "ab Z.-|*±é°µ" + "\u4e2d\u0301\u200b\x1b\n"  # a wide, a combining, a zero-width, controls

    def text() -> str:
        return "".join(rnd.choice(alphabet) for _ in range(rnd.choice([0, 0, 1, 2, 5, 12])))

    measured = 0
    for _ in range(3000):
        ncols, nrows = rnd.randint(1, 5), rnd.randint(0, 4)
        headers, body = [text() for _ in range(ncols)], [[text() for _ in range(ncols)] for _ in range(nrows)]
        widths = _simple_widths(headers, body)
        if widths is None:
            odd = "\u4e2d\u0301\u200b\x1b\n"  # wide, combining, zero-width, controls: not measured
            assert any(c in odd for s in headers + sum(body, []) for c in s)
            continue
        measured += 1
        idx = rnd.sample(range(ncols), rnd.randint(1, ncols))
        drawn = _grid([headers[i] for i in idx], [[line[i] for i in idx] for line in body])
        assert sum(widths[i] for i in idx) + 2 * (len(idx) - 1) == max(map(len, drawn))
    assert measured > 200  # 276 of them with this seed


def test_test_field_reads_what_test_fields_holds():
    """identity.test_field (one field, found in the TestKey's sorted pairs inside keys_cached) gives
    test_fields' value for every field, None for one the record has not, in and out of the memo."""
    from tests.support.records import make_record
    from toolkit.results import identity

    r = make_record("cpu", "cpu", p=512, avg=100.0, threads=4, raw={"type_k": "q8_0", "flash_attn": "on"})
    fields = identity.test_fields(r)
    assert {"n_threads", "type_k", "flash_attn"} <= set(fields)
    for name in [*fields, "no_such_field", "", "zzz"]:
        assert identity.test_field(r, name) == fields.get(name)
        with identity.keys_cached():
            assert identity.test_field(r, name) == fields.get(name)


def _doc(rnd: random.Random, depth: int = 0):
    """A random report-like JSON document: texts (non-ASCII, DEL, controls, astral, lone surrogates,
    the words NaN and Infinity), floats of every exponent, ints past 64 bits, None, bools, nesting."""
    pick = rnd.random()
    if depth < 3 and pick < 0.25:
        return {"".join(rnd.choice("ab_é") for _ in range(3)): _doc(rnd, depth + 1) for _ in range(4)}
    if depth < 3 and pick < 0.4:
        return [_doc(rnd, depth + 1) for _ in range(rnd.randint(0, 3))] + [()]
    if pick < 0.6:
        return rnd.choice([2.5e-7, 1e16, 1e22, -0.0, 0.1, 123456789012345680.0, 1e-300, 17489.42])
    if pick < 0.7:
        return rnd.choice([0, -1, 2**70, True, False, None])
    alphabet = ["a", " ", "±", "é", "\x7f", "\x00", "\x1f", "\b", '"', "\\", "/", "\u2028", "😀", "NaN"]
    return "".join(rnd.choice(alphabet + ["\ud800"] * (pick > 0.98)) for _ in range(rnd.randint(0, 6)))


def test_json_text_writes_what_json_dumps_writes():
    """report.json_text (pydantic_core's encoder, its raw characters escaped) gives json.dumps' document:
    the same text but for float exponents (2.5e-7 for 2.5e-07), ASCII only, ValueError on NaN/inf."""
    import json
    import re

    from toolkit.analysis.report import json_text

    rnd = random.Random(5)
    exp = re.compile(r"(?<=[0-9])e([-+]?)0*(?=[0-9])")  # 2.5e-07 / 2.5e-7, 1e+16 / 1e16 alike
    for _ in range(400):
        doc = {"k": _doc(rnd)}
        want = json.dumps(doc, indent=2, allow_nan=False)
        got = json_text(doc)
        assert got.isascii() and json.loads(got) == json.loads(want)
        assert exp.sub(r"e\1", got).replace("e+", "e") == exp.sub(r"e\1", want).replace("e+", "e")
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="not JSON compliant"):
            json_text({"x": [1, {"y": bad}]})


def test_wrap_gives_a_fitting_line_as_textwrap_does_without_it(monkeypatch):
    """table_text.wrap of a line that fits (printable, no trailing space) is that line, without
    textwrap (~8,000 lines of a 10,000-record text report); every other line as textwrap wraps it."""
    import textwrap

    from toolkit.analysis import table_text

    def textwraps(text: str, width: int) -> list[str]:  # what wrap gave before its shortcut
        body = text.lstrip(" ")
        indent = " " * (len(text) - len(body) + (2 if body.startswith("- ") else 0))
        return textwrap.wrap(
            text, width, subsequent_indent=indent, break_on_hyphens=False, drop_whitespace=True
        ) or [""]

    rnd = random.Random(3)
    alphabet = ["a", "b", " ", "  ", "- ", "-", "±", "é", "\t", "\n", "\u00a0", "\u2003", "\x1b", "xyz"]
    for _ in range(20000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12)))
        width = rnd.randint(1, 16)
        assert table_text.wrap(text, width) == textwraps(text, width), (text, width)
    calls = []
    monkeypatch.setattr(textwrap, "wrap", lambda *a, **k: calls.append(a) or [])
    assert table_text.wrap("- pp512 ub512: noisy, ub-no-effect [cpu@ab12]", 80) == [
        "- pp512 ub512: noisy, ub-no-effect [cpu@ab12]"
    ]
    assert calls == []


def test_simple_widths_take_plus_minus_as_one_column_without_wcwidth(monkeypatch):
    """A cell whose only non-ASCII character is `±` (every tok/s cell) is one column a character, as
    wcwidth says, without asking wcwidth (~36,000 cells of a 10,000-record text report)."""
    wcwidth = pytest.importorskip("wcwidth")
    from toolkit.analysis.table_text import _simple_widths

    assert wcwidth.wcswidth("±") == 1
    calls = []
    monkeypatch.setattr(wcwidth, "wcswidth", lambda x: calls.append(x) or len(x))
    assert _simple_widths(["test", "cpu"], [["pp512", "101.5 ± 2.0"], ["tg128", "12.3 ± 0.4"]]) == [6, 11]
    assert calls == []


def test_report_is_made_with_the_collector_off_and_left_as_it_was(tmp_path, monkeypatch):
    """`toolkit report` (not html) publishes with the cyclic collector off (its Facts, tables and
    texts hold no cycles: ~330 collections, ~70 ms at 10,000 records shown) and leaves it on after."""
    import gc

    from click.testing import CliRunner

    from tests.support.records import filed_fixtures
    from toolkit.analysis import report as report_mod
    from toolkit.cli.main import cli

    filed_fixtures(tmp_path / "results")
    seen = []
    publish = report_mod.publish
    monkeypatch.setattr(
        report_mod, "publish", lambda *a, **k: seen.append(gc.isenabled()) or publish(*a, **k)
    )
    for fmt in ("json", "github"):
        res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--format", fmt])
        assert res.exit_code == 0, res.output
        assert gc.isenabled()
    res = CliRunner().invoke(
        cli,
        ["report", "--results", str(tmp_path / "results"), "--format", "csv", "--plots", str(tmp_path / "p")],
    )
    assert res.exit_code == 0, res.output
    assert seen == [False, False, True]  # plots drawn (--plots, html): matplotlib's figures are cycles
    assert gc.isenabled()
