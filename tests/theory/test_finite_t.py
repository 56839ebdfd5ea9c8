"""The regime of the large-T bulk (docs/model.md, "Where the large-T bulk holds")."""

from __future__ import annotations

import numpy as np
import pytest

from attnrmt.theory import bulk_density
from attnrmt.theory.finite_t import (
    FINITE_T_BOUND,
    finite_t_stieltjes,
    large_t_bulk_holds,
    tokens_per_vocab,
)


def test_tokens_per_vocab_is_t_delta_over_gamma() -> None:
    # V = d / delta tokens, N = d / gamma sequences of T tokens: N T / V = T delta / gamma
    d, delta, gamma, T = 1200, 0.4, 0.8, 5
    assert tokens_per_vocab(delta, gamma, T) == pytest.approx((d / gamma) * T / (d / delta))
    np.testing.assert_allclose(tokens_per_vocab([0.5, 0.5], [0.5, 1.0], 8), [8.0, 4.0])


def test_the_bound_is_eight_and_inclusive() -> None:
    assert FINITE_T_BOUND == 8.0  # the default run's delta = gamma = 0.5, T = 8 holds
    np.testing.assert_array_equal(
        large_t_bulk_holds(0.5, [0.5, 0.5001, 0.25, 1.0], [8, 8, 4, 16]),
        [True, False, True, True],
    )
    with pytest.raises(ValueError, match="gamma"):
        large_t_bulk_holds(0.5, 0.0, 8)


def test_at_t1_the_pooled_law_is_the_poisson_count_population() -> None:
    # T = 1: V A / kappa = diag(K_v / lam), K_v ~ Poisson(lam): the outer equation has the
    # exact solution m = 1/(-z + sum_k p_k a_k / (1 + delta a_k m)), a_k = k / lam
    delta, gamma, z = 0.5, 0.5, 2.0 + 0.5j
    lam = float(tokens_per_vocab(delta, gamma, 1))
    k = np.arange(60)
    pmf = np.exp(k * np.log(lam) - lam - np.cumsum(np.log(np.maximum(k, 1))))
    a, m = k / lam, -1.0 / z
    for _ in range(500):
        m = 0.5 * m + 0.5 / (-z + np.sum(pmf * a / (1.0 + delta * a * m)))
    solved = finite_t_stieltjes(z, delta, gamma, [1.0], population=2000, sweeps=40)[0]
    assert abs(solved - m) < 0.01 * abs(m)  # MC error ~ 1/sqrt(4e4) = 0.5%


def test_at_large_token_counts_the_density_is_the_large_t_bulk() -> None:
    # N T/V = 16: within 3% of MP_delta ⊠ MP_gamma inside the bulk (smoothing eta = 0.01)
    x = np.array([1.0, 2.0, 3.0])
    density = finite_t_stieltjes(x + 0.01j, 0.5, 0.5, np.full(16, 1 / 16), 1000, 40).imag / np.pi
    np.testing.assert_allclose(density, bulk_density(x, 0.5, 0.5), rtol=0.03)
