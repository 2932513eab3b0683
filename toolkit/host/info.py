"""Facts about the host recorded with every result and shown by `toolkit doctor`.

Pure reads of /proc, /sys and /etc (each root a parameter, for tests). The Docker engine version is
added by the engine module, which is the only one that talks to Docker.
"""

from __future__ import annotations

import os
import platform
import re
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolkit import __version__
from toolkit.core.text import path_text
from toolkit.host.devices import detect_gpus

# Kernel parameters that change GPU results or behaviour; doctor lists them, results record them.
NOTABLE_CMDLINE_PREFIXES = (
    "amd_iommu=",
    "iommu=",
    "intel_iommu=",
    "amdgpu.",
    "ttm.",
    "mitigations=",
    "pcie_aspm",
    "pci=",
    "hugepagesz=",
    "default_hugepagesz=",
    "transparent_hugepage=",
    "isolcpus=",
    "processor.max_cstate=",
)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def os_pretty_name(etc: Path = Path("/etc")) -> str:
    for line in _read(etc / "os-release").splitlines():
        key, _, value = line.partition("=")
        if key == "PRETTY_NAME":
            return value.strip().strip('"')
    return ""


def cpu_facts(proc: Path = Path("/proc")) -> dict[str, Any]:
    """CPU model name, logical CPUs (threads) and physical cores (when cpuinfo says)."""
    model = ""
    threads = 0
    cores: set[tuple[str, str]] = set()
    phys = core = ""
    for line in _read(proc / "cpuinfo").splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "processor":
            threads += 1
        elif key in ("model name", "Model", "cpu model", "Hardware") and not model:
            model = value
        elif key == "physical id":
            phys = value
        elif key == "core id":
            core = value
            cores.add((phys, core))
    return {
        "cpu_model": model or platform.processor(),
        "cpu_threads": threads or os.cpu_count() or 0,
        "cpu_cores": len(cores) or threads or os.cpu_count() or 0,
    }


def memory_bytes(proc: Path = Path("/proc")) -> int:
    for line in _read(proc / "meminfo").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) >= 2 and parts[1].isdigit() else 0
    return 0


def notable_cmdline(cmdline: str) -> list[str]:
    """The kernel parameters from NOTABLE_CMDLINE_PREFIXES (e.g. `amd_iommu=off`), in order."""
    return [p for p in cmdline.split() if p.startswith(NOTABLE_CMDLINE_PREFIXES)]


def host_facts(
    *,
    sysfs: Path = Path("/sys"),
    proc: Path = Path("/proc"),
    etc: Path = Path("/etc"),
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Kernel, OS, CPU, memory, kernel command line, GPUs and HSA_OVERRIDE_GFX_VERSION (when set).

    `gpus`: every GPU of the host as devices.Gpu.to_dict() -- index, gfx target, product name,
    PCI vendor/device/revision (what tells an R9700 from an RX 9070 GRE: toolkit/core/gpuspecs.py),
    render node, iGPU or not. Which of them a run was given is not a host fact: bench adds
    `device_profile` (devices.DeviceProfile.record(): gpu_count, the passed GPUs, the hidden ones)."""
    env = os.environ if env is None else env
    cmdline = _read(proc / "cmdline")
    facts: dict[str, Any] = {
        "hostname": _read(proc / "sys" / "kernel" / "hostname") or platform.node(),
        "kernel": _read(proc / "sys" / "kernel" / "osrelease") or platform.release(),
        "os": os_pretty_name(etc),
        "arch": platform.machine(),
        **cpu_facts(proc),
        "memory_bytes": memory_bytes(proc),
        "cmdline": cmdline,
        "cmdline_notable": notable_cmdline(cmdline),
        "amdgpu_module": _amdgpu_module(sysfs),
        "gpus": [g.to_dict() for g in detect_gpus(sysfs)],
    }
    if "HSA_OVERRIDE_GFX_VERSION" in env:
        facts["hsa_override_gfx_version"] = env["HSA_OVERRIDE_GFX_VERSION"]
    facts.update(campaign_facts(env))
    return facts


TOOLKIT_ROOT = Path(__file__).resolve().parents[2]
"""The folder the toolkit package was loaded from (a checkout's root, or site-packages)."""


GIT_REPO_ENV = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
)
"""The variables that tie git to one repository (`git rev-parse --local-env-vars`, git 2.39): git exports
them to its hooks and `rebase --exec` commands, where they name the user's repository, not the one
the toolkit asks about."""


def git_env() -> dict[str, str]:
    """This process's environment without GIT_REPO_ENV (what git itself clears before it works in another
    repository), with GIT_OPTIONAL_LOCKS=0 (`git status` does not rewrite the index, which a `git commit`
    beside it would find locked). Every git the toolkit runs gets it (run from a git hook of the user's
    results repository, GIT_DIR and GIT_INDEX_FILE are set)."""
    env = {k: v for k, v in os.environ.items() if k not in GIT_REPO_ENV}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    return env


def toolkit_source() -> dict[str, str]:
    """The toolkit that runs: {"version": __version__, "commit": its git commit, 40 hex (64 in a SHA-256
    repository)} where TOOLKIT_ROOT is a git checkout, with "dirty" where its source may differ (_checkout),
    else {"version"} alone (an installed copy, no git, a checkout git refuses); a copy installed from an
    export's toolkit-src.tar.gz names the commit it was archived at (toolkit/host/_commit.py). bench records
    it with every result (host.toolkit); `toolkit --version` says it."""
    out = {"version": __version__}
    if (TOOLKIT_ROOT / ".git").exists():  # not a repository that merely holds site-packages
        return out | _checkout()
    if archived := archived_commit(Path(__file__).with_name("_commit.py")):  # a copy pip installed
        out["commit"] = archived  # from an export's toolkit-src.tar.gz: the commit it was archived at
    return out


def _checkout() -> dict[str, str]:
    """{"commit"} of the checkout, with "dirty": "true" where its toolkit source (pyproject.toml, toolkit/)
    differs from it (`git describe --dirty`'s sense), from one `git status --porcelain=v2 --branch` (5 s at
    most, no optional locks). Where the status fails the commit comes from `git rev-parse HEAD`, "dirty":
    "unknown" (never taken for clean); {} without one."""
    got = _git(
        "--no-optional-locks", "status", "--porcelain=v2", "--branch", "--", "pyproject.toml", "toolkit"
    )
    if got is not None and got.returncode == 0:
        lines = got.stdout.splitlines()
        oid = next((ln.split()[-1] for ln in lines if ln.startswith("# branch.oid ")), "")
        dirty = {"dirty": "true"} if any(not ln.startswith("#") for ln in lines) else {}
        return {"commit": oid, **dirty} if len(oid) in (40, 64) else {}
    got = _git("rev-parse", "HEAD")
    if got is not None and got.returncode == 0 and len(commit := got.stdout.strip()) in (40, 64):
        return {"commit": commit, "dirty": "unknown"}
    return {}


def _git(*args: str) -> subprocess.CompletedProcess[str] | None:
    """`git -C TOOLKIT_ROOT ARGS` with git_env, its output as text, 5 s at most; None where git could not
    be run or did not finish in time."""
    try:
        return subprocess.run(
            ["git", "-C", str(TOOLKIT_ROOT), *args], capture_output=True, text=True, timeout=5, env=git_env()
        )
    except (OSError, subprocess.SubprocessError):
        return None


def commit_words(toolkit: object, width: int = 12) -> str | None:
    """A recorded toolkit's commit (7 to 64 lowercase hex) as people read it: its first `width` hex, `-dirty`
    appended where the checkout that measured held uncommitted changes (host.toolkit "dirty": true, 1, "TRUE",
    "1", "yes" read alike), `-dirty?` where git could not say ("unknown"); None where no such commit is
    recorded (a stranger's other value is never shown)."""
    if not isinstance(toolkit, dict) or not isinstance(c := toolkit.get("commit"), str):
        return None
    if not re.fullmatch(r"[0-9a-f]{7,64}", c):
        return None
    return c[:width] + dirty_mark(toolkit)


def dirty_mark(toolkit: object) -> str:
    """What follows a recorded toolkit's commit (host.toolkit): `-dirty` where the checkout held
    uncommitted changes, `-dirty?` where git could not say, '' otherwise (_DIRTY_WORDS; not a mapping)."""
    if not isinstance(toolkit, dict):
        return ""
    return _DIRTY_WORDS.get(str(toolkit.get("dirty")).strip().lower(), "")


_DIRTY_WORDS = {"true": "-dirty", "1": "-dirty", "yes": "-dirty", "unknown": "-dirty?"}
"""host.toolkit.dirty as text (str(value), stripped, lowercased) -> what follows the commit: JSON true
reads as "true", 1 as "1"; "false", absent (None) and anything else add nothing."""


COMMIT_HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
"""A git commit as toolkit_source records it (SHA-1, or SHA-256 in a SHA-256 repository)."""
_ARCHIVED = re.compile(rf'^COMMIT = "({COMMIT_HEX.pattern})"$', re.M)


def archived_commit(path: Path) -> str | None:
    """The commit (40 or 64 lowercase hex) `toolkit export-run` wrote into `path` (toolkit/host/_commit.py:
    `COMMIT = "<hex>"`), None where the file is absent, unreadable, over 4 KiB, not a regular file or names no
    such commit. The file is read, never imported (a garbage one must not break `toolkit --version`)."""
    try:  # O_NONBLOCK: a FIFO there is not waited on
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW), "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            text = fh.read(4097).decode("utf-8", "replace")
    except OSError:
        return None
    found = _ARCHIVED.search(text) if len(text) <= 4096 else None
    return found.group(1) if found else None


HOST_KEY_ENV = "TOOLKIT_HOST_KEY"
"""Environment variable naming the host key of a campaign job (set by the job script, toolkit/campaign/slurm.py)."""
_GPU_ENV = (
    "SLURM_JOB_GPUS",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "SLURM_STEP_GPUS",
    "GPU_DEVICE_ORDINAL",
)


CHOICE_ENV = (
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GGML_VK_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
)
"""Variables that choose GPUs for a process run on the host (by a user, or Slurm: _GPU_ENV)."""


def env_choice_note(env: Mapping[str, str], pin: int | None = None) -> str | None:
    """The note for a GPU choice in the toolkit's own environment (CHOICE_ENV): a container is given
    GPUs by devices.select_gpus (or --gpu N) and gets none of this shell's variables, so the choice is
    not applied; said (bench's plan notes, doctor), never ignored in silence. None where none is set."""
    said = [f"{k}={_shown(env[k])}" for k in CHOICE_ENV if env.get(k) is not None]
    if not said:
        return None
    how = (
        f"--gpu {pin} chooses the GPU"
        if pin is not None
        else "the multi-GPU policy chooses (every discrete GPU of the image's gfx targets); pass --gpu N "
        "(numbered as `toolkit doctor` lists them) to choose one"
    )
    return f"{', '.join(said)} is set here but not applied to the containers (they get none of this shell's variables): {how}"


def _shown(value: str) -> str:
    """A variable's value as a note prints it: controls as their escapes (a newline would start a line
    that reads as the toolkit's own), at most 40 characters."""
    text = path_text(value)
    return text if len(text) <= 40 else text[:40] + "..."


def campaign_facts(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Where a campaign job runs, from its environment: {"key": host key} when TOOLKIT_HOST_KEY is set,
    and inside a Slurm job (SLURM_JOB_ID set) {"slurm": {"job_id", "node", "gpu_index", "visible_devices"}}.

    `node` is SLURMD_NODENAME (else SLURM_JOB_NODELIST); `gpu_index` the GPU Slurm allocated: the first
    entry of SLURM_JOB_GPUS (the node's GRES index), else of ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES
    (what Slurm sets for `--gres=gpu:...`; Slurm's sbatch(1) OUTPUT ENVIRONMENT VARIABLES), as an int
    when it is one, None without a GPU allocation; `visible_devices` every one of those variables that
    is set, verbatim. {} outside a campaign and outside Slurm."""
    env = os.environ if env is None else env
    out: dict[str, Any] = {}
    if env.get(HOST_KEY_ENV):
        out["key"] = env[HOST_KEY_ENV]
    if env.get("SLURM_JOB_ID"):
        visible = {k: env[k] for k in _GPU_ENV if env.get(k)}
        first = next((visible[k].split(",")[0].strip() for k in _GPU_ENV if k in visible), None)
        out["slurm"] = {
            "job_id": env["SLURM_JOB_ID"],
            "node": env.get("SLURMD_NODENAME") or env.get("SLURM_JOB_NODELIST"),
            "gpu_index": int(first) if first is not None and first.isdigit() else first,
            "visible_devices": visible,
        }
    return out


def _amdgpu_module(sysfs: Path) -> str | None:
    """amdgpu's version (DKMS builds have one), "loaded" (in-tree), or None (not loaded)."""
    mod = sysfs / "module" / "amdgpu"
    if not mod.is_dir():
        return None
    return _read(mod / "version") or "loaded"
