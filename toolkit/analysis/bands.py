"""Which of n measurements some other one lies beyond the noise band of, in O(n log n): the report's
decode fold (tables._agree) and `ub-no-effect` (tables._mark_ub_no_effect) over thousands of
micro-batch sizes of one test, where comparing every pair took minutes (8,000 sizes).

Two tok/s v_lo <= v_hi with relative stddevs r_lo, r_hi agree when v_hi / v_lo - 1 <= 2 hypot(r_lo,
r_hi) (tables.noise_band); squared, they break it when (v_hi / v_lo - 1)^2 / 4 - r_lo^2 > r_hi^2. So
a point k has a breaker below it when max over i of F_i(v_k) > r_k^2, F_i(x) = (max(x / v_i, 1) - 1)^2
/ 4 - r_i^2, and one above it alike with v_j / x. Any two F differ by a function monotone in x (its
derivative is (1/v_i - 1/v_k) ((1/v_i + 1/v_k) x - 1) / 2 where both apply, of one sign; below a v the
F is constant), so they cross at most once and a Li Chao tree over the sorted values finds the
maximising F at every point in O(n log n) evaluations. The one found is then checked by the caller's
exact rule, so the answer is the pairwise one (up to float rounding between two near-equal maxima).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence


def _excess(ratio: float, rsd: float) -> float:
    """(ratio - 1)^2 / 4 - rsd^2 for ratio > 1, else -rsd^2: how far a partner lies beyond one point's
    half of the band, squared: inf for a ratio whose square overflows (a product, never `**`, which
    raises OverflowError), the stddev held below 1e150 so that inf - inf (NaN) cannot arise."""
    d, r = ratio - 1, min(rsd, 1e150)
    return (d * d / 4 if ratio > 1 else 0.0) - r * r


def _farthest(vals: Sequence[float], rsds: Sequence[float], up: bool) -> list[int]:
    """For each point k, the index of the point whose F is largest at vals[k] (up: F from partners
    above, vals[j] / x; else from partners below, x / vals[i]). vals > 0 and finite, rsds finite."""
    xs = sorted(set(vals), reverse=up)  # the order in which F's ratio grows

    def f(i: int, x: float) -> float:
        return _excess(vals[i] / x if up else x / vals[i], rsds[i])

    tree = [-1] * (4 * len(xs))
    for i in range(len(vals)):
        node, lo, hi, cur = 1, 0, len(xs) - 1, i
        while True:
            best = tree[node]
            if best < 0:
                tree[node] = cur
                break
            mid = (lo + hi) // 2
            if f(cur, xs[mid]) > f(best, xs[mid]):
                tree[node], cur, best = cur, best, cur
            if lo == hi:
                break
            if f(cur, xs[lo]) > f(best, xs[lo]):
                node, hi = 2 * node, mid
            elif f(cur, xs[hi]) > f(best, xs[hi]):
                node, lo = 2 * node + 1, mid + 1
            else:
                break
    where = {x: n for n, x in enumerate(xs)}
    out = []
    for k, x in enumerate(vals):
        node, lo, hi, at, pick, top = 1, 0, len(xs) - 1, where[x], k, -math.inf
        while tree[node] >= 0:
            if (v := f(tree[node], x)) > top:
                pick, top = tree[node], v
            if lo == hi:
                break
            mid = (lo + hi) // 2
            node, lo, hi = (2 * node, lo, mid) if at <= mid else (2 * node + 1, mid + 1, hi)
        out.append(pick)
    return out


def breakers(vals: Sequence[float], rsds: Sequence[float], agree: Callable[[int, int], bool]) -> list[bool]:
    """For each of the n points (tok/s `vals` > 0 and finite, relative stddevs `rsds` finite), whether
    some other point does not `agree` with it (agree(i, k): the exact pairwise rule, symmetric, the
    band above). O(n log n); [] for no points. Up to 8 points every pair is asked (fewer steps)."""
    if (n := len(vals)) <= 8:
        return [any(j != k and not agree(j, k) for j in range(n)) for k in range(n)]
    below, above = _farthest(vals, rsds, up=False), _farthest(vals, rsds, up=True)
    return [any(j != k and not agree(j, k) for j in (below[k], above[k])) for k in range(len(vals))]
