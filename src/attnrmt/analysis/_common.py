"""Shared helpers of the analysis stage: axis names, effective ratios, bootstrap.

Everything here is a small pure function over xarray/numpy objects shaped like the data
contract of ``cells.zarr`` / ``theory.zarr`` (``docs/architecture.md``, spec pipeline.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import xarray as xr

from attnrmt.contract import AXES


def present_axes(ds: xr.Dataset | xr.DataArray, axes: Sequence[str] = AXES) -> list[str]:
    """The axes of ``axes`` that are dimensions of ``ds`` (in contract order)."""
    return [a for a in axes if a in ds.dims]


def effective_ratios(cells: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    """Realised ratios ``d/V`` and ``d/N`` (spec §1.1), falling back to nominal values.

    Parameters
    ----------
    cells : xarray.Dataset
        A ``cells.zarr`` dataset (``V`` and ``N`` variables when present).

    Returns
    -------
    delta_eff, gamma_eff : xarray.DataArray
    """
    d = cells["d"].astype(float)
    if "V" in cells:  # absent cells carry V = N = -1
        delta = d / cells["V"].where(cells["V"] > 0)
    else:
        delta = cells["delta"].astype(float)
    gamma = d / cells["N"].where(cells["N"] > 0) if "N" in cells else cells["gamma"].astype(float)
    return delta, gamma


def drop_variant(da: xr.DataArray) -> xr.DataArray:
    """``da`` without a ``variant`` dimension (first variant; for variant-free quantities)."""
    return da.isel(variant=0, drop=True) if "variant" in da.dims else da


def signal_index(cells: xr.Dataset, *, population: bool = False) -> xr.DataArray:
    """Index ``k`` of the top-k eigenvector that carries the signal spike.

    Centred cells: ``k = 0`` (the largest eigenvalue; spec §5). Uncentred cells: the mean
    spike along ``mbar`` may outrank the signal (spec §5), so the signal eigenvector is the
    one with the largest squared overlap with the class-mean difference ``Dlt`` (sample)
    or with ``u`` (population; only that overlap is stored).

    Returns
    -------
    xarray.DataArray of int
        Without the ``k`` dimension.
    """
    name = "pop_overlap_signal" if population else "overlap_class_mean"
    if name not in cells:
        name = "overlap_signal"
    overlaps = cells[name].fillna(-1.0)
    best = overlaps.argmax("k")
    if "centered" in cells.dims or "centered" in cells.coords:
        centred = cells["centered"].astype(bool)
        best = xr.where(centred, 0, best)
    return best


def at_signal(cells: xr.Dataset, name: str, *, population: bool = False) -> xr.DataArray:
    """Variable ``name`` (with a ``k`` dim) at the signal index of :func:`signal_index`."""
    return cells[name].isel(k=signal_index(cells, population=population))


def bootstrap_indices(
    n: int, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """``(n_boot, n)`` resampling indices (with replacement) over ``n`` replicates."""
    return rng.integers(0, n, size=(n_boot, n))


def mean_ci(
    values: np.ndarray, *, level: float = 0.95, n_boot: int = 400, seed: int = 0
) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap CI of finite ``values`` (NaN-safe).

    Parameters
    ----------
    values : array_like
        Replicate measurements (NaN entries are dropped).
    level : float
        Confidence level.
    n_boot : int
        Bootstrap resamples.
    seed : int
        Seed of the resampling generator (results are reproducible).

    Returns
    -------
    mean, low, high : float
        NaN when there is no finite value; ``low == high == mean`` with one value.
    """
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (np.nan, np.nan, np.nan)
    mean = float(x.mean())
    if x.size == 1:
        return (mean, mean, mean)
    rng = np.random.default_rng(seed)
    boots = x[bootstrap_indices(x.size, n_boot, rng)].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(boots, [tail, 1.0 - tail])
    return (mean, float(low), float(high))


def coord_records(da: xr.DataArray | xr.Dataset, dims: Sequence[Hashable]) -> list[dict]:
    """One dict of coordinate values per point of the product of ``dims``."""
    import itertools

    values = [np.asarray(da[dim].values) for dim in dims]
    return [
        {str(dim): plain(v) for dim, v in zip(dims, combo, strict=True)}
        for combo in itertools.product(*values)
    ]


def plain(value: object) -> object:
    """Numpy scalar -> Python scalar (for tidy tables)."""
    return value.item() if isinstance(value, np.generic) else value


#: Why the bulk analyses skip a ``spectrum: top`` sweep (bulk.csv, analysis.zarr attrs).
BULK_SKIPPED_NOTE = (
    "bulk fit skipped: a spectrum: top sweep stores only the 2 top_k largest eigenvalues "
    "of S, and the bulk law is fitted to the whole spectrum (run the sweep with "
    "spectrum: full for the bulk)"
)


def stored_spectrum(cells: xr.Dataset) -> str:
    """``"full"`` or ``"top"``: what ``eigenvalues`` of a ``cells.zarr`` holds.

    The store's ``spectrum`` attribute when it has one; otherwise inferred: a top sweep
    stores at most ``2 top_k`` finite eigenvalues per cell although its largest ``d`` is
    larger (with ``d <= 2 top_k`` both routes store all ``d`` and are the same). O(cells x
    eig) time.
    """
    if "spectrum" in cells.attrs:
        return str(cells.attrs["spectrum"])
    eigenvalues = cells["eigenvalues"]
    finite = np.isfinite(eigenvalues).sum("eig")
    top_k = cells.sizes.get("k", 1)
    stored = int(finite.max()) if finite.size else 0
    return "top" if 0 < stored <= 2 * top_k < int(np.max(cells["d"].values)) else "full"
