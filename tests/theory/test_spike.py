"""Tests of the spike predictions (docs/model.md, "Spikes", "Textbook limits").

Tolerances: textbook limits are evaluated at ratio 1e-12 (the exact answer differs from
the limit by O(1e-12)) and compared to 1e-8; algebraic identities (thresholds plugged
back, broadcasting vs scalar calls) to 1e-12 relative, i.e. round-off.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnrmt.theory import (
    VARIANTS,
    SpikeOutliers,
    SpikePrediction,
    bulk_edges,
    critical_u,
    mean_spike,
    spike,
    spike_outliers,
)

TINY = 1e-12


# --- textbook limits (docs/model.md, "Textbook limits") -----------------------------------


@pytest.mark.parametrize("gamma", [0.1, 0.5, 2.0])
@pytest.mark.parametrize("excess", [1.5, 3.0, 10.0])
def test_infinite_vocabulary_is_bbp(gamma: float, excess: float) -> None:
    """delta -> 0: population spike 1 + l gives the BBP outlier and overlap."""
    ell = np.sqrt(gamma) * excess  # above the BBP threshold sqrt(gamma)
    out = spike_outliers(ell + TINY, TINY, gamma)  # theta - delta = l
    assert out.population_outlier == pytest.approx(1 + ell, abs=1e-8)
    assert out.population_overlap == pytest.approx(1.0, abs=1e-8)
    assert out.sample_outlier == pytest.approx((1 + ell) * (1 + gamma / ell), abs=1e-8)
    assert out.sample_overlap == pytest.approx((1 - gamma / ell**2) / (1 + gamma / ell), abs=1e-8)


@pytest.mark.parametrize("gamma", [0.1, 0.5, 2.0])
def test_infinite_vocabulary_bbp_threshold(gamma: float) -> None:
    assert 1 / critical_u(TINY, gamma) == pytest.approx(np.sqrt(gamma), abs=1e-8)
    below = spike_outliers(np.sqrt(gamma) * (1 - 1e-6), TINY, gamma)
    above = spike_outliers(np.sqrt(gamma) * (1 + 1e-6), TINY, gamma)
    assert np.isnan(below.sample_outlier) and below.sample_overlap == 0.0
    assert np.isfinite(above.sample_outlier) and above.sample_overlap > 0.0


@pytest.mark.parametrize("delta", [0.1, 0.5, 2.0])
def test_no_sampling_noise_gives_population(delta: float) -> None:
    """gamma -> 0: S -> Sigma_E, sample outlier/overlap equal population ones."""
    theta = np.array([delta + 1.2 * np.sqrt(delta), delta + 5.0])
    out = spike_outliers(theta, delta, TINY, kappa=0.3)
    np.testing.assert_allclose(out.sample_outlier, out.population_outlier, rtol=1e-8)
    np.testing.assert_allclose(out.sample_overlap, out.population_overlap, atol=1e-8)
    assert 1 / critical_u(delta, TINY) == pytest.approx(np.sqrt(delta), abs=1e-8)


@pytest.mark.parametrize("delta", [0.1, 0.5, 2.0])
def test_single_token_threshold_is_sqrt_delta(delta: float) -> None:
    """T = 1 (alpha = kappa): the table's own spiked covariance, snr > sqrt(delta)."""
    prediction = spike(delta, 0.5, 1.0, alpha=0.7, kappa=0.7, variant="finite_vocab")
    assert prediction.threshold_snr_population == pytest.approx(np.sqrt(delta), rel=1e-12)
    paper = spike(delta, 0.5, 1.0, alpha=0.7, kappa=0.7, variant="paper")
    assert paper.threshold_snr_population == pytest.approx(delta + np.sqrt(delta), rel=1e-12)


# --- threshold behaviour ------------------------------------------------------------------


@pytest.mark.parametrize(("delta", "gamma"), [(0.5, 0.5), (0.1, 2.0), (3.0, 0.2)])
def test_outliers_meet_edges_at_thresholds(delta: float, gamma: float) -> None:
    """At the population threshold ell -> (1+sqrt(delta))^2 kappa, overlap -> 0; at the
    sample threshold lambda -> kappa * upper bulk edge, overlap -> 0 (relative step 1e-9,
    so the outlier moves by O(1e-9) and the overlap, linear in the distance, too)."""
    kappa = 0.25
    theta_population = delta + np.sqrt(delta)
    out = spike_outliers(theta_population * (1 + 1e-9), delta, gamma, kappa)
    assert out.population_outlier == pytest.approx(kappa * (1 + np.sqrt(delta)) ** 2, rel=1e-7)
    assert out.population_overlap == pytest.approx(0.0, abs=1e-7)
    theta_sample = delta + 1 / critical_u(delta, gamma)
    out = spike_outliers(theta_sample * (1 + 1e-9), delta, gamma, kappa)
    assert out.sample_outlier == pytest.approx(kappa * bulk_edges(delta, gamma)[1], rel=1e-7)
    assert out.sample_overlap == pytest.approx(0.0, abs=1e-7)
    below = spike_outliers(theta_sample * (1 - 1e-9), delta, gamma, kappa)
    assert np.isnan(below.sample_outlier) and below.sample_overlap == 0.0
    assert np.isfinite(below.population_outlier)


def test_no_outlier_when_theta_at_or_below_delta() -> None:
    out = spike_outliers([-1.0, 0.0, 0.5], 0.5, 0.5)
    assert np.all(np.isnan(out.u))
    assert np.all(np.isnan(out.population_outlier)) and np.all(np.isnan(out.sample_outlier))
    np.testing.assert_array_equal(out.population_overlap, 0.0)
    np.testing.assert_array_equal(out.sample_overlap, 0.0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_thresholds_plug_back(variant: str) -> None:
    delta, gamma, alpha, kappa = 0.5, 0.7, 0.3, 0.125
    p = spike(delta, gamma, 1.0, alpha, kappa, variant=variant)
    bias = delta if variant == "finite_vocab" else 0.0
    theta_at = (alpha / kappa) * (
        np.array([p.threshold_snr_population, p.threshold_snr_sample]) + bias
    )
    np.testing.assert_allclose(
        theta_at, [delta + np.sqrt(delta), delta + 1 / critical_u(delta, gamma)], rtol=1e-12
    )
    assert p.threshold_snr_population < p.threshold_snr_sample


def test_finite_vocab_threshold_can_be_negative() -> None:
    """Large alpha/kappa: the class-mean structure alone is detectable (docs/model.md, "Spikes")."""
    p = spike(0.5, 0.5, 0.0, alpha=2.5, kappa=1.0, variant="finite_vocab")
    assert p.threshold_snr_population < 0
    assert p.theta == pytest.approx(1.25)
    assert np.isfinite(p.population_outlier)
    assert p.population_overlap == 0.0  # snr = 0: the class-mean direction carries no mu


def test_zero_alpha_means_no_signal() -> None:
    p = spike(0.5, 0.5, 4.0, alpha=0.0, kappa=1.0, variant="paper")
    assert p.theta == 0.0
    assert np.isinf(p.threshold_snr_population) and np.isinf(p.threshold_snr_sample)
    assert np.isnan(p.sample_outlier)


def test_variants_differ_by_theta_and_alignment() -> None:
    delta, gamma, snr, alpha, kappa = 0.5, 0.5, 3.0, 0.3125, 0.125
    paper = spike(delta, gamma, snr, alpha, kappa, variant="paper")
    finite = spike(delta, gamma, snr, alpha, kappa, variant="finite_vocab")
    assert paper.theta == pytest.approx(2.5 * snr)
    assert finite.theta == pytest.approx(2.5 * (snr + delta))
    raw = spike_outliers(finite.theta, delta, gamma, kappa)
    alignment = snr / (snr + delta)
    assert finite.sample_outlier == pytest.approx(raw.sample_outlier, rel=1e-14)
    assert finite.sample_overlap == pytest.approx(raw.sample_overlap * alignment, rel=1e-14)
    assert finite.population_overlap == pytest.approx(raw.population_overlap * alignment, rel=1e-14)


def test_monotone_in_snr() -> None:
    snr = np.linspace(0.0, 20.0, 401)
    p = spike(0.5, 0.5, snr, 0.3125, 0.125, variant="paper")
    present = np.isfinite(p.sample_outlier)
    assert np.all(np.diff(p.sample_outlier[present]) > 0)
    assert np.all(np.diff(p.sample_overlap) >= 0)
    assert np.all(p.sample_overlap <= p.population_overlap + 1e-15)
    assert np.all((p.sample_overlap >= 0) & (p.population_overlap <= 1))


def test_mean_spike_strength() -> None:
    """theta_mean = sigma^2 delta / kappa; mean pooling over T gives T delta."""
    T, delta, gamma = 8, 0.5, 0.5
    out = mean_spike(delta, gamma, sigma=1.0, kappa=1.0 / T)
    ref = spike_outliers(T * delta, delta, gamma, kappa=1.0 / T)
    assert out == ref
    assert out.u == pytest.approx(1 / (T * delta - delta))


# --- vectorisation, types, validation ------------------------------------------------------


def test_broadcasting_matches_scalar_calls() -> None:
    delta = np.array([0.2, 0.5, 2.0]).reshape(3, 1, 1)
    gamma = np.array([0.3, 1.5]).reshape(1, 2, 1)
    snr = np.array([0.0, 0.5, 2.0, 10.0]).reshape(1, 1, 4)
    for variant in VARIANTS:
        p = spike(delta, gamma, snr, 0.4, 0.125, variant=variant)
        assert isinstance(p, SpikePrediction)
        for name in ("theta", "sample_outlier", "sample_overlap", "threshold_snr_sample"):
            assert getattr(p, name).shape == (3, 2, 4)
        for i, j, k in np.ndindex(3, 2, 4):
            q = spike(
                float(delta[i, 0, 0]),
                float(gamma[0, j, 0]),
                float(snr[0, 0, k]),
                0.4,
                0.125,
                variant=variant,
            )
            for name in SpikePrediction.__dataclass_fields__:
                np.testing.assert_allclose(getattr(p, name)[i, j, k], getattr(q, name), rtol=1e-12)


def test_scalar_inputs_give_scalars() -> None:
    out = spike_outliers(3.0, 0.5, 0.5)
    assert isinstance(out, SpikeOutliers)
    assert all(np.ndim(v) == 0 for v in vars(out).values())
    p = spike(0.5, 0.5, 1.0, 1.0, 1.0)
    assert all(np.ndim(v) == 0 for v in vars(p).values())


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"delta": 0.0}, "delta"),
        ({"delta": -1.0}, "delta"),
        ({"gamma": 0.0}, "gamma"),
        ({"snr": -0.1}, "snr"),
        ({"alpha": -0.1}, "alpha"),
        ({"kappa": 0.0}, "kappa"),
        ({"snr": np.nan}, "snr"),
        ({"delta": [0.5, np.nan]}, "delta"),
        ({"variant": "exact"}, "variant"),
    ],
)
def test_spike_rejects_bad_input(kwargs: dict, name: str) -> None:
    args = {"delta": 0.5, "gamma": 0.5, "snr": 1.0, "alpha": 1.0, "kappa": 1.0} | kwargs
    with pytest.raises(ValueError, match=rf"^{name}="):
        spike(**args)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: spike_outliers(np.nan, 0.5, 0.5), "theta"),
        (lambda: spike_outliers(1.0, 0.5, 0.5, kappa=-1.0), "kappa"),
        (lambda: mean_spike(0.5, 0.5, np.inf, 1.0), "sigma"),
        (lambda: mean_spike(0.5, 0.0, 1.0, 1.0), "gamma"),
    ],
)
def test_outlier_functions_reject_bad_input(call, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}="):
        call()


def test_weight_formulas_reexported() -> None:
    import attnrmt.theory as theory
    from attnrmt.model import weights

    for name in ("optimal_weights", "harmonic_weights", "causal_limit_weights"):
        assert getattr(theory, name) is getattr(weights, name)
    with pytest.raises(AttributeError):
        _ = theory.no_such_formula
