"""Measured quantities against both theory variants in one tidy table (docs/model.md,
"Spikes", "What the pipeline tests"; the columns: docs/data-contract.md, "Tables"):
``regime`` is ``outlier`` where the variant predicts a separated outlier, ``bulk`` where
the top eigenvalue's theory is the bulk edge and its overlap 0. Below the large-T bound the
upper bulk edge is the expected largest noise eigenvalue at finite ``d`` (docs/model.md, "What
replaces the edge"; ``regime`` ``finite_d`` on the ``bulk_upper_edge`` rows)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnrmt.analysis._common import at_signal, effective_ratios, replicate_mean_sem, tidy
from attnrmt.analysis.thresholds import (
    FREE_SLOPE,
    MIN_FSS_D,
    SHARED_SLOPE,
    SLOPE_CONSISTENCY_P,
    SLOPES_DIFFER,
)
from attnrmt.contract import AXES, TABLE_AXIS, TRANSITIONS, VARIANTS
from attnrmt.theory import predict
from attnrmt.theory.finite_t import large_t_bulk_holds

#: The spike quantities compared point by point (``comparison.csv`` rows, docs/data-contract.md).
SPIKE_QUANTITIES: tuple[str, ...] = (
    "population_outlier",
    "sample_outlier",
    "population_overlap",
    "sample_overlap",
)
#: The quantities of :func:`variant_summary` (and of the universality study, with the bulk).
SUMMARY_QUANTITIES = (*SPIKE_QUANTITIES, *(f"threshold_{t}" for t in TRANSITIONS))

#: Relative spread of a threshold's theory across a curve's ``d`` beyond which its d -> inf
#: row has no verdict (a table law whose spectrum depends on ``d``; docs/thresholds.md,
#: "General bulks"): the finite-``d`` theories have no common limit to compare with.
THEORY_DRIFT = 0.01

#: Columns of comparison.csv in order (parameter columns last; ``table`` after ``weights``
#: only for a sweep with that axis, :func:`_finalise`).
COMPARISON_COLUMNS = (
    "sweep",
    "quantity",
    "variant",
    "empirical",
    "empirical_sem",
    "theory",
    "abs_error",
    "rel_error",
    "regime",
    "bulk_regime",
    *AXES,
)
#: Columns of thresholds.csv.
THRESHOLD_COLUMNS = (
    "sweep",
    "transition",
    "estimate",
    "ci_low",
    "ci_high",
    "bound",
    "extrapolated",
    "theory_paper",
    "theory_finite_vocab",
    "consistent_paper",
    "consistent_finite_vocab",
    "bulk_regime",
    "n_detected",
    "theta_offset",
    "finite_size",
    "estimator",
    "slope_consistency_p",
    "fss_law",
    "fss_law_weight",
    "fss_slope",
    *[a for a in AXES if a != "snr"],
)
#: analysis.zarr variables of the finite-size fit (the law of largest weight, its weight and
#: its coefficient ``b``) -> thresholds.csv columns of the d -> inf rows (same names).
_FSS_COLUMNS = ("fss_law", "fss_law_weight", "fss_slope")


def theory_from_cells(cells: xr.Dataset) -> xr.Dataset:
    """Every variable of ``theory.zarr`` (docs/data-contract.md) on the cells' axes from
    :func:`attnrmt.theory.predict` fed with the cells' realised ratios and replicate-mean
    ``alpha``, ``kappa``, ``sigma``: the fallback for a variable ``theory.zarr`` lacks, with the
    large-T closed forms only (docs/thresholds.md, "3. Comparison with theory", says why).
    O(grid points x variants)."""
    delta, gamma = effective_ratios(cells)
    alpha, kappa, sigma = (
        cells[name].mean("replicate") if "replicate" in cells[name].dims else cells[name]
        for name in ("alpha", "kappa", "sigma")
    )
    snr, centered = cells["snr"].astype(float), cells["centered"].astype(bool)
    return predict(delta, gamma, snr, alpha, kappa, sigma, centered)


def complete_theory(theory: xr.Dataset | None, cells: xr.Dataset) -> xr.Dataset:
    """``theory`` with every variable of :func:`theory_from_cells` it lacks filled in."""
    fallback = theory_from_cells(cells)
    if theory is None:
        return fallback
    out = theory.copy()
    for name in fallback.data_vars:
        if name not in out:
            out[name] = fallback[name]
    return out


def _rows(
    sweep: str,
    quantity: str,
    emp: xr.DataArray,
    sem: xr.DataArray,
    theory: xr.DataArray,
    regime: xr.DataArray | None = None,
) -> pd.DataFrame:
    emp, sem, theory = xr.broadcast(emp, sem, theory)
    ds = xr.Dataset({"empirical": emp, "empirical_sem": sem, "theory": theory})
    if regime is not None:
        ds["regime"] = regime.broadcast_like(theory)
    frame = tidy(ds)
    frame.insert(0, "quantity", quantity)
    frame.insert(0, "sweep", sweep)
    if "regime" not in frame:
        frame["regime"] = ""
    return frame


def _finalise(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """``frame`` on ``columns`` (NaN where it lacks one), plus ``table`` after ``weights``
    where the sweep has that axis (docs/data-contract.md, "Table laws"): a sweep without it
    keeps the columns it always had. ``bulk_regime`` is ``finite_T`` where ``T delta / gamma``
    is below :data:`attnrmt.theory.finite_t.FINITE_T_BOUND` (docs/model.md, "Where the
    large-T bulk holds"), ``large_T`` elsewhere. O(rows x columns)."""
    frame["bulk_regime"] = np.where(
        large_t_bulk_holds(frame["delta"], frame["gamma"], frame["T"]), "large_T", "finite_T"
    )
    if TABLE_AXIS in frame:
        at = columns.index("weights") + 1
        columns = (*columns[:at], TABLE_AXIS, *columns[at:])
    for col in columns:
        if col not in frame:
            frame[col] = np.nan
    return frame.loc[:, list(columns)]


def comparison_table(
    sweep: str, cells: xr.Dataset, theory: xr.Dataset, analysis: xr.Dataset
) -> pd.DataFrame:
    """Tidy comparison of every measured quantity with both variants (docs/model.md, "What
    the pipeline tests"), columns :data:`COMPARISON_COLUMNS`: both outliers and overlaps at
    the signal eigenvector (theory: the bulk edge and 0 where a variant predicts no
    outlier), the bulk edges and atom, the uncentred mean spike, both threshold estimates
    and the theta slope (``alpha/kappa``) and offset (0 or ``delta``). O(cells)."""
    theory = complete_theory(theory, cells)
    frames = []
    pop_sig = at_signal(cells, "pop_top_eigenvalues", population=True)
    sam_sig = at_signal(cells, "top_eigenvalues")
    pop_ov = at_signal(cells, "pop_overlap_signal", population=True)
    sam_ov = at_signal(cells, "overlap_signal")
    pop_th = theory["pop_outlier"]
    sam_th = theory["sample_outlier"]
    pop_regime = xr.where(pop_th.notnull(), "outlier", "bulk")
    sam_regime = xr.where(sam_th.notnull(), "outlier", "bulk")
    edge, edge_regime = theory["bulk_upper_edge"], None
    if "bulk_noise_top_mean" in analysis:  # finite T: the finite-d edge (docs/model.md)
        top = analysis["bulk_noise_top_mean"]
        edge, edge_regime = (
            xr.where(top.notnull(), top, edge),
            xr.where(top.notnull(), "finite_d", ""),
        )
    pairs = [
        ("population_outlier", pop_sig, pop_th.fillna(theory["pop_bulk_edge"]), pop_regime),
        ("sample_outlier", sam_sig, sam_th.fillna(edge), sam_regime),
        ("population_overlap", pop_ov, theory["pop_overlap_signal"], pop_regime),
        ("sample_overlap", sam_ov, theory["sample_overlap_signal"], sam_regime),
        ("bulk_upper_edge", analysis["bulk_upper_edge_emp"], edge, edge_regime),
        ("bulk_lower_edge", analysis["bulk_lower_edge_emp"], theory["bulk_lower_edge"], None),
        ("bulk_atom", analysis["bulk_zero_fraction"], theory["bulk_atom"], None),
    ]
    if "centered" in cells.dims and (~cells["centered"].astype(bool)).any():
        where = {"centered": np.flatnonzero(~cells["centered"].values.astype(bool))}
        unc = cells.isel(where)
        idx = unc["overlap_table_mean"].fillna(-1).argmax("k")
        ms_th = theory["mean_spike_outlier"].isel(where)
        pairs += [
            (
                "mean_spike_outlier",
                unc["top_eigenvalues"].isel(k=idx),
                ms_th.fillna(edge.isel(where)),
                xr.where(ms_th.notnull(), "outlier", "bulk"),
            ),
            (
                "mean_spike_overlap",
                unc["overlap_table_mean"].isel(k=idx),
                theory["mean_spike_overlap"].isel(where),
                xr.where(ms_th.notnull(), "outlier", "bulk"),
            ),
        ]
    for name, emp, th, regime in pairs:
        emp = emp.drop_vars("k", errors="ignore")
        mean, sem, _ = replicate_mean_sem(emp)
        frames.append(_rows(sweep, name, mean, sem, th, regime))

    # thresholds and the theta line (no snr axis)
    delta_eff, _ = effective_ratios(cells)
    ratio = cells["alpha"] / cells["kappa"]
    ratio = ratio.mean([d for d in ratio.dims if d in ("snr", "replicate")])
    dcurve = delta_eff.mean([d for d in delta_eff.dims if d in ("snr", "replicate")])
    offset_th = xr.concat([xr.zeros_like(dcurve), dcurve], dim="variant", join="outer")
    offset_th = offset_th.assign_coords(variant=list(VARIANTS))
    for transition in TRANSITIONS:
        th = theory[f"threshold_snr_{transition}"]
        th_curve = th.mean("snr") if "snr" in th.dims else th
        a = analysis.sel(transition=transition)
        nan_sem = xr.full_like(a["threshold_estimate"], np.nan)
        for name, measured, predicted in (
            ("threshold", a["threshold_estimate"], th_curve),
            ("theta_slope", a["theta_slope"], ratio.broadcast_like(th_curve)),
            ("theta_offset", a["theta_offset"], offset_th.broadcast_like(th_curve)),
        ):
            frames.append(_rows(sweep, f"{name}_{transition}", measured, nan_sem, predicted))
    frame = pd.concat(frames, ignore_index=True)
    frame["abs_error"] = (frame["empirical"] - frame["theory"]).abs()
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = frame["abs_error"] / frame["theory"].abs()
    frame["rel_error"] = rel.where(frame["theory"].abs() > 0)
    return _finalise(frame, COMPARISON_COLUMNS)


def thresholds_table(
    sweep: str, cells: xr.Dataset, theory: xr.Dataset, analysis: xr.Dataset
) -> pd.DataFrame:
    """Empirical thresholds with CIs or bounds against both variants (docs/model.md, "What
    the pipeline tests"), columns :data:`THRESHOLD_COLUMNS`: one row per curve and
    transition, plus with several ``d`` a ``finite_size = "d->inf"`` row (``d = inf``);
    ``consistent_<variant>``: the variant's threshold in ``[ci_low, ci_high]`` (empty for a
    d -> inf row from fewer than :data:`attnrmt.analysis.thresholds.MIN_FSS_D` values of
    ``d`` or whose theory moves by more than :data:`THEORY_DRIFT` across ``d``, and for
    bound ``hidden``). O(curves)."""
    theory = complete_theory(theory, cells)
    multi_d = "slope_consistency_p" in analysis
    rows = []
    for transition in TRANSITIONS:
        th = theory[f"threshold_snr_{transition}"]
        th = th.mean("snr") if "snr" in th.dims else th
        a = analysis.sel(transition=transition)
        slope_p = {"slope_consistency_p": a["slope_consistency_p"]} if multi_d else {}
        names = ("estimate", "ci_low", "ci_high", "bound", "extrapolated", "n_detected")
        columns = {n: a[f"threshold_{n}"] for n in names} | {"theta_offset": a["theta_offset"]}
        ds = xr.Dataset(columns | _by_variant(th))
        if multi_d:
            ds["slope_consistency_p"] = a["slope_consistency_p"].broadcast_like(ds["estimate"])
        frame = tidy(ds)
        frame["finite_size"] = "none"
        frame["estimator"] = _estimator_names(frame, multi_d, analysis.attrs)
        rows.append(frame.assign(transition=transition))
        if "fss_limit" in analysis:
            limit = a["fss_limit"]
            n_d = a["fss_n_d"] if "fss_n_d" in a else xr.full_like(limit, np.inf)
            fits = {name: a[name] for name in _FSS_COLUMNS if name in a}
            ends = {"ci_low": a["fss_ci_low"], "ci_high": a["fss_ci_high"], "fss_n_d": n_d}
            drift = xr.zeros_like(limit, dtype=bool)
            if "d" in th.dims:  # a theory that depends on d (a table's spectrum): no d -> inf
                drift = ((th.max("d") - th.min("d")) > THEORY_DRIFT * abs(th).max("d")).any(
                    "variant"
                )
                th = th.mean("d").where(~drift)
            thd = _by_variant(th)
            ends["drift"] = drift.broadcast_like(limit)
            fs = xr.Dataset({"estimate": limit, **ends, **fits, **slope_p, **thd})
            fframe = tidy(fs)
            fframe["d"] = np.inf
            fframe["bound"] = "none"
            fframe["extrapolated"] = fframe["estimate"]
            fframe["estimator"] = _estimator_names(fframe, multi_d, analysis.attrs)
            counts = fframe.pop("fss_n_d").to_numpy(dtype=float)
            fframe["finite_size"] = np.where(
                counts >= MIN_FSS_D,
                "d->inf (a + b d^-w, w = 1/3, 1/2, 1 averaged with Akaike weights)",
                [
                    f"d->inf from {count:.0f} d values: no verdict (needs >= {MIN_FSS_D})"
                    for count in counts
                ],
            )
            fframe["finite_size"] = fframe["finite_size"].where(
                ~fframe.pop("drift").astype(bool), "d->inf: no verdict (the theory depends on d)"
            )
            rows.append(fframe.assign(transition=transition))
    frame = pd.concat(rows, ignore_index=True)
    frame.insert(0, "sweep", sweep)
    no_verdict = frame["finite_size"].str.contains("no verdict") | (frame["bound"] == "hidden")
    for variant in VARIANTS:
        predicted = frame[f"theory_{variant}"]
        consistent = (predicted >= frame["ci_low"]) & (predicted <= frame["ci_high"])
        frame[f"consistent_{variant}"] = consistent.astype(object).where(~no_verdict, None)
    return _finalise(frame, THRESHOLD_COLUMNS)


def _by_variant(predicted: xr.DataArray) -> dict[str, xr.DataArray]:
    """``theory_<variant>`` columns of ``predicted`` (a ``variant`` dimension). O(size)."""
    return {f"theory_{v}": predicted.sel(variant=v, drop=True) for v in VARIANTS}


def _estimator_names(frame: pd.DataFrame, multi_d: bool, attrs: Mapping[str, Any]) -> np.ndarray:
    """``estimator`` column of thresholds.csv (docs/thresholds.md, "Shared slope"): one
    curve's ``d`` share the theta-vs-snr slope unless the slope-consistency test rejects it
    (``slope_consistency_p`` below the analysis' ``slope_consistency_min_p``)."""
    if not multi_d:
        return np.full(len(frame), FREE_SLOPE)
    min_p = float(attrs.get("slope_consistency_min_p", SLOPE_CONSISTENCY_P))
    differ = frame["slope_consistency_p"].to_numpy(dtype=float) < min_p
    return np.where(differ, SLOPES_DIFFER, SHARED_SLOPE)


def variant_summary(
    comparison: pd.DataFrame, thresholds: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per (sweep, quantity, variant): median/mean relative and median absolute error, the
    verdict of which variant fits (docs/model.md, "Two variants of the theory"), over the
    points where the variant predicts an outlier (thresholds: every in-range estimate);
    with ``thresholds`` also ``consistent_fraction`` of the threshold rows, the fraction of
    finite-``d`` curves whose CI or bound contains the variant's threshold. O(rows)."""
    keep = comparison["quantity"].isin(SUMMARY_QUANTITIES)
    outl = comparison[
        keep
        & ((comparison["regime"] == "outlier") | comparison["quantity"].str.startswith("threshold"))
    ]
    outl = outl[np.isfinite(outl["abs_error"])]
    grouped = outl.groupby(["sweep", "quantity", "variant"])
    summary = grouped.agg(
        median_rel_error=("rel_error", "median"),
        mean_rel_error=("rel_error", "mean"),
        median_abs_error=("abs_error", "median"),
        n=("abs_error", "count"),
    ).reset_index()
    summary["consistent_fraction"] = np.nan
    if thresholds is not None and not thresholds.empty:
        finite = thresholds[thresholds["finite_size"] == "none"]
        rows = []
        for (sweep, transition), frame in finite.groupby(["sweep", "transition"]):
            for variant in VARIANTS:
                rows.append(
                    {
                        "sweep": sweep,
                        "quantity": f"threshold_{transition}",
                        "variant": variant,
                        "fraction": float(frame[f"consistent_{variant}"].mean()),
                    }
                )
        frac = pd.DataFrame(rows)
        summary = summary.merge(frac, on=["sweep", "quantity", "variant"], how="outer")
        summary["consistent_fraction"] = summary["fraction"]
        summary = summary.drop(columns="fraction")
    summary["n"] = summary["n"].fillna(0).astype(int)
    return summary
