"""Helpers shared by the theory tests, imported as ``from tests.theory.conftest import ...``
(plain functions, so that the ``SEED_GROUP_CHECKS`` of a module can use them outside
pytest, as ``benchmarks/seed_groups.py`` does).

* :func:`ks_distance`: Kolmogorov-Smirnov distance of a spectrum to the bulk law
  (docs/model.md, "Bulk law"), O(n log n) for n eigenvalues.
"""

from __future__ import annotations

import numpy as np

from attnrmt.theory import bulk_cdf


def ks_distance(sample: np.ndarray, delta: float, gamma: float) -> float:
    """sup |ECDF - F| for ``F = bulk_cdf`` with its atom at 0 (left limit F(0-) = 0).

    Eigenvalues within 1e-9 of 0 (relative to the largest) are exact zeros up to rounding.
    """
    x = np.sort(np.asarray(sample, dtype=float))
    x = np.where(np.abs(x) <= 1e-9 * np.abs(x).max(), 0.0, x)
    n = x.size
    cdf = bulk_cdf(x, delta, gamma)
    cdf_left = np.where(x == 0.0, 0.0, cdf)  # the continuous part has no other jumps
    rank = np.arange(1, n + 1)
    return float(max(np.max(rank / n - cdf), np.max(cdf_left - (rank - 1) / n)))
