"""Leftovers closed in cases40 (.devwork/closing.md), each reproduced through the real CLI and files:

- a URL, a `www.` name or an email in a model, host or test name became a link on GitHub (GFM's
  extended autolinks need no markup): the github report, compare's markdown, the verdict and the export
  README escape them through core.text's one escaping (md_text for a cell or heading, md_line for a
  line of prose);
- a backtick in a name quoted in the verdict's sentences paired with the next one and turned the words
  between into a code span: md_line escapes every backtick;
- a JSON `true`/`false` (or csv/sql/md text `true`) in model_size or model_n_params was read as "not
  recorded" and the row imported without a word: refused with the file, row and field, in every import
  format (llama_bench.settings_check, read by the one validity pass).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.runs import tk
from toolkit.core.text import md_line, md_text

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"

# What GitHub renders as a link with no markup asking for one (GFM 6.9 extended autolinks): `://`, a
# `www.` and an email address, each unescaped.
_LINKS = re.compile(r"(?<!\\)://|(?<![\\\w.])www\.|[\w.+-]@[\w-]+\.\w")


def _rows() -> list[dict]:
    return [json.loads(x) for x in (DATA / "cases38-tiny-model.jsonl").read_text().splitlines()]


def _prose(page: str) -> str:
    """`page` without its code spans (a fence of n backticks to the next run of n: CommonMark 6.1),
    where nothing is a link and a backtick is text."""
    return re.sub(r"(?<![`\\])(`+)(?!`).*?(?<!`)\1(?!`)", "", page)


def test_a_name_that_github_would_link_is_escaped_and_nothing_else():
    assert md_text("see https://evil.example/x") == r"see https\://evil.example/x"
    assert md_text("WWW.evil.example") == r"WWW\.evil.example"
    assert md_text("me@evil.example") == "me@&#8288;evil.example"  # `\@` is still a link on GitHub
    assert md_line("mailto:me@evil.example, ftp://x") == r"mailto:me@&#8288;evil.example, ftp\://x"
    # the toolkit's own `label@digest` and words with a colon or dot are left as they are
    assert md_text("one@import:0794ede0631e a:b 3.5 x.www") == "one@import:0794ede0631e a:b 3.5 x.www"
    assert md_line("a`b and `toolkit bench`") == r"a\`b and \`toolkit bench\`"


def _two_imports(tmp_path: Path) -> Path:
    """Two labels of one model family, their files named with a backtick, a `www.` and an email, the
    host's CPU with a URL: the verdict quotes both files (they differ), the tables and cards all."""
    rows = _rows()
    one = [
        r | {"model_filename": "/m/a`b www.evil.example.gguf", "cpu_info": "see https://evil.example/x"}
        for r in rows
    ]
    two = [r | {"model_filename": "/m/me@evil.example c`d.gguf", "build_commit": "4567beef"} for r in rows]
    results = tmp_path / "results"
    for label, lines in (("one", one), ("two", two)):
        src = tmp_path / f"{label}.jsonl"
        src.write_text("".join(json.dumps(x) + "\n" for x in lines))
        res = tk(ROOT, "import", str(src), "--results", str(results), "--label", label)
        assert res.returncode == 0, res.stderr
    return results


def test_no_markdown_writer_links_a_name_or_quotes_one_as_code(tmp_path):
    """Reproducer: the github report, compare's markdown and the export README linked
    `www.evil.example.gguf`, `https://evil.example/x` and `me@evil.example`; the verdict line naming
    `a`b ...gguf` and `c`d.gguf` drew the words between their backticks as code."""
    results = _two_imports(tmp_path)
    report = tk(ROOT, "report", "--results", str(results), "--format", "github")
    compare = tk(ROOT, "compare", "one", "two", "--results", str(results), "--format", "github")
    assert report.returncode == 0 and compare.returncode == 0, report.stderr + compare.stderr
    run_id = json.loads(next(results.glob("*/bench.jsonl")).read_text().splitlines()[0])["run_id"]
    out = tmp_path / "export"
    exp = tk(ROOT, "export-run", run_id, "--results", str(results), "-o", str(out))
    assert exp.returncode == 0, exp.stderr
    readme = (out / "README.md").read_text()
    verdict = report.stdout.split("## What was measured")[0]
    assert "the images' model files are not known to be one file" in verdict, verdict  # no sha256 recorded
    assert r"a\`b www\.evil.example.gguf" in verdict and r"me@&#8288;evil.example c\`d.gguf" in verdict, (
        verdict
    )
    for page in (report.stdout, compare.stdout, readme):
        assert "evil.example" in page, page
        assert not _LINKS.search(_prose(page)), _LINKS.search(_prose(page))
    for page in (report.stdout, compare.stdout):  # every backtick of a name is escaped: it opens no span;
        bare = len(re.findall(r"(?<!\\)`", page))  # the toolkit's own spans render (fix49a)
        spans = re.findall(r"(?<!\\)`([^`]*)(?<!\\)`", page)
        assert bare == 2 * len(spans) and not any("evil" in x or "\\" in x for x in spans), spans


_FORMATS = ("jsonl", "json", "csv", "md", "sql")


def _with_true(fmt: str, field: str, tmp_path: Path) -> tuple[Path, str]:
    """A file of two rows in llama-bench's `fmt` whose last row holds `true` in `field`, and where the
    refusal names it (`file:line`)."""
    if fmt in ("jsonl", "json"):
        good, bad = _rows()
        bad = bad | {field: True}
        text = json.dumps([good, bad]) if fmt == "json" else json.dumps(good) + "\n" + json.dumps(bad) + "\n"
        line = 1 if fmt == "json" else 2  # a json array's rows are numbered from 0, as the importer says
    elif fmt == "md":
        md = (DATA / "llamabench-0c1e57098-cpu.md").read_text()
        size, params = "|   1.52 MiB |     0.79 M |", "|       true |     0.79 M |"
        if field == "model_n_params":
            params = "|   1.52 MiB |       true |"
        text, line = (
            md.replace(
                size + " CPU        |       2 |            tg16",
                params + " CPU        |       2 |            tg16",
            ),
            4,
        )
    elif fmt == "csv":
        head, first, second = (DATA / "llamabench-0c1e57098-cpu.csv").read_text().splitlines()[:3]
        cells = second.split(",")
        cells[head.split(",").index(field)] = '"true"'
        text, line = "\n".join([head, first, ",".join(cells)]) + "\n", 3
    else:
        sql = (DATA / "llamabench-0c1e57098-cpu.sql").read_text()
        last = "INSERT" + sql.split("INSERT")[-1]
        was = "'1595904'" if field == "model_size" else "'792192'"
        text, line = (
            sql.replace(last, last.replace(was, "'true'", 1)),
            sql.count("\n", 0, sql.rfind("INSERT")) + 1,
        )
    src = tmp_path / f"rows.{fmt}"
    src.write_text(text)
    return src, f"rows.{fmt}:{line}: {field} is "


@pytest.mark.parametrize("field", ["model_size", "model_n_params"])
@pytest.mark.parametrize("fmt", _FORMATS)
def test_a_true_model_size_is_refused_in_every_format(tmp_path, fmt, field):
    """Reproducer: `model_size: true` (and csv's, sql's, md's text `true`) imported both rows, the
    second with its size "not recorded", and the import said nothing."""
    src, where = _with_true(fmt, field, tmp_path)
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 0 and "imported 1 result " in res.stdout, res.stdout + res.stderr
    assert where in res.stderr and ": expected a " in res.stderr and "row left out" in res.stderr, res.stderr


def test_reproduce_markdown_links_and_styles_no_name(tmp_path):
    """Reproducer: `toolkit reproduce`'s github output (its default off a terminal) printed the published
    folder's model and image names raw: `me@evil.example` was a link and `a`b` opened a code span. The
    Reproduction is built by hand (a reproduce needs a published run's images and a GPU); its printing
    is the real one."""
    from tests.support.records import make_record
    from toolkit.publish.repro_output import format_reproduction
    from toolkit.publish.reproduce import ImageCheck, ModelCheck, Reproduction, ReproRow

    rec = make_record("cpu", "cpu", p=512, avg=100.0, sd=1.0)
    rep = Reproduction("r1", "r2", tmp_path, tmp_path, 5.0)
    rep.images = [ImageCheck("www.evil.example", "sha256:" + "a" * 64, "present", "sha256:" + "a" * 64)]
    rep.models = [ModelCheck("me@evil.example a`b", "/m/x.gguf", "b" * 64, "verified")]
    rows = [ReproRow("www.evil.example", "pp512", m, rec, rec, 0.0, 0.05, True) for m in ("a`b", "c`d")]
    rep.rows, rep.notes = rows, ["see https://evil.example/x"]
    page = format_reproduction(rep, "github")
    assert "model me@&#8288;evil.example a\\`b: verified" in page and "image www\\.evil.example" in page, page
    assert "note: see https\\://evil.example/x" in page and "| www\\.evil.example | pp512  | a\\`b" in page, (
        page
    )
    body, tail = page.split("\nsee the reproduced run: ", 1)  # the closing lines: the toolkit's own commands
    assert not _LINKS.search(page) and not re.search(r"(?<!\\)`", body), page
    assert tail.startswith("`toolkit report --results ") and tail.count("`") == 4, tail
    text = format_reproduction(rep, "text")  # a terminal's: names as written
    assert "model me@evil.example a`b: verified" in text and "www.evil.example" in text, text
