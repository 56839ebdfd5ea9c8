"""The largest noise eigenvalue at finite ``d`` for the cells of a grid (docs/model.md, "What
replaces the edge"): where the realised ``N T / V`` is below the large-T bound, its mean is
the bulk edge the bulk fit and the comparison test, and mean + sd the level the sample
inverse map reads eigenvalues against."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import xarray as xr

from attnrmt.contract import TABLE_AXIS
from attnrmt.theory.finite_t import FINITE_T_BOUND, noise_top


@lru_cache(maxsize=256)
def _noise_top(d: int, V: int, N: int, weights: tuple[float, ...]) -> tuple[float, float]:
    """:func:`noise_top` of one setting, computed once per process (the bulk fit and the
    thresholds of one analysis share it)."""
    return noise_top(d, V, N, np.asarray(weights), seed=d + 7 * V + 13 * N)


def finite_d_edges(cells: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    """Mean and sd of the largest eigenvalue of ``S0 / kappa`` (:func:`noise_top`; docs/model.md,
    "What replaces the edge") for every cell of a ``cells.zarr`` grid of an isotropic table
    whose realised ``N T / V`` is below :data:`FINITE_T_BOUND` (NaN elsewhere: the large-T
    edge holds; anisotropic and file tables have their own bulk), at its ``d``, ``V``, ``N``
    and replicate-mean ``effective_weights`` (rounded to 12 digits), once per distinct
    ``(d, V, N, weights)``."""
    if not {"effective_weights", "V", "N"} <= set(cells.variables):
        return xr.DataArray(np.nan), xr.DataArray(np.nan)
    from attnrmt.analysis.own_theta import GENERAL_KINDS
    from attnrmt.analysis.universality import sweep_laws

    general = [n for n, law in sweep_laws(cells.attrs).items() if law["kind"] in GENERAL_KINDS]
    w = cells["effective_weights"]
    w = w.mean([dim for dim in ("snr", "replicate") if dim in w.dims])
    d, V, N, T = (cells[k].astype(float) for k in ("d", "V", "N", "T"))
    d, V, N, T, w = xr.broadcast(d, V, N, T, w, exclude=["position"])
    ws = np.asarray(w.transpose(*d.dims, "position").values, dtype=float)
    dv, vv, nv, tv = (np.asarray(a.values, dtype=float) for a in (d, V, N, T))
    out = np.full((2, *d.shape), np.nan)
    for i in np.ndindex(d.shape):
        weights = np.round(ws[i][: int(tv[i])] if np.isfinite(tv[i]) else ws[i][:0], 12)
        if vv[i] > 0 and nv[i] * weights.size / vv[i] < FINITE_T_BOUND:
            if weights.size and np.all(np.isfinite(weights)):
                key = (int(dv[i]), int(vv[i]), int(nv[i]), tuple(weights.tolist()))
                out[(slice(None), *i)] = _noise_top(*key)
    mean, sd = (xr.DataArray(o, dims=d.dims, coords=d.coords) for o in out)
    if TABLE_AXIS in mean.dims:
        keep = ~mean[TABLE_AXIS].isin(general)
        return mean.where(keep), sd.where(keep)
    return (mean * np.nan, sd * np.nan) if general else (mean, sd)
