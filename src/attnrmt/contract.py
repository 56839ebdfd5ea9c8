"""The names of the data contract, defined once (``docs/data-contract.md``).

Every module that names an axis, a theory variant, a built-in model or a stored field
imports it from here; nothing else in the package spells these tuples out. This module
imports nothing from the package, so every room (model, theory, sweep, analysis) may use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, SupportsFloat

#: Sweep axes in their fixed order: plan, fragments, stores and analysis all use it
#: (``docs/data-contract.md``, "Dimensions").
AXES: tuple[str, ...] = ("d", "delta", "gamma", "T", "positional", "weights", "snr", "centered")

#: The axis of table laws (config key ``table``): a dimension only of the sweeps that set
#: it, between ``weights`` and ``snr`` (``docs/data-contract.md``, "Table laws").
TABLE_AXIS: str = "table"

#: Every axis a sweep may have, in their fixed order: :data:`AXES` with
#: :data:`TABLE_AXIS` after ``weights``. The analysis groups by those present.
ALL_AXES: tuple[str, ...] = (*AXES[: AXES.index("snr")], TABLE_AXIS, *AXES[AXES.index("snr") :])

#: Axes that define one snr curve ("line"): every axis but ``snr``.
CURVE_AXES: tuple[str, ...] = tuple(a for a in ALL_AXES if a != "snr")


def sweep_axes(axes: Iterable[str]) -> tuple[str, ...]:
    """The axes of a sweep whose axis names are ``axes``, in the fixed order: every axis
    of :data:`AXES`, and :data:`TABLE_AXIS` when ``axes`` has it (``docs/data-contract.md``,
    "Dimensions"). O(axes)."""
    present = set(axes)
    return tuple(a for a in ALL_AXES if a in AXES or a in present)


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
TOP_K_FIELDS: tuple[str, ...] = ("top_eigenvalues", "overlap_signal", "overlap_class_mean")
TOP_K_FIELDS += ("overlap_table_mean", "pop_top_eigenvalues", "pop_overlap_signal")

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
#: ``attnrmt.sweep.compute.failures.classify_failure``), in the order reports list them.
FAILURE_CAUSES: tuple[str, ...] = ("out_of_memory", "walltime", "killed", "numerical", "other")


def round_significant(value: SupportsFloat) -> float:
    """``value`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits (``-0.0`` -> ``0.0``),
    so a linspace's ``0.1`` and a typed one hash the same."""
    return float(f"{float(value):.{SIGNIFICANT_DIGITS}g}") + 0.0


# --------------------------------------------------------------------------- CF attributes
# A short ``long_name`` (an axis label of one line) and a ``comment`` naming the scale;
# CF ``units`` only for the dimensional wall time and memory (docs/data-contract.md, "Units").

#: Widest ``long_name [units]`` of :data:`VARIABLE_ATTRS`: xarray wraps axis labels at 30
#: characters (``xarray.plot.utils.label_from_attrs``).
LONG_NAME_WIDTH: int = 30

_SCALES = {
    "S": "dimensionless; eigenvalue scale of S, kappa included",
    "K": "dimensionless; in units of kappa = ||w||^2",
    "SNR": "dimensionless; on the snr = ||mu||^2 scale",
    "F": "dimensionless fraction in [0, 1]",
    "I": "0-based index",
}


def _attrs_table(text: str) -> dict[str, dict[str, str]]:
    """``name :: long_name :: comment [:: units]`` lines (an indented line continues the one
    above; ``#`` lines are headings) -> attributes, ``{S}`` etc. from :data:`_SCALES`. O(lines)."""
    lines = re.sub(r"\n +", " ", text.strip()).splitlines()
    rows = [line.format(**_SCALES).split(" :: ") for line in lines if not line.startswith("#")]
    return {
        name: {"long_name": long_name, **({"units": units[0]} if units else {}), "comment": note}
        for name, long_name, note, *units in rows
    }


#: ``long_name``, ``units`` (dimensional quantities only) and ``comment`` of every variable
#: and coordinate of ``cells.zarr``, ``theory.zarr`` and ``analysis.zarr``
#: (``docs/data-contract.md``, "Units"): one table, applied by every writer and by
#: ``open_results``. A name shared by the cells and theory stores (``pop_overlap_signal``)
#: means the same quantity, measured in one and predicted in the other.
VARIABLE_ATTRS: dict[str, dict[str, str]] = _attrs_table(
    """
# axes and index coordinates
d :: dimension d :: embedding dimension (count)
delta :: delta = d/V :: nominal ratio of dimension to vocabulary size
gamma :: gamma = d/N :: nominal ratio of dimension to sample count
T :: sequence length T :: count
positional :: positional model :: positional sign model (named in the config)
weights :: pooling weights :: weights model (named in the config or built-in)
snr :: signal strength snr :: snr = ||mu||^2 (dimensionless)
centered :: centred :: pooled vectors centred before forming S
table :: table law :: law of the table noise z_v (named in the config; docs/model.md, Table
    laws)
replicate :: replicate :: {I}
k :: top-k index :: {I} (0 = largest)
eig :: eigenvalue index :: {I} (ascending; NaN-padded beyond d)
position :: position t :: {I} in the sequence (NaN-padded beyond T)
variant :: theory variant :: theory variant of the spike strength theta
transition :: BBP transition :: population: Sigma_E, sample: S
boot :: bootstrap resample :: {I}
# cells.zarr (measured)
eigenvalues :: eigenvalues of S :: ascending; {S}
top_eigenvalues :: top eigenvalues of S :: largest k, descending; {S}
overlap_signal :: squared overlap with u :: eigenvector k of S with u = mu/||mu||; {F}
overlap_class_mean :: squared overlap, class means :: eigenvector k of S with the table's
    class-mean difference; {F}
overlap_table_mean :: squared overlap, table mean :: eigenvector k of S with the table mean; {F}
pop_top_eigenvalues :: top eigenvalues of Sigma_E :: largest k of the population covariance
    given the table; {S}
pop_overlap_signal :: population overlap with u :: squared overlap of the population eigenvector
    (k-th when k is a dimension) with u = mu/||mu||; {F}
alpha :: signal gain alpha :: alpha = w^T R w of the pooling (dimensionless)
kappa :: noise gain kappa :: kappa = ||w||^2 of the pooling (dimensionless)
sigma :: weight sum sigma :: sigma = sum_t w_t of the pooling (dimensionless)
alpha_replicate :: alpha per replicate :: w^T R w of each replicate (dimensionless)
kappa_replicate :: kappa per replicate :: ||w||^2 of each replicate (dimensionless)
sigma_replicate :: sigma per replicate :: sum_t w_t of each replicate (dimensionless)
V :: vocabulary size V :: realised (count)
N :: sample count N :: realised (count)
compute_seconds :: compute time :: wall time of the cell :: s
effective_weights :: pooling weight w_t :: weights used (the measured mean for causal_attention;
    dimensionless)
downstream_accuracy :: downstream accuracy :: test accuracy of the ridge readout of the label y
    (K classes: of the sequence class, one-vs-rest; NaN if no label); {F}
cell_key :: cell key :: sha256 content key of the cell ('' if absent)
environment_id :: environment id :: index into the environments attribute (0 = unknown)
peak_memory_bytes :: peak memory :: peak resident memory of the worker process by the end of the
    cell (-1 = unknown) :: byte
attempt :: block attempt :: attempt that computed the cell (count; 0 = unknown)
# theory.zarr (predicted; attnrmt.theory.predict)
bulk_lower_edge :: bulk lower edge :: left edge of the bulk of S; {S}
bulk_upper_edge :: bulk upper edge :: right edge of the bulk of S; {S}
bulk_atom :: bulk atom at 0 :: mass of the bulk's atom at 0; {F}
pop_bulk_edge :: population bulk edge :: right edge of the bulk of Sigma_E, kappa (1 +
    sqrt(delta))^2; {S}
pop_outlier :: population outlier :: outlier of Sigma_E (NaN below threshold); {S}
sample_outlier :: sample outlier :: outlier of S (NaN below threshold); {S}
pop_top_eigenvalue :: population top eigenvalue :: top eigenvalue of Sigma_E: outlier above
    threshold, bulk edge below; {S}
sample_top_eigenvalue :: sample top eigenvalue :: top eigenvalue of S: outlier above threshold,
    bulk upper edge below; {S}
sample_overlap_signal :: sample overlap with u :: squared overlap of the top sample eigenvector
    with u = mu/||mu||; {F}
threshold_snr_population :: population threshold :: snr at the population BBP threshold; {SNR}
threshold_snr_sample :: sample threshold :: snr at the sample BBP threshold; {SNR}
theta :: spike strength theta :: signal spike strength; {K}
delta_effective :: effective delta :: ratio d/V of the realised sizes
gamma_effective :: effective gamma :: ratio d/N of the realised sizes
mean_spike_outlier :: mean-spike outlier :: sample outlier of the uncentred mean spike (NaN
    where centred or below threshold); {S}
mean_spike_pop_outlier :: mean-spike population outlier :: population outlier of the uncentred
    mean spike (NaN where centred or below threshold); {S}
mean_spike_overlap :: mean-spike overlap :: squared overlap of the sample eigenvector with the
    table mean (NaN where centred); {F}
no_theory :: why no theory :: per table law: why its predictions are NaN ('' where it has
    theory; docs/model.md, Table laws)
# analysis.zarr (estimated)
bulk_ks :: bulk KS distance :: KS distance of the bulk from kappa MP_delta [x] MP_gamma; {F}
bulk_n_outliers :: eigenvalues above the bulk :: beyond the bulk edge margin (count)
bulk_zero_fraction :: zero eigenvalues :: fraction of zero eigenvalues; {F}
bulk_lower_edge_emp :: measured bulk lower edge :: smallest non-zero eigenvalue; {S}
bulk_upper_edge_emp :: measured bulk upper edge :: largest bulk eigenvalue; {S}
bulk_lower_edge_th :: theory bulk lower edge :: {S}
bulk_upper_edge_th :: theory bulk upper edge :: below the large-T bound bulk_noise_top_mean; {S}
bulk_noise_top_mean :: expected top noise eigenvalue :: mean largest noise eigenvalue at finite d
    (NaN where the large-T edge holds); {S}
bulk_noise_top_sd :: sd of top noise eigenvalue :: its standard deviation; {S}
bulk_atom_th :: theory atom at 0 :: mass of the atom at 0; {F}
threshold_estimate :: threshold snr :: empirical threshold (NaN when a bound); {SNR}
threshold_ci_low :: threshold CI low :: lower end of the threshold's CI or bound; {SNR}
threshold_ci_high :: threshold CI high :: upper end of the threshold's CI or bound; {SNR}
threshold_extrapolated :: extrapolated threshold :: snr where the fitted theta line crosses
    theta_c; {SNR}
threshold_bound :: threshold bound :: is the threshold a bound (a flag: see flag_meanings;
    dimensionless)
threshold_n_detected :: detected snr points :: snr points with a detected outlier (count)
threshold_boot :: bootstrap threshold :: bootstrap threshold crossings; {SNR}
theta_slope :: theta_hat slope :: d theta_hat / d snr (dimensionless; kappa per snr)
theta_slope_shared :: shared theta_hat slope :: d theta_hat / d snr shared by every d of a curve
    (dimensionless; kappa per snr)
slope_consistency_p :: slope consistency p :: p-value of the test that every d of a curve has
    the same theta_hat slope (dimensionless)
theta_intercept :: theta_hat at snr 0 :: intercept; {K}
theta_offset :: theta_hat offset :: intercept / slope (paper 0, finite_vocab delta); {SNR}
theta_critical :: critical theta_c :: critical spike strength; {K}
theta_hat :: inferred theta_hat :: spike strength from the outlier; {K}
fss_limit :: d -> inf threshold :: threshold extrapolated to d -> inf, averaged over the laws;
    {SNR}
fss_slope :: finite-size slope b :: coefficient of d^(-w) of the law fss_law; {SNR}
fss_ci_low :: d -> inf CI low :: lower end of the limit's CI; {SNR}
fss_ci_high :: d -> inf CI high :: upper end of the limit's CI; {SNR}
fss_n_d :: d values in the fit :: distinct d of the finite-size fit (count)
fss_law :: finite-size law w :: exponent w of the law a + b d^(-w) of largest Akaike weight
    (dimensionless)
fss_law_weight :: weight of the law :: Akaike weight of fss_law among the candidate laws
    (dimensionless)
# K classes (docs/data-contract.md, "K-class sweeps")
spike :: spike j :: {I} of a K-class spike (0 = strongest)
spike_strength_table :: theta_j (table) :: realised spike strength theta_j of the table's class
    means (eigenvalue j of M B M^T / kappa); {K}
spike_strength_signal :: theta_j (signal) :: spike strength theta_j of the true class means
    (eigenvalue j of M_mu B M_mu^T / kappa); {K}
spike_overlap_table :: sample overlap v_j :: squared overlap of eigenvector j of S with table
    spike direction v_j; {F}
spike_overlap_signal :: sample overlap s_j :: squared overlap of eigenvector j of S with signal
    spike direction s_j; {F}
spike_pop_overlap_table :: population overlap v_j :: squared overlap of eigenvector j of Sigma_E
    with v_j; {F}
spike_pop_overlap_signal :: population overlap s_j :: squared overlap of eigenvector j of
    Sigma_E with s_j; {F}
spike_theta :: predicted theta_j :: predicted K-class spike strength; {K}
spike_pop_outlier :: population outlier j :: predicted population outlier of spike j (K classes)
    (NaN below threshold); {S}
spike_sample_outlier :: sample outlier j :: predicted sample outlier of spike j (K classes) (NaN
    below threshold); {S}
spike_pop_eigenvalue :: population eigenvalue j+1 :: predicted eigenvalue j+1 of Sigma_E:
    outlier above threshold, edge below; {S}
spike_sample_eigenvalue :: sample eigenvalue j+1 :: predicted eigenvalue j+1 of S: outlier above
    threshold, bulk edge below; {S}
spike_pop_overlap :: predicted pop. overlap j :: predicted squared overlap of population
    eigenvector j with its spike direction; {F}
spike_sample_overlap :: predicted sample overlap j :: predicted squared overlap of sample
    eigenvector j with its spike direction (a file table's: with the span of the spike
    directions); {F}
spike_threshold_population :: population threshold j :: snr at which spike j crosses the
    population threshold; {SNR}
spike_threshold_sample :: sample threshold j :: snr at which spike j crosses the sample
    threshold; {SNR}
spike_threshold_estimate :: threshold estimate j :: empirical threshold of spike j (K classes)
    (NaN when a bound); {SNR}
spike_threshold_ci_low :: threshold CI low j :: lower end of spike j's threshold CI or bound;
    {SNR}
spike_threshold_ci_high :: threshold CI high j :: upper end of spike j's threshold CI or bound;
    {SNR}
spike_threshold_extrapolated :: extrapolated threshold j :: snr where spike j's fitted theta
    line crosses theta_c; {SNR}
spike_threshold_n_detected :: detected points j :: snr points with a detected outlier of spike j
    (K classes); count
spike_threshold_bound :: threshold is a bound j :: is spike j's threshold a bound (a flag: see
    flag_meanings; dimensionless)
"""
)

#: The attributes :data:`VARIABLE_ATTRS` owns: a dataset's own values of these are replaced.
_CONTRACT_ATTR_KEYS: tuple[str, ...] = ("long_name", "units", "comment")


#: Per-spike fields of a K-class cell (``spike`` dimension: the top ``K - 1`` spikes
#: centred, ``K`` uncentred); stored only by sweeps with ``classes`` (docs/data-contract.md,
#: "K-class sweeps").
SPIKE_FIELDS: tuple[str, ...] = ("spike_strength_table", "spike_strength_signal")
SPIKE_FIELDS += ("spike_overlap_table", "spike_overlap_signal")
SPIKE_FIELDS += ("spike_pop_overlap_table", "spike_pop_overlap_signal")


def with_variable_attrs(dataset: Any, missing: str = "raise") -> Any:
    """``dataset`` with :data:`VARIABLE_ATTRS`' ``long_name``, ``units`` and ``comment`` on every
    variable (other attributes kept); a name missing from the table raises ``KeyError``
    (``missing="raise"``, writers) or keeps its attributes (``"keep"``, readers). O(variables)."""
    if missing not in ("raise", "keep"):
        raise ValueError(f"missing={missing!r}: must be 'raise' or 'keep'")
    out = dataset.copy(deep=False)
    for name in out.variables:
        if missing == "keep" and str(name) not in VARIABLE_ATTRS:
            continue
        variable = out.variables[name]
        variable.attrs = {
            **{k: v for k, v in variable.attrs.items() if k not in _CONTRACT_ATTR_KEYS},
            **VARIABLE_ATTRS[str(name)],
        }
    return out


#: How a cell measures the spectrum of S (``docs/data-contract.md``, "cells.zarr"):
#: ``full`` (all d eigenvalues, forms S) or ``top`` (matrix-free, the 2 top_k largest).
SPECTRA: tuple[str, ...] = ("full", "top")


def stored_eigenvalue_count(spectrum: str, d: int, top_k: int) -> int:
    """Eigenvalues of ``S`` a cell stores (docs/data-contract.md, "cells.zarr"): ``d`` for
    ``full``, the ``min(2 top_k, d)`` largest for ``top``."""
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
    # ---- K classes
    "classes_thresholds": "successive K-class spike thresholds (CI or bound) against both variants",
    "classes_spikes": "per-spike eigenvalues and overlaps of K-class sweeps against both variants",
    "universality": "each table law's errors against the Gaussian cells per quantity and d",
    "universality_verdict": "per table law: within Monte-Carlo error of the Gaussian theory?",
}

#: Tables made from several sweeps at once: run-wide only. Every other table has its
#: sweep's rows in ``results/<run>/<sweep>/tables/<name>.csv`` (:data:`SWEEP_TABLES`, with
#: the sweep's ``universality_inputs``), concatenated into the run's.
ACROSS_SWEEP_TABLES: tuple[str, ...] = ("universality", "universality_verdict")
SWEEP_TABLES: tuple[str, ...] = (
    *(name for name in TABLES if name not in ACROSS_SWEEP_TABLES),
    "universality_inputs",
)

#: Figures: each sweep's ``results/<run>/<sweep>/figures/<name>.<format>`` (drawn by
#: :func:`attnrmt.analysis.figures.make_figures`), but :data:`RUN_FIGURES`, drawn from
#: several sweeps, in ``results/<run>/figures/`` (``docs/data-contract.md``, "Files").
FIGURES: tuple[str, ...] = ("spectra", "outlier_vs_snr", "phase_diagram", "pooling")
FIGURES += ("causal_weights", "downstream", "finite_size", "centring", "classes_spikes")
FIGURES += ("universality",)
RUN_FIGURES: tuple[str, ...] = ("universality",)
#: The description in the PNG of a figure drawn without data (a placeholder, so that the
#: rules' outputs stay fixed); the report leaves such figures out.
PLACEHOLDER_FIGURE = "attnrmt: placeholder, no data for this figure"
SWEEP_FIGURES: tuple[str, ...] = tuple(name for name in FIGURES if name not in RUN_FIGURES)
