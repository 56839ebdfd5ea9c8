"""The regime of the large-T bulk (docs/model.md, "Where the large-T bulk holds")."""

from __future__ import annotations

import numpy as np
import pytest

from attnrmt.theory.finite_t import FINITE_T_BOUND, large_t_bulk_holds, tokens_per_vocab


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
