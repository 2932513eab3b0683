"""What was measured: record schema and store (results/<digest12>/bench.jsonl), the SQLite query index,
the one test identity, `toolkit import` (each runtime's output parsers: toolkit.runtimes).
May use: toolkit.core, toolkit.matrix, toolkit.engine (facts only), toolkit.runtimes; reads and writes
results/; never prints.
"""

import contextlib
import errno
import fcntl
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from toolkit.core import invocation, jsonsafe
from toolkit.core.errors import BadInput, refused_link
from toolkit.core.paths import typed
from toolkit.core.text import Prose, one_line, path_text, shell_join


def bench_files(root: Path) -> list[Path]:
    """results/*/bench.jsonl and the per-host folders of campaigns, results/hosts/<host>/*/bench.jsonl
    (toolkit.campaign.slurm), sorted, then an export-run folder's results.jsonl (exported_run): the order
    every reader reads records in. Light to import: an empty `toolkit report` asks it without loading the
    store. BadInput (exit 4) when one is not a regular file (a FIFO would hang every reader: need_regular)."""
    files = sorted([*root.glob("*/bench.jsonl"), *root.glob("hosts/*/*/bench.jsonl")])
    if exported_run(root):
        files.append(root / "results.jsonl")
    for f in files:
        try:
            need_regular(f, os.stat(f))
        except FileNotFoundError:  # a dangling link or a file removed meanwhile: read as gone
            continue
    return files


def exported_run(root: Path) -> bool:
    """Whether `root` is a folder `toolkit export-run` wrote (run.json and results.jsonl in it:
    toolkit.publish.run_folder): read as a results folder, never written as one. A run.json that is JSON
    without a published run's `run_id` and `exported` is another tool's (a project's own run.json and
    results.jsonl: no export); one that is not JSON is still the export's (its readers say what is wrong)."""
    run = root / "run.json"
    if not (run.is_file() and (root / "results.jsonl").exists()):
        return False
    try:
        with open(run, "rb") as fh:
            data = jsonsafe.load(fh)
    except (OSError, jsonsafe.JsonProblem):
        return True
    return isinstance(data, dict) and {"run_id", "exported"} <= data.keys()


def results_near(root: Path) -> tuple[str, Path] | None:
    """(what folder `root` is, the results folder to name instead) where `root`, named as a results
    folder, holds no record of its own (bench_files) but is one image's folder inside a results folder
    (it holds bench.jsonl: its parent is the results folder) or a folder holding one (a project: its
    results/ holds records); None otherwise (records there, or a fresh or empty folder). BadInput as
    bench_files."""
    if bench_files(root):
        return None
    if (root / "bench.jsonl").is_file():
        return "one image's folder inside a results folder (it holds bench.jsonl)", root.parent
    if (root / "results").is_dir() and bench_files(root / "results"):
        return "not a results folder: the one it holds is results/", root / "results"
    return None


_NOTES = frozenset({"", ".md", ".txt", ".rst"})
"""The suffixes of a user's notes a new results folder may hold beside its records (README, notes.txt)."""

_LAYOUT = frozenset({"builds.jsonl", "hosts", "campaigns", "measure"})
"""What a results folder holds at its top besides the image folders (<digest12>/: records.ResultStore,
_DIGEST_DIR): builds, campaigns' per-host folders and specs (toolkit.campaign.slurm), measure's rows."""


def foreign_file(root: Path) -> str | None:
    """The name of one entry of folder `root` that no results layout holds, where `root` holds none that one
    does (_LAYOUT, a <digest12>/ folder, any folder of records: bench_files) and holds a folder or 3 or more
    other entries: a folder of other files (docs/, models/ holding a .gguf) named as --results, which a bench
    or a report would fill with .index.sqlite, .lock and digest folders. None where it holds a results layout,
    is an export-run folder (exported_run), or holds only hidden entries (.seq, .lock, .index.sqlite), report
    files (report.html, report.md) and up to 2 notes of the user's (_NOTES: a README, notes.txt). Names
    sorted: the same one named each time. OSError of the listing as os.scandir's."""
    with os.scandir(root) as entries:
        listed = sorted((e.name, e.is_dir()) for e in entries)
    if any(n in _LAYOUT or (d and _DIGEST_DIR.fullmatch(n)) for n, d in listed):  # the usual case: no glob
        return None
    others = [(n, d) for n, d in listed if not n.startswith((".", "report"))]
    if len(others) < 3 and not any(d or Path(n).suffix.lower() not in _NOTES for n, d in others):
        return None
    return None if exported_run(root) or bench_files(root) else others[0][0]


def export_beside(root: Path) -> Path | None:
    """The folder `toolkit export-run` wrote (run.json, results.jsonl) that holds `root`, the default
    results folder (results/ beside the matrix), where `root` holds no record (absent or empty): a
    customer in that folder ran `toolkit report` and was told "no results yet: run `toolkit bench`".
    None otherwise. BadInput as bench_files."""
    folder = root.parent
    if root.is_dir() and bench_files(root):
        return None
    return folder if exported_run(folder) and bench_files(folder) else None


def export_holding(path: Path) -> Path | None:
    """The folder `toolkit export-run` wrote (exported_run) that `path` is or lies inside (through links:
    `path` resolved, whether or not it exists yet), None where there is none or `path` lies in its reproduce/
    (publish.REPRODUCED's folder: `toolkit reproduce` measures this host's runs of it there)."""
    path = path.resolve()
    for folder in (path, *path.parents):
        if exported_run(folder):
            return None if folder / "reproduce" in (path, *path.parents) else folder
    return None


def refuse_export(folder: Path, command: str) -> None:
    """BadInput (exit 4) where `folder` is a run `toolkit export-run` wrote (exported_run): the folder of the
    matrix that `toolkit COMMAND` (build, bench, tune, render, push, campaign) builds or measures from, or
    that holds the results/ an import or a measure writes by default. Such a folder is someone's published
    run, read and never written into: its templates are built only by `toolkit reproduce --rebuild` (its
    own network and cache namespace), its results only beside it (reproduce/results); `toolkit bench`
    there said `run toolkit build -i cpu`, which built them with the host's network under this host's
    toolkit/<name>:latest tags, and wrote images/ and results/ into the folder. A folder inside one is
    refused alike (export_holding)."""
    if export := export_holding(folder):
        here = typed(export)
        raise BadInput(
            f"{path_text(export)} is a run `toolkit export-run` wrote: read here, never built, measured or written "
            f"into by `toolkit {command}`; `{invocation.command('reproduce', here)}` re-runs it (its README's "
            f"Reproduce block says how), `{invocation.command('report', '--results', here)}` prints its tables; "
            "build, bench and import in a project of your own"
        )


def need_records_beside(
    root: Path, words: tuple[str, ...] = ("report",), reproduced: Path | None = None
) -> None:
    """BadInput (exit 4) when `root`, a command's default results folder, holds no record but the
    folder holding it is an exported run (export_beside): its records are read with `--results`, said
    as the command to paste where the user stands, `toolkit WORDS --results FOLDER` (`words`: the
    command and the arguments given, `("compare", A, B)`, with the --matrix and --engine given:
    invocation.command; paths as core.paths.typed, quoted).
    `reproduced`: where `toolkit reproduce` keeps its runs in such a folder (relative to it: the CLI
    passes publish's); where it holds records, compare reads A there and B from the folder (`--results
    REPRODUCED --against FOLDER`), or A from the folder where A names its run (`--results FOLDER
    --against REPRODUCED`: the order typed is kept), and the report's hint names it too."""
    export = export_beside(root)
    if export is None:
        return
    here = typed(export)
    again = export / reproduced if reproduced else None
    if again is not None and not (again.is_dir() and bench_files(again)):
        again = None  # no run reproduced here
    if again is not None and words[0] == "compare":  # A is read from --results, B from --against
        a_from, b_from = (
            (here, typed(again)) if _names_exported_run(export, words[1:2]) else (typed(again), here)
        )
        pick, then = ["--results", a_from, "--against", b_from], ""
    else:
        pick = ["--results", here]
        then = (
            f"; the run `toolkit reproduce` measured here: `{invocation.command('report', '--results', typed(again))}`"
            if again is not None
            else f"; to measure a run of yours beside it: `{invocation.command('reproduce', here)}`"
            if words[0] == "compare"
            else ""
        )
    raise BadInput(
        f"{path_text(export)} is a run `toolkit export-run` wrote (run.json, results.jsonl), not a project "
        f"with results/: pass {shell_join(pick)} (`{invocation.command(words[0], *words[1:], *pick)}`){then}"
    )


def _names_exported_run(export: Path, refs: tuple[str, ...]) -> bool:
    """Whether the compare ref in `refs` (A, or none) names the run `export` holds (run.json's run_id, or
    a start of it), not one reproduced beside it."""
    try:
        run_id = jsonsafe.parse_object(jsonsafe.read_regular_file(export / "run.json", 1 << 20) or b"{}")
    except ValueError:  # jsonsafe.JsonProblem: no run id to match
        return False
    return bool(refs and refs[0] and str(run_id.get("run_id") or "").startswith(refs[0]))


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"))


def need_regular(path: Path, st: os.stat_result) -> None:
    """BadInput (exit 4) naming `path` when `st` (its os.stat/fstat) is not a regular file: a FIFO
    named bench.jsonl blocks a reader forever, a device reads without end."""
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "a device or special file")
        raise BadInput(f"{path_text(path)}: not a regular file ({kind}): remove it or pass another --results")


_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_DIGEST_DIR = re.compile(r"[0-9a-f]{12}")


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644, *, root: Path | None = None) -> int:
    """A descriptor of `path` opened with `flags` (os.open), refused (BadInput, the descriptor closed) when it
    is not a regular file. Opened non-blocking, so a FIFO put there after it was listed cannot hang the open;
    the flag is then cleared. An open that writes (or `flags` holding os.O_NOFOLLOW) never follows a final
    symlink, nor (writing) a link at a folder below the results root (open_below; `root`: that root when the
    caller knows it, else store_root): a link is BadInput (exit 4) naming it and its target. The one open of
    result files (bench.jsonl, builds.jsonl, canary.jsonl, .seq, logs, run locks). Other OSError raised as is.
    """
    path = Path(path)
    if flags & _WRITES:
        fd = open_below(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode, root=root)
    else:
        try:
            fd = os.open(path, flags | os.O_NONBLOCK, mode)
        except OSError as err:
            _refuse_loop(err, path, flags)
            raise
    try:
        need_regular(path, os.fstat(fd))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_below(path: Path, flags: int, mode: int = 0o644, *, root: Path | None = None) -> int:
    """os.open(path, flags, mode) that follows no link at a folder below the results root (`root`,
    else store_root: results/<digest12>/telemetry/... never lands where a linked digest or telemetry
    folder points), nor at `path` itself when it lies below one (O_NOFOLLOW added); the folders are
    opened one by one from the root (`below`). A link is BadInput (exit 4) naming it and its target;
    other OSError as os.open's, naming `path`. A path under no results root opens as os.open opens it."""
    path = Path(path)
    top = root or store_root(path)
    if top is not None and Path(os.path.abspath(path)).is_relative_to(os.path.abspath(top)):
        flags |= os.O_NOFOLLOW
    folder = below(path.parent, top)
    try:
        return os.open(path.name, flags, mode, dir_fd=folder)
    except OSError as err:
        _refuse_loop(err, path, flags)
        raise OSError(err.errno, err.strerror, str(path)) from None
    finally:
        os.close(folder)


def _refuse_loop(err: OSError, path: Path, flags: int) -> None:
    """BadInput naming the link when `err` is O_NOFOLLOW's refusal of a link at `path`."""
    if err.errno == errno.ELOOP and flags & os.O_NOFOLLOW and os.path.islink(path):
        raise BadInput(refused_link(path)) from None


@contextlib.contextmanager
def folder_lock(root: Path, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold an exclusive flock of the folder `root` (a directory's own inode: no file is created), or of
    the nearest folder above it that exists while `root` does not (an import that fails leaves no
    folder behind); taken again on `root` once another holder has made it. Blocks while another
    process holds it (`on_wait(text)` is told so first). Two imports of one file into one folder at once
    both found it not imported before and both wrote it. A folder that cannot be opened (no read
    permission) is not locked, nor a folder above `root` that is not this user's (/tmp: anyone may hold
    an flock of it)."""
    while True:
        near = next((d for d in (root, *root.parents) if d.is_dir()), None)
        try:
            fd = os.open(near or ".", os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            fd = -1
        if fd < 0 or (near != root and os.fstat(fd).st_uid != os.geteuid()):
            if fd >= 0:
                os.close(fd)
            yield
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait:
                    on_wait(
                        f"waiting for another import into {path_text(root)} to finish"
                        + lock_holder(fd)
                        + "; Ctrl-C stops this one before it writes anything"
                    )
                fcntl.flock(fd, fcntl.LOCK_EX)
            if near == root or not root.is_dir():
                yield
                return
        finally:
            os.close(fd)  # releases the flock


def lock_holder(fd: int, proc: Path = Path("/proc")) -> str:
    """` (pid N holds it: COMMAND)` for the process holding an flock of the file open at `fd`, from
    `proc`/locks, with `; it is stopped: `kill -CONT N` lets it finish` where that process is stopped
    (Ctrl-Z, SIGSTOP: it would hold the lock, and the waiter wait, for ever); "" where none is found
    (another PID namespace, no /proc)."""
    st = os.fstat(fd)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        locks = (proc / "locks").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    pids = [f[4] for ln in locks if len(f := ln.split()) > 5 and f[1] == "FLOCK" and f[5] == inode]
    if not pids or not pids[0].isdigit() or pids[0] == "0":
        return ""
    pid = pids[0]
    try:
        command = (proc / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        state = (proc / pid / "stat").read_text(errors="replace").rpartition(")")[2].split()[:1]
    except OSError:
        return f" (pid {pid} holds it)"
    said = f" (pid {pid} holds it: {one_line(command)[:120] or '?'})"
    if state and state[0] in ("T", "t"):
        said += f"; it is stopped: `kill -CONT {pid}` lets it finish, `kill {pid}` ends it"
    return said


def make_folders(folder: Path, *, root: Path | None = None, chmod: int | None = None) -> None:
    """`mkdir -p folder` that never makes or enters a folder through a link below the results root
    (`root`, else store_root): results/<digest12>/logs is never made in the folder a planted
    results/<digest12> link points to. BadInput (exit 4) naming the link and its target; `chmod`: the
    mode then given to `folder` itself (through its descriptor, never a link's target). The root and
    the folders above it are the user's: made as Path.mkdir makes them, their links followed."""
    os.close(below(Path(folder), root or store_root(Path(folder)), make=True, chmod=chmod))


def write_atomic(path: Path, data: bytes, *, root: Path | None = None) -> None:
    """Write `data` to `path` whole or not at all: `<path>.tmp` written, then renamed over `path`
    inside the folder's descriptor. Neither the folders below the results root (`root`, else
    store_root: made as make_folders makes them) nor the temp file are followed when a link: BadInput
    (exit 4) naming it (open_regular), so results/report.html.tmp or results/report-plots linked
    elsewhere is never written through. A path outside `root` has only its own folder opened, that
    folder's links followed (a user's `-o`). Other OSError raised as is, naming `path` (never the temp file);
    a temp file whose write failed (disk full, quota) is removed."""
    path = Path(path)
    top = root or store_root(path)
    make_folders(path.parent, root=top)
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = open_regular(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, root=top)
    except OSError as err:  # the user named `path`: the temp file beside it is ours
        raise OSError(err.errno, err.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except OSError as err:  # a full disk or quota: the part written is removed, not left as <path>.tmp
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OSError(err.errno, err.strerror, str(path)) from None
    folder = below(path.parent, top)
    try:
        os.replace(tmp.name, path.name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from None
    finally:
        os.close(folder)


def store_root(path: Path) -> Path | None:
    """The results root `path` (a file or folder the toolkit writes) lies under, read from the store's
    layout (toolkit.results.records): the folder above its nearest digest folder (12 hex digits,
    results/<digest12>/...), above a campaign host's results/hosts/<key>/ too; None for a path in no
    digest folder (the store's own files: .seq, builds.jsonl, .lock; an output the user named), whose
    own folder is all that is checked."""
    p = Path(os.path.abspath(path))
    digest = next((a for a in (p, *p.parents) if _DIGEST_DIR.fullmatch(a.name)), None)
    if digest is None:
        return None
    root = digest.parent
    return root.parent.parent if root.parent.name == "hosts" else root


def below(folder: Path, root: Path | None, *, make: bool = False, chmod: int | None = None) -> int:
    """A descriptor of `folder` (O_DIRECTORY), reached from `root` one folder at a time, each opened with
    O_NOFOLLOW (made first when `make`, mkdir never following a link either): a link at any folder
    below `root` is BadInput naming it and its target. `root` itself (followed: it may be the user's
    link to another disk) is used as `folder`'s top when `folder` lies outside it or it is None."""
    folder = Path(os.path.abspath(folder))
    top = Path(os.path.abspath(root)) if root is not None else folder
    if not folder.is_relative_to(top):
        top = folder
    if make:
        top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, _FOLDER)
    here = top
    try:
        for name in folder.relative_to(top).parts:
            here = here / name
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
            try:
                nxt = os.open(name, _FOLDER | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as err:
                if stat.S_ISLNK(_lstat_mode(name, fd)):
                    raise BadInput(refused_link(here, "a folder")) from None
                raise OSError(err.errno, err.strerror, str(here)) from None
            os.close(fd)
            fd = nxt
        if chmod is not None:
            os.fchmod(fd, chmod)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lstat_mode(name: str, folder: int) -> int:
    try:
        return os.lstat(name, dir_fd=folder).st_mode
    except OSError:
        return 0


def no_results() -> str:
    """What a report of a results folder without a record says: `no results yet: run ` + fill_results()
    (a Prose: its commands are code in markdown, their paths data)."""
    fill = fill_results()
    return Prose(f"no results yet: run {fill}", fill)


def fill_results() -> str:
    """The commands that put records in the results folder, as invocation.command renders them (the engine,
    matrix and results given): `build && bench`, since a bench measures only the builds recorded in its own
    results folder, or `import FILE --label NAME` (`toolkit import` alone is a usage error, exit 4)."""
    build, bench = invocation.command("build"), invocation.command("bench")
    imp = invocation.command("import", "FILE", "--label", "NAME")
    return Prose(f"`{build} && {bench}` or `{imp}`", build, bench, imp)
