"""The image `toolkit bench` measures is the image the current inputs render to (issue 10, item 3).

Unit level: the render-inputs key (build.inputs_key) changes with the template, the image's vars and
the source commit, not with comments or other entries of matrix.yaml; `toolkit build` stamps that
same key; bench selects builds by it (choose_build) and refuses a stale one with exit 4 and the fix.
The build records in the selection tests are written by the test (they are the toolkit's own data
format; building real images for every branch would take minutes each). End to end (marked e2e, real
engine, CPU image): a template edit makes `toolkit bench` refuse; after `toolkit build` (served from
the BuildKit cache) it measures the new digest.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from tests.support.e2e_helpers import engine_or_skip, make_project, run_cli
from tests.support.project import mutate, write_matrix
from toolkit.bench.build_choice import choose_build
from toolkit.bench.runners.base import BenchOptions
from toolkit.core.errors import BadInput
from toolkit.images import build as build_mod
from toolkit.matrix.api import load_matrix
from toolkit.results.records import BuildRecord, ResultStore

TEMPLATE = "llama-cpu.Dockerfile.j2"


def key_of(project: Path, image: str = "cpu") -> build_mod.InputsKey:
    lm = load_matrix(project / "matrix.yaml")
    return build_mod.inputs_key(lm, lm.m.image(image))


# ------------------------------------------------------------------------------------------ the key


def test_key_is_stable_and_is_what_build_stamps(project):
    first, second = key_of(project), key_of(project)
    assert first == second and len(first.key) == 64
    lm = load_matrix(project / "matrix.yaml")
    res = build_mod.build_image(lm, lm.m.image("cpu"), ResultStore(project / "results"), dry_run=True)
    assert f"org.toolkit.inputs-key={first.key}" in res.command  # the label build puts on the image
    assert any(t.endswith(f"-{first.key[:8]}") for t in res.command)  # and the inputs tag


def test_template_edit_changes_key(project):
    before = key_of(project)
    tpl = project / "Dockerfile.templates" / TEMPLATE
    tpl.write_text(tpl.read_text() + "# a comment in the template is still a template edit\n")
    after = key_of(project)
    assert after.key != before.key and after.template_hash != before.template_hash


def test_vars_edit_changes_key(project, matrix_data):
    before = key_of(project)
    d = copy.deepcopy(matrix_data)
    d["images"][0]["vars"]["cmake_args"] = ["-DGGML_AVX2=ON"]
    write_matrix(project, d)
    assert key_of(project).key != before.key


def test_source_commit_change_changes_key(project, matrix_data):
    before = key_of(project)
    other = "1" * 40
    d = mutate(matrix_data, ["sources", "llama.cpp", "commit"], other)
    d["sources"]["llama.cpp"]["ref"] = other
    d["sources"]["llama.cpp"]["fallback"]["commit"] = other
    write_matrix(project, d)
    after = key_of(project)
    assert after.key != before.key
    assert after.template_hash == before.template_hash  # the template did not change: the source did
    assert after.source["commit"] == other


def test_comment_and_other_entries_do_not_change_key(project, matrix_data):
    before = key_of(project)
    text = (project / "matrix.yaml").read_text()
    (project / "matrix.yaml").write_text(
        "# a new comment at the top\n"
        + text.replace("\nmodels:\n", "\n# a comment before the models\nmodels:\n")
        + "\n# trailing comment\n"
    )
    assert key_of(project) == before
    d = copy.deepcopy(matrix_data)  # another image's vars, the bench axes, the vLLM source
    d["images"][1]["vars"]["cmake_args"] = ["-DGGML_VULKAN_CHECK_RESULTS=OFF"]
    d["bench"]["n_prompt"] = [128]
    d["sources"]["vllm"]["ref"] = "v0.17.0"
    write_matrix(project, d)
    assert key_of(project) == before
    assert key_of(project, "vulkan").key != before.key


def test_local_path_source_keyed_by_content(project, matrix_data):
    tree = project / "mysrc"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.c").write_text("int a;\n")
    (tree / "sub" / "b.h").write_text("#define B 1\n")
    (tree / "build").mkdir()  # build/ and .git/ are never copied into a build context: not part of the key
    d = copy.deepcopy(matrix_data)
    d["sources"]["local"] = {"path": "mysrc", "commit": "local-1"}
    d["images"][0]["source"] = "local"
    write_matrix(project, d)
    k1 = key_of(project)
    (tree / "build" / "CMakeCache.txt").write_text("x")
    os.utime(tree / "a.c", ns=(1, 1))  # a touch is not a change
    assert key_of(project) == k1
    (tree / "sub" / "b.h").write_text("#define B 2\n")
    assert key_of(project).key != k1.key
    (tree / "sub" / "b.h").write_text("#define B 1\n")
    assert key_of(project) == k1
    (tree / "a.c").chmod(0o755)  # the executable bit lands in the image
    assert key_of(project).key != k1.key


def test_missing_local_source_is_bad_input_naming_field(project, matrix_data):
    d = copy.deepcopy(matrix_data)
    d["sources"]["local"] = {"path": "nowhere", "commit": "x"}
    d["images"][0]["source"] = "local"
    write_matrix(project, d)
    with pytest.raises(BadInput, match=r"sources\.local\.path: .*nowhere is not a directory; fix `path`"):
        key_of(project)


# ----------------------------------------------------------------------------------- the selection


def add_build(
    store: ResultStore, key: str | None, digest: str, template_hash: str = "t" * 64, engine: str | None = None
) -> BuildRecord:
    labels = {build_mod.INPUTS_KEY_LABEL: key} if key else {}
    rec = BuildRecord(
        engine=engine,
        image="cpu",
        ref=f"toolkit/cpu:x-{(key or 'none')[:8]}",
        digest=digest,
        backend="cpu",
        template=TEMPLATE,
        template_hash=template_hash,
        labels=labels,
        created="2026-01-01T00:00:00Z",
    )
    store.add_build(rec)
    return rec


def choose(project: Path, **opts):
    lm = load_matrix(project / "matrix.yaml")
    return choose_build(lm, lm.m.image("cpu"), ResultStore(project / "results"), BenchOptions(**opts))


def test_selects_build_of_current_key(project):
    store = ResultStore(project / "results")
    cur = key_of(project)
    add_build(store, cur.key, "sha256:" + "a" * 64)
    c = choose(project)
    assert c.status == "current" and c.build.digest == "sha256:" + "a" * 64 and c.reason == ""


def test_newest_build_stale_is_refused_with_fix(project, monkeypatch):
    monkeypatch.chdir(project)  # the project's own matrix.yaml: the fix needs no --matrix
    store = ResultStore(project / "results")
    cur = key_of(project)
    add_build(store, cur.key, "sha256:" + "a" * 64, template_hash=cur.template_hash)
    tpl = project / "Dockerfile.templates" / TEMPLATE
    tpl.write_text(tpl.read_text() + "# edited\n")
    c = choose(project)
    assert c.status == "stale" and c.build is None
    assert "run `toolkit build -i cpu`" in c.reason and "--allow-stale" in c.reason
    assert TEMPLATE in c.reason  # says what changed


def test_allow_stale_measures_newest_and_marks_it(project):
    store = ResultStore(project / "results")
    add_build(store, "0" * 64, "sha256:" + "b" * 64)
    c = choose(project, allow_stale=True)
    assert c.status == "stale-allowed" and c.build.digest == "sha256:" + "b" * 64
    assert c.build.model_extra["bench_inputs"] == {"current": key_of(project).key, "stale": True}
    assert "STALE" in c.reason


@pytest.mark.e2e  # asks the real engine for its ID
def test_a_build_on_another_engine_is_not_measured_here(project):
    """Docker and Podman (or two dockerds) keep separate image stores: a build recorded by one is not
    an image of the other. Found by the newcomer trial: after `toolkit --engine podman build`, a Docker
    bench picked the Podman image ID and skipped with "no longer in the engine". The engine here is
    the real one the tests run on; the other engine's ID is made up (rootless Podman of uid 4242)."""
    from toolkit.engine import api as engine

    store = ResultStore(project / "results")
    cur = key_of(project)
    add_build(store, cur.key, "sha256:" + "a" * 64, engine=engine.engine_id())
    add_build(store, cur.key, "sha256:" + "b" * 64, engine="podmanu4242")
    c = choose(project)
    assert c.status == "current" and c.build.digest == "sha256:" + "a" * 64  # not the newer, other-engine one
    only_other = project / "other"
    only_other.mkdir()
    store2 = ResultStore(only_other)
    add_build(store2, cur.key, "sha256:" + "b" * 64, engine="podmanu4242")
    lm = load_matrix(project / "matrix.yaml")
    c2 = choose_build(lm, lm.m.image("cpu"), store2, BenchOptions())
    assert c2.status == "unbuilt" and "not built on this engine" in c2.reason and "podmanu4242" in c2.reason
    assert f"--results {only_other} -i cpu`" in c2.reason
    assert "podmanu4242 (the rootless Podman of uid 4242: run as uid 4242, without sudo" in c2.reason
    add_build(store2, cur.key, "sha256:" + "c" * 64)  # a record from before builds named their engine
    assert choose_build(lm, lm.m.image("cpu"), store2, BenchOptions()).build.digest == "sha256:" + "c" * 64


def test_build_without_key_label_is_stale(project):
    add_build(ResultStore(project / "results"), None, "sha256:" + "c" * 64)
    c = choose(project)
    assert c.status == "stale" and "no inputs key" in c.reason


def test_older_build_of_current_inputs_is_measured_with_note(project):
    """Edit, build, revert: the current inputs render to the older image, which is still labelled."""
    store = ResultStore(project / "results")
    add_build(store, key_of(project).key, "sha256:" + "a" * 64)
    add_build(store, "1" * 64, "sha256:" + "b" * 64)
    c = choose(project)
    assert c.status == "current" and c.build.digest == "sha256:" + "a" * 64
    assert "newest build" in c.reason and "other inputs" in c.reason


def test_pinned_digest_is_measured_as_is(project):
    """reproduce pins the recorded image ID: no key check (its work matrix has no templates/vars)."""
    store = ResultStore(project / "results")
    add_build(store, "1" * 64, "sha256:" + "d" * 64)
    add_build(store, key_of(project).key, "sha256:" + "e" * 64)
    c = choose(project, pinned={"cpu": "sha256:" + "d" * 64})
    assert c.status == "pinned" and c.build.digest == "sha256:" + "d" * 64
    assert choose(project, pinned={"cpu": "sha256:" + "f" * 64}).status == "failed"


def test_unbuilt_says_how_to_build(project, monkeypatch):
    monkeypatch.chdir(project)
    c = choose(project)
    assert c.status == "unbuilt" and "toolkit build -i cpu" in c.reason


def test_unbuilt_in_another_results_folder_names_the_build_recorded_in_results(
    project, tmp_path, monkeypatch
):
    """`bench --results DIR` after `build` (recorded in results/): the reason names DIR, the build
    recorded in results/, and the fix `toolkit build --results DIR -i cpu`."""
    add_build(ResultStore(project / "results"), key_of(project).key, "sha256:" + "a" * 64)
    lm = load_matrix(project / "matrix.yaml")
    other = ResultStore(tmp_path / "elsewhere")
    c = choose_build(lm, lm.m.image("cpu"), other, BenchOptions())
    assert c.status == "unbuilt"
    assert f"no build of cpu is recorded in {other.builds_file}" in c.reason
    assert f"a build is recorded in {project / 'results' / 'builds.jsonl'}" in c.reason
    assert f"toolkit build --matrix {project / 'matrix.yaml'} --results {other.root} -i cpu" in c.reason
    monkeypatch.chdir(project)  # from the project folder, its matrix.yaml needs no --matrix
    c = choose_build(lm, lm.m.image("cpu"), other, BenchOptions())
    assert f"toolkit build --results {other.root} -i cpu" in c.reason
    assert not (project / "elsewhere").exists()


def test_doctor_names_the_build_first_where_the_measured_images_build_is_stale(project):
    """nc51 S4: after a `cmake_args` change (here a template edit), doctor still ended `toolkit bench -i cpu measures again`:
    pasted, bench exits 4 (stale build). An image whose newest build is stale is not `measured` for the
    next step (cli.host._measured): it names `toolkit build` first; a current build keeps `report`."""
    from tests.support.records import make_record
    from toolkit.cli.host import _measured
    from toolkit.host.doctor import DoctorReport, ImageVerdict, format_doctor

    store, lm = ResultStore(project / "results"), load_matrix(project / "matrix.yaml")
    rep = DoctorReport({}, [], [ImageVerdict("cpu", "cpu", "llama-bench", True, "no devices needed")])
    add_build(store, key_of(project).key, "sha256:" + "b" * 64)
    store.add_result(make_record("cpu", "cpu", p=512, avg=100.0, digest="sha256:" + "b" * 64))
    assert (
        format_doctor(rep, None, _measured(store, rep, lm))
        .splitlines()[-1]
        .startswith("next: `toolkit report` shows what cpu measured here")
    )
    tpl = project / "Dockerfile.templates" / TEMPLATE
    tpl.write_text(tpl.read_text() + "# edited\n")  # every build is of other inputs now
    lm = load_matrix(project / "matrix.yaml")
    assert format_doctor(rep, None, _measured(store, rep, lm)).splitlines()[-1] == (
        "next: `toolkit build && toolkit bench` measures cpu here"
    )


def test_cli_dry_run_shows_same_decision(project):
    """`bench --dry-run` refuses a stale image (exit 4, the fix) and, with --allow-stale, prints the
    `docker run` of the stale build's digest with a note. The dry run starts no container."""
    store = ResultStore(project / "results")
    add_build(store, "0" * 64, "sha256:" + "b" * 64)
    res, code = run_cli(project, "bench", "-i", "cpu", "--dry-run", expect=4)
    assert "cpu: stale: the newest build of cpu" in res.output  # the word once (nc51 S4)
    assert f"toolkit build --matrix {project / 'matrix.yaml'} -i cpu`" in str(res.exception)
    res, _ = run_cli(project, "bench", "-i", "cpu", "--dry-run", "--allow-stale")
    assert "cpu: note: STALE build measured (--allow-stale)" in res.output
    assert "docker run" in res.output and "sha256:" + "b" * 64 in res.output


def test_report_shows_stale_records():
    """A record measured with --allow-stale (real CPU llama-bench records, marked as bench marks them)
    carries the flag in the report's flags column and its legend; unmarked records do not."""
    from toolkit.analysis import report
    from toolkit.bench.runners.base import stale_marks
    from toolkit.results.records import BenchRecord

    lines = (Path(__file__).parent / "data" / "results-cpu-a.jsonl").read_text().splitlines()
    plain = [BenchRecord.model_validate_json(x) for x in lines]
    assert "stale-build" not in report.render(plain, "github")
    chosen = BuildRecord(
        image="cpu",
        ref="r",
        digest=plain[0].image.digest,
        backend="cpu",
        template=TEMPLATE,
        template_hash="",
        created="x",
        bench_inputs={"current": "0" * 64, "stale": True},
    )

    def as_bench_marks(r: BenchRecord) -> BenchRecord:  # stale_marks' flag beside image_ref's stale image
        d = r.model_dump(mode="json")
        d["image"] = {**d["image"], "stale": True, "current_inputs_key": "0" * 64}
        return BenchRecord.model_validate({**d, **stale_marks(chosen)})

    marked = [as_bench_marks(r) for r in plain]
    text = report.render(marked, "github")
    rows = [ln for ln in text.splitlines() if ln.startswith("| pp") or ln.startswith("| tg")]
    assert rows and all("stale-build" in ln for ln in rows)  # decode's two ub rows agree: one row
    csv = report.render(marked, "csv").splitlines()[1:]  # every record, one line each
    assert len(csv) == len(plain) and all("stale-build" in ln for ln in csv)
    assert "- stale-build: measured with --allow-stale" in text  # the legend says what it means


# -------------------------------------------------------------------------------------- end to end

AXES = {
    "n_prompt": [32],
    "n_gen": [8],
    "n_ubatch": [32],
    "n_batch": [32],
    "repetitions": 1,
    "n_gpu_layers": [0],
}


def bench_lines(project: Path, digest: str) -> list[dict]:
    path = project / "results" / digest.split(":")[1][:12] / "bench.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


@pytest.mark.e2e
def test_e2e_template_edit_refused_until_rebuilt(tmp_path):
    engine_or_skip()
    project = make_project(tmp_path / "p", images=["cpu"], bench=AXES)
    run_cli(project, "build", "-i", "cpu")
    store = ResultStore(project / "results")
    old = store.latest_build("cpu")
    res, _ = run_cli(project, "bench", "-i", "cpu")
    assert "cpu x tiny-qwen3moe: ok" in res.output
    recs = bench_lines(project, old.digest)
    assert recs and all(r["image"]["inputs_key"] == old.labels[build_mod.INPUTS_KEY_LABEL] for r in recs)
    assert not any(r["image"]["stale"] for r in recs)

    tpl = project / "Dockerfile.templates" / TEMPLATE
    tpl.write_text(tpl.read_text() + "# stale-build e2e: a comment, so the rebuild is served from cache\n")
    res, code = run_cli(project, "bench", "-i", "cpu", expect=4)
    assert "cpu: stale:" in res.output and f"toolkit build --matrix {project / 'matrix.yaml'} -i cpu`" in str(
        res.exception
    )
    assert len(bench_lines(project, old.digest)) == len(recs)  # nothing measured
    run_cli(project, "bench", "-i", "cpu", "--dry-run", expect=4)

    res, _ = run_cli(project, "bench", "-i", "cpu", "--allow-stale")
    marked = bench_lines(project, old.digest)[len(recs) :]
    assert marked and all(r["image"]["stale"] and r["flags"][0] == "stale-build" for r in marked)
    assert all(r["image"]["current_inputs_key"] != r["image"]["inputs_key"] for r in marked)

    res, _ = run_cli(project, "build", "-i", "cpu")
    new = store.latest_build("cpu")
    assert new.cached and new.cached_steps == new.steps, res.output  # a comment: every step from the cache
    assert new.build_seconds < 120, new.build_seconds
    assert new.digest != old.digest  # the inputs-key label differs
    current = key_of(project).key
    assert new.labels[build_mod.INPUTS_KEY_LABEL] == current

    res, _ = run_cli(project, "bench", "-i", "cpu")
    assert "cpu x tiny-qwen3moe: ok" in res.output
    fresh = bench_lines(project, new.digest)
    assert fresh and all(
        r["image"]["digest"] == new.digest
        and r["image"]["inputs_key"] == current
        and not r["image"]["stale"]
        and "stale-build" not in (r.get("flags") or [])  # telemetry flags (host-busy, ...) may be there
        for r in fresh
    )
