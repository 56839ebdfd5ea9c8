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

from attnrmt.model.cell import CellResult, simulate_cell
from attnrmt.model.positional import (
    POSITIONAL_KINDS,
    positional_correlation,
    sample_signs,
    validate_positional,
)
from attnrmt.model.readout import ridge_readout_accuracy
from attnrmt.model.table import realised_sizes
from attnrmt.model.weights import (
    BUILTIN_WEIGHTS,
    WEIGHT_KINDS,
    causal_attention_weights,
    causal_limit_weights,
    harmonic_weights,
    optimal_weights,
    pooling_scalars,
    pooling_weights,
    validate_weights,
)

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
