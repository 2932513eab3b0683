"""brk43: this session's changes (trim43, cases43, lead43) pushed with bad and hostile input.

Through the real CLI import and report where rows are concerned, and through doctor's own functions
for the engine address (no remote engine here: DOCKER_HOST is only read, never connected to, by
remote_engine). Each test failed on the code before its fix (de7cb37)."""

from __future__ import annotations

import bz2
import csv
import io
import shutil
import time
from pathlib import Path

import pytest

from tests.support.hosts import IMAGES, fake_host
from tests.support.runs import tk
from toolkit.host.doctor import diagnose, format_doctor
from toolkit.host.doctor_checks import remote_engine
from toolkit.runtimes.llama_bench import json_array
from toolkit.runtimes.llama_bench.readers import read_json_array

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "cases43"
RUN_T = (DATA / "llamabench-0c1e57098-cpu-t1-2.json").read_text()
RUN_CTK = (DATA / "llamabench-0c1e57098-cpu-ctk.json").read_text()
MERGED = (DATA / "llamabench-0c1e57098-cpu-t1-2-stderr-merged.json").read_text()


def _import(tmp_path: Path, text: str) -> tuple[str, list[dict]]:
    src = tmp_path / "runs.json"
    src.write_text(text)
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    page = tk(ROOT, "report", "--results", str(tmp_path / "r"), "--format", "csv")
    assert page.returncode == 0, page.stderr
    return out, list(csv.DictReader(io.StringIO(page.stdout)))


# A wrapper script's own log lines captured with the runs (`echo "[run 2] ..."; llama-bench -o json
# 2>&1 >> all.json`): a line that starts with `[` was taken for an array's start, or for an element.


def test_a_log_line_starting_with_a_bracket_between_appended_runs_keeps_every_row(tmp_path):
    """Reproducer: `[run 2] build b7001` before the second array opened an array of its own, the real
    array became its element (`not a JSON object (a list)`) and the second run's 4 rows vanished under
    a note saying the array ends in an incomplete record; exit 0, `imported 4 results`."""
    text = "[run 1] 2026-12-06 15:40\n" + RUN_CTK + "[run 2] build b7001\n" + MERGED
    out, rows = _import(tmp_path, text)
    assert "imported 8 results" in out, out
    assert "incomplete record" not in out and "left out" not in out, out
    assert sum(int(r["records"]) for r in rows) == 8, rows


def test_a_log_line_starting_with_a_bracket_between_elements_keeps_the_rest_of_the_array(tmp_path):
    """Reproducer: `[2026-12-06 15:40:01] benchmark 2/4` between two objects ended the array there
    (`the array ends in an incomplete record`): 1 of 4 rows imported, exit 0."""
    text = RUN_T.replace("},\n  {", "},\n[2026-12-06 15:40:01] benchmark 2/4\n[INFO] x\n  {")
    out, rows = _import(tmp_path, text)
    assert "imported 4 results" in out and "incomplete record" not in out, out
    assert sum(int(r["records"]) for r in rows) == 4, rows


@pytest.mark.parametrize(
    "text",
    [
        '[\n  {"a": 1},\n  [1, 2\n',  # a list element cut by a crash at its line's end
        '[\n  {"a": 1},\n  {"b": 2, "c":',  # an object cut by a crash
    ],
    ids=["list", "object"],
)
def test_an_element_cut_by_a_crash_is_still_said(text):
    """What the bracket rule must not take for a log line: an element whose own line could go on."""
    skipped: list[str] = []
    rows = read_json_array(text, skipped)
    assert [r.fields for r in rows] == [{"a": 1}], rows
    assert any("the array ends in an incomplete record" in s for s in skipped), skipped


@pytest.mark.parametrize(
    "between",
    ["[INFO] loading\n", "[1/4] x\n", "[[[[]]]]\n", "[ ]\n", '[{"a": 1}] trailing\n'],
)
def test_a_streamed_read_gives_what_a_whole_read_gives(between):
    """The streamed reader (blocks of a line each) and the whole read agree on rows and notes."""
    text = RUN_CTK + between + RUN_T
    whole_notes: list[str] = []
    streamed_notes: list[str] = []
    whole = [(r.line, r.fields) for r in read_json_array(text, whole_notes)]
    blocks = [ln + "\n" for ln in text.split("\n")]
    streamed = [(r.line, r.fields) for r in json_array.iter_json_array(blocks, streamed_notes)]
    assert whole == streamed and whole_notes == streamed_notes
    assert len(whole) >= 8, (whole_notes, len(whole))


def test_blank_text_between_arrays_is_stepped_over_at_regex_speed():
    """Reproducer: 8 MiB of blanks between two arrays took 2.5-7 s (a character at a time in Python;
    a 300 MB run of them about a minute and a half); now the skip itself is a regex match."""
    text = "[" + " " * (8 << 20) + "\n" + RUN_T[1:]
    t = json_array._JsonText([text], 1)
    t.fill()
    t.pos = 1
    started = time.process_time()
    assert t.skip(json_array._BLANKS_OR_COMMAS) and t.buf[t.pos] == "{"
    assert time.process_time() - started < 0.5


# lead43: a text file that starts with `BZh` (bzip2's first three bytes, and plain ASCII) was called
# bzip2-compressed and told to `bunzip2` it; an empty zip archive (PK\x05\x06) was not named.


def test_text_starting_with_bzh_is_not_called_bzip2(tmp_path):
    src = tmp_path / "log.txt"
    src.write_text("BZh hello, a log line\n")
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 4, res.stderr
    assert "compressed" not in res.stderr and "no llama-bench result rows found" in res.stderr, res.stderr


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (bz2.compress(b""), "bzip2"),
        (bz2.compress(RUN_T.encode()), "bzip2"),
        (b"PK\x05\x06" + bytes(18), "zip"),
    ],
    ids=["bzip2-empty", "bzip2", "zip-empty"],
)
def test_every_bzip2_and_zip_start_is_named(tmp_path, data, kind):
    src = tmp_path / "run.bin"
    src.write_bytes(data)
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 4 and f"a {kind}-compressed file" in res.stderr, res.stderr


# cases43: DOCKER_HOST addresses of this very host, spelled as the resolver takes them, were said to be
# a remote engine ("run `toolkit doctor` on that host"; GPU images refused unless probed).

LOCAL_ADDRESSES = [
    "tcp://r9700-box:2375",  # this host's own name (fake_host's hostname)
    "ssh://me@r9700-box.lan",
    "tcp://localhost.:2375",
    "tcp://localhost.localdomain:2375",
    "tcp://ip6-localhost:2375",
    "tcp://127.1:2375",
    "tcp://0x7f.1:2375",
    "tcp://2130706433:2375",
    "tcp://[::ffff:127.0.0.1]:2375",
    "tcp://[0:0:0:0:0:0:0:1]:2375",
    "tcp://0.0.0.0:2375",
    "tcp://[::]:2375",
]


@pytest.mark.parametrize("where", LOCAL_ADDRESSES)
def test_an_address_of_this_host_is_no_remote_engine(tmp_path, where):
    info = {"engine": "docker", "Name": "r9700-box", "ClientInfo": {"Context": "default"}}
    rep = diagnose(IMAGES, {}, env={"DOCKER_HOST": where}, docker_info=info, **fake_host(tmp_path))
    text = format_doctor(rep)
    assert "remote" not in text, text
    assert [v.runnable for v in rep.images if v.backend in ("rocm", "vulkan")] == [True, True, True], text


@pytest.mark.parametrize(
    "where",
    [
        "tcp://127.0.0.1.evil.com:2375",
        "tcp://localhost.evil.com:2375",
        "tcp://127.0.0.1%20evil:2375",
        "tcp://[::ffff:10.0.0.7]:2375",
        "tcp://[fe80::1%25eth0]:2375",
        "tcp://1.2.3.4.5:2375",
        "ssh://me@gpu-node-7",
    ],
)
def test_an_address_that_only_looks_local_is_still_remote(where):
    assert remote_engine({}, {"DOCKER_HOST": where}, "r9700-box") is not None


# A full disk (or a file-size limit) while the import keeps its records in its nameless spill files
# (O_TMPFILE) was said as `(unknown path): ...; free space, fix the permissions or choose another folder`.


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux's prlimit")
def test_a_full_disk_under_the_import_names_the_results_folder(tmp_path):
    """`prlimit --fsize` stands in for a full disk (EFBIG where ENOSPC would come; same path through
    the import, no mount needed); nothing is written."""
    src = tmp_path / "runs.json"
    src.write_text(RUN_T * 100)
    res = tk(
        tmp_path,
        "import",
        str(src),
        "--results",
        str(tmp_path / "r"),
        "--label",
        "x",
        prefix=["prlimit", "--fsize=200000", "--"],
    )
    assert res.returncode == 8, res.stdout + res.stderr
    assert "(unknown path)" not in res.stderr, res.stderr
    assert f"error: {tmp_path / 'r'}: File too large while keeping the import's records" in res.stderr
    assert "ulimit -f" in res.stderr, res.stderr
    assert not any((tmp_path / "r").rglob("bench.jsonl"))


def test_a_csv_row_whose_values_look_like_column_names_is_a_row_not_a_header(tmp_path):
    """Reproducer: a row whose model file is named `model_filename` and model type `n_prompt` was read
    as a new header (`-o csv >> FILE`'s second run): every row after it refused for it, exit 4."""
    rows = list(csv.reader(io.StringIO((DATA / "llamabench-0c1e57098-cpu-t1-2.csv").read_text())))
    header, first = rows[0], list(rows[1])
    first[header.index("model_filename")] = "model_filename"
    first[header.index("model_type")] = "n_prompt"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, first, *rows[2:]])
    src = tmp_path / "run.csv"
    src.write_text(out.getvalue())
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 0 and "imported 4 results" in res.stdout + res.stderr, res.stdout + res.stderr
