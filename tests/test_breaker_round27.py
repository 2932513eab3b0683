"""Round 27 breaker: a hostile tester of this session's rules (docs/reliability-log.md, "Round 27 breaker").
Each test fails before its fix. Real public files of tests/data/public where one shows the case, else
the file a real one becomes when edited as the case says (a crash's line appended after the run's end,
a key removed). Nothing is mocked."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.project import DATA
from tests.support.public import PUBLIC, imp
from toolkit.analysis import table_text
from toolkit.analysis.caveats import held_caveats
from toolkit.analysis.facts import Facts
from toolkit.analysis.flag_help import FLAG_HELP
from toolkit.analysis.provenance import provenance
from toolkit.results import importer
from toolkit.results.records import ResultStore
from toolkit.runtimes.vllm import output

DEPTH_LOG = "r27-vulkan-r9700-depth-32768.log"  # a Vulkan table ending with llama-bench's `build:` line


def _import(tmp_path: Path, text: str, name: str) -> importer.ImportResult:
    tmp_path.mkdir(parents=True, exist_ok=True)
    src = tmp_path / name
    src.write_text(text)
    return importer.import_files(ResultStore(tmp_path / "results"), [src], label="x")


# 1. a crash at exit, after the run printed its end, is not a run cut short


def test_a_crash_after_the_build_line_is_a_crash_at_exit_not_a_run_that_did_not_end(tmp_path):
    """llama-bench prints md's `build:` line once every test has run; a segfault after it is a crash at
    exit (ggml-org/llama.cpp#10528: Vulkan's instance destroyed at exit). Before: noted as 'the run did
    not end ... the tests it had still to run were not measured', of a complete table."""
    text = (PUBLIC / DEPTH_LOG).read_text() + "Segmentation fault (core dumped)\n"
    res = _import(tmp_path, text, "exit.log")
    assert not any("did not end" in n for n in res.notes), res.notes
    (note,) = [n for n in res.notes if "crashed after it ended" in n]
    assert "line 13: 'Segmentation fault (core dumped)'" in note and "(line 12," in note
    assert "its rows are complete" in note


def test_a_crash_after_a_json_arrays_end_is_a_crash_at_exit_and_one_before_it_is_not(tmp_path):
    """-o json's closing `]` is printed after the last test, as md's build line."""
    row = json.loads((PUBLIC / "r26-rocm-b6865-flash-attn-bool.jsonl").read_text().splitlines()[0])
    body = "[\n" + json.dumps(row) + "\n"
    res = _import(tmp_path / "a", body + "]\nSegmentation fault (core dumped)\n", "a.json")
    assert any("crashed after it ended" in n for n in res.notes) and not any(
        "did not end" in n for n in res.notes
    )
    res = _import(tmp_path / "b", body + "/src/ggml.c:12: GGML_ASSERT(x) failed\n", "b.json")
    assert any("did not end: line 3: '/src/ggml.c:12: GGML_ASSERT" in n for n in res.notes), res.notes


# 2. `backends` naming RPC says the build has RPC, not that --rpc was given


def test_a_cuda_rpc_build_run_without_rpc_is_not_said_to_have_split_its_model(tmp_path):
    """r25-cuda-rpc-ngl0-pr12922.md: its command line (`llama-bench -m ... -ngl 0`, no --rpc) printed
    `CUDA,RPC`: every row of a build with ggml's RPC backend names it (a one-GPU Windows release build
    prints `Vulkan,RPC`). Before: the flag's help said as a fact that part of the model ran on another
    host's devices, and the caveat told to run 'without --rpc', which the run already was."""
    assert "-ngl 0" in (PUBLIC / "r25-cuda-rpc-ngl0-pr12922.md").read_text()
    recs = imp(tmp_path, "r25-cuda-rpc-ngl0-pr12922.md")
    facts = [Facts.of(r) for r in recs]
    assert all("rpc-split" in f.flags for f in facts)  # still held: a split cannot be ruled out
    help_text = FLAG_HELP["rpc-split"]
    assert not help_text.startswith("llama-bench's `backends` names RPC: part of the model ran")
    assert "whether or not --rpc was given" in help_text
    (caveat,) = held_caveats(facts)
    assert "a build without RPC" in caveat


def test_the_host_line_of_a_build_with_rpc_says_its_rows_do_not_say_whether_it_split(tmp_path):
    recs = imp(tmp_path, "r26-rocm-rpc-glm355b-b7085.log")
    (host,) = provenance(recs).hosts
    assert "+ an RPC server's devices (not named) if --rpc was given" in host


# 3. a long word of wide characters is wrapped in linear time


def test_a_long_word_of_wide_characters_wraps_in_linear_time():
    """A gpu_info or label of 60,000 CJK characters (no space): before, each line cut from it re-measured
    and re-copied the rest of the word (20,000 characters: 19 s of `toolkit report`, 80,000: minutes);
    now one pass. Every line fits its 80 columns and the lines join back to the word."""
    word = "显" * 60_000
    t = time.perf_counter()
    lines = table_text.wrap("- host: GPU " + word, 80)
    assert time.perf_counter() - t < 3.0
    assert max(map(table_text.columns, lines)) <= 80
    assert "".join(ln.strip() for ln in lines) == "- host: GPU" + word


# 4. a serve result's mean held to its p50 where it has no median key; the mean within one std of it


SERVE = json.loads((DATA / "vllm-0.16.0-serve.json").read_text())


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        (  # no median_ttft_ms: its p50 is the median (before: the mean held to nothing)
            {"median_ttft_ms": None, "p50_ttft_ms": 160.0, "mean_ttft_ms": 10.0, "std_ttft_ms": 300.0},
            "mean_ttft_ms 10 is less than half its median 160",
        ),
        (  # a mean 60 ms from its median with a std of 1 ms: no values give that
            {
                "mean_ttft_ms": 100.0,
                "std_ttft_ms": 1.0,
                "median_ttft_ms": 160.0,
                "p50_ttft_ms": 160.0,
                "p90_ttft_ms": 160.0,
                "p99_ttft_ms": 160.0,
            },
            "std_ttft_ms 1 is less than its mean 100 and median 160 lie apart",
        ),
    ],
)
def test_a_serve_mean_is_held_to_its_median_by_p50_and_by_its_std(kw, says):
    data = {k: v for k, v in {**SERVE, **kw}.items() if v is not None}
    assert says in (output.serve_problem(data) or "")


def test_real_serve_results_keep_passing_the_spread_rules():
    for name in ("vllm-0.16.0-serve.json", "vllm-neighbour-serve.json", "vllm-0.28.0-cpu-serve.json"):
        assert output.serve_problem(json.loads((DATA / name).read_text())) is None, name
