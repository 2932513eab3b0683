"""The command line: thin Click commands that parse options, call one function, print the result.

The group and the entry point; the commands live one module per group beside it (images, bench,
results, host, publish, tune, campaign), registered here with add_command. Only this package prints.
Errors (toolkit.core.errors) carry their exit code; `main` maps them.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import io
import os
import signal
import sys
from collections.abc import Iterator, MutableMapping
from typing import NoReturn

import click

from toolkit import __version__
from toolkit.cli.common import (
    EPILOG,
    HELP_OPTIONS,
    INTERRUPTED,
    EnvelopeGroup,
    _err,
    json_asked,
    json_printed,
    misplaced_option,
    note_json,
    outcome_of,
    print_envelope,
)
from toolkit.core import invocation, signals
from toolkit.core.errors import ToolkitError

ENVIRONMENT = (
    ("TOOLKIT_ENGINE", "docker | podman | auto: the default of --engine"),
    ("DOCKER_HOST", "the Docker engine to use (unix:// or tcp://)"),
    (
        "TOOLKIT_ALLOW_CONCURRENT",
        "1: bench, tune and reproduce run beside another benchmark, as with `toolkit bench "
        "--allow-concurrent` (records flagged `concurrent`)",
    ),
    ("TOOLKIT_CACHE", "where fetched sources and sdists are kept (default ~/.cache/toolkit)"),
    ("TOOLKIT_HOST_KEY", "a campaign job's host key (set by `toolkit campaign` on the nodes)"),
)
"""The variables `toolkit --help` lists in its Environment section (name, what it does); a command refuses
a TOOLKIT_* one whose value is not one line of text (EnvelopeGroup.resolve_command), exit 4."""


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`toolkit --version`: the version and, from a git checkout of the toolkit, its commit (every
    result records the toolkit version; the commit says which code that was between releases)."""
    if not value or ctx.resilient_parsing:
        return
    from toolkit.host.info import TOOLKIT_ROOT, commit_words, toolkit_source

    commit = commit_words(toolkit_source())
    unknown = (  # a checkout git refuses to read (another user's: `safe.directory`) is no "not a checkout"
        f" (commit unknown: git could not read the checkout {TOOLKIT_ROOT}: `git -C {TOOLKIT_ROOT} status` says why)"
        if (TOOLKIT_ROOT / ".git").exists()
        else " (not a git checkout: commit unknown)"
    )
    click.echo(f"toolkit, version {__version__}" + (f" (commit {commit})" if commit else unknown))
    ctx.exit()


@click.group(
    cls=EnvelopeGroup,
    epilog=EPILOG,
    environment=ENVIRONMENT,
    context_settings={"help_option_names": HELP_OPTIONS},  # every subcommand's context inherits it
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Show the version (and the git commit of this checkout) and exit.",
)
@click.option(
    "--engine",
    type=click.Choice(["docker", "podman", "auto"], case_sensitive=False),
    default=None,
    help="Container engine: docker, podman (rootful as root, rootless as any other user; its API "
    "service is started when needed) or auto. Default: $TOOLKIT_ENGINE, else auto: Docker where it is "
    "installed (or DOCKER_HOST is set), else Podman where `podman` is installed.",
)
def cli(engine):
    """Build LLM inference images for the AMD Radeon AI PRO R9700 (gfx1201) and benchmark them.

    The main job: `toolkit build && toolkit bench` builds the images in matrix.yaml that this host
    can run (`toolkit doctor`'s verdict; `toolkit build --all` builds every one), runs llama-bench in each (prefill pp and decode tg), stores results
    per image digest under results/ and prints the tables. `toolkit doctor` says what this host
    can run and why not. On a Podman host: `toolkit --engine podman build && toolkit --engine podman
    bench` (or TOOLKIT_ENGINE=podman).

    """
    ctx = click.get_current_context()
    chosen = engine or os.environ.get("TOOLKIT_ENGINE", "").strip().lower()
    # one rule, either form: a suggested command names the engine the user chose (invocation.command)
    invocation.start(chosen if chosen in ("docker", "podman", "auto") else None)
    ctx.call_on_close(lambda: invocation.start(None))
    if engine:  # for this invocation: the engine module reads it, child processes (campaigns) inherit it
        before = os.environ.get("TOOLKIT_ENGINE")
        os.environ["TOOLKIT_ENGINE"] = engine
        ctx.call_on_close(lambda: _restore_env("TOOLKIT_ENGINE", before))


def _restore_env(name: str, value: str | None) -> None:
    """Environment variable `name` set back to `value` (None: unset) once an invocation ends: a later
    invocation in the same process (tests, a campaign's steps) is not run with this one's --engine."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


class _ClosedStream(io.TextIOBase):
    """Standard output or error the command was started without (`>&-`, `2>&-`: Python's sys.stdout
    is then None, which every print met as a bug's AttributeError, exit 1): each write refuses as a
    closed descriptor does, named (OSError EBADF: exit 8 in one line, as a full disk is)."""

    def __init__(self, name: str) -> None:
        self.name = name

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF), self.name)

    def isatty(self) -> bool:
        return False


def _standard_streams_open() -> None:
    """Standard input, output and error held open whatever the command was started with: a closed one
    (`>&-`) gets /dev/null as its descriptor, so no file the command opens takes its number (the first
    file opened became descriptor 2, and whatever wrote to standard error then, a child process
    included, wrote into it), and Python's None for it becomes a _ClosedStream (output and error:
    every write refused and named; nothing reads input)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdout is None:
        sys.stdout = _ClosedStream("standard output")
    if sys.stderr is None:
        sys.stderr = _ClosedStream("standard error")


def _sigterm_as_interrupt() -> None:
    def handler(signum, frame):
        signals.note(signum)
        raise KeyboardInterrupt

    for s in (signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal closed; stop as for SIGTERM
        signal.signal(s, handler)


def _fail(message: str, code: int) -> NoReturn:
    """Exit with `code` after saying why on stderr; a command asked for JSON (`--json`, `--format
    json`) also gets it on stdout as one envelope (common.json_envelope: ok false, exit_code, error,
    result null), so its caller's JSON parse of stdout never meets an empty output."""
    try:
        _err(message)
    except (OSError, ToolkitError):  # stderr refuses writes too (`2>&1 | head`): the exit code still says it
        _takes_writes(sys.stderr)
    _json_error(message, code)
    sys.exit(code)


def _json_error(message: str, code: int) -> None:
    """The error as one JSON envelope on stdout, where JSON was asked for and none printed yet; nothing
    where stdout refuses writes (_takes_writes: the error is then about stdout itself)."""
    command = _argv_command()
    if json_asked() or (not json_printed() and command is not None and _argv_asks_json(command)):
        error = message.removeprefix("error: ").removeprefix("Error: ")
        if _takes_writes(sys.stdout):
            try:
                print_envelope(" ".join(command or []), None, exit_code=code, error=error)
            except (OSError, ToolkitError):  # a full disk, a closed pipe: the error on stderr says it
                _takes_writes(sys.stdout)
    else:
        _takes_writes(sys.stdout)


def _takes_writes(stream) -> bool:
    """Whether `stream` (stdout, stderr) takes writes (what it holds flushed). One that refuses (a full
    disk, a closed pipe) is pointed at /dev/null, so the interpreter's own last flush at exit does not
    fail again (`Exception ignored ... No space left on device`, exit 120 instead of the command's code;
    the fix Python's documentation gives in "Note on SIGPIPE")."""
    with contextlib.suppress(OSError, ValueError):
        stream.flush()
        return True
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no file descriptor (a test's stream)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    return False


def _argv_command() -> list[str] | None:
    """The command named on the command line (["campaign", "status"]), None when none is."""
    args = sys.argv[1:]
    args = args[: args.index("--")] if "--" in args else args
    group: click.Group = cli
    names: list[str] = []
    for a in args:
        command = group.commands.get(a)
        if command is None:
            continue
        names.append(a)
        if not isinstance(command, click.Group):
            return names
        group = command
    return None


def _argv_asks_json(names: list[str]) -> bool:
    """`--json` among the options, for an error Click raised before any option was processed (an
    unknown option): the command `names` has a --json option and it was given."""
    args = sys.argv[1:]
    args = args[: args.index("--")] if "--" in args else args
    command: click.Command = cli
    for n in names:
        command = command.commands[n]  # type: ignore[attr-defined]
    pairs = set(zip(args, args[1:], strict=False))
    return any("--json" in p.opts for p in command.params) and (
        "--json" in args or "--format=json" in args or ("--format", "json") in pairs
    )


def main() -> None:
    """Console entry point: run the CLI and map toolkit errors to their exit codes."""
    _standard_streams_open()
    _sigterm_as_interrupt()
    note_json(None, None, None)  # not asked yet (main may run more than once in one process: tests)
    try:
        code = cli.main(standalone_mode=False)  # a command's ctx.exit(N) comes back here as N
    except (click.exceptions.Abort, KeyboardInterrupt):  # Click turns Ctrl-C (KeyboardInterrupt) into Abort
        _fail(INTERRUPTED, signals.exit_code())
    except click.ClickException as err:
        err = misplaced_option(err, sys.argv[1:])
        try:
            err.show()
        except OSError:  # stderr refuses writes (a full disk, a closed pipe): the exit code still says it
            _takes_writes(sys.stderr)
        code = 4 if isinstance(err, click.UsageError) else err.exit_code
        _json_error(err.format_message(), code)
        sys.exit(code)
    except ToolkitError as err:
        _fail(f"error: {err}", signals.exit_code() if err.exit_code == 130 else err.exit_code)
    except Exception as err:  # an engine error, a path the OS refuses, else a bug (the traceback)
        from toolkit.engine.api import is_connection_error, raised_by_docker

        # before OSError: docker's APIError and requests' errors subclass it, yet no file is at fault
        docker_said = raised_by_docker(err)
        if docker_said and is_connection_error(err):  # gone outside a bench run (bench says what it saved)
            _fail(
                f"error: Docker engine connection lost ({str(err)[:200]}). Restart the engine "
                "(`./scripts/setup-host.sh`) and run the command again.",
                5,
            )
        if docker_said:  # the engine answered and refused the request (a 4xx)
            # the engine's own explanation first (str(err) spends its length on the request URL)
            why = getattr(err, "explanation", None) or str(err)
            code = getattr(err, "status_code", None)
            detail = (f"{code} " if code else "") + ((str(why).splitlines() or [type(err).__name__])[0][:300])
            did = "could not carry out" if isinstance(code, int) and code >= 500 else "refused"
            _fail(
                f"error: the Docker engine {did} a request ({detail}): a value this command passed (an option, "
                "a path, matrix.yaml) is one the engine does not take, or the engine is misconfigured (`docker "
                "info`, its log); fix it and run the command again",
                5,
            )
        # an OSError (or pathlib's RuntimeError for a loop of links) named: a path of the wrong kind is
        # bad input (4), a full or read-only disk 8; anything else is a bug (1: the traceback)
        code, message = outcome_of(err)
        if code != 1:
            _fail(f"error: {message}", code)
        _json_error(f"{message}", 1)
        raise
    sys.exit(code if isinstance(code, int) else 0)


class LazyCommands(MutableMapping[str, click.Command]):
    """The root group's commands by name, each command module imported when its command is first
    looked up (`toolkit bench` imports toolkit.cli.bench only, not the other six command modules and
    what they import at their top). Names and their order are known without importing anything:
    listing them (`sorted(cli.commands)`, `name in cli.commands`) loads nothing; `cli.commands[name]`,
    `.get`, `.items()` load what they return. `entries`: name -> (module, attribute) or a command
    already loaded; a command added later (add_command) is kept as given."""

    def __init__(self, entries: dict[str, tuple[str, str] | click.Command]):
        self._entries = dict(entries)

    def __getitem__(self, name: str) -> click.Command:
        entry = self._entries[name]  # KeyError for a name that is no command
        if isinstance(entry, tuple):
            module, attribute = entry
            entry = self._entries[name] = getattr(importlib.import_module(module), attribute)
        return entry

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._entries[name] = command

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


COMMANDS: dict[str, tuple[str, str]] = {
    "render": ("toolkit.cli.images", "render"),
    "build": ("toolkit.cli.images", "build"),
    "pins": ("toolkit.cli.images", "pins"),
    "bench": ("toolkit.cli.bench", "bench"),
    "measure": ("toolkit.cli.bench", "measure"),
    "fetch-model": ("toolkit.cli.bench", "fetch_model"),
    "report": ("toolkit.cli.results", "report"),
    "compare": ("toolkit.cli.results", "compare"),
    "import": ("toolkit.cli.results", "import_"),
    "doctor": ("toolkit.cli.host", "doctor"),
    "push": ("toolkit.cli.publish", "push"),
    "export-run": ("toolkit.cli.publish", "export_run"),
    "reproduce": ("toolkit.cli.publish", "reproduce"),
    "tune": ("toolkit.cli.tune", "tune"),
    "campaign": ("toolkit.cli.campaign", "campaign"),
}
"""Every command of the root group: its name -> (the module that defines it, the attribute there).
tests/test_startup.py checks that each entry names a command of that name."""

cli.commands = LazyCommands(dict(COMMANDS))  # type: ignore[assignment]
