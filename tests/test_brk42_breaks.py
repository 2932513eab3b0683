"""brk42 (issue 32's kinds, new shapes): each test failed on the code before its fix. Real files and
real subprocesses; nothing mocked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tests.support.project import DATA, ROOT
from tests.support.runs import _env, tk
from tests.support.slurm import slurm_cluster

ENV = _env(None)


def toolkit(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """The toolkit as a user runs it (tests.support.runs.tk): its own process, exit code and stderr."""
    return tk(cwd, *args, timeout=timeout)


def _project(tmp_path: Path, body: str) -> Path:
    """A project whose `cpu` image (the only one) renders the template `body`."""
    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    (tmp_path / "Dockerfile.templates" / "evil.Dockerfile.j2").write_text(body)
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [dict(i, template="evil.Dockerfile.j2") for i in data["images"] if i["name"] == "cpu"]
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path / "matrix.yaml"


KEEPS = "{% for i in range(100000) %}{% for j in range(100000) %}"


@pytest.mark.parametrize(
    "body",
    [
        "{% set x = [] %}"
        + KEEPS
        + '{% set _ = x.append("a" * 1000000 ~ j) %}{% endfor %}{% endfor %}FROM x',
        "{% set ns = namespace(x=[]) %}" + KEEPS + '{% set ns.x = ns.x + ["a" * 1000000 ~ j] %}'
        "{% endfor %}{% endfor %}FROM x",
    ],
    ids=["append", "namespace-plus"],
)
def test_a_template_that_keeps_what_its_loop_builds_is_stopped_by_memory_not_time(tmp_path, body):
    """Every value within MAX_RENDERED_CHARS, but kept: 7.6 GB of memory in the 10 s the render was
    allowed. Now exit 4 naming the template within ~256 MiB of growth."""
    matrix = _project(tmp_path, body)
    code, err, peak_mib = _peak(tmp_path, "render", "--matrix", str(matrix))
    assert code == 4, err
    assert "evil.Dockerfile.j2" in err and "MiB of memory" in err, err
    assert peak_mib < 600, (peak_mib, err)  # the message says memory stopped it, not time


@pytest.mark.parametrize(
    "digest", ["import:.lock", "import:builds.jsonl", "import:.seq", "x:hosts", "import:.."]
)
def test_an_import_digest_naming_the_results_folders_own_files_is_refused(tmp_path, digest):
    """`--digest import:.lock` made results/.lock a folder: every later bench into the folder failed
    (`.lock: Is a directory ... give a file's path`, exit 4); `import:builds.jsonl` made every build
    and bench refuse the folder (`builds.jsonl: not a regular file: remove it`, deleting the import)."""
    res = toolkit(
        "import", "--results", str(tmp_path / "r"), "--label", "x", "--digest", digest,
        str(DATA / "llamabench-0c1e57098-cpu.jsonl"), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 4, res.stderr
    assert f"--digest {digest!r}" in res.stderr and "import:my-run" in res.stderr
    assert not [p for p in (tmp_path / "r").glob("*/bench.jsonl")]


def test_an_import_digest_with_a_dot_inside_is_still_a_folder(tmp_path):
    res = toolkit(
        "import", "--results", str(tmp_path / "r"), "--label", "x", "--digest", "import:my.run",
        str(DATA / "llamabench-0c1e57098-cpu.jsonl"), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0 and (tmp_path / "r" / "my.run" / "bench.jsonl").is_file(), res.stderr


def _rows_file(path: Path, copies: int) -> Path:
    """The real llama-bench CPU rows, `copies` times, each copy measured 10 s after the last."""
    import datetime as dt
    import json

    rows = [json.loads(line) for line in (DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()]
    t0 = dt.datetime(2026, 11, 1)
    with path.open("w") as out:
        for i in range(copies):
            for r in rows:
                out.write(
                    json.dumps({**r, "test_time": f"{t0 + dt.timedelta(seconds=10 * i):%Y-%m-%dT%H:%M:%SZ}"})
                )
                out.write("\n")
    return path


@pytest.mark.parametrize("exists", [True, False], ids=["folder-there", "folder-new"])
def test_two_imports_of_one_file_at_once_import_it_once(tmp_path, exists):
    """Both imports read "not imported before", then both wrote: the same 1,200 rows stored twice
    (two runs of every test, one superseding the other) though a measurement is imported once."""
    src = _rows_file(tmp_path / "rows.jsonl", 200)
    results = tmp_path / "r"
    if exists:
        results.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "toolkit", "import", "--results", str(results), "--label", "x", str(src)],
            cwd=tmp_path,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    lines = sum(len(f.read_text().splitlines()) for f in results.glob("*/bench.jsonl"))
    assert lines == 1200, outs
    assert sum("nothing added" in out + err for out, err in outs) == 1, outs


# ------------------------------------------------------------------ Slurm job scripts (real sbatch)


@pytest.fixture(scope="module")
def slurm():
    """Two Slurm nodes (n1, n2) on this machine (tests/support/slurm.py), for this module."""
    with slurm_cluster() as d:
        yield d


def _campaign(where: Path, **campaign):
    """A campaign of the cpu image on node n1 in the project folder `where` (its name chosen by the test)
    with a pushed build of the image recorded; returns (project, its dry-run submit: scripts written,
    nothing submitted)."""
    from datetime import datetime, timezone

    from toolkit.campaign import slurm as cmod
    from toolkit.images import build as build_mod
    from toolkit.matrix.api import load_matrix
    from toolkit.results.records import BuildRecord, ResultStore

    where.mkdir(parents=True)
    _matrix_with(
        where, lambda d: d.update(campaign={"gres_type": "fake", "hosts": [{"node": "n1"}], **campaign})
    )
    lm = load_matrix(where / "matrix.yaml")
    ResultStore(where / "results").add_build(
        BuildRecord(
            image="cpu",
            ref="toolkit/cpu:test",
            digest="sha256:" + "a" * 64,
            backend="cpu",
            template=lm.m.image("cpu").template,
            template_hash="",
            labels={build_mod.INPUTS_KEY_LABEL: build_mod.inputs_key(lm, lm.m.image("cpu")).key},
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            repo_digests=["127.0.0.1:5000/ns/cpu@sha256:" + "b" * 64],
        )
    )
    return where, lambda: cmod.submit(
        load_matrix(where / "matrix.yaml"), ResultStore(where / "results"), dry_run=True
    )


@pytest.mark.parametrize(
    ("folder", "campaign"),
    [("res\ntouch PWNED\n", {}), ("p", {"sbatch_args": ["--comment=x\ntouch PWNED"]})],
    ids=["newline-in-the-project-path", "newline-in-sbatch_args"],
)
def test_a_line_break_never_reaches_a_job_script(tmp_path, folder, campaign):
    """A newline in the project's path (or in sbatch_args) ended an #SBATCH line: the rest ran as a
    shell command on the node (`touch PWNED`), and every #SBATCH line after it was ignored."""
    from toolkit.core.errors import BadInput

    p, submit = _campaign(tmp_path / folder, **campaign)
    with pytest.raises(BadInput, match="line break or control character"):
        submit()
    assert not list((p / "results").glob("campaigns/*/*.sbatch"))


@pytest.mark.e2e  # a real two-node Slurm (network, munge): as test_campaign's cluster tests
def test_a_project_path_with_a_space_a_hash_and_a_quote_reaches_slurm_whole(tmp_path, slurm):
    """sbatch splits a directive at a space and ends it at `#`: a project in `my proj` was refused
    (`Invalid directive found in batch script: proj`), one in `run#2` sent the job's output to a file
    `run` beside the project, its work folder with it. The job step (`exec toolkit campaign job`, which
    pulls the image from a registry) is replaced by `pwd`: what is tested is where Slurm puts the job."""
    base = Path(tempfile.mkdtemp(prefix="brk42-", dir="/tmp"))  # slurmd (another user's munge) reads it
    try:
        p, submit = _campaign(base / 'my run#2 "q"')
        s = submit().slices[0]
        script = Path(s.script)
        script.write_text(script.read_text().rsplit("\nexec ", 1)[0] + "\npwd\n")
        out = subprocess.run(
            ["sbatch", "--parsable", str(script)], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        log = Path(s.output.replace("%j", out.stdout.strip().split(";")[0]))
        deadline = time.monotonic() + 60
        while not (log.is_file() and log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert log.read_text().strip() == str(p), sorted(map(str, base.rglob("*")))
        assert sorted(x.name for x in base.iterdir()) == ['my run#2 "q"']  # nothing beside the project
    finally:
        shutil.rmtree(base, ignore_errors=True)


_PEAK = (  # VmHWM: this process's own high-water mark (ru_maxrss may carry the forking parent's: pytest's)
    "import runpy, sys\n"
    "sys.argv = ['toolkit', *sys.argv[1:]]\n"
    "try:\n    runpy.run_module('toolkit', run_name='__main__')\n"
    "finally:\n    hwm = [x for x in open('/proc/self/status') if x.startswith('VmHWM:')][0].split()[1]\n"
    "    print('PEAK_KB', hwm, file=sys.stderr)\n"
)


def _peak(tmp_path: Path, *args: str) -> tuple[int, str, float]:
    """(exit code, stderr, peak RSS in MiB) of `toolkit ARGS` in its own process."""
    res = subprocess.run(
        [sys.executable, "-c", _PEAK, *args],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    peak = int(res.stderr.rsplit("PEAK_KB", 1)[1].split()[0]) / 1024
    return res.returncode, res.stderr, peak


def _import_peak(tmp_path: Path, src: Path) -> tuple[int, str, float]:
    """(exit code, stderr, peak RSS in MiB) of `toolkit import` of `src` in its own process."""
    return _peak(tmp_path, "import", "--results", str(tmp_path / "r"), "--label", "x", str(src))


@pytest.mark.parametrize(("fmt", "sep", "n"), [("md", " x |", 2_000_000), ("csv", ",x", 4_000_000)])
def test_a_row_of_millions_of_cells_is_refused_before_it_is_split(tmp_path, fmt, sep, n):
    """A 30 MB md file of 5,000,000 cells a line took 51 s and 990 MB (every line split whole, several
    times); a csv line of 20,000,000 fields 670 MB. Now the row is refused (more than 1024 cells), the
    good rows beside it imported, in bounded memory."""
    lines = (DATA / f"llamabench-0c1e57098-cpu.{fmt}").read_text().splitlines()
    first_row = 2 if fmt == "md" else 1  # md: header, separator, rows; csv: header, rows
    wide = lines[first_row] + sep * n  # csv: under the 8 MiB a streamed line may have
    src = tmp_path / f"wide.{fmt}"
    src.write_text("\n".join([*lines[: first_row + 1], wide, *lines[first_row + 1 :]]) + "\n")
    code, err, peak_mib = _import_peak(tmp_path, src)
    assert code == 0, err
    assert f"wide.{fmt}:{first_row + 2}: the row has more than 1024" in err, err
    assert peak_mib < 130, (peak_mib, err)  # was 990 MB: bounded memory, no timed bound (a busy host)


def test_a_file_of_one_huge_line_is_not_searched_for_a_failure_line():
    """A 40 MB csv header line without a row: 22 s of the failure patterns (1.3 s each) before the
    refusal; such a line is no llama.cpp log line."""
    from toolkit.runtimes.llama_bench import failed_run

    t0 = time.monotonic()
    assert failed_run.why_no_rows(["build_commit" + ",x" * 5_000_000, "error: out of memory"]) is not None
    assert time.monotonic() - t0 < 10  # was 22 s on an idle host; milliseconds now (loose: a busy CI host)


def _matrix_with(tmp_path: Path, edit) -> Path:
    """The project's matrix (cpu image, tiny model only) with `edit(data)` applied."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["images"] = [i for i in data["images"] if i["name"] == "cpu"]
    data["models"] = [m for m in data["models"] if m["name"] == "tiny-qwen3moe"]
    edit(data)
    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path / "matrix.yaml"


def _axes(d: dict) -> None:
    d["bench"].update(n_prompt=list(range(1, 1001)), n_gen=list(range(1, 1001)), n_ubatch=list(range(1, 101)))
    d["bench"]["n_depth"] = list(range(100))


def _env(d: dict) -> None:
    d["bench"]["env"] = {f"MYVAR{i}": ["a", "b", "c", "d"] for i in range(30)}


def _depth(d: dict) -> None:
    d["models"][0]["depth"] = {"n_depth": list(range(1000)), "n_prompt": list(range(1, 300)), "n_gen": [128]}


@pytest.mark.parametrize("edit", [_axes, _env, _depth], ids=["axes", "env-axis", "depth-sweep"])
def test_axes_that_cross_to_millions_of_cases_are_bad_input_before_any_is_listed(tmp_path, edit):
    """`bench --dry-run` listed every case for its plan line first: 2 x 10^7 cases took 11 GB in 60 s,
    an env axis of 30 names x 4 values (4^30 containers) 4.7 GB in 30 s (both killed, no answer), a
    depth sweep of 1000 depths x 300 tests 12 s. Now exit 4 at load, naming the axes."""
    matrix = _matrix_with(tmp_path, edit)
    res = toolkit("bench", "--dry-run", "--matrix", str(matrix), cwd=tmp_path, timeout=60)
    assert res.returncode == 4, res.stderr[-2000:]
    assert "test cases" in res.stderr and "cut the axes" in res.stderr  # at load: before any case is listed


def test_tune_values_that_cross_to_millions_of_settings_are_bad_input(tmp_path):
    """`tune --values n_ubatch=1,...,3000 --values n_batch=1,...,3000` hung listing 9 x 10^6 settings
    (each checked against the list so far) before its first trial; 99999999999 went to llama-bench."""
    matrix = _matrix_with(tmp_path, lambda d: None)
    many = ",".join(map(str, range(1, 3001)))
    args = ["tune", "--matrix", str(matrix), "-i", "cpu", "--axis", "prefill", "--knob", "n_ubatch"]
    res = toolkit(*args, "--knob", "n_batch", "--values", f"n_ubatch={many}", "--values", f"n_batch={many}",
                  cwd=tmp_path, timeout=60)  # fmt: skip
    assert res.returncode == 4 and "9,000,000 settings" in res.stderr, res.stderr[-2000:]
    res = toolkit(*args, "--values", "n_ubatch=99999999999", cwd=tmp_path, timeout=60)
    assert res.returncode == 4 and "n_ubatch takes whole numbers from 1 to 1000000" in res.stderr, res.stderr


def test_a_counter_past_eighteen_digits_never_gives_a_number_twice(tmp_path):
    """results/.seq at 999999999999999998 (an edited record's seq rebuilt into it): the next import went
    past 10^18, whose 19 digits the counter (and the rebuild from the files) did not read, so the
    import after it rebuilt the counter at 999999999999999999 and gave 10^18 ... again: 12 records,
    6 numbers. Now every seq a record may hold is read; one past it is refused naming the counter."""
    import re

    results = tmp_path / "r"
    results.mkdir()
    (results / ".seq").write_text("999999999999999998\n")
    for label, name in (("x", "jsonl"), ("y", "csv")):
        res = toolkit(
            "import", "--results", str(results), "--label", label,
            str(DATA / f"llamabench-0c1e57098-cpu.{name}"), cwd=tmp_path,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
    seqs = [int(m) for f in results.glob("*/bench.jsonl") for m in re.findall(r'"seq":(\d+)', f.read_text())]
    assert len(seqs) == 12 and len(set(seqs)) == 12, sorted(seqs)
    (results / ".seq").write_text(f"{(1 << 63) - 2}\n")  # 2 md rows: one past the largest
    res = toolkit("import", "--results", str(results), "--label", "z", str(DATA / "llamabench-0c1e57098-cpu.md"),
                  cwd=tmp_path)  # fmt: skip
    assert res.returncode == 4 and "r/.seq: the sequence counter is at" in res.stderr, res.stderr


def test_an_import_waiting_for_another_says_so_and_goes_on(tmp_path):
    """The folder's lock held (as a running import holds it): the import waits, says why, then imports."""
    import fcntl

    results = tmp_path / "r"
    results.mkdir()
    fd = os.open(results, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "import", "--results", str(results), "--label", "x",
         str(DATA / "llamabench-0c1e57098-cpu.jsonl")],
        cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(3)
        assert proc.poll() is None and not list(results.glob("*/bench.jsonl"))
    finally:
        os.close(fd)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "waiting for another import into" in err, err
    assert len((next(results.glob("*/bench.jsonl"))).read_text().splitlines()) == 6
