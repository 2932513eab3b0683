"""Each column's system description in every format a customer may paste (shared/cases/README.md: a
table pasted into a document said nothing beyond `cpu@784d37814b1e`): the GPU stack of its image
(ROCm / Mesa version, `... not recorded` where its records lack it, never silence), the GPUs its
container was given and every host GPU it was not, the host's GPU driver, and how many records the
numbers come from; in the report's text, github, json and html, its csv, `toolkit compare` and
`toolkit export-run`'s README.

Records are the toolkit's own (tests/support/records.make_record builds them as bench does; the real
runs of tests/data/results-*.jsonl); the two-R9700 device profile stands in for a GPU host (none here).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.support.project import DATA, ROOT
from tests.support.records import make_record
from tests.support.runs import tk
from toolkit.analysis import report

R9700 = "AMD Radeon AI PRO R9700"
PROFILE = {  # DeviceProfile.record() of the field case's host: two R9700s passed, the gfx1036 iGPU hidden
    "gpu_count": 2,
    "gpus": [
        {"index": 0, "name": R9700, "gfx_target": "gfx1201", "render_node": "/dev/dri/renderD128"},
        {"index": 1, "name": R9700, "gfx_target": "gfx1201", "render_node": "/dev/dri/renderD129"},
    ],
    "hidden": ["2 gfx1036 (renderD130, 512 MiB, iGPU) (iGPU: rocBLAS can abort on it)"],
    "environment": {},
}
HOST = {
    "os": "Ubuntu 25.10",
    "kernel": "6.17.0-8-generic",
    "cpu_model": "AMD Ryzen 9 7950X",
    "amdgpu_module": "loaded",
}


def _records() -> list:
    rocm = make_record(
        "rocm",
        "rocm",
        n=128,
        avg=100.0,
        sd=1.0,
        gpu_info=f"{R9700}, {R9700}",
        host={**HOST, "device_profile": PROFILE},
    )
    labelled = make_record("rocm71", "rocm", n=128, avg=101.0, sd=1.0, gpu_info=R9700, host=HOST)
    labelled.image.labels["org.toolkit.rocm-version"] = "7.1.1"
    vulkan = make_record(
        "vulkan", "vulkan", n=128, avg=90.0, sd=1.0, gpu_info=f"{R9700} (RADV GFX1201)", host={}
    )
    return [rocm, labelled, vulkan]


@pytest.mark.parametrize("fmt", ["text", "github", "json", "html"])
def test_every_format_says_the_gpu_stack_and_the_gpus_given(fmt: str) -> None:
    """Before: a ROCm or Vulkan column without the label said nothing of its stack beside a column
    that said `ROCm 7.1.1`; the passed and hidden GPUs bench records were said nowhere; an import's
    host line did not say its GPU driver is unknown."""
    out = report.render(_records(), fmt=fmt, width=400)
    for said in (
        "ROCm version not recorded",  # the rocm column: no label
        "ROCm 7.1.1",
        "Mesa version not recorded",  # the vulkan import-like column
        "container given 2 GPUs: renderD128, renderD129 (hidden: 2 gfx1036 (renderD130, 512 MiB, iGPU)",
        "OS, kernel and GPU driver not recorded",  # the record without host facts
    ):
        assert said in (json.dumps(json.loads(out)) if fmt == "json" else out), (fmt, said)
    assert "ROCm 7.1.1, ROCm version not recorded" not in out


def test_csv_carries_the_system_of_each_number() -> None:
    """Before: the csv named image, digest, build commit, GPU and host only: no backend, no ROCm or
    Mesa version, no engine, kernel or driver, no GPU count, no stand-in flag, no record count."""
    rows = {r["image"]: r for r in csv.DictReader(io.StringIO(report.render(_records(), fmt="csv")))}
    keys = ("backend", "gpu_stack", "kernel", "amdgpu", "gpu_count", "model_stand_in", "records")
    assert {k: rows["rocm"][k] for k in keys} == dict(
        zip(keys, ["rocm", "", "6.17.0-8-generic", "loaded", "2", "false", "1"], strict=True)
    )
    assert rows["rocm71"]["gpu_stack"] == "ROCm 7.1.1" and rows["vulkan"]["backend"] == "vulkan"
    real = list(csv.DictReader(io.StringIO((ROOT / "tests/golden/report-cpu-vulkan.csv").read_text())))
    assert {r["gpu_stack"] for r in real if r["backend"] == "vulkan"} == {"Mesa 25.0.7-2+deb13u1"}
    assert {r["engine"] for r in real} == {"docker 26.1.5+dfsg1"} and {r["model_stand_in"] for r in real} == {
        "true"
    }


def _results(tmp_path: Path, name: str, *, drop: str | None = None) -> tuple[Path, list[dict]]:
    """tests/data/<name> as a results folder (one digest's bench.jsonl), the label `drop` taken off
    its image (an image built before the label)."""
    recs = [json.loads(x) for x in (DATA / name).read_text().splitlines()]
    for r in recs:
        r["image"]["labels"].pop(drop or "", None)
    folder = tmp_path / "results" / recs[0]["image"]["digest"].split(":")[1][:12]
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "bench.jsonl").open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    return tmp_path / "results", recs


def test_compare_says_how_many_records_each_side_comes_from(tmp_path: Path) -> None:
    """Before: the report's column cards counted records, `toolkit compare` pasted into a ticket did not."""
    _results(tmp_path, "results-cpu-a.jsonl")
    results, b = _results(tmp_path, "results-cpu-b.jsonl")
    a = json.loads((DATA / "results-cpu-a.jsonl").read_text().splitlines()[0])
    args = ["compare", a["run_id"], b[0]["run_id"], "--results", str(results), "--ignore", "n_threads"]
    res = tk(ROOT, *args, "--allow-missing")
    assert res.returncode in (0, 6), res.stderr[-600:]
    assert res.stdout.count("- numbers from ") == 2, res.stdout
    got = json.loads(tk(ROOT, *args, "--allow-missing", "--json").stdout)["result"]
    assert got["a"]["records"] > 0 and got["b"]["records"] > 0


def test_export_readme_says_the_stack_and_the_record_count(tmp_path: Path) -> None:
    """Before: the README's image line gave the runtime commit only: no Mesa/ROCm version, no word
    where it is missing, no count of records."""
    results, recs = _results(tmp_path, "results-vulkan-lavapipe.jsonl", drop="org.toolkit.mesa-version")
    out = tmp_path / "exp"
    res = tk(ROOT, "export-run", recs[0]["run_id"], "--results", str(results), "-o", str(out))
    assert res.returncode == 0, res.stderr[-800:]
    line = next(ln for ln in (out / "README.md").read_text().splitlines() if ln.startswith("- `vulkan`"))
    ok = sum(r["status"] == "ok" for r in recs)
    assert ", Mesa version not recorded" in line and f"numbers from {ok} records" in line, line
