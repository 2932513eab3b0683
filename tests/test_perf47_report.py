"""Issue 32 item 13 (a warm report of 10,000 shown records): work the report did twice per record, now
done once, with the same result. The clock skew of a record the index vouches for is checked against the
time the index keeps (`written`), not a second parse of its `created`; a record without a GPU is assessed
once (its ceiling is none, as `assess` said); the decode fold's groups of a few points are compared pair
by pair, not through two Li Chao trees (bands.breakers)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from tests.support.records import make_record
from toolkit.analysis import bands, roofline, tables
from toolkit.analysis.facts import Facts
from toolkit.results import identity, sequence
from toolkit.results import index as resultindex
from toolkit.results.records import ResultStore


def test_a_warm_select_takes_each_records_time_from_the_index(tmp_path, monkeypatch):
    """A record in the future and one earlier than the store's order: the index path flags them as the
    store's reader does, and a warm select parses no `created` to do it (was: one parse per record)."""
    now = datetime.now(timezone.utc)
    store = ResultStore(tmp_path / "results")
    for days, run_id, p in ((-2, "run-1", 128), (365, "run-ahead", 256), (0, "run-3", 512)):  # 3 tests
        created = (now + timedelta(days=days)).isoformat(timespec="seconds")
        store.add_result(
            make_record("cpu", "cpu", p=p, avg=100.0).model_copy(
                update={"created": created, "run_id": run_id}
            )
        )
    expected = [r.clock_skew for r in ResultStore(tmp_path / "results").results()]
    assert expected[0] is None and "in the future" in expected[1] and "before" in expected[2]
    resultindex.select(ResultStore(tmp_path / "results"))  # the index built
    parsed: list[str] = []
    real = sequence.written_at
    monkeypatch.setattr(resultindex, "written_at", lambda c: parsed.append(c) or real(c))
    warm = resultindex.select(ResultStore(tmp_path / "results"))
    assert [r.clock_skew for r in warm] == expected and parsed == []


def test_a_cpu_record_is_assessed_once(monkeypatch):
    """Facts.of of a CPU record assesses it once: its ceiling (no GPU used: gpu_count 0) is none without
    the second roofline.assess it took; asked without its GpuUse, ceiling still assesses. Its flags are
    those record_flags gives."""
    calls: list[bool] = []
    real = roofline.assess
    monkeypatch.setattr(roofline, "assess", lambda r, **kw: calls.append(kw["ceiling"]) or real(r, **kw))
    r = make_record("cpu", "cpu", p=512, avg=100.0)
    with identity.keys_cached():
        f = Facts.of(r)
        assert f.roof is None and f.gpu_count == 0 and calls == []  # (Facts.of's own assess: facts.assess)
        assert roofline.ceiling(r) is None and calls == [True]
        assert list(f.flags) == tables.record_flags(r, tables.ReportOptions())


def test_breakers_of_a_few_points_ask_every_pair_and_build_no_tree(monkeypatch):
    """Up to 8 points breakers asks the exact rule of every pair (n (n - 1) calls) and no Li Chao
    tree; past 8 the trees give the same answers as every pair (random sets near the band's edge)."""
    rng = random.Random(47)

    def rule(vals, rsds):
        return lambda i, k: tables._within(vals[i], vals[k], tables.noise_band(rsds[i], rsds[k]))

    def pairwise(vals, rsds):
        agree = rule(vals, rsds)
        return [any(j != k and not agree(j, k) for j in range(len(vals))) for k in range(len(vals))]

    sets = []
    for n in [*range(1, 9)] * 20 + [*range(9, 30)] * 5:
        base = rng.uniform(1, 5000)
        vals = [round(base * (1 + rng.uniform(-0.06, 0.06)), rng.choice([0, 1, 3])) for _ in range(n)]
        sets.append((vals, [rng.choice([0.0, rng.uniform(0, 0.03), 0.01]) for _ in range(n)]))
    for vals, rsds in sets:
        assert bands.breakers(vals, rsds, rule(vals, rsds)) == pairwise(vals, rsds), (vals, rsds)
    asked: list[tuple[int, int]] = []
    monkeypatch.setattr(bands, "_farthest", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("a tree")))
    for vals, rsds in (s for s in sets if len(s[0]) <= 8):
        asked.clear()
        bands.breakers(vals, rsds, lambda i, k: asked.append((i, k)) or True)
        n = len(vals)
        assert sorted(asked) == sorted((j, k) for k in range(n) for j in range(n) if j != k)
