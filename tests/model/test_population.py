"""The population matrix ``pop_*`` against the covariance of many pooled vectors.

Conditional on the table ``E``, a pooled vector ``c = sum_t w_t e_{v_t}`` has mean
``sigma mbar`` and covariance
``Sigma_E = kappa (1/V) E E^T - kappa mbar mbar^T + (alpha - kappa) Dlt Dlt^T``
(docs/model.md, "Population matrix"). The reference here is independent of that formula and
of the model's samplers: it draws ``M = 400,000`` sign sequences with a sampler written here
from the definition of the prefix model (one shared sign on the first ``L`` positions, iid
signs after), draws tokens uniformly inside each sign's class, pools with plain numpy and
forms the empirical covariance (centred) or second moment (uncentred). Only the table is
shared with the code (it is the conditioning).

Tolerances (measured spread; ``python -m benchmarks.seed_groups
tests.model.test_population`` repeats the pass rates): each entry of the empirical matrix
has standard error ``se_ij = sqrt(Var(c_i c_j) / M)``, estimated from the same draws.
Measured ``max_ij |empirical - formula| / se_ij`` over the 210 distinct entries, on 40
tables (seeds 0-39) times centred/uncentred: median 2.8, largest 4.4 (the largest of 210
standard normals is ~3); ``Z_MAX = 5.5`` (P(|z| > 5.5) = 4e-8 per entry). The quadratic
forms along ``e_1``, ``mbar`` and ``Dlt`` are compared with ``Z_MAX`` times the bound
``|u|^T se |u|`` of their standard error (measured ratio at most 1.9). Against the cell's
own fields: ``|pop_top / eig(empirical) - 1|`` at most 0.66% (top 3), bound 1.5%;
``|pop_overlap - overlap(empirical)|`` at most 0.0023, bound 0.01.

Pass rate: 40/40 disjoint groups of one table (seeds 0-39) with
``benchmarks/seed_groups.py``.

Breaking the code on purpose (scratch edits of ``model/cell.py:population_matrix``,
restored): ``alpha - kappa`` -> ``alpha`` fails with z = 270 on entry (0, 0); dropping the
``-kappa mbar mbar^T`` term fails with z = 33; ``sigma**2`` -> ``sigma`` (uncentred) fails
with z = 15. A 3% error in the ``mbar`` coefficient passes these sampling tests; the exact
tests below (enumeration at tiny sizes, no sampling noise) catch it: ``-kappa`` ->
``-1.03 kappa`` in ``population_rank_one_terms`` gives a coefficient 3.0% off and the
matrix 1.2% of its largest entry off (tolerance 1e-12; 11 of the 12 exact cases fail, the
V x V route of a centred cell clips ``kappa + c_1 < 0`` to 0 and hides it there), and
``sigma**2`` -> ``1.03 sigma**2`` (uncentred) gives 4.8% and 1.9%.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator

import numpy as np
import pytest

from attnrmt.model import simulate_cell
from attnrmt.model.cell import (
    lower_gram,
    population_matrix,
    population_rank_one_terms,
    population_rows,
)
from attnrmt.model.table import EmbeddingTable, realised_sizes, sample_table

D = 20
DELTA = 0.5
T = 4
PREFIX_L = 3
SNR = 2.0
# unequal weights so that alpha != kappa != sigma^2 / T and sigma != 1 (every term matters)
WEIGHTS = np.array([0.6, 0.3, 0.2, 0.1])  # sigma = 1.2
N_POOLED = 400_000
CHUNK = 50_000
Z_MAX = 5.5
EIGENVALUE_RTOL = 0.015
OVERLAP_ATOL = 0.01
SEEDS = (0,)


def prefix_correlation(T: int, L: int) -> np.ndarray:
    """``R`` of the prefix model from its definition: 1 inside the leading L x L block."""
    R = np.eye(T)
    R[:L, :L] = 1.0
    return R


@functools.cache
def table_of_cell(seed: int) -> EmbeddingTable:
    """The table :func:`simulate_cell` draws for ``seed`` (its first child stream)."""
    V, _ = realised_sizes(D, DELTA, 0.5)
    table_stream = np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[0])
    return sample_table(D, V, SNR, table_stream)


@functools.cache
def pooled_moments(seed: int) -> dict[str, np.ndarray]:
    """Empirical mean, second moment and ``E[c_i^2 c_j^2]`` of ``N_POOLED`` pooled vectors.

    Signs: prefix model drawn here (shared sign on the first ``PREFIX_L`` positions); tokens
    uniform among the ``V/2`` tokens of their sign's class (first half of the rows = +1).
    O(N_POOLED T d) time, O(CHUNK T d + d^2) memory.
    """
    embeddings = table_of_cell(seed).embeddings
    rng = np.random.default_rng([seed, 2024])
    V, d = embeddings.shape
    half = V // 2
    total = np.zeros(d)
    second = np.zeros((d, d))
    fourth = np.zeros((d, d))
    for start in range(0, N_POOLED, CHUNK):
        n = min(CHUNK, N_POOLED - start)
        signs = rng.choice([-1, 1], size=(n, T))
        signs[:, :PREFIX_L] = rng.choice([-1, 1], size=(n, 1))
        tokens = rng.integers(0, half, size=(n, T)) + np.where(signs > 0, 0, half)
        pooled = np.einsum("t,ntd->nd", WEIGHTS, embeddings[tokens])
        total += pooled.sum(axis=0)
        second += pooled.T @ pooled
        squared = pooled**2
        fourth += squared.T @ squared
    return {"mean": total / N_POOLED, "second": second / N_POOLED, "fourth": fourth / N_POOLED}


def formula_matrix(table: EmbeddingTable, centered: bool) -> np.ndarray:
    """The code's population matrix for ``table``, symmetrised from its lower triangle.

    alpha, kappa, sigma and the class means are computed here from their definitions.
    """
    R = prefix_correlation(T, PREFIX_L)
    alpha, kappa, sigma = WEIGHTS @ R @ WEIGHTS, WEIGHTS @ WEIGHTS, WEIGHTS.sum()
    E = table.embeddings
    half = E.shape[0] // 2
    mean_plus, mean_minus = E[:half].mean(axis=0), E[half:].mean(axis=0)
    terms = population_rank_one_terms(
        (mean_plus + mean_minus) / 2, (mean_plus - mean_minus) / 2, alpha, kappa, sigma, centered
    )
    lower = population_matrix(lower_gram(E, kappa / E.shape[0]), terms)
    full = np.tril(lower)
    return full + np.tril(full, -1).T


def empirical_matrix(moments: dict[str, np.ndarray], centered: bool) -> np.ndarray:
    mean = moments["mean"]
    return moments["second"] - np.outer(mean, mean) if centered else moments["second"]


def standard_errors(moments: dict[str, np.ndarray]) -> np.ndarray:
    """``sqrt(Var(c_i c_j) / M)`` (the mean's own O(1/M) correction is negligible)."""
    return np.sqrt((moments["fourth"] - moments["second"] ** 2) / N_POOLED)


def top_eigenpairs(matrix: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    values, vectors = np.linalg.eigh(matrix)
    return values[::-1][:k], vectors[:, ::-1][:, :k]


def cases(seeds: tuple[int, ...]) -> Iterator[tuple[int, EmbeddingTable, dict, bool]]:
    """``(seed, table, moments of its pooled vectors, centered)``, both centrings per seed."""
    for seed in seeds:
        for centered in (True, False):
            yield seed, table_of_cell(seed), pooled_moments(seed), centered


def check_formula_matches_empirical(seeds: tuple[int, ...]) -> None:
    """Every entry and the quadratic forms along e_1, mbar, Dlt, within Z_MAX se."""
    for seed, table, moments, centered in cases(seeds):
        se = standard_errors(moments)
        formula = formula_matrix(table, centered)
        empirical = empirical_matrix(moments, centered)
        z = np.abs(empirical - formula) / se
        worst = np.unravel_index(np.argmax(z), z.shape)
        assert z.max() < Z_MAX, (seed, centered, worst, float(z.max()))
        for name, direction in (
            ("signal", table.signal_direction),
            ("table_mean", table.table_mean),
            ("class_mean", table.class_mean_difference),
        ):
            u = direction / np.linalg.norm(direction)
            # Var((u.c)^2) <= 2 (u^T C u)^2 + fourth-cumulant part; bound it from the
            # entries' own errors: |u^T X u| <= sum_ij |u_i||u_j| |X_ij|
            form_se = np.abs(u) @ se @ np.abs(u)
            gap = abs(u @ (empirical - formula) @ u)
            assert gap < Z_MAX * form_se, (seed, centered, name, gap / form_se)


def check_cell_pop_fields_match_empirical(seeds: tuple[int, ...]) -> None:
    """simulate_cell's pop_top_eigenvalues / pop_overlap_signal for the same table."""
    for seed, table, moments, centered in cases(seeds):
        result = simulate_cell(
            D,
            DELTA,
            0.5,
            T,
            {"kind": "prefix", "L": PREFIX_L},
            {"kind": "custom", "values": WEIGHTS.tolist()},
            SNR,
            centered=centered,
            top_k=3,
            seed=seed,
        )
        np.testing.assert_array_equal(result.effective_weights, WEIGHTS)
        values, vectors = top_eigenpairs(empirical_matrix(moments, centered), 3)
        np.testing.assert_allclose(
            result.pop_top_eigenvalues, values, rtol=EIGENVALUE_RTOL, err_msg=f"seed {seed}"
        )
        overlap = (vectors[:, 0] @ table.signal_direction) ** 2
        assert result.pop_overlap_signal[0] == pytest.approx(overlap, abs=OVERLAP_ATOL)


def test_population_matrix_is_the_covariance_of_pooled_vectors() -> None:
    check_formula_matches_empirical(SEEDS)


def test_cell_population_fields_match_the_empirical_covariance() -> None:
    check_cell_pop_fields_match_empirical(SEEDS)


# --------------------------------------------------------------------------- exact, tiny
#
# The covariance (centred) or second moment (uncentred) of the pooled vector given the
# table, computed exactly by enumeration: every token tuple (v_1, ..., v_T) in {0..V-1}^T
# has probability P(xi = s(v)) (2/V)^T, with s(v) the classes of its tokens and P(xi) the
# Markov chain's law written here from its definition (fair first sign, each next sign
# kept with probability (1 + r)/2). The pooled vector of a tuple is sum_t w_t e_{v_t}.
# Nothing of the code's formula, samplers or R is used, only the table. At V^T <= 216
# tuples the sums are exact to rounding: the code's matrix must match to 1e-12 of its
# largest entry (measured: <= 4e-16; the V x V route's Y^T Y <= 6e-16), and its rank-one
# coefficients, read off the exact matrix by least squares on
# (exact - (kappa/V) E^T E) = c_1 mbar mbar^T + c_2 Dlt Dlt^T (residual measured <= 6e-16
# of the largest entry: the formula's form is exact), must match to 1e-12 relative
# (measured <= 8e-15). The cells' eigenvalues: <= 4e-16 of the largest, overlaps <= 9e-16.

EXACT_T = 3
EXACT_R = 0.4  # markov
EXACT_WEIGHTS = np.array([0.5, 0.3, 0.2])  # alpha, kappa, sigma^2 and 1 all differ
EXACT_SNR = 2.0
EXACT_RTOL = 1e-12
#: (d, delta, top_k): V = 6 >= d (the d x d route), and V = 4 < d = 8 (the V x V route of
#: ``population_rows``, taken for top_k < V < d).
EXACT_CASES = ((3, 0.5, 3), (8, 2.0, 3))


def markov_sign_probabilities(signs: np.ndarray, r: float) -> np.ndarray:
    """``P(xi)`` of the stationary two-state chain for sign rows ``signs`` (n, T)."""
    kept = signs[:, 1:] == signs[:, :-1]
    return 0.5 * np.prod(np.where(kept, (1 + r) / 2, (1 - r) / 2), axis=1)


def exact_pooled_moment(embeddings: np.ndarray, centered: bool) -> np.ndarray:
    """``Cov(c | E)`` (centred) or ``E[c c^T | E]`` by enumeration of all token tuples.

    O(V^T (T d + d^2)) time, O(V^T d) memory.
    """
    V = embeddings.shape[0]
    tuples = np.array(list(itertools.product(range(V), repeat=EXACT_T)))
    signs = np.where(tuples < V // 2, 1, -1)
    probability = markov_sign_probabilities(signs, EXACT_R) * (2.0 / V) ** EXACT_T
    assert probability.sum() == pytest.approx(1.0, rel=1e-14)
    pooled = np.einsum("t,ntd->nd", EXACT_WEIGHTS, embeddings[tuples])
    mean = probability @ pooled
    second = (pooled * probability[:, None]).T @ pooled
    return second - np.outer(mean, mean) if centered else second


def exact_table(d: int, delta: float, seed: int) -> EmbeddingTable:
    """The table ``simulate_cell`` draws at ``(d, delta, seed)`` (its first child stream)."""
    V, _ = realised_sizes(d, delta, 0.5)
    stream = np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[0])
    return sample_table(d, V, EXACT_SNR, stream)


def definition_scalars() -> tuple[float, float, float]:
    """``alpha = w^T R w`` with ``R = r^|t-t'|``, ``kappa = ||w||^2``, ``sigma = sum w``."""
    t = np.arange(EXACT_T)
    R = EXACT_R ** np.abs(t[:, None] - t[None, :])
    w = EXACT_WEIGHTS
    return float(w @ R @ w), float(w @ w), float(w.sum())


def table_means(embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mbar, Dlt)`` from their definitions (first half of the rows is class +1)."""
    half = embeddings.shape[0] // 2
    plus, minus = embeddings[:half].mean(axis=0), embeddings[half:].mean(axis=0)
    return (plus + minus) / 2, (plus - minus) / 2


@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize(("d", "delta", "top_k"), EXACT_CASES)
def test_population_matrix_and_its_rank_one_coefficients_are_exact(
    d: int, delta: float, top_k: int, centered: bool
) -> None:
    """``population_matrix``, ``population_rows`` and the coefficients of
    ``population_rank_one_terms`` equal the exact conditional moment (enumeration)."""
    table = exact_table(d, delta, seed=5)
    E = table.embeddings
    V = E.shape[0]
    exact = exact_pooled_moment(E, centered)
    scale = np.abs(exact).max()
    alpha, kappa, sigma = definition_scalars()
    mbar, dlt = table_means(E)
    # the rank-one coefficients, read off the exact matrix
    remainder = exact - (kappa / V) * E.T @ E
    basis = np.stack([np.outer(mbar, mbar).ravel(), np.outer(dlt, dlt).ravel()], axis=1)
    coefficients, *_ = np.linalg.lstsq(basis, remainder.ravel(), rcond=None)
    assert np.abs(basis @ coefficients - remainder.ravel()).max() <= EXACT_RTOL * scale
    terms = population_rank_one_terms(mbar, dlt, alpha, kappa, sigma, centered)
    np.testing.assert_array_equal(terms[0][1], mbar)
    np.testing.assert_array_equal(terms[1][1], dlt)
    np.testing.assert_allclose([terms[0][0], terms[1][0]], coefficients, rtol=EXACT_RTOL)
    # the d x d matrix (lower triangle) and the V x V route's rows Y (P = Y^T Y)
    lower = np.tril(population_matrix(lower_gram(E, kappa / V), terms))
    np.testing.assert_allclose(lower + np.tril(lower, -1).T, exact, rtol=0, atol=EXACT_RTOL * scale)
    rows = population_rows(table, terms, kappa)
    np.testing.assert_allclose(rows.T @ rows, exact, rtol=0, atol=EXACT_RTOL * scale)


@pytest.mark.parametrize("spectrum", ["full", "top"])
@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize(("d", "delta", "top_k"), EXACT_CASES)
def test_cell_population_fields_are_the_exact_matrix_eigenpairs(
    d: int, delta: float, top_k: int, centered: bool, spectrum: str
) -> None:
    """A cell's ``pop_top_eigenvalues`` and ``pop_overlap_signal`` (either route) are the
    top eigenpairs of the exact conditional moment of its own table (1e-12 of the largest
    eigenvalue; overlaps 1e-9: the top eigenvalues are well separated)."""
    result = simulate_cell(
        d,
        delta,
        0.5,
        EXACT_T,
        {"kind": "markov", "r": EXACT_R},
        {"kind": "custom", "values": EXACT_WEIGHTS.tolist()},
        EXACT_SNR,
        centered=centered,
        top_k=top_k,
        seed=5,
        spectrum=spectrum,
    )
    assert (result.alpha, result.kappa, result.sigma) == pytest.approx(
        definition_scalars(), rel=1e-14
    )
    values, vectors = top_eigenpairs(
        exact_pooled_moment(exact_table(d, delta, 5).embeddings, centered), top_k
    )
    np.testing.assert_allclose(
        result.pop_top_eigenvalues, values, rtol=0, atol=EXACT_RTOL * values[0]
    )
    np.testing.assert_allclose(result.pop_overlap_signal, vectors[0] ** 2, rtol=0, atol=1e-9)


# disjoint seed groups: python -m benchmarks.seed_groups tests.model.test_population
SEED_GROUP_CHECKS = {
    "population_matrix": (check_formula_matches_empirical, SEEDS),
    "cell_pop_fields": (check_cell_pop_fields_match_empirical, SEEDS),
}
