"""hunt43 (breaker of perf43's report fast paths): the shortcuts still say what the slow way said where
the fixtures of test_perf43_report do not reach. An image's provenance line from the report's memo for
any sequence of calls on sub-lists of its Facts (twins of one label under several digests, build
commits mixed under one image object, toolkits per host, a Facts in two tables), and the verdict's
knob settings read from each Facts' TestKey as id_value reads them (flash_attn -1 said `auto`), inside
and outside keys_cached. Real records (tests/data), changed as imports and hand edits change them."""

from __future__ import annotations

import contextlib
import copy
import json
import random

from tests.support.records import DATA, REAL_FIXTURES, needs_fixtures
from toolkit.analysis import provenance, tables
from toolkit.analysis.facts import Facts
from toolkit.results import identity
from toolkit.results.records import BenchRecord


def _records(seed: int) -> list[BenchRecord]:
    """The fixtures' records twice over, each changed at random: its build commit (the raw row's too),
    its image's runtime label dropped (the build commit then says the runtime), a twin digest, the
    toolkit its host ran; runs of one image sharing one image object as index.load gives them."""
    rnd = random.Random(seed)
    out: list[BenchRecord] = []
    for line in [ln for name in REAL_FIXTURES for ln in (DATA / name).read_text().splitlines()] * 2:
        d = json.loads(line)
        if rnd.random() < 0.5:
            d["build_commit"] = d["raw"]["build_commit"] = rnd.choice(
                ["aaaa1111", "bbbb2222", d["build_commit"]]
            )
        if rnd.random() < 0.3:
            d["image"]["labels"].pop("org.toolkit.llama-cpp-commit", None)
        if rnd.random() < 0.3:
            d["image"]["digest"] = "sha256:" + rnd.choice("01") * 64
        if rnd.random() < 0.5:
            d["host"]["toolkit"] = {
                "version": rnd.choice(["0.1.0", "0.2.0"]),
                "commit": rnd.choice("123") * 40,
            }
        r = BenchRecord.model_validate(d)
        if out and out[-1].image == r.image and rnd.random() < 0.7:
            r.image = out[-1].image  # one object, as the records of one run hold it
        out.append(r)
    return out


@needs_fixtures
def test_memo_gives_each_call_what_the_call_alone_gives():
    """Calls of provenance on any sub-lists of one report's Facts (any order, a Facts twice), one memo
    between them, each say what that call says without one: the memo never lends one group's line to
    another (same label under other digests, one image object of several build commits or toolkits)."""
    rnd = random.Random(43)
    fs = [Facts.of(r) for r in _records(43)]
    assert len({f.image for f in fs}) >= 4  # twins: one name, several digests
    kinds = set()
    for _ in range(60):
        memo: provenance.Memo = {}
        for _ in range(5):
            sub = rnd.sample(fs, rnd.randint(1, len(fs)))
            sub += sub[: rnd.randint(0, len(sub))] if rnd.random() < 0.3 else []  # in two tables
            got = provenance.provenance(sub, (), memo).to_json()
            assert got == provenance.provenance(sub).to_json()
        kinds |= {type(k) for k in memo}
    assert kinds == {int, tuple}  # groups of one image object and mixed ones both met


@needs_fixtures
def test_knob_settings_say_what_id_value_says():
    """knob_settings reads each record's test fields from its Facts' TestKey: the same words id_value
    says (flash_attn -1 as `auto`), with keys computed or cached."""
    recs = []
    for i, line in enumerate((DATA / "results-cpu-a.jsonl").read_text().splitlines()):
        d = json.loads(line)
        raw = copy.deepcopy(d["raw"])
        raw.update(flash_attn=[-1, 0, 1][i % 3], n_threads=[2, 4][i % 2], type_k=["f16", "q8_0"][i % 2])
        d["raw"], d["flash_attn"] = raw, raw["flash_attn"]
        recs.append(BenchRecord.model_validate(d))
    for cached in (False, True):
        with identity.keys_cached() if cached else contextlib.nullcontext():
            fs = [Facts.of(r) for r in recs]
            knobs = [c for c in tables.varying_columns(recs) if c != "model"]
            assert {"flash_attn", "n_threads", "type_k"} <= set(knobs)
            want = {id(r): [f"{c}={tables.id_value(r, c)}" for c in knobs] for r in recs}
            assert tables.knob_settings(fs) == want
            assert any("flash_attn=auto" in said for said in want.values())
