"""A planned campaign --render-k8s--> Kubernetes Job manifests (batch/v1), one per llama-bench slice.

Rendered only, never run here: validated offline (kubernetes-validate) in the tests. `write_k8s` in
toolkit.campaign.slurm plans the campaign and writes these as YAML files.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from toolkit.matrix.api import CampaignSpec, LoadedMatrix

if TYPE_CHECKING:
    from toolkit.campaign.slurm import Campaign, Slice


def _k8s_name(text: str) -> str:
    """An RFC 1123 label: lowercase alphanumerics and '-', at most 63 characters."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")


def k8s_manifests(lm: LoadedMatrix, c: Campaign) -> tuple[list[dict[str, Any]], list[str]]:
    """One batch/v1 Job per llama-bench slice: the image by registry digest, llama-bench over the
    matrix's axes with JSONL into a per-host volume (PersistentVolumeClaim `toolkit-results-<host>`,
    bring the files in with `toolkit import`), the model from the node's path (hostPath, read-only),
    `amd.com/gpu` (AMD's device plugin) for GPU backends, nodeSelector kubernetes.io/hostname = the
    node (or `toolkit/host: <key>` for hosts chosen by features). Returns (manifests, notes on slices
    not rendered). Not run on this machine: validated offline (kubernetes-validate) in the tests."""
    spec = CampaignSpec.model_validate(c.spec)
    docs: list[dict[str, Any]] = []
    notes: list[str] = []
    for s in c.slices:
        if s.runner != "llama-bench":
            notes.append(
                f"slice {s.index} ({s.image} x {s.model}): runner {s.runner} has no Kubernetes rendering "
                "(it drives several processes through `toolkit bench`); run it with Slurm"
            )
            continue
        docs.append(_k8s_job(lm, c, s, spec))
    return docs, notes


def _k8s_job(lm: LoadedMatrix, c: Campaign, s: Slice, spec: CampaignSpec) -> dict[str, Any]:
    """The Job of one llama-bench slice: its pod on the slice's node, the model and results volumes."""
    model = next(x for x in lm.m.models if x.name == s.model)
    path = lm.resolve(model.path, what=f"models[{model.name}].path")
    in_ctr = f"/models/{path.name}"
    labels = {
        "app.kubernetes.io/name": "toolkit",
        "toolkit/campaign": _k8s_name(c.id),
        "toolkit/host": _k8s_name(s.host),
        "toolkit/image": _k8s_name(s.image),
    }
    selector = {"kubernetes.io/hostname": s.node} if s.node else {"toolkit/host": _k8s_name(s.host)}
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": _k8s_name(f"tk-{c.id}-{s.index}"),
            "labels": labels,
            "annotations": {"toolkit/image-id": s.image_id, "toolkit/model": s.model},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": selector,
                    "containers": [_k8s_container(lm, c, s, spec, in_ctr)],
                    "volumes": [
                        {"name": "model", "hostPath": {"path": str(path), "type": "File"}},
                        {
                            "name": "results",
                            "persistentVolumeClaim": {"claimName": _k8s_name(f"toolkit-results-{s.host}")},
                        },
                    ],
                },
            },
        },
    }
    if spec.time_limit:
        job["spec"]["activeDeadlineSeconds"] = _seconds(spec.time_limit)
    return job


def _k8s_container(
    lm: LoadedMatrix, c: Campaign, s: Slice, spec: CampaignSpec, in_ctr: str
) -> dict[str, Any]:
    """The slice's bench container: llama-bench over the matrix's axes on the model at `in_ctr`, its
    JSONL written to /results/<campaign>-<slice>.jsonl; `spec.gpus` AMD GPUs for a GPU backend."""
    from toolkit.runtimes.llama_bench import args as lb_args

    out_file = f"/results/{c.id}-{s.index}.jsonl"
    cmd = ["llama-bench", *lb_args.bench_args(lm.m.bench, in_ctr)]
    container: dict[str, Any] = {
        "name": "bench",
        "image": s.pull,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", f"{shlex.join(cmd)} > {out_file}"],
        "volumeMounts": [
            {"name": "model", "mountPath": in_ctr, "readOnly": True},
            {"name": "results", "mountPath": "/results"},
        ],
        "securityContext": {"runAsUser": 10001, "allowPrivilegeEscalation": False},
    }
    if spec.gpus and s.backend != "cpu":
        container["resources"] = {"limits": {"amd.com/gpu": spec.gpus}}
    return container


def _seconds(limit: str) -> int:
    """Slurm's time format ([D-]HH:MM:SS, MM:SS, or minutes) in seconds."""
    days, _, rest = limit.rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    unit = {1: (60,), 2: (60, 1)}.get(len(parts), (3600, 60, 1))  # seconds of each part
    return sum(n * u for n, u in zip(parts, unit, strict=False)) + int(days or 0) * 86400
