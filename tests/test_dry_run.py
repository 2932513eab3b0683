"""`toolkit bench --dry-run` prints the exact commands a real run would execute, also for what is
absent here (a model not downloaded, an image not built): no engine, no model file needed."""

from __future__ import annotations

import re

import pytest

from tests.support.e2e_helpers import make_project, run_cli


def test_dry_run_mounts_an_absent_gguf_as_the_file_the_command_names(tmp_path):
    project = make_project(
        tmp_path / "p",
        images=["cpu"],
        bench={"n_prompt": [512], "n_gen": [128]},
        models=["qwen3-30b-a3b-q4kxl"],
    )
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "cpu")
    line = next(
        ln for ln in res.output.splitlines() if ln.startswith("cpu x qwen3-30b-a3b-q4kxl (sweep): docker run")
    )
    m = re.search(r"type=bind,source=(\S+?),target=(\S+?),readonly", line)
    assert m, line
    name = "Qwen3-30B-A3B-Instruct-2507-UD-Q4_K_XL.gguf"
    assert m.group(1) == str((project / "models" / name).resolve())
    assert m.group(2) == f"/models/{name}"  # the file, as a real run mounts it: never its folder at /models
    assert f"-m /models/{name}" in line


def test_dry_run_of_an_unbuilt_sglang_image_shows_a_digest_placeholder(tmp_path):
    project = make_project(
        tmp_path / "p",
        images=["sglang"],
        bench={"n_prompt": [512], "n_gen": [128]},
        models=["qwen3-30b-a3b-awq"],
    )
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "sglang")
    outs = set(re.findall(r"type=bind,source=(\S+?),target=/out", res.output))
    assert outs, res.output
    for out in outs:
        assert "/results/<digest12>/sglang/" in out, out  # not results/latest/: no build, no digest yet


def test_dry_run_output_folders_are_in_the_results_folder_given(tmp_path):
    """--results R: the vLLM and SGLang dry-run commands mount R/<digest12>/..., wherever the command
    is run from (the vLLM one used ./results relative to the current folder)."""
    project = make_project(
        tmp_path / "p",
        images=["vllm", "sglang"],
        bench={"n_prompt": [512], "n_gen": [128]},
        models=["qwen3-30b-a3b-awq"],
    )
    results = tmp_path / "elsewhere"
    res, _ = run_cli(project, "bench", "--dry-run", "--results", str(results))
    outs = set(re.findall(r"type=bind,source=(\S+?),target=/out", res.output))
    assert {o.split("/<digest12>/")[1].split("/")[0] for o in outs} == {"vllm", "sglang"}, outs
    assert all(o.startswith(f"{results}/<digest12>/") for o in outs), outs


def test_dry_run_says_what_a_real_run_would_do_with_the_model(tmp_path):
    """Absent: a real run skips the pair; a folder where a GGUF should be, or a loop of links: a real
    run refuses it (exit 4). The dry run still prints the command, with a note line before it."""
    import yaml

    project = make_project(
        tmp_path / "p",
        images=["cpu"],
        bench={"n_prompt": [512], "n_gen": [128]},
        models=["qwen3-30b-a3b-q4kxl"],
    )
    models = project / "models"
    (models / "adir").mkdir(parents=True)
    (models / "loop1.gguf").symlink_to("loop2.gguf")
    (models / "loop2.gguf").symlink_to("loop1.gguf")
    data = yaml.safe_load((project / "matrix.yaml").read_text())
    data["models"] += [
        {"name": "dirmodel", "path": "models/adir", "format": "gguf"},
        {"name": "loop", "path": "models/loop1.gguf", "format": "gguf"},
    ]
    (project / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "cpu")
    notes = {ln.split(":")[0]: ln for ln in res.output.splitlines() if ": note: " in ln}
    assert "is absent here: a real run skips this pair" in notes["cpu x qwen3-30b-a3b-q4kxl"]
    assert (
        "a real run refuses this model" in notes["cpu x dirmodel"]
        and "not a regular file" in notes["cpu x dirmodel"]
    )
    assert "a real run refuses this model" in notes["cpu x loop"], res.output
    res, code = run_cli(project, "bench", "-i", "cpu", "-m", "loop", expect=None)
    assert code == 4 and "models[loop].path" in str(res.exception), (res.output, res.exception)


def test_dry_run_gives_the_case_count_of_the_real_run(tmp_path):
    """Reproducer (issue 33): `bench --dry-run` gave no case count or time estimate."""
    project = make_project(
        tmp_path / "p",
        images=["cpu"],
        bench={"n_prompt": [512, 2048], "n_gen": [128], "n_ubatch": [512, 2048], "type_k": ["f16", "q8_0"]},
        models=["qwen3-30b-a3b-q4kxl"],
    )
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "cpu")
    plan = next(ln for ln in res.output.splitlines() if ln.startswith("plan"))
    # (pp512, pp2048, tg128) x ub (512, 2048) x type_k (f16, q8_0): 12 cases; the model is absent here
    assert plan.startswith(
        "plan (dry run: every image as on a host that has its devices, models as if present): 12 test cases "
        "(1 image/model pair x 12 cases, 5 repetitions each)"
    ), plan
    assert plan.endswith("; here a real run would measure 0"), plan
    assert "-ctk f16,q8_0" in res.output


def test_axes_a_runner_does_not_take_are_said_not_dropped(tmp_path):
    """Reproducer (breaker): `bench.env` and the KV-cache/MoE axes were silently dropped for vLLM images."""
    project = make_project(
        tmp_path / "p",
        images=["cpu", "vllm"],
        bench={"n_prompt": [512], "n_gen": [128], "n_cpu_moe": [0, 4], "env": {"GGML_X": ["1"]}},
        models=["qwen3-30b-a3b-awq", "tiny-qwen3moe"],
    )
    res, _ = run_cli(project, "bench", "--dry-run")
    said = [ln for ln in res.output.splitlines() if "does not take" in ln]
    assert said == [
        "vllm x qwen3-30b-a3b-awq: note: runner vllm does not take bench.env (GGML_X); bench.n_cpu_moe [0, 4]: "
        "measured without them"
    ], res.output


def test_the_plan_counts_each_process_level_run(tmp_path):
    """Reproducer (breaker): `bench.runs: 2` printed the same case count as 1, so the --yes guard and
    the estimate were half the real run."""
    project = make_project(
        tmp_path / "p",
        images=["cpu"],
        bench={"n_prompt": [512], "n_gen": [128], "runs": 2},
        models=["tiny-qwen3moe"],
    )
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "cpu")
    plan = next(ln for ln in res.output.splitlines() if ln.startswith("plan:"))
    assert plan.startswith(
        "plan: 8 test cases (1 image/model pair x 4 cases, each in 2 processes (bench.runs)"
    ), plan


def test_dry_run_prints_the_depth_sweeps_command_and_counts_its_cases(tmp_path):
    """The tiny model's depth sweep (pp512 + tg128 at depths 0 and 512, the bench's first ub 512):
    depth 0 is the main sweep's (same tests), so its process is `-d 512 -p 512 -n 128`, after the main
    sweep's, and the plan counts its 2 cases."""
    project = make_project(
        tmp_path / "p",
        images=["cpu"],
        bench={"n_prompt": [512], "n_gen": [128]},
        models=["tiny-qwen3moe"],
        depth=True,
    )
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "cpu")
    plan = next(ln for ln in res.output.splitlines() if ln.startswith("plan:"))
    assert plan.startswith(
        "plan: 6 test cases (1 image/model pair x 6 cases, 5 repetitions each; 2 of the 6 in depth sweeps"
    ), plan
    bench = [ln for ln in res.output.splitlines() if " llama-bench " in ln]
    assert len(bench) == 2 and " -d " not in bench[0], res.output
    assert " -p 512 -n 128 -b 2048 -ub 512 " in bench[1] and " -d 512 " in bench[1], bench[1]


def test_dry_run_plan_says_what_a_real_run_here_would_measure(tmp_path):
    """Newcomer's find: the plan line counted pairs a real run here skips (the rocm image without its
    GPU, shown with an example device profile; an absent model) as if they would run."""
    project = make_project(
        tmp_path / "p",
        images=["cpu", "rocm"],
        bench={"n_prompt": [512], "n_gen": [128]},
        models=["tiny-qwen3moe"],
    )
    res, _ = run_cli(project, "bench", "--dry-run")
    plan = next(ln for ln in res.output.splitlines() if ln.startswith("plan"))
    from toolkit.host import devices

    if devices.shortfall("rocm", devices.detect_gpus(), allow_software=False) is None:
        pytest.skip("this host has a ROCm GPU: every pair runs here")
    assert plan.startswith("plan (dry run: every image as on a host that has its devices"), plan
    assert "8 test cases (2 image/model pairs x 4 cases" in plan, plan
    assert plan.endswith("; here a real run would measure 4"), plan


def test_dry_run_names_each_command_and_gives_the_depth_sweep_its_own_container(tmp_path):
    """Newcomer's find: the printed commands did not say which is the canary, the sweep, the depth sweep,
    and the main and depth sweeps shared one container name. With two env combinations and
    bench.runs 2 each process has its own name (as its own log: logs/<run>-<model><suffix>.log)."""
    project = make_project(
        tmp_path / "p",
        images=["cpu"],
        bench={"n_prompt": [512], "n_gen": [128], "runs": 2, "env": {"GGML_X": ["1", "2"]}},
        models=["tiny-qwen3moe"],
        depth=True,
    )
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "cpu")
    cmds = [ln for ln in res.output.splitlines() if ": docker run " in ln]
    labels = [ln.split(": docker run ")[0] for ln in cmds]
    assert labels[0] == "cpu x tiny-qwen3moe (canary)", labels
    assert labels[1].startswith("cpu x tiny-qwen3moe (sweep, run 1 of 2, env GGML_X=1)"), labels
    assert labels[2].startswith("cpu x tiny-qwen3moe (sweep, run 1 of 2, env GGML_X=2)"), labels
    assert any(lb.startswith("cpu x tiny-qwen3moe (depth sweep, depths 512") for lb in labels), labels
    names = [re.search(r"--name (\S+)", ln).group(1) for ln in cmds]
    assert len(set(names)) == len(names), names
    assert names[1].endswith("-env1-run1") and names[2].endswith("-env2-run1"), names
    assert any("-depth" in n for n in names), names


def test_dry_run_over_1000_cases_says_the_real_run_needs_yes(tmp_path):
    """Tester's find: a dry run of a matrix the real run refuses without --yes exited 0 saying nothing."""
    project = make_project(
        tmp_path / "p",
        images=["cpu"],
        bench={"n_prompt": list(range(1, 1002)), "n_gen": [0]},
        models=["tiny-qwen3moe"],
    )
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "cpu")
    plan = next(ln for ln in res.output.splitlines() if ln.startswith("plan"))
    assert plan.endswith("; more than 1000 test cases: the real run needs --yes"), plan
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "cpu", "--yes")
    assert "needs --yes" not in res.output


def test_dry_run_probe_mounts_no_model_nor_shader_cache_but_the_sweeps_devices(tmp_path):
    """The GPU-path probe (`llama-bench --list-devices`) runs with the sweep's devices, no model mounted
    (base.container_spec with model_dir=None) and no Mesa shader cache: it runs once per (image, model)
    before the sweep, and mounting the cache would create its volume before the sweep asks whether
    the cache starts cold (llama_bench._shader_cache_cold)."""
    project = make_project(tmp_path / "p", images=["vulkan"], bench={"n_prompt": [512], "n_gen": [128]})
    res, _ = run_cli(project, "bench", "--dry-run", "-i", "vulkan")
    lines = res.output.splitlines()
    probe = next(ln for ln in lines if ln.startswith("vulkan x tiny-qwen3moe (device probe): docker run"))
    sweep = next(ln for ln in lines if ln.startswith("vulkan x tiny-qwen3moe (sweep): docker run"))
    assert probe.endswith("llama-bench --list-devices"), probe
    assert "/models" not in probe and "type=bind" not in probe, probe  # no model, no folder in its place
    cache = re.search(r"--mount type=volume,source=(toolkit-shaders-\S+?),target=/cache", sweep)
    assert cache and "/cache" not in probe and "MESA_SHADER_CACHE_DIR" not in probe, (probe, sweep)
    devices = re.findall(r"--device (\S+)", sweep)
    assert devices and re.findall(r"--device (\S+)", probe) == devices
