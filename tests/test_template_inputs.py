"""The render-inputs hash without jinja2 (issue 32 item 16): `toolkit bench` reads the template files a
template reached when last parsed (.toolkit/template-inputs.json) instead of importing jinja2 and
parsing; the hash is always the one render_image stamps, and the cache never lets a changed, linked or
planted file through."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toolkit.core.errors import BadInput
from toolkit.images import template_inputs as ti
from toolkit.images.build import inputs_key
from toolkit.images.render import render_image
from toolkit.matrix.api import load_matrix

LLAMA_IMAGES = ("cpu", "vulkan", "rocm")


def _hashes(project) -> dict[str, tuple[str, str]]:
    """image -> (the inputs hash as bench computes it, as render_image stamps it), fresh matrix."""
    lm = load_matrix(project / "matrix.yaml")
    return {s.name: (ti.image_inputs_hash(lm, s), render_image(lm, s).inputs_hash) for s in lm.m.images}


def test_the_cached_hash_is_the_rendered_one_and_follows_every_edit(project):
    first = _hashes(project)
    assert all(a == b for a, b in first.values()), first
    cache = json.loads((project / ".toolkit" / ti.CACHE_FILE).read_text())
    cpu = next(v for k, v in cache.items() if k.endswith(":llama-cpu.Dockerfile.j2"))
    assert [n for n, _ in cpu["files"]][0] == "llama-cpu.Dockerfile.j2" and len(cpu["files"]) > 1
    assert _hashes(project) == first  # from the cache: same answer
    partial = project / "Dockerfile.templates" / "partials" / "llama-cmake.j2"
    partial.write_text(partial.read_text() + "\n{# an edit #}\n")  # the template's own state is unchanged
    edited = _hashes(project)
    assert all(a == b for a, b in edited.values()), edited
    assert all(edited[n][0] != first[n][0] for n in LLAMA_IMAGES)
    assert edited["vllm-prebuilt"] == first["vllm-prebuilt"]


def test_a_warm_cache_answers_without_jinja2_in_another_process(project):
    """The import cut pinned: the bench path (toolkit.bench.run, toolkit.images.build) does not import
    jinja2, and with the cache written by a first process a second one computes the key without it."""
    code = (
        "import sys, json\nimport toolkit.bench.run, toolkit.images.build as b\n"
        "from toolkit.matrix.api import load_matrix\n"
        "before = 'jinja2' in sys.modules\n"
        f"lm = load_matrix({str(project / 'matrix.yaml')!r})\n"
        "key = b.inputs_key(lm, lm.m.image('cpu')).key\n"
        "print(json.dumps([before, 'jinja2' in sys.modules, key]))"
    )
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        )
        for _ in range(2)
    ]
    assert runs[0][0] is False and runs[0][1] is True  # cold: parsed with jinja2, after the import
    assert runs[1][:2] == [False, False]  # warm: no jinja2 at all
    lm = load_matrix(project / "matrix.yaml")
    spec = lm.m.image("cpu")
    assert runs[0][2] == runs[1][2] == inputs_key(lm, spec, render_image(lm, spec)).key


def test_a_partial_replaced_by_a_link_is_refused_though_cached(project, tmp_path):
    """A partial swapped for a symbolic link to a file of the very same text: the cache does not vouch
    for it; the template is parsed and refused as before (issue 32 item 3)."""
    _hashes(project)
    partial = project / "Dockerfile.templates" / "partials" / "llama-cmake.j2"
    elsewhere = tmp_path / "elsewhere.j2"
    elsewhere.write_text(partial.read_text())
    partial.unlink()
    partial.symlink_to(elsewhere)
    lm = load_matrix(project / "matrix.yaml")
    with pytest.raises(BadInput, match="templates must be regular files"):
        ti.image_inputs_hash(lm, lm.m.image("cpu"))


@pytest.mark.parametrize("planted", ["forged", "garbage", "list"])
def test_a_planted_or_broken_cache_is_never_believed(project, planted):
    """A cache shipped in someone's folder (an entry leaving the partials out, with a made-up file
    state) or one that is not a JSON object counts for nothing: the hash is still the rendered one,
    and the entry is replaced by a true one."""
    lm = load_matrix(project / "matrix.yaml")
    spec = lm.m.image("cpu")
    tpl = project / "Dockerfile.templates" / spec.template
    cache_file = project / ".toolkit" / ti.CACHE_FILE
    cache_file.parent.mkdir()
    key = f"{tpl.resolve()}:{spec.template}"
    text = tpl.read_text()
    content = {
        "forged": json.dumps({key: {"state": "1:2:3:4:5", "files": [[spec.template, ti._digest(text)]]}}),
        "garbage": "{not json",
        "list": "[1, 2]",
    }[planted]
    cache_file.write_text(content)
    assert ti.image_inputs_hash(lm, spec) == render_image(lm, spec).inputs_hash
    entry = json.loads(cache_file.read_text())[key]
    assert entry["state"] != "1:2:3:4:5" and len(entry["files"]) > 1


def test_a_cache_that_cannot_be_written_is_skipped(project):
    """.toolkit that is a file, not a folder (the write fails as it would on a read-only project): the
    hash is computed all the same, and nothing is written."""
    (project / ".toolkit").write_text("not a folder")
    lm = load_matrix(project / "matrix.yaml")
    spec = lm.m.image("cpu")
    assert ti.image_inputs_hash(lm, spec) == render_image(lm, spec).inputs_hash
    assert (project / ".toolkit").read_text() == "not a folder"


def test_a_planted_link_at_toolkit_is_never_written_through(project, tmp_path):
    """A folder from elsewhere (reproduce --rebuild runs bench in one) may ship .toolkit as a link to a
    folder of the user's: the cache is not written there; the hash is computed all the same."""
    target = tmp_path / "users-folder"
    target.mkdir()
    (project / ".toolkit").symlink_to(target)
    lm = load_matrix(project / "matrix.yaml")
    spec = lm.m.image("cpu")
    assert ti.image_inputs_hash(lm, spec) == render_image(lm, spec).inputs_hash
    assert list(target.iterdir()) == []


def test_a_cache_reached_through_a_link_is_never_read(project, tmp_path):
    """Breaker round 13: .toolkit a link to a folder holding a cache that lists the template alone (its
    partials left out) made bench's key differ from render's (a current image called stale). A cache
    reached through a link is not read; an entry that does not start with the template is not used."""
    lm = load_matrix(project / "matrix.yaml")
    spec = lm.m.image("cpu")
    tpl = ti.template_path(lm, spec.template)
    text = tpl.read_text()
    entry = {"state": ti._state(tpl), "files": [[spec.template, ti._digest(text)]]}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ti.CACHE_FILE).write_text(json.dumps({f"{tpl.resolve()}:{spec.template}": entry}))
    (project / ".toolkit").symlink_to(elsewhere)
    assert (
        ti.image_inputs_hash(load_matrix(project / "matrix.yaml"), spec) == render_image(lm, spec).inputs_hash
    )
    assert ti._cached_files(tpl.parent, spec.template, {"files": [["other.j2", ti._digest(text)]]}) is None
