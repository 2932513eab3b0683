"""Shared fixtures, and the test levels (README, "Test levels"; scripts/run-tests.sh):

- `e2e`: needs a running Docker engine with buildx (CI starts one).
- `contract`: runs pinned outside code fetched from PyPI on first use and cached (~/.cache/toolkit/):
  the vLLM/SGLang releases' own parsers, the pinned llama.cpp tree. A test that uses one of the
  fixtures in CONTRACT_FIXTURES is in this level whether or not its file says so (the level follows
  what the test uses), so the fast level never downloads.
- fast = `-m "not e2e and not contract"`: no engine, no network (run-tests.sh runs it in a network
  namespace without interfaces and with DOCKER_HOST pointing nowhere, so a test that needs either fails).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.support.project import ROOT  # shared helpers live in tests/support; test modules import them there

# A suite started in the background by a non-interactive shell (`./scripts/run-tests.sh all &`)
# inherits SIGINT ignored, and so would every process it starts (an ignored signal stays ignored across
# exec, and Python then installs no KeyboardInterrupt handler): the tests that press Ctrl-C on a
# toolkit process (SIGINT) would see it ignored and fail. Handled here, children start with the default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Test runs share one Docker engine and may overlap (parallel sessions); their tiny-model numbers are
# smoke signals, so bench runs of the tests may overlap: each record written meanwhile is flagged
# `concurrent`. tests/test_faults.py unsets this to check the refusal (exit 9) itself.
os.environ.setdefault("TOOLKIT_ALLOW_CONCURRENT", "1")

# The query index's key (toolkit/results/index_trust.py) lives in ${XDG_STATE_HOME:-~/.local/state}: one
# per test session, so a read-only or shared HOME (CI) neither stops the on-disk index the tests check
# nor sees a key the tests made. Tests of HOME itself set or unset the variable in their own env.
_STATE = tempfile.mkdtemp(prefix="toolkit-test-state-")
os.environ["XDG_STATE_HOME"] = _STATE
atexit.register(shutil.rmtree, _STATE, True)

CONTRACT_FIXTURES = {
    "release_python": "a pinned vLLM/SGLang release's own code in a cached venv (PyPI wheels on first use)",
    "llama_tree": "the pinned llama.cpp tree (llama-cpp-python's sdist from PyPI on first use)",
    "vllm_sdist": "the pinned vLLM releases' source (vllm-<version>.tar.gz from PyPI on first use)",
}
"""Fixture name -> what it fetches: tests using one are `contract` tests (added by the hook below)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put every test that uses a CONTRACT_FIXTURES fixture (directly or through another fixture) in
    the `contract` level. Runs before `-m` deselection, so `-m "not contract"` leaves them out."""
    for item in items:
        used = sorted(set(getattr(item, "fixturenames", ())) & CONTRACT_FIXTURES.keys())
        if used and item.get_closest_marker("contract") is None:
            item.add_marker(pytest.mark.contract(reason=f"uses {', '.join(used)}"))


@pytest.fixture(scope="module")
def registry():
    """The loopback registry, one per test module: Debian's docker-registry in a throwaway container
    started through testcontainers at 127.0.0.1:<port> (`registry.host`), manifest deletes enabled,
    removed with the module (or by the reaper if the test process dies). tests/support/service_containers.py."""
    from tests.support.e2e_helpers import engine_or_skip

    engine_or_skip()
    from tests.support.service_containers import LoopbackRegistry

    with LoopbackRegistry() as reg:
        yield reg


@pytest.fixture(scope="session")
def llama_tree() -> Path:
    """The pinned llama.cpp tree of matrix.yaml (`sources: llama.cpp`), prepared as `toolkit build` does."""
    from toolkit.images.sources import prepare_source
    from toolkit.matrix.api import load_matrix

    src = prepare_source(load_matrix(ROOT / "matrix.yaml"), "llama.cpp", skip_git=True)
    assert (src.path / "ggml" / "CMakeLists.txt").is_file(), src.path
    return src.path


@pytest.fixture(scope="session")
def vllm_sdist():
    """version -> the unpacked source of that vLLM release's PyPI sdist (the `vllm_version` of each vLLM
    image in matrix.yaml), downloaded once into ~/.cache/toolkit/sdists/ (PyPI's simple index)."""
    import re
    import tarfile
    import urllib.request

    cache = Path(os.environ.get("TOOLKIT_SDIST_CACHE", Path.home() / ".cache" / "toolkit" / "sdists"))
    cache.mkdir(parents=True, exist_ok=True)

    def get(version: str) -> Path:
        tree = cache / f"vllm-{version}"
        if (tree / "vllm" / "platforms" / "rocm.py").is_file():
            return tree
        tgz = cache / f"vllm-{version}.tar.gz"
        if not tgz.is_file():
            index = urllib.request.urlopen("https://pypi.org/simple/vllm/", timeout=60).read().decode()
            m = re.search(rf'href="(https://[^"#]+/vllm-{re.escape(version)}\.tar\.gz)', index)
            assert m, f"no sdist of vllm {version} on PyPI"
            urllib.request.urlretrieve(m.group(1), tgz.with_suffix(".part"))
            tgz.with_suffix(".part").rename(tgz)
        with tarfile.open(tgz) as tf:
            members = [x for x in tf.getmembers() if x.name.startswith(f"vllm-{version}/vllm/")]
            if hasattr(tarfile, "data_filter"):
                tf.extractall(cache, members=members, filter="data")
            else:  # Python before 3.11.4 (Debian 12's 3.11.2) has no extraction filters: files and folders only
                plain = [x for x in members if (x.isfile() or x.isdir()) and ".." not in Path(x.name).parts]
                tf.extractall(cache, members=plain)
        return tree

    return get


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project's matrix and templates in tmp_path (results/ and images/ land there)."""
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    return tmp_path


@pytest.fixture
def matrix_data() -> dict:
    return yaml.safe_load((ROOT / "matrix.yaml").read_text())
