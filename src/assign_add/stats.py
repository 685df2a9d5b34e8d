"""Statistics as pure functions: arrays in, numbers out, nothing of the project imported.

- **proportions and ranks**: :func:`wilson_interval` (a proportion's 95 % interval), :func:`spearman`
  (ρ with an exact or t-approximation p), :func:`auc` (the Mann–Whitney AUC);
- **tests of two proportions**: :func:`fisher_power` (exact power of Fisher's test), :func:`holm` (Holm's
  adjusted p-values over a family of tests; ``assign-add survival-rescue``);
- **time to event**: :func:`kaplan_meier`, :func:`km_median`, :func:`logrank_p` (two samples of times with
  event flags; ``assign-add survival-compare``);
- **curve fits** (a sweep's threshold, :mod:`assign_add.sweep.threshold`): :func:`monotone_fit` and
  :func:`monotone_crossing` (isotonic), :func:`interpolated_crossing` (piecewise linear), :func:`logistic`,
  :class:`Logistic` and :func:`fit_logistic_curve` (free asymptotes);
- **classification** (the early predictor, :mod:`assign_add.studies.early`): :func:`fit_logistic_regression`
  (L2-penalised, penalty :data:`L2`), :func:`standardiser`, :func:`loo_accuracy`.

Small samples get exact answers: a rank correlation over at most ``EXACT_MAX_N`` pairs has its
p-value from every permutation, never from the large-sample approximation (with 3 seeds the
smallest two-sided p there is 1/3, not 0).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit, isotonic_regression
from scipy.stats import CensoredData, binom, fisher_exact, logrank

EXACT_MAX_N = 9  # up to 9! = 362,880 permutations: exact; above, the t approximation
L2 = 1.0  # the logistic regression's penalty λ (scikit-learn's default C = 1; not tuned)


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


def logrank_p(times_a: list[float], events_a: list[bool], times_b: list[float],
              events_b: list[bool]) -> float | None:
    """Two-sided log-rank p-value of sample a's times to event against sample b's (in
    ``assign-add survival-compare``, time to binding): ``times_a[i]`` is the event time of a's i-th member
    when ``events_a[i]``, else its censoring time.  None when no member of either sample has an event."""
    if not any(events_a) and not any(events_b):
        return None

    def data(times: list[float], events: list[bool]) -> CensoredData:
        return CensoredData(uncensored=[t for t, e in zip(times, events) if e],
                            right=[t for t, e in zip(times, events) if not e])

    with np.errstate(invalid="ignore", divide="ignore"):
        p = float(logrank(data(times_a, events_a), data(times_b, events_b)).pvalue)
    # zero variance (every member at risk had its event at the same time): the data cannot tell them apart
    return 1.0 if math.isnan(p) else p


@dataclass
class Logistic:
    lo: float
    hi: float
    x0: float
    scale: float

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return logistic(x, self.x0, self.scale, self.lo, self.hi)

    def crossing(self, level: float) -> float | None:
        """Where the curve reaches ``level`` (None if it never does)."""
        if self.hi <= level:
            return None
        if self.lo >= level:
            return -np.inf
        return float(self.x0 + self.scale * np.log((level - self.lo) / (self.hi - level)))


def logistic(x: np.ndarray, x0: float, scale: float, lo: float, hi: float = 1.0) -> np.ndarray:
    z = (np.asarray(x, dtype=float) - x0) / scale
    return lo + (hi - lo) * 0.5 * (1.0 + np.tanh(z / 2.0))  # the logistic, without overflow


def fit_logistic_curve(x: np.ndarray, y: np.ndarray, start: Logistic | None = None) -> Logistic | None:
    """Least-squares logistic with free asymptotes in [0, 1] (None when the fit fails)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    span = max(float(x.max() - x.min()), 1e-9)
    mid = float(x[np.argmin(np.abs(y - (y.min() + y.max()) / 2))])
    p0 = [mid, span / 10, float(y.min()), float(y.max())] if start is None else \
        [start.x0, start.scale, start.lo, start.hi]
    bounds = ([x.min() - span, span * 1e-4, 0.0, 0.0], [x.max() + span, span, 1.0, 1.0])
    p0 = list(np.clip(p0, bounds[0], bounds[1]))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            (x0, s, lo, hi), _ = curve_fit(lambda t, a, b, c, d: logistic(t, a, b, c, d), x, y, p0=p0,
                                           bounds=bounds, maxfev=20_000)
    except (RuntimeError, ValueError):
        return None
    return Logistic(float(min(lo, hi)), float(max(lo, hi)), float(x0), float(s))


def monotone_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique sorted x, non-decreasing least-squares fit); repeated x are averaged (weighted)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ux, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    means = np.bincount(inv, weights=y) / counts
    return ux, isotonic_regression(means, weights=counts.astype(float), increasing=True).x


def monotone_crossing(x: np.ndarray, y: np.ndarray, level: float) -> float | None:
    """The smallest x from which the monotone fit stays >= ``level`` (None if it never gets there)."""
    ux, fit = monotone_fit(x, y)
    above = np.nonzero(fit >= level - 1e-12)[0]
    return float(ux[above[0]]) if len(above) else None


def interpolated_crossing(x: np.ndarray, y: np.ndarray, level: float) -> float | None:
    """The first x where the piecewise-linear curve through (x, y) reaches ``level``."""
    order = np.argsort(x)
    x, y = np.asarray(x, float)[order], np.asarray(y, float)[order]
    for i in range(len(x)):
        if y[i] >= level:
            if i == 0:
                return float(x[0])
            return float(x[i - 1] + (level - y[i - 1]) * (x[i] - x[i - 1]) / (y[i] - y[i - 1]))
    return None


def fit_logistic_regression(x: np.ndarray, y: np.ndarray, l2: float = L2, iters: int = 50) -> tuple[np.ndarray, float]:
    """Weights and intercept minimising the summed log-loss + ``l2``/2·|w|² (intercept not penalised; with
    l2 = 1 this is scikit-learn's default C = 1), by Newton's method: the objective is convex, so the
    point where its gradient vanishes is the minimum."""
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    pen = np.full(d + 1, l2)
    pen[-1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(a @ w)))
        grad = a.T @ (p - y) + pen * w
        hess = (a * (p * (1 - p))[:, None]).T @ a + np.diag(pen) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return w[:-1], float(w[-1])


def standardiser(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of each column of ``x`` (an sd of 0 taken as 1, so a constant measure adds nothing)."""
    mu, sd = x.mean(0), x.std(0)
    sd[sd == 0] = 1.0
    return mu, sd


def loo_accuracy(x: np.ndarray, y: np.ndarray, l2: float = L2) -> float:
    """Leave-one-out accuracy of the standardised L2 logistic regression (standardised on the training
    fold only, so the held-out run leaks nothing)."""
    hits = 0
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        mu, sd = standardiser(x[keep])
        w, b = fit_logistic_regression((x[keep] - mu) / sd, y[keep], l2)
        guess = float(((x[i] - mu) / sd) @ w + b) > 0
        hits += guess == bool(y[i])
    return hits / len(y)


def holm(pvalues: list[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None and does not count as a test)."""
    idx = sorted((i for i, p in enumerate(pvalues) if p is not None), key=lambda i: pvalues[i])
    m, out, running = len(idx), [None] * len(pvalues), 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def fisher_power(n_arm: int, n_default: int, p_arm: float, p_default: float, alpha: float) -> float:
    """Exact power of the two-sided Fisher test at level ``alpha`` to find the arm better, when the arm binds with
    probability ``p_arm`` and the default with ``p_default`` (every outcome pair enumerated)."""
    pa, pd = binom.pmf(np.arange(n_arm + 1), n_arm, p_arm), binom.pmf(np.arange(n_default + 1), n_default, p_default)
    power = 0.0
    for a in range(n_arm + 1):
        for d in range(n_default + 1):
            if a / n_arm > d / n_default:
                p = fisher_exact([[a, n_arm - a], [d, n_default - d]]).pvalue
                if p < alpha:
                    power += pa[a] * pd[d]
    return float(power)
