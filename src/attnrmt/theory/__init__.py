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
