"""What a report's numbers are of: the model (name, file, sha256), when they were measured, on which
host and GPU with which kernel and driver, and per image its digest, runtime commit, ROCm or Mesa
version, Vulkan's matrix-cores (coopmat) state and the toolkit that built it. Public result viewers open with exactly this (GPU, VRAM, OS,
kernel, build, capture date: issue 33); read from the records alone, so an imported file says what
it carried and nothing more."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit.analysis.facts import SMOKE_MODEL_BYTES, Facts, facts_of
from toolkit.analysis.flag_help import RPC_FLAG
from toolkit.analysis.tables import Table
from toolkit.core.stats import float_or_none
from toolkit.core.text import Prose, counted
from toolkit.host.info import commit_words
from toolkit.results.canary_check import canary_problem, control_problem, own_controls
from toolkit.results.identity import type_words
from toolkit.results.records import BenchRecord, imported

_LABELS = {
    "runtime commit": (
        "org.toolkit.llama-cpp-commit",
        "org.toolkit.source-commit",
        "org.opencontainers.image.revision",
    ),
    "ROCm": ("org.toolkit.rocm-version",),
    "Mesa": ("org.toolkit.mesa-version",),
    "matrix cores": ("org.toolkit.llama-vk-matrix-cores",),
    "vLLM": ("org.toolkit.vllm-version",),
    "toolkit": ("org.toolkit.version",),
}
_RUNTIME_OF = {"ROCm": "rocm", "Mesa": "vulkan"}
"""The label an image of a backend is said with even where its records lack it (an import, an image
built before the label): `ROCm version not recorded`, never silence beside another column's `ROCm 7.1.1`."""


@dataclass
class Provenance:
    """models: `name (file, sha256 12, size, llama-bench's model_type)`, one per model; dates: (first, last)
    measurement time ("YYYY-MM-DD HH:MM:SS", UTC); local: (count, first, last) of the imported vLLM results
    whose time is their host's local time, zone not recorded (their `date`); undated: (first, last) import
    time of the imported records that carry no measurement time (a markdown table, an old -o sql row), with
    their count; hosts: one line per host (OS, kernel, CPU, GPU and driver); images: one line per image label
    (digest, backend, runtime commit, ROCm/Mesa/vLLM version, Vulkan matrix cores on/off, toolkit version, and
    the correctness canary's result: canary_text); builds: one line per image built by the toolkit, what it
    was built from (built_from). Empty lists where the records say nothing."""

    models: list[str] = field(default_factory=list)
    dates: tuple[str, str] | None = None
    local: tuple[int, str, str] | None = None
    undated: tuple[int, str, str] | None = None
    hosts: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    builds: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The header as `key: value` lines, in the order a reader asks: model, when, where, what build."""
        out = [f"model: {m}" for m in self.models]
        if self.dates:
            first, last = self.dates
            out.append(f"measured: {first} UTC" + (f" to {last} UTC" if last != first else ""))
        if self.local:
            n, first, last = self.local
            out.append(
                Prose(
                    f"measured: {first}" + (f" to {last}" if last != first else "") + " local time of the "
                    f"benchmark host, zone not recorded (vLLM's `date`), {counted(n, 'imported record')}",
                    first,
                    last,
                )
            )
        if self.undated:
            n, first, last = self.undated
            out.append(
                f"measured: not recorded for {counted(n, 'imported record')} (no time of measurement "
                f"in the file; imported {first} UTC" + (f" to {last} UTC)" if last != first else ")")
            )
        if self.runs:
            out.append(f"runs: {', '.join(self.runs)}")
        out += [f"host: {h}" for h in self.hosts]
        out += [f"image {i}" for i in self.images]
        out += [f"build {b}" for b in self.builds]
        return out

    def heading(self) -> str:
        """A report's title when none is given: the model(s) measured and the day(s) they were."""
        models = ", ".join(dict.fromkeys(m.split(" (")[0] for m in self.models)) or "no model"
        span, said, tail = (self.dates, "", "") if self.dates else (None, "", "")
        if not span and self.local:
            span, tail = self.local[1:], ", local time"
        if not span and self.undated:
            span, said = self.undated[1:], "imported "
        if not span:
            return f"Benchmark report: {models}"
        first, last = span[0][:10], span[1][:10]
        return f"Benchmark report: {models} ({said}{first}{'' if last == first else ' to ' + last}{tail})"

    def to_json(self) -> dict[str, Any]:
        return {
            "models": self.models,
            "measured_utc": list(self.dates) if self.dates else None,
            "measured_local": (
                {"records": self.local[0], "local_time": list(self.local[1:])} if self.local else None
            ),
            "undated": (
                {"records": self.undated[0], "imported_utc": list(self.undated[1:])} if self.undated else None
            ),
            "runs": self.runs,
            "hosts": self.hosts,
            "images": self.images,
            "builds": self.builds,
        }


TEXT_MAX = 64
"""The most characters of one free-text value of a stored record a provenance line shows (a version,
a kernel, a CPU, a file name...); a longer one is cut with an ellipsis. A record is someone else's
text: a 5 MB version must not make a 5 MB line."""


def _text(v: Any, limit: int = TEXT_MAX) -> str | None:
    """A stored record's value as provenance shows it: text or a number, cut to `limit` characters
    (`…` marks the cut); None (shown as nothing) for an empty value or any other type (an object, a
    list, a bool: not what the field holds)."""
    if isinstance(v, bool) or not isinstance(v, str | int | float) or v == "":
        return None
    s = v if isinstance(v, str) else repr(v)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _dict(v: Any) -> dict[str, Any]:
    """`v` where a stored record holds an object there, else {} (a string or list read as nothing)."""
    return v if isinstance(v, dict) else {}


def sha_words(r: BenchRecord) -> str:
    """A record's model sha256 as a report names it: `sha256 0123456789ab`, or `sha256 not recorded`."""
    sha = r.model.sha256 or ""
    return f"sha256 {sha[:12]}" if len(sha) == 64 else "sha256 not recorded"


def size_words(size: int | None) -> str:
    """A model's size in bytes (roofline.model_bytes: llama-bench's model_size, its tensors, else the
    file `toolkit bench` measured) as a report names it: `17.28 GiB`, `1.54 MiB`, or `size not
    recorded` (None: a stored 0 or -5, none in the row): what a tok/s is of, and what a reader checks a
    GPU's memory against."""
    if size is None:
        return "size not recorded"
    for unit, b in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= b:
            return f"{size / b:.2f} {unit}"
    return counted(size, "byte")


def _type_words(r: BenchRecord) -> str:
    """`, qwen3moe 30B.A3B Q4_K - Medium`: llama-bench's model_type of a record's row (architecture,
    parameters and quantization), '' where the row names none (vLLM, SGLang)."""
    t = _text(type_words((r.raw or {}).get("model_type")))
    return f", {t}" if t else ""


def _count(v: Any) -> int | None:
    """A stored count (threads, bytes) as an int when it is a whole number above 0 and below 2^60 (a
    host's memory in bytes fits); None for any other type or value (a stranger's record)."""
    return v if type(v) is int and 0 < v < 2**60 else None


def _host_line(
    h: dict[str, Any], gpus: Iterable[str], cpus: Iterable[str] = (), given: Iterable[str] = ()
) -> str:
    """One host's line from its stored facts `h` (any field of any type: see _text), the GPU
    descriptions its records name, where `h` names no CPU the CPU its benchmark rows name
    (llama-bench's cpu_info: an imported row carries no host facts), and `given`: what containers
    were given (_given_words of each distinct device profile). What a reader needs and the records do
    not say is said "not recorded"."""
    cpu = _text(h.get("cpu_model")) or ", ".join(sorted({t for c in cpus if (t := _text(c))}))
    parts = [t for t in (_text(h.get("os")), cpu) if t]
    cores, threads, mem = (_count(h.get(k)) for k in ("cpu_cores", "cpu_threads", "memory_bytes"))
    if threads:  # what a tok/s on the CPU, and the host's share of a GPU run, depend on
        parts.append(
            f"{cores} cores, {threads} threads" if cores and cores != threads else f"{threads} threads"
        )
    if mem:
        parts.append(f"{mem / 2**30:.1f} GiB RAM")
    for what, value in (("kernel", h.get("kernel")), ("amdgpu", h.get("amdgpu_module"))):
        if t := _text(value):
            parts.append(f"{what} {t}")
    sets = sorted({t for g in gpus if (t := _text(_gpu_set(str(g)[: 64 * TEXT_MAX]), 2 * TEXT_MAX))})
    # runs on different sets, ` / ` between them; a set of several cards in brackets where there are
    # several sets (`X / X + Y` read either way: `X / (X + Y)`)
    gpu = " / ".join(f"({t})" if len(sets) > 1 and " + " in t else t for t in sets)
    if gpu:
        parts.append(f"GPU {gpu}")
    if given := sorted(set(given)):  # runs given different GPUs: ` / ` between them, as GPU sets
        parts.append(" / ".join(given))
    docker = _dict(h.get("docker"))
    if engine := _text(docker.get("server_version")):  # which engine, where recorded (doctor's words)
        name = {"podman": "Podman", "docker": "Docker"}.get(str(docker.get("engine")), "engine")
        parts.append(f"{name} {engine}")
    missing = [w for w, k in (("OS", "os"), ("kernel", "kernel")) if not _text(h.get(k))]
    missing += ["GPU driver"] if gpu and "amdgpu_module" not in h else []  # the card's kernel driver
    if parts and missing:
        parts.append(f"{', '.join(missing[:-1])} and {missing[-1]}" if len(missing) > 1 else missing[0])
        parts[-1] += " not recorded"
    return "; ".join(parts) or "not recorded"


RPC_WORDS = (
    " + an RPC server's devices (not named) if --rpc was given (a build with RPC: its rows do not say)"
)
"""After the local GPU of a record whose build has RPC (flagged rpc-split: facts.rpc_split), whose model
may have been split over RPC: llama-bench's gpu_info names the local devices only."""


def _given_words(prof: Any) -> str | None:
    """`container given 2 GPUs: renderD128, renderD129 (hidden: 2 gfx1036 (renderD130, iGPU) (iGPU:
    ...))` from a record's device profile (DeviceProfile.record(), bench keeps it in host facts): how
    many GPUs the run had and every host GPU it did not, as `toolkit bench` named them; None without
    one (an import: its rows' gpu_info says what llama-bench saw)."""
    prof = _dict(prof)
    gpus = prof.get("gpus")
    if not prof or not isinstance(gpus, list):
        return None
    nodes = [_text(_dict(g).get("render_node")) or "?" for g in gpus]
    n = _count(prof.get("gpu_count")) or len(nodes)
    said = f"container given {counted(n, 'GPU')}" if n else "container given no GPU"
    said += f": {', '.join(x.rsplit('/', 1)[-1] for x in nodes)}" if nodes else ""
    hidden = [t for x in prof.get("hidden") or [] if (t := _text(x, 2 * TEXT_MAX))]
    return said + (f" (hidden: {'; '.join(hidden)})" if hidden else "")


def _gpu_set(gpu_info: str) -> str:
    """A row's GPUs as a reader counts them: llama-bench's gpu_info joins one description a device with
    ", " (`X, X` for two of one card), so a run on one card and a run on two read "X, X, X" side by side;
    here `2x X`, and different cards `X + Y`."""
    names, depth, start = [], 0, 0
    # a ", " inside brackets is a description's own (llvmpipe (LLVM 19, 256 bits))
    for i, ch in enumerate(gpu_info):
        depth += (ch in "([") - (ch in ")]")
        if depth == 0 and gpu_info.startswith(", ", i):
            names.append(gpu_info[start:i].strip())
            start = i + 2
    names = [n for n in (*names, gpu_info[start:].strip()) if n]
    runs = [(name, len(list(same))) for name, same in itertools.groupby(names)]
    return " + ".join(name if n == 1 else f"{n}x {name}" for name, n in runs) or gpu_info


def _image_line(same: list[Facts]) -> str:
    """One image's line: its digest, backend, runtime commit and labels as every record of it says them
    (a value the records disagree on is said with each of its values: `runtime commits aaaa1111 (1
    record), bbbb2222 (1 record): mixed in one column`, never the first record's alone), and its
    measuring toolkit."""
    records = [f.record for f in same]
    words = _image_words(records)
    image = _text(same[0].image, 2 * TEXT_MAX) or "unnamed image"
    digest = _said("digest", [w[0] for w in words]) or "digest not recorded"
    backend = _said("backend", [w[1] for w in words]) or "backend not recorded"
    return ", ".join([f"{image}: {digest}", backend, *build_words(records, words)])


_BUILT_FROM = {
    "template hash": ("org.toolkit.template-hash", 12),
    "base image": ("org.toolkit.base-image", None),
}
"""The labels a build gives its image (images/build.py, the templates' LABEL) that say what it was built
from, and how many characters of each are said (a hash as a commit: 12)."""


def built_from(records: list[BenchRecord]) -> str | None:
    """`template hash 4fae2c6a9b36, base image debian:trixie-slim, source pypi:llama-cpp-python==0.3.36`:
    what one image's `records` say it was built from (its labels; the runtime source's origin bench
    copied from its build record, e.g. a fallback from GitHub to PyPI's sdist: images/sources.py),
    `... not recorded` where they lack one (recorded before it was kept); no source where its build had
    none (a prebuilt image). None for an imported image (no build)."""
    if all(imported(r.image.digest) for r in records):
        return None
    words = [
        _said(
            what,
            [t[:n] if (t := _text((r.image.labels or {}).get(key), 2 * TEXT_MAX)) else None for r in records],
        )
        or f"{what} not recorded"
        for what, (key, n) in _BUILT_FROM.items()
    ]
    origins = [(r.image.model_extra or {}).get("source_origin", "") for r in records]  # "": not recorded
    if any(o is not None for o in origins):  # None: its build had no source
        words.append(_said("source", [_text(o, 2 * TEXT_MAX) for o in origins]) or "source not recorded")
    return ", ".join(words)


def build_words(records: list[BenchRecord], words: list[tuple[str | None, ...]] | None = None) -> list[str]:
    """What one image's `records` say of its build, as the report's image line says it: runtime commit,
    ROCm / Mesa / vLLM version and Vulkan matrix cores from its labels (`ROCm version not recorded` for
    a ROCm image whose records lack it, `Mesa version not recorded` for a Vulkan one), its toolkit;
    `words`: _image_words(records) where made already."""
    words = _image_words(records) if words is None else words
    parts = []
    for i, what in enumerate(_LABELS, 2):
        values = [w[i] for w in words]
        if what == "toolkit":
            parts += [t] if (t := _toolkit_words(_text(values[0]), records)) else []
        elif what == "runtime commit":
            parts.append(runtime_commit(records, values))
        elif said := _said(what, [_text(v) for v in values]):
            parts.append(said)
        elif _RUNTIME_OF.get(what) in {w[1] for w in words}:  # a GPU stack the figures depend on
            parts.append(f"{what} version not recorded")
    return parts


def system_cells(r: BenchRecord) -> list[str]:
    """What a csv line says of the system a number is of (render_csv's SYSTEM_FIELDS): backend, the
    GPU stack its image's labels name (`ROCm 7.1.1`, `Mesa 25.2.6`, `vLLM 0.16.0`, "; " between), the
    container engine (`docker 28.1.1`), kernel and amdgpu driver; "" where the record says none."""
    labels = r.image.labels or {}
    stack = [
        f"{what} {v}"
        for what in ("ROCm", "Mesa", "vLLM")
        if (v := next((_text(labels[k]) for k in _LABELS[what] if labels.get(k)), None))
    ]
    h = r.host or {}
    docker = _dict(h.get("docker"))
    engine = _text(docker.get("server_version"))
    return [
        _text(r.image.backend) or "",
        "; ".join(stack),
        f"{_text(docker.get('engine')) or 'docker'} {engine}" if engine else "",
        _text(h.get("kernel")) or "",
        _text(h.get("amdgpu_module")) or "",
    ]


def runtime_commit(records: list[BenchRecord], labelled: list[str | None] | None = None) -> str:
    """`runtime commit <12 hex>` of one image's `records` (llama.cpp's or vLLM's build: the image's
    label, else the record's build_commit), each value with its count where they differ, or `runtime
    commit not recorded`; `labelled`: their label values where _image_words gave them already."""
    if labelled is None:
        labelled = [w[2] for w in _image_words(records)]
    commits = [v or r.build_commit for v, r in zip(labelled, records, strict=True)]
    said = _said("runtime commit", [t[:12] if (t := _text(c, 13)) else None for c in commits])
    return said or "runtime commit not recorded"


def _image_words(records: list[BenchRecord]) -> list[tuple[str | None, ...]]:
    """Per record: its image's digest and backend as _image_line says them (_text), then its value of
    each of _LABELS (the first of its label keys set, as text; None); worked out once per distinct image
    object (the records of one run share theirs: index.load), not once per record."""
    seen: dict[int, tuple[str | None, ...]] = {}
    out = []
    for r in records:
        im = r.image
        words = seen.get(id(im))  # the records hold their images: an id is not reused meanwhile
        if words is None:
            labels = im.labels or {}
            words = seen[id(im)] = (
                _text(im.digest, 2 * TEXT_MAX),
                _text(im.backend),
                *(next((str(labels[k]) for k in keys if labels.get(k)), None) for keys in _LABELS.values()),
            )
        out.append(words)
    return out


def _said(what: str, values: list[str | None]) -> str | None:
    """`what value` where every record of an image that says one says the same, else each value with its
    count of records and `mixed in one column` (records of several builds under one image's digest:
    imports under one --digest, a hand edit); None where none says one."""
    counts: dict[str, int] = {}
    for v in values:
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    if len(counts) <= 1:
        return f"{what} {next(iter(counts))}" if counts else None
    each = ", ".join(f"{v} ({counted(n, 'record')})" for v, n in counts.items())
    return f"{what}s {each}: mixed in one column"


def _toolkit_words(built: str | None, records: list[BenchRecord]) -> str | None:
    """The toolkit of an image's numbers: `toolkit 0.1.0 (commit 0123456789ab)`, the version that built
    the image (its label, `built`) with the commit(s) of the toolkit that measured it (host.toolkit,
    recorded by bench: host.info.toolkit_source); `toolkit 0.1.0, measured by toolkit 0.2.0 (commit
    ...)` where the measuring version differs; `(commit not recorded)` where no record names one (a
    version alone does not say which code between releases). None when neither is recorded."""
    ran = [t for r in records if isinstance(t := (r.host or {}).get("toolkit"), dict)]
    versions = sorted({v for t in ran if (v := _text(t.get("version")))})
    commits = sorted({c for t in ran if (c := commit_words(t))})
    said = (
        f" (commit{'s' if len(commits) > 1 else ''} {', '.join(commits)})"
        if commits
        else " (commit not recorded)"
    )
    if built and set(versions) <= {built}:
        return f"toolkit {built}{said}"
    if not versions and not commits:
        return None
    measured = f"measured by toolkit {'/'.join(versions) or 'of unknown version'}{said}"
    return f"toolkit {built}, {measured}" if built else measured


def canary_text(c: Any, controls: Mapping[tuple[str, str, str, str], float] | None = None) -> str | None:
    """The correctness canary a record carries (`canary`: toolkit.bench.canary.CanaryResult.record), as the
    report says it: `PPL 535.877 (cpu control 535.877, within 0.0048 %)`, `PPL 535.877 (the CPU control)`,
    `PPL 535.9 (no CPU control: only checked to be finite)`, `wrong output: <reason>` or `unchecked: <reason>`
    (a stored result that contradicts itself, canary_check.canary_problem, or whose control in `controls` says
    another PPL, control_problem: never a pass); None when there is none or it is not an object."""
    if not isinstance(c, dict):
        return None
    status, reason = str(c.get("status") or ""), _text(c.get("reason"), 4 * TEXT_MAX) or "no reason recorded"
    if why := canary_problem(c) or control_problem(c, controls or {}):
        status, reason = "unchecked", f"the stored result contradicts itself: {why}"
    if status == "unchecked":
        return f"unchecked: {reason}"
    if status == "wrong-output":
        return f"wrong output: {reason}"
    ppl = float_or_none(c.get("ppl"))
    head = f"PPL {ppl:.6g}" if ppl is not None else "no PPL"
    control = c.get("control") if isinstance(c.get("control"), dict) else None
    if control is None:
        return f"{head} (no CPU control: only checked to be finite)"
    if control.get("digest") and (control.get("image"), control.get("digest")) == (
        c.get("image"),
        c.get("digest"),
    ):
        return f"{head} (the CPU control)"
    cppl, ln = float_or_none(control.get("ppl")), float_or_none(c.get("ln_ratio"))
    within = f", within {abs(math.expm1(ln)) * 100:.2g} %" if ln is not None and abs(ln) < 700 else ""
    return f"{head} (cpu control {cppl:.6g}{within})" if cppl is not None else f"{head} (cpu control)"


_WORST = ("wrong output", "unchecked")
"""How canary texts sort when an image's results disagree: a failure first, then what was not checked."""


def _canaries(records: list[BenchRecord], controls: Mapping[tuple[str, str, str, str], float]) -> str:
    """`; canary ...` of an image's records, per model where they measured several; '' when none has one.
    Results that disagree (a pass and a failure, runs of the image on one model) are all said, worst
    first: `canary results disagree (2 results): wrong output: ... | PPL ...`, never only the first."""
    said: dict[str, list[str]] = {}
    for r in records:
        text = canary_text((r.model_extra or {}).get("canary"), controls)
        if text is not None and text not in (seen := said.setdefault(r.model.name, [])):
            seen.append(text)
    texts = {
        m: t[0]
        if len(t) == 1
        else f"results disagree ({len(t)} results): " + " | ".join(sorted(t, key=_rank))
        for m, t in said.items()
        if t
    }
    if len(texts) == 1:
        return f"; canary {next(iter(texts.values()))}"
    return "".join(f"; canary on {m}: {t}" for m, t in sorted(texts.items()))


def canary_words(records: list[BenchRecord]) -> str:
    """`; canary <result>` of one image's `records` as the report's image line says it (_canaries, their
    own CPU controls checked), '' when none carries a canary: for a page without the report's front."""
    controls = own_controls([(r.model_extra or {}).get("canary") for r in records])
    return _canaries(records, controls)


def _rank(text: str) -> int:
    """0 for a failure, 1 for unchecked, 2 for a pass (_WORST)."""
    return next((i for i, w in enumerate(_WORST) if text.startswith(w)), len(_WORST))


def _model_lines(fs: list[Facts]) -> list[str]:
    """Provenance's models: `name (file, sha256 12, size, llama-bench's model_type)`, one per model,
    sorted."""
    models: dict[tuple, str] = {}
    # a failed row (an interrupted run's) has no llama-bench row, so no model type: a model its measured
    # records name by sha256 is said by them, not a second time without its type
    measured = {(f.record.model.name, f.record.model.sha256) for f in fs if f.record.status == "ok"}
    for f in fs:  # one line per model: a file name without a sha256 names no one file (two imports'
        # `model.gguf`, F16 and Q8_0), so its size and type tell them apart (its key's model fingerprint)
        r = f.record
        if r.status != "ok" and r.model.sha256 and (r.model.name, r.model.sha256) in measured:
            continue
        which = (r.model.name, r.model.sha256, f.key.model, f.model_bytes)
        if which in models:  # its words said by the first record of that model
            continue
        file = _text((r.model.path or "").rsplit("/", 1)[-1], 2 * TEXT_MAX)
        name = _text(r.model.name, 2 * TEXT_MAX) or "unnamed model"
        tiny = f"; a stand-in under {size_words(SMOKE_MODEL_BYTES)}, not a real model" if f.stand_in else ""
        models[which] = (
            f"{name} ({file or 'file not recorded'}, {sha_words(r)}, {size_words(f.model_bytes)}{_type_words(r)}{tiny})"
        )
    return sorted(set(models.values()))


Memo = dict[Any, tuple[list[Facts], str]]
"""What provenance worked out of one report's records, for its other calls on the same records (the
whole report's provenance, then each column card's: column_cards): an image's line (_image_line_of)
-> (its Facts, held so that no id is reused while the memo lives; the line). (Each record's times are
its Facts': measured_times, worked out once per report.)"""


def _image_line_of(same: list[Facts], memo: Memo) -> str:
    """_image_line(same), from `memo` where worked out for these Facts: the whole report's line of an
    image and its column card's hold the same Facts in another order, which changes nothing where they
    share one image object, label and build commit (their words alike; the toolkit's are sorted): such
    a group is kept under its smallest Facts id and found again by the same set; any other under the
    ids of its Facts in order."""
    first = same[0]
    im, commit = first.record.image, first.record.build_commit
    alike = all(
        f.image == first.image and f.record.image is im and f.record.build_commit == commit for f in same
    )
    key: Any = min(map(id, same)) if alike else tuple(map(id, same))
    hit = memo.get(key)
    if hit is not None and (not alike or {id(f) for f in hit[0]} == {id(f) for f in same}):
        return hit[1]
    line = _image_line(same)
    memo[key] = (same, line)
    return line


def provenance(
    items: Iterable[BenchRecord | Facts], stored: Iterable[Any] = (), memo: Memo | None = None
) -> Provenance:
    """The provenance of the records a report shows, or their Facts (failed ones count for dates and
    builds too). `stored`: canary results stored beside them (stored_canaries), whose CPU controls a
    shown canary is compared with as with a shown record's (canary_check.control_problem). `memo`:
    what an earlier call of this report worked out of the same records (Memo; filled here)."""
    fs = facts_of(items)
    records = [f.record for f in fs]
    memo = {} if memo is None else memo
    p = Provenance()
    p.models = _model_lines(fs)
    spans = [s for f in fs if (s := f.span)]  # texts of one form: min and max, not a sort
    p.dates = (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None
    local = [at for f in fs if (at := f.local_date) for _ in f.undated]
    p.local = (len(local), min(local), max(local)) if local else None
    undated = [t for f in fs if not f.local_date for t in f.undated]
    p.undated = (len(undated), min(undated), max(undated)) if undated else None
    p.runs = sorted({t for run in {r.run_id for r in records} if (t := _text(run))})
    hosts: dict[str, tuple[dict[str, Any], set[str], set[str], set[str]]] = {}
    host_keys: dict[int, str] = {}  # by the host object (one run's records share theirs: index.load)
    for f in fs:
        r, h = f.record, f.record.host or {}
        key = host_keys.get(id(h)) if h else None  # records hold their hosts: no id reused meanwhile
        if key is None:
            key = str(h.get("key") or h.get("hostname") or (h.get("os"), h.get("kernel")))
            if h:
                host_keys[id(h)] = key
        entry = hosts.setdefault(key, (h, set(), set(), set()))
        if given := _given_words(h.get("device_profile") or (r.model_extra or {}).get("device_profile")):
            entry[3].add(given)
        if r.gpu_info:  # a split run's other devices said: its figure is not the local GPU's alone
            entry[1].add(str(r.gpu_info) + (RPC_WORDS if RPC_FLAG in f.flags else ""))
        if isinstance(cpu := (r.raw or {}).get("cpu_info"), str):
            entry[2].add(cpu)
    p.hosts = [_host_line(h, gpus, cpus, given) for h, gpus, cpus, given in hosts.values()]
    per_image: dict[str, list[Facts]] = {}
    for f in fs:
        per_image.setdefault(f.image, []).append(f)
    controls = own_controls([*((r.model_extra or {}).get("canary") for r in records), *stored])
    p.images = [
        _image_line_of(same, memo) + _canaries([f.record for f in same], controls)
        for _, same in sorted(per_image.items())
    ]
    p.builds = [
        f"{_text(same[0].image, 2 * TEXT_MAX) or 'unnamed image'}: {b}"
        for _, same in sorted(per_image.items())
        if (b := built_from([f.record for f in same]))
    ]
    return p


def folded_count(folds: Iterable[Sequence[Facts]]) -> tuple[int, int]:
    """(records, rows) of the decode rows folded over the micro-batch in one column (tables.Row.folded
    of each folded row: the Facts of every record its cell stands for): how many records (a cell
    combining N processes counts N) were folded into how many rows; (0, 0) where none was."""
    done = [fs for fs in folds if len(fs) > 1]
    return sum(f.processes for fs in done for f in fs), len(done)


def numbers_words(
    records: int, results: int, folded: tuple[int, int] = (0, 0), runs: Sequence[str] | None = None
) -> str:
    """How many stored records a column's (a report's column card) or a compared side's numbers come
    from, one wording for both: `numbers from 10 records (2 decode records folded into 1 row; 1 run:
    <id>)`; `records` counts every process (a cell combining N counts N), `results` the cells they make
    before any fold (`8 records combined into 4 results` where they differ), `folded` folded_count's
    (records, rows), `runs` the run ids (None: not said; more than 3: only counted)."""
    combined = f" combined into {counted(results, 'result')}" if results != records else ""
    said = []
    if folded[1]:
        said.append(f"{counted(folded[0], 'decode record')} folded into {counted(folded[1], 'row')}")
    if runs is not None:
        said.append(counted(len(runs), "run") + (f": {', '.join(runs)}" if len(runs) <= 3 else ""))
    return f"numbers from {counted(records, 'record')}{combined}" + (f" ({'; '.join(said)})" if said else "")


@dataclass(frozen=True)
class ColumnCard:
    """What one column of a report's tables is, to paste beside it: `column` (its label in the tables:
    `name@digest12`, a system added where one digest ran on several), `label` (its short header:
    table_text.short_labels), `prov` the provenance of its records alone (image: digest, backend,
    runtime commit, ROCm/Mesa version as its labels say, canary; model; host; when measured; runs),
    `records` how many stored records its numbers come from (a cell combining N processes: N) and
    `results` how many table cells they make."""

    column: str
    label: str
    prov: Provenance
    records: int
    results: int
    image: str = ""
    """Its image's label (facts.image_label), which each line of prov.images opens with."""
    folded: tuple[int, int] = (0, 0)
    """(records, rows): its decode records folded over the micro-batch into fewer rows (folded_count)."""

    def numbers(self) -> str:
        """`numbers from 8 records (1 run: <id>)`, `8 records combined into 4 results` where cells combine
        several processes, `(2 decode records folded into 1 row; 1 run: <id>)`: numbers_words."""
        return numbers_words(self.records, self.results, self.folded, self.prov.runs)

    def lines(self, alone: bool = False) -> list[str]:
        """Its description as `key: value` lines: image, model, host, when measured, how many records;
        `alone` (the report's one column: What was measured says the rest) the count line only."""
        if alone:
            return [f"{self.numbers()}; its image, model, host and dates: What was measured, above"]
        p = self.prov
        out = [f"image: {i.removeprefix(self.image + ': ')}" for i in p.images] + [
            f"model: {m}" for m in p.models
        ]
        out += [f"host: {h}" for h in p.hosts] + [x for x in p.lines() if x.startswith("measured: ")]
        return out + [self.numbers()]

    def to_json(self) -> dict[str, Any]:
        """{column, label, records, results, and Provenance.to_json's fields of its records}."""
        head = {"column": self.column, "label": self.label, "records": self.records, "results": self.results}
        return {**head, **self.prov.to_json()}


def column_cards(
    tables: Iterable[Table],
    labels: Mapping[str, str],
    stored: Iterable[Any] = (),
    memo: Memo | None = None,
    folded: Iterable[Table] = (),
) -> list[ColumnCard]:
    """A ColumnCard per column of `tables`, in order of its short label (`labels` {column: short
    label}: table_text.short_labels), from the Facts of its cells in every table (decode rows unfolded:
    every record a number comes from; `folded`: the same tables as shown, decode rows folded over the
    micro-batch (report.Shown.display), whose folds are said beside the count); `stored` and `memo` as
    for provenance (one memo for every card)."""
    memo = {} if memo is None else memo
    per: dict[str, list[Facts]] = {}
    folds: dict[str, list[list[Facts]]] = {}
    for t in tables:
        for row in t.rows:
            for c, f in row.facts.items():
                per.setdefault(c, []).append(f)
    for t in folded:
        for row in t.rows:
            for c, fs in row.folded.items():
                folds.setdefault(c, []).append(fs)
    stored = list(stored)
    cards = [
        ColumnCard(
            c,
            labels.get(c, c),
            provenance(fs, stored, memo),
            sum(f.processes for f in fs),
            len(fs),
            fs[0].image,
            folded_count(folds.get(c, [])),
        )
        for c, fs in per.items()
    ]
    return sorted(cards, key=lambda k: (k.label, k.column))
