"""What brk48b broke in the forty-eighth session's changes, each through the door a user meets.

1. A run id of the RUN_ID form with runs `ID-tN` and `ID-x` beside them (not all tune trials) was taken
   as a tune session: `report --run ID` reported both, compare called them "tune session ID (2 trial
   runs)". Only `ID-tN` runs are a session's trials.
2. A DOCKER_HOST urllib cannot read (a port out of range, an IPv6 bracket left open) was refused as
   malformed by the engine's client and yet judged by doctor a "remote Docker engine" (two readings).
3. An import naming two model files of one name in two folders (`-m v1/model.gguf -m v2/model.gguf`),
   described alike, merged them into one cell as "repetitions that agree within noise": AlikeFiles
   told files apart by their names only.
4. A registry of more than 255 characters with its image name passed the grammar check, to be refused
   by the engine only when the push ran (exit 2); a 100 KB value was echoed whole in the refusal.

Records are built as bench and tune store them (tests.support.records); the CLI runs as a user runs
it (CliRunner, or a subprocess where the whole import path is meant). Nothing is mocked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.records import make_record, tune_trial
from tests.support.runs import tk
from toolkit.analysis import compare
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput
from toolkit.results import index as resultindex
from toolkit.results.records import ResultStore

ROOT = Path(__file__).resolve().parents[1]
ALIKE = ROOT / "tests" / "data" / "cases43" / "llamabench-0c1e57098-cpu-two-files-alike.jsonl"


# ------------------------------------------------------------------ 1. a tune session is its -tN runs


def test_runs_that_only_begin_with_a_run_id_are_not_a_tune_session(tmp_path):
    rid = "20260602T000000Z-c0ffee"
    store = ResultStore(tmp_path / "results")
    bench = make_record(
        "cpu", "cpu", p=2048, avg=3000.0, sd=5.0, gpu_info="", run_id="20260601T000000Z-0b0b0b"
    )
    store.add_result(bench)
    for suffix, avg in (("-t1", 3000.0), ("-x", 3100.0)):
        store.add_result(make_record("cpu", "cpu", p=512, avg=avg, sd=5.0, gpu_info="", run_id=rid + suffix))
    with pytest.raises(BadInput, match=f"run id '{rid}' begins 2 stored runs"):
        resultindex.full_run_ids(store, rid)  # was: both, as one tune session's trials
    with pytest.raises(BadInput, match="begins 2 stored runs"):
        compare.compare(store, bench.run_id, rid)  # was: "tune session ... (2 trial runs)"
    res = CliRunner().invoke(cli, ["report", "--results", str(store.root), "--run", rid])
    assert isinstance(res.exception, BadInput) and "give more of it" in str(res.exception), res.output
    session = "20260601T000000Z-a1b2c3"  # a real session: its -tN runs, whatever their number
    for n in (1, 2, 10):
        store.add_result(tune_trial(512 * n, [1000.0, 1010.0], session=session, run_id=f"{session}-t{n}"))
    assert len(resultindex.full_run_ids(store, session)) == 3
    assert compare.compare(store, bench.run_id, session).b.label == (f"tune session {session} (3 trial runs)")


# ------------------------------------------------------------------ 2. one reading of DOCKER_HOST


@pytest.mark.parametrize(
    ("where", "why"),
    [("tcp://gpu-node-7:99999", "Port out of range"), ("tcp://[fe80::1:2375", "Invalid IPv6 URL")],
)
def test_a_docker_host_urllib_cannot_read_is_malformed_and_judged_by_no_doctor_check(tmp_path, where, why):
    from toolkit.engine.choice import address_problem
    from toolkit.host.doctor_checks import remote_engine

    assert why in (address_problem(where) or "")
    assert remote_engine({}, {"DOCKER_HOST": where}, "this-host") is None
    res = tk(ROOT, "doctor", env={"DOCKER_HOST": where}, timeout=120)
    out = res.stdout + res.stderr
    assert f"DOCKER_HOST is malformed (DOCKER_HOST={where!r}: {why}" in out, out
    assert "remote Docker engine" not in out, out  # was: a remote engine at tcp://gpu-node-7, beside it
    assert "Traceback" not in out and res.returncode == 12, out


# ------------------------------------------------------------------ 3. two files of one name


def _rows(order: list[int]) -> str:
    lines = ALIKE.read_text().splitlines()
    moved = [
        ln.replace("/m/a.gguf", "/models/v1/model.gguf").replace("/m/b.gguf", "/models/v2/model.gguf")
        for ln in lines
    ]
    return "".join(moved[i] + "\n" for i in order)


def _imported(tmp_path: Path, name: str, text: str) -> list[dict]:
    src = tmp_path / f"{name}.jsonl"
    src.write_text(text)
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / name), "--label", "x")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "measure the same test" not in res.stdout + res.stderr, res.stdout + res.stderr
    return sorted(
        (
            json.loads(ln)
            for f in (tmp_path / name).glob("*/bench.jsonl")
            for ln in f.read_text().splitlines()
        ),
        key=lambda r: (r["model"]["path"], r["n_prompt"]),
    )


def test_two_model_files_of_one_name_in_two_folders_are_two_models_in_any_order(tmp_path):
    forward = _imported(tmp_path, "f", _rows([0, 1, 2, 3]))
    backward = _imported(tmp_path, "b", _rows([3, 2, 1, 0]))
    aparts = [(r["model"]["path"], r["model"].get("file_apart")) for r in forward]
    assert aparts == [
        ("/models/v1/model.gguf", None),
        ("/models/v1/model.gguf", None),
        ("/models/v2/model.gguf", "/models/v2/model.gguf"),  # the name alone tells it from no other
        ("/models/v2/model.gguf", "/models/v2/model.gguf"),
    ], aparts
    assert [r["model"] for r in backward] == [r["model"] for r in forward]
    res = CliRunner().invoke(cli, ["report", "--results", str(tmp_path / "f"), "--format", "github"])
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.output.splitlines() if ln.startswith("| pp16")]
    assert len(rows) == 2 and "/models/v2/model.gguf" in rows[0] and "()" not in res.output, rows


# ------------------------------------------------------------------ 4. a registry name's length


def test_a_registry_too_long_for_a_repository_name_is_refused_before_the_push():
    from toolkit.publish.push import parse_registry

    host = "r" * 240 + ".example"
    with pytest.raises(BadInput, match="with /IMAGE at most 255 characters"):
        parse_registry(host + "/ns", "--registry", ["vulkan-mesa"])  # 261 characters with /vulkan-mesa
    assert parse_registry(host, "--registry", ["cpu"]) == host  # 252
    res = CliRunner().invoke(cli, ["push", "--registry", "a" * 100_000, "--image", "cpu", "--dry-run"])
    assert isinstance(res.exception, BadInput) and len(str(res.exception)) < 1000  # was: 100 KB echoed


def test_an_import_whose_second_read_names_other_model_files_is_refused_not_read_forever(
    tmp_path, monkeypatch
):
    """AlikeFiles' re-read (a file of a lesser name came later) happens once: a second read that still
    disagrees read files that changed between the reads (a program still writing them), refused as
    such (exit 4), where it read them again and again until a RecursionError (exit 1). The change
    between two reads is stood in for by a settle that always disagrees (mocked: its timing cannot be
    made reliably on a loaded host)."""
    from toolkit.results.import_keys import AlikeFiles

    def disagree(self) -> None:
        raise AlikeFiles.Unsettled({fp: frozenset(ps) for fp, ps in self.paths.items()})

    monkeypatch.setattr(AlikeFiles, "settle", disagree)
    src = tmp_path / "f.jsonl"
    src.write_text(_rows([0, 1, 2, 3]))
    res = CliRunner().invoke(cli, ["import", str(src), "--results", str(tmp_path / "r"), "--label", "x"])
    assert isinstance(res.exception, BadInput), res.exception  # exit 4 under toolkit's main
    assert "changed while it was read (two reads named other model files)" in str(res.exception)
    assert not list((tmp_path / "r").glob("*/bench.jsonl"))


def test_export_runs_push_note_on_the_terminal_names_this_hosts_folders(tmp_path, matrix_data):
    """export-run from another folder: the note printed on the terminal gives the push with the matrix and
    results given (this host's folders: it runs here, pasted as printed); run.json keeps them scrubbed
    (`matrix.yaml`, `results`: no host path published). The terminal got the scrubbed one, which from
    another folder pointed at no matrix (brk48b)."""
    from tests.support.project import cpu_project
    from tests.support.runs import bench_records

    proj = tmp_path / "proj"
    cpu_project(proj, matrix_data)
    store = ResultStore(proj / "results")
    list(map(store.add_result, bench_records("run-p")))
    away = tmp_path / "away"
    away.mkdir()
    m, r = str(proj / "matrix.yaml"), str(proj / "results")
    res = tk(away, "export-run", "run-p", "-o", str(tmp_path / "out"), "--matrix", m, "--results", r)
    assert res.returncode == 0, res.stderr
    said = next(ln for ln in res.stderr.splitlines() if "never pushed" in ln)
    assert f"toolkit push --matrix {m} --image cpu" in said, said  # results/ beside it: said by the matrix
    kept = next(
        n for n in json.loads((tmp_path / "out" / "run.json").read_text())["notes"] if "never pushed" in n
    )
    assert str(tmp_path) not in kept and "--matrix matrix.yaml --image cpu" in kept, kept
