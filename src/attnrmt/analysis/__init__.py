"""Analysis of sweep results: does the theory hold, which variant, where it breaks
(docs/model.md, "What the pipeline tests").

Every function is a small pure function over xarray/numpy objects shaped like the data
contract of ``cells.zarr`` / ``theory.zarr``; the workflow rules call the entry points of
:mod:`attnrmt.analysis.pipeline` and :func:`attnrmt.analysis.figures.make_figures`.
Estimators are documented in ``docs/thresholds.md``.

Modules: ``bulk_fit`` (KS distance and edges of the bulk), ``thresholds`` (theta inversion,
threshold fit with bootstrap CIs/bounds, finite-size extrapolation), ``comparison`` (tidy
tables against both variants), ``pooling`` (and the downstream readout), ``attention``,
``centring``, ``universality`` (each table law against the Gaussian cells: errors and verdicts),
``figures`` (imports matplotlib), ``pipeline`` (rule entry points). Planted test data:
``tests/analysis/synthetic.py``.
"""

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
