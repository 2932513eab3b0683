"""The toolkit's own CPU per bench (issue 32 item 16): loading a matrix imports what its blocks need.
Each check loads the matrix in a fresh interpreter and reads `sys.modules` at its end, so an import
that comes back at the top of a module the path loads fails here, whatever the machine's speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.core import registry
from toolkit.core.errors import BadInput
from toolkit.matrix.loading import load_matrix

ROOT = Path(__file__).resolve().parents[1]


def _modules_after_load(matrix: Path) -> tuple[list[str], dict]:
    """(every module loaded, {block: its settings dumped}) after load_matrix(matrix) in a fresh
    interpreter; the settings are asked for after the modules are listed."""
    code = (
        "import json, sys\n"
        "from toolkit.matrix.loading import load_matrix\n"
        f"lm = load_matrix({str(matrix)!r})\n"
        "mods = sorted(sys.modules)\n"
        "blocks = {k: lm.m.settings(k).model_dump(mode='json') for k in ('vllm', 'sglang')}\n"
        "print(json.dumps([mods, blocks]))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    mods, blocks = json.loads(p.stdout.strip().splitlines()[-1])
    return mods, blocks


def _without_runner_blocks(tmp_path: Path) -> Path:
    """The project's matrix.yaml with its `vllm:` block (and any `sglang:` block) left out."""
    lines, skip = [], False
    for line in (ROOT / "matrix.yaml").read_text().splitlines(keepends=True):
        if line[:1].strip() and not line.startswith("#"):
            skip = line.split(":", 1)[0] in registry.SETTINGS
        if not skip:
            lines.append(line)
    out = tmp_path / "matrix.yaml"
    out.write_text("".join(lines))
    (tmp_path / "Dockerfile.templates").symlink_to(ROOT / "Dockerfile.templates")
    return out


def test_a_matrix_loads_the_settings_model_of_a_written_runner_block_only(tmp_path):
    """Reproducer: every matrix load imported and built the vLLM and SGLang settings models, with or
    without their blocks (~0.03 CPU s for SGLang's on the project's matrix, which writes only `vllm:`).
    Now a block not written is not validated at load; `settings(key)` gives the same defaults."""
    from toolkit.runtimes.sglang.args import SglangSettings
    from toolkit.runtimes.vllm.settings import VllmSettings

    mods, blocks = _modules_after_load(ROOT / "matrix.yaml")
    assert "toolkit.runtimes.vllm.settings" in mods  # the project's matrix writes `vllm:`
    assert "toolkit.runtimes.sglang.args" not in mods
    assert blocks["sglang"] == SglangSettings().model_dump(mode="json")
    assert blocks["vllm"] == load_matrix(ROOT / "matrix.yaml").m.settings("vllm").model_dump(mode="json")

    mods, blocks = _modules_after_load(_without_runner_blocks(tmp_path))
    assert "toolkit.runtimes.vllm.settings" not in mods and "toolkit.runtimes.sglang.args" not in mods
    assert blocks == {
        "vllm": VllmSettings().model_dump(mode="json"),
        "sglang": SglangSettings().model_dump(mode="json"),
    }
    assert "difflib" not in mods  # only the error messages' suggestions need it


def test_a_written_block_is_still_validated_and_an_empty_one_is_its_defaults(tmp_path):
    """A written block is validated at load as before (an unknown key is bad input naming it); a key
    written with no value (`sglang:`) is that runner's defaults; an unregistered block is a KeyError."""
    from toolkit.runtimes.sglang.args import SglangSettings

    path = _without_runner_blocks(tmp_path)
    base = path.read_text()
    path.write_text(base + "sglang:\n  no_such_knob: 1\n")
    with pytest.raises(BadInput, match=r"sglang\.no_such_knob"):
        load_matrix(path)
    path.write_text(base + "sglang:\n")
    lm = load_matrix(path)
    assert lm.m.runner_settings["sglang"] == SglangSettings() == lm.m.settings("sglang")
    with pytest.raises(KeyError):
        lm.m.settings("nosuch")


class _CountingClient:
    """A docker SDK client as engine_id / engine_info use it, counting its `docker info` requests."""

    def __init__(self, engine_id: str):
        self.id, self.infos = engine_id, 0

    def info(self) -> dict:
        self.infos += 1
        return {"ID": self.id, "SecurityOptions": ["name=seccomp,profile=x"], "Driver": "overlay2"}

    def version(self) -> dict:
        return {"Version": "26.1.5", "ApiVersion": "1.45", "Os": "linux", "KernelVersion": "6.1.0"}


def test_docker_info_is_asked_once_per_client(monkeypatch):
    """Reproducer: a bench asked the engine for `docker info` three times (engine_id for its build's
    engine and for its guards, engine_info for its records' host facts), ~13 ms of wall each here.
    Now once per client; another client (another engine address) is asked for its own."""
    from toolkit.engine import choice

    monkeypatch.setenv("TOOLKIT_ENGINE", "docker")
    first, other = _CountingClient("A" * 12), _CountingClient("B" * 12)
    current = [first]
    monkeypatch.setattr(choice, "client", lambda: current[0])
    assert choice.engine_id() == choice.engine_id() == "A" * 12
    facts = choice.engine_info(buildx=False)
    assert facts["server_version"] == "26.1.5" and facts["SecurityOptions"] == ["name=seccomp,profile=x"]
    assert first.infos == 1
    current[0] = other
    assert choice.engine_id() == "B" * 12 and other.infos == 1


@pytest.mark.parametrize("block", ["[]", "0", "false", "''", "[1]", "x"])
def test_a_runner_block_that_is_not_a_mapping_is_refused_even_when_empty_or_false(tmp_path, block):
    """Breaker round 14: `vllm: []`, `vllm: 0`, `vllm: false` and `vllm: ''` loaded as the defaults
    (`value or {}`) where `vllm: [1]` was refused; only a key with no value (`vllm:`) is the defaults."""
    path = _without_runner_blocks(tmp_path)
    path.write_text(path.read_text() + f"vllm: {block}\n")
    with pytest.raises(
        BadInput, match=r"matrix.yaml: vllm: .* -> write `vllm:` as a mapping of its settings"
    ):
        load_matrix(path)
