"""Runs for publish, reproduce and fault tests: recorded llama-bench records (`bench_records`) with their
axes and digest, the reproduce CLI, a source tarball, and `tk` (the toolkit as a subprocess)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.project import ROOT
from toolkit.bench.runners import base
from toolkit.cli.main import cli
from toolkit.core.errors import ToolkitError
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.matrix.api import BenchAxes
from toolkit.results.records import BenchRecord, ImageRef, ModelRef
from toolkit.runtimes.llama_bench import args as lb_args
from toolkit.runtimes.llama_bench import check

DIGEST = "sha256:" + "9206eeaed761" + "0" * 52


AXES = BenchAxes(
    n_prompt=[64, 256], n_gen=[16], n_ubatch=[32, 512], n_batch=[512], n_gpu_layers=[0], repetitions=3
)


def bench_records(
    run_id: str,
    scale: float = 1.0,
    sd: float = 0.05,
    model_path: str = "/p/models/tiny-qwen3moe.gguf",
    sha: str = "cd" * 32,
) -> list[BenchRecord]:
    """The six records of the CPU smoke run (pp64/pp256/tg16 x ub32/ub512), tok/s x `scale`."""
    container = base.container_spec(
        DIGEST,
        ["llama-bench"] + lb_args.bench_args(AXES, "/models/tiny-qwen3moe.gguf"),
        devices.DeviceProfile.example("cpu"),
        model_dir=Path("/p/models"),
        shader_volume=None,
        run_id=run_id,
        name=f"toolkit-{run_id}",
    )
    rs = []
    for case in AXES.cases():
        avg = (1000.0 if case["n_prompt"] else 100.0) * scale
        row = {
            **case,
            "avg_ts": avg,
            "stddev_ts": avg * sd,
            "samples_ts": [avg * (1 - sd), avg, avg * (1 + sd)],
            "n_threads": 2,
            "backends": "CPU",
            "gpu_info": "",
            "model_type": "qwen3moe 0.5M F16",
        }
        rs.append(
            BenchRecord(
                run_id=run_id,
                created="2026-11-29T17:02:27+00:00",
                image=ImageRef(name="cpu", ref="toolkit/cpu:latest", digest=DIGEST, backend="cpu"),
                model=ModelRef(name="tiny-qwen3moe", path=model_path, sha256=sha, size_bytes=1611104),
                command=engine.run_command(container),
                host={"cpu_model": "Xeon", "cpu_threads": 2},
                raw=row,
                **check.normalize(row),
            )
        )
    return rs


def reproduce_cli(folder: Path, *args: str) -> tuple[str, int]:
    """`toolkit reproduce FOLDER` without a project (as on a fresh host); (output, exit code)."""
    res = CliRunner().invoke(cli, ["reproduce", str(folder), *args])
    code = res.exception.exit_code if isinstance(res.exception, ToolkitError) else res.exit_code
    if res.exception and not isinstance(res.exception, (ToolkitError, SystemExit)):
        raise res.exception
    return res.output + (f"\nerror: {res.exception}" if isinstance(res.exception, ToolkitError) else ""), code


def _tar(path, members):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tf:
        for name, kind, link in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = b"x"
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                info.type = {"sym": tarfile.SYMTYPE, "lnk": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
                info.linkname = link
                tf.addfile(info)
    return path


def tk(
    cwd: Path,
    *args: str,
    env: dict[str, str | None] | None = None,
    prefix: list[str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """`python -m toolkit ARGS` as a user would run it; returns the finished process."""
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "toolkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(env),
    )  # no preexec_fn: Python code between fork and exec can deadlock on a lock another thread held


def _env(extra: dict[str, str | None] | None) -> dict[str, str]:
    """The test process's environment plus `extra`; a None value removes that variable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **(extra or {})}
    return {k: v for k, v in env.items() if v is not None}


def _no_dac(cmd_prefix_ok: bool = True) -> list[str]:
    """As root, drop the capabilities that ignore file modes (a non-root user's view of the files);
    as a non-root user, nothing to drop."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: cannot make file modes bite")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]


def published_folder(folder: Path, *, digest: str = DIGEST, model: dict | None = None) -> Path:
    """A published run folder as `toolkit export-run` writes one (run.json, results.jsonl) of run `run-h`,
    its image recorded under `digest`, its model entry updated by `model` (a test's hostile part)."""
    import json

    from toolkit.publish import run_folder
    from toolkit.results.records import append_jsonl

    folder.mkdir(parents=True, exist_ok=True)
    run = run_folder.PublishedRun(
        run_id="run-h",
        created="2026-11-29T17:02:27+00:00",
        exported="2026-11-29T18:00:00+00:00",
        images=[run_folder.PublishedImage(name="cpu", backend="cpu", digest=digest)],
        models=[
            run_folder.PublishedModel(
                **{
                    "name": "tiny-qwen3moe",
                    "file": "tiny-qwen3moe.gguf",
                    "sha256": "cd" * 32,
                    "size_bytes": 1611104,
                    **(model or {}),
                }
            )
        ],
        bench=AXES.model_dump(exclude={"timeout_s"}),
    )
    (folder / "run.json").write_text(json.dumps(run.model_dump(mode="json"), indent=2))
    for r in bench_records("run-h", sha="cd" * 32):
        append_jsonl(folder / "results.jsonl", r)
    return folder


def home_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matrix_data: dict) -> tuple[Path, Path]:
    """A project at <tmp>/home/alice/proj with HOME=<tmp>/home/alice, the cpu image of `matrix_data`
    (its matrix written there, after the caller's edits) and the project's templates: (home, project)."""
    from tests.support.project import write_matrix

    home = tmp_path / "home" / "alice"
    proj = home / "proj"
    monkeypatch.setenv("HOME", str(home))
    matrix_data["images"] = [i for i in matrix_data["images"] if i["name"] == "cpu"]
    shutil.copytree(ROOT / "Dockerfile.templates", proj / "Dockerfile.templates")
    write_matrix(proj, matrix_data)
    return home, proj


def toolkit_exit(args: list[str], stdout: int, stderr: int, unbuffered: bool) -> int:
    """The exit status of `python -m toolkit ARGS` run from the checkout with the given stdout and stderr
    (file descriptors or subprocess constants), stdout buffered as on any host, or unbuffered
    (PYTHONUNBUFFERED=1, this workplace's setting, which hid a failed last flush) with `unbuffered`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update({"PYTHONPATH": str(ROOT), **({"PYTHONUNBUFFERED": "1"} if unbuffered else {})})
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args], stdout=stdout, stderr=stderr, cwd=ROOT, env=env, timeout=120
    ).returncode


def import_text(root: Path, tmp_path: Path, name: str, text: str) -> str:
    """`toolkit import` of `text` written to tmp_path/NAME into tmp_path/r (label x), as a user runs it;
    its stdout and stderr together (the import must exit 0)."""
    tmp_path.mkdir(exist_ok=True)
    src = tmp_path / name
    src.write_text(text)
    res = tk(root, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    return out
