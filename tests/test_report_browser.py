"""The html report as a person sees it (issue 33 item 7): rendered by headless Chromium (Debian's
`chromium`, installed by `scripts/setup-host.sh --test`) at 1400 and 390 px over real records
(tests/data), the layout measured in the browser: the verdict before the first table, no horizontal
overflow outside the tables' scroll wrappers, and at 1400 px every image column on screen.

How it is measured: a copy of the page (the report itself carries no script) gets a small script
that, on load, measures the layout and writes its findings into the parent document, which Chromium
prints with --dump-dom. Chromium's headless window is never narrower than 500 px, so the page is
laid out in an iframe exactly W px wide (srcdoc: same origin as its parent) — the width the page's
CSS sees is W either way. The screenshots (`report-1400.png`, `report-390.png`) are kept for CI under
$TOOLKIT_ARTIFACTS, else tests/artifacts/ (ignored by git).

Marked e2e: it needs a browser; skipped, saying so, where no `chromium` is installed.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.records import CPU_A, CPU_B, VULKAN, load, needs_fixtures
from toolkit.analysis import report

pytestmark = [pytest.mark.e2e, needs_fixtures]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

PROBE = """
window.addEventListener('load', () => {
  const W = window.innerWidth, inScroll = el => el.closest('.scroll') !== null;
  const out = {innerWidth: W, scrollWidth: document.scrollingElement.scrollWidth};
  out.overflowing = [...document.body.querySelectorAll('*')]
    .filter(el => !inScroll(el) && !el.matches('.scroll')
            && (el.getBoundingClientRect().right > W + 1 || el.scrollWidth > el.clientWidth + 1)
            && getComputedStyle(el).display !== 'inline')
    .map(el => el.tagName + ': ' + (el.textContent || '').slice(0, 80));
  out.wrappers = [...document.querySelectorAll('.scroll')].map(w => {
    const r = w.getBoundingClientRect(), t = w.querySelector('table');
    return {left: r.left, right: r.right, clientWidth: w.clientWidth, tableWidth: t.scrollWidth,
            headers: [...t.querySelectorAll('th')].map(th => {
              const b = th.getBoundingClientRect();
              return {text: th.textContent, left: b.left, right: b.right};
            })};
  });
  const v = document.querySelector('.verdict'), t = document.querySelector('table');
  out.verdictTop = v ? v.getBoundingClientRect().top : null;
  out.firstTableTop = t ? t.getBoundingClientRect().top : null;
  const pre = parent.document.createElement('pre');
  pre.id = 'layout-probe';
  pre.textContent = JSON.stringify(out);
  parent.document.body.appendChild(pre);
});
"""


def artifacts() -> Path:
    """Where the screenshots go: $TOOLKIT_ARTIFACTS (CI keeps that folder), else tests/artifacts/."""
    where = Path(os.environ.get("TOOLKIT_ARTIFACTS") or ROOT / "tests" / "artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


def _host(page: str, width: int, height: int, probe: bool) -> str:
    """A page holding `page` in an iframe `width` x `height` px (with the probe script when asked)."""
    if probe:
        page = page.replace("</head>", f"<script>{PROBE}</script></head>", 1)
    return (
        '<!doctype html><html><head><meta charset="utf-8"></head><body style="margin:0">'
        f'<iframe style="border:0;width:{width}px;height:{height}px;display:block" '
        f'srcdoc="{html.escape(page, quote=True)}"></iframe></body></html>'
    )


def _chromium(args: list[str], host: Path, width: int, height: int) -> str:
    cmd = [
        CHROMIUM or "chromium",
        "--headless",
        "--no-sandbox",  # runs as root in CI containers, where the sandbox cannot start
        "--disable-gpu",
        "--hide-scrollbars",
        "--virtual-time-budget=5000",
        f"--window-size={max(width, 500)},{height}",
        *args,
        host.as_uri(),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def layout(page: str, width: int, tmp_path: Path, shot: Path) -> dict:
    """The probe's findings for `page` laid out `width` px wide; a screenshot of it saved to `shot`."""
    height = 1600
    (tmp_path / "shot.html").write_text(_host(page, width, height, probe=False))
    _chromium([f"--screenshot={shot}"], tmp_path / "shot.html", width, height)
    (tmp_path / "probe.html").write_text(_host(page, width, height, probe=True))
    dom = _chromium(["--dump-dom"], tmp_path / "probe.html", width, height)
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom, re.S)
    assert found, f"the probe wrote nothing: {dom[-1000:]}"
    return json.loads(html.unescape(found.group(1)))


@pytest.fixture(scope="module")
def page() -> str:
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH: `scripts/setup-host.sh --test` installs Debian's chromium")
    return report.render(load(CPU_A, CPU_B, VULKAN), "html")


@pytest.mark.parametrize("width", [1400, 390])
def test_the_report_page_in_a_browser_shows_the_verdict_first_and_nothing_overflows(page, tmp_path, width):
    """Reproducer (issue 33): at 1400 px the third image's column and the flags column were cut off
    (no scroll wrapper, no viewport meta); headers were `label@import:<12 hex> (ROCm, GPU ...)`."""
    shot = artifacts() / f"report-{width}.png"
    found = layout(page, width, tmp_path, shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert found["innerWidth"] == width
    assert found["scrollWidth"] <= width, found  # the page itself never scrolls sideways
    assert found["overflowing"] == [], found["overflowing"]
    assert found["verdictTop"] is not None and found["verdictTop"] < found["firstTableTop"]
    assert len(found["wrappers"]) == 2  # prefill and decode, each in its scroll wrapper
    for w in found["wrappers"]:
        assert 0 <= w["left"] and w["right"] <= width
        names = [h["text"] for h in w["headers"]]
        assert names[1:4] == ["cpu@a504", "cpu@c703", "vulkan"], names  # short labels; legend above
        if width == 1400:  # every image column on screen, nothing to scroll to
            assert w["tableWidth"] <= w["clientWidth"], w
            assert all(h["right"] <= w["right"] for h in w["headers"]), w
