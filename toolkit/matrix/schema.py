"""matrix.yaml's schema (version 1), as pydantic models: what each key may hold and why (the map of its
keys, Matrix's fields, is the door's docstring: toolkit/matrix/api.py)."""

from __future__ import annotations

import itertools
import math
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from toolkit.core import invocation
from toolkit.core import registry as runner_registry
from toolkit.core.errors import BadInput
from toolkit.core.paths import relative_path
from toolkit.core.types import Backend, Runner, is_sha256
from toolkit.matrix.depth import DepthSweep, depth_axes
from toolkit.matrix.sizes import memory_bytes
from toolkit.matrix.template_vars import check_safe as _check_safe
from toolkit.matrix.template_vars import check_template_var

SCHEMA_VERSION = 1


MAX_COUNT = 100_000
"""Threads, requests, iterations, concurrency: at most this many."""


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


# set per run by the toolkit (device selection, caches): an env axis may not override them
_ENV_RESERVED = frozenset(
    {
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "GGML_VK_VISIBLE_DEVICES",
        "MESA_SHADER_CACHE_DIR",
        "PATH",
    }
)
"""Plus every `LD_*` name: the dynamic loader reads LD_LIBRARY_PATH, LD_PRELOAD, LD_AUDIT, ... and
each changes what code runs before the benchmark (one rule for all of them; ld.so(8))."""


MAX_ENV_TOTAL = 1024 * 1024
"""The env axis's largest combination (every NAME=value with its NUL): half of ARG_MAX (2 MiB where
the stack limit is the default 8 MiB), the rest for the image's own environment and the command."""

MAX_AXIS_VALUE = 1_000_000
"""The largest value of a bench axis (tokens, micro-batch, layers...), and of `toolkit tune --values`."""

MAX_CASES = 100_000
"""The most test cases the bench axes may cross to (each a llama-bench test of a few seconds at
least, times its repetitions): more is no benchmark anyone waits for, and listing them fills memory."""

MAX_ENV_STRING = 128 * 1024
"""Linux refuses an exec whose one `NAME=value` string (with its NUL) exceeds MAX_ARG_STRLEN, 32 pages
of 4 KiB (include/uapi/linux/binfmts.h): the container would fail to start after a build."""


_RESERVED_VARS = {"image_name", "backend", "runner", "template_hash"}  # min_mesa_version: TEMPLATE_VARS


_NAME = re.compile(r"^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$")


# Model names become parts of container names and log file names; template names are file names.
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class StrictBlock(BaseModel):
    """Every matrix block: unknown keys refused, and strict types (pydantic strict mode) — a value of
    the wrong type is refused, never coerced: `true` is no integer, `"512"` no count, a set or a
    tuple no list, a date no string (issue 21: `gfx_targets: false` reached the template)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _check_one_line(value: str, what: str) -> str:
    """Free text that lands in an image label (an argument, never a shell string): one printable line."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{what} {value!r} contains a newline or control character; write it on one line")
    return value


class SourceSpec(StrictBlock):
    """Where a source tree comes from. Exactly one of git / path / archive / pypi.

    - git + ref: clone and check out `ref` (tag, branch or commit); the resolved commit is recorded.
    - path: a local directory (copied into the build context).
    - archive: a local .tar.gz / .zip (e.g. an sdist), `subdir` selects the tree inside it.
    - pypi: `name==version` of an sdist on PyPI that vendors the tree (e.g. llama-cpp-python,
      subdir vendor/llama.cpp); works where PyPI is the only reachable index.
    `subdir`: a folder inside the archive's tree, relative, without '..' (checked here and again after
    extraction, symlinks resolved: toolkit.images.sources).
    `commit` pins the expected commit; required for path/archive/pypi (they carry no .git).
    `fallback` is tried when this source cannot be fetched (e.g. GitHub unreachable); its resolved
    commit must equal `commit` when both are given.
    """

    git: str | None = None
    ref: str | None = None
    path: str | None = None
    archive: str | None = None
    pypi: str | None = None
    subdir: str | None = None
    commit: str | None = None
    version: str | None = Field(None, description="human version label, e.g. b7200")
    fallback: SourceSpec | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> SourceSpec:
        kinds = [k for k in ("git", "path", "archive", "pypi") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError(
                "give exactly one of git (with ref), path, archive or pypi; got "
                + (", ".join(kinds) or "none")
            )
        if self.git and not self.ref:
            raise ValueError("git source needs `ref` (a tag, branch or commit) to be reproducible")
        if not self.git and not self.commit:
            raise ValueError(f"{kinds[0]} source needs `commit` (it has no .git to read it from)")
        if self.git and not re.match(
            r"^(https?|ssh|git|file)://[^\s'\"`$;]+$|^[\w.-]+@[\w.-]+:[^\s'\"`$;]+$", self.git
        ):
            raise ValueError(f"git {self.git!r} is not a git URL (https://..., ssh://..., git@host:path)")
        if self.pypi and not re.fullmatch(r"^[A-Za-z0-9_.-]+==[A-Za-z0-9_.+!-]+$", self.pypi):
            raise ValueError(
                f"pypi {self.pypi!r} must be an exact pin NAME==VERSION (e.g. llama-cpp-python==0.3.36)"
            )
        for key in ("ref", "commit", "version", "subdir"):
            val = getattr(self, key)
            if val is not None:
                _check_safe(val, key)
        if self.subdir:  # copied into the build context: never a folder outside the archive's tree
            try:
                relative_path(
                    self.subdir,
                    what="subdir",
                    fix="give a folder inside the archive, relative to its top folder (e.g. vendor/llama.cpp)",
                )
            except BadInput as err:
                raise ValueError(str(err)) from None
        for key in ("path", "archive"):  # recorded in the image source label
            val = getattr(self, key)
            if val is not None:
                _check_one_line(val, key)
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("git", "path", "archive", "pypi") if getattr(self, k))


class ImageSpec(StrictBlock):
    """One image: rendered from `template` into images/<name>/Dockerfile, built, benchmarked.

    `vars` are the template variables (strings/numbers/lists); `source` names an entry of
    `sources` copied into the build context as src/. `runner` is the benchmark program inside.
    `software_device` marks an image that may run on a CPU-type device (Mesa lavapipe) only when
    the user opts in with `toolkit bench --allow-software-gpu`.
    """

    name: str
    template: str
    backend: Backend
    runner: Runner = "llama-bench"
    source: str | None = None
    vars: dict[str, Any] = Field(default_factory=dict)
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.fullmatch(v):
            raise ValueError(
                "image name must be lowercase letters, digits, '.', '_' or '-', start and end with a "
                "letter or digit (max 63 chars)"
            )
        return v

    @field_validator("template")
    @classmethod
    def _template(cls, v: str) -> str:
        if not _FILE_NAME.fullmatch(v):
            raise ValueError(
                f"template {v!r} must be a file name in Dockerfile.templates/ (no '/', no leading '.')"
            )
        return v

    @field_validator("description")
    @classmethod
    def _description(cls, v: str) -> str:
        return _check_one_line(v, "description")

    @field_validator("vars")
    @classmethod
    def _vars(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        image = f"image {info.data['name']!r}: " if "name" in info.data else ""  # absent: the name was bad
        for key, val in v.items():
            if key in _RESERVED_VARS:
                raise ValueError(f"{image}template variable {key!r} is set by the toolkit; rename yours")
            if not isinstance(key, str) or not re.fullmatch(r"^[a-z_][a-z0-9_]*$", key):
                raise ValueError(f"{image}template variable name {key!r} must be snake_case")
            try:
                check_template_var(key, val)
            except ValueError as err:
                raise ValueError(f"{image}{err}") from None
        return v


class HfFile(StrictBlock):
    """A file (or, without `file`, a whole checkpoint) on the Hugging Face Hub, downloaded with
    huggingface_hub when asked. `revision` pins it: a 40-hex commit hash (branches and tags move);
    `toolkit fetch-model` resolves and writes it where it is missing."""

    repo: str
    file: str | None = None
    revision: str | None = None

    @field_validator("revision")
    @classmethod
    def _commit(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9a-f]{40}", v):
            raise ValueError(
                f"revision {v!r} is not a commit hash (40 lowercase hex digits); branches and tags "
                f"move: remove it and run `{invocation.command('fetch-model', 'NAME')}`, which resolves and writes the commit"
            )
        return v


class ModelSpec(StrictBlock):
    """A model: a GGUF file (llama.cpp) or a Hugging Face model directory (vLLM).

    `path` is relative to the matrix file. `generate: tiny-qwen3moe` creates a tiny random-weight
    model at `path` when absent (smoke runs; see toolkit/models/tiny.py). `sha256` (hex, of the GGUF
    file) is checked before a run when given, and always recorded.
    """

    name: str
    path: str
    format: Literal["gguf", "hf"] = "gguf"
    hf: HfFile | None = None
    sha256: str | None = None
    generate: Literal["tiny-qwen3moe", "tiny-qwen3moe-hf"] | None = None
    runners: list[Runner] = Field(default_factory=lambda: ["llama-bench"])
    depth: DepthSweep | None = None  # depth curves (llama-bench -d), toolkit/matrix/depth.py

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _FILE_NAME.fullmatch(v):
            raise ValueError(
                "model name must be letters, digits, '.', '_' or '-' (it names containers and log files)"
            )
        return v

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str | None) -> str | None:
        if v is not None and not is_sha256(v):
            raise ValueError("sha256 must be 64 lowercase hex digits (run `sha256sum FILE`)")
        return v


def _flash_attn_on() -> list[Literal[-1, 0, 1]]:
    """BenchAxes.flash_attn's default, [1] (a lambda's list would be typed list[int])."""
    return [1]


_AUTO_AXES = frozenset({"flash_attn", "n_gpu_layers"})
"""The axes where llama-bench takes -1 (flash attention auto, all GPU layers)."""


KvCacheType = Literal["f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"]
"""The KV-cache types llama-bench's -ctk/-ctv take (ggml_type_from_name at 0c1e57098)."""

SplitMode = Literal["none", "layer", "row", "tensor"]
"""llama-bench's -sm values at 0c1e57098."""

_F16: KvCacheType = "f16"
_LAYER: SplitMode = "layer"

CASE_DEFAULTS: dict[str, Any] = {"type_k": "f16", "type_v": "f16", "split_mode": "layer", "n_cpu_moe": 0}
"""Case fields a case (and its key) carries only where it differs from llama-bench's default, so the
cases and records of a matrix without these axes are what they always were."""


def too_many_cases(axes: Any) -> str | None:
    """Why BenchAxes `axes` cross to more than MAX_CASES test cases (counted before any is made), or
    None. 1000 pp and tg values x 100 micro-batches x 100 depths (2 x 10^7 cases), or an env axis of 30
    names of 4 values each (4^30 containers), took 11 GB and 4.7 GB listing them for the plan line."""
    tests = sum(1 for x in axes.n_prompt if x) + sum(1 for x in axes.n_gen if x)
    counts = [("n_prompt + n_gen", tests)] + [
        (k, len(getattr(axes, k)))
        for k in ("n_batch", "n_ubatch", "flash_attn", "n_gpu_layers", "n_depth", *CASE_DEFAULTS)
    ]
    counts += [(f"env.{k}", len(v)) for k, v in sorted(axes.env.items())]
    total = math.prod(n for _, n in counts)
    if total <= MAX_CASES:
        return None
    many = [f"{k} {n}" for k, n in counts if n > 1]
    crossed = " x ".join(many[:6]) + (f" x {len(many) - 6} more axes" if len(many) > 6 else "")
    many_cases = f"{total:,}" if total < 10**15 else f"{total:.3g}"  # 1e+05 read as the limit itself
    return (
        f"the axes cross to up to {many_cases} test cases ({crossed}), more than {MAX_CASES:,} (a run of "
        "years at a few seconds a case): cut the axes"
    )


class BenchAxes(StrictBlock):
    """llama-bench axes; every list is crossed (one llama-bench process per image x model).

    n_prompt -> -p, n_gen -> -n, n_ubatch -> -ub, n_batch -> -b, flash_attn -> -fa,
    n_gpu_layers -> -ngl, n_depth -> -d, repetitions -> -r. Units: tokens. Counts are strict integers:
    `repetitions: true` or `n_prompt: ["512"]` are bad input, not -r 1 or a string passed along.
    -1 is taken where llama-bench takes it (the pinned build, 0c1e57098, writes it itself): flash_attn
    -1 = auto, n_gpu_layers -1 = all layers (its default).
    """

    n_prompt: list[StrictInt] = Field(default_factory=lambda: [512])
    n_gen: list[StrictInt] = Field(default_factory=lambda: [128])
    n_ubatch: list[StrictInt] = Field(default_factory=lambda: [512])
    n_batch: list[StrictInt] = Field(default_factory=lambda: [2048])
    n_depth: list[StrictInt] = Field(default_factory=lambda: [0])
    flash_attn: list[Literal[-1, 0, 1]] = Field(default_factory=_flash_attn_on)
    n_gpu_layers: list[StrictInt] = Field(default_factory=lambda: [999])
    # KV-cache types (-ctk/-ctv), split mode (-sm) and MoE experts kept on the CPU (-ncmoe): the values
    # the pinned llama-bench accepts (tools/llama-bench/llama-bench.cpp, ggml_type_from_name and -sm at
    # 0c1e57098); its defaults are not passed. Part of the test identity (llama-bench writes them in
    # every row); llama-bench only: the vLLM and SGLang runners take no such flags.
    type_k: list[KvCacheType] = Field(default_factory=lambda: [_F16])
    type_v: list[KvCacheType] = Field(default_factory=lambda: [_F16])
    split_mode: list[SplitMode] = Field(default_factory=lambda: [_LAYER])
    n_cpu_moe: list[StrictInt] = Field(default_factory=lambda: [0])
    repetitions: StrictInt = Field(5, ge=1, le=1000)
    runs: StrictInt = Field(
        1,
        ge=1,
        le=100,
        description="process-level repetitions: container starts per (image, model); "
        "the report shows the between-run spread and flags bimodal runs",
    )
    threads: StrictInt | None = Field(None, ge=1, le=MAX_COUNT)
    canary: bool = Field(True, strict=True)  # llama-perplexity before each llama.cpp sweep: bench/canary.py
    cooldown_s: StrictInt = Field(
        0,
        ge=0,
        le=3600,
        description="seconds llama-bench rests before each test (its --delay, 'cool off before the test' at "
        "0c1e57098): lets the GPU cool between tests; outside the measured window; recorded with every record",
    )
    timeout_s: float = Field(
        3600,
        gt=0,
        le=7 * 24 * 3600,
        description="per container (the sweep, its depth sweep, the canary each), seconds",
    )
    memory: str | None = Field(None, description="container memory limit (docker --memory), e.g. 24g")
    # Runtime environment as an axis: NAME -> values, crossed with each other like the other axes
    # (one container per combination; the llama-bench axes run inside each). Part of the test
    # identity (`env.NAME`, toolkit/results/identity.py) and a column of the tables where it varies;
    # Values are strings (numbers are written as text); null leaves the variable unset (ggml's
    # GGML_VK_DISABLE_* switches test whether the variable exists: "0" disables too), e.g.
    # {"GGML_VK_DISABLE_COOPMAT": [null, "1"]} measures cooperative matrix on and off.
    env: dict[str, list[str | None]] = Field(default_factory=dict)

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise ValueError(
                "env must map variable names to lists of values (null: unset), e.g. {GGML_VK_DISABLE_COOPMAT: [null, '1']}"
            )
        out: dict[str, list[str | None]] = {}
        for name, values in v.items():
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
                raise ValueError(
                    f"env: {name!r} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
                )
            if name in _ENV_RESERVED or name.startswith("LD_"):
                why = (
                    "read by the dynamic loader (every LD_* name)"
                    if name.startswith("LD_")
                    else "set by the toolkit itself (device selection, caches)"
                )
                raise ValueError(f"{name} is {why}, not an axis: remove it from bench.env")
            if not isinstance(values, list) or not values:
                raise ValueError(
                    f"env.{name}: give a non-empty list of values, e.g. [null, '1'] (null: unset)"
                )
            vals: list[str | None] = []
            for x in values:
                if x is None:
                    vals.append(None)
                    continue
                if isinstance(x, bool) or not isinstance(x, str | int):  # a float is set as Python writes
                    raise ValueError(  # it, not as shown: 1.10 -> 1.1, 1.0e3 -> 1000.0, 1e400 -> inf
                        f"env.{name}: {x!r} is not text, a whole number or null (unset); quote a decimal or a "
                        f"flag word (e.g. '1.10', 'true'): unquoted, YAML reads it as a number or boolean"
                    )
                size = len(f"{name}={x}".encode()) + 1  # with its NUL, as the kernel counts it
                if size > MAX_ENV_STRING:
                    raise ValueError(
                        f"env.{name}: {name}=value is {size} bytes with its NUL; Linux starts no process "
                        f"with an environment string over {MAX_ENV_STRING} bytes (MAX_ARG_STRLEN): shorten it"
                    )
                vals.append(_check_safe(str(x), f"env.{name} value") if str(x) else "")
            if len(set(vals)) != len(vals):
                raise ValueError(f"env.{name}: duplicate values")
            out[name] = vals
        largest = sum(max(len(f"{n}={v or ''}".encode()) + 1 for v in vs) for n, vs in out.items())
        if largest > MAX_ENV_TOTAL:
            raise ValueError(
                f"env: a combination of these values is up to {largest} bytes of environment; Linux starts no "
                f"process whose arguments and environment exceed ARG_MAX (2 MiB with the default stack): keep "
                f"the axis under {MAX_ENV_TOTAL} bytes"
            )
        return out

    def env_combinations(self) -> list[dict[str, str | None]]:
        """The crossed `env` axis: one {NAME: value} per container ([{}] without the axis); a value
        None leaves NAME unset in that container."""
        names = sorted(self.env)
        return [
            dict(zip(names, combo, strict=True)) for combo in itertools.product(*(self.env[n] for n in names))
        ]

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: str | None) -> str | None:
        if v is not None:
            memory_bytes(v)
        return v

    @field_validator(
        "n_prompt", "n_gen", "n_ubatch", "n_batch", "n_depth", "flash_attn", "n_gpu_layers", "n_cpu_moe"
    )
    @classmethod
    def _nonempty(cls, v: list[int], info: ValidationInfo) -> list[int]:
        if not v:
            raise ValueError("axis list is empty: give at least one value (e.g. [512])")
        low = -1 if info.field_name in _AUTO_AXES else 0
        if any(x < low or x > MAX_AXIS_VALUE for x in v):
            raise ValueError(
                f"axis values must be between {low} and {MAX_AXIS_VALUE}"
                + (" (-1: llama-bench's auto / all layers)" if low < 0 else "")
            )
        if len(set(v)) != len(v):
            raise ValueError("axis list has duplicate values")
        return v

    @field_validator("type_k", "type_v", "split_mode")
    @classmethod
    def _nonempty_words(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("axis list is empty: give at least one value (e.g. [f16])")
        if len(set(v)) != len(v):
            raise ValueError("axis list has duplicate values")
        return v

    @model_validator(mode="after")
    def _ubatch_le_batch(self) -> BenchAxes:
        if not any(x > 0 for x in self.n_prompt + self.n_gen):
            raise ValueError(
                "no test to run: every n_prompt and n_gen is 0; give a prompt length (pp) or a "
                "generation length (tg) > 0"
            )
        if any(x == 0 for x in self.n_ubatch + self.n_batch):
            raise ValueError("n_batch and n_ubatch must be >= 1")
        quantized_v = [t for t in self.type_v if t not in ("f16", "bf16")]
        if quantized_v and 0 in self.flash_attn:
            raise ValueError(
                f"type_v {quantized_v} with flash_attn 0: llama.cpp refuses a quantized V cache without "
                "flash attention (llama-context.cpp: 'quantized V cache requires flash_attn'); use flash_attn "
                "[1] or [-1], or type_v [f16]"
            )
        if max(self.n_ubatch) > max(self.n_batch):
            raise ValueError(
                f"micro-batch n_ubatch {max(self.n_ubatch)} is larger than every n_batch {self.n_batch}: "
                "llama.cpp clamps ubatch to batch, so raise n_batch or drop that n_ubatch"
            )
        return self

    @model_validator(mode="after")
    def _bounded_cases(self) -> BenchAxes:
        why = too_many_cases(self)
        if why:
            raise ValueError(why)
        return self

    def cases(self) -> list[dict[str, Any]]:
        """The crossed cases as llama-bench would emit them (pp rows, then tg rows), for counting; the
        cache-type, split-mode and MoE-offload fields only where they differ from CASE_DEFAULTS."""
        out = []
        for extra in self._extra_cases():
            out += [{**c, **extra} for c in self._cases()]
        return out

    def _extra_cases(self) -> list[dict[str, Any]]:
        """The crossed type_k x type_v x split_mode x n_cpu_moe, each without its default fields."""
        names = list(CASE_DEFAULTS)
        return [
            {k: v for k, v in zip(names, combo, strict=True) if v != CASE_DEFAULTS[k]}
            for combo in itertools.product(*(getattr(self, k) for k in names))
        ]

    def _cases(self) -> list[dict[str, Any]]:
        out = []
        for b, ub, fa, ngl, d in itertools.product(
            self.n_batch, self.n_ubatch, self.flash_attn, self.n_gpu_layers, self.n_depth
        ):
            if ub > b:
                continue
            same = {"n_batch": b, "n_ubatch": ub, "flash_attn": fa, "n_gpu_layers": ngl, "n_depth": d}
            out += [{"n_prompt": p, "n_gen": 0, **same} for p in self.n_prompt if p]
            out += [{"n_prompt": 0, "n_gen": n, **same} for n in self.n_gen if n]
        return out


_SLURM_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


class CampaignHost(StrictBlock):
    """One host of a campaign: where its slices run and what they measure.

    `node`: the Slurm node name (sbatch -w); `features`: node features instead (--constraint, all
    required); `alias`: the host key its records carry and its results folder (results/hosts/<key>/),
    default the node name (required with `features` only); `images`/`models`: the slices it measures
    (default every image of the matrix x every model its runner accepts); `engine`: hosts that share
    one Docker engine name it alike (their jobs then run one at a time, like one `toolkit bench`)."""

    node: str | None = None
    features: list[str] = Field(default_factory=list)
    alias: str | None = None
    images: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)
    engine: str | None = None

    @field_validator("node", "alias", "engine")
    @classmethod
    def _word(cls, v: str | None, info) -> str | None:
        if v is not None and not _SLURM_WORD.fullmatch(v):
            raise ValueError(
                f"{info.field_name} {v!r}: letters, digits and _ . : - only (it names a folder and a job)"
            )
        return v

    @field_validator("features")
    @classmethod
    def _features(cls, v: list[str]) -> list[str]:
        for f in v:
            if not _SLURM_WORD.fullmatch(f):
                raise ValueError(f"feature {f!r}: letters, digits and _ . : - only")
        return v

    @model_validator(mode="after")
    def _where(self) -> CampaignHost:
        if not self.node and not self.features:
            raise ValueError("a host needs `node` (a Slurm node name) or `features` (node features)")
        if not self.node and not self.alias:
            raise ValueError(
                "a host chosen by `features` needs an `alias`: the key its results are filed under"
            )
        return self

    @property
    def key(self) -> str:
        return self.alias or self.node or ""


class CampaignSpec(StrictBlock):
    """The `campaign:` block: one Slurm job per (host, image, model) slice (toolkit/campaign/slurm.py).

    partition: sbatch -p (default: the cluster's default); gres_type: the GPU GRES type each job asks
    one of (`--gres=gpu:TYPE:1`; None: `--gres=gpu:1`); gpus: GPUs per job (0: no --gres, e.g. CPU-only
    nodes); time_limit: sbatch --time (Slurm's `[D-]HH:MM:SS`); signal_s: seconds before the limit Slurm
    sends SIGTERM to the job (`--signal=B:TERM@N`); allow_concurrent: let slices on one engine run at once
    (records flagged `concurrent`) instead of one at a time (default); toolkit: the command that runs the
    toolkit on the nodes (default: the submitting Python, `python -m toolkit`); sbatch_args: more sbatch
    options, verbatim; registry: which registry's digest jobs pull (default `registry:` or any pushed)."""

    partition: str | None = None
    gres_type: str | None = None
    gpus: int = Field(default=1, ge=0, le=16)
    time_limit: str | None = None
    signal_s: int = Field(default=60, ge=1, le=3600)
    allow_concurrent: bool = False
    toolkit: list[str] = Field(default_factory=list)
    sbatch_args: list[str] = Field(default_factory=list)
    registry: str | None = None
    hosts: list[CampaignHost] = Field(min_length=1)

    @field_validator("partition", "gres_type")
    @classmethod
    def _word(cls, v: str | None, info) -> str | None:
        if v is not None and not _SLURM_WORD.fullmatch(v):
            raise ValueError(f"{info.field_name} {v!r}: letters, digits and _ . : - only")
        return v

    @field_validator("time_limit")
    @classmethod
    def _time(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"(\d+-)?\d+(:\d{2}){0,2}", v):
            raise ValueError(f"time_limit {v!r}: use Slurm's [D-]HH:MM:SS, MM:SS or minutes")
        return v

    @model_validator(mode="after")
    def _unique(self) -> CampaignSpec:
        keys = [h.key for h in self.hosts]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(
                f"hosts: the host key {', '.join(dup)} is given twice (set `alias` to tell them apart)"
            )
        return self


class Matrix(StrictBlock):
    """The whole matrix file. `path` is where it was loaded from (not part of the schema)."""

    schema_version: Literal[1]
    sources: dict[str, SourceSpec] = Field(default_factory=dict)
    images: list[ImageSpec]
    models: list[ModelSpec]
    bench: BenchAxes = Field(default_factory=BenchAxes)
    registry: str | None = None
    # RADV advertises VK_KHR_cooperative_matrix on GFX12 (RDNA4) from Mesa 25.1.0 (docs/relnotes/25.1.0.rst:
    # "radv: advertise VK_KHR_cooperative_matrix on GFX12"; 25.0.x runs llama.cpp without it) and
    # VK_EXT_shader_float8 from 25.2.0 (issue 31), which llama.cpp reads to class the device as RDNA4
    # (else RDNA3 tuning); the build probe fails without either
    min_mesa_version: str = "25.2.0"
    campaign: CampaignSpec | None = None  # multi-host campaigns on Slurm (toolkit/campaign/slurm.py)
    # runner settings blocks registered in toolkit.core.registry.SETTINGS (e.g. `sglang:`) that the file
    # writes, validated by their runner's own model; one not written is not here (`settings` gives its
    # defaults), so a matrix without an `sglang:` block never imports SGLang's model (~0.015 CPU s)
    runner_settings: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _runner_blocks(cls, data: Any) -> Any:
        """Take the blocks of registered runners out of the file and validate each written one with its
        model (a key written with no value, `vllm:`, is its defaults, validated as `{}`; any other value that
        is not a mapping, `vllm: []` or `vllm: false`, is refused as one)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        blocks = {}
        for key in runner_registry.SETTINGS:
            if key not in data:
                continue
            model = runner_registry.settings_model(key)
            try:
                value = data.pop(key)  # only an empty key (`vllm:`) is the defaults; `vllm: []` is no block
                blocks[key] = model.model_validate({} if value is None else value)
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(x) for x in (key, *first["loc"]))
                msg = first["msg"]
                if first["type"] == "extra_forbidden":
                    fields = list(model.model_fields)
                    import difflib  # only for this message

                    near = difflib.get_close_matches(str(first["loc"][-1]), fields, n=1)
                    msg = (
                        f"unknown key{f'; did you mean {near[0]!r}?' if near else ''} "
                        f"(allowed: {', '.join(fields)})"
                    )
                if not first["loc"]:  # the block itself is no mapping (`vllm: []`, `vllm: false`)
                    msg += (
                        f" -> write `{key}:` as a mapping of its settings, or with no value for the defaults"
                    )
                raise ValueError(f"{where}: {msg} (the `{key}:` settings of the {key} runner)") from None
        data["runner_settings"] = blocks
        return data

    @field_validator("registry", "min_mesa_version")
    @classmethod
    def _safe(cls, v: str | None, info) -> str | None:
        return v if v is None else _check_safe(v, info.field_name)  # rendered into Dockerfiles / image refs

    @model_validator(mode="after")
    def _refs(self) -> Matrix:
        names = [i.name for i in self.images]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate image name(s): {', '.join(sorted(dup))}; image names must be unique")
        mnames = [m.name for m in self.models]
        mdup = {n for n in mnames if mnames.count(n) > 1}
        if mdup:
            raise ValueError(f"duplicate model name(s): {', '.join(sorted(mdup))}")
        for i, m in enumerate(self.models):
            if m.depth is not None and (m.format != "gguf" or "llama-bench" not in m.runners):
                raise ValueError(
                    f"models[{i}].depth (model {m.name!r}): the depth sweep runs llama-bench (-d) on a GGUF model; "
                    "this model is not one: remove its `depth:` block"
                )
            if m.depth is not None and (why := too_many_cases(depth_axes(self.bench, m.depth))):
                raise ValueError(f"models[{i}].depth (model {m.name!r}) with bench: {why}")
        for i, img in enumerate(self.images):
            if img.source is not None and img.source not in self.sources:
                raise ValueError(
                    f"images[{i}].source (image {img.name!r}): {img.source!r} is not defined under `sources` "
                    f"(defined: {', '.join(self.sources) or 'none'})"
                )
        return self

    def settings(self, key: str) -> Any:
        """The validated settings block of a registered runner (`vllm`, `sglang`: their defaults when
        the file has none, built here, so the model's module is imported only when a block is used).
        KeyError for a block no runner registers."""
        block = self.runner_settings.get(key)
        return block if block is not None else runner_registry.settings_model(key)()

    def image(self, name: str) -> ImageSpec:
        """The image named `name`; BadInput naming the matrix's images (and the nearest name)."""
        for img in self.images:
            if img.name == name:
                return img
        names = [i.name for i in self.images]
        raise BadInput(
            f"no image named {name!r} in the matrix{nearest(name, names)} (images: {', '.join(names)})"
        )


def nearest(name: str, names: list[str]) -> str:
    """`: did you mean 'X'?` (or `'X' or 'Y'?`) for the one or two names of `names` nearest `name`: those
    holding it (3 letters at least: `tiny` -> `tiny-qwen3moe`), else the closest (a typo, another case:
    `cpuu`, `CPU` -> `cpu`), as Click says for a command; empty when none is near."""
    import difflib  # only for a name that matched nothing: not imported at every start-up

    by_lower = {n.lower(): n for n in names}
    near = [n for n in by_lower if name.lower() in n][:2] if len(name) >= 3 else []  # `tiny` -> tiny-qwen3moe
    near = near or difflib.get_close_matches(name.lower(), list(by_lower), n=2, cutoff=0.6)
    return f": did you mean {' or '.join(repr(by_lower[n]) for n in near)}?" if near else ""
