"""Rendering: deterministic bytes, header with template and inputs hash, StrictUndefined errors."""

from __future__ import annotations

import copy

import pytest

from tests.support.project import write_matrix
from toolkit.core.errors import BadInput
from toolkit.images.render import render_image
from toolkit.matrix.api import load_matrix


def test_render_is_deterministic(project):
    lm = load_matrix(project / "matrix.yaml")
    first = [render_image(lm, s).content for s in lm.m.images]
    second = [render_image(lm, s).content for s in lm.m.images]
    assert first == second
    cpu = render_image(lm, lm.m.image("cpu")).content
    assert cpu.startswith("# Rendered by toolkit from Dockerfile.templates/llama-cpu.Dockerfile.j2")
    assert "# inputs-sha256: " in cpu.splitlines()[2]


def test_cpu_template_structure(project):
    lm = load_matrix(project / "matrix.yaml")
    text = render_image(lm, lm.m.image("cpu")).content
    assert "FROM debian:trixie-slim AS build" in text
    assert "FROM debian:trixie-slim AS runtime" in text
    for flag in ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DLLAMA_BUILD_TESTS=OFF"):
        assert flag in text
    assert "COPY src/ /src/" in text and "git clone" not in text
    assert "--mount=type=cache,target=/build" in text
    assert "# syntax" not in text


def test_hash_changes_with_vars(project, matrix_data):
    lm = load_matrix(project / "matrix.yaml")
    h1 = render_image(lm, lm.m.image("cpu")).inputs_hash
    d = copy.deepcopy(matrix_data)
    d["images"][0]["vars"]["cmake_args"] = ["-DGGML_AVX2=ON"]
    lm2 = load_matrix(write_matrix(project, d))
    r2 = render_image(lm2, lm2.m.image("cpu"))
    assert r2.inputs_hash != h1
    assert "-DGGML_AVX2=ON \\" in r2.content


def test_undefined_template_variable_is_named(project, matrix_data):
    d = copy.deepcopy(matrix_data)
    del d["images"][0]["vars"]["base_image"]
    lm = load_matrix(write_matrix(project, d))
    with pytest.raises(BadInput, match="base_image.*add it under the image's `vars:`"):
        render_image(lm, lm.m.image("cpu"))


def test_partials_are_part_of_the_inputs_hash(project):
    """A template's hash covers the partials it imports: editing one changes every image using it."""
    lm = load_matrix(project / "matrix.yaml")
    before = {s.name: render_image(lm, s).inputs_hash for s in lm.m.images}
    partial = project / "Dockerfile.templates" / "partials" / "llama-cmake.j2"
    partial.write_text(partial.read_text() + "\n{# an edit #}\n")
    after = {s.name: render_image(lm, s).inputs_hash for s in lm.m.images}
    for name in ("cpu", "vulkan", "rocm"):
        assert after[name] != before[name], name
    assert after["vllm-prebuilt"] == before["vllm-prebuilt"]


def test_missing_partial_is_named(project):
    tpl = project / "Dockerfile.templates" / "llama-cpu.Dockerfile.j2"
    tpl.write_text(tpl.read_text().replace("partials/llama-cmake.j2", "partials/nope.j2"))
    lm = load_matrix(project / "matrix.yaml")
    with pytest.raises(BadInput, match="llama-cpu.Dockerfile.j2: it imports or includes 'partials/nope.j2'"):
        render_image(lm, lm.m.image("cpu"))


def test_a_template_cannot_run_code_on_the_host(project, tmp_path):
    """Templates come from projects and published folders (reproduce --rebuild): one that reaches for
    Python's internals is bad input (Jinja's sandbox), and the marker file is never written."""
    from toolkit.core.errors import BadInput
    from toolkit.images import render
    from toolkit.matrix.api import load_matrix

    marker = tmp_path / "pwned"
    tpl = project / "Dockerfile.templates" / "llama-cpu.Dockerfile.j2"
    tpl.write_text(
        "{{ cycler.__init__.__globals__.os.system('touch " + str(marker) + "') }}\n" + tpl.read_text()
    )
    lm = load_matrix(project / "matrix.yaml")
    spec = next(s for s in lm.images if s.template == "llama-cpu.Dockerfile.j2")
    with pytest.raises(BadInput, match="reaches outside its variables"):
        render.render_image(lm, spec)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("key", "value", "want"),
    [
        ("require_coopmat", "no", "expected true .* or false"),  # a string, not YAML's boolean
        ("require_coopmat", 1, "expected true .* or false"),
        ("min_mesa_version", "25.x", "expected a Mesa version floor"),
        ("min_mesa_version", 25, "expected a Mesa version floor"),
        ("mesa_apt_suite", "trixie-proposed-updates", "Debian release .* or its -backports suite"),
        ("mesa_apt_suite", "trixie backports", "Debian release .* or its -backports suite"),
    ],
)
def test_mesa_ab_vars_are_validated(project, matrix_data, key, value, want):
    """The Vulkan template's Mesa A/B variables: a bad value is refused naming matrix.yaml, the image
    and the variable, before anything renders."""
    d = copy.deepcopy(matrix_data)
    vk = next(i for i in d["images"] if i["name"] == "vulkan")
    vk["vars"][key] = value
    with pytest.raises(
        BadInput,
        match=rf"matrix\.yaml: line \d+, column \d+: images\[\d+\]\.vars: image 'vulkan': template variable '{key}' is .*{want}",
    ):
        load_matrix(write_matrix(project, d))


def test_an_image_lowers_the_mesa_floor_and_records_coopmat_only(project, matrix_data):
    """min_mesa_version in an image's vars overrides the matrix's floor for that image alone, and
    require_coopmat: false renders a probe that records coopmat rather than requiring it."""
    d = copy.deepcopy(matrix_data)
    vk = next(i for i in d["images"] if i["name"] == "vulkan")
    vk["vars"].update(min_mesa_version="25.0.0", require_coopmat=False, mesa_apt_suite="trixie")
    lm = load_matrix(write_matrix(project, d))
    text = render_image(lm, lm.m.image("vulkan")).content
    assert lm.m.min_mesa_version == "25.2.0" and 'lt "25.0.0"' in text and 'lt "25.2.0"' not in text
    assert "require_coopmat=no" in text and 'org.toolkit.vk-probe-require-coopmat="no"' in text
