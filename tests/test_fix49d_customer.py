"""A customer of a published run (nc49 S2, S3, S5, S6): every hint printed in or about the folder
`toolkit export-run` wrote pastes and runs; reproduce's closing lines and the README say how to see and
compare the reproduced run; the report and README say what each image was built from; reading the
folder never writes an html page into it; the export names no machine.

- S2: `compare A B --against .` in the folder (after `toolkit reproduce .`) hinted `--results .` and
  `--against <that folder>`, both failing the same way: the hint is now the command to paste
  (results.need_records_beside, shared by report, compare and export-run; publish.REPRODUCED passed in);
- S3: template hash, base image and source origin were only in run.json / builds.jsonl: a `build` line
  per image (provenance.built_from; bench copies the build's source_origin into each record's image);
- S5: `report --results . --format html` wrote report.html and report-plots/ into the folder: -o needed;
- S6: builds.jsonl published the Docker engine ID; older records' hostname and kernel cmdline too.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.support.exported import (
    ENGINE,
    NEW,
    ORIGIN,
    RUN,
    build_record,
    exported_folder,
    labelled_records,
    pasted_commands,
)
from tests.support.runs import bench_records, tk


def test_every_hint_in_an_export_folder_pastes_and_runs(tmp_path: Path, matrix_data: dict) -> None:
    """In the folder after `toolkit reproduce .`: `compare NEW RUN --against .` named `--results .` and
    `--against <the folder>` (both exit 4 again); report and export-run named `--results .`. Each command
    the refusal gives now runs as pasted (exit 0), in the folder and from the folder above it."""
    out = exported_folder(tmp_path, matrix_data)
    for cwd in (out, out.parent):
        there = [] if cwd == out else ["--matrix", "r1/matrix.yaml"]
        for args in (
            ("compare", NEW, RUN, "--against", "."),
            ("report",),
            ("export-run", RUN, "-o", str(tmp_path / f"again-{cwd.name}")),
        ):
            if cwd != out and args[0] == "compare":
                args = ("compare", NEW, RUN, "--against", "r1")
            got = tk(cwd, *args[:1], *there, *args[1:])
            assert got.returncode == 4 and "is a run `toolkit export-run` wrote" in got.stderr, got.stderr
            hints = pasted_commands(got.stderr)
            assert hints, got.stderr
            for words in hints:
                again = tk(cwd, *words)
                assert again.returncode == 0, (cwd, words, again.stderr)
    got = tk(out, "compare", NEW, RUN)
    assert (
        "`toolkit compare 20261128T195305Z-4ad4d9 20261128T195135Z-e6f7c7 --results reproduce/results --against .`"
        in (got.stderr)
    ), got.stderr
    got = tk(out, "report")
    assert "`toolkit report --results reproduce/results`" in got.stderr, got.stderr


def test_without_a_reproduction_compare_names_reproduce(tmp_path: Path, matrix_data: dict) -> None:
    """No run reproduced in the folder: compare's refusal says to measure one (`toolkit reproduce .`), and
    its `--results .` command runs as pasted for two images of the published run's folder."""
    out = exported_folder(tmp_path, matrix_data, reproduced=False)
    got = tk(out, "compare", "cpu", "cpu")
    assert got.returncode == 4 and "`toolkit reproduce .`" in got.stderr, got.stderr
    assert "`toolkit compare cpu cpu --results .`" in got.stderr, got.stderr
    assert "--against" not in got.stderr, got.stderr


def test_reproduce_and_the_readme_say_how_to_see_and_compare_the_reproduced_run(
    tmp_path: Path, matrix_data: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reproduce's last line said where the results went ("results in .../reproduce/results"), not how to
    read them: its closing lines are now the report and compare commands, from where the user stands;
    each runs as printed (text and markdown alike). The README says the same with NEW_RUN to fill in."""
    from toolkit.publish import repro_output
    from toolkit.publish import reproduce as repro

    out = exported_folder(tmp_path, matrix_data)
    rows = repro.compare_records(labelled_records(RUN), labelled_records(NEW, scale=1.01), threshold=5)
    rep = repro.Reproduction(RUN, NEW, out, out / "reproduce" / "results", 5, rows=rows)
    for cwd in (out, tmp_path):
        monkeypatch.chdir(cwd)
        for fmt in ("text", "github"):
            tail = repro_output.format_reproduction(rep, fmt).splitlines()[-2:]
            assert tail[0].startswith("see the reproduced run: `toolkit report"), tail
            assert tail[1].startswith("compare it with the published run"), tail
            for words in pasted_commands("\n".join(tail)):
                got = tk(cwd, *words, "--format", "github")
                assert got.returncode == 0, (words, got.stderr)
                assert NEW in got.stdout, got.stdout
    readme = (out / "README.md").read_text()
    for cmd in re.findall(r"`(toolkit (?:report|compare) [^`]*reproduce/results[^`]*)`", readme):
        got = tk(out, *shlex.split(cmd.replace("NEW_RUN", NEW))[1:], "--format", "github")
        assert got.returncode == 0, (cmd, got.stderr)
    assert len(re.findall(r"reproduce/results", readme)) == 2, readme


def test_the_report_and_readme_say_what_each_image_was_built_from(tmp_path: Path, matrix_data: dict) -> None:
    """Template hash, source origin (GitHub fell back to PyPI's sdist) and base image were in run.json and
    builds.jsonl only: `toolkit report --results .` has a `build` line per image, the README one below
    each image, the JSON report `builds`; records without them say `not recorded`, a build without
    source says none, an import has no build line."""
    from tests.support.records import make_record
    from toolkit.analysis import provenance
    from toolkit.bench.runners.base import image_ref
    from toolkit.matrix.api import load_matrix

    out = exported_folder(tmp_path, matrix_data)
    said = "template hash 4fae2c6a9b36, base image debian:trixie-slim, source pypi:llama-cpp-python==0.3.36"
    got = tk(out, "report", "--results", ".", "--format", "github")
    assert got.returncode == 0 and f"- build cpu@9206eeaed761: {said}" in got.stdout, got.stdout
    got = tk(out, "report", "--results", ".", "--json")
    assert json.loads(got.stdout)["provenance"]["builds"] == [f"cpu@9206eeaed761: {said}"], got.stdout
    assert f"  - built from: {said}" in (out / "README.md").read_text()
    # bench copies the build's origin into each record's image (None: a build without source)
    spec = load_matrix(out / "matrix.yaml").m.images[0]
    assert image_ref(build_record("sha256:" + "ab" * 32), spec).model_extra == {
        "source_origin": ORIGIN, "inputs_key": None, "current_inputs_key": None, "stale": False,
    }  # fmt: skip
    old = bench_records(RUN)  # recorded before bench kept the origin, no labels
    assert (
        provenance.built_from(old)
        == "template hash not recorded, base image not recorded, source not recorded"
    )
    none = [
        r.model_copy(update={"image": image_ref(build_record(r.image.digest, origin=None), spec)})
        for r in old
    ]
    assert provenance.built_from(none) == "template hash 4fae2c6a9b36, base image debian:trixie-slim"
    imported = make_record("imp", "cpu", p=512, avg=100.0, sd=1.0, digest="import:abc")
    assert provenance.built_from([imported]) is None and provenance.provenance([imported]).builds == []


def test_an_html_report_of_a_published_folder_is_never_written_into_it(
    tmp_path: Path, matrix_data: dict
) -> None:
    """`report --results . --format html` in the folder wrote report.html and report-plots/ into it, where
    docs/publish.md says reading it never writes: exit 4 naming -o and a file beside the folder; that
    command as pasted writes the page there, the folder untouched; -o inside it, named, is honoured."""
    out = exported_folder(tmp_path, matrix_data)
    before = sorted(p.name for p in out.iterdir())
    for cwd, results in ((out, "."), (out.parent, "r1")):
        got = tk(cwd, "report", "--results", results, "--format", "html")
        assert got.returncode == 4 and "-o" in got.stderr, got.stderr
        assert sorted(p.name for p in out.iterdir()) == before
        [words] = pasted_commands(got.stderr)
        assert tk(cwd, *words).returncode == 0
        assert (out.parent / "r1-report.html").is_file() and sorted(p.name for p in out.iterdir()) == before
        (out.parent / "r1-report.html").unlink()
    got = tk(out, "report", "--results", ".", "--format", "html", "-o", "mine.html")
    assert got.returncode == 0 and (out / "mine.html").is_file(), got.stderr


def test_an_export_names_no_machine(tmp_path: Path) -> None:
    """builds.jsonl carried the engine ID (`7B4N:SQPD:...`), a stable identifier of the measuring machine,
    and records written before bench dropped them the hostname and kernel cmdline: the engine is an alias
    salted with the run id (one engine: one alias within an export, another in another run's), the
    hostname and cmdline are left out (cmdline_notable kept); nowhere in the folder is the ID or name."""
    from toolkit.publish import run_folder
    from toolkit.results.records import ResultStore

    store = ResultStore(tmp_path / "results")
    host = {
        "hostname": "lab-node-7",
        "cmdline": "root=UUID=1b2c-3d4e ro",
        "cmdline_notable": ["amd_iommu=off"],
    }
    for run in (RUN, NEW):
        recs = labelled_records(run)
        for r in recs:
            store.add_result(r.model_copy(update={"host": {**r.host, **host}}))
    digest = labelled_records(RUN)[0].image.digest
    for eid in (ENGINE, ENGINE, "podmanu1000"):
        store.add_build(build_record(digest, engine=eid))
    aliases = {}
    for run in (RUN, NEW):
        out = tmp_path / run
        run_folder.export_run(store, run, out)
        text = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
        for secret in (ENGINE, "podmanu1000", "lab-node-7", "1b2c-3d4e"):
            assert secret not in text, (run, secret)
        assert "amd_iommu=off" in text
        builds = [json.loads(line)["engine"] for line in (out / "builds.jsonl").read_text().splitlines()]
        assert builds[0] == builds[1] != builds[2] and all(
            re.fullmatch(r"engine-[0-9a-f]{12}", b) for b in builds
        )
        aliases[run] = builds[0]
    assert aliases[RUN] != aliases[NEW]
