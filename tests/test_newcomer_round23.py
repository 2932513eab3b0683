"""A newcomer on a fresh Debian 13 stand-in as its sudo user, Docker (2026-12-05, commit 715f0a9): the
README's main job, then doctor, report, a second bench, compare, import, export-run and reproduce as
the README and --help texts lead there."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from tests.support.project import DATA
from tests.support.records import CPU_A, load, make_record
from toolkit.analysis.compare import stored_runs
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput
from toolkit.results.records import ResultStore


def _written(store: ResultStore, image: str, run_id: str, digest_hex: str) -> None:
    store.add_result(
        make_record(image, "cpu", p=512, avg=100.0, run_id=run_id, digest="sha256:" + digest_hex * 64)
    )


def test_stored_runs_are_listed_newest_written_first(tmp_path):
    """After `bench`, a second `bench` and two imports, `toolkit compare nope cpu` and `toolkit report -i
    nope` listed the stored runs "newest first" as the results folders sort by digest: the import
    written last (folder 7d6064...) came last, after the first bench. The list follows the order the
    records were written (the store's sequence numbers)."""
    store = ResultStore(tmp_path / "results")
    _written(store, "cpu", "bench-1", "7")  # results/777777777777/
    _written(store, "cpu", "bench-2", "7")
    _written(store, "bare-metal", "import-1", "b")  # results/bbbbbbbbbbbb/
    _written(store, "rx580", "import-2", "1")  # written last, in the folder that sorts first
    order = ["import-2", "import-1", "bench-2", "bench-1"]
    listed = stored_runs(store).split("newest first: ", 1)[1]
    assert re.findall(r"([\w-]+) \(", listed) == order, listed
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "-i", "nope"])
    assert isinstance(res.exception, BadInput) and res.exception.exit_code == 4, res.output
    assert "newest runs first: " + ", ".join(order) + ")" in str(res.exception), res.exception


def test_doctor_after_the_readme_job_points_at_the_results_not_at_a_first_build(tmp_path):
    """The fresh host's last step, `toolkit doctor` right after `toolkit build && toolkit bench`, ended
    with `next: toolkit build -i cpu && toolkit bench -i cpu measures cpu here`, as before anything was
    built: a newcomer read that the job had not been done. Once every image that can run here has
    results, it points at `toolkit report` and says how to measure again; before, it is unchanged."""
    from toolkit.cli.host import _measured
    from toolkit.host.doctor import DoctorReport, ImageVerdict, format_doctor

    cpu = ImageVerdict("cpu", "cpu", "llama-bench", True, "no devices needed")
    rocm = ImageVerdict("rocm", "rocm", "llama-bench", False, "no /dev/kfd")
    rep = DoctorReport({}, [], [cpu, rocm])
    store = ResultStore(tmp_path / "results")
    assert _measured(store, rep, None) == set()  # no results folder yet: doctor never fails on it
    first = "next: `toolkit build -i cpu && toolkit bench -i cpu` measures cpu here"
    assert format_doctor(rep, None, _measured(store, rep, None)).splitlines()[-1] == first
    _written(store, "cpu", "bench-1", "7")
    _written(store, "rocm", "import-1", "b")  # another image's results say nothing of cpu's
    assert _measured(store, rep, None) == {"cpu"}
    last = format_doctor(rep, None, _measured(store, rep, None)).splitlines()[-1]
    assert last == (
        "next: `toolkit report` shows what cpu measured here; `toolkit bench -i cpu` measures again "
        "(`toolkit build -i cpu` first after a change to matrix.yaml or the templates)"
    ), last


def test_one_model_measured_at_different_tests_is_not_called_two_models(tmp_path):
    """`toolkit import --label bare-metal tests/data/llamabench-0c1e57098-cpu.jsonl` beside the bench of
    the same tiny model: the report's decode verdict said "they measured different models; measure one
    model on each", while its prefill verdict, on a test both had, compared them as "different model
    files of one model". Both measured tiny-qwen3moe (one as `tiny-qwen3moe`, one as its file name), at
    different tests: the verdict says so and names each side's tests."""
    store = ResultStore(tmp_path / "results")
    for r in load(CPU_A):  # this project's CPU image on tiny-qwen3moe: pp128, pp1024, tg64
        store.add_result(r)
    src = DATA / "llamabench-0c1e57098-cpu.jsonl"  # llama-bench on tiny-qwen3moe.gguf: pp64, pp512, tg16
    res = CliRunner().invoke(
        cli, ["import", "--results", str(tmp_path / "results"), "--label", "bare-metal", str(src)]
    )
    assert res.exit_code == 0, res.output
    args = ["report", "--results", str(tmp_path / "results"), "--format", "github"]
    res = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    decode = next(x for x in res.stdout.splitlines() if x.startswith("- decode: "))
    assert "different models" not in decode, decode
    assert "they measured different tests (bare-metal@import:" in decode and ": tg16; cpu@" in decode, decode
    assert decode.endswith(  # the bench into the --results the report read (invocation.command: fix47b)
        f": tg64); measure one test on each (`toolkit bench --results {tmp_path / 'results'}` runs "  # code: fix49a
        "matrix.yaml's, or import a result file of one of them))"
    ), decode


def test_the_exported_readme_names_the_depth_sweep_its_tables_show(tmp_path, matrix_data):
    """export-run of the README's bench (the tiny model, whose matrix entry has a depth sweep): the
    folder's README said `llama-bench axes (crossed): ... n_depth [0] ...` above tables holding
    `pp512 @ d512` and `tg128 @ d512` rows, which no axis it named gives. It names the depth sweep."""
    from tests.support.project import cpu_project
    from tests.support.runs import bench_records
    from toolkit.runtimes.llama_bench import check

    proj = tmp_path / "proj"
    cpu_project(proj, matrix_data)
    store = ResultStore(proj / "results")
    main = bench_records("run-d")
    for r in main:  # bench_one's log names: <run>-<model>.log, the depth process's <run>-<model>-depth.log
        r.log_file = "/p/results/x/logs/run-d-tiny-qwen3moe.log"
    deep = []
    for r in main:
        if r.n_ubatch == 512 and r.n_prompt in (
            0,
            64,
        ):  # pp64 and tg16 at depth 512, as bench_one writes them
            row = {**r.raw, "n_depth": 512}
            log = "/p/results/x/logs/run-d-tiny-qwen3moe-depth.log"
            deep.append(r.model_copy(update={"raw": row, "log_file": log, **check.normalize(row)}, deep=True))
    for r in main + deep:
        store.add_result(r)
    out = tmp_path / "published"
    res = CliRunner().invoke(
        cli, ["export-run", "--matrix", str(proj / "matrix.yaml"), "run-d", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    readme = (out / "README.md").read_text()
    assert "@ d512" in readme, readme
    assert (
        "Depth sweep of `tiny-qwen3moe` (a second llama-bench process, models[].depth): n_depth 512; n_prompt 64; n_gen 16; n_ubatch 512."
        in readme
    ), readme


def test_reproduce_names_the_flags_of_a_flagged_cell_within_noise():
    """A reproduced cell within noise whose run was flagged host-busy said `ok` and nothing more, while
    compare names a flagged number wherever it stands (its wide noise is the busy host's): it says
    `ok, flagged: B:host-busy`; an unflagged cell stays `ok`."""
    from tests.support.runs import bench_records
    from tests.support.telemetry_fakes import supporting_block
    from toolkit.publish import repro_output
    from toolkit.publish import reproduce as repro

    busy = [
        r.model_copy(update={"flags": ["host-busy"], "telemetry": supporting_block(["host-busy"])})
        for r in bench_records("run-b", scale=1.01)
    ]
    rows = repro.compare_records(bench_records("run-a"), busy, 5.0)
    assert rows and all(r.ok for r in rows)
    assert {r.status for r in rows} == {"ok, flagged: B:host-busy"}, [r.status for r in rows]
    rep = repro.Reproduction("run-a", "run-b", Path("/f"), Path("/r"), 5.0, rows=rows)
    assert "ok, flagged: B:host-busy" in repro_output.format_reproduction(rep, "text")
    clean = repro.compare_records(bench_records("run-a"), bench_records("run-b", scale=1.01), 5.0)
    assert {r.status for r in clean} == {"ok"}
