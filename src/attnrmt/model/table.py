"""The embedding table ``E`` and its class means (docs/model.md, "Embedding table", "Spikes").

Storage convention: ``embeddings`` has shape ``(V, d)`` and row ``v`` is ``e_v``, i.e. it is
the model's ``E`` (d x V) transposed, so that gathering tokens reads contiguous rows.
Tokens ``0 .. V/2 - 1`` have class ``s_v = +1`` and tokens ``V/2 .. V - 1`` class ``-1``.
The signal direction is ``u = e_1`` (first coordinate axis): the noise ``z_v ~ N(0, I_d)``
is rotation invariant, so any fixed direction gives the same law.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class EmbeddingTable:
    """One draw of the table
    (docs/model.md, "Embedding table") with the derived class means (docs/model.md, "Spikes").

    Attributes
    ----------
    embeddings : ndarray (V, d)
        ``e_v = s_v mu + z_v`` in row ``v``.
    token_class : ndarray of int8 (V,)
        ``s_v``: +1 for the first ``V/2`` rows, -1 for the rest.
    signal_direction : ndarray (d,)
        ``u = mu / ||mu||`` (``e_1``; defined even when ``snr = 0``).
    table_mean : ndarray (d,)
        ``mbar = (m_+ + m_-)/2``, the mean of all embeddings.
    class_mean_difference : ndarray (d,)
        ``Dlt = (m_+ - m_-)/2``.
    """

    embeddings: np.ndarray
    token_class: np.ndarray
    signal_direction: np.ndarray
    table_mean: np.ndarray
    class_mean_difference: np.ndarray

    @property
    def vocabulary_size(self) -> int:
        """``V``."""
        return int(self.embeddings.shape[0])

    @property
    def dimension(self) -> int:
        """``d``."""
        return int(self.embeddings.shape[1])


def realised_sizes(d: int, delta: float, gamma: float) -> tuple[int, int]:
    """``V = 2 round(d / (2 delta))`` and ``N = round(d / gamma)``
    (docs/model.md, "Sizes and ratios").

    ``round`` is Python's (half to even). No validation here: see
    :func:`attnrmt.model.simulate_cell`.
    """
    return 2 * round(d / (2 * delta)), round(d / gamma)


def class_means(embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mbar, Dlt)`` of a table whose first half is class +1 (docs/model.md, "Spikes")."""
    half = embeddings.shape[0] // 2
    mean_plus = embeddings[:half].mean(axis=0)
    mean_minus = embeddings[half:].mean(axis=0)
    return 0.5 * (mean_plus + mean_minus), 0.5 * (mean_plus - mean_minus)


# The table is drawn in a fixed number of row blocks, each from its own child generator,
# so the numbers do not depend on how many threads fill them.
_TABLE_BLOCKS_PER_CLASS = 2


def helper_threads() -> int:
    """Threads for the embarrassingly parallel fills: at most 2, at most the CPUs this
    process may use, and at most ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` /
    ``MKL_NUM_THREADS`` when set (a sweep worker pinned to one BLAS thread stays on one).
    """
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        available = os.cpu_count() or 1
    limits = [2, available]
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 0:
            limits.append(int(value))
    return max(1, min(limits))


def sample_table(d: int, V: int, snr: float, rng: np.random.Generator) -> EmbeddingTable:
    """Draw ``E``: ``e_v = s_v mu + z_v`` with ``mu = sqrt(snr) e_1``
    (docs/model.md, "Embedding table").

    The ``V x d`` Gaussian noise is filled in ``2 * _TABLE_BLOCKS_PER_CLASS`` row blocks,
    each from its own SFC64 generator seeded by a child of ``rng``'s seed sequence, in
    parallel threads
    (:func:`helper_threads`); the result does not depend on the thread count. The class
    sums are accumulated per block while it is hot in cache.

    Parameters
    ----------
    d, V : int
        Dimension and (even) vocabulary size.
    snr : float
        ``||mu||^2``.
    rng : numpy.random.Generator
    """
    half = V // 2
    embeddings = np.empty((V, d))
    token_class = np.repeat(np.array([1, -1], dtype=np.int8), half)
    edges = np.linspace(0, half, _TABLE_BLOCKS_PER_CLASS + 1).round().astype(int)
    blocks = [(start, stop) for start, stop in itertools.pairwise(edges) if stop > start]
    blocks += [(start + half, stop + half) for start, stop in blocks]
    # SFC64 (a small chaotic counter generator that passes BigCrush and PractRand) fills
    # normals ~20% faster than PCG64; each block gets its own child seed of ``rng``.
    generators = [
        np.random.Generator(np.random.SFC64(child))
        for child in rng.bit_generator.seed_seq.spawn(len(blocks))
    ]
    amplitude = np.sqrt(snr)

    def fill(index: int) -> np.ndarray:
        start, stop = blocks[index]
        rows = embeddings[start:stop]
        generators[index].standard_normal(out=rows)
        rows[:, 0] += amplitude * token_class[start]
        return rows.sum(axis=0)

    threads = min(helper_threads(), len(blocks))
    if threads > 1:
        with ThreadPoolExecutor(threads) as pool:
            block_sums = list(pool.map(fill, range(len(blocks))))
    else:
        block_sums = [fill(index) for index in range(len(blocks))]
    n_plus = len(blocks) // 2
    mean_plus = np.sum(block_sums[:n_plus], axis=0) / half
    mean_minus = np.sum(block_sums[n_plus:], axis=0) / half
    signal_direction = np.zeros(d)
    signal_direction[0] = 1.0
    return EmbeddingTable(
        embeddings=embeddings,
        token_class=token_class,
        signal_direction=signal_direction,
        table_mean=0.5 * (mean_plus + mean_minus),
        class_mean_difference=0.5 * (mean_plus - mean_minus),
    )


def sample_tokens(signs: np.ndarray, V: int, rng: np.random.Generator) -> np.ndarray:
    """Token indices ``v_{n,t}``, uniform among the ``V/2`` tokens of class ``xi_{n,t}``.

    Returns an int64 array of the shape of ``signs`` (docs/model.md, "Tokens, pooling and S").
    """
    half = V // 2
    within_class = rng.integers(0, half, size=signs.shape, dtype=np.int64)
    return np.where(signs > 0, within_class, within_class + half)


__all__ = [
    "EmbeddingTable",
    "class_means",
    "helper_threads",
    "realised_sizes",
    "sample_table",
    "sample_tokens",
]
