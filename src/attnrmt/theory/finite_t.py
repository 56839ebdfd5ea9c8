"""The noise bulk at finite sequence length ``T`` (docs/model.md, "Where the large-T bulk
holds").

``S0 = Z A Z^T`` with ``A = Q Q^T / N`` and ``Q`` the ``V x N`` matrix of pooled token
counts: each token is drawn about ``N T / V = T delta / gamma`` times, and the large-T bulk
``MP_delta ⊠ MP_gamma`` (:mod:`attnrmt.theory.bulk`) is accurate only when that count is
large.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from attnrmt._validation import check_positive

__all__ = ["FINITE_T_BOUND", "large_t_bulk_holds", "tokens_per_vocab"]

#: ``N T / V`` from which the large-T bulk is accurate
#: (docs/model.md, "Where the large-T bulk holds"): below it the largest noise
#: eigenvalue exceeds the usual finite-``d`` offset below the edge ``f(u*)``, increasingly
#: with ``d``.
FINITE_T_BOUND = 8.0


def tokens_per_vocab(delta: ArrayLike, gamma: ArrayLike, T: ArrayLike) -> NDArray[np.float64]:
    """Mean number of draws of each token, ``N T / V = T delta / gamma`` (docs/model.md,
    "Where the large-T bulk holds"); broadcast, O(size)."""
    return check_positive("T", T) * check_positive("delta", delta) / check_positive("gamma", gamma)


def large_t_bulk_holds(delta: ArrayLike, gamma: ArrayLike, T: ArrayLike) -> NDArray[np.bool_]:
    """Whether ``MP_delta ⊠ MP_gamma`` describes the noise bulk: ``T delta / gamma >=``
    :data:`FINITE_T_BOUND` (docs/model.md, "Where the large-T bulk holds"); broadcast, O(size)."""
    return np.asarray(tokens_per_vocab(delta, gamma, T) >= FINITE_T_BOUND)
