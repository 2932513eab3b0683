"""The toolkit's own CPU per bench (issue 32 item 16): loading a matrix imports what its blocks need.
Each check loads the matrix in a fresh interpreter and reads `sys.modules` at its end, so an import
that comes back at the top of a module the path loads fails here, whatever the machine's speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.core import registry
from toolkit.core.errors import BadInput
from toolkit.matrix.loading import load_matrix
from toolkit.models.tiny import ensure_model_file

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.CompletedProcess:
    """`code` run by a fresh interpreter in the project root (its stdout, text); asserts it exited 0."""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


def _modules_after_load(matrix: Path) -> tuple[list[str], dict]:
    """(every module loaded, {block: its settings dumped}) after load_matrix(matrix) in a fresh
    interpreter; the settings are asked for after the modules are listed."""
    code = (
        "import json, sys\n"
        "from toolkit.matrix.loading import load_matrix\n"
        f"lm = load_matrix({str(matrix)!r})\n"
        "mods = sorted(sys.modules)\n"
        "blocks = {k: lm.m.settings(k).model_dump(mode='json') for k in ('vllm', 'sglang')}\n"
        "print(json.dumps([mods, blocks]))"
    )
    p = _python(code)
    mods, blocks = json.loads(p.stdout.strip().splitlines()[-1])
    return mods, blocks


def _without_runner_blocks(tmp_path: Path) -> Path:
    """The project's matrix.yaml with its `vllm:` block (and any `sglang:` block) left out."""
    lines, skip = [], False
    for line in (ROOT / "matrix.yaml").read_text().splitlines(keepends=True):
        if line[:1].strip() and not line.startswith("#"):
            skip = line.split(":", 1)[0] in registry.SETTINGS
        if not skip:
            lines.append(line)
    out = tmp_path / "matrix.yaml"
    out.write_text("".join(lines))
    (tmp_path / "Dockerfile.templates").symlink_to(ROOT / "Dockerfile.templates")
    return out


def test_a_matrix_loads_the_settings_model_of_a_written_runner_block_only(tmp_path):
    """Reproducer: every matrix load imported and built the vLLM and SGLang settings models, with or
    without their blocks (~0.03 CPU s for SGLang's on the project's matrix, which writes only `vllm:`).
    Now a block not written is not validated at load; `settings(key)` gives the same defaults."""
    from toolkit.runtimes.sglang.args import SglangSettings
    from toolkit.runtimes.vllm.settings import VllmSettings

    mods, blocks = _modules_after_load(ROOT / "matrix.yaml")
    assert "toolkit.runtimes.vllm.settings" in mods  # the project's matrix writes `vllm:`
    assert "toolkit.runtimes.sglang.args" not in mods
    assert blocks["sglang"] == SglangSettings().model_dump(mode="json")
    assert blocks["vllm"] == load_matrix(ROOT / "matrix.yaml").m.settings("vllm").model_dump(mode="json")

    mods, blocks = _modules_after_load(_without_runner_blocks(tmp_path))
    assert "toolkit.runtimes.vllm.settings" not in mods and "toolkit.runtimes.sglang.args" not in mods
    assert blocks == {
        "vllm": VllmSettings().model_dump(mode="json"),
        "sglang": SglangSettings().model_dump(mode="json"),
    }
    assert "difflib" not in mods  # only the error messages' suggestions need it


def test_a_written_block_is_still_validated_and_an_empty_one_is_its_defaults(tmp_path):
    """A written block is validated at load as before (an unknown key is bad input naming it); a key
    written with no value (`sglang:`) is that runner's defaults; an unregistered block is a KeyError."""
    from toolkit.runtimes.sglang.args import SglangSettings

    path = _without_runner_blocks(tmp_path)
    base = path.read_text()
    path.write_text(base + "sglang:\n  no_such_knob: 1\n")
    with pytest.raises(BadInput, match=r"sglang\.no_such_knob"):
        load_matrix(path)
    path.write_text(base + "sglang:\n")
    lm = load_matrix(path)
    assert lm.m.runner_settings["sglang"] == SglangSettings() == lm.m.settings("sglang")
    with pytest.raises(KeyError):
        lm.m.settings("nosuch")


class _CountingClient:
    """A docker SDK client as engine_id / engine_info use it, counting its `docker info` requests."""

    def __init__(self, engine_id: str):
        self.id, self.infos = engine_id, 0

    def info(self) -> dict:
        self.infos += 1
        return {"ID": self.id, "SecurityOptions": ["name=seccomp,profile=x"], "Driver": "overlay2"}

    def version(self) -> dict:
        return {"Version": "26.1.5", "ApiVersion": "1.45", "Os": "linux", "KernelVersion": "6.1.0"}


def test_docker_info_is_asked_once_per_client(monkeypatch):
    """Reproducer: a bench asked the engine for `docker info` three times (engine_id for its build's
    engine and for its guards, engine_info for its records' host facts), ~13 ms of wall each here.
    Now once per client; another client (another engine address) is asked for its own."""
    from toolkit.engine import choice

    monkeypatch.setenv("TOOLKIT_ENGINE", "docker")
    first, other = _CountingClient("A" * 12), _CountingClient("B" * 12)
    current = [first]
    monkeypatch.setattr(choice, "client", lambda: current[0])
    assert choice.engine_id() == choice.engine_id() == "A" * 12
    facts = choice.engine_info(buildx=False)
    assert facts["server_version"] == "26.1.5" and facts["SecurityOptions"] == ["name=seccomp,profile=x"]
    assert first.infos == 1
    current[0] = other
    assert choice.engine_id() == "B" * 12 and other.infos == 1


@pytest.mark.parametrize("block", ["[]", "0", "false", "''", "[1]", "x"])
def test_a_runner_block_that_is_not_a_mapping_is_refused_even_when_empty_or_false(tmp_path, block):
    """Breaker round 14: `vllm: []`, `vllm: 0`, `vllm: false` and `vllm: ''` loaded as the defaults
    (`value or {}`) where `vllm: [1]` was refused; only a key with no value (`vllm:`) is the defaults."""
    path = _without_runner_blocks(tmp_path)
    path.write_text(path.read_text() + f"vllm: {block}\n")
    with pytest.raises(
        BadInput,
        match=r"matrix.yaml: line \d+, column \d+: vllm: .* -> write `vllm:` as a mapping of its settings",
    ):
        load_matrix(path)


def _collections_of_a_dry_bench(tmp_path: Path) -> dict:
    """A `toolkit bench --dry-run -i cpu` of the project's matrix in a fresh interpreter (results in an
    empty folder; no engine is needed): the garbage collections that ran during it by generation
    (gc.callbacks, from main() on), whether the collector is on at its end, what it froze."""
    code = (
        "import gc, json, sys\n"
        "seen = []\n"
        "gc.callbacks.append(lambda phase, info: seen.append(info['generation']) if phase == 'stop' else None)\n"
        "from toolkit.cli.main import main\n"
        f"sys.argv = ['toolkit', 'bench', '--dry-run', '--matrix', {str(ROOT / 'matrix.yaml')!r}, '-i', 'cpu',"
        f" '--results', {str(tmp_path / 'results')!r}]\n"
        "n0 = len(seen)\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "print(json.dumps({'code': code, 'gens': [seen[n0:].count(g) for g in range(3)], "
        "'enabled': gc.isenabled(), 'frozen': gc.get_freeze_count()}))"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_bench_starts_up_without_the_garbage_collector_walking_what_it_loads(tmp_path):
    """Reproducer: the start-up of a bench (~650 modules, pydantic's models) ran ~80 young, ~8 middle
    and, in a real run, full collections over objects that all live to the end (0.03-0.1 CPU s of
    the toolkit's ~0.5 a bench; 82/8/0 here for a dry run), and the interpreter's exit walked them
    all once more (~0.06 s). Now the collector is off until the run starts and what is alive then is
    frozen: a handful of young collections, none full; it is on again afterwards."""
    got = _collections_of_a_dry_bench(tmp_path)
    assert got["code"] == 0
    assert sum(got["gens"]) <= 5 and got["gens"][2] == 0, got
    assert got["enabled"] and got["frozen"] > 10_000, got


def test_the_collector_is_paused_until_started_and_never_left_off():
    """startup.paused(): off inside, on again at started() (what is alive frozen) or at the block's
    end, even when it raises; a collector already off stays off, with nothing frozen."""
    import gc

    from toolkit.core import startup

    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        with startup.paused():
            assert not gc.isenabled()
            startup.started()
            assert gc.isenabled() and gc.get_freeze_count() >= frozen
            startup.started()  # twice: nothing more
            assert gc.isenabled()
        with pytest.raises(RuntimeError), startup.paused():
            assert not gc.isenabled()
            raise RuntimeError("a start-up that fails")
        assert gc.isenabled()
        gc.disable()
        with startup.paused():
            startup.started()
            assert not gc.isenabled()  # not ours to turn on
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()  # this test process keeps collecting what it froze


def test_what_the_start_up_hands_on_runs_at_started_once_and_never_at_a_failed_end():
    """startup.paused(then=...): `then` runs at the first started() inside the block (bench: the end's
    imports begin when the first container is about to start, not while the start-up still works on
    the one core the GIL gives it), once; a block that ends (or fails) before started() never runs it."""
    import gc

    from toolkit.core import startup

    ran: list[str] = []
    try:
        with startup.paused(then=lambda: ran.append("then")):
            assert ran == []
            startup.started()
            assert ran == ["then"]
            startup.started()
        assert ran == ["then"]
        with pytest.raises(RuntimeError), startup.paused(then=lambda: ran.append("failed")):
            raise RuntimeError("a start-up that fails")
        with startup.paused(then=lambda: ran.append("ended")):
            pass
        startup.started()  # after the block: nothing left to run
        assert ran == ["then"]
    finally:
        gc.enable()
        gc.unfreeze()


def test_reading_the_run_back_imports_nothing_after_the_last_container(tmp_path):
    """Reproducer: after the last container, bench read its records back through the query index, which
    validates each line whole (records.bench_record) and so imported record_check and what it imports
    (the SGLang and vLLM checks, pydantic models built at import) and datetime.strptime's module: 20-30
    ms of wall after the last container here. Now the thread started before the first container
    imports them: reading a stored run back imports no module. Fresh interpreter: sys.modules before
    and after."""
    from tests.support.records import make_record
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    rec = make_record("cpu", "cpu", n=128, avg=90.0, sd=0.5)
    store.add_result(rec)
    code = (
        "import sys, threading\n"
        "from toolkit.cli import bench\n"
        "from toolkit.results import index\n"
        "from toolkit.results.records import ResultStore\n"
        # (before: TABLES_MODULES, the report's code and tabulate)
        "bench._import_meanwhile(*getattr(bench, 'AFTER_RUN_MODULES', ['toolkit.analysis.report', 'tabulate']))\n"
        "for t in threading.enumerate():\n"
        "    if t is not threading.current_thread():\n"
        "        t.join(60)\n"
        f"store = ResultStore({str(store.root)!r})\n"
        "before = set(sys.modules)\n"
        f"assert len(index.load(index.heads(store, runs=[{rec.run_id!r}]))) == 1\n"
        "print(sorted(set(sys.modules) - before))"
    )
    p = _python(code)
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout


@pytest.fixture
def unix_engine(tmp_path):
    """A stand-in Docker engine on a Unix socket that answers every request (tests.support.engine
    .socket_engine). Yields its DOCKER_HOST."""
    from tests.support.engine import socket_engine

    with socket_engine(tmp_path, 200) as (host, _):
        yield host


def test_a_unix_socket_client_does_not_read_proxy_settings_at_every_request(monkeypatch, unix_engine):
    """Reproducer: each of a bench's ~50 engine requests looked the proxy settings up in os.environ
    (requests' trust_env; ~0.1 ms of CPU a request here), though proxies do not apply to a Unix
    socket (the SDK's adapter ignores them). Now a Unix-socket client does not look; it still answers,
    with a proxy set in the environment as without."""
    import requests.sessions

    from toolkit.engine import choice

    monkeypatch.setenv("TOOLKIT_ENGINE", "docker")
    monkeypatch.setenv("DOCKER_HOST", unix_engine)
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr(choice, "_CLIENTS", {})
    looked = []
    real = requests.sessions.get_environ_proxies
    monkeypatch.setattr(
        requests.sessions, "get_environ_proxies", lambda *a, **k: looked.append(a) or real(*a, **k)
    )
    c = choice.client()  # (the SDK asks /version while it is made, before it can be told)
    looked.clear()
    assert choice.client() is c and c.ping() and c.api.info()["ID"] == "stand-in"
    assert looked == []


def test_the_closing_tables_import_nothing_after_the_last_container():
    """Reproducer: bench imported the report's code on a thread while the containers ran, but tabulate
    (12-35 ms of CPU and wall here) only when the tables were drawn, after the last container: wall
    time outside the containers. Now the thread imports it too: drawing the tables (markdown for a
    pipe, text for a terminal) imports no module. Fresh interpreter: sys.modules before and after."""
    code = (
        "import sys, threading\n"
        "from toolkit.cli import bench\n"
        "from tests.support.records import make_record\n"
        # (before: the thread imported the report alone, bench._import_meanwhile("toolkit.analysis.report"))
        "bench._import_meanwhile(*getattr(bench, 'AFTER_RUN_MODULES', ['toolkit.analysis.report']))\n"
        "for t in threading.enumerate():\n"
        "    if t is not threading.current_thread():\n"
        "        t.join(60)\n"
        "from toolkit.analysis import report\n"
        "recs = [make_record('cpu', 'cpu', n=128, avg=90.0, sd=0.5), make_record('cpu', 'cpu', p=512, avg=3000.0, sd=5.0)]\n"
        "before = set(sys.modules)\n"
        "for fmt in ('github', 'text'):\n"
        "    assert 'tg128' in report.render(recs, fmt, width=120)\n"
        "print(sorted(set(sys.modules) - before))"
    )
    p = _python(code)
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout


def test_the_plan_estimate_does_not_compute_clock_skew_over_every_record(tmp_path, monkeypatch):
    """Reproducer: the plan line's estimate (llama_depth.measured_seconds, twice a bench with a depth
    sweep; base.newest_here, which reads the newest records for the depth fill and base.seconds_before for the other runners)
    asked index.select with its default skew=True: ResultIndex.skewed, a pass over every record of the
    folder, set clock_skew, which no estimate reads (they order by write_order): 136 -> 110 ms of CPU
    a call at 20,000 stored records of the image. Now they ask skew=False: the same estimate."""
    from types import SimpleNamespace

    from tests.support.records import make_record
    from toolkit.bench.runners import base, llama_depth
    from toolkit.results import identity
    from toolkit.results.index_sqlite import ResultIndex
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    for run, avg in (("run-1", 256.0), ("run-2", 512.0)):  # the newer run's record is the estimate's
        store.add_result(
            make_record("cpu", "cpu", p=512, ub=512, avg=avg, model="tiny-qwen3moe", host={}, run_id=run)
        )
    bench = load_matrix(ROOT / "matrix.yaml").m.bench
    case = {**identity.test_fields(store.results()[0]), "n_layers": None}
    ctx = SimpleNamespace(
        store=store,
        lm=SimpleNamespace(m=SimpleNamespace(bench=bench)),
        spec=SimpleNamespace(name="cpu", runner="llama-bench"),
        model=SimpleNamespace(name="tiny-qwen3moe", sha256="ab" * 32),  # make_record's
    )
    expected = llama_depth.measured_seconds(store, "cpu", "ab" * 32, bench, [case])
    assert expected == (1, pytest.approx(bench.repetitions * 1.0))  # 512 tokens at 512 tok/s

    def skewed(self, files):
        raise AssertionError("clock skew computed over every record for the plan's estimate")

    monkeypatch.setattr(ResultIndex, "skewed", skewed)
    assert llama_depth.measured_seconds(store, "cpu", "ab" * 32, bench, [case]) == expected
    newest = base.newest_here(store, "cpu", "ab" * 32, lambda r: (identity.test_key(r), r))
    assert [r.avg_ts for r in newest.values()] == [512.0]
    base.seconds_before(ctx, lambda r: r.n_prompt)


def test_reading_a_models_gguf_header_imports_no_numpy(tmp_path):
    """Reproducer: the bench reads its model's GGUF header (the KV shape of the depth fit, the roofline)
    through gguf_meta, which took gguf's tensor-type table with `from gguf.constants import ...`: that
    imports the gguf package, whose __init__ imports numpy (~120 ms of CPU, a quarter of a bench's own).
    Now the table comes from gguf's constants.py alone, and the summary is the same as with the package."""
    model = str(ensure_model_file(tmp_path / "tiny-qwen3moe.gguf", "tiny-qwen3moe"))
    code = (
        "import json, sys\n"
        "from toolkit.models import gguf_meta\n"
        f"s = gguf_meta.read_summary({model!r})\n"
        "alone = [list(t) for t in s.tensors]\n"
        "assert 'numpy' not in sys.modules and 'gguf' not in sys.modules, sorted(sys.modules)\n"
        "import gguf.constants\n"
        "gguf_meta._gguf_constants.cache_clear()\n"
        "assert gguf_meta._gguf_constants() is gguf.constants\n"
        "gguf_meta._summary.cache_clear()\n"
        f"again = gguf_meta.read_summary({model!r})\n"
        "print(json.dumps([alone, [list(t) for t in again.tensors]]))"
    )
    p = _python(code)
    alone, with_package = json.loads(p.stdout.strip().splitlines()[-1])
    assert alone and alone == with_package


def test_the_checkout_state_costs_one_git_process(monkeypatch, tmp_path):
    """Reproducer: every bench's host facts ran `git rev-parse HEAD` and then `git status` (two git
    processes, ~9 ms of CPU and wall before the first container here); one `git status --porcelain=v2
    --branch` names the commit too. Where that status fails, `rev-parse` still names the commit and
    the state is "unknown", never clean."""
    from toolkit.host import info

    real, ran = info._git, []
    monkeypatch.setattr(info, "_git", lambda *a: ran.append(a[:3]) or real(*a))
    got = info.toolkit_source()
    if "commit" not in got:
        pytest.skip("not a git checkout")
    head = subprocess.run(
        ["git", "-C", str(info.TOOLKIT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    assert got["commit"] == head.stdout.strip() and len(ran) == 1, ran
    status = subprocess.CompletedProcess([], 128, "", "fatal: index file corrupt")
    monkeypatch.setattr(info, "_git", lambda *a: status if "status" in a else real(*a))
    assert info.toolkit_source() == {**got, "dirty": "unknown"}
