"""Steps shared by the routes of :func:`attnrmt.model.simulate_cell` (argument and seed
checks, rank-one terms, the readout, the sample-route choice and spectrum; docs/model.md,
"Full cells"). Private to :mod:`attnrmt.model`."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any

import numpy as np

from attnrmt._validation import check_int, check_positive
from attnrmt.model._linalg import (
    lower_gram,
    spectrum_and_top_eigenvectors,
)
from attnrmt.model.readout import ridge_readout_accuracy


def check_seed(seed: Any) -> int | list[int]:
    def _word(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise ValueError(f"seed={seed!r}: must be a non-negative int or a sequence of them")
        return int(value)

    if isinstance(seed, Sequence | np.ndarray) and not isinstance(seed, str | bytes):
        words = [_word(value) for value in seed]
        if not words:
            raise ValueError(f"seed={seed!r}: an empty sequence is not a seed")
        return words
    return _word(seed)


def cell_streams(seed: Any) -> tuple[np.random.Generator, ...]:
    """The four random streams of a cell, in their fixed order: table, signs (labels of a
    K-class cell), tokens, solver, from ``SeedSequence(seed).spawn(4)`` (docs/model.md,
    "The generative model"). ``seed`` is checked (:func:`check_seed`). O(1)."""
    return tuple(
        np.random.default_rng(child) for child in np.random.SeedSequence(check_seed(seed)).spawn(4)
    )


def check_cell_arguments(
    d: Any, delta: Any, gamma: Any, T: Any, snr: Any, centered: Any, top_k: Any, K: int = 2
) -> tuple[int, float, float, int, float, bool, int, int, int]:
    """The checked arguments of a cell with ``K`` token classes and ``V = K round(d / (K
    delta))``, ``N = round(d / gamma)`` (docs/model.md, "Sizes and ratios"); ``top_k``
    None is ``min(K + 1, d)``. Raises ValueError naming the argument. O(1)."""
    d = check_int("d", d, minimum=max(2, K))
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
    top_k = min(K + 1, d) if top_k is None else check_int("top_k", top_k, minimum=1)
    if top_k > d:
        raise ValueError(f"top_k={top_k!r}: must be <= d={d}")
    V, N = K * round(d / (K * delta)), round(d / gamma)
    if V < K:
        raise ValueError(f"delta={delta!r}: gives V = {K} round(d/({K} delta)) = {V} < {K} (d={d})")
    if N < 2:
        raise ValueError(f"gamma={gamma!r}: gives N = round(d/gamma) = {N} < 2 (d={d})")
    return d, delta, gamma, T, snr, bool(centered), top_k, V, N


def add_rank_one_terms(
    product: np.ndarray, block: np.ndarray, terms: Sequence[tuple[float, np.ndarray]]
) -> np.ndarray:
    """``product += sum_i c_i v_i (v_i^T block)`` in place (O(d b) per term)."""
    for coefficient, vector in terms:
        if coefficient != 0.0:
            product += np.outer(coefficient * vector, vector @ block)
    return product


def readonly(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array, dtype=np.float64)
    array.setflags(write=False)
    return array


def cell_readout(pooled: np.ndarray | None, labels: np.ndarray | None) -> float:
    """Downstream accuracy of the ridge readout of ``y`` (NaN without labels; the pooled
    rows are formed whenever there are labels)."""
    if labels is None or pooled is None:
        return float("nan")
    return ridge_readout_accuracy(pooled, labels.astype(np.float64))


def sample_spectrum_from_samples(
    pooled: np.ndarray, centered: bool, top_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """All d eigenvalues of ``S`` and its top-k eigenvectors through ``X X^T / N`` (N x N, ``X``
    the pooled rows, centred when ``centered``) for ``N < d`` (docs/model.md, "Full cells"):
    an eigenvector ``z`` gives ``X^T z`` normalised. O(N^2 d + N^3) time, O(N d + N^2)
    memory."""
    n_samples, d = pooled.shape
    rows = pooled - pooled.mean(axis=0) if centered else pooled
    small_values, small_vectors = spectrum_and_top_eigenvectors(
        lower_gram(rows.T, 1.0 / n_samples), top_k
    )
    eigenvalues = np.concatenate([np.zeros(d - n_samples), small_values])
    eigenvalues.sort()
    vectors = rows.T @ small_vectors
    return eigenvalues, vectors / np.maximum(np.sqrt(np.sum(vectors**2, axis=0)), 1e-300)


def sample_through_tokens(d: int, V: int, n_samples: int, top_k: int) -> bool:
    """Whether the full route takes S through the tokens (:func:`_sample_spectrum_from_tokens`):
    for ``top_k < V < min(N, d)`` when its leading flop count ``V^2 d / 2 + 11 V^3 / 3``
    (``E E^T``, Cholesky, ``L^T B L``, reduction) is below the d route's ``N d^2 / 2 +
    4 d^3 / 3`` (``S``, reduction); docs/scaling.md, "The eigensolvers, measured". O(1)."""
    if not top_k < V < min(n_samples, d):
        return False
    return V**2 * d / 2 + 11 * V**3 / 3 < n_samples * d**2 / 2 + 4 * d**3 / 3


MAX_SNR = 1e100
"""Largest ``snr`` simulated: from about 1e130 on, sums of squares of the embeddings
overflow float64 (the transitions are at snr of order 1)."""
