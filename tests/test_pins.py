"""`toolkit pins`: each pin looked up where it lives, reported ok / moved / missing / unreachable.

Images: against Debian's docker-registry (distribution 2.8) in a container on loopback (the `registry`
fixture, tests/support/service_containers.py) and the real Docker engine —
a stand-in image pushed under a pinned tag + digest, then re-pushed, deleted, never pushed, the
registry stopped. Git: a real local repository over file:// whose tag is moved and deleted; a closed
port for an unreachable host. PyPI: the real index (this machine reaches PyPI) and the sdist the
source fetcher would use. The Hugging Face Hub cannot be reached here: its rows are checked against
a closed port (unreachable) and against a stand-in HTTP server answering as the Hub's API does
(`/api/models/<repo>/revision/<rev>`, X-Error-Code headers read by huggingface_hub) — the only mock.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import tarfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.support.e2e_helpers import engine_or_skip
from tests.support.project import ROOT
from tests.support.service_containers import LoopbackRegistry
from toolkit.cli.main import cli
from toolkit.engine import api as engine
from toolkit.images import pins
from toolkit.matrix.api import HfFile, SourceSpec, load_matrix


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------ what is pinned


def test_from_lines_skip_stages_and_scratch_and_expand_global_args():
    text = (
        "ARG BASE=debian:trixie-slim\nARG TAG\n"
        "FROM --platform=linux/amd64 ${BASE} AS build\nRUN true\nFROM build AS test\n"
        "FROM scratch\nFROM rocm/x:1@sha256:" + "a" * 64 + " as runtime\nFROM $TAG\n"
    )
    assert pins.from_lines(text) == [
        (3, "debian:trixie-slim", "build"),
        (7, "rocm/x:1@sha256:" + "a" * 64, "runtime"),
        (8, "$TAG", None),
    ]


def test_the_reference_matrix_pins_and_where_they_are_named():
    found = {p.ref: p for p in pins.collect_pins(load_matrix(ROOT / "matrix.yaml"))}
    rocm = next(p for r, p in found.items() if r.startswith("rocm/dev-ubuntu-24.04:7.2.1-complete@sha256:"))
    assert (
        rocm.kind == "image"
        and rocm.pinned == "sha256:3db551c4e1229aac1857ac44fcb6141bb749f41348eb572452f11279153c13c3"
    )
    assert {w.split(" (line")[0] for w in rocm.where} == {
        "images/rocm/Dockerfile FROM build",
        "images[rocm].vars.rocm_dev_image",
    }
    debian = found["debian:trixie-slim"]  # a tag only: listed, nothing pinned
    assert debian.pinned is None and any(
        w.startswith("images/cpu/Dockerfile FROM build") and "runtime" in w for w in debian.where
    )
    torch = [r for r in found if r.startswith("rocm/pytorch:")]
    assert len(torch) == 1  # the same base in two images (and in FROM + vars) is one pin
    assert found[
        "https://github.com/ggml-org/llama.cpp @ 0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    ].where == ("sources.llama.cpp",)
    pypi = found["pypi:llama-cpp-python==0.3.36"]
    assert pypi.where == ("sources.llama.cpp.fallback",) and pypi.pinned == "0.3.36"
    assert "hf:cpatonn/Qwen3-30B-A3B-Instruct-2507-AWQ-4bit" in found
    assert not [r for r in found if "tiny" in r or r in ("build", "runtime", "scratch")]


def test_template_variables_naming_a_git_repository_and_commit_are_a_source_pin(tmp_path):
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    cpu = next(i for i in data["images"] if i["name"] == "cpu")
    cpu["vars"].update(patches_git="https://example.org/p.git", patches_commit="c" * 40)
    data["images"] = [cpu]
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data))
    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    got = {p.ref: p for p in pins.collect_pins(load_matrix(tmp_path / "matrix.yaml"), images=["cpu"])}
    pin = got[f"https://example.org/p.git @ {'c' * 40}"]
    assert pin.kind == "source" and pin.pinned == "c" * 40
    assert pin.where == ("images[cpu].vars.patches_git + patches_commit",)
    assert "sources.llama.cpp" in {w for p in got.values() for w in p.where}  # -i cpu: its source, no models
    assert not [p for p in got.values() if p.kind == "model"]


@pytest.mark.parametrize(
    ("message", "offline"),
    [
        (
            "fatal: unable to access 'https://github.com/x/ssl-tools/': Could not resolve host: github.com",
            True,
        ),
        ('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host', True),
        ("fatal: unable to access 'https://h/x/': The requested URL returned error: 503", True),
        ("fatal: repository 'https://h/ssl-tools/' not found", False),  # the name is no TLS error
        ("pull access denied for atlas/x, repository does not exist or may require 'docker login'", False),
        ("fatal: unable to access 'https://h/x/': The requested URL returned error: 404", False),
    ],
)
def test_no_answer_is_told_from_a_no(message, offline):
    assert pins._offline(message) is offline


# ------------------------------------------------------------------------------ images: a registry


def push_standin(reg, repo: str, tag: str) -> str:
    """Import a one-file image (unique bytes) as 127.0.0.1:<port>/<repo>:<tag>, push it, return the
    manifest digest the registry reported."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        data = f"stand-in {uuid.uuid4()}\n".encode()
        info = tarfile.TarInfo("standin.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    repository = f"{reg.host}/{repo}"
    status = engine.client().api.import_image_from_data(buf.getvalue(), repository=repository, tag=tag)
    reg.images.append(json.loads(status)["status"])  # the new image ID
    out = engine.push_image(repository, tag)
    assert out.ok and out.digest, out.error
    return out.digest


def pins_project(dest: Path, base_image: str) -> Path:
    """A project copy with the CPU image only, its base image `base_image`, llama.cpp from a local git
    repository at a pinned commit, and the generated tiny model (no Hub pin)."""
    repo, head = git_repo(dest / "llama.cpp")
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    cpu = next(i for i in data["images"] if i["name"] == "cpu")
    cpu["vars"]["base_image"] = base_image
    data["images"] = [cpu]
    data["sources"] = {"llama.cpp": {"git": repo.as_uri(), "ref": head, "commit": head}}
    data["models"] = [m for m in data["models"] if m.get("generate")]
    shutil.copytree(ROOT / "Dockerfile.templates", dest / "Dockerfile.templates")
    (dest / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return dest / "matrix.yaml"


def run_pins(matrix: Path, *args: str) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, ["pins", "--matrix", str(matrix), "--json", "--timeout", "5", *args])
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, json.loads(res.output)["result"]


def image_row(out: dict) -> dict:
    (row,) = [r for r in out["pins"] if r["kind"] == "image"]
    return row


@pytest.mark.e2e
def test_pinned_image_ok_then_moved_then_missing(registry, tmp_path):
    first = push_standin(registry, "pins/base", "1.0")
    matrix = pins_project(tmp_path / "p", f"{registry.host}/pins/base:1.0@{first}")

    code, out = run_pins(matrix)
    row = image_row(out)
    assert (code, row["status"], row["now"]) == (0, "ok", first), out
    assert row["pinned"] == first and "still points at the pinned digest" in row["reason"]
    assert (
        any("FROM build" in w and "runtime" in w for w in row["where"])
        and "images[cpu].vars.base_image" in row["where"]
    )
    zero = {"moved": 0, "missing": 0, "unreachable": 0, "unchecked": 0}
    assert out["counts"] == {"ok": 2, **zero}  # + the local git source

    second = push_standin(registry, "pins/base", "1.0")  # the same tag, another image
    assert second != first
    code, out = run_pins(matrix)
    row = image_row(out)
    assert (code, row["status"], row["now"]) == (10, "moved", second), out
    assert f"now points at {second}" in row["reason"] and out["broken"] is True

    assert registry.delete_manifest("pins/base", first) == 202
    code, out = run_pins(matrix)
    row = image_row(out)
    assert (code, row["status"]) == (10, "missing"), out
    assert "pinned digest is gone" in row["reason"] and "manifest unknown" in row["reason"]

    text = CliRunner().invoke(cli, ["pins", "--matrix", str(matrix)])
    assert (
        text.exit_code == 10
        and "| missing" in text.output
        and "exit 10: a pin moved or is missing" in text.output
    )


@pytest.mark.e2e
def test_digest_never_pushed_is_missing_and_a_tag_only_base_is_ok_unpinned(registry, tmp_path):
    digest = push_standin(registry, "pins/base", "2.0")
    never = "sha256:" + "0" * 64
    code, out = run_pins(pins_project(tmp_path / "a", f"{registry.host}/pins/base:2.0@{never}"))
    assert (code, image_row(out)["status"]) == (10, "missing"), out

    code, out = run_pins(pins_project(tmp_path / "b", f"{registry.host}/pins/base:2.0"))
    row = image_row(out)
    assert (code, row["status"], row["pinned"], row["now"]) == (0, "ok", None, digest), out
    assert f"pin it as {registry.host}/pins/base:2.0@{digest}" in row["reason"]

    code, out = run_pins(pins_project(tmp_path / "c", f"{registry.host}/pins/base:no-such-tag"))
    assert (code, image_row(out)["status"]) == (10, "missing"), out


@pytest.mark.e2e
def test_a_platform_manifest_of_the_tags_list_is_ok(registry, tmp_path):
    """A digest pinned from one platform of a multi-arch tag: the tag points at the list, which holds it."""
    a = push_standin(registry, "pins/multi", "a")
    b = push_standin(registry, "pins/multi", "b")
    repo = f"{registry.host}/pins/multi"
    made = subprocess.run(
        ["docker", "buildx", "imagetools", "create", "-t", f"{repo}:list", f"{repo}@{a}", f"{repo}@{b}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    code, out = run_pins(pins_project(tmp_path / "p", f"{repo}:list@{b}"))
    row = image_row(out)
    assert (code, row["status"]) == (0, "ok"), out
    assert "linux/amd64 manifest of the list" in row["reason"] and row["now"] != b


@pytest.mark.e2e
def test_stopped_registry_is_unreachable_and_exits_0(tmp_path):
    engine_or_skip()
    with LoopbackRegistry() as registry:  # one of its own: this test stops it
        digest = push_standin(registry, "pins/base", "1.0")
        matrix = pins_project(tmp_path / "p", f"{registry.host}/pins/base:1.0@{digest}")
        registry.stop()
    code, out = run_pins(matrix)
    row = image_row(out)
    assert (code, row["status"], row["now"]) == (0, "unreachable", None), out
    assert (
        row["reason"].startswith(f"not checked: {registry.host} unreachable:")
        and "connection refused" in row["reason"]
    )
    text = CliRunner().invoke(cli, ["pins", "--matrix", str(matrix)])
    assert text.exit_code == 0 and "1 unreachable (unreachable = not checked" in text.output


def test_engine_down_makes_image_rows_unreachable_and_exits_0(tmp_path, monkeypatch):
    matrix = pins_project(tmp_path / "p", "127.0.0.1:5000/pins/base:1.0@sha256:" + "0" * 64)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code, out = run_pins(matrix)
    row = image_row(out)
    assert (code, row["status"]) == (0, "unreachable"), out
    assert row["reason"].startswith("not checked: Docker engine unreachable:") and "start it" in row["reason"]
    assert [r["status"] for r in out["pins"] if r["kind"] == "source"] == ["ok"]  # the rest is still checked


# ------------------------------------------------------------------------------------------ git


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def git_repo(path: Path) -> tuple[Path, str]:
    """A repository with one commit, annotated tag v1 and branch main on it: (path, commit)."""
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "CMakeLists.txt").write_text("project(x)\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "one")
    git(path, "tag", "-a", "v1", "-m", "v1")
    return path, git(path, "rev-parse", "HEAD")


def source_pin(**spec) -> pins.Pin:
    src = SourceSpec(**spec)
    return pins.Pin("source", pins.source_ref(src), src.commit, ("sources.test",), src)


def check(pin: pins.Pin, lm=None, hosts: pins.Hosts | None = None) -> pins.PinResult:
    return pins.check_pin(pin, lm, hosts=hosts, timeout=10)


def test_git_tag_pinned_with_its_commit_ok_then_moved_then_missing(tmp_path):
    repo, head = git_repo(tmp_path / "up")
    pin = source_pin(git=repo.as_uri(), ref="v1", commit=head)
    r = check(pin)
    assert (r.status, r.now) == ("ok", head), r  # the annotated tag is peeled to its commit

    (repo / "b.txt").write_text("two\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "two")
    git(repo, "tag", "-f", "-a", "v1", "-m", "v1 again")
    new = git(repo, "rev-parse", "HEAD")
    r = check(pin)
    assert (r.status, r.now) == ("moved", new) and f"not the pinned {head}" in r.reason, r

    git(repo, "tag", "-d", "v1")
    r = check(pin)
    assert r.status == "missing" and "no tag or branch 'v1'" in r.reason, r
    r = check(source_pin(git=repo.as_uri(), ref="main"))  # a branch, nothing pinned
    assert (r.status, r.now, r.pin.pinned) == ("ok", new, None) and f"add `commit: {new}`" in r.reason, r


def test_git_commit_refs_are_fetched_by_hash(tmp_path):
    repo, head = git_repo(tmp_path / "up")
    (repo / "b.txt").write_text("two\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "two")  # the pinned commit is no branch tip any more
    r = check(source_pin(git=repo.as_uri(), ref=head, commit=head))
    assert (r.status, r.now) == ("ok", head), r
    other = "1" * 40
    r = check(source_pin(git=repo.as_uri(), ref=other, commit=other))
    assert r.status == "missing" and f"commit {other} is not on the remote" in r.reason, r


def test_git_host_that_does_not_answer_is_unreachable_once(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/x.git"
    hosts = pins.Hosts()
    r = check(source_pin(git=url, ref="v1", commit="a" * 40), hosts=hosts)
    assert r.status == "unreachable" and r.reason.startswith(
        f"not checked: 127.0.0.1:{port} unreachable: "
    ), r
    assert "refused" in r.reason.lower() or "connect" in r.reason.lower(), r
    again = check(source_pin(git=url.replace("x.git", "y.git"), ref="v2"), hosts=hosts)
    assert again.status == "unreachable" and "not asked again" in again.reason, again


# ----------------------------------------------------------------------------------------- PyPI


@pytest.mark.contract  # reads the real index (PyPI): not the network-free fast level
def test_pypi_sdist_on_the_real_index(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    lm = load_matrix(ROOT / "matrix.yaml")
    fallback = lm.m.sources["llama.cpp"].fallback
    pin = pins.Pin("source", pins.source_ref(fallback), "0.3.36", ("sources.llama.cpp.fallback",), fallback)
    r = check(pin, lm)
    assert (
        r.status == "ok" and "llama_cpp_python-0.3.36.tar.gz" in r.reason and r.now.startswith("sha256:")
    ), r

    # the sdist the source fetcher cached, with other bytes than the index states: moved
    from toolkit.images import sources

    cached = sources.cache_dir() / f"pypi-{sources._key(fallback.pypi)}" / "llama_cpp_python-0.3.36.tar.gz"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not the sdist")
    r = check(pin, lm)
    assert r.status == "moved" and str(cached) in r.reason, r

    gone = SourceSpec(pypi="llama-cpp-python==0.0.999", subdir="vendor/llama.cpp", commit="a" * 40)
    r = check(pins.Pin("source", "pypi:llama-cpp-python==0.0.999", "0.0.999", ("x",), gone), lm)
    assert r.status == "missing" and "no sdist of llama-cpp-python 0.0.999" in r.reason, r


def test_pypi_index_that_does_not_answer_is_unreachable(monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{free_port()}/simple/")
    spec = SourceSpec(pypi="llama-cpp-python==0.3.36", subdir="vendor/llama.cpp", commit="a" * 40)
    r = check(
        pins.Pin("source", "pypi:llama-cpp-python==0.3.36", "0.3.36", ("x",), spec),
        load_matrix(ROOT / "matrix.yaml"),
    )
    assert r.status == "unreachable" and "refused" in r.reason.lower(), r


# ----------------------------------------------------------------------------- Hugging Face Hub


REV = "f" * 40


class StandInHub(BaseHTTPRequestHandler):
    """Answers GET /api/models/<org>/<name>/revision/<rev> as the Hub does (the Hub is unreachable here):
    200 + {id, sha, siblings} for acme/model at REV; X-Error-Code RevisionNotFound / RepoNotFound; 503 for
    acme/busy."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        parts = self.path.split("?")[0].split("/")
        repo, rev = "/".join(parts[3:5]), parts[6] if len(parts) > 6 else "main"
        if repo == "acme/busy":
            return self._send(503, {"error": "overloaded"})
        if repo != "acme/model":
            return self._send(401, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
        if rev not in (REV, "main"):
            return self._send(404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"})
        self._send(
            200, {"id": repo, "sha": REV, "siblings": [{"rfilename": "config.json"}, {"rfilename": "m.gguf"}]}
        )

    def _send(self, code: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def hub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandInHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def model_pin(repo: str, revision: str | None = REV, file: str | None = None) -> pins.Pin:
    hf = HfFile(repo=repo, revision=revision, file=file)
    return pins.Pin("model", f"hf:{repo}", revision, ("models[m].hf",), hf)


@pytest.mark.parametrize(
    ("pin", "status", "words"),
    [
        pytest.param(model_pin("acme/model", file="m.gguf"), "ok", "revision exists, m.gguf in it", id="ok"),
        pytest.param(
            model_pin("acme/model", revision=None), "ok", f"default branch is at {REV}", id="unpinned"
        ),
        pytest.param(
            model_pin("acme/model", revision="e" * 40),
            "missing",
            "revision " + "e" * 40 + " does not exist",
            id="revision-gone",
        ),
        pytest.param(
            model_pin("acme/model", file="gone.gguf"), "missing", "no file gone.gguf", id="file-gone"
        ),
        pytest.param(model_pin("acme/gone"), "missing", "repository not found", id="repo-gone"),
        pytest.param(model_pin("acme/busy"), "unreachable", "not checked", id="hub-5xx"),
    ],
)
def test_hub_answers(hub, pin, status, words):
    r = pins.check_pin(pin, None, timeout=5, hf_endpoint=hub)
    assert r.status == status and words in r.reason, r


def test_hub_that_does_not_answer_is_unreachable():
    r = pins.check_pin(
        model_pin("acme/model"), None, timeout=5, hf_endpoint=f"http://127.0.0.1:{free_port()}"
    )
    assert r.status == "unreachable" and r.reason.startswith("not checked:") and "Connect" in r.reason, r


@pytest.mark.e2e
def test_podman_has_no_registry_lookup_so_image_pins_are_not_checked_never_missing(tmp_path, monkeypatch):
    """Podman's Docker-compatible API answers 404 to every distribution inspect ("Path
    /v1.41/distribution/debian:trixie-slim/json is not supported"; "Not Found" for a digest): it never
    asks a registry, so that 404 says nothing of the pin. Seen on a fresh Debian 12 stand-in as its sudo
    user with rootless Podman: every base image `missing`, exit 10. Needs the real podman (CI installs it)."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (./scripts/setup-host.sh --test installs it)")
    monkeypatch.setenv("TOOLKIT_ENGINE", "podman")
    code, out = run_pins(pins_project(tmp_path / "p", "debian:trixie-slim@sha256:" + "0" * 64))
    row = image_row(out)
    # a known lack of the engine, not a network failure (nc48 S12: it said "unreachable")
    assert (code, row["status"]) == (0, "unchecked"), out
    assert (
        "Podman" in row["reason"] and "skopeo inspect docker://debian@sha256:" + "0" * 64 in row["reason"]
    ), row
    assert out["counts"]["unchecked"] == 1 and "unreachable" not in row["reason"], out
