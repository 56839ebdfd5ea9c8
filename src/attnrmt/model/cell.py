"""One simulation cell of the exact generative model (spec §1, §5).

:func:`simulate_cell` draws a table, signs and tokens, pools, forms ``S`` and measures its
spectrum, top eigenpairs (as overlaps, never raw eigenvectors) and the same for the
population matrix given the table.

Population matrix (spec §5). Conditional on ``E``, the pooled vector has mean
``sigma mbar`` and covariance
``Sigma_E = kappa (1/V) E E^T - kappa mbar mbar^T + (alpha - kappa) Dlt Dlt^T``.
``pop_*`` fields describe the population version of whichever matrix ``S`` is: ``Sigma_E``
for centred ``S``, and the second moment ``Sigma_E + sigma^2 mbar mbar^T`` for uncentred
``S``. For ``causal_attention`` the pooled vectors are the real attention outputs and
alpha/kappa/sigma (hence ``pop_*``) use the measured mean effective weights, which makes
``pop_*`` the population of the linear pooling with those weights (exact in the large-d
limit, approximate at finite d).

Linear algebra: ``S`` is one symmetric rank-update product; its full spectrum comes from a
single Householder tridiagonalisation (LAPACK ``dsytrd`` + ``dsterf``, what ``eigvalsh``
does) and the top-k eigenvectors are obtained from the same tridiagonal form (``stebz`` +
``stein``) and back-transformed with the stored reflectors, so they cost O(d^2 k) extra.
The population matrix is formed the same way (one ``dsyrk`` of the table plus two rank-one
updates); its top-k eigenpairs come from Lanczos with full reorthogonalisation and a
residual-based stop (relative residual 1e-9; see :func:`lanczos_top_eigenpairs`), with
the exact reduction as fallback and for small d. All symmetric matrices live as the lower
triangle of a Fortran-ordered array and are updated in place.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from numbers import Integral
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse
from scipy.linalg import blas, lapack

from attnrmt._validation import check_int, check_positive
from attnrmt.model.positional import positional_correlation, sample_signs, validate_positional
from attnrmt.model.readout import ridge_readout_accuracy
from attnrmt.model.table import helper_threads, realised_sizes, sample_table, sample_tokens
from attnrmt.model.weights import (
    causal_attention_weights,
    pooling_scalars,
    pooling_weights,
    validate_weights,
)


@dataclass(frozen=True, eq=False)
class CellResult:
    """Measurements of one cell (field names fixed by docs/architecture.md).

    Attributes
    ----------
    eigenvalues : ndarray (d,)
        All eigenvalues of ``S``, ascending (as computed; rounding can leave zero
        eigenvalues slightly negative).
    top_eigenvalues : ndarray (k,)
        The ``k = top_k`` largest, descending.
    overlap_signal, overlap_class_mean, overlap_table_mean : ndarray (k,)
        Squared overlaps of the top-k unit eigenvectors of ``S`` with ``u = mu/||mu||``,
        with ``Dlt/||Dlt||`` and with ``mbar/||mbar||``; each in [0, 1].
    pop_top_eigenvalues, pop_overlap_signal : ndarray (k,)
        The same (eigenvalues, overlap with ``u``) for the population matrix (module
        docstring).
    alpha, kappa, sigma : float
        ``w^T R w``, ``||w||^2``, ``sum(w)`` of ``effective_weights`` (spec §3).
    V, N : int
        Realised vocabulary size and number of samples.
    effective_weights : ndarray (T,)
        The weights used; for ``causal_attention`` the mean over sequences of the measured
        per-sequence effective weights.
    downstream_accuracy : float
        Test accuracy of the ridge readout of ``y`` (``label`` models), NaN otherwise.
    compute_seconds : float
        Wall time of the cell.
    """

    eigenvalues: np.ndarray
    top_eigenvalues: np.ndarray
    overlap_signal: np.ndarray
    overlap_class_mean: np.ndarray
    overlap_table_mean: np.ndarray
    pop_top_eigenvalues: np.ndarray
    pop_overlap_signal: np.ndarray
    alpha: float
    kappa: float
    sigma: float
    V: int
    N: int
    effective_weights: np.ndarray
    downstream_accuracy: float
    compute_seconds: float

    def to_dict(self) -> dict[str, Any]:
        """Fields as a dict: arrays as (read-only) float64 ndarrays, scalars as Python
        ``float``/``int``. Use ``{k: np.asarray(v).tolist() ...}`` for JSON."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


# --------------------------------------------------------------------------- validation

MAX_SNR = 1e100
"""Largest ``snr`` simulated: from about 1e130 on, sums of squares of the embeddings
overflow float64 (the transitions are at snr of order 1)."""


def _check_seed(seed: Any) -> int | list[int]:
    def _word(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise ValueError(
                f"seed={seed!r}: must be a non-negative int or a sequence of them"
            )
        return int(value)

    if isinstance(seed, Sequence | np.ndarray) and not isinstance(seed, str | bytes):
        words = [_word(value) for value in seed]
        if not words:
            raise ValueError(f"seed={seed!r}: an empty sequence is not a seed")
        return words
    return _word(seed)


def _check_cell_arguments(
    d: Any, delta: Any, gamma: Any, T: Any, snr: Any, centered: Any, top_k: Any
) -> tuple[int, float, float, int, float, bool, int, int, int]:
    d = check_int("d", d, minimum=2)
    delta = float(check_positive("delta", delta))
    gamma = float(check_positive("gamma", gamma))
    T = check_int("T", T, minimum=1)
    snr = float(check_positive("snr", snr, allow_zero=True))
    if snr > MAX_SNR:
        raise ValueError(
            f"snr={snr!r}: must be <= {MAX_SNR:g} (larger values overflow float64 in S)"
        )
    if not isinstance(centered, bool | np.bool_):
        raise ValueError(f"centered={centered!r}: must be a bool")
    top_k = check_int("top_k", top_k, minimum=1)
    if top_k > d:
        raise ValueError(f"top_k={top_k!r}: must be <= d={d}")
    V, N = realised_sizes(d, delta, gamma)
    if V < 2:
        raise ValueError(f"delta={delta!r}: gives V = 2 round(d/(2 delta)) = {V} < 2 (d={d})")
    if N < 2:
        raise ValueError(f"gamma={gamma!r}: gives N = round(d/gamma) = {N} < 2 (d={d})")
    return d, delta, gamma, T, snr, bool(centered), top_k, V, N


# ------------------------------------------------------------------------------ pooling


def token_incidence(
    tokens: np.ndarray, token_weights: np.ndarray, V: int
) -> scipy.sparse.csr_array:
    """Sparse ``N x V`` matrix ``W`` with ``W[n, v] = sum_{t: v_{n,t} = v} w_{n,t}``.

    ``W @ embeddings`` is the matrix of pooled vectors ``c_n = sum_t w_t e_{v_{n,t}}``
    (spec §1.5) as rows. Repeated tokens within a row are stored as duplicate entries,
    which the product sums.
    """
    n_sequences, T = tokens.shape
    indptr = np.arange(0, n_sequences * T + 1, T, dtype=np.int64)
    data = np.broadcast_to(token_weights, tokens.shape).ravel().astype(np.float64)
    return scipy.sparse.csr_array(
        (data, tokens.ravel().astype(np.int64), indptr), shape=(n_sequences, V)
    )


def pool(tokens: np.ndarray, token_weights: np.ndarray, embeddings: np.ndarray) -> np.ndarray:
    """Pooled vectors as rows, ``c_n = sum_t w_{n,t} e_{v_{n,t}}`` (spec §1.5), (N, d).

    One sparse token-incidence product (:func:`token_incidence`); with several helper
    threads (:func:`attnrmt.model.table.helper_threads`) the rows are split into one block
    per thread. Each row is an independent sum, so the result does not depend on the split.
    """
    n_sequences, V = tokens.shape[0], embeddings.shape[0]
    threads = helper_threads() if n_sequences >= 256 else 1
    if threads == 1:
        return token_incidence(tokens, token_weights, V) @ embeddings
    weights = np.broadcast_to(token_weights, tokens.shape)
    pooled = np.empty((n_sequences, embeddings.shape[1]))
    edges = np.linspace(0, n_sequences, threads + 1).round().astype(int)

    def fill(block: tuple[int, int]) -> None:
        start, stop = block
        incidence = token_incidence(tokens[start:stop], weights[start:stop], V)
        pooled[start:stop] = incidence @ embeddings

    with ThreadPoolExecutor(threads) as executor:
        list(executor.map(fill, itertools.pairwise(edges)))
    return pooled


# ------------------------------------------------------------------------ linear algebra


def lower_gram(rows: np.ndarray, scale: float) -> np.ndarray:
    """``scale * rows^T rows`` (d x d) by one BLAS ``dsyrk``; only the lower triangle is set.

    ``rows`` is C-ordered (n, d); the result is Fortran-ordered, the layout the symmetric
    LAPACK/BLAS routines below read and update in place (the upper triangle is ignored).
    """
    return blas.dsyrk(scale, np.ascontiguousarray(rows, dtype=np.float64).T, trans=0, lower=1)


def add_rank_one(lower: np.ndarray, coefficient: float, vector: np.ndarray) -> None:
    """``lower += coefficient * vector vector^T`` on the lower triangle, in place (``dsyr``)."""
    if coefficient != 0.0:
        blas.dsyr(coefficient, vector, a=lower, lower=1, overwrite_a=1)


def _tridiagonalize(lower: np.ndarray) -> tuple[np.ndarray, ...]:
    """Householder reduction ``A = Q T Q^T`` of the lower triangle of ``lower`` (destroyed)."""
    n = lower.shape[0]
    # Blocked reduction needs the optimal workspace: scipy's default lwork is the minimum,
    # which silently selects the unblocked (BLAS-2 only, ~2x slower) algorithm.
    workspace, info = lapack.dsytrd_lwork(n, lower=1)
    factored, diagonal, offdiagonal, tau, info = lapack.dsytrd(
        lower, lower=1, lwork=max(int(workspace), 1), overwrite_a=1
    )
    if info != 0:  # pragma: no cover - LAPACK failure
        raise np.linalg.LinAlgError(f"dsytrd failed with info={info}")
    return factored, diagonal, offdiagonal, tau


def _apply_householder(factored: np.ndarray, tau: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``Q @ vectors`` for ``Q = H(1) ... H(n-1)`` stored by ``dsytrd(lower=1)``.

    ``H(i) = I - tau_i v_i v_i^T`` with ``v_i = (0_{i}, 1, factored[i+2:, i])`` (1-based
    ``i``): on rows ``2..n`` these are the reflectors of a QR factorisation stored in
    ``factored[1:, :-1]``, so LAPACK ``dormqr`` applies them (blocked, O(n^2 k) for k
    vectors) to ``vectors[1:]``; row 1 is unchanged. This is what LAPACK's ``dormtr`` does
    for ``uplo = 'L'`` (scipy does not wrap ``dormtr``).
    """
    result = np.array(vectors, dtype=np.float64, order="F", copy=True)
    n, k = result.shape
    if n < 2:
        return result
    reflectors = np.asfortranarray(factored[1:, :-1])
    applied, _, info = lapack.dormqr(
        "L", "N", reflectors, tau, result[1:], lwork=max(1, 64 * k), overwrite_c=1
    )
    if info != 0:  # pragma: no cover - LAPACK failure
        raise np.linalg.LinAlgError(f"dormqr failed with info={info}")
    result[1:] = applied
    return result


def spectrum_and_top_eigenvectors(lower: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """All eigenvalues (ascending) and the top-``k`` eigenvectors of a symmetric matrix.

    One Householder tridiagonalisation ``A = Q T Q^T`` (``dsytrd``, blocked), all
    eigenvalues of ``T`` (``dsterf``; together exactly what ``eigvalsh`` does), the
    top-``k`` eigenvectors of ``T`` (bisection + inverse iteration, ``stebz`` + ``stein``)
    and ``Q z`` by blocked reflectors (O(d^2 k)).

    Parameters
    ----------
    lower : ndarray (d, d), Fortran order
        Lower triangle holds the matrix (e.g. from :func:`lower_gram`); overwritten.
    k : int

    Returns
    -------
    eigenvalues : ndarray (d,), ascending
    vectors : ndarray (d, k), unit columns, column ``j`` for the ``j``-th largest.
    """
    factored, diagonal, offdiagonal, tau = _tridiagonalize(lower)
    eigenvalues, info = lapack.dsterf(diagonal.copy(), offdiagonal.copy())
    if info != 0:  # pragma: no cover
        raise np.linalg.LinAlgError(f"dsterf failed with info={info}")
    _, vectors = _top_tridiagonal_eigenpairs(diagonal, offdiagonal, k)
    return eigenvalues, _apply_householder(factored, tau, vectors)


def _top_tridiagonal_eigenpairs(
    diagonal: np.ndarray, offdiagonal: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` eigenpairs of a symmetric tridiagonal matrix, descending.

    Bisection for the eigenvalues with indices ``n-k+1 .. n`` (``dstebz``, block order)
    and inverse iteration for their vectors (``dstein``), called directly: this runs
    inside the Lanczos loop, where ``scipy.linalg.eigh_tridiagonal``'s checks would cost
    more than the LAPACK work.
    """
    n = diagonal.size
    if n == 1:
        return diagonal.copy(), np.ones((1, 1))
    found, values, blocks, splits, info = lapack.dstebz(
        diagonal, offdiagonal, 2, 0.0, 0.0, n - k + 1, n, 0.0, "B"
    )
    if info != 0:  # pragma: no cover - LAPACK failure
        raise np.linalg.LinAlgError(f"dstebz failed with info={info}")
    values = values[:found]
    vectors, info = lapack.dstein(diagonal, offdiagonal, values, blocks, splits)
    if info != 0:  # pragma: no cover
        raise np.linalg.LinAlgError(f"dstein failed with info={info}")
    order = np.argsort(values)[::-1]
    return values[order], np.ascontiguousarray(vectors[:, order])


# Population eigenpairs: Lanczos for d >= this (below it the exact reduction is as cheap).
_LANCZOS_MIN_D = 300
# Lanczos stops when every top-k Ritz pair has residual ||P v - theta v|| <= this times the
# largest Ritz value. Eigenvalue errors are then <= residual^2 / gap (far below 1e-12
# relative) and eigenvector errors <= residual / gap, ~1e-7 for the bulk-edge gaps
# (~1e-3 relative) at d = 2000: overlaps are exact to ~1e-6 or better.
_LANCZOS_TOL = 1e-9
_LANCZOS_CHECK_EVERY = 8


def lanczos_top_eigenpairs(
    lower: np.ndarray,
    k: int,
    start: np.ndarray,
    *,
    tol: float = _LANCZOS_TOL,
    max_steps: int | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Top-``k`` eigenpairs by Lanczos with full reorthogonalisation, or ``None``.

    Each step is one symmetric matrix-vector product on the lower triangle (``dsymv``,
    reads d^2/2 numbers), the three-term recurrence, and a classical Gram-Schmidt pass
    against all previous Lanczos vectors (a second one when the first removed more than
    30% of the norm). Every ``_LANCZOS_CHECK_EVERY`` steps the top-k Ritz pairs of the
    tridiagonal matrix are formed and the run stops once every residual
    ``|beta_m y_{m,i}|`` (exactly ``||A v_i - theta_i v_i||``) is at most
    ``tol * |theta_1|``.

    Parameters
    ----------
    lower : ndarray (d, d), Fortran order
        Lower triangle holds the matrix; not modified.
    k : int
    start : ndarray (d,)
        Start vector (should have a random component, so that no eigenvector is missed).
    tol : float
        Relative residual tolerance.
    max_steps : int, optional
        At most this many steps (default ``min(d, max(400, 10 k))``).

    Returns
    -------
    (values descending (k,), unit vectors (d, k)) or ``None`` when not converged within
    ``max_steps`` or the Krylov space is exhausted before k pairs converge (the caller then
    uses the exact reduction).
    """
    n = lower.shape[0]
    max_steps = min(n, max_steps or max(400, 10 * k))
    basis = np.empty((max_steps + 1, n))  # Lanczos vectors as rows
    diagonal = np.empty(max_steps)
    offdiagonal = np.empty(max_steps)
    basis[0] = start / np.sqrt(np.sum(start**2))
    for step in range(max_steps):
        previous = basis[: step + 1].T  # (n, step+1), Fortran-contiguous view
        vector = blas.dsymv(1.0, lower, basis[step], lower=1)
        if step > 0:  # three-term recurrence first ...
            vector -= offdiagonal[step - 1] * basis[step - 1]
        diagonal[step] = np.dot(basis[step], vector)
        vector -= diagonal[step] * basis[step]
        # ... then full reorthogonalisation by classical Gram-Schmidt, repeated only when a
        # pass removes a sizeable part (DGKS criterion, "twice is enough").
        for _ in range(2):
            before = np.sqrt(np.sum(vector**2))
            coefficients = blas.dgemv(1.0, previous, vector, trans=1)
            vector = blas.dgemv(-1.0, previous, coefficients, beta=1.0, y=vector, overwrite_y=1)
            offdiagonal[step] = np.sqrt(np.sum(vector**2))
            if offdiagonal[step] > 0.7 * before:
                break
        size = step + 1
        exhausted = offdiagonal[step] <= 1e-14 * max(np.abs(diagonal[:size]).max(), 1e-300)
        if size >= k and (exhausted or size % _LANCZOS_CHECK_EVERY == 0 or size == max_steps):
            values, ritz = _top_tridiagonal_eigenpairs(
                diagonal[:size], offdiagonal[: size - 1], k
            )
            residuals = np.abs(offdiagonal[step] * ritz[-1])
            if np.all(residuals <= tol * max(abs(values[0]), 1e-300)):
                vectors = blas.dgemm(1.0, basis[:size].T, ritz)
                return values, vectors / np.sqrt(np.sum(vectors**2, axis=0))
        if exhausted:
            return None
        basis[step + 1] = vector / offdiagonal[step]
    return None


def top_eigenpairs(
    lower: np.ndarray, k: int, start: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` eigenvalues (descending) and unit eigenvectors (d, k) of a symmetric matrix.

    For ``d >= _LANCZOS_MIN_D`` with a ``start`` vector: :func:`lanczos_top_eigenpairs`
    (typically 60-120 matrix-vector products, 3-5x cheaper than a reduction on one core).
    Otherwise, or if Lanczos does not converge: the exact route, tridiagonalisation +
    ``stebz``/``stein`` for the k selected eigenpairs + blocked back-transformation.

    Parameters
    ----------
    lower : ndarray (d, d), Fortran order
        Lower triangle holds the matrix; overwritten by the exact route.
    k : int
    start : ndarray (d,), optional
        Lanczos start vector.
    """
    if start is not None and lower.shape[0] >= _LANCZOS_MIN_D:
        found = lanczos_top_eigenpairs(lower, k, start)
        if found is not None:
            return found
    factored, diagonal, offdiagonal, tau = _tridiagonalize(lower)
    values, vectors = _top_tridiagonal_eigenpairs(diagonal, offdiagonal, k)
    return values, _apply_householder(factored, tau, vectors)


def population_matrix(
    table_gram: np.ndarray,
    table_mean: np.ndarray,
    class_mean_difference: np.ndarray,
    alpha: float,
    kappa: float,
    sigma: float,
    centered: bool,
) -> np.ndarray:
    """Population version of ``S`` given the table (spec §5), on the lower triangle.

    ``kappa G - kappa mbar mbar^T + (alpha - kappa) Dlt Dlt^T`` (``Sigma_E``), plus
    ``sigma^2 mbar mbar^T`` when ``S`` is uncentred. ``table_gram`` holds the lower
    triangle of ``kappa G = (kappa/V) E E^T`` (Fortran order, see :func:`lower_gram`) and
    is updated in place and returned.
    """
    add_rank_one(table_gram, -kappa + (0.0 if centered else sigma**2), table_mean)
    add_rank_one(table_gram, alpha - kappa, class_mean_difference)
    return table_gram


def squared_overlaps(vectors: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """``(v_j . direction/||direction||)^2`` for unit columns ``v_j``; NaN if direction = 0."""
    norm = np.sqrt(np.sum(direction**2))
    if norm == 0:
        return np.full(vectors.shape[1], np.nan)
    return np.clip(((direction[:, None] * vectors).sum(axis=0) / norm) ** 2, 0.0, 1.0)


def _readonly(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array, dtype=np.float64)
    array.setflags(write=False)
    return array


# --------------------------------------------------------------------------------- cell


def simulate_cell(
    d: int,
    delta: float,
    gamma: float,
    T: int,
    positional: Mapping[str, Any] | str,
    weights: Mapping[str, Any] | str,
    snr: float,
    centered: bool = True,
    top_k: int = 3,
    seed: int | Sequence[int] = 0,
) -> CellResult:
    """Simulate one cell of the generative model (spec §1) and measure it (spec §1, §5).

    Parameters
    ----------
    d : int >= 2
        Dimension.
    delta, gamma : float > 0
        ``d/V`` and ``d/N``; realised ``V = 2 round(d/(2 delta))``, ``N = round(d/gamma)``
        (both must be >= 2).
    T : int >= 1
        Sequence length.
    positional : dict or str
        Sign model (:func:`attnrmt.model.validate_positional`).
    weights : str or dict
        Pooling weights (:func:`attnrmt.model.validate_weights`).
    snr : float in [0, MAX_SNR]
        ``||mu||^2``.
    centered : bool
        Centre the pooled vectors before forming ``S``.
    top_k : int in [1, d]
        Number of top eigenpairs measured.
    seed : int or sequence of int (non-negative)
        Entropy of a :class:`numpy.random.SeedSequence` (what ``numpy.random.default_rng``
        takes). Independent child streams draw the table, the signs, the tokens and the
        Lanczos start vector, so two cells with the same seed share their table and
        tokens whatever their weights (common random numbers).

    Returns
    -------
    CellResult

    Raises
    ------
    ValueError
        Naming the argument and value, for any invalid argument.
    """
    start_time = time.perf_counter()
    d, delta, gamma, T, snr, centered, top_k, V, N = _check_cell_arguments(
        d, delta, gamma, T, snr, centered, top_k
    )
    positional_spec = validate_positional(positional, T)
    weights_spec = validate_weights(weights, T)
    seed_words = _check_seed(seed)
    table_stream, sign_stream, token_stream, solver_stream = (
        np.random.default_rng(child) for child in np.random.SeedSequence(seed_words).spawn(4)
    )

    R = positional_correlation(positional_spec, T)
    table = sample_table(d, V, snr, table_stream)
    signs, labels = sample_signs(positional_spec, T, N, sign_stream)
    tokens = sample_tokens(signs, V, token_stream)
    del signs

    if weights_spec["kind"] == "causal_attention":
        per_sequence = causal_attention_weights(table.embeddings, tokens, weights_spec["tau"])
        effective_weights = per_sequence.mean(axis=0)
        token_weights = per_sequence
    else:
        effective_weights = pooling_weights(weights_spec, T, R)
        token_weights = effective_weights
    alpha, kappa, sigma = pooling_scalars(effective_weights, R)
    pooled = pool(tokens, token_weights, table.embeddings)  # (N, d)
    del tokens, token_weights

    downstream_accuracy = (
        ridge_readout_accuracy(pooled, labels.astype(np.float64))
        if labels is not None
        else float("nan")
    )
    # S = (1/N) sum_n c_n c_n^T, minus the outer product of the mean when centred
    # (algebraically the same as centring the rows first, without another pass over them).
    sample_lower = lower_gram(pooled, 1.0 / N)
    if centered:
        add_rank_one(sample_lower, -1.0, pooled.mean(axis=0))
    del pooled
    eigenvalues, top_vectors = spectrum_and_top_eigenvectors(sample_lower, top_k)
    del sample_lower

    population = population_matrix(
        lower_gram(table.embeddings, kappa / V),
        table.table_mean,
        table.class_mean_difference,
        alpha,
        kappa,
        sigma,
        centered,
    )
    # Lanczos start: the spike directions plus an equal-weight random part (so that no
    # eigenvector is orthogonal to it), drawn from the cell's own stream.
    start = solver_stream.standard_normal(d)
    for direction in (table.class_mean_difference, table.table_mean):
        start += np.sqrt(d) * direction / max(np.sqrt(np.sum(direction**2)), 1e-300)
    pop_top_eigenvalues, pop_vectors = top_eigenpairs(population, top_k, start)
    del population

    return CellResult(
        eigenvalues=_readonly(eigenvalues),
        top_eigenvalues=_readonly(eigenvalues[::-1][:top_k]),
        overlap_signal=_readonly(squared_overlaps(top_vectors, table.signal_direction)),
        overlap_class_mean=_readonly(
            squared_overlaps(top_vectors, table.class_mean_difference)
        ),
        overlap_table_mean=_readonly(squared_overlaps(top_vectors, table.table_mean)),
        pop_top_eigenvalues=_readonly(pop_top_eigenvalues),
        pop_overlap_signal=_readonly(squared_overlaps(pop_vectors, table.signal_direction)),
        alpha=alpha,
        kappa=kappa,
        sigma=sigma,
        V=int(V),
        N=int(N),
        effective_weights=_readonly(effective_weights),
        downstream_accuracy=float(downstream_accuracy),
        compute_seconds=time.perf_counter() - start_time,
    )


__all__ = [
    "CellResult",
    "pool",
    "population_matrix",
    "simulate_cell",
    "spectrum_and_top_eigenvectors",
    "squared_overlaps",
    "token_incidence",
    "top_eigenpairs",
]
