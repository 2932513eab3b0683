"""Model files: download from the Hugging Face Hub (huggingface_hub) or generate tiny stand-ins."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from toolkit.core.errors import BadInput, RemoteUnavailable, ToolkitError
from toolkit.core.text import counted, path_text
from toolkit.matrix.api import LoadedMatrix, ModelSpec
from toolkit.models.tiny import ensure_model_file, sha256_file


def fetch_model(
    lm: LoadedMatrix, spec: ModelSpec, *, echo: Callable[[str], None] = print, twin: bool = False
) -> str:
    """Make `spec.path` exist: generate a tiny model, or download `spec.hf` with huggingface_hub.

    `twin=True` writes a shape twin instead (`fetch_twin`): the real file's header, random data.

    A model without `hf.revision` is downloaded at the commit the Hub resolves now, and that commit is
    written into the matrix file as `revision:` (toolkit/models/checkpoint.py `pin_revision_in_matrix`;
    where the file cannot be edited safely, the status says what to add). An existing checkpoint
    directory downloaded by huggingface_hub is pinned to the commit it was downloaded at.

    Returns a one-line status. Raises BadInput (no source to fetch from, sha256 mismatch) or
    ToolkitError (the hub is unreachable: the message says so and how to copy the file by hand).
    """
    from toolkit.models.checkpoint import local_revision

    if twin:
        return fetch_twin(lm, spec, echo=echo)
    path = lm.resolve(spec.path, what=f"models[{spec.name}].path")
    if spec.generate:
        ensure_model_file(path, spec.generate, named=lm.model_paths())
        return f"generated {path}"
    pinned = ""
    if not path.exists():
        if spec.hf is None:
            raise BadInput(
                f"{lm.path}: models[{spec.name}]: {path} is absent and no `hf:` repo is given to fetch it from"
            )
        revision = spec.hf.revision or _resolve_revision(
            spec,
            f"on an offline host copy the checkpoint by hand to {path_text(path)} (models[{spec.name}].path) and pin "
            f"`revision:` (its commit hash) under models[{spec.name}].hf",
        )
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


def fetch_twin(
    lm: LoadedMatrix, spec: ModelSpec, *, echo: Callable[[str], None] = print, seed: int = 0
) -> str:
    """Write the shape twin of the Hub GGUF `spec.hf` (toolkit/models/twin.py): read only its header by HTTP
    range requests, write `<path stem>.twin.gguf` (same metadata, tokenizer, tensor names, shapes,
    types and size; random data with valid scales) and its record `<twin>.twin.json` (kind
    synthetic-twin, repo, revision, file, the header's sha256, the twin's sha256).

    An unpinned `hf.revision` is resolved and pinned in the matrix as for a download. A twin whose
    record names the same revision and header and whose bytes still have the recorded sha256 is kept.
    Returns a one-line status. Raises BadInput (not a Hub GGUF file, a header a twin cannot be made
    of), ToolkitError (the Hub unreachable), FileSystemError (the twin cannot be written).
    """
    from toolkit.models import twin as tw

    where = f"{lm.path}: models[{spec.name}]"
    if spec.format != "gguf" or spec.hf is None or not spec.hf.file:
        raise BadInput(
            f"{where}: --twin needs a GGUF file on the Hugging Face Hub (format: gguf, hf.repo and "
            "hf.file); tiny models are generated without it"
        )
    real = lm.resolve(spec.path, what=f"models[{spec.name}].path")
    out = tw.twin_path(real)
    offline = (  # nc51 S5: not the full download's advice (copy the 17 GB file a twin exists to avoid)
        "a twin needs only the file's GGUF header, read from the Hugging Face Hub (or HF_ENDPOINT): make it "
        f"where the Hub is reachable, or, offline, copy the real file to {path_text(real)} and bench that, no twin needed"
    )
    revision = spec.hf.revision or _resolve_revision(spec, offline)
    echo(f"{spec.name}: reading the GGUF header of {spec.hf.repo}/{spec.hf.file} at {revision} ...")
    header = tw.read_hub_header(spec.hf.repo, spec.hf.file, revision, offline=offline)
    pinned = _pin(lm, spec, revision) if spec.hf.revision is None else ""
    read = f"header {counted(header.data_offset, 'byte')} (read {header.bytes_read} of {header.file_size})"
    old = tw.read_sidecar(out) if out.is_file() else None
    if (
        old
        and old["twin_of"].get("revision") == revision
        and old["twin_of"].get("header_sha256") == header.sha256
        and sha256_file(out) == old.get("sha256")
    ):
        return f"twin {out} present, sha256 verified ({read}){pinned}"
    echo(
        f"{spec.name}: writing the {header.file_size}-byte twin {out} ({len(header.tensors)} tensors: "
        f"{', '.join(f'{k} {v}' for k, v in header.type_counts().items())}) ..."
    )
    sha = tw.write_twin(header, out, seed=seed)
    tw.write_sidecar(
        out, header, sha256=sha, seed=seed, repo=spec.hf.repo, revision=revision, file=spec.hf.file
    )
    return (
        f"twin {out} written, sha256 {sha}, {read}, record {tw.sidecar_path(out)}; its numbers are a twin's "
        f"(kind {tw.TWIN_KIND}): bench it with a model entry whose path is {out}{pinned}"
    )


def _pin(lm: LoadedMatrix, spec: ModelSpec, revision: str) -> str:
    """Write the resolved commit into the matrix; the status tail says what happened."""
    from toolkit.models.checkpoint import pin_revision_in_matrix

    if pin_revision_in_matrix(lm.path, spec.name, revision):
        return f"; pinned models[{spec.name}].hf.revision: {revision} in {lm.path}"
    return (
        f"; could not edit {lm.path} safely: add `revision: {revision}` under models[{spec.name}].hf to pin "
        "what was downloaded"
    )


def _resolve_revision(spec: ModelSpec, offline: str) -> str:
    """The commit hash the Hub's default branch of `spec.hf.repo` points at now (huggingface_hub);
    RemoteUnavailable where the Hub does not answer, ending with `offline` (what the caller needs instead:
    a download's checkpoint copied by hand, a twin's header)."""
    from huggingface_hub import HfApi

    assert spec.hf is not None
    try:
        sha = HfApi().model_info(spec.hf.repo).sha
    except Exception as err:  # hub errors come in many types; the message is what matters here
        raise RemoteUnavailable(
            f"could not resolve the revision of {spec.hf.repo} ({type(err).__name__}: {str(err)[:200]}); {offline}"
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
        raise RemoteUnavailable(
            f"could not download {spec.hf.repo} ({type(err).__name__}: {str(err)[:200]}); on an offline host copy "
            f"the file to {path} by hand"
        ) from None
