"""What a newcomer met on a fresh Debian 13 stand-in with rootless Podman (nc49b), each through the
command or the function the command calls; nothing mocked.

- `push --registry myregistry/team` was taken: the dry run said it "would push it as
  myregistry/team/cpu:...", both engines read a first part without a dot, a port or `localhost` as a
  Docker Hub namespace (the real push went to registry-1.docker.io, tagged docker.io/myregistry/...), and
  the failure asked "is the registry myregistry running": refused by the one parse of every registry
  (push, build --push, campaign, matrix.yaml's `registry:`) before anything runs.
- `import --digest` took only Docker's `sha256:<hex>`, and its hint printed `docker image inspect`: on
  a Podman-only host `docker` is absent and `podman image inspect --format '{{.Id}}'` prints the 64 hex
  digits alone, which were refused. Both are taken; the hint names both commands.
- `report --format html -o -` said "leave -o out to print to standard output": an html report is
  written to report.html in the results folder all the same; the refusal says so.
- Two caveats above a markdown verdict (the report, an exported run's README) were consecutive `> `
  lines: one paragraph, which a renderer joins into one line. Each is a quote of its own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.records import CPU_A, CPU_B, VULKAN, load, needs_fixtures
from tests.support.runs import tk
from toolkit.analysis import verdict
from toolkit.core.errors import BadInput
from toolkit.publish import run_folder
from toolkit.publish.push import parse_registry

DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("value", ["myregistry/team", "r9700", "nas/lab/r9700"])
def test_a_registry_whose_host_the_engines_read_as_a_hub_namespace_is_refused(value):
    with pytest.raises(BadInput, match=f"is Docker Hub's docker.io/{value}/IMAGE"):
        parse_registry(value)


@pytest.mark.parametrize("value", ["localhost/lab", "nas:5000/lab", "nas.lan/lab", "docker.io/acme"])
def test_a_host_with_a_dot_a_port_or_localhost_is_kept(value):
    assert parse_registry(value) == value


def test_push_refuses_a_dotless_registry_host_from_the_option_and_the_matrix(project: Path):
    res = tk(project, "push", "-i", "cpu", "--dry-run", "--registry", "myregistry/team")
    assert res.returncode == 4, res.stdout + res.stderr
    assert "'myregistry' is no registry host to Docker or Podman" in res.stderr, res.stderr
    assert "would push" not in res.stdout + res.stderr
    data = yaml.safe_load((project / "matrix.yaml").read_text())
    data["registry"] = "myregistry/team"
    (project / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    res = tk(project, "push", "-i", "cpu", "--dry-run")
    assert res.returncode == 4 and "matrix.yaml: registry 'myregistry/team'" in res.stderr, res.stderr


def test_import_digest_takes_podmans_image_id_and_names_both_engines(tmp_path: Path):
    hexid = "21d2e5f38b85269a4b603aa15bffbe65ba2a08093dc9312d4cb0a41cc7a50f5e"  # podman's {{.Id}}
    rows = DATA / "llamabench-0c1e57098-cpu.jsonl"
    res = tk(tmp_path, "import", "--results", "results", "--label", "pod", "--digest", hexid, str(rows))
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "results" / hexid[:12] / "bench.jsonl").read_text().splitlines()[0])
    assert rec["image"]["digest"] == f"sha256:{hexid}", rec["image"]
    res = tk(
        tmp_path, "import", "--results", "results", "--label", "pod", "--digest", "sha256:abc", str(rows)
    )
    assert res.returncode == 4, res.stderr
    assert "`podman image inspect --format '{{.Id}}' IMAGE`" in res.stderr, res.stderr
    assert "`docker image inspect --format '{{.Id}}' IMAGE`" in res.stderr, res.stderr


def test_report_dash_output_says_an_html_report_goes_to_a_file(tmp_path: Path):
    (tmp_path / "results" / "a504e0178239").mkdir(parents=True)
    shutil.copy(CPU_A, tmp_path / "results" / "a504e0178239" / "bench.jsonl")
    res = tk(tmp_path, "report", "--results", "results", "--format", "html", "-o", "-")
    assert res.returncode == 4, res.stderr
    assert "--format html: to report.html in the results folder" in res.stderr, res.stderr
    res = tk(tmp_path, "report", "--results", "results", "--format", "html")  # what the hint says
    assert res.returncode == 0 and res.stdout == "", res.stdout + res.stderr
    assert (tmp_path / "results" / "report.html").is_file()


@needs_fixtures
def test_each_markdown_caveat_is_a_paragraph_of_its_own():
    records = load(CPU_A, CPU_B, VULKAN)  # a tiny stand-in model and a software GPU: two caveats
    for lines in (
        verdict.format_verdict(verdict.verdict(records)).splitlines(),
        run_folder._results_lines(records),
    ):
        quotes = [i for i, ln in enumerate(lines) if ln.startswith("> **caveat**")]
        assert len(quotes) == 2, lines
        assert all(lines[i + 1] == "" for i in quotes), lines
