"""A newcomer on a fresh Debian 13 stand-in (2026-12-04, third session): what export-run and reproduce
got wrong for the default tiny model, whose matrix entry has a depth sweep."""

from __future__ import annotations

from pathlib import Path

from tests.support.records import make_record
from toolkit.matrix.depth import DepthSweep
from toolkit.publish import reproduce as repro
from toolkit.publish import run_folder, sweeps


def _run(model: str = "tiny-qwen3moe") -> list:
    """A run's records as bench_one writes them: the main sweep's (log <run>-<model>.log) and the depth
    sweep's (log <run>-<model>-depth.log): pp512 and tg128 at depth 512, pp1024 at depth 0."""
    out = []
    for p, n, d, suffix in (
        (512, 0, 0, ""),
        (0, 128, 0, ""),
        (512, 0, 512, "-depth"),
        (0, 128, 512, "-depth"),
        (1024, 0, 0, "-depth"),
    ):
        r = make_record("cpu", "cpu", p=p, n=n, avg=100.0)
        r.n_depth, r.run_id = d, "run-d"
        r.model.name = model
        r.log_file = f"/r/logs/run-d-{model}{suffix}.log"
        out.append(r)
    return out


def test_export_names_the_depth_sweep_and_reproduce_runs_it():
    """`toolkit reproduce` of an exported run re-ran the main sweep only: the depth sweep's tests came
    back missing and the run was "not reproduced" (exit 7) on every try, the default tiny model's too."""
    recs = _run()
    (m,) = run_folder._published_models(recs, None)
    assert (
        m.depth == DepthSweep(n_depth=[0, 512], n_prompt=[512, 1024], n_gen=[128], n_ubatch=512).model_dump()
    )
    spec = repro._model_spec(m, Path("/models/tiny.gguf"))
    assert spec.depth is not None and spec.depth.depths() == [0, 512]


def test_a_model_named_like_a_depth_log_is_no_depth_sweep():
    """The depth process is told by bench_one's log name after `<run>-<model>`, never by a model name
    that holds `-depth`; a run without a depth process exports none."""
    main = [r for r in _run("my-depth-model") if not r.log_file.endswith("-model-depth.log")]
    assert len(main) == 2 and sweeps.recorded_sweep(main, "my-depth-model") is None
    assert sweeps.recorded_sweep(_run("my-depth-model"), "my-depth-model") is not None


def test_a_mistyped_folder_is_said_to_be_missing_not_read_as_a_run_id(tmp_path):
    """`toolkit reproduce published/nope` said "no results of run 'published/nope'": a path is no run id."""
    import pytest

    from toolkit.core.errors import BadInput

    with pytest.raises(BadInput, match=r"published/nope: no such folder; give a run folder written by"):
        repro.resolve_run(str(tmp_path / "published" / "nope"), store=None, lm=None)


def test_the_csv_host_column_names_the_host_of_a_bench_record(tmp_path):
    """The csv's `host` read the hostname, which a bench record never keeps (results get published): the
    column was empty on every row of a customer's csv. It names the CPU and threads where no key or
    hostname is kept."""
    import csv
    import io

    from click.testing import CliRunner

    from toolkit.cli.main import cli
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    r = make_record("cpu", "cpu", p=512, avg=100.0)
    r.host = {"cpu_model": "AMD EPYC", "cpu_threads": 2, "os": "Debian GNU/Linux 13 (trixie)"}
    store.add_result(r)
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--format", "csv"])
    assert res.exit_code == 0, res.output
    (row,) = list(csv.DictReader(io.StringIO(res.stdout)))
    assert row["host"] == "AMD EPYC, 2 threads"


def test_the_text_reports_flag_lines_name_the_row_when_two_models_share_a_test(tmp_path):
    """Two models measured pp512: the text report listed `- flags of pp512 ub512: noisy` twice, naming
    neither model. Each flag line names its row as the table does (the test and the model)."""
    from click.testing import CliRunner

    from toolkit.cli.main import cli
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for name in ("model-a", "model-b"):
        r = make_record("cpu", "cpu", p=512, avg=100.0, sd=30.0)
        r.model.name, r.model.sha256 = name, name[-1] * 64
        store.add_result(r)
    args = ["report", "--results", str(tmp_path / "results"), "--format", "text"]
    res = CliRunner().invoke(cli, args, env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    lines = [x for x in res.stdout.splitlines() if x.startswith("- flags of ")]
    assert len(lines) == 2 and "model-a" in lines[0] and "model-b" in lines[1], lines


def test_the_verdict_says_two_images_measured_different_models(tmp_path):
    """A bench of the tiny model beside an imported table of another model: the verdict advised `pick
    images with --image`, which cannot help; it says what keeps them apart and what to run."""
    from click.testing import CliRunner

    from toolkit.cli.main import cli
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for image, model, mtype, params in (
        ("cpu", "tiny", "qwen3moe ?B F16", 790000),
        ("pub", "llama-3b", "llama 3B Q4_K - Medium", 3210000000),
    ):
        r = make_record(image, "cpu", p=512, avg=100.0)
        r.model.name, r.model.sha256 = model, model[0] * 64
        r.raw = {**r.raw, "model_type": mtype, "model_n_params": params, "model_size": params}
        store.add_result(r)
    args = ["report", "--results", str(tmp_path / "results"), "--format", "github"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    # the command as the toolkit's own code span (fix49a: the line is a Prose; its names are escaped)
    bench = f"toolkit bench --results {tmp_path / 'results'} -i cpu -m llama-3b"  # the folder read (fix47b)
    assert f"they measured different models; measure llama-3b on each (`{bench}`)" in res.stdout
    assert "pick images with --image" not in res.stdout


def test_a_filter_that_matches_nothing_lists_the_newest_runs_first(tmp_path):
    """`report --run nope` listed run ids in text order (an `import-...` run always last, whatever its
    date); they are listed newest first, as written."""
    from click.testing import CliRunner

    from toolkit.cli.main import cli
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for run in ("20261204T230000Z-bbbbbb", "import-20261204T220000Z-aaaaaa", "20261204T210000Z-cccccc"):
        r = make_record("cpu", "cpu", p=512, avg=100.0)
        r.run_id = run
        r.created = "2026-12-05T00:00:00+00:00"  # made after its run started (time_check holds it to that)
        store.add_result(r)
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "results"), "--run", "nope"])
    assert type(res.exception).__name__ == "BadInput"  # exit 4 through the CLI's main
    assert (
        "newest runs first: 20261204T210000Z-cccccc, import-20261204T220000Z-aaaaaa, 20261204T230000Z-bbbbbb"
        in str(res.exception)
    )
