"""`toolkit report` on a terminal, as a person sees it (issue 33 item 7): run under a pseudo-terminal
(os.openpty, its size set with TIOCSWINSZ) at 80 and 200 columns over real records (tests/data), no
line is wider than the terminal; off a terminal (a pipe) it prints the github markdown it always did.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.records import CPU_A, CPU_B, VULKAN, load, needs_fixtures
from tests.support.terminal import drain
from toolkit.analysis import report, tables


def _results(tmp_path: Path) -> Path:
    """A results folder of the three real runs, laid out as `toolkit bench` writes it."""
    results = tmp_path / "results"
    for src in (CPU_A, CPU_B, VULKAN):
        dest = results / load(src)[0].image.short / "bench.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(src.read_text())
    return results


def _env() -> dict[str, str]:
    """The environment without COLUMNS/LINES (shutil.get_terminal_size reads them before the tty)."""
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {
        "PYTHONIOENCODING": "utf-8"
    }


def _under_pty(args: list[str], columns: int) -> str:
    """stdout+stderr of `python -m toolkit ARGS` run on a pseudo-terminal `columns` wide."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=ROOT,
        env=_env(),
        close_fds=True,
    )
    os.close(follower)
    out = drain(leader)
    assert proc.wait(timeout=120) == 0, out
    return out


@needs_fixtures
@pytest.mark.parametrize("columns", [80, 200])
def test_report_on_a_terminal_fits_its_width(tmp_path, columns):
    """Reproducer (issue 33): `toolkit report` printed 457-character markdown lines whatever the width."""
    out = _under_pty(["report", "--results", str(_results(tmp_path))], columns)
    lines = out.rstrip("\n").splitlines()
    assert max(len(x) for x in lines) <= columns, max(lines, key=len)
    assert "| test" not in out and "Prefill (pp), tokens/s" in out  # text, not markdown
    assert out.index("Verdict") < out.index("What was measured") < out.index("Prefill (pp)")
    header = next(x for x in lines if x.startswith("test "))
    assert header.split() == ["test", "cpu@a504", "cpu@c703", "vulkan"]  # short labels, all on screen
    assert "cpu@a504: cpu@a504e0178239 (CPU," in out.replace("\n  ", " ")  # the legend says what they are
    decode = out[out.index("Decode (tg)") :]
    assert "tg64 ub" not in decode and "\ntg64 " in decode  # one decode row, not one per micro-batch


def test_a_table_too_wide_drops_roofline_then_tok_per_j_then_goes_in_blocks_and_says_so():
    from tests.support.records import make_record

    recs = [
        make_record(name, "rocm", p=512, avg=3000.0 + i, sd=5.0)
        for i, name in enumerate(("alpha-image", "beta-image", "gamma-image", "delta-image", "eps-image"))
    ]
    text = report.render(tables.select_for_report(recs), "text", width=80)
    assert max(map(len, text.splitlines())) <= 80
    assert "not shown at 80 columns: the roofline columns" in text.replace("\n  ", " ")
    assert all(f"{n}-image" in text for n in ("alpha", "beta", "gamma", "delta", "eps"))
    wide = report.render(tables.select_for_report(recs), "text", width=400)
    assert "not shown at" not in wide and "roofline alpha-image" in wide


def test_off_a_terminal_the_report_is_the_github_markdown_of_before(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "toolkit", "report", "--results", str(_results(tmp_path))],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        check=True,
    )
    assert res.stdout == report.render(load(CPU_A, CPU_B, VULKAN), "github") + "\n"
