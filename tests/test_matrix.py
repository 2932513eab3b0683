"""matrix.yaml validation: every error names the file, the key path and the fix."""

from __future__ import annotations

import copy

import pytest

from tests.support.project import mutate as _mutate
from tests.support.project import write_matrix
from toolkit.core.errors import BadInput
from toolkit.matrix.api import load_matrix


def test_project_matrix_is_valid(project):
    lm = load_matrix(project / "matrix.yaml")
    assert "cpu" in [i.name for i in lm.m.images]
    assert lm.m.bench.n_prompt == [512, 2048, 4096]
    assert lm.m.bench.n_ubatch == [512, 2048]
    assert lm.m.bench.flash_attn == [1]
    # 3 pp x 2 ub + 1 tg x 2 ub = 8 crossed cases
    assert len(lm.m.bench.cases()) == 8


@pytest.mark.parametrize(
    "path,value,expect",
    [
        pytest.param(
            ["images", 0, "backend"],
            "cuda",
            ["images[0].backend", "'rocm', 'vulkan' or 'cpu'"],
            id="bad-backend",
        ),
        pytest.param(
            ["images", 0, "tempalte"],
            "x",
            ["unknown key 'tempalte'", "did you mean 'template'"],
            id="typo-key",
        ),
        pytest.param(["bench", "n_prompt"], [], ["bench.n_prompt", "empty"], id="empty-axis"),
        pytest.param(["bench", "n_prompt"], "512", ["bench.n_prompt", "valid list"], id="wrong-type"),
        pytest.param(["bench", "n_ubatch"], [4096], ["micro-batch", "n_batch"], id="ubatch-gt-batch"),
        pytest.param(["bench", "repetitions"], 0, ["bench.repetitions"], id="zero-reps"),
        pytest.param(
            ["images", 0, "template"],
            "nope.Dockerfile.j2",
            ["images[0].template", "not a file"],
            id="missing-template",
        ),
        pytest.param(
            ["images", 0, "source"],
            "llama",
            ["images[0].source", "not defined under `sources`"],
            id="unknown-source",
        ),
        pytest.param(
            ["images", 0, "vars", "base_image"],
            "debian\nRUN curl evil",
            ["base_image", "image reference"],
            id="newline-injection",
        ),
        pytest.param(
            ["sources", "llama.cpp", "ref"], "main; rm -rf /", ["not allowed"], id="shell-injection-ref"
        ),
        pytest.param(
            ["sources", "llama.cpp", "git"],
            "--upload-pack=touch /tmp/x",
            ["not a git URL"],
            id="git-option-injection",
        ),
        pytest.param(
            ["sources", "llama.cpp", "fallback", "pypi"],
            "llama-cpp-python",
            ["exact pin"],
            id="pypi-unpinned",
        ),
        pytest.param(
            ["images", 0, "vars", "cmake_args"],
            ["-DX=1 && curl x"],
            ["not allowed"],
            id="cmake-arg-injection",
        ),
        pytest.param(["models", 0, "sha256"], "abc", ["sha256", "64 lowercase hex"], id="bad-sha"),
        pytest.param(["schema_version"], 2, ["schema_version", "not supported"], id="schema-version"),
        # a FROM of no image rendered and dry-ran (`FROM  AS build`, `FROM ['a', 'b']`), or reached the
        # engine and came back as its "invalid reference format" (exit 5, not the matrix's fault)
        pytest.param(
            ["images", 0, "vars", "base_image"], "", ["base_image", "image reference"], id="base-empty"
        ),
        pytest.param(
            ["images", 0, "vars", "base_image"], ["a", "b"], ["base_image", "image reference"], id="base-list"
        ),
        pytest.param(
            ["images", 0, "vars", "base_image"], 123, ["base_image", "image reference"], id="base-number"
        ),
        pytest.param(["images", 0, "vars", "base_image"], "UPPER/Case:tag", ["base_image"], id="base-upper"),
        pytest.param(
            ["images", 0, "vars", "base_image"], "debian@sha256:zzz", ["base_image"], id="base-digest"
        ),
        pytest.param(["schema_version"], KeyError, ["schema_version", "required"], id="no-schema-version"),
    ],
)
def test_bad_matrix_names_file_key_and_fix(project, matrix_data, path, value, expect):
    p = write_matrix(project, _mutate(matrix_data, path, value))
    with pytest.raises(BadInput) as err:
        load_matrix(p)
    msg = str(err.value)
    assert str(p) in msg
    for e in expect:
        assert e in msg, msg


def test_duplicate_image_names(project, matrix_data):
    d = copy.deepcopy(matrix_data)
    d["images"].append(copy.deepcopy(d["images"][0]))
    with pytest.raises(BadInput, match="duplicate image name"):
        load_matrix(write_matrix(project, d))


def test_malformed_yaml_names_line(project):
    p = project / "matrix.yaml"
    p.write_text("schema_version: 1\nimages: [\n  - name: x\n")
    with pytest.raises(BadInput, match=r"line \d+, column \d+: not valid YAML"):
        load_matrix(p)


def test_missing_matrix_file(tmp_path):
    with pytest.raises(BadInput, match="matrix file not found"):
        load_matrix(tmp_path / "nope.yaml")


@pytest.mark.parametrize("block", ["vllm", "sglang"])
def test_a_concurrency_level_given_twice_is_bad_input(block):
    """Reproducer (a breaker's find): `concurrency: [1, 1]` was accepted, measured twice and shown as one test."""
    from toolkit.runtimes.sglang.args import SglangSettings
    from toolkit.runtimes.vllm.settings import VllmSettings

    settings = {"vllm": VllmSettings, "sglang": SglangSettings}[block]
    with pytest.raises(ValueError, match=r"concurrency \[1, 4, 1\] has duplicate levels"):
        settings(concurrency=[1, 4, 1])
    assert settings(concurrency=[1, 4]).concurrency == [1, 4]
