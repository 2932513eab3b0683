"""Multi-host campaigns (toolkit/campaign/slurm.py): the `campaign:` block, job scripts, host facts from Slurm's
environment, Kubernetes manifests validated offline, the cross-host flags and verdict, and (e2e) a real
two-node Slurm cluster from Debian's packages (scripts/slurm-cluster.sh) running the CPU image pulled
by digest from the loopback registry on both nodes.

Nothing of Slurm is mocked in the e2e part: sbatch, scontrol and scancel drive real slurmctld/slurmd
daemons. What cannot exist here and is therefore a stand-in: the GPUs (a character device per node
named in gres.conf as `gpu:fake`), a second machine (both nodes run on 127.0.0.1 and share one Docker
engine, so the campaign names them one `engine:` and their jobs run one at a time) and a Kubernetes
cluster (manifests are checked against the API schemas by kubernetes-validate, never applied).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.support.e2e_helpers import engine_or_skip, ensure_built, make_project, run_cli, untag_image
from tests.support.records import make_record
from tests.support.slurm import slurm_cluster
from toolkit.analysis import tables, verdict
from toolkit.campaign import slurm as cmod
from toolkit.cli.main import cli
from toolkit.core.errors import BadInput
from toolkit.engine import api as engine
from toolkit.host import info as hostinfo
from toolkit.images import build as build_mod
from toolkit.matrix.api import load_matrix
from toolkit.results.records import BenchRecord, BuildRecord, ResultStore

CPU_IMAGE = "toolkit/cpu:latest"
AXES = {
    "n_prompt": [32],
    "n_gen": [4],
    "n_ubatch": [32],
    "n_batch": [512],
    "n_gpu_layers": [0],
    "repetitions": 2,
    "threads": 1,
}
GHOST_ID = "sha256:" + "0" * 64


# ----------------------------------------------------------------------------------- plain checks


def _project(tmp_path: Path, hosts: list[dict], images=("cpu",), **campaign) -> Path:
    p = make_project(tmp_path, images=list(images), bench=AXES)
    data = yaml.safe_load((p / "matrix.yaml").read_text())
    data["campaign"] = {"gres_type": "fake", "hosts": hosts, **campaign}
    (p / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _seed_build(
    project: Path, name: str, digest: str, repo_digests: list[str], labels: dict | None = None
) -> None:
    """A build record of `name` with the inputs key the project's matrix gives now (a current build)."""
    lm = load_matrix(project / "matrix.yaml")
    key = build_mod.inputs_key(lm, lm.m.image(name)).key
    ResultStore(project / "results").add_build(
        BuildRecord(
            image=name,
            ref=f"toolkit/{name}:test",
            digest=digest,
            backend=lm.m.image(name).backend,
            template=lm.m.image(name).template,
            template_hash="",
            labels={**(labels or {}), build_mod.INPUTS_KEY_LABEL: key},
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            repo_digests=repo_digests,
        )
    )


@pytest.mark.parametrize(
    ("hosts", "words"),
    [
        ([{"features": ["r9700"]}], ["campaign.hosts", "alias"]),
        ([{"alias": "x"}], ["campaign.hosts", "node"]),
        ([{"node": "n1"}, {"node": "n1"}], ["n1", "twice"]),
        ([{"node": "n1; rm -rf /"}], ["node", "letters"]),
    ],
)
def test_a_bad_campaign_block_names_the_field(tmp_path, hosts, words):
    p = _project(tmp_path, hosts)
    with pytest.raises(BadInput) as err:
        load_matrix(p / "matrix.yaml")
    assert all(w in str(err.value) for w in words), str(err.value)
    assert str(p / "matrix.yaml") in str(err.value)


def test_submit_refuses_an_image_that_was_never_pushed(tmp_path):
    p = _project(tmp_path, [{"node": "n1"}])
    _seed_build(p, "cpu", "sha256:" + "a" * 64, [])
    res = CliRunner().invoke(cli, ["campaign", "submit", "--matrix", str(p / "matrix.yaml")])
    assert isinstance(res.exception, BadInput), res.output
    msg = str(res.exception)
    push = f"toolkit push --matrix {p / 'matrix.yaml'} --image cpu"  # the campaign's matrix (core.invocation)
    assert "no pushed registry digest" in msg and push in msg and "builds.jsonl" in msg
    assert not (p / "results" / "campaigns").exists()  # nothing submitted, nothing recorded


@pytest.mark.parametrize(
    ("matrix_registry", "campaign_registry", "said"),
    [
        (None, None, " --registry HOST[:PORT]/NAMESPACE` with the address of your registry in its place"),
        (None, "127.0.0.1:5000/lab", " --registry 127.0.0.1:5000/lab`"),
        ("127.0.0.1:5000/mine", "127.0.0.1:5000/lab", " --registry 127.0.0.1:5000/lab`"),
        ("127.0.0.1:5000/lab", None, "`"),
    ],
)
def test_the_campaigns_push_hint_names_the_registry_push_would_not_take(
    tmp_path, matrix_registry, campaign_registry, said
):
    p = make_project(tmp_path, images=["cpu"], bench=AXES)
    data = yaml.safe_load((p / "matrix.yaml").read_text())
    data["campaign"] = {"gres_type": "fake", "hosts": [{"node": "n1"}]}
    if campaign_registry:
        data["campaign"]["registry"] = campaign_registry
    if matrix_registry:
        data["registry"] = matrix_registry
    (p / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    _seed_build(p, "cpu", "sha256:" + "a" * 64, [])
    res = CliRunner().invoke(cli, ["campaign", "submit", "--matrix", str(p / "matrix.yaml")])
    assert isinstance(res.exception, BadInput), res.output
    push = f"run `toolkit push --matrix {p / 'matrix.yaml'} --image cpu{said}"  # was: `... -i cpu` alone
    assert push in str(res.exception), res.exception


def test_job_scripts_pull_by_digest_and_ask_slurm_for_one_gpu(tmp_path):
    p = _project(
        tmp_path,
        [{"node": "n1", "engine": "box"}, {"features": ["r9700", "big"], "alias": "lab-b"}],
        partition="gpu",
        time_limit="01:30:00",
    )
    ref = "127.0.0.1:5000/ns/cpu@sha256:" + "b" * 64
    _seed_build(p, "cpu", "sha256:" + "a" * 64, [ref])
    lm = load_matrix(p / "matrix.yaml")
    c = cmod.submit(lm, ResultStore(p / "results"), dry_run=True)
    assert [(s.host, s.image, s.model, s.pull) for s in c.slices] == [
        ("n1", "cpu", "tiny-qwen3moe", ref),
        ("lab-b", "cpu", "tiny-qwen3moe", ref),
    ]
    one = Path(c.slices[0].script).read_text()
    for line in (
        "#SBATCH --nodelist=n1",
        "#SBATCH --gres=gpu:fake:1",
        "#SBATCH --signal=B:TERM@60",
        "#SBATCH --partition=gpu",
        "#SBATCH --time=01:30:00",
        "#SBATCH --dependency=singleton",
        f"#SBATCH --job-name=tk-{c.id}.box",
        "export TOOLKIT_HOST_KEY=n1",
    ):
        assert line in one, line
    assert f"-m toolkit campaign job {c.state_file} 0" in one and one.splitlines()[-1].startswith("exec ")
    two = Path(c.slices[1].script).read_text()
    assert "#SBATCH --constraint=r9700&big" in two and f"--job-name=tk-{c.id}.lab-b" in two
    assert f"--output={p / 'results' / 'hosts' / 'lab-b' / 'logs'}" in two
    subprocess.run(["bash", "-n", c.slices[0].script], check=True)  # the script parses


def test_host_facts_of_a_slurm_job_come_from_its_environment():
    env = {
        "TOOLKIT_HOST_KEY": "lab-a",
        "SLURM_JOB_ID": "42",
        "SLURMD_NODENAME": "n2",
        "SLURM_JOB_GPUS": "1",
        "ROCR_VISIBLE_DEVICES": "0",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    facts = hostinfo.campaign_facts(env)
    assert facts == {
        "key": "lab-a",
        "slurm": {
            "job_id": "42",
            "node": "n2",
            "gpu_index": 1,
            "visible_devices": {
                "SLURM_JOB_GPUS": "1",
                "ROCR_VISIBLE_DEVICES": "0",
                "CUDA_VISIBLE_DEVICES": "0",
            },
        },
    }
    assert hostinfo.campaign_facts({"SLURM_JOB_ID": "7"})["slurm"]["gpu_index"] is None
    assert hostinfo.campaign_facts({}) == {}


def test_kubernetes_manifests_validate_offline(tmp_path):
    kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate (test extras)")
    p = _project(
        tmp_path,
        [{"node": "gpu-node-1"}, {"features": ["r9700"], "alias": "lab-b", "images": ["rocm"]}],
        images=("cpu", "rocm"),
        time_limit="2:00:00",
    )
    _seed_build(p, "cpu", "sha256:" + "a" * 64, ["reg.example/ns/cpu@sha256:" + "b" * 64])
    _seed_build(p, "rocm", "sha256:" + "c" * 64, ["reg.example/ns/rocm@sha256:" + "d" * 64])
    res = CliRunner().invoke(
        cli,
        ["campaign", "render-k8s", "--matrix", str(p / "matrix.yaml"), "--out", str(tmp_path / "k8s")],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    files = sorted((tmp_path / "k8s").glob("*.yaml"))
    assert len(files) == 3  # n1: cpu, rocm; lab-b: rocm
    docs = [yaml.safe_load(f.read_text()) for f in files]
    for d in docs:
        kv.validate(d, "1.30", strict=True)  # raises ValidationError on any schema fault
    by_image = {
        d["metadata"]["labels"]["toolkit/image"] + "/" + d["metadata"]["labels"]["toolkit/host"]: d
        for d in docs
    }
    rocm = by_image["rocm/lab-b"]["spec"]
    ctr = rocm["template"]["spec"]["containers"][0]
    assert ctr["image"] == "reg.example/ns/rocm@sha256:" + "d" * 64
    assert ctr["resources"]["limits"] == {"amd.com/gpu": 1}
    assert rocm["template"]["spec"]["nodeSelector"] == {"toolkit/host": "lab-b"}
    assert (
        rocm["template"]["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"]
        == "toolkit-results-lab-b"
    )
    assert rocm["activeDeadlineSeconds"] == 7200
    cpu = by_image["cpu/gpu-node-1"]["spec"]["template"]["spec"]
    assert cpu["nodeSelector"] == {"kubernetes.io/hostname": "gpu-node-1"}
    assert "resources" not in cpu["containers"][0]  # the CPU image asks for no GPU
    assert "llama-bench -m /models/tiny-qwen3moe.gguf -p 32 -n 4" in cpu["containers"][0]["command"][2]
    broken = json.loads(json.dumps(docs[0]))
    broken["spec"]["template"]["spec"]["containers"][0]["resource"] = {"limits": {"amd.com/gpu": 1}}  # a typo
    with pytest.raises(kv.ValidationError):  # the check can fail: an unknown field is refused
        kv.validate(broken, "1.30", strict=True)


def _rec(
    host: str, avg: float, image: str = "cpu", digest: str = "sha256:" + "a" * 64, test="pp32"
) -> BenchRecord:
    return make_record(
        image,
        "cpu",
        p=32,
        avg=avg,
        sd=1.0,
        digest=digest,
        run_id=f"r-{host}",
        host={"key": host},
        test=test,
        samples_ts=[avg - 1, avg + 1],
    )


def test_one_digest_on_four_hosts_is_four_columns_and_the_outlier_is_flagged():
    recs = [_rec("n1", 100), _rec("n2", 101), _rec("n3", 99.5), _rec("n4", 60)]
    t = tables.axis_table(recs, "prefill")
    assert len(t.columns) == 4 and all("host=" in c for c in t.columns)
    (row,) = t.rows
    flagged = {c for c, fl in row.flags.items() if "host-outlier" in fl}
    assert flagged == {next(c for c in t.columns if "host=n4" in c)}
    assert "host-outlier" in tables.FLAG_HELP
    # within the others' spread: no flag (3 hosts close together)
    t2 = tables.axis_table([_rec("n1", 100), _rec("n2", 101), _rec("n3", 99.5)], "prefill")
    assert not any("host-outlier" in fl for fl in t2.rows[0].flags.values())


def test_the_verdict_says_on_how_many_hosts_each_winning_number_was_measured():
    recs = [
        _rec("n1", 200, "fast", "sha256:" + "f" * 64),
        _rec("n2", 198, "fast", "sha256:" + "f" * 64),
        _rec("n1", 100, "slow", "sha256:" + "e" * 64),
    ]
    v = verdict.verdict(recs)
    text = verdict.format_verdict(v, markdown=False)
    assert "measured on 2 hosts (n1, n2)" in text, text
    assert verdict.verdict_json(v)["axes"]["prefill"]["hosts"]
    # single-host results say nothing about hosts
    plain = [r.model_copy(update={"host": {}}) for r in recs]
    assert not re.search(
        r"measured on \d+ host", verdict.format_verdict(verdict.verdict(plain), markdown=False)
    )


# ------------------------------------------------------------------------------ a real Slurm cluster


@pytest.fixture(scope="module")
def slurm():
    """Two Slurm nodes (n1, n2) on this machine (tests/support/slurm.py), for this module."""
    with slurm_cluster() as d:
        yield d


@pytest.fixture(scope="module")
def pushed_cpu(registry, tmp_path_factory):
    """The CPU image pushed to the loopback registry (tests/conftest.py) by `toolkit push` from a project
    of its own: (the registry namespace pushed to, the build record with its registry digest)."""
    engine_or_skip()
    ensure_built("cpu", tmp_path_factory.mktemp("build-cpu"), AXES)
    p = make_project(tmp_path_factory.mktemp("push"), images=["cpu"], bench=AXES)
    info = engine.inspect_image(CPU_IMAGE)
    _seed_build(p, "cpu", info.id, info.repo_digests, info.labels)
    ns = f"{registry.host}/toolkit-e2e"
    run_cli(p, "push", "--image", "cpu", "--registry", ns)
    rec = ResultStore(p / "results").latest_build("cpu")
    yield ns, rec
    for ref in rec.pushed:
        untag_image(ref)


def _campaign_project(dest: Path, rec: BuildRecord, hosts: list[dict], images=("cpu",), bench=None) -> Path:
    p = _project(dest, hosts, images=images)
    if bench:
        data = yaml.safe_load((p / "matrix.yaml").read_text())
        data["bench"] = {**data["bench"], **bench}
        (p / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    ResultStore(p / "results").add_build(rec)
    return p


def _campaign(project: Path, sub: str, *args: str, expect: int | None = 0):
    """`toolkit campaign SUB --matrix PROJECT/matrix.yaml ARGS` in-process; (result, exit code)."""
    from toolkit.core.errors import ToolkitError

    res = CliRunner().invoke(cli, ["campaign", sub, "--matrix", str(project / "matrix.yaml"), *args])
    code = res.exception.exit_code if isinstance(res.exception, ToolkitError) else res.exit_code
    if res.exception and not isinstance(res.exception, (ToolkitError, SystemExit)):
        raise res.exception
    if expect is not None:
        assert code == expect, f"exit {code}\n{res.output}\n{res.exception!r}"
    return res, code


def _wait(c: cmod.Campaign, timeout: float) -> cmod.Campaign:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        c = cmod.refresh(c)
        if all(s.finished for s in c.slices):
            return c
        time.sleep(0.5)
    pytest.fail(
        f"campaign {c.id} not finished after {timeout:.0f} s: {[(s.index, s.state) for s in c.slices]}"
    )


@pytest.mark.e2e
def test_two_hosts_measure_the_pulled_digest_and_a_dead_job_becomes_a_failed_record(
    slurm, pushed_cpu, tmp_path
):
    registry_ns, rec = pushed_cpu
    hosts = [{"node": "n1", "engine": "local", "images": ["cpu", "ghost"]}, {"node": "n2", "engine": "local"}]
    data_images = ("cpu",)
    p = _campaign_project(tmp_path / "proj", rec, hosts, images=data_images)
    # a slice whose image digest exists in no registry: same template, another name, a record claiming a push
    data = yaml.safe_load((p / "matrix.yaml").read_text())
    data["images"].append({**data["images"][0], "name": "ghost"})
    data["campaign"]["hosts"][1]["images"] = ["cpu"]
    (p / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    _seed_build(p, "ghost", GHOST_ID, [f"{registry_ns}/ghost@{GHOST_ID}"])
    t0 = time.monotonic()
    res, _ = _campaign(p, "submit")
    assert "3 jobs submitted" in res.output, res.output
    c = cmod.load(p / "results", cmod.latest(p / "results"))
    c = _wait(c, 150)
    states = {(s.host, s.image): s for s in c.slices}
    assert states[("n1", "cpu")].state == "done" and states[("n2", "cpu")].state == "done", res.output
    assert states[("n1", "cpu")].ran_on == "n1" and states[("n2", "cpu")].ran_on == "n2"
    ghost = states[("n1", "ghost")]
    assert ghost.state == "failed" and ghost.slurm_state == "FAILED" and ghost.exit_code.startswith("3:")
    # results came back under both hosts, each job writing only under its own host folder
    for host in ("n1", "n2"):
        recs = ResultStore(p / "results" / "hosts" / host).results()
        ok = [r for r in recs if r.status == "ok"]
        assert len(ok) == 2 and {r.image.digest for r in ok} == {rec.digest}, host
        slurm_facts = ok[0].host["slurm"]
        assert ok[0].host["key"] == host and slurm_facts["node"] == host and slurm_facts["gpu_index"] == 0
        assert slurm_facts["job_id"] == states[(host, "cpu")].job_id
        assert slurm_facts["visible_devices"]["ROCR_VISIBLE_DEVICES"] == "0"
    # the dead job: one failed record from Slurm's state, exit code and the end of its output
    (failed,) = [r for r in ResultStore(p / "results").results() if r.status == "failed"]
    assert failed.host["slurm"]["state"] == "FAILED" and failed.host["slurm"]["job_id"] == ghost.job_id
    assert (
        "docker pull" in failed.error and GHOST_ID[7:19] in failed.error and "exit code 3:0" in failed.error
    )
    assert Path(ghost.failed_record).parent.name == f"slurm-{ghost.job_id}"
    assert cmod.refresh(c).slices[ghost.index].failed_record == ghost.failed_record  # written once
    assert len([r for r in ResultStore(p / "results").results() if r.status == "failed"]) == 1
    # report over results/ reads every host folder: one column per host
    rep, _ = run_cli(p, "report")
    assert "host=n1" in rep.output and "host=n2" in rep.output, rep.output
    st, code = _campaign(p, "status", "--wait", "--timeout", "5", expect=None)
    assert code == 3 and "2 done" in st.output and "1 failed" in st.output, st.output
    print(st.output)
    print(f"campaign of 3 slices on 2 Slurm nodes: {time.monotonic() - t0:.1f} s from submit to the end")


@pytest.mark.e2e
def test_a_cancelled_job_leaves_no_container(slurm, pushed_cpu, tmp_path, request):
    _, rec = pushed_cpu
    p = _campaign_project(
        tmp_path / "proj",
        rec,
        [{"node": "n2"}],
        # no canary: its short container carries the same run-id label, and a poll that saw it (or
        # missed it) raced the long one (a leftover of 1000 repetitions then held the cores)
        bench={"n_prompt": [2048], "n_gen": [0], "n_batch": [2048], "repetitions": 1000, "canary": False},
    )
    _campaign(p, "submit")
    c = cmod.load(p / "results", cmod.latest(p / "results"))
    (s,) = c.slices
    label = f"org.toolkit.run-id={s.run_id}"

    def containers(*flags: str) -> list[str]:
        out = subprocess.run(
            ["docker", "ps", "-q", *flags, "--filter", f"label={label}"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.split()

    # the subject is what scancel leaves, not how soon Slurm starts a job: on CI's loaded 2-core host a
    # job once waited ~60 s in the queue (stop 48), so the wait is generous and a miss says why
    request.addfinalizer(lambda: _remove_labelled(label))  # a failed test leaves no 1000-repetition run
    end = time.monotonic() + 180
    while not containers() and time.monotonic() < end:
        time.sleep(0.3)
    if not containers():
        now = cmod.refresh(c).slices[0]
        nodes = subprocess.run(["sinfo", "-N", "-l"], capture_output=True, text=True).stdout
        log = (slurm / "log" / "slurmctld.log").read_text(errors="replace")[-3000:]
        job_out = Path(now.output.replace("%j", s.job_id))
        out = job_out.read_text(errors="replace")[-3000:] if job_out.exists() else "(no job output)"
        pytest.fail(f"the job's container is not running: {now}\n{nodes}\n{log}\njob output:\n{out}")
    time.sleep(1.5)  # llama-bench is inside its long test now
    res, _ = _campaign(p, "cancel")
    assert f"cancelled {s.job_id}" in res.output
    t0 = time.monotonic()
    while containers("-a") and time.monotonic() - t0 < 25:  # Slurm's KillWait (SIGKILL) is 30 s
        time.sleep(0.3)
    assert not containers("-a"), "scancel left the job's container behind"
    removed_in = time.monotonic() - t0
    c = _wait(c, 40)
    assert c.slices[0].state == "cancelled"
    out = Path(c.slices[0].output.replace("%j", s.job_id)).read_text()
    assert "interrupted" in out, out
    print(f"cancelled job: container removed {removed_in:.1f} s after scancel")


def _remove_labelled(label: str) -> None:
    """Remove every container carrying LABEL (key=value), running or not."""
    ids = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={label}"], capture_output=True, text=True
    )
    if ids.stdout.split():
        subprocess.run(["docker", "rm", "-f", *ids.stdout.split()], capture_output=True)


def _k8s(p: Path, out: Path):
    return CliRunner().invoke(
        cli,
        ["campaign", "render-k8s", "--matrix", str(p / "matrix.yaml"), "-o", str(out)],
        catch_exceptions=False,
    )


@pytest.mark.parametrize("where", ["results", "digest", "symlink", "foreign"])
def test_render_k8s_refuses_a_results_folder_a_symlink_or_a_folder_of_other_files(tmp_path, where):
    """Tester's find: render-k8s wrote into results/ and results/<digest>/ and through a symlinked
    folder. Refused (exit 4) before anything is written."""
    p = _project(tmp_path, [{"node": "gpu-node-1"}])
    _seed_build(p, "cpu", "sha256:" + "a" * 64, ["reg.example/ns/cpu@sha256:" + "b" * 64])
    digest = p / "results" / ("a" * 12)
    digest.mkdir(parents=True, exist_ok=True)
    (digest / "bench.jsonl").write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    out = {
        "results": p / "results",
        "digest": digest,
        "symlink": tmp_path / "link",
        "foreign": tmp_path / "mine",
    }
    with pytest.raises(BadInput, match="--output"):
        _k8s(p, out[where])
    assert not list(out[where].glob("*.yaml")) and not list(elsewhere.iterdir())


def test_render_k8s_replaces_its_own_earlier_manifests_and_says_so(tmp_path):
    """Tester's find: each render left the earlier campaign's Jobs (a file per campaign id), so
    `kubectl apply -f k8s/` submitted old and new. The earlier manifests are replaced, and named."""
    p = _project(tmp_path, [{"node": "gpu-node-1"}])
    _seed_build(p, "cpu", "sha256:" + "a" * 64, ["reg.example/ns/cpu@sha256:" + "b" * 64])
    out = tmp_path / "k8s"
    first = _k8s(p, out)
    assert first.exit_code == 0, first.output
    (old,) = out.glob("*.yaml")
    stale = out / "toolkit-old-campaign-job.yaml"
    stale.write_text(old.read_text())  # an earlier campaign's Job, another name
    again = _k8s(p, out)
    assert again.exit_code == 0, again.output
    (new,) = out.glob("*.yaml")  # this campaign's only (a new campaign id, a new file name)
    assert new != old and not stale.exists() and new.read_text().startswith("# toolkit campaign ")
    assert "replaced 2 earlier manifest(s)" in again.output
    assert old.name in again.output and stale.name in again.output
