"""The curve route of :func:`attnrmt.model.simulate_cell`: a whole snr curve of one
replicate from one decomposition (docs/model.md, "Curves: one decomposition per replicate",
where the algebra is written out): every matrix of a cell is a fixed matrix plus a
rank-one term linear in ``r = sqrt(snr)``, solved for every member by the rank-one
families of :mod:`attnrmt.model._linalg`; ``causal_attention`` curves are one cell per
``snr`` with the shared seed."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg
import scipy.sparse
from scipy.linalg import blas

from attnrmt._validation import check_finite_array
from attnrmt.contract import stored_eigenvalue_count
from attnrmt.model._cell_steps import (
    MAX_SNR,
    add_rank_one_terms,
    cell_readout,
    check_cell_arguments,
    readonly,
    sample_through_tokens,
)
from attnrmt.model._linalg import (
    BLOCK_FLOOR_TOL,
    BLOCK_OVERLAP_TOL,
    BLOCK_VALUE_TOL,
    add_rank_one,
    converged,
    deflate_family,
    eigenvalues_and_components,
    family_lanczos_steps,
    family_spectra,
    family_top,
    lower_gram,
    one_operator,
    operator_alone,
    run_lanczos_together,
    uses_krylov,
)
from attnrmt.model.cell import (
    POP_BLOCK_WIDTH,
    TOP_BLOCK_WIDTH,
    CellResult,
    Draws,
    draw_cell,
    pool,
    population_rows,
    simulate_cell,
    table_operators,
    token_incidence,
)
from attnrmt.model.weights import validate_weights

# Population matrices of fewer dimensions are decomposed exactly; larger ones by the
# family's block Krylov iteration (the cell switches to Lanczos at the same size,
# ``_linalg._LANCZOS_MIN_D``).
DENSE_POPULATION_MAX_N = 299
# Block width of the full route's population Krylov iteration (dense products ``dsymm``):
# the two vectors of ``w``, the table-mean direction and one random column.
FULL_POPULATION_BLOCK_WIDTH = 4


def simulate_curve(
    d: int,
    delta: float,
    gamma: float,
    T: int,
    positional: Mapping[str, Any] | str,
    weights: Mapping[str, Any] | str,
    snrs: Sequence[float] | np.ndarray,
    centered: bool,
    top_k: int | None,
    seed: int | Sequence[int],
    spectrum: str,
    table: Mapping[str, Any] | str | None,
) -> list[CellResult]:
    """The curve route of :func:`attnrmt.model.simulate_cell`: the cells of every ``snr`` with
    the same seed from one decomposition (docs/model.md, "Curves: one decomposition per
    replicate"), each field equal to the single cell's to rounding (full route) or to its
    stop bounds (top route). ``causal_attention`` weights: one cell per ``snr``; otherwise
    ``compute_seconds`` is the curve's time over the number of ``snr`` values. Full route:
    one cell's products and ``O(d^3)`` reduction, then ``O(d (NEAR_POLES + FAR_TERMS))`` a
    secular step per ``snr``; top route: one block Krylov run, ``O(m (V d + N T) + d m^2)``."""
    start_time = time.perf_counter()
    d, delta, gamma, T, _, centered, top_k, V, N = check_cell_arguments(
        d, delta, gamma, T, 0.0, centered, top_k
    )
    snr_values = _check_snrs(snrs)
    if validate_weights(weights, T)["kind"] == "causal_attention":
        model = (d, delta, gamma, T, positional, weights)
        rest = (centered, top_k, seed, spectrum, table)
        return [simulate_cell(*model, float(snr), *rest) for snr in snr_values]
    sizes = (d, delta, gamma, T, 0.0, centered, top_k, V, N)
    draws = draw_cell(sizes, positional, weights, seed, table)  # the table at snr = 0: Z
    measure = _measure_top if spectrum == "top" else _measure_full
    sample, population, accuracy = measure(draws, np.sqrt(snr_values), top_k, draws.solver_stream)
    shared: dict[str, Any] = {"alpha": draws.alpha, "kappa": draws.kappa, "sigma": draws.sigma}
    shared.update(V=int(V), N=int(N), effective_weights=readonly(draws.effective_weights))
    shared["compute_seconds"] = (time.perf_counter() - start_time) / snr_values.size
    return [
        CellResult(
            eigenvalues=readonly(sample.eigenvalues[index]),
            top_eigenvalues=readonly(sample.eigenvalues[index][::-1][:top_k]),
            overlap_signal=readonly(sample.overlaps[index, 0]),
            overlap_class_mean=readonly(sample.overlaps[index, 1]),
            overlap_table_mean=readonly(sample.overlaps[index, 2]),
            pop_top_eigenvalues=readonly(population.eigenvalues[index][:top_k]),
            pop_overlap_signal=readonly(population.overlaps[index, 0]),
            downstream_accuracy=float(accuracy[index]),
            **shared,
        )
        for index in range(snr_values.size)
    ]


def _check_snrs(snrs: Any) -> np.ndarray:
    """The snr values as a 1-d float array: non-empty, each in [0, MAX_SNR]."""
    values = check_finite_array("snr", snrs)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"snr={snrs!r}: must be a non-empty sequence of numbers")
    if np.any(values < 0) or np.any(values > MAX_SNR):
        raise ValueError(f"snr={snrs!r}: every snr must lie in [0, {MAX_SNR:g}]")
    return values.astype(np.float64)


# ------------------------------------------------------------------------------ draws


def _signal_coefficients(draws: Draws) -> np.ndarray:
    """``a_n = sum_t w_t s_{v_{n,t}}`` (N,): the pooled rows are ``C(r) = C0 + r a u^T``.
    O(N T)."""
    return (draws.table.token_class[draws.tokens] * draws.effective_weights).sum(axis=1)


def _class_mean_norms(draws: Draws, roots: np.ndarray) -> np.ndarray:
    """``|Dlt0 + r u|^2`` for each ``r`` (the class-mean direction at ``snr = r^2``). O(S d)."""
    table = draws.table
    return np.array(
        [np.sum((table.class_mean_difference + r * table.signal_direction) ** 2) for r in roots]
    )


class _Measured(NamedTuple):
    """Per ``snr``: eigenvalues (list of arrays, as a cell stores them) and the squared
    overlaps ``(S, directions, k)`` of the top vectors."""

    eigenvalues: list[np.ndarray]
    overlaps: np.ndarray


def _squared(inner: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """``inner^2 / norms`` clipped to [0, 1] (NaN where a norm is 0), as
    :func:`attnrmt.model.cell.squared_overlaps`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(norms > 0, inner**2 / np.where(norms > 0, norms, 1.0), np.nan)
    return np.clip(ratio, 0.0, 1.0)


# ------------------------------------------------------------------ the sample families


@dataclass
class _SampleFamily:
    """``S(r)`` as a family ``A' + w(r) w(r)^T`` (module docstring) in ``n`` dimensions:
    ``lower`` (the fixed matrix, lower triangle, Fortran order; None for the top route's
    operator), ``tracked`` (n, 2 + L): ``w0``, ``w1`` and the probe vectors whose inner
    products give the overlaps, and ``overlaps(roots, values, inner)`` (S, 3, k)."""

    lower: np.ndarray | None
    tracked: np.ndarray
    overlaps: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _d_route_overlaps(draws: Draws) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Overlaps from the inner products with the probes ``[u, Dlt0, mbar]`` (d route):
    ``Dlt(r) = Dlt0 + r u``. ``inner`` (S, k, 3) -> (S, 3, k)."""
    mean_norm = float(np.sum(draws.table.table_mean**2))

    def overlaps(roots: np.ndarray, values: np.ndarray, inner: np.ndarray) -> np.ndarray:
        class_norms = _class_mean_norms(draws, roots)[:, None]
        signal = _squared(inner[..., 0], np.ones_like(class_norms))
        class_mean = _squared(inner[..., 1] + roots[:, None] * inner[..., 0], class_norms)
        table_mean = _squared(inner[..., 2], np.full_like(class_norms, mean_norm))
        return np.stack([signal, class_mean, table_mean], axis=1)

    return overlaps


def _gram_overlaps(draws: Draws) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Overlaps in the smaller dimension: probes ``[Y0 u, y, Y0 Dlt0, Y0 mbar]``, and an
    eigenvector ``z`` of ``K`` with eigenvalue ``lambda`` gives ``x = Y^T z / sqrt(lambda)``
    with ``x . v = z . (Y(r) v) / sqrt(lambda)``, ``Y(r) v = Y0 v + r (u . v) y`` (module
    docstring). ``inner`` (S, k, 4) -> (S, 3, k)."""
    mean_norm = float(np.sum(draws.table.table_mean**2))
    class_first, mean_first = draws.table.class_mean_difference[0], draws.table.table_mean[0]

    def overlaps(roots: np.ndarray, values: np.ndarray, inner: np.ndarray) -> np.ndarray:
        r = roots[:, None]
        scale = np.maximum(values, 0.0)
        class_norms = _class_mean_norms(draws, roots)[:, None]
        signal = _squared(inner[..., 0] + r * inner[..., 1], scale)
        class_mean = _squared(
            inner[..., 2] + r * inner[..., 0] + (r * class_first + r * r) * inner[..., 1],
            scale * class_norms,
        )
        table_mean = _squared(inner[..., 3] + r * mean_first * inner[..., 1], scale * mean_norm)
        return np.stack([signal, class_mean, table_mean], axis=1)

    return overlaps


def _tracked(draws: Draws, w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """The ``(d, 5)`` directions whose overlaps a sample family reports: the two weight
    vectors, the signal, the class-mean difference and the table mean. O(d)."""
    table = draws.table
    return np.stack(
        [w0, w1, table.signal_direction, table.class_mean_difference, table.table_mean], 1
    )


def _gram_family(draws: Draws, rows: np.ndarray, y: np.ndarray) -> _SampleFamily:
    """``K(r) = Y(r) Y(r)^T`` for ``Y(r) = rows + r y u^T`` (m, d): ``K'`` from the rows
    without their first column (``u = e_1``), ``w0 = rows u``, ``w1 = y``. O(m^2 d)."""
    fixed = np.array(rows, copy=True)
    fixed[:, 0] = 0.0
    lower = lower_gram(fixed.T, 1.0)
    del fixed
    # w0 = Y0 u, w1 = y, then the probes [Y0 u, y, Y0 Dlt0, Y0 mbar]
    probes = [rows @ draws.table.class_mean_difference, rows @ draws.table.table_mean]
    tracked = np.column_stack([rows[:, 0], y, rows[:, 0], y, *probes])
    return _SampleFamily(lower, tracked, _gram_overlaps(draws))


def _sample_family(draws: Draws, top_k: int) -> tuple[_SampleFamily, np.ndarray | None]:
    """The family of ``S`` in the dimension the cell's full route works in (``_measure_full``:
    through the tokens, the N x N Gram matrix, or d x d), and the pooled rows of ``Z``
    when they were formed (for the readout). O(N d^2) (d route)."""
    d, V, N = draws.table.dimension, draws.table.vocabulary_size, draws.tokens.shape[0]
    signal = _signal_coefficients(draws)
    if sample_through_tokens(d, V, N, top_k):
        return _token_family(draws), None
    pooled = pool(draws.tokens, draws.effective_weights, draws.table.embeddings)
    centred_signal = signal - signal.mean() if draws.centered else signal
    if top_k < N < d:
        rows = pooled - pooled.mean(axis=0) if draws.centered else pooled
        return _gram_family(draws, rows / np.sqrt(N), centred_signal / np.sqrt(N)), pooled
    lower = lower_gram(pooled, 1.0 / N)
    if draws.centered:
        add_rank_one(lower, -1.0, pooled.mean(axis=0))
    # S' = S0 - h h^T / q with h = C0^T a / N (the centred a sums to 0), q = |a|^2 / N
    h = pooled.T @ centred_signal / N
    q = float(centred_signal @ centred_signal) / N
    w0, w1 = (
        (h / np.sqrt(q), np.sqrt(q) * draws.table.signal_direction) if q > 0 else (0 * h, 0 * h)
    )
    if q > 0:
        add_rank_one(lower, -1.0 / q, h)
    tracked = _tracked(draws, w0, w1)
    return _SampleFamily(lower, tracked, _d_route_overlaps(draws)), pooled


def _token_family(draws: Draws) -> _SampleFamily:
    """``S = E^T B E`` through the tokens (the cell's ``_sample_spectrum_from_tokens``,
    ``V < min(N, d)``): with ``B = U diag(beta) U^T`` (positive semi-definite), ``S = Y^T
    Y`` for ``Y = diag(sqrt(beta)) U^T E = Y0 + r y u^T``, ``Y0 = diag(sqrt(beta)) U^T Z``,
    ``y = diag(sqrt(beta)) U^T s``. O(V^3 + V^2 d + N T^2)."""
    incidence = token_incidence(draws.tokens, draws.effective_weights, draws.table.vocabulary_size)
    gram = (incidence.T @ incidence).toarray() / draws.tokens.shape[0]
    if draws.centered:
        token_mean = np.asarray(incidence.sum(axis=0)).ravel() / draws.tokens.shape[0]
        gram -= np.outer(token_mean, token_mean)
    values, vectors = scipy.linalg.eigh(gram, check_finite=False)
    root = np.sqrt(np.maximum(values, 0.0))
    rows = root[:, None] * (vectors.T @ draws.table.embeddings)
    y = root * (vectors.T @ draws.table.token_class.astype(np.float64))
    return _gram_family(draws, rows, y)


# --------------------------------------------------------------- the population family


def _population_family(draws: Draws) -> tuple[np.ndarray, np.ndarray, bool]:
    """The population matrix as a family (docs/model.md, "Curves: one decomposition per
    replicate"): (the fixed matrix, lower triangle; tracked ``[w0, w1, probes]``; whether it
    is the V x V Gram form of ``V < d``, probes ``[Y0 u, y]``, else d x d with probes
    ``[u]``). O(V d^2) or O(V^2 d)."""
    alpha, kappa, V = draws.alpha, draws.kappa, draws.table.vocabulary_size
    if V < draws.table.dimension:
        rows = population_rows(draws.table, draws.population_terms, kappa)
        y = np.sqrt(alpha / V) * draws.table.token_class.astype(np.float64)
        fixed = np.array(rows, copy=True)
        fixed[:, 0] = 0.0
        tracked = np.stack([rows[:, 0], y, rows[:, 0], y], axis=1)
        return lower_gram(fixed.T, 1.0), tracked, True
    lower = lower_gram(draws.table.embeddings, kappa / V)
    (mean_coefficient, table_mean), (class_coefficient, class_mean) = draws.population_terms
    add_rank_one(lower, mean_coefficient, table_mean)
    add_rank_one(lower, class_coefficient - alpha, class_mean)
    return lower, _population_tracked(draws), False


def _population_tracked(draws: Draws) -> np.ndarray:
    """``[w0, w1, u]`` of the d x d population family: ``sqrt(alpha) [Dlt0, u]`` and ``u``."""
    root, u = np.sqrt(draws.alpha), draws.table.signal_direction
    return np.stack([root * draws.table.class_mean_difference, root * u, u], axis=1)


def _population_overlaps(
    roots: np.ndarray, values: np.ndarray, inner: np.ndarray, gram: bool
) -> np.ndarray:
    """Squared overlaps with ``u`` of the population matrix's top vectors, (S, 1, k):
    ``inner`` with ``u`` (d route) or with ``[Y0 u, y]`` (Gram form, over ``lambda``)."""
    if gram:
        return _squared(inner[..., 0] + roots[:, None] * inner[..., 1], np.maximum(values, 0.0))[
            :, None
        ]
    return _squared(inner[..., 0], np.ones(values.shape))[:, None]


# ------------------------------------------------------------------------- solutions


def _dense_solution(
    lower: np.ndarray, tracked: np.ndarray, roots: np.ndarray, count: int, full: bool
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Every member from one eigendecomposition (:func:`eigenvalues_and_components`):
    (all eigenvalues (S, n) ascending if ``full``, the ``count`` largest (S, count)
    descending, their vectors' inner products with the probes (S, count, L))."""
    poles, components = eigenvalues_and_components(lower, tracked)
    components, active = deflate_family(poles, components, roots)
    spectra = family_spectra(poles, components, roots, active) if full else None
    values, inner = family_top(poles, components, roots, active, count)
    return spectra, values, inner


def _krylov_check(
    roots: np.ndarray,
    n_values: int,
    n_vectors: int,
    n_probes: int,
    overlaps: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> Callable[[np.ndarray, np.ndarray, np.ndarray, int], Any]:
    """The stop test of a family's block Krylov run (:func:`family_lanczos_steps`): every
    member's ``n_values + 1`` largest Ritz pairs (:func:`family_top`, the last block's rows
    as extra probes for the residuals) must pass the cell's top-route stop rule
    (``_linalg.converged``). Returns (values (S, n_values), inner (S, n_vectors, L)) or None."""
    count = n_values + 1

    def check(
        projected: np.ndarray, projections: np.ndarray, coupling: np.ndarray, low: int
    ) -> Any:
        if projected.shape[0] < count:
            return None
        # the components of the tracked vectors and of the last block's unit vectors
        # (the Ritz residuals) in the projected matrix's eigenbasis, without forming it
        last = np.zeros((projected.shape[0], projected.shape[0] - low))
        last[low:] = np.eye(projected.shape[0] - low)
        values, components = eigenvalues_and_components(
            np.asfortranarray(projected), np.concatenate([projections, last], axis=1)
        )
        components, active = deflate_family(values, components, roots)
        top, inner = family_top(values, components, roots, active, count)
        residuals = np.sqrt(np.sum((inner[..., n_probes:] @ coupling.T) ** 2, axis=2))
        cosines = np.sqrt(np.nanmax(overlaps(top, inner[..., :n_probes]), axis=1, initial=0.0))
        tolerances = (BLOCK_VALUE_TOL, BLOCK_OVERLAP_TOL)
        for member in range(roots.size):
            ritz = (top[member], residuals[member], n_values, n_vectors, *tolerances)
            if not converged(*ritz, cosines[member, :n_vectors], BLOCK_FLOOR_TOL):
                return None
        return top[:, :n_values], inner[:, :n_vectors, :n_probes]

    return check


def _start_block(
    tracked: np.ndarray, spikes: Sequence[np.ndarray], width: int, rng: np.random.Generator
) -> np.ndarray:
    """Krylov start: ``w0``, ``w1`` (so the space serves every member), then random
    columns, the first ones plus the unit ``spikes`` at the cell's weight ``sqrt(n)``."""
    n = tracked.shape[0]
    start = rng.standard_normal((n, width))
    start[:, :2] = tracked[:, :2]
    for column, direction in enumerate(spikes, start=2):
        norm = max(np.sqrt(np.sum(direction**2)), 1e-300)
        if column < width:
            start[:, column] += np.sqrt(n) * direction / norm
    return start


def _symmetric_product(lower: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``X -> A X`` for the symmetric ``A`` held in ``lower``'s lower triangle (Fortran
    order): ``L X + L^T X - diag(A) X`` by two triangular products (``dtrmm``, each reads
    half of ``A``; faster than ``dsymm``, docs/scaling.md). O(d^2 b)."""
    diagonal = np.diagonal(lower).copy()

    def apply(block: np.ndarray) -> np.ndarray:
        product = blas.dtrmm(1.0, lower, block, side=0, lower=1)
        product += blas.dtrmm(1.0, lower, block, side=0, lower=1, trans_a=1)
        product -= diagonal[:, None] * block
        return product

    return apply


def _population_solution(
    draws: Draws, roots: np.ndarray, top_k: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Top ``top_k`` eigenvalues (S, k) and squared overlaps with ``u`` (S, 1, k) of the population
    matrix for every ``snr`` (full route): exact decomposition up to ``DENSE_POPULATION_MAX_N``
    dimensions, else the family's block Krylov run on the formed matrix (:func:`_symmetric_product`;
    the exact decomposition if it stops short)."""
    lower, tracked, gram = _population_family(draws)
    n, n_probes = lower.shape[0], tracked.shape[1] - 2

    def overlaps(values: np.ndarray, inner: np.ndarray) -> np.ndarray:
        return _population_overlaps(roots, values, inner, gram)

    found = None
    if n > DENSE_POPULATION_MAX_N:
        check = _krylov_check(roots, min(top_k + 1, n), top_k, n_probes, overlaps)
        start = _start_block(
            tracked,
            [] if gram else [draws.table.table_mean],
            min(FULL_POPULATION_BLOCK_WIDTH, n),
            rng,
        )
        apply = _symmetric_product(lower)
        (found,) = run_lanczos_together(
            one_operator(apply), [family_lanczos_steps(start, tracked, check, rng)]
        )
    if found is None:
        _, values, inner = _dense_solution(lower, tracked, roots, top_k, full=False)
    else:
        values, inner = found
    values, inner = values[:, :top_k], inner[:, :top_k]
    return values, overlaps(values, inner)


def _readouts(draws: Draws, pooled: np.ndarray | None, roots: np.ndarray) -> np.ndarray:
    """Downstream accuracy of every ``snr`` (NaN without labels): the cell's ridge readout
    (:func:`attnrmt.model.ridge_readout_accuracy`) of the pooled rows ``C(r) = C0 + r a
    u^T``, whose standardised features differ between members in their first column only
    (:func:`_ridge_curve`)."""
    if draws.labels is None:
        return np.full(roots.size, np.nan)
    if pooled is None:
        pooled = pool(draws.tokens, draws.effective_weights, draws.table.embeddings)
    return _ridge_curve(pooled, _signal_coefficients(draws), draws.labels.astype(np.float64), roots)


def _ridge_curve(
    pooled: np.ndarray, signal: np.ndarray, labels: np.ndarray, roots: np.ndarray
) -> np.ndarray:
    """:func:`attnrmt.model.ridge_readout_accuracy` of the features ``pooled + r signal e_1^T``
    for every ``r``, the fixed columns' work shared (block elimination against the Cholesky
    factor of the fixed part in the primal form, Sherman-Morrison in the dual; the
    readout's numbers to rounding). O(N d^2 + d^3) once, O(N d + d^2) a member."""
    from attnrmt.model.readout import DEFAULT_RIDGE, DEFAULT_TRAIN_FRACTION

    n_total, n_features = pooled.shape
    n_train = int(np.floor(DEFAULT_TRAIN_FRACTION * n_total))
    if n_train < 1 or n_train >= n_total:  # the readout's own error for this shape
        return np.array([cell_readout(pooled, labels) for _ in roots])
    train, test = pooled[:n_train, 1:], pooled[n_train:, 1:]
    mean, spread = train.mean(axis=0), train.std(axis=0)
    spread[spread == 0] = 1.0
    rest_train, rest_test = (train - mean) / spread, (test - mean) / spread
    label_mean = labels[:n_train].mean()
    target = labels[:n_train] - label_mean
    penalty = n_train * DEFAULT_RIDGE
    primal = n_features <= n_train
    gram = rest_train.T @ rest_train if primal else rest_train @ rest_train.T
    gram[np.diag_indices_from(gram)] += penalty
    factor = scipy.linalg.cho_factor(gram, lower=True, check_finite=False)
    fixed = scipy.linalg.cho_solve(
        factor, rest_train.T @ target if primal else target, check_finite=False
    )
    accuracies = []
    for r in roots:
        first = pooled[:, 0] + r * signal
        first_mean, first_spread = first[:n_train].mean(), first[:n_train].std()
        first_spread = first_spread if first_spread != 0 else 1.0
        first_train = (first[:n_train] - first_mean) / first_spread
        first_test = (first[n_train:] - first_mean) / first_spread
        if primal:
            coupling = rest_train.T @ first_train
            solved = scipy.linalg.cho_solve(factor, coupling, check_finite=False)
            schur = first_train @ first_train + penalty - coupling @ solved
            beta_first = (first_train @ target - coupling @ fixed) / schur
            predictions = first_test * beta_first + rest_test @ (fixed - solved * beta_first)
        else:
            solved = scipy.linalg.cho_solve(factor, first_train, check_finite=False)
            dual = fixed - solved * (first_train @ fixed) / (1.0 + first_train @ solved)
            predictions = first_test * (first_train @ dual) + rest_test @ (rest_train.T @ dual)
        predicted = np.where(predictions + label_mean >= 0, 1.0, -1.0)
        accuracies.append(float(np.mean(predicted == labels[n_train:])))
    return np.array(accuracies)


# ------------------------------------------------------------------------------ routes


def _measure_full(
    draws: Draws, roots: np.ndarray, top_k: int, rng: np.random.Generator
) -> tuple[_Measured, _Measured, np.ndarray]:
    """The full route for every ``snr``: all ``d`` eigenvalues of ``S`` (the family's
    secular roots, plus ``d - m`` zeros in an m-dimensional Gram form, as the cell), the
    top-k overlaps, the population matrix's top pairs and the readouts."""
    family, pooled = _sample_family(draws, top_k)
    n = family.tracked.shape[0]
    if family.lower is None:
        raise AssertionError("the sample family's matrix was released before its solution")
    spectra, values, inner = _dense_solution(family.lower, family.tracked, roots, top_k, full=True)
    family.lower = None
    assert spectra is not None
    zeros = np.zeros(draws.table.dimension - n)
    eigenvalues = [np.sort(np.concatenate([zeros, row])) if zeros.size else row for row in spectra]
    sample = _Measured(eigenvalues, family.overlaps(roots, values, inner))
    pop_values, pop_overlaps = _population_solution(draws, roots, top_k, rng)
    accuracy = _readouts(draws, pooled, roots)
    return sample, _Measured(list(pop_values), pop_overlaps), accuracy


def _measure_top(
    draws: Draws, roots: np.ndarray, top_k: int, rng: np.random.Generator
) -> tuple[_Measured, _Measured, np.ndarray]:
    """The top route for every ``snr`` (docs/model.md, "Top-k cells"): the ``min(2 top_k,
    d)`` largest eigenvalues of ``S`` and the top-k pairs of both matrices, matrix-free:
    one block Krylov run per matrix for the whole curve (:func:`family_lanczos_steps`,
    widths ``TOP_BLOCK_WIDTH`` and ``POP_BLOCK_WIDTH`` in lockstep, sharing each round's
    two passes over ``Z``), stopped when every ``snr`` passes the cell's stop rule. At
    ``d <= DENSE_TOP_MAX_N`` (and if a run stops short) the matrices are formed from the
    same operators and decomposed, as the cell's dense route."""
    d, V = draws.table.dimension, draws.table.vocabulary_size
    incidence = token_incidence(draws.tokens, draws.effective_weights, V)
    pooled = incidence @ draws.table.embeddings if draws.labels is not None else None
    accuracy = _readouts(draws, pooled, roots)
    signal = _signal_coefficients(draws)
    centred_signal = signal - signal.mean() if draws.centered else signal
    # h = C0^T a / N through the table: C0 = W Z, and the centred a sums to 0
    h = draws.table.embeddings.T @ (incidence.T @ centred_signal) / draws.tokens.shape[0]
    q = float(centred_signal @ centred_signal) / draws.tokens.shape[0]
    w0, w1 = (
        (h / np.sqrt(q), np.sqrt(q) * draws.table.signal_direction) if q > 0 else (0 * h, 0 * h)
    )
    sample_terms = [(-1.0 / q, h)] if q > 0 else []
    alpha = draws.alpha
    population_terms = [(-alpha, draws.table.class_mean_difference)]
    operators = table_operators(
        incidence, draws.table.embeddings, draws.centered, draws.population_terms, draws.kappa
    )

    def apply_all(blocks: list[np.ndarray | None]) -> list[np.ndarray | None]:
        products = operators(blocks)
        for index, terms in ((0, sample_terms), (1, population_terms)):
            block, product = blocks[index], products[index]
            if block is not None and product is not None:
                products[index] = add_rank_one_terms(product, block, terms)
        return products

    sample_tracked = _tracked(draws, w0, w1)
    pop_tracked = _population_tracked(draws)
    sample_overlaps = _d_route_overlaps(draws)
    n_values = stored_eigenvalue_count("top", d, top_k)
    pop_n_values = min(top_k + 1, d)
    checks = [
        _krylov_check(roots, n_values, top_k, 3, partial(sample_overlaps, roots)),
        _krylov_check(
            roots, pop_n_values, top_k, 1, partial(_population_overlaps, roots, gram=False)
        ),
    ]
    found: list[Any] = [None, None]
    if uses_krylov(d):
        spikes = [draws.table.class_mean_difference, draws.table.table_mean]
        starts = [
            _start_block(sample_tracked, spikes, min(TOP_BLOCK_WIDTH, d), rng),
            _start_block(pop_tracked, spikes[1:], min(POP_BLOCK_WIDTH, d), rng),
        ]
        found = run_lanczos_together(
            apply_all,
            [
                family_lanczos_steps(start, tracked, check, rng)
                for start, tracked, check in zip(
                    starts, (sample_tracked, pop_tracked), checks, strict=True
                )
            ],
        )
    results = []
    for index, (tracked, n_wanted) in enumerate(
        ((sample_tracked, n_values), (pop_tracked, pop_n_values))
    ):
        if found[index] is None:
            matrix = operator_alone(apply_all, 2, index)(np.eye(d))
            lower = np.asfortranarray(0.5 * (matrix + matrix.T))
            _, values, inner = _dense_solution(lower, tracked, roots, n_wanted, full=False)
            found[index] = (values, inner[:, :top_k])
        results.append(found[index])
    (values, inner), (pop_values, pop_inner) = results
    sample = _Measured(
        [row[::-1].copy() for row in values], sample_overlaps(roots, values[:, :top_k], inner)
    )
    pop_values = pop_values[:, :top_k]
    population = _Measured(
        list(pop_values), _population_overlaps(roots, pop_values, pop_inner, False)
    )
    return sample, population, accuracy
