"""Newcomer 37's leftover: `toolkit export-run` of an imported run (results measured outside the toolkit,
`toolkit import`) wrote no toolkit-src.tar.gz and no install line, while its README said "With the
toolkit installed: `toolkit report --results .`": the toolkit is not on PyPI, so the customer had no way
to read the folder with it. The toolkit that exported it (its checkout's commit) ships now, with the
two install lines; nothing is offered to re-run (an import has no image)."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.support.project import DATA, ROOT, cpu_project
from tests.support.runs import tk
from tests.support.stored import import_rows


def test_an_exported_import_ships_the_exporting_toolkit_to_read_it(tmp_path: Path, matrix_data: dict) -> None:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if not (ROOT / ".git").exists() or head.returncode != 0:
        pytest.skip("not a git checkout: no source to archive")
    proj = cpu_project(tmp_path / "p", matrix_data).parent
    import_rows(proj, DATA / "cuda-h200-qwen3moe-30b-synthetic.jsonl", "h200")
    rep = tk(proj, "report", "--results", "r", "--format", "json")
    assert rep.returncode == 0, rep.stderr
    (run_id,) = json.loads(rep.stdout)["provenance"]["runs"]
    got = tk(proj, "export-run", run_id, "--results", "r", "-o", str(tmp_path / "out"))
    assert got.returncode == 0, got.stdout + got.stderr
    src = tmp_path / "out" / "toolkit-src.tar.gz"
    assert src.is_file(), got.stdout + got.stderr
    with tarfile.open(src) as tar:
        names = tar.getnames()
    assert f"toolkit-{head.stdout.strip()[:12]}/toolkit/host/_commit.py" in names, names[:5]
    readme = (tmp_path / "out" / "README.md").read_text()
    repro = readme.split("## Reproduce", 1)[1]
    assert "Not reproducible with the toolkit" in repro and "pip install ./toolkit-src.tar.gz" in repro, repro
    assert "python3 -m venv" in repro and "toolkit reproduce ." not in repro, repro
