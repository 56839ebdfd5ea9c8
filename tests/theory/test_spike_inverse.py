"""The theory's own checks of the spike maps (docs/model.md, "Spikes", "Inverse maps"):
the mean spike with pooling weights whose sum is not 1, and the inverse outlier maps as
exact inverses of the forward ones."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np
import pytest

from attnrmt.theory import spike_outliers
from attnrmt.theory.spike import mean_spike, theta_from_population, theta_from_sample


@pytest.mark.parametrize("sigma", [0.6, 1.7, -2.5])
def test_mean_spike_strength_is_sigma_squared_delta_over_kappa(sigma: float) -> None:
    """``theta_mean = sigma^2 delta / kappa`` for weights whose sum ``sigma`` is not 1
    (optimal or custom weights); mean pooling has ``sigma = 1`` and cannot tell
    ``sigma^2`` from ``sigma``."""
    delta, gamma, kappa = 0.5, 0.5, 0.1
    out = mean_spike(delta, gamma, sigma=sigma, kappa=kappa)
    ref = spike_outliers(sigma**2 * delta / kappa, delta, gamma, kappa=kappa)
    np.testing.assert_allclose(astuple(out), astuple(ref), rtol=1e-12)
    assert np.isfinite(out.population_outlier)  # the spike is an outlier at each sigma


@pytest.mark.parametrize(("delta", "gamma"), [(0.5, 0.5), (0.2, 1.5), (2.0, 0.3)])
def test_inverse_maps_undo_the_outlier_maps(delta: float, gamma: float) -> None:
    """Both inversions return the spike strength that produced the outlier, to round-off,
    on either side of every threshold (the root above the edge, not the other one)."""
    kappa = 0.7
    theta = np.linspace(0.1, 12.0, 60)
    out = spike_outliers(theta, delta, gamma, kappa=kappa)
    pop, sam = np.asarray(out.population_outlier), np.asarray(out.sample_outlier)
    have_pop, have_sam = np.isfinite(pop), np.isfinite(sam)
    assert have_pop.sum() > 20 and have_sam.sum() > 20
    np.testing.assert_allclose(
        theta_from_population(pop[have_pop], delta, kappa), theta[have_pop], rtol=1e-9
    )
    np.testing.assert_allclose(
        theta_from_sample(sam[have_sam], delta, gamma, kappa), theta[have_sam], rtol=1e-8
    )


def test_a_finite_d_edge_maps_the_noise_tail_to_the_critical_value() -> None:
    # docs/model.md, "What replaces the edge": at or below `edge` the critical theta, above
    # it the same root as without it, and a NaN edge is the large-T map
    delta, gamma, kappa = 0.4, 0.8, 0.37
    lam = kappa * np.array([4.0, 4.9, 5.0, 5.2, 8.0])
    plain = theta_from_sample(lam, delta, gamma, kappa)
    edged = theta_from_sample(lam, delta, gamma, kappa, edge=5.1)
    np.testing.assert_array_equal(theta_from_sample(lam, delta, gamma, kappa, np.nan), plain)
    np.testing.assert_allclose(edged[:3], plain[0])  # 4.0 is inside the large-T edge
    np.testing.assert_array_equal(edged[3:], plain[3:])
    assert plain[1] > plain[0]
