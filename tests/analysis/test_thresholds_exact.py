"""Exact values of the threshold estimator's small pieces (docs/thresholds.md,
"Confidence intervals", "Shared slope") on fixed inputs, so that a changed tail or
degree of freedom cannot hide behind a statistical tolerance."""

from __future__ import annotations

import numpy as np

from attnrmt.analysis.thresholds import _crossing_ci, _pooled_mean_variance


def test_crossing_ci_is_the_central_percentile_interval_widened() -> None:
    """On the bootstrap vector 0, 0.001, ..., 1 the 95% percentile interval is exactly
    [0.025, 0.975]; widened about the estimate 0.5 by sqrt(n/(n-1)) for n = 5."""
    boot = np.linspace(0.0, 1.0, 1001)
    ci = _crossing_ci(boot, 0.5, n_rep=5, n_boot=boot.size, level=0.95)
    half = np.sqrt(5 / 4) * 0.475
    np.testing.assert_allclose(ci, [0.5 - half, 0.5 + half], rtol=0, atol=1e-12)
    ci90 = _crossing_ci(boot, 0.5, n_rep=5, n_boot=boot.size, level=0.9)
    np.testing.assert_allclose(ci90, [0.5 - np.sqrt(5 / 4) * 0.45, 0.5 + np.sqrt(5 / 4) * 0.45])


def test_crossing_ci_contains_its_estimate() -> None:
    """Resamples all above the estimate (a split fit with few replicates can do that): the
    interval is stretched down to the estimate, its upper end unchanged."""
    boot = np.linspace(1.0, 2.0, 1001)
    ci = _crossing_ci(boot, 0.5, n_rep=1, n_boot=boot.size, level=0.95)
    np.testing.assert_allclose(ci, [0.5, 1.975], rtol=0, atol=1e-12)


def test_pooled_mean_variance_is_the_unbiased_variance_of_a_mean() -> None:
    """One detected point: ``var(ddof=1) / n``; several with equal counts: the mean of
    those; undetected points and missing replicates are left out."""
    rng = np.random.default_rng(3)
    y = rng.normal(size=(2, 4, 6))
    y[1, 2, 5] = np.nan  # a missing replicate at a detected point of d = 1
    detected = np.array([[False, False, False, True], [False, False, True, True]])
    got = _pooled_mean_variance(y, detected)
    one = np.var(y[0, 3], ddof=1) / 6
    np.testing.assert_allclose(got[0], one, rtol=1e-12)
    at_2, at_3 = y[1, 2, :5], y[1, 3]
    squares = ((at_2 - at_2.mean()) ** 2).sum() + ((at_3 - at_3.mean()) ** 2).sum()
    np.testing.assert_allclose(got[1], squares / (4 + 5) / 5.5, rtol=1e-12)
