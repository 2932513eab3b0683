"""What a newcomer met on a fresh Debian 13 stand-in, its sudo user, rootless Podman 5 (the README's
main job, then report, export-run and the export's own Reproduce block as the customer): each
exported fact says what the report says about the same numbers.

- The customer's README of `toolkit export-run` (publish/run_folder.run_readme) showed the tiny
  stand-in model's tables (2434 tok/s of pp512 on a 1.6 MB random-weight file) without the caveat
  `toolkit report` prints above the same tables ("smoke-test data: tiny-qwen3moe is a tiny stand-in
  model; its tok/s show the path works, they are not a basis for routing"), nor "every number shown is
  flagged" for a run whose every row was host-busy: a customer reading only the README took the
  figures for the image's speed. Now the README's Results section carries the report's caveats
  (analysis.report.Shown, the same selection its tables are made of).
- `toolkit doctor` in that folder (the customer's first look at the host) ended with `toolkit build -i
  cpu && toolkit bench -i cpu`, a build and bench into the published folder; now `toolkit reproduce .`
  and `toolkit report --results .` (host.doctor._next_step, cli.host._export_named).
- `toolkit compare RUN1 RUN2` of the first bench and a `--resume` after adding a prompt length to
  matrix.yaml (pp512... vs pp1024) said "no test in common ... n_prompt: A has 512..., B has 1024 ...
  leave a field out of the join on purpose with --ignore FIELD"; `--ignore n_prompt` then joined B's
  pp1024 to A's pp512, showed it as `pp512` in B's column and called it 2.43x faster, n_prompt shown
  nowhere. A field the test's name is made of (identity.LABEL_FIELDS) is refused by --ignore, and the
  error of two runs that differ only there says they measured different tests
  (analysis.compare._check_ignore, _nothing_in_common).
"""

from __future__ import annotations

from pathlib import Path

import pytest


def _readme(tmp_path: Path, recs):
    from toolkit.publish.run_folder import describe_run, run_readme
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for r in recs:
        store.add_result(r)
    run, _ = describe_run(store, recs[0].run_id, None, recs)
    return run_readme(run, recs)


def test_an_exported_readme_carries_the_reports_caveats_above_its_tables(tmp_path: Path) -> None:
    """A tiny stand-in model's run, every row host-busy (the stand-in's first bench): the README says
    both caveats the report says, above the tables; a run of a real-size model on a quiet host none."""
    from tests.support.runs import bench_records
    from tests.support.telemetry_fakes import supporting_block

    busy = {"flags": ["host-busy"], "telemetry": supporting_block(["host-busy"])}  # telemetry that raises it
    recs = [r.model_copy(update=busy) for r in bench_records("run-t")]
    results = _readme(tmp_path / "a", recs).split("## Results", 1)[1].split("## Reproduce", 1)[0]
    smoke = (
        "> **caveat**: smoke-test data: tiny-qwen3moe is a tiny stand-in model; its tok/s show the path works"
    )
    assert smoke in results, results
    assert "> **caveat**: every number shown is flagged (host-busy" in results, results
    assert results.index("caveat") < results.index("### Prefill"), results

    big = [
        r.model_copy(
            update={"model": r.model.model_copy(update={"name": "qwen3-30b", "size_bytes": 17 * 2**30})}
        )
        for r in bench_records("run-q")
    ]
    results = _readme(tmp_path / "b", big).split("## Results", 1)[1].split("## Reproduce", 1)[0]
    assert "caveat" not in results, results


@pytest.mark.e2e  # the real engine's doctor: without one its next step is to mend the engine
def test_doctor_in_an_exported_runs_folder_points_at_its_reproduction(tmp_path: Path) -> None:
    """The customer, in the folder `toolkit export-run` wrote (its matrix.yaml beside run.json), ran
    `toolkit doctor` as the README says to see what the host can run: its last line said `toolkit build
    -i cpu && toolkit bench -i cpu` measures cpu here, a build and bench writing images/ and results/ into
    the published folder, where `toolkit report` there says to pass --results . and the README's way is
    `toolkit reproduce .`. Now the next step is that reproduction (a real export, the real engine's
    doctor); in the project the next step is still the build and bench."""
    from tests.support.project import ROOT
    from tests.support.runs import bench_records, tk
    from toolkit.matrix.api import load_matrix
    from toolkit.publish.run_folder import export_run
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-d"):
        store.add_result(r)
    out = tmp_path / "published"
    export_run(store, "run-d", out, load_matrix(ROOT / "matrix.yaml"))
    res = tk(out, "doctor")
    assert res.returncode in (0, 12), res.stderr  # 12: a check of this host failed (said, not ours)
    last = res.stdout.strip().splitlines()[-1]
    # its image was never pushed: the reproduction rebuilds it (nc38: tests/test_nc38_rebuild_names.py)
    assert last.startswith(
        "next: this folder is a run `toolkit export-run` wrote: `toolkit reproduce . --rebuild`"
    ), last
    assert "`toolkit report --results .`" in last and "toolkit build" not in last, last
    res = tk(tmp_path, "doctor", "--matrix", str(out / "matrix.yaml"))
    assert f"`toolkit reproduce {out} --rebuild`" in res.stdout.strip().splitlines()[-1], res.stdout


def test_compare_never_joins_two_test_sizes_and_never_offers_to(tmp_path: Path) -> None:
    """pp512/pp2048 of one run against pp1024 of another: the error says they measured different tests
    and offers no --ignore; `--ignore n_prompt` (or n_ubatch, n_depth, n_gen) is refused naming why; a
    setting (n_threads) is still left out on purpose as before."""
    import pytest

    from tests.support.records import make_record
    from toolkit.analysis import compare
    from toolkit.core.errors import BadInput
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    a = [make_record("cpu", "cpu", p=p, avg=2400.0, sd=50.0, threads=2) for p in (512, 2048)]
    b = [
        r.model_copy(update={"run_id": "run-b"})
        for r in (make_record("cpu", "cpu", p=1024, avg=5900.0, sd=80.0, threads=2),)
    ]
    a = [r.model_copy(update={"run_id": "run-a"}) for r in a]
    for r in a + b:
        store.add_result(r)
    with pytest.raises(BadInput) as err:
        compare.compare(store, "run-a", "run-b")
    said = str(err.value)
    assert (
        "they measured different tests (A: pp512 ub512, pp2048 ub512; B: pp1024 ub512)" in said
        and "--ignore FIELD" not in said
    ), said
    for field in ("n_prompt", "n_ubatch", "n_depth", "n_gen"):
        with pytest.raises(BadInput, match=f"--ignore {field}: the test's own name is made of it"):
            compare.compare(store, "run-a", "run-b", ignore=(field,))
    c3 = make_record("cpu", "cpu", p=512, avg=2500.0, sd=50.0, threads=3).model_copy(
        update={"run_id": "run-c"}
    )
    store.add_result(c3)
    with pytest.raises(BadInput, match=r"--ignore FIELD \(n_threads\)"):  # a setting: still offered
        compare.compare(store, "run-a", "run-c")
    c = compare.compare(store, "run-a", "run-c", ignore=("n_threads",))
    assert len(c.rows) == 1 and c.rows[0].test == "pp512 ub512", c.rows
