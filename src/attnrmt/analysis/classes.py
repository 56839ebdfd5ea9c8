"""K-class sweeps: successive spike thresholds with CIs and per-spike comparisons against
both theory variants (docs/model.md, "K-class spikes", "K-class thresholds";
docs/thresholds.md; docs/data-contract.md, "K-class sweeps"). Spike ``j``'s eigenvalue
(``j+1``-th of ``S``, of ``Sigma_E`` for the population transition) is inverted to
``theta_hat_j`` (:func:`spike_theta_hat`) and the estimator of
:mod:`attnrmt.analysis.thresholds` fits and extrapolates it along ``snr``
(:func:`spike_thresholds`). O(curves x spikes x transitions x n_boot x snr x replicates)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnrmt.analysis._common import effective_ratios, plain, replicate_mean_sem, setting_rng
from attnrmt.analysis.thresholds import fit_threshold
from attnrmt.contract import CURVE_AXES, TABLE_AXIS, TRANSITIONS, VARIANTS
from attnrmt.theory import critical_theta, theta_from_population, theta_from_sample

#: Measured quantity -> (cells variable, theory variable, variants it is compared with).
#: An overlap is compared with the variant whose spike direction it is measured against
#: (finite_vocab: the table's class means; paper: the true means, docs/model.md,
#: "K-class spikes"); eigenvalues with both.
_COMPARED = {
    "sample_eigenvalue": ("top_eigenvalues", "spike_sample_eigenvalue", VARIANTS),
    "pop_eigenvalue": ("pop_top_eigenvalues", "spike_pop_eigenvalue", VARIANTS),
    "sample_overlap_table": ("spike_overlap_table", "spike_sample_overlap", ("finite_vocab",)),
    "sample_overlap_signal": ("spike_overlap_signal", "spike_sample_overlap", ("paper",)),
    "pop_overlap_table": ("spike_pop_overlap_table", "spike_pop_overlap", ("finite_vocab",)),
    "pop_overlap_signal": ("spike_pop_overlap_signal", "spike_pop_overlap", ("paper",)),
}

#: A file table's sample overlaps are compared on the span of the spike directions
#: (docs/model.md, "Tables from a file"): the cells' span projections.
_SPAN = {"sample_overlap_table": "overlap_class_mean", "sample_overlap_signal": "overlap_signal"}


def classes_of(dataset: xr.Dataset) -> dict[str, Any] | None:
    """The ``classes`` attribute of a K-class sweep's store (``{"K", "means",
    "means_name", "spikes"}``), None for a two-class sweep."""
    text = dataset.attrs.get("classes")
    return json.loads(text) if text else None


def _on_spikes(cells: xr.Dataset, name: str, spikes: int) -> xr.DataArray:
    """``cells[name]`` (top-k) restricted to ``k < spikes`` and renamed to ``spike``."""
    values = cells[name].isel(k=slice(0, spikes))
    return values.rename(k="spike").assign_coords(spike=np.arange(values.sizes["k"]))


def spike_theta_hat(cells: xr.Dataset) -> xr.DataArray:
    """Per-replicate ``theta_hat_j`` of every spike and both transitions: the ``j``-th largest
    eigenvalue of ``Sigma_E`` (population) and of ``S`` (sample) through the inverse bulk
    maps (``theta_c`` at or inside the edge), on the dims of ``top_eigenvalues`` with ``k``
    -> ``spike``, plus ``transition``. O(cells x spikes)."""
    classes = classes_of(cells)
    if classes is None:
        raise ValueError("spike_theta_hat: not a K-class sweep (no 'classes' attribute)")
    spikes = int(classes["spikes"])
    delta, gamma = effective_ratios(cells)
    kappa = cells["kappa"]
    pop = _on_spikes(cells, "pop_top_eigenvalues", spikes)
    sam = _on_spikes(cells, "top_eigenvalues", spikes)
    pop_theta = xr.apply_ufunc(theta_from_population, pop, delta, kappa)
    sam_theta = xr.apply_ufunc(theta_from_sample, sam, delta, gamma, kappa)
    out = xr.concat([pop_theta, sam_theta], dim="transition", join="outer")
    return out.assign_coords(transition=list(TRANSITIONS))


def _theory_at(values: np.ndarray, snr: np.ndarray, near: float) -> float:
    """A theory threshold along one curve: its value at the swept ``snr`` nearest ``near``
    (constant along the curve unless the weights are ``optimal``, which depend on snr)."""
    if not np.isfinite(values).any():
        return float("nan")
    point = int(np.nanargmin(np.abs(snr - near))) if np.isfinite(near) else snr.size // 2
    return float(values[point])


def _at_curve(ratio: xr.DataArray, point: dict[str, Any]) -> float:
    """A realised ratio of one curve (equal at every present cell of it; NaN if none)."""
    values = np.asarray(ratio.sel({k: v for k, v in point.items() if k in ratio.dims}).values)
    finite = values[np.isfinite(values)]
    return float(finite[0]) if finite.size else float("nan")


def _file_theta_hat(
    eigenvalues: np.ndarray,
    forward: np.ndarray,
    threshold: np.ndarray,
    snr: np.ndarray,
    size: float,
) -> tuple[np.ndarray, float]:
    """A ``file`` table's ``theta_hat`` of one spike (docs/model.md, "Tables from a file"):
    the sample eigenvalues (snr, replicate) through the inverse of the theory's monotone map
    ``snr -> sample eigenvalue`` (``forward`` along ``snr``, above the threshold, with the
    edge at the threshold ``snr*``), piecewise linear, linear beyond the last point, ``snr*``
    at or inside the edge; shifted by the class means' size ``rho^2`` (``size``), so
    ``theta = rho^2 + snr`` and ``theta_c = rho^2 + snr*`` are positive for the detection
    margin. ``snr*`` is the theory's at the middle snr. O(snr x replicates)."""
    star = _theory_at(threshold, snr, float("nan"))
    out = np.full(eigenvalues.shape, np.nan)
    above, edge = (snr > star) & np.isfinite(forward), snr <= star
    knots_snr = np.concatenate([[star] if edge.any() else [], snr[above]])
    knots = np.concatenate([forward[edge][-1:], np.maximum.accumulate(forward[above])])
    if knots.size < 2 or not np.isfinite(star):
        return out, star + size
    slope = (knots_snr[-1] - knots_snr[-2]) / max(knots[-1] - knots[-2], 1e-300)
    with np.errstate(invalid="ignore"):
        out = np.where(
            eigenvalues > knots[-1],
            knots_snr[-1] + (eigenvalues - knots[-1]) * slope,
            np.interp(eigenvalues, knots, knots_snr),
        )
    return np.where(np.isfinite(eigenvalues), out + size, np.nan), star + size


def spike_thresholds(
    sweep: str,
    cells: xr.Dataset,
    theory: xr.Dataset,
    *,
    margin: float,
    n_boot: int,
    level: float,
    seed: int,
) -> pd.DataFrame:
    """Successive thresholds: one estimate with CI (or bound) per curve, spike and transition beside
    both variants' thresholds and whether the CI contains them (``classes_thresholds.csv``,
    docs/data-contract.md, "Tables"); of a table from a file the sample transition only,
    through :func:`_file_theta_hat` (docs/model.md, "Tables from a file").
    O(curves x spikes x n_boot)."""
    from attnrmt.analysis.universality import sweep_laws
    from attnrmt.theory.classes import file_mean_size

    laws = sweep_laws(cells.attrs)
    theta = spike_theta_hat(cells)
    delta, gamma = effective_ratios(cells)
    snr = np.asarray(cells["snr"].values, dtype=float)
    dims = [axis for axis in CURVE_AXES if axis in theta.dims]
    theta = theta.transpose(*dims, "spike", "transition", "snr", "replicate")
    spikes = theta.sizes["spike"]
    measured = _on_spikes(cells, "top_eigenvalues", spikes).transpose(*theta.dims[:-3], "snr", ...)
    rows = []
    for index in np.ndindex(*(theta.sizes[dim] for dim in dims)):
        point = {dim: plain(theta[dim].values[i]) for dim, i in zip(dims, index, strict=True)}
        law = laws.get(str(point.get(TABLE_AXIS, next(iter(laws)))), {})
        delta_eff, gamma_eff = (_at_curve(ratio, point) for ratio in (delta, gamma))
        for spike in range(spikes):
            for t_index, transition in enumerate(TRANSITIONS):
                reps = theta.values[(*index, spike, t_index)]
                theta_c = float(critical_theta(delta_eff, gamma_eff, transition))
                if law.get("kind") == "file":
                    if transition == "population":  # a given table has none
                        continue
                    at = theory.sel({**point, "variant": "paper", "spike": spike}).transpose("snr")
                    reps, theta_c = _file_theta_hat(
                        measured.values[(*index, spike)],
                        np.asarray(at["spike_sample_eigenvalue"].values, dtype=float),
                        np.asarray(at["spike_threshold_sample"].values, dtype=float),
                        snr,
                        file_mean_size(law),
                    )
                if not np.isfinite(reps).any() or not np.isfinite(theta_c):
                    continue
                rng = setting_rng(seed, {**point, "spike": spike, "transition": transition})
                fit = fit_threshold(
                    snr, reps, theta_c, margin=margin, n_boot=n_boot, level=level, rng=rng
                )
                row: dict[str, Any] = {
                    "sweep": sweep,
                    **point,
                    "spike": spike,
                    "transition": transition,
                    **{k: fit[k] for k in ("estimate", "ci_low", "ci_high", "bound")},
                    **{k: fit[k] for k in ("extrapolated", "n_detected")},
                    "theta_critical": theta_c,
                }
                name = f"spike_threshold_{transition}"
                for variant in VARIANTS:
                    along = theory[name].sel(point, method=None).sel(variant=variant, spike=spike)
                    predicted = _theory_at(
                        np.asarray(along.transpose("snr").values, dtype=float),
                        np.asarray(along["snr"].values, dtype=float),
                        fit["estimate"],
                    )
                    row[variant] = predicted
                    row[f"contains_{variant}"] = bool(
                        np.isfinite(predicted) and fit["ci_low"] <= predicted <= fit["ci_high"]
                    )
                rows.append(row)
    return pd.DataFrame(rows)


def measured_spikes(cells: xr.Dataset, quantity: str) -> xr.DataArray:
    """The cells' per-spike ``quantity`` of :data:`_COMPARED` (dim ``spike``) as its theory
    predicts it: a file table's sample overlaps on the span of the spike directions
    (:data:`_SPAN`, docs/model.md, "Tables from a file"). O(cells x spikes)."""
    from attnrmt.analysis.universality import sweep_laws

    spikes = int(classes_of(cells)["spikes"])  # type: ignore[index]
    name = _COMPARED[quantity][0]
    measured = _on_spikes(cells, name, spikes) if "k" in cells[name].dims else cells[name]
    laws = sweep_laws(cells.attrs)
    here = cells[TABLE_AXIS].values if TABLE_AXIS in cells.coords else next(iter(laws))
    is_file = [laws[str(name)].get("kind") == "file" for name in np.atleast_1d(here)]
    if quantity not in _SPAN or not any(is_file):
        return measured
    span = _on_spikes(cells, _SPAN[quantity], spikes)
    if TABLE_AXIS not in cells.dims:
        return span
    return xr.where(xr.DataArray(is_file, coords={TABLE_AXIS: here}), span, measured)


def spike_comparison(sweep: str, cells: xr.Dataset, theory: xr.Dataset) -> pd.DataFrame:
    """Replicate mean and standard error of every per-spike quantity of :data:`_COMPARED` at
    every grid point beside its theory (``classes_spikes.csv``, docs/data-contract.md,
    "Tables"). O(cells x spikes)."""
    if classes_of(cells) is None:
        return pd.DataFrame()
    frames = []
    for quantity, (_, theory_name, variants) in _COMPARED.items():
        measured = measured_spikes(cells, quantity)
        mean, sem, _ = replicate_mean_sem(measured)
        for variant in variants:
            predicted = theory[theory_name].sel(variant=variant, drop=True)
            table = xr.Dataset({"measured": mean, "sem": sem, "theory": predicted})
            frame = table.to_dataframe().reset_index()
            frame = frame[[c for c in frame.columns if c in (*mean.dims, *table.data_vars)]]
            frame.insert(0, "sweep", sweep)
            frame["quantity"] = quantity
            frame["variant"] = variant
            error = (frame["measured"] - frame["theory"]).abs()
            with np.errstate(divide="ignore", invalid="ignore"):
                frame["rel_error"] = error / frame["theory"].abs()
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: Columns of :func:`spike_thresholds` stored in analysis.zarr, and their variable names.
_STORED = {
    name: f"spike_threshold_{name}"
    for name in ("estimate", "ci_low", "ci_high", "extrapolated", "n_detected")
}


def spike_threshold_dataset(table: pd.DataFrame, bound_codes: tuple[str, ...]) -> xr.Dataset:
    """:func:`spike_thresholds` as analysis.zarr variables on ``(curve axes, spike,
    transition)``: :data:`_STORED` and ``spike_threshold_bound`` (int8 codes of
    ``bound_codes``, CF flags). O(rows)."""
    if table.empty:
        return xr.Dataset()
    index = [c for c in (*CURVE_AXES, "spike", "transition") if c in table]
    frame = table.set_index(index)
    out = xr.Dataset.from_dataframe(frame[list(_STORED)]).rename(_STORED)
    codes = frame["bound"].map({name: code for code, name in enumerate(bound_codes)})
    bound = xr.DataArray.from_series(codes.astype(float)).fillna(bound_codes.index("failed"))
    out["spike_threshold_bound"] = bound.astype(np.int8)
    out["spike_threshold_bound"].attrs = {
        "flag_values": list(range(len(bound_codes))),
        "flag_meanings": " ".join(bound_codes),
    }
    return out
