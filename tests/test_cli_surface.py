"""One command-line surface (issue 33 item 6): every command's --json is one envelope with a schema
version, the output option has one name (-o/--output, --out kept), --dry-run on the commands that
change something outside the results folder, compare across two results folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.support.project import ROOT, write_matrix
from tests.support.records import CPU_A, load
from tests.support.runs import DIGEST, bench_records
from toolkit import __version__
from toolkit.cli.common import JSON_SCHEMA_VERSION, EnvelopeGroup, echo_json, json_option
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput
from toolkit.results.records import BenchRecord, BuildRecord, ResultStore

ENVELOPE_KEYS = {"schema_version", "command", "toolkit_version", "ok", "exit_code", "error", "result"}


def _envelope(text: str) -> dict:
    got = json.loads(text)
    assert set(got) == ENVELOPE_KEYS, got
    assert got["schema_version"] == JSON_SCHEMA_VERSION and got["toolkit_version"] == __version__
    return got


def _json_commands(group: click.Group, path: tuple[str, ...] = ()) -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out.update(_json_commands(cmd, (*path, name)))
        elif not cmd.hidden:
            out[" ".join((*path, name))] = cmd
    return out


@pytest.fixture
def cpu_project(tmp_path, matrix_data) -> Path:
    """The project's matrix with its cpu image only, a build of it (labels of a real build, engine not
    named: taken as present on any engine) and the six records of a CPU run "run-a" of that build."""
    import shutil

    shutil.copytree(ROOT / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    matrix_data["images"] = [i for i in matrix_data["images"] if i["name"] == "cpu"]
    write_matrix(tmp_path, matrix_data)
    store = ResultStore(tmp_path / "results")
    commit = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    labels = {
        "org.opencontainers.image.version": "0c1e57098",
        "org.opencontainers.image.revision": commit,
        "org.opencontainers.image.created": "2026-11-29T16:58:43Z",
        "org.toolkit.backend": "cpu",
        "org.toolkit.runner": "llama-bench",
        "org.toolkit.template-hash": "ab" * 32,
    }
    store.add_build(
        BuildRecord(
            image="cpu",
            ref="toolkit/cpu:0c1e57098-28d4fa04",
            digest=DIGEST,
            backend="cpu",
            template="llama-cpu.Dockerfile.j2",
            template_hash="ab" * 32,
            source_commit=commit,
            labels=labels,
            created="2026-11-29T17:00:00+00:00",
        )
    )
    for r in bench_records("run-a"):
        store.add_result(r)
    return tmp_path


def _store_with(root: Path, records: list[BenchRecord]) -> ResultStore:
    store = ResultStore(root)
    for r in records:
        store.add_result(r)
    return store


def _slower(records: list[BenchRecord], factor: float, digest: str) -> list[BenchRecord]:
    """The same tests under another image digest, tok/s x `factor`, with a 1 % spread (beyond noise):
    as many samples as the record's raw row has (an even number: a record holds its row's repetitions)."""
    out = []
    for r in records:
        v, n = r.avg_ts * factor, len(r.samples_ts)
        half = 0.01 * ((n - 1) / n) ** 0.5  # v x (1 ± half) in turn: mean v, sample stddev v x 0.01
        d = {**r.model_dump(), "run_id": "run-b", "avg_ts": v, "stddev_ts": v * 0.01}
        d["image"] = {**d["image"], "digest": digest}
        out.append(
            BenchRecord.model_validate({**d, "samples_ts": [v * (1 + half * (-1) ** i) for i in range(n)]})
        )
    return out


def test_every_visible_command_has_json():
    """`--json` on every command (the hidden campaign job step, run by Slurm, is no user command)."""
    lacking = [n for n, c in _json_commands(cli).items() if not any("--json" in p.opts for p in c.params)]
    assert lacking == []


def test_the_output_option_has_one_name_everywhere():
    """Every option that says where a command writes is -o/--output (--out a second spelling)."""
    seen = {}
    for name, cmd in _json_commands(cli).items():
        for p in cmd.params:
            if {"--out", "--output", "-o"} & set(p.opts):
                seen[name] = sorted(p.opts)
    assert seen == dict.fromkeys(
        ("campaign render-k8s", "export-run", "measure", "report"), ["--out", "--output", "-o"]
    )


def _group_with(fail: Exception | None) -> click.Group:
    @click.group(cls=EnvelopeGroup)
    def root():
        pass

    @root.command("sub")
    @json_option
    def sub(as_json):
        echo_json({"rows": [1.5, float("nan")]})
        if fail is not None:
            raise fail

    return root


def test_a_result_is_printed_in_the_envelope_with_the_exit_code_the_command_ends_with():
    ok = CliRunner().invoke(_group_with(None), ["sub", "--json"])
    got = _envelope(ok.output)
    assert got["ok"] and got["exit_code"] == 0 and got["error"] is None and got["command"] == "sub"
    assert got["result"] == {"rows": [1.5, None]}  # strict JSON: NaN as null
    bad = CliRunner().invoke(_group_with(BadInput("two sides, nothing in common")), ["sub", "--json"])
    got = _envelope(bad.output)  # one document: the rows, and the failure after them
    assert (got["ok"], got["exit_code"], got["error"]) == (False, 4, "two sides, nothing in common")
    assert got["result"] == {"rows": [1.5, None]} and isinstance(bad.exception, BadInput)


def test_an_error_before_any_result_is_the_envelope_naming_the_command(tmp_path, monkeypatch, capsys):
    from toolkit.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["toolkit", "campaign", "status", "--json", "nope"])
    with pytest.raises(SystemExit) as exc:
        main()
    got = _envelope(capsys.readouterr().out)
    assert exc.value.code == got["exit_code"] == 4 and got["ok"] is False and got["result"] is None
    assert got["command"] == "campaign status"


def test_fetch_model_dry_run_json_fetches_nothing(project):
    res = CliRunner().invoke(
        cli, ["fetch-model", "--matrix", str(project / "matrix.yaml"), "--dry-run", "--json", "tiny-qwen3moe"]
    )
    assert res.exit_code == 0, res.output
    (m,) = _envelope(res.output)["result"]
    assert m["model"] == "tiny-qwen3moe" and m["exists"] is False and m["size_bytes"] is None
    assert m["status"].startswith("would generate ") and not Path(m["path"]).exists()
    text = CliRunner().invoke(cli, ["fetch-model", "--matrix", str(project / "matrix.yaml"), "tiny-qwen3moe"])
    assert text.exit_code == 0 and Path(m["path"]).is_file()  # the real fetch generates it
    again = CliRunner().invoke(
        cli, ["fetch-model", "--matrix", str(project / "matrix.yaml"), "--json", "tiny-qwen3moe"]
    )
    (m,) = _envelope(again.output)["result"]
    assert m["exists"] and m["size_bytes"] == Path(m["path"]).stat().st_size > 0


def test_push_dry_run_says_what_would_be_pushed_and_pushes_nothing(cpu_project):
    builds = (cpu_project / "results" / "builds.jsonl").read_text()
    args = ["push", "--matrix", str(cpu_project / "matrix.yaml"), "--registry", "127.0.0.1:9/r9700"]
    res = CliRunner().invoke(cli, [*args, "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "cpu: would tag sha256:" in res.output and "127.0.0.1:9/r9700/cpu:cpu-latest" in res.output
    assert "(dry run: nothing pushed)" in res.output
    js = CliRunner().invoke(cli, [*args, "--dry-run", "--json"])
    (r,) = _envelope(js.output)["result"]
    assert r["status"] == "dry-run" and r["refs"][1] == "127.0.0.1:9/r9700/cpu:cpu-latest"
    assert (cpu_project / "results" / "builds.jsonl").read_text() == builds  # nothing recorded


@pytest.mark.parametrize("spelling", ["-o", "--output", "--out"])
def test_export_run_takes_every_spelling_of_the_output_option(cpu_project, tmp_path, spelling):
    out = tmp_path / "published"
    res = CliRunner().invoke(
        cli,
        ["export-run", "run-a", spelling, str(out), "--matrix", str(cpu_project / "matrix.yaml"), "--json"],
    )
    assert res.exit_code == 0, res.output
    assert _envelope(res.output)["result"]["run_id"] == "run-a" and (out / "run.json").is_file()


def test_compare_against_a_second_results_folder(tmp_path):
    """Two hosts' results folders compared without importing one into the other: A of --results,
    B of --against DIR; the same refs in one folder find nothing."""
    base = _slower(load(CPU_A), 1.0, load(CPU_A)[0].image.digest)
    a = _store_with(tmp_path / "host-a" / "results", base)
    b = _store_with(tmp_path / "host-b" / "results", _slower(base, 0.5, "sha256:" + "0bad" * 16))
    args = ["compare", "--results", str(a.root), base[0].image.digest[:19], "0bad0bad", "--json"]
    alone = CliRunner().invoke(cli, args)
    assert alone.exit_code != 0 and "--against DIR" in str(alone.exception)
    res = CliRunner().invoke(cli, [*args, "--against", str(b.root)])
    got = _envelope(res.output)
    assert got["exit_code"] == 6 and got["result"]["regressions"] == len(got["result"]["rows"]) > 0
    assert got["result"]["b"]["ref"] == "0bad0bad" and not (a.root / "0bad0bad0bad").exists()


def test_measure_json_is_one_envelope_on_stdout_and_the_command_output_on_stderr(tmp_path):
    out = tmp_path / "m.jsonl"
    prog = [sys.executable, "-c", "print('from the command'); raise SystemExit(5)"]
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit", "measure", "--json", "-o", str(out), "--gpu", "none", "--", *prog],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 5, proc.stderr
    got = _envelope(proc.stdout)
    assert got["exit_code"] == 5 and not got["ok"] and "from the command" in proc.stderr
    r = got["result"]
    assert r["command"] == prog and r["exit_code"] == 5 and r["output"] == str(out) and r["rows"] == 0
    assert out.is_file()


def test_tune_json_carries_the_decision_per_axis():
    from toolkit.bench.tune import Candidate, Evidence, TuneResult
    from toolkit.cli.tune import _tune_json

    best = Evidence(Candidate((("n_ubatch", 2048),)), 120.0, 110.0, 130.0, 3, 9)
    default = Evidence(Candidate((("n_ubatch", 512),)), 100.0, 95.0, 105.0, 3, 9)
    res = TuneResult("s1", "prefill", "pp512", ranking=[best, default], default=default)
    got = _tune_json(res, None)
    assert got["best"]["candidate"] == {"n_ubatch": 2048} and got["best"]["median"] == 120.0
    assert got["default"]["candidate"] == {"n_ubatch": 512} and got["gain"] == pytest.approx(0.2)
    assert got["axis"] == "prefill" and got["matrix_diff"] is None
    json.dumps(got, allow_nan=False)


def test_campaign_render_k8s_takes_o_and_prints_its_files_as_json(tmp_path):
    import yaml

    from tests.support.e2e_helpers import make_project
    from tests.support.project import seed_current_build

    p = make_project(tmp_path, images=["cpu"], bench={"n_prompt": [32], "n_gen": [4]})
    data = yaml.safe_load((p / "matrix.yaml").read_text())
    data["campaign"] = {"gres_type": "fake", "hosts": [{"node": "gpu-node-1"}]}
    (p / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    rec = seed_current_build(p, "cpu")
    pushed = rec.model_copy(update={"repo_digests": ["reg.example/ns/cpu@sha256:" + "b" * 64]})
    ResultStore(p / "results").add_build(pushed)
    args = [
        "campaign",
        "render-k8s",
        "--matrix",
        str(p / "matrix.yaml"),
        "-o",
        str(tmp_path / "k8s"),
        "--json",
    ]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    files = _envelope(res.output)["result"]["files"]
    assert files and sorted(files) == sorted(str(f) for f in (tmp_path / "k8s").glob("*.yaml"))


def test_campaign_cancel_dry_run_names_the_jobs_and_cancels_none(tmp_path):
    """No Slurm here: a real cancel would run scancel and fail (exit 4/1); the dry run must not call it."""
    import yaml

    from tests.support.e2e_helpers import make_project
    from tests.support.project import seed_current_build
    from toolkit.campaign import slurm as cmod
    from toolkit.matrix.api import load_matrix

    p = make_project(tmp_path, images=["cpu"], bench={"n_prompt": [32], "n_gen": [4]})
    data = yaml.safe_load((p / "matrix.yaml").read_text())
    data["campaign"] = {"gres_type": "fake", "hosts": [{"node": "gpu-node-1"}]}
    (p / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    rec = seed_current_build(p, "cpu")
    pushed = rec.model_copy(update={"repo_digests": ["reg.example/ns/cpu@sha256:" + "b" * 64]})
    ResultStore(p / "results").add_build(pushed)
    c = cmod.plan(load_matrix(p / "matrix.yaml"), ResultStore(p / "results"))
    c.slices[0].job_id, c.slices[0].state = "4242", "running"
    cmod.save(c)
    args = ["campaign", "cancel", "--matrix", str(p / "matrix.yaml"), "--dry-run"]
    res = CliRunner().invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    assert _envelope(res.output)["result"] == {"campaign": c.id, "cancelled": [], "would_cancel": ["4242"]}
    text = CliRunner().invoke(cli, args)
    assert f"campaign {c.id}: would cancel (dry run) 4242" in text.output


def test_bench_summary_tables_are_sized_to_a_terminal_like_report():
    """Newcomer's find: bench's tables were markdown on a terminal while `toolkit report` gave text;
    the same resolution now (a pty is a terminal, a pipe is not)."""
    import io
    import os
    import pty

    from toolkit.cli.bench import summary_format

    primary, secondary = pty.openpty()
    try:
        with os.fdopen(secondary, "w") as tty:
            assert summary_format(tty) == "text"
    finally:
        os.close(primary)
    assert summary_format(io.StringIO()) == "github"


@pytest.mark.e2e  # the engine must answer: one that is down is exit 5, whatever else is skipped
def test_bench_that_measured_nothing_exits_2_and_says_why(tmp_path):
    """Tester's find (issue 33 item 5): `bench -i cpu` with every image skipped ("no build of cpu is
    recorded") exited 0, and --json said ok true. Nothing done is exit 2, as `push` of nothing."""
    root = Path(__file__).resolve().parents[1]
    res = subprocess.run(
        [sys.executable, "-m", "toolkit", "bench", "-i", "cpu", "--results", str(tmp_path / "r"), "--json"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert res.returncode == 2, res.stderr
    env = json.loads(res.stdout)
    assert env["ok"] is False and env["exit_code"] == 2
    assert "nothing measured (cpu: no build of cpu is recorded" in env["error"]
    assert env["result"][0]["status"] == "skipped"
