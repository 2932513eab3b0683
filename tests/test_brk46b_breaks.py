"""brk46b: the breaker's checks of the resume narrowing (86b20d1), kept as a property test.

resume_axes (and llama_depth.merge_depths over it) must name every missing case exactly once and no
case measured already, for any subset of a matrix's cases: a case named twice is a llama-bench
process measuring it again (the plan line counts it once); one left out is never measured.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from types import SimpleNamespace

import pytest

from toolkit.bench.runners.llama_bench import resume_axes
from toolkit.bench.runners.llama_depth import merge_depths
from toolkit.matrix.api import BenchAxes

SHAPES = [
    dict(
        type_k=["f16", "q8_0"],
        type_v=["f16", "q8_0"],
        n_cpu_moe=[0, 4],
        n_prompt=[64, 128],
        n_gen=[16, 32],
        n_depth=[0, 256],
    ),
    dict(type_k=["f16", "q8_0", "q4_0"], n_cpu_moe=[0, 2, 8], n_prompt=[512], n_gen=[128]),
    dict(
        type_v=["q8_0", "f16"], split_mode=["layer", "row"], n_prompt=[64], n_gen=[0], n_depth=[0, 128, 512]
    ),
    dict(type_k=["f16", "q8_0"], n_prompt=[0], n_gen=[16, 32], n_ubatch=[64, 512], n_batch=[512, 2048]),
]


def _counted(cases: list[dict]) -> Counter:
    return Counter(json.dumps(c, sort_keys=True) for c in cases)


@pytest.mark.parametrize("shape", SHAPES, ids=range(len(SHAPES)))
def test_resume_axes_name_exactly_the_missing_cases_of_any_subset(shape: dict) -> None:
    axes = BenchAxes(**shape)
    every = axes.cases()
    rng = random.Random(46)
    for _ in range(60):
        todo = rng.sample(every, rng.randint(1, len(every)))
        parts = resume_axes(axes, todo)
        for got in (parts, merge_depths(parts)):
            named = _counted([c for a in got for c in a.cases()])
            assert named == _counted(todo), (shape, todo, [a.model_dump() for a in got])


def test_an_interrupted_tune_names_tune_again_not_bench_resume(project, monkeypatch) -> None:
    """`toolkit tune -i cpu -m tiny-qwen3moe --axis decode` stopped by Ctrl-C said "`toolkit bench
    --resume` continues where this run stopped" (its trial's bench hint): pasted, that benches every image
    and model of the matrix at the matrix's axes. It names the tune again, with its options."""
    from click.testing import CliRunner

    from toolkit.bench import run as bench
    from toolkit.cli.main import cli
    from toolkit.core.errors import RunInterrupted

    def stopped(lm, images, models, store, opts, *args, **kwargs):  # Ctrl-C mid-trial, as bench says it
        raise bench._interrupted(opts, SimpleNamespace(summary=lambda: "1 record(s) saved"), [])

    monkeypatch.chdir(project)
    monkeypatch.setattr(bench, "run_bench", stopped)
    monkeypatch.setattr(bench.engine, "remove_orphans", lambda **k: None)  # no engine in this test
    args = ["tune", "-i", "cpu", "-m", "tiny-qwen3moe", "--axis", "decode", "--budget", "5m"]
    res = CliRunner().invoke(cli, args)
    assert isinstance(res.exception, RunInterrupted), res.output  # main() maps it to exit 130
    said = str(res.exception)
    assert "toolkit bench" not in said and "continues where" not in said, said
    assert (
        "; `toolkit tune --image cpu --model tiny-qwen3moe --axis decode --budget 5m` searches again" in said
    )
