"""Integrity faults earlier sessions left (left46b), each reproduced before its fix:

- `import` of a csv whose FIRST data row (of the file, or of a run appended after it with its own
  header) was cut inside its first field, unquoted (`0c1e5`), read it past as a log line: only a line
  that was the start of the row before it's first field was refused, and the first row has none before
  it. One bare value on a line (no space, no `name:`) is a row cut short (cut_records.csv_log_line).
- JSONL `import` read past a line of JSON that is no object when jsonsafe refused it for a bound (a list
  nested deeper than 64 levels, a number of 4300 digits; in a streamed import, a `[` line over 8 MiB),
  where a list within the bounds was noted with its line number: only a line that is no JSON at all
  (`[INFO] ...`) is a log line (readers.not_a_record).
- Two model files of one import that llama-bench describes alike (same model_type, size and parameters:
  two fine-tunes of one base quantized alike, `-m a.gguf -m b.gguf`) were one model: their rows became
  repetitions of one cell (a mean of two models, flagged runs-disagree). The file says they are two
  files: the second file's rows carry its name in their model identity (import_keys.AlikeFiles).
- `report --format csv` of an imported vLLM result had no time at all (its `date` is the host's local
  time, no zone: measured_from_utc stays empty), where the md page says `measured: ... local time`: the
  csv's `measured_local` carries it (Facts.local_date).
- `bench` through a container engine on another host (DOCKER_HOST=tcp://..., ssh://, a docker context's
  endpoint, Podman's CONTAINER_HOST) checked and passed THIS host's /dev/kfd and render nodes (and
  their group ids) to that host's containers. A GPU image is now not run through it: its line says the
  engine is remote and the fix (bench on that host, or point the engine at this host's).
  bench.decide.engine_elsewhere. No remote engine exists here: a fake DOCKER_HOST at a `.invalid` host
  (never resolved: the decision asks no engine) and a fake R9700 host (tests/support/hosts.py).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.support.runs import import_text, tk
from toolkit.core import jsonsafe
from toolkit.runtimes.llama_bench import readers

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _bare_csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)  # minimal quoting (a spreadsheet's csv): none here
    return out.getvalue()


@pytest.mark.parametrize("cut", ["0c1e5", "0c1e57098", "tiny-qwen3moe.gg"])
def test_a_csv_whose_first_row_is_cut_in_its_first_field_refuses_it(tmp_path: Path, cut: str) -> None:
    rows = list(csv.reader((DATA / "llamabench-0c1e57098-cpu.csv").open()))
    text = _bare_csv(rows[:1]) + cut + "\n" + _bare_csv(rows[1:4])
    (tmp_path / "cut.csv").write_text(text)
    res = tk(tmp_path, "import", "--results", "r", "--label", "x", "cut.csv")
    assert res.returncode == 0 and "imported 3 results" in res.stdout, res.stderr
    assert "cut.csv:2: 1 fields, the header has 42" in res.stderr, res.stderr
    again = text + _bare_csv(rows[:1]) + cut + "\n" + _bare_csv(rows[4:])  # a second run, its first row cut
    got = readers.read_csv(again)
    assert [r.line for r in got if r.problem] == [2, 7], [(r.line, r.problem) for r in got]
    assert len([r for r in got if not r.problem]) == 3 + len(rows[4:])


def test_log_lines_before_a_csvs_first_row_are_still_read_past() -> None:
    rows = list(csv.reader((DATA / "llamabench-0c1e57098-cpu.csv").open()))
    log = ["llama-bench: benchmark 1/6: starting", "..........", "Device 0: CPU, 2 threads", ""]
    got = readers.read_csv(_bare_csv(rows[:1]) + "\n".join(log) + "\n" + _bare_csv(rows[1:]))
    assert not [r for r in got if r.problem] and len(got) == len(rows) - 1, got


@pytest.mark.parametrize("word", ["Killed", "Terminated", "42", "done."])
def test_a_bare_word_after_a_csvs_rows_is_still_a_log_line(word: str) -> None:
    """brk46b: a shell's `Killed` (a run's end, captured with `2>&1`) after rows is no start of their
    first field: read past as before left46b, not a refused row "1 fields, the header has 42"; the same
    word as a run's first row (after its header, of the file or appended) is still refused."""
    rows = list(csv.reader((DATA / "llamabench-0c1e57098-cpu.csv").open()))
    got = readers.read_csv(_bare_csv(rows) + word + "\n")
    assert not [r for r in got if r.problem] and len(got) == len(rows) - 1, got
    again = _bare_csv(rows) + _bare_csv(rows[:1]) + word + "\n" + _bare_csv(rows[1:])
    got = readers.read_csv(again)
    assert [r.line for r in got if r.problem] == [len(rows) + 2], [(r.line, r.problem) for r in got]


JSONL = (DATA / "cases43" / "llamabench-0c1e57098-cpu-two-files-alike.jsonl").read_text().splitlines()


@pytest.mark.parametrize(
    "bad, why",
    [
        ("[" * 65 + "]" * 65, "nested deeper than 64 levels"),
        ("[" * 65 + '{"avg_ts": 1}' + "]" * 65, "nested deeper than 64 levels"),
        ("[" + "1" * 5000 + "]", "a number of more than 4300 digits"),
    ],
    ids=["deep-list", "deep-record", "digits"],
)
def test_a_jsonl_line_of_json_past_a_bound_is_noted_with_its_line(tmp_path: Path, bad: str, why: str) -> None:
    for at in (0, 2):  # the first line (no format found yet) and one among the records
        lines = [*JSONL[:at], bad, *JSONL[at:]]
        out = import_text(ROOT, tmp_path / str(at), "runs.jsonl", "\n".join(lines) + "\n")
        assert "imported 4 results" in out, out
        assert f"runs.jsonl:{at + 1}: JSON that cannot be read ({why}): left out" in out, out


def test_a_streamed_jsonl_import_notes_a_deep_line_and_an_over_long_list(tmp_path: Path) -> None:
    huge = "[" + "1," * (jsonsafe.MAX_LINE_BYTES // 2) + "1]"  # over 8 MiB: the file is read as a stream
    lines = [JSONL[0], "[" * 65 + "]" * 65, JSONL[1], huge, *JSONL[2:], "[INFO] a log line: read past"]
    out = import_text(ROOT, tmp_path, "runs.jsonl", "\n".join(lines) + "\n")
    assert "imported 4 results" in out and "INFO" not in out, out
    assert "runs.jsonl:2: JSON that cannot be read (nested deeper than 64 levels)" in out, out
    assert f"runs.jsonl:4: JSON that cannot be read (longer than {jsonsafe.MAX_LINE_BYTES} bytes)" in out, out


def test_two_model_files_described_alike_in_one_import_are_two_models(tmp_path: Path) -> None:
    rows = [json.loads(ln) for ln in (ROOT / "tests" / "data" / "cases" / "two-models-one-file.jsonl").open()]
    for r in rows[2:]:  # model b described exactly as model a (type, size, parameters), its own file
        r.update({k: rows[0][k] for k in ("model_type", "model_size", "model_n_params")})
        r["model_filename"] = "/models/model-a-24B-Instruct-Q4_K_M.gguf"
    text = "".join(json.dumps(r) + "\n" for r in rows)
    out = import_text(ROOT, tmp_path, "runs.jsonl", text)
    assert "imported 4 results" in out and "same test" not in out, out
    page = tk(tmp_path, "report", "--results", "r", "--format", "csv")
    got = sorted((r["test"], r["model"], r["avg_ts"]) for r in csv.DictReader(io.StringIO(page.stdout)))
    assert got == [
        ("pp512 ub512", "model-a-24B-Instruct-Q4_K_M.gguf", "900.0"),
        ("pp512 ub512", "model-a-24B-Q4_K_M.gguf", "160.0"),
        ("tg128", "model-a-24B-Instruct-Q4_K_M.gguf", "75.0"),
        ("tg128", "model-a-24B-Q4_K_M.gguf", "24.0"),
    ], page.stdout + page.stderr
    again = tk(tmp_path, "import", "--results", "r", "--label", "x", "runs.jsonl")  # the same rows again
    assert again.returncode == 0 and "nothing added" in again.stdout + again.stderr, again.stderr


def test_a_csv_report_of_an_imported_vllm_result_carries_its_local_time(tmp_path: Path) -> None:
    import shutil

    shutil.copy(DATA / "vllm-0.16.0-serve.json", tmp_path / "serve-128-32-c2.json")  # `date`: 20261129-171502
    res = tk(tmp_path, "import", "--results", "r", "--label", "v", "serve-128-32-c2.json")
    assert res.returncode == 0, res.stderr
    page = tk(tmp_path, "report", "--results", "r", "--format", "md")
    assert "measured: 2026-11-29 17:15:02 local time of the benchmark host" in page.stdout, page.stdout
    table = tk(tmp_path, "report", "--results", "r", "--format", "csv")
    (row,) = list(csv.DictReader(io.StringIO(table.stdout)))
    assert (row["measured_from_utc"], row["measured_local"]) == ("", "2026-11-29 17:15:02"), row


@pytest.mark.parametrize(
    "var, where",
    [
        ("DOCKER_HOST", "tcp://gpu-node-7.invalid:2375"),
        ("DOCKER_HOST", "ssh://me@gpu-node-7.invalid"),
        ("CONTAINER_HOST", "ssh://me@gpu-node-7.invalid/run/podman/podman.sock"),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_gpu_image_is_not_given_this_hosts_devices_through_a_remote_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, where: str, dry_run: bool
) -> None:
    from tests.support.hosts import host
    from toolkit.bench import decide
    from toolkit.bench.runners.base import BenchOptions
    from toolkit.host import devices
    from toolkit.matrix.api import load_matrix
    from toolkit.results.records import ResultStore

    gpus, dev = host(tmp_path, "one-gpu")  # this host: one R9700, /dev/kfd and renderD128 (stand-ins)
    for name in ("shortfall", "profile_for"):  # read at this host's stand-in /dev unless told another
        real = getattr(devices, name)
        monkeypatch.setattr(
            devices, name, lambda b, g, *a, _f=real, **k: _f(b, g, *a, **({"dev": dev} if not a else {}), **k)
        )
    monkeypatch.setenv("TOOLKIT_ENGINE", "podman" if var == "CONTAINER_HOST" else "docker")
    lm = load_matrix(ROOT / "matrix.yaml")
    store = ResultStore(tmp_path / "results")
    opts = BenchOptions(dry_run=dry_run)
    for backend in ("rocm", "vulkan"):
        spec = next(s for s in lm.m.images if s.name == backend)
        monkeypatch.delenv(var, raising=False)
        here = decide._decide_image(lm, spec, lm.m.models, store, gpus, opts)  # the local engine
        if dry_run:
            assert any(str(dev) in " ".join(d.ctx.profile.devices) for d in here if d.ctx), here
        monkeypatch.setenv(var, where)
        got = decide._decide_image(lm, spec, lm.m.models, store, gpus, opts)
        said = " ".join(d.reason for d in got)
        assert "GPU devices through a remote " in said and "gpu-node-7.invalid" in said, said
        assert "run `toolkit bench` on that host" in said, said
        assert not any(str(dev) in " ".join(d.ctx.profile.devices) for d in got if d.ctx), got
        if not dry_run:
            assert [d.status for d in got] == ["skipped"], got
    cpu = next(s for s in lm.m.images if s.name == "cpu")  # no device: runs through any engine
    assert "remote" not in " ".join(
        d.reason for d in decide._decide_image(lm, cpu, lm.m.models, store, gpus, opts)
    )
