"""Breaker round 18 (2026-12-04): hostile names against the day's changes. Each test fails on the code
before its fix: the csv formula guard, the markdown report's verdict, the html plots, write_atomic's
temp file and the matrix errors that name their image."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
from pathlib import Path

import pytest
import yaml

from tests.support.project import ROOT
from tests.support.records import make_record
from tests.support.runs import tk
from toolkit.analysis import report
from toolkit.core.text import md_line, md_text
from toolkit.results import write_atomic

ROWS = ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl"


def _import(proj: Path, names: list[str], gpu: str = "") -> None:
    """Import the cpu sample once per model file name in `names` (one result set each)."""
    src = [json.loads(line) for line in ROWS.read_text().splitlines()]
    # a Vulkan build's rows: a CPU build lists no GPU device (round 29), Vulkan names any
    rows = [
        {**r, "model_filename": n, "gpu_info": gpu or n, "backends": "Vulkan"} for n in names for r in src
    ]
    (proj / "hostile.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = tk(proj, "import", "hostile.jsonl", "--label", "hostile")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize(
    "name",
    [
        "\x07=1+1",  # a BEL the report strips after the guard looked: the cell became =1+1
        "\x1b[0m=HYPERLINK(1)",
        "\n=1+1",  # OWASP WSTG-INPV-21: line feed before the formula
        "\uff1d1+1",  # full-width equals
        "\uff20SUM(1,1)",
        " =1+1",
    ],
)
def test_no_csv_cell_the_customer_opens_starts_a_formula(name: str) -> None:
    """publish (what `report --format csv` prints or writes) strips controls from the whole text after
    render_csv's guard judged each cell, so `\\x07=1+1` reached the spreadsheet as `=1+1`; a line feed,
    a full-width `=` or a space before `=` were not guarded. Every text cell a spreadsheet could read as
    a formula now starts with `'`."""
    rec = make_record("cpu", "cpu", n=128, avg=90.0, gpu_info=name, backends="Vulkan", model=name)
    text, _, _ = report.publish([rec], "csv")
    assert text is not None
    row = next(csv.DictReader(io.StringIO(text)))
    starts = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
    for key in ("model", "gpu"):
        assert row[key].startswith("'") and not row[key].lstrip().startswith(starts), row[key]
    assert float(row["avg_ts"]) == 90.0


def test_md_text_keeps_a_backslash_from_undoing_its_escape() -> None:
    """md_text escaped `<` as `\\<`, so a name `\\<img src=...\\>` became `\\\\<img ...\\\\>`: an
    escaped backslash, then a live HTML tag (CommonMark 2.4: a backslash escapes a backslash)."""
    for text in ("\\<img src=https://example.invalid/p.png\\>", "\\![x\\](https://example.invalid/p.png)"):
        for esc in (md_text, md_line):
            out = esc(text)
            # every backslash of the name is itself escaped: no `<` or `](` is left unescaped
            assert "\\\\\\<" in out or "]\\(" in out, out
            assert out.count("\\") >= 2 * text.count("\\"), out


def test_the_markdown_verdict_carries_no_tag_link_or_image_from_a_model_name(tmp_path: Path) -> None:
    """The github report's verdict names the model files the images measured (`the images measured
    different model files`) as they were imported: `<img src=https://...>` and `![x](https://...)` were
    left as markup, an image fetched from a stranger's server when the report is opened."""
    _import(tmp_path, ["<img src=x onerror=alert(1)>", "![x](http:example.invalid)", "\\<script\\>"])
    p = tk(tmp_path, "report", "--format", "github")
    assert p.returncode == 0, p.stderr
    verdict = p.stdout.split("## What was measured")[0]
    assert "model files are not known to be one file" in verdict  # imports: no sha256 recorded
    assert "<img" not in verdict.replace("\\<img", "") and "](http" not in verdict
    assert "\\\\<script" not in verdict.replace("\\\\\\<script", "")
    assert "-> " in verdict  # the toolkit's own arrows read as written


def test_the_html_report_draws_a_model_name_with_dollar_signs(tmp_path: Path) -> None:
    """matplotlib reads `$...$` in a label as mathtext: an imported model `$\\undefined{$` stopped
    `report --format html` with ParseFatalException (exit 1, a traceback)."""
    _import(tmp_path, ["$\\undefinedcmd{$", "a_b$x^2$"])
    p = tk(tmp_path, "report", "--format", "html", "-o", "r.html")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and (tmp_path / "r.html").is_file()


def test_write_atomic_leaves_no_temp_file_when_the_disk_is_full(tmp_path: Path) -> None:
    """A write that fails part-way (ENOSPC, EDQUOT) left `<path>.tmp` beside the user's path (`report
    -o` on a full 16 KiB tmpfs left x-plots/prefill.png.tmp). The temp file is removed and the error
    names `path`. A file size limit (RLIMIT_FSIZE: EFBIG once the signal is ignored) makes the write
    fail part-way as a full disk does, without a mount."""
    import resource
    import signal

    out = tmp_path / "r.csv"
    old = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, old[1]))
    try:
        with pytest.raises(OSError) as err:
            write_atomic(out, b"x" * 100_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old)
        signal.signal(signal.SIGXFSZ, handler)
    assert err.value.errno == errno.EFBIG and err.value.filename == str(out)
    assert os.listdir(tmp_path) == []


def _matrix(tmp_path: Path, image: dict, sources: dict | None = None) -> Path:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [image]
    if sources is not None:
        data["sources"] = sources
    (tmp_path / "Dockerfile.templates").mkdir(exist_ok=True)
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("image", "want"),
    [
        # an image named `on` or `7.2`: the name is in the type error's fix text, so it was dropped
        (
            {"name": "on", "template": 5, "backend": "cpu", "source": "llama.cpp"},
            "images[0].template (image 'on')",
        ),
        (
            {"name": "7.2", "template": 5, "backend": "cpu", "source": "llama.cpp"},
            "images[0].template (image '7.2')",
        ),
        # the value the error got is the image's name: dropped too
        (
            {"name": "vulkanx", "template": "t.j2", "backend": "vulkanx"},
            "images[0].backend (image 'vulkanx')",
        ),
        # a template file that is not there, a source not defined: named by position only
        (
            {"name": "cpu", "template": "nope.j2", "backend": "cpu"},
            "images[0].template (image 'cpu'): 'nope.j2'",
        ),
        (
            {"name": "cpu", "template": "t.j2", "backend": "cpu", "source": "nope"},
            "images[0].source (image 'cpu')",
        ),
    ],
)
def test_every_matrix_error_about_an_image_names_it(tmp_path: Path, image: dict, want: str) -> None:
    """The day's change named the image a matrix problem lies in (`images[0].template (image 'cpu')`),
    but dropped the name wherever `'name'` appeared anywhere in the message, and the template and source
    checks (the commonest typos) named the position alone."""
    _matrix(tmp_path, image)
    p = tk(tmp_path, "render")
    assert p.returncode == 4, p.stderr
    assert want in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_a_path_holding_control_characters_is_printed_escaped(tmp_path: Path) -> None:
    """Left by round 18, closed the same day: `report -o $'a\\e]0;T\\ab.csv'` printed `wrote .../ab.csv`
    (the escape stripped), a file that does not exist. A path is printed with its control characters
    escaped, in `wrote` and in a file-system error alike: the file named is the one on disk."""
    from tests.support.project import ROOT
    from tests.support.runs import tk

    rows = str(ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl")
    assert tk(tmp_path, "import", "--results", "r", "--label", "cpu", rows).returncode == 0
    name = "a\x1b]0;T\x07b.csv"
    res = tk(tmp_path, "report", "--results", "r", "--format", "csv", "-o", str(tmp_path / name))
    assert res.returncode == 0 and (tmp_path / name).is_file()
    assert f"wrote {tmp_path}/a\\x1b]0;T\\x07b.csv" in res.stderr and "\x1b" not in res.stderr, res.stderr
    res = tk(tmp_path, "report", "--results", "r", "--format", "csv", "-o", "/proc/" + name)
    assert res.returncode == 4 and "/proc/a\\x1b]0;T\\x07b.csv: " in res.stderr, res.stderr


def test_a_missing_matrix_named_from_inside_a_project_is_not_told_to_pass_matrix(project: Path) -> None:
    """Left by round 18, closed the same day: `--matrix missing.yaml` inside a project was told to "pass
    --matrix PATH", which it had done. It is told that this folder's matrix is matrix.yaml."""
    from tests.support.runs import tk

    res = tk(project, "render", "--matrix", "missing.yaml")
    assert res.returncode == 4
    assert "missing.yaml: matrix file not found; this folder's matrix is matrix.yaml" in res.stderr, (
        res.stderr
    )


def test_an_existing_file_in_a_folder_that_takes_no_new_file_is_not_said_missing() -> None:
    """Left by round 18, closed the same day: `-o /proc/self/status` was said to be no such path (its
    temp file could not be made beside it). The file is there; its folder takes no new file."""
    from toolkit.core.errors import FileSystemError

    err = FileSystemError.from_oserror(OSError(errno.ENOENT, os.strerror(errno.ENOENT), "/proc/self/status"))
    assert err.exit_code == 4 and "the file is there, but its folder takes no new file" in str(err), str(err)
    gone = FileSystemError.from_oserror(
        OSError(errno.ENOENT, os.strerror(errno.ENOENT), "/nonexistent/x.csv")
    )
    assert "no such path" in str(gone)
