"""push tags, published-run folders and the reproduce verdict, without a Docker engine.

Records are built the way `toolkit bench` builds them (llama_bench.check.normalize over a llama-bench row,
the command from bench.container_spec); the end-to-end tests on a real registry are in
tests/test_reproduce.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.project import write_matrix
from tests.support.runs import AXES, DIGEST, bench_records
from toolkit.cli.main import cli
from toolkit.cli.publish import export_run, push, reproduce
from toolkit.core.errors import BadInput
from toolkit.matrix.api import BenchAxes, load_matrix
from toolkit.models.tiny import generate_tiny_qwen3moe, sha256_file
from toolkit.publish import push as publish
from toolkit.publish import repro_output, run_folder
from toolkit.publish import reproduce as repro
from toolkit.results.records import BenchRecord, BuildRecord, ImageRef, ModelRef, ResultStore
from toolkit.runtimes.llama_bench import args as lb_args
from toolkit.runtimes.llama_bench import check

for _cmd in (push, export_run, reproduce):
    if _cmd.name not in cli.commands:
        cli.add_command(_cmd)

COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
LABELS = {
    "org.opencontainers.image.version": "0c1e57098",
    "org.opencontainers.image.revision": COMMIT,
    "org.opencontainers.image.created": "2026-11-29T16:58:43Z",
    "org.toolkit.backend": "cpu",
    "org.toolkit.runner": "llama-bench",
    "org.toolkit.template-hash": "ab" * 32,
}


def build_record(**kw) -> BuildRecord:
    base = dict(
        image="cpu",
        ref="toolkit/cpu:0c1e57098-28d4fa04",
        digest=DIGEST,
        backend="cpu",
        template="llama-cpu.Dockerfile.j2",
        template_hash="ab" * 32,
        source_commit=COMMIT,
        labels=LABELS,
        created="2026-11-29T17:00:00+00:00",
    )
    return BuildRecord(**{**base, **kw})


@pytest.fixture
def cpu_project(tmp_path, matrix_data) -> Path:
    import shutil

    from tests.support.project import ROOT

    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    matrix_data["images"] = [i for i in matrix_data["images"] if i["name"] == "cpu"]
    write_matrix(tmp_path, matrix_data)
    store = ResultStore(tmp_path / "results")
    store.add_build(build_record())
    store.add_build(
        build_record(
            repo_digests=[f"127.0.0.1:5000/r9700/cpu@sha256:{'e' * 64}"],
            pushed=["127.0.0.1:5000/r9700/cpu:cpu-latest"],
        )
    )
    for r in bench_records("run-a"):
        store.add_result(r)
    return tmp_path


# ------------------------------------------------------------------------------------------- tags


@pytest.mark.parametrize(
    ("backend", "labels", "tag"),
    [
        pytest.param("cpu", {}, "0c1e57098-cpu-cpu-0c1e57098-20261129", id="cpu"),
        pytest.param(
            "rocm",
            {"org.opencontainers.image.version": "b7200", "org.toolkit.gfx-targets": "gfx1201"},
            "b7200-rocm-gfx1201-0c1e57098-20261129",
            id="rocm-gfx1201",
        ),
        pytest.param(
            "rocm",
            {
                "org.opencontainers.image.version": "0.16.0+rocm7.2",
                "org.toolkit.gfx-targets": "gfx1100, gfx1201",
            },
            "0.16.0_rocm7.2-rocm-gfx1100_gfx1201-0c1e57098-20261129",
            id="vllm-two-targets-plus-sign",
        ),
        pytest.param("vulkan", {}, "0c1e57098-vulkan-anygpu-0c1e57098-20261129", id="vulkan-any-gpu"),
    ],
)
def test_fixed_tag_names_version_backend_target_commit_and_build_date(backend, labels, tag):
    rec = build_record(backend=backend, labels={**LABELS, **labels})
    assert publish.fixed_tag(rec) == tag
    assert publish.moving_tag(rec) == f"{backend}-latest"


@pytest.mark.parametrize(
    "value", ["127.0.0.1:5000/r9700", "ghcr.io/acme/r9700", "localhost:5000", "registry.example"]
)
def test_registry_accepts_host_port_namespace(value):
    assert publish.parse_registry(value + "/") == value


@pytest.mark.parametrize(
    "value", ["http://127.0.0.1:5000/x", "127.0.0.1:5000/UPPER", "", "host:port/x", "a b/c"]
)
def test_registry_rejects_schemes_and_bad_names(value):
    with pytest.raises(BadInput, match="HOST"):
        publish.parse_registry(value)


def test_push_without_a_registry_is_bad_input(cpu_project):
    res = CliRunner().invoke(cli, ["push", "--matrix", str(cpu_project / "matrix.yaml")])
    assert isinstance(res.exception, BadInput) and "--registry" in str(res.exception)
    assert res.exception.exit_code == 4


# ------------------------------------------------------------------------------------ run folders


def test_axes_round_trip_through_the_recorded_command():
    cmd = bench_records("r")[0].command
    assert cmd[:3] == ["docker", "run", "--rm"]
    got = lb_args.axes_from_args(cmd)
    assert BenchAxes(**got) == AXES
    assert (
        run_folder.axes_from_records(bench_records("r"))["threads"] == 2
    )  # pinned from llama-bench's choice


def test_axes_from_records_without_a_command():
    rs = [r.model_copy(update={"command": []}) for r in bench_records("r")]
    axes = run_folder.axes_from_records(rs)
    assert (axes["n_prompt"], axes["n_gen"], axes["n_ubatch"], axes["repetitions"]) == (
        [64, 256],
        [16],
        [32, 512],
        3,
    )


def test_export_run_writes_a_self_contained_folder(cpu_project, tmp_path):
    out = tmp_path / "published"
    res = CliRunner().invoke(
        cli,
        ["export-run", "run-a", "--out", str(out), "--matrix", str(cpu_project / "matrix.yaml")],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    assert "6 results, 1 image(s), 1 model(s)" in res.output
    for name in ("run.json", "results.jsonl", "builds.jsonl", "matrix.yaml", "README.md"):
        assert (out / name).is_file(), name
    assert (out / "Dockerfile.templates" / "llama-cpu.Dockerfile.j2").is_file()
    run = json.loads((out / "run.json").read_text())
    assert run["run_id"] == "run-a" and run["records"] == {"total": 6, "ok": 6, "failed": 0}
    (im,) = run["images"]
    assert im["digest"] == DIGEST and im["repo_digests"] == [f"127.0.0.1:5000/r9700/cpu@sha256:{'e' * 64}"]
    assert im["labels"]["org.toolkit.template-hash"] == "ab" * 32 and im["source_commit"] == COMMIT
    (model,) = run["models"]
    assert model == {
        **model,
        "name": "tiny-qwen3moe",
        "sha256": "cd" * 32,
        "generate": "tiny-qwen3moe",
        "matrix_path": "models/tiny-qwen3moe.gguf",
        "file": "tiny-qwen3moe.gguf",
    }
    assert run["bench"]["n_prompt"] == [64, 256] and run["bench"]["repetitions"] == 3
    assert run["host"]["cpu_model"] == "Xeon"
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 6 and {r["image"]["digest"] for r in results} == {DIGEST}
    assert len((out / "builds.jsonl").read_text().splitlines()) == 2
    readme = (out / "README.md").read_text()
    assert f"docker pull 127.0.0.1:5000/r9700/cpu@sha256:{'e' * 64}" in readme
    assert "toolkit reproduce ." in readme and "pp256 ub512" in readme and "cd" * 32 in readme
    # the same run again into the same folder is fine; another run into it is not
    run_folder.export_run(
        ResultStore(cpu_project / "results"), "run-a", out, load_matrix(cpu_project / "matrix.yaml")
    )
    store = ResultStore(cpu_project / "results")
    for r in bench_records("run-b"):
        store.add_result(r)
    with pytest.raises(BadInput, match="not empty"):
        run_folder.export_run(store, "run-b", out, None)


def test_export_of_an_unpushed_image_says_reproduce_needs_rebuild(cpu_project, tmp_path):
    store = ResultStore(cpu_project / "results")
    store.builds_file.write_text(build_record().model_dump_json() + "\n")
    run = run_folder.export_run(store, "run-a", tmp_path / "out", None)
    assert any("never pushed" in n and "--rebuild" in n for n in run.notes)


def test_export_of_an_unknown_run_lists_the_latest_runs(cpu_project, tmp_path):
    """`export-run` and `reproduce` of an unknown run id answer with the stored runs themselves (the
    hint once sent the user to `toolkit report`, which lists only the runs it shows)."""
    with pytest.raises(BadInput, match=r"no results of run 'no-such-run'.*newest first: run-a \(cpu, "):
        run_folder.export_run(ResultStore(cpu_project / "results"), "no-such-run", tmp_path / "out", None)
    res = CliRunner().invoke(cli, ["reproduce", "no-such-run", "--matrix", str(cpu_project / "matrix.yaml")])
    assert isinstance(res.exception, BadInput) and "newest first: run-a (cpu, " in str(res.exception)


@pytest.mark.parametrize("source", ["llamabench-0c1e57098-cpu.jsonl", "llamabench-b5163-readme.jsonl"])
def test_export_of_an_imported_run_with_llamabench_minus_one_values(tmp_path, source):
    """llama-bench writes n_gpu_layers -1 (all layers, its default) and flash_attn -1 (auto): the
    matrix takes them, so an imported run exports and its axes are a valid matrix."""
    from toolkit.results import importer

    store = ResultStore(tmp_path / "results")
    importer.import_files(store, [Path(__file__).parent / "data" / source], label="x")
    (run_id,) = {r.run_id for r in store.results()}
    res = CliRunner().invoke(
        cli, ["export-run", run_id, "--results", str(store.root), "--out", str(tmp_path / "out")]
    )
    assert res.exit_code == 0, res.output
    bench = json.loads((tmp_path / "out" / "run.json").read_text())["bench"]
    assert bench["n_gpu_layers"] == [-1] and BenchAxes(**bench).n_gpu_layers == [-1]
    assert BenchAxes(flash_attn=[-1, 0, 1]).flash_attn == [-1, 0, 1]
    with pytest.raises(ValueError, match="between -1 and"):
        BenchAxes(n_gpu_layers=[-2])
    with pytest.raises(ValueError, match="between 0 and"):
        BenchAxes(n_ubatch=[-1])


def test_export_keeps_axes_a_matrix_cannot_express_and_reproduce_says_why(tmp_path):
    """Any stored record exports: axes the matrix refuses are kept as measured, with a note, and
    reproduce refuses them by name (exit 4), never a traceback."""
    store = ResultStore(tmp_path / "results")
    for r in bench_records("odd"):  # its test and axis named as its counts say (a record agrees with itself)
        names = {
            "test": check.test_name(5_000_000, r.n_gen),
            "axis": check.axis_of(5_000_000, r.n_gen),
        }
        raw = {**r.raw, "n_prompt": 5_000_000}  # and its raw row (a record holds its row's counts)
        store.add_result(r.model_copy(update={"command": [], "n_prompt": 5_000_000, "raw": raw, **names}))
    run = run_folder.export_run(store, "odd", tmp_path / "out", None)
    assert 5_000_000 in run.bench["n_prompt"] and any("cannot re-run" in n for n in run.notes)
    with pytest.raises(BadInput, match="cannot be re-run: matrix.yaml does not take them"):  # exit 4
        repro.reproduce(str(tmp_path / "out"))


# ---------------------------------------------------------------------------------------- reproduce


def test_same_numbers_reproduce_and_half_the_speed_does_not():
    recorded = bench_records("a")
    rows = repro.compare_records(recorded, bench_records("b", scale=1.02), threshold=5)
    # tg16 at ub32 and ub512 is one row, as the report folds it (the micro-batch does not apply to tg)
    assert len(rows) == 5 and all(r.ok for r in rows) and [r.test for r in rows].count("tg16") == 1
    assert rows[0].delta == pytest.approx(0.02)
    assert rows[0].noise == pytest.approx(
        2 * (2 * 0.05**2) ** 0.5
    )  # noise_band: 2 x combined relative stddev, 14.1 %
    slow = repro.compare_records(
        [r.model_copy(update={"avg_ts": r.avg_ts * 0.5}) for r in recorded], bench_records("b"), threshold=5
    )
    assert not any(r.ok for r in slow) and slow[0].delta == pytest.approx(1.0)


def test_threshold_is_the_floor_of_the_noise_and_missing_tests_fail():
    recorded = bench_records("a", sd=0.0)
    again = [r for r in bench_records("b", scale=1.08, sd=0.0) if (r.n_prompt, r.n_ubatch) != (256, 512)]
    rows = repro.compare_records(recorded, again, threshold=10)  # tg16 at two ub: one row, as in the report
    assert [r.ok for r in rows].count(True) == 4 and rows[0].noise == pytest.approx(0.10)
    missing = [r for r in rows if r.reproduced is None]
    assert len(missing) == 1 and not missing[0].ok
    rep = repro.Reproduction("a", "b", Path("/x"), Path("/x/reproduce/results"), 10, rows=rows)
    assert not rep.reproduced and rep.verdict == "not reproduced"
    text = repro_output.format_reproduction(rep)
    assert "| missing" in text and "verdict: not reproduced (4/5 tests within noise" in text
    assert repro_output.reproduction_json(rep)["rows"][0]["delta"] == pytest.approx(0.08)


def test_host_differences_name_what_changed():
    diff = repro.host_differences(
        {"cpu_model": "A", "kernel": "6.8", "docker": {"server_version": "26.1"}},
        {"cpu_model": "B", "kernel": "6.8", "docker": {"server_version": "27.0"}},
    )
    assert diff == {"cpu_model": ("A", "B"), "docker": ("26.1", "27.0")}


def test_generated_tiny_model_is_regenerated_with_the_recorded_bytes(tmp_path):
    sha = sha256_file(generate_tiny_qwen3moe(tmp_path / "a" / "tiny.gguf"))
    m = run_folder.PublishedModel(
        name="tiny-qwen3moe", file="tiny-qwen3moe.gguf", sha256=sha, size_bytes=1, generate="tiny-qwen3moe"
    )
    (tmp_path / "work" / "models").mkdir(parents=True)
    (tmp_path / "work" / "models" / "tiny-qwen3moe.gguf").write_bytes(b"stale")  # replaced, not trusted
    path, status = repro.locate_model(m, tmp_path, tmp_path / "work", None)
    assert status == "generated" and sha256_file(path) == sha


def test_reproduce_names_the_missing_model_and_how_to_fetch_it(cpu_project, tmp_path):
    out = tmp_path / "published"
    store = ResultStore(cpu_project / "results")
    lm = load_matrix(cpu_project / "matrix.yaml")
    for r in bench_records("run-big", model_path="/elsewhere/Qwen3.gguf"):
        store.add_result(
            r.model_copy(update={"model": r.model.model_copy(update={"name": "qwen3-30b-a3b-q4kxl"})})
        )
    run_folder.export_run(store, "run-big", out, lm)
    res = CliRunner().invoke(cli, ["reproduce", str(out)])
    assert isinstance(res.exception, BadInput), res.output
    msg = str(res.exception)
    # the fetch reads the published folder's matrix (core.invocation.command: --matrix where not ./matrix.yaml)
    fetch = f"toolkit fetch-model --matrix {out / 'matrix.yaml'} qwen3-30b-a3b-q4kxl"
    assert "Qwen3.gguf" in msg and fetch in msg and "--model-dir" in msg


def test_reproduce_of_a_folder_without_run_json_is_bad_input(tmp_path):
    res = CliRunner().invoke(cli, ["reproduce", str(tmp_path)])
    assert isinstance(res.exception, BadInput) and "export-run" in str(res.exception)


def test_rebuild_refuses_changed_template_inputs_before_building(cpu_project, tmp_path):
    """A run id is exported to .toolkit/runs/<id>/ first; --rebuild checks the recorded template hash."""
    sha = sha256_file(generate_tiny_qwen3moe(tmp_path / "tiny.gguf"))
    store = ResultStore(cpu_project / "results")
    for r in bench_records("run-t", sha=sha):
        store.add_result(r)
    res = CliRunner().invoke(
        cli, ["reproduce", "run-t", "--rebuild", "--matrix", str(cpu_project / "matrix.yaml")]
    )
    assert isinstance(res.exception, BadInput), res.output
    assert "template inputs" in str(res.exception) and "ababababab" in str(res.exception)
    folder = cpu_project / ".toolkit" / "runs" / "run-t"
    assert (folder / "run.json").is_file() and (folder / "reproduce" / "Dockerfile.templates").is_dir()
    assert (folder / "reproduce" / "bench-matrix.yaml").is_file()


def test_reproduce_asks_each_recorded_runner_for_its_settings_block(tmp_path):
    """reproduce rebuilds each runner's settings block through the registry (Runner.settings_from_records):
    the run folder's matrix.yaml block, overridden by what that runner's records state; llama-bench has
    no block of its own. A checkpoint folder is given to the runners that measured it."""
    import yaml

    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {"vllm": {"num_iters": 7}, "sglang": {"attention_backend": "torch_native", "random_seed": 3}}
        )
    )
    model = ModelRef(name="ckpt", path="/m/ckpt", sha256="ab" * 32, size_bytes=1)

    def rec(runner: str, method: str, axis: str, engine_: dict) -> BenchRecord:
        return BenchRecord(
            run_id="r",
            created="2026-01-01T00:00:00+00:00",
            runner=runner,
            method=method,
            image=ImageRef(name=runner, ref="x", digest=DIGEST, backend="rocm"),
            model=model,
            test="pp512",
            axis=axis,
            n_prompt=512,
            avg_ts=100.0,
            engine=engine_,
        )

    recorded = [
        rec("vllm", "vllm-bench-latency-prefill", "prefill", {"max_num_batched_tokens": 512, "num_iters": 7}),
        rec("vllm", "vllm-bench-serve", "served", {"max_num_batched_tokens": 512, "concurrency": 2}),
        rec(
            "sglang",
            "sglang-bench-one-batch-prefill",
            "prefill",
            {"attention_backend": "triton", "decode_input_len": 16},
        ),
        rec("llama-bench", "llama-bench", "prefill", {}),
    ]
    blocks = repro._runner_settings(tmp_path, recorded)
    assert set(blocks) == {"vllm", "sglang"}
    assert (blocks["vllm"].num_iters, blocks["vllm"].max_num_batched_tokens, blocks["vllm"].concurrency) == (
        7,
        512,
        [2],
    )
    s = blocks["sglang"]
    assert (s.attention_backend, s.random_seed, s.decode_input_len) == ("triton", 3, None)  # 16: the default
    assert repro._runner_settings(tmp_path, recorded[-1:]) == {}
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    pm = run_folder.PublishedModel(name="ckpt", file="ckpt", sha256="ab" * 32, size_bytes=1)
    assert repro._model_spec(pm, ckpt, [r for r in recorded if r.runner == "sglang"]).runners == ["sglang"]
    assert repro._model_spec(pm, ckpt).runners == [
        "vllm",
        "sglang",
    ]  # the records do not say: every hf reader


def test_a_test_beyond_noise_on_a_flagged_cell_is_held_not_a_failed_reproduction(tmp_path):
    """Reproducer (newcomer): a recorded cell flagged `noisy; host-busy` re-ran 4x faster and the run was
    `not reproduced` with no flag shown, where compare holds such a cell. Records built as bench stores
    them (tests.test_report.make_record); no engine."""
    from tests.support.records import make_record
    from tests.support.telemetry_fakes import supporting_block
    from toolkit.publish import reproduce as rp

    rec = make_record("cpu", "cpu", p=512, avg=11313.0, sd=5227.0, gpu_info="")
    rec.__pydantic_extra__["flags"] = ["host-busy"]
    rec.telemetry = supporting_block(["host-busy"])  # stored with the block that raised it
    again = make_record("cpu", "cpu", p=512, avg=45172.0, sd=590.0, gpu_info="")
    (row,) = rp.compare_records([rec], [again], 5.0)
    assert not row.ok and row.held and row.status == "held: A:host-busy"
    rep = rp.Reproduction("r1", "r2", tmp_path, tmp_path, 5.0, rows=[row])
    assert not rep.reproduced and rep.verdict == rp.VERDICT_HELD
    text = repro_output.format_reproduction(rep)
    assert (
        "held: A:host-busy" in text
        and "1 beyond noise on a flagged cell (A: the recorded run, B: this one): held" in text
    )
    clean = make_record("cpu", "cpu", p=512, avg=11313.0, sd=100.0, gpu_info="")
    (row,) = rp.compare_records([clean], [again], 5.0)
    assert rp.Reproduction("r1", "r2", tmp_path, tmp_path, 5.0, rows=[row]).verdict == rp.VERDICT_NOT
    gone = make_record("cpu", "cpu", p=1024, avg=9000.0, sd=50.0, gpu_info="")
    rows = rp.compare_records([rec, gone], [again], 5.0)  # pp1024 not re-run: missing, said
    rep = rp.Reproduction("r1", "r2", tmp_path, tmp_path, 5.0, rows=rows)
    assert (
        rep.verdict == rp.VERDICT_NOT
        and "1 missing, 1 beyond noise on a flagged cell" in repro_output.format_reproduction(rep)
    )


def test_a_noisy_side_does_not_hide_a_large_slowdown():
    """nc47 S1: the noise band (2 x combined relative stddev) was held against 1 - B/A itself; with a
    side's relative stddev of 66 % the band is 134 %, and a slowdown can never pass 100 %: a 74x slower
    re-run (or compare side) was `within noise`. The band is a margin of the faster over the slower."""
    recorded = bench_records("a", sd=0.05)
    slow = repro.compare_records(recorded, bench_records("b", scale=1 / 74, sd=0.66), threshold=5)
    assert slow and not any(r.ok for r in slow)
    assert all(0 < r.noise < 1 for r in slow) and slow[0].delta == pytest.approx(1 / 74 - 1)
    # the same band said as a gain: B 1.3x faster with the same noise is within it
    fast = repro.compare_records(recorded, bench_records("b", scale=1.3, sd=0.66), threshold=5)
    assert all(r.ok for r in fast) and fast[0].noise == pytest.approx(2 * (0.05**2 + 0.66**2) ** 0.5)


def test_an_overflowing_noise_band_is_no_nan():
    """brk47: a stddev of 1.7e308 (stored records' stddev_ts is not bounded) over a tok/s of 0.1 made the
    noise band inf and the slowdown's noise inf / (1 + inf) = NaN: `±nan%`, max(nan, floor) kept NaN,
    and the row failed whatever its delta. An infinite band holds any slowdown."""
    recorded = bench_records("a", scale=0.001)
    for r in recorded:
        r.stddev_ts = 1.7e308
    rows = repro.compare_records(recorded, bench_records("b", scale=0.001 / 74), threshold=5)
    assert rows and all(r.noise == 1.0 and r.ok for r in rows), [(r.test, r.noise) for r in rows]
