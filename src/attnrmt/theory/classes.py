"""K-class spikes: the eigenvalues ``theta_j`` of ``Theta = B^(1/2) H B^(1/2) / kappa``
(pooled signal matrix ``B``, limit class-mean Gram ``H``), each through the rank-one maps of
:func:`attnrmt.theory.spike_outliers`, and their thresholds (docs/model.md, "K-class
spikes", "K-class thresholds"). Balanced labels only. One parameter point per call (no
broadcasting): O(K^3) plus the thresholds' bracketing and bisection (O(r^3) per step).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq

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


# Multisection of the secular roots (to rounding) and of the sample edge (``psi`` is
# stationary there: 16^-6 of the bracket is ~1e-14 in the edge); a threshold's root in
# ``sqrt(snr)`` to this fraction of ``rho`` (Brent).
_POINTS, _ROOT_ROUNDS, _EDGE_ROUNDS, _THRESHOLD_XTOL = 16, 15, 6, 1e-12


@lru_cache(maxsize=2)
def _file_rows(law: tuple[tuple[str, Any], ...]) -> tuple[np.ndarray, np.ndarray]:
    """The canonical ``file`` law's rows by class (V, d) and class means (d, K), checked
    against its ``sha256`` once per process. O(V d)."""
    from attnrmt.model.table_laws import load_file_table, validate_table

    rows, index = load_file_table(validate_table(dict(law)))
    return rows, rows.reshape(int(index[-1]) + 1, -1, rows.shape[1]).mean(axis=1).T


@lru_cache(maxsize=4)
def _file_noise(
    law: tuple[tuple[str, Any], ...], shares: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) of the noise part ``sum_k shares_k W_k`` of ``P`` (class
    scatters ``W_k``; docs/model.md, "Tables from a file") and the class means in its
    eigenbasis (d, K). O(V d^2 + d^3), once per table and class shares."""
    rows, means = _file_rows(law)
    K, V = means.shape[1], rows.shape[0]
    scale = np.sqrt(K * np.repeat(shares, V // K) / V)[:, None]
    centred = (rows - np.repeat(means.T, V // K, 0)) * scale
    noise, basis = np.linalg.eigh(centred.T @ centred)
    return noise, basis.T @ means


def _secular(lam: np.ndarray, G: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``F(z) = I - G^T (z - diag(lam))^(-1) G`` at each ``z`` (p, r, r). O(p d r^2)."""
    gap = z[:, None] - lam
    gap[gap == 0] = 1e-300
    return np.eye(G.shape[1]) - _quadratic(G, 1 / gap)


def _quadratic(G: np.ndarray, R: np.ndarray) -> np.ndarray:
    """``G^T diag(R_p) G`` for each row ``R_p`` of ``R`` (p, r, r): one GEMM. O(p d r^2)."""
    r = G.shape[1]
    return (R @ (G[:, :, None] * G[:, None, :]).reshape(-1, r * r)).reshape(-1, r, r)


def _top_pairs(lam: np.ndarray, G: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` largest eigenvalues of ``diag(lam) + G G^T`` (descending) by
    multisection on its inertia, ``#{eig > z} = #{lam > z} + #{eig F(z) <= 0}``
    (Haynsworth), and the unit eigenvectors ``(z - lam)^(-1) G c``, ``F(z) c = 0``, of the
    first ``G.shape[1]`` (d, r). O(_ROOT_ROUNDS x _POINTS x count d r^2)."""
    low = np.full(count, lam[0] - 1.0)
    high = np.full(count, lam[-1] + float(np.sum(G**2)) + 1.0)
    rows, target = np.arange(count), np.arange(1, count + 1)[:, None]
    for _ in range(_ROOT_ROUNDS):  # count(z) >= j on a prefix of each grid
        grid = low[:, None] + (high - low)[:, None] * np.linspace(0, 1, _POINTS + 1)
        z = grid.ravel()
        above = (
            lam.size
            - np.searchsorted(lam, z, "right")
            + np.sum(np.linalg.eigvalsh(_secular(lam, G, z)) <= 0, 1)
        )
        prefix = np.sum(above.reshape(grid.shape) >= target, axis=1)
        low, high = grid[rows, prefix - 1], grid[rows, np.minimum(prefix, _POINTS)]
    r = G.shape[1]
    values, vectors = np.linalg.eigh(_secular(lam, G, high[:r]))
    null = vectors[np.arange(r), :, np.argmin(np.abs(values), axis=1)]  # (r, r)
    top = (G @ null.T) / (high[:r] - lam[:, None])
    return high, top / np.linalg.norm(top, axis=0)


def _rest_sums(
    lam: np.ndarray, W: np.ndarray, weight: np.ndarray, z: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``sum_i x_i / (z - x_i)`` and ``sum_i x_i^2 / (z - x_i)^2`` over the eigenvalues ``x_i``
    of ``P`` below its top ``r``: the traces of the resolvent of the deflated ``diag(lam) +
    W diag(weight) W^T`` (top ``r`` moved to 0) by Woodbury, less the ``r`` zeros. O(p d r^2)."""
    R = 1 / (z[:, None] - lam)
    X = np.diag(1 / weight) - _quadratic(W, R)
    XY1, XY2 = (np.linalg.solve(X, _quadratic(W, R**power)) for power in (2, 3))
    r, n = W.shape[1] // 2, lam.size - W.shape[1] // 2
    h1 = R.sum(1) + np.trace(XY1, axis1=1, axis2=2) - r / z
    h2 = (R**2).sum(1) + np.einsum("pij,pji->p", XY1, XY1) + 2 * np.trace(XY2, axis1=1, axis2=2)
    return z * h1 - n, z**2 * (h2 - r / z**2) - 2 * z * h1 + n


def _spikes_at(
    noise: np.ndarray, Z0: np.ndarray, core: np.ndarray, shift: float, n_samples: int, edge: bool
) -> dict[str, np.ndarray]:
    """``file_class_spikes`` in the noise eigenbasis: ``P = diag(noise) + Z C Z^T``, ``Z = Z0
    (I + shift J)`` the class means, ``C = core``; ``edge`` adds ``sample_edge``. O(d r^2 steps)."""
    from attnrmt.model.classes import spike_directions

    K = Z0.shape[1]
    Z = Z0 @ (np.eye(K) + shift * (np.eye(K) - 1 / K))
    values, vectors = np.linalg.eigh(core)
    keep = values > _RANK_RTOL * np.abs(core).max()
    G, r = Z @ vectors[:, keep] * np.sqrt(values[keep]), int(keep.sum())
    _, directions = spike_directions(Z, core, r)
    ell, top = _top_pairs(noise, G, r + 1)
    W, weight = np.hstack([G, top]), np.concatenate([np.ones(r), -ell[:r]])
    cross = (top.T @ directions) ** 2
    overlap, own = np.clip(np.sum(cross, axis=1), 0, 1), np.clip(np.diagonal(cross), 0, 1)
    centred = np.linalg.svd(Z - Z.mean(axis=1, keepdims=True), full_matrices=False)
    signal = np.clip(
        np.sum((top.T @ centred[0][:, centred[1] > _RANK_RTOL * centred[1][0]]) ** 2, 1), 0, 1
    )
    first, second = _rest_sums(noise, W, weight, ell[:r])
    psi, slope = ell[:r] * (1 + first / n_samples), 1 - second / n_samples
    out = slope > 0
    factor = np.where(out, np.clip(ell[:r] * slope / psi, 0, 1), 0.0)
    found = {
        "population_outlier": ell[:r],
        "population_overlap": overlap,
        "population_overlap_spike": own,
        "sample_outlier": np.where(out, psi, np.nan),
        "sample_overlap": np.clip(factor * overlap, 0, 1),
        "sample_overlap_spike": np.clip(factor * own, 0, 1),
        "sample_overlap_signal": factor * signal,
        "sample_slope": slope,
    }
    if edge:  # psi'(a) = 0 above the bulk: psi' < 0 below a, > 0 above (psi(a) is stationary)
        low, high = float(ell[r]) * (1 + 1e-12), 2 * float(ell[r]) + noise.size / n_samples + 1
        for _ in range(_EDGE_ROUNDS):
            grid = np.linspace(low, high, _POINTS + 1)
            cut = int(np.argmax(_rest_sums(noise, W, weight, grid)[1] < n_samples))
            low, high = float(grid[cut - 1]), float(grid[cut])
        psi_edge = 1 + _rest_sums(noise, W, weight, np.array([high]))[0] / n_samples
        found["sample_edge"] = np.asarray(high * psi_edge[0])
    return found


def file_mean_size(law: Mapping[str, Any]) -> float:
    """``rho^2 = sum_k ||c_k||^2 / K`` of a canonical ``file`` law's centred class means
    ``c_k`` (docs/model.md, "Tables from a file"; ``snr`` makes their size ``rho +
    sqrt(snr)``). O(V d) once."""
    means = _file_rows(tuple(sorted(law.items())))[1]
    centred = means - means.mean(axis=1, keepdims=True)
    return max(float(np.sum(centred**2)) / means.shape[1], 1e-300)


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
    0; ``sample_overlap_signal`` on the span of the centred class means, the signal);
    ``sample_edge`` the bulk's top edge ``psi(a)``, ``psi'(a) = 0`` above the ``lam_i``
    (Silverstein, Choi 1995); ``sample_threshold`` the snr where ``psi'(l_j) = 0`` at these
    weights (negative ``-snr*`` below the table's own means, ``+-inf`` when never / always
    out). ``gamma`` gives ``N = round(d / gamma)``. ``P`` is the noise part, decomposed
    once per table and class shares (O(V d^2 + d^3)), plus the rank-``r`` signal: O(d r^2)
    bisection steps a point, the thresholds O(d r^3 x bisection steps) a weight vector."""
    from attnrmt.model import classes as model
    from attnrmt.model.table_laws import validate_table

    key = tuple(sorted((law if "sha256" in law else validate_table(law)).items()))
    d, K = _file_rows(key)[1].shape
    rho = np.sqrt(file_mean_size(dict(key)))
    snr_value = float(check_positive("snr", snr, allow_zero=True))
    shift = np.sqrt(snr_value) / rho
    pairs = model.label_pair_law(model.validate_label_model(labels, T, K), T, K)
    stretched = _file_rows(key)[1] @ (np.eye(K) + shift * (np.eye(K) - 1 / K))
    w = model.class_pooling_weights(weights, T, pairs, stretched.T @ stretched)
    mean, second, q = model.pooled_label_moments(w, pairs)
    core = second - np.outer(mean, mean) if centered else second
    noise, Z0 = _file_noise(key, tuple(np.round(q / q.sum(), 12)))
    n_samples = round(d / float(check_positive("gamma", gamma)))
    found = _spikes_at(noise * q.sum(), Z0, core, shift, n_samples, edge=True)
    args = (key, tuple(np.round(q / q.sum(), 12)), float(q.sum()), tuple(core.ravel()))
    found["sample_threshold"] = _file_thresholds(*args, rho, n_samples).copy()  # cached
    return found


@lru_cache(maxsize=64)
def _file_thresholds(
    law: tuple[tuple[str, Any], ...],
    shares: tuple[float, ...],
    kappa: float,
    core: tuple[float, ...],
    rho: float,
    n_samples: int,
) -> np.ndarray:
    """Per spike, the snr where ``psi'(l_j) = 0`` (docs/model.md, "Tables from a file"):
    ``psi'(l_j)`` grows with the means' size ``rho + sqrt(snr)``, so the sign of ``psi'``
    brackets the root (from ``sqrt(snr) = -rho``, the means all equal, by doubling up to
    ``2^30``) and Brent's method finds it; ``-inf`` / ``inf`` when out / in throughout.
    O(d r^2 x multisection x Brent steps)."""
    noise, Z0 = _file_noise(law, shares)
    K = Z0.shape[1]
    matrix = np.reshape(core, (K, K))

    def slope(root_snr: float) -> np.ndarray:
        return _spikes_at(noise * kappa, Z0, matrix, root_snr / rho, n_samples, False)[
            "sample_slope"
        ]

    at_zero = slope(0.0) > 0
    out = np.full(at_zero.size, np.nan)
    for j, above in enumerate(at_zero):
        low, high = (-0.999 * rho, 0.0) if above else (0.0, 1.0)
        while not above and slope(high)[j] <= 0 and high < 2**30:
            low, high = high, 2 * high
        if (slope(low)[j] > 0) or (slope(high)[j] <= 0):
            out[j] = -np.inf if above else np.inf
            continue
        root = brentq(lambda x, j=j: float(slope(x)[j]), low, high, xtol=_THRESHOLD_XTOL * rho)
        out[j] = np.sign(root) * root**2
    return out
