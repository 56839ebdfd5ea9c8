"""The exact generative model and one simulation cell.

The model is specified in docs/model.md ("The generative model", "Weights", "Pooling
scalars", and "Spikes" for the population covariance given the table).

Public interface (names fixed by docs/architecture.md):

- :func:`simulate_cell` -> :class:`CellResult`
- positional models: :func:`validate_positional`, :func:`positional_correlation`,
  :func:`sample_signs`
- pooling weights: :func:`validate_weights`, :func:`pooling_weights`,
  :func:`pooling_scalars`, :func:`harmonic_weights`, :func:`causal_limit_weights`,
  :func:`optimal_weights`
- extras: :func:`realised_sizes` (V, N from d, delta, gamma),
  :func:`causal_attention_weights`, :func:`ridge_readout_accuracy`
"""

import importlib
from typing import Any

#: Where each public name lives. The package imports a module on first use of one of its
#: names (PEP 562), so that validating a config (positional and weight models) does not
#: import the cell and its scipy dependencies: the Snakemake process never simulates, and
#: that import took ~0.4 s of every run's start (docs/scaling.md, "Pipeline overhead").
_EXPORTS = {
    "CellResult": "attnrmt.model.cell",
    "simulate_cell": "attnrmt.model.cell",
    "POSITIONAL_KINDS": "attnrmt.model.positional",
    "positional_correlation": "attnrmt.model.positional",
    "sample_signs": "attnrmt.model.positional",
    "validate_positional": "attnrmt.model.positional",
    "ridge_readout_accuracy": "attnrmt.model.readout",
    "realised_sizes": "attnrmt.model.table",
    "BUILTIN_WEIGHTS": "attnrmt.model.weights",
    "WEIGHT_KINDS": "attnrmt.model.weights",
    "causal_attention_weights": "attnrmt.model.weights",
    "causal_limit_weights": "attnrmt.model.weights",
    "harmonic_weights": "attnrmt.model.weights",
    "optimal_weights": "attnrmt.model.weights",
    "pooling_scalars": "attnrmt.model.weights",
    "pooling_weights": "attnrmt.model.weights",
    "validate_weights": "attnrmt.model.weights",
}


def __getattr__(name: str) -> Any:
    """The public name ``name``, importing its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "BUILTIN_WEIGHTS",
    "POSITIONAL_KINDS",
    "WEIGHT_KINDS",
    "CellResult",
    "causal_attention_weights",
    "causal_limit_weights",
    "harmonic_weights",
    "optimal_weights",
    "pooling_scalars",
    "pooling_weights",
    "positional_correlation",
    "realised_sizes",
    "ridge_readout_accuracy",
    "sample_signs",
    "simulate_cell",
    "validate_positional",
    "validate_weights",
]
