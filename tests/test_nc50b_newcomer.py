"""Newcomer nc50b on a fresh Debian 13 stand-in, rootful Podman: what the commands this session changed
say, pasted as printed.

S-matrix: a refusal's `line N, column M` pointed elsewhere than what it names: a whole-file rule
(`images[0].source ...: 'llama.cppx' is not defined under sources`, `vllm.x: unknown key`) named the
document's first key (`line 4, column 1`), an unknown key its value's column, not its own."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

from tests.support.project import ROOT
from tests.support.runs import tk


def _refusal(tmp_path: Path, old: str, new: str) -> tuple[str, list[str]]:
    """`toolkit render` of the repository's matrix.yaml with `old` (its first occurrence) made `new`:
    (stderr, the edited file's lines)."""
    if not (tmp_path / "Dockerfile.templates").is_dir():
        shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    text = (ROOT / "matrix.yaml").read_text()
    assert old in text, old
    (tmp_path / "matrix.yaml").write_text(text.replace(old, new, 1))
    got = tk(tmp_path, "render")
    assert got.returncode == 4, got.stderr
    return got.stderr, (tmp_path / "matrix.yaml").read_text().splitlines()


def test_a_matrix_refusal_points_at_what_it_names(tmp_path: Path) -> None:
    """Reproducer: each message's line and column are those of the key path it names (the key itself
    where the key is what is wrong), and a rule that names no key path names no line."""
    for old, new, names, word in (
        ("    source: llama.cpp\n", "    source: llama.cppx\n", "images[0].source", "llama.cppx"),
        ("  n_ubatch: [512, 2048]", "  n_ubatchh: [512, 2048]", "bench.n_ubatchh", "n_ubatchh"),
        ("  attention_backend: TRITON_ATTN", "  attention_backendd: TRITON_ATTN", "vllm.", "attention_"),
    ):
        err, lines = _refusal(tmp_path, old, new)
        at = re.search(r"matrix\.yaml: line (\d+), column (\d+): (.*)", err)
        assert at and at.group(3).startswith(names), err
        line, column = int(at.group(1)), int(at.group(2))
        assert lines[line - 1][column - 1 :].startswith(word), (lines[line - 1], err)
    err, _ = _refusal(tmp_path, "  - name: vulkan\n", "  - name: cpu\n")
    assert "  matrix.yaml: duplicate image name(s): cpu;" in err, err


def test_a_pins_row_on_podman_names_its_skopeo_command_with_the_whole_digest(monkeypatch) -> None:
    """Reproducer: `toolkit pins` on Podman printed `skopeo inspect docker://rocm/dev-ubuntu-24.04@sha256:
    3db551c4e122…`, the table's 12-hex digest; pasted, skopeo said `invalid reference format`. A digest
    inside a command is kept whole; the pin column still shows 12 hex."""
    from toolkit.engine import api as engine
    from toolkit.images import pins

    digest = "sha256:" + "3d" * 32
    ref = f"rocm/dev-ubuntu-24.04:7.2.1-complete@{digest}"
    monkeypatch.setattr(engine, "is_podman", lambda: True)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/skopeo")
    pin = pins.Pin("image", ref, digest, ("images/rocm/Dockerfile",), ref)
    table = pins.format_pins([pins.check_pin(pin, None)])  # type: ignore[arg-type]  # an image needs no matrix
    pasted = re.findall(r"`(skopeo [^`]*)`", table)
    assert pasted == [f"skopeo inspect docker://rocm/dev-ubuntu-24.04@{digest}"], table
    assert f"| {ref[: ref.index('@') + 20]}… " in table, table


def _rows(*tests: tuple[int, float]) -> str:
    """Lines of the real R9700 Qwen3-30B-A3B row (tests/data/cases) as tg tests of (n_gen, tok/s)."""
    row = json.loads((ROOT / "tests/data/cases/two-builds-one-file.jsonl").read_text().splitlines()[0])
    out = []
    for n_gen, ts in tests:
        ns = round(n_gen * 1e9 / ts)
        timed = {"avg_ts": ts, "stddev_ts": 0.0, "avg_ns": ns, "stddev_ns": 0, "samples_ts": [ts] * 3}
        out.append(json.dumps(row | {"n_prompt": 0, "n_gen": n_gen, "samples_ns": [ns] * 3} | timed))
    return "\n".join(out) + "\n"


def test_the_report_a_verdict_names_ranks_the_images_it_names(tmp_path: Path) -> None:
    """Reproducer: a, b and c measured Qwen3-30B-A3B (tg128 + tg64, tg128, tg32), other images other
    models: the verdict said `the images that measured qwen3moe 30B.A3B are ranked by `toolkit report -i
    a -i b -i c``, which, pasted, ranked nothing (`they measured different tests`). It names the images
    that share a test, in the report of every image and in that of a, b and c alike; pasted, it ranks."""
    files = {"a": _rows((128, 120.0), (64, 125.0)), "b": _rows((128, 150.0)), "c": _rows((32, 130.0))}
    for label, text in files.items():
        (tmp_path / f"{label}.jsonl").write_text(text)
    shutil.copy(ROOT / "tests/data/cases/two-models-one-file.jsonl", tmp_path / "other.jsonl")
    for label in (*files, "other"):
        got = tk(tmp_path, "import", f"{label}.jsonl", "--label", label, "--results", "r")
        assert got.returncode == 0, got.stderr
    for picked in ((), ("-i", "a", "-i", "b", "-i", "c")):
        got = tk(tmp_path, "report", "--results", "r", *picked)
        decode = next(ln for ln in got.stdout.splitlines() if ln.startswith("- decode: not decided"))
        cmds = re.findall(r"the images that measured (.*?) are ranked by `(toolkit report [^`]+)`", decode)
        assert cmds == [("tg128 of qwen3moe 30B.A3B", "toolkit report --results r -i a -i b")], decode
    again = tk(tmp_path, *shlex.split(cmds[0][1])[1:])
    assert again.returncode == 0 and "- decode: **b@import:" in again.stdout, again.stdout[:800]


def test_an_import_heads_a_row_kept_beyond_its_card_as_a_note_on_a_kept_row(tmp_path: Path) -> None:
    """An R9700 Qwen3-30B-A3B tg64 at 1,000 tok/s (3x the card's bandwidth) is kept and noted under
    `1 note(s) on what the files do not say:`, which the file does say; the heading now says what the
    notes are of."""
    (tmp_path / "r.jsonl").write_text(_rows((64, 1000.0)))
    got = tk(tmp_path, "import", "r.jsonl", "--label", "r9700", "--results", "r")
    assert got.returncode == 0, got.stderr
    lines = got.stderr.splitlines()
    at = next(i for i, ln in enumerate(lines) if "kept beyond the peak of the GPU" in ln)
    assert lines[at - 1] == "1 note(s) on the rows kept:", got.stderr
