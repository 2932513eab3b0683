"""The command reference, docs/commands.md, generated from every command's `--help`.

`python3 -m toolkit.cli.reference > docs/commands.md` writes it; tests/test_docs.py fails when the file
and the commands' help drift apart.
"""

from __future__ import annotations

import click

from toolkit.cli.common import HELP_OPTIONS
from toolkit.cli.main import cli

HEADER = (
    "# Command reference\n\n"
    "Generated from each command's `--help` by `python3 -m toolkit.cli.reference > docs/commands.md`; "
    "a test fails when this file and the commands drift apart. Do not edit by hand "
    "(this preamble is HEADER in toolkit/cli/reference.py).\n"
    """
## Conventions

- **`--json`** (every command): stdout is one JSON document, the envelope

  ```json
  {"schema_version": 1, "command": "campaign status", "toolkit_version": "X.Y.Z",
   "ok": true, "exit_code": 0, "error": null, "result": ...}
  ```

  `exit_code` is the process's exit status (docs/exit-codes.md) and `ok` is `exit_code == 0`; `error`
  is the message (also on stderr), null when ok; `result` is the command's data, null when it failed
  before having any. A command that has its result and then fails (compare's regression, exit 6)
  prints the result with `ok: false`. Progress and notes go to stderr. NaN and infinity are written
  as null; paths and dates as strings. `schema_version` changes when a key of the envelope changes
  meaning or goes away. `result` per command: bench, a list of outcomes (image, model, status,
  reason, ...); build, a list of build results; render, [{image, dockerfile, build_command}]; pins,
  {pins: [...], ...}; doctor, {ok, cannot_run, errors, host, checks, images}; push, [{image, status
  (pushed, dry-run, skipped, failed), reason, refs, repo_digest, seconds, notes}]; export-run, the
  run.json written; reproduce, the verdict with recorded vs reproduced rows; compare, {a, b, rows,
  regressions (a count), ...}; import, {sets: [...], ...}; measure, {command, exit_code, seconds, rows,
  flags, output, trace, kernel_fault}; tune, {session, axis, test, best, default, gain, no_effect,
  undecided, notes, ranking, matrix_diff}; fetch-model, [{model, path, exists, size_bytes, sha256,
  twin, status}]; campaign submit and status, the campaign; campaign cancel, {campaign, cancelled,
  would_cancel}; campaign render-k8s, {files, notes}.
- **`report --format json`** (and `report --json`, the same) prints the report document itself, not
  the envelope: it is a document to keep (like the csv and html formats), not a command's result. Its
  errors are the envelope.
- **`-o/--output`** names the file or folder a command writes (report, measure, export-run,
  campaign render-k8s); `--out` is a second spelling of the same option.
- **`--dry-run`** says what would be done and changes nothing outside the results folder: build,
  bench, push, fetch-model, campaign submit and cancel. `render` is itself build's dry run (it writes
  only the generated images/<name>/Dockerfile); `tune --write` prints the matrix change, it never
  applies it. `reproduce` (pulls or rebuilds images) and `measure` (runs your command) have none.
"""
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
        ctx = click.Context(
            cmd,
            info_name=" ".join(path),
            terminal_width=100,
            max_content_width=100,
            help_option_names=HELP_OPTIONS,
        )
        parts.append(f"\n## `{' '.join(path)}`\n\n```\n{cmd.get_help(ctx).rstrip()}\n```\n")
    return "".join(parts)


if __name__ == "__main__":
    click.echo(render(), nl=False)
