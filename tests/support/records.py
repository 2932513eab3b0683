"""The one record factory (`make_record`: a BenchRecord as `toolkit bench` builds it, normalize() over a
llama-bench-shaped row), the captured real-run result files (tests/data/results-*.jsonl) and golden-file
comparison (tests/golden/, rewritten with UPDATE_GOLDEN=1)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import DATA
from toolkit.results import canary_check
from toolkit.results.records import BenchRecord, ImageRef, ModelRef, read_jsonl
from toolkit.runtimes.llama_bench import check

GOLDEN = Path(__file__).parents[1] / "golden"


CPU_A = DATA / "results-cpu-a.jsonl"


CPU_B = DATA / "results-cpu-b.jsonl"


VULKAN = DATA / "results-vulkan-lavapipe.jsonl"


def load(*paths: Path) -> list[BenchRecord]:
    return [BenchRecord.model_validate(o) for p in paths for o in read_jsonl(p)]


def assert_golden(name: str, text: str) -> None:
    """Compare with tests/golden/<name>; UPDATE_GOLDEN=1 rewrites it (review the diff)."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{path} missing: run UPDATE_GOLDEN=1 pytest {__file__} and review it"
    assert text == path.read_text(), (
        f"{name} differs from the golden file; if intended: UPDATE_GOLDEN=1 pytest"
    )


R9700_HOST = {"gpus": [{"gfx_target": "gfx1201", "name": "AMD Radeon AI PRO R9700", "is_igpu": False}]}


QWEN3_30B = {
    "model_type": "qwen3moe 30B.A3B Q4_K - Medium",
    "model_size": 17_700_000_000,
    "model_n_params": 30_532_122_624,
}


def make_record(
    image: str,
    backend: str,
    *,
    p: int = 0,
    n: int = 0,
    ub: int | None = 512,
    b: int | None = 2048,
    avg: float,
    sd: float = 0.0,
    gpu_info: str | None = None,
    backends: str | None = None,
    status: str = "ok",
    error: str | None = None,
    method: str = "llama-bench",
    fa: int | None = 1,
    model: str = "qwen3-30b-a3b-q4kxl",
    family: str | None = None,
    host: dict | None = None,
    raw: dict | None = None,
    engine: dict | None = None,
    axis: str | None = None,
    threads: int | None = None,
    digest: str | None = None,
    run_id: str = "run-1",
    sha256: str = "ab" * 32,
    **fields: Any,
) -> BenchRecord:
    """A record as bench.py builds it: normalize() over a llama-bench-shaped raw row. digest: the
    image digest (default: one derived from `image`); sha256: the model file's; fields: any other BenchRecord field, set last
    (over what normalize() gave; an unknown name is kept as an extra field, as BenchRecord allows)."""
    row = {
        **QWEN3_30B,
        "n_prompt": p,
        "n_gen": n,
        "n_batch": b,
        "n_ubatch": ub,
        "flash_attn": fa,
        "n_gpu_layers": 999,
        "avg_ts": avg,
        "stddev_ts": sd,
        "gpu_info": gpu_info
        if gpu_info is not None
        else ("" if (backends or backend) in ("cpu", "CPU") else "AMD Radeon AI PRO R9700"),
        "backends": backends or {"rocm": "ROCm", "vulkan": "Vulkan", "cpu": "CPU"}[backend],
        **(raw or {}),
    }
    if threads is not None:
        row["n_threads"] = threads
    norm = check.normalize(row)
    if axis:
        norm["axis"] = axis
    digest = digest or "sha256:" + (image.encode().hex() * 64)[:64]
    mref = ModelRef(
        name=model,
        path="",
        sha256=sha256,
        size_bytes=QWEN3_30B["model_size"],
        **({"family": family} if family else {}),
    )
    return BenchRecord(
        run_id=run_id,
        created="2026-07-01T00:00:00+00:00",
        status=status,
        error=error,
        method=method,
        image=ImageRef(name=image, ref=f"toolkit/{image}:latest", digest=digest, backend=backend),
        model=mref,
        host=host if host is not None else R9700_HOST,
        engine=engine or {},
        raw=row,
        **{**norm, **fields},
    )


def tune_trial(
    ub: int, samples: list[float], *, session: str = "s1", rnd: int = 1, **fields: Any
) -> BenchRecord:
    """A stored `toolkit tune` trial of pp2048 at micro-batch `ub` (tok/s `samples`), of tune session
    `session`, round `rnd`, as bench stores it (make_record; `fields`: any other BenchRecord field)."""
    r = make_record(
        "cpu", "cpu", p=2048, ub=ub, avg=sum(samples) / len(samples), gpu_info="", raw={"samples_ts": samples}
    )
    for k, v in fields.items():
        setattr(r, k, v)
    r.__pydantic_extra__ = {**(r.model_extra or {}), "tune": {"session": session, "round": rnd}}
    return r


def seed_records() -> list[BenchRecord]:
    """The published R9700 sweep (shared/reference/llama-bench.md), vLLM as an AWQ model of the same family."""
    rs = []
    for img, be, figures in (
        (
            "hip",
            "rocm",
            {
                (512, 512): 3491,
                (512, 2048): 3491,
                (2048, 512): 3391,
                (2048, 2048): 4635,
                (4096, 512): 3900,
                (4096, 2048): 4380,
                "tg": 93.0,
            },
        ),
        (
            "vulkan",
            "vulkan",
            {
                (512, 512): 2650,
                (512, 2048): 2650,
                (2048, 512): 3019,
                (2048, 2048): 3675,
                (4096, 512): 3100,
                (4096, 2048): 3330,
                "tg": 167.6,
            },
        ),
    ):
        for key, v in figures.items():
            if key == "tg":
                rs.append(make_record(img, be, n=128, avg=v, sd=v * 0.005))
            else:
                rs.append(make_record(img, be, p=key[0], ub=key[1], avg=v, sd=v * 0.01))
    awq = dict(
        method="vllm-bench-latency",
        ub=None,
        b=None,
        fa=None,
        model="qwen3-30b-a3b-awq",
        family="qwen3moe 30B.A3B",
        gpu_info="",
        raw={"model_type": None, "model_size": None},
    )
    rs.append(make_record("vllm", "rocm", p=4096, avg=8326, sd=40, **awq))
    rs.append(make_record("vllm", "rocm", n=128, avg=49.0, sd=0.3, **awq))
    return rs


needs_fixtures = pytest.mark.skipif(
    not all(p.is_file() for p in (CPU_A, CPU_B, VULKAN)), reason="fixtures not captured"
)


CANARY_CONTROL = {"image": "cpu", "digest": "sha256:" + "63707500" * 8, "run_id": "run-1", "ppl": 535.8769}


def canary_row(**kw: Any) -> dict[str, Any]:
    """A stored canary.jsonl row of a GPU image that passed against the CPU control CANARY_CONTROL
    (toolkit.bench.canary's fields; bound_ln the canary's own bound), with `kw` replacing fields."""
    good = {
        "image": "vulkan",
        "digest": "sha256:" + "76" * 32,
        "backend": "vulkan",
        "status": "ok",
        "reason": "",
        "ppl": 535.9028,
        "control": CANARY_CONTROL,
        "ln_ratio": math.log(535.9028 / 535.8769),
        "bound_ln": canary_check.BOUND_LN,
        "run_id": "run-1",
    }
    return {**good, **kw}


def edit_line(path: Path, line: int, change: Any) -> None:
    """Edit the JSON record on line `line` (1-based) of a JSONL file in place: `change(record)` alters
    the parsed dict, which is written back compact (as the store writes lines)."""
    lines = path.read_text().splitlines()
    rec = json.loads(lines[line - 1])
    change(rec)
    lines[line - 1] = json.dumps(rec, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")


REAL_FIXTURES = ("results-cpu-a.jsonl", "results-cpu-b.jsonl", "results-vulkan-lavapipe.jsonl")
"""Real records of `toolkit bench` (two CPU runs, a Vulkan run on lavapipe) in tests/data/."""


def filed_fixtures(results: Path) -> Path:
    """The real fixtures (REAL_FIXTURES) filed as `toolkit bench` files them: results/<digest12>/bench.jsonl."""
    for name in REAL_FIXTURES:
        text = (DATA / name).read_text()
        digest = json.loads(text.splitlines()[0])["image"]["digest"]
        dest = results / digest.split(":")[1][:12] / "bench.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        with dest.open("a") as fh:
            fh.write(text)
    return results


def resign_index(results: Path) -> None:
    """Every record row of results/.index.sqlite given the MAC of its values under this user's key
    (toolkit/results/index_trust.py), as if this user's toolkit had written them as they are now: a
    test of what a reader checks beyond the MAC (index.load's re-check of each loaded line)."""
    import sqlite3

    from toolkit.results import index_trust

    key = index_trust.index_key()
    assert key is not None
    with sqlite3.connect(results / ".index.sqlite") as c:
        for row in c.execute(index_trust._CHECKED["recs"]).fetchall():
            mac = index_trust.row_mac(key, "recs", row[:-1])
            c.execute("UPDATE recs SET mac = ? WHERE file = ? AND line = ?", (mac, row[0], row[1]))


def resolve_whole(store, ref: str, records: list[BenchRecord] | None = None):
    """The side `ref` names among `records` (else store.results()), by compare's rules (its module
    docstring) over the whole list, without the index: the reference that compare._pick's SQL
    (resultindex.sides) is held to. A compare.Side of the ok records; BadInput (compare._unresolved)
    when `ref` names none or several."""
    from toolkit.analysis import compare
    from toolkit.analysis.tables import image_label
    from toolkit.results import identity
    from toolkit.results import index as resultindex

    recs = [r for r in (store.results() if records is None else records) if r.status == "ok"]
    by_run = [r for r in recs if r.run_id == ref]
    if by_run:
        return compare.Side(ref, f"run {ref}", by_run)
    named = [r for r in recs if r.image.name == ref]
    if named:
        build = store.latest_build(ref)
        digest = (
            build.digest
            if build and any(r.image.digest == build.digest for r in named)
            else max(enumerate(named), key=lambda ir: identity.write_order(ir[1], ir[0]))[1].image.digest
        )
        mine = [r for r in named if r.image.digest == digest]
        return compare.Side(ref, image_label(mine[0]), mine)
    match = resultindex.digest_matches
    digests = sorted({r.image.digest for r in recs if match(r.image.digest, ref, r.image.name)})
    if len(digests) == 1:
        mine = [r for r in recs if r.image.digest == digests[0] and match(digests[0], ref, r.image.name)]
        return compare.Side(ref, image_label(mine[0]), mine)
    newest = resultindex.runs_newest_first(recs) if not digests else []  # a run id by its start
    if runs := resultindex.run_begun(ref, (h.run_id for h in newest)):
        label = f"run {runs[0]}" if len(runs) == 1 else resultindex.group_words(ref, runs, label=True)
        return compare.Side(ref, label, [r for r in recs if r.run_id in runs])
    raise compare._unresolved(store, ref, digests)
