"""Breaker round 51: this session's changes given wrong answers (pub51, pub51b, fix51b).

- core/text.as_written read every non-ASCII cell in ten code pages and took the first that decoded: a
  legit name whose GBK, cp1251 or cp932 bytes happen to be UTF-8 (`专业` -> `רҵ`, `什么` -> `ʲô`, `万物`,
  Cyrillic `ДЕ`, hiragana `あい`) was changed into other text. A page's reading is the paste's only where it
  gives llama-bench's `±`, and a line is read whole (its other cells with it).
- pub51b's Q1_0 floor (0.13 bytes a weight) held every model: a `Q4_0` row whose size was edited down to
  0.14 bytes a weight (its decode hidden under the GPU's bandwidth) passed. The floor is Q1_0's only for a
  model its name says is Q1_0; any other's is IQ1_S's 0.18.
- fix51b's build retry read runc's words in any error line of a build's output: a podman RUN step that
  prints `Error: read init-p ...` itself, or whose command holds a `"` (buildah quotes the step unescaped),
  was built three times (tests/test_build_flake.py OWN_FAILURES, real engines).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.exported import exported_folder
from tests.support.runs import tk
from toolkit.core.text import as_written
from toolkit.runtimes.llama_bench import readers
from toolkit.runtimes.llama_bench.validity import check_row

LEGIT = ["专业 7B Q4_0", "什么", "万物", "一", "丹丹", "ДЕ", "КУ", "あい", "リル", "Ã©", "Ñ€", "Llama 🦙"]


@pytest.mark.parametrize("text", LEGIT)
def test_a_name_no_paste_misread_is_kept(text: str) -> None:
    assert as_written(text) == text


def test_a_table_of_legit_names_keeps_them() -> None:
    rows = readers.read_md(
        "| model | test | t/s |\n| --- | --: | --: |\n"
        + "".join(f"| {name} | pp512 | 10.00 ± 0.10 |\n" for name in LEGIT)
    )
    assert [r.fields["model_type"] for r in rows] == LEGIT


@pytest.mark.parametrize("page", ["cp437", "cp1251", "gbk", "mac_roman"])
def test_a_misread_line_is_read_back_whole(page: str) -> None:
    """The model cell of a line a paste read in `page` is read back with its `±` (held: the line is read
    whole now, no longer cell by cell)."""
    line = "| 千问 7B Q4_0 | pp512 | 373.50 ± 3.96 |".encode().decode(page)
    (row,) = readers.read_md(f"| model | test | t/s |\n| --- | --: | --: |\n{line}\n")
    assert (row.problem, row.fields["model_type"], row.fields["avg_ts"]) == (None, "千问 7B Q4_0", 373.5)


BASE = {"n_prompt": 512, "n_gen": 0, "avg_ts": 100.0, "model_n_params": "8.19 B"}


@pytest.mark.parametrize(
    ("model", "size", "refused"),
    [
        ("qwen3 8B Q1_0", "1.07 GiB", False),
        ("qwen3 8B Q1_0 (guessed)", "1.07 GiB", False),
        ("qwen3 8B Q1_0_G128", "1.07 GiB", False),
        ("qwen3 8B Q4_0", "1.07 GiB", True),  # 0.140 bytes a weight: below IQ1_S, only Q1_0 is
        ("qwen3 8B TQ1_0", "1.07 GiB", True),
        ("qwen3 8B IQ1_S", "1.55 GiB", False),  # 0.203
        ("qwen3 8B Q4_0", "1.55 GiB", False),
        ("", "1.07 GiB", False),  # no type named: Q1_0's floor
    ],
)
def test_the_weights_floor_is_the_named_types(model: str, size: str, refused: bool) -> None:
    said = check_row({**BASE, "model_type": model, "model_size": size}) or ""
    assert ("bytes a weight" in said) is refused, said
    assert not refused or "0.18 (IQ1_S)" in said


MD = (
    "| model | size | params | backend | ngl | test | t/s |\n| --- | ---: | ---: | --- | --: | --: | --: |\n"
    "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CPU | 0 | pp512 | 50.00 ± 0.50 |\n\nbuild: 5c0e94683 (6000)\n"
)


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_nothing_writes_inside_an_export_folder(tmp_path: Path, matrix_data: dict) -> None:
    """nc51 refused the export folder itself: `--results EXPORT/results`, a folder in it through a link, or a
    command run in a subfolder of it wrote results/ into the published run."""
    out = exported_folder(tmp_path, matrix_data, reproduced=False)
    (tmp_path / "b.md").write_text(MD)
    (tmp_path / "link").symlink_to(out)
    (out / "sub").mkdir()
    before = _tree(out)
    imp = ["import", "--label", "x", "--backend", "cpu", str(tmp_path / "b.md")]
    for cwd, args in [
        (tmp_path, ["--results", "got/r1/results", *imp[1:]]),
        (tmp_path, ["--results", "link/new", *imp[1:]]),
        (out / "sub", imp),
        (out / "sub", ["measure", "--", "true"]),
        (tmp_path / "project", ["bench", "--results", str(out / "results"), "-i", "cpu", "--dry-run"]),
    ]:
        got = tk(cwd, *(["import", *args] if args[0] == "--results" else args))
        assert got.returncode == 4 and "`toolkit export-run` wrote" in got.stderr, (args, got.stderr)
        assert _tree(out) == before, (args, _tree(out) - before)
    # its reproduce/ is this host's: `toolkit reproduce` measures there
    assert tk(tmp_path, "import", "--results", "got/r1/reproduce/results", *imp[1:]).returncode == 0


def test_a_project_holding_its_own_run_json_is_no_export(tmp_path: Path, matrix_data: dict) -> None:
    """A project's own run.json and results.jsonl (another tool's: any JSON without a published run's
    run_id and exported) made every builder refuse it as `a run toolkit export-run wrote`."""
    from tests.support.project import cpu_project

    project = cpu_project(tmp_path / "project", matrix_data).parent
    (project / "run.json").write_text('{"model": "llama-7b", "runs": 3}')
    (project / "results.jsonl").write_text('{"tok_s": 12.5}\n')
    got = tk(project, "render", "-i", "cpu")
    assert got.returncode == 0, got.stderr


def _tg64_import(tmp_path: Path, label: str, mtype: str, ts: float) -> None:
    """One jsonl row of this project's CPU image's record (tg64 of `mtype` at `ts` tok/s) imported as `label`."""
    import json

    from tests.support.records import CPU_A

    ns = int(64 / ts * 1e9)
    raw = json.loads(CPU_A.read_text().splitlines()[0])["raw"]
    row = {**raw, "model_type": mtype, "model_filename": f"{mtype[:5]}.gguf", "n_prompt": 0, "n_gen": 64}
    row.update(avg_ts=ts, samples_ts=[ts] * 2, avg_ns=ns, samples_ns=[ns] * 2, stddev_ts=ts / 500)
    (tmp_path / f"{label}.jsonl").write_text(json.dumps({**row, "stddev_ns": ns // 500}) + "\n")
    assert tk(tmp_path, "import", "--results", "r", "--label", label, f"{label}.jsonl").returncode == 0


def test_the_report_an_html_page_offers_runs_when_pasted(tmp_path: Path) -> None:
    """fix51a kept the user's report options in the report a verdict offers, -o left out but `--format html`
    kept: pasted, it was refused in an export's folder (exit 4, `name the page with --output`) and elsewhere
    wrote results/report.html. The page's format goes with its file."""
    import html
    import json
    import re
    import shlex

    for label, mtype, ts in (
        ("a", "qwen3moe ?B F16", 50.0),
        ("b", "qwen3moe ?B F16", 60.0),
        ("c", "qwen3 0.6B Q8_0", 70.0),
    ):
        _tg64_import(tmp_path, label, mtype, ts)
    r = tmp_path / "r"
    exp = tmp_path / "exp"  # a published run's folder: its records in results.jsonl beside run.json
    exp.mkdir()
    (exp / "results.jsonl").write_text("".join(p.read_text() for p in sorted(r.glob("*/bench.jsonl"))))
    (exp / "run.json").write_text(json.dumps({"run_id": "20261129T170627Z-6891c7", "exported": "2026-11-30"}))
    args = ["--format", "html", "-o", "page.html", "--min-margin", "60", "--title", 'it\'s "mine"']
    assert tk(tmp_path, "report", "--results", "exp", *args).returncode == 0
    page = html.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "page.html").read_text()))
    offered = re.search(r"ranked by `([^`]*)`", page)
    assert offered, page
    pasted = tk(tmp_path, *shlex.split(offered.group(1))[1:])
    assert pasted.returncode == 0 and "no clear winner" in pasted.stdout, (offered.group(1), pasted.stderr)
    assert "--min-margin 60.0" in offered.group(1) and "mine" in offered.group(1)


V = "ggml_vulkan: {n} = AMD Radeon RX {card} (radv) | uma: 0 | fp16: 1 | warp size: 64 | matrix cores: KHR_coopmat"
XTX, XT = "7900 XTX (RADV NAVI31)", "7800 XT (RADV NAVI32)"
TABLE = "| model | backend | ngl | test | t/s |\n| --- | --- | --: | --: | --: |\n"
ROW = "| llama 7B Q4_0 | {b} | 99 | pp512 | 100.00 ± 1.00 |\n"
CUDA = "  Device {n}: NVIDIA GeForce RTX {card}, compute capability 8.6, VMM: yes"


@pytest.mark.parametrize(
    ("text", "gpu_info"),
    [
        (  # a run stopped by a bad option before its table, then one on the second GPU alone
            f"{V.format(n=0, card=XTX)}\n{V.format(n=1, card=XT)}\nerror: invalid parameter for argument: -x\n"
            f"$ GGML_VK_VISIBLE_DEVICES=1 llama-bench -m m.gguf\n{V.format(n=0, card=XT)}\n"
            + TABLE
            + ROW.format(b="Vulkan"),
            "AMD Radeon RX 7800 XT (RADV NAVI32)",
        ),
        (  # the same under a table cut off (^C): the lines pub51 gives the next table
            f"{V.format(n=0, card=XT)}\n{TABLE}^C\n{V.format(n=0, card=XTX)}\n{V.format(n=1, card=XT)}\n"
            f"error: invalid parameter\n{V.format(n=0, card=XT)}\n" + TABLE + ROW.format(b="Vulkan"),
            "AMD Radeon RX 7800 XT (RADV NAVI32)",
        ),
        (
            f"{CUDA.format(n=0, card=4090)}\n{CUDA.format(n=1, card=3090)}\nerror: invalid parameter\n"
            f"{CUDA.format(n=0, card=3090)}\n" + TABLE + ROW.format(b="CUDA"),
            "NVIDIA GeForce RTX 3090",
        ),
        (  # one run of a HIP and Vulkan build lists each GPU twice: its HIP names, each once
            f"{CUDA.format(n=0, card=4090)}\n{CUDA.format(n=1, card=3090)}\n{V.format(n=0, card=XTX)}\n"
            f"{V.format(n=1, card=XT)}\n" + TABLE + ROW.format(b="CUDA,Vulkan"),
            "NVIDIA GeForce RTX 4090, NVIDIA GeForce RTX 3090",
        ),
    ],
    ids=["vulkan-bad-option", "vulkan-after-a-cut-off-table", "cuda-bad-option", "hip-and-vulkan-one-run"],
)
def test_a_table_is_given_the_devices_of_its_own_run(text: str, gpu_info: str) -> None:
    """md_devices: the devices an earlier run listed (one stopped before its table) were kept for the next
    table, a device 0 of a Vulkan listing never replacing the first's: a run on one RX 7800 XT was read as
    on an RX 7900 XTX and an RX 7800 XT (two GPUs: twice the peaks it is held to)."""
    (row,) = readers.read_md(text)
    assert row.fields["gpu_info"] == gpu_info


def test_a_device_named_twice_is_one_device() -> None:
    """fix51b's used_gpus placed `-dev ROCm0/ROCm0` (llama-bench's parser keeps both) at (0, 0): two devices,
    held to twice the card's peak (the import's bound, the report's roofline)."""
    from toolkit.runtimes.llama_bench import plausible

    row = {"gpu_info": "AMD Radeon RX 7900 XTX", "backends": "ROCm", "n_gpu_layers": 99}
    for devices in ("ROCm0/ROCm0", "ROCm0/ ROCm0 /ROCm0"):
        used = plausible.used_gpus({**row, "devices": devices})
        assert (used.count, used.at) == (1, (0,))
        assert plausible.held_by({**row, "devices": devices}) == plausible.held_by(row)
