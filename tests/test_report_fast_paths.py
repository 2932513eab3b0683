"""The report's fast paths, each against what it stands in for: core.text.strip_controls' no-control
shortcut, table_text's column widths without drawing a grid (tabulate's own), identity.test_field
(test_fields' value by a bisect lookup)."""

from __future__ import annotations

import random

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
