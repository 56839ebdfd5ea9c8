"""Asymptotic predictions: the bulk law and rank-one spikes
(docs/model.md, "Bulk law", "Spikes", "Textbook limits").

All functions broadcast over numpy arrays; bulk functions are in mean-1 units
(``kappa = 1``), spike eigenvalues in units of ``S``.

The pooling-weight formulas (``optimal_weights``, ``harmonic_weights``,
``causal_limit_weights``) live in :mod:`attnrmt.model.weights` and are re-exported here
lazily, so importing :mod:`attnrmt.theory` never requires the simulator. The K-class
spikes (docs/model.md, "K classes"; :mod:`attnrmt.theory.classes`) are imported on first
use of one of their names (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from attnrmt._validation import check_finite_array
from attnrmt.theory.bulk import (
    bulk_atom,
    bulk_cdf,
    bulk_density,
    bulk_edges,
    bulk_moments,
    critical_u,
)
from attnrmt.theory.predict import (
    THEORY_VARIABLES,
    along_table_laws,
    pooling_inputs,
    predict,
    predict_grid,
    predict_point,
    ratio_inputs,
)
from attnrmt.theory.spike import (
    VARIANTS,
    SpikeOutliers,
    SpikePrediction,
    critical_theta,
    mean_spike,
    spike,
    spike_outliers,
    theta_from_population,
    theta_from_sample,
)

_WEIGHT_FORMULAS = ("optimal_weights", "harmonic_weights", "causal_limit_weights")
#: K-class names, imported from their module on first use (PEP 562).
_EXPORTS = {
    "ClassSpikes": "attnrmt.theory.classes",
    "class_mean_gram_limit": "attnrmt.theory.classes",
    "class_spike_matrix": "attnrmt.theory.classes",
    "class_spikes": "attnrmt.theory.classes",
    "class_thresholds": "attnrmt.theory.classes",
    "predict_classes_grid": "attnrmt.theory.classes_grid",
}


def pooling_ratio(w: ArrayLike, R: ArrayLike) -> np.float64 | np.ndarray:
    """Signal-to-noise gain of pooling, ``alpha / kappa = w^T R w / ||w||^2``
    (docs/model.md, "Pooling scalars").

    Parameters
    ----------
    w : array_like, shape (..., T)
        Pooling weights (not all zero); leading axes broadcast.
    R : array_like, shape (T, T)
        Sign correlation matrix.

    Returns
    -------
    numpy.ndarray or numpy.float64
        ``alpha / kappa`` with the leading shape of ``w``.
    """
    weights = check_finite_array("w", w)
    correlation = check_finite_array("R", R)
    if weights.ndim < 1 or correlation.shape != (weights.shape[-1],) * 2:
        raise ValueError(
            f"R={R!r}: must have shape (T, T) matching w's last axis (T={weights.shape[-1:]})"
        )
    kappa = np.einsum("...t,...t->...", weights, weights)
    if np.any(kappa <= 0.0):
        raise ValueError(f"w={w!r}: must not be all zero")
    alpha = np.einsum("...s,st,...t->...", weights, correlation, weights)
    ratio = alpha / kappa
    return ratio[()] if np.ndim(ratio) == 0 else ratio


def __getattr__(name: str) -> Any:
    if name in _WEIGHT_FORMULAS:
        from attnrmt.model import weights as _weights

        return getattr(_weights, name)
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "THEORY_VARIABLES",
    "VARIANTS",
    "ClassSpikes",
    "SpikeOutliers",
    "SpikePrediction",
    "along_table_laws",
    "bulk_atom",
    "bulk_cdf",
    "bulk_density",
    "bulk_edges",
    "bulk_moments",
    "causal_limit_weights",
    "class_mean_gram_limit",
    "class_spike_matrix",
    "class_spikes",
    "class_thresholds",
    "critical_theta",
    "critical_u",
    "harmonic_weights",
    "mean_spike",
    "optimal_weights",
    "pooling_inputs",
    "pooling_ratio",
    "predict",
    "predict_classes_grid",
    "predict_grid",
    "predict_point",
    "ratio_inputs",
    "spike",
    "spike_outliers",
    "theta_from_population",
    "theta_from_sample",
]
