"""Sample statistics in float arithmetic. `statistics.stdev` is exact (it works in Fractions): on a
report over 10,000 records it built 241,580 Fraction objects (issue 32); tok/s samples need no
exactness beyond a float's. Also the 95 % confidence interval of a mean (Student t), for process
repeats (issue 34)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist
from typing import Any


def finite_number(v: Any) -> float | None:
    """A finite JSON number (int or float, never a bool) as a float; None for anything else: a text
    such as "256000000" is no number to a check or a reader, so neither can read what the other did not;
    an int beyond a float's range (10**400: JSON integers are unbounded, float() raises OverflowError)
    is none either."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def float_or_none(v: Any) -> float | None:
    """A float of a number or numeric text, finite or not (a canary's NaN and inf are stored as text:
    CanaryResult.record); None for anything else: a bool, None, other text, an int beyond a float's
    range (10**400)."""
    if isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return None


def stdev(values: Iterable[float]) -> float:
    """The sample standard deviation (n - 1 in the denominator), as statistics.stdev gives it to
    about 1e-12 relative. Raises ValueError for fewer than two values (as statistics.stdev does)."""
    xs = [float(x) for x in values]
    n = len(xs)
    if n < 2:
        raise ValueError("stdev requires at least two data points")
    mean = math.fsum(xs) / n
    return math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))


# Student's t 0.975 quantile (two-sided 95 %) for 1..30 degrees of freedom: scipy.stats.t.ppf(0.975, df)
# to 6 decimals (scipy 1.17); NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2 "Critical
# Values of the Student's t Distribution" (https://www.itl.nist.gov/div898/handbook/eda/section3/eda3672.htm)
# prints the same values to 3 decimals (df 1: 12.706, 10: 2.228, 30: 2.042).
_T975 = (
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
    2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
    2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
)  # fmt: skip


def t975(df: int) -> float:
    """Student's t quantile at 0.975 (the two-sided 95 % critical value) for `df` >= 1 degrees of
    freedom: the table above for df <= 30, beyond it the Cornish-Fisher expansion around the normal
    quantile of Abramowitz & Stegun, Handbook of Mathematical Functions (1964), 26.7.5 (four terms;
    within 2e-8 relative of the exact value from df 31 on). Raises ValueError for df < 1."""
    if df < 1:
        raise ValueError(f"t975: degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    x = NormalDist().inv_cdf(0.975)
    g1 = (x**3 + x) / 4
    g2 = (5 * x**5 + 16 * x**3 + 3 * x) / 96
    g3 = (3 * x**7 + 19 * x**5 + 17 * x**3 - 15 * x) / 384
    g4 = (79 * x**9 + 776 * x**7 + 1482 * x**5 - 1920 * x**3 - 945 * x) / 92160
    return x + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mean_half_width95(values: Iterable[float]) -> float:
    """Half-width of the two-sided 95 % confidence interval of the mean of `values` (Student t, n - 1
    degrees of freedom): t975(n - 1) x stdev / sqrt(n), in the values' unit (tok/s for process means).
    The interval is mean ± this. Raises ValueError for fewer than two values."""
    xs = [float(x) for x in values]
    return t975(len(xs) - 1) * stdev(xs) / math.sqrt(len(xs))
