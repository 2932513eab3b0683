"""The runtime environment as an axis (`bench.env` in matrix.yaml): validated and crossed like the
other axes, one container per combination with the variables set, each record carrying the values it
ran with (`env`, part of the one test identity and a table column where it varies) and the
container's effective environment (`environment`: the image's ENV overlaid with the run's -e).

The llama-bench runner runs here through a fake engine that answers with rows of a real llama-bench
0c1e57098 CPU run (tests/data/llamabench-0c1e57098-cpu.jsonl), reshaped to the asked lengths."""

from __future__ import annotations

import pytest

from tests.support.engine import FakeEngine
from tests.support.engine import llama_ctx as _ctx
from toolkit.analysis.tables import varying_columns
from toolkit.bench.runners.base import effective_environment
from toolkit.bench.runners.llama_bench import LlamaBenchRunner
from toolkit.engine import api as engine
from toolkit.matrix.api import BenchAxes
from toolkit.results import identity


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
        ({"X": [True]}, "not text, a whole number or null"),
        ({"X": [1.1]}, "1.1 is not text, a whole number or null.*quote a decimal"),
        ({"X": ["a b"]}, "not allowed"),
        ({"ROCR_VISIBLE_DEVICES": ["0"]}, "set by the toolkit"),
        ({"LD_LIBRARY_PATH": ["/x"]}, "dynamic loader"),
        ({"LD_PRELOAD": ["/tmp/x.so"]}, "dynamic loader"),
        ({"LD_AUDIT": ["/tmp/x.so"]}, "dynamic loader"),
        ({"X": ["a" * (128 * 1024 - 2)]}, "X=value is 131073 bytes with its NUL.*MAX_ARG_STRLEN"),
        ({f"V{i}": ["a" * (100 * 1024)] for i in range(11)}, "up to 1126445 bytes of environment.*ARG_MAX"),
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


def test_null_leaves_a_variable_unset_so_an_existence_switch_is_measured_on_and_off(tmp_path):
    """ggml's GGML_VK_DISABLE_COOPMAT is tested for existence (ggml-vulkan.cpp getenv != nullptr): the
    old example ['0', '1'] ran both cells without cooperative matrix. [null, '1'] leaves it unset in
    one container and sets it in the other; the records say `unset` and `1`, two rows of one test."""
    assert BenchAxes(env={"GGML_VK_DISABLE_COOPMAT": [None, "1"]}).env_combinations() == [
        {"GGML_VK_DISABLE_COOPMAT": None},
        {"GGML_VK_DISABLE_COOPMAT": "1"},
    ]
    fake = FakeEngine()
    ctx = _ctx(tmp_path, fake, {"GGML_VK_DISABLE_COOPMAT": [None, "1"]})
    runner = LlamaBenchRunner()
    steps = runner.plan(ctx)
    assert [s.what for s in steps] == [
        "llama-bench, run 1 of 1, env GGML_VK_DISABLE_COOPMAT unset",
        "llama-bench, run 1 of 1, env GGML_VK_DISABLE_COOPMAT=1",
    ]
    assert not any("GGML_VK_DISABLE_COOPMAT" in a for a in steps[0].argv)
    assert "GGML_VK_DISABLE_COOPMAT=1" in steps[1].argv
    assert [o.status for o in runner.run(ctx)] == ["ok", "ok"]
    assert ["GGML_VK_DISABLE_COOPMAT" in e for e in fake.envs] == [False, True]
    recs = ctx.store.results()
    assert {identity.test_fields(r)["env.GGML_VK_DISABLE_COOPMAT"] for r in recs} == {"unset", "1"}
    unset = [r for r in recs if r.env["GGML_VK_DISABLE_COOPMAT"] is None]
    assert unset and all("GGML_VK_DISABLE_COOPMAT" not in (r.environment or {}) for r in unset)
    ctx.opts.resume = True
    assert runner.cases(ctx) == []  # the unset cells are found again as measured


def test_each_process_has_its_own_log_and_its_records_point_at_it(tmp_path):
    """Tester's find: with bench.runs > 1 or an env axis every process wrote logs/<run>-<model>.log, so
    only the last one's log survived while every record pointed at it. One log (and one container
    name) per process now: -env<k> per combination, -run<i> per bench.runs start."""
    fake = FakeEngine()
    ctx = _ctx(tmp_path, fake, {"OMP_WAIT_POLICY": ["active", "passive"]})
    object.__setattr__(ctx.lm.m.bench, "runs", 2)
    outcomes = LlamaBenchRunner().run(ctx)
    assert [o.status for o in outcomes] == ["ok"] * 4
    names = [s.name for s in fake.runs]
    assert len(set(names)) == 4 and names[0].endswith("-env1-run1") and names[3].endswith("-env2-run2")
    recs = ctx.store.results()
    logs = {r.log_file for r in recs}
    assert len(logs) == 4, logs
    for r in recs:
        text = open(r.log_file).read()  # the log of the process that measured it: its own -e value
        assert f"OMP_WAIT_POLICY={r.env['OMP_WAIT_POLICY']}" in text, (r.log_file, text[:300])
        assert r.log_file.endswith(f"-run{r.process_run['index']}.log"), r.log_file
