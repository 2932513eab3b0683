"""`toolkit bench`'s plan line counts what the run will measure, as it will run, and estimates its
measuring time from earlier records of the same tests on this host (toolkit/bench/run.py _plan,
plan_run; each runner's Runner.cases and Runner.estimate, e.g. llama_depth.measured_seconds). The
runs stop at the engine (DOCKER_HOST points nowhere, exit 5) or are dry runs: the plan is printed
before any container."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.project import ROOT, mutate, seed_current_build, write_matrix
from tests.support.records import make_record
from toolkit.bench.runners.base import sha256_file
from toolkit.results.records import ResultStore

GONE = "unix:///nonexistent/docker.sock"


def tk(project, *args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DOCKER_HOST": GONE}
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args, "--matrix", str(project / "matrix.yaml")],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def plan_line(res) -> str:
    return next((ln for ln in res.stderr.splitlines() if ln.startswith("plan: ")), "")


def identity_of(project, name="tiny-qwen3moe") -> str:
    """The sha256 model `name`'s records carry (a file's, a checkpoint folder's tree digest), the model
    generated first."""
    from toolkit.bench.runners.base import tree_sha256
    from toolkit.matrix.api import load_matrix
    from toolkit.models.tiny import ensure_model_file

    lm = load_matrix(project / "matrix.yaml")
    model = next(m for m in lm.m.models if m.name == name)
    path = ensure_model_file(lm.resolve(model.path), model.generate)
    return sha256_file(path) if path.is_file() else tree_sha256(lm, path)[0]


def one_case(project, matrix_data, images=("cpu",), models=("tiny-qwen3moe",), depth=False, **bench):
    """pp512 at ub512 (5 repetitions) over `bench`; the models' depth sweeps only with `depth`."""
    d = mutate(matrix_data, ["bench", "n_prompt"], [512])
    d["bench"].update({"n_gen": [0], "n_ubatch": [512], "repetitions": 5, **bench})
    d["images"] = [i for i in d["images"] if i["name"] in images]
    d["models"] = [
        m if depth else {k: v for k, v in m.items() if k != "depth"}
        for m in d["models"]
        if m["name"] in models
    ]
    write_matrix(project, d)
    return d


def test_plan_counts_only_pairs_that_run_here(project, matrix_data):
    """cpu built (current), cpu2 the same image unbuilt, vulkan without a GPU; the tiny model and the
    17 GB one that is absent: one pair runs, and the plan says 10 cases of 1 pair, not 5 pairs: the
    bench axes' 8 and the tiny model's depth sweep's 2 (pp512 and tg128 at depth 512; at depth 0 they
    are main-sweep cases)."""
    d = matrix_data
    cpu2 = {**next(i for i in d["images"] if i["name"] == "cpu"), "name": "cpu2"}
    d["images"] = [i for i in d["images"] if i["name"] in ("cpu", "vulkan")] + [cpu2]
    write_matrix(project, d)
    seed_current_build(project, "cpu")
    res = tk(project, "bench")
    assert res.returncode == 5, res.stderr  # the engine: after the plan
    assert plan_line(res).startswith(
        "plan: 10 test cases (1 image/model pair x 10 cases, 5 repetitions each; 2 of the 10 in depth "
        "sweeps: models[].depth)"
    ), res.stderr


def test_plan_estimate_is_of_the_same_test_on_this_host(project, matrix_data):
    """pp512 at ub512 took 1 s per repetition (512 tok/s) here: 5 repetitions, 5 s. Newer records of
    pp512 at another micro-batch (a tune trial) and of pp512 ub512 on a campaign host are other tests
    or another machine: they must not move the estimate (they would make it 8.5 min / 26 min)."""
    one_case(project, matrix_data)
    seed_current_build(project, "cpu")
    store, sha = ResultStore(project / "results"), identity_of(project)
    same = make_record("cpu", "cpu", p=512, ub=512, avg=512.0, model="tiny-qwen3moe", host={}, sha256=sha)
    other_ub = make_record("cpu", "cpu", p=512, ub=64, avg=5.0, model="tiny-qwen3moe", host={}, sha256=sha)
    other_host = make_record(
        "cpu", "cpu", p=512, ub=512, avg=0.5, model="tiny-qwen3moe", host={"key": "node7"}, sha256=sha
    )
    for r, created in (
        (same, "2026-07-01T00:00:00+00:00"),
        (other_ub, "2026-07-02T00:00:00+00:00"),
        (other_host, "2026-07-03T00:00:00+00:00"),
    ):
        store.add_result(r.model_copy(update={"created": created, "run_id": created}))
    res = tk(project, "bench")
    assert "; estimated measuring time 5 s, from earlier runs" in plan_line(res), res.stderr


def test_plan_estimate_is_the_time_the_repetitions_took_not_tokens_over_their_mean(project, matrix_data):
    """A busy host's repetitions of pp512 at 512 and 2048 tok/s took 1 s + 0.25 s each (0.625 s a
    repetition on average): 5 repetitions, 3 s. 512 tokens / their mean tok/s (1280) says 2 s: on the
    fresh Debian 12 stand-in's noisy run (tg128 at 6-940 tok/s) the plan said 2 min for 3.3 min."""
    one_case(project, matrix_data)
    seed_current_build(project, "cpu")
    rec = make_record(
        "cpu", "cpu", p=512, ub=512, avg=1280.0, model="tiny-qwen3moe", host={}, sha256=identity_of(project)
    )
    store = ResultStore(project / "results")
    store.add_result(rec.model_copy(update={"samples_ts": [512.0, 2048.0], "stddev_ts": 1086.1}))
    res = tk(project, "bench")
    assert "; estimated measuring time 3 s, from earlier runs" in plan_line(res), res.stderr


def test_plan_estimate_counts_each_pairs_canary_as_it_took_last_time_on_that_digest(project, matrix_data):
    """The canary runs before the sweep (0.5-1.5 s on the CPU image, minutes on lavapipe the first
    time): the estimate adds the newest canary that ran on the same digest and model (7 s here, after
    an older 30 s one and a newer one that could not run), and says it does."""
    import json

    one_case(project, matrix_data)
    seed_current_build(project, "cpu")
    store, sha = ResultStore(project / "results"), identity_of(project)
    rec = make_record("cpu", "cpu", p=512, ub=512, avg=512.0, model="tiny-qwen3moe", host={}, sha256=sha)
    digest = store.latest_build("cpu").digest
    store.add_result(rec.model_copy(update={"image": rec.image.model_copy(update={"digest": digest})}))
    canaries = store.root / digest.split(":")[1][:12] / "canary.jsonl"
    canaries.parent.mkdir(parents=True, exist_ok=True)
    rows = [("ok", 30.0, "2026-07-01"), ("ok", 7.0, "2026-07-02"), ("unchecked", 0.0, "2026-07-03")]
    canaries.write_text(
        "".join(
            json.dumps(
                {"model": "tiny-qwen3moe", "model_sha256": sha, "status": st, "seconds": s, "created": c}
            )
            + "\n"
            for st, s, c in rows
        )
    )
    res = tk(project, "bench")
    assert (
        "; estimated measuring time 12 s and 1 correctness canary, from earlier runs, plus start-up"
        in plan_line(res)
    ), res.stderr
    # every case measured before: the line says so and how to skip them (a newcomer's second bench
    # measured all again without a word)
    assert plan_line(res).endswith(
        "; all measured before (`--resume` measures only what an image digest + model lacks)"
    ), res.stderr


def test_resume_plan_counts_only_the_missing_cases(project, matrix_data):
    """Two cases (pp512, pp2048 at ub512); pp512 is measured on this digest + model: --resume plans 1."""
    one_case(project, matrix_data, n_prompt=[512, 2048])
    build = seed_current_build(project, "cpu")
    tk(project, "bench")  # generates the tiny model (then stops at the engine)
    _measured(project, build, sha256_file(project / "models" / "tiny-qwen3moe.gguf"), p=512, ub=512)
    res = tk(project, "bench", "--resume")
    assert plan_line(res).startswith(
        "plan: 1 test cases (1 image/model pair x 2 cases, 1 already measured: --resume"
    ), res.stderr
    res = tk(project, "bench")
    assert plan_line(res).startswith("plan: 2 test cases (1 image/model pair x 2 cases, 5 repetitions"), (
        res.stderr
    )
    _measured(project, build, sha256_file(project / "models" / "tiny-qwen3moe.gguf"), p=2048, ub=512)
    res = tk(project, "bench", "--resume")  # a newcomer's --resume with nothing left printed no plan line
    assert plan_line(res).startswith("plan: nothing left to measure: every case was measured before"), (
        res.stderr
    )


def test_a_resume_dry_run_prints_the_commands_resume_runs(project, matrix_data):
    """`toolkit bench --resume --dry-run` (a newcomer checking what --resume will do after adding a
    prompt length) planned and printed the whole sweep (`-p 512,2048`), though the real run measures
    only the missing cases: the dry run ignored --resume. Now its plan and commands are the real run's:
    the missing cases' processes, or the `resumed` line when none is missing (nothing run either way)."""
    one_case(project, matrix_data, n_prompt=[512, 2048])
    build = seed_current_build(project, "cpu")
    tk(project, "bench")  # generates the tiny model (then stops at the engine)
    sha = sha256_file(project / "models" / "tiny-qwen3moe.gguf")
    _measured(project, build, sha, p=512, ub=512)
    res = tk(project, "bench", "--resume", "--dry-run")
    assert res.returncode == 0 and plan_line(res).startswith(
        "plan: 1 test cases (1 image/model pair x 2 cases, 1 already measured: --resume"
    ), res.stderr
    sweeps = [ln for ln in res.stdout.splitlines() if "llama-bench -m" in ln]
    assert (
        len(sweeps) == 1 and "(sweep, resumed: 1 of 2 cases of the main sweep were missing)" in sweeps[0]
    ), res.stdout
    assert " -p 2048 " in sweeps[0] and "512" not in sweeps[0].split("llama-bench", 1)[1].split("-b")[0]
    res = tk(project, "bench", "--dry-run")  # without --resume: the whole sweep, as before
    assert " -p 512,2048 " in res.stdout, res.stdout
    _measured(project, build, sha, p=2048, ub=512)
    res = tk(project, "bench", "--resume", "--dry-run")
    assert plan_line(res).startswith("plan: nothing left to measure"), res.stderr
    assert "llama-bench -m" not in res.stdout and "resumed: nothing to measure: all 2 cases" in res.stdout, (
        res.stdout
    )


def test_a_model_file_nothing_fetches_is_told_how_to_get_it_there(project, matrix_data):
    """A model a user added to matrix.yaml (path only: no hf, no generate) whose file is not there: the
    bench said "model file ... is absent" and stopped; the dry run "a real run skips this pair". Each
    now says the way out: copy the file there, or give models[NAME].hf for `toolkit fetch-model`."""
    d = one_case(project, matrix_data)
    d["models"].append({"name": "mine", "path": "models/mine.gguf", "format": "gguf"})
    write_matrix(project, d)
    seed_current_build(project, "cpu")
    from toolkit.bench.runners.base import resolve_model
    from toolkit.matrix.api import load_matrix

    fix = "copy the file there, or give models[mine].hf (its Hugging Face repo) so `toolkit fetch-model mine`"
    res = tk(project, "bench", "-m", "mine", "--dry-run")
    assert "mine.gguf is absent here" in res.stdout and fix in res.stdout, res.stdout + res.stderr
    lm = load_matrix(project / "matrix.yaml")  # the real run's line (its engine is not here: asked directly)
    path, why = resolve_model(lm, next(m for m in lm.m.models if m.name == "mine"))
    assert path is None and why.endswith("mine.gguf is absent; " + fix + " fetches it"), why


def _measured(project, build, sha, **kw):
    """Store an ok record of the tiny model on `build` (make_record's fields `kw`)."""
    r = make_record("cpu", "cpu", model="tiny-qwen3moe", host={}, avg=512.0, **kw)
    r = r.model_copy(
        update={
            "model": r.model.model_copy(update={"sha256": sha}),
            "image": r.image.model_copy(update={"digest": build.digest}),
        }
    )
    ResultStore(project / "results").add_result(r)


def test_the_plan_counts_the_depth_sweep_and_resume_sees_its_cases(project, matrix_data):
    """The tiny model's depth sweep (pp512 + tg128 at depths 0 and 512, ub512) beside pp512 ub512:
    pp512 @ d0 is the main sweep's case (measured once), so the depth sweep adds 3. With pp512 @ d512
    measured on this digest + model, --resume plans the 3 others."""
    one_case(project, matrix_data, depth=True)
    build = seed_current_build(project, "cpu")
    res = tk(project, "bench")
    assert plan_line(res).startswith(
        "plan: 4 test cases (1 image/model pair x 4 cases, 5 repetitions each; 3 of the 4 in depth sweeps"
    ), res.stderr
    sha = sha256_file(project / "models" / "tiny-qwen3moe.gguf")
    _measured(project, build, sha, p=512, ub=512, raw={"n_depth": 512})
    res = tk(project, "bench", "--resume")
    assert plan_line(res).startswith(
        "plan: 3 test cases (1 image/model pair x 4 cases, 1 already measured: --resume, 5 repetitions "
        "each; 2 of the 3 in depth sweeps"
    ), res.stderr


def test_a_model_format_the_runner_cannot_read_is_said_not_dropped(project, matrix_data):
    d = one_case(project, matrix_data)
    (project / "models" / "hfdir").mkdir(parents=True)
    (project / "models" / "hfdir" / "config.json").write_text("{}")
    d["models"].append({"name": "hfm", "path": "models/hfdir", "format": "hf", "runners": ["llama-bench"]})
    write_matrix(project, d)
    res = tk(project, "bench", "--dry-run", "-i", "cpu", "-m", "hfm")
    assert res.returncode == 0, res.stderr
    assert (
        "cpu x hfm: skipped: runner llama-bench reads gguf models, not hf: remove llama-bench from "
        "models[hfm].runners" in res.stdout
    ), res.stdout


def test_tune_without_model_skips_a_folder_and_takes_the_next_model_file(project, matrix_data):
    """`toolkit tune -i cpu` without -m: the first model whose path is a file (a folder where a GGUF
    should be was taken, then refused with exit 4)."""
    from toolkit.bench import tune
    from toolkit.matrix.api import load_matrix

    d = matrix_data
    (project / "models" / "adir").mkdir(parents=True)
    d["models"].insert(0, {"name": "dirmodel", "path": "models/adir", "format": "gguf"})
    write_matrix(project, d)
    lm = load_matrix(project / "matrix.yaml")
    assert tune.model_for(lm, None, lm.m.image("cpu")).name == "tiny-qwen3moe"


def _with_vllm_pair(project, matrix_data, **vllm):
    """The cpu image (llama-bench, the tiny GGUF) and `vcpu`, the same image run by the vLLM runner, with
    a tiny checkpoint the run generates: pp512 + tg128, vLLM serving at concurrency 1 and 2."""
    d = one_case(project, matrix_data, n_gen=[128])
    cpu = next(i for i in d["images"] if i["name"] == "cpu")
    d["images"].append({**cpu, "name": "vcpu", "runner": "vllm"})
    d["models"].append(
        {
            "name": "tiny-hf",
            "path": "models/tiny-hf",
            "format": "hf",
            "generate": "tiny-qwen3moe-hf",
            "runners": ["vllm"],
        }
    )
    d["vllm"] = {"concurrency": [1, 2], "num_iters": 4, **vllm}
    write_matrix(project, d)
    seed_current_build(project, "cpu")
    seed_current_build(project, "vcpu")
    return d


def test_plan_counts_the_cases_of_every_runner(project, matrix_data):
    """Each runner says what it will measure (Runner.cases): llama-bench pp512 + tg128 (5 repetitions),
    vLLM pp512, tg128 (4 timed iterations each) and two served levels (one run each)."""
    _with_vllm_pair(project, matrix_data)
    res = tk(project, "bench")
    assert res.returncode == 5, res.stderr  # the engine: after the plan
    assert plan_line(res).startswith(
        "plan: 6 test cases (1 image/model pair x 2 cases + 1 image/model pair x 4 cases, 1-5 repetitions each)"
    ), res.stderr


def test_plan_estimates_vllm_cases_from_their_measured_time_old_names_included(project, matrix_data):
    """vLLM's estimate is the measured time its records state (timing.tests_s; `measured_s` in records
    written before the runners shared one set of timing names): pp512 took 2 s, served c1 3 s."""
    _with_vllm_pair(project, matrix_data)
    store, sha = ResultStore(project / "results"), identity_of(project, "tiny-hf")
    pp = make_record("vcpu", "cpu", p=512, avg=256.0, model="tiny-hf", host={}, sha256=sha).model_copy(
        update={"runner": "vllm", "method": "vllm-bench-latency-prefill", "timing": {"tests_s": 2.0}}
    )
    served = make_record(
        "vcpu", "cpu", p=512, n=128, avg=50.0, model="tiny-hf", host={}, sha256=sha
    ).model_copy(
        update={
            "runner": "vllm",
            "method": "vllm-bench-serve",
            "axis": "served",
            "test": "serve pp512+tg128 c1",
            "engine": {"concurrency": 1},
            "timing": {"measured_s": 3.0},  # the old name
        }
    )
    for r in (pp, served):
        store.add_result(r)
    res = tk(project, "bench", "-i", "vcpu")
    assert plan_line(res) == (
        "plan: 4 test cases (1 image/model pair x 4 cases, 1-4 repetitions each); estimated measuring "
        "time 5 s for the 2 cases measured before (2 never measured), from earlier runs, plus start-up"
    ), res.stderr


def test_the_estimate_and_resume_count_one_model_file_under_two_names_alike(project, matrix_data):
    """nc51 S2: `tiny2`, a second matrix entry generating the same file, measured pp512 and its canary
    ran: `bench -m tiny-qwen3moe` planned "no earlier run of these tests" (the estimate and the canary's
    matched records by model name) beside a --resume that found every case measured (digest + model
    sha256). Both now match the model by its sha256 (base.model_identity), as --resume does."""
    import json

    d = one_case(project, matrix_data)
    tiny = next(m for m in d["models"] if m["name"] == "tiny-qwen3moe")
    d["models"].append({**tiny, "name": "tiny2", "path": "models/tiny2.gguf"})
    write_matrix(project, d)
    build = seed_current_build(project, "cpu")
    sha = identity_of(project)
    assert identity_of(project, "tiny2") == sha  # the same bytes
    later = make_record("cpu", "cpu", model="tiny2", host={}, avg=512.0, p=512, ub=512, sha256=sha)
    ResultStore(project / "results").add_result(
        later.model_copy(
            update={
                "image": later.image.model_copy(update={"digest": build.digest}),
                "run_id": "r2",
                "created": "2026-07-02T00:00:00+00:00",
            }
        )
    )
    canaries = project / "results" / build.digest.split(":")[1][:12] / "canary.jsonl"
    canaries.parent.mkdir(parents=True, exist_ok=True)
    row = {"model": "tiny2", "model_sha256": sha, "status": "ok", "seconds": 7.0, "created": "2026-07-02"}
    canaries.write_text(json.dumps(row) + "\n")
    res = tk(project, "bench", "-m", "tiny-qwen3moe")
    assert plan_line(res) == (
        "plan: 1 test cases (1 image/model pair x 1 case, 5 repetitions each); estimated measuring time 12 s "
        "and 1 correctness canary, from earlier runs, plus start-up; all measured before (`--resume` "
        "measures only what an image digest + model lacks)"
    ), res.stderr
    res = tk(project, "bench", "-m", "tiny-qwen3moe", "--resume")
    assert plan_line(res).startswith("plan: nothing left to measure"), res.stderr
