"""Statistics as pure functions: arrays in, numbers out, nothing of the project imported.

Small samples get exact answers: a rank correlation over fewer than ``EXACT_MAX_N`` pairs has its
p-value from every permutation, never from the large-sample approximation (with 3 seeds the
smallest two-sided p there is 1/3, not 0).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

EXACT_MAX_N = 9  # up to 9! = 362,880 permutations: exact; above, the t approximation


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion k / n ((0, 1) for n = 0)."""
    if n == 0:
        return (0.0, 1.0)
    phat = k / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (float(max(0.0, centre - half)), float(min(1.0, centre + half)))


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their ranks), 1-based."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    ranks[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(x: list[float], y: list[float]) -> tuple[float | None, float | None, str]:
    """Spearman's ρ and its two-sided p-value, with how p was obtained: ``"exact"`` (every permutation
    of y's ranks, n ≤ EXACT_MAX_N) or ``"t approximation"``.  (None, None, why) where ρ is undefined
    (fewer than 3 pairs, or a constant variable)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(a)
    if n < 3:
        return None, None, "fewer than 3 pairs"
    if len(np.unique(a)) < 2 or len(np.unique(b)) < 2:
        return None, None, "a constant variable"
    ra, rb = _ranks(a), _ranks(b)
    ra_c, rb_c = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float((ra_c ** 2).sum() * (rb_c ** 2).sum()))
    rho = float((ra_c * rb_c).sum() / denom)
    if n <= EXACT_MAX_N:
        perms = np.array(list(itertools.permutations(rb_c)))
        null = perms @ ra_c / denom
        p = float(np.mean(np.abs(null) >= abs(rho) - 1e-12))
        return rho, p, "exact"
    from scipy.stats import t as t_dist

    if abs(rho) >= 1.0:
        return rho, 0.0, "t approximation"
    tstat = rho * math.sqrt((n - 2) / (1 - rho * rho))
    return rho, float(2 * t_dist.sf(abs(tstat), n - 2)), "t approximation"


def kaplan_meier(times: list[float], observed: list[bool]) -> list[tuple[float, float]]:
    """The Kaplan–Meier estimate of P(T > t): ``[(t, S(t))]`` at each distinct time with an event.

    ``times[i]`` is run i's binding step when ``observed[i]``, else its censoring step (the last step
    it was watched without binding).  A run censored at t is still at risk at t (it was seen not
    bound there), the usual convention for ties."""
    t = np.asarray(times, dtype=float)
    e = np.asarray(observed, dtype=bool)
    curve, surv = [], 1.0
    for x in np.unique(t[e]):
        at_risk = int((t >= x).sum())
        events = int(((t == x) & e).sum())
        surv *= 1.0 - events / at_risk
        curve.append((float(x), surv))
    return curve


def km_median(curve: list[tuple[float, float]]) -> float | None:
    """The smallest time with S(t) ≤ 0.5; None when the curve never gets there (the median lies
    beyond the last censoring time)."""
    return next((t for t, s in curve if s <= 0.5), None)


def auc(x: np.ndarray, y: np.ndarray) -> float | None:
    """P(a bound run's value > a non-bound run's), ties counting half (the Mann–Whitney AUC)."""
    pos, neg = x[y == 1], x[y == 0]
    if not len(pos) or not len(neg):
        return None
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)
