"""Model files: download from the Hugging Face Hub (huggingface_hub) or generate tiny stand-ins."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from toolkit.errors import BadInput, ToolkitError
from toolkit.matrix import LoadedMatrix, ModelSpec
from toolkit.tinymodel import ensure_model_file, sha256_file


def fetch_model(lm: LoadedMatrix, spec: ModelSpec, *, echo: Callable[[str], None] = print) -> str:
    """Make `spec.path` exist: generate a tiny model, or download `spec.hf` with huggingface_hub.

    Returns a one-line status. Raises BadInput (no source to fetch from, sha256 mismatch) or
    ToolkitError (the hub is unreachable: the message says so and how to copy the file by hand).
    """
    path = lm.resolve(spec.path)
    if spec.generate:
        ensure_model_file(path, spec.generate)
        return f"generated {path}"
    if not path.exists():
        if spec.hf is None:
            raise BadInput(f"{lm.path}: models[{spec.name}]: {path} is absent and no `hf:` repo is given to fetch it from")
        echo(f"{spec.name}: downloading {spec.hf.repo}/{spec.hf.file or ''} to {path} ...")
        _download(spec, path)
    if spec.sha256 and path.is_file():
        got = sha256_file(path)
        if got != spec.sha256:
            raise BadInput(f"{lm.path}: models[{spec.name}].sha256: {path} has {got}, expected {spec.sha256}")
        return f"{path} present, sha256 verified"
    return f"{path} present"


def _download(spec: ModelSpec, path: Path) -> None:
    from huggingface_hub import hf_hub_download, snapshot_download

    assert spec.hf is not None
    try:
        if spec.hf.file:
            got = hf_hub_download(spec.hf.repo, spec.hf.file, revision=spec.hf.revision, local_dir=str(path.parent))
            if Path(got).resolve() != path.resolve():
                Path(got).rename(path)
        else:
            snapshot_download(spec.hf.repo, revision=spec.hf.revision, local_dir=str(path))
    except Exception as err:  # hub errors come in many types; the message is what matters here
        raise ToolkitError(
            f"could not download {spec.hf.repo} ({type(err).__name__}: {str(err)[:200]}); on an offline host copy "
            f"the file to {path} by hand"
        ) from None
