"""Bad options and inputs found by the breaker trial: each is bad input (exit 4) with a message that
names the option or file, never a traceback, never a gate that cannot fail. Real CLI, real files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.records import make_record
from toolkit.analysis import compare
from toolkit.core.errors import BadInput
from toolkit.matrix.api import load_matrix
from toolkit.results.records import ResultStore

ROOT = Path(__file__).resolve().parents[1]


def toolkit(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolkit", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "a", "b", "--threshold", "nan"],
        ["compare", "a", "b", "--threshold", "inf"],
        ["report", "--noisy-threshold", "nan", "--json"],
        ["report", "--bw-floor", "inf"],
        ["report", "--min-margin", "-1e999"],
        ["bench", "--dry-run", "--timeout", "nan"],
        ["reproduce", "x", "--threshold", "NaN"],
        ["pins", "--timeout", "inf"],
        ["campaign", "status", "--interval", "nan"],
    ],
)
def test_non_finite_float_options_are_bad_input(args, tmp_path):
    p = toolkit(*args, "--results", str(tmp_path)) if args[0] in ("compare", "report") else toolkit(*args)
    assert p.returncode == 4, (p.returncode, p.stderr[-300:])
    assert "Traceback" not in p.stderr and ("finite" in p.stderr or "range" in p.stderr)


def test_a_matrix_with_a_nul_byte_or_no_test_is_bad_input(tmp_path):
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"schema_version: 1\nimages: []\x00\n")
    p = toolkit("render", "--matrix", str(nul))
    assert p.returncode == 4 and "not valid YAML" in p.stderr and "Traceback" not in p.stderr
    text = (
        (ROOT / "matrix.yaml")
        .read_text()
        .replace("n_prompt: [512, 2048, 4096]", "n_prompt: [0]")
        .replace("n_gen: [128]", "n_gen: [0]")
    )
    empty = tmp_path / "matrix.yaml"
    empty.write_text(text)
    with pytest.raises(BadInput, match="no test to run: every n_prompt and n_gen is 0"):
        load_matrix(empty)


def test_compare_ignore_of_an_unknown_field_is_named(tmp_path):
    store = ResultStore(tmp_path / "results")
    a = make_record("a", "rocm", p=512, avg=100.0)
    b = a.model_copy(
        update={"image": a.image.model_copy(update={"digest": "sha256:" + "b" * 64, "name": "b"})}
    )
    for r in (a, b):
        store.add_result(r)
    with pytest.raises(BadInput, match="--ignore n_thread: not a test field"):
        compare.compare(store, "a", "b", ignore=("n_thread",))
    c = compare.compare(store, "a", "b", ignore=("n_batch",))  # a real field: joined without it
    assert len(c.rows) == 1 and c.ignored == ["n_batch"]


def test_tune_takes_allow_concurrent_like_bench():
    p = toolkit("tune", "--help")
    assert "--allow-concurrent" in p.stdout and "TOOLKIT_ALLOW_CONCURRENT" not in p.stderr


def test_fetch_model_with_the_hub_unreachable_is_exit_11_not_a_bug(tmp_path):
    import os
    import shutil

    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    env = {
        **os.environ,
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_ETAG_TIMEOUT": "2",
        "HF_HUB_DOWNLOAD_TIMEOUT": "2",
    }
    for args in (["qwen3-30b-a3b-awq"], ["qwen3-30b-a3b-q4kxl", "--twin"]):
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "toolkit",
                "fetch-model",
                *args,
                "--matrix",
                str(tmp_path / "matrix.yaml"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert p.returncode == 11, (args, p.returncode, p.stderr[-400:])
        assert "Traceback" not in p.stderr and "offline" in p.stderr


@pytest.mark.parametrize(
    "shape",
    ["[" * 100_000 + "]" * 100_000, "{a: " * 50_000 + "1" + "}" * 50_000, "- " * 100_000 + "x"],
    ids=["brackets", "flow-mappings", "block-sequences"],
)
def test_a_deeply_nested_matrix_is_bad_input_not_a_crash(shape, tmp_path):
    """Under the 1 MiB limit, nesting 50,000-100,000 deep (flow brackets, flow mappings, block
    sequences on one line): exit 4 naming the file. libyaml's C loader crashes the process (SIGSEGV,
    exit -11) on the first shape; the toolkit keeps PyYAML's pure-Python loader for that reason."""
    deep = tmp_path / "deep.yaml"
    deep.write_text(f"schema_version: 1\nimages: {shape}\n")
    p = toolkit("render", "--matrix", str(deep))
    assert p.returncode == 4, (p.returncode, p.stderr[-300:])
    assert str(deep) in p.stderr and "Traceback" not in p.stderr


def test_report_of_a_run_or_image_that_is_not_there_says_so(tmp_path):
    """A results folder with records: `report --run NOSUCH` / `--image NOSUCH` is bad input naming
    what was asked and what is there, not "no results yet"."""
    res = toolkit(
        "import",
        str(ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl"),
        "--label",
        "cpuhost",
        "--results",
        str(tmp_path),
    )
    assert res.returncode == 0, res.stderr
    for flag, value in (("--run", "nosuch-run"), ("--image", "nosuch-image")):
        p = toolkit("report", "--results", str(tmp_path), flag, value)
        assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)
        assert f"no record of {flag[2:]} {value}" in p.stderr and "cpuhost" in p.stderr, p.stderr
        assert "no results yet" not in p.stdout + p.stderr


@pytest.mark.parametrize(
    "field, value",
    [("repetitions", True), ("runs", True), ("n_prompt", ["512"]), ("n_ubatch", [True]), ("threads", 4.0)],
)
def test_bench_counts_are_strict_integers(field, value, tmp_path):
    """`repetitions: true` used to become `-r 1`: a count must be written as an integer."""
    import yaml

    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["bench"][field] = value
    m = tmp_path / "matrix.yaml"
    m.write_text(yaml.safe_dump(data, sort_keys=False))
    p = toolkit("render", "--matrix", str(m))
    assert p.returncode == 4 and f"bench.{field}" in p.stderr and "Traceback" not in p.stderr, p.stderr[-400:]


def test_gpu_index_is_not_negative():
    p = toolkit("bench", "--dry-run", "--gpu", "-1")
    assert p.returncode == 4 and "--gpu" in p.stderr and "Traceback" not in p.stderr, p.stderr[
        -300:
    ]  # bad option: 4


def test_reimport_under_another_label_names_the_label_the_rows_are_filed_under(tmp_path):
    data = str(ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl")
    assert toolkit("import", data, "--label", "first", "--results", str(tmp_path)).returncode == 0
    p = toolkit("import", data, "--label", "newname", "--results", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "newname: these rows were imported before, under the name first; nothing added" in p.stdout, (
        p.stdout
    )
    assert "newname: already imported" not in p.stdout
