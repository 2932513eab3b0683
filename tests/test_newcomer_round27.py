"""A newcomer on a fresh Debian 13 stand-in as its sudo user, rootless Podman 5 (2026-12-05, commit
bdd03a3): the README's Podman line, then every --help, doctor, report in each format, a second bench,
compare, imports of tests/data/public R9700 files, export-run, measure, render and bench of images that
cannot run here, as the README and --help texts lead there."""

from __future__ import annotations

import click

from tests.support.project import DATA, ROOT
from tests.support.runs import tk
from toolkit.cli.main import cli
from toolkit.results.records import ResultStore

PUBLIC = DATA / "public"


def _required_params(cmd: click.Command, path: tuple[str, ...] = ()):
    """(command path, parameter) of every required parameter of every command under `cmd`."""
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _required_params(sub, (*path, name))
        return
    for p in cmd.params:
        if p.required:
            yield path, cmd, p


def test_every_required_option_is_refused_when_left_out():
    """Since Click 8.3 an option declared `required=True, default=None` takes None as its value: the
    command ran without it. `output_option` passed default=None, so `toolkit export-run RUN_ID` (no -o)
    and `toolkit campaign render-k8s` (no -o) reached their code with None. Every required parameter
    left out is Click's MissingParameter (exit 4)."""
    missing = []
    for path, cmd, p in _required_params(cli):
        ctx = click.Context(cmd, info_name=path[-1])
        try:
            p.handle_parse_result(ctx, {}, [])
        except click.MissingParameter:
            continue
        missing.append(f"{' '.join(path)} {p.name}")
    assert not missing, missing


def test_export_run_without_output_is_a_usage_error_not_a_traceback(tmp_path):
    """`toolkit export-run RUN_ID` without -o printed a TypeError traceback (Path(None)), exit 1, though
    --help says -o is [required]. It is now Click's usage error, exit 4, naming the option."""
    res = tk(ROOT, "export-run", "20261205T113111Z-24d782", "--results", str(tmp_path))
    assert res.returncode == 4, res.stderr
    assert "Missing option '-o' / '--output' / '--out'" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr, res.stderr


def test_an_exported_import_is_said_to_have_no_image_and_reproduce_says_so(tmp_path):
    """`toolkit export-run` of an imported run (the R9700 ROCm log) noted `image ... was never pushed:
    reproduce needs --rebuild (or run `toolkit push --image r9700-rocm-2x` and export again)`: there is
    no image to push or rebuild; and `toolkit reproduce` of the folder refused `models[...].file: '' is
    empty ...: fix run.json or export the run again` (exporting again writes the same). The note says
    the results were imported and reproduce cannot re-run them; reproduce says so first."""
    results = tmp_path / "results"
    imp = tk(
        ROOT,
        "import",
        "--results",
        str(results),
        "--label",
        "r9700-rocm-2x",
        str(PUBLIC / "r27-rocm-2x-r9700-gfx1201-dual.log"),
    )
    assert imp.returncode == 0, imp.stderr
    run_id = ResultStore(results).results()[0].run_id
    out = tmp_path / "export"
    res = tk(ROOT, "export-run", run_id, "--results", str(results), "-o", str(out))
    assert res.returncode == 0, res.stderr
    said = " ".join(res.stderr.split())
    assert "its results were imported (`toolkit import`): there is no image to push or rebuild" in said, said
    assert "toolkit push --image" not in said and "--rebuild" not in said, said
    for extra in ((), ("--rebuild",)):
        rep = tk(ROOT, "reproduce", str(out), "--results", str(tmp_path / "rr"), *extra)
        assert rep.returncode == 4, rep.stderr
        assert (
            "image r9700-rocm-2x: its results were imported (`toolkit import`): no image to run" in rep.stderr
        )
        assert "export the run again" not in rep.stderr, rep.stderr


def test_compare_of_two_models_lists_the_stored_runs_to_choose_from(tmp_path):
    """`toolkit compare` of two labels that measured different models said "compare two runs of one
    model (`toolkit report` lists each model's runs)"; the report names only the newest run of each
    test (a second bench of one image hides the first run's id), so the newcomer found no second run
    there. The error now lists the stored runs, as a reference that matches nothing does."""
    results = tmp_path / "results"
    for label, name in (
        ("rocm2x", "r27-rocm-2x-r9700-gfx1201-dual.log"),
        ("vk", "r27-vulkan-r9700-depth-32768.log"),
    ):
        imp = tk(ROOT, "import", "--results", str(results), "--label", label, str(PUBLIC / name))
        assert imp.returncode == 0, imp.stderr
    runs = {r.run_id for r in ResultStore(results).results()}
    res = tk(ROOT, "compare", "rocm2x", "vk", "--results", str(results))
    assert res.returncode == 4, res.stderr
    said = " ".join(res.stderr.split())
    assert "they measured different models" in said, said
    assert "`toolkit report` lists each model's runs" not in said, said
    assert f"stored runs under {results}, newest first:" in said, said
    assert all(run in said for run in runs), (runs, said)


# The last lines of the stand-in's log of `toolkit reproduce --rebuild` (rootless Podman 5.4.2 on Debian
# 13 set up by `setup-host.sh --podman`, before passt), the RUN step's text as the log has it.
_STEP = (
    "RUN --mount=type=cache,target=/var/cache/apt,sharing=locked,id=toolkit-reproduce-cb409ccc0719ad79-apt-"
    "debian-trixie-slim --mount=type=cache,target=/var/lib/apt/lists,sharing=locked,id=toolkit-reproduce-"
    "cb409ccc0719ad79-apt-lists-debian-trixie-slim rm -f /etc/apt/apt.conf.d/docker-clean     && apt-get "
    "update     && apt-get install -y --no-install-recommends cmake g++ make ca-certificates binutils"
)
_PASTA_LOG = f"""[1/2] STEP 3/8: {_STEP}
error running container: did not get container start message from parent: EOF
Error: building at STEP "{_STEP}": setup network: could not find pasta, the network namespace can't be \
configured: exec: "pasta": executable file not found in $PATH
"""


def test_a_build_failures_reason_keeps_the_cause_at_the_end_of_a_long_line(tmp_path):
    """`toolkit reproduce --rebuild` said `rebuild of cpu failed: podman build exited 125: Error: building
    at STEP "RUN --mount=... && apt-` and no more: the reason was the log's error lines cut at 400
    characters, and buildah names the cause after the step's text. A long line now keeps its start and
    its end. (The private function is called on a log file of the real lines: a failing rootless build
    cannot be made here.)"""
    from toolkit.images.build import _error_tail

    log = tmp_path / "build.log"
    log.write_text(_PASTA_LOG)
    said = _error_tail(log)
    assert said.startswith('Error: building at STEP "RUN --mount=type=cache'), said
    assert said.endswith(
        'could not find pasta, the network namespace can\'t be configured: exec: "pasta": '
        "executable file not found in $PATH"
    ), said
    assert "…" in said and len(said) <= 400, len(said)
    log.write_text("step 1\nERROR: failed to solve: exit code: 2\n")  # short lines: as before, whole
    assert _error_tail(log) == "ERROR: failed to solve: exit code: 2"


def test_rootless_podman_5_gets_pasta_from_setup(tmp_path):
    """`setup-host.sh --podman` installs podman with --no-install-recommends, which on Debian 13 leaves
    out passt (pasta), Podman 5's rootless network: `toolkit reproduce --rebuild` (a build step in a
    network namespace of its own) then failed "could not find pasta". The function that names the
    package is run here with a PATH without pasta and with one (stub commands); the script calls it."""
    import re
    import subprocess

    setup = (ROOT / "scripts" / "setup-host.sh").read_text()
    func = re.search(r"^rootless_net_packages\(\) \{.*?^\}$", setup, re.S | re.M)
    assert func, "setup-host.sh has no rootless_net_packages"
    with_pasta = tmp_path / "bin"
    with_pasta.mkdir()
    (with_pasta / "pasta").write_text("#!/bin/sh\n")
    (with_pasta / "pasta").chmod(0o755)

    def packages(major: str, path: str) -> str:
        script = f"{func.group(0)}\nrootless_net_packages {major}"
        out = subprocess.run(["/bin/bash", "-c", script], env={"PATH": path}, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    empty = str(tmp_path / "none")
    assert packages("5", empty) == "passt"
    assert packages("4", empty) == ""  # Podman 4 (Debian 12): slirp4netns
    assert packages("5", str(with_pasta)) == ""
    assert 'net=$(rootless_net_packages "$podman_major")' in setup and 'apt_install "$net"' in setup


def test_a_failed_rebuild_names_its_log(tmp_path, monkeypatch):
    """`toolkit build` ends a failed image's line with `; log: PATH`; reproduce's `rebuild of cpu
    failed: ...` did not, so the newcomer had the cut reason and no file to read. The build itself is
    replaced by its failed result (a failing rootless Podman build cannot be made on this host)."""
    import shutil

    from toolkit.core.errors import BuildFailed
    from toolkit.images import build as build_mod
    from toolkit.publish import reproduce
    from toolkit.publish.run_folder import PublishedImage

    for name in ("matrix.yaml", "Dockerfile.templates"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    log = tmp_path / ".toolkit" / "logs" / "build-cpu-20261205T113506Z.log"
    failed = build_mod.BuildResult("cpu", "failed", "podman build exited 125: ...", log_path=log)
    monkeypatch.setattr(build_mod, "build_image", lambda *a, **k: failed)
    im = PublishedImage(name="cpu", backend="cpu", digest="sha256:" + "0" * 64)
    try:
        reproduce.rebuild_image(im, tmp_path, ResultStore(tmp_path / "results"), confined=False)
    except BuildFailed as err:
        assert str(err) == f"rebuild of cpu failed: podman build exited 125: ...; log: {log}", str(err)
    else:
        raise AssertionError("a failed rebuild raised nothing")


def test_the_host_line_brackets_a_set_of_several_cards_beside_another_set():
    """Reproducer (the newcomer's two imports on one host): the host line read `GPU 2x R9700 / Ryzen iGPU
    + 2x R9700 (RADV)`, which reads either as two sets or as three: each run's set of cards is joined
    with ` / `, a set's cards with ` + `. Now a set of several cards is bracketed where there are several."""
    from toolkit.analysis.provenance import _host_line

    r9700, igpu = "AMD Radeon AI PRO R9700", "AMD Ryzen 9 9900X3D (RADV RAPHAEL_MENDOCINO)"
    both = f"{igpu}, {r9700} (RADV GFX1201), {r9700} (RADV GFX1201)"
    line = _host_line({}, [f"{r9700}, {r9700}", both])
    assert f"GPU 2x {r9700} / ({igpu} + 2x {r9700} (RADV GFX1201))" in line, line
    alone = _host_line({}, [both])  # one set: no brackets
    assert f"GPU {igpu} + 2x {r9700} (RADV GFX1201)" in alone, alone
