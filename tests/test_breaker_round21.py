"""Round 21: a hostile tester of confine.py (a stranger's Dockerfile under `reproduce --rebuild`). Each
shape below put a cache mount with an id of the stranger's choosing past the rewrite: a real
`docker buildx build` (Docker 26.1.5, its BuildKit) of the rewritten text wrote a marker into the cache
a build of this host naming that id then read (/tmp/breaker21/exp/shapes.py, findings.md). BuildKit
joins line continuations, drops the quotes and escapes of a flag word and ends the word at a byte
unicode.IsSpace calls a space (frontend/dockerfile/parser: Parse, extractBuilderFlags); the rewrite
read the raw text with Python's `\\S`.

1. each shape is refused (was: passed through unchanged, its id outside the namespace);
2. RUN `--network=host`, `--security=insecure`, `--device` are refused (issue 32 item 1);
3. the project's own templates still pass, and a stranger's build gets BuildKit's own cache-mount
   namespace (`--build-arg BUILDKIT_CACHE_MOUNT_NS=...`), which no Dockerfile can set;
4. the check is linear (1 MB inputs);
5. (e2e) BuildKit honours that namespace: a cache the rewrite never saw stays off this host's id (a
   fact of the engine the fix of 3 rests on: it passes before the fix as after).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from toolkit.core.errors import BadInput
from toolkit.images import build as build_mod
from toolkit.images.confine import confine_cache_mounts
from toolkit.matrix.api import load_matrix
from toolkit.results.records import ResultStore

KEY = "0123456789abcdef" * 4
NS = "toolkit-reproduce-0123456789abcdef"  # the namespace of KEY
CACHE_NS_ARG = "BUILDKIT_CACHE_MOUNT_NS"  # BuildKit's build argument (dockerui/config.go)
HEAD = "# Rendered by toolkit\nFROM debian:bookworm-slim\n"
W = "sh -c 'echo pwned > /c/m'"
SHAPES = {
    "continuation": f"RUN --mo\\\nunt=type=cache,id=victim,target=/c {W}\n",
    "continuation-crlf": f"RUN --mo\\\r\nunt=type=cache,id=victim,target=/c {W}\n",
    "continuation-u3000-blank-line": f"RUN --mo\\\n\u3000\nunt=type=cache,id=victim,target=/c {W}\n",
    "continuation-comment-line": f"RUN --mo\\\n  # x\nunt=type=cache,id=victim,target=/c {W}\n",
    "quotes-in-name": f'RUN --mo"un"t=type=cache,id=victim,target=/c {W}\n',
    "quotes-around-value": f'RUN --mount"=type=cache,id=victim,target=/c" {W}\n',
    "escape-in-name": f"RUN --mo\\unt=type=cache,id=victim,target=/c {W}\n",
    "x1c-inside-word": f"RUN --mount=type=bind,target=/b\x1c,type=cache,id=victim,target=/c {W}\n",
    "u3000-inside-word": f"RUN --mount=type=bind,target=/b\u3000,type=cache,id=victim,target=/c {W}\n",
    "S-caron-splits-word": f"RUN --mount=type=tmpfs,target=/t\u0160--mount=type=cache,id=victim,target=/c {W}\n",
}


@pytest.mark.parametrize("line", SHAPES.values(), ids=SHAPES.keys())
def test_a_cache_mount_buildkit_reads_past_the_rewrite_is_refused(line):
    with pytest.raises(BadInput, match=r"t\.j2: `--mo"):
        confine_cache_mounts(HEAD + line, KEY, "t.j2")


@pytest.mark.parametrize(
    "flag", ["--network=host", "--network=HOST", "--security=insecure", "--device=nvidia.com/gpu=all"]
)
def test_run_flags_that_reach_the_host_are_refused(flag):
    with pytest.raises(BadInput, match="no host network, no insecure mode and no host device"):
        confine_cache_mounts(HEAD + f"RUN {flag} true\n", KEY, "t.j2")
    for ok in ("--network=none", "--network=default"):
        assert confine_cache_mounts(HEAD + f"RUN {ok} true\n", KEY, "t.j2")


def test_plain_mounts_still_pass_and_are_namespaced():
    text = HEAD + (
        "RUN --mount=type=cache,target=/var/cache/apt,sharing=locked,id=apt \\\n"
        "    --mount=type=bind,target=/b --mount=type=secret,id=tok true\n"
        "# a comment naming --mount=type=cache,id=x in a comment is rewritten too\n"
    )
    out = confine_cache_mounts(text, KEY, "t.j2")
    assert f"id={NS}-apt" in out and "type=secret,id=tok" in out and f"id={NS}-x" in out


def test_the_projects_templates_pass_and_a_strangers_build_gets_buildkits_namespace(project):
    lm = load_matrix(project / "matrix.yaml")
    store = ResultStore(project / "results")
    for spec in lm.m.images:
        res = build_mod.build_image(lm, spec, store, dry_run=True, stranger=True)
        cmd = res.command or []
        args = [cmd[i + 1] for i, x in enumerate(cmd) if x == "--build-arg"]
        assert f"{CACHE_NS_ARG}={NS[:18]}" in " ".join(args), (spec.name, args)
        own = build_mod.build_image(lm, spec, store, dry_run=True).command or []
        assert not [x for x in own if CACHE_NS_ARG in x]  # the project's own builds keep their ids


@pytest.mark.parametrize(
    "text",
    [
        '--mo"' * 250_000,
        "\\\n" + " " * 1_000_000,
        "\\\n" + "#" * 1_000_000,
        "\\ " * 500_000,
        "\\\n#\n" * 250_000,
        "-" * 1_000_000,
        "--mount=" + "a" * 1_000_000,
        "--mount=type=cache," * 50_000,
        "RUN --mount=type=cache,target=/x true\n" * 25_000,
        "RUN " + "--x=y " * 170_000 + "--device=z true\n",
    ],
    ids=[
        "quotes",
        "blanks",
        "comment",
        "escapes",
        "comment-lines",
        "dashes",
        "long",
        "many",
        "many-mounts",
        "run-flags",
    ],
)
def test_the_check_is_linear_on_a_megabyte(text):
    t0 = time.process_time()
    try:
        confine_cache_mounts(HEAD + text, KEY, "t.j2")
    except BadInput:
        pass
    assert time.process_time() - t0 < 3.0


def _buildx(context: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        "docker",
        "buildx",
        "build",
        "--progress=plain",
        "--output",
        "type=cacheonly",
        *extra,
        str(context),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
@pytest.mark.skipif(not shutil.which("docker"), reason="needs a Docker engine with BuildKit")
def test_buildkit_namespaces_a_cache_mount_the_rewrite_never_saw(tmp_path):
    """BuildKit's own namespace (the build arg the stranger's build gets) keeps a cache mount the text
    never showed (here: the `u3000` shape, not rewritten) off the id a build of this host names. A real
    build; nothing is tagged (`--output type=cacheonly`); the ids are this test's own."""
    if subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.skip("no Docker engine answering")
    tag = uuid.uuid4().hex[:12]
    victim = f"breaker21-{tag}"
    base = "debian:bookworm-slim"
    if subprocess.run(["docker", "image", "inspect", base], capture_output=True).returncode:
        pytest.skip(f"{base} is not on this engine")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "Dockerfile").write_text(
        f"FROM {base}\nRUN --mount=type=bind,target=/b\u3000,type=cache,id={victim},target=/c "
        f"sh -c 'echo pwned > /c/m; echo {tag}'\n"
    )
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "Dockerfile").write_text(
        f"FROM {base}\nRUN --mount=type=cache,id={victim},target=/c sh -c 'cat /c/m || echo clean-{tag}'\n"
    )
    w = _buildx(tmp_path / "s", "--network", "default", "--build-arg", f"{CACHE_NS_ARG}={NS}")
    assert w.returncode == 0, w.stderr[-2000:]
    r = _buildx(tmp_path / "v")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"clean-{tag}" in r.stderr and "pwned" not in r.stderr.replace("echo pwned", ""), r.stderr[-2000:]


# ----------------------------------------------------- part 2: md_devices' Metal line, linear


@pytest.mark.parametrize(
    "line",
    [
        "ggml_metal_init: GPU name:" + " " * 5000 + "x" * 300,  # was 46 s of CPU at 10 kB, ~11 s here
        "ggml_metal_init: GPU name: x" + " " * 1_000_000 + "y",
        " " * 1_000_000 + "ggml_metal_device_init: GPU name: MTL0 (" + "a" * 1_000_000,
    ],
    ids=["spaces-then-name", "trailing", "long-mtl"],
)
def test_a_metal_device_line_is_read_in_linear_time(line):
    from toolkit.runtimes.llama_bench.md_devices import device_line

    t0 = time.process_time()
    device_line(line)
    assert time.process_time() - t0 < 1.0


def test_the_metal_lines_of_real_logs_still_read():
    from toolkit.runtimes.llama_bench.md_devices import device_line

    assert device_line("ggml_metal_init: GPU name:   Apple M2 Max  \n") == (0, "Apple M2 Max", False)
    assert device_line("ggml_metal_device_init: GPU name:   MTL0 (Apple M5 Max)") == (
        0,
        "Apple M5 Max",
        False,
    )


@pytest.mark.parametrize("line", ["RUN ./configure --device=cpu\n", "CMD ./serve --network=host\n"])
def test_a_commands_own_words_are_not_run_flags(line):
    """Only RUN's own flags (before its command) reach the host: a command's `--device=cpu` is its own."""
    assert confine_cache_mounts(HEAD + line, KEY, "t.j2")
