"""The docs stay true to the code: the command reference, the committed renders, the README's links."""

from __future__ import annotations

import re
from pathlib import Path

from toolkit.cli import reference
from toolkit.images import render
from toolkit.matrix.api import load_matrix

ROOT = Path(__file__).resolve().parents[1]


def test_command_reference_matches_help():
    """docs/commands.md is exactly what `python3 -m toolkit.cli.reference` writes from --help."""
    assert (ROOT / "docs" / "commands.md").read_text() == reference.render(), (
        "docs/commands.md drifted from the commands' --help: run "
        "`python3 -m toolkit.cli.reference > docs/commands.md`"
    )


def test_every_command_is_in_the_reference():
    text = (ROOT / "docs" / "commands.md").read_text()
    for name in reference.cli.commands:
        assert f"## `toolkit {name}`" in text


def test_committed_renders_match_the_templates():
    """images/<name>/Dockerfile is what the templates and matrix.yaml render to now (a template edit
    without `toolkit render` fails here)."""
    lm = load_matrix(ROOT / "matrix.yaml")
    for spec in lm.images:
        r = render.render_image(lm, spec)
        committed = ROOT / "images" / spec.name / "Dockerfile"
        assert committed.is_file(), f"{committed} missing: run `toolkit render`"
        assert committed.read_text() == r.content, f"{committed} is stale: run `toolkit render`"


def test_readme_links_resolve_and_readme_is_a_newcomers_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
    for pkg in (p for p in (ROOT / "toolkit").iterdir() if (p / "__init__.py").is_file()):
        assert f"`toolkit/{pkg.name}`" in text, f"README's code map misses toolkit/{pkg.name}"


def _anchors(md: str) -> set[str]:
    """GitHub's heading anchors of a markdown text: lowercased, punctuation dropped, spaces -> '-'."""
    out = set()
    for h in re.findall(r"^#{1,6} (.+)$", md, re.M):
        out.add(re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-"))
    return out


def test_every_docs_link_and_named_section_exists():
    # docs/running.md sent readers to "Setting up a host", "Test levels", "Many hosts": sections that had
    # become other files, unlinked
    docs = {p: p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
    for path, md in docs.items():
        for target, anchor in re.findall(r"\]\((?!https?:)([^)#\s]*)(?:#([^)\s]+))?\)", md):
            dest = (path.parent / target).resolve() if target else path
            assert dest.exists(), f"{path.name} links to {target}, which does not exist"
            if anchor and dest.suffix == ".md":
                assert anchor in _anchors(dest.read_text()), (
                    f"{path.name} links to {target}#{anchor}: no such heading"
                )
        # a section named in quotes is one of the same page (another page's is a link)
        headings = {h.strip() for h in re.findall(r"^#{1,6} (.+)$", md, re.M)}
        headings |= {b.strip() for b in re.findall(r"^\*\*([^*]+)\*\*", md, re.M)}
        for name in re.findall(r'see "([^"]+)"', md):
            assert any(h.startswith(name) for h in headings), (
                f'{path.name}: see "{name}": no such section here'
            )


def test_version_names_the_commit_of_a_checkout():
    """Issue 33: `--version` had no commit although every result is tied to a toolkit version."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "toolkit", "--version"], capture_output=True, text=True, cwd=ROOT
    )
    head = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0 and out.stdout.startswith("toolkit, version ")
    if head.returncode == 0:  # a git checkout (CI's is one)
        assert (
            f"(commit {head.stdout.strip()})" in out.stdout
            or f"(commit {head.stdout.strip()}-dirty)" in out.stdout
        )
        # (-dirty: a checkout with changes, tests/test_dirty_checkout.py)
