"""The exact generative model and its one simulator (docs/model.md, "The generative model",
"Weights", "Pooling scalars", "Spikes", "K classes"). The public names, fixed by
docs/architecture.md ("The doors", ``attnrmt.model``), are listed in ``_EXPORTS``:
:func:`simulate_cell` -> :class:`CellResult` (routes ``full`` / ``top``, an snr curve, K
classes), the positional, weight, table and K-class label models and their laws, and
the readout."""

from attnrmt._lazy import lazy_door

#: Where each public name lives, imported on first use (attnrmt._lazy), so validating a
#: config (positional, weight and table models) does not import the cell and scipy.
_EXPORTS = {
    "CellResult": "attnrmt.model.cell",
    "LABEL_KINDS": "attnrmt.model.classes",
    "MEANS_PRESETS": "attnrmt.model.classes",
    "class_mean_gram": "attnrmt.model.classes",
    "class_pooling_weights": "attnrmt.model.classes",
    "class_theory_inputs": "attnrmt.model.classes",
    "label_pair_law": "attnrmt.model.classes",
    "optimal_class_weights": "attnrmt.model.classes",
    "sample_labels": "attnrmt.model.classes",
    "signal_matrix": "attnrmt.model.classes",
    "validate_label_model": "attnrmt.model.classes",
    "simulate_cell": "attnrmt.model.cell",
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

__all__ = sorted(_EXPORTS)
