"""Model files: download from the Hugging Face Hub (huggingface_hub) or generate tiny stand-ins."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from toolkit.errors import BadInput, ToolkitError
from toolkit.matrix import LoadedMatrix, ModelSpec
from toolkit.tinymodel import ensure_model_file, sha256_file


def fetch_model(lm: LoadedMatrix, spec: ModelSpec, *, echo: Callable[[str], None] = print) -> str:
    """Make `spec.path` exist: generate a tiny model, or download `spec.hf` with huggingface_hub.

    A model without `hf.revision` is downloaded at the commit the Hub resolves now, and that commit is
    written into the matrix file as `revision:` (toolkit/hf_checkpoint.py `pin_revision_in_matrix`;
    where the file cannot be edited safely, the status says what to add). An existing checkpoint
    directory downloaded by huggingface_hub is pinned to the commit it was downloaded at.

    Returns a one-line status. Raises BadInput (no source to fetch from, sha256 mismatch) or
    ToolkitError (the hub is unreachable: the message says so and how to copy the file by hand).
    """
    from toolkit.hf_checkpoint import local_revision

    path = lm.resolve(spec.path)
    if spec.generate:
        ensure_model_file(path, spec.generate)
        return f"generated {path}"
    pinned = ""
    if not path.exists():
        if spec.hf is None:
            raise BadInput(f"{lm.path}: models[{spec.name}]: {path} is absent and no `hf:` repo is given to fetch it from")
        revision = spec.hf.revision or _resolve_revision(spec)
        echo(f"{spec.name}: downloading {spec.hf.repo}/{spec.hf.file or ''} at {revision} to {path} ...")
        _download(spec, path, revision)
        if spec.hf.revision is None:
            pinned = _pin(lm, spec, revision)
    elif spec.hf is not None and spec.hf.revision is None and path.is_dir() and (got := local_revision(path)):
        pinned = _pin(lm, spec, got)
    if spec.sha256 and path.is_file():
        got = sha256_file(path)
        if got != spec.sha256:
            raise BadInput(f"{lm.path}: models[{spec.name}].sha256: {path} has {got}, expected {spec.sha256}")
        return f"{path} present, sha256 verified{pinned}"
    return f"{path} present{pinned}"


def _pin(lm: LoadedMatrix, spec: ModelSpec, revision: str) -> str:
    """Write the resolved commit into the matrix; the status tail says what happened."""
    from toolkit.hf_checkpoint import pin_revision_in_matrix

    if pin_revision_in_matrix(lm.path, spec.name, revision):
        return f"; pinned models[{spec.name}].hf.revision: {revision} in {lm.path}"
    return (f"; could not edit {lm.path} safely: add `revision: {revision}` under models[{spec.name}].hf to pin "
            "what was downloaded")


def _resolve_revision(spec: ModelSpec) -> str:
    """The commit hash the Hub's default branch of `spec.hf.repo` points at now (huggingface_hub)."""
    from huggingface_hub import HfApi

    assert spec.hf is not None
    try:
        sha = HfApi().model_info(spec.hf.repo).sha
    except Exception as err:  # hub errors come in many types; the message is what matters here
        raise ToolkitError(
            f"could not resolve the revision of {spec.hf.repo} ({type(err).__name__}: {str(err)[:200]}); on an "
            f"offline host copy the checkpoint by hand and pin `revision:` (its commit hash) under models[{spec.name}].hf"
        ) from None
    if not sha:
        raise ToolkitError(f"the Hub returned no commit hash for {spec.hf.repo}; pin `revision:` by hand")
    return sha


def _download(spec: ModelSpec, path: Path, revision: str) -> None:
    from huggingface_hub import hf_hub_download, snapshot_download

    assert spec.hf is not None
    try:
        if spec.hf.file:
            got = hf_hub_download(spec.hf.repo, spec.hf.file, revision=revision, local_dir=str(path.parent))
            if Path(got).resolve() != path.resolve():
                Path(got).rename(path)
        else:
            snapshot_download(spec.hf.repo, revision=revision, local_dir=str(path))
    except Exception as err:  # hub errors come in many types; the message is what matters here
        raise ToolkitError(
            f"could not download {spec.hf.repo} ({type(err).__name__}: {str(err)[:200]}); on an offline host copy "
            f"the file to {path} by hand"
        ) from None
