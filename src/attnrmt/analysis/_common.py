"""Shared helpers of the analysis stage: axis names, effective ratios, bootstrap.

Everything here is a small pure function over xarray/numpy objects shaped like the data
contract of ``cells.zarr`` / ``theory.zarr`` (``docs/data-contract.md``).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import pandas as pd
import xarray as xr


def effective_ratios(cells: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    """Realised ratios ``d/V`` and ``d/N`` of ``cells`` (docs/model.md, "Sizes and ratios"),
    nominal ``delta``, ``gamma`` where ``V``, ``N`` are absent. O(cells)."""
    d = cells["d"].astype(float)
    if "V" in cells:  # absent cells carry V = N = -1
        delta = d / cells["V"].where(cells["V"] > 0)
    else:
        delta = cells["delta"].astype(float)
    gamma = d / cells["N"].where(cells["N"] > 0) if "N" in cells else cells["gamma"].astype(float)
    return delta, gamma


def replicate_mean_sem(da: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """Replicate mean, standard error (``std(ddof=1) / sqrt(n)``, NaN below two replicates,
    without numpy's warning) and count of ``da`` over ``replicate``, NaN replicates skipped;
    without that dim ``da`` is its own mean (NaN error, count 1). O(size of ``da``)."""
    if "replicate" not in da.dims:
        return da, xr.full_like(da, np.nan, dtype=float), xr.ones_like(da, dtype=int)
    n = da.notnull().sum("replicate")
    mean = da.mean("replicate", skipna=True)
    with warnings.catch_warnings():  # < 2 replicates: NaN, masked just below
        warnings.filterwarnings("ignore", "Degrees of freedom <= 0", RuntimeWarning)
        sem = da.std("replicate", ddof=1, skipna=True) / np.sqrt(n.where(n > 1))
    return mean, sem.where(n > 1), n


def drop_variant(da: xr.DataArray) -> xr.DataArray:
    """``da`` without a ``variant`` dimension (first variant; for variant-free quantities)."""
    return da.isel(variant=0, drop=True) if "variant" in da.dims else da


def signal_index(cells: xr.Dataset, *, population: bool = False) -> xr.DataArray:
    """Index ``k`` (without the ``k`` dim) of the top-k eigenvector that carries the signal
    spike (docs/model.md, "Spikes"): 0 for centred cells; for uncentred ones (the mean
    spike may outrank the signal) the largest squared overlap with ``Dlt`` (sample) or
    ``u`` (population). O(cells)."""
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


def setting_rng(seed: int, setting: Mapping[str, Any]) -> np.random.Generator:
    """The bootstrap generator of one setting (a curve, a grid point), seeded by ``seed`` and
    the SHA-256 of the setting's canonical JSON, so its resamples do not depend on its place
    in the grid (docs/data-contract.md, "Seeds of the analysis"). O(len(setting))."""
    text = json.dumps({str(k): setting[k] for k in sorted(setting)}, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).digest()
    words = np.frombuffer(digest[:16], dtype="<u4").tolist()
    return np.random.default_rng([int(seed), *words])


def mean_ci(
    values: np.ndarray, *, level: float, n_boot: int, seed: int
) -> tuple[float, float, float]:
    """Mean and studentized-bootstrap (bootstrap-t) CI of the finite ``values`` at
    ``level`` (docs/thresholds.md, "Other analyses", with its coverage against percentile
    and BCa intervals).

    Resample the replicates ``n_boot`` times (generator from ``seed``), form ``t* = (mean*
    - mean) / se*`` (``se`` with ``ddof=1``; resamples with ``se* = 0`` left out) and
    return ``(mean, mean - q_hi(t*) se, mean - q_lo(t*) se)`` (Efron & Tibshirani 1993,
    ch. 12.5). Two values: the Student-t interval ``mean +- t_1 se``; one value:
    ``low == high == mean``; none: NaN. O(n_boot x n) time and memory.
    """
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (np.nan, np.nan, np.nan)
    mean = float(x.mean())
    if x.size == 1:
        return (mean, mean, mean)
    se = float(x.std(ddof=1)) / np.sqrt(x.size)
    tail = (1.0 - level) / 2.0
    if x.size == 2 or se == 0.0:
        from scipy.stats import t as student_t

        half = float(student_t.ppf(1.0 - tail, x.size - 1)) * se
        return (mean, mean - half, mean + half)
    resampled = x[np.random.default_rng(seed).integers(0, x.size, size=(n_boot, x.size))]
    se_star = resampled.std(axis=1, ddof=1) / np.sqrt(x.size)
    usable = se_star > 0.0
    t_star = (resampled.mean(axis=1)[usable] - mean) / se_star[usable]
    if t_star.size == 0:
        return (mean, np.nan, np.nan)
    q_low, q_high = np.quantile(t_star, [tail, 1.0 - tail])
    return (mean, float(mean - q_high * se), float(mean - q_low * se))


def ranked_names(values: pd.Series) -> str:
    """The index names of ``values`` by decreasing value, ``>``-joined; ties (and NaN, last)
    by name, so the config's order of the models does not show. O(n log n)."""
    frame = pd.DataFrame({"value": values.to_numpy(), "name": [str(n) for n in values.index]})
    frame = frame.sort_values(["value", "name"], ascending=[False, True], kind="stable")
    return " > ".join(frame["name"])


def tidy(ds: xr.Dataset) -> pd.DataFrame:
    """``ds`` as a frame, one row per point of its dimensions (other coordinates dropped).
    O(size)."""
    return ds.drop_vars([c for c in ds.coords if c not in ds.dims]).to_dataframe().reset_index()


def plain(value: Any) -> Any:
    """Numpy scalar -> Python scalar (for tidy tables)."""
    return value.item() if isinstance(value, np.generic) else value


#: Why the bulk analyses skip a ``spectrum: top`` sweep (bulk.csv, analysis.zarr attrs).
BULK_SKIPPED_NOTE = (
    "bulk fit skipped: a spectrum: top sweep stores only the 2 top_k largest eigenvalues "
    "of S, and the bulk law is fitted to the whole spectrum (run the sweep with "
    "spectrum: full for the bulk)"
)


def stored_spectrum(cells: xr.Dataset) -> str:
    """``"full"`` or ``"top"``: what ``eigenvalues`` of a ``cells.zarr`` holds (its
    ``spectrum`` attribute, else inferred: a top sweep stores at most ``2 top_k`` finite
    eigenvalues per cell). O(cells x eig)."""
    if "spectrum" in cells.attrs:
        return str(cells.attrs["spectrum"])
    # numpy's ufunc stubs return ndarray; on a DataArray the ufunc returns a DataArray.
    finite = cast(xr.DataArray, np.isfinite(cells["eigenvalues"])).sum("eig")
    top_k = cells.sizes.get("k", 1)
    stored = int(finite.max()) if finite.size else 0
    return "top" if 0 < stored <= 2 * top_k < int(np.max(cells["d"].values)) else "full"
