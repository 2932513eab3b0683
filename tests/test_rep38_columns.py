"""Each column of a report carries its system description beside the table (the field case "a report
table pasted into a customer document says nothing about what a column is beyond `cpu@784d37814b1e`"):
image (name, digest, runtime commit, backend, ROCm/Mesa version from its labels), model (name, type,
short sha256, stand-in or not), host (GPU, kernel, CPU), the dates its records were measured and how
many records and runs its numbers come from; in text, github, html and json. Real files only: the two
H200 llama-bench outputs of tests/data/cases imported through `toolkit import` (two columns measured
47 minutes apart), and a real `toolkit bench` of the Vulkan image on Mesa lavapipe
(tests/data/results-vulkan-lavapipe.jsonl) and of the CPU image (tests/data/rep38-cpu-bench.jsonl,
`toolkit bench -i cpu -m tiny-qwen3moe`, 2026-12-06), stored as bench writes them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from toolkit.cli.main import cli

DATA = Path(__file__).parent / "data"
CASES = DATA / "cases"


def _import(results: Path, file: Path, label: str) -> None:
    res = CliRunner().invoke(cli, ["import", str(file), "--label", label, "--results", str(results)])
    assert res.exit_code == 0, res.output


def _stored(results: Path, name: str) -> None:
    """A bench's own records, placed where bench stores them (results/<digest12>/bench.jsonl)."""
    digest = json.loads((DATA / name).read_text().splitlines()[0])["image"]["digest"].split(":")[1]
    (results / digest[:12]).mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / name, results / digest[:12] / "bench.jsonl")


def _report(results: Path, fmt: str) -> str:
    args = ["report", "--results", str(results), "--format", fmt]
    res = CliRunner().invoke(cli, args + (["--output", str(results / "r.html")] if fmt == "html" else []))
    assert res.exit_code == 0, res.output
    return (results / "r.html").read_text() if fmt == "html" else res.stdout


def _three(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    _import(results, CASES / "cuda-h200-qwen3moe-30b-synthetic.jsonl", "cuda-h200")
    _import(results, CASES / "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl", "vk-h200")
    _stored(results, "results-vulkan-lavapipe.jsonl")
    return results


def _column(text: str, label: str) -> list[str]:
    """The lines under a column's item in the text report's Columns section, each unwrapped (the
    terminal's width wraps them) and without its `- `."""
    section = text.split("\nColumns\n\n", 1)[1].split("\n\n", 1)[0]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"- {label}: "))
    out: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("- "):
            break
        if line.startswith("  - "):
            out.append(line[4:])
        elif out:  # a wrapped line's rest (the legend line's own before the first)
            out[-1] += " " + line.strip()
    return out


def _text(results: Path) -> str:
    res = CliRunner().invoke(cli, ["report", "--results", str(results), "--format", "text"])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_each_column_says_its_image_model_host_dates_and_records(tmp_path: Path) -> None:
    text = _text(_three(tmp_path))
    cuda = " | ".join(_column(text, "cuda-h200"))
    assert "image: digest import:5267a4ee4514" in cuda and "backend cuda, runtime commit 0c1e57098" in cuda, (
        cuda
    )
    assert "model: qwen3-30b-a3b-synth-Q4_K_M.gguf" in cuda and "qwen3moe 30B.A3B Q4_K - Medium" in cuda, cuda
    assert "stand-in" not in cuda  # full size (17 GiB): not called a stand-in
    assert "GPU NVIDIA H200" in cuda
    assert "measured: 2026-11-30 18:29:47 UTC to 2026-11-30 18:29:53 UTC" in cuda, cuda
    assert "numbers from 8 records (1 run: import-" in cuda, cuda
    vk = " | ".join(_column(text, "vk-h200"))
    assert "backend vulkan" in vk and "measured: 2026-11-30 19:16:49 UTC to 2026-11-30 19:17:13 UTC" in vk, vk
    lava = " | ".join(_column(text, "vulkan"))
    assert "digest sha256:f255c37b9031" in lava and "Mesa 25.0.7-2+deb13u1" in lava, lava
    assert "kernel 6.18.44-fc-v769" in lava and "Debian GNU/Linux 13 (trixie)" in lava, lava
    assert "a stand-in under 64.00 MiB, not a real model" in lava, lava
    assert "measured: 2026-11-29" in lava, lava
    assert "numbers from 6 records (2 decode records folded into 1 row; 1 run: 20261129T" in lava, lava


def test_the_columns_are_in_every_format(tmp_path: Path) -> None:
    results = _three(tmp_path)
    md = _report(results, "github")
    cols = md.split("## Columns\n\n", 1)[1].split("\n\n", 1)[0]
    assert "- cuda-h200: cuda-h200@import:5267a4ee4514" in cols, cols
    assert "\n  - measured: 2026-11-30 18:29:47 UTC to 2026-11-30 18:29:53 UTC" in cols, cols
    assert "\n  - numbers from 8 records (1 run: import-" in cols, cols
    page = _report(results, "html")
    html_cols = page.split('<ul class="columns">', 1)[1].split("</ul></li></ul>", 1)[0]
    assert "<li>measured: 2026-11-30 19:16:49 UTC to 2026-11-30 19:17:13 UTC</li>" in html_cols, html_cols
    assert "Mesa 25.0.7-2+deb13u1" in html_cols
    doc = json.loads(_report(results, "json"))
    by = {c["label"]: c for c in doc["columns"]}
    assert set(by) == {"cuda-h200", "vk-h200", "vulkan"}, by.keys()
    assert by["cuda-h200"]["column"] == "cuda-h200@import:5267a4ee4514"
    assert by["cuda-h200"]["records"] == by["cuda-h200"]["results"] == 8
    assert by["cuda-h200"]["measured_utc"] == ["2026-11-30 18:29:47", "2026-11-30 18:29:53"]
    assert by["vk-h200"]["measured_utc"] == ["2026-11-30 19:16:49", "2026-11-30 19:17:13"]
    assert any("Mesa 25.0.7" in i for i in by["vulkan"]["images"]), by["vulkan"]
    assert any("kernel 6.18.44" in h for h in by["vulkan"]["hosts"]), by["vulkan"]
    assert len(by["vulkan"]["runs"]) == 1 and by["vulkan"]["records"] == 6


def test_one_column_is_said_once(tmp_path: Path) -> None:
    """A one-column report (a real bench of the CPU image): What was measured is that column's
    description; the Columns item adds only how many records its numbers come from, never the image,
    model and host lines again."""
    results = tmp_path / "results"
    _stored(results, "rep38-cpu-bench.jsonl")
    text = _text(results)
    (item,) = _column(text, "cpu")
    assert item.startswith("numbers from 10 records (1 run: 20261206T020449Z-fed783)"), item
    assert "What was measured, above" in item, item
    assert "\n  - image:" not in text and text.count("runtime commit") == 1, text
    doc = json.loads(_report(results, "json"))
    (col,) = doc["columns"]
    assert col["label"] == "cpu" and col["records"] == 10 and col["images"] == doc["provenance"]["images"]
