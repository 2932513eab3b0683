"""Bad input at the edges, each once a traceback (exit 1) or the wrong exit code: a broken sha256
cache, a malformed DOCKER_HOST, a complex YAML key, a NUL byte in a matrix path, a foreign lock
file, Docker API errors and OS errors that are not the disk's fault. CLI behaviour runs the CLI as a
user would (a subprocess: the exit code is the process's own)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.e2e_helpers import make_project
from toolkit.bench.runners.base import model_sha256
from toolkit.matrix.api import load_matrix
from toolkit.models.tiny import sha256_file

ROOT = Path(__file__).resolve().parents[1]


def toolkit(
    *args: str, cwd: Path = ROOT, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess:
    """`python -m toolkit ARGS` in a subprocess; `env` entries override (None removes) the test's own."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={k: v for k, v in full.items() if v is not None},
    )


def _out(p: subprocess.CompletedProcess) -> str:
    return f"exit {p.returncode}\n--- stdout ---\n{p.stdout[-2000:]}\n--- stderr ---\n{p.stderr[-2000:]}"


# ---------------------------------------------------------------------------------------------
# 1. .toolkit/sha256-cache.json that cannot be read as JSON counts as empty


@pytest.fixture
def cache_project(tmp_path):
    project = make_project(tmp_path / "p", images=["cpu"], bench={})
    model = project / "models" / "m.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    (project / ".toolkit").mkdir()
    return load_matrix(project / "matrix.yaml"), model, project / ".toolkit" / "sha256-cache.json"


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe{}", b"[" * 100_000 + b"\n", b"{" * 100_000, b"\x00\x00"],
    ids=["not-utf8", "deep-list", "deep-dict", "nul"],
)
def test_unreadable_sha256_cache_counts_as_empty(cache_project, content):
    lm, model, cache = cache_project
    cache.write_bytes(content)
    assert model_sha256(lm, model) == sha256_file(model)
    assert sha256_file(model) in cache.read_text()  # rewritten as a good cache


def test_the_cache_keeps_one_entry_per_file_and_kind(cache_project):
    """A file changed 50 times leaves one sha256 entry (the breaker grew the cache to 36 MB, +0.5 s a
    bench); another file's entries stay."""
    import json

    lm, model, cache = cache_project
    other = model.with_name("other.gguf")
    other.write_bytes(b"GGUF other")
    model_sha256(lm, other)
    for i in range(50):
        model.write_bytes(b"GGUF" + bytes([i]) * 64)
        assert model_sha256(lm, model) == sha256_file(model)
    entries = json.loads(cache.read_text())
    assert len(entries) == 2 and sha256_file(other) in entries.values(), entries


def test_a_fifo_at_the_sha256_cache_path_does_not_block(cache_project):
    lm, model, cache = cache_project
    os.mkfifo(cache)
    got: list[str] = []
    worker = threading.Thread(target=lambda: got.append(model_sha256(lm, model)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # blocked opening the FIFO: give it a writer so the thread can end, then fail
        with open(cache, "w") as w:
            w.write("{}")
        worker.join(timeout=20)
        pytest.fail("model_sha256 blocked on a FIFO at .toolkit/sha256-cache.json")
    assert got == [sha256_file(model)]


# ---------------------------------------------------------------------------------------------
# 2. A DOCKER_HOST that is malformed or that the Docker SDK cannot use: exit 5 naming DOCKER_HOST


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path / "p", images=["cpu"], bench={"n_prompt": [64], "n_gen": [16]})


# a scheme without an address (`tcp://`, `unix://`) is malformed too: `unix://` once came back as
# "Permission denied" with the docker group's advice
MALFORMED_HOSTS = ["tcp://[::1", "tcp://127.0.0.1:99999", "tcp://127.0.0.1:notaport", "tcp://", "unix://"]
UNUSABLE_HOSTS = ["foo://bar", "npipe://x"]


@pytest.mark.parametrize("host", MALFORMED_HOSTS + UNUSABLE_HOSTS)
def test_bench_with_a_bad_docker_host_is_engine_unavailable(project, host):
    p = toolkit("bench", "--matrix", str(project / "matrix.yaml"), env={"DOCKER_HOST": host})
    assert p.returncode == 5, _out(p)
    assert "Traceback" not in p.stderr
    assert (
        f"DOCKER_HOST={host!r}" in p.stderr and "unix:///var/run/docker.sock or tcp://HOST:PORT" in p.stderr
    )
    if host in MALFORMED_HOSTS:
        assert "DOCKER_HOST is malformed" in p.stderr
    else:
        assert "DOCKER_HOST is the likely cause" in p.stderr and "sudo dockerd" not in p.stderr


@pytest.mark.parametrize(
    "host", MALFORMED_HOSTS[:1] + UNUSABLE_HOSTS[:1]
)  # one of each kind: doctor takes ~1 s;
def test_doctor_with_a_bad_docker_host_names_it(project, host):  # every value goes through bench above
    """doctor reports an engine it cannot reach as its `docker` check (an error line, and exit 12: a
    check failed, so `toolkit doctor && toolkit build` stops), never a traceback."""
    p = toolkit("doctor", "--matrix", str(project / "matrix.yaml"), env={"DOCKER_HOST": host})
    assert p.returncode == 12, _out(p)
    assert "Traceback" not in p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.strip().startswith("error docker"))
    assert f"DOCKER_HOST={host!r}" in line and "unix:///var/run/docker.sock or tcp://HOST:PORT" in line


def test_an_engine_not_running_at_docker_host_says_start_it_or_point_docker_host_elsewhere(project):
    host = "unix:///nonexistent/docker.sock"
    p = toolkit("bench", "--matrix", str(project / "matrix.yaml"), env={"DOCKER_HOST": host})
    assert p.returncode == 5, _out(p)
    assert f"Docker engine not reachable at DOCKER_HOST={host!r}" in p.stderr
    assert "`sudo systemctl start docker`" in p.stderr and "point DOCKER_HOST at a running engine" in p.stderr


# ---------------------------------------------------------------------------------------------
# 3. A complex YAML key is bad input naming the file and the line


@pytest.mark.parametrize(
    "key,kind,line",
    [
        ("? [a, b]\n: c\n", "list", 1),
        ("? {a: b}\n: c\n", "mapping", 1),
        ("x: &k [a]\n? *k\n: c\n", "list", 1),
    ],  # an alias: where the list is
    ids=["list", "mapping", "alias"],
)
def test_a_complex_yaml_key_is_bad_input(project, key, kind, line):
    matrix = project / "matrix.yaml"
    text = matrix.read_text()
    matrix.write_text(key + text)
    for command in (["render"], ["bench", "--dry-run"], ["doctor"]):
        p = toolkit(*command, "--matrix", str(matrix), env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
        assert p.returncode == 4, _out(p)
        assert "Traceback" not in p.stderr
        assert f"{matrix}: line {line}," in p.stderr, p.stderr
        assert f"a mapping key must be a plain value, not a {kind}" in p.stderr


# ---------------------------------------------------------------------------------------------
# 4. A NUL byte in a matrix string (a YAML "\0" escape) is bad input naming the key


def _with(project: Path, old: str, new: str) -> Path:
    matrix = project / "matrix.yaml"
    text = matrix.read_text()
    assert old in text
    matrix.write_text(text.replace(old, new, 1))
    return matrix


@pytest.mark.parametrize(
    "command", [["bench"], ["bench", "--dry-run"], ["render"]], ids=["bench", "dry-run", "render"]
)
def test_a_nul_byte_in_a_model_path_is_bad_input(project, command):
    matrix = _with(
        project, "path: models/tiny-qwen3moe.gguf", 'path: "models/tiny\\0b.gguf"'
    )  # has `generate:`
    p = toolkit(*command, "--matrix", str(matrix), env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert p.returncode == 4, _out(p)
    assert "Traceback" not in p.stderr
    assert f"{matrix}: models[tiny-qwen3moe].path: the value contains a NUL byte" in p.stderr
    assert "remove it" in p.stderr
    assert not (project / "models").exists()  # refused before anything was generated


@pytest.mark.parametrize(
    "old,new,where",
    [
        (
            "    fallback:\n      pypi: llama-cpp-python==0.3.36\n      subdir: vendor/llama.cpp\n",
            '    fallback:\n      path: "src\\x00/llama.cpp"\n',
            "sources.llama.cpp.fallback.path",
        ),
        (
            "    fallback:\n      pypi: llama-cpp-python==0.3.36\n      subdir: vendor/llama.cpp\n",
            '    fallback:\n      archive: "llama\\u0000.tar.gz"\n',
            "sources.llama.cpp.fallback.archive",
        ),
        (
            "schema_version: 1\n",
            'schema_version: 1\ncampaign:\n  sbatch_args: ["--x=\\0"]\n  hosts: [{node: n1}]\n',
            "campaign.sbatch_args[0]",
        ),
        ("schema_version: 1\n", 'schema_version: 1\n"a\\0b": 1\n', "(top level): the key"),
    ],
    ids=["source-path", "source-archive", "sbatch-arg", "key"],
)
def test_a_nul_byte_anywhere_in_the_matrix_is_bad_input(project, old, new, where):
    matrix = _with(project, old, new)
    p = toolkit("render", "--matrix", str(matrix))
    assert p.returncode == 4, _out(p)
    assert "Traceback" not in p.stderr and "\0" not in p.stderr
    assert f"{matrix}: {where}" in p.stderr and "contains a NUL byte" in p.stderr


# ---------------------------------------------------------------------------------------------
# 5. Exit 9: another run's lock file is anyone's to write (shared temp folder); each run named once


@pytest.fixture
def foreign_lock(tmp_path):
    """A fake other run: a lock file in a private lock folder, held (fcntl.flock) by this test process,
    as a live `toolkit bench` holds its own. Yields (write(content), run id, lock dir)."""
    import fcntl

    rid = "20260101T000000Z-abcdef"
    prefix = "toolkit-bench-engine-"
    path = tmp_path / f"{prefix}{rid}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def write(content: bytes) -> None:
        os.ftruncate(fd, 0)
        os.pwrite(fd, content, 0)

    yield write, rid, tmp_path
    os.close(fd)


def _refusal(monkeypatch, lock_dir: Path, containers: list) -> str:
    """RunGuard.start's exit-9 message. The engine is a stand-in (no Docker at this test level):
    toolkit_containers() gives `containers`, nothing is removed."""
    from toolkit.bench import guard
    from toolkit.core.errors import ConcurrentRun
    from toolkit.engine import api as engine

    monkeypatch.setattr(engine, "toolkit_containers", lambda: containers)
    monkeypatch.setattr(engine, "remove_container_id", lambda cid: pytest.fail(f"removed {cid}"))
    g = guard.RunGuard("20260101T000001Z-000000", "engine", lock_dir=lock_dir)
    with pytest.raises(ConcurrentRun) as exc:
        g.start(allow_concurrent=False, note=lambda s: None)
    assert not g.path.exists()  # released
    return str(exc.value)


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe\x80 12345\n", b"A" * 3000, b"123\nrm -rf /\n", b"12345678901234\n", b"", b"\x1b[2J4242"],
    ids=["not-utf8", "3000-chars", "lines", "too-long", "empty", "escape"],
)
def test_a_foreign_lock_file_with_anything_but_a_pid_shows_a_question_mark(
    monkeypatch, foreign_lock, content
):
    write, rid, lock_dir = foreign_lock
    write(content)
    msg = _refusal(monkeypatch, lock_dir, [])
    assert f"run {rid} (pid ? on this host; between containers)" in msg
    assert "\n" not in msg and "AAAA" not in msg and "\x1b" not in msg and "rm -rf" not in msg


def test_a_foreign_lock_file_with_a_pid_shows_it(monkeypatch, foreign_lock):
    write, rid, lock_dir = foreign_lock
    write(b"4242\n")
    assert f"run {rid} (pid 4242 on this host" in _refusal(monkeypatch, lock_dir, [])


def test_a_run_with_two_containers_is_named_once(monkeypatch, tmp_path, foreign_lock):
    from toolkit.bench import guard
    from toolkit.engine import api as engine
    from toolkit.engine import containers

    write, rid, lock_dir = foreign_lock
    write(b"4242\n")
    here, other = engine.host_id(), "another-host"

    def ctr(name: str, run: str, host: str) -> containers.ContainerInfo:
        return containers.ContainerInfo(
            name,
            name,
            "running",
            {containers.CONTAINER_LABEL: "1", guard.RUN_ID_LABEL: run, guard.HOST_LABEL: host},
        )

    elsewhere = "20260101T000002Z-fedcba"
    msg = _refusal(
        monkeypatch,
        lock_dir,
        [
            ctr("a1", rid, here),
            ctr("a2", rid, here),
            ctr("b1", elsewhere, other),
            ctr("b2", elsewhere, other),
        ],
    )
    assert msg.count(rid) == 1 and msg.count(elsewhere) == 1, msg
    assert (
        f"run {rid} (pid 4242 on this host; containers a1, a2); {elsewhere} (containers b1, b2, started from"
        in msg
    )
    assert "`docker rm -f b1 b2`" in msg


def test_a_fifo_under_a_lock_name_does_not_block(monkeypatch, tmp_path):
    """A FIFO named like a lock file and held (flock) by another process: opened without blocking, and
    its pid shown as "?" (reading it would wait for a writer)."""
    import fcntl

    rid = "20260101T000003Z-0a0b0c"
    path = tmp_path / f"toolkit-bench-engine-{rid}.lock"
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # O_RDWR: a FIFO opens at once, as its own writer
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    got: list[str] = []
    worker = threading.Thread(target=lambda: got.append(_refusal(monkeypatch, tmp_path, [])), daemon=True)
    try:
        worker.start()
        worker.join(timeout=20)
        assert not worker.is_alive(), "RunGuard.start blocked on a FIFO lock file"
    finally:
        os.close(fd)  # the writer goes: a blocked open/read returns
        worker.join(timeout=20)
    assert got and f"run {rid} (pid ? on this host; between containers)" in got[0]


# ---------------------------------------------------------------------------------------------
# 6a. --memory / bench.memory outside what Docker takes (6 MiB .. int64 bytes) is bad input


@pytest.mark.parametrize("size", ["99999999999999999999999", "9223372036854775808", "8388608t", "5m"])
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_memory_option_out_of_dockers_range_is_bad_input(project, size, dry_run):
    p = toolkit(
        "bench",
        "--matrix",
        str(project / "matrix.yaml"),
        "-i",
        "cpu",
        "--memory",
        size,
        *(["--dry-run"] if dry_run else []),
        env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )
    assert p.returncode == 4, _out(p)
    assert (
        f"--memory: memory {size!r} is out of range: Docker takes 6m (its minimum) to 9223372036854775807 bytes"
        in p.stderr
        and "Traceback" not in p.stderr
    )


def test_bench_memory_out_of_dockers_range_is_bad_input(project):
    matrix = project / "matrix.yaml"
    matrix.write_text(
        matrix.read_text().replace("\nbench:\n", "\nbench:\n  memory: '99999999999999999999999'\n", 1)
    )
    p = toolkit("render", "--matrix", str(matrix))
    assert p.returncode == 4, _out(p)
    assert (
        f"{matrix}: line 34, column 11: bench.memory: memory '99999999999999999999999' is out of range"
        in p.stderr
    )


def test_memory_at_the_edges_of_dockers_range_is_taken():
    from toolkit.matrix.api import memory_bytes

    assert memory_bytes("6m") == 6 * 1024 * 1024
    assert memory_bytes("9223372036854775807") == 2**63 - 1  # exact: a float would round it up past int64
    assert memory_bytes("1.5g") == 1536 * 1024 * 1024


# ---------------------------------------------------------------------------------------------
# 6b. A Docker API error is the engine's (exit 5), never a file system error (exit 8)


@pytest.fixture
def fake_engine(tmp_path):
    """tests.support.engine.socket_engine: yields (DOCKER_HOST, answer), answer[0] 400 to begin with."""
    from tests.support.engine import socket_engine

    with socket_engine(tmp_path) as engine:
        yield engine


@pytest.mark.parametrize("command", [["bench"], ["doctor"]])
def test_an_engine_that_refuses_a_request_is_exit_5_not_a_disk_error(project, fake_engine, command):
    host, answer = fake_engine
    p = toolkit(*command, "--matrix", str(project / "matrix.yaml"), env={"DOCKER_HOST": host})
    assert p.returncode == 5, _out(p)
    # the engine's explanation, not the request URL, fills the message (a long URL once cut the reason off)
    assert "error: the Docker engine refused a request (400 " in p.stderr and "http" not in p.stderr
    assert "stand-in engine refuses" in p.stderr and "fix it and run the command again" in p.stderr
    assert "free space" not in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize(
    "how,said",
    [
        ("drop", "error: Docker engine connection lost"),
        (503, "error: Docker engine connection lost"),
        # Reproducer (issue 32 item 11b): Podman answers a `"` in a bind-mount path with a 500 and its reason;
        # that was told as "connection lost, restart the engine"
        (500, "error: the Docker engine could not carry out a request (500 stand-in engine refuses"),
    ],
)
def test_an_engine_failing_mid_command_is_exit_5_and_says_whether_it_answered(
    project, fake_engine, how, said
):
    host, answer = fake_engine
    answer[0] = how
    p = toolkit("bench", "--matrix", str(project / "matrix.yaml"), env={"DOCKER_HOST": host})
    assert p.returncode == 5, _out(p)
    assert said in p.stderr
    assert "free space" not in p.stderr and "Traceback" not in p.stderr


# ---------------------------------------------------------------------------------------------
# 6c. An OSError gets advice that fits it: a wrong kind of path is bad input, a disk problem exit 8


def test_reproduce_of_a_file_is_bad_input():
    p = toolkit("reproduce", "/etc/passwd")
    assert p.returncode == 4, _out(p)
    assert "/etc/passwd: Not a directory" in p.stderr and "a file where a folder is expected" in p.stderr
    assert "free space" not in p.stderr and "Traceback" not in p.stderr


@pytest.fixture
def results_with_a_record(tmp_path):
    from tests.support.records import make_record
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    store.add_result(make_record("cpu", "cpu", p=512, avg=100.0))
    store.add_result(make_record("cpu", "cpu", n=128, avg=10.0))
    return tmp_path / "results"


@pytest.mark.parametrize(
    "args,path",
    [
        (["--plots", "/proc/x"], "/proc/x: No such file or directory"),
        (["--format", "html", "--output", "/proc/x.html"], "/proc/x-plots: No such file or directory"),
        (["--plots", "/etc/passwd/x"], "/etc/passwd/x: the folder /etc/passwd is a file, not a folder"),
    ],
)
def test_report_to_a_path_of_the_wrong_kind_is_bad_input(results_with_a_record, args, path):
    p = toolkit("report", "--results", str(results_with_a_record), *args)
    assert p.returncode == 4, _out(p)
    assert path in p.stderr and "free space" not in p.stderr and "Traceback" not in p.stderr


def test_report_to_a_folder_without_permission_is_still_a_file_system_error(results_with_a_record, tmp_path):
    from tests.support.runs import _no_dac, tk

    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    p = tk(
        ROOT,
        "report",
        "--results",
        str(results_with_a_record),
        "--plots",
        str(locked / "plots"),
        prefix=_no_dac(),
    )
    assert p.returncode == 8, _out(p)
    assert f"{locked / 'plots'}: Permission denied" in p.stderr and "fix its permissions" in p.stderr


@pytest.mark.parametrize(
    "code,exit_code",
    [
        ("ENOTDIR", 4),
        ("EISDIR", 4),
        ("EINVAL", 4),
        ("ENOENT", 4),
        ("ENOSPC", 8),
        ("EROFS", 8),
        ("EACCES", 8),
        ("EDQUOT", 8),
        ("ENAMETOOLONG", 8),
    ],
)
def test_from_oserror_advice_fits_the_error(code, exit_code):
    import errno

    from toolkit.core.errors import FileSystemError

    num = getattr(errno, code)
    err = FileSystemError.from_oserror(OSError(num, os.strerror(num), "/some/path"), "writing a plot")
    assert err.exit_code == exit_code
    assert str(err).startswith(f"/some/path: {os.strerror(num)} while writing a plot")
    # the advice fits the error (newcomer round 17: a permission error was told to free space and pass
    # --results DIR to a `report -o` that has no such fix)
    advice = {"ENOSPC": "disk is full", "EROFS": "read-only", "EACCES": "permission", "EDQUOT": "quota"}
    advice["ENAMETOOLONG"] = "too long"
    if exit_code == 8:
        assert advice[code] in str(err).split(";", 1)[1], str(err)
        assert "--results DIR" not in str(err) and ("free space" in str(err)) == (
            code in ("ENOSPC", "EDQUOT")
        )


def test_results_under_a_file_is_bad_input_before_the_engine(project):
    (project / "afile").write_text("x")
    p = toolkit(
        "bench",
        "--matrix",
        str(project / "matrix.yaml"),
        "--results",
        str(project / "afile" / "results"),
        env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )
    assert p.returncode == 4, _out(p)
    assert f"{project / 'afile' / 'results'}" in p.stderr and "a file where a folder is expected" in p.stderr
    assert "Traceback" not in p.stderr and "Docker engine" not in p.stderr


def test_a_result_that_cannot_be_written_mid_run_stays_exit_8(tmp_path):
    """Mid-run a wrong kind of path under results/ (a file where the digest folder goes) is still a
    result not written: FileSystemError (exit 8; bench adds what was saved), with advice that fits."""
    from tests.support.records import make_record
    from toolkit.core.errors import FileSystemError
    from toolkit.results.records import ResultStore, Saver

    store = ResultStore(tmp_path / "results")
    rec = make_record("cpu", "cpu", p=512, avg=100.0)
    store.root.mkdir()
    store.digest_dir(rec.image.digest).write_text("in the way")
    with pytest.raises(FileSystemError) as exc:
        Saver(store).save(rec)
    assert exc.value.exit_code == 8 and "where a folder is expected" in str(exc.value)


def test_a_run_id_from_a_lock_file_name_is_shown_quoted_when_it_is_not_plain(monkeypatch, tmp_path):
    import fcntl

    rid = "x\n\x1b[2Jevil"
    fd = os.open(tmp_path / f"toolkit-bench-engine-{rid}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        msg = _refusal(monkeypatch, tmp_path, [])
    finally:
        os.close(fd)
    assert "run 'x\\n\\x1b[2Jevil' (pid ? on this host" in msg and "\n" not in msg and "\x1b" not in msg


def test_report_output_never_replaces_a_device_a_link_the_store_or_the_matrix(
    results_with_a_record, tmp_path
):
    """Reproducer (breaker, issue 32's kind): `report -o` wrote a temporary file and renamed it over the
    target: run as root it replaced /dev/full (a device node) with a regular file, a symlink with a
    file, a results folder's bench.jsonl with markdown and the matrix file with the report; exit 0."""
    import os
    import stat

    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "elsewhere.md")
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    stored = next(results_with_a_record.glob("*/bench.jsonl"))
    before = stored.read_bytes()
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("schema_version: 1\n")
    for target, said in [
        (link, "is a symbolic link, not a regular file"),
        (fifo, "is a device or special file, not a regular file"),
        (stored, "is a data file of the results folder"),
        (matrix, "is the matrix file this command reads"),
    ]:
        p = toolkit(
            "report", "--matrix", str(matrix), "--results", str(results_with_a_record), "-o", str(target)
        )
        assert p.returncode == 4 and said in p.stderr, _out(p)
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert stored.read_bytes() == before and matrix.read_text() == "schema_version: 1\n"
    ok = toolkit("report", "--results", str(results_with_a_record), "-o", str(tmp_path / "r.md"))
    assert ok.returncode == 0 and (tmp_path / "r.md").is_file(), _out(ok)


@pytest.mark.parametrize("fmt", ["github", "json"])
@pytest.mark.parametrize("unbuffered", [None, "1"], ids=["buffered", "unbuffered"])
def test_a_full_standard_output_is_named_not_an_unknown_path(results_with_a_record, fmt, unbuffered):
    """Reproducer (breaker): `toolkit report > /dev/full` said `(unknown path): No space left on device`.
    On a fresh Debian 12 stand-in (stdout buffered, as on any host) it then exited 120 with `Exception
    ignored ... <stdout>`: the interpreter's last flush at exit failed again (this machine sets
    PYTHONUNBUFFERED=1, which hid it); `--format json` ended in a traceback (exit 1) writing its error
    envelope to the same full stdout. Both buffering modes, both forms: exit 8, one line."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "toolkit",
                "report",
                "--results",
                str(results_with_a_record),
                "--format",
                fmt,
            ],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**env, "PYTHONPATH": str(ROOT), **({"PYTHONUNBUFFERED": unbuffered} if unbuffered else {})},
            timeout=120,
        )
    assert p.returncode == 8 and "error: standard output: No space left on device" in p.stderr, p.stderr
    assert "unknown path" not in p.stderr and "Traceback" not in p.stderr and "ignored" not in p.stderr, (
        p.stderr
    )
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
