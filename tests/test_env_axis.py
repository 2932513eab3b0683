"""The runtime environment as an axis (`bench.env` in matrix.yaml): validated and crossed like the
other axes, one container per combination with the variables set, each record carrying the values it
ran with (`env`, part of the one test identity and a table column where it varies) and the
container's effective environment (`environment`: the image's ENV overlaid with the run's -e).

The llama-bench runner runs here through a fake engine that answers with rows of a real llama-bench
0c1e57098 CPU run (tests/data/llamabench-0c1e57098-cpu.jsonl), reshaped to the asked lengths."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest
import yaml

from toolkit.analysis.tables import varying_columns
from toolkit.bench.runners.base import BenchOptions, RunContext, effective_environment
from toolkit.bench.runners.llama_bench import LlamaBenchRunner
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.results import identity
from toolkit.results.records import BuildRecord, ResultStore
from toolkit.spec.matrix import BenchAxes, load_matrix

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
ROW = json.loads((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
IMAGE_ENV = ["PATH=/opt/llama/bin:/usr/bin:/bin", "LD_LIBRARY_PATH=/opt/llama/lib", "OMP_PROC_BIND=false"]


class FakeEngine:
    """run_container answers every -p value with one llama-bench row; remembers each run's -e."""

    run_command = staticmethod(engine.run_command)
    EngineLost = engine.EngineLost
    Interrupted = engine.Interrupted

    def __init__(self):
        self.envs: list[dict[str, str]] = []

    def run_container(self, spec, timeout=None, on_stdout=None, on_stderr=None, **_):
        self.envs.append(dict(spec.environment))
        cmd = spec.command
        lines = []
        for p in cmd[cmd.index("-p") + 1].split(","):
            ts = [int(p) / (ns / 1e9) for ns in ROW["samples_ns"]]
            row = {**ROW, "n_prompt": int(p), "n_gen": 0, "samples_ts": ts, "avg_ts": statistics.mean(ts)}
            row.update(
                {
                    k: int(cmd[cmd.index(f) + 1])
                    for k, f in (("n_batch", "-b"), ("n_ubatch", "-ub"), ("n_gpu_layers", "-ngl"))
                }
            )
            row["stddev_ts"] = statistics.stdev(ts)
            lines.append(json.dumps(row))
            assert on_stdout is not None
            on_stdout(lines[-1])
        return engine.RunOutcome(0, "\n".join(lines) + "\n", "", 0.5)

    def inspect_image(self, ref):
        return engine.ImageInfo(id=ref, size=1, labels={}, repo_digests=[], tags=[], env=list(IMAGE_ENV))

    def volume_exists(self, name):  # Vulkan shader cache (not used by the CPU image)
        return True

    def ensure_volume(self, name, labels):
        pass


def _ctx(tmp_path: Path, fake: FakeEngine, env_axis: dict) -> RunContext:
    proj = tmp_path / "proj"
    shutil.copytree(ROOT / "Dockerfile.templates", proj / "Dockerfile.templates")
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["bench"] = {
        "n_prompt": [64, 128],
        "n_gen": [0],
        "n_ubatch": [64],
        "n_batch": [512],
        "n_gpu_layers": [0],
        "repetitions": 2,
        "env": env_axis,
    }
    (proj / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    lm = load_matrix(proj / "matrix.yaml")
    spec = lm.m.image("cpu")
    model = next(m for m in lm.m.models if m.name == "tiny-qwen3moe")
    build = BuildRecord(
        image="cpu",
        ref="toolkit/cpu:x",
        digest="sha256:" + "c" * 64,
        backend="cpu",
        template=spec.template,
        template_hash="t",
        created="2026-12-01T00:00:00+00:00",
    )
    return RunContext(
        lm,
        spec,
        build,
        model,
        ResultStore(proj / "results"),
        BenchOptions(run_id="run-env", telemetry=False),
        devices.DeviceProfile.example("cpu"),
        {},
        lambda *a, **k: None,
        engine=fake,
    )


def test_env_axis_is_validated_and_crossed():
    axes = BenchAxes(env={"B": ["1", 2], "A": ["x", "y"]})
    assert axes.env == {"B": ["1", "2"], "A": ["x", "y"]}
    assert axes.env_combinations() == [
        {"A": "x", "B": "1"},
        {"A": "x", "B": "2"},
        {"A": "y", "B": "1"},
        {"A": "y", "B": "2"},
    ]
    assert BenchAxes().env_combinations() == [{}]
    for bad, why in [
        ({"1X": ["a"]}, "not an environment variable name"),
        ({"X": []}, "non-empty list"),
        ({"X": ["a", "a"]}, "duplicate"),
        ({"X": [True]}, "not a string or number"),
        ({"X": ["a b"]}, "not allowed"),
        ({"ROCR_VISIBLE_DEVICES": ["0"]}, "set by the toolkit"),
        (["X=1"], "must map"),
    ]:
        with pytest.raises(ValueError, match=why):
            BenchAxes(env=bad)


def test_each_combination_is_a_container_and_records_carry_env_and_environment(tmp_path):
    fake = FakeEngine()
    ctx = _ctx(tmp_path, fake, {"OMP_WAIT_POLICY": ["active", "passive"], "GGML_SCHED_MAX_COPIES": ["1"]})
    runner = LlamaBenchRunner()
    steps = runner.plan(ctx)
    assert [s.what for s in steps] == [
        "llama-bench, run 1 of 1, env GGML_SCHED_MAX_COPIES=1 OMP_WAIT_POLICY=active",
        "llama-bench, run 1 of 1, env GGML_SCHED_MAX_COPIES=1 OMP_WAIT_POLICY=passive",
    ]
    assert "OMP_WAIT_POLICY=passive" in steps[1].argv and "-e" in steps[1].argv
    assert len(runner.cases(ctx)) == 4  # 2 prompt lengths x 2 environments
    outcomes = runner.run(ctx)
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert "env GGML_SCHED_MAX_COPIES=1 OMP_WAIT_POLICY=active" in outcomes[0].reason
    assert [e.get("OMP_WAIT_POLICY") for e in fake.envs] == ["active", "passive"]
    recs = ctx.store.results()
    assert len(recs) == 4
    for r in recs:
        assert r.env["GGML_SCHED_MAX_COPIES"] == "1" and r.env["OMP_WAIT_POLICY"] in ("active", "passive")
        # the effective environment: the image's ENV overlaid with the run's -e
        assert r.environment is not None
        assert r.environment["OMP_WAIT_POLICY"] == r.env["OMP_WAIT_POLICY"]
        assert (
            r.environment["LD_LIBRARY_PATH"] == "/opt/llama/lib" and r.environment["OMP_PROC_BIND"] == "false"
        )
    # part of the one test identity: the same llama-bench test in two environments is two rows
    keys = {identity.test_key(r) for r in recs}
    assert len(keys) == 4
    assert identity.distinguishing(recs)["env.OMP_WAIT_POLICY"] == {"active", "passive"}
    assert "env.OMP_WAIT_POLICY" in varying_columns(recs)
    assert "env.GGML_SCHED_MAX_COPIES" not in varying_columns(recs)  # one value: no column
    # --resume: every case of every environment is measured, nothing is missing
    ctx.opts.resume = True
    assert runner.cases(ctx) == []


def test_without_the_axis_identity_and_records_are_unchanged(tmp_path):
    fake = FakeEngine()
    ctx = _ctx(tmp_path, fake, {})
    LlamaBenchRunner().run(ctx)
    recs = ctx.store.results()
    assert len(recs) == 2 and all(r.env == {} for r in recs)
    assert not any(k.startswith("env.") for r in recs for k in identity.test_fields(r))
    assert recs[0].environment and "OMP_WAIT_POLICY" not in recs[0].environment


def test_effective_environment_without_inspect_claims_nothing():
    assert effective_environment(object(), "sha256:x", {"A": "1"}) is None

    class E:
        def inspect_image(self, ref):
            return engine.ImageInfo(
                id=ref, size=0, labels={}, repo_digests=[], tags=[], env=["A=0", "B=2", "junk"]
            )

    assert effective_environment(E(), "sha256:x", {"A": "1"}) == {"A": "1", "B": "2"}
