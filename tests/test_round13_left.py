"""Round 13, the items left (docs/reliability-log.md section 16, "Round 13"): a hybrid model's per-layer
KV heads, finite_number's near-copies and its overflow, ... Each test fails on the code before its
fix; files live under tmp_path."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolkit.matrix.depth import WIDE_DEPTHS, KvShape, fit_depths
from toolkit.models import gguf_meta

# ---------------------------------------------------------------- 1. a hybrid model's KV cache


def _hybrid(
    path: Path, kv: int | list[int], *, layers: int, heads: int | list[int] = 32, **lengths: int
) -> str:
    import gguf

    w = gguf.GGUFWriter(str(path), "granitehybrid")
    w.add_block_count(layers)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_embedding_length(4096)
    if "key" in lengths:
        w.add_key_length(lengths["key"])
    if "value" in lengths:
        w.add_value_length(lengths["value"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_a_hybrid_models_kv_cache_counts_only_its_attention_layers(tmp_path: Path) -> None:
    """40 layers, 4 of them attention with 8 KV heads of 128, the rest recurrent (0 KV heads), the
    array starting with 0: KV bytes per token = 4 x 8 x (128 + 128) x 2 in f16 (llama.cpp
    n_embd_k_gqa(il) per layer), not 40 layers x 32 heads (the first item 0 read as "absent",
    head_count taken): 40x too much, and the depth sweep left out depths that fit."""
    kv = [0] * 40
    for il in (9, 19, 29, 39):
        kv[il] = 8
    shape = gguf_meta.gguf_kv_shape(_hybrid(tmp_path / "h.gguf", kv, layers=40, key=128, value=128))
    assert shape == KvShape(4, 8, 128, 128)
    assert shape.bytes_per_token() == 4 * 8 * 256 * 2
    gib = 1 << 30
    kept, skipped = fit_depths(
        list(WIDE_DEPTHS),
        tokens=512,
        kv_per_token=shape.bytes_per_token(),
        model_bytes=8 * gib,
        gpu_bytes=12 * gib,
    )
    assert kept == list(WIDE_DEPTHS) and skipped == []


def test_unequal_per_layer_kv_heads_are_summed(tmp_path: Path) -> None:
    """OpenELM-style per-layer head counts (3, 4, 4, 5 KV heads): the sum (16) sizes the cache; no
    key_length: embedding / head_count of layer 0 (llama.cpp's default), for the value too."""
    path = _hybrid(tmp_path / "e.gguf", [3, 4, 4, 5], layers=4, heads=[16, 16, 20, 20])
    shape = gguf_meta.gguf_kv_shape(path)
    assert shape is not None and shape.n_layer * shape.n_head_kv == 16
    assert (shape.key_length, shape.value_length) == (256, 256)
    assert shape.bytes_per_token() == 16 * 512 * 2


@pytest.mark.parametrize(
    ("kv", "why"),
    [
        ([8, 8, 8], "an array of 3 items for 4 layers (llama.cpp refuses the file)"),
        ([0, 0, 0, 0], "no layer with KV (a recurrent model): no estimate, every depth kept"),
        (0, "0 KV heads in one number: no KV"),
        ([8, -8, 8, 8], "a negative count"),
    ],
)
def test_a_kv_head_array_that_sizes_no_cache_gives_no_shape(
    tmp_path: Path, kv: int | list[int], why: str
) -> None:
    assert gguf_meta.gguf_kv_shape(_hybrid(tmp_path / "x.gguf", kv, layers=4, key=128)) is None, why


def test_one_count_for_a_hostile_layer_count_is_not_expanded_per_layer(tmp_path: Path) -> None:
    """block_count 4e9 (a uint32) with one KV count: the shape says it (every depth then left out, as
    before), without a list of 4e9 per-layer items."""
    start = time.perf_counter()
    shape = gguf_meta.gguf_kv_shape(_hybrid(tmp_path / "big.gguf", 8, layers=4_000_000_000, key=128))
    assert shape == KvShape(4_000_000_000, 8, 128, 128) and time.perf_counter() - start < 2.0


def test_key_length_given_value_length_not_defaults_as_llama_cpp(tmp_path: Path) -> None:
    """llama.cpp's value head size defaults to embedding / head_count, not to the key length."""
    shape = gguf_meta.gguf_kv_shape(_hybrid(tmp_path / "k.gguf", 8, layers=2, key=192))
    assert shape == KvShape(2, 8, 192, 128)


# ---------------------------------------------------------------- 2. finite_number and its near-copies


BIG = 10**400  # a JSON integer (unbounded) beyond a float's range: float() raises OverflowError


def test_an_int_beyond_a_floats_range_is_no_finite_number() -> None:
    from toolkit.core.stats import finite_number

    assert finite_number(BIG) is None and finite_number(-BIG) is None
    assert finite_number(10**300) == 1e300 and finite_number(True) is None


def test_a_canary_figure_beyond_a_floats_range_is_a_contradiction_not_an_error() -> None:
    from toolkit.results import canary_check

    why = canary_check.canary_problem({"status": "ok", "ppl": BIG, "bound_ln": canary_check.BOUND_LN})
    assert why is not None and "ppl" in why


def test_a_vllm_result_figure_beyond_a_floats_range_is_no_number_not_an_error() -> None:
    from toolkit.runtimes.vllm import output

    assert output.parse_serve({"duration": BIG, "completed": 4})["duration"] is None
    assert "latencies[1]" in (output.latency_problem({"latencies": [0.5, BIG]}) or "")
    assert "elapsed_time" in (output.throughput_problem({"elapsed_time": BIG}, 16) or "")
    # an infinity in the per-request output lengths (bare Infinity is JSON to json.loads): passed over
    assert output.parse_serve({"output_lens": [3, float("inf"), float("nan"), 5]})["output_lens"] == [3, 5]


def test_other_readers_of_a_stored_number_beyond_a_floats_range_say_none() -> None:
    """The same kind beside the near-copies: a stored record's raw model_size (not held to the
    figures: the roofline reads it) and a served record's raw output_throughput (the tok/s value)."""
    from types import SimpleNamespace

    from toolkit.results.identity import value
    from toolkit.runtimes.llama_bench.check import quantity

    assert quantity(BIG) is None and quantity(float("inf")) is None and quantity(17 * 2**30) == 17 * 2**30
    served = SimpleNamespace(avg_ts=None, axis="served", raw={"output_throughput": BIG})
    assert value(served) is None  # type: ignore[arg-type]


# ---------------------------------------------------------------- 4. a newcomer's build and bench output


def test_bench_says_each_skip_once_in_a_run_that_measured_nothing() -> None:
    """Each skipped image's line is printed as the run decides it (one line, its reason); the exit
    message then counts them rather than saying every reason again. With --json (no lines printed)
    it still names each reason."""
    from types import SimpleNamespace

    from toolkit.bench.runners.base import Outcome
    from toolkit.cli import bench
    from toolkit.core.errors import NothingDone

    reason = "cannot run on this host: no /dev/kfd (no AMD GPU driver (amdgpu/KFD) on this host)"
    outcomes = [Outcome("rocm", "-", "skipped", reason), Outcome("vllm", "-", "skipped", reason)]
    assert all("\n" not in o.line() for o in outcomes)
    store = SimpleNamespace(warnings=[])
    with pytest.raises(NothingDone) as said:
        bench._bench_verdict(None, store, outcomes, strict=False, said=True)
    assert str(said.value) == "nothing measured (all 2 skipped: their lines on stdout say why)"
    with pytest.raises(NothingDone) as json_run:
        bench._bench_verdict(None, store, outcomes, strict=False, said=False)
    assert str(json_run.value).count("no /dev/kfd") == 2


def test_a_builds_heartbeat_is_short_with_the_builds_time_and_its_estimate(monkeypatch) -> None:
    from toolkit.images import build_plan
    from toolkit.images.build_plan import BuildSteps

    clock = [1000.0]
    monkeypatch.setattr(build_plan.time, "monotonic", lambda: clock[0])
    out: list[str] = []
    steps = BuildSteps("cpu", out.append, full_build_s=1020.0)
    steps("#6 [build 3/5] RUN apt-get install -y cmake")
    steps("#6 1.0 Reading package lists...")
    clock[0] += 120
    steps("#6 120.0 Unpacking cmake")
    assert out[-1] == "   cpu | still running [build 3/5], 2 min (last full build 17 min)"
    steps("#6 DONE 121.0s")
    steps("#7 [build 4/5] RUN cmake --build /build -j2")
    steps("#7 1.0 [ 10%] Building C object a.o")
    clock[0] += 600
    steps("#7 600.0 [ 52%] Building C object b.o")
    assert out[-1] == "   cpu | still compiling 52%, 12 min (last full build 17 min)"
    status: list[str] = []
    steps = BuildSteps("cpu", lambda s: None, status=status.append, full_build_s=1020.0)
    steps("#7 [build 4/5] RUN cmake --build /build -j2")
    steps("#7 3.1 [ 45%] Building CXX object ggml.c.o")
    assert status[-1] == "cpu: [build 4/5] compiling 45% (last full build 17 min)"


def test_the_estimate_is_the_images_newest_build_of_every_step() -> None:
    from types import SimpleNamespace as B

    from toolkit.images.build_plan import full_build_seconds

    builds = [
        B(image="cpu", build_seconds=1020.0, cached_steps=0, steps=9),
        B(image="cpu", build_seconds=2.5, cached_steps=9, steps=9),  # all from cache: no estimate
        B(image="rocm", build_seconds=3000.0, cached_steps=0, steps=9),
        B(image="vulkan", build_seconds=9.0),  # a record from before step counts
    ]
    store = B(builds=lambda: builds)
    assert full_build_seconds(store, "cpu") == 1020.0
    assert full_build_seconds(store, "vulkan") is None and full_build_seconds(store, "sglang") is None


def test_a_finished_progress_bar_goes_away(monkeypatch) -> None:
    """bench's bars on a terminal: a finished (image, model) process's bar is removed (its outcome line
    says the rest), where it lingered at 100 % for the rest of the run."""
    import rich.progress

    from toolkit.cli import progress

    made: list[rich.progress.Progress] = []

    class Kept(rich.progress.Progress):
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(rich.progress, "Progress", Kept)
    events = progress.rich_progress(outcomes=False)
    try:
        events("start", image="cpu", model="m", total=4)
        events("start", image="vulkan", model="m", total=4)
        events("progress", image="cpu", model="m", done=3, total=4, phase="pp512")
        events("done", image="cpu", model="m", total=4)
        assert [t.description for t in made[0].tasks] == ["vulkan x m"]
    finally:
        events("close")


def test_doctor_says_the_cgroup_version_and_warns_for_podman_on_v1(tmp_path: Path) -> None:
    from toolkit.host.cgroup import cgroup_version, check_cgroup

    def mounts(text: str) -> Path:
        (tmp_path / "self").mkdir(exist_ok=True)
        (tmp_path / "self" / "mounts").write_text(text)
        return tmp_path

    v2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"
    v1 = "tmpfs /sys/fs/cgroup tmpfs ro,mode=755 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"
    hybrid = v1 + "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nsdelegate 0 0\n"
    assert cgroup_version(mounts(v2)) == "v2"
    assert cgroup_version(mounts(v1)) == "v1"
    assert cgroup_version(mounts(hybrid)) == "v1 hybrid"
    assert cgroup_version(mounts("proc /proc proc rw 0 0\n")) is None
    assert (
        cgroup_version(mounts("tmpfs /sys/fs/cgroup tmpfs ro,mode=755 0 0\n")) is None
    )  # round 18: no reading
    assert cgroup_version(tmp_path / "absent") is None
    podman = {"engine": "podman", "server_version": "5.4.2"}
    assert [(c.level, c.message.split(" (")[0]) for c in check_cgroup("v2", podman)] == [
        ("info", "cgroup v2")
    ]
    # what the version means is said (a newcomer found `cgroup v1 hybrid` unexplained)
    assert "systemd's hybrid layout" in check_cgroup("v1 hybrid", None)[0].message
    # a Docker host is not told what Podman 5 prints (a fresh-host run, round 19): only a Podman 5 host is
    docker = {"engine": "docker", "server_version": "26.1.5"}
    assert all("Podman 5" not in c.message for v in ("v1", "v1 hybrid") for c in check_cgroup(v, docker))
    levels = [(c.level, c.topic) for c in check_cgroup("v1", podman)]
    assert levels == [("info", "cgroup"), ("warn", "cgroup")]
    assert "PODMAN_IGNORE_CGROUPSV1_WARNING" in check_cgroup("v1 hybrid", podman)[1].message
    assert [c.level for c in check_cgroup("v1", {"server_version": "26.1.5"})] == [
        "info"
    ]  # Docker: no warning
    assert check_cgroup(None, podman) == []
    # Debian 12's Podman 4.3 prints no cgroup-v1 warning: doctor promised one (newcomer, round 15)
    assert [c.level for c in check_cgroup("v1 hybrid", {"engine": "podman", "server_version": "4.3.1"})] == [
        "info"
    ]


def test_doctor_reads_the_cgroup_version_from_its_proc(tmp_path: Path) -> None:
    from tests.support.hosts import fake_host
    from toolkit.host.doctor import diagnose

    host = fake_host(tmp_path)
    (host["proc"] / "self").mkdir()
    (host["proc"] / "self" / "mounts").write_text(
        "tmpfs /sys/fs/cgroup tmpfs ro 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
    )
    report = diagnose([], {}, env={}, docker_info={"engine": "podman", "server_version": "5.4.2"}, **host)
    assert [
        (c.level, c.message[:22] if c.level == "warn" else c.message.split(" (")[0])
        for c in report.checks
        if c.topic == "cgroup"
    ] == [
        ("info", "cgroup v1"),
        ("warn", "Podman on cgroup v1: t"),
    ]
