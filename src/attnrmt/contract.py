"""The names of the data contract, defined once (``docs/data-contract.md``).

Every module that names an axis, a theory variant, a built-in model or a stored field
imports it from here; nothing else in the package spells these tuples out. This module
imports nothing from the package, so every room (model, theory, sweep, analysis) may use it.
"""

from __future__ import annotations

from typing import Any

#: Sweep axes in their fixed order: plan, fragments, stores and analysis all use it
#: (``docs/data-contract.md``, "Dimensions").
AXES: tuple[str, ...] = ("d", "delta", "gamma", "T", "positional", "weights", "snr", "centered")

#: Axes that define one snr curve ("line"): every axis but ``snr``.
CURVE_AXES: tuple[str, ...] = tuple(a for a in AXES if a != "snr")

#: Theory variants (``docs/model.md``, "Two variants of the theory").
VARIANTS: tuple[str, ...] = ("paper", "finite_vocab")

#: The two BBP transitions (``docs/model.md``, "Thresholds").
TRANSITIONS: tuple[str, ...] = ("population", "sample")

#: Positional models that need no entry in ``positional_models``.
BUILTIN_POSITIONAL: tuple[str, ...] = ("iid",)

#: Weight models that need no entry in ``weight_models`` (``docs/model.md``, "Weights").
BUILTIN_WEIGHTS: tuple[str, ...] = ("mean", "last", "optimal", "harmonic")

#: Significant digits a real parameter keeps in a cell's identity and on an axis
#: (``0.1`` from a linspace equals a typed ``0.1``).
SIGNIFICANT_DIGITS: int = 12

#: CellResult fields with a top-k dimension (``docs/data-contract.md``, "cells.zarr").
TOP_K_FIELDS: tuple[str, ...] = (
    "top_eigenvalues",
    "overlap_signal",
    "overlap_class_mean",
    "overlap_table_mean",
    "pop_top_eigenvalues",
    "pop_overlap_signal",
)

#: Pooling scalars, measured per replicate (random only for ``causal_attention``).
POOLING_FIELDS: tuple[str, ...] = ("alpha", "kappa", "sigma")

#: Realised sizes of a cell: vocabulary ``V`` and sample count ``N``.
SIZE_FIELDS: tuple[str, ...] = ("V", "N")

#: Integer fill value of an absent cell (``V``, ``N``).
ABSENT_INT: int = -1

#: Per-cell provenance stored beside the results, never part of a cell's identity
#: (``docs/data-contract.md``, "Provenance"); wall time is ``compute_seconds``.
PROVENANCE_FIELDS: tuple[str, ...] = ("environment_id", "peak_memory_bytes", "attempt")

#: Value of each provenance field for a cell computed before provenance was recorded
#: (``0``: unknown environment / attempt; ``-1``: unknown memory).
PROVENANCE_ABSENT: dict[str, int] = {"environment_id": 0, "peak_memory_bytes": -1, "attempt": 0}

#: Why a cell failed, in the ``cause`` of its failure record and of ``failed_cells.csv``
#: (``docs/data-contract.md``, "Failure causes"; decided by
#: ``attnrmt.sweep.failures.classify_failure``), in the order reports list them.
FAILURE_CAUSES: tuple[str, ...] = ("out_of_memory", "walltime", "killed", "numerical", "other")


def round_significant(value: float) -> float:
    """``value`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits (``-0.0`` -> ``0.0``).

    ``round_significant(numpy.linspace(0, 0.3, 4)[1]) == round_significant(0.1) == 0.1``,
    so a grid point hashes the same whether it came from a linspace or was typed.
    """
    return float(f"{float(value):.{SIGNIFICANT_DIGITS}g}") + 0.0


# --------------------------------------------------------------------------- CF attributes
# Every stored quantity of this model is dimensionless; CF/UDUNITS spell that units "1" and
# the long_name says on which scale the number lives (``docs/data-contract.md``, "Units").

_S_SCALE = " (dimensionless; eigenvalue scale of S, kappa included)"
_KAPPA_SCALE = " (dimensionless; in units of kappa = ||w||^2)"
_SNR_SCALE = " (dimensionless; on the snr = ||mu||^2 scale)"
_FRACTION = " (dimensionless fraction in [0, 1])"
_COUNT = " (count)"


def _numeric(long_name: str, units: str = "1") -> dict[str, str]:
    return {"long_name": long_name, "units": units}


def _label(long_name: str) -> dict[str, str]:
    """Attributes of a string or boolean variable: CF gives those no ``units``."""
    return {"long_name": long_name}


#: ``units`` and ``long_name`` of every variable and coordinate of ``cells.zarr``,
#: ``theory.zarr`` and ``analysis.zarr`` (``docs/data-contract.md``): one table, applied by
#: every writer. Numeric variables have UDUNITS-parsable ``units`` (``"1"``, or ``"s"`` for
#: wall time); string and boolean variables have only a ``long_name``. A name shared by the
#: cells and theory stores (``pop_overlap_signal``) means the same quantity, measured in
#: one and predicted in the other.
VARIABLE_ATTRS: dict[str, dict[str, str]] = {
    # ---- axes and index coordinates
    "d": _numeric("dimension d" + _COUNT),
    "delta": _numeric("nominal ratio delta = d/V (dimensionless)"),
    "gamma": _numeric("nominal ratio gamma = d/N (dimensionless)"),
    "T": _numeric("sequence length T" + _COUNT),
    "positional": _label("positional sign model (named in the config)"),
    "weights": _label("pooling weights (named in the config or built-in)"),
    "snr": _numeric("signal strength snr = ||mu||^2 (dimensionless)"),
    "centered": _label("pooled vectors centred before forming S"),
    "replicate": _numeric("replicate index"),
    "k": _numeric("top-k index (0 = largest)"),
    "eig": _numeric("eigenvalue index (ascending; NaN-padded beyond d)"),
    "position": _numeric("sequence position t (0-based; NaN-padded beyond T)"),
    "variant": _label("theory variant of the spike strength theta"),
    "transition": _label("BBP transition (population: Sigma_E, sample: S)"),
    "boot": _numeric("bootstrap resample index"),
    # ---- cells.zarr (measured)
    "eigenvalues": _numeric("eigenvalues of S, ascending" + _S_SCALE),
    "top_eigenvalues": _numeric("largest k eigenvalues of S, descending" + _S_SCALE),
    "overlap_signal": _numeric(
        "squared overlap of eigenvector k of S with u = mu/||mu||" + _FRACTION
    ),
    "overlap_class_mean": _numeric(
        "squared overlap of eigenvector k of S with the table's class-mean difference" + _FRACTION
    ),
    "overlap_table_mean": _numeric(
        "squared overlap of eigenvector k of S with the table mean" + _FRACTION
    ),
    "pop_top_eigenvalues": _numeric(
        "largest k eigenvalues of Sigma_E (population covariance given the table)" + _S_SCALE
    ),
    "pop_overlap_signal": _numeric(
        "squared overlap of the population eigenvector (k-th when k is a dimension) with "
        "u = mu/||mu||" + _FRACTION
    ),
    "alpha": _numeric("alpha = w^T R w (signal gain of pooling; dimensionless)"),
    "kappa": _numeric("kappa = ||w||^2 (noise gain of pooling; dimensionless)"),
    "sigma": _numeric("sigma = sum_t w_t (dimensionless)"),
    "alpha_replicate": _numeric("alpha = w^T R w of each replicate (dimensionless)"),
    "kappa_replicate": _numeric("kappa = ||w||^2 of each replicate (dimensionless)"),
    "sigma_replicate": _numeric("sigma = sum_t w_t of each replicate (dimensionless)"),
    "V": _numeric("realised vocabulary size V" + _COUNT),
    "N": _numeric("realised number of samples N" + _COUNT),
    "compute_seconds": _numeric("wall time of the cell", "s"),
    "effective_weights": _numeric(
        "pooling weights used (measured mean for causal_attention; dimensionless)"
    ),
    "downstream_accuracy": _numeric(
        "test accuracy of the ridge readout of the label y (NaN if no label)" + _FRACTION
    ),
    "cell_key": _label("sha256 content key of the cell ('' if absent)"),
    "environment_id": _numeric(
        "id of the cell's environment in the environments attribute (dimensionless; 0 = unknown)"
    ),
    "peak_memory_bytes": _numeric(
        "peak resident memory of the worker process by the end of the cell (count of "
        "bytes; -1 = unknown)",
        "byte",
    ),
    "attempt": _numeric("block attempt that computed the cell (count; 0 = unknown)"),
    # ---- theory.zarr (predicted; attnrmt.theory.predict)
    "bulk_lower_edge": _numeric("left edge of the bulk of S" + _S_SCALE),
    "bulk_upper_edge": _numeric("right edge of the bulk of S" + _S_SCALE),
    "bulk_atom": _numeric("mass of the bulk's atom at 0" + _FRACTION),
    "pop_bulk_edge": _numeric(
        "right edge of the bulk of Sigma_E, kappa (1 + sqrt(delta))^2" + _S_SCALE
    ),
    "pop_outlier": _numeric("population outlier of Sigma_E (NaN below threshold)" + _S_SCALE),
    "sample_outlier": _numeric("sample outlier of S (NaN below threshold)" + _S_SCALE),
    "pop_top_eigenvalue": _numeric(
        "top eigenvalue of Sigma_E: outlier above threshold, bulk edge below" + _S_SCALE
    ),
    "sample_top_eigenvalue": _numeric(
        "top eigenvalue of S: outlier above threshold, bulk upper edge below" + _S_SCALE
    ),
    "sample_overlap_signal": _numeric(
        "squared overlap of the top sample eigenvector with u = mu/||mu||" + _FRACTION
    ),
    "threshold_snr_population": _numeric("snr at the population BBP threshold" + _SNR_SCALE),
    "threshold_snr_sample": _numeric("snr at the sample BBP threshold" + _SNR_SCALE),
    "theta": _numeric("signal spike strength theta" + _KAPPA_SCALE),
    "delta_effective": _numeric("effective ratio d/V of the realised sizes (dimensionless)"),
    "gamma_effective": _numeric("effective ratio d/N of the realised sizes (dimensionless)"),
    "mean_spike_outlier": _numeric(
        "sample outlier of the uncentred mean spike (NaN where centred or below threshold)"
        + _S_SCALE
    ),
    "mean_spike_pop_outlier": _numeric(
        "population outlier of the uncentred mean spike (NaN where centred or below "
        "threshold)" + _S_SCALE
    ),
    "mean_spike_overlap": _numeric(
        "squared overlap of the sample eigenvector with the table mean (NaN where centred)"
        + _FRACTION
    ),
    # ---- analysis.zarr (estimated)
    "bulk_ks": _numeric("KS distance of the bulk from kappa MP_delta [x] MP_gamma" + _FRACTION),
    "bulk_n_outliers": _numeric("eigenvalues above the bulk edge margin" + _COUNT),
    "bulk_zero_fraction": _numeric("fraction of zero eigenvalues" + _FRACTION),
    "bulk_lower_edge_emp": _numeric("smallest non-zero eigenvalue" + _S_SCALE),
    "bulk_upper_edge_emp": _numeric("largest bulk eigenvalue" + _S_SCALE),
    "bulk_lower_edge_th": _numeric("theory lower bulk edge" + _S_SCALE),
    "bulk_upper_edge_th": _numeric("theory upper bulk edge" + _S_SCALE),
    "bulk_atom_th": _numeric("theory mass of the atom at 0" + _FRACTION),
    "threshold_estimate": _numeric("empirical threshold (NaN when a bound)" + _SNR_SCALE),
    "threshold_ci_low": _numeric("lower end of the threshold's CI or bound" + _SNR_SCALE),
    "threshold_ci_high": _numeric("upper end of the threshold's CI or bound" + _SNR_SCALE),
    "threshold_extrapolated": _numeric(
        "snr where the fitted theta line crosses theta_c" + _SNR_SCALE
    ),
    "threshold_bound": _numeric("is the threshold a bound (flag, see flag_meanings)"),
    "threshold_n_detected": _numeric("snr points with a detected outlier" + _COUNT),
    "threshold_boot": _numeric("bootstrap threshold crossings" + _SNR_SCALE),
    "theta_slope": _numeric("slope d theta_hat / d snr (dimensionless; kappa per snr)"),
    "theta_slope_shared": _numeric(
        "slope d theta_hat / d snr shared by every d of a curve (dimensionless; kappa per snr)"
    ),
    "slope_consistency_p": _numeric(
        "p-value of the test that every d of a curve has the same theta_hat slope (dimensionless)"
    ),
    "theta_intercept": _numeric("theta_hat at snr = 0" + _KAPPA_SCALE),
    "theta_offset": _numeric("intercept / slope (paper 0, finite_vocab delta)" + _SNR_SCALE),
    "theta_critical": _numeric("critical spike strength theta_c" + _KAPPA_SCALE),
    "theta_hat": _numeric("spike strength inferred from the outlier" + _KAPPA_SCALE),
    "fss_limit": _numeric("threshold extrapolated to d -> inf" + _SNR_SCALE),
    "fss_slope": _numeric("coefficient of d^(-exponent) in the finite-size fit" + _SNR_SCALE),
    "fss_ci_low": _numeric("lower end of the CI of the d -> inf limit" + _SNR_SCALE),
    "fss_ci_high": _numeric("upper end of the CI of the d -> inf limit" + _SNR_SCALE),
    "fss_n_d": _numeric("distinct d values in the finite-size fit" + _COUNT),
    "fss_exponent_fit": _numeric("fitted exponent w of the approach a + b d^(-w) (dimensionless)"),
    "fss_exponent_ci_low": _numeric("lower end of the CI of the fitted exponent (dimensionless)"),
    "fss_exponent_ci_high": _numeric("upper end of the CI of the fitted exponent (dimensionless)"),
    "fss_limit_free": _numeric("d -> inf limit with the fitted exponent" + _SNR_SCALE),
    "fss_limit_free_ci_low": _numeric("lower end of the CI of fss_limit_free" + _SNR_SCALE),
    "fss_limit_free_ci_high": _numeric("upper end of the CI of fss_limit_free" + _SNR_SCALE),
}


def with_variable_attrs(dataset: Any) -> Any:
    """``dataset`` (an :class:`xarray.Dataset`) with :data:`VARIABLE_ATTRS` on every variable.

    Other attributes (``flag_values``, ...) are kept; ``units`` and ``long_name`` come from
    the table, so every writer labels a name the same way. A name missing from the table is
    a ``KeyError``: add it to the table. O(number of variables); no data is copied.
    """
    out = dataset.copy(deep=False)
    for name in out.variables:
        variable = out.variables[name]
        variable.attrs = {
            **{k: v for k, v in variable.attrs.items() if k not in ("units", "long_name")},
            **VARIABLE_ATTRS[str(name)],
        }
    return out


#: How a cell measures the spectrum of S (``docs/data-contract.md``, "cells.zarr"):
#: ``full`` (all d eigenvalues, forms S) or ``top`` (matrix-free, the 2 top_k largest).
SPECTRA: tuple[str, ...] = ("full", "top")


def stored_eigenvalue_count(spectrum: str, d: int, top_k: int) -> int:
    """How many eigenvalues of ``S`` a cell stores (``docs/data-contract.md``,
    "cells.zarr"): all ``d`` for ``full``, the ``min(2 top_k, d)`` largest for ``top``.
    The ``eig`` axis of a sweep's view is this count at its largest ``d``."""
    if spectrum not in SPECTRA:
        raise ValueError(f"spectrum={spectrum!r}: must be one of {list(SPECTRA)}")
    return int(d) if spectrum == "full" else min(2 * int(top_k), int(d))


#: Tables of a run, ``results/<run>/<name>.csv`` (name -> description; written by
#: :func:`attnrmt.analysis.pipeline.write_tables`; ``docs/data-contract.md``, "Tables").
#: Here, not in the analysis, so that the workflow names its targets without importing it.
TABLES: dict[str, str] = {
    "comparison": "every measured quantity against both variants",
    "thresholds": "empirical thresholds (CI or bound) against both variants",
    "summary": "median relative error per quantity and variant",
    "bulk": "bulk KS distance and edges per grid point",
    "pooling": "alpha/kappa and recovery per weights",
    "pooling_order": "does the claimed order of weights hold",
    "causal": "distance of real attention weights to harmonic and causal_limit",
    "causal_verdict": "which limit real attention approaches",
    "downstream": "downstream accuracy per weights",
    "downstream_ranking": "accuracy ranking against alpha/kappa ranking",
    "centring": "uncentred mean spike and centred vs uncentred recovery",
}

#: Figures of a run, ``results/<run>/figures/<name>.<format>`` (drawn by
#: :func:`attnrmt.analysis.figures.make_figures`; ``docs/data-contract.md``, "Files").
FIGURES: tuple[str, ...] = (
    "spectra",
    "outlier_vs_snr",
    "phase_diagram",
    "pooling",
    "causal_weights",
    "downstream",
    "finite_size",
    "centring",
)
