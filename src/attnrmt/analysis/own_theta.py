"""``theta_hat`` and ``theta_c`` of the table laws with a general bulk (anisotropic, file):
the inverse spike maps of each law's own theory (docs/thresholds.md, "General bulks";
:func:`attnrmt.theory.anisotropic.spike_strength`) in place of the isotropic closed forms,
which stay the path of every other law."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from attnrmt.analysis._common import at_signal, effective_ratios
from attnrmt.contract import TABLE_AXIS
from attnrmt.model.table_laws import covariance_spectrum
from attnrmt.theory.anisotropic import AnisotropicBulk, anisotropic_bulk, file_bulk, spike_strength

#: Table-law kinds whose bulk is not the isotropic one (docs/model.md, "Anisotropic tables").
GENERAL_KINDS = ("anisotropic", "file")
#: Coordinate of ``theta_hat`` carrying the general laws' ``theta_c`` to the fit.
CRITICAL = "theta_c_own"


def _bulk(law: Mapping[str, Any], d: int, delta: float, gamma: float) -> AnisotropicBulk:
    if law["kind"] == "file":
        return file_bulk(law, gamma)[0]
    lam = covariance_spectrum(law, d)
    assert lam is not None
    on_u = np.full(d, 1.0 / d) if law["signal"] == "random" else np.eye(d)[0]
    return anisotropic_bulk(lam, on_u, delta, gamma)


def own_theta(cells: xr.Dataset, theta: xr.DataArray) -> xr.DataArray:
    """``theta`` (the isotropic ``theta_hat``, ``transition`` first) with the cells of every
    general law replaced by its own inverse maps, and the coordinate :data:`CRITICAL`
    (NaN for the other laws) when the sweep has such a law. One bulk per distinct
    ``(law, d, delta, gamma)``: O(bulks x (scans + 4096 x atoms) + cells x atoms)."""
    from attnrmt.analysis.universality import sweep_laws

    laws = {n: law for n, law in sweep_laws(cells.attrs).items() if law["kind"] in GENERAL_KINDS}
    if not laws:
        return theta
    delta, gamma = effective_ratios(cells)
    pop = at_signal(cells, "pop_top_eigenvalues", population=True) / cells["kappa"]
    sam = at_signal(cells, "top_eigenvalues") / cells["kappa"]
    noise = cells["alpha"] / cells["kappa"] * delta
    pop, sam, noise, delta, gamma, d = xr.broadcast(pop, sam, noise, delta, gamma, cells["d"])
    theta = theta.copy()
    critical = xr.full_like(theta, np.nan)
    for name, law in laws.items():
        at = {TABLE_AXIS: name} if TABLE_AXIS in pop.dims else {}
        arrays = [
            a.loc[at].drop_vars("k", errors="ignore") for a in (pop, sam, noise, delta, gamma, d)
        ]
        dims = arrays[0].dims
        flat = [np.asarray(a.transpose(*dims).values, dtype=float).ravel() for a in arrays]
        keys = np.stack(flat[3:], axis=1)
        if law["kind"] == "file":  # no class-mean noise beyond the table's own Dlt_0
            flat[2] = np.zeros_like(flat[2])
        found = np.full((4, keys.shape[0]), np.nan)
        for key in np.unique(keys[np.isfinite(keys).all(axis=1)], axis=0):
            rows = np.all(keys == key, axis=1)
            bulk = _bulk(law, int(key[2]), float(key[0]), float(key[1]))
            found[0, rows], found[1, rows], found[2, rows], found[3, rows] = spike_strength(
                bulk, flat[0][rows], flat[1][rows], flat[2][rows]
            )
        shape = arrays[0].shape
        for target, first in ((theta, 0), (critical, 2)):
            values = np.stack([found[first].reshape(shape), found[first + 1].reshape(shape)])
            new = xr.DataArray(values, dims=("transition", *dims))
            target.loc[at] = new.transpose(*target.loc[at].dims).values
    return theta.assign_coords({CRITICAL: critical})


def own_critical(
    theta: xr.DataArray, curve_dims: list[str], theta_c: np.ndarray
) -> tuple[np.ndarray, xr.DataArray]:
    """``theta_c`` (curve axes then ``transition``) with the general laws' own critical
    values from ``theta``'s :data:`CRITICAL` coordinate, and ``theta`` without it. O(cells)."""
    if CRITICAL not in theta.coords:
        return theta_c, theta
    keep = [*curve_dims, "transition"]
    mean = theta[CRITICAL].mean([d for d in theta[CRITICAL].dims if d not in keep])
    own = np.asarray(mean.transpose(*curve_dims, "transition").values, dtype=float)
    return np.where(np.isfinite(own), own, theta_c), theta.drop_vars(CRITICAL)


__all__ = ["CRITICAL", "GENERAL_KINDS", "own_critical", "own_theta"]
