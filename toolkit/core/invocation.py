"""The toolkit command a message tells the user to run next (`command`), carrying the options of this
invocation that change what that command does: the engine the user chose (the global --engine, else
$TOOLKIT_ENGINE: either form, the same hint), --matrix where it is not the default matrix.yaml,
--results where it is not results/ beside the matrix. A hint without them looped: `bench --matrix
small.yaml` said "stale: run `toolkit build -i cpu`", which built from matrix.yaml, and the bench was
stale again (nc45 stumble 1). The CLI notes the options as it parses them (`start`, `note`); the
layers below only render. Prints nothing.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.core.text import shell_join

_GIVEN: dict[str, str] = {}
_OWN: list[tuple[str, ...]] = []

TAKES = {
    "bench": ("matrix", "results"),
    "build": ("matrix", "results"),
    "tune": ("matrix", "results"),
    "fetch-model": ("matrix",),
    "render": ("matrix",),
    "doctor": ("matrix", "results"),
    "report": ("matrix", "results"),
    "compare": ("matrix", "results"),
    "push": ("matrix", "results"),
    "import": ("matrix", "results"),
    "export-run": ("matrix", "results"),
}
"""Which of --matrix / --results each suggested command takes (tests/test_fix45_newcomer.py checks this
against the commands' own options); a command not listed takes neither."""


def start(engine: str | None) -> None:
    """Forget the last invocation's options (one process may run several: tests, a campaign) and note
    the engine the user chose (docker, podman or auto: the global --engine, else $TOOLKIT_ENGINE, as
    the CLI reads them), None where neither chose one."""
    _GIVEN.clear()
    _OWN.clear()
    if engine:
        _GIVEN["engine"] = engine


def note(option: str, value: str | None) -> None:
    """Note the value given to `option` ("matrix" or "results") on the command line; None: not given."""
    if value is not None:
        _GIVEN[option] = value


def own(options: list[tuple[str, ...]]) -> None:
    """Note this command's own options as the user gave them, an option's words each (`bench -i cpu
    --memory 24g --allow-stale`: [("--image", "cpu"), ("--memory", "24g"), ("--allow-stale",)];
    cli.common.given_options), which `again` repeats."""
    _OWN[:] = options


def again(name: str, *args: str, drop: tuple[str, ...] = (), results: Path | None = None) -> str:
    """`command(name, ...)` with this command's own options (`own`) but those named in `drop` (long
    names: `args` gives them anew) before `args`: the command to run again (an interrupted bench's
    `--resume`; a report's other selection, keeping the user's --min-margin, --run, --format: brk50b
    F5). Without them the hint ran another selection: every image and model of the matrix where the
    user had asked for one (nc46 stumble S3)."""
    return command(name, *(w for o in _OWN if o[0] not in drop for w in o), *args, results=results)


def matrix_file() -> Path:
    """The matrix file this invocation works on: --matrix as given, else matrix.yaml (of the working
    folder), as a suggested command reads it."""
    given = _GIVEN.get("matrix")
    return Path(given) if given else Path("matrix.yaml")


def command(name: str, *args: str, matrix: Path | None = None, results: Path | None = None) -> str:
    """`toolkit [--engine E] NAME [--matrix M] [--results R] ARGS...`: the command line to suggest,
    quoted for a POSIX shell (text.shell_join: a path with spaces or a control character pastes as
    itself), without backticks. `name` is the subcommand ("build", "fetch-model"); `args` its own
    further arguments ("-i", "cpu"), in order. `matrix` and `results`: the matrix file and results
    folder the caller works on (LoadedMatrix.path, ResultStore.root), else those given on the command
    line; each is left out where it is the default (matrix.yaml of the working folder; results/
    beside the matrix); one `args` names itself is said there alone."""
    words = ["toolkit"]
    if "engine" in _GIVEN:
        words += ["--engine", _GIVEN["engine"]]
    words.append(name)
    takes = TAKES.get(name, ())
    matrix = matrix or matrix_file()
    results = results or Path(_GIVEN.get("results") or matrix.resolve().parent / "results")
    if matrix.resolve() == Path("matrix.yaml").resolve():
        matrix = None
    if results.resolve() == (matrix or Path("matrix.yaml")).resolve().parent / "results":
        results = None
    if matrix is not None and "matrix" in takes and "--matrix" not in args:  # args' own wins: said once
        words += ["--matrix", str(matrix)]
    if results is not None and "results" in takes and "--results" not in args:
        words += ["--results", str(results)]
    return shell_join([*words, *args])
