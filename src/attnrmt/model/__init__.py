"""The exact generative model and one simulation cell.

The model is specified in docs/model.md ("The generative model", "Weights", "Pooling
scalars", and "Spikes" for the population covariance given the table).

Public interface (names fixed by docs/architecture.md):

- :func:`simulate_cell` -> :class:`CellResult`
- :func:`simulate_curve` -> list of :class:`CellResult` (a whole snr curve of one
  replicate from one decomposition; docs/model.md, "Curves: one decomposition per
  replicate")
- positional models: :func:`validate_positional`, :func:`positional_correlation`,
  :func:`sample_signs`
- pooling weights: :func:`validate_weights`, :func:`pooling_weights`,
  :func:`pooling_scalars`, :func:`harmonic_weights`, :func:`causal_limit_weights`,
  :func:`optimal_weights`
- table laws: :func:`validate_table`, :func:`table_moments`, :func:`table_no_theory`,
  :data:`TABLE_KINDS`
- extras: :func:`realised_sizes` (V, N from d, delta, gamma),
  :func:`causal_attention_weights`, :func:`ridge_readout_accuracy`
- K token classes (docs/model.md, "K classes"): :func:`simulate_classes_cell` ->
  :class:`ClassesCellResult`, :func:`class_mean_gram`, :func:`validate_label_model`,
  :func:`label_pair_law`, :func:`sample_labels`, :func:`signal_matrix`,
  :func:`optimal_class_weights`, :func:`class_pooling_weights`, :func:`class_theory_inputs`
"""

from attnrmt._lazy import lazy_door

#: Where each public name lives, imported on first use (attnrmt._lazy), so validating a
#: config (positional, weight and table models) does not import the cell and scipy.
_EXPORTS = {
    "CellResult": "attnrmt.model.cell",
    "ClassesCellResult": "attnrmt.model.classes",
    "LABEL_KINDS": "attnrmt.model.classes",
    "MEANS_PRESETS": "attnrmt.model.classes",
    "class_mean_gram": "attnrmt.model.classes",
    "class_pooling_weights": "attnrmt.model.classes",
    "class_theory_inputs": "attnrmt.model.classes",
    "label_pair_law": "attnrmt.model.classes",
    "optimal_class_weights": "attnrmt.model.classes",
    "sample_labels": "attnrmt.model.classes",
    "signal_matrix": "attnrmt.model.classes",
    "simulate_classes_cell": "attnrmt.model.classes",
    "validate_label_model": "attnrmt.model.classes",
    "simulate_cell": "attnrmt.model.cell",
    "simulate_curve": "attnrmt.model.curve",
    "POSITIONAL_KINDS": "attnrmt.model.positional",
    "positional_correlation": "attnrmt.model.positional",
    "sample_signs": "attnrmt.model.positional",
    "validate_positional": "attnrmt.model.positional",
    "ridge_readout_accuracy": "attnrmt.model.readout",
    "realised_sizes": "attnrmt.model.table",
    "TABLE_KINDS": "attnrmt.model.table_laws",
    "table_moments": "attnrmt.model.table_laws",
    "table_no_theory": "attnrmt.model.table_laws",
    "validate_table": "attnrmt.model.table_laws",
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


__getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

__all__ = [
    "BUILTIN_WEIGHTS",
    "LABEL_KINDS",
    "MEANS_PRESETS",
    "POSITIONAL_KINDS",
    "TABLE_KINDS",
    "WEIGHT_KINDS",
    "CellResult",
    "ClassesCellResult",
    "causal_attention_weights",
    "causal_limit_weights",
    "class_mean_gram",
    "class_pooling_weights",
    "class_theory_inputs",
    "harmonic_weights",
    "label_pair_law",
    "optimal_class_weights",
    "optimal_weights",
    "pooling_scalars",
    "pooling_weights",
    "positional_correlation",
    "realised_sizes",
    "ridge_readout_accuracy",
    "sample_labels",
    "sample_signs",
    "signal_matrix",
    "simulate_cell",
    "simulate_classes_cell",
    "simulate_curve",
    "table_moments",
    "table_no_theory",
    "validate_label_model",
    "validate_positional",
    "validate_table",
    "validate_weights",
]
