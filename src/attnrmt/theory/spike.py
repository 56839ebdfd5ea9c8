"""Rank-one spikes on the ``MP_delta`` bulk sampled with ratio ``gamma``: outliers, overlaps,
thresholds and their inverse maps (docs/model.md, "Spike formulas", "Two variants of the
theory", "Thresholds", "Uncentred mean spike", "Inverse maps"). Broadcast over numpy arrays;
eigenvalues in units of ``S``, strengths ``theta`` in units of ``kappa``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from attnrmt._validation import check_choice, check_finite_array, check_positive
from attnrmt.contract import VARIANTS
from attnrmt.theory.bulk import bisect, critical_u_of_arrays, scalar_or_array

#: Bisection steps of :func:`theta_from_sample` (halves the bracket to machine precision).
_BISECTION_STEPS = 100


Float = np.float64 | NDArray[np.float64]


@dataclass(frozen=True)
class SpikeOutliers:
    """Outliers of one rank-one spike of strength ``theta`` (docs/model.md, "Spike formulas").

    Attributes
    ----------
    u : ndarray
        ``1/(theta - delta)``; NaN when ``theta <= delta``.
    population_outlier : ndarray
        Top eigenvalue of the population covariance (units of ``S``); NaN when absent.
    sample_outlier : ndarray
        Top eigenvalue of ``S`` separated from the bulk (units of ``S``); NaN when absent.
    population_overlap : ndarray
        Squared overlap of the population eigenvector with the spike direction; 0 when absent.
    sample_overlap : ndarray
        Squared overlap of the sample eigenvector with the spike direction; 0 below threshold.
    """

    u: Float
    population_outlier: Float
    sample_outlier: Float
    population_overlap: Float
    sample_overlap: Float


@dataclass(frozen=True)
class SpikePrediction:
    """Signal-spike prediction for one variant (docs/model.md, "Two variants of the theory").

    Attributes
    ----------
    theta : ndarray
        Spike strength in units of ``kappa``.
    population_outlier, sample_outlier : ndarray
        Outlier eigenvalues (units of ``S``), NaN when absent.
    population_overlap, sample_overlap : ndarray
        Squared overlaps of the top population / sample eigenvector with ``u = mu/||mu||``;
        0 when absent.
    threshold_snr_population, threshold_snr_sample : ndarray
        ``snr`` at which ``theta = delta + sqrt(delta)`` resp. ``theta = delta + 1/u*``.
        May be negative (``finite_vocab`` with large ``alpha/kappa``): reported as computed.
        ``inf`` when ``alpha == 0``.
    """

    theta: Float
    population_outlier: Float
    sample_outlier: Float
    population_overlap: Float
    sample_overlap: Float
    threshold_snr_population: Float
    threshold_snr_sample: Float


def _outliers(theta: NDArray, delta: NDArray, gamma: NDArray, kappa: NDArray) -> dict:
    """Spike formulas (docs/model.md, "Spike formulas") on validated float arrays."""
    theta, delta, gamma, kappa = np.broadcast_arrays(theta, delta, gamma, kappa)
    excess = theta - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(excess > 0.0, 1.0 / excess, np.nan)
        population_present = excess > np.sqrt(delta)  # u < 1/sqrt(delta)
        sample_present = (excess > 0.0) & (u < critical_u_of_arrays(delta, gamma))
        lifted = (1.0 + u) * (1.0 + delta * u) / u
        population_outlier = np.where(population_present, kappa * lifted, np.nan)
        sample_outlier = np.where(sample_present, kappa * lifted * (1.0 + gamma * u), np.nan)
        population_overlap = np.where(population_present, 1.0 - delta * u * u, 0.0)
        c = delta + gamma + delta * gamma
        sample_overlap_value = (1.0 - c * u * u - 2.0 * delta * gamma * u**3) / (1.0 + gamma * u)
        sample_overlap = np.where(sample_present, sample_overlap_value, 0.0)
    return {
        "u": u,
        "population_outlier": population_outlier,
        "sample_outlier": sample_outlier,
        # round-off at the threshold must not give a tiny negative overlap
        "population_overlap": np.maximum(population_overlap, 0.0),
        "sample_overlap": np.maximum(sample_overlap, 0.0),
    }


def _as_outliers(fields: dict) -> SpikeOutliers:
    return SpikeOutliers(**{name: scalar_or_array(value) for name, value in fields.items()})


def spike_outliers(
    theta: ArrayLike, delta: ArrayLike, gamma: ArrayLike, kappa: ArrayLike = 1.0
) -> SpikeOutliers:
    """Outliers and overlaps of a rank-one spike of strength ``theta`` (units of ``kappa``,
    any finite real) on the bulk of ratios ``delta``, ``gamma`` > 0, eigenvalues times
    ``kappa`` > 0 (docs/model.md, "Spike formulas"). Broadcast; O(size x Newton steps)."""
    theta_arr = check_finite_array("theta", theta)
    delta_arr = check_positive("delta", delta)
    gamma_arr = check_positive("gamma", gamma)
    kappa_arr = check_positive("kappa", kappa)
    return _as_outliers(_outliers(theta_arr, delta_arr, gamma_arr, kappa_arr))


def spike(
    delta: ArrayLike,
    gamma: ArrayLike,
    snr: ArrayLike,
    alpha: ArrayLike,
    kappa: ArrayLike,
    variant: str = "finite_vocab",
) -> SpikePrediction:
    """Signal-spike prediction of ``variant`` in ``VARIANTS`` from the ratios ``delta``,
    ``gamma`` > 0, ``snr = ||mu||^2 >= 0`` and the pooling scalars ``alpha = w^T R w >= 0``,
    ``kappa = ||w||^2 > 0`` (docs/model.md, "Two variants of the theory", "Thresholds").
    Broadcast; ValueError naming a bad argument. O(size x Newton steps)."""
    delta_arr = check_positive("delta", delta)
    gamma_arr = check_positive("gamma", gamma)
    snr_arr = check_positive("snr", snr, allow_zero=True)
    alpha_arr = check_positive("alpha", alpha, allow_zero=True)
    kappa_arr = check_positive("kappa", kappa)
    check_choice("variant", variant, VARIANTS)

    ratio = alpha_arr / kappa_arr
    bias = delta_arr if variant == "finite_vocab" else 0.0
    theta = ratio * (snr_arr + bias)
    fields = _outliers(theta, delta_arr, gamma_arr, kappa_arr)
    if variant == "finite_vocab":
        with np.errstate(invalid="ignore", divide="ignore"):
            alignment = snr_arr / (snr_arr + delta_arr)  # delta > 0: never 0/0
        fields["population_overlap"] = fields["population_overlap"] * alignment
        fields["sample_overlap"] = fields["sample_overlap"] * alignment

    theta_population, theta_sample = (
        critical_theta(delta_arr, gamma_arr, name) for name in ("population", "sample")
    )
    with np.errstate(divide="ignore"):
        inverse_ratio = np.where(ratio > 0.0, 1.0 / np.where(ratio > 0.0, ratio, 1.0), np.inf)
    threshold_population = theta_population * inverse_ratio - bias
    threshold_sample = theta_sample * inverse_ratio - bias

    shape = np.broadcast_shapes(
        delta_arr.shape, gamma_arr.shape, snr_arr.shape, alpha_arr.shape, kappa_arr.shape
    )

    def out(values: NDArray) -> Float:
        return scalar_or_array(np.broadcast_to(values, shape).copy())

    return SpikePrediction(
        theta=out(theta),
        population_outlier=out(fields["population_outlier"]),
        sample_outlier=out(fields["sample_outlier"]),
        population_overlap=out(fields["population_overlap"]),
        sample_overlap=out(fields["sample_overlap"]),
        threshold_snr_population=out(threshold_population),
        threshold_snr_sample=out(threshold_sample),
    )


def mean_spike(
    delta: ArrayLike, gamma: ArrayLike, sigma: ArrayLike, kappa: ArrayLike
) -> SpikeOutliers:
    """Uncentred mean spike ``theta_mean = sigma^2 delta / kappa`` (``sigma = sum_t w_t``)
    along the table mean, overlaps with ``mbar / ||mbar||`` (docs/model.md, "Uncentred mean
    spike"). Broadcast; O(size x Newton steps)."""
    delta_arr = check_positive("delta", delta)
    gamma_arr = check_positive("gamma", gamma)
    sigma_arr = check_finite_array("sigma", sigma)
    kappa_arr = check_positive("kappa", kappa)
    theta_mean = sigma_arr**2 * delta_arr / kappa_arr
    return _as_outliers(_outliers(theta_mean, delta_arr, gamma_arr, kappa_arr))


def critical_theta(delta: ArrayLike, gamma: ArrayLike, transition: str) -> np.ndarray:
    """Critical spike strength (units of kappa): ``delta + sqrt(delta)`` (population) or
    ``delta + 1/u*`` (sample), ``docs/model.md``, "Thresholds"."""
    delta = np.asarray(delta, dtype=float)
    if transition == "population":
        return delta + np.sqrt(delta)
    if transition == "sample":
        gamma = np.asarray(gamma, dtype=float)
        return delta + 1.0 / np.asarray(critical_u_of_arrays(delta, gamma), dtype=float)
    raise ValueError(f"transition={transition!r}: must be 'population' or 'sample'")


def theta_from_population(ell: np.ndarray, delta: np.ndarray, kappa: np.ndarray) -> np.ndarray:
    """Invert the population outlier map in closed form (docs/model.md, "Inverse maps"); at or
    inside the edge ``(1+sqrt(delta))^2`` the critical ``delta + sqrt(delta)``, NaN stays NaN.
    O(size)."""
    ell, delta, kappa = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (ell, delta, kappa))
    )
    x = ell / kappa
    b = x - 1.0 - delta
    disc = np.maximum(b * b - 4.0 * delta, 0.0)
    edge = (1.0 + np.sqrt(delta)) ** 2
    theta = np.where(x > edge, delta + 0.5 * (b + np.sqrt(disc)), delta + np.sqrt(delta))
    return np.where(np.isfinite(x), theta, np.nan)


def theta_from_sample(
    lam: np.ndarray,
    delta: np.ndarray,
    gamma: np.ndarray,
    kappa: np.ndarray,
    edge: np.ndarray | float = np.nan,
) -> np.ndarray:
    """Invert the sample outlier map ``lam = kappa f(u)`` by bisection in ``v = theta - delta``
    on ``[1/u*, max(lam/kappa, 1/u*)]`` (docs/model.md, "Inverse maps"). At or below the bulk
    edge (or ``edge``, units of ``kappa``, where finite: docs/model.md, "What replaces the
    edge") the critical ``delta + 1/u*``. O(size x 100)."""
    lam, delta, gamma, kappa, edge = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (lam, delta, gamma, kappa, edge))
    )
    x = lam / kappa
    ok = np.isfinite(x) & np.isfinite(delta) & np.isfinite(gamma)
    d_ = np.where(ok, delta, 1.0)
    g_ = np.where(ok, gamma, 1.0)
    v_star = 1.0 / np.asarray(critical_u_of_arrays(d_, g_), dtype=float)

    def g(v: np.ndarray) -> np.ndarray:
        return (v + 1.0) * (v + d_) * (v + g_) / (v * v)

    xs = np.where(ok, x, 0.0)
    root = bisect(lambda v: g(v) < xs, v_star, np.maximum(xs, v_star), _BISECTION_STEPS)
    v = np.where(xs > np.where(np.isfinite(edge), edge, g(v_star)), root, v_star)
    return np.where(ok, d_ + v, np.nan)
