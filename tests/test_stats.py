"""stats.py: exact small-sample answers, checked by hand and against scipy's permutation test; the curve fits,
the log-rank test and the standardiser on hand-built inputs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assign_add import stats


def test_spearman_with_three_seeds_has_p_one_third_at_best():
    rho, p, how = stats.spearman([1, 2, 3], [10, 20, 30])
    assert (rho, how) == (1.0, "exact") and p == pytest.approx(1 / 3), "3! = 6 orders, 2 as extreme (±1)"


def test_spearman_undefined_cases():
    assert stats.spearman([1, 2], [1, 2])[0] is None
    assert stats.spearman([1, 1, 1], [1, 2, 3])[2] == "a constant variable"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=3, max_size=7))
def test_exact_p_is_the_share_of_permutations_at_least_as_extreme(pairs):
    x, y = [a for a, _ in pairs], [b for _, b in pairs]
    rho, p, how = stats.spearman(x, y)
    if rho is None:
        return
    from scipy.stats import spearmanr

    null = [spearmanr(x, perm).statistic for perm in itertools.permutations(y)]
    assert how == "exact"
    assert rho == pytest.approx(spearmanr(x, y).statistic)
    assert p == pytest.approx(np.mean(np.abs(null) >= abs(rho) - 1e-12))


def test_large_n_uses_the_t_approximation_as_scipy():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)
    rho, p, how = stats.spearman(x, y)
    ref = spearmanr(x, y)
    assert how == "t approximation" and rho == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)


def test_wilson_interval_by_hand():
    assert stats.wilson_interval(4, 6) == pytest.approx((0.2999, 0.9032), abs=1e-3)
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = stats.wilson_interval(16, 16)
    assert hi == 1.0 and lo == pytest.approx(0.806, abs=1e-3)


def test_monotone_fit_pools_a_dip_and_the_crossing_is_where_the_fit_stays_above():
    x, y = [0.1, 0.2, 0.3, 0.4, 0.5], [0.1, 0.5, 0.95, 0.85, 1.0]
    ux, fit = stats.monotone_fit(x, y)
    assert list(ux) == x and list(fit) == pytest.approx([0.1, 0.5, 0.9, 0.9, 1.0])  # 0.95 and 0.85 pooled
    assert stats.monotone_crossing(x, y, 0.9) == 0.3  # the pooled 0.9 (in floats 0.8999…) counts as reached
    assert stats.monotone_crossing(x, y, 0.95) == 0.5  # the raw 0.95 at 0.3 is not held: the dip pulls it down
    assert stats.monotone_crossing(x, y, 1.01) is None
    assert stats.interpolated_crossing(x, y, 0.9) == pytest.approx(0.2 + 0.4 / 0.45 * 0.1)  # ignores the dip


def test_monotone_fit_averages_repeated_x():
    ux, fit = stats.monotone_fit([0.0, 0.0, 1.0], [0.0, 1.0, 1.0])
    assert list(ux) == [0.0, 1.0] and list(fit) == [0.5, 1.0]


def test_logistic_crossing_and_fit_of_a_noise_free_curve():
    curve = stats.Logistic(lo=0.0, hi=1.0, x0=0.5, scale=0.1)
    assert curve.crossing(0.5) == 0.5 and curve.crossing(0.9) == pytest.approx(0.5 + 0.1 * math.log(9))
    assert curve.crossing(1.0) is None and stats.Logistic(0.95, 1.0, 0.5, 0.1).crossing(0.9) == -np.inf
    grid = np.linspace(0, 1, 21)
    fit = stats.fit_logistic_curve(grid, stats.logistic(grid, 0.3, 0.05, 0.1, 0.95))
    assert (fit.lo, fit.hi, fit.x0, fit.scale) == pytest.approx((0.1, 0.95, 0.3, 0.05), abs=1e-6)


def test_logrank_p_identical_tied_and_separated_samples():
    events = [True] * 5
    assert stats.logrank_p([1, 2, 3], events[:3], [1, 2, 3], events[:3]) == 1.0
    assert stats.logrank_p([5, 5], [True, True], [5, 5], [True, True]) == 1.0  # zero variance: NaN read as 1
    assert stats.logrank_p([5, 6], [False, False], [7], [False]) is None  # no event in either sample
    # every event of a before any of b: each of a's events has k of a (k = 5 … 1) and 5 of b at risk
    expected = sum(k / (k + 5) for k in range(1, 6))
    variance = sum(5 * k / (k + 5) ** 2 for k in range(1, 6))
    z = (5 - expected) / math.sqrt(variance)
    p = stats.logrank_p([1, 2, 3, 4, 5], events, [10, 11, 12, 13, 14], events)
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-9) and p == pytest.approx(0.00184, abs=1e-5)


def test_standardiser_takes_a_constant_column_sd_as_one():
    mu, sd = stats.standardiser(np.array([[1.0, 5.0], [3.0, 5.0]]))
    assert list(mu) == [2.0, 5.0] and list(sd) == [1.0, 1.0]
