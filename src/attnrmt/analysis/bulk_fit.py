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
    fits = ks_distances(
        np.asarray(eigenvalues, dtype=float)[None, :],
        np.array([delta]),
        np.array([gamma]),
        np.array([kappa]),
        margin=margin,
        zero_tol=zero_tol,
    )
    return {name: float(values[0]) for name, values in fits.items()}


def ks_distances(
    spectra: np.ndarray,
    delta: np.ndarray,
    gamma: np.ndarray,
    kappa: np.ndarray,
    *,
    margin: float,
    zero_tol: float = DEFAULT_ZERO_TOL,
) -> dict[str, np.ndarray]:
    """:func:`ks_distance` of many spectra at once: ``spectra`` (n, m) NaN-padded rows,
    ``delta``, ``gamma``, ``kappa`` (n,). Returns each field of :func:`ks_distance` as an
    (n,) array.

    The closed-form CDF (:func:`attnrmt.theory.bulk_cdf`, elementwise) is evaluated once on
    the retained eigenvalues of all rows together, and the edges and atoms once per row, so
    the cost is O(n m log m) numpy work in a few vectorised calls instead of n calls of
    ~2 ms of fixed overhead each (the bulk fit of 10^6 tiny cells). Values are those of
    one call per row.
    """
    spectra = np.asarray(spectra, dtype=float)
    n_rows = spectra.shape[0]
    fields = {name: np.full(n_rows, np.nan) for name in _FIELDS}
    fields["n_bulk"][:] = 0.0
    if n_rows == 0:
        return fields
    _, upper = bulk_edges(delta, gamma)
    cutoffs = kappa * np.asarray(upper, dtype=float) * (1.0 + margin)
    atoms = np.broadcast_to(np.asarray(bulk_atom(delta, gamma), dtype=float), (n_rows,))
    retained: list[np.ndarray] = []
    for row in range(n_rows):
        lam = spectra[row]
        lam = np.sort(lam[np.isfinite(lam)])
        if lam.size == 0:
            retained.append(lam)
            continue
        is_zero = lam <= zero_tol * float(np.max(np.abs(lam)))
        is_outlier = lam > cutoffs[row]
        bulk = lam[~is_zero & ~is_outlier]
        fields["n_outliers"][row] = float(is_outlier.sum())
        fields["zero_fraction"][row] = float(is_zero.mean())
        fields["n_bulk"][row] = float(bulk.size)
        if atoms[row] >= 1.0:
            bulk = bulk[:0]
        retained.append(bulk)
    sizes = np.array([bulk.size for bulk in retained])
    if sizes.sum() == 0:
        return fields
    scaled = np.concatenate([bulk / kappa[row] for row, bulk in enumerate(retained)])
    owner = np.repeat(np.arange(n_rows), sizes)
    raw_cdf = np.asarray(bulk_cdf(scaled, delta[owner], gamma[owner]), dtype=float)
    cdf = (raw_cdf - atoms[owner]) / (1.0 - atoms[owner])
    for fitted, part in zip(np.flatnonzero(sizes), _split_nonempty(cdf, sizes), strict=True):
        n = part.size
        above = np.arange(1, n + 1) / n - part
        below = part - np.arange(0, n) / n
        fields["ks"][fitted] = float(max(above.max(), below.max()))
        fields["lower_edge"][fitted] = float(retained[fitted][0])
        fields["upper_edge"][fitted] = float(retained[fitted][-1])
    return fields


def _split_nonempty(values: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """The consecutive parts of ``values`` of the non-zero ``sizes``, in order."""
    parts = np.split(values, np.cumsum(sizes)[:-1])
    return [part for part, size in zip(parts, sizes, strict=True) if size > 0]


_FIELDS = ("ks", "n_outliers", "zero_fraction", "lower_edge", "upper_edge", "n_bulk")


def bulk_fit(cells: xr.Dataset, *, margin: float, zero_tol: float = DEFAULT_ZERO_TOL) -> xr.Dataset:
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
        inner_shape = lam.shape[:-1]
        ratios = [np.asarray(a[outer], dtype=float).reshape(-1) for a in (dv, gv, kv)]
        usable = np.all(np.isfinite(ratios), axis=0) & (ratios[2] > 0)
        fits = ks_distances(
            lam.reshape(-1, lam.shape[-1])[usable],
            *(a[usable] for a in ratios),
            margin=margin,
            zero_tol=zero_tol,
        )
        for name in _FIELDS:
            values = np.full(usable.size, np.nan)
            values[usable] = fits[name]
            out[name][outer] = values.reshape(inner_shape)
    coords = {d: eig[d] for d in dims if d in eig.coords}
    lower, upper = bulk_edges(
        np.where(np.isfinite(dv), dv, 1.0), np.where(np.isfinite(gv), gv, 1.0)
    )
    atom = bulk_atom(np.where(np.isfinite(dv), dv, 1.0), np.where(np.isfinite(gv), gv, 1.0))

    def da(values: np.ndarray, long_name: str, units: str = "units of S") -> xr.DataArray:
        return xr.DataArray(
            values, dims=dims, coords=coords, attrs={"long_name": long_name, "units": units}
        )

    return xr.Dataset(
        {
            "bulk_ks": da(out["ks"], "KS distance of the bulk from kappa MP_delta ⊠ MP_gamma", "1"),
            "bulk_n_outliers": da(out["n_outliers"], "eigenvalues above the edge margin", "count"),
            "bulk_zero_fraction": da(out["zero_fraction"], "fraction of zero eigenvalues", "1"),
            "bulk_lower_edge_emp": da(out["lower_edge"], "smallest non-zero eigenvalue"),
            "bulk_upper_edge_emp": da(out["upper_edge"], "largest bulk eigenvalue"),
            "bulk_lower_edge_th": da(kv * np.asarray(lower), "kappa * theory lower edge"),
            "bulk_upper_edge_th": da(kv * np.asarray(upper), "kappa * theory upper edge"),
            "bulk_atom_th": da(np.broadcast_to(np.asarray(atom), shape).copy(), "theory atom", "1"),
        },
        attrs={"outlier_margin": margin, "zero_tol": zero_tol},
    )


__all__ = [
    "DEFAULT_ZERO_TOL",
    "bulk_fit",
    "ks_distance",
    "ks_distances",
]
