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
with z = 15.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np
import pytest

from attnrmt.model import simulate_cell
from attnrmt.model.cell import lower_gram, population_matrix
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
    lower = population_matrix(
        lower_gram(E, kappa / E.shape[0]),
        (mean_plus + mean_minus) / 2,
        (mean_plus - mean_minus) / 2,
        alpha,
        kappa,
        sigma,
        centered,
    )
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


# disjoint seed groups: python -m benchmarks.seed_groups tests.model.test_population
SEED_GROUP_CHECKS = {
    "population_matrix": (check_formula_matches_empirical, SEEDS),
    "cell_pop_fields": (check_cell_pop_fields_match_empirical, SEEDS),
}
