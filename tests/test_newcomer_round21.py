"""A newcomer on a fresh Debian 13 stand-in with rootless Podman 5.4.2 (2026-12-05): Podman's local
name of an unpushed image taken for a registry digest by export-run (and reproduce, campaign), and
llama.cpp's unknown build number 0 shown as a build in the report's column legend."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.support.project import DATA, cpu_project
from tests.support.records import CPU_A, load
from tests.support.runs import bench_records
from tests.support.telemetry_fakes import supporting_block
from toolkit.cli.main import cli
from toolkit.engine import api as engine
from toolkit.results.records import ResultStore

# What `podman image inspect` gave as RepoDigests for the CPU image the stand-in built and never pushed
# (Podman 5.4.2, rootless): the local store's own name, nothing a registry serves.
PODMAN_LOCAL = "localhost/toolkit/cpu@sha256:3308e82739c5bf4293a1d56263434401681fe86c6539eaa5d0b5892d837d4496"
RX580 = DATA / "public" / "vulkan-rx580-b4696-geerlingguy.md"


def test_podmans_local_name_of_an_unpushed_image_is_no_pull_source(tmp_path, matrix_data):
    """export-run of a run measured on Podman wrote `docker pull localhost/toolkit/cpu@sha256:...` into
    the folder's README and no "never pushed" note: Podman lists its local name among RepoDigests, and
    every `@sha256:` reference was taken for a registry's. Nobody can pull that; the folder now says
    the image was never pushed (reproduce needs --rebuild), as it does for a Docker build."""
    proj = tmp_path / "proj"
    cpu_project(proj, matrix_data)
    store = ResultStore(proj / "results")
    for r in bench_records("run-p"):
        r.image.repo_digests = [PODMAN_LOCAL]
        store.add_result(r)
    out = tmp_path / "published"
    res = CliRunner().invoke(
        cli,
        ["export-run", "--matrix", str(proj / "matrix.yaml"), "run-p", "-o", str(out)],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    readme = (out / "README.md").read_text()
    assert "docker pull localhost/" not in readme, readme
    notes = json.loads((out / "run.json").read_text())["notes"]
    assert any("was never pushed" in n for n in notes), notes
    assert "was never pushed" in res.output and "was never pushed" in readme
    assert "Docker or Podman" in readme


def test_a_registry_on_this_host_is_still_a_pull_source():
    """Only Podman's bare `localhost/` domain is its local name: a registry on this host
    (`localhost:5000/...`) or elsewhere is pulled from, in the order recorded."""
    refs = [
        PODMAN_LOCAL,
        "localhost:5000/toolkit/cpu@sha256:" + "a" * 64,
        "ghcr.io/me/cpu@sha256:" + "b" * 64,
        "toolkit/cpu:latest",
    ]
    assert engine.pullable_digests(refs) == refs[1:3]


def test_an_unknown_build_number_is_not_shown_as_build_zero(tmp_path):
    """The report's column legend read `cpu: ... build 0c1e57098 (0)` beside an import's `build e598697d
    (4696)`: the toolkit builds llama.cpp from a tree without git history and passes build number 0,
    llama.cpp's "unknown". The legend names the commit alone then."""
    store = ResultStore(tmp_path / "results")
    for r in load(CPU_A):  # a real CPU run of this project's image (raw build_number 0)
        store.add_result(r)
    res = CliRunner().invoke(
        cli, ["import", "--results", str(tmp_path / "results"), "--label", "rx580", str(RX580)]
    )
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        cli, ["report", "--results", str(tmp_path / "results"), "--format", "text"], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 0, res.output
    legend = [x for x in res.output.splitlines() if x.startswith("- cpu:") or x.startswith("- rx580:")]
    assert len(legend) == 2, res.output
    assert "build 0c1e57098," in legend[0] and "(0)" not in legend[0], legend
    assert "build e598697d (4696)" in legend[1], legend


def test_reproduce_prints_a_plain_table_on_a_terminal():
    """`toolkit reproduce` on a terminal printed its table as markdown (`| image | test | ...`) with an
    empty last header, where report and compare print a plain grid there. The text form is a plain
    grid, its last column named `verdict`; piped (github) it stays markdown, with the same header."""
    from toolkit.publish import repro_output
    from toolkit.publish import reproduce as repro

    rows = repro.compare_records(bench_records("run-a"), bench_records("run-b", scale=1.01), 5.0)
    rep = repro.Reproduction("run-a", "run-b", Path("/f"), Path("/r"), 5.0, rows=rows)
    text = repro_output.format_reproduction(rep, "text")
    assert not [x for x in text.splitlines() if x.startswith("|")], text
    head = next(x for x in text.splitlines() if x.startswith("image"))
    assert head.split()[-1] == "verdict" and "recorded t/s" in head, head
    md = repro_output.format_reproduction(rep)
    assert next(x for x in md.splitlines() if x.startswith("| image")).rstrip(" |").endswith("verdict")


def test_a_reproduce_inside_a_committed_export_folder_leaves_git_nothing_new(tmp_path):
    """reproduce works in FOLDER/reproduce/ (results, logs with this host's paths, a model file); in an
    export folder committed to a repository (export-run's README says to) `git status` showed all of
    it. Its .gitignore keeps it out; a real git repository checks it."""
    import subprocess

    from toolkit.publish.reproduce import _workdir

    folder = tmp_path / "published"
    folder.mkdir()
    (folder / "run.json").write_text("{}")
    git = ["git", "-C", str(folder), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "export"], check=True)
    work = _workdir(folder, rebuild=False)
    (work / "models").mkdir()
    (work / "models" / "m.gguf").write_bytes(b"x")
    status = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True
    )
    assert status.stdout == "", status.stdout


def test_the_different_models_advice_fits_an_imported_image(tmp_path):
    """A bench beside an imported file of another model: the verdict said only `toolkit bench -m NAME`,
    which cannot measure an imported image here; it names importing a file of the same model too."""
    from click.testing import CliRunner

    from tests.support.records import make_record
    from toolkit.cli.main import cli
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for image, model, digest, mtype, params in (
        ("cpu", "tiny", None, "qwen3moe ?B F16", 790000),
        ("pub", "llama-3b", "import:" + "ab" * 32, "llama 3B Q4_K - Medium", 3210000000),
    ):
        r = make_record(image, "cpu", p=512, avg=100.0, digest=digest)
        r.model.name, r.model.sha256 = model, model[0] * 64
        r.raw = {**r.raw, "model_type": mtype, "model_n_params": params, "model_size": params}
        store.add_result(r)
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--format", "github"])
    assert res.exit_code == 0, res.output
    # no bench measures an import: the model this project's bench measured, imported for it (fix51a: S8)
    assert "measure tiny on each (import a result file of tiny for pub)" in res.stdout, res.stdout


def test_compare_of_two_models_names_them_and_offers_no_ignore(tmp_path):
    """`compare cpu pub` of two images that measured different models: the error named the models by
    llama-bench's type strings and offered `--ignore FIELD`, which cannot join two models."""
    from tests.support.records import make_record
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for image, model, mtype, params in (
        ("cpu", "tiny-qwen3moe", "qwen3moe ?B F16", 790000),
        ("pub", "llama-3b", "llama 3B Q4_K - Medium", 3210000000),
    ):
        r = make_record(image, "cpu", p=512, avg=100.0, run_id=f"run-{image}")
        r.model.name, r.model.sha256 = model, model[0] * 64
        r.raw = {**r.raw, "model_type": mtype, "model_n_params": params, "model_size": params}
        store.add_result(r)
    res = CliRunner().invoke(cli, ["compare", "--results", str(tmp_path / "results"), "run-cpu", "run-pub"])
    said = str(res.exception)  # BadInput: exit 4 through the toolkit's entry point
    assert "they measured different models (A: tiny-qwen3moe; B: llama-3b)" in said, said
    assert "--ignore" not in said


def test_the_hidden_run_note_names_each_tests_model_where_two_models_are_shown(tmp_path):
    """Two models' pp512 re-run on a busy host: the note listed `pp512 ub512, pp512 ub512`, not which
    model's test the clean run holds; with several models each test is named with its model."""
    from tests.support.records import make_record
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for run, flags in (("run-clean", []), ("run-busy", ["host-busy"])):
        for model in ("model-a", "model-b"):
            r = make_record(
                "cpu",
                "cpu",
                p=512,
                avg=100.0,
                sd=1.0,
                run_id=run,
                model=model,
                flags=flags,
                telemetry=supporting_block(flags),
            )
            r.model.sha256 = model[-1] * 64
            store.add_result(r)
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--format", "text"])
    assert res.exit_code == 0, res.output
    note = next(x for x in res.stderr.splitlines() if "without a telemetry flag" in x)
    assert "pp512 ub512 of model-a" in note and "pp512 ub512 of model-b" in note, note


def test_doctor_ends_with_what_to_run_next():
    """doctor listed its checks and each image's verdict and stopped: a newcomer read `cpu: can run
    here` and had to find the next command in the README. It ends with the command for the images that
    can run here, or, where none can, the first error to mend."""
    from toolkit.host.doctor import Check, DoctorReport, ImageVerdict, format_doctor

    cpu = ImageVerdict("cpu", "cpu", "llama-bench", True, "no devices needed")
    rocm = ImageVerdict("rocm", "rocm", "llama-bench", False, "no /dev/kfd")
    both = DoctorReport({}, [Check("error", "docker", "no engine")], [cpu, rocm])
    assert format_doctor(both).splitlines()[-1] == (
        "next: `toolkit build -i cpu && toolkit bench -i cpu` measures cpu here"
    )
    assert (
        format_doctor(DoctorReport({}, [], [cpu]))
        .splitlines()[-1]
        .startswith("next: `toolkit build && toolkit bench` measures cpu")
    )
    none = DoctorReport({}, [Check("error", "docker", "no engine")], [rocm])
    assert format_doctor(none).splitlines()[-1] == "next: mend `docker` above, then `toolkit doctor` again"
