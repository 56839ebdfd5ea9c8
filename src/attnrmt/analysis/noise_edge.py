"""The edge of the noise bulk at finite ``d`` for the cells of a grid (docs/model.md, "What
replaces the edge"): the level the sample inverse map reads eigenvalues against where the
realised ``N T / V`` is below the large-T bound."""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnrmt.theory.finite_t import FINITE_T_BOUND, noise_top


def finite_d_edges(cells: xr.Dataset) -> xr.DataArray:
    """The edge of ``S / kappa`` that replaces ``f(u*)`` at finite ``d`` (docs/model.md,
    "What replaces the edge"), for every cell of a ``cells.zarr`` grid whose realised
    ``N T / V`` is below :data:`FINITE_T_BOUND` (NaN elsewhere: the large-T edge holds):
    mean + sd of the largest noise eigenvalue (:func:`noise_top`) at its ``d``, ``V``, ``N``
    and replicate-mean ``effective_weights``, once per distinct ``(d, V, N, weights)``."""
    if not {"effective_weights", "V", "N"} <= set(cells.variables):
        return xr.DataArray(np.nan)
    w = cells["effective_weights"]
    w = w.mean([dim for dim in ("snr", "replicate") if dim in w.dims])
    d, V, N, T = (cells[k].astype(float) for k in ("d", "V", "N", "T"))
    d, V, N, T, w = xr.broadcast(d, V, N, T, w, exclude=["position"])
    ws = np.asarray(w.transpose(*d.dims, "position").values, dtype=float)
    dv, vv, nv, tv = (np.asarray(a.values, dtype=float) for a in (d, V, N, T))
    out = np.full(d.shape, np.nan)
    found: dict[tuple[float, ...], float] = {}
    for i in np.ndindex(d.shape):
        weights = ws[i][: int(tv[i])] if np.isfinite(tv[i]) else ws[i][:0]
        if not (vv[i] > 0 and nv[i] * weights.size / vv[i] < FINITE_T_BOUND):
            continue
        key = (dv[i], vv[i], nv[i], *np.round(weights, 12))
        if key not in found and np.all(np.isfinite(weights)):
            d_, v_, n_ = int(dv[i]), int(vv[i]), int(nv[i])
            mean, sd = noise_top(d_, v_, n_, weights, seed=d_ + 7 * v_ + 13 * n_)
            found[key] = mean + sd
        out[i] = found.get(key, np.nan)
    return xr.DataArray(out, dims=d.dims, coords=d.coords)
