"""Bulk fit: empirical spectra of ``S`` against ``kappa (MP_delta ⊠ MP_gamma)``
(docs/model.md, "Bulk law", "What the pipeline tests"). An eigenvalue above the
theoretical upper edge by the relative ``margin`` is an outlier (docs/thresholds.md);
those at or below ``zero_tol max|lambda|`` are the atom at 0; the KS distance compares
the rest with the continuous part of the law,
``F_c(x) = (F(x/kappa) - atom) / (1 - atom)`` (``F`` = :func:`attnrmt.theory.bulk_cdf`).
Where the realised ``N T / V`` is below the large-T bound the upper edge is the expected
largest noise eigenvalue at the cell's sizes (docs/model.md, "What replaces the edge")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr

from attnrmt.analysis._common import effective_ratios
from attnrmt.analysis.noise_edge import finite_d_edges
from attnrmt.analysis.own_theta import own_bulk_fit
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
    """KS distance of one spectrum from the continuous part of ``kappa MP_delta ⊠ MP_gamma``
    (module docstring; realised ratios, NaN padding ignored). Returns ``ks``, ``n_outliers``,
    ``zero_fraction``, ``lower_edge`` / ``upper_edge`` (smallest non-zero and largest
    retained eigenvalue, units of ``S``) and ``n_bulk``. O(n log n)."""
    ratios = (np.array([value]) for value in (delta, gamma, kappa))
    spectrum = np.asarray(eigenvalues, dtype=float)[None, :]
    fits = ks_distances(spectrum, *ratios, margin=margin, zero_tol=zero_tol)
    return {name: float(values[0]) for name, values in fits.items()}


def ks_distances(
    spectra: np.ndarray,
    delta: np.ndarray,
    gamma: np.ndarray,
    kappa: np.ndarray,
    *,
    margin: float,
    zero_tol: float = DEFAULT_ZERO_TOL,
    law: tuple[Callable[[np.ndarray], np.ndarray], float] | None = None,
    edge: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """:func:`ks_distance` of many spectra at once (``spectra`` (n, m) NaN-padded rows;
    ``delta``, ``gamma``, ``kappa`` (n,)), each field an (n,) array; ``law`` another bulk of
    ``S/kappa`` (its CDF, upper edge) for every row; ``edge`` (n,) the upper edge of ``S/kappa``
    of the outlier cutoff where finite. Vectorised over the rows, the CDF evaluated once on all
    retained eigenvalues: the values of one call per row. O(n m log m)."""
    spectra = np.asarray(spectra, dtype=float)
    n_rows, width = spectra.shape
    fields = {name: np.full(n_rows, np.nan) for name in _FIELDS}
    fields["n_bulk"][:] = 0.0
    if n_rows == 0 or width == 0:
        return fields
    upper = bulk_edges(delta, gamma)[1] if law is None else law[1]
    upper = upper if edge is None else np.where(np.isfinite(edge), edge, upper)
    cutoffs = kappa * np.asarray(upper, dtype=float) * (1.0 + margin)
    atoms = np.broadcast_to(np.asarray(bulk_atom(delta, gamma), dtype=float), (n_rows,))
    lam = np.sort(spectra, axis=1)  # ascending, NaN last
    finite = np.isfinite(lam)
    n_finite = finite.sum(axis=1)
    scale = np.max(np.abs(np.where(finite, lam, 0.0)), axis=1)
    with np.errstate(invalid="ignore"):
        is_zero = finite & (lam <= zero_tol * scale[:, None])
        is_outlier = finite & (lam > cutoffs[:, None])
    bulk = finite & ~is_zero & ~is_outlier
    has = n_finite > 0
    fields["n_outliers"][has] = is_outlier.sum(axis=1)[has]
    fields["zero_fraction"][has] = is_zero.sum(axis=1)[has] / n_finite[has]
    fields["n_bulk"][:] = bulk.sum(axis=1)
    kept = bulk & (atoms < 1.0)[:, None]  # an atom of mass 1 leaves no continuous part
    sizes = kept.sum(axis=1)
    if sizes.sum() == 0:
        return fields
    owner = np.nonzero(kept)[0]
    scaled = (lam / kappa[:, None])[kept]
    raw_cdf = np.asarray(
        bulk_cdf(scaled, delta[owner], gamma[owner]) if law is None else law[0](scaled), dtype=float
    )
    cdf = (raw_cdf - atoms[owner]) / (1.0 - atoms[owner])
    rank = (np.cumsum(kept, axis=1) - 1)[kept]  # position among the row's kept values
    distance = np.full(lam.shape, -np.inf)
    distance[kept] = np.maximum((rank + 1) / sizes[owner] - cdf, cdf - rank / sizes[owner])
    fitted = sizes > 0
    first = np.argmax(kept, axis=1)
    last = width - 1 - np.argmax(kept[:, ::-1], axis=1)
    rows = np.arange(n_rows)
    fields["ks"][fitted] = distance.max(axis=1)[fitted]
    fields["lower_edge"][fitted] = lam[rows, first][fitted]
    fields["upper_edge"][fitted] = lam[rows, last][fitted]
    return fields


_FIELDS = ("ks", "n_outliers", "zero_fraction", "lower_edge", "upper_edge", "n_bulk")


def _fit_block(
    spectra: np.ndarray, *blocks: np.ndarray, margin: float, zero_tol: float
) -> np.ndarray:
    """:func:`ks_distances` of a block of spectra ``(..., eig)`` with its ``delta``, ``gamma``,
    ``kappa``, upper ``edge`` blocks ``(..., 1)``: ``(..., len(_FIELDS))``, NaN where a ratio is
    not finite or ``kappa <= 0`` (an absent cell)."""
    *ratios, edge = [np.asarray(a, dtype=float).reshape(-1) for a in blocks]
    usable = np.all(np.isfinite(ratios), axis=0) & (ratios[2] > 0)
    fits = ks_distances(
        np.asarray(spectra, dtype=float).reshape(-1, spectra.shape[-1])[usable],
        *(a[usable] for a in ratios),
        margin=margin,
        zero_tol=zero_tol,
        edge=edge[usable],
    )
    out = np.full((usable.size, len(_FIELDS)), np.nan)
    for index, name in enumerate(_FIELDS):
        out[usable, index] = fits[name]
    return out.reshape(*spectra.shape[:-1], len(_FIELDS))


def _fit_by_setting(
    spectra: Any, values: tuple[np.ndarray, ...], *, margin: float, zero_tol: float
) -> np.ndarray:
    """:func:`_fit_block` over ``spectra`` ``(settings..., snr, centered, replicate, eig)`` with
    ``values`` its ``(delta, gamma, kappa, edge)`` (a Dask array, read chunk by chunk: one setting
    per chunk in ``cells.zarr``'s view; a NumPy array is split one setting per chunk), the chunks
    computed by Dask's scheduler in parallel. Memory O(one chunk per thread + the fields of every
    cell); time O(cells x eig log eig)."""
    import dask.array as da

    if not isinstance(spectra, da.Array):
        n_outer = max(0, spectra.ndim - 4)
        spectra = da.from_array(
            np.asarray(spectra), chunks=(*(1,) * n_outer, *spectra.shape[n_outer:]), name=False
        )
    spectra = spectra.rechunk({spectra.ndim - 1: -1})
    grid_chunks = spectra.chunks[:-1]
    ratios = [da.from_array(v[..., None], chunks=(*grid_chunks, (1,)), name=False) for v in values]
    fitted = da.map_blocks(
        _fit_block,
        spectra,
        *ratios,
        margin=margin,
        zero_tol=zero_tol,
        chunks=(*grid_chunks, (len(_FIELDS),)),
        dtype=np.float64,
        meta=np.empty((0,) * spectra.ndim, dtype=np.float64),
    )
    return np.asarray(fitted.compute())


def bulk_fit(cells: xr.Dataset, *, margin: float, zero_tol: float = DEFAULT_ZERO_TOL) -> xr.Dataset:
    """Per-cell bulk fit of ``cells`` (docs/model.md, "What the pipeline tests"):
    :func:`ks_distances` of every cell's ``eigenvalues`` with its realised ratios and
    ``kappa`` (anisotropic and file laws against their own bulk,
    :func:`attnrmt.analysis.own_theta.own_bulk_fit`; below the large-T bound the upper edge
    is the mean of :func:`attnrmt.analysis.noise_edge.finite_d_edges`). Returns ``bulk_ks``,
    ``bulk_n_outliers``, ``bulk_zero_fraction``, ``bulk_{lower,upper}_edge_emp`` on the
    cells' dims but ``eig``, and the theory's ``bulk_{lower,upper}_edge_th``, ``bulk_atom_th``
    (units of ``S``); where some cell is below the bound also ``bulk_noise_top_{mean,sd}``
    (``kappa`` times :func:`finite_d_edges`, NaN elsewhere). O(cells x d log d)."""
    eig = cells["eigenvalues"]
    delta, gamma = effective_ratios(cells)
    kappa = kappa0 = cells["kappa"]
    mean, sd = finite_d_edges(cells)
    delta, gamma, kappa, top, eig = xr.broadcast(delta, gamma, kappa, mean, eig, exclude=["eig"])
    dims = [d for d in eig.dims if d != "eig"]
    eig = eig.transpose(*dims, "eig")
    delta, gamma, kappa, top = (a.transpose(*dims) for a in (delta, gamma, kappa, top))
    shape = tuple(eig.sizes[d] for d in dims)
    values = tuple(np.asarray(a.values, dtype=float) for a in (delta, gamma, kappa, top))
    fitted = _fit_by_setting(eig.data, values, margin=margin, zero_tol=zero_tol)
    dv, gv, kv, tv = values
    out = {name: fitted[..., index] for index, name in enumerate(_FIELDS)}
    coords = {d: eig[d] for d in dims if d in eig.coords}
    ratios = [np.where(np.isfinite(v), v, 1.0) for v in (dv, gv)]
    (lower, upper), atom = bulk_edges(*ratios), bulk_atom(*ratios)

    def da(values: np.ndarray, long_name: str, units: str = "units of S") -> xr.DataArray:
        return xr.DataArray(
            values, dims=dims, coords=coords, attrs={"long_name": long_name, "units": units}
        )

    fit = xr.Dataset(
        {
            "bulk_ks": da(out["ks"], "KS distance of the bulk from kappa MP_delta ⊠ MP_gamma", "1"),
            "bulk_n_outliers": da(out["n_outliers"], "eigenvalues above the edge margin", "count"),
            "bulk_zero_fraction": da(out["zero_fraction"], "fraction of zero eigenvalues", "1"),
            "bulk_lower_edge_emp": da(out["lower_edge"], "smallest non-zero eigenvalue"),
            "bulk_upper_edge_emp": da(out["upper_edge"], "largest bulk eigenvalue"),
            "bulk_lower_edge_th": da(kv * np.asarray(lower), "kappa * theory lower edge"),
            "bulk_upper_edge_th": da(
                kv * np.where(np.isfinite(tv), tv, upper), "kappa * theory upper edge"
            ),
            "bulk_atom_th": da(np.broadcast_to(np.asarray(atom), shape).copy(), "theory atom", "1"),
        },
        attrs={"outlier_margin": margin, "zero_tol": zero_tol},
    )
    if np.isfinite(tv).any():  # below the large-T bound (docs/model.md, "What replaces the edge")
        fit["bulk_noise_top_mean"], fit["bulk_noise_top_sd"] = mean * kappa0, sd * kappa0
    return own_bulk_fit(cells, fit, margin=margin, zero_tol=zero_tol)
