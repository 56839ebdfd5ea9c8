"""``theta_hat``, ``theta_c`` and the bulk fit of the table laws with a general bulk
(anisotropic, file): each law's own theory (docs/thresholds.md, "General bulks";
:func:`attnrmt.theory.anisotropic.spike_strength`, :func:`attnrmt.theory.free.free_density`)
in place of the isotropic closed forms, which stay the path of every other law."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import xarray as xr

from attnrmt.analysis._common import at_signal, effective_ratios
from attnrmt.contract import TABLE_AXIS
from attnrmt.model.table_laws import covariance_spectrum
from attnrmt.theory import bulk_atom
from attnrmt.theory.anisotropic import (
    AnisotropicBulk,
    anisotropic_bulk,
    file_bulk,
    signal_weights,
    spike_strength,
)
from attnrmt.theory.free import free_density

#: Table-law kinds whose bulk is not the isotropic one (docs/model.md, "Anisotropic tables").
GENERAL_KINDS = ("anisotropic", "file")
#: Coordinate of ``theta_hat`` carrying the general laws' ``theta_c`` to the fit.
CRITICAL = "theta_c_own"
#: Points of the sample bulk's density integrated into its CDF (error ~1e-4 in the CDF).
CDF_POINTS = 4001
#: bulk_fit's variables for the fields of :func:`attnrmt.analysis.bulk_fit.ks_distances`.
_BULK = {key: f"bulk_{key}" for key in ("ks", "n_outliers", "zero_fraction")}
_BULK |= {f"{end}_edge": f"bulk_{end}_edge_emp" for end in ("lower", "upper")}
_BULK |= {f"{end}_th": f"bulk_{end}_edge_th" for end in ("lower", "upper")}


def _bulk(law: Mapping[str, Any], d: int, delta: float, gamma: float) -> AnisotropicBulk:
    if law["kind"] == "file":
        return file_bulk(law, gamma)[0]
    lam = covariance_spectrum(law, d)
    assert lam is not None
    return anisotropic_bulk(lam, signal_weights(law, d), delta, gamma)


def _file_affine(theta: np.ndarray, ratio: np.ndarray, norm: float) -> np.ndarray:
    """A file table's ``theta = ratio (|Dlt_0| + sqrt snr)^2`` mapped to ``ratio snr``
    (signed square), affine in snr (docs/thresholds.md, "General bulks"). O(size)."""
    root = np.sqrt(np.maximum(theta, 0.0) / ratio) - norm
    return ratio * np.sign(root) * root**2


def hidden_signal(bulk: AnisotropicBulk) -> tuple[bool, bool]:
    """Whether the population (sample) signal eigenvalue is out of reach of the top
    eigenvalue: the largest isolated eigenvalue of ``Sigma`` (``floor``) lies above the
    edge ``s_pop`` (``s_sample``) and carries less than half of ``u``, so its noise outlier
    outranks the signal's eigenvalue while that leaves the bulk of the others
    (docs/thresholds.md, "General bulks"). O(atoms)."""
    noise = float(bulk.signal[bulk.atoms == bulk.floor].sum()) < 0.5
    return noise and bulk.floor > bulk.s_pop, noise and bulk.floor > bulk.s_sample


def _general_laws(cells: xr.Dataset) -> dict[str, dict[str, Any]]:
    from attnrmt.analysis.universality import sweep_laws

    if cells.attrs.get("classes"):  # K classes: the two-class bulk of a file does not apply
        return {}
    laws = sweep_laws(cells.attrs)
    present = set(cells[TABLE_AXIS].values) if TABLE_AXIS in cells.dims else set(laws)
    return {n: law for n, law in laws.items() if law["kind"] in GENERAL_KINDS and n in present}


def _settings(
    law: Mapping[str, Any], flat: list[np.ndarray]
) -> Iterator[tuple[AnisotropicBulk, np.ndarray]]:
    """The bulk of every distinct ``(delta, gamma, d)`` (the last three of the flat arrays)
    and the rows that have it."""
    keys = np.stack(flat[-3:], axis=1)
    for key in np.unique(keys[np.isfinite(keys).all(axis=1)], axis=0):
        yield _bulk(law, int(key[2]), float(key[0]), float(key[1])), np.all(keys == key, axis=1)


def _flat(arrays: list[xr.DataArray], at: dict[str, str]) -> tuple[list[str], list[np.ndarray]]:
    parts = [a.loc[at].drop_vars("k", errors="ignore") for a in arrays]
    dims = [str(dim) for dim in parts[0].dims]
    return dims, [np.asarray(a.transpose(*dims).values, dtype=float).ravel() for a in parts]


def own_theta(cells: xr.Dataset, theta: xr.DataArray) -> xr.DataArray:
    """``theta`` (the isotropic ``theta_hat``, ``transition`` first) with the cells of every
    general law replaced by its own inverse maps, and the coordinate :data:`CRITICAL`
    (NaN for the other laws) when the sweep has such a law. One bulk per distinct
    ``(law, d, delta, gamma)``: O(bulks x (scans + 4096 x atoms) + cells x atoms)."""
    laws = _general_laws(cells)
    if not laws:
        return theta
    delta, gamma = effective_ratios(cells)
    pop = at_signal(cells, "pop_top_eigenvalues", population=True) / cells["kappa"]
    sam = at_signal(cells, "top_eigenvalues") / cells["kappa"]
    noise = cells["alpha"] / cells["kappa"] * delta
    arrays = list(xr.broadcast(pop, sam, noise, delta, gamma, cells["d"]))
    theta = theta.copy()
    critical = xr.full_like(theta, np.nan)
    for name, law in laws.items():
        at = {TABLE_AXIS: name} if TABLE_AXIS in arrays[0].dims else {}
        dims, flat = _flat(arrays, at)
        file = law["kind"] == "file"  # no class-mean noise beyond the table's own Dlt_0
        found = np.full((4, flat[0].size), np.nan)
        for bulk, rows in _settings(law, flat):
            noise = flat[2][rows]
            found[:, rows] = spike_strength(bulk, flat[0][rows], flat[1][rows], noise * (not file))
            if file:
                norm = file_bulk(law, float(flat[4][rows][0]))[1]
                found[:, rows] = _file_affine(found[:, rows], noise / flat[3][rows], norm)
                found[::2, rows] = np.nan  # a given population has no transition
            for t, hidden in enumerate(hidden_signal(bulk)):
                if hidden:  # the top eigenvalue is a noise outlier: no estimate (inf theta_c)
                    found[t::2, rows] = [[np.nan], [np.inf]]
        shape = arrays[0].loc[at].drop_vars("k", errors="ignore").transpose(*dims).shape
        for target, first in ((theta, 0), (critical, 2)):
            values = np.stack([found[first].reshape(shape), found[first + 1].reshape(shape)])
            new = xr.DataArray(values, dims=("transition", *dims))
            target.loc[at] = new.transpose(*target.loc[at].dims).values
    return theta.assign_coords({CRITICAL: critical})


def own_critical(
    theta: xr.DataArray, curve_dims: list[str], theta_c: np.ndarray
) -> tuple[np.ndarray, xr.DataArray]:
    """``theta_c`` (curve axes then ``transition``) with the general laws' own critical
    values from ``theta``'s :data:`CRITICAL` coordinate (inf: a signal out of reach, see
    :func:`hidden_signal`), and ``theta`` without it. O(cells)."""
    if CRITICAL not in theta.coords:
        return theta_c, theta
    keep = [*curve_dims, "transition"]
    mean = theta[CRITICAL].mean([d for d in theta[CRITICAL].dims if d not in keep])
    own = np.asarray(mean.transpose(*curve_dims, "transition").values, dtype=float)
    return np.where(np.isnan(own), theta_c, own), theta.drop_vars(CRITICAL)


def _cdf(bulk: AnisotropicBulk, atom: float) -> Callable[[np.ndarray], np.ndarray]:
    """CDF of the sample bulk of ``S/kappa``: its density integrated on :data:`CDF_POINTS`
    points (trapezoids, normalised to ``1 - atom``) plus the closed-form atom at 0."""
    x = np.linspace(0.0, float(bulk.edges[-1, 1]), CDF_POINTS)
    rho = free_density(bulk.sample, x)
    mass = np.concatenate([[0.0], np.cumsum((rho[1:] + rho[:-1]) * np.diff(x) / 2)])
    mass = atom + (1 - atom) * mass / mass[-1]
    return lambda values: np.interp(values, x, mass)


def own_bulk_fit(
    cells: xr.Dataset, fit: xr.Dataset, *, margin: float, zero_tol: float
) -> xr.Dataset:
    """``fit`` (:func:`attnrmt.analysis.bulk_fit.bulk_fit`) with the cells of every general
    law fitted to its own bulk: KS distance from its CDF, outliers above its edge, its
    theory edges. O(settings x CDF_POINTS x atoms x Newton steps + cells x eig log eig)."""
    from attnrmt.analysis.bulk_fit import ks_distances

    laws = _general_laws(cells)
    if not laws:
        return fit
    fit = fit.copy(deep=True)
    eig = cells["eigenvalues"]
    grid = eig.isel(eig=0, drop=True)
    delta, gamma = effective_ratios(cells)
    arrays = [a.broadcast_like(grid) for a in (cells["kappa"], delta, gamma, cells["d"])]
    for name, law in laws.items():
        at = {TABLE_AXIS: name} if TABLE_AXIS in eig.dims else {}
        dims, flat = _flat(arrays, at)
        spectra = np.asarray(eig.loc[at].transpose(*dims, "eig").values, dtype=float)
        spectra = spectra.reshape(flat[0].size, -1)
        found = {key: np.full(flat[0].size, np.nan) for key in _BULK}
        for bulk, rows in _settings(law, flat):
            kappa, delta_r, gamma_r = flat[0][rows], flat[1][rows], flat[2][rows]
            own = (_cdf(bulk, float(bulk_atom(delta_r[0], gamma_r[0]))), float(bulk.edges[-1, 1]))
            fields = ks_distances(
                spectra[rows], delta_r, gamma_r, kappa, margin=margin, zero_tol=zero_tol, law=own
            )
            for key in ("ks", "n_outliers", "zero_fraction", "lower_edge", "upper_edge"):
                found[key][rows] = fields[key]
            found["lower_th"][rows] = kappa * bulk.edges[0, 0]
            found["upper_th"][rows] = kappa * bulk.edges[-1, 1]
        shape = tuple(eig.loc[at].sizes[dim] for dim in dims)
        for key, variable in _BULK.items():
            values = xr.DataArray(found[key].reshape(shape), dims=dims)
            fit[variable].loc[at] = values.transpose(*fit[variable].loc[at].dims).values
    return fit
