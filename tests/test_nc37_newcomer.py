"""What newcomer 37 met on a fresh Debian 12 stand-in, its sudo user, Docker (the README's main job,
then report, compare, export-run and its Reproduce block as the customer, doctor, import).

- `toolkit report` of two images (the two H200 llama-bench JSONL files of /work/shared/cases imported)
  routed prefill-heavy work with "(+60.9%%, noise threshold 3.0%)": the longest prompt's margin was
  given a second percent sign (analysis.verdict._prefill_route passed `%, noise threshold ` to _pct,
  which already writes the margin's `%`).
- `toolkit compare RUN1 RUN2` of two benches of the tiny stand-in model (the README's main job, then
  `repetitions: 3` in matrix.yaml and a second bench) showed speedups of 0.26x to 4.23x with no word
  that the model is a 1.6 MB random-weight stand-in, where `toolkit report` and `toolkit reproduce` of
  the same records say "smoke-test data: ... not a basis for routing" above their tables. compare now
  says the same caveats above its table (text, github) and in --json's `caveats`
  (analysis.compare_text.caveats).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.records import make_record
from tests.support.runs import bench_records
from toolkit.analysis import compare, compare_text, verdict
from toolkit.results.records import ResultStore


def test_the_prefill_route_writes_its_margin_with_one_percent_sign() -> None:
    """Two images, one clearly faster at the longest prompt: the prefill-heavy route names the margin
    and the noise threshold once each, `+60.0%, noise threshold`, never `%%`."""
    rs = [
        make_record("a", "rocm", p=4096, avg=1600.0, sd=1.0),
        make_record("b", "vulkan", p=4096, avg=1000.0, sd=1.0),
        make_record("a", "rocm", n=128, avg=100.0, sd=0.5),
        make_record("b", "vulkan", n=128, avg=150.0, sd=0.5),
    ]
    v = verdict.verdict(rs)
    route = next(r for r in v.routes if r.workload.startswith("prefill-heavy"))
    assert route.image is not None and route.image.startswith("a@"), route.why
    assert "(+60.0%, noise threshold " in route.why, route.why
    text = verdict.format_verdict(v)
    assert "%%" not in text, text


def test_compare_of_two_tiny_stand_in_runs_says_they_are_smoke_data(tmp_path: Path) -> None:
    """Two stored runs of the tiny stand-in (the same image, the second 1.5x faster): the comparison
    says the report's smoke-test caveat above its table, in both text forms and in its JSON; a
    comparison of a real-size model says none."""
    store = ResultStore(tmp_path / "results")
    for r in bench_records("run-a") + bench_records("run-b", scale=1.5):
        store.add_result(r)
    c = compare.compare(store, "run-a", "run-b", threshold=5)
    smoke = "caveat: smoke-test data: tiny-qwen3moe is a tiny stand-in model"
    for fmt in ("github", "text"):
        out = compare_text.format_comparison(c, fmt, width=200)
        assert out.startswith(smoke), out
        assert out.index(smoke) < out.index("| test") if fmt == "github" else True, out
    said = json.loads(json.dumps(compare_text.comparison_json(c)))["caveats"]
    assert len(said) == 1 and said[0].startswith("smoke-test data: tiny-qwen3moe"), said

    big = ResultStore(tmp_path / "big")
    for r in bench_records("run-c") + bench_records("run-d", scale=1.5):
        size = {"name": "qwen3-30b", "size_bytes": 17 * 2**30}
        big.add_result(r.model_copy(update={"model": r.model.model_copy(update=size)}))
    c = compare.compare(big, "run-c", "run-d", threshold=5)
    assert "caveat" not in compare_text.format_comparison(c, "github")
    assert compare_text.comparison_json(c)["caveats"] == []


def test_an_interrupted_build_whose_command_outlives_sigterm_is_killed_and_the_interrupt_kept(
    tmp_path: Path, monkeypatch
) -> None:
    """Ctrl-C (or SIGTERM, SIGHUP) during a build whose command does not exit within the grace after
    SIGTERM (a real process that ignores it stands in for the buildx client still cancelling a compile):
    the command is killed and the interrupt goes on (exit 130), never subprocess.TimeoutExpired (an exit
    1 traceback). The grace is shortened from 30 s so the test takes a second."""
    import subprocess

    import pytest

    from toolkit.engine import images

    monkeypatch.setattr(images, "BUILD_STOP_GRACE_S", 0.5, raising=False)  # absent before the fix
    pid_file = tmp_path / "pid"
    cmd = ["sh", "-c", f"trap '' TERM; echo $$ > {pid_file}; echo '#1 [build 1/2] RUN make'; exec sleep 60"]

    def interrupt(line: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        images.run_buildx(cmd, log_path=tmp_path / "build.log", on_line=interrupt)
    pid = int(pid_file.read_text())
    gone = subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
    assert gone, f"the build command {pid} outlived the interrupted run"
