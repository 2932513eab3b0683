"""What a newcomer reads on a fresh host (a Debian 13 stand-in, its sudo user, Docker: the README's main
job, then the commands the README and docs/ promise to an engineer handing results to a customer, and
the mistakes one makes next): each message says its point once, right, with the way out.

- `toolkit bench -i cpu,vulkan` (a list in one flag, as many tools take it) was answered "did you mean
  'vulkan'?" (the nearest name to the whole text), which drops `cpu`; `-i tiny-qwen3moe` (a model's name
  given to -i) and `-m cpu` (an image's name given to -m) were answered with the names of the other kind
  only; now the list is told the flag is repeated, the name of the other kind the flag it belongs to
  (matrix/loading.LoadedMatrix._other_kind).
- `toolkit import` of a llama-server log (tests/data/public) named the file's kind, then called the
  lines of the server's chat template broken JSON records, "(and 286 more)": now the kind alone
  (results/import_read._no_rows, failed_run.OTHER_PROGRAM); two equal GPUs named a set with the GPU's
  name twice, now `2x <GPU>` (import_read.set_names);
- the README export-run writes for the customer said "canary on" (BenchAxes' default, also for an
  import or a run with the canary off) and nothing of the canary's result (unchecked on the stand-in's
  first bench); its tables had marks and flags nobody explained and decode rows the report folds;
  it told every reader `toolkit reproduce .  # pulls by digest` first, for an image never pushed and
  for an import nothing can re-run (publish/run_folder: _process_settings, run_readme,
  _reproduce_lines); `export-run RUN -o ~/toolkit` was refused for a link in the project's .venv, not
  for the folder being no export of the run (run_folder.export_run).

The canary left unchecked on the stand-in's first bench (its output cut where scoring starts, not
retried) is in tests/test_canary.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public import refused


def test_a_list_in_one_flag_or_a_name_of_the_other_kind_is_told_the_right_flag() -> None:
    from tests.support.project import ROOT
    from toolkit.core.errors import BadInput
    from toolkit.matrix.api import load_matrix

    lm = load_matrix(ROOT / "matrix.yaml")
    with pytest.raises(BadInput) as err:
        lm.select_images(["cpu,vulkan"])
    said = str(err.value)
    assert "one name per -i, the flag repeated: `-i cpu -i vulkan`" in said and "did you mean" not in said, (
        said
    )
    with pytest.raises(BadInput, match=r"`-i cpu -i vulkn` \('vulkn': did you mean 'vulkan'\?\)"):
        lm.select_images(["cpu,vulkn"])
    with pytest.raises(BadInput, match="one name per -m, the flag repeated: `-m tiny-qwen3moe -m qwen3-30b"):
        lm.select_models(["tiny-qwen3moe,qwen3-30b-a3b-q4kxl"])
    with pytest.raises(BadInput, match="'tiny-qwen3moe' is a model's name: give it as `-m tiny-qwen3moe`"):
        lm.select_images(["tiny-qwen3moe"])
    with pytest.raises(BadInput, match="'cpu' is an image's name: give it as `-i cpu`"):
        lm.select_models(["cpu"])
    with pytest.raises(BadInput, match="did you mean 'cpu'\\?"):  # a typo: the nearest name, as before
        lm.select_images(["cpuu"])
    assert [i.name for i in lm.select_images(["cpu", "vulkan"])] == ["cpu", "vulkan"]


def test_another_programs_log_is_named_without_its_lines_called_broken_records(tmp_path: Path) -> None:
    """`toolkit import r29-windows-crlf-llama-server-log-not-bench.log`: the refusal named the file a
    llama-server log, then went on "; line 163: not a complete JSON record (not JSON (Expecting property
    name ...)) (and 286 more)": the lines of the server's chat template (`{#-`, `{%-`), a second reason
    that is no reason. Now the file's kind is said once, with what to import instead."""
    said = refused(tmp_path, "r29-windows-crlf-llama-server-log-not-bench.log")
    assert "the file is a llama-server log" in said and "run llama-bench on the model (-o jsonl)" in said, (
        said
    )
    assert "not a complete JSON record" not in said and "more)" not in said, said


def test_an_exported_runs_settings_are_the_runs_own_not_the_matrixs_defaults() -> None:
    """export-run's README said "canary on" and "runs 1, env none" for every run: BenchAxes' defaults,
    since no llama-bench flag says them. An import (no canary ran), a run with `bench.canary: false`,
    `bench.runs: 3` or a `bench.env` axis were all published as the defaults, and `toolkit reproduce`
    re-ran them so (its env tests then matched none recorded). Now they are read from the records."""
    from tests.support.runs import bench_records
    from toolkit.publish.run_folder import axes_from_records

    plain = bench_records("run-a")
    axes = axes_from_records(plain)
    assert (axes["canary"], axes["runs"], axes["env"]) == (False, 1, {}), axes
    measured = []
    for i, r in enumerate(bench_records("run-b")):
        env = {"GGML_VK_DISABLE_COOPMAT": None if i % 2 else "1"}
        extra = {"canary": {"status": "ok", "ppl": 535.9}, "process_run": {"index": 1, "of": 3}}
        measured.append(r.model_copy(update={"env": env, **extra}))
    axes = axes_from_records(measured)
    assert axes["canary"] is True and axes["runs"] == 3, axes
    assert axes["env"] == {"GGML_VK_DISABLE_COOPMAT": ["1", None]}, axes


def test_an_exported_readme_says_how_its_run_can_be_reproduced(tmp_path: Path) -> None:
    """The README of an export told every customer `toolkit reproduce .  # pulls by digest` first: for a
    run whose image was never pushed that stops at the pull (the note saying so came last, after the
    file list), and for an import, which nothing can re-run, it was a way that does not exist; an
    import's model without a file read "``". Now the way the run's images allow."""
    from tests.support.runs import bench_records
    from toolkit.publish.run_folder import describe_run, run_readme
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    recs = bench_records("run-l")
    for r in recs:
        store.add_result(r)
    run, _ = describe_run(store, "run-l", None, recs)
    readme = run_readme(run, recs)
    repro = readme.split("## Reproduce", 1)[1]
    assert "toolkit reproduce . --rebuild" in repro and "cannot pull it by digest" in repro, repro
    assert "toolkit reproduce .                 # pulls by digest" not in repro, repro
    assert "\n- Note: image cpu@" in repro, repro
    pushed = run.model_copy(
        update={
            "images": [
                im.model_copy(update={"repo_digests": ["reg.example/r@sha256:" + "ab" * 32]})
                for im in run.images
            ]
        }
    )
    assert "# pulls by digest" in run_readme(pushed, recs).split("## Reproduce", 1)[1]
    imp = [
        r.model_copy(update={"image": r.image.model_copy(update={"digest": "import:" + "ef" * 32})})
        for r in recs
    ]
    imp = [r.model_copy(update={"model": r.model.model_copy(update={"path": ""})}) for r in imp]
    run, _ = describe_run(store, "run-l", None, imp)
    readme = run_readme(run, imp)
    assert "toolkit reproduce ." not in readme and "Not reproducible with the toolkit" in readme, readme
    assert "``" not in readme and "file name not recorded" in readme, readme


def test_an_exported_readme_says_each_images_canary_and_what_its_marks_mean(tmp_path: Path) -> None:
    """The fresh stand-in's first bench left the CPU canary unchecked; `toolkit report` said so on the
    image's line, the exported README (what the customer reads) said only "canary on". Its tables
    carried `†`, `noisy`, `host-busy` with no word on what they mean, and listed `tg128 ub512` and
    `tg128 ub2048` where the report shows one folded `tg128` row. Now the README says the canary's
    result per image, folds decode rows as the report does, and explains its marks and flags."""
    from tests.support.runs import bench_records
    from toolkit.publish.run_folder import describe_run, run_readme
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    why = "llama-perplexity gave no perplexity: no `Final estimate` line and no chunk value"
    canary = {"status": "unchecked", "reason": why, "image": "cpu", "method": "llama-perplexity"}
    recs = [
        r.model_copy(update={"canary": canary}) for r in bench_records("run-c", sd=0.3)
    ]  # sd 30 %: every row `noisy`
    for r in recs:
        store.add_result(r)
    run, _ = describe_run(store, "run-c", None, recs)
    readme = run_readme(run, recs)
    images = readme.split("## Images", 1)[1].split("## Models", 1)[0]
    assert f"; canary unchecked: {why}" in images, images
    results = readme.split("## Results", 1)[1].split("## Reproduce", 1)[0]
    assert "| noisy " in results and "\n- noisy: relative standard deviation above" in results, results
    assert "| tg16 " in results and "tg16 ub32" not in results and "decode rows: the micro-batch" in results


def test_export_into_the_project_folder_is_told_it_is_not_empty_not_of_a_link_in_it(tmp_path: Path) -> None:
    """`toolkit export-run RUN -o ~/toolkit` (or `-o .`) on the fresh stand-in: refused with "symlink
    .venv/bin/python3: ... resolves to /usr/bin/python3.13, outside ... export into an empty folder",
    a link setup-host.sh's venv holds, after walking the whole folder; the point is that the folder is
    not empty and is no export of the run. Now that is said (a link out of an earlier export of the same
    run is still refused: tests/test_breaker_round8_links.py)."""
    from tests.support.runs import bench_records
    from toolkit.core.errors import BadInput
    from toolkit.publish.run_folder import export_run
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-p"):
        store.add_result(r)
    project = tmp_path / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python3").symlink_to("/usr/bin/python3")
    (project / "matrix.yaml").write_text("schema_version: 1\n")
    with pytest.raises(BadInput) as err:
        export_run(store, "run-p", project)
    said = str(err.value)
    assert "is not empty and is not an export of run run-p; choose an empty --out folder" in said, said
    assert "symlink" not in said, said


def test_a_set_of_two_equal_gpus_is_named_2x_not_the_gpu_twice(tmp_path: Path) -> None:
    """`toolkit import --label bare-metal r30-rocm-vulkan-2x-r9700-fitt-column.md` (two R9700s): the sets
    were filed as `bare-metal.ROCm-AMD-Radeon-AI-PRO-R9700-AMD-Radeon-AI-PRO-R9700`, the GPU's name twice,
    and that name headed the report's columns; now `bare-metal.ROCm-2x-AMD-Radeon-AI-PRO-R9700`, as the
    report's host line counts them."""
    from tests.support.public import PUBLIC
    from toolkit.results import importer
    from toolkit.results.records import ResultStore

    res = importer.import_files(
        ResultStore(tmp_path / "results"), [PUBLIC / "r30-rocm-vulkan-2x-r9700-fitt-column.md"], label="bm"
    )
    assert [s.name for s in res.sets] == [
        "bm.ROCm-2x-AMD-Radeon-AI-PRO-R9700",
        "bm.Vulkan-2x-AMD-Radeon-AI-PRO-R9700-RADV-GFX1201",
    ]


def test_report_written_to_a_file_named_html_or_csv_is_that_form(tmp_path: Path) -> None:
    """`toolkit report -o report.html` (the engineer's next step before mailing the customer a page)
    wrote the markdown report into report.html, and `-o results.csv` markdown too: without --format the
    form was github whenever a file was written. Now the file's name says the form (html, csv, json);
    any other name (report.md) stays markdown, and --format still wins."""
    from click.testing import CliRunner

    from tests.support.runs import bench_records
    from toolkit.cli.main import cli
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-r"):
        store.add_result(r)
    results = str(tmp_path / "results")

    def report(*args: str) -> str:
        res = CliRunner().invoke(cli, ["report", "--results", results, *args])
        assert res.exit_code == 0, res.output
        return Path(args[-1]).read_text()

    assert report("-o", str(tmp_path / "r.csv")).startswith("axis,test,image,")
    assert report("-o", str(tmp_path / "R.HTML")).startswith("<!doctype html>")
    assert report("-o", str(tmp_path / "r.json")).lstrip().startswith("{")
    assert report("-o", str(tmp_path / "r.md")).startswith("# Benchmark report")
    assert report("--format", "github", "-o", str(tmp_path / "g.csv")).startswith("# Benchmark report")


def test_an_image_pushed_only_to_a_loopback_registry_is_no_pull_source_for_a_customer(tmp_path: Path) -> None:
    """Found exporting this machine's run (2026-12-05, eighth session): the image's RepoDigests held a
    push to a registry at 127.0.0.1:32774 (a test registry on this host), and the README told customers
    `docker pull 127.0.0.1:32774/...`, which only the exporting host can reach, and to reproduce by pull.
    Now the line says so, the way given is --rebuild, and a note says why; a LAN registry is a source."""
    from tests.support.runs import bench_records
    from toolkit.publish.run_folder import describe_run, loopback, run_readme
    from toolkit.results.records import ResultStore

    here = "127.0.0.1:32774/toolkit-e2e/cpu@sha256:" + "b3" * 32
    store = ResultStore(tmp_path / "results")
    recs = bench_records("run-lo")
    for r in recs:
        r.image.repo_digests = [here]
        store.add_result(r)
    run, _ = describe_run(store, "run-lo", None, recs)
    readme = run_readme(run, recs)
    assert (
        f"docker pull {here}` (Podman: `podman pull {here}`) (a registry on the exporting host's loopback"
        in readme
    )
    repro = readme.split("## Reproduce", 1)[1]
    assert "toolkit reproduce . --rebuild" in repro and "# pulls by digest" not in repro, repro
    assert "pushed only to a registry on the exporting host's loopback address" in repro, repro
    assert "in no registry another host reaches" in repro and "not pushed to a registry" not in repro, repro
    assert [
        loopback(r)
        for r in ("localhost:5000/a@sha256:1", "[::1]:5000/a@sha256:1", "192.168.1.5:5000/a@sha256:1")
    ] == [True, True, False]
