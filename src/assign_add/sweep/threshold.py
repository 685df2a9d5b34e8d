"""Where does a swept score reach a level (90 %)?  Two estimators that follow real curves.

- **Monotone (isotonic) fit** of the mean curve (``scipy.optimize.isotonic_regression``): the
  threshold is the smallest swept value from which the non-decreasing fit stays at or above the
  level.  It makes no assumption about the curve's shape, so a dip, a plateau below 1 or a slow
  rise do not bend it; its resolution is the grid.  This is the estimate verdicts use.
- **Logistic with free lower and upper asymptotes**, ``y = lo + (hi − lo) / (1 + exp(−(x − x0)/s))``,
  fitted by ``scipy.optimize.curve_fit``; it crosses the level only when ``hi`` exceeds it.  Shown
  beside the monotone estimate; it interpolates between grid values.

Intervals are percentile bootstraps: over seeds when there are several (each replicate averages a
resample of the seeds' curves), over points with one seed (each replicate resamples the swept
values; duplicates are averaged), and the method says which.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit, isotonic_regression

N_BOOT = 1000  # replicates for the monotone estimate's interval
N_BOOT_LOGISTIC = 200  # the logistic refits each replicate (slower); its interval uses the first 200


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


@dataclass
class Threshold:
    estimate: float | None  # monotone fit: smallest value from which it stays >= level
    low: float | None
    high: float | None
    level: float
    method: str  # how the interval was bootstrapped
    logistic: float | None = None  # the free-asymptote logistic's crossing
    logistic_low: float | None = None
    logistic_high: float | None = None
    fit: dict | None = None  # the logistic's parameters on the mean curve
    monotone: dict | None = None  # {'x': swept values, 'y': the monotone fit of the mean there}
    no_crossing_share: float = 0.0  # bootstrap replicates whose monotone fit never reaches the level

    def to_json(self) -> dict:
        return asdict(self)


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


def _interval(values: list[float]) -> tuple[float | None, float | None]:
    finite = [v for v in values if v is not None and np.isfinite(v)]
    if not finite:
        return None, None
    return float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))


def estimate_threshold(x: np.ndarray, scores: np.ndarray, level: float = 0.9, n_boot: int = N_BOOT,
                       seed: int = 0) -> Threshold:
    """``scores`` is [seeds, points] (nan where missing); ``x`` the swept values [points]."""
    x = np.asarray(x, float)
    scores = np.atleast_2d(np.asarray(scores, float))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-nan columns (unfinished points)
        mean = np.nanmean(scores, axis=0)
    ok = np.isfinite(mean)
    if ok.sum() < 3:
        return Threshold(None, None, None, level, "too few points")
    xs, ys = x[ok], mean[ok]
    est = monotone_crossing(xs, ys, level)
    fit = fit_logistic_curve(xs, ys)
    rng = np.random.default_rng(seed)
    seeds_ok = scores[:, ok]
    several = int(np.isfinite(seeds_ok).all(axis=1).sum()) > 1
    boot_mono: list[float | None] = []
    boot_logi: list[float | None] = []
    for i in range(n_boot):
        if several:
            pick = seeds_ok[rng.integers(0, len(seeds_ok), len(seeds_ok))]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                bx, by = xs, np.nanmean(pick, axis=0)
        else:
            idx = rng.integers(0, len(xs), len(xs))
            bx, by = xs[idx], ys[idx]
        if len(np.unique(bx)) < 3:
            continue
        boot_mono.append(monotone_crossing(bx, by, level))
        if i < N_BOOT_LOGISTIC:
            bfit = fit_logistic_curve(bx, by, start=fit)
            boot_logi.append(bfit.crossing(level) if bfit else None)
    low, high = _interval(boot_mono)
    llow, lhigh = _interval(boot_logi)
    method = "bootstrap over seeds" if several else "bootstrap over points (one seed)"
    logi = fit.crossing(level) if fit else None
    return Threshold(
        est, low, high, level, method,
        logistic=None if logi is None or not np.isfinite(logi) else logi, logistic_low=llow, logistic_high=lhigh,
        fit=asdict(fit) if fit else None,
        monotone=dict(zip(("x", "y"), (list(map(float, a)) for a in monotone_fit(xs, ys)))),
        no_crossing_share=float(np.mean([b is None for b in boot_mono])) if boot_mono else 0.0,
    )
