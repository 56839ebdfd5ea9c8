"""The embedding table ``E`` and its class means (spec §1.2, §5).

Storage convention: ``embeddings`` has shape ``(V, d)`` and row ``v`` is ``e_v``, i.e. it is
the spec's ``E`` (d x V) transposed, so that gathering tokens reads contiguous rows.
Tokens ``0 .. V/2 - 1`` have class ``s_v = +1`` and tokens ``V/2 .. V - 1`` class ``-1``.
The signal direction is ``u = e_1`` (first coordinate axis): the noise ``z_v ~ N(0, I_d)``
is rotation invariant, so any fixed direction gives the same law.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class EmbeddingTable:
    """One draw of the table (spec §1.2) with the derived class means (spec §5).

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
    """``V = 2 round(d / (2 delta))`` and ``N = round(d / gamma)`` (spec §1.1).

    ``round`` is Python's (half to even). No validation here: see
    :func:`attnrmt.model.simulate_cell`.
    """
    return 2 * round(d / (2 * delta)), round(d / gamma)


def class_means(embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mbar, Dlt)`` of a table whose first half is class +1 (spec §5)."""
    half = embeddings.shape[0] // 2
    mean_plus = embeddings[:half].mean(axis=0)
    mean_minus = embeddings[half:].mean(axis=0)
    return 0.5 * (mean_plus + mean_minus), 0.5 * (mean_plus - mean_minus)


def sample_table(d: int, V: int, snr: float, rng: np.random.Generator) -> EmbeddingTable:
    """Draw ``E``: ``e_v = s_v mu + z_v`` with ``mu = sqrt(snr) e_1`` (spec §1.2).

    Parameters
    ----------
    d, V : int
        Dimension and (even) vocabulary size.
    snr : float
        ``||mu||^2``.
    rng : numpy.random.Generator
    """
    embeddings = rng.standard_normal((V, d))
    token_class = np.repeat(np.array([1, -1], dtype=np.int8), V // 2)
    embeddings[:, 0] += np.sqrt(snr) * token_class
    signal_direction = np.zeros(d)
    signal_direction[0] = 1.0
    table_mean, class_mean_difference = class_means(embeddings)
    return EmbeddingTable(
        embeddings=embeddings,
        token_class=token_class,
        signal_direction=signal_direction,
        table_mean=table_mean,
        class_mean_difference=class_mean_difference,
    )


def sample_tokens(signs: np.ndarray, V: int, rng: np.random.Generator) -> np.ndarray:
    """Token indices ``v_{n,t}``, uniform among the ``V/2`` tokens of class ``xi_{n,t}``.

    Returns an int64 array of the shape of ``signs`` (spec §1.4).
    """
    half = V // 2
    within_class = rng.integers(0, half, size=signs.shape, dtype=np.int64)
    return np.where(signs > 0, within_class, within_class + half)


__all__ = ["EmbeddingTable", "class_means", "realised_sizes", "sample_table", "sample_tokens"]
