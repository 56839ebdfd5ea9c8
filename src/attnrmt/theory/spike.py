"""Rank-one spikes on the bulk: two successive BBP transitions (docs/model.md, "Spikes").

A spike of strength ``theta`` (units of ``kappa``) on the ``MP_delta`` population bulk, seen
through ``N = d/gamma`` samples.  With ``u = 1/(theta - delta)``:

* population outlier ``ell = kappa (1+u)(1+delta u)/u`` iff ``u < 1/sqrt(delta)``
  (``theta > delta + sqrt(delta)``), population squared overlap ``1 - delta u^2``;
* sample outlier ``lambda = kappa (1+u)(1+delta u)(1+gamma u)/u`` iff ``u < u*``
  (``theta > delta + 1/u*``, :func:`~attnrmt.theory.bulk.critical_u`), sample squared overlap
  ``[1 - (delta+gamma+delta gamma) u^2 - 2 delta gamma u^3] / (1 + gamma u)``.

Below a threshold the outlier is absent (NaN) and the overlap is 0.  ``theta <= delta``
means ``u`` is not positive: no outlier of either kind and ``u`` is reported as NaN.

The signal spike has two variants of ``theta`` (``VARIANTS``):

* ``paper``:        ``theta = (alpha/kappa) snr``; overlaps are with ``mu/||mu||``.
* ``finite_vocab``: ``theta = (alpha/kappa) (snr + delta)``; the spike direction is the
  table's class-mean difference ``Dlt = mu + eta`` (``||eta||^2 -> delta``), so the squared
  overlap with ``mu/||mu||`` is the overlap with ``Dlt`` times ``snr / (snr + delta)``.

The uncentred mean spike has ``theta_mean = sigma^2 delta / kappa`` (:func:`mean_spike`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from attnrmt._validation import check_choice, check_finite_array, check_positive
from attnrmt.contract import VARIANTS
from attnrmt.theory.bulk import critical_u_of_arrays, scalar_or_array

#: Bisection steps of :func:`theta_from_sample` (halves the bracket to machine precision).
_BISECTION_STEPS = 100

__all__ = [
    "VARIANTS",
    "SpikeOutliers",
    "SpikePrediction",
    "critical_theta",
    "mean_spike",
    "spike",
    "spike_outliers",
    "theta_from_population",
    "theta_from_sample",
]


Float = np.float64 | NDArray[np.float64]


@dataclass(frozen=True)
class SpikeOutliers:
    """Outliers of one rank-one spike of strength ``theta`` (docs/model.md, "Spikes").

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
    """Signal-spike prediction for one variant (docs/model.md, "Spikes").

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
    """Spike formulas
    (docs/model.md, "Spikes") on validated, broadcastable float arrays (no scalar unwrapping)."""
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
    """Outliers and overlaps of a rank-one spike of strength ``theta`` (docs/model.md, "Spikes").

    With ``u = 1/(theta - delta)``: population outlier ``kappa (1+u)(1+delta u)/u`` and
    overlap ``1 - delta u^2`` iff ``u < 1/sqrt(delta)``; sample outlier
    ``kappa (1+u)(1+delta u)(1+gamma u)/u`` and overlap
    ``[1 - (delta+gamma+delta gamma) u^2 - 2 delta gamma u^3]/(1 + gamma u)`` iff ``u < u*``.

    Parameters
    ----------
    theta : array_like
        Spike strength in units of ``kappa`` (any finite real; ``theta <= delta`` gives no
        outlier).
    delta, gamma : array_like
        Ratios ``d/V`` and ``d/N``, > 0.
    kappa : array_like, default 1
        Noise scale ``||w||^2`` > 0; eigenvalues are returned in units of ``S``.

    Returns
    -------
    SpikeOutliers
        Fields broadcast over the inputs.
    """
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
    """Signal-spike prediction for ``variant`` in ``VARIANTS`` (docs/model.md, "Spikes").

    ``paper``: ``theta = (alpha/kappa) snr``.  ``finite_vocab``:
    ``theta = (alpha/kappa)(snr + delta)`` and overlaps with ``mu/||mu||`` are the overlaps
    with the class-mean difference times ``snr/(snr + delta)``.  Thresholds solve
    ``theta = delta + sqrt(delta)`` (population) and ``theta = delta + 1/u*`` (sample) for
    ``snr``.

    Parameters
    ----------
    delta, gamma : array_like
        Ratios > 0.
    snr : array_like
        ``||mu||^2`` >= 0.
    alpha, kappa : array_like
        Pooling scalars ``w^T R w`` (>= 0) and ``||w||^2`` (> 0).
    variant : {"finite_vocab", "paper"}
        Which ``theta`` to use.

    Returns
    -------
    SpikePrediction
        Fields broadcast over all array inputs.

    Raises
    ------
    ValueError
        Naming the argument and value, for ``delta, gamma, kappa <= 0``, ``snr < 0``,
        ``alpha < 0``, non-finite input or an unknown ``variant``.
    """
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

    theta_population = delta_arr + np.sqrt(delta_arr)
    theta_sample = delta_arr + 1.0 / critical_u_of_arrays(delta_arr, gamma_arr)
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
    """Uncentred mean spike along the table mean ``mbar`` (docs/model.md, "Spikes").

    ``theta_mean = sigma^2 delta / kappa`` (mean pooling: ``T delta``) fed to
    :func:`spike_outliers`; overlaps are with ``mbar / ||mbar||``.

    Parameters
    ----------
    delta, gamma : array_like
        Ratios > 0.
    sigma : array_like
        ``sum_t w_t`` (finite, any sign).
    kappa : array_like
        ``||w||^2`` > 0.

    Returns
    -------
    SpikeOutliers
    """
    delta_arr = check_positive("delta", delta)
    gamma_arr = check_positive("gamma", gamma)
    sigma_arr = check_finite_array("sigma", sigma)
    kappa_arr = check_positive("kappa", kappa)
    theta_mean = sigma_arr**2 * delta_arr / kappa_arr
    return _as_outliers(_outliers(theta_mean, delta_arr, gamma_arr, kappa_arr))


# --------------------------------------------------------------------------- inverse maps


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
    """Invert the population outlier map ``ell = kappa (1+u)(1+delta u)/u``.

    ``docs/model.md``, "Inverse maps".

    With ``u = 1/(theta - delta)`` and ``x = ell/kappa``:
    ``theta = delta + [(x-1-delta) + sqrt((x-1-delta)^2 - 4 delta)]/2``;
    ``x <= (1+sqrt(delta))^2`` (inside the MP_delta bulk) gives the
    critical ``delta + sqrt(delta)``. NaN input stays NaN.
    """
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
    """Invert the sample outlier map ``lambda = kappa (1+u)(1+delta u)(1+gamma u)/u``.

    ``docs/model.md``, "Inverse maps".

    With ``v = 1/u = theta - delta`` the map ``g(v) = (v+1)(v+delta)(v+gamma)/v^2`` is
    increasing on ``v >= 1/u*`` and ``g(v) >= v``; the root of ``g(v) = lambda/kappa`` is
    found by vectorised bisection on ``[1/u*, max(x, 1/u*)]``. At or below the bulk edge
    ``g(1/u*)`` (or ``edge``, in units of ``kappa``, where finite: the finite-``d`` edge of
    docs/model.md, "What replaces the edge") the result is the critical ``delta + 1/u*``.
    """
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
    low = v_star.copy()
    high = np.maximum(xs, v_star)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (low + high)
        too_small = g(mid) < xs
        low = np.where(too_small, mid, low)
        high = np.where(too_small, high, mid)
    level = np.where(np.isfinite(edge), edge, g(v_star))
    v = np.where(xs > level, 0.5 * (low + high), v_star)
    return np.where(ok, d_ + v, np.nan)
