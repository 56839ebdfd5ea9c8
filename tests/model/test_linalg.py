"""attnrmt.model._linalg: the dense kernels against numpy, the Krylov solvers against a
dense eigendecomposition, including the stop rule next to a near-degenerate pair."""

from __future__ import annotations

import numpy as np
import pytest

from attnrmt.model import _linalg
from attnrmt.model.table import sample_table
from tests.model.conftest import assert_products_in_precision


def dense_from_lower(lower: np.ndarray) -> np.ndarray:
    """The symmetric matrix whose lower triangle ``lower`` holds."""
    return np.tril(lower) + np.tril(lower, -1).T


@pytest.mark.parametrize("order", ["F", "C"])
def test_add_rank_one_updates_in_place_whatever_the_layout(order: str) -> None:
    """dsyr returns a copy for a C-ordered input; the update must still land in ``lower``
    (the old code dropped the return value and left a C-ordered matrix unchanged)."""
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((30, 6))
    lower = np.array(_linalg.lower_gram(rows, 1.0), order=order)
    before = dense_from_lower(lower)
    vector = rng.standard_normal(6)
    _linalg.add_rank_one(lower, -0.5, vector)
    np.testing.assert_allclose(
        dense_from_lower(lower), before - 0.5 * np.outer(vector, vector), rtol=1e-13, atol=1e-13
    )


def random_symmetric(values: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``Q diag(values) Q^T`` with a Haar-random ``Q``; returns (matrix, Q)."""
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((values.size, values.size)))
    q *= np.sign(np.diag(r))
    return (q * values) @ q.T, q


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["F", "C"])
def test_tall_products_in_either_orientation(dtype: type, order: str) -> None:
    """``tall_times`` / ``tall_transpose_times`` (row orientation in float64, column in
    float32) give ``A X`` and ``A^T Y`` for a Krylov basis (F-ordered) or a table
    (C-ordered), in the operands' precision, to its rounding (float64 1e-12, float32 1e-5
    of the largest entry: sums of 40 unit terms; measured 0 and <= 2.7e-7)."""
    rng = np.random.default_rng(4)
    tall = np.array(rng.standard_normal((90, 40)), dtype=dtype, order=order)
    small, other = (rng.standard_normal(shape).astype(dtype) for shape in ((40, 6), (90, 6)))
    exact = tall.astype(np.float64)
    assert_products_in_precision(
        (
            (_linalg.tall_times(tall, small), exact @ small),
            (_linalg.tall_transpose_times(tall, other), exact.T @ other),
        ),
        dtype,
    )


def test_block_lanczos_matches_dense_eigh_on_a_bulk_with_outliers() -> None:
    """An MP-like bulk with two outliers: values to 1e-10 relative (the stop rule's bound),
    vectors to 1e-7 in angle, hence |cos| = 1 to 1e-12."""
    rng = np.random.default_rng(3)
    values = np.concatenate([edge_bulk(400), [1.3, 2.0]])
    matrix, q = random_symmetric(values, 4)
    found_values, vectors = _linalg.block_lanczos_top(
        lambda block: matrix @ block, rng.standard_normal((values.size, 8)), 6, 3, rng=rng
    )
    expected = np.sort(values)[::-1][:6]
    np.testing.assert_allclose(found_values, expected, rtol=1e-10)
    top_vectors = q[:, np.argsort(values)[::-1][:3]]
    np.testing.assert_allclose(np.abs(np.sum(vectors * top_vectors, axis=0)), 1.0, atol=1e-12)


def edge_bulk(n: int) -> np.ndarray:
    """n quantiles of a density with a square-root upper edge at 1 (as MP at its edge):
    the top spacings are ~n^(-2/3), the slow case for Krylov methods."""
    quantiles = (np.arange(n) + 0.5) / n
    return 1.0 - (1.0 - quantiles) ** (2.0 / 3.0)


@pytest.mark.parametrize("width", [1, 8])
def test_block_lanczos_stop_rule_resolves_a_near_degenerate_top_pair(width: int) -> None:
    """Next to a BBP threshold the outlier sits just above the bulk edge: here 1e-5
    (relative) above the next eigenvalue. The gap-aware rule must give each of the two top
    vectors to 1e-7 in angle (sin^2 <= 1e-14, overlaps to ~1e-7 as the top route promises),
    where a residual alone only bounds the angle by r/gap (1e-4 at r = 1e-9)."""
    rng = np.random.default_rng(5)
    gap = 1e-5
    values = np.concatenate([edge_bulk(399)[:-1], [1.0, 1.0 + gap]])
    matrix, q = random_symmetric(values, 6)
    found_values, vectors = _linalg.block_lanczos_top(
        lambda block: matrix @ block, rng.standard_normal((values.size, width)), 4, 2, rng=rng
    )
    np.testing.assert_allclose(found_values, np.sort(values)[::-1][:4], rtol=1e-10)
    top_vectors = q[:, np.argsort(values)[::-1][:2]]
    cosines = np.abs(np.sum(vectors * top_vectors, axis=0))
    assert np.all(1.0 - cosines**2 <= 1e-14), 1.0 - cosines**2


def test_block_lanczos_exhausted_krylov_space_and_budget() -> None:
    """A rank-2 operator loses Krylov directions at once (deflation with fresh random
    vectors keeps the recurrence exact); a basis budget too small returns None, and
    operator_top_eigenpairs then falls back to the dense route."""
    rng = np.random.default_rng(7)
    n = 300
    spikes = rng.standard_normal((n, 2))
    matrix = spikes @ spikes.T
    apply = lambda block: matrix @ block  # noqa: E731
    expected = np.sort(np.linalg.eigvalsh(matrix))[::-1][:4]
    values, _ = _linalg.block_lanczos_top(apply, rng.standard_normal((n, 8)), 4, 2, rng=rng)
    np.testing.assert_allclose(values[:2], expected[:2], rtol=1e-10)
    np.testing.assert_allclose(values[2:], 0.0, atol=1e-10 * expected[0])
    bulk_matrix, _ = random_symmetric(np.linspace(0, 1, n), 8)
    bulk_apply = lambda block: bulk_matrix @ block  # noqa: E731
    start = rng.standard_normal((n, 4))
    assert _linalg.block_lanczos_top(bulk_apply, start, 4, 2, rng=rng, max_columns=16) is None
    dense_values, _ = _linalg.dense_top_eigenpairs(bulk_apply, n, 4, 2)
    np.testing.assert_allclose(dense_values, np.linspace(0, 1, n)[::-1][:4], rtol=1e-12)


@pytest.mark.parametrize("snr", [0.0, 2.0])
def test_lanczos_population_eigenpairs_match_exact_reduction(snr: float) -> None:
    # d = 400 >= _LANCZOS_MIN_D, so simulate_cell uses Lanczos for the population matrix.
    # The stop rule (relative residual <= 1e-9) bounds eigenvalue errors by residual^2/gap
    # (< 1e-12 relative) and eigenvector errors by residual/gap; with bulk-edge gaps of
    # ~1e-3 relative that is < 1e-6, hence the tolerances below.

    d, V = 400, 800
    table = sample_table(d, V, snr, np.random.default_rng(0))
    lower = _linalg.lower_gram(table.embeddings, 1 / (16 * V))
    _linalg.add_rank_one(lower, -1 / 16, table.table_mean)
    _linalg.add_rank_one(lower, 0.05, table.class_mean_difference)
    dense = np.tril(lower) + np.tril(lower, -1).T
    exact_values, exact_vectors = np.linalg.eigh(dense)
    start = np.random.default_rng(1).standard_normal(d)
    values, vectors = _linalg.lanczos_top_eigenpairs(lower, 3, start)
    np.testing.assert_allclose(values, exact_values[::-1][:3], rtol=1e-12)
    alignment = np.abs(np.sum(vectors * exact_vectors[:, ::-1][:, :3], axis=0))
    np.testing.assert_allclose(alignment, 1.0, atol=1e-6)
    # Not converged within the step budget -> None (the caller falls back to the reduction).
    assert _linalg.lanczos_top_eigenpairs(lower, 3, start, max_steps=5) is None
    fallback_values, _ = _linalg.top_eigenpairs(np.asfortranarray(lower.copy()), 3, None)
    np.testing.assert_allclose(fallback_values, exact_values[::-1][:3], rtol=1e-12)


def test_block_lanczos_overlap_stop_rule_next_to_a_near_degenerate_pair() -> None:
    """The overlap-aware vector test (``directions``) on the 1e-5 gap above: the squared
    overlaps of the two top vectors with the directions are right to the tolerance 1e-7
    (the bound 2 sin(a) |v.d| + sin(a)^2 holds whatever the gap), with no more operator
    products than the angle test needs."""
    gap = 1e-5
    values = np.concatenate([edge_bulk(399)[:-1], [1.0, 1.0 + gap]])
    matrix, q = random_symmetric(values, 6)
    rng = np.random.default_rng(9)
    order = np.argsort(values)[::-1]
    # a direction spread over the top pair and the bulk (overlaps ~0.5 and ~0.3 with the
    # top vectors: the hard case), and one almost orthogonal to both
    directions = np.stack(
        [
            q[:, order[0]] + 0.8 * q[:, order[1]] + 0.3 * q[:, order[5]],
            rng.standard_normal(values.size),
        ],
        axis=1,
    )
    directions /= np.sqrt(np.sum(directions**2, axis=0))
    counted: dict[str, int] = {}

    def run(name: str, **options) -> tuple[np.ndarray, np.ndarray]:
        counted[name] = 0

        def apply(block: np.ndarray) -> np.ndarray:
            counted[name] += block.shape[1]
            return matrix @ block

        start = np.random.default_rng(5).standard_normal((values.size, 4))
        found = _linalg.block_lanczos_top(
            apply, start, 4, 2, rng=np.random.default_rng(6), **options
        )
        assert found is not None
        return found

    found_values, vectors = run("overlaps", directions=directions)
    run("angles")
    np.testing.assert_allclose(found_values, np.sort(values)[::-1][:4], rtol=1e-10)
    exact = (q[:, order[:2]].T @ directions) ** 2
    np.testing.assert_allclose((vectors.T @ directions) ** 2, exact, rtol=0, atol=1e-7)
    assert counted["overlaps"] <= counted["angles"]


def test_stop_rule_bounds() -> None:
    """``converged`` on hand-made Ritz data: the Kato-Temple bound r^2/gap accepts a value
    whose residual alone would not; a vector needs r/gap (gap less the neighbour's
    residual) below the tolerance; with overlap cosines the bound is 2 a cos + a^2."""
    values = np.array([2.0, 1.0, 0.5])
    # value 1: r = 1e-6, gap 1 - 1e-6: error bound 1e-12 <= 1e-10 * 2, vector angle 1e-6
    residuals = np.array([1e-6, 1e-12, 1e-12])
    assert _linalg.converged(values, residuals, 2, 0, 1e-10, 1e-7)
    assert not _linalg.converged(values, residuals, 2, 1, 1e-10, 1e-7)  # angle 1e-6
    assert _linalg.converged(values, residuals, 2, 1, 1e-10, 1e-5)
    # overlaps: cos 0.01 -> 2e-6 * 0.01 + 1e-12 <= 1e-7; cos 0.5 -> 1e-6 > 1e-7
    assert _linalg.converged(values, residuals, 2, 1, 1e-10, 1e-7, np.array([0.01]))
    assert not _linalg.converged(values, residuals, 2, 1, 1e-10, 1e-7, np.array([0.5]))
    # the gap is less the neighbour's residual, clipped at 0
    np.testing.assert_allclose(
        _linalg._ritz_gaps(values, np.array([0.0, 0.999, 0.0])), [0.001, 0.5, 0.0], atol=1e-15
    )


@pytest.mark.parametrize("rough_kind", ["float32", "wrong_matrix"])
def test_warm_start_keeps_the_exact_stop_rule(rough_kind: str) -> None:
    """shared_operator_top_eigenpairs with a rough operator (the top route's warm start):
    the results are those of the exact operator to the same tolerances whatever the rough
    one is - float32 products (what the top route uses) or a different matrix altogether
    (a useless start: accuracy must come from the exact iteration alone). Two operators in
    lockstep, a near-degenerate top pair (relative gap 1e-5) in the first."""
    n = 400
    first_values = np.concatenate([edge_bulk(n - 1)[:-1], [1.0, 1.0 + 1e-5]])
    second_values = np.concatenate([edge_bulk(n - 1), [2.0]])
    matrices = [random_symmetric(first_values, 10), random_symmetric(second_values, 11)]
    wrong, _ = random_symmetric(np.linspace(0.0, 1.0, n), 12)
    rough_matrices = (
        [matrix.astype(np.float32) for matrix, _ in matrices]
        if rough_kind == "float32"
        else [wrong, wrong]
    )

    def operators(dense: list[np.ndarray]):
        def apply_all(blocks):
            return [
                None if block is None else (matrix @ block.astype(matrix.dtype)).astype(np.float64)
                for matrix, block in zip(dense, blocks, strict=True)
            ]

        return apply_all

    rng = np.random.default_rng(13)
    starts = [rng.standard_normal((n, 8)), rng.standard_normal((n, 12))]
    found = _linalg.shared_operator_top_eigenpairs(
        operators([matrix for matrix, _ in matrices]),
        starts,
        [4, 3],
        [2, 2],
        rng,
        rough_apply_all=operators(rough_matrices),
    )
    for (values, vectors), (_, q), spectrum in zip(
        found, matrices, (first_values, second_values), strict=True
    ):
        order = np.argsort(spectrum)[::-1]
        np.testing.assert_allclose(values, spectrum[order][: values.size], rtol=1e-10)
        cosines = np.abs(np.sum(vectors * q[:, order[:2]], axis=0))
        assert np.all(1.0 - cosines**2 <= 1e-14), 1.0 - cosines**2


def test_warm_start_blocks_are_the_rough_top_ritz_vectors() -> None:
    """warm_start_blocks returns, for each operator, ``n_values + REFINE_EXTRA_COLUMNS``
    orthonormal columns (fewer than the start's 8) whose span holds the wanted top
    eigenvectors of the rough operator to the rough tolerance (ROUGH_VECTOR_TOL = 3e-4 in
    angle; tested: sin^2 <= 1e-6), and the start itself when the rough iteration cannot
    converge within its budget."""
    n = 400
    values = np.concatenate([edge_bulk(n - 2), [1.3, 2.0]])
    matrix, q = random_symmetric(values, 14)
    rng = np.random.default_rng(15)
    start = rng.standard_normal((n, 8))
    (block,) = _linalg.warm_start_blocks(
        lambda blocks: [matrix @ blocks[0]], [start], [3], [3], rng
    )
    width = 3 + _linalg.REFINE_EXTRA_COLUMNS
    assert width < 8
    assert block.shape == (n, width)
    np.testing.assert_allclose(block.T @ block, np.eye(width), atol=1e-12)
    top = q[:, np.argsort(values)[::-1][:3]]
    captured = np.sum((block.T @ top) ** 2, axis=0)  # cos^2 of each vector to the span
    assert np.all(1.0 - captured <= 1e-6), 1.0 - captured
    tiny = np.random.default_rng(16).standard_normal((n, 4))
    # a budget of one block: no convergence, the start comes back unchanged
    (unchanged,) = _linalg.warm_start_blocks(
        lambda blocks: [matrix @ blocks[0]], [tiny], [3], [3], rng, max_columns=4
    )
    assert unchanged is tiny


def test_exact_iteration_after_a_warm_start_runs_narrow_blocks() -> None:
    """After a converged warm start the exact iteration multiplies blocks of ``n_values +
    REFINE_EXTRA_COLUMNS`` columns (the top route's cost at large d is per column), and
    without a rough operator it keeps the start's width; the results are the exact
    operator's either way (values to 1e-10, vectors to sin^2 <= 1e-14)."""
    n = 400
    values = np.concatenate([edge_bulk(n - 2), [1.3, 2.0]])
    matrix, q = random_symmetric(values, 17)
    widths: dict[str, set[int]] = {"exact": set(), "rough": set()}

    def operator(dense: np.ndarray, name: str):
        def apply_all(blocks):
            widths[name].add(blocks[0].shape[1])
            return [(dense @ blocks[0].astype(dense.dtype)).astype(np.float64)]

        return apply_all

    order = np.argsort(values)[::-1]
    for rough in (operator(matrix.astype(np.float32), "rough"), None):
        widths["exact"].clear()
        start = np.random.default_rng(18).standard_normal((n, 10))
        ((found, vectors),) = _linalg.shared_operator_top_eigenpairs(
            operator(matrix, "exact"),
            [start],
            [4],
            [2],
            np.random.default_rng(19),
            rough_apply_all=rough,
        )
        assert widths["exact"] == ({4 + _linalg.REFINE_EXTRA_COLUMNS} if rough else {10})
        np.testing.assert_allclose(found, values[order][:4], rtol=1e-10)
        cosines = np.abs(np.sum(vectors * q[:, order[:2]], axis=0))
        assert np.all(1.0 - cosines**2 <= 1e-14), 1.0 - cosines**2
    assert widths["rough"] == {10}
