"""A newcomer on a fresh Debian 13 stand-in (2026-12-04, third session), what was left: a flagged
newer run hiding a clean one, the column legend, compare's format and held note, reproduce's missing
rows, the Environment block of --help, host paths in a published run, Podman's step totals."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tests.support.project import DATA, ROOT
from tests.support.records import CPU_A, CPU_B, load, make_record
from tests.support.runs import bench_records, home_project
from tests.support.telemetry_fakes import supporting_block
from tests.support.terminal import drain
from toolkit.cli.main import cli
from toolkit.publish import repro_output
from toolkit.results.records import BenchRecord, ResultStore

CLEAN_RUN = "20261129T170627Z-6891c7"  # the captured CPU run of results-cpu-a.jsonl


def _busy(r: BenchRecord, **update) -> BenchRecord:
    """`r` as a record flagged host-busy (telemetry saw other processes use the host's CPUs)."""
    busy = {"flags": ["host-busy"], "telemetry": r.telemetry or supporting_block(["host-busy"])}
    return BenchRecord.model_validate({**r.model_dump(), **busy, **update})


def _store_with_busy_rerun(root: Path) -> ResultStore:
    """The captured CPU run (clean), then a re-run of the same image and tests flagged host-busy."""
    store = ResultStore(root)
    recs = load(CPU_A)
    for r in recs:
        store.add_result(r)
    for r in recs:
        store.add_result(_busy(r, run_id="run-busy", created="2026-11-30T00:00:00+00:00"))
    return store


def _report(root: Path, *args: str, width: int = 160):
    res = CliRunner().invoke(cli, ["report", "--results", str(root), *args], env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    return res


def test_report_names_the_clean_run_a_flagged_rerun_hides(tmp_path):
    """A re-run flagged host-busy replaced the clean run in the report (newest per test, by design)
    and nothing said that a clean measurement of the same tests was there: one line names it and the
    `--run ID` that shows it; none when the shown run is asked for, or nothing is flagged."""
    _store_with_busy_rerun(tmp_path / "results")
    res = _report(tmp_path / "results", "--format", "text")
    notes = [x for x in res.stderr.splitlines() if "without a telemetry flag" in x]
    assert len(notes) == 1, res.stderr
    assert f"run {CLEAN_RUN} (" in notes[0], notes[0]
    again = f"toolkit report --results {tmp_path / 'results'} --format text --run {CLEAN_RUN}"  # options kept
    assert f"`{again}` shows it" in notes[0], notes[0]
    assert "pp128 ub64" in notes[0] and "flagged host-busy" in notes[0]
    assert "telemetry flag" not in _report(tmp_path / "results", "--run", "run-busy").stderr
    clean = ResultStore(tmp_path / "clean")
    for r in load(CPU_A) + [x.model_copy(update={"run_id": "run-2"}) for x in load(CPU_A)]:
        clean.add_result(r)
    assert "telemetry flag" not in _report(tmp_path / "clean").stderr


def test_a_column_is_described_once_in_the_legend(tmp_path):
    """Image `a` in the prefill table beside `b` (another GPU: its header names the GPU) and alone in
    the decode table (its header names nothing): the legend said `a: a@... (GPU X) / a@... (backend
    vulkan, GPU X)`, the one column described twice. Each column is described once, wholly."""
    store = ResultStore(tmp_path / "results")
    for img, gpu in (("a", "Radeon X"), ("b", "Radeon Y")):
        store.add_result(make_record(img, "vulkan", p=512, avg=1000.0, sd=1.0, gpu_info=gpu))
    store.add_result(make_record("a", "vulkan", n=128, avg=100.0, sd=1.0, gpu_info="Radeon X"))
    out = _report(tmp_path / "results", "--format", "text").stdout
    section = out.split("\nColumns\n", 1)[1].split("\nPrefill", 1)[0].strip().splitlines()
    legend = [line for line in section if line.startswith("- ")]  # each column's description under it
    assert legend == [
        f"- a: a@{'61' * 6} (backend vulkan, GPU Radeon X)",
        f"- b: b@{'62' * 6} (backend vulkan, GPU Radeon Y)",
    ], legend


def _on_a_terminal(*args: str, cwd: Path) -> str:
    """stdout of `python -m toolkit ARGS` written to a pseudo-terminal (isatty() is true), 100 wide."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", *args], cwd=cwd, stdout=follower, stderr=subprocess.DEVNULL, env=env
    )
    os.close(follower)
    out = drain(leader)
    proc.wait(timeout=120)
    return out


def _two_images(root: Path) -> None:
    """The captured CPU runs of two builds, B's cells flagged host-busy."""
    store = ResultStore(root)
    for r in load(CPU_A):
        store.add_result(r)
    for r in load(CPU_B):
        store.add_result(_busy(r))


def test_compare_prints_plain_text_on_a_terminal_as_report_does(tmp_path):
    """`toolkit compare A B` on a terminal printed a markdown table (`| test | ...`) as wide as its
    cells; report prints text there. One rule (cli.common.human_format): text on a terminal, markdown
    to a pipe or with --format github."""
    _two_images(tmp_path / "results")
    args = ["compare", "a504", "c703", "--ignore", "n_threads"]
    text = _on_a_terminal(*args, cwd=tmp_path)
    assert "pp128 ub64" in text and "|" not in text and "**" not in text, text
    assert all(len(x) <= 100 for x in text.splitlines()), [x for x in text.splitlines() if len(x) > 100]
    assert re.search(r"^-{4,}  -{4,}", text, re.M)  # the grid's rule under its headers
    report = _on_a_terminal("report", cwd=tmp_path)
    assert report.startswith("Benchmark report") and "|" not in report.split("Prefill", 1)[1]
    piped = subprocess.run(
        [sys.executable, "-m", "toolkit", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert _after_caveats(piped.stdout).startswith("| test "), piped.stdout[:300]
    asked = _on_a_terminal(*args, "--format", "github", cwd=tmp_path)
    assert _after_caveats(asked).startswith("| test "), asked[:300]


def _after_caveats(text: str) -> str:
    """compare's output after the report's caveats that head it (a tiny stand-in's: newcomer 37)."""
    lines = text.splitlines()
    while lines and (lines[0].startswith("caveat:") or not lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines)


def test_held_notes_name_what_the_image_ran_on(tmp_path):
    """compare (and the verdict) told a CPU image's host-busy cells to "measure again with the GPU and
    host to itself", of numbers "not the device's alone (the GPU's, or the CPU's for a CPU image)": a
    CPU image has no GPU to free. They name the CPU for a CPU image, the GPU for a GPU image."""
    _two_images(tmp_path / "results")
    res = CliRunner().invoke(
        cli, ["compare", "--results", str(tmp_path / "results"), "a504", "c703", "--ignore", "n_threads"]
    )
    assert res.exit_code == 0, res.output
    assert (
        "rests on numbers that are not the CPU's alone; measure again with the host to itself" in res.stdout
    )
    assert "GPU" not in res.stdout.split("held, not counted", 1)[1], res.stdout
    report = _report(tmp_path / "results", "--format", "text", width=400).stdout
    assert "with the GPU" not in report and "measure again with the host to itself" in report

    from toolkit.analysis.flag_help import held_words

    assert held_words(["host-busy"], "fix", ["gpu"]) == "measure again with the GPU and host to itself"
    assert "GPU's, or the CPU's" in held_words(["host-busy"], "rests", ["gpu", "cpu"])


def test_a_missing_reproduce_row_has_no_noise_figure():
    """A test of the original run that the reproduction did not measure showed `missing` beside a
    noise of ±5.0% (the threshold), a band around nothing. It shows no noise, in the table and json."""
    from toolkit.publish import reproduce as repro

    recorded, again = bench_records("run-a"), bench_records("run-b")
    rows = repro.compare_records(recorded, again[1:], 5.0)
    (missing,) = [r for r in rows if r.reproduced is None]
    assert missing.noise is None and missing.delta is None and missing.status == "missing"
    rep = repro.Reproduction("run-a", "run-b", Path("/f"), Path("/r"), 5.0, rows=rows)
    (line,) = [
        x
        for x in repro_output.format_reproduction(rep).splitlines()
        if x.startswith("| cpu ") and "missing" in x
    ]
    cells = [x.strip() for x in line.strip("|").split("|")]  # image, test, recorded, reproduced, delta, noise
    assert cells[3:6] == ["missing", "", ""], line
    assert [r["noise"] for r in repro_output.reproduction_json(rep)["rows"] if r["status"] == "missing"] == [
        None
    ]
    assert all(r.noise is not None for r in rows if r.reproduced is not None)


def test_the_environment_block_of_help_wraps_to_the_terminal():
    """`toolkit --help` printed its Environment block as one preformatted (\\b) block: 100-column lines
    on a 60-column terminal. It is a definition list Click wraps as it wraps Options."""
    for width in (60, 100):
        res = CliRunner().invoke(cli, ["--help"], terminal_width=width)
        assert res.exit_code == 0, res.output
        env = res.output.split("\nEnvironment:\n", 1)[1].split("\nOptions:", 1)[0]
        assert "TOOLKIT_ALLOW_CONCURRENT" in env and "TOOLKIT_HOST_KEY" in env
        assert all(len(x) <= width for x in env.splitlines()), env
    narrow = CliRunner().invoke(cli, ["--help"], terminal_width=60).output
    assert "  DOCKER_HOST               the Docker engine to use\n" in narrow


def _exported_files(folder: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(folder.rglob("*")) if p.is_file())


def test_a_published_run_names_no_folder_of_the_users_home(tmp_path, monkeypatch, matrix_data):
    """export-run wrote the model's path on the measuring host (`/home/alice/proj/models/x.gguf`), the
    bind mount's source and the log file into results.jsonl and run.json: a published run told the
    world the user's home folder. Paths are written relative to the project (or `~`); reproduce
    still finds the model (file name, matrix path, sha256), and its own export of a run id keeps them."""
    from toolkit.matrix.loading import load_matrix
    from toolkit.publish import reproduce as repro
    from toolkit.publish import run_folder, run_read

    home, proj = home_project(tmp_path, monkeypatch, matrix_data)
    store = ResultStore(proj / "results")
    for r in bench_records("run-h", model_path=str(proj / "models" / "tiny-qwen3moe.gguf")):
        r.log_file = str(proj / "results" / "logs" / "run-h-tiny-qwen3moe.log")
        r.command = [x.replace("/p/models", str(proj / "models")) for x in r.command]
        r.model.name = "tiny-qwen3moe"
        store.add_result(r)
    for r in bench_records("run-x", model_path=str(home / "elsewhere" / "tiny-qwen3moe.gguf")):
        store.add_result(r)
    lm = load_matrix(proj / "matrix.yaml")
    out = tmp_path / "published"
    run = run_folder.export_run(store, "run-h", out, lm)
    text = _exported_files(out)
    assert str(home) not in text and "/alice" not in text, [x for x in text.splitlines() if "alice" in x][:3]
    rec = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert (
        rec["model"]["path"] == "models/tiny-qwen3moe.gguf"
        and rec["log_file"] == "results/logs/run-h-tiny-qwen3moe.log"
    )
    assert "type=bind,source=models,target=/models,readonly" in rec["command"]
    assert run.models[0].recorded_path is None and run.models[0].matrix_path
    ran, recs, _ = run_read.load_run(out)  # the folder reads back, its tests the records' own
    assert len(recs) == 6 and recs[0].model.sha256 == "cd" * 32
    models = tmp_path / "mine"
    models.mkdir()
    (models / "tiny-qwen3moe.gguf").write_bytes(b"x")
    cands = repro._model_candidates(ran.models[0], out, models, None)
    assert cands[0] == models / "tiny-qwen3moe.gguf"
    other = run_folder.export_run(store, "run-x", tmp_path / "other", None)
    assert json.loads((tmp_path / "other" / "results.jsonl").read_text().splitlines()[0])["model"][
        "path"
    ] == ("~/elsewhere/tiny-qwen3moe.gguf")
    assert str(home) not in _exported_files(tmp_path / "other") and other.models[0].recorded_path is None
    own = run_folder.export_run(store, "run-h", tmp_path / "own", lm, host_paths=True)  # reproduce RUN_ID's
    assert own.models[0].recorded_path == str(proj / "models" / "tiny-qwen3moe.gguf")


def _podman_log_and_dockerfile() -> tuple[list[str], str]:
    """The real `podman build` log of the CPU image (Podman 4.3.1) and the Dockerfile it built, read
    back from its STEP lines: the instructions up to the runtime stage's CMD (the 13 LABEL steps
    after it are buildah's, one per --label the toolkit passes)."""
    lines = (DATA / "podman-build-4.3.1.log").read_text().splitlines()
    steps = [m for x in lines if (m := re.match(r"^\[(\d)/2\] STEP (\d+)/\d+: (.*)$", x))]
    dockerfile = [m.group(3) for m in steps if not (m.group(1) == "2" and int(m.group(2)) > 10)]
    return lines, "\n".join(dockerfile)


def test_podman_step_totals_count_only_the_steps_shown():
    """Podman's build progress read `[stage-2 9/23] WORKDIR /home/bench` as its last step: 23 counts the
    config-only steps (ENV, USER, CMD, a LABEL per --label) it leaves out, as BuildKit does. With
    the Dockerfile read, each stage counts the steps shown: the last is `[stage-2 6/6]`."""
    from toolkit.engine import images

    lines, dockerfile = _podman_log_and_dockerfile()
    totals = images.dockerfile_steps(dockerfile)
    assert totals == [5, 6]
    reader = images.PodmanSteps(totals)
    shown = [t for x in lines for t in reader(x) if re.match(r"#\d+ \[", t)]
    assert [re.search(r"\[(\S+ \d+/\d+)\]", x).group(1) for x in shown] == [
        *(f"stage-1 {i}/5" for i in range(1, 6)),
        *(f"stage-2 {i}/6" for i in range(1, 7)),
    ]
    assert shown[-1] == "#11 [stage-2 6/6] WORKDIR /home/bench"
    continued = "# syntax=docker/dockerfile:1\nARG X=1\nFROM a AS b\nRUN x \\\n  # a comment\n  && y\nENV Z=1\nCOPY . /\n"
    assert images.dockerfile_steps(continued) == [3]


def test_podman_build_reads_the_context_dockerfile(tmp_path):
    """run_buildx's reader of a `podman build CONTEXT` command takes its totals from CONTEXT/Dockerfile;
    without one it keeps buildah's numbers."""
    from toolkit.engine import images

    _, dockerfile = _podman_log_and_dockerfile()
    (tmp_path / "Dockerfile").write_text(dockerfile)
    assert images._podman_steps(["podman", "build", str(tmp_path)]).totals == [5, 6]
    assert images._podman_steps(["podman", "build", str(tmp_path / "none")]).totals is None
