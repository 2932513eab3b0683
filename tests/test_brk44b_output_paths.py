"""brk44b (breaker of left44b's output_parent): the fix a missing output folder's message gives must be
one that works, through the real command (`measure -o`: the check runs before anything is measured):

- a folder name with a space was told `mkdir -p a b` (two folders, neither the one asked for): quoted;
- a `~` that reached the toolkit unexpanded (`-o '~/x'`, `-o "~/x"`) was told `mkdir -p ~`, which the
  shell turns into the home folder that already exists (the command failed again): named as a quoted
  `~`;
- a folder that is a link to nowhere (`dangdir -> nowhere`) was told `mkdir -p dangdir` (fails: the
  link exists; before left44b the write named the link and its fix, exit 4): the write's message again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.runs import tk


def _measure(cwd: Path, out: str):
    return tk(cwd, "measure", "--gpu", "none", "-o", out, "--", "true")


def test_a_missing_folder_with_a_space_is_told_a_quoted_mkdir(tmp_path: Path) -> None:
    res = _measure(tmp_path, "a b/m.jsonl")
    assert res.returncode == 4, res.stderr
    assert "(mkdir -p 'a b')" in res.stderr, res.stderr
    assert not (tmp_path / "a b").exists() and not (tmp_path / "a").exists()


@pytest.mark.parametrize("out", ["~/m.jsonl", "~/sub/m.jsonl"])
def test_an_unexpanded_tilde_is_named_not_told_mkdir(tmp_path: Path, out: str) -> None:
    res = _measure(tmp_path, out)
    assert res.returncode == 4, res.stderr
    assert "mkdir -p ~" not in res.stderr and "a quoted `~` is not your home folder" in res.stderr, res.stderr
    assert not (tmp_path / "~").exists()


@pytest.mark.parametrize("out", ["dangdir/m.jsonl", "dangdir/sub/m.jsonl"])
def test_a_folder_that_is_a_link_to_nowhere_is_named_as_a_link(tmp_path: Path, out: str) -> None:
    (tmp_path / "dangdir").symlink_to("nowhere")
    res = _measure(tmp_path, out)
    assert res.returncode == 4, res.stderr
    assert "dangdir is a symbolic link (to 'nowhere')" in res.stderr, res.stderr
    assert "mkdir -p" not in res.stderr, res.stderr
    assert not (tmp_path / "nowhere").exists()
