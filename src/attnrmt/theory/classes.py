"""K-class spikes: the eigenvalues ``theta_j`` of ``Theta = B^(1/2) H B^(1/2) / kappa``
(pooled signal matrix ``B``, limit class-mean Gram ``H``), each through the rank-one maps of
:func:`attnrmt.theory.spike_outliers`, and their thresholds (docs/model.md, "K-class
spikes", "K-class thresholds"). Balanced labels only. One parameter point per call (no
broadcasting): O(K^3) plus the thresholds' bracketing and bisection (O(r^3) per step).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from attnrmt._validation import check_choice, check_finite_array, check_positive
from attnrmt.contract import VARIANTS
from attnrmt.theory.spike import critical_theta, spike_outliers

# Eigenvalues of B below this times its largest are zero (its rank r).
_RANK_RTOL = 1e-10
# Spike strengths within this relative distance (of the largest) are one degenerate group.
_GROUP_RTOL = 1e-9
# Threshold search: doubling steps from |snr| = 1 (up to 2^60), then bisection steps.
_BRACKET_STEPS = 60
_BISECTION_STEPS = 200
# Symmetry / semi-definiteness tolerance of B and G (entries O(1) or O(kappa)).
_SYMMETRY_RTOL = 1e-10
_PSD_RTOL = 1e-9


@dataclass(frozen=True)
class ClassSpikes:
    """K-class spike predictions for one variant (docs/model.md, "K-class spikes"), one entry
    per eigenvalue of the spike matrix, descending (``r = rank B`` entries).

    Attributes
    ----------
    theta : ndarray (r,)
        Spike strengths (units of kappa).
    group : ndarray of int (r,)
        Equal strengths (to ``_GROUP_RTOL``) share a group: their eigenvectors are
        determined only as a subspace, and the sample's outliers of one group split by
        finite-d fluctuations.
    mean_coefficients : ndarray (K, r)
        ``a_j = B^(1/2) q_j / sqrt(kappa theta_j)``: the spike direction is ``M a_j`` (unit
        in the limit), ``M`` the table's class means (``finite_vocab``) or the true means
        (``paper``); NaN where ``theta_j = 0``.
    population_outlier, sample_outlier : ndarray (r,)
        Units of ``S``; NaN when absent.
    population_overlap, sample_overlap : ndarray (r,)
        Squared overlap of the outlier's eigenvector with the spike's own direction; 0 when
        absent.
    population_overlap_signal, sample_overlap_signal : ndarray (r,)
        Squared overlap with the span of the true class means (``mu_k``, centred for
        centred ``S``): the own-direction overlap times ``q_j^T Theta_0 q_j / theta_j``,
        averaged over the spike's group.
    threshold_snr_population, threshold_snr_sample : ndarray (r,)
        The ``snr`` at which ``theta_j`` (the j-th largest) crosses ``delta + sqrt(delta)``
        resp. ``delta + 1/u*`` (:func:`class_thresholds`).
    """

    theta: np.ndarray
    group: np.ndarray
    mean_coefficients: np.ndarray
    population_outlier: np.ndarray
    sample_outlier: np.ndarray
    population_overlap: np.ndarray
    sample_overlap: np.ndarray
    population_overlap_signal: np.ndarray
    sample_overlap_signal: np.ndarray
    threshold_snr_population: np.ndarray
    threshold_snr_sample: np.ndarray


def _check_psd(name: str, value: ArrayLike, K: int | None = None) -> np.ndarray:
    """A symmetric positive semidefinite square matrix (symmetrised), ValueError otherwise."""
    matrix = check_finite_array(name, value)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise ValueError(f"{name}={value!r}: must be a square K x K matrix, K >= 2")
    if K is not None and matrix.shape[0] != K:
        raise ValueError(f"{name}={value!r}: must be {K} x {K}")
    scale = max(float(np.abs(matrix).max()), 1e-300)
    if not np.allclose(matrix, matrix.T, rtol=0.0, atol=_SYMMETRY_RTOL * scale):
        raise ValueError(f"{name}={value!r}: must be symmetric")
    matrix = 0.5 * (matrix + matrix.T)
    if float(np.linalg.eigvalsh(matrix)[0]) < -_PSD_RTOL * scale:
        raise ValueError(f"{name}={value!r}: must be positive semidefinite")
    return matrix


def _psd_sqrt(matrix: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def _signal_range(B: np.ndarray) -> np.ndarray:
    """Orthonormal basis (K, r) of the range of ``B`` (``r = rank B``)."""
    values, vectors = np.linalg.eigh(B)
    keep = values > _RANK_RTOL * max(float(values[-1]), 1e-300)
    return vectors[:, keep]


def class_mean_gram_limit(
    G: ArrayLike, snr: float, delta: float, variant: str = "finite_vocab"
) -> np.ndarray:
    """The limit ``H`` of the Gram matrix ``M^T M`` of the class means the spike sees:
    ``snr G + K delta I`` (``finite_vocab``) or ``snr G`` (``paper``) (docs/model.md,
    "K-class spikes"). O(K^2)."""
    gram = _check_psd("G", G)
    snr_value = float(check_positive("snr", snr, allow_zero=True))
    delta_value = float(check_positive("delta", delta))
    check_choice("variant", variant, VARIANTS)
    bias = gram.shape[0] * delta_value if variant == "finite_vocab" else 0.0
    return snr_value * gram + bias * np.eye(gram.shape[0])


def class_spike_matrix(B: ArrayLike, H: ArrayLike, kappa: float) -> np.ndarray:
    """``Theta = B^(1/2) H B^(1/2) / kappa`` (K x K; docs/model.md, "K-class spikes"): its
    nonzero eigenvalues are those of ``M B M^T / kappa`` for class means with ``M^T M = H``.
    O(K^3)."""
    signal = _check_psd("B", B)
    gram = _check_psd("H", H, signal.shape[0])
    kappa_value = float(check_positive("kappa", kappa))
    root = _psd_sqrt(signal)
    return root @ gram @ root / kappa_value


def _strength(slope: np.ndarray, offset: np.ndarray, snr: float, index: int) -> float:
    """The ``index``-th largest eigenvalue of ``snr slope + offset`` (r x r)."""
    return float(np.linalg.eigvalsh(snr * slope + offset)[::-1][index])


def _crossing(slope: np.ndarray, offset: np.ndarray, index: int, critical: float) -> float:
    """``inf { s : lambda_index(s slope + offset) > critical }`` for PSD ``slope``: the
    strength is non-decreasing in ``s`` (Weyl), so doubling brackets it and bisection
    finds it; ``-inf`` / ``inf`` when it is above / below ``critical`` for every ``s``
    within ``2^_BRACKET_STEPS``."""
    above_at_zero = _strength(slope, offset, 0.0, index) > critical
    step = -1.0 if above_at_zero else 1.0
    inner, outer = 0.0, step
    for _ in range(_BRACKET_STEPS):
        if (_strength(slope, offset, outer, index) > critical) != above_at_zero:
            break
        inner, outer = outer, 2.0 * outer
    else:
        return -np.inf if above_at_zero else np.inf
    low, high = (outer, inner) if above_at_zero else (inner, outer)
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if _strength(slope, offset, middle, index) > critical:
            high = middle
        else:
            low = middle
    return high


def class_thresholds(
    B: ArrayLike,
    G: ArrayLike,
    delta: float,
    gamma: float,
    kappa: float,
    variant: str = "finite_vocab",
) -> tuple[np.ndarray, np.ndarray]:
    """Per-spike thresholds in ``snr``: where the j-th largest strength of ``Theta(snr) =
    snr X + Y`` on the range of ``B`` crosses ``delta + sqrt(delta)`` resp. ``delta + 1/u*``,
    by bracketing and bisection; may be negative or ``+-inf`` (docs/model.md, "K-class
    thresholds"). O(K^3 + r^3 (bracket + bisection steps)).

    Returns
    -------
    (threshold_snr_population (r,), threshold_snr_sample (r,))
    """
    signal = _check_psd("B", B)
    gram = _check_psd("G", G, signal.shape[0])
    delta_value = float(check_positive("delta", delta))
    gamma_value = float(check_positive("gamma", gamma))
    kappa_value = float(check_positive("kappa", kappa))
    check_choice("variant", variant, VARIANTS)
    basis = _signal_range(signal)
    root = _psd_sqrt(signal)
    slope = basis.T @ root @ gram @ root @ basis / kappa_value
    bias = signal.shape[0] * delta_value if variant == "finite_vocab" else 0.0
    offset = bias * (basis.T @ signal @ basis) / kappa_value
    slope, offset = 0.5 * (slope + slope.T), 0.5 * (offset + offset.T)
    critical = {
        name: float(critical_theta(np.float64(delta_value), np.float64(gamma_value), name))
        for name in ("population", "sample")
    }
    population, sample = (
        np.array(
            [_crossing(slope, offset, index, critical[name]) for index in range(basis.shape[1])]
        )
        for name in ("population", "sample")
    )
    return population, sample


def _groups(theta: np.ndarray) -> np.ndarray:
    """Group index per strength (descending input): a new group where the gap to the
    previous one exceeds ``_GROUP_RTOL`` of the largest."""
    if theta.size == 0:
        return np.zeros(0, dtype=int)
    tolerance = _GROUP_RTOL * max(abs(float(theta[0])), 1e-300)
    return np.concatenate([[0], np.cumsum(np.diff(theta) < -tolerance)]).astype(int)


def class_spikes(
    B: ArrayLike,
    G: ArrayLike,
    snr: float,
    delta: float,
    gamma: float,
    kappa: float,
    variant: str = "finite_vocab",
) -> ClassSpikes:
    """Outliers, overlaps and thresholds of every K-class spike (docs/model.md, "K-class
    spikes", "K-class thresholds").

    Parameters
    ----------
    B : array_like (K, K)
        Pooled signal matrix of balanced labels (:func:`attnrmt.model.classes.signal_matrix`;
        centred or not, as ``S``).
    G : array_like (K, K)
        Class-mean Gram (``mu_k . mu_l = snr G_kl``).
    snr : float >= 0
    delta, gamma : float > 0
        ``d/V``, ``d/N`` (the realised ratios when comparing with a cell).
    kappa : float > 0
        ``||w||^2``.
    variant : {"finite_vocab", "paper"}

    Returns
    -------
    ClassSpikes
        ``r = rank B`` entries, by strength, descending. O(K^3 + thresholds).
    """
    signal = _check_psd("B", B)
    gram = _check_psd("G", G, signal.shape[0])
    snr_value = float(check_positive("snr", snr, allow_zero=True))
    delta_value = float(check_positive("delta", delta))
    gamma_value = float(check_positive("gamma", gamma))
    kappa_value = float(check_positive("kappa", kappa))
    H = class_mean_gram_limit(gram, snr_value, delta_value, variant)
    basis = _signal_range(signal)
    rank = basis.shape[1]
    root = _psd_sqrt(signal)
    # Theta restricted to the range of B (r x r): its eigenvalues are Theta's nonzero ones
    values, small_vectors = np.linalg.eigh(
        basis.T @ class_spike_matrix(signal, H, kappa_value) @ basis
    )
    theta = np.clip(values[::-1], 0.0, None)
    vectors = basis @ small_vectors[:, ::-1]  # q_j (K, r)
    group = _groups(theta)
    with np.errstate(divide="ignore", invalid="ignore"):
        coefficients = np.where(theta > 0, root @ vectors / np.sqrt(kappa_value * theta), np.nan)
        signal_part = root @ (snr_value * gram) @ root / kappa_value  # Theta_0
        cosine = np.einsum("kj,kl,lj->j", vectors, signal_part, vectors) / theta
    cosine = np.where(theta > 0, np.clip(cosine, 0.0, 1.0), 0.0)
    cosine = np.array([cosine[group == g].mean() for g in group])
    outliers = spike_outliers(theta, delta_value, gamma_value, kappa_value)
    thresholds = class_thresholds(signal, gram, delta_value, gamma_value, kappa_value, variant)

    def vector(value: object) -> np.ndarray:
        return np.array(np.broadcast_to(np.asarray(value, dtype=float), (rank,)))

    return ClassSpikes(
        theta=theta,
        group=group,
        mean_coefficients=coefficients,
        population_outlier=vector(outliers.population_outlier),
        sample_outlier=vector(outliers.sample_outlier),
        population_overlap=vector(outliers.population_overlap),
        sample_overlap=vector(outliers.sample_overlap),
        population_overlap_signal=vector(outliers.population_overlap) * cosine,
        sample_overlap_signal=vector(outliers.sample_overlap) * cosine,
        threshold_snr_population=thresholds[0],
        threshold_snr_sample=thresholds[1],
    )


def file_class_spikes(
    law: Mapping[str, Any],
    labels: Mapping[str, Any] | str,
    weights: Mapping[str, Any] | str,
    T: int,
    snr: float,
    gamma: float,
    centered: bool = True,
) -> dict[str, np.ndarray]:
    """The spikes of a K-class ``file`` table (docs/model.md, "Tables from a file"), one entry
    per nonzero eigenvalue of ``B`` (``r``), descending: the population matrix given the
    table is known, so its top ``r`` eigenvalues (``population_outlier``) and their
    eigenvectors' squared projections on the span of the table's spike directions
    (``population_overlap``; on its own direction ``population_overlap_spike``) are exact;
    the sample stage maps each by the generalised spiked model over the other eigenvalues
    ``lam_i`` of ``P``, ``psi(l) = l (1 + sum_i lam_i / (l - lam_i) / N)``, an outlier where
    ``psi'(l) > 0`` (``sample_outlier``, else NaN) whose projections are ``l psi'(l) /
    psi(l)`` times the population ones (``sample_overlap``, ``sample_overlap_spike``; else
    0); ``sample_edge`` the bulk's top edge ``psi(a)``, ``psi'(a) = 0`` above the ``lam_i``
    (Silverstein, Choi 1995). ``gamma`` gives ``N = round(d / gamma)``. O(V d^2 + d^3)."""
    from attnrmt.model import classes as model
    from attnrmt.model.table_laws import load_file_table, validate_table

    law = validate_table(law)
    rows, index = load_file_table(law)
    (V, d), K = rows.shape, int(index[-1]) + 1
    table, means, _ = model.file_class_table(law, K, snr, (V, d))
    pairs = model.label_pair_law(model.validate_label_model(labels, T, K), T, K)
    w = model.class_pooling_weights(weights, T, pairs, means.T @ means)
    core = model.signal_matrix(w, pairs, centered)
    moments = model.pooled_label_moments(w, pairs)
    lam, vectors = np.linalg.eigh(model.class_population_matrix(table, means, moments, centered))
    rank = int(np.sum(np.linalg.eigvalsh(core) > _RANK_RTOL * np.abs(core).max()))
    _, directions = model.spike_directions(means, core, rank)
    ell, rest = lam[::-1][:rank, None], lam[: d - rank]
    cross = (vectors[:, ::-1][:, :rank].T @ directions) ** 2
    overlap, own = np.clip(np.sum(cross, axis=1), 0, 1), np.clip(np.diagonal(cross), 0, 1)
    n_samples = round(d / float(check_positive("gamma", gamma)))
    psi = ell[:, 0] * (1 + np.sum(rest / (ell - rest), axis=1) / n_samples)
    slope = 1 - np.sum((rest / (ell - rest)) ** 2, axis=1) / n_samples
    out = slope > 0
    factor = np.where(out, np.clip(ell[:, 0] * slope / psi, 0, 1), 0.0)
    low, high = rest[-1] * (1 + 1e-12), 2 * rest[-1] + d / n_samples + 1.0  # psi' < 0, > 0
    for _ in range(100):  # bisection for the edge's point psi'(a) = 0 above the bulk
        a = (low + high) / 2
        low, high = (low, a) if np.sum((rest / (a - rest)) ** 2) < n_samples else (a, high)
    edge = high * (1 + np.sum(rest / (high - rest)) / n_samples)
    return {
        "population_outlier": ell[:, 0],
        "population_overlap": overlap,
        "population_overlap_spike": own,
        "sample_outlier": np.where(out, psi, np.nan),
        "sample_overlap": np.clip(factor * overlap, 0, 1),
        "sample_overlap_spike": np.clip(factor * own, 0, 1),
        "sample_edge": np.asarray(edge),
    }
