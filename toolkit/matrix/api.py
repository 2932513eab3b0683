"""matrix.yaml: the one description of what to build and what to measure (schema version 1).

    Matrix
      sources:  {name: SourceSpec}      where llama.cpp (or vLLM) source comes from
      images:   [ImageSpec]             template + backend + template variables + source
      models:   [ModelSpec]             local path, optional Hugging Face repo/file, sha256
      bench:    BenchAxes               llama-bench axes, crossed
      vllm: / sglang:                   runner settings blocks (toolkit.core.registry.SETTINGS)
      campaign: CampaignSpec            Slurm hosts and what each measures (`toolkit campaign`)

`load_matrix(path)` validates with pydantic and raises `BadInput` whose message names the file,
the key path (e.g. `images[1].backend`) and the fix.

The door of matrix.yaml: the schema's models are in `toolkit/matrix/schema.py`, loading and its guards
in `toolkit/matrix/loading.py`; every other package imports this module.
"""

from __future__ import annotations

from toolkit.matrix.depth import DEPTH_LOG_SUFFIX, WIDE_DEPTHS, DepthSweep, KvShape, depth_axes, fit_depths
from toolkit.matrix.loading import (
    MAX_MATRIX_BYTES,
    TEMPLATE_DIR,
    LoadedMatrix,
    load_matrix,
    project_hint,
    read_yaml,
    template_path,
)
from toolkit.matrix.schema import (
    CASE_DEFAULTS,
    MAX_AXIS_VALUE,
    MAX_COUNT,
    BenchAxes,
    CampaignHost,
    CampaignSpec,
    HfFile,
    ImageSpec,
    Matrix,
    ModelSpec,
    SourceSpec,
    StrictBlock,
    nearest,
)
from toolkit.matrix.sizes import memory_bytes
from toolkit.matrix.template_vars import HOST
