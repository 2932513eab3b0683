"""Issue 32 item 13 (a warm report of 10,000 shown records): the report's shortcuts give what the slower
way gave, byte for byte. Tables drawn without tabulate where every string is as wide as it is long, the
markdown escapes' patterns rewritten to open with the character they match, each image's provenance
line worked out once for the report and its column cards, the index's store order made once per query,
and BenchRecord's private attributes set without pydantic's copies. Real fixtures (tests/data) filed as
`toolkit bench` files them."""

from __future__ import annotations

import random
import re
import time

from tabulate import tabulate

from tests.support.records import filed_fixtures, needs_fixtures
from toolkit.analysis import provenance, report, table_text
from toolkit.core import text
from toolkit.results import identity, index_sqlite
from toolkit.results import index as resultindex
from toolkit.results.records import BenchRecord, ResultStore

PIECES = [
    "a",
    "Z",
    " ",
    "±",
    "1",
    ".",
    "-",
    "|",
    "*",
    "True",
    "False",
    "",
    "  x  ",
    "nan",
    "\\",
    "`",
    "中",
    "é",
]
ODD = ["\n", "\t", "\x1b[31m", "\u200b"]


def _tables(seed: int, n: int, odd: bool):
    rnd = random.Random(seed)
    pieces = PIECES + (ODD if odd else [])
    for _ in range(n):
        cols, rows = rnd.randint(1, 5), rnd.randint(0, 4)

        def cell() -> str:
            return "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 4)))

        headers = [cell() for _ in range(cols)]
        body = [[cell() for _ in range(cols)] for _ in range(rows)]
        if rnd.random() < 0.2:  # a column tabulate reads as booleans
            body = [[rnd.choice(["True", "False"]) for _ in range(cols)] for _ in range(rows)]
        yield headers, body


def test_github_table_is_tabulates_own():
    """github_table draws what tabulate draws (github, no number parsing) for every table: its own
    drawing where each string is as wide as it is long, tabulate's for the others (a wide character,
    a line break, an escape sequence) and for a table without rows."""
    drawn = 0
    for headers, body in _tables(1, 3000, odd=True):
        want = tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)
        assert table_text.github_table(headers, body) == want, (headers, body)
        drawn += bool(body) and table_text._simple_widths(headers, body) is not None
    assert drawn > 200  # drawn without tabulate (the others hold a wide or odd character)


def test_plain_grid_is_tabulates_simple_grid():
    """_grid of a table whose strings are all as wide as they are long (`plain`) gives tabulate's
    `simple` lines: each right-stripped, a last empty line dropped as tabulate's text drops it."""
    for headers, body in _tables(2, 3000, odd=False):
        plain = table_text._simple_widths(headers, body) is not None
        want = [
            ln.rstrip()
            for ln in tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True).splitlines()
        ]
        assert table_text._grid(headers, body, None, plain) == want, (headers, body)


def test_columns_and_cut_of_narrow_text_measure_each_character_as_one():
    """A line holding `±` (every table cell's) is measured by its length, as _char_columns measures it
    character by character; wide and zero-width characters still one by one."""
    rnd = random.Random(3)
    for _ in range(3000):
        s = "".join(
            rnd.choice(["a", "±", " ", "\x00", "中", "é", "\u200b"]) for _ in range(rnd.randint(0, 9))
        )
        assert table_text.columns(s) == sum(map(table_text._char_columns, s))
        for width in range(8):
            used, want = 0, s
            for i, c in enumerate(s):
                used += table_text._char_columns(c)
                if used > width:
                    want = s[:i]
                    break
            assert table_text.cut(s, width) == want


# The markdown patterns as they were written before (each lookbehind before the character it guards):
# the rewritten ones match the same spans.
_AUTOLINK_BEFORE = r":(?=//)|(?<=[Ww]{3})\.|(?<=[0-9A-Za-z.+_:-])@(?=[0-9A-Za-z_-]*\.[0-9A-Za-z_-])"
_ENTITY = r"&(?=#?[0-9A-Za-z]+;)"
BEFORE = {
    "_MD_SPECIAL": re.compile(
        r"[\\|<>*~`]|\]\(|(?<![^\W_])_|_(?![^\W_])|" + _AUTOLINK_BEFORE + "|" + _ENTITY
    ),
    "_MD_LINE_SPECIAL": re.compile(
        r"\\|<(?=[A-Za-z/!?])|\||\]\(|[*~`]|(?<![^\W_])_|_(?![^\W_])|" + _AUTOLINK_BEFORE + "|" + _ENTITY
    ),
}


def test_markdown_patterns_match_what_they_matched_and_stay_linear():
    rnd = random.Random(4)
    pieces = list("ab_Z9 .:/@&#;\\|<>*~`]()wW!?-+")
    pieces += ["www.", "http://", "a@b.c", "&amp;", "_x_", "é_", "中"]
    for name, before in BEFORE.items():
        now = getattr(text, name)
        for _ in range(20000):
            s = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 14)))
            assert [m.span() for m in now.finditer(s)] == [m.span() for m in before.finditer(s)], (name, s)
        for one in ("_", "a_", "@", "a@", "www.", "wW", ":", "&", "&#", "]"):  # 1 MB of each: linear
            t = time.process_time()
            now.sub("", one * (1_000_000 // len(one)))
            assert time.process_time() - t < 2, (name, one)
    assert text.md_text("n_cpu_moe _x_ a@b.c www.x https://y") == (
        "n_cpu_moe \\_x\\_ a@&#8288;b.c www\\.x https\\://y"
    )


@needs_fixtures
def test_each_images_provenance_line_is_worked_out_once_per_report(tmp_path, monkeypatch):
    """The whole report's provenance and each column card's say an image's line from one working
    (provenance.Memo), and say what each call alone says."""
    store = ResultStore(filed_fixtures(tmp_path / "results"))
    calls = []
    line_of = provenance._image_line
    monkeypatch.setattr(provenance, "_image_line", lambda same: calls.append(len(same)) or line_of(same))
    with identity.keys_cached():
        recs = list(resultindex.select(store))
        shown = report.Shown.of(recs, report.ReportOptions())
        memo: provenance.Memo = {}
        whole = provenance.provenance(shown.facts, (), memo)
        cards = provenance.column_cards(shown.tables, shown.labels, (), memo)
        images = len(whole.images)
        assert len(calls) == images == len(cards) == 3  # three images, three columns: once each
        alone = provenance.column_cards(shown.tables, shown.labels)
        assert [c.to_json() for c in cards] == [c.to_json() for c in alone]
        assert whole.to_json() == provenance.provenance(shown.facts).to_json()


@needs_fixtures
def test_store_order_is_made_once_per_query(tmp_path, monkeypatch):
    """A report's query reads one store order (temp.ord, each store's counter read once), not one per
    question it asks (rows, problems, untrusted stores: three)."""
    results = filed_fixtures(tmp_path / "results")
    store = ResultStore(results)
    resultindex.select(store)  # the index built
    seen = []
    store_of = index_sqlite.store_of
    monkeypatch.setattr(
        index_sqlite, "store_of", lambda root, path: seen.append(path) or store_of(root, path)
    )
    assert len(resultindex.select(ResultStore(results))) == len(list(ResultStore(results).results()))
    assert len(seen) == len(store.bench_files()) == 3


@needs_fixtures
def test_record_private_attributes_start_at_their_defaults(tmp_path):
    """Each BenchRecord read (JSON, a dict, a copy) starts with its own private attributes at their
    declared defaults; setting one on a record leaves the others' alone."""
    path = next((filed_fixtures(tmp_path / "results")).glob("*/bench.jsonl"))
    line = path.read_bytes().splitlines()[0]
    defaults = {name: a.default for name, a in BenchRecord.__private_attributes__.items()}
    assert all(a.default_factory is None for a in BenchRecord.__private_attributes__.values())  # shared
    a, b = BenchRecord.model_validate_json(line), BenchRecord.model_validate_json(line)
    assert (
        a.__pydantic_private__
        == b.__pydantic_private__
        == defaults
        == {"_clock_skew": None, "_flags_checked": False}
    )
    a._clock_skew = "skewed"
    assert (a.clock_skew, b.clock_skew) == ("skewed", None)
    assert a.model_copy().clock_skew == "skewed"
    assert BenchRecord.model_validate(a.model_dump()).__pydantic_private__ == defaults
