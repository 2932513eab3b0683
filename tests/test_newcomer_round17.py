"""A newcomer on a fresh Debian 12 stand-in (sudo user, Docker; 2026-12-04, second session): frictions
found after the README's main job succeeded. Each test fails on the code before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.project import ROOT
from tests.support.runs import tk


def test_outside_the_project_the_error_says_where_the_project_is(tmp_path: Path) -> None:
    """After the next login the shell starts in ~, and `toolkit doctor` (setup's last line) said
    "matrix.yaml: matrix file not found; run from the project folder": which folder? The checkout this
    toolkit was installed from is named, for the matrix and the results folder alike."""
    for args in (["doctor"], ["report"], ["bench", "--dry-run"]):
        res = tk(tmp_path, *args)
        # doctor reads the host without a matrix (newcomer round 29): it runs, and says where the project is
        assert res.returncode == 4 or (args == ["doctor"] and res.returncode in (0, 12)), (args, res.stderr)
        # doctor says it once, as its `next:` line on stdout (newcomer nc40: it came twice)
        said = res.stdout if args == ["doctor"] else res.stderr
        assert f"`cd {ROOT}`" in said, (args, res.stdout, res.stderr)


def test_a_report_written_where_it_cannot_be_names_the_users_path(tmp_path: Path) -> None:
    """`report -o /proc/x.html` named `/proc/x.html.tmp`, a file the user never asked for."""
    rows = str(ROOT / "tests" / "data" / "llamabench-0c1e57098-cpu.jsonl")
    assert tk(tmp_path, "import", "--results", "r", "--label", "cpu", rows).returncode == 0
    res = tk(tmp_path, "report", "--results", "r", "--format", "csv", "-o", "/proc/x.csv")
    assert res.returncode in (4, 8) and "/proc/x.csv:" in res.stderr and ".tmp" not in res.stderr, res.stderr


@pytest.mark.e2e  # the real engine: bench reaches it before deciding (the fast level has none)
def test_an_image_this_host_cannot_run_says_it_is_not_built_either(project: Path) -> None:
    """`bench -i vulkan` on a host without a render node said "pass --allow-software-gpu"; following
    it only then revealed that the image was never built. The skip line says both at once, and the
    exit message says the run skipped it. Needs a host without a GPU render node (this project's CI)."""
    import glob

    if glob.glob("/dev/dri/renderD*"):
        pytest.skip("this host has a render node: vulkan is not skipped here")
    res = tk(project, "bench", "-i", "vulkan")
    if res.returncode == 5:
        pytest.skip(f"no engine here: {res.stderr[:200]}")
    assert res.returncode == 2, res.stderr
    assert (
        "pass --allow-software-gpu" in res.stdout
        and "not built yet either: `toolkit build -i vulkan`" in res.stdout
    )
    assert "nothing measured (skipped: its line on stdout says why)" in res.stderr


def test_a_matrix_problem_names_the_image_it_is_in(project: Path) -> None:
    """A missing key was named by position only (`images[0].template`): the image's name is said too,
    once (a message that names it already keeps the plain path)."""
    m = project / "matrix.yaml"
    m.write_text(m.read_text().replace("    template:", "    templatex:", 1))
    res = tk(project, "render")
    assert res.returncode == 4
    assert "images[0].template (image 'cpu'): required key is missing: add it" in res.stderr, res.stderr


def test_offline_fetch_model_says_where_a_hand_copied_file_goes(project: Path) -> None:
    """Offline, `fetch-model` said "copy the checkpoint by hand" without saying where to. It names the
    model's path. Mocked: nothing; the Hub is unreachable by pointing HF_ENDPOINT at a closed port
    (this machine has no internet either way)."""
    res = tk(
        project,
        "fetch-model",
        "qwen3-30b-a3b-q4kxl",
        env={"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": None},
    )
    assert res.returncode != 0
    assert f"copy the checkpoint by hand to {project / 'models'}" in res.stderr, res.stderr


def test_offline_fetch_model_twin_says_what_a_twin_needs_not_the_full_download(project: Path) -> None:
    """nc51 S5: `fetch-model NAME --twin` offline said "copy the checkpoint by hand ... and pin
    `revision:`", the 17 GB file a twin exists to avoid. Both ways a twin meets the Hub (resolving an
    unpinned revision, reading the header at a pinned one) now say what a twin needs: the Hub for its
    header, or the real file copied to the model's path."""
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": None}
    need = (
        "a twin needs only the file's GGUF header, read from the Hugging Face Hub (or HF_ENDPOINT): make it "
        f"where the Hub is reachable, or, offline, copy the real file to {project / 'models'}"
    )
    res = tk(project, "fetch-model", "qwen3-30b-a3b-q4kxl", "--twin", env=env)
    assert res.returncode == 11 and "could not resolve the revision" in res.stderr, res.stderr
    assert need in res.stderr and "by hand" not in res.stderr, res.stderr
    m = project / "matrix.yaml"
    m.write_text(
        m.read_text().replace(
            "      file: Qwen3-30B", "      revision: " + "a" * 40 + "\n      file: Qwen3-30B", 1
        )
    )
    res = tk(project, "fetch-model", "qwen3-30b-a3b-q4kxl", "--twin", env=env)
    assert res.returncode == 11 and "could not read the header" in res.stderr, res.stderr
    assert need in res.stderr, res.stderr


def test_a_gpu_pin_for_the_cpu_image_is_said_not_to_apply() -> None:
    """`bench --gpu 3` on a host without GPUs measured the cpu image without a word about the pin."""
    from toolkit.host import devices

    assert devices.profile_for("cpu", [], pin=3).notes == [
        "--gpu 3 does not apply: the cpu image runs on the CPU, no GPU is passed"
    ]
    assert devices.profile_for("cpu", []).notes == []


def test_a_cpu_only_html_report_has_no_missing_power_plot_note(tmp_path: Path) -> None:
    """Every CPU-only html report said `no power plot: ... holds no GPU power or clock sample`: a CPU
    image's run samples the host only, nothing is missing. A GPU image's run without GPU samples is
    still said."""
    from tests.support.records import make_record
    from toolkit.analysis import plots, tables
    from toolkit.results.records import short_digest

    def run(image: str, backend: str) -> list:
        recs = [
            make_record(image, backend, p=512, avg=100.0, sd=1.0, telemetry={"t0": 1.0, "t1": 2.0}),
            make_record(image, backend, n=128, avg=10.0, sd=0.1, telemetry={"t0": 2.0, "t1": 3.0}),
        ]
        trace = tmp_path / short_digest(recs[0].image.digest) / "telemetry"
        trace.mkdir(parents=True)
        (trace / f"run-1-{recs[0].model.name}.jsonl").write_text(
            '{"telemetry_trace": 1}\n{"t": 1.0, "source": "host", "cpu_busy_s": 4.0}\n'
        )
        return recs

    figs, notes = plots.telemetry_figures(
        tables.tables(tables.select_for_report(run("cpu", "cpu"))), tmp_path
    )
    assert figs == {} and notes == [], notes
    _, notes = plots.telemetry_figures(tables.tables(tables.select_for_report(run("vk", "vulkan"))), tmp_path)
    assert any("no GPU power or clock sample" in n for n in notes), notes


def test_an_image_no_fix_can_run_here_is_not_sent_to_be_built(tmp_path: Path) -> None:
    """Newcomer nc40 (fresh trixie stand-in, rootless Podman): after the README's `toolkit build &&
    toolkit bench` (build skips what cannot run here), bench's line for rocm, vllm, sglang... ended
    `it is not built yet either: toolkit build -i rocm`: a build that cannot make them run on a host
    without /dev/kfd. left45: every unbuilt image's line says so in one wording (vulkan's alone did),
    which says the build is needed once the image can run here, not that it makes it run. The real
    /dev of this host: needs one without /dev/kfd or a render node."""
    import glob

    from toolkit.bench import decide
    from toolkit.bench.runners.base import BenchOptions
    from toolkit.matrix.api import load_matrix
    from toolkit.results.records import ResultStore

    if Path("/dev/kfd").exists() or glob.glob("/dev/dri/renderD*"):
        pytest.skip("this host has a GPU device node: rocm or vulkan is not skipped here")
    lm = load_matrix(ROOT / "matrix.yaml")
    store = ResultStore(tmp_path / "results")
    lines = {}
    for name in ("rocm", "vulkan", "cpu"):
        spec = next(s for s in lm.m.images if s.name == name)
        (d, *_) = decide._decide_image(lm, spec, lm.m.models, store, [], BenchOptions())
        lines[name] = d.reason
    for name in ("rocm", "vulkan"):  # brk45: the build a bench of this --results folder finds, as cpu's
        command = f"toolkit build --results {store.root} -i {name}"
        said = f"; it is not built yet either: `{command}` (needed too, once it can run here)"
        assert lines[name].endswith(said), lines
    assert lines["cpu"].endswith(f"run `toolkit build --results {store.root} -i cpu`"), lines
    assert "no /dev/kfd" in lines["rocm"], lines
