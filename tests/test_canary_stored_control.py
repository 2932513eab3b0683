"""A GPU canary whose CPU control is held only in canary.jsonl (its records not shown: `report --image
vulkan`, or a control measured in an earlier run) is compared with that stored control as with a shown
one (round 13's left item): before, the control was looked up among the shown records alone, so a
canary naming a control PPL the stored control does not have passed unseen. Each test fails before."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from tests.support.records import CANARY_CONTROL as CONTROL
from tests.support.records import canary_row, make_record
from tests.support.runs import tk
from toolkit.analysis import provenance
from toolkit.results import canary_check


def _own_control(ppl: float) -> dict:
    """The CPU image's stored canary result: its own control (the same image, digest, run and ppl)."""
    return canary_row(
        image="cpu",
        digest=CONTROL["digest"],
        backend="cpu",
        ppl=ppl,
        ln_ratio=None,
        control={**CONTROL, "ppl": ppl},
    )


def _vulkan(control_ppl: float) -> dict:
    """A vulkan canary that says it passed against CONTROL with PPL `control_ppl`."""
    return canary_row(
        ppl=535.9028, control={**CONTROL, "ppl": control_ppl}, ln_ratio=math.log(535.9028 / control_ppl)
    )


def _shown(canary: dict) -> list:
    return [make_record("vulkan", "vulkan", n=128, avg=90.0, sd=0.5, canary=canary, digest=canary["digest"])]


def _vulkan_line(recs: list, stored: list) -> str:
    return next(x for x in provenance.provenance(recs, stored).images if x.startswith("vulkan"))


def test_a_canary_is_held_to_its_control_stored_only_in_canary_jsonl() -> None:
    """The stored control says 535.8769; the shown canary claims it passed against a control of 530.0:
    unchecked, naming both figures. The same canary claiming the stored figure passes."""
    stored = [_own_control(535.8769)]
    wrong = _vulkan_line(_shown(_vulkan(530.0)), stored)
    assert "unchecked" in wrong and "535.877" in wrong and "530" in wrong, wrong
    right = _vulkan_line(_shown(_vulkan(535.8769)), stored)
    assert "unchecked" not in right and "cpu control 535.877" in right, right
    # a stored line that is no control (another image's, failed, contradicting itself) decides nothing
    for no_control in (
        canary_row(),  # the vulkan canary itself
        {**_own_control(535.8769), "status": "wrong-output"},
        {**_own_control(535.8769), "ppl": -5.0, "control": {**CONTROL, "ppl": -5.0}},
    ):
        assert "unchecked" not in _vulkan_line(_shown(_vulkan(530.0)), [no_control]), no_control


def test_stored_canaries_reads_every_canary_file_and_passes_over_what_it_cannot_read(tmp_path: Path) -> None:
    """results/<digest12>/canary.jsonl and a campaign host's results/hosts/<host>/<digest12>/canary.jsonl
    are read; a line that is not JSON is passed over, a FIFO or folder named canary.jsonl gives none."""
    root = tmp_path / "results"
    (root / "637075006370").mkdir(parents=True)
    (root / "637075006370" / "canary.jsonl").write_text(json.dumps(_own_control(535.8769)) + "\nnot json\n")
    (root / "hosts" / "n1" / "767676767676").mkdir(parents=True)
    (root / "hosts" / "n1" / "767676767676" / "canary.jsonl").write_text(json.dumps(canary_row()) + "\n")
    (root / "aaaaaaaaaaaa" / "canary.jsonl").mkdir(parents=True)
    (root / "bbbbbbbbbbbb").mkdir()
    os.mkfifo(root / "bbbbbbbbbbbb" / "canary.jsonl")
    got = canary_check.stored_canaries(root)
    assert sorted(c["image"] for c in got) == ["cpu", "vulkan"], got
    assert canary_check.stored_canaries(None) == [] and canary_check.stored_canaries(tmp_path / "none") == []


def test_report_of_the_gpu_image_alone_compares_with_the_stored_control(tmp_path: Path) -> None:
    """`toolkit report --image vulkan` over a folder whose CPU control is in canary.jsonl (its bench
    records not shown): the vulkan canary claiming another control PPL is unchecked in the report."""
    root = tmp_path / "results"
    rec = _shown(_vulkan(530.0))[0]
    digest_dir = root / rec.image.digest.split(":")[-1][:12]
    digest_dir.mkdir(parents=True)
    (digest_dir / "bench.jsonl").write_text(rec.model_dump_json() + "\n")
    cpu_dir = root / CONTROL["digest"].split(":")[-1][:12]
    cpu_dir.mkdir()
    (cpu_dir / "canary.jsonl").write_text(json.dumps(_own_control(535.8769)) + "\n")
    res = tk(tmp_path, "report", "--results", str(root), "--image", "vulkan", "--format", "json")
    assert res.returncode == 0, res.stderr
    images = json.loads(res.stdout)["provenance"]["images"]
    assert any("unchecked" in line and "535.877" in line for line in images), images


def test_only_the_folders_of_the_controls_shown_canaries_name_are_read(tmp_path: Path) -> None:
    """Breaker round 14 (F7): the report read every canary.jsonl of the folder, whatever it showed (a
    74 MB one: ~9 s). Now only the digest folders the shown canaries name as control are read."""
    root = tmp_path / "results"
    control_dir = root / CONTROL["digest"].split(":")[-1][:12]
    control_dir.mkdir(parents=True)
    (control_dir / "canary.jsonl").write_text(json.dumps(_own_control(535.8769)) + "\n")
    other = root / ("ab" * 6)  # another cpu build's control, named by no shown canary: not read
    other.mkdir()
    unnamed = {**_own_control(535.8769), "digest": "sha256:" + "ab" * 32}
    (other / "canary.jsonl").write_text(
        json.dumps({**unnamed, "control": {**unnamed["control"], "digest": unnamed["digest"]}}) + "\n"
    )
    shown = _shown(_vulkan(530.0))
    assert [c["digest"] for c in canary_check.stored_canaries(root, shown)] == [CONTROL["digest"]]
    assert len(canary_check.stored_canaries(root)) == 2  # without `shown`: every folder
    assert canary_check.stored_canaries(root, [make_record("cpu", "cpu", n=128, avg=90.0)]) == []  # no canary
    assert "unchecked" in _vulkan_line(shown, canary_check.stored_canaries(root, shown))
