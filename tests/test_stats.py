"""stats.py: exact small-sample answers, checked by hand and against scipy's permutation test."""

from __future__ import annotations

import itertools

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
