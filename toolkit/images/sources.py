"""SourceSpec --prepare--> a source tree on the host, copied into a build context as src/.

Kinds (see matrix.SourceSpec): git URL + ref, local directory, local archive, PyPI sdist. Fetched
trees are cached under .toolkit/sources/ beside the matrix. The resolved commit is returned so it
is recorded (image label + build record). A source that cannot be fetched falls back to its
`fallback` spec, and the fallback's commit must match the pinned one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from toolkit.core.errors import BadInput, BuildFailed
from toolkit.core.paths import contained
from toolkit.matrix.api import LoadedMatrix, SourceSpec

_EXCLUDE = {".git", "build", "__pycache__"}


@dataclass(frozen=True)
class PreparedSource:
    """A source tree on disk: `commit` is the full or short commit it was built from."""

    path: Path
    commit: str
    kind: str
    origin: str
    notes: tuple[str, ...] = ()


def cache_dir() -> Path:
    """Fetched sources are shared by every project of the user: $TOOLKIT_CACHE or ~/.cache/toolkit."""
    base = os.environ.get("TOOLKIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "toolkit"
    )
    return Path(base) / "sources"


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _run(cmd: list[str], *, cwd: Path | None = None, timeout: float = 900) -> str:
    from toolkit.host.info import git_env  # a git hook's GIT_DIR would send clone, fetch and checkout there

    env = dict(
        git_env(), GIT_TERMINAL_PROMPT="0", GIT_HTTP_LOW_SPEED_LIMIT="1000", GIT_HTTP_LOW_SPEED_TIME="30"
    )
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"`{' '.join(cmd)}` failed: {' | '.join(tail)}")
    return proc.stdout.strip()


def _git_repo(spec: SourceSpec, cache: Path) -> Path:
    """Where git source `spec` is cloned in the cache: one clone per repository URL, every ref in it."""
    return cache / f"git-{_key(spec.git or '')}"


def _fetch_git(spec: SourceSpec, cache: Path) -> tuple[Path, str]:
    repo = _git_repo(spec, cache)
    if not (repo / ".git").is_dir():
        shutil.rmtree(repo, ignore_errors=True)
        repo.parent.mkdir(parents=True, exist_ok=True)
        _run(["git", "clone", "--filter=blob:none", "--no-checkout", "--", spec.git or "", str(repo)])
    try:
        _run(["git", "rev-parse", "--verify", f"{spec.ref}^{{commit}}"], cwd=repo)
    except RuntimeError:
        _run(["git", "fetch", "--tags", "origin", spec.ref or ""], cwd=repo)
    _run(["git", "checkout", "--force", "--detach", spec.ref or ""], cwd=repo)
    return repo, _run(["git", "rev-parse", "HEAD"], cwd=repo)


def _extract(archive: Path, dest: Path) -> None:
    """Extract `archive` into `dest` (through dest.part). A member that would land or link outside, or a
    device file (extract_tar; zipfile strips '..' and '/' itself and makes no links), is BadInput
    naming the archive: nothing of it is kept."""
    tmp = dest.with_name(dest.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(tmp)
        else:
            with tarfile.open(archive) as tf:
                extract_tar(tf, tmp)
    # refused member, corrupt archive
    except (tarfile.TarError, zipfile.BadZipFile, ValueError, EOFError) as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BadInput(
            f"source archive {archive}: refused, not extracted ({str(err)[:300]}); use an archive whose "
            "members all stay inside it (no absolute names, no '..', no links out, no device files)"
        ) from None
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def extract_tar(tf: tarfile.TarFile, dest: Path, *, native: bool | None = None) -> None:
    """Extract `tf` into `dest` refusing what tarfile's "data" filter refuses: absolute names, `..`
    out of `dest`, links pointing out of it, device files and FIFOs (tarfile.OutsideDestinationError
    and friends, or ValueError naming the member). Python's filter where it exists (3.11.4+, 3.10.12+);
    on older ones (Debian 12's python3 is 3.11.2) the same checks by hand. `native` forces one path."""
    if native if native is not None else hasattr(tarfile, "data_filter"):
        tf.extractall(dest, filter="data")
        return
    root = dest.resolve()

    def inside(p: Path) -> bool:
        p = p.resolve()
        return p == root or root in p.parents

    for m in tf.getmembers():
        where = root / m.name
        if os.path.isabs(m.name) or not inside(where):
            raise ValueError(f"archive member {m.name!r} would land outside {dest}")
        if m.issym() and (os.path.isabs(m.linkname) or not inside(where.parent / m.linkname)):
            raise ValueError(f"archive member {m.name!r} links outside {dest} ({m.linkname!r})")
        if m.islnk() and (os.path.isabs(m.linkname) or not inside(root / m.linkname)):
            raise ValueError(f"archive member {m.name!r} links outside {dest} ({m.linkname!r})")
        if m.isdev() or m.isfifo():
            raise ValueError(f"archive member {m.name!r} is a device file or FIFO")
        m.mode &= 0o755  # no setuid/setgid/sticky, no group/other write: as the data filter does
        m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""  # owned by us, as the filter does
        # one member at a time: the next one's check sees the links already on disk (a chain such as
        # d -> ., d/e -> .., d/e/x passes every check made before anything is extracted)
        tf.extract(m, dest, set_attrs=not m.isdir())


def _archive_tree(archive: Path, spec: SourceSpec, cache: Path) -> Path:
    """The extracted tree of `archive` (cached), at `subdir`: checked after extraction to stay inside the
    tree, symlinks resolved (core.paths.contained; matrix validation checked its text), so a link in the
    archive or the cache cannot bring another folder of this host into the build context."""
    st = archive.stat()
    dest = cache / f"archive-{_key(str(archive.resolve()), str(st.st_size), str(st.st_mtime_ns))}"
    if not dest.is_dir():
        _extract(archive, dest)
    root = dest
    entries = [p for p in dest.iterdir()]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():  # sdists: one top folder
        root = entries[0]
    tree = (
        contained(
            root,
            spec.subdir,
            what=f"source archive {archive}: subdir",
            fix="give a folder inside the archive, relative to its top folder (a link out of it is refused)",
        )
        if spec.subdir
        else root
    )
    if not tree.is_dir():
        raise BadInput(f"source archive {archive}: subdir {spec.subdir!r} not found inside it; fix `subdir`")
    return tree


def _fetch_pypi(spec: SourceSpec, cache: Path) -> Path:
    dl = cache / f"pypi-{_key(spec.pypi or '')}"
    found = sorted(dl.glob("*.tar.gz")) + sorted(dl.glob("*.zip"))
    if not found:
        dl.mkdir(parents=True, exist_ok=True)
        # the sdist of this one package; its build backend (needed to read the sdist's metadata) may
        # come as wheels: `--no-binary :all:` made pip build scikit-build-core, setuptools... from
        # source too, which took over 8 minutes on a fresh Debian 12 host
        name = (spec.pypi or "").split("==")[0]  # the matrix takes exact pins only: NAME==VERSION
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                name,
                "--dest",
                str(dl),
                spec.pypi or "",
            ],
            timeout=1800,
        )
        found = sorted(dl.glob("*.tar.gz")) + sorted(dl.glob("*.zip"))
    if not found:
        raise RuntimeError(f"pip download {spec.pypi} produced no sdist")
    return _archive_tree(found[0], spec, cache)


def _fetch_one(spec: SourceSpec, lm: LoadedMatrix, where: str = "sources") -> PreparedSource:
    """One spec of source `where` (`sources.NAME`, `.fallback` appended for each fallback)."""
    cache = cache_dir()
    if spec.git:
        tree, commit = _fetch_git(spec, cache)
        if spec.commit and not commit.startswith(spec.commit):
            raise BadInput(
                f"source {spec.git}@{spec.ref} resolved to {commit}, not the pinned commit {spec.commit}"
            )
        return PreparedSource(tree, commit, "git", f"{spec.git}@{spec.ref}")
    if spec.path:
        tree = lm.resolve(spec.path, what=f"{where}.path")
        if not tree.is_dir():
            raise BadInput(f"{lm.path}: sources: path {tree} is not a directory; fix `path`")
        return PreparedSource(tree, spec.commit or "unknown", "path", str(tree))
    if spec.archive:
        archive = lm.resolve(spec.archive, what=f"{where}.archive")
        if not archive.is_file():
            raise BadInput(f"{lm.path}: sources: archive {archive} does not exist; fix `archive`")
        return PreparedSource(
            _archive_tree(archive, spec, cache), spec.commit or "unknown", "archive", str(archive)
        )
    tree = _fetch_pypi(spec, cache)
    return PreparedSource(tree, spec.commit or "unknown", "pypi", f"pypi:{spec.pypi}")


def fetch_note(lm: LoadedMatrix, name: str) -> str | None:
    """What prepare_source(lm, name) is about to wait on, for a line before it: `fetching source NAME
    from URL@REF (then: pypi)` where its first spec is a git repository not yet in the cache (a clone
    waits on the network: seconds, or up to the low-speed limit of 30 s at each stall), else None."""
    spec = lm.m.sources.get(name)
    if spec is None or not spec.git or (_git_repo(spec, cache_dir()) / ".git").is_dir():
        return None
    then, fb = [], spec.fallback
    while fb is not None:
        then.append(fb.kind)
        fb = fb.fallback
    return f"fetching source {name} from {spec.git}@{spec.ref}" + (
        f" (then: {', '.join(then)})" if then else ""
    )


def prepare_source(lm: LoadedMatrix, name: str, *, skip_git: bool = False) -> PreparedSource:
    """Fetch source `name` (trying its fallbacks in order). Raises BuildFailed when none works.

    `skip_git`: go straight to the first non-git spec (e.g. the PyPI sdist fallback), for callers
    that must not wait on an unreachable git host; trees are cached either way (cache_dir).
    """
    spec: SourceSpec | None = lm.m.sources[name]
    notes: list[str] = []
    where = f"sources.{name}"
    while spec is not None:
        if skip_git and spec.git:
            notes.append("git source skipped (skip_git)")
            spec, where = spec.fallback, f"{where}.fallback"
            continue
        try:
            got = _fetch_one(spec, lm, where)
            return PreparedSource(got.path, got.commit, got.kind, got.origin, tuple(notes))
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as err:
            notes.append(f"{spec.kind} source unavailable ({str(err).strip().splitlines()[-1][-240:]})")
            spec, where = spec.fallback, f"{where}.fallback"
    raise BuildFailed(f"source {name!r}: no way to fetch it: " + "; ".join(notes))


def sync_tree(src: Path, dest: Path) -> int:
    """Make `dest` a copy of `src` (minus .git/build dirs), copying only changed files.

    Files are compared by size and mtime (copy2 keeps mtimes, so unchanged files keep theirs and
    BuildKit/CMake see only real changes). Returns the number of files copied.
    """
    copied = 0
    dest.mkdir(parents=True, exist_ok=True)
    seen: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in _EXCLUDE)
        rel = Path(dirpath).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        seen.add(rel)
        for fn in filenames:
            s, d = Path(dirpath) / fn, dest / rel / fn
            seen.add(rel / fn)
            if s.is_symlink():
                if d.is_symlink() and os.readlink(d) == os.readlink(s):
                    continue
                d.unlink(missing_ok=True)
                os.symlink(os.readlink(s), d)
                copied += 1
                continue
            ss = s.stat()
            if d.is_file() and not d.is_symlink():
                ds = d.stat()
                if ds.st_size == ss.st_size and int(ds.st_mtime) == int(ss.st_mtime):
                    continue
            shutil.copy2(s, d)
            copied += 1
    for dirpath, _dirnames, filenames in os.walk(dest, topdown=False):
        rel = Path(dirpath).relative_to(dest)
        for fn in filenames:
            if rel / fn not in seen:
                (Path(dirpath) / fn).unlink()
        if rel not in seen and rel != Path("."):
            shutil.rmtree(dirpath, ignore_errors=True)
    return copied
