"""Bulk fit: empirical spectra of ``S`` against ``kappa (MP_delta ⊠ MP_gamma)``
(docs/model.md, "Bulk law", "What the pipeline tests").

Outlier rule (documented in ``docs/thresholds.md``): an eigenvalue is excluded from the bulk
when it exceeds the theoretical upper edge by a relative margin,
``lambda > kappa * upper(delta, gamma) * (1 + margin)`` (default ``margin = 0.05``). This needs
no knowledge of how many spikes the cell has (signal, uncentred mean spike, neither), and
at most a handful of the ``d`` eigenvalues are ever removed, an ``O(1/d)`` change of the
empirical distribution. Eigenvalues at or below ``zero_tol * max|lambda|`` are counted as
the atom at 0
(docs/model.md, "Bulk law": mass ``max(0, 1-1/delta, 1-1/gamma)``); the KS distance compares
the remaining eigenvalues with the continuous part of the law,
``F_c(x) = (F(x/kappa) - atom) / (1 - atom)`` (``F`` = :func:`attnrmt.theory.bulk_cdf`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnrmt.analysis._common import effective_ratios
from attnrmt.theory import bulk_atom, bulk_cdf, bulk_edges

#: Relative size below which an eigenvalue counts as zero (numerics, not a setting).
DEFAULT_ZERO_TOL = 1e-9


def ks_distance(
    eigenvalues: np.ndarray,
    delta: float,
    gamma: float,
    kappa: float,
    *,
    margin: float,
    zero_tol: float = DEFAULT_ZERO_TOL,
) -> dict[str, float]:
    """KS distance of one spectrum from the continuous part of ``kappa MP_delta ⊠ MP_gamma``.

    Implements docs/model.md, "Bulk law": ``F`` is the closed-form CDF of ``MP_delta ⊠ MP_gamma``
    including
    the atom ``max(0, 1-1/delta, 1-1/gamma)`` at 0; the statistic is
    ``sup_x |F_n(x) - F_c(x)|`` over the non-zero, non-outlier eigenvalues.

    Parameters
    ----------
    eigenvalues : ndarray (n,)
        Spectrum of ``S`` (NaN padding is ignored), units of ``S``.
    delta, gamma : float
        Ratios ``d/V``, ``d/N`` (use the realised ones).
    kappa : float
        ``||w||^2``, the scale of the bulk.
    margin : float
        Relative margin above the theoretical upper edge beyond which an eigenvalue is an
        outlier and excluded.
    zero_tol : float
        Eigenvalues ``<= zero_tol * max|lambda|`` count as exact zeros (the atom).

    Returns
    -------
    dict
        ``ks`` (KS distance), ``n_outliers`` (excluded above the edge), ``zero_fraction``
        (fraction of zeros among all eigenvalues), ``lower_edge`` / ``upper_edge`` (smallest
        non-zero and largest retained eigenvalue, units of ``S``), ``n_bulk``.
    """
    lam = np.asarray(eigenvalues, dtype=float)
    lam = np.sort(lam[np.isfinite(lam)])
    nan = float("nan")
    if lam.size == 0:
        return {"ks": nan, "n_outliers": nan, "zero_fraction": nan, "lower_edge": nan,
                "upper_edge": nan, "n_bulk": 0.0}
    _, upper = bulk_edges(delta, gamma)
    cutoff = kappa * float(upper) * (1.0 + margin)
    scale = float(np.max(np.abs(lam)))
    is_zero = lam <= zero_tol * scale
    is_outlier = lam > cutoff
    bulk = lam[~is_zero & ~is_outlier]
    atom = float(bulk_atom(delta, gamma))
    result = {
        "n_outliers": float(is_outlier.sum()),
        "zero_fraction": float(is_zero.mean()),
        "n_bulk": float(bulk.size),
    }
    if bulk.size == 0 or atom >= 1.0:
        return {**result, "ks": nan, "lower_edge": nan, "upper_edge": nan}
    cdf = (np.asarray(bulk_cdf(bulk / kappa, delta, gamma), dtype=float) - atom) / (1.0 - atom)
    n = bulk.size
    above = np.arange(1, n + 1) / n - cdf
    below = cdf - np.arange(0, n) / n
    ks = float(max(above.max(), below.max()))
    return {**result, "ks": ks, "lower_edge": float(bulk[0]), "upper_edge": float(bulk[-1])}


_FIELDS = ("ks", "n_outliers", "zero_fraction", "lower_edge", "upper_edge", "n_bulk")


def bulk_fit(
    cells: xr.Dataset, *, margin: float, zero_tol: float = DEFAULT_ZERO_TOL
) -> xr.Dataset:
    """Per-cell bulk fit over a whole ``cells.zarr`` dataset
    (docs/model.md, "What the pipeline tests").

    Applies :func:`ks_distance` to ``eigenvalues`` of every cell and replicate with the
    realised ratios ``d/V``, ``d/N`` and the cell's ``kappa``, and adds the theoretical edges
    ``kappa * bulk_edges`` and atom for comparison.

    Parameters
    ----------
    cells : xarray.Dataset
        Contract-shaped dataset with ``eigenvalues`` (..., replicate, eig), ``kappa``,
        ``V``, ``N``.
    margin, zero_tol : float
        See :func:`ks_distance`.

    Returns
    -------
    xarray.Dataset
        ``bulk_ks``, ``bulk_n_outliers``, ``bulk_zero_fraction``, ``bulk_lower_edge_emp``,
        ``bulk_upper_edge_emp`` on the dims of ``eigenvalues`` minus ``eig``, and
        ``bulk_lower_edge_th``, ``bulk_upper_edge_th``, ``bulk_atom_th`` (units of ``S``).
    """
    eig = cells["eigenvalues"]
    delta, gamma = effective_ratios(cells)
    kappa = cells["kappa"]
    delta, gamma, kappa, eig = xr.broadcast(delta, gamma, kappa, eig, exclude=["eig"])
    dims = [d for d in eig.dims if d != "eig"]
    eig = eig.transpose(*dims, "eig")
    delta, gamma, kappa = (a.transpose(*dims) for a in (delta, gamma, kappa))
    shape = tuple(eig.sizes[d] for d in dims)
    out = {name: np.full(shape, np.nan) for name in _FIELDS}
    dv, gv, kv = (np.asarray(a.values, dtype=float) for a in (delta, gamma, kappa))
    # Spectra are read one setting (the dims before snr, centered, replicate) at a time:
    # memory O(one setting's spectra), not O(cells x d) (docs/scaling.md).
    n_outer = max(0, len(dims) - 3)
    for outer in np.ndindex(*shape[:n_outer]):
        lam = np.asarray(eig[outer].values, dtype=float)
        for inner in np.ndindex(*shape[n_outer:]):
            index = (*outer, *inner)
            if not np.all(np.isfinite([dv[index], gv[index], kv[index]])) or kv[index] <= 0:
                continue
            fit = ks_distance(lam[inner], dv[index], gv[index], kv[index], margin=margin,
                              zero_tol=zero_tol)
            for name in _FIELDS:
                out[name][index] = fit[name]
    coords = {d: eig[d] for d in dims if d in eig.coords}
    lower, upper = bulk_edges(np.where(np.isfinite(dv), dv, 1.0), np.where(np.isfinite(gv), gv,
                                                                           1.0))
    atom = bulk_atom(np.where(np.isfinite(dv), dv, 1.0), np.where(np.isfinite(gv), gv, 1.0))

    def da(values: np.ndarray, long_name: str, units: str = "units of S") -> xr.DataArray:
        return xr.DataArray(values, dims=dims, coords=coords,
                            attrs={"long_name": long_name, "units": units})

    return xr.Dataset({
        "bulk_ks": da(out["ks"], "KS distance of the bulk from kappa MP_delta ⊠ MP_gamma", "1"),
        "bulk_n_outliers": da(out["n_outliers"], "eigenvalues above the edge margin", "count"),
        "bulk_zero_fraction": da(out["zero_fraction"], "fraction of zero eigenvalues", "1"),
        "bulk_lower_edge_emp": da(out["lower_edge"], "smallest non-zero eigenvalue"),
        "bulk_upper_edge_emp": da(out["upper_edge"], "largest bulk eigenvalue"),
        "bulk_lower_edge_th": da(kv * np.asarray(lower), "kappa * theory lower edge"),
        "bulk_upper_edge_th": da(kv * np.asarray(upper), "kappa * theory upper edge"),
        "bulk_atom_th": da(np.broadcast_to(np.asarray(atom), shape).copy(), "theory atom", "1"),
    }, attrs={"outlier_margin": margin, "zero_tol": zero_tol})
