"""nc38 (a newcomer on a fresh Debian 12 stand-in, rootless Podman 4.3.1, as the customer of an export):
`toolkit reproduce . --rebuild` printed no line saying which image it rebuilt or how long that takes,
then 13 minutes of `rebuild | [stage-1 4/5] RUN ...` and `rebuild | still compiling 45%, 6 min`: every
line named `rebuild`, never the image (a run of several images could not be told apart), where `toolkit
build` announces `==> cpu: building (...; previous build 808.7 s ...)` and names each line `cpu |`.
Now each rebuilt image is announced by name with the run's own full build time (its builds.jsonl, in
the work store) and its progress lines carry its name and that estimate."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from toolkit.results.records import BuildRecord, ResultStore

ROOT = Path(__file__).resolve().parent.parent

# the build record the stand-in's `toolkit --engine podman build` wrote (results/builds.jsonl), in part
STAND_IN_BUILD = {
    "image": "cpu",
    "ref": "toolkit/cpu:0c1e57098-cb409ccc",
    "digest": "sha256:04d532f7f55de2324e26873e3279a5c8aa93a2064f70cff6007062b0b58d8951",
    "backend": "cpu",
    "template": "llama-cpu.Dockerfile.j2",
    "template_hash": "4fae2c6a9b368d9dcb61430a75ce959333e1e762bdebdb22c08ac76d0a9c1821",
    "source_commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
    "size_bytes": 229086820,
    "build_seconds": 808.72,
    "created": "2026-12-06T03:20:51+00:00",
    "steps": 9,
    "cached_steps": 0,
}


def test_the_rebuild_printer_announces_the_image_by_name_with_the_runs_build_time(tmp_path, capsys):
    """The CLI's printer, on a real results store holding the run's build record: the announcement
    names the image and the run's 808.7 s; the progress lines are the image's (`cpu | ...`), and the
    heartbeat carries the estimate."""
    from toolkit.cli.publish import _rebuild_steps

    store = ResultStore(tmp_path / "results")
    store.add_build(BuildRecord(**STAND_IN_BUILD))
    steps_for = _rebuild_steps(False)
    assert steps_for is not None
    steps = steps_for("cpu", store)
    err = capsys.readouterr().err
    assert err == (
        "==> cpu: rebuilding from the run's matrix.yaml + Dockerfile.templates/ from scratch (a stranger's "
        "build runs on a network and cache of its own, so no step of this host's own builds is reused, not "
        "even of this image built minutes ago: docs/publish.md); the run's build of every step took 808.7 s "
        "there\n"
    ), err  # why it rebuilds from scratch, said before the long build (fix49a: nc48b S11)
    assert steps.name == "cpu" and steps.estimate == " (last full build 13 min)"
    for line in ("#7 [stage-1 4/5] RUN cmake --build /build", "#7 0.512 [ 45%] Building CXX object"):
        steps(line)  # BuildKit's plain progress, as the engine hands it on (Podman's translated to it)
    assert capsys.readouterr().err.splitlines() == ["   cpu | [stage-1 4/5] RUN cmake --build /build"]
    steps.close()
    assert _rebuild_steps(True) is None  # --json: nothing on stderr but errors


def test_a_run_without_a_full_build_record_is_announced_without_a_time(tmp_path, capsys):
    """An export whose build record built from cache (or predates step counts) gives no estimate: the
    announcement names the image and claims no time of the run's, only what a full compile takes."""
    from toolkit.cli.publish import _rebuild_steps

    store = ResultStore(tmp_path / "results")
    store.add_build(BuildRecord(**{**STAND_IN_BUILD, "cached_steps": 9, "build_seconds": 14.4}))
    steps_for = _rebuild_steps(False)
    assert steps_for is not None
    steps = steps_for("cpu", store)
    err = capsys.readouterr().err
    assert err.startswith(
        "==> cpu: rebuilding from the run's matrix.yaml + Dockerfile.templates/ from scratch"
    )
    assert err.endswith("; a full compile takes minutes (the CPU image's: 3-8 on 2 idle cores)\n"), err
    assert steps.estimate == ""


def test_rebuild_image_asks_for_the_printer_of_its_own_image(tmp_path, monkeypatch):
    """reproduce.rebuild_image hands the build the printer made for `im.name` from the store it builds
    in. The build itself is replaced by its result (a cold CPU compile, ~10 min of this host's 2 shared
    cores, is what cannot be afforded here; the real one ran on the stand-in)."""
    from toolkit.images import build as build_mod
    from toolkit.publish import reproduce
    from toolkit.publish.run_folder import PublishedImage

    for name in ("matrix.yaml", "Dockerfile.templates"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    store = ResultStore(tmp_path / "results")
    asked: list[tuple[str, ResultStore]] = []

    def printer(line: str) -> None:
        pass

    def steps_for(name: str, st: ResultStore):
        asked.append((name, st))
        return printer

    seen: dict = {}

    def build(lm, spec, st, *, on_line=None, stranger=False):
        seen.update(on_line=on_line, stranger=stranger, image=spec.name)
        return build_mod.BuildResult(spec.name, "failed", "stopped here")

    monkeypatch.setattr(build_mod, "build_image", build)
    im = PublishedImage(name="cpu", backend="cpu", digest="sha256:" + "0" * 64)
    try:
        reproduce.rebuild_image(im, tmp_path, store, steps_for=steps_for, confined=False)
    except Exception as err:  # BuildFailed: the replaced build's result
        assert "rebuild of cpu failed: stopped here" in str(err), str(err)
    assert asked == [("cpu", store)]
    assert seen == {"on_line": printer, "stranger": True, "image": "cpu"}


@pytest.mark.e2e  # the real engine's doctor: without one its next step is to mend the engine
def test_doctor_in_an_export_of_a_never_pushed_image_says_rebuild(tmp_path: Path) -> None:
    """The stand-in's export (its cpu image never pushed: Podman names it only `localhost/...`, no
    registry) had the README say `toolkit reproduce . --rebuild`, while `toolkit doctor` in the folder
    said `toolkit reproduce .` re-runs it, which stops at "was never pushed ... reproduce with
    --rebuild". Now doctor says `--rebuild` where the README does (run_folder.needs_rebuild), and the
    plain command where every image has a registry digest another host can pull or is in this engine
    already (the exporting host's own user, whose plain `toolkit reproduce .` ran the image it held)."""
    import json

    from tests.support.project import ROOT as PROJECT
    from tests.support.runs import bench_records, tk
    from toolkit.matrix.api import load_matrix
    from toolkit.publish.run_folder import export_run

    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-n"):
        store.add_result(r)
    out = tmp_path / "published"
    export_run(store, "run-n", out, load_matrix(PROJECT / "matrix.yaml"))
    readme = (out / "README.md").read_text()
    assert "toolkit reproduce . --rebuild" in readme, readme
    res = tk(out, "doctor")
    assert res.returncode in (0, 12), res.stderr  # 12: a check of this host failed (said, not ours)
    last = res.stdout.strip().splitlines()[-1]
    assert "`toolkit reproduce . --rebuild` builds its images (none can be pulled by digest)" in last, last

    run = json.loads((out / "run.json").read_text())  # as `toolkit push` then export would name it
    for im in run["images"]:
        im["repo_digests"] = [f"registry.example.com/r9700/{im['name']}@sha256:" + "1" * 64]
    (out / "run.json").write_text(json.dumps(run))
    last = tk(out, "doctor").stdout.strip().splitlines()[-1]
    assert "`toolkit reproduce .` re-runs it here" in last and "--rebuild" not in last, last

    # the exporting host's own user (the stand-in's customer): the image is in this engine, so a plain
    # `toolkit reproduce .` runs it (it did there: "present in the engine; image ID matches the record")
    from toolkit.engine import api as engine

    here = engine.inspect_image("debian:trixie-slim")  # an image this machine keeps (setup-host.sh)
    assert here is not None
    for im in run["images"]:
        im["repo_digests"], im["digest"] = [], here.id
    (out / "run.json").write_text(json.dumps(run))
    last = tk(out, "doctor").stdout.strip().splitlines()[-1]
    assert "`toolkit reproduce .` re-runs it here" in last and "--rebuild" not in last, last

    (out / "run.json").write_text("{not json")  # an unreadable run.json: doctor still answers, plain
    last = tk(out, "doctor").stdout.strip().splitlines()[-1]
    assert "`toolkit reproduce .` re-runs it here" in last, last


def test_one_rule_decides_a_rebuild_for_the_readme_and_for_doctor() -> None:
    """tidy41 (issue 30): doctor kept its own copy of run_folder.needs_rebuild's rule with "this engine
    holds it" added (cli/host.py _rebuild_needed). Now needs_rebuild takes `held`, what doctor asks of
    its engine (the e2e test above asks a real one), and the README passes none: an image no registry
    serves needs --rebuild unless held; an import (no image) never does; a pullable one never does."""
    from toolkit.publish.run_folder import PublishedImage, PublishedRun, needs_rebuild

    local, pulled = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    images = [
        PublishedImage(name="cpu", backend="cpu", digest=local),  # never pushed
        PublishedImage(name="imp", backend="cpu", digest="import:" + "3" * 64),
        PublishedImage(
            name="vulkan", backend="vulkan", digest=pulled, repo_digests=[f"registry.example.com/v@{pulled}"]
        ),
    ]
    run = PublishedRun(run_id="run-n", created="", exported="", images=images, models=[], bench={})
    assert needs_rebuild(run)  # the README's question: no engine asked
    assert needs_rebuild(run, held=lambda d: d == pulled)
    assert not needs_rebuild(run, held=lambda d: d == local)  # doctor's: this engine holds it
    assert not needs_rebuild(run.model_copy(update={"images": images[1:]}))


def test_an_interrupted_reproduction_never_says_bench_resume(tmp_path, monkeypatch):
    """The stand-in's customer stopped `toolkit reproduce . --rebuild` (Ctrl-C, here SIGINT by `timeout`)
    during its bench: `error: interrupted: ...; 7 record(s) of this run are saved in .../reproduce/
    results/.../bench.jsonl; toolkit bench --resume continues where this run stopped` - reproduce has
    no --resume, and `toolkit bench` in the published folder would bench it as a project. Now the
    hint is the same reproduce again. The bench is replaced by the interruption it raised there (a
    Ctrl-C mid-run is what a test here cannot time; the real one ran on the stand-in)."""
    from toolkit.bench import run as bench_run
    from toolkit.core.errors import RunInterrupted
    from toolkit.publish import reproduce

    saved = f"7 record(s) of this run are saved in {tmp_path}/reproduce/results/eb19c892d830/bench.jsonl"

    def interrupted(lm, images, models, store, opts, *a, **k):  # as bench's own Ctrl-C says it
        raise bench_run._interrupted(opts, SimpleNamespace(summary=lambda: saved), [])

    monkeypatch.setattr(bench_run, "run_bench", interrupted)
    monkeypatch.setattr(bench_run.engine, "remove_orphans", lambda **k: None)  # no engine in this test
    rep = reproduce.Reproduction("20261206T032051Z-1ff83d", "", tmp_path, tmp_path / "results", 5.0)
    try:
        matrix = SimpleNamespace(m=SimpleNamespace(images=[], models=[]))  # read by the replaced bench only
        store = ResultStore(tmp_path / "results")
        reproduce._rerun(rep, matrix, store, None, [], events=print, allow_concurrent=False)  # type: ignore[arg-type]
    except RunInterrupted as err:
        msg = str(err)
        assert err.exit_code == 130
        assert "bench --resume" not in msg and "7 record(s) of this run are saved in" in msg, msg
        assert msg.endswith(
            "the same `toolkit reproduce` again re-runs every case (a reproduction has no "
            "--resume; its records so far stay apart, superseded by the new run's)"
        ), msg
    else:
        raise AssertionError("the interruption was swallowed")
