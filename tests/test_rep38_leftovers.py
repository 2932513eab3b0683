"""Report leftovers: the count line says `1 record read`; a label or model name holding `**` styles
nothing in the markdown verdict; a stddev of 0 beside fewer than 2 samples (an imported csv row) is an
unknown spread, shown without `±` in every format. Real files: the H200 llama-bench outputs of
tests/data/cases, imported through `toolkit import` (the csv one written from the same rows, as
llama-bench's csv printer writes them: without the samples columns of a build that has none)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from click.testing import CliRunner

from toolkit.cli.main import cli

CASES = Path(__file__).parent / "data" / "cases"


def _import(results: Path, file: Path, label: str) -> None:
    res = CliRunner().invoke(cli, ["import", str(file), "--label", label, "--results", str(results)])
    assert res.exit_code == 0, res.output


def _report(results: Path, fmt: str) -> str:
    res = CliRunner().invoke(cli, ["report", "--results", str(results), "--format", fmt])
    assert res.exit_code == 0, res.output
    return res.stdout


def _html(markdown: str) -> str:
    """The page a markdown viewer makes of `markdown` (CommonMark, markdown-it-py: rich's dependency)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(markdown)


def test_one_record_is_counted_as_one(tmp_path: Path) -> None:
    src = tmp_path / "one.jsonl"
    src.write_text((CASES / "cuda-h200-qwen3moe-30b-synthetic.jsonl").read_text().splitlines()[0] + "\n")
    _import(tmp_path / "r", src, "one")
    out = _report(tmp_path / "r", "text")
    assert "1 record read, 1 used" in out and "1 records" not in out, out[-600:]


def test_a_label_with_emphasis_marks_styles_nothing_in_the_verdict(tmp_path: Path) -> None:
    """`--label 'cu**da'` beside `--label 'vk**h200'`: the github verdict read `**cu**da@...** wins, ...
    over vk**h200@...`, a bold that ran from one name into the next; now the names are escaped and only
    the winner (the toolkit's own bold) is strong."""
    results = tmp_path / "r"
    _import(results, CASES / "cuda-h200-qwen3moe-30b-synthetic.jsonl", "cu**da")
    _import(results, CASES / "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl", "vk**h200")
    md = _report(results, "github")
    verdict = md.split("## What was measured")[0]
    page = _html(verdict)
    assert "<em>" not in page, page
    strong = page.split("<strong>")[1:]
    assert strong and all(s.startswith(("cu**da@import:", "caveat")) for s in strong), page
    assert "vk**h200@import:64589b2e889f 206.54" in page, page  # the runner-up's name as written
    assert "-&gt; <strong>cu**da@import:" in page  # the routing rule's own arrow and bold


def _csv_without_samples(dst: Path) -> Path:
    """The CUDA case's tg128 ub512 row as llama-bench's csv writes it, stddev 0 and no samples columns."""
    rows = [
        json.loads(x) for x in (CASES / "cuda-h200-qwen3moe-30b-synthetic.jsonl").read_text().splitlines()
    ]
    row = next(r for r in rows if r["n_gen"] == 128 and r["n_ubatch"] == 512)
    row = {k: v for k, v in row.items() if k not in ("samples_ns", "samples_ts")}
    row["stddev_ts"] = row["stddev_ns"] = 0
    with dst.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(row)
        w.writerow(str(v).lower() if isinstance(v, bool) else v for v in row.values())
    return dst


def test_an_unknown_spread_shows_no_plus_minus(tmp_path: Path) -> None:
    results = tmp_path / "r"
    _import(results, _csv_without_samples(tmp_path / "tg.csv"), "nosamples")
    _import(results, CASES / "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl", "vk")
    for fmt in ("text", "github"):
        out = _report(results, fmt)
        assert "± 0.00" not in out, (fmt, out)
        assert "nosamples@import:" in out and "308.01 (noise unknown)" in out, (fmt, out)  # the verdict's row
    page = CliRunner().invoke(
        cli, ["report", "--results", str(results), "--format", "html", "--output", str(tmp_path / "p.html")]
    )
    assert page.exit_code == 0, page.output
    assert "± 0.00" not in (tmp_path / "p.html").read_text()
    rows = list(csv.DictReader(_report(results, "csv").splitlines()))
    mine = [r for r in rows if r["image"] == "nosamples"]
    assert mine and all(r["stddev_ts"] == "" for r in mine), mine
    doc = json.loads(_report(results, "json"))
    cells = [
        row[c] for t in doc["tables"] for row in t["rows"] for c in t["columns"] if c.startswith("nosamples")
    ]
    assert cells and all(c is None or c["stddev_ts"] is None for c in cells), cells
    assert "nosamples@import:" in doc["verdict"]["axes"]["decode"]["noise_unknown"][0]
