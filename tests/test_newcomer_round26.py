"""A newcomer on a fresh Debian 13 stand-in as its sudo user, rootless Podman 5 (2026-12-05, commit
df290f2): the README's Podman line, then doctor, report, a second bench, compare, imports of
tests/data/public files, export-run and reproduce, as the README and --help texts lead there. The
stand-in's own finding (a kept stand-in removed by the next run) is tested in tests/test_fresh_host.py."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.project import DATA, ROOT
from tests.support.runs import tk
from toolkit.results.records import ResultStore

PUBLIC = DATA / "public"


def _run_import(tmp_path: Path, name: str, label: str, *extra: str):
    """`toolkit import` of the public file `name` into tmp_path/results under `label`; asserts exit 0."""
    res = tk(
        ROOT,
        "import",
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--results",
        str(tmp_path / "results"),
        "--label",
        label,
        *extra,
        str(PUBLIC / name),
    )
    assert res.returncode == 0, res.stderr
    return res


def _import(tmp_path: Path, name: str, label: str) -> dict:
    return json.loads(_run_import(tmp_path, name, label, "--json").stdout)["result"]


def test_an_import_without_a_backend_says_which_backends_can_be_given(tmp_path):
    """`toolkit import` of SGLang's bench_serving lines of an H200 (CUDA) said "SGLang results do not say
    the backend: filed as `unknown` (give --backend)", and --backend takes cpu, vulkan or rocm only: a
    newcomer could not act on it. The note names the values and says another backend stays unknown."""
    res = _run_import(tmp_path, "r25-sglang-bench-serving-deepseek-dp-mla.jsonl", "sglang-pub")
    said = " ".join((res.stdout + res.stderr).split())
    assert "give --backend cpu, vulkan or rocm when it ran on one of these" in said, said
    assert "(another, e.g. CUDA, has no --backend: it stays `unknown`)" in said, said
    bad = tk(ROOT, "import", "--results", str(tmp_path / "results"), "--label", "x", "--backend", "cuda", "f")
    assert bad.returncode == 4 and "'cpu', 'vulkan', 'rocm'" in bad.stderr, bad.stderr  # the same values


def test_an_exported_import_names_its_axes_problem_without_a_python_dict(tmp_path):
    """`toolkit export-run` of an imported run (two llama-bench tables of n_batch 256, micro-batch
    llama-bench's default 512) noted `bench: ... cannot express them ((top level): micro-batch n_ubatch
    512 is larger than every n_batch [256]: ... (got {'n_prompt': [512], 'n_gen': [128], 'n_batch':
    [256], 'n_uba...))`: a rule of the whole axes names its values itself, the dict cut at 60
    characters said nothing more. The note, run.json and reproduce's refusal say the rule alone."""
    _import(tmp_path, "r25-vulkan-7900xtx-gpu0-gpu1-dual.txt", "vk7900")
    run_id = ResultStore(tmp_path / "results").results()[0].run_id
    out = tmp_path / "export"
    res = tk(
        ROOT,
        "export-run",
        run_id,
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--results",
        str(tmp_path / "results"),
        "-o",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    said = " ".join((res.stdout + res.stderr).split())
    rule = "micro-batch n_ubatch 512 is larger than every n_batch [256]"
    assert f"cannot express them ({rule}: llama.cpp clamps ubatch to batch" in said, said
    assert "{'n_prompt'" not in said and "(top level)" not in said, said
    run = json.loads((out / "run.json").read_text())
    assert run["bench"]["not_a_matrix"].startswith(rule), run["bench"]


def test_an_exported_readme_names_the_build_each_image_holds(tmp_path):
    """The exported folder's README named each image by ID and backend, not the llama.cpp build it holds
    (run.json and the report do): a customer reading it could not tell two builds apart. Now each
    image's line names its runtime commit as the report's image line does (provenance.runtime_commit)."""
    recs = [json.loads(x) for x in (DATA / "results-cpu-a.jsonl").read_text().splitlines()]
    folder = tmp_path / "results" / "a504e0178239"
    folder.mkdir(parents=True)
    (folder / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "exp"
    res = tk(ROOT, "export-run", recs[0]["run_id"], "--results", str(tmp_path / "results"), "-o", str(out))
    assert res.returncode == 0, res.stderr[-800:]
    line = next(ln for ln in (out / "README.md").read_text().splitlines() if ln.startswith("- `cpu`"))
    assert (  # then what the report's image line says of the build, and the records' count
        "image ID `sha256:a504e0178239818d2c40c67d577cb2e1c905af2edbb2a72e5e2a3aa56d375060`, runtime commit 0c1e57098bba"
        in line
        and line.endswith(" records")
    ), line
