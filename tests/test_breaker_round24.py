"""Breaker round 24: this session's changes (scrub's `..` reading, the index's skipped row check, the
stored-flag claims) fed hostile and real-world input. An exported run kept a user's name where a path
reached the home through `//` or `/./`, and the prefix pass was quadratic (1 MB of home paths: 6 s); a
row of an edited index (a failed record's status made ok) was loaded without its check, so a warm
report said "0 failed" where a cold one said 1; `toolkit import` of an honest md table with a
build_commit column, or of a build-1879 table with an n_batch column, stored a flag the readers then
showed as `flag-unsupported:` (a hand edit). Each test fails on the code before the fix. Inputs: the
CPU smoke run's records (tests/support/runs.bench_records), the real CPU md output of tests/data
edited as a user would paste it, the shared case vllm-serve-short-outputs.json."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from tests.support.project import DATA
from tests.support.runs import bench_records, home_project, tk
from toolkit.publish.scrub import scrub_text
from toolkit.results.records import ResultStore

_PRE = [("/home/alice/proj", "."), ("/home/alice", "~")]


@pytest.mark.parametrize(
    ("text", "published"),
    [
        ("/home//alice/models/x.gguf", "~/models/x.gguf"),
        ("/home/./alice/x.gguf", "~/x.gguf"),
        ("//home/alice/x.gguf", "~/x.gguf"),
        ("source=/home/.//alice/m,target=/m", "source=~/m,target=/m"),
        ("/Users//bob/x", "/Users/<user>/x"),
        ("file:///home//alice/m.gguf", "file://~/m.gguf"),
    ],
)
def test_a_path_that_reaches_a_home_through_an_extra_slash_or_dot_names_no_user(text, published):
    """`/home//alice`, `/home/./alice`, `//home/alice` are `/home/alice` to the kernel (a script's
    `$ROOT/$USER` join): before, the prefix check missed them and `alice` was published
    (`/home//alice/x`, `/home/<user>/alice/x`)."""
    assert scrub_text(text, _PRE) == published


def test_an_exported_run_with_a_doubled_slash_names_no_user(tmp_path, monkeypatch, matrix_data):
    """export-run of records whose model path and bind mount reach the home through `//`: before,
    `alice` stood in results.jsonl."""
    from toolkit.matrix.loading import load_matrix
    from toolkit.publish import run_folder

    home, proj = home_project(tmp_path, monkeypatch, matrix_data)
    doubled = str(home).replace("/alice", "//alice")
    store = ResultStore(proj / "results")
    for r in bench_records("run-d", model_path=f"{doubled}/models/tiny-qwen3moe.gguf"):
        r.command = [x.replace("/p/models", f"{doubled}/models") for x in r.command]
        store.add_result(r)
    out = tmp_path / "published"
    run_folder.export_run(store, "run-d", out, load_matrix(proj / "matrix.yaml"))
    text = (out / "results.jsonl").read_text()
    assert "alice" not in text
    assert json.loads(text.splitlines()[0])["model"]["path"] == "~/models/tiny-qwen3moe.gguf"


def test_the_prefix_pass_is_linear():
    """2 MB of `/home/alice ` (170,000 paths): each replacement copied the whole text (1 MB: 6 s, 2 MB:
    ~25 s); now one pass."""
    text = "/home/alice " * 170_000
    t0 = time.process_time()
    out = scrub_text(text, _PRE)
    assert time.process_time() - t0 < 3.0
    assert out == "~ " * 170_000


def test_the_replacements_read_as_before():
    """A guard of the one-pass rewrite (passes before and after): it gives what the copying loop gave, at a
    text's ends and between paths (`.` takes the `/` after it; a prefix inside another path or name is
    kept), and a path that names no user through `//` is kept as written."""
    cases = {
        "/home/alice/proj": ".",
        "/home/alice/proj/": ".",
        "/home/alice/proj/x /home/alice/y": "x ~/y",
        "-v /home/alice/proj:/work:ro": "-v .:/work:ro",
        "/home/alice/proj,/home/alice": ".,~",
        "/mnt/home/alice/x /home/alice2 /home/alice": "/mnt/home/alice/x /home/<user> ~",
        "x=/home/alice/proj/models/a.gguf": "x=models/a.gguf",
        "/data//models/./x.gguf": "/data//models/./x.gguf",  # names no user: kept as written
        "// a comment": "// a comment",
        "https://example.com//a": "https://example.com//a",
    }
    for text, published in cases.items():
        assert scrub_text(text, _PRE) == published, text


def _vllm_project(tmp: Path) -> Path:
    """A results folder `tmp/r` holding the vLLM serve result whose 8 requests stopped after 1 token of 32
    (stored failed: "generated 8 of 256 requested tokens") and the CPU md run (ok): one failed record
    among ok ones."""
    src = tmp / "in"
    src.mkdir(parents=True)
    shutil.copy(DATA / "vllm-serve-short-outputs.json", src / "serve-128-32-c2.json")
    assert (
        tk(tmp, "import", "--results", "r", "--label", "v", str(src / "serve-128-32-c2.json")).returncode == 0
    )
    md = DATA / "llamabench-0c1e57098-cpu.md"
    assert tk(tmp, "import", "--results", "r", "--label", "cpu", str(md)).returncode == 0
    return tmp / "r"


def test_an_edited_index_row_is_no_record_it_listed(tmp_path):
    """The index's row of the failed vLLM record edited to status ok (its line's bytes and hash kept):
    before, load skipped the row check for bytes whose hash matched, the record was read as a listed ok
    one, and the warm report said "0 failed" (cold: 1); now StaleIndex, the index is built again and
    the report is the cold one."""
    res = _vllm_project(tmp_path)
    cold = tk(tmp_path, "report", "--results", "r", "--format", "text", env={"COLUMNS": "120"})
    assert cold.returncode == 0 and "1 failed" in cold.stdout, cold.stdout[-600:]
    with sqlite3.connect(res / ".index.sqlite") as c:
        assert c.execute("UPDATE recs SET status = 'ok' WHERE status = 'failed'").rowcount == 1
    warm = tk(tmp_path, "report", "--results", "r", "--format", "text", env={"COLUMNS": "120"})
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout == cold.stdout


def _md_import(tmp: Path, text: str) -> str:
    """`toolkit import` of md `text`, then the csv report's flags column of each row."""
    (tmp / "in.md").write_text(text)
    imp = tk(tmp, "import", "--results", "r", "--label", "md", str(tmp / "in.md"))
    assert imp.returncode == 0, imp.stdout + imp.stderr
    rep = tk(tmp, "report", "--results", "r", "--format", "csv")
    assert rep.returncode == 0, rep.stderr
    lines = rep.stdout.splitlines()
    at = lines[0].split(",").index("flags")
    return "\n".join(line.split(",")[at] for line in lines[1:])


def test_an_md_table_with_a_build_commit_column_carries_no_unsupported_flag(tmp_path):
    """The real CPU md table pasted without its build line but with a build_commit column: before, the
    import stored `no-build-commit` beside build_commit 0c1e57098 and every reader showed
    `flag-unsupported:no-build-commit` (a hand edit, it says) on an honest import."""
    lines = (DATA / "llamabench-0c1e57098-cpu.md").read_text().splitlines()[:4]
    cells = [line.rsplit("|", 3) for line in lines]
    extra = ["build_commit |", "------------ |", "0c1e57098    |", "0c1e57098    |"]
    table = "\n".join(f"{c[0]}| {e}{c[1]}|{c[2]}|{c[3]}" for c, e in zip(cells, extra, strict=True))
    flags = _md_import(tmp_path, table + "\n")
    assert "flag-unsupported" not in flags and "no-build-commit" not in flags, flags
    assert "no-samples" in flags


def test_an_old_md_table_with_an_n_batch_column_keeps_its_no_batch_sizes(tmp_path):
    """A build-1879 table (llama.cpp before n_ubatch) with an n_batch column: the import says the batch
    sizes are not both known (`no-batch-sizes`) and stores n_batch 512; before, the readers held that
    flag to n_batch alone and showed `flag-unsupported:no-batch-sizes`."""
    table = (
        "| model | size | params | backend | ngl | n_batch | test | t/s |\n"
        "| --- | ---: | ---: | --- | --: | ---: | ---: | ---: |\n"
        "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | 512 | pp 512 | 2501.33 ± 10.21 |\n"
        "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | 512 | tg 128 | 120.85 ± 0.31 |\n"
        "\nbuild: 5a7d312 (1879)\n"
    )
    flags = _md_import(tmp_path, table)
    assert "flag-unsupported" not in flags, flags
    assert flags.count("no-batch-sizes") == 2


def test_a_record_holding_80000_flags_is_read_in_linear_time(tmp_path):
    """A hand-edited stored record whose `flags` list holds 80,000 names (0.8 MB of its 8 MiB line):
    before, `report` took ~60 s (held_claims and the table's flags column scanned lists per flag) and
    `compare` ~55 s; now well under a few seconds each, every flag shown."""
    rec = json.loads((DATA / "results-cpu-a.jsonl").read_text().splitlines()[0])
    rec["flags"] = [f"x{i}" for i in range(80_000)]
    folder = tmp_path / "r" / "a504e0178239"
    folder.mkdir(parents=True)
    (folder / "bench.jsonl").write_text(json.dumps(rec) + "\n")
    t0 = time.monotonic()
    rep = tk(tmp_path, "report", "--results", "r", "--format", "csv", timeout=600)
    assert rep.returncode == 0, rep.stderr
    assert time.monotonic() - t0 < 20
    assert "x79999" in rep.stdout


def test_a_stored_gpu_info_of_1_mb_is_read_in_linear_time(tmp_path):
    """A real H200 `toolkit measure` row, imported, its stored gpu_info edited to 1 MiB of `(`: the
    board-power look-ups this session added (figures_problem's caps, flag_claims) split it a character
    at a time into a growing text, which the report's heap copied on each step (40 s; 30 s at 539a508,
    which split it once less); now slices, about a second."""
    from tests.support.stored import edit_stored, h200_rows, import_rows, matrix_project

    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("contended.jsonl")[:1], "busy")
    edit_stored(tmp, lambda r: r.update(gpu_info="(" * (1 << 20)))
    t0 = time.monotonic()
    rep = tk(tmp, "report", "--results", "r", "--format", "csv", timeout=600)
    assert rep.returncode == 0, rep.stderr
    assert time.monotonic() - t0 < 15


def test_a_record_holding_40000_telemetry_flags_is_read_in_linear_time(tmp_path):
    """A real H200 row with its telemetry block, its stored flags edited to 40,000 `host-busy:N`:
    telemetry_flags.checked_flags kept each once by scanning the list built so far (80,000: 152 s); now
    a dict, well under a few seconds, each shown unsupported (the block raises none of them)."""
    from tests.support.stored import edit_stored, h200_rows, import_rows, matrix_project

    tmp = matrix_project(tmp_path)
    import_rows(tmp, h200_rows("contended.jsonl")[:1], "busy")
    edit_stored(tmp, lambda r: r.update(flags=[f"host-busy:{i}" for i in range(40_000)]))
    t0 = time.monotonic()
    rep = tk(tmp, "report", "--results", "r", "--format", "csv", timeout=600)
    assert rep.returncode == 0, rep.stderr
    assert time.monotonic() - t0 < 15
    assert "flag-unsupported:host-busy:39999" in rep.stdout
