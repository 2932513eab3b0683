"""The one test identity: what makes two records measure the same thing.

Every reader of results (report, plots, verdict, compare, reproduce, `bench --resume`, import) asks
this module, and nothing else, whether two records are "the same test". A record's identity has four
parts:

- **image**: the image digest it ran in (for imports, the digest the import filed it under);
- **system**: what llama-bench says it ran on — `build_commit`, `build_number`, `backends`,
  `gpu_info`, `cpu_info` (SYSTEM_FIELDS);
- **model**: the model file — llama-bench's fingerprint (`model_type`, `model_n_params`,
  `model_size`) plus the file's sha256 when it is known (imports may not know it);
- **test**: every other field of the raw llama-bench record except the measurement fields
  (MEASUREMENT_FIELDS: times, samples, test_time), normalised where values mean the same thing
  (flash attention `1`/`true`/`on`; "all layers" `-1`/`99`/`999`; booleans as 0/1), plus the
  record's `method` and, for runners other than llama-bench, their engine settings (vLLM's pinned
  settings, input/output lengths, concurrency), and the runtime environment axis (`bench.env` in
  matrix.yaml: `env.NAME` = the value the record ran with). A field llama-bench adds in a later
  release (for example `n_cpu_moe`, `fit_target`) is part of the identity automatically.

Tables pivot on it: a column is (image, system), a row is (model, test). Fields that take several
values inside a result set become columns of the tables. Sources of the field list: llama.cpp
tools/llama-bench/llama-bench.cpp `test::get_fields()` at the pinned commit 0c1e57098 and the real
outputs in tests/data/ (shared/reference/llama-bench.md).
"""

from __future__ import annotations

import contextlib
import math
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import chain
from operator import itemgetter
from typing import Any

from toolkit.core import stats
from toolkit.core.text import counted
from toolkit.core.types import is_sha256
from toolkit.results.flag_claims import held_claims, without_unsupported
from toolkit.results.records import BenchRecord
from toolkit.results.telemetry_flags import checked_flags
from toolkit.runtimes.llama_bench.check import parse_test_time, quantity

# llama-bench fields that are measurements, not part of what was asked.
MEASUREMENT_FIELDS = frozenset(
    {"avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts", "test_time"}
)
# llama-bench fields that say what the test ran on: they split columns, never rows.
SYSTEM_FIELDS = ("build_commit", "build_number", "backends", "gpu_info", "cpu_info")
# llama-bench fields that describe the model file (the path is where it lay, not what it is).
MODEL_FIELDS = ("model_filename", "model_type", "model_size", "model_n_params")
# Engine entries of non-llama-bench runners that are observations, not settings.
_ENGINE_OBSERVED = re.compile(r".*(notes|_s|_seconds|version|commit)$")
# Fields shown in the row label itself (`pp512 ub512`, `tg128 @ d4096`, `c4 in512 out128`).
LABEL_FIELDS = frozenset(
    {
        "n_prompt",
        "n_gen",
        "n_depth",
        "n_ubatch",
        "method",
        "input_len",
        "output_len",
        "concurrency",
        "reference_output_len",
        "num_prompts",
    }
)
# llama.cpp's conventional "offload every layer" values when the model's layer count is unknown
# (`-ngl 99` in its docs and scripts, `999` in AMD's, `-1` = all since 2026; llama-bench.md).
ALL_LAYERS_MIN = 99

# Linear: the integer part's digits and the fraction's cannot take the same characters (the fraction
# needs its dot); `\d+\.?\d*` backtracked quadratically on a failed fullmatch (a 40 KB type_k took 69 s).
_NUMERIC = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def _plain(v: Any) -> Any:
    """Hashable value, the same whatever format wrote it: bool -> int, `"true"`/`"false"` -> 1/0, a
    number written as text (csv, md and sql write every value as text; json writes some fields as
    strings, e.g. tensor_split `"0.00"`) -> the number, whole floats -> int, lists -> tuples."""
    t = type(v)
    if t is int:  # the common cases first, by exact type (an import computes this for every field)
        return v
    if t is str:
        return _plain_text(v)
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        return _plain_text(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return tuple(_plain(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _plain(x)) for k, x in v.items()))
    return v


_NUMBER_START = frozenset("+-.0123456789")


_TEXT_SEEN: dict[str, Any] = {}
"""_plain_text's answers for short texts (a file repeats the same few: `f16`, `layer`, `auto`, `0x0`)."""


def _plain_text(v: str) -> Any:
    hit = _TEXT_SEEN.get(v, _TEXT_SEEN)
    if hit is not _TEXT_SEEN:
        return hit
    out = _text_value(v)
    if len(v) <= 64 and len(_TEXT_SEEN) < 4096:
        _TEXT_SEEN[v] = out
    return out


def _text_value(v: str) -> Any:
    t = v.strip()
    if not t:
        return t
    if t[0] in _NUMBER_START:  # _NUMERIC matches only text that starts so
        if _NUMERIC.fullmatch(t):
            try:
                return int(t)
            except ValueError:
                f = float(t)
                return int(f) if f.is_integer() and abs(f) < 2**63 else f
        return t
    if t.lower() in ("true", "false"):
        return int(t.lower() == "true")
    return t


def norm_tensor_split(v: Any) -> Any:
    """`0.00`, `0`, 0.0 -> 0 (no split); `0.50/0.50` (or `0.5,0.5`) -> `0.5/0.5`."""
    parts = re.split(r"[/,;]", str(v).strip()) if isinstance(v, str) else [v]
    try:
        xs = [float(x) for x in parts]
    except (TypeError, ValueError):
        return _plain(v)
    if not any(xs):
        return 0
    return "/".join(f"{x:g}" for x in xs)


def norm_field(name: str, v: Any) -> Any:
    """The one normalisation of a llama-bench field's value for the test identity, whatever format
    wrote it: flash attention and GPU-layer spellings, tensor_split, numbers written as text."""
    if name not in _SPECIAL_FIELDS:
        return _plain(v)
    if name == "flash_attn":
        return norm_flash_attn(v)
    if name == "n_gpu_layers":
        return norm_gpu_layers(v)
    return norm_tensor_split(v)


_SPECIAL_FIELDS = frozenset({"flash_attn", "n_gpu_layers", "tensor_split"})


def norm_flash_attn(v: Any) -> Any:
    """1/true/"on" -> 1, 0/false/"off" -> 0, -1/"auto" -> -1 (llama-bench's three spellings)."""
    if isinstance(v, str):
        return {"on": 1, "off": 0, "auto": -1}.get(v.strip().lower(), _plain(v))
    return _plain(v)


def norm_gpu_layers(v: Any, n_layers: int | None = None) -> Any:
    """`all` where every layer is offloaded: -1, or >= the model's layer count (>= 99 when unknown)."""
    try:
        n = int(v)
    except (TypeError, ValueError):
        return v
    if n < 0 or n >= (n_layers if n_layers else ALL_LAYERS_MIN):
        return "all"
    return n


def _n_layers(r: BenchRecord) -> int | None:
    n = (r.model.model_extra or {}).get("n_layers")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def test_fields(r: BenchRecord) -> dict[str, Any]:
    """The normalised test part of a record's identity: {field: value}, measurement-free (a new dict:
    inside keys_cached() it comes from the record's one TestKey)."""
    if _memo is not None:
        return dict(test_key(r).test)
    return _test_fields(r)


def test_field(r: BenchRecord, name: str) -> Any:
    """The normalised value of one test field of a record (test_fields), None when it has none; inside
    keys_cached() found in its TestKey's pairs, sorted by field (no dict copy per call)."""
    if _memo is None:
        return _test_fields(r).get(name)
    pairs = test_key(r).test
    i = bisect_left(pairs, name, key=itemgetter(0))
    return pairs[i][1] if i < len(pairs) and pairs[i][0] == name else None


def _test_fields(r: BenchRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"method": r.method}
    if r.method == "llama-bench" and r.raw:
        for k, v in r.raw.items():
            if k in _NOT_TEST or v is None:
                continue
            # norm_field, with its commonest case (a plain int) inline: an import runs this per field
            out[k] = v if type(v) is int and k not in _SPECIAL_FIELDS else norm_field(k, v)
    else:
        out.update(
            n_prompt=r.n_prompt,
            n_gen=r.n_gen,
            n_depth=r.n_depth,
            n_batch=r.n_batch,
            n_ubatch=r.n_ubatch,
            flash_attn=r.flash_attn,
            n_gpu_layers=r.n_gpu_layers,
        )
        for k, v in (r.engine or {}).items():
            if not _ENGINE_OBSERVED.fullmatch(k):
                out[k] = _plain(v)
    # the runtime environment axis (`bench.env`): each variable is a test field of its own
    for name, val in sorted((r.env or {}).items()):
        out[f"env.{name}"] = "unset" if val is None else str(val)
    # the canonical fields win over raw spellings (csv strings, old vintages)
    out.update(n_prompt=r.n_prompt, n_gen=r.n_gen, n_depth=r.n_depth)
    for k in ("n_batch", "n_ubatch"):
        if getattr(r, k) is not None or k in out:
            out[k] = getattr(r, k)
    if "flash_attn" in out or r.flash_attn is not None:
        out["flash_attn"] = norm_flash_attn(
            r.flash_attn if r.flash_attn is not None else out.get("flash_attn")
        )
    if "n_gpu_layers" in out or r.n_gpu_layers is not None:
        ngl = r.n_gpu_layers if r.n_gpu_layers is not None else out.get("n_gpu_layers")
        out["n_gpu_layers"] = norm_gpu_layers(ngl, _n_layers(r))
    return {k: v for k, v in out.items() if v is not None}


_NOT_TEST = MEASUREMENT_FIELDS | frozenset(SYSTEM_FIELDS) | frozenset(MODEL_FIELDS)


def system_fields(r: BenchRecord) -> dict[str, Any]:
    """What the record ran on: llama-bench's SYSTEM_FIELDS (empty for runners that do not say), and
    the host key of a multi-host campaign (`host.key`: Slurm node name or an alias), so the same
    image digest measured on two hosts is two columns, never one."""
    src = r.raw if r.method == "llama-bench" else {}
    out = {
        k: src[k].strip() if isinstance(src[k], str) else str(_plain(src[k]))
        for k in SYSTEM_FIELDS
        if src.get(k) not in (None, "")
    }
    if r.backends and "backends" not in out:
        out["backends"] = r.backends
    if r.gpu_info and "gpu_info" not in out:
        out["gpu_info"] = r.gpu_info
    if (r.host or {}).get("key"):
        out["host"] = str(r.host["key"])
    return out


def _as_printed(key: str, v: Any) -> Any:
    """A model's size or parameter count as llama-bench's -o md prints it (markdown_printer: `%.2f
    GiB` from 1 GiB, else `%.2f MiB`; `%.2f B` from 1e9 parameters, else `%.2f M`), from a number or
    that text, so a table and a JSON row of one model describe it alike; other values as they are."""
    n = quantity(v)
    if n is None:
        return _plain(v)
    if key == "model_size":
        return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.2f} MiB"
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.2f} M"


def model_fingerprint(r: BenchRecord) -> tuple:
    """llama-bench's description of the model (type, and parameters and bytes as its -o md prints them:
    _as_printed), else the model's name; plus the model's kind when it is not the real file (`synthetic-twin`:
    a twin describes itself exactly like the real model), and the file's name where one import's rows named
    another file described alike (import_keys.AlikeFiles). Where both records know the file's sha256, it
    decides (same_model)."""
    if _memo is not None:
        return test_key(r).model
    return _model_fingerprint(r)


def type_words(model_type: object) -> str:
    """llama-bench's model_type as words that name a model (`qwen3moe 30B.A3B Q4_K - Medium`), without
    the `?B` llama.cpp prints for a size it does not know, which names nothing (nc50b S6)."""
    return " ".join(w for w in str(model_type or "").split() if not w.startswith("?"))


def _model_fingerprint(r: BenchRecord) -> tuple:
    fp = (
        (
            _plain(r.raw.get("model_type")),
            *(_as_printed(k, r.raw.get(k)) for k in ("model_n_params", "model_size")),
        )
        if r.raw
        else ()
    )
    fp = fp if any(fp) else ("name", r.model.name)
    extra = r.model.model_extra or {}
    fp = (*fp, ("kind", extra["kind"])) if extra.get("kind") else fp
    return (*fp, ("file", extra["file_apart"])) if extra.get("file_apart") else fp  # import_keys.AlikeFiles


def known_sha(r: BenchRecord) -> str | None:
    """The model file's sha256 when it is known (64 hex digits), else None (imports); inside
    keys_cached() its TestKey's `model_sha`."""
    if _memo is not None:
        return test_key(r).model_sha
    return _known_sha(r)


def _known_sha(r: BenchRecord) -> str | None:
    return r.model.sha256 if is_sha256(r.model.sha256) else None


@dataclass(frozen=True)
class TestKey:
    """The identity of one test. Two records with equal keys measured the same thing on the same system.

    `image` = image digest; `system`, `test` = sorted (field, value) pairs; `model` = fingerprint;
    `model_sha` = sha256 or None. `row` (model + test) is what a table row and a compare join use.
    """

    image: str
    system: tuple[tuple[str, Any], ...]
    model: tuple
    model_sha: str | None
    test: tuple[tuple[str, Any], ...]

    def __hash__(self) -> int:  # of ~40 nested pairs: computed once per key, not per dict lookup
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.image, self.system, self.model, self.model_sha, self.test))
            object.__setattr__(self, "_hash", h)
        return h

    @property
    def column(self) -> tuple:
        return (self.image, self.system)

    @property
    def row(self) -> tuple:
        return (self.model, self.model_sha, self.test)

    def fields(self) -> dict[str, Any]:
        return dict(self.test)


_memo: dict[int, tuple[BenchRecord, TestKey]] | None = None
"""Inside keys_cached(): record id -> (the record, its TestKey); None outside."""


@contextlib.contextmanager
def keys_cached() -> Iterator[None]:
    """Within it, each record's TestKey (and so its test fields and model fingerprint) is computed once:
    for readers that never change a record while they look at it (a report computed each identity ~10
    times: 100,000 test_key calls for 10,000 records shown). Nests; the memo ends with the outer one."""
    global _memo
    outer = _memo
    _memo = {} if outer is None else outer
    try:
        yield
    finally:
        _memo = outer


@contextlib.contextmanager
def keys_uncached() -> Iterator[None]:
    """Within it, keys_cached()'s memo is neither read nor filled: for a reader that sees each record
    once and drops it (the index reading a whole folder: a memo would keep every record alive)."""
    global _memo
    outer, _memo = _memo, None
    try:
        yield
    finally:
        _memo = outer


def test_key(r: BenchRecord) -> TestKey:
    """The TestKey of a record (see the module docstring)."""
    memo = _memo
    if memo is not None:
        hit = memo.get(id(r))
        if hit is not None and hit[0] is r:
            return hit[1]
    key = TestKey(
        image=r.image.digest,
        system=shared_pairs(sorted(system_fields(r).items())),
        model=_model_fingerprint(r),
        model_sha=_known_sha(r),
        test=shared_pairs(sorted(_test_fields(r).items())),  # keys are unique: sorted by key alone
    )
    if memo is not None:
        memo[id(r)] = (r, key)  # the record kept alive with it: its id is not reused meanwhile
    return key


def caching_keys() -> bool:
    """Whether this runs inside keys_cached()."""
    return _memo is not None


def known_key(r: BenchRecord, key: TestKey) -> None:
    """Inside keys_cached(): `key` is the TestKey of `r`, known without computing it (the query index
    keeps each record's: index.load), so test_key(r) gives it. Nothing outside keys_cached()."""
    if _memo is not None:
        _memo[id(r)] = (r, key)


def shared_pairs(pairs: Iterable[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    """`pairs` as a tuple of (field, value) pairs where each pair with a text or int value is one object
    shared by every key that holds an equal pair (records of one set repeat most of their fields' values).
    Other values (a float: 0.0 and -0.0 are equal) are kept as they are. Up to _PAIRS_MAX pairs are
    remembered."""
    seen = _PAIRS
    if len(seen) >= _PAIRS_MAX:
        return tuple(pairs)
    return tuple([seen.setdefault(p, p) if type(p[1]) in _SHARED else p for p in pairs])


_PAIRS: dict[tuple[str, Any], tuple[str, Any]] = {}
"""shared_pairs' pairs (each its own key)."""
_PAIRS_MAX = 1 << 16
_SHARED = (str, int)


def distinguishing(records: Iterable[BenchRecord]) -> dict[str, set]:
    """Test fields that tell records of a set apart: {field: the values seen}. A field absent from some
    records (an older llama-bench) that takes one value where present is left out; one that takes several
    values is kept, `None` standing for "not recorded"."""
    recs = list(records)
    pairs = Counter(  # {(field, value): records}, counted in C: this ran per field of every record
        chain.from_iterable(
            test_key(r).test if _memo is not None else _test_fields(r).items()
            for r in recs  # no dict copy
        )
    )
    seen: dict[str, set] = {}
    present: dict[str, int] = {}
    for (k, v), n in pairs.items():  # in first-seen order: each set keeps the value seen first
        seen.setdefault(k, set()).add(v)
        present[k] = present.get(k, 0) + n
    out = {}
    for k, vals in seen.items():
        if present[k] < len(recs):
            if len(vals) < 2:
                continue
            vals = vals | {None}
        if len(vals) > 1:
            out[k] = vals
    return out


def measured_at(r: BenchRecord) -> str:
    """When a record was measured, as ISO text that sorts in time order: for an imported row, the `test_time`
    llama-bench wrote in it, as UTC, but never after its import (a row stamped ahead passes the validity pass
    as clock skew); else (and for an imported row without one) the record's `created`, written when the
    toolkit measured it."""
    return _test_time(r) or r.created


def _test_dt(r: Any) -> datetime | None:
    """An imported row's llama-bench test_time (the validity pass's reading of it), None for other
    records or when it has none that reads as a time."""
    raw = getattr(r, "raw", None)
    extra = getattr(r, "model_extra", None) or {}
    return parse_test_time(raw.get("test_time") if raw and extra.get("imported") else None)


def _test_time(r: Any) -> str | None:
    """_test_dt as UTC ISO text, at the latest the row's `created` (when it was imported)."""
    dt = _test_dt(r)
    if dt is None:
        return None
    imported = parse_test_time(getattr(r, "created", None))
    return (min(dt, imported) if imported is not None else dt).astimezone(timezone.utc).isoformat()


def is_tune_trial(r: Any) -> bool:
    """A record of a `toolkit tune` trial (its `tune` session and round stored with it): a run of a
    test never supersedes a bench run of it (newest_per_test); it shows where no bench run measured
    the test, flagged tune-trial."""
    return bool((getattr(r, "model_extra", None) or {}).get("tune"))


def is_timed(r: Any) -> bool:
    """True for an imported row that carries llama-bench's own test_time: such rows are ordered by it
    among themselves (their `created` and seq say when they were imported, not measured)."""
    return _test_dt(r) is not None


def timing(r: Any) -> int:
    """How a record says when it was measured: 1, an imported row with llama-bench's test_time; 0, the
    toolkit's own record (its `created`, written when it measured); -1, an imported row without one (a
    markdown table: its `created` is when it was imported). A test whose records are all 0 or 1 with
    at least one 1 is ordered by when it was measured (an older file imported today does not supersede
    a newer bench run); any -1, or only 0s, by the store's write order (newest_per_test)."""
    if is_timed(r):
        return 1
    return -1 if (getattr(r, "model_extra", None) or {}).get("imported") else 0


def by_measurement(timings: Iterable[int]) -> bool:
    """Whether a test whose records have these `timing`s is ordered by when each was measured."""
    ts = set(timings)
    return 1 in ts and -1 not in ts


def seq_of(r: Any) -> int | None:
    """The store's sequence number of a record (or index Head), None when it has none."""
    s = getattr(r, "seq", None)
    return s if isinstance(s, int) and not isinstance(s, bool) else None


def write_order(r: Any, pos: int) -> tuple[int, int]:
    """When a record was written to its store, comparable between records of one store: (1, seq) for a record
    that carries the store's sequence number, else (0, pos) with `pos` its place in store order (records
    written before seq existed come first, in file order). Never the wall clock (a clock a year ahead must not
    hide the runs written after it), nor a seq its store never gave (every reader gives a seq above its
    store's counter as None: results/sequence.py)."""
    s = seq_of(r)
    return (1, s) if s is not None else (0, pos)


def _in_order(recs: list[tuple[int, BenchRecord]]) -> list[BenchRecord]:
    """Records (with their store positions) oldest first: by llama-bench's test_time when every one is
    an imported row that has one (rows of imports), else by write_order."""
    if recs and all(is_timed(r) for _, r in recs):
        return [r for _, r in sorted(recs, key=lambda pr: measured_at(pr[1]))]
    return [r for _, r in sorted(recs, key=lambda pr: write_order(pr[1], pr[0]))]


@dataclass
class Selection:
    """Newest record per TestKey of a result set, and the accounting of what was not used.

    `used`: newest ok record per key (repetitions of one test combined into one); `superseded`: older ok
    records of a key (re-runs); `trials`: `toolkit tune` trials of a run not used; `combined`: records merged
    into a cell beyond its first (repetitions); `failed`: records with status failed; `read`: all records
    given."""

    used: list[BenchRecord] = field(default_factory=list)
    read: int = 0
    superseded: int = 0
    failed: int = 0
    combined: int = 0
    trials: int = 0

    def summary(self) -> str:
        merged = f" ({self.combined} more as repetitions combined into their cells)" if self.combined else ""
        trials = f", {self.trials} tune trial(s) not shown (a search's runs)" if self.trials else ""
        return (
            f"{counted(self.read, 'record')} read, {len(self.used)} used{merged}, {self.superseded} superseded by a "
            f"newer run of the same test{trials}, {self.failed} failed"
        )


def is_repetition(r: BenchRecord) -> bool:
    """A repetition of its test inside its run (`process_run`: `bench.runs: N` container starts, or
    rows of one import that measured the same test): combined with the others, never superseding."""
    return bool((r.model_extra or {}).get("process_run"))


def newest_per_test(records: Iterable[BenchRecord], *, include_failed: bool = False) -> Selection:
    """Newest record per TestKey (ok records only unless include_failed); counts the rest.

    The newest run of a test is the one written last to the store (write_order), except among imported rows
    that carry llama-bench's test_time, which are ordered by it, also against the toolkit's own records of
    their test (by their `created`: by_measurement); a run of `toolkit tune` trials only (is_tune_trial) comes
    after every other run of its test. Repetitions inside it (`is_repetition`) are one measurement, combined
    by `combine_runs`. `records` in store order (their positions are the fallback order)."""
    sel = Selection()
    by_key: dict[TestKey, dict[str, list[tuple[int, BenchRecord]]]] = {}
    for pos, r in enumerate(records):
        sel.read += 1
        if r.status != "ok" and not include_failed:
            sel.failed += 1
            continue
        by_key.setdefault(test_key(r), {}).setdefault(r.run_id, []).append((pos, r))
    for runs in by_key.values():
        if len(runs) == 1 and len(only := next(iter(runs.values()))) == 1:
            sel.used.append(only[0][1])  # its test's one record: newest, nothing superseded or combined
            continue
        bench = {rid: not all(is_tune_trial(x) for _, x in v) for rid, v in runs.items()}  # preferred
        if by_measurement(timing(x) for v in runs.values() for _, x in v):
            newest = max(runs, key=lambda rid: (bench[rid], max(measured_at(x) for _, x in runs[rid])))
        else:
            newest = max(runs, key=lambda rid: (bench[rid], max(write_order(x, p) for p, x in runs[rid])))
        older = [x for rid, v in runs.items() if rid != newest for _, x in v]
        sel.trials += (trials := sum(map(is_tune_trial, older)))
        sel.superseded += len(older) - trials
        mine = _in_order(runs[newest])
        repeats = [x for x in mine if is_repetition(x)]
        if len(repeats) > 1:
            sel.superseded += len(mine) - len(repeats)
            sel.combined += len(repeats) - 1
            sel.used.append(combine_runs(repeats))
        else:
            sel.superseded += len(mine) - 1
            sel.used.append(mine[-1])
    return sel


def combine_runs(recs: list[BenchRecord]) -> BenchRecord:
    """One record from N repetitions of a test (N container starts, or N rows of one import).

    avg_ts = mean of the runs' means; stddev_ts = stddev of all samples pooled (within + between runs);
    `between_runs` = {runs, means, spread_pct, counts: each run's samples, in the order of samples_ts, first:
    the oldest run's test_time and created} (held to by runs_check); flags `runs-disagree` when the runs'
    means spread by more than 3 x the pooled within-run stddev and more than 5 %, `bimodal-runs` when (N >= 3)
    the largest gap between sorted run means is most of that spread (decode speed fixed at process start).
    Flags: every process's (`_process_flags`). The newest repetition (test_time for imported rows, else the
    store's order) gives the rest."""
    recs = _in_order(list(enumerate(recs)))
    means = [x.avg_ts for x in recs if x.avg_ts is not None]
    samples = [s for x in recs for s in x.samples_ts]
    mean = sum(means) / len(means) if means else None
    pooled = stats.stdev(samples) if len(samples) > 1 else stats.stdev(means) if len(means) > 1 else None
    within = [x.stddev_ts for x in recs if x.stddev_ts is not None]
    within_sd = math.sqrt(sum(w * w for w in within) / len(within)) if within else 0.0
    spread = (max(means) - min(means)) if len(means) > 1 else 0.0
    flags = _process_flags(recs)
    if mean and spread > 3 * within_sd and spread > 0.05 * mean:
        ms = sorted(means)
        gap = max(b - a for a, b in zip(ms, ms[1:], strict=False))
        bimodal = ["bimodal-runs"] if len(ms) >= 3 and gap >= 0.6 * spread else []
        flags = without_unsupported(flags, ("runs-disagree", *bimodal))
        flags += [f for f in ("runs-disagree", *bimodal) if f not in flags]
    out = recs[-1].model_copy(update={"avg_ts": mean, "stddev_ts": pooled, "samples_ts": samples})
    out._flags_checked = True
    out.__pydantic_extra__ = {
        **(out.model_extra or {}),
        "flags": flags,
        "between_runs": {
            "runs": len(recs),
            "means": [round(m, 4) for m in means],
            "spread_pct": round(100 * spread / mean, 2) if mean else None,
            "counts": [len(x.samples_ts) for x in recs if x.avg_ts is not None],
            # when the oldest process measured: a report's `measured:` span starts there
            "first": {"test_time": (recs[0].raw or {}).get("test_time"), "created": recs[0].created},
        },
    }
    return out


def shown_flags(r: BenchRecord) -> list[str]:
    """The flags a reader shows for `r`: those it stored (`flags`: a list of names; anything else is ignored),
    its telemetry flags held to its own stored telemetry block (telemetry_flags.checked_flags: one the block
    shows nothing of is `flag-unsupported:<flag>`, one the block raises and the record lacks is added), its
    other flags held to its own fields (flag_claims.held_claims). A cell combine_runs made keeps its
    processes' (already held)."""
    stored = (r.model_extra or {}).get("flags")
    flags = [f for f in stored if isinstance(f, str) and f] if isinstance(stored, list) else []
    checked = (r.__pydantic_private__ or {}).get("_flags_checked")  # not through BaseModel.__getattr__
    return flags if checked else held_claims(checked_flags(flags, r.telemetry), r)


def _process_flags(recs: list[BenchRecord]) -> list[str]:
    """The flags of every process of a combined cell, oldest first, each held to its own process's
    telemetry (shown_flags: the combined record keeps only the newest's block)."""
    out: list[str] = []
    for x in recs:
        out += [f for f in shown_flags(x) if f not in out]
    return out


def value(r: BenchRecord) -> float | None:
    """tok/s of a record: avg_ts, or a served record's output_throughput; None when not finite."""
    v = r.avg_ts
    if v is None and r.axis == "served":
        v = r.raw.get("output_throughput")
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float's range
        return None
    return f if math.isfinite(f) else None


@dataclass
class Join:
    """Records of two sides matched test by test (compare, reproduce). `pairs`: (a, b) with equal model and
    test fields; `only_a`/`only_b`: unmatched; `ignored`: test fields present on one side only (left out of
    the join) and those the caller left out; `lacking`: of the first, those some record of A lacks, of B;
    `apart`: when nothing matched, the fields whose values keep the sides apart."""

    pairs: list[tuple[BenchRecord, BenchRecord]] = field(default_factory=list)
    only_a: list[BenchRecord] = field(default_factory=list)
    only_b: list[BenchRecord] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    lacking: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    apart: dict[str, tuple[list, list]] = field(default_factory=dict)
    unknown_model: int = 0  # records left unmatched because their model is unknown (model_known)
    tests_apart: bool = False
    """Nothing matched and no test name (LABEL_FIELDS: pp N, tg N, depth, micro-batch) is on both sides."""


def model_known(r: BenchRecord) -> bool:
    """Whether record `r` says which model it measured: a sha256, llama-bench's description of the
    file, or a name other than `unknown` (a vLLM bench JSON names none: its import says `unknown`).
    Two records of unknown models are not known to be of the same one."""
    fp = model_fingerprint(r)
    return (
        known_sha(r) is not None or fp[:1] != ("name",) or str(fp[1]).strip().lower() not in ("", "unknown")
    )


def _models_match(a: BenchRecord, b: BenchRecord) -> bool:
    sa, sb = known_sha(a), known_sha(b)
    return model_fingerprint(a) == model_fingerprint(b) and (sa is None or sb is None or sa == sb)


def match_tests(
    a: list[BenchRecord],
    b: list[BenchRecord],
    *,
    ignore: Iterable[str] = (),
    same_unknown_model: bool = False,
) -> Join:
    """Match each record of `a` with the record of `b` that measured the same test: on the test fields every
    record on both sides has (the others listed in `ignored`) and the model (fingerprint, and sha256 when both
    know it). `ignore` names test fields the caller leaves out (listed in `ignored` too). Each side should
    already hold one record per test (`newest_per_test`). A record whose model is unknown (model_known) is
    matched with nothing (counted in `unknown_model`) unless `same_unknown_model` (both measured one model).
    """
    out = Join()
    skip = set(ignore)
    fa = [{k: v for k, v in test_fields(r).items() if k not in skip} for r in a]
    fb = [{k: v for k, v in test_fields(r).items() if k not in skip} for r in b]
    keys_a = set.intersection(*(set(f) for f in fa)) if fa else set()
    keys_b = set.intersection(*(set(f) for f in fb)) if fb else set()
    common = keys_a & keys_b
    every = set().union(*fa, *fb)
    out.ignored = sorted(every - common | skip)
    out.lacking = (tuple(sorted(every - keys_a)), tuple(sorted(every - keys_b)))
    index: dict[tuple, list[BenchRecord]] = {}
    for r, f in zip(b, fb, strict=True):
        index.setdefault((model_fingerprint(r), tuple((k, f.get(k)) for k in sorted(common))), []).append(r)
    used_b: set[int] = set()
    for r, f in zip(a, fa, strict=True):
        if not same_unknown_model and not model_known(r):
            out.only_a.append(r)
            continue
        cands = index.get((model_fingerprint(r), tuple((k, f.get(k)) for k in sorted(common))), [])
        match = next((c for c in cands if id(c) not in used_b and _models_match(r, c)), None)
        if match is None:
            out.only_a.append(r)
        else:
            used_b.add(id(match))
            out.pairs.append((r, match))
    out.only_b = [r for r in b if id(r) not in used_b]
    if not same_unknown_model:
        out.unknown_model = sum(not model_known(r) for r in out.only_a + out.only_b)
    if not out.pairs and a and b:
        names = sorted(common & LABEL_FIELDS)
        out.tests_apart = not {tuple(f.get(k) for k in names) for f in fa} & {
            tuple(f.get(k) for k in names) for f in fb
        }
        for k in sorted(common | {"model"}):
            get = (lambda r, _f: model_fingerprint(r)) if k == "model" else (lambda r, f, k=k: f.get(k))
            va = sorted({str(get(r, f)) for r, f in zip(a, fa, strict=True)})
            vb = sorted({str(get(r, f)) for r, f in zip(b, fb, strict=True)})
            if not set(va) & set(vb):
                out.apart[k] = (va, vb)
    return out
