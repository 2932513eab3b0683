"""A tester's eighth round: a *folder* under results/ that is a symbolic link (results/<digest12>, its
logs/ and telemetry/, results/measure, a campaign host's hosts/, a folder of an export). O_NOFOLLOW
guarded only a path's last component, so the toolkit wrote (and made folders) where the link points.
Each test is the reproducer of one finding and fails on the code before its fix; the real files and
links live under tmp_path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support.project import DATA
from tests.support.runs import tk
from toolkit.bench.runners.llama_bench import write_log_file
from toolkit.core.errors import BadInput
from toolkit.host import telemetry as tel
from toolkit.publish import run_folder
from toolkit.results import make_folders, open_regular
from toolkit.results.records import ResultStore, append_jsonl

ROOT = Path(__file__).resolve().parent.parent
ROWS = DATA / "llamabench-0c1e57098-cpu.jsonl"
DIGEST12 = "b4dbf96191e5"  # the digest folder `toolkit import` of ROWS writes
RUN = "20261129T170627Z-6891c7"  # the run of results-cpu-a.jsonl


def _elsewhere(tmp_path: Path) -> Path:
    """The folder a planted link points to: must stay empty."""
    where = tmp_path / "elsewhere"
    where.mkdir()
    return where


def _import(tmp_path: Path, results: str):
    return tk(tmp_path, "import", "--results", results, "--label", "x", str(ROWS))


@pytest.mark.parametrize("dangling", [False, True])
def test_import_never_writes_into_a_linked_digest_folder(tmp_path: Path, dangling: bool) -> None:
    """results/<digest12> -> a folder elsewhere: import appended bench.jsonl there, exit 0. A link to
    nothing: exit 4 `a file is there where a folder is expected`, the link unnamed. Now both: exit 4
    naming the link and its target, nothing written there (nor the target made)."""
    where = _elsewhere(tmp_path)
    target = where / "gone" if dangling else where
    (tmp_path / "r").mkdir()
    os.symlink(target, tmp_path / "r" / DIGEST12)
    r = _import(tmp_path, "r")
    assert r.returncode == 4, r.stdout + r.stderr
    assert f"{DIGEST12} is a symbolic link (to {str(target)!r})" in r.stderr, r.stderr
    assert "replace it with a folder" in r.stderr
    assert list(where.iterdir()) == []


def test_a_results_root_that_is_the_users_link_is_followed(tmp_path: Path) -> None:
    """The results root itself may be the user's link (to another disk): written through as before."""
    disk = _elsewhere(tmp_path)
    os.symlink(disk, tmp_path / "r")
    r = _import(tmp_path, "r")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (disk / DIGEST12 / "bench.jsonl").is_file()


def test_a_log_is_never_written_into_a_linked_digest_or_logs_folder(tmp_path: Path) -> None:
    """llama_bench.write_log_file (llama-bench's run log, results/<digest12>/logs/...) made logs/ in the folder a
    linked results/<digest12> points to and wrote the log there; a linked logs/ the same."""
    where = _elsewhere(tmp_path)
    root = tmp_path / "r"
    root.mkdir()
    os.symlink(where, root / DIGEST12)
    why = write_log_file(root / DIGEST12 / "logs" / "run.log", "log text", root)
    assert why is not None and f"{DIGEST12} is a symbolic link (to {str(where)!r})" in why
    os.unlink(root / DIGEST12)
    (root / DIGEST12).mkdir()
    os.symlink(where, root / DIGEST12 / "logs")
    why = write_log_file(root / DIGEST12 / "logs" / "run.log", "log text", root)
    assert why is not None and "logs is a symbolic link" in why
    assert list(where.iterdir()) == []
    assert write_log_file(root / "0123456789ab" / "logs" / "run.log", "log text", root) is None  # no link
    assert (root / "0123456789ab" / "logs" / "run.log").read_text() == "log text"


def test_the_store_never_makes_a_logs_folder_through_a_linked_digest_folder(tmp_path: Path) -> None:
    """ResultStore.log_path made an empty logs/ where a linked results/<digest12> pointed."""
    where = _elsewhere(tmp_path)
    root = tmp_path / "r"
    root.mkdir()
    os.symlink(where, root / DIGEST12)
    with pytest.raises(BadInput, match="is a symbolic link"):
        ResultStore(root).log_path("sha256:" + DIGEST12 + "0" * 52, "run.log")
    assert list(where.iterdir()) == []


def test_the_telemetry_trace_is_never_opened_through_a_linked_folder(tmp_path: Path) -> None:
    """The sampler's trace, results/<digest12>/telemetry/<run>.jsonl, was opened with open("a"): a
    linked digest or telemetry folder got the trace (and the folder made) where the link points."""
    where = _elsewhere(tmp_path)
    digest = tmp_path / "r" / DIGEST12
    digest.mkdir(parents=True)
    os.symlink(where, digest / "telemetry")
    sampler = tel.Sampler([tel.HostSource()], rate_hz=10, trace_path=digest / "telemetry" / "run-m.jsonl")
    with pytest.raises(BadInput, match="telemetry is a symbolic link"):
        sampler.start()
    sampler.stop()
    assert list(where.iterdir()) == []


def test_measure_never_writes_into_a_linked_results_measure_folder(tmp_path: Path) -> None:
    """`measure` writes results/measure/<time>.jsonl and its trace: a linked results/measure got both,
    and kept them outside the results folder. Now exit 4 before the command runs."""
    where = _elsewhere(tmp_path)
    (tmp_path / "r").mkdir()
    os.symlink(where, tmp_path / "r" / "measure")
    r = tk(tmp_path, "measure", "--results", "r", "--", "touch", str(tmp_path / "ran"))
    assert r.returncode == 4, r.stdout + r.stderr
    assert f"measure is a symbolic link (to {str(where)!r})" in r.stderr
    assert list(where.iterdir()) == [] and not (tmp_path / "ran").exists()


def test_a_campaign_hosts_store_never_writes_through_a_linked_hosts_folder(tmp_path: Path) -> None:
    """results/hosts/<key>/ is a campaign host's store of its own: a linked results/hosts got its
    .seq and bench.jsonl. The links below the outer results folder are refused too."""
    where = _elsewhere(tmp_path)
    (where / "h1" / DIGEST12).mkdir(parents=True)
    (tmp_path / "r").mkdir()
    os.symlink(where, tmp_path / "r" / "hosts")
    with pytest.raises(BadInput, match=r"r/hosts is a symbolic link"):
        append_jsonl(tmp_path / "r" / "hosts" / "h1" / DIGEST12 / "bench.jsonl", {"a": 1})
    assert list((where / "h1" / DIGEST12).iterdir()) == []


def test_a_runner_output_folder_is_never_made_or_chmodded_through_a_link(tmp_path: Path) -> None:
    """vLLM's and SGLang's results/<digest12>/<runner>/<run>-<model> was made with mkdir(parents=True)
    and chmod 0777 (what make_folders does for them now): through a linked digest folder, the folder
    was made elsewhere and a linked output folder's target (say /etc) opened to every user."""
    where = _elsewhere(tmp_path)
    where.chmod(0o755)
    digest = tmp_path / "r" / DIGEST12
    digest.mkdir(parents=True)
    os.symlink(where, digest / "vllm")
    with pytest.raises(BadInput, match="vllm is a symbolic link"):
        make_folders(digest / "vllm" / "run-m", chmod=0o777)
    (digest / "sglang").mkdir()
    os.symlink(where, digest / "sglang" / "run-m")
    with pytest.raises(BadInput, match="run-m is a symbolic link"):
        make_folders(digest / "sglang" / "run-m", chmod=0o777)
    assert list(where.iterdir()) == [] and where.stat().st_mode & 0o777 == 0o755
    make_folders(digest / "llama" / "run-m", chmod=0o777)  # no link: made, and its mode set
    assert (digest / "llama" / "run-m").stat().st_mode & 0o777 == 0o777


def test_a_store_file_is_refused_at_a_link_anywhere_below_the_root(tmp_path: Path) -> None:
    """open_regular for writing, the one open of result files: a link at any folder below the results
    root is refused; at the root (or above it) followed; reads unchanged."""
    where = _elsewhere(tmp_path)
    root = tmp_path / "r"
    (root / "x").mkdir(parents=True)
    os.symlink(where, root / "x" / "logs")
    with pytest.raises(BadInput, match="logs is a symbolic link"):
        open_regular(root / "x" / "logs" / "a.log", os.O_WRONLY | os.O_CREAT, root=root)
    os.symlink(root, tmp_path / "via")
    os.close(open_regular(tmp_path / "via" / "x" / "b.log", os.O_WRONLY | os.O_CREAT, root=tmp_path / "via"))
    assert (root / "x" / "b.log").is_file() and list(where.iterdir()) == []


def _project(tmp_path: Path) -> Path:
    p = tmp_path / "p"
    (p / "results" / "a504e0178239").mkdir(parents=True)
    shutil.copy(ROOT / "matrix.yaml", p)
    shutil.copytree(ROOT / "Dockerfile.templates", p / "Dockerfile.templates")
    shutil.copy(DATA / "results-cpu-a.jsonl", p / "results" / "a504e0178239" / "bench.jsonl")
    return p


def test_export_never_copies_a_template_into_a_folder_linked_after_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """export-run checks the links of a non-empty --out before writing (symlinks_inside); its subfolder
    linked elsewhere after that check (here: the check made a no-op) got the templates copied there."""
    from toolkit.matrix.api import load_matrix

    p = _project(tmp_path)
    out = tmp_path / "out"
    r = tk(p, "export-run", "--matrix", str(p / "matrix.yaml"), RUN, "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    where = _elsewhere(tmp_path)
    shutil.rmtree(out / "Dockerfile.templates")
    os.symlink(where, out / "Dockerfile.templates")
    monkeypatch.setattr(run_folder, "symlinks_inside", lambda *a, **k: None)
    with pytest.raises(BadInput, match="Dockerfile.templates is a symbolic link"):
        run_folder.export_run(ResultStore(p / "results"), RUN, out, load_matrix(p / "matrix.yaml"))
    assert list(where.iterdir()) == []
