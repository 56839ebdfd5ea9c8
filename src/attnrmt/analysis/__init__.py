"""Analysis of sweep results: does the theory hold, which variant, where it breaks
(docs/model.md, "What the pipeline tests"; estimators: docs/thresholds.md). Small pure
functions over data shaped like ``cells.zarr`` / ``theory.zarr``; the rules call
:mod:`attnrmt.analysis.pipeline` and :mod:`attnrmt.analysis.figures` (the modules:
docs/architecture.md). Planted test data: ``tests/analysis/synthetic.py``."""

from attnrmt.analysis.bulk_fit import bulk_fit, ks_distance
from attnrmt.analysis.comparison import (
    comparison_table,
    theory_from_cells,
    thresholds_table,
    variant_summary,
)
from attnrmt.analysis.pipeline import analysis_dataset, analyze_sweep, write_tables
from attnrmt.analysis.thresholds import (
    estimate_thresholds,
    finite_size_fit,
    finite_size_thresholds,
    fit_threshold,
    theta_from_population,
    theta_from_sample,
)

__all__ = [
    "analysis_dataset",
    "analyze_sweep",
    "bulk_fit",
    "comparison_table",
    "estimate_thresholds",
    "finite_size_fit",
    "finite_size_thresholds",
    "fit_threshold",
    "ks_distance",
    "theory_from_cells",
    "theta_from_population",
    "theta_from_sample",
    "thresholds_table",
    "variant_summary",
    "write_tables",
]
