"""The cheaper paths a warm `toolkit report` over 10,000 shown records takes (issue 32 item 13): the
ASCII check of strip_controls (no regex search over a report's 10 MB, twice: publish and the echo),
the index's relative file names without pathlib's relative_to (~10,000 calls a report), and a stored
test key's pairs made tuples and shared in one pass. Each gives what the slower path gave."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from toolkit.core import text as text_mod
from toolkit.core.text import CONTROL, SURROGATE, strip_controls
from toolkit.results import identity
from toolkit.results.index_rows import key_of
from toolkit.results.index_sqlite import _rel, key_data


def _slow_strip(s: str) -> str:
    """strip_controls by its definition: every CONTROL match removed, lone surrogates replaced."""
    return SURROGATE.sub("\ufffd", CONTROL.sub("", s))


class _NoSearch:
    def search(self, *_a, **_k):
        raise AssertionError("an ASCII text searched with the regex")


def test_ascii_text_is_checked_without_a_regex_search(monkeypatch):
    """A clean ASCII text (a report) comes back as the same object, no regex searched over it."""
    monkeypatch.setattr(text_mod, "_CONTROL_START", _NoSearch())
    report = "| model | pp512 |\n|---|---|\n| tiny \t| 12.5 |\n" * 20_000
    assert strip_controls(report) is report


@pytest.mark.parametrize(
    "s",
    [
        "",
        "plain",
        "tab\tand\nnewline",
        "osc \x1b]0;title\x07 end",
        "osc52 \x1b]52;c;aGk=\x1b\\ end",
        "csi \x1b[31mred\x1b[0m",
        "bel\x07 del\x7f nul\x00 cr\r",
        "c1 \x9b31m \x9d0;t\x9c é \u2028",
        "lone \ud800 surrogate",
        "~ and space ",
    ],
)
def test_strip_controls_is_the_definition(s):
    assert strip_controls(s) == _slow_strip(s)


def test_strip_controls_random_texts_are_the_definition():
    """Random texts of ASCII, C1, non-ASCII and surrogate characters and control sequence starts."""
    rnd = random.Random(13)
    alphabet = [chr(i) for i in range(0xA0)] + ["é", "\u2028", "\ud800", "\x1b]", "\x1b[", "\x1b\\"]
    for _ in range(20_000):
        s = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 16)))
        assert strip_controls(s) == _slow_strip(s), repr(s)


class _NoRelativeTo(type(Path())):  # a concrete Path (PosixPath here) whose relative_to refuses
    def relative_to(self, *_a, **_k):
        raise AssertionError("relative_to called")


def test_index_file_names_without_relative_to(tmp_path):
    """A results file under the root is named without Path.relative_to (3 calls per file and report:
    ~0.1 s at 10,000 shown records); the name is the one relative_to gives."""
    root = tmp_path / "results"
    paths = [root / "abcdef012345" / "bench.jsonl", root / "hosts" / "k" / "d" / "bench.jsonl"]
    want = [p.relative_to(root).as_posix() for p in paths]
    assert [_rel(root, _NoRelativeTo(p)) for p in paths] == want


@pytest.mark.parametrize(
    "root, path",
    [
        (".", "d/bench.jsonl"),
        ("/", "/d/bench.jsonl"),
        ("/r/res", "/r/res/d/bench.jsonl"),
        ("/r/res", "/r/resx/../res/d/bench.jsonl"),
        ("/r/\udcffx", "/r/\udcffx/\udcffd/bench.jsonl"),
    ],
)
def test_index_file_names_are_relative_to(root, path):
    """Every name is relative_to's (with sql_text's escapes); a path not under the root raises as it did."""
    from toolkit.results.index_sqlite import sql_text

    r, p = Path(root), Path(path)
    try:
        want = sql_text((p.relative_to(r).as_posix(),))[0]
    except ValueError:
        with pytest.raises(ValueError):
            _rel(r, p)
        return
    assert _rel(r, p) == want


def test_stored_key_pairs_are_shared_tuples():
    """A key read back is the key (==, repr) and each plain pair is the one object shared_pairs keeps."""
    k = identity.TestKey(
        "sha256:ab",
        (("backends", "CPU"), ("gpu_info", "")),
        ("m", 1),
        None,
        (("n_prompt", 512), ("fa", True), ("x", 1.5), ("nested", (1, (2, "y")))),
    )
    got = key_of(key_data(k))
    assert got == k and repr(got) == repr(k)
    again = key_of(key_data(k))
    assert got is not None and again is not None
    assert again.test[0] is got.test[0] and again.system[0] is got.system[0]  # shared, not copies
    assert type(again.test[1][1]) is bool and type(again.test[3][1]) is tuple


def test_report_module_imports_no_table_drawer():
    """json and csv draw no table: importing the report stack leaves tabulate (and wcwidth) unimported
    (~80 ms of each such report); text and github import it where they draw one."""
    import subprocess
    import sys

    code = (
        "import sys; from toolkit.analysis import report, table_text; "
        "print(sorted(m for m in ('tabulate', 'wcwidth') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_warm_report_imports_no_line_validator(tmp_path):
    """A warm report loads the lines the index read by their line sums (index.load): it imports none of
    the whole-line checks (record_check, and through it the matrix models and yaml, ~0.05-0.1 s of each
    warm report); a line whose bytes changed is checked whole again, contradictions included."""
    import subprocess
    import sys

    from tests.support.records import filed_fixtures

    results = filed_fixtures(tmp_path / "results")
    code = (
        "import sys, io, contextlib; from toolkit.cli.main import main; sys.argv = ['toolkit', 'report', "
        f"'--results', {str(results)!r}, '--format', 'json']\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try: main()\n"
        "    except SystemExit: pass\n"
        "print(sorted(m for m in ('toolkit.results.record_check', 'toolkit.matrix.api', 'yaml') "
        "if m in sys.modules))"
    )

    def imported() -> str:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return out.stdout.strip()

    assert "record_check" in imported()  # cold: the index is built, every line checked whole
    assert imported() == "[]"  # warm
    bench = next(results.glob("*/bench.jsonl"))
    text = bench.read_text()
    assert '"avg_ts":' in text
    bench.write_text(text.replace('"avg_ts":', '"avg_ts": ', 1))  # other bytes, the same record
    assert "record_check" in imported()  # that file read again, its lines checked whole
