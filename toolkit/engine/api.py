"""The one module that talks to the container engine: Docker, or Podman through its Docker-compatible
API (`podman system service`). Builds are a subprocess (`docker buildx build`, since the docker SDK
drives only the classic builder; `podman build` on Podman), containers go through the docker SDK.

Which engine: `engine_name()`, by the rule of `toolkit --engine` / $TOOLKIT_ENGINE and auto said in
`choice`'s docstring; rootful and rootless Podman are two engines (separate `engine_id()`s).

Every command is an argument list, never a shell string; `buildx_command` and `run_command`
return the exact CLI equivalents for `--dry-run` (`podman build` / `podman run` on Podman).

The engine package's door: every other package imports this module; the code lives in its rooms,
`choice` (which engine, its client), `images` (images and builds), `containers` (run specs, runs,
probes, volumes) and `registry` (tag, push, pull, digests).
"""

from __future__ import annotations

from toolkit.engine.choice import (
    HOST_LABEL,
    address_problem,
    cli,
    client,
    engine_id,
    engine_id_text,
    engine_info,
    engine_kind,
    engine_label,
    engine_name,
    engine_summary,
    host_id,
    is_podman,
    use_docker_context,
)
from toolkit.engine.containers import (
    KEEP_GROUPS,
    EngineLost,
    Interrupted,
    Mount,
    RunOutcome,
    RunSpec,
    container_logs,
    container_state,
    ensure_volume,
    exec_command,
    exec_in,
    is_connection_error,
    probe_base_image,
    probe_device_access,
    raised_by_docker,
    remove_container,
    remove_container_id,
    remove_orphans,
    run_command,
    run_container,
    start_container,
    toolkit_containers,
    volume_exists,
)
from toolkit.engine.images import (
    BUILD_RETRY,
    BuildOutcome,
    ImageInfo,
    buildx_builders,
    buildx_command,
    built_image_id,
    ensure_base_image,
    inspect_image,
    read_metadata,
    run_buildx,
)
from toolkit.engine.registry import (
    RegistryLookupError,
    pull_image,
    pullable_digests,
    push_image,
    raw_manifest,
    registry_digest,
    registry_manifest_digest,
    tag_image,
)
