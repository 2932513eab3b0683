"""llama-bench argument list and tolerant parsing, on captured real outputs of several versions."""

from __future__ import annotations

import json

import pytest

from tests.support.project import DATA
from toolkit.core import jsonsafe
from toolkit.matrix.api import BenchAxes
from toolkit.runtimes.llama_bench import args as lb_args
from toolkit.runtimes.llama_bench import check, output, readers, validity


def test_bench_args_cross_the_matrix():
    axes = BenchAxes(n_prompt=[512, 2048], n_gen=[128], n_ubatch=[512, 2048], n_batch=[2048], repetitions=3)
    args = lb_args.bench_args(axes, "/models/m.gguf")
    s = " ".join(args)
    assert "-p 512,2048" in s and "-n 128" in s and "-ub 512,2048" in s and "-b 2048" in s
    assert "-fa 1" in s and "-ngl 999" in s and "-r 3" in s
    assert args[-3:] == ["-o", "jsonl", "--progress"]
    assert "-d" not in args  # default depth is not passed (older builds lack -d)


def test_parse_jsonl_skips_non_json_lines():
    text = (
        "ggml_vulkan: Found 1 Vulkan devices:\nggml_vulkan: 0 = llvmpipe\n"
        + (DATA / "llamabench-b5163-readme.jsonl").read_text()
    )
    rows = jsonsafe.parse_jsonl(text)
    assert len(rows) == 2
    n = [check.normalize(r) for r in rows]
    assert [x["test"] for x in n] == ["pp512", "tg128"]
    assert n[0]["backends"] == "CUDA" and n[0]["flash_attn"] == -1
    assert n[0]["avg_ts"] == pytest.approx(7263.609157)


def test_parse_jsonl_keeps_a_row_with_bare_nan_and_drops_a_cut_off_one():
    text = '{"n_prompt": 512, "stddev_ts": -nan}\n{"n_prompt": 51\n  {"n_gen": 128}\n'
    rows = jsonsafe.parse_jsonl(text)
    assert len(rows) == 2 and rows[0]["stddev_ts"] != rows[0]["stddev_ts"] and rows[1] == {"n_gen": 128}


def test_row_tokens_reads_the_counts_as_the_validity_pass_does():
    assert check.row_tokens({"n_prompt": 512, "n_gen": "128"}) == 640
    assert check.row_tokens({"n_gen": 32}) == 32  # an absent count is 0 here (the window's tokens)
    assert check.row_tokens({"n_prompt": -1, "n_gen": 32}) is None
    assert check.row_tokens({"n_prompt": True, "n_gen": 32}) is None
    assert check.row_tokens({"n_prompt": 10**8, "n_gen": 0}) is None


def _json_rows(text: str) -> list[dict]:
    return [r.fields for r in readers.read_json_array(text)]


def test_old_vintage_booleans_and_truncated_json():
    text = (DATA / "llamabench-b3599-old.json").read_text()
    rows = _json_rows(text)
    assert len(rows) == 2
    n = check.normalize(rows[0])
    assert n["flash_attn"] == 1 and n["n_depth"] == 0 and n["backends"] == "CPU"
    assert n["samples_ts"][0] == pytest.approx(8.89501)
    # a crash leaves the array open and the last object half-written
    cut = text[: text.rindex('"avg_ts"')]
    assert len(_json_rows(cut)) == 1


def test_unknown_fields_are_kept_in_raw():
    rows = _json_rows((DATA / "llamabench-b3599-old.json").read_text())
    assert rows[0]["mla_attn"] == 3  # the parser keeps what it does not know


@pytest.mark.parametrize(
    "ub,b,p,g,d,eff",
    [
        pytest.param(2048, 2048, 512, 0, 0, 512, id="pp512-ub2048-clamped"),
        pytest.param(2048, 2048, 2048, 0, 0, 2048, id="pp2048-ub2048"),
        pytest.param(512, 2048, 4096, 0, 0, 512, id="pp4096-ub512"),
        pytest.param(2048, 2048, 0, 128, 0, 128, id="tg128"),
        pytest.param(2048, 1024, 4096, 0, 0, 1024, id="batch-clamps"),
        # the depth is filled before the clock starts; the timed prompt runs alone (llama-bench test_prompt)
        pytest.param(2048, 2048, 128, 0, 512, 128, id="pp128@d512-ub2048"),
        pytest.param(2048, 2048, 512, 0, 4096, 512, id="pp512@d4096-ub2048"),
        pytest.param(2048, 2048, 512, 128, 0, 512, id="pp512+tg128-ub2048"),
        pytest.param(2048, 2048, 0, 128, 4096, 2048, id="tg128@d4096"),
    ],
)
def test_effective_ubatch(ub, b, p, g, d, eff):
    assert check.effective_ubatch(ub, b, p, g, d) == eff


def test_the_stored_effective_ubatch_of_before_is_its_contexts_bound():
    """Records stored before the prompt was counted hold min(ub, b, the context): still read as written."""
    assert check.legacy_effective_ubatch(2048, 2048, 128, 0, 512) == 640
    assert check.legacy_effective_ubatch(2048, 2048, 512, 0, 0) == 512


def test_progress_lines():
    assert output.progress_of("llama-bench: benchmark 3/8: prompt run 2/5") == (3, 8, "prompt run 2/5")
    assert output.progress_of("load_tensors: CPU model buffer") is None


def test_cpu_fallback_detection():
    vk_row = {"backends": "Vulkan", "gpu_info": "", "n_prompt": 512, "n_gen": 0}
    assert "gpu_info is empty" in check.cpu_fallback_of("vulkan", vk_row, check.backends_of(vk_row))
    ok_row = dict(vk_row, gpu_info="AMD Radeon AI PRO R9700 (RADV GFX1201)")
    assert check.cpu_fallback_of("vulkan", ok_row, "Vulkan") is None
    assert "ROCm" in check.cpu_fallback_of("rocm", ok_row, "CPU")
    no_device = "ggml_cuda_init: no ROCm-capable device is detected"
    assert "no ROCm-capable" in check.cpu_fallback_of("rocm", ok_row, "ROCm", no_device)
    assert "-dev none" in check.cpu_fallback_of("vulkan", dict(ok_row, devices="none"), "Vulkan")
    assert "log shows" in check.cpu_fallback_of(
        "vulkan", dict(ok_row, devices="none"), "Vulkan", "ggml_vulkan: No devices found"
    )  # the log's message first, as the report reads a stored row
    assert check.cpu_fallback_of("cpu", dict(vk_row, backends="CPU"), "CPU") is None


def test_judge_row_says_the_first_reason_a_row_is_no_result():
    """toolkit bench's verdict on each row of its own process: not a measurement, else a CPU fallback
    (on the row or in what was printed before it), else a software device not opted into."""
    row = json.loads((DATA / "llamabench-0c1e57098-cpu.jsonl").read_text().splitlines()[0])
    fields, why = validity.judge_row(row, "cpu", allow_software_gpu=False)
    assert why is None and fields == check.normalize(row)
    vk = dict(row, backends="Vulkan", gpu_info="llvmpipe (LLVM 19.1.7, 256 bits)")
    assert validity.judge_row(vk, "vulkan", allow_software_gpu=True)[1] is None
    assert "software device (llvmpipe" in validity.judge_row(vk, "vulkan", allow_software_gpu=False)[1]
    printed = "ggml_vulkan: No devices found.\n" + json.dumps(vk)
    assert validity.judge_row(vk, "vulkan", allow_software_gpu=False, log=printed)[1].startswith(
        "CPU fallback: log"
    )
    assert validity.judge_row(dict(vk, gpu_info=""), "vulkan", allow_software_gpu=True)[1].startswith(
        "CPU fallback:"
    )
    bad = dict(vk, avg_ts=-1.0)
    assert validity.judge_row(bad, "vulkan", allow_software_gpu=False, log=printed)[1].startswith(
        "row is not a measurement: "
    )


def test_test_names():
    assert check.test_name(512, 0) == "pp512"
    assert check.test_name(0, 128) == "tg128"
    assert check.test_name(512, 128) == "pp512+tg128"
    assert check.test_name(512, 0, 4096) == "pp512 @ d4096"


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_captured_0c1e57098_outputs_parse_the_same(fmt):
    rows = [r.fields for r in readers.read_source((DATA / f"llamabench-0c1e57098-cpu.{fmt}").read_text())[1]]
    assert len(rows) == 6
    n = [check.normalize(r) for r in rows]
    assert {x["test"] for x in n} == {"pp64", "pp512", "tg16"}
    assert all(x["avg_ts"] > 0 and x["backends"] == "CPU" and x["flash_attn"] == 1 for x in n)
    clamped = [x for x in n if x["test"] == "pp64" and x["n_ubatch"] == 512]
    assert clamped and clamped[0]["n_ubatch_effective"] == 64


def test_cooldown_is_llama_benchs_delay_before_each_test():
    """bench.cooldown_s -> llama-bench --delay N ("cool off before the test", llama-bench.cpp at
    0c1e57098); absent when 0 so older builds without --delay still run."""
    axes = BenchAxes(n_prompt=[512], n_gen=[128], cooldown_s=20)
    args = lb_args.bench_args(axes, "/models/m.gguf")
    assert args[args.index("--delay") + 1] == "20"
    assert "--delay" not in lb_args.bench_args(BenchAxes(n_prompt=[512], n_gen=[128]), "/m.gguf")


def test_fallback_messages_are_what_the_pinned_llama_bench_prints(llama_tree):
    """Every "no device" message of core.backends is printed by code llama-bench runs at the pin (ggml,
    not common/), checked in the pinned tree; the two removed ones are not (issue 23)."""
    from toolkit.core import backends

    ggml = "\n".join(
        p.read_text(errors="replace")
        for p in (llama_tree / "ggml").rglob("*")
        if p.suffix in {".c", ".cpp", ".cu", ".cuh", ".h"} and p.is_file()
    )
    assert 'GGML_LOG_INFO("ggml_vulkan: No devices found.\\n");' in ggml
    assert 'GGML_LOG_ERROR("%s: failed to initialize " GGML_CUDA_NAME ": %s\\n", __func__' in ggml
    assert '#define GGML_CUDA_NAME "ROCm"' in ggml and '#define GGML_CUDA_NAME "CUDA"' in ggml
    assert backends.BACKENDS["vulkan"].fallback_messages == ("ggml_vulkan: No devices found",)
    assert "ggml_cuda_init: failed to initialize ROCm" in backends.BACKENDS["rocm"].fallback_messages
    assert "ggml_cuda_init: failed to initialize CUDA" in backends.BACKENDS["cuda"].fallback_messages
    # gone: never printed by llama-bench at this commit
    assert "failed to initialize Vulkan" not in backends.FALLBACK_MESSAGES
    assert "no usable GPU found" not in backends.FALLBACK_MESSAGES
    tree_text = ggml + (llama_tree / "tools" / "llama-bench" / "llama-bench.cpp").read_text()
    assert "failed to initialize Vulkan" not in tree_text and "no usable GPU found" not in tree_text
    bench = (llama_tree / "tools" / "llama-bench" / "llama-bench.cpp").read_text()
    assert "common_params_parse" not in bench  # the parser that prints "no usable GPU found" (common/arg.cpp)
    assert "no usable GPU found" in (llama_tree / "common" / "arg.cpp").read_text()


def test_no_device_capture_is_a_cpu_fallback():
    """The pinned llama-bench's own output without a GPU (tests/data, captured in the Vulkan image on
    this GPU-less machine) is caught by the fallback rule."""
    from toolkit.core import backends

    err = (DATA / "llamabench-0c1e57098-list-devices-nogpu.stderr").read_text()
    assert backends.cpu_fallback_reason("vulkan", "Vulkan", "", log=err)
    assert "ggml_vulkan: No devices found" in (
        backends.cpu_fallback_reason("vulkan", "Vulkan", None, log=err) or ""
    )


@pytest.mark.parametrize(
    "axes",
    [
        BenchAxes(),
        BenchAxes(n_prompt=[512, 2048], n_gen=[128], n_ubatch=[512, 2048], n_depth=[0, 4096], repetitions=3),
        BenchAxes(n_prompt=[64], n_gen=[16], threads=4, cooldown_s=2, flash_attn=[0, 1], n_gpu_layers=[0]),
        BenchAxes(type_k=["f16", "q8_0"], type_v=["q8_0"], split_mode=["row"], n_cpu_moe=[0, 8]),
    ],
)
def test_the_one_flag_table_builds_the_command_and_reads_it_back(axes):
    """bench_args and axes_from_args are one table (lb_args.FLAGS) in two directions: every axis the
    command carries comes back as it went in, and what is left out is llama-bench's default."""
    argv = ["docker", "run", "--rm", "img", "llama-bench", *lb_args.bench_args(axes, "/models/m.gguf")]
    back = lb_args.axes_from_args(argv)
    for f in lb_args.FLAGS:
        value = getattr(axes, f.axis)
        assert back.get(f.axis, value) == value and (f.axis in back or value in f.omit), f.flag
    assert BenchAxes(**{**axes.model_dump(), **back}) == axes
    assert lb_args.axes_from_args(["vllm", "bench", "-p", "5"]) == {}  # no llama-bench: nothing read


def test_kv_cache_split_mode_and_moe_offload_are_axes_crossed_checked_and_resumable():
    """Issue 34 item 2: -ctk/-ctv, -sm and -ncmoe as matrix axes, crossed like the others, validated
    against the pinned llama-bench's accepted values, part of the resume key; a matrix without them
    gives the cases and the command line it always did."""
    from toolkit.bench.runners.llama_bench import _case_key

    plain = BenchAxes(n_prompt=[512], n_gen=[128])
    assert "-ctk" not in lb_args.bench_args(plain, "/m.gguf") and all(
        "type_k" not in c for c in plain.cases()
    )
    axes = BenchAxes(n_prompt=[512], n_gen=[128], type_k=["f16", "q8_0"], type_v=["q8_0"], n_cpu_moe=[0, 8])
    argv = lb_args.bench_args(axes, "/m.gguf")
    assert argv[argv.index("-ctk") + 1] == "f16,q8_0" and argv[argv.index("-ncmoe") + 1] == "0,8"
    cases = axes.cases()
    assert len(cases) == 2 * 2 * 2  # (pp, tg) x type_k x n_cpu_moe
    assert {(c.get("type_k", "f16"), c["type_v"], c.get("n_cpu_moe", 0)) for c in cases} == {
        (k, "q8_0", m) for k in ("f16", "q8_0") for m in (0, 8)
    }
    keys = {_case_key(c, None) for c in cases}
    assert len(keys) == len(cases)  # each its own test for --resume
    # a record's raw row carries llama-bench's defaults: the same key as a case without the fields
    assert _case_key(
        {**plain.cases()[0], "type_k": "f16", "split_mode": "layer", "n_cpu_moe": 0}, None
    ) == _case_key(plain.cases()[0], None)
    for bad, why in [
        ({"type_k": ["q9_0"]}, "Input should be 'f16'"),
        ({"split_mode": ["rows"]}, "Input should be 'none'"),
        ({"type_v": ["q4_0"], "flash_attn": [0]}, "quantized V cache requires flash_attn"),
        ({"n_cpu_moe": [-1]}, "between 0 and"),
        ({"type_k": []}, "axis list is empty"),
    ]:
        with pytest.raises(ValueError, match=why):
            BenchAxes(**bad)
