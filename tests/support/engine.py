"""ONE fake engine for the runner tests, and the RunContexts bench hands each runner.

`FakeEngine` is toolkit.engine.api as a runner sees it through RunContext.engine, with no container
behind it (a mock of what cannot run here: no AMD GPU, and the llama-bench / vLLM / SGLang programs
are answered, not run). It records what it is asked (`runs`, `envs`, `execs`, `probes`, `removed`)
and answers each program's commands with real-shaped output: llama-bench rows built from
tests/data/llamabench-0c1e57098-cpu.jsonl, vLLM result files written by `out_writer` into the /out
mount, SGLang's from tests/data/sglang-0.5.15-*.jsonl. Command formatting (run_command,
exec_command) is the real engine module's.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from tests.support import probe_outputs
from tests.support.project import DATA
from toolkit.bench.runners import vllm as vr
from toolkit.bench.runners.base import BenchOptions, RunContext
from toolkit.core import registry as runners
from toolkit.engine import api as engine
from toolkit.host import devices
from toolkit.matrix.api import load_matrix
from toolkit.matrix.loading import parse_matrix
from toolkit.results.records import BuildRecord, ResultStore

ROOT = Path(__file__).resolve().parents[2]
ROW = json.loads((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
IMAGE_ENV = ["PATH=/opt/llama/bin:/usr/bin:/bin", "LD_LIBRARY_PATH=/opt/llama/lib", "OMP_PROC_BIND=false"]
ONE_BATCH = [json.loads(x) for x in (DATA / "sglang-0.5.15-one-batch.jsonl").read_text().splitlines()]
SERVING = [x for x in (DATA / "sglang-0.5.15-serving.jsonl").read_text().splitlines() if x.strip()]

VLLM_LOG = """\
INFO 11-29 17:01:02 [__init__.py:216] Automatically detected platform rocm.
INFO 11-29 17:01:09 [scheduler.py:225] Chunked prefill is enabled with max_num_batched_tokens=8192.
(EngineCore_DP0 pid=77) INFO 11-29 17:01:15 [rocm.py:321] Using Triton Attention backend.
(EngineCore_DP0 pid=77) WARNING 11-29 17:01:40 [fused_moe.py:1088] Using default MoE config. Performance might be \
sub-optimal! Config file not found at /x/configs/E=128,N=768,device_name=AMD_Radeon_AI_PRO_R9700.json
(EngineCore_DP0 pid=77) INFO 11-29 17:01:45 [kv_cache_utils.py:1087] GPU KV cache size: 123,456 tokens
"""
# the SGLang server's ServerArgs line (srt/entrypoints/engine.py: logger.info(f"{server_args=}")), abridged
SGLANG_LOG = (
    "[2026-11-30 00:00:01] server_args=ServerArgs(model_path='/models/m', tp_size=1, "
    "attention_backend='triton', decode_attention_backend=None, prefill_attention_backend=None, "
    "sampling_backend='pytorch', mm_attention_backend=None)\n"
)


class FakeContainer:
    def __init__(self, spec):
        self.spec = spec
        self.alive = True


def _arg(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def row_timing(argv: list[str]) -> dict[str, Any]:
    """The timing fields of a llama-bench row for command `argv`, as llama-bench writes them: one
    samples_ns per repetition of `-r` (5 without it; the captured ROW's two cycled), their mean and
    stddev, and the test's time now (a record is held to the repetitions its command asked and to its
    run's start)."""
    reps = int(_arg(argv, "-r")) if "-r" in argv else 5
    ns = [ROW["samples_ns"][i % len(ROW["samples_ns"])] for i in range(reps)]
    return {
        "samples_ns": ns,
        "avg_ns": int(statistics.mean(ns)),
        "stddev_ns": int(statistics.stdev(ns)) if reps > 1 else 0,
        "test_time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


class FakeEngine:
    """The engine with no container (module doc). `out_writer(path, argv) -> exit code` writes a vLLM
    result file; `ready_after`: the health poll that first answers ready; `short`: SGLang's served
    requests generate fewer tokens than asked; `probe_out`: the GPU-path probe's answer (constructed:
    no AMD GPU here), by default the vLLM one."""

    run_command = staticmethod(engine.run_command)
    exec_command = staticmethod(engine.exec_command)
    EngineLost = engine.EngineLost
    Interrupted = engine.Interrupted
    probe_out = probe_outputs.VLLM_ROCM_OK

    def __init__(
        self,
        out_writer: Callable[[Path, list[str]], int] | None = None,
        ready_after: int = 1,
        *,
        short: bool = False,
    ):
        self.out_writer = out_writer
        self.ready_after = ready_after
        self.short = short
        self.health_calls = 0
        self.runs: list[engine.RunSpec] = []  # every container's spec: run to completion or started
        self.ran: list[list[str]] = []  # the commands of those run to completion (not probes)
        self.envs: list[dict[str, str]] = []
        self.execs: list[list[str]] = []
        self.probes: list[engine.RunSpec] = []
        self.removed = 0
        self.volumes: list[str] = []

    @staticmethod
    def out_dir(spec) -> Path:
        return Path(next(m.source for m in spec.mounts if m.target == "/out"))

    def volume_exists(self, name):
        return name in self.volumes

    def ensure_volume(self, name, labels=None):
        self.volumes.append(name)
        return name

    def inspect_image(self, ref):
        return engine.ImageInfo(id=ref, size=1, labels={}, repo_digests=[], tags=[], env=list(IMAGE_ENV))

    def run_container(self, spec, timeout=None, on_stdout=None, on_stderr=None, **_):
        argv = spec.command
        if argv[:2] == ["python3", "-c"]:
            self.probes.append(spec)
            return engine.RunOutcome(0, self.probe_out, "", 2.0)
        self.runs.append(spec)
        self.ran.append(argv)
        self.envs.append(dict(spec.environment))
        if "--output-json" in argv:  # vllm bench latency
            code = self.out_writer(self.out_dir(spec) / Path(_arg(argv, "--output-json")).name, argv)
            return engine.RunOutcome(code, "", VLLM_LOG + "Avg latency: ...\n", 20.0)
        if "--result-filename" in argv:  # sglang bench_one_batch
            return self._one_batch(spec, argv)
        return self._llama_bench(argv, on_stdout)

    def _llama_bench(self, argv, on_stdout) -> engine.RunOutcome:
        """One row per -p value, shaped like the captured CPU row; each handed to on_stdout. As llama-bench
        writes it: one sample per repetition of `-r` (the captured row's two, cycled) and the test's time
        now (records are held to the repetitions their command asked and to their run's start)."""
        lines = []
        timing = row_timing(argv)
        ns_list = timing["samples_ns"]
        for p in _arg(argv, "-p").split(","):
            ts = [int(p) / (ns / 1e9) for ns in ns_list]
            row = {
                **ROW,
                **timing,
                "n_prompt": int(p),
                "n_gen": 0,
                "samples_ts": ts,
                "avg_ts": statistics.mean(ts),
            }
            row.update(
                {
                    k: int(_arg(argv, f))
                    for k, f in (("n_batch", "-b"), ("n_ubatch", "-ub"), ("n_gpu_layers", "-ngl"))
                }
            )
            row["stddev_ts"] = statistics.stdev(ts) if len(ts) > 1 else 0.0
            lines.append(json.dumps(row))
            if on_stdout:
                on_stdout(lines[-1])
        return engine.RunOutcome(0, "\n".join(lines) + "\n", "", 0.5)

    def _one_batch(self, spec, argv) -> engine.RunOutcome:
        n_in, n_out = int(_arg(argv, "--input-len")), int(_arg(argv, "--output-len"))
        src = dict(
            next((p for p in ONE_BATCH if (p["input_len"], p["output_len"]) == (n_in, n_out)), ONE_BATCH[0])
        )
        src.update(input_len=n_in, output_len=n_out)
        with (self.out_dir(spec) / _arg(argv, "--result-filename").removeprefix("/out/")).open("a") as fh:
            fh.write(json.dumps(src) + "\n")
        return engine.RunOutcome(0, "", "", 1.0)

    def start_container(self, spec):
        self.runs.append(spec)
        self.server = spec
        return FakeContainer(spec)

    def exec_in(self, container, command, timeout=None):
        text = " ".join(command)
        if "sglang.benchmark.serving" in text:
            return self._serving(command)
        if "--result-filename" in command:  # vllm bench serve
            self.execs.append(command)
            code = self.out_writer(self.out_dir(container.spec) / _arg(command, "--result-filename"), command)
            return engine.RunOutcome(code, "bench output", "", 3.0)
        self.health_calls += 1  # a health poll
        return engine.RunOutcome(0 if self.health_calls >= self.ready_after else 1, "", "", 0.1)

    def _serving(self, command) -> engine.RunOutcome:
        self.execs.append(command)
        c = int(_arg(command, "--max-concurrency"))
        line = json.loads(SERVING[0] if c == 1 else SERVING[1])
        line["max_concurrency"] = c
        if self.short:
            line["total_output_tokens"], line["output_lens"] = 32, [1] * len(line.get("output_lens") or [])
        out = _arg(command, "--output-file").removeprefix("/out/")
        (self.out_dir(self.server) / out).write_text(json.dumps(line) + "\n")
        return engine.RunOutcome(0, "", "", 1.0)

    def container_logs(self, container):
        return "", SGLANG_LOG if "sglang" in " ".join(container.spec.command) else VLLM_LOG

    def container_state(self, container):
        return {"Running": True, "ExitCode": 0}

    def remove_container(self, container):
        self.removed += 1


def _build(image: str, backend: str, digest_char: str, template: str, **labels) -> BuildRecord:
    return BuildRecord(
        image=image,
        ref=f"toolkit/{image}:x",
        digest="sha256:" + digest_char * 64,
        backend=backend,
        template=template,
        template_hash="t",
        created="2026-12-01T00:00:00+00:00",
        labels=labels,
    )


def _project(proj: Path, axes: dict, *, replace_axes: bool = False) -> dict:
    """matrix.yaml of the repository with bench `axes` set (over the file's, or instead of them), and
    the templates, copied into `proj`; the data written. The models' depth sweeps are left out: a
    test's axes are what it measures (tests/test_depth.py adds one)."""
    shutil.copytree(ROOT / "Dockerfile.templates", proj / "Dockerfile.templates", dirs_exist_ok=True)
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["models"] = [{k: v for k, v in m.items() if k != "depth"} for m in data["models"]]
    data["bench"] = axes if replace_axes else {**data["bench"], **axes}
    proj.mkdir(parents=True, exist_ok=True)
    (proj / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return data


def _ctx(lm, spec, build, model, store, profile: str, host: dict, fake, **opts) -> RunContext:
    return RunContext(
        lm,
        spec,
        build,
        model,
        store,
        BenchOptions(**opts),
        devices.DeviceProfile.example(profile),
        host,
        lambda *a, **k: None,
        engine=fake,
    )


def llama_ctx(tmp_path: Path, fake: FakeEngine, env_axis: dict) -> RunContext:
    """The RunContext bench hands the llama-bench runner for the CPU image and the tiny model: two
    prompt lengths, one micro-batch, 2 repetitions, the env axis `env_axis`, no telemetry."""
    proj = tmp_path / "proj"
    axes = {"n_prompt": [64, 128], "n_gen": [0], "n_ubatch": [64], "n_batch": [512], "n_gpu_layers": [0]}
    _project(proj, {**axes, "repetitions": 2, "env": env_axis}, replace_axes=True)
    lm = load_matrix(proj / "matrix.yaml")
    spec = lm.m.image("cpu")
    model = next(m for m in lm.m.models if m.name == "tiny-qwen3moe")
    build = _build("cpu", "cpu", "c", spec.template)
    store = ResultStore(proj / "results")
    return _ctx(lm, spec, build, model, store, "cpu", {}, fake, run_id="run-env", telemetry=False)


def vllm_matrix(tmp_path: Path, model_config: dict | None = None, **vllm):
    """The repository's matrix with a tiny `vllm:` block (overridden by `vllm`) and a stand-in HF
    checkpoint `tiny-hf` (config.json `model_config`) in `tmp_path`."""
    data = _project(tmp_path, {"n_prompt": [128, 512], "n_gen": [32]})
    data["vllm"] = {
        "concurrency": [1, 4],
        "num_prompts_per_level": 2,
        "num_iters": 3,
        "num_iters_warmup": 1,
        **vllm,
    }
    data["models"].append({"name": "tiny-hf", "path": "models/tiny-hf", "format": "hf", "runners": ["vllm"]})
    (tmp_path / "models" / "tiny-hf").mkdir(parents=True)
    (tmp_path / "models" / "tiny-hf" / "config.json").write_text(
        json.dumps(model_config or {"model_type": "qwen3_moe"})
    )
    p = tmp_path / "matrix.yaml"
    p.write_text(yaml.safe_dump(data))
    return parse_matrix(data, p)


def vllm_ctx(lm, build, store, fake, **opts) -> RunContext:
    """The RunContext bench hands the vLLM runner (the last model, an example R9700), `fake` its engine."""
    return _ctx(lm, lm.m.image("vllm"), build, lm.m.models[-1], store, "rocm", {"host": "x"}, fake, **opts)


def latency_json(seconds: float) -> str:
    return json.dumps(
        {"avg_latency": seconds, "latencies": [seconds] * 3, "percentiles": {"50": seconds, "99": seconds}}
    )


def good_writer(path: Path, argv: list[str]) -> int:
    """Prefill latency grows with input length, decode with output length; serve reports 61.2 tok/s."""
    if "latency" in argv:
        i, o = int(_arg(argv, "--input-len")), int(_arg(argv, "--output-len"))
        path.write_text(latency_json(i / 1000 + (o - 1) * 0.02))
    else:  # every request gave the tokens asked for (--ignore-eos), as a working server does
        data = json.loads((DATA / "vllm-0.16.0-serve.json").read_text())
        n, out = int(_arg(argv, "--num-prompts")), int(_arg(argv, "--random-output-len"))
        data.update(
            max_concurrency=int(_arg(argv, "--max-concurrency")),
            num_prompts=n,
            completed=n,
            # the prompts asked (a record is held to them since round 33: served_settings_problem)
            total_input_tokens=n * int(_arg(argv, "--random-input-len")),
            total_output_tokens=n * out,
            duration=n * out / data["output_throughput"],  # vLLM's output_throughput: tokens / duration
        )
        path.write_text(json.dumps(data))
    return 0


def run_vllm(
    tmp_path, monkeypatch, writer, fake: FakeEngine | None = None, model_config: dict | None = None, **vllm
):
    """The vLLM runner over vllm_matrix with `fake` (default: a FakeEngine writing with `writer`):
    (outcomes, records, fake, store)."""
    lm = vllm_matrix(tmp_path, model_config, **vllm)
    fake = fake or FakeEngine(writer)
    monkeypatch.setattr(vr, "HEALTH_POLL_S", 0.0)  # a constant, not the engine: no wait between polls
    store = ResultStore(tmp_path / "results")
    build = _build(
        "vllm", "rocm", "ab"[0], "vllm-rocm.Dockerfile.j2", **{"org.toolkit.vllm-version": "0.16.0"}
    )
    build = build.model_copy(
        update={"digest": "sha256:" + "ab" * 32, "ref": "toolkit/vllm:latest", "created": "now"}
    )
    outs = runners.get("vllm").run(vllm_ctx(lm, build, store, fake, run_id="r1"))
    return outs, store.results(), fake, store


def sglang_ctx(proj: Path, fake: FakeEngine, **axes) -> RunContext:
    """The RunContext bench hands the SGLang runner: the project's matrix in `proj` (bench axes set to one
    pp, one tg, one micro-batch, 3 repetitions, overridden by `axes`), a stand-in checkpoint, `fake` engine."""
    _project(proj, {"n_prompt": [512], "n_gen": [128], "n_ubatch": [512], "repetitions": 3, **axes})
    lm = load_matrix(proj / "matrix.yaml")
    model = next(m for m in lm.m.models if "sglang" in m.runners)
    folder = lm.resolve(model.path)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3MoeForCausalLM"]}))
    spec = lm.m.image("sglang")
    build = _build("sglang", "rocm", "5", spec.template)
    if "probe_out" not in vars(fake):  # a test may have set the probe's answer
        fake.probe_out = probe_outputs.SGLANG_ROCM_OK
    return _ctx(lm, spec, build, model, ResultStore(proj / "results"), "rocm", {}, fake, run_id="run-sg")


@contextlib.contextmanager
def socket_engine(tmp_path: Path, status: int | str = 400) -> Iterator[tuple[str, list[int | str]]]:
    """A stand-in Docker engine on a Unix socket, for tests at a level with no engine: answers /_ping
    and /version as dockerd does, and every other request with `answer[0]` (an HTTP status: 200 gives
    `{"ID": "stand-in"}`, another the engine's `{"message": ...}`; or "drop": the connection closed
    unanswered). Yields (DOCKER_HOST, answer); `status` is answer[0] to begin with."""
    import socketserver
    import threading
    from http.server import BaseHTTPRequestHandler

    answer: list[int | str] = [status]

    class Engine(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # unix-socket peers have no address to log
            pass

        def do_GET(self) -> None:
            if self.path.endswith("/_ping"):
                return self._send(200, b"OK", "text/plain")
            if self.path.endswith("/version"):
                version = {"ApiVersion": "1.45", "MinAPIVersion": "1.24", "Version": "26.1.0"}
                return self._send(200, json.dumps(version).encode())
            if answer[0] == "drop":
                self.close_connection = True
                return
            code = int(answer[0])
            body = {"ID": "stand-in"} if code < 400 else {"message": f"stand-in engine refuses {self.path}"}
            self._send(code, json.dumps(body).encode())

        do_POST = do_DELETE = do_GET

        def _send(self, code: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    sock = tmp_path / "engine.sock"
    server = socketserver.ThreadingUnixStreamServer(str(sock), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"unix://{sock}", answer
    finally:
        server.shutdown()
        server.server_close()
