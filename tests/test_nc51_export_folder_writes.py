"""A newcomer in a folder `toolkit export-run` wrote (nc51 S1): `toolkit bench` there said `cpu: skipped:
not built; run toolkit build -i cpu`, and that build (like `toolkit render`, `tune`, `import`, `measure`)
built the stranger's templates with the host's network under this host's toolkit/<name>:latest tags and
wrote images/, results/ and .toolkit/ into the published folder. Every command that builds or measures
from a matrix, or writes results/ beside it by default, now refuses such a folder (exit 4) before it
writes anything, naming `toolkit reproduce .` (results.refuse_export), in the folder and from above it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.exported import exported_folder, pasted_commands
from tests.support.runs import tk

WRITERS = (
    ("build", "-i", "cpu", "--dry-run"),
    ("bench", "-i", "cpu", "--dry-run"),
    ("render", "-i", "cpu"),
    ("tune", "-i", "cpu", "--axis", "prefill", "--budget", "1s"),
    ("push", "-i", "cpu", "--dry-run", "--registry", "localhost:5000/me"),
    ("campaign", "submit", "--dry-run"),
    ("import", "--label", "mine", "rows.jsonl"),
    ("measure", "--", "true"),
)


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_no_command_builds_measures_or_writes_in_an_export_folder(tmp_path: Path, matrix_data: dict) -> None:
    out = exported_folder(tmp_path, matrix_data, reproduced=False)
    (tmp_path / "rows.jsonl").write_text((out / "results.jsonl").read_text())
    before = _tree(out)
    for cwd in (out, out.parent):
        there = [] if cwd == out else ["--matrix", "r1/matrix.yaml"]
        for args in WRITERS:
            words = list(args)
            if args[0] == "import":
                words[-1] = str(tmp_path / "rows.jsonl")
            at = 2 if args[0] == "campaign" else 1
            got = tk(cwd, *words[:at], *there, *words[at:])
            assert got.returncode == 4, (cwd, args, got.stdout, got.stderr)
            assert "is a run `toolkit export-run` wrote" in got.stderr, got.stderr
            reproduce = [c for c in pasted_commands(got.stderr) if c[0] == "reproduce"]
            assert reproduce == [["reproduce", "." if cwd == out else "r1"]], got.stderr
            assert _tree(out) == before, (args, _tree(out) - before)  # nothing written into the folder


def test_reading_commands_and_reproduce_still_read_the_folder(tmp_path: Path, matrix_data: dict) -> None:
    """The refusal is of writers only: report --results ., doctor and fetch-model (its models go where
    run.json names them, inside the folder) read or fill the folder as before."""
    out = exported_folder(tmp_path, matrix_data, reproduced=False)
    assert tk(out, "report", "--results", ".").returncode == 0
    doctor = tk(out, "doctor")  # the fast level has no engine: doctor's own verdict may be "mend docker"
    assert doctor.returncode != 4 and "export-run` wrote" not in doctor.stderr, doctor.stderr
    assert tk(out, "fetch-model", "tiny-qwen3moe", "--dry-run").returncode == 0


def test_no_results_folder_inside_an_export_folder_is_written_and_a_hint_says_results_once(
    tmp_path: Path, matrix_data: dict
) -> None:
    """nc51b S1: `toolkit import --results results FILE` in the folder (or any writer's --results naming a
    folder inside it, from a project of one's own) wrote results/ into the published run, where `--results .`
    was refused; and the refusal's hint repeated a --results given (`toolkit report --results /tmp/r1
    --results .`). Each writer now refuses a results folder anywhere inside an export, and a hint says
    --results once. (Its reproduce/ is this host's own runs of it, where `toolkit reproduce` measures: not refused.)"""
    out = exported_folder(tmp_path, matrix_data, reproduced=False)
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r["raw"]) + "\n" for r in recs))  # llama-bench's
    before = _tree(out)
    project = tmp_path / "project"
    for cwd, inside in ((out, "results"), (project, "../got/r1/mine/results")):
        for args in (w for w in WRITERS if w[0] not in ("render", "push")):
            words = [str(tmp_path / "rows.jsonl") if w == "rows.jsonl" else w for w in args]
            at = 2 if args[0] == "campaign" else 1
            got = tk(cwd, *words[:at], "--results", inside, *words[at:])
            assert got.returncode == 4, (cwd, args, got.stdout, got.stderr)
            assert "export-run` wrote" in got.stderr and _tree(out) == before, (args, got.stderr)
    got = tk(out, "bench", "--results", str(tmp_path / "mine"), "-i", "cpu", "--dry-run")
    report = [c for c in pasted_commands(got.stderr) if c[0] == "report"]
    assert got.returncode == 4 and report == [["report", "--results", "."]], got.stderr
