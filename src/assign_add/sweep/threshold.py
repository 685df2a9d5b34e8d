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
values; duplicates are averaged), and the method says which.  The fits themselves
(:func:`~assign_add.stats.monotone_crossing`, :func:`~assign_add.stats.fit_logistic_curve`) live in
:mod:`assign_add.stats`.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np

from assign_add.stats import fit_logistic_curve, monotone_crossing, monotone_fit

N_BOOT = 1000  # replicates for the monotone estimate's interval
N_BOOT_LOGISTIC = 200  # the logistic refits each replicate (slower); its interval uses the first 200


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
