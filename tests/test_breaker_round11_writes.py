"""A tester's eleventh round, the writes of `toolkit report` and `export-run`: the report's page, its
temp file and its plots folder were written with Path.write_text / mkdir, which follow a link planted
below the results root (results/report.html.tmp -> a file elsewhere was overwritten with the page;
results/report-plots -> a folder elsewhere got the PNGs); and `-o FILE` wrote the text and csv
formats (and export-run its README) with their terminal escape sequences raw, while stdout stripped
them. Each test fails on the code before its fix; the real files and links live under tmp_path."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.support.project import DATA, precious_file
from tests.support.runs import tk
from toolkit.analysis import plots, report
from toolkit.core.errors import BadInput
from toolkit.publish import run_folder
from toolkit.results import write_atomic
from toolkit.results.records import ResultStore

ROOT = Path(__file__).resolve().parent.parent
ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"
RUN = "20261129T170627Z-6891c7"  # the run of results-cpu-a.jsonl
CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")  # C0 but tab/newline, DEL, C1 in UTF-8
HOSTILE = {
    "model_filename": "evil\x1b]0;TITLE\x07\x1b[31m.gguf",  # OSC 0 (window title), CSI colour
    "gpu_info": "GPU\x1b[2J\x9b31m",  # CSI erase, 8-bit CSI
    "cpu_info": "CPU\x1b]52;c;cHduZWQ=\x07",  # OSC 52 (clipboard)
    "backends": "Vulkan",  # a GPU backend: a CPU-only row names no GPU (core.backends.device_contradiction)
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder of ROWS imported once, its model name, GPU and CPU holding escape sequences."""
    base = tmp_path_factory.mktemp("r11")
    rows = [{**json.loads(line), **HOSTILE} for line in ROWS.read_text().splitlines() if line.strip()]
    (base / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = tk(base, "import", "--results", "results", "--label", "x", "rows.jsonl")
    assert r.returncode == 0, r.stdout + r.stderr
    return base / "results"


@pytest.fixture
def results(imported: Path, tmp_path: Path) -> Path:
    """A copy of the imported results folder, this test's own."""
    shutil.copytree(imported, tmp_path / "results", symlinks=True)
    return tmp_path / "results"


def _elsewhere(tmp_path: Path) -> Path:
    where = tmp_path / "elsewhere"
    where.mkdir()
    return where


def test_the_html_page_is_never_written_through_a_linked_temp_file(results: Path, tmp_path: Path) -> None:
    """results/report.html.tmp -> a file elsewhere: the page overwrote that file and results/report.html
    became a link to it (exit 0). Now exit 4 naming the link; the file and report.html untouched."""
    precious = precious_file(tmp_path)
    os.symlink(precious, results / "report.html.tmp")
    r = tk(tmp_path, "report", "--results", "results", "--format", "html")
    assert r.returncode == 4, r.stdout + r.stderr
    assert f"report.html.tmp is a symbolic link (to {str(precious)!r})" in r.stderr, r.stderr
    assert precious.read_text() == "precious\n"
    assert not (results / "report.html").exists()


def test_the_plots_are_never_written_into_a_linked_plots_folder(results: Path, tmp_path: Path) -> None:
    """results/report-plots -> a folder elsewhere: the PNGs were written there (exit 0). Now exit 4
    naming the link, nothing written there, and no page left naming plots that were not written."""
    where = _elsewhere(tmp_path)
    os.symlink(where, results / "report-plots")
    r = tk(tmp_path, "report", "--results", "results", "--format", "html")
    assert r.returncode == 4, r.stdout + r.stderr
    assert f"report-plots is a symbolic link (to {str(where)!r})" in r.stderr, r.stderr
    assert list(where.iterdir()) == []
    assert not (results / "report.html").exists()


def test_a_png_is_never_written_through_a_linked_temp_file(results: Path, tmp_path: Path) -> None:
    """results/report-plots/decode.png.tmp -> a file elsewhere: the PNG overwrote it."""
    precious = precious_file(tmp_path)
    (results / "report-plots").mkdir()
    os.symlink(precious, results / "report-plots" / "decode.png.tmp")
    r = tk(tmp_path, "report", "--results", "results", "--format", "html")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "decode.png.tmp is a symbolic link" in r.stderr, r.stderr
    assert precious.read_text() == "precious\n"


def test_an_output_into_a_linked_folder_below_the_root_is_refused(results: Path, tmp_path: Path) -> None:
    """`-o results/sub/page.csv`, results/sub a link to a folder elsewhere: the report was made there."""
    where = _elsewhere(tmp_path)
    os.symlink(where, results / "sub")
    r = tk(tmp_path, "report", "--results", "results", "--format", "csv", "-o", "results/sub/page.csv")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "sub is a symbolic link" in r.stderr, r.stderr
    assert list(where.iterdir()) == []


def test_a_users_output_outside_the_root_follows_its_folders_links(results: Path, tmp_path: Path) -> None:
    """The user's own `-o` outside the results root keeps its rules: a linked folder on the way is theirs
    (followed), the page and its plots written there; a link at the file itself is still refused."""
    disk = _elsewhere(tmp_path)
    os.symlink(disk, tmp_path / "disk")
    r = tk(tmp_path, "report", "--results", "results", "--format", "html", "-o", "disk/page.html")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (disk / "page.html").is_file() and list((disk / "page-plots").glob("*.png"))
    os.symlink(precious_file(tmp_path), disk / "linked.csv")
    r = tk(tmp_path, "report", "--results", "results", "--format", "csv", "-o", "disk/linked.csv")
    assert r.returncode == 4, r.stdout + r.stderr


@pytest.mark.parametrize("fmt", ["text", "csv", "github", "json", "html"])
def test_a_report_written_to_a_file_holds_no_escape(results: Path, tmp_path: Path, fmt: str) -> None:
    """A model name with OSC 0 and CSI, a GPU with 8-bit CSI, a CPU with OSC 52: `-o` wrote them raw in
    text and csv (stdout stripped them). Now no control byte in any format; the names still shown."""
    r = tk(tmp_path, "report", "--results", "results", "--format", fmt, "-o", f"out.{fmt}")
    assert r.returncode == 0, r.stdout + r.stderr
    data = (tmp_path / f"out.{fmt}").read_bytes()
    assert CONTROL.findall(data) == []
    assert b"evil" in data


def test_write_atomic_refuses_links_below_the_root_and_follows_the_users(tmp_path: Path) -> None:
    """The one atomic write: a link at its temp file or at a folder below `root` is BadInput naming it;
    a folder outside `root` is opened as the user named it."""
    root = tmp_path / "results"
    root.mkdir()
    precious = precious_file(tmp_path)
    os.symlink(precious, root / "page.txt.tmp")
    with pytest.raises(BadInput, match=r"page\.txt\.tmp is a symbolic link"):
        write_atomic(root / "page.txt", b"page", root=root)
    os.symlink(_elsewhere(tmp_path), root / "plots")
    with pytest.raises(BadInput, match=r"plots is a symbolic link"):
        write_atomic(root / "plots" / "a.png", b"png", root=root)
    assert precious.read_text() == "precious\n" and list((tmp_path / "elsewhere").iterdir()) == []
    write_atomic(tmp_path / "elsewhere" / "mine.txt", b"mine", root=root)
    assert (tmp_path / "elsewhere" / "mine.txt").read_bytes() == b"mine"
    assert not (tmp_path / "elsewhere" / "mine.txt.tmp").exists()


def test_write_pngs_refuses_a_linked_folder_below_the_root(results: Path, tmp_path: Path) -> None:
    """plots.write_pngs (`report --plots DIR` and the html page's folder) made its folder with mkdir."""
    store = ResultStore(results)
    ts = report.Shown.of(store.results(), report.ReportOptions()).tables
    where = _elsewhere(tmp_path)
    os.symlink(where, results / "pngs")
    with pytest.raises(BadInput, match="pngs is a symbolic link"):
        plots.write_pngs(ts, results / "pngs", results)
    assert list(where.iterdir()) == []


def test_an_exported_readme_holds_no_escape(tmp_path: Path) -> None:
    """export-run's README.md held the host's CPU model as recorded, escapes and all."""
    from toolkit.matrix.api import load_matrix

    p = tmp_path / "p"
    (p / "results" / "a504e0178239").mkdir(parents=True)
    shutil.copy(ROOT / "matrix.yaml", p)
    shutil.copytree(ROOT / "Dockerfile.templates", p / "Dockerfile.templates")
    lines = []
    for line in (DATA / "results-cpu-a.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["host"]["cpu_model"] = "Xeon\x1b]0;TITLE\x07\x1b[2J\x9b31m"
        lines.append(json.dumps(rec) + "\n")
    (p / "results" / "a504e0178239" / "bench.jsonl").write_text("".join(lines))
    out = tmp_path / "out"
    run_folder.export_run(ResultStore(p / "results"), RUN, out, load_matrix(p / "matrix.yaml"))
    readme = (out / "README.md").read_bytes()
    assert b"Xeon" in readme
    assert CONTROL.findall(readme) == []
