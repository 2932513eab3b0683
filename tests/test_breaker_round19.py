"""Round 19: a hostile tester of integrity, flags and what a customer receives. Each test fails on the
code before its fix; the inputs are the real files of tests/data, edited only where a test says so."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from tests.support.records import edit_line
from tests.support.runs import tk
from toolkit.core.text import md_text, strip_controls
from toolkit.runtimes.llama_bench.validity import check_row

DATA = Path(__file__).parent / "data"
CUDA = DATA / "cuda-h200-qwen3moe-30b-synthetic.jsonl"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _faster(row: dict, factor: float) -> dict:
    """`row` measured `factor` times faster, its rates and times kept consistent (what check_row holds)."""
    return {
        **row,
        "avg_ts": row["avg_ts"] * factor,
        "stddev_ts": row["stddev_ts"] * factor,
        "samples_ts": [x * factor for x in row["samples_ts"]],
        "avg_ns": row["avg_ns"] / factor,
        "stddev_ns": row["stddev_ns"] / factor,
        "samples_ns": [x / factor for x in row["samples_ns"]],
    }


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _import(tmp_path: Path, f: Path, *extra: str) -> tuple[Path, object]:
    root = tmp_path / "results"
    return root, tk(tmp_path, "import", "--results", str(root), "--label", "x", *extra, str(f))


# ------------------------------------------------------ 1. a GPU the row's backend cannot run on


@pytest.mark.parametrize(
    ("backends", "gpu"),
    [("ROCm", "NVIDIA H200"), ("CUDA", "AMD Radeon AI PRO R9700"), ("Metal", "NVIDIA H200")],
)
def test_a_row_naming_a_gpu_its_backend_cannot_run_on_is_refused(backends: str, gpu: str) -> None:
    """A ROCm row on an NVIDIA H200 (or CUDA on a Radeon, Metal on an NVIDIA card) was imported and shown
    with the H200's roofline and `GPU NVIDIA H200` on the host line: the GPU named is not the one that
    ran it. The one validity pass refuses it; Vulkan on an NVIDIA card and the real rows stay."""
    row = _rows(CUDA)[0]
    assert check_row(row) is None
    assert check_row({**row, "backends": "Vulkan"}) is None  # Vulkan runs on any vendor's GPU
    assert check_row({**row, "backends": "CUDA,BLAS", "gpu_info": "NVIDIA H200, NVIDIA H200"}) is None
    # ZLUDA runs a CUDA build on an AMD GPU and says so in the device's name: a real run, kept
    assert check_row({**row, "backends": "CUDA", "gpu_info": "AMD Radeon RX 7900 XTX [ZLUDA]"}) is None
    why = check_row({**row, "backends": backends, "gpu_info": gpu}) or ""
    assert "cannot run on" in why and gpu in why


def test_a_stored_record_edited_to_a_gpu_its_backend_cannot_run_on_is_skipped(tmp_path: Path) -> None:
    """The same contradiction written into a results/ record by hand: skipped by the report, as every
    record that contradicts itself is (was: shown, `GPU AMD Radeon AI PRO R9700` for CUDA rows)."""
    root, res = _import(tmp_path, CUDA)
    assert res.returncode == 0, res.stderr
    (stored,) = root.glob("*/bench.jsonl")
    edit_line(stored, 1, lambda r: r.update(gpu_info="AMD Radeon AI PRO R9700"))
    rep = tk(tmp_path, "report", "--results", str(root), "--format", "github")
    assert rep.returncode == 0, rep.stderr
    assert "contradicts itself" in rep.stderr and "cannot run on" in rep.stderr
    assert "R9700" not in rep.stdout


# ------------------------------------------------------ 2. model_size against model_n_params


def test_a_model_size_no_parameter_count_allows_is_refused_at_import_and_when_stored(tmp_path: Path) -> None:
    """An H200 tg128 of 43,723 tok/s of a 30B model (87 TB/s of weight reads: 18x the card's 4.8 TB/s)
    whose model_size was cut 1000x to 18.5 MB was shown as `2% of BW`, flagged `bw-below-floor`
    ("implausibly little bandwidth"): the opposite of the truth. 18.5 MB for 30.5 B weights is 0.0006
    bytes a weight, below any ggml type's (IQ1_S: 0.195): refused by the validity pass, and a stored record
    edited the same way is skipped."""
    tg = _rows(CUDA)[3]
    assert (tg["n_prompt"], tg["n_gen"]) == (0, 128)
    bad = {**_faster(tg, 150.0), "model_size": tg["model_size"] // 1000}
    why = check_row(bad) or ""
    assert "bytes a weight" in why
    assert check_row({**tg, "model_size": tg["model_n_params"] * 9}) is not None  # above F64's 8 bytes
    assert check_row({**tg, "model_size": "1.52 MiB", "model_n_params": "0.79 M"}) is None  # md's text
    root, res = _import(tmp_path, CUDA)
    assert res.returncode == 0, res.stderr
    (stored,) = root.glob("*/bench.jsonl")
    edit_line(stored, 4, lambda r: r["raw"].update(model_size=r["raw"]["model_size"] // 1000))
    rep = tk(tmp_path, "report", "--results", str(root), "--format", "csv")
    assert "bytes a weight" in rep.stderr
    assert "bw-below-floor" not in rep.stdout


# ------------------------------------------------------ 3. a prefill no machine computes


def test_a_prefill_beyond_what_any_machine_computes_is_refused(tmp_path: Path) -> None:
    """A CPU pp2048 of 272 million tok/s of a 30.5 B-parameter model (1.6 exaFLOP/s at 2 FLOPs per token
    and active parameter, even at 3 % active) was imported and shown unflagged: a CPU has no roofline and
    the decode bound (10 us a generated token) does not touch prefill. Refused by the validity pass; the
    real rows (13,700 tok/s on an H200) stay."""
    rows = _rows(CUDA)
    pp = {**rows[1], "backends": "CPU", "gpu_info": "", "n_gpu_layers": 0}
    assert check_row(pp) is None
    why = check_row(_faster(pp, 20000.0)) or ""
    said = ("what any machine computes", "on any hardware")  # nc49: its 4 micro-batches' time floor too
    assert any(s in why for s in said), why
    f = _write(tmp_path / "fast.jsonl", [_faster(pp, 20000.0)])
    _root, res = _import(tmp_path, f)
    assert res.returncode == 4 and any(s in res.stderr for s in said), res.stderr


# ------------------------------------------------------ 4. bidi controls in names


def test_bidi_controls_in_names_reach_no_report_format(tmp_path: Path) -> None:
    """A model file named `qwen<U+202E>q8.gguf`, a GPU with isolates, a CPU with RLM: every report format
    but json carried them raw (json escapes them), so the csv row after the model cell, or a terminal's
    line, read backwards (Trojan Source). Stripped with the other controls (core.text.strip_controls)."""
    rows = _rows(CUDA)[:1]
    rows[0].update(
        model_filename="/m/qwen\u202eq8.gguf",
        gpu_info="NVIDIA H200\u2066x\u2069",
        cpu_info="Xeon\u200f\u061c",
    )
    root, res = _import(tmp_path, _write(tmp_path / "bidi.jsonl", rows))
    assert res.returncode == 0, res.stderr
    for fmt in ("github", "csv", "text", "html", "json"):
        page = tmp_path / f"report.{fmt}"
        out = tk(tmp_path, "report", "--results", str(root), "--format", fmt, "-o", str(page))
        assert out.returncode == 0, out.stderr
        text = page.read_text(encoding="utf-8")
        bidi = {
            hex(ord(c)) for c in text if unicodedata.bidirectional(c) in ("RLO", "LRI", "PDI", "RLM", "AL")
        }
        assert not bidi and "qwen" in text, (fmt, bidi)
    assert strip_controls("a\u202eb\u2067c\u200ed") == "abcd" and md_text("x\u202ey") == "xy"


# ------------------------------------------------------ 5. two builds in one image column


def test_an_image_column_holding_two_builds_names_both(tmp_path: Path) -> None:
    """Two imports under one --digest and label, of builds aaaa1111 (pp512) and bbbb2222 (tg128): one
    column whose provenance said `runtime commit bbbb2222` (its first record's), so the pp512 number read
    as bbbb2222's. Every value the records of an image disagree on is said with each value."""
    rows = _rows(CUDA)
    a = [{**rows[0], "build_commit": "aaaa1111"}]  # pp512
    b = [{**rows[3], "build_commit": "bbbb2222"}]  # tg128
    digest = "sha256:" + "a" * 64
    root = tmp_path / "results"
    for name, rs in (("a.jsonl", a), ("b.jsonl", b)):
        res = tk(
            tmp_path,
            "import",
            "--results",
            str(root),
            "--label",
            "vk",
            "--digest",
            digest,
            str(_write(tmp_path / name, rs)),
        )
        assert res.returncode == 0, res.stderr
    rep = tk(tmp_path, "report", "--results", str(root), "--format", "github")
    (line,) = [x for x in rep.stdout.splitlines() if x.startswith("- image vk@")]
    assert "aaaa1111 (1 record)" in line and "bbbb2222 (1 record)" in line and "mixed" in line


# ------------------------------------------------------ 6. compare says what each side is


def test_compare_names_model_dates_build_gpu_and_host_of_each_side(tmp_path: Path) -> None:
    """`toolkit compare` (its table and --json) named each side by `image@digest12` alone: no model, no
    sha256, no dates, no runtime commit, no GPU, no host; a comparison pasted into a ticket said nothing
    of what was compared. Each side now carries the report's provenance of its compared records."""
    root = tmp_path / "results"
    for label, f in (("cuda", CUDA), ("vk", DATA / "vulkan-h200-qwen3moe-30b-synthetic-fa0.jsonl")):
        res = tk(
            tmp_path, "import", "--results", str(root), "--label", label, "--model-sha256", "ab" * 32, str(f)
        )
        assert res.returncode == 0, res.stderr
    out = tk(tmp_path, "compare", "--results", str(root), "cuda", "vk", "--ignore", "flash_attn")
    assert out.returncode == 6, out.stderr
    for said in (
        "model: qwen3-30b-a3b-synth",
        "sha256 abababababab",
        "measured: 2026-11-30 18:29:47 UTC",
        "measured: 2026-11-30 19:16:49 UTC",
        "GPU NVIDIA H200",
        "runtime commit 0c1e57098",
        "Intel(R) Xeon(R)",
        "backend vulkan",
        "backend cuda",
    ):
        assert said in out.stdout, said
    js = json.loads(
        tk(
            tmp_path, "compare", "--results", str(root), "cuda", "vk", "--ignore", "flash_attn", "--json"
        ).stdout
    )
    prov = js["result"]["a"]["provenance"]
    assert prov["measured_utc"][0] == "2026-11-30 18:29:47" and any(
        "sha256 abababababab" in m for m in prov["models"]
    )
    assert any("NVIDIA H200" in h for h in js["result"]["b"]["provenance"]["hosts"])
