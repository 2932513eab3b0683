"""What every CLI module shares: the exit-code epilog, the common options, matrix/results loading,
stderr output (the progress printer is toolkit.cli.progress). toolkit.cli.main and the
command modules import it; it imports
neither (one-way flow)."""

from __future__ import annotations

import errno
import functools
import json
import math
import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from toolkit import __version__
from toolkit.core import invocation, signals
from toolkit.core.errors import BadInput, FileSystemError, RunInterrupted, ToolkitError, symlink_loop
from toolkit.core.text import NOT_ONE_LINE, path_text, shell_word, strip_controls


def terminal_safe(text: str) -> str:
    """`text` without terminal control sequences (a model name, a file's line, a log line from an
    image: anything from outside can carry OSC 0 (sets the window title) or OSC 52 (writes the
    clipboard)), tab and newline kept. Every string the CLI prints goes through it (click.echo is
    routed here, and the rich printers call it)."""
    return strip_controls(text) if isinstance(text, str) else text


def terminal_width(stream: Any = None) -> int | None:
    """The columns of the terminal `stream` (stdout by default) writes to; None when it is no terminal
    (a pipe, a file, CI's log): there a line is kept whole, for grep."""
    stream = stream or sys.stdout
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return max(40, shutil.get_terminal_size().columns)


_echo = click.echo


def _safe_echo(
    message: Any = None, file: Any = None, nl: bool = True, err: bool = False, color: Any = None
) -> None:
    """click.echo: _core_echo of the message without terminal control sequences (terminal_safe)."""
    _core_echo(terminal_safe(message), file=file, nl=nl, err=err, color=color)


def _named_stream_error(exc: OSError, err: bool | None) -> Exception:
    """`exc` raised writing standard output (`err` False) or error (True; None: another file), named so;
    a closed pipe (EPIPE) as the FileSystemError it is (exit 8, one line), where Click's handler exits 1
    silently (a bug's code); a stream gone at a stop (_gone_at_stop) is RunInterrupted."""
    if exc.filename is None and err is not None:
        exc.filename = "standard error" if err else "standard output"
    if err is not None and (gone := _gone_at_stop(exc)):
        return RunInterrupted(gone)
    return FileSystemError.from_oserror(exc) if exc.errno == errno.EPIPE else exc


def _gone_at_stop(exc: OSError) -> str | None:
    """What a standard stream gone at a stop says (signals.stopping; EIO: its terminal closed, EPIPE: its
    reader gone; unnamed: a bare print()), None where it is not one: 129 or 130 stays, not 8 (nc47 S7)."""
    streams = (None, "standard output", "standard error")
    if exc.errno not in (errno.EIO, errno.EPIPE) or exc.filename not in streams or not signals.stopping():
        return None
    return f"{INTERRUPTED}; {exc.filename or 'a standard stream'}: {exc.strerror}: its terminal or reader is gone"


def _core_echo(
    message: Any = None, file: Any = None, nl: bool = True, err: bool = False, color: Any = None
) -> None:
    """Click's own printing (`--help`, a usage error's text), and click.echo's through _safe_echo: an
    OSError writing it is named by its stream (_named_stream_error)."""
    try:
        _echo(message, file=file, nl=nl, err=err, color=color)
    except OSError as exc:  # stdout on a full disk or a closed pipe: name it, never "(unknown path)"
        raise _named_stream_error(exc, err if file is None else None) from None


class _NamedStream:
    """Standard output or error (`err`) as a rich Console writes to it: an OSError writing or flushing
    raised named (_named_stream_error: a closed pipe is exit 8 in one line), where rich's Console
    would end the command with a silent SystemExit(1) on a closed pipe (its on_broken_pipe) and name
    a full disk `(unknown path)`. The stream is the one of the moment it is made (rich.live's proxy of
    stdout, set later, would print back into the console)."""

    def __init__(self, err: bool) -> None:
        self._err = err
        stream = sys.stderr if err else sys.stdout
        self._stream = getattr(stream, "rich_proxied_file", stream)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise _named_stream_error(exc, self._err) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _named_stream_error(exc, self._err) from None

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding: the stream's own
        return getattr(self._stream, name)


def rich_console(*, stderr: bool = False, **kwargs: Any) -> Any:
    """A rich Console on standard output (or error, `stderr`) whose failed writes are named like
    click.echo's (_NamedStream): every rich printer of the CLI is made here. `kwargs`: Console's."""
    from rich.console import Console

    stream: Any = _NamedStream(stderr)  # a file to rich: write, flush and the stream's own attributes
    return Console(file=stream, stderr=stderr, **kwargs)


click.echo = _safe_echo  # one choke point: every command prints through click.echo
click.core.echo = click.decorators.echo = _core_echo  # --help, usage errors: Click's own names for echo

HELP_OPTIONS = ["-h", "--help"]
"""The spellings of every command's help option (many command lines take -h)."""

EPILOG = (
    "Exit codes: 0 ok, 1 unexpected error (a bug), 2 build failed or nothing done (push, bench), 3 bench failed, 4 bad input, "
    "5 container engine (Docker or Podman) unavailable, lost or refusing a request, 6 regression (compare), 7 not reproduced (reproduce), "
    "8 file system error (disk full, read-only), 9 another benchmark running, 10 a pin moved or is missing "
    "(pins), 11 a remote (the Hub) did not answer, 12 a doctor check failed, 129 stopped by SIGHUP, 130 interrupted."
)


INTERRUPTED = "interrupted: stopped at the signal; nothing was started after it"


def matrix_option(f):
    return click.option(
        "--matrix",
        "matrix_path",
        default="matrix.yaml",
        show_default=True,
        type=click.Path(dir_okay=False),
        callback=_noted,
        help="The benchmark matrix (images, models, llama-bench axes); the Dockerfile.templates/, images/ "
        "and results/ used are those beside it: keep a copy in the project folder.",
    )(f)


def _noted(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback of --matrix: note the value given on the command line (not the default) for the
    commands messages suggest (toolkit.core.invocation.command)."""
    if ctx.get_parameter_source(param.name or "") == click.core.ParameterSource.COMMANDLINE:
        invocation.note("matrix", value)
    return value


_JSON_ASKED: dict[str, Any] = {"on": False, "printed": False, "pending": None}

JSON_SCHEMA_VERSION = 1
"""The version of the `--json` envelope (`json_envelope`): raised when a key of the envelope changes
meaning or goes away (a command's `result` shape is the command's own, listed in docs/commands.md)."""


def note_json(ctx: click.Context | None, param: click.Parameter | None, value: Any) -> Any:
    """An eager option callback: remember that this command prints JSON (`--json`, `--format json`),
    so `toolkit.cli.main.main` also writes an error as one JSON envelope on stdout; None forgets it."""
    _JSON_ASKED["on"] = value is not None and (_JSON_ASKED["on"] or value is True or value == "json")
    _JSON_ASKED["printed"] = _JSON_ASKED["printed"] and value is not None
    return value


def human_format(output: str | None = None) -> str:
    """The form of a command's human output when none is asked (report, compare): `text`, sized to
    the terminal, when stdout is a terminal and nothing is written to a file (`output`), else `github`
    (markdown: what a pipe, a file or a ticket gets)."""
    return "text" if sys.stdout.isatty() and not output else "github"


def json_asked() -> bool:
    """Whether the running command was asked for JSON output (see `note_json`) and has not printed
    it yet (a command that printed its JSON and then fails, e.g. compare's regression, exit 6, has
    said everything in it: stdout stays one JSON document)."""
    return _JSON_ASKED["on"] and not _JSON_ASKED["printed"]


def json_printed() -> bool:
    """Whether the running command has given its JSON output (echo_json)."""
    return _JSON_ASKED["printed"]


def json_option(f):
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        is_eager=True,
        callback=note_json,
        help="Print one JSON envelope on stdout instead of text: {schema_version, command, "
        "toolkit_version, ok, exit_code, error, result} (an error too, with ok false).",
    )(f)


def to_jsonable(obj: Any) -> Any:
    """One conversion for every `--json` output: pydantic models as `model_dump(mode="json")`,
    dataclasses field by field, paths and datetimes as strings, sets and tuples as lists, and a float
    NaN or infinity as null (strict JSON has no NaN; a consumer's `json.loads` in another language
    would reject it). Anything else is kept if JSON has a type for it, else its str()."""
    import dataclasses
    import datetime as _dt

    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "model_dump"):
        return to_jsonable(obj.model_dump(mode="json"))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((to_jsonable(v) for v in obj), key=str)
    if isinstance(obj, (Path, _dt.datetime, _dt.date)):
        return obj.isoformat() if isinstance(obj, (_dt.datetime, _dt.date)) else str(obj)
    return str(obj)


def json_envelope(
    command: str, result: Any, *, exit_code: int = 0, error: str | None = None
) -> dict[str, Any]:
    """The one shape of every command's `--json` output: {"schema_version": JSON_SCHEMA_VERSION,
    "command": "campaign status", "toolkit_version": "0.x", "ok": exit_code == 0, "exit_code": the
    process's exit status, "error": the message (null when ok), "result": the command's data (null
    when it failed before having any)}, `result` converted by `to_jsonable`."""
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": command,
        "toolkit_version": __version__,
        "ok": exit_code == 0,
        "exit_code": exit_code,
        "error": error,
        "result": to_jsonable(result),
    }


def print_envelope(command: str, result: Any, *, exit_code: int = 0, error: str | None = None) -> None:
    """Print `json_envelope(...)` on stdout: indented, strict JSON (no NaN)."""
    env = json_envelope(command, result, exit_code=exit_code, error=error)
    click.echo(json.dumps(env, indent=2, allow_nan=False))
    _JSON_ASKED["printed"] = True


def _command_name(ctx: click.Context | None) -> str:
    """ "campaign status": the names of the running command below the root group."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(names) or (ctx.info_name or "" if ctx else "")


def echo_json(obj: Any) -> None:
    """Give `obj` as the `--json` result of the running command. Under the toolkit group
    (`EnvelopeGroup`) it is printed once the command ends, in the envelope with the command's exit
    code and error (a compare that finds a regression says ok false, exit_code 6, with its rows);
    a command run on its own prints it at once (exit_code 0)."""
    ctx = click.get_current_context(silent=True)
    name = _command_name(ctx)
    _JSON_ASKED["printed"] = True
    if ctx is not None and isinstance(ctx.find_root().command, EnvelopeGroup):
        _JSON_ASKED["pending"] = (name, obj)
    else:
        print_envelope(name, obj)


def outcome_of(exc: BaseException | None) -> tuple[int, str | None]:
    """(exit code, error message or None) that `exc` ends the process with, as toolkit.cli.main
    maps it: a ToolkitError its exit_code, an OSError 8 or 4 (FileSystemError.from_oserror; a stream
    gone at a stop, _gone_at_stop: 129, 130), Ctrl-C 130, a usage error 4, sys.exit(N) N, else 1 (a bug)."""
    if exc is None:
        return 0, None
    if isinstance(exc, (click.exceptions.Exit, SystemExit)):
        code = exc.exit_code if isinstance(exc, click.exceptions.Exit) else exc.code
        code = code if isinstance(code, int) else (0 if code is None else 1)
        return code, (f"exited {code}" if code else None)
    if isinstance(exc, ToolkitError):
        return (signals.exit_code() if exc.exit_code == 130 else exc.exit_code), str(exc)
    gone = _gone_at_stop(exc) if isinstance(exc, OSError) else None  # a bare print() at a stop, too
    if gone or isinstance(exc, (KeyboardInterrupt, click.exceptions.Abort)):
        return signals.exit_code(), gone or INTERRUPTED
    if isinstance(exc, click.ClickException):
        return (4 if isinstance(exc, click.UsageError) else exc.exit_code), exc.format_message()
    looped = symlink_loop(exc)  # pathlib's RuntimeError for a loop of links, as main maps it
    if isinstance(looped or exc, OSError):
        mapped = FileSystemError.from_oserror(looped or exc)  # type: ignore[arg-type]
        return mapped.exit_code, str(mapped)
    return 1, f"unexpected error (a bug in the toolkit): {type(exc).__name__}: {exc}"


class EnvelopeGroup(click.Group):
    """The toolkit's root group: a command's `--json` result (echo_json) is printed when the command
    ends, in one envelope carrying the exit code and error the command ended with. `environment`:
    (variable, what it does) pairs, shown in --help as an Environment section after the description,
    a definition list that Click wraps to the terminal's width as it wraps Options."""

    def __init__(self, *args: Any, environment: tuple[tuple[str, str], ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.environment = environment

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        if self.environment:
            with formatter.section("Environment"):
                formatter.write_dl(list(self.environment))

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[Any, Any, list[str]]:
        """Click's (name, command, its arguments) of `args`; BadInput (exit 4) where a TOOLKIT_* variable of
        `environment` holds what is not one line of text (core.text.NOT_ONE_LINE: a line break, an escape),
        unless the arguments ask for the command's help (HELP_OPTIONS before a `--`), which reads none."""
        name, cmd, rest = super().resolve_command(ctx, args)
        if ctx.resilient_parsing or set(HELP_OPTIONS) & set(
            rest[: rest.index("--")] if "--" in rest else rest
        ):
            return name, cmd, rest
        for var in (n for n, _ in self.environment if n.startswith("TOOLKIT_")):  # DOCKER_HOST: engine.choice
            if NOT_ONE_LINE.search(value := os.environ.get(var, "")):
                raise BadInput(
                    f"{var}={value[:80]!r} holds a control character (a line break, an escape): set it to "
                    f"one line of text, or unset it (`unset {var}`)"
                )
        return name, cmd, rest

    def invoke(self, ctx: click.Context) -> Any:
        _JSON_ASKED.update(on=False, printed=False, pending=None)
        try:
            rv = super().invoke(ctx)
        except BaseException as exc:
            _flush_json(exc)
            raise
        _flush_json(None)
        return rv


def _flush_json(exc: BaseException | None) -> None:
    pending, _JSON_ASKED["pending"] = _JSON_ASKED["pending"], None
    if pending is not None:
        code, error = outcome_of(exc)
        print_envelope(pending[0], pending[1], exit_code=code, error=error)


def misplaced_option(err: click.ClickException, args: list[str]) -> click.ClickException:
    """`err`, or where it is a NoSuchOption for an option that exists one place over, a UsageError
    saying where it goes (Click's guess, `Did you mean '--version'?` for `--json`, dropped): the root
    group's own after the command (`toolkit build --engine podman`: put it before the command's name,
    as `toolkit --engine VALUE build ...`), or a command's before it (`toolkit -i cpu bench`: an
    option of bench, put after the command's name). `args`: the command line's arguments
    (sys.argv[1:]), to name the command typed."""
    if not isinstance(err, click.NoSuchOption) or err.ctx is None:
        return err
    ctx, name = err.ctx, err.option_name
    root = ctx.find_root()
    said = f"No such option {name!r}. {name} is an option of"
    if ctx is not root:
        own = next((p for p in root.command.params if name in p.opts), None)
        if own is None:
            return err
        typed = (
            "" if getattr(own, "is_flag", False) else f" VALUE {ctx.info_name} ..."
        )  # --version stops there
        return click.UsageError(
            f"{said} toolkit itself, not of {ctx.info_name}: put it before the command's name, as "
            f"`toolkit {name}{typed}`.",
            ctx,
        )
    group = root.command
    owners = (
        [n for n in group.list_commands(ctx) if any(name in p.opts for p in group.commands[n].params)]
        if isinstance(group, click.Group)
        else []
    )
    if not owners:
        return err
    command = next((a for a in args if a in owners), None)  # the command typed after the option
    whose = command or (owners[0] if len(owners) == 1 else f"a command ({', '.join(owners)})")
    return click.UsageError(
        f"{said} {whose}: put it after the command's name, as `toolkit {command or owners[0]} {name} ...`.",
        ctx,
    )


def given_options(ctx: click.Context, leave_out: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The options of `ctx`'s command given on its command line, as words to type again, an option's
    each (`[("--image", "cpu"), ("--allow-stale",)]`): each by its long name, a repeatable one once per
    value, a flag where set; those named in `leave_out` (parameter names) and every one left to its
    default or taken from the environment are not in it. Values as click parsed them (the text given,
    or its number)."""
    words: list[tuple[str, ...]] = []
    for p in ctx.command.params:
        if p.name is None or p.name in leave_out or not isinstance(p, click.Option):
            continue
        if ctx.get_parameter_source(p.name) is not click.core.ParameterSource.COMMANDLINE:
            continue
        opt = max(p.opts, key=len)
        value = ctx.params.get(p.name)
        if p.is_flag:
            words += [(opt,)] if value else []
        else:
            words += [(opt, str(v)) for v in ((value or ()) if p.multiple else [value])]
    return words


def output_option(*, required: bool = False, dir_okay: bool = False, stdout: bool = False, help: str):
    """The one name of an option saying where a command writes: `-o/--output` (`--out` is kept as a
    second spelling of it, for scripts written before the names were made one), value `output`.
    No explicit `default=None`: since Click 8.3 a default given, None included, counts as a value, so a
    required option left out reached the command as None (export-run: a TypeError traceback, exit 1)
    instead of Click's "Missing option" (exit 4). Left out, an optional one is None all the same.
    Its folder must exist, and a FILE is no folder (output_parent: the type lets a folder through to it,
    for one message saying what the option expects). `stdout`: the command prints to standard output
    where the option is left out (`-o -` is refused saying so)."""
    return click.option(
        "-o",
        "--output",
        "--out",
        "output",
        required=required,
        callback=functools.partial(output_parent, stdout=stdout),
        type=click.Path(file_okay=not dir_okay),
        metavar="DIR" if dir_okay else "FILE",
        help=help,
    )


def _refuse_empty(value: str | None, stdout: bool = False) -> None:
    """BadParameter (exit 4) for an empty path (`-o ''`, `--results ''`: a script's unset variable),
    which would otherwise read as the option left out, and for `-` (Unix's standard output: it made a
    file or folder named `-` in the current folder); `stdout`: the command prints to standard output
    without the option (report; an html report goes to a file all the same), which the refusal of `-` says
    first."""
    if value == "-" and stdout:
        raise click.BadParameter(
            "'-': leave -o out to print to standard output (--format html: to report.html in the results "
            "folder; `./-` writes a file named -); nothing was written"
        )
    if value in ("", "-"):
        raise click.BadParameter(
            f"{value!r}: {'empty path' if value == '' else 'not standard output here'}; give a path "
            f"({'or leave the option out' if value == '' else '`./-` for one named -'}); nothing was written"
        )


def output_parent(
    ctx: click.Context, param: click.Parameter, value: str | None, stdout: bool = False
) -> str | None:
    """Click callback of every option naming a file or folder the command writes (-o, report --plots):
    the folder it goes into must exist (a named folder itself may be new). A missing one, or a file
    there, is bad input (exit 4) naming it: a typo'd path never silently becomes a tree of folders.
    An option of metavar FILE given a folder (one that exists, or any path ending in `/`) is bad input
    too: never a file named like the folder; so is an empty path (`-o ''`: a script's unset variable,
    which would read as the option left out). A `..` is read as the OS reads it, never by the path's
    text (`sub/../x.md` with no folder `sub` is refused as the shell's `>` refuses it; it wrote ./x.md),
    and a path whose `..` follows a link is returned with its folder resolved (where the OS puts it).
    `stdout`: the command prints to standard output without the option (_refuse_empty)."""
    _refuse_empty(value, stdout)
    named_folder = value and (value.endswith(("/", os.sep)) or os.path.basename(value) in (".", ".."))
    if param.metavar == "FILE" and value and (named_folder or os.path.isdir(value)):
        what = "is a folder" if os.path.isdir(value) else "names a folder (it ends in /, . or ..)"
        raise click.BadParameter(
            f"{path_text(value)} {what}; {param.opts[0]} names the FILE to write: give a file's path "
            f"(e.g. {path_text(os.path.join(value, 'NAME'))}); nothing was written"
        )
    trimmed = (value.rstrip("/" + os.sep) or os.sep) if value else ""  # a DIR's `out/` is `out`
    parent = os.path.dirname(trimmed) or "."  # as the OS reads it: `sub/..` needs `sub`, a folder
    try:
        what = "" if stat.S_ISDIR(os.stat(parent).st_mode) else "is a file, not a folder; check the path"
    except FileNotFoundError:  # a dangling link before a `..`: the OS has no folder to go up from
        dangling_up = ".." in Path(parent).parts
        what = _missing_folder(parent) or (
            "does not exist: a link on the way leads nowhere" if dangling_up else ""
        )
    except NotADirectoryError:
        what = "lies under a file, not a folder; check the path"
    except OSError:  # no permission, a loop of links: the write itself says so, naming the path
        what = ""
    if what:
        raise click.BadParameter(
            f"{path_text(value)}: the folder {path_text(parent)} {what}; nothing was written"
        )
    real = os.path.realpath(parent)  # what is written resolves `..` by text: after a link, not the OS's
    if value and ".." in Path(value).parts and real != os.path.realpath(os.path.normpath(parent)):
        return os.path.join(real, os.path.basename(trimmed))
    return value


def _missing_folder(parent: str) -> str:
    """output_parent's words for a folder `parent` that does not exist: the fix, as a command to paste
    (quoted: `mkdir -p 'a b'`, not two folders); a `~` that reached the toolkit unexpanded (quoted in
    the shell) named as such; "" where a link on the way leads nowhere (the write names the link and
    its fix: `mkdir -p` through it cannot help)."""
    up = parent
    while up not in ("", ".", "/") and not os.path.lexists(up):
        up = os.path.dirname(up)
    if os.path.islink(up):  # a dangling link: not a folder to make
        return ""
    if parent == "~" or parent.startswith("~/"):
        return "does not exist: a quoted `~` is not your home folder; write the path without quotes, or with $HOME"
    return f"does not exist; check the path, or create the folder first (mkdir -p {shell_word(parent)})"


def percent_option(name: str, default: float, help: str):
    """A `name PERCENT` option: a finite number from 0 to 1000 (FiniteRange), its default shown; a
    trailing `%` read past (`--threshold 50%` is 50, as PERCENT invites), `-0` read as 0."""
    rng = _Percent(min=0, max=1000)
    return click.option(name, type=rng, default=default, show_default=True, metavar="PERCENT", help=help)


def image_option(f):
    return click.option(
        "--image",
        "-i",
        "images",
        multiple=True,
        metavar="NAME",
        help="Only this image (repeatable). Default: every image in the matrix.",
    )(f)


def results_folder(
    ctx: click.Context, param: click.Parameter, value: str | None, *, writes: bool = False
) -> str | None:
    """Click callback of --results and --against: a folder that is recognisably not a results folder but
    beside one (toolkit.results.results_near: one image's folder inside it, a project holding it) is
    bad input (exit 4) naming the folder to pass, never "no results yet" read, or results written,
    in the wrong one; so is a folder of other files (toolkit.results.foreign_file: the project's docs/
    was filled with .index.sqlite, .lock and digest folders), refused here before any command makes
    its lock or index. A folder that does not exist yet, or holds no records and is neither, passes.
    `writes`: the command may start a results folder there (written_results_folder), as its refusal says."""
    if value is None or not os.path.isdir(value):
        return value
    from toolkit.results import foreign_file, results_near

    try:
        near = results_near(Path(value))
        other = None if near else foreign_file(Path(value))
    except BadInput as err:  # Click prints its own errors, not through terminal_safe: no escapes
        raise click.BadParameter(strip_controls(str(err))) from None
    except OSError as err:  # a folder that cannot be listed: named as main names a path the OS refuses
        raise click.BadParameter(strip_controls(str(FileSystemError.from_oserror(err)))) from None
    if near:
        what, there = near
        raise click.BadParameter(f"{path_text(value)} is {what}: pass {param.opts[0]} {path_text(there)}")
    if other:
        raise click.BadParameter(
            f"{path_text(value)} is not a results folder: it holds {path_text(other)}, which no results folder "
            f"holds (builds.jsonl, <digest12>/ image folders); pass {param.opts[0]} of a results folder"
            + (", or of a new or empty folder to start one" if writes else "")
        )
    return value


def written_results_folder(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback of the --results of a command that writes records or builds there (bench, import,
    build, tune, ...): results_folder's refusals, and a folder `toolkit export-run` wrote or one inside it
    (a published run, read as results by report and compare --against: toolkit.results.export_holding) is
    bad input (exit 4): a bench or an import into it mixed this host's records into the run a customer was sent,
    and a re-export shipped them. An empty path (`--results ''`: a script's unset variable) is bad input
    too: it imported into the default results/, as output_parent refuses `-o ''`."""
    _refuse_empty(value)
    value = results_folder(ctx, param, value, writes=True)
    from toolkit.core.paths import typed
    from toolkit.results import export_holding

    if value is not None and (export := export_holding(Path(value))):
        raise click.BadParameter(
            f"{path_text(typed(export))} is a run folder `toolkit export-run` wrote (run.json, results.jsonl): report "
            "and compare --against read it, nothing writes records into it or a folder inside it; pass "
            "--results of a results folder of your own (default: results/ beside the matrix)"
        )
    return value


def results_option(f, *, reading: bool = False, builds: bool = False):
    return click.option(
        "--results",
        "results_dir",
        default=None,
        callback=_noting(results_folder if reading else written_results_folder),
        type=click.Path(file_okay=False, exists=reading),
        help="Results folder"
        + (" (must exist: this command reads it)" if reading else "")
        + ". Default: results/ beside the matrix."
        + (
            " Builds are recorded there, and a bench measures only the builds recorded in its own --results "
            "folder: a new folder needs `toolkit build --results DIR` first."
            if builds
            else ""
        ),
    )(f)


def builds_results_option(f):
    """--results of build, bench and tune: the folder whose builds.jsonl a bench measures from."""
    return results_option(f, builds=True)


def _noting(
    check: Callable[[click.Context, click.Parameter, str | None], str | None],
) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """The --results callback `check` (results_folder, written_results_folder), noting the folder it
    passes for the commands messages suggest (invocation.command)."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        invocation.note("results", check(ctx, param, value))
        return value

    return callback


def read_results_option(f):
    """--results of a command that only reads the folder: one that does not exist is bad input (exit
    4), not an empty folder ("no results yet"); the default results/ may be absent (a fresh project)."""
    return results_option(f, reading=True)


def _load(matrix_path: str):
    from toolkit.matrix.api import load_matrix

    return load_matrix(matrix_path)


def _store(lm, results_dir: str | None, command: str | None = None):
    """The results store of matrix `lm`: --results, else results/ beside the matrix. `command`: the
    command that builds or measures from the matrix (toolkit.results.refuse_export: never from a run
    `toolkit export-run` wrote); None for one that only reads (doctor, export-run, reproduce, campaign status)."""
    from toolkit.results import refuse_export
    from toolkit.results.records import ResultStore

    if command:
        refuse_export(lm.root, command)
    return ResultStore(Path(results_dir) if results_dir else lm.root / "results")


def _err(msg: str) -> None:
    click.echo(msg, err=True)


class FiniteRange(click.FloatRange):
    """A float option in a range that also refuses nan and inf (click.FloatRange lets NaN through:
    every comparison with NaN is false), so `--threshold nan` is bad input (exit 4), not a gate that
    never fails. A value out of the range is named as typed (`0 is not in the range`, not `0.0`)."""

    name = "float"  # the metavar --help shows (FLOAT; the range follows it)

    def convert(self, value, param, ctx):
        rv = click.FLOAT.convert(value, param, ctx)  # not a number: click's own message
        try:
            rv = super().convert(value, param, ctx)
        except click.BadParameter:  # out of the range
            shown = value.strip() if isinstance(value, str) else f"{rv:g}"
            self.fail(f"{shown} is not in the range {self._describe_range()}.", param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


class _Percent(FiniteRange):
    """FiniteRange of a PERCENT option (percent_option): `50%` is 50, `-0` is 0 (not `-0%` in messages)."""

    def convert(self, value, param, ctx):
        text = value.strip().removesuffix("%") if isinstance(value, str) else value
        if text == "":  # `%` alone: named as typed, not as the '' left once the `%` is read past
            self.fail(f"{value!r} is not a number of percent (e.g. 5 or 5%)", param, ctx)
        return super().convert(text, param, ctx) + 0.0  # -0.0 + 0.0 is 0.0


class FormatChoice(click.Choice):
    """The --format of report and compare: its choices, and `md` / `markdown` read as `github` (the
    markdown form, as an --output name ending in .md picks it): `--format md` was refused with a list
    in which nothing said markdown."""

    ALIASES = {"md": "github", "markdown": "github"}

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.lower() in self.ALIASES:
            value = self.ALIASES[value.lower()]
        return super().convert(value, param, ctx)


class BuildStatus:
    """A rich status line on stderr for the running build step, with a spinner and the elapsed time;
    update(text) starts or refreshes it, stop() removes it (transient: the log lines stay), echo(line)
    prints a log line above it (a line written past it to stderr would leave the spinner's frame in
    the scrollback). Use only when stderr is a terminal (`BuildStatus.for_stderr()` returns None
    otherwise)."""

    def __init__(self) -> None:
        self.console = rich_console(stderr=True)
        self.progress: Any = None
        self.task: Any = None

    @classmethod
    def for_stderr(cls) -> BuildStatus | None:
        return cls() if os.isatty(2) else None

    def update(self, text: str) -> None:
        if self.progress is None:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task("", total=None)
        from rich.markup import escape

        self.progress.update(self.task, description=escape(terminal_safe(text)))  # `[build 2/5]` is text

    def echo(self, line: str) -> None:
        if self.progress is None:
            _err(line)
        else:
            self.progress.console.print(terminal_safe(line), markup=False, highlight=False, soft_wrap=True)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = self.task = None
