"""A real two-node Slurm cluster (n1, n2) on this machine for the campaign tests, from
scripts/slurm-cluster.sh (Debian's slurmctld/slurmd/munge); nothing of Slurm is mocked."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.project import ROOT

SCRIPT = str(ROOT / "scripts" / "slurm-cluster.sh")


@contextlib.contextmanager
def slurm_cluster() -> Iterator[Path]:
    """Start the cluster, SLURM_CONF set to it for the block, stopped by PID after; yields its state
    folder, under /tmp (user munge must reach it: pytest's own tmp folders are private). A start that
    fails fails the test (pytest.fail with the script's stderr)."""
    d = tempfile.mkdtemp(prefix="tk-slurm-", dir="/tmp")
    out = subprocess.run([SCRIPT, "start", d], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        pytest.fail(f"slurm-cluster.sh start failed: {out.stderr[-2000:]}")
    conf = next(x.split("=", 1)[1] for x in out.stdout.splitlines() if x.startswith("SLURM_CONF="))
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = conf
    try:
        yield Path(d)
    finally:
        stop = subprocess.run([SCRIPT, "stop", d], capture_output=True, text=True, timeout=60)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        assert stop.returncode == 0, stop.stderr
        shutil.rmtree(d, ignore_errors=True)
