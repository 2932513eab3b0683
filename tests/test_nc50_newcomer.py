"""Newcomer nc50 on a fresh Debian 12 stand-in, rootless Podman: a command a row prints must work pasted
on that host (the --resume --dry-run wording: tests/test_depth.py)."""

import shutil

import pytest

from toolkit.engine import api as engine
from toolkit.images import pins


@pytest.mark.parametrize(
    ("ref", "pasted"),
    [
        ("debian:trixie-slim", "debian:trixie-slim"),
        (
            "rocm/dev-ubuntu-24.04:7.2.1-complete@sha256:" + "3d" * 32,
            "rocm/dev-ubuntu-24.04@sha256:" + "3d" * 32,
        ),
        ("localhost:5000/team/cpu", "localhost:5000/team/cpu:latest"),
    ],
)
def test_a_podman_pin_row_names_the_skopeo_command_of_its_own_ref(monkeypatch, ref, pasted):
    """`toolkit pins` on a Podman-only host: every image row said `skopeo inspect docker://REF`, a
    placeholder, on a host where setup-host.sh --podman installs no skopeo (`skopeo: command not
    found`). The row now names its own reference in the form skopeo takes (a digest, else the tag:
    skopeo refuses both at once) and how to install skopeo where it is absent."""
    monkeypatch.setattr(engine, "is_podman", lambda: True)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pins.Unchecked) as err:
        pins.DockerLookup(1.0).digest(ref)
    msg = str(err.value)
    assert f"`sudo apt-get install -y skopeo`, then `skopeo inspect docker://{pasted}`" in msg, msg
    assert "REF" not in msg
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/skopeo")
    with pytest.raises(pins.Unchecked) as err:
        pins.DockerLookup(1.0).digest(ref)
    assert "apt-get" not in str(err.value) and f"`skopeo inspect docker://{pasted}`" in str(err.value)
