"""Centring: the uncentred mean spike and what centring changes (docs/model.md, "Spikes",
"Uncentred mean spike", "What the pipeline tests")."""

from __future__ import annotations

import pandas as pd
import xarray as xr

from attnrmt.analysis._common import drop_variant, tidy
from attnrmt.contract import ALL_AXES


def centring_table(sweep: str, cells: xr.Dataset, theory: xr.Dataset) -> pd.DataFrame:
    """Centred versus uncentred cells at every other grid point (docs/model.md, "Uncentred
    mean spike"): the uncentred top eigenvalue and overlaps against the mean-spike theory of
    the completed ``theory``, the signal's overlap and index ``k`` with and without
    centring, and the fraction of replicates whose top eigenvector is closer to ``mbar``
    than to ``u`` (columns: docs/data-contract.md, "Tables"). Empty unless both kinds of
    cells exist. O(cells)."""
    if "centered" not in cells.dims or cells.sizes["centered"] < 2:
        return pd.DataFrame()
    cen = cells.sel(centered=True, drop=True)
    unc = cells.sel(centered=False, drop=True)

    def top(part: xr.Dataset, name: str) -> xr.DataArray:
        return part[name].isel(k=0).mean("replicate")

    def uncentred_theory(name: str) -> xr.DataArray:
        return drop_variant(theory[name]).sel(centered=False, drop=True)

    data = xr.Dataset(
        {
            "top_eigenvalue_uncentred": top(unc, "top_eigenvalues"),
            "top_eigenvalue_centred": top(cen, "top_eigenvalues"),
            "top_overlap_table_mean_uncentred": top(unc, "overlap_table_mean"),
            "top_overlap_signal_centred": top(cen, "overlap_signal"),
            "top_overlap_signal_uncentred": top(unc, "overlap_signal"),
            "best_overlap_signal_uncentred": unc["overlap_signal"].max("k").mean("replicate"),
            "signal_k_uncentred": unc["overlap_signal"].fillna(-1).argmax("k").median("replicate"),
            "top_is_mean_fraction": (
                unc["overlap_table_mean"].isel(k=0) > unc["overlap_signal"].isel(k=0)
            ).mean("replicate"),
            "mean_spike_theory": uncentred_theory("mean_spike_outlier"),
            "mean_spike_overlap_theory": uncentred_theory("mean_spike_overlap"),
        }
    )
    frame = tidy(data)
    frame.insert(0, "sweep", sweep)
    cols = [
        "sweep",
        *[a for a in ALL_AXES if a in frame],
        *[c for c in frame if c not in ALL_AXES and c != "sweep"],
    ]
    return frame.loc[:, cols]
