"""What a newcomer on a fresh host saw: the piped report (markdown) doubling decode rows by ub where the
terminal and `toolkit bench` fold them, help texts naming flags the command does not have, a report
that names the toolkit's version but not its commit, and setup-host.sh installing debootstrap
before saying why."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import click
import pytest

from tests.support.records import make_record
from toolkit import __version__
from toolkit.analysis import provenance, report, table_text
from toolkit.analysis.flag_help import FLAG_HELP
from toolkit.cli.main import cli
from toolkit.cli.reference import _walk

ROOT = Path(__file__).resolve().parent.parent

# ------------------------------------------------------------------------- decode rows in every format


def _decode_rows(fmt: str, text: str) -> list[str]:
    """The test labels of the decode table's rows as `fmt` prints them."""
    part = text[text.index("Decode (tg)") :]
    if fmt == "github":
        lines = [ln for ln in part.splitlines()[1:] if ln.startswith("|")]
        return [ln.split("|")[1].strip() for ln in lines[2:]]
    if fmt == "html":
        table = part[: part.index("</table>")]
        return re.findall(r"<tr><td>([^<]*)</td>", table)
    lines = part.splitlines()
    dashes = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    rows = []
    for ln in lines[dashes + 1 :]:
        if not ln.strip() or ln.startswith("- "):
            break
        rows.append(ln.split("  ")[0])
    return rows


def _ub_records():
    recs = [
        make_record("hip", "rocm", n=128, ub=ub, avg=90.0 + ub / 10000, sd=0.5) for ub in (512, 2048)
    ]  # equal within noise
    recs += [make_record("hip", "rocm", p=512, ub=ub, avg=3000.0 + ub, sd=5.0) for ub in (512, 2048)]
    return recs


@pytest.mark.parametrize("fmt", ["github", "text", "html"])
def test_every_table_format_folds_decode_over_the_micro_batch_and_says_so(fmt):
    """`toolkit report | cat` (github) showed tg128 once per ub while the terminal's table, bench's
    closing table and the page fold them into one row under a note saying ub does not apply to tg.
    The terminal's note stands under the tables, as github's (tidy41: it was in the Columns list above
    them, before the table it describes; the page keeps it among its Columns, test_report)."""
    text = report.render(_ub_records(), fmt, width=200)
    assert _decode_rows(fmt, text) == ["tg128"], text
    assert "90.05" in text[text.index("Decode (tg)") :]  # the ub512 record's, as the note says
    assert "90.20" not in text[text.index("Decode (tg)") :]
    flat = " ".join(html.unescape(re.sub(r"<[^>]*>", " ", text) if fmt == "html" else text).split())
    note = flat.index(" ".join(table_text.DECODE_UB_NOTE.split()))
    assert note > flat.index("Decode (tg)") if fmt != "html" else note < flat.index("Prefill (pp)")
    assert "pp512 ub512" in text and "pp512 ub2048" in text  # prefill keeps its micro-batch axis


def test_the_fold_note_is_true_of_csv_and_json_which_keep_every_measurement():
    """The note under every folded table says every measurement is in csv / json: it must be."""
    recs = _ub_records()
    csv = report.render(recs, "csv")
    assert "decode,tg128 ub512," in csv and "decode,tg128 ub2048," in csv
    doc = report.render(recs, "json")
    assert '"test": "tg128 ub512"' in doc and '"test": "tg128 ub2048"' in doc


def test_a_decode_table_with_one_micro_batch_has_no_fold_note():
    recs = [make_record("hip", "rocm", n=128, ub=512, avg=90.0, sd=0.5)]
    for fmt in ("github", "text", "html"):
        text = report.render(recs, fmt, width=200)
        assert _decode_rows(fmt, text) == ["tg128"]
        assert "decode rows: the micro-batch" not in text


# ------------------------------------------------------------------- every flag a help text names is real


def _helps() -> list[tuple[str, click.Command, str]]:
    """(path, command, its --help as one line) of every command, unwrapped (a very wide terminal)."""
    out = []
    for path, cmd in _walk(cli, ["toolkit"]):
        ctx = click.Context(cmd, info_name=" ".join(path), terminal_width=10_000, max_content_width=10_000)
        out.append((" ".join(path), cmd, " ".join(cmd.get_help(ctx).split())))
    return out


def _option(cmd: click.Command, name: str) -> click.Option | None:
    return next(
        (p for p in cmd.params if isinstance(p, click.Option) and name in (*p.opts, *p.secondary_opts)),
        None,
    )


def _example_faults(example: str) -> list[str]:
    """What is not real in a `toolkit ...` example: an option its command lacks, a command that does
    not exist. After a bare `--` the words are another program's (toolkit measure -- llama-bench ...)."""
    faults = []
    for part in re.split(r"&&|\|\||[|;]", example):
        words = part.split()
        if not words or words[0] != "toolkit":
            continue
        cmd: click.Command = cli
        skip = False
        for w in words[1:]:
            if skip:
                skip = False
                continue
            if w == "--":
                break
            if w.startswith("-") and not w[1:2].isdigit():
                opt = _option(cmd, w.split("=", 1)[0])
                if opt is None and w != "--help":
                    faults.append(f"`{part.strip()}`: {cmd.name} has no {w}")
                skip = opt is not None and not opt.is_flag and "=" not in w
            elif isinstance(cmd, click.Group):
                if w not in cmd.commands:
                    faults.append(f"`{part.strip()}`: no command {w}")
                    break
                cmd = cmd.commands[w]
    return faults


def help_faults(path: str, cmd: click.Command, text: str) -> list[str]:
    """Flags a command's help names that are not real: a `--flag` outside a quoted example that the
    command does not have, an option or command of a quoted `toolkit ...` example that does not exist,
    a `-x` quoted alone that the command does not have. A quoted example of another program
    (`llama-bench -o jsonl`) is that program's."""
    faults = []
    for span in re.findall(r"`([^`]*)`", text):
        words = span.split()
        if not words:
            continue
        if words[0] == "toolkit":
            faults += _example_faults(span)
        elif words[0].startswith("-") and words[0] != "--" and _option(cmd, words[0]) is None:
            faults.append(f"`{span}`: {path} has no {words[0]}")
    bare = re.sub(r"`[^`]*`", "", text)
    for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", bare):
        if flag != "--help" and _option(cmd, flag) is None:
            faults.append(f"{path} names {flag}, which it does not have")
    return faults


def _paren(text: str, start: int) -> str:
    """The text inside the parentheses opening at text[start] (nested ones kept)."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1 : i]
    return text[start + 1 :]


def row_flag_faults(path: str, text: str) -> list[str]:
    """Row flags a help text names that the tables never show: each name of a `flags (a, b, ...)` list
    (prose may lead an item up to its colon, `and what telemetry saw: gpu-shared`; `:<reason>` and a
    closing `...` are not names), and each `flagged `name``, must be a flag of FLAG_HELP."""
    names = []
    for m in re.finditer(r"\bflags \(", text):
        for item in re.split(r",\s*", _paren(text, m.end() - 1)):
            item = item.split(": ")[-1].replace(":<reason>", "").strip(" .`")
            item = item.removeprefix("and ")
            if item:
                names.append(item)
    names += re.findall(r"\bflagged `([^`]*)`", text)
    names += re.findall(r"\bFlag [^`]*?rows `([^`]*)`", text)
    return [f"{path}: {n!r} is no row flag" for n in names if n not in FLAG_HELP]


def test_every_flag_named_in_a_commands_help_is_real():
    """`toolkit report --help` named flags the option list does not hold (`implausible bandwidth`), the
    main help `--all` and `--allow-concurrent` as if its own, reproduce `--twin`, measure llama-bench's
    `--progress` bare."""
    faults = []
    for path, cmd, text in _helps():
        faults += help_faults(path, cmd, text) + row_flag_faults(path, text)
    assert not faults, "\n".join(faults)


def test_the_help_checks_catch_what_the_newcomer_saw():
    """The checks above can fail: each fault the newcomer met, put back, is found."""
    report_cmd = cli.commands["report"]
    assert help_faults("toolkit report", report_cmd, "written to --out-file")
    assert help_faults("toolkit", cli, "`toolkit build --al` builds every one")
    assert help_faults("toolkit", cli, "beside another benchmark (--allow-concurrent; ...)")
    assert not help_faults("toolkit", cli, "`toolkit --engine podman build -i cpu --all`")
    assert help_faults("toolkit reproduce", cli.commands["reproduce"], "(toolkit fetch-model --twin)")
    assert not help_faults("toolkit measure", cli.commands["measure"], "`toolkit measure -- x --progress`")
    assert row_flag_faults("toolkit report", "with flags (ub-no-effect, noisy, implausible bandwidth, ...)")
    assert not row_flag_faults(
        "toolkit report", "flags (noisy, and what telemetry saw: throttled:<reason>, ...)"
    )


# ------------------------------------------------------------------------ the toolkit's commit, reported


def test_the_report_says_the_commit_of_the_toolkit_that_measured_beside_its_version():
    """The header named `toolkit 0.1.0` (the image's label) but not which code: a record carries the
    measuring toolkit's version and commit (host.toolkit, from bench), and every format says it."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    r = make_record(
        "cpu", "cpu", p=512, avg=100.0, sd=1.0, host={"toolkit": {"version": "0.1.0", "commit": commit}}
    )
    r.image.labels = {"org.toolkit.version": "0.1.0"}
    (line,) = provenance.provenance([r]).images
    assert "toolkit 0.1.0 (commit 0123456789ab)" in line, line
    for fmt in ("github", "text", "html", "json"):
        assert "toolkit 0.1.0 (commit 0123456789ab)" in report.render([r], fmt, width=300), fmt


def test_a_toolkit_other_than_the_images_builder_is_named_as_the_one_that_measured():
    r = make_record(
        "cpu", "cpu", p=512, avg=100.0, sd=1.0, host={"toolkit": {"version": "0.2.0", "commit": "f" * 40}}
    )
    r.image.labels = {"org.toolkit.version": "0.1.0"}
    (line,) = provenance.provenance([r]).images
    assert "toolkit 0.1.0, measured by toolkit 0.2.0 (commit ffffffffffff)" in line, line
    old = make_record("cpu", "cpu", p=512, avg=100.0, sd=1.0)  # recorded before: as it was
    old.image.labels = {"org.toolkit.version": "0.1.0"}
    assert provenance.provenance([old]).images[0].endswith("toolkit 0.1.0 (commit not recorded)")


def test_bench_records_the_toolkits_commit_from_its_own_checkout(tmp_path, monkeypatch):
    """Every record's host facts carry the toolkit that measured (bench.run._host_facts): its version,
    and its commit where it runs from a git checkout; an installed copy records the version alone."""
    from toolkit.bench import run
    from toolkit.host import info

    monkeypatch.setattr(run.hostinfo, "host_facts", lambda: {"os": "x"})
    monkeypatch.setattr(run.engine, "engine_info", lambda **_: {"engine": "docker"})
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if (ROOT / ".git").exists() and head.returncode == 0:  # this checkout (CI's is one)
        got = {k: v for k, v in run._host_facts()["toolkit"].items() if k != "dirty"}  # test_dirty_checkout
        assert got == {"version": __version__, "commit": head.stdout.strip()}
    monkeypatch.setattr(info, "TOOLKIT_ROOT", tmp_path)  # an installed copy, not a checkout
    assert run._host_facts()["toolkit"] == {"version": __version__}


# ----------------------------------------------------------------------------- setup-host.sh's words


def test_setup_says_why_it_installs_debootstrap_before_installing_it(tmp_path):
    text = (ROOT / "scripts" / "setup-host.sh").read_text()
    m = re.search(r"^if ! command -v debootstrap(?s:.*?)^fi$|^command -v debootstrap.*$", text, re.M)
    assert m, "setup-host.sh no longer installs debootstrap where it is absent"
    sh = (
        'log() { printf "[setup] %s\\n" "$*" >&2; }\n'
        'apt_install() { log "installing $*"; }\n'
        f"PATH={tmp_path}\n" + m.group(0) + "\n"
    )
    res = subprocess.run(["/bin/bash", "-c", sh], capture_output=True, text=True, check=True)
    lines = res.stderr.splitlines()
    assert lines[-1] == "[setup] installing debootstrap", lines
    assert len(lines) == 2 and "debootstrap" in lines[0] and "registry" in lines[0], lines


def test_the_json_report_lists_the_failed_records_the_text_report_points_to():
    """Newcomer: `toolkit report -i vllm-serve` said "1 failed; `toolkit report --json` lists them
    with their errors", and the json held only the count."""
    bad = make_record(
        "vllm", "rocm", n=128, avg=1.0, status="failed", error="generated 8 of 256 requested tokens"
    )
    text = report.render([bad], "text", width=120)
    assert "1 failed" in text and "--json" in text
    doc = json.loads(report.render([bad], "json"))
    assert [(f["image"], f["status"], f["error"]) for f in doc["failed"]] == [
        ("vllm", "failed", "generated 8 of 256 requested tokens")
    ]


def test_report_in_a_project_not_yet_benched_says_to_bench_not_to_move(tmp_path, monkeypatch):
    """Newcomer: `toolkit report` in a fresh clone said "no results folder ... run from the project
    folder or pass --results DIR", although it ran in the project folder: nothing was measured yet."""
    from click.testing import CliRunner

    (tmp_path / "matrix.yaml").write_text((Path(__file__).parents[1] / "matrix.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["report"])
    said = res.output  # nothing measured yet: exit 0 as for an empty results/ (docs/exit-codes.md, fix48c)
    assert res.exit_code == 0 and "no results yet" in said and "toolkit bench" in said, said
    assert "run from the project folder" not in said and not (tmp_path / "results").exists()


def test_the_reports_host_line_names_the_engine_that_ran():
    """Newcomer (Podman host): the host line said "engine 5.4.2"; only the column legend said Podman."""
    for engine, word in (("podman", "Podman 5.4.2"), ("docker", "Docker 5.4.2")):
        r = make_record(
            "cpu", "cpu", p=512, avg=100.0, host={"docker": {"engine": engine, "server_version": "5.4.2"}}
        )
        assert word in report.render([r], "github")
