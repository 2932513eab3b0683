"""cases42: a `vllm bench serve` result whose own settings contradict its file name, through the real
CLI import and report. vLLM writes `max_concurrency: null` when the run had no concurrency cap (the
key exists since 0.6.3); a name's `-c2` beside it was taken as the concurrency, so an uncapped run at
4 requests/s was shown as `c2`, the row of a capped run it never was."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.runs import tk

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "cases42"


def test_a_serve_result_without_a_cap_is_not_filed_under_its_names_concurrency(tmp_path):
    src = tmp_path / "serve-128-32-c2.json"
    shutil.copy(DATA / "vllm-serve-uncapped-rate4.json", src)
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "imported 1 result " in res.stdout, out
    assert (
        "the file name says concurrency 2, the result says max_concurrency null (no cap, request rate 4.0)"
        in out
    )
    page = tk(ROOT, "report", "--results", str(tmp_path / "r"), "--format", "text")
    assert "4qps in128 out32" in page.stdout and "c2 in128" not in page.stdout, page.stdout


def test_a_result_of_a_vllm_without_the_key_keeps_the_names_concurrency(tmp_path):
    """An older vLLM writes no max_concurrency: the name is all that says it (unchanged)."""
    import json

    data = json.loads((DATA / "vllm-serve-uncapped-rate4.json").read_text())
    del data["max_concurrency"]
    src = tmp_path / "serve-128-32-c2.json"
    src.write_text(json.dumps(data))
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 0 and "max_concurrency null" not in res.stdout + res.stderr, res.stderr
    page = tk(ROOT, "report", "--results", str(tmp_path / "r"), "--format", "text")
    assert "c2 in128 out32" in page.stdout, page.stdout
