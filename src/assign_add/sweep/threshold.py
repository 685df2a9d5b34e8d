"""Where does a swept score cross a level?  A logistic fit with a bootstrap interval.

The model is ``y = lo + (hi − lo) / (1 + exp(−(x − x0) / s))`` with ``lo`` the chance floor and
``hi = 1``, fitted by least squares (a grid over (x0, log s) refined by Nelder–Mead-free
coordinate search, all numpy).  The threshold is where the fitted curve crosses ``level``
(default 0.9).  The interval comes from resampling seeds (with several seeds: each replicate
averages a resample of the seeds' curves) or, with one seed, from resampling the points.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class Threshold:
    estimate: float | None
    low: float | None
    high: float | None
    level: float
    x0: float | None
    scale: float | None
    method: str
    interpolated: float | None = None  # first crossing of the mean curve, linear between points

    def to_json(self) -> dict:
        return asdict(self)


def logistic(x: np.ndarray, x0: float, scale: float, lo: float, hi: float = 1.0) -> np.ndarray:
    z = (np.asarray(x, dtype=float) - x0) / scale
    return lo + (hi - lo) * 0.5 * (1.0 + np.tanh(z / 2.0))  # the logistic, without overflow


def fit_logistic(x: np.ndarray, y: np.ndarray, lo: float = 0.0) -> tuple[float, float]:
    """Least-squares (x0, scale) for the logistic with a fixed floor ``lo`` and ceiling 1."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    span = max(x.max() - x.min(), 1e-9)
    best = (np.inf, x.mean(), span / 10)
    x0s = np.linspace(x.min() - 0.25 * span, x.max() + 0.25 * span, 121)
    scales = span * np.logspace(-3, 0.5, 60)
    for s in scales:
        err = ((logistic(x[None, :], x0s[:, None], s, lo) - y[None, :]) ** 2).sum(axis=1)
        i = int(err.argmin())
        if err[i] < best[0]:
            best = (float(err[i]), float(x0s[i]), float(s))
    _, x0, s = best
    step_x, step_s = (x0s[1] - x0s[0]), 1.2
    for _ in range(60):  # refine by shrinking coordinate search
        improved = False
        for cx, cs in ((x0 + step_x, s), (x0 - step_x, s), (x0, s * step_s), (x0, s / step_s)):
            err = float(((logistic(x, cx, cs, lo) - y) ** 2).sum())
            if err < best[0]:
                best, x0, s, improved = (err, cx, cs), cx, cs, True
        if not improved:
            step_x, step_s = step_x / 2, step_s ** 0.5
    return x0, s


def crossing(x0: float, scale: float, level: float, lo: float) -> float | None:
    if not (lo < level < 1.0):
        return None
    return float(x0 + scale * np.log((level - lo) / (1.0 - level)))


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


def estimate_threshold(
    x: np.ndarray, scores: np.ndarray, level: float = 0.9, lo: float = 0.0, n_boot: int = 500, seed: int = 0
) -> Threshold:
    """``scores`` is [seeds, points] (nan where missing); ``x`` the swept values [points]."""
    x = np.asarray(x, float)
    scores = np.atleast_2d(np.asarray(scores, float))
    mean = np.nanmean(scores, axis=0)
    ok = np.isfinite(mean)
    if ok.sum() < 3:
        return Threshold(None, None, None, level, None, None, "too few points")
    x0, s = fit_logistic(x[ok], mean[ok], lo)
    est = crossing(x0, s, level, lo)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        if scores.shape[0] > 1:
            pick = scores[rng.integers(0, scores.shape[0], scores.shape[0])]
            ys = np.nanmean(pick, axis=0)
            xs, ys = x[ok], ys[ok]
        else:
            idx = rng.integers(0, ok.sum(), ok.sum())
            xs, ys = x[ok][idx], mean[ok][idx]
        if len(np.unique(xs)) < 3:
            continue
        bx0, bs = fit_logistic(xs, ys, lo)
        c = crossing(bx0, bs, level, lo)
        if c is not None:
            boots.append(c)
    method = "bootstrap over seeds" if scores.shape[0] > 1 else "bootstrap over points (one seed)"
    low, high = (float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))) if boots else (None, None)
    return Threshold(est, low, high, level, x0, s, method, interpolated_crossing(x[ok], mean[ok], level))
