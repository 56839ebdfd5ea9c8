"""Dense and Krylov symmetric eigensolvers of :mod:`attnrmt.model.cell` and the rank-one
families of :mod:`attnrmt.model._curve` (the numerics room; docs/scaling.md, "The
eigensolvers, measured", says why each hand-written kernel is kept). Pure functions of
arrays or linear operators; symmetric matrices live as the lower triangle of a
Fortran-ordered array, updated in place. Costs: a dense cell O(d^3); the top route O(rounds
x passes over the table), a pass O(V d b) for a block of b columns."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import scipy.linalg
from scipy.linalg import blas, lapack

# Precisions whose products with a tall operand (n >> b columns on the other side) run in
# the row orientation (``(X^T A^T)^T`` for ``A X``): the same numbers, faster float64
# kernels (docs/scaling.md, "The eigensolvers, measured").
ROW_ORIENTED_DTYPES = (np.dtype(np.float64),)


def tall_times(tall: np.ndarray, small: np.ndarray) -> np.ndarray:
    """``tall @ small`` for ``tall`` (n, m) and ``small`` (m, b) of its precision, in the
    faster orientation (``ROW_ORIENTED_DTYPES``; the result may be a transposed view).
    O(n m b)."""
    if tall.dtype in ROW_ORIENTED_DTYPES:
        return (small.T @ tall.T).T
    return tall @ small


def tall_transpose_times(tall: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``tall^T @ other`` for ``tall`` (n, m) and ``other`` (n, b) of its precision, in the
    faster orientation (see :func:`tall_times`). O(n m b)."""
    if tall.dtype in ROW_ORIENTED_DTYPES:
        return (other.T @ tall).T
    return tall.T @ other


def lower_gram(rows: np.ndarray, scale: float) -> np.ndarray:
    """``scale * rows^T rows`` (d x d) by one BLAS ``dsyrk``; only the lower triangle is set.

    ``rows`` is C-ordered (n, d); the result is Fortran-ordered, the layout the symmetric
    LAPACK/BLAS routines below read and update in place (the upper triangle is ignored).
    """
    return blas.dsyrk(scale, np.ascontiguousarray(rows, dtype=np.float64).T, trans=0, lower=1)


def add_rank_one(lower: np.ndarray, coefficient: float, vector: np.ndarray) -> None:
    """``lower += coefficient * vector vector^T`` on the lower triangle, in place (``dsyr``).

    ``dsyr`` updates its argument in place only when it is Fortran-ordered float64; for any
    other layout f2py hands LAPACK a copy and returns it, so the result is written back
    (O(d^2), once). ``lower`` must be a writeable (d, d) float64 array.
    """
    if coefficient == 0.0:
        return
    updated = blas.dsyr(coefficient, vector, a=lower, lower=1, overwrite_a=1)
    if updated is not lower:
        lower[...] = updated


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


def _apply_householder(
    factored: np.ndarray, tau: np.ndarray, vectors: np.ndarray, transpose: bool = False
) -> np.ndarray:
    """``Q @ vectors`` (``Q^T @ vectors`` if ``transpose``) for ``Q = H(1) ... H(n-1)``
    stored by ``dsytrd(lower=1)``.

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
        "L",
        "T" if transpose else "N",
        reflectors,
        tau,
        result[1:],
        lwork=max(1, 64 * k),
        overwrite_c=1,
    )
    if info != 0:  # pragma: no cover - LAPACK failure
        raise np.linalg.LinAlgError(f"dormqr failed with info={info}")
    result[1:] = applied
    return result


def spectrum_and_top_eigenvectors(lower: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """All eigenvalues (ascending, (d,)) and the top-``k`` unit eigenvectors ((d, k), column ``j``
    the ``j``-th largest) of the symmetric matrix in the lower triangle of ``lower`` (Fortran order;
    overwritten): one Householder tridiagonalisation (``dsytrd``), all eigenvalues of ``T``
    (``dsterf``; together what ``eigvalsh`` does), its top-k eigenvectors (``stebz`` + ``stein``)
    and ``Q z`` by blocked reflectors. O(d^3 + d^2 k)."""
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
    """Top-``k`` eigenpairs (values descending, unit vectors (d, k)) by Lanczos with full
    reorthogonalisation, or ``None`` (not converged within ``max_steps``, default
    ``min(d, max(400, 10 k))``, or the Krylov space exhausted first; the caller then uses
    the exact reduction).

    A step: one ``dsymv`` on the lower triangle of ``lower`` (not modified), the
    three-term recurrence and classical Gram-Schmidt against all previous vectors (twice
    when the first pass removed more than 30% of the norm). Every
    ``_LANCZOS_CHECK_EVERY`` steps the run stops once every top-k residual
    ``|beta_m y_{m,i}|`` is at most ``tol |theta_1|``. ``start`` needs a random
    component. O(m d^2) time, O(m d) memory for m steps.
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
            values, ritz = _top_tridiagonal_eigenpairs(diagonal[:size], offdiagonal[: size - 1], k)
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
    """Top-``k`` eigenvalues (descending) and unit eigenvectors (d, k) of a symmetric matrix (lower
    triangle of ``lower``, Fortran order; overwritten by the exact route):
    :func:`lanczos_top_eigenpairs` from ``start`` for ``d >= _LANCZOS_MIN_D``, else or if it does
    not converge the exact route (tridiagonalisation, ``stebz``/``stein``, blocked
    back-transformation). O(m d^2) or O(d^3)."""
    if start is not None and lower.shape[0] >= _LANCZOS_MIN_D:
        found = lanczos_top_eigenpairs(lower, k, start)
        if found is not None:
            return found
    factored, diagonal, offdiagonal, tau = _tridiagonalize(lower)
    values, vectors = _top_tridiagonal_eigenpairs(diagonal, offdiagonal, k)
    return values, _apply_householder(factored, tau, vectors)


# ------------------------------------------------------------- matrix-free top eigenpairs

# Block Lanczos stop rule (see :func:`block_lanczos_top`). An eigenvalue whose Ritz
# residual is r is within r of an eigenvalue; a unit Ritz vector is within r/gap of the
# eigenvector (Davis-Kahan), gap = distance to the nearest other eigenvalue.
BLOCK_VALUE_TOL = 1e-10  # r <= this * |theta|: eigenvalues to 1e-10 relative
BLOCK_VECTOR_TOL = 1e-7  # r <= this * gap: squared overlaps to ~2e-7
# With overlap directions: the bound on each squared overlap's error (contract 1e-6; a
# factor 2 of margin for the gap estimate of :func:`_ritz_gaps`; docs/scaling.md).
BLOCK_OVERLAP_TOL = 5e-7
# Residuals below this times |theta_1| are at the rounding floor of the operator (the dense
# route is no more accurate there), so they count as converged whatever the gap: only then
# can a pair of eigenvalues closer than ~1e-8 |theta_1| end the iteration, and their
# individual eigenvectors are not determined by any float64 route.
BLOCK_FLOOR_TOL = 1e-13
_BLOCK_CHECK_EVERY_COLUMNS = 32
_BLOCK_MAX_COLUMNS = 2000


def _orthonormal_block(
    block: np.ndarray, basis: np.ndarray, scale: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``block = Q B`` with orthonormal ``Q`` (n, b) orthogonal to ``basis`` (thin SVD).

    Columns whose singular value is below ``1e-12 scale`` (the Krylov space lost a
    dimension) are replaced by random unit vectors orthogonal to ``basis`` and to the
    other columns, with a zero row in ``B``: the block recurrence stays exact.
    """
    left, singular, right = np.linalg.svd(block, full_matrices=False)
    coupling = singular[:, None] * right
    lost = singular <= 1e-12 * max(scale, 1e-300)
    if lost.any():
        fresh = rng.standard_normal((block.shape[0], int(lost.sum())))
        for _ in range(2):
            fresh -= basis @ (basis.T @ fresh)
            fresh -= left[:, ~lost] @ (left[:, ~lost].T @ fresh)
        left[:, lost] = np.linalg.qr(fresh)[0]
        coupling[lost] = 0.0
    return left, coupling


def block_lanczos_top(
    apply: Callable[[np.ndarray], np.ndarray],
    start: np.ndarray,
    n_values: int,
    n_vectors: int,
    *,
    rng: np.random.Generator,
    **options: Any,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Largest eigenpairs of a symmetric operator ``apply`` (``X (n, b) -> A X``) by block
    Lanczos with full reorthogonalisation (Golub & Van Loan, 4th ed., 10.3.6) from
    ``start`` (n, b), or ``None`` when ``max_columns`` (or ``n``) columns did not suffice;
    ``rng`` replaces lost Krylov directions. The stop rule (docs/model.md, "Top-k cells";
    :func:`converged`) is checked every ``_BLOCK_CHECK_EVERY_COLUMNS`` columns on the
    ``n_values + 1`` largest Ritz pairs, on the squared overlaps with ``directions`` when
    given; ``options``: the tolerances, ``max_columns`` and ``directions`` of
    :func:`_block_lanczos_steps`. Returns (values descending (n_values,), unit vectors (n,
    n_vectors)). O(m (cost of A on a vector) + n m^2) time for m columns, O(n m) memory."""
    steps = _block_lanczos_steps(start, n_values, n_vectors, rng, **options)
    (found,) = run_lanczos_together(one_operator(apply), [steps])
    return found


LanczosSteps = Generator[np.ndarray, np.ndarray, "tuple[np.ndarray, np.ndarray] | None"]


def one_operator(
    apply: Callable[[np.ndarray], np.ndarray],
) -> Callable[[list[np.ndarray | None]], list[np.ndarray | None]]:
    """``apply`` as the ``apply_all`` of :func:`run_lanczos_together` for a single run."""

    def apply_all(blocks: list[np.ndarray | None]) -> list[np.ndarray | None]:
        (block,) = blocks
        return [None if block is None else apply(block)]

    return apply_all


def operator_alone(
    apply_all: Callable[[list[np.ndarray | None]], list[np.ndarray | None]], count: int, index: int
) -> Callable[[np.ndarray], np.ndarray]:
    """Operator ``index`` of the ``count`` that ``apply_all`` applies together, alone."""

    def apply(block: np.ndarray) -> np.ndarray:
        blocks: list[np.ndarray | None] = [None] * count
        blocks[index] = block
        product = apply_all(blocks)[index]
        if product is None:
            raise ValueError(f"apply_all returned no product for run {index}")
        return product

    return apply


def run_lanczos_together(
    apply_all: Callable[[list[np.ndarray | None]], list[np.ndarray | None]],
    runs: list[LanczosSteps],
) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """Drive several block Lanczos iterations in lockstep.

    Every round hands the pending block of each unfinished run to one call of
    ``apply_all`` (``None`` where a run has finished), so operators that share a costly
    factor (the top route's ``S`` and population matrix both multiply by the table ``E``)
    pay for it once per round. Returns each run's result (see :func:`block_lanczos_top`).
    """
    results: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(runs)
    pending: list[np.ndarray | None] = [next(run) for run in runs]
    while any(block is not None for block in pending):
        products = apply_all(pending)
        for index, run in enumerate(runs):
            if pending[index] is None:
                continue
            product = products[index]
            if product is None:
                raise ValueError(f"apply_all returned no product for pending run {index}")
            try:
                pending[index] = run.send(product)
            except StopIteration as finished:
                results[index], pending[index] = finished.value, None
    return results


def _block_lanczos_steps(
    start: np.ndarray,
    n_values: int,
    n_vectors: int,
    rng: np.random.Generator,
    *,
    value_tol: float = BLOCK_VALUE_TOL,
    vector_tol: float = BLOCK_VECTOR_TOL,
    max_columns: int = _BLOCK_MAX_COLUMNS,
    directions: np.ndarray | None = None,
    n_returned: int = 0,
    floor_tol: float = BLOCK_FLOOR_TOL,
    check_every: int = _BLOCK_CHECK_EVERY_COLUMNS,
) -> LanczosSteps:
    """The iteration of :func:`block_lanczos_top` as a generator: yields each block to be
    multiplied by the operator, receives the product, returns the result (with
    ``max(n_vectors, n_returned)`` Ritz vectors: the extra ones are not tested), checking
    the stop rule every ``check_every`` basis columns."""
    wanted = n_values + 1  # one more Ritz value than needed: the gap below the last vector

    def check(
        basis: np.ndarray,
        projected: np.ndarray,
        projections: np.ndarray | None,
        coupling: np.ndarray,
        low: int,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        end = projected.shape[0]
        count = min(max(wanted, n_returned), end)
        values, ritz = scipy.linalg.eigh(
            projected,
            subset_by_index=[end - count, end - 1],
            driver="evr",
            check_finite=False,
        )
        values, ritz = values[::-1], ritz[:, ::-1]
        residuals = np.sqrt(np.sum((coupling @ ritz[low:end]) ** 2, axis=0))
        cosines = (
            None
            if projections is None
            else np.abs(ritz[:, :n_vectors].T @ projections).max(axis=1, initial=0.0)
        )
        if not converged(
            values, residuals, n_values, n_vectors, value_tol, vector_tol, cosines, floor_tol
        ):
            return None
        vectors = basis @ ritz[:, : max(n_vectors, n_returned)]
        vectors /= np.sqrt(np.sum(vectors**2, axis=0))
        return values[:n_values].copy(), vectors

    return (
        yield from _lanczos_recurrence(
            start, rng, max_columns, directions, check_every, wanted, check
        )
    )


def _lanczos_recurrence(
    start: np.ndarray,
    rng: np.random.Generator,
    max_columns: int,
    tracked: np.ndarray | None,
    check_every: int,
    first_check: int,
    check: Callable[[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, int], Any],
) -> Generator[np.ndarray, np.ndarray, Any]:
    """The block Lanczos recurrence with full reorthogonalisation, as a generator: yields
    each block to be multiplied by the operator and receives the product.

    From ``first_check`` basis columns on, every ``check_every`` columns (and when the
    basis is full) ``check(Q, T, Q^T tracked, B, low)`` (``Q`` the basis, ``T`` the
    projected block-tridiagonal matrix, ``B`` the next coupling block, ``low`` the first
    column of the last block; ``Q^T tracked`` is None without ``tracked``) returns the
    result or None to continue. Returns that result, or None when ``max_columns`` (or n)
    did not suffice. O(m (cost of a product) + n m^2) time, O(n m) memory for m columns.
    """
    n, width = start.shape
    capacity = min(max_columns, n) // width * width
    basis = np.empty((n, capacity), order="F")
    projected = np.zeros((capacity, capacity))
    block, _ = _orthonormal_block(start, basis[:, :0], 1.0, rng)
    basis[:, :width] = block
    # basis^T tracked, one block of rows per step (O(n b q))
    projections = None if tracked is None else np.empty((capacity, tracked.shape[1]))
    if projections is not None:
        projections[:width] = block.T @ tracked
    product = yield block
    end, scale, checked = width, 0.0, 0
    while True:
        low = end - width
        current = basis[:, low:end]
        diagonal = current.T @ product
        diagonal = 0.5 * (diagonal + diagonal.T)
        projected[low:end, low:end] = diagonal
        scale = max(scale, float(np.abs(diagonal).max()))
        product -= current @ diagonal
        if low > 0:
            product -= basis[:, low - width : low] @ projected[low - width : low, low:end]
        _reorthogonalize(product, basis[:, :end])
        last = end + width > capacity
        block, coupling = _orthonormal_block(product, basis[:, :end], scale, rng)
        if end >= first_check and (last or end >= checked + check_every):
            checked = end
            found = check(
                basis[:, :end],
                projected[:end, :end],
                None if projections is None else projections[:end],
                coupling,
                low,
            )
            if found is not None:
                return found
        if last:
            return None
        basis[:, end : end + width] = block
        if projections is not None:
            projections[end : end + width] = block.T @ tracked
        projected[end : end + width, low:end] = coupling
        projected[low:end, end : end + width] = coupling.T
        end += width
        product = yield block


def _reorthogonalize(block: np.ndarray, basis: np.ndarray) -> None:
    """Full reorthogonalisation of ``block`` against ``basis`` in place, classical
    Gram-Schmidt repeated only when a pass removed more than 30% of some column's norm
    (DGKS criterion, "twice is enough"); products in the faster orientation
    (:func:`tall_times`). O(n m b) a pass for a basis of m columns."""
    for _ in range(2):
        before = np.sum(block**2, axis=0)
        block -= tall_times(basis, tall_transpose_times(basis, block))
        if np.all(np.sum(block**2, axis=0) > 0.49 * before):
            return


def converged(
    values: np.ndarray,
    residuals: np.ndarray,
    n_values: int,
    n_vectors: int,
    value_tol: float,
    vector_tol: float,
    cosines: np.ndarray | None = None,
    floor_tol: float = BLOCK_FLOOR_TOL,
) -> bool:
    """The stop rule of :func:`block_lanczos_top` on Ritz values (descending) and their
    residuals; ``cosines`` (n_vectors,), when given, the largest ``|v_i . d_j|`` of each
    Ritz vector over the unit directions ``d_j``, switches the vector test to the squared
    overlaps (see there); residuals below ``floor_tol |theta_1|`` pass. O(c^2) for c Ritz
    values."""
    floor = residuals <= floor_tol * max(abs(values[0]), 1e-300)
    gaps = _ritz_gaps(values, residuals)
    # |theta - lambda| <= min(r, r^2 / gap) (Kato-Temple; the quadratic bound needs gap > 0)
    value_errors = np.minimum(residuals, residuals**2 / np.maximum(gaps, 1e-300))
    values_ok = value_errors[:n_values] <= value_tol * np.abs(values[:n_values])
    if not np.all(values_ok | floor[:n_values]):
        return False
    # sin(angle to the eigenvector) <= r / gap (Davis-Kahan)
    angles = residuals[:n_vectors] / np.maximum(gaps[:n_vectors], 1e-300)
    if cosines is None:
        vectors_ok = angles <= vector_tol
    else:  # |(x.d)^2 - (v.d)^2| <= 2 sin(a) |v.d| + sin(a)^2 for x = cos(a) v + sin(a) w
        vectors_ok = 2.0 * angles * cosines + angles**2 <= vector_tol
    return bool(np.all(vectors_ok | floor[:n_vectors]))


def _ritz_gaps(values: np.ndarray, residuals: np.ndarray) -> np.ndarray:
    """Lower estimate of each Ritz value's distance to the rest of the spectrum: the
    distance to the nearest other Ritz value less that value's residual (an eigenvalue
    lies within ``r_j`` of ``theta_j``), clipped at 0. O(c^2)."""
    distance = np.abs(values[:, None] - values[None, :]) - residuals[None, :]
    np.fill_diagonal(distance, np.inf)
    return np.maximum(distance.min(axis=1), 0.0)


def dense_top_eigenpairs(
    apply: Callable[[np.ndarray], np.ndarray], n: int, n_values: int, n_vectors: int
) -> tuple[np.ndarray, np.ndarray]:
    """The same as :func:`block_lanczos_top` by forming ``A = apply(I)`` (O(n^2) memory).

    The route for small ``n`` (where the Krylov basis would be most of ``R^n``) and the
    fallback when the Krylov iteration does not converge.
    """
    matrix = apply(np.eye(n))
    matrix = 0.5 * (matrix + matrix.T)
    values, vectors = scipy.linalg.eigh(
        matrix,
        subset_by_index=[n - n_values, n - 1],
        driver="evr",
        overwrite_a=True,
        check_finite=False,
    )
    return values[::-1].copy(), np.ascontiguousarray(vectors[:, ::-1][:, :n_vectors])


# Below this n the top route forms the matrix (the basis would be a large part of R^n).
DENSE_TOP_MAX_N = 200


def uses_krylov(n: int) -> bool:
    """Whether :func:`shared_operator_top_eigenpairs` iterates (block Lanczos) at size
    ``n`` rather than forming the matrix (``n <= DENSE_TOP_MAX_N``). O(1)."""
    return n > DENSE_TOP_MAX_N


# The single-precision warm start of :func:`shared_operator_top_eigenpairs` stops when
# every wanted value is within 1e-6 relative and every wanted vector within 3e-4 in angle
# of the rough operator's, or its residual is below 1e-6 |theta_1| (the float32 products
# are accurate to ~4e-7 relative; the choice: docs/scaling.md, "The eigensolvers,
# measured").
ROUGH_VALUE_TOL = 1e-6
ROUGH_VECTOR_TOL = 3e-4
ROUGH_FLOOR_TOL = 1e-6
# After a converged warm start the exact iteration runs blocks of only ``n_values + 2``
# columns (the warm start's top Ritz vectors), not the start's width (docs/scaling.md).
REFINE_EXTRA_COLUMNS = 2


def warm_start_blocks(
    rough_apply_all: Callable[[list[np.ndarray | None]], list[np.ndarray | None]],
    starts: list[np.ndarray],
    n_values: list[int],
    n_vectors: list[int],
    rng: np.random.Generator,
    max_columns: int = _BLOCK_MAX_COLUMNS,
) -> list[np.ndarray]:
    """Start blocks for the exact iteration (docs/model.md, "Top-k cells", step 1): block
    Lanczos in lockstep on the cheap ``rough_apply_all`` stopped at the ``ROUGH_*``
    tolerances, each run's ``n_values + REFINE_EXTRA_COLUMNS`` largest Ritz vectors (at most
    the start's width), or its own start when it did not converge. O(m (cost of a rough
    product) + n m^2)."""
    widths = [
        min(start.shape[1], values + REFINE_EXTRA_COLUMNS)
        for start, values in zip(starts, n_values, strict=True)
    ]
    rough: dict[str, Any] = {"value_tol": ROUGH_VALUE_TOL, "vector_tol": ROUGH_VECTOR_TOL}
    rough.update(floor_tol=ROUGH_FLOOR_TOL, max_columns=max_columns)
    runs = [
        _block_lanczos_steps(start, values, vectors, rng, n_returned=width, **rough)
        for start, values, vectors, width in zip(starts, n_values, n_vectors, widths, strict=True)
    ]
    found = run_lanczos_together(rough_apply_all, runs)
    return [
        start if pair is None else pair[1][:, :width]
        for start, pair, width in zip(starts, found, widths, strict=True)
    ]


def shared_operator_top_eigenpairs(
    apply_all: Callable[[list[np.ndarray | None]], list[np.ndarray | None]],
    starts: list[np.ndarray],
    n_values: list[int],
    n_vectors: list[int],
    rng: np.random.Generator,
    directions: list[np.ndarray | None] | None = None,
    rough_apply_all: Callable[[list[np.ndarray | None]], list[np.ndarray | None]] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Top eigenpairs of several symmetric operators applied together (``apply_all``, as in
    :func:`run_lanczos_together`): block Lanczos in lockstep, or :func:`dense_top_eigenpairs` for
    ``n <= DENSE_TOP_MAX_N`` or a run that stopped short; ``directions[i]`` makes operator ``i``
    converge in its squared overlaps with them (:func:`converged`); ``rough_apply_all`` (float32
    passes) gives the start blocks (:func:`warm_start_blocks`; docs/model.md, "Top-k cells").
    Returns ``[(values descending, unit vectors (n, n_vectors)), ...]``. O(rounds x cost of
    ``apply_all`` + n m^2) time for m basis columns."""
    n = starts[0].shape[0]
    found: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(starts)
    if uses_krylov(n):
        directions = directions or [None] * len(starts)
        if rough_apply_all is not None:
            starts = warm_start_blocks(rough_apply_all, starts, n_values, n_vectors, rng)
        # a warm-started iteration needs ~10 rounds on a small basis: check every round
        every = _BLOCK_CHECK_EVERY_COLUMNS if rough_apply_all is None else 1
        runs = []
        for start, values, vectors, unit in zip(
            starts, n_values, n_vectors, directions, strict=True
        ):
            tol = BLOCK_VECTOR_TOL if unit is None else BLOCK_OVERLAP_TOL
            options: dict[str, Any] = {"directions": unit, "check_every": every, "vector_tol": tol}
            runs.append(_block_lanczos_steps(start, values, vectors, rng, **options))
        found = run_lanczos_together(apply_all, runs)
    return [
        pair
        if pair is not None
        else dense_top_eigenpairs(
            operator_alone(apply_all, len(starts), index), n, n_values[index], n_vectors[index]
        )
        for index, pair in enumerate(found)
    ]


# ------------------------------------------------- rank-one families (model/_curve.py)
# A family is ``A(s) = A' + w(s) w(s)^T``, ``w(s) = w0 + s w1``, for several ``s``; its
# secular equation, deflation and far field:
# docs/model.md, "Curves: one decomposition per replicate".

_EPS = float(np.finfo(np.float64).eps)
# Deflation tolerance factor (LAPACK dlaed2): a weight or a pole gap below 8 eps times the
# problem's scale changes nothing at the rounding level of any backward-stable solver.
DEFLATION_FACTOR = 8.0
# A secular iteration converges in 2-5 steps (quadratically); bisection, the fallback, needs
# at most ~60 to reach the rounding floor of a double.
_SECULAR_MAX_STEPS = 120
# :func:`_secular_iterate` compacts its evaluator when fewer than this fraction of the
# pairs it holds are still iterating.
_COMPACT_FRACTION = 0.6


def eigenvalues_and_components(
    lower: np.ndarray, vectors: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """All eigenvalues (ascending, (n,)) of the symmetric matrix in ``lower`` (overwritten) and the
    components ``Q^T vectors`` (n, k) of a few vectors in its eigenbasis, without forming ``Q``:
    ``dsytrd``, the reflectors on the vectors, ``dstevd`` of the tridiagonal matrix (docs/model.md,
    "Curves: one decomposition per replicate"). O(n^3 + n^2 k)."""
    vectors = np.asarray(vectors, dtype=np.float64).reshape(lower.shape[0], -1)
    factored, diagonal, offdiagonal, tau = _tridiagonalize(lower)
    reduced = _apply_householder(factored, tau, vectors, transpose=True)
    del factored
    values, tridiagonal_vectors, info = lapack.dstevd(diagonal, offdiagonal, compute_v=1)
    if info != 0:  # pragma: no cover - LAPACK failure
        raise np.linalg.LinAlgError(f"dstevd failed with info={info}")
    return values, tridiagonal_vectors.T @ reduced


def deflate_family(
    poles: np.ndarray, components: np.ndarray, s_values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Deflation of a family ``diag(poles) + z(s) z(s)^T``, ``z(s) = components[:, 0] + s
    components[:, 1]``, for every ``s`` in ``s_values`` (docs/model.md, "Curves: one
    decomposition per replicate", deflation rules 1, coincident poles, and 2, negligible
    weights; every column of ``components``, probes too, transformed alike). ``poles``
    ascending (n,), ``components`` (n, 2 + L). Returns (the transformed components (a
    copy), the mask of poles that stay in the secular equation). O(n (2 + L) + S n)."""
    components = np.array(components, dtype=np.float64, copy=True)
    n = poles.size
    pole_scale = float(np.abs(poles).max(initial=0.0))
    gap_tolerance = DEFLATION_FACTOR * _EPS * pole_scale
    close = np.flatnonzero(np.diff(poles) <= gap_tolerance)
    if close.size:
        starts = close[np.flatnonzero(np.diff(close, prepend=-2) > 1)]
        for start in starts:
            stop = start + 1
            while stop < n - 1 and poles[stop + 1] - poles[stop] <= gap_tolerance:
                stop += 1
            rows = slice(start, stop + 1)
            if stop - start + 1 > 2:
                reflector, _ = np.linalg.qr(components[rows, :2], mode="complete")
                components[rows] = reflector.T @ components[rows]
                components[start + 2 : stop + 1, :2] = 0.0
    zeta = components[None, :, 0] + s_values[:, None] * components[None, :, 1]
    norms = np.sqrt(np.sum(zeta**2, axis=1))
    scale = np.maximum(pole_scale, norms**2)
    negligible = np.abs(zeta) * norms[:, None] <= (DEFLATION_FACTOR * _EPS * scale)[:, None]
    return components, ~np.all(negligible, axis=0)


_Evaluation = tuple[np.ndarray, ...]


def _secular_step(evaluation: _Evaluation, fixed: bool) -> tuple[np.ndarray, np.ndarray]:
    """The two candidate corrections ``eta`` of a rational model of ``f`` (``evaluation``, as
    :class:`_SecularEvaluator` returns it) with poles at the origin pole (``delta_origin =
    lambda_o - mu``) and the other end of the interval (``delta_other``; for the top interval
    the pole below the origin): the model ``c + a/(delta_origin - eta) + b/(delta_other -
    eta)`` matches ``f`` (``value``) and, for the middle way (Li 1993, LAPACK ``dlaed4``;
    ``fixed`` False), its slope, with the origin pole's exact weight ``a``; the fixed-weight
    model (``fixed``: both exact weights, ``c`` from ``f`` alone) gives the initial guess. Its
    roots solve ``C eta^2 - A eta + B = 0``; the caller keeps the one inside its bracket."""
    value, slope, _, delta_origin, delta_other, weight_origin, weight_other, _ = evaluation
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if fixed:
            c = value - weight_origin / delta_origin - weight_other / delta_other
            a = c * (delta_origin + delta_other) + weight_origin + weight_other
        else:
            c = (
                value
                - delta_other * slope
                - (delta_origin - delta_other) * weight_origin / delta_origin**2
            )
            a = (delta_origin + delta_other) * value - delta_origin * delta_other * slope
        b = delta_origin * delta_other * value
        root = np.sqrt(np.maximum(a * a - 4.0 * b * c, 0.0))
        big = np.where(a >= 0.0, a + root, a - root)
        return big / (2.0 * c), 2.0 * b / big


class _SecularEvaluator:
    """The secular functions of a set of pairs, for :func:`_secular_iterate`: ``__call__
    (upper, tau)`` returns ``(f, f', bound, delta_origin, delta_other, weight_origin,
    weight_other, mu)`` at ``mu = lambda_origin + tau`` for the current pairs (the origin
    is ``lambda_{j+1}`` if ``upper`` else ``lambda_j``, the other pole the interval's other
    end, the pole below for the top interval); ``keep(mask)`` drops the converged pairs.
    Differences to the origin are exact, so ``lambda_i - mu = (lambda_i - lambda_origin)
    - tau`` keeps its relative accuracy next to a pole; ``bound`` bounds the rounding
    error of ``f`` (LAPACK ``dlaed4``'s ``erretm``)."""

    def __call__(self, upper: np.ndarray, tau: np.ndarray) -> _Evaluation:
        raise NotImplementedError

    def keep(self, mask: np.ndarray) -> None:
        raise NotImplementedError


def _secular_iterate(
    width: np.ndarray, top: np.ndarray, evaluate: _SecularEvaluator
) -> tuple[np.ndarray, np.ndarray]:
    """Roots of secular equations, one per pair, each in its interval ``(lambda_j, lambda_j +
    width)`` (the pole ``lambda_{j+1}`` at its upper end unless ``top``), ``evaluate`` a
    :class:`_SecularEvaluator` of the same pairs, as LAPACK ``dlaed4`` (docs/model.md,
    "Curves: one decomposition per replicate"); LinAlgError beyond
    ``_SECULAR_MAX_STEPS`` (unreachable: the bisection bound). Returns (upper (bool), tau)
    per pair, the root ``lambda_origin + tau``. O(steps x cost of ``evaluate``)."""
    n_pairs = width.size
    half = 0.5 * width
    upper = np.zeros(n_pairs, dtype=bool)
    evaluation = evaluate(upper, half)
    value = evaluation[0]
    upper = (value < 0.0) & ~top
    beyond = top & (value < 0.0)
    # the midpoint seen from the chosen origin: swap the roles of the two poles
    swapped = []
    for below, above in (evaluation[3:5], evaluation[5:7]):
        swapped += [np.where(upper, above, below), np.where(upper, below, above)]
    evaluation = (*evaluation[:3], *swapped, evaluation[7])
    tau = np.where(upper, -half, half)
    low = np.where(upper, -half, np.where(beyond, half, 0.0))
    high = np.where(upper, 0.0, np.where(beyond, width, half))
    # ``held``: the pairs the evaluator still holds; ``going``: which of them iterate. The
    # evaluator drops the converged ones only when they are a third of what it holds
    # (compaction copies its per-pair arrays).
    held = np.arange(n_pairs)
    going = np.abs(value) > evaluation[2]
    # two steps that do not halve |f| are followed by a bisection: the bracket then halves
    # at least every third step, whatever the model (quadratic convergence never
    # triggers it)
    size = np.abs(value)
    before, bisect = np.full(n_pairs, np.inf), np.zeros(n_pairs, dtype=bool)
    fixed = True
    for _ in range(_SECULAR_MAX_STEPS):
        if not going.any():
            break
        if np.count_nonzero(going) < _COMPACT_FRACTION * held.size:
            evaluate.keep(going)
            evaluation = tuple(part[going] for part in evaluation)
            held, size, before = held[going], size[going], before[going]
            bisect, going = bisect[going], going[going]
        first, second = _secular_step(evaluation, fixed)
        fixed = False
        lo, hi, current = low[held], high[held], tau[held]
        first, second = current + first, current + second
        # the origin term against the rest of f frozen, solved for the offset itself (no
        # cancellation in tau + eta: a root 1e-60 from its pole)
        with np.errstate(divide="ignore", invalid="ignore"):
            rest = evaluation[0] - evaluation[5] / evaluation[3]
            third = evaluation[5] / rest
        candidates = (second, first, third)  # the first inside the bracket, else bisection
        inside = [(candidate > lo) & (candidate < hi) for candidate in candidates]
        step = np.select(inside, candidates, 0.5 * (lo + hi))
        step = np.where(bisect, 0.5 * (lo + hi), step)
        step = np.where(going, step, current)
        tau[held] = step
        evaluation = evaluate(upper[held], step)
        value, bound = evaluation[0], evaluation[2]
        lo = np.where(going & (value < 0.0), step, lo)
        hi = np.where(going & (value > 0.0), step, hi)
        low[held], high[held] = lo, hi
        bisect = np.abs(value) > 0.25 * before
        before, size = size, np.abs(value)
        # the offset tau from the origin pole is exact, so it (hence the eigenvector
        # component ``z_o / (lambda_o - mu) = -z_o / tau``) resolves to ``eps |tau|`` even
        # where the root is far closer to the pole than ``eps |mu|``; with no weight at
        # the origin there is no such component (the root may be the pole: tau -> 0)
        floor = 4.0 * _EPS * np.where(evaluation[5] > 0.0, np.abs(step), np.abs(evaluation[7]))
        going &= (np.abs(value) > bound) & (hi - lo > floor)
    if going.any():  # pragma: no cover - the bisection bound makes this unreachable
        raise np.linalg.LinAlgError(
            f"secular iteration: {np.count_nonzero(going)} roots not converged in "
            f"{_SECULAR_MAX_STEPS} steps"
        )
    return upper, tau


# Elements of a (pairs x poles) block of the direct evaluation (~1 MB: stays in cache).
_DIRECT_BLOCK_ELEMENTS = 1 << 17


def _pole_pair(n: int, interval: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, ...]:
    """(origin, other) pole indices of :func:`_secular_iterate`'s pairs: the other end of
    an interior interval, the pole below for the top one (itself when n = 1)."""
    origin = interval + upper
    other = np.where(upper, interval, np.where(interval == n - 1, interval - 1, interval + 1))
    return origin, np.clip(other, 0, n - 1)


class _DirectEvaluator(_SecularEvaluator):
    """Pair ``p``: the equation with weights ``weights[row[p]]`` (n,) and root in interval
    ``interval[p]``, summed over all poles. O(n) a pair and evaluation, in row blocks of
    ``_DIRECT_BLOCK_ELEMENTS``."""

    def __init__(
        self, poles: np.ndarray, weights: np.ndarray, row: np.ndarray, interval: np.ndarray
    ) -> None:
        self.poles, self.weights, self.row, self.interval = poles, weights, row, interval

    def keep(self, mask: np.ndarray) -> None:
        self.row, self.interval = self.row[mask], self.interval[mask]

    def __call__(self, upper: np.ndarray, tau: np.ndarray) -> _Evaluation:
        poles, n = self.poles, self.poles.size
        out = np.empty((8, tau.size))
        block = max(1, _DIRECT_BLOCK_ELEMENTS // max(n, 1))
        for start in range(0, tau.size, block):
            part = slice(start, start + block)
            rows = self.row[part]
            origin, other = _pole_pair(n, self.interval[part], upper[part])
            shift = tau[part]
            delta = poles[None, :] - poles[origin][:, None]
            delta -= shift[:, None]
            terms = self.weights[rows] / delta
            total = terms.sum(axis=1)
            slope = (terms / delta).sum(axis=1)
            value = 1.0 + total
            rounding = 8.0 * (1.0 + np.abs(terms).sum(axis=1)) + 3.0 * np.abs(value)
            out[:, part] = (
                value,
                slope,
                _EPS * (rounding + np.abs(shift) * slope),
                -shift,
                (poles[other] - poles[origin]) - shift,
                self.weights[rows, origin],
                self.weights[rows, other],
                poles[origin] + shift,
            )
        return tuple(out)


# Far field of :func:`family_spectra`: ``NEAR_POLES`` poles on each side summed exactly, the
# others through ``FAR_TERMS`` Taylor coefficients; intervals with ``r > FAR_RATIO`` by the
# direct sum (the error bound: docs/model.md, "Curves: one decomposition per replicate").
NEAR_POLES = 12
FAR_TERMS = 16
FAR_RATIO = 0.1
# Intervals a block of the far-field moments (rows of a block x poles matrix in cache).
_FAR_BLOCK_ROWS = 32


def _far_field_moments(
    poles: np.ndarray, weights: np.ndarray, intervals: np.ndarray, near: int, terms: int
) -> tuple[np.ndarray, np.ndarray]:
    """Taylor coefficients ``M_t = sum_far w_i / (lambda_i - m_j)^(t+1)`` of the far
    poles' sum ``sum_far w_i / (lambda_i - mu) = sum_t M_t (mu - m_j)^t`` about each
    interval's midpoint ``m_j`` (far: ``i <= j - near`` or ``i > j + near``) and the
    absolute sum ``sum_far |w_i / (lambda_i - m_j)|`` (for the rounding bound), for every
    column of ``weights`` (n, c). Returns ((intervals, terms, c), (intervals, c)).
    O(terms x intervals x n), in blocks of ``_FAR_BLOCK_ROWS`` intervals."""
    n = poles.size
    middle = 0.5 * (poles[intervals] + poles[intervals + 1])
    moments = np.zeros((intervals.size, terms, weights.shape[1]))
    absolute = np.zeros((intervals.size, weights.shape[1]))
    columns = np.arange(n)
    for start in range(0, intervals.size, _FAR_BLOCK_ROWS):
        rows = slice(start, start + _FAR_BLOCK_ROWS)
        j, m = intervals[rows], middle[rows]
        offset = columns[None, :] - j[:, None]
        far = (offset <= -near) | (offset > near)
        with np.errstate(divide="ignore"):
            kernel = np.where(far, 1.0 / (poles[None, :] - m[:, None]), 0.0)
        absolute[rows] = np.abs(kernel) @ np.abs(weights)
        power = kernel.copy()
        for term in range(terms):
            moments[rows, term] = power @ weights
            if term + 1 < terms:
                power *= kernel
    return moments, absolute


def _horner(coefficients: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sum_t c_t x^t`` and its derivative, per row of ``coefficients`` (P, terms)."""
    value = coefficients[:, -1].copy()
    slope = np.zeros_like(value)
    for term in range(coefficients.shape[1] - 2, -1, -1):
        slope *= x
        slope += value
        value *= x
        value += coefficients[:, term]
    return value, slope


class _FarEvaluator(_SecularEvaluator):
    """Pair ``p`` as in :class:`_DirectEvaluator`, with the ``2 near`` nearest poles summed
    exactly and the far ones from their Taylor coefficients about ``middle[p]``
    (``coefficients`` (P, terms), already combined for each pair's member; ``absolute``
    their absolute sum at the midpoint). O(near + terms) a pair and evaluation."""

    def __init__(
        self,
        poles: np.ndarray,
        weights: np.ndarray,
        row: np.ndarray,
        interval: np.ndarray,
        middle: np.ndarray,
        coefficients: np.ndarray,
        absolute: np.ndarray,
        *,
        near: int,
    ) -> None:
        n = poles.size
        neighbours = interval[:, None] + np.arange(-near + 1, near + 1)[None, :]
        valid = (neighbours >= 0) & (neighbours < n)
        neighbours = np.clip(neighbours, 0, n - 1)
        self.poles, self.near = poles, near
        self.interval, self.middle, self.absolute = interval, middle, absolute
        self.coefficients = coefficients
        self.near_weights = np.where(valid, weights[row[:, None], neighbours], 0.0)
        self.near_poles = poles[neighbours]

    def keep(self, mask: np.ndarray) -> None:
        self.interval, self.middle = self.interval[mask], self.middle[mask]
        self.absolute, self.coefficients = self.absolute[mask], self.coefficients[mask]
        self.near_weights, self.near_poles = self.near_weights[mask], self.near_poles[mask]

    def __call__(self, upper: np.ndarray, tau: np.ndarray) -> _Evaluation:
        poles, near = self.poles, self.near
        origin, other = _pole_pair(poles.size, self.interval, upper)
        origin_pole = poles[origin]
        delta = self.near_poles - origin_pole[:, None]
        delta -= tau[:, None]
        terms = self.near_weights / delta
        below, above = terms[:, :near].sum(axis=1), terms[:, near:].sum(axis=1)
        terms /= delta
        slope_near = terms.sum(axis=1)
        far, far_slope = _horner(self.coefficients, (origin_pole - self.middle) + tau)
        value = 1.0 + below + above + far
        slope = slope_near + far_slope
        # near terms below mu are negative, above positive: |terms| sums to above - below
        bound = _EPS * (
            8.0 * (1.0 + above - below + self.absolute) + 3.0 * np.abs(value) + np.abs(tau) * slope
        )
        # poles j - 1, j, j + 1 are the near columns near - 2, near - 1, near
        weight_lower = self.near_weights[:, near - 1]
        weight_upper = self.near_weights[:, near]
        top = self.interval == poles.size - 1
        weight_other = np.where(
            upper, weight_lower, np.where(top, self.near_weights[:, max(near - 2, 0)], weight_upper)
        )
        deltas = (-tau, (poles[other] - origin_pole) - tau)
        weights = (np.where(upper, weight_upper, weight_lower), weight_other)
        return (value, slope, bound, *deltas, *weights, origin_pole + tau)


def _far_ratios(poles: np.ndarray, near: int) -> np.ndarray:
    """``r_j`` of every interior interval: half its width over the distance from its
    midpoint to the nearest pole outside the ``near`` poles on each side (inf-free:
    an interval with no far pole gets 0). O(n)."""
    n = poles.size
    j = np.arange(n - 1)
    middle = 0.5 * (poles[:-1] + poles[1:])
    far_left = np.where(j - near >= 0, middle - poles[np.maximum(j - near, 0)], np.inf)
    far_right = np.where(j + near + 1 < n, poles[np.minimum(j + near + 1, n - 1)] - middle, np.inf)
    return 0.5 * np.diff(poles) / np.minimum(far_left, far_right)


_EvaluatorFactory = Callable[[np.ndarray], _SecularEvaluator]


def _root_pairs(
    poles: np.ndarray,
    weights: np.ndarray,
    rows: np.ndarray,
    intervals: np.ndarray,
    factory: _EvaluatorFactory | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Roots of the pairs ``(rows[p], intervals[p])`` (see :class:`_DirectEvaluator`) as
    (origin pole index, tau); an interval of width ``<= 8 eps max|lambda|`` (two
    coincident poles left by :func:`deflate_family`) has its root at its lower pole.
    ``factory(subset)``, when given, builds the evaluator of the pairs ``subset``
    (default: the direct sum)."""
    n = poles.size
    top = intervals == n - 1
    upper_end = poles[-1] + np.sum(weights, axis=1)[rows] * (1.0 + 16.0 * _EPS)
    width = np.where(
        top, upper_end - poles[-1], poles[np.minimum(intervals + 1, n - 1)] - poles[intervals]
    )
    tiny = ~top & (width <= DEFLATION_FACTOR * _EPS * float(np.abs(poles).max(initial=0.0)))
    origin, tau = intervals.copy(), np.zeros(intervals.size)
    solve = np.flatnonzero(~tiny & (width > 0))
    if solve.size:
        evaluate = (
            factory(solve)
            if factory is not None
            else _DirectEvaluator(poles, weights, rows[solve], intervals[solve])
        )
        upper, found = _secular_iterate(width[solve], top[solve], evaluate)
        origin[solve] += upper
        tau[solve] = found
    return origin, tau


def family_spectra(
    poles: np.ndarray, components: np.ndarray, s_values: np.ndarray, active: np.ndarray
) -> np.ndarray:
    """All eigenvalues (S, n) ascending of every member ``diag(poles) + z(s) z(s)^T`` of a
    deflated family: the deflated poles, and one secular root per active interval
    (:func:`_secular_iterate`); for ``n > 4 NEAR_POLES`` the intervals whose far-field ratio
    is at most ``FAR_RATIO`` share the Taylor coefficients of their far poles
    (:func:`_far_field_moments`, O(FAR_TERMS n^2) once) and iterate on ``2 NEAR_POLES``
    poles (O(S n (NEAR_POLES + FAR_TERMS)) a step), the others on every pole (O(n))."""
    poles_active = poles[active]
    n, members = poles_active.size, s_values.size
    fixed = poles[~active]
    if n == 0:
        return np.broadcast_to(np.sort(fixed), (members, fixed.size)).copy()
    z0, z1 = components[active, 0], components[active, 1]
    weights = (z0[None, :] + s_values[:, None] * z1[None, :]) ** 2
    ratios = _far_ratios(poles_active, NEAR_POLES)
    use_far = n > 4 * NEAR_POLES
    far = np.flatnonzero(ratios <= FAR_RATIO) if use_far else np.zeros(0, dtype=int)
    direct = np.setdiff1d(np.arange(n), far)
    roots = np.empty((members, n))
    if far.size:
        moments, absolute = _far_field_moments(
            poles_active, np.stack([z0 * z0, z0 * z1, z1 * z1], axis=1), far, NEAR_POLES, FAR_TERMS
        )
        mix = np.stack([np.ones(members), 2.0 * s_values, s_values**2], axis=0)  # (3, S)
        rows = np.tile(np.arange(members), far.size)
        position = np.repeat(np.arange(far.size), members)
        intervals = far[position]
        # (pairs, terms): the far sum's coefficients for each pair's member
        coefficients = np.einsum("ptc,cp->pt", moments[position], mix[:, rows])
        absolute_sum = np.einsum("pc,cp->p", absolute[position], np.abs(mix[:, rows]))
        middle = 0.5 * (poles_active[intervals] + poles_active[intervals + 1])

        per_pair = (rows, intervals, middle, coefficients, absolute_sum)

        def factory(subset: np.ndarray) -> _SecularEvaluator:
            picked = [part[subset] for part in per_pair]
            return _FarEvaluator(poles_active, weights, *picked, near=NEAR_POLES)

        origin, tau = _root_pairs(poles_active, weights, rows, intervals, factory)
        roots[rows, intervals] = poles_active[origin] + tau
    if direct.size:
        rows = np.tile(np.arange(members), direct.size)
        intervals = np.repeat(direct, members)
        origin, tau = _root_pairs(poles_active, weights, rows, intervals)
        roots[rows, intervals] = poles_active[origin] + tau
    if fixed.size:
        roots = np.concatenate([roots, np.broadcast_to(fixed, (members, fixed.size))], axis=1)
    return np.sort(roots, axis=1)


def family_top(
    poles: np.ndarray,
    components: np.ndarray,
    s_values: np.ndarray,
    active: np.ndarray,
    count: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` largest eigenvalues (S, count) descending of every member of a deflated
    family and the inner products (S, count, L) of their unit eigenvectors with the probe
    columns ``components[:, 2:]`` (eigenvectors as in docs/model.md, "Curves: one
    decomposition per replicate": ``z(s) / (lambda - mu)``, the deflating rotation of a
    coincident pair, ``e_i`` of a deflated pole). O(S count n (1 + L))."""
    members, probes = s_values.size, components.shape[1] - 2
    poles_active, rows_active = poles[active], components[active]
    n = poles_active.size
    take = min(count, n)
    values = np.empty((members, 0))
    inner = np.empty((members, 0, probes))
    if take:
        zeta = rows_active[None, :, 0] + s_values[:, None] * rows_active[None, :, 1]
        intervals = np.tile(np.arange(n - 1, n - 1 - take, -1), members)
        rows = np.repeat(np.arange(members), take)
        origin, tau = _root_pairs(poles_active, zeta**2, rows, intervals)
        delta = poles_active[None, :] - poles_active[origin][:, None]
        delta -= tau[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            vectors = zeta[rows] / delta
        at_pole = ~np.isfinite(vectors).all(axis=1)
        vectors[at_pole] = 0.0
        vectors[at_pole, origin[at_pole]] = 1.0
        gap = poles_active[np.minimum(intervals + 1, n - 1)] - poles_active[intervals]
        pair = (intervals < n - 1) & (
            gap <= DEFLATION_FACTOR * _EPS * float(np.abs(poles).max(initial=0.0))
        )
        for p in np.flatnonzero(pair):
            j = intervals[p]
            lower, upper = zeta[rows[p], j + 1], -zeta[rows[p], j]
            vectors[p] = 0.0
            vectors[p, j], vectors[p, j + 1] = (lower, upper) if lower or upper else (1.0, 0.0)
        vectors /= np.sqrt(np.sum(vectors**2, axis=1))[:, None]
        values = (poles_active[origin] + tau).reshape(members, take)
        inner = (vectors @ rows_active[:, 2:]).reshape(members, take, probes)
    fixed = np.flatnonzero(~active)
    if fixed.size:
        fixed = fixed[np.argsort(poles[fixed])[::-1][:count]]
        values = np.concatenate(
            [values, np.broadcast_to(poles[fixed], (members, fixed.size))], axis=1
        )
        inner = np.concatenate(
            [inner, np.broadcast_to(components[fixed, 2:], (members, fixed.size, probes))], axis=1
        )
    order = np.argsort(-values, axis=1, kind="stable")[:, :count]
    return (
        np.take_along_axis(values, order, axis=1),
        np.take_along_axis(inner, order[:, :, None], axis=1),
    )


def family_lanczos_steps(
    start: np.ndarray,
    tracked: np.ndarray,
    check: Callable[[np.ndarray, np.ndarray, np.ndarray, int], Any],
    rng: np.random.Generator,
    *,
    max_columns: int = _BLOCK_MAX_COLUMNS,
    check_every: int = _BLOCK_CHECK_EVERY_COLUMNS,
) -> Generator[np.ndarray, np.ndarray, Any]:
    """Block Lanczos on ``A'`` for a whole family ``A(s) = A' + w(s) w(s)^T`` from a
    ``start`` holding ``w0`` and ``w1`` (one basis serves every member: docs/model.md,
    "Curves: one decomposition per replicate"), as a generator for
    :func:`run_lanczos_together`: the recurrence of :func:`_lanczos_recurrence` keeping ``Q^T
    tracked`` (n, c), ``check(T, Q^T tracked, B_m, low)`` every ``check_every`` columns.
    Returns its result, or None when ``max_columns`` (or n) did not suffice. O(m (cost of a
    product) + n m^2) time, O(n m) memory."""
    steps = _lanczos_recurrence(
        start, rng, max_columns, tracked, check_every, 0, lambda _basis, *parts: check(*parts)
    )
    return (yield from steps)
