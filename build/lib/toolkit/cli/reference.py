"""The command reference, docs/commands.md, generated from every command's `--help`.

`python3 -m toolkit.cli.reference > docs/commands.md` writes it; tests/test_docs.py fails when the file
and the commands' help drift apart.
"""

from __future__ import annotations

import click

from toolkit.cli.main import cli

HEADER = (
    "# Command reference\n\n"
    "Generated from each command's `--help` by `python3 -m toolkit.cli.reference > docs/commands.md`; "
    "a test fails when this file and the commands drift apart. Do not edit by hand.\n"
)


def _walk(cmd: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    out = [(path, cmd)]
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            out += _walk(cmd.commands[name], [*path, name])
    return out


def render() -> str:
    """docs/commands.md as text: one section per command and subcommand, its `--help` verbatim
    (rendered at a fixed width of 100 columns so the file does not depend on the terminal)."""
    parts = [HEADER]
    for path, cmd in _walk(cli, ["toolkit"]):
        ctx = click.Context(cmd, info_name=" ".join(path), terminal_width=100, max_content_width=100)
        parts.append(f"\n## `{' '.join(path)}`\n\n```\n{cmd.get_help(ctx).rstrip()}\n```\n")
    return "".join(parts)


if __name__ == "__main__":
    click.echo(render(), nl=False)
